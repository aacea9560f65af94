use crate::replicated::raft_log::LogVersion;
use causeway_core::{DcId, Hlc, Key, NodeId, Value, Versioned};
use serde::{Deserialize, Serialize};

/// A user write as stored, replicated and forwarded: the value, its
/// last-writer-wins position ⟨t, dc⟩ (Alg 4.2's `v.t` and `v.dc_id`) and
/// the index of the entry that committed it in its origin DC's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamped {
    pub value: Value,
    pub t: Hlc,
    pub dc: DcId,
    pub idx: u64,
}

/// What a node's store holds: user writes under their keys, and each Raft
/// group's log records under the group's reserved key
/// ([`super::server::log_key`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Version {
    Data(Stamped),
    /// A Raft log entry, protobuf-encoded, at its index.
    Log {
        index: u64,
        record: Value,
    },
}

impl Versioned for Version {
    /// Last-writer-wins by ⟨t, dc⟩, then the origin's log index: two
    /// leaders of one group in turn may stamp equal times, never at one
    /// index. A log record orders by its index.
    type Order = (Hlc, DcId, u64);
    fn order(&self) -> (Hlc, DcId, u64) {
        match self {
            Version::Data(s) => (s.t, s.dc, s.idx),
            Version::Log { index, .. } => (Hlc::new(*index, 0), DcId(0), 0),
        }
    }
    fn value(&self) -> &Value {
        match self {
            Version::Data(s) => &s.value,
            Version::Log { record, .. } => record,
        }
    }
}

impl LogVersion for Version {
    fn log_record(index: u64, record: Value) -> Self {
        Version::Log { index, record }
    }
    fn as_log_record(&self) -> Option<(u64, &Value)> {
        match self {
            Version::Log { index, record } => Some((*index, record)),
            Version::Data(_) => None,
        }
    }
}

/// A GET's request (Alg 4.1): the key and the two vectors, one entry per
/// DC, the replica's stable vector must reach before it reads.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GetReq {
    pub key: Key,
    pub hwv: Vec<u64>,
    pub hrv: Vec<u64>,
    /// The session's number for this request, echoed in the answer.
    pub req: u64,
}

/// What a PUT must be ordered after (Config::hlc says which one sessions
/// send).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Dep {
    /// Alg 4.1's dependency time `dt`: the leader stamps past it at once.
    Time(Hlc),
    /// Per DC, the log index of the key's partition the leader's stable
    /// vector must reach before it stamps the write (the thesis's writes
    /// "without HLC", §4.4.2). At most one entry per DC.
    Applied(Box<[u64]>),
}

/// Writes the forwarder of `origin` ships to another DC: every write that
/// committed in `origin`'s group with an index in `(after, upto]`, in
/// index order (Alg 4.2's `Replicate`, batched, with the range made
/// explicit so a receiver can tell a replay and a gap from the next batch).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Forward {
    pub partition: u32,
    pub origin: DcId,
    pub after: u64,
    pub upto: u64,
    pub writes: Vec<(Key, Stamped)>,
}

/// What a group commits: a client's write at the leader, or a batch
/// forwarded from another DC.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Command {
    /// `proposal` names the proposing leader's pending reply:
    /// (its node, a number it never reuses within one start, the start).
    Put {
        key: Key,
        value: Value,
        t: Hlc,
        dc: DcId,
        proposal: (NodeId, u64, u64),
    },
    Forward(Forward),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// A GET to any replica of the key's partition in the client's DC.
    GetReq(Box<GetReq>),
    /// The newest version of the key (none: `value` is `None`, `dc` and
    /// `t` zero), its DC, and the replica's `sv[dc]` (Alg 4.2 answers with
    /// the stable entry, not the version's own index). Every answer names
    /// the request it answers (`req`), so a session never takes a late
    /// answer to an earlier request for this one's.
    GetReply { req: u64, value: Option<Value>, dc: DcId, idx: u64, t: Hlc },
    /// The replica's stable vector did not reach the session's within
    /// `get_wait_us`: a GET asks another replica, a PUT (held before it
    /// was proposed, waiting for its `Dep::Applied`) asks again.
    Behind { req: u64 },
    /// A PUT to the partition's leader, with what it depends on.
    PutReq { key: Key, value: Value, dep: Dep, req: u64 },
    /// The PUT committed: its DC, that DC's stable entry at the leader
    /// once it applied the write, and the write's timestamp.
    PutReply { req: u64, dc: DcId, idx: u64, t: Hlc },
    /// This replica is not the group's leader; `leader` is the one it
    /// knows of. Nothing was proposed.
    NotLeader { req: u64, leader: Option<NodeId> },
    /// The server does not store `key` (a misrouted request), or the key
    /// is reserved: refused, never applied.
    Refused { req: u64, key: Key, reason: String },
    /// A Raft message of the group of `partition` in this DC,
    /// protobuf-encoded as tikv's raft defines it.
    Raft { partition: u32, msg: bytes::Bytes },
    /// From a forwarder to a replica of the same partition in another DC.
    Forward(Box<Forward>),
    /// To a forwarder: the acknowledging DC's group has applied its
    /// writes through `covered` (its `sv[origin]`).
    ForwardAck { partition: u32, dc: DcId, covered: u64 },
    /// To a forwarder: this replica is not its group's leader; try
    /// `leader`, or the next replica.
    ForwardNack { partition: u32, dc: DcId, leader: Option<NodeId> },
    /// From a forwarder to its group: every other DC has applied this
    /// group's writes through `index`, so the log may be compacted up to it.
    Floor { partition: u32, index: u64 },
}

crate::impl_message! {
    Msg {
        client: GetReq, GetReply, Behind, PutReply, NotLeader, Refused;
        writes: PutReq;
        peer: Raft, Forward, ForwardAck, ForwardNack, Floor;
        nested: ;
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        match self {
            Msg::GetReq(r) => (r.key.len(), 0),
            Msg::PutReq { key, value, .. } => (key.len(), value.len()),
            _ => (0, 0),
        }
    }
    crate::key_hint!(Msg: PutReq; wrapping: GetReq);
    fn payload_bytes(&self) -> usize {
        match self {
            Msg::GetReq(r) => r.key.len(),
            Msg::GetReply { value, .. } => value.as_ref().map_or(0, |v| v.len()),
            Msg::PutReq { key, value, .. } => key.len() + value.len(),
            Msg::Refused { key, .. } => key.len(),
            Msg::Forward(f) => f.writes.iter().map(|(k, s)| k.len() + s.value.len()).sum(),
            Msg::PutReply { .. }
            | Msg::Behind { .. }
            | Msg::NotLeader { .. }
            | Msg::Raft { .. }
            | Msg::ForwardAck { .. }
            | Msg::ForwardNack { .. }
            | Msg::Floor { .. } => 0,
        }
    }
    /// Raft copes with lost messages (it retries appends and votes on its
    /// own ticks), and so does the forwarder (it ships again from the last
    /// acknowledgement when none comes, and receivers drop what they have):
    /// journaling and resending them would only cost, and a DC cut off for
    /// long would pile the forwarder's resends up in its outbox.
    fn transient(&self) -> bool {
        matches!(self, Msg::Raft { .. } | Msg::Forward(_) | Msg::ForwardAck { .. } | Msg::ForwardNack { .. })
    }
    /// A newer floor says everything an older one did.
    fn ephemeral(&self) -> bool {
        matches!(self, Msg::Floor { .. })
    }
}

const _: () = assert!(std::mem::size_of::<Msg>() <= 104, "Msg grew past the runtime's inline-move size");
