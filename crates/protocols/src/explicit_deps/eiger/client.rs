use super::config::*;
use super::msg::*;
use super::txn_state::{check_batch_shape, check_wot_shape};
use crate::explicit_deps::replication::{Dep, Stamp};
use crate::kit::client::{by_server, client_server_for, client_servers_for, fail_unsupported};
use causeway_core::column::{location_key, row_of};
use causeway_core::{Client, ClientCtx, ClientEnv, Key, NodeId, Op, OpError, OpResult, Value};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// A session (the paper's actor): the one-hop dependencies on operations
/// collected since its last write (Lloyd §5.2), and its logical time.
pub struct EigerClient {
    ctx: ClientCtx,
    cfg: Config,
    trans_time_us: u64,
    one_round: bool,
    /// (key, origin) → the newest stamp read of it since the last write,
    /// or that write. Kept by the client library, never on servers. A
    /// hash map: between two writes a session can read thousands of keys
    /// (TAO-like workloads), and each read looks its keys up.
    pub(super) deps: FxHashMap<(Key, NodeId), Stamp>,
    /// The session's logical time: the newest EffT it read at and stamp it
    /// wrote (deviation 2). Reads and writes carry it.
    pub(super) floor: u64,
    /// Numbers operation attempts, so a late reply to an abandoned attempt
    /// is recognised and dropped.
    attempt: u32,
    /// Numbers the session's write-only transactions (with its nonce, a
    /// transaction's cluster-wide id).
    wot_seq: u64,
    op: Option<InFlight>,
    /// Some read of the operation in progress (any attempt of it) was
    /// answered only after a commit check (Lloyd §5.4.4): the operation is
    /// noted "indirected" to the runtime when it completes, for the latency
    /// row of that name (Lloyd's dissertation, Table 7.4). Never affects
    /// the result.
    indirected: bool,
}

impl EigerClient {
    pub(super) fn new(cfg: &Config, ctx: ClientCtx) -> EigerClient {
        EigerClient {
            ctx,
            cfg: cfg.clone(),
            trans_time_us: cfg.trans_time_us(),
            one_round: cfg.mutant_one_round_rot,
            deps: FxHashMap::default(),
            floor: 0,
            attempt: 0,
            wot_seq: 0,
            op: None,
            indirected: false,
        }
    }
}

pub(super) enum InFlight {
    /// A put or a counter add, waiting for its stamp; `done` is what it
    /// completes as (a one-key write-only transaction is a put).
    Put {
        key: Key,
        done: OpResult,
    },
    /// A non-atomic batch waiting for one `BatchReply` from each server
    /// in `awaited` (with the keys it was sent), and the stamps in so far.
    Batch {
        awaited: BTreeMap<NodeId, Vec<Key>>,
        stamps: Vec<(Key, Stamp)>,
    },
    /// A write-only transaction waiting for its coordinator's answer.
    Wot {
        id: TxnId,
        coord_key: Key,
    },
    Trans(Trans),
    /// A read transaction waiting out its back-off before a restart; the
    /// timer's token is the attempt number it was set in.
    Backoff {
        targets: Vec<ReadTarget>,
        shape: Shape,
        restarts: u32,
    },
}

/// What one read of a transaction names.
#[derive(Clone)]
pub(super) enum ReadTarget {
    Key(Key),
    Slice(SliceSpec),
}

/// How a read transaction completes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// A plain `get`: a one-key transaction (all reads in Eiger are
    /// transactional, §5.1), completed as `OpResult::Get`.
    Get,
    Rot,
    /// One slice (§3's `multiget_slice` with a slice predicate).
    Slice,
}

/// A read transaction that restarted this many times in a row ends with
/// `Aborted` (every attempt outlived `trans_time` or asked for collected
/// versions): a typed failure rather than an operation that never ends.
pub const MAX_READ_TRANS_RESTARTS: u32 = 10;

/// The first restart's back-off; it doubles per restart up to `trans_time`.
pub const READ_TRANS_BACKOFF_US: u64 = 1_000;

