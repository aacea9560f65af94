//! # Contrarian: nonblocking, one-version ROTs in 1½ or 2 rounds
//!
//! Didona, Guerraoui, Wang, Zwaenepoel, *Causal Consistency and Latency
//! Optimality: Friend or Foe?* (arXiv:1803.04237 v1, PVLDB 11(11), 2018;
//! "the paper"), §4. The paper proves (§6) that latency-optimal read-only
//! transactions (one round, one version, nonblocking) cost every dangerous
//! PUT communication that grows with the number of clients, and proposes
//! Contrarian as the "almost latency-optimal" alternative: ROTs that never
//! block and return one version per key, paid for with half a round more
//! instead of a readers check on every PUT.
//!
//! It is a stabilization protocol, in the line of GentleRain and Cure:
//!
//! - **Clock.** A hybrid logical clock (Kulkarni et al.) per partition: it
//!   follows physical time (so the GSS stays fresh) but can be *pushed*
//!   like a logical clock, which is what makes every handler nonblocking.
//!   `logical_clocks` switches to plain Lamport clocks (§4: correctness
//!   "does not depend on the synchronization of the clocks").
//! - **Version vector VV** per partition, one entry per DC: entry m its own
//!   clock, entry i the latest timestamp received from its replica in DC i
//!   (versions, or heartbeats when the replica is idle).
//! - **GSS** (Global Stable Snapshot): every θ the partitions of a DC
//!   compute the entry-wise minimum of their VVs over the family's
//!   [`StableTree`](crate::stabilization::stable_tree::StableTree). Entry i:
//!   every version DC i wrote up to it has reached every partition here. A
//!   DC of one partition needs no tree for its remote entries: its own VV is
//!   that minimum, so it raises them whenever VV moves, not θ later.
//! - **Dependency vector DV** per version X: `X.DV[i] = t` means X may
//!   depend on everything DC i wrote up to t. The origin entry is X's
//!   timestamp, above every other entry; the remote entries are the
//!   writer's GSS. A replicated X is visible in DC k once `X.DV ≤ GSS_k`.
//! - **ROT.** A coordinator (the partition of the first key) fixes a
//!   snapshot vector TV: local entry max(its clock, the client's highest
//!   local timestamp), remote entries max(its GSS, the client's GSS). Each
//!   partition pushes its clock to TV[m] — every later local write then
//!   gets a higher timestamp — and returns, per key, the freshest version
//!   with DV ≤ TV. 1½ rounds (3 communication steps): the client sends its
//!   keys to every partition, the coordinator sends TV to the others, each
//!   partition answers the client. 2 rounds (4 steps): the coordinator
//!   returns TV to the client, which then reads at TV. `rot_steps` picks.
//! - **Piggybacking.** "The client always piggybacks on its requests the
//!   last snapshot it has seen", so its snapshots never go backwards.
//!
//! Why a snapshot is causal: a version in TV has DV ≤ TV, and so has
//! everything it depends on (dependencies have smaller entries). Each of
//! those is present at its partition when that partition reads: a remote
//! one because TV's remote entries are GSS values of this DC; a local one
//! because it was written before any partition saw TV (after that, its
//! timestamp would exceed TV[m]). The paper's Fig. 1 race is the test
//! `figure_1_race_never_returns_x0_with_y1`.
//!
//! ## Deviations from the paper, and why
//!
//! The paper describes the protocol in prose (§4) without pseudo-code; the
//! points it leaves open are decided here.
//!
//! 1. **1½-round message pattern.** The paper gives the hops ("one round
//!    trip between the client and the partitions ... with an extra hop from
//!    the coordinator to the partitions") and says 1½ rounds exchange more
//!    messages than 2. So the client sends its keys to every partition and
//!    the coordinator sends only TV to the others (3p−1 messages against
//!    2p+2); a partition reads once it has both halves, whichever comes
//!    first. That is a join of two messages of the same request, not a wait
//!    on clocks or replication. A half whose partner never comes (a crashed
//!    coordinator, a refused request) expires after `orphan_read_timeout_us`.
//!    Because of that expiry the coordinator's TV is a *transient* message
//!    (`Message::transient`): the network runtime sends it once, without
//!    journaling, sequencing or acknowledging it, and a cut or a crash may
//!    lose it (the client's deadline covers the ROT). The paper's channels
//!    are reliable; a read forward needs no durability, and journaling it
//!    cost every 1½-round ROT a log write and an acknowledgement per hop.
//! 2. **The coordinator ticks its clock** before fixing TV[m] (the paper
//!    takes the clock as it is): the snapshot is then as fresh as the
//!    physical clock allows.
//! 3. **A ROT or GET that touches one partition** takes one round in either
//!    mode: that partition coordinates and is the only reader, so there is
//!    nothing for a second round to do. A GET is such a ROT.
//! 4. **Which GSS builds a new version's DV.** The paper says "the remote
//!    entries of the GSS"; we take the client's (`last`), which covers
//!    everything the client has read and is merged into the partition's
//!    GSS first. The partition's own GSS would only make DV larger.
//! 5. **The DC's largest clock travels on the tree** (`clock_max`) and each
//!    partition pushes its clock to it. A partition whose clock lags (skew,
//!    or an idle Lamport clock) would otherwise hold back the DC's GSS entry
//!    at every remote DC — with `logical_clocks` for ever, since an idle
//!    Lamport clock moves by one per heartbeat while busy ones run ahead.
//! 6. **VV[i] = max(VV[i], t)** on Replicate and Heartbeat rather than plain
//!    assignment (equal under FIFO channels, and safe if one is replayed).
//!    Heartbeats go out on each Δ tick that had no Replicate since the
//!    previous one, so a clock stepped back cannot silence them.
//! 7. **The root pushes the aggregate**, not its own GSS (which clients'
//!    vectors may have raised), and partitions forward a push on arrival.
//! 8. **Bad input.** A request with a vector of the wrong length, an HLC
//!    counter beyond [`HLC_COUNTER_LIMIT`], a snapshot whose remote entries
//!    exceed what this partition has received (no genuine GSS does), a key
//!    of another partition, or "other partitions" that are not distinct
//!    servers of this DC is refused with `BadRequest`. Malformed peer
//!    messages are dropped.
//! 9. **Crash recovery**, which the paper leaves out. The clock must never
//!    come back below a timestamp or a TV[m] handed out before the crash,
//!    or a later local write could slip into an old snapshot (the Fig. 1
//!    anomaly again). The clock is pushed by reads, so stored versions do
//!    not bound it: a *floor* `clock_lease_us` ahead of the clock is
//!    journaled as the store's metadata whenever the clock reaches the
//!    previous floor (about once a lease), and a restart resumes above it.
//!    VV's remote entries resume from the stored versions: the timestamps
//!    of remote ones, and the DVs of local ones (each DV entry was a GSS
//!    this partition had reached, and what it covers was journaled first),
//!    so a fresh session sees this partition's own writes without waiting
//!    for a heartbeat. The GSS resumes from those local DVs too (each was
//!    a GSS of this DC, true of all its partitions), so the first snapshot
//!    after a restart, before any GSS step, already holds every write
//!    stored here. Half-read 1½ ROTs are lost with the process and their
//!    clients time out.
//! 10. **Version GC**, not in the paper: as in CausalSpartanX, each θ on
//!     recently written keys, drop versions older than the newest one in
//!     the snapshot made of a GSS at least `gc_grace_us` old. A read that
//!     finds nothing left of a pruned key fails with "snapshot pruned".
//!     That horizon is journaled with the clock floor whenever it moves,
//!     and a restart resumes the GSS there: the restarted store's chains
//!     may start at the horizon (collected, or checkpointed without what
//!     collection would drop) and no longer know they were pruned, so a
//!     snapshot below it would read such a key as absent. Found by the
//!     `kill -9` test of checkpoint cuts, which read `None` for a key with
//!     acknowledged writes when its read came before the first GSS step
//!     after the restart.
//! 11. **Observations.** A remote version is reported
//!     [`Visible`](causeway_core::Observation::Visible) once, when the GSS
//!     covers its DV and it is what a local read returns; `Stable` reports
//!     the least GSS entry; nothing is ever `Blocked`. With
//!     `logical_clocks` timestamps are not µs, so `written_us` and
//!     `stable_us` are not times.

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

