use super::config::*;
use super::msg::*;
use super::txn_state::{Coord, Deferred, Part, Target, check_batch_shape};
use crate::explicit_deps::replication::{Dep, DepNode, DepVersion, PathConfig, Settle, Stamp};
use crate::kit::msg::Thin;
use bytes::Bytes;
use causeway_core::column::DEFAULT_COLUMN;
use causeway_core::column::{family_prefix, is_location_key, location_key, row_of};
use causeway_core::{ClientId, Key, KeyIndex, NodeCtx, NodeId, Observation, Server, ServerEnv, SnapshotFloor, Value};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// One Eiger server (a logical server of one DC, Lloyd §5.1): a Lamport
/// clock, versions with valid times, the replication path.
pub struct EigerServer {
    pub(super) cfg: Config,
    /// The Lamport clock, equivalents and the `dep_check` path (shared with
    /// COPS).
    pub(super) node: DepNode,
    /// (when, key's store index): a version of the key was applied; collect
    /// the versions it superseded from then on (§5.3, "limiting old
    /// values").
    version_gc: VecDeque<(u64, KeyIndex)>,
    /// Write-only transactions this node coordinates (§5.4), until every
    /// cohort acknowledged the commit.
    pub(super) coords: BTreeMap<TxnId, Coord>,
    /// Transactions with writes prepared or held here, as a cohort, not
    /// committed yet (rebuilt from the store after a restart).
    pub(super) parts: BTreeMap<TxnId, Part>,
    /// Second-round reads waiting for commit checks (§5.4.4).
    pub(super) deferred: Vec<Deferred>,
    /// Every encoded location key stored here, in order: a slice is a
    /// range of it (the store itself is a hash map). Keys are never
    /// removed from the store (collection keeps a key's newest version).
    pub(super) columns: BTreeSet<Key>,
    /// A remote DC's held write of a transaction → the transaction, until
    /// the write is released: what the replication path's progress on a
    /// held write ([`DepNode::take_held_progress`]) is about.
    pub(super) held_txn: BTreeMap<Stamp, TxnId>,
    /// Transactions a message or the replication path's progress may have
    /// made ready to NOTIFY or PREPARE ([`EigerServer::advance_txns`]).
    pub(super) dirty_txns: BTreeSet<TxnId>,
    /// Look at every transaction, not only the dirty ones (after a restart,
    /// and on the retry timer as a safety net).
    pub(super) scan_all_txns: bool,
    /// Outcomes of transactions this node applied as a cohort lately, for
    /// a termination that asks (deviation 7), with when each may go.
    pub(super) recent: BTreeMap<TxnId, Outcome>,
    pub(super) recent_until: VecDeque<(u64, TxnId)>,
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
            columns: BTreeSet::new(),
            held_txn: BTreeMap::new(),
            dirty_txns: BTreeSet::new(),
            scan_all_txns: false,
            recent: BTreeMap::new(),
            recent_until: VecDeque::new(),
        }
    }

    /// Record that `key` has a version here (for slices).
    pub(super) fn note_key(&mut self, key: &Key) {
        if is_location_key(key) && !self.columns.contains(key) {
            self.columns.insert(key.clone());
        }
    }

    /// The keys a slice covers that have versions here, in column order:
    /// the row's plain key stands for column `value` of `default`.
    pub(super) fn slice_keys(&self, s: &SliceSpec) -> Vec<(Bytes, Key)> {
        let Ok(prefix) = family_prefix(&s.row, &s.family) else { return Vec::new() };
        let in_range = |c: &[u8]| c >= &s.start[..] && (s.stop.is_empty() || c <= &s.stop[..]);
        let from = [&prefix[..], &s.start[..]].concat();
        let mut out: Vec<(Bytes, Key)> = self
            .columns
            .range(Key::from(from)..)
            .take_while(|k| k.starts_with(&prefix))
            .map(|k| (k.slice(prefix.len()..), k.clone()))
            .take_while(|(c, _)| in_range(c))
            .collect();
        let default = location_key(&s.row, &s.family, DEFAULT_COLUMN.as_bytes());
        if let Ok(k) = default
            && !is_location_key(&k)
            && in_range(DEFAULT_COLUMN.as_bytes())
        {
            out.push((Bytes::from_static(DEFAULT_COLUMN.as_bytes()), k));
            out.sort();
        }
        out
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
            self.note_key(&key);
            let versions = env.store().versions(&key);
            for v in versions {
                if let Some(evt) = v.evt() {
                    self.node.witness(evt);
                }
                if let Some(TxnPart {
                    phase: Phase::Prepared { vote: t, .. } | Phase::Decided { at: t } | Phase::Committing { at: t },
                    ..
                }) = v.part()
                {
                    self.node.witness(*t);
                }
            }
            if versions.len() > 1
                && let Some(index) = env.store().index_of(&key)
            {
                self.version_gc.push_back((now + self.cfg.hold_us(), index));
            }
        }
        // Transactions in flight resume (their state is in the store).
        self.recover_txns(env);
        self.commit_ready(env);
        self.scan_all_txns = true;
        self.advance_txns(env);
        env.set_timer(self.node.retry_us, RETRY_TIMER);
        env.set_timer(self.cfg.gc_interval_ms * 1_000, GC_TIMER);
        env.set_timer(self.cfg.txn_retry_ms * 1_000, TXN_TIMER);
    }

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        if !self.node.serving {
            return;
        }
        // A read of a key this node does not own, or of no column of this
        // store (malformed, unknown family), is refused.
        let target = match &msg {
            Msg::Read { attempt, keys, .. } => Some((
                *attempt,
                keys.iter().try_for_each(|(_, key)| {
                    self.node.check_owner(key).and_then(|()| self.cfg.column_kind(key).map(|_| ()))
                }),
            )),
            Msg::ReadAt { attempt, key, .. } => {
                Some((*attempt, self.node.check_owner(key).and_then(|()| self.cfg.column_kind(key).map(|_| ()))))
            }
            Msg::ReadsAt { attempt, keys, .. } => Some((
                *attempt,
                keys.iter().try_for_each(|(_, key)| {
                    self.node.check_owner(key).and_then(|()| self.cfg.column_kind(key).map(|_| ()))
                }),
            )),
            Msg::SliceRead { attempt, slice, .. } | Msg::SliceReadAt { attempt, slice, .. } => {
                Some((*attempt, self.node.check_owner(&slice.row).and_then(|()| self.check_slice(slice))))
            }
            _ => None,
        };
        if let Some((attempt, Err(reason))) = target {
            return env.reply(from, Msg::Refused { attempt, reason });
        }
        match msg {
            // First round (§5.3): the current version, valid from its EVT
            // through now.
            Msg::Read { attempt, keys, floor } => {
                self.node.witness(floor);
                let lvt = self.node.lamport();
                let now = env.now_us();
                let (store, settle) = (env.store(), &self.node.settle);
                if let [(idx, key)] = &keys[..] {
                    // A get: one answer, no vector.
                    let mut read = current_read(first_round_versions(store, key, now), lvt);
                    forget_settled(&mut read, settle);
                    return env.reply(from, Msg::ReadReply { attempt, idx: *idx, read: Ok(read), indirected: false });
                }
                let reads = keys
                    .into_iter()
                    .map(|(idx, key)| {
                        let mut read = current_read(first_round_versions(store, &key, now), lvt);
                        forget_settled(&mut read, settle);
                        (idx, read)
                    })
                    .collect();
                env.reply(from, Msg::ReadsReply { attempt, reads });
            }
            // A slice (§5.3 for a location set on one server): every
            // column's current version; valid from the newest EVT among
            // the columns that decide the answer through now.
            Msg::SliceRead { attempt, idx, slice, floor } => {
                self.node.witness(floor);
                let lvt = self.node.lamport();
                let keys = self.slice_keys(&slice);
                let now = env.now_us();
                for (_, key) in &keys {
                    first_round_versions(env.store(), key, now);
                }
                let read =
                    slice_read(env.store(), &slice, &keys, lvt, None).expect("a current read is never collected");
                env.reply(from, Msg::ReadReply { attempt, idx, read: Ok(read), indirected: false });
            }
            // Second round (`multiget_slice_by_time`, Fig 5.5): the clock
            // moves to `at` first, so nothing applied from now on is
            // valid at `at`, and the answer is final once every prepared
            // transaction that may have committed by `at` is known
            // (commit checks, §5.4.4).
            Msg::ReadAt { attempt, idx, key, at } => {
                self.node.witness(at);
                self.read_at(env, Deferred::new(from, attempt, idx, Target::Key(key), at));
            }
            // A row's columns at `at`, each a read of its own.
            Msg::ReadsAt { attempt, keys, at } => {
                self.node.witness(at);
                for (idx, key) in keys {
                    self.read_at(env, Deferred::new(from, attempt, idx, Target::Key(key), at));
                }
            }
            Msg::SliceReadAt { attempt, idx, slice, at } => {
                self.node.witness(at);
                self.read_at(env, Deferred::new(from, attempt, idx, Target::Slice(*slice), at));
            }
            Msg::AddReq { key, delta, deps, floor } => self.on_add(env, from, key, delta, deps, floor),
            Msg::PutReq { key, value, deps, floor } => self.on_put(env, from, key, value, deps, floor),
            Msg::BatchReq { writes, deps, floor } => self.on_batch(env, from, writes, deps, floor),
            Msg::WotReq { info, writes, deps, floor } => self.on_wot(env, from, *info, writes, deps, floor),
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
            Msg::Replicate(r) => {
                let Replica { key, value, stamp, deps, written_us } = *r;
                self.store_replicated(env, from, key, value, stamp, deps, written_us);
            }
            // A row's columns from one batch: each stored pending as a
            // `Replicate` would be; the first carries the batch's
            // dependencies, the others depend on it (here, no check sent).
            Msg::ReplicateRow { writes, deps, written_us } => {
                let mut first: Option<Dep> = None;
                for (key, value, stamp) in writes {
                    let deps = match &first {
                        Some(d) => vec![d.clone()],
                        None => deps.clone(),
                    };
                    if self.store_replicated(env, from, key.clone(), value, stamp, deps, written_us) {
                        first.get_or_insert(Dep { key, stamp });
                    }
                }
            }
            // A replicated counter add (§5.2): pending like any replicated
            // write; folded into the running total when its checks pass.
            Msg::ReplicateAdd { key, delta, stamp, deps, written_us } => {
                if !self.node.accepts_replicate(from, &key, stamp, env.store()) {
                    return;
                }
                let counter = Counter {
                    delta,
                    total: 0,
                    attached: deps.clone(),
                    deps: Vec::new(),
                    chain: Vec::new(),
                    applied: false,
                };
                let v = Version {
                    value: Value::new(),
                    stamp,
                    state: State::Pending { deps: deps.clone() },
                    collected_below: false,
                    coord: None,
                    arb: None,
                    counter: Some(Box::new(counter)),
                };
                env.store().insert(&key, v);
                self.note_key(&key);
                self.node.on_replicate(env, key, stamp, &deps, written_us);
            }
            Msg::Path(p) => {
                self.node.on_path(env, from, p);
            }
            other => {
                if let Some(id) = other.txn_id() {
                    self.dirty_txns.insert(id);
                }
                self.on_txn_peer(env, from, other)
            }
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
                self.scan_all_txns = true;
                self.advance_txns(env);
                env.set_timer(self.cfg.txn_retry_ms * 1_000, TXN_TIMER);
            }
            _ => {}
        }
    }

    /// A checkpoint copies each key from its current version
    /// ([`snapshot_cut`]), marked `collected_below`.
    fn snapshot_floor(&self) -> Option<SnapshotFloor<Version>> {
        Some(SnapshotFloor::marked(snapshot_cut, |v| v.collected_below = true))
    }
}

