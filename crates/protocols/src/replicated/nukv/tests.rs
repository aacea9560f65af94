//! Alg 4.1/4.2 step by step: elections, a GET that waits for its replica's
//! stable vector, PUTs that never wait, the forwarder's replays dropped,
//! and a leader lost without losing an acknowledged write.

use super::*;
use crate::kit::testkit::{Dest, InFlight, TestNet, bytes, client_traffic, server_to_server, text};
use causeway_core::{ClientId, DcId, NodeId, Op, OpResult, PartitionId, TopologySpec};

fn spec(dcs: u16, replicas: u16) -> TopologySpec {
    let mut s = TopologySpec::full(dcs, 1);
    s.replicas_per_partition = replicas;
    s
}

fn net(dcs: u16, replicas: u16, cfg: Config) -> TestNet<Nukv> {
    TestNet::with_spec(spec(dcs, replicas), 3, cfg)
}

/// `rounds` ticks of every node, each followed by all the servers'
/// traffic that `pass` lets through (the rest waits, as over a cut link).
fn settle_passing(net: &mut TestNet<Nukv>, rounds: usize, pass: &dyn Fn(&InFlight<Msg>) -> bool) {
    for _ in 0..rounds {
        net.advance_clocks(Config::default().tick_us);
        net.fire_all_timers();
        for _ in 0..8 {
            if net.deliver_while(|m| server_to_server(m) && pass(m)) == 0 {
                break;
            }
        }
    }
}

fn settle(net: &mut TestNet<Nukv>, rounds: usize) {
    settle_passing(net, rounds, &|_| true);
}

fn probe(net: &TestNet<Nukv>, n: NodeId) -> server::Probe {
    net.nodes[n.idx()].server().probe(0).expect("a member of partition 0")
}

fn replicas(net: &TestNet<Nukv>, dc: u16) -> Vec<NodeId> {
    net.topology.replicas(DcId(dc), PartitionId(0)).to_vec()
}

fn leader(net: &TestNet<Nukv>, dc: u16) -> Option<NodeId> {
    replicas(net, dc).into_iter().find(|&n| probe(net, n).leader)
}

/// Run an op, delivering its client traffic and letting the servers'
/// traffic and ticks go on (so a PUT can commit).
fn op(net: &mut TestNet<Nukv>, c: ClientId, op: Op) -> OpResult {
    net.run(c, op)
}

fn put(net: &mut TestNet<Nukv>, c: ClientId, k: &str, v: &str) {
    assert_eq!(op(net, c, Op::Put { key: bytes(k), value: bytes(v) }), OpResult::Put);
}

fn get(net: &mut TestNet<Nukv>, c: ClientId, k: &str) -> Option<String> {
    match op(net, c, Op::Get { key: bytes(k) }) {
        OpResult::Get(v) => text(v),
        other => panic!("GET returned {other:?}"),
    }
}

/// The replica a client's first GET goes to.
fn reader_of(net: &TestNet<Nukv>, c: ClientId) -> NodeId {
    let rs = replicas(net, net.client_dc[c.idx()].0);
    rs[((0x5e55_0000 + c.0 as u64) as usize) % rs.len()]
}

#[test]
fn a_group_elects_a_leader_and_a_put_reaches_every_replica_of_every_dc() {
    let mut net = net(2, 3, Config::default());
    settle(&mut net, 5);
    let l0 = leader(&net, 0).expect("DC 0 elected a leader");
    assert!(leader(&net, 1).is_some(), "DC 1 elected a leader");
    put(&mut net, ClientId(0), "k", "v1");
    settle(&mut net, 5);
    for n in replicas(&net, 0).into_iter().chain(replicas(&net, 1)) {
        match net.nodes[n.idx()].store().latest(b"k") {
            Some(Version::Data(s)) => assert_eq!(&s.value[..], b"v1", "at {n:?}"),
            other => panic!("{n:?} holds {other:?}"),
        }
    }
    // DC 1's replicas have DC 0's log covered through the write.
    let Some(Version::Data(w)) = net.nodes[l0.idx()].store().latest(b"k").cloned() else { panic!() };
    for n in replicas(&net, 1) {
        assert!(probe(&net, n).sv[0] >= w.idx, "{n:?}: {:?} below {}", probe(&net, n), w.idx);
    }
    assert_eq!(get(&mut net, ClientId(3), "k").as_deref(), Some("v1"));
}

