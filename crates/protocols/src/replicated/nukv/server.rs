//! Alg 4.2: a replica of a partition's Raft group (the leader takes PUTs,
//! any replica answers GETs once its stable vector allows), and the
//! cross-DC forwarder (XC), a non-voting member of every group of its DC.

use super::config::*;
use super::msg::*;
use crate::replicated::raft_log::{GroupLog, GroupMeta, election_ticks_for};
use causeway_core::{
    ClientId, DcId, Hlc, Key, NodeCtx, NodeId, NodeRole, Observation, PartitionId, Server, ServerEnv, Topology, Value,
};
use raft::prelude::{ConfState, Entry, EntryType, Message as RaftMessage, Snapshot};
use raft::{RawNode, StateRole};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

crate::kit::node::server_env!();

/// The name of the forwarder service in the topology.
pub const XC_SERVICE: &str = "xc";

/// Keys starting with this byte string are the groups' logs; a client's
/// key may not (it is refused, named).
pub const LOG_PREFIX: &[u8] = b"\0nukv.raft\0";

/// The store key holding the log of the group of `partition`.
pub fn log_key(partition: PartitionId) -> Key {
    let mut k = LOG_PREFIX.to_vec();
    k.extend_from_slice(&partition.0.to_be_bytes());
    Key::from(k)
}

/// Raft numbers members from 1; a node's Raft id is its node id plus one.
fn raft_id(n: NodeId) -> u64 {
    u64::from(n.0) + 1
}
fn node_of(raft_id: u64) -> NodeId {
    NodeId((raft_id - 1) as u32)
}

/// The one timer: every group's tick, the forwarder's resends, parked
/// GETs' deadlines.
const TICK: u64 = 1;

/// What the node's metadata holds: per group, Raft's state and (at a
/// replica) how far the state machine has applied it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct NodeMeta {
    groups: Vec<GroupState>,
    hlc: Hlc,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct GroupState {
    partition: u32,
    raft: GroupMeta,
    applied: u64,
    sv: Vec<u64>,
}

/// A snapshot of a replica's state machine, for a follower that fell
/// behind the log's compaction: the stable vector and every key's newest
/// write.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct SnapData {
    sv: Vec<u64>,
    writes: Vec<(Key, Stamped)>,
}

/// The forwarder's view of one other DC.
struct Remote {
    dc: DcId,
    /// That DC's group applied our writes through this index.
    acked: u64,
    /// We shipped through this index (resent from `acked` on a timeout).
    sent: u64,
    /// Which of that DC's replicas we ship to (the leader, as far as we know).
    target: usize,
    /// When `acked` last moved or we last (re)started shipping, µs.
    progress_us: u64,
}

/// The forwarder's side of one group (Alg 4.2's XC, with the replay and
/// gap handling its "detect and skip repeated writes" needs made explicit).
struct Forwarder {
    /// Writes of this DC committed in the group and not yet acknowledged by
    /// every other DC, by index.
    pending: VecDeque<(u64, Key, Stamped)>,
    remotes: Vec<Remote>,
    /// The last floor sent to the group.
    floor_sent: u64,
}

struct Group {
    partition: PartitionId,
    key: Key,
    raw: RawNode<GroupLog>,
    applied: u64,
    /// Replica: Alg 4.2's `sv`, one entry per DC. The local entry is this
    /// replica's applied index (a log index covers every write of this DC
    /// at or below it); another DC's is the `upto` of the last batch from
    /// it applied here.
    sv: Vec<u64>,
    /// Replica: how far every other DC has applied this group's writes, as
    /// the forwarder last said; the log is never compacted past it.
    floor: u64,
    xc: Option<Forwarder>,
    /// How many election timeouts this start drew (see [`Group::pace`]).
    draws: u64,
}

impl Group {
    /// Draw the group's election timeout anew whenever Raft's election
    /// clock restarted (it draws one itself, from a global generator, on
    /// every reset, which sets the clock to zero; also on a leader's
    /// message, where a new draw is as good). Called after every call
    /// into Raft, so its own draw never counts.
    ///
    /// One fixed timeout per node and start is not enough: two members
    /// whose timeouts happened to be equal and whose timers ran in step
    /// (both waiting out a paused leader) stood together at every
    /// election, each granting the other's pre-vote and then voting for
    /// itself, a split vote for ever, while the third member, whose longer
    /// log let only it win, had its timer reset by each of their vote
    /// requests (torture seed 6325: a DC's group of a partition without a
    /// leader from 0.2 s to the end, its replicas holding none of the
    /// partition's writes).
    fn pace(&mut self, election_ticks: u64, me: NodeId, started_us: u64) {
        if self.raw.raft.election_elapsed != 0 && self.draws != 0 {
            return;
        }
        self.draws += 1;
        let seed = started_us ^ self.draws.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let t = election_ticks_for(election_ticks, me.0, seed) as usize;
        self.raw.raft.set_randomized_election_timeout(t);
    }
}