impl EigerServer {
    /// A replicated write stored pending (§5.2), applied once every one-hop
    /// dependency in `deps` passed its `dep_check`; false if the replication
    /// path refused it (a duplicate, or not from an equivalent).
    #[allow(clippy::too_many_arguments)]
    fn store_replicated(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: NodeId,
        key: Key,
        value: Value,
        stamp: Stamp,
        deps: Vec<Dep>,
        written_us: u64,
    ) -> bool {
        if !self.node.accepts_replicate(from, &key, stamp, env.store()) {
            return false;
        }
        let v = Version::new(value, stamp, State::Pending { deps: deps.clone() });
        env.store().insert(&key, v);
        self.note_key(&key);
        self.node.on_replicate(env, key, stamp, &deps, written_us);
        true
    }
}

/// A stamped write and what goes with it.
pub(super) type Stamped<T> = (Key, Value, Stamp, T);

/// Writes, in stamp order, cut into runs of consecutive writes of one
/// row: a run of several columns is shipped as one message, a run of one
/// (a plain key is its own row) as a message of its own, and the runs in
/// order, so that an origin's writes still reach each equivalent in stamp
/// order (the replication path's per-origin low-water marks need it).
pub(super) fn row_runs<T>(writes: Vec<Stamped<T>>) -> Vec<Vec<Stamped<T>>> {
    let mut runs: Vec<Vec<Stamped<T>>> = Vec::with_capacity(writes.len());
    for w in writes {
        match runs.last_mut() {
            Some(run) if is_location_key(&w.0) && row_of(&run[0].0) == row_of(&w.0) => run.push(w),
            _ => runs.push(vec![w]),
        }
    }
    runs
}

