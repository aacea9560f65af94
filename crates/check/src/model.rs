//! The history model every check shares: sessions, writes, reads and the
//! reads-from relation, built once from a [`History`].
//!
//! - **Sessions** are the operations of one [`ClientId`] ordered by invoke
//!   time (a session is sequential, so this is its program order).
//! - **Writes** are `Put`s and `Wot`s. A write is identified by its key and
//!   value: values are unique per write (runtime values carry a unique tagged
//!   write id; untagged values are compared as bytes). Two writes of one value
//!   to one key are a [`ModelError::DuplicateWrite`]. A `Wot` is one node of
//!   the causal order that writes several keys: a read of any of its keys
//!   reads from the whole transaction, as atomic visibility demands.
//! - **Reads** are `Get`s and each key of a `Rot`; a `Rot` stays one unit (one
//!   node of the causal order) with several reads. A read-write `Txn` is one
//!   node with both: its reads (from its snapshot, before its own writes)
//!   and its writes. `None` reads the initial
//!   state. A value that no write of that key wrote is a thin-air read.
//! - **Batches** (`Op::Batch`, non-atomic parallel writes) are recorded as
//!   one `Put` per write sharing a `batch` number. Their writes are
//!   unordered among themselves: the session forks at the batch and joins
//!   after it. The first successful write takes the batch's place in the
//!   session; each other one gets a one-write *fork* session (a phantom
//!   session, below) ordered after the session's earlier operations, and
//!   the session's next operation is ordered after it too ([`Model::joins`]).
//! - **Failed operations** returned nothing and are dropped, except a failed
//!   `Put` whose value some read returned: it may have happened, so it is a
//!   legal source. It is ordered after its session's earlier operations (it
//!   was issued with their context) but nothing in its session is ordered
//!   after it (the client never learned whether it happened). Each such write
//!   gets a one-operation *phantom* session of its own, so the vector clocks
//!   of [`crate::clock`] can name it.
//!
//! Nodes of the causal order are the successful operations plus the failed
//! `Put`s that were read. Everything is indexed by the operation's position in
//! `History::ops`, so reports point back into the history.

use crate::error::ModelError;
use crate::names::{key_name, value_name};
use causeway_core::{ClientId, History, Key, Op, OpResult};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// "No such node / session / key".
pub const NONE: u32 = u32::MAX;

/// What a read returned, resolved against the writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The initial state: the key had no visible version.
    Init,
    /// The write at this op index.
    Write(u32),
    /// A value no write of this key wrote.
    ThinAir,
}

/// One read: a `Get`, or one key of a `Rot`.
#[derive(Clone, Copy, Debug)]
pub struct ReadEv {
    pub op: u32,
    /// Position of the key in the `Rot` (0 for a `Get`).
    pub slot: u32,
    pub key: u32,
    pub source: Source,
}

/// A session: a client's operations in program order, or a phantom session
/// holding one failed-but-read `Put`.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    pub client: ClientId,
    pub phantom: bool,
    /// Member nodes in session order; position `i` here is position `i + 1`
    /// in [`Model::pos`].
    pub ops: Vec<u32>,
}