crate::stabilization::stabilization_protocol! { Contrarian = "contrarian", ContrarianServer, ContrarianClient, stable_vector: "GSS";
    // Nothing waits; the family's bound allows its few stabilization rounds
    // anyway (a cluster waking from idle pacing) plus the skew an HLC absorbs.

    /// Caught by the conformance suite. `mutant_no_piggyback` breaks only a
    /// single client's view (its snapshots go backwards), which the suite's
    /// cross-DC scenarios cannot see; torture and `tests.rs` catch it.
    const MUTANTS: &'static [&'static str] = &["mutant_skip_visibility_check"];
    /// HLCs (or Lamport clocks) make skew, drift and jumps either way
    /// harmless to safety; crash-restart is survived by the journaled clock
    /// floor (deviation 9).
    const TOLERATES: causeway_core::Faults = causeway_core::Faults::ALL;
    /// No handler waits for anything remote: PUTs and ROTs of a DC's keys
    /// complete while it is cut off.
    const AVAILABLE_UNDER_PARTITIONS: bool = true;

    /// Both ROT modes get tortured: half the runs take 2 rounds.
    fn torture_params(draw: &mut dyn FnMut(u64, u64) -> u64) -> Vec<(&'static str, u64)> {
        vec![("rot_steps", draw(3, 4))]
    }
}