/// One DC, a group of three: a session whose reads go to a follower that
/// hears nothing from the leader wrote `k = v1`, acknowledged by the
/// leader and the other follower. Returns the net, the session, the
/// lagging follower and the leader.
fn lagging_follower(cfg: Config) -> (TestNet<Nukv>, ClientId, NodeId, NodeId) {
    let mut net = net(1, 3, cfg);
    settle(&mut net, 5);
    let l = leader(&net, 0).unwrap();
    let c = (0..3).map(|i| net.client(0, i)).find(|&c| reader_of(&net, c) != l).unwrap();
    let f = reader_of(&net, c);
    let cut = move |m: &InFlight<Msg>| m.to != Dest::Node(f);
    net.invoke(c, Op::Put { key: bytes("k"), value: bytes("v1") });
    for _ in 0..10 {
        settle_passing(&mut net, 1, &cut);
        net.deliver_while(client_traffic);
        if let Some(r) = net.take_result(c) {
            assert_eq!(r, OpResult::Put);
            return (net, c, f, l);
        }
    }
    panic!("the write was not acknowledged with one follower cut off");
}

#[test]
fn a_get_blocks_while_the_replicas_sv_is_below_the_sessions_hwv() {
    let (mut net, c, f, l) = lagging_follower(Config::default());
    assert!(
        probe(&net, f).sv[0] < probe(&net, l).sv[0],
        "the follower is behind: {:?} {:?}",
        probe(&net, f),
        probe(&net, l)
    );
    net.invoke(c, Op::Get { key: bytes("k") });
    net.deliver_while(client_traffic);
    assert!(net.take_result(c).is_none(), "the GET waits at the follower");
    // Raft catches the follower up; the GET then reads the session's write.
    settle(&mut net, 3);
    net.deliver_while(client_traffic);
    assert_eq!(net.take_result(c), Some(OpResult::Get(Some(bytes("v1")))));
    assert!(net.blocked("get_wait").iter().any(|&(n, _)| n == f), "the wait was reported");
}

/// Per-operation levels (§4.2): at the same lagging follower as above, a
/// read that asks for eventual answers at once with what the follower has
/// (nothing yet), while one that asks for read-your-write waits for the
/// session's write; a session whose default is eventual still waits when
/// one read asks for more.
#[test]
fn each_read_waits_only_as_much_as_its_own_level_asks() {
    use causeway_core::{Levels, ReadLevel};
    let cfg = Config { read_level: ReadLevel::Eventual, ..Config::default() };
    let (mut net, c, _, _) = lagging_follower(cfg);
    let at = |read| Levels { read, ..Levels::default() };
    net.invoke_at(c, Op::Get { key: bytes("k") }, at(ReadLevel::Eventual));
    net.deliver_while(client_traffic);
    assert_eq!(net.take_result(c), Some(OpResult::Get(None)), "an eventual read does not wait");
    net.invoke(c, Op::Get { key: bytes("k") });
    net.deliver_while(client_traffic);
    assert_eq!(net.take_result(c), Some(OpResult::Get(None)), "nor does one at the session's eventual default");
    net.invoke_at(c, Op::Get { key: bytes("k") }, at(ReadLevel::ReadYourWrite));
    net.deliver_while(client_traffic);
    assert!(net.take_result(c).is_none(), "a read-your-write read waits at the follower");
    settle(&mut net, 3);
    net.deliver_while(client_traffic);
    assert_eq!(net.take_result(c), Some(OpResult::Get(Some(bytes("v1")))));
}

