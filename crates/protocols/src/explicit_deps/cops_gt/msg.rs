use crate::explicit_deps::replication::{Dep, DepVersion, PathMsg, Stamp};
use crate::kit::msg::payload;
use causeway_core::{Key, Value};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What `read_by_time` returns: ⟨value, timestamp, deps⟩ (§2.4), and the
/// never-depend flag (§6.1).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Read {
    pub value: Value,
    pub stamp: Stamp,
    pub deps: Arc<[Dep]>,
    pub never_depend: bool,
}

/// Every message of the protocol.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// `read_by_time(key, LATEST)`: the newest committed version.
    /// `attempt` and `idx` name the operation attempt and the key's place
    /// in it.
    Read { attempt: u32, idx: u32, key: Key },
    /// `read_by_time(key, at)`: exactly version `at`, a read transaction's
    /// second round (§4.3, Fig 4.4).
    ReadAt { attempt: u32, idx: u32, key: Key, at: Stamp },
    /// `Ok(None)`: the key has no version; `Err(())`: version `at` was
    /// garbage-collected (the transaction restarts).
    ReadReply { attempt: u32, idx: u32, read: Result<Option<Read>, ()> },
    /// A read refused: this server does not own the key. Fails the
    /// operation attempt `attempt`.
    Refused { attempt: u32, reason: String },
    /// `write_after(key, value, deps, nearest)`; `nearest` indexes `deps`.
    PutReq { key: Key, value: Value, deps: Arc<[Dep]>, nearest: Vec<u32> },
    /// The write's stamp and the usable global checkpoint (a Lamport time),
    /// or why the write was refused.
    PutReply { result: Result<(Stamp, u64), String> },
    /// The write shipped to an equivalent node; `nearest` indexes `deps`.
    Replicate { key: Key, value: Value, stamp: Stamp, deps: Arc<[Dep]>, nearest: Vec<u32>, written_us: u64 },
    /// The shared replication path: `dep_check`, and settling, where
    /// `Settled` tells equivalents to drop the dependencies of the origin's
    /// writes through a stamp.
    Path(PathMsg),
    /// Checkpoint gossip: a node's own bound, to its equivalents.
    NodeBound { lamport: u64 },
    /// Checkpoint gossip: a key range's bound (over all DCs), within a DC.
    RangeBound { lamport: u64 },
}

crate::impl_message! {
    Msg {
        client: Read, ReadAt, ReadReply, Refused, PutReply;
        writes: PutReq;
        peer: Replicate, NodeBound, RangeBound;
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
    fn key_hint(&self) -> Option<&[u8]> {
        match self {
            Msg::Read { key, .. } | Msg::ReadAt { key, .. } | Msg::PutReq { key, .. } | Msg::Replicate { key, .. } => Some(key),
            _ => None,
        }
    }
    fn payload_bytes(&self) -> usize {
        match self {
            Msg::Read { key, .. } | Msg::ReadAt { key, .. } => key.len(),
            Msg::ReadReply { read, .. } => payload(read.iter().flatten().map(|r| &r.value[..])),
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
    /// A replicated write waiting for its nearest dependencies.
    Pending { nearest: Vec<Dep> },
    /// Committed here at `at_us` of this node's clock; `never_depend` once
    /// its dependencies were collected.
    Committed { at_us: u64, never_depend: bool },
}

/// A stored version: ⟨stamp, value, deps⟩ (§2.2). The dependency list is
/// shared, not copied, between the store, replies and replicates: it can
/// hold thousands of entries (§7.2.3).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    pub stamp: Stamp,
    pub deps: Arc<[Dep]>,
    pub state: State,
}

impl Version {
    pub(super) fn read(&self) -> Read {
        let never_depend = matches!(self.state, State::Committed { never_depend: true, .. });
        Read { value: self.value.clone(), stamp: self.stamp, deps: self.deps.clone(), never_depend }
    }
}

crate::impl_versioned!(Version, Stamp = stamp);

impl DepVersion for Version {
    fn pending_checks(&self) -> Option<&[Dep]> {
        match &self.state {
            State::Pending { nearest } => Some(nearest),
            State::Committed { .. } => None,
        }
    }
    fn commit(self, now_us: u64) -> Self {
        Version { state: State::Committed { at_us: now_us, never_depend: false }, ..self }
    }
}
