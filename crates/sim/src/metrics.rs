//! What a run measures, and the report it prints.

pub use causeway_core::summary::Summary;
use causeway_core::{DcId, Key, Op, OpKind, OpResult, write_id_of};
use hdrhistogram::Histogram;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;

pub(crate) use causeway_core::summary::histogram;

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PairVisibility {
    pub from: String,
    pub to: String,
    #[serde(flatten)]
    pub summary: Summary,
    /// Writes measured at the origin that never became visible here before the run ended.
    pub never_visible: u64,
    /// Visibility at each of [`cdf_quantiles`] (not serialised: the
    /// experiment harness reads it in process).
    #[serde(skip)]
    pub cdf: Vec<u64>,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct MessageCount {
    pub count: u64,
    pub bytes: u64,
}

/// Everything a run reports. Serialised as the `--json` output.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SimReport {
    pub scenario: String,
    pub protocol: String,
    pub seed: u64,
    pub dcs: usize,
    pub partitions: usize,
    pub clients: usize,
    /// Virtual time simulated, µs.
    pub simulated_us: u64,
    /// The measurement window, µs.
    pub measured_us: u64,
    pub events: u64,
    pub ops_completed: u64,
    pub ops_failed: u64,
    pub throughput_ops_s: f64,
    /// Keys read or written by the operations completed in the window, per
    /// second (a ROT or WOT of n keys counts n; Lloyd Table 7.6's keys/s).
    /// A key is a row: several columns of one row count once.
    pub throughput_keys_s: f64,
    /// Columns (locations) read or written per second, Lloyd Table 7.6's
    /// columns/s; only when the workload reads or writes several columns
    /// per key (otherwise every key is one column: keys/s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_columns_s: Option<f64>,
    /// Per operation kind, plus `amplified` for whole amplified requests.
    pub latency: BTreeMap<String, Summary>,
    /// Latency at the quantiles of [`CDF_QUANTILES`], per entry of `latency`.
    pub latency_cdf: BTreeMap<String, Vec<u64>>,
    pub visibility: Vec<PairVisibility>,
    /// Every pair's visibility in one distribution (each write once per
    /// remote DC that saw it), and its value at each of [`cdf_quantiles`];
    /// `None` when no write became visible remotely. Not serialised.
    #[serde(skip)]
    pub visibility_all: Option<(Summary, Vec<u64>)>,
    /// Reads (GETs and ROT entries) that returned a version older than one
    /// already acknowledged when the read began, in % of reads.
    pub stale_reads_pct: f64,
    /// For stale reads: how long the newer version had been acknowledged.
    pub staleness: Summary,
    pub blocked: BTreeMap<String, Summary>,
    /// Protocol-specific samples ([`causeway_core::Observation::Sample`]),
    /// e.g. `deps_per_write`; a summary's `_us` fields hold plain values.
    pub samples: BTreeMap<String, Summary>,
    pub messages: BTreeMap<String, MessageCount>,
    pub server_msgs_per_op: f64,
    pub server_bytes_per_op: f64,
    pub client_bytes_per_op: f64,
    /// Server-to-server wire bytes per message that are not user keys or values.
    pub metadata_bytes_per_msg: f64,
    /// Serialised bytes per stored version beyond its value, over every
    /// version held at the end of the run.
    pub metadata_bytes_per_version: f64,
    /// Versions held in all stores at the end of the run.
    pub versions_held: u64,
    /// How busy the busiest server's simulated CPU was over the measurement
    /// window, in % of it: 100 means it never idled (the servers bound the
    /// throughput), well below means the clients did. Only when handling a
    /// message costs CPU time (`[cpu]`); otherwise servers are infinitely
    /// fast and there is no such load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_busy_max_pct: Option<f64>,
    /// Per protocol sample, how busy the busiest server that observed it
    /// was, in % of the window (only when messages cost CPU time): with
    /// `samples`, what a sample's rate costs its servers — the rate over
    /// this fraction is what they would sustain at full load.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub sample_busy_pct: BTreeMap<String, f64>,
    pub trace_hash: String,
}

/// The quantiles `latency_cdf` samples: 0.01 to 0.99 in steps of 0.01, then 0.999.
pub fn cdf_quantiles() -> impl Iterator<Item = f64> {
    (1..100).map(|i| i as f64 / 100.0).chain([0.999])
}

/// Latency at each of [`cdf_quantiles`].
pub fn cdf_of(h: &Histogram<u64>) -> Vec<u64> {
    if h.is_empty() {
        return Vec::new();
    }
    cdf_quantiles().map(|q| h.value_at_quantile(q)).collect()
}

struct PendingWrite {
    origin: DcId,
    at_us: u64,
    seen: u64,
    /// Remote DCs that have not seen it yet; the entry goes when this hits 0.
    remaining: u16,
}

