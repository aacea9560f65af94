//! Per-node counters and a Prometheus text endpoint (`GET /metrics`).
//!
//! Counters are atomics the protocol thread and the connection tasks bump;
//! the endpoint renders them on request. A full HTTP stack would be a heavy
//! dependency for one read-only page, so the endpoint answers any request on
//! its port with the page.

use causeway_core::summary::histogram;
use hdrhistogram::Histogram;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub struct NodeMetrics {
    pub requests: Mutex<std::collections::BTreeMap<&'static str, u64>>,
    /// Time from a client request's arrival to its reply's release, by the
    /// request's kind (includes any wait inside the server and the log sync).
    pub latency: Mutex<std::collections::BTreeMap<&'static str, Histogram<u64>>>,
    /// Remote versions' visibility latency, estimated as this node's clock at
    /// visibility minus the version's origin timestamp (skew included).
    pub visibility: Mutex<Histogram<u64>>,
    /// The clock minus the latest stable time the protocol reported.
    pub stable_lag_us: AtomicU64,
    pub peer_in: AtomicU64,
    pub peer_out: AtomicU64,
    /// Unacknowledged messages per destination: the replication queue depth.
    pub peer_depth: Vec<Arc<AtomicU64>>,
    /// Of those, how many wait in the link's spill file rather than in
    /// memory (the destination is away or slow).
    pub peer_spilled: Vec<Arc<AtomicU64>>,
    pub local_writes: AtomicU64,
    pub remote_visible: AtomicU64,
    pub blocked: AtomicU64,
    pub blocked_us: AtomicU64,
    /// Per protocol sample name (`deps_per_write` …): (count, sum).
    pub samples: Mutex<std::collections::BTreeMap<&'static str, (u64, u64)>>,
    pub versions: AtomicU64,
    pub keys: AtomicU64,
    pub wal_bytes: AtomicU64,
    /// fsyncs of the log: an idle node should add none.
    pub wal_syncs: AtomicU64,
    pub snapshots: AtomicU64,
    pub clients: AtomicU64,
    pub refused: AtomicU64,
    /// Of those, connections refused for their credentials: a failed TLS
    /// handshake, or a hello its certificate does not prove.
    pub tls_refused: AtomicU64,
}

impl NodeMetrics {
    pub fn new(nodes: usize) -> NodeMetrics {
        NodeMetrics {
            requests: Mutex::new(Default::default()),
            latency: Mutex::new(Default::default()),
            visibility: Mutex::new(histogram()),
            stable_lag_us: AtomicU64::new(0),
            peer_in: AtomicU64::new(0),
            peer_out: AtomicU64::new(0),
            peer_depth: (0..nodes).map(|_| Arc::new(AtomicU64::new(0))).collect(),
            peer_spilled: (0..nodes).map(|_| Arc::new(AtomicU64::new(0))).collect(),
            local_writes: AtomicU64::new(0),
            remote_visible: AtomicU64::new(0),
            blocked: AtomicU64::new(0),
            blocked_us: AtomicU64::new(0),
            samples: Mutex::new(Default::default()),
            versions: AtomicU64::new(0),
            keys: AtomicU64::new(0),
            wal_bytes: AtomicU64::new(0),
            wal_syncs: AtomicU64::new(0),
            snapshots: AtomicU64::new(0),
            clients: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            tls_refused: AtomicU64::new(0),
        }
    }

    pub fn count_request(&self, kind: &'static str) {
        if let Ok(mut m) = self.requests.lock() {
            *m.entry(kind).or_insert(0) += 1;
        }
    }

