//! The benchmark measures beyond latency: staleness, whole-request latency,
//! the split of ROTs around a slowed node, and metadata bytes. Each test has
//! a run where the measure must be zero (or absent) and one where it must not.

mod common;

use causeway_core::{Key, Op, tagged_value};
use causeway_protocols::causal_spartan_x::CausalSpartanX;
use causeway_protocols::eventual::Eventual;
use causeway_protocols::gentlerain::GentleRain;
use causeway_sim::{Fault, FaultKind, ScriptedClient, ScriptedOp, Sim};

/// A write in DC 0, then reads of the same key in DC 1 before and long after
/// it replicates (100 ms round trip).
fn remote_reads(reads_at_us: &[u64]) -> causeway_sim::SimReport {
    let mut sc = common::base(2, 1, 1_000, 1);
    sc.network.default_rtt_ms = 100.0;
    let k = Key::from("k");
    let put = ScriptedOp {
        at_us: 1_000,
        op: Op::Put { key: k.clone(), value: tagged_value(1, 16) },
        from_dc: None,
        checking_group: None,
    };
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![put] });
    let gets = reads_at_us
        .iter()
        .map(|&at_us| ScriptedOp { at_us, op: Op::Get { key: k.clone() }, from_dc: None, checking_group: None })
        .collect();
    sc.scripted.push(ScriptedClient { dc: 1, ops: gets });
    Sim::<Eventual>::new(sc).unwrap().run()
}

#[test]
fn a_read_that_misses_an_acknowledged_write_is_stale() {
    // At 20 ms the write (acknowledged at ~1.5 ms) has not reached DC 1.
    let r = remote_reads(&[20_000]);
    assert_eq!(r.stale_reads_pct, 100.0);
    let stale_ms = r.staleness.mean_us / 1_000.0;
    assert!((18.0..19.0).contains(&stale_ms), "stale for ~18.5 ms, got {stale_ms}");
    // At 200 ms it has.
    let r = remote_reads(&[200_000]);
    assert_eq!(r.stale_reads_pct, 0.0);
    assert_eq!(r.staleness.count, 0);
}

#[test]
fn amplified_requests_and_slowed_rots_are_reported_apart() {
    let mut sc = common::base(1, 4, 2_000, 2);
    sc.workload.clients_per_dc = 4;
    sc.workload.recordcount = 100;
    sc.workload.readproportion = 0.5;
    sc.workload.updateproportion = 0.3;
    sc.workload.rotproportion = 0.2;
    sc.workload.rot_size = 2;
    sc.workload.amplification = 4;
    let plain = Sim::<CausalSpartanX>::new(sc.clone()).unwrap().run();
    assert!(!plain.latency.contains_key("rot_touching_slow"));
    let amplified = plain.latency["amplified"].mean_us;
    let put = plain.latency["put"].mean_us;
    assert!(amplified > 3.5 * put, "a request of 4 PUTs takes about 4 PUTs: {amplified} vs {put}");

    sc.faults.push(Fault { at_ms: 0, at_us: 0, kind: FaultKind::Slow { node: 0, extra_ms: 50 } });
    let slowed = Sim::<CausalSpartanX>::new(sc).unwrap().run();
    let touching = slowed.latency["rot_touching_slow"].mean_us;
    let other = slowed.latency["rot_not_touching_slow"].mean_us;
    assert!(touching > 50_000.0 && other < 5_000.0, "touching {touching} µs, not touching {other} µs");
}

#[test]
fn metadata_bytes_reflect_what_each_protocol_carries() {
    let mut sc = common::base(3, 2, 500, 3);
    sc.workload.clients_per_dc = 4;
    sc.workload.recordcount = 50;
    let ev = Sim::<Eventual>::new(sc.clone()).unwrap().run();
    let gr = Sim::<GentleRain>::new(sc.clone()).unwrap().run();
    let csx = Sim::<CausalSpartanX>::new(sc).unwrap().run();
    for r in [&ev, &gr, &csx] {
        assert!(r.versions_held > 0 && r.metadata_bytes_per_version > 0.0, "{}", r.protocol);
        assert!(r.metadata_bytes_per_msg > 0.0, "{}", r.protocol);
    }
    // CausalSpartanX stores a dependency set with every version; GentleRain
    // and Eventual only a timestamp and a DC.
    assert!(
        csx.metadata_bytes_per_version > gr.metadata_bytes_per_version + 4.0,
        "CSX {} vs GR {} bytes per version",
        csx.metadata_bytes_per_version,
        gr.metadata_bytes_per_version
    );
}

