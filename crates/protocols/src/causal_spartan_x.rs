//! # CausalSpartanX: causal++ consistency on hybrid logical clocks
//!
//! Seed 000 Ch. 5 (Roohitavaf; the basic operations are CausalSpartan, SRDS
//! 2017). Like GentleRain, every partition server replicates its writes to its
//! equivalents in the other DCs, and a remote version becomes readable once a
//! DC-wide stable time says everything it depends on has arrived. CausalSpartanX
//! improves on GentleRain in three ways, and this module keeps all three:
//!
//! 1. **Hybrid logical clocks.** A PUT takes `ut = updateHLC(dt)` where `dt` is
//!    the client's dependency time, so it never waits for the physical clock to
//!    pass `dt` (GentleRain does), and causality survives clocks that are skewed
//!    or step backwards.
//! 2. **Data center Stable Vectors.** `DSV[j] = t` at DC i means DC i has received
//!    every write DC j made up to `t`. One entry per DC instead of GentleRain's
//!    scalar GST, so a slow or distant DC only delays versions that depend on it.
//!    Each DC computes it over [`StableTree`] every θ: entry-wise min of the
//!    partitions' version vectors `VV`, pushed down from the root.
//! 3. **ROTX.** A read-only transaction takes one client round and never blocks.
//!    A coordinator fixes a snapshot vector `sv` and sends it to the partitions
//!    of the keys (Alg 5.4). Each partition returns the newest version whose
//!    dependencies, *including its own ⟨sr, ut⟩*, are ≤ `sv`.
//!
//! The code follows Alg 5.1 (client), 5.2 (GET/PUT/replicate), 5.3 (DSV and
//! heartbeats) and 5.4 (ROTX). Line numbers in comments are the thesis's, as
//! used by its proofs (notes `000_roohitavaf.md` §5.3–5.4). Paper names are
//! kept: `VV`, `DSV`, `DS`, `ut`, `sr`, `ds`, `sv`, `maxDS` ([`DepSet::merge`]),
//! `updateHLC` ([`Hlc::update`], [`Hlc::tick`]).
//!
//! ## Deviations from the printed pseudo-code, and why
//!
//! - **§5.5 "inferred concern": the client's DS is not merged into the DSV.**
//!   Line 7 (PUT) and line 10 (ROTX) print `DSV = maxDS(DSV, ds)`. A DS entry for
//!   a remote DC j is the `ut` of some version the client *read*, and that
//!   version can reach its own partition before other partitions of this DC
//!   have received older writes from j. Merging the entry makes `DSV[j]` exceed
//!   what the DC has received (`DSV_real`, Obs 10/11), and a ROTX can then
//!   return `⟨w, old x⟩` with `w` depending on `x` (the notes' scenario, and the
//!   test `paper_dsv_merge_returns_a_non_causal_snapshot_and_the_default_does_not`).
//!   Our rule:
//!   1. Remote entries never come from a DS. Only genuine DSVs are merged: the
//!      server's own, its tree's, and the client's `DSVc`, which came from this
//!      DC's servers (clients are sticky).
//!   2. The local entry `m` is merged (`DSV[m] = max(DSV[m], DS[m])`, `sv[m]`
//!      likewise). Local versions exist at their partition from the moment they
//!      are written, and line 21 plus line 8 give any later local PUT at a sliced
//!      partition `ut > sv[m]`, so this cannot admit a missing version. It is what
//!      lets a ROTX see the client's own writes.
//!   3. Dropping the DS from `sv` costs monotonic reads and read-your-writes in
//!      ROTX whenever the client has seen a version whose dependencies are not
//!      yet covered by its `DSVc`. The client keeps a **cache** of such versions
//!      instead, and merges it into ROTX results: remote versions read by GET
//!      whose own ⟨sr, ut⟩ is uncovered, and also the client's own writes whose
//!      remote dependencies are uncovered. The local entry of rule 2 alone does
//!      not give read-your-writes when the write depends on such a read. One
//!      case cannot be cached soundly: a GET of *another* client's local write
//!      with uncovered remote dependencies. It "taints" the client until the
//!      DSV catches up; a ROTX in that window waits for it (rule 6). The argument that
//!      cache ∪ slices is a causal snapshot, and the taint rule, are at
//!      [`CsxClient`].
//!   4. `paper_dsv_merge = true` restores the printed lines 7 and 10 for every
//!      entry and disables the cache, so tests can show the anomaly.
//!   5. **A PUT carries the client's `DSVc`**, and the server merges it (what
//!      the printed line 7 achieved through the DS, done with a genuine
//!      vector; "deviation 12" in the code). Found by `causeway torture`: a
//!      client read x through a ROTX slice admitted by the coordinator's
//!      higher DSV, then wrote y at a partition whose DSV lagged; a second
//!      client read y (local, so visible at once) and then x's key at a
//!      lagging partition, and got a version older than x. With the writer's
//!      DSVc merged where y is written, the reader of y inherits it.
//!   6. **A tainted client's ROTX waits** (deviation 13, also found by
//!      `causeway torture`). The taint window of rule 3 let a ROTX return a
//!      version older than one in the client's causal past, which violates
//!      causal consistency for ROTX. The request now carries the taint; the
//!      coordinator parks it until its DSV covers the taint (about one
//!      stabilization round), reports `Blocked { what: "rot_taint_wait" }`,
//!      and then reads a snapshot that includes everything the tainted read
//!      depends on. A ROTX of an untainted client — the common case — still
//!      never waits and takes one round.
//! - **Replies carry ⟨ut, sr⟩ per value.** The GET reply, the slice reply and the
//!   ROTX reply carry each value's ⟨ut, sr⟩ so the client can compare them with
//!   its cache. The printed replies carry only values.
//! - **The ROTX reply carries `sv`**, not the coordinator's DSV at reply time.
//!   Both are genuine; `sv` is the vector the snapshot was read at. The
//!   coordinator starts `ds` empty instead of from the client's DS, because the
//!   client merges the reply into its DS anyway.
//! - **The coordinator reads its own slice in place** instead of messaging
//!   itself.
//! - **`VV[k] = max(VV[k], ut)`** on Replicate and Heartbeat, not plain
//!   assignment. Under FIFO channels and strictly increasing `ut` per server the
//!   two are equal. `max` also stays sound if a message is replayed.
//! - **Heartbeats.** The thesis sends a heartbeat if no Replicate went out "in
//!   the past Δ". We send one on each Δ tick that had no Replicate since the
//!   previous tick. Peers' `VV[m]` may then lag up to 2Δ instead of Δ, but a
//!   clock that steps back cannot silence heartbeats.
//! - **DSV tree.** The root pushes the aggregate of the VVs, not its own DSV
//!   (which client vectors may have raised). Nodes forward a push as soon as it
//!   arrives rather than at their next tick.
//! - **Garbage collection** is not in the thesis. Every θ, on keys written
//!   recently (the dirty list; at most [`GC_KEYS_PER_TICK`] keys a tick), drop
//!   every version older than the newest one whose `maxDS(ds, {⟨sr, ut⟩})` is
//!   covered by a DSV this server held at least `gc_grace_us` ago. That version
//!   is GET-visible, and slice-visible for any `sv` ≥ that DSV, so GETs never
//!   change and current snapshots never lose a version. A slice that finds no eligible version of a key that GC has
//!   pruned fails the ROTX with `Aborted("snapshot pruned")`. It never returns
//!   data older than the snapshot.
//! - **Observations.** A remote version is reported [`Observation::Visible`]
//!   once, when the GET rule (line 3) first admits it *and* it is the version a
//!   GET would return. Last-writer-wins losers are never reported, as in
//!   [`crate::eventual`]. Nothing is ever reported `Blocked`: no handler waits.
//! - **Topology.** The thesis assumes full replication and one server per
//!   partition per DC. [`Protocol::validate`] rejects anything else, because a
//!   DSV entry for a DC that does not store a partition would never advance.
//!   Service nodes are allowed and stay inert.
//! - **Bad input.** A request with a vector of the wrong length, a malformed
//!   dependency set, an HLC counter beyond [`HLC_COUNTER_LIMIT`] (which could
//!   overflow `updateHLC`), or a key of another partition is refused with
//!   `BadRequest`. Malformed peer messages are dropped.

use crate::common::{client_server_for, fail_unsupported, payload};
use crate::stable_tree::{StableTree, TreeStep};
use causeway_core::{
    Client, ClientCtx, ClientEnv, ClientId, DcId, DepSet, Hlc, Inserted, Key, Message, NodeCtx, NodeId, NodeRole,
    Observation, Op, OpError, OpKind, OpResult, PartitionId, Protocol, Server, ServerEnv, Topology, Value, Versioned,
    vmax,
};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::sync::Arc;

pub struct CausalSpartanX;

/// Protocol parameters. The thesis gives no values for θ and Δ (notes §11);
/// the defaults are a few milliseconds, well under a WAN round trip.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Δ: a server that sent no Replicate since its last heartbeat tick sends
    /// `⟨Heartbeat VV[m]⟩` to its equivalents (Alg 5.3).
    pub heartbeat_interval_us: u64,
    /// θ: the period of the DSV tree step (Alg 5.3) and of GC.
    pub stabilization_interval_us: u64,
    /// Children per node of the DC's aggregation tree.
    pub tree_fanout: usize,
    /// GC keeps every version a DSV younger than this could still need.
    pub gc_grace_us: u64,
    /// Restore the printed lines 7 and 10, which merge the client's DS into the
    /// DSV for every entry, and disable the client cache. This mode exhibits
    /// the §5.5 anomaly; it exists for tests and comparison only.
    pub paper_dsv_merge: bool,
    /// A deliberately broken variant, for proving the checker and torture can
    /// fail: GET skips line 3's visibility check and returns the latest
    /// version that has arrived, stable or not. Never set it in production.
    pub mutant_skip_visibility_check: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            heartbeat_interval_us: 10_000,
            stabilization_interval_us: 5_000,
            tree_fanout: 4,
            gc_grace_us: 1_000_000,
            paper_dsv_merge: false,
            mutant_skip_visibility_check: false,
        }
    }
}

impl Protocol for CausalSpartanX {
    const NAME: &'static str = "causalspartanx";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put, OpKind::Rot];
    const CAUSAL: bool = true;
    /// HLCs: skew, drift and jumps either way are harmless to safety.
    const TOLERATES: causeway_core::Faults = causeway_core::Faults::ALL;
    /// The thesis: a ROTX never blocks and local writes are visible to local
    /// reads at once, so local operations complete during partitions.
    const AVAILABLE_UNDER_PARTITIONS: bool = true;
    type Msg = Msg;
    type Version = Version;
    type Config = Config;
    type Server = CsxServer;
    type Client = CsxClient;
    /// Nothing should wait for remote DCs; allow a few DSV rounds anyway
    /// (a heartbeat and tree rounds) plus the skew an HLC may absorb.
    fn liveness_bound_us(cfg: &Config, env: &causeway_core::LivenessEnv) -> u64 {
        20_000
            + env.max_rtt_us
            + 2 * env.max_clock_skew_us
            + 2 * cfg.heartbeat_interval_us
            + 8 * cfg.stabilization_interval_us
            + 8 * env.intra_dc_rtt_us
    }

