//! Alg 5, the receiver r_m: one queue of shipped metadata per origin DC,
//! and SiteTime_m, the latest update applied from each. The head of queue
//! k is applied once every other origin's SiteTime has reached its
//! dependencies (line 12), synchronously: the next one waits for the
//! partition's acknowledgement (lines 14–15).

use super::config::Config;
use super::msg::*;
use super::server::{Env, Timer};
use causeway_core::{DcId, NodeId, Observation, Topology};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// An apply round in flight: ops sent to partitions, not all acknowledged.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Round {
    id: u64,
    /// Per partition server, the ops sent to it, in order.
    sent: Vec<(NodeId, Vec<ApplyOp>)>,
    /// The partitions that have not acknowledged yet.
    waiting: BTreeSet<NodeId>,
    /// How many heads of each queue the round takes.
    taken: Vec<usize>,
    /// SiteTime_m once the round is done.
    site_time_after: Vec<u64>,
}

/// What a receiver journals as metadata (deviation 6). The queued updates
/// themselves are versions of its store (one per update, under the
/// origin's id and the key: [`queue_key`]), so a turn journals only what
/// it changed, not the whole queue.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct State {
    /// SiteTime_m\[k\]: every update from DC k with `vts[k]` at or below it
    /// has been applied here.
    site_time: Vec<u64>,
    /// Per origin k: every update from k with `vts[k]` at or below it has
    /// been queued (the last StableTime shipped without a gap before it).
    shipped_through: Vec<u64>,
    /// Per origin, shipments that arrived ahead of a gap (from a new
    /// leader, while the old one's last shipment is still on its way), by
    /// their lower bound (deviation 7).
    early: Vec<BTreeMap<u64, (u64, Vec<OpMeta>)>>,
    /// Per origin k, ⟨vts\[k\], partition⟩ of the last update applied
    /// from k: with two updates at one timestamp, SiteTime\[k\] stays
    /// below both until both are applied, and this tells a restart which
    /// of them already was.
    popped: Vec<(u64, u32)>,
    rounds: u64,
    /// How many times this receiver has started: the high bits of its
    /// round ids. Rounds are not journaled before they leave (see
    /// [`Receiver::start_round`]), so a restart may count rounds again from
    /// an older `rounds`; the epoch, journaled (synced) at every start
    /// before anything leaves, keeps a late `Applied` of a round lost with
    /// the crash from acknowledging a new round that reused its number.
    epoch: u64,
    in_flight: Option<Round>,
}

/// A round's id: the receiver's epoch above `EPOCH_SHIFT` bits of its count.
const EPOCH_SHIFT: u32 = 40;

/// The most updates one apply round takes (its journal record and
/// messages stay small).
const MAX_ROUND: usize = 256;

/// Where a queued update from DC `origin` is stored: a chain per origin
/// and key, in which versions arrive in `vts[origin]` order, so an update
/// not yet applied is never below one applied (which collection drops).
fn queue_key(origin: usize, key: &[u8]) -> Vec<u8> {
    let mut k = (origin as u16).to_be_bytes().to_vec();
    k.extend_from_slice(key);
    k
}

pub struct Receiver {
    cfg: Config,
    topology: Arc<Topology>,
    dc: DcId,
    s: State,
    /// Queue_m\[k\]: shipped updates from DC k not yet applied, in
    /// `vts[k]` order (rebuilt from the store after a restart).
    queues: Vec<VecDeque<OpMeta>>,
    /// The least remote SiteTime last reported.
    reported_stable_us: u64,
    /// When (this node's clock) the round in flight left: measurement only.
    round_sent_us: u64,
    /// Per origin, `shipped_through` as last journaled: the most a
    /// `Shipped` may say (deviation 11).
    journaled_through: Vec<u64>,
    /// Per origin, what the last `Shipped` said.
    acked_through: Vec<u64>,
    /// Whether an [`Timer::Acks`] is pending: acknowledgements then wait
    /// for it (`shipped_ack_interval_us`).
    ack_timer: bool,
    /// Whether a [`Timer::CheckPending`] is pending: a round started less
    /// than ρ ago, and the next waits for it (`check_pending_interval_us`).
    /// Timers, not clock readings, so a clock stepped back delays nothing.
    check_timer: bool,
    /// Whether the round in flight left eligible heads behind (one
    /// depending on a member at another partition, or a full round): Alg
    /// 5's flush would have gone on applying them, so the next round
    /// starts as soon as this one ends, ρ or not.
    flush_continues: bool,
}