/// A PUT not proposed yet: one that reached a replica while its group had
/// no leader (proposed here if this replica wins the election, else
/// answered `NotLeader` with the winner, or none after `get_wait_us`), or
/// one at the leader waiting for its `Dep::Applied` (proposed once the
/// stable vector covers it, else answered `Behind` after `get_wait_us`).
struct HeldPut {
    from: ClientId,
    req: u64,
    key: Key,
    value: Value,
    dep: Dep,
    since_us: u64,
}

/// A GET waiting for the stable vector.
struct Parked {
    from: ClientId,
    req: Box<GetReq>,
    since_us: u64,
}

enum Role {
    Replica,
    Forwarder,
    /// A node of the topology NuKV does not use (another service).
    Inert,
}

pub struct NukvServer {
    cfg: Config,
    me: NodeId,
    dc: DcId,
    topology: Arc<Topology>,
    role: Role,
    groups: Vec<Group>,
    /// Alg 4.2's `HLC_d`: stamps the leader's writes; every applied write
    /// moves it forward, so a new leader stamps past its predecessor's.
    hlc: Hlc,
    /// This start's clock reading: names the start in proposals and
    /// spreads election timeouts.
    started_us: u64,
    /// Proposals numbered within this start.
    proposed: u64,
    /// Proposals of this start awaiting commit: number → (client, its
    /// request number).
    waiting: BTreeMap<u64, (ClientId, u64)>,
    parked: Vec<Parked>,
    held: Vec<HeldPut>,
    /// PUTs at the leader waiting for the writes they depend on (writes
    /// without HLC, `Config::hlc` false).
    waiting_puts: Vec<HeldPut>,
    ticks: u64,
    logger: slog::Logger,
}

impl NukvServer {
    pub(super) fn new(cfg: &Config, ctx: NodeCtx) -> NukvServer {
        let role = match ctx.role {
            NodeRole::Partition { .. } => Role::Replica,
            NodeRole::Service { service, .. } if ctx.topology.service_index(XC_SERVICE) == Some(service) => {
                Role::Forwarder
            }
            NodeRole::Service { .. } => Role::Inert,
        };
        NukvServer {
            cfg: cfg.clone(),
            me: ctx.id,
            dc: ctx.role.dc(),
            topology: ctx.topology,
            role,
            groups: Vec::new(),
            hlc: Hlc::ZERO,
            started_us: 0,
            proposed: 0,
            waiting: BTreeMap::new(),
            parked: Vec::new(),
            held: Vec::new(),
            waiting_puts: Vec::new(),
            ticks: 0,
            logger: slog::Logger::root(slog::Discard, slog::o!()),
        }
    }

    /// The partitions this node is a member of: its own (a replica), every
    /// one its DC stores (the forwarder), none (inert).
    fn member_of(&self) -> Vec<PartitionId> {
        match (&self.role, self.topology.role(self.me)) {
            (Role::Replica, NodeRole::Partition { partition, .. }) => vec![partition],
            (Role::Forwarder, _) => self.topology.partitions_at(self.dc).to_vec(),
            _ => Vec::new(),
        }
    }

    /// The forwarder of `dc`, if it runs one.
    fn forwarder_of(&self, dc: DcId) -> Option<NodeId> {
        let s = self.topology.service_index(XC_SERVICE)?;
        self.topology.service_nodes(dc, s).first().copied()
    }

    fn group_index(&self, partition: u32) -> Option<usize> {
        self.groups.iter().position(|g| g.partition.0 == partition)
    }

