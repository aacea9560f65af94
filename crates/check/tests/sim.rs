//! The checker on histories the simulator really produced: Eventual (not
//! causal) must be caught under the scripted anomaly scenarios and under a
//! randomized faulty run, and must pass where it is in fact consistent (one
//! DC: every key has one replica, so the run is linearizable).

use bytes::Bytes;
use causeway_check::{CheckConfig, Kind, Level, Violation, check};
use causeway_core::{DcId, History, Key, Op, Topology, TopologySpec, tagged_value};
use causeway_protocols::eventual::Eventual;
use causeway_sim::{Fault, FaultKind, Scenario, ScriptedClient, ScriptedOp, Sim};

/// Two keys named from the prefixes that land on different partitions.
fn keys_on_different_partitions(t: &Topology, a: &str, b: &str) -> (Key, Key) {
    (0..1000)
        .map(|i| (Bytes::from(format!("{a}{i}")), Bytes::from(format!("{b}{i}"))))
        .find(|(ka, kb)| t.partition_of(ka) != t.partition_of(kb))
        .expect("a split exists")
}

fn base(dcs: u16, partitions: u32, duration_ms: u64, seed: u64) -> Scenario {
    let mut sc = Scenario::new(TopologySpec::full(dcs, partitions), duration_ms);
    sc.seed = seed;
    sc.network.default_rtt_ms = 40.0;
    sc.network.intra_dc_us = 200;
    sc.network.jitter_pct = 5.0;
    sc.record_history = true;
    sc
}

fn run(sc: Scenario) -> History {
    let mut sim = Sim::<Eventual>::new(sc).expect("valid scenario");
    sim.run();
    sim.take_history().expect("history recorded")
}

fn put(at_us: u64, key: &Key, value: &Bytes) -> ScriptedOp {
    ScriptedOp { at_us, op: Op::Put { key: key.clone(), value: value.clone() }, from_dc: None, checking_group: None }
}
fn get(at_us: u64, key: &Key) -> ScriptedOp {
    ScriptedOp { at_us, op: Op::Get { key: key.clone() }, from_dc: None, checking_group: None }
}

/// crates/sim/tests/common: photo-then-album with a slow photo replication link.
fn photo_then_album(seed: u64) -> (History, Key) {
    let mut sc = base(2, 4, 1_500, seed);
    let t = Topology::new(sc.topology.clone()).unwrap();
    let (photo, album) = keys_on_different_partitions(&t, "photo", "album");
    let from = t.server_for_key(DcId(0), &photo).unwrap();
    let to = t.server_for_key(DcId(1), &photo).unwrap();
    sc.faults.push(Fault { at_ms: 0, at_us: 0, kind: FaultKind::SlowLink { from: from.0, to: to.0, extra_ms: 300 } });
    sc.scripted.push(ScriptedClient {
        dc: 0,
        ops: vec![put(1_000, &photo, &tagged_value(1, 16)), put(0, &album, &tagged_value(2, 16))],
    });
    let mut reader = Vec::new();
    for i in 0..300 {
        reader.push(get(1_000 + i * 3_000, &album));
        reader.push(get(0, &photo));
    }
    sc.scripted.push(ScriptedClient { dc: 1, ops: reader });
    (run(sc), photo)
}

/// crates/sim/tests/common: the ACL/album ROT with a slow ACL replication link.
fn acl_album_rot(seed: u64) -> History {
    let mut sc = base(2, 4, 2_500, seed);
    let t = Topology::new(sc.topology.clone()).unwrap();
    let (acl, album) = keys_on_different_partitions(&t, "acl", "album");
    let from = t.server_for_key(DcId(0), &acl).unwrap();
    let to = t.server_for_key(DcId(1), &acl).unwrap();
    sc.faults.push(Fault { at_ms: 500, at_us: 0, kind: FaultKind::SlowLink { from: from.0, to: to.0, extra_ms: 300 } });
    let v = |id| tagged_value(id, 16);
    sc.scripted.push(ScriptedClient {
        dc: 0,
        ops: vec![put(1_000, &acl, &v(10)), put(0, &album, &v(11)), put(600_000, &acl, &v(12)), put(0, &album, &v(13))],
    });
    let reader = (0..400)
        .map(|i| ScriptedOp {
            at_us: 550_000 + i * 3_000,
            op: Op::Rot { keys: vec![acl.clone(), album.clone()] },
            from_dc: None,
            checking_group: None,
        })
        .collect();
    sc.scripted.push(ScriptedClient { dc: 1, ops: reader });
    run(sc)
}

