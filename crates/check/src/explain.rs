//! Naming operations and showing causal paths, so that a violation reads as
//! a short story a person can check against the history.
//!
//! A violation names its operations as [`OpRef`]s (index into
//! `History::ops`, client, DC, invoke time, what it did) and its causal
//! claims as [`Path`]s: chains of operations linked by "then" (session order)
//! and "read by" (reads-from). Paths are found by a 0-1 breadth-first search
//! backwards from the later operation — session edges cost 0, reads-from and
//! arbitration edges cost 1 — so a path crosses as few sessions as possible;
//! runs of session order are shown as one step.

use crate::clock::Clocks;
use crate::model::{Model, NONE, Source};
pub use crate::names::{ValueName, key_name, value_name};
use causeway_core::{ClientId, DcId, Op, OpResult};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::VecDeque;
use std::fmt;

/// What an operation did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Action {
    Put {
        key: String,
        value: ValueName,
        acknowledged: bool,
    },
    Get {
        key: String,
        value: ValueName,
    },
    Rot {
        reads: Vec<(String, ValueName)>,
    },
    /// A write-only transaction.
    Wot {
        writes: Vec<(String, ValueName)>,
        acknowledged: bool,
    },
    /// A read-write transaction: what it read, then what it wrote.
    Txn {
        reads: Vec<(String, ValueName)>,
        writes: Vec<(String, ValueName)>,
    },
    /// An operation that failed and was not read from (returned nothing).
    Failed {
        what: String,
    },
}

impl Action {
    /// The value a put wrote ("w42"), or the whole action for other ops.
    pub fn value_text(&self) -> String {
        match self {
            Action::Put { value, .. } => value.to_string(),
            other => other.to_string(),
        }
    }

    /// "key=value" for a put, or the whole action for other ops.
    pub fn written(&self) -> String {
        match self {
            Action::Put { key, value, .. } => format!("{key}={value}"),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Put { key, value, acknowledged: true } => write!(f, "put {key}={value}"),
            Action::Put { key, value, acknowledged: false } => write!(f, "put {key}={value} (failed)"),
            Action::Get { key, value } => write!(f, "get {key}={value}"),
            Action::Rot { reads } => {
                f.write_str("rot ")?;
                pairs(f, reads)
            }
            Action::Txn { reads, writes } => {
                f.write_str("txn read ")?;
                pairs(f, reads)?;
                f.write_str(" wrote ")?;
                pairs(f, writes)
            }
            Action::Wot { writes, acknowledged } => {
                f.write_str("wot ")?;
                pairs(f, writes)?;
                if !acknowledged {
                    f.write_str(" (failed)")?;
                }
                Ok(())
            }
            Action::Failed { what } => write!(f, "{what} (failed)"),
        }
    }
}

/// "{x=w1, y=∅}"
fn pairs(f: &mut fmt::Formatter<'_>, kvs: &[(String, ValueName)]) -> fmt::Result {
    f.write_str("{")?;
    for (i, (k, v)) in kvs.iter().enumerate() {
        write!(f, "{}{k}={v}", if i > 0 { ", " } else { "" })?;
    }
    f.write_str("}")
}

/// One operation of the history, named.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OpRef {
    /// Index into `History::ops`.
    pub index: usize,
    pub client: ClientId,
    pub dc: DcId,
    pub invoke_us: u64,
    pub action: Action,
}

impl OpRef {
    /// The value a write wrote ("w42"); a transaction, which wrote several,
    /// by its kind and index ("wot #17"), as the paths show it in full.
    pub fn value_text(&self) -> String {
        match &self.action {
            Action::Wot { .. } => format!("wot #{}", self.index),
            Action::Txn { .. } => format!("txn #{}", self.index),
            other => other.value_text(),
        }
    }

    /// The value this write wrote to `key`: "w42", or "w42 of wot #17".
    pub fn value_for(&self, key: &str) -> String {
        let of = |writes: &[(String, ValueName)], kind: &str| {
            writes
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| format!("{v} of {kind} #{}", self.index))
                .unwrap_or_else(|| self.value_text())
        };
        match &self.action {
            Action::Wot { writes, .. } => of(writes, "wot"),
            Action::Txn { writes, .. } => of(writes, "txn"),
            other => other.value_text(),
        }
    }

    /// "client c3 in dc1"
    pub fn who(&self) -> String {
        format!("client {} in {}", self.client, self.dc)
    }
    /// "op #17 at 12.300 ms"
    pub fn at(&self) -> String {
        format!("op #{} at {}", self.index, ms(self.invoke_us))
    }
}

