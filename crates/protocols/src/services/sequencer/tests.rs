//! Step-by-step tests of the sequencer baseline (Gunawardhana et al. §2,
//! §7.1), on the hand-cranked network.

use super::*;
use crate::kit::testkit::{self, Dest, InFlight, TestNet, bytes, text};
use causeway_core::{ClientId, DcId, Key, NodeId, Op, OpResult, ServiceSpec, TopologySpec};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Net = TestNet<SSeq>;

const PER_DC: u32 = 2;

/// `dcs` DCs of `partitions` partitions with `replicas` sequencer replicas per DC.
fn net_r(dcs: u16, partitions: u32, replicas: u16, cfg: Config) -> Net {
    let mut spec = TopologySpec::full(dcs, partitions);
    spec.services = vec![ServiceSpec { name: SEQUENCER.into(), per_dc: replicas }];
    let mut net = TestNet::with_spec(spec, PER_DC, cfg);
    // A PUT's own traffic: its way through the sequencer chain.
    net.also_op_traffic = |m| matches!(m, Msg::SeqReq { .. } | Msg::Chain { .. } | Msg::SeqReply { .. });
    net
}

fn net(dcs: u16, partitions: u32) -> Net {
    net_r(dcs, partitions, 1, Config::default())
}

fn cl(dc: u16, i: u32) -> ClientId {
    ClientId(dc as u32 * PER_DC + i)
}

fn chain(net: &Net, dc: u16) -> Vec<NodeId> {
    net.topology.service_nodes(DcId(dc), net.topology.service_index(SEQUENCER).unwrap()).to_vec()
}

fn receiver_node(net: &Net, dc: u16) -> NodeId {
    net.topology.service_nodes(DcId(dc), net.topology.service_index(RECEIVER).unwrap())[0]
}

