use super::*;
use crate::kit::testkit::{
    self, Dest, InFlight, TestNet, bytes, channel, get, put, rot, run, server_to_server, stabilize, stabilize_holding,
};
use crate::stabilization::testnet::{self, DC0, DC1, cl, op_traffic};
use causeway_core::TopologySpec;
use causeway_core::{
    ClientCtx, ClientId, DcId, DepSet, Hlc, HlcVec, Key, NodeId, Op, OpError, OpResult, PartitionId, Protocol,
};

testnet::test_net!(CausalSpartanX);

#[test]
fn validate_rejects_partial_replication_and_zero_intervals() {
    assert!(CausalSpartanX::validate(&Config::default(), &testkit::partial_replication()).is_err());
    let full = testkit::full_replication(3, 3);
    assert!(CausalSpartanX::validate(&Config::default(), &full).is_ok());
    let cfg = Config { stabilization_interval_us: 0, ..Config::default() };
    assert!(CausalSpartanX::validate(&cfg, &full).is_err());
}

#[test]
fn local_writes_are_visible_at_once() {
    let mut net = net(2, 2);
    let k = bytes("a");
    put(&mut net, cl(0, 0), &k, "1");
    // Another client of the same DC reads it before any timer or replication.
    assert_eq!(get(&mut net, cl(0, 1), &k), Some("1".into()));
    assert_eq!(rot(&mut net, cl(0, 0), &[&k]), vec![Some("1".into())]);
    assert_eq!(net.visible_reports(net.server_for(DC0, &k), &k, "1"), 1);
    // Not yet at the other DC.
    assert_eq!(get(&mut net, cl(1, 0), &k), None);
    net.assert_never_blocked();
}

#[test]
fn remote_write_is_invisible_until_its_ds_is_covered_by_the_dsv() {
    let mut net = net(2, 2);
    let [a, b] = &net.distinct_keys();
    let writer = cl(0, 0);
    put(&mut net, writer, a, "a1");
    put(&mut net, writer, b, "b1"); // b1.ds = {dc0: a1.ut}
    let (a0, a1, b1) = (net.server_for(DC0, a), net.server_for(DC1, a), net.server_for(DC1, b));
    let hold_a = channel(a0, a1);
    stabilize_holding(&mut net, &hold_a);
    // b1 has arrived but depends on a1, which has not.
    assert!(net.nodes[b1.idx()].store().latest(b).is_some());
    assert!(net.nodes[b1.idx()].server().dsv[0] < net.latest(a0, a).ut);
    assert_eq!(get(&mut net, cl(1, 0), b), None);
    assert_eq!(net.visible_reports(b1, b, "b1"), 0);
    // a1 arrives: no dependencies, so it is visible (and reported) on arrival.
    net.deliver_while(|m| hold_a(m) && matches!(m.msg, Msg::Replicate { .. }));
    assert_eq!(net.visible_reports(a1, a, "a1"), 1);
    assert_eq!(get(&mut net, cl(1, 0), b), None, "b1 waits for the DSV, not for a1's arrival");
    // Stabilization covers b1.ds: reported once, readable.
    stabilize(&mut net);
    assert_eq!(net.visible_reports(b1, b, "b1"), 1);
    assert_eq!(get(&mut net, cl(1, 0), b), Some("b1".into()));
    assert_eq!(get(&mut net, cl(1, 0), a), Some("a1".into()));
    testnet::assert_reported_once(&mut net, b1, b, "b1");
    net.assert_never_blocked();
}

