use crate::kit::msg::payload;
use causeway_core::{DcId, DepSet, Hlc, HlcVec, Key, OpError, Value};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// Alg 5.1 GET → line 1.
    GetReq {
        key: Key,
        #[serde(with = "causeway_core::clock::hlcs")]
        dsv: HlcVec,
    },
    /// Line 5: ⟨v, ds, DSV⟩, plus the value's ⟨ut, sr⟩.
    GetReply(Result<Box<GetOk>, OpError>),
    /// Alg 5.1 PUT → line 6 ([`PutReq`]).
    PutReq(Box<PutReq>),
    /// ⟨PutReply ut, sr⟩.
    PutReply(Result<Stamp, OpError>),
    /// Alg 5.4 line 9 ([`RotReq`]).
    RotReq(Box<RotReq>),
    /// ⟨ROTXReply vset, dsv, ds⟩, values in request order.
    RotReply(Result<Box<RotOk>, OpError>),
    /// Line 20: ⟨SliceReq keys, sv⟩ for the keys of one partition.
    SliceReq {
        rot: u64,
        keys: Vec<Key>,
        #[serde(with = "causeway_core::clock::hlcs")]
        sv: Vec<Hlc>,
    },
    /// Line 23, one item per requested key.
    SliceReply { rot: u64, slice: Result<SliceOk, OpError> },
    /// Line 19.
    Replicate { key: Key, version: Box<Version> },
    /// Alg 5.3: `⟨Heartbeat VV[m]⟩`. `last_work_us` here and on the tree
    /// messages is the idle pacing's news of work
    /// ([`pace`](crate::stabilization::pace)), not part of the thesis.
    Heartbeat { hlc: Hlc, last_work_us: u64 },
    /// Entry-wise min of the VVs of a subtree, sent to the parent.
    StableReport {
        #[serde(with = "causeway_core::clock::hlcs")]
        vv_min: Vec<Hlc>,
        last_work_us: u64,
    },
    /// The DC's stable vector, pushed down from the root.
    StablePush {
        #[serde(with = "causeway_core::clock::hlcs")]
        dsv: Vec<Hlc>,
        last_work_us: u64,
    },
}

/// Every move of a message (decoded, queued for the protocol thread, handed
/// to a handler, queued for release, to a link or a reply writer) copies it,
/// wrapped in the runtime's envelopes, which add up to 24 bytes. Up to 128
/// bytes the compiler copies inline; past that, every move is a call to
/// `memmove`, which was the largest single cost CausalSpartanX had over
/// Eventual (176 bytes then). So the variants whose fields carry a
/// dependency set and a vector next to a key and value are boxed: one
/// allocation per such message, in place of a dozen out-of-line copies.
/// Boxing does not change the encoding (serde sees through `Box`).
const _: () = assert!(std::mem::size_of::<Msg>() <= 104, "a CausalSpartanX message moves inline");

crate::impl_message! {
    Msg {
        client: GetReq, GetReply, PutReply, RotReq, RotReply;
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
            Msg::PutReq(put) => put
                .past
                .iter()
                .map(|p| (p.key.len(), p.value.len()))
                .fold((put.key.len(), put.value.len()), |(k, v), (pk, pv)| (k.max(pk), v.max(pv))),
            Msg::RotReq(rot) => (rot.keys.iter().map(|k| k.len()).max().unwrap_or(0), 0),
            _ => (0, 0),
        }
    }
    crate::key_hint!(Msg: GetReq, Replicate; wrapping: PutReq);
    fn payload_bytes(&self) -> usize {
        let items = |items: &[Option<ReadItem>]| payload(items.iter().flatten().map(|i| &i.value[..]));
        match self {
            Msg::GetReq { key, .. } => key.len(),
            Msg::GetReply(Ok(ok)) => ok.item.as_ref().map_or(0, |i| i.value.len()),
            Msg::PutReq(put) => put.key.len() + put.value.len(),
            Msg::Replicate { key, version } => key.len() + version.value.len(),
            Msg::RotReq(rot) => payload(rot.keys.iter().map(|k| &k[..])),
            Msg::SliceReq { keys, .. } => payload(keys.iter().map(|k| &k[..])),
            Msg::RotReply(Ok(r)) => items(&r.items),
            Msg::SliceReply { slice: Ok(s), .. } => items(&s.items),
            Msg::GetReply(Err(_))
            | Msg::PutReply(_)
            | Msg::RotReply(Err(_))
            | Msg::SliceReply { slice: Err(_), .. }
            | Msg::Heartbeat { .. }
            | Msg::StableReport { .. }
            | Msg::StablePush { .. } => 0,
        }
    }
}

/// Alg 5.1 PUT → line 6: ⟨PUT k, v, DSc⟩. Plus the client's DSVc
/// (deviation 12): the stability the client has seen travels with its write,
/// as line 7 intended, without merging DS. Plus `past`, the client's cache
/// (deviation 14): the versions of its causal past that slices may not
/// return yet, stored with the write so that a reader of it can cache them
/// too.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutReq {
    pub key: Key,
    pub value: Value,
    pub ds: DepSet<Hlc>,
    #[serde(with = "causeway_core::clock::hlcs")]
    pub dsv: HlcVec,
    pub past: Vec<PastItem>,
}

/// Alg 5.4 line 9: ⟨ROTX kset, DSVc, DSc⟩.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RotReq {
    pub keys: Vec<Key>,
    #[serde(with = "causeway_core::clock::hlcs")]
    pub dsv: Vec<Hlc>,
    pub ds: DepSet<Hlc>,
}

