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
    /// Whether this is a client request that changes what the store holds
    /// (a put, a delete, a transaction's writes). The network runtime
    /// refuses it from a session whose token only grants reading. No
    /// default: a protocol that forgot to say would let read-only clients
    /// write.
    fn is_write(&self) -> bool;
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
    /// Whether this peer message may be lost without harm: a request whose
    /// sender copes with never hearing back (a read forwarded within a DC
    /// that the client's deadline and the receiver's own expiry already
    /// cover). The network runtime sends it at most once, neither journals
    /// nor sequences it nor resends it after a reconnect or a crash, and
    /// the simulator drops it at a cut or a crashed receiver. It is still
    /// delivered after every sequenced message sent before it on its link,
    /// never before. Journaling a read forward that nobody would resend
    /// after a crash costs a log write and an acknowledgement per hop for
    /// nothing.
    fn transient(&self) -> bool {
        false
    }
    /// The store key the receiver of this message looks up first, if it
    /// names one (a GET's or a PUT's key, a replicated write's). Only a
    /// hint: the network runtime looks up the keys of a whole batch of
    /// messages before handling any of them
    /// ([`crate::MvStore::warm`]), so that their cache misses overlap rather
    /// than each stalling its request in turn. A wrong answer costs time,
    /// never correctness.
    fn key_hint(&self) -> Option<&[u8]> {
        None
    }
    /// How many updates this message carries for its receiver to handle
    /// one by one: a batch of reports or shipped updates counts each. The
    /// simulator charges `[cpu.item_us]` per item on top of the message's
    /// own cost, so that a batch's handling grows with its size
    /// (Gunawardhana et al., ATC 2017, §5: batching amortizes a message's
    /// fixed cost over its updates, never their own).
    fn items(&self) -> usize {
        1
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
    /// Non-atomic batch: several puts issued in parallel, each its own write.
    Batch,
    /// Read-write transaction: reads from one snapshot, then atomic writes.
    Txn,
    /// Commutative add to a counter column (Eiger's column-family model).
    Add,
    /// A range of one row's columns in one family (Eiger's column-family model).
    Slice,
    /// The steps of an interactive transaction ([`Op::Begin`],
    /// [`Op::TxRead`], [`Op::Commit`], [`Op::Abort`]). A protocol offering
    /// this kind offers all four; a history records the whole transaction
    /// as one [`Op::Txn`] ([`crate::txn::TxnBuffer`]).
    Interactive,
}

