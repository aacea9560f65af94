use super::config::*;
use super::msg::*;
use crate::kit::node::{equivalents_elsewhere, served_partition};
use crate::stabilization::partition::{
    self, TIMER_HEARTBEAT, TIMER_STABILIZE, Ticker, alone_raise, in_snapshot, raise_entries, remote_covered,
    remote_entries, timer_kind,
};
use crate::stabilization::stable_tree::{StableTree, TreeStep};
use crate::stabilization::version_gc::VersionGc;
use crate::stabilization::visibility::PendingVisible;
use causeway_core::{
    ClientId, DcId, Hlc, Key, KeyIndex, Landed, NodeCtx, NodeId, Observation, OpError, PartitionId, Server, ServerEnv,
    SnapshotFloor, Topology, Value, Versioned, vmax,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

crate::kit::node::server_env!();

pub use crate::stabilization::version_gc::GC_KEYS_PER_TICK;

/// A Contrarian node. Only partition servers take part; any other node of
/// a shared topology (a service node) ignores every input.
pub struct ContrarianServer {
    pub(super) part: Option<Partition>,
}

impl ContrarianServer {
    pub(super) fn new(cfg: &Config, ctx: NodeCtx) -> Self {
        ContrarianServer { part: served_partition(&ctx).map(|(dc, p)| Partition::new(cfg, &ctx, dc, p)) }
    }
}

/// Partition server p of DC m (§4).
pub(super) struct Partition {
    cfg: Config,
    topology: Arc<Topology>,
    me: NodeId,
    /// m, this server's DC.
    m: DcId,
    partition: PartitionId,
    /// This partition's replicas in the other DCs.
    peers: Vec<NodeId>,
    /// The partition servers of this DC: the only nodes whose snapshots
    /// (and the only partitions a client may name as a ROT's others).
    dc_servers: BTreeSet<NodeId>,
    /// The hybrid logical clock (a Lamport clock with `logical_clocks`):
    /// "the maximum between the local physical clock and the highest
    /// timestamp seen by the node plus one" (§4).
    pub(super) hlc: Hlc,
    /// VV: `vv[i]`, i ≠ m, the latest timestamp received from the replica in
    /// DC i (versions and heartbeats); `vv[m]` this partition's clock.
    pub(super) vv: Vec<Hlc>,
    /// GSS: entry-wise min of the DC's version vectors (§4), raised only.
    /// Entry i ≠ m: every version DC i wrote up to it has reached every
    /// partition of this DC.
    pub(super) gss: Vec<Hlc>,
    /// Started over a journaled store (a restart): the heartbeat-fed VV
    /// entries were lost, so the DC's GSS may run ahead of this VV.
    restarted: bool,
    /// The clock floor last journaled (deviation 9).
    journaled_floor: Hlc,
    pub(super) tree: StableTree<Hlc>,
    /// Each tree child's latest report of its subtree's largest clock.
    child_clock_max: BTreeMap<NodeId, Hlc>,
    /// Δ and θ, slowed down while the cluster is idle, and whether a
    /// Replicate went out since the last heartbeat tick.
    ticker: Ticker,
    /// 1½-round reads that have one of their two halves (the client's keys
    /// or the coordinator's snapshot), by the session's cluster-wide name
    /// and the ROT id.
    pub(super) halves: BTreeMap<(u64, u64), Half>,
    /// Remote versions stored but not yet covered by the GSS, each parked on
    /// the entry that holds it back.
    pending: PendingVisible<Hlc, (Hlc, DcId)>,
    /// The largest clock reading seen, for timeouts that must not run
    /// backwards with the clock.
    clock_us: u64,
    gc: VersionGc<Vec<Hlc>>,
}

/// One half of a 1½-round read, and when (`clock_us`) it arrived. The keys
/// half remembers which of this server's connections asked, for the reply.
pub(super) enum Half {
    Keys { client: ClientId, keys: Vec<Key>, at_us: u64 },
    Snapshot { tv: Vec<Hlc>, at_us: u64 },
}

impl Half {
    fn at_us(&self) -> u64 {
        match self {
            Half::Keys { at_us, .. } | Half::Snapshot { at_us, .. } => *at_us,
        }
    }
}

impl Partition {
    fn new(cfg: &Config, ctx: &NodeCtx, m: DcId, partition: PartitionId) -> Self {
        let topology = ctx.topology.clone();
        let dcs = topology.dcs();
        Partition {
            cfg: cfg.clone(),
            me: ctx.id,
            m,
            partition,
            peers: equivalents_elsewhere(&topology, partition, m),
            dc_servers: topology.dc_servers(m).collect(),
            hlc: Hlc::ZERO,
            vv: vec![Hlc::ZERO; dcs],
            gss: vec![Hlc::ZERO; dcs],
            restarted: false,
            journaled_floor: Hlc::ZERO,
            tree: StableTree::new(&topology, ctx.id, cfg.tree_fanout),
            child_clock_max: BTreeMap::new(),
            ticker: Ticker::new(&cfg.pace),
            halves: BTreeMap::new(),
            pending: PendingVisible::new(dcs),
            clock_us: 0,
            gc: VersionGc::new(cfg.gc_quiet_us),
            topology,
        }
    }
}

impl Server for ContrarianServer {
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
            Msg::RotCoord { session, rot, keys, others, last } => {
                p.on_rot_coord(env, from, session, rot, keys, others, last)
            }
            Msg::RotRead { session, rot, keys } => p.on_rot_read(env, from, session, rot, keys),
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
            Msg::Snapshot { session, rot, tv } => p.on_snapshot(env, from, session, rot, tv),
            Msg::Replicate { key, version } => p.on_replicate(env, from, key, *version),
            Msg::Heartbeat { hlc, last_work_us } => p.on_heartbeat(env, from, hlc, last_work_us),
            Msg::StableReport { vv_min, clock_max, last_work_us } => {
                p.on_stable_report(env, from, vv_min, clock_max, last_work_us)
            }
            Msg::StablePush { gss, clock_max, last_work_us } => {
                p.on_stable_push(env, from, gss, clock_max, last_work_us)
            }
            _ => {} // client traffic never comes from peers
        }
    }

    fn on_timer(&mut self, env: &mut impl ServerEnv<Msg, Version>, token: u64) {
        let Some(p) = self.part.as_mut() else { return };
        if p.ticker.is_stale(token) {
            return; // superseded by a wake-up's timer
        }
        match timer_kind(token) {
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

    /// PUT(x, X) (§4): never waits. The clock moves past everything the
    /// client has seen (the local entry of its last snapshot, and the
    /// remote entries, which become X's DV), so X.DV[m] exceeds every other
    /// entry and every snapshot this partition has already served.
    fn on_put(&mut self, env: &mut impl Env, from: ClientId, key: Key, value: Value, last: Vec<Hlc>) {
        if let Err(e) = self.check_key(&key).and_then(|()| self.check_last(&last)) {
            env.reply(from, Msg::PutReply(Err(e)));
            return;
        }
        let m = self.m.idx();
        // The client's remote entries are GSS values of this DC (clients
        // are sticky), checked against VV above: genuine stability.
        self.raise_gss(env, remote_entries(&last, m));
        let dep = last.iter().copied().max().unwrap_or(Hlc::ZERO);
        let ts = self.clock(env, |h, pt| h.update(pt, dep));
        // Invariant (Didona et al. §4): "X.DV[source] ... is enforced to be
        // higher than any other entry in DV upon creation of X".
        assert!(ts > dep, "Contrarian: a PUT stamped {ts:?} does not exceed the client's snapshot entry {dep:?}");
        let mut dv = last;
        dv[m] = ts;
        let version = Version { value, ts, sr: self.m, dv };
        // The store's copy shares no reference count with the messages'
        // ([`causeway_core::copy_if_short`]).
        let stored = Version { value: causeway_core::copy_if_short(&version.value), dv: version.dv.clone(), ..version };
        self.apply(env, &key, stored);
        env.observe(Observation::Visible { key: &key, value: &version.value, origin: self.m, written_us: ts.l });
        env.reply(from, Msg::PutReply(Ok(PutOk { ts, gss: self.gss.clone() })));
        // Sent as created: each FIFO channel carries this partition's
        // versions in timestamp order, so a replica may set VV[m] = ts.
        for &peer in &self.peers {
            env.send(peer, Msg::Replicate { key: key.clone(), version: Box::new(version.clone()) });
        }
        self.ticker.replicated(self.peers.len());
    }

    // ------------------------------------------------------------ ROT

    /// The coordinator's snapshot TV (§4): local entry max(clock at the
    /// coordinator, highest local timestamp the client has seen); remote
    /// entries max(GSS at the coordinator, highest GSS the client has seen).
    /// The clock is then pushed to TV[m] — never waited for.
    fn snapshot(&mut self, env: &mut impl Env, last: &[Hlc]) -> Vec<Hlc> {
        let now = self.clock(env, |h, pt| h.tick(pt));
        let mut tv = self.gss.clone();
        tv[self.m.idx()] = now;
        if !self.cfg.mutant_no_piggyback {
            self.raise_gss(env, remote_entries(last, self.m.idx()));
            vmax(&mut tv, last);
        }
        self.push_clock(env, tv[self.m.idx()]);
        tv
    }

    /// ⟨RotCoord⟩: this partition coordinates. It fixes TV, sends it to the
    /// other partitions of the ROT (1½ rounds), and reads its own keys.
    #[allow(clippy::too_many_arguments)]
    fn on_rot_coord(
        &mut self,
        env: &mut impl Env,
        client: ClientId,
        session: u64,
        rot: u64,
        keys: Vec<Key>,
        others: Vec<NodeId>,
        last: Vec<Hlc>,
    ) {
        let checked =
            self.check_keys(&keys).and_then(|()| self.check_others(&others)).and_then(|()| self.check_last(&last));
        if let Err(e) = checked {
            env.reply(client, Msg::RotSlice { rot, slice: Err(e) });
            return;
        }
        let tv = self.snapshot(env, &last);
        for &o in &others {
            env.send(o, Msg::Snapshot { session, rot, tv: tv.clone() });
        }
        let slice = self.read_at(env, &keys, tv);
        env.reply(client, Msg::RotSlice { rot, slice });
    }

    /// ⟨RotRead⟩ from the client (1½ rounds): read once the coordinator's
    /// snapshot is here too. Nothing waits on clocks or replication: only
    /// on the other half of the same request, already on its way.
    fn on_rot_read(&mut self, env: &mut impl Env, client: ClientId, session: u64, rot: u64, keys: Vec<Key>) {
        if let Err(e) = self.check_keys(&keys) {
            env.reply(client, Msg::RotSlice { rot, slice: Err(e) });
            return;
        }
        match self.halves.remove(&(session, rot)) {
            Some(Half::Snapshot { tv, .. }) => self.serve(env, client, rot, &keys, tv),
            Some(keys_half @ Half::Keys { .. }) => {
                self.halves.insert((session, rot), keys_half);
                let e = OpError::BadRequest(format!("ROT {rot} already sent its keys to this partition"));
                env.reply(client, Msg::RotSlice { rot, slice: Err(e) });
            }
            None => {
                self.halves.insert((session, rot), Half::Keys { client, keys, at_us: self.clock_us });
            }
        }
    }

    /// ⟨Snapshot⟩ from the coordinator (1½ rounds).
    fn on_snapshot(&mut self, env: &mut impl Env, from: NodeId, session: u64, rot: u64, tv: Vec<Hlc>) {
        if !self.dc_servers.contains(&from) || from == self.me {
            return; // only a partition of this DC coordinates a ROT here
        }
        match self.halves.remove(&(session, rot)) {
            Some(Half::Keys { client, keys, .. }) => self.serve(env, client, rot, &keys, tv),
            Some(snapshot) => {
                self.halves.insert((session, rot), snapshot); // a duplicate: the first stands
            }
            None => {
                self.halves.insert((session, rot), Half::Snapshot { tv, at_us: self.clock_us });
            }
        }
    }

    /// Both halves are here: read at the coordinator's snapshot.
    fn serve(&mut self, env: &mut impl Env, client: ClientId, rot: u64, keys: &[Key], tv: Vec<Hlc>) {
        let slice = self.check_tv(&tv).and_then(|()| self.read_at(env, keys, tv));
        env.reply(client, Msg::RotSlice { rot, slice });
    }

    /// ⟨SnapshotReq⟩ (2 rounds): the coordinator hands TV to the client.
    fn on_snapshot_req(&mut self, env: &mut impl Env, client: ClientId, rot: u64, last: Vec<Hlc>) {
        let tv = self.check_last(&last).map(|()| self.snapshot(env, &last));
        env.reply(client, Msg::SnapshotReply { rot, tv });
    }

    /// ⟨RotReadAt⟩ (2 rounds): the client brings the coordinator's TV.
    fn on_rot_read_at(&mut self, env: &mut impl Env, client: ClientId, rot: u64, keys: Vec<Key>, tv: Vec<Hlc>) {
        let slice =
            self.check_keys(&keys).and_then(|()| self.check_tv(&tv)).and_then(|()| self.read_at(env, &keys, tv));
        env.reply(client, Msg::RotSlice { rot, slice });
    }

    /// At a partition: push the clock to TV[m] (so every later local
    /// version has a higher timestamp and stays out of this snapshot),
    /// then return, per key, the freshest version with DV ≤ TV (§4).
    fn read_at(&mut self, env: &mut impl Env, keys: &[Key], tv: Vec<Hlc>) -> Result<Slice, OpError> {
        let m = self.m;
        // Invariant: the snapshot never claims more of a remote DC than this
        // partition has received from it, so every version DV ≤ TV admits
        // is here (TV's remote entries are GSS values, and GSS ≤ every VV
        // of the DC). Requests whose TV fails this were refused above.
        assert!(
            self.restarted || remote_covered(&tv, &self.vv, m.idx()),
            "Contrarian: snapshot {tv:?} is ahead of what partition {:?} received ({:?})",
            self.partition,
            self.vv
        );
        self.push_clock(env, tv[m.idx()]);
        let skip = self.cfg.mutant_skip_visibility_check;
        let store = env.store();
        let mut values = Vec::with_capacity(keys.len());
        for key in keys {
            match store.latest_where(key, |v| in_snapshot(v, &tv, m, skip)) {
                Some(v) => values.push(Some(causeway_core::copy_if_short(&v.value))),
                // GC dropped what this snapshot would have read: fail rather
                // than pretend the key had no version.
                None if store.was_pruned(key) => return Err(OpError::Aborted("snapshot pruned".into())),
                None => values.push(None),
            }
        }
        Ok(Slice { values, tv })
    }

    // ------------------------------------------------------------ replication

    /// ⟨Replicate⟩ from the replica in DC k: store X (readable once a
    /// snapshot covers X.DV), VV[k] = X.ts.
    fn on_replicate(&mut self, env: &mut impl Env, from: NodeId, key: Key, version: Version) {
        let k = self.topology.dc_of(from);
        let well_formed = self.peers.contains(&from)
            && version.sr == k
            && valid_version(&version, self.vv.len())
            && self.check_key(&key).is_ok();
        if !well_formed {
            return; // a malformed peer message is dropped
        }
        self.saw_work(env, env.now_us());
        let order = version.order();
        if order.0 > self.vv[k.idx()] {
            self.vv[k.idx()] = order.0;
        }
        self.stable_if_alone(env, k.idx());
        let visible_now =
            partition::land_remote(env, &mut self.gc, &mut self.pending, &self.gss, &key, version, gc_visible(self.m));
        if let Some((index, order)) = visible_now {
            self.report_if_read(env, index, order);
        }
    }

    /// ⟨Heartbeat⟩ from the replica in DC k: VV[k] = max(VV[k], its clock).
    fn on_heartbeat(&mut self, env: &mut impl Env, from: NodeId, hlc: Hlc, work_us: u64) {
        if self.peers.contains(&from) && sane(hlc) {
            let k = self.topology.dc_of(from).idx();
            if hlc > self.vv[k] {
                self.vv[k] = hlc;
            }
            self.stable_if_alone(env, k);
            self.saw_work(env, work_us);
        }
    }

    /// In a DC of one partition, raise GSS[k] with VV[k]
    /// ([`partition::alone_raise`]).
    fn stable_if_alone(&mut self, env: &mut impl Env, k: usize) {
        if let Some(vv) = alone_raise(&self.tree, &self.vv, &self.gss, k) {
            self.raise_gss(env, [(k, vv)]);
        }
    }

    /// Report a remote version visible (§4: "if X.DV is entry-wise smaller
    /// than or equal to the GSS") if it is what a local read returns now.
    fn report_if_read(&self, env: &mut impl Env, index: KeyIndex, order: (Hlc, DcId)) {
        // Invariant (asserted there): a remote version is visible only once
        // its DV ≤ GSS.
        let m = self.m;
        let mut now = self.gss.clone();
        now[m.idx()] = self.hlc;
        let visible = |v: &Version| in_snapshot(v, &now, m, false);
        partition::report_if_read(env, index, order, order.1, order.0.l, &self.gss, "Contrarian (GSS)", visible);
    }

    // ------------------------------------------------------------ GSS tree

    /// A child's entry-wise min of its subtree's VVs and its largest clock.
    fn on_stable_report(&mut self, env: &mut impl Env, from: NodeId, vv_min: Vec<Hlc>, clock_max: Hlc, work_us: u64) {
        if valid_vector(&vv_min, self.vv.len()) && sane(clock_max) && self.tree.on_report(from, vv_min) {
            self.child_clock_max.insert(from, clock_max);
            self.saw_work(env, work_us);
        }
    }

    /// The DC's GSS and largest clock from the parent: raise both; pass down.
    fn on_stable_push(&mut self, env: &mut impl Env, from: NodeId, gss: Vec<Hlc>, clock_max: Hlc, work_us: u64) {
        if !self.dc_servers.contains(&from) || !valid_vector(&gss, self.vv.len()) || !sane(clock_max) {
            return;
        }
        self.saw_work(env, work_us);
        self.raise_gss(env, gss.iter().copied().enumerate());
        self.push_clock(env, clock_max);
        self.push_down(env, &gss, clock_max);
    }

    fn push_down(&self, env: &mut impl Env, gss: &[Hlc], clock_max: Hlc) {
        for &child in self.tree.children() {
            let last_work_us = self.ticker.last_work_us();
            env.send(child, Msg::StablePush { gss: gss.to_vec(), clock_max, last_work_us });
        }
    }

    /// Raise GSS entries (only ever raised: the GSS is monotonic); if any
    /// grew, report it and admit the remote versions it now covers.
    fn raise_gss(&mut self, env: &mut impl Env, entries: impl IntoIterator<Item = (usize, Hlc)>) {
        if !raise_entries(&mut self.gss, entries) {
            return;
        }
        // Invariant: the GSS never claims more of a remote DC than this
        // partition has received (each entry is a min of the DC's VV
        // entries, which only grow). A node restarted from its journal lost
        // its heartbeat-fed VV entries, so it is exempt.
        assert!(
            self.restarted || remote_covered(&self.gss, &self.vv, self.m.idx()),
            "Contrarian: GSS {:?} exceeds what partition {:?} received ({:?})",
            self.gss,
            self.partition,
            self.vv
        );
        if let Some(least) = self.gss.iter().map(|t| t.l).min() {
            env.observe(Observation::Stable { stable_us: least });
        }
        for (index, order) in partition::newly_visible(env, &mut self.pending, &self.gss) {
            self.report_if_read(env, index, order);
        }
    }

    // ------------------------------------------------------------ clock

    /// The physical clock as the HLC reads it: never with `logical_clocks`.
    fn physical_us(&self, env: &impl ServerEnv<Msg, Version>) -> u64 {
        if self.cfg.logical_clocks { 0 } else { env.now_us() }
    }

    /// Advance the clock with `f` (an [`Hlc`] rule, given the physical
    /// reading); returns what `f` returns.
    fn clock(&mut self, env: &mut impl Env, f: impl FnOnce(&mut Hlc, u64) -> Hlc) -> Hlc {
        let pt = self.physical_us(env);
        let before = self.hlc;
        let t = f(&mut self.hlc, pt);
        // Invariant (Kulkarni et al. §3): the HLC never goes backwards,
        // whatever the physical clock does.
        assert!(self.hlc >= before, "Contrarian: the HLC went back from {before:?} to {:?}", self.hlc);
        self.clock_moved(env);
        t
    }

    /// Push the clock forward to `t` (§4: "partitions can push their local
    /// clock to TV[m]"): the nonblocking replacement for waiting.
    fn push_clock(&mut self, env: &mut impl Env, t: Hlc) {
        if t > self.hlc {
            self.hlc = t;
            self.clock_moved(env);
        }
    }

    /// VV[m] follows the clock; the journaled floor stays above it
    /// (deviation 9).
    fn clock_moved(&mut self, env: &mut impl Env) {
        let m = self.m.idx();
        self.vv[m] = self.vv[m].max(self.hlc);
        if self.hlc >= self.journaled_floor {
            let floor = Hlc::new(self.hlc.l.saturating_add(self.cfg.clock_lease_us.max(1)), 0);
            self.journaled_floor = floor;
            env.store().set_meta(self.meta());
        }
    }

    /// The journaled metadata: the clock floor (deviation 9), then the GC
    /// horizon once there is one (deviation 10), each HLC as 8 + 4 bytes.
    fn meta(&self) -> Vec<u8> {
        let hlcs = std::iter::once(&self.journaled_floor).chain(self.gc.journaled().into_iter().flatten());
        hlcs.flat_map(|t| t.l.to_le_bytes().into_iter().chain(t.c.to_le_bytes())).collect()
    }

    /// [`Partition::meta`] read back: the floor, and the horizon if one was
    /// journaled (an older journal has only the floor).
    fn decode_meta(bytes: &[u8], dcs: usize) -> Option<(Hlc, Option<Vec<Hlc>>)> {
        let hlc = |b: &[u8]| {
            Some(Hlc::new(
                u64::from_le_bytes(b.get(..8)?.try_into().ok()?),
                u32::from_le_bytes(b.get(8..12)?.try_into().ok()?),
            ))
        };
        let floor = hlc(bytes)?;
        let rest = &bytes[12..];
        let horizon =
            (rest.len() == 12 * dcs && dcs > 0).then(|| rest.chunks(12).map(hlc).collect::<Option<Vec<_>>>()).flatten();
        Some((floor, horizon))
    }

    /// After a restart (deviation 9): the clock resumes above the journaled
    /// floor and above every stored version, so no timestamp or snapshot
    /// handed out before the crash is ever handed out again below; VV's
    /// remote entries resume from the versions received.
    fn recover(&mut self, env: &mut impl Env) {
        let meta = env.store().meta().and_then(|m| Self::decode_meta(m, self.gss.len()));
        let (floor, horizon) = match meta {
            Some((floor, horizon)) => (Some(floor), horizon),
            None => (None, None),
        };
        let mut gss = vec![Hlc::ZERO; self.gss.len()];
        let mut hlc = floor.unwrap_or(Hlc::ZERO);
        let m = self.m.idx();
        let vv = &mut self.vv;
        let keys = partition::for_each_stored(env, |v| {
            hlc = hlc.max(v.ts);
            if let Some(e) = vv.get_mut(v.sr.idx()) {
                *e = (*e).max(v.ts);
            }
            // A local version's remote entries were GSS values of this DC
            // when it was written, so this partition had received
            // everything they cover, journaled before the version itself:
            // VV may resume there. Without this, VV entries fed only by
            // heartbeats come back as zero, and until the next heartbeat a
            // fresh session's snapshot misses this partition's own
            // acknowledged writes.
            if v.sr.idx() == m {
                for (e, &d) in vv.iter_mut().zip(&v.dv) {
                    *e = (*e).max(d);
                }
                // And as GSS values of this DC they are still true of every
                // partition of it: the GSS resumes there too, so a fresh
                // session's first snapshot already holds every write stored
                // here (its TV[m] is the clock, above them).
                for (e, &d) in gss.iter_mut().zip(&v.dv) {
                    *e = (*e).max(d);
                }
            }
        });
        self.restarted = floor.is_some() || keys > 0;
        gss[m] = Hlc::ZERO;
        self.journaled_floor = floor.unwrap_or(Hlc::ZERO);
        // Deviation 10: the GSS resumes at the journaled GC horizon. The
        // store may have been collected (or checkpointed without what GC
        // would drop) at that horizon, so a snapshot below it could find a
        // key's versions gone and read the key as absent. The horizon was
        // a GSS of this DC, so it is still true: nothing it covers left.
        if let Some(h) = horizon {
            vmax(&mut gss, &h);
            self.gc.resume_journaled(h);
        }
        self.raise_gss(env, gss.into_iter().enumerate());
        self.push_clock(env, hlc);
        self.clock(env, |h, pt| h.tick(pt));
    }

    // ------------------------------------------------------------ timers

    /// Work seen, for the idle pacing ([`Ticker::saw_work`]).
    fn saw_work(&mut self, env: &mut impl Env, at_us: u64) {
        self.clock_us = self.clock_us.max(env.now_us());
        self.ticker.saw_work(env, at_us);
    }

    /// Every Δ: if nothing was replicated since the last tick, send the
    /// clock to the replicas (§4's heartbeat).
    fn heartbeat(&mut self, env: &mut impl Env) {
        if self.ticker.heartbeat_due() {
            let hlc = self.clock(env, |h, pt| h.tick(pt));
            let last_work_us = self.ticker.last_work_us();
            for &peer in &self.peers {
                env.send(peer, Msg::Heartbeat { hlc, last_work_us });
            }
        }
        self.ticker.rearm_heartbeat(env, self.cfg.heartbeat_interval_us);
    }

    /// Every θ: one step of the GSS tree (§4: "the partitions in a DC
    /// exchange their VVs and compute the entry-wise aggregate minimum"),
    /// then orphan expiry and a bounded GC step.
    fn stabilize(&mut self, env: &mut impl Env) {
        self.clock_us = self.clock_us.max(env.now_us());
        self.clock(env, |h, pt| h.tick(pt));
        let clock_max = self.child_clock_max.values().copied().fold(self.hlc, Hlc::max);
        match self.tree.step(&self.vv) {
            TreeStep::Report { parent, aggregate } => {
                let last_work_us = self.ticker.last_work_us();
                env.send(parent, Msg::StableReport { vv_min: aggregate, clock_max, last_work_us });
            }
            TreeStep::Stable(gss) => {
                self.raise_gss(env, gss.iter().copied().enumerate());
                self.push_clock(env, clock_max);
                self.push_down(env, &gss, clock_max);
            }
            TreeStep::Waiting => {}
        }
        self.expire_orphans();
        self.collect_garbage(env);
        self.ticker.rearm_stabilize(env, self.cfg.stabilization_interval_us);
    }

    /// Drop 1½-round halves whose other half never came (a crashed
    /// coordinator, a refused request): their clients have given up.
    fn expire_orphans(&mut self) {
        let (now_us, timeout_us) = (self.clock_us, self.cfg.orphan_read_timeout_us);
        self.halves.retain(|_, h| h.at_us().saturating_add(timeout_us) > now_us);
    }

    /// Record the GSS; then, on a bounded number of dirty keys
    /// ([`VersionGc::collect`]), drop the
    /// versions older than the newest one inside the horizon, the snapshot
    /// made of a GSS at least `gc_grace_us` old. Every later snapshot is at
    /// or above the horizon (TV's remote entries are a GSS of this DC or
    /// newer, its local entry a clock, which is above every GSS[m]), so it
    /// reads that version or a newer one; a slice that finds nothing left
    /// fails with "snapshot pruned" rather than returning an older state.
    fn collect_garbage(&mut self, env: &mut impl Env) {
        let (now_us, grace_us) = (self.clock_us, self.cfg.gc_grace_us);
        // Deviation 10: a new horizon is journaled in the turn it is reached.
        let gc = &mut self.gc;
        if partition::collect_garbage(gc, env.store(), now_us, &self.gss, grace_us, gc_visible(self.m)).is_some() {
            env.store().set_meta_unsynced(self.meta());
        }
    }

    // ------------------------------------------------------------ shared steps

    /// Insert into the store and note the key for GC.
    fn apply(&mut self, env: &mut impl Env, key: &[u8], version: Version) -> Landed {
        self.gc.apply(env.store(), key, version, gc_visible(self.m))
    }

    fn check_key(&self, key: &[u8]) -> Result<(), OpError> {
        partition::check_key(&self.topology, self.partition, self.m, key)
    }

    fn check_keys(&self, keys: &[Key]) -> Result<(), OpError> {
        partition::check_keys(&self.topology, self.partition, self.m, keys)
    }

    /// The other partitions of a 1½-round ROT: distinct partition servers
    /// of this DC, not this one.
    fn check_others(&self, others: &[NodeId]) -> Result<(), OpError> {
        let distinct = others.windows(2).all(|w| w[0] < w[1]);
        if distinct && others.iter().all(|o| *o != self.me && self.dc_servers.contains(o)) {
            Ok(())
        } else {
            Err(OpError::BadRequest("a ROT's other partitions must be distinct servers of this DC, sorted".into()))
        }
    }

    /// A client's last snapshot: well formed, and its remote entries
    /// genuine GSS values of this DC (so at most this partition's VV).
    fn check_last(&self, last: &[Hlc]) -> Result<(), OpError> {
        self.check_tv(last)
    }

    /// A snapshot from outside: one sane entry per DC, remote entries
    /// within what this partition has received (a genuine GSS of this DC
    /// always is; a restarted node cannot tell, and accepts it).
    fn check_tv(&self, tv: &[Hlc]) -> Result<(), OpError> {
        if !valid_vector(tv, self.vv.len()) {
            return Err(OpError::BadRequest(format!(
                "a snapshot needs {} entries with HLC counters below 2^31",
                self.vv.len()
            )));
        }
        if !self.restarted && !remote_covered(tv, &self.vv, self.m.idx()) {
            return Err(OpError::BadRequest("a snapshot is ahead of what this DC has received".into()));
        }
        Ok(())
    }
}

/// Whether a version lies inside a GC horizon (a snapshot made of an old
/// stable vector), for [`VersionGc`].
fn gc_visible(m: DcId) -> impl Fn(&Version, &Vec<Hlc>) -> bool {
    move |v, horizon| in_snapshot(v, horizon, m, false)
}
