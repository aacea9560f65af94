//! A write-only transaction's coordinator, in the accepting DC and in a
//! remote one ([`super::txn`] has the protocol step by step): the commit
//! decision, when it becomes visible, commit checks, aborts.

use super::msg::*;
use super::server::EigerServer;
use super::txn_state::*;
use crate::explicit_deps::replication::Stamp;
use causeway_core::{Key, NodeId, ServerEnv, Value};
use std::collections::BTreeSet;

impl EigerServer {
    /// §5.4.4: is the transaction committed, as of `at`? The coordinator's
    /// clock passes `at` first, so a transaction not committed now commits
    /// after `at` — in the accepting DC, where the commit time is a fresh
    /// tick. A remote coordinator's commit time is one more than the
    /// largest vote (deviation 7): it answers "not committed by `at`" only
    /// when a vote it has is at or after `at`, and otherwise once it
    /// commits.
    pub(super) fn on_commit_check(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: NodeId,
        id: TxnId,
        coord_key: Key,
        at: u64,
    ) {
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

    pub(super) fn coord_entry(&mut self, id: TxnId, now_us: u64) -> &mut Coord {
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
            let why =
                "aborted: a participant's sub-request was lost, or the coordinator did not decide in time".to_string();
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
    pub(super) fn on_abort_at_coordinator(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        id: TxnId,
        coord_key: &Key,
    ) {
        // A remote DC aborts only on the accepting DC's word; and a
        // termination aborts only what nobody acknowledged.
        if self.coords.get(&id).is_some_and(|c| c.remote || c.exposed) {
            return;
        }
        if self.outcome(env, id, coord_key) != Outcome::Aborted {
            self.abort(env, id, coord_key, false);
        }
    }

    /// Remote coordinator: the accepting DC committed the transaction.
    pub(super) fn on_origin_committed(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        id: TxnId,
        coord_key: &Key,
        arb: Stamp,
    ) {
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

    /// The coordinator commits once its own writes are prepared and every
    /// cohort voted (`mutant_commit_without_all_votes`: without the votes).
    ///
    /// Accepting DC: at a fresh tick above every vote (§5.4), sent to the
    /// cohorts; its own writes become visible and the client is answered
    /// at the first ACK ([`Self::expose`], deviation 7). Remote DC: at one
    /// more than the largest vote, which every participant that knows the
    /// votes computes alike (deviation 7), visible at once.
    pub(super) fn try_commit(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
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
    pub(super) fn on_ack(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, id: TxnId) {
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
    pub(super) fn forget(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
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

    /// Remote coordinator: its own writes become pending, and the cohorts
    /// are asked to prepare.
    pub(super) fn prepare_remote(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
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
}