    fn start_group(&self, partition: PartitionId, saved: Option<&GroupState>, records: &[Version]) -> Group {
        let voters = self.topology.replicas(self.dc, partition).iter().map(|&n| raft_id(n));
        let learners = self.forwarder_of(self.dc).map(raft_id);
        let conf = ConfState::from((voters, learners));
        let dcs = self.topology.dcs();
        let (log, applied, sv) = match saved {
            Some(s) => (GroupLog::restore(conf, s.raft, records), s.applied, s.sv.clone()),
            None => (GroupLog::new(conf), 0, vec![0; dcs]),
        };
        // The forwarder keeps no state of its own: it ships again whatever
        // its log still holds, and receivers drop what they already have.
        let forwarder = matches!(self.role, Role::Forwarder);
        let applied = if forwarder { log.snap_index() } else { applied.max(log.snap_index()) };
        let config = raft::Config {
            id: raft_id(self.me),
            election_tick: self.cfg.election_ticks as usize,
            // Raft §5.2: each election waits a timeout drawn anew from
            // [election, 2 × election) ticks. The crate draws it from a
            // global generator; `pace` replaces every draw with one of its
            // own, derived from the node, its start and the draw's number,
            // so that a seed replays exactly.
            min_election_tick: self.cfg.election_ticks as usize,
            max_election_tick: 2 * self.cfg.election_ticks as usize,
            heartbeat_tick: self.cfg.heartbeat_ticks as usize,
            applied,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            check_quorum: true,
            pre_vote: true,
            ..Default::default()
        };
        let raw = RawNode::new(&config, log, &self.logger).expect("a valid raft config (checked by Config::check)");
        let xc = forwarder.then(|| Forwarder {
            pending: VecDeque::new(),
            remotes: self
                .topology
                .dcs_of(partition)
                .iter()
                .filter(|&&d| d != self.dc)
                .map(|&dc| Remote { dc, acked: applied, sent: applied, target: 0, progress_us: self.started_us })
                .collect(),
            floor_sent: 0,
        });
        let mut g = Group { partition, key: log_key(partition), raw, applied, sv, floor: 0, xc, draws: 0 };
        g.pace(self.cfg.election_ticks, self.me, self.started_us);
        g
    }

    fn save_meta(&mut self, env: &mut impl Env) {
        if !self.groups.iter().any(|g| g.raw.store().dirty()) {
            return;
        }
        let meta = NodeMeta {
            groups: self
                .groups
                .iter()
                .map(|g| GroupState {
                    partition: g.partition.0,
                    raft: g.raw.store().meta(),
                    applied: g.applied,
                    sv: g.sv.clone(),
                })
                .collect(),
            hlc: self.hlc,
        };
        env.store().set_meta(postcard::to_allocvec(&meta).expect("metadata encodes"));
        for g in &mut self.groups {
            g.raw.mut_store().clean();
        }
    }
}

// ---- Raft plumbing: one turn's Ready, applied and persisted ----

impl NukvServer {
    fn send_raft(&self, env: &mut impl Env, partition: PartitionId, msgs: Vec<RaftMessage>) {
        use protobuf::Message as _;
        for m in msgs {
            let to = node_of(m.to);
            let bytes = m.write_to_bytes().expect("a raft message encodes");
            env.send(to, Msg::Raft { partition: partition.0, msg: bytes::Bytes::from(bytes) });
        }
    }

    /// Handle every group's Ready: persist entries and hard state (in this
    /// turn's store changes, durable before anything sent leaves), send,
    /// apply what committed.
    fn drive(&mut self, env: &mut impl Env) {
        for gi in 0..self.groups.len() {
            while self.groups[gi].raw.has_ready() {
                let mut rd = self.groups[gi].raw.ready();
                let partition = self.groups[gi].partition;
                self.send_raft(env, partition, rd.take_messages());
                if !rd.snapshot().is_empty() {
                    let snap = rd.snapshot().clone();
                    self.install_snapshot(env, gi, snap);
                }
                {
                    let g = &mut self.groups[gi];
                    let key = g.key.clone();
                    g.raw.mut_store().append(env.store(), &key, rd.entries());
                    if let Some(hs) = rd.hs() {
                        g.raw.mut_store().set_hard_state(hs);
                    }
                }
                let committed = rd.take_committed_entries();
                self.apply(env, gi, committed);
                self.send_raft(env, partition, rd.take_persisted_messages());
                let mut light = self.groups[gi].raw.advance(rd);
                if let Some(c) = light.commit_index() {
                    self.groups[gi].raw.mut_store().set_commit(c);
                }
                self.send_raft(env, partition, light.take_messages());
                let committed = light.take_committed_entries();
                self.apply(env, gi, committed);
                self.groups[gi].raw.advance_apply();
            }
        }
        self.ship(env);
        self.unpark(env);
        self.unhold(env);
        self.unwait_puts(env);
        self.save_meta(env);
    }

