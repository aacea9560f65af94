use super::config::*;
use super::msg::*;
use crate::explicit_deps::replication::{Dep, Stamp};
use crate::kit::client::{client_server_for, fail_unsupported, send_for_key};
use causeway_core::{Client, ClientCtx, ClientEnv, Key, NodeId, Op, OpError, OpResult};
use std::collections::BTreeMap;

/// A session (the paper's actor): its context of one-hop dependencies.
pub struct CopsClient {
    ctx: ClientCtx,
    /// (key, origin) → the newest stamp of it read or written since the
    /// last write (deviation 2).
    context: BTreeMap<(Key, NodeId), Stamp>,
    pending: Option<Pending>,
}

impl CopsClient {
    pub(super) fn new(_cfg: &Config, ctx: ClientCtx) -> CopsClient {
        CopsClient { ctx, context: BTreeMap::new(), pending: None }
    }
}

pub(super) enum Pending {
    Get { key: Key },
    Put { key: Key },
}

impl Client for CopsClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        match op {
            // read(key): read_by_time(key, LATEST) at the local owner (§2.8).
            Op::Get { key } => {
                let pending = Pending::Get { key: key.clone() };
                if send_for_key(&self.ctx, env, key, |key| Msg::GetReq { key }) {
                    self.pending = Some(pending);
                }
            }
            // write(key, value): the context is the write's one-hop
            // dependencies (§2.6 step 1).
            Op::Put { key, value } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                let deps = self.context.iter().map(|((k, _), &stamp)| Dep { key: k.clone(), stamp }).collect();
                self.pending = Some(Pending::Put { key: key.clone() });
                env.send(to, Msg::PutReq { key, value, deps });
            }
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, _from: NodeId, msg: Msg) {
        match (self.pending.take(), msg) {
            (Some(Pending::Get { key }), Msg::GetReply { value, stamp, never_depend }) => {
                // A version committed everywhere constrains no write (§6.1).
                if value.is_some() && !never_depend {
                    let e = self.context.entry((key, stamp.origin())).or_default();
                    *e = (*e).max(stamp);
                }
                env.complete(OpResult::Get(value));
            }
            // Clear the context and repopulate it with the write alone
            // (§2.3): it covers everything it depended on.
            (Some(Pending::Put { key }), Msg::PutReply { result }) => match result {
                Ok(stamp) => {
                    self.context.clear();
                    self.context.insert((key, stamp.origin()), stamp);
                    env.complete(OpResult::Put);
                }
                Err(why) => env.complete(OpResult::Failed(OpError::BadRequest(why))),
            },
            (Some(_), Msg::Refused { reason }) => env.complete(OpResult::Failed(OpError::BadRequest(reason))),
            (p, _) => self.pending = p, // a stray reply: ignore it
        }
    }
}
