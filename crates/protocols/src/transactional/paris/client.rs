use super::config::*;
use super::msg::*;
use super::server::placement_of;
use crate::kit::client::fail_unsupported;
use causeway_core::{Client, ClientCtx, ClientEnv, Key, NodeId, Op, OpError, OpResult, Value};
use std::collections::BTreeMap;

/// A client session (Alg. 1), sticky to its DC.
pub struct ParisClient {
    ctx: ClientCtx,
    blocking: bool,
    mutant_prune_cache_early: bool,
    placement: u64,
    /// ust_c: the highest UST (BPR: snapshot) this session has read at.
    pub(super) ust: Ts,
    /// hwt_c: the commit time of its last update transaction.
    pub(super) hwt: Ts,
    /// WC_c: its own writes no snapshot it read at covers yet, with their
    /// commit times.
    pub(super) cache: BTreeMap<Key, (Ts, Value)>,
    seq: u64,
    pending: Option<Pending>,
    /// The session's open interactive transaction: its id and coordinator
    /// (every step goes to the coordinator that holds its context).
    open: Option<(TxId, NodeId)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Get,
    Put,
    Rot,
    Txn,
    Begin,
    TxRead,
    Commit,
}

struct Pending {
    seq: u64,
    shape: Shape,
    reads: Vec<Key>,
    writes: Vec<(Key, Value)>,
}

impl ParisClient {
    pub(super) fn new(cfg: &Config, ctx: ClientCtx, blocking: bool) -> Self {
        ParisClient {
            placement: placement_of(&ctx.topology),
            ctx,
            blocking,
            mutant_prune_cache_early: cfg.mutant_prune_cache_early,
            ust: 0,
            hwt: 0,
            cache: BTreeMap::new(),
            seq: 0,
            pending: None,
            open: None,
        }
    }

    /// The coordinator of an interactive transaction, which names no key
    /// at START: a server of the session's DC chosen by the operation
    /// number (§IV-B: "a random one"), or in a DC storing nothing the
    /// nearest server of a partition chosen so.
    fn begin_coordinator(&self) -> Option<NodeId> {
        let t = &self.ctx.topology;
        let here = t.partitions_at(self.ctx.dc);
        if !here.is_empty() {
            return t.server(self.ctx.dc, here[(self.seq % here.len() as u64) as usize]);
        }
        let p = causeway_core::PartitionId((self.seq % t.spec().partitions as u64) as u32);
        t.server(t.serving_dc(self.ctx.dc, p), p)
    }

    /// A step of an interactive transaction (deviation 11).
    fn invoke_interactive(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        let no_txn = || OpError::BadRequest("no transaction is open on this session (begin one first)".into());
        match (op, self.open) {
            (Op::Begin, Some(_)) => {
                let e = OpError::BadRequest("a transaction is open on this session already".into());
                env.complete(OpResult::Failed(e))
            }
            (Op::Begin, None) => {
                let Some(to) = self.begin_coordinator() else {
                    return env.complete(OpResult::Failed(OpError::NoReplica));
                };
                self.seq += 1;
                let tx = TxId { session: self.ctx.nonce, seq: self.seq };
                let ust = if self.blocking { self.ust.max(self.hwt) } else { self.ust };
                env.send(to, Msg::Begin { tx, ust, hwt: self.hwt, placement: self.placement });
                self.open = Some((tx, to));
                self.pending =
                    Some(Pending { seq: self.seq, shape: Shape::Begin, reads: Vec::new(), writes: Vec::new() });
            }
            (Op::Abort, open) => {
                if let Some((tx, to)) = open {
                    env.send(to, Msg::TxAbort { tx });
                }
                self.open = None;
                env.complete(OpResult::Done)
            }
            (_, None) => env.complete(OpResult::Failed(no_txn())),
            (Op::TxRead { keys }, Some((tx, to))) => {
                self.seq += 1;
                env.send(to, Msg::TxRead { tx, seq: self.seq, keys: keys.clone() });
                self.pending = Some(Pending { seq: self.seq, shape: Shape::TxRead, reads: keys, writes: Vec::new() });
            }
            (Op::Commit { writes }, Some((tx, to))) => {
                self.seq += 1;
                env.send(to, Msg::TxCommit { tx, seq: self.seq, writes: writes.clone() });
                self.open = None;
                self.pending = Some(Pending { seq: self.seq, shape: Shape::Commit, reads: Vec::new(), writes });
            }
            (other, Some(_)) => {
                let e = OpError::BadRequest(format!(
                    "a {} operation inside an open transaction (commit or abort it first)",
                    other.kind().name()
                ));
                env.complete(OpResult::Failed(e))
            }
        }
    }

