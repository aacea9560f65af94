use super::config::*;
use super::msg::*;
use crate::kit::node::{equivalents_elsewhere, served_partition};
use crate::stabilization::partition::{self, TIMER_HEARTBEAT, TIMER_STABILIZE, Ticker, timer_kind};
use crate::stabilization::slices::{self, Gathering};
use crate::stabilization::stable_tree::{StableTree, TreeStep};
use crate::stabilization::version_gc::VersionGc;
use crate::stabilization::visibility::{self, PendingVisible};
use causeway_core::{
    ClientId, DcId, DepSet, Hlc, HlcVec, Inserted, Key, KeyIndex, Landed, NodeCtx, NodeId, Observation, OpError,
    PartitionId, Server, ServerEnv, SnapshotFloor, Topology, Versioned,
};
use std::sync::Arc;

crate::kit::node::server_env!();

pub use crate::stabilization::version_gc::GC_KEYS_PER_TICK;

/// Partition server p^m_n (§5.2).
pub struct CsxServer {
    cfg: Config,
    topology: Arc<Topology>,
    /// m, this server's DC.
    m: DcId,
    /// n, this server's partition.
    partition: PartitionId,
    /// The equivalents p^k_n, k ≠ m, in DC order.
    peers: Vec<NodeId>,
    /// VV: `VV[k]`, k ≠ m, is the latest timestamp received from p^k_n;
    /// `VV[m]` is the local HLC, the highest `ut` assigned here.
    pub(super) vv: Vec<Hlc>,
    /// This node: the coordinator of the ROTXs its clients send it.
    me: NodeId,
    /// Started over a journaled store (a restart): the DSV may run ahead of
    /// the VV entries fed by heartbeats, which were not journaled.
    restarted: bool,
    /// Which DCs this partition has heard from (a replicated version or a
    /// heartbeat) since it started. A partition that had stored nothing
    /// looks like a first start, yet may have heard heartbeats before a
    /// crash that the DC's stable vector still reflects: until it hears
    /// from DC j again, DSV[j] may be ahead of VV[j] (torture seed 77086,
    /// an idle DC and a restarted partition with an empty store).
    heard_since_start: Vec<bool>,
    /// DSV: `DSV[j] = t` means this DC has received every write DC j made up to `t`.
    pub(super) dsv: Vec<Hlc>,
    /// This server's place in the DC's aggregation tree. `None` on service
    /// nodes, which take no part in the protocol.
    pub(super) tree: Option<StableTree<Hlc>>,
    /// Δ and θ, slowed down while the cluster is idle, and whether a
    /// Replicate went out since the last heartbeat tick.
    ticker: Ticker,
    /// Remote versions stored but not yet admitted by line 3, each parked
    /// on the DSV entry that holds it back.
    pending: PendingVisible<Hlc, (Hlc, DcId)>,
    /// ROTXs this server coordinates, by id.
    rots: Gathering<RotInProgress>,
    gc: VersionGc<Vec<Hlc>>,
}

/// A ROTX waiting for slices.
pub(super) struct RotInProgress {
    client: ClientId,
    /// Line 12: the snapshot vector.
    sv: Vec<Hlc>,
    /// Results so far, in request order.
    items: Vec<Option<ReadItem>>,
    ds: DepSet<Hlc>,
}

impl RotInProgress {
    fn absorb(&mut self, positions: &[usize], slice: SliceOk, dcs: usize) -> Result<(), OpError> {
        if slice.items.len() != positions.len() || !valid_ds(&slice.ds, dcs) {
            return Err(malformed("slice reply"));
        }
        for (&i, item) in positions.iter().zip(slice.items) {
            self.items[i] = item;
        }
        self.ds.merge(&slice.ds);
        Ok(())
    }
}

