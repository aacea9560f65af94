//! The client of the service-node stores (EunomiaKV's Alg 1, which S-Seq's
//! sessions share, Gunawardhana et al. §3 and §4): it keeps VClock_c, its
//! causal past (one entry per DC), sends it with every update, and merges
//! what it reads. The two protocols differ in their servers only; each
//! names its own client-facing messages through [`VectorMsgs`].

use crate::kit::client::{fail_unsupported, send_for_key};
use causeway_core::{Client, ClientCtx, ClientEnv, Key, Message, NodeId, Op, OpError, OpResult, Value};
use std::marker::PhantomData;

/// What a [`VectorClient`] sends and understands of its protocol's messages.
pub trait VectorMsgs: Message + Sized {
    fn get_req(key: Key) -> Self;
    /// An update with the session's causal past VClock_c.
    fn put_req(key: Key, value: Value, vclock: Vec<u64>) -> Self;
    fn into_reply(self) -> VectorReply;
}

/// A reply, as the client reads it.
pub enum VectorReply {
    /// The value read (if any) and its vector timestamp.
    Get { value: Option<Value>, vts: Vec<u64> },
    /// The update's vector timestamp u.vts.
    Put { vts: Vec<u64> },
    /// A typed refusal (a misrouted key, a malformed causal past).
    Refused { reason: String },
    /// Not a reply to a client.
    Other,
}

pub struct VectorClient<M> {
    ctx: ClientCtx,
    /// VClock_c: the largest timestamp per DC this session has seen (read
    /// or written).
    vclock: Vec<u64>,
    pending: Option<Pending>,
    msgs: PhantomData<M>,
}

enum Pending {
    Get,
    Put,
}

impl<M> VectorClient<M> {
    /// `_cfg`: the protocol's config (the client needs none of it).
    pub fn new<C>(_cfg: &C, ctx: ClientCtx) -> VectorClient<M> {
        let m = ctx.topology.dcs();
        VectorClient { ctx, vclock: vec![0; m], pending: None, msgs: PhantomData }
    }

    /// The session's causal past (for tests).
    pub fn vclock(&self) -> &[u64] {
        &self.vclock
    }
}

impl<M: VectorMsgs> Client for VectorClient<M> {
    type Msg = M;

    fn invoke(&mut self, env: &mut impl ClientEnv<M>, op: Op) {
        match op {
            // Alg 1 lines 1–2: read from the key's partition in this DC.
            Op::Get { key } => {
                if send_for_key(&self.ctx, env, key, M::get_req) {
                    self.pending = Some(Pending::Get);
                }
            }
            // Alg 1 line 7: send the update with the causal past.
            Op::Put { key, value } => {
                let vclock = self.vclock.clone();
                if send_for_key(&self.ctx, env, key, |key| M::put_req(key, value, vclock)) {
                    self.pending = Some(Pending::Put);
                }
            }
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<M>, _from: NodeId, msg: M) {
        match (self.pending.take(), msg.into_reply()) {
            (Some(Pending::Get), VectorReply::Get { value, vts }) => {
                // Alg 1 line 4, with vectors (§4): VClock_c ← max(VClock_c, vts).
                if vts.len() == self.vclock.len() {
                    causeway_core::vmax(&mut self.vclock, &vts);
                }
                env.complete(OpResult::Get(value));
            }
            (Some(Pending::Put), VectorReply::Put { vts }) => {
                // Alg 1 line 9: u.vts is known to dominate VClock_c (§4).
                assert!(causeway_core::vleq(&self.vclock, &vts), "an update's vts below the session's causal past");
                self.vclock = vts;
                env.complete(OpResult::Put);
            }
            (Some(_), VectorReply::Refused { reason }) => env.complete(OpResult::Failed(OpError::BadRequest(reason))),
            (p, _) => self.pending = p, // a stray reply: ignore it
        }
    }
}
