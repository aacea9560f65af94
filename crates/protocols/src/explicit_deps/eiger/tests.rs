use super::*;
use crate::explicit_deps::cops::tests::{
    an_independent_write_is_not_held_behind_a_blocked_one, pending_write_survives_a_restart,
};
use crate::explicit_deps::replication::DepVersion;
use crate::kit::testkit::{Dest, InFlight, TestNet, bytes, channel, client_traffic, get, put, rot, run, text};
use causeway_core::DcId;
use causeway_core::{ClientId, Key, NodeId, Op, OpResult};

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
    // A second round with no transaction pending asks no coordinator: the
    // read is not noted indirected (Table 7.4 counts it as "2 rounds").
    assert!(net.notes[READER.idx()].is_empty(), "noted {:?}", net.notes[READER.idx()]);
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
    assert_eq!(effective_time(0, [(1, 10), (5, 12)]), 10);
    // Fig 5.4(b): location 1 valid [1,10], location 2 [12,15]: EffT = 15.
    assert_eq!(effective_time(0, [(1, 10), (12, 15)]), 15);
    // The session's time lifts it (deviation 2).
    assert_eq!(effective_time(11, [(1, 11), (5, 12)]), 11);
    assert_eq!(effective_time(12, [(1, 12), (5, 13)]), 12);
}

/// A reader's transaction over an ACL and an album reads the ACL
/// ("public") while its album read is held; Alice then writes the ACL
/// twice and the album once, so the reader's second round for the ACL is
/// in flight, asking for a time before the ACL's newest version. Returns
/// the ACL and its server.
fn second_round_for_an_overwritten_acl(net: &mut TestNet<Eiger>) -> (Key, causeway_core::NodeId) {
    let (acl, album) = acl_and_album(net);
    put(net, ALICE, &acl, "public");
    put(net, ALICE, &album, "old");
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
    assert_eq!(second_round_reads(net), 1);
    (acl, acl_server)
}

/// Deliver the reader's traffic: its transaction must restart (after its
/// back-off) and then complete; its values.
fn restarted_rot(net: &mut TestNet<Eiger>) -> Vec<Option<String>> {
    net.deliver_while(client_traffic);
    assert_eq!(net.take_result(READER), None, "the restart waits out its back-off");
    net.fire_client_timers(READER);
    net.deliver_while(client_traffic);
    let r = net.take_result(READER).expect("the restarted transaction completes");
    let OpResult::Rot(vs) = r else { panic!("{r:?}") };
    vs.into_iter().map(text).collect()
}

/// §5.3, limiting old values: a transaction whose second round asks for
/// a time before what the server kept restarts, and is then answered.
#[test]
fn a_second_round_for_a_collected_version_restarts() {
    let cfg = Config { trans_time_ms: 50, clock_margin_ms: 0, gc_interval_ms: 10, ..Config::default() };
    let mut net = TestNet::<Eiger>::new(1, 2, 2, cfg);
    let (acl, acl_server) = second_round_for_an_overwritten_acl(&mut net);
    net.advance_clocks(200_000);
    net.fire_timers(acl_server);
    assert_eq!(net.nodes[acl_server.idx()].store().versions(&acl).len(), 1, "friends-only ACL collected");
    assert_eq!(restarted_rot(&mut net), vec![Some("closed".into()), Some("personal".into())]);
}

/// Only a key a first round read within `trans_time` keeps what an
/// overwrite supersedes (deviation from §5.3 at `first_round_versions`);
/// another key's goes at once, its newest version marked so that a read
/// before it restarts, and so does the read key's once the read is older
/// than `trans_time`.
#[test]
fn an_overwrite_keeps_the_old_version_only_for_a_key_read_lately() {
    let cfg = Config { trans_time_ms: 50, clock_margin_ms: 0, ..Config::default() };
    let mut net = TestNet::<Eiger>::new(1, 2, 2, cfg);
    let (read, unread) = acl_and_album(&net);
    put(&mut net, ALICE, &read, "r1");
    put(&mut net, ALICE, &unread, "u1");
    assert_eq!(get(&mut net, READER, &read), Some("r1".into()));
    put(&mut net, ALICE, &read, "r2");
    put(&mut net, ALICE, &unread, "u2");
    let versions = |net: &TestNet<Eiger>, k: &Key| {
        let vs = net.nodes[net.server_for(DcId(0), k).idx()].store().versions(k);
        vs.iter().map(|v| (String::from_utf8(v.value.to_vec()).unwrap(), v.collected_below)).collect::<Vec<_>>()
    };
    assert_eq!(versions(&net, &read), vec![("r1".into(), false), ("r2".into(), false)], "read lately: kept");
    assert_eq!(versions(&net, &unread), vec![("u2".into(), true)], "never read: gone at once, marked");
    net.advance_clocks(60_000);
    put(&mut net, ALICE, &read, "r3");
    assert_eq!(versions(&net, &read), vec![("r3".into(), true)], "read longer than trans_time ago: gone at once");
}