/// A read-only transaction in progress (Fig 5.5).
pub(super) struct Trans {
    targets: Vec<ReadTarget>,
    shape: Shape,
    started_us: u64,
    /// Replies still awaited in the current round.
    awaited: usize,
    second_round: bool,
    results: Vec<Option<Read>>,
    /// A second-round version had been collected: start over.
    restart: bool,
    restarts: u32,
    /// The effective time, once the first round is in.
    eff_t: u64,
}

/// EffT of Fig 5.5 from first-round results: the smallest LVT at or above
/// every EVT (and the session's time, deviation 2). Always exists: the
/// result with the largest EVT has an LVT at least that large, and every
/// LVT is at least the session's time, which servers witnessed.
pub fn effective_time(floor: u64, reads: impl IntoIterator<Item = (u64, u64)> + Clone) -> u64 {
    let max_evt = reads.clone().into_iter().map(|(evt, _)| evt).fold(floor, u64::max);
    let eff_t = reads.into_iter().map(|(_, lvt)| lvt).filter(|&lvt| lvt >= max_evt).min();
    eff_t.expect("some first-round LVT reaches the largest EVT")
}

impl EigerClient {
    fn next_attempt(&mut self) -> u32 {
        self.attempt = self.attempt.wrapping_add(1);
        self.attempt
    }

    /// Round one: every location (or slice) in parallel at its current
    /// version. A location of no declared column is refused first.
    fn start_trans(&mut self, env: &mut impl ClientEnv<Msg>, targets: Vec<ReadTarget>, shape: Shape, restarts: u32) {
        if targets.is_empty() {
            return env.complete(OpResult::Rot(Vec::new()));
        }
        for t in &targets {
            let checked = match t {
                ReadTarget::Key(k) => self.cfg.column_kind(k).map(|_| ()),
                ReadTarget::Slice(s) => check_slice_spec(&self.cfg, s),
            };
            if let Err(why) = checked {
                return env.complete(OpResult::Failed(OpError::BadRequest(why)));
            }
        }
        let attempt = self.next_attempt();
        let floor = self.floor;
        if let [ReadTarget::Key(key)] = &targets[..] {
            // A get: one key, one server, nothing to group.
            let Some(to) = client_server_for(&self.ctx, env, key) else { return };
            env.send(to, Msg::Read { attempt, keys: vec![(0, key.clone())], floor });
        } else if !self.send_first_round(env, &targets, attempt) {
            return; // no server for some key: the operation failed
        }
        let n = targets.len();
        let started_us = env.now_us();
        self.op = Some(InFlight::Trans(Trans {
            targets,
            shape,
            started_us,
            awaited: n,
            second_round: false,
            results: vec![None; n],
            restart: false,
            restarts,
            eff_t: 0,
        }));
    }

    /// Round one of a transaction of several reads: one request per server
    /// for its keys, a slice on its own. False, nothing sent, when some
    /// key has no server (the operation was failed).
    fn send_first_round(&mut self, env: &mut impl ClientEnv<Msg>, targets: &[ReadTarget], attempt: u32) -> bool {
        let mut sends = Vec::with_capacity(targets.len());
        for t in targets {
            let Some(to) = client_server_for(&self.ctx, env, t.placement_key()) else { return false };
            sends.push(to);
        }
        // One request per server for its keys (a transaction spans few
        // servers, so a short list beats a map); a slice is its own.
        let floor = self.floor;
        let mut by_server: Vec<(NodeId, Vec<(u32, Key)>)> = Vec::new();
        for (i, (t, to)) in targets.iter().zip(sends).enumerate() {
            match t {
                ReadTarget::Key(key) => match by_server.iter_mut().find(|(n, _)| *n == to) {
                    Some((_, keys)) => keys.push((i as u32, key.clone())),
                    None => by_server.push((to, vec![(i as u32, key.clone())])),
                },
                ReadTarget::Slice(slice) => {
                    env.send(to, Msg::SliceRead { attempt, idx: i as u32, slice: Box::new(slice.clone()), floor })
                }
            }
        }
        for (to, keys) in by_server {
            env.send(to, Msg::Read { attempt, keys, floor });
        }
        true
    }

