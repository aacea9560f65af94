//! The groupings ACCF takes as input (Roohitavaf, "Consistency for
//! Distributed Data Stores", PhD thesis, 2019, §7.2): T, which puts every
//! server in exactly one *tracking group*, and C, which puts every server in
//! one or more *checking groups*. A grouping is written in the `[protocol]`
//! table either as one of the rows of Table 7.1 or as explicit groups, and
//! resolved against the topology once, when a node or session starts.
//!
//! Servers are named `"<dc>:<partition>"`: the thesis's A1, B1, A2, B2 of
//! §7 are `"0:0"`, `"0:1"`, `"1:0"`, `"1:1"` in a two-DC, two-partition
//! topology, where its 2×2 organisation is `per_replica` and its 4×1 is
//! `per_server` (or, explicitly, `{ groups = [["0:0", "0:1"], ["1:0",
//! "1:1"]] }` and `{ groups = [["0:0"], ["0:1"], ["1:0"], ["1:1"]] }`).

use causeway_core::{DcId, NodeId, PartitionId, Topology};
use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use thiserror::Error;

/// A grouping of the partition servers, as configured.
///
/// Groups are numbered from 0, and a session names a checking group by its
/// number ([`causeway_core::Client::set_checking_group`], `causeway get
/// --checking-group N`): `per_server` numbers the servers DC by DC,
/// partitions ascending within a DC (the thesis's A1, B1, A2, B2 are 0–3);
/// `per_key` gives group p to partition p's copies; `per_replica` group d to
/// DC d's servers; `per_system` has group 0 only; explicit groups are
/// numbered in the order listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Grouping {
    /// Every server alone: Orbe's tracking (Table 7.1), the thesis's 4×1.
    PerServer,
    /// The copies of one partition in every DC together. COPS and Eiger
    /// track per key (Table 7.1); T maps servers, not keys, and the servers
    /// of one partition are exactly the copies of its keys, so per-key
    /// tracking coarsened to what T can express is per partition.
    PerKey,
    /// The servers of one DC together: CausalSpartan's tracking and every
    /// row's checking but Okapi's and Occult's (Table 7.1), the thesis's 2×2.
    PerReplica,
    /// One group of every server: GentleRain's tracking, Okapi's checking.
    PerSystem,
    /// Groups listed by server name.
    Explicit(Vec<Vec<String>>),
}

impl Grouping {
    /// The presets by name, and by the number torture draws
    /// ([`causeway_core::Protocol::torture_params`] gives integers only).
    pub const PRESETS: [(&'static str, Grouping); 4] = [
        ("per_server", Grouping::PerServer),
        ("per_key", Grouping::PerKey),
        ("per_replica", Grouping::PerReplica),
        ("per_system", Grouping::PerSystem),
    ];

    fn name(&self) -> Option<&'static str> {
        Self::PRESETS.iter().find(|(_, g)| g == self).map(|(n, _)| *n)
    }

    /// The group of server (`dc`, `partition`) under a preset, and how many
    /// groups the preset has; `None` for explicit groups.
    fn preset(
        &self,
        topology: &Topology,
        dc: DcId,
        partition: PartitionId,
        server_index: usize,
    ) -> Option<(u16, usize)> {
        let servers: usize = topology.dc_ids().map(|d| topology.partitions_at(d).len()).sum();
        match self {
            Grouping::PerServer => Some((server_index as u16, servers)),
            Grouping::PerKey => Some((partition.0 as u16, topology.partitions())),
            Grouping::PerReplica => Some((dc.0, topology.dcs())),
            Grouping::PerSystem => Some((0, 1)),
            Grouping::Explicit(_) => None,
        }
    }
}

/// What is wrong with a grouping, naming the `[protocol]` field and the group.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum GroupingError {
    #[error("protocol.{field}: group {group}: {name:?} is not a server name \"<dc>:<partition>\"")]
    BadName { field: &'static str, group: usize, name: String },
    #[error(
        "protocol.{field}: group {group}: no server {name:?} (DC {dc} does not exist or does not store partition {partition})"
    )]
    NoSuchServer { field: &'static str, group: usize, name: String, dc: u64, partition: u64 },
    #[error("protocol.{field}: group {group} is empty; every group needs a server")]
    EmptyGroup { field: &'static str, group: usize },
    #[error(
        "protocol.tracking: server {name:?} is in groups {first} and {second}; T puts a server in exactly one tracking group"
    )]
    TrackedTwice { name: String, first: usize, second: usize },
    #[error("protocol.checking: group {group} names server {name:?} twice")]
    CheckedTwice { group: usize, name: String },
    #[error("protocol.{field}: server {name:?} is in no group; every server needs {what}")]
    Missing { field: &'static str, name: String, what: &'static str },
    #[error("protocol.{field}: {count} groups; at most 65535")]
    TooMany { field: &'static str, count: usize },
}

