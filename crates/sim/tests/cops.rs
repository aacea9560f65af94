//! COPS and COPS-GT in the simulator: causal order across DCs under
//! faults, `read_trans` snapshots, and COPS-GT's garbage collection keeping
//! memory flat. (The step-by-step `read_trans` race is a unit test,
//! `read_trans_never_returns_the_public_acl_with_the_personal_album` in
//! `crates/protocols/src/explicit_deps/cops_gt/tests.rs`.)

mod common;

use causeway_core::{NodeId, Topology};
use causeway_protocols::cops::Cops;
use causeway_protocols::cops_gt::CopsGt;
use causeway_sim::{Fault, FaultKind, Scenario, Sim};

#[test]
fn photo_then_album_is_causal() {
    for seed in 1..=5 {
        let (violations, saw) = common::photo_then_album::<Cops>(seed);
        assert!(saw, "cops seed {seed}: the reader never saw the album entry");
        assert_eq!(violations, 0, "cops seed {seed}: album visible without its photo");
        let (violations, saw) = common::photo_then_album::<CopsGt>(seed);
        assert!(saw, "copsgt seed {seed}: the reader never saw the album entry");
        assert_eq!(violations, 0, "copsgt seed {seed}: album visible without its photo");
    }
}

/// The photo-then-album writes under a DC partition that heals, a delay
/// spike and a paused photo server in the reader's DC: a remote DC still
/// never applies the album entry before the photo.
fn under_faults(sc: &mut Scenario, t: &Topology) {
    let photo_server = t.server_for_key(causeway_core::DcId(1), b"photo0").map_or(0, |n| n.0);
    sc.faults.push(Fault { at_ms: 0, at_us: 0, kind: FaultKind::Cut { a: 0, b: 1 } });
    sc.faults.push(Fault { at_ms: 250, at_us: 0, kind: FaultKind::Heal { a: 0, b: 1 } });
    sc.faults.push(Fault { at_ms: 260, at_us: 0, kind: FaultKind::Spike { a: 0, b: 1, extra_ms: 150, for_ms: 200 } });
    sc.faults.push(Fault { at_ms: 300, at_us: 0, kind: FaultKind::Pause { node: photo_server, for_ms: 200 } });
}

#[test]
fn dependencies_are_checked_under_partitions_spikes_and_pauses() {
    for seed in 1..=5 {
        let (violations, saw) = common::photo_then_album_with::<Cops>(seed, 1_000, under_faults);
        assert!(saw && violations == 0, "cops seed {seed}: {violations} violations, saw album: {saw}");
        let (violations, saw) = common::photo_then_album_with::<CopsGt>(seed, 1_000, under_faults);
        assert!(saw && violations == 0, "copsgt seed {seed}: {violations} violations, saw album: {saw}");
    }
}

/// The broken variants are caught by the same scenarios.
#[test]
fn skipping_dep_check_shows_the_album_before_its_photo() {
    let skip = |sc: &mut Scenario, _: &Topology| {
        sc.protocol.insert("mutant_skip_dep_check".into(), true.into());
    };
    let (violations, saw) = common::photo_then_album_with::<Cops>(1, 1_000, skip);
    assert!(saw && violations > 0, "cops mutant: {violations} violations");
    let (violations, saw) = common::photo_then_album_with::<CopsGt>(1, 1_000, skip);
    assert!(saw && violations > 0, "copsgt mutant: {violations} violations");
}

#[test]
fn copsgt_read_trans_never_returns_public_acl_with_new_album() {
    for seed in 1..=5 {
        let (violations, saw_new) = common::acl_album_rot::<CopsGt>(seed);
        assert!(saw_new > 0, "seed {seed}: no ROT saw the new album");
        assert_eq!(violations, 0, "seed {seed}: ROT returned ⟨public ACL, new album⟩");
    }
}

#[test]
fn local_writes_are_visible_at_once_and_replicas_converge() {
    assert_eq!(common::read_your_writes_local::<Cops>(1), 0);
    assert_eq!(common::read_your_writes_local::<CopsGt>(1), 0);
    for (bad, n) in [common::convergence::<Cops>(2), common::convergence::<CopsGt>(2)] {
        assert_eq!(n, 5);
        assert!(bad.is_empty(), "diverged: {bad:?}");
    }
}

