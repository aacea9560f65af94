//! EunomiaKV in the simulator (Gunawardhana, Bravo, Rodrigues, "Unobtrusive
//! Deferred Update Stabilization for Efficient Geo-Replication", USENIX ATC
//! 2017): what only whole runs show — a stalled Eunomia delays remote
//! visibility and not updates (§1, §7.2.3), and replicated Eunomia loses
//! nothing when replicas crash for good (§3.3, §7.1 Fig. 4).

mod common;

use causeway_core::{DcId, Protocol, ServiceSpec, Topology};
use causeway_protocols::eunomia_kv::{EUNOMIA, EunomiaKv, RECEIVER};
use causeway_sim::{Fault, FaultKind, Scenario};

/// The Eunomia replicas of `dc` in the scenario's topology (with the
/// protocol's services added as the simulator adds them).
fn eunomia_nodes(sc: &Scenario, dc: u16) -> Vec<u32> {
    let mut spec = sc.topology.clone();
    spec.add_missing_services(EunomiaKv::SERVICES);
    let t = Topology::new(spec).unwrap();
    t.service_nodes(DcId(dc), t.service_index(EUNOMIA).unwrap()).iter().map(|n| n.0).collect()
}

fn run(stall: bool, seed: u64) -> causeway_sim::SimReport {
    let mut sc = common::base(2, 2, 1_500, seed);
    sc.workload.clients_per_dc = 4;
    sc.workload.readproportion = 0.5;
    sc.workload.updateproportion = 0.5;
    sc.record_history = false;
    if stall {
        for node in eunomia_nodes(&sc, 0) {
            sc.faults.push(Fault { at_ms: 200, at_us: 0, kind: FaultKind::Pause { node, for_ms: 800 } });
        }
    }
    let mut sim = causeway_sim::Sim::<EunomiaKv>::new(sc).expect("valid scenario");
    sim.run();
    sim.report()
}

/// §1: the update path never waits for Eunomia. DC 0's Eunomia stalls
/// for 800 ms: its clients' PUT latency stays as it was (within jitter),
/// while the visibility of DC 0's updates in DC 1 grows by the stall.
#[test]
fn a_stalled_eunomia_delays_visibility_not_updates() {
    for seed in 1..=2 {
        let (calm, stalled) = (run(false, seed), run(true, seed));
        let put = |r: &causeway_sim::SimReport| r.latency["put"].clone();
        let (a, b) = (put(&calm), put(&stalled));
        assert!(a.count > 100 && b.count > 100, "seed {seed}: too few puts ({} / {})", a.count, b.count);
        assert!(
            b.p50_us <= a.p50_us + a.p50_us / 10 + 50 && b.p99_us <= a.p99_us + a.p99_us / 10 + 100,
            "seed {seed}: PUT latency grew with Eunomia stalled: {a:?} → {b:?}"
        );
        let worst = |r: &causeway_sim::SimReport| r.visibility.iter().map(|v| v.summary.max_us).max().unwrap_or(0);
        assert!(worst(&calm) < 300_000, "seed {seed}: visibility {} µs without a stall", worst(&calm));
        assert!(worst(&stalled) >= 600_000, "seed {seed}: visibility {} µs with an 800 ms stall", worst(&stalled));
    }
}

/// §3.3 with r = 3: two of DC 0's three replicas crash for good, the
/// leader first; the DCs still converge on every key (nothing DC 0 wrote
/// was lost on its way to the others), and the history is causal.
#[test]
fn ft_eunomia_loses_nothing_when_two_of_three_replicas_crash() {
    for seed in 1..=2 {
        let (bad, read) = common::convergence_with::<EunomiaKv>(seed, |sc| {
            sc.topology.services =
                vec![ServiceSpec { name: EUNOMIA.into(), per_dc: 3 }, ServiceSpec { name: RECEIVER.into(), per_dc: 1 }];
            let reps = eunomia_nodes(sc, 0);
            for (i, node) in reps.into_iter().take(2).enumerate() {
                let at_ms = 400 + 500 * i as u64;
                sc.faults.push(Fault { at_ms, at_us: 0, kind: FaultKind::Crash { node, for_ms: 0, at: None } });
            }
        });
        assert!(bad.is_empty() && read == 5, "seed {seed}: DCs disagree after two replicas crashed: {bad:?}");
    }
}

#[test]
fn the_protocol_names_its_services() {
    assert_eq!(EunomiaKv::SERVICES, &[(EUNOMIA, 1), (RECEIVER, 1)]);
}

/// §7.2.3 (Fig 7): a partition of DC 0 that reports only every 200 ms
/// holds back StableTime, so DC 0's updates become visible in DC 1 about
/// half an interval later on average or more, while its clients' PUTs are
/// as fast as before.
#[test]
fn a_straggling_partition_delays_its_dcs_visibility_not_its_clients() {
    let run = |straggle: bool| {
        let mut sc = common::base(2, 2, 1_500, 1);
        sc.workload.clients_per_dc = 4;
        sc.workload.readproportion = 0.5;
        sc.workload.updateproportion = 0.5;
        sc.record_history = false;
        if straggle {
            sc.protocol.insert("straggler_partition".into(), 0.into());
            sc.protocol.insert("straggler_dc".into(), 0.into());
            sc.protocol.insert("straggler_interval_us".into(), 200_000.into());
        }
        let mut sim = causeway_sim::Sim::<EunomiaKv>::new(sc).expect("valid scenario");
        sim.run();
        sim.report()
    };
    let (calm, straggling) = (run(false), run(true));
    // Pairs come in order (from, to) with from = DC 0 first: DC 0 → DC 1.
    let vis = |r: &causeway_sim::SimReport| r.visibility.first().cloned();
    let (a, b) = (vis(&calm).expect("0 → 1"), vis(&straggling).expect("0 → 1"));
    assert!(a.summary.count > 100 && b.summary.count > 100, "{a:?} / {b:?}");
    assert!(
        b.summary.mean_us >= a.summary.mean_us + 60_000.0 && b.summary.max_us >= a.summary.max_us + 150_000,
        "visibility {a:?} → {b:?} with a 200 ms straggler"
    );
    let put = |r: &causeway_sim::SimReport| r.latency["put"].p50_us;
    assert!(put(&straggling) <= put(&calm) + put(&calm) / 10 + 50, "PUT p50 {} → {}", put(&calm), put(&straggling));
}
