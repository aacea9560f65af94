use super::*;
use crate::kit::testkit::{
    self, Dest, InFlight, TestNet, bytes, channel, get, put, rot, server_to_server, stabilize, stabilize_holding, text,
};
use crate::stabilization::testnet::{self, DC0, DC1, cl};
use causeway_core::TopologySpec;
use causeway_core::{ClientId, DcId, Hlc, Key, NodeId, Op, OpError, OpResult, Protocol, vleq};

testnet::test_net!(Contrarian);

fn cfg_steps(steps: u8) -> Config {
    Config { rot_steps: steps, ..Config::default() }
}

fn part(net: &Net, n: NodeId) -> &Partition {
    net.nodes[n.idx()].server().part.as_ref().expect("a partition server")
}

/// Deliver the messages in flight now, not the ones they cause: one
/// communication step. Returns what was delivered.
fn step(net: &mut Net) -> Vec<InFlight<Msg>> {
    let layer = net.queue.clone();
    for _ in 0..layer.len() {
        net.deliver_first(|_| true);
    }
    layer
}

/// A client's own requests and replies.
fn of_client(c: ClientId) -> impl Fn(&InFlight<Msg>) -> bool {
    move |m| m.from == Dest::Client(c) || m.to == Dest::Client(c)
}

fn values(r: Option<OpResult>) -> Vec<Option<String>> {
    match r {
        Some(OpResult::Rot(vs)) => vs.into_iter().map(text).collect(),
        other => panic!("expected a ROT result, got {other:?}"),
    }
}

#[test]
fn validate_rejects_bad_rot_steps_partial_replication_and_zero_intervals() {
    let full = testkit::full_replication(2, 2);
    assert!(Contrarian::validate(&Config::default(), &full).is_ok());
    assert!(Contrarian::validate(&cfg_steps(4), &full).is_ok());
    let err = Contrarian::validate(&cfg_steps(2), &full).unwrap_err();
    assert!(err.contains("rot_steps"), "{err}");
    assert!(Contrarian::validate(&Config { heartbeat_interval_us: 0, ..Config::default() }, &full).is_err());
    assert!(Contrarian::validate(&Config { clock_lease_us: 0, ..Config::default() }, &full).is_err());
    assert!(Contrarian::validate(&Config::default(), &testkit::partial_replication()).is_err());
}

#[test]
fn local_writes_are_visible_at_once_in_both_rot_modes() {
    for steps in [3, 4] {
        let mut net = net_with(2, 3, cfg_steps(steps));
        let ks = net.keys_on_distinct_partitions(3);
        put(&mut net, cl(0, 0), &ks[0], "a");
        put(&mut net, cl(0, 0), &ks[1], "b");
        assert_eq!(get(&mut net, cl(0, 1), &ks[0]), Some("a".into()));
        assert_eq!(rot(&mut net, cl(0, 1), &[&ks[2], &ks[1], &ks[0]]), vec![None, Some("b".into()), Some("a".into())]);
        assert_eq!(get(&mut net, cl(1, 0), &ks[0]), None, "not yet in the other DC");
        net.assert_never_blocked();
    }
}

/// Which partition coordinates the Fig. 1 ROT: x's, y's, or a third one
/// (z's) whose clock may run far ahead of both.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Coord {
    X,
    Y,
    Z,
}

/// The paper's Fig. 1 (Didona et al. §3): c1 runs ROT(x, y) while c2 does
/// PUT(x, X1) then PUT(y, Y1); c1's read of x reaches p_x before PUT(x, X1)
/// and its read of y reaches p_y after PUT(y, Y1). (X0, Y1) would violate
/// causality, since X0 ⇝ X1 ⇝ Y1. Returns what the ROT read of x and y.
fn figure_1_race(cfg: Config, coord: Coord, clocks_us: [u64; 3]) -> [Option<String>; 2] {
    let mut net = net_with(1, 3, cfg);
    let [x, y, z] = &net.distinct_keys();
    let (c1, c2) = (cl(0, 0), cl(0, 1));
    put(&mut net, c2, x, "X0");
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
    // Everything of the ROT that does not go to p_y: the read of x (and the
    // snapshot, unless p_y coordinates) happens now.
    net.deliver_while(|m| m.to != Dest::Node(py));
    for (k, v) in [(x, "X1"), (y, "Y1")] {
        net.invoke(c2, Op::Put { key: k.clone(), value: bytes(v) });
        net.deliver_while(of_client(c2));
        assert_eq!(net.take_result(c2), Some(OpResult::Put));
    }
    net.deliver_all();
    let got = values(net.take_result(c1));
    net.assert_never_blocked();
    match coord {
        Coord::X => [got[0].clone(), got[1].clone()],
        Coord::Y => [got[1].clone(), got[0].clone()],
        Coord::Z => [got[1].clone(), got[2].clone()],
    }
}

