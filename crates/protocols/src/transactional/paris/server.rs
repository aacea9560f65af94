use super::config::*;
use super::journal::{self, PreparedTx};
use super::msg::*;
use crate::kit::node::served_partition;
use crate::stabilization::stable_tree::{StableTree, TreeStep};
use causeway_core::{
    ClientId, DcId, Key, NodeCtx, NodeId, Observation, OpError, PartitionId, Server, ServerEnv, Topology, Value,
    Versioned, copy_if_short,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

crate::kit::node::server_env!();

const TIMER_APPLY: u64 = 1;
const TIMER_STABILIZE: u64 = 2;

/// A PaRiS or BPR node. Only partition servers take part.
pub struct ParisServer {
    pub(super) part: Option<Partition>,
}

impl ParisServer {
    pub(super) fn new(cfg: &Config, ctx: NodeCtx, blocking: bool) -> Self {
        ParisServer { part: served_partition(&ctx).map(|(dc, p)| Partition::new(cfg, &ctx, dc, p, blocking)) }
    }
}

/// What a client's view of the placement must match (deviation 8): the
/// number of DCs and partitions and the replication, hashed.
pub fn placement_of(t: &Topology) -> u64 {
    let s = t.spec();
    causeway_core::stable_hash(format!("{}:{}:{:?}", s.dcs, s.partitions, s.replication).as_bytes())
}

/// How far above the HLC the synced ceiling is set, µs: a sync about every
/// 50 ms of clock per partition when nothing else syncs, and a restarted
/// partition's HLC at most 100 ms ahead of where it was. (A second ahead
/// made BPR block every transaction for a second after a restart: its
/// snapshots come from the coordinator's clock and wait for every replica
/// to reach them.)
const CEILING_STEP_US: Ts = 100_000;

/// Server p_n^m: partition n in DC m, replica r of the R DCs storing n.
pub(super) struct Partition {
    cfg: Config,
    /// BPR (§V): reads wait until the partition has applied their snapshot.
    blocking: bool,
    topology: Arc<Topology>,
    me: NodeId,
    m: DcId,
    partition: PartitionId,
    placement: u64,
    /// The DCs storing this partition, ascending: VV's indices.
    replicas: Vec<DcId>,
    /// This server's index r in `replicas`.
    r: usize,
    /// The other replicas, as (index, node).
    peers: Vec<(usize, NodeId)>,
    /// VV_n^m: entry r the version clock (the local snapshot installed),
    /// entry i ≠ r the latest timestamp received from replica i.
    pub(super) vv: Vec<Ts>,
    /// HLC_n^m.
    pub(super) hlc: Ts,
    /// A synced bound above every clock value this partition has sent
    /// (deviation 10): the version clock is journaled without a sync of its
    /// own, so a crash of the machine may lose the record of a heartbeat
    /// already sent; a restart takes its HLC to at least this, so no later
    /// proposal falls at or below a version clock a peer has been told.
    ceiling: Ts,
    /// ust_n^m: every replica of every partition has installed every
    /// version at or below it. Raised only.
    pub(super) ust: Ts,
    /// S_old: no running or future transaction reads below it (GC).
    pub(super) s_old: Ts,
    /// Prepared_n^m: the transactions this cohort proposed a time for and
    /// awaits the outcome of, journaled (deviation 10); and the same by pt.
    pub(super) prepared: BTreeMap<TxId, Prepared>,
    prepared_by_pt: BTreeSet<(Ts, TxId)>,
    /// Committed_n^m: stored already (deviation 5), to apply and replicate
    /// in ⟨ct, id⟩ order.
    pub(super) committed: BTreeMap<(Ts, TxId), Vec<(Key, Value)>>,
    /// TX[id_T]: the transactions this server coordinates, per request in
    /// flight.
    coords: BTreeMap<u64, Coord>,
    /// The interactive transactions this server coordinates between their
    /// client's steps: their context (Alg. 2 START) kept from START to
    /// COMMIT.
    open: BTreeMap<TxId, Open>,
    next_cid: u64,
    tree: StableTree<Ts>,
    /// The roots of the other DCs' trees (DCs that store something).
    other_roots: Vec<(DcId, NodeId)>,
    /// At a root: the latest (GST, oldest snapshot) of each other DC.
    remote: BTreeMap<DcId, (Ts, Ts)>,
    /// BPR's reads waiting for VV to cover their snapshot.
    parked: Vec<Parked>,
    /// Replicated versions not yet under the UST, to report visible.
    unseen: BTreeMap<(Ts, TxId, DcId), Key>,
}

/// A prepared transaction: what is journaled, and (volatile) how long
/// this node has waited for its outcome and whether it is asking.
pub(super) struct Prepared {
    pub(super) d: PreparedTx,
    /// Δ_R ticks since its prepare, this node's restart or the last
    /// "undecided" answer, in µs: counted on the apply timer rather than
    /// read off the clock, which may jump either way.
    waited_us: u64,
    /// An outcome query is in flight: one at a time, so that a coordinator
    /// cut off for long finds one query per transaction waiting, not one
    /// per `prepared_query_us`.
    asking: bool,
}

/// Who asked for a read slice.
#[derive(Clone, Copy)]
enum Origin {
    Local { cid: u64, slice: u32 },
    Remote { from: NodeId, cid: u64, slice: u32 },
}

struct Parked {
    origin: Origin,
    snapshot: Ts,
    keys: Vec<Key>,
    since_us: u64,
}

/// An open interactive transaction: whose, its snapshot, the client's
/// hwt_c at START, and when its client last took a step (this node's
/// clock, for the idle timeout).
struct Open {
    client: ClientId,
    snapshot: Ts,
    hwt: Ts,
    last_us: u64,
}

/// A request this server coordinates (Alg. 2's context, and the progress
/// of its run): a one-shot transaction, or one step of an interactive one.
struct Coord {
    client: ClientId,
    /// The client's operation number, which the answer names.
    seq: u64,
    tx: TxId,
    snapshot: Ts,
    hwt: Ts,
    /// Per slice, the places of its keys in `values`.
    slices: Vec<Vec<usize>>,
    values: Vec<Option<Value>>,
    missing: usize,
    failed: Option<OpError>,
    writes: Vec<(Key, Value)>,
    /// The 2PC cohorts, once preparing; prepare replies still missing; ct so far.
    cohorts: Vec<NodeId>,
    prepares_missing: usize,
    ct: Ts,
}

impl Partition {
    fn new(cfg: &Config, ctx: &NodeCtx, m: DcId, partition: PartitionId, blocking: bool) -> Self {
        let topology = ctx.topology.clone();
        let replicas = topology.dcs_of(partition).to_vec();
        let r = replicas.iter().position(|&d| d == m).expect("a server's DC stores its partition");
        let peers = replicas
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != r)
            .filter_map(|(i, &d)| topology.server(d, partition).map(|n| (i, n)))
            .collect();
        let other_roots = topology
            .dc_ids()
            .filter(|&d| d != m)
            .filter_map(|d| topology.dc_servers(d).next().map(|n| (d, n)))
            .collect();
        Partition {
            cfg: cfg.clone(),
            blocking,
            me: ctx.id,
            m,
            partition,
            placement: placement_of(&topology),
            vv: vec![0; replicas.len()],
            replicas,
            r,
            peers,
            hlc: 0,
            ust: 0,
            s_old: 0,
            prepared: BTreeMap::new(),
            prepared_by_pt: BTreeSet::new(),
            ceiling: 0,
            committed: BTreeMap::new(),
            coords: BTreeMap::new(),
            open: BTreeMap::new(),
            next_cid: 0,
            tree: StableTree::new(&topology, ctx.id, cfg.tree_fanout),
            other_roots,
            remote: BTreeMap::new(),
            parked: Vec::new(),
            unseen: BTreeMap::new(),
            topology,
        }
    }
}

