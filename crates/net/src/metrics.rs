//! Per-node metrics, served as `GET /metrics` by [`crate::http`].
//!
//! The metrics are `prometheus-client` counters, gauges and histograms (the
//! Prometheus project's own Rust client), registered once per node; the
//! protocol thread and the connection tasks update them without locks
//! (histograms take a short one).
//!
//! Names follow Prometheus conventions: durations in seconds as histograms
//! (`_seconds_bucket`, `_sum`, `_count`), counters with `_total`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A request or message kind (`put_req`, `get_req`, …).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Kind {
    pub kind: &'static str,
}

/// The DC a replicated version came from.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FromDc {
    pub from_dc: u16,
}

/// A destination node.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct To {
    pub to: u32,
}

/// Why a connection or request was refused.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Reason {
    pub reason: &'static str,
}

/// A Redis front-door command (`get`, `mset`, … or `other`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Command {
    pub command: &'static str,
}

/// A protocol's sample name (`deps_per_write`, …).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct What {
    pub what: &'static str,
}

type F64Gauge = Gauge<f64, AtomicU64>;
type F64Counter = Counter<f64, AtomicU64>;
type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Visibility: 1 ms to ~16 s, doubling.
fn visibility_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1e-3, 2.0, 15))
}

/// Request latencies: 50 µs to ~6.5 s, doubling.
fn request_buckets() -> Histogram {
    Histogram::new(exponential_buckets(50e-6, 2.0, 18))
}

pub struct NodeMetrics {
    registry: Registry,
    /// Client requests handled, by message kind.
    pub requests: Family<Kind, Counter>,
    /// Time from a client request's arrival to its reply's release, by the
    /// request's kind (includes any wait inside the server and the log sync).
    pub request_seconds: HistogramFamily<Kind>,
    /// Remote versions' visibility latency by origin DC, estimated as this
    /// node's clock at visibility minus the version's origin timestamp
    /// (skew included).
    pub visibility_seconds: HistogramFamily<FromDc>,
    /// The clock minus the latest stable time the protocol reported.
    pub stable_lag_seconds: F64Gauge,
    pub peer_in: Counter,
    pub peer_out: Counter,
    /// Unacknowledged messages per destination: the replication queue depth
    /// (one gauge per node, handed to its link).
    pub peer_depth: Vec<Gauge>,
    /// Of those, how many wait in the link's spill file rather than in
    /// memory (the destination is away or slow).
    pub peer_spilled: Vec<Gauge>,
    pub local_writes: Counter,
    pub remote_visible: Counter,
    pub blocked: Counter,
    pub blocked_seconds: F64Counter,
    /// Protocol samples, by name: how many, and their sum.
    pub samples: Family<What, Counter>,
    pub sample_sums: Family<What, Counter>,
    pub versions: Gauge,
    pub keys: Gauge,
    pub wal_bytes: Gauge,
    /// Bytes in the latest snapshot (the log compacted), 0 before the first.
    pub snapshot_bytes: Gauge,
    /// fsyncs of the log: an idle node should add none.
    pub wal_syncs: Counter,
    pub snapshots: Counter,
    /// Turns of the node's loop that copied part of the store for a
    /// snapshot (each at most `checkpoint_slice_us` long).
    pub snapshot_copy_turns: Counter,
    pub clients: Gauge,
    /// Open connections to the Redis front door.
    pub redis_clients: Gauge,
    /// Redis front-door commands, by command.
    pub redis_commands: Family<Command, Counter>,
    /// Connections or requests refused, by reason: a
    /// [`WireError::reason`](crate::frame::WireError::reason), or `tls` for
    /// a failed handshake.
    pub refused: Family<Reason, Counter>,
    refused_all: AtomicU64,
    /// The protocol thread runs and the node is not stopping: `/readyz`.
    pub serving: AtomicBool,
    /// The protocol thread panicked: `/healthz` fails from then on.
    pub failed: AtomicBool,
}

