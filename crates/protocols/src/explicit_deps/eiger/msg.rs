use crate::explicit_deps::replication::{Dep, DepVersion, PathMsg, Stamp};
use crate::kit::msg::payload;
use causeway_core::{Key, Value};
use serde::{Deserialize, Serialize};

/// What a read returns (Lloyd §5.3): the value visible (`None`: the key
/// has no version then), the operation's stamp (a dependency's timestamp),
/// and the valid interval [`evt`, `lvt`] in logical time.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Read {
    pub value: Option<Value>,
    pub stamp: Stamp,
    /// Earliest valid time: when this server applied the version.
    pub evt: u64,
    /// Latest valid time: the server's logical time at the read if the
    /// version is still current (first round); for a read at a time
    /// (second round) the requested time itself.
    pub lvt: u64,
}

/// Every message of the protocol.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// First-round read (`multiget_slice` of one location, Lloyd §5.3):
    /// the current version. `floor` is the session's logical time, which
    /// the server witnesses first (deviation 2). `attempt` and `idx` name
    /// the operation attempt and the key's place in it.
    Read { attempt: u32, idx: u32, key: Key, floor: u64 },
    /// Second-round read (`multiget_slice_by_time`, Fig 5.5): the version
    /// visible at logical time `at`.
    ReadAt { attempt: u32, idx: u32, key: Key, at: u64 },
    /// `Err(())`: the version visible at the requested time was collected
    /// (the transaction restarts, §5.3).
    ReadReply { attempt: u32, idx: u32, read: Result<Read, ()> },
    /// A read refused: this server does not own the key.
    Refused { attempt: u32, reason: String },
    /// A write with its one-hop dependencies on operations (§5.2) and the
    /// session's logical time (deviation 2).
    PutReq { key: Key, value: Value, deps: Vec<Dep>, floor: u64 },
    /// The write's stamp, or why it was refused.
    PutReply { result: Result<Stamp, String> },
    /// The write shipped to an equivalent node.
    Replicate { key: Key, value: Value, stamp: Stamp, deps: Vec<Dep>, written_us: u64 },
    /// The shared replication path: `dep_check` (its answer carries the
    /// checked server's clock) and settling.
    Path(PathMsg),
}

crate::impl_message! {
    Msg {
        client: Read, ReadAt, ReadReply, Refused, PutReply;
        writes: PutReq;
        peer: Replicate;
        nested: Path;
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        match self {
            Msg::Read { key, .. } | Msg::ReadAt { key, .. } => (key.len(), 0),
            Msg::PutReq { key, value, deps, .. } => {
                (deps.iter().map(|d| d.key.len()).max().unwrap_or(0).max(key.len()), value.len())
            }
            _ => (0, 0),
        }
    }
    fn payload_bytes(&self) -> usize {
        match self {
            Msg::Read { key, .. } | Msg::ReadAt { key, .. } => key.len(),
            Msg::ReadReply { read, .. } => payload(read.iter().filter_map(|r| r.value.as_deref())),
            Msg::PutReq { key, value, .. } | Msg::Replicate { key, value, .. } => key.len() + value.len(),
            _ => 0,
        }
    }
}

impl From<PathMsg> for Msg {
    fn from(p: PathMsg) -> Msg {
        Msg::Path(p)
    }
}

/// Where a stored version stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    /// A replicated write waiting for its dependency checks.
    Pending { deps: Vec<Dep> },
    /// Applied here at logical time `evt` (its EVT, §5.3) and at `at_us`
    /// of this node's clock (for collection).
    Committed { evt: u64, at_us: u64 },
}

/// A stored version: ⟨stamp, value⟩ and its state. `collected_below`: older
/// versions of the key were collected, so nothing is known of the key
/// before this version's EVT (a read at such a time restarts).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    pub stamp: Stamp,
    pub state: State,
    pub collected_below: bool,
}

impl Version {
    /// The EVT of a committed version.
    pub(super) fn evt(&self) -> Option<u64> {
        match self.state {
            State::Committed { evt, .. } => Some(evt),
            State::Pending { .. } => None,
        }
    }
}

crate::impl_versioned!(Version, Stamp = stamp);

impl DepVersion for Version {
    fn pending_checks(&self) -> Option<&[Dep]> {
        match &self.state {
            State::Pending { deps } => Some(deps),
            State::Committed { .. } => None,
        }
    }
    fn commit(self, _now_us: u64) -> Self {
        unreachable!("Eiger commits with a logical time: commit_at")
    }
    /// A replicated write applied here: its EVT is this node's logical time
    /// now, later than its stamp (§5.3: "in remote DCs EVT > timestamp").
    fn commit_at(self, now_us: u64, lamport: u64) -> Self {
        Version { state: State::Committed { evt: lamport, at_us: now_us }, ..self }
    }
}
