use causeway_core::{DcId, Key, PartitionId, Value};
use serde::{Deserialize, Serialize};

/// One update's metadata, as a partition reports it to Eunomia and
/// Eunomia ships it (§5 "separation of data and metadata": the update's id
/// ⟨u.vts\[m\], Key\⟩ and its partition; the vector travels with it because
/// the receiver's dependency check needs it, Alg 5 line 12).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpMeta {
    pub key: Key,
    pub partition: PartitionId,
    /// u.vts: one entry per DC; the origin's entry is the update's
    /// timestamp, by which Eunomia orders it.
    pub vts: Vec<u64>,
    /// VClock_c\[origin\] when the update was written: its causal past in
    /// its own DC, which `vts[origin]` (its own timestamp) no longer shows.
    /// The receiver tells concurrent updates of one DC apart by it
    /// (deviation 8).
    pub dep_us: u64,
}

impl OpMeta {
    /// Whether this update (from DC `origin`) may depend on `w` (from DC
    /// `w_origin`): `w` is at or below this update's causal past.
    pub fn may_depend_on(&self, origin: usize, w: &OpMeta, w_origin: usize) -> bool {
        let past = if origin == w_origin { self.dep_us } else { self.vts[w_origin] };
        w.vts[w_origin] <= past
    }
}

/// What a receiver asks a partition to make visible: the version of `key`
/// with order ⟨ts, origin⟩ (its payload may not have arrived yet).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyOp {
    pub key: Key,
    pub ts: u64,
    pub origin: DcId,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    // Client ↔ partition (Alg 1, Alg 2).
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

    // Partition → sibling partitions in the other DCs (§5: the payload
    // travels directly, with no ordering constraint).
    Payload {
        key: Key,
        version: Version,
    },
    // Partition → every Eunomia replica of its DC (Alg 2 line 8, Alg 4
    // `new_batch`): the batch's updates in timestamp order, then the
    // partition's time.
    Report {
        partition: PartitionId,
        ops: Vec<OpMeta>,
        partition_time_us: u64,
    },
    // Partition → every Eunomia replica of its DC (Alg 2 line 12): no
    // update of this partition will be stamped at or below this time.
    Heartbeat {
        partition: PartitionId,
        partition_time_us: u64,
    },
    // Eunomia leader → each remote DC's receiver (Alg 3 line 10): every
    // update of this DC with `from_us < ts ≤ to_us` (StableTime), in
    // timestamp order.
    Ship {
        from_us: u64,
        to_us: u64,
        ops: Vec<OpMeta>,
    },
    // Eunomia replica → the other replicas: alive (the failure detector's
    // heartbeat) and its StableTime (Alg 4 line 12, `stable`).
    ReplicaBeat {
        stable_us: u64,
    },
    // Receiver → every Eunomia replica of DC k: every update of k at or
    // below this time is queued here (deviation 7; not in the paper).
    Shipped {
        through_us: u64,
    },
    // Receiver → partition (Alg 5 line 14, `apply`), round `round`.
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
        peer: Payload, Report, Heartbeat, Ship, ReplicaBeat, Shipped, Apply, Applied;
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
            Msg::Report { ops, .. } | Msg::Ship { ops, .. } => ops.len(),
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
            Msg::Report { ops, .. } | Msg::Ship { ops, .. } => ops.iter().map(|o| o.key.len()).sum(),
            Msg::Apply { ops, .. } => ops.iter().map(|o| o.key.len()).sum(),
            Msg::PutReply { .. } | Msg::Heartbeat { .. } | Msg::ReplicaBeat { .. } | Msg::Shipped { .. } | Msg::Applied { .. } => 0,
        }
    }
    /// The heartbeats, a partition's and the failure detector's, and a
    /// receiver's acknowledgement: the newest says all (each only grows),
    /// one is sent every period (a receiver's with each shipment it
    /// takes), and each leaves after every report sent before it. A
    /// partition's promise outlives a crash through its clock lease, so
    /// neither end journals it.
    fn ephemeral(&self) -> bool {
        matches!(self, Msg::Heartbeat { .. } | Msg::ReplicaBeat { .. } | Msg::Shipped { .. })
    }
}

/// A stored version: the value, its vector timestamp, and whether the
/// receiver has made it visible. Last-writer-wins order ⟨vts\[origin\],
/// origin⟩ (see the module's deviation 2: it extends causality).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    /// `vts[origin]`, the order's first field.
    pub ts: u64,
    pub origin: DcId,
    pub vts: Vec<u64>,
    /// [`OpMeta::dep_us`]: the writer's causal past in the origin DC.
    pub dep_us: u64,
    /// Local updates are visible at once; a remote payload is stored
    /// invisible until the receiver's `Apply` for it (§5).
    pub visible: bool,
}

crate::impl_versioned!(Version, (u64, DcId) = (ts, origin));
