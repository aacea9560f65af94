//! Seed 004 (Didona et al., Contrarian vs CC-LO vs Cure) on the real state
//! machines: the CPU time a server spends per message it handles, per
//! message kind, for each protocol under the paper's default workload, and
//! the simulator's CPU cost model (`[scenario.cpu] service_us` per message +
//! `us_per_kib` per KiB of it) fitted to those measurements.
//!
//! ```text
//! cargo run --release -p causeway-bench --example rot_microbench [-- --reps 3 --ops 60000 --clients 64 --zipf 0.99 --w 0.05]
//! ```
//!
//! Setup: one DC of 8 partitions (`--dcs 2` for two), `--clients` closed-loop
//! sessions running the protocols' own clients, the paper's workload
//! (Table 1 defaults: ROTs of 4 keys on 4 distinct partitions, write ratio
//! w = #PUT / (#PUT + #keys read) = 0.05, 8-byte values (here 10, the
//! workload's minimum), zipfian 0.99 over the key space), drawn by the
//! simulator's own generator, on the harness of
//! [`causeway_bench::microbench`]: every message is delivered at once, FIFO,
//! in this process, to the real node core, and a server's time is measured
//! around exactly its work on one input — decoding the frame with the
//! network runtime's codec, the node's step (handler and channel
//! bookkeeping), encoding the turn's log records, and encoding what it
//! sends — without sockets, threads, or the log's writes and syncs. Client
//! work is not counted. Virtual time advances `--us-per-msg` (default 2) µs
//! per message delivered, so timers (Contrarian's and Cure's 5 ms
//! stabilization, CC-LO's 500 ms reader TTL) fire at a plausible rate.
//!
//! Output: per protocol, CPU µs per operation (all servers), messages and
//! KiB per operation; per message kind, count, mean size and mean µs; then
//! the least-squares fit µs = a + b × KiB over every (protocol, kind) mean,
//! weighted by count, and how well that model predicts each protocol's
//! measured CPU per operation. Protocols and repetitions alternate; medians
//! over repetitions.

use causeway_bench::microbench::closed_loop::{ClosedLoop, Measured};
use causeway_bench::microbench::{KindStat, alternating_rounds, median};
use causeway_core::{DcId, Protocol, Topology, TopologySpec};
use causeway_protocols::{cc_lo::CcLo, contrarian::Contrarian, cure::Cure};
use causeway_sim::Workload;
use causeway_sim::scenario::Distribution;
use std::sync::Arc;
use std::time::Instant;

#[derive(Clone, Copy, clap::Args)]
struct Opts {
    /// Repetitions (protocols alternate within each; medians over them).
    #[arg(long, default_value_t = 3)]
    reps: u64,
    /// Measured operations per run (after `ops / 2` warm-up operations).
    #[arg(long, default_value_t = 60_000)]
    ops: u64,
    /// Closed-loop client sessions in all, spread evenly over the DCs.
    #[arg(long, default_value_t = 64)]
    clients: u32,
    /// DCs (each a full replica).
    #[arg(long, default_value_t = 1)]
    dcs: u16,
    /// Partitions per DC.
    #[arg(long, default_value_t = 8)]
    partitions: u32,
    /// Zipfian constant of the key distribution (0: uniform).
    #[arg(long, value_name = "Z", default_value_t = 0.99)]
    zipf: f64,
    /// Write ratio w = #PUT / (#PUT + #keys read).
    #[arg(long, default_value_t = 0.05)]
    w: f64,
    /// Virtual µs per message delivered.
    #[arg(long, default_value_t = 2)]
    us_per_msg: u64,
    /// Factor the cost model's µs are multiplied by.
    #[arg(long, default_value_t = 20.0)]
    scale: f64,
}

/// Seed 004: per-message server CPU of Contrarian, CC-LO and Cure, and the fitted cost model.
#[derive(clap::Parser)]
#[command(args_override_self = true)]
struct Args {
    #[command(flatten)]
    opts: Opts,
    /// Write the fitted cost model to this TOML file (with the command line that made it).
    #[arg(long, value_name = "FILE")]
    costs_out: Option<std::path::PathBuf>,
}

