//! The simulator's own guarantees: determinism by seed, faults that do what
//! they say, and the Eventual baseline behaving as eventual consistency does
//! (it must fail the causal scenarios, so those scenarios can fail).

mod common;

use causeway_protocols::eventual::Eventual;
use causeway_sim::{Fault, FaultKind, Scenario, Sim};

fn loaded(seed: u64) -> Scenario {
    let mut sc = common::base(3, 4, 400, seed);
    sc.workload.clients_per_dc = 16;
    sc.workload.recordcount = 100;
    sc.workload.rotproportion = 0.1;
    sc.clocks.skew_us = 3_000;
    sc.clocks.drift_ppm = 50.0;
    sc.faults.push(Fault { at_ms: 100, at_us: 0, kind: FaultKind::Cut { a: 0, b: 2 } });
    sc.faults.push(Fault { at_ms: 200, at_us: 0, kind: FaultKind::Heal { a: 0, b: 2 } });
    sc.faults.push(Fault { at_ms: 150, at_us: 0, kind: FaultKind::Pause { node: 1, for_ms: 30 } });
    sc.faults.push(Fault { at_ms: 120, at_us: 0, kind: FaultKind::Spike { a: 1, b: 2, extra_ms: 50, for_ms: 100 } });
    sc
}

#[test]
fn same_seed_same_trace_and_different_seed_different_trace() {
    let a = Sim::<Eventual>::new(loaded(7)).unwrap().run();
    let b = Sim::<Eventual>::new(loaded(7)).unwrap().run();
    let c = Sim::<Eventual>::new(loaded(8)).unwrap().run();
    assert!(a.events > 10_000, "the run should be busy, got {} events", a.events);
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a, b, "same seed must give an identical report");
    assert_ne!(a.trace_hash, c.trace_hash);
}

#[test]
fn cut_holds_messages_until_heal_and_then_delivers_them() {
    let mut sc = loaded(1);
    sc.faults.clear();
    sc.faults.push(Fault { at_ms: 0, at_us: 0, kind: FaultKind::Cut { a: 0, b: 1 } });
    sc.faults.push(Fault { at_ms: 300, at_us: 0, kind: FaultKind::Heal { a: 0, b: 1 } });
    sc.warmup_ms = 0;
    // Many keys, so writes held by the cut are not overwritten before the heal
    // (last-writer-wins would then never show them, rightly).
    sc.workload.recordcount = 1_000_000;
    let r = Sim::<Eventual>::new(sc).unwrap().run();
    let pair = r.visibility.iter().find(|v| v.from == "dc0" && v.to == "dc1").unwrap();
    // Writes made during the cut wait for the heal: the worst is ~300 ms.
    assert!(pair.summary.max_us >= 250_000, "max visibility {} µs", pair.summary.max_us);
    // Only writes that lost last-writer-wins to a later write of the same key
    // (rare among a million keys) may never show.
    assert!(
        pair.never_visible * 200 < pair.summary.count,
        "a cut must delay messages, never lose them: {} of {} never visible",
        pair.never_visible,
        pair.summary.count
    );
    let other = r.visibility.iter().find(|v| v.from == "dc0" && v.to == "dc2").unwrap();
    assert!(other.summary.max_us < 50_000, "dc0→dc2 was never cut: {} µs", other.summary.max_us);
}

#[test]
fn cpu_service_time_saturates_throughput() {
    let mut fast = common::base(1, 1, 300, 3);
    fast.workload.clients_per_dc = 32;
    fast.warmup_ms = 50;
    let mut slow = fast.clone();
    slow.cpu.service_us = 100; // at most 10 000 messages/s on the only server
    let f = Sim::<Eventual>::new(fast).unwrap().run();
    let s = Sim::<Eventual>::new(slow).unwrap().run();
    assert!(s.throughput_ops_s <= 10_500.0, "saturated throughput {}", s.throughput_ops_s);
    assert!(s.throughput_ops_s >= 9_000.0, "saturated throughput {}", s.throughput_ops_s);
    assert!(f.throughput_ops_s > 3.0 * s.throughput_ops_s);
}

#[test]
fn crash_stops_a_node_for_good() {
    let mut sc = common::base(2, 1, 300, 4);
    sc.workload.clients_per_dc = 4;
    sc.faults.push(Fault { at_ms: 100, at_us: 0, kind: FaultKind::Crash { node: 1, for_ms: 0, at: None } });
    let r = Sim::<Eventual>::new(sc).unwrap().run();
    let pair = r.visibility.iter().find(|v| v.from == "dc0" && v.to == "dc1").unwrap();
    assert!(pair.never_visible > 0, "writes after the crash cannot become visible at the crashed DC");
}

#[test]
fn eventual_violates_photo_then_album() {
    let (violations, saw) = common::photo_then_album::<Eventual>(1);
    assert!(saw, "the reader must see the album entry eventually");
    assert!(violations > 0, "eventual consistency shows the album before the photo under a slow replica");
}

#[test]
fn eventual_rot_is_not_a_snapshot() {
    let (violations, saw_new) = common::acl_album_rot::<Eventual>(1);
    assert!(saw_new > 0);
    assert!(violations > 0, "a multi-get returns ⟨public ACL, new album⟩ under a slow ACL replica");
}

#[test]
fn eventual_local_writes_visible_and_converges() {
    assert_eq!(common::read_your_writes_local::<Eventual>(1), 0);
    let (bad, n) = common::convergence::<Eventual>(2);
    assert_eq!(n, 5);
    assert!(bad.is_empty(), "diverged: {bad:?}");
}

#[test]
fn bad_protocol_config_is_named() {
    let mut sc = common::base(1, 1, 10, 0);
    sc.protocol.insert("no_such_field".into(), toml::Value::Integer(1));
    let err = Sim::<Eventual>::new(sc).err().expect("unknown field rejected").to_string();
    assert!(err.contains("no_such_field") && err.contains("eventual"), "{err}");
}