/// µs as "12.300 ms".
pub fn ms(us: u64) -> String {
    format!("{}.{:03} ms", us / 1_000, us % 1_000)
}

/// Short form used inside paths: "#15 c3@dc1 get album=w42".
impl fmt::Display for OpRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {}@{} {}", self.index, self.client, self.dc, self.action)
    }
}

/// How one operation of a path leads to the next.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "link", rename_all = "snake_case")]
pub enum Link {
    /// Later in the same session.
    Session,
    /// The next operation read this write.
    ReadBy { key: String },
    /// Arbitration: the write must be ordered before the next write of the
    /// same key, because `read` returned the next one with this one in its
    /// causal past.
    Arbitration { read: usize },
}

/// A chain of operations, each causally (or by arbitration) before the next.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Path {
    pub start: OpRef,
    pub hops: Vec<(Link, OpRef)>,
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.start)?;
        let mut prev = &self.start;
        for (link, op) in &self.hops {
            match link {
                Link::Session => write!(f, ", then {op}")?,
                Link::ReadBy { .. } => write!(f, ", read by {op}")?,
                Link::Arbitration { read } => write!(
                    f,
                    ", which must be arbitrated before {op} (op #{read} returned {} with {} in its causal past)",
                    op.value_text(),
                    prev.value_text()
                )?,
            }
            prev = op;
        }
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RawLink {
    Session,
    ReadBy(u32),
    Arb(u32),
}

/// Names operations and finds paths; holds scratch space for the searches.
pub struct Explainer<'a, 'h> {
    pub m: &'a Model<'h>,
    pub c: &'a Clocks,
    /// Arbitration edges (write → later write, justified by a read), indexed
    /// by target, for explaining arbitration cycles.
    pub cf_preds: FxHashMap<u32, Vec<(u32, u32)>>,
    dist: Vec<u32>,
    next: Vec<(u32, RawLink)>,
    touched: Vec<u32>,
}

impl<'a, 'h> Explainer<'a, 'h> {
    pub fn new(m: &'a Model<'h>, c: &'a Clocks) -> Self {
        let n = m.n_ops();
        Explainer {
            m,
            c,
            cf_preds: FxHashMap::default(),
            dist: vec![u32::MAX; n],
            next: vec![(NONE, RawLink::Session); n],
            touched: Vec::new(),
        }
    }

    pub fn op(&self, i: u32) -> OpRef {
        let r = &self.m.history.ops[i as usize];
        let action = match (&r.op, &r.result) {
            (Op::Put { key, value }, res) => Action::Put {
                key: key_name(key),
                value: value_name(Some(value)),
                acknowledged: matches!(res, OpResult::Put),
            },
            (Op::Get { key }, OpResult::Get(v)) => Action::Get { key: key_name(key), value: value_name(v.as_deref()) },
            (Op::Wot { writes }, res) => Action::Wot {
                writes: writes.iter().map(|(k, v)| (key_name(k), value_name(Some(v)))).collect(),
                acknowledged: matches!(res, OpResult::Wot),
            },
            (Op::Txn { reads, writes }, OpResult::Txn(vals)) => Action::Txn {
                reads: reads.iter().zip(vals).map(|(k, v)| (key_name(k), value_name(v.as_deref()))).collect(),
                writes: writes.iter().map(|(k, v)| (key_name(k), value_name(Some(v)))).collect(),
            },
            (Op::Rot { keys }, OpResult::Rot(vals)) => Action::Rot {
                reads: keys.iter().zip(vals).map(|(k, v)| (key_name(k), value_name(v.as_deref()))).collect(),
            },
            (op, _) => Action::Failed { what: op.kind().name().to_string() },
        };
        OpRef { index: i as usize, client: r.client, dc: r.dc, invoke_us: r.invoke_us, action }
    }

    /// The op a read source names, `None` for the initial state.
    pub fn source(&self, s: Source) -> Option<OpRef> {
        match s {
            Source::Write(w) => Some(self.op(w)),
            _ => None,
        }
    }

