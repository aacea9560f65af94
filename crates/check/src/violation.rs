//! Violations: one typed variant per kind, each naming the few operations
//! that show it, with a `Display` that tells the story.
//!
//! Checks record violations cheaply as [`Raw`] (op indices only) through a
//! [`Collector`] that counts every violation but keeps the first N of each
//! kind; those are rendered into [`Violation`]s, with causal paths, once the
//! causal order is complete. A new kind is one [`Kind`], one [`Violation`]
//! variant and one [`Raw`] variant; both enums are `#[non_exhaustive]` so adding one breaks no caller.

use crate::explain::{Explainer, OpRef, Path, ValueName};
use crate::model::{ReadEv, Source};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// The kinds of violation, in report order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Kind {
    /// A read returned a value no write of that key wrote.
    ThinAirRead,
    /// Session order and reads-from form a cycle.
    CyclicCausalOrder,
    /// A read returned a write overwritten in its causal past.
    WriteCoRead,
    /// A read returned the initial state although a write of the key is in its causal past.
    WriteCoInitRead,
    /// No total arbitration order of writes explains all reads (CCv's CyclicCF).
    CyclicArbitration,
    ReadYourWrites,
    MonotonicReads,
    MonotonicWrites,
    WritesFollowReads,
    /// A read-only transaction did not read a causal snapshot.
    RotSnapshot,
    /// A reader saw part of a transaction's writes and missed the rest.
    FracturedRead,
    /// After quiescence, reads of one key disagree.
    Divergence,
    /// After quiescence, a read returns a value an acknowledged write of the key causally overwrote.
    NotEventuallyVisible,
    /// An operation never completed (pending at the end of the run, or
    /// timed out) although its liveness deadline had passed.
    Unfinished,
    /// An operation completed after its liveness deadline.
    SlowOperation,
}

impl Kind {
    pub const ALL: [Kind; 15] = [
        Kind::ThinAirRead,
        Kind::CyclicCausalOrder,
        Kind::WriteCoRead,
        Kind::WriteCoInitRead,
        Kind::CyclicArbitration,
        Kind::ReadYourWrites,
        Kind::MonotonicReads,
        Kind::MonotonicWrites,
        Kind::WritesFollowReads,
        Kind::RotSnapshot,
        Kind::FracturedRead,
        Kind::Divergence,
        Kind::NotEventuallyVisible,
        Kind::Unfinished,
        Kind::SlowOperation,
    ];

