//! Seed 003 (Spirovska et al., PaRiS vs BPR) on the real state machines:
//! the CPU time a server spends per message it handles, per message kind,
//! under the paper's transaction workload, written as the simulator's cost
//! model for the seed's experiments.
//!
//! ```text
//! cargo run --release -p causeway-bench --example paris_microbench [-- --reps 3 --ops 20000 --local 0.95]
//! ```
//!
//! Setup (Spirovska et al., §VI): `--dcs` 5 DCs × `--partitions` partitions,
//! each stored in `--rf` 2 of them; `--clients` closed-loop sessions running
//! the protocols' own clients; every operation a read-write transaction of
//! 19 reads and 1 write (`--reads`, `--writes`) over 4 partitions, a
//! `--local` share of them on partitions the client's DC stores, zipfian
//! 0.99 keys, 8-byte values (here 10, the workload's minimum). The harness
//! is [`causeway_bench::microbench`]'s: every message delivered at once,
//! FIFO, in this process, to the real node core, a server's time measured
//! around decode + node step + log encoding + encode of one input, without
//! sockets, threads or disk. Client work is not counted. Protocols and
//! repetitions alternate; medians over repetitions.
//!
//! The cost model charges each (protocol, message kind) its measured mean,
//! ×`--scale`, and nothing per KiB (a transaction's messages are small and
//! alike in size here).

use causeway_bench::microbench::closed_loop::{ClosedLoop, Measured};
use causeway_bench::microbench::{KindCosts, alternating_rounds, median};
use causeway_core::{DcId, Protocol, Replication, Topology, TopologySpec};
use causeway_protocols::paris::{Bpr, Paris};
use causeway_sim::Workload;
use causeway_sim::scenario::Distribution;
use std::sync::Arc;
use std::time::Instant;

#[derive(Clone, Copy, clap::Args)]
struct Opts {
    /// Repetitions (protocols alternate within each; medians over them).
    #[arg(long, default_value_t = 3)]
    reps: u64,
    /// Measured transactions per run (after `ops / 2` warm-up transactions).
    #[arg(long, default_value_t = 20_000)]
    ops: u64,
    /// Closed-loop client sessions in all, spread evenly over the DCs.
    #[arg(long, default_value_t = 100)]
    clients: u32,
    /// DCs.
    #[arg(long, default_value_t = 5)]
    dcs: u16,
    /// Partitions (in all; each stored in --rf DCs).
    #[arg(long, default_value_t = 9)]
    partitions: u32,
    /// Replication factor: DCs storing each partition (full replication if ≥ --dcs).
    #[arg(long, default_value_t = 2)]
    rf: u16,
    /// Reads per transaction.
    #[arg(long, default_value_t = 19)]
    reads: usize,
    /// Writes per transaction.
    #[arg(long, default_value_t = 1)]
    writes: usize,
    /// Fraction of transactions on partitions the client's DC stores.
    #[arg(long, default_value_t = 0.95)]
    local: f64,
    /// Virtual µs per message delivered.
    #[arg(long, default_value_t = 2)]
    us_per_msg: u64,
    /// Factor the cost model's µs are multiplied by.
    #[arg(long, default_value_t = 50.0)]
    scale: f64,
}

/// Seed 003: per-message server CPU of PaRiS and BPR, written as the simulator's cost model.
#[derive(clap::Parser)]
#[command(args_override_self = true)]
struct Args {
    #[command(flatten)]
    opts: Opts,
    /// Write the cost model to this TOML file (with the command line that made it).
    #[arg(long, value_name = "FILE")]
    costs_out: Option<std::path::PathBuf>,
}

impl Opts {
    /// The workload in words, for the table's caption and the cost file.
    fn workload(&self) -> String {
        format!(
            "{} DCs × {} partitions, RF {}, {} clients, {} reads + {} writes over 4 partitions, {:.0} % local, zipf 0.99",
            self.dcs,
            self.partitions,
            self.rf,
            self.clients,
            self.reads,
            self.writes,
            self.local * 100.0
        )
    }
}

const VARIANTS: [&str; 2] = ["paris", "bpr"];

fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("cargo run --release -p causeway-bench --example paris_microbench -- {}", args.join(" "))
}

