//! Scenarios: everything a simulated run needs, read from a TOML file.
//!
//! ```toml
//! name = "three-dc"
//! seed = 7
//! duration_ms = 10_000      # clients issue operations for this long
//! warmup_ms = 1_000         # operations invoked earlier are not measured
//! drain_ms = 2_000          # then the run continues so replication settles
//!
//! [topology]                # causeway_core::TopologySpec
//! dcs = 3
//! partitions = 8
//!
//! [network]
//! rtt_ms = [[0, 80, 80], [80, 0, 160], [80, 160, 0]]
//! intra_dc_us = 250         # one way, inside a DC (client↔server too)
//! jitter_pct = 5            # uniform extra, in % of the link's one-way latency
//!
//! [clocks]
//! skew_us = 1_000           # each node's offset is uniform in [-skew/2, +skew/2]
//! [[clocks.node]]           # overrides for single nodes
//! node = 3
//! offset_us = 10_000
//! jumps = [{ at_us = 2_000_000, step_us = -50_000 }]
//!
//! [cpu]
//! service_us = 0            # CPU time per message a server handles; 0 = infinitely fast
//! us_per_kib = 0.0          # plus this per KiB of the message (metadata costs CPU)
//! [cpu.kind_us.cclo]        # plus this per message of a kind, for one protocol
//! rot_req = 44.0            # (kinds as `Message::kind`; "timer" for timers)
//! [cpu.item_us.eunomiakv]   # plus this per item a message of a kind carries
//! report = 0.8              # (`Message::items`: a batch's updates)
//!
//! [durability]              # the nodes' write-ahead logs (see DurabilitySpec)
//! fsync = "always"          # always | group | never
//! group_us = 1_000          # under "group": sync at least this often while busy
//! sync_us = 0               # how long one sync takes on the disk; 0 = instant
//!
//! [workload]                # see Workload
//! clients_per_dc = 64
//!
//! [protocol]                # handed to the protocol's own Config
//! heartbeat_interval_us = 10_000
//!
//! [[faults]]
//! at_ms = 3_000
//! kind = "cut"              # cut | heal | pause | crash | restart | slow | slow_link | spike | clock_jump
//!                           # a crash may name `at = "after_append" | "after_sync" | "torn_tail"`
//! a = 0
//! b = 1
//! ```

use causeway_core::{ClockJump, ClockModel, Op, TopologySpec};
use serde::{Deserialize, Serialize};
use std::path::Path;
use thiserror::Error;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_name")]
    pub name: String,
    #[serde(default)]
    pub seed: u64,
    pub duration_ms: u64,
    #[serde(default)]
    pub warmup_ms: u64,
    #[serde(default = "default_drain")]
    pub drain_ms: u64,
    pub topology: TopologySpec,
    #[serde(default)]
    pub network: NetworkSpec,
    #[serde(default)]
    pub clocks: ClockSpec,
    #[serde(default)]
    pub cpu: CpuSpec,
    #[serde(default)]
    pub durability: DurabilitySpec,
    #[serde(default)]
    pub workload: Workload,
    /// The protocol's parameters, parsed by the protocol's own `Config`.
    #[serde(default = "empty_table")]
    pub protocol: toml::Table,
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// Scripted sessions (tests and examples): each has a DC and a list of
    /// operations it issues in order, each no earlier than its `at_us`.
    #[serde(default)]
    pub scripted: Vec<ScriptedClient>,
    /// Final reads: this long after the load stops (`duration_ms`), once
    /// replication has had the time to settle, every record of the key
    /// space (`user0` … as the run started) is read in every DC, by
    /// `clients_per_dc` readers per DC, each taking every n-th key. They
    /// are what `causeway check --quiescent-after-ms` (`duration_ms` + this)
    /// judges convergence and eventual visibility on: without them no read
    /// follows a run's last write. Below `drain_ms`, so that they start
    /// before the run ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_reads_after_ms: Option<u64>,
    /// Record every operation for the checker.
    #[serde(default)]
    pub record_history: bool,
    /// A client gives up on an operation after this long (true time) and
    /// records it as failed with [`causeway_core::OpError::TimedOut`], its
    /// outcome unknown; the session then continues as a new client (its
    /// causal context is gone, as the network load generator does). 0 (the
    /// default): clients wait forever, and an operation still waiting at the
    /// end of the run is recorded as pending. Needed with crashes, which
    /// lose the requests in flight to the crashed node.
    #[serde(default)]
    pub client_timeout_ms: u64,
    /// Count bytes per message (costs a size computation per message).
    #[serde(default = "yes")]
    pub count_bytes: bool,
    /// Also report each operation's latency under the number of rounds its
    /// client sent messages in (the client's invocation, and each reply or
    /// timer after which it sent more): `get_1round`, `get_2rounds`,
    /// `get_3plus_rounds`, likewise `rot_`, `put_`, `wot_` (Lloyd Table
    /// 7.4's one- and two-round Eiger reads, told apart without asking the
    /// protocol). A get or ROT whose client noted it `indirected`
    /// ([`causeway_core::ClientEnv::note`]: Eiger's second-round read
    /// answered after a `commit_check`, Table 7.4's "Eiger indirected" row)
    /// goes to `get_indirected` / `rot_indirected` instead of its rounds
    /// name, so each kind's names still partition its operations.
    #[serde(default)]
    pub latency_by_rounds: bool,
    /// Measure read staleness (costs about a tenth of the engine's speed on
    /// a write-heavy run: two hash-map updates per write).
    #[serde(default = "yes")]
    pub measure_staleness: bool,
}