impl Receiver {
    pub(super) fn new(cfg: &Config, topology: Arc<Topology>, dc: DcId) -> Receiver {
        let m = topology.dcs();
        let s = State {
            site_time: vec![0; m],
            shipped_through: vec![0; m],
            early: vec![BTreeMap::new(); m],
            popped: vec![(0, 0); m],
            rounds: 0,
            epoch: 0,
            in_flight: None,
        };
        Receiver {
            cfg: cfg.clone(),
            topology,
            dc,
            s,
            queues: vec![VecDeque::new(); m],
            reported_stable_us: 0,
            round_sent_us: 0,
            journaled_through: vec![0; m],
            acked_through: vec![0; m],
            ack_timer: false,
            check_timer: false,
            flush_continues: false,
        }
    }

    /// After a restart: the journaled state, and the round in flight sent
    /// again (the partitions apply a round idempotently).
    pub(super) fn on_start(&mut self, env: &mut impl Env) {
        if let Some(meta) = env.store().meta() {
            self.s = postcard::from_bytes(meta).expect("the receiver's own journal decodes");
        }
        // A new epoch, durable before anything this start sends leaves.
        self.s.epoch += 1;
        self.journal(env);
        self.journaled_through.clone_from(&self.s.shipped_through);
        // The queues: every stored update above its origin's SiteTime.
        for stored in env.store().keys_sorted() {
            let k = u16::from_be_bytes([stored[0], stored[1]]) as usize;
            let key = causeway_core::Key::copy_from_slice(&stored[2..]);
            let partition = self.topology.partition_of(&key);
            let pending = |v: &&Version| v.ts > self.s.site_time[k] && (v.ts, partition.0) > self.s.popped[k];
            for v in env.store().versions(&stored).iter().filter(pending) {
                let vts = Vts::from_slice(&v.vts);
                self.queues[k].push_back(OpMeta { key: key.clone(), partition, vts, dep_us: v.dep_us });
            }
        }
        // In shipping order: Eunomia's ⟨ts, partition⟩ (ties between
        // partitions included, or a round in flight would pop other heads
        // than those it sent).
        for (k, q) in self.queues.iter_mut().enumerate() {
            q.make_contiguous().sort_by_key(|u| (u.vts[k], u.partition));
        }
        if let Some(r) = self.s.in_flight.clone() {
            self.round_sent_us = env.now_us();
            self.resend(env, &r);
            env.set_timer(self.cfg.apply_retry_us, Timer::ApplyRetry(r.id).token());
        }
        self.start_round(env);
    }

    /// Journal the state (synced with the turn). Called where the state
    /// must be durable before the turn's output leaves: a shipment queued
    /// (its `Shipped` acknowledgement, and the queued versions collected
    /// below SiteTime) and a start (the epoch). An apply round's
    /// bookkeeping is not journaled on its own: see
    /// [`Receiver::start_round`].
    fn journal(&self, env: &mut impl Env) {
        env.store().set_meta(postcard::to_allocvec(&self.s).expect("encodes"));
    }

    /// Alg 5 line 1, `new_update`, for a whole shipment from DC k's
    /// Eunomia: queued in order, each update once. Shipments of a leader
    /// and of its successor may overlap or arrive out of order (deviation
    /// 7): an update at or below `shipped_through[k]` is a copy, and a
    /// shipment starting above it waits for the gap to be filled.
    pub(super) fn on_ship(&mut self, env: &mut impl Env, from: NodeId, from_us: u64, to_us: u64, ops: Vec<OpMeta>) {
        let k = self.topology.dc_of(from).idx();
        if k == self.dc.idx() || from_us >= to_us {
            return;
        }
        let before = self.s.shipped_through[k];
        let ops_len = ops.len();
        if to_us > self.s.shipped_through[k] {
            if from_us > self.s.shipped_through[k] {
                // Of two shipments from one point, the longer covers the other.
                match self.s.early[k].get(&from_us) {
                    Some((held_to, _)) if *held_to >= to_us => {}
                    _ => {
                        self.s.early[k].insert(from_us, (to_us, ops));
                    }
                }
            } else {
                self.accept(env, k, to_us, ops);
                while let Some(e) = self.s.early[k].first_entry() {
                    if *e.key() > self.s.shipped_through[k] {
                        break;
                    }
                    let (to_us, ops) = e.remove();
                    if to_us > self.s.shipped_through[k] {
                        self.accept(env, k, to_us, ops);
                    }
                }
            }
        }
        self.settle();
        self.report_stable(env);
        // An empty shipment (ephemeral: deviation 11) only moves
        // `shipped_through` and SiteTime on: not journaled, so a restart may
        // resume below it, and not acknowledged, so Eunomia's replicas only
        // ever start a receiver's range at a point it journaled (were they to
        // start above, a restarted receiver would hold every later shipment
        // beyond the gap). Every idle millisecond cost two log syncs here
        // and at Eunomia before.
        if ops_len > 0 {
            self.journal(env);
            self.journaled_through.clone_from(&self.s.shipped_through);
            if self.s.shipped_through[k] > before {
                self.acknowledge(env);
            }
        }
        self.start_round(env);
    }