#[test]
fn photo_then_album_a_reader_that_sees_the_album_sees_the_photo() {
    let mut net = net(2, 3);
    let [photo, album] = &net.distinct_keys();
    let alice = cl(0, 0);
    put(&mut net, alice, photo, "photo");
    put(&mut net, alice, album, "album with photo");
    let hold_photo = channel(net.server_for(DC0, photo), net.server_for(DC1, photo));
    let check = |net: &mut Net, reader: ClientId| {
        let seen_album = get(net, reader, album);
        if seen_album.is_some() {
            assert_eq!(get(net, reader, photo), Some("photo".into()));
        }
        let snap = rot(net, reader, &[album, photo]);
        if snap[0].is_some() {
            assert_eq!(snap[1], Some("photo".into()));
        }
        seen_album.is_some()
    };
    // The album's replicate reaches DC1 first, then the DSV advances without the photo.
    net.deliver_while(|m| server_to_server(m) && !hold_photo(m));
    assert!(!check(&mut net, cl(1, 0)));
    stabilize_holding(&mut net, &hold_photo);
    assert!(!check(&mut net, cl(1, 1)));
    // The photo arrives; once stable, both are seen.
    net.deliver_while(|m| hold_photo(m));
    assert!(!check(&mut net, cl(1, 0)));
    stabilize(&mut net);
    assert!(check(&mut net, cl(1, 0)));
    assert!(check(&mut net, cl(1, 1)));
    net.assert_never_blocked();
}

/// Roohitavaf §3.3: Alice hides her album from Bob, and later reverts it and
/// unblocks him. Bob's ROTX must never pair a public ACL with the private album.
#[test]
fn acl_album_rotx_never_returns_public_acl_with_new_album() {
    let mut net = net(2, 3);
    let [acl, album] = &net.distinct_keys();
    let (alice, bob) = (cl(0, 0), cl(1, 0));
    put(&mut net, alice, acl, "public");
    put(&mut net, alice, album, "old");
    net.deliver_all();
    stabilize(&mut net);
    let bad = vec![Some("public".to_string()), Some("private album".to_string())];
    let hold = |net: &Net, k: &Key| channel(net.server_for(DC0, k), net.server_for(DC1, k));

    // Scenario 1: block Bob, then post; the post's replicate arrives first.
    put(&mut net, alice, acl, "private");
    put(&mut net, alice, album, "private album");
    let hold_acl = hold(&net, acl);
    net.deliver_while(|m| server_to_server(m) && !hold_acl(m));
    assert_ne!(rot(&mut net, bob, &[acl, album]), bad);
    stabilize_holding(&mut net, &hold_acl);
    assert_ne!(rot(&mut net, bob, &[acl, album]), bad);
    net.deliver_while(|m| hold_acl(m));
    assert_ne!(rot(&mut net, bob, &[acl, album]), bad);
    stabilize(&mut net);
    assert_eq!(rot(&mut net, bob, &[acl, album]), vec![Some("private".into()), Some("private album".into())]);

    // Scenario 2: revert the album, then unblock; the unblock arrives first.
    put(&mut net, alice, album, "clean album");
    put(&mut net, alice, acl, "public");
    let hold_album = hold(&net, album);
    net.deliver_while(|m| server_to_server(m) && !hold_album(m));
    assert_ne!(rot(&mut net, bob, &[acl, album]), bad);
    stabilize_holding(&mut net, &hold_album);
    assert_ne!(rot(&mut net, bob, &[acl, album]), bad);
    net.deliver_while(|m| hold_album(m));
    stabilize(&mut net);
    assert_eq!(rot(&mut net, bob, &[acl, album]), vec![Some("public".into()), Some("clean album".into())]);
    net.assert_never_blocked();
}

#[test]
fn put_latency_is_independent_of_clock_skew() {
    let mut net = net(2, 2);
    let [a, b] = &net.distinct_keys();
    let (fast, slow) = (net.server_for(DC0, a), net.server_for(DC0, b));
    net.clocks[fast.idx()] = 1_000_000_000; // 1000 s ahead of the other server
    net.clocks[slow.idx()] = 1_000;
    let c = cl(0, 0);
    put(&mut net, c, a, "a");
    let dt = net.latest(fast, a).ut;
    // The dependent PUT lands on a server whose clock is ~1000 s behind dt:
    // GentleRain would wait that long. Here one request and one reply suffice.
    net.invoke(c, Op::Put { key: b.clone(), value: bytes("b") });
    assert_eq!(net.deliver_client_traffic(), 2);
    assert_eq!(net.take_result(c), Some(OpResult::Put));
    let ut = net.latest(slow, b).ut;
    assert!(ut > dt, "updateHLC moved past dt: {ut:?} > {dt:?}");
    assert_eq!(ut.l, dt.l, "the HLC counts on top of dt instead of waiting for the clock");
    net.assert_never_blocked();
}

