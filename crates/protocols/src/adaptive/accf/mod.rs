//! # ACCF: the Adaptive Causal Consistency Framework
//!
//! Roohitavaf, "Consistency for Distributed Data Stores", PhD thesis, 2019,
//! Ch. 7 (Alg 7.1, the client; Alg 7.2, the server; Table 7.1). Causal
//! consistency protocols differ in two groupings of the servers (§7.1):
//!
//! - **tracking groups** (T): a version's timestamp has one entry per group,
//!   so coarser groups mean smaller dependency sets and more false
//!   dependencies (v1 dep v2 ⇒ v1.t > v2.t, not ⇔);
//! - **checking groups** (C): before a server lets a reader of group `cg`
//!   see a version, every server of `cg` must have received what it
//!   depends on.
//!
//! Every protocol of Table 7.1 fixes both; ACCF takes them as input, plus
//! the placement H (which servers store which keys: partial replication
//! works, each partition stored at some DCs). The grouping is the
//! `[protocol]` table's `tracking` and `checking` ([`Grouping`]): the rows
//! `per_key` (COPS, Eiger: tracking), `per_server` (Orbe: tracking),
//! `per_replica` (CausalSpartan: both; every row's checking but Okapi's and
//! Occult's), `per_system` (GentleRain: tracking; Okapi: checking), or
//! explicit groups of servers named `"<dc>:<partition>"`. The thesis's
//! §7 experiments compare 2×2 (`per_replica` for both) with 4×1
//! (`per_server` for both).
//!
//! **The protocol.** A client keeps DSc, at most one ⟨tracking group,
//! timestamp⟩ per group (Alg 7.1). A PUT at server i takes `updateHLC(max
//! DSc)`, stores the version with `ds = max(DSc, ⟨T(i), HLC_i⟩)` and
//! replicates it to the other servers storing the key (Alg 7.2 lines
//! 9–17). Server i keeps `VV_i[t]`, the min over the servers of group t it
//! shares keys with of the latest timestamp received from each (+∞ if it
//! shares none), fed by Replicates and heartbeats, and for each checking
//! group `SVV^cg_i`, the entry-wise min of the members' VVs. A GET ⟨k, cg,
//! DSc⟩ (Alg 7.2 lines 1–7):
//!
//! 1. **waits** (line 3) while some ⟨t, h⟩ ∈ DSc has h > `VV_i[t]`: a version
//!    the client depends on may not have reached this server;
//! 2. if DSc ≤ SVV^cg_i, returns the latest version whose `ds` ≤ SVV^cg_i
//!    (lines 4–5): one every member of cg can back up, so a client reading
//!    only in cg never waits;
//! 3. otherwise (the client read outside cg before) returns the latest
//!    version (line 6), which the wait made at least what DSc requires.
//!
//! Safety rests on the wait: with DSc ≤ VV_i, every version the session
//! depends on of a key stored at i has arrived at i, and both branches
//! return one at least as new in last-writer-wins order (⟨ut, origin⟩; a
//! version's `ut` exceeds every entry of its writer's DSc). The SVV filter
//! keeps reads inside a checking group from waiting: it is what makes the
//! 2×2 grouping serve the thesis's App2 without blocking, where 4×1 blocks
//! (and lets 4×1 serve App1 without the delay 2×2 adds). `tests.rs` replays both,
//! and with overlapping checking groups (each server in its DC's group and
//! in one of its own) serves both in one deployment, each application
//! naming its view per GET (deviation 5).
//!
//! ## Deviations from the printed pseudo-code, and why
//!
//! 1. **Line 4's comparison.** The extracted text prints "if for all ⟨t, h⟩
//!    in ds, h > `SVV^cg_i[t]`"; the prose (§7.2.2) says the filtered branch
//!    is taken when `SVV^cg_i[t]` ≥ h for every entry. The prose is followed.
//! 2. **VV_i counts peers only.** Line 14 sets VV_i[T(i)] to HLC_i, making
//!    server i one of the servers its own entry waits for. A server holds
//!    every version it wrote, so its own clock says nothing about what it
//!    is missing; here `VV_i[t]` is the min over the *other* servers of t
//!    sharing keys with i. Without it, a read after a write to a server
//!    whose clock runs behind would wait out the skew.
//! 3. **HLC receive rule on every timestamp heard.** Replicates, heartbeats
//!    and a GET's DSc move HLC_i past their timestamps (Kulkarni et al.'s
//!    receive event; the thesis updates HLC_i only on PUT). A GET parked
//!    on h at server i then makes i's next heartbeat carry ≥ h, and its
//!    peers' answers too: the wait lasts about a round trip and a
//!    heartbeat, not until every peer's physical clock passes h (a clock
//!    that jumped forward would otherwise stall readers for the jump).
//! 4. **SVV through the group's first member.** Rather than every member
//!    sending its VV to every other (n² messages per period), each reports
//!    to the group's first member, which pushes the entry-wise min back:
//!    the same value, one period staler, 2n messages. A member's SVV only
//!    grows (entry-wise max of pushes). A group of one server uses its VV.
//! 5. **The client's `cg`.** Alg 7.1 leaves it to the application, per
//!    GET. A session names one for its following GETs
//!    ([`causeway_core::Client::set_checking_group`]; groups are numbered as
//!    [`Grouping`] says: under `per_replica`, group d is DC d's servers),
//!    or names none: each GET then names the first checking group of the
//!    server it reads at, so a session stays in one group as long as its
//!    servers share one. The thesis's L(k) picks the server whatever `cg`
//!    is, but a server has SVV^cg only for its own groups: a GET naming a
//!    group goes to a server in it, the key's usual server if it is a
//!    member, else the first member storing the key in ring order from the
//!    session's DC (`per_replica` group d: DC d's copy). A group that does
//!    not exist, or of which no member stores the key, is refused at the
//!    client with a [`causeway_core::CheckingGroupError`]; a request
//!    naming a group its server is not in, at the server.
//! 6. **A bound on the wait.** A GET parked longer than
//!    `get_wait_limit_us` (10 s) is answered `Aborted`, naming the group it
//!    waited for, instead of hanging while a DC is away.
//! 7. **Version collection** (not in the thesis): an insert drops the
//!    versions older than the newest one that every checking group of the
//!    server admits; SVVs only grow, so no GET can return them again. A
//!    restarted server's SVVs start low: where collection pruned the
//!    versions they admit, the oldest kept version answers (as line 6 may).
//! 8. **Tracking per key** is coarsened to per partition: T maps servers,
//!    and the servers of a partition are exactly the copies of its keys.
//!    Occult's row (tracking per master server, no checking) has no
//!    counterpart: C gives every server at least one group.
//! 9. **Crash-restart** (the thesis keeps no durable state but the
//!    versions): a heartbeat promises that nothing at or below its HLC
//!    follows, so a server journals a lease `clock_lease_us` ahead of the
//!    HLCs its heartbeats carry and restarts its HLC above it; `VV_i`
//!    resumes from the stored versions, SVVs from the next push.
//!
//! ## What it promises
//!
//! Causal+ consistency (last-writer-wins) for GET and PUT; no read-only
//! transactions. A GET may wait at line 3 — for a session that reads
//! outside its checking group, or under a coarse tracking grouping (with
//! `per_system` tracking, a read after a write waits for the other DCs'
//! heartbeats) — so ACCF is not available under partitions (the thesis's
//! GET blocks too). Clock skew, drift and jumps cost at most waiting.

