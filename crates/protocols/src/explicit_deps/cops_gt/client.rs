use super::config::*;
use super::msg::*;
use crate::explicit_deps::replication::{Dep, Stamp};
use crate::kit::client::{client_server_for, fail_unsupported};
use causeway_core::{Client, ClientCtx, ClientEnv, Key, NodeId, Op, OpError, OpResult};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A session (actor, §2.3).
pub struct CopsGtClient {
    ctx: ClientCtx,
    trans_time_us: u64,
    one_round: bool,
    /// Learn checkpoints from read replies too (deviation 8).
    fresh_checkpoint: bool,
    /// Versions read since the last write, and that write, each with its
    /// stored dependencies. The context (§2.3) is these and everything they
    /// depend on; it is merged only when a write needs it, so a read costs
    /// O(1) however long the lists are.
    pub(super) heads: BTreeMap<(Key, NodeId), Head>,
    /// The newest checkpoint the session has learned, from its writes'
    /// replies and the cuts of what it read: older dependencies are
    /// committed everywhere and are left out (§6.1, deviation 8).
    pub(super) checkpoint: u64,
    /// Numbers operation attempts, so a late reply to an abandoned attempt
    /// is recognised and dropped.
    attempt: u32,
    op: Option<InFlight>,
}

impl CopsGtClient {
    pub(super) fn new(cfg: &Config, ctx: ClientCtx) -> CopsGtClient {
        CopsGtClient {
            ctx,
            trans_time_us: cfg.trans_time_us(),
            one_round: cfg.mutant_one_round_rot,
            fresh_checkpoint: cfg.fresh_checkpoint,
            heads: BTreeMap::new(),
            checkpoint: 0,
            attempt: 0,
            op: None,
        }
    }
}

/// A version in the context with its stored dependency list.
pub(super) type Head = (Stamp, Arc<[Dep]>);

pub(super) enum InFlight {
    Get {
        key: Key,
    },
    Put {
        key: Key,
        deps: Arc<[Dep]>,
    },
    Trans(Trans),
    /// A `read_trans` waiting out its back-off before attempt `restarts + 1`
    /// (deviation 7); the timer's token is the attempt number it was set in.
    Backoff {
        keys: Vec<Key>,
        restarts: u32,
    },
}

/// A `read_trans` that restarted this many times in a row ends with
/// `Aborted` instead of trying again (deviation 7): every attempt outlived
/// `trans_time` (the DC's read rounds are slower than it) or kept asking for
/// collected versions. An operation that never ends is a failure nobody
/// sees; a typed one is reported.
pub const MAX_READ_TRANS_RESTARTS: u32 = 10;

/// The first restart's back-off; it doubles per restart, up to
/// `trans_time` (deviation 7).
pub const READ_TRANS_BACKOFF_US: u64 = 1_000;

/// The back-off before restart number `restarts` (1-based): doubling from
/// [`READ_TRANS_BACKOFF_US`], at most `cap_us`.
pub(super) fn backoff_us(restarts: u32, cap_us: u64) -> u64 {
    READ_TRANS_BACKOFF_US.saturating_mul(1 << restarts.saturating_sub(1).min(20)).min(cap_us)
}

/// A `read_trans` in progress (Fig 4.3).
pub(super) struct Trans {
    keys: Vec<Key>,
    started_us: u64,
    /// Replies still awaited in the current round.
    awaited: usize,
    second_round: bool,
    results: Vec<Option<Read>>,
    /// Each first-round server's checkpoint when it read (deviation 8).
    read_checkpoints: Vec<u64>,
    /// A second-round version had been collected: start over.
    restart: bool,
    /// Attempts of this `read_trans` so far that restarted (deviation 7).
    restarts: u32,
}

impl CopsGtClient {
    /// A server's checkpoint, from a read reply (deviation 8); the paper's
    /// sessions learn the checkpoint from their writes only.
    fn learn(&mut self, checkpoint: u64) {
        if self.fresh_checkpoint {
            self.checkpoint = self.checkpoint.max(checkpoint);
        }
    }