/// Saturated servers: CPU time per KiB makes big messages cost throughput,
/// and a negative rate is refused by name.
#[test]
fn cpu_time_per_kib_slows_servers_that_handle_big_messages() {
    let run = |fieldlength: usize, us_per_kib: f64| {
        let mut sc = common::base(1, 1, 1_000, 4);
        sc.workload.clients_per_dc = 32;
        sc.workload.recordcount = 100;
        sc.workload.fieldlength = fieldlength;
        sc.cpu.service_us = 20;
        sc.cpu.us_per_kib = us_per_kib;
        Sim::<Eventual>::new(sc).unwrap().run().throughput_ops_s
    };
    let (small, big_free, big_costly) = (run(16, 0.0), run(4_096, 0.0), run(4_096, 20.0));
    assert!((big_free / small - 1.0).abs() < 0.05, "size alone is free: {small} vs {big_free} ops/s");
    assert!(big_costly < 0.6 * big_free, "4 KiB at 20 µs/KiB costs: {big_costly} vs {big_free} ops/s");
    let mut sc = common::base(1, 1, 10, 1);
    sc.cpu.us_per_kib = -1.0;
    assert!(Sim::<Eventual>::new(sc).err().unwrap().to_string().contains("cpu.us_per_kib"));
}

/// The busiest server's CPU busy fraction tells server-bound load (many
/// clients: near 100 %) from client-bound load (one client waiting on the
/// network most of the time), and is absent when messages cost no CPU.
#[test]
fn server_busy_fraction_tells_saturated_servers_from_idle_ones() {
    let run = |clients: u32, service_us: u64| {
        let mut sc = common::base(1, 1, 1_000, 4);
        sc.workload.clients_per_dc = clients;
        sc.workload.recordcount = 100;
        sc.cpu.service_us = service_us;
        Sim::<Eventual>::new(sc).unwrap().run().server_busy_max_pct
    };
    let saturated = run(64, 20).unwrap();
    let idle = run(1, 20).unwrap();
    assert!(saturated > 95.0 && saturated <= 100.0, "64 clients keep the server busy: {saturated} %");
    assert!(idle < 20.0, "one client leaves it idle most of the time: {idle} %");
    assert_eq!(run(64, 0), None, "no CPU cost, no CPU load");
}

/// Saturated servers: a per-kind CPU cost charges only the named protocol's
/// messages of that kind, and a negative one is refused by name.
#[test]
fn cpu_time_per_message_kind_charges_only_that_protocol_and_kind() {
    let run = |protocol: &str, kind: &str| {
        let mut sc = common::base(1, 1, 1_000, 4);
        sc.workload.clients_per_dc = 32;
        sc.workload.recordcount = 100;
        sc.workload.readproportion = 1.0;
        sc.workload.updateproportion = 0.0;
        sc.cpu.service_us = 20;
        sc.cpu.kind_us.entry(protocol.into()).or_default().insert(kind.into(), 60.0);
        Sim::<Eventual>::new(sc).unwrap().run().throughput_ops_s
    };
    let (other_protocol, other_kind, charged) =
        (run("cclo", "get_req"), run("eventual", "put_req"), run("eventual", "get_req"));
    assert!((other_kind / other_protocol - 1.0).abs() < 0.05, "{other_protocol} vs {other_kind} ops/s");
    assert!(charged < 0.4 * other_protocol, "80 µs per read instead of 20: {charged} vs {other_protocol} ops/s");
    let mut sc = common::base(1, 1, 10, 1);
    sc.cpu.kind_us.entry("eventual".into()).or_default().insert("get_req".into(), -1.0);
    assert!(Sim::<Eventual>::new(sc).err().unwrap().to_string().contains("cpu.kind_us.eventual.get_req"));
}

