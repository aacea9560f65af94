//! How long the checker takes on a 100 000-operation history.
//!
//! ```sh
//! cargo run --release -p causeway-check --example check_100k            # 3 DCs × 16 clients
//! cargo run --release -p causeway-check --example check_100k -- 64 200000   # 3 DCs × 64 clients, 200k ops
//! cargo run --release -p causeway-check --example check_100k -- 16 100000 0.1  # 10% write-only transactions
//! ```
//!
//! Simulates Eventual (with ROTs, clock skew and a partition, so the history
//! is full of violations to explain) long enough to record at least the
//! requested number of operations (the whole run is kept: cutting it short
//! could orphan reads from their writes), and times
//! `causeway_check::check` on one core at level causal+.

use causeway_check::{CheckConfig, Level, check};
use causeway_core::TopologySpec;
use causeway_protocols::eventual::Eventual;
use causeway_sim::{Fault, FaultKind, Scenario, Sim};
use std::time::Instant;

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).take(2).map(|a| a.parse().expect("numbers")).collect();
    let clients_per_dc = args.first().copied().unwrap_or(16) as u32;
    let want = args.get(1).copied().unwrap_or(100_000) as usize;
    let wots: f64 = std::env::args().nth(3).map(|a| a.parse().expect("a proportion")).unwrap_or(0.0);

    // A short probe run first, then one scaled to the wanted size.
    let mut sc = Scenario::new(TopologySpec::full(3, 8), 50);
    sc.seed = 42;
    sc.network.default_rtt_ms = 40.0;
    sc.network.intra_dc_us = 200;
    sc.network.jitter_pct = 5.0;
    sc.record_history = true;
    sc.count_bytes = false;
    sc.workload.clients_per_dc = clients_per_dc;
    sc.workload.recordcount = 10_000;
    sc.workload.rotproportion = 0.1;
    sc.workload.wotproportion = wots;
    sc.workload.wot_size = 3;
    sc.clocks.skew_us = 2_000;
    sc.drain_ms = 200;
    let history = loop {
        let mut sim = Sim::<Eventual>::new(sc.clone()).expect("valid scenario");
        sim.run();
        let h = sim.take_history().expect("recorded");
        if h.ops.len() >= want {
            break h;
        }
        sc.duration_ms = sc.duration_ms * want as u64 * 21 / 20 / h.ops.len().max(1) as u64 + 1;
        // A partition in the middle third of the run.
        let third = sc.duration_ms / 3;
        sc.faults = vec![
            Fault { at_ms: third, at_us: 0, kind: FaultKind::Cut { a: 0, b: 2 } },
            Fault { at_ms: 2 * third, at_us: 0, kind: FaultKind::Heal { a: 0, b: 2 } },
        ];
    };

    let start = Instant::now();
    let report = check(&history, &CheckConfig::at(Level::CausalPlus));
    let took = start.elapsed();
    let text = report.to_string();
    println!("{}", text.lines().take(16).collect::<Vec<_>>().join("\n"));
    println!(
        "\nchecked {} ops ({} sessions) in {:.3} s ({:.0} ops/s)",
        report.stats.ops,
        report.stats.sessions,
        took.as_secs_f64(),
        report.stats.ops as f64 / took.as_secs_f64()
    );
}
