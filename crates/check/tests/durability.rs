//! The node core's promise in the simulator: a turn's replies and messages
//! leave only when its CPU time is over and its log records are durable,
//! and a crash between a node's log append, its sync and its output loses
//! nothing that was acknowledged or told to a peer. A deliberately broken
//! core that releases before the sync is caught by the same faults.

use bytes::Bytes;
use causeway_core::{History, Op, OpError, OpResult, Protocol, TopologySpec, tagged_value};
use causeway_protocols::eventual::Eventual;
use causeway_sim::{CrashPoint, Fault, FaultKind, FsyncPolicy, Scenario, ScriptedClient, ScriptedOp, Sim};

fn base(dcs: u16, seed: u64) -> Scenario {
    let mut sc = Scenario::new(TopologySpec::full(dcs, 1), 1);
    sc.seed = seed;
    sc.network.default_rtt_ms = 40.0;
    sc.network.intra_dc_us = 100;
    sc.record_history = true;
    sc.drain_ms = 1_000;
    sc.client_timeout_ms = 100;
    sc
}

fn put(at_us: u64, key: &Bytes, id: u64) -> ScriptedOp {
    ScriptedOp {
        at_us,
        op: Op::Put { key: key.clone(), value: tagged_value(id, 16) },
        from_dc: None,
        checking_group: None,
    }
}
fn get(at_us: u64, key: &Bytes) -> ScriptedOp {
    ScriptedOp { at_us, op: Op::Get { key: key.clone() }, from_dc: None, checking_group: None }
}

fn run<P: Protocol>(sc: Scenario) -> (History, Sim<P>) {
    let mut sim = Sim::<P>::new(sc).expect("valid scenario");
    sim.run();
    let h = sim.take_history().expect("history recorded");
    (h, sim)
}

#[test]
fn a_reply_leaves_when_the_handlers_cpu_time_is_over() {
    let x = Bytes::from_static(b"x");
    let mut sc = base(1, 1);
    sc.cpu.service_us = 1_000;
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![put(10_000, &x, 1)] });
    let (h, _) = run::<Eventual>(sc.clone());
    let r = &h.ops[0];
    assert_eq!(r.result, OpResult::Put);
    // 100 µs to the server, 1 ms of service, 100 µs back.
    assert!(
        r.complete_us - r.invoke_us >= 1_200,
        "latency {} µs: output left before the service ended",
        r.complete_us - r.invoke_us
    );
    sc.cpu.service_us = 0;
    let (h, _) = run::<Eventual>(sc);
    assert_eq!(h.ops[0].complete_us - h.ops[0].invoke_us, 200, "free CPU: two hops");
}

#[test]
fn inputs_queue_behind_a_busy_node_and_their_wait_is_reported() {
    let mut sc = base(1, 2);
    sc.duration_ms = 200;
    sc.cpu.service_us = 200;
    sc.workload.clients_per_dc = 8;
    sc.record_history = false;
    let r = Sim::<Eventual>::new(sc).unwrap().run();
    let wait = r.samples.get("cpu_queue_wait_us").expect("queue wait reported");
    assert!(wait.count > 100 && wait.max_us >= 200, "{wait:?}");
}

/// DC 0's only server is armed to crash at the end of its next turn that
/// logs: the client's write. DC 1's reader reads the key after the
/// restart.
fn armed(point: CrashPoint, fsync: FsyncPolicy, mutant: bool) -> Scenario {
    armed_at(5_000, point, fsync, mutant)
}

/// [`armed`], the crash armed at `at_us`.
fn armed_at(at_us: u64, point: CrashPoint, fsync: FsyncPolicy, mutant: bool) -> Scenario {
    let x = Bytes::from_static(b"x");
    let mut sc = base(2, 3);
    sc.durability.fsync = fsync;
    sc.durability.mutant_release_before_sync = mutant;
    let kind = FaultKind::Crash { node: 0, for_ms: 200, at: Some(point) };
    sc.faults.push(Fault { at_ms: at_us / 1_000, at_us: at_us % 1_000, kind });
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![put(10_000, &x, 1), get(400_000, &x)] });
    sc.scripted.push(ScriptedClient { dc: 1, ops: vec![get(600_000, &x)] });
    sc
}

