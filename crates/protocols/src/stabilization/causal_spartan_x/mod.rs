//! # CausalSpartanX: causal++ consistency on hybrid logical clocks
//!
//! Roohitavaf Ch. 5 (Roohitavaf; the basic operations are CausalSpartan, SRDS
//! 2017). Like GentleRain, every partition server replicates its writes to its
//! equivalents in the other DCs, and a remote version becomes readable once a
//! DC-wide stable time says everything it depends on has arrived. CausalSpartanX
//! improves on GentleRain in three ways, and this module keeps all three:
//!
//! 1. **Hybrid logical clocks.** A PUT takes `ut = updateHLC(dt)` where `dt` is
//!    the client's dependency time, so it never waits for the physical clock to
//!    pass `dt` (GentleRain does), and causality survives clocks that are skewed
//!    or step backwards.
//! 2. **Data center Stable Vectors.** `DSV[j] = t` at DC i means DC i has received
//!    every write DC j made up to `t`. One entry per DC instead of GentleRain's
//!    scalar GST, so a slow or distant DC only delays versions that depend on it.
//!    Each DC computes it over [`StableTree`](crate::stabilization::stable_tree::StableTree) every θ: entry-wise min of the
//!    partitions' version vectors `VV`, pushed down from the root. A DC of one
//!    partition needs no tree: its own `VV` is that minimum, so it raises `DSV`
//!    whenever `VV` moves (a replicated version or a heartbeat), not θ later,
//!    and a version depending only on its own DC is visible when it arrives.
//! 3. **ROTX.** A read-only transaction takes one client round and never blocks
//!    (here too: see deviation 14 below).
//!    A coordinator fixes a snapshot vector `sv` and sends it to the partitions
//!    of the keys (Alg 5.4). Each partition returns the newest version whose
//!    dependencies, *including its own ⟨sr, ut⟩*, are ≤ `sv`.
//!
//! The code follows Alg 5.1 (client), 5.2 (GET/PUT/replicate), 5.3 (DSV and
//! heartbeats) and 5.4 (ROTX). Line numbers in comments are the thesis's, as
//! used by its proofs (§5.3–5.4). Paper names are
//! kept: `VV`, `DSV`, `DS`, `ut`, `sr`, `ds`, `sv`, `maxDS` ([`DepSet::merge`](causeway_core::DepSet::merge)),
//! `updateHLC` ([`Hlc::update`](causeway_core::Hlc::update), [`Hlc::tick`](causeway_core::Hlc::tick)).
//!
//! ## Deviations from the printed pseudo-code, and why
//!
//! - **§5.5 "inferred concern": the client's DS is not merged into the DSV.**
//!   Line 7 (PUT) and line 10 (ROTX) print `DSV = maxDS(DSV, ds)`. A DS entry for
//!   a remote DC j is the `ut` of some version the client *read*, and that
//!   version can reach its own partition before other partitions of this DC
//!   have received older writes from j. Merging the entry makes `DSV[j]` exceed
//!   what the DC has received (`DSV_real`, Obs 10/11), and a ROTX can then
//!   return `⟨w, old x⟩` with `w` depending on `x` (the §5.5 scenario, and the
//!   test `paper_dsv_merge_returns_a_non_causal_snapshot_and_the_default_does_not`).
//!   Our rule:
//!   1. Remote entries never come from a DS. Only genuine DSVs are merged: the
//!      server's own, its tree's, and the client's `DSVc`, which came from this
//!      DC's servers (clients are sticky).
//!   2. The local entry `m` is merged (`DSV[m] = max(DSV[m], DS[m])`, `sv[m]`
//!      likewise). Local versions exist at their partition from the moment they
//!      are written, and line 21 plus line 8 give any later local PUT at a sliced
//!      partition `ut > sv[m]`, so this cannot admit a missing version. It is what
//!      lets a ROTX see the client's own writes.
//!   3. Dropping the DS from `sv` costs monotonic reads and read-your-writes in
//!      ROTX whenever the client has seen a version whose dependencies are not
//!      yet covered by its `DSVc`. The client keeps a **cache** of such versions
//!      instead, and merges it into ROTX results: remote versions read by GET
//!      whose own ⟨sr, ut⟩ is uncovered, local versions (own writes, or
//!      other clients' writes read by GET) whose remote dependencies are
//!      uncovered, and the uncovered causal past of the latter (rule 6). The
//!      local entry of rule 2 alone does not give read-your-writes when the
//!      write depends on such a read. The argument that cache ∪ slices is a
//!      causal snapshot is at [`CsxClient`].
//!   4. `paper_dsv_merge = true` restores the printed lines 7 and 10 for every
//!      entry and disables the cache, so tests can show the anomaly.
//!   5. **A PUT carries the client's `DSVc`**, and the server merges it (what
//!      the printed line 7 achieved through the DS, done with a genuine
//!      vector; "deviation 12" in the code). Found by `causeway torture`: a
//!      client read x through a ROTX slice admitted by the coordinator's
//!      higher DSV, then wrote y at a partition whose DSV lagged; a second
//!      client read y (local, so visible at once) and then x's key at a
//!      lagging partition, and got a version older than x. With the writer's
//!      DSVc merged where y is written, the reader of y inherits it.
//!   6. **A write carries its writer's cache; a GET of it hands that to the
//!      reader** (deviation 14; it replaces deviation 13, a wait). Roohitavaf
//!      (Roohitavaf, "Consistency for Distributed Data Stores", PhD thesis,
//!      2019, §5.4) promises that ROTX never blocks, and §5.2 that local
//!      writes are visible to local GETs at once. With the cache of rule 3
//!      the two collide on one case: a GET of *another* client's local write
//!      `w` that depends on a remote version `x` not yet covered by the DSV.
//!      The reader cannot cache `w` alone (a ROTX would return `w` with an
//!      older `x`), and does not know `x`. Deviation 13 (found by
//!      `causeway torture`) "tainted" the reader and parked its next ROTX
//!      until the DSV covered `x` — for as long as a DC partition lasts,
//!      although `x` itself is already in this DC, breaking the promise. Now
//!      every PUT carries the client's cache (`PutReq::past`); the server
//!      stores the entries its DSV does not cover with the version, local
//!      copy only (`Version::past`, not replicated: a remote DC admits the
//!      version only once its `ds`, which covers them all, is stable); and a
//!      GET of the version returns the entries the server's DSV still does
//!      not cover (`GetOk::past`). The reader caches them with the version,
//!      so its causal past is again "covered, or cached, or superseded in
//!      the cache", and no ROTX waits. Cost: while a DSV entry is stuck (a
//!      partition), PUTs and GETs of local versions carry up to one cache
//!      entry per key whose version depends on the stuck DC; it drains as
//!      soon as the DSV covers them. `paper_dsv_merge` sends no past.
//! - **Replies carry ⟨ut, sr⟩ per value.** The GET reply, the slice reply and the
//!   ROTX reply carry each value's ⟨ut, sr⟩ so the client can compare them with
//!   its cache. The printed replies carry only values.
//! - **The ROTX reply carries `sv`**, not the coordinator's DSV at reply time.
//!   Both are genuine; `sv` is the vector the snapshot was read at. The
//!   coordinator starts `ds` empty instead of from the client's DS, because the
//!   client merges the reply into its DS anyway.
//! - **The coordinator reads its own slice in place** instead of messaging
//!   itself.
//! - **`VV[k] = max(VV[k], ut)`** on Replicate and Heartbeat, not plain
//!   assignment. Under FIFO channels and strictly increasing `ut` per server the
//!   two are equal. `max` also stays sound if a message is replayed.
//! - **Heartbeats.** The thesis sends a heartbeat if no Replicate went out "in
//!   the past Δ". We send one on each Δ tick that had no Replicate since the
//!   previous tick. Peers' `VV[m]` may then lag up to 2Δ instead of Δ, but a
//!   clock that steps back cannot silence heartbeats.
//! - **DSV tree.** The root pushes the aggregate of the VVs, not its own DSV
//!   (which client vectors may have raised). Nodes forward a push as soon as it
//!   arrives rather than at their next tick.
//! - **Garbage collection** is not in the thesis. On each write to a key,
//!   and every θ on keys that went quiet (no write for `gc_quiet_us`) with
//!   several versions (the dirty list; at most [`GC_KEYS_PER_TICK`] keys a
//!   tick), drop every version
//!   older than the newest one whose `maxDS(ds, {⟨sr, ut⟩})` is covered by a
//!   DSV this server held at least `gc_grace_us` ago. That version is
//!   GET-visible, and slice-visible for any `sv` ≥ that DSV, so GETs never
//!   change and current snapshots never lose a version. A slice that finds
//!   no eligible version of a key that GC has pruned fails the ROTX with
//!   `Aborted("snapshot pruned")`. It never returns data older than the
//!   snapshot. The horizon is journaled as the store's metadata whenever it
//!   moves, and a restart resumes the DSV there: a restarted store's chains
//!   may start at the horizon and no longer know they were pruned, so a
//!   GET below it read a collected remote key as absent (as in Contrarian's
//!   deviation 10).
//! - **Observations.** A remote version is reported [`Observation::Visible`](causeway_core::Observation::Visible)
//!   once, when the GET rule (line 3) first admits it *and* it is the version a
//!   GET would return. Last-writer-wins losers are never reported, as in
//!   [`crate::eventual`]. Nothing is ever reported `Blocked`: no handler
//!   waits (since deviation 14 removed deviation 13's ROTX wait; the test
//!   `a_tainted_readers_rotx_completes_during_a_partition_and_misses_nothing`
//!   holds it to that while a DC is cut off).
//! - **Topology.** The thesis assumes full replication and one server per
//!   partition per DC. [`Protocol::validate`] rejects anything else, because a
//!   DSV entry for a DC that does not store a partition would never advance.
//!   Service nodes are allowed and stay inert.
//! - **Bad input.** A request with a vector of the wrong length, a malformed
//!   dependency set, a `past` entry its write's dependency set does not
//!   cover, an HLC counter beyond [`HLC_COUNTER_LIMIT`] (which could
//!   overflow `updateHLC`), or a key of another partition is refused with
//!   `BadRequest`. Malformed peer messages are dropped.

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

crate::stabilization::stabilization_protocol! { CausalSpartanX = "causalspartanx", CsxServer, CsxClient, stable_vector: "DSV";
    // Nothing should wait for remote DCs; the family's bound allows a few
    // DSV rounds anyway (a heartbeat and tree rounds) plus the skew an HLC
    // may absorb.

    const MUTANTS: &'static [&'static str] = &["mutant_skip_visibility_check"];
    /// HLCs: skew, drift and jumps either way are harmless to safety.
    const TOLERATES: causeway_core::Faults = causeway_core::Faults::ALL;
    /// The thesis: a ROTX never blocks and local writes are visible to local
    /// reads at once, so local operations complete during partitions.
    const AVAILABLE_UNDER_PARTITIONS: bool = true;
}
