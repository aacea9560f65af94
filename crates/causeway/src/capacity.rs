//! `causeway capacity`: how many updates a second one Eunomia node
//! stabilizes and one sequencer node numbers, each driven over TCP by N
//! stand-in partitions (Gunawardhana et al., ATC 2017, §7.1, Fig 2), in
//! alternating rounds, medians reported (`causeway_bench::capacity`).

use causeway_bench::capacity::{self, CapacityArgs, CapacityReport, Service};
use causeway_bench::microbench::median;
use std::path::PathBuf;
use std::time::Duration;

type Error = Box<dyn std::error::Error>;

pub struct Args {
    pub services: Vec<Service>,
    pub partitions: Vec<u32>,
    pub batch_us: u64,
    pub ops_per_report: usize,
    pub window: u64,
    pub warmup_ms: u64,
    pub seconds: f64,
    pub rounds: u64,
    pub fsync: causeway_net::Fsync,
    pub plaintext: bool,
    pub json: bool,
}

/// The medians of one service at one partition count.
struct Row {
    service: Service,
    partitions: u32,
    rounds: usize,
    ops_s: f64,
    service_cpu_us_per_op: f64,
    service_cpu_pct: f64,
    generator_cpu_pct: f64,
    runs: Vec<CapacityReport>,
}

pub fn run(a: Args) -> Result<(), Error> {
    let dir: PathBuf = std::env::temp_dir().join(format!("causeway-capacity-{}", std::process::id()));
    let mut rows = Vec::new();
    for &n in &a.partitions {
        let args = CapacityArgs {
            service: a.services[0],
            partitions: n,
            batch_us: a.batch_us,
            ops_per_report: a.ops_per_report,
            window: a.window,
            warmup: Duration::from_millis(a.warmup_ms),
            measure: Duration::from_secs_f64(a.seconds),
            fsync: a.fsync,
            plaintext: a.plaintext,
            dir: dir.clone(),
        };
        eprintln!("{n} partitions:");
        let runs = capacity::alternating(&args, &a.services, a.rounds)?;
        for (s, runs) in a.services.iter().zip(runs) {
            let med = |f: fn(&CapacityReport) -> f64| median(runs.iter().map(f).collect());
            rows.push(Row {
                service: *s,
                partitions: n,
                rounds: runs.len(),
                ops_s: med(|r| r.ops_s),
                service_cpu_us_per_op: med(|r| r.service_cpu_us_per_op),
                service_cpu_pct: med(|r| r.service_cpu_pct),
                generator_cpu_pct: med(|r| r.generator_cpu_pct),
                runs,
            });
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if a.json {
        let json: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "service": r.service,
                    "partitions": r.partitions,
                    "rounds": r.rounds,
                    "ops_s": r.ops_s,
                    "service_cpu_us_per_op": r.service_cpu_us_per_op,
                    "service_cpu_pct": r.service_cpu_pct,
                    "generator_cpu_pct": r.generator_cpu_pct,
                    "runs": r.runs,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(());
    }
    let table = rows
        .iter()
        .map(|r| {
            vec![
                r.service.name().to_string(),
                r.partitions.to_string(),
                format!("{:.0}", r.ops_s),
                format!("{:.2}", r.service_cpu_us_per_op),
                format!("{:.0}", r.service_cpu_pct),
                format!("{:.0}", r.generator_cpu_pct),
            ]
        })
        .collect();
    print!(
        "{}",
        causeway_sim::report::table(
            &["service", "partitions", "ops/s", "CPU µs/op", "service CPU %", "generator CPU %"],
            table
        )
    );
    for &n in &a.partitions {
        let at = |s: Service| rows.iter().find(|r| r.service == s && r.partitions == n).map(|r| r.ops_s);
        if let (Some(e), Some(q)) = (at(Service::Eunomia), at(Service::Sequencer)) {
            println!(
                "{n} partitions: Eunomia ÷ sequencer = {:.1}× (medians of {} alternating rounds)",
                e / q,
                a.rounds
            );
        }
    }
    Ok(())
}
