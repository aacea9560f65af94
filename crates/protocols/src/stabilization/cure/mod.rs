//! # Cure, as Didona et al. compare it: physical clocks, vector GST, blocking ROTs
//!
//! Akkoorath et al., *Cure: Strong Semantics Meets High Availability and
//! Low Latency* (ICDCS 2016), in the form Didona, Guerraoui, Wang and
//! Zwaenepoel (*Causal Consistency and Latency Optimality: Friend or Foe?*,
//! §3, §5) run it against Contrarian: the same code base and GET/PUT/ROT
//! API, so that the two differ only where the designs do. Cure is what
//! Contrarian improves on:
//!
//! - **Physical clocks.** A version's timestamp is the partition's physical
//!   clock. It cannot be pushed forward like an HLC, so wherever Contrarian
//!   pushes, Cure *waits*: a PUT until the clock passes the client's
//!   dependencies; a ROT's read until the partition's clock passes the
//!   snapshot's local entry ("with physical clocks it is blocking: p must
//!   wait until its physical clock reaches the snapshot ts", §3). The waits
//!   last as long as the clock skew between partitions, and are reported
//!   as [`Blocked`](causeway_core::Observation::Blocked) observations
//!   (`put_clock_wait`, `rot_clock_wait`, `rot_gst_wait`).
//! - **Per-partition version vectors** and a **vector GST** per DC (the
//!   entry-wise minimum of the DC's VVs over the family's stable tree),
//!   exactly Contrarian's GSS; a remote version is readable once its
//!   dependency vector is covered. A DC of one partition raises its remote
//!   entries whenever its VV moves, not θ later (its VV is the minimum).
//! - **ROTs in two rounds** (Table 2): the coordinator fixes a snapshot
//!   vector TV — local entry its clock, remote entries its GST, each raised
//!   to the client's last snapshot — and returns it; the client then reads
//!   every partition at TV, and each returns the freshest version with
//!   DV ≤ TV once its clock is past TV[m] and its VV covers TV.
//!
//! ## Deviations, and why
//!
//! 1. **A ROT or GET of one partition takes one round** (`ReadOne`), as in
//!    Contrarian: the coordinator is the only reader.
//! 2. **The coordinator's local entry is its clock − 1**, so a read at the
//!    coordinator itself may proceed at once; any partition reads only when
//!    its clock is strictly past TV[m], and every later local version is
//!    stamped above everything the partition announced (`announced_us`:
//!    timestamps, heartbeats, VV[m] reports, snapshots read), so no version
//!    stamped in the same µs can slip under a snapshot.
//! 3. **Bounded waits.** A request that would wait more than
//!    `max_clock_wait_us` for the clock is refused with `Aborted`; a
//!    restarted partition whose VV lags a snapshot (only one from a log
//!    written before VV was journaled, deviation 5) waits for heartbeats,
//!    re-checking every θ.
//! 4. **Clocks must not step back** (Cure's assumption): a backward jump can
//!    stamp a version under a GST or snapshot already handed out, as in
//!    GentleRain (Roohitavaf §5.1.1), so `TOLERATES` leaves backward jumps
//!    out. Drift and forward jumps are harmless.
//! 5. **Crash recovery**: `announced_us` resumes from the stored versions,
//!    and the VV's remote entries from those and from the VV journaled in
//!    every stabilization turn that reports it (`journal_vv`): no GST a
//!    client holds is above a restarted partition's VV, so its reads do not
//!    wait for a DC that may be cut off (found by a test that restarts a
//!    partition while DC 1 is away; before, the read waited for DC 1's next
//!    heartbeat). The record is in the log file before the report leaves
//!    but is not synced for itself (it changes every θ), so an
//!    operating-system crash can lose the last ones; reads then wait for
//!    heartbeats as before, which costs liveness, not safety. The GST
//!    resumes at the local versions' DVs (each entry a GST of this DC the
//!    writer had seen) and at the journaled GC horizon, as Contrarian's
//!    does (its deviations 9 and 10): a fresh session's first read then
//!    holds the newest writes stored here and every version GC kept.
//!    Parked requests are lost with the process and their
//!    clients time out. A clock that never runs backwards keeps every later
//!    timestamp above what was announced before the crash.
//! 6. **GC, bad input, observations** as in Contrarian (its deviations 8,
//!    10, 11).
//! 7. **A PUT is stamped one above what the partition announced** when the
//!    clock has not passed that yet but the stamp passes the client's
//!    dependencies, rather than wait for the clock. The runtime reads the
//!    clock once per turn, so every PUT after the first in a turn found the
//!    clock at its predecessor's stamp and waited a µs with a timer (68 % of
//!    the PUTs under `causeway bench`); the clock read a µs later would have
//!    given the same stamp. The stamp may lead the turn's clock by up to
//!    [`STAMP_LEAD_US`]; it still exceeds everything announced and every
//!    dependency, which is all deviation 2's argument needs, and heartbeats
//!    announce it. A dependency beyond everything this partition announced
//!    (another partition's clock runs ahead) is still waited for: that is
//!    Cure's blocking. So that a fresh session still reads every write
//!    acknowledged here, a coordinator's snapshot takes its local entry at
//!    least at the partition's announced time, and a partition reads at
//!    once at a snapshot whose local entry it has already announced (every
//!    later version is stamped above it, so the local versions inside it are
//!    final); it waits for the clock only for one beyond that. Without this
//!    a restarted node, whose clock resumes at a persisted floor up to a
//!    second ahead of the system clock and stands there, stamped its PUTs
//!    above a clock that did not move while fresh sessions' snapshots stayed
//!    below them (the kill -9 test lost sight of an acknowledged write).

mod client;
mod config;
mod msg;
mod server;
#[cfg(test)]
mod tests;

pub use client::*;
pub use config::*;
pub use msg::*;
pub use server::*;

crate::stabilization::stabilization_protocol! { Cure = "cure", CureServer, CureClient, stable_vector: "GST";
    // A request waits at most about the clock skew (the family's bound
    // counts it twice), plus the family's stabilization rounds.

    /// `mutant_skip_clock_wait` breaks only races inside one DC (the Fig. 1
    /// test catches it); the conformance suite's scenarios are cross-DC.
    const MUTANTS: &'static [&'static str] = &["mutant_skip_visibility_check"];
    /// Physical clocks: no backward jumps (deviation 4).
    const TOLERATES: causeway_core::Faults = crate::stabilization::FORWARD_CLOCKS;
    /// Waits are for the local clock, never for a remote DC (a restarted
    /// node's VV resumes from its journal, deviation 5): local operations
    /// complete while a DC is cut off.
    const AVAILABLE_UNDER_PARTITIONS: bool = true;
}
