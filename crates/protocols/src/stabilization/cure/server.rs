use super::config::*;
use super::msg::*;
use crate::kit::node::{equivalents_elsewhere, served_partition};
use crate::stabilization::partition::{
    self, TIMER_HEARTBEAT, TIMER_STABILIZE, Ticker, alone_raise, in_snapshot, raise_entries, remote_covered,
    remote_entries, timer, timer_arg, timer_kind,
};
use crate::stabilization::stable_tree::{StableTree, TreeStep};
use crate::stabilization::version_gc::VersionGc;
use crate::stabilization::visibility::PendingVisible;
use causeway_core::{
    ClientId, DcId, Key, KeyIndex, Landed, NodeCtx, NodeId, Observation, OpError, PartitionId, Server, ServerEnv,
    SnapshotFloor, TimeVec, Topology, Value, Versioned, vmax,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

crate::kit::node::server_env!();

/// The third timer kind ([`partition::timer`]): a wait, with the id of
/// what is parked above it.
pub(super) const TIMER_WAIT: u64 = 3;

pub use crate::stabilization::version_gc::GC_KEYS_PER_TICK;

/// How far a PUT's stamp may lead the turn's clock when it is one above
/// what the partition announced (deviation 7). A turn of n PUTs takes
/// well over n µs, so the lead stays small; past this bound (a flood of
/// PUTs cheaper than a µs each) a PUT waits for the clock as Cure's do.
pub const STAMP_LEAD_US: u64 = 1_000;

/// A Cure node. Only partition servers take part.
pub struct CureServer {
    pub(super) part: Option<Partition>,
}

impl CureServer {
    pub(super) fn new(cfg: &Config, ctx: NodeCtx) -> Self {
        CureServer { part: served_partition(&ctx).map(|(dc, p)| Partition::new(cfg, &ctx, dc, p)) }
    }
}

/// Partition server p of DC m.
pub(super) struct Partition {
    cfg: Config,
    topology: Arc<Topology>,
    /// m, this server's DC.
    m: DcId,
    partition: PartitionId,
    /// This partition's replicas in the other DCs.
    peers: Vec<NodeId>,
    dc_servers: BTreeSet<NodeId>,
    /// VV: entry i ≠ m the latest timestamp received from the replica in DC
    /// i; entry m this partition's clock at its last stabilization tick.
    pub(super) vv: Vec<TimeUs>,
    /// GST vector: entry-wise min of the DC's VVs, raised only.
    pub(super) gst: Vec<TimeUs>,
    /// The largest local time that has left this partition (a version's
    /// timestamp, a heartbeat, a VV[m] report, a snapshot's local entry):
    /// every later version must be stamped above it.
    announced_us: TimeUs,
    /// Which DCs this partition has heard from (a replicated version or a
    /// heartbeat) since it started. Until it has heard from all of them its
    /// VV may be below what it received before a crash, whether or not it
    /// had stored anything, so the checks against VV are off: a GST or a
    /// client's snapshot may be ahead of it, and reads wait for VV instead.
    heard_since_start: Vec<bool>,
    /// VV's remote entries as last journaled ([`Partition::journal_vv`]);
    /// the local entry stays 0.
    journaled_vv: Vec<TimeUs>,
    pub(super) tree: StableTree<TimeUs>,
    ticker: Ticker,
    /// Requests waiting for the clock (or, after a restart, for VV), by id.
    pub(super) parked: BTreeMap<u64, Parked>,
    next_parked: u64,
    /// Remote versions stored but not yet covered by the GST.
    pending: PendingVisible<TimeUs, (TimeUs, DcId)>,
    clock_us: u64,
    gc: VersionGc<Vec<TimeUs>>,
}

/// A request waiting inside the server, and since when (local µs).
pub(super) enum Parked {
    Put { client: ClientId, key: Key, value: Value, last: TimeVec, since_us: u64 },
    Read { client: ClientId, rot: u64, keys: Vec<Key>, tv: TimeVec, since_us: u64 },
}

impl Partition {
    fn new(cfg: &Config, ctx: &NodeCtx, m: DcId, partition: PartitionId) -> Self {
        let topology = ctx.topology.clone();
        let dcs = topology.dcs();
        Partition {
            cfg: cfg.clone(),
            m,
            partition,
            peers: equivalents_elsewhere(&topology, partition, m),
            dc_servers: topology.dc_servers(m).collect(),
            vv: vec![0; dcs],
            gst: vec![0; dcs],
            announced_us: 0,
            heard_since_start: (0..dcs).map(|d| d == m.idx()).collect(),
            journaled_vv: vec![0; dcs],
            tree: StableTree::new(&topology, ctx.id, cfg.tree_fanout),
            ticker: Ticker::new(&cfg.pace),
            parked: BTreeMap::new(),
            next_parked: 0,
            pending: PendingVisible::new(dcs),
            clock_us: 0,
            gc: VersionGc::new(cfg.gc_quiet_us),
            topology,
        }
    }
}

impl Server for CureServer {
    type Msg = Msg;
    type Version = Version;

    fn on_start(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        let Some(p) = self.part.as_mut() else { return };
        p.recover(env);
        p.saw_work(env, env.now_us());
        p.ticker.start(env, p.cfg.heartbeat_interval_us, p.cfg.stabilization_interval_us);
    }

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        let Some(p) = self.part.as_mut() else { return };
        p.saw_work(env, env.now_us());
        match msg {
            Msg::PutReq { key, value, last } => p.on_put(env, from, key, value, last),
            Msg::ReadOne { rot, keys, last } => p.on_read_one(env, from, rot, keys, last),
            Msg::SnapshotReq { rot, last } => p.on_snapshot_req(env, from, rot, last),
            Msg::RotReadAt { rot, keys, tv } => p.on_rot_read_at(env, from, rot, keys, tv),
            _ => {} // replies and peer messages never come from clients; the runtime rejects them at the edge
        }
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, msg: Msg) {
        let Some(p) = self.part.as_mut() else { return };
        if !p.topology.contains(from) {
            return;
        }
        match msg {
            Msg::Replicate { key, version } => p.on_replicate(env, from, key, version),
            Msg::Heartbeat { clock_us, last_work_us } => p.on_heartbeat(env, from, clock_us, last_work_us),
            Msg::StableReport { vv_min, last_work_us } => p.on_stable_report(env, from, vv_min, last_work_us),
            Msg::StablePush { gst, last_work_us } => p.on_stable_push(env, from, gst, last_work_us),
            _ => {} // client traffic never comes from peers
        }
    }

    fn on_timer(&mut self, env: &mut impl ServerEnv<Msg, Version>, token: u64) {
        let Some(p) = self.part.as_mut() else { return };
        match timer_kind(token) {
            TIMER_WAIT => p.retry(env, timer_arg(token)),
            _ if p.ticker.is_stale(token) => {} // superseded by a wake-up's timer
            TIMER_HEARTBEAT => p.heartbeat(env),
            TIMER_STABILIZE => p.stabilize(env),
            _ => {}
        }
    }

    /// A checkpoint leaves out the superseded versions this node's GC
    /// would collect at its horizon but has not reached yet
    /// ([`VersionGc::snapshot_floor`]).
    fn snapshot_floor(&self) -> Option<SnapshotFloor<Version>> {
        let p = self.part.as_ref()?;
        p.gc.snapshot_floor(gc_visible(p.m))
    }
}