fn default_name() -> String {
    "unnamed".into()
}
fn default_drain() -> u64 {
    2_000
}
fn empty_table() -> toml::Table {
    toml::Table::new()
}
fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// Round-trip times between DCs in ms; square, symmetric is not required.
    /// Empty means every pair is `default_rtt_ms` apart.
    #[serde(default)]
    pub rtt_ms: Vec<Vec<f64>>,
    #[serde(default = "default_rtt")]
    pub default_rtt_ms: f64,
    #[serde(default = "default_intra")]
    pub intra_dc_us: u64,
    #[serde(default)]
    pub jitter_pct: f64,
}

fn default_rtt() -> f64 {
    80.0
}
fn default_intra() -> u64 {
    250
}

impl Default for NetworkSpec {
    fn default() -> Self {
        NetworkSpec { rtt_ms: Vec::new(), default_rtt_ms: default_rtt(), intra_dc_us: default_intra(), jitter_pct: 0.0 }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockSpec {
    /// Width of the uniform random offset given to every server clock.
    #[serde(default)]
    pub skew_us: u64,
    /// Uniform random drift in ±`drift_ppm`.
    #[serde(default)]
    pub drift_ppm: f64,
    #[serde(default)]
    pub node: Vec<NodeClock>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeClock {
    pub node: u32,
    #[serde(default)]
    pub offset_us: i64,
    #[serde(default)]
    pub drift_ppm: f64,
    #[serde(default)]
    pub jumps: Vec<ClockJump>,
}

impl NodeClock {
    pub fn model(&self) -> ClockModel {
        ClockModel { offset_us: self.offset_us, drift_ppm: self.drift_ppm, jumps: self.jumps.clone() }
    }
}

/// When a node's log records become durable, as the network runtime's
/// `[storage] fsync` says: a turn's messages and replies leave the node
/// only once its records are ([`causeway_core::Node`]), so a crash —
/// simulated as a machine's, which loses whatever was not synced — loses
/// nothing that was acknowledged or told to a peer. Under `never` nothing
/// is synced, so that promise does not hold; the simulator then counts a
/// turn's records as on disk when the turn ends (what a process crash, but
/// not a machine's, would leave), and torture does not draw it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DurabilitySpec {
    #[serde(default)]
    pub fsync: FsyncPolicy,
    /// Under `group`: a busy node syncs at least this often; a node whose
    /// inbox is empty at a turn's end syncs at once.
    #[serde(default = "default_group_us")]
    pub group_us: u64,
    /// How long one sync keeps the disk busy: the output of the turns it
    /// covers leaves when it ends, turns served meanwhile append behind it
    /// and are synced together by the next (a write-ahead log's group
    /// commit, with one sync at a time). 0: a sync takes no time, so a
    /// turn's output leaves as its CPU time ends. A latency the papers'
    /// disks had and the default simulator leaves out: Raft-replicated
    /// stores such as NuKV (Roohitavaf, *Consistency for Distributed Data
    /// Stores*, Ch. 4) wait for one at the leader and one at a follower
    /// before a write commits.
    #[serde(default)]
    pub sync_us: u64,
    /// A deliberately broken node core that releases each turn's output
    /// before its records are durable: the crash kinds `after_append` and
    /// `torn_tail` must catch it (the mutant suite runs it).
    #[serde(default)]
    pub mutant_release_before_sync: bool,
}

impl Default for DurabilitySpec {
    fn default() -> Self {
        DurabilitySpec {
            fsync: FsyncPolicy::Always,
            group_us: default_group_us(),
            sync_us: 0,
            mutant_release_before_sync: false,
        }
    }
}

fn default_group_us() -> u64 {
    1_000
}

/// When records are synced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsyncPolicy {
    /// At the end of every turn that logged something.
    #[default]
    Always,
    /// At the end of a turn that leaves the inbox empty, or `group_us` after
    /// the last sync; output waits for it.
    Group,
    /// Never: records are durable against a process crash once written.
    Never,
}

/// Where in a node's turn an armed crash strikes: the node crashes at the
/// end of its next turn that logged something.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrashPoint {
    /// After the records were appended, before the sync: every record not
    /// yet synced is lost, and so is the output waiting for them.
    AfterAppend,
    /// After the sync, before the output left: the records are durable,
    /// the messages and replies never sent (the restarted node resends its
    /// outbox; the replies are lost, the clients time out).
    AfterSync,
    /// Torn tail: after the append, a prefix of the unsynced records
    /// reached the log and the next one only partly (a log drops a partial
    /// last record), the rest not at all.
    TornTail,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuSpec {
    #[serde(default)]
    pub service_us: u64,
    /// Extra CPU time per KiB of the message handled (its wire size), so
    /// that metadata costs: Lloyd attributes COPS-GT's lower throughput
    /// to its dependency lists. 0: size is free.
    #[serde(default)]
    pub us_per_kib: f64,
    /// Extra CPU µs per message of a kind, per protocol (its `NAME`), then
    /// per message kind (`Message::kind`; `"timer"` for timer inputs): what
    /// a handler costs beyond its size, measured on the real state machines
    /// by the bench crate's `rot_microbench` and `eiger_microbench` examples,
    /// as Didona et al., "Okapi/Contrarian: the cost of latency-optimal
    /// read-only transactions", §5 and Lloyd, "Stronger Semantics for
    /// Low-Latency Geo-Replicated Storage", §6 model per-request server
    /// work. Kinds absent cost nothing extra.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub kind_us: std::collections::BTreeMap<String, std::collections::BTreeMap<String, f64>>,
    /// Extra CPU µs per item of a message of a kind, per protocol then per
    /// kind, on top of `kind_us`: the items are
    /// [`causeway_core::Message::items`] (the updates of a batched report
    /// or shipment), so that a batch costs what its updates do
    /// (`eunomia_microbench` measures both parts). Kinds absent cost
    /// nothing per item.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub item_us: std::collections::BTreeMap<String, std::collections::BTreeMap<String, f64>>,
}

/// Key popularity.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Distribution {
    #[default]
    Uniform,
    /// YCSB's scrambled zipfian with `zipfian_constant`.
    Zipfian,
    /// YCSB's hotspot: `hotspotopnfraction` of the operations go to the
    /// first `hotspotdatafraction` of the keys.
    Hotspot,
    /// YCSB's latest: zipfian over recency, the newest insert hottest.
    Latest,
    /// COPS's dynamic workloads (Lloyd §7, Table 7.3): one group of
    /// `keys_per_group` keys per client; a client picks a group from a normal
    /// distribution with `keygroup_variance` centred on its own, then a key
    /// uniformly inside it. `recordcount` is then clients × keys_per_group.
    Keygroup,
}