pub struct Model<'h> {
    pub history: &'h History,
    /// Key id → key, sorted by bytes so ids are deterministic.
    pub keys: Vec<Key>,
    /// Real sessions sorted by client, then phantom sessions by op index.
    pub sessions: Vec<SessionInfo>,
    pub real_sessions: usize,
    /// Per op: is it a node of the causal order?
    pub is_node: Vec<bool>,
    /// Per op: its session (NONE if not a node).
    pub session_of: Vec<u32>,
    /// Per op: 1-based position in its session (0 if not a node).
    pub pos: Vec<u32>,
    /// Per op: the previous node in session order (NONE if first or not a node).
    /// A phantom write's predecessor is the last member of its client's
    /// session invoked before it.
    pub so_pred: Vec<u32>,
    /// The keys each op writes (one for a `Put`, several for a `Wot`):
    /// `write_keys[write_start[i]..write_start[i + 1]]` are op `i`'s.
    write_keys: Vec<u32>,
    write_start: Vec<u32>,
    /// Per op: the `Put` completed successfully.
    pub acked: Vec<bool>,
    /// All reads of nodes, grouped by op in op order.
    pub reads: Vec<ReadEv>,
    /// `reads[read_start[i]..read_start[i + 1]]` are op `i`'s reads.
    pub read_start: Vec<u32>,
    /// Per key: the sessions (incl. phantom) that wrote it, ascending.
    pub writers: Vec<Vec<u32>>,
    /// (session, key) → the session's writes of the key as (pos, op), by pos.
    writes_by: FxHashMap<(u32, u32), Vec<(u32, u32)>>,
    /// Per op: the nodes ordered right after it in session order: its
    /// session successor, then phantom writes hanging off it (for a batch's
    /// fork write, the operation that joins it).
    pub so_succ: Vec<Vec<u32>>,
    /// Per node after a batch: the batch's fork writes, its session
    /// predecessors besides `so_pred` (empty for almost every node).
    pub joins: FxHashMap<u32, Vec<u32>>,
    /// Per write op: ops that read it (deduplicated, ascending).
    pub readers: FxHashMap<u32, Vec<u32>>,
}

