use super::config::*;
use super::grouping::Groups;
use super::msg::*;
use crate::kit::node::{equivalents_elsewhere, served_partition};
use crate::stabilization::visibility::{self, PendingVisible};
use causeway_core::{
    ClientId, Hlc, Inserted, Key, KeyIndex, NodeCtx, NodeId, Observation, OpError, PartitionId, Server, ServerEnv,
    Topology,
};
use std::collections::BTreeMap;
use std::sync::Arc;

crate::kit::node::server_env!();

/// Timer tokens: the two periodic ticks, then one per parked GET's deadline.
const TIMER_HEARTBEAT: u64 = 0;
const TIMER_SVV: u64 = 1;
const TIMER_PARKED_BASE: u64 = 2;

/// Server i of Alg 7.2.
pub struct AccfServer {
    cfg: Config,
    topology: Arc<Topology>,
    /// i.
    me: NodeId,
    /// The partition this server stores; `None` on a node that is not a
    /// partition server (a service node of a shared topology stays inert).
    partition: Option<PartitionId>,
    groups: Groups,
    /// T(i).
    pub(super) tg: u16,
    /// The other servers of H(k) for every key k stored here (the copies of
    /// this partition in other DCs): where writes are replicated, and the
    /// only servers whose timestamps VV_i needs.
    peers: Vec<NodeId>,
    /// T(j) of each peer.
    peer_group: Vec<u16>,
    /// The latest timestamp received from each peer (a Replicate's `ut` or
    /// a Heartbeat's HLC).
    latest_from: Vec<Hlc>,
    /// VV_i: `vv[t]` is the min of `latest_from` over the peers in tracking
    /// group t, and +∞ ([`Hlc::MAX`]) for a group with none (§7.2.2: no key
    /// shared with any of its servers).
    pub(super) vv: Vec<Hlc>,
    /// HLC_i.
    pub(super) hlc: Hlc,
    /// A journaled bound above every HLC_i a heartbeat has carried
    /// (`l` in µs): a restart resumes HLC_i there, so no version stamped
    /// after a crash falls at or below a heartbeat sent before it.
    lease_us: u64,
    /// SVV^cg_i for each checking group of a member count above one, as
    /// last pushed by the group's first member. A group of this server
    /// alone has SVV = VV_i.
    svv: BTreeMap<u16, Vec<Hlc>>,
    /// The latest VV reported by each member of the groups this server
    /// leads (is the first member of), entry-wise max.
    reports: BTreeMap<NodeId, Vec<Hlc>>,
    /// GETs waiting at line 3, oldest first.
    parked: Vec<Parked>,
    next_parked: u64,
    /// Whether a Replicate went out since the last heartbeat tick.
    replicated_since_tick: bool,
    /// The home group's stable time last reported ([`Self::report_stable`]).
    stable_us: u64,
    /// Remote versions stored but not yet readable in this server's first
    /// checking group, for [`Observation::Visible`].
    pending: PendingVisible<Hlc, (Hlc, NodeId)>,
}

/// A GET waiting at line 3 for VV_i to cover its dependency set.
struct Parked {
    id: u64,
    client: ClientId,
    req: GetReq,
    since_us: u64,
}

impl AccfServer {
    pub(super) fn new(cfg: &Config, ctx: NodeCtx) -> Self {
        let groups = cfg.resolve(&ctx.topology).expect("a validated config (Protocol::validate)");
        let served = served_partition(&ctx);
        let peers = served.map_or_else(Vec::new, |(dc, p)| equivalents_elsewhere(&ctx.topology, p, dc));
        let peer_group = peers.iter().map(|&j| groups.tracking_of(j).expect("a peer is a server")).collect();
        let tracking = groups.tracking_count();
        let mut s = AccfServer {
            cfg: cfg.clone(),
            me: ctx.id,
            partition: served.map(|(_, p)| p),
            tg: groups.tracking_of(ctx.id).unwrap_or(0),
            latest_from: vec![Hlc::ZERO; peers.len()],
            peers,
            peer_group,
            vv: vec![Hlc::MAX; tracking],
            hlc: Hlc::ZERO,
            lease_us: 0,
            svv: BTreeMap::new(),
            reports: BTreeMap::new(),
            parked: Vec::new(),
            next_parked: 0,
            replicated_since_tick: false,
            stable_us: 0,
            pending: PendingVisible::new(tracking),
            topology: ctx.topology,
            groups,
        };
        for cg in s.groups.checking_of(s.me).to_vec() {
            if s.groups.members(cg).len() > 1 {
                s.svv.insert(cg, vec![Hlc::ZERO; tracking]);
            }
        }
        s.recompute_vv();
        s
    }

