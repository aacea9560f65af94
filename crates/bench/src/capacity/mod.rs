//! Service capacity on the network runtime: how many updates a second one
//! Eunomia node stabilizes, and one sequencer node numbers, when N
//! partitions drive it (Gunawardhana, Bravo, Rodrigues, "Unobtrusive
//! Deferred Update Stabilization for Efficient Geo-Replication", §7.1,
//! Fig 2: clients connect straight to the service, each one simulating a
//! partition; Eunomia peaks above 370 k ops/s, a sequencer at 48 k, 7.7×).
//!
//! The service is the real node: the protocol's state machine inside the
//! network runtime's server ([`causeway_net::server::spawn`]), on a thread
//! of its own as `causeway server` runs it, with its write-ahead log,
//! mutual TLS and peer links. The partitions are stand-ins
//! ([`peer`]) that send exactly what a partition sends, over the
//! runtime's own peer links:
//!
//! - **Eunomia** ([`eunomia`]): every `batch_us` each partition sends one
//!   `Report` of the updates it took since the last (Alg 2 line 8 with §5's
//!   batching), timestamps strictly increasing per partition (Property 2);
//!   Eunomia computes StableTime and ships to a stand-in receiver of a
//!   second DC, which acknowledges each shipment (`Shipped`) as a receiver
//!   does. Counted: updates shipped, the work Eunomia exists for.
//! - **Sequencer** ([`sequencer`]): each partition keeps `window` number
//!   requests outstanding (`SeqReq`, one per client update waiting, as
//!   S-Seq's partition sends one per PUT) and sends the next as each
//!   answer (`SeqReply`) arrives. Counted: numbers answered.
//!
//! Both run on this machine's cores beside their load generator; the
//! service's CPU is its own threads' (`/proc/self/task`), so CPU µs per
//! operation is the service's alone.

pub mod eunomia;
pub mod peer;
pub mod sequencer;

use causeway_core::{ServiceSpec, TopologySpec};
use causeway_net::config::{
    AuthSection, Cluster, ClusterConfig, Fsync, Limits, Links, StorageConfig, TlsSection, Wan, topology_for,
};
use causeway_protocols::ProtocolName;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum CapacityError {
    #[error("cannot prepare {path}: {source}")]
    Dir { path: PathBuf, source: std::io::Error },
    #[error("cannot bind a loopback port: {0}")]
    Bind(std::io::Error),
    #[error(transparent)]
    Config(#[from] causeway_net::config::ConfigError),
    #[error(transparent)]
    Tls(#[from] causeway_net::tls::TlsError),
    #[error(transparent)]
    Node(#[from] causeway_net::server::NodeError),
    #[error("cannot start the load generator's runtime: {0}")]
    Runtime(std::io::Error),
    #[error("{0}")]
    Invalid(String),
}

/// Which service to drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Service {
    Eunomia,
    Sequencer,
}

impl Service {
    pub fn name(self) -> &'static str {
        match self {
            Service::Eunomia => "eunomia",
            Service::Sequencer => "sequencer",
        }
    }
}

/// One run's settings.
#[derive(Clone, Debug)]
pub struct CapacityArgs {
    pub service: Service,
    /// Partitions driving the service (the paper sweeps 15–75).
    pub partitions: u32,
    /// Eunomia: how often each partition reports (§7.1: 1 ms).
    pub batch_us: u64,
    /// Eunomia: updates per report, per partition (offered load: partitions
    /// × this ÷ `batch_us`; make it more than the service can take).
    pub ops_per_report: usize,
    /// Eunomia: reports a partition may have unacknowledged before it skips
    /// a tick (the link's backlog stays bounded when Eunomia saturates).
    /// Sequencer: requests outstanding per partition (its waiting clients).
    pub window: u64,
    pub warmup: Duration,
    pub measure: Duration,
    /// The service's log (`[storage] fsync`). The paper's services keep no
    /// log; `never` still writes it, without syncs.
    pub fsync: Fsync,
    pub plaintext: bool,
    /// A scratch directory: node data, certificates, spill files.
    pub dir: PathBuf,
}

/// What one run measured over its window.
#[derive(Clone, Debug, Serialize)]
pub struct CapacityReport {
    pub service: Service,
    pub partitions: u32,
    /// Operations the service completed per second: updates shipped
    /// (Eunomia) or numbers answered (sequencer).
    pub ops_s: f64,
    /// The service's threads' CPU (user + system) per operation, µs.
    pub service_cpu_us_per_op: f64,
    /// The service's threads' CPU over the window, % of one core.
    pub service_cpu_pct: f64,
    /// The load generator's CPU (the rest of this process), % of one core.
    pub generator_cpu_pct: f64,
    /// Eunomia: updates offered by the partitions per second (reports sent).
    pub offered_ops_s: f64,
}

/// A cluster config for `protocol` on loopback with one listener per node
/// (the caller takes the ones it serves), certificates in `dir`.
fn cluster(
    protocol: ProtocolName,
    mut topology: TopologySpec,
    services: Vec<ServiceSpec>,
    a: &CapacityArgs,
) -> Result<(Arc<Cluster>, Vec<std::net::TcpListener>), CapacityError> {
    let _ = std::fs::remove_dir_all(&a.dir);
    std::fs::create_dir_all(&a.dir).map_err(|source| CapacityError::Dir { path: a.dir.clone(), source })?;
    let data_dir = std::path::absolute(&a.dir).unwrap_or_else(|_| a.dir.clone());
    topology.services = services;
    let topology = topology_for(protocol, &topology);
    let n = causeway_core::Topology::new(topology.clone()).map_err(causeway_net::config::ConfigError::from)?.nodes();
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(CapacityError::Bind)?;
    let nodes = listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.to_string()))
        .collect::<Result<_, _>>()
        .map_err(CapacityError::Bind)?;
    let cluster_id = format!("capacity-{protocol}");
    let tls_dir = data_dir.join("tls");
    causeway_net::tls::generate(&tls_dir, &cluster_id, n, &causeway_net::tls::Validity { days: 1 })?;
    let config = ClusterConfig {
        cluster_id,
        protocol: protocol.as_str().into(),
        data_dir,
        nodes,
        metrics: Vec::new(),
        redis: Vec::new(),
        topology,
        params: toml::Table::new(),
        storage: StorageConfig { fsync: a.fsync, ..StorageConfig::default() },
        limits: Limits::default(),
        links: Links::default(),
        wan: Wan { rtt_ms: Vec::new() },
        tls: if a.plaintext {
            TlsSection { dir: None, plaintext: true }
        } else {
            TlsSection { dir: Some(tls_dir), plaintext: false }
        },
        auth: AuthSection { tokens: None },
    };
    Ok((Arc::new(config.validate()?), listeners))
}