/// A checkpoint keeps no superseded version (deviation from §5.3 at
/// `snapshot_cut`): a transaction whose second round reaches a server
/// restarted from one, asking for a time before the version it kept,
/// restarts, and is then answered — it is not told the key had no value.
#[test]
fn a_second_round_after_a_restart_from_a_cut_snapshot_restarts() {
    let cfg = Config::default();
    let mut net = TestNet::<Eiger>::new(1, 2, 2, cfg.clone());
    let (acl, acl_server) = second_round_for_an_overwritten_acl(&mut net);
    assert_eq!(net.nodes[acl_server.idx()].store().versions(&acl).len(), 3, "nothing collected yet");
    net.restart_from_snapshot(acl_server, &cfg);
    assert_eq!(net.nodes[acl_server.idx()].store().versions(&acl).len(), 1, "the snapshot kept the current ACL only");
    assert_eq!(restarted_rot(&mut net), vec![Some("closed".into()), Some("personal".into())]);
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

// ------------------------------------------------- write-only transactions

/// Commit checks and second-round reads are part of a read's own traffic,
/// and so are the ACKs a coordinator waits for before its decided writes
/// are visible (a read of one waits for them).
fn read_traffic(m: &Msg) -> bool {
    matches!(m, Msg::CommitCheck { .. } | Msg::CheckReply { .. } | Msg::Ack { .. })
}

fn wot(writes: &[(&Key, &str)]) -> Op {
    Op::Wot { writes: writes.iter().map(|&(k, v)| (k.clone(), bytes(v))).collect() }
}

fn rot_text(net: &mut TestNet<Eiger>, c: ClientId, keys: &[&Key]) -> Vec<Option<String>> {
    rot(net, c, keys)
}

/// The coordinator key of the transaction whose sub-requests are queued.
fn queued_coord_key(net: &TestNet<Eiger>) -> Key {
    net.queue
        .iter()
        .find_map(|m| match &m.msg {
            Msg::WotReq { info, .. } => Some(info.coord_key.clone()),
            _ => None,
        })
        .expect("a queued sub-request")
}

fn count(net: &TestNet<Eiger>, pred: impl Fn(&Msg) -> bool) -> usize {
    net.queue.iter().filter(|m| pred(&m.msg)).count()
}

/// Run a transaction in DC0 to its answer, delivering nothing to DC1 (nor
/// on `held`).
fn wot_in_dc0(net: &mut TestNet<Eiger>, c: ClientId, op: Op, held: impl Fn(&InFlight<Msg>) -> bool) {
    net.invoke(c, op);
    let topology = net.topology.clone();
    net.deliver_while(|m| !matches!(m.to, Dest::Node(n) if topology.dc_of(n) == DcId(1)) && !held(m));
    assert_eq!(net.take_result(c), Some(OpResult::Wot));
}

/// Run every timer and message until nothing moves (retries included),
/// a retry period at a time: a second of every node's clock.
fn settle_all(net: &mut TestNet<Eiger>) {
    for _ in 0..20 {
        net.advance_clocks(50_000);
        net.fire_all_timers();
        net.deliver_all();
    }
}

/// Run a transaction over three keys on three partitions until its
/// coordinator's commit is visible (one cohort acknowledged), holding the
/// COMMIT to the other cohort. Returns the coordinator key and the held
/// cohort's key, still pending there.
fn commit_holding_one_cohort(net: &mut TestNet<Eiger>, c: ClientId, ks: &[Key]) -> (Key, Key) {
    let writes: Vec<(&Key, &str)> = ks.iter().map(|k| (k, "new")).collect();
    net.invoke(c, wot(&writes));
    let coord_key = queued_coord_key(net);
    let held_key = ks.iter().find(|k| **k != coord_key).expect("a cohort key").clone();
    let held = net.server_for(DcId(0), &held_key);
    net.deliver_while(|m| !(matches!(m.msg, Msg::Commit { .. }) && m.to == Dest::Node(held)));
    assert_eq!(net.take_result(c), Some(OpResult::Wot), "answered at the other cohort's ACK");
    assert!(net.latest(held, &held_key).part().is_some(), "still pending at the held cohort");
    (coord_key, held_key)
}

/// A transaction's writes in the accepting DC: a read transaction over
/// them sees all or nothing however the 2PC-PCI messages interleave with
/// it (it is run after every single message), and ends seeing all.
#[test]
fn a_wot_is_atomic_under_a_concurrent_rot_in_the_accepting_dc() {
    let mut net = TestNet::<Eiger>::new(1, 3, 2, Config::default());
    net.also_op_traffic = read_traffic;
    let ks = net.keys_on_distinct_partitions(3);
    let (x, y, z) = (&ks[0], &ks[1], &ks[2]);
    for k in [x, y, z] {
        put(&mut net, ALICE, k, "old");
    }
    net.invoke(ALICE, wot(&[(x, "new"), (y, "new"), (z, "new")]));
    let mut steps = 0;
    loop {
        let got = rot_text(&mut net, READER, &[x, y, z]);
        assert!(got.iter().all(|v| v == &got[0]), "a partial transaction was read: {got:?}");
        if !net.deliver_first(|_| true) {
            break;
        }
        steps += 1;
    }
    // Votes, commits, acks; a ROT's commit check answered by the
    // coordinator brings the COMMIT sent before it on that channel (FIFO
    // links), and the ACKs go with the reads whose reads of the coordinator
    // key wait for the first, so most arrive within a ROT, not as steps.
    assert!(steps >= 3, "votes, commits, acks: {steps} steps");
    assert_eq!(net.take_result(ALICE), Some(OpResult::Wot));
    assert_eq!(rot_text(&mut net, READER, &[x, y, z]), vec![Some("new".into()); 3]);
    assert_eq!(get(&mut net, ALICE, y), Some("new".into()), "the writer reads its own transaction");
}

/// §5.4.4 indirection: the coordinator committed and answered the client
/// (one cohort acknowledged); the other cohort's COMMIT is held. A read
/// transaction finds that cohort's key pending (LVT only), reads it again
/// at EffT, and the cohort asks the coordinator (`commit_check`), learns
/// the commit time and returns the new value: three rounds in all, one of
/// them a commit check.
#[test]
fn a_second_round_read_of_a_pending_write_checks_with_the_coordinator() {
    let mut net = TestNet::<Eiger>::new(1, 3, 2, Config::default());
    let ks = net.keys_on_distinct_partitions(3);
    for k in &ks {
        put(&mut net, ALICE, k, "old");
    }
    let (coord_key, cohort_key) = commit_holding_one_cohort(&mut net, ALICE, &ks);
    let cohort = net.server_for(DcId(0), &cohort_key);
    let is_commit = |m: &InFlight<Msg>| matches!(m.msg, Msg::Commit { .. });

    net.invoke(READER, Op::Rot { keys: vec![coord_key.clone(), cohort_key.clone()] });
    let (mut first, mut second, mut checks) = (0, 0, 0);
    loop {
        if let Some(r) = net.take_result(READER) {
            let OpResult::Rot(vs) = r else { panic!("{r:?}") };
            assert_eq!(vs.into_iter().map(text).collect::<Vec<_>>(), vec![Some("new".into()); 2]);
            break;
        }
        let i = net.queue.iter().position(|m| !is_commit(m)).expect("the read transaction completes");
        match &net.queue[i].msg {
            Msg::Read { .. } => first += 1,
            Msg::ReadAt { .. } => second += 1,
            Msg::CommitCheck { .. } => checks += 1,
            _ => {}
        }
        let m = net.queue.remove(i);
        net.queue.insert(0, m);
        net.deliver_first(|_| true);
    }
    assert_eq!((first, checks), (2, 1), "one commit check, at the cohort's coordinator");
    assert!(second >= 1, "the pending location is read again at EffT");
    assert_eq!(net.notes[READER.idx()], vec!["indirected"], "the runtime is told the read was indirected");
    // The cohort learned the decision from the check; the late COMMIT is
    // harmless.
    assert!(net.latest(cohort, &cohort_key).committed());
    net.deliver_all();
    assert_eq!(rot_text(&mut net, READER, &[&coord_key, &cohort_key]), vec![Some("new".into()); 2]);
}

/// Run a get delivering only its own traffic (commit checks included),
/// counting its second-round reads and the commit checks sent for it.
fn traced_get(net: &mut TestNet<Eiger>, c: ClientId, key: &Key) -> (Option<String>, usize, usize) {
    net.invoke(c, Op::Get { key: key.clone() });
    let own = |m: &InFlight<Msg>| client_traffic(m) || read_traffic(&m.msg);
    let (mut second_round, mut checks) = (0, 0);
    loop {
        if let Some(r) = net.take_result(c) {
            let OpResult::Get(v) = r else { panic!("GET returned {r:?}") };
            return (text(v), second_round, checks);
        }
        let next = net.queue.iter().find(|m| own(m)).expect("the get completes without other traffic");
        match next.msg {
            Msg::ReadAt { .. } => second_round += 1,
            Msg::CommitCheck { .. } => checks += 1,
            _ => {}
        }
        net.deliver_first(own);
    }
}

/// A get answered only after a commit check is noted "indirected" to the
/// runtime (Lloyd's dissertation, Table 7.4 reports such reads apart from
/// one- and two-round reads); gets that asked no coordinator are not,
/// whether they took one round or two.
#[test]
fn only_a_read_that_asked_the_coordinator_is_noted_indirected() {
    let mut net = TestNet::<Eiger>::new(1, 3, 2, Config::default());
    let ks = net.keys_on_distinct_partitions(3);
    for k in &ks {
        put(&mut net, ALICE, k, "old");
    }
    let writes: Vec<(&Key, &str)> = ks.iter().map(|k| (k, "new")).collect();
    net.invoke(ALICE, wot(&writes));
    let coord_key = queued_coord_key(&net);
    let noted = |net: &TestNet<Eiger>| net.notes[READER.idx()].clone();

    // Every write prepared, the cohorts' YESVOTEs held: the coordinator
    // key is pending at its own coordinator, which reads it again at EffT
    // without asking anyone (two rounds, not indirected).
    let is_vote = |m: &InFlight<Msg>| matches!(m.msg, Msg::YesVote { .. });
    net.deliver_while(|m| !is_vote(m));
    assert_eq!(traced_get(&mut net, READER, &coord_key), (Some("old".into()), 1, 0));
    assert_eq!(noted(&net), Vec::<&str>::new());

    // Committed at the coordinator and visible there (one cohort
    // acknowledged), the other cohort's COMMIT held. The coordinator key:
    // one round. The cohort key: pending (LVT only), read again at EffT
    // (above the cohort's vote: the session's time is past the commit),
    // and the cohort asks the coordinator: indirected.
    let cohort_key = ks.iter().find(|k| **k != coord_key).expect("a cohort key").clone();
    let held = net.server_for(DcId(0), &cohort_key);
    net.deliver_while(|m| !(matches!(m.msg, Msg::Commit { .. }) && m.to == Dest::Node(held)));
    assert_eq!(net.take_result(ALICE), Some(OpResult::Wot));
    assert_eq!(traced_get(&mut net, READER, &coord_key), (Some("new".into()), 0, 0));
    assert_eq!(noted(&net), Vec::<&str>::new());
    assert_eq!(traced_get(&mut net, READER, &cohort_key), (Some("new".into()), 1, 1));
    assert_eq!(noted(&net), vec!["indirected"]);

    // The cohort learned the commit from the check: the next get of it
    // takes one round and is not noted (notes are per operation).
    assert_eq!(traced_get(&mut net, READER, &cohort_key), (Some("new".into()), 0, 0));
    assert_eq!(noted(&net), Vec::<&str>::new());
}

/// Before the coordinator decides, a read transaction that runs into the
/// pending writes gets the old values of both (the commit check answers
/// "not committed", and the commit then comes after the read's EffT).
#[test]
fn a_rot_before_the_commit_sees_neither_write() {
    let mut net = TestNet::<Eiger>::new(1, 2, 2, Config::default());
    net.also_op_traffic = read_traffic;
    let (x, y) = (acl_and_album(&net).0, acl_and_album(&net).1);
    put(&mut net, ALICE, &x, "x0");
    put(&mut net, ALICE, &y, "y0");
    net.invoke(ALICE, wot(&[(&x, "x1"), (&y, "y1")]));
    let is_vote = |m: &InFlight<Msg>| matches!(m.msg, Msg::YesVote { .. });
    net.deliver_while(|m| !is_vote(m));
    assert_eq!(net.take_result(ALICE), None);
    assert_eq!(rot_text(&mut net, READER, &[&x, &y]), vec![Some("x0".into()), Some("y0".into())]);
    net.deliver_all();
    assert_eq!(net.take_result(ALICE), Some(OpResult::Wot));
    assert_eq!(rot_text(&mut net, READER, &[&x, &y]), vec![Some("x1".into()), Some("y1".into())]);
}

/// A transaction with a dependency (`a`, written first by the same
/// session) replicated to DC1, with `a`'s replication held: DC1's
/// coordinator's `dep_check` waits, so nothing of the transaction is
/// visible there, whatever else is delivered; a read transaction in DC1,
/// run after every message once `a` is released, sees all or nothing.
#[test]
fn a_replicated_wot_is_never_partially_visible_in_a_remote_dc() {
    let mut net = TestNet::<Eiger>::new(2, 3, 1, Config::default());
    net.also_op_traffic = read_traffic;
    let ks = net.keys_on_distinct_partitions(3);
    let (a, x, y) = (&ks[0], &ks[1], &ks[2]);
    let (w, r) = (net.client(0, 0), net.client(1, 0));
    put(&mut net, w, a, "a1");
    let (a0, a1) = (net.server_for(DcId(0), a), net.server_for(DcId(1), a));
    wot_in_dc0(&mut net, w, wot(&[(x, "x1"), (y, "y1")]), channel(a0, a1));
    net.deliver_while(|m| !channel::<Msg>(a0, a1)(m) && !client_traffic(m));
    for _ in 0..3 {
        net.advance_clocks(200_000);
        net.fire_all_timers();
        net.deliver_while(|m| !channel::<Msg>(a0, a1)(m) && !client_traffic(m));
    }
    assert_eq!(rot_text(&mut net, r, &[x, y, a]), vec![None, None, None], "the transaction waits for a at DC1");
    for k in [x, y] {
        let n = net.server_for(DcId(1), k);
        assert!(
            net.nodes[n.idx()].store().versions(k).iter().all(|v| !v.committed()),
            "nothing applied before the checks"
        );
    }
    loop {
        let got = rot_text(&mut net, r, &[x, y, a]);
        assert_eq!(got[0].is_some(), got[1].is_some(), "a partial transaction was read in DC1: {got:?}");
        if got[0].is_some() {
            assert_eq!(got[2], Some("a1".into()), "the transaction is visible before its dependency");
        }
        if !net.deliver_first(|_| true) {
            break;
        }
    }
    assert_eq!(rot_text(&mut net, r, &[x, y, a]), vec![Some("x1".into()), Some("y1".into()), Some("a1".into())]);
    // One EVT for the whole transaction in DC1.
    let evts: Vec<_> = [x, y].iter().map(|k| net.latest(net.server_for(DcId(1), k), k).evt()).collect();
    assert_eq!(evts[0], evts[1]);
}

/// The same scenario with `mutant_cohort_skips_coordinator_dep_check`: the
/// cohort's write is visible in DC1 before its dependency is.
#[test]
fn the_cohort_skipping_the_coordinators_dep_check_mutant_is_caught() {
    let cfg = Config { mutant_cohort_skips_coordinator_dep_check: true, ..Config::default() };
    let mut net = TestNet::<Eiger>::new(2, 3, 1, cfg);
    net.also_op_traffic = read_traffic;
    let ks = net.keys_on_distinct_partitions(3);
    let (a, x, y) = (&ks[0], &ks[1], &ks[2]);
    let (w, r) = (net.client(0, 0), net.client(1, 0));
    put(&mut net, w, a, "a1");
    let (a0, a1) = (net.server_for(DcId(0), a), net.server_for(DcId(1), a));
    wot_in_dc0(&mut net, w, wot(&[(x, "x1"), (y, "y1")]), channel(a0, a1));
    net.deliver_while(|m| !channel::<Msg>(a0, a1)(m) && !client_traffic(m));
    let got = rot_text(&mut net, r, &[x, y, a]);
    assert_eq!(got[2], None);
    assert!(got[0].is_some() != got[1].is_some(), "the cohort's write alone is visible: {got:?}");
}

/// `mutant_commit_without_all_votes`: the cohort's sub-request is slow; the
/// coordinator commits and answers without its vote, and a read
/// transaction sees the coordinator's write without the cohort's. The
/// correct protocol waits (and the read sees neither).
#[test]
fn the_commit_without_all_votes_mutant_is_caught() {
    for mutant in [false, true] {
        let cfg = Config { mutant_commit_without_all_votes: mutant, ..Config::default() };
        let mut net = TestNet::<Eiger>::new(1, 2, 2, cfg);
        net.also_op_traffic = read_traffic;
        let (x, y) = acl_and_album(&net);
        net.invoke(ALICE, wot(&[(&x, "x1"), (&y, "y1")]));
        let coord_key = queued_coord_key(&net);
        let coord = net.server_for(DcId(0), &coord_key);
        let slow = move |m: &InFlight<Msg>| {
            matches!(m.msg, Msg::WotReq { .. }) && m.from == Dest::Client(ALICE) && m.to != Dest::Node(coord)
        };
        net.deliver_while(|m| !slow(m));
        let i = net.queue.iter().position(slow).expect("the slow sub-request");
        let held = net.queue.remove(i);
        let got = rot_text(&mut net, READER, &[&x, &y]);
        net.queue.push(held);
        if mutant {
            assert_eq!(net.take_result(ALICE), Some(OpResult::Wot));
            assert_eq!(got.iter().filter(|v| v.is_some()).count(), 1, "a partial transaction: {got:?}");
        } else {
            assert_eq!(net.take_result(ALICE), None);
            assert_eq!(got, vec![None, None]);
            net.deliver_all();
            assert_eq!(net.take_result(ALICE), Some(OpResult::Wot));
            assert_eq!(rot_text(&mut net, READER, &[&x, &y]), vec![Some("x1".into()), Some("y1".into())]);
        }
    }
}

/// Restarts mid-transaction lose nothing and leave nothing half-visible:
/// the coordinator after one of two votes (it forgets the vote, the
/// cohort votes again), after the commit before the ACKs (it sends COMMIT
/// again), and a cohort between its vote and the COMMIT.
#[test]
fn restarts_of_coordinator_and_cohort_mid_transaction_lose_nothing() {
    let cfg = Config::default();
    for case in 0..3 {
        let mut net = TestNet::<Eiger>::new(1, 3, 2, cfg.clone());
        net.also_op_traffic = read_traffic;
        let ks = net.keys_on_distinct_partitions(3);
        let (x, y, z) = (&ks[0], &ks[1], &ks[2]);
        net.invoke(ALICE, wot(&[(x, "1"), (y, "1"), (z, "1")]));
        let coord_key = queued_coord_key(&net);
        let coord = net.server_for(DcId(0), &coord_key);
        let cohort = net.server_for(DcId(0), ks.iter().find(|k| **k != coord_key).expect("a cohort key"));
        let is = |pred: fn(&Msg) -> bool| move |m: &InFlight<Msg>| pred(&m.msg);
        match case {
            0 => {
                // One vote in, then the coordinator restarts.
                net.deliver_while(|m| !matches!(m.msg, Msg::YesVote { .. }));
                assert!(net.deliver_first(is(|m| matches!(m, Msg::YesVote { .. }))));
                net.restart(coord, &cfg);
            }
            1 => {
                // Decided; the COMMITs are dropped (lost with the
                // coordinator's sends), and it restarts. Nobody was told,
                // so the client is not answered yet (nor after the
                // restart: a restarted node forgets its clients).
                net.deliver_while(|m| !matches!(m.msg, Msg::Commit { .. }));
                assert_eq!(net.take_result(ALICE), None);
                net.queue.retain(|m| !matches!(m.msg, Msg::Commit { .. }));
                net.restart(coord, &cfg);
            }
            _ => {
                // A cohort voted, then restarts before the COMMIT.
                net.deliver_while(|m| !matches!(m.msg, Msg::Commit { .. }));
                net.restart(cohort, &cfg);
            }
        }
        let got = rot_text(&mut net, READER, &[x, y, z]);
        assert!(got.iter().all(|v| v == &got[0]), "case {case}: half-visible after the restart: {got:?}");
        settle_all(&mut net);
        let got = rot_text(&mut net, READER, &[x, y, z]);
        assert_eq!(got, vec![Some("1".into()); 3], "case {case}: the transaction was lost");
        for k in [x, y, z] {
            let n = net.server_for(DcId(0), k);
            assert!(net.nodes[n.idx()].store().versions(k).iter().all(|v| v.committed()), "case {case}: left pending");
        }
        let tag = net.latest(coord, &coord_key).coord.expect("the coordinator's record");
        assert!(tag.acked, "case {case}: every cohort acknowledged");
    }
}

/// Restarts in the remote DC: its coordinator forgets a NOTIFY, a cohort
/// restarts right after its vote; retries finish the transaction, and it
/// is never half-visible there meanwhile.
#[test]
fn restarts_in_the_remote_dc_lose_nothing() {
    let cfg = Config::default();
    let mut net = TestNet::<Eiger>::new(2, 3, 1, cfg.clone());
    net.also_op_traffic = read_traffic;
    let ks = net.keys_on_distinct_partitions(3);
    let (x, y, z) = (&ks[0], &ks[1], &ks[2]);
    let (w, r) = (net.client(0, 0), net.client(1, 0));
    wot_in_dc0(&mut net, w, wot(&[(x, "1"), (y, "1"), (z, "1")]), |_| false);
    let topology = net.topology.clone();
    let (mut coord_restarted, mut cohort_restarted) = (false, false);
    for _ in 0..200 {
        if net.queue.is_empty() {
            net.advance_clocks(200_000);
            net.fire_all_timers();
        }
        let Some(m) = net.queue.first().cloned() else { break };
        net.deliver_first(|_| true);
        match (&m.msg, m.from, m.to) {
            (Msg::Notify { .. }, _, Dest::Node(coord1)) if !coord_restarted => {
                net.restart(coord1, &cfg);
                coord_restarted = true;
            }
            (Msg::YesVote { .. }, Dest::Node(from), _) if !cohort_restarted && topology.dc_of(from) == DcId(1) => {
                net.restart(from, &cfg);
                cohort_restarted = true;
            }
            _ => {}
        }
        let got = rot_text(&mut net, r, &[x, y, z]);
        assert!(got.iter().all(|v| v == &got[0]), "half-visible in DC1: {got:?}");
    }
    assert!(coord_restarted && cohort_restarted);
    settle_all(&mut net);
    assert_eq!(rot_text(&mut net, r, &[x, y, z]), vec![Some("1".into()); 3]);
    for k in [x, y, z] {
        let n = net.server_for(DcId(1), k);
        assert!(net.nodes[n.idx()].store().versions(k).iter().all(|v| v.committed()), "left pending in DC1");
    }
}

/// Bad input: a key twice, or more than `MAX_WOT_KEYS` keys, is refused
/// with a typed error before anything is sent; a malformed sub-request
/// reaching a server is refused and nothing is stored.
#[test]
fn a_bad_wot_is_refused_and_nothing_is_applied() {
    let mut net = TestNet::<Eiger>::new(1, 2, 2, Config::default());
    let (x, y) = acl_and_album(&net);
    net.invoke(ALICE, wot(&[(&x, "1"), (&y, "1"), (&x, "2")]));
    assert!(matches!(net.take_result(ALICE), Some(OpResult::Failed(causeway_core::OpError::BadRequest(_)))));
    assert!(net.queue.is_empty(), "nothing sent");
    let many: Vec<(Key, causeway_core::Value)> =
        (0..=MAX_WOT_KEYS).map(|i| (bytes(&format!("k{i}")), bytes("v"))).collect();
    net.invoke(ALICE, Op::Wot { writes: many });
    assert!(matches!(net.take_result(ALICE), Some(OpResult::Failed(causeway_core::OpError::BadRequest(_)))));
    assert!(net.queue.is_empty(), "nothing sent");
    // A sub-request naming a key twice, sent straight to a server.
    let n = net.server_for(DcId(0), &x);
    let info =
        TxnInfo { id: TxnId { session: 9, seq: 1 }, coord_key: x.clone(), keys: vec![x.clone(), x.clone()].into() };
    let msg = Msg::WotReq { info: Box::new(info), writes: vec![(x.clone(), bytes("1"))], deps: vec![], floor: 0 };
    net.queue.push(InFlight::new(Dest::Client(ALICE), Dest::Node(n), msg));
    net.deliver_first(|_| true);
    assert!(matches!(net.queue[0].msg, Msg::WotReply { result: Err(_), .. }));
    assert!(net.nodes[n.idx()].store().versions(&x).is_empty(), "nothing stored");
    // An empty transaction is a no-op.
    net.queue.clear();
    assert_eq!(run(&mut net, ALICE, Op::Wot { writes: vec![] }), OpResult::Wot);
}

/// A participant's sub-request is lost (client requests to a crashed node
/// are not re-sent): the coordinator waits `txn_abort_ms` for the vote,
/// then aborts. The client is told, every prepared write (in both DCs) is
/// discarded, nothing is ever visible, and later writes of the keys from
/// the same servers replicate as usual (nothing is left blocking them).
#[test]
fn a_transaction_missing_a_sub_request_aborts_everywhere() {
    let cfg = Config::default();
    let mut net = TestNet::<Eiger>::new(2, 3, 1, cfg.clone());
    net.also_op_traffic = read_traffic;
    let ks = net.keys_on_distinct_partitions(3);
    let (x, y, z) = (&ks[0], &ks[1], &ks[2]);
    let (w, r0, r1) = (net.client(0, 0), net.client(0, 0), net.client(1, 0));
    net.invoke(w, wot(&[(x, "1"), (y, "1"), (z, "1")]));
    let coord_key = queued_coord_key(&net);
    let lost = ks.iter().find(|k| **k != coord_key).expect("a cohort key").clone();
    let lost_server = net.server_for(DcId(0), &lost);
    net.queue.retain(|m| !(matches!(m.msg, Msg::WotReq { .. }) && m.to == Dest::Node(lost_server)));
    net.deliver_all();
    assert_eq!(net.take_result(w), None, "the coordinator waits for the missing vote");
    net.advance_clocks(cfg.txn_abort_ms * 1_000);
    settle_all(&mut net);
    assert!(matches!(net.take_result(w), Some(OpResult::Failed(causeway_core::OpError::Aborted(_)))));
    for (c, dc) in [(r0, 0), (r1, 1)] {
        assert_eq!(rot_text(&mut net, c, &[x, y, z]), vec![None, None, None]);
        for k in [x, y, z] {
            let n = net.server_for(DcId(dc), k);
            assert!(
                net.nodes[n.idx()].store().versions(k).iter().all(|v| v.part().is_none()),
                "left pending in DC{dc}"
            );
        }
    }
    for k in [x, y, z] {
        put(&mut net, w, k, "2");
    }
    settle_all(&mut net);
    assert_eq!(rot_text(&mut net, r1, &[x, y, z]), vec![Some("2".into()); 3], "later writes replicate");
}

// ------------------------------- a participant lost for good (deviation 7)

/// Whether a message goes to or comes from one of `lost`.
fn touches(m: &InFlight<Msg>, lost: &[NodeId]) -> bool {
    lost.iter().any(|&n| m.to == Dest::Node(n) || m.from == Dest::Node(n))
}

/// Move every clock 10 ms at a time, firing the timers of every node but
/// `lost` and delivering every message between the others (those to or
/// from `lost` are dropped: the nodes are gone for good), until `done`
/// holds or `ms` have passed. Returns the milliseconds that passed.
fn run_without(net: &mut TestNet<Eiger>, lost: &[NodeId], ms: u64, done: impl Fn(&mut TestNet<Eiger>) -> bool) -> u64 {
    let mut elapsed = 0;
    net.queue.retain(|m| !touches(m, lost));
    net.deliver_while(|m| !touches(m, lost));
    while elapsed < ms && !done(net) {
        net.advance_clocks(10_000);
        elapsed += 10;
        for i in 0..net.nodes.len() {
            let n = NodeId(i as u32);
            if !lost.contains(&n) {
                net.fire_timers(n);
            }
        }
        net.queue.retain(|m| !touches(m, lost));
        net.deliver_while(|m| !touches(m, lost));
        net.queue.retain(|m| !touches(m, lost));
    }
    elapsed
}

/// Move every clock 10 ms at a time for `ms`, firing the timers of every
/// node but `paused` and delivering every message between the others;
/// those to or from `paused` stay queued (a paused node's links hold them).
fn run_paused(net: &mut TestNet<Eiger>, paused: &[NodeId], ms: u64) {
    let mut elapsed = 0;
    while elapsed < ms {
        net.advance_clocks(10_000);
        elapsed += 10;
        for i in 0..net.nodes.len() {
            let n = NodeId(i as u32);
            if !paused.contains(&n) {
                net.fire_timers(n);
            }
        }
        net.deliver_while(|m| !touches(m, paused));
    }
}

/// The liveness bound Eiger declares with `cfg` on the testkit's network
/// (no latency): what a read waiting on a lost participant may take.
fn bound_ms(cfg: &Config) -> u64 {
    let env = causeway_core::LivenessEnv { max_rtt_us: 0, intra_dc_rtt_us: 0, max_clock_skew_us: 0 };
    <Eiger as causeway_core::Protocol>::liveness_bound_us(cfg, &env) / 1_000
}

/// Start a read-only transaction on `c` and run without `lost` until it
/// completes: its values, and how long it took (ms).
fn rot_without(net: &mut TestNet<Eiger>, lost: &[NodeId], c: ClientId, keys: &[&Key]) -> (Vec<Option<String>>, u64) {
    net.invoke(c, Op::Rot { keys: keys.iter().map(|&k| k.clone()).collect() });
    let took = run_without(net, lost, 5_000, |net| net.results[c.idx()].is_some());
    match net.take_result(c) {
        Some(OpResult::Rot(vs)) => (vs.into_iter().map(text).collect(), took),
        other => panic!("the read transaction ended with {other:?} after {took} ms"),
    }
}

/// Every version of `keys` at their servers in `dc` is settled: committed
/// or discarded, none pending or held.
fn nothing_pending(net: &TestNet<Eiger>, dc: u16, keys: &[&Key]) -> bool {
    keys.iter().all(|k| {
        let n = net.server_for(DcId(dc), k);
        net.nodes[n.idx()].store().versions(k).iter().all(|v| v.part().is_none())
    })
}

/// Old values everywhere, then a transaction over `ks` (each on its own
/// partition) whose sub-requests are all delivered, with the messages `held`
/// names kept back. Returns the coordinator key and its server in DC0.
fn wot_started(net: &mut TestNet<Eiger>, ks: &[Key], held: impl Fn(&InFlight<Msg>) -> bool) -> (Key, NodeId) {
    for k in ks {
        put(net, ALICE, k, "old");
    }
    settle_all(net);
    let writes: Vec<(&Key, &str)> = ks.iter().map(|k| (k, "new")).collect();
    net.invoke(ALICE, wot(&writes));
    let coord_key = queued_coord_key(net);
    let coord = net.server_for(DcId(0), &coord_key);
    net.deliver_while(|m| !held(m));
    (coord_key, coord)
}

/// The coordinator is lost after every participant prepared, before it
/// heard the votes (so before it decided): the cohorts, whose keys a read
/// transaction finds pending, terminate the transaction without it — each
/// promises, none knows a commit, so it aborts — and the read completes
/// within the declared bound, with the old values; the remote DC discards
/// its copies, and later writes of the keys replicate as usual.
#[test]
fn cohorts_abort_a_transaction_whose_coordinator_is_lost_before_deciding() {
    let cfg = Config::default();
    let mut net = TestNet::<Eiger>::new(2, 3, 2, cfg.clone());
    net.also_op_traffic = read_traffic;
    let ks = net.keys_on_distinct_partitions(3);
    let (coord_key, coord) = wot_started(&mut net, &ks, |m| matches!(m.msg, Msg::YesVote { .. }));
    let lost = [coord];
    let cohort_keys: Vec<&Key> = ks.iter().filter(|k| **k != coord_key).collect();
    // The reader's time passes the cohorts' votes: a write after them.
    put(&mut net, READER, cohort_keys[0], "later");
    let (got, took) = rot_without(&mut net, &lost, READER, &cohort_keys[1..]);
    assert_eq!(got, vec![Some("old".into())], "the transaction aborted");
    assert!(took >= cfg.txn_terminate_ms, "the read waited for the termination ({took} ms)");
    assert!(took <= bound_ms(&cfg), "the read took {took} ms, beyond the bound {} ms", bound_ms(&cfg));
    assert!(nothing_pending(&net, 0, &cohort_keys), "left pending in DC0");
    // The remote DC is told by the cohorts, and discards.
    run_without(&mut net, &lost, 1_000, |_| false);
    let r1 = net.client(1, 0);
    let all: Vec<&Key> = ks.iter().collect();
    assert_eq!(rot_without(&mut net, &lost, r1, &[&coord_key, cohort_keys[1]]).0, vec![Some("old".into()); 2]);
    assert!(nothing_pending(&net, 1, &all), "left pending in DC1");
    put(&mut net, READER, cohort_keys[1], "after");
    run_without(&mut net, &lost, 1_000, |_| false);
    assert_eq!(rot_without(&mut net, &lost, r1, &cohort_keys[1..]).0, vec![Some("after".into())]);
}

/// The coordinator decided and one cohort applied its COMMIT (its ACK and
/// the other COMMIT are lost with the coordinator): nothing outside the
/// cohorts has seen the commit (the client is not answered), and the other
/// cohort's termination learns it from the first and commits. Reads in
/// both DCs see the whole transaction, the remote DC told by the cohort.
#[test]
fn cohorts_finish_a_commit_their_lost_coordinator_left_half_delivered() {
    let cfg = Config::default();
    let mut net = TestNet::<Eiger>::new(2, 3, 2, cfg.clone());
    net.also_op_traffic = read_traffic;
    let ks = net.keys_on_distinct_partitions(3);
    let (coord_key, coord) = wot_started(&mut net, &ks, |m| matches!(m.msg, Msg::Commit { .. }));
    let cohort_keys: Vec<&Key> = ks.iter().filter(|k| **k != coord_key).collect();
    let first = net.server_for(DcId(0), cohort_keys[0]);
    assert!(net.deliver_first(|m| matches!(m.msg, Msg::Commit { .. }) && m.to == Dest::Node(first)));
    assert_eq!(net.take_result(ALICE), None, "no cohort's ACK reached the coordinator");
    let lost = [coord];
    let (got, took) = rot_without(&mut net, &lost, READER, &cohort_keys);
    assert_eq!(got, vec![Some("new".into()); 2], "the commit one cohort knew is kept");
    assert!(took >= cfg.txn_terminate_ms, "the read waited for the termination ({took} ms)");
    assert!(took <= bound_ms(&cfg), "the read took {took} ms, beyond the bound {} ms", bound_ms(&cfg));
    assert!(nothing_pending(&net, 0, &cohort_keys));
    run_without(&mut net, &lost, 1_000, |_| false);
    let all: Vec<&Key> = ks.iter().collect();
    let r1 = net.client(1, 0);
    assert_eq!(rot_without(&mut net, &lost, r1, &all).0, vec![Some("new".into()); 3]);
    assert!(nothing_pending(&net, 1, &all), "left pending in DC1");
}

/// The outcome a one-cohort transaction's witness recorded, if any.
fn witness_record(net: &TestNet<Eiger>, coord_key: &Key) -> Option<(Outcome, bool)> {
    let w = net.server_for(DcId(1), coord_key);
    net.nodes[w.idx()].store().versions(coord_key).iter().find_map(|v| match v.state {
        State::Witness { outcome, released, .. } => Some((outcome, released)),
        _ => None,
    })
}

/// One cohort, its coordinator lost before deciding: the cohort cannot
/// tell a lost coordinator from a slow one, so it asks the witness (the
/// coordinator key's server in the next DC) to record an abort, and
/// aborts; the read completes within the bound.
#[test]
fn a_lone_cohort_aborts_through_the_witness_when_its_coordinator_is_lost() {
    let cfg = Config::default();
    let mut net = TestNet::<Eiger>::new(2, 2, 2, cfg.clone());
    net.also_op_traffic = read_traffic;
    let ks = net.keys_on_distinct_partitions(2);
    let (coord_key, coord) = wot_started(&mut net, &ks, |m| matches!(m.msg, Msg::YesVote { .. }));
    let cohort_key = ks.iter().find(|k| **k != coord_key).expect("a cohort key");
    put(&mut net, READER, cohort_key, "later");
    net.invoke(READER, Op::Rot { keys: vec![cohort_key.clone()] });
    let lost = [coord];
    let took = run_without(&mut net, &lost, 5_000, |net| net.results[READER.idx()].is_some());
    assert_eq!(net.take_result(READER), Some(OpResult::Rot(vec![Some(bytes("later"))])));
    assert!(took >= cfg.txn_terminate_ms, "the read waited for the termination ({took} ms)");
    assert!(took <= bound_ms(&cfg), "the read took {took} ms, beyond the bound {} ms", bound_ms(&cfg));
    assert_eq!(witness_record(&net, &coord_key), Some((Outcome::Aborted, false)), "kept for the coordinator");
    run_without(&mut net, &lost, 1_000, |_| false);
    let all: Vec<&Key> = ks.iter().collect();
    assert!(nothing_pending(&net, 0, &[cohort_key]) && nothing_pending(&net, 1, &all));
}

/// One cohort, lost after its vote: the coordinator decided, and no ACK
/// comes. After `txn_terminate_ms` it has the witness record its commit,
/// then shows it (answers the client, its own write becomes readable, the
/// remote DC commits) — within the bound.
#[test]
fn a_coordinator_whose_lone_cohort_is_lost_commits_through_the_witness() {
    let cfg = Config::default();
    let mut net = TestNet::<Eiger>::new(2, 2, 2, cfg.clone());
    net.also_op_traffic = read_traffic;
    let ks = net.keys_on_distinct_partitions(2);
    let (coord_key, _) = wot_started(&mut net, &ks, |m| matches!(m.msg, Msg::Commit { .. }));
    let cohort_key = ks.iter().find(|k| **k != coord_key).expect("a cohort key");
    let lost = [net.server_for(DcId(0), cohort_key)];
    let took = run_without(&mut net, &lost, 5_000, |net| net.results[ALICE.idx()].is_some());
    assert_eq!(net.take_result(ALICE), Some(OpResult::Wot), "the client is answered");
    assert!(took <= bound_ms(&cfg), "the commit took {took} ms to show, beyond the bound {} ms", bound_ms(&cfg));
    assert_eq!(rot_without(&mut net, &lost, READER, &[&coord_key]).0, vec![Some("new".into())]);
    assert!(matches!(witness_record(&net, &coord_key), Some((Outcome::Committed(..), false))));
    run_without(&mut net, &lost, 1_000, |_| false);
    let all: Vec<&Key> = ks.iter().collect();
    let r1 = net.client(1, 0);
    assert_eq!(rot_without(&mut net, &lost, r1, &all).0, vec![Some("new".into()); 2]);
}

/// A coordinator that was only slow: its lone cohort's termination had the
/// witness record an abort; when the coordinator then decides to commit,
/// the cohort leaves its COMMIT unacknowledged and the witness answers
/// its request with the abort. It aborts: the client is told, nothing of
/// the transaction is ever visible, and the witness's record is released.
#[test]
fn a_slow_coordinator_yields_to_the_termination_its_witness_recorded() {
    let cfg = Config::default();
    let mut net = TestNet::<Eiger>::new(2, 2, 2, cfg.clone());
    net.also_op_traffic = read_traffic;
    let ks = net.keys_on_distinct_partitions(2);
    let is_vote = |m: &InFlight<Msg>| matches!(m.msg, Msg::YesVote { .. });
    let (coord_key, coord) = wot_started(&mut net, &ks, is_vote);
    let vote = net.queue.remove(net.queue.iter().position(is_vote).expect("the vote"));
    // The coordinator is paused: nothing reaches it, it sends nothing (what
    // is sent to it waits on its links).
    run_paused(&mut net, &[coord], 400);
    assert_eq!(witness_record(&net, &coord_key), Some((Outcome::Aborted, false)));
    net.queue.push(vote);
    for _ in 0..10 {
        settle_all(&mut net);
    }
    assert!(matches!(net.take_result(ALICE), Some(OpResult::Failed(causeway_core::OpError::Aborted(_)))));
    let all: Vec<&Key> = ks.iter().collect();
    for (c, dc) in [(READER, 0), (net.client(1, 0), 1)] {
        assert_eq!(rot_text(&mut net, c, &all), vec![Some("old".into()); 2], "DC{dc}");
        assert!(nothing_pending(&net, dc, &all), "left pending in DC{dc}");
    }
    assert_eq!(witness_record(&net, &coord_key), Some((Outcome::Aborted, true)), "released by the coordinator");
}

/// Two cohorts, a coordinator that was only slow (its votes late): the
/// cohorts terminate — each promised, so it aborts — and a cohort that
/// promised keeps its promise across a restart. The coordinator's late
/// commit is acknowledged by nobody, it learns the abort, and tells the
/// client; nothing is visible, in either DC.
#[test]
fn a_slow_coordinators_commit_is_never_shown_once_its_cohorts_aborted() {
    let cfg = Config::default();
    let mut net = TestNet::<Eiger>::new(2, 3, 2, cfg.clone());
    net.also_op_traffic = read_traffic;
    let ks = net.keys_on_distinct_partitions(3);
    let is_vote = |m: &InFlight<Msg>| matches!(m.msg, Msg::YesVote { .. });
    let (coord_key, coord) = wot_started(&mut net, &ks, is_vote);
    let votes: Vec<InFlight<Msg>> = net.queue.iter().filter(|m| is_vote(m)).cloned().collect();
    net.queue.retain(|m| !is_vote(m));
    let cohort_keys: Vec<&Key> = ks.iter().filter(|k| **k != coord_key).collect();
    let cohorts: Vec<NodeId> = cohort_keys.iter().map(|k| net.server_for(DcId(0), k)).collect();
    // Past the termination time, both cohorts terminate: each asks the
    // other (and the coordinator, which knows nothing yet), which promises.
    net.advance_clocks(cfg.txn_terminate_ms * 1_000);
    net.fire_timers(cohorts[0]);
    net.fire_timers(cohorts[1]);
    net.deliver_while(|m| matches!(m.msg, Msg::TermQuery { .. }) && m.to != Dest::Node(coord));
    for n in &cohorts {
        assert!(net.nodes[n.idx()].server().parts.values().all(|p| p.promised), "promised");
    }
    net.restart(cohorts[1], &cfg);
    assert!(net.nodes[cohorts[1].idx()].server().parts.values().all(|p| p.promised), "promised across the restart");
    // The coordinator hears the votes now, decides, and sends COMMIT.
    net.queue.extend(votes);
    net.deliver_while(|m| is_vote(m) && m.to == Dest::Node(coord));
    let commits = net.deliver_while(|m| matches!(m.msg, Msg::Commit { .. }) && m.from == Dest::Node(coord));
    assert!(commits >= 2, "a COMMIT to each cohort");
    assert!(!net.queue.iter().any(|m| matches!(m.msg, Msg::Ack { .. })), "a promised cohort does not acknowledge");
    settle_all(&mut net);
    assert!(matches!(net.take_result(ALICE), Some(OpResult::Failed(causeway_core::OpError::Aborted(_)))));
    let all: Vec<&Key> = ks.iter().collect();
    for (c, dc) in [(READER, 0), (net.client(1, 0), 1)] {
        assert_eq!(rot_text(&mut net, c, &all), vec![Some("old".into()); 3], "DC{dc}");
        assert!(nothing_pending(&net, dc, &all), "left pending in DC{dc}");
    }
}

/// A cohort whose coordinator is slow terminates, but the other cohort is
/// lost before it answers: the asker has promised nothing, so the COMMIT
/// the coordinator sends once it resumes is still taken, and acknowledged —
/// the transaction commits within the bound instead of waiting for ever on
/// a cohort that will never answer.
#[test]
fn a_terminating_cohort_still_takes_a_slow_coordinators_commit() {
    let cfg = Config::default();
    let mut net = TestNet::<Eiger>::new(1, 3, 2, cfg.clone());
    net.also_op_traffic = read_traffic;
    let ks = net.keys_on_distinct_partitions(3);
    let is_vote = |m: &InFlight<Msg>| matches!(m.msg, Msg::YesVote { .. });
    let (coord_key, coord) = wot_started(&mut net, &ks, is_vote);
    let cohort_keys: Vec<&Key> = ks.iter().filter(|k| **k != coord_key).collect();
    let cohorts: Vec<NodeId> = cohort_keys.iter().map(|k| net.server_for(DcId(0), k)).collect();
    // The second cohort's vote reaches the coordinator; then that cohort
    // is lost for good, and the coordinator pauses past the termination.
    assert!(net.deliver_first(|m| is_vote(m) && m.from == Dest::Node(cohorts[1])));
    let lost = [cohorts[1]];
    net.queue.retain(|m| !touches(m, &lost));
    run_paused(&mut net, &[coord, cohorts[1]], cfg.txn_terminate_ms + 2 * cfg.txn_retry_ms);
    let p = net.nodes[cohorts[0].idx()].server().parts.values().next().expect("pending").clone_state();
    assert_eq!(p, (true, false), "terminating, and promised nothing");
    let took = run_without(&mut net, &lost, 5_000, |net| net.results[ALICE.idx()].is_some());
    assert_eq!(net.take_result(ALICE), Some(OpResult::Wot), "committed");
    assert!(took <= bound_ms(&cfg), "the commit took {took} ms after the coordinator resumed");
    assert_eq!(rot_without(&mut net, &lost, READER, &[&coord_key, cohort_keys[0]]).0, vec![Some("new".into()); 2]);
}

/// The abort path fits the declared bound: a participant's sub-request is
/// lost, and the client is told the transaction aborted within it.
#[test]
fn an_abort_is_answered_within_the_declared_bound() {
    let cfg = Config::default();
    let mut net = TestNet::<Eiger>::new(1, 3, 2, cfg.clone());
    let ks = net.keys_on_distinct_partitions(3);
    let writes: Vec<(&Key, &str)> = ks.iter().map(|k| (k, "new")).collect();
    net.invoke(ALICE, wot(&writes));
    let coord_key = queued_coord_key(&net);
    let lost = net.server_for(DcId(0), ks.iter().find(|k| **k != coord_key).expect("a cohort key"));
    net.queue.retain(|m| !(matches!(m.msg, Msg::WotReq { .. }) && m.to == Dest::Node(lost)));
    let took = run_without(&mut net, &[], 5_000, |net| net.results[ALICE.idx()].is_some());
    assert!(matches!(net.take_result(ALICE), Some(OpResult::Failed(causeway_core::OpError::Aborted(_)))));
    assert!(took >= cfg.txn_abort_ms, "aborted after {took} ms, before `txn_abort_ms`");
    assert!(took <= bound_ms(&cfg), "aborted after {took} ms, beyond the bound {} ms", bound_ms(&cfg));
}

/// A remote DC's coordinator lost after it sent PREPARE: its cohorts, whose
/// keys are pending there, exchange their votes and commit at one more than
/// the largest (their own, the coordinator's from PREPARE, each other's),
/// the time the coordinator would have used — within the bound.
#[test]
fn remote_cohorts_commit_without_their_lost_coordinator() {
    let cfg = Config::default();
    let mut net = TestNet::<Eiger>::new(2, 3, 2, cfg.clone());
    net.also_op_traffic = read_traffic;
    let ks = net.keys_on_distinct_partitions(3);
    let topology = net.topology.clone();
    let remote_vote = move |m: &InFlight<Msg>| {
        matches!(m.msg, Msg::YesVote { .. }) && matches!(m.to, Dest::Node(n) if topology.dc_of(n) == DcId(1))
    };
    let (coord_key, _) = wot_started(&mut net, &ks, &remote_vote);
    assert_eq!(net.take_result(ALICE), Some(OpResult::Wot));
    // The remote cohorts prepared and voted; their votes never reach the
    // remote coordinator, which is lost.
    let r1 = net.server_for(DcId(1), &coord_key);
    let cohort_keys: Vec<&Key> = ks.iter().filter(|k| **k != coord_key).collect();
    for k in &cohort_keys {
        let v = net.latest(net.server_for(DcId(1), k), k);
        assert!(matches!(v.part().map(|p| p.phase), Some(Phase::Prepared { .. })), "prepared in DC1");
    }
    let votes: Vec<u64> = cohort_keys
        .iter()
        .map(|k| match net.latest(net.server_for(DcId(1), k), k).part().map(|p| (p.phase, p.coord_vote)) {
            Some((Phase::Prepared { vote, .. }, Some(coord_vote))) => vote.max(coord_vote),
            other => panic!("not prepared: {other:?}"),
        })
        .collect();
    // A session whose time passed a cohort's vote (a write there after
    // it) reads the pending keys: the second round asks the lost
    // coordinator, and is answered once the cohorts terminate.
    let reader = net.client(1, 0);
    let part = net.topology.partition_of(cohort_keys[0]);
    let later = (0..).map(|i| bytes(&format!("z{i}"))).find(|k| net.topology.partition_of(k) == part).expect("a key");
    put(&mut net, reader, &later, "z");
    let (got, took) = rot_without(&mut net, &[r1], reader, &cohort_keys);
    assert_eq!(got[0], got[1], "all or nothing");
    assert!(took >= cfg.txn_terminate_ms, "the read waited for the termination ({took} ms)");
    assert!(took <= bound_ms(&cfg), "the read took {took} ms, beyond the bound {} ms", bound_ms(&cfg));
    run_without(&mut net, &[r1], 100, |_| false);
    let evts: Vec<u64> =
        cohort_keys.iter().map(|k| net.latest(net.server_for(DcId(1), k), k).evt().expect("committed")).collect();
    assert_eq!(evts, vec![votes.iter().copied().max().expect("two") + 1; 2], "at one more than the largest vote");
    put(&mut net, reader, &later, "z2");
    assert_eq!(rot_without(&mut net, &[r1], reader, &cohort_keys).0, vec![Some("new".into()); 2]);
}

/// The accepting coordinator is lost after both its cohorts applied its
/// COMMIT but before their ACKs reached it: it never told the remote DC.
/// The remote coordinator, holding the transaction's writes that long,
/// asks the accepting DC's participants, learns the commit, and the
/// transaction becomes visible there too.
#[test]
fn a_remote_coordinator_asks_the_accepting_dc_for_an_outcome_its_lost_coordinator_never_sent() {
    let cfg = Config::default();
    let mut net = TestNet::<Eiger>::new(2, 3, 2, cfg.clone());
    net.also_op_traffic = read_traffic;
    let ks = net.keys_on_distinct_partitions(3);
    let (_, coord) = wot_started(&mut net, &ks, |m| matches!(m.msg, Msg::Ack { .. }));
    let lost = [coord];
    net.queue.retain(|m| !touches(m, &lost));
    let all: Vec<&Key> = ks.iter().collect();
    let cohort_keys: Vec<&Key> = all.iter().copied().filter(|k| net.server_for(DcId(0), k) != coord).collect();
    assert!(nothing_pending(&net, 0, &cohort_keys), "the cohorts applied the commit");
    run_without(&mut net, &lost, 2 * bound_ms(&cfg), |_| false);
    let r1 = net.client(1, 0);
    assert_eq!(rot_without(&mut net, &lost, r1, &all).0, vec![Some("new".into()); 3]);
    assert!(nothing_pending(&net, 1, &all), "left pending in DC1");
}

// ------------------------------------------------ column families (§5.2)

fn loc(row: &str, family: &str, column: &str) -> Key {
    causeway_core::column::location_key(row.as_bytes(), family.as_bytes(), column.as_bytes()).expect("a location")
}

fn add(net: &mut TestNet<Eiger>, c: ClientId, k: &Key, delta: i64) {
    assert_eq!(run(net, c, Op::Add { key: k.clone(), delta }), OpResult::Put);
}

fn slice(net: &mut TestNet<Eiger>, c: ClientId, row: &str, family: &str, range: (&str, &str, u32)) -> OpResult {
    let op = Op::Slice {
        row: bytes(row),
        family: bytes(family),
        start: bytes(range.0),
        stop: bytes(range.1),
        count: range.2,
    };
    run(net, c, op)
}

fn cells(r: OpResult) -> Vec<(String, String)> {
    let OpResult::Slice(cs) = r.visible() else { panic!("not a slice") };
    cs.into_iter().map(|(c, v)| (text(Some(c)).unwrap(), text(Some(v)).unwrap())).collect()
}

fn bad_request(r: Option<OpResult>) -> String {
    match r {
        Some(OpResult::Failed(causeway_core::OpError::BadRequest(why))) => why,
        other => panic!("expected BadRequest, got {other:?}"),
    }
}

/// The plain key is the default location of its row: `put k v` and a
/// column read of `k:default:value` see the same value, and every column
/// of a row lives on the row's partition.
#[test]
fn a_plain_key_is_its_rows_default_column_and_a_row_lives_on_one_partition() {
    let mut net = TestNet::<Eiger>::new(1, 4, 1, Config::default());
    put(&mut net, ALICE, &bytes("alice"), "plain");
    assert_eq!(get(&mut net, ALICE, &loc("alice", "default", "value")), Some("plain".into()));
    put(&mut net, ALICE, &loc("alice", "default", "town"), "Rome");
    for k in [loc("alice", "default", "town"), loc("alice", "counters", "likes")] {
        assert_eq!(net.topology.partition_of(&k), net.topology.partition_of(b"alice"));
    }
    assert_eq!(
        cells(slice(&mut net, ALICE, "alice", "default", ("", "", 0))),
        vec![("town".into(), "Rome".into()), ("value".into(), "plain".into())]
    );
}

/// §5.2: a deleted column reads as nothing (the client library strips it)
/// but the reader still depends on the delete: a write it makes next
/// carries a dependency on the tombstone's write.
#[test]
fn a_deleted_column_is_stripped_but_still_a_dependency() {
    let mut net = TestNet::<Eiger>::new(2, 2, 1, Config::default());
    let (alice, bob) = (net.client(0, 0), net.client(1, 0));
    let town = loc("alice", "default", "town");
    put(&mut net, alice, &town, "Rome");
    let tomb = causeway_core::tombstone(7);
    assert_eq!(run(&mut net, alice, Op::Put { key: town.clone(), value: tomb.clone() }), OpResult::Put);
    let tomb_stamp = net.latest(net.server_for(DcId(0), &town), &town).stamp;
    let reader = net.client(0, 0);
    let r = run(&mut net, reader, Op::Get { key: town.clone() });
    assert_eq!(r, OpResult::Get(Some(tomb)), "the raw read is the delete");
    assert_eq!(r.visible(), OpResult::Get(None), "a user sees no value");
    // A slice strips it too, and still depends on it.
    put(&mut net, reader, &loc("alice", "default", "zz"), "z");
    assert_eq!(cells(slice(&mut net, reader, "alice", "default", ("", "", 0))), vec![("zz".into(), "z".into())]);
    net.invoke(reader, Op::Rot { keys: vec![town.clone()] });
    net.deliver_client_traffic();
    net.take_result(reader);
    net.invoke(reader, Op::Put { key: bytes("after"), value: bytes("1") });
    net.deliver_client_traffic();
    assert_eq!(net.take_result(reader), Some(OpResult::Put));
    let deps = net
        .queue
        .iter()
        .find_map(|m| match &m.msg {
            Msg::Replicate(r) if r.key == bytes("after") => Some(r.deps.clone()),
            _ => None,
        })
        .expect("the write is shipped");
    assert!(deps.iter().any(|d| d.key == town && d.stamp == tomb_stamp), "depends on the delete: {deps:?}");
    net.deliver_all();
    assert_eq!(get(&mut net, bob, &town).map(|_| ()), Some(()), "the tombstone replicated");
    assert_eq!(run(&mut net, bob, Op::Get { key: town }).visible(), OpResult::Get(None));
}

/// §3's slice predicate: columns start..=stop in name order, the first
/// `count` with a value; deleted ones are skipped, other families and rows
/// are not included.
#[test]
fn a_slice_returns_a_rows_columns_in_order_within_its_bounds() {
    let mut net = TestNet::<Eiger>::new(1, 3, 1, Config::default());
    for c in ["a", "b", "c", "d", "e"] {
        put(&mut net, ALICE, &loc("alice", "default", c), &c.to_uppercase());
    }
    put(&mut net, ALICE, &loc("alicex", "default", "b"), "other row");
    add(&mut net, ALICE, &loc("alice", "counters", "b"), 3);
    let del = Op::Put { key: loc("alice", "default", "c"), value: causeway_core::tombstone(1) };
    assert_eq!(run(&mut net, ALICE, del), OpResult::Put);
    let got = cells(slice(&mut net, ALICE, "alice", "default", ("b", "e", 2)));
    assert_eq!(got, vec![("b".into(), "B".into()), ("d".into(), "D".into())]);
    let got = cells(slice(&mut net, ALICE, "alice", "default", ("b", "c", 0)));
    assert_eq!(got, vec![("b".into(), "B".into())]);
    let got = cells(slice(&mut net, ALICE, "alice", "default", ("d", "", 0)));
    assert_eq!(got, vec![("d".into(), "D".into()), ("e".into(), "E".into())]);
    assert_eq!(cells(slice(&mut net, ALICE, "alice", "counters", ("", "", 0))), vec![("b".into(), "3".into())]);
    assert_eq!(cells(slice(&mut net, ALICE, "nobody", "default", ("", "", 0))), vec![]);
    // Several columns of one row written at once: one atomic write.
    let w = wot(&[(&loc("bob", "default", "x"), "1"), (&loc("bob", "default", "y"), "2")]);
    assert_eq!(run(&mut net, ALICE, w), OpResult::Wot);
    assert_eq!(cells(slice(&mut net, ALICE, "bob", "default", ("", "", 0))).len(), 2);
}

/// A slice inside the read-only transaction machinery (Fig 5.5): a slice
/// read before a write-only transaction over two of its columns commits
/// sees neither, one after sees both, never one of them.
#[test]
fn a_slice_never_sees_half_a_write_only_transaction() {
    let mut net = TestNet::<Eiger>::new(1, 2, 2, Config::default());
    net.also_op_traffic = read_traffic;
    let (x, y) = (loc("carol", "default", "x"), loc("carol", "default", "y"));
    put(&mut net, ALICE, &x, "0");
    put(&mut net, ALICE, &y, "0");
    net.invoke(ALICE, wot(&[(&x, "1"), (&y, "1")]));
    for _ in 0..50 {
        let got = cells(slice(&mut net, READER, "carol", "default", ("", "", 0)));
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].1, got[1].1, "half a transaction: {got:?}");
        if !net.deliver_first(|m| !matches!(m.to, Dest::Client(c) if c == READER)) {
            break;
        }
    }
    assert_eq!(net.take_result(ALICE), Some(OpResult::Wot));
    assert_eq!(cells(slice(&mut net, READER, "carol", "default", ("", "", 0)))[0].1, "1");
}

