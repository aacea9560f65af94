//! Crash and restart in the simulator: a crashed node
//! loses its volatile state and comes back from its journal; peer messages
//! wait in their senders' durable outboxes; client requests to it are lost
//! and the client's deadline ends them; an operation that never completes
//! stays in the history as pending.

use bytes::Bytes;
use causeway_core::{ClientId, Op, OpError, OpResult, tagged_value};
use causeway_core::{History, Protocol, TopologySpec};
use causeway_protocols::cops::Cops;
use causeway_protocols::eventual::Eventual;
use causeway_sim::{Fault, FaultKind, ScriptedClient, ScriptedOp};
use causeway_sim::{Scenario, Sim};

fn base(dcs: u16, partitions: u32, duration_ms: u64, seed: u64) -> Scenario {
    let mut sc = Scenario::new(TopologySpec::full(dcs, partitions), duration_ms);
    sc.seed = seed;
    sc.network.default_rtt_ms = 40.0;
    sc.network.intra_dc_us = 200;
    sc.network.jitter_pct = 5.0;
    sc.record_history = true;
    sc
}

fn run<P: Protocol>(sc: Scenario) -> (History, Sim<P>) {
    let mut sim = Sim::<P>::new(sc).expect("valid scenario");
    sim.run();
    let h = sim.take_history().expect("history recorded");
    (h, sim)
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

/// DC1's only server (node 1) is down from 50 to 300 ms. A DC0 write at
/// 100 ms reaches it after the restart; a DC1 read at 100 ms is lost with
/// the crash and times out; the same session's next read, after the
/// restart, sees the write.
fn scenario(crash_for_ms: u64, timeout_ms: u64) -> causeway_sim::Scenario {
    let mut sc = base(2, 1, 1, 7);
    sc.drain_ms = 1_000;
    sc.client_timeout_ms = timeout_ms;
    let x = Bytes::from_static(b"x");
    sc.faults.push(Fault { at_ms: 50, at_us: 0, kind: FaultKind::Crash { node: 1, for_ms: crash_for_ms, at: None } });
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![put(100_000, &x, 1)] });
    sc.scripted.push(ScriptedClient { dc: 1, ops: vec![get(100_000, &x), get(400_000, &x)] });
    sc
}

#[test]
fn a_restarted_node_gets_what_was_sent_to_it_and_lost_requests_time_out() {
    let (h, _) = run::<Eventual>(scenario(250, 100));
    let dc1: Vec<_> = h.ops.iter().filter(|r| r.dc.0 == 1).collect();
    assert_eq!(dc1.len(), 2, "{h:?}");
    assert_eq!(dc1[0].result, OpResult::Failed(OpError::TimedOut { after_ms: 100 }), "lost with the crash");
    assert_eq!(dc1[0].complete_us, dc1[0].invoke_us + 100_000);
    assert_eq!(dc1[1].result, OpResult::Get(Some(tagged_value(1, 16))), "replicated after the restart");
    assert_ne!(dc1[0].client, dc1[1].client, "after a timeout the session continues as a new client");
}

#[test]
fn without_a_restart_or_a_deadline_the_operation_stays_pending() {
    let (h, _) = run::<Eventual>(scenario(0, 0));
    let pending: Vec<_> = h.ops.iter().filter(|r| r.result == OpResult::Failed(OpError::Pending)).collect();
    assert_eq!(pending.len(), 1, "the read to the crashed node never completes: {h:?}");
    assert_eq!(pending[0].client, ClientId(1));
    assert_eq!(pending[0].complete_us, 1_001_000, "recorded at the end of the run");
    assert_eq!(h.ops.len(), 2, "the session's second read is never invoked");
    // The checker lists it; with a deadline it is a failure.
    let r = causeway_check::check(&h, &causeway_check::CheckConfig::at(causeway_check::Level::Eventual));
    assert!(r.passed && r.count(causeway_check::Kind::Unfinished) == 1, "{r}");
    let strict = causeway_check::CheckConfig::at(causeway_check::Level::Eventual)
        .with_liveness(causeway_check::Liveness::after_quiescence(0, 50_000));
    let r = causeway_check::check(&h, &strict);
    assert!(!r.passed, "{r}");
    let v = r.violations.iter().find(|v| v.kind() == causeway_check::Kind::Unfinished).expect("reported").to_string();
    assert!(v.contains("get of {x}") && v.contains("never completed") && v.contains("in dc1"), "{v}");
}