impl OpKind {
    pub const ALL: [OpKind; 9] = [
        OpKind::Get,
        OpKind::Put,
        OpKind::Rot,
        OpKind::Wot,
        OpKind::Batch,
        OpKind::Txn,
        OpKind::Add,
        OpKind::Slice,
        OpKind::Interactive,
    ];
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Get => "get",
            OpKind::Put => "put",
            OpKind::Rot => "rot",
            OpKind::Wot => "wot",
            OpKind::Batch => "batch",
            OpKind::Txn => "txn",
            OpKind::Add => "add",
            OpKind::Slice => "slice",
            OpKind::Interactive => "interactive",
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
    /// or none of them (atomic visibility, Lloyd's Eiger write-only
    /// transactions), and the transaction is one event of the causal order.
    /// Keys are distinct.
    Wot {
        writes: Vec<(Key, Value)>,
    },
    /// Write every pair as its own write, all in parallel: no atomicity (a
    /// reader may see some and not others) and no order among them; each
    /// follows the session's earlier operations, and the session's later
    /// operations follow all of them. Cassandra's non-atomic `batch_mutate`,
    /// the "normal (2)" writes of Lloyd's dissertation, Table 7.4. Answered
    /// with [`OpResult::Put`]; a history records it as one `Put` per write
    /// ([`crate::OpRecord::batch`]). Keys are distinct.
    Batch {
        writes: Vec<(Key, Value)>,
    },
    /// A read-write transaction in the shape Spirovska et al. (PaRiS) evaluates: all
    /// reads from one causal snapshot, in parallel, then all writes, in
    /// parallel and atomically visible, the transaction being one event of
    /// the causal order. Reads do not see the transaction's own writes (they
    /// come first). Keys are distinct within `reads` and within `writes`; a
    /// key may be in both (read-modify-write).
    Txn {
        reads: Vec<Key>,
        writes: Vec<(Key, Value)>,
    },
    /// Add `delta` to the counter column at location `key` ([`crate::column`]):
    /// commutative, so concurrent adds in different DCs all count (Lloyd et
    /// al., "Stronger Semantics for Low-Latency Geo-Replicated Storage",
    /// §3, counter columns). A read of a counter returns its value as
    /// decimal ASCII. Answered with [`OpResult::Put`].
    Add {
        key: Key,
        delta: i64,
    },
    /// The columns of `row`'s `family` named from `start` through `stop`
    /// (inclusive, byte order; an empty `stop`: to the end), the first
    /// `count` of them that hold a value, as one read-only transaction
    /// (the paper's slice predicate `(start, stop, count)`, §3).
    Slice {
        row: Key,
        family: bytes::Bytes,
        start: bytes::Bytes,
        stop: bytes::Bytes,
        count: u32,
    },
    /// Open an interactive transaction on the session: the protocol fixes
    /// its snapshot (Spirovska et al., "PaRiS", Alg. 1 START). Answered
    /// with [`OpResult::Done`]. At most one is open per session.
    Begin,
    /// Read `keys` in the session's open transaction, all from its
    /// snapshot; any number of these, each after the last has answered.
    /// Answered with [`OpResult::Rot`]. Keys are distinct; the transaction's
    /// own buffered writes are the client library's to answer
    /// ([`crate::txn::TxnBuffer`]), never asked of the protocol.
    TxRead {
        keys: Vec<Key>,
    },
    /// Commit the open transaction with its buffered `writes` (none: a
    /// read-only transaction that only releases its snapshot), atomically
    /// visible and one event of the causal order, as [`Op::Txn`]'s.
    /// Answered with [`OpResult::Done`]. Keys are distinct.
    Commit {
        writes: Vec<(Key, Value)>,
    },
    /// Drop the open transaction: nothing of it is written. Answered with
    /// [`OpResult::Done`] at once, without waiting for any answer (a
    /// client library ends a transaction its user dropped by invoking this
    /// just before its next operation); a server that never hears of it
    /// drops the transaction once it is idle.
    Abort,
}

impl Op {
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Get { .. } => OpKind::Get,
            Op::Put { .. } => OpKind::Put,
            Op::Rot { .. } => OpKind::Rot,
            Op::Wot { .. } => OpKind::Wot,
            Op::Batch { .. } => OpKind::Batch,
            Op::Txn { .. } => OpKind::Txn,
            Op::Add { .. } => OpKind::Add,
            Op::Slice { .. } => OpKind::Slice,
            Op::Begin | Op::TxRead { .. } | Op::Commit { .. } | Op::Abort => OpKind::Interactive,
        }
    }

    /// The keys the operation reads, in request order (a slice names a
    /// row, not keys: none).
    pub fn reads(&self) -> Vec<&Key> {
        self.each_read().collect()
    }

    /// Every key the operation names (reads, writes, a counter, a slice's
    /// row), for size limits.
    pub fn keys(&self) -> Vec<&Key> {
        self.each_key().collect()
    }

    /// The (key, value) pairs the operation writes, in request order.
    pub fn writes(&self) -> Vec<(&Key, &Value)> {
        self.each_write().collect()
    }

    /// [`Op::reads`] without collecting them: a client checks every
    /// operation it sends, and a vector per check was a third of the
    /// allocations of a one-key request.
    pub fn each_read(&self) -> impl Iterator<Item = &Key> {
        let (one, many): (Option<&Key>, &[Key]) = match self {
            Op::Get { key } => (Some(key), &[]),
            Op::Rot { keys } | Op::Txn { reads: keys, .. } | Op::TxRead { keys } => (None, keys),
            Op::Put { .. }
            | Op::Wot { .. }
            | Op::Batch { .. }
            | Op::Add { .. }
            | Op::Slice { .. }
            | Op::Begin
            | Op::Commit { .. }
            | Op::Abort => (None, &[]),
        };
        one.into_iter().chain(many)
    }

    /// [`Op::writes`] without collecting them.
    pub fn each_write(&self) -> impl Iterator<Item = (&Key, &Value)> {
        let one = match self {
            Op::Put { key, value } => Some((key, value)),
            _ => None,
        };
        let many: &[(Key, Value)] = match self {
            Op::Wot { writes } | Op::Batch { writes } | Op::Txn { writes, .. } | Op::Commit { writes } => writes,
            Op::Get { .. }
            | Op::Put { .. }
            | Op::Rot { .. }
            | Op::Add { .. }
            | Op::Slice { .. }
            | Op::Begin
            | Op::TxRead { .. }
            | Op::Abort => &[],
        };
        one.into_iter().chain(many.iter().map(|(k, v)| (k, v)))
    }

    /// [`Op::keys`] without collecting them.
    pub fn each_key(&self) -> impl Iterator<Item = &Key> {
        let named = match self {
            Op::Add { key, .. } => Some(key),
            Op::Slice { row, .. } => Some(row),
            _ => None,
        };
        self.each_read().chain(self.each_write().map(|(k, _)| k)).chain(named)
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
    /// A slice: (column name, value) in column order. Raw results include
    /// deleted columns' tombstones; [`OpResult::visible`] strips them.
    Slice(Vec<(bytes::Bytes, Value)>),
    /// A step of an interactive transaction that returns nothing: begun,
    /// committed, aborted.
    Done,
    Failed(OpError),
}