    /// A short name for summaries.
    pub fn name(self) -> &'static str {
        match self {
            Kind::ThinAirRead => "thin-air read",
            Kind::CyclicCausalOrder => "cyclic causal order",
            Kind::WriteCoRead => "read of a causally overwritten value",
            Kind::WriteCoInitRead => "read of ∅ after a causally preceding write",
            Kind::CyclicArbitration => "no convergent arbitration order (causal+)",
            Kind::ReadYourWrites => "read-your-writes",
            Kind::MonotonicReads => "monotonic reads",
            Kind::MonotonicWrites => "monotonic writes",
            Kind::WritesFollowReads => "writes-follow-reads",
            Kind::RotSnapshot => "read-only transaction snapshot",
            Kind::FracturedRead => "atomic visibility of transactions' writes (fractured reads)",
            Kind::Divergence => "convergence after quiescence",
            Kind::NotEventuallyVisible => "eventual visibility",
            Kind::Unfinished => "liveness: every operation completes",
            Kind::SlowOperation => "liveness: operations complete within the protocol's bound",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One violation, with the operations and causal paths that show it.
/// `returned: None` means the read returned the initial state (∅).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Violation {
    ThinAirRead {
        read: OpRef,
        key: String,
        value: ValueName,
    },
    CyclicCausalOrder {
        /// From a write around to itself.
        cycle: Path,
        /// Operations in the strongly connected component the cycle lies in.
        ops_involved: usize,
    },
    WriteCoRead {
        read: OpRef,
        key: String,
        returned: OpRef,
        newer: OpRef,
        /// returned ⇝ newer
        overwritten: Path,
        /// newer ⇝ read
        seen: Path,
    },
    WriteCoInitRead {
        read: OpRef,
        key: String,
        write: OpRef,
        /// write ⇝ read
        seen: Path,
    },
    CyclicArbitration {
        /// From a write around to itself, through causal and arbitration steps.
        cycle: Path,
        ops_involved: usize,
    },
    ReadYourWrites {
        read: OpRef,
        key: String,
        returned: Option<OpRef>,
        own_write: OpRef,
        /// returned ⇝ own_write
        overwritten: Option<Path>,
    },
    MonotonicReads {
        read: OpRef,
        key: String,
        returned: Option<OpRef>,
        earlier_read: OpRef,
        earlier_value: OpRef,
        /// returned ⇝ earlier_value
        overwritten: Option<Path>,
    },
    MonotonicWrites {
        read: OpRef,
        key: String,
        returned: Option<OpRef>,
        /// An earlier read of this session that saw `seen_write`.
        earlier_read: OpRef,
        seen_write: OpRef,
        /// Written to `key` by `seen_write`'s session before `seen_write`.
        older_write: OpRef,
        /// returned ⇝ older_write
        overwritten: Option<Path>,
    },
    WritesFollowReads {
        read: OpRef,
        key: String,
        returned: Option<OpRef>,
        earlier_read: OpRef,
        seen_write: OpRef,
        /// A read by `seen_write`'s session before it wrote `seen_write`.
        writer_read: OpRef,
        /// What `writer_read` returned (a write of `key`).
        writer_saw: OpRef,
        /// returned ⇝ writer_saw
        overwritten: Option<Path>,
    },
    RotSnapshot {
        rot: OpRef,
        key: String,
        returned: Option<OpRef>,
        other_key: String,
        other: OpRef,
        /// A write of `key` that overwrote `returned` and precedes `other`.
        newer: OpRef,
        /// returned ⇝ newer
        overwritten: Option<Path>,
        /// newer ⇝ other
        seen: Path,
    },
    FracturedRead {
        read: OpRef,
        key: String,
        returned: Option<OpRef>,
        /// The transaction (a `Wot`, or a `Txn`'s writes), which also wrote `key`.
        wot: OpRef,
        /// How the reader had seen `wot`: the read itself (another key of
        /// the same read-only transaction), an earlier op of its session
        /// that read it, or `wot` itself (its own write).
        via: OpRef,
        /// returned ⇝ wot
        overwritten: Option<Path>,
    },
    Divergence {
        key: String,
        first: OpRef,
        first_value: ValueName,
        second: OpRef,
        second_value: ValueName,
        quiescent_after_us: u64,
    },
    NotEventuallyVisible {
        key: String,
        read: OpRef,
        returned: Option<OpRef>,
        write: OpRef,
        /// returned ⇝ write
        overwritten: Option<Path>,
        quiescent_after_us: u64,
        /// Set when the write overwrote the returned value by its DC's
        /// write order (`CheckConfig::dc_write_order`), not causally: the
        /// DC both were made in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        same_dc: Option<String>,
    },
    /// An operation that did not complete (by its deadline, if one is known).
    Unfinished(Stall),
    /// An operation that completed after its deadline.
    SlowOperation(Stall),
}

/// An operation that missed its liveness deadline, with what the history
/// tells about what it waited for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Stall {
    pub op: OpRef,
    /// "get", "put", "rot", …
    pub op_kind: String,
    /// The keys it read or wrote.
    pub keys: Vec<String>,
    /// When it had to complete by; `None` when no liveness spec was given.
    pub deadline_us: Option<u64>,
    /// When it completed, timed out, or was last seen pending (end of run).
    pub ended_us: u64,
    /// "completed", "timed out" or "pending".
    pub ending: String,
    /// Its session's previous operation.
    pub previous: Option<OpRef>,
    /// Writes from other DCs its session had read before it (the
    /// dependencies a dependency-tracking protocol may wait for).
    pub remote_dependencies: Vec<OpRef>,
    /// The fault windows its run overlapped.
    pub faults: Vec<String>,
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = &self.op;
        write!(f, "{} invoked a {} of {{{}}} ({}) that ", op.who(), self.op_kind, self.keys.join(", "), op.at())?;
        let took = crate::explain::ms(self.ended_us.saturating_sub(op.invoke_us));
        match self.ending.as_str() {
            "completed" => write!(f, "took {took}, completing at {}", crate::explain::ms(self.ended_us))?,
            "timed out" => write!(f, "never completed: its client gave up after {took}")?,
            _ => write!(f, "never completed: still pending at the end of the run ({took} later)")?,
        }
        if let Some(d) = self.deadline_us {
            write!(f, "; its deadline was {}", crate::explain::ms(d))?;
        }
        match &self.previous {
            Some(p) => write!(f, ". Its session's previous operation: {p}")?,
            None => write!(f, ". It was its session's first operation")?,
        }
        if !self.remote_dependencies.is_empty() {
            let deps: Vec<String> = self.remote_dependencies.iter().map(|w| w.to_string()).collect();
            write!(
                f,
                "; its session had read these writes from other DCs (it may wait for them): {}",
                deps.join("; ")
            )?;
        }
        if self.faults.is_empty() {
            write!(f, "; no fault was active while it ran")?;
        } else {
            write!(f, "; faults while it ran: {}", self.faults.join("; "))?;
        }
        Ok(())
    }
}