#[test]
fn eventual_photo_then_album_is_flagged_as_a_causal_violation() {
    let (h, photo) = photo_then_album(1);
    let r = check(&h, &CheckConfig::at(Level::CausalPlus));
    assert!(!r.passed, "{r}");
    assert!(r.count(Kind::WriteCoInitRead) > 0, "{r}");
    assert!(r.count(Kind::MonotonicWrites) > 0, "{r}");
    let photo = String::from_utf8(photo.to_vec()).unwrap();
    let Violation::WriteCoInitRead { key, write, read, seen } = r.of_kind(Kind::WriteCoInitRead).next().unwrap() else {
        panic!()
    };
    assert_eq!(key, &photo);
    assert_eq!(
        write.index,
        h.ops.iter().position(|o| matches!(&o.op, Op::Put { key, .. } if **key == *photo.as_bytes())).unwrap()
    );
    assert_eq!(read.dc, DcId(1));
    assert_eq!(seen.hops.len(), 3, "photo, then album, read by the reader, then its photo read: {seen}");
    // Eventual promises only eventual consistency, and it keeps that promise.
    assert!(check(&h, &CheckConfig::at(Level::Eventual)).passed);
}

#[test]
fn eventual_multi_get_rot_is_not_a_snapshot() {
    let h = acl_album_rot(1);
    let r = check(&h, &CheckConfig::at(Level::Causal));
    assert!(r.count(Kind::RotSnapshot) > 0, "{r}");
    let v = r.of_kind(Kind::RotSnapshot).next().unwrap().to_string();
    assert!(v.contains("w10") && v.contains("w13") && v.contains("w12"), "{v}");
}

/// A writer in dc0 writes x and y in one transaction (`write`); a reader in
/// dc1 repeats `read`, while the link carrying y's replica to dc1 is slow.
fn slow_y(seed: u64, write: impl Fn(&Key, &Key) -> Op, read: impl Fn(&Key, &Key) -> Op) -> History {
    let mut sc = base(2, 4, 1_500, seed);
    let t = Topology::new(sc.topology.clone()).unwrap();
    let (x, y) = keys_on_different_partitions(&t, "x", "y");
    let from = t.server_for_key(DcId(0), &y).unwrap();
    let to = t.server_for_key(DcId(1), &y).unwrap();
    sc.faults.push(Fault { at_ms: 0, at_us: 0, kind: FaultKind::SlowLink { from: from.0, to: to.0, extra_ms: 300 } });
    sc.scripted.push(ScriptedClient {
        dc: 0,
        ops: vec![ScriptedOp { at_us: 1_000, op: write(&x, &y), from_dc: None, checking_group: None }],
    });
    let reader = (0..300).map(|i| ScriptedOp {
        at_us: 1_000 + i * 3_000,
        op: read(&x, &y),
        from_dc: None,
        checking_group: None,
    });
    sc.scripted.push(ScriptedClient { dc: 1, ops: reader.collect() });
    run(sc)
}

fn first_fractured(h: &History) -> String {
    let r = check(h, &CheckConfig::at(Level::Causal));
    assert!(r.count(Kind::FracturedRead) > 0, "{r}");
    r.of_kind(Kind::FracturedRead).next().unwrap().to_string()
}

/// Eventual's write-only transaction is parallel puts: a remote ROT sees the
/// new x and the old y.
#[test]
fn eventual_wot_is_caught_as_fractured() {
    let v = |id| tagged_value(id, 16);
    let h = slow_y(
        5,
        |x, y| Op::Wot { writes: vec![(x.clone(), v(1)), (y.clone(), v(2))] },
        |x, y| Op::Rot { keys: vec![x.clone(), y.clone()] },
    );
    let text = first_fractured(&h);
    assert!(text.contains("read y0=∅ (op #8 at 22.000 ms) in a transaction that read another key from the transaction wot {x0=w1, y0=w2}"), "{text}");
    // Not required of an eventual protocol, but shown.
    assert!(check(&h, &CheckConfig::at(Level::Eventual)).passed);
}

