//! The node: by its role, a partition (Alg 2), a Eunomia replica (Alg 3,
//! Alg 4) or a receiver (Alg 5); timers named in one place.

use super::config::Config;
use super::eunomia::EunomiaReplica;
use super::msg::*;
use super::partition::Partition;
use super::receiver::Receiver;
use causeway_core::{ClientId, NodeCtx, NodeId, NodeRole, Server, ServerEnv};

crate::kit::node::server_env!();

/// The timers of every role, mapped to and from the runtime's token here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timer {
    /// A partition's metadata batch (§5, every 1 ms in the paper), and
    /// its heartbeat once it has been quiet for Δ (Alg 2 line 10).
    Tick,
    /// θ: Eunomia's `process_stable` (Alg 3 line 7, Alg 4 line 6).
    ProcessStable,
    /// The Eunomia replicas' failure detector.
    Fd,
    /// The receiver resends apply round `id` if still unacknowledged.
    ApplyRetry(u64),
    /// The receiver sends the `Shipped` acknowledgements it held back.
    Acks,
    /// ρ: the receiver may start its next apply round.
    CheckPending,
}

impl Timer {
    /// The kind in the low three bits, a round id above them.
    pub(super) fn token(self) -> u64 {
        match self {
            Timer::Tick => 0,
            Timer::ProcessStable => 2,
            Timer::Fd => 3,
            Timer::ApplyRetry(id) => (id << 3) | 4,
            Timer::Acks => 5,
            Timer::CheckPending => 6,
        }
    }
    fn from_token(token: u64) -> Timer {
        match token & 7 {
            0 => Timer::Tick,
            2 => Timer::ProcessStable,
            3 => Timer::Fd,
            5 => Timer::Acks,
            6 => Timer::CheckPending,
            _ => Timer::ApplyRetry(token >> 3),
        }
    }
}

/// A EunomiaKV node, by role. Any other node of a shared topology (another
/// service, a second replica of a partition) is inert.
pub enum EunomiaKvServer {
    Partition(Partition),
    Eunomia(EunomiaReplica),
    Receiver(Receiver),
    Inert,
}

impl EunomiaKvServer {
    pub(super) fn new(cfg: &Config, ctx: NodeCtx) -> EunomiaKvServer {
        let t = ctx.topology.clone();
        if let Some((dc, p)) = crate::kit::node::served_partition(&ctx) {
            return EunomiaKvServer::Partition(Partition::new(cfg, t, dc, p));
        }
        match ctx.role {
            NodeRole::Service { dc, service, index } if Some(service) == t.service_index(super::EUNOMIA) => {
                EunomiaKvServer::Eunomia(EunomiaReplica::new(cfg, t, dc, index as usize))
            }
            NodeRole::Service { dc, service, index: 0 } if Some(service) == t.service_index(super::RECEIVER) => {
                EunomiaKvServer::Receiver(Receiver::new(cfg, t, dc))
            }
            _ => EunomiaKvServer::Inert,
        }
    }

    /// The Eunomia replica, if this node is one (for tests).
    pub fn eunomia(&self) -> Option<&EunomiaReplica> {
        match self {
            EunomiaKvServer::Eunomia(e) => Some(e),
            _ => None,
        }
    }

    /// The receiver, if this node is one (for tests).
    pub fn receiver(&self) -> Option<&Receiver> {
        match self {
            EunomiaKvServer::Receiver(r) => Some(r),
            _ => None,
        }
    }
}

impl Server for EunomiaKvServer {
    type Msg = Msg;
    type Version = Version;

    fn on_start(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        match self {
            EunomiaKvServer::Partition(p) => p.on_start(env),
            EunomiaKvServer::Eunomia(e) => e.on_start(env),
            EunomiaKvServer::Receiver(r) => r.on_start(env),
            EunomiaKvServer::Inert => {}
        }
    }

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        let me = env.node();
        let EunomiaKvServer::Partition(p) = self else {
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
            (EunomiaKvServer::Partition(p), Msg::Payload { key, version }) => p.on_payload(env, key, version),
            (EunomiaKvServer::Partition(p), Msg::Apply { round, ops }) => p.on_apply(env, from, round, ops),
            (EunomiaKvServer::Eunomia(e), Msg::Report { partition, ops, partition_time_us }) => {
                e.on_report(env, partition, ops, partition_time_us)
            }
            (EunomiaKvServer::Eunomia(e), Msg::Heartbeat { partition, partition_time_us }) => {
                e.on_heartbeat(partition, partition_time_us)
            }
            (EunomiaKvServer::Eunomia(e), Msg::ReplicaBeat { stable_us }) => e.on_beat(from, stable_us),
            (EunomiaKvServer::Eunomia(e), Msg::Shipped { through_us }) => e.on_shipped(env, from, through_us),
            (EunomiaKvServer::Receiver(r), Msg::Ship { from_us, to_us, ops }) => {
                r.on_ship(env, from, from_us, to_us, ops.into_ops())
            }
            (EunomiaKvServer::Receiver(r), Msg::Applied { round }) => r.on_applied(env, from, round),
            _ => {}
        }
    }

    fn on_timer(&mut self, env: &mut impl ServerEnv<Msg, Version>, token: u64) {
        let timer = Timer::from_token(token);
        match self {
            EunomiaKvServer::Partition(p) => p.on_timer(env, timer),
            EunomiaKvServer::Eunomia(e) => e.on_timer(env, timer),
            EunomiaKvServer::Receiver(r) => r.on_timer(env, timer),
            EunomiaKvServer::Inert => {}
        }
    }
}