/// GentleRain's failure (Roohitavaf §5.1.1): both DCs are stable up to t, then a
/// clock steps back below t and writes. With HLCs the new versions still
/// get timestamps above everything already stable, so a remote DC never
/// shows the dependent write without its dependency.
#[test]
fn a_backward_clock_jump_does_not_break_causality() {
    let mut net = net(2, 2);
    let [a, b] = &net.distinct_keys();
    let (a0, b0, a1, b1) =
        (net.server_for(DC0, a), net.server_for(DC0, b), net.server_for(DC1, a), net.server_for(DC1, b));
    net.advance_clocks(50_000);
    stabilize(&mut net);
    let stable_before = net.nodes[b1.idx()].server().dsv[0];
    assert!(stable_before.l >= 50_000);
    // DC0's clocks step back 40 ms.
    net.clocks[a0.idx()] = 11_000;
    net.clocks[b0.idx()] = 11_000;
    let c = cl(0, 0);
    put(&mut net, c, a, "a");
    put(&mut net, c, b, "b after a");
    let (ut_a, ut_b) = (net.latest(a0, a).ut, net.latest(b0, b).ut);
    assert!(ut_a > stable_before, "the HLC keeps ut above the already-stable time");
    assert!(ut_b > ut_a);
    // b reaches DC1, a does not.
    let hold_a = channel(a0, a1);
    stabilize_holding(&mut net, &hold_a);
    assert!(net.nodes[b1.idx()].server().dsv[0] < ut_a);
    let reader = cl(1, 0);
    assert_eq!(get(&mut net, reader, b), None);
    assert_eq!(rot(&mut net, reader, &[a, b]), vec![None, None]);
    net.deliver_while(|m| hold_a(m));
    stabilize(&mut net);
    assert_eq!(get(&mut net, reader, b), Some("b after a".into()));
    assert_eq!(rot(&mut net, reader, &[a, b]), vec![Some("a".into()), Some("b after a".into())]);
    net.assert_never_blocked();
}

#[test]
fn rotx_never_blocks_and_takes_one_client_round() {
    let mut net = net(2, 3);
    let ks = net.keys_on_distinct_partitions(3);
    let writer = cl(0, 0);
    for k in &ks {
        put(&mut net, writer, k, "v");
    }
    // Replicates arrive but the DSV does not move, and the reader reads a
    // fresh remote version: its DS runs ahead of every DSV.
    net.deliver_while(server_to_server);
    let reader = cl(1, 0);
    assert_eq!(get(&mut net, reader, &ks[0]), Some("v".into()));
    let timers_before = net.timers.len();
    net.invoke(reader, Op::Rot { keys: ks.clone() });
    let (mut from_client, mut to_client, mut slices) = (0, 0, 0);
    while let Some(m) = net.queue.iter().find(|m| op_traffic(m)) {
        match (m.from, m.to, &m.msg) {
            (Dest::Client(_), _, _) => from_client += 1,
            (_, Dest::Client(_), _) => to_client += 1,
            (_, _, Msg::SliceReq { .. }) => slices += 1,
            _ => {}
        }
        net.deliver_first(op_traffic);
    }
    let result = net.take_result(reader).expect("completed with no timer fired and no waiting");
    assert!(matches!(result, OpResult::Rot(ref v) if v.len() == 3), "{result:?}");
    assert_eq!((from_client, to_client), (1, 1), "exactly one client round");
    assert_eq!(slices, 2, "one slice request per other partition; the coordinator reads its own");
    assert_eq!(net.timers.len(), timers_before, "nothing parked on a timer");
    net.assert_never_blocked();
}