#[test]
fn figure_1_race_never_returns_x0_with_y1() {
    let bad = [Some("X0".to_string()), Some("Y1".to_string())];
    for steps in [3, 4] {
        for logical_clocks in [false, true] {
            for clocks in
                [[1_000, 1_000, 1_000], [5_000_000, 1_000, 1_000], [1_000, 5_000_000, 1_000], [1_000, 1_000, 5_000_000]]
            {
                for coord in [Coord::X, Coord::Y, Coord::Z] {
                    let cfg = Config { rot_steps: steps, logical_clocks, ..Config::default() };
                    let got = figure_1_race(cfg, coord, clocks);
                    let case = format!(
                        "rot_steps {steps}, logical {logical_clocks}, clocks {clocks:?}, {coord:?} coordinates"
                    );
                    assert_ne!(got, bad, "{case}");
                    if coord != Coord::Y {
                        // The race really happened: x was read before X1 existed.
                        assert_eq!(got[0], Some("X0".into()), "{case}");
                    }
                }
            }
        }
    }
}

/// Run a ROT of `keys` one communication step at a time. Returns the
/// number of steps, every message of the ROT, and the result.
fn stepped(net: &mut Net, c: ClientId, keys: &[Key]) -> (usize, Vec<InFlight<Msg>>, OpResult) {
    assert!(net.queue.is_empty());
    net.invoke(c, Op::Rot { keys: keys.to_vec() });
    let mut all = Vec::new();
    for steps in 1..=10 {
        all.extend(step(net));
        if let Some(r) = net.take_result(c) {
            assert!(net.queue.is_empty(), "nothing of the ROT is left in flight");
            return (steps, all, r);
        }
    }
    panic!("the ROT did not complete in 10 steps");
}

#[test]
fn one_and_a_half_rounds_take_three_steps_and_two_rounds_four() {
    for (steps_cfg, want_steps) in [(3u8, 3usize), (4, 4)] {
        let mut net = net_with(1, 4, cfg_steps(steps_cfg));
        let mut keys = net.keys_on_distinct_partitions(4);
        // A second key on the first partition: that partition reads two keys.
        let extra = (0..)
            .map(|i| bytes(&format!("extra{i}")))
            .find(|k| net.topology.partition_of(k) == net.topology.partition_of(&keys[0]));
        keys.push(extra.unwrap());
        // Several versions of every key: a partition must still return one.
        for v in 0..3 {
            for k in &keys {
                put(&mut net, cl(0, 1), k, &format!("v{v}"));
            }
        }
        let (steps, msgs, result) = stepped(&mut net, cl(0, 0), &keys);
        assert_eq!(steps, want_steps, "rot_steps = {steps_cfg}");
        let p = 4;
        let want_msgs = if steps_cfg == 3 { 3 * p - 1 } else { 2 * p + 2 };
        assert_eq!(msgs.len(), want_msgs, "rot_steps = {steps_cfg}: {msgs:#?}");
        // Exactly one reply per partition, with one value per key it was asked.
        let slices: Vec<&InFlight<Msg>> = msgs.iter().filter(|m| matches!(m.msg, Msg::RotSlice { .. })).collect();
        assert_eq!(slices.len(), p);
        let mut values_returned = 0;
        for s in slices {
            let Msg::RotSlice { slice: Ok(slice), .. } = &s.msg else { panic!("a failed slice: {s:?}") };
            let Dest::Node(n) = s.from else { unreachable!() };
            let asked = keys.iter().filter(|k| net.server_for(DC0, k) == n).count();
            assert_eq!(slice.values.len(), asked, "one version per requested key");
            values_returned += slice.values.len();
        }
        assert_eq!(values_returned, keys.len());
        assert_eq!(result, OpResult::Rot(vec![Some(bytes("v2")); 5]));
        net.assert_never_blocked();
    }
}

