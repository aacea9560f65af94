//! Seed 001 (Lloyd, Ch. 7; Lloyd et al. NSDI 2013 §6), Eiger against
//! Eventual on the real state machines: the CPU time a server spends per
//! message it handles, per message kind, under the dynamic workload's
//! defaults (Table 7.5), and the simulator's CPU cost model fitted to it
//! (`[scenario.cpu] us_per_kib` + `[scenario.cpu.kind_us.<protocol>]`).
//!
//! ```text
//! cargo run --release -p causeway-bench --example eiger_microbench [-- --reps 3 --ops 40000 --scale 50]
//! ```
//!
//! Setup: two DCs of 8 partitions, `--clients` closed-loop sessions in DC 0
//! only (the paper's clients load one cluster, which replicates to the
//! other), running the protocols' own clients under Table 7.5's defaults:
//! every read a read-only transaction of `--keys-read` (5) keys, a write
//! fraction `--w` (0.1) of operations writing `--keys-write` (5) keys,
//! `--wtf` (0.5) of them as write-only transactions and the rest as
//! independent PUTs (one after another; `--batches 1`: one non-atomic batch
//! sent at once), `--value` (128) byte values, uniform over `--records`
//! (100 000) keys, `--columns-read` and `--columns-write` (1) columns per
//! key (Table 7.5's default is 5; the simulator's `columns_per_read` and
//! `columns_per_write`). `--preload 1` runs YCSB's load phase first, as
//! the simulator's `preload` does (each client writes its share of the
//! rows, every column): it must fit in the warm-up (`--ops` / 2
//! operations), so that reads find values.
//! The harness is [`causeway_bench::microbench`], `rot_microbench`'s too:
//! every message is delivered at once, FIFO, in this process, to the real
//! node core; a server's time is measured around decoding the frame with
//! the network runtime's codec, the node's step (handler and channel
//! bookkeeping), encoding the turn's log records, and encoding what it
//! sends, without sockets, threads, or the log's writes and syncs. Client
//! work is not counted.
//!
//! The fit: the run is repeated with 4 KiB values; the per-KiB slope
//! (`us_per_kib`) is the count-weighted mean over message kinds whose size
//! grew of Δµs / ΔKiB, and each kind's `kind_us` is its mean µs at the
//! default workload less that slope times its mean size. Output in µs × `--scale`.
//!
//! Other protocols, other workloads. `--protocols` names the protocols
//! measured (default `eiger,eventual`; also `gentlerain`, `causalspartanx`,
//! `cops`, with their default parameters), and `--reads get` makes every
//! read a single-key GET instead of a ROT (with `--keys-write 1 --wtf 0`,
//! every write a single-key PUT): the plain GET/PUT mix of Roohitavaf's
//! evaluation (*Consistency for Distributed Data Stores*, §5.5 Fig 5.5 and
//! §8.5 Figs 8.4–8.6: DKVF's 2 replicas × 3 partitions, 90 YCSB threads
//! attached to one replica, 64-byte values, GET:PUT 0.5:0.5), whose cost
//! file was written by
//!
//! ```text
//! cargo run --release -p causeway-bench --example eiger_microbench -- --protocols eventual,gentlerain,causalspartanx,cops \
//!   --reads get --keys-write 1 --wtf 0 --w 0.5 --dcs 2 --partitions 3 --clients 90 --value 64 \
//!   --records 1000 --reps 5 --ops 100000 --scale 50 --costs-out FILE
//! ```
//!
//! (`FILE`: the `cpu_costs` of the experiment files for those figures,
//! under docs/experiments/costs/; the file records this command.)