    fn validate(cfg: &Config, topology: &Topology) -> Result<(), String> {
        if cfg.heartbeat_interval_us == 0 {
            return Err("protocol.heartbeat_interval_us must be positive".into());
        }
        if cfg.stabilization_interval_us == 0 {
            return Err("protocol.stabilization_interval_us must be positive".into());
        }
        if cfg.tree_fanout == 0 {
            return Err("protocol.tree_fanout must be at least 1".into());
        }
        if !topology.is_full_replication() {
            return Err("causalspartanx needs full replication: a DSV entry for a DC that does not store a \
                        partition would never advance"
                .into());
        }
        if topology.spec().replicas_per_partition != 1 {
            return Err("causalspartanx runs one server per partition per DC (replicas_per_partition = 1)".into());
        }
        Ok(())
    }
    fn server(cfg: &Config, ctx: NodeCtx) -> CsxServer {
        CsxServer::new(cfg, ctx)
    }
    fn client(cfg: &Config, ctx: ClientCtx) -> CsxClient {
        CsxClient::new(cfg, ctx)
    }
}

// ---------------------------------------------------------------- messages

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// Alg 5.1 GET → line 1.
    GetReq { key: Key, dsv: Vec<Hlc> },
    /// Line 5: ⟨v, ds, DSV⟩, plus the value's ⟨ut, sr⟩.
    GetReply(Result<GetOk, OpError>),
    /// Alg 5.1 PUT → line 6.
    /// Plus the client's DSVc (deviation 12): the stability the client has
    /// seen travels with its write, as line 7 intended, without merging DS.
    PutReq { key: Key, value: Value, ds: DepSet<Hlc>, dsv: Vec<Hlc> },
    /// ⟨PutReply ut, sr⟩.
    PutReply(Result<Stamp, OpError>),
    /// Alg 5.4 line 9: ⟨ROTX kset, DSVc, DSc⟩.
    /// Plus `wait`: the client's taint (deviation 13); zeros when untainted.
    RotReq { keys: Vec<Key>, dsv: Vec<Hlc>, ds: DepSet<Hlc>, wait: Vec<Hlc> },
    /// ⟨ROTXReply vset, dsv, ds⟩, values in request order.
    RotReply(Result<RotOk, OpError>),
    /// Line 20: ⟨SliceReq keys, sv⟩ for the keys of one partition.
    SliceReq { rot: u64, keys: Vec<Key>, sv: Vec<Hlc> },
    /// Line 23, one item per requested key.
    SliceReply { rot: u64, slice: Result<SliceOk, OpError> },
    /// Line 19.
    Replicate { key: Key, version: Version },
    /// Alg 5.3: `⟨Heartbeat VV[m]⟩`.
    Heartbeat { hlc: Hlc },
    /// Entry-wise min of the VVs of a subtree, sent to the parent.
    StableReport { vv_min: Vec<Hlc> },
    /// The DC's stable vector, pushed down from the root.
    StablePush { dsv: Vec<Hlc> },
}

impl Message for Msg {
    fn kind(&self) -> &'static str {
        match self {
            Msg::GetReq { .. } => "get_req",
            Msg::GetReply(_) => "get_reply",
            Msg::PutReq { .. } => "put_req",
            Msg::PutReply(_) => "put_reply",
            Msg::RotReq { .. } => "rot_req",
            Msg::RotReply(_) => "rot_reply",
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
                | Msg::GetReply(_)
                | Msg::PutReq { .. }
                | Msg::PutReply(_)
                | Msg::RotReq { .. }
                | Msg::RotReply(_)
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
        let items = |items: &[Option<ReadItem>]| payload(items.iter().flatten().map(|i| &i.value[..]));
        match self {
            Msg::GetReq { key, .. } => key.len(),
            Msg::GetReply(Ok(GetOk { item, .. })) => item.as_ref().map_or(0, |i| i.value.len()),
            Msg::PutReq { key, value, .. } | Msg::Replicate { key, version: Version { value, .. } } => {
                key.len() + value.len()
            }
            Msg::RotReq { keys, .. } | Msg::SliceReq { keys, .. } => payload(keys.iter().map(|k| &k[..])),
            Msg::RotReply(Ok(r)) => items(&r.items),
            Msg::SliceReply { slice: Ok(s), .. } => items(&s.items),
            Msg::GetReply(Err(_))
            | Msg::PutReply(_)
            | Msg::RotReply(Err(_))
            | Msg::SliceReply { slice: Err(_), .. }
            | Msg::Heartbeat { .. }
            | Msg::StableReport { .. }
            | Msg::StablePush { .. } => 0,
        }
    }
}

