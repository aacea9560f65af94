//! Roohitavaf, *Consistency for Distributed Data Stores*, Ch. 6, Thm 12: with
//! clients that move between replicas, no store is both available and
//! causal++ under a partition. The proof's run, executed: replicas r (DC 0)
//! and r′ (DC 1) hold k1 and k2 and are cut apart; at r, client c reads k1,
//! writes k1 and then k2; client c′ reads k2 at r (the new version: local
//! writes are visible at once), moves to r′ and reads k1. r′ cannot know
//! c's k1, so an available store answers the old one, which causal++
//! forbids; a store that stays causal must block that read.
//!
//! Every registered protocol meets the run: those that keep sessions in
//! their DC refuse the move ([`OpError::Sticky`]) and stay causal; NuKV,
//! which lets sessions move, either blocks the read (k1 and k2 on one
//! partition: the monotonic-read vector names k2's write, which r′ lacks)
//! or answers it and is caught by the causal checker (k1 and k2 on two
//! partitions: nothing the session tracks names k1's partition), while its
//! own promise, per-key session guarantees, holds in both.

use bytes::Bytes;
use causeway_check::{CheckConfig, Level, check};
use causeway_core::{DcId, History, Key, Op, OpError, OpResult, Protocol, Topology, TopologySpec, tagged_value};
use causeway_protocols::{ProtocolName, with_protocol};
use causeway_sim::{Fault, FaultKind, Scenario, ScriptedClient, ScriptedOp, Sim};

const CUT_MS: u64 = 300;
const HEAL_MS: u64 = 2_500;

fn op(at_us: u64, op: Op) -> ScriptedOp {
    ScriptedOp { at_us, op, from_dc: None, checking_group: None }
}

/// Two keys, on one partition or on two.
fn keys(t: &Topology, same_partition: bool) -> (Key, Key) {
    let k1 = Bytes::from_static(b"k1-0");
    let k2 = (0..1000)
        .map(|i| Bytes::from(format!("k2-{i}")))
        .find(|b| (t.partition_of(&k1) == t.partition_of(b)) == same_partition)
        .expect("a key exists");
    (k1, k2)
}

/// Thm 12's run; returns the history and c′'s read of k1 at r′.
fn theorem_12<P: Protocol>(same_partition: bool) -> (History, usize) {
    let mut sc = Scenario::new(TopologySpec::full(2, 2), HEAL_MS + 500);
    sc.seed = 12;
    sc.network.default_rtt_ms = 40.0;
    sc.network.intra_dc_us = 200;
    sc.record_history = true;
    sc.client_timeout_ms = 10_000;
    sc.drain_ms = 6_000;
    let t = Topology::new(sc.topology.clone()).unwrap();
    let (k1, k2) = keys(&t, same_partition);
    let v = |id| tagged_value(id, 16);
    // The initial versions, replicated everywhere before the cut.
    let put = |at_us, k: &Key, id| op(at_us, Op::Put { key: k.clone(), value: v(id) });
    let get = |at_us, k: &Key| op(at_us, Op::Get { key: k.clone() });
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![put(1_000, &k1, 1), put(0, &k2, 2)] });
    sc.faults.push(Fault { at_ms: CUT_MS, at_us: 0, kind: FaultKind::Cut { a: 0, b: 1 } });
    sc.faults.push(Fault { at_ms: HEAL_MS, at_us: 0, kind: FaultKind::Heal { a: 0, b: 1 } });
    // c, at r.
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![get(400_000, &k1), put(0, &k1, 3), put(0, &k2, 4)] });
    // c′: k2 at r, then k1 at r′.
    let mut moved = get(0, &k1);
    moved.from_dc = Some(1);
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![get(600_000, &k2), moved] });
    let mut sim = Sim::<P>::new(sc).unwrap_or_else(|e| panic!("{}: {e}", P::NAME));
    sim.run();
    let h = sim.take_history().expect("history recorded");
    let read = h
        .ops
        .iter()
        .position(|r| r.dc == DcId(1) && matches!(&r.op, Op::Get { key } if *key == k1))
        .or_else(|| h.ops.iter().rposition(|r| matches!(&r.op, Op::Get { key } if *key == k1)))
        .expect("c′'s read of k1 is recorded");
    (h, read)
}

/// c′ read c's k2 at r before moving (NuKV's local writes are visible at
/// once, as the theorem's store's are).
fn read_the_new_k2(h: &History) {
    let k2 = h.ops.iter().filter(|r| matches!(r.op, Op::Get { .. })).nth(1).expect("c′ read k2");
    assert!(matches!(&k2.op, Op::Get { key } if key.starts_with(b"k2-")), "{k2:?}");
    assert_eq!(k2.result, OpResult::Get(Some(tagged_value(4, 16))));
}

#[test]
fn a_sticky_protocol_refuses_the_move_and_stays_causal() {
    for &p in ProtocolName::ALL {
        with_protocol!(p, P => {
            if <P as Protocol>::MIGRATES {
                continue;
            }
            let (h, read) = theorem_12::<P>(false);
            assert_eq!(h.ops[read].result, OpResult::Failed(OpError::Sticky { dc: 1 }), "{}", p.as_str());
            let level = if <P as Protocol>::CAUSAL { Level::CausalPlus } else { Level::Eventual };
            let r = check(&h, &CheckConfig::at(level));
            assert!(r.passed, "{}: {r}", p.as_str());
        });
    }
}

#[test]
fn nukv_answers_the_moved_read_and_the_causal_checker_catches_it() {
    use causeway_protocols::nukv::Nukv;
    let (h, read) = theorem_12::<Nukv>(false);
    read_the_new_k2(&h);
    let r = &h.ops[read];
    assert_eq!(r.dc, DcId(1), "the session moved");
    assert_eq!(r.result, OpResult::Get(Some(tagged_value(1, 16))), "available: r′'s old k1, during the cut");
    assert!(r.complete_us < HEAL_MS * 1_000, "answered during the cut");
    let causal = check(&h, &CheckConfig::at(Level::CausalPlus));
    assert!(!causal.passed, "causal++ is violated, as Thm 12 says it must be:\n{causal}");
    let sessions = check(&h, &CheckConfig::at(Level::Sessions));
    assert!(sessions.passed, "NuKV's own promise holds: {sessions}");
}

#[test]
fn nukv_blocks_the_moved_read_when_the_session_tracks_its_partition() {
    use causeway_protocols::nukv::Nukv;
    let (h, read) = theorem_12::<Nukv>(true);
    read_the_new_k2(&h);
    let r = &h.ops[read];
    assert_eq!(r.dc, DcId(1), "the session moved");
    // Blocked during the cut: the replica parks it and the client asks
    // again until the heal brings k2's write, or its deadline fails it.
    match &r.result {
        OpResult::Get(got) => {
            assert!(r.complete_us >= HEAL_MS * 1_000, "answered only after the heal, at {} µs", r.complete_us);
            assert_eq!(got.as_ref(), Some(&tagged_value(3, 16)), "c's k1, once r′ has it");
        }
        OpResult::Failed(e) => assert!(e.is_unfinished(), "blocked, then out of time: {e}"),
        other => panic!("unexpected {other:?}"),
    }
    let causal = check(&h, &CheckConfig::at(Level::CausalPlus));
    assert!(causal.passed, "blocking kept it causal: {causal}");
}
