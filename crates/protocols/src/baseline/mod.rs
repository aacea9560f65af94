//! Baselines: protocols that promise no causal order, kept to measure what
//! causality costs and to prove that the checker catches what they allow.

pub mod eventual;
