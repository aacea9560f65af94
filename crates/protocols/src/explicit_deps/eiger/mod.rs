//! # Eiger: causal consistency with read-only transactions over valid times
//!
//! Lloyd et al., "Stronger Semantics for Low-Latency Geo-Replicated
//! Storage" (NSDI 2013); Lloyd's dissertation Ch. 5 (§5.2 causal+ for
//! column families, §5.3 read-only transactions, Fig 5.5).
//!
//! - **One-hop dependencies on operations** (§5.2): the client library
//!   collects ⟨locator, timestamp⟩ of every operation it read since its last
//!   write; a write carries them and the session's context then collapses to
//!   that write. Servers never store dependencies.
//! - **Lamport clock per server**: a write accepted in its DC is stamped
//!   with the server's logical time; a remote DC applies it only after
//!   `dep_check`s of its dependencies succeed (the replication path shared
//!   with COPS; its `DepOk` carries the checked server's clock, witnessed
//!   by the asker, so that what is applied after a check is logically later
//!   than what it checked).
//! - **Valid times** (§5.3): each version stores its EVT, the logical time
//!   it was applied here (= its stamp in the accepting DC, a later fresh
//!   tick in a remote DC); a read of the current version returns its EVT
//!   and as LVT the server's current logical time.
//! - **Read-only transactions** (Fig 5.5): one parallel round of current
//!   reads; EffT = the smallest LVT ≥ the largest EVT; a second parallel
//!   round, `multiget_slice_by_time(EffT)`, only for locations whose LVT is
//!   below EffT. Every value returned is valid at EffT (asserted). Old
//!   versions are kept for `trans_time` + margin after they are
//!   superseded; a second-round read older than what was kept fails and
//!   the transaction restarts. A plain `get` is a one-key transaction
//!   (always one round).
//!
//! ## Choices and deviations from the paper
//!
//! 1. **Key-value data model**: a location is a key; no column families,
//!    counters or deletes (`add`, `row family:column` are not implemented).
//!    Write-only transactions (2PC-PCI, §5.4) are not implemented yet:
//!    `wot`/`txn` are refused as unsupported.
//! 2. **The session's logical time** (`floor`): the client keeps the
//!    largest EffT it read at and stamp it wrote and sends it with every
//!    read and write; servers witness it first. The paper's freshness
//!    argument assumes a session's consecutive transactions see
//!    non-decreasing times; with per-server clocks a later transaction's
//!    EffT could otherwise fall below an earlier one's (a monotonic-reads
//!    violation), and a write stamped below an EffT it followed could be
//!    valid before a remote version it causally follows.
//! 3. **A restarted read transaction backs off and gives up** (as COPS-GT's
//!    deviation 7): doubling back-off from 1 ms up to `trans_time`, and
//!    `Aborted` after [`MAX_READ_TRANS_RESTARTS`] restarts in a row.
//! 4. **Servers fail**: the paper assumes logical servers never fail.
//!    Pending replicated writes and every version's EVT live in the
//!    journaled store; after a restart the clock is raised above every
//!    stamp and EVT, and pending writes are checked again.
//! 5. **Collection is by the superseding version's age** on the server's
//!    own clock (the paper keeps values overwritten within the timeout,
//!    and only those newer than a first-round answer); the kept oldest
//!    version is flagged so that a read before its EVT restarts instead
//!    of returning a wrong answer, whatever the clocks do.
//!
//! Two deliberately broken variants exist for tests:
//! `mutant_one_round_rot` (no second round) and `mutant_skip_dep_check`.

mod client;
mod config;
mod msg;
mod server;
#[cfg(test)]
mod tests;
mod txn;

pub use client::*;
pub use config::*;
pub use msg::*;
pub use server::*;

use crate::explicit_deps::replication::validate_topology;
use causeway_core::{ClientCtx, NodeCtx, OpKind, Protocol, Topology};

pub struct Eiger;

impl Protocol for Eiger {
    const NAME: &'static str = "eiger";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put, OpKind::Rot, OpKind::Wot];
    const CAUSAL: bool = true;
    /// `mutant_one_round_rot` is not listed: no conformance scenario forces
    /// a write between a transaction's two reads (as for COPS-GT); the
    /// step-by-step ACL race in `tests.rs` catches it instead.
    const MUTANTS: &'static [&'static str] = &["mutant_skip_dep_check"];
    /// Lamport clocks, but collection waits `trans_time` on physical
    /// clocks. Unlike COPS-GT, a collection that comes too early makes a
    /// read restart, never return a wrong value (deviation 5), so clock
    /// jumps are tolerated.
    const TOLERATES: causeway_core::Faults = causeway_core::Faults::ALL;
    /// Both read rounds and writes are served by the client's own DC.
    const AVAILABLE_UNDER_PARTITIONS: bool = true;
    type Msg = Msg;
    type Version = Version;
    type Config = Config;
    type Server = EigerServer;
    type Client = EigerClient;

    /// Two local read rounds; a restart costs a back-off and two more.
    fn liveness_bound_us(_cfg: &Config, env: &causeway_core::LivenessEnv) -> u64 {
        10_000 + 16 * env.intra_dc_rtt_us
    }

    /// Draw short collection windows so that old-version collection and
    /// read restarts run under the faults.
    fn torture_params(draw: &mut dyn FnMut(u64, u64) -> u64) -> Vec<(&'static str, u64)> {
        vec![("trans_time_ms", draw(50, 400)), ("gc_interval_ms", draw(10, 50)), ("clock_margin_ms", 10)]
    }

    fn validate(cfg: &Config, topology: &Topology) -> Result<(), String> {
        cfg.check()?;
        validate_topology("eiger", topology)
    }

    fn server(cfg: &Config, ctx: NodeCtx) -> EigerServer {
        EigerServer::new(cfg, ctx)
    }

    fn client(cfg: &Config, ctx: ClientCtx) -> EigerClient {
        EigerClient::new(cfg, ctx)
    }
}