impl Partition {
    // ------------------------------------------------------------ PUT

    /// PUT(x, X): the version is stamped with the physical clock, which must
    /// first pass every entry of the client's snapshot and everything this
    /// partition has announced — so the PUT *waits* for the clock when the
    /// client comes from a partition or DC whose clock is ahead (the
    /// blocking Didona et al. §3 attribute to physical-clock designs).
    fn on_put(&mut self, env: &mut impl Env, client: ClientId, key: Key, value: Value, last: TimeVec) {
        if let Err(e) = self.check_key(&key).and_then(|()| self.check_tv(&last)) {
            env.reply(client, Msg::PutReply(Err(e)));
            return;
        }
        self.raise_gst(env, remote_entries(&last, self.m.idx()));
        let since_us = env.now_us();
        self.try_put(env, Parked::Put { client, key, value, last, since_us }, None);
    }

    /// Write now if the clock allows, else park (again) with a timer.
    fn try_put(&mut self, env: &mut impl Env, put: Parked, id: Option<u64>) {
        let Parked::Put { client, key, value, last, since_us } = put else { return };
        let now = env.now_us();
        let client_dep = last.iter().copied().max().unwrap_or(0);
        let dep = client_dep.max(self.announced_us);
        // Deviation 7: a stamp one above what this partition announced
        // (a turn's clock is read once) where that passes the client's
        // dependencies and leads the clock by at most `STAMP_LEAD_US`.
        let ts = now.max(self.announced_us + 1);
        if ts <= client_dep || ts - now > STAMP_LEAD_US {
            if dep - now > self.cfg.max_clock_wait_us {
                let e = OpError::Aborted(format!("dependencies {} µs ahead of this server's clock", dep - now));
                env.reply(client, Msg::PutReply(Err(e)));
                return;
            }
            let put = Parked::Put { client, key, value, last, since_us };
            return self.park(env, put, id, dep - now + 1);
        }
        if id.is_some() {
            env.observe(Observation::Blocked { what: "put_clock_wait", waited_us: now.saturating_sub(since_us) });
        }
        // Invariant: a version's timestamp exceeds every entry of its
        // dependency vector and every local time this partition announced.
        assert!(ts > dep, "Cure: a PUT stamped {ts} does not exceed its dependencies {dep}");
        self.announced_us = ts;
        let m = self.m.idx();
        let mut dv = last;
        dv[m] = ts;
        let version = Version { value, ts, sr: self.m, dv };
        // The store's copy shares no reference count with the messages'
        // ([`causeway_core::copy_if_short`]).
        let stored = Version { value: causeway_core::copy_if_short(&version.value), dv: version.dv.clone(), ..version };
        self.apply(env, &key, stored);
        env.observe(Observation::Visible { key: &key, value: &version.value, origin: self.m, written_us: ts });
        env.reply(client, Msg::PutReply(Ok(PutOk { ts, gst: TimeVec::from_slice(&self.gst) })));
        for &peer in &self.peers {
            env.send(peer, Msg::Replicate { key: key.clone(), version: version.clone() });
        }
        self.ticker.replicated(self.peers.len());
    }

