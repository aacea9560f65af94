use super::config::*;
use super::msg::*;
use crate::kit::node::{equivalents_elsewhere, served_partition};
use causeway_core::{
    ClientId, DcId, Inserted, Key, NodeCtx, NodeId, Observation, OpError, PartitionId, Server, ServerEnv, Topology,
    Value,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

crate::kit::node::server_env!();

/// The one timer's token: expiry, retries, the hold after a restart.
const TIMER_TICK: u64 = 1;

/// Unchanged probes and settlements are sent again this often (ticks).
const SETTLE_REFRESH_TICKS: u64 = 20;

/// The store metadata a partition writes on its first start: finding it on
/// `on_start` means this is a restart (deviation 7).
const STARTED: &[u8] = b"cclo:started";

/// A CC-LO node. Only partition servers take part.
pub struct CcLoServer {
    pub(super) part: Option<Partition>,
}

impl CcLoServer {
    pub(super) fn new(cfg: &Config, ctx: NodeCtx) -> Self {
        CcLoServer { part: served_partition(&ctx).map(|(dc, p)| Partition::new(cfg, &ctx, dc, p)) }
    }
}

/// A session's latest read of a key by a ROT that reads at several
/// partitions (the paper's "readers" of the key): which ROT, which version
/// it got (`None`: none), and in which tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ReadRecord {
    pub(super) seq: u64,
    pub(super) got: Option<Stamp>,
    tick: u64,
}

/// The readers check of one of this partition's versions (a local PUT, or
/// a version replicated to this DC), identified by its key and stamp.
pub(super) struct Check {
    /// The client to answer, for a local PUT.
    client: Option<ClientId>,
    /// Partitions of this DC (this one included) still to answer: the tick
    /// the request last went out, and what it asked.
    awaiting: BTreeMap<NodeId, (u64, Vec<Dep>)>,
    collected: OldReaders,
    /// ROT ids received in answers, duplicates included (the paper's
    /// "cumulative" ids, §5).
    ids_received: u64,
    /// Other partitions asked.
    asked: u64,
    started_us: u64,
}

/// What a completed readers check reports once its version is visible.
struct Done {
    client: Option<ClientId>,
    /// Old readers collected.
    ids: u64,
    ids_received: u64,
    asked: u64,
    started_us: u64,
}

/// A check asked of this partition: answered once each dependency is
/// visible here and no post-restart hold is on.
pub(super) struct Incoming {
    deps: Vec<Dep>,
    missing: usize,
}

/// Who asked (this node for itself, too), and for which version.
type IncomingId = (NodeId, Key, Stamp);

/// Partition server p of DC m: the COPS-SNOW design Didona et al. call
/// CC-LO (§3, Fig. 2).
pub(super) struct Partition {
    cfg: Config,
    topology: Arc<Topology>,
    me: NodeId,
    m: DcId,
    partition: PartitionId,
    /// This partition's servers in the other DCs.
    peers: Vec<NodeId>,
    /// The Lamport clock.
    pub(super) clock: u64,
    /// Per key, the readers: per session (nonce), its latest ROT's read.
    pub(super) readers: BTreeMap<Key, BTreeMap<u64, ReadRecord>>,
    /// Visible versions with old readers, by the tick they became visible:
    /// their old readers are cleared `reader_ttl_us` later.
    expiring: VecDeque<(u64, Key, Stamp)>,
    pub(super) checks: BTreeMap<(Key, Stamp), Check>,
    pub(super) incoming: BTreeMap<IncomingId, Incoming>,
    /// Dependencies not yet visible here → the checks waiting for them.
    waiting: BTreeMap<(Key, Stamp), BTreeSet<IncomingId>>,
    /// Answers this partition gave itself, handled after the current step
    /// (so that a chain of versions waiting for each other is a loop, not a
    /// recursion).
    self_answers: VecDeque<(Key, Stamp, OldReaders)>,
    /// Timer firings since this incarnation started.
    pub(super) tick: u64,
    /// No readers check is answered before this tick (deviation 7).
    pub(super) hold_until: u64,
    /// Settling (deviation 10): per DC, its versions of this partition
    /// stamped below this Lamport time are settled (never-depend).
    pub(super) settled: Vec<u64>,
    /// Per replica: this partition's own versions stamped below this are
    /// visible there (its latest [`Msg::Through`]).
    through: BTreeMap<NodeId, u64>,
    /// The `below` of the last [`Msg::Probe`] sent.
    probed: u64,
    /// Bounds visible in every DC, each settled at its tick (a reader TTL
    /// after this partition learnt it).
    holding: VecDeque<(u64, u64)>,
    /// The newest bound put in `holding`.
    everywhere: u64,
}

