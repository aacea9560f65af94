use super::config::*;
use super::msg::*;
use crate::kit::client::{client_server_for, client_servers_for, fail_unsupported};
use causeway_core::{Client, ClientCtx, ClientEnv, DcId, Key, NodeId, Op, OpError, OpResult, PartitionId, Value};
use std::collections::BTreeMap;

/// A session: its nearest dependencies (COPS's one-hop context, Lloyd
/// §2.3: the versions read since its last write, and that write), the
/// highest Lamport time it has seen (sent only for the Lamport-only
/// mutant), and its ROT sequence number.
pub struct CcLoClient {
    ctx: ClientCtx,
    rot_timeout_us: u64,
    rot_attempts: u32,
    /// (key, accepting DC) → the newest stamp of it read or written since
    /// the last write (deviation 2).
    pub(super) context: BTreeMap<(Key, DcId), Stamp>,
    /// (partition, accepting DC) → a stamp a read said was settled: every
    /// version of the partition's keys from that DC stamped at most this is
    /// settled too (deviation 10), so the sweep drops it.
    settled_through: BTreeMap<(PartitionId, DcId), u64>,
    /// Reads since the context was last swept; a sweep is due once they
    /// reach its length, which keeps its cost O(1) per read.
    reads_since_sweep: usize,
    lts: u64,
    seq: u64,
    pending: Option<Pending>,
}

pub(super) enum Pending {
    Put {
        key: Key,
    },
    /// A GET under ROT id `seq`: one partition, never recorded (deviation
    /// 5), so no attempt timer either: one request and one reply, as a
    /// COPS read, within the session's own deadline.
    Get {
        seq: u64,
        key: Key,
    },
    Read(Read),
}

/// A ROT in progress: one attempt, under ROT id `seq`.
pub(super) struct Read {
    seq: u64,
    attempts: u32,
    keys: Vec<Key>,
    servers: Vec<NodeId>,
    /// Partitions still to answer → the positions of their keys.
    awaiting: BTreeMap<NodeId, Vec<usize>>,
    items: Vec<Option<Item>>,
}

impl CcLoClient {
    pub(super) fn new(cfg: &Config, ctx: ClientCtx) -> Self {
        CcLoClient {
            ctx,
            rot_timeout_us: cfg.rot_timeout_us,
            rot_attempts: cfg.rot_attempts,
            context: BTreeMap::new(),
            settled_through: BTreeMap::new(),
            reads_since_sweep: 0,
            lts: 0,
            seq: 0,
            pending: None,
        }
    }

    /// One attempt of a read: each partition of the keys gets its keys in
    /// one message and answers in one (Didona et al. §3: one round, one
    /// version, nonblocking). A new attempt gets a new ROT id.
    fn send_read(&mut self, env: &mut impl ClientEnv<Msg>, mut read: Read) {
        self.seq += 1;
        read.seq = self.seq;
        read.attempts += 1;
        read.awaiting.clear();
        for (i, &s) in read.servers.iter().enumerate() {
            read.awaiting.entry(s).or_default().push(i);
        }
        read.items = vec![None; read.keys.len()];
        let id = RotId { nonce: self.ctx.nonce, seq: read.seq };
        // A ROT served by one partition reads in one step there and can
        // never be an old reader: it is not recorded (deviation 5).
        let record = read.awaiting.len() > 1;
        for (&n, positions) in &read.awaiting {
            let keys = positions.iter().map(|&i| read.keys[i].clone()).collect();
            env.send(n, Msg::RotReq { id, keys, record, lts: self.lts });
        }
        env.set_timer(self.rot_timeout_us, read.seq);
        self.pending = Some(Pending::Read(read));
    }

    fn start_read(&mut self, env: &mut impl ClientEnv<Msg>, keys: Vec<Key>) {
        let Some(servers) = client_servers_for(&self.ctx, env, keys.iter().map(|k| &k[..])) else { return };
        let read = Read { seq: 0, attempts: 0, keys, servers, awaiting: BTreeMap::new(), items: Vec::new() };
        self.send_read(env, read);
    }

    /// The session read `item` of `key`: it now depends on it, unless it is
    /// settled.
    fn read(&mut self, key: Key, item: Item) -> Value {
        if item.never_depend {
            self.settled(key, item.stamp);
        } else {
            self.depend_on(key, item.stamp);
        }
        self.reads_since_sweep += 1;
        if self.reads_since_sweep >= self.context.len().max(SWEEP_MIN) {
            self.sweep();
        }
        item.value
    }

