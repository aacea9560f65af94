use serde::{Deserialize, Serialize};

/// EunomiaKV's parameters (the `[protocol]` table). The paper gives no
/// values for Δ, θ or ρ (§3, §4); the batching interval is its
/// evaluation's 1 ms (§5, §7).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// How often a partition sends the metadata of its new updates to its
    /// DC's Eunomia replicas (§5 "batching": every 1 ms in the paper's
    /// evaluation). 0: each update's metadata leaves with its PUT.
    pub batch_interval_us: u64,
    /// Δ (Alg 2 line 10): a partition that reported nothing for a whole
    /// Δ sends a heartbeat, so StableTime advances with no updates.
    pub heartbeat_interval_us: u64,
    /// How far ahead of MaxTs_n a partition journals the bound it restarts
    /// from (deviation 6). Larger: fewer log writes while idle (one per
    /// lease instead of one per Δ); after a restart the partition's
    /// timestamps jump up to this far ahead of its clock, delaying its next
    /// updates' stability by as much.
    pub clock_lease_us: u64,
    /// θ (Alg 3 line 7, Alg 4 line 6): how often the leading Eunomia
    /// replica computes StableTime and ships the stable updates.
    pub process_stable_interval_us: u64,
    /// The period of the Eunomia replicas' failure detector (§3.3's Ω):
    /// each replica tells the others it is alive (and its StableTime)
    /// this often.
    pub fd_interval_us: u64,
    /// A replica not heard from for this many failure-detector periods is
    /// suspected; the lowest-indexed unsuspected replica leads.
    pub fd_timeout_ticks: u64,
    /// How often, at most, a receiver acknowledges what it has queued to
    /// the Eunomia replicas of each origin (`Shipped`, deviation 7): the
    /// first acknowledgement leaves at once, later ones wait for this
    /// interval. Only the replicas' memory of shipped updates and a new
    /// leader's first range wait on it; one acknowledgement per shipment
    /// (every θ from each origin) was a fifth of an idle-looking DC's
    /// messages. 0: one with every shipment.
    pub shipped_ack_interval_us: u64,
    /// ρ (Alg 5 line 3, `check_pending` "every ρ"): a receiver starts an
    /// apply round at most this often, so one round takes what every
    /// origin shipped meanwhile. 0: a round starts whenever a shipment
    /// arrives or the previous round ends (one round per shipment, about
    /// twice the apply messages with two origins shipping every θ).
    pub check_pending_interval_us: u64,
    /// The receiver resends an apply round that a partition has not
    /// acknowledged after this long (the partition may have restarted and
    /// forgotten that it was waiting for the payload).
    pub apply_retry_us: u64,
    /// A straggling partition (§7.2.3, Fig 7: "one partition ... contacts
    /// its local Eunomia only every 10, 100 or 1000 ms"): partition
    /// `straggler_partition` of DC `straggler_dc` reports, and heartbeats,
    /// every `straggler_interval_us` instead of every `batch_interval_us`
    /// and Δ. Unset: none straggles.
    pub straggler_partition: Option<u32>,
    pub straggler_dc: u16,
    pub straggler_interval_us: u64,
    /// A deliberately broken variant: the receiver does not wait for a
    /// partition to acknowledge an apply before it moves on (the paper's
    /// apply is synchronous, Alg 5 lines 14–15), so a dependent update can
    /// become visible before its dependency. The conformance suite and
    /// torture must catch it.
    pub mutant_async_apply: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            batch_interval_us: 1_000,
            heartbeat_interval_us: 1_000,
            clock_lease_us: 100_000,
            process_stable_interval_us: 1_000,
            fd_interval_us: 5_000,
            fd_timeout_ticks: 4,
            shipped_ack_interval_us: 5_000,
            check_pending_interval_us: 1_000,
            apply_retry_us: 100_000,
            straggler_partition: None,
            straggler_dc: 0,
            straggler_interval_us: 1_000,
            mutant_async_apply: false,
        }
    }
}