/// Notes §5.5, "inferred concern". DC j = DC0 writes x (ut 5 ms) on k4, then
/// w (ut 6 ms) on k3 depending on x, and an independent v (ut 10 ms). At
/// DC i = DC1, v and w arrive and x does not. A client reads v (DS[j] = 10 ms)
/// and runs ROTX{k3, k4}.
fn section_5_5_scenario(paper_dsv_merge: bool) -> (Net, Vec<Key>, Vec<Option<String>>) {
    let mut net = net_with(2, 3, Config { paper_dsv_merge, ..Config::default() });
    let ks = net.keys_on_distinct_partitions(3);
    let (k3, k4, kv) = (&ks[0], &ks[1], &ks[2]);
    let (writer, other, reader) = (cl(0, 0), cl(0, 1), cl(1, 0));
    put(&mut net, other, k3, "w0");
    put(&mut net, other, k4, "x0");
    net.deliver_all();
    stabilize(&mut net);
    let (x_j, w_j, v_j, x_i) =
        (net.server_for(DC0, k4), net.server_for(DC0, k3), net.server_for(DC0, kv), net.server_for(DC1, k4));
    net.clocks[x_j.idx()] = 5_000;
    put(&mut net, writer, k4, "x");
    net.clocks[w_j.idx()] = 6_000;
    put(&mut net, writer, k3, "w");
    net.clocks[v_j.idx()] = 10_000;
    put(&mut net, other, kv, "v");
    assert_eq!(net.latest(w_j, k3).ds.get(DC0), Some(net.latest(x_j, k4).ut), "w depends on x");
    let hold_x = channel(x_j, x_i);
    stabilize_holding(&mut net, &hold_x);
    assert_eq!(net.latest(x_i, k4).value, bytes("x0"), "x has not reached DC i");
    assert_eq!(get(&mut net, reader, kv), Some("v".into()));
    let snapshot = rot(&mut net, reader, &[k3, k4]);
    (net, ks, snapshot)
}

#[test]
fn paper_dsv_merge_returns_a_non_causal_snapshot_and_the_default_does_not() {
    // As printed: sv[j] = DS[j] = 10 ms admits w, but x is not there.
    let (net, _, snapshot) = section_5_5_scenario(true);
    assert_eq!(snapshot, vec![Some("w".into()), Some("x0".into())], "the anomaly: w without the x it depends on");

    // Our rule: sv comes from genuine DSVs only, so w is not yet in the snapshot.
    let (mut net2, ks, snapshot) = section_5_5_scenario(false);
    assert_eq!(snapshot, vec![Some("w0".into()), Some("x0".into())]);
    // Once x arrives and the DSV covers it, the snapshot moves on, whole.
    net2.deliver_all();
    net2.advance_clocks(20_000);
    stabilize(&mut net2);
    assert_eq!(rot(&mut net2, cl(1, 0), &[&ks[0], &ks[1]]), vec![Some("w".into()), Some("x".into())]);
    net.assert_never_blocked();
    net2.assert_never_blocked();
}

#[test]
fn rotx_keeps_read_your_reads_and_writes_through_the_client_cache() {
    let mut net = net(2, 2);
    let [x, l] = &net.distinct_keys();
    put(&mut net, cl(0, 0), x, "x");
    // x reaches DC1 but no stabilization: DSV[0] < x.ut there.
    net.deliver_while(server_to_server);
    let c = cl(1, 0);
    assert_eq!(get(&mut net, c, x), Some("x".into()));
    // c writes l depending on x, then reads both in a ROTX. Neither is
    // slice-visible yet; both come from the cache.
    put(&mut net, c, l, "l");
    assert_eq!(net.clients[c.idx()].cache.len(), 2, "x (read) and l (written) are cached");
    assert_eq!(rot(&mut net, c, &[l, x]), vec![Some("l".into()), Some("x".into())]);
    // Another client of the DC, with no cache, gets the older snapshot.
    assert_eq!(rot(&mut net, cl(1, 1), &[l, x]), vec![None, None]);
    // Once stable, the slices return them and the cache empties.
    net.deliver_all();
    stabilize(&mut net);
    assert_eq!(rot(&mut net, c, &[l, x]), vec![Some("l".into()), Some("x".into())]);
    let client = &net.clients[c.idx()];
    assert!(client.cache.is_empty());
    net.assert_never_blocked();
}