mod client;
mod config;
mod grouping;
mod msg;
mod server;
#[cfg(test)]
mod tests;

pub use client::*;
pub use config::*;
pub use grouping::*;
pub use msg::*;
pub use server::*;

use causeway_core::{Faults, LivenessEnv, OpKind, Protocol, Topology};

pub struct Accf;

impl Protocol for Accf {
    const NAME: &'static str = "accf";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put];
    const CAUSAL: bool = true;
    const MUTANTS: &'static [&'static str] = &["mutant_skip_dependency_checks"];
    /// HLCs: skew, drift and jumps either way only delay (deviation 3
    /// bounds the delay); a restart resumes above its lease (deviation 9).
    const TOLERATES: Faults = Faults::ALL;
    const PARTIAL_REPLICATION: bool = true;
    crate::kit::protocol_parts!(AccfServer, AccfClient);

    /// A GET waits at most until the versions it depends on reach its
    /// server (a WAN trip) and its peers' heartbeats pass them: with
    /// deviation 3, the server's next heartbeat carries the GET's
    /// timestamps and each peer's next one answers, a WAN round trip and
    /// two heartbeat ticks. The skew is allowed once more for a peer whose
    /// heartbeat tick falls behind; PUTs never wait.
    fn liveness_bound_us(cfg: &Config, env: &LivenessEnv) -> u64 {
        20_000 + 2 * env.max_rtt_us + env.max_clock_skew_us + 4 * cfg.heartbeat_interval_us + 8 * env.intra_dc_rtt_us
    }

    /// Every run draws T and C from the presets of Table 7.1 (0 per server,
    /// 1 per key, 2 per replica, 3 per system), independently.
    fn torture_params(draw: &mut dyn FnMut(u64, u64) -> u64) -> Vec<(&'static str, u64)> {
        vec![("tracking", draw(0, 3)), ("checking", draw(0, 3))]
    }

    /// The groups the `checking` grouping yields, numbered as
    /// [`Grouping`] says; 0 for a config the topology refuses.
    fn checking_groups(cfg: &Config, topology: &Topology) -> u16 {
        cfg.resolve(topology).map_or(0, |g| g.checking_count().min(u16::MAX as usize) as u16)
    }

    fn validate(cfg: &Config, topology: &Topology) -> Result<(), String> {
        cfg.resolve(topology).map(|_| ()).map_err(|e| e.to_string())
    }
}