/// A counter's state at `node`: its newest applied add (application order).
fn counter_at(net: &TestNet<Eiger>, node: causeway_core::NodeId, k: &Key) -> Counter {
    let versions = net.nodes[node.idx()].store().versions(k);
    let v = versions.iter().filter(|v| v.readable() && v.counter.is_some()).max_by_key(|v| v.arb()).expect("a counter");
    *v.counter.clone().unwrap()
}

/// The sum every DC must reach: adds in both DCs, some concurrent.
fn counter_in(net: &mut TestNet<Eiger>, c: ClientId, k: &Key) -> i64 {
    get(net, c, k).map_or(0, |v| v.parse().expect("a counter reads as a number"))
}

/// §5.2 counters: concurrent adds in every DC commute; once replication
/// drains, every DC reads the sum of every acknowledged add.
#[test]
fn counters_converge_to_the_sum_of_acknowledged_adds_in_every_dc() {
    let mut net = TestNet::<Eiger>::new(3, 2, 1, Config::default());
    let likes = loc("cats", "counters", "likes");
    let mut sum = 0;
    for round in 0..4i64 {
        for dc in 0..3u16 {
            let delta = (round + 1) * 10_i64.pow(u32::from(dc)) * if dc == 2 { -1 } else { 1 };
            let c = net.client(dc, 0);
            add(&mut net, c, &likes, delta);
            sum += delta;
        }
        if round == 1 {
            net.deliver_all();
        }
    }
    // Before replication each DC has only its own adds plus what arrived.
    net.deliver_all();
    settle_all(&mut net);
    for dc in 0..3 {
        let c = net.client(dc, 0);
        assert_eq!(counter_in(&mut net, c, &likes), sum, "DC{dc}");
        let n = net.server_for(DcId(dc), &likes);
        let deps = &counter_at(&net, n, &likes).deps;
        assert!(deps.len() <= 3, "at most one stored dependency per DC: {deps:?}");
    }
}

