//! The node's HTTP endpoint (axum): `GET /metrics` (Prometheus/OpenMetrics
//! text, [`crate::metrics`]), `/healthz`, `/readyz` and the live dashboard
//! ([`crate::dashboard`]).
//!
//! It speaks plain HTTP on the address the config's `metrics` list gives,
//! which an operator keeps on a management network: it shows counts and
//! latencies, never keys or values, and accepts no writes. With `[auth]
//! tokens` ([`crate::auth`]) everything but `/healthz` and `/readyz` (what
//! load balancers and supervisors probe) needs an admin token, as
//! `Authorization: Bearer <token>` (Prometheus's `authorization` scrape
//! setting) or `?token=<token>` (a browser opening the dashboard); 401
//! without one, 403 with a weaker one.

use crate::auth::{Role, Tokens};
use crate::metrics::NodeMetrics;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::net::TcpListener;
use tokio::sync::watch;

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
