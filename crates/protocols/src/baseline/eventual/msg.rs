use causeway_core::{DcId, Key, Value};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    GetReq {
        key: Key,
    },
    GetReply {
        key: Key,
        value: Option<Value>,
    },
    /// Several reads from one server: Cassandra's `multiget_slice` as a
    /// client library splits a multi-key read per server (Lloyd §7.3.1),
    /// so Eventual's multi-key reads cost what the causal protocols'
    /// per-server read rounds cost.
    GetBatch {
        keys: Vec<Key>,
    },
    GetBatchReply {
        values: Vec<(Key, Option<Value>)>,
    },
    PutReq {
        key: Key,
        value: Value,
    },
    /// Several writes to one server, applied independently (not atomic):
    /// Cassandra's `batch_mutate` as a client library splits it per server
    /// (Lloyd §7.3.1), used for write-only and read-write transactions'
    /// writes. One `PutReply` answers it.
    PutBatch {
        writes: Vec<(Key, Value)>,
    },
    PutReply,
    /// The server does not store `key` (the client's placement is wrong):
    /// the request is refused, never silently dropped or misapplied.
    Refused {
        key: Key,
        reason: String,
    },
    Replicate {
        key: Key,
        version: Version,
    },
    /// Several columns of one row written by one `PutBatch`, shipped in one
    /// message: Cassandra replicates a row's mutation as one message
    /// (Lloyd's dissertation §7.3.5, "columns per key": the columns of a
    /// row travel together). A batch's single-column rows (plain keys) go
    /// as `Replicate`s.
    ReplicateRow {
        writes: Vec<(Key, Version)>,
    },
}

crate::impl_message! {
    Msg {
        client: GetReq, GetBatch, GetReply, GetBatchReply, PutReply, Refused;
        writes: PutReq, PutBatch;
        peer: Replicate, ReplicateRow;
        nested: ;
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        match self {
            Msg::GetReq { key } => (key.len(), 0),
            Msg::GetBatch { keys } => (keys.iter().map(|k| k.len()).max().unwrap_or(0), 0),
            Msg::PutReq { key, value } => (key.len(), value.len()),
            Msg::PutBatch { writes } => writes.iter().fold((0, 0), |(k, v), (key, value)| {
                (k.max(key.len()), v.max(value.len()))
            }),
            _ => (0, 0),
        }
    }
    crate::key_hint!(Msg: GetReq, PutReq, Replicate);
    fn payload_bytes(&self) -> usize {
        match self {
            Msg::GetReq { key } => key.len(),
            Msg::GetReply { key, value } => key.len() + value.as_ref().map_or(0, |v| v.len()),
            Msg::GetBatch { keys } => keys.iter().map(|k| k.len()).sum(),
            Msg::GetBatchReply { values } => values.iter().map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len())).sum(),
            Msg::PutReq { key, value } | Msg::Replicate { key, version: Version { value, .. } } => {
                key.len() + value.len()
            }
            Msg::PutBatch { writes } => writes.iter().map(|(k, v)| k.len() + v.len()).sum(),
            Msg::ReplicateRow { writes } => writes.iter().map(|(k, v)| k.len() + v.value.len()).sum(),
            Msg::Refused { key, .. } => key.len(),
            Msg::PutReply => 0,
        }
    }
}

/// A stored version: the value and its last-writer-wins position ⟨ts, dc⟩.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    pub ts: u64,
    pub dc: DcId,
}

crate::impl_versioned!(Version, (u64, DcId) = (ts, dc));
