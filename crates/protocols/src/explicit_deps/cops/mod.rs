//! # COPS: causal+ from explicit one-hop dependencies
//!
//! COPS (Lloyd, Freedman, Kaminsky, Andersen, SOSP 2011) as Lloyd
//! describes it (dissertation Ch. 4 and §6.1). Where the
//! stabilization protocols (GentleRain, CausalSpartanX) make a remote version
//! visible once a stable time passes it, COPS names each write's
//! dependencies and checks them, one by one, before applying it:
//!
//! - **Timestamps** (§2.5): Lamport clocks, a version's timestamp
//!   ([`Stamp`](crate::explicit_deps::replication::Stamp)) carrying the stamping node's id in its low bits, so stamps
//!   are unique and order each key's versions last-writer-wins consistently
//!   with causality.
//! - **Client context** (§2.3): ⟨key, stamp⟩ of everything read since the
//!   session's last write, plus that write. A write sends the context as its
//!   *one-hop* dependencies, then the context shrinks to the write alone:
//!   what the write depended on is now covered through it.
//! - **`write_after`** (§2.6): the key's server in the client's DC stamps
//!   the write above every dependency, applies it, acknowledges, and queues
//!   it for its equivalents in the other DCs.
//! - **`dep_check`** (§2.7): an equivalent receiving the write asks, for each
//!   dependency, the local server owning that key whether it has committed
//!   that version, waiting until it has; then it commits the write. Only the
//!   replication path ever waits: reads and local writes never block.
//!
//! - **Never-depend** (§6.1): once a version is committed in every DC
//!   ([`settle`](crate::explicit_deps::replication::settle)) it is flagged, and a client that reads it
//!   adds nothing to its context, so contexts stay at a few entries even
//!   when a session reads many keys between writes.
//!
//! COPS has no read-only transactions ([`cops_gt`](crate::cops_gt) adds
//! them), so [`Op::Rot`](causeway_core::Op::Rot) fails as unsupported.
//!
//! ## Choices and deviations from the paper
//!
//! 1. **What satisfies a `dep_check`**, durability and retries: see
//!    [`dep_check`](crate::explicit_deps::replication::dep_check), shared with COPS-GT.
//!    A replicated write commits as soon as its own checks pass (§2.7), not
//!    behind earlier writes of its origin; what is committed from an origin
//!    is a low-water mark plus the stamps committed above it, so a write
//!    whose dependency sits in a cut-off DC holds back no independent one.
//! 2. **The context keeps one stamp per key *and origin***, not per key
//!    (§2.3 says "the most recent timestamp of each key"). A session that
//!    read x@5 (accepted in DC A, depending on y@3) and then a concurrent
//!    x@7 (accepted in DC B) depends on both: keeping only x@7, its next
//!    write could commit in a third DC where x@5, and so y@3, have not
//!    arrived, and a reader there would see the write with an old y.
//!    Versions of one key from one origin commit in stamp order (the one
//!    order `dep_check` keeps for this reason), so the newest per origin
//!    covers the rest: at most one entry per DC per key.
//! 3. **Full replication, one server per partition** ([`Protocol::validate`]).
//! 4. **One stored version per key** (§2.2) *plus* pending replicated
//!    writes newer than it, which wait for their checks in the store so that
//!    a crash cannot lose them.
//! 5. **Measurement**: a replicate carries the origin's clock reading
//!    (`written_us`, not stored) so the network runtime can estimate
//!    visibility latency; the simulator uses true time. Each client write
//!    reports its dependency count as the sample `deps_per_write`.
//!
//! Clients are trusted library code, as in the paper: a forged dependency on
//! a version that was never written stalls replication from its origin.

mod client;
mod config;
mod msg;
mod server;
#[cfg(test)]
pub(crate) mod tests;

pub use client::*;
pub use config::*;
pub use msg::*;
pub use server::*;

use causeway_core::{OpKind, Protocol};

pub struct Cops;

impl Protocol for Cops {
    const NAME: &'static str = "cops";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put];
    const MUTANTS: &'static [&'static str] = &["mutant_skip_dep_check"];
    /// Lamport clocks: physical clock faults do not matter; the pending
    /// replicated writes and the committed-through table are journaled and
    /// recovered on `on_start`.
    const TOLERATES: causeway_core::Faults = causeway_core::Faults::ALL;
    /// GET and PUT are served by the client's own DC (Lloyd §2.2).
    const AVAILABLE_UNDER_PARTITIONS: bool = true;
    crate::explicit_deps::explicit_deps_protocol!(CopsServer, CopsClient);

    /// Client operations never wait for remote DCs.
    fn liveness_bound_us(_cfg: &Config, env: &causeway_core::LivenessEnv) -> u64 {
        10_000 + 8 * env.intra_dc_rtt_us
    }
}
