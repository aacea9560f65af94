//! `causeway demo` (the README's main job) and `causeway bench`: an embedded
//! cluster driven by the network load generator.

use causeway_core::DcId;
use causeway_net::embedded::{Embedded, EmbeddedSpec};
use causeway_net::load::{self, LoadReport, LoadSpec};
use causeway_net::{Cluster, ClusterConfig, Fsync};
use causeway_protocols::{ProtocolName, with_protocol};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

type Error = Box<dyn std::error::Error>;

/// Progress on stderr: a bar on a terminal, plain lines otherwise.
fn progress_bar(label: &str) -> impl Fn(f64) + use<> {
    let p = causeway_bench::progress::Progress::new(label);
    move |f: f64| p.set(f)
}

use causeway_sim::report::{ms, percentile_ms};

fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("causeway-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The comparison table of the network demo.
pub fn table(reports: &[LoadReport]) -> String {
    let header = [
        "protocol",
        "ops/s",
        "get p50",
        "get p99",
        "put p50",
        "put p99",
        "rot p50",
        "rot p99",
        "visibility p50/p99 (ms) per DC pair",
    ];
    let rows = reports
        .iter()
        .map(|r| {
            let lat = |k: &str, p99: bool| percentile_ms(&r.latency, k, p99);
            let vis: Vec<String> = r
                .visibility
                .iter()
                .map(|v| {
                    format!(
                        "{}→{} {}/{}",
                        &v.from[..v.from.len().min(3)],
                        &v.to[..v.to.len().min(3)],
                        ms(v.summary.p50_us),
                        ms(v.summary.p99_us)
                    )
                })
                .collect();
            vec![
                r.protocol.to_string(),
                format!("{:.0}", r.throughput_ops_s),
                lat("get", false),
                lat("get", true),
                lat("put", false),
                lat("put", true),
                lat("rot", false),
                lat("rot", true),
                vis.join("  "),
            ]
        })
        .collect();
    let mut t = causeway_sim::report::table(&header, rows);
    t.push_str("(latencies in ms)\n");
    t
}

/// Start the embedded default cluster for each protocol, drive it, compare.
pub fn demo_network(seconds: u64, sessions: u32, json: bool) -> Result<(), Error> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let intro = format!(
        "Embedded cluster per protocol: 3 DCs (Virginia, Oregon, Ireland; RTT 80/80/160 ms injected) × 2 partitions on loopback,\n\
         {sessions} sessions per DC, mixed get/put/rot, {seconds} s each. Logs in a scratch directory, fsync on every write.\n"
    );
    if json {
        eprintln!("{intro}");
    } else {
        println!("{intro}");
    }
    let mut reports = Vec::new();
    let mut all_passed = true;
    for &p in ProtocolName::ALL {
        let spec = EmbeddedSpec::default_for(p, scratch_dir(&format!("demo-{p}")));
        let dir = spec.data_dir.clone();
        let cluster = Embedded::start(spec, rt.handle())?;
        let c = cluster.cluster.clone();
        let ls = LoadSpec {
            sessions_per_dc: sessions,
            duration: Duration::from_secs(seconds),
            record_history: true,
            ..LoadSpec::default()
        };
        let label = p.as_str().to_string();
        let report = rt.block_on(async { with_protocol!(p, P => load::run::<P>(c, ls, progress_bar(&label)).await) });
        cluster.stop()?;
        let _ = std::fs::remove_dir_all(dir);
        all_passed &= crate::check_history(p, report.history.as_ref(), json);
        reports.push(report);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        println!();
        print!("{}", table(&reports));
    }
    if !all_passed {
        return Err("a protocol's recorded history violated its consistency promise".into());
    }
    Ok(())
}

pub struct BenchArgs {
    pub protocol: ProtocolName,
    pub config: Option<PathBuf>,
    pub connections: u32,
    /// Operations in flight per connection (`-P`).
    pub pipeline: u32,
    pub value_size: usize,
    pub seconds: u64,
    pub keys: u64,
    pub fsync: Fsync,
    /// The embedded server without TLS.
    pub plaintext: bool,
    pub json: bool,
    pub op_timeout: Duration,
    /// A mixed closed-loop phase after the load phase: read, update and
    /// ROT shares (YCSB `--workload a` is 0.5/0.5/0).
    pub mix: Option<Mix>,
    pub token: Option<String>,
}

/// The shares of a mixed workload.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    pub read: f64,
    pub update: f64,
    pub rot: f64,
    pub rot_keys: usize,
    /// Interactive transactions: one read round of `txn_reads` keys, then
    /// `txn_writes` writes, then commit ([`LoadSpec::interactive`]).
    pub txn: f64,
    pub txn_reads: usize,
    pub txn_writes: usize,
}

impl Mix {
    /// YCSB's core workloads without scans or inserts: a (50:50), b (95:5),
    /// c (read only).
    pub fn ycsb(name: &str) -> Result<Mix, String> {
        let (read, update) = match name {
            "a" | "A" => (0.5, 0.5),
            "b" | "B" => (0.95, 0.05),
            "c" | "C" => (1.0, 0.0),
            other => return Err(format!("--workload {other:?}: expected a, b or c (YCSB core workloads)")),
        };
        Ok(Mix { read, update, rot: 0.0, rot_keys: 4, txn: 0.0, txn_reads: 4, txn_writes: 1 })
    }
}