/// What a read of `v` returns, valid through `lvt`.
fn read_of(v: &Version, lvt: u64) -> Read {
    let evt = v.evt().expect("a readable version");
    assert!(evt <= lvt, "a version's EVT is never past the read's time");
    Read {
        value: Some(causeway_core::copy_if_short(&v.value)),
        stamp: v.stamp,
        evt,
        lvt,
        pending: false,
        deps: v.counter.as_ref().map(|c| Thin::from_vec(c.deps.clone())).unwrap_or_default(),
        never_depend: false,
        cells: Thin::new(),
    }
}

fn empty_read(lvt: u64, pending: bool) -> Read {
    Read {
        value: None,
        stamp: Stamp::NONE,
        evt: 0,
        lvt,
        pending,
        deps: Thin::new(),
        never_depend: false,
        cells: Thin::new(),
    }
}

/// Drop what the reader need not depend on (Lloyd §6.1's never-depend):
/// settled writes, committed in every DC, whose checks always pass. Without
/// this a session that reads much and writes rarely carries a dependency on
/// nearly every key it read into its next write, and every remote DC
/// checks each one (TAO-like workloads: thousands per write).
fn forget_settled(read: &mut Read, settle: &crate::explicit_deps::replication::Settle) {
    if read.value.is_none() {
        return;
    }
    if read.deps.is_empty() {
        read.never_depend = settle.is_settled(read.stamp);
    } else {
        read.deps.retain(|&s| !settle.is_settled(s));
        read.never_depend = read.deps.is_empty();
    }
}

