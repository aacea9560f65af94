//! A node's start and end: its data directory and log recovered into the
//! node core, its links, listeners and protocol thread started; the thread's
//! end (or panic) reported.

use super::accept::{Acceptor, accept_loop};
use super::checkpoint::Checkpoints;
use super::commit::{Committer, SyncPolicy};
use super::host::LoopHost;
use super::protocol_loop::ProtocolLoop;
use super::release::Outlets;
use super::runtime_log::RuntimeLog;
use super::{Failed, NodeError, NodeHandle, NodeThreads};
use crate::acks::{Delivered, GOODBYE_TIMEOUT};
use crate::auth::Tokens;
use crate::config::Cluster;
use crate::identity::{NodeDir, PeerIncarnations};
use crate::inbox::{Input, LocalDoor};
use crate::link::{self, LinkItem, LinkParams};
use crate::metrics::NodeMetrics;
use crate::tls::NodeTls;
use crate::wal::{Recovered, Wal};
use causeway_core::{Durable, MvStore, Node, NodeCtx, NodeId, NodeOptions, Protocol, Versioned};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc as smpsc;
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, mpsc, watch};

/// Start node `node` of `cluster` running protocol `P`, its network tasks
/// where `threads` says. `listener` may be pre-bound (the embedded cluster binds every port
/// first so that addresses are known before any node starts).
pub fn spawn<P: Protocol>(
    cluster: Arc<Cluster>,
    node: NodeId,
    listener: Option<std::net::TcpListener>,
    threads: NodeThreads<'_>,
) -> Result<NodeHandle, NodeError> {
    let addr = cluster.addrs[node.idx()];
    let listener = match listener {
        Some(l) => l,
        None => std::net::TcpListener::bind(addr).map_err(|source| NodeError::Bind { node: node.0, addr, source })?,
    };
    listener.set_nonblocking(true).map_err(|source| NodeError::Bind { node: node.0, addr, source })?;
    let addr = listener.local_addr().unwrap_or(addr);
    let tls = NodeTls::load(&cluster, node).map_err(|source| NodeError::Tls { node: node.0, source })?;
    if tls.is_plaintext() {
        tracing::warn!(
            node = node.0,
            "PLAINTEXT: [tls] plaintext = true, so connections are neither encrypted nor authenticated; \
             anyone who reaches {addr} can read and write data and pose as a peer node"
        );
    }
    let tokens = match &cluster.config.auth.tokens {
        None => None,
        Some(path) => {
            let t = Tokens::open(path).map_err(|source| NodeError::Auth { node: node.0, source })?;
            tracing::info!(node = node.0, "client sessions need a token from {}", path.display());
            Some(Arc::new(t))
        }
    };
    let dir = cluster.node_dir(node);
    let node_dir = NodeDir::open(&dir, &cluster.config.cluster_id, node, &cluster.node_place(node))
        .map_err(|source| NodeError::DataDir { node: node.0, source })?;
    let incarnation = node_dir.identity.incarnation;
    let (wal, recovered) =
        Wal::open::<P::Version, P::Msg>(&dir).map_err(|source| NodeError::Wal { node: node.0, source })?;
    if recovered.torn_tail_bytes > 0 {
        tracing::warn!(node = node.0, bytes = recovered.torn_tail_bytes, "dropped a torn record at the end of the log");
    }
    if recovered.records > 0 {
        tracing::info!(
            node = node.0,
            records = recovered.records,
            versions = recovered.versions.len(),
            "recovered from the log"
        );
    }

    let n = cluster.topology.nodes();
    let metrics = Arc::new(NodeMetrics::new(n));
    metrics.snapshot_bytes.set(wal.snapshot_bytes() as i64);
    let peers = Arc::new(PeerIncarnations::new(n, &recovered.peer_incarnations));
    let logged_peers: Vec<Option<u64>> =
        (0..n).map(|i| recovered.peer_incarnations.get(&NodeId(i as u32)).copied()).collect();
    let clock_floor_us = recovered.clock_floor_us;
    let durable = durable_state(recovered, n).map_err(|peer| NodeError::ForeignLog { node: node.0, peer, nodes: n })?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let (in_tx, in_rx) = mpsc::unbounded_channel::<Input<P::Msg>>();
    // The node's tasks, started on its own runtime by its thread (below).
    let mut tasks: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>> = Vec::new();
    let durable_delivered = Arc::new(Delivered::new(durable.delivered.iter().copied()));

    // Peer links, each starting from what the log says its peer
    // acknowledged: the first message still in the outbox, or everything
    // up to the last number used.
    let logged_acked: Vec<u64> =
        (0..n).map(|i| durable.outbox[i].front().map_or(durable.sent_seq[i] + 1, |(seq, _)| *seq)).collect();
    let mut links: Vec<Option<mpsc::UnboundedSender<LinkItem<P::Msg>>>> = Vec::with_capacity(n);
    let mut acked: Vec<Arc<AtomicU64>> = Vec::with_capacity(n);
    for (i, &first_unacked) in logged_acked.iter().enumerate() {
        let to = NodeId(i as u32);
        let a = Arc::new(AtomicU64::new(first_unacked));
        acked.push(a.clone());
        if to == node {
            links.push(None);
            continue;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let params = LinkParams {
            tls: tls.clone(),
            cluster_id: cluster.config.cluster_id.clone(),
            me: node,
            to,
            addr: cluster.addrs[i],
            cap: cluster.config.limits.peer_queue,
            max_frame: cluster.config.limits.max_frame_bytes,
            spill_path: dir.join(format!("spill-to-{i}")),
            linger: if cluster.topology.dc_of(to) == cluster.topology.dc_of(node) {
                Duration::ZERO
            } else {
                Duration::from_micros(cluster.config.links.linger_us)
            },
            incarnation,
            peers: peers.clone(),
            acked: a,
            depth: metrics.peer_depth[i].clone(),
            spilled: metrics.peer_spilled[i].clone(),
        };
        tasks.push(Box::pin(link::run::<P::Msg>(params, rx, stop_rx.clone())));
        links.push(Some(tx));
    }

    // Listeners: the node's own, metrics and the Redis front door.
    let http_tokens = tokens.clone();
    let next_client = Arc::new(AtomicU32::new(1));
    let (open_tx, mut connections_ended) = mpsc::channel::<()>(1);
    let acceptor = Acceptor::<P::Msg> {
        tls,
        tokens,
        cluster: cluster.clone(),
        node,
        input: in_tx.clone(),
        delivered: durable_delivered.clone(),
        next_client: next_client.clone(),
        source_locks: Arc::new((0..n).map(|_| Mutex::new(0u64)).collect()),
        metrics: metrics.clone(),
        incarnation,
        peers: peers.clone(),
        stop: stop_rx.clone(),
        open: open_tx,
    };
    let (acceptor_done_tx, acceptor_done) = smpsc::channel::<()>();
    tasks.push(Box::pin(accept_loop(listener, acceptor, acceptor_done_tx)));
    if let Some(maddr) = cluster.metrics_addrs.get(node.idx()).copied() {
        let about = Arc::new(crate::dashboard::About::of::<P>(&cluster, node));
        tasks.push(Box::pin(crate::http::serve(maddr, metrics.clone(), about, http_tokens.clone(), stop_rx.clone())));
    }
    if let Some(raddr) = cluster.redis_addrs.get(node.idx()).copied().flatten() {
        let local = LocalDoor {
            node,
            input: in_tx.clone(),
            next_client: next_client.clone(),
            metrics: metrics.clone(),
            limits: cluster.config.limits.clone(),
            tokens: http_tokens.clone(),
        };
        tasks.push(Box::pin(crate::redis::serve::<P>(raddr, cluster.clone(), local, metrics.clone(), stop_rx.clone())));
    }

    // The protocol thread.
    let cfg: P::Config = cluster.config.params.clone().try_into().expect("validated with the cluster config");
    let ctx = NodeCtx { id: node, role: cluster.topology.role(node), topology: cluster.topology.clone() };
    let (core, outbox) = Node::<P>::recover(&cfg, ctx, durable, NodeOptions::default());
    let dc = cluster.topology.dc_of(node);
    let wan: Vec<u64> =
        (0..n).map(|i| cluster.wan_one_way_us[dc.idx()][cluster.topology.dc_of(NodeId(i as u32)).idx()]).collect();
    let storage = &cluster.config.storage;
    let policy = SyncPolicy::new(
        storage.fsync,
        matches!(threads, NodeThreads::Own),
        Duration::from_millis(storage.group_commit_ms.max(1)),
    );
    let mut pl = ProtocolLoop::<P> {
        id: node,
        node: core,
        host: LoopHost::new(dc, clock_floor_us, metrics.clone()),
        committer: Committer::new(wal, policy, durable_delivered),
        runtime_log: RuntimeLog::new(acked, logged_acked, peers, logged_peers, clock_floor_us),
        outlets: Outlets::new(links, wan, metrics.clone()),
        checkpoints: Checkpoints::new(
            node.0,
            storage.snapshot_bytes,
            Duration::from_micros(storage.checkpoint_slice_us),
            metrics.clone(),
        ),
        inputs: in_rx,
        metrics: metrics.clone(),
        inbox_dry: true,
        stopping: false,
        log_failed: false,
        turn_started: Instant::now(),
        _node_dir: node_dir,
    };
    let failed = Arc::new(Failed::default());
    let report = LoopEnd { node, failed: failed.clone(), stop: stop_tx.clone(), health: metrics.clone() };
    let stop_after = stop_tx.clone();
    let own_tasks = match threads {
        NodeThreads::Own => Some(tasks),
        NodeThreads::Shared(rt) => {
            for t in tasks {
                rt.spawn(t);
            }
            None
        }
    };
    let node_main = async move {
        for t in own_tasks.into_iter().flatten() {
            tokio::spawn(t);
        }
        pl.outlets.resend(outbox);
        // Recovered, listening, links started: `/readyz` says so.
        pl.metrics.serving.store(true, Ordering::Relaxed);
        pl.run().await;
        // However the loop ended (stopped, or the log failed), the node's
        // network tasks end with it.
        let _ = stop_after.send(true);
        // Connections from peers say goodbye as they close, so that the
        // peers log an orderly stop rather than an outage; on this thread's
        // runtime they would be dropped unsaid with it.
        let _ = tokio::time::timeout(GOODBYE_TIMEOUT, connections_ended.recv()).await;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| NodeError::Thread { node: node.0, source })?;
    let thread = std::thread::Builder::new()
        .name(format!("causeway-node-{}", node.0))
        .spawn(move || match std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || rt.block_on(node_main))) {
            Ok(()) => report.ended(),
            Err(payload) => report.panicked(&panic_text(payload)),
        })
        .map_err(|source| NodeError::Thread { node: node.0, source })?;
    let stop_in = in_tx;
    Ok(NodeHandle {
        node,
        addr,
        metrics,
        stop_tasks: stop_tx,
        stop_thread: Box::new(move || {
            let _ = stop_in.send(Input::Stop);
        }),
        thread: Some(thread),
        acceptor_done,
        failed,
    })
}

