use super::grouping::{Grouping, GroupingError, Groups};
use causeway_core::Topology;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// ACCF's parameters: the groupings T and C (Roohitavaf, "Consistency for
/// Distributed Data Stores", §7.2) and the periods the thesis leaves open.
///
/// ```toml
/// [protocol]
/// tracking = "per_replica"                       # T: 2×2, CausalSpartan's row
/// checking = { groups = [["0:0"], ["0:1"], ["1:0"], ["1:1"]] }   # C: 4×1
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// T: every server's tracking group. A version's timestamp speaks for
    /// its writer's group; coarser groups mean shorter dependency sets and
    /// more false dependencies (§7.1).
    pub tracking: Grouping,
    /// C: every server's checking groups. A server admits a version for
    /// reads naming group `cg` once every member of `cg` has received what
    /// the version depends on (SVV^cg); a client reading only inside one
    /// checking group never waits (§7.2.2).
    pub checking: Grouping,
    /// How often a server that sent no Replicate since the last tick sends
    /// ⟨Heartbeat HLC⟩ to the servers it shares keys with (§7.2.2: "in case
    /// of not sending any replicate message for a specific amount of time";
    /// the thesis gives no value).
    pub heartbeat_interval_us: u64,
    /// How often the members of a checking group share their VVs and get
    /// the group's SVV back ("periodically", no value given).
    pub svv_interval_us: u64,
    /// How far ahead of HLC_i a server journals the bound its heartbeats
    /// stay below: one durable write per lease rather than per heartbeat;
    /// after a restart, timestamps may run this far ahead of the clock.
    pub clock_lease_us: u64,
    /// The longest a GET waits at line 3 for its dependencies to arrive
    /// before it is answered with an error: the thesis's GET waits without
    /// bound, which a DC cut off for long would make a hang.
    pub get_wait_limit_us: u64,
    /// A deliberately broken variant, for proving that the checker and the
    /// conformance suite can fail: GET skips line 3's wait on VV and lines
    /// 4–5's SVV filter, and returns the latest version that has arrived.
    /// Never set it in production.
    pub mutant_skip_dependency_checks: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tracking: Grouping::PerReplica,
            checking: Grouping::PerReplica,
            heartbeat_interval_us: 10_000,
            svv_interval_us: 5_000,
            clock_lease_us: 100_000,
            get_wait_limit_us: 10_000_000,
            mutant_skip_dependency_checks: false,
        }
    }
}

/// What is wrong with an ACCF config, naming the field.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error(transparent)]
    Grouping(#[from] GroupingError),
    #[error("protocol.{0} must be at least 1 µs")]
    ZeroInterval(&'static str),
    #[error("accf runs one server per partition per DC: topology.replicas_per_partition must be 1, got {0}")]
    ReplicasPerPartition(u16),
}

impl Config {
    /// Check the config against a topology and resolve the groupings.
    pub fn resolve(&self, topology: &Topology) -> Result<Groups, ConfigError> {
        for (field, v) in [
            ("heartbeat_interval_us", self.heartbeat_interval_us),
            ("svv_interval_us", self.svv_interval_us),
            ("clock_lease_us", self.clock_lease_us),
            ("get_wait_limit_us", self.get_wait_limit_us),
        ] {
            if v == 0 {
                return Err(ConfigError::ZeroInterval(field));
            }
        }
        let replicas = topology.spec().replicas_per_partition;
        if replicas != 1 {
            return Err(ConfigError::ReplicasPerPartition(replicas));
        }
        Ok(Groups::resolve(&self.tracking, &self.checking, topology)?)
    }
}
