use crate::kit::testkit::{TestNet, bytes, channel, client_traffic, get, put};
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