fn measure<P: Protocol>(o: Opts, seed: u64) -> Measured {
    let mut spec = TopologySpec::full(o.dcs, o.partitions);
    if o.rf < o.dcs {
        spec.replication = Replication::Partial { factor: o.rf };
    }
    let topology = Arc::new(Topology::new(spec).expect("valid topology"));
    let workload = Workload {
        clients_per_dc: o.clients / o.dcs as u32,
        recordcount: 100_000,
        readproportion: 0.0,
        updateproportion: 0.0,
        txnproportion: 1.0,
        txn_reads: o.reads,
        txn_writes: o.writes,
        rot_partitions: 4,
        local_txn_ratio: Some(o.local),
        requestdistribution: Distribution::Zipfian,
        zipfian_constant: 0.99,
        fieldlength: 10,
        ..Workload::default()
    };
    let n = workload.clients_per_dc as usize * o.dcs as usize;
    let client_dc = (0..n).map(|c| DcId((c % o.dcs as usize) as u16)).collect();
    ClosedLoop::<P>::new(topology, &Default::default(), workload, client_dc, seed, o.us_per_msg).measure(o.ops)
}

fn main() {
    let Args { opts: o, costs_out } = clap::Parser::parse();
    let started = Instant::now();
    let mut all: Vec<Vec<Measured>> = vec![Vec::new(); VARIANTS.len()];
    alternating_rounds(o.reps, VARIANTS.len(), |v, rep| {
        all[v].push(if v == 0 { measure::<Paris>(o, rep) } else { measure::<Bpr>(o, rep) })
    });
    println!(
        "{} repetition(s) × {} measured transactions (after {} warm-up), {}; medians\n",
        o.reps,
        o.ops,
        o.ops / 2,
        o.workload()
    );
    println!("| protocol | server CPU µs/txn | server msgs/txn | KiB in/txn | failed |");
    println!("|---|---:|---:|---:|---:|");
    let med = |v: usize, f: &dyn Fn(&Measured) -> f64| median(all[v].iter().map(f).collect());
    for (v, name) in VARIANTS.iter().enumerate() {
        println!(
            "| {name} | {:.2} | {:.2} | {:.3} | {} |",
            med(v, &|m| m.us_per_op()),
            med(v, &|m| m.msgs_per_op()),
            med(v, &|m| m.kib_per_op()),
            med(v, &|m| m.failed as f64)
        );
    }
    println!("\n| protocol | message kind | per txn | mean bytes | mean µs | model µs (×{}) |", o.scale);
    println!("|---|---|---:|---:|---:|---:|");
    let mut kind_us: KindCosts<'_> = Default::default();
    for (v, name) in VARIANTS.iter().enumerate() {
        let kinds: std::collections::BTreeSet<&str> = all[v].iter().flat_map(|m| m.kinds.keys().copied()).collect();
        for k in kinds {
            let stat = |f: &dyn Fn(&causeway_bench::microbench::KindStat, &Measured) -> f64| {
                median(all[v].iter().filter_map(|m| m.kinds.get(k).map(|s| f(s, m))).collect())
            };
            let per_op = stat(&|s, m| s.n as f64 / m.ops as f64);
            let bytes = stat(&|s, _| s.bytes as f64 / s.n as f64);
            let us = stat(&|s, _| s.ns as f64 / 1e3 / s.n as f64);
            let model = (o.scale * us * 10.0).round() / 10.0;
            println!("| {name} | {k} | {per_op:.3} | {bytes:.0} | {us:.2} | {model} |");
            kind_us.entry(name).or_default().push((k, model));
        }
    }
    if let Some(path) = costs_out {
        let mut header = format!(
            "CPU cost model of PaRiS and BPR (Spirovska et al., \"PaRiS: Causally\n\
             Consistent Transactions with Non-blocking Reads and Partial Replication\",\n\
             §VI), measured on the real state machines (decode + node step + log\n\
             encoding + encode per server input; no sockets, syscalls or disk), each\n\
             message kind charged its measured mean, scaled ×{}. Written by the command\n\
             below; do not edit by hand, rerun it. Measured µs per transaction:\n",
            o.scale
        );
        for (v, name) in VARIANTS.iter().enumerate() {
            header.push_str(&format!("  {name}: {:.2}\n", med(v, &|m| m.us_per_op())));
        }
        header.push_str(&format!(
            "Workload: {}.\nNo per-KiB cost, and no fixed per-message network-stack cost.",
            o.workload()
        ));
        causeway_bench::microbench::write_cost_file(&path, &header, &command_line(), o.scale, 0.0, &kind_us);
    }
    eprintln!("done in {:.0} s", started.elapsed().as_secs_f64());
}
