//! A closed-loop load generator over real client sessions: what `causeway
//! demo` and `causeway bench` drive a cluster with.
//!
//! Each connection is a tokio task issuing one operation at a time, or with
//! `pipeline` N, one on each of N sessions sharing its connections and
//! waiting for all N, as redis-benchmark's `-P` does (YCSB-style
//! mix of get, put and ROT over `keys` keys, uniform), recording latencies in
//! an HdrHistogram and, if asked, the history for the checker. Visibility is
//! measured from the outside, as Roohitavaf does: for each ordered DC pair a
//! probe writes a fresh value in one DC and polls for it in the other; the
//! time from the write's acknowledgement to the first read that returns it
//! is the pair's visibility latency (it includes up to one local read of
//! polling granularity).

use crate::client::Session;
use crate::config::Cluster;
use causeway_core::summary::{Summary, histogram};
use causeway_core::{ClientId, DcId, History, Op, OpKind, OpRecord, OpResult, Protocol, tagged_value, write_id_of};
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct LoadSpec {
    /// Connections (closed-loop tasks) per DC.
    pub sessions_per_dc: u32,
    /// Operations each connection has in flight at once, each on its own
    /// causal session ([`Session::pipelined`]); 1: no pipelining.
    pub pipeline: u32,
    /// Only put sessions in these DCs (empty: every DC).
    pub dcs: Vec<DcId>,
    pub duration: Duration,
    pub warmup: Duration,
    pub keys: u64,
    pub value_size: usize,
    pub read: f64,
    pub update: f64,
    pub rot: f64,
    pub rot_size: usize,
    /// Write-only transactions of `wot_size` keys (for a protocol without
    /// them, their share goes to the other operations).
    pub wot: f64,
    pub wot_size: usize,
    /// Non-atomic batches of `wot_size` keys ([`Op::Batch`]; for a
    /// protocol without them, their share goes to the other operations).
    pub batch: f64,
    /// Interactive transactions ([`Session::begin`]): one read round of
    /// `txn_reads` keys, then `txn_writes` buffered writes, then commit,
    /// each step a round trip of its own, as a user's transaction that
    /// decides what to write from what it read. Only without pipelining
    /// (a transaction holds its session) and for a protocol that offers
    /// them; otherwise their share goes to the other operations.
    pub interactive: f64,
    pub txn_reads: usize,
    pub txn_writes: usize,
    /// ROT sizes drawn from this discrete distribution of (size, weight)
    /// (empty: always `rot_size`).
    pub rot_sizes: Vec<(usize, f64)>,
    /// Value sizes drawn from (size, weight) (empty: always `value_size`).
    pub value_sizes: Vec<(usize, f64)>,
    /// Under partial replication, the fraction of multi-key operations
    /// (ROTs, WOTs, batches, interactive transactions) whose keys all lie
    /// in partitions the session's DC stores; the others name at least one
    /// key of a partition it does not store (as the simulator's
    /// `local_txn_ratio`). `None`: keys fall where they fall.
    pub local_txn_ratio: Option<f64>,
    /// Write every key once before the run (YCSB's load phase), so reads
    /// find values of the workload's sizes rather than nothing.
    pub preload: bool,
    pub record_history: bool,
    pub visibility_probes: bool,
    pub seed: u64,
    /// Access token every session shows ([`crate::auth`]).
    pub token: Option<String>,
}

