//! The transactional family: causally consistent read-write transactions
//! committed by two-phase commit over a partially replicated store — PaRiS
//! and its blocking baseline BPR (Spirovska et al.), which share one
//! implementation.

pub mod paris;
