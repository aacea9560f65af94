//! The acceptance checks of Spirovska et al.'s PaRiS, step by step on the
//! hand-cranked network: non-blocking reads (and BPR's blocking ones), UST
//! safety and monotonicity, commit timestamps, atomic visibility,
//! read-your-writes through the client cache, a DC cut off, convergence
//! and GC.

use super::*;
use crate::kit::testkit::{self, Dest, InFlight, TestNet, bytes, text};
use causeway_core::{ClientId, DcId, Key, NodeId, Op, OpResult, Protocol, Replication, TopologySpec};

mod crash;

const PER_DC: u32 = 2;

/// What an operation needs besides client traffic: its slices, prepares
/// and commits (all inside the op; replication and stabilization are not).
fn op_msgs(m: &Msg) -> bool {
    matches!(
        m,
        Msg::ReadSlice { .. }
            | Msg::SliceReply { .. }
            | Msg::Prepare { .. }
            | Msg::PrepareReply { .. }
            | Msg::Commit { .. }
    )
}

fn net_spec<P: Protocol<Msg = Msg, Config = Config>>(spec: TopologySpec, cfg: Config) -> TestNet<P> {
    let mut n = TestNet::<P>::with_spec(spec, PER_DC, cfg);
    n.also_op_traffic = op_msgs;
    n
}

fn full<P: Protocol<Msg = Msg, Config = Config>>(dcs: u16, partitions: u32) -> TestNet<P> {
    net_spec(TopologySpec::full(dcs, partitions), Config::default())
}

fn partial<P: Protocol<Msg = Msg, Config = Config>>(dcs: u16, partitions: u32) -> TestNet<P> {
    let mut spec = TopologySpec::full(dcs, partitions);
    spec.replication = Replication::Partial { factor: 2 };
    net_spec(spec, Config::default())
}

fn cl(dc: u16, i: u32) -> ClientId {
    ClientId(dc as u32 * PER_DC + i)
}

fn part<P: Protocol<Server = ParisServer>>(net: &TestNet<P>, n: NodeId) -> &Partition {
    net.nodes[n.idx()].server().part.as_ref().expect("a partition server")
}

fn servers<P: Protocol<Server = ParisServer>>(net: &TestNet<P>) -> Vec<NodeId> {
    net.topology.node_ids().filter(|&n| net.nodes[n.idx()].server().part.is_some()).collect()
}

fn client<P: Protocol<Client = ParisClient>>(net: &TestNet<P>, c: ClientId) -> &ParisClient {
    &net.clients[c.idx()]
}

fn put_op(k: &Key, v: &str) -> Op {
    Op::Put { key: k.clone(), value: bytes(v) }
}

fn values(r: OpResult) -> Vec<Option<String>> {
    match r {
        OpResult::Rot(vs) | OpResult::Txn(vs) => vs.into_iter().map(text).collect(),
        OpResult::Get(v) => vec![text(v)],
        other => panic!("expected values, got {other:?}"),
    }
}

/// Only the op's own traffic (client, slices, 2PC), no timers: `None` if
/// it cannot complete so.
fn run_now<P: Protocol<Msg = Msg>>(net: &mut TestNet<P>, c: ClientId, op: Op) -> Option<OpResult> {
    net.invoke(c, op);
    net.deliver_while(|m| testkit::client_traffic(m) || op_msgs(&m.msg));
    net.take_result(c)
}

fn crosses_dcs(topology: &causeway_core::Topology, m: &InFlight<Msg>) -> bool {
    match (m.from, m.to) {
        (Dest::Node(a), Dest::Node(b)) => topology.dc_of(a) != topology.dc_of(b),
        _ => false,
    }
}

/// Rounds of timers and all server traffic but what `held` names (kept
/// queued, as a cut link keeps it), the clocks moving 5 ms a round.
fn rounds<P: Protocol<Msg = Msg>>(net: &mut TestNet<P>, n: usize, held: &dyn Fn(&InFlight<Msg>) -> bool) {
    for _ in 0..n {
        net.advance_clocks(5_000);
        net.fire_all_timers();
        net.deliver_while(|m| testkit::server_to_server(m) && !held(m));
    }
}

/// Run `op` to completion with what `held` names kept queued: `None` if it
/// does not complete within 1 000 rounds of 1 ms.
fn run_holding<P: Protocol<Msg = Msg>>(
    net: &mut TestNet<P>,
    c: ClientId,
    op: Op,
    held: &dyn Fn(&InFlight<Msg>) -> bool,
) -> Option<OpResult> {
    net.invoke(c, op);
    for _ in 0..1_000 {
        net.deliver_while(|m| !held(m));
        if let Some(r) = net.take_result(c) {
            return Some(r);
        }
        net.advance_clocks(1_000);
        net.fire_all_timers();
    }
    None
}

