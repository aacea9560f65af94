use crate::kit::testkit::{InFlight, TestNet, bytes, channel, client_traffic, get, put};
use causeway_core::DcId;
use causeway_core::{ClientId, Protocol};

/// A replicated write waiting for its dependency survives a crash of
/// the node holding it: x is written in DC0, read and followed by a
/// write of y in DC1; DC2 receives y first, so y waits for x; DC2's
/// server restarts; then x arrives and y must still be applied.
pub(crate) fn pending_write_survives_a_restart<P: Protocol>(cfg: P::Config) {
    let mut net = TestNet::<P>::new(3, 1, 1, cfg.clone());
    let (c0, c1, c2) = (ClientId(0), ClientId(1), ClientId(2));
    let (x, y) = (bytes("x"), bytes("y"));
    let [n0, n1, n2] = [0, 1, 2].map(|d| net.server_for(DcId(d), b"x"));
    put(&mut net, c0, &x, "x1");
    net.deliver_while(channel(n0, n1));
    assert_eq!(get(&mut net, c1, &x), Some("x1".into()));
    put(&mut net, c1, &y, "y1");
    net.deliver_while(|m| !channel::<P::Msg>(n0, n2)(m) && !client_traffic(m));
    assert_eq!(get(&mut net, c2, &y), None, "y waits for x at DC2");
    net.restart(n2, &cfg);
    net.deliver_all();
    for _ in 0..3 {
        net.advance_clocks(2_000_000);
        net.fire_all_timers();
        net.deliver_all();
    }
    assert_eq!(get(&mut net, c2, &x), Some("x1".into()));
    assert_eq!(get(&mut net, c2, &y), Some("y1".into()), "the pending write was lost in the crash");
}

#[test]
fn a_pending_replicated_write_survives_a_restart() {
    pending_write_survives_a_restart::<super::Cops>(Default::default());
    pending_write_survives_a_restart::<crate::cops_gt::CopsGt>(Default::default());
}

/// No head-of-line blocking behind a cut-off dependency: DC1's server
/// replicates `y`, which depends on `x` from DC2, and then an independent `z`. DC0 is cut
/// off from DC2, so `y` waits at DC0 for as long as the cut lasts; `z`
/// needs nothing and must be visible at DC0 at once (the paper commits a
/// write as soon as its own checks pass). A second write of `y` from the
/// same origin still waits for the first. A restart of DC0's server keeps
/// both `z` committed and `y` pending; after the heal `y` commits too.
pub(crate) fn an_independent_write_is_not_held_behind_a_blocked_one<P: Protocol>(cfg: P::Config) {
    let mut net = TestNet::<P>::new(3, 1, 2, cfg.clone());
    let c = |dc: u32, i: u32| ClientId(dc * 2 + i);
    let (x, y, z) = (bytes("x"), bytes("y"), bytes("z"));
    let [n0, n1, n2] = [0, 1, 2].map(|d| net.server_for(DcId(d), b"x"));
    let cut = move |m: &InFlight<P::Msg>| channel::<P::Msg>(n2, n0)(m) || channel::<P::Msg>(n0, n2)(m);
    put(&mut net, c(2, 0), &x, "x1");
    net.deliver_while(channel(n2, n1));
    assert_eq!(get(&mut net, c(1, 0), &x), Some("x1".into()));
    put(&mut net, c(1, 0), &y, "y1"); // depends on x
    put(&mut net, c(1, 1), &z, "z1"); // depends on nothing
    // Another write of y from the same origin: it waits for y1, because a
    // session that read y1 and then y2 keeps only y2 (one stamp per key and
    // origin), so y2 must imply y1 and x.
    put(&mut net, c(1, 1), &y, "y2");
    net.deliver_while(|m| !cut(m) && !client_traffic(m));
    assert_eq!(get(&mut net, c(0, 0), &y), None, "y1 waits for x, which is cut off, and y2 for y1");
    assert_eq!(get(&mut net, c(0, 0), &z), Some("z1".into()), "z is held behind y: head-of-line blocking");
    // Recovery keeps the committed-above-the-low-water-mark write and the pending one.
    net.restart(n0, &cfg);
    net.deliver_while(|m| !cut(m));
    assert_eq!(get(&mut net, c(0, 1), &z), Some("z1".into()), "z survives a restart");
    assert_eq!(get(&mut net, c(0, 1), &y), None, "y still waits after the restart");
    // The heal: x arrives, y commits.
    for _ in 0..3 {
        net.advance_clocks(2_000_000);
        net.fire_all_timers();
        net.deliver_all();
    }
    assert_eq!(get(&mut net, c(0, 1), &x), Some("x1".into()));
    assert_eq!(get(&mut net, c(0, 1), &y), Some("y2".into()));
    // Later writes from the same origin still commit.
    put(&mut net, c(1, 1), &z, "z2");
    net.deliver_while(|m| !client_traffic(m));
    assert_eq!(get(&mut net, c(0, 1), &z), Some("z2".into()));
}

#[test]
fn an_independent_write_commits_while_a_third_dc_is_cut_off() {
    an_independent_write_is_not_held_behind_a_blocked_one::<super::Cops>(Default::default());
    an_independent_write_is_not_held_behind_a_blocked_one::<crate::cops_gt::CopsGt>(Default::default());
}
