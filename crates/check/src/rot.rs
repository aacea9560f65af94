//! Read-only transactions must read causal snapshots.
//!
//! A `Rot` returning `w_x` for `x` and `w_y` (or ∅) for `y` is not a causal
//! snapshot if some write `w_y'` of `y` overwrote `w_y` (`w_y co w_y'`, or
//! `w_y = ∅`) and precedes `w_x` (`w_y' co w_x`): the transaction shows `x` in
//! a state whose causal past already had a newer `y` — COPS's "never X0
//! together with Y1 when X0 ⇝ X1 ⇝ Y1". In the ACL example: reading the new
//! album together with the old public ACL that the album post followed.
//!
//! For each key `y` of the transaction, the past that matters is the join of
//! the clocks of the writes it returned for the *other* keys, so one scan of
//! the latest writes of `y` in that past (as in [`crate::causal`]) finds any
//! such `w_y'`. The session's own past is not part of this check: a
//! transaction read that misses the session's past is a causal violation of
//! the read itself and is reported by [`crate::causal`] and
//! [`crate::session`]. Cost: O(k·S + k·writers(y)·log) for a k-key transaction.

use crate::clock::Clocks;
use crate::model::{Model, Source};
use crate::violation::{Collector, Kind, Raw};

#[derive(Default)]
pub struct RotCheck;

impl RotCheck {
    pub fn visit(&mut self, m: &Model<'_>, c: &Clocks, op: u32, out: &mut Collector) {
        let reads = m.reads_of(op);
        if reads.len() < 2 {
            return;
        }
        // The clocks of the writes each key returned (None: ∅, thin air, or
        // cut off by a cycle).
        let vcs: Vec<Option<&[u32]>> = reads
            .iter()
            .map(|r| match r.source {
                Source::Write(w) if !c.is_dropped(op, w) => c.vc(w),
                _ => None,
            })
            .collect();
        if vcs.iter().all(|v| v.is_none()) {
            return;
        }
        // prefix[i] / suffix[i]: join of the clocks before / after key i.
        let dim = c.dim;
        let join = |acc: &mut Vec<u32>, v: Option<&[u32]>| {
            if let Some(v) = v {
                for (a, b) in acc.iter_mut().zip(v) {
                    *a = (*a).max(*b);
                }
            }
        };
        let k = reads.len();
        let mut prefix = vec![vec![0u32; dim]; k + 1];
        for i in 0..k {
            let mut next = prefix[i].clone();
            join(&mut next, vcs[i]);
            prefix[i + 1] = next;
        }
        let mut suffix = vec![0u32; dim];
        let mut others = vec![vec![0u32; dim]; k];
        for i in (0..k).rev() {
            let mut o = prefix[i].clone();
            for (a, b) in o.iter_mut().zip(&suffix) {
                *a = (*a).max(*b);
            }
            others[i] = o;
            join(&mut suffix, vcs[i]);
        }
        for (j, y) in reads.iter().enumerate() {
            if y.source == Source::ThinAir {
                continue;
            }
            let past = &others[j];
            // A session's last write of y in that past may be a write-only
            // transaction the ROT read another key from: it is not strictly
            // before that read, but the session's previous write of y is.
            let candidates = m.latest_writes(y.key, |s| past[s as usize]).flat_map(|w| {
                let read_elsewhere = reads.iter().enumerate().any(|(i, x)| i != j && x.source == Source::Write(w));
                let before = read_elsewhere
                    .then(|| m.last_write(m.session_of[w as usize], y.key, m.pos[w as usize] - 1))
                    .flatten();
                std::iter::once(w).chain(before)
            });
            let overwrites = |w: u32| match y.source {
                Source::Init => true,
                Source::Write(wy) => c.co(m, wy, w),
                Source::ThinAir => false,
            };
            let precedes_another = |w: u32| {
                reads
                    .iter()
                    .enumerate()
                    .any(|(i, x)| i != j && matches!(x.source, Source::Write(wx) if vcs[i].is_some() && c.co(m, w, wx)))
            };
            let newer = candidates.filter(|&w| overwrites(w)).find(|&w| precedes_another(w));
            if let Some(newer) = newer {
                // The other read whose write the newer y precedes.
                let x = reads
                    .iter()
                    .enumerate()
                    .find(|&(i, x)| {
                        i != j && matches!(x.source, Source::Write(wx) if vcs[i].is_some() && c.co(m, newer, wx))
                    })
                    .map(|(_, x)| *x);
                if let Some(x) = x {
                    out.add(Kind::RotSnapshot, || Raw::Rot { y: *y, x, newer });
                }
            }
        }
    }
}
