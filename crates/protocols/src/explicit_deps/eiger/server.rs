use super::config::*;
use super::msg::*;
use super::txn::{Coord, Deferred, Part};
use crate::explicit_deps::replication::{Dep, DepNode, DepVersion, PathConfig, Settle, Stamp};
use causeway_core::{ClientId, Key, NodeCtx, NodeId, Observation, Server, ServerEnv, Value};
use std::collections::{BTreeMap, VecDeque};

/// One Eiger server (a logical server of one DC, Lloyd §5.1): a Lamport
/// clock, versions with valid times, the replication path.
pub struct EigerServer {
    pub(super) cfg: Config,
    /// The Lamport clock, equivalents and the `dep_check` path (shared with
    /// COPS).
    pub(super) node: DepNode,
    /// (when, key): a version of `key` was applied; collect the versions it
    /// superseded from then on (§5.3, "limiting old values").
    version_gc: VecDeque<(u64, Key)>,
    /// Write-only transactions this node coordinates (§5.4), until every
    /// cohort acknowledged the commit.
    pub(super) coords: BTreeMap<TxnId, Coord>,
    /// Transactions with writes prepared or held here, as a cohort, not
    /// committed yet (rebuilt from the store after a restart).
    pub(super) parts: BTreeMap<TxnId, Part>,
    /// Second-round reads waiting for commit checks (§5.4.4).
    pub(super) deferred: Vec<Deferred>,
}

impl EigerServer {
    pub(super) fn new(cfg: &Config, ctx: NodeCtx) -> EigerServer {
        let path = PathConfig {
            retry_us: cfg.dep_check_retry_ms * 1_000,
            skip_checks: cfg.mutant_skip_dep_check,
            skip_recovery: false,
        };
        let node = DepNode::new(&ctx, Settle::new(0, cfg.gc_interval_ms * 1_000), path);
        EigerServer {
            cfg: cfg.clone(),
            node,
            version_gc: VecDeque::new(),
            coords: BTreeMap::new(),
            parts: BTreeMap::new(),
            deferred: Vec::new(),
        }
    }
}

/// Re-send unanswered checks.
pub(super) const RETRY_TIMER: u64 = 0;
/// Collect superseded versions; report commits to origins.
pub(super) const GC_TIMER: u64 = 1;
/// Re-send unanswered transaction messages.
pub(super) const TXN_TIMER: u64 = 2;

// ---------------------------------------------------------------- handlers

impl Server for EigerServer {
    type Msg = Msg;
    type Version = Version;

