//! # GentleRain: causal consistency from physical clocks and one scalar
//!
//! GentleRain (Du, Iorgulescu, Roy, Zwaenepoel, SoCC 2014) as seed 000
//! describes it (thesis §3.2.2, §5.1, §5.5.5, §8.2; notes 000 §5.6) and uses
//! it as the baseline CausalSpartanX is measured against (notes §5.3, §9.2).
//! It tracks dependencies implicitly, with one physical timestamp per version
//! and one scalar per client, and rests on two conditions:
//!
//! - **C1** (PUT): if X depends on Y then `Y.ut < X.ut`. A server accepting a
//!   PUT with the client's dependency time `dt` (DT_c, the largest `ut` the
//!   client has read or written) *waits until its physical clock exceeds dt*,
//!   then stamps the version with the clock: `ut` is physical µs, `sr` the DC.
//! - **C2** (stability): every partition keeps a version vector `VV` (entry k:
//!   the latest timestamp received from its equivalent in DC k; entry m, its
//!   own clock). Every θ the partitions of a DC compute, over a tree
//!   ([`StableTree`]), the **Global Stable Time** GST = the minimum of all
//!   entries of all their VVs. Replication is FIFO and in `ut` order, so
//!   every version with `ut ≤ GST` has arrived everywhere in the DC.
//!
//! A GET returns the latest version of the key that is local (`sr == m`) or
//! stable (`ut ≤ GST`); by C1 every dependency of a stable version has a
//! smaller `ut`, so by C2 it has arrived too. Heartbeats every Δ keep VV
//! moving when a partition has nothing to replicate. A GET-ROTX waits until
//! the coordinator's GST reaches the client's `dt`, then reads every key at
//! the snapshot `GST`.
//!
//! **The known flaw** (thesis §5.1.1, notes §10 claim 12): correctness rests
//! on clocks never going backwards. A server whose clock is stepped back
//! below a GST already computed elsewhere stamps versions that remote DCs
//! consider stable before they arrive (C2 breaks). This module deliberately
//! has *no* guard against it — the test `a_clock_stepped_back_breaks_causality`
//! shows the resulting violation — because demonstrating it is the point of
//! running GentleRain next to CausalSpartanX, whose HLC fixes it.
//!
//! ## Choices and deviations from the paper
//!
//! 1. **A PUT carries the client's GST_c** and the server raises its GST to
//!    it. The paper's PUT carries only `dt`. Without it a local version hides
//!    the remote part of its causal past from readers: writer w reads remote
//!    r (visible at partition P1, whose GST ≥ r.ut) and writes local x at P3;
//!    reader c reads x at P3 (local, so visible) and learns only P3's GST;
//!    then c reads r's dependency q at P2, whose GST may still lag below q.ut
//!    (tree pushes reach partitions at different times), and sees an older
//!    q. Merging GST_w into P3's GST is sound (GST_w is a stable time of this
//!    DC) and makes every reply's GST cover the remote causal past of what it
//!    returns. The test `a_local_write_carries_its_writers_stable_time` is
//!    that run.
//! 2. **Visibility is `ut ≤ GST`** (DKVF's `<=`; the paper says `<`), and a
//!    heartbeat announces the clock itself, not clock − 1. A partition can
//!    still stamp a version with `ut` equal to a value it already announced
//!    (same µs), so a remote GST may admit `ut = t` before that version
//!    arrives. That is safe: anything depending on it has a strictly larger
//!    `ut` (C1, because the PUT waits until clock > dt), so nothing visible
//!    can expose its absence, and every version that arrives later with
//!    `ut ≤ GST` is reported visible on arrival. The same argument covers a
//!    local write in the µs of the stabilization tick that reported `VV[m]`.
//! 3. **One timestamp per key and µs.** The store orders versions by
//!    ⟨ut, sr⟩, so two local writes to one key in the same µs would collide;
//!    the second waits 1 µs like a C1 wait (reported the same way).
//! 4. **GET-ROTX**: the coordinator waits until `GST ≥ dt` and slices return
//!    versions with `ut ≤ snapshot`, matching the GET rule. The paper falls
//!    back to Eiger when `dt − GST` exceeds a threshold; that fallback is not
//!    implemented. With the default `rot_wait_threshold_us = u64::MAX` it is
//!    never triggered (as in the thesis' experiments); a smaller threshold
//!    makes such a ROT fail with [`OpError::Aborted`] instead, so runs can
//!    count how often the fallback would have been needed.
//! 5. **Full replication only** ([`Protocol::validate`] rejects partial
//!    replication and intra-DC replica groups), as in the paper.
//! 6. **Heartbeats** are skipped when a replicate was sent since the previous
//!    heartbeat tick (the paper: "in the past Δ"). Counting ticks rather than
//!    comparing clock readings keeps heartbeats flowing after a clock jump.
//! 7. **Slices raise GST to the snapshot** (as CausalSpartanX's slice does,
//!    notes §5.4 line 21): the snapshot is a stable time of this DC.
//! 8. **Version GC**, unspecified in the paper: on the stabilization tick a
//!    bounded number of keys that received versions drop versions older than
//!    the newest one with `ut ≤` a GST at least `gc_grace_us` old. A ROT slice
//!    that needed a dropped version fails the ROT ("snapshot pruned") rather
//!    than returning an older state.
//! 9. **Observations.** [`Observation::Visible`] is reported once per
//!    version: a local one when it is written, a remote one when it is
//!    present, `ut ≤ GST`, and it is what a GET returns (a last-writer-wins
//!    loser is never read, so never reported — the same rule as every other
//!    protocol). [`Observation::Stable`] reports each new GST. `Blocked` is reported
//!    as `put_clock_wait` (C1) and `rot_gst_wait`, only when a request waited.

use crate::common::{client_server_for, fail_unsupported, payload};
use crate::stable_tree::{StableTree, TreeStep};
use causeway_core::{
    Client, ClientCtx, ClientEnv, ClientId, DcId, Inserted, Key, Message, NodeCtx, NodeId, NodeRole, Observation, Op,
    OpError, OpKind, OpResult, PartitionId, Protocol, Server, ServerEnv, Topology, Value, Versioned, vmin_entry,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

pub struct GentleRain;

/// A physical-clock time in µs. Every GentleRain timestamp — a version's
/// `ut`, a client's `dt` (DT_c), a GST, a heartbeat — is one.
pub type TimeUs = u64;

/// GentleRain's parameters (the `[protocol]` table).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Δ: a partition that sent no replicate since its previous heartbeat
    /// tick sends its clock to its equivalents every Δ.
    pub heartbeat_interval_us: u64,
    /// θ: how often each partition runs a step of the GST tree (and GC).
    pub stabilization_interval_us: u64,
    /// Children per node of the per-DC GST aggregation tree.
    pub tree_fanout: usize,
    /// Versions are dropped only below a GST at least this old (local clock),
    /// so ROTs whose snapshot is slightly behind still find their versions.
    pub gc_grace_us: u64,
    /// A ROT whose `dt` is more than this ahead of the coordinator's GST would
    /// fall back to Eiger in the paper; here it fails with
    /// [`OpError::Aborted`]. `u64::MAX` (the default): always wait.
    pub rot_wait_threshold_us: u64,
    /// Test only: never send heartbeats, so GST moves only with replicated
    /// writes and stops when they do — a stall torture's liveness check
    /// must catch.
    pub mutant_drop_heartbeats: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            heartbeat_interval_us: 10_000,
            stabilization_interval_us: 5_000,
            tree_fanout: 4,
            gc_grace_us: 1_000_000,
            rot_wait_threshold_us: u64::MAX,
            mutant_drop_heartbeats: false,
        }
    }
}

impl Protocol for GentleRain {
    const NAME: &'static str = "gentlerain";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put, OpKind::Rot];
    const CAUSAL: bool = true;
    /// Seed 000 §5.6: not safe when a clock steps back (C2 breaks), so no
    /// backward jumps; forward jumps and drift keep clocks monotonic. No
    /// crash-restart: `on_start` recovers nothing (VV, GST and parked
    /// requests start empty), and simulated restarts break causality (torture
    /// seed 10062 when it drew crash-restart for GentleRain, commit 5f24028:
    /// reads of ∅ after a visible write), so the claim waits for recovery.
    const TOLERATES: causeway_core::Faults =
        causeway_core::Faults { backward_jumps: false, crash_restart: false, ..causeway_core::Faults::ALL };
    /// A GET-ROTX waits until GST reaches the client's `dt` (deviation 4),
    /// and GST stops while any DC is cut off: not available under partitions
    /// (the paper falls back to Eiger there).
    const AVAILABLE_UNDER_PARTITIONS: bool = false;
    type Msg = Msg;
    type Version = Version;
    type Config = Config;
    type Server = GentleRainServer;
    type Client = GentleRainClient;
    /// A PUT waits out the clock skew (C1); a ROT waits for GST to pass the
    /// client's `dt`: one one-way trip plus a heartbeat for VV, then a few
    /// tree rounds of θ for the GST to reach the coordinator.
    fn liveness_bound_us(cfg: &Config, env: &causeway_core::LivenessEnv) -> u64 {
        20_000
            + env.max_rtt_us
            + 2 * env.max_clock_skew_us
            + 2 * cfg.heartbeat_interval_us
            + 8 * cfg.stabilization_interval_us
            + 8 * env.intra_dc_rtt_us
    }