    /// VV_i from `latest_from`: per tracking group, the min over its peers.
    fn recompute_vv(&mut self) {
        self.vv.iter_mut().for_each(|e| *e = Hlc::MAX);
        for (&g, &t) in self.peer_group.iter().zip(&self.latest_from) {
            let e = &mut self.vv[g as usize];
            *e = (*e).min(t);
        }
    }

    /// SVV^cg_i, for a checking group this server is in.
    fn svv_of(&self, cg: u16) -> &[Hlc] {
        self.svv.get(&cg).map_or(&self.vv[..], |v| &v[..])
    }

    /// The groups this server leads (is the first member of), with more
    /// than one member: it computes their SVV.
    fn led(&self) -> Vec<u16> {
        let me = self.me;
        self.svv.keys().copied().filter(|&cg| self.groups.members(cg).first() == Some(&me)).collect()
    }
}

impl Server for AccfServer {
    type Msg = Msg;
    type Version = Version;

    /// After a restart, HLC_i is moved past every stored timestamp (its own
    /// writes are among them) and the journaled lease (every heartbeat it
    /// sent), and `latest_from[j]` resumes at the newest stored version
    /// from peer j: the store holds everything a FIFO link delivered before
    /// it. Heartbeats received and SVVs were not journaled: reads wait
    /// (line 3) or fall back to line 6 until new ones arrive.
    fn on_start(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        if self.partition.is_none() {
            return;
        }
        if let Some(lease) = env.store().meta().and_then(|m| m.try_into().ok()).map(u64::from_le_bytes) {
            self.lease_us = lease;
            self.hlc = self.hlc.max(Hlc::new(lease, 0));
        }
        for k in env.store().keys_sorted() {
            for v in env.store().versions(&k) {
                self.hlc = self.hlc.max(v.ut);
                if let Some(j) = self.peers.iter().position(|&p| p == v.origin) {
                    self.latest_from[j] = self.latest_from[j].max(v.ut);
                }
            }
        }
        self.recompute_vv();
        env.set_timer(self.cfg.heartbeat_interval_us, TIMER_HEARTBEAT);
        env.set_timer(self.cfg.svv_interval_us, TIMER_SVV);
    }

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        match msg {
            Msg::GetReq(get) => self.on_get(env, from, *get),
            Msg::PutReq(put) => self.on_put(env, from, *put),
            _ => {} // replies and peer messages never come from clients; the runtime rejects them at the edge
        }
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, msg: Msg) {
        if self.partition.is_none() || !self.topology.contains(from) {
            return;
        }
        match msg {
            Msg::Replicate { key, version } => self.on_replicate(env, from, key, *version),
            Msg::Heartbeat { hlc } => self.on_heartbeat(env, from, hlc),
            Msg::VvReport { vv } => self.on_vv_report(from, vv),
            Msg::SvvPush { svvs } => self.on_svv_push(env, from, svvs),
            _ => {}
        }
    }

    fn on_timer(&mut self, env: &mut impl ServerEnv<Msg, Version>, token: u64) {
        match token {
            TIMER_HEARTBEAT => self.heartbeat(env),
            TIMER_SVV => self.share_vv(env),
            id => self.give_up(env, id - TIMER_PARKED_BASE),
        }
    }
}

impl AccfServer {
    /// Alg 7.2 lines 1–7.
    fn on_get(&mut self, env: &mut impl Env, from: ClientId, req: GetReq) {
        if let Err(e) = self.check_key(&req.key).and_then(|()| self.check_get(&req)) {
            return env.reply(from, Msg::GetReply(Err(e)));
        }
        // Deviation 3: HLC_i moves past DSc, so this server's heartbeats,
        // and its peers' answers to them, soon pass what the client needs.
        if let Some(dt) = req.ds.max_value() {
            self.hlc.update(env.now_us(), dt);
        }
        // Line 3: wait while some ⟨t, h⟩ ∈ ds has h > VV_i[t]: a version the
        // client depends on, of a key stored here, may not have arrived.
        if !self.cfg.mutant_skip_dependency_checks && req.ds.first_above(&self.vv).is_some() {
            let id = self.next_parked;
            self.next_parked += 1;
            env.set_timer(self.cfg.get_wait_limit_us, TIMER_PARKED_BASE + id);
            self.parked.push(Parked { id, client: from, req, since_us: env.now_us() });
            return;
        }
        self.answer(env, from, req);
    }