impl CsxServer {
    pub(super) fn new(cfg: &Config, ctx: NodeCtx) -> Self {
        let m = ctx.role.dc();
        let dcs = ctx.topology.dcs();
        let (partition, tree, peers) = match served_partition(&ctx) {
            Some((_, partition)) => {
                let tree = StableTree::new(&ctx.topology, ctx.id, cfg.tree_fanout);
                (partition, Some(tree), equivalents_elsewhere(&ctx.topology, partition, m))
            }
            None => (PartitionId(0), None, Vec::new()),
        };
        CsxServer {
            cfg: cfg.clone(),
            topology: ctx.topology,
            m,
            partition,
            peers,
            vv: vec![Hlc::ZERO; dcs],
            me: ctx.id,
            restarted: false,
            heard_since_start: vec![false; dcs],
            dsv: vec![Hlc::ZERO; dcs],
            tree,
            ticker: Ticker::new(&cfg.pace),
            pending: PendingVisible::new(dcs),
            rots: Gathering::default(),
            gc: VersionGc::new(cfg.gc_quiet_us),
        }
    }
}

impl Server for CsxServer {
    type Msg = Msg;
    type Version = Version;

    fn on_start(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        // After a restart the VV is rebuilt from what was journaled: the HLC
        // VV[m] never falls below a timestamp this partition handed out, so
        // a write after the restart still orders after the ones before it.
        // Heartbeats were not journaled, so a remote entry may come back
        // below what the DC's stable vector already says about it.
        let keys = env.store().keys_sorted();
        let horizon = env.store().meta().and_then(|m| decode_hlcs(m, self.dsv.len()));
        self.restarted = !keys.is_empty() || horizon.is_some();
        for k in keys {
            for v in env.store().versions(&k) {
                if let Some(e) = self.vv.get_mut(v.sr.idx()) {
                    *e = (*e).max(v.ut);
                }
            }
        }
        // The DSV resumes at the journaled GC horizon, a DSV of this DC and
        // so still true: collection (or a checkpoint cut at the horizon)
        // may have left a key only versions from there on, and a restarted
        // store no longer knows it was pruned, so a GET or slice below the
        // horizon would read the key as absent.
        if let Some(h) = horizon {
            self.raise_dsv(env, h.iter().copied().enumerate());
            self.gc.resume_journaled(h);
        }
        if self.tree.is_some() {
            self.saw_work(env, env.now_us());
            self.ticker.start(env, self.cfg.heartbeat_interval_us, self.cfg.stabilization_interval_us);
        }
    }

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        if self.tree.is_some() {
            self.saw_work(env, env.now_us());
        }
        match msg {
            Msg::GetReq { key, dsv } => self.on_get(env, from, key, dsv),
            Msg::PutReq(put) => self.on_put(env, from, *put),
            Msg::RotReq(rot) => {
                let RotReq { keys, dsv, ds } = *rot;
                self.on_rot(env, from, keys, dsv, ds)
            }
            _ => {} // replies and peer messages never come from clients; the runtime rejects them at the edge
        }
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, msg: Msg) {
        if self.tree.is_none() || !self.topology.contains(from) {
            return;
        }
        match msg {
            Msg::Replicate { key, version } => self.on_replicate(env, from, key, *version),
            Msg::Heartbeat { hlc, last_work_us } => self.on_heartbeat(env, from, hlc, last_work_us),
            Msg::SliceReq { rot, keys, sv } => self.on_slice_req(env, from, rot, keys, sv),
            Msg::SliceReply { rot, slice } => self.on_slice_reply(env, from, rot, slice),
            Msg::StableReport { vv_min, last_work_us } => self.on_stable_report(env, from, vv_min, last_work_us),
            Msg::StablePush { dsv, last_work_us } => self.on_stable_push(env, from, dsv, last_work_us),
            _ => {}
        }
    }

    fn on_timer(&mut self, env: &mut impl ServerEnv<Msg, Version>, token: u64) {
        if self.ticker.is_stale(token) {
            return; // superseded by a wake-up's timer
        }
        match timer_kind(token) {
            TIMER_HEARTBEAT => self.heartbeat(env),
            TIMER_STABILIZE => self.stabilize(env),
            _ => {}
        }
    }

    /// A checkpoint leaves out the superseded versions this node's GC
    /// would collect at its horizon but has not reached yet
    /// ([`VersionGc::snapshot_floor`]).
    fn snapshot_floor(&self) -> Option<SnapshotFloor<Version>> {
        self.gc.snapshot_floor(|v: &Version, horizon: &Vec<Hlc>| slice_visible(v, horizon))
    }
}

