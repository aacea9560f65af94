use super::config::*;
use super::msg::*;
use crate::kit::node::served_partition;
use crate::stabilization::pace::Pace;
use crate::stabilization::slices::{self, Gathering};
use crate::stabilization::stable_tree::{StableTree, TreeStep};
use crate::stabilization::version_gc::VersionGc;
use crate::stabilization::visibility;
use causeway_core::{
    ClientId, DcId, Inserted, Key, KeyIndex, NodeCtx, NodeId, Observation, PartitionId, Server, ServerEnv, Topology,
    Value, vmin_entry,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

crate::kit::node::server_env!();

/// The server's timers, mapped to the runtime's opaque `u64` token here
/// and nowhere else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timer {
    /// Δ: send the clock to the equivalents if nothing was replicated. The
    /// pace epoch it was set under; a wake-up makes it stale.
    Heartbeat(u64),
    /// θ: a step of the GST tree, and GC (with its pace epoch).
    Stabilize(u64),
    /// Re-check parked PUT `id` (its client's `dt` is still ahead of the clock).
    PutWait(u64),
}

impl Timer {
    /// The kind in the low two bits, the epoch or id above them.
    fn token(self) -> u64 {
        match self {
            Timer::Heartbeat(epoch) => epoch << 2,
            Timer::Stabilize(epoch) => (epoch << 2) | 1,
            Timer::PutWait(id) => (id << 2) | 2,
        }
    }
    fn from_token(token: u64) -> Timer {
        match token & 3 {
            0 => Timer::Heartbeat(token >> 2),
            1 => Timer::Stabilize(token >> 2),
            _ => Timer::PutWait(token >> 2),
        }
    }
}

/// A GentleRain node. Only partition primaries take part; any other node of
/// a shared topology (a service node) ignores every input.
pub struct GentleRainServer {
    pub(super) part: Option<PartitionServer>,
}

impl GentleRainServer {
    pub(super) fn new(cfg: &Config, ctx: NodeCtx) -> GentleRainServer {
        let part = served_partition(&ctx).map(|(dc, partition)| PartitionServer::new(cfg, &ctx, dc, partition));
        GentleRainServer { part }
    }
}

/// Partition server p^m_n.
pub(super) struct PartitionServer {
    cfg: Config,
    topology: Arc<Topology>,
    me: NodeId,
    /// m: this server's DC.
    dc: DcId,
    /// n: this server's partition.
    partition: PartitionId,
    /// p^k_n for every k ≠ m, in DC order.
    equivalents: Vec<(DcId, NodeId)>,
    /// VV^m_n: entry k ≠ m is the latest `ut` or heartbeat received from
    /// p^k_n; entry m is this server's clock (at the last stabilization tick
    /// or local PUT).
    pub(super) vv: Vec<TimeUs>,
    /// GST^m_n: every version with `ut ≤ gst` has reached this DC (C2).
    pub(super) gst: TimeUs,
    /// The GST last journaled (the store's metadata): recovery's floor.
    journaled_gst: TimeUs,
    pub(super) tree: StableTree<TimeUs>,
    /// The tree parent, the only node whose [`Msg::StablePush`] is accepted.
    tree_parent: Option<NodeId>,
    /// Remote versions present but not yet admitted by GST, as ⟨ut, sr⟩ and
    /// their key's place in the store, so [`Observation::Visible`] fires
    /// exactly when GST passes them (as in
    /// [`visibility`](crate::stabilization::visibility): no copy of the
    /// value, no second lookup of the key).
    not_yet_visible: BTreeSet<(TimeUs, DcId, KeyIndex)>,
    /// Whether a replicate went out since the last heartbeat tick.
    replicated_since_heartbeat: bool,
    /// Δ and θ slow down while the cluster is idle.
    pace: Pace,
    /// PUTs waiting for the clock to pass their `dt` (C1), by id.
    parked_puts: BTreeMap<u64, ParkedPut>,
    next_put_id: u64,
    /// ROTs waiting for `GST ≥ dt`, by ⟨dt, id⟩.
    parked_rots: BTreeMap<(TimeUs, u64), ParkedRot>,
    /// ROTs this server coordinates whose slices are outstanding.
    rots: Gathering<RotInProgress>,
    /// Collection of superseded versions below the GST of `gc_grace_us`
    /// ago: each write collects its own key, a periodic pass the keys
    /// that went quiet.
    gc: VersionGc<TimeUs>,
}