    fn validate(cfg: &Config, topology: &Topology) -> Result<(), String> {
        if !topology.is_full_replication() {
            return Err("gentlerain needs full replication (topology.replication = full): GST is a minimum over \
                        every DC's entry, and a GET-ROTX reads every key inside the client's DC"
                .into());
        }
        if topology.spec().replicas_per_partition != 1 {
            return Err("gentlerain has no intra-DC replication: topology.replicas_per_partition must be 1".into());
        }
        if cfg.heartbeat_interval_us == 0 || cfg.stabilization_interval_us == 0 {
            return Err("protocol.heartbeat_interval_us and protocol.stabilization_interval_us must be > 0".into());
        }
        if cfg.tree_fanout == 0 {
            return Err("protocol.tree_fanout must be ≥ 1".into());
        }
        Ok(())
    }

    fn server(cfg: &Config, ctx: NodeCtx) -> GentleRainServer {
        let part = match ctx.role {
            NodeRole::Partition { dc, partition, replica: 0 } if ctx.topology.server(dc, partition) == Some(ctx.id) => {
                Some(PartitionServer::new(cfg, &ctx, dc, partition))
            }
            _ => None,
        };
        GentleRainServer { part }
    }

    fn client(_cfg: &Config, ctx: ClientCtx) -> GentleRainClient {
        GentleRainClient { ctx, dt: 0, gst: 0, pending: None }
    }
}

/// Every message of the protocol.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// ⟨GetReq k, GST_c⟩.
    GetReq { key: Key, gst: TimeUs },
    /// ⟨GetReply v, ut, GST⟩; `ut` is 0 when no version is visible.
    GetReply { value: Option<Value>, ut: TimeUs, gst: TimeUs },
    /// ⟨PutReq k, v, DT_c⟩, plus GST_c (deviation 1).
    PutReq { key: Key, value: Value, dt: TimeUs, gst: TimeUs },
    /// ⟨PutReply ut⟩.
    PutReply { ut: TimeUs },
    /// GET-ROTX ⟨keys, DT_c, GST_c⟩ to the coordinator.
    RotReq { keys: Vec<Key>, dt: TimeUs, gst: TimeUs },
    /// The ROT's outcome and the coordinator's GST.
    RotReply { outcome: RotOutcome, gst: TimeUs },
    /// Coordinator → partition of the same DC: read `keys` at `snapshot`.
    SliceReq { rot: u64, keys: Vec<Key>, snapshot: TimeUs },
    /// One [`SliceRead`] per requested key, in request order.
    SliceReply { rot: u64, reads: Vec<SliceRead> },
    /// ⟨Replicate d⟩ to the equivalents in the other DCs, in `ut` order.
    Replicate { key: Key, version: Version },
    /// ⟨Heartbeat clock⟩ to the equivalents.
    Heartbeat { clock: TimeUs },
    /// Tree child → parent: entry-wise min of the subtree's VVs.
    StableReport { vv: Vec<TimeUs> },
    /// Tree parent → child: the DC's GST.
    StablePush { gst: TimeUs },
}

/// What a GET-ROTX returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RotOutcome {
    /// One value per requested key, in request order, and the largest `ut`
    /// among them (the client raises DT_c to it).
    Read {
        values: Vec<Option<Value>>,
        max_ut: TimeUs,
    },
    Aborted {
        reason: String,
    },
}

/// One key's answer to a slice request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SliceRead {
    /// The latest version with `ut ≤ snapshot`.
    Found { value: Value, ut: TimeUs },
    /// The key has no version at or below the snapshot.
    Absent,
    /// No version at or below the snapshot is left, but GC dropped some: the
    /// snapshot's version may have been one of them.
    Pruned,
}

impl Message for Msg {
    fn kind(&self) -> &'static str {
        match self {
            Msg::GetReq { .. } => "get_req",
            Msg::GetReply { .. } => "get_reply",
            Msg::PutReq { .. } => "put_req",
            Msg::PutReply { .. } => "put_reply",
            Msg::RotReq { .. } => "rot_req",
            Msg::RotReply { .. } => "rot_reply",
            Msg::SliceReq { .. } => "slice_req",
            Msg::SliceReply { .. } => "slice_reply",
            Msg::Replicate { .. } => "replicate",
            Msg::Heartbeat { .. } => "heartbeat",
            Msg::StableReport { .. } => "stable_report",
            Msg::StablePush { .. } => "stable_push",
        }
    }
    fn is_client(&self) -> bool {
        matches!(
            self,
            Msg::GetReq { .. }
                | Msg::GetReply { .. }
                | Msg::PutReq { .. }
                | Msg::PutReply { .. }
                | Msg::RotReq { .. }
                | Msg::RotReply { .. }
        )
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        match self {
            Msg::GetReq { key, .. } => (key.len(), 0),
            Msg::PutReq { key, value, .. } => (key.len(), value.len()),
            Msg::RotReq { keys, .. } => (keys.iter().map(|k| k.len()).max().unwrap_or(0), 0),
            _ => (0, 0),
        }
    }
    fn payload_bytes(&self) -> usize {
        match self {
            Msg::GetReq { key, .. } => key.len(),
            Msg::GetReply { value, .. } => value.as_ref().map_or(0, |v| v.len()),
            Msg::PutReq { key, value, .. } | Msg::Replicate { key, version: Version { value, .. } } => {
                key.len() + value.len()
            }
            Msg::RotReq { keys, .. } | Msg::SliceReq { keys, .. } => payload(keys.iter().map(|k| &k[..])),
            Msg::RotReply { outcome: RotOutcome::Read { values, .. }, .. } => {
                payload(values.iter().flatten().map(|v| &v[..]))
            }
            Msg::SliceReply { reads, .. } => payload(reads.iter().filter_map(|r| match r {
                SliceRead::Found { value, .. } => Some(&value[..]),
                SliceRead::Absent | SliceRead::Pruned => None,
            })),
            Msg::RotReply { outcome: RotOutcome::Aborted { .. }, .. }
            | Msg::PutReply { .. }
            | Msg::Heartbeat { .. }
            | Msg::StableReport { .. }
            | Msg::StablePush { .. } => 0,
        }
    }
}

/// A stored version d: ⟨d.v, d.ut, d.sr⟩ (DKVF's `Record`), ordered by ⟨ut, sr⟩.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    /// Update time: the origin server's physical clock when it accepted the PUT.
    pub ut: TimeUs,
    /// Source replica: the DC the PUT was accepted in.
    pub sr: DcId,
}

impl Versioned for Version {
    type Order = (TimeUs, DcId);
    fn order(&self) -> (TimeUs, DcId) {
        (self.ut, self.sr)
    }
    fn value(&self) -> &Value {
        &self.value
    }
}

// ---------------------------------------------------------------- client

/// A client session c: DT_c and GST_c, both scalars.
pub struct GentleRainClient {
    ctx: ClientCtx,
    /// DT_c: the largest `ut` this session has read or written.
    dt: TimeUs,
    /// GST_c: the largest GST this session has been told by its DC.
    gst: TimeUs,
    pending: Option<Pending>,
}

enum Pending {
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
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                self.pending = Some(Pending::Get);
                env.send(to, Msg::GetReq { key, gst: self.gst });
            }
            // PUT(k, v): send ⟨PutReq k, v, DT_c⟩ (and GST_c, deviation 1).
            Op::Put { key, value } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                self.pending = Some(Pending::Put);
                env.send(to, Msg::PutReq { key, value, dt: self.dt, gst: self.gst });
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
            (p, _) => self.pending = p, // a stray reply: ignore it
        }
    }
}

// ---------------------------------------------------------------- server state

/// Timer tokens. Parked PUTs use `PUT_WAIT_TOKEN_BASE + id`.
const HEARTBEAT_TOKEN: u64 = 0;
const STABILIZE_TOKEN: u64 = 1;
const PUT_WAIT_TOKEN_BASE: u64 = 2;

/// At most this many GC candidates are processed per stabilization tick.
const GC_KEYS_PER_TICK: usize = 512;

/// A GentleRain node. Only partition primaries take part; any other node of
/// a shared topology (a service node) ignores every input.
pub struct GentleRainServer {
    part: Option<PartitionServer>,
}

