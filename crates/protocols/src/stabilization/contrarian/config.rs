use crate::stabilization::pace::PaceConfig;
use serde::{Deserialize, Serialize};

/// Contrarian's parameters (the `[protocol]` table). Didona et al. §5 run
/// the stabilization every 5 ms; the heartbeat interval is not given, so
/// it is the family's 10 ms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Communication steps of a ROT that spans more than one partition:
    /// 3 (the paper's default "1½ rounds": client → coordinator →
    /// partitions → client) or 4 ("2 rounds": the coordinator hands the
    /// snapshot back to the client, which then reads at it). An integer so
    /// that torture can draw it (`Protocol::torture_params`).
    pub rot_steps: u8,
    /// Δ: a partition that sent no Replicate since its previous heartbeat
    /// tick sends its clock to its replicas ("if it does not process a PUT
    /// for a given amount of time", §4).
    pub heartbeat_interval_us: u64,
    /// θ: the period of the GSS tree step (and of GC and orphan expiry).
    pub stabilization_interval_us: u64,
    /// Idle pacing: Δ and θ slow down while no work is seen (`[protocol.pace]`).
    pub pace: PaceConfig,
    /// Children per node of the DC's aggregation tree.
    pub tree_fanout: usize,
    /// Pure logical clocks instead of hybrid ones: the physical clock is
    /// never read, timestamps are Lamport counters (§4: "Contrarian ...
    /// works with plain logical clocks", at a freshness cost).
    pub logical_clocks: bool,
    /// The clock floor journaled for crash recovery runs this far (in the
    /// HLC's `l`, µs) ahead of the clock, so the floor is rewritten about
    /// once per lease rather than on every timestamp (deviation 9).
    pub clock_lease_us: u64,
    /// A 1½-round read that got only one of its two halves (the client's
    /// keys, the coordinator's snapshot) is dropped after this long: its
    /// other half was lost with a crashed node or a refused request.
    pub orphan_read_timeout_us: u64,
    /// GC keeps every version a snapshot this much younger than the
    /// current GSS could still need.
    /// Default [`DEFAULT_GC_GRACE_US`](crate::stabilization::version_gc::DEFAULT_GC_GRACE_US), 200 ms.
    pub gc_grace_us: u64,
    /// The periodic GC pass looks at a key only once it has gone this
    /// long without a write ([`VersionGc::new`](crate::stabilization::version_gc::VersionGc::new)):
    /// a key written again sooner is collected by that write, for free. A
    /// key that goes quiet keeps one superseded version up to this long.
    pub gc_quiet_us: u64,
    /// A deliberately broken variant: reads ignore the remote entries of a
    /// version's dependency vector, so a remote version is returned before
    /// what it depends on is stable here. The conformance suite and torture
    /// must catch it. Never set it in production.
    pub mutant_skip_visibility_check: bool,
    /// A deliberately broken variant: the coordinator ignores the snapshot
    /// the client piggybacks, so a client's snapshots can go backwards
    /// (a ROT coordinated by a partition whose clock or GSS lags misses the
    /// client's own writes). Torture must catch it.
    pub mutant_no_piggyback: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            rot_steps: 3,
            heartbeat_interval_us: 10_000,
            stabilization_interval_us: 5_000,
            pace: PaceConfig::default(),
            tree_fanout: 4,
            logical_clocks: false,
            clock_lease_us: 1_000_000,
            orphan_read_timeout_us: 10_000_000,
            gc_grace_us: crate::stabilization::version_gc::DEFAULT_GC_GRACE_US,
            gc_quiet_us: 5_000_000,
            mutant_skip_visibility_check: false,
            mutant_no_piggyback: false,
        }
    }
}

crate::stabilization::stabilization_config!(Config, check: |cfg: &Config| {
    if !matches!(cfg.rot_steps, 3 | 4) {
        return Err(format!("protocol.rot_steps must be 3 (1½ rounds) or 4 (2 rounds), not {}", cfg.rot_steps));
    }
    if cfg.clock_lease_us == 0 {
        return Err("protocol.clock_lease_us must be positive".into());
    }
    if cfg.orphan_read_timeout_us == 0 {
        return Err("protocol.orphan_read_timeout_us must be positive".into());
    }
    Ok(())
});
