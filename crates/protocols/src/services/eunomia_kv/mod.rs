//! # EunomiaKV: deferred update stabilization by a per-DC service
//!
//! Gunawardhana, Bravo, Rodrigues, "Unobtrusive Deferred Update
//! Stabilization for Efficient Geo-Replication", USENIX ATC 2017.
//! Sequencer-based stores order a DC's updates by calling a sequencer on
//! every update's path; EunomiaKV builds the same single ordered stream per
//! DC *after* the update has returned:
//!
//! - A **partition** (Alg 2, [`partition`]) stamps an update with its
//!   hybrid clock, MaxTs_n ← max(Clock_n, Clock_c + 1, MaxTs_n + 1),
//!   applies it and acknowledges it at once. It ships the payload straight
//!   to its sibling partitions in the other DCs and reports the metadata
//!   (key, vector timestamp, partition) to its DC's **Eunomia** in batches
//!   (§5), with a heartbeat every Δ when it has nothing to report.
//! - **Eunomia** (Alg 3, [`eunomia`]) keeps PartitionTime, the latest
//!   timestamp from each partition, and every θ ships all updates with
//!   ts ≤ StableTime = min(PartitionTime), in timestamp order, to the other
//!   DCs' receivers. By Properties 1 and 2 (§3.2) that order is causal.
//!   It is replicated (§3.3, Alg 4): r replicas (the topology's
//!   `eunomia` service instances) each receive every report; the
//!   lowest-indexed replica its failure detector does not suspect leads,
//!   ships, and tells the others its StableTime.
//! - The **receiver** (Alg 5, [`receiver`]) queues each origin DC's
//!   stream and applies the head of queue k once every other origin's
//!   SiteTime covers its vector timestamp, telling the local partition to
//!   make the version visible; the partition does so once the payload has
//!   arrived too, in whichever order the two came.
//! - The **client** (Alg 1, [`client`]) keeps VClock_c, one entry per DC.
//!
//! Deploy with `services = [{name = "eunomia", per_dc = r}, {name =
//! "receiver"}]` in `[topology]`; runtimes add both, one instance each,
//! when the topology leaves them out ([`Protocol::SERVICES`]).
//!
//! ## Deviations from the paper, and what it leaves open
//!
//! 1. **Full replication, one server per partition per DC**, as the paper.
//! 2. **Last-writer-wins on ⟨vts\[origin\], origin⟩, and Clock_c is the
//!    largest entry of VClock_c.** The paper leaves conflicts to Riak
//!    (notes §1, [absent]). For a last-writer-wins winner to follow
//!    causality, an update's own entry must exceed every entry of its causal
//!    past, so Alg 2 line 5's Clock_c + 1 uses the largest entry of the
//!    client's vector, where §4 uses only VClock_c\[m\]. Property 2 and
//!    Eunomia's order are unchanged (the entry still only grows).
//! 3. **Heartbeats** (Alg 2 lines 10–12) are sent when nothing was
//!    reported for a whole Δ (ticks, not clock readings, so a clock stepped
//!    back does not silence them), carry max(Clock_n, MaxTs_n + 1), and
//!    raise MaxTs_n to it. The listing never raises MaxTs_n, so an update in
//!    the heartbeat's clock tick could take a timestamp Eunomia already
//!    counts as stable (the notes' "implementation caution", §3).
//! 4. **Alg 5's scan skips an empty queue** (its `head` is undefined there;
//!    notes §5 errata), and runs when a shipment arrives or an apply round
//!    ends, but starts a round at most once per ρ
//!    (`check_pending_interval_us`, 1 ms): a shipment arriving after a
//!    quiet ρ is applied at once rather than at the next tick, and with
//!    shipments from several origins one round takes them all (one round
//!    per shipment was most of a loaded DC's messages). A round that had
//!    to leave eligible heads behind (deviation 8) is followed at once by
//!    the next, as Alg 5's flush goes on applying until no head is
//!    eligible: gating those too let the receiver fall seconds behind a
//!    DC writing chains of dependent updates. Same rule.
//! 5. **No acks from Eunomia replicas (Alg 4 line 5).** The paper's
//!    partitions resend each replica every update it has not acknowledged,
//!    to get the prefix property over lossy links. Causeway's channels are
//!    reliable and FIFO across crashes (the node core's outbox), which is
//!    the prefix property itself; a replica still applies Alg 4 line 2's
//!    filter, so a copy would be harmless.
//! 6. **Crash recovery**, absent from the paper (its receiver is a single
//!    point of failure, §1, and its replicas never restart). Partitions
//!    journal a lease on MaxTs_n (a bound `clock_lease_us` ahead of it,
//!    renewed when a heartbeat passes it, so an idle partition does not
//!    write its log every Δ) and the last time reported; a restarted
//!    partition resumes its clock at the lease and reports again every
//!    local version above the last report; Eunomia replicas journal
//!    PartitionTime and StableTime, the receiver SiteTime and the apply
//!    round in flight (sent again after a restart). Ops keeps each report
//!    as one version of the replica's own store, keyed by partition (its
//!    value the report's updates), and the receiver's queues keep each
//!    update as a version keyed by origin DC and key, so a turn journals
//!    what it adds rather than the whole set. A replica lets go of the
//!    memory of what it shipped to every receiver, and reads it back from
//!    its store should it have to ship it again.
//! 7. **Shipments are idempotent and gap-free, and every replica keeps an
//!    update until every receiver has it.** §3.3 says only that two
//!    leaders at once cost bandwidth, and its followers drop what the
//!    leader says it shipped (Alg 4 lines 13–15); but a leader that dies
//!    for good may leave its last shipment undelivered, and then nobody
//!    holds those updates. So a receiver acknowledges to every Eunomia
//!    replica of the origin DC the StableTime through which it has queued
//!    everything (`Shipped`, once journaled, at most once per
//!    `shipped_ack_interval_us`), replicas drop only what every
//!    receiver acknowledged, and a leader ships each receiver the range
//!    (what it last sent that receiver, its own StableTime]: a new leader
//!    starts from each receiver's acknowledgement. The bound is the new
//!    leader's own StableTime, never the old one's, whose reports may not
//!    have reached it yet. The receiver queues updates above what it
//!    already has, and keeps a shipment that starts beyond a gap until the
//!    gap is filled.
//! 8. **Applies are batched per round** (the paper's apply is one
//!    synchronous call per update, Alg 5 lines 14–15): a round takes the
//!    heads Alg 5 would take one by one, as long as none depends on an
//!    update of the round at another partition (u may depend on w when
//!    w's timestamp is at or below u's causal past in w's DC: u.vts\[w's
//!    origin\], or, for the same origin, VClock_c\[origin\] when u was
//!    written, which the metadata carries as `dep_us`); each partition gets its
//!    ops in one message and applies them in order, and the round ends when
//!    all have acknowledged. A round is resent if unacknowledged for
//!    `apply_retry_us` (a restarted partition forgets it was waiting).
//!    A round's critical path holds one log sync, the partition's, before
//!    its acknowledgement (what it made visible must be durable first):
//!    the receiver does not journal a round as it leaves or ends, and
//!    `Apply`/`Applied` are transient messages (sent again by the retry),
//!    so neither costs it a log record. A restarted receiver resumes from
//!    the state journaled with its last shipment, older but consistent,
//!    and applies again what it had applied since (the paper's receiver
//!    never restarts: §1, §3.3). Round ids carry a journaled start count,
//!    so a lost round's late acknowledgement is not taken for a new one's.
//! 9. **SiteTime\[k\] rises to the last StableTime shipped from k once
//!    queue k is empty**: every update of k at or below it is applied.
//!    Alg 5 moves SiteTime only with applied updates; both are sound.
//! 10. **Remote payloads are stored invisible** and made visible by the
//!     apply; an apply whose version already lost last-writer-wins to a
//!     visible one is acknowledged without waiting for its payload (it
//!     would never be read).
//! 11. **A shipment with no update is ephemeral and journals nothing.**
//!     Alg 3 ships every θ; when a DC is idle each shipment only says that
//!     StableTime moved on. Sequenced, each was an outbox record at Eunomia
//!     and a delivery mark and a journal at every receiver: two log syncs
//!     per receiver every θ while nothing happened (an idle 3-DC cluster
//!     synced its logs about 2 400 times a second and kept half a core
//!     busy). Now every shipment to a receiver names as its lower bound the
//!     end of the last shipment that carried updates to it, so losing an
//!     empty one (on a reconnect or a crash) leaves no gap for a later one
//!     to wait behind; a receiver neither journals an empty one nor
//!     acknowledges it (`Shipped` names only what it journaled, where a
//!     new leader may start its range).

