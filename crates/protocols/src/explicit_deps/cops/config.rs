use serde::{Deserialize, Serialize};

/// COPS's one tunable, and a deliberately broken variant for tests.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Re-send a `dep_check` unanswered for this long (§2.7 step 4).
    pub dep_check_retry_ms: u64,
    /// How often servers exchange what they have committed, to flag
    /// versions committed in every DC never-depend (§6.1; COPS: 10×/s).
    pub settle_interval_ms: u64,
    /// Test only: commit replicated writes without checking their
    /// dependencies, which the checker and torture must catch.
    pub mutant_skip_dep_check: bool,
    /// Test only: restart without recovering pending replicated writes and
    /// the committed-through table, which crash-restart torture must catch.
    pub mutant_skip_recovery: bool,
}

impl Config {
    /// The fields' own checks, for `validate`.
    pub fn check(&self) -> Result<(), String> {
        if self.dep_check_retry_ms == 0 || self.settle_interval_ms == 0 {
            return Err("dep_check_retry_ms and settle_interval_ms must be at least 1".into());
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            dep_check_retry_ms: 1_000,
            settle_interval_ms: 100,
            mutant_skip_dep_check: false,
            mutant_skip_recovery: false,
        }
    }
}
