use super::*;
use crate::explicit_deps::replication::{Dep, Stamp};
use crate::kit::testkit::{Dest, InFlight, TestNet, bytes, client_traffic, put, rot, text};
use causeway_core::DcId;
use causeway_core::{ClientCtx, ClientId, Key, NodeId, Op, OpError, OpResult, Protocol, Topology};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const ALICE: ClientId = ClientId(0);
const READER: ClientId = ClientId(1);

/// Two keys of one DC on different partitions.
fn acl_and_album(net: &TestNet<CopsGt>) -> (Key, Key) {
    for i in 0..100 {
        let (a, b) = (bytes(&format!("acl{i}")), bytes(&format!("album{i}")));
        if net.topology.partition_of(&a) != net.topology.partition_of(&b) {
            return (a, b);
        }
    }
    unreachable!()
}

fn second_round_reads(net: &TestNet<CopsGt>) -> usize {
    net.queue.iter().filter(|m| matches!(m.msg, Msg::ReadAt { .. })).count()
}

/// The ACL/album race of §2.9, forced step by step in one DC: the
/// reader's `read_trans` reads the ACL (public); then Alice makes the ACL
/// friends-only and posts to the album; then the reader's read of the
/// album arrives and returns the new post. The first round alone gives
/// ⟨public ACL, personal album⟩; the album's dependency list names the
/// new ACL, so a second round fetches it. Returns the ROT's values and
/// how many second-round reads it sent.
fn acl_race(cfg: Config) -> (Vec<Option<String>>, usize) {
    let mut net = TestNet::<CopsGt>::new(1, 2, 2, cfg);
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
    let mut second_round = 0;
    loop {
        if let Some(r) = net.take_result(READER) {
            let OpResult::Rot(vs) = r else { panic!("ROT returned {r:?}") };
            return (vs.into_iter().map(text).collect(), second_round);
        }
        let before = second_round_reads(&net);
        assert!(net.deliver_first(client_traffic), "the ROT must complete");
        second_round += second_round_reads(&net).saturating_sub(before);
    }
}

#[test]
fn read_trans_never_returns_the_public_acl_with_the_personal_album() {
    let (got, second_round) = acl_race(Config::default());
    assert_eq!(got, vec![Some("friends".into()), Some("personal".into())]);
    assert_eq!(second_round, 1, "exactly the ACL is read again, by explicit version");
}

/// The same race catches a `read_trans` without its second round.
#[test]
fn a_one_round_read_trans_returns_the_anomaly() {
    let (got, second_round) = acl_race(Config { mutant_one_round_rot: true, ..Config::default() });
    assert_eq!(got, vec![Some("public".into()), Some("personal".into())]);
    assert_eq!(second_round, 0);
}

/// §6.1: a transaction that outlives `trans_time` restarts, and a
/// second-round read of a version collected meanwhile is refused, not
/// answered with something else. The ACL race again, but Alice then
/// closes the ACL, and the reader's second round (for the friends-only
/// ACL) arrives after `trans_time`, when that version is collected.
#[test]
fn a_read_trans_that_outlives_trans_time_restarts() {
    let cfg = Config { trans_time_ms: 50, clock_margin_ms: 0, gc_interval_ms: 10, ..Config::default() };
    let mut net = TestNet::<CopsGt>::new(1, 2, 2, cfg);
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
    // The album read: round one ends, and the second round asks for the
    // friends-only ACL by version. Hold it; let trans_time pass and the
    // ACL server collect the overwritten version.
    let second = move |m: &InFlight<Msg>| m.from == Dest::Client(READER) && matches!(m.msg, Msg::ReadAt { .. });
    net.deliver_while(|m| client_traffic(m) && !second(m));
    assert_eq!(second_round_reads(&net), 1);
    net.advance_clocks(200_000);
    net.fire_timers(acl_server);
    assert_eq!(net.nodes[acl_server.idx()].store().versions(&acl).len(), 1, "friends-only ACL collected");
    net.deliver_while(client_traffic);
    assert_eq!(net.take_result(READER), None, "the restart waits out its back-off (deviation 7)");
    net.fire_client_timers(READER);
    net.deliver_while(client_traffic);
    let r = net.take_result(READER).expect("the restarted transaction completes");
    let OpResult::Rot(vs) = r else { panic!("{r:?}") };
    let got: Vec<Option<String>> = vs.into_iter().map(text).collect();
    assert_eq!(got, vec![Some("closed".into()), Some("personal".into())]);
}

