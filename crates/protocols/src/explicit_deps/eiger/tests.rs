use super::*;
use crate::explicit_deps::cops::tests::{
    an_independent_write_is_not_held_behind_a_blocked_one, pending_write_survives_a_restart,
};
use crate::kit::testkit::{Dest, InFlight, TestNet, bytes, channel, client_traffic, get, put, rot, text};
use causeway_core::DcId;
use causeway_core::{ClientId, Key, Op, OpResult};

const ALICE: ClientId = ClientId(0);
const READER: ClientId = ClientId(1);

/// Two keys of one DC on different partitions.
fn acl_and_album(net: &TestNet<Eiger>) -> (Key, Key) {
    for i in 0..100 {
        let (a, b) = (bytes(&format!("acl{i}")), bytes(&format!("album{i}")));
        if net.topology.partition_of(&a) != net.topology.partition_of(&b) {
            return (a, b);
        }
    }
    unreachable!()
}

fn second_round_reads(net: &TestNet<Eiger>) -> usize {
    net.queue.iter().filter(|m| matches!(m.msg, Msg::ReadAt { .. })).count()
}

/// Run the reader's pending operation to its end one message at a time,
/// counting second-round reads it sends.
fn finish(net: &mut TestNet<Eiger>, c: ClientId) -> (OpResult, usize) {
    let mut second_round = 0;
    loop {
        if let Some(r) = net.take_result(c) {
            return (r, second_round);
        }
        let before = second_round_reads(net);
        assert!(net.deliver_first(client_traffic), "the read transaction must complete");
        second_round += second_round_reads(net).saturating_sub(before);
    }
}

/// Fig 5.4(b) as the ACL/album race: the reader's transaction reads the
/// ACL (public, valid through the ACL server's time then); Alice makes the
/// ACL friends-only, then posts to the album; the reader's album read
/// returns the post, whose EVT is past the ACL's LVT. EffT is the album's
/// LVT; the ACL is read again at EffT and is friends-only.
fn acl_race(cfg: Config) -> (Vec<Option<String>>, usize) {
    let mut net = TestNet::<Eiger>::new(1, 2, 2, cfg);
    let (acl, album) = acl_and_album(&net);
    put(&mut net, ALICE, &acl, "public");
    put(&mut net, ALICE, &album, "old");
    let album_server = net.server_for(DcId(0), &album);
    net.invoke(READER, Op::Rot { keys: vec![acl.clone(), album.clone()] });
    let held = move |m: &InFlight<Msg>| m.from == Dest::Client(READER) && m.to == Dest::Node(album_server);
    net.deliver_while(|m| client_traffic(m) && !held(m));
    for (k, v) in [(&acl, "friends"), (&album, "personal")] {
        net.invoke(ALICE, Op::Put { key: k.clone(), value: bytes(v) });
        net.deliver_while(|m| client_traffic(m) && !held(m));
        assert_eq!(net.take_result(ALICE), Some(OpResult::Put));
    }
    let (r, second_round) = finish(&mut net, READER);
    let OpResult::Rot(vs) = r else { panic!("ROT returned {r:?}") };
    (vs.into_iter().map(text).collect(), second_round)
}

#[test]
fn a_read_transaction_never_returns_the_public_acl_with_the_personal_album() {
    let (got, second_round) = acl_race(Config::default());
    assert_eq!(got, vec![Some("friends".into()), Some("personal".into())]);
    assert_eq!(second_round, 1, "exactly the ACL is read again, at EffT");
}

/// The same race catches a transaction without its second round.
#[test]
fn the_one_round_mutant_returns_the_anomaly() {
    let (got, second_round) = acl_race(Config { mutant_one_round_rot: true, ..Config::default() });
    assert_eq!(got, vec![Some("public".into()), Some("personal".into())]);
    assert_eq!(second_round, 0);
}

/// No write concurrent with the transaction: exactly one round.
#[test]
fn a_quiet_read_transaction_takes_one_round() {
    let mut net = TestNet::<Eiger>::new(1, 2, 2, Config::default());
    let (acl, album) = acl_and_album(&net);
    put(&mut net, ALICE, &acl, "friends");
    put(&mut net, ALICE, &album, "personal");
    // The reader's first transaction may need a second round (the two
    // servers' clocks differ); its EffT then lifts the session's time.
    assert_eq!(rot(&mut net, READER, &[&acl, &album]), vec![Some("friends".into()), Some("personal".into())]);
    net.invoke(READER, Op::Rot { keys: vec![acl.clone(), album.clone()] });
    let (r, second_round) = finish(&mut net, READER);
    assert_eq!(second_round, 0);
    let OpResult::Rot(vs) = r else { panic!("{r:?}") };
    assert_eq!(vs.into_iter().map(text).collect::<Vec<_>>(), vec![Some("friends".into()), Some("personal".into())]);
}