impl OpResult {
    /// The result as a user sees it: values read that are deletes'
    /// tombstones become "no value" ([`crate::data::visible`]). Histories keep
    /// the raw result, where a tombstone is the write it is.
    pub fn visible(self) -> OpResult {
        let strip = |vs: Vec<Option<Value>>| vs.into_iter().map(crate::data::visible).collect();
        match self {
            OpResult::Get(v) => OpResult::Get(crate::data::visible(v)),
            OpResult::Rot(vs) => OpResult::Rot(strip(vs)),
            OpResult::Txn(vs) => OpResult::Txn(strip(vs)),
            OpResult::Slice(cs) => {
                OpResult::Slice(cs.into_iter().filter(|(_, v)| !crate::data::is_tombstone(v)).collect())
            }
            other => other,
        }
    }
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
    /// The client stopped waiting after `after_ms` (the runtime's operation
    /// deadline, e.g. because the server it asked crashed). The outcome is
    /// unknown: a timed-out write may have been applied, so the checker
    /// treats it as possibly applied, like any failed write.
    #[error("timed out after {after_ms} ms; the operation may or may not have taken effect")]
    TimedOut { after_ms: u64 },
    /// The operation had not completed when the run (or the recording)
    /// ended: its record's `complete_us` is that end, not a completion. Its
    /// outcome is unknown, as for [`OpError::TimedOut`]; the checker's
    /// liveness checks report it.
    #[error("never completed: still in progress when the run ended")]
    Pending,
    /// The session was asked to move to DC `dc` for this operation, and
    /// the protocol keeps sessions in their DC ([`Client::migrate`]):
    /// nothing was sent.
    #[error(
        "this protocol keeps a session in its DC and cannot move it to DC {dc} (causal consistency with \
         available reads needs sticky clients: Roohitavaf, Ch. 6)"
    )]
    Sticky { dc: u16 },
    /// The session named a checking group for its GETs
    /// ([`Client::set_checking_group`]) that cannot be used: nothing was sent.
    #[error(transparent)]
    CheckingGroup(CheckingGroupError),
}

/// Why a session cannot name a checking group for its GETs
/// ([`Client::set_checking_group`]; Roohitavaf, *Consistency for
/// Distributed Data Stores*, Ch. 7, Alg 7.1's `GET(k, cg)`).
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum CheckingGroupError {
    /// The protocol fixes what its servers check: it has no checking
    /// groups to choose from (only ACCF's sessions name one).
    #[error(
        "this protocol has no checking groups to name (group {group}): only ACCF's GETs name one \
         (Roohitavaf, Ch. 7, Alg 7.1)"
    )]
    Unsupported { group: u16 },
    /// Groups are numbered from 0 in the order the configured checking
    /// grouping yields them; `groups` is how many there are.
    #[error("checking group {group} does not exist: the checking grouping has {groups} groups, 0 to {last}", last = groups.saturating_sub(1))]
    OutOfRange { group: u16, groups: u16 },
    /// No server of the group stores the key's partition, so no member of
    /// the group can answer the GET (a group of some servers only, under
    /// per-server or explicit groupings).
    #[error("checking group {group} has no server storing partition {partition}, the key's")]
    NoServer { group: u16, partition: u32 },
}

impl From<CheckingGroupError> for OpError {
    fn from(e: CheckingGroupError) -> Self {
        OpError::CheckingGroup(e)
    }
}

