use super::*;
use crate::kit::testkit::{
    self, Dest, InFlight, TestNet, bytes, channel, get, put, rot, stabilize, stabilize_holding, text,
};
use crate::stabilization::testnet::{self, DC0, DC1, cl};
use causeway_core::{ClientId, Key, NodeId, Op, OpError, OpResult, Protocol, TopologySpec, vleq};

testnet::test_net!(Cure);

fn part(net: &Net, n: NodeId) -> &Partition {
    net.nodes[n.idx()].server().part.as_ref().expect("a partition server")
}

fn step(net: &mut Net) -> Vec<InFlight<Msg>> {
    let layer = net.queue.clone();
    for _ in 0..layer.len() {
        net.deliver_first(|_| true);
    }
    layer
}

fn of_client(c: ClientId) -> impl Fn(&InFlight<Msg>) -> bool {
    move |m| m.from == Dest::Client(c) || m.to == Dest::Client(c)
}

/// Deliver `c`'s traffic, letting the clocks run (1 ms a round) and the
/// servers' timers fire while a request of it waits, until it completes.
fn finish(net: &mut Net, c: ClientId, pred: impl Fn(&InFlight<Msg>) -> bool) -> OpResult {
    for _ in 0..20_000 {
        net.deliver_while(&pred);
        if let Some(r) = net.take_result(c) {
            return r;
        }
        net.advance_clocks(1_000);
        net.fire_all_timers();
    }
    panic!("client {c:?}'s operation never completed");
}

fn values(r: OpResult) -> Vec<Option<String>> {
    match r {
        OpResult::Rot(vs) => vs.into_iter().map(text).collect(),
        other => panic!("expected a ROT result, got {other:?}"),
    }
}

#[test]
fn validate_rejects_partial_replication_and_zero_settings() {
    let full = testkit::full_replication(2, 2);
    assert!(Cure::validate(&Config::default(), &full).is_ok());
    assert!(Cure::validate(&Config { max_clock_wait_us: 0, ..Config::default() }, &full).is_err());
    assert!(Cure::validate(&Config { stabilization_interval_us: 0, ..Config::default() }, &full).is_err());
    assert!(Cure::validate(&Config::default(), &testkit::partial_replication()).is_err());
}