#[test]
fn restart_rebuilds_the_server_from_its_store_and_drops_old_timers() {
    // COPS recovers pending replicated writes and its committed-through
    // table from the store on restart; a run with crashes of every node
    // still converges.
    let mut sc = base(3, 2, 600, 3);
    sc.workload.clients_per_dc = 4;
    sc.workload.recordcount = 10;
    sc.client_timeout_ms = 200;
    sc.drain_ms = 3_000;
    for node in 0..6u32 {
        sc.faults.push(Fault {
            at_ms: 50 + node as u64 * 70,
            at_us: 0,
            kind: FaultKind::Crash { node, for_ms: 60, at: None },
        });
    }
    let quiet = 3_000_000;
    for dc in 0..3 {
        let ops = (0..10).map(|i| get(if i == 0 { quiet } else { 0 }, &Bytes::from(format!("user{i}")))).collect();
        sc.scripted.push(ScriptedClient { dc, ops });
    }
    let (h, _) = run::<Cops>(sc);
    assert!(
        h.ops.iter().any(|r| matches!(r.result, OpResult::Failed(OpError::TimedOut { .. }))),
        "some requests were lost"
    );
    let r = causeway_check::check(&h, &causeway_check::CheckConfig::default().quiescent_after(quiet));
    assert!(r.passed, "{r}");
    assert_eq!(r.count(causeway_check::Kind::Divergence), 0, "{r}");
}

#[test]
fn crash_restart_runs_replay_exactly() {
    let a = {
        let mut sim = causeway_sim::Sim::<Cops>::new(scenario(250, 100)).unwrap();
        sim.run();
        (sim.trace_hash(), sim.events())
    };
    let b = {
        let mut sim = causeway_sim::Sim::<Cops>::new(scenario(250, 100)).unwrap();
        sim.run();
        (sim.trace_hash(), sim.events())
    };
    assert_eq!(a, b);
}

/// PaRiS and BPR (Spirovska et al.; their deviation 10): every node of a
/// partially replicated cluster (3 DCs, 3 partitions, each in 2 DCs, so a
/// transaction's cohorts are often in another DC) crashes once during a
/// load of read-write transactions. Every request a crash lost ends at the
/// client's deadline as timed out and none stays pending; prepares whose
/// coordinator crashed before deciding are aborted, so the UST moves on
/// and, after the load, every DC reads every key alike and the history
/// passes causal+.
#[test]
fn paris_and_bpr_transactions_survive_crashes_of_every_node() {
    use causeway_protocols::paris::{Bpr, Paris};
    fn run_crashing<P: Protocol>() {
        let mut spec = TopologySpec::full(3, 3);
        spec.replication = causeway_core::Replication::Partial { factor: 2 };
        let mut sc = Scenario::new(spec, 1_500);
        sc.seed = 11;
        sc.network.default_rtt_ms = 40.0;
        sc.network.intra_dc_us = 200;
        sc.network.jitter_pct = 5.0;
        sc.record_history = true;
        sc.workload.clients_per_dc = 4;
        sc.workload.recordcount = 12;
        sc.workload.readproportion = 0.3;
        sc.workload.updateproportion = 0.2;
        sc.workload.txnproportion = 0.5;
        sc.workload.txn_reads = 3;
        sc.workload.txn_writes = 3;
        sc.protocol.insert("prepared_query_us".into(), 100_000.into());
        sc.client_timeout_ms = 1_000;
        sc.drain_ms = 4_000;
        for node in 0..6u32 {
            let at_ms = 100 + node as u64 * 200;
            sc.faults.push(Fault { at_ms, at_us: 0, kind: FaultKind::Crash { node, for_ms: 90, at: None } });
        }
        let quiet = 3_500_000;
        for dc in 0..3 {
            let ops = (0..12).map(|i| get(if i == 0 { quiet } else { 0 }, &Bytes::from(format!("user{i}")))).collect();
            sc.scripted.push(ScriptedClient { dc, ops });
        }
        let (h, _) = run::<P>(sc);
        let timed_out = h.ops.iter().filter(|r| matches!(r.result, OpResult::Failed(OpError::TimedOut { .. }))).count();
        assert!(timed_out > 0, "{}: some requests were lost with a crash", P::NAME);
        assert!(
            !h.ops.iter().any(|r| r.result == OpResult::Failed(OpError::Pending)),
            "{}: an operation never completed",
            P::NAME
        );
        let txns = h.ops.iter().filter(|r| matches!(r.result, OpResult::Txn(_))).count();
        assert!(txns > 50, "{}: only {txns} transactions committed", P::NAME);
        let level = causeway_check::Level::CausalPlus;
        let r = causeway_check::check(&h, &causeway_check::CheckConfig::at(level).quiescent_after(quiet));
        assert!(r.passed, "{}: {r}", P::NAME);
        assert_eq!(r.count(causeway_check::Kind::Divergence), 0, "{}: {r}", P::NAME);
    }
    run_crashing::<Paris>();
    run_crashing::<Bpr>();
}
