//! Step-by-step tests of the paper's properties (Gunawardhana et al.,
//! §3.2, §3.3, §5), on the hand-cranked network.

use super::*;
use crate::kit::testkit::{self, Dest, InFlight, TestNet, bytes, text};
use causeway_core::{ClientId, DcId, Key, NodeId, Op, OpResult, ServiceSpec, TopologySpec};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Net = TestNet<EunomiaKv>;

const PER_DC: u32 = 2;

/// `dcs` DCs of `partitions` partitions with `replicas` Eunomia replicas per DC.
fn net_r(dcs: u16, partitions: u32, replicas: u16, cfg: Config) -> Net {
    let mut spec = TopologySpec::full(dcs, partitions);
    spec.services = vec![ServiceSpec { name: EUNOMIA.into(), per_dc: replicas }];
    TestNet::with_spec(spec, PER_DC, cfg)
}

fn net(dcs: u16, partitions: u32) -> Net {
    net_r(dcs, partitions, 1, Config::default())
}

fn cl(dc: u16, i: u32) -> ClientId {
    ClientId(dc as u32 * PER_DC + i)
}

fn eunomia_nodes(net: &Net, dc: u16) -> Vec<NodeId> {
    net.topology.service_nodes(DcId(dc), net.topology.service_index(EUNOMIA).unwrap()).to_vec()
}

fn receiver_node(net: &Net, dc: u16) -> NodeId {
    net.topology.service_nodes(DcId(dc), net.topology.service_index(RECEIVER).unwrap())[0]
}

fn replica(net: &Net, n: NodeId) -> &eunomia::EunomiaReplica {
    net.nodes[n.idx()].server().eunomia().expect("a Eunomia replica")
}

fn some_keys(n: usize) -> Vec<Key> {
    (0..n).map(|i| bytes(&format!("key{i}"))).collect()
}

fn put(net: &mut Net, c: ClientId, k: &Key, v: &str) {
    assert_eq!(testkit::run(net, c, Op::Put { key: k.clone(), value: bytes(v) }), OpResult::Put);
}

fn get(net: &mut Net, c: ClientId, k: &Key) -> Option<String> {
    match testkit::run(net, c, Op::Get { key: k.clone() }) {
        OpResult::Get(v) => text(v),
        other => panic!("expected a read, got {other:?}"),
    }
}

/// One millisecond: clocks advance, every timer of a live node fires, and
/// every message not touching a down node is delivered (messages to a
/// down node are lost with it).
fn tick(net: &mut Net, down: &[NodeId]) {
    net.advance_clocks(1_000);
    net.timers.retain(|(d, _)| !matches!(d, Dest::Node(n) if down.contains(n)));
    for i in 0..net.nodes.len() {
        let n = NodeId(i as u32);
        if !down.contains(&n) {
            net.fire_timers(n);
        }
    }
    let touches = |m: &InFlight<Msg>| [m.from, m.to].iter().any(|d| matches!(d, Dest::Node(n) if down.contains(n)));
    net.queue.retain(|m| !touches(m));
    net.deliver_while(|m| !touches(m));
    net.queue.retain(|m| !touches(m));
}

fn ticks(net: &mut Net, n: usize, down: &[NodeId]) {
    for _ in 0..n {
        tick(net, down);
    }
}

#[test]
fn validate_wants_full_replication_and_both_services() {
    let mut spec = TopologySpec::full(2, 2);
    spec.add_missing_services(EunomiaKv::SERVICES);
    let t = causeway_core::Topology::new(spec).unwrap();
    assert!(EunomiaKv::validate(&Config::default(), &t).is_ok());
    assert!(EunomiaKv::validate(&Config::default(), &testkit::full_replication(2, 2)).is_err());
    assert!(EunomiaKv::validate(&Config::default(), &testkit::partial_replication()).is_err());
    assert!(EunomiaKv::validate(&Config { process_stable_interval_us: 0, ..Config::default() }, &t).is_err());
}