impl CsxServer {
    /// Alg 5.2 lines 1–5.
    fn on_get(&mut self, env: &mut impl Env, from: ClientId, key: Key, dsv: HlcVec) {
        if let Err(e) = self.check_key(&key).and_then(|()| self.check_vector(&dsv)) {
            env.reply(from, Msg::GetReply(Err(e)));
            return;
        }
        // Line 2: DSV = max(DSV, dsv). The client's DSV is genuine: it came from this DC.
        self.raise_dsv(env, dsv.iter().copied().enumerate());
        // Line 3: the latest version that is local or whose dependencies are all stable.
        let (m, stable) = (self.m, &self.dsv);
        let skip = self.cfg.mutant_skip_visibility_check;
        let d = env.store().latest_where(&key, |d| skip || get_visible(d, m, stable));
        // Line 4: ds = maxDS(d.ds, {⟨d.sr, d.ut⟩}).
        let (item, ds, past) = match d {
            // Deviation 14: a local version hands its reader the part of its
            // writer's cache that this DSV does not cover yet.
            Some(d) => (Some(d.read_item()), d.full_ds(), uncovered_past(&d.past, &self.dsv, m)),
            None => (None, DepSet::new(), Vec::new()),
        };
        // Line 5. The request's vector, checked to be as long, carries the
        // DSV back: no new one per GET.
        let mut reply_dsv = dsv;
        reply_dsv.copy_from_slice(&self.dsv);
        env.reply(from, Msg::GetReply(Ok(Box::new(GetOk { item, ds, dsv: reply_dsv, past }))));
    }

    /// Alg 5.2 lines 6–19. Never waits: the HLC moves past the dependency time.
    fn on_put(&mut self, env: &mut impl Env, from: ClientId, put: PutReq) {
        let PutReq { key, value, ds, dsv, past } = put;
        let checked = self
            .check_key(&key)
            .and_then(|()| self.check_ds(&ds))
            .and_then(|()| self.check_vector(&dsv))
            .and_then(|()| self.check_past(&past, &ds));
        if let Err(e) = checked {
            env.reply(from, Msg::PutReply(Err(e)));
            return;
        }
        // Line 7, as decided for §5.5: only the local entry of DS (see
        // merge_client_ds), and instead the client's DSVc, a genuine DSV of
        // this DC (deviation 12). Without it, a reader of this write could
        // miss what the writer saw: the writer read x through a ROTX slice
        // admitted by the coordinator's higher DSV, then wrote y here; a
        // reader of y (visible at once, being local) then reads x's key at a
        // partition whose DSV lags and gets an older x. The printed line 7
        // closed that by merging DS, which §5.5 shows unsafe; DSVc is safe.
        self.raise_dsv(env, dsv.iter().copied().enumerate());
        self.merge_client_ds(env, &ds);
        // Line 8: dt = max{ds values ∪ {DSV[m]}}. Including DSV[m] is what gives
        // this write ut > sv[m] of any slice already read here (line 21).
        let m = self.m.idx();
        let dt = ds.max_value().unwrap_or(Hlc::ZERO).max(self.dsv[m]);
        // Line 9: updateHLCforPut(dt), the HLC receive rule on VV[m].
        let ut = self.vv[m].update(env.now_us(), dt);
        // Invariant (Roohitavaf, thesis §5.2, Alg 5.2 line 9): a version's
        // timestamp exceeds every dependency's and every snapshot already
        // read here (`dt` bounds both), whatever the physical clock did.
        assert!(ut > dt, "CausalSpartanX: a PUT stamped {ut:?} does not exceed its dependency time {dt:?}");
        // Deviation 14 (Roohitavaf, "Consistency for Distributed Data
        // Stores", §5.4: ROTX never blocks; §5.2: local writes are visible to
        // local GETs at once): keep what of the writer's cache this DSV does
        // not cover, for the readers of this version, so a reader's ROTX can
        // serve that past from its own cache instead of waiting for the DSV.
        // Local only: replicas go without it (see `Version::past`).
        let past = uncovered_past(&past, &self.dsv, self.m).into_boxed_slice();
        // What the peers get: the version without `past`, copied only if
        // there are peers to send it to (its value too, if short:
        // [`causeway_core::copy_if_short`]).
        let replica = (!self.peers.is_empty()).then(|| {
            let value = causeway_core::copy_if_short(&value);
            Box::new(Version { value, ut, sr: self.m, ds: ds.clone(), past: Box::default() })
        });
        env.observe(Observation::Visible { key: &key, value: &value, origin: self.m, written_us: ut.l });
        self.apply(env, &key, Version { value, ut, sr: self.m, ds, past });
        env.reply(from, Msg::PutReply(Ok(Stamp { ut, sr: self.m })));
        // Line 19. Sent in ut order on FIFO channels, so a peer may set VV[m] = ut.
        if let Some(replica) = replica {
            let (last, rest) = self.peers.split_last().expect("replica only with peers");
            for &peer in rest {
                env.send(peer, Msg::Replicate { key: key.clone(), version: replica.clone() });
            }
            env.send(*last, Msg::Replicate { key, version: replica });
            self.ticker.replicated(self.peers.len());
        }
    }