/// Under a partition each DC keeps serving its own adds (reads see its
/// DC's sum so far); across a crash-restart of a remote server holding
/// pending replicated adds, nothing is lost; after healing every DC reads
/// the sum of all acknowledged adds.
#[test]
fn counters_converge_across_a_partition_and_a_crash_restart() {
    let cfg = Config::default();
    let mut net = TestNet::<Eiger>::new(2, 2, 1, cfg.clone());
    let k = loc("post1", "counters", "retweets");
    let (a, b) = (net.client(0, 0), net.client(1, 0));
    let topology = net.topology.clone();
    let cross = move |m: &InFlight<Msg>| match (m.from, m.to) {
        (Dest::Node(f), Dest::Node(t)) => topology.dc_of(f) != topology.dc_of(t),
        _ => false,
    };
    for i in 1..=5 {
        add(&mut net, a, &k, i);
        add(&mut net, b, &k, 100 * i);
        net.deliver_while(|m| !cross(m));
    }
    assert_eq!(counter_in(&mut net, a, &k), 15, "DC0 alone");
    assert_eq!(counter_in(&mut net, b, &k), 1500, "DC1 alone");
    // Heal towards DC1 only partly: its server gets the adds (pending or
    // applied) and then crashes and restarts from its journal.
    let n1 = net.server_for(DcId(1), &k);
    for _ in 0..3 {
        net.deliver_first(|m| cross(m) && m.to == Dest::Node(n1));
    }
    net.restart(n1, &cfg);
    settle_all(&mut net);
    assert_eq!(counter_in(&mut net, a, &k), 1515);
    assert_eq!(counter_in(&mut net, b, &k), 1515);
    assert!(net.nodes[n1.idx()].store().versions(&k).iter().all(|v| v.committed()), "nothing left pending");
    assert_eq!(counter_at(&net, n1, &k).total, 1515);
}