/// A closed-loop YCSB-style workload. Names follow YCSB where it has one.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    #[serde(default)]
    pub clients_per_dc: u32,
    /// The DCs whose clients run the workload (empty: every DC).
    #[serde(default)]
    pub dcs: Vec<u16>,
    #[serde(default)]
    pub think_time_us: u64,
    #[serde(default = "default_records")]
    pub recordcount: u64,
    /// Requests issued in all (over all clients) before clients stop; 0
    /// means until `duration_ms`.
    #[serde(default)]
    pub operationcount: u64,
    #[serde(default = "half")]
    pub readproportion: f64,
    #[serde(default = "half")]
    pub updateproportion: f64,
    /// PUTs to fresh keys (`user<recordcount + n>`), as YCSB inserts.
    #[serde(default)]
    pub insertproportion: f64,
    /// Read-only transactions.
    #[serde(default)]
    pub rotproportion: f64,
    /// Keys per ROT (distinct).
    #[serde(default = "default_rot")]
    pub rot_size: usize,
    /// Partitions each ROT spans (0: wherever its keys fall). When set,
    /// partitions are chosen first (uniformly), then keys inside them by
    /// a zipfian over each partition's keys under `zipfian`, uniformly under
    /// the other distributions. A WOT
    /// spans `min(rot_partitions, wot_size)` by the same rule.
    #[serde(default)]
    pub rot_partitions: u32,
    /// Write-only transactions (atomic multi-key writes), for protocols that
    /// offer them; the others fail them as unsupported.
    #[serde(default)]
    pub wotproportion: f64,
    /// Keys per WOT (distinct).
    #[serde(default = "default_rot")]
    pub wot_size: usize,
    /// Non-atomic batches (`Op::Batch`: `wot_size` keys placed as a WOT's,
    /// written in parallel, no atomicity), for protocols that offer them;
    /// the others fail them as unsupported. Lloyd's "normal (2)" writes.
    #[serde(default)]
    pub batchproportion: f64,
    /// Read-write transactions in Spirovska et al.'s shape: `txn_reads` reads from
    /// one snapshot, then `txn_writes` atomic writes (PaRiS: 19 + 1 for its
    /// 95:5 mix, 10 + 10 for 50:50). Their keys follow `rot_partitions` and
    /// `local_txn_ratio` like a ROT's.
    #[serde(default)]
    pub txnproportion: f64,
    /// Interactive transactions ([`causeway_core::OpKind::Interactive`]):
    /// START, a first read round of half the `txn_reads` keys, a second
    /// round whose keys depend on what the first returned (and that reads
    /// back one of the transaction's own writes), then a COMMIT of
    /// `txn_writes` writes. Recorded as one transaction.
    #[serde(default)]
    pub interactiveproportion: f64,
    /// The client's think time between the steps of an interactive
    /// transaction, µs (a user deciding what to read or write next; its
    /// snapshot stays open meanwhile).
    #[serde(default)]
    pub interactive_think_us: u64,
    /// The session guarantees every GET and PUT asks for
    /// ([`causeway_core::Levels`]; a `[workload.levels]` table with `read`
    /// and `write`), as Roohitavaf's Table 4.1 cases fix them for a run.
    /// Unset: operations name none and the protocol's own promise holds.
    #[serde(default)]
    pub levels: Option<causeway_core::Levels>,
    /// Each GET and PUT asks for levels drawn uniformly from the four of
    /// its kind instead (overrides `levels`), so that a history holds
    /// every guarantee next to every other.
    #[serde(default)]
    pub random_levels: bool,
    /// Before each request, the probability that the session moves to
    /// another DC (each equally likely) where the protocol lets sessions
    /// move ([`causeway_core::Protocol::MIGRATES`]; refused elsewhere:
    /// the scenario is then an error). Default 0: sticky sessions.
    #[serde(default)]
    pub migrate_proportion: f64,
    /// For each GET, the probability that it names a checking group drawn
    /// uniformly from the protocol's (ACCF's `GET(k, cg)`, Roohitavaf
    /// Alg 7.1; [`causeway_core::Client::set_checking_group`]); the other
    /// GETs name none. Refused for a protocol without checking groups
    /// ([`causeway_core::Protocol::checking_groups`]: the scenario is then
    /// an error). Default 0.
    #[serde(default)]
    pub checking_group_proportion: f64,
    #[serde(default = "default_txn_reads")]
    pub txn_reads: usize,
    #[serde(default = "default_txn_writes")]
    pub txn_writes: usize,
    /// Under partial replication, the fraction of transactions whose partitions are
    /// all stored in the client's DC (the rest reach at least one remote
    /// partition). Unset: keys fall where they fall.
    #[serde(default)]
    pub local_txn_ratio: Option<f64>,
    /// DKVF's amplified insert: when ≥ 1, every update or insert becomes a
    /// request of this many PUTs, round-robin over partitions, whose
    /// end-to-end latency is reported as `amplified`.
    #[serde(default)]
    pub amplification: u32,
    #[serde(default)]
    pub requestdistribution: Distribution,
    #[serde(default = "default_zipf")]
    pub zipfian_constant: f64,
    #[serde(default = "default_hot_data")]
    pub hotspotdatafraction: f64,
    #[serde(default = "default_hot_opn")]
    pub hotspotopnfraction: f64,
    #[serde(default = "default_group_keys")]
    pub keys_per_group: u64,
    #[serde(default = "one_f")]
    pub keygroup_variance: f64,
    /// Value size in bytes (at least 10, the write tag).
    #[serde(default = "default_field")]
    pub fieldlength: usize,
    /// A discrete distribution of value sizes instead of `fieldlength`:
    /// each written value's size is `fieldlength_values[i]` with
    /// probability proportional to `fieldlength_weights[i]` (Lloyd §7.3.6's
    /// TAO workload draws value sizes from measured distributions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fieldlength_values: Vec<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fieldlength_weights: Vec<f64>,
    /// A discrete distribution of keys per ROT instead of `rot_size`, as
    /// `fieldlength_values`/`_weights` (TAO's keys per read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rot_size_values: Vec<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rot_size_weights: Vec<f64>,
    /// Keys per update: when > 1, an update writes this many distinct keys
    /// (placed as a WOT's, by `rot_partitions`) as a request of independent
    /// PUTs issued one after another, reported as `update_batch` (a
    /// non-atomic multi-key write sent key by key; `batchproportion` sends
    /// one as a single `Op::Batch`). Each PUT counts as an operation.
    #[serde(default = "one_usize")]
    pub update_size: usize,
    /// YCSB's load phase: before its first operation, each workload client
    /// PUTs its share of the `recordcount` keys (key i goes to client
    /// i mod clients), so that reads find values of the workload's sizes.
    /// Runs during the warm-up, which must be long enough to cover it.
    #[serde(default)]
    pub preload: bool,
    /// Columns per key for reads (Lloyd's dissertation, Table 7.5: 1–32,
    /// default 5): every key a read names is a row, and the read reads
    /// this many of its columns — column 0 is the row's default location
    /// (the plain key, [`causeway_core::column`]), column `i` > 0 is
    /// `row:default:c<i>`. A row lives on one partition, so a protocol's
    /// per-server read request carries all of a row's columns (Cassandra's
    /// `multiget_slice` names a row's columns in one request). A `get` of
    /// several columns becomes a read-only transaction over them. 1: plain
    /// keys, the key-value workload unchanged.
    #[serde(default = "one_usize", skip_serializing_if = "is_one")]
    pub columns_per_read: usize,
    /// Columns per key for writes (Table 7.5: 1–32, default 5): every key
    /// a write names is a row, and the write writes this many of its
    /// columns, each its own value of the workload's size; a PUT of several
    /// columns becomes one `Op::Batch` on the row's server (Cassandra's
    /// `batch_mutate` of one row's columns), a WOT's or a batch's keys
    /// each this many locations. The load phase writes every row's
    /// `max(columns_per_read, columns_per_write)` columns. Not applied to
    /// DKVF's amplified inserts. 1: plain keys.
    #[serde(default = "one_usize", skip_serializing_if = "is_one")]
    pub columns_per_write: usize,
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