pub(super) struct ParkedPut {
    client: ClientId,
    key: Key,
    value: Value,
    dt: TimeUs,
    parked_at_us: TimeUs,
}

pub(super) struct ParkedRot {
    client: ClientId,
    keys: Vec<Key>,
    parked_at_us: TimeUs,
}

pub(super) struct RotInProgress {
    client: ClientId,
    /// One entry per requested key; `None` until its slice answers.
    reads: Vec<Option<SliceRead>>,
    malformed: bool,
}

impl PartitionServer {
    pub(super) fn new(cfg: &Config, ctx: &NodeCtx, dc: DcId, partition: PartitionId) -> Self {
        let topology = ctx.topology.clone();
        let fanout = cfg.tree_fanout.max(1);
        let servers: Vec<NodeId> = topology.dc_servers(dc).collect();
        let tree_parent =
            servers.iter().position(|&n| n == ctx.id).filter(|&i| i > 0).map(|i| servers[(i - 1) / fanout]);
        PartitionServer {
            cfg: cfg.clone(),
            me: ctx.id,
            dc,
            partition,
            equivalents: topology.equivalents(partition).filter(|&(d, _)| d != dc).collect(),
            vv: vec![0; topology.dcs()],
            gst: 0,
            journaled_gst: 0,
            tree: StableTree::new(&topology, ctx.id, fanout),
            tree_parent,
            not_yet_visible: BTreeSet::new(),
            replicated_since_heartbeat: false,
            pace: Pace::new(&cfg.pace),
            parked_puts: BTreeMap::new(),
            next_put_id: 0,
            parked_rots: BTreeMap::new(),
            rots: Gathering::default(),
            gc: VersionGc::new(cfg.gc_quiet_us),
            topology,
        }
    }

    /// The DC of `from` if it is one of this partition's equivalents.
    fn equivalent_dc(&self, from: NodeId) -> Option<DcId> {
        self.equivalents.iter().find(|&&(_, n)| n == from).map(|&(d, _)| d)
    }

    /// GST = max(GST, g), for any `g` that is a stable time of this DC (a
    /// tree result, or a GST a client or coordinator got from this DC).
    /// Remote versions it admits become visible; parked ROTs it satisfies start.
    /// Report a remote version visible if it is what a GET returns now: a
    /// version that lost last-writer-wins to one already visible is never
    /// read, so it is never reported (the meaning of `Observation::Visible`).
    fn report_if_read(&self, env: &mut impl Env, index: KeyIndex, origin: DcId, written_us: TimeUs) {
        let (m, gst) = (self.dc, self.gst);
        let order = (written_us, origin);
        visibility::report_if_read(env, index, order, origin, written_us, |d| d.sr == m || d.ut <= gst);
    }

    fn raise_gst(&mut self, env: &mut impl Env, g: TimeUs) {
        if g <= self.gst {
            return;
        }
        self.gst = g;
        env.observe(Observation::Stable { stable_us: g });
        while let Some(&(written_us, origin, index)) = self.not_yet_visible.first()
            && written_us <= g
        {
            self.not_yet_visible.pop_first();
            self.report_if_read(env, index, origin, written_us);
        }
        while let Some(e) = self.parked_rots.first_entry()
            && e.key().0 <= g
        {
            let ((_, id), rot) = e.remove_entry();
            let waited_us = env.now_us().saturating_sub(rot.parked_at_us);
            env.observe(Observation::Blocked { what: "rot_gst_wait", waited_us });
            self.start_rot(env, id, rot.client, rot.keys);
        }
    }

