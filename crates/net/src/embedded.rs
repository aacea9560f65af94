//! The embedded cluster: every node of a cluster in this process, on
//! loopback, with WAN delays injected by the transport. What `causeway up`
//! and `causeway demo` run, and what the integration tests use; [`plan`]
//! lays the same cluster out for `causeway up --processes`, which runs each
//! node as a `causeway server` process of its own.

use crate::config::{
    AuthSection, Cluster, ClusterConfig, ConfigError, Fsync, Limits, Links, StorageConfig, TlsSection, Wan,
};
use crate::server::{self, NodeError, NodeHandle, NodeThreads};
use causeway_core::{NodeId, TopologySpec};
use causeway_protocols::{ProtocolName, with_protocol};
use std::path::PathBuf;
use std::sync::Arc;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum EmbeddedError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Node(#[from] NodeError),
    #[error("cannot bind a loopback port: {0}")]
    Bind(std::io::Error),
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
}

/// What to start.
#[derive(Clone, Debug)]
pub struct EmbeddedSpec {
    pub protocol: ProtocolName,
    pub dcs: u16,
    pub partitions: u32,
    /// Round trips between DCs, ms; empty for none.
    pub rtt_ms: Vec<Vec<f64>>,
    pub data_dir: PathBuf,
    pub fsync: Fsync,
    pub params: toml::Table,
    pub ports: Ports,
    /// The access tokens file ([`crate::auth`]); `None` for no tokens.
    pub tokens: Option<PathBuf>,
    /// No TLS on any link (`[tls] plaintext = true`), for measuring what
    /// TLS costs or comparing with a plaintext system; each node says so
    /// loudly at start.
    pub plaintext: bool,
    /// Service nodes per DC (`[topology] services`), e.g. three Eunomia
    /// replicas; the protocol's others are added with one instance each.
    pub services: Vec<causeway_core::ServiceSpec>,
    /// Where partitions are stored (`[topology] replication`): every DC,
    /// or `factor` of them for a protocol that runs so
    /// (`Protocol::PARTIAL_REPLICATION`; others refuse it by name).
    pub replication: causeway_core::Replication,
    /// Under partial replication, which replica of a partition a DC that
    /// does not store it uses (`[topology] remote_replica`).
    pub remote_replica: causeway_core::RemoteReplica,
    /// Servers per partition inside each DC (`[topology]
    /// replicas_per_partition`), for a protocol whose partitions are
    /// replicated groups (NuKV's Raft groups; others refuse more than 1).
    pub replicas: u16,
}

/// Optional HTTP and Redis endpoints on loopback: node N gets base + N.
#[derive(Clone, Debug, Default)]
pub struct Ports {
    /// `/metrics`, `/healthz`, `/readyz`.
    pub metrics: Option<u16>,
    /// The Redis-protocol front door.
    pub redis: Option<u16>,
}

impl EmbeddedSpec {
    /// The default of `causeway up`: 3 DCs × 2 partitions with Gunawardhana et al.'s
    /// Virginia/Oregon/Ireland round trips (80/80/160 ms).
    pub fn default_for(protocol: ProtocolName, data_dir: PathBuf) -> EmbeddedSpec {
        EmbeddedSpec {
            protocol,
            dcs: 3,
            partitions: 2,
            rtt_ms: vec![vec![0.0, 80.0, 80.0], vec![80.0, 0.0, 160.0], vec![80.0, 160.0, 0.0]],
            data_dir,
            fsync: Fsync::Always,
            params: toml::Table::new(),
            ports: Ports::default(),
            tokens: None,
            plaintext: false,
            services: Vec::new(),
            replication: causeway_core::Replication::Full,
            remote_replica: causeway_core::RemoteReplica::Ring,
            replicas: 1,
        }
    }
}

/// A node of a one-node cluster gets a thread of its own, as a server
/// process would (its connections and protocol then hand requests to each
/// other without waking another thread); the nodes of a larger cluster share
/// the caller's runtime, as a thread per node would outnumber the cores.
fn threads(nodes: usize, rt: &tokio::runtime::Handle) -> NodeThreads<'_> {
    if nodes == 1 { NodeThreads::Own } else { NodeThreads::Shared(rt) }
}

/// `n` loopback addresses from port `base` on.
fn numbered(base: u16, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("127.0.0.1:{}", base as usize + i)).collect()
}

/// A cluster laid out on loopback but not started: its validated config
/// (addresses, the throw-away CA in the data dir, WAN delays) and a bound
/// listener per node, in node order.
pub struct Planned {
    pub cluster: Arc<Cluster>,
    pub listeners: Vec<std::net::TcpListener>,
}