/// §3.2: Eunomia never ships an update above StableTime, ships in
/// non-decreasing timestamp order within and across shipments, and every
/// update is shipped exactly once, under random clocks (skewed, a client
/// ahead of a partition), random interleavings and random batching.
#[test]
fn eunomia_ships_in_order_never_above_stable_time_and_loses_nothing() {
    for seed in 1..=20u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let cfg = Config { batch_interval_us: [0, 1_000, 3_000][rng.random_range(0..3)], ..Config::default() };
        let mut net = net_r(3, 3, 1, cfg);
        for c in net.clocks.iter_mut() {
            *c += rng.random_range(0..20_000);
        }
        let keys = some_keys(6);
        let mut written: Vec<(u16, Vec<u8>)> = Vec::new();
        // Per Eunomia sender and receiver: the previous shipment's
        // StableTime, and that of the previous one that carried updates.
        let mut last_to: std::collections::BTreeMap<(NodeId, NodeId), (u64, u64)> = Default::default();
        let mut shipped: Vec<(u16, Vec<u8>, u64)> = Vec::new();
        let mut check = |m: &InFlight<Msg>| {
            if let (Dest::Node(from), Dest::Node(to), Msg::Ship { from_us, to_us, ops }) = (m.from, m.to, &m.msg) {
                let dc = net_dc(from);
                let (prev, prev_full) = last_to.get(&(from, to)).copied().unwrap_or((0, 0));
                // Deviation 11: a shipment's range starts where the last
                // one with updates ended; empty ones went out since.
                assert_eq!(
                    *from_us, prev_full,
                    "seed {seed}: a shipment does not start where the last with updates ended"
                );
                assert!(*to_us > prev, "seed {seed}: StableTime went back");
                last_to.insert((from, to), (*to_us, if ops.is_empty() { prev_full } else { *to_us }));
                let mut last = prev;
                for u in ops.to_ops() {
                    let ts = u.vts[dc as usize];
                    assert!(ts <= *to_us, "seed {seed}: shipped {ts} above StableTime {to_us}");
                    assert!(ts > prev && ts >= last, "seed {seed}: shipped {ts} after {last}");
                    last = ts;
                    shipped.push((dc, u.key.to_vec(), ts));
                }
            }
            true
        };
        fn net_dc(n: NodeId) -> u16 {
            // Services come after the 9 partition servers: eunomia, receiver per DC.
            ((n.0 - 9) / 2) as u16
        }
        for step in 0..600 {
            match rng.random_range(0..10) {
                0..=2 => {
                    let dc = rng.random_range(0..3u16);
                    let c = cl(dc, rng.random_range(0..PER_DC));
                    let k = keys[rng.random_range(0..keys.len())].clone();
                    let v = format!("{seed}-{step}");
                    put(&mut net, c, &k, &v);
                    written.push((dc, v.into_bytes()));
                }
                3 => {
                    let c = cl(rng.random_range(0..3), rng.random_range(0..PER_DC));
                    let k = keys[rng.random_range(0..keys.len())].clone();
                    get(&mut net, c, &k);
                }
                4 => {
                    let n = rng.random_range(0..net.clocks.len());
                    net.clocks[n] += rng.random_range(0..3_000);
                }
                5 => {
                    let n = NodeId(rng.random_range(0..net.nodes.len() as u32));
                    net.fire_timers(n);
                }
                _ => {
                    if !net.queue.is_empty() {
                        let i = rng.random_range(0..net.queue.len());
                        let (from, to) = (net.queue[i].from, net.queue[i].to);
                        // The channel's first message (FIFO), checked as it goes.
                        let first = net.queue.iter().find(|m| m.from == from && m.to == to).cloned().unwrap();
                        check(&first);
                        net.deliver_first(|m| m.from == from && m.to == to);
                    }
                }
            }
        }
        for _ in 0..300 {
            net.advance_clocks(1_000);
            net.fire_all_timers();
            while let Some(m) = net.queue.first().cloned() {
                check(&m);
                net.deliver_first(|_| true);
            }
        }
        // Every update shipped to each of the two other DCs, once.
        assert_eq!(shipped.len(), 2 * written.len(), "seed {seed}: updates lost or shipped twice");
    }
}

/// Alg 2 lines 10–12: with no updates at all, heartbeats move every
/// partition's time, so StableTime keeps up with the clock.
#[test]
fn stable_time_advances_with_no_updates() {
    let mut net = net(2, 3);
    let e = eunomia_nodes(&net, 0)[0];
    ticks(&mut net, 5, &[]);
    let before = replica(&net, e).stable_us();
    assert!(before > 0, "StableTime never moved");
    ticks(&mut net, 20, &[]);
    let after = replica(&net, e).stable_us();
    assert!(after >= before + 15_000, "StableTime moved {before} → {after} in 20 ms with no updates");
    let r = receiver_node(&net, 1);
    let site = net.nodes[r.idx()].server().receiver().unwrap().site_time()[0];
    assert!(site >= before, "the receiver's SiteTime[0] did not follow: {site}");
}

/// §4: a remote update is applied only after its dependencies. DC 0
/// writes a photo, then (causally after it) an album entry; the photo's
/// payload to DC 1 is held back. DC 1 never sees the album without its
/// photo, and sees both once the payload arrives.
#[test]
fn remote_updates_apply_in_causal_order() {
    let mut net = net(2, 3);
    let [photo, album] = net.keys_on_distinct_partitions(2).try_into().unwrap();
    let (w, r) = (cl(0, 0), cl(1, 0));
    put(&mut net, w, &photo, "photo");
    put(&mut net, w, &album, "album");
    let slow = (net.server_for(DcId(0), &photo), net.server_for(DcId(1), &photo));
    let held = |m: &InFlight<Msg>| m.from == Dest::Node(slow.0) && m.to == Dest::Node(slow.1);
    for _ in 0..30 {
        net.advance_clocks(1_000);
        net.fire_all_timers();
        net.deliver_while(|m| !held(m));
        assert_eq!(get(&mut net, r, &album), None, "the album is visible before its photo's payload arrived");
    }
    ticks(&mut net, 5, &[]);
    assert_eq!(get(&mut net, r, &album).as_deref(), Some("album"));
    assert_eq!(get(&mut net, r, &photo).as_deref(), Some("photo"));
}

