use super::*;
use crate::kit::testkit::{self, Dest, InFlight, TestNet, bytes, channel, get, put, rot, server_to_server, text};
use causeway_core::{ClientId, DcId, Key, NodeId, Op, OpError, OpResult, Protocol};

type Net = TestNet<CcLo>;

const DC0: DcId = DcId(0);
const DC1: DcId = DcId(1);

/// A cluster whose PUTs complete through `kit::testkit::run`: the readers
/// check (server-to-server) is part of a PUT's own traffic.
fn net_with(dcs: u16, partitions: u32, clients_per_dc: u32, cfg: Config) -> Net {
    let mut net = Net::new(dcs, partitions, clients_per_dc, cfg);
    net.also_op_traffic = |m| matches!(m, Msg::CheckReq { .. } | Msg::CheckReply { .. });
    net
}

fn part(net: &Net, n: NodeId) -> &Partition {
    net.nodes[n.idx()].server().part.as_ref().expect("a partition server")
}

/// A client's own requests and replies.
fn of_client(c: ClientId) -> impl Fn(&InFlight<Msg>) -> bool {
    move |m| m.from == Dest::Client(c) || m.to == Dest::Client(c)
}

/// Readers checks inside `dc`.
fn check_in(net: &Net, dc: DcId) -> impl Fn(&InFlight<Msg>) -> bool + use<> {
    let t = net.topology.clone();
    move |m| {
        matches!(m.msg, Msg::CheckReq { .. } | Msg::CheckReply { .. })
            && matches!(m.to, Dest::Node(n) if t.dc_of(n) == dc)
    }
}

/// Run `c`'s PUT with its own traffic and the readers checks of DC `dc`,
/// leaving everything else (other sessions' reads, replication) queued.
fn put_only(net: &mut Net, c: ClientId, dc: DcId, k: &Key, v: &str) {
    net.invoke(c, Op::Put { key: k.clone(), value: bytes(v) });
    let mine = of_client(c);
    let check = check_in(net, dc);
    net.deliver_while(|m| mine(m) || check(m));
    assert_eq!(net.take_result(c), Some(OpResult::Put), "PUT {v}");
}

fn values(r: Option<OpResult>) -> Vec<Option<String>> {
    match r {
        Some(OpResult::Rot(vs)) => vs.into_iter().map(text).collect(),
        other => panic!("expected a ROT result, got {other:?}"),
    }
}

fn mutant_no_propagation() -> Config {
    Config { mutant_no_old_reader_propagation: true, ..Config::default() }
}

fn mutant_lamport() -> Config {
    Config { mutant_lamport_only: true, ..Config::default() }
}

#[test]
fn validate_rejects_bad_timeouts_and_partial_replication() {
    let full = testkit::full_replication(2, 2);
    assert!(CcLo::validate(&Config::default(), &full).is_ok());
    let short_ttl = Config { reader_ttl_us: 100_000, rot_timeout_us: 100_000, ..Config::default() };
    let err = CcLo::validate(&short_ttl, &full).unwrap_err();
    assert!(err.contains("reader_ttl_us"), "{err}");
    assert!(CcLo::validate(&Config { tick_us: 0, ..Config::default() }, &full).is_err());
    assert!(CcLo::validate(&Config { rot_attempts: 0, ..Config::default() }, &full).is_err());
    assert!(CcLo::validate(&Config::default(), &testkit::partial_replication()).is_err());
}

#[test]
fn names_parse_as_cclo_and_cc_lo() {
    use crate::ProtocolName;
    assert_eq!("cc-lo".parse::<ProtocolName>().unwrap().as_str(), "cclo");
    assert_eq!("CC_LO".parse::<ProtocolName>().unwrap().as_str(), "cclo");
}

