//! Eunomia, the per-DC stabilizer (Alg 3), replicated as §3.3 and Alg 4
//! describe: r replicas per DC each collect every partition's reports;
//! the leader computes StableTime = min(PartitionTime), ships every
//! update at or below it in timestamp order to the other DCs' receivers,
//! and tells the other replicas. Every replica keeps each update until
//! every receiver has acknowledged it (deviation 7), so a new leader can
//! ship again what a dead leader's last shipment carried.

use super::config::Config;
use super::msg::*;
use super::server::{Env, Timer};
use causeway_core::{DcId, NodeId, Observation, PartitionId, Topology};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;

/// What a replica journals as metadata (deviation 6), when it ships and
/// when it lets go of what every receiver has. Ops_f itself is in the
/// replica's store, one version per report ([`report_key`]), so a report
/// journals only itself: PartitionTime_f as of the last report is the
/// newest stored report's timestamp, or later (a report's own time, like
/// a heartbeat's, is not journaled).
#[derive(Default, Serialize, Deserialize)]
struct Durable {
    partition_time_us: Vec<u64>,
    stable_us: u64,
    floor_us: u64,
}

/// Where the reports of `partition` are stored: one chain per partition,
/// one version per report, ordered by the report's last timestamp, its
/// value the report's updates that joined Ops_f ([`encode_report`]). A
/// partition's reports arrive in timestamp order (Property 2), so a report
/// not yet wholly shipped is never below one that is (which collection
/// drops). One record per report, not one per update: a report of a
/// hundred updates was a hundred store keys (each a hash-table entry that
/// stayed until its key was written again) and a hundred log records.
fn report_key(partition: PartitionId) -> [u8; 4] {
    partition.0.to_be_bytes()
}

/// A report's updates as its stored version's value ([`encode_ops`]),
/// encoded in `scratch` (kept for its capacity: a fresh buffer grew by
/// doubling, copying as it filled) and copied out at its size.
fn encode_report(ops: &[OpMeta], scratch: &mut Vec<u8>) -> causeway_core::Value {
    scratch.clear();
    encode_ops(ops, scratch);
    causeway_core::Value::copy_from_slice(scratch)
}

fn decode_report(value: &[u8]) -> Vec<OpMeta> {
    decode_ops(value, 0).expect("a replica's own stored report decodes")
}

/// One partition's updates held in memory (Ops_f's share of it): as its
/// reports brought them, oldest first, none empty, so in timestamp order
/// (Property 2); and their timestamps, one per update in the same order,
/// where shipping and pruning find their place without reading the
/// updates themselves.
#[derive(Default)]
struct Held {
    reports: VecDeque<VecDeque<OpMeta>>,
    ts: VecDeque<u64>,
}

impl Held {
    /// A report's updates (timestamps above those held), at the back.
    fn push_back(&mut self, report: VecDeque<OpMeta>, m: usize) {
        if !report.is_empty() {
            self.ts.extend(report.iter().map(|u| u.vts[m]));
            self.reports.push_back(report);
        }
    }

    /// Updates below those held, at the front.
    fn push_front(&mut self, report: VecDeque<OpMeta>, m: usize) {
        if !report.is_empty() {
            for u in report.iter().rev() {
                self.ts.push_front(u.vts[m]);
            }
            self.reports.push_front(report);
        }
    }

    fn len(&self) -> usize {
        self.ts.len()
    }

    /// How many of the updates have a timestamp at or below `us`.
    fn upto(&self, us: u64) -> usize {
        self.ts.partition_point(|&t| t <= us)
    }

    /// The oldest update and its timestamp.
    fn pop_front(&mut self) -> Option<(u64, OpMeta)> {
        let ts = self.ts.pop_front()?;
        let report = self.reports.front_mut().expect("a timestamp per update");
        let u = report.pop_front().expect("none empty");
        if report.is_empty() {
            self.reports.pop_front();
        }
        Some((ts, u))
    }

    /// Drop the `n` oldest updates.
    fn drop_front(&mut self, mut n: usize) {
        self.ts.drain(..n);
        while n > 0 {
            let report = self.reports.front_mut().expect("a timestamp per update");
            if report.len() > n {
                report.drain(..n);
                return;
            }
            n -= report.len();
            self.reports.pop_front();
        }
    }
}