    pub fn record_latency(&self, kind: &'static str, us: u64) {
        if let Ok(mut m) = self.latency.lock() {
            let _ = m.entry(kind).or_insert_with(histogram).record(us.max(1));
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let summary = |s: &mut String, name: &str, label: &str, h: &Histogram<u64>| {
            for q in [0.5, 0.9, 0.99] {
                let _ = writeln!(s, "causeway_{name}{{{label}quantile=\"{q}\"}} {}", h.value_at_quantile(q));
            }
            let open = if label.is_empty() { String::new() } else { format!("{{{}}}", label.trim_end_matches(',')) };
            let _ = writeln!(s, "causeway_{name}_sum{open} {}", (h.mean() * h.len() as f64) as u64);
            let _ = writeln!(s, "causeway_{name}_count{open} {}", h.len());
        };
        let _ = writeln!(s, "# HELP causeway_request_latency_microseconds Request arrival to reply, by request kind.");
        let _ = writeln!(s, "# TYPE causeway_request_latency_microseconds summary");
        if let Ok(m) = self.latency.lock() {
            for (k, h) in m.iter() {
                summary(&mut s, "request_latency_microseconds", &format!("kind=\"{k}\","), h);
            }
        }
        let _ = writeln!(
            s,
            "# HELP causeway_visibility_latency_microseconds Remote versions: visible here minus written at origin (clock skew included)."
        );
        let _ = writeln!(s, "# TYPE causeway_visibility_latency_microseconds summary");
        if let Ok(h) = self.visibility.lock() {
            summary(&mut s, "visibility_latency_microseconds", "", &h);
        }
        let g = |s: &mut String, name: &str, help: &str, kind: &str, v: u64| {
            let _ = writeln!(s, "# HELP causeway_{name} {help}\n# TYPE causeway_{name} {kind}\ncauseway_{name} {v}");
        };
        let _ = writeln!(s, "# HELP causeway_requests_total Client requests handled, by message kind.");
        let _ = writeln!(s, "# TYPE causeway_requests_total counter");
        if let Ok(m) = self.requests.lock() {
            for (k, v) in m.iter() {
                let _ = writeln!(s, "causeway_requests_total{{kind=\"{k}\"}} {v}");
            }
        }
        g(&mut s, "peer_messages_in_total", "Peer messages handled.", "counter", self.peer_in.load(Ordering::Relaxed));
        g(&mut s, "peer_messages_out_total", "Peer messages sent.", "counter", self.peer_out.load(Ordering::Relaxed));
        let _ = writeln!(s, "# HELP causeway_replication_queue Unacknowledged messages per destination node.");
        let _ = writeln!(s, "# TYPE causeway_replication_queue gauge");
        for (i, d) in self.peer_depth.iter().enumerate() {
            let v = d.load(Ordering::Relaxed);
            if v > 0 {
                let _ = writeln!(s, "causeway_replication_queue{{to=\"{i}\"}} {v}");
            }
        }
        let _ = writeln!(
            s,
            "# HELP causeway_replication_spilled Of the unacknowledged messages, those kept on disk, per destination."
        );
        let _ = writeln!(s, "# TYPE causeway_replication_spilled gauge");
        for (i, d) in self.peer_spilled.iter().enumerate() {
            let v = d.load(Ordering::Relaxed);
            if v > 0 {
                let _ = writeln!(s, "causeway_replication_spilled{{to=\"{i}\"}} {v}");
            }
        }
        g(
            &mut s,
            "stable_lag_microseconds",
            "The clock minus the protocol's latest stable time.",
            "gauge",
            self.stable_lag_us.load(Ordering::Relaxed),
        );
        g(&mut s, "local_writes_total", "Writes accepted here.", "counter", self.local_writes.load(Ordering::Relaxed));
        g(
            &mut s,
            "remote_visible_total",
            "Remote versions made visible here.",
            "counter",
            self.remote_visible.load(Ordering::Relaxed),
        );
        g(
            &mut s,
            "blocked_total",
            "Requests that waited inside this server.",
            "counter",
            self.blocked.load(Ordering::Relaxed),
        );
        g(
            &mut s,
            "blocked_microseconds_total",
            "Time requests waited inside this server.",
            "counter",
            self.blocked_us.load(Ordering::Relaxed),
        );
        if let Ok(samples) = self.samples.lock() {
            for (what, (count, sum)) in samples.iter() {
                g(&mut s, &format!("sample_{what}_count"), "Protocol samples taken.", "counter", *count);
                g(&mut s, &format!("sample_{what}_sum"), "Sum of the protocol samples.", "counter", *sum);
            }
        }
        g(&mut s, "store_versions", "Versions held.", "gauge", self.versions.load(Ordering::Relaxed));
        g(&mut s, "store_keys", "Keys held.", "gauge", self.keys.load(Ordering::Relaxed));
        g(&mut s, "wal_bytes", "Bytes in the write-ahead log.", "gauge", self.wal_bytes.load(Ordering::Relaxed));
        g(
            &mut s,
            "wal_syncs_total",
            "fsyncs of the write-ahead log.",
            "counter",
            self.wal_syncs.load(Ordering::Relaxed),
        );
        g(
            &mut s,
            "snapshots_total",
            "Log compactions into a snapshot.",
            "counter",
            self.snapshots.load(Ordering::Relaxed),
        );
        g(&mut s, "clients", "Open client connections.", "gauge", self.clients.load(Ordering::Relaxed));
        g(&mut s, "refused_total", "Connections or requests refused.", "counter", self.refused.load(Ordering::Relaxed));
        g(
            &mut s,
            "tls_refused_total",
            "Connections refused for their credentials (TLS handshake, or a hello the certificate does not prove).",
            "counter",
            self.tls_refused.load(Ordering::Relaxed),
        );
        s
    }
}

/// Serve the metrics page on `addr` until `stop` fires.
pub async fn serve(addr: SocketAddr, m: Arc<NodeMetrics>, mut stop: watch::Receiver<bool>) {
    let l = match TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("metrics endpoint {addr}: {e}");
            return;
        }
    };
    loop {
        tokio::select! {
            r = l.accept() => if let Ok((mut s, _)) = r {
                let m = m.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), s.read(&mut buf)).await;
                    let body = m.render();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = s.write_all(head.as_bytes()).await;
                    let _ = s.write_all(body.as_bytes()).await;
                });
            },
            _ = stop.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn serves_the_prometheus_page() {
        let m = Arc::new(NodeMetrics::new(2));
        m.count_request("get_req");
        m.record_latency("get_req", 250);
        let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let (stop_tx, stop) = watch::channel(false);
        tokio::spawn(serve(addr, m, stop));
        let mut body = String::new();
        for _ in 0..50 {
            if let Ok(mut s) = tokio::net::TcpStream::connect(addr).await {
                s.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
                s.read_to_string(&mut body).await.unwrap();
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let _ = stop_tx.send(true);
        assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
        assert!(body.contains("causeway_requests_total{kind=\"get_req\"} 1"), "{body}");
        assert!(
            body.contains("causeway_request_latency_microseconds{kind=\"get_req\",quantile=\"0.5\"} 250"),
            "{body}"
        );
        assert!(body.contains("# TYPE causeway_store_versions gauge"), "{body}");
    }
}