#[test]
fn writes_are_visible_at_once_locally_and_after_replication_remotely() {
    let mut net = net_with(2, 3, 1, Config::default());
    let ks = net.keys_on_distinct_partitions(3);
    let (a, b) = (net.client(0, 0), net.client(1, 0));
    put(&mut net, a, &ks[0], "x");
    put(&mut net, a, &ks[1], "y");
    assert_eq!(rot(&mut net, a, &[&ks[2], &ks[1], &ks[0]]), vec![None, Some("y".into()), Some("x".into())]);
    assert_eq!(get(&mut net, b, &ks[0]), None, "not yet replicated");
    net.deliver_all();
    assert_eq!(rot(&mut net, b, &[&ks[0], &ks[1]]), vec![Some("x".into()), Some("y".into())]);
    // Every version is visible and stamped above what it depends on.
    for n in net.topology.node_ids() {
        for k in net.nodes[n.idx()].store().keys_sorted() {
            assert!(net.nodes[n.idx()].store().versions(&k).iter().all(|v| v.visible && v.deps.is_empty()));
        }
    }
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

/// Latency optimality, counted: a ROT over p partitions is p requests and
/// p answers — two communication steps, no server-to-server message — and
/// each answer holds exactly one version (or none) per key asked of it.
#[test]
fn a_rot_is_two_communication_steps_and_one_version_per_key() {
    let mut net = net_with(1, 4, 2, Config::default());
    let ks = net.keys_on_distinct_partitions(4);
    let (w, r) = (net.client(0, 0), net.client(0, 1));
    for (i, k) in ks.iter().enumerate() {
        put(&mut net, w, k, &format!("v{i}"));
        put(&mut net, w, k, &format!("w{i}"));
    }
    // Two keys on one partition and one on each of the three others.
    let extra = (0..)
        .map(|i| bytes(&format!("more{i}")))
        .find(|k| net.topology.partition_of(k) == net.topology.partition_of(&ks[0]))
        .unwrap();
    put(&mut net, w, &extra, "e");
    let keys = vec![ks[0].clone(), ks[1].clone(), extra.clone(), ks[2].clone(), ks[3].clone()];
    assert!(net.queue.is_empty());
    net.invoke(r, Op::Rot { keys: keys.clone() });
    let first = step(&mut net);
    assert_eq!(first.len(), 4, "one request per partition");
    for m in &first {
        let Msg::RotReq { record, .. } = &m.msg else { panic!("{m:?}") };
        assert!(*record, "a multi-partition ROT is recorded as a reader");
    }
    let second = step(&mut net);
    assert_eq!(second.len(), 4, "one answer per partition");
    assert!(second.iter().all(|m| !server_to_server(m)));
    for (req, ans) in first.iter().zip(&second) {
        let (Msg::RotReq { keys, .. }, Msg::RotReply { items: Ok(items), .. }) = (&req.msg, &ans.msg) else {
            panic!("{ans:?}")
        };
        assert_eq!(items.len(), keys.len(), "one version per key");
    }
    assert!(net.queue.is_empty(), "nothing else moves");
    let got = values(net.take_result(r));
    assert_eq!(got, vec![Some("w0".into()), Some("w1".into()), Some("e".into()), Some("w2".into()), Some("w3".into())]);
    // A GET (a one-partition ROT) is one request and one answer, and is
    // not recorded; a ROT of keys on one partition is not recorded either.
    let p1 = net.server_for(DC0, &ks[1]);
    let readers = part(&net, p1).readers.clone();
    net.invoke(r, Op::Get { key: ks[1].clone() });
    let req = step(&mut net);
    assert!(matches!(&req[..], [InFlight { msg: Msg::GetReq { .. }, .. }]));
    assert_eq!(step(&mut net).len(), 1);
    assert_eq!(net.take_result(r), Some(OpResult::Get(Some(bytes("w1")))));
    net.invoke(r, Op::Rot { keys: vec![ks[1].clone(), ks[1].clone()] });
    let req = step(&mut net);
    assert!(matches!(&req[..], [InFlight { msg: Msg::RotReq { record: false, .. }, .. }]));
    assert_eq!(step(&mut net).len(), 1);
    assert_eq!(values(net.take_result(r)), vec![Some("w1".into()), Some("w1".into())]);
    assert_eq!(part(&net, p1).readers, readers);
}

/// The start of the paper's Fig. 1 race, on one DC of two partitions: c2
/// has written X0 and Y0; c1's ROT(x, y) has reached p_x, and its read of
/// y is still on its way.
struct Race {
    net: Net,
    keys: [Key; 2],
    c1: ClientId,
    c2: ClientId,
    px: NodeId,
}

impl Race {
    fn start(cfg: Config) -> Race {
        let mut net = net_with(1, 2, 2, cfg);
        let keys: [Key; 2] = net.distinct_keys();
        let (c1, c2) = (net.client(0, 0), net.client(0, 1));
        put(&mut net, c2, &keys[0], "X0");
        put(&mut net, c2, &keys[1], "Y0");
        let px = net.server_for(DC0, &keys[0]);
        net.invoke(c1, Op::Rot { keys: keys.to_vec() });
        // The read of x now; the read of y waits.
        assert!(net.deliver_first(|m| m.to == Dest::Node(px)));
        Race { net, keys, c1, c2, px }
    }
}

/// The paper's Fig. 1 (Didona et al. §3): c1 runs ROT(x, y) while c2 does
/// PUT(x, X1) then PUT(y, Y1); c1's read of x reaches p_x before PUT(x, X1)
/// and its read of y reaches p_y after PUT(y, Y1) completed. (X0, Y1)
/// would violate causality, since X0 ⇝ X1 ⇝ Y1. Returns what c1 read,
/// and the old readers p_x named in Y1's readers check.
fn figure_1_race(cfg: Config) -> (Vec<Option<String>>, Vec<OldReaders>) {
    let Race { mut net, keys: [x, y], c1, c2, px } = Race::start(cfg);
    let (x, y) = (&x, &y);
    let mut named = Vec::new();
    for (k, v) in [(x, "X1"), (y, "Y1")] {
        net.invoke(c2, Op::Put { key: k.clone(), value: bytes(v) });
        while let Some(i) = net.queue.iter().position(|m| m.from != Dest::Client(c1)) {
            let m = net.queue.remove(i);
            if let Msg::CheckReply { old_readers, .. } = &m.msg
                && m.from == Dest::Node(px)
            {
                named.push(old_readers.clone());
            }
            net.queue.insert(0, m);
            net.deliver_first(|_| true);
        }
        assert_eq!(net.take_result(c2), Some(OpResult::Put));
    }
    assert_eq!(net.queue.len(), 1, "only c1's read of y is still in flight");
    net.deliver_all();
    (values(net.take_result(c1)), named)
}

#[test]
fn figure_1_race_never_returns_x0_with_y1() {
    let (got, named) = figure_1_race(Config::default());
    assert_eq!(got, vec![Some("X0".into()), Some("Y0".into())], "c1 is an old reader of Y1");
    assert_eq!(named.len(), 1, "p_x answered Y1's readers check once");
    assert_eq!(named[0].len(), 1, "naming c1's ROT");
}

#[test]
fn figure_1_race_returns_x0_with_y1_without_old_reader_propagation() {
    let (got, named) = figure_1_race(mutant_no_propagation());
    assert_eq!(got, vec![Some("X0".into()), Some("Y1".into())], "the mutant is caught");
    assert!(named.iter().all(|o| o.is_empty()));
}

#[test]
fn figure_1_race_returns_x0_with_y1_with_lamport_timestamps_only() {
    let (got, _) = figure_1_race(mutant_lamport());
    assert_eq!(got, vec![Some("X0".into()), Some("Y1".into())], "the straw man is caught");
}

/// The chain tests' start: `w` writes X0, Y0, Z0; T starts ROT(x, z) and
/// only its read of x is delivered. Returns what matches T's read of z,
/// held back.
fn t_reads_x_first(
    net: &mut Net,
    [x, y, z]: [&Key; 3],
    t: ClientId,
    w: ClientId,
) -> impl Fn(&InFlight<Msg>) -> bool + use<> {
    for (k, v) in [(x, "X0"), (y, "Y0"), (z, "Z0")] {
        put(net, w, k, v);
    }
    let (px, pz) = (net.server_for(DC0, x), net.server_for(DC0, z));
    net.invoke(t, Op::Rot { keys: vec![x.clone(), z.clone()] });
    assert!(net.deliver_first(|m| m.to == Dest::Node(px)));
    move |m: &InFlight<Msg>| m.to == Dest::Node(pz) && m.from == Dest::Client(t)
}

/// Old readers travel along a dependency chain: T reads x (X0); X1; c3
/// reads X1 and writes Y1; c4 reads Y1 and writes Z1, on a third partition
/// T never read at before. T's read of z must not return Z1: Z1's check
/// asks only y's partition, which names T through Y1's old readers.
fn chain(cfg: Config) -> Vec<Option<String>> {
    let mut net = net_with(1, 3, 4, cfg);
    let [x, y, z] = &net.distinct_keys();
    let [t, c2, c3, c4] = [0, 1, 2, 3].map(|i| net.client(0, i));
    let held = t_reads_x_first(&mut net, [x, y, z], t, c2);
    let run = |net: &mut Net, c: ClientId, op: Op| {
        net.invoke(c, op);
        net.deliver_while(|m| !held(m) && m.to != Dest::Client(t));
        net.take_result(c).expect("completes")
    };
    assert_eq!(run(&mut net, c2, Op::Put { key: x.clone(), value: bytes("X1") }), OpResult::Put);
    assert_eq!(run(&mut net, c3, Op::Get { key: x.clone() }), OpResult::Get(Some(bytes("X1"))));
    assert_eq!(run(&mut net, c3, Op::Put { key: y.clone(), value: bytes("Y1") }), OpResult::Put);
    assert_eq!(run(&mut net, c4, Op::Get { key: y.clone() }), OpResult::Get(Some(bytes("Y1"))));
    assert_eq!(run(&mut net, c4, Op::Put { key: z.clone(), value: bytes("Z1") }), OpResult::Put);
    net.deliver_all();
    values(net.take_result(t))
}

#[test]
fn old_readers_propagate_along_a_dependency_chain() {
    assert_eq!(chain(Config::default()), vec![Some("X0".into()), Some("Z0".into())]);
    assert_eq!(chain(mutant_no_propagation()), vec![Some("X0".into()), Some("Z1".into())], "the mutant is caught");
}

/// A readers check that needs only the writing partition is done in place
/// (`check_here_at_once`), and names the same old readers: T reads x (X0);
/// c2 writes X1, then Y1 with y on x's partition, so Y1's check asks no
/// one; c3 reads Y1 and writes Z1 on another partition, whose check asks
/// y's partition. T's read of z must not return Z1. Returns what T read and
/// how many check requests crossed the network while Y1 was written.
fn chain_through_a_check_in_place(cfg: Config) -> (Vec<Option<String>>, usize) {
    let mut net = net_with(1, 2, 3, cfg);
    let [x, z] = &net.distinct_keys();
    let y = &(0..)
        .map(|i| bytes(&format!("y{i}")))
        .find(|k| net.topology.partition_of(k) == net.topology.partition_of(x))
        .expect("a key on x's partition");
    let [t, c2, c3] = [0, 1, 2].map(|i| net.client(0, i));
    let held = t_reads_x_first(&mut net, [x, y, z], t, c2);
    let mut requests = 0;
    let mut run = |net: &mut Net, c: ClientId, op: Op, count: bool| {
        net.invoke(c, op);
        while let Some(i) = net.queue.iter().position(|m| !held(m) && m.to != Dest::Client(t)) {
            requests += usize::from(count && matches!(net.queue[i].msg, Msg::CheckReq { .. }));
            let m = net.queue.remove(i);
            net.queue.insert(0, m);
            net.deliver_first(|_| true);
        }
        net.take_result(c).expect("completes")
    };
    assert_eq!(run(&mut net, c2, Op::Put { key: x.clone(), value: bytes("X1") }, false), OpResult::Put);
    assert_eq!(run(&mut net, c2, Op::Put { key: y.clone(), value: bytes("Y1") }, true), OpResult::Put);
    assert_eq!(run(&mut net, c3, Op::Get { key: y.clone() }, false), OpResult::Get(Some(bytes("Y1"))));
    assert_eq!(run(&mut net, c3, Op::Put { key: z.clone(), value: bytes("Z1") }, false), OpResult::Put);
    net.deliver_all();
    (values(net.take_result(t)), requests)
}

#[test]
fn a_readers_check_done_in_place_names_the_same_old_readers() {
    let (got, requests) = chain_through_a_check_in_place(Config::default());
    assert_eq!(requests, 0, "Y1's check needed no other partition");
    assert_eq!(got, vec![Some("X0".into()), Some("Z0".into())], "T is an old reader of Y1, hence of Z1");
    let (got, _) = chain_through_a_check_in_place(mutant_no_propagation());
    assert_eq!(got, vec![Some("X0".into()), Some("Z1".into())], "the mutant is caught");
}

/// The readers check runs again in the remote DC, with that DC's readers:
/// a DC1 ROT reads x before X1 arrives there and y after Y1 is visible
/// there.
fn remote_race(cfg: Config) -> Vec<Option<String>> {
    let mut net = net_with(2, 2, 1, cfg);
    let [x, y] = &net.distinct_keys();
    let (w, r) = (net.client(0, 0), net.client(1, 0));
    put(&mut net, w, x, "X0");
    put(&mut net, w, y, "Y0");
    net.deliver_all();
    let (px1, py1) = (net.server_for(DC1, x), net.server_for(DC1, y));
    net.invoke(r, Op::Rot { keys: vec![x.clone(), y.clone()] });
    assert!(net.deliver_first(|m| m.to == Dest::Node(px1)));
    put_only(&mut net, w, DC0, x, "X1");
    put_only(&mut net, w, DC0, y, "Y1");
    // Replication and DC1's checks; r's read of y still waits.
    net.deliver_while(|m| !of_client(r)(m));
    assert!(net.nodes[py1.idx()].store().latest(y).is_some_and(|v| v.visible && v.value == bytes("Y1")));
    net.deliver_all();
    values(net.take_result(r))
}

#[test]
fn the_readers_check_runs_again_in_the_remote_dc() {
    assert_eq!(remote_race(Config::default()), vec![Some("X0".into()), Some("Y0".into())]);
    assert_eq!(remote_race(mutant_no_propagation()), vec![Some("X0".into()), Some("Y1".into())]);
}

/// Didona et al. §6, Lemma 1's schedule: the writer does PUT(x, X1) then
/// PUT(y, Y1) while a subset R of the readers have each read x (X0) and
/// have their read of y delayed until after PUT(y, Y1) completes. Returns
/// what each reader read, and everything p_x told other servers.
fn lemma_1(cfg: Config, readers: &[bool]) -> (Vec<Vec<Option<String>>>, Vec<String>) {
    let n = readers.len() as u32;
    let mut net = net_with(1, 2, n + 1, cfg);
    let [x, y] = &net.distinct_keys();
    let w = net.client(0, n);
    put(&mut net, w, x, "X0");
    put(&mut net, w, y, "Y0");
    let px = net.server_for(DC0, x);
    let rs: Vec<ClientId> = (0..n).filter(|&i| readers[i as usize]).map(|i| net.client(0, i)).collect();
    for &c in &rs {
        net.invoke(c, Op::Rot { keys: vec![x.clone(), y.clone()] });
        assert!(net.deliver_first(move |m| m.from == Dest::Client(c) && m.to == Dest::Node(px)));
        assert!(net.deliver_first(move |m| m.to == Dest::Client(c)));
    }
    let mut told = Vec::new();
    for (k, v) in [(x, "X1"), (y, "Y1")] {
        net.invoke(w, Op::Put { key: k.clone(), value: bytes(v) });
        while let Some(i) = net.queue.iter().position(|m| !rs.iter().any(|&c| m.from == Dest::Client(c))) {
            let m = &net.queue[i];
            if m.from == Dest::Node(px) && server_to_server(m) {
                told.push(format!("{:?}", m.msg));
            }
            let m = net.queue.remove(i);
            net.queue.insert(0, m);
            net.deliver_first(|_| true);
        }
        assert_eq!(net.take_result(w), Some(OpResult::Put));
    }
    net.deliver_all();
    (rs.iter().map(|&c| values(net.take_result(c))).collect(), told)
}

#[test]
fn lemma_1_different_readers_make_p_x_say_different_things() {
    let subsets: Vec<Vec<bool>> = (0..8u32).map(|b| (0..3).map(|i| b & (1 << i) != 0).collect()).collect();
    let mut said = Vec::new();
    for r in &subsets {
        let (got, told) = lemma_1(Config::default(), r);
        for g in &got {
            assert_eq!(g, &vec![Some("X0".to_string()), Some("Y0".to_string())], "readers {r:?}");
        }
        said.push(told);
    }
    for i in 0..said.len() {
        for j in 0..i {
            assert_ne!(said[i], said[j], "readers {:?} and {:?}: p_x's messages must differ", subsets[i], subsets[j]);
        }
    }
    // The Lamport-only straw man says the same whoever read — and breaks.
    let mut broken = 0;
    let mut lamport_said = Vec::new();
    for r in &subsets {
        let (got, told) = lemma_1(mutant_lamport(), r);
        broken += got.iter().filter(|g| **g == vec![Some("X0".to_string()), Some("Y1".to_string())]).count();
        lamport_said.push(told);
    }
    assert!(lamport_said.windows(2).all(|w| w[0] == w[1]), "{lamport_said:?}");
    assert!(broken > 0, "the straw man returns (X0, Y1)");
}

/// A ROT whose answer does not come within `rot_timeout_us` is run again
/// under a new id; the late answer of the first attempt is ignored.
#[test]
fn a_rot_attempt_that_times_out_runs_again_under_a_new_id() {
    let mut net = net_with(1, 2, 1, Config::default());
    let ks = net.keys_on_distinct_partitions(2);
    let c = net.client(0, 0);
    put(&mut net, c, &ks[0], "a");
    net.invoke(c, Op::Rot { keys: ks.clone() });
    let py = net.server_for(DC0, &ks[1]);
    net.deliver_while(|m| m.to != Dest::Node(py));
    assert!(net.take_result(c).is_none());
    net.fire_client_timers(c);
    let ids: Vec<u64> = net
        .queue
        .iter()
        .filter_map(|m| match &m.msg {
            Msg::RotReq { id, .. } => Some(id.seq),
            _ => None,
        })
        .collect();
    assert_eq!(ids, vec![1, 2, 2], "the first attempt's read of y, then the second attempt");
    net.deliver_all();
    assert_eq!(values(net.take_result(c)), vec![Some("a".into()), None]);
    // Give up after `rot_attempts`.
    let cfg = Config { rot_attempts: 2, ..Config::default() };
    let mut net = net_with(1, 2, 1, cfg);
    net.invoke(c, Op::Rot { keys: ks.clone() });
    net.fire_client_timers(c);
    net.fire_client_timers(c);
    assert!(matches!(net.take_result(c), Some(OpResult::Failed(OpError::Aborted(_)))));
}

/// Reader records and old-reader sets expire after `reader_ttl_us` (in
/// ticks), and versions no ROT can read any more are collected.
#[test]
fn reader_records_old_readers_and_old_versions_expire() {
    let cfg = Config::default();
    let ttl = cfg.ttl_ticks();
    let mut net = net_with(1, 2, 2, cfg.clone());
    let ks = net.keys_on_distinct_partitions(2);
    figure_1_race_on(&mut net, &ks);
    let (px, py) = (net.server_for(DC0, &ks[0]), net.server_for(DC0, &ks[1]));
    assert!(!part(&net, px).readers.is_empty(), "c1's read of x is recorded");
    let y1 = net.nodes[py.idx()].store().latest(&ks[1]).unwrap().clone();
    assert_eq!(y1.old_readers.len(), 1);
    assert_eq!(net.nodes[py.idx()].store().versions(&ks[1]).len(), 2, "Y0 is kept for Y1's old reader");
    for _ in 0..ttl {
        net.fire_all_timers();
    }
    assert!(!part(&net, px).readers.is_empty(), "kept for the TTL");
    net.fire_all_timers();
    assert!(part(&net, px).readers.is_empty() && part(&net, py).readers.is_empty());
    let now = net.nodes[py.idx()].store().versions(&ks[1]);
    assert_eq!(now.len(), 1, "Y0 collected");
    assert!(now[0].old_readers.is_empty());
}

/// The Fig. 1 race on `net` (1 DC, 2 partitions, 2 clients per DC), with
/// the real protocol: c1 reads (X0, Y0). Servers see different
/// `ClientId`s for c1 (the testkit, like the simulators, scrambles them):
/// reader records and old readers name the session by its nonce.
fn figure_1_race_on(net: &mut Net, ks: &[Key]) {
    let (x, y) = (&ks[0], &ks[1]);
    let (c1, c2) = (net.client(0, 0), net.client(0, 1));
    put(net, c2, x, "X0");
    put(net, c2, y, "Y0");
    let (px, py) = (net.server_for(DC0, x), net.server_for(DC0, y));
    assert_ne!(c1.as_seen_by(px), c1.as_seen_by(py));
    net.invoke(c1, Op::Rot { keys: vec![x.clone(), y.clone()] });
    assert!(net.deliver_first(|m| m.to == Dest::Node(px)));
    put_only(net, c2, DC0, x, "X1");
    put_only(net, c2, DC0, y, "Y1");
    net.deliver_all();
    assert_eq!(values(net.take_result(c1)), vec![Some("X0".into()), Some("Y0".into())]);
}

/// Deviation 7: a restarted partition has lost its reader records, so it
/// answers no readers check — not even its own — for a TTL. Reads are
/// served at once.
#[test]
fn a_restarted_partition_answers_no_readers_check_for_a_ttl() {
    let cfg = Config::default();
    let mut net = net_with(1, 2, 2, cfg.clone());
    let [x, y] = &net.distinct_keys();
    let (c1, c2) = (net.client(0, 0), net.client(0, 1));
    put(&mut net, c2, x, "X0");
    put(&mut net, c2, y, "Y0");
    let px = net.server_for(DC0, x);
    net.restart(px, &cfg);
    assert_eq!(rot(&mut net, c1, &[x, y]), vec![Some("X0".into()), Some("Y0".into())], "reads at once");
    net.invoke(c2, Op::Put { key: x.clone(), value: bytes("X1") });
    net.deliver_all();
    assert_eq!(net.take_result(c2), None, "X1's check (on X0, here) waits out the hold");
    assert_eq!(part(&net, px).hold_until, cfg.ttl_ticks() + 1);
    for _ in 0..cfg.ttl_ticks() {
        net.fire_all_timers();
        net.deliver_all();
        assert_eq!(net.take_result(c2), None);
    }
    net.fire_all_timers();
    net.deliver_all();
    assert_eq!(net.take_result(c2), Some(OpResult::Put));
    assert_eq!(get(&mut net, c1, x), Some("X1".into()));
    // A first start holds nothing.
    assert_eq!(part(&net, net.server_for(DC0, y)).hold_until, 0);
}

/// A replicated version waiting for a dependency survives a restart of
/// the partition holding it, and a check whose answerer restarted (and
/// forgot it) is re-sent.
#[test]
fn a_pending_replicated_version_and_a_forgotten_check_survive_restarts() {
    let cfg = Config::default();
    let mut net = net_with(2, 2, 1, cfg.clone());
    let [x, y] = &net.distinct_keys();
    let w = net.client(0, 0);
    let (px0, px1, py1) = (net.server_for(DC0, x), net.server_for(DC1, x), net.server_for(DC1, y));
    put(&mut net, w, x, "X1");
    put(&mut net, w, y, "Y1");
    // Y1 reaches DC1 and asks p_x there, which has no X1 yet.
    let x_link = move |m: &InFlight<Msg>| m.from == Dest::Node(px0) && m.to == Dest::Node(px1);
    net.deliver_while(|m| !x_link(m));
    assert!(!part(&net, px1).incoming.is_empty(), "Y1's check waits at p_x of DC1");
    net.restart(px1, &cfg);
    net.restart(py1, &cfg);
    net.deliver_all();
    let r = net.client(1, 0);
    assert_eq!(get(&mut net, r, y), None);
    for _ in 0..cfg.ttl_ticks() + cfg.retry_ticks() + 2 {
        net.fire_all_timers();
        net.deliver_all();
    }
    assert_eq!(rot(&mut net, r, &[x, y]), vec![Some("X1".into()), Some("Y1".into())]);
}

/// Why the hold after a restart (deviation 7): c1's read of x is recorded
/// at p_x, which then crashes and forgets it; PUT(x, X1) and PUT(y, Y1)
/// follow, and c1's read of y arrives last. Without the hold, p_x answers
/// Y1's readers check without c1 and c1 reads (X0, Y1). With it, the PUTs
/// wait a TTL — longer than c1's ROT timeout, so by then c1 has abandoned
/// that attempt and its late answer is ignored.
fn race_across_a_restart(hold: bool) -> Vec<Option<String>> {
    let cfg = Config::default();
    let Race { mut net, keys: [x, y], c1, c2, px } = Race::start(cfg.clone());
    let (x, y) = (&x, &y);
    net.restart(px, &cfg);
    if !hold {
        net.nodes[px.idx()].server_mut().part.as_mut().unwrap().hold_until = 0;
    }
    let not_c1 = |m: &InFlight<Msg>| m.from != Dest::Client(c1) && m.to != Dest::Client(c1);
    for (k, v) in [(x, "X1"), (y, "Y1")] {
        net.invoke(c2, Op::Put { key: k.clone(), value: bytes(v) });
        net.deliver_while(not_c1);
        if net.results[c2.idx()].is_none() {
            assert!(hold, "only the hold delays a PUT here");
            // rot_timeout_us < reader_ttl_us: c1's timer fires first.
            net.fire_client_timers(c1);
            for _ in 0..=cfg.ttl_ticks() {
                net.fire_timers(px);
                net.deliver_while(not_c1);
            }
        }
        assert_eq!(net.take_result(c2), Some(OpResult::Put));
    }
    net.deliver_all();
    values(net.take_result(c1))
}

#[test]
fn the_hold_after_a_restart_is_what_keeps_forgotten_readers_safe() {
    assert_eq!(race_across_a_restart(false), vec![Some("X0".into()), Some("Y1".into())], "no hold: unsafe");
    assert_eq!(
        race_across_a_restart(true),
        vec![Some("X1".into()), Some("Y1".into())],
        "a new attempt, after the PUTs"
    );
}

/// Deviation 10: a session that read more versions than a PUT may carry
/// can write once they settle (everywhere for a reader TTL), and versions
/// settled when read do not enter its context at all. Before settling,
/// such a session's every PUT was refused ("at most 4096 dependencies"):
/// it could never write again.
#[test]
fn a_session_that_read_many_versions_writes_once_they_settle() {
    let cfg = Config::default();
    let mut net = net_with(1, 1, 2, cfg.clone());
    let (a, b) = (net.client(0, 0), net.client(0, 1));
    let ks: Vec<Key> = (0..MAX_DEPS + 10).map(|i| Key::from(format!("k{i}").into_bytes())).collect();
    for k in &ks {
        put(&mut net, a, k, "v");
    }
    // Not yet settled: b's reads enter its context, too many for a PUT.
    for k in &ks {
        assert_eq!(get(&mut net, b, k), Some("v".into()));
    }
    assert_eq!(net.clients[b.idx()].context.len(), MAX_DEPS + 10);
    let w = Op::Put { key: ks[0].clone(), value: bytes("w") };
    assert!(matches!(net.run(b, w.clone()), OpResult::Failed(OpError::BadRequest(why)) if why.contains("unsettled")));
    // A reader TTL (and the tick that learns the bound) later, they are
    // settled: the server drops them from the PUT.
    for _ in 0..cfg.ttl_ticks() + 2 {
        net.fire_all_timers();
        net.deliver_all();
    }
    assert_eq!(net.run(b, w), OpResult::Put);
    assert_eq!(get(&mut net, a, &ks[0]), Some("w".into()));
    // Read now, settled versions never enter a context.
    for k in &ks[1..] {
        assert_eq!(get(&mut net, a, k), Some("v".into()));
    }
    assert_eq!(net.clients[a.idx()].context.len(), 1, "only b's write, not yet settled");
}

/// Deviation 10: a settled read shows every version of its partition from
/// the same DC stamped as low settled too, and a sweep of the session's
/// context (due after as many reads as it holds) drops them though the
/// session never reads their keys again; another partition's stay.
#[test]
fn a_settled_read_sweeps_its_partitions_older_dependencies() {
    let cfg = Config::default();
    let mut net = net_with(1, 2, 2, cfg.clone());
    let (a, b) = (net.client(0, 0), net.client(0, 1));
    let p0 = net.server_for(DC0, &net.key_on(0));
    let (on_p0, on_p1): (Vec<Key>, Vec<Key>) =
        (0..40).map(|i| bytes(&format!("k{i}"))).partition(|k| net.server_for(DC0, k) == p0);
    let (ks, other) = (&on_p0[..8], &on_p1[0]);
    for k in ks.iter().chain([other]) {
        put(&mut net, a, k, "v");
        assert_eq!(get(&mut net, b, k), Some("v".into()));
    }
    assert_eq!(net.clients[b.idx()].context.len(), ks.len() + 1, "unsettled: every read is a dependency");
    for _ in 0..cfg.ttl_ticks() + 2 {
        net.fire_all_timers();
        net.deliver_all();
    }
    let newest = ks.last().unwrap();
    for _ in 0..SWEEP_MIN {
        assert_eq!(get(&mut net, b, newest), Some("v".into()));
    }
    let left: Vec<Key> = net.clients[b.idx()].context.keys().map(|(k, _)| k.clone()).collect();
    assert_eq!(left, vec![other.clone()], "only the other partition's dependency is left");
}

/// Deviation 10: a version settles only once every DC has it visible, and a
/// reader TTL after its origin learnt so; then reads in every DC say so.
#[test]
fn a_version_settles_once_every_dc_has_it_and_a_ttl_has_passed() {
    let cfg = Config::default();
    let mut net = net_with(2, 1, 1, cfg.clone());
    let (a, b) = (net.client(0, 0), net.client(1, 0));
    let k = net.key_on(0);
    let (p0, p1) = (net.server_for(DC0, &k), net.server_for(DC1, &k));
    put(&mut net, a, &k, "x");
    let to_dc1 = channel(p0, p1);
    // DC 1 has it (`put` delivered everything) but does not answer: DC 0's
    // probes are held, so it settles nothing.
    for _ in 0..3 * cfg.ttl_ticks() {
        net.fire_all_timers();
        net.deliver_while(|m| !to_dc1(m));
    }
    assert_eq!(part(&net, p0).settled, vec![0, 0]);
    assert_eq!(get(&mut net, a, &k), Some("x".into()));
    assert_eq!(net.clients[a.idx()].context.len(), 1, "an unsettled version is a dependency");
    // DC 1 gets it: a TTL after DC 0 learns that, both DCs call it settled.
    net.deliver_all();
    net.fire_all_timers();
    net.deliver_all();
    let learnt = part(&net, p0).settled.clone();
    for _ in 0..cfg.ttl_ticks() {
        net.fire_all_timers();
        net.deliver_all();
    }
    assert_eq!(learnt, vec![0, 0], "held for a reader TTL");
    net.fire_all_timers();
    net.deliver_all();
    assert!(part(&net, p0).settled[0] > 0 && part(&net, p1).settled[0] == part(&net, p0).settled[0]);
    assert_eq!(get(&mut net, b, &k), Some("x".into()));
    assert!(net.clients[b.idx()].context.is_empty(), "settled: no dependency in DC 1");
    assert_eq!(get(&mut net, a, &k), Some("x".into()));
    assert!(net.clients[a.idx()].context.is_empty(), "settled: a's dependency on it dropped");
}

/// Deviations 2 and 10: a write depends on its key's previous write in
/// this DC (and ships that dependency to the other DCs) only while that
/// write is unsettled; a settled one is visible everywhere with its old
/// readers over, and is no dependency, though the new stamp still exceeds
/// it.
#[test]
fn a_write_follows_its_keys_previous_write_only_until_that_settles() {
    let cfg = Config::default();
    let mut net = net_with(2, 1, 3, cfg.clone());
    let (a, b, c) = (net.client(0, 0), net.client(0, 1), net.client(0, 2));
    let k = net.key_on(0);
    // The dependencies the write of `v` by `who` (a fresh session) ships.
    let shipped = |net: &mut Net, who: ClientId, v: &str| -> Vec<Dep> {
        net.invoke(who, Op::Put { key: k.clone(), value: bytes(v) });
        net.deliver_while(|m| !matches!(m.msg, Msg::Replicate(_)));
        let deps = net
            .queue
            .iter()
            .find_map(|m| match &m.msg {
                Msg::Replicate(r) if text(Some(r.value.clone())) == Some(v.to_string()) => Some(r.deps.clone()),
                _ => None,
            })
            .expect("the write is replicated");
        net.deliver_all();
        assert_eq!(net.take_result(who), Some(OpResult::Put), "PUT {v}");
        deps
    };
    assert!(shipped(&mut net, a, "x").is_empty());
    let x = net.latest(net.server_for(DC0, &k), &k).stamp;
    assert_eq!(shipped(&mut net, b, "y"), vec![Dep { key: k.clone(), stamp: x }], "x is not settled yet");
    let y = net.latest(net.server_for(DC0, &k), &k).stamp;
    for _ in 0..cfg.ttl_ticks() + 3 {
        net.fire_all_timers();
        net.deliver_all();
    }
    assert!(shipped(&mut net, c, "z").is_empty(), "y is settled: no dependency on it");
    let z = net.latest(net.server_for(DC0, &k), &k).stamp;
    assert!(z > y);
    let d = net.client(1, 0);
    assert_eq!(get(&mut net, d, &k), Some("z".into()));
}