#[test]
fn without_the_wait_a_lagging_follower_breaks_read_your_writes() {
    let cfg = Config { mutant_skip_get_wait: true, ..Config::default() };
    let (mut net, c, _, _) = lagging_follower(cfg);
    net.invoke(c, Op::Get { key: bytes("k") });
    net.deliver_while(client_traffic);
    assert_eq!(net.take_result(c), Some(OpResult::Get(None)), "the mutant reads before its own write");
}

#[test]
fn a_put_never_blocks_even_with_every_other_dc_cut_off() {
    let mut net = net(3, 3, Config::default());
    settle(&mut net, 5);
    let local = |m: &InFlight<Msg>| !matches!(m.msg, Msg::Forward(_) | Msg::ForwardAck { .. });
    let c = net.client(0, 0);
    for i in 0..5 {
        net.invoke(c, Op::Put { key: bytes("k"), value: bytes(&format!("v{i}")) });
        let mut done = false;
        for _ in 0..5 {
            settle_passing(&mut net, 1, &local);
            net.deliver_while(client_traffic);
            if let Some(r) = net.take_result(c) {
                assert_eq!(r, OpResult::Put);
                done = true;
                break;
            }
        }
        assert!(done, "PUT {i} completed with the other DCs away");
    }
    net.assert_never_blocked();
}

#[test]
fn the_receiver_drops_a_replayed_forward() {
    let mut net = net(2, 1, Config::default());
    settle(&mut net, 5);
    let c = net.client(0, 0);
    put(&mut net, c, "k", "v1");
    settle(&mut net, 5);
    // The batch DC 0's forwarder shipped for the first write, as it would
    // ship it again after a restart.
    let r0 = replicas(&net, 0)[0];
    let Some(Version::Data(w1)) = net.nodes[r0.idx()].store().latest(b"k").cloned() else { panic!() };
    let replay = Forward { partition: 0, origin: DcId(0), after: 0, upto: w1.idx, writes: vec![(bytes("k"), w1)] };
    put(&mut net, c, "k", "v2");
    settle(&mut net, 5);
    let r1 = replicas(&net, 1)[0];
    let before = probe(&net, r1);
    assert_eq!(get(&mut net, ClientId(3), "k").as_deref(), Some("v2"));
    // The forwarder restarted and ships from its log's start: the old batch
    // arrives again.
    let xc0 = net.topology.service_nodes(DcId(0), net.topology.service_index(XC_SERVICE).unwrap())[0];
    net.queue.push(InFlight::new(Dest::Node(xc0), Dest::Node(r1), Msg::Forward(Box::new(replay))));
    net.deliver_while(server_to_server);
    let after = probe(&net, r1);
    assert_eq!(after.sv, before.sv, "a replay moves nothing");
    assert_eq!(after.last, before.last, "a replay is not even proposed");
    assert_eq!(get(&mut net, ClientId(3), "k").as_deref(), Some("v2"));
}

#[test]
fn a_restarted_forwarder_ships_again_and_receivers_skip_what_they_have() {
    let mut net = net(2, 1, Config::default());
    settle(&mut net, 5);
    let c = net.client(0, 0);
    put(&mut net, c, "a", "1");
    settle(&mut net, 5);
    let xc0 = net.topology.service_nodes(DcId(0), net.topology.service_index(XC_SERVICE).unwrap())[0];
    // Cut DC 0's forwarder off, write, restart it: the write is shipped by
    // the restarted forwarder from its log.
    let away = move |m: &InFlight<Msg>| m.from != Dest::Node(xc0);
    put(&mut net, c, "b", "2");
    settle_passing(&mut net, 3, &away);
    net.restart(xc0, &Config::default());
    settle(&mut net, 10);
    assert_eq!(get(&mut net, ClientId(3), "a").as_deref(), Some("1"));
    assert_eq!(get(&mut net, ClientId(3), "b").as_deref(), Some("2"));
}

