use super::config::*;
use super::msg::*;
use crate::kit::client::{client_servers_for, fail_unsupported};
use crate::stabilization::snapshot_read::{SnapshotRead, learn, learn_put};
use causeway_core::{Client, ClientCtx, ClientEnv, Key, NodeId, Op, OpResult, TimeVec};

/// A client session, sticky to its DC: `last`, the snapshot it piggybacks
/// (entry m its highest local timestamp seen, entry i ≠ m its highest GST
/// entry seen). Every version it has read or written has DV ≤ `last`.
pub struct CureClient {
    ctx: ClientCtx,
    pub(super) last: Vec<TimeUs>,
    rot_id: u64,
    pending: Option<Pending>,
}

pub(super) enum Pending {
    Put,
    Read(SnapshotRead),
}

impl CureClient {
    pub(super) fn new(_cfg: &Config, ctx: ClientCtx) -> Self {
        let dcs = ctx.topology.dcs();
        CureClient { ctx, last: vec![0; dcs], rot_id: 0, pending: None }
    }

    /// One partition: one round (`ReadOne`, deviation 1); more: the
    /// coordinator's snapshot first, then every partition reads at it.
    fn start_read(&mut self, env: &mut impl ClientEnv<Msg>, keys: Vec<Key>, single: bool) {
        let Some(servers) = client_servers_for(&self.ctx, env, keys.iter().map(|k| &k[..])) else { return };
        self.rot_id = (self.rot_id + 1).max(env.now_us());
        let rot = self.rot_id;
        let coordinator = servers[0];
        let mut read = SnapshotRead::new(rot, single, keys, &servers);
        if read.partitions() == 1 {
            let keys = read.keys_for(coordinator);
            env.send(coordinator, Msg::ReadOne { rot, keys, last: TimeVec::from_slice(&self.last) });
        } else {
            env.send(coordinator, Msg::SnapshotReq { rot, last: self.last.clone() });
            read.await_snapshot(coordinator);
        }
        self.pending = Some(Pending::Read(read));
    }
}

impl Client for CureClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        match op {
            Op::Put { key, value } => {
                let Some(to) = client_servers_for(&self.ctx, env, [&key[..]]) else { return };
                self.pending = Some(Pending::Put);
                env.send(to[0], Msg::PutReq { key, value, last: TimeVec::from_slice(&self.last) });
            }
            Op::Get { key } => self.start_read(env, vec![key], true),
            Op::Rot { keys } if keys.is_empty() => env.complete(OpResult::Rot(Vec::new())),
            Op::Rot { keys } => self.start_read(env, keys, false),
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, from: NodeId, msg: Msg) {
        let Some(pending) = self.pending.take() else { return };
        let (last, m) = (&mut self.last, self.ctx.dc.idx());
        self.pending = match (pending, msg) {
            (Pending::Put, Msg::PutReply(r)) => {
                let done = r.and_then(|ok| learn_put(last, m, ok.gst, ok.ts));
                env.complete(done.map_or_else(OpResult::Failed, |()| OpResult::Put));
                None
            }
            (Pending::Read(read), Msg::SnapshotReply { rot, tv }) if rot == read.rot => read
                .on_snapshot(env, from, tv, |tv| learn(last, tv), |rot, keys, tv| Msg::RotReadAt { rot, keys, tv })
                .map(Pending::Read),
            (Pending::Read(read), Msg::RotSlice { rot, slice }) if rot == read.rot => {
                let slice = slice.map(|s| (s.values, s.tv));
                read.on_slice(env, from, slice, |tv| learn(last, tv)).map(Pending::Read)
            }
            (p, _) => Some(p), // a stray reply: ignore it
        };
    }
}
