//! CC-LO in the simulator: the paper's Fig. 1 race (Didona et al. §3) at
//! scale, in a remote DC. A DC0 writer alternates PUT(x, X_i), PUT(y, Y_i),
//! so X_i ⇝ Y_i; in DC1, Y_i waits for X_i and becomes visible one hop
//! after it (the combined dependency and readers check), while DC1 readers
//! run ROT(x, y) back to back over a network whose jitter (up to 4× the
//! one-way latency) sometimes delivers a ROT's read of y more than a hop
//! after its read of x. The real protocol never returns X_i with Y_j for
//! j > i; without old-reader propagation, or with Lamport timestamps alone
//! (the §6 straw man), it does. (The step-by-step races are unit tests in
//! `crates/protocols/src/explicit_deps/cc_lo/tests.rs`; torture's jitter
//! is too small to split a ROT's reads by a hop.)

mod common;

use bytes::Bytes;
use causeway_core::{Op, OpResult, Topology};
use causeway_protocols::cc_lo::CcLo;
use causeway_sim::{ScriptedClient, ScriptedOp};

/// The index of a value written as `x0042` / `y0042`; `None` reads as -1.
fn index(v: &Option<Bytes>) -> i64 {
    v.as_ref().map_or(-1, |b| std::str::from_utf8(&b[1..]).unwrap().parse().unwrap())
}

/// Returns (DC1 ROTs that returned X_i with Y_j, j > i; ROTs in all; ROTs
/// that returned Y_j with a later X_i, whose reads the jitter split the
/// other way).
fn race(seed: u64, flag: Option<&str>) -> (usize, usize, usize) {
    let mut sc = common::base(2, 2, 2_000, seed);
    sc.network.jitter_pct = 300.0;
    if let Some(f) = flag {
        sc.protocol.insert(f.into(), true.into());
    }
    let t = Topology::new(sc.topology.clone()).unwrap();
    let (x, y) = common::keys_on_different_partitions(&t, "x", "y");
    let mut writes = Vec::new();
    for i in 0..400 {
        for (k, tag) in [(&x, 'x'), (&y, 'y')] {
            let value = Bytes::from(format!("{tag}{i:04}"));
            writes.push(ScriptedOp { at_us: if i == 0 { 1_000 } else { 0 }, op: Op::Put { key: k.clone(), value } });
        }
    }
    sc.scripted.push(ScriptedClient { dc: 0, ops: writes });
    for _ in 0..4 {
        let reads = (0..2_000).map(|_| ScriptedOp { at_us: 0, op: Op::Rot { keys: vec![x.clone(), y.clone()] } });
        sc.scripted.push(ScriptedClient { dc: 1, ops: reads.collect() });
    }
    let (h, _) = common::run::<CcLo>(sc);
    let (mut bad, mut rots, mut behind) = (0, 0, 0);
    for r in &h.ops {
        if let OpResult::Rot(vals) = &r.result {
            rots += 1;
            let (ix, iy) = (index(&vals[0]), index(&vals[1]));
            if iy > ix {
                bad += 1;
            }
            if iy < ix {
                behind += 1;
            }
        }
    }
    (bad, rots, behind)
}

#[test]
fn rots_never_return_x_i_with_a_later_y_under_heavy_jitter() {
    for seed in 1..=3 {
        let (bad, rots, behind) = race(seed, None);
        eprintln!("seed {seed}: {rots} ROTs, {behind} read x ahead of y");
        assert!(rots > 1_000, "seed {seed}: only {rots} ROTs");
        assert_eq!(bad, 0, "seed {seed}: {bad} of {rots} ROTs returned X_i with a later Y_j");
        assert!(behind > 0, "seed {seed}: the jitter never split a ROT's reads");
    }
}

#[test]
fn both_rot_mutants_return_x_i_with_a_later_y() {
    for flag in ["mutant_no_old_reader_propagation", "mutant_lamport_only"] {
        let caught: usize = (1..=3).map(|seed| race(seed, Some(flag)).0).sum();
        eprintln!("{flag}: {caught} ROTs returned X_i with a later Y_j");
        assert!(caught > 0, "{flag} was never caught");
    }
}
