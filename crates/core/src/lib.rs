//! # causeway-core
//!
//! The model every Causeway protocol and runtime shares: identifiers, the
//! topology (M DCs × N partitions, full or partial replication, Raft groups,
//! per-DC services), physical clock models and the hybrid logical clock,
//! timestamp vectors and dependency sets, the multi-version store, histories,
//! and the protocol interface itself.
//!
//! It is not a runtime: nothing here sends a byte, starts a thread or reads a
//! clock. The simulator (`causeway-sim`) and the network runtime drive
//! protocols through [`ServerEnv`] and [`ClientEnv`].
//!
//! ## How each protocol family maps onto the interface
//!
//! The interface was checked against every protocol of the catalogue
//! (`docs/architecture.md`, built or not) before it was frozen:
//!
//! - **Stabilization protocols** (GentleRain, CausalSpartanX, Cure,
//!   Contrarian): partition servers replicate to their equivalents
//!   ([`Topology::equivalents`]) with [`ServerEnv::send`], exchange heartbeats
//!   and stable vectors on [`ServerEnv::set_timer`] timers, and report
//!   [`Observation::Visible`] when the stable time first admits a remote
//!   version. A blocking PUT (GentleRain waiting for its clock to pass the
//!   client's dependency time) parks the request and sets a timer for the
//!   remaining skew, reporting [`Observation::Blocked`] when it proceeds.
//! - **COPS-GT**: `read_trans` is client state — the client half sends the
//!   first round to every partition, computes `ccv` and sends the second round
//!   of `get_by_version` with explicit versions, then completes. `dep_check`
//!   is a peer message that the owning server parks until the dependency is
//!   committed. A replicated write waits for its checks *in the store*, as a
//!   pending version switched to committed with [`MvStore::replace`]
//!   (journaled, so a crash cannot lose it), and the per-origin table of
//!   what is committed is the store's durable metadata
//!   ([`MvStore::set_meta`]). Old versions are kept for `trans_time` with
//!   [`MvStore::gc_key`] and a timer; a reply that finds its version gone
//!   makes the client restart the transaction.
//! - **Eiger**: a ROT or WOT coordinator is simply the partition server the
//!   client picked; pending write transactions are protocol state, and
//!   2PC-PCI rounds are peer messages. Logical time is an [`Hlc`] or a Lamport
//!   counter in server state.
//! - **EunomiaKV and the sequencer**: the Eunomia stabilizer, its receiver and
//!   the sequencer are service nodes ([`crate::topology::ServiceSpec`],
//!   [`NodeRole::Service`]) running the same [`Server`] trait; partitions
//!   address them through [`Topology::service_nodes`]. Replicated Eunomia is
//!   `per_dc > 1` instances.
//! - **PaRiS and BPR**: partial replication is
//!   [`crate::topology::Replication::Partial`]; a coordinator sends read slices
//!   to a replica in another DC ([`Topology::serving_dc`]). Interactive
//!   transactions and the client write cache are client-half state; the
//!   operation set will grow transactional [`Op`] variants when PaRiS lands.
//! - **NuKV**: a partition is a Raft group of `replicas_per_partition` nodes
//!   inside each DC ([`Topology::replicas`]); the Raft algorithm is a pure
//!   state machine driven by the same peer messages and timers, the XC
//!   forwarder is a service node, and session levels travel in the
//!   protocol's request messages (as the vectors and dependency time each
//!   level asks for; the level itself is the session's config until an
//!   [`Op`] can carry one).
//!
//! ## Time
//!
//! Protocols see `now_us` of their node's physical clock, which the simulator
//! skews with a [`ClockModel`]. An [`Hlc`] is ⟨l, c⟩ ordered lexicographically.
//! Ties between versions break on a DC or node id so that last-writer-wins is
//! a total order.

pub mod clock;
pub mod column;
pub mod data;
pub mod history;
pub mod ids;
pub mod levels;
pub mod node;
pub mod protocol;
pub mod store;
pub mod store_key;
pub mod summary;
pub mod topology;
pub mod txn;
pub mod vector;

pub use clock::{ClockJump, ClockModel, Hlc, HlcVec, TimeVec};
pub use data::{
    COPY_SHORT_MAX_BYTES, Key, Value, copy_if_short, is_tombstone, stable_hash, tagged_value, tombstone, visible,
    write_id_of,
};
pub use history::{History, OpRecord};
pub use ids::{ClientId, DcId, NodeId, PartitionId};
pub use levels::{Levels, ReadLevel, WriteLevel};
pub use node::{
    Appended, Durable, Host, Input as NodeInput, Node, NodeOptions, Output, OwnedRecord, Ready, Record, Seq, Stepped,
};
pub use protocol::{
    CheckingGroupError, Client, ClientCtx, ClientEnv, Faults, LivenessEnv, Message, NodeCtx, Observation, Op, OpError,
    OpKind, OpResult, Protocol, Server, ServerEnv, wire_size,
};
pub use store::{FreezeBuffers, FreezeEncoder, Frozen, Inserted, KeyIndex, Landed, MvStore, SnapshotFloor, Versioned};
pub use topology::{NodeRole, RemoteReplica, Replication, ServiceSpec, Topology, TopologyError, TopologySpec};
pub use txn::TxnBuffer;
pub use vector::{DepSet, vleq, vmax, vmin, vmin_entry};

/// The version of the binary encoding of what a node writes to its log
/// and snapshots (postcard over the protocols' serde types). A node records
/// it in its directory's identity file and refuses a directory of another
/// format, naming both. Bump it with any change to a stored encoding (and
/// bump [`WIRE_FORMAT`] with it: messages carry the same types).
///
/// - 1: every type as `#[derive]` writes it (implicit: no field recorded).
/// - 2: an [`Hlc`] is a byte string, `l` fixed-width (see its `Serialize`).
/// - 3: a COPS-GT version records its cut (its deviation 8).
/// - 4: a [`DepSet`] is one byte string (see its `Serialize`), and so are
///   Contrarian's dependency vectors ([`clock::hlcs`]): both protocols' stored
///   versions.
pub const DATA_FORMAT: u32 = 4;

/// The version of the encoding of what nodes and clients send each other.
/// Hellos carry it, and a node refuses a peer or client of another wire
/// format, naming both, rather than misreading its messages. Bump it with
/// any change to a message's encoding; a change to messages alone leaves
/// [`DATA_FORMAT`], so directories written before it still open.
///
/// - 1, 2: as [`DATA_FORMAT`] 1 and 2.
/// - 3: CC-LO's read replies say whether a version is settled, its
///   servers exchange settling messages (its deviation 10), and its GETs
///   have messages of their own.
/// - 4: as [`DATA_FORMAT`] 3; COPS-GT's reads, writes and checkpoint
///   gossip carry cuts and checkpoints (its deviation 8).
/// - 5: as [`DATA_FORMAT`] 4; CausalSpartanX's and Contrarian's vectors are
///   one byte string each ([`clock::hlcs`]).
pub const WIRE_FORMAT: u32 = 5;