#[test]
fn concurrent_writes_to_one_key_in_two_dcs_converge() {
    let mut net = net(2, 2);
    let k = bytes("k");
    // Same physical time at both servers: ut ties, the higher DC id wins.
    put(&mut net, cl(0, 0), &k, "from dc0");
    put(&mut net, cl(1, 0), &k, "from dc1");
    // A later write at DC0 on a faster clock beats both.
    let k2 = bytes("k2");
    let k2_dc0 = net.server_for(DC0, &k2);
    net.clocks[k2_dc0.idx()] += 5_000;
    put(&mut net, cl(1, 1), &k2, "k2 from dc1");
    put(&mut net, cl(0, 1), &k2, "k2 from dc0");
    net.deliver_all();
    // Snapshots converge once every DC0 partition's clock has passed that write.
    net.advance_clocks(10_000);
    stabilize(&mut net);
    for (key, winner) in [(&k, "from dc1"), (&k2, "k2 from dc0")] {
        for dc in [0, 1] {
            assert_eq!(get(&mut net, cl(dc, 0), key), Some(winner.into()));
            assert_eq!(rot(&mut net, cl(dc, 1), &[key]), vec![Some(winner.into())]);
        }
        let (s0, s1) = (net.server_for(DC0, key), net.server_for(DC1, key));
        assert_eq!(net.latest(s0, key), net.latest(s1, key));
    }
    net.assert_never_blocked();
}

#[test]
fn idle_partitions_advance_the_dsv_through_heartbeats() {
    let mut net = net(3, 4);
    stabilize(&mut net);
    let first = net.nodes[0].server().dsv.clone();
    net.advance_clocks(30_000);
    stabilize(&mut net);
    for s in net.nodes.iter().map(|n| n.server()) {
        assert!(s.dsv.iter().zip(&first).all(|(now, before)| now > before), "{:?} vs {first:?}", s.dsv);
    }
}

#[test]
fn one_dc_with_service_nodes_works_and_the_service_nodes_stay_inert() {
    let mut spec = TopologySpec::full(1, 3);
    spec.services = vec![causeway_core::ServiceSpec { name: "other".into(), per_dc: 1 }];
    let mut net = net_spec(spec, Config::default());
    let service = net.topology.service_nodes(DC0, 0)[0];
    assert!(net.nodes[service.idx()].server().tree.is_none());
    assert!(net.timers.iter().all(|t| t.0 != Dest::Node(service)));
    let ks = net.keys_on_distinct_partitions(2);
    put(&mut net, cl(0, 0), &ks[0], "a");
    put(&mut net, cl(0, 0), &ks[1], "b");
    // With M = 1 there are no heartbeats to send; the HLC ticks alone move DSV[0].
    net.advance_clocks(10_000);
    stabilize(&mut net);
    assert!(net.nodes.iter().map(|n| n.server()).filter(|s| s.tree.is_some()).all(|s| s.dsv[0].l >= 11_000));
    assert_eq!(rot(&mut net, cl(0, 1), &[&ks[0], &ks[1]]), vec![Some("a".into()), Some("b".into())]);
    // A request that reaches a service node by mistake is refused, not served.
    net.queue.push(InFlight::new(
        Dest::Client(cl(0, 1)),
        Dest::Node(service),
        Msg::GetReq { key: ks[0].clone(), dsv: HlcVec::from_elem(Hlc::ZERO, 1) },
    ));
    net.deliver_first(|m| m.to == Dest::Node(service));
    assert!(matches!(net.queue.pop().map(|m| m.msg), Some(Msg::GetReply(Err(OpError::BadRequest(_))))));
}

