//! The live dashboard every node serves on its metrics address: `/` (one
//! self-contained page), `/api/cluster` (the cluster's nodes, DCs, roles and
//! metrics addresses) and `/api/events` (server-sent events: this node's
//! state and its metrics text, once a second).
//!
//! The page opens one event stream per node, straight to each node's own
//! metrics address, so any node's page shows the whole cluster and a node
//! that is down shows as down rather than hiding behind the one serving
//! the page. Rates and latency percentiles are computed in the page from
//! consecutive snapshots of the counters and histogram buckets; nothing is
//! aggregated or stored server-side, and the endpoint stays read-only: it
//! shows counts and latencies, never keys or values.

use crate::config::Cluster;
use crate::metrics::NodeMetrics;
use axum::Router;
use axum::http::header;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use causeway_core::{NodeId, Protocol};
use futures_util::stream::Stream;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::watch;

/// The page: HTML, CSS and script in one file, no external assets (the
/// dashboard must work on a network with no internet access).
const PAGE: &str = include_str!("dashboard.html");

/// How often a node pushes its numbers.
const PUSH_INTERVAL_MS: u64 = 1_000;

/// What the page needs to know of the cluster, as JSON.
#[derive(Default)]
pub struct About {
    json: String,
}

impl About {
    pub fn of<P: Protocol>(cluster: &Cluster, me: NodeId) -> About {
        let t = &cluster.topology;
        let nodes: Vec<serde_json::Value> = (0..t.nodes())
            .map(|i| {
                let n = NodeId(i as u32);
                let role = t.role_name(n);
                serde_json::json!({
                    "node": i,
                    "dc": t.dc_of(n).0,
                    "role": role,
                    "addr": cluster.addrs[i].to_string(),
                    "metrics": cluster.metrics_addrs.get(i).map(|a| a.to_string()),
                })
            })
            .collect();
        let dcs: Vec<String> = (0..t.dcs()).map(|d| t.dc_name(causeway_core::DcId(d as u16))).collect();
        let json = serde_json::json!({
            "cluster_id": cluster.config.cluster_id,
            "protocol": P::NAME,
            "causal": P::CAUSAL,
            "me": me.0,
            "dcs": dcs,
            "nodes": nodes,
        });
        About { json: json.to_string() }
    }
}

pub fn routes(m: Arc<NodeMetrics>, about: Arc<About>, stop: watch::Receiver<bool>) -> Router {
    Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route(
            "/api/cluster",
            get(move || {
                let about = about.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], about.json.clone()) }
            }),
        )
        .route(
            "/api/events",
            get(move || {
                let (m, stop) = (m.clone(), stop.clone());
                async move { ([(header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")], events(m, stop)).into_response() }
            }),
        )
}

/// One event per interval: `{"serving", "failed", "metrics": exposition}`,
/// the first at once. Ends when the node stops (the page then shows it
/// down and reconnects until it is back).
fn events(m: Arc<NodeMetrics>, stop: watch::Receiver<bool>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stream = futures_util::stream::unfold((m, stop, true), |(m, mut stop, first)| async move {
        if !first {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(PUSH_INTERVAL_MS)) => {}
                _ = stop.wait_for(|s| *s) => return None,
            }
        }
        if *stop.borrow() {
            return None;
        }
        let body = serde_json::json!({
            "serving": m.serving.load(Ordering::Relaxed),
            "failed": m.failed.load(Ordering::Relaxed),
            "metrics": m.render(),
        });
        Some((Ok(Event::default().data(body.to_string())), (m, stop, false)))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}
