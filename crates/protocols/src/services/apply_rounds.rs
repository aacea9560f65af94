//! A partition's side of the receiver's apply rounds (EunomiaKV's Alg 5
//! lines 14–15, which S-Seq's receiver shares): each round's ops are made
//! visible in the order the receiver listed them, and the round is
//! acknowledged once all are. An op whose payload has not arrived stops
//! its round and every later one, as they may depend on it.

use causeway_core::NodeId;
use std::collections::VecDeque;

/// A receiver's apply round waiting here for payloads.
struct Awaiting<Op> {
    receiver: NodeId,
    round: u64,
    /// Not yet visible, in the order the receiver listed them.
    ops: VecDeque<Op>,
}

/// The apply rounds not yet acknowledged, oldest first.
pub struct ApplyRounds<Op> {
    awaiting: VecDeque<Awaiting<Op>>,
}

impl<Op> Default for ApplyRounds<Op> {
    fn default() -> Self {
        ApplyRounds { awaiting: VecDeque::new() }
    }
}

impl<Op> ApplyRounds<Op> {
    /// Queue round `round` of `receiver`. A resent round (the receiver
    /// restarted, or retried) already queued is not queued twice; one
    /// already done is applied again, which changes nothing, and
    /// acknowledged again.
    pub fn add(&mut self, receiver: NodeId, round: u64, ops: Vec<Op>) {
        if !self.awaiting.iter().any(|a| a.receiver == receiver && a.round == round) {
            self.awaiting.push_back(Awaiting { receiver, round, ops: ops.into() });
        }
    }

    /// Apply what can be, in order: `make_visible` is true when the op is
    /// done, false while its payload is missing; `ack(receiver, round)`
    /// for each round finished.
    pub fn progress(&mut self, mut make_visible: impl FnMut(&Op) -> bool, mut ack: impl FnMut(NodeId, u64)) {
        while let Some(front) = self.awaiting.front_mut() {
            while let Some(op) = front.ops.front() {
                if !make_visible(op) {
                    return;
                }
                front.ops.pop_front();
            }
            let done = self.awaiting.pop_front().expect("front");
            ack(done.receiver, done.round);
        }
    }
}
