use super::config::*;
use super::msg::*;
use crate::kit::client::{client_server_for, fail_unsupported, send_for_key};
use causeway_core::{Client, ClientCtx, ClientEnv, NodeId, Op, OpError, OpResult};

/// A client session c: DT_c and GST_c, both scalars.
pub struct GentleRainClient {
    ctx: ClientCtx,
    /// DT_c: the largest `ut` this session has read or written.
    dt: TimeUs,
    /// GST_c: the largest GST this session has been told by its DC.
    gst: TimeUs,
    pending: Option<Pending>,
}

impl GentleRainClient {
    pub(super) fn new(_cfg: &Config, ctx: ClientCtx) -> GentleRainClient {
        GentleRainClient { ctx, dt: 0, gst: 0, pending: None }
    }
}

pub(super) enum Pending {
    Get,
    Put,
    Rot { keys: usize },
}

impl Client for GentleRainClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        match op {
            // GET(k): send ⟨GetReq k, GST_c⟩.
            Op::Get { key } => {
                if send_for_key(&self.ctx, env, key, |key| Msg::GetReq { key, gst: self.gst }) {
                    self.pending = Some(Pending::Get);
                }
            }
            // PUT(k, v): send ⟨PutReq k, v, DT_c⟩ (and GST_c, deviation 1).
            Op::Put { key, value } => {
                let (dt, gst) = (self.dt, self.gst);
                if send_for_key(&self.ctx, env, key, |key| Msg::PutReq { key, value, dt, gst }) {
                    self.pending = Some(Pending::Put);
                }
            }
            // GET-ROTX(keys): the coordinator is the server of the first key.
            Op::Rot { keys } => {
                let Some(first) = keys.first() else {
                    env.complete(OpResult::Rot(Vec::new()));
                    return;
                };
                let Some(to) = client_server_for(&self.ctx, env, first) else { return };
                self.pending = Some(Pending::Rot { keys: keys.len() });
                env.send(to, Msg::RotReq { keys, dt: self.dt, gst: self.gst });
            }
            #[allow(unreachable_patterns)]
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, _from: NodeId, msg: Msg) {
        match (self.pending.take(), msg) {
            (Some(Pending::Get), Msg::GetReply { value, ut, gst }) => {
                self.dt = self.dt.max(ut);
                self.gst = self.gst.max(gst);
                env.complete(OpResult::Get(value));
            }
            (Some(Pending::Put), Msg::PutReply { ut }) => {
                self.dt = self.dt.max(ut);
                env.complete(OpResult::Put);
            }
            (Some(Pending::Rot { keys }), Msg::RotReply { outcome, gst }) => {
                self.gst = self.gst.max(gst);
                env.complete(match outcome {
                    RotOutcome::Read { values, max_ut } if values.len() == keys => {
                        self.dt = self.dt.max(max_ut);
                        OpResult::Rot(values)
                    }
                    RotOutcome::Read { values, .. } => OpResult::Failed(OpError::BadRequest(format!(
                        "coordinator returned {} values for {keys} keys",
                        values.len()
                    ))),
                    RotOutcome::Aborted { reason } => OpResult::Failed(OpError::Aborted(reason)),
                });
            }
            (Some(Pending::Get | Pending::Put), Msg::Refused { reason }) => {
                env.complete(OpResult::Failed(OpError::BadRequest(reason)))
            }
            (p, _) => self.pending = p, // a stray reply: ignore it
        }
    }
}