    fn on_start(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        if !self.node.serving {
            return;
        }
        // The clock above every stored stamp, pending writes re-checked.
        self.node.recover(env);
        // And above every stored EVT: a read after the restart must not
        // be answered with an LVT below a version it returns.
        let now = env.now_us();
        for key in env.store().keys_sorted() {
            let versions = env.store().versions(&key);
            for v in versions {
                if let Some(evt) = v.evt() {
                    self.node.witness(evt);
                }
                if let Some(TxnPart { phase: Phase::Prepared { vote: t } | Phase::Decided { at: t }, .. }) = v.part() {
                    self.node.witness(*t);
                }
            }
            if versions.len() > 1 {
                self.version_gc.push_back((now + self.cfg.hold_us(), key.clone()));
            }
        }
        // Transactions in flight resume (their state is in the store).
        self.recover_txns(env);
        self.commit_ready(env);
        self.advance_txns(env);
        env.set_timer(self.node.retry_us, RETRY_TIMER);
        env.set_timer(self.cfg.gc_interval_ms * 1_000, GC_TIMER);
        env.set_timer(self.cfg.txn_retry_ms * 1_000, TXN_TIMER);
    }

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        if !self.node.serving {
            return;
        }
        if let Msg::Read { attempt, key, .. } | Msg::ReadAt { attempt, key, .. } = &msg
            && let Err(reason) = self.node.check_owner(key)
        {
            return env.reply(from, Msg::Refused { attempt: *attempt, reason });
        }
        match msg {
            // First round (§5.3): the current version, valid from its EVT
            // through now.
            Msg::Read { attempt, idx, key, floor } => {
                self.node.witness(floor);
                let lvt = self.node.lamport();
                let versions = env.store().versions(&key);
                let latest = versions.iter().filter(|v| v.readable()).max_by_key(|v| v.arb());
                // A prepared transaction's write (§5.4.4): an empty answer
                // with only an LVT; the client reads the location again at
                // EffT. (Its place in last-writer-wins order is its commit
                // time, not known yet, so it is never skipped.)
                let pending =
                    versions.iter().any(|v| matches!(v.part(), Some(p) if matches!(p.phase, Phase::Prepared { .. })));
                let read = match latest {
                    _ if pending => Read { value: None, stamp: Stamp::NONE, evt: 0, lvt, pending: true },
                    Some(v) => {
                        let evt = v.evt().expect("committed");
                        assert!(evt <= lvt, "a version's EVT is never past the clock");
                        Read { value: Some(v.value.clone()), stamp: v.stamp, evt, lvt, pending: false }
                    }
                    None => Read { value: None, stamp: Stamp::NONE, evt: 0, lvt, pending: false },
                };
                env.reply(from, Msg::ReadReply { attempt, idx, read: Ok(read) });
            }
            // Second round (`multiget_slice_by_time`, Fig 5.5): the clock
            // moves to `at` first, so nothing applied from now on is
            // valid at `at`, and the answer is final once every prepared
            // transaction that may have committed by `at` is known
            // (commit checks, §5.4.4).
            Msg::ReadAt { attempt, idx, key, at } => {
                self.node.witness(at);
                self.read_at(env, Deferred::new(from, attempt, idx, key, at));
            }
            Msg::PutReq { key, value, deps, floor } => self.on_put(env, from, key, value, deps, floor),
            Msg::WotReq { info, writes, deps, floor } => self.on_wot(env, from, info, writes, deps, floor),
            _ => {} // the runtime refuses peer messages on client connections
        }
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, msg: Msg) {
        if !self.node.serving || !self.node.topology.contains(from) {
            return;
        }
        match msg {
            // A replicated write (§5.2): stored pending, applied once every
            // one-hop dependency passed its `dep_check`.
            Msg::Replicate { key, value, stamp, deps, written_us } => {
                if !self.node.accepts_replicate(from, &key, stamp, env.store()) {
                    return;
                }
                let v = Version {
                    value,
                    stamp,
                    state: State::Pending { deps: deps.clone() },
                    collected_below: false,
                    coord: None,
                    arb: None,
                };
                env.store().insert(key.clone(), v);
                self.node.on_replicate(env, key, stamp, &deps, written_us);
            }
            Msg::Path(p) => {
                self.node.on_path(env, from, p);
            }
            other => self.on_txn_peer(env, from, other),
        }
        self.commit_ready(env);
        self.advance_txns(env);
    }

    fn on_timer(&mut self, env: &mut impl ServerEnv<Msg, Version>, token: u64) {
        match token {
            RETRY_TIMER => {
                self.node.retry_checks(env);
                env.set_timer(self.node.retry_us, RETRY_TIMER);
            }
            GC_TIMER => {
                self.node.settle_tick(env);
                self.collect_versions(env);
                env.set_timer(self.cfg.gc_interval_ms * 1_000, GC_TIMER);
            }
            TXN_TIMER => {
                self.retry_txns(env);
                env.set_timer(self.cfg.txn_retry_ms * 1_000, TXN_TIMER);
            }
            _ => {}
        }
    }
}

/// The version of a key visible at logical time `at`: among the committed
/// versions applied by then (EVT ≤ `at`), the newest by stamp (last writer
/// wins, so an older write applied later is never visible). `Err(())` if
/// versions from before `at` may have been collected.
pub(super) fn visible_at(versions: &[Version], at: u64) -> Result<Read, ()> {
    // Collection keeps, flagged, the newest version applied long enough
    // ago and drops what it superseded: before its EVT nothing is known.
    let kept_from = versions.iter().filter(|v| v.collected_below).filter_map(Version::evt).max();
    if kept_from.is_some_and(|evt| at < evt) {
        return Err(());
    }
    let visible = versions.iter().filter(|v| v.evt().is_some_and(|e| e <= at)).max_by_key(|v| v.arb());
    Ok(match visible {
        Some(v) => Read {
            value: Some(v.value.clone()),
            stamp: v.stamp,
            evt: v.evt().expect("committed"),
            lvt: at,
            pending: false,
        },
        None => Read { value: None, stamp: Stamp::NONE, evt: 0, lvt: at, pending: false },
    })
}