    /// Alg 5.2 line 20: insert, and VV[k] = d.ut.
    fn on_replicate(&mut self, env: &mut impl Env, from: NodeId, key: Key, version: Version) {
        let k = self.topology.dc_of(from);
        let well_formed = self.peers.contains(&from)
            && version.sr == k
            && sane(version.ut)
            && valid_ds(&version.ds, self.dsv.len())
            && version.past.is_empty()
            && self.check_key(&key).is_ok();
        if !well_formed {
            return;
        }
        self.saw_work(env, env.now_us());
        let order = version.order();
        if order.0 > self.vv[k.idx()] {
            self.vv[k.idx()] = order.0;
        }
        self.heard_since_start[k.idx()] = true;
        self.stable_if_alone(env, k.idx());
        let blocker = self.blocker(&version.ds);
        let landed = self.apply(env, &key, version);
        if landed.inserted == Inserted::Duplicate {
            return;
        }
        if let Some((index, order)) = self.pending.admit(blocker, landed.index, order) {
            self.report_if_read(env, index, order);
        }
    }

    /// In a DC of one partition, DSV[k] = min over the DC's partitions of
    /// VV[k] (Alg 5.3) is this partition's own VV[k]: raise it when VV[k]
    /// moves, not θ later. Not a change to what DSV means, only to when it
    /// is computed; the θ tick computes the same value. A remote version
    /// whose only dependencies are on its own DC is then admitted when it
    /// arrives, where it waited up to θ, parked (the FIFO link has brought
    /// every earlier version of DC k, so VV[k] covers its `ds`).
    fn stable_if_alone(&mut self, env: &mut impl Env, k: usize) {
        if self.tree.as_ref().is_some_and(|t| t.is_alone()) {
            let vv = self.vv[k];
            self.raise_dsv(env, [(k, vv)]);
        }
    }

    /// The first DSV entry that line 3 still waits on for a version with
    /// dependencies `ds`, if any.
    fn blocker(&self, ds: &DepSet<Hlc>) -> Option<(usize, Hlc)> {
        ds.entries().iter().find(|&&(dc, h)| h > self.dsv[dc.idx()]).map(|&(dc, h)| (dc.idx(), h))
    }

