//! Hand-built histories, one (or two) per violation kind, each next to a
//! minimally different history that passes: the checker must tell them apart.

mod common;

use causeway_check::{CheckConfig, CheckReport, Kind, Level, Status, Violation, check};
use common::H;

fn run(h: &H) -> CheckReport {
    check(&h.history(), &CheckConfig::at(Level::CausalPlus))
}

fn run_at(h: &H, level: Level, t: Option<u64>) -> CheckReport {
    let mut cfg = CheckConfig::at(level);
    cfg.quiescent_after_us = t;
    check(&h.history(), &cfg)
}

/// The kinds that failed, for exact comparisons.
fn failed(r: &CheckReport) -> Vec<Kind> {
    r.failed_kinds()
}

#[track_caller]
fn assert_clean(r: &CheckReport) {
    assert!(r.passed && failed(r).is_empty(), "expected a clean history:\n{r}");
}

/// Photo-then-album done right: the reader sees the photo.
fn photo_album(reader_sees_photo: bool) -> H {
    let mut h = H::new();
    h.put(0, "photo", 41);
    h.put(0, "album", 42);
    h.get(1, "album", Some(42));
    h.get(1, "photo", if reader_sees_photo { Some(41) } else { None });
    h
}

#[test]
fn causal_history_passes_every_check() {
    let mut h = photo_album(true);
    // More traffic: concurrent writers, a snapshot, reads of old-but-legal values.
    h.put(2, "x", 1);
    h.put(3, "x", 2);
    h.get(1, "x", Some(1));
    h.get(1, "x", Some(1));
    h.rot(3, &[("photo", Some(41)), ("album", Some(42)), ("x", Some(2))]);
    h.get(2, "photo", None); // c2 never saw the photo: ∅ is fine
    let r = run(&h);
    assert_clean(&r);
    assert_eq!(r.stats.ops, 10);
    assert_eq!(r.stats.sessions, 4);
    assert!(r.checks.iter().all(|c| c.status == Status::Pass || matches!(c.status, Status::Skipped { .. })));
}

#[test]
fn photo_then_album_is_write_co_init_read_and_monotonic_writes() {
    assert_clean(&run(&photo_album(true)));
    let r = run(&photo_album(false));
    assert!(!r.passed);
    assert_eq!(failed(&r), vec![Kind::WriteCoInitRead, Kind::MonotonicWrites]);
    let v = r.of_kind(Kind::WriteCoInitRead).next().unwrap();
    let text = v.to_string();
    // Names the read, the write, and the path through the album read.
    assert!(text.contains("client c1 in dc1 read photo=∅ (op #3"), "{text}");
    assert!(text.contains("photo=w41 (op #0 at 0.010 ms by client c0 in dc0)"), "{text}");
    assert!(
        text.contains(
            "#0 c0@dc0 put photo=w41, then #1 c0@dc0 put album=w42, read by #2 c1@dc1 get album=w42, then #3"
        ),
        "{text}"
    );
    let Violation::WriteCoInitRead { read, write, seen, .. } = v else { panic!() };
    assert_eq!((read.index, write.index), (3, 0));
    assert_eq!(seen.hops.len(), 3);
}

#[test]
fn thin_air_read_is_flagged() {
    let mut h = H::new();
    h.put(0, "x", 1);
    h.get(1, "x", Some(1));
    assert_clean(&run(&h));
    h.get(1, "x", Some(99));
    h.get(1, "y", Some(1)); // w1 was written to x, not y
    let r = run(&h);
    assert_eq!(failed(&r), vec![Kind::ThinAirRead]);
    assert_eq!(r.count(Kind::ThinAirRead), 2);
    assert!(r.to_string().contains("read x=w99"), "{r}");
    // Thin air fails even the weakest level.
    assert!(!run_at(&h, Level::Eventual, None).passed);
}