/// Deviation 8: a fresh checkpoint drops a dependency from a write's list
/// at once, and `read_trans` makes up for it with the write's cut. The
/// reader's transaction reads x (x0); Alice writes x1, the checkpoint
/// passes it and both servers learn so; Alice writes y1, whose list leaves
/// x1 out; the transaction's read of y returns y1. Its first round alone,
/// and its `ccv` alone, give ⟨x0, y1⟩; the cut names x1's time, so x is
/// read again below it. Returns the values and the second round's `below`s.
fn cut_race(cfg: Config) -> (Vec<Option<String>>, Vec<u64>) {
    let mut net = TestNet::<CopsGt>::new(1, 2, 2, cfg);
    let (x, y) = acl_and_album(&net);
    put(&mut net, ALICE, &x, "x0");
    let y_server = net.server_for(DcId(0), &y);
    net.invoke(READER, Op::Rot { keys: vec![x.clone(), y.clone()] });
    let held = move |m: &InFlight<Msg>| m.from == Dest::Client(READER) && m.to == Dest::Node(y_server);
    net.deliver_while(|m| client_traffic(m) && !held(m));
    let alice_puts = |net: &mut TestNet<CopsGt>, k: &Key, v: &str| {
        net.invoke(ALICE, Op::Put { key: k.clone(), value: bytes(v) });
        net.deliver_while(|m| client_traffic(m) && !held(m));
        assert_eq!(net.take_result(ALICE), Some(OpResult::Put));
    };
    alice_puts(&mut net, &x, "x1");
    crate::kit::testkit::stabilize_holding(&mut net, &held);
    alice_puts(&mut net, &y, "y1");
    let y1 = net.latest(y_server, &y);
    assert!(y1.cut > 0 && y1.deps.iter().all(|d| d.key != x), "x1 left out of y1's list: {y1:?}");
    let mut belows = Vec::new();
    loop {
        if let Some(r) = net.take_result(READER) {
            let OpResult::Rot(vs) = r else { panic!("ROT returned {r:?}") };
            return (vs.into_iter().map(text).collect(), belows);
        }
        for m in net.queue.iter() {
            if let Msg::ReadAt { below, .. } = m.msg {
                belows.push(below);
            }
        }
        assert!(net.deliver_first(client_traffic), "the ROT must complete");
    }
}

#[test]
fn a_read_trans_reads_again_below_a_write_s_cut() {
    let (got, belows) = cut_race(Config::default());
    assert_eq!(got, vec![Some("x1".into()), Some("y1".into())]);
    assert_eq!(belows.len(), 1, "x alone is read again: {belows:?}");
    assert!(belows[0] > 0, "by the cut, not by a version in a list: {belows:?}");
    // Without a second round the same race returns the anomaly: the test
    // sees what the cut is for.
    let (got, belows) = cut_race(Config { mutant_one_round_rot: true, ..Config::default() });
    assert_eq!(got, vec![Some("x0".into()), Some("y1".into())]);
    assert!(belows.is_empty());
}

/// One DC of one node, its checkpoint fresh or the paper's, and `n` keys.
fn one_node(fresh: bool, clients: u32, n: u32) -> (TestNet<CopsGt>, Vec<Key>) {
    let net = TestNet::<CopsGt>::new(1, 1, clients, Config { fresh_checkpoint: fresh, ..Config::default() });
    (net, (0..n).map(|i| bytes(&format!("k{i}"))).collect())
}

/// Deviation 8 keeps a write-heavy session's lists short: on one node the
/// checkpoint is the clock, so each write leaves out what came before it;
/// with the paper's checkpoint (`trans_time` old) every earlier write stays.
#[test]
fn a_fresh_checkpoint_keeps_dependency_lists_short() {
    for (fresh, want) in [(true, 0), (false, 20)] {
        let (mut net, keys) = one_node(fresh, 1, 21);
        for k in &keys {
            put(&mut net, ALICE, k, "v");
            net.advance_clocks(10_000);
            net.fire_all_timers();
        }
        let last = net.latest(NodeId(0), &keys[20]);
        assert_eq!(last.deps.len(), want, "fresh {fresh}");
    }
}

