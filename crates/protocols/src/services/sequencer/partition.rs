//! A partition p_n^m of S-Seq: on a client's PUT it asks its DC's
//! sequencer for the next number and waits for it (§2: "datacenter
//! partitions synchronously request a monotonically increasing number to
//! the sequencer before returning to the client", §7.1), then applies the
//! update, ships its payload to its siblings in the other DCs and its
//! metadata to their receivers, and acknowledges. Remote updates become
//! visible when the receiver says so and their payload is here.

use super::config::Config;
use super::msg::*;
use super::server::{Env, Timer};
use causeway_core::{ClientId, DcId, Key, NodeId, Observation, PartitionId, Topology, Value, Versioned};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A PUT waiting for its sequence number.
struct Pending {
    /// Who to acknowledge; `None` once acknowledged (A-Seq acknowledges
    /// before the number arrives).
    client: Option<ClientId>,
    key: Key,
    value: Value,
    vclock: Vec<u64>,
}

/// Request ids: the partition's incarnation (journaled, one more at every
/// start) above this many bits, a counter below, so that an answer to a
/// request of an earlier incarnation never matches a new one.
const ID_BITS: u32 = 40;

pub struct Partition {
    cfg: Config,
    topology: Arc<Topology>,
    dc: DcId,
    partition: PartitionId,
    /// The head of this DC's sequencer chain.
    head: NodeId,
    /// This partition's servers in the other DCs.
    siblings: Vec<NodeId>,
    /// The receivers of the other DCs.
    receivers: Vec<NodeId>,
    next_id: u64,
    /// PUTs waiting for their number, by request id. Not journaled: a
    /// crash loses them (their clients were never acknowledged, deviation
    /// 7), and their numbers, when they come, are shipped as skips.
    pending: BTreeMap<u64, Pending>,
    /// The last number this incarnation was answered: they increase (the
    /// chain is FIFO from head to tail, and so are the links to here).
    last_seq: u64,
    /// Apply rounds not yet acknowledged, oldest first.
    awaiting: crate::services::apply_rounds::ApplyRounds<ApplyOp>,
    /// A straggler's (Fig 7) requests for numbers, held until its next send.
    straggling: Option<Vec<u64>>,
}

impl Partition {
    pub(super) fn new(cfg: &Config, topology: Arc<Topology>, dc: DcId, partition: PartitionId) -> Partition {
        let siblings = crate::kit::node::equivalents_elsewhere(&topology, partition, dc);
        let head = topology.service_nodes(dc, super::sequencer_service(&topology))[0];
        let receivers = super::remote_receivers(&topology, dc);
        Partition {
            cfg: cfg.clone(),
            topology,
            dc,
            partition,
            head,
            siblings,
            receivers,
            next_id: 0,
            pending: BTreeMap::new(),
            last_seq: 0,
            awaiting: Default::default(),
            straggling: (cfg.straggler_partition == Some(partition.0) && cfg.straggler_dc == dc.0).then(Vec::new),
        }
    }

    fn m(&self) -> usize {
        self.topology.dcs()
    }

    /// A new incarnation: request ids start above every earlier one's.
    pub(super) fn on_start(&mut self, env: &mut impl Env) {
        let incarnation = match env.store().meta() {
            Some(meta) => u64::from_le_bytes(meta[..8].try_into().expect("8 bytes")) + 1,
            None => 1,
        };
        env.store().set_meta(incarnation.to_le_bytes().to_vec());
        self.next_id = incarnation << ID_BITS;
        if self.straggling.is_some() {
            env.set_timer(self.cfg.straggler_interval_us, Timer::Straggle.token());
        }
    }

    /// A straggler sends the requests it held, every interval (Fig 7).
    pub(super) fn on_timer(&mut self, env: &mut impl Env, timer: Timer) {
        if let (Timer::Straggle, Some(held)) = (timer, self.straggling.as_mut()) {
            for id in std::mem::take(held) {
                env.send(self.head, Msg::SeqReq { id });
            }
            env.set_timer(self.cfg.straggler_interval_us, Timer::Straggle.token());
        }
    }

    /// Store a version, dropping the key's versions below the newest
    /// visible one (never read again).
    fn insert(&self, env: &mut impl Env, key: &[u8], v: Version) -> causeway_core::Landed {
        env.store().insert_collecting(key, v, |v| v.visible)
    }

    /// The newest visible version of `key`: what a read returns.
    fn visible(env: &mut impl Env, key: &[u8]) -> Option<Version> {
        env.store().latest_where(key, |v| v.visible).cloned()
    }

    // ---- Client requests -------------------------------------------------

    /// A read: the local value and its vector, never blocked.
    pub(super) fn on_get(&mut self, env: &mut impl Env, from: ClientId, key: Key) {
        let (value, vts) = match Self::visible(env, &key) {
            Some(v) => (Some(causeway_core::copy_if_short(&v.value)), v.vts),
            None => (None, vec![0; self.m()]),
        };
        env.reply(from, Msg::GetReply { key, value, vts });
    }