#[test]
fn reading_from_the_causal_future_is_a_cycle() {
    // c0 reads x=w2 and then writes y=w1; c1 reads y=w1 and then writes x=w2.
    let mut h = H::new();
    h.get(0, "x", Some(2));
    h.put(0, "y", 1);
    h.get(1, "y", Some(1));
    h.put(1, "x", 2);
    let r = run(&h);
    assert!(failed(&r).contains(&Kind::CyclicCausalOrder), "{r}");
    assert_eq!(r.count(Kind::CyclicCausalOrder), 1);
    let Violation::CyclicCausalOrder { cycle, ops_involved } = r.of_kind(Kind::CyclicCausalOrder).next().unwrap()
    else {
        panic!()
    };
    assert_eq!(*ops_involved, 4);
    assert_eq!(cycle.start.index, cycle.hops.last().unwrap().1.index, "a cycle ends where it starts: {cycle}");

    // Without the back edge, the same shape is fine.
    let mut ok = H::new();
    ok.get(0, "x", None);
    ok.put(0, "y", 1);
    ok.get(1, "y", Some(1));
    ok.put(1, "x", 2);
    assert_clean(&run(&ok));
}

#[test]
fn reading_your_own_later_write_is_a_cycle() {
    let mut h = H::new();
    h.get(0, "x", Some(7));
    h.put(0, "x", 7);
    let r = run(&h);
    assert!(failed(&r).contains(&Kind::CyclicCausalOrder), "{r}");
}

#[test]
fn overwritten_value_in_causal_past_is_write_co_read() {
    let mut h = H::new();
    h.put(0, "photo", 41);
    h.put(0, "photo", 43); // replaced the photo
    h.put(0, "album", 42);
    h.get(1, "album", Some(42));
    h.get(1, "photo", Some(41)); // the replaced one
    let r = run(&h);
    assert_eq!(failed(&r), vec![Kind::WriteCoRead, Kind::CyclicArbitration, Kind::MonotonicWrites]);
    let text = r.of_kind(Kind::WriteCoRead).next().unwrap().to_string();
    assert!(text.contains("read photo=w41") && text.contains("photo=w43 (op #1"), "{text}");
    assert!(text.contains("w41 ⇝ w43 ⇝ read"), "{text}");

    let mut ok = H::new();
    ok.put(0, "photo", 41);
    ok.put(0, "photo", 43);
    ok.put(0, "album", 42);
    ok.get(1, "album", Some(42));
    ok.get(1, "photo", Some(43));
    assert_clean(&run(&ok));
}

/// Two sessions see two concurrent writes of x in opposite orders: causal,
/// but no single arbitration order explains it.
#[test]
fn opposite_orders_of_concurrent_writes_fail_causal_plus_only() {
    let mut h = H::new();
    h.put(0, "x", 1);
    h.put(1, "x", 2);
    h.get(2, "x", Some(2));
    h.get(2, "x", Some(1));
    h.get(3, "x", Some(1));
    h.get(3, "x", Some(2));
    let r = run(&h);
    assert_eq!(failed(&r), vec![Kind::CyclicArbitration]);
    let text = r.of_kind(Kind::CyclicArbitration).next().unwrap().to_string();
    assert!(text.contains("must be arbitrated before"), "{text}");
    assert!(run_at(&h, Level::Causal, None).passed, "plain causal consistency allows it");

    // Both observers agreeing on w1 before w2 is fine.
    let mut ok = H::new();
    ok.put(0, "x", 1);
    ok.put(1, "x", 2);
    ok.get(2, "x", Some(1));
    ok.get(2, "x", Some(2));
    ok.get(3, "x", Some(1));
    ok.get(3, "x", Some(2));
    assert_clean(&run(&ok));
}

/// The arbitration cycle can run through two keys, which a per-key order
/// would miss.
#[test]
fn arbitration_cycle_across_keys() {
    let mut h = H::new();
    h.put(0, "x", 1); // #0
    h.put(0, "y", 3); // #1   x1 so y3
    h.put(1, "y", 4); // #2
    h.put(1, "x", 2); // #3   y4 so x2
    // c2: reads x=2 (past: y4, x2) then x=1 → x2 cf x1.
    h.get(2, "x", Some(2));
    h.get(2, "x", Some(1));
    // c3: reads y=3 (past: x1, y3) then y=4 → y3 cf y4.
    h.get(3, "y", Some(3));
    h.get(3, "y", Some(4));
    // arb: x2 < x1 (c2), and x1 co y3 < y4 co x2 → x2 < x1 < y3 < y4 < x2.
    let r = run(&h);
    assert_eq!(failed(&r), vec![Kind::CyclicArbitration], "{r}");
}