#[test]
fn local_writes_are_visible_and_remote_ones_wait_for_the_gst() {
    let mut net = net(2, 2);
    let [a, b] = &net.distinct_keys();
    net.advance_clocks(1_000);
    put(&mut net, cl(0, 0), a, "a1");
    net.advance_clocks(10);
    put(&mut net, cl(0, 0), b, "b1");
    net.advance_clocks(10);
    assert_eq!(rot(&mut net, cl(0, 1), &[b, a]), vec![Some("b1".into()), Some("a1".into())]);
    let (a0, a1, b1) = (net.server_for(DC0, a), net.server_for(DC1, a), net.server_for(DC1, b));
    let hold_a = channel(a0, a1);
    net.advance_clocks(20_000);
    stabilize_holding(&mut net, &hold_a);
    assert!(!vleq(&net.latest(b1, b).dv, &part(&net, b1).gst), "b1 arrived, not covered");
    assert_eq!(get(&mut net, cl(1, 0), b), None);
    assert_eq!(net.visible_reports(b1, b, "b1"), 0);
    net.deliver_while(|m| hold_a(m));
    stabilize(&mut net);
    assert_eq!(net.visible_reports(b1, b, "b1"), 1);
    net.advance_clocks(10);
    assert_eq!(rot(&mut net, cl(1, 0), &[b, a]), vec![Some("b1".into()), Some("a1".into())]);
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Coord {
    X,
    Y,
    Z,
}

/// Didona et al. §3, Fig. 1: ROT(x, y) racing PUT(x, X1) → PUT(y, Y1).
/// Returns what the ROT read of x and y.
fn figure_1_race(cfg: Config, coord: Coord, clocks_us: [u64; 3]) -> [Option<String>; 2] {
    let mut net = net_with(1, 3, cfg);
    let [x, y, z] = &net.distinct_keys();
    let (c1, c2) = (cl(0, 0), cl(0, 1));
    put(&mut net, c2, x, "X0");
    net.advance_clocks(10);
    put(&mut net, c2, y, "Y0");
    let py = net.server_for(DC0, y);
    for (k, us) in [x, y, z].into_iter().zip(clocks_us) {
        let n = net.server_for(DC0, k);
        net.clocks[n.idx()] = us;
    }
    let keys = match coord {
        Coord::X => vec![x.clone(), y.clone()],
        Coord::Y => vec![y.clone(), x.clone()],
        Coord::Z => vec![z.clone(), x.clone(), y.clone()],
    };
    net.invoke(c1, Op::Rot { keys });
    net.deliver_while(|m| m.to != Dest::Node(py));
    for (k, v) in [(x, "X1"), (y, "Y1")] {
        net.invoke(c2, Op::Put { key: k.clone(), value: bytes(v) });
        assert_eq!(finish(&mut net, c2, of_client(c2)), OpResult::Put);
    }
    let got = values(finish(&mut net, c1, |_| true));
    match coord {
        Coord::X => [got[0].clone(), got[1].clone()],
        Coord::Y => [got[1].clone(), got[0].clone()],
        Coord::Z => [got[1].clone(), got[2].clone()],
    }
}

#[test]
fn figure_1_race_never_returns_x0_with_y1_and_the_mutant_that_skips_the_clock_wait_does() {
    let bad = [Some("X0".to_string()), Some("Y1".to_string())];
    let clocks = [
        [10_000, 10_000, 10_000],
        [5_000_000, 10_000, 10_000],
        [10_000, 5_000_000, 10_000],
        [10_000, 10_000, 5_000_000],
    ];
    let mut mutant_caught = false;
    for cs in clocks {
        for coord in [Coord::X, Coord::Y, Coord::Z] {
            let got = figure_1_race(Config::default(), coord, cs);
            assert_ne!(got, bad, "clocks {cs:?}, {coord:?} coordinates");
            if coord == Coord::X {
                assert_eq!(got[0], Some("X0".into()), "the race happened");
            }
            let mutant = Config { mutant_skip_clock_wait: true, ..Config::default() };
            mutant_caught |= figure_1_race(mutant, coord, cs) == bad;
        }
    }
    assert!(mutant_caught, "reading before the clock passes TV[m] must show the Fig. 1 anomaly");
}

#[test]
fn a_rot_takes_two_rounds_four_steps_and_a_get_one() {
    let mut net = net(1, 4);
    let keys: Vec<Key> = net.keys_on_distinct_partitions(4);
    for k in &keys {
        put(&mut net, cl(0, 1), k, "v");
        net.advance_clocks(10);
    }
    net.advance_clocks(10);
    net.invoke(cl(0, 0), Op::Rot { keys: keys.clone() });
    let mut msgs = Vec::new();
    let mut steps = 0;
    while net.results[0].is_none() {
        msgs.extend(step(&mut net));
        steps += 1;
        assert!(steps < 10);
    }
    assert_eq!((steps, msgs.len()), (4, 2 * 4 + 2));
    let slices = msgs.iter().filter(|m| matches!(&m.msg, Msg::RotSlice { slice: Ok(s), .. } if s.values.len() == 1));
    assert_eq!(slices.count(), 4, "one version per key from each partition");
    assert_eq!(net.take_result(cl(0, 0)), Some(OpResult::Rot(vec![Some(bytes("v")); 4])));
    net.invoke(cl(0, 0), Op::Get { key: keys[0].clone() });
    let mut n = step(&mut net).len();
    n += step(&mut net).len();
    assert_eq!(n, 2);
    assert_eq!(net.take_result(cl(0, 0)), Some(OpResult::Get(Some(bytes("v")))));
}

/// Cure's blocking: a client that wrote at a partition whose clock runs
/// 50 ms ahead reads through a lagging one, which must wait for its clock
/// to pass the snapshot; its next PUT there waits too. Both are reported.
#[test]
fn skewed_clocks_block_rots_and_puts_and_the_waits_are_reported() {
    let mut net = net(1, 2);
    let [x, y] = &net.distinct_keys();
    let (px, py) = (net.server_for(DC0, x), net.server_for(DC0, y));
    net.clocks[px.idx()] = 51_000;
    let c = cl(0, 0);
    put(&mut net, c, x, "x");
    net.invoke(c, Op::Rot { keys: vec![y.clone(), x.clone()] });
    assert_eq!(values(finish(&mut net, c, |_| true)), vec![None, Some("x".into())]);
    let waits = net.blocked("rot_clock_wait");
    assert!(waits.iter().any(|&(n, us)| n == py && us >= 40_000), "{waits:?}");
    net.clocks[py.idx()] = 30_000; // now well behind what the client has seen

    net.invoke(c, Op::Put { key: y.clone(), value: bytes("y") });
    assert_eq!(finish(&mut net, c, |_| true), OpResult::Put);
    assert!(!net.blocked("put_clock_wait").is_empty());
    assert!(net.latest(py, y).ts > net.latest(px, x).ts);
}

/// Deviation 7: PUTs at one clock reading (one turn of the runtime) are
/// stamped one above another without waiting, a session's next PUT too
/// (its dependency is this partition's own stamp), until a stamp would lead
/// the clock by more than `STAMP_LEAD_US`; that PUT waits for the clock.
#[test]
fn puts_at_one_clock_reading_are_stamped_apart_up_to_the_lead() {
    let mut net = net(1, 1);
    let k = net.key_on(0);
    let p = net.server_for(DC0, &k);
    let now = net.clocks[p.idx()];
    let c = cl(0, 0);
    for i in 0..=STAMP_LEAD_US {
        net.invoke(c, Op::Put { key: k.clone(), value: bytes("v") });
        net.deliver_client_traffic();
        assert_eq!(net.take_result(c), Some(OpResult::Put), "PUT {i} waited");
        assert_eq!(net.latest(p, &k).ts, now + i, "PUT {i}'s stamp");
    }
    assert!(net.blocked("put_clock_wait").is_empty());
    // A fresh session reads the newest of them at once, the clock still
    // where it was: its snapshot holds every stamp handed out.
    let fresh = cl(0, 1);
    net.invoke(fresh, Op::Get { key: k.clone() });
    net.deliver_client_traffic();
    assert_eq!(net.take_result(fresh), Some(OpResult::Get(Some(bytes("v")))), "a write stamped ahead of the clock");
    assert!(net.blocked("rot_clock_wait").is_empty());
    net.invoke(c, Op::Put { key: k.clone(), value: bytes("w") });
    net.deliver_client_traffic();
    assert_eq!(net.take_result(c), None, "a stamp {} µs ahead of the clock", STAMP_LEAD_US + 1);
    assert_eq!(finish(&mut net, c, |_| true), OpResult::Put);
    assert!(!net.blocked("put_clock_wait").is_empty());
    assert!(net.latest(p, &k).ts > now + STAMP_LEAD_US);
}

#[test]
fn a_wait_beyond_the_bound_is_refused_not_endless() {
    let cfg = Config { max_clock_wait_us: 1_000_000, ..Config::default() };
    let mut net = net_with(1, 2, cfg);
    let [x, y] = &net.distinct_keys();
    let px = net.server_for(DC0, x);
    net.clocks[px.idx()] = 100_000_000;
    let c = cl(0, 0);
    put(&mut net, c, x, "x");
    net.invoke(c, Op::Put { key: y.clone(), value: bytes("y") });
    net.deliver_all();
    assert!(matches!(net.take_result(c), Some(OpResult::Failed(OpError::Aborted(_)))));
}

#[test]
fn bad_requests_get_typed_errors() {
    let mut net = net(2, 2);
    let [x, y] = &net.distinct_keys();
    let px = net.server_for(DC0, x);
    let c = cl(0, 0);
    // A partition judges a snapshot against its VV once it has heard from
    // every DC since it started; before that the snapshot may be one it
    // forgot in a crash, and a read waits instead.
    net.advance_clocks(10);
    stabilize(&mut net);
    let ask = |net: &mut Net, msg: Msg| {
        net.queue.push(InFlight::new(Dest::Client(c), Dest::Node(px), msg));
        net.deliver_first(|m| m.to == Dest::Node(px));
        let i = net.queue.iter().position(|m| m.to == Dest::Client(c)).expect("a reply");
        net.queue.remove(i).msg
    };
    let refused = |m: &Msg| {
        matches!(
            m,
            Msg::RotSlice { slice: Err(OpError::BadRequest(_)), .. }
                | Msg::PutReply(Err(OpError::BadRequest(_)))
                | Msg::SnapshotReply { tv: Err(OpError::BadRequest(_)), .. }
        )
    };
    for msg in [
        Msg::RotReadAt { rot: 1, keys: vec![y.clone()], tv: vec![0, 0] },
        Msg::PutReq { key: x.clone(), value: bytes("v"), last: [0].into_iter().collect() },
        Msg::RotReadAt { rot: 2, keys: vec![x.clone()], tv: vec![0, 1 << 50] },
        Msg::SnapshotReq { rot: 3, last: vec![0, 1 << 50] },
        Msg::ReadOne { rot: 4, keys: vec![], last: [0, 0].into_iter().collect() },
    ] {
        let r = ask(&mut net, msg);
        assert!(refused(&r), "{r:?}");
    }
    put(&mut net, c, x, "fine");
    net.advance_clocks(10);
    assert_eq!(get(&mut net, c, x), Some("fine".into()));
}

/// See [`testnet::a_partition_restarted_with_nothing_stored_serves`].
#[test]
fn a_partition_restarted_with_nothing_stored_takes_the_gst_it_forgot() {
    testnet::a_partition_restarted_with_nothing_stored_serves::<Cure>(|net, n| part(net, n).gst.iter().all(|&g| g > 0));
}

testnet::restart_tests!(Cure);

/// Liveness across a restart while another DC is away: a partition that
/// comes back with VV[1] below a session's snapshot must not make that
/// session's reads wait for DC 1, which may be cut off for as long as a
/// partition lasts (Cure promises local reads while a DC is away).
#[test]
fn a_restart_while_dc1_is_away_does_not_block_local_reads() {
    let cfg = Config::default();
    let mut net = net_with(2, 1, cfg.clone());
    let x = &net.keys_on_distinct_partitions(1)[0];
    let (p0, p1) = (net.server_for(DC0, x), net.server_for(DC1, x));
    let c = cl(0, 0);
    put(&mut net, c, x, "X");
    for _ in 0..3 {
        net.advance_clocks(5_000);
        stabilize(&mut net); // DC 1's heartbeats raise DC 0's GST[1]
    }
    assert_eq!(get(&mut net, c, x), Some("X".into()));
    assert!(part(&net, p0).gst[1] > 0, "the session's snapshot has seen DC 1's heartbeats");
    net.restart(p0, &cfg);
    let from_dc1 = move |m: &InFlight<Msg>| m.from == Dest::Node(p1);
    let r = net.run_dropping(c, Op::Get { key: x.clone() }, from_dc1);
    assert_eq!(r, Some(OpResult::Get(Some(bytes("X")))), "the read must complete while DC 1 is away");
}