fn last(net: &Net, n: NodeId) -> u64 {
    net.nodes[n.idx()].server().sequencer().expect("a sequencer replica").last()
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

/// Fire every timer and deliver everything, `n` times.
fn settle(net: &mut Net, n: usize) {
    for _ in 0..n {
        net.advance_clocks(10_000);
        net.fire_all_timers();
        net.deliver_all();
    }
}

/// The numbers every partition of DC `dc` holds for its local versions.
fn local_numbers(net: &Net, dc: u16) -> Vec<u64> {
    let mut seqs = Vec::new();
    for p in 0..net.topology.partitions() {
        let n = net.topology.server(DcId(dc), causeway_core::PartitionId(p as u32)).unwrap();
        for v in net.nodes[n.idx()].store().all_versions().filter(|v| v.origin == DcId(dc)) {
            seqs.push(v.seq);
        }
    }
    seqs.sort();
    seqs
}

#[test]
fn validate_wants_full_replication_and_both_services() {
    let mut spec = TopologySpec::full(2, 2);
    spec.add_missing_services(SSeq::SERVICES);
    let t = causeway_core::Topology::new(spec).unwrap();
    assert!(SSeq::validate(&Config::default(), &t).is_ok());
    assert!(SSeq::validate(&Config::default(), &testkit::full_replication(2, 2)).is_err());
    assert!(SSeq::validate(&Config::default(), &testkit::partial_replication()).is_err());
    assert!(SSeq::validate(&Config { apply_retry_us: 0, ..Config::default() }, &t).is_err());
}

/// §7.1: "a monotonically increasing number": every DC's numbers are
/// 1, 2, …, n with no gap and no repeat, each PUT's own entry above the
/// causal past its client sent, under random interleavings of PUTs from
/// several clients and partitions and 1–3 replicas.
#[test]
fn numbers_are_dense_and_increasing_per_dc() {
    for seed in 1..=12u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let replicas = 1 + (seed % 3) as u16;
        let mut net = net_r(2, 3, replicas, Config::default());
        let keys: Vec<Key> = (0..6).map(|i| bytes(&format!("key{i}"))).collect();
        let mut puts = [0u64; 2];
        let mut invoked: Vec<ClientId> = Vec::new();
        // Per DC and number, the (partition, request) the tail answered it to.
        let mut answered: std::collections::BTreeMap<(u16, u64), (Dest, u64)> = Default::default();
        let tails = [*chain(&net, 0).last().unwrap(), *chain(&net, 1).last().unwrap()];
        let mut record = |net: &Net| {
            for m in &net.queue {
                if let (Msg::SeqReply { id, seq }, Dest::Node(from)) = (&m.msg, m.from) {
                    let dc = tails.iter().position(|&t| t == from).expect("answered by a tail") as u16;
                    let was = answered.insert((dc, *seq), (m.to, *id));
                    assert!(was.is_none_or(|w| w == (m.to, *id)), "seed {seed}: number {seq} of DC {dc} given twice");
                }
            }
        };
        for step in 0..400 {
            record(&net);
            match rng.random_range(0..4) {
                0 => {
                    let dc = rng.random_range(0..2u16);
                    let c = cl(dc, rng.random_range(0..PER_DC));
                    if invoked.contains(&c) {
                        continue;
                    }
                    let k = keys[rng.random_range(0..keys.len())].clone();
                    net.invoke(c, Op::Put { key: k, value: bytes(&format!("{seed}-{step}")) });
                    invoked.push(c);
                    puts[dc as usize] += 1;
                }
                _ => {
                    if !net.queue.is_empty() {
                        let i = rng.random_range(0..net.queue.len());
                        let (from, to) = (net.queue[i].from, net.queue[i].to);
                        net.deliver_first(|m| m.from == from && m.to == to);
                    }
                }
            }
            invoked.retain(|&c| match net.take_result(c) {
                Some(r) => {
                    assert_eq!(r, OpResult::Put, "seed {seed}");
                    false
                }
                None => true,
            });
        }
        while !net.queue.is_empty() {
            record(&net);
            net.deliver_first(|_| true);
        }
        for dc in 0..2u16 {
            let seqs: Vec<u64> = answered.keys().filter(|(d, _)| *d == dc).map(|&(_, s)| s).collect();
            assert_eq!(seqs, (1..=puts[dc as usize]).collect::<Vec<_>>(), "seed {seed}: DC {dc}'s numbers");
            for n in chain(&net, dc) {
                assert_eq!(last(&net, n), puts[dc as usize], "seed {seed}: a replica's last number");
            }
        }
    }
}

/// §7.1: the partition asks "before returning to the client". With the
/// sequencer's answer held back, the PUT does not complete, and the key
/// is not written; once it comes, the PUT completes with the number as
/// its own entry. A-Seq (the mutant) completes with the answer held back.
#[test]
fn a_put_is_acknowledged_only_after_the_sequencers_answer() {
    for mutant in [false, true] {
        let mut net = net_r(2, 2, 1, Config { mutant_async_sequencer: mutant, ..Config::default() });
        let c = cl(0, 0);
        let k = net.key_on(1);
        let seq = chain(&net, 0)[0];
        net.invoke(c, Op::Put { key: k.clone(), value: bytes("v") });
        let answer = |m: &InFlight<Msg>| m.from == Dest::Node(seq);
        for _ in 0..5 {
            net.deliver_while(|m| !answer(m));
        }
        assert!(net.queue.iter().any(|m| matches!(m.msg, Msg::SeqReply { .. })), "the answer should be waiting");
        let server = net.server_for(DcId(0), &k);
        if mutant {
            assert_eq!(net.take_result(c), Some(OpResult::Put), "A-Seq acknowledges without the number");
            continue;
        }
        assert_eq!(net.take_result(c), None, "acknowledged before the sequencer answered");
        assert!(net.nodes[server.idx()].store().latest(&k).is_none(), "applied before the number came");
        net.deliver_all();
        assert_eq!(net.take_result(c), Some(OpResult::Put));
        assert_eq!(net.latest(server, &k).vts, vec![1, 0]);
    }
}

