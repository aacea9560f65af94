//! Crash and restart of PaRiS and BPR nodes in the middle of a commit
//! (deviation 10): a cohort's prepare outlives its crash, a coordinator's
//! decision outlives its crash, and a transaction whose coordinator
//! crashed before deciding is aborted at every cohort, which frees the
//! version clocks and so the UST.

use super::*;
use crate::kit::testkit::channel;

type P3 = (NodeId, NodeId, NodeId);

fn is_prepare(m: &InFlight<Msg>) -> bool {
    matches!(m.msg, Msg::Prepare { .. })
}

fn is_commit(m: &InFlight<Msg>) -> bool {
    matches!(m.msg, Msg::Commit { .. })
}

fn from_client(m: &InFlight<Msg>) -> bool {
    matches!(m.from, Dest::Client(_))
}

fn writes(keys: &[&Key], v: &str) -> Op {
    Op::Txn { reads: vec![], writes: keys.iter().map(|&k| (k.clone(), bytes(v))).collect() }
}

/// The servers in DC 0 of each key, the first the coordinator of a
/// transaction that writes them in this order from a DC 0 session.
fn dc0_servers<Q: Protocol<Msg = Msg>>(net: &TestNet<Q>, [x, y, z]: [&Key; 3]) -> P3 {
    (net.server_for(DcId(0), x), net.server_for(DcId(0), y), net.server_for(DcId(0), z))
}

/// Every prepared proposal in the cluster.
fn proposals<Q: Protocol<Server = ParisServer>>(net: &TestNet<Q>) -> Vec<Ts> {
    servers(net).iter().flat_map(|&n| part(net, n).prepared.values().map(|p| p.d.pt)).collect()
}

/// Whether any server stores a version of `k` with value `v`.
fn stored_anywhere<Q: Protocol<Server = ParisServer, Version = Version>>(net: &TestNet<Q>, k: &Key, v: &str) -> bool {
    servers(net).iter().any(|&n| net.nodes[n.idx()].store().versions(k).iter().any(|x| x.value == bytes(v)))
}

/// Both DCs read `keys` as `v`, once the UST has passed them: within
/// 1.5 s of clock, since a restarted partition's HLC comes back at its
/// synced ceiling, up to 100 ms ahead, and so do the commit times it
/// coordinates (the UST reaches them as the clocks do).
fn every_dc_reads<Q: Protocol<Msg = Msg, Client = ParisClient>>(net: &mut TestNet<Q>, keys: &[&Key], v: &str) {
    let want = vec![Some(v.to_string()); keys.len()];
    let rot = || Op::Rot { keys: keys.iter().map(|&k| k.clone()).collect() };
    for round in 0.. {
        rounds(net, 10, &|_| false);
        let r: Vec<_> = (0..2).map(|d| values(net.run(cl(d, 1), rot()))).collect();
        if r.iter().all(|r| *r == want) {
            return;
        }
        assert!(round < 30, "{}: the DCs read {r:?}, not the commit", Q::NAME);
    }
}

/// Two DCs of two partitions, settled; a client of DC 0 writes `x` and `y`
/// (on different partitions) as one transaction, and every PREPARE is
/// answered, so the coordinator has decided and its COMMITs are queued.
fn prepared_everywhere<Q: Protocol<Msg = Msg, Config = Config, Server = ParisServer, Client = ParisClient>>()
-> (TestNet<Q>, [Key; 2]) {
    let mut net = full::<Q>(2, 2);
    let [x, y] = net.distinct_keys();
    rounds(&mut net, 5, &|_| false);
    net.invoke(cl(0, 0), writes(&[&x, &y], "1"));
    net.deliver_while(|m| from_client(m) || is_prepare(m) || matches!(m.msg, Msg::PrepareReply { .. }));
    (net, [x, y])
}

/// A cohort that answered PREPARE crashes before COMMIT reaches it. It
/// comes back with the prepared transaction, holds its version clock below
/// the proposal while the COMMIT is held back, then applies the COMMIT,
/// and every DC reads the writes. (A cohort that forgot its prepare would
/// let its version clock pass the proposal, and would have nothing to
/// commit.)
#[test]
fn a_cohort_restarted_between_prepare_and_commit_applies_the_commit() {
    cohort_restart::<Paris>();
    cohort_restart::<Bpr>();
}

