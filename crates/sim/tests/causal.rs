//! The causal protocols against the scripted anomaly scenarios, in the
//! simulator at geo latencies with jitter — the same scenarios Eventual
//! fails in `engine.rs`.

mod common;

use causeway_protocols::causal_spartan_x::CausalSpartanX;
use causeway_protocols::cops::Cops;
use causeway_protocols::gentlerain::GentleRain;

#[test]
fn csx_photo_then_album_is_causal() {
    for seed in 1..=5 {
        let (violations, saw) = common::photo_then_album::<CausalSpartanX>(seed);
        assert!(saw, "seed {seed}: the reader never saw the album entry");
        assert_eq!(violations, 0, "seed {seed}: album visible without its photo");
    }
}

#[test]
fn csx_rot_never_returns_public_acl_with_new_album() {
    for seed in 1..=5 {
        let (violations, saw_new) = common::acl_album_rot::<CausalSpartanX>(seed);
        assert!(saw_new > 0, "seed {seed}: no ROT saw the new album");
        assert_eq!(violations, 0, "seed {seed}: ROT returned ⟨public ACL, new album⟩");
    }
}

#[test]
fn csx_local_writes_visible_at_once_and_converges() {
    assert_eq!(common::read_your_writes_local::<CausalSpartanX>(1), 0);
    let (bad, n) = common::convergence::<CausalSpartanX>(2);
    assert_eq!(n, 5);
    assert!(bad.is_empty(), "diverged: {bad:?}");
}

#[test]
fn gentlerain_photo_then_album_is_causal() {
    for seed in 1..=5 {
        let (violations, saw) = common::photo_then_album::<GentleRain>(seed);
        assert!(saw, "seed {seed}: the reader never saw the album entry");
        assert_eq!(violations, 0, "seed {seed}: album visible without its photo");
    }
}

#[test]
fn gentlerain_rot_never_returns_public_acl_with_new_album() {
    for seed in 1..=5 {
        let (violations, saw_new) = common::acl_album_rot::<GentleRain>(seed);
        assert!(saw_new > 0, "seed {seed}: no ROT saw the new album");
        assert_eq!(violations, 0, "seed {seed}: ROT returned ⟨public ACL, new album⟩");
    }
}

#[test]
fn gentlerain_local_writes_visible_at_once_and_converges() {
    assert_eq!(common::read_your_writes_local::<GentleRain>(1), 0);
    let (bad, n) = common::convergence::<GentleRain>(2);
    assert_eq!(n, 5);
    assert!(bad.is_empty(), "diverged: {bad:?}");
}

#[test]
fn cops_photo_then_album_is_causal() {
    for seed in 1..=5 {
        let (violations, saw) = common::photo_then_album::<Cops>(seed);
        assert!(saw, "seed {seed}: the reader never saw the album entry");
        assert_eq!(violations, 0, "seed {seed}: album visible without its photo");
    }
}

/// The same scenario catches a COPS that commits without `dep_check`.
#[test]
fn cops_without_dep_check_shows_the_album_before_its_photo() {
    let skip = |sc: &mut causeway_sim::Scenario, _: &causeway_core::Topology| {
        sc.protocol.insert("mutant_skip_dep_check".into(), true.into());
    };
    let (violations, saw) = common::photo_then_album_with::<Cops>(1, 1_000, skip);
    assert!(saw && violations > 0, "the mutant must expose the missing photo ({violations} violations)");
}

#[test]
fn cops_local_writes_visible_at_once_and_converges() {
    assert_eq!(common::read_your_writes_local::<Cops>(1), 0);
    let (bad, n) = common::convergence::<Cops>(2);
    assert_eq!(n, 5);
    assert!(bad.is_empty(), "diverged: {bad:?}");
}
