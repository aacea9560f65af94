//! What a run measures, and the report it prints.

pub use causeway_core::summary::Summary;
use causeway_core::{DcId, OpKind};
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
    pub latency: BTreeMap<String, Summary>,
    pub visibility: Vec<PairVisibility>,
    pub blocked: BTreeMap<String, Summary>,
    pub messages: BTreeMap<String, MessageCount>,
    pub server_msgs_per_op: f64,
    pub server_bytes_per_op: f64,
    pub client_bytes_per_op: f64,
    pub trace_hash: String,
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
    pub completed: u64,
    pub failed: u64,
    visibility: Vec<Vec<Histogram<u64>>>,
    pending: FxHashMap<u64, PendingWrite>,
    pub blocked: BTreeMap<&'static str, Histogram<u64>>,
    pub messages: FxHashMap<&'static str, MessageCount>,
    pub server_msgs: u64,
    pub server_bytes: u64,
    pub client_bytes: u64,
}

impl Metrics {
    pub fn new(dcs: usize, from_us: u64, to_us: u64) -> Metrics {
        Metrics {
            from_us,
            to_us,
            latency: BTreeMap::new(),
            completed: 0,
            failed: 0,
            visibility: (0..dcs).map(|_| (0..dcs).map(|_| histogram()).collect()).collect(),
            pending: FxHashMap::default(),
            blocked: BTreeMap::new(),
            messages: FxHashMap::default(),
            server_msgs: 0,
            server_bytes: 0,
            client_bytes: 0,
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

    pub fn message(&mut self, kind: &'static str, is_client: bool, bytes: usize, now_us: u64) {
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
                    });
                }
            }
        }
        out
    }
}