    /// Alg 5.3: on ⟨Heartbeat hlc⟩ from p^k_n, VV[k] = hlc.
    fn on_heartbeat(&mut self, env: &mut impl Env, from: NodeId, hlc: Hlc, work_us: u64) {
        if self.peers.contains(&from) && sane(hlc) {
            let k = self.topology.dc_of(from).idx();
            if hlc > self.vv[k] {
                self.vv[k] = hlc;
            }
            self.heard_since_start[k] = true;
            self.stable_if_alone(env, k);
            self.saw_work(env, work_us);
        }
    }

    /// Alg 5.4 lines 9–18: the ROTX coordinator.
    fn on_rot(&mut self, env: &mut impl Env, from: ClientId, keys: Vec<Key>, dsv: Vec<Hlc>, ds: DepSet<Hlc>) {
        let checked = keys
            .first()
            .map_or(Ok(()), |k| self.check_key(k))
            .and_then(|()| self.check_vector(&dsv))
            .and_then(|()| self.check_ds(&ds));
        if let Err(e) = checked {
            env.reply(from, Msg::RotReply(Err(e)));
            return;
        }
        // Line 10, as decided for §5.5: DSV = max(DSV, dsv), and DS only for the
        // local entry (paper_dsv_merge: for every entry).
        self.raise_dsv(env, dsv.iter().copied().enumerate());
        self.merge_client_ds(env, &ds);
        // Never waits: what the client has seen beyond `sv` it merges from
        // its cache (deviation 14 replaced deviation 13's wait).
        self.start_rot(env, from, keys);
    }

    /// Alg 5.4 lines 12–18: take the snapshot and ask the partitions.
    fn start_rot(&mut self, env: &mut impl Env, from: ClientId, keys: Vec<Key>) {
        // Line 12.
        let sv = self.dsv.clone();
        // Lines 13–17, one SliceReq per partition involved.
        let Some(split) = slices::split(&self.topology, self.m, self.me, &keys) else {
            env.reply(from, Msg::RotReply(Err(OpError::NoReplica)));
            return;
        };
        let mut rot = RotInProgress { client: from, sv, items: vec![None; keys.len()], ds: DepSet::new() };
        if !split.local.is_empty() {
            let dcs = self.dsv.len();
            let mine = slices::keys_at(&keys, &split.local);
            let read = self.slice(env, &mine, &rot.sv).and_then(|s| rot.absorb(&split.local, s, dcs));
            if let Err(e) = read {
                env.reply(from, Msg::RotReply(Err(e)));
                return;
            }
        }
        let id = self.rots.next_id();
        for (node, positions) in &split.remote {
            env.send(*node, Msg::SliceReq { rot: id, keys: slices::keys_at(&keys, positions), sv: rot.sv.clone() });
        }
        if let Some(rot) = self.rots.open(id, rot, split.remote) {
            Self::finish_rot(env, rot);
        }
    }

    /// Alg 5.4 line 20, at a partition asked for a slice.
    fn on_slice_req(&mut self, env: &mut impl Env, from: NodeId, rot: u64, keys: Vec<Key>, sv: Vec<Hlc>) {
        if self.topology.dc_of(from) != self.m {
            return;
        }
        let slice = self
            .check_vector(&sv)
            .and_then(|()| keys.iter().try_for_each(|k| self.check_key(k)))
            .and_then(|()| self.slice(env, &keys, &sv));
        env.send(from, Msg::SliceReply { rot, slice });
    }

