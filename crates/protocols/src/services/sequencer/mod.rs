//! # S-Seq: a synchronous per-DC sequencer, optionally chain-replicated
//!
//! The sequencer baseline of Gunawardhana, Bravo, Rodrigues, "Unobtrusive
//! Deferred Update Stabilization for Efficient Geo-Replication", USENIX
//! ATC 2017: "S-Seq is a system that relies on a sequencer per datacenter
//! to compress metadata; it uses a vector with an entry per datacenter to
//! track causality, as in" SwiftCloud and ChainReaction (§2, Fig. 1). It
//! is what EunomiaKV ([`super::eunomia_kv`]) replaces: the same single
//! ordered stream per DC, built *on* each update's path rather than after
//! it.
//!
//! - A **partition** ([`partition`]), on a client's PUT, "synchronously
//!   request[s] a monotonically increasing number to the sequencer before
//!   returning to the client" (§7.1). The update's vector takes the number
//!   as its own DC's entry and the client's causal past as the others';
//!   the partition applies it, ships the payload to its sibling partitions
//!   and the metadata to the other DCs' receivers, and acknowledges. This
//!   round trip is the cost Fig. 1 measures (14.8 % of throughput, "caused
//!   exclusively by the synchronous communication with the sequencer").
//! - The **sequencer** ([`chain`]) numbers the DC's updates 1, 2, 3, …
//!   With r replicas (the topology's `sequencer` service, `per_dc = r`)
//!   it is chain-replicated as §7.1's fault-tolerant sequencer (Fig. 3):
//!   the head assigns, each replica journals the number and passes it on,
//!   the tail answers the partition.
//! - The **receiver** ([`receiver`]) applies each other DC's updates in
//!   sequence order, each once every update its vector names from a third
//!   DC is applied here: EunomiaKV's Alg 5 over sequence numbers.
//! - The **client** ([`client`]) keeps VClock_c, one entry per DC.
//! - **A-Seq**, "an asynchronous (bogus) variant of S-Seq, that contacts
//!   the sequencer in parallel with applying the update" and "fails to
//!   capture causality" (§2), is the config flag
//!   [`Config::mutant_async_sequencer`]: a [`Protocol::MUTANTS`] entry
//!   that the conformance suite and torture must catch, and a series for
//!   the throughput experiments.
//!
//! Deploy with `services = [{name = "sequencer", per_dc = r}, {name =
//! "receiver"}]` in `[topology]`; runtimes add both, one instance each,
//! when the topology leaves them out ([`Protocol::SERVICES`]).
//!
//! ## Why this is causal
//!
//! Every number a client can have seen was handed out before it sent its
//! update, and the sequencer's numbers only grow, so an update's own entry
//! exceeds its causal past's entry for its DC (asserted in
//! [`partition`]): the DC's order of numbers extends causality, and the
//! vector names the causal past in the other DCs. A receiver applying k's
//! numbers in order, each after its vector's other entries, therefore
//! applies everything an update depends on before it.
//!
//! ## Deviations from the paper, and what it leaves open
//!
//! 1. **Full replication, one server per partition per DC**, as the paper.
//! 2. **Last-writer-wins on ⟨Σ vts, origin, seq⟩.** The paper leaves
//!    conflicts to Riak. Numbers of different DCs are not comparable, but
//!    a causal successor's vector dominates its cause's, strictly in its
//!    own DC's entry (above), so the sum of the entries extends causality
//!    and the ⟨origin, seq⟩ tail makes the order total.
//! 3. **How the stream reaches the other DCs** is not described for S-Seq
//!    (§2 names only the sequencer and the vector). Here the partition,
//!    once it has the number, sends the payload to its siblings and the
//!    metadata (key, vector) to every other DC's receiver, as EunomiaKV
//!    separates them (§5), so the two systems differ only in where the
//!    order is made. The sequencer handles numbers only.
//! 4. **Payload and metadata arrive in either order**; the partition makes
//!    a remote update visible once it has both (EunomiaKV's §5 rule).
//! 5. **Numbers are dense, so the receiver needs no stable time**: a number
//!    that arrives ahead of a gap (the metadata of one DC comes from many
//!    partitions) waits for the gap to fill. SiteTime\[k\] is the last
//!    number of k applied.
//! 6. **Applies are batched per round** (EunomiaKV's deviation 8): every ρ,
//!    and as soon as the previous round ends, a round takes the heads
//!    Alg 5 would take one by one, as long as none depends on an
//!    update of the round at another partition (`dep` carries the writer's
//!    causal past in its own DC for that test). Rounds are resent after
//!    `apply_retry_us` until acknowledged. Alg 5's ρ is kept (EunomiaKV
//!    starts rounds on arrival): metadata comes one update at a time from
//!    many partitions, and a round started at each arrival would hold one.
//! 7. **Crash recovery**, absent from the paper. A sequencer replica
//!    journals its last number in the turn that passes it on (persist,
//!    then send), so a restart neither reuses nor skips one; its reliable
//!    FIFO links (the node core's durable outbox) redeliver what it had
//!    not handled. A partition does not journal a PUT waiting for its
//!    number (its client was not acknowledged, and its request is lost
//!    with the crash); the number, still answered after the restart, is
//!    shipped as a **skip** so the other DCs see no gap. Request ids carry
//!    a journaled incarnation, so an old answer never matches a new
//!    request. The receiver journals SiteTime and the round in flight; its
//!    queued numbers are versions of its store.
//! 8. **A-Seq acknowledges at once and applies when the number comes.**
//!    The paper's A-Seq applies in parallel with the sequencer call; here
//!    the local version waits for the number, since its order needs it, so
//!    the mutant also breaks read-your-writes. Its PUT latency has no
//!    sequencer round trip, which is what the paper uses it for.
//! 9. **Not done: chain reconfiguration on permanent failure.** A replica
//!    that crashes and restarts resumes its place; one that never returns
//!    stops its DC's PUTs (van Renesse and Schneider's master, which
//!    removes a failed replica and makes its successor head or its
//!    predecessor tail, is not implemented). The receiver, as in
//!    EunomiaKV, is a single node that recovers by restarting.
//! 10. **No stable-time observations**: SiteTime counts numbers, not
//!     clock time.

