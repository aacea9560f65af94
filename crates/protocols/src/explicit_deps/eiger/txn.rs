//! Write-only transactions: two-phase commit with positive cohorts and
//! indirection (2PC-PCI), Lloyd, "Stronger Semantics for Low-Latency
//! Geo-Replicated Storage" (NSDI 2013) / Lloyd's dissertation Ch. 5 §5.4.
//!
//! **Accepting DC.** The client library sends each participant its writes,
//! annotated with the transaction (its coordinator key) and its one-hop
//! dependencies: the implicit PREPARE. A participant stamps each write
//! (a fresh Lamport stamp, above the dependencies and the session's time),
//! stores it *pending* and votes YES to the coordinator with its clock;
//! the coordinator, once its own writes are pending and every vote is in,
//! takes a fresh tick above every vote as the commit time (the EVT of
//! every write of the transaction in this DC) and sends COMMIT; cohorts
//! apply at that time and ACK. At the first ACK the coordinator's own
//! writes become visible and it answers the client: 2.5 local round trips,
//! the paper's count (§5.4.5), which has the client's answer after the
//! ACKs. Deviation 7: the decision is then known to a node other than the
//! coordinator before anyone outside the cohorts sees it, so that the
//! cohorts can finish the transaction if the coordinator is lost for good
//! ([`super::terminate`]).
//!
//! **Remote DCs.** A participant ships its writes when they are prepared,
//! in stamp order with its other writes (deviation: the paper ships after
//! the commit; shipping in stamp order keeps the replication path's
//! per-origin low-water marks sound, and the remote DC still commits only
//! after the accepting coordinator says it committed, `TxnCommitted`).
//! There each write is stored *held*: queued in the replication path
//! behind the origin's earlier writes of its key, invisible, not pending.
//! A cohort sends NOTIFY once all its writes are in; the coordinator alone
//! runs the transaction's `dep_check`s (on its coordinator key's write).
//! With every NOTIFY, every check and the accepting DC's commit, it
//! prepares its own writes and sends PREPARE; cohorts prepare and vote;
//! then as in the accepting DC, except for the commit time, which is one
//! more than the largest vote rather than a fresh tick (deviation 7: every
//! cohort that knows the votes knows it, so the cohorts commit without a
//! lost coordinator), and visible at once. A cohort never applies before
//! its coordinator's COMMIT (or a commit check's answer, which carries the
//! same decision, or a termination's).
//!
//! **Reads** (§5.4.4). A first-round read of a location with a prepared
//! write that would win over the current version is answered with an LVT
//! only. A second-round read at `t` that finds a prepared write which may
//! have committed by `t` (its vote is before `t`) asks the coordinator
//! (`commit_check`): the coordinator witnesses `t` first, so a transaction
//! not committed yet commits after `t`; one committed is applied here at
//! once. A write that loses to the version visible at `t` is skipped. A
//! remote coordinator, whose commit time is fixed by the votes, answers
//! "not committed by `t`" only when a vote it has is at or after `t`, and
//! otherwise once it commits; it treats reads of its own pending writes
//! the same way, as does an accepting coordinator whose decision is not
//! acknowledged yet.
//!
//! **Crashes** (deviation: the paper assumes logical servers never fail).
//! Prepared and held writes, their phase and votes, the remote
//! coordinator's "the accepting DC committed", and the coordinator's
//! record of a committed transaction until every participant acknowledged
//! it all live in the journaled store. A restarted node rebuilds its
//! transactions from it; cohorts re-send NOTIFY and votes, coordinators
//! COMMIT, every `txn_retry_ms`, until acknowledged. A sub-request lost
//! with a crashed node (client requests are not re-sent) would leave the
//! others pending forever: the accepting coordinator aborts a transaction
//! whose votes have not all come within `txn_abort_ms` (durably: its
//! writes, or a record on the coordinator key, say so), and tells the
//! cohorts and the remote coordinators, which discard their writes. A
//! coordinator lost for good is the business of [`super::terminate`].

use super::config::ColumnKind;
use super::config::MAX_WOT_KEYS;
use super::msg::*;
use super::server::{EigerServer, slice_read, visible_at};
use crate::explicit_deps::replication::{Dep, DepVersion, Stamp};
use causeway_core::{ClientId, Key, NodeId, ServerEnv, Value};
use std::collections::{BTreeMap, BTreeSet};

/// A transaction this node coordinates.
#[derive(Default)]
pub(super) struct Coord {
    /// Known once the coordinator's own writes arrived.
    pub info: Option<TxnInfo>,
    pub remote: bool,
    /// Whom to answer (accepting DC; forgotten across a restart).
    pub client: Option<ClientId>,
    /// The coordinator's own writes: (key, stamp).
    pub own: Vec<(Key, Stamp)>,
    /// Remote: cohorts that sent NOTIFY.
    pub notified: BTreeSet<NodeId>,
    /// Remote: the accepting DC committed the transaction, with this
    /// arbitration stamp.
    pub origin_arb: Option<Stamp>,
    /// The transaction's arbitration stamp, once committed.
    pub arb: Stamp,
    /// The coordinator's own writes are pending (prepared).
    pub prepared: bool,
    /// YESVOTEs: cohort → its clock when it voted.
    pub votes: BTreeMap<NodeId, u64>,
    /// The commit time, once decided.
    pub committed: Option<u64>,
    /// After the commit: participants that have not acknowledged it.
    pub unacked: BTreeSet<NodeId>,
    /// When this node started tracking it (for the accepting DC's abort).
    pub since_us: u64,
    /// The coordinator key named by votes (known before `info`).
    pub vote_key: Option<Key>,
    /// The commit is visible: the coordinator's own writes are readable
    /// and the client answered. In the accepting DC from the first ACK (or
    /// the witness's record, deviation 7) on; in a remote DC at once.
    pub exposed: bool,
    /// When the commit was decided (this incarnation): the accepting DC's
    /// witness is asked after `txn_terminate_ms` without an ACK.
    pub decided_us: u64,
    /// The witness recorded this commit: released once the cohort ACKs.
    pub witnessed: bool,
    /// Remote: the coordinator's own vote (sent with PREPARE); 0 before it
    /// prepared.
    pub own_vote: u64,
    /// Remote: commit checks waiting for the commit time (the votes did not
    /// show it later than the time asked about): (asker, time).
    pub checks: Vec<(NodeId, u64)>,
    /// Remote: the accepting DC's outcome has not come; its participants
    /// are asked at this time (this node's clock; 0: not yet planned), and
    /// had been asked this many times (deviation 7).
    pub origin_poll_us: u64,
    pub origin_polls: u32,
}

/// A transaction with writes at this node as a cohort, not committed here.
pub(super) struct Part {
    pub info: TxnInfo,
    pub remote: bool,
    pub writes: Vec<(Key, Stamp)>,
    /// Remote: NOTIFY sent (since the last restart).
    pub notified: bool,
    /// `mutant_cohort_skips_coordinator_dep_check`: applied on arrival.
    pub applied_early: bool,
    /// When its writes became pending (this incarnation; 0: not yet): the
    /// termination starts `txn_terminate_ms` later (deviation 7).
    pub prepared_us: u64,
    /// The termination has begun: queries (or the witness) are asked.
    pub terminating: bool,
    /// Accepting DC: promised to take the outcome from the termination
    /// only (mirrors the stored phase).
    pub promised: bool,
    /// Termination answers so far: participant → what it knows.
    pub answers: BTreeMap<NodeId, TermState>,
}

