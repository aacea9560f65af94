//! Scripted anomaly scenarios shared by the per-protocol simulation tests.
//! Each returns what a user would have observed; the tests decide whether
//! that is allowed for the protocol.

#![allow(dead_code)]

use bytes::Bytes;
use causeway_core::{History, Key, Op, OpResult, Protocol, Topology, TopologySpec, tagged_value};
use causeway_sim::{Fault, FaultKind, Scenario, ScriptedClient, ScriptedOp, Sim};

/// Two key names from `prefixes` that land on different partitions of `topology`.
pub fn keys_on_different_partitions(t: &Topology, a: &str, b: &str) -> (Key, Key) {
    for i in 0..1000 {
        let ka = Bytes::from(format!("{a}{i}"));
        let kb = Bytes::from(format!("{b}{i}"));
        if t.partition_of(&ka) != t.partition_of(&kb) {
            return (ka, kb);
        }
    }
    unreachable!("no split found")
}

pub fn base(dcs: u16, partitions: u32, duration_ms: u64, seed: u64) -> Scenario {
    let mut sc = Scenario::new(TopologySpec::full(dcs, partitions), duration_ms);
    sc.seed = seed;
    sc.network.default_rtt_ms = 40.0;
    sc.network.intra_dc_us = 200;
    sc.network.jitter_pct = 5.0;
    sc.record_history = true;
    sc
}

pub fn run<P: Protocol>(sc: Scenario) -> (History, Sim<P>) {
    let mut sim = Sim::<P>::new(sc).expect("valid scenario");
    sim.run();
    let h = sim.take_history().expect("history recorded");
    (h, sim)
}

fn put(at_us: u64, key: &Key, value: &Bytes) -> ScriptedOp {
    ScriptedOp { at_us, op: Op::Put { key: key.clone(), value: value.clone() }, from_dc: None, checking_group: None }
}
fn get(at_us: u64, key: &Key) -> ScriptedOp {
    ScriptedOp { at_us, op: Op::Get { key: key.clone() }, from_dc: None, checking_group: None }
}

/// Photo-then-album (COPS's motivating example): a DC0 user uploads a photo
/// and then adds it to the album; the link from the photo's partition server
/// in DC0 to its peer in DC1 is slow. A DC1 reader polls the album and, once it sees the entry,
/// opens the photo. Returns the number of times the reader saw the album
/// entry but then no photo (a causality violation), and whether it ever saw
/// the album entry at all (so a test can tell "safe" from "never looked").
pub fn photo_then_album<P: Protocol>(seed: u64) -> (usize, bool) {
    photo_then_album_with::<P>(seed, 1_000, |_, _| {})
}

/// [`photo_then_album`] with the writes at `start_us` and a hook to add
/// faults or clock settings to the scenario.
pub fn photo_then_album_with<P: Protocol>(
    seed: u64,
    start_us: u64,
    tweak: impl FnOnce(&mut Scenario, &Topology),
) -> (usize, bool) {
    let mut sc = base(2, 4, start_us / 1_000 + 1_500, seed);
    let t = Topology::new(sc.topology.clone()).unwrap();
    let (photo, album) = keys_on_different_partitions(&t, "photo", "album");
    let from = t.server_for_key(causeway_core::DcId(0), &photo).unwrap();
    let to = t.server_for_key(causeway_core::DcId(1), &photo).unwrap();
    sc.faults.push(Fault { at_ms: 0, at_us: 0, kind: FaultKind::SlowLink { from: from.0, to: to.0, extra_ms: 300 } });
    // A protocol whose DC-0 service nodes ship the writes (NuKV's
    // forwarder) replicates the photo over their links to `to` instead.
    let mut with_services = sc.topology.clone();
    with_services.add_missing_services(P::SERVICES);
    let ts = Topology::new(with_services).unwrap();
    for s in 0..ts.spec().services.len() as u16 {
        for &n in ts.service_nodes(causeway_core::DcId(0), s) {
            sc.faults.push(Fault {
                at_ms: 0,
                at_us: 0,
                kind: FaultKind::SlowLink { from: n.0, to: to.0, extra_ms: 300 },
            });
        }
    }
    tweak(&mut sc, &t);
    let photo_v = tagged_value(1, 16);
    let album_v = tagged_value(2, 16);
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![put(start_us, &photo, &photo_v), put(0, &album, &album_v)] });
    let mut reader = Vec::new();
    for i in 0..300 {
        reader.push(get(start_us + i * 3_000, &album));
        reader.push(get(0, &photo));
    }
    sc.scripted.push(ScriptedClient { dc: 1, ops: reader });
    let (h, _) = run::<P>(sc);
    let reads: Vec<&causeway_core::OpRecord> = h.ops.iter().filter(|r| r.dc.0 == 1).collect();
    let mut violations = 0;
    let mut saw_album = false;
    for w in reads.windows(2) {
        if let (Op::Get { key: k1 }, OpResult::Get(v1), Op::Get { key: k2 }, OpResult::Get(v2)) =
            (&w[0].op, &w[0].result, &w[1].op, &w[1].result)
            && *k1 == album
            && *k2 == photo
            && v1.as_ref() == Some(&album_v)
        {
            saw_album = true;
            if v2.as_ref() != Some(&photo_v) {
                violations += 1;
            }
        }
    }
    (violations, saw_album)
}