    /// The value a read returned, named.
    pub fn returned(&self, rd: &crate::model::ReadEv) -> ValueName {
        let v = match &self.m.history.ops[rd.op as usize].result {
            OpResult::Get(v) => v.as_deref(),
            OpResult::Rot(vs) | OpResult::Txn(vs) => vs[rd.slot as usize].as_deref(),
            _ => None,
        };
        value_name(v)
    }

    pub fn key(&self, k: u32) -> String {
        key_name(&self.m.keys[k as usize])
    }

    /// A path showing `a co t` along session order and kept reads-from edges.
    /// Falls back to the two endpoints joined by session order only if no
    /// path exists, which the clocks rule out whenever they claim `a co t`.
    pub fn co_path(&mut self, a: u32, t: u32) -> Path {
        let min_rank = self.c.rank[a as usize];
        let c = self.c;
        let allow = move |p: u32| {
            let r = c.rank[p as usize];
            r != NONE && r >= min_rank
        };
        self.search(a, t, allow, false, false)
            .unwrap_or_else(|| Path { start: self.op(a), hops: vec![(Link::Session, self.op(t))] })
    }

    /// `a co b`, or `None` when `a` is the initial state.
    pub fn overwritten(&mut self, a: Source, b: u32) -> Option<Path> {
        match a {
            Source::Write(a) => Some(self.co_path(a, b)),
            _ => None,
        }
    }

    /// A path from `a` to `t` through nodes `allow`s, over session order,
    /// reads-from (dropped edges too if `with_dropped`) and, if
    /// `with_arbitration`, arbitration edges.
    pub fn search(
        &mut self,
        a: u32,
        t: u32,
        allow: impl Fn(u32) -> bool,
        with_dropped: bool,
        with_arbitration: bool,
    ) -> Option<Path> {
        for &u in &self.touched {
            self.dist[u as usize] = u32::MAX;
        }
        self.touched.clear();
        let m = self.m;
        let mut dq = VecDeque::new();
        self.dist[t as usize] = 0;
        self.touched.push(t);
        dq.push_back(t);
        let mut found = false;
        let mut preds: Vec<(u32, RawLink, u32)> = Vec::new();
        while let Some(u) = dq.pop_front() {
            if u == a {
                found = true;
                break;
            }
            preds.clear();
            let p = m.so_pred[u as usize];
            if p != NONE {
                preds.push((p, RawLink::Session, 0));
            }
            if let Some(joined) = m.joins.get(&u) {
                preds.extend(joined.iter().map(|&f| (f, RawLink::Session, 0)));
            }
            for rd in m.reads_of(u) {
                if let Source::Write(w) = rd.source
                    && (with_dropped || !self.c.is_dropped(u, w))
                {
                    preds.push((w, RawLink::ReadBy(rd.key), 1));
                }
            }
            if with_arbitration && let Some(cf) = self.cf_preds.get(&u) {
                preds.extend(cf.iter().map(|&(w, r)| (w, RawLink::Arb(r), 1)));
            }
            let du = self.dist[u as usize];
            for &(p, link, wgt) in &preds {
                if !allow(p) || du + wgt >= self.dist[p as usize] {
                    continue;
                }
                if self.dist[p as usize] == u32::MAX {
                    self.touched.push(p);
                }
                self.dist[p as usize] = du + wgt;
                self.next[p as usize] = (u, link);
                if wgt == 0 { dq.push_front(p) } else { dq.push_back(p) }
            }
        }
        if !found {
            return None;
        }
        // Walk forward from a to t, merging runs of session order.
        let mut hops: Vec<(Link, OpRef)> = Vec::new();
        let mut u = a;
        while u != t {
            let (v, link) = self.next[u as usize];
            let link = match link {
                RawLink::Session => Link::Session,
                RawLink::ReadBy(k) => Link::ReadBy { key: self.key(k) },
                RawLink::Arb(r) => Link::Arbitration { read: r as usize },
            };
            if link == Link::Session && hops.last().is_some_and(|(l, _)| *l == Link::Session) {
                hops.pop();
            }
            hops.push((link, self.op(v)));
            u = v;
        }
        Some(Path { start: self.op(a), hops })
    }
}
