use super::config::*;
use super::grouping::Groups;
use super::msg::*;
use crate::kit::client::{client_server_for, fail_unsupported};
use causeway_core::{Client, ClientCtx, ClientEnv, NodeId, Op, OpResult};

/// Client c of Alg 7.1.
pub struct AccfClient {
    ctx: ClientCtx,
    groups: Groups,
    /// DSc: per tracking group, the highest timestamp of the versions this
    /// session has read or written that were written in that group.
    pub(super) ds: Deps,
    pending: Option<Pending>,
}

enum Pending {
    Get,
    Put,
}

impl AccfClient {
    pub(super) fn new(cfg: &Config, ctx: ClientCtx) -> Self {
        let groups = cfg.resolve(&ctx.topology).expect("a validated config (Protocol::validate)");
        AccfClient { ctx, groups, ds: Deps::default(), pending: None }
    }
}

impl Client for AccfClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        match op {
            // Alg 7.1 lines 1–4. The load balancer L is the kit's routing:
            // the key's server in this DC, or in the nearest DC storing it.
            // The checking group is that server's first: a session reading
            // in one DC under a per-replica C stays in one group, and so
            // never waits (§7.2.2).
            Op::Get { key } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                let cg = self.groups.home_checking(to).expect("every server has a checking group");
                env.send(to, Msg::GetReq(Box::new(GetReq { key, cg, ds: self.ds.clone() })));
                self.pending = Some(Pending::Get);
            }
            // Alg 7.1 lines 7–9.
            Op::Put { key, value } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                env.send(to, Msg::PutReq(Box::new(PutReq { key, value, ds: self.ds.clone() })));
                self.pending = Some(Pending::Put);
            }
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, _from: NodeId, msg: Msg) {
        match (self.pending.take(), msg) {
            // Alg 7.1 lines 5–6: DSc = max(DSc, d.ds).
            (Some(Pending::Get), Msg::GetReply(Ok(ok))) => {
                self.ds.merge(&ok.ds);
                env.complete(OpResult::Get(ok.value));
            }
            // Alg 7.1 lines 10–11: DSc = max(DSc, ⟨tg, ut⟩).
            (Some(Pending::Put), Msg::PutReply(Ok(stamp))) => {
                self.ds.raise(stamp.tg, stamp.ut);
                env.complete(OpResult::Put);
            }
            (Some(Pending::Get), Msg::GetReply(Err(e))) | (Some(Pending::Put), Msg::PutReply(Err(e))) => {
                env.complete(OpResult::Failed(e));
            }
            (p, _) => self.pending = p, // a stray reply: ignore it
        }
    }
}
