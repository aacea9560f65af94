use crate::kit::msg::payload;
use causeway_core::{DcId, Key, Value};
use serde::{Deserialize, Serialize};

/// A physical-clock time in µs. Every GentleRain timestamp — a version's
/// `ut`, a client's `dt` (DT_c), a GST, a heartbeat — is one.
pub type TimeUs = u64;

/// Every message of the protocol.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// ⟨GetReq k, GST_c⟩.
    GetReq { key: Key, gst: TimeUs },
    /// ⟨GetReply v, ut, GST⟩; `ut` is 0 when no version is visible.
    GetReply { value: Option<Value>, ut: TimeUs, gst: TimeUs },
    /// ⟨PutReq k, v, DT_c⟩, plus GST_c (deviation 1).
    PutReq { key: Key, value: Value, dt: TimeUs, gst: TimeUs },
    /// ⟨PutReply ut⟩.
    PutReply { ut: TimeUs },
    /// A GET or PUT refused: this server does not store the key.
    Refused { reason: String },
    /// GET-ROTX ⟨keys, DT_c, GST_c⟩ to the coordinator.
    RotReq { keys: Vec<Key>, dt: TimeUs, gst: TimeUs },
    /// The ROT's outcome and the coordinator's GST.
    RotReply { outcome: RotOutcome, gst: TimeUs },
    /// Coordinator → partition of the same DC: read `keys` at `snapshot`.
    SliceReq { rot: u64, keys: Vec<Key>, snapshot: TimeUs },
    /// One [`SliceRead`] per requested key, in request order.
    SliceReply { rot: u64, reads: Vec<SliceRead> },
    /// ⟨Replicate d⟩ to the equivalents in the other DCs, in `ut` order.
    Replicate { key: Key, version: Version },
    /// ⟨Heartbeat clock⟩ to the equivalents. `last_work_us` here and on the
    /// tree messages is the idle pacing's news of work
    /// ([`pace`](crate::stabilization::pace)), not part of the paper.
    Heartbeat { clock: TimeUs, last_work_us: TimeUs },
    /// Tree child → parent: entry-wise min of the subtree's VVs.
    StableReport { vv: Vec<TimeUs>, last_work_us: TimeUs },
    /// Tree parent → child: the DC's GST.
    StablePush { gst: TimeUs, last_work_us: TimeUs },
}

/// What a GET-ROTX returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RotOutcome {
    /// One value per requested key, in request order, and the largest `ut`
    /// among them (the client raises DT_c to it).
    Read {
        values: Vec<Option<Value>>,
        max_ut: TimeUs,
    },
    Aborted {
        reason: String,
    },
}

/// One key's answer to a slice request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SliceRead {
    /// The latest version with `ut ≤ snapshot`.
    Found { value: Value, ut: TimeUs },
    /// The key has no version at or below the snapshot.
    Absent,
    /// No version at or below the snapshot is left, but GC dropped some: the
    /// snapshot's version may have been one of them.
    Pruned,
}

crate::impl_message! {
    Msg {
        client: GetReq, GetReply, PutReply, Refused, RotReq, RotReply;
        writes: PutReq;
        peer: SliceReq, SliceReply, Replicate, Heartbeat, StableReport, StablePush;
        nested: ;
    }
    fn ephemeral(&self) -> bool {
        crate::stabilization::ephemeral_kind(self.kind())
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        match self {
            Msg::GetReq { key, .. } => (key.len(), 0),
            Msg::PutReq { key, value, .. } => (key.len(), value.len()),
            Msg::RotReq { keys, .. } => (keys.iter().map(|k| k.len()).max().unwrap_or(0), 0),
            _ => (0, 0),
        }
    }
    crate::key_hint!(Msg: GetReq, PutReq, Replicate);
    fn payload_bytes(&self) -> usize {
        match self {
            Msg::GetReq { key, .. } => key.len(),
            Msg::GetReply { value, .. } => value.as_ref().map_or(0, |v| v.len()),
            Msg::PutReq { key, value, .. } | Msg::Replicate { key, version: Version { value, .. } } => {
                key.len() + value.len()
            }
            Msg::RotReq { keys, .. } | Msg::SliceReq { keys, .. } => payload(keys.iter().map(|k| &k[..])),
            Msg::RotReply { outcome: RotOutcome::Read { values, .. }, .. } => {
                payload(values.iter().flatten().map(|v| &v[..]))
            }
            Msg::SliceReply { reads, .. } => payload(reads.iter().filter_map(|r| match r {
                SliceRead::Found { value, .. } => Some(&value[..]),
                SliceRead::Absent | SliceRead::Pruned => None,
            })),
            Msg::RotReply { outcome: RotOutcome::Aborted { .. }, .. }
            | Msg::PutReply { .. }
            | Msg::Refused { .. }
            | Msg::Heartbeat { .. }
            | Msg::StableReport { .. }
            | Msg::StablePush { .. } => 0,
        }
    }
}

/// A stored version d: ⟨d.v, d.ut, d.sr⟩ (DKVF's `Record`), ordered by ⟨ut, sr⟩.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    /// Update time: the origin server's physical clock when it accepted the PUT.
    pub ut: TimeUs,
    /// Source replica: the DC the PUT was accepted in.
    pub sr: DcId,
}

crate::impl_versioned!(Version, (TimeUs, DcId) = (ut, sr));
