//! ACCF's per-request checking group (Roohitavaf, *Consistency for
//! Distributed Data Stores*, Ch. 7, Alg 7.1's `GET(k, cg)`, Alg 7.2), run
//! in the simulator and held to the causal checker. Two DCs of partitions
//! A and B (servers A1, B1 in DC 0; A2, B2 in DC 1) under `per_replica`
//! groupings (the thesis's 2×2: checking group d is DC d's servers); a
//! writer in DC 1 writes b then a, over and over, and B2 → B1 is slow.
//! A session of DC 0 reading only in its home group never waits; one that
//! reads a in DC 1's group first then waits at B1 (line 3) for the b that
//! the new a depends on. Every history stays causal.

use bytes::Bytes;
use causeway_check::{CheckConfig, Level, check};
use causeway_core::{
    CheckingGroupError, DcId, History, Key, Op, OpError, OpRecord, OpResult, PartitionId, Topology, TopologySpec,
    tagged_value,
};
use causeway_protocols::accf::Accf;
use causeway_protocols::causal_spartan_x::CausalSpartanX;
use causeway_sim::{Fault, FaultKind, Scenario, ScenarioError, ScriptedClient, ScriptedOp, Sim};

const RTT_MS: f64 = 40.0;
const SLOW_MS: u64 = 200;
const ROUNDS: u64 = 8;
const ROUND_US: u64 = 150_000;

fn op(at_us: u64, op: Op, checking_group: Option<u16>) -> ScriptedOp {
    ScriptedOp { at_us, op, from_dc: None, checking_group }
}

fn get(at_us: u64, key: &Key, checking_group: Option<u16>) -> ScriptedOp {
    op(at_us, Op::Get { key: key.clone() }, checking_group)
}

/// Keys a (partition 0) and b (partition 1).
fn keys(t: &Topology) -> (Key, Key) {
    let on = |p: u32| {
        (0..1000)
            .map(|i| Bytes::from(format!("k{i}")))
            .find(|k| t.partition_of(k) == PartitionId(p))
            .expect("a key of the partition")
    };
    (on(0), on(1))
}

fn scenario() -> (Scenario, Key, Key) {
    let mut sc = Scenario::new(TopologySpec::full(2, 2), ROUNDS * ROUND_US / 1_000 + 500);
    sc.seed = 7;
    sc.network.default_rtt_ms = RTT_MS;
    sc.network.intra_dc_us = 200;
    sc.record_history = true;
    sc.client_timeout_ms = 15_000;
    sc.drain_ms = 3_000;
    let t = Topology::new(sc.topology.clone()).unwrap();
    let (a, b) = keys(&t);
    let node = |dc: u16, p: u32| t.server(DcId(dc), PartitionId(p)).unwrap().0;
    sc.faults.push(Fault {
        at_ms: 0,
        at_us: 0,
        kind: FaultKind::SlowLink { from: node(1, 1), to: node(0, 1), extra_ms: SLOW_MS },
    });
    (sc, a, b)
}

/// The writer in DC 1, then: c3 (DC 0) reads a in DC 1's group, a at
/// home, b at home, each round; c4 (DC 0) reads a and b at home only;
/// c5 (DC 0) names a group the grouping lacks, then reads at home.
fn run() -> (History, Key, Key) {
    let (mut sc, a, b) = scenario();
    let mut writes = Vec::new();
    for i in 0..ROUNDS {
        let at = 10_000 + i * ROUND_US;
        writes.push(op(at, Op::Put { key: b.clone(), value: tagged_value(2 * i + 1, 16) }, None));
        writes.push(op(0, Op::Put { key: a.clone(), value: tagged_value(2 * i + 2, 16) }, None));
    }
    sc.scripted.push(ScriptedClient { dc: 1, ops: writes });
    let (mut c3, mut c4) = (Vec::new(), Vec::new());
    for i in 0..ROUNDS {
        let at = 100_000 + i * ROUND_US;
        c3.extend([get(at, &a, Some(1)), get(0, &a, None), get(0, &b, None)]);
        c4.extend([get(at, &a, None), get(0, &b, None)]);
    }
    sc.scripted.push(ScriptedClient { dc: 0, ops: c3 });
    sc.scripted.push(ScriptedClient { dc: 0, ops: c4 });
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![get(50_000, &a, Some(2)), get(0, &a, None)] });
    let mut sim = Sim::<Accf>::new(sc).unwrap();
    sim.run();
    (sim.take_history().expect("history recorded"), a, b)
}

fn latency_ms(r: &OpRecord) -> f64 {
    (r.complete_us - r.invoke_us) as f64 / 1_000.0
}

