use super::config::*;
use super::msg::*;
use crate::kit::client::{client_servers_for, fail_unsupported};
use causeway_core::{Client, ClientCtx, ClientEnv, Key, NodeId, Op, OpError, OpResult, TimeVec, Value, vmax};
use std::collections::BTreeMap;

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
    Read(Read),
}

pub(super) struct Read {
    rot: u64,
    single: bool,
    awaiting: BTreeMap<NodeId, Vec<usize>>,
    /// The coordinator, until its snapshot arrives (a ROT of more than one
    /// partition takes two rounds).
    coordinator: Option<NodeId>,
    keys: Vec<Key>,
    values: Vec<Option<Value>>,
}

impl CureClient {
    pub(super) fn new(_cfg: &Config, ctx: ClientCtx) -> Self {
        let dcs = ctx.topology.dcs();
        CureClient { ctx, last: vec![0; dcs], rot_id: 0, pending: None }
    }

    fn start_read(&mut self, env: &mut impl ClientEnv<Msg>, keys: Vec<Key>, single: bool) {
        let Some(servers) = client_servers_for(&self.ctx, env, keys.iter().map(|k| &k[..])) else { return };
        let mut awaiting: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
        for (i, &s) in servers.iter().enumerate() {
            awaiting.entry(s).or_default().push(i);
        }
        self.rot_id = (self.rot_id + 1).max(env.now_us());
        let rot = self.rot_id;
        let coordinator = servers[0];
        if awaiting.len() == 1 {
            env.send(coordinator, Msg::ReadOne { rot, keys: keys.clone(), last: TimeVec::from_slice(&self.last) });
        } else {
            env.send(coordinator, Msg::SnapshotReq { rot, last: self.last.clone() });
        }
        let n = keys.len();
        let coordinator = (awaiting.len() > 1).then_some(coordinator);
        self.pending = Some(Pending::Read(Read { rot, single, awaiting, coordinator, keys, values: vec![None; n] }));
    }

    fn learn(&mut self, tv: &[TimeUs]) -> Result<(), OpError> {
        if tv.len() != self.last.len() {
            return Err(OpError::Aborted("malformed snapshot in a reply".into()));
        }
        vmax(&mut self.last, tv);
        Ok(())
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
        match (pending, msg) {
            (Pending::Put, Msg::PutReply(r)) => {
                let m = self.ctx.dc.idx();
                let done = r.and_then(|ok| {
                    let mut seen = ok.gst;
                    if seen.len() == self.last.len() {
                        seen[m] = ok.ts;
                    }
                    self.learn(&seen)
                });
                env.complete(done.map_or_else(OpResult::Failed, |()| OpResult::Put));
            }
            (Pending::Read(mut read), Msg::SnapshotReply { rot, tv }) if rot == read.rot => {
                if read.coordinator != Some(from) {
                    self.pending = Some(Pending::Read(read));
                    return;
                }
                read.coordinator = None;
                match tv.and_then(|tv| self.learn(&tv).map(|()| tv)) {
                    Ok(tv) => {
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
                    self.pending = Some(Pending::Read(read));
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
                    Ok(()) if read.single => env.complete(OpResult::Get(read.values.pop().flatten())),
                    Ok(()) => env.complete(OpResult::Rot(read.values)),
                }
            }
            (p, _) => self.pending = Some(p), // a stray reply: ignore it
        }
    }
}