/// The same with Eventual's read-write transaction, which reads without a
/// snapshot and writes without atomicity.
#[test]
fn eventual_read_write_transaction_is_caught_as_fractured() {
    let v = |id| tagged_value(id, 16);
    let h = slow_y(
        6,
        |x, y| Op::Txn { reads: vec![x.clone()], writes: vec![(x.clone(), v(1)), (y.clone(), v(2))] },
        |x, y| Op::Txn { reads: vec![x.clone(), y.clone()], writes: vec![] },
    );
    let text = first_fractured(&h);
    assert!(text.contains("wrote {x0=w1, y0=w2}") && text.contains("read y0=∅"), "{text}");
}

/// A loaded run with skew, drift, a partition, a pause and a latency spike
/// (the simulator's own determinism scenario).
fn faulty(seed: u64, rots: f64) -> Scenario {
    let mut sc = base(3, 4, 400, seed);
    sc.workload.clients_per_dc = 16;
    // Enough keys that values live long enough to be causally overwritten
    // while a partition holds the overwrite back (with 100 keys, blind
    // writes overwrite every key every few ms and few anomalies show).
    sc.workload.recordcount = 1_000;
    sc.workload.rotproportion = rots;
    sc.clocks.skew_us = 3_000;
    sc.clocks.drift_ppm = 50.0;
    sc.faults.push(Fault { at_ms: 100, at_us: 0, kind: FaultKind::Cut { a: 0, b: 2 } });
    sc.faults.push(Fault { at_ms: 200, at_us: 0, kind: FaultKind::Heal { a: 0, b: 2 } });
    sc.faults.push(Fault { at_ms: 150, at_us: 0, kind: FaultKind::Pause { node: 1, for_ms: 30 } });
    sc.faults.push(Fault { at_ms: 120, at_us: 0, kind: FaultKind::Spike { a: 1, b: 2, extra_ms: 50, for_ms: 100 } });
    sc
}

#[test]
fn randomized_faulty_eventual_run_is_flagged() {
    let h = run(faulty(7, 0.1));
    assert!(h.ops.len() > 5_000, "a busy run: {} ops", h.ops.len());
    let r = check(&h, &CheckConfig::at(Level::CausalPlus));
    assert!(!r.passed, "{r}");
    assert!(r.invalid.is_none());
    // It is not causal in many ways at once.
    for k in [Kind::WriteCoRead, Kind::CyclicArbitration, Kind::RotSnapshot, Kind::WritesFollowReads] {
        assert!(r.count(k) > 0, "expected {k} violations:\n{r}");
    }
    assert_eq!(r.count(Kind::ThinAirRead) + r.count(Kind::CyclicCausalOrder), 0, "{r}");
    // Every listed violation is explained in words that name its ops, and a
    // causal path never takes an arbitration step (only arbitration cycles do).
    for v in &r.violations {
        let text = v.to_string();
        assert!(text.contains(&format!("#{}", v.primary_op())), "{v}");
        if v.kind() != Kind::CyclicArbitration {
            assert!(!text.contains("must be arbitrated before"), "{v}");
            let json = serde_json::to_string(v).unwrap();
            assert!(!json.contains("\"arbitration\""), "{json}");
        }
    }
}

/// Few keys, so readers often meet a multi-key write's keys, and jitter,
/// so that a ROT's per-server reads and a WOT's or batch's per-server
/// writes (all sent at once) arrive at their servers in different orders.
fn crowded(mut sc: Scenario) -> Scenario {
    sc.workload.recordcount = 12;
    sc.network.jitter_pct = 30.0;
    sc
}

#[test]
fn randomized_faulty_eventual_run_with_write_transactions_has_fractured_reads() {
    let mut sc = crowded(faulty(9, 0.1));
    sc.workload.wotproportion = 0.1;
    sc.workload.wot_size = 3;
    let h = run(sc);
    assert!(h.ops.iter().any(|o| matches!(o.op, Op::Wot { .. })));
    let r = check(&h, &CheckConfig::at(Level::CausalPlus));
    assert!(r.count(Kind::FracturedRead) > 0, "{r}");
    assert_eq!(r.count(Kind::ThinAirRead) + r.count(Kind::CyclicCausalOrder), 0, "{r}");
}

