//! Per-operation session levels (Roohitavaf's NuKV, §4.2, Defs 4–7): a
//! read is held to exactly the guarantees its level asks for, and a value
//! counts as overwritten only in the order its writes' levels guarantee.
//! Each violating history sits next to a minimally different one that
//! passes.

mod common;

use causeway_check::{CheckConfig, CheckReport, Kind, Level, check};
use causeway_core::{ReadLevel, WriteLevel};
use common::H;

fn run(h: &H) -> CheckReport {
    check(&h.history(), &CheckConfig::at(Level::Sessions))
}

fn count(r: &CheckReport, k: Kind) -> usize {
    r.count(k)
}

#[test]
fn read_your_writes_binds_only_a_read_that_asks_for_it() {
    // Both writes at monotonic-write: w1 is ordered before w2.
    let build = |read: ReadLevel| {
        let mut h = H::new();
        h.put_at(0, "x", 1, WriteLevel::MonotonicWrite);
        h.put_at(0, "x", 2, WriteLevel::MonotonicWrite);
        h.get_at(0, "x", Some(1), read);
        h
    };
    let r = run(&build(ReadLevel::ReadYourWrite));
    assert_eq!(count(&r, Kind::ReadYourWrites), 1, "{r}");
    assert!(!r.passed, "{r}");
    let r = run(&build(ReadLevel::MonotonicRead));
    assert!(r.passed, "a monotonic read promised nothing about own writes:\n{r}");
    let r = run(&build(ReadLevel::Eventual));
    assert!(r.passed, "{r}");
}

#[test]
fn an_eventual_write_does_not_order_the_sessions_earlier_write_before_it() {
    // The same history, but w2 at eventual: w1 may win over it (NuKV's HLC
    // stamps w2 without the session's dtw), so reading w1 back is allowed.
    let mut h = H::new();
    h.put_at(0, "x", 1, WriteLevel::MonotonicWrite);
    h.put_at(0, "x", 2, WriteLevel::Eventual);
    h.get_at(0, "x", Some(1), ReadLevel::MonotonicReadYourWrite);
    let r = run(&h);
    assert!(r.passed, "{r}");
    // Reading nothing after writing is a violation at any write level.
    let mut h = H::new();
    h.put_at(0, "x", 2, WriteLevel::Eventual);
    h.get_at(0, "x", None, ReadLevel::ReadYourWrite);
    assert_eq!(count(&run(&h), Kind::ReadYourWrites), 1);
}

#[test]
fn monotonic_reads_follow_what_the_writes_levels_order() {
    // Session 0 writes w1 then w2; session 1 reads w2, then w1.
    let build = |second: WriteLevel, read: ReadLevel| {
        let mut h = H::new();
        h.put_at(0, "x", 1, WriteLevel::Eventual);
        h.put_at(0, "x", 2, second);
        h.get_at(1, "x", Some(2), ReadLevel::Eventual);
        h.get_at(1, "x", Some(1), read);
        h
    };
    let r = run(&build(WriteLevel::MonotonicWrite, ReadLevel::MonotonicRead));
    assert_eq!(count(&r, Kind::MonotonicReads), 1, "{r}");
    assert!(!r.passed);
    // Not ordered (w2 at write-follows-reads only): either may win.
    let r = run(&build(WriteLevel::WriteFollowsReads, ReadLevel::MonotonicRead));
    assert!(r.passed, "{r}");
    // Ordered, but the read did not ask for monotonic reads.
    let r = run(&build(WriteLevel::MonotonicWrite, ReadLevel::ReadYourWrite));
    assert!(r.passed, "{r}");
}

#[test]
fn write_follows_reads_orders_through_other_keys() {
    // Session 0 writes x=w1; session 1 reads it and writes y=w2 at
    // write-follows-reads; session 2 reads y=w2 and writes x=w3 at
    // write-follows-reads; so w1 < w2 < w3 (the HLC carries the order
    // across keys). Session 3 reading x=w3 then x=w1 at monotonic-read
    // breaks Def 4.
    let build = |middle: WriteLevel| {
        let mut h = H::new();
        h.put_at(0, "x", 1, WriteLevel::Eventual);
        h.get_at(1, "x", Some(1), ReadLevel::Eventual);
        h.put_at(1, "y", 2, middle);
        h.get_at(2, "y", Some(2), ReadLevel::Eventual);
        h.put_at(2, "x", 3, WriteLevel::WriteFollowsReads);
        h.get_at(3, "x", Some(3), ReadLevel::Eventual);
        h.get_at(3, "x", Some(1), ReadLevel::MonotonicRead);
        h
    };
    let r = run(&build(WriteLevel::WriteFollowsReads));
    assert_eq!(count(&r, Kind::MonotonicReads), 1, "{r}");
    // Break the chain in the middle (y=w2 at monotonic-write: the session
    // wrote nothing before it, so it follows nothing): no order, no violation.
    let r = run(&build(WriteLevel::MonotonicWrite));
    assert!(r.passed, "{r}");
}

#[test]
fn without_levels_a_history_is_judged_by_causality_as_before() {
    // The eventual-write history of above, with no levels named: causality
    // orders w1 before w2, so reading w1 back breaks read-your-writes.
    let mut h = H::new();
    h.put(0, "x", 1);
    h.put(0, "x", 2);
    h.get(0, "x", Some(1));
    assert_eq!(count(&run(&h), Kind::ReadYourWrites), 1);
}