impl OpError {
    /// Whether the operation did not finish (timed out, or still pending at
    /// the end of the run) rather than being answered with a refusal.
    pub fn is_unfinished(&self) -> bool {
        matches!(self, OpError::TimedOut { .. } | OpError::Pending)
    }
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
    /// latency from it, as Roohitavaf does (skew included).
    Visible { key: &'a [u8], value: &'a Value, origin: DcId, written_us: u64 },
    /// This node's stable time (GST, the least DSV entry…) advanced to
    /// `stable_us` of the physical clock: every remote write stamped at or
    /// before it is visible here. Runtimes report the lag behind the clock.
    Stable { stable_us: u64 },
    /// A request (or replicated update) waited `waited_us` of this node's
    /// clock inside the server before it could proceed.
    Blocked { what: &'static str, waited_us: u64 },
    /// One sample of a protocol-specific quantity worth a mean and tail in
    /// reports, e.g. `deps_per_write` (the dependencies a client write
    /// carried, which Lloyd reports for COPS and COPS-GT).
    Sample { what: &'static str, value: u64 },
}

/// What a server may do. Implemented by each runtime.
pub trait ServerEnv<M, V: crate::Versioned> {
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
    /// Report [`Observation::Visible`] for a version in the store: `read`
    /// finds it (with its key) or says there is none to report, typically
    /// the version a local GET now returns if it is the one just admitted.
    ///
    /// Why not `observe`: a protocol holding the store through this env
    /// must copy the key and value out of it to pass them to `observe`,
    /// and on a replica that copy was most of the cost of reporting (a
    /// value's first clone allocates its shared reference count, freed
    /// again with the copy). A runtime that only counts visibility (the
    /// network runtime) never looks at them; the default copies, as a
    /// protocol would have.
    fn observe_visible_in_store(
        &mut self,
        origin: DcId,
        written_us: u64,
        read: impl for<'s> FnOnce(&'s MvStore<V>) -> Option<(&'s [u8], &'s V)>,
    ) {
        let Some((key, value)) =
            read(self.store()).map(|(k, v)| (crate::store_key::StoreKey::new(k), v.value().clone()))
        else {
            return;
        };
        self.observe(Observation::Visible { key: &key, value: &value, origin, written_us });
    }
}

/// What a client session may do. Implemented by each runtime.
pub trait ClientEnv<M> {
    fn now_us(&self) -> u64;
    fn send(&mut self, to: NodeId, msg: M);
    /// Call [`Client::on_timer`] with `token` after `after_us` µs.
    fn set_timer(&mut self, after_us: u64, token: u64);
    /// Finish the operation in progress.
    fn complete(&mut self, result: OpResult);
    /// Tell the runtime how the operation in progress went, for
    /// measurement only: a label such as `"indirected"` (an Eiger read a
    /// server answered only after asking a transaction's coordinator, the
    /// "Eiger indirected" row of Lloyd's dissertation, Table 7.4). Call it
    /// before [`ClientEnv::complete`]; a runtime may report the operation's
    /// latency apart under it, or ignore it (the default). It never changes
    /// what the operation returns, and the protocol must not depend on it
    /// being heard.
    fn note(&mut self, _label: &'static str) {}
}

/// The server half of a protocol, owned by one node.
pub trait Server {
    type Msg: Message;
    type Version: Versioned + Clone;
    /// Called once before any other input; set the first timers here.
    fn on_start(&mut self, _env: &mut impl ServerEnv<Self::Msg, Self::Version>) {}
    /// A request from a client session. `from` is *this server's* name for
    /// the session, valid for [`ServerEnv::reply`] here and nowhere else:
    /// the network runtime numbers each server's connections on its own,
    /// and the simulator scrambles ids per server so that no protocol can
    /// come to rely on two servers agreeing. To name the session to a peer,
    /// use what the client sends ([`ClientCtx::nonce`]).
    fn on_client(&mut self, env: &mut impl ServerEnv<Self::Msg, Self::Version>, from: ClientId, msg: Self::Msg);
    fn on_peer(&mut self, env: &mut impl ServerEnv<Self::Msg, Self::Version>, from: NodeId, msg: Self::Msg);
    fn on_timer(&mut self, env: &mut impl ServerEnv<Self::Msg, Self::Version>, token: u64);
    /// Where a snapshot of the store may cut each key's versions, as of
    /// now: the versions older than the newest one the floor holds of are
    /// garbage the protocol's collection has not reached yet (a
    /// stabilization protocol's pass waits for a key to go quiet), so a
    /// checkpoint need not copy and write them. `None`, the default, keeps
    /// every version. The network runtime asks when a checkpoint begins
    /// ([`MvStore::begin_freeze`]).
    fn snapshot_floor(&self) -> Option<crate::SnapshotFloor<Self::Version>> {
        None
    }
}

/// The client half of a protocol: one sequential session.
pub trait Client {
    type Msg: Message;
    /// Start `op`. The runtime never invokes a second op before the first completes.
    fn invoke(&mut self, env: &mut impl ClientEnv<Self::Msg>, op: Op);
    /// Start `op` asking for the session guarantees `levels` (a GET its
    /// read level, a PUT its write level; Roohitavaf's per-operation
    /// levels, §4.2). Runtimes call it only for GETs and PUTs, and only
    /// after [`crate::Levels::refusal`] found nothing to refuse. The
    /// default ignores the levels, which is right for a causal protocol (it
    /// gives every session guarantee anyway) and for an eventual one asked
    /// for nothing; a protocol with `Protocol::LEVELS` overrides it.
    fn invoke_at(&mut self, env: &mut impl ClientEnv<Self::Msg>, op: Op, _levels: crate::Levels) {
        self.invoke(env, op)
    }
    fn on_reply(&mut self, env: &mut impl ClientEnv<Self::Msg>, from: NodeId, msg: Self::Msg);
    fn on_timer(&mut self, _env: &mut impl ClientEnv<Self::Msg>, _token: u64) {}
    /// The runtime could not reach `node` for a message this client sent:
    /// no connection could be opened, so nothing was delivered. A client
    /// that can serve the operation elsewhere (another replica of a
    /// partition's group) does so and returns true; the default, false,
    /// lets the runtime fail the operation with its connection error, which
    /// is right for a protocol with one server per partition. (The
    /// simulator has no connections: there, a message to a crashed node is
    /// lost, and the client's timers see to it.)
    fn on_unreachable(&mut self, _env: &mut impl ClientEnv<Self::Msg>, _node: NodeId) -> bool {
        false
    }
    /// Move the session to `dc` between operations (client migration): its
    /// later operations go to that DC's servers, carrying whatever the
    /// session tracked. Returns false, changing nothing, when the protocol
    /// keeps sessions where they started, which is the default and the
    /// only choice for a protocol that promises causal consistency with
    /// available reads (Roohitavaf, *Consistency for Distributed Data
    /// Stores*, Ch. 6, Thm 12: with non-sticky clients no store is both
    /// available and causal++). [`Protocol::MIGRATES`] says which.
    /// Runtimes call it only when no operation is in progress.
    fn migrate(&mut self, _dc: DcId) -> bool {
        false
    }
    /// Name the checking group `cg` the session's following GETs ask their
    /// server to check (Roohitavaf, *Consistency for Distributed Data
    /// Stores*, Ch. 7, Alg 7.1's `GET(k, cg)`), or `None` for the
    /// protocol's own choice. Groups are numbered as
    /// [`Protocol::checking_groups`] counts them. Refused, changing
    /// nothing, for a group that does not exist, and by the default (every
    /// protocol but ACCF) for any group: `None` is always accepted.
    ///
    /// A session setting, as [`Client::migrate`] is, rather than a
    /// parameter of every operation, as [`Client::invoke_at`]'s levels
    /// are: only ACCF's GETs read it, so no runtime's invoke path, and no
    /// other protocol, changes; a runtime gives one GET its own group by
    /// naming it before and `None` after (the client reads it only when
    /// the GET starts); and a bad group is refused before anything is
    /// sent. Runtimes call it only when no operation is in progress.
    fn set_checking_group(&mut self, cg: Option<u16>) -> Result<(), CheckingGroupError> {
        match cg {
            None => Ok(()),
            Some(group) => Err(CheckingGroupError::Unsupported { group }),
        }
    }
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
    /// The session's id in its runtime (unique among one process's
    /// sessions). Not what a server calls it: see [`Server::on_client`].
    pub id: ClientId,
    /// 64 bits that name this session cluster-wide: drawn at random by the
    /// network runtime (so sessions of different processes differ with
    /// overwhelming probability), derived from the seed by the simulator.
    /// A request that names its session to a second server (a ROT's two
    /// halves, a transaction id) carries this, never a [`ClientId`].
    pub nonce: u64,
    /// The DC the session is attached to (clients are sticky, Roohitavaf Ch. 6).
    pub dc: DcId,
    pub topology: Arc<Topology>,
}

/// Fault kinds the simulator can inject. A protocol declares, in
/// [`Protocol::TOLERATES`], the ones under which it keeps its promises
/// (safety at [`Protocol::CAUSAL`]'s level, and liveness as
/// [`Protocol::liveness_bound_us`] says); torture draws only those, so a
/// failure under a declared fault is a bug and a missing declaration is a
/// visible, reviewable claim rather than a setting hidden in the harness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Faults {
    /// DC pairs cut off from each other, later healed (reliable channels
    /// hold the messages meanwhile).
    pub partitions: bool,
    /// A node stops handling inputs for a while (its inputs queue).
    pub pauses: bool,
    /// Extra latency between two DCs for a while.
    pub spikes: bool,
    /// Extra latency on one node-to-node link (replication or intra-DC).
    pub slow_links: bool,
    /// Every message a node sends is slower for a while.
    pub slow_nodes: bool,
    /// Static per-node clock offsets.
    pub skew: bool,
    /// Clocks running fast or slow (ppm).
    pub drift: bool,
    /// A clock steps forward.
    pub forward_jumps: bool,
    /// A clock steps backward.
    pub backward_jumps: bool,
    /// A node crashes, losing all volatile state, and restarts from what it
    /// journaled (store versions and [`MvStore::set_meta`]); its peer links
    /// keep their durable outbox, client requests in flight to it are lost.
    pub crash_restart: bool,
}

impl Faults {
    /// Every fault kind.
    pub const ALL: Faults = Faults {
        partitions: true,
        pauses: true,
        spikes: true,
        slow_links: true,
        slow_nodes: true,
        skew: true,
        drift: true,
        forward_jumps: true,
        backward_jumps: true,
        crash_restart: true,
    };
    /// Network and scheduling faults only: what any protocol on reliable
    /// FIFO channels must survive. Clock faults and crash-restart need the
    /// protocol's own care (clock rules, recovery code), so they are opt-in.
    pub const NETWORK: Faults = Faults {
        partitions: true,
        pauses: true,
        spikes: true,
        slow_links: true,
        slow_nodes: true,
        skew: false,
        drift: false,
        forward_jumps: false,
        backward_jumps: false,
        crash_restart: false,
    };
}

/// What a liveness bound may depend on besides the protocol's config: the
/// deployment's worst round trip and worst clock disagreement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LivenessEnv {
    /// The largest round-trip time between two DCs, µs.
    pub max_rtt_us: u64,
    /// The round-trip time inside a DC (client to server, server to
    /// server), µs.
    pub intra_dc_rtt_us: u64,
    /// The largest difference between two servers' clocks, µs (skew plus
    /// what drift and jumps add over the run).
    pub max_clock_skew_us: u64,
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
    /// Whether a protocol that is not causal still promises read-your-writes
    /// and monotonic reads per key (NuKV's session levels): the checker then
    /// holds it to those two beside eventual consistency. Default: false.
    const SESSIONS: bool = false;
    /// Whether each DC orders the writes it takes as one linearizable
    /// sequence per key that the cross-DC arbitration extends: a write
    /// acknowledged in a DC before another write of the key was invoked
    /// there is overwritten by it everywhere, whatever the level (NuKV, whose
    /// Raft groups commit a DC's writes in one log and whose leaders stamp
    /// past every committed write, Roohitavaf Ch. 4, §4.1). The checker then
    /// counts a final value that a later write of its own DC should have
    /// overwritten as lost (the checker's convergence check).
    /// Default: false.
    const LINEARIZES_DC_WRITES: bool = false;
    /// Whether GETs and PUTs take per-operation session levels
    /// ([`crate::Levels`], [`Client::invoke_at`]) and honour each as asked
    /// (NuKV). A causal protocol takes any level without this (it gives
    /// them all); any other refuses a level above eventual. Default: false.
    const LEVELS: bool = false;
    /// Whether a session may move to another DC between operations
    /// ([`Client::migrate`]). Default: false (sticky sessions).
    const MIGRATES: bool = false;
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