/// Partition server p^m_n.
struct PartitionServer {
    cfg: Config,
    topology: Arc<Topology>,
    me: NodeId,
    /// m: this server's DC.
    dc: DcId,
    /// n: this server's partition.
    partition: PartitionId,
    /// p^k_n for every k ≠ m, in DC order.
    equivalents: Vec<(DcId, NodeId)>,
    /// VV^m_n: entry k ≠ m is the latest `ut` or heartbeat received from
    /// p^k_n; entry m is this server's clock (at the last stabilization tick
    /// or local PUT).
    vv: Vec<TimeUs>,
    /// GST^m_n: every version with `ut ≤ gst` has reached this DC (C2).
    gst: TimeUs,
    tree: StableTree<TimeUs>,
    /// The tree parent, the only node whose [`Msg::StablePush`] is accepted.
    tree_parent: Option<NodeId>,
    /// Remote versions present but not yet admitted by GST, ⟨ut, sr, key⟩ →
    /// value, so [`Observation::Visible`] fires exactly when GST passes them.
    not_yet_visible: BTreeMap<(TimeUs, DcId, Key), Value>,
    /// Whether a replicate went out since the last heartbeat tick.
    replicated_since_heartbeat: bool,
    /// PUTs waiting for the clock to pass their `dt` (C1), by id.
    parked_puts: BTreeMap<u64, ParkedPut>,
    next_put_id: u64,
    /// ROTs waiting for `GST ≥ dt`, by ⟨dt, id⟩.
    parked_rots: BTreeMap<(TimeUs, u64), ParkedRot>,
    /// ROTs this server coordinates whose slices are outstanding, by id.
    rots: BTreeMap<u64, RotInProgress>,
    next_rot_id: u64,
    /// ⟨local clock, GST⟩ each time GST rose, oldest first, trimmed to the
    /// newest sample at least `gc_grace_us` old.
    gst_history: VecDeque<(TimeUs, TimeUs)>,
    /// ⟨ut, key⟩ of versions inserted and not yet considered by GC.
    gc_queue: BTreeSet<(TimeUs, Key)>,
}

struct ParkedPut {
    client: ClientId,
    key: Key,
    value: Value,
    dt: TimeUs,
    parked_at_us: TimeUs,
}

struct ParkedRot {
    client: ClientId,
    keys: Vec<Key>,
    parked_at_us: TimeUs,
}

struct RotInProgress {
    client: ClientId,
    /// One entry per requested key; `None` until its slice answers.
    reads: Vec<Option<SliceRead>>,
    /// Servers whose slice is outstanding, with the key positions they read.
    awaiting: BTreeMap<NodeId, Vec<usize>>,
    malformed: bool,
}

impl PartitionServer {
    fn new(cfg: &Config, ctx: &NodeCtx, dc: DcId, partition: PartitionId) -> Self {
        let topology = ctx.topology.clone();
        let fanout = cfg.tree_fanout.max(1);
        let servers: Vec<NodeId> = topology.dc_servers(dc).collect();
        let tree_parent =
            servers.iter().position(|&n| n == ctx.id).filter(|&i| i > 0).map(|i| servers[(i - 1) / fanout]);
        PartitionServer {
            cfg: cfg.clone(),
            me: ctx.id,
            dc,
            partition,
            equivalents: topology.equivalents(partition).filter(|&(d, _)| d != dc).collect(),
            vv: vec![0; topology.dcs()],
            gst: 0,
            tree: StableTree::new(&topology, ctx.id, fanout),
            tree_parent,
            not_yet_visible: BTreeMap::new(),
            replicated_since_heartbeat: false,
            parked_puts: BTreeMap::new(),
            next_put_id: 0,
            parked_rots: BTreeMap::new(),
            rots: BTreeMap::new(),
            next_rot_id: 0,
            gst_history: VecDeque::new(),
            gc_queue: BTreeSet::new(),
            topology,
        }
    }

    /// The DC of `from` if it is one of this partition's equivalents.
    fn equivalent_dc(&self, from: NodeId) -> Option<DcId> {
        self.equivalents.iter().find(|&&(_, n)| n == from).map(|&(d, _)| d)
    }

    /// GST = max(GST, g), for any `g` that is a stable time of this DC (a
    /// tree result, or a GST a client or coordinator got from this DC).
    /// Remote versions it admits become visible; parked ROTs it satisfies start.
    /// Report a remote version visible if it is what a GET returns now: a
    /// version that lost last-writer-wins to one already visible is never
    /// read, so it is never reported (the meaning of `Observation::Visible`).
    fn report_if_read(
        &self,
        env: &mut impl ServerEnv<Msg, Version>,
        key: &Key,
        value: &Value,
        origin: DcId,
        written_us: TimeUs,
    ) {
        let (m, gst) = (self.dc, self.gst);
        let read = env.store().latest_where(key, |d| d.sr == m || d.ut <= gst).map(|d| (d.ut, d.sr));
        if read == Some((written_us, origin)) {
            env.observe(Observation::Visible { key, value, origin, written_us });
        }
    }

    fn raise_gst(&mut self, env: &mut impl ServerEnv<Msg, Version>, g: TimeUs) {
        if g <= self.gst {
            return;
        }
        self.gst = g;
        env.observe(Observation::Stable { stable_us: g });
        while let Some(e) = self.not_yet_visible.first_entry()
            && e.key().0 <= g
        {
            let ((written_us, origin, key), value) = e.remove_entry();
            self.report_if_read(env, &key, &value, origin, written_us);
        }
        while let Some(e) = self.parked_rots.first_entry()
            && e.key().0 <= g
        {
            let ((_, id), rot) = e.remove_entry();
            let waited_us = env.now_us().saturating_sub(rot.parked_at_us);
            env.observe(Observation::Blocked { what: "rot_gst_wait", waited_us });
            self.start_rot(env, id, rot.client, rot.keys);
        }
    }

    // ------------------------------------------------------------ GET

    /// ⟨GetReq k, gst⟩: GST = max(GST, gst) — the client's GST came from this
    /// DC, so it is a real stable time — and return the latest version that
    /// is local or stable.
    fn on_get(&mut self, env: &mut impl ServerEnv<Msg, Version>, client: ClientId, key: Key, gst: TimeUs) {
        self.raise_gst(env, gst);
        let (m, gst) = (self.dc, self.gst);
        let found = env.store().latest_where(&key, |d| d.sr == m || d.ut <= gst).map(|d| (d.value.clone(), d.ut));
        let (value, ut) = match found {
            Some((v, ut)) => (Some(v), ut),
            None => (None, 0),
        };
        env.reply(client, Msg::GetReply { value, ut, gst });
    }

    // ------------------------------------------------------------ PUT

    /// ⟨PutReq k, v, dt, gst⟩: GST = max(GST, gst) (deviation 1: the
    /// writer's GST_c is a stable time of this DC, and readers of the new
    /// version must learn it); wait until the clock exceeds dt (C1), then
    /// write. The wait parks the request and sets a timer for the remaining skew.
    fn on_put(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        client: ClientId,
        key: Key,
        value: Value,
        dt: TimeUs,
        gst: TimeUs,
    ) {
        if self.topology.partition_of(&key) != self.partition {
            return; // misrouted (our client never does this); there is no error reply for a PUT
        }
        self.raise_gst(env, gst);
        let now = env.now_us();
        if self.may_write(env, &key, dt, now) {
            self.apply_put(env, client, key, value, None);
        } else {
            let id = self.next_put_id;
            self.next_put_id += 1;
            env.set_timer(put_wait_us(dt, now), PUT_WAIT_TOKEN_BASE + id);
            self.parked_puts.insert(id, ParkedPut { client, key, value, dt, parked_at_us: now });
        }
    }

    /// C1 (`clock > dt`), and no version of `key` already carries ⟨now, m⟩.
    fn may_write(&self, env: &mut impl ServerEnv<Msg, Version>, key: &[u8], dt: TimeUs, now: TimeUs) -> bool {
        now > dt && env.store().exact(key, (now, self.dc)).is_none()
    }

    /// A parked PUT's timer fired: proceed if the clock has now passed `dt`,
    /// otherwise wait again (the clock may drift, or have jumped).
    fn recheck_parked_put(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: u64) {
        let Some(p) = self.parked_puts.remove(&id) else { return };
        let now = env.now_us();
        if self.may_write(env, &p.key, p.dt, now) {
            self.apply_put(env, p.client, p.key, p.value, Some(p.parked_at_us));
        } else {
            env.set_timer(put_wait_us(p.dt, now), PUT_WAIT_TOKEN_BASE + id);
            self.parked_puts.insert(id, p);
        }
    }