impl Part {
    /// Test only: (terminating, promised).
    #[cfg(test)]
    pub(super) fn clone_state(&self) -> (bool, bool) {
        (self.terminating, self.promised)
    }

    pub(super) fn new(info: TxnInfo, remote: bool) -> Part {
        Part {
            info,
            remote,
            writes: Vec::new(),
            notified: false,
            applied_early: false,
            prepared_us: 0,
            terminating: false,
            promised: false,
            answers: BTreeMap::new(),
        }
    }
}

/// What a read names: one location, or a slice of a row's family.
pub(super) enum Target {
    Key(Key),
    Slice(SliceSpec),
}

/// A second-round read waiting for commit checks.
pub(super) struct Deferred {
    client: ClientId,
    attempt: u32,
    idx: u32,
    target: Target,
    at: u64,
    /// Transactions whose check is outstanding: id → coordinator key.
    waiting: BTreeMap<TxnId, Key>,
    /// Transactions known not committed by `at`.
    cleared: BTreeSet<TxnId>,
    /// Some commit check was sent for this read: its answer waited on a
    /// coordinator (told to the client, for measurement only).
    indirected: bool,
}

impl Deferred {
    pub(super) fn new(client: ClientId, attempt: u32, idx: u32, target: Target, at: u64) -> Deferred {
        Deferred {
            client,
            attempt,
            idx,
            target,
            at,
            waiting: BTreeMap::new(),
            cleared: BTreeSet::new(),
            indirected: false,
        }
    }
}

/// Two second-round reads of columns of one row by the same request (one
/// client's attempt, at one time): a commit check one sent answers both.
/// Plain keys are rows of their own, so never share.
fn same_row_read(a: &Deferred, b: &Deferred) -> bool {
    let (Target::Key(x), Target::Key(y)) = (&a.target, &b.target) else { return false };
    a.client == b.client
        && a.attempt == b.attempt
        && a.at == b.at
        && x != y
        && causeway_core::column::row_of(x) == causeway_core::column::row_of(y)
}

impl EigerServer {
    pub(super) fn coordinator_of(&self, info: &TxnInfo) -> Option<NodeId> {
        self.node.topology.server_for_key(self.node.dc, &info.coord_key)
    }

    pub(super) fn is_coordinator(&self, info: &TxnInfo) -> bool {
        self.coordinator_of(info) == Some(self.node.me)
    }

    /// Whether this node serves `coord_key` (and so coordinates every
    /// transaction it names, in this DC).
    pub(super) fn serves(&self, coord_key: &Key) -> bool {
        self.node.topology.server_for_key(self.node.dc, coord_key) == Some(self.node.me)
    }

    /// The keys of the transaction this node serves, in the transaction's order.
    fn my_keys(&self, info: &TxnInfo) -> Vec<Key> {
        let me = Some(self.node.me);
        info.keys.iter().filter(|k| self.node.topology.server_for_key(self.node.dc, k) == me).cloned().collect()
    }

    /// The transaction's participants in this DC other than the coordinator.
    pub(super) fn cohorts(&self, info: &TxnInfo) -> BTreeSet<NodeId> {
        let coord = self.coordinator_of(info);
        info.keys
            .iter()
            .filter_map(|k| self.node.topology.server_for_key(self.node.dc, k))
            .filter(|&n| Some(n) != coord)
            .collect()
    }

    /// The same checks at every participant, over what every participant
    /// receives alike, so they all refuse or none does (and nothing is
    /// applied when they refuse); plus this participant's share.
    fn check_wot(&self, info: &TxnInfo, writes: &[(Key, Value)], deps: &[Dep]) -> Result<(), String> {
        check_wot_shape(&info.keys, &info.coord_key)?;
        if self.coordinator_of(info).is_none() {
            return Err("the coordinator key has no server in this DC".into());
        }
        let mine: BTreeSet<&Key> = writes.iter().map(|(k, _)| k).collect();
        if mine.len() != writes.len() || mine != self.my_keys(info).iter().collect() {
            return Err(format!("node {} was not sent exactly the transaction's keys it serves", self.node.me));
        }
        // Every key, not only this participant's: all refuse alike.
        for k in info.keys.iter() {
            self.cfg.expect_kind(k, ColumnKind::Regular)?;
        }
        let first = &writes.first().ok_or("a participant with no writes")?.0;
        self.node.check_request(first, deps)
    }

    /// A sub-request in the accepting DC (§5.4, the implicit PREPARE): the
    /// writes stamped and stored pending, shipped to the equivalents, and
    /// a YES vote (the coordinator counts its own).
    pub(super) fn on_wot(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: ClientId,
        info: TxnInfo,
        writes: Vec<(Key, Value)>,
        deps: Vec<Dep>,
        floor: u64,
    ) {
        let id = info.id;
        if let Err(why) = self.check_wot(&info, &writes, &deps) {
            return env.reply(from, Msg::WotReply { id, result: Err((false, why)) });
        }
        // Aborted already: by its coordinator (a participant's sub-request
        // was lost), or by a termination this cohort took part in
        // (deviation 7) — a late sub-request then must not prepare again.
        let aborted = if self.is_coordinator(&info) {
            self.outcome(env, id, &info.coord_key) == Outcome::Aborted
        } else {
            self.recent.get(&id) == Some(&Outcome::Aborted)
                || writes.iter().any(|(k, _)| {
                    env.store().versions(k).iter().any(|v| matches!(v.state, State::Aborted { id: a, .. } if a == id))
                })
        };
        if aborted {
            let why = "aborted: a participant's sub-request was lost, or the coordinator did not decide in time".to_string();
            return env.reply(from, Msg::WotReply { id, result: Err((true, why)) });
        }
        if self.parts.contains_key(&id) || self.coords.get(&id).is_some_and(|c| c.prepared) {
            return; // a repeated request
        }
        self.node.witness(floor);
        let now = env.now_us();
        let stamped: Vec<(Key, Value, Stamp)> = writes
            .into_iter()
            .map(|(k, v)| {
                let stamp = self.node.next_stamp(deps.iter().map(|d| d.stamp));
                (k, v, stamp)
            })
            .collect();
        let vote = self.node.lamport();
        let mut own = Vec::with_capacity(stamped.len());
        let mut ship = Vec::with_capacity(stamped.len());
        for (key, value, stamp) in stamped {
            let part = TxnPart {
                info: info.clone(),
                phase: Phase::Prepared { vote, promised: false },
                remote: false,
                deps: Vec::new(),
                origin_arb: None,
                coord_vote: None,
            };
            let v = Version::new(causeway_core::copy_if_short(&value), stamp, State::Txn(Box::new(part)));
            env.store().insert(&key, v);
            self.note_key(&key);
            self.node.settle.own_write(stamp);
            own.push((key.clone(), stamp));
            ship.push((key, value, stamp, ()));
        }
        // Shipped in stamp order: a write alone in its row as a
        // `ReplicateTxn`, a run of a row's columns in one `ReplicateTxnRow`.
        for mut run in super::server::row_runs(ship) {
            let ship_deps = if run.iter().any(|(k, ..)| *k == info.coord_key) { deps.clone() } else { Vec::new() };
            if run.len() == 1 {
                let (key, value, stamp, ()) = run.pop().expect("one write");
                for &to in &self.node.equivalents {
                    let msg = Msg::ReplicateTxn(Box::new(ReplicaTxn {
                        key: key.clone(),
                        value: value.clone(),
                        stamp,
                        info: info.clone(),
                        deps: ship_deps.clone(),
                        written_us: now,
                    }));
                    env.send(to, msg);
                }
                continue;
            }
            let writes: Vec<(Key, Value, Stamp)> = run.into_iter().map(|(k, v, s, ())| (k, v, s)).collect();
            for &to in &self.node.equivalents {
                let msg = Msg::ReplicateTxnRow {
                    writes: writes.clone(),
                    info: Box::new(info.clone()),
                    deps: ship_deps.clone(),
                    written_us: now,
                };
                env.send(to, msg);
            }
        }
        if self.is_coordinator(&info) {
            let c = self.coord_entry(id, now);
            c.info = Some(info);
            c.remote = false;
            c.client = Some(from);
            c.own = own;
            c.prepared = true;
            self.try_commit(env, id);
        } else {
            let coord = self.coordinator_of(&info).expect("checked");
            env.send(coord, Msg::YesVote { id, coord_key: info.coord_key.clone(), vote });
            let mut p = Part::new(info, false);
            p.writes = own;
            p.notified = true;
            p.prepared_us = now;
            self.parts.insert(id, p);
        }
    }