    /// Per-DC service nodes the protocol runs beside its partition servers
    /// (EunomiaKV's stabilizer and receiver), as (service name, instances
    /// per DC). Runtimes add each one a topology does not declare
    /// ([`crate::TopologySpec::add_missing_services`]); a topology that
    /// declares it keeps its own count. Empty: partition servers only.
    const SERVICES: &'static [(&'static str, u16)] = &[];

    /// The services torture deploys for a run: by default
    /// [`Protocol::SERVICES`]; a protocol with replicated services draws
    /// their instance counts here (`draw(lo, hi)` as in
    /// [`Protocol::torture_params`], on a stream of its own).
    fn torture_services(_draw: &mut dyn FnMut(u64, u64) -> u64) -> Vec<(&'static str, u16)> {
        Self::SERVICES.to_vec()
    }

    /// The replicas per partition inside each DC torture deploys for a
    /// run (`topology.replicas_per_partition`): 1 by default, drawn (as in
    /// [`Protocol::torture_services`], after it) by a protocol whose
    /// partitions are replicated groups (NuKV's Raft groups).
    fn torture_replicas(_draw: &mut dyn FnMut(u64, u64) -> u64) -> u16 {
        1
    }

    /// The faults under which the protocol keeps its promises. Default:
    /// [`Faults::NETWORK`] (clock faults and crash-restart are claims a
    /// protocol makes explicitly, once it handles them).
    const TOLERATES: Faults = Faults::NETWORK;
    /// Whether the protocol promises that a client's operations on keys its
    /// own DC stores complete while that DC is cut off from other DCs (the
    /// "available under partition" claim of COPS, GentleRain and
    /// CausalSpartanX). The checker then holds operations invoked during a
    /// partition to [`Protocol::liveness_bound_us`] too. Default: false (no
    /// claim; an operation may wait for a partition to heal).
    const AVAILABLE_UNDER_PARTITIONS: bool = false;
    /// Whether the protocol runs on a partially replicated topology
    /// ([`crate::Replication::Partial`]: each partition stored at some of
    /// the DCs). Its `validate` must accept one; the conformance suite and
    /// torture then also run it so. Default: false (most protocols need
    /// full replication and refuse anything else in `validate`).
    const PARTIAL_REPLICATION: bool = false;
    /// Whether operations that name none of a permanently lost node's keys
    /// go on completing, and the live keys go on converging, after the node
    /// is lost for good with no replacement (the conformance suite's
    /// loss-mid-commit test). Default: true. A protocol whose global stable
    /// time needs every node to report (PaRiS's UST, which Spirovska et al.
    /// say blocks "until a backup takes over") says false, and the suite
    /// does not hold it to that.
    const SERVES_ON_AFTER_PERMANENT_LOSS: bool = true;

    /// How long an operation may take when no fault is active (or only
    /// partitions, for a protocol [available under
    /// partitions](Protocol::AVAILABLE_UNDER_PARTITIONS)), counted from its
    /// invocation or from the end of the last fault it overlapped, whichever
    /// is later. The checker reports an operation that takes longer, or never
    /// completes, as a liveness violation. It depends on the config (timer
    /// intervals) and on `env`. Default: two worst round trips, the clock
    /// skew, plus one second of slack — generous, so a default catches a
    /// stall (an operation that waits forever or for a whole partition), not
    /// a slow path.
    fn liveness_bound_us(_cfg: &Self::Config, env: &LivenessEnv) -> u64 {
        2 * env.max_rtt_us + env.max_clock_skew_us + 1_000_000
    }

    /// Protocol parameters torture draws for each run, as (name, value)
    /// pairs of the `[protocol]` table. `draw(lo, hi)` is a uniform integer
    /// in `lo..=hi` from the run's seed, on a stream of its own, so
    /// protocols that draw nothing replay as before. For settings whose
    /// defaults would keep a code path idle in a short run (COPS-GT's
    /// garbage collection waits 5 s). `--param` overrides them.
    fn torture_params(_draw: &mut dyn FnMut(u64, u64) -> u64) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// How many checking groups a session can name
    /// ([`Client::set_checking_group`]) under `cfg` on `topology`: 0, the
    /// default, for a protocol that fixes what its servers check. ACCF
    /// numbers the groups its `checking` grouping yields from 0.
    fn checking_groups(_cfg: &Self::Config, _topology: &Topology) -> u16 {
        0
    }

    /// Check a config against a topology before any node starts.
    fn validate(_cfg: &Self::Config, _topology: &Topology) -> Result<(), String> {
        Ok(())
    }
    fn server(cfg: &Self::Config, ctx: NodeCtx) -> Self::Server;
    fn client(cfg: &Self::Config, ctx: ClientCtx) -> Self::Client;
}