impl Server for ParisServer {
    type Msg = Msg;
    type Version = Version;

    fn on_start(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        let Some(p) = self.part.as_mut() else { return };
        p.recover(env);
        env.set_timer(p.cfg.apply_interval_us, TIMER_APPLY);
        env.set_timer(p.cfg.stabilization_interval_us, TIMER_STABILIZE);
    }

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        let Some(p) = self.part.as_mut() else { return };
        match msg {
            Msg::ReadReq { tx, ust, placement, keys } => p.start(env, from, tx, ust, 0, placement, keys, Vec::new()),
            Msg::PutReq { tx, ust, hwt, placement, key, value } => {
                p.start(env, from, tx, ust, hwt, placement, Vec::new(), vec![(key, value)])
            }
            Msg::TxReq { tx, ust, hwt, placement, reads, writes } => {
                p.start(env, from, tx, ust, hwt, placement, reads, writes)
            }
            Msg::Begin { tx, ust, hwt, placement } => p.begin(env, from, tx, ust, hwt, placement),
            Msg::TxRead { tx, seq, keys } => p.step(env, from, tx, seq, keys, None),
            Msg::TxCommit { tx, seq, writes } => p.step(env, from, tx, seq, Vec::new(), Some(writes)),
            // Only its own client may drop a transaction.
            Msg::TxAbort { tx } if p.open.get(&tx).is_some_and(|o| o.client == from) => {
                p.open.remove(&tx);
            }
            _ => {} // replies and peer messages never come from clients; the runtime rejects them at the edge
        }
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, msg: Msg) {
        let Some(p) = self.part.as_mut() else { return };
        if !p.topology.contains(from) {
            return;
        }
        match msg {
            Msg::ReadSlice { cid, slice, snapshot, keys } => {
                p.serve_slice(env, Origin::Remote { from, cid, slice }, snapshot, keys, env.now_us())
            }
            Msg::SliceReply { cid, slice, values } => p.on_slice(env, cid, slice, values),
            Msg::Prepare { cid, tx, snapshot, ht, writes } => {
                let pt = p.prepare(env, from, cid, tx, snapshot, ht, writes);
                env.send(from, Msg::PrepareReply { cid, tx, pt });
            }
            Msg::PrepareReply { cid, tx, pt } => {
                if p.coords.get(&cid).is_some_and(|c| c.tx == tx && c.prepares_missing > 0) {
                    p.on_prepared(env, cid, pt);
                } else {
                    // A proposal for a transaction this coordinator lost
                    // in a crash before deciding: presumed abort.
                    env.send(from, Msg::Outcome { tx, outcome: Outcome::Aborted });
                }
            }
            Msg::Commit { tx, ct } => p.commit(env, tx, ct),
            Msg::OutcomeQuery { cid, tx } => {
                let outcome =
                    if p.coords.get(&cid).is_some_and(|c| c.tx == tx) { Outcome::Undecided } else { Outcome::Aborted };
                env.send(from, Msg::Outcome { tx, outcome });
            }
            Msg::Outcome { tx, outcome } => p.on_outcome(env, from, tx, outcome),
            Msg::Replicate { ct, txs } => p.on_replicate(env, from, ct, txs),
            Msg::Heartbeat { t } => {
                if let Some(i) = p.replica_index(from) {
                    p.vv[i] = p.vv[i].max(t);
                    p.unpark(env);
                }
            }
            Msg::StableReport { agg } if agg.len() == 2 => {
                p.tree.on_report(from, agg);
            }
            Msg::StablePush { ust, old } => p.on_push(env, ust, old),
            Msg::GstExchange { gst, old } => {
                let dc = p.topology.dc_of(from);
                if p.other_roots.iter().any(|&(_, n)| n == from) {
                    let e = p.remote.entry(dc).or_insert((0, 0));
                    *e = (e.0.max(gst), e.1.max(old));
                }
            }
            _ => {} // client traffic never comes from peers
        }
    }

    fn on_timer(&mut self, env: &mut impl ServerEnv<Msg, Version>, token: u64) {
        let Some(p) = self.part.as_mut() else { return };
        match token {
            TIMER_APPLY => {
                p.apply(env);
                p.ask_outcomes(env);
                env.set_timer(p.cfg.apply_interval_us, TIMER_APPLY);
            }
            TIMER_STABILIZE => {
                p.drop_idle(env.now_us());
                p.stabilize(env);
                env.set_timer(p.cfg.stabilization_interval_us, TIMER_STABILIZE);
            }
            _ => {}
        }
    }
}

