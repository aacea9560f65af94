use super::*;
use crate::kit::testkit::{
    self, Dest, InFlight, TestNet, bytes, channel, get, put, rot, run, stabilize, stabilize_holding,
};
use crate::stabilization::testnet::{self, DC0, DC1, cl, op_traffic};
use causeway_core::{DcId, Message, NodeId, Op, OpError, OpResult, Protocol, Topology, Versioned};
use causeway_core::{ServiceSpec, TopologySpec};
use serde::Deserialize;

testnet::test_net!(GentleRain);
fn srv(net: &Net, node: NodeId) -> &PartitionServer {
    net.nodes[node.idx()].server().part.as_ref().expect("a partition server")
}
fn gst(net: &Net, node: NodeId) -> TimeUs {
    srv(net, node).gst
}

#[test]
fn validate_rejects_partial_replication_replica_groups_and_zero_intervals() {
    let err = GentleRain::validate(&Config::default(), &testkit::partial_replication()).unwrap_err();
    assert!(err.contains("full replication"), "{err}");
    let mut spec = TopologySpec::full(2, 2);
    spec.replicas_per_partition = 3;
    assert!(GentleRain::validate(&Config::default(), &Topology::new(spec).unwrap()).is_err());
    let full = testkit::full_replication(3, 3);
    assert!(GentleRain::validate(&Config::default(), &full).is_ok());
    for cfg in [
        Config { heartbeat_interval_us: 0, ..Config::default() },
        Config { stabilization_interval_us: 0, ..Config::default() },
        Config { tree_fanout: 0, ..Config::default() },
    ] {
        assert!(GentleRain::validate(&cfg, &full).is_err(), "{cfg:?}");
    }
}