impl EigerServer {
    /// A write accepted in its local DC (§5.2): stamped with this server's
    /// logical time, above every dependency and the session's time; its
    /// EVT is that time. Applied, acknowledged, then shipped.
    fn on_put(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: ClientId,
        key: Key,
        value: Value,
        deps: Vec<Dep>,
        floor: u64,
    ) {
        if let Err(why) = self.node.check_request(&key, &deps) {
            return env.reply(from, Msg::PutReply { result: Err(why) });
        }
        env.observe(Observation::Sample { what: "deps_per_write", value: deps.len() as u64 });
        self.node.witness(floor);
        let stamp = self.node.next_stamp(deps.iter().map(|d| d.stamp));
        let now = env.now_us();
        let state = State::Committed { evt: stamp.lamport(), at_us: now };
        env.store().insert(
            key.clone(),
            Version { value: value.clone(), stamp, state, collected_below: false, coord: None, arb: None },
        );
        self.node.settle.own_write(stamp);
        self.publish(env, &key, stamp, now);
        env.reply(from, Msg::PutReply { result: Ok(stamp) });
        for &to in &self.node.equivalents {
            let msg =
                Msg::Replicate { key: key.clone(), value: value.clone(), stamp, deps: deps.clone(), written_us: now };
            env.send(to, msg);
        }
    }

    /// Apply every replicated write whose checks passed; the shared path
    /// gives each a fresh logical time, its EVT.
    pub(super) fn commit_ready(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        for r in self.node.commit_ready(env) {
            self.publish(env, &r.key, r.stamp, r.written_us);
        }
    }

    /// A version was applied: report it if reads now return it, and
    /// schedule collection of what it superseded.
    pub(super) fn publish(&mut self, env: &mut impl ServerEnv<Msg, Version>, key: &Key, stamp: Stamp, written_us: u64) {
        self.node.report_if_newest(env, key, stamp, written_us);
        if env.store().versions(key).len() > 1 {
            self.version_gc.push_back((env.now_us() + self.cfg.hold_us(), key.clone()));
        }
    }

    /// Old versions are kept only while a read-only transaction may still
    /// ask for them (§5.3): once the newest version applied at least
    /// `trans_time` + margin ago is known, everything it superseded goes,
    /// and it is flagged so that a read before its EVT restarts.
    fn collect_versions(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        let now = env.now_us();
        let hold_us = self.cfg.hold_us();
        while let Some((at, _)) = self.version_gc.front()
            && *at <= now
        {
            let (_, key) = self.version_gc.pop_front().expect("front exists");
            let old_enough = |v: &Version| matches!(v.state, State::Committed { at_us, .. } if at_us + hold_us <= now);
            let Some(floor) =
                env.store().versions(&key).iter().filter(|v| old_enough(v)).max_by_key(|v| v.arb()).cloned()
            else {
                continue;
            };
            let superseded = |v: &Version| v.arb() < floor.arb() && v.committed();
            if !env.store().versions(&key).iter().any(superseded) {
                continue;
            }
            // Pending versions stay until committed (recovery needs them),
            // and a coordinator's record of a transaction until every
            // participant acknowledged its commit.
            let keep = |v: &Version| {
                matches!(v.state, State::Pending { .. } | State::Txn(_) | State::Aborted { remote: true, .. })
                    || v.coord.as_ref().is_some_and(|t| !t.acked)
                    || v.arb() > floor.arb()
            };
            env.store().gc_key_keeping(&key, |v| v.stamp == floor.stamp, keep);
            if !floor.collected_below {
                env.store().replace(&key, Version { collected_below: true, ..floor });
            }
        }
    }
}