pub struct EunomiaReplica {
    cfg: Config,
    dc: DcId,
    /// This replica's index among its DC's replicas (e_f).
    index: usize,
    /// Replicas_f: every replica of this DC, this one included.
    replicas: Vec<NodeId>,
    /// The receivers of the other DCs, where stable updates go.
    receivers: Vec<NodeId>,
    /// PartitionTime_f (Alg 4): per partition of this DC, the latest
    /// timestamp received from it (update or heartbeat).
    partition_time_us: Vec<u64>,
    /// Ops_f as this replica holds it in memory: the updates above
    /// `held_from_us`, per partition of this DC, in timestamp order.
    /// Shipping merges the partitions' fronts into timestamp order, ties
    /// between partitions broken by partition id, the order the paper's
    /// red-black tree (§6) keeps; a report joins at its partition's back as
    /// it came, and its updates leave from the front, with no tree to
    /// rebalance.
    ops: Vec<Held>,
    /// [`EunomiaReplica::take_stable`]'s merge order and the buffer
    /// reports and shipments are encoded in, kept for their capacity.
    order: Vec<u128>,
    scratch: Vec<u8>,
    /// The updates of Ops_f at or below this (and above `floor_us`) have
    /// been shipped to every receiver but not yet acknowledged by all:
    /// they are in the store only ([`report_key`]), and the leader moved
    /// them into its shipments rather than copying them. Should this
    /// replica have to ship them again (it stops leading, and may lead
    /// again from the receivers' acknowledgements), it reads them back
    /// from the store ([`EunomiaReplica::hold_from`]).
    held_from_us: u64,
    /// The StableTime up to which every update of this DC has been
    /// shipped, by this replica or by the leader that said so.
    stable_us: u64,
    /// Per receiver (as `receivers`), the StableTime it acknowledged:
    /// it has queued every update of this DC at or below it.
    acked_us: Vec<u64>,
    /// Per receiver, the StableTime this replica last shipped it while
    /// leading; a replica not leading keeps it at `acked_us`, so a new
    /// leader's first shipment starts where each receiver stands.
    sent_us: Vec<u64>,
    /// Per receiver, the StableTime of the last shipment that carried
    /// updates to it (or, while not leading and after a start, its
    /// acknowledgement): every shipment declares it as its lower bound.
    /// Between it and `sent_us` only empty shipments went out, which are
    /// ephemeral (deviation 11), so a lost one leaves no gap.
    seq_us: Vec<u64>,
    /// The least of `acked_us`, as last pruned to: Ops_f holds every
    /// update above it (journaled; a restart loads the stored ones above it).
    floor_us: u64,
    /// The failure detector (§3.3's Ω): this replica's tick count, and
    /// the tick at which each replica was last heard from.
    tick: u64,
    heard_at_tick: Vec<u64>,
}

impl EunomiaReplica {
    pub(super) fn new(cfg: &Config, topology: Arc<Topology>, dc: DcId, index: usize) -> EunomiaReplica {
        let replicas = topology.service_nodes(dc, super::eunomia_service(&topology)).to_vec();
        let receiver = super::receiver_service(&topology);
        let receivers =
            topology.dc_ids().filter(|&d| d != dc).map(|d| topology.service_nodes(d, receiver)[0]).collect();
        let partitions = topology.partitions();
        let others = topology.dcs() - 1;
        EunomiaReplica {
            cfg: cfg.clone(),
            dc,
            index,
            heard_at_tick: vec![0; replicas.len()],
            replicas,
            receivers,
            partition_time_us: vec![0; partitions],
            ops: (0..partitions).map(|_| Held::default()).collect(),
            held_from_us: 0,
            order: Vec::new(),
            scratch: Vec::new(),
            stable_us: 0,
            acked_us: vec![0; others],
            sent_us: vec![0; others],
            seq_us: vec![0; others],
            floor_us: 0,
            tick: 0,
        }
    }