fn min_ust<P: Protocol<Server = ParisServer>>(net: &TestNet<P>) -> u64 {
    servers(net).iter().map(|&n| part(net, n).ust).min().unwrap_or(0)
}

#[test]
fn validate_accepts_partial_replication_and_refuses_bad_settings() {
    assert!(Paris::validate(&Config::default(), &testkit::partial_replication()).is_ok());
    assert!(Bpr::validate(&Config::default(), &testkit::full_replication(2, 2)).is_ok());
    assert!(
        Paris::validate(&Config { apply_interval_us: 0, ..Config::default() }, &testkit::full_replication(2, 2))
            .is_err()
    );
    let mut spec = TopologySpec::full(2, 2);
    spec.replicas_per_partition = 3;
    assert!(Paris::validate(&Config::default(), &causeway_core::Topology::new(spec).unwrap()).is_err());
}

/// Acceptance check 1, and BPR's contrast: with every message between DCs
/// held back for good (an unbounded replication delay), a DC 1 read of a
/// key written in DC 0 completes on its own traffic alone, no timer
/// fired, and never reports waiting; BPR's read at its fresher snapshot
/// cannot, and reports the wait once replication resumes.
#[test]
fn paris_reads_never_block_and_bpr_reads_do() {
    let mut net = full::<Paris>(2, 2);
    let [x, y] = &net.distinct_keys();
    rounds(&mut net, 5, &|_| false);
    assert_eq!(run_now(&mut net, cl(0, 0), put_op(x, "1")), Some(OpResult::Put));
    let topology = net.topology.clone();
    for _ in 0..3 {
        let r = run_now(&mut net, cl(1, 0), Op::Rot { keys: vec![x.clone(), y.clone()] });
        assert_eq!(r.map(values), Some(vec![None, None]), "a stale but immediate snapshot");
        rounds(&mut net, 3, &|m| crosses_dcs(&topology, m));
    }
    net.assert_never_blocked();

    let mut net = full::<Bpr>(2, 2);
    rounds(&mut net, 5, &|_| false);
    assert_eq!(run_now(&mut net, cl(0, 0), put_op(x, "1")), Some(OpResult::Put));
    net.advance_clocks(20_000);
    assert_eq!(run_now(&mut net, cl(1, 0), Op::Get { key: x.clone() }), None, "BPR waits for its snapshot");
    for _ in 0..20 {
        rounds(&mut net, 1, &|_| false);
        net.deliver_while(|m| testkit::client_traffic(m) || op_msgs(&m.msg));
        if let Some(r) = net.take_result(cl(1, 0)) {
            assert_eq!(values(r), vec![Some("1".into())], "BPR's fresher snapshot holds the write");
            assert!(!net.blocked("read_wait").is_empty(), "the wait is reported");
            return;
        }
    }
    panic!("BPR's read never completed");
}

/// Acceptance checks 2–4 on a partially replicated topology (3 DCs, 4
/// partitions, RF 2), under a mixed load of transactions that reach
/// partitions of other DCs: after every step, every node's UST is at or
/// below every version clock and every VV entry of every replica, never
/// decreases, and every version at or below the smallest UST is stored at
/// every replica of its partition; every commit is above the client's
/// previous snapshot and hwt.
#[test]
fn ust_is_safe_and_monotonic_and_commits_exceed_snapshot_and_hwt() {
    for blocking in [false, true] {
        if blocking {
            ust_run::<Bpr>();
        } else {
            ust_run::<Paris>();
        }
    }
}

