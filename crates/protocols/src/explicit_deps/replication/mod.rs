//! # Explicit-dependency replication, shared by COPS and COPS-GT
//!
//! Lloyd, *Stronger Semantics for Low-Latency Geo-Replicated Storage*
//! (PhD dissertation, 2013), §2.5–§2.7: a write is stamped with a Lamport
//! timestamp at its key's server in the accepting DC, shipped to the key's
//! *equivalent* servers in the other DCs, and committed there only once each
//! dependency it names has been committed in that DC (`dep_check`). This
//! folder is that replication path, generic over the variant's version and
//! message types; [`cops`](crate::cops) and [`cops_gt`](crate::cops_gt) add
//! their clients, reads and (for COPS-GT) transactions and garbage collection.
//!
//! One owner, [`DepNode`], holds the path's state and answers its messages:
//! - [`dep_check`]: the Lamport clock, the per-origin queues of replicated
//!   writes waiting for their dependencies, the checks sent and answered,
//!   durability and recovery;
//! - [`settle`]: which writes are committed in every DC (§6.1's
//!   never-depend), a part of [`DepNode`] that knows nothing of it;
//! - [`msg`]: stamps, dependencies and the [`PathMsg`] messages.

pub mod dep_check;
pub mod msg;
pub mod settle;

pub use dep_check::{DepNode, PathConfig, Ready};
pub use msg::{Dep, DepVersion, PathMsg, Stamp, validate_topology};
pub use settle::Settle;