fn cohort_restart<Q: Protocol<Msg = Msg, Config = Config, Server = ParisServer, Client = ParisClient>>() {
    let (mut net, [x, y]) = prepared_everywhere::<Q>();
    let (x, y) = (&x, &y);
    let (coord, cohort) = (net.server_for(DcId(0), x), net.server_for(DcId(0), y));
    assert!(net.queue.iter().any(is_commit), "{}: the coordinator decided", Q::NAME);
    let pt = part(&net, cohort).prepared.values().next().expect("prepared").d.pt;

    net.restart(cohort, &Config::default());
    assert_eq!(proposals(&net).len(), 1, "{}: the restarted cohort kept its prepared transaction", Q::NAME);
    // The whole channel held: anything behind the COMMIT would bring it.
    rounds(&mut net, 6, &channel(coord, cohort));
    assert!(
        part(&net, cohort).version_clock() < pt,
        "{}: the version clock passed a proposal whose outcome is unknown",
        Q::NAME
    );

    rounds(&mut net, 2, &|_| false);
    net.deliver_client_traffic();
    assert!(matches!(net.take_result(cl(0, 0)), Some(OpResult::Txn(_))), "{}: the client was answered", Q::NAME);
    assert!(proposals(&net).is_empty(), "{}: the commit resolved the prepare", Q::NAME);
    every_dc_reads(&mut net, &[x, y], "1");
}

/// The coordinator crashes after deciding; the COMMIT it sent is lost on
/// the link. The COMMIT was journaled with the decision, the restarted
/// coordinator's link resends it, the cohort commits, the UST passes the
/// commit time and every DC reads the writes.
#[test]
fn a_decision_survives_a_coordinator_restart() {
    decision_survives::<Paris>();
    decision_survives::<Bpr>();
}

fn decision_survives<Q: Protocol<Msg = Msg, Config = Config, Server = ParisServer, Client = ParisClient>>() {
    let (mut net, [x, y]) = prepared_everywhere::<Q>();
    let (x, y) = (&x, &y);
    let coord = net.server_for(DcId(0), x);
    let ct = match net.queue.iter().find(|m| is_commit(m)).map(|m| &m.msg) {
        Some(Msg::Commit { ct, .. }) => *ct,
        _ => panic!("{}: the coordinator decided", Q::NAME),
    };
    net.deliver_client_traffic();
    assert!(matches!(net.take_result(cl(0, 0)), Some(OpResult::Txn(_))), "{}: the client heard committed", Q::NAME);
    net.queue.retain(|m| !is_commit(m));

    net.restart(coord, &Config::default());
    assert!(net.queue.iter().any(is_commit), "{}: the restarted coordinator resends its COMMIT", Q::NAME);
    rounds(&mut net, 6, &|_| false);
    assert!(proposals(&net).is_empty(), "{}: the cohort committed", Q::NAME);
    assert!(min_ust(&net) >= ct, "{}: the UST passed the commit time {ct}: {}", Q::NAME, min_ust(&net));
    every_dc_reads(&mut net, &[x, y], "1");
}

/// A transaction over three partitions; its coordinator (a cohort too)
/// crashes once one remote cohort's proposal is in and the other's is not.
/// Nothing was decided: the restarted coordinator drops its own prepare,
/// answers the late proposal "aborted" at once, and the cohort whose
/// proposal it had taken asks after `prepared_query_us` and hears
/// "aborted". No prepare is left, no write of the transaction is stored
/// anywhere, its client was never told it committed (the runtime's
/// deadline ends the request, lost with the crash, as timed out), the UST
/// moves past every proposal, and the same keys commit again.
#[test]
fn a_transaction_whose_coordinator_crashed_before_deciding_is_aborted_everywhere() {
    orphans_resolved::<Paris>();
    orphans_resolved::<Bpr>();
}

fn orphans_resolved<
    Q: Protocol<Msg = Msg, Config = Config, Server = ParisServer, Client = ParisClient, Version = Version>,
