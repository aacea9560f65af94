//! The explicit-dependency family: a write carries the writes it depends
//! on, and a replicated write commits at a remote DC only once its
//! dependencies have (`dep_check`; Lloyd, *Stronger Semantics for
//! Low-Latency Geo-Replicated Storage*, §2). COPS, COPS-GT and Eiger share the
//! [`replication`] path. CC-LO (the COPS-SNOW design) runs its own combined
//! dependency and readers check ([`cc_lo`]).

pub mod cc_lo;
pub mod cops;
pub mod cops_gt;
pub mod eiger;
pub mod replication;