/// §2: S-Seq's vector captures causality. DC 0 writes a photo, then
/// (causally after it) an album entry on another partition; both the
/// photo's payload and its metadata to DC 1 are held back, alone or
/// together. DC 1 never shows the album without its photo, whichever
/// arrives first, and shows both once everything arrives.
#[test]
fn remote_updates_apply_in_causal_order_whatever_arrives_first() {
    // What of the photo is held back: its payload, its metadata, or both.
    for (hold_payload, hold_meta) in [(true, false), (false, true), (true, true)] {
        let mut net = net(2, 3);
        let [photo, album] = net.keys_on_distinct_partitions(2).try_into().unwrap();
        let (w, r) = (cl(0, 0), cl(1, 0));
        let from = net.server_for(DcId(0), &photo);
        let (sibling, receiver) = (net.server_for(DcId(1), &photo), receiver_node(&net, 1));
        let held = move |m: &InFlight<Msg>| {
            m.from == Dest::Node(from)
                && ((hold_payload && m.to == Dest::Node(sibling)) || (hold_meta && m.to == Dest::Node(receiver)))
        };
        put(&mut net, w, &photo, "photo");
        put(&mut net, w, &album, "album");
        for _ in 0..30 {
            net.advance_clocks(10_000);
            net.fire_all_timers();
            net.deliver_while(|m| !held(m));
            assert_eq!(get(&mut net, r, &album), None, "the album is visible before its photo arrived");
        }
        settle(&mut net, 5);
        assert_eq!(get(&mut net, r, &album).as_deref(), Some("album"), "{hold_payload} {hold_meta}");
        assert_eq!(get(&mut net, r, &photo).as_deref(), Some("photo"));
    }
}

/// A-Seq "fails to capture causality" (§2): the album carries no
/// dependency on the photo, and DC 1 shows it without its photo. The test
/// above can fail.
#[test]
fn the_async_sequencer_mutant_shows_an_effect_before_its_cause() {
    let mut net = net_r(2, 3, 1, Config { mutant_async_sequencer: true, ..Config::default() });
    let [photo, album] = net.keys_on_distinct_partitions(2).try_into().unwrap();
    put(&mut net, cl(0, 0), &photo, "photo");
    put(&mut net, cl(0, 0), &album, "album");
    let slow = (net.server_for(DcId(0), &photo), net.server_for(DcId(1), &photo));
    let held = |m: &InFlight<Msg>| m.from == Dest::Node(slow.0) && m.to == Dest::Node(slow.1);
    for _ in 0..30 {
        net.advance_clocks(10_000);
        net.fire_all_timers();
        net.deliver_while(|m| !held(m));
    }
    assert_eq!(get(&mut net, cl(1, 0), &album).as_deref(), Some("album"));
    assert_eq!(get(&mut net, cl(1, 0), &photo), None);
}

/// Chain replication (§7.1, van Renesse and Schneider): with three
/// replicas, a number reaches the partition only from the tail, and by
/// then every replica holds it, journaled.
#[test]
fn the_tail_answers_only_once_every_replica_holds_the_number() {
    let mut net = net_r(2, 2, 3, Config::default());
    let reps = chain(&net, 0);
    let k = net.key_on(0);
    let c = cl(0, 0);
    for round in 1..=3u64 {
        net.invoke(c, Op::Put { key: k.clone(), value: bytes(&format!("v{round}")) });
        let mut answered = false;
        while !net.queue.is_empty() {
            // Deliver one message at a time, checking what the chain holds
            // whenever an answer is on its way.
            for m in net.queue.iter().filter(|m| matches!(m.msg, Msg::SeqReply { .. })) {
                let Msg::SeqReply { seq, .. } = m.msg else { unreachable!() };
                assert_eq!(m.from, Dest::Node(reps[2]), "answered by a replica other than the tail");
                for &r in &reps {
                    assert!(last(&net, r) >= seq, "replica {r} does not hold {seq} the tail answered");
                    let meta = net.nodes[r.idx()].store().meta().expect("journaled");
                    assert!(u64::from_le_bytes(meta[..8].try_into().unwrap()) >= seq, "{r} did not journal {seq}");
                }
                answered = true;
            }
            if net.queue.iter().any(|m| matches!(m.msg, Msg::Chain { .. })) {
                assert_eq!(net.take_result(c), None, "acknowledged while the number was inside the chain");
            }
            net.deliver_first(|_| true);
        }
        assert!(answered, "round {round}: no answer");
        assert_eq!(net.take_result(c), Some(OpResult::Put));
        assert_eq!(reps.iter().map(|&r| last(&net, r)).collect::<Vec<_>>(), vec![round; 3]);
    }
}

