//! The cluster configuration every server and client reads.
//!
//! ```toml
//! cluster_id = "demo"             # a node refuses peers and clients of another cluster
//! protocol = "causalspartanx"
//! data_dir = "causeway-data"      # node N keeps its log in data_dir/node-N
//! nodes = ["127.0.0.1:7100", "127.0.0.1:7101"]   # one address per node id, topology order
//! metrics = ["127.0.0.1:9100", "127.0.0.1:9101"] # optional: /metrics, /healthz, /readyz
//! redis = ["127.0.0.1:6380", ""]  # optional: Redis-protocol front doors ("" for none)
//!
//! [topology]                      # causeway_core::TopologySpec
//! dcs = 2
//! partitions = 1
//!
//! [params]                        # the protocol's own parameters
//!
//! [storage]
//! fsync = "always"                # always | group | never
//! group_commit_ms = 2             # with fsync = "group"
//! snapshot_bytes = 67108864       # compact the log into a snapshot past this size
//! checkpoint_slice_us = 500       # a snapshot copies the store this long per turn
//!
//! [limits]
//! max_key_bytes = 4096
//! max_value_bytes = 1048576
//! hello_timeout_ms = 10000        # a connection says hello (or AUTH) within this
//!
//! [links]
//! linger_us = 2000                # a link to another DC writes at most once per this long
//!
//! [wan]                           # optional delays injected in the transport
//! rtt_ms = [[0, 80], [80, 0]]
//!
//! [tls]                           # required: one of
//! dir = "certs"                   # what `causeway certs` made (relative to this file)
//! # plaintext = true              # no encryption, no authentication: anyone who
//!                                 # reaches a node can read, write and pose as a peer
//! ```

use causeway_core::{NodeId, Topology, TopologySpec};
use causeway_protocols::ProtocolName;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    pub cluster_id: String,
    pub protocol: String,
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    pub nodes: Vec<String>,
    #[serde(default)]
    pub metrics: Vec<String>,
    /// Redis-protocol front doors, one entry per node; `""` for none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redis: Vec<String>,
    pub topology: TopologySpec,
    /// The protocol's own parameters (its `Config`).
    #[serde(default = "empty_table")]
    pub params: toml::Table,
    #[serde(default)]
    pub storage: StorageConfig,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub links: Links,
    #[serde(default)]
    pub wan: Wan,
    #[serde(default)]
    pub tls: TlsSection,
    #[serde(default, skip_serializing_if = "AuthSection::is_off")]
    pub auth: AuthSection,
}

/// Access tokens ([`crate::auth`]): with `tokens` set, every client session
/// must present a token listed in that file and gets its role.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<PathBuf>,
}

impl AuthSection {
    pub fn is_off(&self) -> bool {
        self.tokens.is_none()
    }
}

/// Transport security ([`crate::tls`]): a certificate directory, or an
/// explicit choice of plaintext. Neither is an error, so that a cluster is
/// never unencrypted by omission.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub plaintext: bool,
}

fn default_data_dir() -> PathBuf {
    PathBuf::from("causeway-data")
}
fn empty_table() -> toml::Table {
    toml::Table::new()
}

/// When the write-ahead log is forced to disk before an acknowledgement leaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fsync {
    /// Before every acknowledgement (batched per event-loop turn). The default:
    /// an acknowledged write survives power loss.
    #[default]
    Always,
    /// Like `Always`, but while requests keep arriving one sync covers up
    /// to `group_commit_ms` of turns: fewer syncs under saturation, at the
    /// cost of that much latency. When the inbox runs dry the sync happens
    /// at once (waiting then only adds latency, as a fixed timer did: with
    /// 50 closed-loop sessions it held every reply ~2 ms and ran at half
    /// `Always`'s rate). Acknowledgements wait for the sync either way.
    Group,
    /// Never: the OS decides. An acknowledged write survives a process crash
    /// (`kill -9`) but not power loss.
    Never,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    #[serde(default)]
    pub fsync: Fsync,
    #[serde(default = "default_group_ms")]
    pub group_commit_ms: u64,
    /// Compact the write-ahead log into a snapshot once it exceeds this.
    #[serde(default = "default_snapshot_bytes")]
    pub snapshot_bytes: u64,
    /// A snapshot copies the store as it stood when it began, but at most
    /// this long per turn of the node's loop (requests are served in
    /// between): the most a checkpoint adds to one request's latency. 0
    /// copies one slice of keys per turn.
    #[serde(default = "default_checkpoint_slice_us")]
    pub checkpoint_slice_us: u64,
}