    fn apply(&mut self, env: &mut impl Env, gi: usize, entries: Vec<Entry>) {
        if entries.is_empty() {
            return;
        }
        for e in entries {
            let g = &mut self.groups[gi];
            assert!(e.index > g.applied, "entry {} applied twice (applied {})", e.index, g.applied);
            g.applied = e.index;
            if matches!(self.role, Role::Replica) {
                g.sv[self.dc.idx()] = e.index;
            }
            if e.get_entry_type() != EntryType::EntryNormal || e.data.is_empty() {
                continue;
            }
            let cmd: Command =
                postcard::from_bytes(&e.data).expect("only this group's leaders propose, and they encode");
            match cmd {
                Command::Put { key, value, t, dc, proposal } => {
                    self.apply_put(env, gi, e.index, key, value, t, dc, proposal)
                }
                Command::Forward(f) => self.apply_forward(env, gi, f),
            }
        }
        // `applied` and `sv` are metadata beside Raft's: they reach the
        // log in the same turn as the writes they cover.
        self.groups[gi].raw.mut_store().touch();
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_put(
        &mut self,
        env: &mut impl Env,
        gi: usize,
        index: u64,
        key: Key,
        value: Value,
        t: Hlc,
        dc: DcId,
        proposal: (NodeId, u64, u64),
    ) {
        let stamped = Stamped { value: value.clone(), t, dc, idx: index };
        self.hlc.update(0, t);
        if let Some(xc) = &mut self.groups[gi].xc {
            xc.pending.push_back((index, key, stamped));
            return;
        }
        if store_write(env, &key, stamped) {
            env.observe(Observation::Visible { key: &key, value: &value, origin: dc, written_us: t.l });
        }
        if proposal.0 == self.me
            && proposal.2 == self.started_us
            && let Some((client, req)) = self.waiting.remove(&proposal.1)
        {
            let idx = self.groups[gi].sv[self.dc.idx()];
            env.reply(client, Msg::PutReply { req, dc, idx, t });
        }
    }

    fn apply_forward(&mut self, env: &mut impl Env, gi: usize, f: Forward) {
        if self.groups[gi].xc.is_some() {
            return; // another DC's writes: nothing for this DC's forwarder to ship
        }
        let o = f.origin.idx();
        let have = self.groups[gi].sv[o];
        // A replay (everything in it applied) or a gap (an earlier batch
        // missing): dropped. Otherwise apply what is new, in index order.
        if f.after <= have && have < f.upto {
            for (key, s) in f.writes {
                if s.idx <= have {
                    continue;
                }
                self.hlc.update(0, s.t);
                let (t, dc, value) = (s.t, s.dc, s.value.clone());
                if store_write(env, &key, s) {
                    env.observe(Observation::Visible { key: &key, value: &value, origin: dc, written_us: t.l });
                }
            }
            self.groups[gi].sv[o] = f.upto;
        }
        if self.groups[gi].raw.raft.state == StateRole::Leader {
            self.ack(env, gi, f.origin);
        }
    }

    fn ack(&self, env: &mut impl Env, gi: usize, origin: DcId) {
        let g = &self.groups[gi];
        if let Some(xc) = self.forwarder_of(origin) {
            env.send(xc, Msg::ForwardAck { partition: g.partition.0, dc: self.dc, covered: g.sv[origin.idx()] });
        }
    }

    fn install_snapshot(&mut self, env: &mut impl Env, gi: usize, snap: Snapshot) {
        let meta = snap.get_metadata().clone();
        let key = self.groups[gi].key.clone();
        self.groups[gi].raw.mut_store().apply_snapshot(env.store(), &key, &meta);
        let g = &mut self.groups[gi];
        g.applied = g.applied.max(meta.index);
        if let Some(xc) = &mut g.xc {
            // The floor keeps every write not yet shipped everywhere in the
            // leader's log, so the forwarder is never sent past one.
            for r in &xc.remotes {
                assert!(r.acked >= meta.index, "the forwarder was sent a snapshot past writes it had not shipped");
            }
            return;
        }
        let data: SnapData = postcard::from_bytes(&snap.data).expect("a group member's snapshot decodes");
        for (d, v) in data.sv.iter().enumerate() {
            g.sv[d] = g.sv[d].max(*v);
        }
        for (key, s) in data.writes {
            self.hlc.update(0, s.t);
            store_write(env, &key, s);
        }
    }

    /// Offer Raft a snapshot when it asked for one (a follower behind the
    /// compacted log).
    fn prepare_snapshots(&mut self, env: &mut impl Env) {
        for g in &mut self.groups {
            if !g.raw.store().snapshot_wanted() || g.xc.is_some() {
                continue;
            }
            let mut writes = Vec::new();
            for key in env.store().keys_sorted() {
                if key.starts_with(LOG_PREFIX) || self.topology.partition_of(&key) != g.partition {
                    continue;
                }
                if let Some(Version::Data(s)) = env.store().latest_where(&key, |v| matches!(v, Version::Data(_))) {
                    writes.push((key.clone(), s.clone()));
                }
            }
            let data = postcard::to_allocvec(&SnapData { sv: g.sv.clone(), writes }).expect("a snapshot encodes");
            g.raw.mut_store().prepare_snapshot(g.applied, Value::from(data));
        }
    }

    /// Compact each log up to what is applied here and (at a replica)
    /// shipped to every other DC.
    fn compact(&mut self, env: &mut impl Env) {
        for g in &mut self.groups {
            let log = g.raw.store();
            if log.entry_count() <= self.cfg.compact_entries {
                continue;
            }
            let upto = match &g.xc {
                Some(xc) => xc.remotes.iter().map(|r| r.acked).min().unwrap_or(g.applied),
                None => g.floor,
            }
            .min(g.applied);
            if upto > log.snap_index() {
                let key = g.key.clone();
                g.raw.mut_store().compact(env.store(), &key, upto);
            }
        }
    }
}

/// Store a write, keeping only each key's newest (last-writer-wins by
/// ⟨t, dc, idx⟩; a GET never asks for an older one). True when it is now
/// the newest.
fn store_write(env: &mut impl Env, key: &[u8], s: Stamped) -> bool {
    let landed = env.store().insert_collecting(key, Version::Data(s), |_| true);
    landed.inserted == causeway_core::Inserted::Newest
}

// ---- The forwarder ----

impl NukvServer {
    /// Ship each group's committed writes of this DC to every other DC:
    /// new writes at once, the bare advance of the log (which moves the
    /// receivers' `sv` entry for this DC) on ticks.
    fn ship(&mut self, env: &mut impl Env) {
        self.ship_when(env, false);
    }