/// T and C resolved against a topology.
#[derive(Clone, Debug)]
pub struct Groups {
    /// T(i) for every node id that is a partition server.
    tracking: Vec<Option<u16>>,
    tracking_count: usize,
    /// C(i), ascending, for every node id (empty for non-servers).
    checking: Vec<Vec<u16>>,
    /// The members of each checking group, ascending by node id.
    members: Vec<Vec<NodeId>>,
}

impl Groups {
    pub fn resolve(tracking: &Grouping, checking: &Grouping, topology: &Topology) -> Result<Groups, GroupingError> {
        let servers = servers(topology);
        let t = assign(tracking, "tracking", topology, &servers)?;
        let c = assign(checking, "checking", topology, &servers)?;
        let nodes = topology.nodes();
        let mut groups = Groups {
            tracking: vec![None; nodes],
            tracking_count: t.count,
            checking: vec![Vec::new(); nodes],
            members: vec![Vec::new(); c.count],
        };
        for (i, &(_, _, node)) in servers.iter().enumerate() {
            let [tg] = t.of[i][..] else {
                // `assign` keeps a tracking group per server; two or none are refused there.
                unreachable!("one tracking group per server")
            };
            groups.tracking[node.idx()] = Some(tg);
            for &cg in &c.of[i] {
                groups.checking[node.idx()].push(cg);
                groups.members[cg as usize].push(node);
            }
        }
        for m in &mut groups.members {
            m.sort();
        }
        Ok(groups)
    }

    /// T(i); `None` for a node that is not a partition server.
    pub fn tracking_of(&self, node: NodeId) -> Option<u16> {
        self.tracking.get(node.idx()).copied().flatten()
    }

    /// How many tracking groups there are: the length of a version vector.
    pub fn tracking_count(&self) -> usize {
        self.tracking_count
    }

    /// C(i), ascending.
    pub fn checking_of(&self, node: NodeId) -> &[u16] {
        self.checking.get(node.idx()).map_or(&[], |c| &c[..])
    }

    /// The checking group a client names when it reads at `node` (Alg 7.1
    /// line 3's `cg`): the first of C(node).
    pub fn home_checking(&self, node: NodeId) -> Option<u16> {
        self.checking_of(node).first().copied()
    }

    /// The servers of checking group `cg`, ascending.
    pub fn members(&self, cg: u16) -> &[NodeId] {
        self.members.get(cg as usize).map_or(&[], |m| &m[..])
    }

    /// How many checking groups there are: a session names one of `0..`
    /// this ([`causeway_core::Client::set_checking_group`]). Presets
    /// number them as [`Grouping`] says (`per_replica`: group d is DC d's
    /// servers; `per_key`: group p is partition p's copies; `per_server`:
    /// servers DC by DC, partitions ascending; `per_system`: group 0);
    /// explicit groups in the order listed.
    pub fn checking_count(&self) -> usize {
        self.members.len()
    }

    /// The server a GET of a key of partition `p`, from a session in DC
    /// `from`, goes to when it names checking group `cg` (Alg 7.1 line 3's
    /// load balancer L, restricted to the servers that can check `cg`): the
    /// key's usual server if it is in `cg`, otherwise the first member of
    /// `cg` storing `p` in ring order from `from`. `None` when no member of
    /// `cg` stores `p`.
    pub fn server_in(&self, cg: u16, topology: &Topology, from: DcId, p: PartitionId) -> Option<NodeId> {
        let checks = |n: NodeId| self.checking_of(n).binary_search(&cg).is_ok();
        let usual = topology.server(topology.serving_dc(from, p), p).filter(|&n| checks(n));
        let m = topology.dcs() as u16;
        usual.or_else(|| (0..m).filter_map(|i| topology.server(DcId((from.0 + i) % m), p)).find(|&n| checks(n)))
    }
}

/// Every partition server as (dc, partition, node), DC by DC.
fn servers(topology: &Topology) -> Vec<(DcId, PartitionId, NodeId)> {
    topology
        .dc_ids()
        .flat_map(|d| topology.partitions_at(d).iter().map(move |&p| (d, p)))
        .filter_map(|(d, p)| topology.server(d, p).map(|n| (d, p, n)))
        .collect()
}

/// The groups of each server (indexed as `servers`), and how many groups.
struct Assigned {
    of: Vec<Vec<u16>>,
    count: usize,
}