#[test]
fn read_your_writes() {
    let mut h = H::new();
    h.put(0, "x", 1);
    h.get(0, "x", None);
    h.put(0, "y", 2);
    h.put(0, "y", 3);
    h.get(0, "y", Some(2));
    let r = run(&h);
    assert!(failed(&r).contains(&Kind::ReadYourWrites), "{r}");
    assert_eq!(r.count(Kind::ReadYourWrites), 2);
    for k in [Kind::MonotonicReads, Kind::MonotonicWrites, Kind::WritesFollowReads] {
        assert_eq!(r.count(k), 0, "{k} should not fire:\n{r}");
    }
    let text = r.of_kind(Kind::ReadYourWrites).next().unwrap().to_string();
    assert!(text.contains("read x=∅ (op #1") && text.contains("after writing x=w1 itself (op #0"), "{text}");

    let mut ok = H::new();
    ok.put(0, "x", 1);
    ok.get(0, "x", Some(1));
    ok.put(1, "x", 5);
    ok.get(0, "x", Some(5)); // a concurrent write may win
    assert_clean(&run(&ok));
}

#[test]
fn monotonic_reads() {
    let mut h = H::new();
    h.put(0, "x", 1);
    h.put(0, "x", 2);
    h.get(1, "x", Some(2));
    h.get(1, "x", Some(1));
    let r = run(&h);
    assert_eq!(r.count(Kind::MonotonicReads), 1, "{r}");
    assert_eq!(r.count(Kind::ReadYourWrites) + r.count(Kind::MonotonicWrites) + r.count(Kind::WritesFollowReads), 0);
    let text = r.of_kind(Kind::MonotonicReads).next().unwrap().to_string();
    assert!(text.contains("read x=w1 (op #3") && text.contains("newer x=w2 (op #2"), "{text}");

    let mut ok = H::new();
    ok.put(0, "x", 1);
    ok.put(0, "x", 2);
    ok.get(1, "x", Some(1));
    ok.get(1, "x", Some(2));
    assert_clean(&run(&ok));
}

#[test]
fn monotonic_writes() {
    let mut h = H::new();
    h.put(0, "x", 1);
    h.put(0, "y", 2);
    h.get(1, "y", Some(2));
    h.get(1, "x", None);
    let r = run(&h);
    assert_eq!(r.count(Kind::MonotonicWrites), 1, "{r}");
    assert_eq!(r.count(Kind::ReadYourWrites) + r.count(Kind::MonotonicReads) + r.count(Kind::WritesFollowReads), 0);
    let text = r.of_kind(Kind::MonotonicWrites).next().unwrap().to_string();
    assert!(text.contains("which client c0 in dc0 wrote after writing x=w1 (op #0"), "{text}");
}

#[test]
fn writes_follow_reads() {
    let mut h = H::new();
    h.put(0, "x", 1);
    h.get(1, "x", Some(1));
    h.put(1, "y", 2);
    h.get(2, "y", Some(2));
    h.get(2, "x", None);
    let r = run(&h);
    assert_eq!(r.count(Kind::WritesFollowReads), 1, "{r}");
    assert_eq!(r.count(Kind::ReadYourWrites) + r.count(Kind::MonotonicReads) + r.count(Kind::MonotonicWrites), 0);
    assert_eq!(r.count(Kind::WriteCoInitRead), 1, "a session-guarantee violation is also a causal one");
    let text = r.of_kind(Kind::WritesFollowReads).next().unwrap().to_string();
    assert!(text.contains("wrote after reading x=w1 (op #1"), "{text}");

    let mut ok = H::new();
    ok.put(0, "x", 1);
    ok.get(1, "x", Some(1));
    ok.put(1, "y", 2);
    ok.get(2, "y", Some(2));
    ok.get(2, "x", Some(1));
    assert_clean(&run(&ok));
}

fn acl_album(reads: &[(&str, Option<u64>)]) -> H {
    let mut h = H::new();
    h.put(0, "acl", 10); // public
    h.put(0, "album", 11); // old
    h.put(0, "acl", 12); // friends only
    h.put(0, "album", 13); // new post
    h.rot(1, reads);
    h
}