/// A value as a reader receives it, with its last-writer-wins position ⟨ut, sr⟩.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadItem {
    pub value: Value,
    pub ut: Hlc,
    pub sr: DcId,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetOk {
    /// `None` when no version of the key is visible.
    pub item: Option<ReadItem>,
    /// `maxDS(d.ds, {⟨d.sr, d.ut⟩})` (line 4); empty with no item.
    pub ds: DepSet<Hlc>,
    pub dsv: Vec<Hlc>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub ut: Hlc,
    pub sr: DcId,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RotOk {
    pub items: Vec<Option<ReadItem>>,
    /// The snapshot vector `sv`.
    pub dsv: Vec<Hlc>,
    /// maxDS of the returned versions' `maxDS(d.ds, {⟨d.sr, d.ut⟩})`.
    pub ds: DepSet<Hlc>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceOk {
    pub items: Vec<Option<ReadItem>>,
    pub ds: DepSet<Hlc>,
}

/// A stored version (§5.2): value, update time `ut` (HLC), source DC `sr`,
/// and dependency set `ds`, the writer's DS (at most one entry per DC).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    pub ut: Hlc,
    pub sr: DcId,
    pub ds: DepSet<Hlc>,
}

impl Versioned for Version {
    /// Lexicographic ⟨ut, sr⟩: ties on `ut` go to the higher DC id (Obs 8).
    type Order = (Hlc, DcId);
    fn order(&self) -> (Hlc, DcId) {
        (self.ut, self.sr)
    }
    fn value(&self) -> &Value {
        &self.value
    }
}

impl Version {
    /// `maxDS(d.ds, {⟨d.sr, d.ut⟩})`: the version and everything it depends on.
    fn full_ds(&self) -> DepSet<Hlc> {
        let mut ds = self.ds.clone();
        ds.raise(self.sr, self.ut);
        ds
    }
    fn read_item(&self) -> ReadItem {
        ReadItem { value: self.value.clone(), ut: self.ut, sr: self.sr }
    }
}

/// GET visibility (Alg 5.2 line 3): local, or every dependency stable.
fn get_visible(d: &Version, m: DcId, dsv: &[Hlc]) -> bool {
    d.sr == m || d.ds.covered_by(dsv)
}

/// Slice visibility (Alg 5.4 line 22): the version itself and every dependency
/// are within the snapshot, `maxDS(d.ds, {⟨d.sr, d.ut⟩}) ≤ sv`.
fn slice_visible(d: &Version, sv: &[Hlc]) -> bool {
    sv.get(d.sr.idx()).is_some_and(|&t| d.ut <= t) && d.ds.covered_by(sv)
}

/// Every entry of `ds` except DC `m`'s is ≤ `dsv`: whatever `ds` names from
/// remote DCs has reached every partition of this DC.
fn covered_remote(ds: &DepSet<Hlc>, dsv: &[Hlc], m: DcId) -> bool {
    ds.entries().iter().all(|&(dc, t)| dc == m || dsv.get(dc.idx()).is_some_and(|&v| t <= v))
}

/// HLC counters at or above this, from outside, are refused: `updateHLC` adds 1
/// to the counter and would overflow near `u32::MAX`.
pub const HLC_COUNTER_LIMIT: u32 = u32::MAX / 2;

fn sane(t: Hlc) -> bool {
    t.c < HLC_COUNTER_LIMIT
}

/// A dependency set as [`DepSet`] assumes it: sorted by DC, one entry each, DCs
/// in range. Deserialisation does not guarantee any of that.
fn valid_ds(ds: &DepSet<Hlc>, dcs: usize) -> bool {
    let e = ds.entries();
    e.iter().all(|&(dc, t)| dc.idx() < dcs && sane(t)) && e.windows(2).all(|w| w[0].0 < w[1].0)
}

fn valid_vector(v: &[Hlc], dcs: usize) -> bool {
    v.len() == dcs && v.iter().all(|&t| sane(t))
}

fn malformed(what: &str) -> OpError {
    OpError::Aborted(format!("malformed {what}"))
}

// ---------------------------------------------------------------- server state

/// Timer tokens.
const TIMER_HEARTBEAT: u64 = 1;
const TIMER_STABILIZE: u64 = 2;

/// Keys GC examines per θ tick at most.
pub const GC_KEYS_PER_TICK: usize = 64;

/// Partition server p^m_n (§5.2).
pub struct CsxServer {
    cfg: Config,
    topology: Arc<Topology>,
    /// m, this server's DC.
    m: DcId,
    /// n, this server's partition.
    partition: PartitionId,
    /// The equivalents p^k_n, k ≠ m, in DC order.
    peers: Vec<NodeId>,
    /// VV: `VV[k]`, k ≠ m, is the latest timestamp received from p^k_n;
    /// `VV[m]` is the local HLC, the highest `ut` assigned here.
    vv: Vec<Hlc>,
    /// DSV: `DSV[j] = t` means this DC has received every write DC j made up to `t`.
    dsv: Vec<Hlc>,
    /// This server's place in the DC's aggregation tree. `None` on service
    /// nodes, which take no part in the protocol.
    tree: Option<StableTree<Hlc>>,
    /// Whether a Replicate went out since the last heartbeat tick.
    replicated_since_heartbeat: bool,
    /// Remote versions stored but not yet admitted by line 3, indexed by
    /// the DSV entry that holds each back: `pending_visible[i]` is a min-heap
    /// on the `ds[i]` that must be reached. Growing `DSV[i]` pops only what it
    /// unblocks, so admitting versions costs O(log n) each, not a scan per
    /// DSV change.
    pending_visible: Vec<BinaryHeap<Reverse<(Hlc, u64)>>>,
    pending_slab: BTreeMap<u64, PendingVisible>,
    next_pending: u64,
    /// ROTXs this server coordinates, by id.
    rots: BTreeMap<u64, RotInProgress>,
    next_rot: u64,
    /// ROTXs of tainted clients, waiting for the DSV (deviation 13).
    parked_rots: Vec<ParkedRot>,
    gc: Gc,
}

struct PendingVisible {
    key: Key,
    order: (Hlc, DcId),
    value: Value,
    ds: DepSet<Hlc>,
}

/// A tainted client's ROTX waiting for the DSV to cover its taint.
struct ParkedRot {
    from: ClientId,
    keys: Vec<Key>,
    wait: Vec<Hlc>,
    since_us: u64,
}

/// A ROTX waiting for slices.
struct RotInProgress {
    client: ClientId,
    /// Line 12: the snapshot vector.
    sv: Vec<Hlc>,
    /// Results so far, in request order.
    items: Vec<Option<ReadItem>>,
    ds: DepSet<Hlc>,
    /// Slices not yet answered: the server and the request positions it reads.
    waiting: Vec<(NodeId, Vec<usize>)>,
}

impl RotInProgress {
    fn absorb(&mut self, positions: &[usize], slice: SliceOk, dcs: usize) -> Result<(), OpError> {
        if slice.items.len() != positions.len() || !valid_ds(&slice.ds, dcs) {
            return Err(malformed("slice reply"));
        }
        for (&i, item) in positions.iter().zip(slice.items) {
            self.items[i] = item;
        }
        self.ds.merge(&slice.ds);
        Ok(())
    }
}

struct Gc {
    /// `(local µs, DSV then)`, oldest first, one entry per θ tick in which the
    /// DSV changed. Once any entry is `gc_grace_us` old, the front is the newest
    /// such entry: the GC horizon.
    history: VecDeque<(u64, Vec<Hlc>)>,
    /// The largest `now_us` seen, so the history stays sorted when the clock
    /// steps back. A step back pauses GC; it cannot make it early.
    clock_us: u64,
    /// Keys that had more than one version when last written, oldest first.
    dirty: VecDeque<Key>,
    dirty_set: BTreeSet<Key>,
}

impl CsxServer {
    fn new(cfg: &Config, ctx: NodeCtx) -> Self {
        let m = ctx.role.dc();
        let dcs = ctx.topology.dcs();
        let (partition, tree, peers) = match ctx.role {
            NodeRole::Partition { partition, replica: 0, .. } => {
                let tree = StableTree::new(&ctx.topology, ctx.id, cfg.tree_fanout);
                let peers = ctx.topology.equivalents(partition).filter(|&(d, _)| d != m).map(|(_, n)| n).collect();
                (partition, Some(tree), peers)
            }
            _ => (PartitionId(0), None, Vec::new()),
        };
        CsxServer {
            cfg: cfg.clone(),
            topology: ctx.topology,
            m,
            partition,
            peers,
            vv: vec![Hlc::ZERO; dcs],
            dsv: vec![Hlc::ZERO; dcs],
            tree,
            replicated_since_heartbeat: false,
            pending_visible: (0..dcs).map(|_| BinaryHeap::new()).collect(),
            pending_slab: BTreeMap::new(),
            next_pending: 0,
            rots: BTreeMap::new(),
            next_rot: 0,
            parked_rots: Vec::new(),
            gc: Gc { history: VecDeque::new(), clock_us: 0, dirty: VecDeque::new(), dirty_set: BTreeSet::new() },
        }
    }
}

// ---------------------------------------------------------------- client

/// A client session (Alg 5.1), sticky to its DC.
///
/// ## The cache, and why ROTX results stay causal snapshots
///
/// Because the DS no longer raises `sv` (module doc), a slice can miss a
/// version this client has already seen: a remote version read by GET whose
/// own ⟨sr, ut⟩ is not yet ≤ `DSVc`, or the client's own write that depends on
/// one. The cache keeps those versions (key → value, ut, sr, and
/// `ds = maxDS(d.ds, {⟨sr, ut⟩})`). An entry leaves once every remote entry of
/// its `ds` is ≤ `DSVc`; for a version read by GET that is `DSVc[sr] ≥ ut`. A
/// ROTX returns, per key, the newer by ⟨ut, sr⟩ of the slice's version and the
/// cached one.
///
/// **Claim.** The result is causally consistent (Def 18/20): if `r_a` is
/// returned and `r_a dep v2` with `v2` of key `b`, then `r_b ≥ v2`. Under
/// last-writer-wins with Obs 7 that is what visible+ means.
///
/// - `r_a` came from a slice: `maxDS(r_a.ds, ⟨sr, ut⟩) ≤ sv`. By Obs 5/6,
///   `v2.ut ≤ r_a.ds[v2.sr] ≤ sv[v2.sr]` and `v2.ds ≤ r_a.ds ≤ sv`, so `v2` is
///   slice-eligible. It is present at b: a remote `v2` because `sv` is built
///   from genuine DSVs only, so `sv ≤ DSV_real`; a local `v2` because it was
///   written there, and before b's slice was read (line 21 and line 8 give any
///   later local write at b `ut > sv[m]`). If GC pruned it, every retained
///   version is newer, and a slice with nothing eligible aborts. So
///   `r_b ≥ slice_b ≥ v2`.
/// - `r_a` is a cached remote version read by GET: line 3 admitted it because
///   `r_a.ds ≤ DSV` at that server, which was merged into `DSVc ≤ sv`. Its
///   dependencies are therefore slice-eligible and present, as above.
/// - `r_a` is a cached own write: its dependencies are this client's earlier
///   reads and writes and their dependencies. Each is slice-eligible (covered,
///   as above), cached, or superseded in the cache by a newer version of its
///   key, as long as every version the client has *read* was one of these. So
///   the claim holds provided no "tainted" version has been read (next point).
///
/// **Taint.** A GET of a local version written by *another* client can return a
/// version whose remote dependencies are not covered by `DSVc` (its writer read
/// a fresh remote version). This client knows neither those dependencies nor
/// their values, so it cannot cache the version soundly. It records the
/// uncovered entries in `taint` and does not cache the version. While
/// `taint ≰ DSVc`, its own writes go to `held`, not the cache, because they
/// depend on the tainted read. Once `DSVc` covers `taint`, the tainted reads
/// are slice-eligible and the held writes move to the cache. A ROTX issued in
/// that window carries the taint, and the coordinator waits until its DSV
/// covers it (deviation 13): only then is every version the client has seen
/// slice-eligible or cached. Without the wait, the ROTX could return an older
/// version of a key than the client had read or written (found by
/// `causeway torture`).
pub struct CsxClient {
    ctx: ClientCtx,
    paper_dsv_merge: bool,
    /// DSc: per DC, the largest `ut` this client depends on.
    ds: DepSet<Hlc>,
    /// DSVc: the largest DSV this client has been given.
    dsv: Vec<Hlc>,
    /// Versions seen by this client (GET or own PUT) that slices may not
    /// return yet, and that are sound to merge into a ROTX result.
    cache: BTreeMap<Key, Cached>,
    /// Own writes made while tainted: moved to `cache` once the taint clears.
    held: BTreeMap<Key, Cached>,
    /// Per DC, the largest uncovered dependency of a tainted read.
    taint: Vec<Hlc>,
    pending: Option<Pending>,
}

#[derive(Clone, Debug)]
struct Cached {
    value: Value,
    ut: Hlc,
    sr: DcId,
    /// `maxDS(d.ds, {⟨sr, ut⟩})`.
    ds: DepSet<Hlc>,
}

impl Cached {
    fn order(&self) -> (Hlc, DcId) {
        (self.ut, self.sr)
    }
}

/// Keep the newer of the present entry and `c`.
fn remember(map: &mut BTreeMap<Key, Cached>, key: Key, c: Cached) {
    match map.get(&key) {
        Some(old) if old.order() >= c.order() => {}
        _ => {
            map.insert(key, c);
        }
    }
}

enum Pending {
    Get { key: Key },
    Put { key: Key, value: Value, ds: DepSet<Hlc> },
    Rot { keys: Vec<Key> },
}

impl CsxClient {
    fn new(cfg: &Config, ctx: ClientCtx) -> Self {
        let dcs = ctx.topology.dcs();
        CsxClient {
            ctx,
            paper_dsv_merge: cfg.paper_dsv_merge,
            ds: DepSet::new(),
            dsv: vec![Hlc::ZERO; dcs],
            cache: BTreeMap::new(),
            held: BTreeMap::new(),
            taint: vec![Hlc::ZERO; dcs],
            pending: None,
        }
    }

    fn well_formed<'a>(&self, dsv: &[Hlc], ds: &DepSet<Hlc>, items: impl IntoIterator<Item = &'a ReadItem>) -> bool {
        let dcs = self.dsv.len();
        dsv.len() == dcs && valid_ds(ds, dcs) && items.into_iter().all(|i| i.sr.idx() < dcs)
    }

    fn tainted(&self) -> bool {
        self.taint.iter().zip(&self.dsv).any(|(t, d)| t > d)
    }

    /// Whether `key`'s version at `order` is one this client cached or holds.
    fn knows(&self, key: &Key, order: (Hlc, DcId)) -> bool {
        [&self.cache, &self.held].iter().any(|m| m.get(key).is_some_and(|c| c.order() == order))
    }

    /// GET reply: DSVc = max(DSVc, dsv); DSc = maxDS(DSc, ds).
    fn finish_get(&mut self, key: Key, ok: GetOk) -> Result<Option<Value>, OpError> {
        if !self.well_formed(&ok.dsv, &ok.ds, &ok.item) {
            return Err(malformed("get reply"));
        }
        vmax(&mut self.dsv, &ok.dsv);
        self.ds.merge(&ok.ds);
        if let Some(item) = &ok.item
            && !self.paper_dsv_merge
        {
            self.note_read(key, item, ok.ds);
        }
        self.settle();
        Ok(ok.item.map(|i| i.value))
    }

    /// Decide what a GET result means for the cache (see the type's doc).
    fn note_read(&mut self, key: Key, item: &ReadItem, ds: DepSet<Hlc>) {
        let m = self.ctx.dc;
        if covered_remote(&ds, &self.dsv, m) {
            return; // any slice at sv ≥ DSVc returns this version or a newer one
        }
        // Only the version's own ⟨sr, ut⟩ is uncovered: line 3 admitted a remote
        // version because its ds ≤ the server's DSV, now merged into DSVc.
        let only_itself_uncovered =
            ds.entries().iter().all(|&(dc, t)| dc == m || t <= self.dsv[dc.idx()] || (dc == item.sr && t <= item.ut));
        let seen = Cached { value: item.value.clone(), ut: item.ut, sr: item.sr, ds };
        if item.sr != m && only_itself_uncovered {
            remember(&mut self.cache, key, seen);
        } else if !self.knows(&key, seen.order()) {
            for &(dc, t) in seen.ds.entries() {
                if dc != m && t > self.dsv[dc.idx()] && t > self.taint[dc.idx()] {
                    self.taint[dc.idx()] = t;
                }
            }
        }
    }

    /// PUT reply: DSc = maxDS(DSc, {⟨sr, ut⟩}).
    fn finish_put(&mut self, key: Key, value: Value, sent_ds: DepSet<Hlc>, stamp: Stamp) -> Result<(), OpError> {
        if stamp.sr.idx() >= self.dsv.len() {
            return Err(malformed("put reply"));
        }
        self.ds.raise(stamp.sr, stamp.ut);
        if !self.paper_dsv_merge {
            let mut ds = sent_ds;
            ds.raise(stamp.sr, stamp.ut);
            if !covered_remote(&ds, &self.dsv, self.ctx.dc) {
                let w = Cached { value, ut: stamp.ut, sr: stamp.sr, ds };
                let to = if self.tainted() { &mut self.held } else { &mut self.cache };
                remember(to, key, w);
            }
        }
        Ok(())
    }

    /// ROTX reply (Alg 5.4 client side), with the cache merged per key.
    fn finish_rot(&mut self, keys: &[Key], ok: RotOk) -> Result<Vec<Option<Value>>, OpError> {
        if ok.items.len() != keys.len() || !self.well_formed(&ok.dsv, &ok.ds, ok.items.iter().flatten()) {
            return Err(malformed("rot reply"));
        }
        // The snapshot covers any taint this request carried (the coordinator
        // waited for it), so held writes may join the cache before merging.
        vmax(&mut self.dsv, &ok.dsv);
        self.ds.merge(&ok.ds);
        self.settle();
        let values = keys
            .iter()
            .zip(ok.items)
            .map(|(k, item)| match (item, self.cache.get(k)) {
                (Some(i), Some(c)) if c.order() > (i.ut, i.sr) => Some(c.value.clone()),
                (None, Some(c)) => Some(c.value.clone()),
                (item, _) => item.map(|i| i.value),
            })
            .collect();
        Ok(values)
    }

    /// Drop cache entries slices now return anyway; release held writes once
    /// the taint is covered.
    fn settle(&mut self) {
        let (m, dsv) = (self.ctx.dc, &self.dsv);
        self.cache.retain(|_, c| !covered_remote(&c.ds, dsv, m));
        self.held.retain(|_, c| !covered_remote(&c.ds, dsv, m));
        if !self.held.is_empty() && !self.tainted() {
            for (k, c) in std::mem::take(&mut self.held) {
                remember(&mut self.cache, k, c);
            }
        }
    }
}

