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
//! every write of the transaction in this DC), answers the client, and
//! sends COMMIT; cohorts apply at that time and ACK.
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
//! then as in the accepting DC, with a fresh local commit time. A cohort
//! never applies before its coordinator's COMMIT (or a commit check's
//! answer, which carries the same decision).
//!
//! **Reads** (§5.4.4). A first-round read of a location with a prepared
//! write that would win over the current version is answered with an LVT
//! only. A second-round read at `t` that finds a prepared write which may
//! have committed by `t` (its vote is before `t`) asks the coordinator
//! (`commit_check`): the coordinator witnesses `t` first, so a transaction
//! not committed yet commits after `t`; one committed is applied here at
//! once. A write that loses to the version visible at `t` is skipped.
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
//! cohorts and the remote coordinators, which discard their writes.

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
    fn coordinator_of(&self, info: &TxnInfo) -> Option<NodeId> {
        self.node.topology.server_for_key(self.node.dc, &info.coord_key)
    }

    fn is_coordinator(&self, info: &TxnInfo) -> bool {
        self.coordinator_of(info) == Some(self.node.me)
    }

    /// The keys of the transaction this node serves, in the transaction's order.
    fn my_keys(&self, info: &TxnInfo) -> Vec<Key> {
        let me = Some(self.node.me);
        info.keys.iter().filter(|k| self.node.topology.server_for_key(self.node.dc, k) == me).cloned().collect()
    }

    /// The transaction's participants in this DC other than the coordinator.
    fn cohorts(&self, info: &TxnInfo) -> BTreeSet<NodeId> {
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
        if self.is_coordinator(&info) && self.outcome(env, id, &info.coord_key) == Outcome::Aborted {
            let why = "aborted: a participant's sub-request was lost".to_string();
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
                phase: Phase::Prepared { vote },
                remote: false,
                deps: Vec::new(),
                origin_arb: None,
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
            self.parts.insert(id, Part { info, remote: false, writes: own, notified: true, applied_early: false });
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
            let p = self.parts.entry(id).or_insert_with(|| Part {
                info: info.clone(),
                remote: true,
                writes: Vec::new(),
                notified: false,
                applied_early: true,
            });
            p.writes.push((key, stamp));
            return;
        }
        let part =
            TxnPart { info: info.clone(), phase: Phase::Held, remote: true, deps: deps.clone(), origin_arb: None };
        let v = Version::new(value, stamp, State::Txn(Box::new(part)));
        env.store().insert(&key, v);
        self.note_key(&key);
        self.node.on_replicate_held(env, key.clone(), stamp, &deps, written_us);
        self.held_txn.insert(stamp, id);
        if coordinator {
            let c = self.coord_entry(id, env.now_us());
            c.info = Some(info);
            c.remote = true;
            c.own.push((key, stamp));
        } else {
            let p = self.parts.entry(id).or_insert_with(|| Part {
                info,
                remote: true,
                writes: Vec::new(),
                notified: false,
                applied_early: false,
            });
            p.writes.push((key, stamp));
        }
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
            Msg::TxnCommitted { id, coord_key, arb } if self.node.equivalents.contains(&from) => {
                self.on_origin_committed(env, id, &coord_key, arb);
                env.send(from, Msg::RemoteAck { id, coord_key });
            }
            Msg::RemoteAck { id, .. } | Msg::Ack { id, .. } => self.on_ack(env, from, id),
            Msg::YesVote { id, coord_key, vote } if same_dc => {
                match self.outcome(env, id, &coord_key) {
                    Outcome::Committed(at, arb) => return env.send(from, Msg::Commit { id, coord_key, at, arb }),
                    Outcome::Aborted => return env.send(from, Msg::Abort { id }),
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
                    Outcome::Aborted => return env.send(from, Msg::Abort { id }),
                    Outcome::Open => {}
                }
                // NOTIFY exists only in remote DCs.
                let c = self.coord_entry(id, env.now_us());
                c.remote = true;
                c.notified.insert(from);
                if c.prepared {
                    env.send(from, Msg::Prepare { id });
                }
            }
            Msg::Prepare { id } if same_dc => self.on_prepare(env, id),
            Msg::Abort { id } if same_dc => self.apply_abort(env, id),
            Msg::TxnAborted { id, coord_key }
                if self.node.equivalents.contains(&from) && self.outcome(env, id, &coord_key) == Outcome::Open =>
            {
                self.abort(env, id, &coord_key, true);
            }
            Msg::Commit { id, coord_key, at, arb } if same_dc => {
                self.apply_commit(env, id, at, arb);
                env.send(from, Msg::Ack { id, coord_key });
            }
            Msg::CommitCheck { id, coord_key, at } if same_dc => {
                // §5.4.4: the coordinator's clock passes `at` first, so a
                // transaction not committed now commits after `at`.
                self.node.witness(at);
                let outcome = self.outcome(env, id, &coord_key);
                env.send(from, Msg::CheckReply { id, at, outcome });
            }
            Msg::CheckReply { id, at, outcome } if same_dc => match outcome {
                Outcome::Committed(t, arb) => self.apply_commit(env, id, t, arb),
                Outcome::Aborted => self.apply_abort(env, id),
                Outcome::Open => self.resolve(env, id, None, at),
            },
            _ => {}
        }
    }

    /// The outcome of a transaction this node coordinates: in memory, or
    /// on its coordinator key's versions (after the coordinator forgot it,
    /// or restarted).
    fn outcome(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, coord_key: &Key) -> Outcome {
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

    /// The coordinator aborts (accepting DC: its votes never all came;
    /// remote: the accepting DC aborted). Its own writes are marked
    /// aborted, or a record is left on the coordinator key; the client,
    /// the cohorts and the equivalents are told.
    fn abort(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, coord_key: &Key, remote: bool) {
        let c = self.coords.remove(&id).unwrap_or_default();
        debug_assert!(c.committed.is_none(), "a committed transaction is never aborted");
        let mut cohorts: BTreeSet<NodeId> = c.votes.keys().chain(c.notified.iter()).copied().collect();
        if let Some(info) = &c.info {
            cohorts.extend(self.cohorts(info));
        }
        let mut marked = false;
        for (key, stamp) in &c.own {
            let Some(mut v) = env.store().exact(key, *stamp).cloned() else { continue };
            if let State::Txn(p) = &v.state {
                v.state = State::Aborted { id, remote: p.remote };
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
            let why = "aborted: a participant's sub-request was lost".to_string();
            env.reply(client, Msg::WotReply { id, result: Err((true, why)) });
        }
        for n in cohorts {
            env.send(n, Msg::Abort { id });
        }
        if remote {
            self.commit_ready(env);
        } else {
            for &e in &self.node.equivalents {
                env.send(e, Msg::TxnAborted { id, coord_key: coord_key.clone() });
            }
        }
    }

    /// A cohort learned that the transaction aborted: its writes are
    /// discarded (a remote DC's go through the replication path as writes
    /// nobody can read), and reads waiting on it go on.
    fn apply_abort(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
        if let Some(p) = self.parts.remove(&id) {
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
        }
        self.resolve(env, id, None, u64::MAX);
    }

    /// Remote coordinator: the accepting DC committed the transaction.
    fn on_origin_committed(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, coord_key: &Key, arb: Stamp) {
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

    /// A cohort asked to prepare (remote DC, or a restarted coordinator):
    /// its writes become pending, and it votes with its clock.
    fn on_prepare(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId) {
        let Some(p) = self.parts.get(&id) else { return };
        let (info, writes) = (p.info.clone(), p.writes.clone());
        if writes.len() != self.my_keys(&info).len() {
            return; // not all arrived: NOTIFY was not sent by this incarnation
        }
        let mut vote = self.node.lamport();
        for (key, stamp) in &writes {
            let Some(mut v) = env.store().exact(key, *stamp).cloned() else { continue };
            if let State::Txn(part) = &mut v.state {
                match part.phase {
                    Phase::Held => {
                        part.phase = Phase::Prepared { vote };
                        env.store().replace(key, v);
                    }
                    Phase::Prepared { vote: was } => vote = vote.max(was),
                    Phase::Decided { .. } => {}
                }
            }
        }
        let Some(coord) = self.coordinator_of(&info) else { return };
        env.send(coord, Msg::YesVote { id, coord_key: info.coord_key, vote });
    }

    /// The coordinator commits once its own writes are prepared and every
    /// cohort voted (`mutant_commit_without_all_votes`: without the votes).
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
        let max_vote = c.votes.values().copied().max().unwrap_or(0);
        let own = c.own.clone();
        let client = c.client;
        // The commit time: a fresh tick above every vote (§5.4), and so
        // above every LVT a participant gave its current values.
        self.node.witness(max_vote);
        let t = self.node.next_stamp(std::iter::empty()).lamport();
        // One place in last-writer-wins order for the whole transaction,
        // in every DC: the accepting DC's commit time (§5.4).
        let arb = if remote {
            origin_arb.expect("a remote DC commits after the accepting DC")
        } else {
            Stamp::new(t, self.node.me)
        };
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
        let mut unacked = cohorts.clone();
        for &n in &cohorts {
            env.send(n, Msg::Commit { id, coord_key: info.coord_key.clone(), at: t, arb });
        }
        if !remote {
            if let Some(client) = client {
                env.reply(client, Msg::WotReply { id, result: Ok((coord_stamp, t)) });
            }
            for &e in &self.node.equivalents {
                env.send(e, Msg::TxnCommitted { id, coord_key: info.coord_key.clone(), arb });
                unacked.insert(e);
            }
        }
        let c = self.coords.get_mut(&id).expect("present");
        c.committed = Some(t);
        c.arb = arb;
        c.unacked = unacked;
        if c.unacked.is_empty() {
            self.forget(env, id);
        }
    }

    /// A participant acknowledged the commit (an acknowledgement of a
    /// transaction this node no longer tracks is a late repeat).
    fn on_ack(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, id: TxnId) {
        if let Some(c) = self.coords.get_mut(&id)
            && c.committed.is_some()
        {
            c.unacked.remove(&from);
            if c.unacked.is_empty() {
                self.forget(env, id);
            }
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

    /// A cohort learned the commit time (COMMIT, or a commit check's
    /// answer): its writes are applied at it, and reads waiting on it go on.
    fn apply_commit(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: TxnId, at: u64, arb: Stamp) {
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
        let store = env.store();
        for v in keys.iter().flat_map(|k| store.versions(k)) {
            let Some(p) = v.part() else { continue };
            let Phase::Prepared { vote } = p.phase else { continue };
            // Committed after `at` for certain (its vote is not before
            // `at`), known not committed by `at`, or coordinated here (then
            // not committed: it would be applied).
            if vote >= d.at || d.cleared.contains(&p.info.id) || self.coordinator_of(&p.info) == me {
                continue;
            }
            checks.insert(p.info.id, p.info.coord_key.clone());
        }
        if checks.is_empty() {
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
        env.observe(causeway_core::Observation::Sample { what: "commit_checks", value: checks.len() as u64 });
        d.waiting = checks;
        d.indirected = true;
        self.deferred.push(d);
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
        let c = self.coords.get_mut(&id).expect("present");
        c.prepared = true;
        let own = c.own.clone();
        let info = c.info.clone().expect("known");
        let vote = self.node.lamport();
        for (key, stamp) in &own {
            let Some(mut v) = env.store().exact(key, *stamp).cloned() else { continue };
            if let State::Txn(p) = &mut v.state {
                p.phase = Phase::Prepared { vote };
                env.store().replace(key, v);
            }
        }
        for n in self.cohorts(&info) {
            env.send(n, Msg::Prepare { id });
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
            let vote =
                phases.iter().filter_map(|ph| if let Phase::Prepared { vote } = ph { Some(*vote) } else { None }).max();
            match vote {
                Some(vote) => env.send(to, Msg::YesVote { id, coord_key, vote }),
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
                }
                None if c.prepared && c.remote => {
                    for n in self.cohorts(info) {
                        if !c.votes.contains_key(&n) {
                            env.send(n, Msg::Prepare { id });
                        }
                    }
                }
                None => {}
            }
        }
        for d in &self.deferred {
            for (id, coord_key) in &d.waiting {
                if let Some(to) = self.node.topology.server_for_key(self.node.dc, coord_key) {
                    env.send(to, Msg::CommitCheck { id: *id, coord_key: coord_key.clone(), at: d.at });
                }
            }
        }
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
                        Phase::Prepared { .. } => c.prepared = true,
                        Phase::Decided { at } => {
                            c.prepared = true;
                            c.committed = Some(at);
                            c.arb = v.arb();
                        }
                        Phase::Held => {}
                    }
                } else {
                    let e = self.parts.entry(id).or_insert_with(|| Part {
                        info: p.info.clone(),
                        remote: p.remote,
                        writes: Vec::new(),
                        notified: false,
                        applied_early: false,
                    });
                    e.writes.push((key.clone(), v.stamp));
                }
            }
        }
        // A remote coordinator that decided but had not committed all its
        // own writes: finish, and tell the cohorts again.
        let decided: Vec<TxnId> = self
            .coords
            .iter()
            .filter(|(_, c)| c.remote && c.committed.is_some() && c.unacked.is_empty())
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