    pub(super) fn on_start(&mut self, env: &mut impl Env) {
        if let Some(meta) = env.store().meta() {
            let d: Durable = postcard::from_bytes(meta).expect("a replica's own journal decodes");
            self.partition_time_us = d.partition_time_us;
            self.stable_us = d.stable_us;
            self.floor_us = d.floor_us;
            self.acked_us.fill(d.floor_us);
            self.sent_us.fill(d.floor_us);
            self.seq_us.fill(d.floor_us);
        }
        self.held_from_us = self.floor_us;
        let m = self.dc.idx();
        let floor_us = self.floor_us;
        for (p, held) in self.ops.iter_mut().enumerate() {
            let stored = env.store().versions(&report_key(PartitionId(p as u32)));
            if let Some(newest) = stored.last() {
                self.partition_time_us[p] = self.partition_time_us[p].max(newest.ts);
            }
            for v in stored.iter().filter(|v| v.ts > floor_us) {
                held.push_back(decode_report(&v.value).into_iter().filter(|u| u.vts[m] > floor_us).collect(), m);
            }
        }
        env.set_timer(self.cfg.process_stable_interval_us, Timer::ProcessStable.token());
        env.set_timer(self.cfg.fd_interval_us, Timer::Fd.token());
    }

    /// Journal the replica's state. `sync`: the turn sends something that
    /// depends on it. Otherwise a crash that loses it loses the turn's
    /// delivery marks with it, and the senders resend.
    fn journal(&self, env: &mut impl Env, sync: bool) {
        let d = Durable {
            partition_time_us: self.partition_time_us.clone(),
            stable_us: self.stable_us,
            floor_us: self.floor_us,
        };
        let bytes = postcard::to_allocvec(&d).expect("encodes");
        if sync {
            env.store().set_meta(bytes);
        } else {
            env.store().set_meta_unsynced(bytes);
        }
    }

    /// The leader (§3.3): the lowest-indexed replica not suspected. Not
    /// consensus: two replicas may both lead for a while, which only
    /// ships some updates twice (receivers drop the copies).
    pub(super) fn leader(&self) -> usize {
        (0..self.replicas.len())
            .find(|&i| i == self.index || self.tick.saturating_sub(self.heard_at_tick[i]) <= self.cfg.fd_timeout_ticks)
            .expect("this replica is a candidate")
    }

    /// Alg 4 lines 1–5, `new_batch` (Alg 3 `add_op` and `heartbeat` for one
    /// replica): each update above PartitionTime_f\[p_n\] joins Ops_f.
    /// Deviations: an update at or below `floor_us` is queued at every
    /// receiver and is dropped; there is no `ack` (deviation 5).
    pub(super) fn on_report(&mut self, env: &mut impl Env, partition: PartitionId, ops: Vec<OpMeta>, time_us: u64) {
        let p = partition.idx();
        if p >= self.partition_time_us.len() {
            return; // not a partition of this topology: a peer's bug
        }
        let m = self.dc.idx();
        let (floor_us, mut last_us) = (self.floor_us, self.partition_time_us[p]);
        let mut ops = ops;
        ops.retain(|u| {
            let ts = u.vts[m];
            // Property 2 over reliable FIFO channels: a partition's reports
            // strictly increase (Alg 4 tolerates duplicates; none come).
            debug_assert!(ts > last_us, "Property 2 broken by partition {p}");
            if ts <= last_us {
                return false;
            }
            last_us = ts;
            ts > floor_us
        });
        self.partition_time_us[p] = last_us;
        if let Some(newest) = ops.last() {
            let v = Version {
                value: encode_report(&ops, &mut self.scratch),
                ts: newest.vts[m],
                origin: self.dc,
                vts: Vec::new(),
                dep_us: 0,
                visible: false,
            };
            // The partition's reports wholly at or below the floor are
            // queued at every receiver: collected (all but the newest).
            env.store().insert_collecting(&report_key(partition), v, |v| v.ts <= floor_us);
            self.ops[p].push_back(ops.into(), m);
        }
        debug_assert!(time_us >= self.partition_time_us[p], "a report's time below its updates");
        self.partition_time_us[p] = self.partition_time_us[p].max(time_us);
    }

    /// Alg 3 `heartbeat` (Alg 2 line 12): PartitionTime_f\[p_n\] moves on
    /// with no update. Not journaled: a restarted replica with an older
    /// PartitionTime computes a lower StableTime, never a higher one, until
    /// the next heartbeat.
    pub(super) fn on_heartbeat(&mut self, partition: PartitionId, time_us: u64) {
        if let Some(t) = self.partition_time_us.get_mut(partition.idx()) {
            *t = (*t).max(time_us);
        }
    }