    fn park(&mut self, env: &mut impl Env, what: Parked, id: Option<u64>, after_us: u64) {
        let id = id.unwrap_or_else(|| {
            self.next_parked += 1;
            self.next_parked
        });
        self.parked.insert(id, what);
        env.set_timer(after_us, timer(TIMER_WAIT, id));
    }

    fn retry(&mut self, env: &mut impl Env, id: u64) {
        match self.parked.remove(&id) {
            Some(put @ Parked::Put { .. }) => self.try_put(env, put, Some(id)),
            Some(read @ Parked::Read { .. }) => self.try_read(env, read, Some(id)),
            None => {}
        }
    }

    // ------------------------------------------------------------ ROT

    /// The coordinator's snapshot: local entry max(clock − 1, every stamp
    /// handed out here, the client's highest local timestamp), remote
    /// entries max(GST, the client's). The local entry is one below the
    /// clock or already announced, so a read here may proceed at once (it
    /// needs clock > TV[m], or TV[m] announced).
    fn snapshot(&mut self, env: &mut impl Env, last: &[TimeUs]) -> TimeVec {
        self.raise_gst(env, remote_entries(last, self.m.idx()));
        let mut tv = TimeVec::from_slice(&self.gst);
        // Deviation 7: at least every stamp this partition handed out, some
        // of which may lead the clock; a read here needs no clock wait for
        // them (`try_read`).
        tv[self.m.idx()] = env.now_us().saturating_sub(1).max(self.announced_us);
        vmax(&mut tv, last);
        tv
    }

    fn on_snapshot_req(&mut self, env: &mut impl Env, client: ClientId, rot: u64, last: Vec<TimeUs>) {
        let tv = self.check_tv(&last).map(|()| self.snapshot(env, &last).to_vec());
        env.reply(client, Msg::SnapshotReply { rot, tv });
    }