/// The most columns per key a workload reads or writes: four times Lloyd's
/// Table 7.5 range (1–32), well inside what one request may carry.
pub const MAX_COLUMNS_PER_KEY: usize = 128;

fn one_usize() -> usize {
    1
}

fn default_records() -> u64 {
    10_000
}
fn half() -> f64 {
    0.5
}
fn default_rot() -> usize {
    4
}
fn default_txn_reads() -> usize {
    19
}
fn default_txn_writes() -> usize {
    1
}
fn default_zipf() -> f64 {
    0.99
}
fn default_field() -> usize {
    64
}
fn default_hot_data() -> f64 {
    0.2
}
fn default_hot_opn() -> f64 {
    0.8
}
fn default_group_keys() -> u64 {
    512
}
fn one_f() -> f64 {
    1.0
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            clients_per_dc: 0,
            dcs: Vec::new(),
            think_time_us: 0,
            recordcount: default_records(),
            operationcount: 0,
            readproportion: half(),
            updateproportion: half(),
            insertproportion: 0.0,
            rotproportion: 0.0,
            rot_size: default_rot(),
            rot_partitions: 0,
            wotproportion: 0.0,
            wot_size: default_rot(),
            batchproportion: 0.0,
            txnproportion: 0.0,
            interactiveproportion: 0.0,
            interactive_think_us: 0,
            levels: None,
            random_levels: false,
            migrate_proportion: 0.0,
            checking_group_proportion: 0.0,
            txn_reads: default_txn_reads(),
            txn_writes: default_txn_writes(),
            local_txn_ratio: None,
            amplification: 0,
            requestdistribution: Distribution::Uniform,
            zipfian_constant: default_zipf(),
            hotspotdatafraction: default_hot_data(),
            hotspotopnfraction: default_hot_opn(),
            keys_per_group: default_group_keys(),
            keygroup_variance: one_f(),
            fieldlength: default_field(),
            fieldlength_values: Vec::new(),
            fieldlength_weights: Vec::new(),
            rot_size_values: Vec::new(),
            rot_size_weights: Vec::new(),
            update_size: 1,
            preload: false,
            columns_per_read: 1,
            columns_per_write: 1,
        }
    }
}