    // ------------------------------------------------------------ GET

    /// ⟨GetReq k, gst⟩: GST = max(GST, gst) — the client's GST came from this
    /// DC, so it is a real stable time — and return the latest version that
    /// is local or stable.
    fn on_get(&mut self, env: &mut impl Env, client: ClientId, key: Key, gst: TimeUs) {
        self.raise_gst(env, gst);
        let (m, gst) = (self.dc, if self.cfg.mutant_skip_gst_check { TimeUs::MAX } else { self.gst });
        let found = env
            .store()
            .latest_where(&key, |d| d.sr == m || d.ut <= gst)
            .map(|d| (causeway_core::copy_if_short(&d.value), d.ut));
        let (value, ut) = match found {
            Some((v, ut)) => (Some(v), ut),
            None => (None, 0),
        };
        env.reply(client, Msg::GetReply { value, ut, gst });
    }

    // ------------------------------------------------------------ PUT

    /// ⟨PutReq k, v, dt, gst⟩: GST = max(GST, gst) (deviation 1: the
    /// writer's GST_c is a stable time of this DC, and readers of the new
    /// version must learn it); wait until the clock exceeds dt (C1), then
    /// write. The wait parks the request and sets a timer for the remaining skew.
    fn on_put(&mut self, env: &mut impl Env, client: ClientId, key: Key, value: Value, dt: TimeUs, gst: TimeUs) {
        if self.topology.partition_of(&key) != self.partition {
            return; // misrouted (our client never does this); there is no error reply for a PUT
        }
        self.raise_gst(env, gst);
        let now = env.now_us();
        if self.may_write(env, &key, dt, now) {
            self.apply_put(env, client, key, value, dt, None);
        } else {
            let id = self.next_put_id;
            self.next_put_id += 1;
            env.set_timer(put_wait_us(dt, now), Timer::PutWait(id).token());
            self.parked_puts.insert(id, ParkedPut { client, key, value, dt, parked_at_us: now });
        }
    }

    /// C1 (`clock > dt`), and no version of `key` already carries ⟨now, m⟩.
    fn may_write(&self, env: &mut impl Env, key: &[u8], dt: TimeUs, now: TimeUs) -> bool {
        now > dt && env.store().exact(key, (now, self.dc)).is_none()
    }

    /// A parked PUT's timer fired: proceed if the clock has now passed `dt`,
    /// otherwise wait again (the clock may drift, or have jumped).
    fn recheck_parked_put(&mut self, env: &mut impl Env, id: u64) {
        let Some(p) = self.parked_puts.remove(&id) else { return };
        let now = env.now_us();
        if self.may_write(env, &p.key, p.dt, now) {
            self.apply_put(env, p.client, p.key, p.value, p.dt, Some(p.parked_at_us));
        } else {
            env.set_timer(put_wait_us(p.dt, now), Timer::PutWait(id).token());
            self.parked_puts.insert(id, p);
        }
    }

