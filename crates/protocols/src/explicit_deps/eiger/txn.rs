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
use super::msg::*;
use super::server::EigerServer;
use super::txn_state::*;
use crate::explicit_deps::replication::{Dep, DepVersion};
use causeway_core::{Key, NodeId, ServerEnv, Value};
use std::collections::BTreeSet;

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
    pub(super) fn my_keys(&self, info: &TxnInfo) -> Vec<Key> {
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
    pub(super) fn check_wot(&self, info: &TxnInfo, writes: &[(Key, Value)], deps: &[Dep]) -> Result<(), String> {
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
    pub(super) fn serves_coordinator(&self, from: NodeId, coord_key: &Key) -> bool {
        self.node.topology.server_for_key(self.node.dc, coord_key) == Some(from)
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
                .filter_map(
                    |ph| if let Phase::Prepared { vote, promised } = ph { Some((*vote, *promised)) } else { None },
                )
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
    pub(super) fn parts_coord_key(&self, id: TxnId) -> Option<Key> {
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