impl Violation {
    pub fn kind(&self) -> Kind {
        match self {
            Violation::ThinAirRead { .. } => Kind::ThinAirRead,
            Violation::CyclicCausalOrder { .. } => Kind::CyclicCausalOrder,
            Violation::WriteCoRead { .. } => Kind::WriteCoRead,
            Violation::WriteCoInitRead { .. } => Kind::WriteCoInitRead,
            Violation::CyclicArbitration { .. } => Kind::CyclicArbitration,
            Violation::ReadYourWrites { .. } => Kind::ReadYourWrites,
            Violation::MonotonicReads { .. } => Kind::MonotonicReads,
            Violation::MonotonicWrites { .. } => Kind::MonotonicWrites,
            Violation::WritesFollowReads { .. } => Kind::WritesFollowReads,
            Violation::RotSnapshot { .. } => Kind::RotSnapshot,
            Violation::FracturedRead { .. } => Kind::FracturedRead,
            Violation::Divergence { .. } => Kind::Divergence,
            Violation::NotEventuallyVisible { .. } => Kind::NotEventuallyVisible,
            Violation::Unfinished(_) => Kind::Unfinished,
            Violation::SlowOperation(_) => Kind::SlowOperation,
        }
    }

    /// The operation the violation is about, for ordering reports.
    pub fn primary_op(&self) -> usize {
        match self {
            Violation::ThinAirRead { read, .. }
            | Violation::WriteCoRead { read, .. }
            | Violation::WriteCoInitRead { read, .. }
            | Violation::ReadYourWrites { read, .. }
            | Violation::MonotonicReads { read, .. }
            | Violation::MonotonicWrites { read, .. }
            | Violation::WritesFollowReads { read, .. }
            | Violation::FracturedRead { read, .. }
            | Violation::NotEventuallyVisible { read, .. } => read.index,
            Violation::CyclicCausalOrder { cycle, .. } | Violation::CyclicArbitration { cycle, .. } => {
                cycle.start.index
            }
            Violation::RotSnapshot { rot, .. } => rot.index,
            Violation::Divergence { second, .. } => second.index,
            Violation::Unfinished(s) | Violation::SlowOperation(s) => s.op.index,
        }
    }
}

/// "key=value" of what a read returned.
fn kv(key: &str, returned: &Option<OpRef>) -> String {
    match returned {
        None => format!("{key}=∅"),
        Some(w) => format!("{key}={}", w.value_for(key)),
    }
}

fn put_value(w: &OpRef) -> String {
    w.value_text()
}