impl<'h> Model<'h> {
    pub fn build(history: &'h History) -> Result<Model<'h>, ModelError> {
        let ops = &history.ops;
        let n = ops.len();
        if n >= NONE as usize {
            return Err(ModelError::TooLarge(n));
        }
        validate_shapes(history)?;

        // Keys, sorted for deterministic ids.
        let mut key_set: BTreeMap<&[u8], u32> = BTreeMap::new();
        for r in ops {
            for k in r.op.reads().into_iter().chain(r.op.writes().into_iter().map(|(k, _)| k)) {
                key_set.insert(k, 0);
            }
        }
        let mut keys = Vec::with_capacity(key_set.len());
        let mut key_id: FxHashMap<&[u8], u32> = FxHashMap::default();
        for (i, (k, _)) in key_set.iter().enumerate() {
            key_id.insert(k, i as u32);
            keys.push(Key::copy_from_slice(k));
        }

        // Writes by (key, value).
        let mut write_keys = Vec::new();
        let mut write_start = Vec::with_capacity(n + 1);
        let mut acked = vec![false; n];
        let mut by_value: FxHashMap<(u32, &[u8]), u32> = FxHashMap::default();
        for (i, r) in ops.iter().enumerate() {
            write_start.push(write_keys.len() as u32);
            acked[i] = matches!(r.result, OpResult::Put | OpResult::Wot | OpResult::Txn(_));
            for (key, value) in r.op.writes() {
                let k = key_id[key.as_ref()];
                write_keys.push(k);
                if let Some(&first) = by_value.get(&(k, value.as_ref())) {
                    return Err(ModelError::DuplicateWrite {
                        key: key_name(key),
                        value: value_name(Some(value)).to_string(),
                        first: first as usize,
                        second: i,
                    });
                }
                by_value.insert((k, value), i as u32);
            }
        }
        write_start.push(write_keys.len() as u32);

        // Reads, resolved against the writes.
        let mut reads = Vec::new();
        let mut read_start = Vec::with_capacity(n + 1);
        let resolve = |k: u32, v: &Option<causeway_core::Value>| match v {
            None => Source::Init,
            Some(v) => match by_value.get(&(k, v.as_ref())) {
                Some(&w) => Source::Write(w),
                None => Source::ThinAir,
            },
        };
        for (i, r) in ops.iter().enumerate() {
            read_start.push(reads.len() as u32);
            match (&r.op, &r.result) {
                (Op::Get { key }, OpResult::Get(v)) => {
                    let k = key_id[key.as_ref()];
                    reads.push(ReadEv { op: i as u32, slot: 0, key: k, source: resolve(k, v) });
                }
                (Op::Rot { keys } | Op::Txn { reads: keys, .. }, OpResult::Rot(vals) | OpResult::Txn(vals)) => {
                    for (slot, (key, v)) in keys.iter().zip(vals).enumerate() {
                        let k = key_id[key.as_ref()];
                        reads.push(ReadEv { op: i as u32, slot: slot as u32, key: k, source: resolve(k, v) });
                    }
                }
                _ => {}
            }
        }
        read_start.push(reads.len() as u32);

        // Failed puts that some read returned.
        let mut read_failed = vec![false; n];
        for rd in &reads {
            if let Source::Write(w) = rd.source
                && !acked[w as usize]
            {
                read_failed[w as usize] = true;
            }
        }

        // Sessions: by client, ordered by invoke time.
        let mut by_client: BTreeMap<ClientId, Vec<u32>> = BTreeMap::new();
        for (i, r) in ops.iter().enumerate() {
            by_client.entry(r.client).or_default().push(i as u32);
        }
        let mut order = SessionOrder::new(n);
        let mut sessions = Vec::with_capacity(by_client.len());
        let mut phantoms: Vec<(u32, u32)> = Vec::new(); // (op, pred)
        // A batch's fork writes: (op, pred, the forks of the batch before).
        let mut forks: Vec<(u32, u32, Vec<u32>)> = Vec::new();
        for (client, mut idx) in by_client {
            idx.sort_by_key(|&i| (ops[i as usize].invoke_us, ops[i as usize].complete_us, i));
            for w in idx.windows(2) {
                let (a, b) = (&ops[w[0] as usize], &ops[w[1] as usize]);
                let one_batch = a.batch.is_some() && a.batch == b.batch;
                if b.invoke_us < a.complete_us && !one_batch {
                    return Err(ModelError::OverlappingSession { client, first: w[0] as usize, second: w[1] as usize });
                }
            }
            let s = sessions.len() as u32;
            let mut members: Vec<u32> = Vec::new();
            // The batch being read: its number, the session's last member
            // before it, and whether one of its writes took its place.
            let mut batch: Option<(u64, u32, bool)> = None;
            // Fork writes no member of the session follows yet: the next
            // member joins them.
            let mut open: Vec<u32> = Vec::new();
            // At a batch: the forks open before it, which each of its
            // writes joins.
            let mut before_batch: Vec<u32> = Vec::new();
            for i in idx {
                let r = &ops[i as usize];
                match (r.batch, batch) {
                    (Some(b), Some((cur, _, _))) if b == cur => {}
                    (Some(b), _) => {
                        before_batch = open.clone();
                        batch = Some((b, members.last().copied().unwrap_or(NONE), false));
                    }
                    (None, _) => batch = None,
                }
                // The member before this op in session order (before its
                // batch, for a batch's write).
                let before = batch.map_or(members.last().copied().unwrap_or(NONE), |(_, p, _)| p);
                let failed = matches!(r.result, OpResult::Failed(_));
                if failed {
                    if read_failed[i as usize] {
                        phantoms.push((i, before));
                    }
                    continue;
                }
                if let Some((_, p, true)) = batch {
                    // A further write of the batch: a fork of its own.
                    forks.push((i, p, before_batch.clone()));
                    open.push(i);
                    continue;
                }
                let joined = match batch {
                    // The batch's first successful write: it joins the forks
                    // before the batch, and the session's later members
                    // follow them through it.
                    Some((b, p, false)) => {
                        batch = Some((b, p, true));
                        open.clear();
                        before_batch.clone()
                    }
                    _ => std::mem::take(&mut open),
                };
                debug_assert_eq!(members.last().copied().unwrap_or(NONE), before);
                order.place(i, s, members.len() as u32 + 1, before, joined);
                members.push(i);
            }
            sessions.push(SessionInfo { client, phantom: false, ops: members });
        }
        let real_sessions = sessions.len();
        phantoms.sort_unstable();
        let mut extra: Vec<(u32, u32, Vec<u32>)> = phantoms.into_iter().map(|(i, p)| (i, p, Vec::new())).collect();
        extra.extend(forks);
        extra.sort_unstable();
        for (i, p, joined) in extra {
            order.place(i, sessions.len() as u32, 1, p, joined);
            sessions.push(SessionInfo { client: ops[i as usize].client, phantom: true, ops: vec![i] });
        }
        let SessionOrder { is_node, session_of, pos, so_pred, so_succ, joins } = order;

        // Reads of ops that are not nodes (failed gets/rots have none) are dropped.
        let mut writers: Vec<Vec<u32>> = vec![Vec::new(); keys.len()];
        let mut writes_by: FxHashMap<(u32, u32), Vec<(u32, u32)>> = FxHashMap::default();
        for s in &sessions {
            for &i in &s.ops {
                for &k in &write_keys[write_start[i as usize] as usize..write_start[i as usize + 1] as usize] {
                    let sid = session_of[i as usize];
                    let list = writes_by.entry((sid, k)).or_default();
                    if list.is_empty() {
                        writers[k as usize].push(sid);
                    }
                    list.push((pos[i as usize], i));
                }
            }
        }
        for w in &mut writers {
            w.sort_unstable();
        }
        let mut readers: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
        for rd in &reads {
            if let Source::Write(w) = rd.source
                && is_node[rd.op as usize]
            {
                let list = readers.entry(w).or_default();
                if list.last() != Some(&rd.op) {
                    list.push(rd.op);
                }
            }
        }

        Ok(Model {
            history,
            keys,
            sessions,
            real_sessions,
            is_node,
            session_of,
            pos,
            so_pred,
            write_keys,
            write_start,
            acked,
            reads,
            read_start,
            writers,
            writes_by,
            so_succ,
            joins,
            readers,
        })
    }

    pub fn n_ops(&self) -> usize {
        self.history.ops.len()
    }

    /// The reads of op `i` (empty for writes and failed ops).
    pub fn reads_of(&self, i: u32) -> &[ReadEv] {
        &self.reads[self.read_start[i as usize] as usize..self.read_start[i as usize + 1] as usize]
    }

    /// The writes op `i` read from, deduplicated (a `Rot` reads distinct keys,
    /// so its sources are distinct already).
    pub fn sources_of(&self, i: u32) -> impl Iterator<Item = u32> + '_ {
        self.reads_of(i).iter().filter_map(|r| match r.source {
            Source::Write(w) => Some(w),
            _ => None,
        })
    }