/// The current version of a location (first round, §5.3) at logical time
/// `lvt`, or an LVT-only answer if a prepared transaction's write is
/// there (§5.4.4; its place in last-writer-wins order is its commit time,
/// not known yet, so it is never skipped), or a decided one not yet
/// visible (deviation 7).
pub(super) fn current_read(versions: &[Version], lvt: u64) -> Read {
    let pending = |p: &TxnPart| matches!(p.phase, Phase::Prepared { .. } | Phase::Committing { .. });
    if versions.iter().any(|v| v.part().is_some_and(pending)) {
        // Deviation 5 (collection at once of what an unread key's overwrite
        // superseded): the answer still bounds EffT from below by the
        // oldest time this server can answer for, the EVT of the version
        // collection kept, flagged. Else a key overwritten (and collected)
        // just before a transaction's first round, with a transaction's
        // write pending there, was asked in round two for a time before
        // that version, and the read-only transaction restarted.
        let kept_from = versions.iter().filter(|v| v.collected_below).filter_map(Version::evt).max();
        return Read { evt: kept_from.unwrap_or(0), ..empty_read(lvt, true) };
    }
    match versions.iter().filter(|v| v.readable()).max_by_key(|v| v.arb()) {
        Some(v) => read_of(v, lvt),
        None => empty_read(lvt, false),
    }
}

/// The version of a key visible at logical time `at`: among the committed
/// versions applied by then (EVT ≤ `at`), the newest by stamp (last writer
/// wins, so an older write applied later is never visible; a counter's
/// newest applied add carries its total). `Err(())` if versions from
/// before `at` may have been collected.
pub(super) fn visible_at(versions: &[Version], at: u64) -> Result<Read, ()> {
    // Collection keeps, flagged, the newest version applied long enough
    // ago and drops what it superseded: before its EVT nothing is known.
    let kept_from = versions.iter().filter(|v| v.collected_below).filter_map(Version::evt).max();
    if kept_from.is_some_and(|evt| at < evt) {
        return Err(());
    }
    let visible = versions.iter().filter(|v| v.evt().is_some_and(|e| e <= at)).max_by_key(|v| v.arb());
    Ok(match visible {
        Some(v) => read_of(v, at),
        None => empty_read(at, false),
    })
}

