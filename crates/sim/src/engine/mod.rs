//! The discrete-event engine.
//!
//! One thread, virtual time in µs, a binary heap of events ordered by
//! ⟨time, sequence number⟩ so that ties resolve in scheduling order. All
//! randomness comes from ChaCha8 generators seeded from the scenario's seed
//! (one for the network, one per client), so a seed replays exactly; the
//! trace hash folds in every event handled, so two runs can be compared.

use crate::log::SimLog;
use crate::metrics::{Metrics, SimReport, Summary, cdf_of};
use crate::scenario::{CrashPoint, FaultKind, FsyncPolicy, Scenario, ScenarioError};
use crate::workload::Generator;
use causeway_core::{
    Client, ClientCtx, ClientEnv, ClientId, ClockModel, DcId, History, Host, Message, MvStore, NodeCtx, NodeId,
    NodeInput, NodeOptions, Observation, Op, OpRecord, OpResult, Output, Protocol, Seq, Server, SnapshotFloor,
    Topology, Value, Versioned, stable_hash, wire_size, write_id_of,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

mod client;
mod node;

use client::{CEnv, Out, Session};
use node::SimNode;

/// An endpoint: node ids first, then clients after them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Addr {
    Node(NodeId),
    Client(ClientId),
}

enum Ev<M> {
    /// A message arrives; `seq` is its place on a node-to-node channel
    /// (none for client traffic).
    Deliver {
        from: Addr,
        to: Addr,
        msg: M,
        seq: Option<Seq>,
    },
    /// The CPU time of a node's turn is over: its records are synced (per
    /// the log's policy) and its output leaves. Void if the node crashed
    /// since (`incarnation`).
    TurnEnd {
        node: NodeId,
        incarnation: u32,
    },
    /// Group commit's deadline for a node's unsynced records.
    GroupSync {
        node: NodeId,
        incarnation: u32,
    },
    /// A sync that takes time (`durability.sync_us`) is over.
    SyncDone {
        node: NodeId,
        incarnation: u32,
    },
    /// A node's timer; ignored if the node crashed since it was set
    /// (`incarnation` counts the node's restarts).
    Timer {
        node: NodeId,
        token: u64,
        incarnation: u32,
    },
    ClientTimer {
        client: ClientId,
        token: u64,
    },
    /// The client's think time is over: issue its next operation.
    ClientNext {
        client: ClientId,
    },
    /// The node may be able to work through its inbox.
    Wake {
        node: NodeId,
    },
    Fault {
        index: usize,
    },
    /// A crashed node restarts (a `crash` fault with `for_ms`).
    Restart {
        node: NodeId,
    },
    /// The client's deadline for its `op_no`-th operation.
    ClientDeadline {
        client: ClientId,
        op_no: u64,
    },
    /// A spike ends.
    SpikeEnd {
        a: u16,
        b: u16,
        extra_us: u64,
    },
}

/// A simulation of protocol `P` on a scenario.
pub struct Sim<P: Protocol> {
    sc: Scenario,
    /// `[cpu.kind_us.<protocol>]`: extra CPU µs per handled message of a kind.
    kind_us: std::collections::HashMap<String, f64>,
    /// `[cpu.item_us.<protocol>]`: extra CPU µs per item
    /// ([`causeway_core::Message::items`]) of a handled message of a kind.
    item_us: std::collections::HashMap<String, f64>,
    cfg: P::Config,
    topology: Arc<Topology>,
    now: u64,
    seq: u64,
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    slots: Vec<Option<Ev<P::Msg>>>,
    free: Vec<u32>,
    nodes: Vec<SimNode<P>>,
    node_options: NodeOptions,
    clients: Vec<Session<P>>,
    /// Last delivery time per directed channel, for FIFO.
    fifo: FxHashMap<(u32, u32), u64>,
    one_way_us: Vec<Vec<u64>>,
    extra_us: Vec<Vec<u64>>,
    slow_links: FxHashMap<(u32, u32), u64>,
    cut: Vec<Vec<bool>>,
    held: Vec<(Addr, Addr, P::Msg, Option<Seq>)>,
    net_rng: ChaCha8Rng,
    workload: Generator,
    /// Nodes currently slowed by a `slow` fault.
    slowed: usize,
    /// Requests the random clients have started (for `operationcount`).
    issued: u64,
    metrics: Metrics,
    trace: u64,
    events: u64,
    stop_issuing_us: u64,
    end_us: u64,
    full: bool,
    history: Option<History>,
    out: Vec<Out<P::Msg>>,
    /// Timers a node's handler set, scheduled when it returns.
    timers: Vec<(u64, u64)>,
    done: Option<OpResult>,
    /// How many checking groups a GET can name
    /// ([`Protocol::checking_groups`]), for `checking_group_proportion`.
    checking_groups: u16,
}