>() {
    let cfg = Config { prepared_query_us: 50_000, ..Config::default() };
    let mut net = net_spec::<Q>(TopologySpec::full(2, 3), cfg.clone());
    let [x, y, z] = &net.distinct_keys();
    let (c0, c1, c2) = dc0_servers(&net, [x, y, z]);
    rounds(&mut net, 5, &|_| false);
    net.invoke(cl(0, 0), writes(&[x, y, z], "lost"));
    net.deliver_while(|m| from_client(m) || is_prepare(m));
    assert!(net.deliver_first(channel(c1, c0)), "c1's proposal reaches the coordinator");
    let pts = proposals(&net);
    assert_eq!(pts.len(), 3, "{}: every cohort prepared", Q::NAME);

    net.restart(c0, &cfg);
    assert!(part(&net, c0).prepared.is_empty(), "{}: the coordinator dropped its own prepare", Q::NAME);
    net.deliver_while(channel(c2, c0));
    net.deliver_while(channel(c0, c2));
    assert!(part(&net, c2).prepared.is_empty(), "{}: a late proposal is answered aborted at once", Q::NAME);
    assert_eq!(part(&net, c1).prepared.len(), 1, "{}: the proposal taken before the crash waits", Q::NAME);

    rounds(&mut net, 20, &|_| false);
    assert!(proposals(&net).is_empty(), "{}: the cohort asked and heard aborted", Q::NAME);
    let top = pts.iter().copied().max().unwrap();
    assert!(min_ust(&net) > top, "{}: the UST {} passes the aborted proposals (up to {top})", Q::NAME, min_ust(&net));
    net.deliver_client_traffic();
    assert_eq!(net.take_result(cl(0, 0)), None, "{}: no answer but the runtime's deadline", Q::NAME);
    for k in [x, y, z] {
        assert!(!stored_anywhere(&net, k, "lost"), "{}: an aborted write of {k:?} is stored", Q::NAME);
    }
    assert!(matches!(net.run(cl(0, 1), writes(&[x, y, z], "again")), OpResult::Txn(_)));
    every_dc_reads(&mut net, &[x, y, z], "again");
}

/// A restarted coordinator numbers its contexts within a new start epoch,
/// so a new transaction never gets the context number of one lost in the
/// crash (and the lost one's late proposal also names its transaction):
/// the new one is decided only with its own cohort's proposal.
#[test]
fn a_late_proposal_never_counts_for_a_new_transaction() {
    let mut net = full::<Paris>(2, 2);
    let [x, y] = &net.distinct_keys();
    let (c0, c1) = (net.server_for(DcId(0), x), net.server_for(DcId(0), y));
    net.invoke(cl(0, 0), writes(&[x, y], "lost"));
    net.deliver_while(|m| from_client(m) || is_prepare(m));
    net.restart(c0, &Config::default());

    net.invoke(cl(0, 1), writes(&[x, y], "new"));
    net.deliver_while(from_client);
    let cid_of = |m: &InFlight<Msg>| match m.msg {
        Msg::PrepareReply { cid, .. } | Msg::Prepare { cid, .. } => Some(cid),
        _ => None,
    };
    let late = net.queue.iter().filter(|m| channel(c1, c0)(m)).find_map(cid_of);
    let fresh = net.queue.iter().filter(|m| channel(c0, c1)(m)).find_map(cid_of);
    assert!(late.is_some() && fresh.is_some(), "both proposals are in flight");
    assert_ne!(late, fresh, "the new transaction has a context number of its own start");

    assert!(net.deliver_first(channel(c1, c0)), "the late proposal arrives");
    net.deliver_client_traffic();
    assert_eq!(net.take_result(cl(0, 1)), None, "the new transaction was decided without its cohort's proposal");
    rounds(&mut net, 4, &|_| false);
    net.deliver_client_traffic();
    assert!(matches!(net.take_result(cl(0, 1)), Some(OpResult::Txn(_))));
    assert!(proposals(&net).is_empty(), "the lost transaction's prepare was aborted");
    every_dc_reads(&mut net, &[x, y], "new");
}

/// A cohort whose coordinator is still collecting proposals asks about its
/// prepared transaction after `prepared_query_us`, hears "undecided",
/// keeps it, and commits it once the last proposal is in.
#[test]
fn a_slow_transaction_is_answered_undecided_and_commits() {
    let cfg = Config { prepared_query_us: 20_000, ..Config::default() };
    let mut net = net_spec::<Paris>(TopologySpec::full(2, 3), cfg);
    let [x, y, z] = &net.distinct_keys();
    let (c0, c1, c2) = dc0_servers(&net, [x, y, z]);
    rounds(&mut net, 5, &|_| false);
    net.invoke(cl(0, 0), writes(&[x, y, z], "slow"));
    net.deliver_while(|m| from_client(m) || is_prepare(m));
    assert!(net.deliver_first(channel(c1, c0)), "c1's proposal reaches the coordinator");

    for _ in 0..5 {
        net.advance_clocks(5_000);
        net.fire_timers(c1);
    }
    assert!(net.deliver_first(|m| matches!(m.msg, Msg::OutcomeQuery { .. })), "c1 asks");
    let undecided = |m: &InFlight<Msg>| matches!(m.msg, Msg::Outcome { outcome: Outcome::Undecided, .. });
    assert!(net.deliver_first(undecided), "the coordinator answers undecided");
    assert_eq!(part(&net, c1).prepared.len(), 1, "c1 keeps its prepare");

    rounds(&mut net, 4, &channel(c2, c0));
    assert_eq!(part(&net, c1).prepared.len(), 1, "c1 keeps its prepare while the coordinator waits");
    rounds(&mut net, 4, &|_| false);
    net.deliver_client_traffic();
    assert!(matches!(net.take_result(cl(0, 0)), Some(OpResult::Txn(_))));
    every_dc_reads(&mut net, &[x, y, z], "slow");
}

