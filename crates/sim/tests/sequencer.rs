//! S-Seq in the simulator (Gunawardhana, Bravo, Rodrigues, "Unobtrusive
//! Deferred Update Stabilization for Efficient Geo-Replication", USENIX ATC
//! 2017, §2, §7.1, §7.2.3): what only whole runs show — the sequencer's
//! round trip is on every PUT's path (the cost Fig. 1 measures) and A-Seq
//! takes it off; a stalled sequencer delays its DC's PUTs, not its reads
//! (§7.2.3: "clients operating with stragglers observe an increase in
//! latency"); and a chain-replicated sequencer whose replicas crash and
//! restart loses no update and keeps the history causal.

mod common;

use causeway_check::{CheckConfig, Level, check};
use causeway_core::{DcId, Protocol, ServiceSpec, Topology};
use causeway_protocols::sequencer::{RECEIVER, SEQUENCER, SSeq};
use causeway_sim::{CrashPoint, Fault, FaultKind, Scenario};

/// The sequencer replicas of `dc` in the scenario's topology (with the
/// protocol's services added as the simulator adds them), head first.
fn chain(sc: &Scenario, dc: u16) -> Vec<u32> {
    let mut spec = sc.topology.clone();
    spec.add_missing_services(SSeq::SERVICES);
    let t = Topology::new(spec).unwrap();
    t.service_nodes(DcId(dc), t.service_index(SEQUENCER).unwrap()).iter().map(|n| n.0).collect()
}

fn run(tweak: impl FnOnce(&mut Scenario), seed: u64) -> causeway_sim::SimReport {
    let mut sc = common::base(2, 2, 1_500, seed);
    sc.workload.clients_per_dc = 4;
    sc.workload.readproportion = 0.5;
    sc.workload.updateproportion = 0.5;
    sc.record_history = false;
    tweak(&mut sc);
    let mut sim = causeway_sim::Sim::<SSeq>::new(sc).expect("valid scenario");
    sim.run();
    sim.report()
}

fn replicas(sc: &mut Scenario, r: u16) {
    sc.topology.services =
        vec![ServiceSpec { name: SEQUENCER.into(), per_dc: r }, ServiceSpec { name: RECEIVER.into(), per_dc: 1 }];
}

/// §2, §7.1: a PUT waits for the sequencer, one intra-DC round trip per
/// hop of the chain (200 µs each way here); A-Seq's does not.
#[test]
fn the_sequencer_is_on_every_puts_path_and_a_seq_takes_it_off() {
    for seed in 1..=2 {
        let p50 = |r: &causeway_sim::SimReport| r.latency["put"].p50_us;
        let a_seq = run(|sc| drop(sc.protocol.insert("mutant_async_sequencer".into(), true.into())), seed);
        let one = run(|_| {}, seed);
        let three = run(|sc| replicas(sc, 3), seed);
        let get = one.latency["get"].p50_us;
        assert!(p50(&a_seq) <= get + 100, "seed {seed}: A-Seq's PUT {} µs vs GET {get} µs", p50(&a_seq));
        assert!(p50(&one) >= p50(&a_seq) + 350, "seed {seed}: S-Seq {} µs vs A-Seq {} µs", p50(&one), p50(&a_seq));
        assert!(p50(&three) >= p50(&one) + 350, "seed {seed}: a chain of 3 {} µs vs 1 {} µs", p50(&three), p50(&one));
    }
}

/// §7.2.3, the sequencer's side of the stragglers experiment: DC 0's
/// sequencer stalls for 800 ms; DC 0's PUTs wait for it, its GETs do not.
#[test]
fn a_stalled_sequencer_delays_its_dcs_puts_not_reads() {
    for seed in 1..=2 {
        let calm = run(|_| {}, seed);
        let stalled = run(
            |sc| {
                let node = chain(sc, 0)[0];
                sc.faults.push(Fault { at_ms: 200, at_us: 0, kind: FaultKind::Pause { node, for_ms: 800 } });
            },
            seed,
        );
        let (a, b) = (&calm.latency["put"], &stalled.latency["put"]);
        assert!(a.max_us < 100_000, "seed {seed}: a PUT took {} µs with no stall", a.max_us);
        assert!(b.max_us >= 600_000, "seed {seed}: the longest PUT took {} µs with an 800 ms stall", b.max_us);
        let (a, b) = (&calm.latency["get"], &stalled.latency["get"]);
        assert!(b.max_us <= a.max_us + 1_000, "seed {seed}: GETs waited for the sequencer: {a:?} → {b:?}");
    }
}

/// §7.1's chain of three: each replica of DC 0's chain crashes and
/// restarts in turn, at a different point of a turn (after the log's
/// append, after its sync, tearing its tail); the DCs converge on every
/// key and the history is causal+.
#[test]
fn a_chain_whose_replicas_crash_and_restart_loses_nothing() {
    let points = [CrashPoint::AfterAppend, CrashPoint::AfterSync, CrashPoint::TornTail];
    for seed in 1..=2 {
        let mut history_sc = None;
        let (bad, read) = common::convergence_with::<SSeq>(seed, |sc| {
            replicas(sc, 3);
            for (i, node) in chain(sc, 0).into_iter().enumerate() {
                let at_ms = 300 + 400 * i as u64;
                let at = Some(points[(i + seed as usize) % 3]);
                sc.faults.push(Fault { at_ms, at_us: 0, kind: FaultKind::Crash { node, for_ms: 150, at } });
            }
            sc.client_timeout_ms = 300;
            history_sc = Some(sc.clone());
        });
        assert!(bad.is_empty() && read == 5, "seed {seed}: DCs disagree after the chain's crashes: {bad:?}");
        let (h, _) = common::run::<SSeq>(history_sc.unwrap());
        let report = check(&h, &CheckConfig::at(Level::CausalPlus));
        assert!(report.passed, "seed {seed}: {report}");
    }
}

#[test]
fn the_protocol_names_its_services() {
    assert_eq!(SSeq::SERVICES, &[(SEQUENCER, 1), (RECEIVER, 1)]);
}