    /// Stamp with the clock, insert, acknowledge, replicate.
    fn apply_put(
        &mut self,
        env: &mut impl Env,
        client: ClientId,
        key: Key,
        value: Value,
        dt: TimeUs,
        parked_at_us: Option<TimeUs>,
    ) {
        // ut = the physical clock, as read now. NO guard against a clock that
        // went backwards (no max with VV[m] or with the last ut): GentleRain
        // has none, and a clock stepped back below a GST computed elsewhere
        // breaks C2 (Roohitavaf §5.1.1). The tests demonstrate it.
        let ut = env.now_us();
        // Invariant (C1, Du et al., GentleRain, §4.2): a version's timestamp
        // exceeds every dependency's, the client's `dt`. `may_write` admitted
        // this PUT only at a clock past `dt`, read in this same turn.
        assert!(ut > dt, "GentleRain C1: a PUT stamped {ut} does not exceed its dependency time {dt}");
        if let Some(t0) = parked_at_us {
            env.observe(Observation::Blocked { what: "put_clock_wait", waited_us: ut.saturating_sub(t0) });
        }
        let version = Version { value, ut, sr: self.dc };
        // The store's copy shares no reference count with the messages'
        // ([`causeway_core::copy_if_short`]).
        self.gc.apply(
            env.store(),
            &key,
            Version { value: causeway_core::copy_if_short(&version.value), ..version },
            gc_visible,
        );
        self.journal_gst(env);
        env.observe(Observation::Visible { key: &key, value: &version.value, origin: self.dc, written_us: ut });
        self.vv[self.dc.idx()] = ut;
        env.reply(client, Msg::PutReply { ut });
        // Sent as the version is created, so each FIFO channel carries this
        // server's versions in `ut` order while the clock runs forwards.
        for &(_, n) in &self.equivalents {
            env.send(n, Msg::Replicate { key: key.clone(), version: version.clone() });
            self.replicated_since_heartbeat = true;
        }
    }

    /// Journal GST with a local version when it rose since the last one.
    ///
    /// Deviation 1 makes a local version's readers learn a GST covering its
    /// writer's remote causal past, which holds only while this server's GST
    /// never falls below what it was at the write. The paper's servers never
    /// crash; ours restart from their journal, so the GST is logged with the
    /// versions of the same turn and recovered in `on_start`. Only a local
    /// PUT needs it (a GET or slice reply carries a GST its client already
    /// covers), so an idle server journals nothing.
    fn journal_gst(&mut self, env: &mut impl Env) {
        if self.gst > self.journaled_gst {
            self.journaled_gst = self.gst;
            env.store().set_meta(self.gst.to_le_bytes().to_vec());
        }
    }

    /// After a restart: GST from the journal (see [`Self::journal_gst`]).
    fn recover(&mut self, env: &mut impl Env) {
        let journaled = env.store().meta().and_then(|m| <[u8; 8]>::try_from(m).ok()).map(TimeUs::from_le_bytes);
        if let Some(g) = journaled.filter(|_| !self.cfg.mutant_skip_recovery) {
            self.journaled_gst = g;
            self.raise_gst(env, g);
        }
    }

    // ------------------------------------------------------------ replication

    /// ⟨Replicate d⟩ from p^k_n: insert d; `VV[k] = d.ut` (sound because the
    /// channel is FIFO and p^k_n sends in `ut` order).
    fn on_replicate(&mut self, env: &mut impl Env, from: NodeId, key: Key, version: Version) {
        let Some(k) = self.equivalent_dc(from) else { return };
        if version.sr != k {
            return; // GentleRain only replicates from the origin
        }
        self.saw_work(env, env.now_us());
        self.vv[k.idx()] = version.ut;
        let ut = version.ut;
        let landed = self.gc.apply(env.store(), &key, version, gc_visible);
        if landed.inserted == Inserted::Duplicate {
            return;
        }
        if ut <= self.gst {
            self.report_if_read(env, landed.index, k, ut);
        } else {
            self.not_yet_visible.insert((ut, k, landed.index));
        }
    }

    /// ⟨Heartbeat t⟩ from p^k_n: `VV[k] = t`.
    fn on_heartbeat(&mut self, env: &mut impl Env, from: NodeId, clock: TimeUs, work_us: TimeUs) {
        if let Some(k) = self.equivalent_dc(from) {
            self.vv[k.idx()] = clock;
            self.saw_work(env, work_us);
        }
    }

    // ------------------------------------------------------------ GST tree

    fn on_stable_report(&mut self, env: &mut impl Env, from: NodeId, vv: Vec<TimeUs>, work_us: TimeUs) {
        // Reports from non-children are ignored.
        if vv.len() == self.vv.len() && self.tree.on_report(from, vv) {
            self.saw_work(env, work_us);
        }
    }