    /// Alg 5.4 lines 21–23.
    fn slice(&mut self, env: &mut impl Env, keys: &[Key], sv: &[Hlc]) -> Result<SliceOk, OpError> {
        // Line 21: DSV[m] = max(DSV[m], sv[m]). With line 8, any later local PUT here gets ut > sv[m].
        let m = self.m.idx();
        self.raise_dsv(env, [(m, sv[m])]);
        let store = env.store();
        let mut items = Vec::with_capacity(keys.len());
        let mut ds = DepSet::new();
        for key in keys {
            // Line 22: the latest d with maxDS(d.ds, {⟨d.sr, d.ut⟩}) ≤ sv.
            match store.latest_where(key, |d| slice_visible(d, sv)) {
                Some(d) => {
                    // Line 23.
                    ds.merge(&d.ds);
                    ds.raise(d.sr, d.ut);
                    items.push(Some(d.read_item()));
                }
                // GC dropped what this snapshot would have read: fail rather than
                // pretend the key had no version.
                None if store.was_pruned(key) => return Err(OpError::Aborted("snapshot pruned".into())),
                None => items.push(None),
            }
        }
        Ok(SliceOk { items, ds })
    }

    /// Alg 5.4 lines 15–18, at the coordinator.
    fn on_slice_reply(&mut self, env: &mut impl Env, from: NodeId, rot: u64, slice: Result<SliceOk, OpError>) {
        let dcs = self.dsv.len();
        let Some((st, positions, last)) = self.rots.answer(rot, from) else { return };
        let outcome = slice.and_then(|s| st.absorb(&positions, s, dcs));
        if outcome.is_ok() && !last {
            return;
        }
        let Some(st) = self.rots.close(rot) else { return };
        match outcome {
            Ok(()) => Self::finish_rot(env, st),
            Err(e) => env.reply(st.client, Msg::RotReply(Err(e))),
        }
    }

    /// Line 18: ⟨ROTXReply vset, sv, ds⟩.
    fn finish_rot(env: &mut impl Env, rot: RotInProgress) {
        env.reply(rot.client, Msg::RotReply(Ok(Box::new(RotOk { items: rot.items, dsv: rot.sv, ds: rot.ds }))));
    }

    /// A child's entry-wise min of its subtree's VVs.
    fn on_stable_report(&mut self, env: &mut impl Env, from: NodeId, vv_min: Vec<Hlc>, work_us: u64) {
        if let Some(tree) = &mut self.tree
            && valid_vector(&vv_min, self.dsv.len())
            && tree.on_report(from, vv_min)
        {
            self.saw_work(env, work_us);
        }
    }

    /// The DC's stable vector from the parent: DSV = max(DSV, pushed); pass it down.
    fn on_stable_push(&mut self, env: &mut impl Env, from: NodeId, dsv: Vec<Hlc>, work_us: u64) {
        if self.tree.is_none() || self.topology.dc_of(from) != self.m || !valid_vector(&dsv, self.dsv.len()) {
            return;
        }
        self.saw_work(env, work_us);
        self.raise_dsv(env, dsv.iter().copied().enumerate());
        self.push_down(env, &dsv);
    }

    // ------------------------------------------------------------ shared steps

    /// Lines 7 and 10 for the client's DS. By default only `DSV[m]` (the
    /// §5.5 decision: remote DS entries are reads, not stability, and merging
    /// them can make DSV exceed DSV_real). `paper_dsv_merge` merges every entry
    /// as printed.
    fn merge_client_ds(&mut self, env: &mut impl Env, ds: &DepSet<Hlc>) {
        if self.cfg.paper_dsv_merge {
            self.raise_dsv(env, ds.entries().iter().map(|&(dc, t)| (dc.idx(), t)));
        } else if let Some(t) = ds.get(self.m) {
            self.raise_dsv(env, [(self.m.idx(), t)]);
        }
    }