#[test]
fn a_get_or_a_one_partition_rot_takes_one_round_in_either_mode() {
    for steps_cfg in [3, 4] {
        let mut net = net_with(1, 2, cfg_steps(steps_cfg));
        let k = net.key_on(0);
        put(&mut net, cl(0, 1), &k, "v");
        net.invoke(cl(0, 0), Op::Get { key: k.clone() });
        let mut msgs = step(&mut net);
        msgs.extend(step(&mut net));
        assert_eq!(msgs.len(), 2);
        assert_eq!(net.take_result(cl(0, 0)), Some(OpResult::Get(Some(bytes("v")))));
        let (steps, msgs, _) = stepped(&mut net, cl(0, 0), &[k.clone(), k.clone()]);
        assert_eq!((steps, msgs.len()), (2, 2));
    }
}

#[test]
fn a_remote_version_is_invisible_until_its_dv_is_covered_by_the_gss() {
    for steps in [3, 4] {
        let mut net = net_with(2, 2, cfg_steps(steps));
        let [a, b] = &net.distinct_keys();
        put(&mut net, cl(0, 0), a, "a1");
        put(&mut net, cl(0, 0), b, "b1"); // b1 follows a1: b1.ts > a1.ts
        let (a0, a1, b1) = (net.server_for(DC0, a), net.server_for(DC1, a), net.server_for(DC1, b));
        let hold_a = channel(a0, a1);
        net.advance_clocks(20_000);
        stabilize_holding(&mut net, &hold_a);
        // b1 is at DC1, but the GSS does not cover it: a1's partition has not
        // heard from DC0 since before a1.
        let b1v = net.latest(b1, b);
        assert_eq!(b1v.value, bytes("b1"));
        let gss = part(&net, b1).gss.clone();
        assert!(!vleq(&b1v.dv, &gss), "b1.DV {:?} is not ≤ GSS {gss:?}", b1v.dv);
        assert_eq!(get(&mut net, cl(1, 0), b), None);
        assert_eq!(rot(&mut net, cl(1, 0), &[b, a]), vec![None, None]);
        assert_eq!(net.visible_reports(b1, b, "b1"), 0);
        // a1 arrives and the GSS moves past both.
        net.deliver_while(|m| hold_a(m));
        stabilize(&mut net);
        assert!(vleq(&net.latest(b1, b).dv, &part(&net, b1).gss));
        assert_eq!(net.visible_reports(b1, b, "b1"), 1);
        assert_eq!(net.visible_reports(a1, a, "a1"), 1);
        assert_eq!(rot(&mut net, cl(1, 0), &[b, a]), vec![Some("b1".into()), Some("a1".into())]);
        testnet::assert_reported_once(&mut net, b1, b, "b1");
        net.assert_never_blocked();
    }
}

/// A write's DV carries the remote entries of what its writer read: w,
/// written in DC0 after reading z from DC2, stays invisible in DC1 until
/// DC1's GSS covers z — even though w itself has arrived and nothing from
/// DC0 is missing.
#[test]
fn a_dependency_on_a_third_dc_holds_a_version_back() {
    let mut net = net(3, 2);
    let [z, w] = &net.distinct_keys();
    let z2 = net.server_for(DcId(2), z);
    let z1 = net.server_for(DC1, z);
    put(&mut net, cl(2, 0), z, "z");
    let hold_z = channel(z2, z1);
    net.advance_clocks(20_000);
    stabilize_holding(&mut net, &hold_z);
    assert_eq!(get(&mut net, cl(0, 0), z), Some("z".into()), "DC0 has z");
    put(&mut net, cl(0, 0), w, "w after z");
    net.advance_clocks(20_000);
    stabilize_holding(&mut net, &hold_z);
    let w1 = net.server_for(DC1, w);
    assert_eq!(net.latest(w1, w).value, bytes("w after z"), "w has arrived at DC1");
    assert_eq!(get(&mut net, cl(1, 0), w), None);
    assert_eq!(rot(&mut net, cl(1, 0), &[w, z]), vec![None, None]);
    net.deliver_while(|m| hold_z(m));
    stabilize(&mut net);
    assert_eq!(rot(&mut net, cl(1, 0), &[w, z]), vec![Some("w after z".into()), Some("z".into())]);
}

