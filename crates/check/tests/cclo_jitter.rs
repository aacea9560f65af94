//! CC-LO's readers check in the simulator, under network jitter (up to 4×
//! the one-way latency) that often splits a ROT's reads by more than a hop
//! — what torture's small jitter almost never produces — with every
//! history checked at the level CC-LO promises. (The step-by-step races
//! are unit tests in `crates/protocols/src/explicit_deps/cc_lo/tests.rs`.)

use bytes::Bytes;
use causeway_check::{CheckConfig, Level, check};
use causeway_core::{History, Op, Protocol, Topology, TopologySpec};
use causeway_protocols::cc_lo::CcLo;
use causeway_sim::{Scenario, ScriptedClient, ScriptedOp, Sim};

fn base(seed: u64, duration_ms: u64, flag: Option<&str>) -> Scenario {
    let mut sc = Scenario::new(TopologySpec::full(2, 2), duration_ms);
    sc.seed = seed;
    sc.drain_ms = 3_000;
    sc.record_history = true;
    sc.network.default_rtt_ms = 40.0;
    sc.network.intra_dc_us = 200;
    sc.network.jitter_pct = 300.0;
    if let Some(f) = flag {
        sc.protocol.insert(f.into(), true.into());
    }
    sc
}

/// Whether the history passes, and the report.
fn judge(sc: Scenario) -> (bool, History, String) {
    let mut sim = Sim::<CcLo>::new(sc).expect("valid scenario");
    sim.run();
    let h = sim.take_history().expect("history recorded");
    let r = check(&h, &CheckConfig::at(Level::promised(CcLo::CAUSAL)));
    (r.passed, h, r.to_string())
}

fn rots(h: &History) -> usize {
    h.ops.iter().filter(|r| matches!(r.op, Op::Rot { .. })).count()
}

/// The paper's Fig. 1 race (Didona et al. §3) in a remote DC, at scale: a
/// DC0 writer alternates PUT(x, X_i), PUT(y, Y_i), so X_i ⇝ Y_i; in DC1
/// Y_i waits for X_i and becomes visible one hop after it (the combined
/// dependency and readers check), while DC1 readers run ROT(x, y) back to
/// back. Some ROT reads x before X_i is visible there and y after Y_i is.
fn figure_1_at_scale(seed: u64, flag: Option<&str>) -> Scenario {
    let mut sc = base(seed, 2_000, flag);
    let t = Topology::new(sc.topology.clone()).unwrap();
    let (x, y) = (0..1000)
        .map(|i| (Bytes::from(format!("x{i}")), Bytes::from(format!("y{i}"))))
        .find(|(a, b)| t.partition_of(a) != t.partition_of(b))
        .unwrap();
    let mut writes = Vec::new();
    for i in 0..400 {
        for (k, tag) in [(&x, 'x'), (&y, 'y')] {
            let value = Bytes::from(format!("{tag}{i:04}"));
            writes.push(ScriptedOp {
                at_us: if i == 0 { 1_000 } else { 0 },
                op: Op::Put { key: k.clone(), value },
                from_dc: None,
                checking_group: None,
            });
        }
    }
    sc.scripted.push(ScriptedClient { dc: 0, ops: writes });
    for _ in 0..4 {
        let reads = (0..2_000).map(|_| ScriptedOp {
            at_us: 0,
            op: Op::Rot { keys: vec![x.clone(), y.clone()] },
            from_dc: None,
            checking_group: None,
        });
        sc.scripted.push(ScriptedClient { dc: 1, ops: reads.collect() });
    }
    sc
}

#[test]
fn the_figure_1_race_at_scale_is_causal_and_both_rot_mutants_are_caught() {
    for seed in 1..=3 {
        let (passed, h, report) = judge(figure_1_at_scale(seed, None));
        assert!(rots(&h) > 5_000, "seed {seed}: only {} ROTs", rots(&h));
        assert!(passed, "seed {seed}:\n{report}");
    }
    for flag in ["mutant_no_old_reader_propagation", "mutant_lamport_only"] {
        let (passed, _, report) = judge(figure_1_at_scale(1, Some(flag)));
        assert!(!passed, "{flag} passed:\n{report}");
        assert!(report.contains("FAIL  read-only transaction snapshot"), "{flag}:\n{report}");
    }
}

/// A random workload on four hot keys, ROT-heavy, in both DCs.
#[test]
fn random_rot_heavy_histories_are_causal() {
    for seed in 1..=4 {
        let mut sc = base(seed, 3_000, None);
        let w = &mut sc.workload;
        w.clients_per_dc = 8;
        w.recordcount = 4;
        w.readproportion = 0.1;
        w.updateproportion = 0.3;
        w.rotproportion = 0.6;
        w.rot_size = 2;
        w.think_time_us = 0;
        let (passed, h, report) = judge(sc);
        assert!(rots(&h) > 1_000, "seed {seed}: only {} ROTs", rots(&h));
        assert!(passed, "seed {seed}:\n{report}");
    }
}