/// Simulated clocks read true time plus this epoch (about 11.6 days), so a
/// node with a negative offset or a backward jump early in a run never
/// reads a clock clamped at zero.
pub const CLOCK_EPOCH_US: u64 = 1_000_000_000_000;

fn mix(h: u64, x: u64) -> u64 {
    // splitmix64 finaliser over the running hash: cheap and order-sensitive.
    let mut z = h ^ x.wrapping_add(0x9e37_79b9_7f4a_7c15).wrapping_add(h << 6).wrapping_add(h >> 2);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl<P: Protocol> Sim<P> {
    /// Build a simulation; validates the scenario and the protocol's config.
    pub fn new(mut sc: Scenario) -> Result<Sim<P>, ScenarioError> {
        // The protocol's per-DC services, where the scenario's topology
        // does not declare them (numbered after every partition server, so
        // the scenario's node ids keep naming the same nodes).
        sc.topology.add_missing_services(P::SERVICES);
        let topology = Arc::new(sc.validate()?);
        let cfg: P::Config = sc.protocol.clone().try_into().map_err(|e: toml::de::Error| ScenarioError::Protocol {
            protocol: P::NAME.into(),
            message: e.to_string(),
        })?;
        P::validate(&cfg, &topology)
            .map_err(|message| ScenarioError::Protocol { protocol: P::NAME.into(), message })?;
        if sc.workload.migrate_proportion > 0.0 && !P::MIGRATES {
            return Err(ScenarioError::Workload(format!(
                "migrate_proportion = {}: {} keeps sessions in their DC (they cannot migrate)",
                sc.workload.migrate_proportion,
                P::NAME
            )));
        }
        let checking_groups = P::checking_groups(&cfg, &topology);
        if sc.workload.checking_group_proportion > 0.0 && checking_groups == 0 {
            return Err(ScenarioError::Workload(format!(
                "checking_group_proportion = {}: {} has no checking groups for a GET to name",
                sc.workload.checking_group_proportion,
                P::NAME
            )));
        }
        let one_way_us = sc.one_way_us()?;
        let m = topology.dcs();
        let mut setup_rng = ChaCha8Rng::seed_from_u64(sc.seed ^ 0x5e7u64);
        let node_options = NodeOptions { mutant_release_before_sync: sc.durability.mutant_release_before_sync };
        // A node no fault crashes never reads its durable log back.
        let mut may_crash = vec![false; topology.nodes()];
        for f in &sc.faults {
            if let FaultKind::Crash { node, .. } = f.kind
                && let Some(c) = may_crash.get_mut(node as usize)
            {
                *c = true;
            }
        }
        let nodes: Vec<SimNode<P>> = topology
            .node_ids()
            .map(|id| {
                let mut clock = ClockModel::default();
                if sc.clocks.skew_us > 0 {
                    let half = sc.clocks.skew_us as i64 / 2;
                    clock.offset_us = setup_rng.random_range(-half..=half);
                }
                if sc.clocks.drift_ppm > 0.0 {
                    clock.drift_ppm = setup_rng.random_range(-sc.clocks.drift_ppm..=sc.clocks.drift_ppm);
                }
                if let Some(o) = sc.clocks.node.iter().find(|c| c.node == id.0) {
                    clock = o.model();
                }
                let ctx = NodeCtx { id, role: topology.role(id), topology: topology.clone() };
                SimNode {
                    core: causeway_core::Node::new(&cfg, ctx, node_options),
                    log: if may_crash[id.idx()] {
                        SimLog::new(topology.nodes())
                    } else {
                        SimLog::volatile(may_crash.clone())
                    },
                    dc: topology.dc_of(id),
                    clock,
                    inbox: VecDeque::new(),
                    busy_until: 0,
                    paused_until: 0,
                    wake_at: None,
                    crashed: false,
                    incarnation: 0,
                    slow_extra_us: 0,
                    obs: Vec::new(),
                    last_sync_us: 0,
                    group_sync_at: None,
                    sync_in_flight: None,
                    armed: None,
                    restart_floor: None,
                }
            })
            .collect();
        let mut clients = Vec::new();
        let workload_clients = sc.workload.clients(&topology);
        let mut new_session = |dc: DcId, scripted| {
            let id = ClientId(clients.len() as u32);
            let proto = P::client(
                &cfg,
                ClientCtx { id, dc, nonce: mix(sc.seed, 0x5e55_0000 + id.0 as u64), topology: topology.clone() },
            );
            let rng = ChaCha8Rng::seed_from_u64(mix(sc.seed, 0xc11e_0000 + id.0 as u64));
            clients.push(Session::new(proto, dc, rng, scripted, 0, id.0 as u64));
        };
        for d in topology.dc_ids().filter(|d| sc.workload.runs_in(*d)) {
            for _ in 0..sc.workload.clients_per_dc {
                new_session(d, None);
            }
        }
        for s in &sc.scripted {
            new_session(DcId(s.dc), Some(s.ops.iter().cloned().collect()));
        }
        for s in sc.final_readers(workload_clients) {
            new_session(DcId(s.dc), Some(s.ops.into()));
        }
        let stop_issuing_us = sc.duration_ms * 1_000;
        let end_us = stop_issuing_us + sc.drain_ms * 1_000;
        let metrics = Metrics::new(m, sc.warmup_ms * 1_000, stop_issuing_us);
        let history = sc.record_history.then(|| History { protocol: P::NAME.into(), ops: Vec::new() });
        let full = topology.is_full_replication();
        let mut sim = Sim {
            kind_us: sc
                .cpu
                .kind_us
                .get(P::NAME)
                .map(|t| t.iter().map(|(k, v)| (k.clone(), *v)).collect())
                .unwrap_or_default(),
            item_us: sc
                .cpu
                .item_us
                .get(P::NAME)
                .map(|t| t.iter().map(|(k, v)| (k.clone(), *v)).collect())
                .unwrap_or_default(),
            workload: Generator::new(&sc.workload, topology.clone(), workload_clients),
            issued: 0,
            slowed: 0,
            net_rng: ChaCha8Rng::seed_from_u64(mix(sc.seed, 0x6e7)),
            topology,
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            nodes,
            node_options,
            clients,
            fifo: FxHashMap::default(),
            one_way_us,
            extra_us: vec![vec![0; m]; m],
            slow_links: FxHashMap::default(),
            cut: vec![vec![false; m]; m],
            held: Vec::new(),
            metrics,
            trace: mix(0, sc.seed),
            events: 0,
            full,
            stop_issuing_us,
            end_us,
            history,
            out: Vec::new(),
            timers: Vec::new(),
            done: None,
            checking_groups,
            sc,
            cfg,
        };
        let fault_times: Vec<u64> = sim.sc.faults.iter().map(|f| f.time_us()).collect();
        for (index, t) in fault_times.into_iter().enumerate() {
            sim.schedule(t, Ev::Fault { index });
        }
        if sim.sc.workload.preload {
            // YCSB's load phase: each workload client first writes its share of the keys.
            let n = workload_clients;
            for s in sim.clients.iter_mut().filter(|s| s.scripted.is_none()) {
                let writes = &mut s.writes;
                let c = s.workload_index;
                let write_id = || {
                    *writes += 1;
                    ((c + 1) << 32) | *writes
                };
                s.pending = sim.workload.preload_ops(&sim.sc.workload, c, n, &mut s.rng, write_id);
            }
        }
        for i in 0..sim.nodes.len() {
            sim.run_node(NodeId(i as u32), None);
        }
        for c in 0..sim.clients.len() {
            let at = match &sim.clients[c].scripted {
                Some(ops) => ops.front().map(|o| o.at_us),
                // Stagger the first operations so clients do not move in lockstep.
                None => Some(sim.net_rng.random_range(0..1_000)),
            };
            if let Some(at) = at {
                sim.schedule(at, Ev::ClientNext { client: ClientId(c as u32) });
            }
        }
        Ok(sim)
    }

    fn alloc(&mut self, ev: Ev<P::Msg>) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(ev);
                i
            }
            None => {
                self.slots.push(Some(ev));
                (self.slots.len() - 1) as u32
            }
        }
    }

    fn schedule(&mut self, at: u64, ev: Ev<P::Msg>) {
        let slot = self.alloc(ev);
        self.seq += 1;
        self.heap.push(Reverse((at.max(self.now), self.seq, slot)));
    }

    fn addr_code(&self, a: Addr) -> u32 {
        match a {
            Addr::Node(n) => n.0,
            Addr::Client(c) => self.nodes.len() as u32 + c.0,
        }
    }

    fn addr_dc(&self, a: Addr) -> DcId {
        match a {
            Addr::Node(n) => self.nodes[n.idx()].dc,
            Addr::Client(c) => self.clients[c.idx()].dc,
        }
    }

    /// Count a message and put it on the wire.
    fn transmit(&mut self, from: Addr, to: Addr, msg: P::Msg, seq: Option<Seq>) {
        let (bytes, payload) = if self.sc.count_bytes { (wire_size(&msg), msg.payload_bytes()) } else { (0, 0) };
        self.metrics.message(msg.kind(), msg.is_client(), bytes, payload, self.now);
        self.route(from, to, msg, seq);
    }

    /// Latency, jitter, slow-node delay, spikes, cuts, and FIFO order per
    /// channel. A message across a cut waits in `held` (reliable channels
    /// resend after the heal).
    fn route(&mut self, from: Addr, to: Addr, msg: P::Msg, seq: Option<Seq>) {
        let (da, db) = (self.addr_dc(from), self.addr_dc(to));
        if self.cut[da.idx()][db.idx()] {
            // A transient message dies with the connection a cut breaks.
            if !(msg.transient() && matches!((from, to), (Addr::Node(_), Addr::Node(_)))) {
                self.held.push((from, to, msg, seq));
            }
            return;
        }
        let base = self.one_way_us[da.idx()][db.idx()];
        let mut delay = base + self.extra_us[da.idx()][db.idx()];
        if self.sc.network.jitter_pct > 0.0 && base > 0 {
            let max = (base as f64 * self.sc.network.jitter_pct / 100.0) as u64;
            if max > 0 {
                delay += self.net_rng.random_range(0..=max);
            }
        }
        if let Addr::Node(n) = from {
            delay += self.nodes[n.idx()].slow_extra_us;
        }
        let key = (self.addr_code(from), self.addr_code(to));
        if !self.slow_links.is_empty() {
            delay += self.slow_links.get(&key).copied().unwrap_or(0);
        }
        let mut at = self.now + delay.max(1);
        let last = self.fifo.entry(key).or_insert(0);
        if at < *last {
            at = *last;
        }
        *last = at;
        self.schedule(at, Ev::Deliver { from, to, msg, seq });
    }

    fn fault(&mut self, index: usize) {
        let kind = self.sc.faults[index].kind.clone();
        match kind {
            FaultKind::Cut { a, b } => {
                self.cut[a as usize][b as usize] = true;
                self.cut[b as usize][a as usize] = true;
            }
            FaultKind::Heal { a, b } => {
                self.cut[a as usize][b as usize] = false;
                self.cut[b as usize][a as usize] = false;
                let held = std::mem::take(&mut self.held);
                for (from, to, msg, seq) in held {
                    // Still-cut pairs go straight back into `held`, in order.
                    self.route(from, to, msg, seq);
                }
            }
            FaultKind::Pause { node, for_ms } => {
                let n = &mut self.nodes[node as usize];
                n.paused_until = n.paused_until.max(self.now + for_ms * 1_000);
            }
            FaultKind::Crash { node, for_ms, at } => {
                match at {
                    None => self.crash(NodeId(node)),
                    Some(point) => self.nodes[node as usize].armed = Some(point),
                }
                if for_ms > 0 {
                    self.schedule(self.now + for_ms * 1_000, Ev::Restart { node: NodeId(node) });
                }
            }
            FaultKind::Restart { node } => self.restart(NodeId(node)),
            FaultKind::Slow { node, extra_ms } => {
                let n = &mut self.nodes[node as usize];
                let was = n.slow_extra_us > 0;
                n.slow_extra_us = extra_ms * 1_000;
                match (was, extra_ms > 0) {
                    (false, true) => self.slowed += 1,
                    (true, false) => self.slowed -= 1,
                    _ => {}
                }
            }
            FaultKind::SlowLink { from, to, extra_ms } => {
                if extra_ms == 0 {
                    self.slow_links.remove(&(from, to));
                } else {
                    self.slow_links.insert((from, to), extra_ms * 1_000);
                }
            }
            FaultKind::Spike { a, b, extra_ms, for_ms } => {
                let extra_us = extra_ms * 1_000;
                self.extra_us[a as usize][b as usize] += extra_us;
                self.extra_us[b as usize][a as usize] += extra_us;
                self.schedule(self.now + for_ms * 1_000, Ev::SpikeEnd { a, b, extra_us });
            }
            FaultKind::ClockJump { node, step_us } => {
                let now = self.now;
                self.nodes[node as usize].clock.jumps.push(causeway_core::ClockJump { at_us: now, step_us });
            }
        }
    }

    /// Handle the next event. False when the run is over.
    pub fn step(&mut self) -> bool {
        let Some(Reverse((t, _seq, slot))) = self.heap.pop() else { return false };
        if t > self.end_us {
            self.heap.push(Reverse((t, _seq, slot)));
            self.now = self.end_us;
            return false;
        }
        self.now = t;
        let ev = self.slots[slot as usize].take().expect("event slot is live");
        self.free.push(slot);
        match ev {
            Ev::Deliver { from, to, msg, seq } => match (from, to) {
                (Addr::Node(f), Addr::Node(n)) => {
                    let seq = seq.expect("node-to-node messages carry their place on the channel");
                    self.node_input(n, NodeInput::Peer { from: f, seq, msg })
                }
                (Addr::Client(f), Addr::Node(n)) => self.node_input(n, NodeInput::Client { from: f, msg }),
                (Addr::Node(_), Addr::Client(c)) if self.clients[c.idx()].dead => {}
                (Addr::Node(f), Addr::Client(c)) => {
                    self.events += 1;
                    self.trace = mix(self.trace, self.now ^ 0xcc ^ ((c.0 as u64) << 24));
                    let s = &mut self.clients[c.idx()];
                    let mut env = CEnv {
                        now: self.now + CLOCK_EPOCH_US,
                        out: &mut self.out,
                        done: &mut self.done,
                        notes: &mut s.notes,
                    };
                    s.proto.on_reply(&mut env, f, msg);
                    self.after_client(c);
                }
                (Addr::Client(_), Addr::Client(_)) => unreachable!("clients never address clients"),
            },
            Ev::Timer { node, token, incarnation } => {
                if incarnation == self.nodes[node.idx()].incarnation {
                    self.node_input(node, NodeInput::Timer { token })
                }
            }
            Ev::ClientTimer { client, token } => {
                if self.clients[client.idx()].dead {
                    return true;
                }
                self.events += 1;
                let s = &mut self.clients[client.idx()];
                let mut env = CEnv {
                    now: self.now + CLOCK_EPOCH_US,
                    out: &mut self.out,
                    done: &mut self.done,
                    notes: &mut s.notes,
                };
                s.proto.on_timer(&mut env, token);
                self.after_client(client);
            }
            Ev::ClientNext { client } => self.client_next(client),
            Ev::Wake { node } => self.on_wake(node),
            Ev::TurnEnd { node, incarnation } => {
                if self.nodes[node.idx()].incarnation == incarnation && !self.nodes[node.idx()].crashed {
                    self.end_turn(node)
                }
            }
            Ev::GroupSync { node, incarnation } => self.group_sync(node, incarnation),
            Ev::SyncDone { node, incarnation } => self.sync_done(node, incarnation),
            Ev::Fault { index } => self.fault(index),
            Ev::Restart { node } => self.restart(node),
            Ev::ClientDeadline { client, op_no } => self.deadline(client, op_no),
            Ev::SpikeEnd { a, b, extra_us } => {
                self.extra_us[a as usize][b as usize] -= extra_us;
                self.extra_us[b as usize][a as usize] -= extra_us;
            }
        }
        true
    }

    /// Run to the end of the scenario.
    pub fn run(&mut self) -> SimReport {
        while self.step() {}
        self.report()
    }

    /// Run until true time `t_us` (or the end).
    pub fn run_until(&mut self, t_us: u64) {
        while let Some(Reverse((t, _, _))) = self.heap.peek() {
            if *t > t_us || *t > self.end_us {
                break;
            }
            self.step();
        }
        self.now = self.now.max(t_us.min(self.end_us));
    }

    pub fn now_us(&self) -> u64 {
        self.now
    }
    pub fn events(&self) -> u64 {
        self.events
    }
    pub fn trace_hash(&self) -> u64 {
        self.trace
    }
    pub fn topology(&self) -> &Topology {
        &self.topology
    }
    /// A node's store, for inspection after a run.
    pub fn store(&self, node: NodeId) -> &MvStore<P::Version> {
        self.nodes[node.idx()].core.store()
    }
    /// The history recorded so far: completed (and timed-out) operations
    /// only; [`Sim::take_history`] adds the pending ones.
    pub fn history(&self) -> Option<&History> {
        self.history.as_ref()
    }
    /// The recorded history, every invoked operation in it: those still in
    /// progress are appended as pending ([`Sim::pending_records`]).
    pub fn take_history(&mut self) -> Option<History> {
        let mut h = self.history.take()?;
        h.ops.extend(self.pending_records());
        Some(h)
    }

    pub fn report(&self) -> SimReport {
        let m = &self.metrics;
        let measured_us = m.to_us.saturating_sub(m.from_us).min(self.now.saturating_sub(m.from_us));
        let names: Vec<String> = self.topology.dc_ids().map(|d| self.topology.dc_name(d)).collect();
        let ops = m.completed.max(1) as f64;
        let latencies = || {
            let ops = m.latency.iter().map(|(k, h)| (k.name().to_string(), h));
            ops.chain(m.requests.iter().map(|(k, h)| (k.to_string(), h)))
        };
        let versions_held: u64 = self.nodes.iter().map(|n| n.core.store().version_count() as u64).sum();
        let mut version_meta = 0u64;
        if self.sc.count_bytes {
            for v in self.nodes.iter().flat_map(|n| n.core.store().all_versions()) {
                version_meta += wire_size(v).saturating_sub(v.value().len()) as u64;
            }
        }
        let mut messages: Vec<(&str, crate::metrics::MessageCount)> =
            m.messages.iter().map(|(k, v)| (*k, v.clone())).collect();
        messages.sort_by_key(|(k, _)| *k);
        SimReport {
            scenario: self.sc.name.clone(),
            protocol: P::NAME.into(),
            seed: self.sc.seed,
            dcs: self.topology.dcs(),
            partitions: self.topology.partitions(),
            // The workload's and scripted clients: the final reads' readers
            // come after the measured window and are no load.
            clients: self.clients.len() - self.sc.final_readers(self.sc.workload.clients(&self.topology)).len(),
            simulated_us: self.now,
            measured_us,
            events: self.events,
            ops_completed: m.completed,
            ops_failed: m.failed,
            throughput_ops_s: if measured_us > 0 { m.completed as f64 * 1e6 / measured_us as f64 } else { 0.0 },
            throughput_keys_s: if measured_us > 0 { m.keys as f64 * 1e6 / measured_us as f64 } else { 0.0 },
            throughput_columns_s: (self.sc.workload.columns_per_read > 1 || self.sc.workload.columns_per_write > 1)
                .then(|| if measured_us > 0 { m.columns as f64 * 1e6 / measured_us as f64 } else { 0.0 }),
            latency: latencies().map(|(k, h)| (k, Summary::of(h))).collect(),
            latency_cdf: latencies().map(|(k, h)| (k, cdf_of(h))).collect(),
            visibility: m.visibility_report(&names),
            visibility_all: m.visibility_all(),
            stale_reads_pct: 100.0 * m.staleness.len() as f64 / m.reads.max(1) as f64,
            staleness: Summary::of(&m.staleness),
            blocked: m.blocked.iter().map(|(k, h)| (k.to_string(), Summary::of(h))).collect(),
            samples: m.samples.iter().map(|(k, h)| (k.to_string(), Summary::of(h))).collect(),
            messages: messages.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            server_msgs_per_op: m.server_msgs as f64 / ops,
            server_bytes_per_op: m.server_bytes as f64 / ops,
            client_bytes_per_op: m.client_bytes as f64 / ops,
            metadata_bytes_per_msg: (m.server_bytes - m.server_payload) as f64 / m.server_msgs.max(1) as f64,
            metadata_bytes_per_version: version_meta as f64 / versions_held.max(1) as f64,
            versions_held,
            server_busy_max_pct: (self.cpu_costs() && measured_us > 0).then(|| {
                let max = m.busy_us.iter().copied().max().unwrap_or(0);
                100.0 * max as f64 / measured_us as f64
            }),
            sample_busy_pct: if self.cpu_costs() && measured_us > 0 {
                m.samplers
                    .iter()
                    .map(|(k, nodes)| {
                        let max = nodes.iter().map(|&n| m.busy_us.get(n).copied().unwrap_or(0)).max().unwrap_or(0);
                        (k.to_string(), 100.0 * max as f64 / measured_us as f64)
                    })
                    .collect()
            } else {
                std::collections::BTreeMap::new()
            },
            trace_hash: format!("{:016x}", self.trace),
        }
    }
}