/// Roohitavaf §3.3 / COPS's ACL example with a ROT: the ACL starts public and
/// the album old; Alice (DC0) makes the ACL friends-only, then posts to the
/// album. The ACL's partition server in DC0 is slow to replicate. A DC1 ROT
/// over {acl, album} must never return ⟨public, new album⟩. Returns
/// (violations, how many ROTs saw the new album).
pub fn acl_album_rot<P: Protocol>(seed: u64) -> (usize, usize) {
    acl_album_rot_with::<P>(seed, "")
}

/// [`acl_album_rot`] with the boolean protocol parameter `flag` set (none
/// when empty): a broken variant.
pub fn acl_album_rot_with<P: Protocol>(seed: u64, flag: &str) -> (usize, usize) {
    let mut sc = base(2, 4, 2_500, seed);
    if !flag.is_empty() {
        sc.protocol.insert(flag.into(), true.into());
    }
    let t = Topology::new(sc.topology.clone()).unwrap();
    let (acl, album) = keys_on_different_partitions(&t, "acl", "album");
    let from = t.server_for_key(causeway_core::DcId(0), &acl).unwrap();
    let to = t.server_for_key(causeway_core::DcId(1), &acl).unwrap();
    let public = tagged_value(10, 16);
    let old = tagged_value(11, 16);
    let friends = tagged_value(12, 16);
    let new = tagged_value(13, 16);
    sc.faults.push(Fault { at_ms: 500, at_us: 0, kind: FaultKind::SlowLink { from: from.0, to: to.0, extra_ms: 300 } });
    sc.scripted.push(ScriptedClient {
        dc: 0,
        ops: vec![put(1_000, &acl, &public), put(0, &album, &old), put(600_000, &acl, &friends), put(0, &album, &new)],
    });
    let mut reader = Vec::new();
    for i in 0..400 {
        reader.push(ScriptedOp {
            at_us: 550_000 + i * 3_000,
            op: Op::Rot { keys: vec![acl.clone(), album.clone()] },
            from_dc: None,
            checking_group: None,
        });
    }
    sc.scripted.push(ScriptedClient { dc: 1, ops: reader });
    let (h, _) = run::<P>(sc);
    let mut violations = 0;
    let mut saw_new = 0;
    for r in h.ops.iter().filter(|r| r.dc.0 == 1) {
        if let OpResult::Rot(vals) = &r.result
            && vals[1].as_ref() == Some(&new)
        {
            saw_new += 1;
            if vals[0].as_ref() == Some(&public) {
                violations += 1;
            }
        }
    }
    (violations, saw_new)
}