#[test]
fn losing_the_leader_loses_no_acknowledged_write() {
    let mut net = net(1, 3, Config::default());
    settle(&mut net, 5);
    let l = leader(&net, 0).unwrap();
    let c = net.client(0, 0);
    put(&mut net, c, "k", "v1");
    // The leader is gone for good: nothing reaches it or leaves it.
    let gone = move |m: &InFlight<Msg>| m.from != Dest::Node(l) && m.to != Dest::Node(l);
    settle_passing(&mut net, 30, &gone);
    let l2 = leader(&net, 0).filter(|&n| n != l).expect("the others elected a new leader");
    for n in replicas(&net, 0).into_iter().filter(|&n| n != l) {
        match net.nodes[n.idx()].store().latest(b"k") {
            Some(Version::Data(s)) => assert_eq!(&s.value[..], b"v1", "at {n:?}"),
            other => panic!("{n:?} lost the acknowledged write: {other:?}"),
        }
    }
    // And a restarted member recovers Raft's state from its log.
    net.restart(l2, &Config::default());
    settle_passing(&mut net, 30, &gone);
    assert!(leader(&net, 0).is_some_and(|n| n != l), "the group re-elected without the lost leader");
    match net.nodes[l2.idx()].store().latest(b"k") {
        Some(Version::Data(s)) => assert_eq!(&s.value[..], b"v1"),
        other => panic!("the restarted member holds {other:?}"),
    }
}

/// Raft §5.2: a member's election timeout is drawn anew for each election,
/// not fixed per member. With a fixed one, two members that drew the same
/// and whose timers ran in step (both waiting out a paused leader) split
/// every election between them for ever, while the third, whose longer
/// log made it the only one able to win, had its timer reset by their
/// vote requests: torture seed 6325, a DC's group without a leader from
/// 0.2 s on and none of its partition's writes applied there.
#[test]
fn each_election_draws_a_new_timeout() {
    let mut net = net(1, 3, Config::default());
    settle(&mut net, 5);
    let mut seen: Vec<Vec<usize>> = vec![Vec::new(); 3];
    let rs = replicas(&net, 0);
    for _ in 0..4 {
        for (i, &n) in rs.iter().enumerate() {
            seen[i].push(probe(&net, n).election_timeout);
        }
        // The leader goes quiet; the other two elect one of themselves.
        let l = leader(&net, 0).expect("a leader");
        let quiet = move |m: &InFlight<Msg>| m.from != Dest::Node(l) && m.to != Dest::Node(l);
        settle_passing(&mut net, 60, &quiet);
        assert!(leader(&net, 0).is_some_and(|n| n != l), "the other two elected a leader");
        settle(&mut net, 10);
    }
    for (i, ts) in seen.iter().enumerate() {
        assert!(ts.iter().all(|&t| (10..20).contains(&t)), "{:?}: {ts:?}", rs[i]);
    }
    assert!(
        seen.iter().any(|ts| ts.iter().any(|&t| t != ts[0])),
        "every member kept one election timeout through four elections: {seen:?}"
    );
}

#[test]
fn logs_are_compacted_once_every_dc_has_the_writes_and_a_lagging_follower_gets_a_snapshot() {
    let cfg = Config { compact_entries: 4, ..Config::default() };
    let mut net = net(2, 3, cfg.clone());
    settle(&mut net, 5);
    let l = leader(&net, 0).unwrap();
    let lag = replicas(&net, 0).into_iter().find(|&n| n != l).unwrap();
    let away = move |m: &InFlight<Msg>| m.to != Dest::Node(lag) && m.from != Dest::Node(lag);
    let c = (0..3).map(|i| net.client(0, i)).find(|&c| reader_of(&net, c) != lag).unwrap();
    for i in 0..12 {
        net.invoke(c, Op::Put { key: bytes(&format!("k{i}")), value: bytes("v") });
        for _ in 0..10 {
            settle_passing(&mut net, 1, &away);
            net.deliver_while(client_traffic);
            if net.take_result(c).is_some() {
                break;
            }
        }
    }
    settle_passing(&mut net, 10, &away);
    let p = probe(&net, l);
    assert!(p.first > 1, "the leader compacted its log: {p:?}");
    settle(&mut net, 20);
    for i in 0..12 {
        assert!(
            net.nodes[lag.idx()].store().latest(format!("k{i}").as_bytes()).is_some(),
            "k{i} at the lagging follower"
        );
    }
    assert_eq!(probe(&net, lag).applied, probe(&net, l).applied);
    assert!(probe(&net, lag).first > 1, "the follower caught up from a snapshot: {:?}", probe(&net, lag));
}

