//! The fast checker against a brute-force oracle (tests/common/oracle.rs) on
//! random histories and real simulator runs, and property tests: histories
//! generated from a sequential causal+ model always pass.

mod common;

use bytes::Bytes;
use causeway_check::{CheckConfig, CheckReport, Kind, Level, check};
use causeway_core::{DcId, History, Key, Op, Topology, TopologySpec, tagged_value};
use causeway_protocols::eventual::Eventual;
use causeway_sim::{Fault, FaultKind, Scenario, ScriptedClient, ScriptedOp, Sim};
use common::H;
use common::oracle::{Verdict, oracle};
use proptest::prelude::*;

/// The checker's counts in the oracle's terms.
fn verdict(r: &CheckReport) -> Verdict {
    Verdict {
        cc: r.count(Kind::WriteCoRead) + r.count(Kind::WriteCoInitRead),
        ryw: r.count(Kind::ReadYourWrites),
        mr: r.count(Kind::MonotonicReads),
        mw: r.count(Kind::MonotonicWrites),
        wfr: r.count(Kind::WritesFollowReads),
        rot: r.count(Kind::RotSnapshot),
        fractured: r.count(Kind::FracturedRead),
        ccv_cycle: r.count(Kind::CyclicArbitration) > 0,
        co_cycle: r.count(Kind::CyclicCausalOrder) > 0,
    }
}

fn agree(h: &History) -> Verdict {
    let r = check(h, &CheckConfig { max_reported: 0, ..CheckConfig::at(Level::CausalPlus) });
    let got = verdict(&r);
    let want = oracle(h);
    assert_eq!(got, want, "checker (left) and oracle (right) disagree on {} ops", h.ops.len());
    got
}

fn eventual_run(seed: u64, records: u64, rots: f64) -> History {
    let mut sc = Scenario::new(TopologySpec::full(3, 4), 250);
    sc.seed = seed;
    sc.network.default_rtt_ms = 40.0;
    sc.network.intra_dc_us = 200;
    sc.network.jitter_pct = 5.0;
    sc.record_history = true;
    sc.workload.clients_per_dc = 4;
    sc.workload.recordcount = records;
    sc.workload.rotproportion = rots;
    sc.workload.rot_size = 3;
    sc.clocks.skew_us = 2_000;
    sc.faults.push(Fault { at_ms: 100, at_us: 0, kind: FaultKind::Cut { a: 0, b: 2 } });
    sc.faults.push(Fault { at_ms: 200, at_us: 0, kind: FaultKind::Heal { a: 0, b: 2 } });
    sc.faults.push(Fault { at_ms: 60, at_us: 0, kind: FaultKind::Spike { a: 1, b: 2, extra_ms: 50, for_ms: 100 } });
    // A scripted photo-then-album pair on top: a DC0 writer alternates keys of
    // two partitions, the first partition's replication to DC1 is slow, and a
    // DC1 reader reads the pairs back with a ROT and two gets.
    let t = Topology::new(sc.topology.clone()).unwrap();
    let on = |p: u32| -> Vec<Key> {
        (0..).map(|i| Bytes::from(format!("pair{i}"))).filter(|k| t.partition_of(k).0 == p).take(40).collect()
    };
    let (first, second) = (on(0), on(1));
    let from = t.server_for_key(DcId(0), &first[0]).unwrap();
    let to = t.server_for_key(DcId(1), &first[0]).unwrap();
    sc.faults.push(Fault { at_ms: 0, at_us: 0, kind: FaultKind::SlowLink { from: from.0, to: to.0, extra_ms: 60 } });
    let op = |at_us, op| ScriptedOp { at_us, op, from_dc: None, checking_group: None };
    let mut writer = Vec::new();
    let mut reader = Vec::new();
    for (i, (a, b)) in first.iter().zip(&second).enumerate() {
        let i = i as u64;
        writer.push(op(5_000 * i, Op::Put { key: a.clone(), value: tagged_value(1_000_000 + 2 * i, 16) }));
        writer.push(op(0, Op::Put { key: b.clone(), value: tagged_value(1_000_001 + 2 * i, 16) }));
        reader.push(op(5_000 * i + 40_000, Op::Rot { keys: vec![a.clone(), b.clone()] }));
        reader.push(op(0, Op::Get { key: b.clone() }));
        reader.push(op(0, Op::Get { key: a.clone() }));
    }
    sc.scripted.push(ScriptedClient { dc: 0, ops: writer });
    sc.scripted.push(ScriptedClient { dc: 1, ops: reader });
    let mut sim = Sim::<Eventual>::new(sc).unwrap();
    sim.run();
    sim.take_history().unwrap()
}

