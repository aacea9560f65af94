use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// How long a read-only transaction may take, and so how long an
    /// overwritten version is kept for second-round reads (Lloyd §5.3,
    /// "limiting old values"; the paper's implementation: 5 s).
    pub trans_time_ms: u64,
    /// Added to `trans_time` wherever a server waits it out.
    pub clock_margin_ms: u64,
    /// Garbage-collection period.
    pub gc_interval_ms: u64,
    /// Re-send a `dep_check` unanswered for this long.
    pub dep_check_retry_ms: u64,
    /// Test only: a read-only transaction never runs its second round
    /// (returns first-round values whatever their valid intervals).
    pub mutant_one_round_rot: bool,
    /// Test only: replicated writes are applied without `dep_check`s.
    pub mutant_skip_dep_check: bool,
    /// Re-send unanswered transaction messages (votes, NOTIFYs, COMMITs,
    /// commit checks) after this long: a participant may have restarted.
    pub txn_retry_ms: u64,
    /// A coordinator that has waited this long for a transaction's votes
    /// (a participant lost its sub-request in a crash: client requests are
    /// not re-sent) aborts it.
    pub txn_abort_ms: u64,
    /// Test only: a write-only transaction's coordinator commits once its
    /// own writes are prepared, without waiting for every YESVOTE.
    pub mutant_commit_without_all_votes: bool,
    /// Test only: a remote cohort applies a transaction's write when it
    /// arrives, before the coordinator's `dep_check`s succeeded.
    pub mutant_cohort_skips_coordinator_dep_check: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            trans_time_ms: 5_000,
            clock_margin_ms: 100,
            gc_interval_ms: 100,
            dep_check_retry_ms: 1_000,
            mutant_one_round_rot: false,
            mutant_skip_dep_check: false,
            txn_retry_ms: 100,
            txn_abort_ms: 1_000,
            mutant_commit_without_all_votes: false,
            mutant_cohort_skips_coordinator_dep_check: false,
        }
    }
}

/// The most keys a write-only transaction may write; a larger one is
/// refused with [`causeway_core::OpError::BadRequest`].
pub const MAX_WOT_KEYS: usize = 256;

/// The shortest `trans_time_ms` accepted: a read round inside a DC must
/// fit in it many times over, or every read-only transaction restarts.
pub const MIN_TRANS_TIME_MS: u64 = 50;

impl Config {
    /// Refuse settings that cannot work, naming the field.
    pub fn check(&self) -> Result<(), String> {
        for (field, min, got) in [
            ("trans_time_ms", MIN_TRANS_TIME_MS, self.trans_time_ms),
            ("gc_interval_ms", 1, self.gc_interval_ms),
            ("dep_check_retry_ms", 1, self.dep_check_retry_ms),
            ("txn_retry_ms", 1, self.txn_retry_ms),
            ("txn_abort_ms", 1, self.txn_abort_ms),
        ] {
            if got < min {
                return Err(format!("{field} must be at least {min}, got {got}"));
            }
        }
        Ok(())
    }

    pub(super) fn trans_time_us(&self) -> u64 {
        self.trans_time_ms * 1_000
    }

    /// How long a server keeps an overwritten version: `trans_time` plus
    /// the margin.
    pub(super) fn hold_us(&self) -> u64 {
        (self.trans_time_ms + self.clock_margin_ms) * 1_000
    }
}