/// The command line, for the cost file's record of how it was made.
fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("cargo run --release -p causeway-bench --example rot_microbench -- {}", args.join(" "))
}

fn measure<P: Protocol>(opts: Opts, params: &str, seed: u64) -> Measured {
    let topology = Arc::new(Topology::new(TopologySpec::full(opts.dcs, opts.partitions)).expect("valid topology"));
    let cfg: P::Config = toml::from_str(params).expect("valid protocol parameters");
    // w = u / (u + 4 r) with u + r = 1 (every ROT reads 4 keys).
    let u = 4.0 * opts.w / (1.0 + 3.0 * opts.w);
    let workload = Workload {
        clients_per_dc: opts.clients / opts.dcs as u32,
        recordcount: 100_000,
        readproportion: 0.0,
        updateproportion: u,
        rotproportion: 1.0 - u,
        rot_size: 4,
        rot_partitions: 4,
        requestdistribution: if opts.zipf > 0.0 { Distribution::Zipfian } else { Distribution::Uniform },
        zipfian_constant: if opts.zipf > 0.0 { opts.zipf } else { 0.99 },
        fieldlength: 10,
        ..Workload::default()
    };
    let n = workload.clients_per_dc as usize * opts.dcs as usize;
    let client_dc = (0..n).map(|c| DcId((c % opts.dcs as usize) as u16)).collect();
    ClosedLoop::<P>::new(topology, &cfg, workload, client_dc, seed, opts.us_per_msg).measure(opts.ops)
}

const VARIANTS: [(&str, &str); 4] = [
    ("contrarian (1½ rounds)", "rot_steps = 3"),
    ("contrarian (2 rounds)", "rot_steps = 4"),
    ("cclo", ""),
    ("cure", ""),
];

fn run_variant(v: usize, opts: Opts, seed: u64) -> Measured {
    match v {
        0 | 1 => measure::<Contrarian>(opts, VARIANTS[v].1, seed),
        2 => measure::<CcLo>(opts, VARIANTS[v].1, seed),
        _ => measure::<Cure>(opts, VARIANTS[v].1, seed),
    }
}