#[test]
fn gc_prunes_old_versions_and_a_snapshot_that_needed_them_aborts() {
    let mut net = net_with(2, 2, Config { gc_grace_us: 50_000, gc_quiet_us: 0, ..Config::default() });
    // DC1's tree: the root serves partition 0, its only child partition 1.
    let dc1: Vec<NodeId> = net.topology.dc_servers(DC1).collect();
    let (root, child) = (dc1[0], dc1[1]);
    let ks = net.keys_on_distinct_partitions(2);
    let (kr, kc) =
        if net.topology.partition_of(&ks[0]) == PartitionId(0) { (&ks[0], &ks[1]) } else { (&ks[1], &ks[0]) };
    // The child never hears the DC's stable vector: a coordinator with a stale
    // DSV. (Slice replies then overtake held pushes on the root→child channel;
    // pushes only raise a DSV, so that reordering cannot help the test pass.)
    let stale_child = move |m: &InFlight<Msg>| m.to == Dest::Node(child) && matches!(m.msg, Msg::StablePush { .. });
    let writer = cl(1, 0);
    for v in ["1", "2", "3"] {
        put(&mut net, writer, kr, v);
        net.advance_clocks(1_000);
    }
    stabilize_holding(&mut net, &stale_child);
    // Before GC, the stale snapshot simply predates every version.
    assert_eq!(rot(&mut net, cl(1, 1), &[kc, kr]), vec![None, None]);
    assert_eq!(net.nodes[root.idx()].store().versions(kr).len(), 3);
    net.advance_clocks(60_000);
    stabilize_holding(&mut net, &stale_child);
    assert_eq!(net.nodes[root.idx()].store().versions(kr).len(), 1);
    assert!(net.nodes[root.idx()].store().was_pruned(kr));
    // GETs and current snapshots are unaffected.
    assert_eq!(get(&mut net, cl(1, 1), kr), Some("3".into()));
    assert_eq!(rot(&mut net, writer, &[kr]), vec![Some("3".into())]);
    // The stale snapshot would need a pruned version: it fails, it does not return None.
    let fresh = cl(1, 1);
    net.clients[fresh.idx()] = CausalSpartanX::client(
        &Config::default(),
        ClientCtx { id: fresh, dc: DC1, nonce: 0x5e55_0000 + fresh.0 as u64, topology: net.topology.clone() },
    );
    assert_eq!(
        run(&mut net, fresh, Op::Rot { keys: vec![kc.clone(), kr.clone()] }),
        OpResult::Failed(OpError::Aborted("snapshot pruned".into()))
    );
    net.assert_never_blocked();
}

