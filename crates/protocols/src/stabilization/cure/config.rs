use crate::stabilization::pace::PaceConfig;
use serde::{Deserialize, Serialize};

/// Cure's parameters (the `[protocol]` table). Didona et al. §5 run every
/// protocol's stabilization every 5 ms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Δ: a partition that sent no Replicate since its previous heartbeat
    /// tick sends its clock to its replicas.
    pub heartbeat_interval_us: u64,
    /// θ: the period of the GST tree step (and of GC).
    pub stabilization_interval_us: u64,
    /// Idle pacing: Δ and θ slow down while no work is seen (`[protocol.pace]`).
    pub pace: PaceConfig,
    /// Children per node of the DC's aggregation tree.
    pub tree_fanout: usize,
    /// A request that would wait longer than this for the physical clock
    /// (its snapshot or dependencies are that far ahead) is refused with
    /// `Aborted` instead: clocks are never that far apart in a healthy
    /// deployment, and the wait would hold the client for as long.
    pub max_clock_wait_us: u64,
    /// GC keeps every version a snapshot this much older than the current
    /// GST could still need.
    /// Default [`DEFAULT_GC_GRACE_US`](crate::stabilization::version_gc::DEFAULT_GC_GRACE_US), 200 ms.
    pub gc_grace_us: u64,
    /// The periodic GC pass looks at a key only once it has gone this
    /// long without a write ([`VersionGc::new`](crate::stabilization::version_gc::VersionGc::new)):
    /// a key written again sooner is collected by that write, for free. A
    /// key that goes quiet keeps one superseded version up to this long.
    pub gc_quiet_us: u64,
    /// A deliberately broken variant: reads ignore the remote entries of a
    /// version's dependency vector. The conformance suite must catch it.
    pub mutant_skip_visibility_check: bool,
    /// A deliberately broken variant: a partition reads at a snapshot
    /// without waiting for its clock to pass the snapshot's local entry, so
    /// a later local write can slip under it (the Fig. 1 anomaly of Didona
    /// et al. §3). The scripted Fig. 1 test catches it.
    pub mutant_skip_clock_wait: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            heartbeat_interval_us: 10_000,
            stabilization_interval_us: 5_000,
            pace: PaceConfig::default(),
            tree_fanout: 4,
            max_clock_wait_us: 10_000_000,
            gc_grace_us: crate::stabilization::version_gc::DEFAULT_GC_GRACE_US,
            gc_quiet_us: 5_000_000,
            mutant_skip_visibility_check: false,
            mutant_skip_clock_wait: false,
        }
    }
}

crate::stabilization::stabilization_config!(Config, check: |cfg: &Config| {
    if cfg.max_clock_wait_us == 0 {
        return Err("protocol.max_clock_wait_us must be positive".into());
    }
    Ok(())
});