fn main() {
    let Args { opts: o, costs_out } = clap::Parser::parse();
    let started = Instant::now();
    let mut all: Vec<Vec<Measured>> = vec![Vec::new(); VARIANTS.len()];
    alternating_rounds(o.reps, VARIANTS.len(), |v, rep| all[v].push(run_variant(v, o, rep)));
    println!(
        "{} repetition(s) × {} measured operations (after {} warm-up), {} DC(s) × {} partitions, {} clients, \
         w = {}, zipf {}, ROTs of 4 keys on 4 partitions, 10-byte values; medians. CPU = decode + node step + \
         log encoding + encode of each server input (timers included)\n",
        o.reps,
        o.ops,
        o.ops / 2,
        o.dcs,
        o.partitions,
        o.clients,
        o.w,
        o.zipf
    );
    println!(
        "| protocol | server CPU µs/op | server msgs/op | KiB in/op | µs/msg | readers_check_ids mean | failed ops |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let med = |v: usize, f: &dyn Fn(&Measured) -> f64| median(all[v].iter().map(f).collect());
    for (v, (name, _)) in VARIANTS.iter().enumerate() {
        let ids = med(v, &|m| m.samples.get("readers_check_ids").map_or(f64::NAN, |(n, s)| *s as f64 / *n as f64));
        println!(
            "| {name} | {:.2} | {:.2} | {:.3} | {:.2} | {} | {} |",
            med(v, &|m| m.us_per_op()),
            med(v, &|m| m.msgs_per_op()),
            med(v, &|m| m.kib_per_op()),
            med(v, &|m| m.us_per_op() / m.msgs_per_op()),
            if ids.is_nan() { "–".to_string() } else { format!("{ids:.1}") },
            med(v, &|m| m.failed as f64),
        );
    }
    // Per kind: the median over repetitions of each kind's mean size and time.
    println!("\n| protocol | message kind | per op | mean bytes | mean µs |");
    println!("|---|---|---:|---:|---:|");
    for (v, (name, _)) in VARIANTS.iter().enumerate() {
        let kinds: std::collections::BTreeSet<&str> = all[v].iter().flat_map(|m| m.kinds.keys().copied()).collect();
        for k in kinds {
            let stat = |f: &dyn Fn(&KindStat, &Measured) -> f64| {
                median(all[v].iter().filter_map(|m| m.kinds.get(k).map(|s| f(s, m))).collect())
            };
            let per_op = stat(&|s, m| s.n as f64 / m.ops as f64);
            let bytes = stat(&|s, _| s.bytes as f64 / s.n as f64);
            let us = stat(&|s, _| s.ns as f64 / 1e3 / s.n as f64);
            println!("| {name} | {k} | {per_op:.3} | {bytes:.0} | {us:.2} |");
        }
    }
    // The readers check's cost grows with what it collects (Fig. 6): CC-LO
    // at several client counts, the check's CPU (request at the asked
    // partition + reply at the writer's) against the reply's size.
    println!("\nCC-LO's readers check against the number of clients (medians):\n");
    println!("| clients | readers_check_ids | check_reply bytes | check_req µs | check_reply µs | cclo µs/op |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut pts: Vec<(f64, f64)> = Vec::new(); // (reply KiB, req + reply µs)
    for clients in [16, 64, 256] {
        let oc = Opts { clients, ..o };
        let ms: Vec<Measured> = (0..o.reps).map(|rep| run_variant(2, oc, rep + 1)).collect();
        let m = |f: &dyn Fn(&Measured) -> f64| median(ms.iter().map(f).collect());
        let kind = |k: &'static str, f: fn(&KindStat) -> f64| m(&move |x| x.kinds.get(k).map_or(f64::NAN, f));
        let bytes = kind("check_reply", |s| s.bytes as f64 / s.n as f64);
        let (req, rep) = (
            kind("check_req", |s| s.ns as f64 / 1e3 / s.n as f64),
            kind("check_reply", |s| s.ns as f64 / 1e3 / s.n as f64),
        );
        let ids = m(&|x| x.samples.get("readers_check_ids").map_or(f64::NAN, |(n, s)| *s as f64 / *n as f64));
        println!("| {clients} | {ids:.1} | {bytes:.0} | {req:.2} | {rep:.2} | {:.2} |", m(&|x| x.us_per_op()));
        pts.push((bytes / 1024.0, req + rep));
    }
    let n = pts.len() as f64;
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let b = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
    println!("\nSlope of the readers check's CPU against its reply's size: {b:.2} µs per KiB\n");
    // The cost model: us_per_kib = F·b for every message, plus, per protocol
    // and message kind, F·(measured mean − b × mean KiB), so that each kind
    // costs what it measured at this load and the readers check grows with
    // what it carries. F slows the simulated cluster so it saturates with
    // few clients (latencies ×F, throughputs ÷F against real time).
    let f = o.scale;
    println!("Calibrated cost model (×{f}), for an experiment's [scenario.cpu]:\n");
    println!("```toml\n[scenario.cpu]\nservice_us = 0\nus_per_kib = {:.0}", f * b);
    let mut model_per_op = vec![0.0; VARIANTS.len()];
    let mut kind_us: std::collections::BTreeMap<&str, Vec<(&str, f64)>> = Default::default();
    for (proto, variants) in [("contrarian", &[0usize, 1][..]), ("cclo", &[2][..]), ("cure", &[3][..])] {
        println!("[scenario.cpu.kind_us.{proto}]");
        let kinds: std::collections::BTreeSet<&str> =
            variants.iter().flat_map(|&v| all[v].iter().flat_map(|m| m.kinds.keys().copied())).collect();
        let ms: Vec<&Measured> = variants.iter().flat_map(|&v| all[v].iter()).collect();
        // CC-LO's timer expires reader records: work per record made, so
        // it is charged to the read that made it (its rate follows the
        // load), not per tick (the microbenchmark's virtual time runs much
        // faster than the simulated cluster's).
        let amortized = |m: &Measured, k: &str| -> f64 {
            let (Some(t), Some(r)) = (m.kinds.get("timer"), m.kinds.get("rot_req")) else { return 0.0 };
            if proto == "cclo" && k == "rot_req" { t.ns as f64 / 1e3 / r.n as f64 } else { 0.0 }
        };
        for k in kinds {
            if proto == "cclo" && k == "timer" {
                continue;
            }
            // Pooled over the variants sharing the protocol's kinds.
            let per = |g: &dyn Fn(&KindStat, &Measured) -> f64| {
                median(ms.iter().filter_map(|m| m.kinds.get(k).map(|s| g(s, m))).collect())
            };
            let us = per(&|s, m| s.ns as f64 / 1e3 / s.n as f64 + amortized(m, k));
            let kib = per(&|s, _| s.bytes as f64 / 1024.0 / s.n as f64);
            let c = (us - b * kib).max(0.0);
            println!("{k} = {:.1}", f * c);
            kind_us.entry(proto).or_default().push((k, (f * c * 10.0).round() / 10.0));
            for &v in variants {
                let per_op =
                    median(all[v].iter().filter_map(|m| m.kinds.get(k).map(|s| s.n as f64 / m.ops as f64)).collect());
                if per_op.is_finite() {
                    model_per_op[v] += per_op * (c + b * kib);
                }
            }
        }
    }
    println!("```\n");
    println!("| protocol | measured µs/op | model µs/op | model / measured | measured capacity vs contrarian 1½ |");
    println!("|---|---:|---:|---:|---:|");
    let base = med(0, &|m| m.us_per_op());
    for (v, (name, _)) in VARIANTS.iter().enumerate() {
        let meas = med(v, &|m| m.us_per_op());
        println!(
            "| {name} | {meas:.2} | {:.2} | {:.2} | {:.2} |",
            model_per_op[v],
            model_per_op[v] / meas,
            base / meas
        );
    }
    if let Some(path) = costs_out {
        write_costs(&path, &o, (f * b).round(), &kind_us, &model_per_op, &all);
    }
    eprintln!("done in {:.0} s", started.elapsed().as_secs_f64());
}

/// The cost file experiments name with `cpu_costs`.
fn write_costs(
    path: &std::path::Path,
    o: &Opts,
    us_per_kib: f64,
    kind_us: &causeway_bench::microbench::KindCosts<'_>,
    model_per_op: &[f64],
    all: &[Vec<Measured>],
) {
    let mut header = format!(
        "CPU cost model of Contrarian, CC-LO and Cure (Didona et al., \"Causal\n\
         Consistency and Latency Optimality: Friend or Foe?\", §5), measured on\n\
         the real state machines\n\
         (decode + node step + log encoding + encode per server input; no sockets,\n\
         syscalls or disk), scaled ×{} so the simulated cluster saturates with few\n\
         clients. Written by the command below; do not edit by hand, rerun it.\n\
         Measured µs per operation (model / measured):\n",
        o.scale
    );
    for (v, (name, _)) in VARIANTS.iter().enumerate() {
        let meas = median(all[v].iter().map(|m| m.us_per_op()).collect());
        header.push_str(&format!("  {name}: {meas:.2} ({:.2})\n", model_per_op[v] / meas));
    }
    header.push_str(&format!(
        "Workload: {} DC(s) × {} partitions, {} clients, w = {}, zipf {}, ROTs of 4 keys.\n\
         The fixed cost of a message on a real network stack (syscalls, framing)\n\
         is not in here: service_us stays 0 and experiments that need it sweep it.",
        o.dcs, o.partitions, o.clients, o.w, o.zipf
    ));
    causeway_bench::microbench::write_cost_file(path, &header, &command_line(), o.scale, us_per_kib, kind_us);
}
