//! The order among writes that per-operation write levels guarantee.
//!
//! Under NuKV's per-operation levels (Roohitavaf, *Consistency for
//! Distributed Data Stores*, §4.2, Defs 6–7, Thms 3–4) a write is ordered
//! after (wins over) exactly what its level asks: a monotonic write after
//! its session's earlier acknowledged writes, a write-follows-reads write
//! after the values its session read before it, and both by transitivity
//! (the HLC timestamps the paper uses make the order transitive across
//! keys). A write at eventual level is ordered after nothing. Causality
//! alone orders nothing here: a session that writes `x = 1` and then
//! `x = 2` at eventual level may see `x = 1` win.
//!
//! `before(v, w)` answers whether this guaranteed order puts write `v`
//! before write `w`, which is what "overwritten" must mean when the session
//! checks ([`crate::session`]) judge a history whose operations named
//! levels: only a value the guaranteed order puts below one the session
//! must see may not be returned. The relation is an under-approximation of
//! any arbitration the protocol may pick, so the checks stay sound (a
//! reported violation is one under every arbitration the levels allow).
//!
//! An operation that names no level counts as the strongest (M/M), the
//! protocol's default.
//!
//! Cost: a depth-first search backwards from `w` through writes and reads
//! invoked after `v` (every edge goes forward in real time: a write's
//! predecessors were invoked before it, and a value read was invoked
//! before the read returned), so a query costs the operations in that
//! window, and nothing when `v` is newer than `w`.

use crate::model::{Model, Source};
use causeway_core::{ClientId, Op, WriteLevel};
use rustc_hash::FxHashMap;
use std::cell::RefCell;

/// One client's operations the order is built from, in session order.
#[derive(Default)]
struct Client {
    /// Acknowledged writes: (complete_us, op).
    writes: Vec<(u64, u32)>,
    /// Values read from writes: (complete_us of the read, write op).
    reads: Vec<(u64, u32)>,
}

pub struct Guaranteed {
    clients: FxHashMap<ClientId, Client>,
    /// Scratch for the searches: the query number a write was last
    /// visited in.
    seen: RefCell<(u32, Vec<u32>)>,
}

impl Guaranteed {
    /// The order of `m`, when any of its operations named levels.
    pub fn of(m: &Model<'_>) -> Option<Guaranteed> {
        let ops = &m.history.ops;
        if !ops.iter().any(|r| r.levels.is_some()) {
            return None;
        }
        let mut clients: FxHashMap<ClientId, Client> = FxHashMap::default();
        let mut order: Vec<u32> = (0..ops.len() as u32).filter(|&i| m.is_node[i as usize]).collect();
        order.sort_by_key(|&i| (ops[i as usize].client, ops[i as usize].invoke_us, i));
        for i in order {
            let r = &ops[i as usize];
            let c = clients.entry(r.client).or_default();
            if m.acked[i as usize] && m.is_write(i) {
                c.writes.push((r.complete_us, i));
            }
            for rd in m.reads_of(i) {
                if let Source::Write(w) = rd.source {
                    c.reads.push((r.complete_us, w));
                }
            }
        }
        Some(Guaranteed { clients, seen: RefCell::new((0, vec![0; ops.len()])) })
    }

    /// The write level op `i` ran at: its own, or the strongest.
    fn level(m: &Model<'_>, i: u32) -> WriteLevel {
        let r = &m.history.ops[i as usize];
        match (&r.op, r.levels) {
            (Op::Put { .. }, Some(l)) => l.write,
            _ => WriteLevel::MonotonicWriteFollowsReads,
        }
    }

    /// Whether the levels order write `v` before write `w` (`v ≠ w`).
    pub fn before(&self, m: &Model<'_>, v: u32, w: u32) -> bool {
        if v == w {
            return false;
        }
        let ops = &m.history.ops;
        let since_us = ops[v as usize].invoke_us;
        let mut seen = self.seen.borrow_mut();
        let (query, marks) = &mut *seen;
        *query += 1;
        let q = *query;
        let mut stack = vec![w];
        marks[w as usize] = q;
        while let Some(u) = stack.pop() {
            let ru = &ops[u as usize];
            let Some(c) = self.clients.get(&ru.client) else { continue };
            let level = Self::level(m, u);
            // Predecessors completed before `u` was invoked; the newest first,
            // so the walk stops at the first one too old to lead to `v`.
            let mut visit = |list: &[(u64, u32)], stack: &mut Vec<u32>| -> bool {
                let n = list.partition_point(|&(done_us, _)| done_us <= ru.invoke_us);
                for &(done_us, x) in list[..n].iter().rev() {
                    if done_us < since_us {
                        break; // `x` was invoked before `v`: no path from `v`
                    }
                    if x == v {
                        return true;
                    }
                    if marks[x as usize] != q {
                        marks[x as usize] = q;
                        stack.push(x);
                    }
                }
                false
            };
            if level.monotonic_write() && visit(&c.writes, &mut stack) {
                return true;
            }
            if level.write_follows_reads() && visit(&c.reads, &mut stack) {
                return true;
            }
        }
        false
    }
}