/// "; w41 ⇝ w43: <path>", or nothing when the read returned ∅ (nothing to
/// overwrite).
fn overwrite_clause(returned: &Option<OpRef>, newer: &OpRef, path: &Option<Path>) -> String {
    match (returned, path) {
        (Some(r), Some(p)) => format!("; {} ⇝ {}: {p}", put_value(r), put_value(newer)),
        _ => String::new(),
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::ThinAirRead { read, key, value } => write!(
                f,
                "{} read {key}={value} ({}), a value no write of {key} wrote (thin-air read)",
                read.who(),
                read.at()
            ),
            Violation::CyclicCausalOrder { cycle, ops_involved } => write!(
                f,
                "session order and reads-from form a cycle ({ops_involved} ops involved), so no operation on it can \
                 causally precede the others: {cycle}"
            ),
            Violation::WriteCoRead { read, key, returned, newer, overwritten, seen } => write!(
                f,
                "{} read {key}={} ({}) although {key}={} ({} by {}) overwrote it in the read's causal past: {} ⇝ {} \
                 ⇝ read. {} ⇝ {}: {overwritten}. {} ⇝ read: {seen}",
                read.who(),
                put_value(returned),
                read.at(),
                put_value(newer),
                newer.at(),
                newer.who(),
                put_value(returned),
                put_value(newer),
                put_value(returned),
                put_value(newer),
                put_value(newer),
            ),
            Violation::WriteCoInitRead { read, key, write, seen } => write!(
                f,
                "{} read {key}=∅ ({}) although the write {key}={} ({} by {}) is in its causal past: {} ⇝ read: {seen}",
                read.who(),
                read.at(),
                put_value(write),
                write.at(),
                write.who(),
                put_value(write),
            ),
            Violation::CyclicArbitration { cycle, ops_involved } => write!(
                f,
                "no single arbitration order of writes explains the reads ({ops_involved} ops involved): every \
                 read must return the last write of its causal past, but these writes would have to precede \
                 themselves: {cycle}"
            ),
            Violation::ReadYourWrites { read, key, returned, own_write, overwritten } => write!(
                f,
                "{} read {} ({}) after writing {key}={} itself ({}){}",
                read.who(),
                kv(key, returned),
                read.at(),
                put_value(own_write),
                own_write.at(),
                overwrite_clause(returned, own_write, overwritten)
            ),
            Violation::MonotonicReads { read, key, returned, earlier_read, earlier_value, overwritten } => write!(
                f,
                "{} read {} ({}) after it had read the newer {key}={} ({}){}",
                read.who(),
                kv(key, returned),
                read.at(),
                put_value(earlier_value),
                earlier_read.at(),
                overwrite_clause(returned, earlier_value, overwritten)
            ),
            Violation::MonotonicWrites { read, key, returned, earlier_read, seen_write, older_write, overwritten } => {
                write!(
                    f,
                    "{} read {} ({}) although it had read {} ({}), which {} wrote after writing {key}={} ({}){}",
                    read.who(),
                    kv(key, returned),
                    read.at(),
                    seen_write.action.written(),
                    earlier_read.at(),
                    seen_write.who(),
                    put_value(older_write),
                    older_write.at(),
                    overwrite_clause(returned, older_write, overwritten)
                )
            }
            Violation::WritesFollowReads {
                read,
                key,
                returned,
                earlier_read,
                seen_write,
                writer_read,
                writer_saw,
                overwritten,
            } => write!(
                f,
                "{} read {} ({}) although it had read {} ({}), which {} wrote after reading {key}={} ({}){}",
                read.who(),
                kv(key, returned),
                read.at(),
                seen_write.action.written(),
                earlier_read.at(),
                seen_write.who(),
                put_value(writer_saw),
                writer_read.at(),
                overwrite_clause(returned, writer_saw, overwritten)
            ),
            Violation::RotSnapshot { rot, key, returned, other_key, other, newer, overwritten, seen } => {
                write!(
                    f,
                    "{} ran a read-only transaction ({}) that is not a causal snapshot: it read {} together with \
                     {other_key}={}, but {key}={} ({} by {}) ",
                    rot.who(),
                    rot.at(),
                    kv(key, returned),
                    put_value(other),
                    put_value(newer),
                    newer.at(),
                    newer.who(),
                )?;
                match returned {
                    Some(r) => write!(f, "overwrote {} and ", put_value(r))?,
                    None => write!(f, "was written and ")?,
                }
                write!(
                    f,
                    "precedes {other_key}={}{}; {} ⇝ {}: {seen}",
                    put_value(other),
                    overwrite_clause(returned, newer, overwritten),
                    put_value(newer),
                    put_value(other)
                )
            }
            Violation::FracturedRead { read, key, returned, wot, via, overwritten } => {
                write!(f, "{} read {} ({}) ", read.who(), kv(key, returned), read.at())?;
                if via.index == read.index {
                    write!(f, "in a transaction that read another key from ")?;
                } else if via.index == wot.index {
                    write!(f, "after writing ")?;
                } else {
                    write!(f, "after {} ({}) had read from ", via.action, via.at())?;
                }
                write!(
                    f,
                    "the transaction {} ({} by {}), which also wrote {key}: it saw that transaction only in part \
                     (fractured read){}",
                    wot.action,
                    wot.at(),
                    wot.who(),
                    overwrite_clause(returned, wot, overwritten)
                )
            }
            Violation::Divergence { key, first, first_value, second, second_value, quiescent_after_us } => write!(
                f,
                "after quiescence ({}) reads of {key} disagree: {} read {key}={first_value} ({}) but {} read \
                 {key}={second_value} ({})",
                crate::explain::ms(*quiescent_after_us),
                first.who(),
                first.at(),
                second.who(),
                second.at()
            ),
            Violation::NotEventuallyVisible {
                key,
                read,
                returned,
                write,
                overwritten,
                quiescent_after_us,
                same_dc,
            } => {
                write!(
                    f,
                    "after quiescence ({}) {} read {} ({}) although the acknowledged write {key}={} ({} by {}) \
                     overwrote it: that write never became visible{}",
                    crate::explain::ms(*quiescent_after_us),
                    read.who(),
                    kv(key, returned),
                    read.at(),
                    put_value(write),
                    write.at(),
                    write.who(),
                    overwrite_clause(returned, write, overwritten)
                )?;
                match (same_dc, returned) {
                    (Some(dc), Some(r)) => write!(
                        f,
                        "; both were written in DC {dc}, and {} was acknowledged ({}) before {} was invoked, so \
                         that DC's write order puts it later",
                        put_value(r),
                        r.at(),
                        put_value(write)
                    ),
                    _ => Ok(()),
                }
            }
            Violation::Unfinished(s) | Violation::SlowOperation(s) => write!(f, "{s}"),
        }
    }
}

