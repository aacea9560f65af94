//! The receiver r_m (EunomiaKV's Alg 5, Gunawardhana et al. §4, on a
//! sequencer's numbers): per origin DC k, the updates shipped from k's
//! partitions, queued in sequence order, and SiteTime_m\[k\], the last
//! number of k applied here. Numbers are dense, so the queue of k is the
//! run of consecutive numbers after SiteTime\[k\] that has arrived; a
//! number that arrives ahead of a gap waits (deviation 5). The head of
//! queue k is applied once every other origin's SiteTime covers its vector
//! (line 12), synchronously: the next one waits for the partition's
//! acknowledgement (lines 14–15).

use super::config::Config;
use super::msg::*;
use super::server::{Env, Timer};
use causeway_core::{DcId, NodeId, Topology};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// A number shipped from an origin DC: an update, or a skip (a number
/// that carries none, deviation 7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Queued {
    Update(OpMeta),
    Skip(u64),
}

impl Queued {
    fn seq(&self, origin: usize) -> u64 {
        match self {
            Queued::Update(u) => u.vts[origin],
            Queued::Skip(s) => *s,
        }
    }
}

/// An apply round in flight: ops sent to partitions, not all acknowledged.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Round {
    id: u64,
    /// Per partition server, the ops sent to it, in order.
    sent: Vec<(NodeId, Vec<ApplyOp>)>,
    /// The partitions that have not acknowledged yet.
    waiting: BTreeSet<NodeId>,
    /// How many heads of each queue the round takes (skips included).
    taken: Vec<usize>,
    /// SiteTime_m once the round is done.
    site_time_after: Vec<u64>,
}

/// What a receiver journals as metadata. The queued updates themselves are
/// versions of its store ([`queue_key`]), so a turn journals only what it
/// changed, not the whole queue.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct State {
    /// SiteTime_m\[k\]: every number of DC k up to it has been applied here.
    site_time: Vec<u64>,
    rounds: u64,
    in_flight: Option<Round>,
}

/// The most updates one apply round takes (its journal record and
/// messages stay small).
const MAX_ROUND: usize = 256;

/// Where a queued number from DC `origin` is stored: a chain per origin
/// and key (skips: one chain per origin), its versions ordered by sequence
/// number (their `lww` field holds it: nothing here is read by clients),
/// so an entry not yet applied is never below one applied (which
/// collection drops).
fn queue_key(origin: usize, skip: bool, key: &[u8]) -> Vec<u8> {
    let mut k = (origin as u16).to_be_bytes().to_vec();
    k.push(skip as u8);
    k.extend_from_slice(key);
    k
}

pub struct Receiver {
    cfg: Config,
    topology: Arc<Topology>,
    dc: DcId,
    s: State,
    /// Per origin k, the last number such that every number up to it has
    /// arrived (volatile: rebuilt from the store after a restart).
    received_through: Vec<u64>,
    /// Queue_m\[k\]: numbers from DC k above SiteTime\[k\] and up to
    /// `received_through[k]`, in order.
    queues: Vec<VecDeque<Queued>>,
    /// Numbers from DC k that arrived ahead of a gap.
    early: Vec<BTreeMap<u64, Queued>>,
}

impl Receiver {
    pub(super) fn new(cfg: &Config, topology: Arc<Topology>, dc: DcId) -> Receiver {
        let m = topology.dcs();
        let s = State { site_time: vec![0; m], rounds: 0, in_flight: None };
        Receiver {
            cfg: cfg.clone(),
            topology,
            dc,
            s,
            received_through: vec![0; m],
            queues: vec![VecDeque::new(); m],
            early: vec![BTreeMap::new(); m],
        }
    }