/// The broken variant that does not wait for a partition's `ok` (Alg 5
/// line 15) shows the album without its photo: the test above can fail.
#[test]
fn the_async_apply_mutant_shows_an_effect_before_its_cause() {
    let mut net = net_r(2, 3, 1, Config { mutant_async_apply: true, ..Config::default() });
    let [photo, album] = net.keys_on_distinct_partitions(2).try_into().unwrap();
    put(&mut net, cl(0, 0), &photo, "photo");
    put(&mut net, cl(0, 0), &album, "album");
    let slow = (net.server_for(DcId(0), &photo), net.server_for(DcId(1), &photo));
    let held = |m: &InFlight<Msg>| m.from == Dest::Node(slow.0) && m.to == Dest::Node(slow.1);
    for _ in 0..30 {
        net.advance_clocks(1_000);
        net.fire_all_timers();
        net.deliver_while(|m| !held(m));
    }
    assert_eq!(get(&mut net, cl(1, 0), &album).as_deref(), Some("album"));
    assert_eq!(get(&mut net, cl(1, 0), &photo), None);
}

/// §5: a partition applies a remote update only with both its payload
/// and its metadata, whichever arrives first.
#[test]
fn payload_and_metadata_apply_in_either_order() {
    for payload_first in [true, false] {
        let mut net = net(2, 1);
        let k = net.key_on(0);
        put(&mut net, cl(0, 0), &k, "v");
        let there = net.server_for(DcId(1), &k);
        let is_payload = |m: &InFlight<Msg>| matches!(m.msg, Msg::Payload { .. });
        let is_apply = |m: &InFlight<Msg>| matches!(m.msg, Msg::Apply { .. }) && m.to == Dest::Node(there);
        if payload_first {
            // Deliver the payload, keep the metadata's path still: stored, invisible.
            net.deliver_while(is_payload);
            assert_eq!(get(&mut net, cl(1, 0), &k), None, "visible with its payload only");
            ticks(&mut net, 10, &[]);
        } else {
            // Let the metadata reach the partition while the payload waits.
            for _ in 0..20 {
                net.advance_clocks(1_000);
                net.fire_all_timers();
                net.deliver_while(|m| !is_payload(m));
            }
            assert!(
                net.nodes[there.idx()].store().latest(&k).is_none() && !net.queue.iter().any(is_apply),
                "the apply should have reached the partition and be waiting there"
            );
            assert_eq!(get(&mut net, cl(1, 0), &k), None, "visible with its metadata only");
            net.deliver_while(is_payload);
        }
        assert_eq!(get(&mut net, cl(1, 0), &k).as_deref(), Some("v"), "payload first: {payload_first}");
    }
}

/// §1, §3: updates never wait for Eunomia. With every Eunomia replica
/// stalled, PUTs complete on client traffic alone (no timer, no other
/// message), and only remote visibility waits.
#[test]
fn updates_complete_while_eunomia_is_stalled() {
    let mut net = net(2, 2);
    let stalled = eunomia_nodes(&net, 0);
    let k = net.key_on(1);
    for i in 0..20 {
        put(&mut net, cl(0, 0), &k, &format!("v{i}"));
        ticks(&mut net, 1, &stalled);
    }
    assert_eq!(get(&mut net, cl(0, 1), &k).as_deref(), Some("v19"));
    assert_eq!(get(&mut net, cl(1, 0), &k), None, "a remote update visible without Eunomia");
}

/// §3.3: with r = 3 replicas, the leader and a second replica crash for
/// good; the third takes over (failure detector), and every update, those
/// written before the crash included, becomes visible remotely.
#[test]
fn ft_eunomia_survives_two_replica_crashes_and_loses_nothing() {
    let mut net = net_r(2, 2, 3, Config::default());
    let reps = eunomia_nodes(&net, 0);
    let keys = some_keys(4);
    for (i, k) in keys.iter().enumerate() {
        put(&mut net, cl(0, 0), k, &format!("before{i}"));
    }
    // Crash before anything was shipped: only the survivor can ship it.
    let down = [reps[0], reps[1]];
    for (i, k) in keys.iter().enumerate().take(2) {
        put(&mut net, cl(0, 1), k, &format!("after{i}"));
    }
    ticks(&mut net, 100, &down);
    assert_eq!(replica(&net, reps[2]).leader(), 2, "the survivor does not lead");
    for (i, k) in keys.iter().enumerate() {
        let want = if i < 2 { format!("after{i}") } else { format!("before{i}") };
        assert_eq!(get(&mut net, cl(1, 0), k), Some(want), "key {i} in DC 1");
    }
}