    /// Raise DSV entries; if any grew, admit pending remote versions.
    fn raise_dsv(&mut self, env: &mut impl Env, entries: impl IntoIterator<Item = (usize, Hlc)>) {
        let mut grew = false;
        for (i, t) in entries {
            if let Some(e) = self.dsv.get_mut(i)
                && t > *e
            {
                *e = t;
                grew = true;
            }
        }
        // Invariant: the DSV never claims more of a remote DC than this
        // partition has received from it. Each entry is a minimum of the
        // DC's partitions' VV entries, all of which only grow (thesis §5.2).
        // The printed line 7 (`paper_dsv_merge`, Roohitavaf §5.5) breaks
        // exactly this, by merging read dependencies into the DSV. A node
        // restarted from its journal lost its heartbeat-fed VV entries (the
        // DSV it is pushed is still true of its store), so it is exempt, and
        // so is any entry j not heard from since the start (which may have
        // been a restart over an empty store).
        if grew && !self.cfg.paper_dsv_merge && !self.restarted {
            for (j, (d, v)) in self.dsv.iter().zip(&self.vv).enumerate() {
                assert!(
                    j == self.m.idx() || !self.heard_since_start[j] || d <= v,
                    "CausalSpartanX: DSV[{j}] = {d:?} exceeds what partition {:?} received from DC {j} ({v:?})",
                    self.partition
                );
            }
        }
        if grew && let Some(least) = self.dsv.iter().map(|t| t.l).min() {
            env.observe(Observation::Stable { stable_us: least });
        }
        if grew {
            let unblocked = self.pending.unblocked(&self.dsv);
            for (at, &(index, order)) in unblocked.iter().enumerate() {
                env.store().warm_ahead(&unblocked, at);
                let Some(version) = env.store().exact_at(index, order) else { continue };
                let blocker = self.blocker(&version.ds);
                if let Some((index, order)) = self.pending.admit(blocker, index, order) {
                    self.report_if_read(env, index, order);
                }
            }
        }
    }

    /// Report a version admitted by line 3 if it is what a GET returns now.
    fn report_if_read(&self, env: &mut impl Env, index: KeyIndex, order: (Hlc, DcId)) {
        let (m, dsv) = (self.m, &self.dsv);
        visibility::report_if_read(env, index, order, order.1, order.0.l, |d| get_visible(d, m, dsv));
    }

    /// Insert into the store and note the key for GC.
    fn apply(&mut self, env: &mut impl Env, key: &[u8], version: Version) -> Landed {
        self.gc.apply(env.store(), key, version, |v, horizon| slice_visible(v, horizon))
    }

    fn push_down(&self, env: &mut impl Env, dsv: &[Hlc]) {
        if let Some(tree) = &self.tree {
            for &child in tree.children() {
                env.send(child, Msg::StablePush { dsv: dsv.to_vec(), last_work_us: self.ticker.last_work_us() });
            }
        }
    }

    fn check_key(&self, key: &[u8]) -> Result<(), OpError> {
        if self.tree.is_some() && self.topology.partition_of(key) == self.partition {
            Ok(())
        } else {
            Err(OpError::BadRequest(format!("key not stored at this server ({:?} of {:?})", self.partition, self.m)))
        }
    }

    fn check_vector(&self, v: &[Hlc]) -> Result<(), OpError> {
        if valid_vector(v, self.dsv.len()) {
            Ok(())
        } else {
            Err(OpError::BadRequest(format!("a DSV needs {} entries with HLC counters below 2^31", self.dsv.len())))
        }
    }

    fn check_ds(&self, ds: &DepSet<Hlc>) -> Result<(), OpError> {
        if valid_ds(ds, self.dsv.len()) { Ok(()) } else { Err(OpError::BadRequest("malformed dependency set".into())) }
    }

    /// A PUT's `past` (deviation 14): well-formed items, each within the
    /// write's own `ds` (they are the writer's causal past, which its DS
    /// covers).
    fn check_past(&self, past: &[PastItem], ds: &DepSet<Hlc>) -> Result<(), OpError> {
        let dcs = self.dsv.len();
        let within = |p: &PastItem| ds.get(p.sr).is_some_and(|t| p.ut <= t);
        if past.iter().all(|p| valid_past(p, dcs) && within(p)) {
            Ok(())
        } else {
            Err(OpError::BadRequest("malformed causal past".into()))
        }
    }