#[test]
fn rot_must_read_a_causal_snapshot() {
    for ok in [
        [("acl", Some(12)), ("album", Some(13))],
        [("acl", Some(10)), ("album", Some(11))],
        [("acl", Some(12)), ("album", Some(11))],
        [("acl", None), ("album", None)],
        [("acl", Some(10)), ("album", None)],
    ] {
        assert_clean(&run(&acl_album(&ok)));
    }
    let bad = acl_album(&[("acl", Some(10)), ("album", Some(13))]);
    let r = run_at(&bad, Level::Causal, None);
    assert!(!r.passed);
    assert_eq!(r.checks.iter().filter(|c| c.required && matches!(c.status, Status::Fail { .. })).count(), 1, "{r}");
    assert_eq!(r.count(Kind::RotSnapshot), 1, "{r}");
    let Violation::RotSnapshot { key, other_key, newer, .. } = r.of_kind(Kind::RotSnapshot).next().unwrap() else {
        panic!()
    };
    assert_eq!((key.as_str(), other_key.as_str(), newer.index), ("acl", "album", 2));
    let text = r.of_kind(Kind::RotSnapshot).next().unwrap().to_string();
    assert!(text.contains("read acl=w10 together with album=w13"), "{text}");
    // Under causal+ the snapshot's arbitration constraint (w12 before w10,
    // both in its snapshot) contradicts causality (w10 ⇝ w12) too.
    assert_eq!(failed(&run(&bad)), vec![Kind::CyclicArbitration, Kind::RotSnapshot]);

    let r = run(&acl_album(&[("acl", None), ("album", Some(13))]));
    assert_eq!(failed(&r), vec![Kind::RotSnapshot], "{r}");
    // Not required below causal.
    assert!(run_at(&acl_album(&[("acl", Some(10)), ("album", Some(13))]), Level::Eventual, None).passed);
}

#[test]
fn rot_reads_are_also_judged_against_the_session() {
    let mut h = H::new();
    h.put(0, "x", 1);
    h.rot(0, &[("x", None), ("y", None)]);
    let r = run(&h);
    assert_eq!(failed(&r), vec![Kind::WriteCoInitRead, Kind::ReadYourWrites], "{r}");
}

/// A write-only transaction moving money: x and y change together.
fn transfer() -> H {
    let mut h = H::new();
    h.put(0, "x", 1);
    h.put(0, "y", 2);
    h.wot(0, &[("x", 3), ("y", 4)]);
    h
}

#[test]
fn rot_that_sees_part_of_a_write_only_transaction_is_fractured() {
    for ok in [
        [("x", Some(3)), ("y", Some(4))],
        [("x", Some(1)), ("y", Some(2))],
        [("x", None), ("y", None)],
        [("x", Some(1)), ("y", None)],
    ] {
        let mut h = transfer();
        h.rot(1, &ok);
        assert_clean(&run(&h));
    }
    let mut h = transfer();
    h.rot(1, &[("x", Some(3)), ("y", Some(2))]);
    let r = run_at(&h, Level::Causal, None);
    // (The arbitration check, not required at this level, objects too: the
    // snapshot holds w4 and returns the older w2.)
    assert_eq!(failed(&r), vec![Kind::CyclicArbitration, Kind::FracturedRead], "{r}");
    assert!(!r.passed);
    let v = r.of_kind(Kind::FracturedRead).next().unwrap();
    let Violation::FracturedRead { key, wot, via, read, .. } = v else { panic!() };
    assert_eq!((key.as_str(), wot.index, via.index, read.index), ("y", 2, 3, 3));
    let text = v.to_string();
    assert!(
        text.contains(
            "read y=w2 (op #3 at 0.040 ms) in a transaction that read another key from the transaction wot \
                       {x=w3, y=w4}"
        ),
        "{text}"
    );
    assert!(text.contains("fractured read"), "{text}");
    // y=∅ with x from the transaction: fractured, and also not a snapshot
    // (y=w2 was written before the transaction).
    let mut h = transfer();
    h.rot(1, &[("x", Some(3)), ("y", None)]);
    assert_eq!(failed(&run_at(&h, Level::Causal, None)), vec![Kind::RotSnapshot, Kind::FracturedRead]);
    // Informational only at the eventual level.
    let mut h = transfer();
    h.rot(1, &[("x", Some(3)), ("y", Some(2))]);
    let r = run_at(&h, Level::Eventual, None);
    assert!(r.passed && r.count(Kind::FracturedRead) == 1, "{r}");
}

