//! Session guarantees (Terry, Demers, Petersen, Spreitzer, Theimer, Welch,
//! "Session guarantees for weakly consistent replicated data", PDIS 1994),
//! per key, stated over the history so that each can be checked on its own.
//!
//! Let `r` be a read of key `x` by session `s` that returned `v` (a write, or
//! ∅ for the initial state). Say `v` is *overwritten by* a write `w` of `x`
//! when `v = ∅`, or `v ≠ w` and `v co w` (any arbitration consistent with
//! causality puts `w` after `v`, so a replica that applied `w` cannot return
//! `v`). Only operations of `s` strictly before `r` count ("earlier"):
//!
//! - **Read-your-writes**: `r` must not return a value overwritten by a write
//!   of `x` that `s` itself made earlier.
//! - **Monotonic reads**: `r` must not return a value overwritten by a write
//!   of `x` that an earlier read of `s` returned.
//! - **Monotonic writes**: if an earlier read of `s` returned a write `w'` of
//!   another session `s'`, `r` must not return a value overwritten by a write
//!   of `x` that `s'` made before `w'` (a replica showing `w'` must have
//!   applied the writes `s'` made before it).
//! - **Writes-follow-reads**: if an earlier read of `s` returned a write `w'`
//!   of another session `s'`, `r` must not return a value overwritten by a
//!   write of `x` that `s'` had read before it wrote `w'`.
//!
//! Each is a special case of causal consistency's WriteCORead (the overwriting
//! write is in `r`'s causal past by one specific short path), so a causal
//! history passes all four; they are reported separately because weaker
//! protocols (NuKV's per-operation levels) promise them one by one. Only
//! acknowledged operations count as "earlier": a failed put's session never
//! learned whether it happened. Within a read-only transaction the reads are
//! unordered, so they are judged against the operations before it, and the
//! snapshot check ([`crate::rot`]) covers the transaction itself.
//!
//! **Per-operation levels.** When operations of the history name their
//! levels ([`causeway_core::Levels`], NuKV's per-key Defs 4–7), a read is
//! held to read-your-writes only if its level asks for it, and to monotonic
//! reads likewise (against everything its session read of the key before,
//! at any level, as Def 4's `ClientReads` is); and "overwritten" is the
//! order the writes' own levels guarantee ([`crate::guaranteed`]) instead
//! of causality, which such a protocol does not follow. The last two
//! checks above, which follow another session's writes across keys, are
//! left out then: per-key write levels do not promise them.
//!
//! Cost: O(log) per read for read-your-writes and monotonic reads, and
//! O(S') for the other two, S' being the number of sessions whose writes
//! the reading session has seen.
//!
//! State per session: for each key, the co-maximal writes its reads returned
//! so far (an antichain, almost always of size one), kept as a history of
//! snapshots by session position so another session can ask "what had `s'`
//! read of `x` before position p"; and, per other session, the latest
//! position of a write of it this session has read.

use crate::clock::Clocks;
use crate::guaranteed::Guaranteed;
use crate::model::{Model, ReadEv, Source};
use crate::violation::{Collector, Kind, Raw};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// (session, key) → snapshots by session position of the co-maximal writes
/// of the key the session had read.
type Frontiers = FxHashMap<(u32, u32), Vec<(u32, Vec<Seen>)>>;

/// A write a session read, and the read that returned it.
#[derive(Clone, Copy, Debug)]
struct Seen {
    write: u32,
    read: u32,
}

pub struct SessionCheck {
    frontier: Frontiers,
    /// session → (other session → latest write of it read: (pos of that write, Seen)).
    seen_from: FxHashMap<u32, BTreeMap<u32, (u32, Seen)>>,
    /// The order per-operation write levels guarantee, when operations
    /// named levels.
    levels: Option<Guaranteed>,
}

/// `v` is overwritten by write `w`: `v = ∅`, or `v ⇝ w` (so `v ≠ w`).
pub(crate) fn overwritten(m: &Model<'_>, c: &Clocks, v: Source, w: u32) -> bool {
    match v {
        Source::Init => true,
        Source::Write(v) => c.co(m, v, w),
        Source::ThinAir => false,
    }
}

impl SessionCheck {
    pub fn new(m: &Model<'_>) -> SessionCheck {
        SessionCheck { frontier: Default::default(), seen_from: Default::default(), levels: Guaranteed::of(m) }
    }

    /// Write `v` is ordered before write `w`: by causality, or by the
    /// levels when operations named them.
    fn before(&self, m: &Model<'_>, c: &Clocks, v: u32, w: u32) -> bool {
        Self::ordered(&self.levels, m, c, v, w)
    }

    fn ordered(levels: &Option<Guaranteed>, m: &Model<'_>, c: &Clocks, v: u32, w: u32) -> bool {
        match levels {
            Some(g) => g.before(m, v, w),
            None => c.co(m, v, w),
        }
    }