/// A slice's answer from the columns `keys` it covers (§3's slice
/// predicate over one row, one server): each column's current version
/// (`at: None`) or the one visible at `at`, in column order, until
/// `count` columns with a value are in (deleted columns are returned too,
/// as tombstones the client strips, so it depends on them). One location
/// set: its EVT is the newest EVT of a column it covers, so that at every
/// time from there through `lvt` the same slice would be returned.
pub(super) fn slice_read(
    store: &causeway_core::MvStore<Version>,
    slice: &SliceSpec,
    keys: &[(Bytes, Key)],
    lvt: u64,
    at: Option<u64>,
) -> Result<Read, ()> {
    let mut read = empty_read(lvt, false);
    let mut live = 0u32;
    for (column, key) in keys {
        if slice.count > 0 && live >= slice.count {
            break;
        }
        let versions = store.versions(key);
        let r = match at {
            None => current_read(versions, lvt),
            Some(at) => visible_at(versions, at)?,
        };
        if r.pending {
            return Ok(empty_read(lvt, true));
        }
        let Some(value) = r.value else { continue };
        read.evt = read.evt.max(r.evt);
        live += u32::from(!causeway_core::is_tombstone(&value));
        read.cells.push(Cell { column: column.clone(), value, stamp: r.stamp, deps: r.deps.into_vec() });
    }
    Ok(read)
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
        if let Err(why) = self.check_put(&key, &deps) {
            return env.reply(from, Msg::PutReply { result: Err(why) });
        }
        env.observe(Observation::Sample { what: "deps_per_write", value: deps.len() as u64 });
        self.node.witness(floor);
        let (stamp, now) = self.store_put(env, &key, &value, &deps);
        env.reply(from, Msg::PutReply { result: Ok(stamp) });
        self.ship_put(env, key, value, stamp, &deps, now);
    }

    /// A non-atomic batch's writes to this server: each checked first (a
    /// bad one refuses the whole request, nothing applied), then each
    /// applied and shipped as a put of its own with the same dependencies,
    /// one reply for all.
    fn on_batch(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: ClientId,
        writes: Vec<(Key, Value)>,
        deps: Vec<Dep>,
        floor: u64,
    ) {
        // The client library checks the shape too; a peer that skips it
        // (a key twice, too many keys) is refused here all the same.
        let checked =
            check_batch_shape(&writes).and_then(|()| writes.iter().try_for_each(|(key, _)| self.check_put(key, &deps)));
        if let Err(why) = checked {
            return env.reply(from, Msg::BatchReply { result: Err(why) });
        }
        self.node.witness(floor);
        let mut stored = Vec::with_capacity(writes.len());
        for (key, value) in &writes {
            env.observe(Observation::Sample { what: "deps_per_write", value: deps.len() as u64 });
            stored.push(self.store_put(env, key, value, &deps));
        }
        env.reply(from, Msg::BatchReply { result: Ok(stored.iter().map(|&(stamp, _)| stamp).collect()) });
        let stamped = writes.into_iter().zip(stored).map(|((k, v), (stamp, now))| (k, v, stamp, now));
        for mut run in row_runs(stamped.collect()) {
            if run.len() == 1 {
                let (key, value, stamp, now) = run.pop().expect("one write");
                self.ship_put(env, key, value, stamp, &deps, now);
                continue;
            }
            let written_us = run[0].3;
            let writes: Vec<(Key, Value, Stamp)> = run.into_iter().map(|(k, v, s, _)| (k, v, s)).collect();
            for &to in &self.node.equivalents {
                env.send(to, Msg::ReplicateRow { writes: writes.clone(), deps: deps.clone(), written_us });
            }
        }
    }

    /// Refuse a client's write of `key` this server does not own, that is
    /// not a regular column, or whose dependencies are malformed.
    fn check_put(&self, key: &Key, deps: &[Dep]) -> Result<(), String> {
        self.node.check_request(key, deps).and_then(|()| self.cfg.expect_kind(key, ColumnKind::Regular))
    }

    /// Stamp and store one accepted local write (§5.2); its EVT is its
    /// stamp's time. Returns the stamp and the time it was written, for
    /// [`Self::ship_put`] once the client is answered.
    fn store_put(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        key: &Key,
        value: &Value,
        deps: &[Dep],
    ) -> (Stamp, u64) {
        let stamp = self.node.next_stamp(deps.iter().map(|d| d.stamp));
        let now = env.now_us();
        let state = State::Committed { evt: stamp.lamport(), at_us: now };
        // The store's copy shares no reference count with the replicas'
        // ([`causeway_core::copy_if_short`]).
        let landed =
            env.store()
                .insert_collecting(key, Version::new(causeway_core::copy_if_short(value), stamp, state), |_| false);
        self.note_key(key);
        self.node.settle.own_write(stamp);
        self.publish_at(env, landed.index, landed.left, stamp, now);
        (stamp, now)
    }

    /// Ship a stored local write to its equivalent nodes with its one-hop
    /// dependencies (§5.2).
    fn ship_put(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        key: Key,
        value: Value,
        stamp: Stamp,
        deps: &[Dep],
        written_us: u64,
    ) {
        for &to in &self.node.equivalents {
            let r = Replica { key: key.clone(), value: value.clone(), stamp, deps: deps.to_vec(), written_us };
            let msg = Msg::Replicate(Box::new(r));
            env.send(to, msg);
        }
    }

    /// Apply every replicated write whose checks passed; the shared path
    /// gives each a fresh logical time, its EVT.
    pub(super) fn commit_ready(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        for r in self.node.commit_ready(env) {
            self.apply_add(env, &r.key, r.stamp);
            self.publish(env, &r.key, r.stamp, r.written_us);
        }
    }

    /// A version was applied: report it if reads now return it, and
    /// schedule collection of what it superseded.
    pub(super) fn publish(&mut self, env: &mut impl ServerEnv<Msg, Version>, key: &Key, stamp: Stamp, written_us: u64) {
        if let Some(index) = env.store().index_of(key) {
            let left = env.store().versions_at(index).len();
            self.publish_at(env, index, left, stamp, written_us);
        }
    }

    /// [`Self::publish`] for the key at `index`, which now holds `left`
    /// versions. The collection queue names the key by its index: a clone
    /// of the key would keep its buffer (and the count a first clone
    /// allocates) for `trans_time`, on every overwrite.
    ///
    /// What it superseded is kept `trans_time` only if a first round read
    /// the key within the last `trans_time` (its store mark, set by
    /// [`first_round_versions`]); otherwise it goes at once.
    fn publish_at(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        index: KeyIndex,
        left: usize,
        stamp: Stamp,
        written_us: u64,
    ) {
        self.node.report_if_newest_at(env, index, stamp, written_us);
        if left > 1 {
            let (now, hold_us) = (env.now_us(), self.cfg.hold_us());
            let read_us = env.store().mark_at(index).map_or(0, |m| *m);
            if read_us != 0 && now < read_us.saturating_add(hold_us) {
                self.version_gc.push_back((now + hold_us, index));
            } else {
                env.store().collect_planned_at(
                    index,
                    |vs| plan_collection(vs, settled),
                    keep_past_floor,
                    |v| v.collected_below = true,
                );
            }
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
            let (_, index) = self.version_gc.pop_front().expect("front exists");
            let old_enough =
                |v: &Version| settled(v) && matches!(v.state, State::Committed { at_us, .. } if at_us + hold_us <= now);
            // One lookup per key. The mark is not journaled: a node
            // restarted from its log gets back the versions collected here
            // (collection is not logged), so it needs no mark; a snapshot
            // copies the mark with the state.
            env.store().collect_planned_at(
                index,
                |vs| plan_collection(vs, old_enough),
                keep_past_floor,
                |v| v.collected_below = true,
            );
        }
    }
}

