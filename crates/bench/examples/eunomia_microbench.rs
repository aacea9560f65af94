//! Seed 002 (Gunawardhana, Bravo, Rodrigues, "Unobtrusive Deferred Update
//! Stabilization for Efficient Geo-Replication", ATC 2017) on the real
//! state machines: what EunomiaKV's and S-Seq's servers spend per message
//! they handle, per message kind, and the simulator's cost model fitted to
//! it, for the capacity, fault-tolerance and straggler experiments (§7.1,
//! §7.2.3).
//!
//! ```text
//! cargo run --release -p causeway-bench --example eunomia_microbench [-- --reps 3 --ops 40000 --costs-out FILE]
//! ```
//!
//! Setup: 2 DCs × `--partitions` partitions, `--clients` closed-loop
//! sessions in DC 0 writing 100-byte values uniformly over 100 000 keys
//! (the shape of Fig 2: one DC's updates, ordered by its service and
//! shipped to the other; `--reads F` makes a fraction F of the operations
//! GETs, so that reads are measured too), on the harness of
//! [`causeway_bench::microbench`] (decode, node step, log encoding, encode
//! per server input; no sockets or disk). Virtual time advances
//! `--us-per-msg` µs per delivery; two steps (1 and 8 µs) give reports and
//! shipments of different sizes, from which a batch's cost is fitted as
//! µs = a + c × items ([`causeway_core::Message::items`], its updates).
//!
//! Eunomia's own timers (process_stable, which ships) and the receivers'
//! acknowledgements work for the updates reported, so Eunomia's whole CPU
//! beyond what the simulator charges its timers as any node's is charged
//! to its reports: `report` = a + c × updates. Every other kind costs its
//! pooled mean. Scaled ×`--scale` (50) so a simulated cluster saturates
//! with few operations.
//!
//! `--protocols` (default `eunomiakv,sseq`) also takes `gentlerain`, `cure`
//! and `eventual`, the baselines of Figs 1 and 5, measured the same way
//! (every kind its pooled mean), so that one cost file prices every
//! protocol an experiment compares, and `sseq-chain`: S-Seq with its
//! sequencer chain-replicated over 3 replicas (§7.1, Fig 3), whose kinds
//! that a single sequencer never sends (`chain`) join S-Seq's.

use causeway_bench::microbench::closed_loop::ClosedLoop;
use causeway_bench::microbench::{KindCosts, KindStat, alternating_rounds, median};
use causeway_core::{DcId, Protocol, ServiceSpec, Topology, TopologySpec};
use causeway_protocols::cure::Cure;
use causeway_protocols::eventual::Eventual;
use causeway_protocols::gentlerain::GentleRain;
use causeway_protocols::services::eunomia_kv::{EUNOMIA, EunomiaKv};
use causeway_protocols::services::sequencer::{RECEIVER, SEQUENCER, SSeq};
use causeway_sim::Workload;
use clap::builder::TypedValueParser;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Copy, clap::Args)]
struct Opts {
    /// Repetitions (protocols and steps alternate within each; medians over them).
    #[arg(long, default_value_t = 3)]
    reps: u64,
    /// Measured operations per run (after `ops / 2` warm-up operations).
    #[arg(long, default_value_t = 40_000)]
    ops: u64,
    /// Closed-loop client sessions, all in DC 0.
    #[arg(long, default_value_t = 64)]
    clients: u32,
    /// Partitions per DC (2 DCs).
    #[arg(long, default_value_t = 8)]
    partitions: u32,
    /// Factor the cost model's µs are multiplied by.
    #[arg(long, default_value_t = 50.0)]
    scale: f64,
    /// Fraction of operations that are GETs, 0..=1 (the rest are writes).
    #[arg(long, value_name = "F", default_value_t = 0.0, value_parser = fraction)]
    reads: f64,
}

/// A number in 0..=1.
fn fraction(s: &str) -> Result<f64, String> {
    let f: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&f) { Ok(f) } else { Err(format!("{f} is not within 0..=1")) }
}

