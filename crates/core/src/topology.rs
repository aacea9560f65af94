//! Who is where: M data centers × N partitions, which DCs store which
//! partition (full or partial replication), replicas of a partition inside a
//! DC (a Raft group, for NuKV), and per-DC service nodes (a Eunomia
//! stabilizer, its receiver, a sequencer, a forwarder).
//!
//! The topology is immutable once built and shared by every node and client,
//! so every placement question is a table lookup.

use crate::data::stable_hash;
use crate::ids::{DcId, NodeId, PartitionId};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How partitions are spread over data centers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Replication {
    /// Every DC stores every partition.
    #[default]
    Full,
    /// Each partition is stored at `factor` of the M DCs: partition p lives in
    /// DCs p, p+1, …, p+factor-1 (mod M), so load is even and every DC holds
    /// some partitions (PaRiS's setting).
    Partial { factor: u16 },
}

/// Which of a partition's replicas a DC that does not store it reads and
/// writes through, under partial replication. Every client and server of a
/// DC makes the same choice, so a DC's remote traffic for a partition goes
/// to one replica.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RemoteReplica {
    /// The first DC storing the partition after this one in ring order.
    /// With the placement of [`Replication::Partial`] that is the same
    /// replica for every DC, which then serves all remote traffic of its
    /// partition.
    #[default]
    Ring,
    /// Spirovska, Didona, Zwaenepoel, "PaRiS: Causally Consistent
    /// Transactions with Non-blocking Reads and Partial Replication", §VI:
    /// "all clients in a DC share the same preferred remote replica per
    /// partition, and preferences are round-robin across DCs": the DCs
    /// not storing a partition, in id order, take its replicas in turn,
    /// which spreads its remote traffic evenly.
    RoundRobin,
}

impl RemoteReplica {
    fn is_ring(&self) -> bool {
        *self == RemoteReplica::Ring
    }
}

impl std::str::FromStr for RemoteReplica {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ring" => Ok(RemoteReplica::Ring),
            "round-robin" => Ok(RemoteReplica::RoundRobin),
            other => Err(format!("remote replica choice {other:?}: expected ring or round-robin")),
        }
    }
}

/// A kind of per-DC service node, with how many instances each DC runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceSpec {
    pub name: String,
    #[serde(default = "one")]
    pub per_dc: u16,
}

fn one() -> u16 {
    1
}

/// The description a topology is built from (a scenario's or cluster config's `[topology]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    pub dcs: u16,
    pub partitions: u32,
    #[serde(default)]
    pub replication: Replication,
    /// Under partial replication, which replica of a partition a DC that
    /// does not store it uses.
    #[serde(default, skip_serializing_if = "RemoteReplica::is_ring")]
    pub remote_replica: RemoteReplica,
    /// Replicas of each partition inside one DC (a Raft group). 1 means no
    /// intra-DC replication.
    #[serde(default = "one")]
    pub replicas_per_partition: u16,
    #[serde(default)]
    pub services: Vec<ServiceSpec>,
    /// Optional human names of the DCs, for reports.
    #[serde(default)]
    pub dc_names: Vec<String>,
}

impl TopologySpec {
    /// Add each service of `needed` (name, instances per DC) that the spec
    /// does not declare; one it declares keeps its own instance count. How
    /// a runtime deploys a protocol's [`crate::Protocol::SERVICES`].
    pub fn add_missing_services(&mut self, needed: &[(&str, u16)]) {
        for &(name, per_dc) in needed {
            if !self.services.iter().any(|s| s.name == name) {
                self.services.push(ServiceSpec { name: name.to_string(), per_dc });
            }
        }
    }