/// What a run of either service needs around the node it measures: the
/// node itself, serving on a fresh port (the cluster's listener for it is
/// left to the stand-ins' side), the stand-ins' spill directory, their
/// runtime, the counters they feed and the signal that stops them.
pub(crate) struct Harness {
    pub node: causeway_net::server::NodeHandle,
    pub spill: PathBuf,
    pub rt: tokio::runtime::Runtime,
    pub counters: Arc<Counters>,
    pub stop_tx: tokio::sync::watch::Sender<bool>,
    pub stop: tokio::sync::watch::Receiver<bool>,
}

impl Harness {
    /// Start node `node` of `cluster` running `P` on its own thread.
    pub(crate) fn start<P: causeway_core::Protocol>(
        cluster: &Arc<Cluster>,
        node: causeway_core::NodeId,
        listeners: &mut [std::net::TcpListener],
        a: &CapacityArgs,
    ) -> Result<Harness, CapacityError> {
        let spill = node_dir_of(&a.dir);
        std::fs::create_dir_all(&spill).map_err(|source| CapacityError::Dir { path: spill.clone(), source })?;
        let rt = generator_runtime()?;
        let counters = Arc::new(Counters { done: Default::default(), offered: Default::default() });
        let (stop_tx, stop) = tokio::sync::watch::channel(false);
        let fresh = std::net::TcpListener::bind("127.0.0.1:0").map_err(CapacityError::Bind)?;
        let listener = std::mem::replace(&mut listeners[node.idx()], fresh);
        let node = causeway_net::server::spawn::<P>(
            cluster.clone(),
            node,
            Some(listener),
            causeway_net::server::NodeThreads::Own,
        )?;
        Ok(Harness { node, spill, rt, counters, stop_tx, stop })
    }

    /// Measure the window, then stop the stand-ins and the node.
    pub(crate) fn finish(self, a: &CapacityArgs) -> Result<CapacityReport, CapacityError> {
        let report = measure(a, &self.counters);
        let _ = self.stop_tx.send(true);
        self.node.stop()?;
        self.rt.shutdown_timeout(Duration::from_secs(1));
        Ok(report)
    }
}

/// The load generator's runtime: one worker, so that with the service's
/// own thread the run takes two cores, not more.
fn generator_runtime() -> Result<tokio::runtime::Runtime, CapacityError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("capacity-load")
        .enable_all()
        .build()
        .map_err(CapacityError::Runtime)
}