/// Seed 002: per-message server CPU of EunomiaKV, S-Seq and baselines, and the fitted cost model.
#[derive(clap::Parser)]
#[command(args_override_self = true)]
struct Args {
    #[command(flatten)]
    opts: Opts,
    /// Protocols measured, comma-separated.
    #[arg(long, value_name = "P,Q,…", value_delimiter = ',', default_value = "eunomiakv,sseq",
          value_parser = clap::builder::PossibleValuesParser::new(PROTOCOLS).map(known))]
    protocols: Vec<&'static str>,
    /// Write the fitted cost model to this TOML file (with the command line that made it).
    #[arg(long, value_name = "FILE")]
    costs_out: Option<std::path::PathBuf>,
}

/// `p` as the entry of `PROTOCOLS` (the parser has checked it is one).
fn known(p: String) -> &'static str {
    PROTOCOLS.iter().copied().find(|k| *k == p).expect("checked against PROTOCOLS")
}

/// The two virtual-time steps: small and large batches.
const STEPS_US: [u64; 2] = [1, 8];

/// One run: every node's kinds, and Eunomia's (empty for S-Seq).
#[derive(Clone, Default)]
struct Run {
    ops: u64,
    kinds: BTreeMap<&'static str, KindStat>,
    service: BTreeMap<&'static str, KindStat>,
    service_ns: u64,
}

/// `services`: the topology's service nodes, when not the protocol's defaults.
fn measure<P: Protocol>(o: Opts, us_per_msg: u64, seed: u64, service: Option<&str>, services: Vec<ServiceSpec>) -> Run {
    let mut spec = TopologySpec::full(2, o.partitions);
    spec.services = services;
    let topology = Arc::new(
        Topology::new(causeway_net::config::topology_for(P::NAME.parse().expect("a registered protocol"), &spec))
            .expect("valid topology"),
    );
    let workload = Workload {
        clients_per_dc: o.clients,
        dcs: vec![0],
        recordcount: 100_000,
        readproportion: o.reads,
        updateproportion: 1.0 - o.reads,
        fieldlength: 100,
        ..Workload::default()
    };
    let client_dc = vec![DcId(0); o.clients as usize];
    let mut h = ClosedLoop::<P>::new(topology.clone(), &Default::default(), workload, client_dc, seed, us_per_msg);
    h.run_ops(o.ops / 2);
    h.reset();
    h.run_ops(o.ops);
    let node = service.map(|s| topology.service_nodes(DcId(0), topology.service_index(s).expect("a service"))[0]);
    Run {
        ops: h.completed,
        kinds: h.servers.kinds.clone(),
        service: node.map(|n| h.servers.node_kinds[n.idx()].clone()).unwrap_or_default(),
        service_ns: node.map_or(0, |n| h.servers.busy_ns[n.idx()]),
    }
}

/// The protocols this example can measure, by command-line name.
const PROTOCOLS: [&str; 6] = ["eunomiakv", "sseq", "sseq-chain", "gentlerain", "cure", "eventual"];

/// The cost file's protocol for a measured variant: the chain is S-Seq's.
fn priced_as(p: &'static str) -> &'static str {
    if p == "sseq-chain" { "sseq" } else { p }
}

fn run_variant(v: (&str, usize), o: Opts, seed: u64) -> Run {
    let step = STEPS_US[v.1];
    match v.0 {
        "eunomiakv" => measure::<EunomiaKv>(o, step, seed, Some(EUNOMIA), vec![]),
        "sseq" => measure::<SSeq>(o, step, seed, None, vec![]),
        "sseq-chain" => {
            let chain = vec![
                ServiceSpec { name: SEQUENCER.into(), per_dc: 3 },
                ServiceSpec { name: RECEIVER.into(), per_dc: 1 },
            ];
            measure::<SSeq>(o, step, seed, None, chain)
        }
        "gentlerain" => measure::<GentleRain>(o, step, seed, None, vec![]),
        "cure" => measure::<Cure>(o, step, seed, None, vec![]),
        "eventual" => measure::<Eventual>(o, step, seed, None, vec![]),
        other => unreachable!("{other} is not in PROTOCOLS"),
    }
}

fn display_name(p: &str) -> &'static str {
    match p {
        "eunomiakv" => "EunomiaKV",
        "sseq" => "S-Seq",
        "sseq-chain" => "S-Seq's 3-replica chain",
        "gentlerain" => "GentleRain",
        "cure" => "Cure",
        _ => "Eventual",
    }
}

