//! A write-only transaction's cohorts ([`super::txn`] has the protocol
//! step by step): sub-requests in the accepting DC, replicated writes held
//! in a remote one, PREPARE and votes, and applying the outcome.

use super::msg::*;
use super::server::EigerServer;
use super::txn_state::*;
use crate::explicit_deps::replication::{Dep, Stamp};
use causeway_core::{ClientId, Key, NodeId, ServerEnv, Value};

impl EigerServer {
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
            let why =
                "aborted: a participant's sub-request was lost, or the coordinator did not decide in time".to_string();
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
    pub(super) fn on_replicate_txn(
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
    pub(super) fn discard_held(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, key: &Key, stamp: Stamp) {
        if let Some(mut v) = env.store().exact(key, stamp).cloned() {
            v.state = State::Aborted { id, remote: true };
            env.store().replace(key, v);
        }
        self.release_held(stamp);
        self.commit_ready(env);
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

    /// A remote cohort asked to prepare: its writes become pending, and it
    /// votes with its clock. The coordinator's vote and the accepting DC's
    /// arbitration stamp are kept with them, and a repeated PREPARE is
    /// answered with the vote first given: the commit time is one more than
    /// the largest vote (deviation 7), so a vote never changes.
    pub(super) fn on_prepare(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        id: TxnId,
        coord_vote: u64,
        arb: Stamp,
    ) {
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
    pub(super) fn advance_txn(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
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
    pub(super) fn release_held(&mut self, stamp: Stamp) {
        self.held_txn.remove(&stamp);
        self.node.release(stamp);
    }

    /// A remote cohort's writes are all in and only wait for the commit.
    pub(super) fn part_ready(&self, p: &Part) -> bool {
        p.writes.len() == self.my_keys(&p.info).len()
            && (p.applied_early || p.writes.iter().all(|&(_, s)| self.node.only_held(s)))
    }
}
