//! # Eventual consistency with last-writer-wins
//!
//! The baseline of Roohitavaf (DKVF's "Eventual", 95 lines of server) and of
//! Gunawardhana et al. (Riak-style): a PUT is timestamped with the local physical clock,
//! applied, acknowledged, and replicated asynchronously to every other DC
//! storing the key; a replicated version is visible the moment it arrives.
//! Every replica keeps the version with the highest ⟨ts, dc⟩, so replicas
//! converge, but nothing orders a version after the versions it depends on:
//! a remote reader can see an album entry before the photo it points to.
//!
//! A ROT here is a parallel multi-get with no snapshot, a WOT a set of
//! parallel puts applied and replicated one by one (one request per server,
//! `PutBatch` when a server gets several: Cassandra's non-atomic
//! `batch_mutate` split by a client library, Lloyd §7.3.1; several columns
//! of one row — locations `row:family:column`, placed with their row, each
//! a last-writer-wins key as each Cassandra column has its own timestamp —
//! written by one batch are replicated in one `ReplicateRow`, as Cassandra
//! ships a row's mutation), and a read-write
//! transaction the one then the other, offered so that the baseline runs the
//! same workloads; they promise nothing. A reader can see
//! part of such a WOT, which makes the baseline the checker's standing proof
//! that fractured reads are caught.

mod client;
mod config;
mod msg;
mod server;
#[cfg(test)]
mod tests;

pub use client::*;
pub use config::*;
pub use msg::*;
pub use server::*;

use causeway_core::{Faults, LivenessEnv, OpKind, Protocol};

pub struct Eventual;

impl Protocol for Eventual {
    const NAME: &'static str = "eventual";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put, OpKind::Rot, OpKind::Wot, OpKind::Batch, OpKind::Txn];
    const CAUSAL: bool = false;
    /// Every write is local and last-writer-wins needs no clock property
    /// for eventual consistency; a restart recovers `last_ts` from the store.
    const TOLERATES: Faults = Faults::ALL;
    const AVAILABLE_UNDER_PARTITIONS: bool = true;
    crate::kit::protocol_parts!(EventualServer, EventualClient);

    /// Every operation is answered by servers of the client's own DC
    /// without waiting for anything.
    fn liveness_bound_us(_cfg: &Config, env: &LivenessEnv) -> u64 {
        10_000 + 8 * env.intra_dc_rtt_us
    }
}
