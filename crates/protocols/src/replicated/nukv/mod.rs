//! # NuKV: per-operation session guarantees over Raft groups
//!
//! Roohitavaf, *Consistency for Distributed Data Stores* (PhD
//! dissertation, MSU 2019), Ch. 4 (Alg 4.1 client, Alg 4.2 server), as
//! deployed at eBay. Each partition is a Raft group of
//! `topology.replicas_per_partition` replicas inside each DC: writes go to
//! the group's leader, which stamps them with its hybrid logical clock past
//! the session's dependency time (`updateHLC(dt)`) and appends them to the
//! group's log; any replica answers a GET, blocking only while its stable
//! vector `sv` is below the session's `hrv`/`hwv` for the key's partition.
//! A stateless cross-DC forwarder (XC, the service `xc`, one per DC) is a
//! non-voting member of every group of its DC and ships the writes that
//! committed there, in log order, to the other DCs' leaders, which append
//! them to their own logs. The highest ⟨HLC, DC⟩ wins everywhere.
//!
//! Every operation picks its own guarantee ([`causeway_core::Levels`],
//! through [`causeway_core::Client::invoke_at`]); one that names none gets
//! the config's (`read_level`, `write_level`; defaults
//! monotonic-read-your-write and monotonic-write-follows-reads, the
//! paper's M/M).
//!
//! Raft is tikv's `raft` crate, its log and hard state kept in the node's
//! store ([`crate::replicated::raft_log`], which says why that crate).
//!
//! ## Deviations from the paper
//!
//! - **Forwarded batches carry their range.** The paper's XC sends
//!   `<Replicate k, v, log_idx>` per write and receivers "detect and skip
//!   repeated writes". Here a batch says it holds every write of its
//!   origin with an index in `(after, upto]`; a receiving group applies it
//!   only when `after ≤ sv[origin] < upto` (replays and gaps are dropped,
//!   and the forwarder ships again from the last acknowledgement after
//!   `forward_retry_us`), then sets `sv[origin] = upto`. So `sv[d]` may
//!   pass the index of d's last write to a later log index with no write
//!   of d between: Lemma 1 (a write not committed here has an index above
//!   `sv[d]`) holds all the same, and a session's `hrm` entries, which are
//!   such `sv` values, stay reachable at other DCs even when the origin's
//!   log moved on without writes. A replica's own DC entry is its applied
//!   index, for the same reason.
//! - **Stateless forwarder, bounded log.** After a restart the forwarder
//!   ships whatever its log still holds; to keep every write not yet
//!   applied everywhere in the log, each group compacts only below the
//!   index every other DC has acknowledged (the forwarder's `Floor`).
//!   A DC away for long therefore grows the other DCs' logs.
//! - **Ties.** The paper leaves equal timestamps unordered; here versions
//!   order by ⟨t, dc, origin log index⟩, which is unique.
//! - **A new leader stamps nothing until it has caught up.** Alg 4.2 has
//!   the leader stamp a PUT with `updateHLC(dt)` at once. A leader elected
//!   after its predecessor committed (and acknowledged) a write may not have
//!   applied that write yet, so its HLC may be below the write's stamp; a
//!   PUT stamped then on a clock that runs behind would order before a write
//!   acknowledged before it was invoked, and the DC's writes would not be
//!   linearized. It holds PUTs until it has applied its own term's first
//!   entry (Raft's empty entry on election; Ongaro and Ousterhout §8), a
//!   round of its group after the election.
//! - **A PUT whose answer is late is not resent** (it may have been
//!   proposed, and a second copy would be a second write): it fails with
//!   `TimedOut` at `op_deadline_us`. A PUT refused with `NotLeader` was
//!   not proposed and goes to the named leader.
//! - **A parked GET has a deadline** (`get_wait_us`): the replica then
//!   answers `Behind` and the client asks another replica of its DC.
//! - **Sessions move, or send a share elsewhere.** A session may migrate
//!   to another DC between operations (§4.1: NuKV lets clients switch
//!   DCs; [`causeway_core::Client::migrate`]): it keeps its vectors and
//!   HLC times, so its first GET there blocks until that DC has what the
//!   level asks for (the migration cost the thesis names, about one
//!   cross-DC trip). The evaluation's clients that reach other DCs
//!   (§4.4.1) are modelled without moving: `remote_read_share` and
//!   `remote_write_share` send that share of a session's GETs to a random
//!   replica, and of its PUTs to the leader, of another DC (default none).
//!   The vectors are per DC, so every level holds wherever an operation
//!   goes. Neither makes NuKV causal across keys: a session that read `k2`
//!   in one DC may read an older `k1` in another (Ch. 6's scenario; the
//!   test `sticky_clients` runs it).
//! - **Writes without HLC** (`hlc = false`) are the thesis's baseline of
//!   §4.4.2, whose mechanism it states only as "the PUT operation must
//!   wait until the current server receives all the relevant updates":
//!   here the session sends the log indexes its write level depends on
//!   and the leader holds the PUT until its stable vector covers them
//!   (`Behind` after `get_wait_us`, and the session asks again).

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

use causeway_core::{Faults, LivenessEnv, OpKind, Protocol, Topology};

pub struct Nukv;

impl Protocol for Nukv {
    const NAME: &'static str = "nukv";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put];
    /// Per-key session guarantees, not causal consistency.
    const CAUSAL: bool = false;
    /// Read-your-writes and monotonic reads per key at the default levels
    /// (Thms 1–2); the checker's monotonic writes and writes-follow-reads
    /// follow a session across keys, which Defs 6–7 do not promise.
    const SESSIONS: bool = true;
    const LINEARIZES_DC_WRITES: bool = true;
    const LEVELS: bool = true;
    const MIGRATES: bool = true;
    /// Raft keeps an acknowledged write through crashes of any minority of
    /// a group; HLC stamps need no clock property for the guarantees.
    const TOLERATES: Faults = Faults::ALL;
    /// Reads and writes need only the session's own DC's group.
    const AVAILABLE_UNDER_PARTITIONS: bool = true;
    const SERVICES: &'static [(&'static str, u16)] = &[(XC_SERVICE, 1)];
    crate::kit::protocol_parts!(NukvServer, NukvClient);

    /// An operation may wait out an election in its DC's group, and a PUT
    /// whose leader was lost waits for its deadline.
    fn liveness_bound_us(cfg: &Config, env: &LivenessEnv) -> u64 {
        let election_us = 2 * cfg.election_ticks * cfg.tick_us;
        cfg.op_deadline_us + 2 * election_us + 20 * env.intra_dc_rtt_us + 100_000
    }

    /// Groups of one, two or three replicas: a crash of a group's leader
    /// (or of any member of a group of one) is then an election to sit out.
    fn torture_replicas(draw: &mut dyn FnMut(u64, u64) -> u64) -> u16 {
        draw(1, 3) as u16
    }

    fn validate(cfg: &Config, topology: &Topology) -> Result<(), String> {
        cfg.check()?;
        if !topology.is_full_replication() {
            return Err("nukv needs full replication (topology.replication = full): every DC's forwarder \
                        ships to every other DC"
                .into());
        }
        if topology.service_index(XC_SERVICE).is_none() {
            return Err("nukv needs its forwarder service `xc` in topology.services".into());
        }
        Ok(())
    }
}
