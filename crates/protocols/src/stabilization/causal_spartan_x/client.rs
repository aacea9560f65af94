use super::config::*;
use super::msg::*;
use crate::kit::client::{client_server_for, fail_unsupported, send_for_key};
use causeway_core::{
    Client, ClientCtx, ClientEnv, DcId, DepSet, Hlc, HlcVec, Key, NodeId, Op, OpError, OpResult, Value, vmax,
};
use std::collections::BTreeMap;

/// A client session (Alg 5.1), sticky to its DC.
///
/// ## The cache, and why ROTX results stay causal snapshots
///
/// Because the DS no longer raises `sv` (module doc), a slice can miss a
/// version this client has already seen: a remote version read by GET whose
/// own ⟨sr, ut⟩ is not yet ≤ `DSVc`, a local version (its own write or
/// another client's) that depends on one, or a version in the causal past of
/// such a local version. The cache keeps those versions (key → value, ut, sr,
/// and `ds = maxDS(d.ds, {⟨sr, ut⟩})`). An entry leaves once every remote
/// entry of its `ds` is ≤ `DSVc`. A ROTX returns, per key, the newer by
/// ⟨ut, sr⟩ of the slice's version and the cached one.
///
/// **Invariant (C).** Every version in this client's causal past is
/// *covered* (every remote entry of its `maxDS(ds, {⟨sr, ut⟩})` is ≤ `DSVc`,
/// and its local entry ≤ `DSc[m]`), or cached, or superseded in the cache by
/// a newer version of its key whose own causal past satisfies (C).
///
/// **Claim.** Given (C), the result is causally consistent (Def 18/20): if
/// `r_a` is returned and `r_a dep v2` with `v2` of key `b`, then `r_b ≥ v2`.
/// Under last-writer-wins with Obs 7 that is what visible+ means.
///
/// - `r_a` came from a slice: `maxDS(r_a.ds, ⟨sr, ut⟩) ≤ sv`. By Obs 5/6,
///   `v2.ut ≤ r_a.ds[v2.sr] ≤ sv[v2.sr]` and `v2.ds ≤ r_a.ds ≤ sv`, so `v2` is
///   slice-eligible. It is present at b: a remote `v2` because `sv` is built
///   from genuine DSVs only, so `sv ≤ DSV_real`; a local `v2` because it was
///   written there, and before b's slice was read (line 21 and line 8 give any
///   later local write at b `ut > sv[m]`). If GC pruned it, every retained
///   version is newer, and a slice with nothing eligible aborts. So
///   `r_b ≥ slice_b ≥ v2`.
/// - `r_a` came from the cache: `v2` is in this client's causal past, so by
///   (C) it is covered (slice-eligible, as above, since `sv ≥ DSVc` and
///   `sv[m] ≥ DSc[m]`), or cached, or superseded in the cache; either way
///   `r_b ≥ v2`.
///
/// **Why (C) holds.** A GET of a remote version: line 3 admitted it because
/// its `ds` ≤ the server's DSV, which the reply merges into `DSVc`, so at
/// most its own ⟨sr, ut⟩ is uncovered; it is cached. A PUT: the new version's
/// past is the client's, and the version is cached. A ROTX adds only
/// slice versions (covered) and cache entries. A GET of a local version
/// written by *another* client is the case deviation 13 could not cache (its
/// writer's reads are unknown here). Deviation 14 sends the writer's cache
/// with every PUT; the server keeps the part its DSV does not cover with the
/// version and returns it with every GET of it, together with its DSV. The
/// writer's (C), with the writer's `DSVc` ≤ the server's DSV (deviation 12
/// merged it) ≤ the reply's DSV, then gives (C) here once the reader caches
/// the version and its past. So no ROTX ever has to wait for the DSV.
pub struct CsxClient {
    ctx: ClientCtx,
    paper_dsv_merge: bool,
    /// DSc: per DC, the largest `ut` this client depends on.
    ds: DepSet<Hlc>,
    /// DSVc: the largest DSV this client has been given. Copied into each
    /// request with `HlcVec::from_slice`, one `memcpy` of its HLCs, where
    /// `SmallVec`'s `clone` goes entry by entry.
    dsv: HlcVec,
    /// Versions in this client's causal past that slices may not return
    /// yet (invariant (C) above), merged into ROTX results and sent with
    /// every PUT (deviation 14).
    pub(super) cache: BTreeMap<Key, Cached>,
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
    Get {
        key: Key,
    },
    /// The key and value, kept only if the new version will be cached
    /// (see [`CsxClient::will_cache_put`]).
    Put {
        kept: Option<(Key, Value)>,
    },
    Rot {
        keys: Vec<Key>,
    },
}