    /// A transaction's write from an equivalent node: held (§5.4,
    /// replicated write-only transactions).
    fn on_replicate_txn(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: NodeId,
        msg: (Key, Value, Stamp, TxnInfo, Vec<Dep>, u64),
    ) {
        let (key, value, stamp, info, deps, written_us) = msg;
        if !self.node.accepts_replicate(from, &key, stamp, env.store()) {
            return;
        }
        let id = info.id;
        let coordinator = self.is_coordinator(&info);
        if !coordinator && self.cfg.mutant_cohort_skips_coordinator_dep_check {
            // The broken variant: applied at once, as a write without
            // dependencies, whatever the coordinator's checks say.
            let v = Version::new(value, stamp, State::Pending { deps: Vec::new() });
            env.store().insert(&key, v);
            self.note_key(&key);
            self.node.on_replicate(env, key.clone(), stamp, &[], written_us);
            let p = self.parts.entry(id).or_insert_with(|| Part::new(info.clone(), true));
            p.applied_early = true;
            p.writes.push((key, stamp));
            return;
        }
        let part = TxnPart {
            info: info.clone(),
            phase: Phase::Held,
            remote: true,
            deps: deps.clone(),
            origin_arb: None,
            coord_vote: None,
        };
        let v = Version::new(value, stamp, State::Txn(Box::new(part)));
        env.store().insert(&key, v);
        self.note_key(&key);
        self.node.on_replicate_held(env, key.clone(), stamp, &deps, written_us);
        self.held_txn.insert(stamp, id);
        if coordinator {
            // The accepting DC's outcome may have come first (a cohort
            // that terminated the transaction there, on another link): an
            // abort it recorded discards the write at once, as it would
            // have had the write come first.
            if self.outcome(env, id, &info.coord_key) == Outcome::Aborted {
                self.discard_held(env, id, &key, stamp);
                return;
            }
            let c = self.coord_entry(id, env.now_us());
            c.info = Some(info);
            c.remote = true;
            c.own.push((key, stamp));
        } else {
            let p = self.parts.entry(id).or_insert_with(|| Part::new(info, true));
            p.writes.push((key, stamp));
        }
    }

    /// A remote DC's held write of an aborted transaction goes through the
    /// replication path as a write nobody can read.
    fn discard_held(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, key: &Key, stamp: Stamp) {
        if let Some(mut v) = env.store().exact(key, stamp).cloned() {
            v.state = State::Aborted { id, remote: true };
            env.store().replace(key, v);
        }
        self.release_held(stamp);
        self.commit_ready(env);
    }