fn key_of(r: &OpRecord) -> &Key {
    match &r.op {
        Op::Get { key } | Op::Put { key, .. } => key,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn reads_in_the_home_group_never_wait_reads_after_another_group_do_and_the_history_is_causal() {
    let (h, _, b) = run();
    let r = check(&h, &CheckConfig::at(Level::CausalPlus));
    assert!(r.passed, "{r}");
    let of = |client: u32| h.ops.iter().filter(move |r| r.client.0 == client).collect::<Vec<_>>();
    // Scripted sessions are numbered in order: the writer, c3, c4, c5.
    let (c3, c4, c5) = (of(1), of(2), of(3));
    assert_eq!(c3.len() as u64, 3 * ROUNDS);
    assert!(c3.iter().chain(&c4).all(|r| matches!(r.result, OpResult::Get(_))));
    // c4 reads in its home group only: every read is a local round trip.
    let slowest = c4.iter().map(|r| latency_ms(r)).fold(0.0, f64::max);
    assert!(slowest < 2.0, "a home-group read took {slowest} ms");
    // c3's reads of a in DC 1's group go to DC 1 (a WAN round trip) and
    // return the newest a; its reads of b at home then wait at B1 for the
    // slow b at least once.
    for r in c3.iter().step_by(3) {
        assert!(latency_ms(r) >= RTT_MS, "{r:?}");
    }
    let waited = c3.iter().filter(|r| *key_of(r) == b && latency_ms(r) >= (SLOW_MS / 2) as f64).count();
    assert!(waited > 0, "no read of b waited: {:?}", c3.iter().map(|r| latency_ms(r)).collect::<Vec<_>>());
    // Round by round, the a c3 reads in DC 1's group is the newest; the a
    // c4 reads at home is never newer, and older while B1 lacks the b it
    // depends on: what the home group's SVV hides (lines 4–5).
    let id = |r: &OpRecord| match &r.result {
        OpResult::Get(v) => v.as_deref().and_then(causeway_core::write_id_of).unwrap_or(0),
        other => panic!("{other:?}"),
    };
    let pairs: Vec<(u64, u64)> = c3.iter().step_by(3).zip(c4.iter().step_by(2)).map(|(x, y)| (id(x), id(y))).collect();
    assert!(pairs.iter().all(|&(x, y)| y <= x), "{pairs:?}");
    assert!(pairs.iter().filter(|&&(x, y)| y < x).count() as u64 >= ROUNDS / 2, "{pairs:?}");
    // c5's group 2 does not exist (two DCs, two groups): refused by name
    // and count, nothing sent; its next read goes on at home.
    assert_eq!(
        c5[0].result,
        OpResult::Failed(OpError::CheckingGroup(CheckingGroupError::OutOfRange { group: 2, groups: 2 }))
    );
    assert_eq!(c5[0].complete_us, c5[0].invoke_us, "refused before anything was sent");
    assert!(matches!(c5[1].result, OpResult::Get(_)));
    // The history records the group each GET named for itself.
    assert_eq!(c5[0].checking_group, Some(2));
    assert_eq!(c5[1].checking_group, None);
    assert!(c4.iter().all(|r| r.checking_group.is_none()), "c4 names none: {c4:?}");
    assert!(c3.iter().step_by(3).all(|r| r.checking_group == Some(1)), "c3 names DC 1's group for a: {c3:?}");
}

/// The workload draws a group for some GETs: a share of the reads go to
/// the other DC (a WAN round trip), and the history stays causal.
#[test]
fn a_workload_drawing_checking_groups_stays_causal() {
    let mut sc = Scenario::new(TopologySpec::full(3, 2), 1_500);
    sc.seed = 11;
    sc.network.default_rtt_ms = RTT_MS;
    sc.record_history = true;
    sc.client_timeout_ms = 15_000;
    sc.workload.clients_per_dc = 2;
    sc.workload.recordcount = 20;
    sc.workload.checking_group_proportion = 0.3;
    let mut sim = Sim::<Accf>::new(sc).unwrap();
    sim.run();
    let h = sim.take_history().unwrap();
    let r = check(&h, &CheckConfig::at(Level::CausalPlus));
    assert!(r.passed, "{r}");
    let gets: Vec<_> = h.ops.iter().filter(|r| matches!(r.op, Op::Get { .. })).collect();
    let remote = gets.iter().filter(|r| latency_ms(r) >= RTT_MS).count();
    let share = remote as f64 / gets.len() as f64;
    // Two thirds of the drawn groups are another DC's.
    assert!((0.1..0.35).contains(&share), "{remote} of {} GETs went to another DC", gets.len());
    // Each drawn group is in the history; a GET slow enough to be remote named one.
    let named = gets.iter().filter(|r| r.checking_group.is_some()).count();
    assert!((0.2..0.4).contains(&(named as f64 / gets.len() as f64)), "{named} of {} GETs named a group", gets.len());
    assert!(gets.iter().filter(|r| latency_ms(r) >= RTT_MS).all(|r| r.checking_group.is_some()));
    assert!(h.ops.iter().all(|r| r.checking_group.is_none() || matches!(r.op, Op::Get { .. })));
}

/// A protocol without checking groups: a scripted GET naming one fails
/// with the typed refusal, nothing sent; a workload drawing them is
/// refused when the simulation is built; `checking_group` is for GETs.
#[test]
fn checking_groups_are_refused_where_they_do_not_exist() {
    let (mut sc, a, _) = scenario();
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![get(1_000, &a, Some(0)), get(0, &a, None)] });
    let mut sim = Sim::<CausalSpartanX>::new(sc.clone()).unwrap();
    sim.run();
    let h = sim.take_history().unwrap();
    assert_eq!(h.ops[0].result, OpResult::Failed(OpError::CheckingGroup(CheckingGroupError::Unsupported { group: 0 })));
    assert!(matches!(h.ops[1].result, OpResult::Get(_)));
    let mut drawn = sc.clone();
    drawn.workload.checking_group_proportion = 0.5;
    let e = Sim::<CausalSpartanX>::new(drawn).err().expect("refused").to_string();
    assert!(e.contains("checking_group_proportion") && e.contains("no checking groups"), "{e}");
    let mut on_put = sc;
    on_put.scripted[0].ops[0].op = Op::Put { key: a, value: tagged_value(1, 16) };
    match Sim::<Accf>::new(on_put).err() {
        Some(ScenarioError::ScriptCheckingGroup { index: 0, kind }) => assert_eq!(kind, "put"),
        other => panic!("expected a refusal of checking_group on a PUT, got {:?}", other.map(|e| e.to_string())),
    }
}