impl Partition {
    fn new(cfg: &Config, ctx: &NodeCtx, m: DcId, partition: PartitionId) -> Self {
        let topology = ctx.topology.clone();
        Partition {
            cfg: cfg.clone(),
            me: ctx.id,
            m,
            partition,
            peers: equivalents_elsewhere(&topology, partition, m),
            clock: 0,
            readers: BTreeMap::new(),
            expiring: VecDeque::new(),
            checks: BTreeMap::new(),
            incoming: BTreeMap::new(),
            waiting: BTreeMap::new(),
            self_answers: VecDeque::new(),
            tick: 0,
            hold_until: 0,
            settled: vec![0; topology.dcs()],
            through: BTreeMap::new(),
            probed: 0,
            holding: VecDeque::new(),
            everywhere: 0,
            topology,
        }
    }
}

impl Server for CcLoServer {
    type Msg = Msg;
    type Version = Version;

    fn on_start(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        let Some(p) = self.part.as_mut() else { return };
        env.set_timer(p.cfg.tick_us, TIMER_TICK);
        p.recover(env);
        p.pump(env);
    }

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        let Some(p) = self.part.as_mut() else { return };
        match msg {
            Msg::PutReq { key, value, deps } => p.on_put(env, from, key, value, deps),
            Msg::RotReq { id, keys, record, lts } => p.on_rot(env, from, id, keys, record, lts),
            Msg::GetReq { id, key, lts } => p.on_get(env, from, id, key, lts),
            _ => {} // replies and peer messages never come from clients; the runtime rejects them at the edge
        }
        p.pump(env);
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, msg: Msg) {
        let Some(p) = self.part.as_mut() else { return };
        if !p.topology.contains(from) || from == p.me {
            return;
        }
        match msg {
            Msg::Replicate(r) => {
                let Replica { key, value, stamp, deps, written_us } = *r;
                p.on_replicate(env, from, key, value, stamp, deps, written_us)
            }
            Msg::CheckReq { key, stamp, deps } => p.on_check_req(env, from, key, stamp, deps),
            Msg::CheckReply { key, stamp, old_readers } => p.on_check_reply(env, from, key, stamp, old_readers),
            Msg::Probe { below } => p.on_probe(env, from, below),
            Msg::Through { below } => p.on_through(from, below),
            Msg::Settled { below } => p.on_settled(from, below),
            _ => {} // client traffic never comes from peers
        }
        p.pump(env);
    }

    fn on_timer(&mut self, env: &mut impl ServerEnv<Msg, Version>, token: u64) {
        let Some(p) = self.part.as_mut() else { return };
        if token == TIMER_TICK {
            p.on_tick(env);
            p.pump(env);
            env.set_timer(p.cfg.tick_us, TIMER_TICK);
        }
    }
}

impl Partition {
    // ------------------------------------------------------------ PUT