    fn next_attempt(&mut self) -> u32 {
        self.attempt = self.attempt.wrapping_add(1);
        self.attempt
    }

    /// Add a version read (and so what it depends on) to the context,
    /// unless it is never-depend: committed everywhere, it constrains
    /// nothing (§6.1).
    fn add_to_context(&mut self, key: &Key, r: &Read) {
        // A version's cut is a checkpoint: what it left out, the session
        // may leave out too.
        self.checkpoint = self.checkpoint.max(r.cut);
        // Below the checkpoint, it and all it depends on are committed
        // everywhere: it constrains nothing, as never-depend (deviation 8).
        if r.never_depend || r.stamp.lamport() < self.checkpoint {
            return;
        }
        let slot = (key.clone(), r.stamp.origin());
        if self.heads.get(&slot).is_none_or(|(s, _)| *s < r.stamp) {
            self.heads.insert(slot, (r.stamp, r.deps.clone()));
        }
    }

    /// The write's dependencies, the whole context but what the checkpoint
    /// covers, and, as indices into them, the nearest: heads no other head
    /// depends on (§2.3, Fig 4.2).
    pub(super) fn write_deps(&self) -> (Vec<Dep>, Vec<u32>) {
        let cp = self.checkpoint;
        // Every stored list is sorted by (key, origin) (this function made
        // it), so the context is a linear merge of the heads' lists: they
        // can hold thousands of entries, and this runs on every write.
        type Entry<'a> = (&'a Key, NodeId, Stamp);
        let mut merged: Vec<Entry> = Vec::new();
        for (_, hdeps) in self.heads.values() {
            let next = hdeps.iter().filter(|d| d.stamp.lamport() >= cp).map(|d| (&d.key, d.stamp.origin(), d.stamp));
            merged = merge_newest(&merged, next);
        }
        // The heads themselves: nearest unless some head depends on them.
        let heads = self.heads.iter().filter(|(_, (s, _))| s.lamport() >= cp).map(|((k, o), (s, _))| (k, *o, *s));
        let mut deps = Vec::with_capacity(merged.len() + self.heads.len());
        let mut nearest = Vec::new();
        let mut m = merged.into_iter().peekable();
        for (k, o, s) in heads {
            while let Some(&(mk, mo, ms)) = m.peek()
                && (mk, mo) < (k, o)
            {
                deps.push(Dep { key: mk.clone(), stamp: ms });
                m.next();
            }
            // The newest stamp of this key and origin some head depends on.
            let covered = match m.peek() {
                Some(&(mk, mo, ms)) if (mk, mo) == (k, o) => {
                    m.next();
                    ms
                }
                _ => Stamp::NONE,
            };
            if covered < s {
                nearest.push(deps.len() as u32);
            }
            deps.push(Dep { key: k.clone(), stamp: covered.max(s) });
        }
        deps.extend(m.map(|(k, _, s)| Dep { key: k.clone(), stamp: s }));
        (deps, nearest)
    }

    fn start_trans(&mut self, env: &mut impl ClientEnv<Msg>, keys: Vec<Key>, started_us: u64, restarts: u32) {
        if keys.is_empty() {
            return env.complete(OpResult::Rot(Vec::new()));
        }
        let attempt = self.next_attempt();
        // A one-key transaction never has a second round.
        let trans = keys.len() > 1 && !self.one_round;
        for (i, key) in keys.iter().enumerate() {
            let Some(to) = client_server_for(&self.ctx, env, key) else { return };
            env.send(to, Msg::Read { attempt, idx: i as u32, key: key.clone(), trans });
        }
        let n = keys.len();
        self.op = Some(InFlight::Trans(Trans {
            keys,
            started_us,
            awaited: n,
            second_round: false,
            results: vec![None; n],
            read_checkpoints: vec![0; n],
            restart: false,
            restarts,
        }));
    }

    /// Both rounds' replies are in: run the second round, finish, or
    /// restart (§2.9, §6.1).
    fn round_done(&mut self, env: &mut impl ClientEnv<Msg>, mut t: Trans) {
        let now = env.now_us();
        if t.restart || now.saturating_sub(t.started_us) > self.trans_time_us {
            // Deviation 7: Lloyd, "Stronger Consistency and Semantics for
            // Low-Latency Geo-Replicated Storage" (dissertation, 2013), §6.1,
            // restarts at once, and so forever when every round outlives
            // trans_time. Back off, doubling, and give
            // up with a typed error after MAX_READ_TRANS_RESTARTS.
            let restarts = t.restarts + 1;
            if restarts > MAX_READ_TRANS_RESTARTS {
                let why = format!(
                    "read_trans restarted {MAX_READ_TRANS_RESTARTS} times: every attempt outlived trans_time_ms \
                     ({} ms) or asked for a collected version",
                    self.trans_time_us / 1_000
                );
                return env.complete(OpResult::Failed(OpError::Aborted(why)));
            }
            let attempt = self.next_attempt(); // late replies of this attempt are dropped
            env.set_timer(backoff_us(restarts, self.trans_time_us), u64::from(attempt));
            self.op = Some(InFlight::Backoff { keys: t.keys, restarts });
            return;
        }
        if !t.second_round && !self.one_round {
            // The causally correct version of each key: the newest stamp
            // seen for it in any first-round result or dependency list.
            let mut ccv: Vec<Stamp> = t.results.iter().map(|r| r.as_ref().map_or(Stamp::NONE, |r| r.stamp)).collect();
            for r in t.results.iter().flatten() {
                for d in r.deps.iter() {
                    if let Some(i) = t.keys.iter().position(|k| *k == d.key) {
                        ccv[i] = ccv[i].max(d.stamp);
                    }
                }
            }
            // Deviation 8: what the lists left out is older than the
            // highest cut among them, and committed everywhere. A key read
            // by a server whose checkpoint had reached that cut already
            // reflects all of it; any other key older than it is read again
            // at its newest version below the cut.
            let need = t.results.iter().flatten().map(|r| r.cut).max().unwrap_or(0);
            let attempt = self.attempt;
            t.second_round = true;
            for (i, key) in t.keys.iter().enumerate() {
                let have = t.results[i].as_ref().map_or(Stamp::NONE, |r| r.stamp);
                let at = if ccv[i] > have { ccv[i] } else { Stamp::NONE };
                let below = if t.read_checkpoints[i] < need && have.lamport() < need { need } else { 0 };
                if at != Stamp::NONE || below > 0 {
                    let Some(to) = client_server_for(&self.ctx, env, key) else { return };
                    env.send(to, Msg::ReadAt { attempt, idx: i as u32, key: key.clone(), at, below });
                    t.awaited += 1;
                }
            }
            if t.awaited > 0 {
                self.op = Some(InFlight::Trans(t));
                return;
            }
        }
        for (k, r) in t.keys.iter().zip(&t.results) {
            if let Some(r) = r {
                self.add_to_context(k, r);
            }
        }
        env.complete(OpResult::Rot(t.results.into_iter().map(|r| r.map(|r| r.value)).collect()));
    }
}