    fn ship_when(&mut self, env: &mut impl Env, tick: bool) {
        let now = env.now_us();
        let me_dc = self.dc;
        for gi in 0..self.groups.len() {
            let g = &mut self.groups[gi];
            let (partition, applied) = (g.partition, g.applied);
            let Some(xc) = &mut g.xc else { continue };
            for r in &mut xc.remotes {
                let fresh = xc.pending.back().is_some_and(|(i, _, _)| *i > r.sent);
                if r.sent >= applied || !(fresh || tick) {
                    continue;
                }
                if r.sent == r.acked {
                    r.progress_us = now;
                }
                let writes: Vec<(Key, Stamped)> = xc
                    .pending
                    .iter()
                    .filter(|(i, _, _)| *i > r.sent && *i <= applied)
                    .map(|(_, k, s)| (k.clone(), s.clone()))
                    .collect();
                let f = Forward { partition: partition.0, origin: me_dc, after: r.sent, upto: applied, writes };
                let replicas = self.topology.replicas(r.dc, partition);
                let to = replicas[r.target % replicas.len()];
                env.send(to, Msg::Forward(Box::new(f)));
                r.sent = applied;
            }
        }
    }

    /// On a tick: resend from the acknowledged point where another DC has
    /// not acknowledged for `forward_retry_us` (its leader changed, or a
    /// batch reached a replica that could not propose it), and tell the
    /// group how far it may compact.
    fn forwarder_tick(&mut self, env: &mut impl Env) {
        let now = env.now_us();
        for g in &mut self.groups {
            let Some(xc) = &mut g.xc else { continue };
            for r in &mut xc.remotes {
                if r.sent > r.acked && now.saturating_sub(r.progress_us) >= self.cfg.forward_retry_us {
                    r.sent = r.acked;
                    r.target += 1;
                    r.progress_us = now;
                }
            }
            let floor = xc.remotes.iter().map(|r| r.acked).min().unwrap_or(g.applied);
            if floor > xc.floor_sent || self.ticks.is_multiple_of(20) {
                xc.floor_sent = floor;
                for &n in self.topology.replicas(self.dc, g.partition) {
                    env.send(n, Msg::Floor { partition: g.partition.0, index: floor });
                }
            }
        }
        self.ship_when(env, true);
    }

    fn on_ack(&mut self, gi: usize, dc: DcId, covered: u64, now: u64) {
        let Some(xc) = &mut self.groups[gi].xc else { return };
        let Some(r) = xc.remotes.iter_mut().find(|r| r.dc == dc) else { return };
        if covered > r.acked {
            r.acked = covered;
            r.progress_us = now;
            r.sent = r.sent.max(covered);
        }
        let low = xc.remotes.iter().map(|r| r.acked).min().unwrap_or(0);
        while xc.pending.front().is_some_and(|(i, _, _)| *i <= low) {
            xc.pending.pop_front();
        }
    }

