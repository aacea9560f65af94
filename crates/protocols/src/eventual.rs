//! # Eventual consistency with last-writer-wins
//!
//! The baseline of seed 000 (DKVF's "Eventual", 95 lines of server) and of
//! seed 002 (Riak-style): a PUT is timestamped with the local physical clock,
//! applied, acknowledged, and replicated asynchronously to every other DC
//! storing the key; a replicated version is visible the moment it arrives.
//! Every replica keeps the version with the highest ⟨ts, dc⟩, so replicas
//! converge, but nothing orders a version after the versions it depends on:
//! a remote reader can see an album entry before the photo it points to.
//!
//! A ROT here is a parallel multi-get with no snapshot, a WOT a set of
//! parallel puts applied and replicated one by one, and a read-write
//! transaction the one then the other, offered so that the baseline runs the
//! same workloads; they promise nothing. A reader can see
//! part of such a WOT, which makes the baseline the checker's standing proof
//! that fractured reads are caught.

use crate::common::{client_server_for, fail_unsupported};
use causeway_core::{
    Client, ClientCtx, ClientEnv, ClientId, DcId, Key, Message, NodeCtx, NodeId, Observation, Op, OpKind, OpResult,
    Protocol, Server, ServerEnv, Topology, Value, Versioned,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub struct Eventual;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {}

impl Protocol for Eventual {
    const NAME: &'static str = "eventual";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put, OpKind::Rot, OpKind::Wot, OpKind::Txn];
    const CAUSAL: bool = false;
    /// Every write is local and last-writer-wins needs no clock property
    /// for eventual consistency; a restart loses only `last_ts`, which the
    /// clock (or the store) bounds.
    const TOLERATES: causeway_core::Faults = causeway_core::Faults::ALL;
    const AVAILABLE_UNDER_PARTITIONS: bool = true;
    type Msg = Msg;
    type Version = Version;
    type Config = Config;
    type Server = EventualServer;
    type Client = EventualClient;
    /// Every operation is answered by servers of the client's own DC
    /// without waiting for anything.
    fn liveness_bound_us(_cfg: &Config, env: &causeway_core::LivenessEnv) -> u64 {
        10_000 + 8 * env.intra_dc_rtt_us
    }

    fn server(_cfg: &Config, ctx: NodeCtx) -> EventualServer {
        EventualServer { dc: ctx.role.dc(), last_ts: 0, topology: ctx.topology }
    }
    fn client(_cfg: &Config, ctx: ClientCtx) -> EventualClient {
        EventualClient { ctx, pending: None }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    GetReq { key: Key },
    GetReply { key: Key, value: Option<Value> },
    PutReq { key: Key, value: Value },
    PutReply,
    Replicate { key: Key, version: Version },
}

impl Message for Msg {
    fn kind(&self) -> &'static str {
        match self {
            Msg::GetReq { .. } => "get_req",
            Msg::GetReply { .. } => "get_reply",
            Msg::PutReq { .. } => "put_req",
            Msg::PutReply => "put_reply",
            Msg::Replicate { .. } => "replicate",
        }
    }
    fn is_client(&self) -> bool {
        !matches!(self, Msg::Replicate { .. })
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        match self {
            Msg::GetReq { key } => (key.len(), 0),
            Msg::PutReq { key, value } => (key.len(), value.len()),
            _ => (0, 0),
        }
    }
    fn payload_bytes(&self) -> usize {
        match self {
            Msg::GetReq { key } => key.len(),
            Msg::GetReply { key, value } => key.len() + value.as_ref().map_or(0, |v| v.len()),
            Msg::PutReq { key, value } | Msg::Replicate { key, version: Version { value, .. } } => {
                key.len() + value.len()
            }
            Msg::PutReply => 0,
        }
    }
}

/// A stored version: the value and its last-writer-wins position ⟨ts, dc⟩.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    pub ts: u64,
    pub dc: DcId,
}

impl Versioned for Version {
    type Order = (u64, DcId);
    fn order(&self) -> (u64, DcId) {
        (self.ts, self.dc)
    }
    fn value(&self) -> &Value {
        &self.value
    }
}

// ---------------------------------------------------------------- server

pub struct EventualServer {
    dc: DcId,
    /// Timestamps are unique per server: max(clock, last + 1).
    last_ts: u64,
    topology: Arc<Topology>,
}

impl EventualServer {
    /// Insert, then forget everything but the winner: last-writer-wins needs
    /// one version per key, and reads never ask for an older one.
    fn apply(env: &mut impl ServerEnv<Msg, Version>, key: Key, version: Version) -> causeway_core::Inserted {
        let store = env.store();
        let outcome = store.insert(key.clone(), version);
        store.gc_key(&key, |_| true);
        outcome
    }
}