pub(crate) struct Metrics {
    pub from_us: u64,
    pub to_us: u64,
    pub latency: BTreeMap<OpKind, Histogram<u64>>,
    /// Multi-operation requests, by name.
    pub requests: BTreeMap<&'static str, Histogram<u64>>,
    pub completed: u64,
    pub failed: u64,
    /// Keys (rows) of the operations completed in the window.
    pub keys: u64,
    /// Their columns (locations): a row's columns each count.
    pub columns: u64,
    visibility: Vec<Vec<Histogram<u64>>>,
    pending: FxHashMap<u64, PendingWrite>,
    pub blocked: BTreeMap<&'static str, Histogram<u64>>,
    pub samples: BTreeMap<&'static str, Histogram<u64>>,
    pub messages: FxHashMap<&'static str, MessageCount>,
    pub server_msgs: u64,
    pub server_bytes: u64,
    pub server_payload: u64,
    pub client_bytes: u64,
    /// Per key, the last write acknowledged and when the first was; per
    /// write, when the next write to its key was acknowledged. Enough for
    /// staleness at two hash lookups a write and one a read.
    last_acked: FxHashMap<Key, (u64, u64)>,
    superseded_us: FxHashMap<u64, u64>,
    pub reads: u64,
    pub staleness: Histogram<u64>,
    /// Per server, the CPU µs spent in the window.
    pub busy_us: Vec<u64>,
    /// Per sample name, the servers that observed it.
    pub samplers: BTreeMap<&'static str, std::collections::BTreeSet<usize>>,
}

impl Metrics {
    pub fn new(dcs: usize, from_us: u64, to_us: u64) -> Metrics {
        Metrics {
            from_us,
            to_us,
            latency: BTreeMap::new(),
            requests: BTreeMap::new(),
            completed: 0,
            keys: 0,
            columns: 0,
            failed: 0,
            visibility: (0..dcs).map(|_| (0..dcs).map(|_| histogram()).collect()).collect(),
            pending: FxHashMap::default(),
            blocked: BTreeMap::new(),
            samples: BTreeMap::new(),
            messages: FxHashMap::default(),
            server_msgs: 0,
            server_bytes: 0,
            server_payload: 0,
            client_bytes: 0,
            last_acked: FxHashMap::default(),
            superseded_us: FxHashMap::default(),
            reads: 0,
            staleness: histogram(),
            busy_us: Vec::new(),
            samplers: BTreeMap::new(),
        }
    }

    fn in_window(&self, t: u64) -> bool {
        t >= self.from_us && t < self.to_us
    }

    pub fn op_done(&mut self, kind: OpKind, invoke_us: u64, complete_us: u64, failed: bool) {
        if !self.in_window(invoke_us) {
            return;
        }
        if failed {
            self.failed += 1;
            return;
        }
        self.completed += 1;
        let h = self.latency.entry(kind).or_insert_with(histogram);
        let _ = h.record((complete_us - invoke_us).max(1));
    }

    /// The keys (rows) and columns an operation read or wrote, when it
    /// completed in the window.
    pub fn keys_done(&mut self, keys: usize, columns: usize, invoke_us: u64, failed: bool) {
        if self.in_window(invoke_us) && !failed {
            self.keys += keys as u64;
            self.columns += columns as u64;
        }
    }

    /// A request of several operations finished (or one of them failed).
    pub fn request_done(&mut self, name: &'static str, start_us: u64, complete_us: u64, failed: bool) {
        if self.in_window(start_us) && !failed {
            let h = self.requests.entry(name).or_insert_with(histogram);
            let _ = h.record((complete_us - start_us).max(1));
        }
    }

    /// Staleness: a read is stale when some write to its key was
    /// acknowledged before the read began, and after the write it returned
    /// (or at all, when it returned nothing). Ordering writes by
    /// acknowledgement is exact for a key's non-overlapping writes and an
    /// approximation for concurrent ones, which last-writer-wins may order
    /// either way.
    pub fn staleness(&mut self, op: &Op, result: &OpResult, invoke_us: u64, complete_us: u64) {
        match (op, result) {
            (
                Op::Put { .. } | Op::Wot { .. } | Op::Batch { .. } | Op::Txn { .. },
                OpResult::Put | OpResult::Wot | OpResult::Txn(_),
            ) => {
                if let (Op::Txn { reads, .. }, OpResult::Txn(vs)) = (op, result)
                    && self.in_window(invoke_us)
                {
                    for (k, v) in reads.iter().zip(vs) {
                        self.read(k, v.as_deref(), invoke_us);
                    }
                }
                for (key, value) in op.writes() {
                    let Some(id) = write_id_of(value) else { continue };
                    match self.last_acked.get_mut(key) {
                        Some((last, _)) => {
                            self.superseded_us.insert(*last, complete_us);
                            *last = id;
                        }
                        None => {
                            self.last_acked.insert(key.clone(), (id, complete_us));
                        }
                    }
                }
            }
            (Op::Get { key }, OpResult::Get(v)) if self.in_window(invoke_us) => self.read(key, v.as_deref(), invoke_us),
            (Op::Rot { keys }, OpResult::Rot(vs)) if self.in_window(invoke_us) => {
                for (k, v) in keys.iter().zip(vs) {
                    self.read(k, v.as_deref(), invoke_us);
                }
            }
            _ => {}
        }
    }

