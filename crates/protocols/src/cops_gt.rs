//! # COPS-GT: COPS with read-only transactions
//!
//! COPS-GT (the SOSP paper's name; "COPS-RT" in seed 001, dissertation
//! Ch. 4 and §6.1; notes 001 §2) adds `read_trans` to [COPS](crate::cops).
//! It needs more than one-hop dependencies: a transaction must see, for any
//! version it returns, every requested key at least as new as that version's
//! dependencies. So:
//!
//! - **Versions store their dependencies** (§2.2): every ⟨key, stamp⟩ the
//!   write causally follows, minus what garbage collection removed; the
//!   server keeps a few old versions per key for `trans_time`.
//! - **The client context holds everything** (§2.3): each read adds the
//!   version and its stored dependencies; a write carries them all, and
//!   the *nearest* ones (those no other context entry already depends on)
//!   are what remote DCs check (§2.6, Fig 4.2).
//! - **`read_trans`** (§2.9, Fig 4.3): one parallel round of
//!   `read_by_time(k, LATEST)`; from the results' dependency lists the
//!   causally-correct version `ccv[k]` of each key; a second parallel round,
//!   by explicit stamp, only for keys whose first-round version is older
//!   than `ccv[k]`. Two rounds at most, never blocking.
//! - **Garbage collection** (§2.10):
//!   - *versions*: a version overwritten for `trans_time` is dropped;
//!     a transaction that outlives `trans_time` (or asks for a dropped
//!     version) restarts;
//!   - *dependencies*: once a write is committed in every DC and
//!     `trans_time` has passed, its stored dependencies are dropped and it
//!     is flagged **never-depend**; clients drop such versions from their
//!     context at once;
//!   - *client metadata*: the **global checkpoint time**, a Lamport time
//!     below which every write is committed everywhere, computed 10×/s by
//!     exchanging per-node bounds with equivalents and then within the DC;
//!     a server drops dependencies older than it from each write and returns
//!     it, and the client cleans its context with it.
//!
//! Replication and `dep_check` are shared with COPS
//! ([`dep_check`](crate::dep_check)).
//!
//! ## Choices and deviations from the paper
//!
//! 1. **Dependencies per key and origin** (as COPS's deviation 2): the
//!    context keeps the newest stamp per ⟨key, origin node⟩. For
//!    `read_trans`, `ccv[k]` is the newest stamp of `k` in any dependency
//!    list, as in Fig 4.3: under last-writer-wins a newer version of `k`
//!    supersedes an older concurrent one.
//! 2. **Knowing "committed in all DCs"** ([`settle`](crate::settle), shared
//!    with COPS): each server tells the origin of writes, every GC tick, how
//!    far it has committed that origin's writes (one stamp), and the origin,
//!    `trans_time` after learning that every DC has a write, tells all DCs,
//!    again with one stamp, to drop the dependencies of its writes through
//!    it. The paper has each remote DC wait `trans_time` itself and notify
//!    per version; waiting at the origin after the last DC's commit is
//!    later, so it is at least as safe, and it costs O(1) messages per tick
//!    instead of per write.
//! 3. **The checkpoint's per-node bound** is the Lamport time of the node's
//!    oldest own write not yet committed everywhere, or its clock + 1 when
//!    there is none (the paper: "the oldest Lamport timestamp of any pending
//!    write in the key range"). Stale bounds are lower bounds, so the
//!    minimum of what a node has heard is safe.
//! 4. **`trans_time` is measured on one clock at a time**: a transaction's
//!    duration on its client's clock, a version's age on its server's. Only
//!    drift between them matters, covered by `clock_margin_ms` (the paper's
//!    "small delta for clock skew"). A forward clock jump larger than the
//!    margin can collect too early; torture does not jump COPS-GT's clocks.
//! 5. **A plain `get`** is `read_by_time(k, LATEST)` with the result added
//!    to the context; the paper's COPS-GT API reads through `read_trans`
//!    only, and a one-key `read_trans` is exactly that.
//! 6. **Durability** as COPS: pending replicated writes live in the store;
//!    collected dependency lists and never-depend flags are rewritten in
//!    place, so they survive a restart too. After a restart, garbage
//!    collection state (what awaits collection) is rebuilt from the store.
//!
//! Two deliberately broken variants exist for tests:
//! `mutant_one_round_rot` (a `read_trans` that never runs its second round,
//! so reads without a snapshot) and `mutant_skip_dep_check`.