use causeway_bench::microbench::closed_loop::{ClosedLoop, Measured};
use causeway_bench::microbench::{KindStat, alternating_rounds, median};
use causeway_core::{DcId, Protocol, Topology, TopologySpec};
use causeway_protocols::baseline::eventual::Eventual;
use causeway_protocols::explicit_deps::{cops::Cops, eiger::Eiger};
use causeway_protocols::stabilization::{causal_spartan_x::CausalSpartanX, gentlerain::GentleRain};
use causeway_sim::Workload;
use causeway_sim::scenario::Distribution;
use clap::ArgAction;
use clap::builder::TypedValueParser;
use std::sync::Arc;
use std::time::Instant;

#[derive(Clone, Copy, clap::Args)]
struct Opts {
    /// Repetitions (protocols alternate within each; medians over them).
    #[arg(long, default_value_t = 3)]
    reps: u64,
    /// Measured operations per run (after `ops / 2` warm-up operations).
    #[arg(long, default_value_t = 40_000)]
    ops: u64,
    /// Closed-loop client sessions, all in DC 0.
    #[arg(long, default_value_t = 64)]
    clients: u32,
    /// DCs (each a full replica).
    #[arg(long, default_value_t = 2)]
    dcs: u16,
    /// Partitions per DC.
    #[arg(long, default_value_t = 8)]
    partitions: u32,
    /// Value size in bytes (the run is repeated with 4096-byte values for the fit).
    #[arg(long, default_value_t = 128)]
    value: usize,
    /// Keys per read-only transaction.
    #[arg(long, default_value_t = 5)]
    keys_read: usize,
    /// Keys per write (transaction or independent PUTs).
    #[arg(long, default_value_t = 5)]
    keys_write: usize,
    /// Write fraction of operations (0..=1).
    #[arg(long, default_value_t = 0.1)]
    w: f64,
    /// Fraction of writes that are write-only transactions (the rest independent PUTs).
    #[arg(long, default_value_t = 0.5)]
    wtf: f64,
    /// Virtual µs per message delivered.
    #[arg(long, default_value_t = 2)]
    us_per_msg: u64,
    /// Factor the cost model's µs are multiplied by.
    #[arg(long, default_value_t = 50.0)]
    scale: f64,
    /// 1: non-transactional writes as one non-atomic batch each, 0: PUTs one after another.
    #[arg(long, value_name = "0|1", default_value = "0", action = ArgAction::Set, value_parser = zero_one())]
    batches: bool,
    /// Columns per key read (Table 7.5's default is 5; 1, plain keys, is what the cost model was first fitted to).
    #[arg(long, default_value_t = 1)]
    columns_read: usize,
    /// Columns per key written (Table 7.5's default is 5; 1, plain keys, as for reads).
    #[arg(long, default_value_t = 1)]
    columns_write: usize,
    /// Keys (rows) in the key space.
    #[arg(long, default_value_t = 100_000)]
    records: u64,
    // YCSB's load phase first (each client writes its share of the rows,
    // in every column read or written), inside the warm-up: reads then
    // find values, as in the simulator's runs with `preload`.
    /// 1: YCSB's load phase first, inside the warm-up (needs --records ≤ --ops / 2).
    #[arg(long, value_name = "0|1", default_value = "0", action = ArgAction::Set, value_parser = zero_one())]
    preload: bool,
    /// Reads as single-key GETs (`get`) or as read-only transactions (`rot`).
    #[arg(long = "reads", value_name = "rot|get", default_value = "rot", action = ArgAction::Set,
          value_parser = clap::builder::PossibleValuesParser::new(["rot", "get"]).map(|s| s == "get"))]
    gets: bool,
}

/// `0` or `1`, as false or true.
fn zero_one() -> impl clap::builder::TypedValueParser<Value = bool> {
    clap::builder::PossibleValuesParser::new(["0", "1"]).map(|s| s == "1")
}

/// Seed 001: per-message server CPU of Eiger and other protocols, and the fitted cost model.
#[derive(clap::Parser)]
#[command(args_override_self = true)]
struct Args {
    #[command(flatten)]
    opts: Opts,
    /// Protocols measured, comma-separated.
    #[arg(long, value_name = "P,Q,…", value_delimiter = ',', default_value = "eiger,eventual",
          value_parser = clap::builder::PossibleValuesParser::new(KNOWN).map(known))]
    protocols: Vec<&'static str>,
    /// Write the fitted cost model to this TOML file (with the command line that made it).
    #[arg(long, value_name = "FILE")]
    costs_out: Option<std::path::PathBuf>,
}