fn results(h: &History) -> Vec<(u16, OpResult)> {
    h.ops.iter().map(|r| (r.dc.0, r.result.clone())).collect()
}

#[test]
fn a_crash_before_the_sync_loses_the_write_and_its_acknowledgement() {
    for point in [CrashPoint::AfterAppend, CrashPoint::TornTail] {
        for fsync in [FsyncPolicy::Always, FsyncPolicy::Group] {
            let (h, sim) = run::<Eventual>(armed(point, fsync, false));
            let r = results(&h);
            assert_eq!(r[0], (0, OpResult::Failed(OpError::TimedOut { after_ms: 100 })), "{point:?} {fsync:?}: {r:?}");
            // Never acknowledged, so losing it breaks no promise; torn
            // before its only record, it is gone everywhere.
            assert!(sim.store(causeway_core::NodeId(0)).latest(b"x").is_none(), "{point:?} {fsync:?}");
            assert!(r.iter().skip(1).all(|(_, res)| *res == OpResult::Get(None)), "{point:?} {fsync:?}: {r:?}");
        }
    }
}

#[test]
fn a_crash_after_the_sync_keeps_the_write_and_its_messages_are_resent() {
    for fsync in [FsyncPolicy::Always, FsyncPolicy::Group] {
        let (h, _) = run::<Eventual>(armed(CrashPoint::AfterSync, fsync, false));
        let r = results(&h);
        assert_eq!(
            r[0],
            (0, OpResult::Failed(OpError::TimedOut { after_ms: 100 })),
            "the reply died with the node: {r:?}"
        );
        let written = OpResult::Get(Some(tagged_value(1, 16)));
        assert!(r.iter().skip(1).all(|(_, res)| *res == written), "durable, and replicated after the restart: {r:?}");
    }
}

#[test]
fn the_mutant_that_releases_before_the_sync_loses_an_acknowledged_write() {
    let (h, _) = run::<Eventual>(armed(CrashPoint::AfterAppend, FsyncPolicy::Always, true));
    let r = results(&h);
    assert_eq!(r[0], (0, OpResult::Put), "the mutant acknowledged before its record was durable: {r:?}");
    assert_eq!(r[1], (0, OpResult::Get(None)), "and the crash lost it: {r:?}");
    let report = causeway_check::check(
        &h,
        &causeway_check::CheckConfig::at(causeway_check::Level::Eventual).quiescent_after(300_000),
    );
    assert!(!report.passed, "the checker must catch a lost acknowledged write: {report}");
}

#[test]
fn a_reply_waits_for_its_sync_and_turns_served_during_a_sync_share_the_next() {
    let keys: Vec<Bytes> = (0..3).map(|i| Bytes::from(format!("k{i}"))).collect();
    let mut sc = base(1, 5);
    sc.durability.sync_us = 1_000;
    // The first PUT reaches the node at 10.1 ms and its sync runs to
    // 11.1 ms; the other two arrive meanwhile (10.4 and 10.5 ms) and go to
    // the disk together when it is free, 11.1 to 12.1 ms.
    for (i, at_us) in [10_000, 10_300, 10_400].into_iter().enumerate() {
        sc.scripted.push(ScriptedClient { dc: 0, ops: vec![put(at_us, &keys[i], i as u64 + 1)] });
    }
    let (h, _) = run::<Eventual>(sc.clone());
    let mut done: Vec<(u64, u64)> = h.ops.iter().map(|r| (r.invoke_us, r.complete_us)).collect();
    done.sort();
    assert!(h.ops.iter().all(|r| r.result == OpResult::Put), "{:?}", h.ops);
    assert_eq!(done[0].1 - done[0].0, 1_200, "one hop, the sync, one hop back: {done:?}");
    assert_eq!((done[1].1, done[2].1), (12_200, 12_200), "group commit: one sync for both: {done:?}");
    sc.durability.sync_us = 0;
    let (h, _) = run::<Eventual>(sc);
    assert!(h.ops.iter().all(|r| r.complete_us - r.invoke_us == 200), "instant syncs: two hops: {:?}", h.ops);
}

