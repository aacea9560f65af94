//! Write-only transactions must be atomically visible: no fractured reads.
//!
//! A `Wot` `T` (or a read-write `Txn`, through its writes) writes several
//! keys as one event. A reader that has observed
//! `T` — it read one of `T`'s keys from `T` in the same read-only
//! transaction, or earlier in its session, or it wrote `T` itself — and then
//! reads another key `y` of `T` must see `T`'s write of `y` or one that
//! supersedes it. Returning ∅, or a write `v` of `y` with `v ⇝ T`, shows `y`
//! before `T` and the other key after it: a *fractured read* (Bailis et al.'s
//! Read Atomic isolation; the guarantee of Eiger's write-only transactions,
//! Lloyd §3.5). A write of `y` concurrent with `T` is allowed: it may win
//! last-writer-wins over `T`'s.
//!
//! Within one session this is a special case of causal consistency (`T` is in
//! the read's causal past), so a causal history passes it; inside one
//! read-only transaction it is not, because the snapshot check
//! ([`crate::rot`]) asks for a write *strictly* between the two reads. It is
//! reported on its own because protocols with non-atomic multi-key writes
//! (the eventual baseline's) fail exactly here.
//!
//! State per session: for each key, the write-only transactions writing it
//! that the session has observed, kept as an antichain (a transaction
//! causally before another observed one is dropped: any read it would flag,
//! the later one flags too). Cost: O(k²) per k-key transaction plus
//! O(antichain) per read.

use crate::clock::Clocks;
use crate::model::{Model, Source};
use crate::session::overwritten;
use crate::violation::{Collector, Kind, Raw};
use rustc_hash::FxHashMap;

/// Check every session's reads; run once the clocks are computed.
pub fn check_fractured(m: &Model<'_>, c: &Clocks, out: &mut Collector) {
    let is_txn = |w: u32| m.keys_written(w).len() > 1;
    if !(0..m.n_ops() as u32).any(is_txn) {
        return;
    }
    let overwritten = |v: Source, t: u32| overwritten(m, c, v, t);
    for s in &m.sessions[..m.real_sessions] {
        // key → (transaction, the op through which the session observed it)
        let mut observed: FxHashMap<u32, Vec<(u32, u32)>> = FxHashMap::default();
        for &op in &s.ops {
            let reads = m.reads_of(op);
            for y in reads {
                // Inside the transaction: another key read from `t`.
                let mut inside = false;
                for x in reads {
                    if let Source::Write(t) = x.source
                        && x.key != y.key
                        && is_txn(t)
                        && m.writes_key(t, y.key)
                        && overwritten(y.source, t)
                    {
                        inside = true;
                        out.add(Kind::FracturedRead, || Raw::Fractured { read: *y, wot: t, via: op });
                        break;
                    }
                }
                // Earlier in the session (one violation per read at most).
                if !inside
                    && let Some(seen) = observed.get(&y.key)
                    && let Some(&(t, via)) = seen.iter().find(|&&(t, _)| overwritten(y.source, t))
                {
                    out.add(Kind::FracturedRead, || Raw::Fractured { read: *y, wot: t, via });
                }
            }
            // What this op lets the session observe from now on.
            let mut note = |t: u32| {
                for &k in m.keys_written(t) {
                    let seen = observed.entry(k).or_default();
                    if seen.iter().any(|&(u, _)| u == t || c.co(m, t, u)) {
                        continue;
                    }
                    seen.retain(|&(u, _)| !c.co(m, u, t));
                    seen.push((t, op));
                }
            };
            if is_txn(op) && m.acked[op as usize] {
                note(op);
            }
            for x in reads {
                if let Source::Write(t) = x.source
                    && is_txn(t)
                {
                    note(t);
                }
            }
        }
    }
}