fn ust_run<P: Protocol<Msg = Msg, Config = Config, Server = ParisServer, Client = ParisClient, Version = Version>>() {
    let mut net = partial::<P>(3, 4);
    let keys = net.keys_on_distinct_partitions(4);
    let ids: Vec<NodeId> = servers(&net);
    let mut last_ust = vec![0; net.topology.nodes()];
    let mut commits = 0;
    for round in 0..60u64 {
        let c = cl((round % 3) as u16, (round / 3 % 2) as u32);
        let (before_ust, before_hwt) = (client(&net, c).ust, client(&net, c).hwt);
        let a = &keys[(round % 4) as usize];
        let b = &keys[((round + 1) % 4) as usize];
        let op = Op::Txn { reads: vec![a.clone(), b.clone()], writes: vec![(b.clone(), bytes(&format!("v{round}")))] };
        let r = net.run(c, op);
        assert!(matches!(r, OpResult::Txn(_)), "{r:?}");
        let hwt = client(&net, c).hwt;
        assert!(hwt > before_hwt && hwt > before_ust, "ct {hwt} not above hwt {before_hwt} and ust {before_ust}");
        assert!(client(&net, c).ust >= before_ust, "ust_c went back");
        commits += 1;
        rounds(&mut net, 1 + (round % 3) as usize, &|_| false);
        let floor = ids.iter().flat_map(|&n| part(&net, n).vv.iter().copied()).min().unwrap();
        for &n in &ids {
            let p = part(&net, n);
            assert!(p.ust <= floor, "node {n:?}: UST {} above a VV entry {floor}", p.ust);
            assert!(p.ust >= last_ust[n.idx()], "node {n:?}: UST went back");
            last_ust[n.idx()] = p.ust;
        }
        let ust = min_ust(&net);
        for &n in &ids {
            for k in net.nodes[n.idx()].store().keys_sorted() {
                for v in net.nodes[n.idx()].store().versions(&k).iter().filter(|v| v.ut <= ust) {
                    for &m in &ids {
                        if net.topology.partition_of(&k) == part(&net, m).partition_id() {
                            assert!(
                                net.nodes[m.idx()].store().exact(&k, causeway_core::Versioned::order(v)).is_some()
                                    || net.nodes[m.idx()].store().was_pruned(&k),
                                "a version at {} ≤ UST {ust} is missing at {m:?}",
                                v.ut
                            );
                        }
                    }
                }
            }
        }
    }
    assert_eq!(commits, 60);
    assert!(min_ust(&net) > 0, "the UST moved");
}

/// Acceptance check 5 (atomic visibility): a transaction writes x and y
/// (two partitions) in DC 0; y's replication to DC 1 is held back. DC 1
/// reads ⟨x, y⟩ as one snapshot again and again: both old or both new,
/// never a mix; both new once y's replication is released.
#[test]
fn no_fractured_reads_while_one_partition_lags() {
    let mut net = full::<Paris>(2, 2);
    let [x, y] = &net.distinct_keys();
    let init = Op::Txn { reads: vec![], writes: vec![(x.clone(), bytes("1")), (y.clone(), bytes("1"))] };
    net.run(cl(0, 0), init);
    rounds(&mut net, 10, &|_| false);
    let txn = Op::Txn { reads: vec![], writes: vec![(x.clone(), bytes("2")), (y.clone(), bytes("2"))] };
    net.run(cl(0, 0), txn);
    let (from, to) = (net.server_for(DcId(0), y), net.server_for(DcId(1), y));
    let held = move |m: &InFlight<Msg>| m.from == Dest::Node(from) && m.to == Dest::Node(to);
    let mut saw = Vec::new();
    let mut pending: Vec<InFlight<Msg>> = Vec::new();
    for _ in 0..20 {
        net.advance_clocks(5_000);
        net.fire_all_timers();
        pending.extend(net.queue.iter().filter(|m| held(m)).cloned());
        net.queue.retain(|m| !held(m));
        net.deliver_while(testkit::server_to_server);
        let r = values(net.run(cl(1, 0), Op::Rot { keys: vec![x.clone(), y.clone()] }));
        assert_eq!(r[0], r[1], "a fractured read: {r:?}");
        saw.push(r[0].clone());
    }
    assert!(saw.iter().all(|v| v.as_deref() == Some("1")), "y lags, so x's new version stays invisible too");
    // Release y's channel (the held messages, in order), then read again.
    for m in pending {
        net.queue.push(m);
    }
    rounds(&mut net, 10, &|_| false);
    let r = values(net.run(cl(1, 0), Op::Rot { keys: vec![x.clone(), y.clone()] }));
    assert_eq!(r, vec![Some("2".into()), Some("2".into())]);
}

/// Acceptance check 5 (read-your-writes) and 6: with DC 1 cut off, the UST
/// freezes; a DC 0 session's transactions keep committing, and it reads
/// its own writes from its cache; another session does not see them. After
/// the heal the UST passes them, the cache drains and the other session
/// reads them. The broken variant that empties the cache loses them.
#[test]
fn cache_gives_read_your_writes_while_ust_is_frozen() {
    assert!(ryw_while_cut(false), "read-your-writes through the cache");
    assert!(!ryw_while_cut(true), "mutant_prune_cache_early loses the session's own write");
}