/// A value as a reader receives it, with its last-writer-wins position ⟨ut, sr⟩.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadItem {
    pub value: Value,
    pub ut: Hlc,
    pub sr: DcId,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetOk {
    /// `None` when no version of the key is visible.
    pub item: Option<ReadItem>,
    /// `maxDS(d.ds, {⟨d.sr, d.ut⟩})` (line 4); empty with no item.
    pub ds: DepSet<Hlc>,
    #[serde(with = "causeway_core::clock::hlcs")]
    pub dsv: HlcVec,
    /// For a local item, the part of its writer's cache that `dsv` does not
    /// cover (deviation 14); empty otherwise.
    pub past: Vec<PastItem>,
}

/// A version in a writer's causal past that slices may not return yet
/// (deviation 14): an entry of the writer's cache, with its key. `ds` is
/// `maxDS(d.ds, {⟨sr, ut⟩})`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PastItem {
    pub key: Key,
    pub value: Value,
    pub ut: Hlc,
    pub sr: DcId,
    pub ds: DepSet<Hlc>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub ut: Hlc,
    pub sr: DcId,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RotOk {
    pub items: Vec<Option<ReadItem>>,
    /// The snapshot vector `sv`.
    #[serde(with = "causeway_core::clock::hlcs")]
    pub dsv: Vec<Hlc>,
    /// maxDS of the returned versions' `maxDS(d.ds, {⟨d.sr, d.ut⟩})`.
    pub ds: DepSet<Hlc>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceOk {
    pub items: Vec<Option<ReadItem>>,
    pub ds: DepSet<Hlc>,
}

/// A stored version (§5.2): value, update time `ut` (HLC), source DC `sr`,
/// and dependency set `ds`, the writer's DS (at most one entry per DC).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    pub ut: Hlc,
    pub sr: DcId,
    pub ds: DepSet<Hlc>,
    /// At the origin DC only: the writer's cache entries this DC's DSV did
    /// not cover when the write arrived (deviation 14). A GET that returns
    /// this version hands them to the reader, so the reader's ROTXs can
    /// return them without waiting for remote stability. Empty in replicas:
    /// a remote DC admits the version only once its `ds`, which covers every
    /// one of them, is stable there. A boxed slice, not a `Vec`: nearly
    /// always empty, and 8 bytes smaller keeps a version at 128 bytes, which
    /// moves inline (see the assertion on `Msg`'s size).
    pub past: Box<[PastItem]>,
}

const _: () = assert!(std::mem::size_of::<Version>() <= 128, "a CausalSpartanX version moves inline");

// Lexicographic ⟨ut, sr⟩: ties on `ut` go to the higher DC id (Obs 8).
crate::impl_versioned!(Version, (Hlc, DcId) = (ut, sr));

impl Version {
    /// `maxDS(d.ds, {⟨d.sr, d.ut⟩})`: the version and everything it depends on.
    pub(super) fn full_ds(&self) -> DepSet<Hlc> {
        self.ds.raised(self.sr, self.ut)
    }
    pub(super) fn read_item(&self) -> ReadItem {
        ReadItem { value: causeway_core::copy_if_short(&self.value), ut: self.ut, sr: self.sr }
    }
}

/// GET visibility (Alg 5.2 line 3): local, or every dependency stable.
pub(super) fn get_visible(d: &Version, m: DcId, dsv: &[Hlc]) -> bool {
    d.sr == m || d.ds.covered_by(dsv)
}

/// Slice visibility (Alg 5.4 line 22): the version itself and every dependency
/// are within the snapshot, `maxDS(d.ds, {⟨d.sr, d.ut⟩}) ≤ sv`.
pub(super) fn slice_visible(d: &Version, sv: &[Hlc]) -> bool {
    sv.get(d.sr.idx()).is_some_and(|&t| d.ut <= t) && d.ds.covered_by(sv)
}

/// Every entry of `ds` except DC `m`'s is ≤ `dsv`: whatever `ds` names from
/// remote DCs has reached every partition of this DC.
pub(super) fn covered_remote(ds: &DepSet<Hlc>, dsv: &[Hlc], m: DcId) -> bool {
    ds.entries().iter().all(|&(dc, t)| dc == m || dsv.get(dc.idx()).is_some_and(|&v| t <= v))
}

/// HLC counters at or above this, from outside, are refused: `updateHLC` adds 1
/// to the counter and would overflow near `u32::MAX`.
pub const HLC_COUNTER_LIMIT: u32 = u32::MAX / 2;

pub(super) fn sane(t: Hlc) -> bool {
    t.c < HLC_COUNTER_LIMIT
}

/// A dependency set as [`DepSet`] assumes it: sorted by DC, one entry each, DCs
/// in range. Deserialisation does not guarantee any of that.
pub(super) fn valid_ds(ds: &DepSet<Hlc>, dcs: usize) -> bool {
    let e = ds.entries();
    e.iter().all(|&(dc, t)| dc.idx() < dcs && sane(t)) && e.windows(2).all(|w| w[0].0 < w[1].0)
}

/// A past item as [`PastItem`] documents it: a sane stamp within its own
/// well-formed `ds`.
pub(super) fn valid_past(p: &PastItem, dcs: usize) -> bool {
    p.sr.idx() < dcs && sane(p.ut) && valid_ds(&p.ds, dcs) && p.ds.get(p.sr).is_some_and(|t| t >= p.ut)
}

pub(super) fn valid_vector(v: &[Hlc], dcs: usize) -> bool {
    v.len() == dcs && v.iter().all(|&t| sane(t))
}

pub(super) fn malformed(what: &str) -> OpError {
    OpError::Aborted(format!("malformed {what}"))
}
