use super::config::*;
use super::msg::*;
use crate::kit::client::{client_servers_for, fail_unsupported};
use causeway_core::{Client, ClientCtx, ClientEnv, Hlc, Key, NodeId, Op, OpError, OpResult, vmax};
use std::collections::BTreeMap;

/// A client session, sticky to its DC. Its only causal context is `last`,
/// the snapshot it piggybacks on every request (§4): entry m is the highest
/// local timestamp it has seen (its own PUTs, and TV[m] of its ROTs),
/// entry i ≠ m the highest GSS entry it has seen. Every version it has read
/// or written has DV ≤ `last`, so a snapshot TV ≥ `last` contains its whole
/// causal past, and its snapshots never go backwards.
pub struct ContrarianClient {
    ctx: ClientCtx,
    rot_steps: u8,
    pub(super) last: Vec<Hlc>,
    /// The id of the last ROT, unique per session; the first is the clock
    /// reading at its start, so a new session (a reconnect) does not reuse
    /// ids a partition may still hold halves of.
    rot_id: u64,
    pending: Option<Pending>,
}

pub(super) enum Pending {
    Put,
    Read(Read),
}

/// A ROT (or GET, a ROT of one key) in progress.
pub(super) struct Read {
    rot: u64,
    /// A GET: complete with `OpResult::Get`.
    single: bool,
    n_keys: usize,
    /// The partitions still to answer, with the positions (in request
    /// order) of the keys each reads.
    awaiting: BTreeMap<NodeId, Vec<usize>>,
    /// 2 rounds: the coordinator, until its snapshot arrives.
    coordinator: Option<NodeId>,
    keys: Vec<Key>,
    values: Vec<Option<causeway_core::Value>>,
}

impl ContrarianClient {
    pub(super) fn new(cfg: &Config, ctx: ClientCtx) -> Self {
        let dcs = ctx.topology.dcs();
        ContrarianClient { ctx, rot_steps: cfg.rot_steps, last: vec![Hlc::ZERO; dcs], rot_id: 0, pending: None }
    }

    fn next_rot(&mut self, now_us: u64) -> u64 {
        self.rot_id = (self.rot_id + 1).max(now_us);
        self.rot_id
    }

    /// Start a ROT of `keys` (a GET when `single`): 1½ rounds, or 2 when
    /// configured and more than one partition is involved (deviation 3).
    fn start_read(&mut self, env: &mut impl ClientEnv<Msg>, keys: Vec<Key>, single: bool) {
        let Some(servers) = client_servers_for(&self.ctx, env, keys.iter().map(|k| &k[..])) else { return };
        let mut awaiting: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
        for (i, &s) in servers.iter().enumerate() {
            awaiting.entry(s).or_default().push(i);
        }
        // The coordinator: the partition of the first key (§4: "any node
        // involved in a ROT can act as the coordinator").
        let coordinator = servers[0];
        let rot = self.next_rot(env.now_us());
        let keys_of = |n: &NodeId| awaiting[n].iter().map(|&i| keys[i].clone()).collect::<Vec<Key>>();
        let two_rounds = self.rot_steps == 4 && awaiting.len() > 1;
        if two_rounds {
            env.send(coordinator, Msg::SnapshotReq { rot, last: self.last.clone() });
        } else {
            let others: Vec<NodeId> = awaiting.keys().copied().filter(|&n| n != coordinator).collect();
            let msg = Msg::RotCoord {
                session: self.ctx.nonce,
                rot,
                keys: keys_of(&coordinator),
                others: others.clone(),
                last: self.last.clone(),
            };
            env.send(coordinator, msg);
            for o in others {
                env.send(o, Msg::RotRead { session: self.ctx.nonce, rot, keys: keys_of(&o) });
            }
        }
        let n_keys = keys.len();
        self.pending = Some(Pending::Read(Read {
            rot,
            single,
            n_keys,
            awaiting,
            coordinator: two_rounds.then_some(coordinator),
            keys,
            values: vec![None; n_keys],
        }));
    }

    /// Merge a snapshot the DC handed us: `last` only grows.
    fn learn(&mut self, tv: &[Hlc]) -> Result<(), OpError> {
        if tv.len() != self.last.len() {
            return Err(OpError::Aborted("malformed snapshot in a reply".into()));
        }
        vmax(&mut self.last, tv);
        Ok(())
    }
}

impl Client for ContrarianClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        match op {
            Op::Put { key, value } => {
                let Some(to) = client_servers_for(&self.ctx, env, [&key[..]]) else { return };
                self.pending = Some(Pending::Put);
                env.send(to[0], Msg::PutReq { key, value, last: self.last.clone() });
            }
            // A GET is a ROT of one key: one partition, so one round in
            // either mode (deviation 3).
            Op::Get { key } => self.start_read(env, vec![key], true),
            Op::Rot { keys } if keys.is_empty() => env.complete(OpResult::Rot(Vec::new())),
            Op::Rot { keys } => self.start_read(env, keys, false),
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, from: NodeId, msg: Msg) {
        let Some(pending) = self.pending.take() else { return };
        match (pending, msg) {
            (Pending::Put, Msg::PutReply(r)) => {
                let m = self.ctx.dc.idx();
                let done = r.and_then(|ok| {
                    let mut seen = ok.gss;
                    if seen.len() == self.last.len() {
                        seen[m] = ok.ts;
                    }
                    self.learn(&seen)
                });
                env.complete(done.map_or_else(OpResult::Failed, |()| OpResult::Put));
            }
            (Pending::Read(mut read), Msg::SnapshotReply { rot, tv }) if rot == read.rot => {
                if read.coordinator != Some(from) {
                    self.pending = Some(Pending::Read(read)); // not asked: ignore
                    return;
                }
                read.coordinator = None;
                match tv.and_then(|tv| self.learn(&tv).map(|()| tv)) {
                    Ok(tv) => {
                        // Second round: every partition reads at TV.
                        for (&n, positions) in &read.awaiting {
                            let keys = positions.iter().map(|&i| read.keys[i].clone()).collect();
                            env.send(n, Msg::RotReadAt { rot, keys, tv: tv.clone() });
                        }
                        self.pending = Some(Pending::Read(read));
                    }
                    Err(e) => env.complete(OpResult::Failed(e)),
                }
            }
            (Pending::Read(mut read), Msg::RotSlice { rot, slice })
                if rot == read.rot && read.coordinator.is_none() =>
            {
                let Some(positions) = read.awaiting.remove(&from) else {
                    self.pending = Some(Pending::Read(read)); // a duplicate or stray slice
                    return;
                };
                let absorbed = slice.and_then(|s| {
                    if s.values.len() != positions.len() {
                        return Err(OpError::Aborted("a partition answered a different number of keys".into()));
                    }
                    self.learn(&s.tv)?;
                    for (&i, v) in positions.iter().zip(s.values) {
                        read.values[i] = v;
                    }
                    Ok(())
                });
                match absorbed {
                    Err(e) => env.complete(OpResult::Failed(e)),
                    Ok(()) if !read.awaiting.is_empty() => self.pending = Some(Pending::Read(read)),
                    Ok(()) if read.single => {
                        env.complete(OpResult::Get(read.values.pop().flatten()));
                    }
                    Ok(()) => {
                        debug_assert_eq!(read.values.len(), read.n_keys);
                        env.complete(OpResult::Rot(read.values));
                    }
                }
            }
            (p, _) => self.pending = Some(p), // a stray reply (an earlier ROT's): ignore it
        }
    }
}