    /// A ROT or GET of this partition's keys only: one round.
    fn on_read_one(&mut self, env: &mut impl Env, client: ClientId, rot: u64, keys: Vec<Key>, last: TimeVec) {
        if let Err(e) = self.check_keys(&keys).and_then(|()| self.check_tv(&last)) {
            env.reply(client, Msg::RotSlice { rot, slice: Err(e) });
            return;
        }
        let tv = self.snapshot(env, &last);
        let since_us = env.now_us();
        self.try_read(env, Parked::Read { client, rot, keys, tv, since_us }, None);
    }

    fn on_rot_read_at(&mut self, env: &mut impl Env, client: ClientId, rot: u64, keys: Vec<Key>, tv: Vec<TimeUs>) {
        if let Err(e) = self.check_keys(&keys).and_then(|()| self.check_tv(&tv)) {
            env.reply(client, Msg::RotSlice { rot, slice: Err(e) });
            return;
        }
        let since_us = env.now_us();
        let tv = TimeVec::from_slice(&tv);
        self.try_read(env, Parked::Read { client, rot, keys, tv, since_us }, None);
    }

    /// Read at TV once this partition may: its clock has passed TV[m] (so
    /// no later local version can fall inside the snapshot) and it has
    /// received every remote version TV covers (VV ≥ TV). Either may make
    /// the read wait — Cure's blocking ROT.
    fn try_read(&mut self, env: &mut impl Env, read: Parked, id: Option<u64>) {
        let Parked::Read { client, rot, keys, tv, since_us } = read else { return };
        let (m, now) = (self.m.idx(), env.now_us());
        // Every version this partition will stamp lies above what it
        // announced, so a snapshot at or below that needs no clock wait
        // (deviation 7): the set of local versions inside it is final.
        let clock_ok = now > tv[m] || tv[m] <= self.announced_us || self.cfg.mutant_skip_clock_wait;
        let vv_ok = remote_covered(&tv, &self.vv, m);
        if !clock_ok || !vv_ok {
            if tv[m].saturating_sub(now) > self.cfg.max_clock_wait_us {
                let e = OpError::Aborted(format!("snapshot {} µs ahead of this server's clock", tv[m] - now));
                env.reply(client, Msg::RotSlice { rot, slice: Err(e) });
                return;
            }
            let after_us = if clock_ok { self.cfg.stabilization_interval_us } else { tv[m] - now + 1 };
            return self.park(env, Parked::Read { client, rot, keys, tv, since_us }, id, after_us);
        }
        if id.is_some() {
            let what = if since_us < now && tv[m] >= since_us { "rot_clock_wait" } else { "rot_gst_wait" };
            env.observe(Observation::Blocked { what, waited_us: now.saturating_sub(since_us) });
        }
        if !self.cfg.mutant_skip_clock_wait {
            self.announced_us = self.announced_us.max(tv[m]);
        }
        let skip = self.cfg.mutant_skip_visibility_check;
        let store = env.store();
        let mut values = Vec::with_capacity(keys.len());
        for key in &keys {
            match store.latest_where(key, |v| in_snapshot(v, &tv, self.m, skip)) {
                Some(v) => values.push(Some(causeway_core::copy_if_short(&v.value))),
                None if store.was_pruned(key) => {
                    let e = OpError::Aborted("snapshot pruned".into());
                    env.reply(client, Msg::RotSlice { rot, slice: Err(e) });
                    return;
                }
                None => values.push(None),
            }
        }
        env.reply(client, Msg::RotSlice { rot, slice: Ok(Slice { values, tv }) });
    }

    // ------------------------------------------------------------ replication

    fn on_replicate(&mut self, env: &mut impl Env, from: NodeId, key: Key, version: Version) {
        let k = self.topology.dc_of(from);
        let well_formed = self.peers.contains(&from)
            && version.sr == k
            && partition::well_formed(&version, self.vv.len())
            && self.check_key(&key).is_ok();
        if !well_formed {
            return; // a malformed peer message is dropped
        }
        self.saw_work(env, env.now_us());
        let order = version.order();
        self.vv[k.idx()] = self.vv[k.idx()].max(order.0);
        self.heard_since_start[k.idx()] = true;
        self.stable_if_alone(env, k.idx(), false);
        let visible_now =
            partition::land_remote(env, &mut self.gc, &mut self.pending, &self.gst, &key, version, gc_visible(self.m));
        if let Some((index, order)) = visible_now {
            self.report_if_read(env, index, order);
        }
    }