    /// A round's replies are all in: run round two, finish, or restart.
    fn round_done(&mut self, env: &mut impl ClientEnv<Msg>, mut t: Trans) {
        if t.restart || env.now_us().saturating_sub(t.started_us) > self.trans_time_us {
            // §5.3: a transaction that outlived its timeout restarts; it
            // backs off, doubling, and gives up after a bound (deviation 3).
            let restarts = t.restarts + 1;
            if restarts > MAX_READ_TRANS_RESTARTS {
                let why = format!(
                    "read-only transaction restarted {MAX_READ_TRANS_RESTARTS} times: every attempt outlived \
                     trans_time_ms ({} ms) or asked for a collected version",
                    self.trans_time_us / 1_000
                );
                return self.complete_trans(env, OpResult::Failed(OpError::Aborted(why)));
            }
            let attempt = self.next_attempt(); // late replies of this attempt are dropped
            let backoff_us = READ_TRANS_BACKOFF_US.saturating_mul(1 << (restarts - 1).min(20)).min(self.trans_time_us);
            env.set_timer(backoff_us, u64::from(attempt));
            self.op = Some(InFlight::Backoff { targets: t.targets, shape: t.shape, restarts });
            return;
        }
        if !t.second_round {
            let first = |r: &Option<Read>| {
                let r = r.as_ref().expect("round one is in");
                (r.evt, r.lvt)
            };
            t.eff_t = effective_time(self.floor, t.results.iter().map(first));
            t.second_round = true;
            if !self.one_round {
                // Round two (Fig 5.5): every location whose valid interval
                // ends before EffT is read again at EffT, and every one
                // answered LVT-only (a transaction's write pending there,
                // §5.4.4), which has no value yet.
                // A row re-read in several columns is one request (as the
                // paper's `multiget_slice_by_time` of a row); a plain key,
                // its own row, one `ReadAt`, in the order of the keys.
                let (attempt, at) = (self.attempt, t.eff_t);
                let mut rows: Vec<(NodeId, Vec<(u32, Key)>)> = Vec::new();
                for (i, target) in t.targets.iter().enumerate() {
                    let r = t.results[i].as_ref().expect("round one is in");
                    if r.lvt < t.eff_t || r.pending {
                        let Some(to) = client_server_for(&self.ctx, env, target.placement_key()) else { return };
                        let idx = i as u32;
                        match target {
                            ReadTarget::Key(key) => {
                                let same_row =
                                    |(_, ks): &&mut (NodeId, Vec<(u32, Key)>)| row_of(&ks[0].1) == row_of(key);
                                match rows.iter_mut().find(same_row) {
                                    Some((_, ks)) => ks.push((idx, key.clone())),
                                    None => rows.push((to, vec![(idx, key.clone())])),
                                }
                            }
                            ReadTarget::Slice(slice) => {
                                env.send(to, Msg::SliceReadAt { attempt, idx, slice: Box::new(slice.clone()), at })
                            }
                        }
                        t.awaited += 1;
                    }
                }
                for (to, mut keys) in rows {
                    let msg = match keys.len() {
                        1 => {
                            let (idx, key) = keys.pop().expect("one key");
                            Msg::ReadAt { attempt, idx, key, at }
                        }
                        _ => Msg::ReadsAt { attempt, keys, at },
                    };
                    env.send(to, msg);
                }
                if t.awaited > 0 {
                    self.op = Some(InFlight::Trans(t));
                    return;
                }
            }
        }
        // Every value returned is valid at EffT (the theorem of §5.3).
        if !self.one_round {
            assert!(t.results.iter().flatten().all(|r| !r.pending), "a pending location is read again");
            for r in t.results.iter().flatten() {
                assert!(r.evt <= t.eff_t && t.eff_t <= r.lvt, "a returned value is valid at EffT");
            }
        }
        self.floor = self.floor.max(t.eff_t);
        // A get's one value needs no vector.
        let mut values = Vec::with_capacity(if t.shape == Shape::Rot { t.results.len() } else { 0 });
        let mut got = None;
        let mut cells = Vec::new();
        for (target, r) in t.targets.iter().zip(t.results) {
            let r = r.expect("every location was read");
            match target {
                // A value read, deleted (a tombstone, stripped for the user
                // by `OpResult::visible`) or not, is a dependency (§5.2);
                // a counter's are its stored ones.
                ReadTarget::Key(k) => {
                    if r.value.is_some() && !r.never_depend {
                        self.depend(k, r.stamp, &r.deps);
                    }
                    if t.shape == Shape::Get {
                        got = r.value;
                    } else {
                        values.push(r.value);
                    }
                }
                ReadTarget::Slice(s) => {
                    for c in r.cells {
                        let key = location_key(&s.row, &s.family, &c.column).expect("a slice's own column");
                        self.depend(&key, c.stamp, &c.deps);
                        cells.push((c.column, c.value));
                    }
                }
            }
        }
        let result = match t.shape {
            Shape::Get => OpResult::Get(got),
            Shape::Rot => OpResult::Rot(values),
            Shape::Slice => OpResult::Slice(cells),
        };
        self.complete_trans(env, result);
    }

