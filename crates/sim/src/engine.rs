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

/// A simulated node: the node core (the protocol server, its store and
/// channel bookkeeping) with the simulated machine around it — its clock,
/// its CPU (one input at a time), its log.
struct SimNode<P: Protocol> {
    core: causeway_core::Node<P>,
    log: SimLog<P>,
    dc: DcId,
    clock: ClockModel,
    /// Inputs waiting for the CPU, with their arrival times.
    inbox: VecDeque<(u64, NodeInput<P::Msg>)>,
    busy_until: u64,
    paused_until: u64,
    wake_at: Option<u64>,
    crashed: bool,
    /// Restarts so far: timers set by an earlier incarnation are void.
    incarnation: u32,
    slow_extra_us: u64,
    /// Observations of the turn in service, recorded when its service ends.
    obs: Vec<ObsRec>,
    /// When the log was last synced, and the group-commit deadline armed.
    last_sync_us: u64,
    group_sync_at: Option<u64>,
    /// A crash waiting for the end of this node's next turn that logs.
    armed: Option<CrashPoint>,
    /// Where a snapshot taken at the crash would cut each chain, when the
    /// crash lost nothing unsynced (the live state was the durable one).
    restart_floor: Option<SnapshotFloor<P::Version>>,
}

struct Session<P: Protocol> {
    proto: P::Client,
    dc: DcId,
    rng: ChaCha8Rng,
    busy: Option<(Op, u64)>,
    scripted: Option<VecDeque<crate::scenario::ScriptedOp>>,
    writes: u64,
    /// Index among the workload's random clients (key groups need it).
    workload_index: u64,
    /// The rest of a multi-operation request (an amplified insert), and its
    /// name and start time.
    pending: VecDeque<Op>,
    request: Option<(&'static str, u64)>,
    /// Operations invoked so far, to match a deadline with its operation.
    op_no: u64,
    /// Replaced by a new session after a timeout: replies and timers for it
    /// are dropped.
    dead: bool,
    /// Client inputs of the current operation that sent messages (for
    /// `latency_by_rounds`).
    rounds: u32,
    /// Labels the client noted for the current operation
    /// ([`ClientEnv::note`], for `latency_by_rounds`).
    notes: Vec<&'static str>,
}

/// What a client session's handler produced.
enum Out<M> {
    Send(NodeId, M),
    Timer(u64, u64),
}

/// A simulation of protocol `P` on a scenario.
pub struct Sim<P: Protocol> {
    sc: Scenario,
    /// `[cpu.kind_us.<protocol>]`: extra CPU µs per handled message of a kind.
    kind_us: std::collections::HashMap<String, f64>,
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
}

enum ObsRec {
    /// `key` is kept only at the origin, to know how many DCs must see it.
    Visible {
        write: u64,
        origin: DcId,
        key: Option<causeway_core::Key>,
    },
    Blocked {
        what: &'static str,
        waited_us: u64,
    },
    Sample {
        what: &'static str,
        value: u64,
    },
}

/// What the simulator lends a node for one step: its skewed clock, the
/// timers it sets and where its observations go.
struct SimHost<'a> {
    dc: DcId,
    /// Under full replication every key is everywhere, so visibility
    /// accounting need not look at the key.
    full: bool,
    now_local: u64,
    timers: &'a mut Vec<(u64, u64)>,
    obs: &'a mut Vec<ObsRec>,
}

impl Host for SimHost<'_> {
    fn now_us(&self) -> u64 {
        self.now_local
    }
    fn set_timer(&mut self, after_us: u64, token: u64) {
        self.timers.push((after_us, token));
    }
    fn observe(&mut self, obs: Observation<'_>) {
        match obs {
            Observation::Visible { key, value, origin, .. } => {
                record_visible(self.obs, self.dc, self.full, key, value, origin)
            }
            Observation::Blocked { what, waited_us } => self.obs.push(ObsRec::Blocked { what, waited_us }),
            Observation::Sample { what, value } => self.obs.push(ObsRec::Sample { what, value }),
            // The simulator measures visibility and stability in true time.
            Observation::Stable { .. } => {}
        }
    }
}