    /// Alg 4 lines 6–12, `process_stable`, every θ: the leader ships every
    /// update with ts ≤ StableTime = min(PartitionTime_f), in timestamp
    /// order, to every other DC, and tells the other replicas. Each
    /// receiver gets what lies above what it was last sent: a new leader
    /// starts from each receiver's acknowledgement (deviation 7). The bound
    /// is this replica's own StableTime, never one learned from a former
    /// leader: the reports below that one may still be on their way here.
    fn process_stable(&mut self, env: &mut impl Env) {
        if self.leader() != self.index {
            self.sent_us.clone_from(&self.acked_us);
            self.seq_us.clone_from(&self.acked_us);
            let from_us = self.sent_us.iter().copied().min().unwrap_or(self.floor_us);
            self.hold_from(env, from_us);
            return;
        }
        let stable_time = self.partition_time_us.iter().copied().min().unwrap_or(0);
        if self.receivers.is_empty() {
            // A single DC: nobody to ship to, and nothing to keep.
            self.prune(env, stable_time);
            return;
        }
        if self.sent_us.iter().all(|&s| s >= stable_time) {
            return;
        }
        let from_us = self.sent_us.iter().copied().min().expect("a receiver");
        self.hold_from(env, from_us);
        // find_stable (Alg 3 line 9): every update held in memory up to
        // StableTime, out of Ops_f's memory (the store keeps them until
        // every receiver has them), encoded once. Each receiver gets those
        // above what it was last sent: the same bytes from that point on.
        let m = self.dc.idx();
        let ops = self.take_stable(stable_time);
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        let mut starts = Vec::with_capacity(ops.len());
        for u in &ops {
            starts.push(buf.len());
            encode_ops([u], &mut buf);
        }
        let bytes = bytes::Bytes::copy_from_slice(&buf);
        self.scratch = buf;
        let mut shipped = 0;
        for r in 0..self.receivers.len() {
            if self.sent_us[r] >= stable_time {
                continue;
            }
            let i = ops.partition_point(|u| u.vts[m] <= self.sent_us[r]);
            let key_bytes = ops[i..].iter().map(|u| u.key.len()).sum();
            let at = starts.get(i).copied().unwrap_or(bytes.len());
            let to_r = Shipment::encoded(ops.len() - i, key_bytes, bytes.slice(at..));
            shipped = shipped.max(to_r.len());
            // Deviation 11: the range starts where the last shipment with
            // updates ended; only empty ones went out since (none of their
            // range holds an update), and an empty one is ephemeral.
            let from_us = self.seq_us[r];
            if !to_r.is_empty() {
                self.seq_us[r] = stable_time;
            }
            self.sent_us[r] = stable_time;
            env.send(self.receivers[r], Msg::Ship { from_us, to_us: stable_time, ops: to_r });
        }
        self.stable_us = self.stable_us.max(stable_time);
        // An idle DC's shipments are all empty: they journal nothing (a
        // restart computes a StableTime no higher than the one they
        // announced, and ships from the receivers' acknowledgements).
        if shipped > 0 {
            self.journal(env, true);
        }
        // StableTime's lag behind the clock is this node's `stable lag` in
        // `causeway status` and its metrics.
        env.observe(Observation::Stable { stable_us: stable_time });
        env.observe(Observation::Sample { what: "eunomia_ship_ops", value: shipped as u64 });
        // The updates this DC's service ordered in this round (each is
        // shipped to every receiver; counted once): the capacity
        // experiment's count (§7.1, Fig 2), the same name as the sequencer's.
        env.observe(Observation::Sample { what: "service_ops", value: shipped as u64 });
        self.beat(env);
    }

    /// A receiver's acknowledgement (deviation 7): it has queued every
    /// update of this DC up to `through_us`. What every receiver has is
    /// dropped from Ops_f.
    pub(super) fn on_shipped(&mut self, env: &mut impl Env, from: NodeId, through_us: u64) {
        let Some(r) = self.receivers.iter().position(|&n| n == from) else { return };
        self.acked_us[r] = self.acked_us[r].max(through_us);
        let floor_us = self.acked_us.iter().copied().min().unwrap_or(through_us);
        self.prune(env, floor_us);
    }

