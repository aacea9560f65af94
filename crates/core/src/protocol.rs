//! The protocol interface: a server half and a client half, both pure state
//! machines driven through an environment.
//!
//! A server reacts to three inputs — a client request ([`Server::on_client`]),
//! a message from another node ([`Server::on_peer`]), a timer it set
//! ([`Server::on_timer`]) — and acts only through its [`ServerEnv`]. A client
//! turns one user [`Op`] into rounds of messages and finishes it with
//! [`ClientEnv::complete`]. Neither may touch sockets, threads, the wall clock
//! or a global random source, so the simulator and the network runtime drive
//! the same code, and the simulator replays it exactly.
//!
//! ## Interface decisions (compared with quinn-proto and etcd's raft)
//!
//! Both keep the algorithm apart from I/O, as this interface does; they
//! differ in four details, decided here for Causeway:
//!
//! - **Timers** stay a `u64` token at this boundary: runtimes only store and
//!   return it. A protocol with more than one timer names them with its own
//!   enum and maps it to and from the token in one place (GentleRain's
//!   `Timer { Heartbeat, Stabilize, PutWait(id) }`), so no handler does
//!   arithmetic on tokens. An associated `Timer` type would have given every
//!   runtime a third type parameter for what is, to them, an opaque number.
//! - **One message type** per protocol, not separate request, reply and peer
//!   types: one codec and one bound for every runtime. The direction is not
//!   hand-kept: `impl_message!` in `causeway-protocols` derives
//!   [`Message::is_client`] and the kind from lists of variants.
//! - **No outbox to poll.** quinn-proto's `poll_transmit` lets its caller pull
//!   packets; here the environment *is* the outbox: both runtimes buffer what
//!   a handler sends and act on it after the handler returns (the simulator
//!   schedules deliveries, the network runtime logs the turn and then
//!   releases it). Polling would move the same buffer into every protocol.
//! - **Persist before send** is the runtimes' rule, stated on
//!   [`ServerEnv::send`] and [`ServerEnv::reply`], where a protocol author
//!   reads it: a handler writes its store first and sends second, and may
//!   rely on every store change of a turn being durable before any message
//!   of that turn leaves the node.

use crate::data::{Key, Value};
use crate::ids::{ClientId, DcId, NodeId};
use crate::store::{MvStore, Versioned};
use crate::topology::{NodeRole, Topology};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::sync::Arc;
use thiserror::Error;

/// A protocol's message: every client request, reply and peer message of the
/// protocol is one variant of one enum, so one codec carries them all.
pub trait Message: Clone + Debug + Serialize + DeserializeOwned + Send + 'static {
    /// A short static name for per-kind message and byte counts ("replicate",
    /// "heartbeat", "get_req").
    fn kind(&self) -> &'static str;
    /// Whether this message is client traffic (request or reply) rather than
    /// traffic between servers. Runtimes use it for accounting, and refuse
    /// non-client messages arriving on client connections.
    fn is_client(&self) -> bool;
    /// The longest key and the longest value this message carries, so a
    /// runtime can enforce its size limits at the edge without knowing the
    /// protocol. Requests carrying user keys or values must override it.
    fn max_key_value_len(&self) -> (usize, usize) {
        (0, 0)
    }
    /// Bytes of user keys and values this message carries. The rest of its
    /// wire size is the protocol's metadata, which the benchmarks report per
    /// message. No default: a wrong answer would silently skew that figure.
    fn payload_bytes(&self) -> usize;
    /// Whether this is a periodic summary (a heartbeat, a stable-time
    /// report) that a later message of the same [`kind`](Message::kind) to
    /// the same node supersedes. The network runtime neither journals nor
    /// sequences such messages and keeps only the newest per kind for a
    /// peer that is away, so an unreachable DC costs no memory or disk for
    /// them. Only valid when the receiver's handling is monotone (the newest
    /// implies everything the older ones said) and the protocol sends them
    /// again on a timer (one may be lost on a reconnect or a crash). The
    /// runtime still delivers it after every message sent before it.
    fn ephemeral(&self) -> bool {
        false
    }
}

/// Size of a message in the compact binary codec the network runtime uses
/// (postcard), so simulated byte counts match the wire.
pub fn wire_size<M: Serialize>(m: &M) -> usize {
    postcard::experimental::serialized_size(m).unwrap_or(0)
}

/// The kinds of user operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Get,
    Put,
    /// Read-only transaction over a set of keys.
    Rot,
    /// Write-only transaction: several puts made visible atomically.
    Wot,
    /// Read-write transaction: reads from one snapshot, then atomic writes.
    Txn,
}

impl OpKind {
    pub const ALL: [OpKind; 5] = [OpKind::Get, OpKind::Put, OpKind::Rot, OpKind::Wot, OpKind::Txn];
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Get => "get",
            OpKind::Put => "put",
            OpKind::Rot => "rot",
            OpKind::Wot => "wot",
            OpKind::Txn => "txn",
        }
    }
}

