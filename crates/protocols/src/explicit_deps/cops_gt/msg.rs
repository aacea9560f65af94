use crate::explicit_deps::replication::{Dep, DepVersion, PathMsg, Stamp};
use crate::kit::msg::payload;
use causeway_core::{Key, Value};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What `read_by_time` returns: ⟨value, timestamp, deps⟩ (§2.4), the
/// never-depend flag (§6.1), and the version's cut (deviation 8).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Read {
    pub value: Value,
    pub stamp: Stamp,
    pub deps: Arc<[Dep]>,
    pub never_depend: bool,
    /// Dependencies with a smaller Lamport time were left out of `deps`.
    pub cut: u64,
}

/// Every message of the protocol.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// `read_by_time(key, LATEST)`: the newest committed version.
    /// `attempt` and `idx` name the operation attempt and the key's place
    /// in it; `trans`: the first round of a `read_trans` of several keys,
    /// whose second round may ask for a version overwritten meanwhile
    /// (deviation 9).
    Read { attempt: u32, idx: u32, key: Key, trans: bool },
    /// A read transaction's second round (§4.3, Fig 4.4): the newer of
    /// exactly version `at` (unless `Stamp::NONE`) and the newest version
    /// with a Lamport time below `below` (unless 0; deviation 8).
    ReadAt { attempt: u32, idx: u32, key: Key, at: Stamp, below: u64 },
    /// `Ok(None)`: the key has no version (in a second round: none that
    /// was asked for); `Err(())`: a version asked for was
    /// garbage-collected (the transaction restarts). `checkpoint`: the
    /// server's global checkpoint when it read (deviation 8).
    ReadReply { attempt: u32, idx: u32, read: Result<Option<Read>, ()>, checkpoint: u64 },
    /// A read refused: this server does not own the key. Fails the
    /// operation attempt `attempt`.
    Refused { attempt: u32, reason: String },
    /// `write_after(key, value, deps, nearest)`; `nearest` indexes `deps`;
    /// `cut`: the session's checkpoint, below which it left dependencies
    /// out (deviation 8).
    PutReq { key: Key, value: Value, deps: Arc<[Dep]>, nearest: Nearest, cut: u64 },
    /// The write's stamp and a global checkpoint (a Lamport time) at least
    /// its cut, or why the write was refused.
    PutReply { result: Result<(Stamp, u64), String> },
    /// The write shipped to an equivalent node.
    Replicate(Box<Replica>),
    /// The shared replication path: `dep_check`, and settling, where
    /// `Settled` tells equivalents to drop the dependencies of the origin's
    /// writes through a stamp.
    Path(PathMsg),
    /// Checkpoint gossip: a node's own bound, to its equivalents.
    NodeBound { lamport: u64 },
    /// Checkpoint gossip: a key range's bound (over all DCs), within a DC,
    /// and the sender's checkpoint (deviation 8).
    RangeBound { lamport: u64, checkpoint: u64 },
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
    crate::key_hint!(Msg: Read, ReadAt, PutReq; wrapping: Replicate);
    fn payload_bytes(&self) -> usize {
        match self {
            Msg::Read { key, .. } | Msg::ReadAt { key, .. } => key.len(),
            Msg::ReadReply { read, .. } => payload(read.iter().flatten().map(|r| &r.value[..])),
            Msg::PutReq { key, value, .. } => key.len() + value.len(),
            Msg::Replicate(r) => r.key.len() + r.value.len(),
            _ => 0,
        }
    }
}

/// Every move of a message of over 128 bytes with the runtime's envelope is
/// a call to `memmove` (see CausalSpartanX's `Msg`): a front-door SET moved
/// COPS-GT's 128-byte message some six times. `Replicate` boxed and
/// `nearest` a thin pointer ([`Nearest`]) make it 104. Neither changes
/// the encoding.
const _: () = assert!(std::mem::size_of::<Msg>() <= 104, "a COPS-GT message moves inline");

/// A write's nearest-dependency indexes into its `deps`: one pointer, and
/// nothing allocated when there are none (most writes, under a fresh
/// checkpoint).
pub type Nearest = crate::kit::msg::Thin<u32>;

/// What [`Msg::Replicate`] carries: `nearest` indexes `deps`; `cut` as in
/// [`Msg::PutReq`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Replica {
    pub key: Key,
    pub value: Value,
    pub stamp: Stamp,
    pub deps: Arc<[Dep]>,
    pub nearest: Vec<u32>,
    pub cut: u64,
    pub written_us: u64,
}

crate::explicit_deps::replication::msg::path_variant!(Msg);

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
    /// A global checkpoint: dependencies older than it were left out of
    /// `deps`. At least the cut of every version in `deps` (deviation 8).
    pub cut: u64,
    pub state: State,
}

impl Version {
    pub(super) fn read(&self) -> Read {
        let never_depend = matches!(self.state, State::Committed { never_depend: true, .. });
        Read {
            value: causeway_core::copy_if_short(&self.value),
            stamp: self.stamp,
            deps: self.deps.clone(),
            never_depend,
            cut: self.cut,
        }
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