    pub fn full(dcs: u16, partitions: u32) -> Self {
        TopologySpec {
            dcs,
            partitions,
            replication: Replication::Full,
            remote_replica: RemoteReplica::Ring,
            replicas_per_partition: 1,
            services: Vec::new(),
            dc_names: Vec::new(),
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum TopologyError {
    #[error("topology.dcs must be between 1 and 1024, got {0}")]
    Dcs(u16),
    #[error("topology.partitions must be between 1 and 65536, got {0}")]
    Partitions(u32),
    #[error("topology.replication.factor must be between 1 and dcs ({dcs}), got {factor}")]
    Factor { factor: u16, dcs: u16 },
    #[error("topology.replicas_per_partition must be between 1 and 15, got {0}")]
    Replicas(u16),
    #[error("topology.services: service {0:?} needs a non-empty name and 1..=64 instances per DC")]
    Service(String),
    #[error("topology.dc_names has {got} names for {dcs} DCs")]
    DcNames { got: usize, dcs: u16 },
}

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeRole {
    /// Replica `replica` of `partition` in `dc`. Replica 0 is the one clients
    /// and peers address by default (the primary; a Raft group's initial leader).
    Partition { dc: DcId, partition: PartitionId, replica: u16 },
    /// Instance `index` of service number `service` (an index into
    /// [`Topology::service_nodes`]) in `dc`.
    Service { dc: DcId, service: u16, index: u16 },
}

impl NodeRole {
    pub fn dc(&self) -> DcId {
        match *self {
            NodeRole::Partition { dc, .. } | NodeRole::Service { dc, .. } => dc,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Topology {
    spec: TopologySpec,
    roles: Vec<NodeRole>,
    /// `[dc][partition][replica]` → node, when the DC stores the partition.
    partition_nodes: Vec<Vec<Vec<NodeId>>>,
    /// `[partition]` → the DCs storing it, ascending.
    partition_dcs: Vec<Vec<DcId>>,
    /// `[dc]` → partitions stored there, ascending.
    dc_partitions: Vec<Vec<PartitionId>>,
    /// `[dc][service]` → instances.
    service_nodes: Vec<Vec<Vec<NodeId>>>,
}

impl Topology {
    pub fn new(spec: TopologySpec) -> Result<Topology, TopologyError> {
        let m = spec.dcs;
        if !(1..=1024).contains(&m) {
            return Err(TopologyError::Dcs(m));
        }
        if !(1..=65536).contains(&spec.partitions) {
            return Err(TopologyError::Partitions(spec.partitions));
        }
        if let Replication::Partial { factor } = spec.replication
            && (factor == 0 || factor > m)
        {
            return Err(TopologyError::Factor { factor, dcs: m });
        }
        if !(1..=15).contains(&spec.replicas_per_partition) {
            return Err(TopologyError::Replicas(spec.replicas_per_partition));
        }
        for s in &spec.services {
            if s.name.is_empty() || !(1..=64).contains(&s.per_dc) {
                return Err(TopologyError::Service(s.name.clone()));
            }
        }
        if !spec.dc_names.is_empty() && spec.dc_names.len() != m as usize {
            return Err(TopologyError::DcNames { got: spec.dc_names.len(), dcs: m });
        }
        let n = spec.partitions;
        let mut partition_dcs = vec![Vec::new(); n as usize];
        let mut dc_partitions = vec![Vec::new(); m as usize];
        for p in 0..n {
            let dcs: Vec<DcId> = match spec.replication {
                Replication::Full => (0..m).map(DcId).collect(),
                Replication::Partial { factor } => {
                    let mut v: Vec<DcId> = (0..factor).map(|i| DcId(((p + i as u32) % m as u32) as u16)).collect();
                    v.sort();
                    v
                }
            };
            for d in &dcs {
                dc_partitions[d.idx()].push(PartitionId(p));
            }
            partition_dcs[p as usize] = dcs;
        }
        let mut roles = Vec::new();
        let mut partition_nodes = vec![vec![Vec::new(); n as usize]; m as usize];
        let mut service_nodes = vec![vec![Vec::new(); spec.services.len()]; m as usize];
        for d in 0..m {
            let dc = DcId(d);
            for &p in &dc_partitions[d as usize] {
                for r in 0..spec.replicas_per_partition {
                    partition_nodes[d as usize][p.idx()].push(NodeId(roles.len() as u32));
                    roles.push(NodeRole::Partition { dc, partition: p, replica: r });
                }
            }
        }
        // Service nodes are numbered after every partition server, so a
        // partition's node id does not depend on the services deployed
        // (a scenario naming nodes of a topology without them, to which a
        // runtime adds a protocol's services, still names the same nodes).
        for d in 0..m {
            let dc = DcId(d);
            for (si, s) in spec.services.iter().enumerate() {
                for i in 0..s.per_dc {
                    service_nodes[d as usize][si].push(NodeId(roles.len() as u32));
                    roles.push(NodeRole::Service { dc, service: si as u16, index: i });
                }
            }
        }
        Ok(Topology { spec, roles, partition_nodes, partition_dcs, dc_partitions, service_nodes })
    }

    pub fn spec(&self) -> &TopologySpec {
        &self.spec
    }
    pub fn dcs(&self) -> usize {
        self.spec.dcs as usize
    }
    pub fn partitions(&self) -> usize {
        self.spec.partitions as usize
    }
    pub fn nodes(&self) -> usize {
        self.roles.len()
    }
    pub fn dc_ids(&self) -> impl Iterator<Item = DcId> + use<> {
        (0..self.spec.dcs).map(DcId)
    }
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + use<> {
        (0..self.roles.len() as u32).map(NodeId)
    }
    pub fn dc_name(&self, dc: DcId) -> String {
        self.spec.dc_names.get(dc.idx()).cloned().unwrap_or_else(|| dc.to_string())
    }
    pub fn is_full_replication(&self) -> bool {
        self.spec.replication == Replication::Full
    }

    /// The role of a node. Panics on an id outside the topology: ids are
    /// validated where they enter (config, wire), never trusted after.
    pub fn role(&self, node: NodeId) -> NodeRole {
        self.roles[node.idx()]
    }
    /// "partition 3", "partition 3 replica 1" or "eunomia 0": what a node
    /// is, for people (`status`, the dashboard, `up --json`).
    pub fn role_name(&self, node: NodeId) -> String {
        match self.role(node) {
            NodeRole::Partition { partition, replica: 0, .. } => format!("partition {}", partition.0),
            NodeRole::Partition { partition, replica, .. } => format!("partition {} replica {replica}", partition.0),
            NodeRole::Service { service, index, .. } => {
                format!("{} {index}", self.spec.services[service as usize].name)
            }
        }
    }

    /// The role of a node, or `None` for an id outside the topology (for
    /// ids that arrive from outside and have not been checked yet).
    pub fn try_role(&self, node: NodeId) -> Option<NodeRole> {
        self.roles.get(node.idx()).copied()
    }
    pub fn contains(&self, node: NodeId) -> bool {
        node.idx() < self.roles.len()
    }
    pub fn dc_of(&self, node: NodeId) -> DcId {
        self.roles[node.idx()].dc()
    }

    /// The partition a key belongs to: its row's (a column-family location
    /// lives with its row, [`crate::column`]; a plain key is its own row).
    ///
    /// One partition needs no hash: DKVF's configuration and a one-node
    /// front door route every operation through here two or three times
    /// (client, server's ownership check, replication), some 130
    /// instructions each.
    pub fn partition_of(&self, key: &[u8]) -> PartitionId {
        if self.spec.partitions == 1 {
            return PartitionId(0);
        }
        PartitionId((stable_hash(crate::column::row_of(key)) % self.spec.partitions as u64) as u32)
    }
    /// The DCs storing partition `p`, ascending.
    pub fn dcs_of(&self, p: PartitionId) -> &[DcId] {
        &self.partition_dcs[p.idx()]
    }
    /// Partitions stored at `dc`, ascending.
    pub fn partitions_at(&self, dc: DcId) -> &[PartitionId] {
        &self.dc_partitions[dc.idx()]
    }
    pub fn stores(&self, dc: DcId, p: PartitionId) -> bool {
        !self.partition_nodes[dc.idx()][p.idx()].is_empty()
    }
    /// The primary (replica 0) of partition `p` in `dc`, if `dc` stores it.
    pub fn server(&self, dc: DcId, p: PartitionId) -> Option<NodeId> {
        self.partition_nodes[dc.idx()][p.idx()].first().copied()
    }
    /// The primary of the partition owning `key` in `dc`, if `dc` stores it.
    pub fn server_for_key(&self, dc: DcId, key: &[u8]) -> Option<NodeId> {
        self.server(dc, self.partition_of(key))
    }
    /// All replicas of partition `p` inside `dc` (a Raft group), replica 0 first.
    pub fn replicas(&self, dc: DcId, p: PartitionId) -> &[NodeId] {
        &self.partition_nodes[dc.idx()][p.idx()]
    }
    /// The primaries of partition `p` in every DC storing it (COPS's
    /// "equivalent nodes"), in DC order.
    pub fn equivalents(&self, p: PartitionId) -> impl Iterator<Item = (DcId, NodeId)> + '_ {
        self.partition_dcs[p.idx()].iter().map(move |&d| (d, self.partition_nodes[d.idx()][p.idx()][0]))
    }
    /// Primaries of all partitions in `dc`, in partition order.
    pub fn dc_servers(&self, dc: DcId) -> impl Iterator<Item = NodeId> + '_ {
        self.dc_partitions[dc.idx()].iter().map(move |p| self.partition_nodes[dc.idx()][p.idx()][0])
    }
    /// The DC whose replica of `p` serves `from`: `from` itself if it
    /// stores `p`, otherwise as the spec's [`RemoteReplica`] says. (A
    /// latency-aware choice belongs to the protocol, which may know the
    /// latency matrix from its config.)
    pub fn serving_dc(&self, from: DcId, p: PartitionId) -> DcId {
        if self.stores(from, p) {
            return from;
        }
        let m = self.dcs() as u16;
        match self.spec.remote_replica {
            RemoteReplica::Ring => (1..m)
                .map(|i| DcId((from.0 + i) % m))
                .find(|&d| self.stores(d, p))
                .expect("every partition is stored somewhere"),
            RemoteReplica::RoundRobin => {
                let storing = self.dcs_of(p);
                let turn = (0..from.0).filter(|&d| !self.stores(DcId(d), p)).count();
                storing[turn % storing.len()]
            }
        }
    }
    /// The index of a service by name.
    pub fn service_index(&self, name: &str) -> Option<u16> {
        self.spec.services.iter().position(|s| s.name == name).map(|i| i as u16)
    }
    /// Instances of service `service` in `dc`.
    pub fn service_nodes(&self, dc: DcId, service: u16) -> &[NodeId] {
        &self.service_nodes[dc.idx()][service as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_replication_places_every_partition_everywhere() {
        let t = Topology::new(TopologySpec::full(3, 4)).unwrap();
        assert_eq!(t.nodes(), 12);
        for p in 0..4 {
            assert_eq!(t.dcs_of(PartitionId(p)).len(), 3);
        }
        let n = t.server(DcId(2), PartitionId(1)).unwrap();
        assert_eq!(t.role(n), NodeRole::Partition { dc: DcId(2), partition: PartitionId(1), replica: 0 });
        assert_eq!(t.equivalents(PartitionId(1)).count(), 3);
    }

    #[test]
    fn partial_replication_spreads_evenly() {
        let mut spec = TopologySpec::full(5, 10);
        spec.replication = Replication::Partial { factor: 2 };
        let t = Topology::new(spec).unwrap();
        for d in t.dc_ids() {
            assert_eq!(t.partitions_at(d).len(), 4);
        }
        assert_eq!(t.dcs_of(PartitionId(4)), &[DcId(0), DcId(4)]);
        assert_eq!(t.serving_dc(DcId(1), PartitionId(4)), DcId(4));
        assert!(t.server(DcId(1), PartitionId(4)).is_none());
    }

    /// Partition 4 lives in DCs 4 and 0 of 5. In ring order DCs 1, 2 and 3
    /// all use DC 4's replica; round-robin, the DCs not storing it (1, 2,
    /// 3) take DC 0's, DC 4's and DC 0's in turn, and over all partitions
    /// each replica serves as many remote DCs as the other, give or take one.
    #[test]
    fn round_robin_spreads_a_partitions_remote_dcs_over_its_replicas() {
        let mut spec = TopologySpec::full(5, 10);
        spec.replication = Replication::Partial { factor: 2 };
        let ring = Topology::new(spec.clone()).unwrap();
        spec.remote_replica = RemoteReplica::RoundRobin;
        let rr = Topology::new(spec).unwrap();
        let p = PartitionId(4);
        let serving = |t: &Topology| [1, 2, 3].map(|d| t.serving_dc(DcId(d), p).0);
        assert_eq!(serving(&ring), [4, 4, 4]);
        assert_eq!(serving(&rr), [0, 4, 0]);
        assert_eq!(rr.serving_dc(DcId(4), p), DcId(4), "a DC storing the partition serves itself");
        for p in (0..10).map(PartitionId) {
            let load = |t: &Topology, d: DcId| t.dc_ids().filter(|&from| t.serving_dc(from, p) == d).count();
            let [a, b] = [rr.dcs_of(p)[0], rr.dcs_of(p)[1]];
            assert!(load(&rr, a).abs_diff(load(&rr, b)) <= 1, "partition {p:?}");
        }
    }

    #[test]
    fn services_and_raft_groups_get_their_own_nodes() {
        let mut spec = TopologySpec::full(2, 2);
        spec.replicas_per_partition = 3;
        spec.services = vec![ServiceSpec { name: "eunomia".into(), per_dc: 3 }];
        let t = Topology::new(spec).unwrap();
        assert_eq!(t.nodes(), 2 * (2 * 3 + 3));
        let s = t.service_index("eunomia").unwrap();
        assert_eq!(t.service_nodes(DcId(1), s).len(), 3);
        assert_eq!(t.replicas(DcId(0), PartitionId(1)).len(), 3);
        let names: Vec<String> = t.node_ids().map(|n| t.role_name(n)).collect();
        assert_eq!(names[..3], ["partition 0", "partition 0 replica 1", "partition 0 replica 2"]);
        assert_eq!(names[names.len() - 3..], ["eunomia 0", "eunomia 1", "eunomia 2"]);
        // Services come after every partition server: partitions keep the
        // ids they have in the same topology without services.
        let plain = Topology::new({
            let mut s = TopologySpec::full(2, 2);
            s.replicas_per_partition = 3;
            s
        })
        .unwrap();
        for n in plain.node_ids() {
            assert_eq!(plain.role(n), t.role(n));
        }
        let mut spec = TopologySpec::full(2, 2);
        spec.services = vec![ServiceSpec { name: "eunomia".into(), per_dc: 3 }];
        spec.add_missing_services(&[("eunomia", 1), ("receiver", 1)]);
        assert_eq!(
            spec.services.iter().map(|s| (s.name.as_str(), s.per_dc)).collect::<Vec<_>>(),
            [("eunomia", 3), ("receiver", 1)]
        );
    }

    #[test]
    fn bad_specs_are_named() {
        let mut spec = TopologySpec::full(3, 4);
        spec.replication = Replication::Partial { factor: 4 };
        assert_eq!(Topology::new(spec).unwrap_err(), TopologyError::Factor { factor: 4, dcs: 3 });
        assert_eq!(Topology::new(TopologySpec::full(0, 4)).unwrap_err(), TopologyError::Dcs(0));
    }
}
