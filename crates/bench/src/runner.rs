//! Running an experiment: every point × repetition, on the simulator (in
//! parallel, each run single-threaded and deterministic) or on an embedded
//! network cluster (one at a time: it uses every core itself).

use crate::experiment::{Experiment, ExperimentError, Point, Runtime};
use crate::measure::{Sample, median};
use causeway_net::Fsync;
use causeway_net::embedded::{Embedded, EmbeddedSpec};
use causeway_net::load::{self, LoadSpec};
use causeway_protocols::with_protocol;
use causeway_sim::scenario::Distribution;
use causeway_sim::{Scenario, run_named};
use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Overrides the file's repetitions.
    pub repetitions: Option<u32>,
    /// Overrides the file's runtime.
    pub runtime: Option<Runtime>,
    /// Simulator runs in parallel.
    pub threads: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            repetitions: None,
            runtime: None,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PointResult {
    pub point: Point,
    /// Serialised without their CDFs: the median's CDF is kept, and one per
    /// repetition would multiply the file's size for little use.
    #[serde(serialize_with = "metrics_only", deserialize_with = "metrics_read")]
    pub repetitions: Vec<Sample>,
    pub median: Sample,
}

fn metrics_only<S: serde::Serializer>(reps: &[Sample], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(reps.iter().map(|r| &r.metrics))
}

fn metrics_read<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Sample>, D::Error> {
    let reps: Vec<std::collections::BTreeMap<String, Option<f64>>> = Vec::deserialize(d)?;
    Ok(reps
        .into_iter()
        .map(|m| Sample {
            metrics: m.into_iter().map(|(k, v)| (k, v.unwrap_or(f64::NAN))).collect(),
            cdfs: Default::default(),
        })
        .collect())
}

/// An experiment's measurements, as `<name>.json` keeps them: a report can
/// be drawn again from this file alone (`causeway experiment --render`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Results {
    pub experiment: Experiment,
    pub runtime: Runtime,
    pub repetitions: u32,
    pub points: Vec<PointResult>,
    pub wall_s: f64,
    /// When, at which commit and on what machine the points were measured
    /// ([`crate::provenance::provenance`]); a redrawn report keeps it.
    #[serde(default)]
    pub provenance: String,
}

impl Results {
    pub fn get(&self, p: Point) -> Option<&PointResult> {
        self.points.iter().find(|r| r.point == p)
    }
}

/// Run every point of `exp`. `progress(done, total)` is called after each run.
pub fn run(
    exp: &Experiment,
    opts: &RunOptions,
    progress: impl Fn(usize, usize) + Sync,
) -> Result<Results, ExperimentError> {
    let started = Instant::now();
    let reps = opts.repetitions.unwrap_or(exp.repetitions).max(1);
    let runtime = opts.runtime.unwrap_or(exp.runtime);
    let points = exp.points()?;
    // Repetition-major: every point's first repetition, then every point's
    // second… so that on the network runtime (one run at a time) protocols
    // alternate and drift in the machine's load does not favour one. Odd
    // repetitions run the points in reverse (A B B A …), so that no point
    // always runs first in a round, right after the previous round's
    // cluster stopped: on eiger-tao-network the first point of each round
    // ran 6–8 % slower than the same code later in the round.
    let n = points.len();
    let jobs: Vec<(usize, u32)> =
        (0..reps).flat_map(|r| (0..n).map(move |i| (if r % 2 == 1 { n - 1 - i } else { i }, r))).collect();
    let samples: Mutex<Vec<Vec<Option<Sample>>>> = Mutex::new(vec![vec![None; reps as usize]; points.len()]);
    let done = AtomicUsize::new(0);
    let first_error: Mutex<Option<ExperimentError>> = Mutex::new(None);
    let run_one = |i: usize, rep: u32| -> Result<Sample, ExperimentError> {
        let sc = exp.scenario(points[i], rep)?;
        match runtime {
            Runtime::Sim => {
                let report = run_named(points[i].protocol, sc).map_err(|source| ExperimentError::Scenario {
                    name: exp.name.clone(),
                    point: exp.point_name(points[i]),
                    source,
                })?;
                Ok(Sample::from_sim(&report))
            }
            Runtime::Network => run_network(exp, points[i], &sc),
            Runtime::Capacity => run_capacity(exp, points[i], &sc),
        }
    };
    let threads = if runtime == Runtime::Sim { opts.threads.max(1).min(jobs.len()) } else { 1 };
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let j = next.fetch_add(1, Ordering::Relaxed);
                    if j >= jobs.len() || first_error.lock().expect("no panics while locked").is_some() {
                        return;
                    }
                    let (i, rep) = jobs[j];
                    match run_one(i, rep) {
                        Ok(sample) => samples.lock().expect("no panics while locked")[i][rep as usize] = Some(sample),
                        Err(e) => {
                            first_error.lock().expect("no panics while locked").get_or_insert(e);
                            return;
                        }
                    }
                    progress(done.fetch_add(1, Ordering::Relaxed) + 1, jobs.len());
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().expect("no panics while locked") {
        return Err(e);
    }
    let samples = samples.into_inner().expect("no panics while locked");
    let points = points
        .into_iter()
        .zip(samples)
        .map(|(point, reps)| {
            let repetitions: Vec<Sample> = reps.into_iter().map(|s| s.expect("every job ran")).collect();
            PointResult { point, median: median(&repetitions), repetitions }
        })
        .collect();
    Ok(Results {
        experiment: exp.clone(),
        runtime,
        repetitions: reps,
        points,
        wall_s: started.elapsed().as_secs_f64(),
        provenance: crate::provenance::provenance(),
    })
}