    /// The coordinator of a transaction whose first key is `first`: that
    /// key's server in the session's DC if it stores it, else a server of
    /// the DC chosen by the key's partition, else (a DC storing nothing)
    /// the key's nearest server (deviation 7).
    fn coordinator(&self, first: &Key) -> Option<NodeId> {
        let t = &self.ctx.topology;
        let p = t.partition_of(first);
        if let Some(n) = t.server(self.ctx.dc, p) {
            return Some(n);
        }
        let here = t.partitions_at(self.ctx.dc);
        if !here.is_empty() {
            return t.server(self.ctx.dc, here[p.idx() % here.len()]);
        }
        t.server(t.serving_dc(self.ctx.dc, p), p)
    }
}

impl Client for ParisClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        if self.open.is_some() || matches!(op, Op::Begin | Op::TxRead { .. } | Op::Commit { .. } | Op::Abort) {
            return self.invoke_interactive(env, op);
        }
        let (shape, reads, writes) = match op {
            Op::Get { key } => (Shape::Get, vec![key], Vec::new()),
            Op::Put { key, value } => (Shape::Put, Vec::new(), vec![(key, value)]),
            Op::Rot { keys } => (Shape::Rot, keys, Vec::new()),
            Op::Txn { reads, writes } => (Shape::Txn, reads, writes),
            other => return fail_unsupported(env, other.kind()),
        };
        let Some(first) = writes.first().map(|(k, _)| k).or(reads.first()) else {
            return env.complete(match shape {
                Shape::Rot => OpResult::Rot(Vec::new()),
                _ => OpResult::Txn(Vec::new()),
            });
        };
        let Some(to) = self.coordinator(first) else {
            return env.complete(OpResult::Failed(OpError::NoReplica));
        };
        self.seq += 1;
        let tx = TxId { session: self.ctx.nonce, seq: self.seq };
        // BPR's snapshot starts from the highest timestamp the session has
        // seen, its own commits included (§V).
        let ust = if self.blocking { self.ust.max(self.hwt) } else { self.ust };
        let msg = if let (Shape::Put, [(key, value)]) = (shape, &writes[..]) {
            Msg::PutReq { tx, ust, hwt: self.hwt, placement: self.placement, key: key.clone(), value: value.clone() }
        } else if writes.is_empty() {
            Msg::ReadReq { tx, ust, placement: self.placement, keys: reads.clone() }
        } else {
            Msg::TxReq {
                tx,
                ust,
                hwt: self.hwt,
                placement: self.placement,
                reads: reads.clone(),
                writes: writes.clone(),
            }
        };
        env.send(to, msg);
        self.pending = Some(Pending { seq: self.seq, shape, reads, writes });
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, _from: NodeId, msg: Msg) {
        let Msg::Reply { seq, result } = msg else { return };
        if self.pending.as_ref().is_none_or(|p| p.seq != seq) {
            return; // a stray reply
        }
        let p = self.pending.take().expect("checked");
        let done = match result {
            Ok(d) => d,
            Err(e) => {
                // A refused step ends the transaction: its context is gone
                // or was never made.
                self.open = None;
                return env.complete(OpResult::Failed(e));
            }
        };
        // Alg. 1 lines 4–6 (deviation 1: after the snapshot is known):
        // ust_c rises to the snapshot, and the cache drops what it covers.
        self.ust = self.ust.max(done.snapshot);
        let ust = self.ust;
        if self.mutant_prune_cache_early {
            self.cache.clear();
        } else {
            self.cache.retain(|_, (ct, _)| *ct > ust);
        }
        // Read-your-writes (line 12): a cached write is newer than any
        // version at or below the snapshot.
        let mut values = done.values;
        for (k, v) in p.reads.iter().zip(values.iter_mut()) {
            if let Some((_, cached)) = self.cache.get(k) {
                *v = Some(cached.clone());
            }
        }
        if !p.writes.is_empty() {
            // Lines 32–34: hwt_c ← ct; the writes join the cache, tagged ct.
            self.hwt = self.hwt.max(done.ct);
            for (k, v) in p.writes {
                self.cache.insert(k, (done.ct, v));
            }
        }
        env.complete(match p.shape {
            Shape::Get => OpResult::Get(values.pop().flatten()),
            Shape::Put => OpResult::Put,
            Shape::Rot => OpResult::Rot(values),
            Shape::Txn => OpResult::Txn(values),
            Shape::TxRead => OpResult::Rot(values),
            Shape::Begin | Shape::Commit => OpResult::Done,
        });
    }
}