    /// Stamp with the clock, insert, acknowledge, replicate.
    fn apply_put(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        client: ClientId,
        key: Key,
        value: Value,
        parked_at_us: Option<TimeUs>,
    ) {
        // ut = the physical clock, as read now. NO guard against a clock that
        // went backwards (no max with VV[m] or with the last ut): GentleRain
        // has none, and a clock stepped back below a GST computed elsewhere
        // breaks C2 (seed 000 §5.1.1, notes §5.6). The tests demonstrate it.
        let ut = env.now_us();
        if let Some(t0) = parked_at_us {
            env.observe(Observation::Blocked { what: "put_clock_wait", waited_us: ut.saturating_sub(t0) });
        }
        let version = Version { value, ut, sr: self.dc };
        env.store().insert(key.clone(), version.clone());
        env.observe(Observation::Visible { key: &key, value: &version.value, origin: self.dc, written_us: ut });
        self.vv[self.dc.idx()] = ut;
        env.reply(client, Msg::PutReply { ut });
        // Sent as the version is created, so each FIFO channel carries this
        // server's versions in `ut` order while the clock runs forwards.
        for &(_, n) in &self.equivalents {
            env.send(n, Msg::Replicate { key: key.clone(), version: version.clone() });
            self.replicated_since_heartbeat = true;
        }
        self.gc_queue.insert((ut, key));
    }

    // ------------------------------------------------------------ replication

    /// ⟨Replicate d⟩ from p^k_n: insert d; `VV[k] = d.ut` (sound because the
    /// channel is FIFO and p^k_n sends in `ut` order).
    fn on_replicate(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, key: Key, version: Version) {
        let Some(k) = self.equivalent_dc(from) else { return };
        if version.sr != k {
            return; // GentleRain only replicates from the origin
        }
        self.vv[k.idx()] = version.ut;
        let (ut, value) = (version.ut, version.value.clone());
        if env.store().insert(key.clone(), version) == Inserted::Duplicate {
            return;
        }
        self.gc_queue.insert((ut, key.clone()));
        if ut <= self.gst {
            self.report_if_read(env, &key, &value, k, ut);
        } else {
            self.not_yet_visible.insert((ut, k, key), value);
        }
    }

    /// ⟨Heartbeat t⟩ from p^k_n: `VV[k] = t`.
    fn on_heartbeat(&mut self, from: NodeId, clock: TimeUs) {
        if let Some(k) = self.equivalent_dc(from) {
            self.vv[k.idx()] = clock;
        }
    }

    // ------------------------------------------------------------ GST tree

    fn on_stable_report(&mut self, from: NodeId, vv: Vec<TimeUs>) {
        if vv.len() == self.vv.len() {
            self.tree.on_report(from, vv); // reports from non-children are ignored
        }
    }

    fn on_stable_push(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, gst: TimeUs) {
        if Some(from) == self.tree_parent {
            self.raise_gst(env, gst);
            self.push_gst(env);
        }
    }

    fn push_gst(&self, env: &mut impl ServerEnv<Msg, Version>) {
        for &c in self.tree.children() {
            env.send(c, Msg::StablePush { gst: self.gst });
        }
    }

    // ------------------------------------------------------------ GET-ROTX

    /// ⟨RotReq keys, dt, gst⟩ at the coordinator: wait until GST ≥ dt (the
    /// snapshot must include everything the client depends on), then read.
    fn on_rot(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        client: ClientId,
        keys: Vec<Key>,
        dt: TimeUs,
        gst: TimeUs,
    ) {
        self.raise_gst(env, gst);
        let id = self.next_rot_id;
        self.next_rot_id += 1;
        if dt <= self.gst {
            self.start_rot(env, id, client, keys);
        } else if dt - self.gst > self.cfg.rot_wait_threshold_us {
            // The paper runs Eiger's ROT here; that fallback is not implemented.
            let reason = format!(
                "dt is {} µs ahead of GST, above rot_wait_threshold_us (the Eiger fallback is not implemented)",
                dt - self.gst
            );
            env.reply(client, Msg::RotReply { outcome: RotOutcome::Aborted { reason }, gst: self.gst });
        } else {
            self.parked_rots.insert((dt, id), ParkedRot { client, keys, parked_at_us: env.now_us() });
        }
    }

    /// snapshot = GST; ask every partition of this DC holding some of the
    /// keys (this one directly) for its versions at the snapshot.
    fn start_rot(&mut self, env: &mut impl ServerEnv<Msg, Version>, id: u64, client: ClientId, keys: Vec<Key>) {
        let snapshot = self.gst;
        let mut slices: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
        for (i, k) in keys.iter().enumerate() {
            match self.topology.server_for_key(self.dc, k) {
                Some(n) => slices.entry(n).or_default().push(i),
                None => {
                    let reason = "a key's partition is not stored in this DC".to_string();
                    env.reply(client, Msg::RotReply { outcome: RotOutcome::Aborted { reason }, gst: self.gst });
                    return;
                }
            }
        }
        let mut rot =
            RotInProgress { client, reads: vec![None; keys.len()], awaiting: BTreeMap::new(), malformed: false };
        let local = slices.remove(&self.me);
        for (n, idx) in slices {
            env.send(n, Msg::SliceReq { rot: id, keys: idx.iter().map(|&i| keys[i].clone()).collect(), snapshot });
            rot.awaiting.insert(n, idx);
        }
        if let Some(idx) = local {
            let mine: Vec<Key> = idx.iter().map(|&i| keys[i].clone()).collect();
            let reads = read_slice(env, &mine, snapshot);
            for (i, r) in idx.into_iter().zip(reads) {
                rot.reads[i] = Some(r);
            }
        }
        if rot.awaiting.is_empty() {
            self.finish_rot(env, rot);
        } else {
            self.rots.insert(id, rot);
        }
    }

    /// ⟨SliceReq keys, snapshot⟩ from a coordinator of this DC.
    fn on_slice_req(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: NodeId,
        rot: u64,
        keys: Vec<Key>,
        snapshot: TimeUs,
    ) {
        if self.topology.dc_of(from) != self.dc {
            return;
        }
        self.raise_gst(env, snapshot);
        let reads = read_slice(env, &keys, snapshot);
        env.send(from, Msg::SliceReply { rot, reads });
    }

    fn on_slice_reply(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, id: u64, reads: Vec<SliceRead>) {
        let Some(rot) = self.rots.get_mut(&id) else { return };
        let Some(idx) = rot.awaiting.remove(&from) else { return };
        if reads.len() == idx.len() {
            for (i, r) in idx.into_iter().zip(reads) {
                rot.reads[i] = Some(r);
            }
        } else {
            rot.malformed = true;
        }
        if rot.awaiting.is_empty()
            && let Some(rot) = self.rots.remove(&id)
        {
            self.finish_rot(env, rot);
        }
    }

    /// ⟨RotReply values, GST⟩, or an abort if a slice was pruned.
    fn finish_rot(&self, env: &mut impl ServerEnv<Msg, Version>, rot: RotInProgress) {
        let mut values = Vec::with_capacity(rot.reads.len());
        let mut max_ut = 0;
        let mut outcome = None;
        for r in rot.reads {
            match r {
                Some(SliceRead::Found { value, ut }) => {
                    max_ut = max_ut.max(ut);
                    values.push(Some(value));
                }
                Some(SliceRead::Absent) => values.push(None),
                Some(SliceRead::Pruned) => outcome = Some("snapshot pruned"),
                None => outcome = Some("malformed slice reply"),
            }
        }
        if rot.malformed {
            outcome = Some("malformed slice reply");
        }
        let outcome = match outcome {
            Some(reason) => RotOutcome::Aborted { reason: reason.to_string() },
            None => RotOutcome::Read { values, max_ut },
        };
        env.reply(rot.client, Msg::RotReply { outcome, gst: self.gst });
    }

    // ------------------------------------------------------------ timers

    /// Every Δ: if no replicate went out since the last tick, send
    /// ⟨Heartbeat clock⟩ so the equivalents' VV entries keep moving.
    fn heartbeat_tick(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        if !self.replicated_since_heartbeat && !self.cfg.mutant_drop_heartbeats {
            let clock = env.now_us();
            for &(_, n) in &self.equivalents {
                env.send(n, Msg::Heartbeat { clock });
            }
        }
        self.replicated_since_heartbeat = false;
        env.set_timer(self.cfg.heartbeat_interval_us, HEARTBEAT_TOKEN);
    }