    /// PUT(y, Y1) (Didona et al. §3, Fig. 2): stamp Y1 above its
    /// dependencies (Lamport), store it invisible, and run the readers
    /// check: ask the partition of every dependency for the ROTs that read
    /// an older version of it, or are old readers of it. Y1 becomes visible
    /// — readable, acknowledged, replicated — once every answer is in.
    fn on_put(&mut self, env: &mut impl Env, client: ClientId, key: Key, value: Value, deps: Vec<Dep>) {
        let mut deps = deps;
        // The stamp goes above every dependency, settled ones too; those
        // need no check (deviation 10), and are not counted against
        // MAX_DEPS: a session that read many versions during a partition
        // can write again once they settle.
        let dep_max = deps.iter().map(|d| d.stamp.ts).max().unwrap_or(0);
        if let Err(e) = self.check_key(&key).and_then(|()| self.check_stamps(&deps)) {
            env.reply(client, Msg::PutReply(Err(e)));
            return;
        }
        deps.retain(|d| !self.is_settled(d.stamp));
        if let Err(e) = check_count(&deps) {
            env.reply(client, Msg::PutReply(Err(e)));
            return;
        }
        // Deviation 2: a write follows the previous write of its key
        // accepted in this DC — unless that one is settled, which needs no
        // check, as no settled dependency does (deviation 10): visible in
        // every DC, its old readers over. The stamp still goes above it.
        let prev = env.store().versions(&key).iter().rev().find(|v| v.stamp.dc == self.m).map(|v| v.stamp);
        if let Some(p) = prev
            && !self.is_settled(p)
        {
            deps.push(Dep { key: key.clone(), stamp: p });
        }
        deps.sort();
        deps.dedup();
        env.observe(Observation::Sample { what: "deps_per_write", value: deps.len() as u64 });
        self.clock = self.clock.max(dep_max) + 1;
        let stamp = Stamp { ts: self.clock, dc: self.m };
        // Last-writer-wins never puts a write before its causal past.
        assert!(
            deps.iter().all(|d| d.stamp < stamp) && prev.is_none_or(|p| p < stamp),
            "CC-LO: a PUT stamped below one of its dependencies or its key's previous write"
        );
        let written_us = env.now_us();
        if let Some(old_readers) = self.check_here_at_once(env, &deps) {
            let ids = old_readers.len() as u64;
            // The store's copy shares no reference count with the
            // replicas' ([`causeway_core::copy_if_short`]).
            let stored = causeway_core::copy_if_short(&value);
            let version = Version { value: stored, stamp, deps: Vec::new(), visible: true, old_readers, written_us };
            let newest = env.store().insert(&key, version) == Inserted::Newest;
            let done = Done { client: Some(client), ids, ids_received: 0, asked: 0, started_us: written_us };
            self.made_visible(env, key, stamp, value, written_us, deps, done, newest);
            return;
        }
        let version =
            Version { value, stamp, deps: deps.clone(), visible: false, old_readers: OldReaders::new(), written_us };
        env.store().insert(&key, version);
        self.start_check(env, key, stamp, deps, Some(client));
    }

    /// The readers check of a local PUT done in place, when it needs no
    /// other partition and nothing to wait for: every dependency is served
    /// by this partition and already visible here, and no post-restart hold
    /// is on (deviation 7). Returns the old readers the check would have
    /// collected (what [`Partition::answer`] gives this partition itself),
    /// or `None` when the check must run: then nothing has changed.
    ///
    /// Not a deviation: the check's request to itself would be answered at
    /// once with exactly this, and its answer handled before anything else
    /// runs (`pump`). Doing it here stores the version once, visible, and
    /// skips the check's bookkeeping — the whole readers check on one
    /// partition, as in a one-partition DC or for a session whose
    /// dependencies all live here.
    fn check_here_at_once(&self, env: &mut impl Env, deps: &[Dep]) -> Option<OldReaders> {
        if self.tick < self.hold_until {
            return None;
        }
        for d in deps {
            match self.topology.server_for_key(self.m, &d.key) {
                None => {} // no server to ask: the check skips it too
                Some(n) if n != self.me => return None,
                Some(_) if !self.cfg.mutant_skip_dep_check && !self.is_visible(env, d) => return None,
                Some(_) => {}
            }
        }
        let here = deps.iter().filter(|d| self.topology.server_for_key(self.m, &d.key) == Some(self.me));
        Some(self.old_readers_of(env, here))
    }

    /// Send the readers check of `key`@`stamp` to the partitions of its
    /// dependencies in this DC, one request per partition (this one answers
    /// itself in place).
    fn start_check(&mut self, env: &mut impl Env, key: Key, stamp: Stamp, deps: Vec<Dep>, client: Option<ClientId>) {
        let mut by_node: BTreeMap<NodeId, Vec<Dep>> = BTreeMap::new();
        for d in deps {
            let Some(n) = self.topology.server_for_key(self.m, &d.key) else { continue };
            by_node.entry(n).or_default().push(d);
        }
        let awaiting = by_node.iter().map(|(&n, ds)| (n, (self.tick, ds.clone()))).collect();
        let asked = by_node.keys().filter(|&&n| n != self.me).count() as u64;
        let check =
            Check { client, awaiting, collected: OldReaders::new(), ids_received: 0, asked, started_us: env.now_us() };
        self.checks.insert((key.clone(), stamp), check);
        if by_node.is_empty() {
            self.finish(env, key, stamp);
            return;
        }
        for (n, ds) in by_node {
            if n == self.me {
                self.on_check_req(env, n, key.clone(), stamp, ds);
            } else {
                env.send(n, Msg::CheckReq { key: key.clone(), stamp, deps: ds });
            }
        }
    }