#[test]
fn session_that_saw_a_write_only_transaction_must_see_all_of_it() {
    // Read x from the transaction, then y from before it.
    let mut h = transfer();
    h.get(1, "x", Some(3));
    h.get(1, "y", Some(2));
    let r = run(&h);
    assert!(failed(&r).contains(&Kind::FracturedRead), "{r}");
    let text = r.of_kind(Kind::FracturedRead).next().unwrap().to_string();
    assert!(text.contains("after get x=w3 (op #3 at 0.040 ms) had read from the transaction wot"), "{text}");
    // The writer itself.
    let mut h = transfer();
    h.get(0, "y", Some(2));
    let r = run(&h);
    assert!(failed(&r).contains(&Kind::FracturedRead), "{r}");
    assert!(r.of_kind(Kind::FracturedRead).next().unwrap().to_string().contains("after writing the transaction wot"));
    // A write of y concurrent with the transaction may win: not fractured.
    let mut h = transfer();
    h.put(2, "y", 9);
    h.get(1, "x", Some(3));
    h.get(1, "y", Some(9));
    h.rot(3, &[("x", Some(3)), ("y", Some(9))]);
    assert_clean(&run(&h));
}

#[test]
fn read_write_transaction_reads_one_snapshot_then_writes_atomically() {
    // Clean: read the transfer's state whole, then write based on it.
    let mut h = transfer();
    h.txn(1, &[("x", Some(3)), ("y", Some(4))], &[("x", 5), ("z", 6)]);
    h.rot(2, &[("x", Some(5)), ("y", Some(4)), ("z", Some(6))]);
    assert_clean(&run(&h));
    // Its reads see the snapshot, not its own writes: reading x=w3 while
    // writing x=w5 is fine, and later readers see both of its writes or none.
    let mut h = transfer();
    h.txn(1, &[("x", Some(3))], &[("x", 5), ("z", 6)]);
    h.rot(2, &[("x", Some(5)), ("z", None)]);
    let r = run_at(&h, Level::Causal, None);
    assert_eq!(r.count(Kind::FracturedRead), 1, "{r}");
    assert!(r.of_kind(Kind::FracturedRead).next().unwrap().to_string().contains("txn read {x=w3} wrote {x=w5, z=w6}"));
    // A fractured read inside the transaction's own snapshot.
    let mut h = transfer();
    h.txn(1, &[("x", Some(3)), ("y", Some(2))], &[("z", 6)]);
    assert!(run(&h).count(Kind::FracturedRead) == 1);
}

#[test]
fn divergence_after_quiescence() {
    let mut h = H::new();
    h.put(0, "x", 1);
    h.put(1, "x", 2);
    h.wait_until(1_000);
    h.get(2, "x", Some(1));
    h.get(3, "x", Some(2));
    let r = run_at(&h, Level::Eventual, Some(1_000));
    assert_eq!(failed(&r), vec![Kind::Divergence], "{r}");
    assert!(!r.passed);
    let text = r.violations[0].to_string();
    assert!(
        text.contains("reads of x disagree") && text.contains("read x=w1 (op #2") && text.contains("read x=w2 (op #3"),
        "{text}"
    );
    // Before quiescence, anything goes for eventual consistency.
    assert!(run_at(&h, Level::Eventual, Some(0)).checks.iter().any(|c| matches!(c.status, Status::Skipped { .. })));
    assert!(run_at(&h, Level::Eventual, None).passed);

    let mut ok = H::new();
    ok.put(0, "x", 1);
    ok.put(1, "x", 2);
    ok.wait_until(1_000);
    ok.get(2, "x", Some(2));
    ok.get(3, "x", Some(2));
    assert_clean(&run_at(&ok, Level::CausalPlus, Some(1_000)));
}