#[test]
fn gss_and_client_snapshots_are_monotonic() {
    let mut net = net(2, 3);
    let ks = net.keys_on_distinct_partitions(3);
    let servers: Vec<NodeId> = net.topology.dc_servers(DC0).chain(net.topology.dc_servers(DC1)).collect();
    let mut gss: Vec<Vec<Hlc>> = servers.iter().map(|&n| part(&net, n).gss.clone()).collect();
    let mut last: Vec<Vec<Hlc>> = (0..4).map(|c| net.clients[c].last.clone()).collect();
    for round in 0..30u64 {
        let c = cl((round % 2) as u16, (round / 2 % 2) as u32);
        let k = &ks[(round % 3) as usize];
        match round % 3 {
            0 => put(&mut net, c, k, &format!("v{round}")),
            1 => drop(rot(&mut net, c, &[&ks[2], &ks[0], &ks[1]])),
            _ => drop(get(&mut net, c, k)),
        }
        net.advance_clocks(3_000);
        if round % 4 == 0 {
            stabilize(&mut net);
        }
        for (i, &n) in servers.iter().enumerate() {
            let now = part(&net, n).gss.clone();
            assert!(vleq(&gss[i], &now), "GSS of {n:?} went back: {:?} → {now:?}", gss[i]);
            gss[i] = now;
        }
        for (i, l) in last.iter_mut().enumerate() {
            let now = net.clients[i].last.clone();
            assert!(vleq(l, &now), "client {i}'s snapshot went back: {l:?} → {now:?}");
            *l = now;
        }
    }
    assert!(gss.iter().all(|g| g.iter().all(|t| *t > Hlc::ZERO)), "the GSS moved: {gss:?}");
}

/// The client's last snapshot is what keeps its ROTs from going back: a
/// client writes x at a partition whose clock runs far ahead, then reads
/// (y, x) through y's partition, whose clock lags. Piggybacked, TV[m]
/// covers its write; without (the mutant), the ROT misses it.
fn own_write_through_a_lagging_coordinator(cfg: Config) -> Vec<Option<String>> {
    let mut net = net_with(1, 2, cfg);
    let [x, y] = &net.distinct_keys();
    let px = net.server_for(DC0, x);
    net.clocks[px.idx()] = 9_000_000;
    let c = cl(0, 0);
    put(&mut net, c, x, "mine");
    rot(&mut net, c, &[y, x])
}

#[test]
fn snapshots_piggyback_the_last_one_and_the_mutant_that_does_not_loses_own_writes() {
    for steps in [3, 4] {
        assert_eq!(own_write_through_a_lagging_coordinator(cfg_steps(steps)), vec![None, Some("mine".into())]);
        let mutant = Config { mutant_no_piggyback: true, ..cfg_steps(steps) };
        assert_eq!(own_write_through_a_lagging_coordinator(mutant), vec![None, None], "read-your-writes broken");
    }
}

#[test]
fn the_visibility_mutant_reads_an_unstable_remote_version() {
    let mutant = Config { mutant_skip_visibility_check: true, ..Config::default() };
    let mut net = net_with(2, 2, mutant);
    let [photo, album] = &net.distinct_keys();
    put(&mut net, cl(0, 0), photo, "photo");
    put(&mut net, cl(0, 0), album, "album");
    let hold = channel(net.server_for(DC0, photo), net.server_for(DC1, photo));
    net.deliver_while(|m| server_to_server(m) && !hold(m));
    assert_eq!(rot(&mut net, cl(1, 0), &[album, photo]), vec![Some("album".into()), None], "the anomaly");
}