#[test]
fn malformed_input_is_refused_without_panicking() {
    let mut net = net(2, 2);
    let k = bytes("k");
    let s = net.server_for(DC0, &k);
    let other_dc = net.server_for(DC1, &k);
    let c = Dest::Client(cl(0, 0));
    let bad_ds = {
        let mut ds = DepSet::new();
        ds.raise(DcId(7), Hlc::new(1, 0));
        ds
    };
    let huge_counter = DepSet::single(DC0, Hlc::new(5, u32::MAX));
    let put = |p: PutReq| Msg::PutReq(Box::new(p));
    let requests = vec![
        Msg::GetReq { key: k.clone(), dsv: HlcVec::new() },
        put(PutReq {
            key: k.clone(),
            value: bytes("v"),
            ds: bad_ds.clone(),
            dsv: HlcVec::from_elem(Hlc::ZERO, 2),
            past: Vec::new(),
        }),
        put(PutReq {
            key: k.clone(),
            value: bytes("v"),
            ds: huge_counter,
            dsv: HlcVec::from_elem(Hlc::ZERO, 2),
            past: Vec::new(),
        }),
        put(PutReq {
            key: k.clone(),
            value: bytes("v"),
            ds: DepSet::new(),
            dsv: HlcVec::from_elem(Hlc::ZERO, 3),
            past: Vec::new(),
        }),
        Msg::RotReq(Box::new(RotReq { keys: vec![k.clone()], dsv: vec![Hlc::ZERO; 5], ds: DepSet::new() })),
        // A causal past the write's own DS does not cover (deviation 14).
        put(PutReq {
            key: k.clone(),
            value: bytes("v"),
            ds: DepSet::new(),
            dsv: HlcVec::from_elem(Hlc::ZERO, 2),
            past: vec![PastItem {
                key: k.clone(),
                value: bytes("p"),
                ut: Hlc::new(3, 0),
                sr: DC1,
                ds: DepSet::single(DC1, Hlc::new(3, 0)),
            }],
        }),
        Msg::GetReq { key: bytes("not here"), dsv: HlcVec::from_elem(Hlc::ZERO, 2) },
    ];
    let wrong_partition = net.topology.partition_of(b"not here") != net.topology.partition_of(&k);
    let n = requests.len() - usize::from(!wrong_partition);
    for msg in requests.into_iter().take(n) {
        net.queue.push(InFlight::new(c, Dest::Node(s), msg));
        assert!(net.deliver_first(|m| m.to == Dest::Node(s)));
        let reply = net.queue.pop().expect("a reply");
        assert!(
            matches!(
                reply.msg,
                Msg::GetReply(Err(OpError::BadRequest(_)))
                    | Msg::PutReply(Err(OpError::BadRequest(_)))
                    | Msg::RotReply(Err(OpError::BadRequest(_)))
            ),
            "{reply:?}"
        );
    }
    // Peer messages that do not fit are dropped.
    let peers = vec![
        (other_dc, Msg::StablePush { dsv: vec![Hlc::MAX], last_work_us: u64::MAX }),
        (
            other_dc,
            Msg::Replicate {
                key: k.clone(),
                version: Box::new(Version {
                    value: bytes("v"),
                    ut: Hlc::new(9, 0),
                    sr: DcId(0),
                    ds: DepSet::new(),
                    past: Box::default(),
                }),
            },
        ),
        (
            other_dc,
            Msg::Replicate {
                key: k.clone(),
                version: Box::new(Version {
                    value: bytes("v"),
                    ut: Hlc::new(9, 0),
                    sr: DC1,
                    ds: bad_ds,
                    past: Box::default(),
                }),
            },
        ),
        // (A sender outside the topology never reaches a node: the runtimes
        // refuse it at its hello.)
        (other_dc, Msg::SliceReply { rot: 42, slice: Ok(SliceOk { items: vec![], ds: DepSet::new() }) }),
    ];
    for (from, msg) in peers {
        net.queue.push(InFlight::new(Dest::Node(from), Dest::Node(s), msg));
        assert!(net.deliver_first(|m| m.to == Dest::Node(s)));
    }
    assert!(net.queue.is_empty());
    assert!(net.nodes[s.idx()].store().latest(&k).is_none());
    assert_eq!(net.nodes[s.idx()].server().vv, vec![Hlc::ZERO; 2]);
    // A slice request from the same DC with a bad sv is answered with an error.
    let same_dc = net.topology.dc_servers(DC0).find(|&n| n != s).unwrap();
    net.queue.push(InFlight::new(
        Dest::Node(same_dc),
        Dest::Node(s),
        Msg::SliceReq { rot: 1, keys: vec![k.clone()], sv: vec![] },
    ));
    net.deliver_first(|m| m.to == Dest::Node(s));
    assert!(matches!(
        net.queue.pop().map(|m| m.msg),
        Some(Msg::SliceReply { rot: 1, slice: Err(OpError::BadRequest(_)) })
    ));
}