#[test]
fn config_rejects_unknown_fields_and_defaults_the_rest() {
    use serde::de::value::{Error, MapDeserializer};
    let parse =
        |fields: Vec<(&'static str, u64)>| Config::deserialize(MapDeserializer::<_, Error>::new(fields.into_iter()));
    let cfg = parse(vec![("heartbeat_interval_us", 7)]).unwrap();
    assert_eq!(cfg.heartbeat_interval_us, 7);
    assert_eq!(cfg.stabilization_interval_us, 5_000);
    assert_eq!(cfg.rot_wait_threshold_us, u64::MAX);
    let err = parse(vec![("heartbeat_interval_us", 7), ("heartbeat_us", 1)]).unwrap_err();
    assert!(err.to_string().contains("unknown field"), "{err}");
}

/// Causal++ (Roohitavaf §3.2, Def 15): a local write is visible to a local GET
/// at once, before it is replicated anywhere.
#[test]
fn local_writes_are_visible_at_once() {
    let mut net = net(2, 2);
    let k = net.key_on(0);
    let a0 = net.server_for(DC0, &k);
    put(&mut net, cl(0, 0), &k, "v");
    assert_eq!(net.visible_reports(a0, &k, "v"), 1);
    assert!(net.queue.iter().any(|m| m.msg.kind() == "replicate"), "replication has not been delivered");
    assert_eq!(gst(&net, a0), 0, "nothing is stable yet");
    assert_eq!(get(&mut net, cl(0, 1), &k), Some("v".into()));
    assert_eq!(get(&mut net, cl(1, 0), &k), None);
}

/// A replicated version waits for GST (C2), and is reported visible
/// exactly once, when GST first passes its `ut`.
#[test]
fn remote_write_is_invisible_until_gst_passes_it() {
    let mut net = net(2, 2);
    let k = net.key_on(1);
    let (k0, k1) = (net.server_for(DC0, &k), net.server_for(DC1, &k));
    put(&mut net, cl(0, 0), &k, "v");
    let ut = net.latest(k0, &k).ut;
    net.deliver_while(|m| m.msg.kind() == "replicate");
    assert_eq!(net.latest(k1, &k).ut, ut, "the version has arrived");
    assert!(gst(&net, k1) < ut);
    assert_eq!(net.visible_reports(k1, &k, "v"), 0);
    assert_eq!(get(&mut net, cl(1, 0), &k), None);
    net.advance_clocks(10_000);
    stabilize(&mut net);
    assert!(gst(&net, k1) >= ut);
    assert_eq!(net.visible_reports(k1, &k, "v"), 1);
    assert_eq!(get(&mut net, cl(1, 0), &k), Some("v".into()));
    net.advance_clocks(10_000);
    stabilize(&mut net);
    assert_eq!(net.visible_reports(k1, &k, "v"), 1, "reported once");
}

/// The album (partition B) depends on the photo (partition A). While the
/// photo's channel to DC1 is held, DC1's GST cannot pass the photo's `ut`
/// (FIFO: A0's later heartbeats queue behind it), hence not the album's.
#[test]
fn photo_then_album_a_reader_that_sees_the_album_sees_the_photo() {
    let mut net = net(2, 2);
    let (photo, album) = (net.key_on(0), net.key_on(1));
    let (a0, a1, b1) = (net.server_for(DC0, &photo), net.server_for(DC1, &photo), net.server_for(DC1, &album));
    stabilize(&mut net);
    // Not in the µs A0 just announced by heartbeat (that tie is safe, see
    // deviation 2, but would make GST reach the photo's ut).
    net.advance_clocks(1_000);
    let alice = cl(0, 0);
    put(&mut net, alice, &photo, "photo");
    net.advance_clocks(1_000); // C1: the album's PUT needs a clock past the photo's ut
    put(&mut net, alice, &album, "album -> photo");
    let ut_photo = net.latest(a0, &photo).ut;
    let hold = channel(a0, a1);
    let bob = cl(1, 0);
    for _ in 0..3 {
        net.advance_clocks(10_000);
        stabilize_holding(&mut net, &hold);
        assert!(net.nodes[b1.idx()].store().latest(&album).is_some(), "the album has arrived");
        assert!(gst(&net, b1) < ut_photo);
        let saw_album = get(&mut net, bob, &album).is_some();
        let saw_photo = get(&mut net, bob, &photo).is_some();
        assert!(!saw_album || saw_photo, "album without photo");
        assert!(!saw_album, "GST cannot pass the album while the photo is missing");
    }
    net.deliver_while(&hold);
    stabilize(&mut net);
    assert_eq!(get(&mut net, bob, &album), Some("album -> photo".into()));
    assert_eq!(get(&mut net, bob, &photo), Some("photo".into()));
}

/// Deviation 2: A0 announces t by heartbeat, then writes the photo in the
/// same µs (ut = t). DC1's GST reaches t while the photo is still in
/// flight, so C2 holds only "up to ties" — but the album, which depends on
/// the photo, has ut > t by C1 and stays invisible, and the photo is
/// reported visible the moment it arrives.
#[test]
fn a_version_stamped_in_an_announced_microsecond_exposes_nothing() {
    let mut net = net(2, 2);
    let (photo, album) = (net.key_on(0), net.key_on(1));
    let (a0, a1, b1) = (net.server_for(DC0, &photo), net.server_for(DC1, &photo), net.server_for(DC1, &album));
    stabilize(&mut net);
    let t = net.clocks[a0.idx()];
    assert_eq!(gst(&net, b1), t, "DC1 is stable up to the µs A0 announced");
    let alice = cl(0, 0);
    put(&mut net, alice, &photo, "photo");
    assert_eq!(net.latest(a0, &photo).ut, t);
    net.advance_clocks(1);
    put(&mut net, alice, &album, "album -> photo");
    let hold = channel(a0, a1);
    stabilize_holding(&mut net, &hold);
    assert!(
        net.nodes[b1.idx()].store().latest(&album).is_some() && net.nodes[a1.idx()].store().latest(&photo).is_none()
    );
    let bob = cl(1, 0);
    assert_eq!(get(&mut net, bob, &album), None);
    assert_eq!(rot(&mut net, bob, &[&photo, &album]), vec![None, None]);
    net.deliver_while(&hold);
    assert_eq!(net.visible_reports(a1, &photo, "photo"), 1, "visible on arrival: ut ≤ GST");
    assert_eq!(get(&mut net, bob, &photo), Some("photo".into()));
    net.advance_clocks(10_000);
    stabilize(&mut net);
    assert_eq!(get(&mut net, bob, &album), Some("album -> photo".into()));
}

/// C1: a PUT whose dependency time is ahead of the server's clock parks,
/// rechecks on its timer, and proceeds only once the clock is past dt.
#[test]
fn put_waits_until_the_clock_passes_dt() {
    let mut net = net(2, 2);
    let (a, b) = (net.key_on(0), net.key_on(1));
    let (fast, slow) = (net.server_for(DC0, &a), net.server_for(DC0, &b));
    net.clocks[fast.idx()] = 50_000;
    net.clocks[slow.idx()] = 20_000;
    let c = cl(0, 0);
    put(&mut net, c, &a, "a");
    let dt = net.latest(fast, &a).ut;
    net.invoke(c, Op::Put { key: b.clone(), value: bytes("b") });
    net.deliver_while(op_traffic);
    assert_eq!(net.take_result(c), None, "parked");
    assert!(net.nodes[slow.idx()].store().latest(&b).is_none());
    // The timer fires early (or the clock drifted): wait again.
    net.fire_timers(slow);
    net.deliver_while(op_traffic);
    assert_eq!(net.take_result(c), None);
    net.clocks[slow.idx()] = dt; // equal is not enough
    net.fire_timers(slow);
    net.deliver_while(op_traffic);
    assert_eq!(net.take_result(c), None);
    assert!(net.blocked("put_clock_wait").is_empty());
    net.clocks[slow.idx()] = dt + 7;
    net.fire_timers(slow);
    net.deliver_while(op_traffic);
    assert_eq!(net.take_result(c), Some(OpResult::Put));
    assert_eq!(net.latest(slow, &b).ut, dt + 7);
    assert_eq!(net.blocked("put_clock_wait"), vec![(slow, dt + 7 - 20_000)]);
}

/// Deviation 3: two writes to one key in one µs at one server would share
/// ⟨ut, sr⟩; the second waits a µs instead of being lost.
#[test]
fn same_key_same_microsecond_writes_do_not_collide() {
    let mut net = net(1, 1);
    let k = net.key_on(0);
    let s = net.server_for(DC0, &k);
    put(&mut net, cl(0, 0), &k, "first");
    net.invoke(cl(0, 1), Op::Put { key: k.clone(), value: bytes("second") });
    net.deliver_while(op_traffic);
    assert_eq!(net.take_result(cl(0, 1)), None);
    net.clocks[s.idx()] += 1;
    net.fire_timers(s);
    net.deliver_while(op_traffic);
    assert_eq!(net.take_result(cl(0, 1)), Some(OpResult::Put));
    assert_eq!(net.nodes[s.idx()].store().versions(&k).len(), 2);
    assert_eq!(get(&mut net, cl(0, 0), &k), Some("second".into()));
    assert_eq!(net.blocked("put_clock_wait"), vec![(s, 1)]);
}

/// GentleRain's known flaw (Roohitavaf §5.1.1),
/// asserted to HAPPEN. Both DCs are stable up to ~51 ms; then DC0's clocks
/// step back ~40 ms and a client writes a, then b after a. Both get `ut`
/// below DC1's GST, so DC1 treats b as stable the moment it arrives,
/// although a is still in flight: C2 is broken and a DC1 reader sees b
/// without a, by GET and in a ROT snapshot.
///
/// One server stepping back is not enough for a *causal* violation: a
/// dependent write on any other server gets `ut` ≥ that server's clock ≥
/// DC1's GST, so it waits for the stepped-back server's channel, which
/// is FIFO behind a. The same scenario with HLCs is CausalSpartanX's
/// `a_backward_clock_jump_does_not_break_causality`.
#[test]
fn a_clock_stepped_back_breaks_causality() {
    let mut net = net(2, 2);
    let (a, b) = (net.key_on(0), net.key_on(1));
    let (a0, b0, a1, b1) =
        (net.server_for(DC0, &a), net.server_for(DC0, &b), net.server_for(DC1, &a), net.server_for(DC1, &b));
    net.advance_clocks(50_000);
    stabilize(&mut net);
    let stable_before = gst(&net, b1);
    assert!(stable_before >= 50_000);
    // DC0's clocks step back ~40 ms.
    net.clocks[a0.idx()] = 11_000;
    net.clocks[b0.idx()] = 12_000;
    let c = cl(0, 0);
    put(&mut net, c, &a, "a");
    put(&mut net, c, &b, "b after a");
    let (ut_a, ut_b) = (net.latest(a0, &a).ut, net.latest(b0, &b).ut);
    assert!(ut_a < ut_b, "C1 still holds between the two writes");
    assert!(ut_b < stable_before, "but both are below the GST DC1 already computed");
    // b reaches DC1, a does not.
    let hold_a = channel(a0, a1);
    stabilize_holding(&mut net, &hold_a);
    assert!(net.nodes[a1.idx()].store().latest(&a).is_none(), "a has not arrived at DC1");
    assert_eq!(net.visible_reports(b1, &b, "b after a"), 1, "b is visible at DC1");
    let reader = cl(1, 0);
    // The causal violation: b is returned, the a it depends on is not.
    assert_eq!(get(&mut net, reader, &b), Some("b after a".into()));
    assert_eq!(get(&mut net, reader, &a), None);
    assert_eq!(rot(&mut net, reader, &[&a, &b]), vec![None, Some("b after a".into())]);
    // Once a arrives, DC1 converges.
    net.deliver_while(&hold_a);
    stabilize(&mut net);
    assert_eq!(rot(&mut net, reader, &[&a, &b]), vec![Some("a".into()), Some("b after a".into())]);
}

/// Roohitavaf §3.3: Alice makes her album friends-only, then posts to it. A
/// ROT over {acl, album} in a remote DC never returns ⟨public, new post⟩,
/// whichever of the two replicates is late.
#[test]
fn acl_album_rot_never_returns_public_acl_with_new_album() {
    for acl_is_late in [true, false] {
        let mut net = net(2, 2);
        let (acl, album) = (net.key_on(0), net.key_on(1));
        let (alice, bob) = (cl(0, 0), cl(1, 0));
        put(&mut net, alice, &acl, "public");
        net.advance_clocks(1_000);
        put(&mut net, alice, &album, "old post");
        net.advance_clocks(10_000);
        stabilize(&mut net);
        assert_eq!(rot(&mut net, bob, &[&acl, &album]), vec![Some("public".into()), Some("old post".into())]);
        net.advance_clocks(1_000);
        put(&mut net, alice, &acl, "friends only");
        net.advance_clocks(1_000);
        put(&mut net, alice, &album, "new post");
        let late = if acl_is_late { acl.clone() } else { album.clone() };
        let held = channel(net.server_for(DC0, &late), net.server_for(DC1, &late));
        let forbidden = vec![Some("public".to_string()), Some("new post".to_string())];
        for _ in 0..3 {
            net.advance_clocks(10_000);
            stabilize_holding(&mut net, &held);
            let seen = rot(&mut net, bob, &[&acl, &album]);
            assert_ne!(seen, forbidden, "acl late: {acl_is_late}");
            assert_eq!(seen[1].as_deref(), Some("old post"), "GST stays below the late write");
            if acl_is_late {
                assert_eq!(seen[0].as_deref(), Some("public"));
            }
        }
        net.deliver_while(&held);
        stabilize(&mut net);
        let seen = rot(&mut net, bob, &[&acl, &album]);
        assert_eq!(seen, vec![Some("friends only".into()), Some("new post".into())]);
    }
}

/// A ROT from a client whose dt is ahead of GST (it just wrote) waits at
/// the coordinator until GST ≥ dt, then reads its own write.
#[test]
fn rot_waits_until_gst_reaches_dt_and_reads_your_writes() {
    let mut net = net(2, 2);
    let (a, b) = (net.key_on(0), net.key_on(1));
    let coordinator = net.server_for(DC1, &a);
    stabilize(&mut net);
    net.advance_clocks(10_000);
    let w = cl(1, 0);
    put(&mut net, w, &a, "mine");
    let dt = net.latest(coordinator, &a).ut;
    assert!(gst(&net, coordinator) < dt);
    net.invoke(w, Op::Rot { keys: vec![a.clone(), b.clone()] });
    net.deliver_while(op_traffic);
    assert_eq!(net.take_result(w), None, "parked until GST ≥ dt");
    net.advance_clocks(2_000);
    stabilize(&mut net);
    net.deliver_while(op_traffic);
    assert_eq!(net.take_result(w), Some(OpResult::Rot(vec![Some(bytes("mine")), None])));
    let waits = net.blocked("rot_gst_wait");
    assert_eq!(waits.len(), 1);
    assert_eq!(waits[0], (coordinator, 2_000));
}

/// The paper's Eiger fallback is not implemented: past the threshold the
/// ROT fails instead of waiting.
#[test]
fn rot_past_the_wait_threshold_fails_instead_of_falling_back_to_eiger() {
    let cfg = Config { rot_wait_threshold_us: 1_000, ..Config::default() };
    let mut net = net_with(2, 2, cfg);
    let a = net.key_on(0);
    net.advance_clocks(10_000);
    put(&mut net, cl(0, 0), &a, "v");
    match run(&mut net, cl(0, 0), Op::Rot { keys: vec![a.clone()] }) {
        OpResult::Failed(OpError::Aborted(reason)) => assert!(reason.contains("Eiger"), "{reason}"),
        other => panic!("expected an abort, got {other:?}"),
    }
}

/// Deviation 1. DC1's tree root has learnt a GST past r (which depends on
/// q) but its pushes to q's and x's partitions are late. w reads r at the
/// root and writes x; c reads x (a local version, visible at once) and
/// then q. The PUT carried w's GST to x's server, whose reply carries it
/// to c, whose GET raises q's server: c sees q. Without the merge, q's
/// server would still be below q.ut and c would see x → r without q.
#[test]
fn a_local_write_carries_its_writers_stable_time() {
    let mut net = net(2, 3);
    let (r, q, x) = (net.key_on(0), net.key_on(1), net.key_on(2));
    let (r1, q1, x1) = (net.server_for(DC1, &r), net.server_for(DC1, &q), net.server_for(DC1, &x));
    assert!(srv(&net, r1).tree.is_root());
    let a = cl(0, 0);
    put(&mut net, a, &q, "q");
    net.advance_clocks(1_000);
    put(&mut net, a, &r, "r after q");
    let (ut_q, ut_r) = (net.latest(net.server_for(DC0, &q), &q).ut, net.latest(net.server_for(DC0, &r), &r).ut);
    net.advance_clocks(10_000);
    let late_pushes = move |m: &InFlight<Msg>| {
        matches!(m.msg, Msg::StablePush { .. }) && (m.to == Dest::Node(q1) || m.to == Dest::Node(x1))
    };
    stabilize_holding(&mut net, &late_pushes);
    assert!(gst(&net, r1) >= ut_r);
    assert!(gst(&net, q1) < ut_q && gst(&net, x1) < ut_q);
    let (w, c) = (cl(1, 0), cl(1, 1));
    assert_eq!(get(&mut net, w, &r), Some("r after q".into()));
    put(&mut net, w, &x, "x after r");
    assert_eq!(get(&mut net, c, &x), Some("x after r".into()));
    assert_eq!(get(&mut net, c, &q), Some("q".into()), "c saw x → r → q, so it must see q");
}

/// The same run with x's server crashing and restarting between the write
/// and c's reads (deviation 10): the GST x's PUT raised is journaled with x,
/// so the restarted server still hands it to x's readers. A restart that
/// forgets it (the mutant) lets c see x → r without q.
#[test]
fn a_restart_keeps_the_stable_time_a_local_write_carried() {
    for skip_recovery in [false, true] {
        let cfg = Config { mutant_skip_recovery: skip_recovery, ..Config::default() };
        let mut net = net_with(2, 3, cfg.clone());
        let (r, q, x) = (net.key_on(0), net.key_on(1), net.key_on(2));
        let (q1, x1) = (net.server_for(DC1, &q), net.server_for(DC1, &x));
        let a = cl(0, 0);
        put(&mut net, a, &q, "q");
        net.advance_clocks(1_000);
        put(&mut net, a, &r, "r after q");
        let ut_q = net.latest(net.server_for(DC0, &q), &q).ut;
        net.advance_clocks(10_000);
        let late_pushes = move |m: &InFlight<Msg>| {
            matches!(m.msg, Msg::StablePush { .. }) && (m.to == Dest::Node(q1) || m.to == Dest::Node(x1))
        };
        stabilize_holding(&mut net, &late_pushes);
        let (w, c) = (cl(1, 0), cl(1, 1));
        assert_eq!(get(&mut net, w, &r), Some("r after q".into()));
        put(&mut net, w, &x, "x after r");
        net.restart(x1, &cfg);
        assert!(gst(&net, q1) < ut_q, "q is not yet stable at its server");
        assert_eq!(get(&mut net, c, &x), Some("x after r".into()));
        let seen_q = get(&mut net, c, &q);
        if skip_recovery {
            assert_eq!(seen_q, None, "without recovery c sees x → r without q (the mutant must be observable)");
        } else {
            assert_eq!(seen_q, Some("q".into()), "c saw x → r → q across x's restart, so it must see q");
        }
    }
}

/// Concurrent writes to one key in both DCs: every replica ends on the
/// version with the larger ⟨ut, sr⟩ (last-writer-wins).
#[test]
fn concurrent_writes_to_one_key_in_two_dcs_converge() {
    for dc0_ahead_us in [0, 500] {
        let mut net = net(2, 2);
        let k = net.key_on(1);
        let (k0, k1) = (net.server_for(DC0, &k), net.server_for(DC1, &k));
        net.clocks[k0.idx()] += dc0_ahead_us;
        put(&mut net, cl(0, 0), &k, "from dc0");
        put(&mut net, cl(1, 0), &k, "from dc1");
        net.advance_clocks(10_000);
        stabilize(&mut net);
        let winner = if dc0_ahead_us > 0 { "from dc0" } else { "from dc1" }; // a tie goes to the higher DC
        for c in [cl(0, 1), cl(1, 1)] {
            assert_eq!(get(&mut net, c, &k), Some(winner.into()), "dc0 ahead by {dc0_ahead_us} µs");
        }
        assert_eq!(net.latest(k0, &k).order(), net.latest(k1, &k).order());
    }
}

/// Idle partitions keep GST moving with heartbeats; a partition that just
/// replicated skips one.
#[test]
fn heartbeats_advance_gst_and_are_skipped_after_a_replicate() {
    let mut net = net(3, 2);
    net.advance_clocks(50_000);
    stabilize(&mut net);
    for n in net.topology.node_ids() {
        assert_eq!(gst(&net, n), 51_000, "{n}");
    }
    let k = net.key_on(0);
    let s = net.server_for(DC0, &k);
    put(&mut net, cl(0, 0), &k, "v");
    let heartbeats_from_s =
        |net: &Net| net.queue.iter().filter(|m| m.from == Dest::Node(s) && m.msg.kind() == "heartbeat").count();
    net.fire_timers(s);
    assert_eq!(heartbeats_from_s(&net), 0);
    net.fire_timers(s);
    assert_eq!(heartbeats_from_s(&net), 2, "one per other DC");
}

/// GC keeps the newest version below a GST at least `gc_grace_us` old; a
/// ROT whose snapshot is older than that fails rather than read a state
/// that no longer exists.
#[test]
fn gc_prunes_old_versions_and_a_snapshot_that_needed_them_aborts() {
    // Quiet keys are collected as soon as the horizon allows.
    let cfg = Config { gc_grace_us: 20_000, gc_quiet_us: 0, ..Config::default() };
    let mut net = net_with(2, 2, cfg);
    let (k, m) = (net.key_on(0), net.key_on(1));
    let (k0, k1, m1) = (net.server_for(DC0, &k), net.server_for(DC1, &k), net.server_for(DC1, &m));
    assert!(srv(&net, k1).tree.is_root() && !srv(&net, m1).tree.is_root());
    // m's server in DC1 never hears the GST: a coordinator that lags.
    let late = move |msg: &InFlight<Msg>| matches!(msg.msg, Msg::StablePush { .. }) && msg.to == Dest::Node(m1);
    for i in 0..5 {
        put(&mut net, cl(0, 0), &k, &format!("v{i}"));
        net.advance_clocks(10_000);
        stabilize_holding(&mut net, &late);
    }
    for _ in 0..4 {
        net.advance_clocks(10_000);
        stabilize_holding(&mut net, &late);
    }
    for s in [k0, k1] {
        assert_eq!(net.nodes[s.idx()].store().versions(&k).len(), 1, "{s}");
        assert!(net.nodes[s.idx()].store().was_pruned(&k));
    }
    assert_eq!(get(&mut net, cl(1, 0), &k), Some("v4".into()));
    assert_eq!(gst(&net, m1), 0);
    match run(&mut net, cl(1, 1), Op::Rot { keys: vec![m.clone(), k.clone()] }) {
        OpResult::Failed(OpError::Aborted(reason)) => assert_eq!(reason, "snapshot pruned"),
        other => panic!("expected an abort, got {other:?}"),
    }
    // A current snapshot still reads.
    assert_eq!(rot(&mut net, cl(1, 0), &[&k, &m]), vec![Some("v4".into()), None]);
}

#[test]
fn malformed_input_is_ignored_without_panicking() {
    let mut net = net(2, 2);
    let (a, b) = (net.key_on(0), net.key_on(1));
    let (a0, a1, b1) = (net.server_for(DC0, &a), net.server_for(DC1, &a), net.server_for(DC1, &b));
    let version = |sr: u16| Version { value: bytes("forged"), ut: 5, sr: DcId(sr) };
    let forged = [
        // A report of the wrong length, from a real child.
        (Dest::Node(b1), a1, Msg::StableReport { vv: vec![1, 2, 3], last_work_us: u64::MAX }),
        // A push from a node that is not the parent.
        (Dest::Node(a0), b1, Msg::StablePush { gst: u64::MAX, last_work_us: u64::MAX }),
        // Replication from a node that is not an equivalent, or for another origin.
        (Dest::Node(b1), a1, Msg::Replicate { key: a.clone(), version: version(0) }),
        (Dest::Node(a0), a1, Msg::Replicate { key: a.clone(), version: version(1) }),
        (Dest::Node(b1), a1, Msg::Heartbeat { clock: u64::MAX, last_work_us: u64::MAX }),
        // Slices: a stray reply, a request from another DC.
        (Dest::Node(b1), a1, Msg::SliceReply { rot: 77, reads: vec![SliceRead::Absent] }),
        (Dest::Node(a0), b1, Msg::SliceReq { rot: 1, keys: vec![b.clone()], snapshot: u64::MAX }),
        // Peer messages from a client, a reply to a server, a misrouted PUT.
        (Dest::Client(cl(1, 0)), a1, Msg::StablePush { gst: u64::MAX, last_work_us: u64::MAX }),
        (Dest::Client(cl(1, 0)), a1, Msg::GetReply { value: None, ut: 0, gst: 0 }),
        (Dest::Client(cl(1, 0)), a1, Msg::PutReq { key: b.clone(), value: bytes("x"), dt: 0, gst: 0 }),
        // (A sender outside the topology never reaches a node: the runtimes
        // refuse it at its hello.)
    ];
    for (from, to, msg) in forged {
        net.queue.push(InFlight::new(from, Dest::Node(to), msg));
    }
    net.timers.push((Dest::Node(a1), 123_456));
    net.deliver_all();
    net.fire_timers(a1);
    assert_eq!(gst(&net, b1), 0);
    assert_eq!(srv(&net, a1).vv, vec![0, 1_000]);
    assert!(net.nodes[a1.idx()].store().latest(&a).is_none());
    assert!(net.nodes[a1.idx()].store().latest(&b).is_none());
    assert!(net.queue.iter().all(|m| !matches!(m.to, Dest::Client(_))), "no replies to forged requests");
    // The cluster still works.
    put(&mut net, cl(1, 0), &a, "ok");
    assert_eq!(get(&mut net, cl(1, 1), &a), Some("ok".into()));
}

#[test]
fn one_dc_with_service_nodes_works_and_the_service_nodes_stay_inert() {
    let mut spec = TopologySpec::full(1, 3);
    spec.services = vec![ServiceSpec { name: "unused".into(), per_dc: 1 }];
    let mut net = net_spec(spec, Config::default());
    let service = net.topology.service_nodes(DC0, 0)[0];
    assert!(net.nodes[service.idx()].server().part.is_none());
    let (a, b) = (net.key_on(0), net.key_on(2));
    put(&mut net, cl(0, 0), &a, "a");
    net.advance_clocks(1_000);
    put(&mut net, cl(0, 0), &b, "b");
    net.advance_clocks(10_000);
    stabilize(&mut net);
    assert_eq!(rot(&mut net, cl(0, 1), &[&a, &b]), vec![Some("a".into()), Some("b".into())]);
    assert!(net.queue.iter().all(|m| m.to != Dest::Node(service) && m.from != Dest::Node(service)));
}