fn ryw_while_cut(mutant: bool) -> bool {
    let cfg = Config { mutant_prune_cache_early: mutant, ..Config::default() };
    let mut net = net_spec::<Paris>(TopologySpec::full(3, 2), cfg);
    let [x, y] = &net.distinct_keys();
    rounds(&mut net, 10, &|_| false);
    let topology = net.topology.clone();
    let cut = move |m: &InFlight<Msg>| match (m.from, m.to) {
        (Dest::Node(a), Dest::Node(b)) => (topology.dc_of(a) == DcId(1)) != (topology.dc_of(b) == DcId(1)),
        _ => false,
    };
    rounds(&mut net, 4, &cut);
    let frozen = min_ust(&net);
    let (me, other) = (cl(0, 0), cl(0, 1));
    for i in 0..5 {
        let v = format!("{i}");
        let r =
            run_holding(&mut net, me, Op::Txn { reads: vec![y.clone()], writes: vec![(x.clone(), bytes(&v))] }, &cut);
        assert!(matches!(r, Some(OpResult::Txn(_))), "a local transaction commits while DC 1 is away: {r:?}");
        rounds(&mut net, 2, &cut);
        let mine = run_holding(&mut net, me, Op::Get { key: x.clone() }, &cut).map(values);
        if mine != Some(vec![Some(v)]) {
            return false;
        }
        let theirs = run_holding(&mut net, other, Op::Get { key: x.clone() }, &cut).map(values);
        assert_eq!(theirs, Some(vec![None]), "the UST is frozen: others read below it");
    }
    let ids = servers(&net);
    let now: Vec<u64> = ids.iter().map(|&n| part(&net, n).ust).collect();
    assert_eq!(min_ust(&net), frozen, "the UST stays frozen while DC 1 is away: {now:?}");
    assert!(!client(&net, me).cache.is_empty());
    rounds(&mut net, 20, &|_| false);
    assert!(min_ust(&net) > frozen, "the UST resumes after the heal");
    assert_eq!(net.run(other, Op::Get { key: x.clone() }).clone(), OpResult::Get(Some(bytes("4"))));
    net.run(me, Op::Get { key: y.clone() });
    assert!(client(&net, me).cache.is_empty(), "the cache drains");
    true
}

/// Acceptance check 7: concurrent writes of one key in every DC, then
/// quiet: every replica's newest version is the same, and every DC reads it.
#[test]
fn replicas_converge() {
    for spec in [TopologySpec::full(3, 2), {
        let mut s = TopologySpec::full(3, 3);
        s.replication = Replication::Partial { factor: 2 };
        s
    }] {
        let mut net = net_spec::<Paris>(spec, Config::default());
        let x = net.key_on(0);
        for d in 0..3 {
            net.invoke(cl(d, 0), put_op(&x, &format!("from {d}")));
        }
        net.deliver_while(|m| testkit::client_traffic(m) || op_msgs(&m.msg));
        rounds(&mut net, 20, &|_| false);
        let p = net.topology.partition_of(&x);
        let newest: Vec<Version> =
            net.topology.dcs_of(p).iter().map(|&d| net.latest(net.topology.server(d, p).unwrap(), &x)).collect();
        assert!(newest.windows(2).all(|w| w[0] == w[1]), "{newest:?}");
        let want = text(Some(newest[0].value.clone()));
        for d in 0..3 {
            assert_eq!(values(net.run(cl(d, 1), Op::Get { key: x.clone() })), vec![want.clone()], "DC {d}");
        }
    }
}

/// Acceptance check 8: a key written over and over keeps only a few
/// versions once the UST passes them, and every DC still reads the
/// freshest version under its snapshot.
#[test]
fn gc_keeps_what_snapshots_read_and_drops_the_rest() {
    let mut net = full::<Paris>(2, 1);
    let x = net.key_on(0);
    for i in 0..30 {
        net.run(cl(0, 0), put_op(&x, &format!("{i}")));
        rounds(&mut net, 2, &|_| false);
    }
    rounds(&mut net, 10, &|_| false);
    for d in 0..2 {
        let s = net.server_for(DcId(d), &x);
        let kept = net.nodes[s.idx()].store().versions(&x).len();
        assert!(kept <= 4, "DC {d} keeps {kept} versions");
        assert_eq!(values(net.run(cl(d, 1), Op::Get { key: x.clone() })), vec![Some("29".to_string())]);
    }
}

/// Deviation 11: an interactive transaction's rounds all read its START
/// snapshot, even after another session's writes of the same keys became
/// visible in between; its commit is atomic and newer than what it read.
/// In PaRiS and in BPR.
#[test]
fn an_interactive_transaction_reads_one_snapshot_across_rounds() {
    interactive_run::<Paris>();
    interactive_run::<Bpr>();
}