/// Deviation 8: a session learns the checkpoint from its reads too, and
/// keeps nothing below it in its context; the paper's session keeps every
/// version it read until its next write.
#[test]
fn a_session_keeps_no_version_below_the_checkpoint_in_its_context() {
    for (fresh, want) in [(true, 0), (false, 30)] {
        let (mut net, keys) = one_node(fresh, 2, 30);
        for k in &keys {
            put(&mut net, ALICE, k, "v");
        }
        for k in &keys {
            assert_eq!(crate::kit::testkit::get(&mut net, READER, k), Some("v".into()));
        }
        assert_eq!(net.clients[READER.idx()].heads.len(), want, "fresh {fresh}");
    }
}

/// Deviation 9: an overwritten version is kept for `trans_time` only while
/// a transaction may ask for it, i.e. after this server served the first
/// round of a `read_trans` of several keys; plain reads do not count.
#[test]
fn overwritten_versions_are_kept_only_after_a_transaction_read_here() {
    let mut net = TestNet::<CopsGt>::new(1, 2, 2, Config::default());
    let (x, y) = acl_and_album(&net);
    let xs = net.server_for(DcId(0), &x);
    put(&mut net, ALICE, &x, "x0");
    put(&mut net, ALICE, &y, "y0");
    assert_eq!(crate::kit::testkit::get(&mut net, READER, &x), Some("x0".into()));
    put(&mut net, ALICE, &x, "x1");
    assert_eq!(net.nodes[xs.idx()].store().versions(&x).len(), 1, "no transaction: x0 collected at once");
    assert_eq!(rot(&mut net, READER, &[&x, &y]), vec![Some("x1".into()), Some("y0".into())]);
    put(&mut net, ALICE, &x, "x2");
    assert_eq!(net.nodes[xs.idx()].store().versions(&x).len(), 2, "a transaction read here: x1 kept");
    net.advance_clocks(Config::default().hold_us() + 1);
    net.fire_timers(xs);
    assert_eq!(net.nodes[xs.idx()].store().versions(&x).len(), 1, "collected after trans_time");
    put(&mut net, ALICE, &x, "x3");
    assert_eq!(net.nodes[xs.idx()].store().versions(&x).len(), 1, "the transaction is long over");
}

/// No write concurrent with the transaction: one round only.
#[test]
fn a_quiet_read_trans_takes_one_round() {
    let mut net = TestNet::<CopsGt>::new(1, 2, 2, Config::default());
    let (acl, album) = acl_and_album(&net);
    put(&mut net, ALICE, &acl, "friends");
    put(&mut net, ALICE, &album, "personal");
    net.invoke(READER, Op::Rot { keys: vec![acl.clone(), album.clone()] });
    let mut second_round = 0;
    while net.take_result(READER).is_none() {
        assert!(net.deliver_first(client_traffic));
        second_round += second_round_reads(&net);
    }
    assert_eq!(second_round, 0);
    assert_eq!(rot(&mut net, READER, &[&acl, &album]), vec![Some("friends".into()), Some("personal".into())]);
}

/// A write's dependencies are the whole context; its nearest are the
/// heads nothing else in the context depends on (Fig 4.2: after w1 read
/// and w3 written, w3 is nearest and w1 is covered by it).
#[test]
fn nearest_dependencies_exclude_what_another_dependency_covers() {
    let mut net = TestNet::<CopsGt>::new(1, 2, 2, Config::default());
    let (x, y) = acl_and_album(&net);
    put(&mut net, ALICE, &x, "w1");
    // The reader reads x (w1), then writes y (w3): w3 depends on w1.
    assert_eq!(crate::kit::testkit::get(&mut net, READER, &x), Some("w1".into()));
    put(&mut net, READER, &y, "w3");
    // Alice reads y (w3, whose stored deps name w1) and x (w1).
    crate::kit::testkit::get(&mut net, ALICE, &y);
    crate::kit::testkit::get(&mut net, ALICE, &x);
    let client = &net.clients[ALICE.idx()];
    let (deps, nearest) = client.write_deps();
    let names: Vec<&[u8]> = deps.iter().map(|d| &d.key[..]).collect();
    assert!(names.contains(&&x[..]) && names.contains(&&y[..]), "{deps:?}");
    let nearest: Vec<&[u8]> = nearest.iter().map(|&i| &deps[i as usize].key[..]).collect();
    assert_eq!(nearest, vec![&y[..]], "x is covered by y's dependency list");
}

