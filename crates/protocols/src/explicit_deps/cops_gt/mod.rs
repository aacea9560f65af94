//! # COPS-GT: COPS with read-only transactions
//!
//! COPS-GT (the SOSP paper's name; "COPS-RT" in Lloyd, dissertation
//! Ch. 4 and §6.1) adds `read_trans` to [COPS](crate::cops).
//! It needs more than one-hop dependencies: a transaction must see, for any
//! version it returns, every requested key at least as new as that version's
//! dependencies. So:
//!
//! - **Versions store their dependencies** (§2.2): every ⟨key, stamp⟩ the
//!   write causally follows, minus what garbage collection removed; the
//!   server keeps a few old versions per key for `trans_time`.
//! - **The client context holds everything** (§2.3): each read adds the
//!   version and its stored dependencies; a write carries them all, and
//!   the *nearest* ones (those no other context entry already depends on)
//!   are what remote DCs check (§2.6, Fig 4.2).
//! - **`read_trans`** (§2.9, Fig 4.3): one parallel round of
//!   `read_by_time(k, LATEST)`; from the results' dependency lists the
//!   causally-correct version `ccv[k]` of each key; a second parallel round,
//!   by explicit stamp, only for keys whose first-round version is older
//!   than `ccv[k]`. Two rounds at most, never blocking.
//! - **Garbage collection** (§2.10):
//!   - *versions*: a version overwritten for `trans_time` is dropped
//!     (at once when no transaction can need it, deviation 9);
//!     a transaction that outlives `trans_time` (or asks for a dropped
//!     version) restarts;
//!   - *dependencies*: once a write is committed in every DC and
//!     `trans_time` has passed, its stored dependencies are dropped and it
//!     is flagged **never-depend**; clients drop such versions from their
//!     context at once;
//!   - *client metadata*: the **global checkpoint time**, a Lamport time
//!     below which every write is committed everywhere, computed 10×/s by
//!     exchanging per-node bounds with equivalents and then within the DC;
//!     a server drops dependencies older than it from each write and returns
//!     it, and the client cleans its context with it. The paper uses a
//!     checkpoint only `trans_time` after computing it; here at once, with
//!     `read_trans` checking what was dropped (deviation 8).
//!
//! Replication and `dep_check` are shared with COPS
//! ([`dep_check`](crate::explicit_deps::replication::dep_check)): a
//! replicated write commits as soon as its own checks pass (§2.7), not
//! behind earlier writes of its origin, except that one key's writes from
//! one origin commit in stamp order, which deviation 1 relies on (so a write
//! whose dependency sits in a cut-off DC does not hold back its origin's
//! independent writes for as long as the cut lasts).
//!
//! ## Choices and deviations from the paper
//!
//! 1. **Dependencies per key and origin** (as COPS's deviation 2): the
//!    context keeps the newest stamp per ⟨key, origin node⟩. For
//!    `read_trans`, `ccv[k]` is the newest stamp of `k` in any dependency
//!    list, as in Fig 4.3: under last-writer-wins a newer version of `k`
//!    supersedes an older concurrent one.
//! 2. **Knowing "committed in all DCs"** ([`settle`](crate::explicit_deps::replication::settle), shared
//!    with COPS): each server tells the origin of writes, every GC tick, how
//!    far it has committed that origin's writes (one stamp), and the origin,
//!    `trans_time` after learning that every DC has a write, tells all DCs,
//!    again with one stamp, to drop the dependencies of its writes through
//!    it. The paper has each remote DC wait `trans_time` itself and notify
//!    per version; waiting at the origin after the last DC's commit is
//!    later, so it is at least as safe, and it costs O(1) messages per tick
//!    instead of per write.
//! 3. **The checkpoint's per-node bound** is the Lamport time of the node's
//!    oldest own write not yet committed everywhere, or its clock + 1 when
//!    there is none (the paper: "the oldest Lamport timestamp of any pending
//!    write in the key range"). Stale bounds are lower bounds, so the
//!    minimum of what a node has heard is safe.
//! 4. **`trans_time` is measured on one clock at a time**: a transaction's
//!    duration on its client's clock, a version's age on its server's. Only
//!    drift between them matters, covered by `clock_margin_ms` (the paper's
//!    "small delta for clock skew"). A forward clock jump larger than the
//!    margin can collect too early; torture does not jump COPS-GT's clocks.
//! 5. **A plain `get`** is `read_by_time(k, LATEST)` with the result added
//!    to the context; the paper's COPS-GT API reads through `read_trans`
//!    only, and a one-key `read_trans` is exactly that.
//! 6. **Durability** as COPS: pending replicated writes live in the store;
//!    collected dependency lists and never-depend flags are rewritten in
//!    place, so they survive a restart too. After a restart, garbage
//!    collection state (what awaits collection) is rebuilt from the store.
//! 7. **A restarted `read_trans` backs off, and gives up.** §6.1 restarts
//!    a transaction that outlived `trans_time` at once; when every read
//!    round is slower than `trans_time`, it restarts forever. [`Config::check`] (so `validate`) refuses a `trans_time_ms`
//!    below [`MIN_TRANS_TIME_MS`] with a [`ConfigError`] naming the field;
//!    a restart waits a back-off doubling from [`READ_TRANS_BACKOFF_US`] up
//!    to `trans_time`, and after [`MAX_READ_TRANS_RESTARTS`] restarts in a
//!    row the operation ends with `Aborted`, so a slow DC shows as typed
//!    failures, not as operations that never end. A restart still starts a
//!    fresh `trans_time`: collection waits `trans_time` + margin on the
//!    servers, which the client cannot widen on its own.
//!
//! 8. **A fresh checkpoint, checked by `read_trans`.** §6.1 has servers and
//!    clients wait `trans_time` before using a checkpoint, since a
//!    transaction still running may have read a key before a dependency
//!    older than the checkpoint was committed here. So a session's
//!    dependencies span `trans_time` (5 s): a session writing 1 000 times a
//!    second sends thousands with every write, and the store keeps them with
//!    every version (our earlier measurements: 0.07× Redis on sets). Here a
//!    server drops, from a write, every dependency below its **cut**: the
//!    lowest checkpoint this DC's servers have reported having (they gossip
//!    it with their bounds), or the session's own (the newest checkpoint it
//!    learned), if higher. The cut is stored with the version; every cut
//!    is a checkpoint, so whatever it dropped is committed in every DC. A
//!    version's cut is at least the cut of every version in its list (its
//!    session knew those cuts when it wrote), so the highest cut among a
//!    `read_trans`'s first-round versions, `need`, covers every dependency
//!    any returned version dropped, its second-round versions' included.
//!    Each first-round reply carries its server's checkpoint when it read:
//!    a key read at or above `need` already reflects every write below
//!    `need`, and so does a key whose version is itself at or above `need`;
//!    any other key is read again in the second round at its newest version
//!    below `need` (all committed here, as everything below a checkpoint
//!    is), or the causally-correct one if newer. Such a version depends only
//!    on writes below `need`, which every returned key now reflects: still
//!    two rounds, never blocking. The cut a server uses is what its DC's
//!    servers said they have, so a version written in the reader's DC
//!    rarely calls for that second read (after a restart, say); one
//!    replicated from another DC carries that DC's cut, which this DC's
//!    servers may not have reached yet, and calls for it more often. With
//!    no other DC a node's own bound is its clock, not the oldest write the
//!    next tick would report (deviation 3): its writes are everywhere when
//!    written.
//!    Lists then hold a tick's worth of writes (none on one DC) instead of
//!    `trans_time`'s. `fresh_checkpoint = false` gives the paper's
//!    checkpoint; `trans_time` still bounds transactions, old versions and
//!    never-depend flags, which the paper's argument for them needs.
//! 9. **Old versions are kept only while a transaction may ask for them.**
//!    §6.1 keeps every overwritten version for `trans_time`. A second round
//!    asks a key's server only for versions at least as new as the one its
//!    first round read there, so a version overwritten when no transaction
//!    still running has read at that server is never asked for. Each server
//!    notes when it last served the first round of a `read_trans` of
//!    several keys (flagged in the `Read`; one key never needs a second
//!    round) and collects what a write overwrote at once unless that was
//!    within `trans_time` + margin; otherwise as the paper. A write-heavy
//!    store without transactions then holds one version per key, as COPS.
//!    Collection never makes a read wrong, only a transaction restart: a
//!    round that finds its version gone gets `Err` (after a restart this
//!    node forgets when it last served one, with that consequence).
//!
//! Two deliberately broken variants exist for tests:
//! `mutant_one_round_rot` (a `read_trans` that never runs its second round,
//! so reads without a snapshot) and `mutant_skip_dep_check`.

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

use causeway_core::{OpKind, Protocol};

pub struct CopsGt;

impl Protocol for CopsGt {
    const NAME: &'static str = "copsgt";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put, OpKind::Rot];
    const MUTANTS: &'static [&'static str] = &["mutant_skip_dep_check"];
    /// Lamport clocks, but `trans_time` is a duration on physical clocks: a
    /// jump larger than its margin can collect too early (deviation 4).
    /// Skew and drift (far below the margin) are harmless; recovery as COPS.
    const TOLERATES: causeway_core::Faults =
        causeway_core::Faults { backward_jumps: false, forward_jumps: false, ..causeway_core::Faults::ALL };
    /// Both rounds of a get_trans are served by the client's own DC.
    const AVAILABLE_UNDER_PARTITIONS: bool = true;
    // Two local read rounds; a restart costs a back-off and two more.
    crate::explicit_deps::explicit_deps_protocol!(CopsGtServer, CopsGtClient, two_round_reads);
}