#[test]
fn put_never_waits_for_a_lagging_clock() {
    let mut net = net(1, 2);
    let [a, b] = &net.distinct_keys();
    let (fast, slow) = (net.server_for(DC0, a), net.server_for(DC0, b));
    net.clocks[fast.idx()] = 1_000_000_000;
    let c = cl(0, 0);
    put(&mut net, c, a, "a");
    let dep = net.latest(fast, a).ts;
    net.invoke(c, Op::Put { key: b.clone(), value: bytes("b") });
    assert_eq!(net.deliver_all(), 2, "one request, one reply (nothing else: a single DC)");
    assert_eq!(net.take_result(c), Some(OpResult::Put));
    let ts = net.latest(slow, b).ts;
    assert!(ts > dep && ts.l == dep.l, "the HLC counted on top of {dep:?}: {ts:?}");
    net.assert_never_blocked();
}

#[test]
fn logical_clocks_still_make_remote_writes_visible() {
    let cfg = Config { logical_clocks: true, ..Config::default() };
    let mut net = net_with(2, 3, cfg);
    let ks = net.keys_on_distinct_partitions(3);
    // Busy partition ahead, idle ones behind: the DC's largest clock must
    // travel (deviation 5) or the GSS would wait for the idle ones for ever.
    for i in 0..20 {
        put(&mut net, cl(0, 0), &ks[0], &format!("v{i}"));
    }
    put(&mut net, cl(0, 0), &ks[1], "after");
    for _ in 0..3 {
        stabilize(&mut net);
    }
    assert_eq!(rot(&mut net, cl(1, 0), &[&ks[1], &ks[0]]), vec![Some("after".into()), Some("v19".into())]);
    assert!(part(&net, net.server_for(DC0, &ks[0])).hlc.l == 0, "no physical time in a Lamport clock");
}

/// Deviation 9: a partition pushed far ahead by a snapshot, then restarted,
/// resumes above that snapshot, so a later write cannot slip into it.
#[test]
fn a_restart_resumes_the_clock_above_every_snapshot_served() {
    let cfg = Config::default();
    let mut net = net_with(1, 2, cfg.clone());
    let [x, y] = &net.distinct_keys();
    let (px, py) = (net.server_for(DC0, x), net.server_for(DC0, y));
    put(&mut net, cl(0, 1), x, "X0");
    net.clocks[py.idx()] = 500_000_000;
    // ROT(y, x): p_y coordinates; TV[m] ≈ 500 s, and p_x is pushed there.
    assert_eq!(rot(&mut net, cl(0, 0), &[y, x]), vec![None, Some("X0".into())]);
    let tv_m = net.clients[0].last[0];
    assert!(tv_m.l >= 500_000_000);
    net.restart(px, &cfg);
    assert!(part(&net, px).hlc > tv_m, "the clock resumed above the snapshot");
    put(&mut net, cl(0, 1), x, "X1");
    assert!(net.latest(px, x).ts > tv_m, "a write after the restart is outside the old snapshot");
    assert_eq!(get(&mut net, cl(0, 0), x), Some("X1".into()));
}

/// Deviation 9: a restarted partition's VV resumes from its own versions'
/// DVs, not only from heartbeats it has yet to hear again. A write that
/// depended on DC 1's heartbeats stays visible to a fresh session in its
/// DC after a restart, before DC 1 is heard from.
#[test]
fn a_restart_keeps_own_writes_visible_before_any_heartbeat() {
    let cfg = Config::default();
    let mut net = net_with(2, 1, cfg.clone());
    let x = &net.keys_on_distinct_partitions(1)[0];
    let (p0, p1) = (net.server_for(DC0, x), net.server_for(DC1, x));
    net.advance_clocks(1_000);
    stabilize(&mut net); // DC 1's heartbeats raise DC 0's GSS[1]
    assert_eq!(get(&mut net, cl(0, 0), x), None); // the client learns GSS[1]
    put(&mut net, cl(0, 0), x, "X");
    assert!(net.latest(p0, x).dv[1] > Hlc::ZERO, "the write depends on DC 1's stable time");
    net.restart(p0, &cfg);
    let from_dc1 = move |m: &InFlight<Msg>| m.from == Dest::Node(p1);
    net.queue.retain(|m| !from_dc1(m));
    net.advance_clocks(1_000);
    stabilize_holding(&mut net, &from_dc1);
    net.queue.retain(|m| !from_dc1(m));
    assert_eq!(get(&mut net, cl(0, 1), x), Some("X".into()), "a fresh session sees the acknowledged write");
}