/// Read-write transactions from the simulator: the model takes them (no
/// shape errors), and the baseline's snapshot-less ones break snapshots,
/// which the checker finds.
#[test]
fn randomized_eventual_run_with_read_write_transactions_is_checked() {
    let mut sc = faulty(9, 0.0);
    sc.workload.txnproportion = 0.2;
    sc.workload.txn_reads = 3;
    sc.workload.txn_writes = 2;
    sc.workload.recordcount = 1_000;
    let h = run(sc);
    let txns = h.ops.iter().filter(|o| matches!(o.op, Op::Txn { .. })).count();
    assert!(txns > 1_000, "{txns} transactions");
    let r = check(&h, &CheckConfig::at(Level::CausalPlus));
    assert!(r.invalid.is_none(), "{r}");
    assert_eq!(r.stats.txns, txns);
    assert!(r.count(Kind::WriteCoRead) > 0 && r.count(Kind::RotSnapshot) > 0, "{r}");
    assert_eq!(r.count(Kind::ThinAirRead) + r.count(Kind::CyclicCausalOrder), 0, "{r}");
}

#[test]
fn single_dc_eventual_is_linearizable_and_passes_causal_plus() {
    // One DC: one replica per key, so last-writer-wins at that replica is a
    // linearizable register; the whole run is causal+ and converges.
    let mut sc = base(1, 4, 300, 3);
    sc.workload.clients_per_dc = 24;
    sc.workload.recordcount = 20;
    sc.drain_ms = 100;
    let h = run(sc);
    assert!(h.ops.len() > 5_000, "{} ops", h.ops.len());
    let last = h.ops.iter().map(|o| o.complete_us).max().unwrap();
    let r = check(&h, &CheckConfig::at(Level::CausalPlus).quiescent_after(last + 1));
    assert!(r.passed, "{r}");
    assert!(r.failed_kinds().is_empty(), "{r}");
}

#[test]
fn eventual_converges_after_quiescence() {
    let mut sc = base(3, 4, 2_000, 2);
    sc.workload.clients_per_dc = 8;
    sc.workload.recordcount = 5;
    sc.workload.readproportion = 0.2;
    sc.workload.updateproportion = 0.8;
    sc.drain_ms = 3_000;
    let keys: Vec<Key> = (0..5).map(|i| Bytes::from(format!("user{i}"))).collect();
    for dc in 0..3 {
        sc.scripted.push(ScriptedClient {
            dc,
            ops: keys.iter().enumerate().map(|(i, k)| get(if i == 0 { 4_000_000 } else { 0 }, k)).collect(),
        });
    }
    let h = run(sc);
    let r = check(&h, &CheckConfig::at(Level::Eventual).quiescent_after(4_000_000));
    assert!(r.passed, "{r}");
    assert_eq!(r.count(Kind::Divergence) + r.count(Kind::NotEventuallyVisible), 0);

    // Take the quiescence time too early and the premise is rejected, not ignored.
    let early = check(&h, &CheckConfig::at(Level::Eventual).quiescent_after(1_000_000));
    assert!(
        early
            .checks
            .iter()
            .any(|c| matches!(&c.status, causeway_check::Status::Skipped { reason } if reason.contains("in flight")))
    );
}

#[test]
fn eventual_under_skew_loses_a_causally_later_write_which_only_causal_levels_flag() {
    // Last-writer-wins on skewed physical clocks: a DC0 client writes x, a
    // DC1 client whose server clock is 150 ms behind reads it and overwrites
    // x. The overwrite gets the smaller timestamp and loses everywhere, so
    // after quiescence every DC shows the causally older value.
    let mut sc = base(2, 1, 500, 5);
    sc.drain_ms = 1_000;
    let t = Topology::new(sc.topology.clone()).unwrap();
    let x = Bytes::from_static(b"x");
    let slow = t.server_for_key(DcId(1), &x).unwrap();
    sc.clocks.node.push(causeway_sim::scenario::NodeClock {
        node: slow.0,
        offset_us: -150_000,
        drift_ppm: 0.0,
        jumps: vec![],
    });
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![put(100_000, &x, &tagged_value(1, 16))] });
    sc.scripted.push(ScriptedClient { dc: 1, ops: vec![get(200_000, &x), put(0, &x, &tagged_value(2, 16))] });
    for dc in 0..2 {
        sc.scripted.push(ScriptedClient { dc, ops: vec![get(1_000_000, &x)] });
    }
    let h = run(sc);
    // Eventual consistency allows it: every DC converged on w1, and w2 lost
    // arbitration (a converged last-writer-wins history under skew has no
    // write that is "never visible").
    let r = check(&h, &CheckConfig::at(Level::Eventual).quiescent_after(1_000_000));
    assert!(r.passed, "{r}");
    assert!(r.failed_kinds().is_empty(), "{r}");
    // Causal+ does not: its arbitration must extend the causal order.
    let r = check(&h, &CheckConfig::at(Level::CausalPlus).quiescent_after(1_000_000));
    assert_eq!(r.failed_kinds(), vec![Kind::NotEventuallyVisible], "{r}");
    let v = r.violations[0].to_string();
    assert!(v.contains("x=w1") && v.contains("acknowledged write x=w2"), "{v}");
}