    fn on_heartbeat(&mut self, env: &mut impl Env, from: NodeId, clock_us: TimeUs, work_us: u64) {
        if self.peers.contains(&from) {
            let k = self.topology.dc_of(from).idx();
            self.vv[k] = self.vv[k].max(clock_us);
            self.heard_since_start[k] = true;
            self.stable_if_alone(env, k, true);
            self.saw_work(env, work_us);
        }
    }

    /// In a DC of one partition, GST[k] (the entry-wise minimum of the DC's
    /// VVs) is this partition's own VV[k]: raise it when VV[k] moves, not θ
    /// later (the tick computes the same value). A remote version whose DV
    /// is covered but for its own DC's entry is then visible on arrival,
    /// where it was parked for up to θ; the FIFO link has brought every
    /// earlier version of DC k, so VV[k] covers its DV[k].
    ///
    /// Deviation 5 still holds: no GST entry is handed out above what a
    /// restart gives back to VV. A VV[k] set by a replicated version comes
    /// back from the stored version itself; one set by a heartbeat only from
    /// the journaled VV, so that is journaled first (`journal_vv`, once per
    /// heartbeat that raises it).
    fn stable_if_alone(&mut self, env: &mut impl Env, k: usize, by_heartbeat: bool) {
        if let Some(vv) = alone_raise(&self.tree, &self.vv, &self.gst, k) {
            if by_heartbeat {
                self.journal_vv(env);
            }
            self.raise_gst(env, [(k, vv)]);
        }
    }

    /// Report a remote version visible once DV ≤ GST, if a local read
    /// returns it then.
    fn report_if_read(&self, env: &mut impl Env, index: KeyIndex, order: (TimeUs, DcId)) {
        let m = self.m;
        let mut now = self.gst.clone();
        now[m.idx()] = TimeUs::MAX;
        let visible = |v: &Version| in_snapshot(v, &now, m, false);
        partition::report_if_read(env, index, order, order.1, order.0, &self.gst, "Cure (GST)", visible);
    }

    // ------------------------------------------------------------ GST tree

    fn on_stable_report(&mut self, env: &mut impl Env, from: NodeId, vv_min: Vec<TimeUs>, work_us: u64) {
        if vv_min.len() == self.vv.len() && self.tree.on_report(from, vv_min) {
            self.saw_work(env, work_us);
        }
    }

    fn on_stable_push(&mut self, env: &mut impl Env, from: NodeId, gst: Vec<TimeUs>, work_us: u64) {
        if !self.dc_servers.contains(&from) || gst.len() != self.vv.len() {
            return;
        }
        self.saw_work(env, work_us);
        self.raise_gst(env, gst.iter().copied().enumerate());
        self.push_down(env, &gst);
    }

    fn push_down(&self, env: &mut impl Env, gst: &[TimeUs]) {
        for &child in self.tree.children() {
            env.send(child, Msg::StablePush { gst: gst.to_vec(), last_work_us: self.ticker.last_work_us() });
        }
    }

    /// Raise GST entries (monotonic); admit the remote versions it covers.
    fn raise_gst(&mut self, env: &mut impl Env, entries: impl IntoIterator<Item = (usize, TimeUs)>) {
        if !raise_entries(&mut self.gst, entries) {
            return;
        }
        // Invariant: the GST never claims more of a remote DC than this
        // partition received (unless it may have forgotten: see `heard_since_start`).
        assert!(
            self.may_have_forgotten() || remote_covered(&self.gst, &self.vv, self.m.idx()),
            "Cure: GST {:?} exceeds what partition {:?} received ({:?})",
            self.gst,
            self.partition,
            self.vv
        );
        if let Some(least) = self.gst.iter().min() {
            env.observe(Observation::Stable { stable_us: *least });
        }
        for (index, order) in partition::newly_visible(env, &mut self.pending, &self.gst) {
            self.report_if_read(env, index, order);
        }
    }