/// Crash-restart of each replica of a chain of three, and of a single
/// sequencer, at every point of a number's way: the number in flight is
/// neither lost nor reused, later numbers follow on, and every update is
/// applied in the other DC.
#[test]
fn a_restarted_sequencer_replica_reuses_and_skips_no_number() {
    let cfg = Config::default();
    for replicas in [1u16, 3] {
        for victim in 0..replicas as usize {
            // How many chain hops to deliver before the crash.
            for hops in 0..=replicas as usize {
                let mut net = net_r(2, 2, replicas, cfg.clone());
                let reps = chain(&net, 0);
                let keys: Vec<Key> = (0..4).map(|i| bytes(&format!("key{i}"))).collect();
                put(&mut net, cl(0, 0), &keys[0], "a");
                let c = cl(0, 1);
                net.invoke(c, Op::Put { key: keys[1].clone(), value: bytes("b") });
                net.deliver_client_traffic();
                for _ in 0..hops {
                    net.deliver_first(|m| matches!(m.msg, Msg::SeqReq { .. } | Msg::Chain { .. }));
                }
                net.restart(reps[victim], &cfg);
                net.deliver_all();
                assert_eq!(net.take_result(c), Some(OpResult::Put), "{replicas}/{victim}/{hops}: the PUT was lost");
                put(&mut net, cl(0, 0), &keys[2], "c");
                net.restart(reps[victim], &cfg);
                put(&mut net, cl(0, 1), &keys[3], "d");
                assert_eq!(local_numbers(&net, 0), vec![1, 2, 3, 4], "{replicas}/{victim}/{hops}");
                settle(&mut net, 5);
                for (k, v) in keys.iter().zip(["a", "b", "c", "d"]) {
                    assert_eq!(get(&mut net, cl(1, 0), k).as_deref(), Some(v), "{replicas}/{victim}/{hops}");
                }
            }
        }
    }
}

/// Deviation 7: a partition that crashes while its PUT waits for a number
/// forgets the PUT; the number, answered after the restart, is shipped as
/// a skip, so the other DC applies the DC's later updates (no gap).
#[test]
fn a_number_for_a_forgotten_put_is_skipped_not_a_gap() {
    let cfg = Config::default();
    let mut net = net(2, 2);
    let [k1, k2] = net.keys_on_distinct_partitions(2).try_into().unwrap();
    let c = cl(0, 0);
    net.invoke(c, Op::Put { key: k1.clone(), value: bytes("lost") });
    net.deliver_client_traffic(); // the request leaves for the sequencer
    let server = net.server_for(DcId(0), &k1);
    net.restart(server, &cfg);
    net.deliver_all();
    assert_eq!(net.take_result(c), None, "a PUT acknowledged across its server's crash");
    assert!(net.nodes[server.idx()].store().latest(&k1).is_none(), "the forgotten PUT was applied");
    put(&mut net, cl(0, 1), &k2, "after");
    put(&mut net, cl(0, 1), &k1, "again");
    settle(&mut net, 5);
    assert_eq!(get(&mut net, cl(1, 0), &k2).as_deref(), Some("after"), "number 2 waits for the skipped 1");
    assert_eq!(get(&mut net, cl(1, 0), &k1).as_deref(), Some("again"));
    let r = receiver_node(&net, 1);
    assert_eq!(net.nodes[r.idx()].server().receiver().unwrap().site_time()[0], 3);
}