/// How an operation that missed its deadline ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    Completed,
    TimedOut,
    Pending,
}

/// A violation as op indices, rendered later.
#[derive(Clone, Debug)]
pub enum Raw {
    ThinAir {
        read: ReadEv,
    },
    CyclicCo {
        write: u32,
        reader: u32,
        ops_involved: usize,
        members: Vec<u32>,
    },
    WriteCoRead {
        read: ReadEv,
        newer: u32,
    },
    WriteCoInitRead {
        read: ReadEv,
        write: u32,
    },
    CyclicCf {
        from: u32,
        to: u32,
        read: u32,
        members: Vec<u32>,
    },
    Ryw {
        read: ReadEv,
        own: u32,
    },
    Mr {
        read: ReadEv,
        earlier: u32,
        value: u32,
    },
    Mw {
        read: ReadEv,
        earlier: u32,
        seen: u32,
        older: u32,
    },
    Wfr {
        read: ReadEv,
        earlier: u32,
        seen: u32,
        writer_read: u32,
        writer_saw: u32,
    },
    Rot {
        y: ReadEv,
        x: ReadEv,
        newer: u32,
    },
    Fractured {
        read: ReadEv,
        wot: u32,
        via: u32,
    },
    Divergence {
        first: ReadEv,
        second: ReadEv,
        t: u64,
    },
    NotVisible {
        read: ReadEv,
        write: u32,
        t: u64,
        /// The write follows the returned one in their DC's write order
        /// (and not causally).
        dc_order: bool,
    },
    /// A liveness violation: op `op` missed `deadline_us` (None: no spec).
    Stall {
        op: u32,
        deadline_us: Option<u64>,
        ending: Ending,
        faults: Vec<String>,
    },
}