/// What COPS-GT's servers hold at one instant: versions, and dependency
/// entries stored with them.
fn held(sim: &Sim<CopsGt>) -> (usize, usize) {
    let nodes = sim.topology().nodes();
    let mut versions = 0;
    let mut deps = 0;
    for n in 0..nodes {
        let store = sim.store(NodeId(n as u32));
        versions += store.version_count();
        deps += store.all_versions().map(|v| v.deps.len()).sum::<usize>();
    }
    (versions, deps)
}

/// A 24-second write-heavy run over few keys with a 500 ms `trans_time`:
/// sampled at 8, 16 and 24 s, the versions and dependencies the servers
/// hold stay flat. With collection held off (a `trans_time` longer than
/// the run), the same run's versions keep growing, so the test can fail.
fn gc_run(trans_time_ms: u64) -> Vec<(usize, usize)> {
    let mut sc = common::base(2, 2, 24_000, 7);
    sc.workload.clients_per_dc = 4;
    sc.workload.recordcount = 200;
    sc.workload.readproportion = 0.3;
    sc.workload.updateproportion = 0.5;
    sc.workload.rotproportion = 0.2;
    sc.workload.rot_size = 3;
    sc.workload.think_time_us = 2_000;
    sc.record_history = false;
    sc.protocol.insert("trans_time_ms".into(), (trans_time_ms as i64).into());
    sc.protocol.insert("gc_interval_ms".into(), 50.into());
    let mut sim = Sim::<CopsGt>::new(sc).expect("valid scenario");
    [8_000_000, 16_000_000, 24_000_000]
        .into_iter()
        .map(|t| {
            sim.run_until(t);
            held(&sim)
        })
        .collect()
}

#[test]
fn copsgt_garbage_collection_keeps_versions_and_dependencies_flat() {
    let gc = gc_run(500);
    let (v8, d8) = gc[0];
    for &(v, d) in &gc[1..] {
        assert!(v * 4 <= v8 * 5, "versions grew: {gc:?}");
        assert!(d * 4 <= d8 * 5 + 400, "dependencies grew: {gc:?}");
    }
    let kept = gc_run(60_000);
    eprintln!("(versions, dependencies) held at 8/16/24 s: collected {gc:?}; not collected {kept:?}");
    assert!(kept[2].0 > 2 * kept[0].0 + 100, "without collection versions must grow: {kept:?}");
    assert!(kept[2].0 > 4 * gc[2].0, "collection must make a difference: {gc:?} vs {kept:?}");
}

/// Mean dependencies per COPS write in a read-heavy run (1 write : 16
/// reads over key groups): with never-depend flags (settling every 100 ms),
/// and with settling held off for longer than the run.
fn cops_deps_per_write(settle_interval_ms: i64) -> f64 {
    let mut sc = common::base(2, 4, 6_000, 3);
    sc.record_history = false;
    sc.workload.clients_per_dc = 16;
    sc.workload.requestdistribution = causeway_sim::scenario::Distribution::Keygroup;
    sc.workload.keys_per_group = 64;
    sc.workload.keygroup_variance = 1.0;
    sc.workload.readproportion = 16.0 / 17.0;
    sc.workload.updateproportion = 1.0 / 17.0;
    sc.workload.think_time_us = 1_000;
    sc.protocol.insert("settle_interval_ms".into(), settle_interval_ms.into());
    let r = Sim::<Cops>::new(sc).expect("valid scenario").run();
    r.samples["deps_per_write"].mean_us
}

/// Lloyd §7.2: COPS's average dependencies per write stay at 1–4,
/// because reads of versions committed everywhere add nothing (§6.1).
#[test]
fn cops_contexts_stay_small_with_never_depend() {
    let settled = cops_deps_per_write(100);
    let unsettled = cops_deps_per_write(3_600_000);
    eprintln!("COPS deps per write at 1:16: {settled:.2} with never-depend, {unsettled:.2} without");
    assert!(settled <= 4.0, "{settled}");
    assert!(unsettled > 2.0 * settled, "never-depend must make the difference: {settled} vs {unsettled}");
}