/// [`Observation::Visible`] as the simulator keeps it: the write's id, and
/// at the origin (under partial replication) its key.
fn record_visible(obs: &mut Vec<ObsRec>, dc: DcId, full: bool, key: &[u8], value: &Value, origin: DcId) {
    if let Some(write) = write_id_of(value) {
        let key = (origin == dc && !full).then(|| bytes::Bytes::copy_from_slice(key));
        obs.push(ObsRec::Visible { write, origin, key });
    }
}

struct CEnv<'a, M> {
    now: u64,
    out: &'a mut Vec<Out<M>>,
    done: &'a mut Option<OpResult>,
    notes: &'a mut Vec<&'static str>,
}

impl<M> ClientEnv<M> for CEnv<'_, M> {
    fn now_us(&self) -> u64 {
        self.now
    }
    fn send(&mut self, to: NodeId, msg: M) {
        self.out.push(Out::Send(to, msg));
    }
    fn set_timer(&mut self, after_us: u64, token: u64) {
        self.out.push(Out::Timer(after_us, token));
    }
    fn complete(&mut self, result: OpResult) {
        assert!(self.done.is_none(), "a client completed one operation twice");
        *self.done = Some(result);
    }
    fn note(&mut self, label: &'static str) {
        if !self.notes.contains(&label) {
            self.notes.push(label);
        }
    }
}

/// The latency name of an operation of `kind` whose client sent messages in
/// `rounds` rounds (`Scenario::latency_by_rounds`).
fn rounds_name(kind: causeway_core::OpKind, rounds: u32) -> Option<&'static str> {
    use causeway_core::OpKind as K;
    let names: [&'static str; 3] = match kind {
        K::Get => ["get_1round", "get_2rounds", "get_3plus_rounds"],
        K::Rot => ["rot_1round", "rot_2rounds", "rot_3plus_rounds"],
        K::Put => ["put_1round", "put_2rounds", "put_3plus_rounds"],
        K::Wot => ["wot_1round", "wot_2rounds", "wot_3plus_rounds"],
        _ => return None,
    };
    Some(names[(rounds.max(1) as usize - 1).min(2)])
}