    /// Every transaction message between servers.
    pub(super) fn on_txn_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, msg: Msg) {
        let same_dc = self.node.topology.dc_of(from) == self.node.dc;
        match msg {
            Msg::ReplicateTxn(r) => {
                let ReplicaTxn { key, value, stamp, info, deps, written_us } = *r;
                self.on_replicate_txn(env, from, (key, value, stamp, info, deps, written_us));
            }
            // A row's columns, each as its own `ReplicateTxn` would be.
            Msg::ReplicateTxnRow { writes, info, deps, written_us } => {
                for (key, value, stamp) in writes {
                    let deps = if key == info.coord_key { deps.clone() } else { Vec::new() };
                    self.on_replicate_txn(env, from, (key, value, stamp, (*info).clone(), deps, written_us));
                }
            }
            // From the accepting coordinator, or from a cohort there that
            // finished the transaction without it (deviation 7).
            Msg::TxnCommitted { id, coord_key, arb } if !same_dc && self.serves(&coord_key) => {
                self.on_origin_committed(env, id, &coord_key, arb);
                env.send(from, Msg::RemoteAck { id, coord_key });
            }
            Msg::RemoteAck { id, .. } | Msg::Ack { id, .. } => self.on_ack(env, from, id),
            Msg::YesVote { id, coord_key, vote } if same_dc => {
                match self.outcome(env, id, &coord_key) {
                    Outcome::Committed(at, arb) => return env.send(from, Msg::Commit { id, coord_key, at, arb }),
                    Outcome::Aborted => return env.send(from, Msg::Abort { id, coord_key }),
                    Outcome::Open => {}
                }
                let c = self.coord_entry(id, env.now_us());
                c.votes.insert(from, vote);
                c.vote_key = Some(coord_key);
                self.try_commit(env, id);
            }
            Msg::Notify { id, coord_key } if same_dc => {
                match self.outcome(env, id, &coord_key) {
                    Outcome::Committed(at, arb) => return env.send(from, Msg::Commit { id, coord_key, at, arb }),
                    Outcome::Aborted => return env.send(from, Msg::Abort { id, coord_key }),
                    Outcome::Open => {}
                }
                // NOTIFY exists only in remote DCs.
                let c = self.coord_entry(id, env.now_us());
                c.remote = true;
                c.notified.insert(from);
                if c.prepared
                    && let Some(arb) = c.origin_arb
                {
                    env.send(from, Msg::Prepare { id, vote: c.own_vote, arb });
                }
            }
            Msg::Prepare { id, vote, arb } if same_dc => self.on_prepare(env, id, vote, arb),
            // The coordinator's abort, or a termination's (deviation 7): at
            // the coordinator, the latter overrules its commit if nobody
            // acknowledged it yet.
            Msg::Abort { id, coord_key } if same_dc => {
                if self.serves(&coord_key) {
                    self.on_abort_at_coordinator(env, id, &coord_key);
                } else {
                    self.apply_abort(env, id);
                }
            }
            Msg::TxnAborted { id, coord_key }
                if !same_dc && self.serves(&coord_key) && self.outcome(env, id, &coord_key) == Outcome::Open =>
            {
                self.abort(env, id, &coord_key, true);
            }
            Msg::Commit { id, coord_key, at, arb } if same_dc => {
                // A cohort that promised a termination takes the outcome
                // from it, not from the coordinator (deviation 7), and
                // leaves this COMMIT unacknowledged; one that knows the
                // termination aborted says so.
                if self.is_promised(id) && self.serves_coordinator(from, &coord_key) {
                    return;
                }
                if self.recent.get(&id) == Some(&Outcome::Aborted) {
                    return env.send(from, Msg::Abort { id, coord_key });
                }
                self.apply_commit(env, id, at, arb);
                env.send(from, Msg::Ack { id, coord_key });
            }
            Msg::CommitCheck { id, coord_key, at } if same_dc => self.on_commit_check(env, from, id, coord_key, at),
            Msg::CheckReply { id, at, outcome } if same_dc => match outcome {
                Outcome::Committed(t, arb) => {
                    // As a COMMIT: not taken by a promised cohort, and
                    // acknowledged (an accepting coordinator waits for
                    // one before its own writes become visible).
                    if self.is_promised(id) {
                        return;
                    }
                    let coord_key = self.parts.get(&id).map(|p| p.info.coord_key.clone());
                    self.apply_commit(env, id, t, arb);
                    if let Some(coord_key) = coord_key {
                        env.send(from, Msg::Ack { id, coord_key });
                    }
                }
                Outcome::Aborted => self.apply_abort(env, id),
                Outcome::Open => self.resolve(env, id, None, at),
            },
            Msg::TermQuery { id, coord_key } => self.on_term_query(env, from, id, &coord_key),
            Msg::TermReply { id, state } => self.on_term_reply(env, from, id, state),
            Msg::Witness { id, coord_key, proposal } if !same_dc && self.serves(&coord_key) => {
                self.on_witness(env, from, id, coord_key, proposal)
            }
            Msg::Witnessed { id, coord_key, outcome } if !same_dc => self.on_witnessed(env, id, &coord_key, outcome),
            Msg::Release { id, coord_key } if !same_dc && self.serves(&coord_key) => {
                self.on_release(env, id, &coord_key)
            }
            _ => {}
        }
    }

    /// Whether `from` is the coordinator of transactions on `coord_key`.
    fn serves_coordinator(&self, from: NodeId, coord_key: &Key) -> bool {
        self.node.topology.server_for_key(self.node.dc, coord_key) == Some(from)
    }

    /// §5.4.4: is the transaction committed, as of `at`? The coordinator's
    /// clock passes `at` first, so a transaction not committed now commits
    /// after `at` — in the accepting DC, where the commit time is a fresh
    /// tick. A remote coordinator's commit time is one more than the
    /// largest vote (deviation 7): it answers "not committed by `at`" only
    /// when a vote it has is at or after `at`, and otherwise once it
    /// commits.
    fn on_commit_check(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, id: TxnId, coord_key: Key, at: u64) {
        self.node.witness(at);
        let outcome = self.outcome(env, id, &coord_key);
        if outcome == Outcome::Open
            && let Some(c) = self.coords.get_mut(&id)
            && c.remote
            && c.prepared
        {
            let known = c.votes.values().copied().fold(c.own_vote, u64::max);
            if known < at {
                c.checks.push((from, at));
                return;
            }
        }
        env.send(from, Msg::CheckReply { id, at, outcome });
    }

    /// The outcome of a transaction this node coordinates: in memory, or
    /// on its coordinator key's versions (after the coordinator forgot it,
    /// or restarted).
    pub(super) fn outcome(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, coord_key: &Key) -> Outcome {
        if let Some(c) = self.coords.get(&id) {
            return c.committed.map_or(Outcome::Open, |t| Outcome::Committed(t, c.arb));
        }
        for v in env.store().versions(coord_key) {
            match (&v.state, &v.coord) {
                (State::Aborted { id: a, .. }, _) if *a == id => return Outcome::Aborted,
                (_, Some(t)) if t.info.id == id && v.readable() => {
                    return Outcome::Committed(v.evt().expect("readable"), v.arb());
                }
                _ => {}
            }
        }
        Outcome::Open
    }

    fn coord_entry(&mut self, id: TxnId, now_us: u64) -> &mut Coord {
        self.coords.entry(id).or_insert_with(|| Coord { since_us: now_us, ..Coord::default() })
    }

    /// The coordinator aborts (accepting DC: its votes never all came, or a
    /// termination aborted it before any cohort acknowledged its commit;
    /// remote: the accepting DC aborted). Its own writes are marked
    /// aborted, or a record is left on the coordinator key; the client, the
    /// cohorts and the equivalents are told.
    pub(super) fn abort(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, coord_key: &Key, remote: bool) {
        let c = self.coords.remove(&id).unwrap_or_default();
        assert!(!c.exposed, "a transaction whose commit is visible is never aborted");
        let mut cohorts: BTreeSet<NodeId> = c.votes.keys().chain(c.notified.iter()).copied().collect();
        if let Some(info) = &c.info {
            cohorts.extend(self.cohorts(info));
        }
        let mut marked = false;
        for (key, stamp) in &c.own {
            let Some(mut v) = env.store().exact(key, *stamp).cloned() else { continue };
            if let State::Txn(p) = &v.state {
                v.state = State::Aborted { id, remote: p.remote };
                v.arb = None;
                env.store().replace(key, v);
                marked |= key == coord_key;
                if remote {
                    self.release_held(*stamp);
                }
            }
        }
        if !marked {
            let stamp = self.node.next_stamp(std::iter::empty());
            let record = Version::new(Value::new(), stamp, State::Aborted { id, remote: false });
            env.store().insert(coord_key, record);
        }
        if let Some(client) = c.client {
            let why = "aborted: a participant's sub-request was lost, or the coordinator did not decide in time".to_string();
            env.reply(client, Msg::WotReply { id, result: Err((true, why)) });
        }
        for n in cohorts {
            env.send(n, Msg::Abort { id, coord_key: coord_key.clone() });
        }
        for (to, _) in c.checks {
            env.send(to, Msg::CheckReply { id, at: u64::MAX, outcome: Outcome::Aborted });
        }
        if remote {
            self.commit_ready(env);
        } else {
            for &e in &self.node.equivalents {
                env.send(e, Msg::TxnAborted { id, coord_key: coord_key.clone() });
            }
            // The witness may hold its lone cohort's abort for this node to
            // learn (deviation 7); it has.
            if let Some(w) = c.info.as_ref().and_then(|info| self.witness_of(info)) {
                env.send(w, Msg::Release { id, coord_key: coord_key.clone() });
            }
        }
        // Reads here waiting for its commit to become visible go on.
        self.resolve(env, id, None, u64::MAX);
    }

    /// An ABORT at the coordinator, from a cohort that terminated the
    /// transaction (deviation 7): nothing of it is visible (its commit, if
    /// decided, waits for an acknowledgement the promised cohorts never
    /// give), so it aborts. A transaction it never heard of is recorded as
    /// aborted, so that a late sub-request is refused.
    fn on_abort_at_coordinator(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, coord_key: &Key) {
        // A remote DC aborts only on the accepting DC's word; and a
        // termination aborts only what nobody acknowledged.
        if self.coords.get(&id).is_some_and(|c| c.remote || c.exposed) {
            return;
        }
        if self.outcome(env, id, coord_key) != Outcome::Aborted {
            self.abort(env, id, coord_key, false);
        }
    }

    /// A cohort learned that the transaction aborted: its writes are
    /// discarded (a remote DC's go through the replication path as writes
    /// nobody can read), and reads waiting on it go on.
    pub(super) fn apply_abort(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
        if let Some(p) = self.parts.remove(&id) {
            // An accepting DC's cohort tells its coordinator too, ahead (on
            // this link) of anything it may answer the coordinator's
            // COMMIT with once it forgot the outcome: an abort decided by
            // a termination reaches a coordinator that was only slow before
            // an acknowledgement could show it its commit (deviation 7).
            if !p.remote
                && let Some(k) = self.coordinator_of(&p.info)
            {
                env.send(k, Msg::Abort { id, coord_key: p.info.coord_key.clone() });
            }
            for (key, stamp) in &p.writes {
                let Some(mut v) = env.store().exact(key, *stamp).cloned() else { continue };
                if !matches!(v.state, State::Txn(_)) {
                    continue;
                }
                v.state = State::Aborted { id, remote: p.remote };
                env.store().replace(key, v);
                if p.remote {
                    self.release_held(*stamp);
                }
            }
            if p.remote {
                self.commit_ready(env);
            }
            self.remember(env.now_us(), id, Outcome::Aborted);
        }
        self.resolve(env, id, None, u64::MAX);
    }

    /// Remote coordinator: the accepting DC committed the transaction.
    pub(super) fn on_origin_committed(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, coord_key: &Key, arb: Stamp) {
        // Its commit here comes after its commit there (so a write that
        // causally follows it anywhere is arbitrated after it).
        self.node.witness(arb.lamport());
        let Some(c) = self.coords.get_mut(&id) else { return };
        if c.committed.is_some() || c.origin_arb.is_some() {
            return;
        }
        c.origin_arb = Some(arb);
        let found = env
            .store()
            .versions(coord_key)
            .iter()
            .find(|v| v.part().is_some_and(|p| p.info.id == id && p.remote))
            .cloned();
        if let Some(mut v) = found
            && let State::Txn(p) = &mut v.state
        {
            p.origin_arb = Some(arb);
            env.store().replace(coord_key, v);
        }
    }

    /// A remote cohort asked to prepare: its writes become pending, and it
    /// votes with its clock. The coordinator's vote and the accepting DC's
    /// arbitration stamp are kept with them, and a repeated PREPARE is
    /// answered with the vote first given: the commit time is one more than
    /// the largest vote (deviation 7), so a vote never changes.
    fn on_prepare(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, coord_vote: u64, arb: Stamp) {
        let Some(p) = self.parts.get(&id) else { return };
        let (info, writes) = (p.info.clone(), p.writes.clone());
        if writes.len() != self.my_keys(&info).len() {
            return; // not all arrived: NOTIFY was not sent by this incarnation
        }
        let given = writes.iter().find_map(|(k, s)| match env.store().exact(k, *s).and_then(|v| v.part())?.phase {
            Phase::Prepared { vote, .. } => Some(vote),
            _ => None,
        });
        let vote = given.unwrap_or_else(|| self.node.lamport());
        for (key, stamp) in &writes {
            let Some(mut v) = env.store().exact(key, *stamp).cloned() else { continue };
            if let State::Txn(part) = &mut v.state
                && part.phase == Phase::Held
            {
                part.phase = Phase::Prepared { vote, promised: false };
                part.coord_vote = Some(coord_vote);
                part.origin_arb = Some(arb);
                env.store().replace(key, v);
            }
        }
        let now = env.now_us();
        if let Some(p) = self.parts.get_mut(&id)
            && p.prepared_us == 0
        {
            p.prepared_us = now;
        }
        let Some(coord) = self.coordinator_of(&info) else { return };
        env.send(coord, Msg::YesVote { id, coord_key: info.coord_key, vote });
    }

    /// The coordinator commits once its own writes are prepared and every
    /// cohort voted (`mutant_commit_without_all_votes`: without the votes).
    ///
    /// Accepting DC: at a fresh tick above every vote (§5.4), sent to the
    /// cohorts; its own writes become visible and the client is answered
    /// at the first ACK ([`Self::expose`], deviation 7). Remote DC: at one
    /// more than the largest vote, which every participant that knows the
    /// votes computes alike (deviation 7), visible at once.
    fn try_commit(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
        let Some(c) = self.coords.get(&id) else { return };
        let Some(info) = c.info.clone() else { return };
        if c.committed.is_some() || !c.prepared {
            return;
        }
        let cohorts = self.cohorts(&info);
        if !self.cfg.mutant_commit_without_all_votes && !cohorts.iter().all(|n| c.votes.contains_key(n)) {
            return;
        }
        let remote = c.remote;
        let origin_arb = c.origin_arb;
        let max_vote = c.votes.values().copied().fold(c.own_vote, u64::max);
        let own = c.own.clone();
        let (t, arb) = if remote {
            // Above every vote, and so above every LVT a participant gave
            // its current values before preparing; the same number at every
            // participant that knows the votes.
            self.node.witness(max_vote + 1);
            (max_vote + 1, origin_arb.expect("a remote DC commits after the accepting DC"))
        } else {
            // A fresh tick above every vote (§5.4), and so above every LVT
            // a participant gave its current values; one place in
            // last-writer-wins order for the whole transaction, in every
            // DC: this commit time with this node's id.
            self.node.witness(max_vote);
            let t = self.node.next_stamp(std::iter::empty()).lamport();
            (t, Stamp::new(t, self.node.me))
        };
        // The accepting coordinator's decision is durable before anyone
        // hears of it: after a restart it sends the same COMMIT again.
        for (key, stamp) in own.iter().filter(|_| !remote) {
            let Some(mut v) = env.store().exact(key, *stamp).cloned() else { continue };
            v.arb = Some(arb);
            if let State::Txn(p) = &mut v.state {
                p.phase = Phase::Committing { at: t };
            }
            env.store().replace(key, v);
        }
        for &n in &cohorts {
            env.send(n, Msg::Commit { id, coord_key: info.coord_key.clone(), at: t, arb });
        }
        let now = env.now_us();
        let c = self.coords.get_mut(&id).expect("present");
        c.committed = Some(t);
        c.arb = arb;
        c.unacked = cohorts.clone();
        c.decided_us = now;
        // With no cohort, no node can learn the decision before this one
        // shows it: its keys are all here, lost with it.
        if remote || cohorts.is_empty() {
            self.expose(env, id);
        }
    }

    /// The commit becomes visible here: the coordinator's own writes are
    /// applied at the commit time, the client is answered, the remote
    /// coordinators are told, and reads waiting on it go on.
    pub(super) fn expose(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
        let Some(c) = self.coords.get_mut(&id) else { return };
        let (Some(t), Some(info)) = (c.committed, c.info.clone()) else { return };
        if c.exposed {
            return;
        }
        c.exposed = true;
        let (remote, arb, own, client) = (c.remote, c.arb, c.own.clone(), c.client.take());
        let checks = std::mem::take(&mut c.checks);
        let now = env.now_us();
        let mut coord_stamp = Stamp::NONE;
        for (key, stamp) in &own {
            let Some(mut v) = env.store().exact(key, *stamp).cloned() else { continue };
            if *key == info.coord_key {
                coord_stamp = *stamp;
                v.coord = Some(Box::new(CoordTag { info: info.clone(), acked: false, remote }));
            }
            v.arb = Some(arb);
            if remote {
                if let State::Txn(p) = &mut v.state {
                    p.phase = Phase::Decided { at: t };
                }
                env.store().replace(key, v);
                self.release_held(*stamp);
            } else {
                v.state = State::Committed { evt: t, at_us: now };
                env.store().replace(key, v);
                self.publish(env, key, *stamp, now);
            }
        }
        if remote {
            self.commit_ready(env);
        }
        for (to, at) in checks {
            env.send(to, Msg::CheckReply { id, at, outcome: Outcome::Committed(t, arb) });
        }
        if !remote {
            if let Some(client) = client {
                env.reply(client, Msg::WotReply { id, result: Ok((coord_stamp, t)) });
            }
            let c = self.coords.get_mut(&id).expect("present");
            for &e in &self.node.equivalents {
                env.send(e, Msg::TxnCommitted { id, coord_key: info.coord_key.clone(), arb });
                c.unacked.insert(e);
            }
        }
        self.resolve(env, id, Some(t), u64::MAX);
        if self.coords.get(&id).is_some_and(|c| c.unacked.is_empty()) {
            self.forget(env, id);
        }
    }

    /// A participant acknowledged the commit (an acknowledgement of a
    /// transaction this node no longer tracks is a late repeat). The first
    /// from a cohort makes an accepting coordinator's commit visible.
    fn on_ack(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, id: TxnId) {
        let Some(c) = self.coords.get(&id) else { return };
        if c.committed.is_none() {
            return;
        }
        if !c.exposed && c.unacked.contains(&from) {
            self.expose(env, id);
        }
        let Some(c) = self.coords.get(&id) else { return };
        // The witness holds this commit for a cohort that could not be
        // reached; the cohort has it now.
        if c.witnessed
            && c.unacked.contains(&from)
            && !self.node.equivalents.contains(&from)
            && let Some(info) = c.info.clone()
        {
            if let Some(w) = self.witness_of(&info) {
                env.send(w, Msg::Release { id, coord_key: info.coord_key });
            }
            self.coords.get_mut(&id).expect("present").witnessed = false;
        }
        let c = self.coords.get_mut(&id).expect("present");
        c.unacked.remove(&from);
        if c.unacked.is_empty() && c.exposed {
            self.forget(env, id);
        }
    }

    /// Every participant has the commit: the record on the coordinator
    /// key's version may go (it is marked acknowledged, and collected
    /// like any version).
    fn forget(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
        let Some(c) = self.coords.remove(&id) else { return };
        let Some(info) = c.info else { return };
        let found = env
            .store()
            .versions(&info.coord_key)
            .iter()
            .find(|v| v.coord.as_ref().is_some_and(|t| t.info.id == id))
            .cloned();
        if let Some(mut v) = found {
            if let Some(t) = v.coord.as_mut() {
                t.acked = true;
            }
            env.store().replace(&info.coord_key, v);
        }
    }

    /// A cohort learned the commit time (COMMIT, a commit check's answer,
    /// or a termination's): its writes are applied at it, and reads
    /// waiting on it go on.
    pub(super) fn apply_commit(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, at: u64, arb: Stamp) {
        if let Some(p) = self.parts.remove(&id) {
            self.node.witness(at);
            let now = env.now_us();
            for (key, stamp) in &p.writes {
                let Some(mut v) = env.store().exact(key, *stamp).cloned() else { continue };
                v.arb = Some(arb);
                let State::Txn(part) = &mut v.state else { continue };
                if p.remote {
                    part.phase = Phase::Decided { at };
                    env.store().replace(key, v);
                    self.release_held(*stamp);
                } else {
                    v.state = State::Committed { evt: at, at_us: now };
                    env.store().replace(key, v);
                    self.publish(env, key, *stamp, now);
                }
            }
            if p.remote {
                self.commit_ready(env);
            }
            self.remember(now, id, Outcome::Committed(at, arb));
        }
        self.resolve(env, id, Some(at), u64::MAX);
    }

    /// A second-round read (`multiget_slice_by_time`, §5.4.4): answered
    /// once no prepared write that may have committed by `at` is unknown.
    pub(super) fn read_at(&mut self, env: &mut impl ServerEnv<Msg, Version>, mut d: Deferred) {
        let keys: Vec<Key> = match &d.target {
            Target::Key(k) => vec![k.clone()],
            Target::Slice(s) => self.slice_keys(s).into_iter().map(|(_, k)| k).collect(),
        };
        let read = match &d.target {
            Target::Key(k) => visible_at(env.store().versions(k), d.at),
            Target::Slice(s) => {
                let cols = self.slice_keys(s);
                slice_read(env.store(), s, &cols, d.at, Some(d.at))
            }
        };
        let (attempt, idx, indirected) = (d.attempt, d.idx, d.indirected);
        let read = match read {
            Ok(r) => r,
            Err(()) => return env.reply(d.client, Msg::ReadReply { attempt, idx, read: Err(()), indirected }),
        };
        let me = Some(self.node.me);
        let mut checks = BTreeMap::new();
        let mut own = BTreeMap::new();
        let store = env.store();
        for v in keys.iter().flat_map(|k| store.versions(k)) {
            let Some(p) = v.part() else { continue };
            if d.cleared.contains(&p.info.id) {
                continue; // known not committed by `at`
            }
            if self.coordinator_of(&p.info) == me {
                // Coordinated here: known here whether it may be visible
                // at `at` (then its commit becoming visible is waited for).
                if self.own_commit_may_precede(p, d.at) {
                    own.insert(p.info.id, p.info.coord_key.clone());
                }
                continue;
            }
            let Phase::Prepared { vote, .. } = p.phase else { continue };
            // Committed after `at` for certain: its vote is not before `at`.
            if vote >= d.at {
                continue;
            }
            checks.insert(p.info.id, p.info.coord_key.clone());
        }
        if checks.is_empty() && own.is_empty() {
            return env.reply(d.client, Msg::ReadReply { attempt, idx, read: Ok(read), indirected });
        }
        for (id, coord_key) in &checks {
            // One check per row: a column of a row re-read together with
            // one already waiting on this transaction (the same `ReadsAt`)
            // shares that check's answer (`resolve` releases both).
            if self.deferred.iter().any(|o| same_row_read(o, &d) && o.waiting.contains_key(id)) {
                continue;
            }
            if let Some(to) = self.node.topology.server_for_key(self.node.dc, coord_key) {
                env.send(to, Msg::CommitCheck { id: *id, coord_key: coord_key.clone(), at: d.at });
            }
        }
        if !checks.is_empty() {
            env.observe(causeway_core::Observation::Sample { what: "commit_checks", value: checks.len() as u64 });
            d.indirected = true;
        }
        checks.extend(own);
        d.waiting = checks;
        self.deferred.push(d);
    }

    /// Whether a transaction this node coordinates, whose write `p` is not
    /// visible here yet, may become visible at a time at or before `at`
    /// (then a read at `at` waits for it). Accepting DC: undecided, it
    /// commits at a fresh tick above `at`, which this clock passed (§5.4.4);
    /// decided at `t` but not acknowledged yet (deviation 7), it may if
    /// `t` ≤ `at`. Remote DC: it commits at one more than the largest vote
    /// (deviation 7), so after `at` for certain only if a vote known here
    /// is at or after `at`.
    fn own_commit_may_precede(&self, p: &TxnPart, at: u64) -> bool {
        match p.phase {
            Phase::Committing { at: t } => t <= at,
            Phase::Prepared { .. } if p.remote => self
                .coords
                .get(&p.info.id)
                .is_some_and(|c| c.committed.is_none() && c.votes.values().copied().fold(c.own_vote, u64::max) < at),
            Phase::Prepared { .. } | Phase::Held | Phase::Decided { .. } => false,
        }
    }

    /// A check on `id` came back: `commit` its time, or not committed
    /// through `checked_at`. Reads with nothing left to wait for go on.
    fn resolve(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, commit: Option<u64>, checked_at: u64) {
        let mut ready = Vec::new();
        let mut i = 0;
        while i < self.deferred.len() {
            let d = &mut self.deferred[i];
            if d.waiting.contains_key(&id) && (commit.is_some() || checked_at >= d.at) {
                d.waiting.remove(&id);
                if commit.is_none() {
                    d.cleared.insert(id);
                }
            }
            if d.waiting.is_empty() {
                ready.push(self.deferred.swap_remove(i));
            } else {
                i += 1;
            }
        }
        for d in ready {
            self.read_at(env, d);
        }
    }

    /// After every message: remote cohorts whose writes are all in (behind
    /// their origin's earlier writes of the keys) NOTIFY; remote
    /// coordinators with every NOTIFY, their checks done and the accepting
    /// DC's commit PREPARE (Lloyd §5.4, replicated write-only transactions).
    ///
    /// Only the transactions that may have become ready are looked at: those
    /// a message named, and those whose held writes the replication path
    /// moved on ([`DepNode::take_held_progress`]); every one after a restart
    /// and on the retry timer. Looking at every transaction after every
    /// message made a remote DC that restarted with a backlog (transactions
    /// queued behind their sessions' earlier ones, §5.4's one-hop
    /// dependency on the previous transaction's coordinator key, each
    /// re-NOTIFYing every `txn_retry_ms`) spend its time in this scan, the
    /// cost growing with the square of the backlog: a kill -9 of a DC1
    /// server under load left DC1 minutes behind, never catching up while
    /// writes went on.
    pub(super) fn advance_txns(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        loop {
            for s in self.node.take_held_progress() {
                if let Some(&id) = self.held_txn.get(&s) {
                    self.dirty_txns.insert(id);
                }
            }
            let ids: Vec<TxnId> = if std::mem::take(&mut self.scan_all_txns) {
                self.dirty_txns.clear();
                self.parts.keys().chain(self.coords.keys()).copied().collect()
            } else {
                std::mem::take(&mut self.dirty_txns).into_iter().collect()
            };
            if ids.is_empty() {
                return;
            }
            // Preparing one may commit it, and the commits move others on.
            for id in ids {
                self.advance_txn(env, id);
            }
        }
    }

    /// NOTIFY or PREPARE transaction `id`, if this node has it and it is ready.
    fn advance_txn(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
        if let Some(p) = self.parts.get(&id)
            && p.remote
            && !p.notified
            && self.part_ready(p)
        {
            let coord_key = p.info.coord_key.clone();
            self.parts.get_mut(&id).expect("present").notified = true;
            if let Some(to) = self.node.topology.server_for_key(self.node.dc, &coord_key) {
                env.send(to, Msg::Notify { id, coord_key });
            }
        }
        let ready = self.coords.get(&id).is_some_and(|c| {
            c.remote
                && !c.prepared
                && c.committed.is_none()
                && c.origin_arb.is_some()
                && c.info.as_ref().is_some_and(|info| {
                    self.cohorts(info).iter().all(|n| c.notified.contains(n))
                        && c.own.iter().all(|&(_, s)| self.node.only_held(s))
                        && c.own.len() == self.my_keys(info).len()
                })
        });
        if ready {
            self.prepare_remote(env, id);
        }
    }

    /// Release a remote DC's held write of a transaction (decided or
    /// aborted): the replication path commits it once its checks are done.
    fn release_held(&mut self, stamp: Stamp) {
        self.held_txn.remove(&stamp);
        self.node.release(stamp);
    }

    /// A remote cohort's writes are all in and only wait for the commit.
    fn part_ready(&self, p: &Part) -> bool {
        p.writes.len() == self.my_keys(&p.info).len()
            && (p.applied_early || p.writes.iter().all(|&(_, s)| self.node.only_held(s)))
    }

    /// Remote coordinator: its own writes become pending, and the cohorts
    /// are asked to prepare.
    fn prepare_remote(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
        let vote = self.node.lamport();
        let c = self.coords.get_mut(&id).expect("present");
        c.prepared = true;
        c.own_vote = vote;
        let own = c.own.clone();
        let info = c.info.clone().expect("known");
        let arb = c.origin_arb.expect("prepared after the accepting DC's commit");
        for (key, stamp) in &own {
            let Some(mut v) = env.store().exact(key, *stamp).cloned() else { continue };
            if let State::Txn(p) = &mut v.state {
                p.phase = Phase::Prepared { vote, promised: false };
                env.store().replace(key, v);
            }
        }
        for n in self.cohorts(&info) {
            env.send(n, Msg::Prepare { id, vote, arb });
        }
        self.try_commit(env, id);
    }

    /// Every `txn_retry_ms`: what may have been lost to a restart is sent
    /// again (all of it is idempotent at the receiver).
    pub(super) fn retry_txns(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        for (&id, p) in &self.parts {
            let Some(to) = self.coordinator_of(&p.info) else { continue };
            let coord_key = p.info.coord_key.clone();
            let phases: Vec<Phase> = p
                .writes
                .iter()
                .filter_map(|(k, s)| env.store().exact(k, *s).and_then(|v| v.part()).map(|x| x.phase))
                .collect();
            let vote = phases
                .iter()
                .filter_map(|ph| if let Phase::Prepared { vote, promised } = ph { Some((*vote, *promised)) } else { None })
                .max();
            match vote {
                // A promised cohort waits for its termination instead.
                Some((_, true)) => {}
                Some((vote, false)) => env.send(to, Msg::YesVote { id, coord_key, vote }),
                None if p.remote && p.notified => env.send(to, Msg::Notify { id, coord_key }),
                None => {}
            }
        }
        // The accepting DC's coordinator gives up on votes that never came.
        let now = env.now_us();
        let abort_us = self.cfg.txn_abort_ms * 1_000;
        let stale: Vec<TxnId> = self
            .coords
            .iter()
            .filter(|(_, c)| !c.remote && c.committed.is_none() && now.saturating_sub(c.since_us) >= abort_us)
            .map(|(&id, _)| id)
            .collect();
        for id in stale {
            let c = &self.coords[&id];
            let coord_key = match (&c.info, self.parts_coord_key(id)) {
                (Some(info), _) => Some(info.coord_key.clone()),
                (None, k) => k,
            };
            match coord_key {
                Some(k) => self.abort(env, id, &k, false),
                None => {
                    self.coords.remove(&id);
                }
            }
        }
        let terminate_us = self.cfg.txn_terminate_us();
        for (&id, c) in &self.coords {
            let Some(info) = &c.info else { continue };
            match c.committed {
                Some(at) => {
                    for &n in &c.unacked {
                        if self.node.equivalents.contains(&n) {
                            env.send(n, Msg::TxnCommitted { id, coord_key: info.coord_key.clone(), arb: c.arb });
                        } else {
                            env.send(n, Msg::Commit { id, coord_key: info.coord_key.clone(), at, arb: c.arb });
                        }
                    }
                    // The only cohort has not acknowledged the commit for
                    // `txn_terminate_ms`: the witness records it instead
                    // (unless that cohort terminated the transaction first,
                    // deviation 7).
                    if !c.exposed
                        && !c.remote
                        && now.saturating_sub(c.decided_us) >= terminate_us
                        && let Some(w) = self.witness_of(info)
                    {
                        env.send(w, Msg::Witness { id, coord_key: info.coord_key.clone(), proposal: Some(c.arb) });
                    }
                }
                None if c.prepared && c.remote => {
                    let Some(arb) = c.origin_arb else { continue };
                    for n in self.cohorts(info) {
                        if !c.votes.contains_key(&n) {
                            env.send(n, Msg::Prepare { id, vote: c.own_vote, arb });
                        }
                    }
                }
                None => {}
            }
        }
        self.poll_origins(env);
        let me = Some(self.node.me);
        for d in &self.deferred {
            for (id, coord_key) in &d.waiting {
                let to = self.node.topology.server_for_key(self.node.dc, coord_key);
                if let Some(to) = to.filter(|&n| Some(n) != me) {
                    env.send(to, Msg::CommitCheck { id: *id, coord_key: coord_key.clone(), at: d.at });
                }
            }
        }
        self.terminate_tick(env);
    }

    /// The coordinator key a vote named, for a transaction whose own
    /// sub-request never reached its coordinator.
    fn parts_coord_key(&self, id: TxnId) -> Option<Key> {
        self.coords.get(&id).and_then(|c| c.vote_key.clone())
    }

    /// After a restart: transactions in flight, from the store.
    pub(super) fn recover_txns(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        let now = env.now_us();
        let mut release = Vec::new();
        for key in env.store().keys_sorted() {
            for v in env.store().versions(&key) {
                if let Some(tag) = &v.coord
                    && !tag.acked
                    && v.committed()
                {
                    let info = tag.info.clone();
                    let mut unacked = self.cohorts(&info);
                    if !tag.remote {
                        unacked.extend(self.node.equivalents.iter().copied());
                    }
                    let c = self.coord_entry(info.id, now);
                    c.remote = tag.remote;
                    c.prepared = true;
                    c.committed = v.evt();
                    c.exposed = true;
                    c.arb = v.arb();
                    c.unacked = unacked;
                    c.info = Some(info);
                }
                let Some(p) = v.part() else { continue };
                let id = p.info.id;
                if p.remote {
                    self.held_txn.insert(v.stamp, id);
                }
                if let Phase::Decided { .. } = p.phase {
                    release.push(v.stamp);
                }
                if self.is_coordinator(&p.info) {
                    let c = self.coord_entry(id, now);
                    c.info = Some(p.info.clone());
                    c.remote = p.remote;
                    c.own.push((key.clone(), v.stamp));
                    c.origin_arb = c.origin_arb.or(p.origin_arb);
                    match p.phase {
                        Phase::Prepared { vote, .. } => {
                            c.prepared = true;
                            if p.remote {
                                c.own_vote = vote;
                            }
                        }
                        // Decided, not acknowledged: COMMIT again, visible
                        // at the first ACK (deviation 7).
                        Phase::Committing { at } => {
                            c.prepared = true;
                            c.committed = Some(at);
                            c.arb = v.arb();
                            c.decided_us = now;
                        }
                        Phase::Decided { at } => {
                            c.prepared = true;
                            c.committed = Some(at);
                            c.exposed = true;
                            c.arb = v.arb();
                        }
                        Phase::Held => {}
                    }
                } else {
                    let e = self.parts.entry(id).or_insert_with(|| Part::new(p.info.clone(), p.remote));
                    e.writes.push((key.clone(), v.stamp));
                    // Its termination (deviation 7) counts from the restart.
                    if let Phase::Prepared { promised, .. } = p.phase {
                        e.prepared_us = now;
                        e.promised |= promised;
                    }
                }
            }
        }
        // A coordinator that decided but had not made all its own writes
        // visible (a remote one), or had no acknowledgement yet (an
        // accepting one): finish, and tell the cohorts again.
        let decided: Vec<TxnId> = self
            .coords
            .iter()
            .filter(|(_, c)| c.committed.is_some() && c.unacked.is_empty())
            .map(|(&id, _)| id)
            .collect();
        for id in decided {
            let cohorts = self.coords[&id].info.as_ref().map(|info| self.cohorts(info)).unwrap_or_default();
            self.coords.get_mut(&id).expect("present").unacked = cohorts;
        }
        for s in release {
            self.release_held(s);
        }
    }
}