    // ------------------------------------------------------------ timers

    fn saw_work(&mut self, env: &mut impl Env, at_us: u64) {
        self.clock_us = self.clock_us.max(env.now_us());
        self.ticker.saw_work(env, at_us);
    }

    /// After a restart: VV from the stored versions and the journaled VV
    /// (deviation 5); every later version is stamped above every stored
    /// one. A clock that never runs backwards (Cure's assumption; the
    /// network runtime keeps a journaled floor under it) keeps it above
    /// every heartbeat and snapshot handed out.
    fn recover(&mut self, env: &mut impl Env) {
        let m = self.m.idx();
        // A local version's remote DV entries are the writer's snapshot,
        // GST values of this DC (`on_put` raises the GST with them), so
        // still true of all its partitions: the GST resumes there, and a
        // fresh session's first snapshot (TV[m] is the clock) already holds
        // every write stored here, before any GST step.
        let mut gst = vec![0; self.gst.len()];
        let (announced_us, vv) = (&mut self.announced_us, &mut self.vv);
        partition::for_each_stored(env, |v| {
            *announced_us = (*announced_us).max(v.ts);
            if let Some(e) = vv.get_mut(v.sr.idx()) {
                *e = (*e).max(v.ts);
            }
            if v.sr.idx() == m && v.dv.len() == gst.len() {
                vmax(&mut gst, &v.dv);
            }
        });
        gst[m] = 0;
        if let Some((journaled, horizon)) = env.store().meta().and_then(|b| decode_meta(b, self.vv.len())) {
            for (i, t) in journaled.into_iter().enumerate().filter(|&(i, _)| i != m) {
                self.vv[i] = self.vv[i].max(t);
                self.journaled_vv[i] = t;
            }
            // The GST also resumes at the journaled GC horizon, a GST of
            // this DC and so still true: collection (or a checkpoint cut at
            // the horizon) may have left a key only versions from there on,
            // and a restarted store no longer knows it was pruned, so a
            // read below the horizon would find the key absent.
            if let Some(h) = horizon {
                vmax(&mut gst, &h);
                self.gc.resume_journaled(h);
            }
        }
        self.raise_gst(env, gst.into_iter().enumerate());
    }

    /// The journaled metadata: VV's remote entries (deviation 5), then the
    /// GC horizon once there is one, each as little-endian µs.
    fn meta(&self) -> Vec<u8> {
        self.journaled_vv
            .iter()
            .chain(self.gc.journaled().into_iter().flatten())
            .flat_map(|t| t.to_le_bytes())
            .collect()
    }

    /// Journal VV's remote entries when they rose since the last time, in
    /// the turn that reports them (deviation 5). Every GST of this DC is
    /// the minimum of reports, and this partition's reports leave only
    /// after the VV they carry is in its log, so after a restart VV is at
    /// least every GST entry any client holds. Without it a restarted
    /// partition's VV resumes from the stored versions alone, below the
    /// heartbeats it had heard, and a session's read waits for the other
    /// DC's next heartbeat: for as long as that DC is cut off.
    fn journal_vv(&mut self, env: &mut impl Env) {
        let m = self.m.idx();
        if remote_covered(&self.vv, &self.journaled_vv, m) {
            return;
        }
        self.journaled_vv.clone_from(&self.vv);
        self.journaled_vv[m] = 0;
        // Unsynced: losing it to an operating-system crash costs only the
        // wait for heartbeats this journal avoids, and it changes every θ,
        // which with `fsync = always` would sync an idle node that often.
        env.store().set_meta_unsynced(self.meta());
    }

    fn heartbeat(&mut self, env: &mut impl Env) {
        if self.ticker.heartbeat_due() {
            // One below the clock: a version stamped in this same µs is
            // still above it, so a PUT never waits on its own heartbeat.
            let clock_us = env.now_us().saturating_sub(1).max(self.announced_us);
            self.announced_us = clock_us;
            let last_work_us = self.ticker.last_work_us();
            for &peer in &self.peers {
                env.send(peer, Msg::Heartbeat { clock_us, last_work_us });
            }
        }
        self.ticker.rearm_heartbeat(env, self.cfg.heartbeat_interval_us);
    }