impl Raw {
    pub fn render(&self, ex: &mut Explainer<'_, '_>) -> Violation {
        use crate::model::NONE;
        match self {
            Raw::ThinAir { read } => {
                Violation::ThinAirRead { read: ex.op(read.op), key: ex.key(read.key), value: ex.returned(read) }
            }
            Raw::CyclicCo { write, reader, ops_involved, members } => {
                let set: rustc_hash::FxHashSet<u32> = members.iter().copied().collect();
                let mut cycle = ex
                    .search(*reader, *write, |p| set.contains(&p), true, false)
                    .unwrap_or_else(|| Path { start: ex.op(*reader), hops: Vec::new() });
                // Close the loop: write → reader → … → write.
                let key = ex.m.reads_of(*reader).iter().find(|r| r.source == Source::Write(*write)).map(|r| r.key);
                let link = crate::explain::Link::ReadBy { key: key.map(|k| ex.key(k)).unwrap_or_default() };
                let start = ex.op(*write);
                let mut hops = vec![(link, cycle.start.clone())];
                hops.append(&mut cycle.hops);
                Violation::CyclicCausalOrder { cycle: Path { start, hops }, ops_involved: *ops_involved }
            }
            Raw::WriteCoRead { read, newer } => {
                let Source::Write(w1) = read.source else { unreachable!("write-co-read reads a write") };
                Violation::WriteCoRead {
                    read: ex.op(read.op),
                    key: ex.key(read.key),
                    returned: ex.op(w1),
                    newer: ex.op(*newer),
                    overwritten: ex.co_path(w1, *newer),
                    seen: ex.co_path(*newer, read.op),
                }
            }
            Raw::WriteCoInitRead { read, write } => Violation::WriteCoInitRead {
                read: ex.op(read.op),
                key: ex.key(read.key),
                write: ex.op(*write),
                seen: ex.co_path(*write, read.op),
            },
            Raw::CyclicCf { from, to, read, members } => {
                let set: rustc_hash::FxHashSet<u32> = members.iter().copied().collect();
                let back = ex.search(*to, *from, |p| set.contains(&p), false, true);
                let start = ex.op(*from);
                let mut hops = vec![(crate::explain::Link::Arbitration { read: *read as usize }, ex.op(*to))];
                if let Some(mut p) = back {
                    hops.append(&mut p.hops);
                }
                Violation::CyclicArbitration { cycle: Path { start, hops }, ops_involved: members.len() }
            }
            Raw::Ryw { read, own } => Violation::ReadYourWrites {
                read: ex.op(read.op),
                key: ex.key(read.key),
                returned: ex.source(read.source),
                own_write: ex.op(*own),
                overwritten: ex.overwritten(read.source, *own),
            },
            Raw::Mr { read, earlier, value } => Violation::MonotonicReads {
                read: ex.op(read.op),
                key: ex.key(read.key),
                returned: ex.source(read.source),
                earlier_read: ex.op(*earlier),
                earlier_value: ex.op(*value),
                overwritten: ex.overwritten(read.source, *value),
            },
            Raw::Mw { read, earlier, seen, older } => Violation::MonotonicWrites {
                read: ex.op(read.op),
                key: ex.key(read.key),
                returned: ex.source(read.source),
                earlier_read: ex.op(*earlier),
                seen_write: ex.op(*seen),
                older_write: ex.op(*older),
                overwritten: ex.overwritten(read.source, *older),
            },
            Raw::Wfr { read, earlier, seen, writer_read, writer_saw } => Violation::WritesFollowReads {
                read: ex.op(read.op),
                key: ex.key(read.key),
                returned: ex.source(read.source),
                earlier_read: ex.op(*earlier),
                seen_write: ex.op(*seen),
                writer_read: ex.op(*writer_read),
                writer_saw: ex.op(*writer_saw),
                overwritten: ex.overwritten(read.source, *writer_saw),
            },
            Raw::Rot { y, x, newer } => {
                let Source::Write(wx) = x.source else {
                    unreachable!("the other read of a snapshot violation is a write")
                };
                Violation::RotSnapshot {
                    rot: ex.op(y.op),
                    key: ex.key(y.key),
                    returned: ex.source(y.source),
                    other_key: ex.key(x.key),
                    other: ex.op(wx),
                    newer: ex.op(*newer),
                    overwritten: ex.overwritten(y.source, *newer),
                    seen: ex.co_path(*newer, wx),
                }
            }
            Raw::Fractured { read, wot, via } => Violation::FracturedRead {
                read: ex.op(read.op),
                key: ex.key(read.key),
                returned: ex.source(read.source),
                wot: ex.op(*wot),
                via: ex.op(*via),
                overwritten: ex.overwritten(read.source, *wot),
            },
            Raw::Divergence { first, second, t } => Violation::Divergence {
                key: ex.key(first.key),
                first: ex.op(first.op),
                first_value: ex.returned(first),
                second: ex.op(second.op),
                second_value: ex.returned(second),
                quiescent_after_us: *t,
            },
            Raw::NotVisible { read, write, t, dc_order } => {
                let overwritten = match read.source {
                    Source::Write(w) if !dc_order && ex.c.rank[w as usize] != NONE => Some(ex.co_path(w, *write)),
                    _ => None,
                };
                let same_dc = dc_order.then(|| ex.m.history.ops[*write as usize].dc.0.to_string());
                Violation::NotEventuallyVisible {
                    key: ex.key(read.key),
                    read: ex.op(read.op),
                    returned: ex.source(read.source),
                    write: ex.op(*write),
                    overwritten,
                    quiescent_after_us: *t,
                    same_dc,
                }
            }
            Raw::Stall { op, deadline_us, ending, faults } => {
                let r = &ex.m.history.ops[*op as usize];
                let mut keys: Vec<String> = r.op.reads().into_iter().map(|k| crate::explain::key_name(k)).collect();
                for (k, _) in r.op.writes() {
                    let k = crate::explain::key_name(k);
                    if !keys.contains(&k) {
                        keys.push(k);
                    }
                }
                let (previous, remote) = ex.m.session_context(*op, 3);
                let stall = Stall {
                    op: ex.op(*op),
                    op_kind: r.op.kind().name().into(),
                    keys,
                    deadline_us: *deadline_us,
                    ended_us: r.complete_us,
                    ending: match ending {
                        Ending::Completed => "completed",
                        Ending::TimedOut => "timed out",
                        Ending::Pending => "pending",
                    }
                    .into(),
                    previous: previous.map(|p| ex.op(p)),
                    remote_dependencies: remote.into_iter().map(|w| ex.op(w)).collect(),
                    faults: faults.clone(),
                };
                match ending {
                    Ending::Completed => Violation::SlowOperation(stall),
                    _ => Violation::Unfinished(stall),
                }
            }
        }
    }
}

/// Counts every violation; keeps the first `max` of each kind.
pub struct Collector {
    pub max: usize,
    pub counts: BTreeMap<Kind, usize>,
    pub raw: Vec<Raw>,
}

impl Collector {
    pub fn new(max: usize) -> Self {
        Collector { max, counts: BTreeMap::new(), raw: Vec::new() }
    }

    pub fn add(&mut self, kind: Kind, raw: impl FnOnce() -> Raw) {
        let c = self.counts.entry(kind).or_default();
        *c += 1;
        if *c <= self.max {
            self.raw.push(raw());
        }
    }

    /// Count a violation that will not be shown (the kind is full).
    pub fn tally(&mut self, kind: Kind) {
        *self.counts.entry(kind).or_default() += 1;
    }

    /// Whether the next violation of `kind` will be kept (not just counted).
    pub fn wants(&self, kind: Kind) -> bool {
        self.count(kind) < self.max
    }

    pub fn count(&self, kind: Kind) -> usize {
        self.counts.get(&kind).copied().unwrap_or(0)
    }
}