#[test]
fn checker_matches_oracle_on_simulated_eventual_runs() {
    let mut total = Verdict::default();
    for (seed, records, rots) in [(7, 1_000, 0.0), (8, 300, 0.2), (9, 50, 0.1)] {
        let v = agree(&eventual_run(seed, records, rots));
        total.cc += v.cc;
        total.rot += v.rot;
        total.mw += v.mw;
        total.wfr += v.wfr;
        total.ccv_cycle |= v.ccv_cycle;
    }
    // The runs must exercise the checks, or agreeing proves little.
    assert!(total.cc > 0 && total.rot > 0 && total.mw > 0 && total.ccv_cycle, "{total:?}");
}

/// A random history: each read returns ∅ or any write of its key made
/// earlier in generation order (so co stays acyclic), anomalies included.
fn random_history(steps: &[(u8, u8, u8, u8)]) -> History {
    let keys = ["a", "b", "c"];
    let mut h = H::new();
    let mut written: Vec<Vec<u64>> = vec![Vec::new(); keys.len()];
    let mut next = 1u64;
    for &(client, kind, key, pick) in steps {
        let c = (client % 4) as u32;
        let k = (key % 3) as usize;
        let pick_of = |ws: &Vec<u64>, p: u8| -> Option<u64> {
            let i = p as usize % (ws.len() + 1);
            (i < ws.len()).then(|| ws[i])
        };
        match kind % 7 {
            0 | 1 => {
                h.put(c, keys[k], next);
                written[k].push(next);
                next += 1;
            }
            5 => {
                let k2 = (k + 1 + pick as usize % 2) % 3;
                h.wot(c, &[(keys[k], next), (keys[k2], next + 1)]);
                written[k].push(next);
                written[k2].push(next + 1);
                next += 2;
            }
            2 | 3 => {
                h.get(c, keys[k], pick_of(&written[k], pick));
            }
            4 => {
                let k2 = (k + 1) % 3;
                h.rot(c, &[(keys[k], pick_of(&written[k], pick)), (keys[k2], pick_of(&written[k2], pick / 3))]);
            }
            6 => {
                // Read k and k2, then write k2 and k3.
                let (k2, k3) = ((k + 1) % 3, (k + 2) % 3);
                h.txn(
                    c,
                    &[(keys[k], pick_of(&written[k], pick)), (keys[k2], pick_of(&written[k2], pick / 3))],
                    &[(keys[k2], next), (keys[k3], next + 1)],
                );
                written[k2].push(next);
                written[k3].push(next + 1);
                next += 2;
            }
            _ => unreachable!("kind % 7"),
        }
    }
    h.history()
}

