//! A simulated node: the node core with its machine around it — a clock,
//! a CPU that serves one input at a time and holds the turn's output until
//! its service time is over, and a write-ahead log whose unsynced tail a
//! crash loses — and the crash and restart that test them.

use super::*;

/// A simulated node: the node core (the protocol server, its store and
/// channel bookkeeping) with the simulated machine around it — its clock,
/// its CPU (one input at a time), its log.
pub(super) struct SimNode<P: Protocol> {
    pub(super) core: causeway_core::Node<P>,
    pub(super) log: SimLog<P>,
    pub(super) dc: DcId,
    pub(super) clock: ClockModel,
    /// Inputs waiting for the CPU, with their arrival times.
    pub(super) inbox: VecDeque<(u64, NodeInput<P::Msg>)>,
    pub(super) busy_until: u64,
    pub(super) paused_until: u64,
    pub(super) wake_at: Option<u64>,
    pub(super) crashed: bool,
    /// Restarts so far: timers set by an earlier incarnation are void.
    pub(super) incarnation: u32,
    pub(super) slow_extra_us: u64,
    /// Observations of the turn in service, recorded when its service ends.
    pub(super) obs: Vec<ObsRec>,
    /// When the log was last synced, and the group-commit deadline armed.
    pub(super) last_sync_us: u64,
    pub(super) group_sync_at: Option<u64>,
    /// The sync on the disk, when syncs take time: how many of the log's
    /// pending records it covers, and the last turn among them.
    pub(super) sync_in_flight: Option<InFlightSync>,
    /// A crash waiting for the end of this node's next turn that logs.
    pub(super) armed: Option<CrashPoint>,
    /// Where a snapshot taken at the crash would cut each chain, when the
    /// crash lost nothing unsynced (the live state was the durable one).
    pub(super) restart_floor: Option<SnapshotFloor<P::Version>>,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct InFlightSync {
    pub(super) records: usize,
    pub(super) lsn: u64,
}

pub(super) enum ObsRec {
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
pub(super) struct SimHost<'a> {
    pub(super) dc: DcId,
    /// Under full replication every key is everywhere, so visibility
    /// accounting need not look at the key.
    pub(super) full: bool,
    pub(super) now_local: u64,
    pub(super) timers: &'a mut Vec<(u64, u64)>,
    pub(super) obs: &'a mut Vec<ObsRec>,
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
pub(super) fn record_visible(obs: &mut Vec<ObsRec>, dc: DcId, full: bool, key: &[u8], value: &Value, origin: DcId) {
    if let Some(write) = write_id_of(value) {
        let key = (origin == dc && !full).then(|| bytes::Bytes::copy_from_slice(key));
        obs.push(ObsRec::Visible { write, origin, key });
    }
}

impl<P: Protocol> Sim<P> {
    /// Route what a node's core released: its turns whose records are
    /// durable.
    pub(super) fn route_released(&mut self, node: NodeId) {
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
    pub(super) fn record_obs(&mut self, node: NodeId) {
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
                ObsRec::Sample { what, value } => {
                    self.metrics.sample(what, value, self.now);
                    self.metrics.sampled_by(what, node.idx());
                }
            }
        }
        self.nodes[node.idx()].obs = obs;
    }