    /// Finish a read transaction, first telling the runtime whether a read
    /// of it was indirected to a coordinator (a measurement hint only).
    fn complete_trans(&mut self, env: &mut impl ClientEnv<Msg>, result: OpResult) {
        if self.indirected {
            env.note("indirected");
        }
        env.complete(result);
    }

    /// Record a dependency on what was read at `key` (§5.2): the write
    /// `stamp`, or for a counter every add it stores (one per DC).
    fn depend(&mut self, key: &Key, stamp: Stamp, counter_deps: &[Stamp]) {
        let one = [stamp];
        let stamps = if counter_deps.is_empty() { &one[..] } else { counter_deps };
        for &s in stamps {
            let e = self.deps.entry((key.clone(), s.origin())).or_default();
            *e = (*e).max(s);
        }
    }
}

impl ReadTarget {
    /// The key whose server answers the read (a slice's row's).
    fn placement_key(&self) -> &Key {
        match self {
            ReadTarget::Key(k) => k,
            ReadTarget::Slice(s) => &s.row,
        }
    }
}

/// Refuse a slice over no declared family, naming why.
fn check_slice_spec(cfg: &Config, s: &SliceSpec) -> Result<(), String> {
    causeway_core::column::family_prefix(&s.row, &s.family).map_err(|e| e.to_string())?;
    match cfg.family(&s.family) {
        Some(_) => Ok(()),
        None => Err(format!("unknown column family {:?}", String::from_utf8_lossy(&s.family))),
    }
}

/// SplitMix64: the client library's coordinator pick, a function of the
/// session's nonce and the transaction's number (no global randomness).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl EigerClient {
    /// A write-only transaction (Lloyd §5.4): a coordinator key picked at
    /// random among its keys, one sub-request per participant, each with
    /// the session's one-hop dependencies. Bad input (a key twice, too many
    /// keys) is refused before anything is sent.
    fn start_wot(&mut self, env: &mut impl ClientEnv<Msg>, writes: Vec<(Key, Value)>) {
        if writes.is_empty() {
            return env.complete(OpResult::Wot);
        }
        let keys: Vec<Key> = writes.iter().map(|(k, _)| k.clone()).collect();
        self.wot_seq += 1;
        let id = TxnId { session: self.ctx.nonce, seq: self.wot_seq };
        let coord_key = keys[(mix(id.session ^ mix(id.seq)) % keys.len() as u64) as usize].clone();
        if let Err(why) = check_wot_shape(&keys, &coord_key)
            .and_then(|()| keys.iter().try_for_each(|k| self.cfg.expect_kind(k, ColumnKind::Regular)))
        {
            return env.complete(OpResult::Failed(OpError::BadRequest(why)));
        }
        if let [(key, _)] = &writes[..] {
            // One key: atomic visibility holds for any write of it, so it
            // is a put (one server, no 2PC-PCI, no pending window in which
            // reads of the key take a second round), as Eventual's one-key
            // transaction is. It is still one event of the session.
            let Some(to) = client_server_for(&self.ctx, env, key) else { return };
            let (key, value) = writes.into_iter().next().expect("one write");
            return self.send_put(env, to, key, value, OpResult::Wot);
        }
        let Some(servers) = client_servers_for(&self.ctx, env, keys.iter().map(|k| &k[..])) else { return };
        let by_server = by_server(writes, servers);
        let deps = self.one_hop_deps();
        let info = TxnInfo { id, coord_key: coord_key.clone(), keys: keys.into() };
        for (to, writes) in by_server {
            env.send(to, Msg::WotReq { info: Box::new(info.clone()), writes, deps: deps.clone(), floor: self.floor });
        }
        self.op = Some(InFlight::Wot { id, coord_key });
    }
}