    /// Every update held in memory (those above `held_from_us`) at or below
    /// `to_us`, taken out of the queues in timestamp order, ties broken by
    /// partition id: each partition's run, merged by sorting their
    /// ⟨timestamp, partition⟩ pairs, then moved from the partitions' fronts
    /// in that order (a partition's updates keep their order in the merge).
    fn take_stable(&mut self, to_us: u64) -> Vec<OpMeta> {
        let (m, from_us) = (self.dc.idx(), self.held_from_us);
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        for (p, held) in self.ops.iter().enumerate() {
            let n = held.upto(to_us);
            order.extend(held.ts.range(..n).map(|&ts| (ts as u128) << 32 | p as u128));
        }
        // Sorted runs, one per partition: the sort merges them.
        order.sort();
        let mut last_us = from_us;
        let mut ops = Vec::with_capacity(order.len());
        for &k in &order {
            let (ts, u) = self.ops[k as u32 as usize].pop_front().expect("counted above");
            debug_assert_eq!(ts, u.vts[m]);
            // Never above StableTime, in non-decreasing timestamp order
            // (§3.2's correctness).
            assert!(ts > from_us && ts <= to_us, "shipping {ts} outside ({from_us}, {to_us}]");
            assert!(ts >= last_us, "shipping {ts} after {last_us}");
            last_us = ts;
            ops.push(u);
        }
        self.order = order;
        self.held_from_us = self.held_from_us.max(to_us);
        ops
    }

    /// Hold in memory again every update of Ops_f above `from_us` (not
    /// below the floor): those shipped and let go of are read back from
    /// the replica's stored reports, which keep every update above the
    /// floor.
    fn hold_from(&mut self, env: &mut impl Env, from_us: u64) {
        let from_us = from_us.max(self.floor_us);
        if from_us >= self.held_from_us {
            return;
        }
        let (m, upto_us) = (self.dc.idx(), self.held_from_us);
        for (p, held) in self.ops.iter_mut().enumerate() {
            let mut back = VecDeque::new();
            for v in env.store().versions(&report_key(PartitionId(p as u32))).iter().filter(|v| v.ts > from_us) {
                back.extend(decode_report(&v.value).into_iter().filter(|u| u.vts[m] > from_us && u.vts[m] <= upto_us));
                if v.ts > upto_us {
                    break; // the later reports are all above what was let go of
                }
            }
            held.push_front(back, m);
        }
        self.held_from_us = from_us;
    }

    /// Drop from Ops_f every update at or below `floor_us`, and journal
    /// the new floor.
    fn prune(&mut self, env: &mut impl Env, floor_us: u64) {
        if floor_us > self.floor_us {
            self.floor_us = floor_us;
            self.held_from_us = self.held_from_us.max(floor_us);
            for held in &mut self.ops {
                held.drop_front(held.upto(floor_us));
            }
            self.journal(env, false);
        }
    }

    /// For tests: the updates of Ops_f held in memory (those shipped to
    /// every receiver and not yet acknowledged by all are in the store only).
    pub fn held_ops(&self) -> usize {
        self.ops.iter().map(Held::len).sum()
    }

    /// Alg 4 line 12 and the failure detector's heartbeat, in one message.
    fn beat(&self, env: &mut impl Env) {
        for (i, &n) in self.replicas.iter().enumerate() {
            if i != self.index {
                env.send(n, Msg::ReplicaBeat { stable_us: self.stable_us });
            }
        }
    }

    /// Alg 4 lines 13–15, `stable`: learn the leader's StableTime. Not
    /// a reason to drop anything (deviation 7): a shipment the leader
    /// released may never arrive if it dies, and a receiver's
    /// acknowledgement, not the leader's word, says an update is safe.
    pub(super) fn on_beat(&mut self, from: NodeId, stable_us: u64) {
        if let Some(i) = self.replicas.iter().position(|&n| n == from) {
            self.heard_at_tick[i] = self.tick;
        }
        self.stable_us = self.stable_us.max(stable_us);
    }

    pub(super) fn on_timer(&mut self, env: &mut impl Env, timer: Timer) {
        match timer {
            Timer::ProcessStable => {
                self.process_stable(env);
                env.set_timer(self.cfg.process_stable_interval_us, Timer::ProcessStable.token());
            }
            Timer::Fd => {
                self.tick += 1;
                self.beat(env);
                env.set_timer(self.cfg.fd_interval_us, Timer::Fd.token());
            }
            _ => {}
        }
    }

    /// For tests: the StableTime shipped or learned.
    pub fn stable_us(&self) -> u64 {
        self.stable_us
    }
}