/// One user operation on a session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Get {
        key: Key,
    },
    Put {
        key: Key,
        value: Value,
    },
    /// Read the keys as one causally consistent snapshot (where the protocol
    /// promises that). Keys are distinct.
    Rot {
        keys: Vec<Key>,
    },
    /// Write every pair as one transaction: a reader sees all of its writes
    /// or none of them (atomic visibility, seed 001's Eiger write-only
    /// transactions), and the transaction is one event of the causal order.
    /// Keys are distinct.
    Wot {
        writes: Vec<(Key, Value)>,
    },
    /// A read-write transaction in the shape seed 003 (PaRiS) evaluates: all
    /// reads from one causal snapshot, in parallel, then all writes, in
    /// parallel and atomically visible, the transaction being one event of
    /// the causal order. Reads do not see the transaction's own writes (they
    /// come first). Keys are distinct within `reads` and within `writes`; a
    /// key may be in both (read-modify-write).
    Txn {
        reads: Vec<Key>,
        writes: Vec<(Key, Value)>,
    },
}

impl Op {
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Get { .. } => OpKind::Get,
            Op::Put { .. } => OpKind::Put,
            Op::Rot { .. } => OpKind::Rot,
            Op::Wot { .. } => OpKind::Wot,
            Op::Txn { .. } => OpKind::Txn,
        }
    }

    /// The keys the operation reads, in request order.
    pub fn reads(&self) -> Vec<&Key> {
        match self {
            Op::Get { key } => vec![key],
            Op::Rot { keys } | Op::Txn { reads: keys, .. } => keys.iter().collect(),
            Op::Put { .. } | Op::Wot { .. } => Vec::new(),
        }
    }

    /// The (key, value) pairs the operation writes, in request order.
    pub fn writes(&self) -> Vec<(&Key, &Value)> {
        match self {
            Op::Put { key, value } => vec![(key, value)],
            Op::Wot { writes } | Op::Txn { writes, .. } => writes.iter().map(|(k, v)| (k, v)).collect(),
            Op::Get { .. } | Op::Rot { .. } => Vec::new(),
        }
    }
}

/// The outcome of an [`Op`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpResult {
    /// The value read; `None` when the key has no visible version.
    Get(Option<Value>),
    Put,
    /// One entry per requested key, in request order.
    Rot(Vec<Option<Value>>),
    /// Every write of the transaction was applied.
    Wot,
    /// A read-write transaction committed: the values read, one per read
    /// key in request order (its writes were applied).
    Txn(Vec<Option<Value>>),
    Failed(OpError),
}

#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum OpError {
    #[error("this protocol does not support {0:?} operations")]
    Unsupported(OpKind),
    #[error("the key's partition has no replica reachable from this client's DC")]
    NoReplica,
    #[error("the operation was aborted: {0}")]
    Aborted(String),
    #[error("bad request: {0}")]
    BadRequest(String),
}