pub mod chain;
pub mod client;
mod config;
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

use causeway_core::{DcId, Faults, LivenessEnv, NodeId, OpKind, Protocol, Topology};

/// The topology's service name for the sequencer replicas.
pub const SEQUENCER: &str = "sequencer";
/// The topology's service name for the receiver.
pub const RECEIVER: &str = "receiver";

fn sequencer_service(t: &Topology) -> u16 {
    t.service_index(SEQUENCER).expect("validated: the topology has a sequencer")
}

/// The receivers of the DCs other than `dc`.
fn remote_receivers(t: &Topology, dc: DcId) -> Vec<NodeId> {
    let r = t.service_index(RECEIVER).expect("validated: the topology has a receiver");
    t.dc_ids().filter(|&d| d != dc).map(|d| t.service_nodes(d, r)[0]).collect()
}

pub struct SSeq;

impl Protocol for SSeq {
    const NAME: &'static str = "sseq";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put];
    const CAUSAL: bool = true;
    const SERVICES: &'static [(&'static str, u16)] = &[(SEQUENCER, 1), (RECEIVER, 1)];
    const MUTANTS: &'static [&'static str] = &["mutant_async_sequencer"];
    /// No clock is read for ordering (numbers and vectors only), and every
    /// role recovers from its journal (deviation 7).
    const TOLERATES: Faults = Faults::ALL;
    /// The sequencer is in the client's own DC: GETs and PUTs never wait
    /// for another DC.
    const AVAILABLE_UNDER_PARTITIONS: bool = true;
    crate::kit::protocol_parts!(SSeqServer, SSeqClient);

    /// A PUT is client → partition → r replicas → partition → client: up
    /// to five intra-DC hops with three replicas.
    fn liveness_bound_us(_cfg: &Config, env: &LivenessEnv) -> u64 {
        20_000 + 12 * env.intra_dc_rtt_us
    }

    /// One to three sequencer replicas (§7.1, Fig. 3's chain of three).
    fn torture_services(draw: &mut dyn FnMut(u64, u64) -> u64) -> Vec<(&'static str, u16)> {
        vec![(SEQUENCER, draw(1, 3) as u16), (RECEIVER, 1)]
    }

    /// A range of ρ, and short apply retries too, so resent rounds happen
    /// in short runs.
    fn torture_params(draw: &mut dyn FnMut(u64, u64) -> u64) -> Vec<(&'static str, u64)> {
        vec![("check_pending_interval_us", draw(200, 5_000)), ("apply_retry_us", draw(10_000, 100_000))]
    }

    fn validate(cfg: &Config, topology: &Topology) -> Result<(), String> {
        crate::kit::node::require_full_replication(
            Self::NAME,
            topology,
            "a receiver applies every remote update at its own DC's partition",
        )?;
        for s in [SEQUENCER, RECEIVER] {
            if topology.service_index(s).is_none() {
                return Err(format!("{} needs the service {s:?} in topology.services", Self::NAME));
            }
        }
        if cfg.apply_retry_us == 0 || cfg.check_pending_interval_us == 0 {
            return Err("apply_retry_us and check_pending_interval_us must be positive".into());
        }
        if cfg.straggler_partition.is_some() && cfg.straggler_interval_us == 0 {
            return Err("straggler_interval_us must be positive".into());
        }
        Ok(())
    }
}
