use super::config::*;
use super::msg::*;
use crate::explicit_deps::replication::{Dep, DepNode, DepVersion, PathConfig, Settle, Stamp};
use causeway_core::{ClientId, Key, NodeCtx, NodeId, Observation, Server, ServerEnv, Value};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

crate::kit::node::server_env!();

pub struct CopsGtServer {
    cfg: Config,
    node: DepNode,
    /// The other partition servers of this DC (checkpoint gossip).
    dc_peers: Vec<NodeId>,
    /// Checkpoint gossip: bounds heard from equivalents and DC peers.
    eq_bounds: BTreeMap<NodeId, u64>,
    dc_bounds: BTreeMap<NodeId, u64>,
    /// The checkpoints DC peers last said they had (deviation 8).
    dc_checkpoints: BTreeMap<NodeId, u64>,
    /// The paper's checkpoint (`fresh_checkpoint = false`): checkpoints
    /// computed, (when, Lamport time), not yet usable.
    checkpoints: VecDeque<(u64, u64)>,
    /// The newest checkpoint computed at least `trans_time` ago.
    usable_checkpoint: u64,
    /// (when, key): a version of `key` was committed; collect the older
    /// ones from then on.
    version_gc: VecDeque<(u64, Key)>,
    /// When this node last served the first round of a `read_trans` of
    /// several keys (deviation 9). Not kept across a restart: a
    /// transaction that read here before it may find a version it asks
    /// for collected, and restarts, as after any collection.
    last_trans_read_us: Option<u64>,
}

impl CopsGtServer {
    pub(super) fn new(cfg: &Config, ctx: NodeCtx) -> CopsGtServer {
        // Which writes are committed everywhere, and since when (deviation 2).
        let settle = Settle::new(cfg.hold_us(), cfg.gc_interval_ms * 1_000);
        let path = PathConfig {
            retry_us: cfg.dep_check_retry_ms * 1_000,
            skip_checks: cfg.mutant_skip_dep_check,
            skip_recovery: false,
        };
        let node = DepNode::new(&ctx, settle, path);
        let dc_peers = ctx.topology.dc_servers(node.dc).filter(|&n| n != ctx.id).collect();
        CopsGtServer {
            cfg: cfg.clone(),
            node,
            dc_peers,
            eq_bounds: BTreeMap::new(),
            dc_bounds: BTreeMap::new(),
            dc_checkpoints: BTreeMap::new(),
            checkpoints: VecDeque::new(),
            usable_checkpoint: 0,
            version_gc: VecDeque::new(),
            last_trans_read_us: None,
        }
    }
}

pub(super) const RETRY_TIMER: u64 = 0;
pub(super) const GC_TIMER: u64 = 1;

impl Server for CopsGtServer {
    type Msg = Msg;
    type Version = Version;