impl Default for LoadSpec {
    fn default() -> Self {
        LoadSpec {
            sessions_per_dc: 8,
            pipeline: 1,
            dcs: Vec::new(),
            duration: Duration::from_secs(5),
            warmup: Duration::from_millis(500),
            keys: 1_000,
            value_size: 64,
            read: 0.45,
            update: 0.45,
            rot: 0.10,
            rot_size: 4,
            wot: 0.0,
            wot_size: 2,
            batch: 0.0,
            interactive: 0.0,
            txn_reads: 4,
            txn_writes: 1,
            rot_sizes: Vec::new(),
            value_sizes: Vec::new(),
            local_txn_ratio: None,
            preload: false,
            record_history: false,
            visibility_probes: true,
            seed: 1,
            token: None,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct PairLatency {
    pub from: String,
    pub to: String,
    #[serde(flatten)]
    pub summary: Summary,
}

#[derive(Debug, Serialize)]
pub struct LoadReport {
    pub protocol: String,
    pub sessions: usize,
    pub measured_s: f64,
    pub ops: u64,
    pub errors: u64,
    pub throughput_ops_s: f64,
    /// Keys read or written per second (a ROT or WOT of n keys counts n).
    pub throughput_keys_s: f64,
    /// CPU time of this process per measured operation, in µs: the load
    /// generator, plus the servers when they are embedded in it.
    pub cpu_user_us_per_op: f64,
    pub cpu_system_us_per_op: f64,
    pub latency: BTreeMap<String, Summary>,
    pub visibility: Vec<PairLatency>,
    #[serde(skip)]
    pub history: Option<History>,
}

struct SessionResult {
    hist: BTreeMap<OpKind, Histogram<u64>>,
    ops: u64,
    keys: u64,
    errors: u64,
    records: Vec<OpRecord>,
}

/// Run the load; `progress` is called about ten times a second with the
/// fraction done.
pub async fn run<P: Protocol>(cluster: Arc<Cluster>, spec: LoadSpec, progress: impl Fn(f64)) -> LoadReport {
    run_with_timeout::<P>(cluster, spec, DEFAULT_OP_TIMEOUT, progress).await
}

/// A session's default deadline per operation.
pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(10);

/// [`run`] with each operation's deadline (connecting included): a node that
/// stops answering costs a session at most this, then it counts an error and
/// reconnects, so the run ends on time.
pub async fn run_with_timeout<P: Protocol>(
    cluster: Arc<Cluster>,
    spec: LoadSpec,
    op_timeout: Duration,
    progress: impl Fn(f64),
) -> LoadReport {
    let dcs: Vec<DcId> = if spec.dcs.is_empty() { cluster.topology.dc_ids().collect() } else { spec.dcs.clone() };
    let next_write = Arc::new(AtomicU64::new(1));
    // The load phase is outside the measured run and its history: its
    // writes are ordinary writes of sessions that end before it starts.
    let origin = Instant::now();
    let (preload_errors, preload_records) = if spec.preload {
        preload::<P>(&cluster, &spec, &next_write, op_timeout, origin).await
    } else {
        (0, Vec::new())
    };
    let measure_from = Instant::now() + spec.warmup;
    let end = measure_from + spec.duration;
    // Client ids for sessions replacing broken ones, above the initial ones.
    let fresh_ids = Arc::new(AtomicU64::new(1_000_000));
    let mut tasks = Vec::new();
    let mut id = 0u32;
    let depth = spec.pipeline.max(1);
    for &dc in &dcs {
        let placed = spec.local_txn_ratio.map(|_| Arc::new(KeysByPlace::new(&cluster.topology, dc, spec.keys.max(1))));
        for _ in 0..spec.sessions_per_dc {
            let first = id + 1;
            id += depth;
            let (cluster, spec, next_write) = (cluster.clone(), spec.clone(), next_write.clone());
            let placed = placed.clone();
            let fresh_ids = fresh_ids.clone();
            tasks.push(tokio::spawn(async move {
                let mut cid = first;
                let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ ((first as u64) << 20));
                let mut res = SessionResult { hist: BTreeMap::new(), ops: 0, keys: 0, errors: 0, records: Vec::new() };
                let mut session: Option<Session<P>> = None;
                while Instant::now() < end {
                    let s = match session.as_mut() {
                        Some(s) => s,
                        None => match Session::<P>::pipelined(cluster.clone(), dc, cid, depth) {
                            Ok(mut s) => {
                                s.timeout = op_timeout;
                                s.set_token(spec.token.clone());
                                session.insert(s)
                            }
                            Err(_) => return res,
                        },
                    };
                    let planned: Vec<Planned> = (0..depth)
                        .map(|_| next_op::<P>(&spec, depth, placed.as_deref(), &next_write, &mut rng))
                        .collect();
                    // Whether the session broke: its causal context is then gone.
                    let broken = if let [Planned::Interactive { reads, writes }] = &planned[..] {
                        let (reads, writes) = (reads.clone(), writes.clone());
                        let key_count = (reads.len() + writes.len()) as u64;
                        let t0 = Instant::now();
                        let (r, rec) = interactive(s, reads, writes).await;
                        let t1 = Instant::now();
                        if t0 >= measure_from && t1 <= end && r.is_ok() {
                            res.ops += 1;
                            res.keys += key_count;
                            let latency_us = (t1 - t0).as_micros().max(1) as u64;
                            let _ = res.hist.entry(OpKind::Interactive).or_insert_with(histogram).record(latency_us);
                        }
                        if let (true, Some((op, result))) = (spec.record_history, rec) {
                            res.records.push(OpRecord {
                                client: ClientId(cid),
                                dc,
                                op,
                                result,
                                invoke_us: (t0 - origin).as_micros() as u64,
                                complete_us: (t1 - origin).as_micros() as u64,
                                batch: None,
                                levels: None,
                                checking_group: None,
                            });
                        }
                        r.is_err()
                    } else {
                        let ops: Vec<Op> = planned
                            .into_iter()
                            .map(|p| match p {
                                Planned::Op(op) => op,
                                Planned::Interactive { .. } => unreachable!("drawn only without pipelining"),
                            })
                            .collect();
                        let kinds: Vec<OpKind> = ops.iter().map(Op::kind).collect();
                        let key_count: u64 = ops.iter().map(keys_of).sum();
                        // The operations are kept only for the history.
                        let (ops, kept) = if spec.record_history { (ops.clone(), ops) } else { (ops, Vec::new()) };
                        let t0 = Instant::now();
                        let r = s.execute_many(ops).await;
                        let t1 = Instant::now();
                        let measured = t0 >= measure_from && t1 <= end;
                        let levels = s.levels();
                        let checking_group = s.checking_group();
                        let record = |res: &mut SessionResult, slot: usize, op: Op, result: OpResult| {
                            let levels = levels.filter(|_| matches!(op, Op::Get { .. } | Op::Put { .. }));
                            let checking_group = checking_group.filter(|_| matches!(op, Op::Get { .. }));
                            let rec = OpRecord {
                                client: ClientId(cid + slot as u32),
                                dc,
                                op,
                                result,
                                invoke_us: (t0 - origin).as_micros() as u64,
                                complete_us: (t1 - origin).as_micros() as u64,
                                batch: None,
                                levels,
                                checking_group,
                            };
                            // A batch's number: unique among this task's records.
                            let id = res.records.len() as u64;
                            res.records.extend(rec.expand(id));
                        };
                        match r {
                            Ok(results) => {
                                if measured {
                                    res.ops += kinds.len() as u64;
                                    res.keys += key_count;
                                    let latency_us = (t1 - t0).as_micros().max(1) as u64;
                                    for kind in kinds {
                                        let _ = res.hist.entry(kind).or_insert_with(histogram).record(latency_us);
                                    }
                                }
                                for (slot, (op, result)) in kept.into_iter().zip(results).enumerate() {
                                    record(&mut res, slot, op, result);
                                }
                                false
                            }
                            Err(e) => {
                                if spec.record_history {
                                    // The operations may or may not have taken effect; a
                                    // timeout is recorded as one, so the checker's
                                    // liveness checks see the operation that never finished.
                                    let error = failure_of(&e);
                                    for (slot, op) in kept.into_iter().enumerate() {
                                        record(&mut res, slot, op, OpResult::Failed(error.clone()));
                                    }
                                }
                                true
                            }
                        }
                    };
                    if broken {
                        // A broken session's causal context is gone: the next
                        // session is a new client in the history.
                        res.errors += 1;
                        session = None;
                        cid = fresh_ids.fetch_add(depth as u64, Ordering::Relaxed) as u32;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                res
            }));
        }
    }
    // Visibility probes, one per ordered DC pair.
    let mut probes = Vec::new();
    if spec.visibility_probes {
        for a in cluster.topology.dc_ids() {
            for b in cluster.topology.dc_ids() {
                if a == b {
                    continue;
                }
                let cluster = cluster.clone();
                let next_write = next_write.clone();
                let token = spec.token.clone();
                probes.push(tokio::spawn(async move {
                    let mut h = histogram();
                    let key = bytes::Bytes::from(format!("probe-{}-{}", a.0, b.0));
                    let (Ok(mut w), Ok(mut r)) = (
                        Session::<P>::new(cluster.clone(), a, 900_000 + a.0 as u32),
                        Session::<P>::new(cluster, b, 910_000 + b.0 as u32),
                    ) else {
                        return (a, b, h);
                    };
                    w.set_token(token.clone());
                    r.set_token(token);
                    while Instant::now() < end {
                        let id = next_write.fetch_add(1, Ordering::Relaxed);
                        if w.put(key.clone(), tagged_value(id, 16)).await.is_err() {
                            break;
                        }
                        let acked = Instant::now();
                        loop {
                            match r.get(key.clone()).await {
                                Ok(Some(v)) if write_id_of(&v).is_some_and(|x| x >= id) => break,
                                Ok(_) => {}
                                Err(_) => return (a, b, h),
                            }
                            if Instant::now() > end + Duration::from_secs(5) {
                                return (a, b, h);
                            }
                        }
                        if acked >= measure_from {
                            let _ = h.record(acked.elapsed().as_micros().max(1) as u64);
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    (a, b, h)
                }));
            }
        }
    }
    // CPU over the measured window only (the warm-up excluded), sampled
    // within the progress tick.
    let mut cpu_from = None;
    while Instant::now() < end {
        let done = (Instant::now() - origin).as_secs_f64() / (end - origin).as_secs_f64();
        progress(done.min(1.0));
        let until = if cpu_from.is_none() {
            measure_from.min(Instant::now() + Duration::from_millis(100))
        } else {
            Instant::now() + Duration::from_millis(100)
        };
        tokio::time::sleep_until(until.into()).await;
        if cpu_from.is_none() && Instant::now() >= measure_from {
            cpu_from = Some((Instant::now(), process_cpu_us()));
        }
    }
    let cpu_to = (Instant::now(), process_cpu_us());
    progress(1.0);
    let mut hist: BTreeMap<OpKind, Histogram<u64>> = BTreeMap::new();
    let (mut ops, mut key_total, mut errors) = (0, 0, preload_errors);
    let mut records = preload_records;
    for t in tasks {
        if let Ok(r) = t.await {
            ops += r.ops;
            key_total += r.keys;
            errors += r.errors;
            for (k, h) in r.hist {
                let _ = hist.entry(k).or_insert_with(histogram).add(&h);
            }
            records.extend(r.records);
        }
    }
    let names: Vec<String> = cluster.topology.dc_ids().map(|d| cluster.topology.dc_name(d)).collect();
    let mut visibility = Vec::new();
    for p in probes {
        if let Ok((a, b, h)) = p.await {
            visibility.push(PairLatency {
                from: names[a.idx()].clone(),
                to: names[b.idx()].clone(),
                summary: Summary::of(&h),
            });
        }
    }
    records.sort_by_key(|r| r.complete_us);
    // Operations are counted over the measured window; the CPU window may be
    // a tick longer or shorter, so scale by their durations.
    let (cpu_user_us_per_op, cpu_system_us_per_op) = match cpu_from {
        Some((t0, (u0, s0))) if ops > 0 => {
            let (t1, (u1, s1)) = cpu_to;
            let window_s = (t1 - t0).as_secs_f64().max(1e-3);
            let ops_in_window = ops as f64 * window_s / spec.duration.as_secs_f64();
            ((u1 - u0) as f64 / ops_in_window, (s1 - s0) as f64 / ops_in_window)
        }
        _ => (0.0, 0.0),
    };
    LoadReport {
        protocol: P::NAME.to_string(),
        sessions: id as usize,
        measured_s: spec.duration.as_secs_f64(),
        ops,
        errors,
        throughput_ops_s: ops as f64 / spec.duration.as_secs_f64(),
        throughput_keys_s: key_total as f64 / spec.duration.as_secs_f64(),
        cpu_user_us_per_op,
        cpu_system_us_per_op,
        latency: hist.iter().map(|(k, h)| (k.name().to_string(), Summary::of(h))).collect(),
        visibility,
        history: spec.record_history.then(|| History { protocol: P::NAME.to_string(), ops: records }),
    }
}

/// What a session does next: one operation, or an interactive
/// transaction (run step by step by [`interactive`]).
enum Planned {
    Op(Op),
    Interactive { reads: Vec<bytes::Bytes>, writes: Vec<(bytes::Bytes, bytes::Bytes)> },
}

/// The key indices of a load whose partitions a DC stores (`here`) and
/// those it does not (`away`), for [`LoadSpec::local_txn_ratio`].
struct KeysByPlace {
    here: Vec<u64>,
    away: Vec<u64>,
}

impl KeysByPlace {
    fn new(topology: &causeway_core::Topology, dc: DcId, keys: u64) -> KeysByPlace {
        let (here, away) = (0..keys).partition(|&i| topology.stores(dc, topology.partition_of(&key_name(i))));
        KeysByPlace { here, away }
    }
}

/// The next operation of the mix: a get, a put of a fresh tagged value, a
/// ROT of distinct keys, a WOT or batch of distinct keys, or an interactive
/// transaction (not for a protocol without ROTs, WOTs, batches or
/// interactive transactions, nor interactive transactions when `depth`
/// operations are pipelined: their shares go to the other operations).
/// `placed`: the session's DC's keys by place, when the load has a
/// `local_txn_ratio`.
fn next_op<P: Protocol>(
    spec: &LoadSpec,
    depth: u32,
    placed: Option<&KeysByPlace>,
    next_write: &AtomicU64,
    rng: &mut ChaCha8Rng,
) -> Planned {
    let rot = if P::OPS.contains(&OpKind::Rot) { spec.rot } else { 0.0 };
    let wot = if P::OPS.contains(&OpKind::Wot) { spec.wot } else { 0.0 };
    let batch = if P::OPS.contains(&OpKind::Batch) { spec.batch } else { 0.0 };
    let itx = if P::OPS.contains(&OpKind::Interactive) && depth == 1 { spec.interactive } else { 0.0 };
    let x: f64 = rng.random::<f64>() * (spec.read + spec.update + rot + wot + batch + itx);
    let keys = spec.keys.max(1);
    let pick = |rng: &mut ChaCha8Rng| key_name(rng.random_range(0..keys));
    // A multi-key operation's keys: all in partitions of the session's DC
    // (a share `local_txn_ratio` of them), or the first in one it does not
    // store and the rest anywhere; without the ratio, anywhere.
    let distinct = |n: usize, rng: &mut ChaCha8Rng| {
        let mut ks = Vec::with_capacity(n);
        let (mut pool, mut first_away): (Option<&[u64]>, Option<&[u64]>) = (None, None);
        if let (Some(p), Some(ratio)) = (placed, spec.local_txn_ratio) {
            match rng.random::<f64>() < ratio {
                true if !p.here.is_empty() => pool = Some(&p.here),
                false if !p.away.is_empty() => first_away = Some(&p.away),
                _ => {}
            }
        }
        let cap = pool.map_or(keys, |p| p.len() as u64).min(n as u64);
        if let Some(away) = first_away.filter(|_| n > 0) {
            ks.push(key_name(away[rng.random_range(0..away.len())]));
        }
        while (ks.len() as u64) < cap {
            let k = match pool {
                Some(p) => key_name(p[rng.random_range(0..p.len())]),
                None => pick(rng),
            };
            if !ks.contains(&k) {
                ks.push(k);
            }
        }
        ks
    };
    let value = |rng: &mut ChaCha8Rng| {
        let size = pick_weighted(&spec.value_sizes, rng).unwrap_or(spec.value_size);
        tagged_value(next_write.fetch_add(1, Ordering::Relaxed), size)
    };
    Planned::Op(if x < spec.read {
        Op::Get { key: pick(rng) }
    } else if x < spec.read + spec.update {
        Op::Put { key: pick(rng), value: value(rng) }
    } else if x < spec.read + spec.update + rot {
        let n = pick_weighted(&spec.rot_sizes, rng).unwrap_or(spec.rot_size);
        Op::Rot { keys: distinct(n, rng) }
    } else if x < spec.read + spec.update + rot + wot {
        let ks = distinct(spec.wot_size, rng);
        Op::Wot { writes: ks.into_iter().map(|k| (k, value(rng))).collect() }
    } else if x < spec.read + spec.update + rot + wot + batch {
        let ks = distinct(spec.wot_size, rng);
        Op::Batch { writes: ks.into_iter().map(|k| (k, value(rng))).collect() }
    } else {
        let reads = distinct(spec.txn_reads, rng);
        let writes = distinct(spec.txn_writes, rng).into_iter().map(|k| (k, value(rng))).collect();
        return Planned::Interactive { reads, writes };
    })
}

/// An interactive transaction: begin, read `reads` in one round, buffer
/// `writes`, commit. Returns its outcome and the record a history keeps of
/// it: the reads with, once it was asked to commit, the writes and the
/// commit's outcome (as the simulator records its sessions'
/// transactions); the reads alone when it ended before.
async fn interactive<P: Protocol>(
    s: &mut Session<P>,
    reads: Vec<bytes::Bytes>,
    writes: Vec<(bytes::Bytes, bytes::Bytes)>,
) -> (Result<(), crate::client::ClientError>, Option<(Op, OpResult)>) {
    let mut t = match s.begin().await {
        Ok(t) => t,
        Err(e) => return (Err(e), None),
    };
    if let Err(e) = t.read(reads).await {
        return (Err(e), t.buffer().clone().record_aborted());
    }
    for (k, v) in writes {
        if let Err(e) = t.write(k, v) {
            return (Err(e), t.buffer().clone().record_aborted());
        }
    }
    let buf = t.buffer().clone();
    let r = t.commit().await;
    let outcome = match &r {
        Ok(()) => OpResult::Done,
        Err(e) => OpResult::Failed(failure_of(e)),
    };
    (r, Some(buf.record(&outcome)))
}

/// The workload's key `i`, YCSB's `user<i>`, made afresh for each
/// operation. A table of the keys, shared by every session, cost each pick
/// a cache miss on the table and one on the key's shared reference count,
/// and two atomic updates of that count (2 % of the machine's samples in
/// the unpipelined benchmark, client and server together); a fresh key is
/// a small allocation from memory the thread just freed.
///
/// The digits come from `itoa`, not `write!`: `core::fmt`'s machinery cost
/// some 350 instructions more per operation, 4 % of the bench client's
/// (`scripts/ir-per-op.sh`, `WHO=client`).
fn key_name(i: u64) -> bytes::Bytes {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(i).as_bytes();
    let mut key = bytes::BytesMut::with_capacity(4 + digits.len());
    key.extend_from_slice(b"user");
    key.extend_from_slice(digits);
    key.freeze()
}

/// How many keys an operation reads or writes.
fn keys_of(op: &Op) -> u64 {
    match op {
        Op::Rot { keys } => keys.len() as u64,
        Op::Wot { writes } | Op::Batch { writes } => writes.len() as u64,
        Op::Txn { reads, writes } => (reads.len() + writes.len()) as u64,
        _ => 1,
    }
}

/// An entry of a (value, weight) distribution drawn with probability
/// proportional to its weight; `None` when it is empty.
fn pick_weighted(dist: &[(usize, f64)], rng: &mut ChaCha8Rng) -> Option<usize> {
    let total: f64 = dist.iter().map(|(_, w)| w).sum();
    let mut x = rng.random::<f64>() * total;
    for &(v, w) in dist {
        if x < w {
            return Some(v);
        }
        x -= w;
    }
    dist.last().map(|&(v, _)| v)
}

/// YCSB's load phase: every key written once, with values of the
/// workload's sizes, by `sessions` sessions in each DC's share of the keys
/// (key `i` by DC `i mod dcs`). Errors are counted, not fatal.
async fn preload<P: Protocol>(
    cluster: &Arc<Cluster>,
    spec: &LoadSpec,
    next_write: &Arc<AtomicU64>,
    op_timeout: Duration,
    origin: Instant,
) -> (u64, Vec<OpRecord>) {
    const LOADERS_PER_DC: u32 = 8;
    let dcs: Vec<DcId> = cluster.topology.dc_ids().collect();
    let mut tasks = Vec::new();
    for (d, &dc) in dcs.iter().enumerate() {
        for l in 0..LOADERS_PER_DC {
            let (cluster, spec, next_write) = (cluster.clone(), spec.clone(), next_write.clone());
            let stride = dcs.len() * LOADERS_PER_DC as usize;
            let first = d + dcs.len() * l as usize;
            tasks.push(tokio::spawn(async move {
                let id = 800_000 + first as u32;
                let Ok(mut s) = Session::<P>::new(cluster, dc, id) else { return (1, Vec::new()) };
                s.timeout = op_timeout;
                s.set_token(spec.token.clone());
                let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x10ad ^ ((first as u64) << 20));
                let (mut errors, mut records) = (0, Vec::new());
                for key in (first as u64..spec.keys).step_by(stride).map(key_name) {
                    let size = pick_weighted(&spec.value_sizes, &mut rng).unwrap_or(spec.value_size);
                    let value = tagged_value(next_write.fetch_add(1, Ordering::Relaxed), size);
                    let op = Op::Put { key: key.clone(), value: value.clone() };
                    let t0 = Instant::now();
                    let result = match s.put(key.clone(), value).await {
                        Ok(()) => OpResult::Put,
                        Err(e) => {
                            errors += 1;
                            OpResult::Failed(failure_of(&e))
                        }
                    };
                    if spec.record_history {
                        records.push(OpRecord {
                            client: ClientId(id),
                            dc,
                            op,
                            result,
                            invoke_us: (t0 - origin).as_micros() as u64,
                            complete_us: (Instant::now() - origin).as_micros() as u64,
                            batch: None,
                            levels: s.levels(),
                            checking_group: None,
                        });
                    }
                }
                (errors, records)
            }));
        }
    }
    let (mut errors, mut records) = (0, Vec::new());
    for t in tasks {
        match t.await {
            Ok((e, r)) => {
                errors += e;
                records.extend(r);
            }
            Err(_) => errors += 1,
        }
    }
    (errors, records)
}

/// How a failed operation goes into the history: a timeout as one, so the
/// checker's liveness checks see the operation that never finished.
fn failure_of(e: &crate::client::ClientError) -> causeway_core::OpError {
    match e {
        crate::client::ClientError::Timeout(d) => causeway_core::OpError::TimedOut { after_ms: d.as_millis() as u64 },
        e => causeway_core::OpError::Aborted(e.to_string()),
    }
}

/// User and system CPU time this process has used, in µs (getrusage(2)).
fn process_cpu_us() -> (u64, u64) {
    // SAFETY: getrusage writes a `rusage` into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0, 0);
    }
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (us(ru.ru_utime), us(ru.ru_stime))
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::{Replication, Topology, TopologySpec};
    use causeway_protocols::transactional::paris::Paris;

    /// `local_txn_ratio`: at 1 every ROT's keys are in partitions the
    /// session's DC stores, at 0 every ROT names at least one it does not
    /// store, and a ROT's keys stay distinct either way.
    #[test]
    fn local_txn_ratio_places_a_rots_keys() {
        let topology =
            Topology::new(TopologySpec { replication: Replication::Partial { factor: 2 }, ..TopologySpec::full(3, 3) })
                .unwrap();
        let dc = DcId(1);
        let placed = KeysByPlace::new(&topology, dc, 300);
        assert!(!placed.here.is_empty() && !placed.away.is_empty());
        let stored = |k: &bytes::Bytes| topology.stores(dc, topology.partition_of(k));
        let next_write = AtomicU64::new(1);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for (ratio, local) in [(1.0, true), (0.0, false)] {
            let spec = LoadSpec {
                keys: 300,
                read: 0.0,
                update: 0.0,
                rot: 1.0,
                local_txn_ratio: Some(ratio),
                ..Default::default()
            };
            for _ in 0..200 {
                let Planned::Op(Op::Rot { keys }) = next_op::<Paris>(&spec, 1, Some(&placed), &next_write, &mut rng)
                else {
                    panic!("a ROT was drawn");
                };
                assert_eq!(keys.len(), spec.rot_size);
                let mut distinct = keys.clone();
                distinct.sort();
                distinct.dedup();
                assert_eq!(distinct.len(), keys.len(), "{keys:?}");
                assert_eq!(keys.iter().all(stored), local, "ratio {ratio}: {keys:?}");
            }
        }
    }
}