/// Eiger's non-atomic batches from the simulator, under a partition, a
/// pause and skew: the history (each batch recorded as puts that fork and
/// join their session) is causal; and the same history with each batch
/// read as one write-only transaction is not, so readers did see batches
/// in part and the fork-join model is what let it pass.
#[test]
fn randomized_faulty_eiger_run_with_batches_is_causal_and_sees_batches_in_part() {
    use causeway_core::{OpRecord, OpResult};
    use causeway_protocols::explicit_deps::eiger::Eiger;
    let mut sc = crowded(faulty(11, 0.2));
    sc.workload.batchproportion = 0.2;
    sc.workload.wot_size = 2;
    sc.workload.rot_size = 2;
    let mut sim = Sim::<Eiger>::new(sc).expect("valid scenario");
    sim.run();
    let h = sim.take_history().expect("history recorded");
    let batches = h.ops.iter().filter(|o| o.batch.is_some()).count();
    assert!(batches > 1_000, "{batches} batch writes");
    let r = check(&h, &CheckConfig::at(Level::CausalPlus));
    assert!(r.passed, "{r}");
    // Each acknowledged batch as one WOT.
    let mut as_wots = History { protocol: h.protocol.clone(), ops: Vec::new() };
    let mut at: std::collections::HashMap<(causeway_core::ClientId, u64), usize> = Default::default();
    for o in &h.ops {
        match (o.batch, &o.op, &o.result) {
            (Some(b), Op::Put { key, value }, OpResult::Put) => {
                let i = *at.entry((o.client, b)).or_insert_with(|| {
                    as_wots.ops.push(OpRecord {
                        op: Op::Wot { writes: Vec::new() },
                        result: OpResult::Wot,
                        batch: None,
                        ..o.clone()
                    });
                    as_wots.ops.len() - 1
                });
                let Op::Wot { writes } = &mut as_wots.ops[i].op else { unreachable!() };
                writes.push((key.clone(), value.clone()));
            }
            (Some(_), _, _) => {} // a failed batch write: left out
            _ => as_wots.ops.push(o.clone()),
        }
    }
    // Read as transactions, a batch seen in part is a fractured read, or
    // (when the older value read is concurrent with the batch rather than
    // before it) a cycle of the arbitration order the transaction's one
    // place in it would need.
    let r = check(&as_wots, &CheckConfig::at(Level::CausalPlus));
    let partial = r.count(Kind::FracturedRead) + r.count(Kind::CyclicArbitration);
    assert!(!r.passed && partial > 0, "no reader saw a batch in part:\n{r}");
}

/// Eiger with several columns per key (Lloyd's Table 7.5): every read a
/// read-only transaction over 3 columns of each row, writes of 2 columns
/// per row as batches (one request per row) and as write-only transactions
/// (rows shipped one message each), under a partition, a pause and skew.
/// The history, every column a key of its own to the checker, is causal+.
#[test]
fn randomized_faulty_eiger_run_with_columns_is_causal() {
    use causeway_protocols::explicit_deps::eiger::Eiger;
    let mut sc = crowded(faulty(13, 0.3));
    sc.workload.wotproportion = 0.2;
    sc.workload.wot_size = 2;
    sc.workload.rot_size = 2;
    sc.workload.columns_per_read = 3;
    sc.workload.columns_per_write = 2;
    // The same run on the baseline is caught: the checker sees the columns.
    let r = check(&run(sc.clone()), &CheckConfig::at(Level::CausalPlus));
    assert!(r.count(Kind::FracturedRead) > 0, "{r}");
    let mut sim = Sim::<Eiger>::new(sc).expect("valid scenario");
    sim.run();
    let h = sim.take_history().expect("history recorded");
    let columns =
        |keys: &mut dyn Iterator<Item = &Key>| keys.filter(|k| causeway_core::column::is_location_key(k)).count();
    let wots = h
        .ops
        .iter()
        .filter(|o| matches!(&o.op, Op::Wot { writes } if columns(&mut writes.iter().map(|(k, _)| k)) == 2))
        .count();
    let rots = h.ops.iter().filter(|o| matches!(&o.op, Op::Rot { keys } if columns(&mut keys.iter()) == 4)).count();
    assert!(wots > 100 && rots > 1_000, "{wots} WOTs and {rots} ROTs over several columns");
    assert!(h.ops.iter().any(|o| o.batch.is_some()), "updates of a row's columns are batches");
    let r = check(&h, &CheckConfig::at(Level::CausalPlus));
    assert!(r.passed, "{r}");
}