/// `p` as the entry of `KNOWN` (the parser has checked it is one).
fn known(p: String) -> &'static str {
    KNOWN.iter().copied().find(|k| *k == p).expect("checked against KNOWN")
}

fn measure<P: Protocol>(opts: Opts, params: &str, seed: u64) -> Measured {
    let topology = Arc::new(Topology::new(TopologySpec::full(opts.dcs, opts.partitions)).expect("valid topology"));
    let cfg: P::Config = toml::from_str(params).expect("valid protocol parameters");
    let workload = Workload {
        clients_per_dc: opts.clients,
        dcs: vec![0],
        recordcount: opts.records,
        preload: opts.preload,
        readproportion: if opts.gets { 1.0 - opts.w } else { 0.0 },
        rotproportion: if opts.gets { 0.0 } else { 1.0 - opts.w },
        rot_size: opts.keys_read,
        wotproportion: opts.w * opts.wtf,
        wot_size: opts.keys_write,
        updateproportion: if opts.batches { 0.0 } else { opts.w * (1.0 - opts.wtf) },
        batchproportion: if opts.batches { opts.w * (1.0 - opts.wtf) } else { 0.0 },
        update_size: opts.keys_write,
        requestdistribution: Distribution::Uniform,
        fieldlength: opts.value,
        columns_per_read: opts.columns_read,
        columns_per_write: opts.columns_write,
        ..Workload::default()
    };
    let client_dc = vec![DcId(0); workload.clients_per_dc as usize];
    ClosedLoop::<P>::new(topology, &cfg, workload, client_dc, seed, opts.us_per_msg).measure(opts.ops)
}

/// The protocols `--protocols` may name.
const KNOWN: [&str; 5] = ["eiger", "eventual", "gentlerain", "causalspartanx", "cops"];

fn run_variant(name: &str, opts: Opts, seed: u64) -> Measured {
    match name {
        "eiger" => measure::<Eiger>(opts, "", seed),
        "eventual" => measure::<Eventual>(opts, "", seed),
        "gentlerain" => measure::<GentleRain>(opts, "", seed),
        "causalspartanx" => measure::<CausalSpartanX>(opts, "", seed),
        "cops" => measure::<Cops>(opts, "", seed),
        _ => unreachable!("checked against KNOWN"),
    }
}

fn kind_mean(ms: &[Measured], k: &str, f: fn(&KindStat) -> f64) -> f64 {
    median(ms.iter().filter_map(|m| m.kinds.get(k).filter(|s| s.n > 0).map(f)).collect())
}