/// What one DC's readers saw in [`rot_order_in_every_dc`].
#[derive(Debug, Default, Clone, Copy)]
pub struct RotOrder {
    /// ROTs over {acl, album} that returned the new album with the public ACL.
    pub acl_violations: usize,
    /// ROTs that returned the new album at all.
    pub acl_saw_new: usize,
    /// ROTs over {photo, album} that returned the album entry without its photo.
    pub photo_violations: usize,
    /// ROTs that returned the album entry at all.
    pub photo_saw_album: usize,
}

/// The photo/album example (Lloyd §3.2) and the ACL/album race (Lloyd §4.3,
/// `read_trans((ACL, album))`), read with read-only transactions by a
/// reader in *every* DC, the writers' own included, on 3 DCs × 4
/// partitions. Alice (DC0) makes the ACL friends-only, then posts to
/// the album; Bob (DC0) uploads a photo, then adds it to a second album.
/// The ACL's and the photo's servers in DC0 replicate slowly to both other
/// DCs, so a remote DC receives each album write long before what it
/// depends on. Returns what each DC's reader saw, indexed by DC.
pub fn rot_order_in_every_dc<P: Protocol>(seed: u64) -> Vec<RotOrder> {
    let mut sc = base(3, 4, 2_500, seed);
    let t = Topology::new(sc.topology.clone()).unwrap();
    let (acl, album) = keys_on_different_partitions(&t, "acl", "album");
    let (photo, album2) = keys_on_different_partitions(&t, "photo", "shared");
    for slow in [&acl, &photo] {
        let from = t.server_for_key(causeway_core::DcId(0), slow).unwrap();
        for dc in 1..3 {
            let to = t.server_for_key(causeway_core::DcId(dc), slow).unwrap();
            sc.faults.push(Fault {
                at_ms: 500,
                at_us: 0,
                kind: FaultKind::SlowLink { from: from.0, to: to.0, extra_ms: 300 },
            });
        }
    }
    let (public, old, friends, new) =
        (tagged_value(10, 16), tagged_value(11, 16), tagged_value(12, 16), tagged_value(13, 16));
    let (photo_v, entry) = (tagged_value(20, 16), tagged_value(21, 16));
    sc.scripted.push(ScriptedClient {
        dc: 0,
        ops: vec![put(1_000, &acl, &public), put(0, &album, &old), put(600_000, &acl, &friends), put(0, &album, &new)],
    });
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![put(600_000, &photo, &photo_v), put(0, &album2, &entry)] });
    for dc in 0..3 {
        let mut reader = Vec::new();
        for i in 0..300 {
            reader.push(ScriptedOp {
                at_us: 550_000 + i * 4_000,
                op: Op::Rot { keys: vec![acl.clone(), album.clone()] },
                from_dc: None,
                checking_group: None,
            });
            reader.push(ScriptedOp {
                at_us: 0,
                op: Op::Rot { keys: vec![photo.clone(), album2.clone()] },
                from_dc: None,
                checking_group: None,
            });
        }
        sc.scripted.push(ScriptedClient { dc, ops: reader });
    }
    let (h, _) = run::<P>(sc);
    let mut seen = vec![RotOrder::default(); 3];
    for r in &h.ops {
        let (Op::Rot { keys }, OpResult::Rot(vals)) = (&r.op, &r.result) else { continue };
        let s = &mut seen[r.dc.0 as usize];
        if keys[0] == acl && vals[1].as_ref() == Some(&new) {
            s.acl_saw_new += 1;
            s.acl_violations += usize::from(vals[0].as_ref() == Some(&public));
        }
        if keys[0] == photo && vals[1].as_ref() == Some(&entry) {
            s.photo_saw_album += 1;
            s.photo_violations += usize::from(vals[0].as_ref() != Some(&photo_v));
        }
    }
    seen
}

