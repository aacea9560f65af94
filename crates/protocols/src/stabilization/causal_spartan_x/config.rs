use crate::stabilization::pace::PaceConfig;
use serde::{Deserialize, Serialize};

/// Protocol parameters. The thesis gives no values for θ and Δ;
/// the defaults are a few milliseconds, well under a WAN round trip.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Δ: a server that sent no Replicate since its last heartbeat tick sends
    /// `⟨Heartbeat VV[m]⟩` to its equivalents (Alg 5.3).
    pub heartbeat_interval_us: u64,
    /// θ: the period of the DSV tree step (Alg 5.3) and of GC.
    pub stabilization_interval_us: u64,
    /// Idle pacing: Δ and θ slow down while no work is seen (`[protocol.pace]`).
    pub pace: PaceConfig,
    /// Children per node of the DC's aggregation tree.
    pub tree_fanout: usize,
    /// GC keeps every version a DSV younger than this could still need.
    /// Default [`DEFAULT_GC_GRACE_US`](crate::stabilization::version_gc::DEFAULT_GC_GRACE_US), 200 ms.
    pub gc_grace_us: u64,
    /// The periodic GC pass looks at a key only once it has gone this
    /// long without a write ([`VersionGc::new`](crate::stabilization::version_gc::VersionGc::new)):
    /// a key written again sooner is collected by that write, for free. A
    /// key that goes quiet keeps one superseded version up to this long.
    pub gc_quiet_us: u64,
    /// Restore the printed lines 7 and 10, which merge the client's DS into the
    /// DSV for every entry, and disable the client cache. This mode exhibits
    /// the §5.5 anomaly; it exists for tests and comparison only.
    pub paper_dsv_merge: bool,
    /// A deliberately broken variant, for proving the checker and torture can
    /// fail: GET skips line 3's visibility check and returns the latest
    /// version that has arrived, stable or not. Never set it in production.
    pub mutant_skip_visibility_check: bool,
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
            paper_dsv_merge: false,
            mutant_skip_visibility_check: false,
        }
    }
}

crate::stabilization::stabilization_config!(Config);
