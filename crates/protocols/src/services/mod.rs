//! Protocols built around per-DC **service nodes** (the topology's
//! `services`, [`causeway_core::NodeRole::Service`]) besides the partition
//! servers: EunomiaKV's stabilizer and receiver, and the sequencer
//! baseline it replaces, S-Seq, with its receiver (Gunawardhana, Bravo,
//! Rodrigues, "Unobtrusive Deferred Update Stabilization for Efficient
//! Geo-Replication", USENIX ATC 2017).

pub mod apply_rounds;
pub mod eunomia_kv;
pub mod sequencer;
pub mod vector_client;