/// A DC0 client writes and immediately reads back at its own DC: returns
/// how many of its reads missed its own preceding write.
pub fn read_your_writes_local<P: Protocol>(seed: u64) -> usize {
    let mut sc = base(3, 4, 500, seed);
    let k = Bytes::from_static(b"mine");
    let mut ops = Vec::new();
    for i in 0..50u64 {
        ops.push(put(if i == 0 { 1_000 } else { 0 }, &k, &tagged_value(100 + i, 16)));
        ops.push(get(0, &k));
    }
    sc.scripted.push(ScriptedClient { dc: 0, ops });
    let (h, _) = run::<P>(sc);
    let mut misses = 0;
    for w in h.ops.windows(2) {
        if let (Op::Put { value, .. }, OpResult::Get(v)) = (&w[0].op, &w[1].result)
            && v.as_ref() != Some(value)
        {
            misses += 1;
        }
    }
    misses
}

/// Concurrent writers in every DC hammer a few keys; after the load stops and
/// the network quiesces, a reader in each DC reads every key. Returns the
/// keys on which DCs disagree (empty means converged), and how many keys were read.
pub fn convergence<P: Protocol>(seed: u64) -> (Vec<String>, usize) {
    convergence_with::<P>(seed, |_| {})
}

/// [`convergence`] with a hook to add faults or parameters to the scenario.
pub fn convergence_with<P: Protocol>(seed: u64, tweak: impl FnOnce(&mut Scenario)) -> (Vec<String>, usize) {
    let mut sc = base(3, 4, 2_000, seed);
    sc.workload.clients_per_dc = 8;
    sc.workload.recordcount = 5;
    sc.workload.readproportion = 0.2;
    sc.workload.updateproportion = 0.8;
    sc.drain_ms = 3_000;
    sc.record_history = true;
    let keys: Vec<Key> = (0..5).map(|i| Bytes::from(format!("user{i}"))).collect();
    for dc in 0..3 {
        sc.scripted.push(ScriptedClient {
            dc,
            ops: keys.iter().enumerate().map(|(i, k)| get(if i == 0 { 4_000_000 } else { 0 }, k)).collect(),
        });
    }
    tweak(&mut sc);
    let (h, _) = run::<P>(sc);
    let mut finals: Vec<Vec<Option<Bytes>>> = vec![Vec::new(); 3];
    for r in &h.ops {
        if r.invoke_us >= 4_000_000
            && let OpResult::Get(v) = &r.result
        {
            finals[r.dc.idx()].push(v.clone());
        }
    }
    let mut bad = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let vals: Vec<&Option<Bytes>> = finals.iter().map(|f| &f[i]).collect();
        if vals.iter().any(|v| *v != vals[0]) || vals[0].is_none() {
            bad.push(format!("{}: {:?}", String::from_utf8_lossy(k), vals));
        }
    }
    (bad, finals[0].len())
}

/// One writer in DC0 writes `k` 100 times (values tagged 1, 2, …); a reader
/// in DC1 reads `k` 400 times while the DCs are cut apart and healed. Returns
/// the reads that went back to an older value than one the reader had
/// already seen (monotonic reads), and the newest tag it saw.
pub fn monotonic_reads<P: Protocol>(seed: u64) -> (usize, u64) {
    let mut sc = base(2, 2, 2_000, seed);
    let k = Bytes::from_static(b"counter");
    sc.faults.push(Fault { at_ms: 300, at_us: 0, kind: FaultKind::Cut { a: 0, b: 1 } });
    sc.faults.push(Fault { at_ms: 700, at_us: 0, kind: FaultKind::Heal { a: 0, b: 1 } });
    let writes = (1..=100u64).map(|i| put(1_000 + i * 5_000, &k, &tagged_value(i, 16))).collect();
    sc.scripted.push(ScriptedClient { dc: 0, ops: writes });
    let reads = (0..400u64).map(|i| get(1_000 + i * 3_000, &k)).collect();
    sc.scripted.push(ScriptedClient { dc: 1, ops: reads });
    let (h, _) = run::<P>(sc);
    let tags: Vec<u64> = (1..=100u64).collect();
    let tag_of = |v: &Bytes| tags.iter().copied().find(|&i| *v == tagged_value(i, 16)).expect("a written value");
    let (mut newest, mut regressions) = (0, 0);
    for r in h.ops.iter().filter(|r| r.dc.0 == 1) {
        if let OpResult::Get(Some(v)) = &r.result {
            let t = tag_of(v);
            if t < newest {
                regressions += 1;
            }
            newest = newest.max(t);
        }
    }
    (regressions, newest)
}