/// `write_deps` against a direct computation from the definition, on
/// random contexts.
#[test]
fn write_deps_match_the_definition() {
    use rand::{Rng, SeedableRng};
    for seed in 0..200u64 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let topology = Arc::new(Topology::new(causeway_core::TopologySpec::full(2, 2)).unwrap());
        let ctx = ClientCtx { id: ClientId(0), dc: DcId(0), nonce: 0, topology };
        let mut c = CopsGt::client(&Config::default(), ctx);
        c.checkpoint = rng.random_range(0..3);
        let key = |i: u32| bytes(&format!("k{i}"));
        let stamp =
            |rng: &mut rand_chacha::ChaCha8Rng| Stamp::new(rng.random_range(1..6), NodeId(rng.random_range(0..2)));
        for _ in 0..rng.random_range(0..5) {
            let mut deps: Vec<Dep> = (0..rng.random_range(0..6))
                .map(|_| Dep { key: key(rng.random_range(0..4)), stamp: stamp(&mut rng) })
                .collect();
            deps.sort_by(|a, b| {
                (&a.key, a.stamp.origin()).cmp(&(&b.key, b.stamp.origin())).then(a.stamp.cmp(&b.stamp))
            });
            deps.dedup_by(|b, a| a.key == b.key && a.stamp.origin() == b.stamp.origin()); // keeps the older: fine for a test
            let s = stamp(&mut rng);
            c.heads.insert((key(rng.random_range(0..4)), s.origin()), (s, deps.into()));
        }
        // The definition.
        let cp = c.checkpoint;
        let mut want: BTreeMap<(Key, NodeId), Stamp> = BTreeMap::new();
        let mut covered: BTreeMap<(Key, NodeId), Stamp> = BTreeMap::new();
        for (_, (_, ds)) in c.heads.iter() {
            for d in ds.iter().filter(|d| d.stamp.lamport() >= cp) {
                let e = covered.entry((d.key.clone(), d.stamp.origin())).or_default();
                *e = (*e).max(d.stamp);
            }
        }
        for (slot, &s) in &covered {
            want.insert(slot.clone(), s);
        }
        let mut want_nearest = BTreeSet::new();
        for ((k, o), (s, _)) in &c.heads {
            if s.lamport() < cp {
                continue;
            }
            let e = want.entry((k.clone(), *o)).or_default();
            *e = (*e).max(*s);
            if covered.get(&(k.clone(), *o)).is_none_or(|c| c < s) {
                want_nearest.insert((k.clone(), *s));
            }
        }
        let (deps, nearest) = c.write_deps();
        let got: BTreeMap<(Key, NodeId), Stamp> =
            deps.iter().map(|d| ((d.key.clone(), d.stamp.origin()), d.stamp)).collect();
        assert_eq!(got.len(), deps.len(), "seed {seed}: one entry per key and origin");
        assert_eq!(got, want, "seed {seed}");
        let got_nearest: BTreeSet<(Key, Stamp)> =
            nearest.iter().map(|&i| (deps[i as usize].key.clone(), deps[i as usize].stamp)).collect();
        assert_eq!(got_nearest, want_nearest, "seed {seed}");
    }
}