impl Client for CsxClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        match op {
            Op::Get { key } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                env.send(to, Msg::GetReq { key: key.clone(), dsv: self.dsv.clone() });
                self.pending = Some(Pending::Get { key });
            }
            Op::Put { key, value } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                env.send(
                    to,
                    Msg::PutReq { key: key.clone(), value: value.clone(), ds: self.ds.clone(), dsv: self.dsv.clone() },
                );
                self.pending = Some(Pending::Put { key, value, ds: self.ds.clone() });
            }
            Op::Rot { keys } => {
                let Some(first) = keys.first() else {
                    env.complete(OpResult::Rot(Vec::new()));
                    return;
                };
                // The coordinator: the server of the first key in this DC.
                let Some(to) = client_server_for(&self.ctx, env, first) else { return };
                env.send(
                    to,
                    Msg::RotReq {
                        keys: keys.clone(),
                        dsv: self.dsv.clone(),
                        ds: self.ds.clone(),
                        wait: self.taint.clone(),
                    },
                );
                self.pending = Some(Pending::Rot { keys });
            }
            #[allow(unreachable_patterns)]
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, _from: NodeId, msg: Msg) {
        let Some(pending) = self.pending.take() else { return };
        let result = match (pending, msg) {
            (Pending::Get { key }, Msg::GetReply(r)) => r.and_then(|ok| self.finish_get(key, ok)).map(OpResult::Get),
            (Pending::Put { key, value, ds }, Msg::PutReply(r)) => {
                r.and_then(|stamp| self.finish_put(key, value, ds, stamp)).map(|()| OpResult::Put)
            }
            (Pending::Rot { keys }, Msg::RotReply(r)) => r.and_then(|ok| self.finish_rot(&keys, ok)).map(OpResult::Rot),
            (p, _) => {
                self.pending = Some(p); // a stray reply: ignore it
                return;
            }
        };
        env.complete(result.unwrap_or_else(OpResult::Failed));
    }
}

// ---------------------------------------------------------------- server handlers

impl Server for CsxServer {
    type Msg = Msg;
    type Version = Version;

    fn on_start(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        if self.tree.is_some() {
            env.set_timer(self.cfg.heartbeat_interval_us, TIMER_HEARTBEAT);
            env.set_timer(self.cfg.stabilization_interval_us, TIMER_STABILIZE);
        }
    }

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        match msg {
            Msg::GetReq { key, dsv } => self.on_get(env, from, key, dsv),
            Msg::PutReq { key, value, ds, dsv } => self.on_put(env, from, key, value, ds, dsv),
            Msg::RotReq { keys, dsv, ds, wait } => self.on_rot(env, from, keys, dsv, ds, wait),
            _ => {} // replies and peer messages never come from clients; the runtime rejects them at the edge
        }
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, msg: Msg) {
        if self.tree.is_none() || !self.topology.contains(from) {
            return;
        }
        match msg {
            Msg::Replicate { key, version } => self.on_replicate(env, from, key, version),
            Msg::Heartbeat { hlc } => self.on_heartbeat(from, hlc),
            Msg::SliceReq { rot, keys, sv } => self.on_slice_req(env, from, rot, keys, sv),
            Msg::SliceReply { rot, slice } => self.on_slice_reply(env, from, rot, slice),
            Msg::StableReport { vv_min } => self.on_stable_report(from, vv_min),
            Msg::StablePush { dsv } => self.on_stable_push(env, from, dsv),
            _ => {}
        }
    }

    fn on_timer(&mut self, env: &mut impl ServerEnv<Msg, Version>, token: u64) {
        match token {
            TIMER_HEARTBEAT => self.heartbeat(env),
            TIMER_STABILIZE => self.stabilize(env),
            _ => {}
        }
    }
}

impl CsxServer {
    /// Alg 5.2 lines 1–5.
    fn on_get(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, key: Key, dsv: Vec<Hlc>) {
        if let Err(e) = self.check_key(&key).and_then(|()| self.check_vector(&dsv)) {
            env.reply(from, Msg::GetReply(Err(e)));
            return;
        }
        // Line 2: DSV = max(DSV, dsv). The client's DSV is genuine: it came from this DC.
        self.raise_dsv(env, dsv.iter().copied().enumerate());
        // Line 3: the latest version that is local or whose dependencies are all stable.
        let (m, dsv) = (self.m, &self.dsv);
        let skip = self.cfg.mutant_skip_visibility_check;
        let d = env.store().latest_where(&key, |d| skip || get_visible(d, m, dsv));
        // Line 4: ds = maxDS(d.ds, {⟨d.sr, d.ut⟩}).
        let (item, ds) = match d {
            Some(d) => (Some(d.read_item()), d.full_ds()),
            None => (None, DepSet::new()),
        };
        // Line 5.
        env.reply(from, Msg::GetReply(Ok(GetOk { item, ds, dsv: self.dsv.clone() })));
    }

    /// Alg 5.2 lines 6–19. Never waits: the HLC moves past the dependency time.
    fn on_put(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: ClientId,
        key: Key,
        value: Value,
        ds: DepSet<Hlc>,
        dsv: Vec<Hlc>,
    ) {
        if let Err(e) = self.check_key(&key).and_then(|()| self.check_ds(&ds)).and_then(|()| self.check_vector(&dsv)) {
            env.reply(from, Msg::PutReply(Err(e)));
            return;
        }
        // Line 7, as decided for §5.5: only the local entry of DS (see
        // merge_client_ds), and instead the client's DSVc, a genuine DSV of
        // this DC (deviation 12). Without it, a reader of this write could
        // miss what the writer saw: the writer read x through a ROTX slice
        // admitted by the coordinator's higher DSV, then wrote y here; a
        // reader of y (visible at once, being local) then reads x's key at a
        // partition whose DSV lags and gets an older x. The printed line 7
        // closed that by merging DS, which §5.5 shows unsafe; DSVc is safe.
        self.raise_dsv(env, dsv.iter().copied().enumerate());
        self.merge_client_ds(env, &ds);
        // Line 8: dt = max{ds values ∪ {DSV[m]}}. Including DSV[m] is what gives
        // this write ut > sv[m] of any slice already read here (line 21).
        let m = self.m.idx();
        let dt = ds.max_value().unwrap_or(Hlc::ZERO).max(self.dsv[m]);
        // Line 9: updateHLCforPut(dt), the HLC receive rule on VV[m].
        let ut = self.vv[m].update(env.now_us(), dt);
        let version = Version { value, ut, sr: self.m, ds };
        self.apply(env, key.clone(), version.clone());
        env.observe(Observation::Visible { key: &key, value: &version.value, origin: self.m, written_us: ut.l });
        env.reply(from, Msg::PutReply(Ok(Stamp { ut, sr: self.m })));
        // Line 19. Sent in ut order on FIFO channels, so a peer may set VV[m] = ut.
        for &peer in &self.peers {
            env.send(peer, Msg::Replicate { key: key.clone(), version: version.clone() });
        }
        self.replicated_since_heartbeat |= !self.peers.is_empty();
    }

    /// Alg 5.2 line 20: insert, and VV[k] = d.ut.
    fn on_replicate(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, key: Key, version: Version) {
        let k = self.topology.dc_of(from);
        let well_formed = self.peers.contains(&from)
            && version.sr == k
            && sane(version.ut)
            && valid_ds(&version.ds, self.dsv.len())
            && self.check_key(&key).is_ok();
        if !well_formed {
            return;
        }
        let (order, value, ds) = (version.order(), version.value.clone(), version.ds.clone());
        let inserted = self.apply(env, key.clone(), version);
        if order.0 > self.vv[k.idx()] {
            self.vv[k.idx()] = order.0;
        }
        if inserted == Inserted::Duplicate {
            return;
        }
        self.admit_or_park(env, PendingVisible { key, order, value, ds });
    }

    /// Report `p` visible if line 3 admits it, or park it on the first DSV
    /// entry that still holds it back.
    fn admit_or_park(&mut self, env: &mut impl ServerEnv<Msg, Version>, p: PendingVisible) {
        match p.ds.entries().iter().find(|&&(dc, h)| h > self.dsv[dc.idx()]) {
            None => self.report_if_read(env, &p.key, p.order, &p.value),
            Some(&(dc, h)) => {
                let id = self.next_pending;
                self.next_pending += 1;
                self.pending_visible[dc.idx()].push(Reverse((h, id)));
                self.pending_slab.insert(id, p);
            }
        }
    }

    /// Alg 5.3: on ⟨Heartbeat hlc⟩ from p^k_n, VV[k] = hlc.
    fn on_heartbeat(&mut self, from: NodeId, hlc: Hlc) {
        if self.peers.contains(&from) && sane(hlc) {
            let k = self.topology.dc_of(from).idx();
            if hlc > self.vv[k] {
                self.vv[k] = hlc;
            }
        }
    }

