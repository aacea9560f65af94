use super::config::*;
use super::msg::*;
use crate::kit::client::{client_server_for, fail_unsupported};
use causeway_core::{Client, ClientCtx, ClientEnv, DcId, DepSet, Hlc, Key, NodeId, Op, OpError, OpResult, Value, vmax};
use std::collections::BTreeMap;

/// A client session (Alg 5.1), sticky to its DC.
///
/// ## The cache, and why ROTX results stay causal snapshots
///
/// Because the DS no longer raises `sv` (module doc), a slice can miss a
/// version this client has already seen: a remote version read by GET whose
/// own ⟨sr, ut⟩ is not yet ≤ `DSVc`, or the client's own write that depends on
/// one. The cache keeps those versions (key → value, ut, sr, and
/// `ds = maxDS(d.ds, {⟨sr, ut⟩})`). An entry leaves once every remote entry of
/// its `ds` is ≤ `DSVc`; for a version read by GET that is `DSVc[sr] ≥ ut`. A
/// ROTX returns, per key, the newer by ⟨ut, sr⟩ of the slice's version and the
/// cached one.
///
/// **Claim.** The result is causally consistent (Def 18/20): if `r_a` is
/// returned and `r_a dep v2` with `v2` of key `b`, then `r_b ≥ v2`. Under
/// last-writer-wins with Obs 7 that is what visible+ means.
///
/// - `r_a` came from a slice: `maxDS(r_a.ds, ⟨sr, ut⟩) ≤ sv`. By Obs 5/6,
///   `v2.ut ≤ r_a.ds[v2.sr] ≤ sv[v2.sr]` and `v2.ds ≤ r_a.ds ≤ sv`, so `v2` is
///   slice-eligible. It is present at b: a remote `v2` because `sv` is built
///   from genuine DSVs only, so `sv ≤ DSV_real`; a local `v2` because it was
///   written there, and before b's slice was read (line 21 and line 8 give any
///   later local write at b `ut > sv[m]`). If GC pruned it, every retained
///   version is newer, and a slice with nothing eligible aborts. So
///   `r_b ≥ slice_b ≥ v2`.
/// - `r_a` is a cached remote version read by GET: line 3 admitted it because
///   `r_a.ds ≤ DSV` at that server, which was merged into `DSVc ≤ sv`. Its
///   dependencies are therefore slice-eligible and present, as above.
/// - `r_a` is a cached own write: its dependencies are this client's earlier
///   reads and writes and their dependencies. Each is slice-eligible (covered,
///   as above), cached, or superseded in the cache by a newer version of its
///   key, as long as every version the client has *read* was one of these. So
///   the claim holds provided no "tainted" version has been read (next point).
///
/// **Taint.** A GET of a local version written by *another* client can return a
/// version whose remote dependencies are not covered by `DSVc` (its writer read
/// a fresh remote version). This client knows neither those dependencies nor
/// their values, so it cannot cache the version soundly. It records the
/// uncovered entries in `taint` and does not cache the version. While
/// `taint ≰ DSVc`, its own writes go to `held`, not the cache, because they
/// depend on the tainted read. Once `DSVc` covers `taint`, the tainted reads
/// are slice-eligible and the held writes move to the cache. A ROTX issued in
/// that window carries the taint, and the coordinator waits until its DSV
/// covers it (deviation 13): only then is every version the client has seen
/// slice-eligible or cached. Without the wait, the ROTX could return an older
/// version of a key than the client had read or written (found by
/// `causeway torture`).
pub struct CsxClient {
    ctx: ClientCtx,
    paper_dsv_merge: bool,
    /// DSc: per DC, the largest `ut` this client depends on.
    ds: DepSet<Hlc>,
    /// DSVc: the largest DSV this client has been given.
    dsv: Vec<Hlc>,
    /// Versions seen by this client (GET or own PUT) that slices may not
    /// return yet, and that are sound to merge into a ROTX result.
    pub(super) cache: BTreeMap<Key, Cached>,
    /// Own writes made while tainted: moved to `cache` once the taint clears.
    pub(super) held: BTreeMap<Key, Cached>,
    /// Per DC, the largest uncovered dependency of a tainted read.
    taint: Vec<Hlc>,
    pending: Option<Pending>,
}