#[test]
fn crash_points_replay_exactly() {
    let go = || {
        let mut sc = armed(CrashPoint::TornTail, FsyncPolicy::Group, false);
        sc.workload.clients_per_dc = 4;
        sc.duration_ms = 300;
        let mut sim = Sim::<Eventual>::new(sc).unwrap();
        sim.run();
        (sim.trace_hash(), sim.events())
    };
    assert_eq!(go(), go());
}

/// The scripted write-then-read around an armed crash, for any protocol,
/// checked at the level it promises; the write's own result too.
fn scripted_crash<P: Protocol>(point: CrashPoint, fsync: FsyncPolicy, mutant: bool) -> (OpResult, bool, String) {
    scripted_crash_at::<P>(5_000, point, fsync, mutant)
}

fn scripted_crash_at<P: Protocol>(
    at_us: u64,
    point: CrashPoint,
    fsync: FsyncPolicy,
    mutant: bool,
) -> (OpResult, bool, String) {
    let mut sc = armed_at(at_us, point, fsync, mutant);
    sc.client_timeout_ms = 300;
    let (h, _) = run::<P>(sc);
    let level = causeway_check::Level::promised(P::CAUSAL);
    let report = causeway_check::check(&h, &causeway_check::CheckConfig::at(level).quiescent_after(350_000));
    (h.ops[0].result.clone(), report.passed, report.to_string())
}

/// A random workload on 2 DCs × 2 partitions with every node crashing once
/// at `point`, then one reader per DC reading every key after the quiet
/// time: the history must pass the checker at the protocol's level.
/// A small random workload: 2 DCs × 2 partitions, 4 clients per DC over
/// 10 keys, half reads, half writes.
fn small_workload(seed: u64, fsync: FsyncPolicy, sync_us: u64) -> Scenario {
    let mut sc = Scenario::new(TopologySpec::full(2, 2), 400);
    sc.seed = seed;
    sc.network.default_rtt_ms = 40.0;
    sc.network.intra_dc_us = 100;
    sc.network.jitter_pct = 10.0;
    sc.record_history = true;
    sc.durability.fsync = fsync;
    sc.durability.sync_us = sync_us;
    sc.workload.clients_per_dc = 4;
    sc.workload.recordcount = 10;
    sc.workload.readproportion = 0.5;
    sc.workload.updateproportion = 0.5;
    sc
}

fn crashing_workload<P: Protocol>(seed: u64, point: CrashPoint, fsync: FsyncPolicy, sync_us: u64) -> (bool, String) {
    let mut sc = small_workload(seed, fsync, sync_us);
    sc.count_bytes = false;
    sc.drain_ms = 3_000;
    let env = causeway_core::LivenessEnv { max_rtt_us: 44_000, intra_dc_rtt_us: 220, max_clock_skew_us: 0 };
    sc.client_timeout_ms = (2 * P::liveness_bound_us(&P::Config::default(), &env) / 1_000).max(500);
    sc.workload.think_time_us = 1_000;
    sc.workload.fieldlength = 16;
    for node in 0..4u32 {
        let kind = FaultKind::Crash { node, for_ms: 50, at: Some(point) };
        sc.faults.push(Fault { at_ms: 60 + node as u64 * 70, at_us: 0, kind });
    }
    let quiet_us = 2_900_000;
    for dc in 0..2 {
        let ops = (0..10).map(|i| get(if i == 0 { quiet_us } else { 0 }, &Bytes::from(format!("user{i}")))).collect();
        sc.scripted.push(ScriptedClient { dc, ops });
    }
    let (h, _) = run::<P>(sc);
    let level = causeway_check::Level::promised(P::CAUSAL);
    let report = causeway_check::check(&h, &causeway_check::CheckConfig::at(level).quiescent_after(quiet_us));
    (report.passed, report.to_string())
}