    /// After a restart: the journaled state, the queues rebuilt from the
    /// store, and the round in flight sent again (the partitions apply a
    /// round idempotently).
    pub(super) fn on_start(&mut self, env: &mut impl Env) {
        if let Some(meta) = env.store().meta() {
            self.s = postcard::from_bytes(meta).expect("the receiver's own journal decodes");
        }
        self.received_through = self.s.site_time.clone();
        for stored in env.store().keys_sorted() {
            let k = u16::from_be_bytes([stored[0], stored[1]]) as usize;
            let skip = stored[2] == 1;
            let key = causeway_core::Key::copy_from_slice(&stored[3..]);
            for v in env.store().versions(&stored).iter().filter(|v| v.seq > self.s.site_time[k]) {
                let q = if skip {
                    Queued::Skip(v.seq)
                } else {
                    let partition = self.topology.partition_of(&key);
                    Queued::Update(OpMeta { key: key.clone(), partition, vts: v.vts.clone(), dep: v.dep })
                };
                self.early[k].insert(v.seq, q);
            }
        }
        for k in 0..self.queues.len() {
            self.drain_early(k);
        }
        if let Some(r) = self.s.in_flight.clone() {
            self.resend(env, &r);
            env.set_timer(self.cfg.apply_retry_us, Timer::ApplyRetry(r.id).token());
        }
        env.set_timer(self.cfg.check_pending_interval_us, Timer::CheckPending.token());
    }

    fn journal(&self, env: &mut impl Env) {
        env.store().set_meta(postcard::to_allocvec(&self.s).expect("encodes"));
    }

    /// Alg 5 line 1, `new_update`: number `seq` from DC k, stored, queued
    /// if it follows the numbers already here, held if it is ahead of a
    /// gap. Each number is shipped once over reliable links; a copy would
    /// be dropped.
    pub(super) fn on_number(&mut self, env: &mut impl Env, from: NodeId, q: Queued) {
        let k = self.topology.dc_of(from).idx();
        if k == self.dc.idx() {
            return;
        }
        if let Queued::Update(u) = &q
            && (u.vts.len() != self.queues.len() || self.topology.partition_of(&u.key) != u.partition)
        {
            return; // malformed: a peer's bug
        }
        let seq = q.seq(k);
        if seq <= self.received_through[k] || self.early[k].contains_key(&seq) {
            return;
        }
        let (key, vts, dep, skip) = match &q {
            Queued::Update(u) => (u.key.to_vec(), u.vts.clone(), u.dep, false),
            Queued::Skip(_) => (Vec::new(), Vec::new(), 0, true),
        };
        let v = Version {
            value: causeway_core::Value::new(),
            lww: seq,
            origin: DcId(k as u16),
            seq,
            vts,
            dep,
            at_us: 0,
            visible: false,
        };
        let site_time = self.s.site_time[k];
        env.store().insert_collecting(&queue_key(k, skip, &key), v, |v| v.seq <= site_time);
        self.early[k].insert(seq, q);
        self.drain_early(k);
    }

    /// Move the numbers that now follow `received_through[k]` into queue k.
    fn drain_early(&mut self, k: usize) {
        while let Some(e) = self.early[k].first_entry() {
            if *e.key() != self.received_through[k] + 1 {
                break;
            }
            self.received_through[k] += 1;
            self.queues[k].push_back(e.remove());
        }
    }