    /// Deviation 7: tell every replica of each origin what is queued here,
    /// once it is journaled (a turn's output leaves when its records are
    /// durable), so they keep every update until all receivers have it.
    /// At most once per `shipped_ack_interval_us`: the first at once, the
    /// rest when [`Timer::Acks`] fires.
    fn acknowledge(&mut self, env: &mut impl Env) {
        if self.ack_timer {
            return;
        }
        let eunomia = super::eunomia_service(&self.topology);
        let mut sent = false;
        for k in 0..self.journaled_through.len() {
            let through_us = self.journaled_through[k];
            if through_us > self.acked_through[k] {
                self.acked_through[k] = through_us;
                for &n in self.topology.service_nodes(DcId(k as u16), eunomia) {
                    env.send(n, Msg::Shipped { through_us });
                }
                sent = true;
            }
        }
        if sent && self.cfg.shipped_ack_interval_us > 0 {
            self.ack_timer = true;
            env.set_timer(self.cfg.shipped_ack_interval_us, Timer::Acks.token());
        }
    }

    fn accept(&mut self, env: &mut impl Env, k: usize, to_us: u64, ops: Vec<OpMeta>) {
        let mut last = self.s.shipped_through[k];
        let site_time = self.s.site_time.clone();
        for u in ops {
            let ts = u.vts[k];
            if ts <= self.s.shipped_through[k] {
                continue; // shipped before
            }
            assert!(ts <= to_us, "a shipment holds {ts} above its StableTime {to_us}");
            assert!(ts >= last, "a shipment out of timestamp order: {ts} after {last}");
            last = ts;
            let v = Version {
                value: causeway_core::Value::new(),
                ts,
                origin: DcId(k as u16),
                vts: u.vts.to_vec(),
                dep_us: u.dep_us,
                visible: false,
            };
            env.store().insert_collecting(&queue_key(k, &u.key), v, |v| v.ts <= site_time[v.origin.idx()]);
            self.queues[k].push_back(u);
        }
        self.s.shipped_through[k] = to_us;
    }

    /// SiteTime\[k\] of an origin whose queue is empty is what it shipped:
    /// every update from k at or below it has been applied (not in Alg 5,
    /// whose SiteTime moves only with applied updates; sound, and it lets
    /// the least remote SiteTime be reported as this DC's stable time).
    fn settle(&mut self) {
        for k in 0..self.queues.len() {
            if self.queues[k].is_empty() {
                self.s.site_time[k] = self.s.site_time[k].max(self.s.shipped_through[k]);
            }
        }
    }