/// Interactive transactions from the simulator (PaRiS): each is recorded as
/// one read-write transaction whose rounds read one snapshot, and the
/// history passes causal+; with the broken variant whose later rounds read
/// a fresher snapshot than START fixed, the checker finds the rounds
/// disagree (a fractured or non-snapshot read).
#[test]
fn interactive_transactions_are_judged_as_one_snapshot() {
    use causeway_protocols::paris::Paris;
    let scenario = |mutant: bool| {
        let mut sc = base(3, 4, 3_000, 5);
        sc.workload.clients_per_dc = 8;
        sc.workload.recordcount = 12;
        sc.workload.readproportion = 0.2;
        sc.workload.updateproportion = 0.1;
        sc.workload.txnproportion = 0.3;
        sc.workload.interactiveproportion = 0.4;
        sc.workload.txn_reads = 4;
        sc.workload.txn_writes = 2;
        sc.workload.interactive_think_us = 10_000;
        if mutant {
            sc.protocol.insert("mutant_fresh_snapshot_per_step".into(), true.into());
        }
        let mut sim = Sim::<Paris>::new(sc).expect("valid scenario");
        let report = sim.run();
        (sim.take_history().expect("history recorded"), report)
    };
    let (h, report) = scenario(false);
    assert!(!h.ops.iter().any(|o| o.op.kind() == causeway_core::OpKind::Interactive), "steps never reach a history");
    let interactive = report.latency.get("interactive").map_or(0, |l| l.count);
    assert!(interactive > 200, "{interactive} interactive transactions completed");
    let r = check(&h, &CheckConfig::at(Level::CausalPlus));
    assert!(r.passed, "{r}");
    let (h, _) = scenario(true);
    let r = check(&h, &CheckConfig::at(Level::CausalPlus));
    assert!(!r.passed, "rounds at two snapshots pass the checker");
    assert!(r.count(Kind::FracturedRead) + r.count(Kind::RotSnapshot) > 0, "{r}");
}

/// NuKV (`scenarios/nukv.toml`: 2 DCs, groups of three) with every GET's
/// and PUT's session levels drawn at random and followers paused so reads
/// meet lagging replicas: the history carries each operation's levels and
/// passes the sessions level, read by read. (Reads that break their own
/// level are caught in `levels.rs`'s hand-built histories; this run's
/// pauses did not make `mutant_skip_get_wait` return a stale value, so it
/// is no mutant test.)
#[test]
fn nukv_with_random_per_operation_levels_is_held_to_each_reads_own() {
    use causeway_protocols::nukv::Nukv;
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/nukv.toml")).unwrap();
    let run = || {
        let mut sc = Scenario::from_toml_str(&text, "nukv.toml").unwrap();
        sc.duration_ms = 2_500;
        sc.warmup_ms = 0;
        sc.record_history = true;
        sc.workload.random_levels = true;
        sc.workload.recordcount = 50;
        for (at_ms, node) in [(500, 1), (900, 2), (1_300, 5), (1_700, 6)] {
            sc.faults.push(Fault { at_ms, at_us: 0, kind: FaultKind::Pause { node, for_ms: 300 } });
        }
        let mut sim = Sim::<Nukv>::new(sc).expect("valid scenario");
        sim.run();
        sim.take_history().expect("history recorded")
    };
    let h = run();
    assert!(h.ops.len() > 2_000, "a busy run: {} ops", h.ops.len());
    let leveled = h.ops.iter().filter(|r| matches!(r.op, Op::Get { .. } | Op::Put { .. }));
    assert!(leveled.clone().all(|r| r.levels.is_some()), "every GET and PUT names its levels");
    let reads = |l: causeway_core::ReadLevel| leveled.clone().filter(|r| r.levels.unwrap().read == l).count();
    assert!(causeway_core::ReadLevel::ALL.iter().all(|&l| reads(l) > 100), "every read level drawn");
    let r = check(&h, &CheckConfig::at(Level::Sessions));
    assert!(r.passed, "{r}");
}