#[test]
fn acknowledged_write_must_become_visible() {
    let mut h = H::new();
    h.put(0, "x", 1);
    h.put(0, "x", 2); // acknowledged, causally after w1
    h.put(0, "y", 3);
    h.wait_until(1_000);
    h.get(1, "x", Some(1));
    h.get(3, "x", Some(1));
    h.get(1, "y", None);
    let r = run_at(&h, Level::CausalPlus, Some(1_000));
    assert_eq!(failed(&r), vec![Kind::NotEventuallyVisible], "{r}");
    assert_eq!(r.count(Kind::NotEventuallyVisible), 2);
    let text = r.violations[0].to_string();
    assert!(text.contains("acknowledged write x=w2 (op #1"), "{text}");
    // At the eventual level arbitration need not follow causality (x=w1
    // may win last-writer-wins over the later w2), but y=∅ after the
    // acknowledged y=w3 is still a lost write.
    let r = run_at(&h, Level::Eventual, Some(1_000));
    assert_eq!(failed(&r), vec![Kind::NotEventuallyVisible], "{r}");
    assert_eq!(r.count(Kind::NotEventuallyVisible), 1);
    assert!(r.violations[0].to_string().contains("acknowledged write y=w3"), "{r}");
}

/// Under a protocol that linearizes each DC's writes (NuKV's Raft groups,
/// `CheckConfig::dc_write_order`), a final value that a later write of its
/// own DC should have overwritten is a lost write at every level; writes of
/// different DCs, or overlapping ones, stay free to arbitrate either way.
#[test]
fn a_dcs_later_write_wins_where_the_dc_linearizes_its_writes() {
    let mut h = H::new();
    h.put(0, "x", 1); // DC 0
    h.put(2, "x", 2); // DC 0, another session, invoked after w1's acknowledgement
    h.put(1, "y", 3); // DC 1
    h.put(0, "y", 4); // DC 0: after w3 in real time, but in another DC
    h.wait_until(1_000);
    for reader in [1, 3] {
        h.get(reader, "x", Some(1));
        h.get(reader, "y", Some(3));
    }
    for level in [Level::Eventual, Level::Sessions] {
        assert_clean(&run_at(&h, level, Some(1_000)));
        let cfg = CheckConfig::at(level).quiescent_after(1_000).with_dc_write_order(true);
        let r = check(&h.history(), &cfg);
        assert_eq!(failed(&r), vec![Kind::NotEventuallyVisible], "{r}");
        assert_eq!(r.count(Kind::NotEventuallyVisible), 1, "x only: y's writes were made in two DCs: {r}");
        let text = r.violations[0].to_string();
        assert!(text.contains("x=w2") && text.contains("both were written in DC 0"), "{text}");
    }
    // Overlapping writes of one DC may be linearized either way.
    let mut overlapping = h.history();
    overlapping.ops[1].invoke_us = overlapping.ops[0].complete_us - 1;
    let cfg = CheckConfig::at(Level::Eventual).quiescent_after(1_000).with_dc_write_order(true);
    assert!(check(&overlapping, &cfg).passed);
}

#[test]
fn quiescence_premise_is_checked() {
    let mut h = H::new();
    h.put(0, "x", 1);
    h.wait_until(1_000);
    h.put(1, "x", 2); // after T: not quiescent
    h.get(2, "x", Some(1));
    let r = run_at(&h, Level::Eventual, Some(1_000));
    let c = r.checks.iter().find(|c| c.kind == Kind::Divergence).unwrap();
    let Status::Skipped { reason } = &c.status else { panic!("{r}") };
    assert!(reason.contains("op #1"), "{reason}");
}

#[test]
fn failed_put_may_be_read_but_orders_nothing_after_it() {
    let mut h = H::new();
    h.put(0, "y", 5);
    h.failed_put(0, "x", 1);
    h.get(0, "x", None); // c0 never learned its put happened: fine
    h.get(1, "x", Some(1)); // it did happen: a legal read, not thin air
    assert_clean(&run(&h));
    assert_eq!(causeway_check::Model::build(&h.history()).unwrap().sessions.len(), 3, "one phantom session");

    // But it was issued after c0's put of y, so whoever saw it must see y.
    h.get(1, "y", None);
    let r = run(&h);
    assert_eq!(failed(&r), vec![Kind::WriteCoInitRead], "{r}");
    let text = r.violations[0].to_string();
    assert!(text.contains("put x=w1 (failed)"), "{text}");
}

