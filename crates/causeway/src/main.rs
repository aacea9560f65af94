//! `causeway`: the one binary.
//!
//! - `causeway demo` — the README's main job: a simulated 3-DC run of every
//!   implemented protocol on one workload, and a comparison table.
//! - `causeway sim SCENARIO.toml` — run one scenario and print its report.
//!
//! The network runtime's commands (`server`, `up`, `get`, `put`, …) arrive
//! with that runtime.

use causeway_protocols::ProtocolName;
use causeway_sim::{Scenario, SimReport, report};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "causeway",
    version,
    about = "Causally consistent geo-replicated storage: store, framework, laboratory"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario in the deterministic simulator.
    Sim {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Protocol to run; repeat for several. Default: every implemented protocol.
        #[arg(long, short)]
        protocol: Vec<ProtocolName>,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Print the reports as JSON (one array).
        #[arg(long)]
        json: bool,
    },
    /// Simulate a 3-DC deployment (Virginia/Oregon/Ireland round trips) with
    /// every implemented protocol and print a comparison table.
    Demo {
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Simulated seconds of load per protocol.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    match cli.cmd {
        Cmd::Sim { scenario, protocol, seed, json } => {
            let mut sc = Scenario::load(&scenario)?;
            if let Some(s) = seed {
                sc.seed = s;
            }
            let protocols = if protocol.is_empty() { ProtocolName::ALL.to_vec() } else { protocol };
            let mut reports = Vec::new();
            for p in protocols {
                let started = Instant::now();
                let r = causeway_sim::run_named(p, sc.clone())?;
                let wall = started.elapsed().as_secs_f64();
                if !json {
                    print!("{}", report::render(&r));
                    println!("  wall {:.2} s, {:.2} M events/s\n", wall, r.events as f64 / wall / 1e6);
                }
                reports.push(r);
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&reports)?);
            } else if reports.len() > 1 {
                print!("{}", report::comparison(&reports));
            }
        }
        Cmd::Demo { seed, seconds } => {
            let sc = demo_scenario(seed, seconds)?;
            println!(
                "Simulating 3 DCs (Virginia, Oregon, Ireland; RTT 80/80/160 ms) × 4 partitions, {} clients per DC, {} s of load, seed {}.\n",
                sc.workload.clients_per_dc, seconds, seed
            );
            let mut reports: Vec<SimReport> = Vec::new();
            for &p in ProtocolName::ALL {
                let started = Instant::now();
                let r = causeway_sim::run_named(p, sc.clone())?;
                println!(
                    "  {:<16} {:>9} ops in {:.1} s wall",
                    p.as_str(),
                    r.ops_completed,
                    started.elapsed().as_secs_f64()
                );
                reports.push(r);
            }
            println!();
            print!("{}", report::comparison(&reports));
        }
    }
    Ok(())
}

fn demo_scenario(seed: u64, seconds: u64) -> Result<Scenario, Box<dyn std::error::Error>> {
    let mut sc = Scenario::from_toml_str(include_str!("../../../scenarios/demo.toml"), "scenarios/demo.toml")?;
    sc.seed = seed;
    sc.duration_ms = seconds * 1_000 + sc.warmup_ms;
    Ok(sc)
}