testnet::restart_tests!(CausalSpartanX);

/// A PUT reply stamped by another DC's server is refused as malformed: a PUT
/// goes to this DC's server, and the client decides when it sends the PUT
/// whether the reply's version will be cached, which holds only for a stamp
/// that raises the local entry of DSc.
#[test]
fn a_put_reply_stamped_by_another_dc_is_malformed() {
    let mut net = net(2, 1);
    let c = cl(0, 0);
    let k = bytes("k");
    net.invoke(c, Op::Put { key: k.clone(), value: bytes("v") });
    let request = net.queue.pop().expect("the PUT request");
    assert!(matches!(request.msg, Msg::PutReq { .. }), "{request:?}");
    for sr in [DC1, DcId(7)] {
        net.queue.push(InFlight::new(request.to, Dest::Client(c), Msg::PutReply(Ok(Stamp { ut: Hlc::new(5, 0), sr }))));
        assert!(net.deliver_first(|m| m.to == Dest::Client(c)));
        let result = net.take_result(c).expect("the PUT ends");
        assert!(matches!(&result, OpResult::Failed(OpError::Aborted(e)) if e.contains("malformed")), "{result:?}");
        net.invoke(c, Op::Put { key: k.clone(), value: bytes("v") });
        net.queue.pop().expect("the next PUT request");
    }
}

/// A ROTX never waits out a partition (deviation 14, which replaced
/// deviation 13's wait): the case that used to "taint" a reader, while DC0
/// is cut off from DC1. The reader read another client's local write `l`
/// that depends on a remote `x` whose stability DC1 cannot learn (no
/// heartbeat or stabilization from DC0 gets through). Everything the reader's ROTX needs is already in DC1, so
/// the ROTX must complete in one round, without waiting for the DSV, and
/// still return everything the reader has seen (`l2`, and `x` through `l`).
#[test]
fn a_tainted_readers_rotx_completes_during_a_partition_and_misses_nothing() {
    let mut net = net(2, 2);
    let [x, l] = &net.distinct_keys();
    put(&mut net, cl(0, 0), x, "x");
    net.deliver_while(server_to_server); // x reaches DC1; then DC0 is cut off
    let (writer, reader) = (cl(1, 0), cl(1, 1));
    assert_eq!(get(&mut net, writer, x), Some("x".into()));
    put(&mut net, writer, l, "l");
    assert_eq!(get(&mut net, reader, l), Some("l".into()), "local writes are visible to GET at once");
    put(&mut net, reader, l, "l2"); // depends on l and, through it, on x
    // Only the operation's own traffic moves: DC1 hears nothing from DC0.
    net.invoke(reader, Op::Rot { keys: vec![l.clone(), x.clone()] });
    net.deliver_while(op_traffic);
    assert_eq!(
        net.take_result(reader),
        Some(OpResult::Rot(vec![Some("l2".into()), Some("x".into())])),
        "the ROTX completes during the partition with everything the reader has seen"
    );
    // A second reader of l2 inherits the same causal past.
    let third = cl(1, 1);
    assert_eq!(get(&mut net, third, l), Some("l2".into()));
    assert_eq!(rot(&mut net, third, &[x, l]), vec![Some("x".into()), Some("l2".into())]);
    // A GET of x's key by another session that read l2 returns at least x.
    let fourth = cl(1, 0);
    assert_eq!(get(&mut net, fourth, l), Some("l2".into()));
    assert_eq!(rot(&mut net, fourth, &[x]), vec![Some("x".into())]);
    net.assert_never_blocked();
}

/// See [`testnet::a_partition_restarted_with_nothing_stored_serves`].
#[test]
fn a_partition_restarted_with_nothing_stored_takes_the_dsv_it_forgot() {
    testnet::a_partition_restarted_with_nothing_stored_serves::<CausalSpartanX>(|net, n| {
        net.nodes[n.idx()].server().dsv[1] > Hlc::ZERO
    });
}