/// The network runtime can express a subset of a scenario: topology (with
/// partial replication, service nodes and replicated groups), WAN round
/// trips, and a uniform get/put/ROT/WOT/batch mix with interactive
/// transactions (one read round, then the writes: the simulator's second,
/// value-dependent round is not drawn), with ROT and value sizes fixed or
/// drawn from discrete distributions, multi-key operations local to the
/// session's DC or not (`local_txn_ratio`), and YCSB's load phase.
/// Anything else is refused by name rather than silently dropped.
fn network_unsupported(sc: &Scenario) -> Vec<&'static str> {
    let w = &sc.workload;
    let d = causeway_sim::Workload::default();
    let mut out = Vec::new();
    let checks: [(&'static str, bool); 17] = [
        (
            "clocks (the network runtime uses the host's real clock)",
            sc.clocks.skew_us > 0 || !sc.clocks.node.is_empty() || sc.clocks.drift_ppm != 0.0,
        ),
        ("faults", !sc.faults.is_empty()),
        ("scripted clients", !sc.scripted.is_empty()),
        ("cpu.service_us", sc.cpu.service_us > 0),
        ("cpu.kind_us", !sc.cpu.kind_us.is_empty()),
        ("network.jitter_pct", sc.network.jitter_pct > 0.0),
        ("workload.interactive_think_us", w.interactive_think_us != d.interactive_think_us),
        ("workload.requestdistribution other than uniform", w.requestdistribution != Distribution::Uniform),
        ("workload.insertproportion", w.insertproportion > 0.0),
        ("workload.amplification", w.amplification > 0),
        ("workload.rot_partitions", w.rot_partitions > 0),
        ("workload.update_size (multi-key updates)", w.update_size != d.update_size),
        (
            "workload.columns_per_read / columns_per_write (several columns per key)",
            w.columns_per_read != d.columns_per_read || w.columns_per_write != d.columns_per_write,
        ),
        ("workload.txnproportion", w.txnproportion > 0.0),
        ("workload.operationcount", w.operationcount > 0),
        ("workload.think_time_us", w.think_time_us != d.think_time_us),
        ("workload.clients_per_dc = 0", w.clients_per_dc == 0),
    ];
    for (name, bad) in checks {
        if bad {
            out.push(name);
        }
    }
    out
}

