//! Finishing a write-only transaction whose coordinator does not answer
//! (deviation 7 of the module doc).
//!
//! Lloyd's dissertation has only positive cohorts because it "assumes
//! that its logical servers do not fail" (§5.4.1, note 3), and describes
//! no recovery of 2PC-PCI; §6.2 builds each logical server from a Paxos
//! group so that a single machine's loss never shows. Here a server is one
//! machine, and one lost for good left every cohort of the transactions it
//! coordinated pending: every second-round read of their keys asked a
//! coordinator that never answered. The classic answer is the cooperative
//! termination of two-phase commit (Bernstein et al.,
//! *Concurrency Control and Recovery in Database Systems*, §7.4): a cohort
//! that waited too long asks the others; one that knows the outcome tells
//! it, and one that cannot have voted yet can refuse. Its known weak spot
//! is the case where every cohort has voted and none knows: the coordinator
//! may have decided anything. Two rules close it here.
//!
//! **The coordinator shows a commit only once a cohort knows it.** An
//! accepting coordinator that decides sends COMMIT, but makes its own writes
//! visible, answers the client and tells the remote DCs only at the first
//! ACK ([`Phase::Committing`] until then). So if no live cohort knows the
//! outcome, nobody outside the cohorts has seen a commit, and an abort is
//! safe — provided the coordinator, if it is only slow, can no longer show
//! its commit: a cohort that answers another's termination without knowing
//! the outcome *promises* (durably, [`Phase::Prepared`]'s `promised`) to
//! take the outcome from the termination only and leaves the coordinator's
//! COMMIT unacknowledged. A termination commits only by adopting a commit a
//! cohort already applied (so decided by the coordinator), and aborts only
//! when every *other* cohort has promised or one knows of an abort. Two
//! cohorts terminating at once reach the same outcome: a cohort that
//! promised never applies the coordinator's COMMIT afterwards, so the set
//! of cohorts that know a commit is fixed once every cohort has answered.
//! The same ACK is what Lloyd's 2.5 local round trips count (§5.4.5).
//!
//! The asker itself promises nothing (its own abort needs the others'
//! promises, not its own): until another cohort's termination asks it, it
//! still takes the COMMIT a coordinator that was only slow re-sends, so a
//! second cohort lost before it answers does not block it while the
//! coordinator lives. The coordinator is asked too, and answers only with
//! an outcome that no termination can change: an abort, or a commit it
//! has shown (some cohort acknowledged it, having promised nothing, so no
//! termination can collect every promise). Its decided but unshown commit
//! is "unknown" to a termination, since the promised cohorts may abort it.
//!
//! **A transaction with one cohort has a witness.** Between two parties
//! one cannot tell a lost partner from a slow one: if the cohort could
//! abort alone, the coordinator could never show a commit its cohort did
//! not acknowledge, and a cohort lost between its vote and its ACK would
//! leave the coordinator's keys pending for ever. The coordinator key's
//! server in the next DC breaks the tie: a coordinator whose cohort has not
//! acknowledged for `txn_terminate_ms` asks it to record the commit (and
//! shows it once recorded); a cohort whose coordinator has not answered
//! asks it to record an abort; whichever comes first is the outcome both
//! get. The record ([`State::Witness`]) is kept until the party that could
//! still ask has learned the outcome. (In a one-DC deployment there is no
//! witness, and such a cohort aborts alone: a lost cohort then leaves its
//! coordinator's keys pending, the case the witness exists for.)
//!
//! **Remote DCs** cannot abort (the accepting DC committed), and their
//! commit time is one more than the largest vote (see [`super::txn`]): a
//! cohort whose coordinator is silent asks the other cohorts for their
//! votes (it has its own and, from PREPARE, the coordinator's) and commits
//! at that time, as the coordinator would have.
//!
//! A cohort that ends a transaction this way tells the remote DCs' (or its
//! DC's other) participants. Cohorts remember what they applied for a while
//! ([`REMEMBER_TERMINATIONS`]), to answer terminations that ask late; one
//! that has no record answers "unknown", which never counts as a promise:
//! a termination then waits rather than guess. What stays blocked is what
//! blocks two-phase commit's own termination (Bernstein et al. §7.4): a
//! cohort that promised to a second cohort lost before telling anyone its
//! decision, while the coordinator's commit is decided but unshown (or the
//! coordinator is lost too) — the lost cohort may have aborted and
//! answered reads with that; and a cohort whose sub-request never came
//! (it has no record to refuse with) when the coordinator, which alone
//! would abort such a transaction, is lost.

