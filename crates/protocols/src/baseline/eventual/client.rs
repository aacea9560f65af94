use super::config::*;
use super::msg::*;
use crate::kit::client::{by_server, client_servers_for, fail_unsupported, send_for_key};
use causeway_core::{Client, ClientCtx, ClientEnv, Key, NodeId, Op, OpError, OpResult, Value};

pub struct EventualClient {
    ctx: ClientCtx,
    pending: Option<Pending>,
    /// Why a server refused part of the operation in progress: it still
    /// collects every reply (so none is mistaken for the next operation's),
    /// then fails.
    refused: Option<String>,
}

impl EventualClient {
    pub(super) fn new(_cfg: &Config, ctx: ClientCtx) -> EventualClient {
        EventualClient { ctx, pending: None, refused: None }
    }

    /// Complete the operation, as refused if any part of it was.
    fn finish(&mut self, env: &mut impl ClientEnv<Msg>, result: OpResult) {
        match self.refused.take() {
            Some(why) => env.complete(OpResult::Failed(OpError::BadRequest(why))),
            None => env.complete(result),
        }
    }
}

pub(super) enum Pending {
    Get,
    Put,
    Rot {
        keys: Vec<Key>,
        values: Vec<Option<Value>>,
        missing: usize,
    },
    /// Puts not yet acknowledged (a WOT, a batch, or a read-write
    /// transaction's writes); `done` is what the operation completes as.
    Wot {
        missing: usize,
        done: OpResult,
    },
    /// A read-write transaction's reads, its writes waiting for them.
    TxnReads {
        keys: Vec<Key>,
        values: Vec<Option<Value>>,
        missing: usize,
        writes: Vec<(Key, Value)>,
    },
}

impl EventualClient {
    /// Send every write to its key's server; finish as `done` when all are
    /// acknowledged (a WOT, a batch — the same here, both non-atomic — or a
    /// read-write transaction with the values it read).
    fn put_all(&mut self, env: &mut impl ClientEnv<Msg>, writes: Vec<(Key, Value)>, done: OpResult) {
        let Some(targets) = client_servers_for(&self.ctx, env, writes.iter().map(|(k, _)| &k[..])) else { return };
        if writes.is_empty() {
            return env.complete(done);
        }
        // One request per server; a single write as a plain PUT.
        let by_server = by_server(writes, targets);
        self.pending = Some(Pending::Wot { missing: by_server.len(), done });
        for (to, mut writes) in by_server {
            if writes.len() == 1 {
                let (key, value) = writes.pop().expect("one write");
                env.send(to, Msg::PutReq { key, value });
            } else {
                env.send(to, Msg::PutBatch { writes });
            }
        }
    }
}