impl Client for CopsGtClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        match op {
            Op::Get { key } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                let attempt = self.next_attempt();
                env.send(to, Msg::Read { attempt, idx: 0, key: key.clone(), trans: false });
                self.op = Some(InFlight::Get { key });
            }
            // write(key, value): all dependencies, the nearest marked (§2.6).
            Op::Put { key, value } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                let (deps, nearest) = self.write_deps();
                let deps: Arc<[Dep]> = deps.into();
                let cut = self.checkpoint;
                let nearest = Nearest::from_vec(nearest);
                env.send(to, Msg::PutReq { key: key.clone(), value, deps: deps.clone(), nearest, cut });
                self.op = Some(InFlight::Put { key, deps });
            }
            Op::Rot { keys } => {
                let now = env.now_us();
                self.start_trans(env, keys, now, 0);
            }
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, _from: NodeId, msg: Msg) {
        match (self.op.take(), msg) {
            (Some(InFlight::Get { key }), Msg::ReadReply { attempt, read, checkpoint, .. })
                if attempt == self.attempt =>
            {
                self.learn(checkpoint);
                let read = read.ok().flatten();
                if let Some(r) = &read {
                    self.add_to_context(&key, r);
                }
                env.complete(OpResult::Get(read.map(|r| r.value)));
            }
            (Some(InFlight::Put { key, deps }), Msg::PutReply { result }) => match result {
                Ok((stamp, checkpoint)) => {
                    // The write now stands for everything in the context
                    // (§2.3): it is the only head; and everything older than
                    // the checkpoint is committed everywhere (§6.1, deviation 8).
                    self.checkpoint = self.checkpoint.max(checkpoint);
                    let cp = self.checkpoint;
                    let deps = if deps.iter().all(|d| d.stamp.lamport() >= cp) {
                        deps
                    } else {
                        deps.iter().filter(|d| d.stamp.lamport() >= cp).cloned().collect()
                    };
                    self.heads.clear();
                    self.heads.insert((key, stamp.origin()), (stamp, deps));
                    env.complete(OpResult::Put);
                }
                Err(why) => env.complete(OpResult::Failed(OpError::BadRequest(why))),
            },
            (Some(InFlight::Trans(mut t)), Msg::ReadReply { attempt, idx, read, checkpoint })
                if attempt == self.attempt =>
            {
                let i = idx as usize;
                if i >= t.results.len() || t.awaited == 0 {
                    self.op = Some(InFlight::Trans(t));
                    return;
                }
                self.learn(checkpoint);
                match read {
                    Ok(r) if !t.second_round => {
                        t.results[i] = r;
                        t.read_checkpoints[i] = checkpoint;
                    }
                    // Second round: the version asked for, never older than
                    // the first round's; none means the first round's stands.
                    Ok(Some(r)) => {
                        if t.results[i].as_ref().is_none_or(|old| old.stamp <= r.stamp) {
                            t.results[i] = Some(r);
                        }
                    }
                    Ok(None) => {}
                    Err(()) => t.restart = true, // a version asked for is gone
                }
                t.awaited -= 1;
                if t.awaited == 0 {
                    self.round_done(env, t);
                } else {
                    self.op = Some(InFlight::Trans(t));
                }
            }
            // The rest of a refused attempt's replies are stale: ignored.
            (Some(InFlight::Get { .. } | InFlight::Trans(_)), Msg::Refused { attempt, reason })
                if attempt == self.attempt =>
            {
                env.complete(OpResult::Failed(OpError::BadRequest(reason)))
            }
            (op, _) => self.op = op, // a stray or stale reply: ignore it
        }
    }

    /// The back-off of a restarted `read_trans` is over: start it again,
    /// with a fresh `trans_time` (deviation 7).
    fn on_timer(&mut self, env: &mut impl ClientEnv<Msg>, token: u64) {
        match self.op.take() {
            Some(InFlight::Backoff { keys, restarts }) if token == u64::from(self.attempt) => {
                let now = env.now_us();
                self.start_trans(env, keys, now, restarts);
            }
            op => self.op = op, // a stale timer
        }
    }
}

/// Merge two lists sorted by (key, origin), keeping the newest stamp where
/// both name the same key and origin.
pub(super) fn merge_newest<'a>(
    a: &[(&'a Key, NodeId, Stamp)],
    b: impl Iterator<Item = (&'a Key, NodeId, Stamp)>,
) -> Vec<(&'a Key, NodeId, Stamp)> {
    let mut out = Vec::with_capacity(a.len());
    let mut a = a.iter().copied().peekable();
    for y in b {
        while let Some(&x) = a.peek()
            && (x.0, x.1) < (y.0, y.1)
        {
            out.push(x);
            a.next();
        }
        match a.peek() {
            Some(&x) if (x.0, x.1) == (y.0, y.1) => {
                out.push((y.0, y.1, x.2.max(y.2)));
                a.next();
            }
            _ => out.push(y),
        }
    }
    out.extend(a);
    out
}