impl NodeMetrics {
    pub fn new(nodes: usize) -> NodeMetrics {
        let mut m = NodeMetrics {
            registry: Registry::with_prefix("causeway"),
            requests: Family::default(),
            request_seconds: Family::new_with_constructor(request_buckets),
            visibility_seconds: Family::new_with_constructor(visibility_buckets),
            stable_lag_seconds: F64Gauge::default(),
            peer_in: Counter::default(),
            peer_out: Counter::default(),
            peer_depth: (0..nodes).map(|_| Gauge::default()).collect(),
            peer_spilled: (0..nodes).map(|_| Gauge::default()).collect(),
            local_writes: Counter::default(),
            remote_visible: Counter::default(),
            blocked: Counter::default(),
            blocked_seconds: F64Counter::default(),
            samples: Family::default(),
            sample_sums: Family::default(),
            versions: Gauge::default(),
            keys: Gauge::default(),
            wal_bytes: Gauge::default(),
            snapshot_bytes: Gauge::default(),
            wal_syncs: Counter::default(),
            snapshots: Counter::default(),
            snapshot_copy_turns: Counter::default(),
            clients: Gauge::default(),
            redis_clients: Gauge::default(),
            redis_commands: Family::default(),
            refused: Family::default(),
            refused_all: AtomicU64::new(0),
            serving: AtomicBool::new(false),
            failed: AtomicBool::new(false),
        };
        m.register();
        m
    }

    fn register(&mut self) {
        let r = &mut self.registry;
        r.register("requests", "Client requests handled, by message kind", self.requests.clone());
        r.register(
            "request_duration_seconds",
            "Client request arrival to reply release, by request kind",
            self.request_seconds.clone(),
        );
        r.register(
            "visibility_seconds",
            "Remote versions by origin DC: visible here minus written at origin (clock skew included)",
            self.visibility_seconds.clone(),
        );
        r.register(
            "stable_lag_seconds",
            "The clock minus the protocol's latest stable time",
            self.stable_lag_seconds.clone(),
        );
        r.register("peer_messages_in", "Peer messages handled", self.peer_in.clone());
        r.register("peer_messages_out", "Peer messages sent", self.peer_out.clone());
        let depth = Family::<To, Gauge>::default();
        let spilled = Family::<To, Gauge>::default();
        // One family per metric, whose members are the links' own gauges.
        for (i, (d, s)) in self.peer_depth.iter_mut().zip(self.peer_spilled.iter_mut()).enumerate() {
            *d = depth.get_or_create(&To { to: i as u32 }).clone();
            *s = spilled.get_or_create(&To { to: i as u32 }).clone();
        }
        r.register("replication_queue", "Unacknowledged messages per destination node", depth);
        r.register(
            "replication_spilled",
            "Of the unacknowledged messages, those kept on disk, per destination",
            spilled,
        );
        r.register("local_writes", "Writes accepted here", self.local_writes.clone());
        r.register("remote_visible", "Remote versions made visible here", self.remote_visible.clone());
        r.register("blocked", "Requests that waited inside this server", self.blocked.clone());
        r.register("blocked_seconds", "Time requests waited inside this server", self.blocked_seconds.clone());
        r.register("protocol_samples", "Protocol samples taken, by name", self.samples.clone());
        r.register("protocol_sample_sum", "Sum of the protocol samples, by name", self.sample_sums.clone());
        r.register("store_versions", "Versions held", self.versions.clone());
        r.register("store_keys", "Keys held", self.keys.clone());
        r.register("wal_bytes", "Bytes in the write-ahead log", self.wal_bytes.clone());
        r.register("snapshot_bytes", "Bytes in the latest snapshot of the log", self.snapshot_bytes.clone());
        r.register("wal_syncs", "fsyncs of the write-ahead log", self.wal_syncs.clone());
        r.register("snapshots", "Log compactions into a snapshot", self.snapshots.clone());
        r.register(
            "snapshot_copy_turns",
            "Turns of the node's loop that copied part of the store for a snapshot",
            self.snapshot_copy_turns.clone(),
        );
        r.register("clients", "Open client connections", self.clients.clone());
        r.register("redis_clients", "Open Redis front-door connections", self.redis_clients.clone());
        r.register("redis_commands", "Redis front-door commands, by command", self.redis_commands.clone());
        r.register(
            "refused",
            "Connections or requests refused, by reason (tls: a failed handshake; unauthenticated: a hello its certificate does not prove)",
            self.refused.clone(),
        );
    }