/// A first round's read of `key` (§5.3): its versions, noting the time
/// (µs) in the key's store mark. A second round of the same transaction
/// asks for a time at or after the EVT of the version read here, so only
/// a key read within the last `trans_time` needs what an overwrite
/// supersedes ([`EigerServer::publish_at`]): §5.3 keeps only values
/// newer than a first-round answer, and this is that rule per key
/// (deviation 5 in the module doc). Keeping every superseded version
/// `trans_time` held a write-heavy load's whole last five seconds of
/// writes when nobody read its keys. A second round that finds its
/// version gone anyway (a key first stored after the first round, or a
/// node restarted since) restarts, as after collection (`collected_below`).
fn first_round_versions<'s>(store: &'s mut causeway_core::MvStore<Version>, key: &[u8], now_us: u64) -> &'s [Version] {
    match store.versions_and_mark(key) {
        Some((versions, read_us)) => {
            // 0 is "never read".
            *read_us = now_us.max(1);
            versions
        }
        None => &[],
    }
}

/// Where collection may cut a key's versions (oldest first): at the
/// newest of those `floor_ok` accepts, by last-writer-wins order, if it
/// superseded a committed one.
fn plan_collection(versions: &[Version], floor_ok: impl Fn(&Version) -> bool) -> Option<usize> {
    let (at, floor) = versions.iter().enumerate().filter(|(_, v)| floor_ok(v)).max_by_key(|(_, v)| v.arb())?;
    versions.iter().any(|v| v.arb() < floor.arb() && v.committed()).then_some(at)
}