/// What [`permanent_loss_during_commit`] saw.
#[derive(Debug, Default)]
pub struct LossReport {
    /// Operations on keys the crashed node does not serve (in its DC; every
    /// key elsewhere) that did not complete within the liveness bound after
    /// the crash (or their invocation, if later): "what, invoked at, took".
    pub late: Vec<String>,
    /// Transactions touching the crashed node's partition that were in
    /// flight when it crashed: the scenario's proof that it crashed mid-commit.
    pub in_flight_at_crash: usize,
    /// Reads checked against the bound (in every DC).
    pub reads_checked: usize,
    /// The checker's verdict at the protocol's promised level, when it failed.
    pub check_failure: Option<String>,
}

/// Permanent node loss during commit. DC0's clients run write-only (or
/// read-write) transactions over a few hot keys, with reads and read-only
/// transactions, while readers in every DC read the same keys; between
/// 550 and 650 ms, where the most of its transactions are in flight, the
/// server of partition 0 in DC0 crashes and never restarts, with
/// transactions committing through it (as coordinator, cohort, or both).
/// Every operation that names no key of the lost partition in DC0 — reads
/// there of the other partitions' keys, everything in the other DCs — must
/// complete within `bound_us` of the crash or of its invocation, whichever
/// is later, and the history must pass the checker at the protocol's
/// promised level (fractured reads included). `wot_size` keys per
/// transaction, placed at random: with 3 keys some have two cohorts.
pub fn permanent_loss_during_commit<P: Protocol>(seed: u64, wot_size: usize, bound_us: u64) -> LossReport {
    permanent_loss_during_commit_sim::<P>(seed, wot_size, bound_us).0
}