    /// Every θ: `VV[m] = clock`; one step of the GST tree (report the subtree's
    /// entry-wise min up; at the root, GST = max(GST, min of all entries) and
    /// push it down); then a bounded round of GC.
    fn stabilization_tick(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        let now = env.now_us();
        self.vv[self.dc.idx()] = now; // as read: a clock stepped back reports its lower value
        match self.tree.step(&self.vv) {
            TreeStep::Report { parent, aggregate } => env.send(parent, Msg::StableReport { vv: aggregate }),
            TreeStep::Stable(aggregate) => {
                self.raise_gst(env, vmin_entry(&aggregate).unwrap_or(0));
                self.push_gst(env);
            }
            TreeStep::Waiting => {}
        }
        self.collect_garbage(env, now);
        env.set_timer(self.cfg.stabilization_interval_us, STABILIZE_TOKEN);
    }

    /// Drop versions no reader can need: for up to [`GC_KEYS_PER_TICK`] keys
    /// that received a version with `ut ≤ old_gst`, where `old_gst` is the GST
    /// of at least `gc_grace_us` ago, keep the newest version with
    /// `ut ≤ old_gst` and everything after it. GETs never read below it (GST
    /// only grows), and ROTs only if their snapshot is older than `old_gst` —
    /// their slice then answers [`SliceRead::Pruned`].
    fn collect_garbage(&mut self, env: &mut impl ServerEnv<Msg, Version>, now: TimeUs) {
        if self.gst_history.back().is_none_or(|&(_, g)| g < self.gst) {
            self.gst_history.push_back((now, self.gst));
        }
        let Some(cutoff) = now.checked_sub(self.cfg.gc_grace_us) else { return };
        while self.gst_history.len() >= 2 && self.gst_history[1].0 <= cutoff {
            self.gst_history.pop_front();
        }
        let old_gst = match self.gst_history.front() {
            Some(&(at, g)) if at <= cutoff => g,
            _ => return,
        };
        for _ in 0..GC_KEYS_PER_TICK {
            match self.gc_queue.first() {
                Some(&(ut, _)) if ut <= old_gst => {}
                _ => break,
            }
            let Some((_, key)) = self.gc_queue.pop_first() else { break };
            env.store().gc_key(&key, |d| d.ut <= old_gst);
        }
    }
}

/// How long a PUT with dependency time `dt` still has to wait at `now`.
fn put_wait_us(dt: TimeUs, now: TimeUs) -> u64 {
    dt.saturating_sub(now) + 1
}

/// Each key's latest version with `ut ≤ snapshot`, of any origin: local
/// versions newer than the snapshot are excluded too, or a later local write
/// could appear without what it depends on. The client's own writes have
/// `ut ≤ dt ≤ snapshot`, so it reads them.
fn read_slice(env: &mut impl ServerEnv<Msg, Version>, keys: &[Key], snapshot: TimeUs) -> Vec<SliceRead> {
    let store = env.store();
    keys.iter()
        .map(|k| match store.latest_where(k, |d| d.ut <= snapshot) {
            Some(d) => SliceRead::Found { value: d.value.clone(), ut: d.ut },
            None if store.was_pruned(k) => SliceRead::Pruned,
            None => SliceRead::Absent,
        })
        .collect()
}

// ---------------------------------------------------------------- dispatch

impl Server for GentleRainServer {
    type Msg = Msg;
    type Version = Version;