    // ------------------------------------------------------------ timers

    /// Work seen, for the idle pacing ([`Ticker::saw_work`]).
    fn saw_work(&mut self, env: &mut impl Env, at_us: u64) {
        self.ticker.saw_work(env, at_us);
    }

    /// Every Δ (Alg 5.3): if no Replicate went out since the last tick,
    /// updateHLC() and send `⟨Heartbeat VV[m]⟩` to every p^k_n, k ≠ m. The tick
    /// happens even with no peers (M = 1): it is what moves DSV[m] on an idle
    /// partition.
    fn heartbeat(&mut self, env: &mut impl Env) {
        if self.ticker.heartbeat_due() {
            let hlc = self.vv[self.m.idx()].tick(env.now_us());
            let last_work_us = self.ticker.last_work_us();
            for &peer in &self.peers {
                env.send(peer, Msg::Heartbeat { hlc, last_work_us });
            }
        }
        self.ticker.rearm_heartbeat(env, self.cfg.heartbeat_interval_us);
    }

    /// Every θ (Alg 5.3): DSV = max(DSV, entry-wise min of the DC's VVs),
    /// computed over the tree; then a bounded GC step.
    fn stabilize(&mut self, env: &mut impl Env) {
        let step = match &self.tree {
            Some(tree) => tree.step(&self.vv),
            None => return,
        };
        match step {
            TreeStep::Report { parent, aggregate } => {
                env.send(parent, Msg::StableReport { vv_min: aggregate, last_work_us: self.ticker.last_work_us() })
            }
            TreeStep::Stable(dsv) => {
                self.raise_dsv(env, dsv.iter().copied().enumerate());
                self.push_down(env, &dsv);
            }
            TreeStep::Waiting => {}
        }
        self.collect_garbage(env);
        self.ticker.rearm_stabilize(env, self.cfg.stabilization_interval_us);
    }

    /// Record the DSV; then, on a bounded number of dirty keys
    /// ([`VersionGc::collect`]), drop
    /// versions older than the newest one slice-visible at the horizon (the
    /// newest DSV at least `gc_grace_us` old).
    fn collect_garbage(&mut self, env: &mut impl Env) {
        let (now_us, grace_us) = (env.now_us(), self.cfg.gc_grace_us);
        // A new horizon is journaled in the turn it is reached, for `on_start`.
        let gc = &mut self.gc;
        if let Some(h) =
            partition::collect_garbage(gc, env.store(), now_us, &self.dsv, grace_us, |v, h| slice_visible(v, h))
        {
            let bytes = h.iter().flat_map(|t| t.l.to_le_bytes().into_iter().chain(t.c.to_le_bytes()));
            env.store().set_meta_unsynced(bytes.collect());
        }
    }
}

/// A journaled horizon read back: `dcs` HLCs of 8 + 4 bytes each.
fn decode_hlcs(bytes: &[u8], dcs: usize) -> Option<Vec<Hlc>> {
    if dcs == 0 || bytes.len() != 12 * dcs {
        return None;
    }
    let hlc = |b: &[u8]| {
        Some(Hlc::new(u64::from_le_bytes(b[..8].try_into().ok()?), u32::from_le_bytes(b[8..12].try_into().ok()?)))
    };
    bytes.chunks(12).map(hlc).collect()
}

/// The items of `past` whose remote dependencies `dsv` does not cover
/// (deviation 14). A covered item is slice-eligible for any `sv ≥ dsv`, which
/// the reader's DSVc will be, so it need not travel.
pub(super) fn uncovered_past(past: &[PastItem], dsv: &[Hlc], m: DcId) -> Vec<PastItem> {
    // Nearly always empty (a writer whose causal past is all stable): no
    // iterator to set up, on every GET and PUT.
    if past.is_empty() {
        return Vec::new();
    }
    past.iter().filter(|p| !covered_remote(&p.ds, dsv, m)).cloned().collect()
}