#[test]
fn bad_requests_are_refused_by_name() {
    let mut net = net(1, 1, Config::default());
    settle(&mut net, 5);
    let r = op(&mut net, ClientId(0), Op::Put { key: bytes("\0nukv.raft\0x"), value: bytes("v") });
    assert!(
        matches!(r, OpResult::Failed(causeway_core::OpError::BadRequest(ref s)) if s.contains("reserved")),
        "{r:?}"
    );
    assert!(Nukv::validate(&Config { election_ticks: 1, ..Config::default() }, &net.topology).is_err());
}

/// A one-replica group restarted from its journal has no leader until
/// its election timeout: a PUT that arrives meanwhile is held, then
/// proposed once the replica wins (the session sets no timer of its own).
#[test]
fn a_put_reaching_a_group_between_leaders_is_held_until_one_is_elected() {
    let cfg = Config::default();
    let mut net = TestNet::<Nukv>::new(2, 2, 1, cfg.clone());
    let (writer, reader) = (net.client(0, 0), net.client(1, 0));
    let k = net.key_on(1);
    let put = |v: &str| Op::Put { key: k.clone(), value: bytes(v) };
    let get = Op::Get { key: k.clone() };
    assert_eq!(net.run(writer, put("v1")), OpResult::Put);
    let server = net.server_for(DcId(0), &k);
    net.restart(server, &cfg);
    assert!(!net.nodes[server.idx()].server().probe(1).unwrap().leader, "a restarted member starts as a follower");
    assert_eq!(net.run(writer, get.clone()), OpResult::Get(Some(bytes("v1"))));
    assert_eq!(net.run(writer, put("v2")), OpResult::Put);
    assert!(net.nodes[server.idx()].server().probe(1).unwrap().leader);
    let mut seen = false;
    for _ in 0..50 {
        if net.run(reader, get.clone()) == OpResult::Get(Some(bytes("v2"))) {
            seen = true;
            break;
        }
        settle(&mut net, 1);
    }
    assert!(seen, "DC 1 never read the write made after the restart");
}

/// A replica's late answer to a session's earlier request (a GET it gave
/// up on and asked elsewhere) is never taken for the answer to a later one.
#[test]
fn a_late_answer_to_an_earlier_request_is_ignored() {
    let mut net = net(1, 3, Config::default());
    settle(&mut net, 5);
    let l = leader(&net, 0).unwrap();
    let c = (0..3).map(|i| net.client(0, i)).find(|&c| reader_of(&net, c) != l).unwrap();
    let f = reader_of(&net, c);
    // The follower hears of neither write: the session's GET of `a` waits
    // there until the client gives up and asks the next replica.
    let held = move |m: &InFlight<Msg>| m.to != Dest::Node(f);
    for (k, v) in [("a", "A"), ("b", "B")] {
        net.invoke(c, Op::Put { key: bytes(k), value: bytes(v) });
        for _ in 0..10 {
            settle_passing(&mut net, 1, &held);
            net.deliver_while(client_traffic);
            if let Some(r) = net.take_result(c) {
                assert_eq!(r, OpResult::Put);
                break;
            }
        }
    }
    net.invoke(c, Op::Get { key: bytes("a") });
    net.deliver_while(client_traffic);
    assert!(net.take_result(c).is_none());
    net.fire_client_timers(c);
    net.deliver_while(client_traffic);
    assert_eq!(net.take_result(c), Some(OpResult::Get(Some(bytes("A")))));
    // The next GET (of `b`) goes to the follower first; it then catches up
    // and answers both, the stale answer (`a`'s) first.
    net.invoke(c, Op::Get { key: bytes("b") });
    settle(&mut net, 3);
    net.deliver_while(client_traffic);
    assert_eq!(net.take_result(c), Some(OpResult::Get(Some(bytes("B")))));
}

