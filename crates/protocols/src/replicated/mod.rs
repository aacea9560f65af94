//! Replicated: protocols whose partition is a Raft group of
//! `topology.replicas_per_partition` nodes inside each DC, beside the
//! asynchronous replication between DCs (Roohitavaf, *Consistency for
//! Distributed Data Stores*, Ch. 4: eBay's NuKV).
//!
//! What the family shares, in [`raft_log`]: a Raft group's persisted state
//! (hard state, entries, snapshot metadata) held in the node's own store, so
//! that the node core's write-ahead log is Raft's log and a crash-restart
//! in either runtime gives Raft back exactly what it was promised.

pub mod nukv;
pub mod raft_log;