impl Workload {
    /// Whether clients in `dc` run the workload.
    pub fn runs_in(&self, dc: causeway_core::DcId) -> bool {
        self.dcs.is_empty() || self.dcs.contains(&dc.0)
    }

    /// How many clients run the workload.
    pub fn clients(&self, topology: &causeway_core::Topology) -> u64 {
        self.clients_per_dc as u64 * topology.dc_ids().filter(|d| self.runs_in(*d)).count() as u64
    }

    /// Check the workload against the topology; the message names the field.
    pub fn validate(&self, topology: &causeway_core::Topology) -> Result<(), String> {
        let props = [
            self.readproportion,
            self.updateproportion,
            self.insertproportion,
            self.rotproportion,
            self.wotproportion,
            self.batchproportion,
            self.txnproportion,
        ];
        let total: f64 = props.iter().sum();
        if total.is_nan() || total <= 0.0 || props.iter().any(|p| *p < 0.0) {
            return Err("readproportion, updateproportion, insertproportion, rotproportion, wotproportion, \
                        batchproportion and txnproportion must be ≥ 0 and not all 0"
                .into());
        }
        if !(0.0..=1.0).contains(&self.migrate_proportion) {
            return Err(format!("migrate_proportion must be between 0 and 1, got {}", self.migrate_proportion));
        }
        if !(0.0..=1.0).contains(&self.checking_group_proportion) {
            return Err(format!(
                "checking_group_proportion must be between 0 and 1, got {}",
                self.checking_group_proportion
            ));
        }
        if let Some(d) = self.dcs.iter().find(|d| **d as usize >= topology.dcs()) {
            return Err(format!("dcs names DC {d}, but the topology has {} DCs", topology.dcs()));
        }
        let keys = match self.requestdistribution {
            Distribution::Keygroup => {
                if self.keys_per_group == 0 {
                    return Err("keys_per_group must be at least 1".into());
                }
                if !(self.keygroup_variance >= 0.0 && self.keygroup_variance.is_finite()) {
                    return Err(format!("keygroup_variance must be ≥ 0, got {}", self.keygroup_variance));
                }
                self.keys_per_group * self.clients(topology)
            }
            _ => self.recordcount,
        };
        if keys == 0 {
            return Err("recordcount must be at least 1".into());
        }
        for (name, values, weights) in [
            ("fieldlength", &self.fieldlength_values, &self.fieldlength_weights),
            ("rot_size", &self.rot_size_values, &self.rot_size_weights),
        ] {
            if values.len() != weights.len() {
                return Err(format!(
                    "{name}_values has {} entries and {name}_weights {}: they must pair up",
                    values.len(),
                    weights.len()
                ));
            }
            let total: f64 = weights.iter().sum();
            if !values.is_empty() && (weights.iter().any(|w| !(*w >= 0.0 && w.is_finite())) || total <= 0.0) {
                return Err(format!("{name}_weights must be finite, ≥ 0 and not all 0"));
            }
        }
        let rot_sizes: Vec<usize> =
            if self.rot_size_values.is_empty() { vec![self.rot_size] } else { self.rot_size_values.clone() };
        if self.rotproportion > 0.0 && rot_sizes.iter().any(|&n| n == 0 || n as u64 > keys) {
            return Err(format!("rot_size must be between 1 and the number of keys ({keys}), got {rot_sizes:?}"));
        }
        if self.update_size == 0 || (self.updateproportion > 0.0 && self.update_size as u64 > keys) {
            return Err(format!(
                "update_size must be between 1 and the number of keys ({keys}), got {}",
                self.update_size
            ));
        }
        for (name, n) in [("columns_per_read", self.columns_per_read), ("columns_per_write", self.columns_per_write)] {
            if !(1..=MAX_COLUMNS_PER_KEY).contains(&n) {
                return Err(format!("{name} must be between 1 and {MAX_COLUMNS_PER_KEY}, got {n}"));
            }
        }
        if (self.wotproportion > 0.0 || self.batchproportion > 0.0)
            && (self.wot_size == 0 || self.wot_size as u64 > keys)
        {
            return Err(format!("wot_size must be between 1 and the number of keys ({keys}), got {}", self.wot_size));
        }
        if self.txnproportion > 0.0
            && (self.txn_reads as u64 > keys || self.txn_writes as u64 > keys || self.txn_reads + self.txn_writes == 0)
        {
            return Err(format!(
                "txn_reads and txn_writes must each be at most the number of keys ({keys}) and not both 0, got {} and {}",
                self.txn_reads, self.txn_writes
            ));
        }
        let max_rot = rot_sizes.iter().copied().max().unwrap_or(1).max(1);
        if self.rot_partitions as usize > topology.partitions() || self.rot_partitions as usize > max_rot {
            return Err(format!(
                "rot_partitions must be at most the partitions ({}) and rot_size ({}), got {}",
                topology.partitions(),
                max_rot,
                self.rot_partitions
            ));
        }
        if let Some(r) = self.local_txn_ratio
            && !(0.0..=1.0).contains(&r)
        {
            return Err(format!("local_txn_ratio must be in [0, 1], got {r}"));
        }
        let zipf = matches!(self.requestdistribution, Distribution::Zipfian | Distribution::Latest);
        if zipf && !(self.zipfian_constant > 0.0 && self.zipfian_constant < 1.0) {
            return Err("zipfian_constant must be in (0, 1)".into());
        }
        for (name, f) in
            [("hotspotdatafraction", self.hotspotdatafraction), ("hotspotopnfraction", self.hotspotopnfraction)]
        {
            if !(0.0..=1.0).contains(&f) {
                return Err(format!("{name} must be in [0, 1], got {f}"));
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedClient {
    pub dc: u16,
    pub ops: Vec<ScriptedOp>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedOp {
    #[serde(default)]
    pub at_us: u64,
    pub op: Op,
    /// Issue the operation from this DC: the session moves there first
    /// (client migration, [`causeway_core::Client::migrate`]) and stays.
    /// A protocol that keeps sessions sticky fails the operation with
    /// [`causeway_core::OpError::Sticky`] instead, sending nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_dc: Option<u16>,
    /// The checking group this GET names, for this operation only (ACCF's
    /// `GET(k, cg)`, Roohitavaf Alg 7.1, numbered as the protocol's
    /// `checking` grouping yields them;
    /// [`causeway_core::Client::set_checking_group`]). A group the
    /// protocol lacks fails the operation with
    /// [`causeway_core::OpError::CheckingGroup`], sending nothing. GETs
    /// only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checking_group: Option<u16>,
}

/// A fault, applied at `at_ms` of true time (or `at_us` for precision).
/// (Unknown fields are caught by [`FaultKind`]: serde cannot deny them on a
/// struct with a flattened member.)
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fault {
    #[serde(default)]
    pub at_ms: u64,
    #[serde(default)]
    pub at_us: u64,
    #[serde(flatten)]
    pub kind: FaultKind,
}

impl Fault {
    pub fn time_us(&self) -> u64 {
        self.at_ms * 1_000 + self.at_us
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum FaultKind {
    /// Cut the links between DCs `a` and `b`: messages wait (reliable
    /// channels resend) until the heal.
    Cut {
        a: u16,
        b: u16,
    },
    Heal {
        a: u16,
        b: u16,
    },
    /// The node handles nothing for `for_ms`; its inputs queue.
    Pause {
        node: u32,
        for_ms: u64,
    },
    /// The node crashes: all its volatile state (server fields, timers,
    /// queued inputs) is lost. Peer links are reliable FIFO with a durable
    /// outbox, as in the network runtime: messages to the crashed node wait
    /// at their senders and are delivered, in order, after it restarts;
    /// messages it sent before the crash are not lost. Client requests to it
    /// are lost (clients need `client_timeout_ms` not to wait forever). With
    /// `for_ms` > 0 it restarts after that long (as by a `restart` fault);
    /// with 0 (the default) it stays down unless a `restart` fault follows.
    ///
    /// With `at`, the crash is armed rather than immediate: it strikes at
    /// the end of the node's next turn that logged something, at the
    /// [`CrashPoint`] named (between the log's append and sync, between
    /// the sync and the output, or tearing the log's tail).
    Crash {
        node: u32,
        #[serde(default)]
        for_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<CrashPoint>,
    },
    /// A crashed node restarts from what it journaled: a fresh server over
    /// the store's versions and durable metadata, as the network runtime
    /// rebuilds one from its write-ahead log, then `on_start`, then the
    /// peer messages that waited for it. A no-op on a running node.
    Restart {
        node: u32,
    },
    /// Every message the node sends takes `extra_ms` longer (Roohitavaf's
    /// slowed partition). 0 restores it.
    Slow {
        node: u32,
        extra_ms: u64,
    },
    /// Messages from node `from` to node `to` take `extra_ms` longer (a slow
    /// replication path that leaves client traffic alone). 0 restores it.
    SlowLink {
        from: u32,
        to: u32,
        extra_ms: u64,
    },
    /// Messages between DCs `a` and `b` take `extra_ms` longer for `for_ms`.
    Spike {
        a: u16,
        b: u16,
        extra_ms: u64,
        for_ms: u64,
    },
    /// The node's clock steps by `step_us` (negative: backwards).
    ClockJump {
        node: u32,
        step_us: i64,
    },
}

#[derive(Debug, Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("scenario {path} is not valid: {source}")]
    Parse { path: String, source: Box<toml::de::Error> },
    #[error("scenario topology: {0}")]
    Topology(#[from] causeway_core::TopologyError),
    #[error("scenario network.rtt_ms must be {dcs}×{dcs} with non-negative entries")]
    Rtt { dcs: usize },
    #[error("scenario workload: {0}")]
    Workload(String),
    #[error("scenario [protocol] for {protocol}: {message}")]
    Protocol { protocol: String, message: String },
    #[error("scenario fault #{index}: {message}")]
    Fault { index: usize, message: String },
    #[error("scenario clocks.node: node {0} is not in the topology")]
    ClockNode(u32),
    #[error("scenario cpu.us_per_kib must be a finite number ≥ 0, got {0}")]
    CpuPerKib(f64),
    #[error("scenario cpu.kind_us.{0}.{1} must be a finite number ≥ 0, got {2}")]
    CpuKind(String, String, f64),
    #[error("scenario scripted client #{index}: dc {dc} is not in the topology")]
    ScriptDc { index: usize, dc: u16 },
    #[error("scenario scripted client #{index}: checking_group is for GETs, not {kind} operations")]
    ScriptCheckingGroup { index: usize, kind: String },
    #[error(
        "scenario final_reads_after_ms = {after_ms} must be below drain_ms = {drain_ms}: the final reads start \
         that long after the load, and the run ends drain_ms after it"
    )]
    FinalReads { after_ms: u64, drain_ms: u64 },
}

impl Scenario {
    pub fn from_toml_str(text: &str, path: &str) -> Result<Scenario, ScenarioError> {
        toml::from_str(text).map_err(|e| ScenarioError::Parse { path: path.to_string(), source: Box::new(e) })
    }

    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::Io { path: p.clone(), source: e })?;
        Self::from_toml_str(&text, &p)
    }

    /// A scenario with no clients: the starting point for tests and code.
    pub fn new(topology: TopologySpec, duration_ms: u64) -> Scenario {
        Scenario {
            name: default_name(),
            seed: 0,
            duration_ms,
            warmup_ms: 0,
            drain_ms: default_drain(),
            topology,
            network: NetworkSpec::default(),
            clocks: ClockSpec::default(),
            cpu: CpuSpec::default(),
            durability: DurabilitySpec::default(),
            workload: Workload::default(),
            protocol: toml::Table::new(),
            faults: Vec::new(),
            scripted: Vec::new(),
            final_reads_after_ms: None,
            record_history: false,
            client_timeout_ms: 0,
            count_bytes: true,
            latency_by_rounds: false,
            measure_staleness: true,
        }
    }

    /// One-way latency matrix in µs, validated.
    pub fn one_way_us(&self) -> Result<Vec<Vec<u64>>, ScenarioError> {
        let m = self.topology.dcs as usize;
        let mut out = vec![vec![0u64; m]; m];
        if self.network.rtt_ms.is_empty() {
            for (i, row) in out.iter_mut().enumerate() {
                for (j, x) in row.iter_mut().enumerate() {
                    *x = if i == j { self.network.intra_dc_us } else { (self.network.default_rtt_ms * 500.0) as u64 };
                }
            }
            return Ok(out);
        }
        if self.network.rtt_ms.len() != m || self.network.rtt_ms.iter().any(|r| r.len() != m) {
            return Err(ScenarioError::Rtt { dcs: m });
        }
        for (i, (row, rtts)) in out.iter_mut().zip(&self.network.rtt_ms).enumerate() {
            for (j, (x, &r)) in row.iter_mut().zip(rtts).enumerate() {
                if !(r >= 0.0 && r.is_finite()) {
                    return Err(ScenarioError::Rtt { dcs: m });
                }
                *x = if i == j { self.network.intra_dc_us } else { (r * 500.0).round() as u64 };
            }
        }
        Ok(out)
    }

    /// Check everything that does not depend on the protocol.
    pub fn validate(&self) -> Result<causeway_core::Topology, ScenarioError> {
        let topology = causeway_core::Topology::new(self.topology.clone())?;
        self.one_way_us()?;
        if !(self.cpu.us_per_kib >= 0.0 && self.cpu.us_per_kib.is_finite()) {
            return Err(ScenarioError::CpuPerKib(self.cpu.us_per_kib));
        }
        for (p, kinds) in &self.cpu.kind_us {
            if let Some((k, v)) = kinds.iter().find(|(_, v)| !(**v >= 0.0 && v.is_finite())) {
                return Err(ScenarioError::CpuKind(p.clone(), k.clone(), *v));
            }
        }
        let w = &self.workload;
        if w.clients_per_dc > 0 {
            w.validate(&topology).map_err(ScenarioError::Workload)?;
        }
        let m = topology.dcs() as u16;
        let n = topology.nodes() as u32;
        for (index, f) in self.faults.iter().enumerate() {
            let bad = |message: String| Err(ScenarioError::Fault { index, message });
            match f.kind {
                FaultKind::Cut { a, b } | FaultKind::Heal { a, b } | FaultKind::Spike { a, b, .. } => {
                    if a >= m || b >= m || a == b {
                        return bad(format!("DCs {a} and {b} must be two different DCs below {m}"));
                    }
                }
                FaultKind::Pause { node, .. }
                | FaultKind::Crash { node, .. }
                | FaultKind::Restart { node }
                | FaultKind::Slow { node, .. }
                | FaultKind::ClockJump { node, .. } => {
                    if node >= n {
                        return bad(format!("node {node} is not in the topology (it has {n} nodes)"));
                    }
                }
                FaultKind::SlowLink { from, to, .. } => {
                    if from >= n || to >= n || from == to {
                        return bad(format!("nodes {from} and {to} must be two different nodes below {n}"));
                    }
                }
            }
        }
        for c in &self.clocks.node {
            if c.node >= n {
                return Err(ScenarioError::ClockNode(c.node));
            }
        }
        for (index, s) in self.scripted.iter().enumerate() {
            if s.dc >= m {
                return Err(ScenarioError::ScriptDc { index, dc: s.dc });
            }
            if let Some(dc) = s.ops.iter().filter_map(|o| o.from_dc).find(|&d| d >= m) {
                return Err(ScenarioError::ScriptDc { index, dc });
            }
            if let Some(o) = s.ops.iter().find(|o| o.checking_group.is_some() && !matches!(o.op, Op::Get { .. })) {
                return Err(ScenarioError::ScriptCheckingGroup { index, kind: o.op.kind().name().into() });
            }
        }
        if let Some(after_ms) = self.final_reads_after_ms.filter(|&a| a >= self.drain_ms) {
            return Err(ScenarioError::FinalReads { after_ms, drain_ms: self.drain_ms });
        }
        Ok(topology)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_scenario() {
        let s = Scenario::from_toml_str(
            r#"
            name = "t"
            seed = 3
            duration_ms = 100
            [topology]
            dcs = 2
            partitions = 2
            [network]
            rtt_ms = [[0, 10], [10, 0]]
            [clocks]
            skew_us = 100
            [[clocks.node]]
            node = 1
            offset_us = -5
            jumps = [{ at_us = 10, step_us = -3 }]
            [workload]
            clients_per_dc = 2
            requestdistribution = "zipfian"
            [protocol]
            anything = 1
            [[faults]]
            at_ms = 5
            kind = "cut"
            a = 0
            b = 1
            [[scripted]]
            dc = 1
            ops = [{ at_us = 5, op = { get = { key = [107] } } }, { op = { get = { key = [107] } }, checking_group = 1 }]
            "#,
            "t.toml",
        )
        .unwrap();
        s.validate().unwrap();
        assert_eq!(s.one_way_us().unwrap()[0][1], 5_000);
        assert!(matches!(s.faults[0].kind, FaultKind::Cut { a: 0, b: 1 }));
        assert_eq!(s.scripted[0].ops.iter().map(|o| o.checking_group).collect::<Vec<_>>(), [None, Some(1)]);
    }

    #[test]
    fn final_reads_read_every_key_in_every_dc_after_the_load() {
        let mut s = Scenario::new(TopologySpec::full(2, 1), 1_000);
        s.workload.clients_per_dc = 3;
        s.workload.recordcount = 10;
        assert!(s.final_readers(6).is_empty());
        s.final_reads_after_ms = Some(500);
        let readers = s.final_readers(6);
        assert_eq!(readers.len(), 2 * 3);
        for dc in 0..2 {
            let mut keys: Vec<_> = readers
                .iter()
                .filter(|r| r.dc == dc)
                .flat_map(|r| {
                    r.ops.iter().map(|o| match &o.op {
                        Op::Get { key } => key.clone(),
                        other => panic!("a final read is a get, not {other:?}"),
                    })
                })
                .collect();
            keys.sort();
            keys.dedup();
            assert_eq!(keys.len(), 10, "DC {dc} reads every key once");
        }
        assert!(readers.iter().all(|r| r.ops[0].at_us == 1_500_000 && r.ops[1..].iter().all(|o| o.at_us == 0)));
        s.final_reads_after_ms = Some(s.drain_ms);
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("final_reads_after_ms") && e.contains("drain_ms"), "{e}");
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let e = Scenario::from_toml_str("duration_ms = 1\n[topology]\ndcs = 2\npartitions = 1\nbogus = 1\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.toml") && e.contains("bogus"), "{e}");
        let mut s = Scenario::new(TopologySpec::full(2, 1), 10);
        s.network.rtt_ms = vec![vec![0.0, 1.0]];
        assert!(matches!(s.validate(), Err(ScenarioError::Rtt { dcs: 2 })));
        let mut s = Scenario::new(TopologySpec::full(2, 1), 10);
        s.faults.push(Fault { at_ms: 0, at_us: 0, kind: FaultKind::Crash { node: 9, for_ms: 0, at: None } });
        assert!(s.validate().unwrap_err().to_string().contains("node 9"));
        let e = Scenario::from_toml_str(
            "duration_ms = 1\n[topology]\ndcs = 2\npartitions = 1\n[[faults]]\nkind = \"cut\"\na = 0\nb = 1\nc = 2\n",
            "f.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`c`"), "{e}");
    }
}