impl CsxClient {
    pub(super) fn new(cfg: &Config, ctx: ClientCtx) -> Self {
        let dcs = ctx.topology.dcs();
        CsxClient {
            ctx,
            paper_dsv_merge: cfg.paper_dsv_merge,
            ds: DepSet::new(),
            dsv: HlcVec::from_elem(Hlc::ZERO, dcs),
            cache: BTreeMap::new(),
            pending: None,
        }
    }

    fn well_formed<'a>(&self, dsv: &[Hlc], ds: &DepSet<Hlc>, items: impl IntoIterator<Item = &'a ReadItem>) -> bool {
        let dcs = self.dsv.len();
        dsv.len() == dcs && valid_ds(ds, dcs) && items.into_iter().all(|i| i.sr.idx() < dcs)
    }

    /// The cache as a PUT carries it (deviation 14).
    fn past(&self) -> Vec<PastItem> {
        if self.paper_dsv_merge {
            return Vec::new();
        }
        self.cache
            .iter()
            .map(|(k, c)| PastItem { key: k.clone(), value: c.value.clone(), ut: c.ut, sr: c.sr, ds: c.ds.clone() })
            .collect()
    }

    /// GET reply: DSVc = max(DSVc, dsv); DSc = maxDS(DSc, ds).
    fn finish_get(&mut self, key: Key, ok: GetOk) -> Result<Option<Value>, OpError> {
        let dcs = self.dsv.len();
        if !self.well_formed(&ok.dsv, &ok.ds, &ok.item) || !ok.past.iter().all(|p| valid_past(p, dcs)) {
            return Err(malformed("get reply"));
        }
        vmax(&mut self.dsv, &ok.dsv);
        self.ds.merge(&ok.ds);
        if let Some(item) = &ok.item
            && !self.paper_dsv_merge
        {
            for p in ok.past {
                self.note_seen(p.key, &p.value, p.ut, p.sr, p.ds);
            }
            self.note_seen(key, &item.value, item.ut, item.sr, ok.ds);
        }
        self.settle();
        Ok(ok.item.map(|i| i.value))
    }

    /// Cache a version this client now depends on unless slices at
    /// `sv ≥ DSVc` return it (or a newer one) anyway. For a GET's own item
    /// that is sound for any origin: a remote item has at most its own
    /// ⟨sr, ut⟩ uncovered (line 3), and a local item's uncovered past came
    /// with it (deviation 14; see the type's doc).
    ///
    /// The value is copied only for a version that is cached: nearly every
    /// GET's item is covered, and its copy was only dropped.
    fn note_seen(&mut self, key: Key, value: &Value, ut: Hlc, sr: DcId, ds: DepSet<Hlc>) {
        if !covered_remote(&ds, &self.dsv, self.ctx.dc) {
            remember(&mut self.cache, key, Cached { value: value.clone(), ut, sr, ds });
        }
    }

    /// Whether the version a PUT sent now writes will be cached when its
    /// reply comes (note_seen's rule): DSc has a remote entry DSVc does not
    /// cover. Neither changes before that reply (one operation at a time, and
    /// the reply raises only the local entry), so [`Client::invoke`] decides
    /// here and copies the key and value only for a version it will cache;
    /// most PUTs then send theirs without a copy.
    fn will_cache_put(&self) -> bool {
        !self.paper_dsv_merge && !covered_remote(&self.ds, &self.dsv, self.ctx.dc)
    }

    /// PUT reply: DSc = maxDS(DSc, {⟨sr, ut⟩}).
    fn finish_put(&mut self, kept: Option<(Key, Value)>, stamp: Stamp) -> Result<(), OpError> {
        // The stamp is the local DC's: a PUT goes to this DC's server (full
        // replication, clients are sticky). Any other would also break
        // `will_cache_put`'s premise.
        if stamp.sr != self.ctx.dc {
            return Err(malformed("put reply"));
        }
        self.ds.raise(stamp.sr, stamp.ut);
        assert_eq!(kept.is_some(), self.will_cache_put(), "CausalSpartanX: a PUT's caching was decided at invoke");
        // The session ran nothing else since it sent DSc with the PUT, so
        // DSc is now the new version's `maxDS(ds, {⟨sr, ut⟩})`: cache the
        // version with it.
        if let Some((key, value)) = kept {
            let ds = self.ds.clone();
            remember(&mut self.cache, key, Cached { value, ut: stamp.ut, sr: stamp.sr, ds });
        }
        Ok(())
    }

    /// ROTX reply (Alg 5.4 client side), with the cache merged per key.
    fn finish_rot(&mut self, keys: &[Key], ok: RotOk) -> Result<Vec<Option<Value>>, OpError> {
        if ok.items.len() != keys.len() || !self.well_formed(&ok.dsv, &ok.ds, ok.items.iter().flatten()) {
            return Err(malformed("rot reply"));
        }
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

    /// Drop cache entries slices now return anyway.
    fn settle(&mut self) {
        let (m, dsv) = (self.ctx.dc, &self.dsv);
        self.cache.retain(|_, c| !covered_remote(&c.ds, dsv, m));
    }
}