    /// The last write of `key` by session `s` at a position ≤ `bound`.
    pub fn last_write(&self, s: u32, key: u32, bound: u32) -> Option<u32> {
        let list = self.writes_by.get(&(s, key))?;
        let n = list.partition_point(|&(p, _)| p <= bound);
        (n > 0).then(|| list[n - 1].1)
    }

    /// For each session that wrote `key`, its last write of `key` at a
    /// position ≤ `bound(session)`: the co-maximal candidates among the writes
    /// of `key` in a session-downward-closed set (a causal past). If any write
    /// of `key` in that set is causally after some `w`, one of these is.
    pub fn latest_writes<'a>(&'a self, key: u32, bound: impl Fn(u32) -> u32 + 'a) -> impl Iterator<Item = u32> + 'a {
        self.writers[key as usize].iter().filter_map(move |&s| {
            let b = bound(s);
            if b == 0 { None } else { self.last_write(s, key, b) }
        })
    }

    /// The keys op `i` writes: one for a `Put`, each key of a `Wot`, none
    /// for reads.
    pub fn keys_written(&self, i: u32) -> &[u32] {
        &self.write_keys[self.write_start[i as usize] as usize..self.write_start[i as usize + 1] as usize]
    }

    pub fn is_write(&self, i: u32) -> bool {
        !self.keys_written(i).is_empty()
    }

    /// Whether op `i` writes key `k`.
    pub fn writes_key(&self, i: u32, k: u32) -> bool {
        self.keys_written(i).contains(&k)
    }

    /// The session context of op `i`: its previous operation, and the writes
    /// from other DCs its session read before it (most recent last, at most
    /// `max`).
    pub fn session_context(&self, i: u32, max: usize) -> (Option<u32>, Vec<u32>) {
        let ops = &self.history.ops;
        let me = &ops[i as usize];
        let mut prev = None;
        let mut remote = Vec::new();
        let mut earlier: Vec<u32> = (0..ops.len() as u32)
            .filter(|&j| {
                j != i
                    && ops[j as usize].client == me.client
                    && ops[j as usize].invoke_us <= me.invoke_us
                    && self.is_node[j as usize]
            })
            .collect();
        earlier.sort_by_key(|&j| (ops[j as usize].invoke_us, j));
        if let Some(&p) = earlier.last() {
            prev = Some(p);
        }
        for j in earlier {
            for rd in self.reads_of(j) {
                if let Source::Write(w) = rd.source
                    && ops[w as usize].dc != me.dc
                    && !remote.contains(&w)
                {
                    remote.push(w);
                }
            }
        }
        let skip = remote.len().saturating_sub(max);
        (prev, remote.split_off(skip))
    }
}