/// §5.2's example: a reader of a counter depends on the adds it saw (one
/// per DC); Alice reads 7, adds 1: the stored dependencies reduce to
/// Alice's add alone, and a reader of 8 gets only that.
#[test]
fn a_counter_reader_depends_on_its_adds_and_the_stored_deps_reduce() {
    let mut net = TestNet::<Eiger>::new(2, 2, 2, Config::default());
    let k = loc("cats", "counters", "liked_by");
    let (a, b) = (net.client(0, 0), net.client(1, 0));
    add(&mut net, a, &k, 1);
    add(&mut net, a, &k, 2);
    add(&mut net, b, &k, 4);
    net.deliver_all();
    let n0 = net.server_for(DcId(0), &k);
    assert_eq!(counter_at(&net, n0, &k).deps.len(), 2, "one add per DC");
    // Alice reads 7: she depends on both DCs' newest adds.
    assert_eq!(counter_in(&mut net, a, &k), 7);
    add(&mut net, a, &k, 1);
    let sent = net
        .queue
        .iter()
        .find_map(|m| match &m.msg {
            Msg::ReplicateAdd { deps, delta: 1, .. } => Some(deps.clone()),
            _ => None,
        })
        .expect("the add is shipped");
    assert_eq!(sent.len(), 2, "on the DC1 add she read and on DC0's chain: {sent:?}");
    net.deliver_all();
    for dc in 0..2 {
        let n = net.server_for(DcId(dc), &k);
        let c = counter_at(&net, n, &k);
        assert_eq!((c.total, c.deps.len()), (8, 1), "DC{dc}: only Alice's add is stored");
    }
    // Carol (a fresh session in DC1) reads 8 and writes: her write
    // depends on Alice's add only.
    let carol = net.client(1, 1);
    assert_eq!(counter_in(&mut net, carol, &k), 8);
    put(&mut net, carol, &bytes("reply"), "wow");
    let deps = net
        .queue
        .iter()
        .find_map(|m| match &m.msg {
            Msg::Replicate(r) => Some(r.deps.clone()),
            _ => None,
        })
        .expect("shipped");
    assert_eq!(deps.len(), 1);
    assert_eq!(deps[0].key, k);
    assert_eq!(net.topology.dc_of(deps[0].stamp.origin()), DcId(0));
}

