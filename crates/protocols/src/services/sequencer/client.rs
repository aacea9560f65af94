//! The client (as EunomiaKV's Alg 1, with vectors as §4): it keeps VClock_c,
//! its causal past (one entry per DC), sends it with every update, and
//! merges what it reads.

use super::config::*;
use super::msg::*;
use crate::kit::client::{fail_unsupported, send_for_key};
use causeway_core::{Client, ClientCtx, ClientEnv, NodeId, Op, OpError, OpResult};

pub struct SSeqClient {
    ctx: ClientCtx,
    /// VClock_c: the largest timestamp per DC this session has seen (read
    /// or written).
    vclock: Vec<u64>,
    pending: Option<Pending>,
}

enum Pending {
    Get,
    Put,
}

impl SSeqClient {
    pub(super) fn new(_cfg: &Config, ctx: ClientCtx) -> SSeqClient {
        let m = ctx.topology.dcs();
        SSeqClient { ctx, vclock: vec![0; m], pending: None }
    }

    /// The session's causal past (for tests).
    pub fn vclock(&self) -> &[u64] {
        &self.vclock
    }
}

impl Client for SSeqClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        match op {
            // Alg 1 lines 1–2: read from the key's partition in this DC.
            Op::Get { key } => {
                if send_for_key(&self.ctx, env, key, |key| Msg::GetReq { key }) {
                    self.pending = Some(Pending::Get);
                }
            }
            // Alg 1 line 7: send the update with the causal past.
            Op::Put { key, value } => {
                let vclock = self.vclock.clone();
                if send_for_key(&self.ctx, env, key, |key| Msg::PutReq { key, value, vclock }) {
                    self.pending = Some(Pending::Put);
                }
            }
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, _from: NodeId, msg: Msg) {
        match (self.pending.take(), msg) {
            (Some(Pending::Get), Msg::GetReply { value, vts, .. }) => {
                // Alg 1 line 4, with vectors (§4): VClock_c ← max(VClock_c, vts).
                if vts.len() == self.vclock.len() {
                    causeway_core::vmax(&mut self.vclock, &vts);
                }
                env.complete(OpResult::Get(value));
            }
            (Some(Pending::Put), Msg::PutReply { vts }) => {
                // Alg 1 line 9: u.vts is known to dominate VClock_c (§4).
                assert!(causeway_core::vleq(&self.vclock, &vts), "an update's vts below the session's causal past");
                self.vclock = vts;
                env.complete(OpResult::Put);
            }
            (Some(_), Msg::Refused { reason, .. }) => env.complete(OpResult::Failed(OpError::BadRequest(reason))),
            (p, _) => self.pending = p, // a stray reply: ignore it
        }
    }
}
