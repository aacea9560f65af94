//! Alg 2, a partition p_n^m: it timestamps updates with its hybrid clock,
//! applies and acknowledges them at once, ships their payload to its
//! siblings in the other DCs (§5), reports their metadata to its DC's
//! Eunomia replicas in batches (§5, Alg 4), and makes remote updates
//! visible when the receiver says so (Alg 5 line 14) and their payload is
//! here.

use super::config::Config;
use super::msg::*;
use super::server::{Env, Timer};
use causeway_core::{ClientId, DcId, Key, NodeId, Observation, PartitionId, Topology, Value, Versioned};
use std::sync::Arc;

pub struct Partition {
    cfg: Config,
    topology: Arc<Topology>,
    dc: DcId,
    partition: PartitionId,
    /// MaxTs_n (Alg 2 line 5): the logical part of the hybrid clock, the
    /// largest timestamp given to an update or announced in a heartbeat.
    max_ts_us: u64,
    /// The journaled bound on MaxTs_n: no timestamp above it was given or
    /// announced, and a restarted partition resumes from it. A heartbeat
    /// that passes it journals a new one `clock_lease_us` ahead, so an idle
    /// partition writes its log a few times a second, not every Δ.
    lease_us: u64,
    /// This partition's servers in the other DCs.
    siblings: Vec<NodeId>,
    /// Every Eunomia replica of this DC (§3.3: partitions send to all).
    eunomia: Vec<NodeId>,
    /// Metadata of updates not yet reported to Eunomia, in timestamp order.
    unreported: Vec<OpMeta>,
    /// The largest timestamp reported to Eunomia, update or heartbeat.
    /// Journaled with `lease_us`, and by every report that carries
    /// updates (a heartbeat's need not be: no update lies between); after a
    /// restart every local version
    /// above it is reported again.
    reported_us: u64,
    /// Whether a report left since the previous tick.
    reported_since_tick: bool,
    /// How long no report has left, counted in ticks: a heartbeat is due
    /// once it reaches Δ.
    quiet_us: u64,
    /// Apply rounds not yet acknowledged, oldest first.
    awaiting: crate::services::apply_rounds::ApplyRounds<ApplyOp>,
}

impl Partition {
    pub(super) fn new(cfg: &Config, topology: Arc<Topology>, dc: DcId, partition: PartitionId) -> Partition {
        let siblings = crate::kit::node::equivalents_elsewhere(&topology, partition, dc);
        let eunomia = topology.service_nodes(dc, super::eunomia_service(&topology)).to_vec();
        let mut cfg = cfg.clone();
        // A straggler (§7.2.3, Fig 7) reports and heartbeats only this often.
        if cfg.straggler_partition == Some(partition.0) && cfg.straggler_dc == dc.0 {
            cfg.batch_interval_us = cfg.straggler_interval_us;
            cfg.heartbeat_interval_us = cfg.straggler_interval_us;
        }
        Partition {
            cfg,
            topology,
            dc,
            partition,
            max_ts_us: 0,
            lease_us: 0,
            siblings,
            eunomia,
            unreported: Vec::new(),
            reported_us: 0,
            reported_since_tick: false,
            quiet_us: 0,
            awaiting: Default::default(),
        }
    }

    fn m(&self) -> usize {
        self.topology.dcs()
    }

    /// Recovery (not in the paper, whose partitions never fail): the clock
    /// resumes above every timestamp given or announced, and every local
    /// update above the last report is reported again.
    pub(super) fn on_start(&mut self, env: &mut impl Env) {
        if let Some(meta) = env.store().meta() {
            let word = |i: usize| u64::from_le_bytes(meta[8 * i..8 * i + 8].try_into().expect("8 bytes"));
            (self.lease_us, self.reported_us) = (word(0), word(1));
            self.max_ts_us = self.lease_us;
        }
        let mut mine = Vec::new();
        for key in env.store().keys_sorted() {
            for v in env.store().versions(&key).iter().filter(|v| v.origin == self.dc) {
                self.max_ts_us = self.max_ts_us.max(v.ts);
                if v.ts > self.reported_us {
                    let vts = Vts::from_slice(&v.vts);
                    mine.push(OpMeta { key: key.clone(), partition: self.partition, vts, dep_us: v.dep_us });
                }
            }
        }
        let m = self.dc.idx();
        mine.sort_by_key(|o| o.vts[m]);
        self.unreported = mine;
        env.set_timer(self.tick_us(), Timer::Tick.token());
    }

    /// One timer serves the batch and the heartbeat: every batch interval
    /// (every Δ when each update reports at once), so that a partition
    /// wakes once per period, not twice.
    fn tick_us(&self) -> u64 {
        match self.cfg.batch_interval_us {
            0 => self.cfg.heartbeat_interval_us,
            b => b.min(self.cfg.heartbeat_interval_us),
        }
    }