    /// Alg 5.4 lines 9–18: the ROTX coordinator.
    fn on_rot(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: ClientId,
        keys: Vec<Key>,
        dsv: Vec<Hlc>,
        ds: DepSet<Hlc>,
        wait: Vec<Hlc>,
    ) {
        let checked = keys
            .first()
            .map_or(Ok(()), |k| self.check_key(k))
            .and_then(|()| self.check_vector(&dsv))
            .and_then(|()| self.check_vector(&wait))
            .and_then(|()| self.check_ds(&ds));
        if let Err(e) = checked {
            env.reply(from, Msg::RotReply(Err(e)));
            return;
        }
        // Line 10, as decided for §5.5: DSV = max(DSV, dsv), and DS only for the
        // local entry (paper_dsv_merge: for every entry).
        self.raise_dsv(env, dsv.iter().copied().enumerate());
        self.merge_client_ds(env, &ds);
        // Deviation 13: a tainted client's ROTX waits until this DSV covers
        // the taint, so the snapshot includes what the tainted read depends on.
        if wait.iter().zip(&self.dsv).any(|(w, d)| w > d) {
            self.parked_rots.push(ParkedRot { from, keys, wait, since_us: env.now_us() });
            return;
        }
        self.start_rot(env, from, keys);
    }

    /// Alg 5.4 lines 12–18: take the snapshot and ask the partitions.
    fn start_rot(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, keys: Vec<Key>) {
        // Line 12.
        let sv = self.dsv.clone();
        // Lines 13–17, one SliceReq per partition involved.
        let mut by_partition: BTreeMap<PartitionId, Vec<usize>> = BTreeMap::new();
        for (i, k) in keys.iter().enumerate() {
            by_partition.entry(self.topology.partition_of(k)).or_default().push(i);
        }
        let mut rot =
            RotInProgress { client: from, sv, items: vec![None; keys.len()], ds: DepSet::new(), waiting: Vec::new() };
        if let Some(mine) = by_partition.remove(&self.partition) {
            let mine_keys: Vec<Key> = mine.iter().map(|&i| keys[i].clone()).collect();
            let dcs = self.dsv.len();
            let read = self.slice(env, &mine_keys, &rot.sv).and_then(|s| rot.absorb(&mine, s, dcs));
            if let Err(e) = read {
                env.reply(from, Msg::RotReply(Err(e)));
                return;
            }
        }
        let mut targets = Vec::with_capacity(by_partition.len());
        for (p, positions) in by_partition {
            match self.topology.server(self.m, p) {
                Some(node) => targets.push((node, positions)),
                None => {
                    env.reply(from, Msg::RotReply(Err(OpError::NoReplica)));
                    return;
                }
            }
        }
        let id = self.next_rot;
        self.next_rot += 1;
        for (node, positions) in targets {
            let keys = positions.iter().map(|&i| keys[i].clone()).collect();
            env.send(node, Msg::SliceReq { rot: id, keys, sv: rot.sv.clone() });
            rot.waiting.push((node, positions));
        }
        if rot.waiting.is_empty() {
            Self::finish_rot(env, rot);
        } else {
            self.rots.insert(id, rot);
        }
    }

    /// Alg 5.4 line 20, at a partition asked for a slice.
    fn on_slice_req(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: NodeId,
        rot: u64,
        keys: Vec<Key>,
        sv: Vec<Hlc>,
    ) {
        if self.topology.dc_of(from) != self.m {
            return;
        }
        let slice = self
            .check_vector(&sv)
            .and_then(|()| keys.iter().try_for_each(|k| self.check_key(k)))
            .and_then(|()| self.slice(env, &keys, &sv));
        env.send(from, Msg::SliceReply { rot, slice });
    }

    /// Alg 5.4 lines 21–23.
    fn slice(&mut self, env: &mut impl ServerEnv<Msg, Version>, keys: &[Key], sv: &[Hlc]) -> Result<SliceOk, OpError> {
        // Line 21: DSV[m] = max(DSV[m], sv[m]). With line 8, any later local PUT here gets ut > sv[m].
        let m = self.m.idx();
        self.raise_dsv(env, [(m, sv[m])]);
        let store = env.store();
        let mut items = Vec::with_capacity(keys.len());
        let mut ds = DepSet::new();
        for key in keys {
            // Line 22: the latest d with maxDS(d.ds, {⟨d.sr, d.ut⟩}) ≤ sv.
            match store.latest_where(key, |d| slice_visible(d, sv)) {
                Some(d) => {
                    // Line 23.
                    ds.merge(&d.full_ds());
                    items.push(Some(d.read_item()));
                }
                // GC dropped what this snapshot would have read: fail rather than
                // pretend the key had no version.
                None if store.was_pruned(key) => return Err(OpError::Aborted("snapshot pruned".into())),
                None => items.push(None),
            }
        }
        Ok(SliceOk { items, ds })
    }

    /// Alg 5.4 lines 15–18, at the coordinator.
    fn on_slice_reply(
        &mut self,
        env: &mut impl ServerEnv<Msg, Version>,
        from: NodeId,
        rot: u64,
        slice: Result<SliceOk, OpError>,
    ) {
        let dcs = self.dsv.len();
        let Some(st) = self.rots.get_mut(&rot) else { return };
        let Some(pos) = st.waiting.iter().position(|w| w.0 == from) else { return };
        let (_, positions) = st.waiting.swap_remove(pos);
        let outcome = slice.and_then(|s| st.absorb(&positions, s, dcs));
        let done = outcome.is_err() || st.waiting.is_empty();
        if !done {
            return;
        }
        let Some(st) = self.rots.remove(&rot) else { return };
        match outcome {
            Ok(()) => Self::finish_rot(env, st),
            Err(e) => env.reply(st.client, Msg::RotReply(Err(e))),
        }
    }

    /// Line 18: ⟨ROTXReply vset, sv, ds⟩.
    fn finish_rot(env: &mut impl ServerEnv<Msg, Version>, rot: RotInProgress) {
        env.reply(rot.client, Msg::RotReply(Ok(RotOk { items: rot.items, dsv: rot.sv, ds: rot.ds })));
    }

    /// A child's entry-wise min of its subtree's VVs.
    fn on_stable_report(&mut self, from: NodeId, vv_min: Vec<Hlc>) {
        if let Some(tree) = &mut self.tree
            && valid_vector(&vv_min, self.dsv.len())
        {
            tree.on_report(from, vv_min);
        }
    }

    /// The DC's stable vector from the parent: DSV = max(DSV, pushed); pass it down.
    fn on_stable_push(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, dsv: Vec<Hlc>) {
        if self.topology.dc_of(from) != self.m || !valid_vector(&dsv, self.dsv.len()) {
            return;
        }
        self.raise_dsv(env, dsv.iter().copied().enumerate());
        self.push_down(env, &dsv);
    }

    // ------------------------------------------------------------ shared steps

    /// Lines 7 and 10 for the client's DS. By default only `DSV[m]` (the
    /// §5.5 decision: remote DS entries are reads, not stability, and merging
    /// them can make DSV exceed DSV_real). `paper_dsv_merge` merges every entry
    /// as printed.
    fn merge_client_ds(&mut self, env: &mut impl ServerEnv<Msg, Version>, ds: &DepSet<Hlc>) {
        if self.cfg.paper_dsv_merge {
            self.raise_dsv(env, ds.entries().iter().map(|&(dc, t)| (dc.idx(), t)));
        } else if let Some(t) = ds.get(self.m) {
            self.raise_dsv(env, [(self.m.idx(), t)]);
        }
    }

    /// Raise DSV entries; if any grew, admit pending remote versions.
    fn raise_dsv(&mut self, env: &mut impl ServerEnv<Msg, Version>, entries: impl IntoIterator<Item = (usize, Hlc)>) {
        let mut grew = false;
        for (i, t) in entries {
            if let Some(e) = self.dsv.get_mut(i)
                && t > *e
            {
                *e = t;
                grew = true;
            }
        }
        if grew && let Some(least) = self.dsv.iter().map(|t| t.l).min() {
            env.observe(Observation::Stable { stable_us: least });
        }
        if grew && !self.parked_rots.is_empty() {
            let dsv = &self.dsv;
            let (ready, parked): (Vec<ParkedRot>, Vec<ParkedRot>) = std::mem::take(&mut self.parked_rots)
                .into_iter()
                .partition(|r| r.wait.iter().zip(dsv).all(|(w, d)| w <= d));
            self.parked_rots = parked;
            for r in ready {
                let waited_us = env.now_us().saturating_sub(r.since_us);
                env.observe(Observation::Blocked { what: "rot_taint_wait", waited_us });
                self.start_rot(env, r.from, r.keys);
            }
        }
        if grew && !self.pending_slab.is_empty() {
            let mut unblocked = Vec::new();
            for (i, heap) in self.pending_visible.iter_mut().enumerate() {
                while let Some(&Reverse((h, id))) = heap.peek() {
                    if h > self.dsv[i] {
                        break;
                    }
                    heap.pop();
                    unblocked.push(id);
                }
            }
            // Ascending ids: versions are reported in arrival order.
            unblocked.sort_unstable();
            for id in unblocked {
                if let Some(p) = self.pending_slab.remove(&id) {
                    self.admit_or_park(env, p);
                }
            }
        }
    }

    /// Report a version admitted by line 3 if it is what a GET returns now.
    fn report_if_read(&self, env: &mut impl ServerEnv<Msg, Version>, key: &Key, order: (Hlc, DcId), value: &Value) {
        let (m, dsv) = (self.m, &self.dsv);
        let read = env.store().latest_where(key, |d| get_visible(d, m, dsv)).map(Versioned::order);
        if read == Some(order) {
            env.observe(Observation::Visible { key, value, origin: order.1, written_us: order.0.l });
        }
    }

    /// Insert into the store and note the key for GC.
    fn apply(&mut self, env: &mut impl ServerEnv<Msg, Version>, key: Key, version: Version) -> Inserted {
        let store = env.store();
        let inserted = store.insert(key.clone(), version);
        if inserted != Inserted::Duplicate && store.versions(&key).len() > 1 && self.gc.dirty_set.insert(key.clone()) {
            self.gc.dirty.push_back(key);
        }
        inserted
    }

    fn push_down(&self, env: &mut impl ServerEnv<Msg, Version>, dsv: &[Hlc]) {
        if let Some(tree) = &self.tree {
            for &child in tree.children() {
                env.send(child, Msg::StablePush { dsv: dsv.to_vec() });
            }
        }
    }

    fn check_key(&self, key: &[u8]) -> Result<(), OpError> {
        if self.tree.is_some() && self.topology.partition_of(key) == self.partition {
            Ok(())
        } else {
            Err(OpError::BadRequest(format!("key not stored at this server ({:?} of {:?})", self.partition, self.m)))
        }
    }

    fn check_vector(&self, v: &[Hlc]) -> Result<(), OpError> {
        if valid_vector(v, self.dsv.len()) {
            Ok(())
        } else {
            Err(OpError::BadRequest(format!("a DSV needs {} entries with HLC counters below 2^31", self.dsv.len())))
        }
    }

    fn check_ds(&self, ds: &DepSet<Hlc>) -> Result<(), OpError> {
        if valid_ds(ds, self.dsv.len()) { Ok(()) } else { Err(OpError::BadRequest("malformed dependency set".into())) }
    }