/// What collection keeps below the floor: what is still needed, and what
/// wins over the floor by last-writer-wins order.
fn keep_past_floor(v: &Version, floor: &Version) -> bool {
    still_needed(v) || v.arb() > floor.arb()
}

/// Whether a version must outlive the versions newer than it: a pending
/// one until it commits (recovery needs it), a coordinator's record of a
/// transaction until every participant acknowledged its commit, and a
/// witness's record until released (deviation 7).
/// So is a counter's add not yet folded into the running total (between
/// its commit and [`EigerServer::apply_add`], in one turn).
fn still_needed(v: &Version) -> bool {
    matches!(
        v.state,
        State::Pending { .. }
            | State::Txn(_)
            | State::Aborted { remote: true, .. }
            | State::Witness { released: false, .. }
    ) || v.coord.as_ref().is_some_and(|t| !t.acked)
        || v.counter.as_ref().is_some_and(|c| !c.applied)
}

/// Whether a version may be a collection floor: committed, and a
/// counter's add folded into the running total (an unfolded one's `arb`
/// is still its stamp, and it carries no total).
fn settled(v: &Version) -> bool {
    matches!(v.state, State::Committed { .. }) && v.counter.as_ref().is_none_or(|c| c.applied)
}

/// Where a checkpoint may cut a key's versions (oldest first): at its
/// current version — committed, the newest readable one by last-writer-wins
/// order (a counter's, applied) — when everything before it in the chain
/// is what collection would drop at that floor; else nowhere (0).
///
/// Deviation from §5.3, which keeps superseded versions `trans_time` for
/// the read-only transactions in flight: a snapshot is only read back by a
/// restarted node, whose transactions in flight ended with it, so its copy
/// keeps none. A read at a time before the current version's EVT — a second
/// round from a transaction that began before the restart — then restarts,
/// as after collection, because the copy is marked `collected_below`.
/// Without the cut a checkpoint copied every version held for reads, the
/// whole of a write-heavy load's last `trans_time`.
pub(super) fn snapshot_cut(versions: &[Version]) -> usize {
    let current = versions.iter().enumerate().filter(|(_, v)| v.readable()).max_by_key(|(_, v)| v.arb());
    let Some((at, current)) = current else { return 0 };
    let cut = settled(current) && versions[..at].iter().all(|v| !still_needed(v) && v.arb() < current.arb());
    if cut { at } else { 0 }
}

/// A counter's newest applied add (Lloyd §5.2, counter columns): its
/// running total, stored dependencies and per-DC chain. Applied adds are
/// ordered by application here (their `arb`, see [`Version::counter`]).
fn counter_now(versions: &[Version]) -> Option<&Counter> {
    versions
        .iter()
        .filter(|v| v.readable() && v.counter.as_ref().is_some_and(|c| c.applied))
        .max_by_key(|v| v.arb())
        .and_then(|v| v.counter.as_deref())
}

/// The stored dependencies after applying add `add` of `key`, written with
/// `attached` (§5.2): one per DC — the add replaces its own DC's entry
/// (the per-DC chain makes the newest add of a DC cover the earlier ones),
/// and an entry the add itself depends on is dropped (the add is causally
/// after it, so a dependency on the add covers it).
pub(super) fn reduce_counter_deps(stored: &[Stamp], attached: &[Dep], key: &Key, add: Stamp) -> Vec<Stamp> {
    let covered = |s: &Stamp| attached.iter().any(|d| d.key == *key && d.stamp == *s);
    let mut out: Vec<Stamp> = stored.iter().filter(|s| s.origin() != add.origin() && !covered(s)).copied().collect();
    out.push(add);
    out.sort();
    out
}

/// The newest add per DC after `add`.
fn extend_chain(chain: &[Stamp], add: Stamp) -> Vec<Stamp> {
    let mut out: Vec<Stamp> = chain.iter().filter(|s| s.origin() != add.origin()).copied().collect();
    out.push(add);
    out.sort();
    out
}