    /// Alg 7.2 lines 4–7, once line 3 holds.
    fn answer(&mut self, env: &mut impl Env, from: ClientId, req: GetReq) {
        let GetReq { key, cg, ds } = req;
        let svv = self.svv_of(cg);
        let store = env.store();
        let d = if self.cfg.mutant_skip_dependency_checks || !ds.covered_by(svv) {
            // Line 6: the client has read beyond this group's SVV (it named
            // another group before): the latest version, which line 3 made
            // sure is at least what the client depends on.
            store.latest(&key)
        } else {
            // Lines 4–5: the latest version whose dependencies every member
            // of cg has received; a client reading only in cg never waits.
            // A restarted server's SVV starts low: if its collection pruned
            // the versions this SVV admits, the oldest kept one stands in,
            // safe as line 6 is.
            store
                .latest_where(&key, |d| d.ds.covered_by(svv))
                .or_else(|| store.was_pruned(&key).then(|| store.versions(&key).first()).flatten())
        };
        let ok = match d {
            Some(d) => GetOk { value: Some(causeway_core::copy_if_short(&d.value)), ds: d.ds.clone() },
            None => GetOk { value: None, ds: Deps::default() },
        };
        env.reply(from, Msg::GetReply(Ok(Box::new(ok))));
    }

    /// Alg 7.2 lines 9–17.
    fn on_put(&mut self, env: &mut impl Env, from: ClientId, req: PutReq) {
        let checked = self.check_key(&req.key).and_then(|()| self.check_deps(&req.ds));
        if let Err(e) = checked {
            return env.reply(from, Msg::PutReply(Err(e)));
        }
        let PutReq { key, value, mut ds } = req;
        // Lines 9–10: dt = the maximum value in ds; updateHLC(dt).
        let dt = ds.max_value().unwrap_or(Hlc::ZERO);
        let ut = self.hlc.update(env.now_us(), dt);
        // Invariant (Roohitavaf, "Consistency for Distributed Data Stores",
        // §7.2.2): v1 dep v2 ⇒ v1.t > v2.t, whatever the physical clock did.
        assert!(ut > dt, "ACCF: a PUT stamped {ut:?} does not exceed its dependency time {dt:?}");
        // Lines 11–13: d.ds = max(ds, ⟨T(i), HLC_i⟩), which holds the
        // version's own timestamp.
        ds.raise(self.tg, ut);
        let version = Version { value, ut, origin: self.me, ds };
        // Line 14 (VV_i[T(i)] = HLC_i) is left out: VV_i speaks only for
        // the peers, since a server holds all of its own writes (deviation 2).
        env.observe(Observation::Visible {
            key: &key,
            value: &version.value,
            origin: self.topology.dc_of(self.me),
            written_us: ut.l,
        });
        let replica = (!self.peers.is_empty()).then(|| Box::new(version.clone()));
        self.apply(env, &key, version);
        // Line 15.
        env.reply(from, Msg::PutReply(Ok(Stamp { tg: self.tg, ut })));
        // Lines 16–17, in `ut` order on FIFO links: a peer may take `ut` as
        // the latest timestamp it has from this server.
        if let Some(replica) = replica {
            for &j in &self.peers {
                env.send(j, Msg::Replicate { key: key.clone(), version: replica.clone() });
            }
            self.replicated_since_tick = true;
        }
    }

    /// Alg 7.2 lines 19–21: insert, and update VV_i[T(j)] with d.ds[T(j)].
    fn on_replicate(&mut self, env: &mut impl Env, from: NodeId, key: Key, version: Version) {
        let Some(j) = self.peers.iter().position(|&p| p == from) else { return };
        let well_formed = version.origin == from
            && sane(version.ut)
            && version.ds.well_formed(self.vv.len())
            && version.ds.get(self.peer_group[j]) == Some(version.ut)
            && self.check_key(&key).is_ok();
        if !well_formed {
            return; // a malformed peer message is dropped
        }
        let (ut, order) = (version.ut, (version.ut, version.origin));
        let blocker = version.ds.first_above(self.svv_of(self.home())).map(|(g, h)| (g as usize, h));
        let landed = self.apply(env, &key, version);
        if landed.inserted != Inserted::Duplicate
            && let Some((index, order)) = self.pending.admit(blocker, landed.index, order)
        {
            self.report_if_read(env, index, order);
        }
        self.heard(env, j, ut);
    }

    /// §7.2.2: a heartbeat raises VV_i like a Replicate does.
    fn on_heartbeat(&mut self, env: &mut impl Env, from: NodeId, hlc: Hlc) {
        if let Some(j) = self.peers.iter().position(|&p| p == from)
            && sane(hlc)
        {
            self.heard(env, j, hlc);
        }
    }