/// A replicated add is applied only after its dependencies: a reader in
/// the remote DC that sees the add also sees what it depends on.
#[test]
fn a_replicated_add_waits_for_its_dependencies() {
    let mut net = TestNet::<Eiger>::new(2, 4, 1, Config::default());
    let (a, b) = (net.client(0, 0), net.client(1, 0));
    let post = bytes("post");
    let k = loc("post", "counters", "likes");
    let post2 = (0..100)
        .map(|i| bytes(&format!("p{i}")))
        .find(|p| net.topology.partition_of(p) != net.topology.partition_of(&k))
        .unwrap();
    let _ = post;
    put(&mut net, a, &post2, "hello");
    add(&mut net, a, &k, 1);
    // Deliver the add to DC1 but hold the post's replication.
    let post_server = net.server_for(DcId(0), &post2);
    let held = move |m: &InFlight<Msg>| m.from == Dest::Node(post_server) && matches!(m.msg, Msg::Replicate(_));
    net.deliver_while(|m| !held(m));
    assert_eq!(counter_in(&mut net, b, &k), 0, "the add waits for the post");
    net.deliver_all();
    assert_eq!(counter_in(&mut net, b, &k), 1);
    assert_eq!(get(&mut net, b, &post2), Some("hello".into()));
}

/// Bad input gets a typed error, nothing is applied, and the server keeps
/// serving: an unknown family, a malformed location, an add to a regular
/// column, a put or delete to a counter, a write-only transaction mixing
/// them, one touching a location twice, or too large.
#[test]
fn bad_column_input_is_refused_and_nothing_is_applied() {
    let mut net = TestNet::<Eiger>::new(1, 2, 1, Config::default());
    let ctr = loc("r", "counters", "n");
    let reg = loc("r", "default", "c");
    let unknown = loc("r", "nosuch", "c");
    let mut malformed = ctr.to_vec();
    malformed.truncate(5);
    let malformed = Key::from(malformed);
    for (op, what) in [
        (Op::Put { key: unknown.clone(), value: bytes("v") }, "unknown column family"),
        (Op::Get { key: unknown.clone() }, "unknown column family"),
        (Op::Put { key: malformed.clone(), value: bytes("v") }, "location"),
        (Op::Get { key: malformed.clone() }, "location"),
        (Op::Add { key: reg.clone(), delta: 1 }, "not a counter"),
        (Op::Add { key: bytes("plain"), delta: 1 }, "not a counter"),
        (Op::Put { key: ctr.clone(), value: bytes("5") }, "is a counter"),
        (Op::Put { key: ctr.clone(), value: causeway_core::tombstone(3) }, "is a counter"),
        (wot(&[(&reg, "1"), (&ctr, "1")]), "is a counter"),
        (wot(&[(&reg, "1"), (&reg, "2")]), "once"),
        (
            Op::Slice { row: bytes("r"), family: bytes("nosuch"), start: bytes(""), stop: bytes(""), count: 0 },
            "unknown column family",
        ),
    ] {
        net.invoke(ALICE, op.clone());
        let why = bad_request(net.take_result(ALICE));
        assert!(why.contains(what), "{op:?}: {why}");
        assert!(net.queue.is_empty(), "{op:?}: nothing sent");
    }
    let many: Vec<(Key, causeway_core::Value)> =
        (0..=MAX_WOT_KEYS).map(|i| (loc("r", "default", &format!("c{i}")), bytes("v"))).collect();
    net.invoke(ALICE, Op::Wot { writes: many });
    bad_request(net.take_result(ALICE));
    // Sent straight to the server, past the client library's checks.
    let n = net.server_for(DcId(0), &reg);
    for msg in [
        Msg::AddReq { key: reg.clone(), delta: 1, deps: vec![], floor: 0 },
        Msg::PutReq { key: ctr.clone(), value: bytes("1"), deps: vec![], floor: 0 },
        Msg::PutReq { key: unknown.clone(), value: bytes("1"), deps: vec![], floor: 0 },
    ] {
        net.queue.push(InFlight::new(Dest::Client(ALICE), Dest::Node(n), msg));
        net.deliver_first(|_| true);
        assert!(matches!(net.queue.remove(0).msg, Msg::PutReply { result: Err(_) }));
    }
    // A batch with a key twice, or a good key beside a counter: refused
    // whole, nothing of it applied.
    for writes in [
        vec![(reg.clone(), bytes("1")), (reg.clone(), bytes("2"))],
        vec![(reg.clone(), bytes("1")), (ctr.clone(), bytes("1"))],
    ] {
        let msg = Msg::BatchReq { writes, deps: vec![], floor: 0 };
        net.queue.push(InFlight::new(Dest::Client(ALICE), Dest::Node(n), msg));
        net.deliver_first(|_| true);
        assert!(matches!(net.queue.remove(0).msg, Msg::BatchReply { result: Err(_) }));
    }
    net.queue.push(InFlight::new(
        Dest::Client(ALICE),
        Dest::Node(n),
        Msg::Read { attempt: 1, keys: vec![(0, unknown.clone())], floor: 0 },
    ));
    net.deliver_first(|_| true);
    assert!(matches!(net.queue.remove(0).msg, Msg::Refused { .. }));
    for k in [&reg, &ctr, &unknown] {
        assert!(net.nodes[n.idx()].store().versions(k).is_empty(), "nothing stored");
    }
    // Still serving.
    add(&mut net, ALICE, &ctr, 2);
    put(&mut net, ALICE, &reg, "ok");
    assert_eq!(rot(&mut net, ALICE, &[&ctr, &reg]), vec![Some("2".into()), Some("ok".into())]);
}