/// The receiver and a partition restart from their journals mid-stream:
/// nothing is lost, nothing applied twice, numbers stay in order.
#[test]
fn the_receiver_and_partitions_restart_from_their_journals() {
    let cfg = Config::default();
    let mut net = net(2, 2);
    let keys: Vec<Key> = (0..3).map(|i| bytes(&format!("key{i}"))).collect();
    put(&mut net, cl(0, 0), &keys[0], "a");
    net.deliver_while(|m| !matches!(m.msg, Msg::Applied { .. }));
    let r = receiver_node(&net, 1);
    net.restart(r, &cfg);
    put(&mut net, cl(0, 0), &keys[1], "b");
    net.restart(net.server_for(DcId(1), &keys[0]), &cfg);
    net.restart(net.server_for(DcId(0), &keys[1]), &cfg);
    put(&mut net, cl(0, 0), &keys[2], "c");
    settle(&mut net, 15);
    for (k, v) in keys.iter().zip(["a", "b", "c"]) {
        assert_eq!(get(&mut net, cl(1, 0), k).as_deref(), Some(v));
    }
    assert_eq!(net.nodes[r.idx()].server().receiver().unwrap().site_time()[0], 3);
}

/// Deviation 2: last-writer-wins follows causality across DCs although
/// the DCs' numbers differ. DC 0 has written many updates (high numbers);
/// DC 1 reads one of them and overwrites the key with its own first
/// number: the overwrite wins in both DCs.
#[test]
fn last_writer_wins_follows_causality_across_dcs() {
    let mut net = net(2, 1);
    let k = net.key_on(0);
    let other = bytes("other");
    for i in 0..10 {
        put(&mut net, cl(0, 0), &other, &format!("o{i}"));
    }
    put(&mut net, cl(0, 0), &k, "from dc0");
    settle(&mut net, 5);
    assert_eq!(get(&mut net, cl(1, 0), &k).as_deref(), Some("from dc0"));
    put(&mut net, cl(1, 0), &k, "from dc1");
    settle(&mut net, 5);
    assert_eq!(get(&mut net, cl(1, 1), &k).as_deref(), Some("from dc1"));
    assert_eq!(get(&mut net, cl(0, 1), &k).as_deref(), Some("from dc1"));
}

/// Fig 7's sequencer half (§7.2.3): a straggling partition sends its
/// requests for numbers only when its interval's timer fires, so its PUTs
/// wait for it, while another partition's complete at once.
#[test]
fn a_straggler_holds_its_requests_for_numbers_until_its_interval() {
    let keys = net(2, 2).keys_on_distinct_partitions(2);
    let straggler = net(2, 2).topology.partition_of(&keys[0]);
    let cfg = Config {
        straggler_partition: Some(straggler.0),
        straggler_dc: 0,
        straggler_interval_us: 50_000,
        ..Config::default()
    };
    let mut net = net_r(2, 2, 1, cfg);
    put(&mut net, cl(0, 0), &keys[1], "healthy");
    net.invoke(cl(0, 1), Op::Put { key: keys[0].clone(), value: bytes("late") });
    net.deliver_while(|_| true);
    assert_eq!(net.take_result(cl(0, 1)), None, "the straggler asked for a number before its interval");
    let node = net.server_for(DcId(0), &keys[0]);
    net.fire_timers(node);
    net.deliver_while(|_| true);
    assert_eq!(net.take_result(cl(0, 1)), Some(OpResult::Put), "the straggler's PUT still waits after its interval");
}