    /// Alg 5 lines 3–20, `check_pending`/`flush`: a flush starts when
    /// something arrives or a round ends, at most once per ρ (deviation 4),
    /// and goes on round after round while a round leaves eligible heads
    /// behind, as the paper's flush applies them one after another. It scans the
    /// queues from DC 1, takes a head whose dependencies are applied (line
    /// 12), and restarts the scan (line 18). Applies of one round go out
    /// together, one message per partition (deviation 8): a head joins the
    /// round only if it depends on no update of the round at another
    /// partition, so nothing in a round can become visible before what it
    /// depends on.
    fn start_round(&mut self, env: &mut impl Env) {
        if self.check_timer && !self.flush_continues && !self.cfg.mutant_async_apply {
            return; // ρ has not passed since this flush started
        }
        loop {
            if self.s.in_flight.is_some() {
                return;
            }
            let m = self.dc.idx();
            let n = self.queues.len();
            let mut tentative = self.s.site_time.clone();
            let mut taken = vec![0usize; n];
            let mut blocked = vec![false; n];
            let mut members: Vec<(usize, OpMeta)> = Vec::new();
            let mut cut_short = false;
            'scan: loop {
                for k in 0..n {
                    if k == m || blocked[k] {
                        continue;
                    }
                    // An empty queue is skipped (the notes' errata).
                    let Some(u) = self.queues[k].get(taken[k]) else { continue };
                    // Line 12: ∀d ∈ M \ {m, k}: SiteTime_m[d] ≥ u.vts[d].
                    if !(0..n).all(|d| d == m || d == k || tentative[d] >= u.vts[d]) {
                        continue;
                    }
                    if members.len() == MAX_ROUND {
                        cut_short = true;
                        break 'scan;
                    }
                    if members.iter().any(|(o, w)| w.partition != u.partition && u.may_depend_on(k, w, *o)) {
                        blocked[k] = true;
                        cut_short = true;
                        continue;
                    }
                    taken[k] += 1;
                    // Line 16 sets SiteTime[k] to u's timestamp, but two
                    // partitions may stamp the same microsecond and a round
                    // may take one and leave the other (it may depend on
                    // the first): then SiteTime stops just below, so that
                    // "every update of k at or below SiteTime[k] is applied"
                    // stays true for the dependency checks and a restart.
                    // Shipments carry every update up to their StableTime,
                    // so all ties are already queued here.
                    let tie = self.queues[k].get(taken[k]).is_some_and(|next| next.vts[k] == u.vts[k]);
                    tentative[k] = if tie { u.vts[k] - 1 } else { u.vts[k] };
                    members.push((k, u.clone()));
                    continue 'scan; // line 18: restart from DC 1
                }
                break;
            }
            self.flush_continues = cut_short;
            if members.is_empty() {
                return;
            }
            self.s.rounds += 1;
            if self.cfg.check_pending_interval_us > 0 && !self.cfg.mutant_async_apply && !self.check_timer {
                self.check_timer = true;
                env.set_timer(self.cfg.check_pending_interval_us, Timer::CheckPending.token());
            }
            let id = (self.s.epoch << EPOCH_SHIFT) | (self.s.rounds & ((1 << EPOCH_SHIFT) - 1));
            let mut sent: Vec<(NodeId, Vec<ApplyOp>)> = Vec::new();
            for (k, u) in members {
                let to = self.topology.server(self.dc, u.partition).expect("full replication");
                let op = ApplyOp { key: u.key, ts: u.vts[k], origin: DcId(k as u16) };
                match sent.iter_mut().find(|(n, _)| *n == to) {
                    Some((_, ops)) => ops.push(op),
                    None => sent.push((to, vec![op])),
                }
            }
            let round =
                Round { id, waiting: sent.iter().map(|(n, _)| *n).collect(), sent, taken, site_time_after: tentative };
            self.s.in_flight = Some(round.clone());
            if self.cfg.mutant_async_apply {
                // The broken variant: on without waiting for the partitions.
                self.resend(env, &round);
                self.finish_round();
                self.journal(env);
                continue;
            }
            // Not journaled before it leaves (a deviation: Alg 5 of
            // Gunawardhana et al., "Unobtrusive Deferred Update
            // Stabilization for Efficient Geo-Replication", ATC 2017, has
            // no crash recovery at all, §1 and §3.3). With a log sync
            // taking 1 ms, journaling here put the receiver's own sync on
            // every round's critical path, and under cross-partition
            // dependencies (one dependency step per round) the receiver
            // fell ever further behind the DCs' write rate. Safety does not
            // need it: what a round makes visible is durable at the
            // partitions before they acknowledge (their turn's records are
            // synced before `Applied` leaves), and the receiver's state is
            // only ever behind the truth after a crash: a restart resumes
            // from the last state journaled (with a shipment, or a start),
            // a consistent one it really had, whose round in flight it
            // sends again and whose queues it rebuilds from the store, so
            // it applies again what lost rounds applied (idempotent at the
            // partitions, Alg 5's order and line 12 unchanged) and SiteTime
            // never counts an update that is not durably visible. Round ids
            // carry the epoch, so a lost round's late acknowledgement is
            // never taken for a new round's. `Apply` and `Applied` are
            // transient for the same reason (`Msg::transient`).
            self.resend(env, &round);
            self.round_sent_us = env.now_us();
            env.set_timer(self.cfg.apply_retry_us, Timer::ApplyRetry(round.id).token());
            return;
        }
    }

    /// Send a round's applies to the partitions that have not acknowledged.
    fn resend(&self, env: &mut impl Env, r: &Round) {
        for (to, ops) in &r.sent {
            if r.waiting.contains(to) {
                env.send(*to, Msg::Apply { round: r.id, ops: ops.clone() });
            }
        }
    }

    /// Alg 5 lines 15–17: the round's updates are visible; pop them and
    /// advance SiteTime.
    fn finish_round(&mut self) {
        let r = self.s.in_flight.take().expect("a round in flight");
        for (k, &t) in r.taken.iter().enumerate() {
            for _ in 0..t {
                let u = self.queues[k].pop_front().expect("taken from the queue");
                debug_assert!((u.vts[k], u.partition.0) > self.s.popped[k], "popped out of order");
                self.s.popped[k] = (u.vts[k], u.partition.0);
                debug_assert!(
                    r.sent
                        .iter()
                        .flat_map(|(_, ops)| ops)
                        .any(|o| o.key == u.key && o.ts == u.vts[k] && o.origin.idx() == k),
                    "a round popped an update it never applied"
                );
            }
        }
        // Line 16, for the origins the round took from (the others' entries
        // of `site_time_after` are copies that `settle` may have passed).
        for (k, &t) in r.site_time_after.iter().enumerate().filter(|&(k, _)| r.taken[k] > 0) {
            debug_assert!(t >= self.s.site_time[k], "SiteTime went back");
            self.s.site_time[k] = self.s.site_time[k].max(t);
        }
        self.settle();
    }

    /// Measurement: a round's size, how long it was in flight, and how far
    /// behind the origins' clocks its updates are made visible (the
    /// apply rate and lag, `eunomia_round_*` and `eunomia_apply_lag_us`).
    fn observe_round(&self, env: &mut impl Env) {
        let Some(r) = self.s.in_flight.as_ref() else { return };
        let ops: usize = r.sent.iter().map(|(_, ops)| ops.len()).sum();
        env.observe(Observation::Sample { what: "eunomia_round_ops", value: ops as u64 });
        let now = env.now_us();
        env.observe(Observation::Sample { what: "eunomia_round_us", value: now.saturating_sub(self.round_sent_us) });
        if let Some(newest) = r.sent.iter().flat_map(|(_, ops)| ops).map(|o| o.ts).max() {
            env.observe(Observation::Sample { what: "eunomia_apply_lag_us", value: now.saturating_sub(newest) });
        }
    }

    /// Alg 5 line 15, `ok`, from one partition.
    pub(super) fn on_applied(&mut self, env: &mut impl Env, from: NodeId, round: u64) {
        let Some(r) = self.s.in_flight.as_mut() else { return };
        if r.id != round || !r.waiting.remove(&from) {
            return;
        }
        if r.waiting.is_empty() {
            self.observe_round(env);
            self.finish_round();
            self.report_stable(env);
        }
        // Not journaled: see `start_round`. (The mutant journals as the
        // receiver did before, so its baseline does not change.)
        if self.cfg.mutant_async_apply {
            self.journal(env);
        }
        self.start_round(env);
    }

    /// Every remote update stamped at or below the least remote SiteTime
    /// is visible here.
    fn report_stable(&mut self, env: &mut impl Env) {
        let m = self.dc.idx();
        let least = self.s.site_time.iter().enumerate().filter(|&(d, _)| d != m).map(|(_, &t)| t).min().unwrap_or(0);
        if least > self.reported_stable_us {
            self.reported_stable_us = least;
            env.observe(Observation::Stable { stable_us: least });
        }
    }

    pub(super) fn on_timer(&mut self, env: &mut impl Env, timer: Timer) {
        if let Timer::Acks = timer {
            self.ack_timer = false;
            self.acknowledge(env);
            return;
        }
        if let Timer::CheckPending = timer {
            self.check_timer = false;
            self.start_round(env);
            return;
        }
        if let Timer::ApplyRetry(id) = timer
            && let Some(r) = self.s.in_flight.clone()
            && r.id == id
        {
            self.resend(env, &r);
            env.set_timer(self.cfg.apply_retry_us, Timer::ApplyRetry(id).token());
        }
    }

    /// For tests: SiteTime_m.
    pub fn site_time(&self) -> &[u64] {
        &self.s.site_time
    }
}