    fn on_nack(&mut self, env: &mut impl Env, gi: usize, dc: DcId, leader: Option<NodeId>) {
        let partition = self.groups[gi].partition;
        let replicas = self.topology.replicas(dc, partition).to_vec();
        let Some(xc) = &mut self.groups[gi].xc else { return };
        let Some(r) = xc.remotes.iter_mut().find(|r| r.dc == dc) else { return };
        r.target = match leader.and_then(|l| replicas.iter().position(|&n| n == l)) {
            Some(i) => i,
            None => r.target + 1,
        };
        r.sent = r.acked;
        r.progress_us = env.now_us();
    }
}

// ---- Clients' requests at a replica ----

impl NukvServer {
    fn refuse_key(&self, key: &[u8]) -> Option<String> {
        if key.starts_with(LOG_PREFIX) {
            return Some("keys starting with \\0nukv.raft\\0 are reserved for the replicas' logs".into());
        }
        let p = self.topology.partition_of(key);
        match (&self.role, self.groups.first()) {
            (Role::Replica, Some(g)) if g.partition == p => None,
            _ => Some(format!("{} does not store partition {} (the key's)", self.topology.role_name(self.me), p.0)),
        }
    }

    fn stable_enough(&self, req: &GetReq) -> bool {
        self.cfg.mutant_skip_get_wait || (self.covers(&req.hrv) && self.covers(&req.hwv))
    }

    /// The stable vector is at or above `v` in every entry (`v` may be
    /// shorter: its missing entries are zero).
    fn covers(&self, v: &[u64]) -> bool {
        let sv = &self.groups[0].sv;
        v.iter().enumerate().all(|(i, &x)| sv.get(i).is_some_and(|&s| s >= x))
    }

    fn read(&self, env: &mut impl Env, from: ClientId, key: &[u8], req: u64) {
        let sv = &self.groups[0].sv;
        let msg = match env.store().latest_where(key, |v| matches!(v, Version::Data(_))) {
            Some(Version::Data(s)) => {
                Msg::GetReply { req, value: Some(s.value.clone()), dc: s.dc, idx: sv[s.dc.idx()], t: s.t }
            }
            _ => Msg::GetReply { req, value: None, dc: DcId(0), idx: 0, t: Hlc::ZERO },
        };
        env.reply(from, msg);
    }

    fn on_get(&mut self, env: &mut impl Env, from: ClientId, req: Box<GetReq>) {
        let dcs = self.topology.dcs();
        if req.hrv.len() > dcs || req.hwv.len() > dcs {
            let reason =
                format!("a GET's vectors have one entry per DC ({dcs}), got {} and {}", req.hrv.len(), req.hwv.len());
            env.reply(from, Msg::Refused { req: req.req, key: req.key, reason });
            return;
        }
        if self.stable_enough(&req) {
            self.read(env, from, &req.key, req.req);
        } else {
            self.parked.push(Parked { from, req, since_us: env.now_us() });
        }
    }

    /// Answer the parked GETs the stable vector now allows, and those out
    /// of time with `Behind`.
    fn unpark(&mut self, env: &mut impl Env) {
        if self.parked.is_empty() {
            return;
        }
        let now = env.now_us();
        let parked = std::mem::take(&mut self.parked);
        for p in parked {
            if self.stable_enough(&p.req) {
                env.observe(Observation::Blocked { what: "get_wait", waited_us: now.saturating_sub(p.since_us) });
                self.read(env, p.from, &p.req.key, p.req.req);
            } else if now.saturating_sub(p.since_us) >= self.cfg.get_wait_us {
                env.reply(p.from, Msg::Behind { req: p.req.req });
            } else {
                self.parked.push(p);
            }
        }
    }

    /// Whether this leader has applied its log through the first entry of
    /// its own term (the empty entry Raft appends on election), and so every
    /// write committed before it led. Until then it stamps nothing: a write
    /// its predecessor committed and acknowledged may still be unapplied
    /// here (a follower learns the commit index only with the next append),
    /// so this leader's HLC may not be past that write's stamp yet, and a
    /// write stamped now, on a clock behind its predecessor's, would order
    /// before a write acknowledged before it was invoked: the DC's writes
    /// would not be linearized (`Protocol::LINEARIZES_DC_WRITES`). Raft's
    /// own rule for a new leader's reads (Ongaro and Ousterhout §8) is the
    /// same wait.
    fn leads_caught_up(&self) -> bool {
        let g = &self.groups[0];
        g.raw.raft.raft_log.term(g.applied).is_ok_and(|t| t == g.raw.raft.term)
    }

    /// Settle the PUTs held for want of a leader (or of a new leader's
    /// catching up, [`Self::leads_caught_up`]), once there is one (or their
    /// time is up).
    fn unhold(&mut self, env: &mut impl Env) {
        if self.held.is_empty() {
            return;
        }
        let now = env.now_us();
        let leader = self.groups[0].raw.raft.leader_id;
        for h in std::mem::take(&mut self.held) {
            if leader != raft::INVALID_ID || now.saturating_sub(h.since_us) >= self.cfg.get_wait_us {
                self.on_put(env, h);
            } else {
                self.held.push(h);
            }
        }
        // A proposal made just now is in the Ready of this same turn.
        if self.groups[0].raw.has_ready() {
            self.drive(env);
        }
    }