/// A `trans_time` no read round fits in is refused, with an error naming the
/// field: every `read_trans` could outlive it and restart until it gives up.
#[test]
fn validate_refuses_a_trans_time_shorter_than_a_read_round() {
    let topology = Topology::new(causeway_core::TopologySpec::full(2, 2)).expect("topology");
    for ms in [1, MIN_TRANS_TIME_MS - 1] {
        let cfg = Config { trans_time_ms: ms, ..Config::default() };
        assert_eq!(cfg.check(), Err(ConfigError::TooSmall { field: "trans_time_ms", min: MIN_TRANS_TIME_MS, got: ms }));
        let err = CopsGt::validate(&cfg, &topology).expect_err("refused");
        assert!(err.contains("trans_time_ms"), "{err}");
    }
    let cfg = Config { trans_time_ms: MIN_TRANS_TIME_MS, ..Config::default() };
    assert_eq!(CopsGt::validate(&cfg, &topology), Ok(()));
}

/// Run the reader's `read_trans` with every reply delayed by `round_us`
/// (the DC's read round) on every attempt for which `slow(attempt)`; client
/// timers (back-offs) fire between rounds. Returns the result and the
/// number of attempts, or `None` if it did not complete in 1 000 steps.
fn read_trans_with_slow_rounds(slow: impl Fn(usize) -> bool, round_us: u64) -> Option<(OpResult, usize)> {
    let cfg = Config { trans_time_ms: MIN_TRANS_TIME_MS, clock_margin_ms: 0, ..Config::default() };
    let mut net = TestNet::<CopsGt>::new(1, 2, 2, cfg);
    let (acl, album) = acl_and_album(&net);
    put(&mut net, ALICE, &acl, "friends");
    put(&mut net, ALICE, &album, "personal");
    net.invoke(READER, Op::Rot { keys: vec![acl.clone(), album.clone()] });
    let mut attempts = 0;
    for _ in 0..1_000 {
        // The reads of one attempt reach the servers; the replies take a round.
        if net.deliver_while(|m| m.from == Dest::Client(READER)) > 0 {
            attempts += 1;
            if slow(attempts) {
                net.advance_clocks(round_us);
            }
        }
        // Only the replies: reads they trigger wait for the next step.
        net.deliver_while(|m| m.to == Dest::Client(READER));
        if let Some(r) = net.take_result(READER) {
            return Some((r, attempts));
        }
        net.advance_clocks(1_000);
        net.fire_client_timers(READER);
    }
    None
}

/// A `read_trans` that keeps outliving `trans_time` ends: when every read
/// round does (here a DC whose rounds take 3×), `read_trans` restarted at
/// once, forever. Now
/// it backs off and, after [`MAX_READ_TRANS_RESTARTS`], ends with a typed
/// failure that names the cause.
#[test]
fn a_read_trans_slower_than_trans_time_ends_instead_of_restarting_forever() {
    let round_us = 3 * MIN_TRANS_TIME_MS * 1_000;
    let (r, attempts) = read_trans_with_slow_rounds(|_| true, round_us).expect("the read_trans ends");
    assert!(matches!(&r, OpResult::Failed(OpError::Aborted(why)) if why.contains("trans_time_ms")), "{r:?}");
    assert_eq!(attempts, MAX_READ_TRANS_RESTARTS as usize + 1);
}

/// A transient slowdown (the first two attempts' rounds outlive
/// `trans_time`) costs restarts with back-off, then the transaction
/// completes with its values.
#[test]
fn a_read_trans_restarted_by_a_transient_slowdown_completes() {
    let round_us = 3 * MIN_TRANS_TIME_MS * 1_000;
    let (r, attempts) = read_trans_with_slow_rounds(|a| a <= 2, round_us).expect("the read_trans ends");
    let OpResult::Rot(vs) = r else { panic!("{r:?}") };
    assert_eq!(vs.into_iter().map(text).collect::<Vec<_>>(), vec![Some("friends".into()), Some("personal".into())]);
    assert_eq!(attempts, 3);
}

#[test]
fn backoff_doubles_up_to_trans_time() {
    assert_eq!(backoff_us(1, 50_000), READ_TRANS_BACKOFF_US);
    assert_eq!(backoff_us(2, 50_000), 2 * READ_TRANS_BACKOFF_US);
    assert_eq!(backoff_us(10, 50_000), 50_000);
    assert_eq!(backoff_us(u32::MAX, 50_000), 50_000);
}