use crate::common::{client_server_for, fail_unsupported, payload};
use crate::dep_check::{Dep, DepNode, DepVersion, PathMsg, Stamp, validate_topology};
use crate::settle::Settle;
use causeway_core::{
    Client, ClientCtx, ClientEnv, ClientId, Key, Message, NodeCtx, NodeId, Observation, Op, OpError, OpKind, OpResult,
    Protocol, Server, ServerEnv, Topology, Value, Versioned,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

pub struct CopsGt;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// How long a read-only transaction may take, and so how long an
    /// overwritten version is kept (§6.1; the paper's implementation: 5 s).
    pub trans_time_ms: u64,
    /// Added to `trans_time` wherever a server waits it out (deviation 4).
    pub clock_margin_ms: u64,
    /// Garbage-collection and checkpoint period (COPS: 10×/s).
    pub gc_interval_ms: u64,
    /// Re-send a `dep_check` unanswered for this long (§2.7 step 4).
    pub dep_check_retry_ms: u64,
    /// Test only: `read_trans` skips its second round.
    pub mutant_one_round_rot: bool,
    /// Test only: replicated writes commit without checks.
    pub mutant_skip_dep_check: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            trans_time_ms: 5_000,
            clock_margin_ms: 100,
            gc_interval_ms: 100,
            dep_check_retry_ms: 1_000,
            mutant_one_round_rot: false,
            mutant_skip_dep_check: false,
        }
    }
}

impl Config {
    fn trans_time_us(&self) -> u64 {
        self.trans_time_ms * 1_000
    }
    /// How long a server waits before trusting that no transaction still
    /// needs something: `trans_time` plus the margin.
    fn hold_us(&self) -> u64 {
        (self.trans_time_ms + self.clock_margin_ms) * 1_000
    }
}

impl Protocol for CopsGt {
    const NAME: &'static str = "copsgt";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put, OpKind::Rot];
    const CAUSAL: bool = true;
    /// Lamport clocks, but `trans_time` is a duration on physical clocks: a
    /// jump larger than its margin can collect too early (deviation 4).
    /// Skew and drift (far below the margin) are harmless; recovery as COPS.
    const TOLERATES: causeway_core::Faults =
        causeway_core::Faults { backward_jumps: false, forward_jumps: false, ..causeway_core::Faults::ALL };
    /// Both rounds of a get_trans are served by the client's own DC.
    const AVAILABLE_UNDER_PARTITIONS: bool = true;
    type Msg = Msg;
    type Version = Version;
    type Config = Config;
    type Server = CopsGtServer;
    type Client = CopsGtClient;
    /// Two local rounds; a round that lost its version restarts once more.
    fn liveness_bound_us(_cfg: &Config, env: &causeway_core::LivenessEnv) -> u64 {
        10_000 + 16 * env.intra_dc_rtt_us
    }

    fn validate(cfg: &Config, topology: &Topology) -> Result<(), String> {
        for (name, v) in [
            ("trans_time_ms", cfg.trans_time_ms),
            ("gc_interval_ms", cfg.gc_interval_ms),
            ("dep_check_retry_ms", cfg.dep_check_retry_ms),
        ] {
            if v == 0 {
                return Err(format!("{name} must be at least 1"));
            }
        }
        validate_topology("copsgt", topology)
    }

    fn server(cfg: &Config, ctx: NodeCtx) -> CopsGtServer {
        let mut node = DepNode::new(&ctx);
        node.skip_checks = cfg.mutant_skip_dep_check;
        node.retry_us = cfg.dep_check_retry_ms * 1_000;
        let dc_peers = ctx.topology.dc_servers(node.dc).filter(|&n| n != ctx.id).collect();
        CopsGtServer {
            cfg: cfg.clone(),
            node,
            dc_peers,
            settle: Settle::new(cfg.hold_us(), cfg.gc_interval_ms * 1_000),
            eq_bounds: BTreeMap::new(),
            dc_bounds: BTreeMap::new(),
            checkpoints: VecDeque::new(),
            usable_checkpoint: 0,
            version_gc: VecDeque::new(),
        }
    }

    fn client(cfg: &Config, ctx: ClientCtx) -> CopsGtClient {
        CopsGtClient {
            ctx,
            trans_time_us: cfg.trans_time_us(),
            one_round: cfg.mutant_one_round_rot,
            heads: BTreeMap::new(),
            checkpoint: 0,
            attempt: 0,
            op: None,
        }
    }
}

// ---------------------------------------------------------------- messages and versions

/// What `read_by_time` returns: ⟨value, timestamp, deps⟩ (§2.4), and the
/// never-depend flag (§6.1).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Read {
    pub value: Value,
    pub stamp: Stamp,
    pub deps: Arc<[Dep]>,
    pub never_depend: bool,
}