/// The latency name of an operation of `kind` its client noted with
/// `notes`, taking precedence over its rounds name: an Eiger read noted
/// `indirected` (a second-round read a server answered only after a
/// `commit_check` to a transaction's coordinator) is reported under
/// `get_indirected` / `rot_indirected` *instead of* its rounds bucket, so
/// that the buckets of a kind partition its operations, as the rows of
/// Lloyd's dissertation, Table 7.4 ("Eiger 1 round", "2 rounds",
/// "indirected") do. Other labels and kinds keep the rounds name.
fn noted_name(kind: causeway_core::OpKind, notes: &[&'static str]) -> Option<&'static str> {
    use causeway_core::OpKind as K;
    if !notes.contains(&"indirected") {
        return None;
    }
    match kind {
        K::Get => Some("get_indirected"),
        K::Rot => Some("rot_indirected"),
        _ => None,
    }
}

/// Simulated clocks read true time plus this epoch (about 11.6 days), so a
/// node with a negative offset or a backward jump early in a run never
/// reads a clock clamped at zero.
pub const CLOCK_EPOCH_US: u64 = 1_000_000_000_000;

/// How many distinct rows `keys` name (a plain key is its own row; the
/// columns of one row count once). Plain keys only: their count.
fn rows<'a>(keys: impl Iterator<Item = &'a causeway_core::Key> + Clone) -> usize {
    if !keys.clone().any(|k| causeway_core::column::is_location_key(k)) {
        return keys.count();
    }
    let mut rows: Vec<&[u8]> = keys.map(|k| causeway_core::column::row_of(k)).collect();
    rows.sort_unstable();
    rows.dedup();
    rows.len()
}

fn mix(h: u64, x: u64) -> u64 {
    // splitmix64 finaliser over the running hash: cheap and order-sensitive.
    let mut z = h ^ x.wrapping_add(0x9e37_79b9_7f4a_7c15).wrapping_add(h << 6).wrapping_add(h >> 2);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl<P: Protocol> Sim<P> {
    /// Build a simulation; validates the scenario and the protocol's config.
    pub fn new(sc: Scenario) -> Result<Sim<P>, ScenarioError> {
        let topology = Arc::new(sc.validate()?);
        let cfg: P::Config = sc.protocol.clone().try_into().map_err(|e: toml::de::Error| ScenarioError::Protocol {
            protocol: P::NAME.into(),
            message: e.to_string(),
        })?;
        P::validate(&cfg, &topology)
            .map_err(|message| ScenarioError::Protocol { protocol: P::NAME.into(), message })?;
        let one_way_us = sc.one_way_us()?;
        let m = topology.dcs();
        let mut setup_rng = ChaCha8Rng::seed_from_u64(sc.seed ^ 0x5e7u64);
        let node_options = NodeOptions { mutant_release_before_sync: sc.durability.mutant_release_before_sync };
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
                    log: SimLog::new(topology.nodes()),
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
                    armed: None,
                    restart_floor: None,
                }
            })
            .collect();
        let mut clients = Vec::new();
        let workload_clients = sc.workload.clients(&topology);
        let mut new_session = |dc: DcId, scripted| {
            let id = ClientId(clients.len() as u32);
            clients.push(Session {
                proto: P::client(
                    &cfg,
                    ClientCtx { id, dc, nonce: mix(sc.seed, 0x5e55_0000 + id.0 as u64), topology: topology.clone() },
                ),
                dc,
                rng: ChaCha8Rng::seed_from_u64(mix(sc.seed, 0xc11e_0000 + id.0 as u64)),
                busy: None,
                scripted,
                writes: 0,
                workload_index: id.0 as u64,
                pending: VecDeque::new(),
                request: None,
                op_no: 0,
                dead: false,
                rounds: 0,
                notes: Vec::new(),
            });
        };
        for d in topology.dc_ids().filter(|d| sc.workload.runs_in(*d)) {
            for _ in 0..sc.workload.clients_per_dc {
                new_session(d, None);
            }
        }
        for s in &sc.scripted {
            new_session(DcId(s.dc), Some(s.ops.iter().cloned().collect()));
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

    /// Route what a client session's handler produced.
    fn flush_client(&mut self, c: ClientId) {
        let from = Addr::Client(c);
        let mut out = std::mem::take(&mut self.out);
        for o in out.drain(..) {
            match o {
                Out::Send(to, msg) => {
                    if !self.topology.contains(to) {
                        panic!("{from:?} sent to {to:?}, which is not in the topology");
                    }
                    self.transmit(from, Addr::Node(to), msg, None)
                }
                Out::Timer(after, token) => self.schedule(self.now + after, Ev::ClientTimer { client: c, token }),
            }
        }
        self.out = out;
    }

    /// Route what a node's core released: its turns whose records are
    /// durable.
    fn route_released(&mut self, node: NodeId) {
        let from = Addr::Node(node);
        let released: Vec<Output<P::Msg>> = self.nodes[node.idx()].core.released().collect();
        for o in released {
            match o {
                Output::Peer { to, seq, msg } => self.transmit(from, Addr::Node(to), msg, Some(Seq::Nth(seq))),
                Output::Unsequenced { to, after_seq, msg } => {
                    self.transmit(from, Addr::Node(to), msg, Some(Seq::After(after_seq)))
                }
                Output::Reply { to, msg } => {
                    let to = to.as_seen_by(node);
                    if to.idx() < self.clients.len() {
                        self.transmit(from, Addr::Client(to), msg, None)
                    }
                }
            }
        }
    }

    /// Record the observations of a node's turn, at the end of its service.
    fn record_obs(&mut self, node: NodeId) {
        let dc = self.nodes[node.idx()].dc;
        let mut obs = std::mem::take(&mut self.nodes[node.idx()].obs);
        for o in obs.drain(..) {
            match o {
                ObsRec::Visible { write, origin, key } => {
                    let remote_dcs = match key {
                        Some(k) => self.topology.dcs_of(self.topology.partition_of(&k)).len() as u16 - 1,
                        None => self.topology.dcs() as u16 - 1,
                    };
                    self.metrics.visible(write, origin, dc, self.now, remote_dcs)
                }
                ObsRec::Blocked { what, waited_us } => self.metrics.blocked(what, waited_us, self.now),
                ObsRec::Sample { what, value } => self.metrics.sample(what, value, self.now),
            }
        }
        self.nodes[node.idx()].obs = obs;
    }

    /// Feed an input to a node, or queue it if the node is busy or paused.
    fn node_input(&mut self, node: NodeId, input: NodeInput<P::Msg>) {
        let n = &mut self.nodes[node.idx()];
        if n.crashed {
            // Lost with the node: sequenced peer messages wait in their
            // senders' durable outboxes and are resent when it restarts
            // ([`Sim::restart`]); client requests and unsequenced peer
            // messages are gone (the client's deadline covers a request,
            // the protocol's next tick a heartbeat).
            return;
        }
        let ready = n.busy_until.max(n.paused_until);
        if self.now < ready || !n.inbox.is_empty() {
            n.inbox.push_back((self.now, input));
            self.ensure_wake(node);
            return;
        }
        self.run_node(node, Some(input));
    }

    fn ensure_wake(&mut self, node: NodeId) {
        let n = &mut self.nodes[node.idx()];
        let ready = n.busy_until.max(n.paused_until).max(self.now);
        if n.wake_at.is_none_or(|w| w > ready) || n.wake_at.is_some_and(|w| w < self.now) {
            n.wake_at = Some(ready);
            self.schedule(ready, Ev::Wake { node });
        }
    }

    fn on_wake(&mut self, node: NodeId) {
        {
            let n = &mut self.nodes[node.idx()];
            if n.wake_at != Some(self.now) {
                return; // superseded
            }
            n.wake_at = None;
            if n.crashed {
                return;
            }
        }
        let costs = self.cpu_costs();
        loop {
            let n = &mut self.nodes[node.idx()];
            if self.now < n.busy_until.max(n.paused_until) {
                break;
            }
            let Some((arrived_us, input)) = n.inbox.pop_front() else { break };
            if costs {
                // How long the input waited for the CPU (or a pause).
                self.metrics.sample("cpu_queue_wait_us", self.now - arrived_us, self.now);
            }
            self.run_node(node, Some(input));
        }
        if !self.nodes[node.idx()].inbox.is_empty() {
            self.ensure_wake(node);
        }
    }

    /// Whether handling a message costs simulated CPU time.
    fn cpu_costs(&self) -> bool {
        self.sc.cpu.service_us > 0 || self.sc.cpu.us_per_kib > 0.0 || !self.kind_us.is_empty()
    }

    /// Run one handler (`None`: `on_start`), append the turn's records to
    /// the node's log, and end the turn when its CPU time is over: at once
    /// when it costs nothing ([`Sim::end_turn`]).
    fn run_node(&mut self, node: NodeId, input: Option<NodeInput<P::Msg>>) {
        let per_kib = self.sc.cpu.us_per_kib;
        let in_bytes = match &input {
            Some(NodeInput::Peer { msg, .. } | NodeInput::Client { msg, .. }) if per_kib > 0.0 => wire_size(msg),
            _ => 0,
        };
        let kind_us = if self.kind_us.is_empty() {
            0.0
        } else {
            let kind = match &input {
                Some(NodeInput::Peer { msg, .. } | NodeInput::Client { msg, .. }) => msg.kind(),
                Some(NodeInput::Timer { .. }) => "timer",
                None => "start",
            };
            self.kind_us.get(kind).copied().unwrap_or(0.0)
        };
        let busy_us = self.sc.cpu.service_us + (in_bytes as f64 / 1024.0 * per_kib + kind_us).round() as u64;
        let n = &mut self.nodes[node.idx()];
        let mut host = SimHost {
            dc: n.dc,
            full: self.full,
            now_local: (CLOCK_EPOCH_US as i64 + n.clock.read_signed(self.now)).max(0) as u64,
            timers: &mut self.timers,
            obs: &mut n.obs,
        };
        let tag = match input {
            None => {
                n.core.start(&mut host);
                0
            }
            Some(NodeInput::Peer { from, seq, msg }) => {
                let t = stable_hash(msg.kind().as_bytes());
                n.core.step(&mut host, NodeInput::Peer { from, seq, msg });
                t ^ from.0 as u64
            }
            Some(NodeInput::Client { from, msg }) => {
                let t = stable_hash(msg.kind().as_bytes());
                n.core.step(&mut host, NodeInput::Client { from: from.as_seen_by(node), msg });
                t ^ ((from.0 as u64) << 20)
            }
            Some(NodeInput::Timer { token }) => {
                n.core.step(&mut host, NodeInput::Timer { token });
                token.rotate_left(17)
            }
        };
        // A turn synced as it ends, with nothing that could come between,
        // goes straight to the durable log.
        let at_once = busy_us == 0
            && self.sc.durability.fsync == FsyncPolicy::Always
            && n.armed.is_none()
            && !self.node_options.mutant_release_before_sync;
        let _ = n.log.append(n.core.ready(), at_once);
        if busy_us > 0 {
            n.busy_until = self.now + busy_us;
        }
        let incarnation = n.incarnation;
        let mut timers = std::mem::take(&mut self.timers);
        for (after, token) in timers.drain(..) {
            self.schedule(self.now + after, Ev::Timer { node, token, incarnation });
        }
        self.timers = timers;
        self.events += 1;
        self.trace = mix(self.trace, self.now ^ ((node.0 as u64) << 40));
        self.trace = mix(self.trace, tag);
        if busy_us > 0 {
            self.schedule(self.now + busy_us, Ev::TurnEnd { node, incarnation });
        } else {
            self.end_turn(node);
        }
    }

    /// A node's turn is over: an armed crash strikes if the turn logged
    /// something; otherwise the log syncs per its policy (group commit may
    /// leave the records for later) and what became durable leaves.
    fn end_turn(&mut self, node: NodeId) {
        let policy = self.sc.durability.fsync;
        let group_us = self.sc.durability.group_us;
        // Only the mutant core has released anything before the sync: it
        // leaves before a crash can stop it.
        self.route_released(node);
        let n = &mut self.nodes[node.idx()];
        let appended = n.log.appended();
        let logged = appended.must_sync || n.log.has_pending();
        let sync_now = match policy {
            FsyncPolicy::Always | FsyncPolicy::Never => true,
            FsyncPolicy::Group => !appended.must_sync || n.inbox.is_empty() || self.now >= n.last_sync_us + group_us,
        };
        if let Some(point) = n.armed
            && logged
        {
            match point {
                CrashPoint::AfterAppend => return self.crash(node),
                CrashPoint::TornTail => {
                    let keep = (self.trace % n.log.pending_len().max(1) as u64) as usize;
                    n.log.tear(keep);
                    return self.crash(node);
                }
                CrashPoint::AfterSync if sync_now => {
                    n.log.sync();
                    return self.crash(node);
                }
                CrashPoint::AfterSync => {}
            }
        }
        if sync_now {
            self.sync_node(node);
        } else if n.group_sync_at.is_none() {
            let at = n.last_sync_us + group_us;
            n.group_sync_at = Some(at);
            let incarnation = n.incarnation;
            self.schedule(at, Ev::GroupSync { node, incarnation });
        }
        self.record_obs(node);
    }

    /// Sync a node's log: every turn appended is durable, its output may
    /// leave.
    fn sync_node(&mut self, node: NodeId) {
        let n = &mut self.nodes[node.idx()];
        if n.log.has_pending() {
            n.log.sync();
            n.last_sync_us = self.now;
        }
        n.core.advance(n.log.appended().lsn);
        if n.log.wants_compaction(n.core.store()) {
            // Entries a peer has durably handled leave the outbox (the
            // network runtime's acknowledgements).
            let acked: Vec<u64> = self.nodes.iter().map(|p| p.log.delivered(node)).collect();
            let n = &mut self.nodes[node.idx()];
            n.log.compact(n.core.store(), &acked);
        }
        self.route_released(node);
    }

    /// Group commit's deadline: sync what is waiting (unless a turn is in
    /// service; its end decides).
    fn group_sync(&mut self, node: NodeId, incarnation: u32) {
        let n = &mut self.nodes[node.idx()];
        if n.crashed || n.incarnation != incarnation {
            return;
        }
        n.group_sync_at = None;
        if self.now < n.busy_until {
            let at = n.busy_until;
            n.group_sync_at = Some(at);
            self.schedule(at, Ev::GroupSync { node, incarnation });
            return;
        }
        if n.armed == Some(CrashPoint::AfterSync) && n.log.has_pending() {
            n.log.sync();
            return self.crash(node);
        }
        self.sync_node(node);
    }

    fn client_next(&mut self, c: ClientId) {
        if self.clients[c.idx()].busy.is_some() || self.clients[c.idx()].dead {
            return;
        }
        let op = {
            let s = &mut self.clients[c.idx()];
            match &mut s.scripted {
                Some(ops) => match ops.front() {
                    Some(o) if o.at_us <= self.now => ops.pop_front().map(|o| o.op),
                    Some(o) => {
                        let at = o.at_us;
                        self.schedule(at, Ev::ClientNext { client: c });
                        return;
                    }
                    None => None,
                },
                None if !s.pending.is_empty() => s.pending.pop_front(),
                None if self.now < self.stop_issuing_us
                    && (self.sc.workload.operationcount == 0 || self.issued < self.sc.workload.operationcount) =>
                {
                    self.issued += 1;
                    let writes = &mut s.writes;
                    let mut write_id = || {
                        *writes += 1;
                        ((c.0 as u64 + 1) << 32) | *writes
                    };
                    let mut r = self.workload.next_request(
                        &self.sc.workload,
                        s.workload_index,
                        s.dc,
                        &mut s.rng,
                        &mut write_id,
                    );
                    s.request = r.name.map(|n| (n, self.now));
                    let first = r.ops.pop_front();
                    s.pending = r.ops;
                    first
                }
                None => None,
            }
        };
        let Some(op) = op else { return };
        self.events += 1;
        self.trace = mix(self.trace, self.now ^ 0xc1 ^ ((c.0 as u64) << 24));
        let s = &mut self.clients[c.idx()];
        s.busy = Some((op.clone(), self.now));
        s.op_no += 1;
        s.rounds = 0;
        s.notes.clear();
        let op_no = s.op_no;
        let mut env =
            CEnv { now: self.now + CLOCK_EPOCH_US, out: &mut self.out, done: &mut self.done, notes: &mut s.notes };
        s.proto.invoke(&mut env, op);
        if self.sc.client_timeout_ms > 0 {
            self.schedule(self.now + self.sc.client_timeout_ms * 1_000, Ev::ClientDeadline { client: c, op_no });
        }
        self.after_client(c);
    }

    fn after_client(&mut self, c: ClientId) {
        if self.sc.latency_by_rounds && self.out.iter().any(|o| matches!(o, Out::Send(..))) {
            self.clients[c.idx()].rounds += 1;
        }
        self.flush_client(c);
        if let Some(result) = self.done.take() {
            let (op, invoke_us) = self.clients[c.idx()].busy.take().expect("completion without an operation");
            let failed = matches!(result, OpResult::Failed(_));
            // Keys are rows, columns locations (a plain key is one of each).
            let (keys, columns) = match &op {
                Op::Get { .. } | Op::Put { .. } | Op::Add { .. } => (1, 1),
                // A slice reads one row and as many columns as it returns.
                Op::Slice { .. } => match &result {
                    OpResult::Slice(cells) => (1, cells.len().max(1)),
                    _ => (1, 1),
                },
                Op::Rot { keys } => (rows(keys.iter()), keys.len()),
                Op::Wot { writes } | Op::Batch { writes } => (rows(writes.iter().map(|(k, _)| k)), writes.len()),
                Op::Txn { reads, writes } => {
                    (rows(reads.iter()) + rows(writes.iter().map(|(k, _)| k)), reads.len() + writes.len())
                }
            };
            self.metrics.op_done(op.kind(), invoke_us, self.now, failed);
            self.metrics.keys_done(keys, columns, invoke_us, failed);
            let s = &self.clients[c.idx()];
            if self.sc.latency_by_rounds
                && let Some(name) = noted_name(op.kind(), &s.notes).or_else(|| rounds_name(op.kind(), s.rounds))
            {
                self.metrics.request_done(name, invoke_us, self.now, failed);
            }
            if self.sc.measure_staleness {
                self.metrics.staleness(&op, &result, invoke_us, self.now);
            }
            if let Op::Rot { keys } = &op {
                self.classify_rot(c, keys, invoke_us, failed);
            }
            let s = &mut self.clients[c.idx()];
            if s.pending.is_empty() || failed {
                s.pending.clear();
                if let Some((name, start_us)) = s.request.take() {
                    self.metrics.request_done(name, start_us, self.now, failed);
                }
            }
            self.trace = mix(self.trace, 0xd0e ^ self.now);
            if let Some(h) = self.history.as_mut() {
                let rec = OpRecord {
                    client: c,
                    dc: self.clients[c.idx()].dc,
                    op,
                    result,
                    invoke_us,
                    complete_us: self.now,
                    batch: None,
                };
                // A batch's number: the history's length, unique in the run.
                let id = h.ops.len() as u64;
                h.ops.extend(rec.expand(id));
            }
            let s = &self.clients[c.idx()];
            let think = if s.scripted.is_some() || !s.pending.is_empty() { 0 } else { self.sc.workload.think_time_us };
            self.schedule(self.now + think, Ev::ClientNext { client: c });
        }
    }

    /// While a node is slowed (Roohitavaf's ROTX experiment), ROT latency is
    /// also reported apart for ROTs that touch a slowed server and those
    /// that do not.
    fn classify_rot(&mut self, c: ClientId, keys: &[causeway_core::Key], invoke_us: u64, failed: bool) {
        if self.slowed == 0 {
            return;
        }
        let dc = self.clients[c.idx()].dc;
        let t = &self.topology;
        let touches = keys.iter().any(|k| {
            let p = t.partition_of(k);
            t.server(t.nearest_dc_storing(dc, p), p).is_some_and(|n| self.nodes[n.idx()].slow_extra_us > 0)
        });
        let name = if touches { "rot_touching_slow" } else { "rot_not_touching_slow" };
        self.metrics.request_done(name, invoke_us, self.now, failed);
    }

    /// Crash a node: its server's fields, timers, queued inputs and every
    /// log record not yet synced are gone, and so is the output that
    /// waited for them. Sequenced messages it had not handled, or whose
    /// handling it lost, are resent from their senders' durable outboxes
    /// when it restarts (the network runtime resends everything a peer has
    /// not durably acknowledged).
    fn crash(&mut self, node: NodeId) {
        let n = &mut self.nodes[node.idx()];
        if n.crashed {
            return;
        }
        // A snapshot at the crash is the live state only if nothing unsynced
        // is lost with it.
        n.restart_floor = if n.log.has_pending() { None } else { n.core.server().snapshot_floor() };
        n.log.tear(0);
        n.crashed = true;
        n.armed = None;
        n.incarnation += 1;
        n.wake_at = None;
        n.group_sync_at = None;
        n.inbox.clear();
        n.obs.clear();
        self.trace = mix(self.trace, 0xc7a5 ^ self.now ^ ((node.0 as u64) << 40));
    }

    /// Restart a crashed node from its log: a fresh node core over the
    /// durable state (store, metadata, channel marks), the outboxes
    /// resent both ways, then `on_start`. A restart of a running node
    /// disarms a crash that was waiting for its turn (its window is over).
    ///
    /// About half the restarts (by a bit of the trace hash, so a seed
    /// replays the same choice) come instead from a snapshot taken as the
    /// node crashed: each chain cut where the protocol's
    /// [`causeway_core::Server::snapshot_floor`] says, as the network
    /// runtime's checkpoint cuts it. So randomized fault runs check that a
    /// cut leaves out nothing a restarted node needs.
    fn restart(&mut self, node: NodeId) {
        if !self.nodes[node.idx()].crashed {
            self.nodes[node.idx()].armed = None;
            return;
        }
        let ctx = NodeCtx { id: node, role: self.topology.role(node), topology: self.topology.clone() };
        let from_snapshot = self.trace & 1 == 1;
        let n = &mut self.nodes[node.idx()];
        let floor = n.restart_floor.take().filter(|_| from_snapshot);
        let durable = n.log.recovered(floor.as_ref());
        let (core, outbox) = causeway_core::Node::recover(&self.cfg, ctx, durable, self.node_options);
        n.core = core;
        n.crashed = false;
        n.busy_until = self.now;
        n.last_sync_us = self.now;
        self.trace = mix(self.trace, 0x5e57 ^ self.now ^ ((node.0 as u64) << 40));
        // Each channel resends from where its receiver's handling stops,
        // before anything new goes on it.
        for (to, q) in outbox.into_iter().enumerate() {
            let to = NodeId(to as u32);
            let handled = self.nodes[to.idx()].core.delivered()[node.idx()];
            for (seq, msg) in q.into_iter().filter(|(seq, _)| *seq > handled) {
                self.transmit(Addr::Node(node), Addr::Node(to), msg, Some(Seq::Nth(seq)));
            }
        }
        for from in 0..self.nodes.len() {
            let from = NodeId(from as u32);
            // A crashed sender resends when it restarts.
            if from == node || self.nodes[from.idx()].crashed {
                continue;
            }
            let handled = self.nodes[node.idx()].core.delivered()[from.idx()];
            let resend: Vec<(u64, P::Msg)> = self.nodes[from.idx()]
                .log
                .outbox_to(node)
                .filter(|(seq, _)| *seq > handled)
                .map(|(seq, msg)| (*seq, msg.clone()))
                .collect();
            for (seq, msg) in resend {
                self.transmit(Addr::Node(from), Addr::Node(node), msg, Some(Seq::Nth(seq)));
            }
        }
        self.run_node(node, None);
    }

    /// A client's deadline: if its `op_no`-th operation is still running,
    /// record it as timed out (outcome unknown) and continue the session as
    /// a new client, since the old one's causal context may be ahead of
    /// what it was told (replies for the old one are dropped).
    fn deadline(&mut self, c: ClientId, op_no: u64) {
        let s = &self.clients[c.idx()];
        if s.dead || s.op_no != op_no || s.busy.is_none() {
            return;
        }
        let after_ms = self.sc.client_timeout_ms;
        self.done = Some(OpResult::Failed(causeway_core::OpError::TimedOut { after_ms }));
        // Recorded like a completion, under the old session; the request it
        // belonged to fails with it.
        self.clients[c.idx()].dead = true;
        self.after_client(c);
        let id = ClientId(self.clients.len() as u32);
        let old = &mut self.clients[c.idx()];
        let dc = old.dc;
        let replacement = Session {
            proto: P::client(
                &self.cfg,
                ClientCtx {
                    id,
                    dc,
                    nonce: mix(self.sc.seed, 0x5e55_0000 + id.0 as u64),
                    topology: self.topology.clone(),
                },
            ),
            dc,
            rng: old.rng.clone(),
            busy: None,
            scripted: old.scripted.take(),
            writes: old.writes,
            workload_index: old.workload_index,
            pending: VecDeque::new(),
            request: None,
            op_no: 0,
            dead: false,
            rounds: 0,
            notes: Vec::new(),
        };
        let think = if replacement.scripted.is_some() { 0 } else { self.sc.workload.think_time_us };
        self.clients.push(replacement);
        self.trace = mix(self.trace, 0x71e0 ^ self.now ^ ((c.0 as u64) << 24));
        self.schedule(self.now + think, Ev::ClientNext { client: id });
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

    /// The operations invoked and not completed by now, as records whose
    /// result is [`causeway_core::OpError::Pending`] and whose `complete_us`
    /// is now: a blocked or livelocked operation stays in the history.
    pub fn pending_records(&self) -> Vec<OpRecord> {
        // With nothing left to happen the operations wait to the run's end.
        let now = if self.heap.is_empty() { self.now.max(self.end_us) } else { self.now };
        self.clients
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.dead)
            .filter_map(|(i, s)| {
                let (op, invoke_us) = s.busy.clone()?;
                Some(OpRecord {
                    client: ClientId(i as u32),
                    dc: s.dc,
                    op,
                    result: OpResult::Failed(causeway_core::OpError::Pending),
                    invoke_us,
                    complete_us: now,
                    batch: None,
                })
            })
            // A pending batch's number: past any completed operation's.
            .enumerate()
            .flat_map(|(j, r)| r.expand(u64::MAX / 2 + j as u64))
            .collect()
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
            clients: self.clients.len(),
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
            trace_hash: format!("{:016x}", self.trace),
        }
    }
}