impl Partition {
    #[cfg(test)]
    pub(super) fn partition_id(&self) -> PartitionId {
        self.partition
    }

    /// VV[r], what this partition has applied.
    #[cfg(test)]
    pub(super) fn version_clock(&self) -> Ts {
        self.vv[self.r]
    }

    fn replica_index(&self, node: NodeId) -> Option<usize> {
        self.peers.iter().find(|&&(_, n)| n == node).map(|&(i, _)| i)
    }

    /// Raise ust_n^m (never lowered), and report the replicated versions
    /// it now covers visible where a read would return them.
    fn raise_ust(&mut self, env: &mut impl Env, t: Ts) {
        if t <= self.ust {
            return;
        }
        self.ust = t;
        env.observe(Observation::Stable { stable_us: t });
        while let Some(entry) = self.unseen.first_entry() {
            if entry.key().0 > t {
                break;
            }
            let (order, key) = entry.remove_entry();
            let origin = order.2;
            env.observe_visible_in_store(origin, order.0, |s| {
                let at = s.index_of(&key)?;
                s.latest_where_at(at, |v| v.ut <= t).filter(|(_, v)| v.order() == order)
            });
        }
    }

    // ------------------------------------------------------------ coordinator (Alg. 2)

    /// START, READ and (with writes) COMMIT of a one-shot transaction.
    #[allow(clippy::too_many_arguments)]
    fn start(
        &mut self,
        env: &mut impl Env,
        client: ClientId,
        tx: TxId,
        ust_c: Ts,
        hwt: Ts,
        placement: u64,
        reads: Vec<Key>,
        writes: Vec<(Key, Value)>,
    ) {
        if placement != self.placement {
            return Self::refuse_placement(env, client, tx.seq);
        }
        let snapshot = self.snapshot_for(env, ust_c);
        self.run(env, client, tx.seq, tx, snapshot, hwt, reads, writes);
    }

    fn refuse_placement(env: &mut impl Env, client: ClientId, seq: u64) {
        let e = OpError::BadRequest("the client's topology differs from the servers'".into());
        env.reply(client, Msg::Reply { seq, result: Err(e) });
    }