/// The session order as it is built: per op, its node, session, position
/// and predecessors (the [`Model`] fields of the same names).
struct SessionOrder {
    is_node: Vec<bool>,
    session_of: Vec<u32>,
    pos: Vec<u32>,
    so_pred: Vec<u32>,
    so_succ: Vec<Vec<u32>>,
    joins: FxHashMap<u32, Vec<u32>>,
}

impl SessionOrder {
    fn new(n: usize) -> SessionOrder {
        SessionOrder {
            is_node: vec![false; n],
            session_of: vec![NONE; n],
            pos: vec![0; n],
            so_pred: vec![NONE; n],
            so_succ: vec![Vec::new(); n],
            joins: FxHashMap::default(),
        }
    }

    /// Make op `i` the node at position `at` of session `s`, right after
    /// `pred` (NONE: first) and the fork writes `joined`.
    fn place(&mut self, i: u32, s: u32, at: u32, pred: u32, joined: Vec<u32>) {
        self.is_node[i as usize] = true;
        self.session_of[i as usize] = s;
        self.pos[i as usize] = at;
        self.so_pred[i as usize] = pred;
        for p in std::iter::once(pred).filter(|&p| p != NONE).chain(joined.iter().copied()) {
            self.so_succ[p as usize].push(i);
        }
        if !joined.is_empty() {
            self.joins.insert(i, joined);
        }
    }
}

/// Reject results that do not fit their operation.
fn validate_shapes(history: &History) -> Result<(), ModelError> {
    for (index, r) in history.ops.iter().enumerate() {
        if matches!(r.op, Op::Batch { .. }) {
            return Err(ModelError::UnexpandedBatch { index });
        }
        if let Some(batch) = r.batch
            && !matches!(r.op, Op::Put { .. })
        {
            return Err(ModelError::BatchNotPut { index, batch, op: r.op.kind() });
        }
        if r.op.kind() == causeway_core::OpKind::Interactive {
            return Err(ModelError::InteractiveStep { index });
        }
        let result = match &r.result {
            OpResult::Done => "done",
            OpResult::Get(_) => "get",
            OpResult::Put => "put",
            OpResult::Rot(_) => "rot",
            OpResult::Wot => "wot",
            OpResult::Txn(_) => "txn",
            OpResult::Slice(_) => "slice",
            OpResult::Failed(_) => continue,
        };
        let fits = matches!(
            (&r.op, &r.result),
            (Op::Get { .. }, OpResult::Get(_))
                | (Op::Put { .. }, OpResult::Put)
                | (Op::Rot { .. }, OpResult::Rot(_))
                | (Op::Wot { .. }, OpResult::Wot)
                | (Op::Txn { .. }, OpResult::Txn(_))
                // Counter adds and slices read and write no register: they
                // are events of their sessions and nothing else here.
                | (Op::Add { .. }, OpResult::Put)
                | (Op::Slice { .. }, OpResult::Slice(_))
        );
        if !fits {
            return Err(ModelError::ResultMismatch { index, op: r.op.kind(), result });
        }
        // A transaction names each key once per side; a failed one may not
        // have (the protocol refused it), so only successful ones are held
        // to it.
        let written: Vec<&Key> = r.op.writes().into_iter().map(|(k, _)| k).collect();
        for mut keys in [r.op.reads(), written] {
            keys.sort();
            if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
                return Err(ModelError::DuplicateKey { index, op: r.op.kind(), key: key_name(w[0]) });
            }
        }
        if let (Op::Rot { keys } | Op::Txn { reads: keys, .. }, OpResult::Rot(vals) | OpResult::Txn(vals)) =
            (&r.op, &r.result)
            && keys.len() != vals.len()
        {
            return Err(ModelError::RotArity { index, keys: keys.len(), values: vals.len() });
        }
    }
    Ok(())
}