    fn on_start(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        if !self.node.serving {
            return;
        }
        self.node.recover(env);
        self.rebuild_gc_state(env);
        self.commit_ready(env);
        env.set_timer(self.node.retry_us, RETRY_TIMER);
        env.set_timer(self.cfg.gc_interval_ms * 1_000, GC_TIMER);
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
            // read_by_time (§2.4, §2.8); reads never block.
            Msg::Read { attempt, idx, key, trans } => {
                if trans {
                    self.last_trans_read_us = Some(env.now_us());
                }
                let read = Ok(env.store().latest_where(&key, Version::committed).map(Version::read));
                let checkpoint = self.checkpoint();
                env.reply(from, Msg::ReadReply { attempt, idx, read, checkpoint });
            }
            Msg::ReadAt { attempt, idx, key, at, below } => {
                let read = read_at(env.store(), &key, at, below);
                let checkpoint = self.checkpoint();
                env.reply(from, Msg::ReadReply { attempt, idx, read, checkpoint });
            }
            Msg::PutReq { key, value, deps, nearest, cut } => self.on_put(env, from, key, value, deps, nearest, cut),
            _ => {} // the runtime refuses peer messages on client connections
        }
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, msg: Msg) {
        if !self.node.serving || !self.node.topology.contains(from) {
            return;
        }
        let equivalent = self.node.equivalents.contains(&from);
        match msg {
            Msg::Replicate(r) => {
                let Replica { key, value, stamp, deps, nearest, cut, written_us } = *r;
                if !self.node.accepts_replicate(from, &key, stamp, env.store()) {
                    return;
                }
                let check: Vec<Dep> = nearest.iter().filter_map(|&i| deps.get(i as usize).cloned()).collect();
                let v = Version { value, stamp, deps, cut, state: State::Pending { nearest: check.clone() } };
                env.store().insert(&key, v);
                self.node.on_replicate(env, key, stamp, &check, written_us);
            }
            Msg::Path(p) => {
                let settled = self.node.on_path(env, from, p);
                self.collect(env, settled);
            }
            Msg::NodeBound { lamport } if equivalent => {
                self.node.witness(lamport);
                let b = self.eq_bounds.entry(from).or_default();
                *b = (*b).max(lamport);
            }
            Msg::RangeBound { lamport, checkpoint } if self.dc_peers.contains(&from) => {
                self.node.witness(lamport);
                let b = self.dc_bounds.entry(from).or_default();
                *b = (*b).max(lamport);
                let c = self.dc_checkpoints.entry(from).or_default();
                *c = (*c).max(checkpoint);
            }
            _ => {}
        }
        self.commit_ready(env);
    }

    fn on_timer(&mut self, env: &mut impl ServerEnv<Msg, Version>, token: u64) {
        match token {
            RETRY_TIMER => {
                self.node.retry_checks(env);
                env.set_timer(self.node.retry_us, RETRY_TIMER);
            }
            GC_TIMER => {
                self.gc_tick(env);
                env.set_timer(self.cfg.gc_interval_ms * 1_000, GC_TIMER);
            }
            _ => {}
        }
    }
}

/// A second-round read (deviation 8): the newer of exactly version `at`
/// and the newest version below Lamport time `below`, each if asked for.
/// `Err(())` when a version asked for is gone (the transaction restarts):
/// `at` collected, or every version below `below` collected.
fn read_at(store: &causeway_core::MvStore<Version>, key: &Key, at: Stamp, below: u64) -> Result<Option<Read>, ()> {
    let exact = match (at, store.exact(key, at)) {
        (Stamp::NONE, _) => None,
        (_, Some(v)) if v.committed() => Some(v),
        _ => return Err(()),
    };
    let under = match (below, store.versions(key).iter().rev().find(|v| v.stamp.lamport() < below)) {
        (0, _) => None,
        (_, Some(v)) if v.committed() => Some(v),
        // Everything below a checkpoint is committed everywhere; a pending
        // version there means the checkpoint did not come from a server.
        (_, Some(_)) => return Err(()),
        (_, None) if store.was_pruned(key) => return Err(()),
        (_, None) => None,
    };
    Ok(exact.into_iter().chain(under).max_by_key(|v| v.stamp).map(Version::read))
}

impl CopsGtServer {
    /// The global checkpoint as this node knows it now (deviation 3): every
    /// write with a smaller Lamport time is committed in every DC. Its own
    /// bound is taken now, the others' as last heard (lower bounds).
    fn checkpoint(&self) -> u64 {
        let own = self.own_bound();
        let eq = self.node.equivalents.iter().map(|e| self.eq_bounds.get(e).copied().unwrap_or(0));
        let dc = self.dc_peers.iter().map(|p| self.dc_bounds.get(p).copied().unwrap_or(0));
        eq.chain(dc).fold(own, u64::min)
    }

    /// This node's bound (deviation 3): the Lamport time of its oldest
    /// write not yet committed in every DC, else its clock + 1. With no
    /// other DC a write is everywhere once written, without waiting for the
    /// next tick to say so.
    fn own_bound(&self) -> u64 {
        match self.node.settle.oldest_unreplicated() {
            Some(s) if !self.node.equivalents.is_empty() => s.lamport(),
            _ => self.node.lamport() + 1,
        }
    }

    /// Below which Lamport time a write's dependencies are dropped. Fresh
    /// (deviation 8): the lowest checkpoint this DC's servers have said they
    /// have, so their reads of other keys mostly cover it and a
    /// `read_trans` rarely needs a second round for it. The paper's: the
    /// checkpoint of `trans_time` ago (§6.1).
    fn cut(&self) -> u64 {
        if !self.cfg.fresh_checkpoint {
            return self.usable_checkpoint;
        }
        let peers = self.dc_peers.iter().map(|p| self.dc_checkpoints.get(p).copied().unwrap_or(0));
        peers.fold(self.checkpoint(), u64::min)
    }