/// §3.3: the leader crashes mid-run; a follower takes over and visibility
/// resumes, updates shipped by both the old and the new leader applied
/// once each.
#[test]
fn a_new_leader_takes_over_and_visibility_resumes() {
    let mut net = net_r(2, 2, 3, Config::default());
    let reps = eunomia_nodes(&net, 0);
    let k = net.key_on(0);
    put(&mut net, cl(0, 0), &k, "one");
    ticks(&mut net, 20, &[]);
    assert_eq!(get(&mut net, cl(1, 0), &k).as_deref(), Some("one"));
    assert_eq!(replica(&net, reps[1]).leader(), 0);
    let down = [reps[0]];
    put(&mut net, cl(0, 0), &k, "two");
    ticks(&mut net, 3, &down);
    assert_eq!(get(&mut net, cl(1, 0), &k).as_deref(), Some("one"), "shipped with the leader down, before takeover");
    ticks(&mut net, 60, &down);
    assert_eq!(replica(&net, reps[1]).leader(), 1, "replica 1 should lead once replica 0 is suspected");
    assert_eq!(get(&mut net, cl(1, 0), &k).as_deref(), Some("two"), "visibility did not resume");
    put(&mut net, cl(0, 1), &k, "three");
    ticks(&mut net, 20, &down);
    assert_eq!(get(&mut net, cl(1, 0), &k).as_deref(), Some("three"));
}

/// A restarted Eunomia replica, receiver and partition resume from their
/// journals: nothing acknowledged is lost, nothing applied twice.
#[test]
fn services_restart_from_their_journals() {
    let mut net = net(2, 2);
    let cfg = Config::default();
    let keys = some_keys(3);
    put(&mut net, cl(0, 0), &keys[0], "a");
    ticks(&mut net, 2, &[]);
    let (e, r) = (eunomia_nodes(&net, 0)[0], receiver_node(&net, 1));
    net.restart(e, &cfg);
    put(&mut net, cl(0, 0), &keys[1], "b");
    net.restart(r, &cfg);
    net.restart(net.server_for(DcId(0), &keys[1]), &cfg);
    put(&mut net, cl(0, 0), &keys[2], "c");
    ticks(&mut net, 30, &[]);
    for (k, v) in keys.iter().zip(["a", "b", "c"]) {
        assert_eq!(get(&mut net, cl(1, 0), k).as_deref(), Some(v));
    }
}

/// Deviation 7: a new leader's shipment that arrives before the old
/// leader's last one (which it starts after) waits for it, and neither is
/// lost: both updates are applied, in order.
#[test]
fn a_shipment_ahead_of_a_gap_waits_for_it() {
    let mut net = net_r(2, 1, 2, Config::default());
    let (old, new) = (eunomia_nodes(&net, 0)[0], eunomia_nodes(&net, 0)[1]);
    let r = receiver_node(&net, 1);
    let op = |k: &str, ts: u64| OpMeta {
        key: bytes(k),
        partition: causeway_core::PartitionId(0),
        vts: Vts::from_slice(&[ts, 0]),
        dep_us: 0,
    };
    let ship = |from_us, to_us, ops: Vec<OpMeta>| Msg::Ship { from_us, to_us, ops: ops.into() };
    net.queue.push(InFlight::new(Dest::Node(new), Dest::Node(r), ship(100, 200, vec![op("b", 150)])));
    net.deliver_all();
    let applies = |net: &Net| {
        net.queue
            .iter()
            .filter_map(|m| match &m.msg {
                Msg::Apply { ops, .. } => {
                    Some(ops.iter().map(|o| String::from_utf8_lossy(&o.key).into_owned()).collect::<Vec<_>>())
                }
                _ => None,
            })
            .flatten()
            .collect::<Vec<_>>()
    };
    assert!(applies(&net).is_empty(), "applied across a gap");
    net.queue.push(InFlight::new(Dest::Node(old), Dest::Node(r), ship(0, 100, vec![op("a", 50)])));
    net.deliver_first(|m| matches!(m.msg, Msg::Ship { .. }));
    assert_eq!(applies(&net), ["a", "b"], "both, the old leader's first");
}

/// Deviation 6's lease: an idle partition journals its clock about once
/// per `clock_lease_us`, not at every heartbeat; restarted with its clock
/// set far back, it still stamps above every time it announced, and its
/// update reaches the other DC.
#[test]
fn an_idle_partition_journals_its_clock_once_per_lease() {
    let cfg = Config::default();
    assert_eq!((cfg.heartbeat_interval_us, cfg.clock_lease_us), (1_000, 100_000));
    let mut net = net(2, 1);
    let key = some_keys(1).remove(0);
    let p = net.server_for(DcId(0), &key);
    ticks(&mut net, 5, &[]);
    let before = net.logs[p.idx()].len();
    ticks(&mut net, 250, &[]);
    let records = net.logs[p.idx()].len() - before;
    // Two or three renewals in 250 ms of 100 ms leases, a record or two
    // each, where every heartbeat used to write.
    assert!((1..=6).contains(&records), "{records} log records in 250 idle heartbeats");
    let stable_us = replica(&net, eunomia_nodes(&net, 0)[0]).stable_us();
    assert!(stable_us > 200_000, "StableTime {stable_us} did not follow the heartbeats");
    net.clocks[p.idx()] = 1_000;
    net.restart(p, &cfg);
    put(&mut net, cl(0, 0), &key, "after");
    let ts = net.nodes[p.idx()].store().latest(&key).expect("stored").ts;
    assert!(ts > stable_us, "stamped {ts} at or below the StableTime {stable_us} it had announced");
    ticks(&mut net, 20, &[]);
    assert_eq!(get(&mut net, cl(1, 0), &key).as_deref(), Some("after"));
}