    /// Peer `j` has sent everything up to `t`: raise `latest_from[j]` and
    /// VV_i, move HLC_i past `t` (deviation 3), and answer the GETs line 3
    /// no longer holds back.
    fn heard(&mut self, env: &mut impl Env, j: usize, t: Hlc) {
        self.hlc.update(env.now_us(), t);
        if t <= self.latest_from[j] {
            return;
        }
        self.latest_from[j] = t;
        let g = self.peer_group[j] as usize;
        let was = self.vv[g];
        self.recompute_vv();
        if self.vv[g] == was {
            return;
        }
        let ready: Vec<Parked>;
        (ready, self.parked) =
            std::mem::take(&mut self.parked).into_iter().partition(|p| p.req.ds.covered_by(&self.vv));
        let now = env.now_us();
        for p in ready {
            env.observe(Observation::Blocked { what: "get_wait", waited_us: now.saturating_sub(p.since_us) });
            self.answer(env, p.client, p.req);
        }
        if !self.svv.contains_key(&self.home()) {
            self.admit_pending(env);
        }
    }

    /// A member's VV, at the group's first member.
    fn on_vv_report(&mut self, from: NodeId, vv: Vec<Hlc>) {
        let leads_a_group_of = self.led().into_iter().any(|cg| self.groups.members(cg).contains(&from));
        if !leads_a_group_of || vv.len() != self.vv.len() {
            return;
        }
        match self.reports.get_mut(&from) {
            Some(r) => causeway_core::vmax(r, &vv),
            None => {
                self.reports.insert(from, vv);
            }
        }
    }

    /// SVVs from their groups' first member: entry-wise max into ours.
    fn on_svv_push(&mut self, env: &mut impl Env, from: NodeId, svvs: Vec<(u16, Vec<Hlc>)>) {
        for (cg, pushed) in svvs {
            if self.groups.members(cg).first() != Some(&from) || pushed.len() != self.vv.len() {
                continue;
            }
            if let Some(svv) = self.svv.get_mut(&cg) {
                causeway_core::vmax(svv, &pushed);
            }
        }
        self.admit_pending(env);
    }

    /// A parked GET's deadline: if it still waits, answer it with an error
    /// naming what it waited for, rather than hang while a DC is away.
    fn give_up(&mut self, env: &mut impl Env, id: u64) {
        let Some(at) = self.parked.iter().position(|p| p.id == id) else { return };
        // A timer may fire early (a runtime that fires every pending timer
        // at once): wait out the rest of the limit on this node's clock.
        let waited_us = env.now_us().saturating_sub(self.parked[at].since_us);
        if waited_us < self.cfg.get_wait_limit_us {
            return env.set_timer(self.cfg.get_wait_limit_us - waited_us, TIMER_PARKED_BASE + id);
        }
        let p = self.parked.remove(at);
        let (g, h) = p.req.ds.first_above(&self.vv).unwrap_or((0, Hlc::ZERO));
        let why = format!(
            "GET waited {} µs for tracking group {g} to reach {}.{} at this server",
            self.cfg.get_wait_limit_us, h.l, h.c
        );
        env.reply(p.client, Msg::GetReply(Err(OpError::Aborted(why))));
    }

    // ------------------------------------------------------------ visibility

    /// This server's first checking group: the one its clients name.
    fn home(&self) -> u16 {
        self.groups.home_checking(self.me).unwrap_or(0)
    }

    /// Report the remote versions the home group's SVV now admits.
    fn admit_pending(&mut self, env: &mut impl Env) {
        self.report_stable(env);
        if self.pending.is_empty() {
            return;
        }
        let svv = self.svv_of(self.home()).to_vec();
        let unblocked = self.pending.unblocked(&svv);
        for (index, order) in unblocked {
            let Some(v) = env.store().exact_at(index, order) else { continue };
            let blocker = v.ds.first_above(&svv).map(|(g, h)| (g as usize, h));
            if let Some((index, order)) = self.pending.admit(blocker, index, order) {
                self.report_if_read(env, index, order);
            }
        }
    }

    /// Report [`Observation::Stable`] when the home group's SVV rises: its
    /// least finite entry, the time up to which every member has received
    /// every group it shares keys with.
    fn report_stable(&mut self, env: &mut impl Env) {
        let least = self.svv_of(self.home()).iter().filter(|t| **t != Hlc::MAX).map(|t| t.l).min();
        if let Some(stable_us) = least
            && stable_us > self.stable_us
        {
            self.stable_us = stable_us;
            env.observe(Observation::Stable { stable_us });
        }
    }