use super::msg::*;
use super::server::EigerServer;
use crate::explicit_deps::replication::Stamp;
use causeway_core::{DcId, Key, NodeId, ServerEnv, Value};

/// How long a cohort remembers the outcome of a transaction it applied, in
/// `txn_terminate_ms`: a termination asks within a few of them of the
/// cohort's vote, unless the asker itself was paused or partitioned that
/// long (then, with no record, it waits instead).
pub const REMEMBER_TERMINATIONS: u64 = 20;

impl EigerServer {
    /// The witness of a transaction accepted in this DC with exactly one
    /// cohort: the coordinator key's server in the next DC. None with more
    /// cohorts (they answer for each other) or in a one-DC deployment.
    pub(super) fn witness_of(&self, info: &TxnInfo) -> Option<NodeId> {
        let dcs = self.node.topology.dcs();
        if dcs < 2 || self.cohorts(info).len() != 1 {
            return None;
        }
        let next = DcId(((self.node.dc.0 as usize + 1) % dcs) as u16);
        self.node.topology.server_for_key(next, &info.coord_key)
    }

    /// The transaction's coordinators in the other DCs.
    fn remote_coordinators(&self, info: &TxnInfo) -> Vec<NodeId> {
        let topology = &self.node.topology;
        topology
            .dc_ids()
            .filter(|&dc| dc != self.node.dc)
            .filter_map(|dc| topology.server_for_key(dc, &info.coord_key))
            .collect()
    }

    /// Whether this node, a cohort, promised a termination of `id`.
    pub(super) fn is_promised(&self, id: TxnId) -> bool {
        self.parts.get(&id).is_some_and(|p| p.promised)
    }

    /// Promise (durably) to take `id`'s outcome from its termination only.
    fn promise(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
        let Some(p) = self.parts.get_mut(&id) else { return };
        if p.promised || p.remote {
            return;
        }
        p.promised = true;
        for (key, stamp) in p.writes.clone() {
            let Some(mut v) = env.store().exact(&key, stamp).cloned() else { continue };
            if let State::Txn(part) = &mut v.state
                && let Phase::Prepared { vote, .. } = part.phase
            {
                part.phase = Phase::Prepared { vote, promised: true };
                env.store().replace(&key, v);
            }
        }
    }

    /// This node's share of `id`, as stored: its phase, the coordinator's
    /// vote and the accepting DC's arbitration stamp (remote DC).
    fn stored_part(&self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) -> Option<TxnPart> {
        let p = self.parts.get(&id)?;
        p.writes.iter().find_map(|(k, s)| env.store().exact(k, *s).and_then(|v| v.part()).cloned())
    }

    /// Remember the outcome of `id`, applied here as a cohort.
    pub(super) fn remember(&mut self, now_us: u64, id: TxnId, outcome: Outcome) {
        self.recent.insert(id, outcome);
        self.recent_until.push_back((now_us + REMEMBER_TERMINATIONS * self.cfg.txn_terminate_us(), id));
    }