    fn on_start(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        let Some(s) = self.part.as_mut() else { return };
        s.vv[s.dc.idx()] = env.now_us();
        env.set_timer(s.cfg.heartbeat_interval_us, HEARTBEAT_TOKEN);
        env.set_timer(s.cfg.stabilization_interval_us, STABILIZE_TOKEN);
    }

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        let Some(s) = self.part.as_mut() else { return };
        match msg {
            Msg::GetReq { key, gst } => s.on_get(env, from, key, gst),
            Msg::PutReq { key, value, dt, gst } => s.on_put(env, from, key, value, dt, gst),
            Msg::RotReq { keys, dt, gst } => s.on_rot(env, from, keys, dt, gst),
            _ => {} // replies and peer messages never come from clients; the runtime rejects them at the edge
        }
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, msg: Msg) {
        let Some(s) = self.part.as_mut() else { return };
        if !s.topology.contains(from) {
            return;
        }
        match msg {
            Msg::Replicate { key, version } => s.on_replicate(env, from, key, version),
            Msg::Heartbeat { clock } => s.on_heartbeat(from, clock),
            Msg::StableReport { vv } => s.on_stable_report(from, vv),
            Msg::StablePush { gst } => s.on_stable_push(env, from, gst),
            Msg::SliceReq { rot, keys, snapshot } => s.on_slice_req(env, from, rot, keys, snapshot),
            Msg::SliceReply { rot, reads } => s.on_slice_reply(env, from, rot, reads),
            _ => {} // client traffic never comes from peers
        }
    }

    fn on_timer(&mut self, env: &mut impl ServerEnv<Msg, Version>, token: u64) {
        let Some(s) = self.part.as_mut() else { return };
        match token {
            HEARTBEAT_TOKEN => s.heartbeat_tick(env),
            STABILIZE_TOKEN => s.stabilization_tick(env),
            t => s.recheck_parked_put(env, t - PUT_WAIT_TOKEN_BASE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProtocolName;
    use crate::testkit::{
        Dest, InFlight, Seen, TestNet, bytes, channel, client_traffic, get, put, rot, run, stabilize, stabilize_holding,
    };
    use causeway_core::{Replication, ServiceSpec, TopologySpec};

    type Net = TestNet<GentleRain>;
    const PER_DC: u32 = 2;
    const DC0: DcId = DcId(0);
    const DC1: DcId = DcId(1);

    /// A ROT's slices are part of the operation's own traffic.
    fn slices(m: &Msg) -> bool {
        matches!(m, Msg::SliceReq { .. } | Msg::SliceReply { .. })
    }
    /// What an operation needs: client traffic and the slices of a ROT.
    fn op_traffic(m: &InFlight<Msg>) -> bool {
        client_traffic(m) || slices(&m.msg)
    }

    fn net(dcs: u16, partitions: u32) -> Net {
        net_with(dcs, partitions, Config::default())
    }
    fn net_with(dcs: u16, partitions: u32, cfg: Config) -> Net {
        net_spec(TopologySpec::full(dcs, partitions), cfg)
    }
    fn net_spec(spec: TopologySpec, cfg: Config) -> Net {
        let mut n = Net::with_spec(spec, PER_DC, cfg);
        n.also_op_traffic = slices;
        n
    }
    /// The i-th client of DC `dc`.
    fn cl(dc: u16, i: u32) -> ClientId {
        ClientId(dc as u32 * PER_DC + i)
    }
    /// A key of partition `p`.
    fn key_on(net: &Net, p: u32) -> Key {
        (0..).map(|i| bytes(&format!("key{i}"))).find(|k| net.topology.partition_of(k) == PartitionId(p)).unwrap()
    }
    fn srv(net: &Net, node: NodeId) -> &PartitionServer {
        net.servers[node.idx()].part.as_ref().expect("a partition server")
    }
    fn gst(net: &Net, node: NodeId) -> TimeUs {
        srv(net, node).gst
    }
    fn latest(net: &Net, node: NodeId, k: &Key) -> Version {
        net.stores[node.idx()].latest(k).expect("a version").clone()
    }
    fn visible_reports(net: &Net, node: NodeId, k: &Key, v: &str) -> usize {
        let want = Seen::Visible { node, key: k.to_vec(), value: v.as_bytes().to_vec() };
        net.seen.iter().filter(|s| **s == want).count()
    }
    fn blocked(net: &Net, what: &str) -> Vec<(NodeId, u64)> {
        net.seen
            .iter()
            .filter_map(|s| match s {
                Seen::Blocked { node, what: w, waited_us } if *w == what => Some((*node, *waited_us)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn registered_by_name() {
        assert_eq!("gentlerain".parse::<ProtocolName>(), Ok(ProtocolName::GentleRain));
        assert_eq!("Gentle-Rain".parse::<ProtocolName>(), Ok(ProtocolName::GentleRain));
        assert_eq!(ProtocolName::GentleRain.as_str(), GentleRain::NAME);
        assert!(ProtocolName::ALL.contains(&ProtocolName::GentleRain));
    }

    #[test]
    fn validate_rejects_partial_replication_replica_groups_and_zero_intervals() {
        let mut spec = TopologySpec::full(3, 3);
        spec.replication = Replication::Partial { factor: 2 };
        let err = GentleRain::validate(&Config::default(), &Topology::new(spec).unwrap()).unwrap_err();
        assert!(err.contains("full replication"), "{err}");
        let mut spec = TopologySpec::full(2, 2);
        spec.replicas_per_partition = 3;
        assert!(GentleRain::validate(&Config::default(), &Topology::new(spec).unwrap()).is_err());
        let full = Topology::new(TopologySpec::full(3, 3)).unwrap();
        assert!(GentleRain::validate(&Config::default(), &full).is_ok());
        for cfg in [
            Config { heartbeat_interval_us: 0, ..Config::default() },
            Config { stabilization_interval_us: 0, ..Config::default() },
            Config { tree_fanout: 0, ..Config::default() },
        ] {
            assert!(GentleRain::validate(&cfg, &full).is_err(), "{cfg:?}");
        }
    }

    #[test]
    fn config_rejects_unknown_fields_and_defaults_the_rest() {
        use serde::de::value::{Error, MapDeserializer};
        let parse = |fields: Vec<(&'static str, u64)>| {
            Config::deserialize(MapDeserializer::<_, Error>::new(fields.into_iter()))
        };
        let cfg = parse(vec![("heartbeat_interval_us", 7)]).unwrap();
        assert_eq!(cfg.heartbeat_interval_us, 7);
        assert_eq!(cfg.stabilization_interval_us, 5_000);
        assert_eq!(cfg.rot_wait_threshold_us, u64::MAX);
        let err = parse(vec![("heartbeat_interval_us", 7), ("heartbeat_us", 1)]).unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }

    /// Causal++ (notes §3.2 Def 15): a local write is visible to a local GET
    /// at once, before it is replicated anywhere.
    #[test]
    fn local_writes_are_visible_at_once() {
        let mut net = net(2, 2);
        let k = key_on(&net, 0);
        let a0 = net.server_for(DC0, &k);
        put(&mut net, cl(0, 0), &k, "v");
        assert_eq!(visible_reports(&net, a0, &k, "v"), 1);
        assert!(net.queue.iter().any(|m| m.msg.kind() == "replicate"), "replication has not been delivered");
        assert_eq!(gst(&net, a0), 0, "nothing is stable yet");
        assert_eq!(get(&mut net, cl(0, 1), &k), Some("v".into()));
        assert_eq!(get(&mut net, cl(1, 0), &k), None);
    }

    /// A replicated version waits for GST (C2), and is reported visible
    /// exactly once, when GST first passes its `ut`.
    #[test]
    fn remote_write_is_invisible_until_gst_passes_it() {
        let mut net = net(2, 2);
        let k = key_on(&net, 1);
        let (k0, k1) = (net.server_for(DC0, &k), net.server_for(DC1, &k));
        put(&mut net, cl(0, 0), &k, "v");
        let ut = latest(&net, k0, &k).ut;
        net.deliver_while(|m| m.msg.kind() == "replicate");
        assert_eq!(latest(&net, k1, &k).ut, ut, "the version has arrived");
        assert!(gst(&net, k1) < ut);
        assert_eq!(visible_reports(&net, k1, &k, "v"), 0);
        assert_eq!(get(&mut net, cl(1, 0), &k), None);
        net.advance_clocks(10_000);
        stabilize(&mut net);
        assert!(gst(&net, k1) >= ut);
        assert_eq!(visible_reports(&net, k1, &k, "v"), 1);
        assert_eq!(get(&mut net, cl(1, 0), &k), Some("v".into()));
        net.advance_clocks(10_000);
        stabilize(&mut net);
        assert_eq!(visible_reports(&net, k1, &k, "v"), 1, "reported once");
    }

    /// The album (partition B) depends on the photo (partition A). While the
    /// photo's channel to DC1 is held, DC1's GST cannot pass the photo's `ut`
    /// (FIFO: A0's later heartbeats queue behind it), hence not the album's.
    #[test]
    fn photo_then_album_a_reader_that_sees_the_album_sees_the_photo() {
        let mut net = net(2, 2);
        let (photo, album) = (key_on(&net, 0), key_on(&net, 1));
        let (a0, a1, b1) = (net.server_for(DC0, &photo), net.server_for(DC1, &photo), net.server_for(DC1, &album));
        stabilize(&mut net);
        // Not in the µs A0 just announced by heartbeat (that tie is safe, see
        // deviation 2, but would make GST reach the photo's ut).
        net.advance_clocks(1_000);
        let alice = cl(0, 0);
        put(&mut net, alice, &photo, "photo");
        net.advance_clocks(1_000); // C1: the album's PUT needs a clock past the photo's ut
        put(&mut net, alice, &album, "album -> photo");
        let ut_photo = latest(&net, a0, &photo).ut;
        let hold = channel(a0, a1);
        let bob = cl(1, 0);
        for _ in 0..3 {
            net.advance_clocks(10_000);
            stabilize_holding(&mut net, &hold);
            assert!(net.stores[b1.idx()].latest(&album).is_some(), "the album has arrived");
            assert!(gst(&net, b1) < ut_photo);
            let saw_album = get(&mut net, bob, &album).is_some();
            let saw_photo = get(&mut net, bob, &photo).is_some();
            assert!(!saw_album || saw_photo, "album without photo");
            assert!(!saw_album, "GST cannot pass the album while the photo is missing");
        }
        net.deliver_while(&hold);
        stabilize(&mut net);
        assert_eq!(get(&mut net, bob, &album), Some("album -> photo".into()));
        assert_eq!(get(&mut net, bob, &photo), Some("photo".into()));
    }

    /// Deviation 2: A0 announces t by heartbeat, then writes the photo in the
    /// same µs (ut = t). DC1's GST reaches t while the photo is still in
    /// flight, so C2 holds only "up to ties" — but the album, which depends on
    /// the photo, has ut > t by C1 and stays invisible, and the photo is
    /// reported visible the moment it arrives.
    #[test]
    fn a_version_stamped_in_an_announced_microsecond_exposes_nothing() {
        let mut net = net(2, 2);
        let (photo, album) = (key_on(&net, 0), key_on(&net, 1));
        let (a0, a1, b1) = (net.server_for(DC0, &photo), net.server_for(DC1, &photo), net.server_for(DC1, &album));
        stabilize(&mut net);
        let t = net.clocks[a0.idx()];
        assert_eq!(gst(&net, b1), t, "DC1 is stable up to the µs A0 announced");
        let alice = cl(0, 0);
        put(&mut net, alice, &photo, "photo");
        assert_eq!(latest(&net, a0, &photo).ut, t);
        net.advance_clocks(1);
        put(&mut net, alice, &album, "album -> photo");
        let hold = channel(a0, a1);
        stabilize_holding(&mut net, &hold);
        assert!(net.stores[b1.idx()].latest(&album).is_some() && net.stores[a1.idx()].latest(&photo).is_none());
        let bob = cl(1, 0);
        assert_eq!(get(&mut net, bob, &album), None);
        assert_eq!(rot(&mut net, bob, &[&photo, &album]), vec![None, None]);
        net.deliver_while(&hold);
        assert_eq!(visible_reports(&net, a1, &photo, "photo"), 1, "visible on arrival: ut ≤ GST");
        assert_eq!(get(&mut net, bob, &photo), Some("photo".into()));
        net.advance_clocks(10_000);
        stabilize(&mut net);
        assert_eq!(get(&mut net, bob, &album), Some("album -> photo".into()));
    }

    /// C1: a PUT whose dependency time is ahead of the server's clock parks,
    /// rechecks on its timer, and proceeds only once the clock is past dt.
    #[test]
    fn put_waits_until_the_clock_passes_dt() {
        let mut net = net(2, 2);
        let (a, b) = (key_on(&net, 0), key_on(&net, 1));
        let (fast, slow) = (net.server_for(DC0, &a), net.server_for(DC0, &b));
        net.clocks[fast.idx()] = 50_000;
        net.clocks[slow.idx()] = 20_000;
        let c = cl(0, 0);
        put(&mut net, c, &a, "a");
        let dt = latest(&net, fast, &a).ut;
        net.invoke(c, Op::Put { key: b.clone(), value: bytes("b") });
        net.deliver_while(op_traffic);
        assert_eq!(net.take_result(c), None, "parked");
        assert!(net.stores[slow.idx()].latest(&b).is_none());
        // The timer fires early (or the clock drifted): wait again.
        net.fire_timers(slow);
        net.deliver_while(op_traffic);
        assert_eq!(net.take_result(c), None);
        net.clocks[slow.idx()] = dt; // equal is not enough
        net.fire_timers(slow);
        net.deliver_while(op_traffic);
        assert_eq!(net.take_result(c), None);
        assert!(blocked(&net, "put_clock_wait").is_empty());
        net.clocks[slow.idx()] = dt + 7;
        net.fire_timers(slow);
        net.deliver_while(op_traffic);
        assert_eq!(net.take_result(c), Some(OpResult::Put));
        assert_eq!(latest(&net, slow, &b).ut, dt + 7);
        assert_eq!(blocked(&net, "put_clock_wait"), vec![(slow, dt + 7 - 20_000)]);
    }

    /// Deviation 3: two writes to one key in one µs at one server would share
    /// ⟨ut, sr⟩; the second waits a µs instead of being lost.
    #[test]
    fn same_key_same_microsecond_writes_do_not_collide() {
        let mut net = net(1, 1);
        let k = key_on(&net, 0);
        let s = net.server_for(DC0, &k);
        put(&mut net, cl(0, 0), &k, "first");
        net.invoke(cl(0, 1), Op::Put { key: k.clone(), value: bytes("second") });
        net.deliver_while(op_traffic);
        assert_eq!(net.take_result(cl(0, 1)), None);
        net.clocks[s.idx()] += 1;
        net.fire_timers(s);
        net.deliver_while(op_traffic);
        assert_eq!(net.take_result(cl(0, 1)), Some(OpResult::Put));
        assert_eq!(net.stores[s.idx()].versions(&k).len(), 2);
        assert_eq!(get(&mut net, cl(0, 0), &k), Some("second".into()));
        assert_eq!(blocked(&net, "put_clock_wait"), vec![(s, 1)]);
    }

    /// GentleRain's known flaw (seed 000 §5.1.1, notes §5.6 and §10 claim 12),
    /// asserted to HAPPEN. Both DCs are stable up to ~51 ms; then DC0's clocks
    /// step back ~40 ms and a client writes a, then b after a. Both get `ut`
    /// below DC1's GST, so DC1 treats b as stable the moment it arrives,
    /// although a is still in flight: C2 is broken and a DC1 reader sees b
    /// without a, by GET and in a ROT snapshot.
    ///
    /// One server stepping back is not enough for a *causal* violation: a
    /// dependent write on any other server gets `ut` ≥ that server's clock ≥
    /// DC1's GST, so it waits for the stepped-back server's channel, which
    /// is FIFO behind a. The same scenario with HLCs is CausalSpartanX's
    /// `a_backward_clock_jump_does_not_break_causality`.
    #[test]
    fn a_clock_stepped_back_breaks_causality() {
        let mut net = net(2, 2);
        let (a, b) = (key_on(&net, 0), key_on(&net, 1));
        let (a0, b0, a1, b1) =
            (net.server_for(DC0, &a), net.server_for(DC0, &b), net.server_for(DC1, &a), net.server_for(DC1, &b));
        net.advance_clocks(50_000);
        stabilize(&mut net);
        let stable_before = gst(&net, b1);
        assert!(stable_before >= 50_000);
        // DC0's clocks step back ~40 ms.
        net.clocks[a0.idx()] = 11_000;
        net.clocks[b0.idx()] = 12_000;
        let c = cl(0, 0);
        put(&mut net, c, &a, "a");
        put(&mut net, c, &b, "b after a");
        let (ut_a, ut_b) = (latest(&net, a0, &a).ut, latest(&net, b0, &b).ut);
        assert!(ut_a < ut_b, "C1 still holds between the two writes");
        assert!(ut_b < stable_before, "but both are below the GST DC1 already computed");
        // b reaches DC1, a does not.
        let hold_a = channel(a0, a1);
        stabilize_holding(&mut net, &hold_a);
        assert!(net.stores[a1.idx()].latest(&a).is_none(), "a has not arrived at DC1");
        assert_eq!(visible_reports(&net, b1, &b, "b after a"), 1, "b is visible at DC1");
        let reader = cl(1, 0);
        // The causal violation: b is returned, the a it depends on is not.
        assert_eq!(get(&mut net, reader, &b), Some("b after a".into()));
        assert_eq!(get(&mut net, reader, &a), None);
        assert_eq!(rot(&mut net, reader, &[&a, &b]), vec![None, Some("b after a".into())]);
        // Once a arrives, DC1 converges.
        net.deliver_while(&hold_a);
        stabilize(&mut net);
        assert_eq!(rot(&mut net, reader, &[&a, &b]), vec![Some("a".into()), Some("b after a".into())]);
    }

    /// Seed 000 §3.3: Alice makes her album friends-only, then posts to it. A
    /// ROT over {acl, album} in a remote DC never returns ⟨public, new post⟩,
    /// whichever of the two replicates is late.
    #[test]
    fn acl_album_rot_never_returns_public_acl_with_new_album() {
        for acl_is_late in [true, false] {
            let mut net = net(2, 2);
            let (acl, album) = (key_on(&net, 0), key_on(&net, 1));
            let (alice, bob) = (cl(0, 0), cl(1, 0));
            put(&mut net, alice, &acl, "public");
            net.advance_clocks(1_000);
            put(&mut net, alice, &album, "old post");
            net.advance_clocks(10_000);
            stabilize(&mut net);
            assert_eq!(rot(&mut net, bob, &[&acl, &album]), vec![Some("public".into()), Some("old post".into())]);
            net.advance_clocks(1_000);
            put(&mut net, alice, &acl, "friends only");
            net.advance_clocks(1_000);
            put(&mut net, alice, &album, "new post");
            let late = if acl_is_late { acl.clone() } else { album.clone() };
            let held = channel(net.server_for(DC0, &late), net.server_for(DC1, &late));
            let forbidden = vec![Some("public".to_string()), Some("new post".to_string())];
            for _ in 0..3 {
                net.advance_clocks(10_000);
                stabilize_holding(&mut net, &held);
                let seen = rot(&mut net, bob, &[&acl, &album]);
                assert_ne!(seen, forbidden, "acl late: {acl_is_late}");
                assert_eq!(seen[1].as_deref(), Some("old post"), "GST stays below the late write");
                if acl_is_late {
                    assert_eq!(seen[0].as_deref(), Some("public"));
                }
            }
            net.deliver_while(&held);
            stabilize(&mut net);
            let seen = rot(&mut net, bob, &[&acl, &album]);
            assert_eq!(seen, vec![Some("friends only".into()), Some("new post".into())]);
        }
    }

    /// A ROT from a client whose dt is ahead of GST (it just wrote) waits at
    /// the coordinator until GST ≥ dt, then reads its own write.
    #[test]
    fn rot_waits_until_gst_reaches_dt_and_reads_your_writes() {
        let mut net = net(2, 2);
        let (a, b) = (key_on(&net, 0), key_on(&net, 1));
        let coordinator = net.server_for(DC1, &a);
        stabilize(&mut net);
        net.advance_clocks(10_000);
        let w = cl(1, 0);
        put(&mut net, w, &a, "mine");
        let dt = latest(&net, coordinator, &a).ut;
        assert!(gst(&net, coordinator) < dt);
        net.invoke(w, Op::Rot { keys: vec![a.clone(), b.clone()] });
        net.deliver_while(op_traffic);
        assert_eq!(net.take_result(w), None, "parked until GST ≥ dt");
        net.advance_clocks(2_000);
        stabilize(&mut net);
        net.deliver_while(op_traffic);
        assert_eq!(net.take_result(w), Some(OpResult::Rot(vec![Some(bytes("mine")), None])));
        let waits = blocked(&net, "rot_gst_wait");
        assert_eq!(waits.len(), 1);
        assert_eq!(waits[0], (coordinator, 2_000));
    }

    /// The paper's Eiger fallback is not implemented: past the threshold the
    /// ROT fails instead of waiting.
    #[test]
    fn rot_past_the_wait_threshold_fails_instead_of_falling_back_to_eiger() {
        let cfg = Config { rot_wait_threshold_us: 1_000, ..Config::default() };
        let mut net = net_with(2, 2, cfg);
        let a = key_on(&net, 0);
        net.advance_clocks(10_000);
        put(&mut net, cl(0, 0), &a, "v");
        match run(&mut net, cl(0, 0), Op::Rot { keys: vec![a.clone()] }) {
            OpResult::Failed(OpError::Aborted(reason)) => assert!(reason.contains("Eiger"), "{reason}"),
            other => panic!("expected an abort, got {other:?}"),
        }
    }

    /// Deviation 1. DC1's tree root has learnt a GST past r (which depends on
    /// q) but its pushes to q's and x's partitions are late. w reads r at the
    /// root and writes x; c reads x (a local version, visible at once) and
    /// then q. The PUT carried w's GST to x's server, whose reply carries it
    /// to c, whose GET raises q's server: c sees q. Without the merge, q's
    /// server would still be below q.ut and c would see x → r without q.
    #[test]
    fn a_local_write_carries_its_writers_stable_time() {
        let mut net = net(2, 3);
        let (r, q, x) = (key_on(&net, 0), key_on(&net, 1), key_on(&net, 2));
        let (r1, q1, x1) = (net.server_for(DC1, &r), net.server_for(DC1, &q), net.server_for(DC1, &x));
        assert!(srv(&net, r1).tree.is_root());
        let a = cl(0, 0);
        put(&mut net, a, &q, "q");
        net.advance_clocks(1_000);
        put(&mut net, a, &r, "r after q");
        let (ut_q, ut_r) = (latest(&net, net.server_for(DC0, &q), &q).ut, latest(&net, net.server_for(DC0, &r), &r).ut);
        net.advance_clocks(10_000);
        let late_pushes = move |m: &InFlight<Msg>| {
            matches!(m.msg, Msg::StablePush { .. }) && (m.to == Dest::Node(q1) || m.to == Dest::Node(x1))
        };
        stabilize_holding(&mut net, &late_pushes);
        assert!(gst(&net, r1) >= ut_r);
        assert!(gst(&net, q1) < ut_q && gst(&net, x1) < ut_q);
        let (w, c) = (cl(1, 0), cl(1, 1));
        assert_eq!(get(&mut net, w, &r), Some("r after q".into()));
        put(&mut net, w, &x, "x after r");
        assert_eq!(get(&mut net, c, &x), Some("x after r".into()));
        assert_eq!(get(&mut net, c, &q), Some("q".into()), "c saw x → r → q, so it must see q");
    }

    /// Concurrent writes to one key in both DCs: every replica ends on the
    /// version with the larger ⟨ut, sr⟩ (last-writer-wins).
    #[test]
    fn concurrent_writes_to_one_key_in_two_dcs_converge() {
        for dc0_ahead_us in [0, 500] {
            let mut net = net(2, 2);
            let k = key_on(&net, 1);
            let (k0, k1) = (net.server_for(DC0, &k), net.server_for(DC1, &k));
            net.clocks[k0.idx()] += dc0_ahead_us;
            put(&mut net, cl(0, 0), &k, "from dc0");
            put(&mut net, cl(1, 0), &k, "from dc1");
            net.advance_clocks(10_000);
            stabilize(&mut net);
            let winner = if dc0_ahead_us > 0 { "from dc0" } else { "from dc1" }; // a tie goes to the higher DC
            for c in [cl(0, 1), cl(1, 1)] {
                assert_eq!(get(&mut net, c, &k), Some(winner.into()), "dc0 ahead by {dc0_ahead_us} µs");
            }
            assert_eq!(latest(&net, k0, &k).order(), latest(&net, k1, &k).order());
        }
    }

    /// Idle partitions keep GST moving with heartbeats; a partition that just
    /// replicated skips one.
    #[test]
    fn heartbeats_advance_gst_and_are_skipped_after_a_replicate() {
        let mut net = net(3, 2);
        net.advance_clocks(50_000);
        stabilize(&mut net);
        for n in net.topology.node_ids() {
            assert_eq!(gst(&net, n), 51_000, "{n}");
        }
        let k = key_on(&net, 0);
        let s = net.server_for(DC0, &k);
        put(&mut net, cl(0, 0), &k, "v");
        let heartbeats_from_s =
            |net: &Net| net.queue.iter().filter(|m| m.from == Dest::Node(s) && m.msg.kind() == "heartbeat").count();
        net.fire_timers(s);
        assert_eq!(heartbeats_from_s(&net), 0);
        net.fire_timers(s);
        assert_eq!(heartbeats_from_s(&net), 2, "one per other DC");
    }

    /// GC keeps the newest version below a GST at least `gc_grace_us` old; a
    /// ROT whose snapshot is older than that fails rather than read a state
    /// that no longer exists.
    #[test]
    fn gc_prunes_old_versions_and_a_snapshot_that_needed_them_aborts() {
        let cfg = Config { gc_grace_us: 20_000, ..Config::default() };
        let mut net = net_with(2, 2, cfg);
        let (k, m) = (key_on(&net, 0), key_on(&net, 1));
        let (k0, k1, m1) = (net.server_for(DC0, &k), net.server_for(DC1, &k), net.server_for(DC1, &m));
        assert!(srv(&net, k1).tree.is_root() && !srv(&net, m1).tree.is_root());
        // m's server in DC1 never hears the GST: a coordinator that lags.
        let late = move |msg: &InFlight<Msg>| matches!(msg.msg, Msg::StablePush { .. }) && msg.to == Dest::Node(m1);
        for i in 0..5 {
            put(&mut net, cl(0, 0), &k, &format!("v{i}"));
            net.advance_clocks(10_000);
            stabilize_holding(&mut net, &late);
        }
        for _ in 0..4 {
            net.advance_clocks(10_000);
            stabilize_holding(&mut net, &late);
        }
        for s in [k0, k1] {
            assert_eq!(net.stores[s.idx()].versions(&k).len(), 1, "{s}");
            assert!(net.stores[s.idx()].was_pruned(&k));
        }
        assert_eq!(get(&mut net, cl(1, 0), &k), Some("v4".into()));
        assert_eq!(gst(&net, m1), 0);
        match run(&mut net, cl(1, 1), Op::Rot { keys: vec![m.clone(), k.clone()] }) {
            OpResult::Failed(OpError::Aborted(reason)) => assert_eq!(reason, "snapshot pruned"),
            other => panic!("expected an abort, got {other:?}"),
        }
        // A current snapshot still reads.
        assert_eq!(rot(&mut net, cl(1, 0), &[&k, &m]), vec![Some("v4".into()), None]);
    }

    #[test]
    fn malformed_input_is_ignored_without_panicking() {
        let mut net = net(2, 2);
        let (a, b) = (key_on(&net, 0), key_on(&net, 1));
        let (a0, a1, b1) = (net.server_for(DC0, &a), net.server_for(DC1, &a), net.server_for(DC1, &b));
        let version = |sr: u16| Version { value: bytes("forged"), ut: 5, sr: DcId(sr) };
        let forged = [
            // A report of the wrong length, from a real child.
            (Dest::Node(b1), a1, Msg::StableReport { vv: vec![1, 2, 3] }),
            // A push from a node that is not the parent.
            (Dest::Node(a0), b1, Msg::StablePush { gst: u64::MAX }),
            // Replication from a node that is not an equivalent, or for another origin.
            (Dest::Node(b1), a1, Msg::Replicate { key: a.clone(), version: version(0) }),
            (Dest::Node(a0), a1, Msg::Replicate { key: a.clone(), version: version(1) }),
            (Dest::Node(b1), a1, Msg::Heartbeat { clock: u64::MAX }),
            // Slices: a stray reply, a request from another DC.
            (Dest::Node(b1), a1, Msg::SliceReply { rot: 77, reads: vec![SliceRead::Absent] }),
            (Dest::Node(a0), b1, Msg::SliceReq { rot: 1, keys: vec![b.clone()], snapshot: u64::MAX }),
            // Peer messages from a client, a reply to a server, a misrouted PUT.
            (Dest::Client(cl(1, 0)), a1, Msg::StablePush { gst: u64::MAX }),
            (Dest::Client(cl(1, 0)), a1, Msg::GetReply { value: None, ut: 0, gst: 0 }),
            (Dest::Client(cl(1, 0)), a1, Msg::PutReq { key: b.clone(), value: bytes("x"), dt: 0, gst: 0 }),
            // A sender outside the topology.
            (Dest::Node(NodeId(9_999)), a1, Msg::Heartbeat { clock: 3 }),
        ];
        for (from, to, msg) in forged {
            net.queue.push(InFlight { from, to: Dest::Node(to), msg });
        }
        net.timers.push((Dest::Node(a1), 123_456));
        net.deliver_all();
        net.fire_timers(a1);
        assert_eq!(gst(&net, b1), 0);
        assert_eq!(srv(&net, a1).vv, vec![0, 1_000]);
        assert!(net.stores[a1.idx()].latest(&a).is_none());
        assert!(net.stores[a1.idx()].latest(&b).is_none());
        assert!(net.queue.iter().all(|m| !matches!(m.to, Dest::Client(_))), "no replies to forged requests");
        // The cluster still works.
        put(&mut net, cl(1, 0), &a, "ok");
        assert_eq!(get(&mut net, cl(1, 1), &a), Some("ok".into()));
    }

    #[test]
    fn one_dc_with_service_nodes_works_and_the_service_nodes_stay_inert() {
        let mut spec = TopologySpec::full(1, 3);
        spec.services = vec![ServiceSpec { name: "unused".into(), per_dc: 1 }];
        let mut net = net_spec(spec, Config::default());
        let service = net.topology.service_nodes(DC0, 0)[0];
        assert!(net.servers[service.idx()].part.is_none());
        let (a, b) = (key_on(&net, 0), key_on(&net, 2));
        put(&mut net, cl(0, 0), &a, "a");
        net.advance_clocks(1_000);
        put(&mut net, cl(0, 0), &b, "b");
        net.advance_clocks(10_000);
        stabilize(&mut net);
        assert_eq!(rot(&mut net, cl(0, 1), &[&a, &b]), vec![Some("a".into()), Some("b".into())]);
        assert!(net.queue.iter().all(|m| m.to != Dest::Node(service) && m.from != Dest::Node(service)));
    }
}
