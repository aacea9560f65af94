use super::config::*;
use super::grouping::Groups;
use super::msg::*;
use crate::kit::client::{client_server_for, fail_unsupported};
use causeway_core::{CheckingGroupError, Client, ClientCtx, ClientEnv, NodeId, Op, OpResult};

/// Client c of Alg 7.1.
pub struct AccfClient {
    ctx: ClientCtx,
    groups: Groups,
    /// DSc: per tracking group, the highest timestamp of the versions this
    /// session has read or written that were written in that group.
    pub(super) ds: Deps,
    /// The checking group the session's GETs name (Alg 7.1's `cg`), if
    /// the application named one; `None`: the first group of the server
    /// each GET goes to.
    cg: Option<u16>,
    pending: Option<Pending>,
}

enum Pending {
    Get,
    Put,
}

impl AccfClient {
    pub(super) fn new(cfg: &Config, ctx: ClientCtx) -> Self {
        let groups = cfg.resolve(&ctx.topology).expect("a validated config (Protocol::validate)");
        AccfClient { ctx, groups, ds: Deps::default(), cg: None, pending: None }
    }
}

impl Client for AccfClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        match op {
            // Alg 7.1 lines 1–4. With no group named, the load balancer L
            // is the kit's routing (the key's server in this DC, or in the
            // nearest DC storing it) and the checking group that server's
            // first: a session reading in one DC under a per-replica C
            // stays in one group, and so never waits (§7.2.2). A named
            // group is asked of a server in it (`Groups::server_in`).
            Op::Get { key } => {
                let (to, cg) = match self.cg {
                    None => {
                        let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                        (to, self.groups.home_checking(to).expect("every server has a checking group"))
                    }
                    Some(cg) => {
                        let (t, p) = (&self.ctx.topology, self.ctx.topology.partition_of(&key));
                        match self.groups.server_in(cg, t, self.ctx.dc, p) {
                            Some(to) => (to, cg),
                            None => {
                                let e = CheckingGroupError::NoServer { group: cg, partition: p.0 };
                                return env.complete(OpResult::Failed(e.into()));
                            }
                        }
                    }
                };
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

    /// Alg 7.1's `cg`, named by the application for the following GETs.
    fn set_checking_group(&mut self, cg: Option<u16>) -> Result<(), CheckingGroupError> {
        let groups = self.groups.checking_count();
        match cg {
            Some(group) if group as usize >= groups => {
                Err(CheckingGroupError::OutOfRange { group, groups: groups.min(u16::MAX as usize) as u16 })
            }
            _ => {
                self.cg = cg;
                Ok(())
            }
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
