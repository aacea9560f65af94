use crate::kit::msg::payload;
use causeway_core::{DcId, Hlc, Key, NodeId, OpError, Value};
use serde::{Deserialize, Serialize};

/// Every message of the protocol. Vector names are the paper's (§4): a
/// snapshot vector TV, a dependency vector DV, the GSS; `last` is the
/// snapshot the client piggybacks ("the client always piggybacks on its
/// requests the last snapshot it has seen"), its local entry being the
/// highest local timestamp the client has seen.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// PUT(k, v) with the client's last snapshot.
    PutReq {
        key: Key,
        value: Value,
        #[serde(with = "causeway_core::clock::hlcs")]
        last: Vec<Hlc>,
    },
    /// The new version's timestamp and the partition's GSS.
    PutReply(Result<PutOk, OpError>),
    /// Client → coordinator (1½ rounds, and any ROT or GET of one
    /// partition): fix a snapshot, forward it to `others`, read `keys`.
    /// `session` is the client's cluster-wide name
    /// ([`ClientCtx::nonce`](causeway_core::ClientCtx::nonce)): with `rot`
    /// it is how the other partitions match the coordinator's snapshot to
    /// this ROT's keys, which a server's own [`ClientId`] cannot do.
    RotCoord {
        session: u64,
        rot: u64,
        keys: Vec<Key>,
        others: Vec<NodeId>,
        #[serde(with = "causeway_core::clock::hlcs")]
        last: Vec<Hlc>,
    },
    /// Client → a non-coordinator partition (1½ rounds): read `keys` at the
    /// snapshot the coordinator will send for (`session`, `rot`).
    RotRead { session: u64, rot: u64, keys: Vec<Key> },
    /// Client → coordinator (2 rounds): fix a snapshot.
    SnapshotReq {
        rot: u64,
        #[serde(with = "causeway_core::clock::hlcs")]
        last: Vec<Hlc>,
    },
    /// Coordinator → client (2 rounds): the snapshot TV.
    SnapshotReply { rot: u64, tv: Result<Vec<Hlc>, OpError> },
    /// Client → partition (2 rounds): read `keys` at `tv`.
    RotReadAt {
        rot: u64,
        keys: Vec<Key>,
        #[serde(with = "causeway_core::clock::hlcs")]
        tv: Vec<Hlc>,
    },
    /// Partition → client: one version (or none) per requested key, in
    /// request order, and the snapshot they were read at.
    RotSlice { rot: u64, slice: Result<Slice, OpError> },
    /// Coordinator → partition (1½ rounds): the snapshot of ROT `rot` of
    /// the session named `session`.
    Snapshot {
        session: u64,
        rot: u64,
        #[serde(with = "causeway_core::clock::hlcs")]
        tv: Vec<Hlc>,
    },
    /// A local version to its replicas, in timestamp order. Boxed: the
    /// version beside its key made this the largest variant (112 bytes),
    /// and every move of a message past 128 bytes with the runtime's
    /// envelope is a call to `memmove` (see CausalSpartanX's `Msg`).
    Replicate { key: Key, version: Box<Version> },
    /// The partition's clock, to its replicas when it had nothing to
    /// replicate for Δ. `last_work_us` here and on the tree messages is the
    /// idle pacing's news of work ([`pace`](crate::stabilization::pace)).
    Heartbeat { hlc: Hlc, last_work_us: u64 },
    /// Tree child → parent: the entry-wise min of the subtree's version
    /// vectors, and the largest clock in the subtree (deviation 5).
    StableReport {
        #[serde(with = "causeway_core::clock::hlcs")]
        vv_min: Vec<Hlc>,
        clock_max: Hlc,
        last_work_us: u64,
    },
    /// Tree parent → child: the DC's GSS and largest clock.
    StablePush {
        #[serde(with = "causeway_core::clock::hlcs")]
        gss: Vec<Hlc>,
        clock_max: Hlc,
        last_work_us: u64,
    },
}