/// Families are declared in the config; it must keep `default` regular.
#[test]
fn the_family_list_is_validated() {
    let mut cfg = Config::default();
    assert!(cfg.check().is_ok());
    cfg.families.retain(|f| f.name != "default");
    assert!(cfg.check().unwrap_err().contains("default"));
    let mut cfg = Config::default();
    cfg.families.push(Family { name: "a:b".into(), counter: false });
    assert!(cfg.check().is_err());
    let mut cfg = Config::default();
    cfg.families.push(Family { name: "counters".into(), counter: false });
    assert!(cfg.check().unwrap_err().contains("twice"));
}

/// A first-round answer delivered twice (a one-key `ReadReply`, as each of
/// a two-server ROT's servers sends) counts once: the transaction waits for
/// the other location instead of finishing without it.
#[test]
fn a_repeated_first_round_answer_counts_once() {
    let mut net = TestNet::<Eiger>::new(1, 2, 2, Config::default());
    let (acl, album) = acl_and_album(&net);
    put(&mut net, ALICE, &acl, "friends");
    put(&mut net, ALICE, &album, "personal");
    net.invoke(READER, Op::Rot { keys: vec![acl.clone(), album.clone()] });
    let to_reader = |m: &InFlight<Msg>| m.to == Dest::Client(READER) && matches!(m.msg, Msg::ReadReply { .. });
    // Both requests reach their servers; one answer is copied.
    net.deliver_while(|m| m.from == Dest::Client(READER));
    let first = net.queue.iter().position(to_reader).expect("a one-key first-round answer");
    let copy = net.queue[first].clone();
    net.queue.insert(first + 1, copy);
    let (r, _) = finish(&mut net, READER);
    let OpResult::Rot(vs) = r else { panic!("{r:?}") };
    assert_eq!(vs.into_iter().map(text).collect::<Vec<_>>(), vec![Some("friends".into()), Some("personal".into())]);
}

/// A one-key write-only transaction is a put: no 2PC-PCI message is sent,
/// it completes as a transaction, and it is read like any write.
#[test]
fn a_one_key_write_only_transaction_is_a_put() {
    let mut net = TestNet::<Eiger>::new(1, 2, 2, Config::default());
    let (acl, _) = acl_and_album(&net);
    net.invoke(ALICE, wot(&[(&acl, "friends")]));
    assert!(net.queue.iter().all(|m| matches!(m.msg, Msg::PutReq { .. })), "only a PutReq is sent");
    net.deliver_client_traffic();
    assert_eq!(net.take_result(ALICE), Some(OpResult::Wot));
    assert_eq!(get(&mut net, READER, &acl), Some("friends".into()));
}

/// A non-atomic batch (Lloyd's "normal (2)"): one `BatchReq` per server,
/// all carrying the session's dependencies and none on each other; the
/// session's context afterwards is every write of the batch; the remote DC
/// applies each write as soon as its own dependencies are there, so one
/// write may be visible before the other.
#[test]
fn a_batch_writes_each_key_on_its_own_and_the_session_depends_on_all() {
    let mut net = TestNet::<Eiger>::new(2, 2, 2, Config::default());
    let (acl, album) = acl_and_album(&net);
    put(&mut net, ALICE, &acl, "public");
    let batch = Op::Batch { writes: vec![(acl.clone(), bytes("friends")), (album.clone(), bytes("personal"))] };
    net.invoke(ALICE, batch);
    let reqs: Vec<&Vec<crate::explicit_deps::replication::Dep>> = net
        .queue
        .iter()
        .filter_map(|m| match &m.msg {
            Msg::BatchReq { deps, .. } => Some(deps),
            _ => None,
        })
        .collect();
    assert_eq!(reqs.len(), 2, "one request per server");
    assert!(reqs.iter().all(|d| d.len() == 1 && d[0].key == acl), "each carries the session's one dependency");
    net.deliver_client_traffic();
    assert_eq!(net.take_result(ALICE), Some(OpResult::Put));
    let mut ctx: Vec<Key> = net.clients[ALICE.idx()].deps.keys().map(|(k, _)| k.clone()).collect();
    ctx.sort();
    let mut both = vec![acl.clone(), album.clone()];
    both.sort();
    assert_eq!(ctx, both, "after a batch the context is each of its writes");
    // Bad input: a key twice is refused before anything is sent.
    net.invoke(ALICE, Op::Batch { writes: vec![(acl.clone(), bytes("a")), (acl.clone(), bytes("b"))] });
    assert!(matches!(net.take_result(ALICE), Some(OpResult::Failed(causeway_core::OpError::BadRequest(_)))));
    assert!(net.queue.iter().all(|m| !matches!(m.msg, Msg::BatchReq { .. })));
    // The remote DC: each write is replicated with the session's
    // dependencies only, so neither waits for the other.
    let replicated: Vec<&Vec<crate::explicit_deps::replication::Dep>> = net
        .queue
        .iter()
        .filter_map(|m| match &m.msg {
            Msg::Replicate(r) if r.key == album => Some(&r.deps),
            _ => None,
        })
        .collect();
    assert_eq!(replicated.len(), 1, "album's write is shipped to its one equivalent");
    assert!(replicated.iter().all(|d| d.len() == 1 && d[0].key == acl), "{replicated:?}");
}