/// Complete the operation `c` has in progress while the servers' traffic
/// that `pass` lets through flows; `None` if it is still waiting after
/// `rounds` ticks.
fn finish_passing(
    net: &mut TestNet<Nukv>,
    c: ClientId,
    rounds: usize,
    pass: &dyn Fn(&InFlight<Msg>) -> bool,
) -> Option<OpResult> {
    for _ in 0..rounds {
        net.deliver_while(client_traffic);
        if let Some(r) = net.take_result(c) {
            return Some(r);
        }
        settle_passing(net, 1, pass);
    }
    net.deliver_while(client_traffic);
    net.take_result(c)
}

/// The node a client's request now in flight goes to.
fn asked(net: &TestNet<Nukv>, c: ClientId) -> NodeId {
    let sent = net.queue.iter().find(|m| m.from == Dest::Client(c)).expect("a request in flight");
    match sent.to {
        Dest::Node(n) => n,
        other => panic!("a request to {other:?}"),
    }
}

/// The thesis's evaluation (§4.4.1) sends a share of a session's reads to
/// another DC's replicas. With all of them remote, a session's read goes
/// to a replica of the other DC and, at read-your-write, waits there for
/// the session's own write to be forwarded; an eventual read there
/// answers at once with what the replica has.
#[test]
fn a_read_sent_to_another_dc_goes_there_and_is_still_held_to_its_level() {
    use causeway_core::{Levels, ReadLevel};
    let cfg = Config { remote_read_share: 1.0, ..Config::default() };
    let mut net = net(2, 3, cfg);
    settle(&mut net, 5);
    let (c, other) = (net.client(0, 0), net.client(0, 1));
    let unforwarded = |m: &InFlight<Msg>| !matches!(m.msg, Msg::Forward(_));
    net.invoke(c, Op::Put { key: bytes("k"), value: bytes("v1") });
    assert!(replicas(&net, 0).contains(&asked(&net, c)), "writes stay in the session's DC");
    assert_eq!(finish_passing(&mut net, c, 10, &unforwarded), Some(OpResult::Put));

    net.invoke_at(other, Op::Get { key: bytes("k") }, Levels { read: ReadLevel::Eventual, ..Levels::default() });
    assert!(replicas(&net, 1).contains(&asked(&net, other)), "the read goes to DC 1");
    net.deliver_while(client_traffic);
    assert_eq!(net.take_result(other), Some(OpResult::Get(None)), "an eventual read does not wait for the write");

    net.invoke(c, Op::Get { key: bytes("k") });
    let at = asked(&net, c);
    assert!(replicas(&net, 1).contains(&at), "the read goes to DC 1, not to {at:?}");
    assert_eq!(finish_passing(&mut net, c, 5, &unforwarded), None, "read-your-write waits for the forwarder");
    assert_eq!(finish_passing(&mut net, c, 10, &|_| true), Some(OpResult::Get(Some(bytes("v1")))));
    assert!(
        net.blocked("get_wait").iter().any(|&(n, _)| replicas(&net, 1).contains(&n)),
        "the wait was at a replica of DC 1: {:?}",
        net.blocked("get_wait")
    );
}