fn interactive_run<
    P: Protocol<Msg = Msg, Config = Config, Server = ParisServer, Client = ParisClient, Version = Version>,
>() {
    let mut net = full::<P>(2, 2);
    let [x, y] = &net.distinct_keys();
    let both = |v: &str| vec![(x.clone(), bytes(v)), (y.clone(), bytes(v))];
    net.run(cl(1, 0), Op::Txn { reads: vec![], writes: both("1") });
    rounds(&mut net, 10, &|_| false);
    let (me, other) = (cl(0, 0), cl(0, 1));
    assert_eq!(net.run(me, Op::Begin), OpResult::Done);
    assert_eq!(values(net.run(me, Op::TxRead { keys: vec![x.clone()] })), vec![Some("1".to_string())]);
    net.run(other, Op::Txn { reads: vec![], writes: both("2") });
    rounds(&mut net, 10, &|_| false);
    assert_eq!(values(net.run(other, Op::Rot { keys: vec![x.clone(), y.clone()] })), vec![Some("2".to_string()); 2]);
    assert_eq!(
        values(net.run(me, Op::TxRead { keys: vec![y.clone()] })),
        vec![Some("1".to_string())],
        "the second round reads the START snapshot, not the newer visible one"
    );
    assert_eq!(net.run(me, Op::Commit { writes: both("3") }), OpResult::Done);
    rounds(&mut net, 10, &|_| false);
    for d in 0..2 {
        let r = values(net.run(cl(d, 1), Op::Rot { keys: vec![x.clone(), y.clone()] }));
        assert_eq!(r, vec![Some("3".to_string()); 2], "DC {d}: the commit is atomic and newest");
    }
    // A read-only transaction commits with nothing to write.
    net.run(me, Op::Begin);
    net.run(me, Op::TxRead { keys: vec![x.clone()] });
    assert_eq!(net.run(me, Op::Commit { writes: vec![] }), OpResult::Done);
}

/// A step out of place is refused with a typed error naming why, and the
/// session goes on.
#[test]
fn interactive_steps_out_of_place_are_refused() {
    let mut net = full::<Paris>(2, 2);
    let x = net.key_on(0);
    let bad = |r: OpResult| matches!(r, OpResult::Failed(causeway_core::OpError::BadRequest(_)));
    assert!(bad(net.run(cl(0, 0), Op::TxRead { keys: vec![x.clone()] })), "no transaction is open");
    assert!(bad(net.run(cl(0, 0), Op::Commit { writes: vec![] })));
    net.run(cl(0, 0), Op::Begin);
    assert!(bad(net.run(cl(0, 0), Op::Begin)), "one transaction at a time");
    assert!(bad(net.run(cl(0, 0), Op::Get { key: x.clone() })), "no plain operation inside one");
    assert_eq!(net.run(cl(0, 0), Op::Abort), OpResult::Done);
    assert_eq!(net.run(cl(0, 0), Op::Get { key: x.clone() }), OpResult::Get(None));
}

/// An open transaction's snapshot holds back the GC horizon S_old while it
/// is open; once its client has been silent past the idle timeout the
/// coordinator drops it, its next step is refused as aborted, and S_old
/// moves past its snapshot.
#[test]
fn an_idle_transaction_is_dropped_and_stops_pinning_gc() {
    let cfg = Config { txn_idle_timeout_us: 100_000, ..Config::default() };
    let mut net = net_spec::<Paris>(TopologySpec::full(2, 2), cfg);
    let x = net.key_on(0);
    rounds(&mut net, 10, &|_| false);
    net.run(cl(0, 0), Op::Begin);
    let snapshot = client(&net, cl(0, 0)).ust;
    for i in 0..8 {
        net.run(cl(1, 0), put_op(&x, &format!("{i}")));
        rounds(&mut net, 2, &|_| false);
        let s_old = servers(&net).iter().map(|&n| part(&net, n).s_old).max().unwrap();
        assert!(s_old <= snapshot, "S_old {s_old} passed an open snapshot {snapshot}");
    }
    rounds(&mut net, 20, &|_| false);
    let r = net.run(cl(0, 0), Op::TxRead { keys: vec![x.clone()] });
    assert!(matches!(r, OpResult::Failed(causeway_core::OpError::Aborted(_))), "{r:?}");
    rounds(&mut net, 10, &|_| false);
    let s_old = servers(&net).iter().map(|&n| part(&net, n).s_old).min().unwrap();
    assert!(s_old > snapshot, "S_old {s_old} stays at the dropped snapshot {snapshot}");
}