    fn read(&mut self, key: &Key, value: Option<&[u8]>, invoke_us: u64) {
        self.reads += 1;
        // When the first write after the one returned was acknowledged. A
        // write not yet acknowledged, or still the last, has none.
        let newer_us = match value {
            None => self.last_acked.get(key).map(|&(_, first_us)| first_us),
            Some(v) => write_id_of(v).and_then(|id| self.superseded_us.get(&id).copied()),
        };
        if let Some(newer_us) = newer_us
            && newer_us < invoke_us
        {
            let _ = self.staleness.record((invoke_us - newer_us).max(1));
        }
    }

    /// A version of write `id` became visible at a node of `dc`. At the
    /// origin, `remote_dcs` says how many other DCs store the key.
    pub fn visible(&mut self, id: u64, origin: DcId, dc: DcId, now_us: u64, remote_dcs: u16) {
        if dc == origin {
            if self.in_window(now_us) && remote_dcs > 0 {
                self.pending.entry(id).or_insert(PendingWrite {
                    origin,
                    at_us: now_us,
                    seen: 0,
                    remaining: remote_dcs,
                });
            }
            return;
        }
        if let Some(p) = self.pending.get_mut(&id) {
            let bit = 1u64 << (dc.0 % 64);
            if p.seen & bit == 0 {
                p.seen |= bit;
                let _ = self.visibility[p.origin.idx()][dc.idx()].record((now_us - p.at_us).max(1));
                p.remaining -= 1;
                if p.remaining == 0 {
                    self.pending.remove(&id);
                }
            }
        }
    }

    pub fn blocked(&mut self, what: &'static str, waited_us: u64, now_us: u64) {
        if self.in_window(now_us) {
            let _ = self.blocked.entry(what).or_insert_with(histogram).record(waited_us.max(1));
        }
    }

    /// Server `node` observed sample `what` (any time).
    pub fn sampled_by(&mut self, what: &'static str, node: usize) {
        self.samplers.entry(what).or_default().insert(node);
    }

    pub fn sample(&mut self, what: &'static str, value: u64, now_us: u64) {
        if self.in_window(now_us) {
            let _ = self.samples.entry(what).or_insert_with(histogram).record(value);
        }
    }

    /// Server `node` was busy from `start_us` for `dur_us`: count what of it
    /// falls in the window.
    pub fn busy(&mut self, node: usize, start_us: u64, dur_us: u64) {
        let (a, b) = (start_us.max(self.from_us), (start_us + dur_us).min(self.to_us));
        if b > a {
            if self.busy_us.len() <= node {
                self.busy_us.resize(node + 1, 0);
            }
            self.busy_us[node] += b - a;
        }
    }

    pub fn message(&mut self, kind: &'static str, is_client: bool, bytes: usize, payload: usize, now_us: u64) {
        if !self.in_window(now_us) {
            return;
        }
        let m = self.messages.entry(kind).or_default();
        m.count += 1;
        m.bytes += bytes as u64;
        if is_client {
            self.client_bytes += bytes as u64;
        } else {
            self.server_msgs += 1;
            self.server_bytes += bytes as u64;
            self.server_payload += payload as u64;
        }
    }

    /// Visibility per DC pair, and for each pair the writes never seen
    /// (`expected(origin, dc)` says whether `dc` stores the write's key).
    pub fn visibility_report(&self, names: &[String]) -> Vec<PairVisibility> {
        let m = names.len();
        let mut never = vec![vec![0u64; m]; m];
        for p in self.pending.values() {
            for (d, row) in never[p.origin.idx()].iter_mut().enumerate() {
                if d != p.origin.idx() && p.seen & (1u64 << (d % 64)) == 0 {
                    *row += 1;
                }
            }
        }
        let mut out = Vec::new();
        for a in 0..m {
            for b in 0..m {
                if a != b {
                    out.push(PairVisibility {
                        from: names[a].clone(),
                        to: names[b].clone(),
                        summary: Summary::of(&self.visibility[a][b]),
                        never_visible: never[a][b],
                        cdf: cdf_of(&self.visibility[a][b]),
                    });
                }
            }
        }
        out
    }

    /// Every pair's visibility merged ([`SimReport::visibility_all`]).
    pub fn visibility_all(&self) -> Option<(Summary, Vec<u64>)> {
        let mut all = histogram();
        for h in self.visibility.iter().flatten() {
            all.add(h).expect("histograms of one shape");
        }
        (!all.is_empty()).then(|| (Summary::of(&all), cdf_of(&all)))
    }
}