/// A session of DC 0 reads at DC 1 a write made there (`v1`) and then,
/// at monotonic-write-follows-reads, writes the key at home while DC 1's
/// forwarder is held up. Returns the net, the session, and whether the
/// PUT completed with the forwarder held.
fn write_after_a_remote_read(hlc: bool) -> (TestNet<Nukv>, ClientId, bool) {
    use causeway_core::{Levels, WriteLevel};
    let cfg = Config { remote_read_share: 1.0, hlc, ..Config::default() };
    let mut net = net(2, 3, cfg);
    settle(&mut net, 5);
    let (c, writer) = (net.client(0, 0), net.client(1, 0));
    let held = |m: &InFlight<Msg>| !matches!(&m.msg, Msg::Forward(f) if f.origin == DcId(1));
    net.invoke(writer, Op::Put { key: bytes("k"), value: bytes("v1") });
    assert_eq!(finish_passing(&mut net, writer, 10, &held), Some(OpResult::Put));
    net.invoke(c, Op::Get { key: bytes("k") });
    assert_eq!(finish_passing(&mut net, c, 10, &held), Some(OpResult::Get(Some(bytes("v1")))));
    let at = Levels { write: WriteLevel::MonotonicWriteFollowsReads, ..Levels::default() };
    net.invoke_at(c, Op::Put { key: bytes("k"), value: bytes("v2") }, at);
    assert!(replicas(&net, 0).contains(&asked(&net, c)));
    let done = match finish_passing(&mut net, c, 10, &held) {
        Some(r) => {
            assert_eq!(r, OpResult::Put);
            true
        }
        None => {
            assert_eq!(finish_passing(&mut net, c, 20, &|_| true), Some(OpResult::Put));
            false
        }
    };
    settle(&mut net, 10);
    (net, c, done)
}

/// Table 4.1's HLC subscript (§4.4.2): with HLC the write is stamped past
/// what the session read at once and never waits; without, it waits at
/// the leader until DC 1's write has been forwarded there. Either way the
/// write wins over what the session read, everywhere.
#[test]
fn with_hlc_a_write_after_a_remote_read_never_waits_and_without_it_waits_for_the_read_write() {
    for hlc in [true, false] {
        let (net, _, done) = write_after_a_remote_read(hlc);
        assert_eq!(done, hlc, "hlc = {hlc}: completed while DC 1's forwarder was held");
        let waited = net.blocked("put_wait");
        if hlc {
            assert!(waited.is_empty(), "with HLC no PUT waits: {waited:?}");
        } else {
            let l0 = leader(&net, 0).unwrap();
            assert!(waited.iter().any(|&(n, _)| n == l0), "DC 0's leader held the PUT: {waited:?}");
        }
        for dc in [0, 1] {
            for n in replicas(&net, dc) {
                match net.nodes[n.idx()].store().latest(b"k") {
                    Some(Version::Data(s)) => assert_eq!(&s.value[..], b"v2", "hlc = {hlc}, at {n:?}"),
                    other => panic!("hlc = {hlc}: {n:?} holds {other:?}"),
                }
            }
        }
    }
}

/// Without HLC an eventual write depends on nothing and never waits.
#[test]
fn without_hlc_an_eventual_write_does_not_wait() {
    use causeway_core::{Levels, WriteLevel};
    let cfg = Config { hlc: false, ..Config::default() };
    let mut net = net(2, 1, cfg);
    settle(&mut net, 5);
    let c = net.client(0, 0);
    let local = |m: &InFlight<Msg>| !matches!(m.msg, Msg::Forward(_));
    let eventual = Levels { write: WriteLevel::Eventual, ..Levels::default() };
    for i in 0..3 {
        net.invoke_at(c, Op::Put { key: bytes("k"), value: bytes(&format!("v{i}")) }, eventual);
        assert_eq!(finish_passing(&mut net, c, 5, &local), Some(OpResult::Put));
    }
    net.assert_never_blocked();
}

#[test]
fn a_remote_share_outside_zero_to_one_is_refused_by_name() {
    let t = net(2, 1, Config::default()).topology.clone();
    for bad in [-0.1, 1.5, f64::NAN] {
        let err = Nukv::validate(&Config { remote_write_share: bad, ..Config::default() }, &t).unwrap_err();
        assert!(err.contains("remote_write_share"), "{err}");
    }
}