fn main() {
    let Args { opts: o, protocols, costs_out } = clap::Parser::parse();
    if o.preload && o.records > o.ops / 2 {
        eprintln!(
            "--preload 1 needs --records ({}) at most --ops / 2 ({}): the load phase runs in the warm-up",
            o.records,
            o.ops / 2
        );
        std::process::exit(2);
    }
    let started = Instant::now();
    let big = Opts { value: 4096, ..o };
    let variants = protocols.as_slice();
    let mut all: Vec<Vec<Measured>> = vec![Vec::new(); variants.len()];
    let mut all_big: Vec<Vec<Measured>> = vec![Vec::new(); variants.len()];
    alternating_rounds(o.reps, variants.len(), |v, rep| {
        all[v].push(run_variant(variants[v], o, rep));
        all_big[v].push(run_variant(variants[v], big, rep));
    });
    println!(
        "{} repetition(s) × {} measured operations (after {} warm-up), {} DC(s) × {} partitions, {} clients in DC 0, \
         {}{} keys, write fraction {} of {}-key writes ({} of them WOTs, the rest independent PUTs), {}-byte \
         values, {} column(s) per key read and {} per key written, uniform over {} keys{}; medians. CPU = decode + node step + \
         log encoding + encode of each server input (timers included), all DCs\n",
        o.reps,
        o.ops,
        o.ops / 2,
        o.dcs,
        o.partitions,
        o.clients,
        if o.gets { "GETs instead of ROTs of " } else { "ROTs of " },
        o.keys_read,
        o.w,
        o.keys_write,
        o.wtf,
        o.value,
        o.columns_read,
        o.columns_write,
        o.records,
        if o.preload { " (written first by a load phase)" } else { "" }
    );
    println!("| protocol | values | server CPU µs/op | server msgs/op | KiB in/op | µs/msg | failed ops |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (set, size) in [(&all, o.value), (&all_big, big.value)] {
        for (v, name) in variants.iter().enumerate() {
            let med = |f: &dyn Fn(&Measured) -> f64| median(set[v].iter().map(f).collect());
            println!(
                "| {name} | {size} B | {:.2} | {:.2} | {:.3} | {:.2} | {} |",
                med(&|m| m.us_per_op()),
                med(&|m| m.msgs_per_op()),
                med(&|m| m.kib_per_op()),
                med(&|m| m.us_per_op() / m.msgs_per_op()),
                med(&|m| m.failed as f64),
            );
        }
    }
    println!("\n| protocol | protocol sample | mean | per op |");
    println!("|---|---|---:|---:|");
    for (v, name) in variants.iter().enumerate() {
        let names: std::collections::BTreeSet<&str> = all[v].iter().flat_map(|m| m.samples.keys().copied()).collect();
        for k in names {
            let mean =
                median(all[v].iter().filter_map(|m| m.samples.get(k).map(|(n, s)| *s as f64 / *n as f64)).collect());
            let per_op =
                median(all[v].iter().filter_map(|m| m.samples.get(k).map(|(n, _)| *n as f64 / m.ops as f64)).collect());
            println!("| {name} | {k} | {mean:.2} | {per_op:.4} |");
        }
    }
    println!(
        "\n| protocol | message kind | per op | mean bytes | mean µs | mean bytes ({} B values) | mean µs |",
        big.value
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    // The slope: Δµs / ΔKiB per kind whose size grew, weighted by count.
    let (mut wsum, mut slope_sum) = (0.0, 0.0);
    for (v, name) in variants.iter().enumerate() {
        let kinds: std::collections::BTreeSet<&str> = all[v].iter().flat_map(|m| m.kinds.keys().copied()).collect();
        for k in kinds {
            let per_op =
                median(all[v].iter().filter_map(|m| m.kinds.get(k).map(|s| s.n as f64 / m.ops as f64)).collect());
            let bytes = kind_mean(&all[v], k, |s| s.bytes as f64 / s.n as f64);
            let us = kind_mean(&all[v], k, |s| s.ns as f64 / 1e3 / s.n as f64);
            let bytes_big = kind_mean(&all_big[v], k, |s| s.bytes as f64 / s.n as f64);
            let us_big = kind_mean(&all_big[v], k, |s| s.ns as f64 / 1e3 / s.n as f64);
            println!("| {name} | {k} | {per_op:.3} | {bytes:.0} | {us:.2} | {bytes_big:.0} | {us_big:.2} |");
            let dkib = (bytes_big - bytes) / 1024.0;
            if dkib > 0.5 && us_big.is_finite() {
                let weight = per_op;
                slope_sum += weight * (us_big - us) / dkib;
                wsum += weight;
            }
        }
    }
    let b = if wsum > 0.0 { (slope_sum / wsum).max(0.0) } else { 0.0 };
    println!("\nCPU per KiB of message (count-weighted over kinds that carry values): {b:.2} µs\n");
    let f = o.scale;
    println!("Calibrated cost model (×{f}), for an experiment's [scenario.cpu]:\n");
    println!("```toml\n[scenario.cpu]\nus_per_kib = {:.0}", f * b);
    let mut model_per_op = vec![0.0; variants.len()];
    let mut kind_us = causeway_bench::microbench::KindCosts::new();
    for (v, name) in variants.iter().enumerate() {
        println!("\n[scenario.cpu.kind_us.{name}]");
        let kinds: std::collections::BTreeSet<&str> = all[v].iter().flat_map(|m| m.kinds.keys().copied()).collect();
        for k in kinds {
            let us = kind_mean(&all[v], k, |s| s.ns as f64 / 1e3 / s.n as f64);
            let kib = kind_mean(&all[v], k, |s| s.bytes as f64 / 1024.0 / s.n as f64);
            let c = (us - b * kib).max(0.0);
            if k != "start" {
                println!("{k} = {:.1}", f * c);
                kind_us.entry(name).or_default().push((k, (f * c * 10.0).round() / 10.0));
            }
            let per_op =
                median(all[v].iter().filter_map(|m| m.kinds.get(k).map(|s| s.n as f64 / m.ops as f64)).collect());
            if per_op.is_finite() {
                model_per_op[v] += per_op * (c + b * kib);
            }
        }
    }
    println!("```\n");
    println!("| protocol | measured µs/op | model µs/op | model / measured | measured capacity vs eventual |");
    println!("|---|---:|---:|---:|---:|");
    // Capacities relative to Eventual's (or the first protocol's).
    let base_idx = variants.iter().position(|n| *n == "eventual").unwrap_or(0);
    let base = median(all[base_idx].iter().map(|m| m.us_per_op()).collect());
    for (v, name) in variants.iter().enumerate() {
        let meas = median(all[v].iter().map(|m| m.us_per_op()).collect());
        println!(
            "| {name} | {meas:.2} | {:.2} | {:.2} | {:.3} |",
            model_per_op[v],
            model_per_op[v] / meas,
            base / meas
        );
    }
    if let Some(path) = costs_out {
        let whose = if variants == ["eiger", "eventual"] {
            "Eiger and Eventual (Lloyd, \"Scalable and Low-Latency\n\
             Geo-Replicated Storage\", §7.3)"
                .to_string()
        } else {
            variants.join(", ")
        };
        let mut header = format!(
            "CPU cost model of {whose}, measured on the real state machines\n\
             (decode + node step + log encoding + encode per server input; no sockets,\n\
             syscalls or disk), scaled ×{f}. Written by the command below; do not edit\n\
             by hand, rerun it. Measured µs per operation (model / measured):\n"
        );
        for (v, name) in variants.iter().enumerate() {
            let meas = median(all[v].iter().map(|m| m.us_per_op()).collect());
            header.push_str(&format!("  {name}: {meas:.2} ({:.2})\n", model_per_op[v] / meas));
        }
        header.push_str(&if o.gets {
            format!(
                "Workload: {} DC(s) × {} partitions, {} clients in DC 0, single-key GETs and\n\
                 {}-key writes, write fraction w = {} (write txn fraction {}), {} B values.",
                o.dcs, o.partitions, o.clients, o.keys_write, o.w, o.wtf, o.value
            )
        } else {
            format!(
                "Workload: {} DC(s) × {} partitions, {} clients, w = {}, write txn fraction {},\n\
                 {} keys per read and per write, {} columns per key read, {} written, {} B values.",
                o.dcs, o.partitions, o.clients, o.w, o.wtf, o.keys_read, o.columns_read, o.columns_write, o.value
            )
        });
        let args: Vec<String> = std::env::args().skip(1).collect();
        let command = format!("cargo run --release -p causeway-bench --example eiger_microbench -- {}", args.join(" "));
        causeway_bench::microbench::write_cost_file(&path, &header, &command, f, (f * b).round(), &kind_us);
    }
    eprintln!("done in {:.0} s", started.elapsed().as_secs_f64());
}