/// The node core's durable state from what the log held (`n` nodes in
/// the cluster). The log counts sequence numbers from the next one to use;
/// the node core from the last one used. A log that names a node the
/// cluster does not have (it was written under another shape, in a
/// directory made before identities recorded shapes) is refused: the
/// error is that node's id.
fn durable_state<V: Versioned + Clone, M>(recovered: Recovered<V, M>, n: usize) -> Result<Durable<V, M>, u32> {
    let known = |id: NodeId| if id.idx() < n { Ok(id.idx()) } else { Err(id.0) };
    let mut store = MvStore::new();
    for (k, v) in recovered.versions {
        store.restore(&k, v);
    }
    if let Some(meta) = recovered.meta {
        store.set_meta(meta);
        store.take_dirty_meta();
    }
    let mut outbox: Vec<VecDeque<(u64, M)>> = (0..n).map(|_| VecDeque::new()).collect();
    for (to, msgs) in recovered.outbox {
        outbox[known(to)?] = msgs.into();
    }
    let mut sent_seq = vec![0u64; n];
    for (to, next) in recovered.next_seq {
        sent_seq[known(to)?] = next.saturating_sub(1);
    }
    let mut delivered = vec![0u64; n];
    for (from, seq) in recovered.delivered {
        delivered[known(from)?] = seq;
    }
    Ok(Durable { store, outbox, sent_seq, delivered })
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text panic".into())
}

/// Reports the end of a node's protocol loop, and a panic of it.
struct LoopEnd {
    node: NodeId,
    failed: Arc<Failed>,
    stop: watch::Sender<bool>,
    health: Arc<NodeMetrics>,
}

impl LoopEnd {
    fn ended(&self) {
        self.health.serving.store(false, Ordering::Relaxed);
    }

    fn panicked(&self, what: &str) {
        self.ended();
        self.health.failed.store(true, Ordering::Relaxed);
        tracing::error!(
            node = self.node.0,
            "the protocol loop panicked: {what}; this node stops serving (everything it \
             acknowledged is in its log: restart it)"
        );
        self.failed.flag.store(true, Ordering::Release);
        self.failed.notify.notify_one();
        let _ = self.stop.send(true);
    }
}