    /// ⟨CheckReq⟩ for `key`@`stamp` from a partition of this DC: answer once
    /// every dependency named is visible here. A repeat of a request still
    /// waiting (a retry) is ignored; one already answered is answered again.
    fn on_check_req(&mut self, env: &mut impl Env, from: NodeId, key: Key, stamp: Stamp, mut deps: Vec<Dep>) {
        if self.topology.dc_of(from) != self.m
            || deps.len() > MAX_DEPS
            || deps.iter().any(|d| self.check_key(&d.key).is_err())
        {
            return; // a malformed peer message is dropped
        }
        let id = (from, key, stamp);
        if self.incoming.contains_key(&id) {
            return;
        }
        deps.sort();
        deps.dedup();
        let mut missing = 0;
        if !self.cfg.mutant_skip_dep_check {
            for d in &deps {
                if !self.is_visible(env, d) {
                    missing += 1;
                    self.waiting.entry((d.key.clone(), d.stamp)).or_default().insert(id.clone());
                }
            }
        }
        self.incoming.insert(id.clone(), Incoming { deps, missing });
        if missing == 0 && self.tick >= self.hold_until {
            self.answer(env, id);
        }
    }

    /// Whether dependency `d` is visible here: its version, or a later one
    /// of its key from the same DC, which follows it (deviation 2) and is
    /// what remains once version GC dropped it (deviation 4).
    fn is_visible(&self, env: &mut impl Env, d: &Dep) -> bool {
        env.store()
            .versions(&d.key)
            .iter()
            .rev()
            .take_while(|v| v.stamp >= d.stamp)
            .any(|v| v.visible && v.stamp.dc == d.stamp.dc)
    }

    /// Every dependency of check `id` is visible here: answer with its old
    /// readers — the ROTs recorded reading an older version of a
    /// dependency's key than the dependency, and the old readers of the
    /// dependency itself (propagation: whoever must not see it must not
    /// see what follows it either).
    fn answer(&mut self, env: &mut impl Env, id: IncomingId) {
        let Some(inc) = self.incoming.remove(&id) else { return };
        let (from, key, stamp) = id;
        let old = if from == self.me || !self.cfg.mutant_no_old_reader_propagation {
            self.old_readers_of(env, inc.deps.iter())
        } else {
            OldReaders::new()
        };
        if from == self.me {
            self.self_answers.push_back((key, stamp, old));
        } else {
            env.send(from, Msg::CheckReply { key, stamp, old_readers: old });
        }
    }