impl EigerServer {
    /// Refuse a slice over no family of this store.
    fn check_slice(&self, s: &SliceSpec) -> Result<(), String> {
        family_prefix(&s.row, &s.family).map_err(|e| e.to_string())?;
        match self.cfg.family(&s.family) {
            Some(_) => Ok(()),
            None => Err(format!("unknown column family {:?}", String::from_utf8_lossy(&s.family))),
        }
    }

    /// A counter add accepted in its local DC (§5.2): stamped above its
    /// dependencies and the previous add accepted here (the per-DC chain,
    /// shipped as an extra dependency), applied at once on the running
    /// total, acknowledged, then shipped. Totals wrap on overflow: i64
    /// addition modulo 2^64 commutes, so every DC still ends at one sum.
    fn on_add(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: ClientId,
        key: Key,
        delta: i64,
        deps: Vec<Dep>,
        floor: u64,
    ) {
        if let Err(why) =
            self.node.check_request(&key, &deps).and_then(|()| self.cfg.expect_kind(&key, ColumnKind::Counter))
        {
            return env.reply(from, Msg::PutReply { result: Err(why) });
        }
        self.node.witness(floor);
        let me = self.node.me;
        let (total, stored, chain) = match counter_now(env.store().versions(&key)) {
            Some(c) => (c.total, c.deps.clone(), c.chain.clone()),
            None => (0, Vec::new(), Vec::new()),
        };
        let mut attached = deps;
        if let Some(&prev) = chain.iter().find(|s| s.origin() == me)
            && !attached.iter().any(|d| d.key == key && d.stamp == prev)
        {
            attached.push(Dep { key: key.clone(), stamp: prev });
        }
        env.observe(Observation::Sample { what: "deps_per_write", value: attached.len() as u64 });
        let stamp = self.node.next_stamp(attached.iter().map(|d| d.stamp));
        let now = env.now_us();
        let total = total.wrapping_add(delta);
        let counter = Counter {
            delta,
            total,
            attached: Vec::new(),
            deps: reduce_counter_deps(&stored, &attached, &key, stamp),
            chain: extend_chain(&chain, stamp),
            applied: true,
        };
        let v = Version {
            value: Value::from(total.to_string()),
            stamp,
            state: State::Committed { evt: stamp.lamport(), at_us: now },
            collected_below: false,
            coord: None,
            arb: None,
            counter: Some(Box::new(counter)),
        };
        env.store().insert(&key, v);
        self.note_key(&key);
        self.node.settle.own_write(stamp);
        self.publish(env, &key, stamp, now);
        env.reply(from, Msg::PutReply { result: Ok(stamp) });
        for &to in &self.node.equivalents {
            let msg = Msg::ReplicateAdd { key: key.clone(), delta, stamp, deps: attached.clone(), written_us: now };
            env.send(to, msg);
        }
    }

    /// A replicated add just committed (its checks passed): fold it into
    /// the running total at its EVT, in this node's application order,
    /// and reduce the stored dependencies (§5.2). In the same turn as the
    /// commit, so the journal never holds a committed add unfolded.
    fn apply_add(&mut self, env: &mut impl ServerEnv<Msg, Version>, key: &Key, stamp: Stamp) {
        let versions = env.store().versions(key);
        let Some(v) = versions.iter().find(|v| v.stamp == stamp) else { return };
        let Some(c) = v.counter.as_deref().filter(|c| !c.applied) else { return };
        let evt = v.evt().expect("just committed");
        let (total, stored, chain) = match counter_now(versions) {
            Some(now) => (now.total, now.deps.clone(), now.chain.clone()),
            None => (0, Vec::new(), Vec::new()),
        };
        let order = Stamp::new(evt, self.node.me);
        assert!(
            versions.iter().filter(|o| o.counter.as_ref().is_some_and(|c| c.applied)).all(|o| o.arb() < order),
            "adds are applied in this node's logical-time order"
        );
        let total = total.wrapping_add(c.delta);
        let counter = Counter {
            delta: c.delta,
            total,
            attached: Vec::new(),
            deps: reduce_counter_deps(&stored, &c.attached, key, stamp),
            chain: extend_chain(&chain, stamp),
            applied: true,
        };
        let v = Version {
            value: Value::from(total.to_string()),
            arb: Some(order),
            counter: Some(Box::new(counter)),
            ..v.clone()
        };
        env.store().replace(key, v);
    }
}