    /// Every θ: VV[m] = clock; one step of the GST tree; a bounded GC step.
    fn stabilize(&mut self, env: &mut impl Env) {
        self.clock_us = self.clock_us.max(env.now_us());
        let m = self.m.idx();
        // VV[m] = clock − 1, for the same reason as the heartbeat's value.
        self.announced_us = self.announced_us.max(env.now_us().saturating_sub(1));
        self.vv[m] = self.vv[m].max(self.announced_us);
        self.journal_vv(env);
        match self.tree.step(&self.vv) {
            TreeStep::Report { parent, aggregate } => {
                env.send(parent, Msg::StableReport { vv_min: aggregate, last_work_us: self.ticker.last_work_us() });
            }
            TreeStep::Stable(gst) => {
                self.raise_gst(env, gst.iter().copied().enumerate());
                self.push_down(env, &gst);
            }
            TreeStep::Waiting => {}
        }
        self.collect_garbage(env);
        self.ticker.rearm_stabilize(env, self.cfg.stabilization_interval_us);
    }

    /// As Contrarian's GC: drop versions older than the newest one in the
    /// snapshot made of a GST at least `gc_grace_us` old (local entry: that
    /// GST's, below every later snapshot's clock entry).
    fn collect_garbage(&mut self, env: &mut impl Env) {
        let (now_us, grace_us) = (self.clock_us, self.cfg.gc_grace_us);
        // A new horizon is journaled in the turn it is reached, for `recover`.
        let gc = &mut self.gc;
        if partition::collect_garbage(gc, env.store(), now_us, &self.gst, grace_us, gc_visible(self.m)).is_some() {
            env.store().set_meta_unsynced(self.meta());
        }
    }

    // ------------------------------------------------------------ shared steps

    fn apply(&mut self, env: &mut impl Env, key: &[u8], version: Version) -> Landed {
        self.gc.apply(env.store(), key, version, gc_visible(self.m))
    }

    fn check_key(&self, key: &[u8]) -> Result<(), OpError> {
        partition::check_key(&self.topology, self.partition, self.m, key)
    }

    fn check_keys(&self, keys: &[Key]) -> Result<(), OpError> {
        partition::check_keys(&self.topology, self.partition, self.m, keys)
    }

    /// A vector from a client: one entry per DC, remote entries within what
    /// this partition has received (until it has heard from every DC since it started, it waits for VV instead).
    fn check_tv(&self, tv: &[TimeUs]) -> Result<(), OpError> {
        if tv.len() != self.vv.len() {
            return Err(OpError::BadRequest(format!("a snapshot needs {} entries", self.vv.len())));
        }
        if !self.may_have_forgotten() && !remote_covered(tv, &self.vv, self.m.idx()) {
            return Err(OpError::BadRequest("a snapshot is ahead of what this DC has received".into()));
        }
        Ok(())
    }
}

impl Partition {
    /// Whether VV may still be below what this partition received before a
    /// crash ([`Partition::heard_since_start`]).
    fn may_have_forgotten(&self) -> bool {
        !self.heard_since_start.iter().all(|&h| h)
    }
}

/// Whether a version lies inside a GC horizon (a snapshot made of an old
/// stable vector), for [`VersionGc`].
fn gc_visible(m: DcId) -> impl Fn(&Version, &Vec<TimeUs>) -> bool {
    move |v, horizon| in_snapshot(v, horizon, m, false)
}

/// [`Partition::meta`] read back: the journaled VV (`dcs` little-endian
/// µs), and the GC horizon if one was journaled (an older journal has only
/// the VV).
fn decode_meta(bytes: &[u8], dcs: usize) -> Option<(Vec<TimeUs>, Option<Vec<TimeUs>>)> {
    let times = |b: &[u8]| b.chunks_exact(8).map(|c| TimeUs::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
    if bytes.len() == dcs * 8 {
        Some((times(bytes), None))
    } else if dcs > 0 && bytes.len() == 2 * dcs * 8 {
        Some((times(&bytes[..dcs * 8]), Some(times(&bytes[dcs * 8..]))))
    } else {
        None
    }
}