    /// `write_after` at the local owner (§2.6 step 2), dropping dependencies
    /// older than the cut (§6.1, deviation 8).
    #[allow(clippy::too_many_arguments)]
    fn on_put(
        &mut self,
        env: &mut impl Env,
        from: ClientId,
        key: Key,
        value: Value,
        deps: Arc<[Dep]>,
        nearest: Nearest,
        session_cut: u64,
    ) {
        if let Err(why) = self.node.check_request(&key, &deps) {
            return env.reply(from, Msg::PutReply { result: Err(why) });
        }
        if let Some(&bad) = nearest.iter().find(|&&i| i as usize >= deps.len()) {
            let why = format!("nearest dependency index {bad} is out of range ({} dependencies)", deps.len());
            return env.reply(from, Msg::PutReply { result: Err(why) });
        }
        // The session left out dependencies below its own cut, so the
        // version's cut is at least that (deviation 8). A valid cut is a
        // checkpoint, never above this node's bound; a larger one is the
        // client's error, and is clamped so the new stamp stays above every
        // dependency dropped.
        let cp = self.cut().max(session_cut.min(self.node.lamport() + 1));
        // The list is shared, not copied, unless the cut drops some.
        let (kept, near): (Arc<[Dep]>, Vec<u32>) = if deps.iter().all(|d| d.stamp.lamport() >= cp) {
            (deps, nearest.into_vec())
        } else {
            let mut kept = Vec::with_capacity(deps.len());
            let mut near = Vec::with_capacity(nearest.len());
            let is_nearest: BTreeSet<u32> = nearest.iter().copied().collect();
            for (i, d) in deps.iter().enumerate() {
                if d.stamp.lamport() >= cp {
                    if is_nearest.contains(&(i as u32)) {
                        near.push(kept.len() as u32);
                    }
                    kept.push(d.clone());
                }
            }
            (kept.into(), near)
        };
        env.observe(Observation::Sample { what: "deps_per_write", value: kept.len() as u64 });
        env.observe(Observation::Sample { what: "nearest_per_write", value: near.len() as u64 });
        let stamp = self.node.next_stamp(kept.iter().map(|d| d.stamp));
        let now = env.now_us();
        // The store's copy shares no reference count with the replicas'
        // ([`causeway_core::copy_if_short`]).
        let v = Version {
            value: causeway_core::copy_if_short(&value),
            stamp,
            deps: kept.clone(),
            cut: cp,
            state: State::Committed { at_us: now, never_depend: false },
        };
        env.store().insert(&key, v);
        self.publish(env, &key, stamp, now, !kept.is_empty());
        // The session may drop what is below the checkpoint now, which on
        // one DC is past this very write (deviation 8).
        let learned = if self.cfg.fresh_checkpoint { cp.max(self.checkpoint()) } else { cp };
        env.reply(from, Msg::PutReply { result: Ok((stamp, learned)) });
        for &to in &self.node.equivalents {
            let msg = Msg::Replicate(Box::new(Replica {
                key: key.clone(),
                value: value.clone(),
                stamp,
                deps: kept.clone(),
                nearest: near.clone(),
                cut: cp,
                written_us: now,
            }));
            env.send(to, msg);
        }
        self.node.settle.own_write(stamp);
    }

    /// Commit every replicated write whose checks passed (§2.7 step 5).
    fn commit_ready(&mut self, env: &mut impl Env) {
        for r in self.node.commit_ready(env) {
            let has_deps = env.store().exact(&r.key, r.stamp).is_some_and(|v| !v.deps.is_empty());
            self.publish(env, &r.key, r.stamp, r.written_us, has_deps);
        }
    }