    /// Propose the PUTs whose dependencies the stable vector now covers
    /// (reporting how long they waited), and answer `Behind` to those out
    /// of time.
    fn unwait_puts(&mut self, env: &mut impl Env) {
        if self.waiting_puts.is_empty() {
            return;
        }
        let now = env.now_us();
        for h in std::mem::take(&mut self.waiting_puts) {
            let ready = matches!(&h.dep, Dep::Applied(v) if self.covers(v));
            if ready {
                env.observe(Observation::Blocked { what: "put_wait", waited_us: now.saturating_sub(h.since_us) });
                self.on_put(env, h);
            } else if now.saturating_sub(h.since_us) >= self.cfg.get_wait_us {
                env.reply(h.from, Msg::Behind { req: h.req });
            } else {
                self.waiting_puts.push(h);
            }
        }
        if self.groups[0].raw.has_ready() {
            self.drive(env);
        }
    }

    fn on_put(&mut self, env: &mut impl Env, put: HeldPut) {
        let g = &self.groups[0];
        let now = env.now_us();
        if g.raw.raft.state != StateRole::Leader {
            let leader = g.raw.raft.leader_id;
            if leader == raft::INVALID_ID && now.saturating_sub(put.since_us) < self.cfg.get_wait_us {
                self.held.push(put);
                return;
            }
            let leader = (leader != raft::INVALID_ID).then(|| node_of(leader));
            env.reply(put.from, Msg::NotLeader { req: put.req, leader });
            return;
        }
        if !self.leads_caught_up() {
            if now.saturating_sub(put.since_us) < self.cfg.get_wait_us {
                self.held.push(put);
            } else {
                env.reply(put.from, Msg::Behind { req: put.req });
            }
            return;
        }
        let dt = match &put.dep {
            // updateHLC(dt): past the clock, the previous stamp and the
            // session's dependency time; the PUT never waits.
            Dep::Time(dt) => *dt,
            // Without HLC: once this leader has applied every write the
            // PUT depends on, its clock (moved past each applied write's
            // stamp) orders the PUT after them.
            Dep::Applied(v) if self.covers(v) => Hlc::ZERO,
            Dep::Applied(_) => {
                self.waiting_puts.push(put);
                return;
            }
        };
        let HeldPut { from, req, key, value, .. } = put;
        let g = &mut self.groups[0];
        let t = if self.cfg.mutant_stamp_physical { Hlc::new(now, 0) } else { self.hlc.update(now, dt) };
        self.proposed += 1;
        let cmd = Command::Put { key, value, t, dc: self.dc, proposal: (self.me, self.proposed, self.started_us) };
        let data = postcard::to_allocvec(&cmd).expect("a command encodes");
        match g.raw.propose(Vec::new(), data) {
            Ok(()) => {
                self.waiting.insert(self.proposed, (from, req));
            }
            Err(e) => {
                let Command::Put { key, .. } = cmd else { unreachable!() };
                let reason = format!("the leader could not propose the write: {e}");
                env.reply(from, Msg::Refused { req, key, reason });
            }
        }
    }
}

impl Server for NukvServer {
    type Msg = Msg;
    type Version = Version;

