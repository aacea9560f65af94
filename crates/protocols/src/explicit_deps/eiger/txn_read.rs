//! Second-round reads that meet a pending write-only transaction
//! (Lloyd et al., "Stronger Semantics for Low-Latency Geo-Replicated
//! Storage", NSDI 2013, §5.4.4 / Lloyd's dissertation §5.4.4): answered
//! once every prepared write that may have committed by the read's time is
//! known, asking its coordinator (`commit_check`).

use super::msg::*;
use super::server::EigerServer;
use super::server::{slice_read, visible_at};
use super::txn_state::*;
use causeway_core::{Key, ServerEnv};
use std::collections::BTreeMap;

impl EigerServer {
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
    pub(super) fn own_commit_may_precede(&self, p: &TxnPart, at: u64) -> bool {
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
    pub(super) fn resolve(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        id: TxnId,
        commit: Option<u64>,
        checked_at: u64,
    ) {
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
}
