//! Client sessions: issuing operations (scripted or from the workload),
//! their replies, deadlines and timeouts, and the history and latency
//! measurements each completed operation feeds.

use super::*;

pub(super) struct Session<P: Protocol> {
    pub(super) proto: P::Client,
    pub(super) dc: DcId,
    pub(super) rng: ChaCha8Rng,
    pub(super) busy: Option<(Op, u64)>,
    /// The session levels the busy operation asked for.
    pub(super) levels: Option<causeway_core::Levels>,
    /// The checking group the busy GET named for itself.
    pub(super) checking_group: Option<u16>,
    pub(super) scripted: Option<VecDeque<crate::scenario::ScriptedOp>>,
    pub(super) writes: u64,
    /// Index among the workload's random clients (key groups need it).
    pub(super) workload_index: u64,
    /// The rest of a multi-operation request (an amplified insert), and its
    /// name and start time.
    pub(super) pending: VecDeque<Op>,
    pub(super) request: Option<(&'static str, u64)>,
    /// Operations invoked so far, to match a deadline with its operation.
    pub(super) op_no: u64,
    /// Replaced by a new session after a timeout: replies and timers for it
    /// are dropped.
    pub(super) dead: bool,
    /// Client inputs of the current operation that sent messages (for
    /// `latency_by_rounds`).
    pub(super) rounds: u32,
    /// Labels the client noted for the current operation
    /// ([`ClientEnv::note`], for `latency_by_rounds`).
    pub(super) notes: Vec<&'static str>,
    /// The interactive transaction in progress: its steps are the
    /// session's operations, its record is one.
    pub(super) itx: Option<crate::interactive::Run>,
}

impl<P: Protocol> Session<P> {
    /// A session with nothing invoked yet: a new one, or the one that
    /// replaces a session that timed out (which keeps its generator, script
    /// and place in the workload).
    pub(super) fn new(
        proto: P::Client,
        dc: DcId,
        rng: ChaCha8Rng,
        scripted: Option<VecDeque<crate::scenario::ScriptedOp>>,
        writes: u64,
        workload_index: u64,
    ) -> Self {
        Session {
            proto,
            dc,
            rng,
            busy: None,
            levels: None,
            checking_group: None,
            scripted,
            writes,
            workload_index,
            pending: VecDeque::new(),
            request: None,
            op_no: 0,
            dead: false,
            rounds: 0,
            notes: Vec::new(),
            itx: None,
        }
    }
}

/// What a client session's handler produced.
pub(super) enum Out<M> {
    Send(NodeId, M),
    Timer(u64, u64),
}

pub(super) struct CEnv<'a, M> {
    pub(super) now: u64,
    pub(super) out: &'a mut Vec<Out<M>>,
    pub(super) done: &'a mut Option<OpResult>,
    pub(super) notes: &'a mut Vec<&'static str>,
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
pub(super) fn rounds_name(kind: causeway_core::OpKind, rounds: u32) -> Option<&'static str> {
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
pub(super) fn noted_name(kind: causeway_core::OpKind, notes: &[&'static str]) -> Option<&'static str> {
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

/// How many distinct rows `keys` name (a plain key is its own row; the
/// columns of one row count once). Plain keys only: their count.
pub(super) fn rows<'a>(keys: impl Iterator<Item = &'a causeway_core::Key> + Clone) -> usize {
    if !keys.clone().any(|k| causeway_core::column::is_location_key(k)) {
        return keys.count();
    }
    let mut rows: Vec<&[u8]> = keys.map(|k| causeway_core::column::row_of(k)).collect();
    rows.sort_unstable();
    rows.dedup();
    rows.len()
}

impl<P: Protocol> Sim<P> {
    /// Route what a client session's handler produced.
    pub(super) fn flush_client(&mut self, c: ClientId) {
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

    pub(super) fn client_next(&mut self, c: ClientId) {
        if self.clients[c.idx()].busy.is_some() || self.clients[c.idx()].dead {
            return;
        }
        // A scripted operation may name the DC it is issued from: the
        // session moves there first (or, sticky, fails the operation).
        let mut from_dc = None;
        // And the checking group a GET names (ACCF), scripted or drawn.
        let mut checking_group = None;
        let op = {
            let s = &mut self.clients[c.idx()];
            match &mut s.scripted {
                Some(ops) => match ops.front() {
                    Some(o) if o.at_us <= self.now => ops.pop_front().map(|o| {
                        from_dc = o.from_dc.map(DcId).filter(|&d| d != s.dc);
                        checking_group = o.checking_group;
                        o.op
                    }),
                    Some(o) => {
                        let at = o.at_us;
                        self.schedule(at, Ev::ClientNext { client: c });
                        return;
                    }
                    None => None,
                },
                None if !s.pending.is_empty() => {
                    let op = s.pending.pop_front();
                    checking_group = self.draw_checking_group(c, op.as_ref());
                    op
                }
                None if self.now < self.stop_issuing_us
                    && (self.sc.workload.operationcount == 0 || self.issued < self.sc.workload.operationcount) =>
                {
                    self.issued += 1;
                    // Client migration before a new request, where the
                    // protocol allows it (checked when the simulation was
                    // built); no draw at all at a proportion of 0.
                    let dcs = self.topology.dcs();
                    let p = self.sc.workload.migrate_proportion;
                    if p > 0.0 && dcs > 1 && s.rng.random_bool(p) {
                        let other = s.rng.random_range(0..dcs - 1);
                        let to = DcId(if other >= s.dc.idx() { other + 1 } else { other } as u16);
                        let moved = s.proto.migrate(to);
                        debug_assert!(moved, "{} declares MIGRATES and refused between operations", P::NAME);
                        if moved {
                            s.dc = to;
                            self.trace = mix(self.trace, 0x3167 ^ self.now ^ ((c.0 as u64) << 24) ^ to.0 as u64);
                        }
                    }
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
                    s.itx = r.interactive.map(|plan| crate::interactive::Run::new(plan, self.now));
                    let first = r.ops.pop_front();
                    s.pending = r.ops;
                    checking_group = self.draw_checking_group(c, first.as_ref());
                    first
                }
                None => None,
            }
        };
        let Some(op) = op else { return };
        let mut refusal = None;
        if let Some(to) = from_dc {
            let s = &mut self.clients[c.idx()];
            if s.proto.migrate(to) {
                s.dc = to;
                self.trace = mix(self.trace, 0x3167 ^ self.now ^ ((c.0 as u64) << 24) ^ to.0 as u64);
            } else {
                refusal = Some(causeway_core::OpError::Sticky { dc: to.0 });
            }
        }
        // For this GET only: named before it starts, cleared after.
        if refusal.is_none()
            && let Some(cg) = checking_group
            && let Err(e) = self.clients[c.idx()].proto.set_checking_group(Some(cg))
        {
            refusal = Some(e.into());
        }
        self.events += 1;
        self.trace = mix(self.trace, self.now ^ 0xc1 ^ ((c.0 as u64) << 24));
        let levels = self.levels_for(c, &op);
        let s = &mut self.clients[c.idx()];
        s.busy = Some((op.clone(), self.now));
        s.levels = levels;
        s.checking_group = checking_group;
        s.op_no += 1;
        s.rounds = 0;
        s.notes.clear();
        let op_no = s.op_no;
        let mut env =
            CEnv { now: self.now + CLOCK_EPOCH_US, out: &mut self.out, done: &mut self.done, notes: &mut s.notes };
        match (refusal, levels) {
            (Some(err), _) => env.complete(OpResult::Failed(err)),
            (None, None) => s.proto.invoke(&mut env, op),
            (None, Some(l)) => match l.refusal(&op, P::LEVELS, P::CAUSAL) {
                Some(err) => env.complete(OpResult::Failed(err)),
                None => s.proto.invoke_at(&mut env, op, l),
            },
        }
        if checking_group.is_some() {
            s.proto.set_checking_group(None).expect("naming no checking group is always accepted");
        }
        if self.sc.client_timeout_ms > 0 {
            self.schedule(self.now + self.sc.client_timeout_ms * 1_000, Ev::ClientDeadline { client: c, op_no });
        }
        self.after_client(c);
    }

    /// The checking group a generated GET of `c` names: with probability
    /// `checking_group_proportion`, one drawn uniformly from the
    /// protocol's; no draw at all at a proportion of 0.
    fn draw_checking_group(&mut self, c: ClientId, op: Option<&Op>) -> Option<u16> {
        let p = self.sc.workload.checking_group_proportion;
        if p <= 0.0 || !matches!(op, Some(Op::Get { .. })) {
            return None;
        }
        let rng = &mut self.clients[c.idx()].rng;
        rng.random_bool(p).then(|| rng.random_range(0..self.checking_groups))
    }

    /// The levels the workload has `c`'s next operation ask for: none for
    /// what is not a GET or PUT; drawn from a hash of the seed, the session
    /// and its operation number when random, so no other draw moves.
    fn levels_for(&self, c: ClientId, op: &Op) -> Option<causeway_core::Levels> {
        use causeway_core::{Levels, ReadLevel, WriteLevel};
        if !matches!(op, Op::Get { .. } | Op::Put { .. }) {
            return None;
        }
        let w = &self.sc.workload;
        if !w.random_levels {
            return w.levels;
        }
        let s = &self.clients[c.idx()];
        let h = mix(self.sc.seed ^ 0x001e_7e15, ((c.0 as u64) << 32) | (s.op_no + 1));
        Some(Levels { read: ReadLevel::ALL[(h & 3) as usize], write: WriteLevel::ALL[((h >> 2) & 3) as usize] })
    }

    pub(super) fn after_client(&mut self, c: ClientId) {
        if self.sc.latency_by_rounds && self.out.iter().any(|o| matches!(o, Out::Send(..))) {
            self.clients[c.idx()].rounds += 1;
        }
        self.flush_client(c);
        if let Some(result) = self.done.take() {
            let (op, invoke_us) = self.clients[c.idx()].busy.take().expect("completion without an operation");
            if op.kind() == causeway_core::OpKind::Interactive && self.clients[c.idx()].itx.is_some() {
                return self.interactive_step_done(c, result);
            }
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
                Op::Begin | Op::TxRead { .. } | Op::Commit { .. } | Op::Abort => (0, 0),
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
                    levels: self.clients[c.idx()].levels.take(),
                    checking_group: self.clients[c.idx()].checking_group.take(),
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

    /// A step of the session's interactive transaction answered: invoke
    /// the next one at once, or record the transaction that ended as one
    /// operation and go on with the workload.
    fn interactive_step_done(&mut self, c: ClientId, result: OpResult) {
        let s = &mut self.clients[c.idx()];
        let run = s.itx.as_mut().expect("checked");
        let invoke_us = run.invoke_us;
        let timed_out = matches!(result, OpResult::Failed(causeway_core::OpError::TimedOut { .. }));
        if !matches!(result, OpResult::Failed(_)) {
            run.answered_us = self.now;
        }
        let answered_us = run.answered_us;
        match run.on_result(result) {
            crate::interactive::Next::Step(op) => {
                s.pending.push_front(op);
                self.schedule(self.now + self.sc.workload.interactive_think_us, Ev::ClientNext { client: c });
            }
            crate::interactive::Next::Ended(record) => {
                s.itx = None;
                let failed = record.as_ref().is_none_or(|(_, r)| matches!(r, OpResult::Failed(_)));
                self.metrics.op_done(causeway_core::OpKind::Interactive, invoke_us, self.now, failed);
                self.trace = mix(self.trace, 0x17c ^ self.now);
                if let (Some(h), Some((op, result))) = (self.history.as_mut(), record) {
                    let dc = self.clients[c.idx()].dc;
                    // A step lost with a crash ends the transaction at the
                    // client's deadline, and it is recorded as the reads
                    // answered before (its writes never committed). Those
                    // had all completed when the last step was answered:
                    // recorded at the deadline, the liveness check would
                    // take them for a transaction that took that long.
                    let complete_us =
                        if timed_out && !matches!(result, OpResult::Failed(_)) { answered_us } else { self.now };
                    h.ops.push(OpRecord {
                        client: c,
                        dc,
                        op,
                        result,
                        invoke_us,
                        complete_us,
                        batch: None,
                        levels: None,
                        checking_group: None,
                    });
                }
                let think = if self.clients[c.idx()].scripted.is_some() { 0 } else { self.sc.workload.think_time_us };
                self.schedule(self.now + think, Ev::ClientNext { client: c });
            }
        }
    }

    /// While a node is slowed (Roohitavaf's ROTX experiment), ROT latency is
    /// also reported apart for ROTs that touch a slowed server and those
    /// that do not.
    pub(super) fn classify_rot(&mut self, c: ClientId, keys: &[causeway_core::Key], invoke_us: u64, failed: bool) {
        if self.slowed == 0 {
            return;
        }
        let dc = self.clients[c.idx()].dc;
        let t = &self.topology;
        let touches = keys.iter().any(|k| {
            let p = t.partition_of(k);
            t.server(t.serving_dc(dc, p), p).is_some_and(|n| self.nodes[n.idx()].slow_extra_us > 0)
        });
        let name = if touches { "rot_touching_slow" } else { "rot_not_touching_slow" };
        self.metrics.request_done(name, invoke_us, self.now, failed);
    }

    /// A client's deadline: if its `op_no`-th operation is still running,
    /// record it as timed out (outcome unknown) and continue the session as
    /// a new client, since the old one's causal context may be ahead of
    /// what it was told (replies for the old one are dropped).
    pub(super) fn deadline(&mut self, c: ClientId, op_no: u64) {
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
        let proto = P::client(
            &self.cfg,
            ClientCtx { id, dc, nonce: mix(self.sc.seed, 0x5e55_0000 + id.0 as u64), topology: self.topology.clone() },
        );
        let replacement = Session::new(proto, dc, old.rng.clone(), old.scripted.take(), old.writes, old.workload_index);
        let think = if replacement.scripted.is_some() { 0 } else { self.sc.workload.think_time_us };
        self.clients.push(replacement);
        self.trace = mix(self.trace, 0x71e0 ^ self.now ^ ((c.0 as u64) << 24));
        self.schedule(self.now + think, Ev::ClientNext { client: id });
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
                // An interactive transaction is pending between its steps too.
                if let Some(run) = &s.itx {
                    let (op, result) = run.pending_record()?;
                    let (client, dc, invoke_us) = (ClientId(i as u32), s.dc, run.invoke_us);
                    return Some(OpRecord {
                        client,
                        dc,
                        op,
                        result,
                        invoke_us,
                        complete_us: now,
                        batch: None,
                        levels: None,
                        checking_group: None,
                    });
                }
                let (op, invoke_us) = s.busy.clone()?;
                Some(OpRecord {
                    client: ClientId(i as u32),
                    dc: s.dc,
                    op,
                    result: OpResult::Failed(causeway_core::OpError::Pending),
                    invoke_us,
                    complete_us: now,
                    batch: None,
                    levels: s.levels,
                    checking_group: s.checking_group,
                })
            })
            // A pending batch's number: past any completed operation's.
            .enumerate()
            .flat_map(|(j, r)| r.expand(u64::MAX / 2 + j as u64))
            .collect()
    }
}