    /// An update: ask the sequencer, synchronously (S-Seq), and finish in
    /// [`Partition::on_seq_reply`]. A-Seq (the mutant) acknowledges now,
    /// with the client's causal past unchanged, and applies the update
    /// when its number comes (deviation 8).
    pub(super) fn on_put(&mut self, env: &mut impl Env, from: ClientId, key: Key, value: Value, vclock: Vec<u64>) {
        if vclock.len() != self.m() {
            let reason = format!("a causal past of {} entries for {} DCs", vclock.len(), self.m());
            return env.reply(from, Msg::Refused { key, reason });
        }
        let id = self.next_id;
        self.next_id += 1;
        let client = if self.cfg.mutant_async_sequencer {
            // A-Seq: "contacts the sequencer in parallel" (§2), so the
            // client learns no number and its next update depends on
            // nothing this one did.
            env.reply(from, Msg::PutReply { vts: vclock.clone() });
            None
        } else {
            Some(from)
        };
        self.pending.insert(id, Pending { client, key, value, vclock });
        match self.straggling.as_mut() {
            Some(held) => held.push(id),
            None => env.send(self.head, Msg::SeqReq { id }),
        }
    }

    /// The tail's answer: request `id` is number `seq` of this DC. Stamp
    /// the update (own entry = `seq`, the others the client's causal past),
    /// apply it, ship it, acknowledge. A number for a request this
    /// incarnation never made (it crashed in between) is shipped as a
    /// skip, so the other DCs see no gap in the sequence (deviation 7).
    pub(super) fn on_seq_reply(&mut self, env: &mut impl Env, id: u64, seq: u64) {
        assert!(seq > self.last_seq, "sequence number {seq} after {}: reused or out of order", self.last_seq);
        self.last_seq = seq;
        let Some(p) = self.pending.remove(&id) else {
            for &r in &self.receivers {
                env.send(r, Msg::Skip { seq });
            }
            return;
        };
        let m = self.dc.idx();
        // The sequencer numbers in the order requests reach it, and every
        // number the client could have seen was handed out before it sent
        // this update: the own entry exceeds the causal past's (what makes
        // S-Seq capture causality, §2).
        assert!(seq > p.vclock[m], "number {seq} at or below the session's causal past {}", p.vclock[m]);
        let dep = p.vclock[m];
        let mut vts = p.vclock;
        vts[m] = seq;
        let lww = vts.iter().sum();
        let at_us = env.now_us();
        let version = Version { value: p.value, lww, origin: self.dc, seq, vts, dep, at_us, visible: true };
        let stored = Version { value: causeway_core::copy_if_short(&version.value), ..version.clone() };
        let landed = self.insert(env, &p.key, stored);
        assert_ne!(landed.inserted, causeway_core::Inserted::Duplicate, "a sequence number repeated");
        env.observe(Observation::Visible { key: &p.key, value: &version.value, origin: self.dc, written_us: at_us });
        let op = OpMeta { key: p.key.clone(), partition: self.partition, vts: version.vts.clone(), dep };
        for &r in &self.receivers {
            env.send(r, Msg::Ship { op: op.clone() });
        }
        let vts = version.vts.clone();
        for &n in &self.siblings {
            env.send(n, Msg::Payload { key: p.key.clone(), version: version.clone() });
        }
        if let Some(c) = p.client {
            env.reply(c, Msg::PutReply { vts });
        }
    }

    // ---- Remote updates --------------------------------------------------

    /// A sibling's payload: stored invisible until the receiver's apply.
    pub(super) fn on_payload(&mut self, env: &mut impl Env, key: Key, mut version: Version) {
        let ok = version.vts.len() == self.m()
            && version.origin != self.dc
            && version.origin.idx() < self.m()
            && version.vts[version.origin.idx()] == version.seq
            && version.vts.iter().sum::<u64>() == version.lww;
        if !ok {
            return; // malformed: a peer's bug; nothing to store
        }
        version.visible = false;
        self.insert(env, &key, version);
        self.progress(env);
    }

    /// The receiver's apply round: make each op visible in order, then
    /// acknowledge. A resent round (the receiver restarted, or retried)
    /// is applied again, which changes nothing, and acknowledged again.
    pub(super) fn on_apply(&mut self, env: &mut impl Env, receiver: NodeId, round: u64, ops: Vec<ApplyOp>) {
        self.awaiting.add(receiver, round, ops);
        self.progress(env);
    }

    /// Apply what can be, in order (an op whose payload has not arrived
    /// stops its round and every later one).
    fn progress(&mut self, env: &mut impl Env) {
        let mut acks = Vec::new();
        self.awaiting.progress(|op| Self::make_visible(env, op), |receiver, round| acks.push((receiver, round)));
        for (receiver, round) in acks {
            env.send(receiver, Msg::Applied { round });
        }
    }

    /// Make the version `op` names visible: true when done (or when a
    /// visible version already wins last-writer-wins over it, so it would
    /// never be read), false while its payload is missing.
    fn make_visible(env: &mut impl Env, op: &ApplyOp) -> bool {
        let order = (op.lww, op.origin, op.seq);
        if let Some(v) = env.store().exact(&op.key, order) {
            if v.visible {
                return true;
            }
            let v = Version { visible: true, ..v.clone() };
            let at_us = v.at_us;
            env.store().replace(&op.key, v);
            let newest = Self::visible(env, &op.key).map(|v| v.order());
            if newest == Some(order) {
                let index = env.store().index_of(&op.key).expect("stored");
                env.observe_visible_in_store(op.origin, at_us, |s| s.latest_where_at(index, |v| v.visible));
            }
            return true;
        }
        Self::visible(env, &op.key).is_some_and(|v| v.order() > order)
    }

    /// Whether `key` belongs here (a misrouted request is refused).
    pub(super) fn stores(&self, me: NodeId, key: &[u8]) -> bool {
        self.topology.server_for_key(self.dc, key) == Some(me)
    }
}