/// Every message of the protocol.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// `read_by_time(key, at)`: the newest committed version (`at: None`,
    /// LATEST) or exactly version `at`. `attempt` and `idx` name the
    /// operation attempt and the key's place in it.
    Read { attempt: u32, idx: u32, key: Key, at: Option<Stamp> },
    /// `Ok(None)`: the key has no version; `Err(())`: version `at` was
    /// garbage-collected (the transaction restarts).
    ReadReply { attempt: u32, idx: u32, read: Result<Option<Read>, ()> },
    /// `write_after(key, value, deps, nearest)`; `nearest` indexes `deps`.
    PutReq { key: Key, value: Value, deps: Arc<[Dep]>, nearest: Vec<u32> },
    /// The write's stamp and the usable global checkpoint (a Lamport time),
    /// or why the write was refused.
    PutReply { result: Result<(Stamp, u64), String> },
    /// The write shipped to an equivalent node; `nearest` indexes `deps`.
    Replicate { key: Key, value: Value, stamp: Stamp, deps: Arc<[Dep]>, nearest: Vec<u32>, written_us: u64 },
    /// The shared replication path: `dep_check`, and settling, where
    /// `Settled` tells equivalents to drop the dependencies of the origin's
    /// writes through a stamp.
    Path(PathMsg),
    /// Checkpoint gossip: a node's own bound, to its equivalents.
    NodeBound { lamport: u64 },
    /// Checkpoint gossip: a key range's bound (over all DCs), within a DC.
    RangeBound { lamport: u64 },
}

impl Message for Msg {
    fn kind(&self) -> &'static str {
        match self {
            Msg::Read { at: None, .. } => "read_req",
            Msg::Read { at: Some(_), .. } => "read_at_req",
            Msg::ReadReply { .. } => "read_reply",
            Msg::PutReq { .. } => "put_req",
            Msg::PutReply { .. } => "put_reply",
            Msg::Replicate { .. } => "replicate",
            Msg::Path(p) => p.kind(),
            Msg::NodeBound { .. } => "node_bound",
            Msg::RangeBound { .. } => "range_bound",
        }
    }
    fn is_client(&self) -> bool {
        matches!(self, Msg::Read { .. } | Msg::ReadReply { .. } | Msg::PutReq { .. } | Msg::PutReply { .. })
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        match self {
            Msg::Read { key, .. } => (key.len(), 0),
            Msg::PutReq { key, value, deps, .. } => {
                (deps.iter().map(|d| d.key.len()).max().unwrap_or(0).max(key.len()), value.len())
            }
            _ => (0, 0),
        }
    }
    fn payload_bytes(&self) -> usize {
        match self {
            Msg::Read { key, .. } => key.len(),
            Msg::ReadReply { read, .. } => payload(read.iter().flatten().map(|r| &r.value[..])),
            Msg::PutReq { key, value, .. } | Msg::Replicate { key, value, .. } => key.len() + value.len(),
            _ => 0,
        }
    }
}

impl From<PathMsg> for Msg {
    fn from(p: PathMsg) -> Msg {
        Msg::Path(p)
    }
}

/// Where a stored version stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    /// A replicated write waiting for its nearest dependencies.
    Pending { nearest: Vec<Dep> },
    /// Committed here at `at_us` of this node's clock; `never_depend` once
    /// its dependencies were collected.
    Committed { at_us: u64, never_depend: bool },
}

/// A stored version: ⟨stamp, value, deps⟩ (§2.2). The dependency list is
/// shared, not copied, between the store, replies and replicates: it can
/// hold thousands of entries (§7.2.3).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    pub stamp: Stamp,
    pub deps: Arc<[Dep]>,
    pub state: State,
}

impl Version {
    fn read(&self) -> Read {
        let never_depend = matches!(self.state, State::Committed { never_depend: true, .. });
        Read { value: self.value.clone(), stamp: self.stamp, deps: self.deps.clone(), never_depend }
    }
}

impl Versioned for Version {
    type Order = Stamp;
    fn order(&self) -> Stamp {
        self.stamp
    }
    fn value(&self) -> &Value {
        &self.value
    }
}

impl DepVersion for Version {
    fn pending_checks(&self) -> Option<&[Dep]> {
        match &self.state {
            State::Pending { nearest } => Some(nearest),
            State::Committed { .. } => None,
        }
    }
    fn commit(self, now_us: u64) -> Self {
        Version { state: State::Committed { at_us: now_us, never_depend: false }, ..self }
    }
}

// ---------------------------------------------------------------- client