impl Client for EventualClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        match op {
            Op::Get { key } => {
                if send_for_key(&self.ctx, env, key, |key| Msg::GetReq { key }) {
                    self.pending = Some(Pending::Get);
                }
            }
            Op::Put { key, value } => {
                if send_for_key(&self.ctx, env, key, |key| Msg::PutReq { key, value }) {
                    self.pending = Some(Pending::Put);
                }
            }
            Op::Rot { keys } => {
                let Some(targets) = client_servers_for(&self.ctx, env, keys.iter().map(|k| &k[..])) else { return };
                if keys.is_empty() {
                    env.complete(OpResult::Rot(Vec::new()));
                    return;
                }
                send_reads(env, &keys, targets);
                let n = keys.len();
                self.pending = Some(Pending::Rot { keys, values: vec![None; n], missing: n });
            }
            Op::Wot { writes } => self.put_all(env, writes, OpResult::Wot),
            Op::Batch { writes } => self.put_all(env, writes, OpResult::Put),
            Op::Txn { reads, writes } => {
                let Some(targets) = client_servers_for(&self.ctx, env, reads.iter().map(|k| &k[..])) else { return };
                if reads.is_empty() {
                    return self.put_all(env, writes, OpResult::Txn(Vec::new()));
                }
                send_reads(env, &reads, targets);
                let n = reads.len();
                self.pending = Some(Pending::TxnReads { keys: reads, values: vec![None; n], missing: n, writes });
            }
            #[allow(unreachable_patterns)]
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, _from: NodeId, msg: Msg) {
        // A refusal answers its request like an empty reply, and marks the
        // operation failed.
        let msg = match msg {
            Msg::Refused { key, reason } => {
                self.refused.get_or_insert(reason);
                match self.pending {
                    Some(Pending::Put | Pending::Wot { .. }) => Msg::PutReply,
                    _ => Msg::GetReply { key, value: None },
                }
            }
            m => m,
        };
        match (self.pending.take(), msg) {
            (Some(Pending::Get), Msg::GetReply { value, .. }) => self.finish(env, OpResult::Get(value)),
            (Some(Pending::Put), Msg::PutReply) => self.finish(env, OpResult::Put),
            (
                Some(Pending::Rot { keys, mut values, mut missing }),
                msg @ (Msg::GetReply { .. } | Msg::GetBatchReply { .. }),
            ) => {
                fill(&keys, &mut values, &mut missing, msg);
                if missing == 0 {
                    self.finish(env, OpResult::Rot(values));
                } else {
                    self.pending = Some(Pending::Rot { keys, values, missing });
                }
            }
            (Some(Pending::Wot { missing, done }), Msg::PutReply) => match missing - 1 {
                0 => self.finish(env, done),
                missing => self.pending = Some(Pending::Wot { missing, done }),
            },
            (
                Some(Pending::TxnReads { keys, mut values, mut missing, writes }),
                msg @ (Msg::GetReply { .. } | Msg::GetBatchReply { .. }),
            ) => {
                fill(&keys, &mut values, &mut missing, msg);
                if missing == 0 && self.refused.is_some() {
                    self.finish(env, OpResult::Txn(values));
                } else if missing == 0 {
                    self.put_all(env, writes, OpResult::Txn(values));
                } else {
                    self.pending = Some(Pending::TxnReads { keys, values, missing, writes });
                }
            }
            (p, _) => self.pending = p, // a stray reply: ignore it
        }
    }
}

/// A multi-key read's requests: one per server, a `GetBatch` where the
/// server holds several of the keys (Cassandra's `multiget_slice`).
fn send_reads(env: &mut impl ClientEnv<Msg>, keys: &[Key], targets: Vec<NodeId>) {
    let mut by_server: Vec<(NodeId, Vec<Key>)> = Vec::new();
    for (k, to) in keys.iter().zip(targets) {
        match by_server.iter_mut().find(|(n, _)| *n == to) {
            Some((_, ks)) => ks.push(k.clone()),
            None => by_server.push((to, vec![k.clone()])),
        }
    }
    for (to, mut ks) in by_server {
        let msg =
            if ks.len() == 1 { Msg::GetReq { key: ks.pop().expect("one key") } } else { Msg::GetBatch { keys: ks } };
        env.send(to, msg);
    }
}

/// Put a multi-key read's answers (one `GetReply` or a server's
/// `GetBatchReply`) in their places: each at its key's place (a ROT names
/// a key once). A batch answers its keys in the order `send_reads` listed
/// them, which is their order in `keys`, so each search starts where the
/// last one ended: linear in the ROT's size, not quadratic.
fn fill(keys: &[Key], values: &mut [Option<Value>], missing: &mut usize, msg: Msg) {
    let mut from = 0;
    let mut one = |key: Key, value: Option<Value>| {
        let found = keys[from..].iter().position(|k| *k == key).map(|i| from + i);
        if let Some(i) = found.or_else(|| keys[..from].iter().position(|k| *k == key)) {
            values[i] = value;
            *missing -= 1;
            from = i + 1;
        }
    };
    match msg {
        Msg::GetReply { key, value } => one(key, value),
        Msg::GetBatchReply { values: got } => got.into_iter().for_each(|(key, value)| one(key, value)),
        _ => {}
    }
}