fn every_crash_point<P: Protocol>() -> Result<(), String> {
    for point in [CrashPoint::AfterAppend, CrashPoint::AfterSync, CrashPoint::TornTail] {
        for fsync in [FsyncPolicy::Always, FsyncPolicy::Group] {
            let (first, passed, why) = scripted_crash::<P>(point, fsync, false);
            if !passed {
                return Err(format!("{point:?} under {fsync:?}: {why}"));
            }
            if first == OpResult::Put {
                return Err(format!(
                    "{point:?} under {fsync:?}: a write acknowledged by a node that crashed before sending anything"
                ));
            }
            // Seed 3 with syncs that take 300 µs: a crash may strike while
            // one is on the disk, and turns served meanwhile wait for the next.
            for (seed, sync_us) in [(1, 0), (2, 0), (3, 300)] {
                let (passed, why) = crashing_workload::<P>(seed, point, fsync, sync_us);
                if !passed {
                    return Err(format!("{point:?} under {fsync:?}, workload seed {seed}, sync_us {sync_us}: {why}"));
                }
            }
        }
    }
    // The core that releases before the sync: its acknowledgement outlives
    // the write, and the checker says so. The write reaches node 0 at
    // 10.1 ms, and peers are 100 µs away. Armed at 5 ms, the crash strikes
    // the next turn that logs: the write's, unless a timer logs first (a
    // periodic turn at 10 ms; armed at 10.05 ms it strikes the write's turn
    // then). Where that turn only asks another node (a sequencer) and a
    // later one acknowledges, a crash armed along the write's path strikes
    // that later turn.
    let mut results = Vec::new();
    for at_us in [5_000, 10_050, 10_150, 10_250, 10_350, 10_450, 10_650, 10_850, 11_050, 11_450] {
        let (first, passed, _) = scripted_crash_at::<P>(at_us, CrashPoint::AfterAppend, FsyncPolicy::Always, true);
        if first == OpResult::Put && !passed {
            return Ok(());
        }
        results.push((at_us, first));
    }
    Err(format!("the release-before-sync mutant was not caught (armed at µs → its write: {results:?})"))
}

#[test]
fn every_protocol_keeps_its_promises_when_crashes_strike_between_log_sync_and_send() {
    let failures: Vec<String> = causeway_protocols::ProtocolName::ALL
        .iter()
        .filter_map(|&p| {
            causeway_protocols::with_protocol!(p, P => every_crash_point::<P>()).err().map(|e| format!("{p}: {e}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A node no fault crashes keeps a volatile log (only its messages to
/// nodes that may crash, and its turns' ends): the run is the same event
/// for event as one in which every log keeps every record because a crash
/// is scheduled for every node (after the run ends, so it never strikes),
/// whatever the sync time and policy, with node 0 crashing and restarting
/// mid-run in both (its peers resend it what it missed from their logs).
#[test]
fn a_volatile_log_changes_nothing_but_the_time_it_takes() {
    for (fsync, sync_us) in [(FsyncPolicy::Always, 0), (FsyncPolicy::Group, 0), (FsyncPolicy::Always, 300)] {
        let scenario = |kept: bool| {
            let mut sc = small_workload(7, fsync, sync_us);
            sc.workload.think_time_us = 500;
            let kind = FaultKind::Crash { node: 0, for_ms: 40, at: None };
            sc.faults.push(Fault { at_ms: 150, at_us: 0, kind });
            if kept {
                for node in 1..4u32 {
                    let kind = FaultKind::Crash { node, for_ms: 10, at: None };
                    sc.faults.push(Fault { at_ms: 1_000_000, at_us: 0, kind });
                }
            }
            sc
        };
        let (volatile, a) = run::<causeway_protocols::cops::Cops>(scenario(false));
        let (kept, b) = run::<causeway_protocols::cops::Cops>(scenario(true));
        assert!(volatile.ops.len() > 100, "the workload ran");
        assert_eq!((a.trace_hash(), a.events()), (b.trace_hash(), b.events()), "{fsync:?}, sync {sync_us} µs");
        assert_eq!(results(&volatile), results(&kept));
    }
}
