use crate::kit::msg::payload;
use causeway_core::{DcId, Key, OpError, TimeVec, Value};
use serde::{Deserialize, Serialize};

/// A physical-clock time in µs: every Cure timestamp and vector entry.
pub type TimeUs = u64;

/// Every message of the protocol, in the shape Didona et al. §5 give the
/// three protocols they compare (one code base, the GET/PUT/ROT API).
/// `last` is the client's last snapshot: entry m the highest local
/// timestamp it has seen, entry i ≠ m the highest GST entry.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// PUT(k, v) with the client's last snapshot (its dependencies).
    PutReq {
        key: Key,
        value: Value,
        #[serde(with = "causeway_core::clock::times")]
        last: TimeVec,
    },
    PutReply(Result<PutOk, OpError>),
    /// A ROT (or GET) of keys of one partition: it fixes the snapshot and reads.
    ReadOne {
        rot: u64,
        keys: Vec<Key>,
        #[serde(with = "causeway_core::clock::times")]
        last: TimeVec,
    },
    /// First round: the coordinator fixes a snapshot.
    SnapshotReq {
        rot: u64,
        last: Vec<TimeUs>,
    },
    SnapshotReply {
        rot: u64,
        tv: Result<Vec<TimeUs>, OpError>,
    },
    /// Second round: read `keys` at `tv`.
    RotReadAt {
        rot: u64,
        keys: Vec<Key>,
        tv: Vec<TimeUs>,
    },
    /// One version (or none) per key, in request order, and the snapshot.
    RotSlice {
        rot: u64,
        slice: Result<Slice, OpError>,
    },
    /// A local version to its replicas, in timestamp order.
    Replicate {
        key: Key,
        version: Version,
    },
    /// The partition's clock, when it had nothing to replicate for Δ.
    /// `last_work_us` here and on the tree messages is the idle pacing's
    /// news of work ([`pace`](crate::stabilization::pace)).
    Heartbeat {
        clock_us: TimeUs,
        last_work_us: u64,
    },
    /// Tree child → parent: the entry-wise min of the subtree's VVs.
    StableReport {
        vv_min: Vec<TimeUs>,
        last_work_us: u64,
    },
    /// Tree parent → child: the DC's GST vector.
    StablePush {
        gst: Vec<TimeUs>,
        last_work_us: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutOk {
    pub ts: TimeUs,
    #[serde(with = "causeway_core::clock::times")]
    pub gst: TimeVec,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slice {
    pub values: Vec<Option<Value>>,
    #[serde(with = "causeway_core::clock::times")]
    pub tv: TimeVec,
}

crate::impl_message! {
    Msg {
        client: PutReply, ReadOne, SnapshotReq, SnapshotReply, RotReadAt, RotSlice;
        writes: PutReq;
        peer: Replicate, Heartbeat, StableReport, StablePush;
        nested: ;
    }
    fn ephemeral(&self) -> bool {
        crate::stabilization::ephemeral_kind(self.kind())
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        let longest = |keys: &[Key]| keys.iter().map(|k| k.len()).max().unwrap_or(0);
        match self {
            Msg::PutReq { key, value, .. } => (key.len(), value.len()),
            Msg::ReadOne { keys, .. } | Msg::RotReadAt { keys, .. } => (longest(keys), 0),
            _ => (0, 0),
        }
    }
    crate::key_hint!(Msg: PutReq, Replicate);
    fn payload_bytes(&self) -> usize {
        match self {
            Msg::PutReq { key, value, .. } | Msg::Replicate { key, version: Version { value, .. } } => {
                key.len() + value.len()
            }
            Msg::ReadOne { keys, .. } | Msg::RotReadAt { keys, .. } => payload(keys.iter().map(|k| &k[..])),
            Msg::RotSlice { slice: Ok(s), .. } => payload(s.values.iter().flatten().map(|v| &v[..])),
            Msg::PutReply(_)
            | Msg::SnapshotReq { .. }
            | Msg::SnapshotReply { .. }
            | Msg::RotSlice { slice: Err(_), .. }
            | Msg::Heartbeat { .. }
            | Msg::StableReport { .. }
            | Msg::StablePush { .. } => 0,
        }
    }
}

/// A stored version: value, physical timestamp `ts` at the origin DC `sr`,
/// and dependency vector `dv` (`dv[sr] == ts`, every other entry below).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    pub ts: TimeUs,
    pub sr: DcId,
    /// Inline ([`TimeVec`]): a snapshot check reads it right after the
    /// version's timestamp, and a `Vec` put it one more cache miss away
    /// (Cure's `in_snapshot` was 3 % of a bench's CPU, nearly all of it
    /// that miss, at reads and at each write's collection).
    #[serde(with = "causeway_core::clock::times")]
    pub dv: TimeVec,
}

crate::stabilization::partition::vector_version!(Version, TimeUs);