/// One run of [`Runtime::Capacity`]: the point's protocol's ordering
/// service against `topology.partitions` stand-in partitions.
fn run_capacity(exp: &Experiment, point: Point, sc: &Scenario) -> Result<Sample, ExperimentError> {
    use crate::capacity::{CapacityArgs, Service};
    let err =
        |message: String| ExperimentError::Network { name: exp.name.clone(), point: exp.point_name(point), message };
    let service = match point.protocol.as_str() {
        "eunomiakv" => Service::Eunomia,
        "sseq" => Service::Sequencer,
        other => return Err(err(format!("runtime \"capacity\" drives eunomiakv or sseq, not {other}"))),
    };
    let batch_us = match sc.protocol.get("batch_interval_us") {
        Some(toml::Value::Integer(b)) if *b > 0 => *b as u64,
        Some(v) => return Err(err(format!("batch_interval_us = {v} must be a positive integer"))),
        None => 1_000,
    };
    let args = CapacityArgs {
        service,
        partitions: sc.topology.partitions,
        batch_us,
        ops_per_report: 100,
        window: 8,
        warmup: Duration::from_millis(sc.warmup_ms),
        measure: Duration::from_millis(sc.duration_ms.saturating_sub(sc.warmup_ms)),
        fsync: Fsync::Never,
        plaintext: false,
        dir: std::env::temp_dir().join(format!("causeway-exp-{}-{}", exp.name, std::process::id())),
    };
    let r = crate::capacity::run(&args).map_err(|e| err(e.to_string()))?;
    let _ = std::fs::remove_dir_all(&args.dir);
    let mut s = Sample::default();
    for (k, v) in [
        ("service_ops.per_s", r.ops_s),
        ("service_cpu_us_per_op", r.service_cpu_us_per_op),
        ("service_cpu_pct", r.service_cpu_pct),
        ("generator_cpu_pct", r.generator_cpu_pct),
    ] {
        s.metrics.insert(k.into(), v);
    }
    Ok(s)
}

fn run_network(exp: &Experiment, point: Point, sc: &Scenario) -> Result<Sample, ExperimentError> {
    let err =
        |message: String| ExperimentError::Network { name: exp.name.clone(), point: exp.point_name(point), message };
    let bad = network_unsupported(sc);
    if !bad.is_empty() {
        return Err(err(format!("cannot express {}; run it with runtime = \"sim\"", bad.join(", "))));
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| err(e.to_string()))?;
    let dir = std::env::temp_dir().join(format!("causeway-exp-{}-{}", exp.name, std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut rtt_ms = sc.network.rtt_ms.clone();
    if rtt_ms.is_empty() && sc.topology.dcs > 1 {
        let m = sc.topology.dcs as usize;
        rtt_ms =
            (0..m).map(|i| (0..m).map(|j| if i == j { 0.0 } else { sc.network.default_rtt_ms }).collect()).collect();
    }
    let spec = EmbeddedSpec {
        protocol: point.protocol,
        dcs: sc.topology.dcs,
        partitions: sc.topology.partitions,
        rtt_ms,
        data_dir: dir.clone(),
        // Experiments measure protocols, not disks.
        fsync: Fsync::Never,
        params: sc.protocol.clone(),
        ports: Default::default(),
        tokens: None,
        plaintext: false,
        // The scenario's deployment: its service nodes, placement and
        // replicated groups, as the simulator would run them.
        services: sc.topology.services.clone(),
        replication: sc.topology.replication,
        remote_replica: sc.topology.remote_replica,
        replicas: sc.topology.replicas_per_partition,
    };
    let cluster = Embedded::start(spec, rt.handle()).map_err(|e| err(e.to_string()))?;
    let w = &sc.workload;
    let ls = LoadSpec {
        sessions_per_dc: w.clients_per_dc,
        pipeline: 1,
        dcs: w.dcs.iter().map(|d| causeway_core::DcId(*d)).collect(),
        duration: Duration::from_millis(sc.duration_ms.saturating_sub(sc.warmup_ms)),
        warmup: Duration::from_millis(sc.warmup_ms),
        keys: w.recordcount,
        value_size: w.fieldlength,
        read: w.readproportion,
        update: w.updateproportion,
        rot: w.rotproportion,
        rot_size: w.rot_size,
        wot: w.wotproportion,
        wot_size: w.wot_size,
        batch: w.batchproportion,
        interactive: w.interactiveproportion,
        txn_reads: w.txn_reads,
        txn_writes: w.txn_writes,
        rot_sizes: w.rot_size_values.iter().copied().zip(w.rot_size_weights.iter().copied()).collect(),
        value_sizes: w.fieldlength_values.iter().copied().zip(w.fieldlength_weights.iter().copied()).collect(),
        local_txn_ratio: w.local_txn_ratio,
        preload: w.preload,
        record_history: false,
        visibility_probes: sc.topology.dcs > 1,
        seed: sc.seed,
        token: None,
    };
    let c = cluster.cluster.clone();
    let report = rt.block_on(async { with_protocol!(point.protocol, P => load::run::<P>(c, ls, |_| {}).await) });
    cluster.stop().map_err(|e| err(e.to_string()))?;
    let _ = std::fs::remove_dir_all(dir);
    Ok(Sample::from_load(&report))
}