/// Something a server reports for measurement and checking. Reporting is
/// free for the protocol's logic: runtimes only record.
#[derive(Debug)]
pub enum Observation<'a> {
    /// A version of `key` holding `value` became visible to local reads at
    /// this node. At the write's origin this is reported when the write is
    /// applied (the instant its acknowledgement leaves); elsewhere when the
    /// protocol's visibility rule first admits it *and* it is the version a
    /// local GET would then return. A version that lost last-writer-wins to
    /// one already visible is never read, so it is never reported; every
    /// protocol follows this, so visibility figures compare. `origin` is the
    /// DC the write was accepted in.
    ///
    /// `written_us` is the version's timestamp in its origin's physical
    /// clock (an HLC's `l`): runtimes without true time estimate visibility
    /// latency from it, as seed 000 does (skew included).
    Visible { key: &'a Key, value: &'a Value, origin: DcId, written_us: u64 },
    /// This node's stable time (GST, the least DSV entry…) advanced to
    /// `stable_us` of the physical clock: every remote write stamped at or
    /// before it is visible here. Runtimes report the lag behind the clock.
    Stable { stable_us: u64 },
    /// A request (or replicated update) waited `waited_us` of this node's
    /// clock inside the server before it could proceed.
    Blocked { what: &'static str, waited_us: u64 },
    /// One sample of a protocol-specific quantity worth a mean and tail in
    /// reports, e.g. `deps_per_write` (the dependencies a client write
    /// carried, which seed 001 reports for COPS and COPS-GT).
    Sample { what: &'static str, value: u64 },
}

/// What a server may do. Implemented by each runtime.
pub trait ServerEnv<M, V> {
    /// This node.
    fn node(&self) -> NodeId;
    /// This node's physical clock in µs. May be skewed, drift, or jump back.
    fn now_us(&self) -> u64;
    /// Send to another node over a reliable FIFO channel.
    ///
    /// Persist before send: the message leaves the node only after every
    /// store change ([`MvStore::insert`], [`MvStore::replace`], durable
    /// metadata) made in this same turn is durable, so a peer never learns
    /// of a state this node could forget in a crash. The network runtime
    /// logs the turn, syncs, then releases its messages; the simulator's
    /// store is its log.
    fn send(&mut self, to: NodeId, msg: M);
    /// Answer a client. The same rule as [`ServerEnv::send`]: an
    /// acknowledgement never leaves before what it acknowledges is durable.
    fn reply(&mut self, to: ClientId, msg: M);
    /// Call [`Server::on_timer`] with `token` after `after_us` µs.
    fn set_timer(&mut self, after_us: u64, token: u64);
    /// This node's multi-version store.
    fn store(&mut self) -> &mut MvStore<V>;
    /// Report an observation.
    fn observe(&mut self, obs: Observation<'_>);
}

/// What a client session may do. Implemented by each runtime.
pub trait ClientEnv<M> {
    fn now_us(&self) -> u64;
    fn send(&mut self, to: NodeId, msg: M);
    /// Call [`Client::on_timer`] with `token` after `after_us` µs.
    fn set_timer(&mut self, after_us: u64, token: u64);
    /// Finish the operation in progress.
    fn complete(&mut self, result: OpResult);
}

/// The server half of a protocol, owned by one node.
pub trait Server {
    type Msg: Message;
    type Version: Versioned + Clone;
    /// Called once before any other input; set the first timers here.
    fn on_start(&mut self, _env: &mut impl ServerEnv<Self::Msg, Self::Version>) {}
    fn on_client(&mut self, env: &mut impl ServerEnv<Self::Msg, Self::Version>, from: ClientId, msg: Self::Msg);
    fn on_peer(&mut self, env: &mut impl ServerEnv<Self::Msg, Self::Version>, from: NodeId, msg: Self::Msg);
    fn on_timer(&mut self, env: &mut impl ServerEnv<Self::Msg, Self::Version>, token: u64);
}

/// The client half of a protocol: one sequential session.
pub trait Client {
    type Msg: Message;
    /// Start `op`. The runtime never invokes a second op before the first completes.
    fn invoke(&mut self, env: &mut impl ClientEnv<Self::Msg>, op: Op);
    fn on_reply(&mut self, env: &mut impl ClientEnv<Self::Msg>, from: NodeId, msg: Self::Msg);
    fn on_timer(&mut self, _env: &mut impl ClientEnv<Self::Msg>, _token: u64) {}
}

/// What a server is told about itself when it is created.
#[derive(Clone, Debug)]
pub struct NodeCtx {
    pub id: NodeId,
    pub role: NodeRole,
    pub topology: Arc<Topology>,
}

/// What a client session is told about itself.
#[derive(Clone, Debug)]
pub struct ClientCtx {
    pub id: ClientId,
    /// The DC the session is attached to (clients are sticky, seed 000 Ch. 6).
    pub dc: DcId,
    pub topology: Arc<Topology>,
}

/// A protocol: its message, version and config types and both halves.
pub trait Protocol: 'static {
    /// The name used on the command line and in reports.
    const NAME: &'static str;
    /// Operations the client half implements.
    const OPS: &'static [OpKind];
    /// Whether the protocol promises causal consistency (tests and the
    /// checker hold it to that).
    const CAUSAL: bool;
    type Msg: Message;
    type Version: Versioned + Clone + Debug + Serialize + DeserializeOwned + Send + 'static;
    /// Protocol parameters (intervals, thresholds), read from the `[protocol]`
    /// table of a scenario or cluster config. Unknown fields are errors.
    type Config: Clone + Debug + Default + Serialize + DeserializeOwned + Send + Sync + 'static;
    type Server: Server<Msg = Self::Msg, Version = Self::Version> + Send + 'static;
    type Client: Client<Msg = Self::Msg> + Send + 'static;

    /// Deliberately broken variants: names of boolean `Config` fields that
    /// each switch off a check the protocol's safety rests on. The
    /// conformance suite (`crates/sim/tests/conformance.rs`) runs every
    /// registered protocol with each of them set and fails unless its
    /// scenarios catch the breakage — the proof that those scenarios can
    /// fail at all. Empty for a protocol that promises nothing to break.
    const MUTANTS: &'static [&'static str] = &[];

    /// Check a config against a topology before any node starts.
    fn validate(_cfg: &Self::Config, _topology: &Topology) -> Result<(), String> {
        Ok(())
    }
    fn server(cfg: &Self::Config, ctx: NodeCtx) -> Self::Server;
    fn client(cfg: &Self::Config, ctx: ClientCtx) -> Self::Client;
}