/// Deviation 7: the leader ships an update, tells the follower (which
/// learns its StableTime), and dies for good before the shipment is
/// delivered. The follower still holds the update, since no receiver
/// acknowledged it, and ships it once it leads.
#[test]
fn a_shipment_lost_with_its_dead_leader_is_shipped_again() {
    let mut net = net_r(2, 1, 2, Config::default());
    let reps = eunomia_nodes(&net, 0);
    let k = net.key_on(0);
    put(&mut net, cl(0, 0), &k, "x");
    let mut lost = 0;
    for _ in 0..50 {
        net.advance_clocks(1_000);
        net.fire_all_timers();
        let ships = |m: &InFlight<Msg>| {
            m.from == Dest::Node(reps[0]) && matches!(&m.msg, Msg::Ship { ops, .. } if !ops.is_empty())
        };
        lost = net.queue.iter().filter(|m| ships(m)).count();
        net.queue.retain(|m| !ships(m));
        net.deliver_while(|_| true);
        if lost > 0 {
            break;
        }
    }
    assert_eq!(lost, 1, "the leader never shipped the update");
    assert!(replica(&net, reps[1]).stable_us() > 0, "the follower heard the leader's StableTime");
    ticks(&mut net, 100, &[reps[0]]);
    assert_eq!(replica(&net, reps[1]).leader(), 1);
    assert_eq!(get(&mut net, cl(1, 0), &k).as_deref(), Some("x"), "the update died with its leader");
}