    fn on_start(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        if matches!(self.role, Role::Inert) {
            return;
        }
        self.started_us = env.now_us();
        let meta: NodeMeta = match env.store().meta() {
            Some(b) => postcard::from_bytes(b).expect("this node's metadata decodes"),
            None => NodeMeta::default(),
        };
        self.hlc = meta.hlc;
        self.groups.clear();
        for p in self.member_of() {
            let saved = meta.groups.iter().find(|s| s.partition == p.0);
            let records = env.store().versions(&log_key(p)).to_vec();
            let g = self.start_group(p, saved, &records);
            self.groups.push(g);
        }
        // A fresh group's first replica stands at once rather than after an
        // election timeout.
        if let NodeRole::Partition { replica: 0, .. } = self.topology.role(self.me)
            && let Some(g) = self.groups.first_mut()
            && g.raw.raft.term == 0
        {
            let _ = g.raw.campaign();
            g.pace(self.cfg.election_ticks, self.me, self.started_us);
        }
        env.set_timer(self.cfg.tick_us, TICK);
        self.drive(env);
    }

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        let (key, req) = match &msg {
            Msg::GetReq(r) => (r.key.clone(), r.req),
            Msg::PutReq { key, req, .. } => (key.clone(), *req),
            other => {
                let reason =
                    format!("a client may send get_req or put_req, not {}", causeway_core::Message::kind(other));
                env.reply(from, Msg::Refused { req: 0, key: Key::new(), reason });
                return;
            }
        };
        if let Some(reason) = self.refuse_key(&key) {
            env.reply(from, Msg::Refused { req, key, reason });
            return;
        }
        match msg {
            Msg::GetReq(r) => self.on_get(env, from, r),
            Msg::PutReq { key, value, dep, req } => {
                let dcs = self.topology.dcs();
                match &dep {
                    Dep::Applied(v) if v.len() > dcs => {
                        let reason = format!("a PUT's dependency vector has one entry per DC ({dcs}), got {}", v.len());
                        env.reply(from, Msg::Refused { req, key, reason });
                    }
                    _ => {
                        let since_us = env.now_us();
                        self.on_put(env, HeldPut { from, req, key, value, dep, since_us })
                    }
                }
            }
            _ => unreachable!("checked above"),
        }
        self.drive(env);
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Raft { partition, msg } => {
                use protobuf::Message as _;
                let Some(gi) = self.group_index(partition) else { return };
                // A peer's bytes that do not decode, or that Raft refuses
                // (a stale term, an unknown member), are dropped: Raft
                // retries what matters on its own ticks.
                if let Ok(m) = RaftMessage::parse_from_bytes(&msg) {
                    let _ = self.groups[gi].raw.step(m);
                    self.groups[gi].pace(self.cfg.election_ticks, self.me, self.started_us);
                }
            }
            Msg::Forward(f) => self.on_forward(env, from, *f),
            Msg::ForwardAck { partition, dc, covered } => {
                if let Some(gi) = self.group_index(partition) {
                    self.on_ack(gi, dc, covered, env.now_us());
                }
            }
            Msg::ForwardNack { partition, dc, leader } => {
                if let Some(gi) = self.group_index(partition) {
                    self.on_nack(env, gi, dc, leader);
                }
            }
            Msg::Floor { partition, index } => {
                if let Some(gi) = self.group_index(partition) {
                    let g = &mut self.groups[gi];
                    g.floor = g.floor.max(index);
                }
            }
            _ => {}
        }
        self.drive(env);
    }

    fn on_timer(&mut self, env: &mut impl ServerEnv<Msg, Version>, token: u64) {
        if token != TICK {
            return;
        }
        self.ticks += 1;
        for g in &mut self.groups {
            g.raw.tick();
            g.pace(self.cfg.election_ticks, self.me, self.started_us);
        }
        if matches!(self.role, Role::Forwarder) {
            self.forwarder_tick(env);
        }
        self.compact(env);
        self.prepare_snapshots(env);
        env.set_timer(self.cfg.tick_us, TICK);
        self.drive(env);
    }
}

impl NukvServer {
    /// Alg 4.2's `Replicate` at a receiving replica: the leader proposes the
    /// batch to its group (dropped there if it is a replay); any other
    /// replica points the forwarder at the leader.
    fn on_forward(&mut self, env: &mut impl Env, from: NodeId, f: Forward) {
        let Some(gi) = self.group_index(f.partition) else { return };
        if self.groups[gi].xc.is_some() || f.origin.idx() >= self.topology.dcs() || f.origin == self.dc {
            return;
        }
        let g = &mut self.groups[gi];
        if g.raw.raft.state != StateRole::Leader {
            let leader = g.raw.raft.leader_id;
            let leader = (leader != raft::INVALID_ID).then(|| node_of(leader));
            env.send(from, Msg::ForwardNack { partition: f.partition, dc: self.dc, leader });
            return;
        }
        if f.upto <= g.sv[f.origin.idx()] {
            // Everything in it is applied here already: say so at once.
            self.ack(env, gi, f.origin);
            return;
        }
        let data = postcard::to_allocvec(&Command::Forward(f)).expect("a command encodes");
        // A refused proposal (no leader after all) is shipped again by the
        // forwarder when no acknowledgement comes.
        let _ = g.raw.propose(Vec::new(), data);
    }
}

/// What a test looks at in a group member.
#[cfg(test)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Probe {
    pub leader: bool,
    pub applied: u64,
    pub sv: Vec<u64>,
    pub first: u64,
    pub last: u64,
    pub election_timeout: usize,
}

#[cfg(test)]
impl NukvServer {
    pub(super) fn probe(&self, partition: u32) -> Option<Probe> {
        let g = &self.groups[self.group_index(partition)?];
        Some(Probe {
            leader: g.raw.raft.state == StateRole::Leader,
            applied: g.applied,
            sv: g.sv.clone(),
            first: g.raw.store().first(),
            last: g.raw.store().last(),
            election_timeout: g.raw.raft.randomized_election_timeout(),
        })
    }
}
