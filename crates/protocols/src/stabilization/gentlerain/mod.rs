//! # GentleRain: causal consistency from physical clocks and one scalar
//!
//! GentleRain (Du, Iorgulescu, Roy, Zwaenepoel, SoCC 2014) as Roohitavaf
//! describes it (thesis §3.2.2, §5.1, §5.5.5, §8.2) and uses
//! it as the baseline CausalSpartanX is measured against (§5.3, §9.2).
//! It tracks dependencies implicitly, with one physical timestamp per version
//! and one scalar per client, and rests on two conditions:
//!
//! - **C1** (PUT): if X depends on Y then `Y.ut < X.ut`. A server accepting a
//!   PUT with the client's dependency time `dt` (DT_c, the largest `ut` the
//!   client has read or written) *waits until its physical clock exceeds dt*,
//!   then stamps the version with the clock: `ut` is physical µs, `sr` the DC.
//! - **C2** (stability): every partition keeps a version vector `VV` (entry k:
//!   the latest timestamp received from its equivalent in DC k; entry m, its
//!   own clock). Every θ the partitions of a DC compute, over a tree
//!   ([`StableTree`](crate::stabilization::stable_tree::StableTree)), the **Global Stable Time** GST = the minimum of all
//!   entries of all their VVs. Replication is FIFO and in `ut` order, so
//!   every version with `ut ≤ GST` has arrived everywhere in the DC.
//!
//! A GET returns the latest version of the key that is local (`sr == m`) or
//! stable (`ut ≤ GST`); by C1 every dependency of a stable version has a
//! smaller `ut`, so by C2 it has arrived too. Heartbeats every Δ keep VV
//! moving when a partition has nothing to replicate. A GET-ROTX waits until
//! the coordinator's GST reaches the client's `dt`, then reads every key at
//! the snapshot `GST`.
//!
//! **The known flaw** (thesis §5.1.1): correctness rests
//! on clocks never going backwards. A server whose clock is stepped back
//! below a GST already computed elsewhere stamps versions that remote DCs
//! consider stable before they arrive (C2 breaks). This module deliberately
//! has *no* guard against it — the test `a_clock_stepped_back_breaks_causality`
//! shows the resulting violation — because demonstrating it is the point of
//! running GentleRain next to CausalSpartanX, whose HLC fixes it.
//!
//! ## Choices and deviations from the paper
//!
//! 1. **A PUT carries the client's GST_c** and the server raises its GST to
//!    it. The paper's PUT carries only `dt`. Without it a local version hides
//!    the remote part of its causal past from readers: writer w reads remote
//!    r (visible at partition P1, whose GST ≥ r.ut) and writes local x at P3;
//!    reader c reads x at P3 (local, so visible) and learns only P3's GST;
//!    then c reads r's dependency q at P2, whose GST may still lag below q.ut
//!    (tree pushes reach partitions at different times), and sees an older
//!    q. Merging GST_w into P3's GST is sound (GST_w is a stable time of this
//!    DC) and makes every reply's GST cover the remote causal past of what it
//!    returns. The test `a_local_write_carries_its_writers_stable_time` is
//!    that run.
//! 2. **Visibility is `ut ≤ GST`** (DKVF's `<=`; the paper says `<`), and a
//!    heartbeat announces the clock itself, not clock − 1. A partition can
//!    still stamp a version with `ut` equal to a value it already announced
//!    (same µs), so a remote GST may admit `ut = t` before that version
//!    arrives. That is safe: anything depending on it has a strictly larger
//!    `ut` (C1, because the PUT waits until clock > dt), so nothing visible
//!    can expose its absence, and every version that arrives later with
//!    `ut ≤ GST` is reported visible on arrival. The same argument covers a
//!    local write in the µs of the stabilization tick that reported `VV[m]`.
//! 3. **One timestamp per key and µs.** The store orders versions by
//!    ⟨ut, sr⟩, so two local writes to one key in the same µs would collide;
//!    the second waits 1 µs like a C1 wait (reported the same way).
//! 4. **GET-ROTX**: the coordinator waits until `GST ≥ dt` and slices return
//!    versions with `ut ≤ snapshot`, matching the GET rule. The paper falls
//!    back to Eiger when `dt − GST` exceeds a threshold; that fallback is not
//!    implemented. With the default `rot_wait_threshold_us = u64::MAX` it is
//!    never triggered (as in the thesis' experiments); a smaller threshold
//!    makes such a ROT fail with [`OpError::Aborted`](causeway_core::OpError::Aborted) instead, so runs can
//!    count how often the fallback would have been needed.
//! 5. **Full replication only** ([`Protocol::validate`] rejects partial
//!    replication and intra-DC replica groups), as in the paper.
//! 6. **Heartbeats** are skipped when a replicate was sent since the previous
//!    heartbeat tick (the paper: "in the past Δ"). Counting ticks rather than
//!    comparing clock readings keeps heartbeats flowing after a clock jump.
//! 7. **Slices raise GST to the snapshot** (as CausalSpartanX's slice does,
//!    Alg 5.4 line 21): the snapshot is a stable time of this DC.
//! 8. **Version GC**, unspecified in the paper: on the stabilization tick a
//!    bounded number of keys that received versions drop versions older than
//!    the newest one with `ut ≤` a GST at least `gc_grace_us` old. A ROT slice
//!    that needed a dropped version fails the ROT ("snapshot pruned") rather
//!    than returning an older state.
//! 9. **Observations.** [`Observation::Visible`](causeway_core::Observation::Visible) is reported once per
//!    version: a local one when it is written, a remote one when it is
//!    present, `ut ≤ GST`, and it is what a GET returns (a last-writer-wins
//!    loser is never read, so never reported — the same rule as every other
//!    protocol). [`Observation::Stable`](causeway_core::Observation::Stable) reports each new GST. `Blocked` is reported
//!    as `put_clock_wait` (C1) and `rot_gst_wait`, only when a request waited.
//! 10. **Crash recovery**, which the paper leaves out (its servers never
//!     fail). Versions are journaled; a restarted server's VV starts at its
//!     clock and zero for other DCs (conservative: GST waits for heartbeats),
//!     but its GST must not fall below what it was when a local version was
//!     written, or deviation 1 breaks (a reader of that version would not
//!     see the remote causal past it learnt nothing about). So GST is
//!     journaled as the store's metadata with each local PUT that raised it,
//!     and recovered in `on_start`. Parked PUTs and ROTs are lost with the
//!     process; their clients time out, as with any crash.

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

crate::stabilization::stabilization_protocol! { GentleRain = "gentlerain", GentleRainServer, GentleRainClient,
    full_replication_because: "GST is a minimum over every DC's entry, and a GET-ROTX reads every key inside \
        the client's DC";
    // A PUT waits out the clock skew (C1); a ROT waits for GST to pass the
    // client's `dt`: one one-way trip plus a heartbeat for VV, then a few
    // tree rounds of θ for the GST to reach the coordinator.

    const MUTANTS: &'static [&'static str] = &["mutant_skip_gst_check"];
    /// Roohitavaf §5.1.1: not safe when a clock steps back (C2 breaks), so
    /// no backward jumps; forward jumps and drift keep clocks monotonic.
    /// Crash-restart is survived (deviation 10: GST is journaled with local
    /// writes and recovered).
    const TOLERATES: causeway_core::Faults = crate::stabilization::FORWARD_CLOCKS;
    // Not AVAILABLE_UNDER_PARTITIONS (the default): a GET-ROTX waits until
    // GST reaches the client's `dt` (deviation 4), and GST stops while any
    // DC is cut off (the paper falls back to Eiger there).
}