#[test]
fn unread_failed_put_is_ignored() {
    let mut h = H::new();
    h.failed_put(0, "x", 1);
    h.get(1, "x", None);
    h.get(0, "x", None);
    assert_clean(&run(&h));
}

#[test]
fn reports_are_limited_per_kind_but_counted() {
    let mut h = H::new();
    h.put(0, "x", 1);
    for _ in 0..25 {
        h.get(0, "x", None);
    }
    let mut cfg = CheckConfig::at(Level::Causal);
    cfg.max_reported = 3;
    let r = check(&h.history(), &cfg);
    assert_eq!(r.count(Kind::ReadYourWrites), 25);
    assert_eq!(r.of_kind(Kind::ReadYourWrites).count(), 3);
    assert!(r.to_string().contains("FAIL  read-your-writes: 25 violations"), "{r}");
    // Listed in history order.
    let idx: Vec<usize> = r.of_kind(Kind::ReadYourWrites).map(|v| v.primary_op()).collect();
    assert_eq!(idx, vec![1, 2, 3]);
}

#[test]
fn report_serialises_to_json() {
    let r = run(&photo_album(false));
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["passed"], false);
    assert_eq!(j["level"], "causal_plus");
    let kinds: Vec<&str> = j["violations"].as_array().unwrap().iter().map(|v| v["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["write_co_init_read", "monotonic_writes"]);
    assert_eq!(j["violations"][0]["read"]["index"], 3);
    assert_eq!(j["checks"][0]["status"], "pass");
}

#[test]
fn same_history_same_report() {
    let mut h = H::new();
    for i in 0..40u64 {
        h.put((i % 5) as u32, ["a", "b", "c"][(i % 3) as usize], i + 1);
        h.get(((i + 2) % 5) as u32, ["a", "b", "c"][((i + 1) % 3) as usize], if i > 3 { Some(i - 2) } else { None });
    }
    let a = run_at(&h, Level::CausalPlus, None);
    let b = run_at(&h, Level::CausalPlus, None);
    assert_eq!(a, b);
    assert_eq!(a.to_string(), b.to_string());
}

/// A ROT's snapshot constrains arbitration as a whole: it returned x=w1
/// although its snapshot held x=w3 (in y=w2's past), so w3 is arbitrated
/// before w1; another session orders them the other way round.
#[test]
fn rot_snapshot_constrains_arbitration() {
    let mut h = H::new();
    h.put(0, "x", 1);
    h.put(1, "x", 3);
    h.put(1, "y", 2);
    h.rot(2, &[("x", Some(1)), ("y", Some(2))]);
    h.get(3, "x", Some(1));
    h.get(3, "x", Some(3));
    let r = run(&h);
    assert_eq!(failed(&r), vec![Kind::CyclicArbitration], "{r}");
    assert!(run_at(&h, Level::Causal, None).passed, "a snapshot of concurrent writes is causal");
    // Without the ROT the two orders never meet.
    let mut ok = H::new();
    ok.put(0, "x", 1);
    ok.put(1, "x", 3);
    ok.put(1, "y", 2);
    ok.get(2, "y", Some(2));
    ok.get(2, "x", Some(3));
    ok.get(3, "x", Some(1));
    ok.get(3, "x", Some(3));
    assert_clean(&run(&ok));
}

/// `x` and `y` written before, then overwritten by one non-atomic batch.
fn batch_over(h: &mut H) {
    h.put(0, "x", 1);
    h.put(0, "y", 2);
    h.batch(0, &[("x", 3), ("y", 4)]);
}

#[test]
fn batch_seen_in_part_is_not_fractured() {
    // What a transaction may not do, a batch may: its writes are
    // unordered among themselves, so a reader (a ROT, a session) may see
    // either without the other.
    for reads in [[("x", Some(3)), ("y", Some(2))], [("x", Some(1)), ("y", Some(4))]] {
        let mut h = H::new();
        batch_over(&mut h);
        h.rot(1, &reads);
        assert_clean(&run(&h));
        let mut h = H::new();
        batch_over(&mut h);
        h.get(1, reads[0].0, reads[0].1);
        h.get(1, reads[1].0, reads[1].1);
        assert_clean(&run(&h));
    }
    // Each write still follows the session's earlier operations: x=w3 with
    // y older than w2 (here ∅) is not causal.
    let mut h = H::new();
    batch_over(&mut h);
    h.get(1, "x", Some(3));
    h.get(1, "y", None);
    assert!(!run(&h).passed);
}

#[test]
fn the_operation_after_a_batch_follows_every_write_of_it() {
    // c0 writes z after the batch: a reader of z must see both of the
    // batch's writes (or newer), whichever took the batch's place in the
    // session and whichever was forked.
    for stale in ["x", "y"] {
        let mut h = H::new();
        batch_over(&mut h);
        h.put(0, "z", 5);
        h.get(1, "z", Some(5));
        h.get(1, stale, Some(if stale == "x" { 1 } else { 2 }));
        let r = run(&h);
        assert!(!r.passed, "stale {stale} after z passed:\n{r}");
        assert!(failed(&r).contains(&Kind::WriteCoRead), "{r}");
        let mut h = H::new();
        batch_over(&mut h);
        h.put(0, "z", 5);
        h.get(1, "z", Some(5));
        h.get(1, stale, Some(if stale == "x" { 3 } else { 4 }));
        assert_clean(&run(&h));
    }
}

#[test]
fn batches_in_a_row_join_one_another() {
    // The second batch's writes each follow all of the first's, the first
    // batch being its session's first operation (no predecessor).
    for (seen, missed) in [("w", "y"), ("w", "x"), ("z", "y"), ("z", "x")] {
        let mut h = H::new();
        h.batch(0, &[("x", 1), ("y", 2)]);
        h.batch(0, &[("z", 3), ("w", 4)]);
        h.get(1, seen, Some(if seen == "z" { 3 } else { 4 }));
        h.get(1, missed, None);
        let r = run(&h);
        assert!(failed(&r).contains(&Kind::WriteCoInitRead), "{seen} then {missed}=∅ passed:\n{r}");
        let mut h = H::new();
        h.batch(0, &[("x", 1), ("y", 2)]);
        h.batch(0, &[("z", 3), ("w", 4)]);
        h.get(1, seen, Some(if seen == "z" { 3 } else { 4 }));
        h.get(1, missed, Some(if missed == "x" { 1 } else { 2 }));
        h.get(1, if seen == "z" { "w" } else { "z" }, None);
        assert_clean(&run(&h));
    }
}

#[test]
fn a_batch_joins_the_forks_of_a_batch_before_a_failed_one() {
    // y=w2 is the first batch's fork; the second batch failed whole; the
    // third batch's writes, and what follows, still follow y=w2.
    for seen in [("u", 4), ("w", 5), ("v", 6)] {
        let mut h = H::new();
        h.batch(0, &[("x", 1), ("y", 2)]);
        let failed = h.batch(0, &[("z", 3)]);
        h.ops[failed[0]].result = causeway_core::OpResult::Failed(causeway_core::OpError::Aborted("refused".into()));
        h.batch(0, &[("u", 4), ("w", 5)]);
        h.put(0, "v", 6);
        h.get(1, seen.0, Some(seen.1));
        h.get(1, "y", None);
        let r = run(&h);
        assert!(failed_kinds_contain(&r, Kind::WriteCoInitRead), "{} then y=∅ passed:\n{r}", seen.0);
    }
}

fn failed_kinds_contain(r: &CheckReport, k: Kind) -> bool {
    failed(r).contains(&k)
}

#[test]
fn a_failed_batch_write_that_was_read_may_have_happened() {
    let mut h = H::new();
    h.put(0, "x", 1);
    let writes = h.batch(0, &[("x", 3), ("y", 4)]);
    for i in writes {
        h.ops[i].result = causeway_core::OpResult::Failed(causeway_core::OpError::TimedOut { after_ms: 5 });
    }
    h.get(1, "y", Some(4));
    h.get(1, "x", Some(1));
    assert_clean(&run(&h));
    h.get(1, "x", None);
    assert!(!run(&h).passed, "y=w4 follows x=w1");
}