/// The shape every participant checks, and the client library before it
/// sends anything: some keys, at most [`MAX_WOT_KEYS`], each once, and the
/// coordinator key among them.
pub fn check_wot_shape(keys: &[Key], coord_key: &Key) -> Result<(), String> {
    if keys.is_empty() {
        return Err("a write-only transaction writes at least one key".into());
    }
    if !distinct_keys("a write-only transaction", keys.iter())?.contains(coord_key) {
        return Err("the coordinator key is not one of the transaction's keys".into());
    }
    Ok(())
}

/// A non-atomic batch's shape, checked by the client library before it
/// sends anything and by each server it reaches: at most [`MAX_WOT_KEYS`]
/// keys (a batch's writes share one reply per server, as a transaction's
/// do), each once, so that every write has a stamp of its own in the
/// session's context.
pub fn check_batch_shape(writes: &[(Key, Value)]) -> Result<(), String> {
    distinct_keys("a batch", writes.iter().map(|(k, _)| k)).map(|_| ())
}

/// The keys of a multi-key write (`what` names it in errors), refused when
/// more than [`MAX_WOT_KEYS`] or when one is named twice.
fn distinct_keys<'a>(what: &str, keys: impl ExactSizeIterator<Item = &'a Key>) -> Result<BTreeSet<&'a Key>, String> {
    let n = keys.len();
    if n > MAX_WOT_KEYS {
        return Err(format!("{what} writes at most {MAX_WOT_KEYS} keys, got {n}"));
    }
    let distinct: BTreeSet<&Key> = keys.collect();
    if distinct.len() != n {
        return Err(format!("{what} writes each key once"));
    }
    Ok(distinct)
}
