//! The node: by its role, a partition, a sequencer replica or a receiver;
//! timers named in one place.

use super::chain::SequencerReplica;
use super::config::Config;
use super::msg::*;
use super::partition::Partition;
use super::receiver::{Queued, Receiver};
use causeway_core::{ClientId, NodeCtx, NodeId, NodeRole, Server, ServerEnv};

crate::kit::node::server_env!();

/// The timers of every role, mapped to and from the runtime's token here.
/// The sequencer and the partitions set none (§2: no background work).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timer {
    /// ρ: the receiver's `check_pending` (Alg 5 line 3).
    CheckPending,
    /// The receiver resends apply round `id` if still unacknowledged.
    ApplyRetry(u64),
    /// A straggling partition sends the requests it held (Fig 7).
    Straggle,
}

impl Timer {
    /// A round id above the low bit (set); the other kinds even.
    pub(super) fn token(self) -> u64 {
        match self {
            Timer::CheckPending => 0,
            Timer::Straggle => 2,
            Timer::ApplyRetry(id) => (id << 1) | 1,
        }
    }
    fn from_token(token: u64) -> Timer {
        match token {
            0 => Timer::CheckPending,
            2 => Timer::Straggle,
            _ => Timer::ApplyRetry(token >> 1),
        }
    }
}

/// An S-Seq node, by role. Any other node of a shared topology (another
/// service, a second replica of a partition) is inert.
pub enum SSeqServer {
    Partition(Partition),
    Sequencer(SequencerReplica),
    Receiver(Receiver),
    Inert,
}

impl SSeqServer {
    pub(super) fn new(cfg: &Config, ctx: NodeCtx) -> SSeqServer {
        let t = ctx.topology.clone();
        if let Some((dc, p)) = crate::kit::node::served_partition(&ctx) {
            return SSeqServer::Partition(Partition::new(cfg, t, dc, p));
        }
        match ctx.role {
            NodeRole::Service { dc, service, index } if Some(service) == t.service_index(super::SEQUENCER) => {
                SSeqServer::Sequencer(SequencerReplica::new(t, dc, index as usize))
            }
            NodeRole::Service { dc, service, index: 0 } if Some(service) == t.service_index(super::RECEIVER) => {
                SSeqServer::Receiver(Receiver::new(cfg, t, dc))
            }
            _ => SSeqServer::Inert,
        }
    }

    /// The sequencer replica, if this node is one (for tests).
    pub fn sequencer(&self) -> Option<&SequencerReplica> {
        match self {
            SSeqServer::Sequencer(s) => Some(s),
            _ => None,
        }
    }

    /// The receiver, if this node is one (for tests).
    pub fn receiver(&self) -> Option<&Receiver> {
        match self {
            SSeqServer::Receiver(r) => Some(r),
            _ => None,
        }
    }
}

impl Server for SSeqServer {
    type Msg = Msg;
    type Version = Version;

    fn on_start(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        match self {
            SSeqServer::Partition(p) => p.on_start(env),
            SSeqServer::Sequencer(s) => s.on_start(env),
            SSeqServer::Receiver(r) => r.on_start(env),
            SSeqServer::Inert => {}
        }
    }

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        let me = env.node();
        let SSeqServer::Partition(p) = self else {
            if let Msg::GetReq { key } | Msg::PutReq { key, .. } = msg {
                env.reply(from, Msg::Refused { key, reason: format!("node {me} is not a partition server") });
            }
            return;
        };
        match msg {
            Msg::GetReq { key } | Msg::PutReq { key, .. } if !p.stores(me, &key) => {
                env.reply(from, Msg::Refused { key, reason: format!("node {me} does not store this key") })
            }
            Msg::GetReq { key } => p.on_get(env, from, key),
            Msg::PutReq { key, value, vclock } => p.on_put(env, from, key, value, vclock),
            _ => {} // replies and peer messages never come from clients; the runtime rejects them at the edge
        }
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, msg: Msg) {
        match (self, msg) {
            (SSeqServer::Partition(p), Msg::SeqReply { id, seq }) => p.on_seq_reply(env, id, seq),
            (SSeqServer::Partition(p), Msg::Payload { key, version }) => p.on_payload(env, key, version),
            (SSeqServer::Partition(p), Msg::Apply { round, ops }) => p.on_apply(env, from, round, ops),
            (SSeqServer::Sequencer(s), Msg::SeqReq { id }) => s.on_request(env, from, id),
            (SSeqServer::Sequencer(s), Msg::Chain { partition, id, seq }) => s.on_chain(env, from, partition, id, seq),
            (SSeqServer::Receiver(r), Msg::Ship { op }) => r.on_number(env, from, Queued::Update(op)),
            (SSeqServer::Receiver(r), Msg::Skip { seq }) => r.on_number(env, from, Queued::Skip(seq)),
            (SSeqServer::Receiver(r), Msg::Applied { round }) => r.on_applied(env, from, round),
            _ => {}
        }
    }

    fn on_timer(&mut self, env: &mut impl ServerEnv<Msg, Version>, token: u64) {
        match self {
            SSeqServer::Receiver(r) => r.on_timer(env, Timer::from_token(token)),
            SSeqServer::Partition(p) => p.on_timer(env, Timer::from_token(token)),
            _ => {}
        }
    }
}