/// [`permanent_loss_during_commit`], with the simulator after the run.
pub fn permanent_loss_during_commit_sim<P: Protocol>(
    seed: u64,
    wot_size: usize,
    bound_us: u64,
) -> (LossReport, Sim<P>) {
    use causeway_check::{CheckConfig, Level, check};
    use rand::{Rng, SeedableRng};
    const QUIET_US: u64 = 3_000_000;
    let mut sc = base(3, 3, 1_500, seed);
    sc.drain_ms = 3_000;
    // Requests to the lost node are lost: clients give up after twice the
    // bound, so a stall shows as a timed-out operation.
    sc.client_timeout_ms = (2 * bound_us).div_ceil(1_000);
    let topology = Topology::new(sc.topology.clone()).expect("valid topology");
    let dead_partition = causeway_core::PartitionId(0);
    let dead = topology.server(causeway_core::DcId(0), dead_partition).expect("DC0 stores partition 0");
    let w = &mut sc.workload;
    w.dcs = vec![0];
    w.clients_per_dc = 12;
    w.recordcount = 12;
    w.think_time_us = 200;
    w.readproportion = 0.25;
    w.updateproportion = 0.1;
    w.rotproportion = 0.2;
    w.rot_size = 2;
    if P::OPS.contains(&causeway_core::OpKind::Wot) {
        w.wotproportion = 0.45;
        w.wot_size = wot_size;
    } else {
        w.txnproportion = 0.45;
        w.txn_reads = 1;
        w.txn_writes = wot_size;
    }
    let keys: Vec<Key> = (0..12).map(|i| Bytes::from(format!("user{i}"))).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x1055);
    for dc in 0..3u16 {
        let mut ops = Vec::new();
        for i in 0..600u64 {
            let a = keys[rng.random_range(0..keys.len())].clone();
            let op = if rng.random_bool(0.5) {
                Op::Get { key: a }
            } else {
                let mut b = keys[rng.random_range(0..keys.len())].clone();
                while b == a {
                    b = keys[rng.random_range(0..keys.len())].clone();
                }
                Op::Rot { keys: vec![a, b] }
            };
            ops.push(ScriptedOp { at_us: 100_000 + i * 2_000, op, from_dc: None, checking_group: None });
        }
        // After quiescence, every key once (convergence).
        for (i, k) in keys.iter().enumerate() {
            ops.push(ScriptedOp {
                at_us: if i == 0 { QUIET_US } else { 0 },
                op: Op::Get { key: k.clone() },
                from_dc: None,
                checking_group: None,
            });
        }
        sc.scripted.push(ScriptedClient { dc, ops });
    }
    let lost = |dc: causeway_core::DcId, k: &Key| dc.0 == 0 && topology.partition_of(k) == dead_partition;
    let names_lost = |r: &causeway_core::OpRecord| r.op.keys().into_iter().any(|k| lost(r.dc, k));
    let is_txn = |r: &causeway_core::OpRecord| matches!(r.op, Op::Wot { .. } | Op::Txn { .. });
    // The crash falls where the most transactions of the lost partition
    // are in flight, between 550 and 650 ms: the run is deterministic, so
    // a run without the crash shows where (what happens before the crash
    // is the same in both).
    let crash_us = {
        let mut probe = Sim::<P>::new(sc.clone()).expect("valid scenario");
        probe.run_until(700_000);
        let mut ops: Vec<causeway_core::OpRecord> = probe.history().map(|h| h.ops.clone()).unwrap_or_default();
        ops.extend(probe.pending_records());
        let txns: Vec<(u64, u64)> = ops
            .iter()
            .filter(|r| is_txn(r) && names_lost(r))
            .map(|r| {
                (
                    r.invoke_us,
                    if r.result == OpResult::Failed(causeway_core::OpError::Pending) {
                        u64::MAX
                    } else {
                        r.complete_us
                    },
                )
            })
            .collect();
        let in_flight = |t: u64| txns.iter().filter(|&&(a, b)| a < t && t < b).count();
        txns.iter()
            .map(|&(a, _)| a + 1)
            .filter(|t| (550_000..650_000).contains(t))
            .max_by_key(|&t| (in_flight(t), t))
            .unwrap_or(600_000)
    };
    sc.faults.push(Fault { at_ms: 0, at_us: crash_us, kind: FaultKind::Crash { node: dead.0, for_ms: 0, at: None } });
    let (h, sim) = run::<P>(sc);
    let crash_at = crash_us;
    let mut out = LossReport::default();
    for r in &h.ops {
        if names_lost(r) {
            out.in_flight_at_crash += usize::from(is_txn(r) && r.invoke_us < crash_at && r.complete_us >= crash_at);
            continue;
        }
        out.reads_checked += usize::from(matches!(r.op, Op::Get { .. } | Op::Rot { .. }));
        let deadline = r.invoke_us.max(crash_at) + bound_us;
        let unfinished = matches!(&r.result, OpResult::Failed(e) if e.is_unfinished());
        if unfinished || r.complete_us > deadline {
            out.late.push(format!(
                "{:?} in DC{} invoked at {} µs: {:?} after {} µs",
                r.op.kind(),
                r.dc.0,
                r.invoke_us,
                r.result,
                r.complete_us - r.invoke_us
            ));
        }
    }
    let cfg = if P::CAUSAL {
        CheckConfig::at(Level::CausalPlus).quiescent_after(QUIET_US)
    } else {
        // The eventual baseline's transactions are parallel writes, which
        // the checker's model (a transaction is one event) does not
        // describe: only thin-air reads are judged (as torture does).
        CheckConfig::at(Level::Eventual)
    };
    let report = check(&h, &cfg);
    if !report.passed {
        out.check_failure = Some(report.to_string());
    }
    (out, sim)
}

/// The network [`permanent_loss_during_commit`] runs on, as a liveness
/// bound sees it ([`base`]'s: 40 ms between DCs, 200 µs one way inside
/// one, 5 % jitter, no clock skew).
pub const LOSS_LIVENESS_ENV: causeway_core::LivenessEnv =
    causeway_core::LivenessEnv { max_rtt_us: 42_000, intra_dc_rtt_us: 420, max_clock_skew_us: 0 };
