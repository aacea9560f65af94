//! Per-node metrics, and the node's HTTP endpoint: `GET /metrics`
//! (Prometheus/OpenMetrics text), `/healthz` and `/readyz`.
//!
//! The metrics are `prometheus-client` counters, gauges and histograms (the
//! Prometheus project's own Rust client), registered once per node; the
//! protocol thread and the connection tasks update them without locks
//! (histograms take a short one). The endpoint is served by axum. It speaks
//! plain HTTP on the address the config's `metrics` list gives, which an
//! operator keeps on a management network: it shows counts and latencies,
//! never keys or values, and accepts no writes.
//!
//! With `[auth] tokens` ([`crate::auth`]) everything but `/healthz` and
//! `/readyz` (what load balancers and supervisors probe) needs an admin
//! token, as `Authorization: Bearer <token>` (Prometheus's
//! `authorization` scrape setting) or `?token=<token>` (a browser opening
//! the dashboard); 401 without one, 403 with a weaker one.
//!
//! Names follow Prometheus conventions: durations in seconds as histograms
//! (`_seconds_bucket`, `_sum`, `_count`), counters with `_total`.

use crate::auth::{Role, Tokens};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tokio::net::TcpListener;
use tokio::sync::watch;

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
    /// fsyncs of the log: an idle node should add none.
    pub wal_syncs: Counter,
    pub snapshots: Counter,
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
            wal_syncs: Counter::default(),
            snapshots: Counter::default(),
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
        r.register("wal_syncs", "fsyncs of the write-ahead log", self.wal_syncs.clone());
        r.register("snapshots", "Log compactions into a snapshot", self.snapshots.clone());
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

    pub fn count_redis(&self, command: &'static str) {
        self.redis_commands.get_or_create(&Command { command }).inc();
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

    pub fn sample(&self, what: &'static str, value: u64) {
        self.samples.get_or_create(&What { what }).inc();
        self.sample_sums.get_or_create(&What { what }).inc_by(value);
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

/// Serve `/metrics`, `/healthz`, `/readyz` and the dashboard
/// ([`crate::dashboard`]) on `addr` until `stop` fires.
pub async fn serve(
    addr: SocketAddr,
    m: Arc<NodeMetrics>,
    about: Arc<crate::dashboard::About>,
    tokens: Option<Arc<Tokens>>,
    mut stop: watch::Receiver<bool>,
) {
    let l = match TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("metrics endpoint {addr}: {e}");
            return;
        }
    };
    let gate = axum::middleware::from_fn_with_state((tokens, m.clone()), require_admin);
    let open = Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz)).with_state(m.clone());
    let app = Router::new()
        .route("/metrics", get(metrics_page))
        .with_state(m.clone())
        .merge(crate::dashboard::routes(m, about, stop.clone()))
        .route_layer(gate)
        .merge(open);
    let stopped = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    if let Err(e) = axum::serve(l, app).with_graceful_shutdown(stopped).await {
        tracing::error!("metrics endpoint {addr}: {e}");
    }
}

/// Let a request through only with an admin token, when tokens are required.
async fn require_admin(
    State((tokens, m)): State<(Option<Arc<Tokens>>, Arc<NodeMetrics>)>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let Some(tokens) = tokens else { return next.run(req).await };
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let query = req.uri().query().and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("token=")));
    match bearer.or(query).and_then(|secret| tokens.check(secret)) {
        Some(g) if g.role == Role::Admin => next.run(req).await,
        Some(g) => {
            m.refuse("forbidden");
            let body = format!("the {} token {:?} may not read this; an admin token may\n", g.role, g.name);
            (StatusCode::FORBIDDEN, body).into_response()
        }
        None => {
            m.refuse("no_token");
            let body = "an admin token is required: Authorization: Bearer <token>, or ?token=<token>\n";
            (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], body).into_response()
        }
    }
}

async fn metrics_page(State(m): State<Arc<NodeMetrics>>) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8"),
            // The dashboard of one node reads every node's numbers.
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        ],
        m.render(),
    )
}