/// A session (actor, §2.3).
pub struct CopsGtClient {
    ctx: ClientCtx,
    trans_time_us: u64,
    one_round: bool,
    /// Versions read since the last write, and that write, each with its
    /// stored dependencies. The context (§2.3) is these and everything they
    /// depend on; it is merged only when a write needs it, so a read costs
    /// O(1) however long the lists are.
    heads: BTreeMap<(Key, NodeId), Head>,
    /// The checkpoint the last write returned: older dependencies are
    /// committed everywhere and are left out (§6.1).
    checkpoint: u64,
    /// Numbers operation attempts, so a late reply to an abandoned attempt
    /// is recognised and dropped.
    attempt: u32,
    op: Option<InFlight>,
}

/// A version in the context with its stored dependency list.
type Head = (Stamp, Arc<[Dep]>);

enum InFlight {
    Get { key: Key },
    Put { key: Key, deps: Arc<[Dep]> },
    Trans(Trans),
}

/// A `read_trans` in progress (Fig 4.3).
struct Trans {
    keys: Vec<Key>,
    started_us: u64,
    /// Replies still awaited in the current round.
    awaited: usize,
    second_round: bool,
    results: Vec<Option<Read>>,
    /// A second-round version had been collected: start over.
    restart: bool,
}

impl CopsGtClient {
    fn next_attempt(&mut self) -> u32 {
        self.attempt = self.attempt.wrapping_add(1);
        self.attempt
    }