const _: () = assert!(std::mem::size_of::<Msg>() <= 104, "a Contrarian message moves inline");

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutOk {
    /// The new version's timestamp, its DV entry for this DC.
    pub ts: Hlc,
    /// The partition's GSS ("exchanged between clients and partitions upon
    /// each operation").
    #[serde(with = "causeway_core::clock::hlcs")]
    pub gss: Vec<Hlc>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slice {
    /// At most one version per key: the freshest within the snapshot.
    pub values: Vec<Option<Value>>,
    #[serde(with = "causeway_core::clock::hlcs")]
    pub tv: Vec<Hlc>,
}

crate::impl_message! {
    Msg {
        client: PutReply, RotCoord, RotRead, SnapshotReq, SnapshotReply, RotReadAt, RotSlice;
        writes: PutReq;
        peer: Snapshot, Replicate, Heartbeat, StableReport, StablePush;
        nested: ;
    }
    fn ephemeral(&self) -> bool {
        crate::stabilization::ephemeral_kind(self.kind())
    }
    /// A coordinator's snapshot for a 1½-round read may be lost: the
    /// partition drops a read half whose other half never came after
    /// `orphan_read_timeout_us`, and the client's deadline covers the ROT
    /// (Didona et al. §4 assume reliable channels; a read needs no
    /// durability, so the runtime sends it once, unjournaled).
    fn transient(&self) -> bool {
        matches!(self, Msg::Snapshot { .. })
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        let longest = |keys: &[Key]| keys.iter().map(|k| k.len()).max().unwrap_or(0);
        match self {
            Msg::PutReq { key, value, .. } => (key.len(), value.len()),
            Msg::RotCoord { keys, .. } | Msg::RotRead { keys, .. } | Msg::RotReadAt { keys, .. } => {
                (longest(keys), 0)
            }
            _ => (0, 0),
        }
    }
    crate::key_hint!(Msg: PutReq, Replicate);
    fn payload_bytes(&self) -> usize {
        match self {
            Msg::PutReq { key, value, .. } => key.len() + value.len(),
            Msg::Replicate { key, version } => key.len() + version.value.len(),
            Msg::RotCoord { keys, .. } | Msg::RotRead { keys, .. } | Msg::RotReadAt { keys, .. } => {
                payload(keys.iter().map(|k| &k[..]))
            }
            Msg::RotSlice { slice: Ok(s), .. } => payload(s.values.iter().flatten().map(|v| &v[..])),
            Msg::PutReply(_)
            | Msg::SnapshotReq { .. }
            | Msg::SnapshotReply { .. }
            | Msg::RotSlice { slice: Err(_), .. }
            | Msg::Snapshot { .. }
            | Msg::Heartbeat { .. }
            | Msg::StableReport { .. }
            | Msg::StablePush { .. } => 0,
        }
    }
}

/// A stored version X: its value, timestamp `ts` (an HLC reading at the
/// origin), origin DC `sr`, and dependency vector `dv` (§4: "if X.DV[i] = t
/// then X (potentially) causally depends on all the items originally
/// written in DC_i with a timestamp up to t"); `dv[sr] == ts`, and `ts`
/// exceeds every other entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    pub ts: Hlc,
    pub sr: DcId,
    #[serde(with = "causeway_core::clock::hlcs")]
    pub dv: Vec<Hlc>,
}

crate::stabilization::partition::vector_version!(Version, Hlc);

/// HLC counters at or above this, from outside, are refused: the HLC adds 1
/// to a counter it adopts and would overflow near `u32::MAX`.
pub const HLC_COUNTER_LIMIT: u32 = u32::MAX / 2;

pub(super) fn sane(t: Hlc) -> bool {
    t.c < HLC_COUNTER_LIMIT
}

pub(super) fn valid_vector(v: &[Hlc], dcs: usize) -> bool {
    v.len() == dcs && v.iter().all(|&t| sane(t))
}

/// A replicated version as this module writes it
/// ([`well_formed`](crate::stabilization::partition::well_formed)), its
/// HLCs sane.
pub(super) fn valid_version(v: &Version, dcs: usize) -> bool {
    valid_vector(&v.dv, dcs) && crate::stabilization::partition::well_formed(v, dcs)
}
