use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// How long a read-only transaction may take, and so how long an
    /// overwritten version is kept (§6.1; the paper's implementation: 5 s).
    pub trans_time_ms: u64,
    /// Added to `trans_time` wherever a server waits it out (deviation 4).
    pub clock_margin_ms: u64,
    /// Garbage-collection and checkpoint period (COPS: 10×/s).
    pub gc_interval_ms: u64,
    /// Re-send a `dep_check` unanswered for this long (§2.7 step 4).
    pub dep_check_retry_ms: u64,
    /// Drop dependencies older than the checkpoint as soon as it is
    /// computed, and have `read_trans` check cuts instead (deviation 8).
    /// `false`: the paper's checkpoint, used `trans_time` after it is
    /// computed (§6.1), so a session's dependencies span `trans_time`.
    pub fresh_checkpoint: bool,
    /// Test only: `read_trans` skips its second round.
    pub mutant_one_round_rot: bool,
    /// Test only: replicated writes commit without checks.
    pub mutant_skip_dep_check: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            trans_time_ms: 5_000,
            clock_margin_ms: 100,
            gc_interval_ms: 100,
            dep_check_retry_ms: 1_000,
            fresh_checkpoint: true,
            mutant_one_round_rot: false,
            mutant_skip_dep_check: false,
        }
    }
}

/// The shortest `trans_time_ms` accepted. A `read_trans` that takes longer
/// than `trans_time` restarts (§6.1), so `trans_time` must exceed a read
/// round inside a DC — a LAN round trip, well under a millisecond, a few
/// under load — with room to spare; 50 ms is that many rounds and more.
/// Below it every `read_trans` could restart until it gives up.
pub const MIN_TRANS_TIME_MS: u64 = 50;

/// A configuration COPS-GT refuses, naming the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// `field` must be at least `min`; it is `got`.
    TooSmall { field: &'static str, min: u64, got: u64 },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::TooSmall { field, min, got } => write!(f, "{field} must be at least {min}, got {got}"),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Refuse settings that cannot work: zero periods, and a `trans_time`
    /// no read round fits in.
    pub fn check(&self) -> Result<(), ConfigError> {
        for (field, min, got) in [
            ("trans_time_ms", MIN_TRANS_TIME_MS, self.trans_time_ms),
            ("gc_interval_ms", 1, self.gc_interval_ms),
            ("dep_check_retry_ms", 1, self.dep_check_retry_ms),
        ] {
            if got < min {
                return Err(ConfigError::TooSmall { field, min, got });
            }
        }
        Ok(())
    }

    pub(super) fn trans_time_us(&self) -> u64 {
        self.trans_time_ms * 1_000
    }
    /// How long a server waits before trusting that no transaction still
    /// needs something: `trans_time` plus the margin.
    pub(super) fn hold_us(&self) -> u64 {
        (self.trans_time_ms + self.clock_margin_ms) * 1_000
    }
}