/// Lay out the cluster `spec` describes: bind a loopback port for every
/// node and write the certificates, but start nothing. [`Embedded::start`]
/// hands the listeners to nodes in this process; `causeway up --processes`
/// closes them and starts one `causeway server` process per node on those
/// addresses instead.
pub fn plan(spec: &EmbeddedSpec, limits: Limits, storage: StorageConfig) -> Result<Planned, EmbeddedError> {
    let mut topology = TopologySpec::full(spec.dcs, spec.partitions);
    topology.services = spec.services.clone();
    topology.replication = spec.replication;
    topology.remote_replica = spec.remote_replica;
    topology.replicas_per_partition = spec.replicas;
    if spec.dcs == 3 && spec.rtt_ms.len() == 3 {
        topology.dc_names = vec!["virginia".into(), "oregon".into(), "ireland".into()];
    }
    let topology = crate::config::topology_for(spec.protocol, &topology);
    let n = causeway_core::Topology::new(topology.clone()).map_err(ConfigError::from)?.nodes();
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(EmbeddedError::Bind)?;
    let nodes: Vec<String> = listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.to_string()))
        .collect::<Result<_, _>>()
        .map_err(EmbeddedError::Bind)?;
    // Absolute, so the config written for clients and `causeway server`
    // means the same directory wherever it is read from.
    let data_dir = std::path::absolute(&spec.data_dir).unwrap_or_else(|_| spec.data_dir.clone());
    // A throw-away CA in the data dir, so the one-command cluster is
    // mutual TLS like any other without an extra step; clients find it
    // through the config written for them. Kept across restarts (a
    // second `causeway up` on a running cluster's dir must not pull the
    // certificates from under it before the dir lock refuses it), made
    // anew when the node count changed.
    let tls_dir = data_dir.join("tls");
    let fits = |d: &std::path::Path| {
        d.join("ca.pem").exists()
            && d.join(format!("node-{}.pem", n - 1)).exists()
            && !d.join(format!("node-{n}.pem")).exists()
    };
    if !fits(&tls_dir) {
        let _ = std::fs::remove_dir_all(&tls_dir);
        crate::tls::generate(&tls_dir, &format!("embedded-{}", spec.protocol), n, &crate::tls::Validity { days: 365 })?;
    }
    let config = ClusterConfig {
        // Stable across runs, so `causeway up` restarts on its own data
        // dir; naming the protocol refuses a dir another protocol wrote.
        cluster_id: format!("embedded-{}", spec.protocol),
        protocol: spec.protocol.as_str().into(),
        data_dir,
        nodes,
        metrics: spec.ports.metrics.map(|b| numbered(b, n)).unwrap_or_default(),
        redis: spec.ports.redis.map(|b| numbered(b, n)).unwrap_or_default(),
        topology,
        params: spec.params.clone(),
        storage,
        limits,
        links: Links::default(),
        wan: Wan { rtt_ms: spec.rtt_ms.clone() },
        tls: if spec.plaintext {
            TlsSection { dir: None, plaintext: true }
        } else {
            TlsSection { dir: Some(tls_dir), plaintext: false }
        },
        auth: AuthSection { tokens: spec.tokens.clone() },
    };
    Ok(Planned { cluster: Arc::new(config.validate()?), listeners })
}

pub struct Embedded {
    pub cluster: Arc<Cluster>,
    nodes: Vec<Option<NodeHandle>>,
    rt: tokio::runtime::Handle,
}

impl Embedded {
    /// Bind a loopback port for every node, write nothing yet, start them all.
    pub fn start(spec: EmbeddedSpec, rt: &tokio::runtime::Handle) -> Result<Embedded, EmbeddedError> {
        Self::start_with_limits(spec, Limits::default(), rt)
    }

    /// [`Embedded::start`] with other limits (a tiny `peer_queue` makes an
    /// outage's effects show within seconds).
    pub fn start_with_limits(
        spec: EmbeddedSpec,
        limits: Limits,
        rt: &tokio::runtime::Handle,
    ) -> Result<Embedded, EmbeddedError> {
        let storage = StorageConfig { fsync: spec.fsync, ..StorageConfig::default() };
        Self::launch(spec, limits, storage, rt)
    }

    /// [`Embedded::start`] with other storage settings, which replace the
    /// spec's `fsync` (a tiny `snapshot_bytes` compacts the log every few
    /// writes).
    pub fn start_with_storage(
        spec: EmbeddedSpec,
        storage: StorageConfig,
        rt: &tokio::runtime::Handle,
    ) -> Result<Embedded, EmbeddedError> {
        Self::launch(spec, Limits::default(), storage, rt)
    }

    fn launch(
        spec: EmbeddedSpec,
        limits: Limits,
        storage: StorageConfig,
        rt: &tokio::runtime::Handle,
    ) -> Result<Embedded, EmbeddedError> {
        let Planned { cluster, listeners } = plan(&spec, limits, storage)?;
        let n = listeners.len();
        let mut handles = Vec::with_capacity(n);
        for (i, l) in listeners.into_iter().enumerate() {
            let h = with_protocol!(spec.protocol, P => server::spawn::<P>(cluster.clone(), NodeId(i as u32), Some(l), threads(n, rt))?);
            handles.push(Some(h));
        }
        Ok(Embedded { cluster, nodes: handles, rt: rt.clone() })
    }

    pub fn node(&self, node: NodeId) -> Option<&NodeHandle> {
        self.nodes.get(node.idx()).and_then(|n| n.as_ref())
    }

    /// Stop one node (a clean stop: its log is synced).
    pub fn stop_node(&mut self, node: NodeId) -> Result<(), NodeError> {
        if let Some(h) = self.nodes.get_mut(node.idx()).and_then(|n| n.take()) {
            h.stop()?;
        }
        Ok(())
    }

    /// Restart a stopped node on its old address, recovering from its log.
    pub fn restart_node(&mut self, node: NodeId) -> Result<(), NodeError> {
        let c = self.cluster.clone();
        let threads = threads(self.nodes.len(), &self.rt);
        let h = with_protocol!(c.protocol, P => server::spawn::<P>(c.clone(), node, None, threads)?);
        self.nodes[node.idx()] = Some(h);
        Ok(())
    }

    /// Stop every node. All are told first, so that none mistakes the
    /// others closing their connections for an outage.
    pub fn stop(mut self) -> Result<(), NodeError> {
        for h in self.nodes.iter().flatten() {
            h.signal_stop();
        }
        for n in self.nodes.iter_mut() {
            if let Some(h) = n.take() {
                h.stop()?;
            }
        }
        Ok(())
    }
}
