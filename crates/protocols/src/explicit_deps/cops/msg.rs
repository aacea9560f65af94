use crate::explicit_deps::replication::{Dep, DepVersion, PathMsg, Stamp};
use crate::kit::msg::payload;
use causeway_core::{Key, Value};
use serde::{Deserialize, Serialize};

/// Every message of the protocol.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// `read_by_time(key, LATEST)`.
    GetReq { key: Key },
    /// The latest version, or `Stamp::NONE` and no value; `never_depend`
    /// when it is committed in every DC (§6.1).
    GetReply { value: Option<Value>, stamp: Stamp, never_depend: bool },
    /// A read refused: this server does not own the key.
    Refused { reason: String },
    /// `write_after(key, value, one_hop)`.
    PutReq { key: Key, value: Value, deps: Vec<Dep> },
    /// The write's stamp, or why it was refused.
    PutReply { result: Result<Stamp, String> },
    /// `write_after(key, value, one_hop, stamp)` to an equivalent node.
    Replicate { key: Key, value: Value, stamp: Stamp, deps: Vec<Dep>, written_us: u64 },
    /// The shared replication path: `dep_check` and settling.
    Path(PathMsg),
}

crate::impl_message! {
    Msg {
        client: GetReq, GetReply, Refused, PutReply;
        writes: PutReq;
        peer: Replicate;
        nested: Path;
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        match self {
            Msg::GetReq { key } => (key.len(), 0),
            Msg::PutReq { key, value, deps } => {
                (deps.iter().map(|d| d.key.len()).max().unwrap_or(0).max(key.len()), value.len())
            }
            _ => (0, 0),
        }
    }
    crate::key_hint!(Msg: GetReq, PutReq, Replicate);
    fn payload_bytes(&self) -> usize {
        // Dependency keys are metadata: they name other writes.
        match self {
            Msg::GetReq { key } => key.len(),
            Msg::GetReply { value, .. } => payload(value.iter().map(|v| &v[..])),
            Msg::PutReq { key, value, .. } | Msg::Replicate { key, value, .. } => key.len() + value.len(),
            _ => 0,
        }
    }
}

crate::explicit_deps::replication::msg::path_variant!(Msg);

/// A stored version: ⟨stamp, value⟩ (§2.2), and while it is a replicated
/// write waiting for its checks, the dependencies to check. Its never-depend
/// flag (§6.1) is not stored: it is "stamp ≤ what its origin has settled",
/// one comparison at read time and no rewrite of every version.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    pub stamp: Stamp,
    pub pending: Option<Vec<Dep>>,
}

crate::impl_versioned!(Version, Stamp = stamp);

impl DepVersion for Version {
    fn pending_checks(&self) -> Option<&[Dep]> {
        self.pending.as_deref()
    }
    fn commit(self, _now_us: u64) -> Self {
        Version { pending: None, ..self }
    }
}
