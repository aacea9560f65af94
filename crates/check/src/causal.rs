//! Causal consistency (CC) of single reads, after Bouajjani, Enea,
//! Guerraoui and Hamza, "On verifying causal consistency" (POPL 2017): a
//! differentiated history (every write writes a unique value) is CC iff it
//! contains none of the bad patterns ThinAirRead ([`crate::model`]),
//! CyclicCO ([`crate::cycles`]), WriteCOInitRead and WriteCORead (here).
//! The paper's further patterns WriteHBInitRead and CyclicHB characterise
//! causal memory (CM), which no Causeway protocol promises, so they are not
//! checked; CyclicCF (causal convergence) is [`crate::arbitration`].
//!
//! - **WriteCORead**: a read `r` of `x` returns `w1` although another write
//!   `w2` of `x` has `w1 co w2 co r`: it read a value overwritten in its own
//!   causal past.
//! - **WriteCOInitRead**: `r` returns the initial state although some write of
//!   `x` is co-before `r`.
//!
//! The causal past of a `Get` is its clock. A `Rot` is one node of co, but
//! for CC each of its reads is judged like a `Get` at that point of the
//! session: against the session's past plus the write that read returned
//! (the other keys' writes are the snapshot check's business, [`crate::rot`]).
//!
//! Per read, only the last write of `x` by each session inside the past can
//! overwrite `w1` (a session's earlier write of `x` is co-before its later
//! one), so a read costs O(writers(x)·log) plus one clock lookup each.
//!
//! A second scan collects the arbitration constraints of causal+
//! ([`crate::arbitration`]): every other write of `x` that the operation
//! observed must be arbitrated before `w1`. For a `Get` that is its causal
//! past; for a `Rot` or `Txn` it is the whole snapshot (the op's clock
//! without the op's own writes), as in transactional causal+ (Cure,
//! Contrarian) and dbcop's causal level.

use crate::clock::Clocks;
use crate::model::{Model, Source};
use crate::violation::{Collector, Kind, Raw};
use rustc_hash::FxHashMap;

#[derive(Default)]
pub struct CausalCheck {
    /// Arbitration edges `(w, w1)` (w before w1), with the first read that
    /// forces each.
    pub cf: FxHashMap<(u32, u32), u32>,
}

impl CausalCheck {
    /// `before`: the session predecessor's clock; `vc`: the op's own clock.
    pub fn visit(&mut self, m: &Model<'_>, c: &Clocks, op: u32, before: &[u32], vc: &[u32], out: &mut Collector) {
        for rd in m.reads_of(op) {
            let src_vc = match rd.source {
                Source::Write(w) => c.vc(w).filter(|_| !c.is_dropped(op, w)),
                _ => None,
            };
            let bound = |s: u32| {
                let b = before[s as usize];
                src_vc.map_or(b, |v| b.max(v[s as usize]))
            };
            match rd.source {
                Source::ThinAir => {}
                Source::Init => {
                    if let Some(w) = m.latest_writes(rd.key, bound).next() {
                        out.add(Kind::WriteCoInitRead, || Raw::WriteCoInitRead { read: *rd, write: w });
                    }
                }
                Source::Write(w1) => {
                    if let Some(w) = m.latest_writes(rd.key, bound).find(|&w| w != w1 && c.co(m, w1, w)) {
                        out.add(Kind::WriteCoRead, || Raw::WriteCoRead { read: *rd, newer: w });
                    }
                    // Arbitration: a read returns the last write of its key
                    // in what it observed. For a ROT that is its whole
                    // snapshot — the causal past of everything it returned —
                    // so its clock `vc`, not the per-key past used above —
                    // less the op itself: a `Txn` reads before it writes.
                    let own = m.session_of[op as usize];
                    let observed =
                        |s: u32| if s == own { vc[s as usize].min(m.pos[op as usize] - 1) } else { vc[s as usize] };
                    for w in m.latest_writes(rd.key, observed) {
                        if w != w1 && !c.co(m, w, w1) {
                            self.cf.entry((w, w1)).or_insert(op);
                        }
                    }
                }
            }
        }
    }
}