/// CPU ticks (user + system) of this process's threads whose name starts
/// with `prefix`, and of the whole process, from `/proc/self`. Linux
/// reports them in USER_HZ, 100 a second on every mainstream build.
fn cpu_ticks(prefix: &str) -> (u64, u64) {
    fn ticks(stat: &str) -> Option<(String, u64)> {
        // comm is in parentheses and may hold spaces: split after the last ')'.
        let open = stat.find('(')?;
        let close = stat.rfind(')')?;
        let comm = stat[open + 1..close].to_string();
        let f: Vec<&str> = stat[close + 2..].split(' ').collect();
        // Fields 14 and 15 of stat(5), utime and stime, are 11 and 12 after comm's.
        Some((comm, f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?))
    }
    let mut mine = 0;
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for e in dir.flatten() {
            if let Some((comm, t)) = std::fs::read_to_string(e.path().join("stat")).ok().as_deref().and_then(ticks)
                && comm.starts_with(prefix)
            {
                mine += t;
            }
        }
    }
    let all = std::fs::read_to_string("/proc/self/stat").ok().as_deref().and_then(ticks).map_or(0, |(_, t)| t);
    (mine, all)
}

const USER_HZ: f64 = 100.0;

/// Counters a driver exposes to the run: operations done, operations offered.
pub(crate) struct Counters {
    pub done: std::sync::atomic::AtomicU64,
    pub offered: std::sync::atomic::AtomicU64,
}

/// Wait out the warm-up, then measure `counters` and the service's CPU
/// (threads named `causeway-node`, the server's, and `causeway-snapshot`,
/// its checkpoints) over the window.
pub(crate) fn measure(a: &CapacityArgs, counters: &Counters) -> CapacityReport {
    use std::sync::atomic::Ordering::Relaxed;
    std::thread::sleep(a.warmup);
    let (s0, p0) = cpu_ticks("causeway-");
    let (d0, o0) = (counters.done.load(Relaxed), counters.offered.load(Relaxed));
    let t0 = Instant::now();
    std::thread::sleep(a.measure);
    let secs = t0.elapsed().as_secs_f64();
    let (s1, p1) = cpu_ticks("causeway-");
    let (d1, o1) = (counters.done.load(Relaxed), counters.offered.load(Relaxed));
    let ops = (d1 - d0) as f64;
    let service_us = (s1 - s0) as f64 / USER_HZ * 1e6;
    let generator_us = (p1 - p0).saturating_sub(s1 - s0) as f64 / USER_HZ * 1e6;
    CapacityReport {
        service: a.service,
        partitions: a.partitions,
        ops_s: ops / secs,
        service_cpu_us_per_op: if ops > 0.0 { service_us / ops } else { f64::NAN },
        service_cpu_pct: 100.0 * service_us / (secs * 1e6),
        generator_cpu_pct: 100.0 * generator_us / (secs * 1e6),
        offered_ops_s: (o1 - o0) as f64 / secs,
    }
}

/// One run of `a.service`.
pub fn run(a: &CapacityArgs) -> Result<CapacityReport, CapacityError> {
    if a.partitions == 0 || a.window == 0 || a.batch_us == 0 || a.ops_per_report == 0 {
        return Err(CapacityError::Invalid("partitions, window, batch and ops per report must be positive".into()));
    }
    match a.service {
        Service::Eunomia => eunomia::run(a),
        Service::Sequencer => sequencer::run(a),
    }
}

/// `rounds` rounds of every service in `services`, alternating which goes
/// first ([`crate::microbench::alternating_rounds`]), each run in a fresh
/// directory under `a.dir`.
pub fn alternating(
    a: &CapacityArgs,
    services: &[Service],
    rounds: u64,
) -> Result<Vec<Vec<CapacityReport>>, CapacityError> {
    let mut out: Vec<Vec<CapacityReport>> = services.iter().map(|_| Vec::new()).collect();
    let mut err = None;
    crate::microbench::alternating_rounds(rounds, services.len(), |k, round| {
        if err.is_some() {
            return;
        }
        let args = CapacityArgs {
            service: services[k],
            dir: a.dir.join(format!("{}-{round}", services[k].name())),
            ..a.clone()
        };
        match run(&args) {
            Ok(r) => {
                eprintln!(
                    "  {} ({} partitions): {:.0} ops/s, {:.2} CPU µs/op, service {:.0} % of a core",
                    r.service.name(),
                    r.partitions,
                    r.ops_s,
                    r.service_cpu_us_per_op,
                    r.service_cpu_pct
                );
                out[k].push(r);
            }
            Err(e) => err = Some(e),
        }
        let _ = std::fs::remove_dir_all(&args.dir);
    });
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Take the listener of `node` for a tokio task (non-blocking).
pub(crate) fn tokio_listener(l: std::net::TcpListener) -> std::io::Result<tokio::net::TcpListener> {
    l.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(l)
}

/// Where the stand-ins' links keep their spill files.
pub(crate) fn node_dir_of(dir: &Path) -> PathBuf {
    dir.join("spill")
}
