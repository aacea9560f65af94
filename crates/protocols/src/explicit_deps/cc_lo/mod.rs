//! # CC-LO: latency-optimal read-only transactions (the COPS-SNOW design)
//!
//! Didona, Guerraoui, Wang, Zwaenepoel, *Causal Consistency and Latency
//! Optimality: Friend or Foe?* (arXiv:1803.04237 v1, PVLDB 11(11), 2018;
//! "the paper"), §3 and Fig. 2, §5 ("We call CC-LO the system that
//! implements the design of COPS-SNOW"), §6; the design is COPS-SNOW's (Lu,
//! Hodsdon, Ngo, Mu, Lloyd, *The SNOW Theorem and Latency-Optimal
//! Read-Only Transactions*, OSDI 2016, §5), on COPS's explicit
//! dependencies (Lloyd, dissertation §2.3–§2.7).
//!
//! A ROT is **latency-optimal**: one round (one message to and one from
//! each partition it reads), one version per key, and no partition ever
//! waits to answer it. The price is paid by PUTs, the **readers check**:
//!
//! - **ROT ids and readers.** Every ROT has an id (the session's
//!   cluster-wide nonce and a sequence number). A partition records, per
//!   key, the ROTs that read it and the version each got.
//! - **Explicit one-hop dependencies** (as COPS): a session's context is
//!   what it read since its last write, plus that write; a PUT carries it
//!   and the context collapses to the PUT. Versions are stamped by a
//!   Lamport clock above their dependencies, last-writer-wins on the stamp.
//! - **The readers check.** Before PUT(y, Y1) becomes visible, y's
//!   partition asks the partition of each dependency X1 for X1's **old
//!   readers**: the ROTs recorded reading an older version of x than X1,
//!   and X1's own old readers (propagation along the dependency chain).
//!   Y1 is stored with their union; then it is visible, acknowledged and
//!   replicated.
//! - **Reads.** A ROT reading y gets the newest visible version it is not
//!   an old reader of. In the paper's Fig. 1 race — ROT(x, y) reads X0
//!   before PUT(x, X1), and y after PUT(y, Y1) — the ROT is an old reader
//!   of Y1 and gets Y0 (`tests.rs`: `figure_1_race_*`).
//! - **Geo-replication.** A replicated version carries its dependencies;
//!   the receiving partition runs the combined dependency and readers check
//!   with its own DC's partitions (an answer waits until the dependency is
//!   visible there, then names that DC's old readers), then makes it
//!   visible — the paper's "the readers check for the new key version
//!   proceeds in a remote data center as it does in the data center where
//!   the PUT originated".
//!
//! Why a ROT's answer is causal: if it returns V for one key and U for
//! another while U < U′ ⇝ V for a newer U′ of U's key, then either it read
//! U before U′ was visible — recorded, so the check of the version after
//! U′ on the way to V named it, and propagation carried it into V's old
//! readers — or after, as an old reader of U′, carried the same way. Either
//! way it is an old reader of V and could not have got V.
//!
//! ## Deviations from the paper, and why
//!
//! 1. **Old readers per version, not per key with logical times.** The
//!    paper stores ⟨ROT id, logical time⟩ in a key's old-reader record and
//!    returns "the most recent version before that time"; here each version
//!    stores the ROTs that must not see it, and a read skips those versions.
//!    One id per session, the newest (the paper's §5 optimisation: "at most
//!    one ROT id per client"), since a session runs one operation at a time.
//! 2. **A write follows the previous write of its key accepted in the same
//!    DC** (an extra dependency, checked locally for free), and a session's
//!    context keeps one stamp per key *and accepting DC* (as COPS, deviation
//!    2 there). So a dependency on X7 implies X5 accepted before it in the
//!    same DC — its visibility and its old readers — and a session that read
//!    both may keep only X7. Without it a session reading X5 and X7 and
//!    then writing W would lose X5's old readers (W's check asks only about
//!    X7). It also orders one DC's versions of a key in every DC. A
//!    settled previous write (deviation 10) is left out, as any settled
//!    dependency: it is visible in every DC and its old readers are over.
//! 3. **Bounded ROT lifetime; reader-record GC.** A session abandons a ROT
//!    attempt after `rot_timeout_us` and retries under a new id (at most
//!    `rot_attempts` times, then `Aborted`). Reader records and version
//!    old-reader sets expire `reader_ttl_us` ≥ `rot_timeout_us` +
//!    `tick_us` after they were made, counted in timer ticks (never the
//!    clock). Any ROT they could concern started before them and is over,
//!    so forgetting them is safe — a partial-synchrony assumption (timers
//!    run at about real speed) that the paper also makes (500 ms; COPS-SNOW:
//!    5 s).
//! 4. **Version GC**, not in the paper: once the newest visible version of a
//!    key with no old readers is V, every ROT reads V or newer, and older
//!    versions are dropped — except pending ones and the newest visible one
//!    of each DC, which (deviation 2) answers dependency checks for that
//!    DC's earlier versions.
//! 5. **A ROT that reads at one partition is not recorded** as a reader
//!    (a GET is such a ROT): it reads all its keys in one step and never
//!    reads again, so it cannot be an old reader. Only multi-partition
//!    ROTs cost the readers check anything. Nor does such a ROT need a bound
//!    on its life: a GET has a message pair of its own (`GetReq`, no key
//!    vectors) and no attempt timer, one request and one reply within the
//!    session's deadline, as a COPS read.
//! 6. **The check is keyed by the version checked** (key and stamp), not by
//!    a counter, so a restarted partition cannot confuse its new checks
//!    with old ones still waiting elsewhere; unanswered checks are re-sent
//!    every `check_retry_us` (the partition asked may have crashed).
//! 7. **Crash-restart.** Versions — with their visibility, dependencies and
//!    old readers — are in the journaled store; the checks of versions not
//!    yet visible run again after a restart. Reader records are *not*
//!    journaled (a write to the log per read would defeat the point of a
//!    one-round read), so a restarted partition has forgotten who read its
//!    keys. It therefore answers no readers check for `reader_ttl_us`
//!    (counted in ticks after the restart; the store's metadata tells a
//!    restart from a first start): every ROT that read before the crash is
//!    over by then (deviation 3). Reads are served at once. PUTs depending
//!    on the partition's keys wait out the hold, which the liveness bound
//!    allows for.
//! 8. **Observations.** Each local PUT reports the samples
//!    `readers_check_ids` (distinct ROT ids collected; the paper's Fig. 6),
//!    `readers_check_bytes` (ids received, duplicates included, × 16 bytes:
//!    the paper's "cumulative" ids, §5), `readers_check_partitions` (other
//!    partitions asked) and `deps_per_write`, and `Blocked { readers_check }`
//!    with how long the PUT waited. A replicated version reports
//!    `remote_readers_check_ids`, `remote_readers_check_bytes` and
//!    `Blocked { dep_check }`. `Visible` as COPS, with the origin's clock.
//! 9. Full replication, one server per partition per DC
//!    ([`Protocol::validate`]). Clients are trusted library code, as in the
//!    paper: a forged dependency on a version never written stalls the PUT.
//!
//! 10. **Settling: never-depend versions** (Lloyd §6.1, "client metadata
//!     garbage collection", carried over from COPS, on which COPS-SNOW is
//!     built). Without it a session's context is every version it read
//!     since its last write: a session that read 5 000 keys could never
//!     write again (a PUT carries at most [`MAX_DEPS`]), and a GET cost the
//!     client an insertion into an ever larger map. A version is
//!     *settled* once it is visible in every DC and has been for a reader
//!     TTL: every ROT that read an older version of its key, or was one of
//!     its old readers, is over (deviation 3), and every DC's dependency
//!     check would pass at once, so depending on it constrains nothing. A
//!     read of a settled version says so (`Item::never_depend`) and the
//!     session drops it, with any older one of its key from its DC; a PUT
//!     drops settled dependencies before its check (after its stamp is
//!     above them all). How a partition learns it, per tick: it sends each
//!     replica a `Probe` naming the stamp below which all its own versions
//!     were replicated (its oldest still in a readers check); links are
//!     FIFO, so the replica has them all, and answers `Through` with that
//!     stamp or its own oldest pending version from the origin, if lower.
//!     The minimum over replicas is visible everywhere; a reader TTL of
//!     ticks later the origin settles it and tells the replicas
//!     (`Settled`). The messages are ephemeral (re-sent; handlers keep the
//!     maximum). A restarted partition has forgotten what was settled,
//!     which is only conservative. Settling goes by stamp per partition and
//!     origin DC, so a settled read also shows settled every dependency of
//!     the session on that partition from that DC stamped as low; the
//!     session sweeps those from its context, once per as many reads as
//!     the context holds (a read-only session kept every unsettled read
//!     until its next write). As in COPS, nothing settles while a DC
//!     is away: a session that reads more than [`MAX_DEPS`] versions
//!     written during a partition cannot write until it heals.
//!
//! Three deliberately broken variants: `mutant_skip_dep_check` (caught by
//! the conformance suite), `mutant_no_old_reader_propagation` (a partition
//! tells other partitions no old readers) and `mutant_lamport_only` (the
//! paper's §6 straw man: reads at a Lamport time, no reader records). The
//! last two are not in [`Protocol::MUTANTS`]: no conformance scenario,
//! and no torture run (its jitter is too small), splits a ROT's two reads
//! by the hop a readers check takes. `tests.rs` (the Fig. 1 race, a
//! dependency chain, the remote DC, the Lemma 1 schedule) and
//! `crates/check/tests/cclo_jitter.rs` (the Fig. 1 race at scale under
//! heavy jitter, judged by the checker) catch them.

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