    // ------------------------------------------------------------ timers

    /// Every Δ (Alg 5.3): if no Replicate went out since the last tick,
    /// updateHLC() and send `⟨Heartbeat VV[m]⟩` to every p^k_n, k ≠ m. The tick
    /// happens even with no peers (M = 1): it is what moves DSV[m] on an idle
    /// partition.
    fn heartbeat(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        if !self.replicated_since_heartbeat {
            let hlc = self.vv[self.m.idx()].tick(env.now_us());
            for &peer in &self.peers {
                env.send(peer, Msg::Heartbeat { hlc });
            }
        }
        self.replicated_since_heartbeat = false;
        env.set_timer(self.cfg.heartbeat_interval_us, TIMER_HEARTBEAT);
    }

    /// Every θ (Alg 5.3): DSV = max(DSV, entry-wise min of the DC's VVs),
    /// computed over the tree; then a bounded GC step.
    fn stabilize(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        let step = match &self.tree {
            Some(tree) => tree.step(&self.vv),
            None => return,
        };
        match step {
            TreeStep::Report { parent, aggregate } => env.send(parent, Msg::StableReport { vv_min: aggregate }),
            TreeStep::Stable(dsv) => {
                self.raise_dsv(env, dsv.iter().copied().enumerate());
                self.push_down(env, &dsv);
            }
            TreeStep::Waiting => {}
        }
        self.collect_garbage(env);
        env.set_timer(self.cfg.stabilization_interval_us, TIMER_STABILIZE);
    }

    /// Record the DSV; then, on at most [`GC_KEYS_PER_TICK`] dirty keys, drop
    /// versions older than the newest one slice-visible at the horizon (the
    /// newest DSV at least `gc_grace_us` old).
    fn collect_garbage(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        let g = &mut self.gc;
        g.clock_us = g.clock_us.max(env.now_us());
        let now_us = g.clock_us;
        match g.history.back_mut() {
            Some((at_us, dsv)) if *at_us == now_us => dsv.clone_from(&self.dsv),
            Some((_, dsv)) if *dsv == self.dsv => {}
            _ => g.history.push_back((now_us, self.dsv.clone())),
        }
        let grace_us = self.cfg.gc_grace_us;
        let Some(h) = g.history.iter().rposition(|(at_us, _)| at_us.saturating_add(grace_us) <= now_us) else {
            return;
        };
        g.history.drain(..h);
        let horizon = &g.history[0].1;
        let store = env.store();
        for _ in 0..GC_KEYS_PER_TICK.min(g.dirty.len()) {
            let Some(key) = g.dirty.pop_front() else { break };
            store.gc_key(&key, |v| slice_visible(v, horizon));
            if store.versions(&key).len() > 1 {
                g.dirty.push_back(key);
            } else {
                g.dirty_set.remove(&key);
            }
        }
    }
}