/// The sequential causal+ model: each session knows a causally closed set of
/// writes; before an operation it may merge in another write's causal
/// closure; a read returns the generation-latest write of its key it knows.
fn causal_history(steps: &[(u8, u8, u8, u8)]) -> (History, u64) {
    use std::collections::BTreeSet;
    let keys = ["a", "b", "c", "d"];
    let sessions = 4usize;
    let mut h = H::new();
    let mut known: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); sessions];
    // Per write: (key, id, causal closure including itself).
    let mut writes: Vec<(usize, u64, BTreeSet<usize>)> = Vec::new();
    let latest = |known: &BTreeSet<usize>, writes: &Vec<(usize, u64, BTreeSet<usize>)>, k: usize| {
        known.iter().rev().map(|&w| &writes[w]).find(|w| w.0 == k).map(|w| w.1)
    };
    for &(client, kind, key, merge) in steps {
        let s = client as usize % sessions;
        let k = key as usize % keys.len();
        if !writes.is_empty() && merge % 2 == 0 {
            let w = merge as usize % writes.len();
            let closure = writes[w].2.clone();
            known[s].extend(closure);
        }
        match kind % 5 {
            0 => {
                let id = writes.len() as u64 + 1;
                let mut closure = known[s].clone();
                closure.insert(writes.len());
                known[s].insert(writes.len());
                writes.push((k, id, closure));
                h.put(s as u32, keys[k], id);
            }
            3 => {
                // A write-only transaction: two writes with one closure, so
                // whoever knows one knows both.
                let (first, k2) = (writes.len(), (k + 1) % keys.len());
                let mut closure = known[s].clone();
                closure.extend([first, first + 1]);
                known[s].extend([first, first + 1]);
                writes.push((k, first as u64 + 1, closure.clone()));
                writes.push((k2, first as u64 + 2, closure));
                h.wot(s as u32, &[(keys[k], first as u64 + 1), (keys[k2], first as u64 + 2)]);
            }
            1 => {
                h.get(s as u32, keys[k], latest(&known[s], &writes, k));
            }
            2 => {
                let ks = [k, (k + 1) % keys.len(), (k + 2) % keys.len()];
                let reads: Vec<(&str, Option<u64>)> =
                    ks.iter().map(|&k| (keys[k], latest(&known[s], &writes, k))).collect();
                h.rot(s as u32, &reads);
            }
            4 => {
                // A read-write transaction: read two keys, then write the
                // second and a third as one event.
                let (k2, k3) = ((k + 1) % keys.len(), (k + 2) % keys.len());
                let reads: Vec<(&str, Option<u64>)> =
                    [k, k2].iter().map(|&k| (keys[k], latest(&known[s], &writes, k))).collect();
                let first = writes.len();
                let mut closure = known[s].clone();
                closure.extend([first, first + 1]);
                known[s].extend([first, first + 1]);
                writes.push((k2, first as u64 + 1, closure.clone()));
                writes.push((k3, first as u64 + 2, closure));
                h.txn(s as u32, &reads, &[(keys[k2], first as u64 + 1), (keys[k3], first as u64 + 2)]);
            }
            _ => unreachable!("kind % 5"),
        }
    }
    // Quiescence: everyone learns everything, then reads every key.
    let t = h.now() + 1_000;
    h.wait_until(t);
    for s in 0..sessions {
        for (k, name) in keys.iter().enumerate() {
            let all: BTreeSet<usize> = (0..writes.len()).collect();
            h.get(s as u32, name, latest(&all, &writes, k));
        }
    }
    (h.history(), t)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn checker_matches_oracle_on_random_histories(steps in prop::collection::vec(any::<(u8, u8, u8, u8)>(), 1..60)) {
        let h = random_history(&steps);
        let r = check(&h, &CheckConfig { max_reported: 0, ..CheckConfig::at(Level::CausalPlus) });
        prop_assert_eq!(verdict(&r), oracle(&h));
    }

    #[test]
    fn histories_of_the_causal_model_pass(steps in prop::collection::vec(any::<(u8, u8, u8, u8)>(), 1..80)) {
        let (h, t) = causal_history(&steps);
        let r = check(&h, &CheckConfig::at(Level::CausalPlus).quiescent_after(t));
        prop_assert!(r.passed, "{}", r);
        prop_assert!(r.failed_kinds().is_empty(), "{}", r);
    }
}

/// The random generator does produce violations, so the agreement above is
/// not vacuous.
#[test]
fn random_histories_do_violate() {
    let steps: Vec<(u8, u8, u8, u8)> =
        (0..60u32).map(|i| ((i * 7 % 11) as u8, (i * 3 % 5) as u8, (i % 3) as u8, (i * 13 % 17) as u8)).collect();
    let v = agree(&random_history(&steps));
    assert!(v.cc > 0, "{v:?}");
}