    /// Journal the lease and the last report, renewing the lease if MaxTs_n
    /// has passed it (updates raise MaxTs_n without renewing: a restart
    /// finds their timestamps in the store).
    fn journal(&mut self, env: &mut impl Env) {
        if self.max_ts_us > self.lease_us {
            self.lease_us = self.max_ts_us + self.cfg.clock_lease_us;
        }
        let mut meta = self.lease_us.to_le_bytes().to_vec();
        meta.extend_from_slice(&self.reported_us.to_le_bytes());
        env.store().set_meta(meta);
    }

    /// Store a version, dropping the key's versions below the newest one
    /// that is visible and, if local, reported: older ones are never read
    /// again, and a local version not yet reported must stay for a restart
    /// to find it (the log is compacted from the store).
    fn insert(&self, env: &mut impl Env, key: &[u8], v: Version) -> causeway_core::Landed {
        let (dc, reported_us) = (self.dc, self.reported_us);
        env.store().insert_collecting(key, v, |v| v.visible && (v.origin != dc || v.ts <= reported_us))
    }

    /// The newest visible version of `key`: what a read returns.
    fn visible(env: &mut impl Env, key: &[u8]) -> Option<Version> {
        env.store().latest_where(key, |v| v.visible).cloned()
    }

    // ---- Alg 2: client requests ------------------------------------------

    /// Alg 2 lines 1–3: the local value and its timestamp, never blocked.
    pub(super) fn on_get(&mut self, env: &mut impl Env, from: ClientId, key: Key) {
        // Borrowed, not cloned: a GET is most of the work of a read-heavy
        // load, and the vector goes out inline (no allocation for M ≤ 3).
        let (value, vts) = match env.store().latest_where(&key, |v| v.visible) {
            Some(v) => (Some(causeway_core::copy_if_short(&v.value)), Vts::from_slice(&v.vts)),
            None => (None, Vts::from_elem(0, self.m())),
        };
        env.reply(from, Msg::GetReply { key, value, vts });
    }

    /// Alg 2 lines 4–9 with vectors (§4): stamp, apply, acknowledge; the
    /// payload goes to the siblings now, the metadata to Eunomia with the
    /// next batch.
    pub(super) fn on_put(&mut self, env: &mut impl Env, from: ClientId, key: Key, value: Value, vclock: Vec<u64>) {
        if vclock.len() != self.m() {
            let reason = format!("a causal past of {} entries for {} DCs", vclock.len(), self.m());
            return env.reply(from, Msg::Refused { key, reason });
        }
        let m = self.dc.idx();
        let before = self.max_ts_us;
        // Alg 2 line 5: MaxTs_n ← max(Clock_n, Clock_c + 1, MaxTs_n + 1),
        // where Clock_c is the largest entry of VClock_c, not only entry m
        // as §4 says (deviation 2: last-writer-wins must follow causality).
        let past = vclock.iter().copied().max().unwrap_or(0);
        self.max_ts_us = env.now_us().max(past + 1).max(self.max_ts_us + 1);
        // Property 2 (§3.2): this partition's timestamps strictly increase.
        assert!(self.max_ts_us > before && self.max_ts_us > self.reported_us, "MaxTs went back");
        let dep_us = vclock[m];
        let mut vts = vclock;
        vts[m] = self.max_ts_us;
        let version = Version { value, ts: self.max_ts_us, origin: self.dc, vts: vts.clone(), dep_us, visible: true };
        // Alg 2 line 6: kv_put.
        let stored = Version { value: causeway_core::copy_if_short(&version.value), ..version.clone() };
        let landed = self.insert(env, &key, stored);
        assert_ne!(landed.inserted, causeway_core::Inserted::Duplicate, "a timestamp repeated");
        env.observe(Observation::Visible { key: &key, value: &version.value, origin: self.dc, written_us: version.ts });
        // §5: the payload straight to the siblings, in no particular order.
        for &n in &self.siblings {
            env.send(n, Msg::Payload { key: key.clone(), version: version.clone() });
        }
        // Alg 2 line 8 (batched, §5): the metadata for Eunomia.
        self.unreported.push(OpMeta { key, partition: self.partition, vts: Vts::from_slice(&vts), dep_us });
        if self.cfg.batch_interval_us == 0 {
            self.report(env);
        }
        // Alg 2 line 9.
        env.reply(from, Msg::PutReply { vts });
    }

    // ---- Reports to Eunomia ----------------------------------------------

    /// Send the unreported updates to every Eunomia replica (§5 batching;
    /// §3.3: to all replicas). The partition's channels are reliable and
    /// FIFO, which gives Alg 4's prefix property (deviation 5).
    fn report(&mut self, env: &mut impl Env) {
        if self.unreported.is_empty() {
            return;
        }
        let ops = std::mem::take(&mut self.unreported);
        let m = self.dc.idx();
        let last = ops.last().expect("non-empty").vts[m];
        debug_assert!(ops.windows(2).all(|w| w[0].vts[m] < w[1].vts[m]), "a batch out of timestamp order");
        assert!(ops[0].vts[m] > self.reported_us, "an update stamped at or below a time already reported");
        self.reported_us = last;
        self.journal(env);
        self.send_report(env, ops, last);
    }

