use causeway_core::{DcId, Key, NodeId, PartitionId, Value};
use serde::{Deserialize, Serialize};

/// One update's metadata, as its partition sends it to the receivers of
/// the other DCs once it has its sequence number.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpMeta {
    pub key: Key,
    pub partition: PartitionId,
    /// u.vts: one entry per DC; the origin's entry is the update's
    /// sequence number in its DC, the others the writer's causal past
    /// there (as SwiftCloud and ChainReaction, §2).
    pub vts: Vec<u64>,
    /// VClock_c\[origin\] when the update was written: its causal past in
    /// its own DC, which `vts[origin]` (its own number) no longer shows.
    /// The receiver tells concurrent updates of one DC apart by it
    /// (deviation 6).
    pub dep: u64,
}

impl OpMeta {
    /// Whether this update (from DC `origin`) may depend on `w` (from DC
    /// `w_origin`): `w` is at or below this update's causal past.
    pub fn may_depend_on(&self, origin: usize, w: &OpMeta, w_origin: usize) -> bool {
        let past = if origin == w_origin { self.dep } else { self.vts[w_origin] };
        w.vts[w_origin] <= past
    }
}

/// What a receiver asks a partition to make visible: the version of `key`
/// with order ⟨lww, origin, seq⟩ (its payload may not have arrived yet).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyOp {
    pub key: Key,
    pub lww: u64,
    pub origin: DcId,
    pub seq: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    // Client ↔ partition.
    GetReq {
        key: Key,
    },
    /// The value read and its vector timestamp (zeros when none).
    GetReply {
        key: Key,
        value: Option<Value>,
        vts: Vec<u64>,
    },
    /// An update with the client's causal past VClock_c.
    PutReq {
        key: Key,
        value: Value,
        vclock: Vec<u64>,
    },
    /// u.vts, which the client takes as its new VClock_c.
    PutReply {
        vts: Vec<u64>,
    },
    /// The server does not store `key`: a typed refusal.
    Refused {
        key: Key,
        reason: String,
    },

    // Partition → the head of its DC's sequencer chain (§7.1: "partitions
    // send requests to the head of the chain"): the next number, please,
    // for request `id`.
    SeqReq {
        id: u64,
    },
    // Sequencer replica → its successor in the chain: number `seq` is
    // request `id` of `partition` ("requests traverse the chain up to the
    // tail").
    Chain {
        partition: NodeId,
        id: u64,
        seq: u64,
    },
    // The tail → the partition ("when the tail receives a request, it
    // replies back to the partition").
    SeqReply {
        id: u64,
        seq: u64,
    },

    // Partition → sibling partitions in the other DCs: the payload, in no
    // particular order with the metadata (deviation 4).
    Payload {
        key: Key,
        version: Version,
    },
    // Partition → each other DC's receiver: an update's metadata.
    Ship {
        op: OpMeta,
    },
    // Partition → each other DC's receiver: number `seq` carries no update
    // (it was answered to a partition that had crashed and forgotten the
    // request, deviation 7).
    Skip {
        seq: u64,
    },
    // Receiver → partition (Gunawardhana et al. Alg 5 line 14, `apply`),
    // round `round`.
    Apply {
        round: u64,
        ops: Vec<ApplyOp>,
    },
    // Partition → receiver (Alg 5 line 15, `ok`): every op of the round
    // sent here is visible (or lost last-writer-wins to a visible one).
    Applied {
        round: u64,
    },
}

crate::impl_message! {
    Msg {
        client: GetReq, GetReply, PutReply, Refused;
        writes: PutReq;
        peer: SeqReq, Chain, SeqReply, Payload, Ship, Skip, Apply, Applied;
        nested: ;
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        match self {
            Msg::GetReq { key } => (key.len(), 0),
            Msg::PutReq { key, value, .. } => (key.len(), value.len()),
            _ => (0, 0),
        }
    }
    crate::key_hint!(Msg: GetReq, PutReq, Payload);
    fn items(&self) -> usize {
        match self {
            Msg::Apply { ops, .. } => ops.len(),
            _ => 1,
        }
    }
    fn payload_bytes(&self) -> usize {
        match self {
            Msg::GetReq { key } | Msg::Refused { key, .. } => key.len(),
            Msg::GetReply { key, value, .. } => key.len() + value.as_ref().map_or(0, |v| v.len()),
            Msg::PutReq { key, value, .. } | Msg::Payload { key, version: Version { value, .. } } => {
                key.len() + value.len()
            }
            Msg::Ship { op } => op.key.len(),
            Msg::Apply { ops, .. } => ops.iter().map(|o| o.key.len()).sum(),
            Msg::PutReply { .. }
            | Msg::SeqReq { .. }
            | Msg::Chain { .. }
            | Msg::SeqReply { .. }
            | Msg::Skip { .. }
            | Msg::Applied { .. } => 0,
        }
    }
}

/// A stored version: the value, its vector timestamp, and whether the
/// receiver has made it visible. Last-writer-wins order ⟨lww, origin,
/// seq⟩, where `lww` is the sum of the vector's entries (deviation 2: a
/// causal successor's vector dominates its cause's, strictly, so the sum
/// extends causality).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    /// Σ vts: the order's first field. (In a receiver's queue, where
    /// nothing is read, the sequence number: see `receiver::queue_key`.)
    pub lww: u64,
    pub origin: DcId,
    /// `vts[origin]`, the update's sequence number in its DC.
    pub seq: u64,
    pub vts: Vec<u64>,
    /// [`OpMeta::dep`]: the writer's causal past in the origin DC.
    pub dep: u64,
    /// The origin partition's clock when it applied the update (for
    /// visibility measurements only; the protocol never orders by it).
    pub at_us: u64,
    /// Local updates are visible at once; a remote payload is stored
    /// invisible until the receiver's `Apply` for it.
    pub visible: bool,
}

crate::impl_versioned!(Version, (u64, DcId, u64) = (lww, origin, seq));