fn assign(
    g: &Grouping,
    field: &'static str,
    topology: &Topology,
    servers: &[(DcId, PartitionId, NodeId)],
) -> Result<Assigned, GroupingError> {
    let tracking = field == "tracking";
    let name = |i: usize| format!("{}:{}", servers[i].0.0, servers[i].1.0);
    let Grouping::Explicit(groups) = g else {
        // Groups are numbered in 16 bits: one group per server (or per
        // partition) must fit.
        let presets = match g {
            Grouping::PerServer => servers.len(),
            Grouping::PerKey => topology.partitions(),
            _ => 0,
        };
        if presets > u16::MAX as usize {
            return Err(GroupingError::TooMany { field, count: presets });
        }
        let mut count = 1;
        let of = servers
            .iter()
            .enumerate()
            .map(|(i, &(d, p, _))| {
                let (group, n) = g.preset(topology, d, p, i).expect("a preset");
                count = n;
                vec![group]
            })
            .collect();
        return Ok(Assigned { of, count });
    };
    if groups.len() > u16::MAX as usize {
        return Err(GroupingError::TooMany { field, count: groups.len() });
    }
    let mut of: Vec<Vec<u16>> = vec![Vec::new(); servers.len()];
    for (gi, group) in groups.iter().enumerate() {
        if group.is_empty() {
            return Err(GroupingError::EmptyGroup { field, group: gi });
        }
        for n in group {
            let (dc, partition) =
                parse_name(n).ok_or_else(|| GroupingError::BadName { field, group: gi, name: n.clone() })?;
            let at = servers
                .iter()
                .position(|&(d, p, _)| u64::from(d.0) == dc && u64::from(p.0) == partition)
                .ok_or_else(|| GroupingError::NoSuchServer { field, group: gi, name: n.clone(), dc, partition })?;
            let gi16 = gi as u16;
            match of[at].first() {
                Some(&first) if tracking => {
                    return Err(GroupingError::TrackedTwice { name: name(at), first: first as usize, second: gi });
                }
                _ if of[at].contains(&gi16) => return Err(GroupingError::CheckedTwice { group: gi, name: name(at) }),
                _ => of[at].push(gi16),
            }
        }
    }
    if let Some(i) = of.iter().position(|g| g.is_empty()) {
        let what = if tracking { "exactly one tracking group" } else { "at least one checking group" };
        return Err(GroupingError::Missing { field, name: name(i), what });
    }
    Ok(Assigned { of, count: groups.len() })
}

/// `"<dc>:<partition>"` as numbers.
fn parse_name(s: &str) -> Option<(u64, u64)> {
    let (d, p) = s.split_once(':')?;
    Some((d.trim().parse().ok()?, p.trim().parse().ok()?))
}

impl Serialize for Grouping {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (self, self.name()) {
            (_, Some(name)) => s.serialize_str(name),
            (Grouping::Explicit(groups), None) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("groups", groups)?;
                m.end()
            }
            (_, None) => unreachable!("every preset has a name"),
        }
    }
}

/// A preset's name (`"per_replica"`), its number in [`Grouping::PRESETS`]
/// (what torture draws), or `{ groups = [[…], …] }`.
impl<'de> Deserialize<'de> for Grouping {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Grouping;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("one of \"per_server\", \"per_key\", \"per_replica\", \"per_system\" (or 0–3), or { groups = [[\"<dc>:<partition>\", …], …] }")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Grouping, E> {
                let found = Grouping::PRESETS.iter().find(|(n, _)| *n == s);
                found.map(|(_, g)| g.clone()).ok_or_else(|| E::invalid_value(de::Unexpected::Str(s), &self))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Grouping, E> {
                let found = Grouping::PRESETS.get(n as usize);
                found.map(|(_, g)| g.clone()).ok_or_else(|| E::invalid_value(de::Unexpected::Unsigned(n), &self))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Grouping, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::invalid_value(de::Unexpected::Signed(n), &self)),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Grouping, A::Error> {
                let mut groups = None;
                while let Some(k) = map.next_key::<String>()? {
                    match k.as_str() {
                        "groups" if groups.is_none() => groups = Some(map.next_value::<Vec<Vec<String>>>()?),
                        "groups" => return Err(de::Error::duplicate_field("groups")),
                        other => return Err(de::Error::unknown_field(other, &["groups"])),
                    }
                }
                groups.map(Grouping::Explicit).ok_or_else(|| de::Error::missing_field("groups"))
            }
        }
        d.deserialize_any(V)
    }
}