    /// Feed an input to a node, or queue it if the node is busy or paused.
    pub(super) fn node_input(&mut self, node: NodeId, input: NodeInput<P::Msg>) {
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

    pub(super) fn ensure_wake(&mut self, node: NodeId) {
        let n = &mut self.nodes[node.idx()];
        let ready = n.busy_until.max(n.paused_until).max(self.now);
        if n.wake_at.is_none_or(|w| w > ready) || n.wake_at.is_some_and(|w| w < self.now) {
            n.wake_at = Some(ready);
            self.schedule(ready, Ev::Wake { node });
        }
    }

    pub(super) fn on_wake(&mut self, node: NodeId) {
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
    pub(super) fn cpu_costs(&self) -> bool {
        self.sc.cpu.service_us > 0
            || self.sc.cpu.us_per_kib > 0.0
            || !self.kind_us.is_empty()
            || !self.item_us.is_empty()
    }

    /// Run one handler (`None`: `on_start`), append the turn's records to
    /// the node's log, and end the turn when its CPU time is over: at once
    /// when it costs nothing ([`Sim::end_turn`]).
    pub(super) fn run_node(&mut self, node: NodeId, input: Option<NodeInput<P::Msg>>) {
        let per_kib = self.sc.cpu.us_per_kib;
        let in_bytes = match &input {
            Some(NodeInput::Peer { msg, .. } | NodeInput::Client { msg, .. }) if per_kib > 0.0 => wire_size(msg),
            _ => 0,
        };
        let kind_us = if self.kind_us.is_empty() && self.item_us.is_empty() {
            0.0
        } else {
            let (kind, items) = match &input {
                Some(NodeInput::Peer { msg, .. } | NodeInput::Client { msg, .. }) => (msg.kind(), msg.items()),
                Some(NodeInput::Timer { .. }) => ("timer", 0),
                None => ("start", 0),
            };
            self.kind_us.get(kind).copied().unwrap_or(0.0)
                + items as f64 * self.item_us.get(kind).copied().unwrap_or(0.0)
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
            && self.sc.durability.sync_us == 0
            && n.armed.is_none()
            && !self.node_options.mutant_release_before_sync;
        let _ = n.log.append(n.core.ready(), at_once);
        if busy_us > 0 {
            n.busy_until = self.now + busy_us;
            self.metrics.busy(node.idx(), self.now, busy_us);
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
    pub(super) fn end_turn(&mut self, node: NodeId) {
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
    pub(super) fn sync_node(&mut self, node: NodeId) {
        let sync_us = self.sc.durability.sync_us;
        let n = &mut self.nodes[node.idx()];
        if sync_us > 0 && self.sc.durability.fsync != FsyncPolicy::Never {
            // One sync at a time: what was appended since the one on the
            // disk began waits for its end ([`Sim::sync_done`]).
            if n.sync_in_flight.is_some() {
                return;
            }
            if n.log.has_pending() {
                n.sync_in_flight = Some(InFlightSync { records: n.log.pending_len(), lsn: n.log.appended().lsn });
                let incarnation = n.incarnation;
                self.schedule(self.now + sync_us, Ev::SyncDone { node, incarnation });
                return;
            }
        }
        if n.log.has_pending() {
            n.log.sync();
            n.last_sync_us = self.now;
        }
        n.core.advance(n.log.appended().lsn);
        self.compact_if_due(node);
        self.route_released(node);
    }

    /// A checkpoint when the log asks for one: entries a peer has durably
    /// handled leave the outbox (the network runtime's acknowledgements).
    fn compact_if_due(&mut self, node: NodeId) {
        let n = &self.nodes[node.idx()];
        if n.log.wants_compaction(n.core.store()) {
            // A node that never crashes (its log volatile) never loses what
            // it handled: its delivery marks are as good as durable.
            let acked: Vec<u64> = self
                .nodes
                .iter()
                .map(|p| if p.log.is_volatile() { p.core.delivered()[node.idx()] } else { p.log.delivered(node) })
                .collect();
            let n = &mut self.nodes[node.idx()];
            n.log.compact(n.core.store(), &acked);
        }
    }

    /// A sync that took `durability.sync_us` is over: the records it
    /// covered are durable and the output of their turns leaves. Records
    /// appended while it ran go to the disk next, all in one sync (group
    /// commit); a later turn that logged nothing leaves now, unless it is
    /// still in service (its own end releases it).
    pub(super) fn sync_done(&mut self, node: NodeId, incarnation: u32) {
        let n = &mut self.nodes[node.idx()];
        if n.crashed || n.incarnation != incarnation {
            return;
        }
        let Some(done) = n.sync_in_flight.take() else { return };
        n.log.sync_prefix(done.records);
        n.last_sync_us = self.now;
        n.core.advance(done.lsn);
        if n.log.has_pending() {
            self.route_released(node);
            return self.sync_node(node);
        }
        if self.now >= n.busy_until {
            n.core.advance(n.log.appended().lsn);
        }
        self.compact_if_due(node);
        self.route_released(node);
    }

    /// Group commit's deadline: sync what is waiting (unless a turn is in
    /// service; its end decides).
    pub(super) fn group_sync(&mut self, node: NodeId, incarnation: u32) {
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

    /// Crash a node: its server's fields, timers, queued inputs and every
    /// log record not yet synced are gone, and so is the output that
    /// waited for them. Sequenced messages it had not handled, or whose
    /// handling it lost, are resent from their senders' durable outboxes
    /// when it restarts (the network runtime resends everything a peer has
    /// not durably acknowledged).
    pub(super) fn crash(&mut self, node: NodeId) {
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
        n.sync_in_flight = None;
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
    pub(super) fn restart(&mut self, node: NodeId) {
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
}