    /// `v` is overwritten by write `w` ([`overwritten`], in the order that applies).
    fn overwritten(&self, m: &Model<'_>, c: &Clocks, v: Source, w: u32) -> bool {
        match v {
            Source::Init => true,
            Source::Write(v) => self.before(m, c, v, w),
            Source::ThinAir => false,
        }
    }

    pub fn visit(&mut self, m: &Model<'_>, c: &Clocks, op: u32, out: &mut Collector) {
        let s = m.session_of[op as usize];
        if m.sessions[s as usize].phantom {
            return;
        }
        let p = m.pos[op as usize];
        let rec = &m.history.ops[op as usize];
        let (ryw, mr) = match (&rec.op, rec.levels) {
            (causeway_core::Op::Get { .. }, Some(l)) => (l.read.read_your_write(), l.read.monotonic_read()),
            _ => (true, true),
        };
        for rd in m.reads_of(op) {
            if rd.source == Source::ThinAir {
                continue;
            }
            if ryw {
                self.read_your_writes(m, c, s, p, rd, out);
            }
            if mr {
                self.monotonic_reads(m, c, s, rd, out);
            }
            if self.levels.is_none() {
                self.writes_of_seen_sessions(m, c, s, rd, out);
            }
        }
        // Then record what this op read, for the operations after it.
        for rd in m.reads_of(op) {
            let Source::Write(w) = rd.source else { continue };
            if c.vc(w).is_none() || c.is_dropped(op, w) {
                continue; // cut off by a cycle of co: cannot be ordered
            }
            let seen = Seen { write: w, read: op };
            let snaps = self.frontier.entry((s, rd.key)).or_default();
            let cur: &[Seen] = snaps.last().map(|(_, a)| a.as_slice()).unwrap_or(&[]);
            let levels = &self.levels;
            if !cur.iter().any(|a| a.write == w || Self::ordered(levels, m, c, w, a.write)) {
                let mut next: Vec<Seen> =
                    cur.iter().copied().filter(|a| !Self::ordered(levels, m, c, a.write, w)).collect();
                next.push(seen);
                snaps.push((p, next));
            }
            let ws = m.session_of[w as usize];
            if ws != s && !m.sessions[ws as usize].phantom {
                let wp = m.pos[w as usize];
                let e = self.seen_from.entry(s).or_default().entry(ws).or_insert((0, seen));
                if wp > e.0 {
                    *e = (wp, seen);
                }
            }
        }
    }

    fn read_your_writes(&self, m: &Model<'_>, c: &Clocks, s: u32, p: u32, rd: &ReadEv, out: &mut Collector) {
        if let Some(own) = m.last_write(s, rd.key, p - 1)
            && Source::Write(own) != rd.source
            && self.overwritten(m, c, rd.source, own)
        {
            out.add(Kind::ReadYourWrites, || Raw::Ryw { read: *rd, own });
        }
    }

    fn monotonic_reads(&self, m: &Model<'_>, c: &Clocks, s: u32, rd: &ReadEv, out: &mut Collector) {
        let Some(snaps) = self.frontier.get(&(s, rd.key)) else { return };
        let Some((_, cur)) = snaps.last() else { return };
        if let Some(a) =
            cur.iter().find(|a| Source::Write(a.write) != rd.source && self.overwritten(m, c, rd.source, a.write))
        {
            out.add(Kind::MonotonicReads, || Raw::Mr { read: *rd, earlier: a.read, value: a.write });
        }
    }

    fn writes_of_seen_sessions(&self, m: &Model<'_>, c: &Clocks, s: u32, rd: &ReadEv, out: &mut Collector) {
        let Some(seen_from) = self.seen_from.get(&s) else { return };
        let mut mw = false;
        let mut wfr = false;
        for (&s2, &(wp, seen)) in seen_from {
            // Monotonic writes: s2's last write of the key before the write we saw.
            if !mw
                && let Some(older) = m.last_write(s2, rd.key, wp - 1)
                && Source::Write(older) != rd.source
                && overwritten(m, c, rd.source, older)
            {
                mw = true;
                out.add(Kind::MonotonicWrites, || Raw::Mw { read: *rd, earlier: seen.read, seen: seen.write, older });
            }
            // Writes-follow-reads: what s2 had read of the key before that write.
            if !wfr && let Some(snaps) = self.frontier.get(&(s2, rd.key)) {
                let n = snaps.partition_point(|(q, _)| *q < wp);
                if n > 0
                    && let Some(a) = snaps[n - 1]
                        .1
                        .iter()
                        .find(|a| Source::Write(a.write) != rd.source && overwritten(m, c, rd.source, a.write))
                {
                    wfr = true;
                    out.add(Kind::WritesFollowReads, || Raw::Wfr {
                        read: *rd,
                        earlier: seen.read,
                        seen: seen.write,
                        writer_read: a.read,
                        writer_saw: a.write,
                    });
                }
            }
            if mw && wfr {
                break;
            }
        }
    }
}