    /// Alg. 2 START: the snapshot of a transaction whose client has read at
    /// `ust_c` (BPR: seen up to it).
    fn snapshot_for(&mut self, env: &mut impl Env, ust_c: Ts) -> Ts {
        if self.blocking {
            // BPR (§V): max(the client's highest timestamp seen, the
            // coordinator's clock); and at least the UST (deviation 9).
            ust_c.max(env.now_us()).max(self.ust)
        } else {
            // Alg. 2 lines 2–4: ust ← max(ust, ust_c), the snapshot.
            self.raise_ust(env, ust_c);
            self.ust
        }
    }

    /// START of an interactive transaction: fix its snapshot, keep its
    /// context open, answer the snapshot (deviation 11).
    fn begin(&mut self, env: &mut impl Env, client: ClientId, tx: TxId, ust_c: Ts, hwt: Ts, placement: u64) {
        if placement != self.placement {
            return Self::refuse_placement(env, client, tx.seq);
        }
        if self.open.len() >= self.cfg.max_open_txns {
            let e = OpError::Aborted(format!(
                "this coordinator has {} interactive transactions open already (protocol.max_open_txns)",
                self.open.len()
            ));
            return env.reply(client, Msg::Reply { seq: tx.seq, result: Err(e) });
        }
        let snapshot = self.snapshot_for(env, ust_c);
        self.open.insert(tx, Open { client, snapshot, hwt, last_us: env.now_us() });
        let done = Done { snapshot, values: Vec::new(), ct: 0 };
        env.reply(client, Msg::Reply { seq: tx.seq, result: Ok(done) });
    }

    /// READ (`writes` None) or COMMIT (`writes` Some) in the open
    /// transaction `tx`, at its snapshot. A COMMIT closes the context
    /// whatever its outcome.
    fn step(
        &mut self,
        env: &mut impl Env,
        client: ClientId,
        tx: TxId,
        seq: u64,
        reads: Vec<Key>,
        writes: Option<Vec<(Key, Value)>>,
    ) {
        let now = env.now_us();
        let Some(o) = self.open.get_mut(&tx).filter(|o| o.client == client) else {
            let e = OpError::Aborted(
                "no such open transaction here: it was idle longer than protocol.txn_idle_timeout_us, or its \
                 coordinator restarted"
                    .into(),
            );
            return env.reply(client, Msg::Reply { seq, result: Err(e) });
        };
        o.last_us = now;
        let (mut snapshot, hwt) = (o.snapshot, o.hwt);
        if self.cfg.mutant_fresh_snapshot_per_step {
            snapshot = self.snapshot_for(env, snapshot);
        }
        let writes = match writes {
            Some(w) => {
                self.open.remove(&tx);
                w
            }
            None => Vec::new(),
        };
        self.run(env, client, seq, tx, snapshot, hwt, reads, writes);
    }

    /// Drop the open transactions whose client has been silent longer than
    /// the idle timeout.
    fn drop_idle(&mut self, now_us: u64) {
        let timeout = self.cfg.txn_idle_timeout_us;
        self.open.retain(|_, o| now_us.saturating_sub(o.last_us) < timeout);
    }