// ---------------------------------------------------------------- tests

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProtocolName;
    use crate::testkit::{
        Dest, InFlight, Seen, TestNet, bytes, channel, client_traffic, get, put, rot, run, server_to_server, stabilize,
        stabilize_holding,
    };
    use causeway_core::{Replication, TopologySpec};

    type Net = TestNet<CausalSpartanX>;
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
    /// `n` keys on `n` different partitions.
    fn keys_on_distinct_partitions(net: &Net, n: usize) -> Vec<Key> {
        let mut seen = BTreeSet::new();
        let mut keys = Vec::new();
        for i in 0.. {
            let k = bytes(&format!("key{i}"));
            if seen.insert(net.topology.partition_of(&k)) {
                keys.push(k);
                if keys.len() == n {
                    return keys;
                }
            }
        }
        unreachable!()
    }
    fn latest(net: &Net, node: NodeId, k: &Key) -> Version {
        net.stores[node.idx()].latest(k).expect("a version").clone()
    }
    fn visible_reports(net: &Net, node: NodeId, k: &Key, v: &str) -> usize {
        let want = Seen::Visible { node, key: k.to_vec(), value: v.as_bytes().to_vec() };
        net.seen.iter().filter(|s| **s == want).count()
    }
    fn assert_never_blocked(net: &Net) {
        let blocked: Vec<&Seen> = net.seen.iter().filter(|s| matches!(s, Seen::Blocked { .. })).collect();
        assert!(blocked.is_empty(), "CausalSpartanX never blocks, saw {blocked:?}");
    }

    #[test]
    fn registered_by_name() {
        assert_eq!("causalspartanx".parse::<ProtocolName>(), Ok(ProtocolName::CausalSpartanX));
        assert_eq!("Causal-Spartan_X".parse::<ProtocolName>(), Ok(ProtocolName::CausalSpartanX));
        assert_eq!(ProtocolName::CausalSpartanX.as_str(), CausalSpartanX::NAME);
        assert!(ProtocolName::ALL.contains(&ProtocolName::CausalSpartanX));
    }

    #[test]
    fn validate_rejects_partial_replication_and_zero_intervals() {
        let mut spec = TopologySpec::full(3, 3);
        spec.replication = Replication::Partial { factor: 2 };
        let partial = Topology::new(spec).unwrap();
        assert!(CausalSpartanX::validate(&Config::default(), &partial).is_err());
        let full = Topology::new(TopologySpec::full(3, 3)).unwrap();
        assert!(CausalSpartanX::validate(&Config::default(), &full).is_ok());
        let cfg = Config { stabilization_interval_us: 0, ..Config::default() };
        assert!(CausalSpartanX::validate(&cfg, &full).is_err());
    }

    #[test]
    fn local_writes_are_visible_at_once() {
        let mut net = net(2, 2);
        let k = bytes("a");
        put(&mut net, cl(0, 0), &k, "1");
        // Another client of the same DC reads it before any timer or replication.
        assert_eq!(get(&mut net, cl(0, 1), &k), Some("1".into()));
        assert_eq!(rot(&mut net, cl(0, 0), &[&k]), vec![Some("1".into())]);
        assert_eq!(visible_reports(&net, net.server_for(DC0, &k), &k, "1"), 1);
        // Not yet at the other DC.
        assert_eq!(get(&mut net, cl(1, 0), &k), None);
        assert_never_blocked(&net);
    }

    #[test]
    fn remote_write_is_invisible_until_its_ds_is_covered_by_the_dsv() {
        let mut net = net(2, 2);
        let ks = keys_on_distinct_partitions(&net, 2);
        let (a, b) = (&ks[0], &ks[1]);
        let writer = cl(0, 0);
        put(&mut net, writer, a, "a1");
        put(&mut net, writer, b, "b1"); // b1.ds = {dc0: a1.ut}
        let (a0, a1, b1) = (net.server_for(DC0, a), net.server_for(DC1, a), net.server_for(DC1, b));
        let hold_a = channel(a0, a1);
        stabilize_holding(&mut net, &hold_a);
        // b1 has arrived but depends on a1, which has not.
        assert!(net.stores[b1.idx()].latest(b).is_some());
        assert!(net.servers[b1.idx()].dsv[0] < latest(&net, a0, a).ut);
        assert_eq!(get(&mut net, cl(1, 0), b), None);
        assert_eq!(visible_reports(&net, b1, b, "b1"), 0);
        // a1 arrives: no dependencies, so it is visible (and reported) on arrival.
        net.deliver_while(|m| hold_a(m) && matches!(m.msg, Msg::Replicate { .. }));
        assert_eq!(visible_reports(&net, a1, a, "a1"), 1);
        assert_eq!(get(&mut net, cl(1, 0), b), None, "b1 waits for the DSV, not for a1's arrival");
        // Stabilization covers b1.ds: reported once, readable.
        stabilize(&mut net);
        assert_eq!(visible_reports(&net, b1, b, "b1"), 1);
        assert_eq!(get(&mut net, cl(1, 0), b), Some("b1".into()));
        assert_eq!(get(&mut net, cl(1, 0), a), Some("a1".into()));
        stabilize(&mut net);
        assert_eq!(visible_reports(&net, b1, b, "b1"), 1, "reported exactly once");
        assert_never_blocked(&net);
    }

    #[test]
    fn photo_then_album_a_reader_that_sees_the_album_sees_the_photo() {
        let mut net = net(2, 3);
        let ks = keys_on_distinct_partitions(&net, 2);
        let (photo, album) = (&ks[0], &ks[1]);
        let alice = cl(0, 0);
        put(&mut net, alice, photo, "photo");
        put(&mut net, alice, album, "album with photo");
        let hold_photo = channel(net.server_for(DC0, photo), net.server_for(DC1, photo));
        let check = |net: &mut Net, reader: ClientId| {
            let seen_album = get(net, reader, album);
            if seen_album.is_some() {
                assert_eq!(get(net, reader, photo), Some("photo".into()));
            }
            let snap = rot(net, reader, &[album, photo]);
            if snap[0].is_some() {
                assert_eq!(snap[1], Some("photo".into()));
            }
            seen_album.is_some()
        };
        // The album's replicate reaches DC1 first, then the DSV advances without the photo.
        net.deliver_while(|m| server_to_server(m) && !hold_photo(m));
        assert!(!check(&mut net, cl(1, 0)));
        stabilize_holding(&mut net, &hold_photo);
        assert!(!check(&mut net, cl(1, 1)));
        // The photo arrives; once stable, both are seen.
        net.deliver_while(|m| hold_photo(m));
        assert!(!check(&mut net, cl(1, 0)));
        stabilize(&mut net);
        assert!(check(&mut net, cl(1, 0)));
        assert!(check(&mut net, cl(1, 1)));
        assert_never_blocked(&net);
    }

    /// Seed 000 §3.3: Alice hides her album from Bob, and later reverts it and
    /// unblocks him. Bob's ROTX must never pair a public ACL with the private album.
    #[test]
    fn acl_album_rotx_never_returns_public_acl_with_new_album() {
        let mut net = net(2, 3);
        let ks = keys_on_distinct_partitions(&net, 2);
        let (acl, album) = (&ks[0], &ks[1]);
        let (alice, bob) = (cl(0, 0), cl(1, 0));
        put(&mut net, alice, acl, "public");
        put(&mut net, alice, album, "old");
        net.deliver_all();
        stabilize(&mut net);
        let bad = vec![Some("public".to_string()), Some("private album".to_string())];
        let hold = |net: &Net, k: &Key| channel(net.server_for(DC0, k), net.server_for(DC1, k));

        // Scenario 1: block Bob, then post; the post's replicate arrives first.
        put(&mut net, alice, acl, "private");
        put(&mut net, alice, album, "private album");
        let hold_acl = hold(&net, acl);
        net.deliver_while(|m| server_to_server(m) && !hold_acl(m));
        assert_ne!(rot(&mut net, bob, &[acl, album]), bad);
        stabilize_holding(&mut net, &hold_acl);
        assert_ne!(rot(&mut net, bob, &[acl, album]), bad);
        net.deliver_while(|m| hold_acl(m));
        assert_ne!(rot(&mut net, bob, &[acl, album]), bad);
        stabilize(&mut net);
        assert_eq!(rot(&mut net, bob, &[acl, album]), vec![Some("private".into()), Some("private album".into())]);

        // Scenario 2: revert the album, then unblock; the unblock arrives first.
        put(&mut net, alice, album, "clean album");
        put(&mut net, alice, acl, "public");
        let hold_album = hold(&net, album);
        net.deliver_while(|m| server_to_server(m) && !hold_album(m));
        assert_ne!(rot(&mut net, bob, &[acl, album]), bad);
        stabilize_holding(&mut net, &hold_album);
        assert_ne!(rot(&mut net, bob, &[acl, album]), bad);
        net.deliver_while(|m| hold_album(m));
        stabilize(&mut net);
        assert_eq!(rot(&mut net, bob, &[acl, album]), vec![Some("public".into()), Some("clean album".into())]);
        assert_never_blocked(&net);
    }

    #[test]
    fn put_latency_is_independent_of_clock_skew() {
        let mut net = net(2, 2);
        let ks = keys_on_distinct_partitions(&net, 2);
        let (a, b) = (&ks[0], &ks[1]);
        let (fast, slow) = (net.server_for(DC0, a), net.server_for(DC0, b));
        net.clocks[fast.idx()] = 1_000_000_000; // 1000 s ahead of the other server
        net.clocks[slow.idx()] = 1_000;
        let c = cl(0, 0);
        put(&mut net, c, a, "a");
        let dt = latest(&net, fast, a).ut;
        // The dependent PUT lands on a server whose clock is ~1000 s behind dt:
        // GentleRain would wait that long. Here one request and one reply suffice.
        net.invoke(c, Op::Put { key: b.clone(), value: bytes("b") });
        assert_eq!(net.deliver_client_traffic(), 2);
        assert_eq!(net.take_result(c), Some(OpResult::Put));
        let ut = latest(&net, slow, b).ut;
        assert!(ut > dt, "updateHLC moved past dt: {ut:?} > {dt:?}");
        assert_eq!(ut.l, dt.l, "the HLC counts on top of dt instead of waiting for the clock");
        assert_never_blocked(&net);
    }

    /// GentleRain's failure (notes §5.6): both DCs are stable up to t, then a
    /// clock steps back below t and writes. With HLCs the new versions still
    /// get timestamps above everything already stable, so a remote DC never
    /// shows the dependent write without its dependency.
    #[test]
    fn a_backward_clock_jump_does_not_break_causality() {
        let mut net = net(2, 2);
        let ks = keys_on_distinct_partitions(&net, 2);
        let (a, b) = (&ks[0], &ks[1]);
        let (a0, b0, a1, b1) =
            (net.server_for(DC0, a), net.server_for(DC0, b), net.server_for(DC1, a), net.server_for(DC1, b));
        net.advance_clocks(50_000);
        stabilize(&mut net);
        let stable_before = net.servers[b1.idx()].dsv[0];
        assert!(stable_before.l >= 50_000);
        // DC0's clocks step back 40 ms.
        net.clocks[a0.idx()] = 11_000;
        net.clocks[b0.idx()] = 11_000;
        let c = cl(0, 0);
        put(&mut net, c, a, "a");
        put(&mut net, c, b, "b after a");
        let (ut_a, ut_b) = (latest(&net, a0, a).ut, latest(&net, b0, b).ut);
        assert!(ut_a > stable_before, "the HLC keeps ut above the already-stable time");
        assert!(ut_b > ut_a);
        // b reaches DC1, a does not.
        let hold_a = channel(a0, a1);
        stabilize_holding(&mut net, &hold_a);
        assert!(net.servers[b1.idx()].dsv[0] < ut_a);
        let reader = cl(1, 0);
        assert_eq!(get(&mut net, reader, b), None);
        assert_eq!(rot(&mut net, reader, &[a, b]), vec![None, None]);
        net.deliver_while(|m| hold_a(m));
        stabilize(&mut net);
        assert_eq!(get(&mut net, reader, b), Some("b after a".into()));
        assert_eq!(rot(&mut net, reader, &[a, b]), vec![Some("a".into()), Some("b after a".into())]);
        assert_never_blocked(&net);
    }

    #[test]
    fn rotx_never_blocks_and_takes_one_client_round() {
        let mut net = net(2, 3);
        let ks = keys_on_distinct_partitions(&net, 3);
        let writer = cl(0, 0);
        for k in &ks {
            put(&mut net, writer, k, "v");
        }
        // Replicates arrive but the DSV does not move, and the reader reads a
        // fresh remote version: its DS runs ahead of every DSV.
        net.deliver_while(server_to_server);
        let reader = cl(1, 0);
        assert_eq!(get(&mut net, reader, &ks[0]), Some("v".into()));
        let timers_before = net.timers.len();
        net.invoke(reader, Op::Rot { keys: ks.clone() });
        let (mut from_client, mut to_client, mut slices) = (0, 0, 0);
        while let Some(m) = net.queue.iter().find(|m| op_traffic(m)) {
            match (m.from, m.to, &m.msg) {
                (Dest::Client(_), _, _) => from_client += 1,
                (_, Dest::Client(_), _) => to_client += 1,
                (_, _, Msg::SliceReq { .. }) => slices += 1,
                _ => {}
            }
            net.deliver_first(op_traffic);
        }
        let result = net.take_result(reader).expect("completed with no timer fired and no waiting");
        assert!(matches!(result, OpResult::Rot(ref v) if v.len() == 3), "{result:?}");
        assert_eq!((from_client, to_client), (1, 1), "exactly one client round");
        assert_eq!(slices, 2, "one slice request per other partition; the coordinator reads its own");
        assert_eq!(net.timers.len(), timers_before, "nothing parked on a timer");
        assert_never_blocked(&net);
    }

    /// Notes §5.5, "inferred concern". DC j = DC0 writes x (ut 5 ms) on k4, then
    /// w (ut 6 ms) on k3 depending on x, and an independent v (ut 10 ms). At
    /// DC i = DC1, v and w arrive and x does not. A client reads v (DS[j] = 10 ms)
    /// and runs ROTX{k3, k4}.
    fn section_5_5_scenario(paper_dsv_merge: bool) -> (Net, Vec<Key>, Vec<Option<String>>) {
        let mut net = net_with(2, 3, Config { paper_dsv_merge, ..Config::default() });
        let ks = keys_on_distinct_partitions(&net, 3);
        let (k3, k4, kv) = (&ks[0], &ks[1], &ks[2]);
        let (writer, other, reader) = (cl(0, 0), cl(0, 1), cl(1, 0));
        put(&mut net, other, k3, "w0");
        put(&mut net, other, k4, "x0");
        net.deliver_all();
        stabilize(&mut net);
        let (x_j, w_j, v_j, x_i) =
            (net.server_for(DC0, k4), net.server_for(DC0, k3), net.server_for(DC0, kv), net.server_for(DC1, k4));
        net.clocks[x_j.idx()] = 5_000;
        put(&mut net, writer, k4, "x");
        net.clocks[w_j.idx()] = 6_000;
        put(&mut net, writer, k3, "w");
        net.clocks[v_j.idx()] = 10_000;
        put(&mut net, other, kv, "v");
        assert_eq!(latest(&net, w_j, k3).ds.get(DC0), Some(latest(&net, x_j, k4).ut), "w depends on x");
        let hold_x = channel(x_j, x_i);
        stabilize_holding(&mut net, &hold_x);
        assert_eq!(latest(&net, x_i, k4).value, bytes("x0"), "x has not reached DC i");
        assert_eq!(get(&mut net, reader, kv), Some("v".into()));
        let snapshot = rot(&mut net, reader, &[k3, k4]);
        (net, ks, snapshot)
    }

    #[test]
    fn paper_dsv_merge_returns_a_non_causal_snapshot_and_the_default_does_not() {
        // As printed: sv[j] = DS[j] = 10 ms admits w, but x is not there.
        let (net, _, snapshot) = section_5_5_scenario(true);
        assert_eq!(snapshot, vec![Some("w".into()), Some("x0".into())], "the anomaly: w without the x it depends on");

        // Our rule: sv comes from genuine DSVs only, so w is not yet in the snapshot.
        let (mut net2, ks, snapshot) = section_5_5_scenario(false);
        assert_eq!(snapshot, vec![Some("w0".into()), Some("x0".into())]);
        // Once x arrives and the DSV covers it, the snapshot moves on, whole.
        net2.deliver_all();
        net2.advance_clocks(20_000);
        stabilize(&mut net2);
        assert_eq!(rot(&mut net2, cl(1, 0), &[&ks[0], &ks[1]]), vec![Some("w".into()), Some("x".into())]);
        assert_never_blocked(&net);
        assert_never_blocked(&net2);
    }

    #[test]
    fn rotx_keeps_read_your_reads_and_writes_through_the_client_cache() {
        let mut net = net(2, 2);
        let ks = keys_on_distinct_partitions(&net, 2);
        let (x, l) = (&ks[0], &ks[1]);
        put(&mut net, cl(0, 0), x, "x");
        // x reaches DC1 but no stabilization: DSV[0] < x.ut there.
        net.deliver_while(server_to_server);
        let c = cl(1, 0);
        assert_eq!(get(&mut net, c, x), Some("x".into()));
        // c writes l depending on x, then reads both in a ROTX. Neither is
        // slice-visible yet; both come from the cache.
        put(&mut net, c, l, "l");
        assert_eq!(net.clients[c.idx()].cache.len(), 2, "x (read) and l (written) are cached");
        assert_eq!(rot(&mut net, c, &[l, x]), vec![Some("l".into()), Some("x".into())]);
        // Another client of the DC, with no cache, gets the older snapshot.
        assert_eq!(rot(&mut net, cl(1, 1), &[l, x]), vec![None, None]);
        // Once stable, the slices return them and the cache empties.
        net.deliver_all();
        stabilize(&mut net);
        assert_eq!(rot(&mut net, c, &[l, x]), vec![Some("l".into()), Some("x".into())]);
        let client = &net.clients[c.idx()];
        assert!(client.cache.is_empty() && client.held.is_empty());
        assert_never_blocked(&net);
    }

    /// The taint case (see [`CsxClient`], deviation 13): a GET of another
    /// client's local write that depends on an unstable remote version taints
    /// the reader. Its ROTX waits at the coordinator until the DSV covers the
    /// taint, then returns a snapshot with everything the reader has seen —
    /// never an older one.
    #[test]
    fn a_tainted_readers_rotx_waits_for_the_taint_and_misses_nothing() {
        let mut net = net(2, 2);
        let ks = keys_on_distinct_partitions(&net, 2);
        let (x, l) = (&ks[0], &ks[1]);
        put(&mut net, cl(0, 0), x, "x");
        net.deliver_while(server_to_server);
        let (writer, reader) = (cl(1, 0), cl(1, 1));
        assert_eq!(get(&mut net, writer, x), Some("x".into()));
        put(&mut net, writer, l, "l");
        assert_eq!(get(&mut net, reader, l), Some("l".into()), "local writes are visible to GET at once");
        put(&mut net, reader, l, "l2"); // depends on l and, through it, on x: held, not cached
        let client = &net.clients[reader.idx()];
        assert!(client.tainted() && client.cache.is_empty() && client.held.contains_key(l));
        net.invoke(reader, Op::Rot { keys: vec![l.clone(), x.clone()] });
        net.deliver_while(op_traffic);
        assert!(net.take_result(reader).is_none(), "a tainted ROTX must wait for the DSV, not return a stale snapshot");
        net.deliver_all();
        stabilize(&mut net);
        net.deliver_while(op_traffic);
        assert_eq!(
            net.take_result(reader),
            Some(OpResult::Rot(vec![Some("l2".into()), Some("x".into())])),
            "after the wait the snapshot holds everything the reader has seen"
        );
        assert!(net.seen.iter().any(|s| matches!(s, Seen::Blocked { what: "rot_taint_wait", .. })));
        assert!(!net.clients[reader.idx()].tainted());
    }

    #[test]
    fn concurrent_writes_to_one_key_in_two_dcs_converge() {
        let mut net = net(2, 2);
        let k = bytes("k");
        // Same physical time at both servers: ut ties, the higher DC id wins.
        put(&mut net, cl(0, 0), &k, "from dc0");
        put(&mut net, cl(1, 0), &k, "from dc1");
        // A later write at DC0 on a faster clock beats both.
        let k2 = bytes("k2");
        let k2_dc0 = net.server_for(DC0, &k2);
        net.clocks[k2_dc0.idx()] += 5_000;
        put(&mut net, cl(1, 1), &k2, "k2 from dc1");
        put(&mut net, cl(0, 1), &k2, "k2 from dc0");
        net.deliver_all();
        // Snapshots converge once every DC0 partition's clock has passed that write.
        net.advance_clocks(10_000);
        stabilize(&mut net);
        for (key, winner) in [(&k, "from dc1"), (&k2, "k2 from dc0")] {
            for dc in [0, 1] {
                assert_eq!(get(&mut net, cl(dc, 0), key), Some(winner.into()));
                assert_eq!(rot(&mut net, cl(dc, 1), &[key]), vec![Some(winner.into())]);
            }
            let (s0, s1) = (net.server_for(DC0, key), net.server_for(DC1, key));
            assert_eq!(latest(&net, s0, key), latest(&net, s1, key));
        }
        assert_never_blocked(&net);
    }

    #[test]
    fn idle_partitions_advance_the_dsv_through_heartbeats() {
        let mut net = net(3, 4);
        stabilize(&mut net);
        let first = net.servers[0].dsv.clone();
        net.advance_clocks(30_000);
        stabilize(&mut net);
        for s in net.servers.iter() {
            assert!(s.dsv.iter().zip(&first).all(|(now, before)| now > before), "{:?} vs {first:?}", s.dsv);
        }
    }

    #[test]
    fn one_dc_with_service_nodes_works_and_the_service_nodes_stay_inert() {
        let mut spec = TopologySpec::full(1, 3);
        spec.services = vec![causeway_core::ServiceSpec { name: "other".into(), per_dc: 1 }];
        let mut net = net_spec(spec, Config::default());
        let service = net.topology.service_nodes(DC0, 0)[0];
        assert!(net.servers[service.idx()].tree.is_none());
        assert!(net.timers.iter().all(|t| t.0 != Dest::Node(service)));
        let ks = keys_on_distinct_partitions(&net, 2);
        put(&mut net, cl(0, 0), &ks[0], "a");
        put(&mut net, cl(0, 0), &ks[1], "b");
        // With M = 1 there are no heartbeats to send; the HLC ticks alone move DSV[0].
        net.advance_clocks(10_000);
        stabilize(&mut net);
        assert!(net.servers.iter().filter(|s| s.tree.is_some()).all(|s| s.dsv[0].l >= 11_000));
        assert_eq!(rot(&mut net, cl(0, 1), &[&ks[0], &ks[1]]), vec![Some("a".into()), Some("b".into())]);
        // A request that reaches a service node by mistake is refused, not served.
        net.queue.push(InFlight {
            from: Dest::Client(cl(0, 1)),
            to: Dest::Node(service),
            msg: Msg::GetReq { key: ks[0].clone(), dsv: vec![Hlc::ZERO] },
        });
        net.deliver_first(|m| m.to == Dest::Node(service));
        assert!(matches!(net.queue.pop().map(|m| m.msg), Some(Msg::GetReply(Err(OpError::BadRequest(_))))));
    }

    #[test]
    fn gc_prunes_old_versions_and_a_snapshot_that_needed_them_aborts() {
        let mut net = net_with(2, 2, Config { gc_grace_us: 50_000, ..Config::default() });
        // DC1's tree: the root serves partition 0, its only child partition 1.
        let dc1: Vec<NodeId> = net.topology.dc_servers(DC1).collect();
        let (root, child) = (dc1[0], dc1[1]);
        let ks = keys_on_distinct_partitions(&net, 2);
        let (kr, kc) =
            if net.topology.partition_of(&ks[0]) == PartitionId(0) { (&ks[0], &ks[1]) } else { (&ks[1], &ks[0]) };
        // The child never hears the DC's stable vector: a coordinator with a stale
        // DSV. (Slice replies then overtake held pushes on the root→child channel;
        // pushes only raise a DSV, so that reordering cannot help the test pass.)
        let stale_child = move |m: &InFlight<Msg>| m.to == Dest::Node(child) && matches!(m.msg, Msg::StablePush { .. });
        let writer = cl(1, 0);
        for v in ["1", "2", "3"] {
            put(&mut net, writer, kr, v);
            net.advance_clocks(1_000);
        }
        stabilize_holding(&mut net, &stale_child);
        // Before GC, the stale snapshot simply predates every version.
        assert_eq!(rot(&mut net, cl(1, 1), &[kc, kr]), vec![None, None]);
        assert_eq!(net.stores[root.idx()].versions(kr).len(), 3);
        net.advance_clocks(60_000);
        stabilize_holding(&mut net, &stale_child);
        assert_eq!(net.stores[root.idx()].versions(kr).len(), 1);
        assert!(net.stores[root.idx()].was_pruned(kr));
        // GETs and current snapshots are unaffected.
        assert_eq!(get(&mut net, cl(1, 1), kr), Some("3".into()));
        assert_eq!(rot(&mut net, writer, &[kr]), vec![Some("3".into())]);
        // The stale snapshot would need a pruned version: it fails, it does not return None.
        let fresh = cl(1, 1);
        net.clients[fresh.idx()] = CausalSpartanX::client(
            &Config::default(),
            ClientCtx { id: fresh, dc: DC1, topology: net.topology.clone() },
        );
        assert_eq!(
            run(&mut net, fresh, Op::Rot { keys: vec![kc.clone(), kr.clone()] }),
            OpResult::Failed(OpError::Aborted("snapshot pruned".into()))
        );
        assert_never_blocked(&net);
    }

    #[test]
    fn malformed_input_is_refused_without_panicking() {
        let mut net = net(2, 2);
        let k = bytes("k");
        let s = net.server_for(DC0, &k);
        let other_dc = net.server_for(DC1, &k);
        let c = Dest::Client(cl(0, 0));
        let bad_ds = {
            let mut ds = DepSet::new();
            ds.raise(DcId(7), Hlc::new(1, 0));
            ds
        };
        let huge_counter = DepSet::single(DC0, Hlc::new(5, u32::MAX));
        let requests = vec![
            Msg::GetReq { key: k.clone(), dsv: vec![] },
            Msg::PutReq { key: k.clone(), value: bytes("v"), ds: bad_ds.clone(), dsv: vec![Hlc::ZERO; 2] },
            Msg::PutReq { key: k.clone(), value: bytes("v"), ds: huge_counter, dsv: vec![Hlc::ZERO; 2] },
            Msg::PutReq { key: k.clone(), value: bytes("v"), ds: DepSet::new(), dsv: vec![Hlc::ZERO; 3] },
            Msg::RotReq { keys: vec![k.clone()], dsv: vec![Hlc::ZERO; 5], ds: DepSet::new(), wait: vec![Hlc::ZERO; 2] },
            Msg::GetReq { key: bytes("not here"), dsv: vec![Hlc::ZERO; 2] },
        ];
        let wrong_partition = net.topology.partition_of(b"not here") != net.topology.partition_of(&k);
        let n = requests.len() - usize::from(!wrong_partition);
        for msg in requests.into_iter().take(n) {
            net.queue.push(InFlight { from: c, to: Dest::Node(s), msg });
            assert!(net.deliver_first(|m| m.to == Dest::Node(s)));
            let reply = net.queue.pop().expect("a reply");
            assert!(
                matches!(
                    reply.msg,
                    Msg::GetReply(Err(OpError::BadRequest(_)))
                        | Msg::PutReply(Err(OpError::BadRequest(_)))
                        | Msg::RotReply(Err(OpError::BadRequest(_)))
                ),
                "{reply:?}"
            );
        }
        // Peer messages that do not fit are dropped.
        let peers = vec![
            (other_dc, Msg::StablePush { dsv: vec![Hlc::MAX] }),
            (
                other_dc,
                Msg::Replicate {
                    key: k.clone(),
                    version: Version { value: bytes("v"), ut: Hlc::new(9, 0), sr: DcId(0), ds: DepSet::new() },
                },
            ),
            (
                other_dc,
                Msg::Replicate {
                    key: k.clone(),
                    version: Version { value: bytes("v"), ut: Hlc::new(9, 0), sr: DC1, ds: bad_ds },
                },
            ),
            (NodeId(999), Msg::Heartbeat { hlc: Hlc::MAX }),
            (other_dc, Msg::SliceReply { rot: 42, slice: Ok(SliceOk { items: vec![], ds: DepSet::new() }) }),
        ];
        for (from, msg) in peers {
            net.queue.push(InFlight { from: Dest::Node(from), to: Dest::Node(s), msg });
            assert!(net.deliver_first(|m| m.to == Dest::Node(s)));
        }
        assert!(net.queue.is_empty());
        assert!(net.stores[s.idx()].latest(&k).is_none());
        assert_eq!(net.servers[s.idx()].vv, vec![Hlc::ZERO; 2]);
        // A slice request from the same DC with a bad sv is answered with an error.
        let same_dc = net.topology.dc_servers(DC0).find(|&n| n != s).unwrap();
        net.queue.push(InFlight {
            from: Dest::Node(same_dc),
            to: Dest::Node(s),
            msg: Msg::SliceReq { rot: 1, keys: vec![k.clone()], sv: vec![] },
        });
        net.deliver_first(|m| m.to == Dest::Node(s));
        assert!(matches!(
            net.queue.pop().map(|m| m.msg),
            Some(Msg::SliceReply { rot: 1, slice: Err(OpError::BadRequest(_)) })
        ));
    }
}