/// Alive: the process answers and its protocol thread has not died.
async fn healthz(State(m): State<Arc<NodeMetrics>>) -> impl IntoResponse {
    if m.failed.load(Ordering::Relaxed) {
        (StatusCode::SERVICE_UNAVAILABLE, "protocol thread failed\n")
    } else {
        (StatusCode::OK, "ok\n")
    }
}

/// Ready for traffic: recovered from its log, its protocol thread running,
/// not stopping.
async fn readyz(State(m): State<Arc<NodeMetrics>>) -> impl IntoResponse {
    if m.serving.load(Ordering::Relaxed) && !m.failed.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not serving\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn fetch(addr: SocketAddr, path: &str) -> String {
        for _ in 0..50 {
            if let Ok(mut s) = tokio::net::TcpStream::connect(addr).await {
                let req = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
                s.write_all(req.as_bytes()).await.unwrap();
                let mut body = String::new();
                s.read_to_string(&mut body).await.unwrap();
                return body;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("the endpoint never came up")
    }

    #[tokio::test]
    async fn serves_metrics_health_and_readiness() {
        let m = Arc::new(NodeMetrics::new(2));
        m.count_request("get_req");
        m.record_latency("get_req", 250);
        m.refuse("tls");
        m.peer_depth[1].set(7);
        let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let (stop_tx, stop) = watch::channel(false);
        tokio::spawn(serve(addr, m.clone(), Arc::new(crate::dashboard::About::default()), None, stop));
        let body = fetch(addr, "/metrics").await;
        assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
        assert!(body.contains("causeway_requests_total{kind=\"get_req\"} 1"), "{body}");
        // 250 µs falls in the 400 µs bucket, not the 200 µs one.
        assert!(body.contains("causeway_request_duration_seconds_bucket{le=\"0.0002\",kind=\"get_req\"} 0"), "{body}");
        assert!(body.contains("causeway_request_duration_seconds_bucket{le=\"0.0004\",kind=\"get_req\"} 1"), "{body}");
        assert!(body.contains("causeway_refused_total{reason=\"tls\"} 1"), "{body}");
        assert!(body.contains("causeway_replication_queue{to=\"1\"} 7"), "{body}");
        assert!(body.contains("# TYPE causeway_store_versions gauge"), "{body}");
        assert_eq!(m.refused_total(), 1);
        // Alive, but not ready until the protocol thread says it serves.
        assert!(fetch(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
        assert!(fetch(addr, "/readyz").await.starts_with("HTTP/1.1 503"));
        m.serving.store(true, Ordering::Relaxed);
        assert!(fetch(addr, "/readyz").await.starts_with("HTTP/1.1 200"));
        m.failed.store(true, Ordering::Relaxed);
        assert!(fetch(addr, "/healthz").await.starts_with("HTTP/1.1 503"));
        assert!(fetch(addr, "/nothing").await.starts_with("HTTP/1.1 404"));
        // The dashboard: the page, and a first event at once with the
        // node's state and metrics text.
        let page = fetch(addr, "/").await;
        assert!(page.starts_with("HTTP/1.1 200") && page.contains("<title>Causeway dashboard</title>"), "{page}");
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /api/events HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
        let mut got = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while !String::from_utf8_lossy(&got).contains("\n\n") || !String::from_utf8_lossy(&got).contains("data:") {
                let mut chunk = [0u8; 4096];
                let n = s.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the event stream closed");
                got.extend_from_slice(&chunk[..n]);
            }
        })
        .await
        .expect("a first event within 5 s");
        let got = String::from_utf8_lossy(&got);
        assert!(got.contains("text/event-stream"), "{got}");
        assert!(got.contains("access-control-allow-origin: *"), "{got}");
        assert!(got.contains(r#""serving":true"#) && got.contains("causeway_requests_total"), "{got}");
        // Stopping the node ends the stream.
        let _ = stop_tx.send(true);
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(std::time::Duration::from_secs(5), s.read_to_end(&mut rest)).await;
        assert!(closed.is_ok(), "the event stream outlived the node");
    }
}
