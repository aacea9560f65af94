use crate::stabilization::pace::PaceConfig;
use serde::{Deserialize, Serialize};

/// GentleRain's parameters (the `[protocol]` table).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Δ: a partition that sent no replicate since its previous heartbeat
    /// tick sends its clock to its equivalents every Δ.
    pub heartbeat_interval_us: u64,
    /// θ: how often each partition runs a step of the GST tree (and GC).
    pub stabilization_interval_us: u64,
    /// Idle pacing: Δ and θ slow down while no work is seen (`[protocol.pace]`).
    pub pace: PaceConfig,
    /// Children per node of the per-DC GST aggregation tree.
    pub tree_fanout: usize,
    /// Versions are dropped only below a GST at least this old (local clock),
    /// so ROTs whose snapshot is slightly behind still find their versions.
    /// Default [`DEFAULT_GC_GRACE_US`](crate::stabilization::version_gc::DEFAULT_GC_GRACE_US), 200 ms.
    pub gc_grace_us: u64,
    /// The periodic pass collects a key only once it has gone this long
    /// without a write ([`VersionGc::new`](crate::stabilization::version_gc::VersionGc::new)):
    /// a key written again sooner is collected by that write, for free. A
    /// key that goes quiet keeps one superseded version up to this long.
    pub gc_quiet_us: u64,
    /// A ROT whose `dt` is more than this ahead of the coordinator's GST would
    /// fall back to Eiger in the paper; here it fails with
    /// [`OpError::Aborted`](causeway_core::OpError::Aborted). `u64::MAX` (the default): always wait.
    pub rot_wait_threshold_us: u64,
    /// A deliberately broken variant: GETs return the newest version
    /// whatever the GST (the visibility rule of Alg. 4.2 switched off).
    /// The conformance suite and torture must catch it.
    pub mutant_skip_gst_check: bool,
    /// Test only: never send heartbeats, so GST moves only with replicated
    /// writes and stops when they do — a stall torture's liveness check
    /// must catch.
    pub mutant_drop_heartbeats: bool,
    /// Test only: a restart forgets the journaled GST (deviation 10), as
    /// the paper's crash-free servers would; crash-restart torture must
    /// catch it.
    pub mutant_skip_recovery: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            heartbeat_interval_us: 10_000,
            stabilization_interval_us: 5_000,
            pace: PaceConfig::default(),
            tree_fanout: 4,
            gc_grace_us: crate::stabilization::version_gc::DEFAULT_GC_GRACE_US,
            gc_quiet_us: 5_000_000,
            rot_wait_threshold_us: u64::MAX,
            mutant_skip_gst_check: false,
            mutant_drop_heartbeats: false,
            mutant_skip_recovery: false,
        }
    }
}

crate::stabilization::stabilization_config!(Config);