impl Client for CsxClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        match op {
            Op::Get { key } => {
                let dsv = HlcVec::from_slice(&self.dsv);
                if send_for_key(&self.ctx, env, key.clone(), |key| Msg::GetReq { key, dsv }) {
                    self.pending = Some(Pending::Get { key });
                }
            }
            Op::Put { key, value } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                let kept = self.will_cache_put().then(|| (key.clone(), value.clone()));
                let put =
                    PutReq { key, value, ds: self.ds.clone(), dsv: HlcVec::from_slice(&self.dsv), past: self.past() };
                env.send(to, Msg::PutReq(Box::new(put)));
                self.pending = Some(Pending::Put { kept });
            }
            Op::Rot { keys } => {
                let Some(first) = keys.first() else {
                    env.complete(OpResult::Rot(Vec::new()));
                    return;
                };
                // The coordinator: the server of the first key in this DC.
                let Some(to) = client_server_for(&self.ctx, env, first) else { return };
                let rot = RotReq { keys: keys.clone(), dsv: self.dsv.to_vec(), ds: self.ds.clone() };
                env.send(to, Msg::RotReq(Box::new(rot)));
                self.pending = Some(Pending::Rot { keys });
            }
            #[allow(unreachable_patterns)]
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, _from: NodeId, msg: Msg) {
        let Some(pending) = self.pending.take() else { return };
        let result = match (pending, msg) {
            (Pending::Get { key }, Msg::GetReply(r)) => r.and_then(|ok| self.finish_get(key, *ok)).map(OpResult::Get),
            (Pending::Put { kept }, Msg::PutReply(r)) => {
                r.and_then(|stamp| self.finish_put(kept, stamp)).map(|()| OpResult::Put)
            }
            (Pending::Rot { keys }, Msg::RotReply(r)) => {
                r.and_then(|ok| self.finish_rot(&keys, *ok)).map(OpResult::Rot)
            }
            (p, _) => {
                self.pending = Some(p); // a stray reply: ignore it
                return;
            }
        };
        env.complete(result.unwrap_or_else(OpResult::Failed));
    }
}