    fn on_stable_push(&mut self, env: &mut impl Env, from: NodeId, gst: TimeUs, work_us: TimeUs) {
        if Some(from) == self.tree_parent {
            self.saw_work(env, work_us);
            self.raise_gst(env, gst);
            self.push_gst(env);
        }
    }

    fn push_gst(&self, env: &mut impl Env) {
        for &c in self.tree.children() {
            env.send(c, Msg::StablePush { gst: self.gst, last_work_us: self.pace.last_work_us() });
        }
    }

    // ------------------------------------------------------------ pacing

    /// Work seen, for the idle pacing ([`Pace::saw_work`]).
    fn saw_work(&mut self, env: &mut impl Env, at_us: TimeUs) {
        self.pace.saw_work(env, at_us, |e| [Timer::Heartbeat(e).token(), Timer::Stabilize(e).token()]);
    }

    // ------------------------------------------------------------ GET-ROTX

    /// ⟨RotReq keys, dt, gst⟩ at the coordinator: wait until GST ≥ dt (the
    /// snapshot must include everything the client depends on), then read.
    fn on_rot(&mut self, env: &mut impl Env, client: ClientId, keys: Vec<Key>, dt: TimeUs, gst: TimeUs) {
        self.raise_gst(env, gst);
        let id = self.rots.next_id();
        if dt <= self.gst {
            self.start_rot(env, id, client, keys);
        } else if dt - self.gst > self.cfg.rot_wait_threshold_us {
            // The paper runs Eiger's ROT here; that fallback is not implemented.
            let reason = format!(
                "dt is {} µs ahead of GST, above rot_wait_threshold_us (the Eiger fallback is not implemented)",
                dt - self.gst
            );
            env.reply(client, Msg::RotReply { outcome: RotOutcome::Aborted { reason }, gst: self.gst });
        } else {
            self.parked_rots.insert((dt, id), ParkedRot { client, keys, parked_at_us: env.now_us() });
        }
    }

    /// snapshot = GST; ask every partition of this DC holding some of the
    /// keys (this one directly) for its versions at the snapshot.
    fn start_rot(&mut self, env: &mut impl Env, id: u64, client: ClientId, keys: Vec<Key>) {
        let snapshot = self.gst;
        let Some(split) = slices::split(&self.topology, self.dc, self.me, &keys) else {
            let reason = "a key's partition is not stored in this DC".to_string();
            env.reply(client, Msg::RotReply { outcome: RotOutcome::Aborted { reason }, gst: self.gst });
            return;
        };
        let mut rot = RotInProgress { client, reads: vec![None; keys.len()], malformed: false };
        for (n, idx) in &split.remote {
            env.send(*n, Msg::SliceReq { rot: id, keys: slices::keys_at(&keys, idx), snapshot });
        }
        let reads = read_slice(env, &slices::keys_at(&keys, &split.local), snapshot);
        for (&i, r) in split.local.iter().zip(reads) {
            rot.reads[i] = Some(r);
        }
        if let Some(rot) = self.rots.open(id, rot, split.remote) {
            self.finish_rot(env, rot);
        }
    }

    /// ⟨SliceReq keys, snapshot⟩ from a coordinator of this DC.
    fn on_slice_req(&mut self, env: &mut impl Env, from: NodeId, rot: u64, keys: Vec<Key>, snapshot: TimeUs) {
        if self.topology.dc_of(from) != self.dc {
            return;
        }
        self.raise_gst(env, snapshot);
        let reads = read_slice(env, &keys, snapshot);
        env.send(from, Msg::SliceReply { rot, reads });
    }