/// The stabilization protocols' restart check that fits PaRiS (the UST
/// and S_old are journaled, so a restarted coordinator's first snapshot is
/// not below what GC collected). Their other one, that a fresh session
/// reads the newest local write right after a restart, does not: PaRiS
/// reads at the UST, which lags the newest write by design. Neither fits
/// BPR, whose read at its fresh snapshot waits for heartbeats.
#[test]
fn a_restart_keeps_a_collected_remote_key_readable() {
    crate::stabilization::testnet::a_restart_keeps_a_collected_remote_key_readable::<Paris>(Config::default());
}

/// The version clock is journaled without a sync of its own, so a crash of
/// the machine loses the records of the heartbeats a partition sent since
/// its last sync; and a machine may come back with its clock behind. The
/// restarted partition must still never propose at or below a version
/// clock its peers were told: its HLC comes back at or above the synced
/// ceiling. (Without the ceiling the HLC came back at the clock, 200 ms
/// below the version clock sent.)
#[test]
fn a_machine_crash_with_the_clock_set_back_never_reissues_a_version_clock() {
    ceiling_holds::<Paris>();
    ceiling_holds::<Bpr>();
}

fn ceiling_holds<
    Q: Protocol<Msg = Msg, Config = Config, Server = ParisServer, Client = ParisClient, Version = Version>,
>() {
    let mut net = full::<Q>(2, 1);
    let [x] = net.distinct_keys();
    rounds(&mut net, 40, &|_| false);
    let a = net.server_for(DcId(0), &x);
    let sent = part(&net, a).version_clock();
    assert!(sent > 100_000, "{}: the version clock moved with the heartbeats: {sent}", Q::NAME);
    net.clocks[a.idx()] -= 200_000; // more than the ceiling's step
    net.restart_losing_unsynced(a, &Config::default());
    assert!(
        part(&net, a).hlc > sent,
        "{}: the restarted HLC {} is not above the version clock {sent} already sent",
        Q::NAME,
        part(&net, a).hlc
    );
    net.run(cl(0, 0), writes(&[&x], "after"));
    let v = net.latest(a, &x);
    assert!(v.ut > sent, "{}: a commit at {} reissues a version clock already sent ({sent})", Q::NAME, v.ut);
}

/// A read slice sent before its coordinator crashed and answered after the
/// restart (a BPR replica that blocked answers late) never counts for a
/// new transaction: the restarted coordinator numbers its contexts within
/// a new start epoch, so the late answer names a context it does not have.
/// (Before the epochs, the first context after a restart reused the first
/// number of the last run, and the late slice answered it with another
/// transaction's keys: torture's BPR seed 74, a thin-air read.)
#[test]
fn a_late_read_slice_never_answers_a_new_transaction() {
    let mut net = full::<Paris>(2, 2);
    let [x, y] = &net.distinct_keys();
    rounds(&mut net, 5, &|_| false);
    let (c0, c1) = (net.server_for(DcId(0), x), net.server_for(DcId(0), y));
    let read = || Op::Txn { reads: vec![x.clone(), y.clone()], writes: vec![] };
    let slice_cid = |m: &InFlight<Msg>| match m.msg {
        Msg::ReadSlice { cid, .. } | Msg::SliceReply { cid, .. } => Some(cid),
        _ => None,
    };
    net.invoke(cl(0, 0), read());
    net.deliver_while(|m| from_client(m) || matches!(m.msg, Msg::ReadSlice { .. }));
    let late = net.queue.iter().filter(|m| channel(c1, c0)(m)).find_map(slice_cid);
    assert!(late.is_some(), "c1's answer to the first transaction's slice is in flight");
    net.restart(c0, &Config::default());

    net.invoke(cl(0, 1), read());
    net.deliver_while(from_client);
    let fresh = net.queue.iter().filter(|m| channel(c0, c1)(m)).find_map(slice_cid);
    assert!(fresh.is_some(), "the new transaction asks c1 for its slice");
    assert_ne!(late, fresh, "the new transaction has a context number of its own start");
    assert!(net.deliver_first(channel(c1, c0)), "the late answer arrives");
    net.deliver_client_traffic();
    assert_eq!(net.take_result(cl(0, 1)), None, "the new transaction was answered by another's slice");
    rounds(&mut net, 4, &|_| false);
    net.deliver_client_traffic();
    assert_eq!(values(net.take_result(cl(0, 1)).expect("answered")), vec![None, None]);
}