#[derive(Clone, Debug)]
pub(super) struct Cached {
    value: Value,
    ut: Hlc,
    sr: DcId,
    /// `maxDS(d.ds, {⟨sr, ut⟩})`.
    ds: DepSet<Hlc>,
}

impl Cached {
    fn order(&self) -> (Hlc, DcId) {
        (self.ut, self.sr)
    }
}

/// Keep the newer of the present entry and `c`.
pub(super) fn remember(map: &mut BTreeMap<Key, Cached>, key: Key, c: Cached) {
    match map.get(&key) {
        Some(old) if old.order() >= c.order() => {}
        _ => {
            map.insert(key, c);
        }
    }
}

pub(super) enum Pending {
    Get { key: Key },
    Put { key: Key, value: Value, ds: DepSet<Hlc> },
    Rot { keys: Vec<Key> },
}

impl CsxClient {
    pub(super) fn new(cfg: &Config, ctx: ClientCtx) -> Self {
        let dcs = ctx.topology.dcs();
        CsxClient {
            ctx,
            paper_dsv_merge: cfg.paper_dsv_merge,
            ds: DepSet::new(),
            dsv: vec![Hlc::ZERO; dcs],
            cache: BTreeMap::new(),
            held: BTreeMap::new(),
            taint: vec![Hlc::ZERO; dcs],
            pending: None,
        }
    }

    fn well_formed<'a>(&self, dsv: &[Hlc], ds: &DepSet<Hlc>, items: impl IntoIterator<Item = &'a ReadItem>) -> bool {
        let dcs = self.dsv.len();
        dsv.len() == dcs && valid_ds(ds, dcs) && items.into_iter().all(|i| i.sr.idx() < dcs)
    }

    pub(super) fn tainted(&self) -> bool {
        self.taint.iter().zip(&self.dsv).any(|(t, d)| t > d)
    }

    /// Whether `key`'s version at `order` is one this client cached or holds.
    fn knows(&self, key: &Key, order: (Hlc, DcId)) -> bool {
        [&self.cache, &self.held].iter().any(|m| m.get(key).is_some_and(|c| c.order() == order))
    }

    /// GET reply: DSVc = max(DSVc, dsv); DSc = maxDS(DSc, ds).
    fn finish_get(&mut self, key: Key, ok: GetOk) -> Result<Option<Value>, OpError> {
        if !self.well_formed(&ok.dsv, &ok.ds, &ok.item) {
            return Err(malformed("get reply"));
        }
        vmax(&mut self.dsv, &ok.dsv);
        self.ds.merge(&ok.ds);
        if let Some(item) = &ok.item
            && !self.paper_dsv_merge
        {
            self.note_read(key, item, ok.ds);
        }
        self.settle();
        Ok(ok.item.map(|i| i.value))
    }

    /// Decide what a GET result means for the cache (see the type's doc).
    fn note_read(&mut self, key: Key, item: &ReadItem, ds: DepSet<Hlc>) {
        let m = self.ctx.dc;
        if covered_remote(&ds, &self.dsv, m) {
            return; // any slice at sv ≥ DSVc returns this version or a newer one
        }
        // Only the version's own ⟨sr, ut⟩ is uncovered: line 3 admitted a remote
        // version because its ds ≤ the server's DSV, now merged into DSVc.
        let only_itself_uncovered =
            ds.entries().iter().all(|&(dc, t)| dc == m || t <= self.dsv[dc.idx()] || (dc == item.sr && t <= item.ut));
        let seen = Cached { value: item.value.clone(), ut: item.ut, sr: item.sr, ds };
        if item.sr != m && only_itself_uncovered {
            remember(&mut self.cache, key, seen);
        } else if !self.knows(&key, seen.order()) {
            for &(dc, t) in seen.ds.entries() {
                if dc != m && t > self.dsv[dc.idx()] && t > self.taint[dc.idx()] {
                    self.taint[dc.idx()] = t;
                }
            }
        }
    }

    /// PUT reply: DSc = maxDS(DSc, {⟨sr, ut⟩}).
    fn finish_put(&mut self, key: Key, value: Value, sent_ds: DepSet<Hlc>, stamp: Stamp) -> Result<(), OpError> {
        if stamp.sr.idx() >= self.dsv.len() {
            return Err(malformed("put reply"));
        }
        self.ds.raise(stamp.sr, stamp.ut);
        if !self.paper_dsv_merge {
            let mut ds = sent_ds;
            ds.raise(stamp.sr, stamp.ut);
            if !covered_remote(&ds, &self.dsv, self.ctx.dc) {
                let w = Cached { value, ut: stamp.ut, sr: stamp.sr, ds };
                let to = if self.tainted() { &mut self.held } else { &mut self.cache };
                remember(to, key, w);
            }
        }
        Ok(())
    }

    /// ROTX reply (Alg 5.4 client side), with the cache merged per key.
    fn finish_rot(&mut self, keys: &[Key], ok: RotOk) -> Result<Vec<Option<Value>>, OpError> {
        if ok.items.len() != keys.len() || !self.well_formed(&ok.dsv, &ok.ds, ok.items.iter().flatten()) {
            return Err(malformed("rot reply"));
        }
        // The snapshot covers any taint this request carried (the coordinator
        // waited for it), so held writes may join the cache before merging.
        vmax(&mut self.dsv, &ok.dsv);
        self.ds.merge(&ok.ds);
        self.settle();
        let values = keys
            .iter()
            .zip(ok.items)
            .map(|(k, item)| match (item, self.cache.get(k)) {
                (Some(i), Some(c)) if c.order() > (i.ut, i.sr) => Some(c.value.clone()),
                (None, Some(c)) => Some(c.value.clone()),
                (item, _) => item.map(|i| i.value),
            })
            .collect();
        Ok(values)
    }

    /// Drop cache entries slices now return anyway; release held writes once
    /// the taint is covered.
    fn settle(&mut self) {
        let (m, dsv) = (self.ctx.dc, &self.dsv);
        self.cache.retain(|_, c| !covered_remote(&c.ds, dsv, m));
        self.held.retain(|_, c| !covered_remote(&c.ds, dsv, m));
        if !self.held.is_empty() && !self.tainted() {
            for (k, c) in std::mem::take(&mut self.held) {
                remember(&mut self.cache, k, c);
            }
        }
    }
}

