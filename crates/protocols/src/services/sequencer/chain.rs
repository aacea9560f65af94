//! The per-DC sequencer (§2, §7.1): it hands out the DC's update numbers,
//! 1, 2, 3, …, in the order requests reach it. With r > 1 replicas it is
//! chain-replicated (van Renesse and Schneider, "Chain Replication for
//! Supporting High Throughput and Availability", OSDI 2004), as the
//! paper's fault-tolerant sequencer (§7.1: "Replicas of the sequencer are
//! organized in a chain. Partitions send requests to the head of the
//! chain. Requests traverse the chain up to the tail. When the tail
//! receives a request, it replies back to the partition"): the head
//! assigns, every replica journals the number before it passes it on, and
//! the tail answers, so a number a partition holds is durable at every
//! replica.

use super::msg::*;
use super::server::Env;
use causeway_core::{DcId, NodeId, Topology};
use std::sync::Arc;

pub struct SequencerReplica {
    /// This replica's place in the chain: 0 is the head, the last the tail.
    index: usize,
    /// The chain, head first: the DC's `sequencer` service instances.
    chain: Vec<NodeId>,
    /// The head: the last number assigned; any other replica: the last
    /// number it holds. Journaled in the turn that changes it, before the
    /// number moves on (persist, then send), so a restart resumes above
    /// every number that left this replica.
    last: u64,
}

impl SequencerReplica {
    pub(super) fn new(topology: Arc<Topology>, dc: DcId, index: usize) -> SequencerReplica {
        let chain = topology.service_nodes(dc, super::sequencer_service(&topology)).to_vec();
        SequencerReplica { index, chain, last: 0 }
    }

    /// Crash recovery (not in the paper): the last number, from the journal.
    pub(super) fn on_start(&mut self, env: &mut impl Env) {
        if let Some(meta) = env.store().meta() {
            self.last = u64::from_le_bytes(meta[..8].try_into().expect("8 bytes"));
        }
    }

    fn is_tail(&self) -> bool {
        self.index + 1 == self.chain.len()
    }

    /// The head: a partition's request gets the next number.
    pub(super) fn on_request(&mut self, env: &mut impl Env, partition: NodeId, id: u64) {
        if self.index != 0 {
            return; // only the head assigns; a misdirected request is a peer's bug
        }
        self.last += 1;
        self.hold(env, partition, id, self.last);
    }

    /// A replica after the head: the number its predecessor holds. The
    /// chain's links are reliable and FIFO, so numbers come dense and in
    /// order, each once (a crash that loses this turn's journal loses its
    /// delivery mark too, and the predecessor resends).
    pub(super) fn on_chain(&mut self, env: &mut impl Env, from: NodeId, partition: NodeId, id: u64, seq: u64) {
        if self.index == 0 || self.chain[self.index - 1] != from {
            return; // not from this replica's predecessor: a peer's bug
        }
        assert_eq!(seq, self.last + 1, "sequencer replica {} got number {seq} after {}", self.index, self.last);
        self.hold(env, partition, id, seq);
    }

    /// Journal `seq`, then pass it on: to the successor, or, from the tail,
    /// to the partition that asked.
    fn hold(&mut self, env: &mut impl Env, partition: NodeId, id: u64, seq: u64) {
        self.last = seq;
        env.store().set_meta(seq.to_le_bytes().to_vec());
        // One update ordered by the DC's service, counted once, at the tail:
        // the capacity experiments' count (Gunawardhana et al., §7.1, Figs
        // 2–3). Every other replica observes the sample too, with no
        // update, so that a chain's capacity is measured on its busiest
        // replica's CPU, whichever that is.
        let ordered = u64::from(self.is_tail());
        env.observe(causeway_core::Observation::Sample { what: "service_ops", value: ordered });
        if self.is_tail() {
            env.send(partition, Msg::SeqReply { id, seq });
        } else {
            env.send(self.chain[self.index + 1], Msg::Chain { partition, id, seq });
        }
    }

    /// For tests: the last number assigned (head) or held.
    pub fn last(&self) -> u64 {
        self.last
    }
}