impl EigerClient {
    /// A non-atomic batch (Cassandra's `batch_mutate`, Lloyd's "normal
    /// (2)"): one `BatchReq` per server, all sent at once with the
    /// session's one-hop dependencies, so no write of the batch depends on
    /// another. Once every server has answered, the context is every write
    /// of the batch (§5.2: after a write it collapses to that write; here
    /// the batch's writes are all the session's latest operation).
    fn start_batch(&mut self, env: &mut impl ClientEnv<Msg>, writes: Vec<(Key, Value)>) {
        if writes.is_empty() {
            return env.complete(OpResult::Put);
        }
        if let Err(why) = check_batch_shape(&writes)
            .and_then(|()| writes.iter().try_for_each(|(k, _)| self.cfg.expect_kind(k, ColumnKind::Regular)))
        {
            return env.complete(OpResult::Failed(OpError::BadRequest(why)));
        }
        let Some(servers) = client_servers_for(&self.ctx, env, writes.iter().map(|(k, _)| &k[..])) else { return };
        let by_server = by_server(writes, servers);
        let deps = self.one_hop_deps();
        let mut awaited = BTreeMap::new();
        for (to, writes) in by_server {
            awaited.insert(to, writes.iter().map(|(k, _)| k.clone()).collect());
            env.send(to, Msg::BatchReq { writes, deps: deps.clone(), floor: self.floor });
        }
        self.op = Some(InFlight::Batch { awaited, stamps: Vec::new() });
    }

    /// The session's context as the one-hop dependencies a write carries
    /// (§5.2).
    fn one_hop_deps(&self) -> Vec<Dep> {
        self.deps.iter().map(|((k, _), &stamp)| Dep { key: k.clone(), stamp }).collect()
    }

    /// A put to `to` with the session's dependencies, completing as `done`
    /// (a put, or a one-key write-only transaction).
    fn send_put(&mut self, env: &mut impl ClientEnv<Msg>, to: NodeId, key: Key, value: Value, done: OpResult) {
        let deps = self.one_hop_deps();
        self.op = Some(InFlight::Put { key: key.clone(), done });
        env.send(to, Msg::PutReq { key, value, deps, floor: self.floor });
    }
}