    /// Add a version read (and so what it depends on) to the context,
    /// unless it is never-depend: committed everywhere, it constrains
    /// nothing (§6.1).
    fn add_to_context(&mut self, key: &Key, r: &Read) {
        if r.never_depend {
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
    fn write_deps(&self) -> (Vec<Dep>, Vec<u32>) {
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

    fn start_trans(&mut self, env: &mut impl ClientEnv<Msg>, keys: Vec<Key>, started_us: u64) {
        if keys.is_empty() {
            return env.complete(OpResult::Rot(Vec::new()));
        }
        let attempt = self.next_attempt();
        for (i, key) in keys.iter().enumerate() {
            let Some(to) = client_server_for(&self.ctx, env, key) else { return };
            env.send(to, Msg::Read { attempt, idx: i as u32, key: key.clone(), at: None });
        }
        let n = keys.len();
        self.op = Some(InFlight::Trans(Trans {
            keys,
            started_us,
            awaited: n,
            second_round: false,
            results: vec![None; n],
            restart: false,
        }));
    }

    /// Both rounds' replies are in: run the second round, finish, or
    /// restart (§2.9, §6.1).
    fn round_done(&mut self, env: &mut impl ClientEnv<Msg>, mut t: Trans) {
        let now = env.now_us();
        if t.restart || now.saturating_sub(t.started_us) > self.trans_time_us {
            return self.start_trans(env, t.keys, now);
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
            let attempt = self.attempt;
            t.second_round = true;
            for (i, key) in t.keys.iter().enumerate() {
                let have = t.results[i].as_ref().map_or(Stamp::NONE, |r| r.stamp);
                if ccv[i] > have {
                    let Some(to) = client_server_for(&self.ctx, env, key) else { return };
                    env.send(to, Msg::Read { attempt, idx: i as u32, key: key.clone(), at: Some(ccv[i]) });
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
                env.send(to, Msg::Read { attempt, idx: 0, key: key.clone(), at: None });
                self.op = Some(InFlight::Get { key });
            }
            // write(key, value): all dependencies, the nearest marked (§2.6).
            Op::Put { key, value } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                let (deps, nearest) = self.write_deps();
                let deps: Arc<[Dep]> = deps.into();
                env.send(to, Msg::PutReq { key: key.clone(), value, deps: deps.clone(), nearest });
                self.op = Some(InFlight::Put { key, deps });
            }
            Op::Rot { keys } => {
                let now = env.now_us();
                self.start_trans(env, keys, now);
            }
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, _from: NodeId, msg: Msg) {
        match (self.op.take(), msg) {
            (Some(InFlight::Get { key }), Msg::ReadReply { attempt, read, .. }) if attempt == self.attempt => {
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
                    // the checkpoint is committed everywhere (§6.1).
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
            (Some(InFlight::Trans(mut t)), Msg::ReadReply { attempt, idx, read }) if attempt == self.attempt => {
                let i = idx as usize;
                if i >= t.results.len() || t.awaited == 0 {
                    self.op = Some(InFlight::Trans(t));
                    return;
                }
                match read {
                    Ok(r) => {
                        if !t.second_round || r.is_some() {
                            t.results[i] = r;
                        } else {
                            t.restart = true; // the version asked for is gone
                        }
                    }
                    Err(()) => t.restart = true,
                }
                t.awaited -= 1;
                if t.awaited == 0 {
                    self.round_done(env, t);
                } else {
                    self.op = Some(InFlight::Trans(t));
                }
            }
            (op, _) => self.op = op, // a stray or stale reply: ignore it
        }
    }
}

/// Merge two lists sorted by (key, origin), keeping the newest stamp where
/// both name the same key and origin.
fn merge_newest<'a>(
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

// ---------------------------------------------------------------- server

pub struct CopsGtServer {
    cfg: Config,
    node: DepNode,
    /// The other partition servers of this DC (checkpoint gossip).
    dc_peers: Vec<NodeId>,
    /// Which writes are committed everywhere, and since when (deviation 2).
    settle: Settle,
    /// Checkpoint gossip: bounds heard from equivalents and DC peers.
    eq_bounds: BTreeMap<NodeId, u64>,
    dc_bounds: BTreeMap<NodeId, u64>,
    /// Checkpoints computed, (when, Lamport time), not yet usable.
    checkpoints: VecDeque<(u64, u64)>,
    /// The newest checkpoint computed at least `trans_time` ago.
    usable_checkpoint: u64,
    /// (when, key): a version of `key` was committed; collect the older
    /// ones from then on.
    version_gc: VecDeque<(u64, Key)>,
}

const RETRY_TIMER: u64 = 0;
const GC_TIMER: u64 = 1;

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
        match msg {
            // read_by_time (§2.4, §2.8); reads never block.
            Msg::Read { attempt, idx, key, at } => {
                let read = match at {
                    None => Ok(env.store().latest_where(&key, Version::committed).map(Version::read)),
                    Some(s) => match env.store().exact(&key, s) {
                        Some(v) if v.committed() => Ok(Some(v.read())),
                        _ => Err(()),
                    },
                };
                env.reply(from, Msg::ReadReply { attempt, idx, read });
            }
            Msg::PutReq { key, value, deps, nearest } => self.on_put(env, from, key, value, deps, nearest),
            _ => {} // the runtime refuses peer messages on client connections
        }
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, msg: Msg) {
        if !self.node.serving || !self.node.topology.contains(from) {
            return;
        }
        let equivalent = self.node.equivalents.contains(&from);
        match msg {
            Msg::Replicate { key, value, stamp, deps, nearest, written_us } => {
                if !self.node.accepts_replicate(from, &key, stamp, env.store()) {
                    return;
                }
                let check: Vec<Dep> = nearest.iter().filter_map(|&i| deps.get(i as usize).cloned()).collect();
                let v = Version { value, stamp, deps, state: State::Pending { nearest: check.clone() } };
                env.store().insert(key.clone(), v);
                self.node.on_replicate(env, key, stamp, &check, written_us);
            }
            Msg::Path(p) => {
                let settled = self.node.on_path(&mut self.settle, env, from, p);
                self.collect(env, settled);
            }
            Msg::NodeBound { lamport } if equivalent => {
                self.node.witness(lamport);
                let b = self.eq_bounds.entry(from).or_default();
                *b = (*b).max(lamport);
            }
            Msg::RangeBound { lamport } if self.dc_peers.contains(&from) => {
                self.node.witness(lamport);
                let b = self.dc_bounds.entry(from).or_default();
                *b = (*b).max(lamport);
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

impl CopsGtServer {
    /// `write_after` at the local owner (§2.6 step 2), dropping dependencies
    /// older than the checkpoint (§6.1).
    fn on_put(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: ClientId,
        key: Key,
        value: Value,
        deps: Arc<[Dep]>,
        nearest: Vec<u32>,
    ) {
        if let Err(why) = self.node.check_request(&key, &deps) {
            return env.reply(from, Msg::PutReply { result: Err(why) });
        }
        if let Some(&bad) = nearest.iter().find(|&&i| i as usize >= deps.len()) {
            let why = format!("nearest dependency index {bad} is out of range ({} dependencies)", deps.len());
            return env.reply(from, Msg::PutReply { result: Err(why) });
        }
        let cp = self.usable_checkpoint;
        // The list is shared, not copied, unless the checkpoint drops some.
        let (kept, near): (Arc<[Dep]>, Vec<u32>) = if deps.iter().all(|d| d.stamp.lamport() >= cp) {
            (deps, nearest)
        } else {
            let mut kept = Vec::with_capacity(deps.len());
            let mut near = Vec::with_capacity(nearest.len());
            let is_nearest: BTreeSet<u32> = nearest.into_iter().collect();
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
        let v = Version {
            value: value.clone(),
            stamp,
            deps: kept.clone(),
            state: State::Committed { at_us: now, never_depend: false },
        };
        env.store().insert(key.clone(), v);
        self.publish(env, &key, stamp, now);
        env.reply(from, Msg::PutReply { result: Ok((stamp, cp)) });
        for &to in &self.node.equivalents {
            let msg = Msg::Replicate {
                key: key.clone(),
                value: value.clone(),
                stamp,
                deps: kept.clone(),
                nearest: near.clone(),
                written_us: now,
            };
            env.send(to, msg);
        }
        self.settle.own_write(stamp);
    }

    /// Commit every replicated write whose checks passed (§2.7 step 5).
    fn commit_ready(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        for r in self.node.commit_ready(env) {
            self.publish(env, &r.key, r.stamp, r.written_us);
        }
    }

    /// A version was committed here: report it if a read now returns it,
    /// and schedule collection of what it overwrote and of its dependencies.
    fn publish(&mut self, env: &mut impl ServerEnv<Msg, Version>, key: &Key, stamp: Stamp, written_us: u64) {
        self.node.report_if_newest(env, key, stamp, written_us);
        if env.store().versions(key).len() > 1 {
            self.version_gc.push_back((env.now_us() + self.cfg.hold_us(), key.clone()));
        }
        self.settle.committed(stamp, key.clone());
    }

    /// Drop the stored dependencies of settled versions and flag them
    /// never-depend (§6.1).
    fn collect(&mut self, env: &mut impl ServerEnv<Msg, Version>, settled: Vec<(Stamp, Key)>) {
        for (s, key) in settled {
            if let Some(v) = env.store().exact(&key, s).cloned()
                && let State::Committed { at_us, never_depend: false } = v.state
            {
                let state = State::Committed { at_us, never_depend: true };
                env.store().replace(&key, Version { deps: Arc::from([]), state, ..v });
            }
        }
    }

    /// Ten times a second (§6.1): report commits to origins, collect
    /// dependencies that may go, gossip the checkpoint, collect versions.
    fn gc_tick(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        let now = env.now_us();
        // Report commits to origins; collect own writes settled everywhere,
        // here and (the message is sent) in every DC.
        let settled = self.settle.tick(&self.node, env);
        self.collect(env, settled);
        // The global checkpoint (deviation 3).
        let own = self.settle.oldest_unreplicated().map_or(self.node.lamport() + 1, |s| s.lamport());
        for &e in &self.node.equivalents {
            env.send(e, Msg::NodeBound { lamport: own });
        }
        let range =
            self.node.equivalents.iter().map(|e| self.eq_bounds.get(e).copied().unwrap_or(0)).fold(own, u64::min);
        for &p in &self.dc_peers {
            env.send(p, Msg::RangeBound { lamport: range });
        }
        let checkpoint =
            self.dc_peers.iter().map(|p| self.dc_bounds.get(p).copied().unwrap_or(0)).fold(range, u64::min);
        if self.checkpoints.back().is_none_or(|&(_, c)| c < checkpoint) {
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
    fn rebuild_gc_state(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
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
        self.settle.rebuild(self.node.me, unsettled);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{Dest, InFlight, TestNet, bytes, client_traffic, put, rot, text};
    use causeway_core::DcId;

    const ALICE: ClientId = ClientId(0);
    const READER: ClientId = ClientId(1);

    /// Two keys of one DC on different partitions.
    fn acl_and_album(net: &TestNet<CopsGt>) -> (Key, Key) {
        for i in 0..100 {
            let (a, b) = (bytes(&format!("acl{i}")), bytes(&format!("album{i}")));
            if net.topology.partition_of(&a) != net.topology.partition_of(&b) {
                return (a, b);
            }
        }
        unreachable!()
    }

    fn second_round_reads(net: &TestNet<CopsGt>) -> usize {
        net.queue.iter().filter(|m| m.msg.kind() == "read_at_req").count()
    }

    /// The ACL/album race of §2.9, forced step by step in one DC: the
    /// reader's `read_trans` reads the ACL (public); then Alice makes the ACL
    /// friends-only and posts to the album; then the reader's read of the
    /// album arrives and returns the new post. The first round alone gives
    /// ⟨public ACL, personal album⟩; the album's dependency list names the
    /// new ACL, so a second round fetches it. Returns the ROT's values and
    /// how many second-round reads it sent.
    fn acl_race(cfg: Config) -> (Vec<Option<String>>, usize) {
        let mut net = TestNet::<CopsGt>::new(1, 2, 2, cfg);
        let (acl, album) = acl_and_album(&net);
        put(&mut net, ALICE, &acl, "public");
        put(&mut net, ALICE, &album, "old");
        let album_server = net.server_for(DcId(0), &album);
        net.invoke(READER, Op::Rot { keys: vec![acl.clone(), album.clone()] });
        let held = move |m: &InFlight<Msg>| m.from == Dest::Client(READER) && m.to == Dest::Node(album_server);
        net.deliver_while(|m| client_traffic(m) && !held(m));
        for (k, v) in [(&acl, "friends"), (&album, "personal")] {
            net.invoke(ALICE, Op::Put { key: k.clone(), value: bytes(v) });
            net.deliver_while(|m| client_traffic(m) && !held(m));
            assert_eq!(net.take_result(ALICE), Some(OpResult::Put));
        }
        let mut second_round = 0;
        loop {
            if let Some(r) = net.take_result(READER) {
                let OpResult::Rot(vs) = r else { panic!("ROT returned {r:?}") };
                return (vs.into_iter().map(text).collect(), second_round);
            }
            let before = second_round_reads(&net);
            assert!(net.deliver_first(client_traffic), "the ROT must complete");
            second_round += second_round_reads(&net).saturating_sub(before);
        }
    }

    #[test]
    fn read_trans_never_returns_the_public_acl_with_the_personal_album() {
        let (got, second_round) = acl_race(Config::default());
        assert_eq!(got, vec![Some("friends".into()), Some("personal".into())]);
        assert_eq!(second_round, 1, "exactly the ACL is read again, by explicit version");
    }

    /// The same race catches a `read_trans` without its second round.
    #[test]
    fn a_one_round_read_trans_returns_the_anomaly() {
        let (got, second_round) = acl_race(Config { mutant_one_round_rot: true, ..Config::default() });
        assert_eq!(got, vec![Some("public".into()), Some("personal".into())]);
        assert_eq!(second_round, 0);
    }

    /// §6.1: a transaction that outlives `trans_time` restarts, and a
    /// second-round read of a version collected meanwhile is refused, not
    /// answered with something else. The ACL race again, but Alice then
    /// closes the ACL, and the reader's second round (for the friends-only
    /// ACL) arrives after `trans_time`, when that version is collected.
    #[test]
    fn a_read_trans_that_outlives_trans_time_restarts() {
        let cfg = Config { trans_time_ms: 50, clock_margin_ms: 0, gc_interval_ms: 10, ..Config::default() };
        let mut net = TestNet::<CopsGt>::new(1, 2, 2, cfg);
        let (acl, album) = acl_and_album(&net);
        put(&mut net, ALICE, &acl, "public");
        put(&mut net, ALICE, &album, "old");
        let (acl_server, album_server) = (net.server_for(DcId(0), &acl), net.server_for(DcId(0), &album));
        net.invoke(READER, Op::Rot { keys: vec![acl.clone(), album.clone()] });
        let held = move |m: &InFlight<Msg>| m.from == Dest::Client(READER) && m.to == Dest::Node(album_server);
        net.deliver_while(|m| client_traffic(m) && !held(m));
        for (k, v) in [(&acl, "friends"), (&album, "personal"), (&acl, "closed")] {
            net.invoke(ALICE, Op::Put { key: k.clone(), value: bytes(v) });
            net.deliver_while(|m| client_traffic(m) && !held(m));
            assert_eq!(net.take_result(ALICE), Some(OpResult::Put));
        }
        // The album read: round one ends, and the second round asks for the
        // friends-only ACL by version. Hold it; let trans_time pass and the
        // ACL server collect the overwritten version.
        let second = move |m: &InFlight<Msg>| m.from == Dest::Client(READER) && m.msg.kind() == "read_at_req";
        net.deliver_while(|m| client_traffic(m) && !second(m));
        assert_eq!(second_round_reads(&net), 1);
        net.advance_clocks(200_000);
        net.fire_timers(acl_server);
        assert_eq!(net.stores[acl_server.idx()].versions(&acl).len(), 1, "friends-only ACL collected");
        net.deliver_while(client_traffic);
        let r = net.take_result(READER).expect("the restarted transaction completes");
        let OpResult::Rot(vs) = r else { panic!("{r:?}") };
        let got: Vec<Option<String>> = vs.into_iter().map(text).collect();
        assert_eq!(got, vec![Some("closed".into()), Some("personal".into())]);
    }

    /// No write concurrent with the transaction: one round only.
    #[test]
    fn a_quiet_read_trans_takes_one_round() {
        let mut net = TestNet::<CopsGt>::new(1, 2, 2, Config::default());
        let (acl, album) = acl_and_album(&net);
        put(&mut net, ALICE, &acl, "friends");
        put(&mut net, ALICE, &album, "personal");
        net.invoke(READER, Op::Rot { keys: vec![acl.clone(), album.clone()] });
        let mut second_round = 0;
        while net.take_result(READER).is_none() {
            assert!(net.deliver_first(client_traffic));
            second_round += second_round_reads(&net);
        }
        assert_eq!(second_round, 0);
        assert_eq!(rot(&mut net, READER, &[&acl, &album]), vec![Some("friends".into()), Some("personal".into())]);
    }

    /// A write's dependencies are the whole context; its nearest are the
    /// heads nothing else in the context depends on (Fig 4.2: after w1 read
    /// and w3 written, w3 is nearest and w1 is covered by it).
    #[test]
    fn nearest_dependencies_exclude_what_another_dependency_covers() {
        let mut net = TestNet::<CopsGt>::new(1, 2, 2, Config::default());
        let (x, y) = acl_and_album(&net);
        put(&mut net, ALICE, &x, "w1");
        // The reader reads x (w1), then writes y (w3): w3 depends on w1.
        assert_eq!(crate::testkit::get(&mut net, READER, &x), Some("w1".into()));
        put(&mut net, READER, &y, "w3");
        // Alice reads y (w3, whose stored deps name w1) and x (w1).
        crate::testkit::get(&mut net, ALICE, &y);
        crate::testkit::get(&mut net, ALICE, &x);
        let client = &net.clients[ALICE.idx()];
        let (deps, nearest) = client.write_deps();
        let names: Vec<&[u8]> = deps.iter().map(|d| &d.key[..]).collect();
        assert!(names.contains(&&x[..]) && names.contains(&&y[..]), "{deps:?}");
        let nearest: Vec<&[u8]> = nearest.iter().map(|&i| &deps[i as usize].key[..]).collect();
        assert_eq!(nearest, vec![&y[..]], "x is covered by y's dependency list");
    }

    /// `write_deps` against a direct computation from the definition, on
    /// random contexts.
    #[test]
    fn write_deps_match_the_definition() {
        use rand::{Rng, SeedableRng};
        for seed in 0..200u64 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let topology = Arc::new(Topology::new(causeway_core::TopologySpec::full(2, 2)).unwrap());
            let ctx = ClientCtx { id: ClientId(0), dc: DcId(0), topology };
            let mut c = CopsGt::client(&Config::default(), ctx);
            c.checkpoint = rng.random_range(0..3);
            let key = |i: u32| bytes(&format!("k{i}"));
            let stamp =
                |rng: &mut rand_chacha::ChaCha8Rng| Stamp::new(rng.random_range(1..6), NodeId(rng.random_range(0..2)));
            for _ in 0..rng.random_range(0..5) {
                let mut deps: Vec<Dep> = (0..rng.random_range(0..6))
                    .map(|_| Dep { key: key(rng.random_range(0..4)), stamp: stamp(&mut rng) })
                    .collect();
                deps.sort_by(|a, b| {
                    (&a.key, a.stamp.origin()).cmp(&(&b.key, b.stamp.origin())).then(a.stamp.cmp(&b.stamp))
                });
                deps.dedup_by(|b, a| a.key == b.key && a.stamp.origin() == b.stamp.origin()); // keeps the older: fine for a test
                let s = stamp(&mut rng);
                c.heads.insert((key(rng.random_range(0..4)), s.origin()), (s, deps.into()));
            }
            // The definition.
            let cp = c.checkpoint;
            let mut want: BTreeMap<(Key, NodeId), Stamp> = BTreeMap::new();
            let mut covered: BTreeMap<(Key, NodeId), Stamp> = BTreeMap::new();
            for (_, (_, ds)) in c.heads.iter() {
                for d in ds.iter().filter(|d| d.stamp.lamport() >= cp) {
                    let e = covered.entry((d.key.clone(), d.stamp.origin())).or_default();
                    *e = (*e).max(d.stamp);
                }
            }
            for (slot, &s) in &covered {
                want.insert(slot.clone(), s);
            }
            let mut want_nearest = BTreeSet::new();
            for ((k, o), (s, _)) in &c.heads {
                if s.lamport() < cp {
                    continue;
                }
                let e = want.entry((k.clone(), *o)).or_default();
                *e = (*e).max(*s);
                if covered.get(&(k.clone(), *o)).is_none_or(|c| c < s) {
                    want_nearest.insert((k.clone(), *s));
                }
            }
            let (deps, nearest) = c.write_deps();
            let got: BTreeMap<(Key, NodeId), Stamp> =
                deps.iter().map(|d| ((d.key.clone(), d.stamp.origin()), d.stamp)).collect();
            assert_eq!(got.len(), deps.len(), "seed {seed}: one entry per key and origin");
            assert_eq!(got, want, "seed {seed}");
            let got_nearest: BTreeSet<(Key, Stamp)> =
                nearest.iter().map(|&i| (deps[i as usize].key.clone(), deps[i as usize].stamp)).collect();
            assert_eq!(got_nearest, want_nearest, "seed {seed}");
        }
    }
}
