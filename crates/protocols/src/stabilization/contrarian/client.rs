use super::config::*;
use super::msg::*;
use crate::kit::client::{client_servers_for, fail_unsupported};
use crate::stabilization::snapshot_read::{SnapshotRead, learn, learn_put};
use causeway_core::{Client, ClientCtx, ClientEnv, Hlc, Key, NodeId, Op, OpResult};

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
    Read(SnapshotRead),
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
        // The coordinator: the partition of the first key (§4: "any node
        // involved in a ROT can act as the coordinator").
        let coordinator = servers[0];
        let rot = self.next_rot(env.now_us());
        let mut read = SnapshotRead::new(rot, single, keys, &servers);
        if self.rot_steps == 4 && read.partitions() > 1 {
            env.send(coordinator, Msg::SnapshotReq { rot, last: self.last.clone() });
            read.await_snapshot(coordinator);
        } else {
            let others: Vec<NodeId> = read.servers().filter(|&n| n != coordinator).collect();
            let msg = Msg::RotCoord {
                session: self.ctx.nonce,
                rot,
                keys: read.keys_for(coordinator),
                others: others.clone(),
                last: self.last.clone(),
            };
            env.send(coordinator, msg);
            for o in others {
                env.send(o, Msg::RotRead { session: self.ctx.nonce, rot, keys: read.keys_for(o) });
            }
        }
        self.pending = Some(Pending::Read(read));
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
        // `last` only grows with every vector the DC hands the session.
        let (last, m) = (&mut self.last, self.ctx.dc.idx());
        self.pending = match (pending, msg) {
            (Pending::Put, Msg::PutReply(r)) => {
                let done = r.and_then(|ok| learn_put(last, m, ok.gss, ok.ts));
                env.complete(done.map_or_else(OpResult::Failed, |()| OpResult::Put));
                None
            }
            // Second round: every partition reads at TV.
            (Pending::Read(read), Msg::SnapshotReply { rot, tv }) if rot == read.rot => read
                .on_snapshot(env, from, tv, |tv| learn(last, tv), |rot, keys, tv| Msg::RotReadAt { rot, keys, tv })
                .map(Pending::Read),
            (Pending::Read(read), Msg::RotSlice { rot, slice }) if rot == read.rot => {
                let slice = slice.map(|s| (s.values, s.tv));
                read.on_slice(env, from, slice, |tv| learn(last, tv)).map(Pending::Read)
            }
            (p, _) => Some(p), // a stray reply (an earlier ROT's): ignore it
        };
    }
}