    /// READ at `snapshot`, then (with writes) COMMIT: one request's run.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        env: &mut impl Env,
        client: ClientId,
        seq: u64,
        tx: TxId,
        snapshot: Ts,
        hwt: Ts,
        reads: Vec<Key>,
        writes: Vec<(Key, Value)>,
    ) {
        let t = self.topology.clone();
        // One slice per partition, to the nearest DC storing it (Alg. 2 line 12).
        let mut by_node: BTreeMap<NodeId, (Vec<usize>, Vec<Key>)> = BTreeMap::new();
        for (i, k) in reads.iter().enumerate() {
            let p = t.partition_of(k);
            let Some(n) = t.server(t.serving_dc(self.m, p), p) else { continue };
            let e = by_node.entry(n).or_default();
            e.0.push(i);
            e.1.push(k.clone());
        }
        let cid = self.next_cid;
        self.next_cid += 1;
        let n = by_node.len();
        self.coords.insert(
            cid,
            Coord {
                client,
                seq,
                tx,
                snapshot,
                hwt,
                slices: by_node.values().map(|(places, _)| places.clone()).collect(),
                values: vec![None; reads.len()],
                missing: n,
                failed: None,
                writes,
                cohorts: Vec::new(),
                prepares_missing: 0,
                ct: 0,
            },
        );
        if n == 0 {
            return self.after_reads(env, cid);
        }
        let now = env.now_us();
        for (slice, (node, (_, keys))) in by_node.into_iter().enumerate() {
            let slice = slice as u32;
            if node == self.me {
                self.serve_slice(env, Origin::Local { cid, slice }, snapshot, keys, now);
            } else {
                env.send(node, Msg::ReadSlice { cid, slice, snapshot, keys });
            }
        }
    }

    fn on_slice(&mut self, env: &mut impl Env, cid: u64, slice: u32, values: Result<Vec<Option<Value>>, OpError>) {
        let Some(c) = self.coords.get_mut(&cid) else { return };
        let Some(places) = c.slices.get(slice as usize) else { return };
        match values {
            Ok(vs) => {
                for (&i, v) in places.iter().zip(vs) {
                    c.values[i] = v;
                }
            }
            Err(e) => c.failed = Some(e),
        }
        c.missing -= 1;
        if c.missing == 0 {
            self.after_reads(env, cid);
        }
    }

    /// The reads are in: answer a read-only transaction, or prepare the
    /// writes at one replica of each partition (Alg. 2 lines 19–27).
    fn after_reads(&mut self, env: &mut impl Env, cid: u64) {
        let Some(c) = self.coords.get_mut(&cid) else { return };
        if let Some(e) = c.failed.take() {
            let (client, seq) = (c.client, c.seq);
            self.coords.remove(&cid);
            env.reply(client, Msg::Reply { seq, result: Err(e) });
            return;
        }
        if c.writes.is_empty() {
            let c = self.coords.remove(&cid).expect("present");
            let done = Done { snapshot: c.snapshot, values: c.values, ct: 0 };
            env.reply(c.client, Msg::Reply { seq: c.seq, result: Ok(done) });
            return;
        }
        // ht: the highest timestamp the client has seen (line 21).
        let (tx, snapshot, ht) = (c.tx, c.snapshot, c.snapshot.max(c.hwt));
        let t = self.topology.clone();
        let mut by_node: BTreeMap<NodeId, Vec<(Key, Value)>> = BTreeMap::new();
        for (k, v) in std::mem::take(&mut c.writes) {
            let p = t.partition_of(&k);
            if let Some(n) = t.server(t.serving_dc(self.m, p), p) {
                by_node.entry(n).or_default().push((k, v));
            }
        }
        c.cohorts = by_node.keys().copied().collect();
        c.prepares_missing = by_node.len();
        let mut local = None;
        for (node, writes) in by_node {
            if node == self.me {
                local = Some(writes);
            } else {
                env.send(node, Msg::Prepare { cid, tx, snapshot, ht, writes });
            }
        }
        if let Some(writes) = local {
            let pt = self.prepare(env, self.me, cid, tx, snapshot, ht, writes);
            self.on_prepared(env, cid, pt);
        }
    }

    /// A cohort's proposal; with all in, ct = max pt, Commit to every
    /// cohort and the answer to the client (Alg. 2 lines 28–31).
    fn on_prepared(&mut self, env: &mut impl Env, cid: u64, pt: Ts) {
        let Some(c) = self.coords.get_mut(&cid) else { return };
        c.ct = c.ct.max(pt);
        c.prepares_missing -= 1;
        if c.prepares_missing > 0 {
            return;
        }
        let c = self.coords.remove(&cid).expect("present");
        // Lemma 1 and Prop. 1 case 1: ct above the snapshot and hwt_c.
        assert!(c.ct > c.snapshot && c.ct > c.hwt, "PaRiS: commit time {} not above the snapshot or hwt", c.ct);
        for &n in &c.cohorts {
            if n == self.me {
                self.commit(env, c.tx, c.ct);
            } else {
                env.send(n, Msg::Commit { tx: c.tx, ct: c.ct });
            }
        }
        let done = Done { snapshot: c.snapshot, values: c.values, ct: c.ct };
        env.reply(c.client, Msg::Reply { seq: c.seq, result: Ok(done) });
    }

    // ------------------------------------------------------------ cohort (Alg. 3)

    /// ReadSliceReq: per key, the freshest version at or below the
    /// snapshot. PaRiS never waits; BPR parks the read until VV covers the
    /// snapshot.
    fn serve_slice(&mut self, env: &mut impl Env, origin: Origin, snapshot: Ts, keys: Vec<Key>, since_us: u64) {
        if keys.iter().any(|k| self.topology.partition_of(k) != self.partition) {
            let e = OpError::BadRequest("a read slice names a key this partition does not store".into());
            return self.answer_slice(env, origin, Err(e));
        }
        if self.blocking && !self.cfg.mutant_skip_read_wait && self.vv.iter().min().is_none_or(|&v| v < snapshot) {
            self.parked.push(Parked { origin, snapshot, keys, since_us });
            return;
        }
        if self.blocking && since_us < env.now_us() {
            env.observe(Observation::Blocked { what: "read_wait", waited_us: env.now_us() - since_us });
        }
        if !self.blocking {
            self.raise_ust(env, snapshot); // Alg. 3 line 2
        }
        let above = self.cfg.mutant_read_above_ust;
        let store = env.store();
        let mut values = Vec::with_capacity(keys.len());
        for k in &keys {
            // Versions are ordered by ⟨ut, tx, sr⟩, so `ut ≤ snapshot` holds on a prefix.
            match store.latest_below(k, |v| above || v.ut <= snapshot) {
                Some(v) => values.push(Some(copy_if_short(&v.value))),
                None if store.was_pruned(k) => {
                    let e = OpError::Aborted("the snapshot's versions were collected".into());
                    return self.answer_slice(env, origin, Err(e));
                }
                None => values.push(None),
            }
        }
        self.answer_slice(env, origin, Ok(values));
    }

    fn answer_slice(&mut self, env: &mut impl Env, origin: Origin, values: Result<Vec<Option<Value>>, OpError>) {
        match origin {
            Origin::Local { cid, slice } => self.on_slice(env, cid, slice, values),
            Origin::Remote { from, cid, slice } => env.send(from, Msg::SliceReply { cid, slice, values }),
        }
    }

    /// BPR: serve the parked reads VV now covers.
    fn unpark(&mut self, env: &mut impl Env) {
        if self.blocking {
            self.observe_bpr_visible(env);
        }
        if self.parked.is_empty() {
            return;
        }
        let floor = self.vv.iter().copied().min().unwrap_or(0);
        let (ready, waiting): (Vec<Parked>, Vec<Parked>) =
            std::mem::take(&mut self.parked).into_iter().partition(|p| p.snapshot <= floor);
        self.parked = waiting;
        for p in ready {
            self.serve_slice(env, p.origin, p.snapshot, p.keys, p.since_us);
        }
    }

    /// BPR (§V): a read at snapshot t blocks only until every entry of
    /// VV has reached t, so a replicated version is visible — a read
    /// blocked at a snapshot at or above its commit time returns it — as
    /// soon as VV's minimum passes that time, not when the UST does
    /// (PaRiS's rule, `raise_ust`). Observation only: nothing is sent.
    fn observe_bpr_visible(&mut self, env: &mut impl Env) {
        let floor = self.vv.iter().copied().min().unwrap_or(0);
        while let Some(entry) = self.unseen.first_entry() {
            if entry.key().0 > floor {
                break;
            }
            let (order, key) = entry.remove_entry();
            env.observe_visible_in_store(order.2, order.0, |s| {
                let at = s.index_of(&key)?;
                s.latest_where_at(at, |v| v.ut <= floor).filter(|(_, v)| v.order() == order)
            });
        }
    }

    /// PrepareReq (Alg. 3 lines 10–15): a proposed commit time above the
    /// client's highest timestamp, the UST and every earlier proposal. The
    /// entry is journaled, so it is durable before the proposal leaves
    /// (deviation 10).
    #[allow(clippy::too_many_arguments)]
    fn prepare(
        &mut self,
        env: &mut impl Env,
        coord: NodeId,
        cid: u64,
        tx: TxId,
        snapshot: Ts,
        ht: Ts,
        writes: Vec<(Key, Value)>,
    ) -> Ts {
        let writes: Vec<(Key, Value)> =
            writes.into_iter().filter(|(k, _)| self.topology.partition_of(k) == self.partition).collect();
        self.hlc = env.now_us().max(ht + 1).max(self.hlc + 1);
        if !self.blocking {
            self.raise_ust(env, snapshot);
        }
        let pt = self.hlc.max(self.ust);
        // Deviation 4: every proposal is above the version clock.
        debug_assert!(pt > self.vv[self.r]);
        self.prepared_by_pt.insert((pt, tx));
        let d = PreparedTx { pt, writes, coord, cid };
        self.prepared.insert(tx, Prepared { d, waited_us: 0, asking: false });
        self.journal(env, true);
        pt
    }

    /// CommitReq (Alg. 3 lines 17–21): the writes are stored now with ut =
    /// ct (deviation 5), and queued to be applied in ct order.
    fn commit(&mut self, env: &mut impl Env, tx: TxId, ct: Ts) {
        self.hlc = self.hlc.max(ct).max(env.now_us());
        // The prepare was journaled before its proposal left, and an
        // entry is dropped only on its coordinator's word that it never
        // decides (deviation 10): a correct coordinator never sends this.
        // A peer that does is ignored (in release builds) rather than
        // stopping the node.
        debug_assert!(self.prepared.contains_key(&tx), "PaRiS: COMMIT of {tx:?}, which is not prepared here");
        let Some(p) = self.prepared.remove(&tx) else { return };
        let PreparedTx { pt, writes, .. } = p.d;
        self.prepared_by_pt.remove(&(pt, tx));
        debug_assert!(ct > self.vv[self.r]);
        let (m, s_old) = (self.m, self.s_old);
        let store = env.store();
        for (k, v) in &writes {
            store.insert_collecting(k, Version { value: copy_if_short(v), ut: ct, tx, sr: m }, |x| x.ut <= s_old);
        }
        self.committed.insert((ct, tx), writes);
        self.journal(env, true);
    }

    /// Every Δ_R: ask the coordinator of each transaction prepared longer
    /// than `prepared_query_us` ago how it ended (deviation 10). A
    /// coordinator that restarted has dropped its own prepared entries
    /// already ([`Partition::recover`]).
    fn ask_outcomes(&mut self, env: &mut impl Env) {
        let (tick, bound, me) = (self.cfg.apply_interval_us, self.cfg.prepared_query_us, self.me);
        for (&tx, p) in &mut self.prepared {
            p.waited_us = p.waited_us.saturating_add(tick);
            if !p.asking && p.d.coord != me && p.waited_us >= bound {
                p.asking = true;
                env.send(p.d.coord, Msg::OutcomeQuery { cid: p.d.cid, tx });
            }
        }
    }

    /// A coordinator's word on `tx`: still undecided (wait, ask again
    /// later), or aborted (drop the entry; the version clock moves past
    /// its proposed time at the next Δ_R).
    fn on_outcome(&mut self, env: &mut impl Env, from: NodeId, tx: TxId, outcome: Outcome) {
        let Some(p) = self.prepared.get_mut(&tx).filter(|p| p.d.coord == from) else { return };
        match outcome {
            Outcome::Undecided => {
                p.asking = false;
                p.waited_us = 0;
            }
            Outcome::Aborted => {
                let pt = p.d.pt;
                self.prepared.remove(&tx);
                self.prepared_by_pt.remove(&(pt, tx));
                self.journal(env, true);
            }
        }
    }

    /// Record the clocks and the prepared transactions in the store's
    /// metadata; `sync` when the prepared set changed (a proposal or an
    /// outcome depends on it), else only with the next sync, unless the HLC
    /// has come within half a step of the synced [`Partition::ceiling`]:
    /// then the ceiling moves a step above it, synced before this turn's
    /// messages leave. A version clock lost in an operating-system crash is
    /// then re-earned, never reissued below what was sent.
    fn journal(&mut self, env: &mut impl Env, mut sync: bool) {
        if self.hlc.saturating_add(CEILING_STEP_US / 2) >= self.ceiling {
            self.ceiling = self.hlc + CEILING_STEP_US;
            sync = true;
        }
        debug_assert!(self.vv[self.r] < self.ceiling && self.hlc < self.ceiling);
        let clocks = journal::Clocks {
            vv_r: self.vv[self.r],
            hlc: self.hlc,
            ust: self.ust,
            s_old: self.s_old,
            ceiling: self.ceiling,
            epoch: self.next_cid >> 32,
        };
        let meta = journal::encode(clocks, self.prepared.iter().map(|(tx, p)| (tx, &p.d)));
        if sync {
            env.store().set_meta(meta);
        } else {
            env.store().set_meta_unsynced(meta);
        }
    }

    // ------------------------------------------------------------ apply, replicate (Alg. 4)

    /// Every Δ_R: apply the committed transactions below ub in ⟨ct, id⟩
    /// order, replicate each ct group, advance the version clock to ub.
    fn apply(&mut self, env: &mut impl Env) {
        let ub = match self.prepared_by_pt.first() {
            Some(&(pt, _)) => pt - 1,
            None => env.now_us().max(self.hlc),
        };
        let ub = ub.max(self.vv[self.r]);
        let mut replicated = false;
        // Deviation 4: ct ≤ ub (the listing's ct < ub would leave a
        // transaction committed at ub unapplied under VV[r] = ub).
        while let Some((&(ct, _), _)) = self.committed.first_key_value() {
            if ct > ub {
                break;
            }
            let mut group = Vec::new();
            while let Some(e) = self.committed.first_entry() {
                if e.key().0 != ct {
                    break;
                }
                let ((_, tx), writes) = e.remove_entry();
                for (k, _) in &writes {
                    let order = (ct, tx, self.m);
                    env.observe_visible_in_store(self.m, ct, |s| {
                        let at = s.index_of(k)?;
                        s.latest_where_at(at, |v| v.ut <= ub).filter(|(_, v)| v.order() == order)
                    });
                }
                group.push((tx, writes));
            }
            for &(_, peer) in &self.peers {
                env.send(peer, Msg::Replicate { ct, txs: group.clone() });
            }
            replicated = true;
        }
        self.vv[self.r] = ub;
        // Deviation 4: no later proposal may fall at or below ub.
        self.hlc = self.hlc.max(ub);
        if !replicated {
            for &(_, peer) in &self.peers {
                env.send(peer, Msg::Heartbeat { t: ub });
            }
        }
        self.journal(env, false);
        self.unpark(env);
    }

    /// Replicate (Alg. 4 lines 25–32).
    fn on_replicate(&mut self, env: &mut impl Env, from: NodeId, ct: Ts, txs: Vec<(TxId, Vec<(Key, Value)>)>) {
        let Some(i) = self.replica_index(from) else { return };
        let (sr, s_old, ust) = (self.replicas[i], self.s_old, self.ust);
        for (tx, writes) in txs {
            for (k, v) in writes {
                if self.topology.partition_of(&k) != self.partition {
                    continue;
                }
                let version = Version { value: copy_if_short(&v), ut: ct, tx, sr };
                let landed = env.store().insert_collecting(&k, version, |x| x.ut <= s_old);
                if landed.inserted != causeway_core::Inserted::Duplicate && ct > ust {
                    self.unseen.insert((ct, tx, sr), k);
                }
            }
        }
        self.vv[i] = self.vv[i].max(ct);
        self.unpark(env);
    }

    // ------------------------------------------------------------ UST (§IV-B, Alg. 4 lines 38–43)

    /// The oldest snapshot this server may still read at or hand out: its
    /// UST, or a running or open transaction's older snapshot.
    fn oldest_snapshot(&self) -> Ts {
        let running = self.coords.values().map(|c| c.snapshot);
        running.chain(self.open.values().map(|o| o.snapshot)).min().unwrap_or(self.ust).min(self.ust)
    }

    /// Every Δ_G: send the subtree's minimum up; at the root, the DC's GST
    /// goes to the other roots and the UST (the minimum over every DC's
    /// GST) down the tree (deviation 3).
    fn stabilize(&mut self, env: &mut impl Env) {
        let own = [self.vv.iter().copied().min().unwrap_or(0), self.oldest_snapshot()];
        match self.tree.step(&own) {
            TreeStep::Report { parent, aggregate } => env.send(parent, Msg::StableReport { agg: aggregate }),
            TreeStep::Stable(agg) => {
                let (gst, old) = (agg[0], agg[1]);
                for &(_, root) in &self.other_roots {
                    env.send(root, Msg::GstExchange { gst, old });
                }
                if self.other_roots.iter().all(|(d, _)| self.remote.contains_key(d)) {
                    let ust = self.remote.values().fold(gst, |a, &(g, _)| a.min(g));
                    let old = self.remote.values().fold(old, |a, &(_, o)| a.min(o));
                    self.on_push(env, ust, old);
                }
            }
            TreeStep::Waiting => {}
        }
    }

    fn on_push(&mut self, env: &mut impl Env, ust: Ts, old: Ts) {
        self.raise_ust(env, ust);
        self.s_old = self.s_old.max(old.min(self.ust));
        for &c in self.tree.children() {
            env.send(c, Msg::StablePush { ust: self.ust, old: self.s_old });
        }
    }

    // ------------------------------------------------------------ recovery

    /// After a restart (deviation 10): the clocks (version clock, HLC,
    /// UST, S_old) and prepared transactions from the journal, the HLC above every stored
    /// timestamp and proposal, the remote VV entries at the newest version
    /// from each replica, and the local versions above the version clock
    /// back in Committed, to be applied and replicated again (a replica
    /// ignores what it already holds). A transaction this node prepared as
    /// its own coordinator is dropped: the crash took its context, so it
    /// was never decided and never will be.
    fn recover(&mut self, env: &mut impl Env) {
        let now = env.now_us();
        let store = env.store();
        let journal = store.meta().and_then(journal::decode);
        // Contexts are numbered afresh within each start, above every
        // number of an earlier start: a late answer to a context the crash
        // took (a read slice that waited at a BPR replica, a prepare
        // reply) finds no context of the same number, and is dropped
        // rather than taken for a new transaction's. The epoch is synced
        // below, before any context of this start is opened.
        let epoch = journal.as_ref().map_or(0, |j| j.clocks.epoch) + 1;
        self.next_cid = epoch << 32;
        if let Some(j) = journal {
            self.vv[self.r] = j.clocks.vv_r;
            // At or above the synced ceiling: above every version clock sent
            // before the crash, whether or not its record survived.
            self.hlc = j.clocks.hlc.max(j.clocks.ceiling);
            self.ceiling = j.clocks.ceiling;
            // A snapshot is at least the UST, so never below S_old: what GC
            // may have collected (deviation 6).
            self.ust = j.clocks.ust;
            self.s_old = j.clocks.s_old;
            for (tx, d) in j.prepared {
                if d.coord == self.me {
                    continue;
                }
                self.hlc = self.hlc.max(d.pt);
                self.prepared_by_pt.insert((d.pt, tx));
                self.prepared.insert(tx, Prepared { d, waited_us: 0, asking: false });
            }
        }
        let vv_r = self.vv[self.r];
        debug_assert!(self.prepared_by_pt.first().is_none_or(|&(pt, _)| pt > vv_r));
        for key in store.keys_sorted() {
            for v in store.versions(&key) {
                self.hlc = self.hlc.max(v.ut);
                if v.sr == self.m {
                    if v.ut > vv_r {
                        self.committed.entry((v.ut, v.tx)).or_default().push((key.clone(), v.value.clone()));
                    }
                } else if let Some(i) = self.replicas.iter().position(|&d| d == v.sr) {
                    self.vv[i] = self.vv[i].max(v.ut);
                }
            }
        }
        self.hlc = self.hlc.max(now);
        self.journal(env, true);
    }
}
