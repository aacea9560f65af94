use causeway_core::{Hlc, Key, NodeId, OpError, Value};
use serde::{Deserialize, Serialize};

/// ACCF's messages (Roohitavaf, "Consistency for Distributed Data Stores",
/// Alg 7.1 and 7.2), with the VV sharing of §7.2.2 as a report to each
/// checking group's first member and a push of the group's SVV back.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// Alg 7.1 line 4: ⟨GetReq k, cg, DSc⟩.
    GetReq(Box<GetReq>),
    /// Alg 7.2 line 7: ⟨GetReply d⟩ (its value and `d.ds`).
    GetReply(Result<Box<GetOk>, OpError>),
    /// Alg 7.1 line 9: ⟨PutReq k, v, DSc⟩.
    PutReq(Box<PutReq>),
    /// Alg 7.2 line 15: ⟨PutReply T(i), d.ds[T(i)]⟩.
    PutReply(Result<Stamp, OpError>),
    /// Alg 7.2 line 17: ⟨Replicate k, d⟩ to every other server of H(k).
    Replicate { key: Key, version: Box<Version> },
    /// §7.2.2: sent to the servers sharing keys with this one when no
    /// Replicate went to them since the last tick; `hlc` promises that no
    /// version stamped at or below it will follow.
    Heartbeat { hlc: Hlc },
    /// This server's VV, to the first member of each of its checking groups.
    VvReport { vv: Vec<Hlc> },
    /// From a checking group's first member to the others: SVV^cg, the
    /// entry-wise min of the members' VVs, for every group it leads that
    /// the receiver is in.
    SvvPush { svvs: Vec<(u16, Vec<Hlc>)> },
}

/// A message moves inline below 128 bytes with its envelopes (see
/// `docs/adding-a-protocol.md`): the variants carrying a dependency set
/// beside a key and a value are boxed.
const _: () = assert!(std::mem::size_of::<Msg>() <= 104, "an ACCF message moves inline");

crate::impl_message! {
    Msg {
        client: GetReq, GetReply, PutReply;
        writes: PutReq;
        peer: Replicate, Heartbeat, VvReport, SvvPush;
        nested: ;
    }
    /// Heartbeats, reports and pushes are summaries a later one of the same
    /// kind supersedes: every receiver takes the entry-wise max, and each
    /// is sent again on its timer.
    fn ephemeral(&self) -> bool {
        matches!(self, Msg::Heartbeat { .. } | Msg::VvReport { .. } | Msg::SvvPush { .. })
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        match self {
            Msg::GetReq(get) => (get.key.len(), 0),
            Msg::PutReq(put) => (put.key.len(), put.value.len()),
            _ => (0, 0),
        }
    }
    crate::key_hint!(Msg: Replicate; wrapping: GetReq, PutReq);
    fn payload_bytes(&self) -> usize {
        match self {
            Msg::GetReq(get) => get.key.len(),
            Msg::GetReply(Ok(ok)) => ok.value.as_ref().map_or(0, |v| v.len()),
            Msg::PutReq(put) => put.key.len() + put.value.len(),
            Msg::Replicate { key, version } => key.len() + version.value.len(),
            Msg::GetReply(Err(_))
            | Msg::PutReply(_)
            | Msg::Heartbeat { .. }
            | Msg::VvReport { .. }
            | Msg::SvvPush { .. } => 0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetReq {
    pub key: Key,
    /// The checking group whose SVV the server filters by.
    pub cg: u16,
    /// DSc.
    pub ds: Deps,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetOk {
    /// `d.v`; `None` when no version qualifies.
    pub value: Option<Value>,
    /// `d.ds`, which includes `d`'s own ⟨T(writer), ut⟩; empty with no version.
    pub ds: Deps,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutReq {
    pub key: Key,
    pub value: Value,
    /// DSc.
    pub ds: Deps,
}

/// ⟨T(i), d.ds[T(i)]⟩: the writer's tracking group and the version's timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub tg: u16,
    pub ut: Hlc,
}

/// A stored version ⟨v, ds⟩ (§7.2.1), with its timestamp and writer kept
/// apart for last-writer-wins: `ut` is `ds[T(origin)]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    pub ut: Hlc,
    /// The server that accepted the write; breaks ties on `ut`.
    pub origin: NodeId,
    pub ds: Deps,
}

// Last-writer-wins on ⟨ut, origin⟩: a version's `ut` exceeds every
// timestamp in its writer's DSc (Alg 7.2 lines 9–10), so a version that
// depends on another is also the later one.
crate::impl_versioned!(Version, (Hlc, NodeId) = (ut, origin));

/// A dependency set: at most one ⟨tracking group, timestamp⟩ entry per
/// group, sorted by group (§7.2.1).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deps(Vec<(u16, Hlc)>);

impl Deps {
    pub fn single(group: u16, t: Hlc) -> Deps {
        Deps(vec![(group, t)])
    }
    /// Entries as given, in any order: what a malformed request decodes to.
    #[cfg(test)]
    pub(super) fn unchecked(entries: Vec<(u16, Hlc)>) -> Deps {
        Deps(entries)
    }
    pub fn entries(&self) -> &[(u16, Hlc)] {
        &self.0
    }
    pub fn get(&self, group: u16) -> Option<Hlc> {
        self.0.binary_search_by_key(&group, |e| e.0).ok().map(|i| self.0[i].1)
    }
    /// `max(ds, ⟨group, t⟩)`.
    pub fn raise(&mut self, group: u16, t: Hlc) {
        match self.0.binary_search_by_key(&group, |e| e.0) {
            Ok(i) => self.0[i].1 = self.0[i].1.max(t),
            Err(i) => self.0.insert(i, (group, t)),
        }
    }
    /// `max(ds, other)`, entry-wise (Alg 7.1 lines 6 and 11).
    pub fn merge(&mut self, other: &Deps) {
        for &(g, t) in &other.0 {
            self.raise(g, t);
        }
    }
    /// "maximum value in ds" (Alg 7.2 line 9).
    pub fn max_value(&self) -> Option<Hlc> {
        self.0.iter().map(|e| e.1).max()
    }
    /// The first entry ⟨t, h⟩ with h > `bound[t]`, if any.
    pub fn first_above(&self, bound: &[Hlc]) -> Option<(u16, Hlc)> {
        self.0.iter().copied().find(|&(g, h)| bound.get(g as usize).is_none_or(|&b| h > b))
    }
    /// Every entry ⟨t, h⟩ has h ≤ `bound[t]`.
    pub fn covered_by(&self, bound: &[Hlc]) -> bool {
        self.first_above(bound).is_none()
    }
    /// As [`Deps`] assumes it: sorted, one entry per group, groups below
    /// `groups`, counters that `updateHLC` cannot overflow.
    pub fn well_formed(&self, groups: usize) -> bool {
        self.0.iter().all(|&(g, t)| (g as usize) < groups && sane(t)) && self.0.windows(2).all(|w| w[0].0 < w[1].0)
    }
}

/// HLC counters at or above this, from outside, are refused: `updateHLC`
/// adds 1 to the counter.
pub const HLC_COUNTER_LIMIT: u32 = u32::MAX / 2;

pub fn sane(t: Hlc) -> bool {
    t.c < HLC_COUNTER_LIMIT
}