pub mod client;
mod config;
pub mod eunomia;
mod msg;
pub mod partition;
pub mod receiver;
mod server;
#[cfg(test)]
mod tests;

pub use client::*;
pub use config::*;
pub use msg::*;
pub use server::*;

use causeway_core::{Faults, LivenessEnv, OpKind, Protocol, Topology};

/// The topology's service name for the Eunomia replicas.
pub const EUNOMIA: &str = "eunomia";
/// The topology's service name for the receiver.
pub const RECEIVER: &str = "receiver";

fn eunomia_service(t: &Topology) -> u16 {
    t.service_index(EUNOMIA).expect("validated: the topology has Eunomia")
}
fn receiver_service(t: &Topology) -> u16 {
    t.service_index(RECEIVER).expect("validated: the topology has a receiver")
}

pub struct EunomiaKv;

impl Protocol for EunomiaKv {
    const NAME: &'static str = "eunomiakv";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put];
    const CAUSAL: bool = true;
    const SERVICES: &'static [(&'static str, u16)] = &[(EUNOMIA, 1), (RECEIVER, 1)];
    const MUTANTS: &'static [&'static str] = &["mutant_async_apply"];
    /// Clocks only affect how fast StableTime moves (§1 of the paper:
    /// "correctness ... does not depend on the clock synchronization
    /// precision"); MaxTs_n never goes back, journaled across restarts
    /// (deviation 6), and every service's state is journaled.
    const TOLERATES: Faults = Faults::ALL;
    /// GETs and PUTs are served by the client's own DC, never waiting.
    const AVAILABLE_UNDER_PARTITIONS: bool = true;
    crate::kit::protocol_parts!(EunomiaKvServer, EunomiaKvClient);

    fn liveness_bound_us(_cfg: &Config, env: &LivenessEnv) -> u64 {
        10_000 + 8 * env.intra_dc_rtt_us
    }

    /// One to three Eunomia replicas (§3.3, the paper's evaluation's r).
    fn torture_services(draw: &mut dyn FnMut(u64, u64) -> u64) -> Vec<(&'static str, u16)> {
        vec![(EUNOMIA, draw(1, 3) as u16), (RECEIVER, 1)]
    }

    /// Per-update reports (0) as well as batches, a range of θ, and
    /// rounds on every arrival (ρ = 0) as well as every ρ.
    fn torture_params(draw: &mut dyn FnMut(u64, u64) -> u64) -> Vec<(&'static str, u64)> {
        let batch = [0, 1_000, 3_000][draw(0, 2) as usize];
        let rho = [0, 1_000, 4_000][draw(0, 2) as usize];
        vec![
            ("batch_interval_us", batch),
            ("process_stable_interval_us", draw(500, 5_000)),
            ("check_pending_interval_us", rho),
        ]
    }

    fn validate(cfg: &Config, topology: &Topology) -> Result<(), String> {
        crate::kit::node::require_full_replication(
            Self::NAME,
            topology,
            "a receiver applies every remote update at its own DC's partition",
        )?;
        for s in [EUNOMIA, RECEIVER] {
            if topology.service_index(s).is_none() {
                return Err(format!("{} needs the service {s:?} in topology.services", Self::NAME));
            }
        }
        if cfg.heartbeat_interval_us == 0 || cfg.process_stable_interval_us == 0 || cfg.fd_interval_us == 0 {
            return Err("heartbeat, process_stable and fd intervals must be positive".into());
        }
        if cfg.apply_retry_us == 0 {
            return Err("apply_retry_us must be positive".into());
        }
        if cfg.straggler_partition.is_some() && cfg.straggler_interval_us == 0 {
            return Err("straggler_interval_us must be positive".into());
        }
        Ok(())
    }
}