    /// Alg 5 lines 3–20, `check_pending`/`flush`, run every ρ and whenever
    /// a round ends (deviation 6). It scans the queues from DC
    /// 1, takes a head whose dependencies are applied (line 12), and
    /// restarts the scan (line 18). Applies of one round go out together,
    /// one message per partition: a head joins the round only if it
    /// depends on no update of the round at another partition. A skip at
    /// the head is taken at once (nothing depends on it).
    fn start_round(&mut self, env: &mut impl Env) {
        if self.s.in_flight.is_some() {
            return;
        }
        let m = self.dc.idx();
        let n = self.queues.len();
        let mut tentative = self.s.site_time.clone();
        let mut taken = vec![0usize; n];
        let mut blocked = vec![false; n];
        let mut members: Vec<(usize, OpMeta)> = Vec::new();
        'scan: loop {
            for k in 0..n {
                if k == m || blocked[k] {
                    continue;
                }
                // An empty queue is skipped (its `head` is undefined).
                let Some(q) = self.queues[k].get(taken[k]) else { continue };
                let u = match q {
                    Queued::Skip(seq) => {
                        tentative[k] = *seq;
                        taken[k] += 1;
                        continue 'scan;
                    }
                    Queued::Update(u) => u,
                };
                // Line 12: ∀d ∈ M \ {m, k}: SiteTime_m[d] ≥ u.vts[d].
                if !(0..n).all(|d| d == m || d == k || tentative[d] >= u.vts[d]) {
                    continue;
                }
                if members.len() == MAX_ROUND {
                    break 'scan;
                }
                if members.iter().any(|(o, w)| w.partition != u.partition && u.may_depend_on(k, w, *o)) {
                    blocked[k] = true;
                    continue;
                }
                tentative[k] = u.vts[k];
                taken[k] += 1;
                members.push((k, u.clone()));
                continue 'scan; // line 18: restart from DC 1
            }
            break;
        }
        if taken.iter().all(|&t| t == 0) {
            return;
        }
        self.s.rounds += 1;
        let mut sent: Vec<(NodeId, Vec<ApplyOp>)> = Vec::new();
        for (k, u) in members {
            let to = self.topology.server(self.dc, u.partition).expect("full replication");
            let seq = u.vts[k];
            let op = ApplyOp { key: u.key, lww: u.vts.iter().sum(), origin: DcId(k as u16), seq };
            match sent.iter_mut().find(|(n, _)| *n == to) {
                Some((_, ops)) => ops.push(op),
                None => sent.push((to, vec![op])),
            }
        }
        let round = Round {
            id: self.s.rounds,
            waiting: sent.iter().map(|(n, _)| *n).collect(),
            sent,
            taken,
            site_time_after: tentative,
        };
        self.s.in_flight = Some(round.clone());
        if round.waiting.is_empty() {
            // Only skips: done at once.
            self.finish_round();
            self.journal(env);
            return self.start_round(env);
        }
        self.journal(env);
        self.resend(env, &round);
        env.set_timer(self.cfg.apply_retry_us, Timer::ApplyRetry(round.id).token());
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
                let q = self.queues[k].pop_front().expect("taken from the queue");
                let seq = q.seq(k);
                assert_eq!(seq, self.s.site_time[k] + 1, "applied number {seq} of DC {k} out of sequence");
                self.s.site_time[k] = seq;
            }
            if t > 0 {
                assert_eq!(self.s.site_time[k], r.site_time_after[k], "a round's SiteTime[{k}] went astray");
            }
        }
    }

    /// Alg 5 line 15, `ok`, from one partition.
    pub(super) fn on_applied(&mut self, env: &mut impl Env, from: NodeId, round: u64) {
        let Some(r) = self.s.in_flight.as_mut() else { return };
        if r.id != round || !r.waiting.remove(&from) {
            return;
        }
        if r.waiting.is_empty() {
            self.finish_round();
        }
        self.journal(env);
        self.start_round(env);
    }

    pub(super) fn on_timer(&mut self, env: &mut impl Env, timer: Timer) {
        match timer {
            Timer::CheckPending => {
                self.start_round(env);
                env.set_timer(self.cfg.check_pending_interval_us, Timer::CheckPending.token());
            }
            Timer::ApplyRetry(id) => {
                if let Some(r) = self.s.in_flight.clone()
                    && r.id == id
                {
                    self.resend(env, &r);
                    env.set_timer(self.cfg.apply_retry_us, Timer::ApplyRetry(id).token());
                }
            }
            Timer::Straggle => {} // a partition's
        }
    }

    /// For tests: SiteTime_m.
    pub fn site_time(&self) -> &[u64] {
        &self.s.site_time
    }
}