impl Server for EventualServer {
    type Msg = Msg;
    type Version = Version;

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        match msg {
            Msg::GetReq { key } => {
                let value = env.store().latest(&key).map(|v| v.value.clone());
                env.reply(from, Msg::GetReply { key, value });
            }
            Msg::PutReq { key, value } => {
                self.last_ts = env.now_us().max(self.last_ts + 1);
                let version = Version { value, ts: self.last_ts, dc: self.dc };
                Self::apply(env, key.clone(), version.clone());
                env.observe(Observation::Visible {
                    key: &key,
                    value: &version.value,
                    origin: self.dc,
                    written_us: version.ts,
                });
                env.reply(from, Msg::PutReply);
                let p = self.topology.partition_of(&key);
                let peers: Vec<NodeId> =
                    self.topology.equivalents(p).filter(|&(d, _)| d != self.dc).map(|(_, n)| n).collect();
                for n in peers {
                    env.send(n, Msg::Replicate { key: key.clone(), version: version.clone() });
                }
            }
            _ => {} // replies and peer messages never come from clients; the runtime rejects them at the edge
        }
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, _from: NodeId, msg: Msg) {
        if let Msg::Replicate { key, version } = msg {
            let (origin, written_us) = (version.dc, version.ts);
            let value = version.value.clone();
            if Self::apply(env, key.clone(), version) == causeway_core::Inserted::Newest {
                env.observe(Observation::Visible { key: &key, value: &value, origin, written_us });
            }
        }
    }

    fn on_timer(&mut self, _env: &mut impl ServerEnv<Msg, Version>, _token: u64) {}
}

// ---------------------------------------------------------------- client

pub struct EventualClient {
    ctx: ClientCtx,
    pending: Option<Pending>,
}

enum Pending {
    Get,
    Put,
    Rot {
        keys: Vec<Key>,
        values: Vec<Option<Value>>,
        missing: usize,
    },
    /// Puts not yet acknowledged; `read` holds a read-write transaction's
    /// values.
    Wot {
        missing: usize,
        read: Option<Vec<Option<Value>>>,
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
    /// Send every write to its key's server; finish when all are
    /// acknowledged, as a WOT, or as a read-write transaction with `read`.
    fn put_all(&mut self, env: &mut impl ClientEnv<Msg>, writes: Vec<(Key, Value)>, read: Option<Vec<Option<Value>>>) {
        let mut targets = Vec::with_capacity(writes.len());
        for (k, _) in &writes {
            let Some(to) = client_server_for(&self.ctx, env, k) else { return };
            targets.push(to);
        }
        if writes.is_empty() {
            return env.complete(read.map_or(OpResult::Wot, OpResult::Txn));
        }
        self.pending = Some(Pending::Wot { missing: writes.len(), read });
        for ((key, value), to) in writes.into_iter().zip(targets) {
            env.send(to, Msg::PutReq { key, value });
        }
    }
}

impl Client for EventualClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        match op {
            Op::Get { key } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                self.pending = Some(Pending::Get);
                env.send(to, Msg::GetReq { key });
            }
            Op::Put { key, value } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                self.pending = Some(Pending::Put);
                env.send(to, Msg::PutReq { key, value });
            }
            Op::Rot { keys } => {
                let mut targets = Vec::with_capacity(keys.len());
                for k in &keys {
                    let Some(to) = client_server_for(&self.ctx, env, k) else { return };
                    targets.push(to);
                }
                if keys.is_empty() {
                    env.complete(OpResult::Rot(Vec::new()));
                    return;
                }
                for (k, to) in keys.iter().zip(targets) {
                    env.send(to, Msg::GetReq { key: k.clone() });
                }
                let n = keys.len();
                self.pending = Some(Pending::Rot { keys, values: vec![None; n], missing: n });
            }
            Op::Wot { writes } => self.put_all(env, writes, None),
            Op::Txn { reads, writes } => {
                let mut targets = Vec::with_capacity(reads.len());
                for k in &reads {
                    let Some(to) = client_server_for(&self.ctx, env, k) else { return };
                    targets.push(to);
                }
                if reads.is_empty() {
                    return self.put_all(env, writes, Some(Vec::new()));
                }
                for (k, to) in reads.iter().zip(targets) {
                    env.send(to, Msg::GetReq { key: k.clone() });
                }
                let n = reads.len();
                self.pending = Some(Pending::TxnReads { keys: reads, values: vec![None; n], missing: n, writes });
            }
            #[allow(unreachable_patterns)]
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, _from: NodeId, msg: Msg) {
        match (self.pending.take(), msg) {
            (Some(Pending::Get), Msg::GetReply { value, .. }) => env.complete(OpResult::Get(value)),
            (Some(Pending::Put), Msg::PutReply) => env.complete(OpResult::Put),
            (Some(Pending::Rot { keys, mut values, mut missing }), Msg::GetReply { key, value }) => {
                if let Some(i) = keys.iter().position(|k| *k == key) {
                    values[i] = value;
                    missing -= 1;
                }
                if missing == 0 {
                    env.complete(OpResult::Rot(values));
                } else {
                    self.pending = Some(Pending::Rot { keys, values, missing });
                }
            }
            (Some(Pending::Wot { missing, read }), Msg::PutReply) => match (missing - 1, read) {
                (0, None) => env.complete(OpResult::Wot),
                (0, Some(values)) => env.complete(OpResult::Txn(values)),
                (missing, read) => self.pending = Some(Pending::Wot { missing, read }),
            },
            (Some(Pending::TxnReads { keys, mut values, mut missing, writes }), Msg::GetReply { key, value }) => {
                if let Some(i) = keys.iter().position(|k| *k == key) {
                    values[i] = value;
                    missing -= 1;
                }
                if missing == 0 {
                    self.put_all(env, writes, Some(values));
                } else {
                    self.pending = Some(Pending::TxnReads { keys, values, missing, writes });
                }
            }
            (p, _) => self.pending = p, // a stray reply: ignore it
        }
    }
}
