//! Convergence after quiescence, and eventual visibility.
//!
//! Given a quiescence time T (no write invoked at or after T, none still
//! outstanding at T), consider every read invoked at or after T:
//!
//! - **Convergence**: all reads of one key return the same value, in every DC
//!   (replicas that have received the same writes agree).
//! - **Eventual visibility**: that value is not overwritten by any
//!   acknowledged write of the key — ∅ when the key has an acknowledged write,
//!   or a write `v` with `v co w` for an acknowledged write `w`. Every
//!   acknowledged write must end up visible, or be superseded by a write
//!   arbitration put after it; a causally older value winning means `w` was
//!   lost.
//!
//! These are the only guarantees of eventual consistency, and the tail of
//! causal+'s. Cost: O(reads after T + writes · distinct final values).
//!
//! **At the eventual level** the arbitration order is not tied to causality:
//! last-writer-wins on skewed physical clocks may stamp a causally later
//! write below the write it overwrote, and then the older value wins
//! everywhere. Eventual consistency allows that (every replica agrees, and
//! the "lost" write was superseded by arbitration), so there only a read of
//! ∅ after an acknowledged write of the key shows a write that never became
//! visible; `v co w` is a loss only at the causal levels, whose arbitration
//! must extend the causal order.
//!
//! **A DC's own write order** (`CheckConfig::dc_write_order`, for a
//! protocol that linearizes each DC's writes, NuKV's Raft groups): a final
//! value `v` is also lost when an acknowledged write `w` of the key was made
//! in `v`'s DC and invoked after `v` completed. Inside one DC the writes
//! of a key form one linearizable sequence (one Raft log, whose leaders
//! stamp past every committed write), so `w` follows `v` in it and must win
//! wherever both arrive, at every level: two writes a session made in a
//! row, or one session's write after another's acknowledgement.

use crate::clock::Clocks;
use crate::model::{Model, ReadEv, Source};
use crate::violation::{Collector, Kind, Raw};
use std::collections::BTreeMap;

/// Run both checks; `Err` says why the premise does not hold (a write in
/// flight after T), in which case nothing is checked.
pub fn check_convergence(
    m: &Model<'_>,
    c: &Clocks,
    t: u64,
    causal_arbitration: bool,
    dc_order: bool,
    out: &mut Collector,
) -> Result<(), String> {
    let ops = &m.history.ops;
    if let Some((i, r)) =
        ops.iter().enumerate().find(|(_, r)| !r.op.writes().is_empty() && (r.invoke_us >= t || r.complete_us > t))
    {
        return Err(format!(
            "op #{i} (a {} by client {} invoked at {}) is in flight at or after the quiescence time {}",
            r.op.kind().name(),
            r.client,
            crate::explain::ms(r.invoke_us),
            crate::explain::ms(t)
        ));
    }
    let mut by_key: BTreeMap<u32, Vec<ReadEv>> = BTreeMap::new();
    for rd in &m.reads {
        if ops[rd.op as usize].invoke_us >= t && rd.source != Source::ThinAir && m.is_node[rd.op as usize] {
            by_key.entry(rd.key).or_default().push(*rd);
        }
    }
    if by_key.is_empty() {
        return Ok(());
    }
    let mut acked_writes: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for i in 0..m.n_ops() as u32 {
        for &k in m.keys_written(i) {
            if m.acked[i as usize] && by_key.contains_key(&k) {
                acked_writes.entry(k).or_default().push(i);
            }
        }
    }
    // Whether write `w` overwrote write `v`: causally (at the causal
    // levels), or by `v`'s DC's write order (`v` done there before `w`
    // began there: one log orders them).
    let causally = |v: u32, w: u32| causal_arbitration && c.co(m, v, w);
    let in_dc_order = |v: u32, w: u32| {
        let (earlier, later) = (&ops[v as usize], &ops[w as usize]);
        dc_order && earlier.dc == later.dc && earlier.complete_us < later.invoke_us
    };
    for (key, reads) in &by_key {
        let first = reads[0];
        if let Some(second) = reads.iter().find(|r| r.source != first.source) {
            out.add(Kind::Divergence, || Raw::Divergence { first, second: *second, t });
        }
        let mut distinct: Vec<ReadEv> = Vec::new();
        for r in reads {
            if !distinct.iter().any(|d| d.source == r.source) {
                distinct.push(*r);
            }
        }
        let writes = acked_writes.get(key).map(|v| v.as_slice()).unwrap_or(&[]);
        for read in distinct {
            let lost = writes.iter().copied().find_map(|w| match read.source {
                Source::Init => Some((w, false)),
                Source::Write(v) if causally(v, w) => Some((w, false)),
                Source::Write(v) if in_dc_order(v, w) => Some((w, true)),
                Source::Write(_) | Source::ThinAir => None,
            });
            if let Some((write, dc_order)) = lost {
                out.add(Kind::NotEventuallyVisible, || Raw::NotVisible { read, write, t, dc_order });
            }
        }
    }
    Ok(())
}