impl Client for EigerClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        self.indirected = false;
        match op {
            Op::Get { key } => self.start_trans(env, vec![ReadTarget::Key(key)], Shape::Get, 0),
            Op::Rot { keys } => self.start_trans(env, keys.into_iter().map(ReadTarget::Key).collect(), Shape::Rot, 0),
            Op::Slice { row, family, start, stop, count } => {
                let slice = SliceSpec { row, family, start, stop, count };
                self.start_trans(env, vec![ReadTarget::Slice(slice)], Shape::Slice, 0)
            }
            // A write carries the session's one-hop dependencies (§5.2).
            Op::Put { key, value } => {
                if let Err(why) = self.cfg.expect_kind(&key, ColumnKind::Regular) {
                    return env.complete(OpResult::Failed(OpError::BadRequest(why)));
                }
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                self.send_put(env, to, key, value, OpResult::Put);
            }
            // A counter add (§5.2) carries them too; the context then
            // collapses to the add, like after a put.
            Op::Add { key, delta } => {
                if let Err(why) = self.cfg.expect_kind(&key, ColumnKind::Counter) {
                    return env.complete(OpResult::Failed(OpError::BadRequest(why)));
                }
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                let deps = self.one_hop_deps();
                self.op = Some(InFlight::Put { key: key.clone(), done: OpResult::Put });
                env.send(to, Msg::AddReq { key, delta, deps, floor: self.floor });
            }
            Op::Wot { writes } => self.start_wot(env, writes),
            Op::Batch { writes } => self.start_batch(env, writes),
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, from: NodeId, msg: Msg) {
        match (self.op.take(), msg) {
            (Some(InFlight::Batch { mut awaited, mut stamps }), Msg::BatchReply { result }) => {
                let Some(written) = awaited.remove(&from) else {
                    self.op = Some(InFlight::Batch { awaited, stamps });
                    return; // not a server this batch is waiting for
                };
                match result {
                    Ok(got) if got.len() == written.len() => stamps.extend(written.into_iter().zip(got)),
                    Ok(got) => {
                        let why = format!("batch reply has {} stamps for {} writes", got.len(), written.len());
                        return env.complete(OpResult::Failed(OpError::BadRequest(why)));
                    }
                    // The other servers' writes may be applied: a batch is
                    // not atomic, and a failed write may have happened.
                    Err(why) => return env.complete(OpResult::Failed(OpError::BadRequest(why))),
                }
                if !awaited.is_empty() {
                    self.op = Some(InFlight::Batch { awaited, stamps });
                    return;
                }
                self.deps.clear();
                for (key, stamp) in stamps {
                    self.floor = self.floor.max(stamp.lamport());
                    self.deps.insert((key, stamp.origin()), stamp);
                }
                env.complete(OpResult::Put);
            }
            // After a write the context collapses to that write (§5.2).
            (Some(InFlight::Put { key, done }), Msg::PutReply { result }) => match result {
                Ok(stamp) => {
                    self.deps.clear();
                    self.deps.insert((key, stamp.origin()), stamp);
                    self.floor = self.floor.max(stamp.lamport());
                    env.complete(done);
                }
                Err(why) => env.complete(OpResult::Failed(OpError::BadRequest(why))),
            },
            // The transaction is one operation of the session (§5.4): the
            // context collapses to it, named by its coordinator key's write
            // (a remote DC commits that write only with the whole
            // transaction, and reads of the others indirect to it).
            (Some(InFlight::Wot { id, coord_key }), Msg::WotReply { id: got, result }) if got == id => match result {
                Ok((stamp, commit)) => {
                    self.deps.clear();
                    self.deps.insert((coord_key, stamp.origin()), stamp);
                    self.floor = self.floor.max(commit).max(stamp.lamport());
                    env.complete(OpResult::Wot);
                }
                Err((true, why)) => env.complete(OpResult::Failed(OpError::Aborted(why))),
                Err((false, why)) => env.complete(OpResult::Failed(OpError::BadRequest(why))),
            },
            (Some(InFlight::Trans(mut t)), Msg::ReadReply { attempt, idx, read, indirected })
                if attempt == self.attempt =>
            {
                let i = idx as usize;
                // Only an awaited answer: in round one (a get's, or a
                // server's one key) a location not yet answered.
                if i >= t.results.len() || t.awaited == 0 || (!t.second_round && t.results[i].is_some()) {
                    self.op = Some(InFlight::Trans(t));
                    return;
                }
                self.indirected |= indirected;
                match read {
                    Ok(r) => t.results[i] = Some(r),
                    Err(()) => t.restart = true,
                }
                t.awaited -= 1;
                if t.awaited == 0 {
                    self.round_done(env, t);
                } else {
                    self.op = Some(InFlight::Trans(t));
                }
            }
            (Some(InFlight::Trans(mut t)), Msg::ReadsReply { attempt, reads }) if attempt == self.attempt => {
                for (idx, read) in reads {
                    let i = idx as usize;
                    // Only a first-round answer awaited for this location.
                    if i < t.results.len() && t.results[i].is_none() && t.awaited > 0 && !t.second_round {
                        t.results[i] = Some(read);
                        t.awaited -= 1;
                    }
                }
                if t.awaited == 0 {
                    self.round_done(env, t);
                } else {
                    self.op = Some(InFlight::Trans(t));
                }
            }
            (Some(InFlight::Trans(_)), Msg::Refused { attempt, reason }) if attempt == self.attempt => {
                env.complete(OpResult::Failed(OpError::BadRequest(reason)))
            }
            (op, _) => self.op = op, // a stray or stale reply: ignore it
        }
    }

    /// A restarted transaction's back-off is over: start it again.
    fn on_timer(&mut self, env: &mut impl ClientEnv<Msg>, token: u64) {
        match self.op.take() {
            Some(InFlight::Backoff { targets, shape, restarts }) if token == u64::from(self.attempt) => {
                self.start_trans(env, targets, shape, restarts);
            }
            op => self.op = op, // a stale timer
        }
    }
}