use crate::kit::node::require_full_replication;
use causeway_core::{OpKind, Protocol, Topology};

pub struct CcLo;

impl Protocol for CcLo {
    const NAME: &'static str = "cclo";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put, OpKind::Rot];
    const CAUSAL: bool = true;
    const MUTANTS: &'static [&'static str] = &["mutant_skip_dep_check"];
    /// Lamport clocks: physical clock faults do not matter (expiry counts
    /// timer ticks). Crash-restart: deviation 7.
    const TOLERATES: causeway_core::Faults = causeway_core::Faults::ALL;
    /// Reads never wait, and a local PUT's dependencies are all visible in
    /// its own DC (the session read them there), so its readers check never
    /// waits for another DC.
    const AVAILABLE_UNDER_PARTITIONS: bool = true;
    crate::kit::protocol_parts!(CcLoServer, CcLoClient);

    /// A PUT: a readers check inside the DC, possibly behind the previous
    /// write of its key, possibly re-sent once, possibly behind a restarted
    /// partition's hold (deviation 7). A ROT: one round, or a retry after
    /// `rot_timeout_us`.
    fn liveness_bound_us(cfg: &Config, env: &causeway_core::LivenessEnv) -> u64 {
        let hold = cfg.reader_ttl_us + 2 * cfg.tick_us;
        let retry = cfg.check_retry_us + 2 * cfg.tick_us;
        10_000 + hold + retry + cfg.rot_timeout_us + 16 * env.intra_dc_rtt_us
    }

    /// Short reader TTLs and ROT timeouts, so that expiry and retries run
    /// under the faults.
    fn torture_params(draw: &mut dyn FnMut(u64, u64) -> u64) -> Vec<(&'static str, u64)> {
        let tick = draw(5, 50) * 1_000;
        let rot_timeout = draw(20, 250) * 1_000;
        vec![
            ("tick_us", tick),
            ("rot_timeout_us", rot_timeout),
            ("reader_ttl_us", rot_timeout + tick + draw(0, 200) * 1_000),
        ]
    }

    fn validate(cfg: &Config, topology: &Topology) -> Result<(), String> {
        cfg.check()?;
        require_full_replication(
            Self::NAME,
            topology,
            "a replicated version's dependencies are checked at their keys' servers in the receiving DC",
        )
    }
}