    /// The old readers of dependencies `deps`, all visible here: the ROTs
    /// recorded reading an older version of a dependency's key than the
    /// dependency, and the old readers of the dependency itself.
    fn old_readers_of<'d>(&self, env: &mut impl Env, deps: impl Iterator<Item = &'d Dep>) -> OldReaders {
        let mut old = OldReaders::new();
        for d in deps {
            if let Some(rs) = self.readers.get(&d.key) {
                for (&nonce, r) in rs.iter().filter(|(_, r)| r.got < Some(d.stamp)) {
                    add(&mut old, nonce, r.seq);
                }
            }
            let first = env
                .store()
                .versions(&d.key)
                .iter()
                .find(|v| v.visible && v.stamp.dc == d.stamp.dc && v.stamp >= d.stamp);
            if let Some(v) = first {
                merge(&mut old, &v.old_readers);
            }
        }
        old
    }

    /// Answers this partition gave itself, until none is left.
    fn pump(&mut self, env: &mut impl Env) {
        while let Some((key, stamp, old)) = self.self_answers.pop_front() {
            self.on_check_reply(env, self.me, key, stamp, old);
        }
    }

    fn on_check_reply(&mut self, env: &mut impl Env, from: NodeId, key: Key, stamp: Stamp, old: OldReaders) {
        let Some(c) = self.checks.get_mut(&(key.clone(), stamp)) else { return };
        if c.awaiting.remove(&from).is_none() {
            return; // a repeated answer
        }
        c.ids_received += old.len() as u64;
        merge(&mut c.collected, &old);
        if c.awaiting.is_empty() {
            self.finish(env, key, stamp);
        }
    }

    /// The check of `key`@`stamp` is complete: the version becomes visible
    /// (except to its old readers).
    fn finish(&mut self, env: &mut impl Env, key: Key, stamp: Stamp) {
        let Some(c) = self.checks.remove(&(key.clone(), stamp)) else { return };
        let Some(v) = env.store().exact(&key, stamp) else { return };
        if v.visible {
            return;
        }
        // The pending version's dependencies go to its replicas; the
        // visible one keeps none.
        let (value, written_us, deps) = (v.value.clone(), v.written_us, v.deps.clone());
        let Check { client, collected, ids_received, asked, started_us, .. } = c;
        let ids = collected.len() as u64;
        // Its value shares no reference count with the replicas' either.
        let visible = Version {
            value: causeway_core::copy_if_short(&value),
            stamp,
            deps: Vec::new(),
            visible: true,
            old_readers: collected,
            written_us,
        };
        env.store().replace(&key, visible);
        let done = Done { client, ids, ids_received, asked, started_us };
        self.made_visible(env, key, stamp, value, written_us, deps, done, false);
    }

    /// `key`@`stamp` (`value`, written at `written_us`) is stored visible:
    /// its check's figures are observed, a local PUT is acknowledged and
    /// replicated (with `deps`), checks waiting here for it proceed, and the
    /// key's old versions are collected. `newest`: the store said it is the
    /// key's newest version (else the store is asked whether it is the
    /// newest visible one).
    #[allow(clippy::too_many_arguments)]
    fn made_visible(
        &mut self,
        env: &mut impl Env,
        key: Key,
        stamp: Stamp,
        value: Value,
        written_us: u64,
        deps: Vec<Dep>,
        done: Done,
        newest: bool,
    ) {
        let local = stamp.dc == self.m;
        let ids = done.ids;
        let has_old_readers = ids > 0;
        let bytes = done.ids_received * ROT_ID_BYTES;
        let waited_us = env.now_us().saturating_sub(done.started_us);
        if local {
            env.observe(Observation::Sample { what: "readers_check_ids", value: ids });
            env.observe(Observation::Sample { what: "readers_check_bytes", value: bytes });
            env.observe(Observation::Sample { what: "readers_check_partitions", value: done.asked });
            env.observe(Observation::Blocked { what: "readers_check", waited_us });
        } else {
            env.observe(Observation::Sample { what: "remote_readers_check_ids", value: ids });
            env.observe(Observation::Sample { what: "remote_readers_check_bytes", value: bytes });
            env.observe(Observation::Blocked { what: "dep_check", waited_us });
        }
        if has_old_readers {
            self.expiring.push_back((self.tick, key.clone(), stamp));
        }
        if newest || env.store().latest_where(&key, |x| x.visible).map(|x| x.stamp) == Some(stamp) {
            env.observe(Observation::Visible { key: &key, value: &value, origin: stamp.dc, written_us });
        }
        if let Some(client) = done.client {
            env.reply(client, Msg::PutReply(Ok(stamp)));
        }
        if local {
            for &peer in &self.peers {
                let r = Replica { key: key.clone(), value: value.clone(), stamp, deps: deps.clone(), written_us };
                let msg = Msg::Replicate(Box::new(r));
                env.send(peer, msg);
            }
        }
        // Waiters for this version, or an earlier one of its key from its
        // DC (which it follows, deviation 2).
        if !self.waiting.is_empty() {
            let low = (key.clone(), Stamp { ts: 0, dc: DcId(0) });
            let released: Vec<(Key, Stamp)> = self
                .waiting
                .range(low..=(key.clone(), stamp))
                .filter(|((_, s), _)| s.dc == stamp.dc)
                .map(|(k, _)| k.clone())
                .collect();
            for k in released {
                for id in self.waiting.remove(&k).unwrap_or_default() {
                    let Some(inc) = self.incoming.get_mut(&id) else { continue };
                    inc.missing -= 1;
                    if inc.missing == 0 && self.tick >= self.hold_until {
                        self.answer(env, id);
                    }
                }
            }
        }
        self.collect_versions(env, &key);
    }

    // ------------------------------------------------------------ replication

    /// A version from its origin DC: store it invisible and run the
    /// combined dependency and readers check with this DC's partitions
    /// (COPS-SNOW re-runs the readers check in every DC; Didona et al. §3).
    #[allow(clippy::too_many_arguments)]
    fn on_replicate(
        &mut self,
        env: &mut impl Env,
        from: NodeId,
        key: Key,
        value: Value,
        stamp: Stamp,
        deps: Vec<Dep>,
        written_us: u64,
    ) {
        let well_formed = self.peers.contains(&from)
            && stamp.dc == self.topology.dc_of(from)
            && self.check_key(&key).is_ok()
            && self.check_deps(&deps).is_ok()
            && deps.iter().all(|d| d.stamp < stamp);
        if !well_formed {
            return; // a malformed peer message is dropped
        }
        self.clock = self.clock.max(stamp.ts);
        let version =
            Version { value, stamp, deps: deps.clone(), visible: false, old_readers: OldReaders::new(), written_us };
        if env.store().insert(&key, version) == Inserted::Duplicate {
            return;
        }
        self.start_check(env, key, stamp, deps, None);
    }

    // ------------------------------------------------------------ ROT

    /// The one round of a ROT: for each key, the newest visible version
    /// this ROT is not an old reader of; the ROT is recorded as a reader of
    /// each key if it reads at other partitions too. Never waits.
    #[allow(clippy::too_many_arguments)]
    fn on_rot(&mut self, env: &mut impl Env, client: ClientId, id: RotId, keys: Vec<Key>, record: bool, lts: u64) {
        let refuse = if keys.is_empty() {
            Some(OpError::BadRequest("a read names no key".into()))
        } else {
            keys.iter().try_for_each(|k| self.check_key(k)).err()
        };
        if let Some(e) = refuse {
            env.reply(client, Msg::RotReply { seq: id.seq, items: Err(e) });
            return;
        }
        let snapshot = self.snapshot(lts);
        let mut items = Vec::with_capacity(keys.len());
        for key in keys {
            let item = self.read(env, id, &key, snapshot);
            if record && snapshot.is_none() {
                let rec = ReadRecord { seq: id.seq, got: item.as_ref().map(|i| i.stamp), tick: self.tick };
                let e = self.readers.entry(key).or_default().entry(id.nonce).or_insert(rec);
                if e.seq <= id.seq {
                    *e = rec;
                }
            }
            items.push(item);
        }
        env.reply(client, Msg::RotReply { seq: id.seq, items: Ok(items) });
    }

    /// A GET: a ROT of one key, so at one partition and not recorded
    /// (deviation 5), in a message of its own (no vectors to allocate).
    fn on_get(&mut self, env: &mut impl Env, client: ClientId, id: RotId, key: Key, lts: u64) {
        let item = match self.check_key(&key) {
            Ok(()) => {
                let snapshot = self.snapshot(lts);
                Ok(self.read(env, id, &key, snapshot))
            }
            Err(e) => Err(e),
        };
        env.reply(client, Msg::GetReply { seq: id.seq, item });
    }

    /// The Lamport-only mutant's snapshot, max(the session's highest
    /// timestamp, this clock), which the clock then moves to (the straw
    /// man: a snapshot from Lamport time alone); `None` for CC-LO.
    fn snapshot(&mut self, lts: u64) -> Option<u64> {
        if !self.cfg.mutant_lamport_only {
            return None;
        }
        self.clock = self.clock.max(lts);
        Some(self.clock)
    }

    /// What ROT `id` reads of `key`: the newest visible version it is not
    /// an old reader of (the mutant: the newest stamped at most `snapshot`).
    fn read(&self, env: &mut impl Env, id: RotId, key: &Key, snapshot: Option<u64>) -> Option<Item> {
        let v = env.store().latest_where(key, |v| {
            v.visible
                && match snapshot {
                    Some(ts) => v.stamp.ts <= ts,
                    None => !contains(&v.old_readers, id),
                }
        });
        v.map(|v| Item {
            value: causeway_core::copy_if_short(&v.value),
            stamp: v.stamp,
            never_depend: self.is_settled(v.stamp),
        })
    }

    // ------------------------------------------------------------ settling (deviation 10)

    /// Whether versions stamped `stamp` are settled here: visible in every
    /// DC for a reader TTL.
    fn is_settled(&self, stamp: Stamp) -> bool {
        self.settled.get(stamp.dc.idx()).is_some_and(|&b| stamp.ts < b)
    }

    /// Every own version stamped below this has been replicated: the
    /// oldest own version still in its readers check, else the next stamp.
    fn sent_below(&self) -> u64 {
        self.oldest_pending(self.m).unwrap_or(self.clock + 1)
    }

    /// The Lamport time of the oldest version from `dc` still in its check
    /// here.
    fn oldest_pending(&self, dc: DcId) -> Option<u64> {
        self.checks.keys().filter(|(_, s)| s.dc == dc).map(|(_, s)| s.ts).min()
    }

    /// Once a tick: probe the replicas; a bound visible everywhere waits a
    /// reader TTL, then is settled here and at the replicas. Unchanged
    /// probes and settlements go out again every [`SETTLE_REFRESH_TICKS`]
    /// (a restarted node has forgotten them).
    fn settle_tick(&mut self, env: &mut impl Env) {
        if !self.cfg.settle {
            return;
        }
        let refresh = self.tick.is_multiple_of(SETTLE_REFRESH_TICKS);
        let below = self.sent_below();
        if below != self.probed || refresh {
            self.probed = below;
            for &peer in &self.peers {
                env.send(peer, Msg::Probe { below });
            }
        }
        let everywhere = self.peers.iter().map(|p| self.through.get(p).copied().unwrap_or(0)).fold(below, u64::min);
        if everywhere > self.everywhere {
            self.everywhere = everywhere;
            self.holding.push_back((everywhere, self.tick + self.cfg.ttl_ticks() + 1));
        }
        let mut settled = None;
        while let Some(&(b, due)) = self.holding.front()
            && due <= self.tick
        {
            self.holding.pop_front();
            settled = Some(b);
        }
        let own = &mut self.settled[self.m.idx()];
        if let Some(b) = settled {
            *own = (*own).max(b);
        }
        if settled.is_some() || (refresh && *own > 0) {
            let below = *own;
            for &peer in &self.peers {
                env.send(peer, Msg::Settled { below });
            }
        }
    }

    /// ⟨Probe⟩ from a replica's origin: everything it stamped below
    /// `below` has arrived (links are FIFO); what is not pending here is
    /// visible.
    fn on_probe(&mut self, env: &mut impl Env, from: NodeId, below: u64) {
        if !self.peers.contains(&from) {
            return;
        }
        let pending = self.oldest_pending(self.topology.dc_of(from));
        env.send(from, Msg::Through { below: pending.map_or(below, |p| p.min(below)) });
    }

    fn on_through(&mut self, from: NodeId, below: u64) {
        if self.peers.contains(&from) {
            let t = self.through.entry(from).or_default();
            *t = (*t).max(below);
        }
    }

    fn on_settled(&mut self, from: NodeId, below: u64) {
        if self.peers.contains(&from) {
            let s = &mut self.settled[self.topology.dc_of(from).idx()];
            *s = (*s).max(below);
        }
    }

    // ------------------------------------------------------------ timer, GC and recovery

    /// One tick: expire reader records and old-reader sets older than the
    /// TTL (their ROTs are over, deviation 3), end the post-restart hold,
    /// re-send unanswered checks.
    fn on_tick(&mut self, env: &mut impl Env) {
        self.tick += 1;
        // A record made at tick k is dropped at tick k + ttl + 1: the
        // (k+1)-th firing came after the record, and firings are at least
        // `tick_us` apart, so it lived at least `reader_ttl_us`.
        if let Some(horizon) = self.tick.checked_sub(self.cfg.ttl_ticks()) {
            self.readers.retain(|_, rs| {
                rs.retain(|_, r| r.tick >= horizon);
                !rs.is_empty()
            });
            while self.expiring.front().is_some_and(|(t, _, _)| *t < horizon) {
                let Some((_, key, stamp)) = self.expiring.pop_front() else { break };
                if let Some(v) = env.store().exact(&key, stamp).filter(|v| !v.old_readers.is_empty()).cloned() {
                    env.store().replace(&key, Version { old_readers: OldReaders::new(), ..v });
                    self.collect_versions(env, &key);
                }
            }
        }
        if self.tick == self.hold_until {
            let ready: Vec<IncomingId> =
                self.incoming.iter().filter(|(_, inc)| inc.missing == 0).map(|(id, _)| id.clone()).collect();
            for id in ready {
                self.answer(env, id);
            }
        }
        self.settle_tick(env);
        let retry = self.cfg.retry_ticks();
        let (me, tick) = (self.me, self.tick);
        for ((key, stamp), c) in self.checks.iter_mut() {
            for (&n, (sent, deps)) in c.awaiting.iter_mut() {
                if n != me && *sent + retry <= tick {
                    *sent = tick;
                    env.send(n, Msg::CheckReq { key: key.clone(), stamp: *stamp, deps: deps.clone() });
                }
            }
        }
    }

    /// Version GC (deviation 4): once the newest visible version of `key`
    /// with no old readers is V, every ROT reads V or newer, so older
    /// versions go — except pending ones, and the newest visible one of
    /// each DC, which answers dependency checks for its DC's earlier ones.
    fn collect_versions(&mut self, env: &mut impl Env, key: &Key) {
        if self.cfg.mutant_lamport_only {
            return;
        }
        let versions = env.store().versions(key);
        let Some(at) = versions.iter().rposition(|v| v.visible && v.old_readers.is_empty()) else { return };
        if at == 0 {
            return; // nothing older than the floor
        }
        let floor = versions[at].stamp;
        // The newest visible version of each DC: a handful of DCs, so a
        // short list, not a map (this runs on every PUT).
        let mut keep: Vec<Stamp> = Vec::new();
        for v in versions.iter().rev().filter(|v| v.visible) {
            if keep.iter().all(|s| s.dc != v.stamp.dc) {
                keep.push(v.stamp);
            }
        }
        env.store().gc_key_keeping(key, |v| v.stamp == floor, |v| !v.visible || keep.contains(&v.stamp));
    }

    /// On start: the clock above every stored version; the checks of
    /// versions not yet visible run again (a local PUT's client has lost its
    /// answer and times out); old readers expire a TTL from now. After a
    /// restart, the reader records are lost: no check is answered for a
    /// TTL (deviation 7).
    fn recover(&mut self, env: &mut impl Env) {
        if env.store().meta().is_some() {
            self.hold_until = self.cfg.ttl_ticks() + 1;
        } else {
            env.store().set_meta(STARTED.to_vec());
        }
        let mut pending = Vec::new();
        for k in env.store().keys_sorted() {
            for v in env.store().versions(&k) {
                self.clock = self.clock.max(v.stamp.ts);
                if !v.visible {
                    pending.push((k.clone(), v.stamp, v.deps.clone()));
                } else if !v.old_readers.is_empty() {
                    self.expiring.push_back((0, k.clone(), v.stamp));
                }
            }
        }
        for (key, stamp, deps) in pending {
            self.start_check(env, key, stamp, deps, None);
        }
    }

    fn check_key(&self, key: &[u8]) -> Result<(), OpError> {
        if self.topology.partition_of(key) == self.partition {
            Ok(())
        } else {
            Err(OpError::BadRequest(format!("key not stored at this server ({:?} of {:?})", self.partition, self.m)))
        }
    }

    /// At most [`MAX_DEPS`] dependencies, each stamped as
    /// [`Partition::check_stamps`] requires.
    fn check_deps(&self, deps: &[Dep]) -> Result<(), OpError> {
        check_count(deps).and_then(|()| self.check_stamps(deps))
    }

    /// Each dependency stamped in a DC that exists, with a Lamport time a
    /// clock can still go past.
    fn check_stamps(&self, deps: &[Dep]) -> Result<(), OpError> {
        let dcs = self.topology.dcs();
        if deps.iter().any(|d| d.stamp.dc.idx() >= dcs || d.stamp.ts >= 1 << 62) {
            return Err(OpError::BadRequest("a dependency stamped in an unknown DC or past the clock's range".into()));
        }
        Ok(())
    }
}

/// At most [`MAX_DEPS`] dependencies (settled ones are not counted: a PUT
/// drops them first).
fn check_count(deps: &[Dep]) -> Result<(), OpError> {
    if deps.len() > MAX_DEPS {
        let n = deps.len();
        return Err(OpError::BadRequest(format!("{n} unsettled dependencies; at most {MAX_DEPS}")));
    }
    Ok(())
}
