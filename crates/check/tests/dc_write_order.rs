//! NuKV's Raft groups linearize each DC's writes (Roohitavaf, *Consistency
//! for Distributed Data Stores*, Ch. 4, §4.1 and Alg 4.2): a leader stamps
//! every write past its hybrid logical clock, which every write it stamps or
//! applies moves forward, so a write acknowledged in a DC before another is
//! invoked there loses to it everywhere, even when the leader's physical
//! clock steps back. The checker holds NuKV to that order
//! (`Protocol::LINEARIZES_DC_WRITES`, `CheckConfig::dc_write_order`); the
//! mutant whose leader stamps with its physical clock alone is caught, and
//! only by that check.

use bytes::Bytes;
use causeway_check::{CheckConfig, Kind, Level, check};
use causeway_core::{ClockJump, History, Op, Topology, TopologySpec, tagged_value};
use causeway_protocols::nukv::Nukv;
use causeway_sim::scenario::NodeClock;
use causeway_sim::{Scenario, ScriptedClient, ScriptedOp, Sim};

const QUIET_US: u64 = 3_000_000;

fn op(at_us: u64, op: Op) -> ScriptedOp {
    ScriptedOp { at_us, op, from_dc: None, checking_group: None }
}

/// DC 0's replicas' clocks run 5 s ahead from 0.9 s to 1.3 s (a clock
/// stepped forward and back, as NTP may do). One session writes x = 1 at
/// 1.0 s, inside that window; another, in the same DC, writes x = 2 at
/// 2.0 s, after it. After the quiet time a reader in each DC reads x.
fn run(mutant: bool) -> History {
    let mut spec = TopologySpec::full(2, 1);
    spec.replicas_per_partition = 3;
    let mut sc = Scenario::new(spec, QUIET_US / 1_000 + 500);
    sc.seed = 7;
    sc.network.default_rtt_ms = 30.0;
    sc.record_history = true;
    sc.client_timeout_ms = 10_000;
    sc.drain_ms = 2_000;
    let t = Topology::new(sc.topology.clone()).unwrap();
    for node in (0..t.nodes() as u32).filter(|&n| t.dc_of(causeway_core::NodeId(n)).0 == 0) {
        let jumps =
            vec![ClockJump { at_us: 900_000, step_us: 5_000_000 }, ClockJump { at_us: 1_300_000, step_us: -5_000_000 }];
        sc.clocks.node.push(NodeClock { node, offset_us: 0, drift_ppm: 0.0, jumps });
    }
    if mutant {
        sc.protocol.insert("mutant_stamp_physical".into(), true.into());
    }
    let x = Bytes::from_static(b"x");
    let put = |at_us, id| op(at_us, Op::Put { key: x.clone(), value: tagged_value(id, 16) });
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![put(1_000_000, 1)] });
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![put(2_000_000, 2)] });
    for dc in 0..2 {
        sc.scripted.push(ScriptedClient { dc, ops: vec![op(QUIET_US, Op::Get { key: x.clone() })] });
    }
    let mut sim = Sim::<Nukv>::new(sc).expect("the scenario is valid");
    sim.run();
    sim.take_history().expect("history recorded")
}

#[test]
fn a_dcs_later_write_wins_through_a_clock_step_and_the_physical_stamp_mutant_is_caught() {
    let cfg = CheckConfig::at(Level::Sessions).quiescent_after(QUIET_US).with_dc_write_order(true);
    let h = run(false);
    let writes =
        h.ops.iter().filter(|r| matches!((&r.op, &r.result), (Op::Put { .. }, causeway_core::OpResult::Put))).count();
    assert_eq!(writes, 2, "both writes are acknowledged: {:?}", h.ops);
    let finals: Vec<_> = h.ops.iter().filter(|r| r.invoke_us >= QUIET_US).map(|r| r.result.clone()).collect();
    let r = check(&h, &cfg);
    assert!(r.passed, "{r}\nfinal reads: {finals:?}");

    let h = run(true);
    let r = check(&h, &cfg);
    assert!(!r.passed, "the mutant's DC 0 let x = 1 win over the later x = 2");
    assert_eq!(r.failed_kinds(), vec![Kind::NotEventuallyVisible], "{r}");
    assert!(r.to_string().contains("both were written in DC 0"), "{r}");
    // Without the DC's write order, eventual consistency allows it: every
    // replica agrees, and arbitration need not follow real time.
    assert!(check(&h, &CheckConfig::at(Level::Sessions).quiescent_after(QUIET_US)).passed);
}