    fn on_slice_reply(&mut self, env: &mut impl Env, from: NodeId, id: u64, reads: Vec<SliceRead>) {
        let Some((rot, idx, last)) = self.rots.answer(id, from) else { return };
        if reads.len() == idx.len() {
            for (i, r) in idx.into_iter().zip(reads) {
                rot.reads[i] = Some(r);
            }
        } else {
            rot.malformed = true;
        }
        if last && let Some(rot) = self.rots.close(id) {
            self.finish_rot(env, rot);
        }
    }

    /// ⟨RotReply values, GST⟩, or an abort if a slice was pruned.
    fn finish_rot(&self, env: &mut impl Env, rot: RotInProgress) {
        let mut values = Vec::with_capacity(rot.reads.len());
        let mut max_ut = 0;
        let mut outcome = None;
        for r in rot.reads {
            match r {
                Some(SliceRead::Found { value, ut }) => {
                    max_ut = max_ut.max(ut);
                    values.push(Some(value));
                }
                Some(SliceRead::Absent) => values.push(None),
                Some(SliceRead::Pruned) => outcome = Some("snapshot pruned"),
                None => outcome = Some("malformed slice reply"),
            }
        }
        if rot.malformed {
            outcome = Some("malformed slice reply");
        }
        let outcome = match outcome {
            Some(reason) => RotOutcome::Aborted { reason: reason.to_string() },
            None => RotOutcome::Read { values, max_ut },
        };
        env.reply(rot.client, Msg::RotReply { outcome, gst: self.gst });
    }

    // ------------------------------------------------------------ timers

    /// Every Δ: if no replicate went out since the last tick, send
    /// ⟨Heartbeat clock⟩ so the equivalents' VV entries keep moving.
    fn heartbeat_tick(&mut self, env: &mut impl Env, epoch: u64) {
        if epoch != self.pace.epoch() {
            return; // superseded by a wake-up's timer
        }
        let clock = env.now_us();
        if !self.replicated_since_heartbeat && !self.cfg.mutant_drop_heartbeats {
            let last_work_us = self.pace.last_work_us();
            for &(_, n) in &self.equivalents {
                env.send(n, Msg::Heartbeat { clock, last_work_us });
            }
        }
        self.replicated_since_heartbeat = false;
        env.set_timer(self.pace.interval_us(self.cfg.heartbeat_interval_us, clock), Timer::Heartbeat(epoch).token());
    }

    /// Every θ: `VV[m] = clock`; one step of the GST tree (report the subtree's
    /// entry-wise min up; at the root, GST = max(GST, min of all entries) and
    /// push it down); then a bounded round of GC.
    fn stabilization_tick(&mut self, env: &mut impl Env, epoch: u64) {
        if epoch != self.pace.epoch() {
            return; // superseded by a wake-up's timer
        }
        let now = env.now_us();
        self.vv[self.dc.idx()] = now; // as read: a clock stepped back reports its lower value
        match self.tree.step(&self.vv) {
            TreeStep::Report { parent, aggregate } => {
                env.send(parent, Msg::StableReport { vv: aggregate, last_work_us: self.pace.last_work_us() })
            }
            TreeStep::Stable(aggregate) => {
                self.raise_gst(env, vmin_entry(&aggregate).unwrap_or(0));
                self.push_gst(env);
            }
            TreeStep::Waiting => {}
        }
        self.collect_garbage(env, now);
        let after_us = self.pace.interval_us(self.cfg.stabilization_interval_us, now);
        env.set_timer(after_us, Timer::Stabilize(epoch).token());
    }

    /// Drop versions no reader can need: of each key's versions with
    /// `ut ≤ old_gst`, where `old_gst` is the GST of at least `gc_grace_us`
    /// ago (the [`VersionGc`] horizon), all but the newest. GETs never read
    /// below it (GST only grows), and ROTs only if their snapshot is older
    /// than `old_gst` — their slice then answers [`SliceRead::Pruned`].
    /// Each write collects its own key at the horizon; this pass, the keys
    /// that went quiet.
    fn collect_garbage(&mut self, env: &mut impl Env, now: TimeUs) {
        self.gc.collect(env.store(), now, &self.gst, self.cfg.gc_grace_us, gc_visible);
    }
}