#[test]
fn latency_by_rounds_tells_one_round_two_round_and_indirected_reads_apart() {
    use causeway_protocols::explicit_deps::eiger::Eiger;
    // Gets and 2-key WOTs over few keys: Eiger's gets meet pending
    // transactions and take a second round; Eventual's never do.
    let mut sc = common::base(1, 4, 2_000, 3);
    sc.latency_by_rounds = true;
    sc.workload.clients_per_dc = 8;
    sc.workload.recordcount = 8;
    sc.workload.readproportion = 0.5;
    sc.workload.updateproportion = 0.0;
    sc.workload.wotproportion = 0.5;
    sc.workload.wot_size = 2;
    sc.workload.rot_partitions = 2;
    sc.workload.preload = true;
    // Jitter lets a second-round read overtake the cohort's COMMIT, so
    // that the cohort must ask the coordinator (an indirected read).
    sc.network.jitter_pct = 30.0;
    let e = Sim::<Eiger>::new(sc.clone()).unwrap().run();
    let count = |name: &str| e.latency.get(name).map_or(0, |s| s.count);
    let (one, two, indirected) = (count("get_1round"), count("get_2rounds"), count("get_indirected"));
    assert!(two > 0 && one > two, "{one} one-round and {two} two-round gets");
    // Second-round reads answered after a commit check are reported apart
    // (Lloyd Table 7.4's "Eiger indirected"), out of their rounds bucket:
    // the buckets partition the gets.
    assert!(indirected > 0, "{indirected} indirected gets");
    assert_eq!(one + two + indirected + count("get_3plus_rounds"), count("get"));
    assert!(e.latency["get_indirected"].mean_us > e.latency["get_1round"].mean_us);
    assert!(e.latency["get_2rounds"].mean_us > e.latency["get_1round"].mean_us);
    assert_eq!(e.latency["wot_1round"].count, e.latency["wot"].count);
    let ev = Sim::<Eventual>::new(sc.clone()).unwrap().run();
    assert_eq!(ev.latency["get_1round"].count, ev.latency["get"].count);
    assert!(!ev.latency.contains_key("get_indirected"), "Eventual notes nothing");
    // A WOT counts its keys in the keys' throughput.
    assert!(ev.throughput_keys_s > 1.4 * ev.throughput_ops_s, "{} {}", ev.throughput_keys_s, ev.throughput_ops_s);
    // Off by default.
    sc.latency_by_rounds = false;
    assert!(!Sim::<Eventual>::new(sc).unwrap().run().latency.contains_key("get_1round"));
}

/// Lloyd §5.3 (Fig 5.5): a read-only transaction takes at most two rounds
/// of reads (a second-round read that meets a pending transaction asks its
/// coordinator — §5.4's `commit_check` — server-side, not a third client
/// round), and exactly one when nothing is written concurrently. Counted
/// by the simulator per operation (`latency_by_rounds`), over two seeds,
/// with readers in both DCs.
#[test]
fn eiger_reads_take_at_most_two_rounds_and_one_when_nothing_is_written() {
    use causeway_protocols::explicit_deps::eiger::Eiger;
    for seed in 1..=2 {
        // Contended: 16 keys, ROTs, gets, PUTs and WOTs from both DCs, with
        // jitter so that reads meet pending and freshly committed writes.
        let mut sc = common::base(2, 4, 600, seed);
        sc.latency_by_rounds = true;
        sc.workload.dcs = vec![0, 1];
        sc.workload.clients_per_dc = 8;
        sc.workload.recordcount = 16;
        sc.workload.preload = true;
        sc.workload.readproportion = 0.2;
        sc.workload.rotproportion = 0.4;
        sc.workload.rot_size = 4;
        sc.workload.rot_partitions = 3;
        sc.workload.updateproportion = 0.2;
        sc.workload.wotproportion = 0.2;
        sc.workload.wot_size = 3;
        sc.network.jitter_pct = 30.0;
        let r = Sim::<Eiger>::new(sc.clone()).unwrap().run();
        let count = |name: &str| r.latency.get(name).map_or(0, |s| s.count);
        let (rots, gets) = (count("rot"), count("get"));
        assert!(rots > 2_000 && gets > 1_000, "seed {seed}: {rots} ROTs, {gets} gets");
        assert!(count("rot_2rounds") + count("rot_indirected") > 0, "seed {seed}: no ROT ever needed a second round");
        assert_eq!(count("rot_3plus_rounds"), 0, "seed {seed}: ROTs of three rounds or more");
        assert_eq!(count("get_3plus_rounds"), 0, "seed {seed}: gets of three rounds or more");

        // Quiet: the same keys written once by the load phase, then only
        // ROTs, measured after a warm-up that covers the load phase and
        // each client's first ROTs (which may take two rounds: the servers'
        // clocks differ until a client's requests carry the largest).
        sc.workload.readproportion = 0.0;
        sc.workload.updateproportion = 0.0;
        sc.workload.wotproportion = 0.0;
        sc.workload.rotproportion = 1.0;
        sc.warmup_ms = 200;
        let r = Sim::<Eiger>::new(sc).unwrap().run();
        let count = |name: &str| r.latency.get(name).map_or(0, |s| s.count);
        assert!(count("rot") > 5_000, "seed {seed}: {} quiet ROTs", count("rot"));
        assert_eq!(count("rot_1round"), count("rot"), "seed {seed}: quiet ROTs that took more than one round");
    }
}