/// EffT of Fig 5.5: the smallest LVT at or above the largest EVT.
#[test]
fn effective_time_is_the_smallest_lvt_reaching_the_largest_evt() {
    // Fig 5.4(a): [1,10] and [5,12] overlap; EffT = 10, one round.
    assert_eq!(effective_time(0, &[(1, 10), (5, 12)]), 10);
    // Fig 5.4(b): location 1 valid [1,10], location 2 [12,15]: EffT = 15.
    assert_eq!(effective_time(0, &[(1, 10), (12, 15)]), 15);
    // The session's time lifts it (deviation 2).
    assert_eq!(effective_time(11, &[(1, 11), (5, 12)]), 11);
    assert_eq!(effective_time(12, &[(1, 12), (5, 13)]), 12);
}

/// §5.3, limiting old values: a transaction whose second round asks for
/// a time before what the server kept restarts, and is then answered.
#[test]
fn a_second_round_for_a_collected_version_restarts() {
    let cfg = Config { trans_time_ms: 50, clock_margin_ms: 0, gc_interval_ms: 10, ..Config::default() };
    let mut net = TestNet::<Eiger>::new(1, 2, 2, cfg);
    let (acl, album) = acl_and_album(&net);
    put(&mut net, ALICE, &acl, "public");
    put(&mut net, ALICE, &album, "old");
    let (acl_server, album_server) = (net.server_for(DcId(0), &acl), net.server_for(DcId(0), &album));
    net.invoke(READER, Op::Rot { keys: vec![acl.clone(), album.clone()] });
    let held = move |m: &InFlight<Msg>| m.from == Dest::Client(READER) && m.to == Dest::Node(album_server);
    net.deliver_while(|m| client_traffic(m) && !held(m));
    for (k, v) in [(&acl, "friends"), (&album, "personal"), (&acl, "closed")] {
        net.invoke(ALICE, Op::Put { key: k.clone(), value: bytes(v) });
        net.deliver_while(|m| client_traffic(m) && !held(m));
        assert_eq!(net.take_result(ALICE), Some(OpResult::Put));
    }
    let second = move |m: &InFlight<Msg>| m.from == Dest::Client(READER) && matches!(m.msg, Msg::ReadAt { .. });
    net.deliver_while(|m| client_traffic(m) && !second(m));
    assert_eq!(second_round_reads(&net), 1);
    net.advance_clocks(200_000);
    net.fire_timers(acl_server);
    assert_eq!(net.stores[acl_server.idx()].versions(&acl).len(), 1, "friends-only ACL collected");
    net.deliver_while(client_traffic);
    assert_eq!(net.take_result(READER), None, "the restart waits out its back-off");
    net.fire_client_timers(READER);
    net.deliver_while(client_traffic);
    let r = net.take_result(READER).expect("the restarted transaction completes");
    let OpResult::Rot(vs) = r else { panic!("{r:?}") };
    let got: Vec<Option<String>> = vs.into_iter().map(text).collect();
    assert_eq!(got, vec![Some("closed".into()), Some("personal".into())]);
}

/// Remote DC, valid times across servers: x is written in DC0, read and
/// followed by y in DC0. At DC1, x's replicate is held, so y waits on its
/// dep_check of x. A reader of DC1 sees neither, then, once x arrives, a
/// transaction over both sees both: y's EVT at DC1 is after x's, because
/// the DepOk carried x's server's clock.
#[test]
fn a_remote_write_is_valid_only_after_its_dependency() {
    let mut net = TestNet::<Eiger>::new(2, 2, 1, Config::default());
    let (x, y) = acl_and_album(&net);
    let (w, r) = (net.client(0, 0), net.client(1, 0));
    let (x0, x1) = (net.server_for(DcId(0), &x), net.server_for(DcId(1), &x));
    put(&mut net, w, &x, "x1");
    assert_eq!(get(&mut net, w, &x), Some("x1".into()));
    put(&mut net, w, &y, "y1");
    net.deliver_while(|m| !channel::<Msg>(x0, x1)(m) && !client_traffic(m));
    assert_eq!(rot(&mut net, r, &[&x, &y]), vec![None, None], "y waits for x at DC1");
    net.deliver_all();
    assert_eq!(rot(&mut net, r, &[&x, &y]), vec![Some("x1".into()), Some("y1".into())]);
    let (y1, x1v) = (net.latest(net.server_for(DcId(1), &y), &y), net.latest(x1, &x));
    assert!(y1.evt() > x1v.evt(), "y is applied at DC1 logically after x");
}

/// The shared replication path's scenarios (COPS's tests), for Eiger.
#[test]
fn the_shared_replication_scenarios_hold_for_eiger() {
    pending_write_survives_a_restart::<Eiger>(Config::default());
    an_independent_write_is_not_held_behind_a_blocked_one::<Eiger>(Config::default());
}