/// Least squares y = a + c·x over points; (a, c), both at least 0. Batches
/// whose sizes hardly differ (less than 2× apart) give no slope: they cost
/// their mean, all of it fixed.
fn fit(pts: &[(f64, f64)]) -> (f64, f64) {
    let n = pts.len() as f64;
    let (lo, hi) = pts.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    if hi < 2.0 * lo {
        return (median(pts.iter().map(|p| p.1).collect()), 0.0);
    }
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let c = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
    ((my - c * mx).max(0.0), c)
}

fn us(s: &KindStat) -> f64 {
    s.ns as f64 / 1e3 / s.n.max(1) as f64
}
fn items(s: &KindStat) -> f64 {
    s.items as f64 / s.n.max(1) as f64
}

/// Kinds whose messages carry several updates: fitted as a + c × items.
const BATCHED: [&str; 2] = ["ship", "apply"];

fn main() {
    let Args { opts: o, protocols, costs_out } = clap::Parser::parse();
    // Variants: (protocol, step index).
    let variants: Vec<(&str, usize)> =
        protocols.iter().flat_map(|p| (0..STEPS_US.len()).map(move |s| (*p, s))).collect();
    let mut all: Vec<Vec<Run>> = vec![Vec::new(); variants.len()];
    alternating_rounds(o.reps, variants.len(), |v, rep| all[v].push(run_variant(variants[v], o, rep)));
    let sessions = if o.reads > 0.0 {
        format!("{} sessions in DC 0 ({:.0} % reads)", o.clients, o.reads * 100.0)
    } else {
        format!("{} writers in DC 0", o.clients)
    };
    println!(
        "{} repetition(s) × {} operations, 2 DCs × {} partitions, {sessions}; medians\n",
        o.reps, o.ops, o.partitions
    );
    println!("| protocol | µs/msg step | message kind | per op | items/msg | mean µs |");
    println!("|---|---:|---|---:|---:|---:|");
    for (v, (proto, step)) in variants.iter().enumerate() {
        let kinds: std::collections::BTreeSet<&str> = all[v].iter().flat_map(|r| r.kinds.keys().copied()).collect();
        for k in kinds {
            let m = |f: &dyn Fn(&KindStat, &Run) -> f64| {
                median(all[v].iter().filter_map(|r| r.kinds.get(k).map(|s| f(s, r))).collect())
            };
            println!(
                "| {proto} | {} | {k} | {:.3} | {:.1} | {:.2} |",
                STEPS_US[*step],
                m(&|s, r| s.n as f64 / r.ops as f64),
                m(&|s, _| items(s)),
                m(&|s, _| us(s))
            );
        }
    }
    let f = o.scale;
    let mut kind_us: KindCosts<'_> = BTreeMap::new();
    let mut item_us: KindCosts<'_> = BTreeMap::new();
    let mut notes = String::new();
    // The chain last: it adds only the kinds S-Seq's single sequencer lacks.
    let chain_last =
        protocols.iter().filter(|p| **p != "sseq-chain").chain(protocols.iter().filter(|p| **p == "sseq-chain"));
    for &proto in chain_last {
        let runs: Vec<&Run> =
            variants.iter().enumerate().filter(|(_, v)| v.0 == proto).flat_map(|(i, _)| all[i].iter()).collect();
        let kinds: std::collections::BTreeSet<&str> = runs.iter().flat_map(|r| r.kinds.keys().copied()).collect();
        // Every node's timers but the service's (charged to its reports).
        let other = |r: &Run, k: &str| -> KindStat {
            let (a, b) = (r.kinds.get(k).copied().unwrap_or_default(), r.service.get(k).copied().unwrap_or_default());
            KindStat { n: a.n - b.n, bytes: a.bytes - b.bytes, ns: a.ns - b.ns, items: a.items - b.items }
        };
        let timer_us = median(runs.iter().map(|r| us(&other(r, "timer"))).collect());
        let proto = priced_as(proto);
        for k in kinds {
            // A variant priced as another protocol adds only its own kinds.
            if kind_us.get(proto).is_some_and(|ks: &Vec<(&str, f64)>| ks.iter().any(|(known, _)| *known == k)) {
                continue;
            }
            if proto == "eunomiakv" && k == "report" {
                // Eunomia's CPU beyond its timers' share as any node's, per report.
                let pts: Vec<(f64, f64)> = runs
                    .iter()
                    .map(|r| {
                        let rep = r.service.get("report").copied().unwrap_or_default();
                        let elsewhere: u64 = r
                            .service
                            .iter()
                            .filter(|(k, _)| **k != "report" && **k != "timer")
                            .map(|(_, s)| s.ns)
                            .sum();
                        let timers = r.service.get("timer").map_or(0.0, |t| t.n as f64 * timer_us * 1e3);
                        let ns = r.service_ns as f64 - elsewhere as f64 - timers;
                        (items(&rep), ns / 1e3 / rep.n.max(1) as f64)
                    })
                    .collect();
                let (a, c) = fit(&pts);
                notes.push_str(&format!(
                    "eunomiakv report: {a:.2} µs + {c:.3} µs per update (Eunomia's process_stable and acks included), \
                     fitted over reports of {:.0}–{:.0} updates\n",
                    pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min),
                    pts.iter().map(|p| p.0).fold(0.0, f64::max)
                ));
                kind_us.entry(proto).or_default().push((k, (f * a * 10.0).round() / 10.0));
                item_us.entry(proto).or_default().push((k, (f * c * 100.0).round() / 100.0));
                continue;
            }
            if BATCHED.contains(&k) {
                let pts: Vec<(f64, f64)> =
                    runs.iter().filter_map(|r| r.kinds.get(k)).map(|s| (items(s), us(s))).collect();
                let (a, c) = fit(&pts);
                notes.push_str(&format!("{proto} {k}: {a:.2} µs + {c:.3} µs per update\n"));
                kind_us.entry(proto).or_default().push((k, (f * a * 10.0).round() / 10.0));
                item_us.entry(proto).or_default().push((k, (f * c * 100.0).round() / 100.0));
                continue;
            }
            let mean = if k == "timer" {
                timer_us
            } else {
                median(runs.iter().filter_map(|r| r.kinds.get(k)).map(us).collect())
            };
            kind_us.entry(proto).or_default().push((k, (f * mean * 10.0).round() / 10.0));
        }
    }
    println!("\nFitted (unscaled):\n{notes}");
    println!("Cost model ×{f}:\nkind_us = {kind_us:?}\nitem_us = {item_us:?}");
    if let Some(path) = costs_out {
        let names: Vec<&str> = protocols.iter().map(|p| display_name(p)).collect();
        let names = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => names.concat(),
        };
        let header = format!(
            "CPU cost model of {names} (Gunawardhana et al., ATC 2017), measured\n\
             on the real state machines (decode + node step + log encoding + encode per\n\
             server input; no sockets, syscalls or disk), scaled ×{f} so a simulated\n\
             cluster saturates with few operations. Written by the command below; do not\n\
             edit by hand, rerun it. A batch (a report, a shipment, an apply round) costs\n\
             kind_us + item_us × its updates:\n{}\
             Workload: 2 DCs × {} partitions, {sessions}, 100-byte values.\n\
             The fixed cost of a message on a real network stack (syscalls, framing)\n\
             is not in here: service_us stays 0 and experiments that need it set it.",
            notes.lines().map(|l| format!("  {l}\n")).collect::<String>(),
            o.partitions,
        );
        let command = format!(
            "cargo run --release -p causeway-bench --example eunomia_microbench -- {}",
            std::env::args().skip(1).collect::<Vec<_>>().join(" ")
        );
        causeway_bench::microbench::write_cost_file(&path, &header, &command, f, 0.0, &kind_us);
        causeway_bench::microbench::append_item_costs(&path, &item_us);
    }
}