testnet::restart_tests!(Contrarian);

#[test]
fn bad_requests_get_typed_errors() {
    let mut net = net(2, 2);
    let [x, y] = &net.distinct_keys();
    let (px, py) = (net.server_for(DC0, x), net.server_for(DC0, y));
    let remote = net.server_for(DC1, y);
    let c = cl(0, 0);
    let ask = |net: &mut Net, to: NodeId, msg: Msg| {
        net.queue.push(InFlight::new(Dest::Client(c), Dest::Node(to), msg));
        net.deliver_first(|m| m.to == Dest::Node(to));
        let i = net.queue.iter().position(|m| m.to == Dest::Client(c)).expect("a reply");
        net.queue.remove(i).msg
    };
    let zero = vec![Hlc::ZERO; 2];
    let refused = |m: &Msg| {
        matches!(
            m,
            Msg::RotSlice { slice: Err(OpError::BadRequest(_)), .. }
                | Msg::PutReply(Err(OpError::BadRequest(_)))
                | Msg::SnapshotReply { tv: Err(OpError::BadRequest(_)), .. }
        )
    };
    // Others in another DC, unsorted or naming the coordinator itself.
    for others in [vec![remote], vec![py, py], vec![px]] {
        let r =
            ask(&mut net, px, Msg::RotCoord { session: 1, rot: 1, keys: vec![x.clone()], others, last: zero.clone() });
        assert!(refused(&r), "{r:?}");
    }
    // A key of another partition, a vector of the wrong length, a snapshot
    // ahead of what DC0 has received from DC1.
    let r = ask(&mut net, px, Msg::RotReadAt { rot: 2, keys: vec![y.clone()], tv: zero.clone() });
    assert!(refused(&r), "{r:?}");
    let r = ask(&mut net, px, Msg::PutReq { key: x.clone(), value: bytes("v"), last: vec![Hlc::ZERO] });
    assert!(refused(&r), "{r:?}");
    let ahead = vec![Hlc::ZERO, Hlc::new(1 << 40, 0)];
    let r = ask(&mut net, px, Msg::RotReadAt { rot: 3, keys: vec![x.clone()], tv: ahead.clone() });
    assert!(refused(&r), "{r:?}");
    let r = ask(&mut net, px, Msg::SnapshotReq { rot: 4, last: ahead });
    assert!(refused(&r), "{r:?}");
    let r = ask(&mut net, px, Msg::RotCoord { session: 1, rot: 5, keys: vec![], others: vec![], last: zero.clone() });
    assert!(refused(&r), "{r:?}");
    // The server still serves.
    put(&mut net, c, x, "fine");
    assert_eq!(get(&mut net, c, x), Some("fine".into()));
}

#[test]
fn a_half_read_whose_snapshot_never_comes_expires() {
    let mut net = net(1, 2);
    let [x, y] = &net.distinct_keys();
    let py = net.server_for(DC0, y);
    let c = cl(0, 0);
    // The coordinator (p_x) never gets the request: drop it.
    net.invoke(c, Op::Rot { keys: vec![x.clone(), y.clone()] });
    net.queue.retain(|m| !matches!(m.msg, Msg::RotCoord { .. }));
    net.deliver_all();
    assert_eq!(part(&net, py).halves.len(), 1);
    net.clocks[py.idx()] += Config::default().orphan_read_timeout_us + 1;
    net.fire_timers(py);
    assert!(part(&net, py).halves.is_empty());
}