    fn send_report(&mut self, env: &mut impl Env, ops: Vec<OpMeta>, partition_time_us: u64) {
        self.reported_since_tick = true;
        if ops.is_empty() {
            for &n in &self.eunomia {
                env.send(n, Msg::Heartbeat { partition: self.partition, partition_time_us });
            }
            return;
        }
        let Some((&last, rest)) = self.eunomia.split_last() else { return };
        for &n in rest {
            env.send(n, Msg::Report { partition: self.partition, ops: ops.clone(), partition_time_us });
        }
        env.send(last, Msg::Report { partition: self.partition, ops, partition_time_us });
    }

    /// Alg 2 lines 10–12, the heartbeat: a partition that reported
    /// nothing for a whole Δ announces its clock. Two changes (deviation
    /// 3): MaxTs_n is raised to the heartbeat's time (the notes' errata: an
    /// update in the same clock tick would otherwise take a timestamp
    /// Eunomia already treats as stable), and the time is max(Clock_n,
    /// MaxTs_n + 1), so a clock stepped back does not stop StableTime.
    fn heartbeat(&mut self, env: &mut impl Env) {
        self.max_ts_us = env.now_us().max(self.max_ts_us + 1);
        self.reported_us = self.max_ts_us;
        // The time announced must survive a crash (a restarted clock
        // behind it would stamp updates Eunomia counts as stable): the
        // lease covers it, renewed before the report leaves.
        if self.max_ts_us > self.lease_us {
            self.journal(env);
        }
        self.send_report(env, Vec::new(), self.max_ts_us);
    }

    pub(super) fn on_timer(&mut self, env: &mut impl Env, timer: Timer) {
        if let Timer::Tick = timer {
            self.report(env);
            if self.reported_since_tick {
                self.quiet_us = 0;
            } else {
                self.quiet_us += self.tick_us();
                if self.quiet_us >= self.cfg.heartbeat_interval_us {
                    self.heartbeat(env);
                    self.quiet_us = 0;
                }
            }
            self.reported_since_tick = false;
            env.set_timer(self.tick_us(), Timer::Tick.token());
        }
    }

    // ---- Remote updates (§5, Alg 5 line 14) ------------------------------

    /// A sibling's payload: stored invisible until the receiver's apply.
    pub(super) fn on_payload(&mut self, env: &mut impl Env, key: Key, mut version: Version) {
        if version.vts.len() != self.m() || version.origin == self.dc || version.vts[version.origin.idx()] != version.ts
        {
            return; // malformed: a peer's bug; nothing to store
        }
        version.visible = false;
        self.insert(env, &key, version);
        self.progress(env);
    }

    /// The receiver's apply round: make each op visible in order, then
    /// acknowledge. A resent round (the receiver restarted, or retried)
    /// is applied again, which changes nothing, and acknowledged again.
    pub(super) fn on_apply(&mut self, env: &mut impl Env, receiver: NodeId, round: u64, ops: Vec<ApplyOp>) {
        self.awaiting.add(receiver, round, ops);
        self.progress(env);
    }

    /// Apply what can be, in order (an op whose payload has not arrived
    /// stops its round and every later one).
    fn progress(&mut self, env: &mut impl Env) {
        let mut acks = Vec::new();
        self.awaiting.progress(|op| Self::make_visible(env, op), |receiver, round| acks.push((receiver, round)));
        for (receiver, round) in acks {
            env.send(receiver, Msg::Applied { round });
        }
    }

    /// Make the version `op` names visible: true when done (or when a
    /// visible version already wins last-writer-wins over it, so it would
    /// never be read), false while its payload is missing.
    fn make_visible(env: &mut impl Env, op: &ApplyOp) -> bool {
        let order = (op.ts, op.origin);
        if let Some(v) = env.store().exact(&op.key, order) {
            if v.visible {
                return true;
            }
            let v = Version { visible: true, ..v.clone() };
            env.store().replace(&op.key, v);
            let newest = Self::visible(env, &op.key).map(|v| v.order());
            if newest == Some(order) {
                let index = env.store().index_of(&op.key).expect("stored");
                env.observe_visible_in_store(op.origin, op.ts, |s| s.latest_where_at(index, |v| v.visible));
            }
            return true;
        }
        Self::visible(env, &op.key).is_some_and(|v| v.order() > order)
    }
}

impl Partition {
    /// Whether `key` belongs here (a misrouted request is refused).
    pub(super) fn stores(&self, me: NodeId, key: &[u8]) -> bool {
        self.topology.server_for_key(self.dc, key) == Some(me)
    }
}