/// Two partitions of DC0 stamp the same microsecond; an apply round takes
/// one of them and not the other (it waits for a DC2 update). SiteTime\[DC0\]
/// must then stop just below their timestamp: at it, the receiver would
/// count the held update as applied (for other DCs' dependency checks, and
/// when it rebuilds its queues after a restart).
#[test]
fn an_apply_round_that_splits_equal_timestamps_keeps_site_time_below_them() {
    let mut net = net(3, 2);
    let r = receiver_node(&net, 1);
    let op = |k: &str, p: u32, vts: Vec<u64>| OpMeta {
        key: bytes(k),
        partition: causeway_core::PartitionId(p),
        vts: Vts::from_vec(vts),
        dep_us: 0,
    };
    let ship = |from_us, to_us, ops: Vec<OpMeta>| Msg::Ship { from_us, to_us, ops: ops.into() };
    let e0 = eunomia_nodes(&net, 0)[0];
    let (a, b) = (op("a", 0, vec![100, 0, 0]), op("b", 1, vec![100, 0, 50]));
    net.queue.push(InFlight::new(Dest::Node(e0), Dest::Node(r), ship(0, 100, vec![a, b])));
    net.deliver_first(|m| matches!(m.msg, Msg::Ship { .. }));
    let applies: Vec<(NodeId, u64, Vec<String>)> = net
        .queue
        .iter()
        .filter_map(|m| match (&m.msg, m.to) {
            (Msg::Apply { round, ops }, Dest::Node(n)) => {
                Some((n, *round, ops.iter().map(|o| String::from_utf8_lossy(&o.key).into_owned()).collect()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(applies.len(), 1, "{applies:?}");
    let (p, round, keys) = applies[0].clone();
    assert_eq!(keys, ["a"], "b waits for DC2's update at 50");
    net.queue.retain(|m| !matches!(m.msg, Msg::Apply { .. }));
    net.queue.push(InFlight::new(Dest::Node(p), Dest::Node(r), Msg::Applied { round }));
    net.deliver_first(|m| matches!(m.msg, Msg::Applied { .. }));
    let site = net.nodes[r.idx()].server().receiver().expect("a receiver").site_time().to_vec();
    assert_eq!(site[0], 99, "SiteTime[DC0] = {} counts b (at 100) as applied", site[0]);
}

/// Deviation 8: an apply round's critical path holds no log write of the
/// receiver's. With a log sync taking 1 ms, a receiver that journaled each
/// round (and logged the delivery of each sequenced `Applied`) waited for
/// its own sync before every next round left, and under cross-partition
/// dependencies (one dependency step per round) it fell ever further
/// behind the writes (torture seed 9005 with `--sync-us 1000`). Two
/// rounds here: b, written after a by the same client on another
/// partition, may depend on it and waits for a's acknowledgement. Handling
/// either acknowledgement, which finishes one round and sends the next,
/// must append nothing to the receiver's log; and a crash that loses the
/// unjournaled bookkeeping costs nothing but applying again.
#[test]
fn an_apply_round_leaves_without_a_receiver_log_write() {
    let mut net = net(2, 2);
    let cfg = Config::default();
    let keys = net.keys_on_distinct_partitions(2);
    let r = receiver_node(&net, 1);
    put(&mut net, cl(0, 0), &keys[0], "a");
    put(&mut net, cl(0, 0), &keys[1], "b");
    let applied_to_r = |m: &InFlight<Msg>| matches!(m.msg, Msg::Applied { .. }) && m.to == Dest::Node(r);
    let (mut acks, mut records) = (0, 0);
    for _ in 0..30 {
        net.advance_clocks(1_000);
        net.fire_all_timers();
        loop {
            net.deliver_while(|m| !applied_to_r(m));
            let before = net.logs[r.idx()].len();
            if !net.deliver_first(applied_to_r) {
                break;
            }
            acks += 1;
            records += net.logs[r.idx()].len() - before;
        }
    }
    assert!(acks >= 2, "{acks} acknowledgements: a and b in one round");
    assert_eq!(records, 0, "the receiver logged {records} records handling its rounds' acknowledgements");
    for (k, v) in keys.iter().zip(["a", "b"]) {
        assert_eq!(get(&mut net, cl(1, 0), k).as_deref(), Some(v));
    }
    // The rounds' bookkeeping was never journaled: a restart losing what
    // no sync made durable applies them again, and nothing goes back.
    net.restart_losing_unsynced(r, &cfg);
    ticks(&mut net, 5, &[]);
    for (k, v) in keys.iter().zip(["a", "b"]) {
        assert_eq!(get(&mut net, cl(1, 0), k).as_deref(), Some(v));
    }
    let site = net.nodes[r.idx()].server().receiver().expect("a receiver").site_time().to_vec();
    let b_ts = net.latest(net.server_for(DcId(0), &keys[1]), &keys[1]).ts;
    assert!(site[0] >= b_ts, "SiteTime[DC0] {} below b's {b_ts} after the restart", site[0]);
}

/// Deviation 11: while a DC is idle its shipments are empty, ephemeral and
/// journaled by nobody, yet StableTime and SiteTime move on; losing some of
/// them, or a receiver restart that forgets what they said, leaves no gap
/// that a later shipment of updates would wait behind.
#[test]
fn an_idle_dc_ships_without_a_log_write_and_a_lost_empty_shipment_leaves_no_gap() {
    let mut net = net(2, 2);
    let cfg = Config::default();
    let keys = some_keys(3);
    let (e0, r1) = (eunomia_nodes(&net, 0)[0], receiver_node(&net, 1));
    put(&mut net, cl(0, 0), &keys[0], "a");
    ticks(&mut net, 10, &[]);
    assert_eq!(get(&mut net, cl(1, 0), &keys[0]).as_deref(), Some("a"));
    let service_logs =
        |net: &Net| [e0, r1, eunomia_nodes(net, 1)[0], receiver_node(net, 0)].map(|n| net.logs[n.idx()].len());
    let (logs_before, stable_before) = (service_logs(&net), replica(&net, e0).stable_us());
    let site_before = net.nodes[r1.idx()].server().receiver().unwrap().site_time()[0];
    ticks(&mut net, 30, &[]);
    assert_eq!(service_logs(&net), logs_before, "service nodes wrote their logs in 30 idle ms");
    assert!(replica(&net, e0).stable_us() >= stable_before + 25_000, "StableTime stood still while idle");
    let site = net.nodes[r1.idx()].server().receiver().unwrap().site_time()[0];
    assert!(site >= site_before + 25_000, "SiteTime[DC0] followed only {site_before} → {site}");
    // Empty shipments lost on their way: the next one with updates still
    // starts where the receiver stands.
    for _ in 0..5 {
        net.advance_clocks(1_000);
        net.fire_all_timers();
        net.queue.retain(|m| !matches!(&m.msg, Msg::Ship { ops, .. } if ops.is_empty()));
        net.deliver_while(|_| true);
    }
    put(&mut net, cl(0, 0), &keys[1], "b");
    ticks(&mut net, 10, &[]);
    assert_eq!(get(&mut net, cl(1, 0), &keys[1]).as_deref(), Some("b"), "a lost empty shipment left a gap");
    // The receiver forgets what the empty shipments since said.
    ticks(&mut net, 10, &[]);
    net.restart_losing_unsynced(r1, &cfg);
    put(&mut net, cl(0, 0), &keys[2], "c");
    ticks(&mut net, 10, &[]);
    assert_eq!(get(&mut net, cl(1, 0), &keys[2]).as_deref(), Some("c"), "a restarted receiver waits behind a gap");
}

/// Eunomia holds an update until every receiver has it (deviation 7):
/// with two DCs it lets go once the other DC's receiver acknowledges, and
/// in a single DC, with no receiver at all, once it is stable.
#[test]
fn eunomia_lets_go_of_what_every_receiver_has() {
    for dcs in [1, 2] {
        let mut net = net(dcs, 2);
        let keys = some_keys(4);
        for k in &keys {
            put(&mut net, cl(0, 0), k, "v");
        }
        let e = eunomia_nodes(&net, 0)[0];
        ticks(&mut net, 2, &[]);
        ticks(&mut net, 30, &[]);
        assert_eq!(replica(&net, e).held_ops(), 0, "{dcs} DC(s): Eunomia still holds updates");
    }
}

/// A leader lets go of the memory of what it shipped to every receiver
/// (its store keeps it until they acknowledge). Should it stop leading
/// before they do, it reads those updates back from its store, and once it
/// leads again ships them again from the receivers' acknowledgement, as
/// a new leader does (deviation 7).
#[test]
fn a_replica_leading_again_ships_again_what_it_let_go_of() {
    let mut net = net_r(2, 1, 2, Config::default());
    let reps = eunomia_nodes(&net, 0);
    let k = net.key_on(0);
    // Every shipment of replica 1 that carries the update, by its range.
    let mut carried = std::collections::BTreeSet::new();
    let look = |net: &Net, carried: &mut std::collections::BTreeSet<(u64, u64)>| {
        for m in &net.queue {
            if let Msg::Ship { from_us, to_us, ops } = &m.msg
                && m.from == Dest::Node(reps[1])
                && ops.to_ops().iter().any(|u| u.key == k)
            {
                carried.insert((*from_us, *to_us));
            }
        }
    };
    // Replica 0 is away: replica 1 leads, and its shipments are held
    // back (a slow link to the receiver) until one carries the update.
    ticks(&mut net, 30, &[reps[0]]);
    assert_eq!(replica(&net, reps[1]).leader(), 1);
    put(&mut net, cl(0, 0), &k, "x");
    let away = |m: &InFlight<Msg>| [m.from, m.to].iter().any(|d| *d == Dest::Node(reps[0]));
    let held = |m: &InFlight<Msg>| matches!(m.msg, Msg::Ship { .. });
    for _ in 0..50 {
        net.advance_clocks(1_000);
        for i in 0..net.nodes.len() {
            if NodeId(i as u32) != reps[0] {
                net.fire_timers(NodeId(i as u32));
            }
        }
        net.queue.retain(|m| !away(m));
        net.deliver_while(|m| !away(m) && !held(m));
        net.queue.retain(|m| !away(m));
        look(&net, &mut carried);
        if !carried.is_empty() {
            break;
        }
    }
    assert_eq!(carried.len(), 1, "replica 1 never shipped the update");
    assert_eq!(replica(&net, reps[1]).held_ops(), 0, "the shipped update still in memory");
    // Replica 0 restarts and leads (its shipments held back too): replica
    // 1 follows, and holds the update in memory again.
    net.restart(reps[0], &Config::default());
    for _ in 0..10 {
        net.advance_clocks(1_000);
        net.fire_all_timers();
        net.deliver_while(|m| !held(m));
    }
    assert_eq!(replica(&net, reps[1]).leader(), 0);
    assert_eq!(replica(&net, reps[1]).held_ops(), 1, "the update not read back from the store");
    // Replica 0 goes for good: replica 1 leads again and ships the update
    // again, from the receiver's acknowledgement (its shipments held back
    // until then; then all are delivered, the receiver drops the copy).
    for _ in 0..100 {
        net.advance_clocks(1_000);
        for i in 0..net.nodes.len() {
            if NodeId(i as u32) != reps[0] {
                net.fire_timers(NodeId(i as u32));
            }
        }
        look(&net, &mut carried);
        let release = carried.len() > 1;
        net.queue.retain(|m| !away(m));
        net.deliver_while(|m| !away(m) && (release || !held(m)));
        net.queue.retain(|m| !away(m));
    }
    assert_eq!(replica(&net, reps[1]).leader(), 1);
    assert_eq!(carried.len(), 2, "shipped once only: {carried:?}");
    assert_eq!(get(&mut net, cl(1, 0), &k).as_deref(), Some("x"));
    assert_eq!(replica(&net, reps[1]).held_ops(), 0, "acknowledged, and still held");
}

/// A shipment encoded once travels, and is logged, as one made of its
/// updates would be; one cut from the same bytes for a receiver sent up to
/// a later point holds the updates from there on.
#[test]
fn a_shipment_encoded_once_is_its_updates() {
    let ops: Vec<OpMeta> = (0..5u32)
        .map(|i| OpMeta {
            key: bytes(&format!("key{i}")),
            partition: causeway_core::PartitionId(i % 2),
            vts: Vts::from_slice(&[100 + i as u64, 7, 1 << 40]),
            dep_us: if i == 4 { u64::MAX } else { i as u64 },
        })
        .collect();
    for u in &ops {
        let mut one = Vec::new();
        msg::encode_ops([u], &mut one);
        assert_eq!(one, postcard::to_allocvec(u).unwrap(), "not as postcard encodes {u:?}");
    }
    let (mut buf, mut starts) = (Vec::new(), Vec::new());
    for u in &ops {
        starts.push(buf.len());
        msg::encode_ops([u], &mut buf);
    }
    let all = bytes::Bytes::from(buf);
    let ship = |ops: Shipment| Msg::Ship { from_us: 1, to_us: 2, ops };
    for i in 0..=ops.len() {
        let at = starts.get(i).copied().unwrap_or(all.len());
        let keys = ops[i..].iter().map(|u| u.key.len()).sum();
        let cut = Shipment::encoded(ops.len() - i, keys, all.slice(at..));
        let whole = Shipment::from(ops[i..].to_vec());
        assert_eq!((cut.len(), cut.key_bytes()), (whole.len(), whole.key_bytes()));
        let wire = postcard::to_allocvec(&ship(cut.clone())).unwrap();
        assert_eq!(wire, postcard::to_allocvec(&ship(whole)).unwrap(), "from update {i}");
        match postcard::from_bytes::<Msg>(&wire).unwrap() {
            Msg::Ship { ops: got, .. } => assert_eq!(got.into_ops(), ops[i..]),
            other => panic!("{other:?}"),
        }
        assert_eq!(cut.into_ops(), ops[i..]);
    }
}

/// Alg 5's ρ (deviation 4): a receiver starts at most one apply round per
/// `check_pending_interval_us`, and that round takes what every origin
/// shipped meanwhile; with ρ = 0 each origin's shipment gets a round of its
/// own. Either way every update becomes visible.
#[test]
fn a_receiver_starts_at_most_one_apply_round_per_rho() {
    let rounds_with = |rho_us: u64| {
        let cfg = Config { check_pending_interval_us: rho_us, ..Config::default() };
        let mut net = net_r(3, 2, 1, cfg);
        let r2 = receiver_node(&net, 2);
        let keys = some_keys(40);
        let mut rounds = std::collections::BTreeSet::new();
        let mut count = |m: &InFlight<Msg>| {
            if let Msg::Apply { round, .. } = &m.msg
                && m.from == Dest::Node(r2)
            {
                rounds.insert(*round);
            }
            true
        };
        for (i, pair) in keys.chunks(2).enumerate() {
            put(&mut net, cl(0, 0), &pair[0], &format!("a{i}"));
            put(&mut net, cl(1, 0), &pair[1], &format!("b{i}"));
            net.advance_clocks(1_000);
            net.fire_all_timers();
            net.deliver_while(&mut count);
        }
        for _ in 0..10 {
            net.advance_clocks(1_000);
            net.fire_all_timers();
            net.deliver_while(&mut count);
        }
        for (i, pair) in keys.chunks(2).enumerate() {
            assert_eq!(get(&mut net, cl(2, 0), &pair[0]), Some(format!("a{i}")), "ρ = {rho_us} µs");
            assert_eq!(get(&mut net, cl(2, 0), &pair[1]), Some(format!("b{i}")), "ρ = {rho_us} µs");
        }
        rounds.len()
    };
    let (every_rho, every_shipment) = (rounds_with(1_000), rounds_with(0));
    assert!(every_rho <= 30, "{every_rho} rounds in 30 ms with ρ = 1 ms");
    assert!(
        every_shipment >= every_rho * 3 / 2,
        "{every_shipment} rounds with ρ = 0 against {every_rho} with ρ = 1 ms: one round should take both origins"
    );
}

/// ρ gates when a flush starts, not how long it runs: a shipment holding
/// a chain of dependent updates alternating between two partitions needs
/// one round per link (deviation 8), and the rounds follow one another at
/// once, as Alg 5's flush applies them one after another, rather than one
/// per ρ (which let a receiver fall seconds behind a busy DC).
#[test]
fn a_flush_applies_a_dependency_chain_without_waiting_for_rho() {
    let cfg = Config { check_pending_interval_us: 1_000, ..Config::default() };
    let mut net = net_r(2, 2, 1, cfg);
    let [a, b]: [Key; 2] = net.keys_on_distinct_partitions(2).try_into().expect("two keys");
    let r1 = receiver_node(&net, 1);
    // One session writes a, b, a, b, ...: each update depends on the one
    // before it, on the other partition.
    let chain = 6;
    for i in 0..chain {
        put(&mut net, cl(0, 0), if i % 2 == 0 { &a } else { &b }, &format!("v{i}"));
    }
    // Everything is shipped, and held back from DC 1's receiver.
    for _ in 0..10 {
        net.advance_clocks(1_000);
        net.fire_all_timers();
        net.deliver_while(|m| m.to != Dest::Node(r1));
    }
    // The shipments arrive; no timer fires while the chain is applied.
    net.deliver_while(|_| true);
    let last = |i: usize| Some(format!("v{i}"));
    assert_eq!(get(&mut net, cl(1, 0), &a), last(chain - 2), "the flush stopped before a's last write");
    assert_eq!(get(&mut net, cl(1, 0), &b), last(chain - 1), "the flush stopped before b's last write");
}