    /// Every `txn_retry_ms`: forget old outcomes; every cohort whose
    /// transaction has been pending `txn_terminate_ms` without its
    /// outcome takes a step of its termination.
    pub(super) fn terminate_tick(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        let now = env.now_us();
        while let Some(&(until, id)) = self.recent_until.front()
            && until <= now
        {
            self.recent_until.pop_front();
            if self.recent_until.iter().all(|&(_, other)| other != id) {
                self.recent.remove(&id);
            }
        }
        let after = self.cfg.txn_terminate_us();
        let due: Vec<TxnId> = self
            .parts
            .iter()
            .filter(|(_, p)| p.prepared_us > 0 && !p.applied_early && now.saturating_sub(p.prepared_us) >= after)
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            self.terminate(env, id);
        }
    }

    /// One step of `id`'s termination at this cohort: promise (accepting
    /// DC), ask the witness or whichever other cohort has not answered
    /// yet, and decide if the answers allow.
    fn terminate(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
        let Some(p) = self.parts.get(&id) else { return };
        let (info, remote) = (p.info.clone(), p.remote);
        let coord_key = info.coord_key.clone();
        let me = self.node.me;
        let others: Vec<NodeId> = self.cohorts(&info).into_iter().filter(|&n| n != me).collect();
        if !remote && others.is_empty() {
            // A lone cohort promises before it asks: the coordinator must
            // not get its ACK once the witness may record an abort.
            self.promise(env, id);
            if let Some(w) = self.witness_of(&info) {
                env.observe(causeway_core::Observation::Sample { what: "txn_terminations", value: 1 });
                return env.send(w, Msg::Witness { id, coord_key, proposal: None });
            }
            // Alone, with no witness: its coordinator shows nothing it did
            // not acknowledge, and it acknowledges nothing now.
            return self.terminate_abort(env, id);
        }
        // With other cohorts, the asker itself does not promise: until some
        // other cohort's termination asks it, a COMMIT (re-sent by a
        // coordinator that was only slow) is still taken, and so a cohort
        // lost after it promised does not block one whose coordinator
        // lives. Its own abort needs every *other* cohort's promise.
        // The coordinator is asked too: it answers only with an outcome
        // already shown (an exposed commit, or an abort), final whatever
        // the termination decides (see `shown_outcome`).
        let coordinator = self.coordinator_of(&info).filter(|&k| k != me);
        let p = self.parts.get_mut(&id).expect("present");
        if !p.terminating {
            p.terminating = true;
            env.observe(causeway_core::Observation::Sample { what: "txn_terminations", value: 1 });
        }
        for n in others.into_iter().chain(coordinator) {
            if matches!(p.answers.get(&n), None | Some(TermState::Unknown)) {
                env.send(n, Msg::TermQuery { id, coord_key: coord_key.clone() });
            }
        }
        self.decide_termination(env, id);
    }

    /// Decide `id`'s termination if the answers allow: a commit a cohort
    /// knows is adopted, an abort one knows too; in the accepting DC the
    /// transaction aborts once every other cohort promised, in a remote DC
    /// it commits once every vote is known, at one more than the largest.
    fn decide_termination(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
        let Some(p) = self.parts.get(&id) else { return };
        let committed = p.answers.values().find_map(|s| match s {
            TermState::Known(Outcome::Committed(t, arb)) => Some((*t, *arb)),
            _ => None,
        });
        if let Some((t, arb)) = committed {
            return self.adopt_commit(env, id, t, arb);
        }
        if p.answers.values().any(|s| *s == TermState::Known(Outcome::Aborted)) {
            return self.terminate_abort(env, id);
        }
        let me = self.node.me;
        let others: Vec<NodeId> = self.cohorts(&p.info).into_iter().filter(|&n| n != me).collect();
        if !p.remote {
            if others.iter().all(|n| p.answers.get(n) == Some(&TermState::Promised)) {
                self.terminate_abort(env, id);
            }
            return;
        }
        let mut votes = Vec::with_capacity(others.len());
        for n in &others {
            match p.answers.get(n) {
                Some(TermState::Voted(v)) => votes.push(*v),
                _ => return,
            }
        }
        let Some(mine) = self.stored_part(env, id) else { return };
        let (Phase::Prepared { vote, .. }, Some(coord_vote), Some(arb)) =
            (mine.phase, mine.coord_vote, mine.origin_arb)
        else {
            return;
        };
        let t = votes.into_iter().fold(vote.max(coord_vote), u64::max) + 1;
        self.adopt_commit(env, id, t, arb);
    }

    /// The termination commits `id` at `t`: applied here, and told to the
    /// other cohorts (which take it even if they promised: it is the
    /// coordinator's decision, or in a remote DC the only possible one);
    /// in the accepting DC also to the coordinator (as an ACK, in case it
    /// is only slow), to the remote DCs, and to the witness (released).
    fn adopt_commit(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, t: u64, arb: Stamp) {
        let Some(p) = self.parts.get(&id) else { return };
        let (info, remote) = (p.info.clone(), p.remote);
        let coord_key = info.coord_key.clone();
        self.apply_commit(env, id, t, arb);
        let me = self.node.me;
        for n in self.cohorts(&info) {
            if n != me {
                env.send(n, Msg::Commit { id, coord_key: coord_key.clone(), at: t, arb });
            }
        }
        if remote {
            return;
        }
        if let Some(k) = self.coordinator_of(&info) {
            env.send(k, Msg::Ack { id, coord_key: coord_key.clone() });
        }
        for r in self.remote_coordinators(&info) {
            env.send(r, Msg::TxnCommitted { id, coord_key: coord_key.clone(), arb });
        }
        if let Some(w) = self.witness_of(&info) {
            env.send(w, Msg::Release { id, coord_key });
        }
    }

    /// The termination aborts `id` (accepting DC): discarded here, and told
    /// to the coordinator, the other cohorts and the remote DCs. (A remote
    /// cohort that hears of an abort only applies it.)
    fn terminate_abort(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
        let Some(p) = self.parts.get(&id) else { return };
        let (info, remote) = (p.info.clone(), p.remote);
        self.apply_abort(env, id);
        if remote {
            return;
        }
        let coord_key = info.coord_key.clone();
        let me = self.node.me;
        for n in self.cohorts(&info).into_iter().chain(self.coordinator_of(&info)) {
            if n != me {
                env.send(n, Msg::Abort { id, coord_key: coord_key.clone() });
            }
        }
        for r in self.remote_coordinators(&info) {
            env.send(r, Msg::TxnAborted { id, coord_key: coord_key.clone() });
        }
    }

    /// A remote coordinator that has held its writes of a transaction for
    /// `txn_terminate_ms` without the accepting DC's outcome asks that DC's
    /// participants (as often as its clock allows, backing off): the
    /// coordinator there, lost after its cohorts learned the commit, never
    /// sent it, and only they know. Their answers are what they applied,
    /// never a promise.
    pub(super) fn poll_origins(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        let now = env.now_us();
        let after = self.cfg.txn_terminate_us();
        let topology = self.node.topology.clone();
        for (&id, c) in self.coords.iter_mut() {
            if !c.remote || c.origin_arb.is_some() || c.committed.is_some() {
                continue;
            }
            let (Some(info), Some(&(_, stamp))) = (&c.info, c.own.first()) else { continue };
            if c.origin_poll_us == 0 {
                c.origin_poll_us = c.since_us + after;
            }
            if now < c.origin_poll_us {
                continue;
            }
            c.origin_poll_us = now + (after << c.origin_polls.min(6));
            c.origin_polls += 1;
            let origin = topology.dc_of(stamp.origin());
            let mut asked = std::collections::BTreeSet::new();
            for k in info.keys.iter() {
                if let Some(n) = topology.server_for_key(origin, k)
                    && asked.insert(n)
                {
                    env.send(n, Msg::TermQuery { id, coord_key: info.coord_key.clone() });
                }
            }
        }
    }

    /// A cohort's termination asks what this node knows of `id`: an
    /// outcome applied here; in the accepting DC, "prepared" with a
    /// promise; in a remote DC, its vote; else unknown. From another DC
    /// (a remote coordinator waiting for this DC's outcome), only an
    /// outcome already visible: an outcome applied here as a cohort, or
    /// this coordinator's once shown.
    pub(super) fn on_term_query(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: NodeId,
        id: TxnId,
        coord_key: &Key,
    ) {
        if self.node.topology.dc_of(from) != self.node.dc {
            let state = match self.recent.get(&id) {
                Some(&o) => TermState::Known(o),
                None if self.serves(coord_key) => self.shown_outcome(env, id, coord_key),
                None => TermState::Unknown,
            };
            return env.send(from, Msg::TermReply { id, state });
        }
        let state = if let Some(&o) = self.recent.get(&id) {
            TermState::Known(o)
        } else if let Some(p) = self.parts.get(&id) {
            if p.remote {
                match self.stored_part(env, id).map(|x| x.phase) {
                    Some(Phase::Prepared { vote, .. }) => TermState::Voted(vote),
                    _ => TermState::Unknown,
                }
            } else {
                self.promise(env, id);
                TermState::Promised
            }
        } else if self.serves(coord_key) {
            self.shown_outcome(env, id, coord_key)
        } else {
            TermState::Unknown
        };
        env.send(from, Msg::TermReply { id, state });
    }

    /// The coordinator's answer to a termination: the outcome only once it
    /// is final whatever a termination decides — an abort, or a commit
    /// already shown (exposed: some cohort acknowledged it before
    /// promising anything, so no termination can abort; in a remote DC,
    /// where nothing aborts, at once). A commit decided but not shown is
    /// unknown: the cohorts that promised may abort it. (A cohort that has
    /// not promised takes it as it takes the COMMIT the coordinator re-sends.)
    fn shown_outcome(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, coord_key: &Key) -> TermState {
        if self.coords.get(&id).is_some_and(|c| !c.exposed) {
            return TermState::Unknown;
        }
        match self.outcome(env, id, coord_key) {
            Outcome::Open => TermState::Unknown,
            o => TermState::Known(o),
        }
    }

    /// An answer to this node's termination of `id`, or (from another DC)
    /// to its question for the accepting DC's outcome.
    pub(super) fn on_term_reply(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: NodeId,
        id: TxnId,
        state: TermState,
    ) {
        if self.node.topology.dc_of(from) != self.node.dc {
            let Some(coord_key) = self.coords.get(&id).and_then(|c| c.info.as_ref()).map(|i| i.coord_key.clone())
            else {
                return;
            };
            match state {
                TermState::Known(Outcome::Committed(_, arb)) => self.on_origin_committed(env, id, &coord_key, arb),
                TermState::Known(Outcome::Aborted) if self.outcome(env, id, &coord_key) == Outcome::Open => {
                    self.abort(env, id, &coord_key, true)
                }
                _ => {}
            }
            return;
        }
        let Some(p) = self.parts.get_mut(&id) else { return };
        if !p.terminating {
            return;
        }
        p.answers.insert(from, state);
        self.decide_termination(env, id);
    }

    /// At the witness: record `proposal` for `id` unless an outcome is
    /// recorded already, and answer with the recorded one.
    pub(super) fn on_witness(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: NodeId,
        id: TxnId,
        coord_key: Key,
        proposal: Option<Stamp>,
    ) {
        let recorded = env.store().versions(&coord_key).iter().find_map(|v| match v.state {
            State::Witness { id: w, outcome, .. } if w == id => Some(outcome),
            _ => None,
        });
        let outcome = match recorded {
            Some(o) => o,
            None => {
                let o = proposal.map_or(Outcome::Aborted, |arb| Outcome::Committed(arb.lamport(), arb));
                let stamp = self.node.next_stamp(std::iter::empty());
                let record = State::Witness { id, outcome: o, released: false };
                env.store().insert(&coord_key, Version::new(Value::new(), stamp, record));
                o
            }
        };
        env.send(from, Msg::Witnessed { id, coord_key, outcome });
    }

    /// The witness's answer: at the coordinator, a recorded commit is shown
    /// (and released once the cohort acknowledges), a recorded abort
    /// aborts; at the cohort, either is adopted.
    pub(super) fn on_witnessed(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        id: TxnId,
        coord_key: &Key,
        outcome: Outcome,
    ) {
        if self.serves(coord_key) {
            let Some(c) = self.coords.get_mut(&id) else { return };
            if c.remote || c.exposed {
                return;
            }
            match outcome {
                Outcome::Committed(..) if c.committed.is_some() => {
                    c.witnessed = true;
                    self.expose(env, id);
                }
                Outcome::Aborted => self.abort(env, id, coord_key, false),
                Outcome::Committed(..) | Outcome::Open => {}
            }
            return;
        }
        if !self.parts.get(&id).is_some_and(|p| !p.remote && p.promised) {
            return;
        }
        match outcome {
            Outcome::Committed(t, arb) => self.adopt_commit(env, id, t, arb),
            Outcome::Aborted => self.terminate_abort(env, id),
            Outcome::Open => {}
        }
    }

    /// At the witness: the record of `id` is no longer needed.
    pub(super) fn on_release(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, coord_key: &Key) {
        let found = env
            .store()
            .versions(coord_key)
            .iter()
            .find(|v| matches!(v.state, State::Witness { id: w, released: false, .. } if w == id))
            .cloned();
        if let Some(mut v) = found
            && let State::Witness { released, .. } = &mut v.state
        {
            *released = true;
            env.store().replace(coord_key, v);
        }
    }
}
