//! Adaptive causal consistency: protocols whose dependency tracking and
//! checking are not fixed by the design but configured per deployment.
//!
//! Every other family fixes *which servers a version's timestamp speaks
//! for* and *which servers a server consults before making a version
//! visible*: GentleRain tracks per system and checks per replica,
//! CausalSpartanX per replica and per replica, COPS per key and per
//! replica (Roohitavaf, "Consistency for Distributed Data Stores", PhD
//! thesis, 2019, Table 7.1). The protocols here take both as inputs — a
//! tracking grouping T and a checking grouping C over the servers — so one
//! implementation covers those rows and the groupings between them (the
//! thesis's 2×2 and 4×1 organisations of §7), which is why they get a
//! family of their own rather than a place in `stabilization/` (whose
//! protocols all check a DC-wide stable time) or `explicit_deps/`.
//!
//! - [`accf`]: the Adaptive Causal Consistency Framework (Roohitavaf Ch. 7,
//!   Alg 7.1 and 7.2).

pub mod accf;