fn default_checkpoint_slice_us() -> u64 {
    500
}

fn default_snapshot_bytes() -> u64 {
    64 << 20
}

fn default_group_ms() -> u64 {
    2
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            fsync: Fsync::Always,
            group_commit_ms: default_group_ms(),
            snapshot_bytes: default_snapshot_bytes(),
            checkpoint_slice_us: default_checkpoint_slice_us(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    #[serde(default = "default_key")]
    pub max_key_bytes: usize,
    #[serde(default = "default_value")]
    pub max_value_bytes: usize,
    #[serde(default = "default_frame")]
    pub max_frame_bytes: usize,
    /// Peer messages buffered (unacknowledged) per destination before the
    /// sender stops taking new work: backpressure instead of unbounded queues.
    #[serde(default = "default_peer_queue")]
    pub peer_queue: usize,
    /// Connections a node holds open at most (clients and peers); more are
    /// refused with a typed error, so a connection flood cannot take every
    /// file descriptor.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// A client connection with no request for this long is closed: an idle
    /// client that finished its hello must not hold a descriptor forever.
    /// Checked in whole periods, as Redis's `timeout` is, so a silent
    /// connection goes between one and two periods after its last request
    /// (a front-door connection: after its last reply; one waiting for an
    /// answer is not idle).
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    /// A connection must have said hello this long after it was accepted
    /// or it is closed: on a node's port, its TLS handshake and hello
    /// frame; on a Redis front door, its first request, or with `[auth]` an
    /// `AUTH` that succeeded. A stranger holds a descriptor no longer.
    #[serde(default = "default_hello_timeout_ms")]
    pub hello_timeout_ms: u64,
}

fn default_key() -> usize {
    4096
}
fn default_value() -> usize {
    1 << 20
}
fn default_frame() -> usize {
    crate::frame::DEFAULT_MAX_FRAME_BYTES
}
fn default_peer_queue() -> usize {
    65_536
}
fn default_max_connections() -> usize {
    4_096
}
fn default_idle_timeout_ms() -> u64 {
    300_000
}
fn default_hello_timeout_ms() -> u64 {
    10_000
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_key_bytes: default_key(),
            max_value_bytes: default_value(),
            max_frame_bytes: default_frame(),
            peer_queue: default_peer_queue(),
            max_connections: default_max_connections(),
            idle_timeout_ms: default_idle_timeout_ms(),
            hello_timeout_ms: default_hello_timeout_ms(),
        }
    }
}

/// How peer links write.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Links {
    /// A link to a node of another DC writes at most once per this long:
    /// after a write it gathers what the node sends next for up to this
    /// long (or until a full batch of [`crate::link::MAX_BATCH`] messages
    /// waits) and writes it in one frame. A link that has not written for
    /// this long writes at once, so a lone write waits for nothing. Under
    /// load it turns one small frame per turn of the sender (thousands a
    /// second, each waking the receiver) into one per `linger_us`, at the
    /// price of up to that much more replication delay between DCs, whose
    /// round trips are tens of milliseconds. Links inside a DC never wait:
    /// their messages are on the path of reads and commits. 0 writes
    /// whatever is due at once; at most [`MAX_LINGER_US`].
    #[serde(default = "default_linger_us")]
    pub linger_us: u64,
}

fn default_linger_us() -> u64 {
    2_000
}

/// The longest linger a config may set: a second.
pub const MAX_LINGER_US: u64 = 1_000_000;

impl Default for Links {
    fn default() -> Self {
        Links { linger_us: default_linger_us() }
    }
}