// ------------------------------------ several columns of a row (Table 7.5)

/// Column `i` of `row` as the simulator's workload names it: column 0 the
/// plain key, the others `row:default:c<i>`.
fn col(row: &Key, i: usize) -> Key {
    if i == 0 {
        row.clone()
    } else {
        causeway_core::column::location_key(row, b"default", format!("c{i}").as_bytes()).unwrap()
    }
}

/// A non-atomic batch of one row's columns (a write of several columns of
/// a key, Lloyd's Table 7.5 "columns per key"): one request, one
/// replication message per remote DC, and the session's dependencies
/// checked once for the row, not once per column; the remote DC applies
/// every column.
#[test]
fn a_rows_columns_are_replicated_in_one_message_and_checked_once() {
    let mut net = TestNet::<Eiger>::new(2, 2, 2, Config::default());
    let (acl, album) = acl_and_album(&net);
    put(&mut net, ALICE, &acl, "public");
    stabilize_eiger(&mut net);
    let cols: Vec<Key> = (0..3).map(|i| col(&album, i)).collect();
    let writes = cols.iter().enumerate().map(|(i, k)| (k.clone(), bytes(&format!("v{i}")))).collect();
    net.invoke(ALICE, Op::Batch { writes });
    assert_eq!(count(&net, |m| matches!(m, Msg::BatchReq { writes, .. } if writes.len() == 3)), 1, "one request");
    net.deliver_client_traffic();
    assert_eq!(net.take_result(ALICE), Some(OpResult::Put));
    let rows: Vec<usize> = net
        .queue
        .iter()
        .filter_map(|m| match &m.msg {
            Msg::ReplicateRow { writes, deps, .. } => {
                assert!(deps.len() == 1 && deps[0].key == acl, "the batch's dependencies, once: {deps:?}");
                Some(writes.len())
            }
            _ => None,
        })
        .collect();
    assert_eq!(rows, vec![3], "one message carries the row's three columns to the one remote DC");
    assert_eq!(count(&net, |m| matches!(m, Msg::Replicate(_))), 0);
    // At the remote DC: one dep_check for the row (album and acl live on
    // different partitions), not one per column.
    let remote = net.server_for(DcId(1), &album);
    net.deliver_first(|m| m.to == Dest::Node(remote) && matches!(m.msg, Msg::ReplicateRow { .. }));
    let checks = net
        .queue
        .iter()
        .filter(|m| matches!(m.msg, Msg::Path(crate::explicit_deps::replication::PathMsg::DepCheck { .. })))
        .count();
    assert_eq!(checks, 1, "the row's dependencies are checked once");
    stabilize_eiger(&mut net);
    let reader = net.client(1, 0);
    let want: Vec<Option<String>> = (0..3).map(|i| Some(format!("v{i}"))).collect();
    assert_eq!(rot_text(&mut net, reader, &cols.iter().collect::<Vec<_>>()), want);
}

/// A write-only transaction over two rows of two columns each: one
/// `ReplicateTxnRow` per row, and the remote DC makes all four columns
/// visible together.
#[test]
fn a_transactions_rows_ship_in_one_message_each() {
    let mut net = TestNet::<Eiger>::new(2, 2, 2, Config::default());
    let (x, y) = acl_and_album(&net);
    let cols: Vec<Key> = [&x, &y].iter().flat_map(|r| (0..2).map(|i| col(r, i))).collect();
    let writes: Vec<(&Key, &str)> = cols.iter().map(|k| (k, "t1")).collect();
    wot_in_dc0(&mut net, ALICE, wot(&writes), |_| false);
    assert_eq!(count(&net, |m| matches!(m, Msg::ReplicateTxn(_))), 0);
    let rows: Vec<usize> = net
        .queue
        .iter()
        .filter_map(|m| match &m.msg {
            Msg::ReplicateTxnRow { writes, .. } => Some(writes.len()),
            _ => None,
        })
        .collect();
    assert_eq!(rows, vec![2, 2], "one message per row");
    stabilize_eiger(&mut net);
    let reader = net.client(1, 0);
    assert_eq!(rot_text(&mut net, reader, &cols.iter().collect::<Vec<_>>()), vec![Some("t1".into()); 4]);
}

/// A second round over a row's columns (a transaction's write pending at
/// the cohort) is one `ReadsAt` for the row, and the row asks the
/// coordinator once, not once per column.
#[test]
fn a_rows_second_round_is_one_request_and_one_commit_check() {
    let mut net = TestNet::<Eiger>::new(1, 3, 2, Config::default());
    let rows = net.keys_on_distinct_partitions(3);
    let cols: Vec<Key> = rows.iter().flat_map(|r| (0..3).map(|i| col(r, i))).collect();
    let writes0: Vec<(&Key, &str)> = cols.iter().map(|k| (k, "v0")).collect();
    net.run(ALICE, wot(&writes0));
    let writes1: Vec<(&Key, &str)> = cols.iter().map(|k| (k, "v1")).collect();
    net.invoke(ALICE, wot(&writes1));
    // Visible at the coordinator (one cohort's ACK); the other cohort's
    // COMMIT held, so its row is pending there.
    let coord_row = causeway_core::column::row_of(&queued_coord_key(&net)).to_vec();
    let held_row = rows.iter().find(|r| r[..] != coord_row[..]).expect("a cohort row").clone();
    let held = net.server_for(DcId(0), &held_row);
    let is_commit = |m: &InFlight<Msg>| matches!(m.msg, Msg::Commit { .. }) && m.to == Dest::Node(held);
    net.deliver_while(|m| !is_commit(m));
    assert_eq!(net.take_result(ALICE), Some(OpResult::Wot));
    // The coordinator's row (committed there: EffT is past the commit) and
    // the held row.
    let coord_row = Key::from(coord_row);
    let cols: Vec<Key> = [&coord_row, &held_row].iter().flat_map(|r| (0..3).map(|i| col(r, i))).collect();
    net.invoke(READER, Op::Rot { keys: cols.clone() });
    let (mut reads_at, mut read_at, mut checks) = (0, 0, 0);
    loop {
        if let Some(r) = net.take_result(READER) {
            let OpResult::Rot(vs) = r else { panic!("{r:?}") };
            assert_eq!(vs.into_iter().map(text).collect::<Vec<_>>(), vec![Some("v1".into()); 6]);
            break;
        }
        let i = net.queue.iter().position(|m| !is_commit(m)).expect("the read transaction completes");
        match &net.queue[i].msg {
            Msg::ReadsAt { keys, .. } => {
                assert_eq!(keys.len(), 3, "the pending row's three columns");
                reads_at += 1;
            }
            Msg::ReadAt { .. } => read_at += 1,
            Msg::CommitCheck { .. } => checks += 1,
            _ => {}
        }
        let m = net.queue.remove(i);
        net.queue.insert(0, m);
        net.deliver_first(|_| true);
    }
    assert_eq!((reads_at, read_at), (1, 0), "the pending row is read again in one request");
    assert_eq!(checks, 1, "one commit check for the row");
}

fn stabilize_eiger(net: &mut TestNet<Eiger>) {
    crate::kit::testkit::stabilize(net);
}

/// A batch whose rows interleave on one server: each run of a row's
/// consecutive columns is one message, and the messages reach the remote
/// DC in stamp order (the replication path's low-water marks need an
/// origin's writes in order).
#[test]
fn row_messages_keep_an_origins_writes_in_stamp_order() {
    let mut net = TestNet::<Eiger>::new(2, 2, 2, Config::default());
    let (a, b) = {
        let (x, _) = acl_and_album(&net);
        let p = net.topology.partition_of(&x);
        let other = (0..1000).map(|i| bytes(&format!("k{i}"))).find(|k| *k != x && net.topology.partition_of(k) == p);
        (x, other.expect("a second key on the partition"))
    };
    let writes = [col(&a, 1), col(&a, 2), b.clone(), col(&a, 3), col(&b, 1), col(&b, 2)];
    net.invoke(ALICE, Op::Batch { writes: writes.iter().map(|k| (k.clone(), bytes("v"))).collect() });
    net.deliver_client_traffic();
    assert_eq!(net.take_result(ALICE), Some(OpResult::Put));
    let shipped: Vec<(usize, Vec<crate::explicit_deps::replication::Stamp>)> = net
        .queue
        .iter()
        .filter_map(|m| match &m.msg {
            Msg::ReplicateRow { writes, .. } => Some((writes.len(), writes.iter().map(|w| w.2).collect())),
            Msg::Replicate(r) => Some((1, vec![r.stamp])),
            _ => None,
        })
        .collect();
    assert_eq!(shipped.iter().map(|(n, _)| *n).collect::<Vec<_>>(), vec![2, 1, 1, 2], "runs of one row");
    let stamps: Vec<_> = shipped.into_iter().flat_map(|(_, s)| s).collect();
    assert!(stamps.windows(2).all(|w| w[0] < w[1]), "in stamp order: {stamps:?}");
    stabilize_eiger(&mut net);
    let reader = net.client(1, 0);
    assert_eq!(rot_text(&mut net, reader, &writes.iter().collect::<Vec<_>>()), vec![Some("v".into()); 6]);
}

/// A checkpoint copies a key from its current version, marked so that a
/// read before that version's EVT restarts (its predecessors are gone) while
/// a read from it on still returns it; a key with a version still needed
/// below its current one (a pending replicated write) is copied whole.
#[test]
fn a_snapshot_cuts_below_the_current_version_and_marks_it() {
    use super::server::{snapshot_cut, visible_at};
    use crate::explicit_deps::replication::Stamp;
    use causeway_core::Server;
    let net = TestNet::<Eiger>::new(1, 2, 1, Config::default());
    let floor = net.nodes[0].server().snapshot_floor().expect("Eiger cuts its snapshots");
    let node = causeway_core::NodeId(0);
    let committed = |l: u64, evt: u64| {
        Version::new(bytes(&format!("v{l}")), Stamp::new(l, node), State::Committed { evt, at_us: 0 })
    };
    let chain = vec![committed(1, 10), committed(2, 20), committed(3, 30)];
    assert_eq!(snapshot_cut(&chain), 2);
    let kept = floor.kept(&chain);
    assert_eq!(kept.iter().map(|v| v.stamp).collect::<Vec<_>>(), vec![Stamp::new(3, node)]);
    assert!(kept[0].collected_below && !chain[2].collected_below, "the copy is marked, the store's version not");
    assert!(visible_at(&kept, 25).is_err(), "a read before the kept version's EVT restarts");
    assert_eq!(visible_at(&chain, 25).map(|r| text(r.value)), Ok(Some("v2".into())), "the whole chain answers it");
    assert_eq!(visible_at(&kept, 30).map(|r| text(r.value)), Ok(Some("v3".into())));

    // A pending write below the current version: nothing is cut.
    let pending =
        Version::new(bytes("p"), Stamp::new(2, causeway_core::NodeId(1)), State::Pending { deps: Vec::new() });
    let chain = vec![committed(1, 10), pending, committed(3, 30)];
    assert_eq!(snapshot_cut(&chain), 0);
    assert_eq!(floor.kept(&chain).len(), 3);
    assert!(floor.kept(&chain).iter().all(|v| !v.collected_below), "an uncut chain is not marked");
    // Above it, it is copied with the current version.
    let pending =
        Version::new(bytes("p"), Stamp::new(4, causeway_core::NodeId(1)), State::Pending { deps: Vec::new() });
    let chain = vec![committed(1, 10), committed(3, 30), pending];
    assert_eq!(snapshot_cut(&chain), 1);
}