/// Whether version `v` lies inside the snapshot at GST `gst`.
fn gc_visible(v: &Version, gst: &TimeUs) -> bool {
    v.ut <= *gst
}

/// How long a PUT with dependency time `dt` still has to wait at `now`.
pub(super) fn put_wait_us(dt: TimeUs, now: TimeUs) -> u64 {
    dt.saturating_sub(now) + 1
}

/// Each key's latest version with `ut ≤ snapshot`, of any origin: local
/// versions newer than the snapshot are excluded too, or a later local write
/// could appear without what it depends on. The client's own writes have
/// `ut ≤ dt ≤ snapshot`, so it reads them.
pub(super) fn read_slice(env: &mut impl Env, keys: &[Key], snapshot: TimeUs) -> Vec<SliceRead> {
    let store = env.store();
    keys.iter()
        .map(|k| match store.latest_where(k, |d| d.ut <= snapshot) {
            Some(d) => SliceRead::Found { value: causeway_core::copy_if_short(&d.value), ut: d.ut },
            None if store.was_pruned(k) => SliceRead::Pruned,
            None => SliceRead::Absent,
        })
        .collect()
}

impl Server for GentleRainServer {
    type Msg = Msg;
    type Version = Version;

    fn on_start(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        let Some(s) = self.part.as_mut() else { return };
        s.recover(env);
        s.saw_work(env, env.now_us());
        s.vv[s.dc.idx()] = env.now_us();
        env.set_timer(s.cfg.heartbeat_interval_us, Timer::Heartbeat(0).token());
        env.set_timer(s.cfg.stabilization_interval_us, Timer::Stabilize(0).token());
    }

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        let Some(s) = self.part.as_mut() else { return };
        if let Msg::GetReq { key, .. } | Msg::PutReq { key, .. } = &msg
            && s.topology.server_for_key(s.dc, key) != Some(env.node())
        {
            let reason = format!("node {} does not store this key", env.node());
            return env.reply(from, Msg::Refused { reason });
        }
        s.saw_work(env, env.now_us());
        match msg {
            Msg::GetReq { key, gst } => s.on_get(env, from, key, gst),
            Msg::PutReq { key, value, dt, gst } => s.on_put(env, from, key, value, dt, gst),
            Msg::RotReq { keys, dt, gst } => s.on_rot(env, from, keys, dt, gst),
            _ => {} // replies and peer messages never come from clients; the runtime rejects them at the edge
        }
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, msg: Msg) {
        let Some(s) = self.part.as_mut() else { return };
        if !s.topology.contains(from) {
            return;
        }
        match msg {
            Msg::Replicate { key, version } => s.on_replicate(env, from, key, version),
            Msg::Heartbeat { clock, last_work_us } => s.on_heartbeat(env, from, clock, last_work_us),
            Msg::StableReport { vv, last_work_us } => s.on_stable_report(env, from, vv, last_work_us),
            Msg::StablePush { gst, last_work_us } => s.on_stable_push(env, from, gst, last_work_us),
            Msg::SliceReq { rot, keys, snapshot } => s.on_slice_req(env, from, rot, keys, snapshot),
            Msg::SliceReply { rot, reads } => s.on_slice_reply(env, from, rot, reads),
            _ => {} // client traffic never comes from peers
        }
    }

    fn on_timer(&mut self, env: &mut impl ServerEnv<Msg, Version>, token: u64) {
        let Some(s) = self.part.as_mut() else { return };
        match Timer::from_token(token) {
            Timer::Heartbeat(epoch) => s.heartbeat_tick(env, epoch),
            Timer::Stabilize(epoch) => s.stabilization_tick(env, epoch),
            Timer::PutWait(id) => s.recheck_parked_put(env, id),
        }
    }
}