    /// A settled version constrains no write (deviation 10), nor does an
    /// older one of its key from its DC, settled with it (Lloyd §6.1: the
    /// library drops never-depend items at once). Settling goes by stamp,
    /// per partition and origin DC, so neither does any version of the
    /// partition's keys from that DC stamped as low: the next sweep drops
    /// them.
    fn settled(&mut self, key: Key, stamp: Stamp) {
        self.lts = self.lts.max(stamp.ts);
        let partition = self.ctx.topology.partition_of(&key);
        let through = self.settled_through.entry((partition, stamp.dc)).or_insert(stamp.ts);
        *through = (*through).max(stamp.ts);
        let slot = (key, stamp.dc);
        if self.context.get(&slot).is_some_and(|&s| s <= stamp) {
            self.context.remove(&slot);
        }
    }

    fn depend_on(&mut self, key: Key, stamp: Stamp) {
        self.lts = self.lts.max(stamp.ts);
        let e = self.context.entry((key, stamp.dc)).or_insert(stamp);
        *e = (*e).max(stamp);
    }

    /// Drop from the context every dependency a settled read has shown to
    /// be settled. Without it, a session that read unsettled versions and
    /// then only settled ones kept the first for good (until its next
    /// write): under `causeway bench`'s GETs, which follow its SETs, some
    /// hundreds per session, and a binary search through them on every read.
    fn sweep(&mut self) {
        self.reads_since_sweep = 0;
        let (through, topology) = (&self.settled_through, &self.ctx.topology);
        self.context
            .retain(|(key, dc), stamp| through.get(&(topology.partition_of(key), *dc)).is_none_or(|&t| stamp.ts > t));
    }
}

/// The fewest reads between two sweeps of a session's context.
pub(super) const SWEEP_MIN: usize = 64;

impl Client for CcLoClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        match op {
            Op::Put { key, value } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                let deps = self.context.iter().map(|((k, _), &stamp)| Dep { key: k.clone(), stamp }).collect();
                self.pending = Some(Pending::Put { key: key.clone() });
                env.send(to, Msg::PutReq { key, value, deps });
            }
            Op::Get { key } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                self.seq += 1;
                let id = RotId { nonce: self.ctx.nonce, seq: self.seq };
                self.pending = Some(Pending::Get { seq: self.seq, key: key.clone() });
                env.send(to, Msg::GetReq { id, key, lts: self.lts });
            }
            Op::Rot { keys } if keys.is_empty() => env.complete(OpResult::Rot(Vec::new())),
            Op::Rot { keys } => self.start_read(env, keys),
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, from: NodeId, msg: Msg) {
        let Some(pending) = self.pending.take() else { return };
        match (pending, msg) {
            (Pending::Put { key }, Msg::PutReply(r)) => match r {
                Ok(stamp) => {
                    // One hop: the new write stands for everything before it.
                    self.context.clear();
                    self.depend_on(key, stamp);
                    env.complete(OpResult::Put);
                }
                Err(e) => env.complete(OpResult::Failed(e)),
            },
            (Pending::Get { seq, key }, Msg::GetReply { seq: s, item }) if s == seq => match item {
                Ok(item) => {
                    let value = item.map(|item| self.read(key, item));
                    env.complete(OpResult::Get(value));
                }
                Err(e) => env.complete(OpResult::Failed(e)),
            },
            (Pending::Read(mut read), Msg::RotReply { seq, items }) if seq == read.seq => {
                let Some(positions) = read.awaiting.remove(&from) else {
                    self.pending = Some(Pending::Read(read));
                    return;
                };
                let items = match items {
                    Ok(items) if items.len() == positions.len() => items,
                    Ok(_) => return env.complete(OpResult::Failed(OpError::Aborted("malformed read reply".into()))),
                    Err(e) => return env.complete(OpResult::Failed(e)),
                };
                for (&i, item) in positions.iter().zip(items) {
                    read.items[i] = item;
                }
                if !read.awaiting.is_empty() {
                    self.pending = Some(Pending::Read(read));
                    return;
                }
                // Complete: the session now depends on what it read.
                let mut values = Vec::with_capacity(read.keys.len());
                for (key, item) in read.keys.into_iter().zip(read.items) {
                    values.push(item.map(|item| self.read(key, item)));
                }
                env.complete(OpResult::Rot(values));
            }
            (p, _) => self.pending = Some(p), // a stray or stale reply: ignore it
        }
    }

    /// A ROT attempt past `rot_timeout_us` is abandoned (its late answers
    /// carry an old id and are ignored) and run again under a new id.
    fn on_timer(&mut self, env: &mut impl ClientEnv<Msg>, token: u64) {
        match self.pending.take() {
            Some(Pending::Read(read)) if read.seq == token => {
                if read.attempts >= self.rot_attempts {
                    let why = format!("no answer from every partition in {} attempts", read.attempts);
                    env.complete(OpResult::Failed(OpError::Aborted(why)));
                } else {
                    self.send_read(env, read);
                }
            }
            p => self.pending = p,
        }
    }
}
