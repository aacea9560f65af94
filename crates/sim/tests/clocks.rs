//! Roohitavaf's clock results, reproduced in the simulator (§5.5, §5.6, §10
//! claims 1 and 12): GentleRain's PUT waits out clock skew and its
//! correctness depends on clocks never stepping back; CausalSpartanX's HLC
//! removes both.

mod common;

use causeway_core::{DcId, Op, OpKind, Protocol, TopologySpec, tagged_value};
use causeway_protocols::causal_spartan_x::CausalSpartanX;
use causeway_protocols::gentlerain::GentleRain;
use causeway_sim::scenario::NodeClock;
use causeway_sim::{Fault, FaultKind, Scenario, ScriptedClient, ScriptedOp, Sim};

/// Fig 5.1's setup: two partitions, one ahead of the other by `skew_us`; one
/// client writes to them in turn. Returns the mean PUT latency in µs.
fn put_latency_us<P: Protocol>(skew_us: i64) -> f64 {
    let mut sc = Scenario::new(TopologySpec::full(1, 2), 1_000);
    sc.seed = 3;
    sc.network.intra_dc_us = 200;
    let t = causeway_core::Topology::new(sc.topology.clone()).unwrap();
    let servers: Vec<_> = t.dc_servers(DcId(0)).collect();
    sc.clocks.node.push(NodeClock { node: servers[1].0, offset_us: skew_us, drift_ppm: 0.0, jumps: Vec::new() });
    let (k0, k1) = common::keys_on_different_partitions(&t, "a", "b");
    let mut ops = Vec::new();
    for i in 0..200u64 {
        let key = if i % 2 == 0 { &k0 } else { &k1 };
        ops.push(ScriptedOp {
            at_us: 0,
            op: Op::Put { key: key.clone(), value: tagged_value(i + 1, 64) },
            from_dc: None,
            checking_group: None,
        });
    }
    sc.scripted.push(ScriptedClient { dc: 0, ops });
    let r = Sim::<P>::new(sc).unwrap().run();
    r.latency[OpKind::Put.name()].mean_us
}

#[test]
fn gentlerain_put_latency_grows_with_skew_and_causalspartanx_does_not() {
    let skews_ms = [5, 10, 15];
    let gr: Vec<f64> = skews_ms.iter().map(|s| put_latency_us::<GentleRain>(s * 1_000)).collect();
    let csx: Vec<f64> = skews_ms.iter().map(|s| put_latency_us::<CausalSpartanX>(s * 1_000)).collect();
    eprintln!("mean PUT latency (µs) at skew {skews_ms:?} ms: GentleRain {gr:?}, CausalSpartanX {csx:?}");
    // Half of GentleRain's PUTs wait out the skew: the mean grows by about
    // skew/2 per step.
    for w in gr.windows(2) {
        assert!(w[1] > w[0] + 2_000.0, "GentleRain's PUT latency must grow with skew: {gr:?}");
    }
    assert!(gr[1] > 4_000.0, "at 10 ms skew GentleRain waits ~5 ms on average: {gr:?}");
    // CausalSpartanX never waits: flat at one intra-DC round trip.
    for c in &csx {
        assert!(
            (c - csx[0]).abs() < 100.0 && *c < 1_000.0,
            "CausalSpartanX's PUT latency must not depend on skew: {csx:?}"
        );
    }
}

/// Both DC0 servers step their clocks back 200 ms at 500 ms, after DC1's
/// stable time has passed 500 ms; then the photo-then-album writes happen
/// with the photo's replication slow.
fn jump_back(sc: &mut Scenario, t: &causeway_core::Topology) {
    for n in t.dc_servers(DcId(0)).collect::<Vec<_>>() {
        sc.faults.push(Fault { at_ms: 500, at_us: 0, kind: FaultKind::ClockJump { node: n.0, step_us: -200_000 } });
    }
}

#[test]
fn a_backward_clock_jump_breaks_gentlerain() {
    let (violations, saw) = common::photo_then_album_with::<GentleRain>(1, 600_000, jump_back);
    assert!(saw);
    assert!(
        violations > 0,
        "GentleRain with a clock stepped back must show the album without its photo (Roohitavaf §5.1.1)"
    );
}

#[test]
fn causalspartanx_survives_the_same_jump() {
    for seed in 1..=3 {
        let (violations, saw) = common::photo_then_album_with::<CausalSpartanX>(seed, 600_000, jump_back);
        assert!(saw, "seed {seed}");
        assert_eq!(violations, 0, "seed {seed}: CausalSpartanX must stay causal across a backward clock jump");
    }
}
