use serde::{Deserialize, Serialize};

/// PaRiS's and BPR's parameters (the `[protocol]` table). Spirovska et al.
/// §V run "stabilization protocols every 5 ms".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Δ_R: how often a partition applies its committed transactions in
    /// timestamp order, replicates them, and heartbeats when it has none
    /// (Alg. 4 lines 6–22).
    pub apply_interval_us: u64,
    /// Δ_G = Δ_U: how often a partition steps the DC's aggregation tree,
    /// and a DC's root exchanges its GST with the other DCs' roots and
    /// pushes the UST down (§IV-B; deviation 3).
    pub stabilization_interval_us: u64,
    /// Children per node of the DC's aggregation tree.
    pub tree_fanout: usize,
    /// How long a coordinator keeps an interactive transaction open with
    /// no step from its client. Past it the transaction is dropped (its
    /// next step is refused as aborted), so a client that vanished never
    /// holds the GC horizon, which an open snapshot pins, for ever.
    pub txn_idle_timeout_us: u64,
    /// At most this many interactive transactions open per coordinator; a
    /// START beyond it is refused as aborted.
    pub max_open_txns: usize,
    /// How long a cohort holds a prepared transaction before it asks the
    /// coordinator how it ended, and again after each "undecided" answer.
    /// A prepared entry holds the cohort's version clock (and so the UST,
    /// and BPR's reads) below its proposed time; a coordinator that crashed
    /// before deciding never sends COMMIT, and the answer "aborted" frees
    /// the entry (deviation 10). Counted in Δ_R ticks, not read off the
    /// clock, which may jump. Well above a prepare-to-commit round trip, so
    /// that a healthy transaction is rarely asked about.
    pub prepared_query_us: u64,
    /// A deliberately broken variant: a read slice returns the freshest
    /// version a partition stores, ignoring the transaction's snapshot (a
    /// read above the UST, not covered by the client cache). The
    /// conformance suite must catch it.
    pub mutant_read_above_ust: bool,
    /// A deliberately broken variant: a client empties its write cache at
    /// each operation instead of dropping only the writes the snapshot
    /// covers, so it loses sight of its own writes while the UST lags
    /// (the unit test `cache_gives_read_your_writes_while_ust_is_frozen`
    /// catches it; the conformance scenarios read other sessions' writes).
    pub mutant_prune_cache_early: bool,
    /// A deliberately broken variant of BPR: a read slice is served at
    /// once, before the partition has applied everything up to its
    /// snapshot. The conformance suite must catch it (in BPR).
    pub mutant_skip_read_wait: bool,
    /// A deliberately broken variant: each step of an interactive
    /// transaction reads at the coordinator's snapshot of the moment
    /// rather than the one START fixed, so two rounds of one transaction
    /// may see two snapshots. The conformance suite must catch it in
    /// PaRiS (a mutant of PaRiS only: BPR's rounds block on a fresh
    /// snapshot each, so few of its transactions span a commit of the keys
    /// they read in the suite's runs).
    pub mutant_fresh_snapshot_per_step: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            apply_interval_us: 5_000,
            stabilization_interval_us: 5_000,
            tree_fanout: 4,
            txn_idle_timeout_us: 10_000_000,
            max_open_txns: 10_000,
            prepared_query_us: 1_000_000,
            mutant_read_above_ust: false,
            mutant_prune_cache_early: false,
            mutant_skip_read_wait: false,
            mutant_fresh_snapshot_per_step: false,
        }
    }
}

impl Config {
    pub(super) fn check(&self) -> Result<(), String> {
        if self.apply_interval_us == 0 {
            return Err("protocol.apply_interval_us must be positive".into());
        }
        if self.stabilization_interval_us == 0 {
            return Err("protocol.stabilization_interval_us must be positive".into());
        }
        if self.txn_idle_timeout_us == 0 {
            return Err("protocol.txn_idle_timeout_us must be positive".into());
        }
        if self.prepared_query_us == 0 {
            return Err("protocol.prepared_query_us must be positive".into());
        }
        if self.max_open_txns == 0 {
            return Err("protocol.max_open_txns must be at least 1".into());
        }
        if self.tree_fanout == 0 {
            return Err("protocol.tree_fanout must be at least 1".into());
        }
        Ok(())
    }
}