    pub fn count_request(&self, kind: &'static str) {
        self.requests.get_or_create(&Kind { kind }).inc();
    }

    /// The request counter and latency histogram of `kind`, for a caller
    /// that keeps them rather than looking them up (under the family's
    /// lock) per request.
    pub fn request_metrics(&self, kind: &'static str) -> (Counter, Histogram) {
        (
            self.requests.get_or_create(&Kind { kind }).clone(),
            self.request_seconds.get_or_create(&Kind { kind }).clone(),
        )
    }

    /// The counter of Redis command `command`, for a connection to keep.
    pub fn redis_counter(&self, command: &'static str) -> Counter {
        self.redis_commands.get_or_create(&Command { command }).clone()
    }

    pub fn record_latency(&self, kind: &'static str, us: u64) {
        self.request_seconds.get_or_create(&Kind { kind }).observe(us as f64 / 1e6);
    }

    pub fn refuse(&self, reason: &'static str) {
        self.refused.get_or_create(&Reason { reason }).inc();
        self.refused_all.fetch_add(1, Ordering::Relaxed);
    }

    /// Refusals for `reason` so far.
    pub fn refused_for(&self, reason: &'static str) -> u64 {
        self.refused.get_or_create(&Reason { reason }).get()
    }

    /// Refusals for any reason so far.
    pub fn refused_total(&self) -> u64 {
        self.refused_all.load(Ordering::Relaxed)
    }

    /// The (count, sum) counters of protocol sample `what`, to keep
    /// ([`Kept`]) and update without looking them up again.
    pub fn sample_counters(&self, what: &'static str) -> (Counter, Counter) {
        (self.samples.get_or_create(&What { what }).clone(), self.sample_sums.get_or_create(&What { what }).clone())
    }

    /// Bring a counter kept elsewhere (the log's sync count) up to `total`.
    pub fn catch_up(counter: &Counter, total: u64) {
        let now = counter.get();
        if total > now {
            counter.inc_by(total - now);
        }
    }

    /// The exposition text (OpenMetrics, which Prometheus reads).
    pub fn render(&self) -> String {
        let mut s = String::new();
        prometheus_client::encoding::text::encode(&mut s, &self.registry).expect("writing to a String cannot fail");
        s
    }
}

/// Metrics one task keeps by name (a request kind, a Redis command), found
/// by the name's address: a request then does not look its metric up in
/// the family, under the family's lock.
pub struct Kept<T>(Vec<(&'static str, T)>);

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept(Vec::new())
    }
}

impl<T> Kept<T> {
    /// Where `name`'s metrics are, made by `make` the first time.
    pub fn index(&mut self, name: &'static str, make: impl FnOnce() -> T) -> usize {
        // By address first: the same constant nearly always has the same
        // one, and comparing the text of every name passed on the way costs
        // as much as the rest of a sample (CC-LO records several per write).
        if let Some(i) = self.0.iter().position(|(n, _)| std::ptr::eq(*n, name)) {
            return i;
        }
        if let Some(i) = self.0.iter().position(|(n, _)| *n == name) {
            return i;
        }
        self.0.push((name, make()));
        self.0.len() - 1
    }

    pub fn get(&self, i: usize) -> &T {
        &self.0[i].1
    }
}