/// Throughput of sets, then gets (or, with a mix, the mixed workload), with
/// `connections` sessions against a cluster (the embedded 1 DC × 1
/// partition default, or `--config`).
pub fn bench(a: BenchArgs) -> Result<(), Error> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let (cluster, embedded, dir): (Arc<Cluster>, Option<Embedded>, Option<PathBuf>) = match &a.config {
        Some(path) => (Arc::new(ClusterConfig::load(Path::new(path))?.validate()?), None, None),
        None => {
            let mut spec = EmbeddedSpec::default_for(a.protocol, scratch_dir(&format!("bench-{}", a.protocol)));
            spec.dcs = 1;
            spec.partitions = 1;
            spec.rtt_ms = Vec::new();
            spec.fsync = a.fsync;
            spec.plaintext = a.plaintext;
            let dir = spec.data_dir.clone();
            let e = Embedded::start(spec, rt.handle())?;
            (e.cluster.clone(), Some(e), Some(dir))
        }
    };
    let p = cluster.protocol;
    let base = LoadSpec {
        sessions_per_dc: a.connections,
        pipeline: a.pipeline,
        dcs: vec![DcId(0)],
        duration: Duration::from_secs(a.seconds),
        warmup: Duration::from_millis(500),
        keys: a.keys,
        value_size: a.value_size,
        rot: 0.0,
        visibility_probes: false,
        token: a.token.clone(),
        ..LoadSpec::default()
    };
    let set = LoadSpec { read: 0.0, update: 1.0, ..base.clone() };
    // The second phase reads what the first wrote, or mixes as asked.
    let (second, second_name) = match a.mix {
        None => (LoadSpec { read: 1.0, update: 0.0, ..base }, "get"),
        Some(m) => (
            LoadSpec {
                read: m.read,
                update: m.update,
                rot: m.rot,
                rot_size: m.rot_keys,
                interactive: m.txn,
                txn_reads: m.txn_reads,
                txn_writes: m.txn_writes,
                ..base
            },
            "mixed",
        ),
    };
    let c = cluster.clone();
    let (s, g) = rt.block_on(async {
        with_protocol!(p, P => {
            let s = load::run_with_timeout::<P>(c.clone(), set, a.op_timeout, progress_bar("set")).await;
            let g = load::run_with_timeout::<P>(c, second, a.op_timeout, progress_bar(second_name)).await;
            (s, g)
        })
    });
    for r in [&s, &g] {
        if r.ops == 0 && r.errors > 0 {
            return Err(format!(
                "every operation failed ({} errors): is the cluster up, and does it need --token?",
                r.errors
            )
            .into());
        }
    }
    if let Some(e) = embedded {
        e.stop()?;
    }
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "set": s, second_name: g }))?);
    } else if let Some(m) = a.mix {
        let l = |k: &str| g.latency.get(k).cloned().unwrap_or_default();
        // Interactive transactions, when the mix has them: their share in
        // the mix and their latency (begin to commit) in the line.
        let (txn_share, txn_latency) = if m.txn > 0.0 {
            let t = l("interactive");
            (
                format!(":{:.0}", m.txn * 100.0),
                format!(", txn ({}r+{}w) p50/p99 {}/{} ms", m.txn_reads, m.txn_writes, ms(t.p50_us), ms(t.p99_us)),
            )
        } else {
            (String::new(), String::new())
        };
        println!(
            "SET (load): {:.0} ops/s\nMIXED {:.0}:{:.0}:{:.0}{txn_share} read:update:rot{}: {:.0} ops/s ({} errors); get \
             p50/p99 {}/{} ms, put p50/p99 {}/{} ms, rot p50/p99 {}/{} ms{txn_latency}, CPU {:.1} user + {:.1} sys \
             µs/op  [{} protocol, {} connections × {} pipelined, {}-byte values, {} keys]",
            s.throughput_ops_s,
            m.read * 100.0,
            m.update * 100.0,
            m.rot * 100.0,
            if m.txn > 0.0 { ":txn" } else { "" },
            g.throughput_ops_s,
            g.errors,
            ms(l("get").p50_us),
            ms(l("get").p99_us),
            ms(l("put").p50_us),
            ms(l("put").p99_us),
            ms(l("rot").p50_us),
            ms(l("rot").p99_us),
            g.cpu_user_us_per_op,
            g.cpu_system_us_per_op,
            p,
            a.connections,
            a.pipeline,
            a.value_size,
            a.keys,
        );
    } else {
        for (name, r, kind) in [("SET", &s, "put"), ("GET", &g, "get")] {
            let l = r.latency.get(kind).cloned().unwrap_or_default();
            println!(
                "{name}: {:.0} ops/s ({} errors), p50 {} ms, p99 {} ms, CPU {:.1} user + {:.1} sys µs/op  \
                 [{} protocol, {} connections × {} pipelined, {}-byte values, fsync {:?}]",
                r.throughput_ops_s,
                r.errors,
                ms(l.p50_us),
                ms(l.p99_us),
                r.cpu_user_us_per_op,
                r.cpu_system_us_per_op,
                p,
                a.connections,
                a.pipeline,
                a.value_size,
                a.fsync
            );
        }
    }
    Ok(())
}
