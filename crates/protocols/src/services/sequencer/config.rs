use serde::{Deserialize, Serialize};

/// S-Seq's parameters (the `[protocol]` table). The paper gives none: its
/// sequencer has no timers (§2, §7.1); the one here is the receiver's
/// resend of an unacknowledged apply round.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// ρ (EunomiaKV's Alg 5 line 3, `check_pending`, "every ρ time"): how
    /// often the receiver looks for updates it can apply. A round that
    /// ends goes straight on to the next (Alg 5's `flush` runs until
    /// nothing more applies). The paper gives no value.
    pub check_pending_interval_us: u64,
    /// The receiver resends an apply round that a partition has not
    /// acknowledged after this long (the partition may have restarted and
    /// forgotten that it was waiting for the payload).
    pub apply_retry_us: u64,
    /// A-Seq, the paper's "asynchronous (bogus) variant of S-Seq, that
    /// contacts the sequencer in parallel with applying the update" (§2,
    /// Fig. 1): the partition acknowledges the PUT at once, with the
    /// client's causal past unchanged, and asks for the number in
    /// parallel. It "fails to capture causality": an update that follows
    /// it carries no dependency on it. A deliberately broken variant
    /// (a [`causeway_core::Protocol::MUTANTS`] entry): the conformance
    /// suite and torture must catch it; experiments run it as a series
    /// (`sseq:mutant_async_sequencer=true`) for its throughput.
    pub mutant_async_sequencer: bool,
    /// A straggling partition (§7.2.3, Fig 7, the sequencer half: "clients
    /// operating with stragglers observe an increase in latency equivalent
    /// to the straggling interval"): partition `straggler_partition` of DC
    /// `straggler_dc` sends its requests for numbers only every
    /// `straggler_interval_us`, and its PUTs wait for the next send.
    /// Unset: none straggles.
    pub straggler_partition: Option<u32>,
    pub straggler_dc: u16,
    pub straggler_interval_us: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            check_pending_interval_us: 2_000,
            apply_retry_us: 100_000,
            mutant_async_sequencer: false,
            straggler_partition: None,
            straggler_dc: 0,
            straggler_interval_us: 1_000,
        }
    }
}