impl Client for CsxClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        match op {
            Op::Get { key } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                env.send(to, Msg::GetReq { key: key.clone(), dsv: self.dsv.clone() });
                self.pending = Some(Pending::Get { key });
            }
            Op::Put { key, value } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                env.send(
                    to,
                    Msg::PutReq { key: key.clone(), value: value.clone(), ds: self.ds.clone(), dsv: self.dsv.clone() },
                );
                self.pending = Some(Pending::Put { key, value, ds: self.ds.clone() });
            }
            Op::Rot { keys } => {
                let Some(first) = keys.first() else {
                    env.complete(OpResult::Rot(Vec::new()));
                    return;
                };
                // The coordinator: the server of the first key in this DC.
                let Some(to) = client_server_for(&self.ctx, env, first) else { return };
                env.send(
                    to,
                    Msg::RotReq {
                        keys: keys.clone(),
                        dsv: self.dsv.clone(),
                        ds: self.ds.clone(),
                        wait: self.taint.clone(),
                    },
                );
                self.pending = Some(Pending::Rot { keys });
            }
            #[allow(unreachable_patterns)]
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, _from: NodeId, msg: Msg) {
        let Some(pending) = self.pending.take() else { return };
        let result = match (pending, msg) {
            (Pending::Get { key }, Msg::GetReply(r)) => r.and_then(|ok| self.finish_get(key, ok)).map(OpResult::Get),
            (Pending::Put { key, value, ds }, Msg::PutReply(r)) => {
                r.and_then(|stamp| self.finish_put(key, value, ds, stamp)).map(|()| OpResult::Put)
            }
            (Pending::Rot { keys }, Msg::RotReply(r)) => r.and_then(|ok| self.finish_rot(&keys, ok)).map(OpResult::Rot),
            (p, _) => {
                self.pending = Some(p); // a stray reply: ignore it
                return;
            }
        };
        env.complete(result.unwrap_or_else(OpResult::Failed));
    }
}
