//! The causal protocols against the scripted anomaly scenarios, in the
//! simulator at geo latencies with jitter — the same scenarios Eventual
//! fails in `engine.rs`.

mod common;

use causeway_protocols::causal_spartan_x::CausalSpartanX;
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

/// Every replicated write is reported visible where a GET returns it: the
/// ones the stable time covers on arrival and the ones parked until it
/// does, which are found again in the store by index
/// (`stabilization::visibility`). Among a million keys almost no write
/// loses last-writer-wins, so almost none may go unreported.
fn reports_replicated_writes_visible<P: causeway_core::Protocol>() {
    let mut sc = common::base(3, 2, 400, 3);
    sc.workload.clients_per_dc = 8;
    sc.workload.recordcount = 1_000_000;
    let r = causeway_sim::Sim::<P>::new(sc).unwrap().run();
    assert_eq!(r.visibility.len(), 6, "every ordered pair of 3 DCs");
    for pair in &r.visibility {
        assert!(pair.summary.count > 100, "{} → {}: only {} writes reported", pair.from, pair.to, pair.summary.count);
        assert!(
            pair.never_visible * 200 < pair.summary.count,
            "{} → {}: {} of {} never reported visible",
            pair.from,
            pair.to,
            pair.never_visible,
            pair.summary.count
        );
    }
}

#[test]
fn stabilization_protocols_report_replicated_writes_visible() {
    reports_replicated_writes_visible::<CausalSpartanX>();
    reports_replicated_writes_visible::<GentleRain>();
    reports_replicated_writes_visible::<causeway_protocols::cure::Cure>();
    reports_replicated_writes_visible::<causeway_protocols::contrarian::Contrarian>();
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