    /// Report a version admitted in the home group if it is what a GET
    /// naming that group returns now.
    fn report_if_read(&self, env: &mut impl Env, index: KeyIndex, order: (Hlc, NodeId)) {
        let svv = self.svv_of(self.home());
        let origin = self.topology.dc_of(order.1);
        visibility::report_if_read(env, index, order, origin, order.0.l, |d| d.ds.covered_by(svv));
    }

    /// Insert, dropping the versions older than the newest one that every
    /// checking group of this server admits: SVVs only grow, so no
    /// filtered GET (line 5) can return them again, and line 6 returns the
    /// latest. (The thesis does not collect versions.)
    fn apply(&self, env: &mut impl Env, key: &[u8], version: Version) -> causeway_core::Landed {
        let mine = self.groups.checking_of(self.me);
        let stable = |d: &Version| mine.iter().all(|&cg| d.ds.covered_by(self.svv_of(cg)));
        env.store().insert_collecting(key, version, stable)
    }

    // ------------------------------------------------------------ timers

    /// Every Δ: if no Replicate went to the peers since the last tick,
    /// send ⟨Heartbeat HLC_i⟩ so their VV moves on (§7.2.2).
    fn heartbeat(&mut self, env: &mut impl Env) {
        if !self.replicated_since_tick && !self.peers.is_empty() {
            let hlc = self.hlc.tick(env.now_us());
            // Persist before send: the lease is durable before the
            // heartbeat leaves (a Replicate's and a PutReply's timestamps
            // are in the store already).
            if hlc.l >= self.lease_us {
                self.lease_us = hlc.l.saturating_add(self.cfg.clock_lease_us);
                env.store().set_meta(self.lease_us.to_le_bytes().to_vec());
            }
            for &j in &self.peers {
                env.send(j, Msg::Heartbeat { hlc });
            }
        }
        self.replicated_since_tick = false;
        env.set_timer(self.cfg.heartbeat_interval_us, TIMER_HEARTBEAT);
    }

    /// Every θ (§7.2.2, "servers inside a checking group periodically share
    /// their VVs"): report VV_i to the first member of each group of more
    /// than one server; as a first member, compute each group's SVV from
    /// the members' latest reports and push it to them (deviation 4).
    fn share_vv(&mut self, env: &mut impl Env) {
        let mut leaders: Vec<NodeId> = self
            .svv
            .keys()
            .filter_map(|&cg| self.groups.members(cg).first().copied())
            .filter(|&l| l != self.me)
            .collect();
        leaders.sort();
        leaders.dedup();
        for l in leaders {
            env.send(l, Msg::VvReport { vv: self.vv.clone() });
        }
        let mut pushes: BTreeMap<NodeId, Vec<(u16, Vec<Hlc>)>> = BTreeMap::new();
        for cg in self.led() {
            let mut min = self.vv.clone();
            let members = self.groups.members(cg);
            let all_reported = members.iter().all(|m| *m == self.me || self.reports.contains_key(m));
            if !all_reported {
                continue;
            }
            for m in members.iter().filter(|&&m| m != self.me) {
                causeway_core::vmin(&mut min, &self.reports[m]);
            }
            if let Some(svv) = self.svv.get_mut(&cg) {
                causeway_core::vmax(svv, &min);
            }
            for &m in members.iter().filter(|&&m| m != self.me) {
                pushes.entry(m).or_default().push((cg, min.clone()));
            }
        }
        for (m, svvs) in pushes {
            env.send(m, Msg::SvvPush { svvs });
        }
        self.admit_pending(env);
        env.set_timer(self.cfg.svv_interval_us, TIMER_SVV);
    }

    // ------------------------------------------------------------ checks

    fn check_key(&self, key: &[u8]) -> Result<(), OpError> {
        match self.partition {
            Some(p) if self.topology.partition_of(key) == p => Ok(()),
            _ => Err(OpError::BadRequest(format!("node {} does not store this key", self.me))),
        }
    }

    fn check_deps(&self, ds: &Deps) -> Result<(), OpError> {
        if ds.well_formed(self.vv.len()) {
            Ok(())
        } else {
            Err(OpError::BadRequest(format!(
                "malformed dependency set: groups must ascend, below {}, with HLC counters below 2^31",
                self.vv.len()
            )))
        }
    }

    fn check_get(&self, req: &GetReq) -> Result<(), OpError> {
        self.check_deps(&req.ds)?;
        if self.groups.checking_of(self.me).contains(&req.cg) {
            Ok(())
        } else {
            Err(OpError::BadRequest(format!("node {} is not in checking group {}", self.me, req.cg)))
        }
    }
}