/// Wide-area delays injected by the sender, for a one-machine cluster.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wan {
    #[serde(default)]
    pub rtt_ms: Vec<Vec<f64>>,
}

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("config {path} is not valid: {message}")]
    Parse { path: String, message: String },
    #[error("config: cluster_id must not be empty")]
    EmptyClusterId,
    #[error("config: {0}")]
    Protocol(String),
    #[error("config: topology: {0}")]
    Topology(#[from] causeway_core::TopologyError),
    #[error("config: the topology has {expected} nodes{services} but `nodes` lists {got} addresses")]
    NodeCount { expected: usize, got: usize, services: String },
    #[error("config: `redis` lists {got} entries for {expected} nodes (use \"\" for a node without a front door)")]
    RedisCount { expected: usize, got: usize },
    #[error("config: `redis` entry {node} ({addr}) is already taken by entry {by} of `nodes` + `metrics`")]
    RedisAddressTaken { node: usize, addr: SocketAddr, by: usize },
    #[error("config: `metrics` lists {got} addresses for {expected} nodes")]
    MetricsCount { expected: usize, got: usize },
    #[error("config: {field}[{index}] = {value:?} is not a socket address (host:port)")]
    BadAddress { field: &'static str, index: usize, value: String },
    #[error("config: nodes[{first}] and nodes[{second}] are both {addr}; every node needs its own address")]
    DuplicateAddress { first: usize, second: usize, addr: SocketAddr },
    #[error("config: wan.rtt_ms must be {dcs}×{dcs} with non-negative entries")]
    Wan { dcs: usize },
    #[error("config: limits: {0}")]
    Limits(String),
    #[error("config: links: {0}")]
    Links(String),
    #[error("config: [tls]: {0}")]
    Tls(&'static str),
    #[error("node {node} is not in this cluster (it has {nodes} nodes)")]
    UnknownNode { node: u32, nodes: usize },
}

/// A validated configuration, with everything derived from it.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub config: ClusterConfig,
    pub protocol: ProtocolName,
    pub topology: std::sync::Arc<Topology>,
    pub addrs: Vec<SocketAddr>,
    pub metrics_addrs: Vec<SocketAddr>,
    /// Each node's Redis front door, if it has one.
    pub redis_addrs: Vec<Option<SocketAddr>>,
    /// One-way injected delay between DCs, µs.
    pub wan_one_way_us: Vec<Vec<u64>>,
}

impl ClusterConfig {
    pub fn parse(text: &str, path: &str) -> Result<ClusterConfig, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse { path: path.into(), message: e.to_string() })
    }

    /// Read a config file. A relative `data_dir` is resolved against the
    /// file's directory, not the current one: a node started from another
    /// directory must find its own log, not come up empty.
    pub fn load(path: &Path) -> Result<ClusterConfig, ConfigError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io { path: p.clone(), source: e })?;
        let mut c = Self::parse(&text, &p)?;
        if c.data_dir.is_relative() {
            let base = path.parent().filter(|b| !b.as_os_str().is_empty()).unwrap_or(Path::new("."));
            c.data_dir = base.join(&c.data_dir);
        }
        let base = path.parent().filter(|b| !b.as_os_str().is_empty()).unwrap_or(Path::new("."));
        for d in [c.tls.dir.as_mut(), c.auth.tokens.as_mut()].into_iter().flatten() {
            if d.is_relative() {
                *d = base.join(&*d);
            }
        }
        Ok(c)
    }

    /// The number of nodes the config must list: its partition servers and
    /// its protocol's service nodes, declared or not.
    pub fn node_count(&self) -> Result<usize, ConfigError> {
        let protocol: ProtocolName = self
            .protocol
            .parse()
            .map_err(|e: causeway_protocols::UnknownProtocol| ConfigError::Protocol(e.to_string()))?;
        Ok(Topology::new(topology_for(protocol, &self.topology))?.nodes())
    }

    /// Check the config and derive the topology, addresses and delays.
    pub fn validate(mut self) -> Result<Cluster, ConfigError> {
        if self.cluster_id.trim().is_empty() {
            return Err(ConfigError::EmptyClusterId);
        }
        let protocol: ProtocolName = self
            .protocol
            .parse()
            .map_err(|e: causeway_protocols::UnknownProtocol| ConfigError::Protocol(e.to_string()))?;
        match (&self.tls.dir, self.tls.plaintext) {
            (None, false) => {
                return Err(ConfigError::Tls(
                    "set `dir` to the certificates `causeway certs` made, or `plaintext = true` to run without \
                     encryption or authentication",
                ));
            }
            (Some(_), true) => return Err(ConfigError::Tls("`dir` and `plaintext = true` contradict each other")),
            _ => {}
        }
        // The protocol's service nodes the topology leaves out are added
        // after every partition server, as the simulator adds them, so the
        // addresses in `nodes` name the same nodes in both runtimes.
        self.topology = topology_for(protocol, &self.topology);
        let topology = Topology::new(self.topology.clone())?;
        if self.nodes.len() != topology.nodes() {
            return Err(ConfigError::NodeCount {
                expected: topology.nodes(),
                got: self.nodes.len(),
                services: services_note(&topology),
            });
        }
        let parse_addrs = |field: &'static str, v: &[String]| -> Result<Vec<SocketAddr>, ConfigError> {
            v.iter()
                .enumerate()
                .map(|(index, s)| s.parse().map_err(|_| ConfigError::BadAddress { field, index, value: s.clone() }))
                .collect()
        };
        let addrs = parse_addrs("nodes", &self.nodes)?;
        // Two nodes on one address would each take the other's traffic.
        for (j, a) in addrs.iter().enumerate() {
            if let Some(i) = addrs[..j].iter().position(|b| b == a) {
                return Err(ConfigError::DuplicateAddress { first: i, second: j, addr: *a });
            }
        }
        if !self.metrics.is_empty() && self.metrics.len() != topology.nodes() {
            return Err(ConfigError::MetricsCount { expected: topology.nodes(), got: self.metrics.len() });
        }
        let metrics_addrs = parse_addrs("metrics", &self.metrics)?;
        if !self.redis.is_empty() && self.redis.len() != topology.nodes() {
            return Err(ConfigError::RedisCount { expected: topology.nodes(), got: self.redis.len() });
        }
        let redis_addrs = self
            .redis
            .iter()
            .enumerate()
            .map(|(index, s)| match s.as_str() {
                "" => Ok(None),
                a => {
                    a.parse().map(Some).map_err(|_| ConfigError::BadAddress { field: "redis", index, value: s.clone() })
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut taken: Vec<SocketAddr> = addrs.clone();
        taken.extend(&metrics_addrs);
        for (j, a) in redis_addrs.iter().enumerate() {
            if let Some(a) = a
                && let Some(i) = taken.iter().position(|b| b == a)
            {
                return Err(ConfigError::RedisAddressTaken { node: j, addr: *a, by: i });
            }
        }
        let m = topology.dcs();
        let mut wan = vec![vec![0u64; m]; m];
        if !self.wan.rtt_ms.is_empty() {
            if self.wan.rtt_ms.len() != m || self.wan.rtt_ms.iter().any(|r| r.len() != m) {
                return Err(ConfigError::Wan { dcs: m });
            }
            for (row, rtts) in wan.iter_mut().zip(&self.wan.rtt_ms) {
                for (x, &r) in row.iter_mut().zip(rtts) {
                    if !(r >= 0.0 && r.is_finite()) {
                        return Err(ConfigError::Wan { dcs: m });
                    }
                    *x = (r * 500.0).round() as u64;
                }
            }
            for (i, row) in wan.iter_mut().enumerate() {
                row[i] = 0;
            }
        }
        let l = &self.limits;
        if l.max_key_bytes == 0
            || l.max_value_bytes == 0
            || l.peer_queue == 0
            || l.max_connections == 0
            || l.idle_timeout_ms == 0
            || l.hello_timeout_ms == 0
        {
            return Err(ConfigError::Limits(
                "max_key_bytes, max_value_bytes, peer_queue, max_connections, idle_timeout_ms and hello_timeout_ms \
                 must be positive"
                    .into(),
            ));
        }
        if l.max_frame_bytes < l.max_key_bytes + l.max_value_bytes + 1024 {
            return Err(ConfigError::Limits(format!(
                "max_frame_bytes ({}) must exceed max_key_bytes + max_value_bytes + 1024",
                l.max_frame_bytes
            )));
        }
        if self.links.linger_us > MAX_LINGER_US {
            return Err(ConfigError::Links(format!(
                "linger_us = {} is above {MAX_LINGER_US} (1 s): replication between DCs would wait that long",
                self.links.linger_us
            )));
        }
        let topology = std::sync::Arc::new(topology);
        causeway_protocols::with_protocol!(protocol, P => {
            let cfg: <P as causeway_core::Protocol>::Config =
                self.params.clone().try_into().map_err(|e: toml::de::Error| {
                    ConfigError::Protocol(format!("[params] for {}: {e}", protocol))
                })?;
            <P as causeway_core::Protocol>::validate(&cfg, &topology)
                .map_err(|e| ConfigError::Protocol(format!("[params] for {}: {e}", protocol)))?;
        });
        Ok(Cluster { config: self, protocol, topology, addrs, metrics_addrs, redis_addrs, wan_one_way_us: wan })
    }
}

/// `spec` with every service node `protocol` runs that it does not
/// declare ([`causeway_core::Protocol::SERVICES`]); what the cluster's
/// node count and ids follow.
pub fn topology_for(protocol: ProtocolName, spec: &TopologySpec) -> TopologySpec {
    let mut spec = spec.clone();
    causeway_protocols::with_protocol!(protocol, P => spec.add_missing_services(<P as causeway_core::Protocol>::SERVICES));
    spec
}

/// " (4 partition servers + 2 service nodes: eunomia ×1, receiver ×1 per
/// DC)", or nothing when there are no services: so that a config that
/// counted only partition servers learns what else needs an address.
fn services_note(t: &Topology) -> String {
    let spec = t.spec();
    if spec.services.is_empty() {
        return String::new();
    }
    let per_dc: Vec<String> = spec.services.iter().map(|s| format!("{} ×{}", s.name, s.per_dc)).collect();
    let services: usize = spec.services.iter().map(|s| s.per_dc as usize).sum::<usize>() * t.dcs();
    format!(
        " ({} partition servers + {services} service nodes, listed after them: {} per DC)",
        t.nodes() - services,
        per_dc.join(", ")
    )
}

impl Cluster {
    pub fn check_node(&self, node: u32) -> Result<NodeId, ConfigError> {
        if (node as usize) < self.addrs.len() {
            Ok(NodeId(node))
        } else {
            Err(ConfigError::UnknownNode { node, nodes: self.addrs.len() })
        }
    }

    pub fn node_dir(&self, node: NodeId) -> PathBuf {
        self.config.data_dir.join(format!("node-{}", node.0))
    }

    /// Where `node` stands in the cluster's shape, as its directory records
    /// it ([`crate::identity::Identity::place`]): its role, DC and the node
    /// count, e.g. `eunomia 1 of DC 0, one of 15 nodes`.
    pub fn node_place(&self, node: NodeId) -> String {
        let t = &self.topology;
        format!("{} of DC {}, one of {} nodes", t.role_name(node), t.dc_of(node).0, t.nodes())
    }

    /// Serialise back to TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(&self.config).expect("config serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        cluster_id = "t"
        protocol = "eventual"
        nodes = ["127.0.0.1:1", "127.0.0.1:2"]
        [topology]
        dcs = 2
        partitions = 1
        [links]
        linger_us = 500
        [wan]
        rtt_ms = [[0, 10], [10, 0]]
        [tls]
        plaintext = true
    "#;

    #[test]
    fn good_config_validates() {
        let c = ClusterConfig::parse(GOOD, "c.toml").unwrap().validate().unwrap();
        assert_eq!(c.addrs.len(), 2);
        assert_eq!(c.wan_one_way_us[0][1], 5_000);
        assert_eq!(c.config.links.linger_us, 500);
        // Round trip through TOML.
        let again = ClusterConfig::parse(&c.to_toml(), "again").unwrap().validate().unwrap();
        assert_eq!(again.addrs, c.addrs);
        assert_eq!(again.config.links.linger_us, 500);
        // Unset, links to other DCs linger 2 ms; a misspelt key is refused.
        let plain = ClusterConfig::parse(&GOOD.replace("linger_us = 500", ""), "c.toml").unwrap();
        assert_eq!(plain.links.linger_us, 2_000);
        let e = ClusterConfig::parse(&GOOD.replace("linger_us", "linger_ms"), "c.toml").unwrap_err().to_string();
        assert!(e.contains("linger_ms"), "{e}");
        // A linger past a second is refused, naming the field.
        let slow = ClusterConfig::parse(&GOOD.replace("linger_us = 500", "linger_us = 1000001"), "c.toml").unwrap();
        let e = slow.validate().unwrap_err().to_string();
        assert!(e.contains("linger_us = 1000001"), "{e}");
    }

    /// A node started from another directory finds the same data.
    #[test]
    fn a_relative_data_dir_is_relative_to_the_config_file() {
        let d = std::env::temp_dir().join(format!("causeway-config-rel-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join("c.toml");
        std::fs::write(&path, format!("data_dir = \"data\"\n{GOOD}")).unwrap();
        assert_eq!(ClusterConfig::load(&path).unwrap().data_dir, d.join("data"));
        std::fs::write(&path, format!("data_dir = \"/abs/data\"\n{GOOD}")).unwrap();
        assert_eq!(ClusterConfig::load(&path).unwrap().data_dir, PathBuf::from("/abs/data"));
        // So is the certificate directory.
        std::fs::write(&path, GOOD.replace("plaintext = true", "dir = \"certs\"")).unwrap();
        assert_eq!(ClusterConfig::load(&path).unwrap().tls.dir, Some(d.join("certs")));
    }

    #[test]
    fn bad_configs_name_the_problem() {
        let e = ClusterConfig::parse(&GOOD.replace("cluster_id", "clusterid"), "c.toml").unwrap_err().to_string();
        assert!(e.contains("clusterid") || e.contains("cluster_id"), "{e}");
        let e = ClusterConfig::parse(&GOOD.replace("\"127.0.0.1:2\"", "\"nowhere\""), "c.toml")
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(matches!(e, ConfigError::BadAddress { field: "nodes", index: 1, .. }), "{e}");
        let e = ClusterConfig::parse(&GOOD.replace(", \"127.0.0.1:2\"", ""), "c.toml").unwrap().validate().unwrap_err();
        assert!(matches!(e, ConfigError::NodeCount { expected: 2, got: 1, .. }), "{e}");
        let e = ClusterConfig::parse(&GOOD.replace("127.0.0.1:2", "127.0.0.1:1"), "c.toml")
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(matches!(e, ConfigError::DuplicateAddress { first: 0, second: 1, .. }), "{e}");
        // Transport security is never left out by omission.
        let e = ClusterConfig::parse(&GOOD.replace("plaintext = true", ""), "c.toml").unwrap().validate().unwrap_err();
        assert!(matches!(e, ConfigError::Tls(_)) && e.to_string().contains("plaintext = true"), "{e}");
        let e = ClusterConfig::parse(&GOOD.replace("plaintext = true", "plaintext = true\ndir = \"certs\""), "c.toml")
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(matches!(e, ConfigError::Tls(_)), "{e}");
        let e = ClusterConfig::parse(&GOOD.replace("eventual", "paxos"), "c.toml").unwrap().validate().unwrap_err();
        assert!(e.to_string().contains("paxos"), "{e}");
        let e =
            ClusterConfig::parse(&format!("{GOOD}\n[params]\nnope = 1\n"), "c.toml").unwrap().validate().unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }
}
