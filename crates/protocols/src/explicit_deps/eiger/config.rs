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
    /// A cohort whose coordinator has not told it the outcome this long
    /// after it prepared terminates the transaction without it, and a
    /// coordinator whose only cohort has not acknowledged its commit this
    /// long after it decided asks the witness instead (deviation 7).
    pub txn_terminate_ms: u64,
    /// Test only: a write-only transaction's coordinator commits once its
    /// own writes are prepared, without waiting for every YESVOTE.
    pub mutant_commit_without_all_votes: bool,
    /// Test only: a remote cohort applies a transaction's write when it
    /// arrives, before the coordinator's `dep_check`s succeeded.
    pub mutant_cohort_skips_coordinator_dep_check: bool,
    /// The column families every row has (Lloyd §5.2; the same list on
    /// every node and client). `default` (a regular family) must be
    /// listed: plain keys are its column `value`. A location in a family
    /// not listed is refused.
    pub families: Vec<Family>,
}

/// A column family: regular columns (`insert` overwrites, `delete` writes
/// a tombstone) or counter columns (`add` only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Family {
    pub name: String,
    #[serde(default)]
    pub counter: bool,
}

/// What kind of column a location is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnKind {
    Regular,
    Counter,
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
            txn_retry_ms: 50,
            txn_abort_ms: 200,
            txn_terminate_ms: 200,
            mutant_commit_without_all_votes: false,
            mutant_cohort_skips_coordinator_dep_check: false,
            families: vec![
                Family { name: causeway_core::column::DEFAULT_FAMILY.into(), counter: false },
                Family { name: "counters".into(), counter: true },
            ],
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
            ("txn_terminate_ms", 1, self.txn_terminate_ms),
        ] {
            if got < min {
                return Err(format!("{field} must be at least {min}, got {got}"));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for f in &self.families {
            causeway_core::column::location_key(b"r", f.name.as_bytes(), b"c").map_err(|e| format!("families: {e}"))?;
            if !seen.insert(&f.name) {
                return Err(format!("families: {:?} is listed twice", f.name));
            }
        }
        match self.family(causeway_core::column::DEFAULT_FAMILY.as_bytes()) {
            Some(ColumnKind::Regular) => Ok(()),
            _ => Err(format!(
                "families must list {:?} as a regular (non-counter) family: plain keys live there",
                causeway_core::column::DEFAULT_FAMILY
            )),
        }
    }

    /// The kind of family `name`, if it is declared.
    pub fn family(&self, name: &[u8]) -> Option<ColumnKind> {
        let f = self.families.iter().find(|f| f.name.as_bytes() == name)?;
        Some(if f.counter { ColumnKind::Counter } else { ColumnKind::Regular })
    }

    /// The kind of column at location `key` (a plain key is the default
    /// location), or why `key` names no column of this store: malformed,
    /// or in an undeclared family.
    pub fn column_kind(&self, key: &[u8]) -> Result<ColumnKind, String> {
        let loc = causeway_core::column::parse_location(key).map_err(|e| e.to_string())?;
        self.family(loc.family)
            .ok_or_else(|| format!("unknown column family {:?}", String::from_utf8_lossy(loc.family)))
    }

    /// Refuse `key` unless it is a column of `kind`, naming the problem.
    pub fn expect_kind(&self, key: &[u8], kind: ColumnKind) -> Result<(), String> {
        let got = self.column_kind(key)?;
        if got == kind {
            return Ok(());
        }
        let loc = causeway_core::column::parse_location(key).expect("parsed above");
        let name = format!(
            "{}:{}:{}",
            String::from_utf8_lossy(loc.row),
            String::from_utf8_lossy(loc.family),
            String::from_utf8_lossy(loc.column)
        );
        Err(match kind {
            ColumnKind::Counter => format!("{name} is not a counter column: only counters take add"),
            ColumnKind::Regular => format!("{name} is a counter column: it takes add, not put or delete"),
        })
    }

    pub(super) fn trans_time_us(&self) -> u64 {
        self.trans_time_ms * 1_000
    }

    pub(super) fn txn_retry_us(&self) -> u64 {
        self.txn_retry_ms * 1_000
    }

    pub(super) fn txn_terminate_us(&self) -> u64 {
        self.txn_terminate_ms * 1_000
    }

    /// How long a server keeps an overwritten version: `trans_time` plus
    /// the margin.
    pub(super) fn hold_us(&self) -> u64 {
        (self.trans_time_ms + self.clock_margin_ms) * 1_000
    }
}