    /// A version was committed here: report it if a read now returns it,
    /// and schedule collection of what it overwrote and of its dependencies.
    /// Under a fresh checkpoint (deviation 8), only if it has any: a list
    /// its cut emptied has nothing to drop, and the never-depend flag alone
    /// is not worth rewriting and logging the version, since the
    /// checkpoint soon lets sessions drop it anyway.
    fn publish(&mut self, env: &mut impl Env, key: &Key, stamp: Stamp, written_us: u64, has_deps: bool) {
        self.node.report_if_newest(env, key, stamp, written_us);
        if env.store().versions(key).len() > 1 {
            let now = env.now_us();
            if self.last_trans_read_us.is_some_and(|t| t + self.cfg.hold_us() > now) {
                self.version_gc.push_back((now + self.cfg.hold_us(), key.clone()));
            } else {
                // Deviation 9: no transaction running has read here, so
                // none will ask for what this version overwrote.
                env.store().gc_key_keeping(key, Version::committed, |v| matches!(v.state, State::Pending { .. }));
            }
        }
        if has_deps || !self.cfg.fresh_checkpoint {
            self.node.settle.committed(stamp, key.clone());
        }
    }

    /// Drop the stored dependencies of settled versions and flag them
    /// never-depend (§6.1).
    fn collect(&mut self, env: &mut impl Env, settled: Vec<(Stamp, Key)>) {
        for (s, key) in settled {
            // An empty list under a fresh checkpoint is left as it is (see
            // `publish`; after a restart all committed versions come here).
            let keep = |v: &&Version| v.deps.is_empty() && self.cfg.fresh_checkpoint;
            if let Some(v) = env.store().exact(&key, s).filter(|v| !keep(v)).cloned()
                && let State::Committed { at_us, never_depend: false } = v.state
            {
                let state = State::Committed { at_us, never_depend: true };
                env.store().replace(&key, Version { deps: Arc::from([]), state, ..v });
            }
        }
    }

    /// Ten times a second (§6.1): report commits to origins, collect
    /// dependencies that may go, gossip the checkpoint, collect versions.
    fn gc_tick(&mut self, env: &mut impl Env) {
        let now = env.now_us();
        // Report commits to origins; collect own writes settled everywhere,
        // here and (the message is sent) in every DC.
        let settled = self.node.settle_tick(env);
        self.collect(env, settled);
        // The global checkpoint (deviation 3).
        let own = self.own_bound();
        for &e in &self.node.equivalents {
            env.send(e, Msg::NodeBound { lamport: own });
        }
        let range =
            self.node.equivalents.iter().map(|e| self.eq_bounds.get(e).copied().unwrap_or(0)).fold(own, u64::min);
        let checkpoint = self.checkpoint();
        for &p in &self.dc_peers {
            env.send(p, Msg::RangeBound { lamport: range, checkpoint });
        }
        if !self.cfg.fresh_checkpoint && self.checkpoints.back().is_none_or(|&(_, c)| c < checkpoint) {
            self.checkpoints.push_back((now, checkpoint));
        }
        while let Some(&(at, c)) = self.checkpoints.front()
            && at + self.cfg.hold_us() <= now
        {
            self.checkpoints.pop_front();
            self.usable_checkpoint = self.usable_checkpoint.max(c);
        }
        // Versions overwritten for trans_time (§6.1).
        let hold_us = self.cfg.hold_us();
        while let Some((at, _)) = self.version_gc.front()
            && *at <= now
        {
            let (_, key) = self.version_gc.pop_front().expect("front exists");
            // Pending versions stay until committed (recovery needs them).
            env.store().gc_key_keeping(
                &key,
                |v| matches!(v.state, State::Committed { at_us, .. } if at_us + hold_us <= now),
                |v| matches!(v.state, State::Pending { .. }),
            );
        }
    }

    /// After a restart: what awaits collection, from the store (deviation 6).
    fn rebuild_gc_state(&mut self, env: &mut impl Env) {
        let now = env.now_us();
        let mut unsettled: Vec<(Stamp, Key)> = Vec::new();
        for key in env.store().keys_sorted() {
            let versions = env.store().versions(&key);
            if versions.len() > 1 {
                self.version_gc.push_back((now + self.cfg.hold_us(), key.clone()));
            }
            for v in versions {
                if matches!(v.state, State::Committed { never_depend: false, .. }) {
                    unsettled.push((v.stamp, key.clone()));
                }
            }
        }
        self.node.settle.rebuild(self.node.me, unsettled);
    }
}
