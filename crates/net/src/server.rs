//! One node of any protocol, as a real server.
//!
//! The protocol's state machine runs on a thread of its own (it is
//! single-threaded by design), as an async loop on a current-thread tokio
//! runtime. Tokio tasks accept connections, read frames, run the peer links
//! and serve metrics; they talk to the protocol loop through channels. Where
//! those tasks run is [`NodeThreads`]: on the protocol thread's runtime too
//! (a server process: one event loop, as redis-server has, and no wake-up of
//! another thread between a request and its reply; the log's `fsync` then
//! runs on tokio's blocking pool so the connections keep reading), or on a
//! runtime shared by the nodes of an embedded cluster.
//!
//! Each turn of the protocol thread takes every input that is waiting (a
//! batch), runs the handlers, appends what they changed to the write-ahead
//! log, syncs it according to the fsync policy, and only then releases the
//! turn's replies and peer messages: nothing is acknowledged before it is
//! durable. That is group commit by construction. A turn's replies to a
//! client connection go out in one write, made by the protocol thread
//! itself when the socket takes it ([`crate::reply_pipe`]).

use crate::auth::{Role, Tokens};
use crate::config::{Cluster, Fsync};
use crate::frame::{
    FrameError, FrameReader, MAX_SLOTS_PER_CONNECTION, Wire, WireError, decode, encode, encode_into, read_frame,
};
use crate::identity::{IdentityError, NodeDir, PeerIncarnations};
use crate::inbox::{Input, LocalDoor, Replies, admit, role_of};
use crate::link::{self, LinkItem, LinkParams};
use crate::metrics::{Kept, NodeMetrics};
use crate::reply_pipe::{PipeSender, ReplyPipe};
use crate::tls::{CLIENT_NAME, Conn, NodeTls, node_name};
use crate::wal::{LogRecord, PendingCheckpoint, Wal, WalError, frame_versions};
use causeway_core::{
    ClientId, DcId, FreezeBuffers, KeyIndex, Message, MvStore, NodeCtx, NodeId, Observation, Protocol, Server,
    ServerEnv, Versioned, WIRE_FORMAT,
};
use prometheus_client::metrics::{counter::Counter, histogram::Histogram};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc as smpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use thiserror::Error;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, mpsc, watch};

#[derive(Debug, Error)]
pub enum NodeError {
    #[error("node {node}: cannot listen on {addr}: {source}")]
    Bind { node: u32, addr: SocketAddr, source: std::io::Error },
    #[error("node {node}: {source}")]
    Wal { node: u32, source: WalError },
    #[error("node {node}: {source}")]
    DataDir { node: u32, source: IdentityError },
    #[error("node {node}: the protocol loop panicked")]
    Panicked { node: u32 },
    #[error("node {node}: cannot start its thread or runtime: {source}")]
    Thread { node: u32, source: std::io::Error },
    #[error("node {node}: {source}")]
    Tls { node: u32, source: crate::tls::TlsError },
    #[error("node {node}: {source}")]
    Auth { node: u32, source: crate::auth::AuthError },
}

/// The clock floor is pushed this far ahead of the clock whenever the clock
/// gets within half of it, so a restarted node never reads a clock below
/// anything it handed out before the crash.
const CLOCK_LEASE_US: u64 = 1_000_000;

/// Set when the protocol thread panicked; the node has then stopped serving.
#[derive(Default)]
struct Failed {
    flag: AtomicBool,
    notify: tokio::sync::Notify,
}

/// A running node. Dropping it does not stop it; call [`NodeHandle::stop`].
pub struct NodeHandle {
    pub node: NodeId,
    pub addr: SocketAddr,
    pub metrics: Arc<NodeMetrics>,
    stop_tasks: watch::Sender<bool>,
    stop_thread: Box<dyn Fn() + Send + Sync>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Disconnects when the accept task has ended and dropped its listener.
    acceptor_done: smpsc::Receiver<()>,
    failed: Arc<Failed>,
}

impl NodeHandle {
    /// Stop serving: close the listener and links, finish the current turn
    /// (so everything acknowledged is in the log) and join the protocol thread.
    /// Tell the node's network tasks to stop, without waiting for them
    /// ([`stop`](Self::stop) waits).
    pub fn signal_stop(&self) {
        self.metrics.serving.store(false, Ordering::Relaxed);
        let _ = self.stop_tasks.send(true);
    }

    pub fn stop(mut self) -> Result<(), NodeError> {
        self.signal_stop();
        // The listener must be closed before `stop` returns, so the node can
        // be restarted on the same address at once.
        let _ = self.acceptor_done.recv_timeout(Duration::from_secs(5));
        (self.stop_thread)();
        if let Some(t) = self.thread.take() {
            t.join().map_err(|_| NodeError::Panicked { node: self.node.0 })?;
        }
        if self.failed.flag.load(Ordering::Acquire) {
            return Err(NodeError::Panicked { node: self.node.0 });
        }
        Ok(())
    }

    /// Resolves if the protocol thread panics. The node has then closed its
    /// listener and links (its clients see the connection close rather than
    /// wait for their deadline); a supervisor should restart the process,
    /// which recovers everything acknowledged from the log.
    pub async fn failed(&self) {
        if !self.failed.flag.load(Ordering::Acquire) {
            self.failed.notify.notified().await;
        }
    }
}

fn system_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// Start node `node` of `cluster` running protocol `P` on the tokio runtime
/// `rt`. `listener` may be pre-bound (the embedded cluster binds every port
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
    let node_dir = NodeDir::open(&dir, &cluster.config.cluster_id, node)
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
    let peers = Arc::new(PeerIncarnations::new(n, &recovered.peer_incarnations));
    let (stop_tx, stop_rx) = watch::channel(false);
    let (in_tx, in_rx) = mpsc::unbounded_channel::<Input<P::Msg>>();
    // The node's tasks, started on its own runtime by its thread (below).
    let mut tasks: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>> = Vec::new();
    let durable_delivered: Arc<Vec<AtomicU64>> =
        Arc::new((0..n).map(|i| AtomicU64::new(*recovered.delivered.get(&NodeId(i as u32)).unwrap_or(&0))).collect());

    // Peer links.
    let mut links: Vec<Option<mpsc::UnboundedSender<LinkItem<P::Msg>>>> = Vec::with_capacity(n);
    let mut acked: Vec<Arc<AtomicU64>> = Vec::with_capacity(n);
    for i in 0..n {
        let to = NodeId(i as u32);
        let a = Arc::new(AtomicU64::new(0));
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

    // Accept loop.
    let http_tokens = tokens.clone();
    let next_client = Arc::new(AtomicU32::new(1));
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
    };
    let mut stop_accept = stop_rx.clone();
    let (acceptor_done_tx, acceptor_done) = smpsc::channel::<()>();
    tasks.push(Box::pin(async move {
        let _done = acceptor_done_tx;
        let listener = match TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(node = node.0, "listener: {e}");
                return;
            }
        };
        let max_conns = acceptor.cluster.config.limits.max_connections;
        let permits = Arc::new(tokio::sync::Semaphore::new(max_conns));
        // Accept errors (EMFILE, ENFILE, ENOBUFS…) repeat at once while their
        // cause lasts: back off, and log once per episode, not per retry.
        let mut backoff = Duration::ZERO;
        let mut failures = 0u64;
        loop {
            tokio::select! {
                r = listener.accept() => match r {
                    Ok((s, _)) => {
                        if failures > 0 {
                            tracing::info!(node = node.0, failures, "accepting connections again");
                        }
                        backoff = Duration::ZERO;
                        failures = 0;
                        let a = acceptor.clone();
                        match permits.clone().try_acquire_owned() {
                            Ok(permit) => {
                                tokio::spawn(async move {
                                    a.serve(s).await;
                                    drop(permit);
                                });
                            }
                            Err(_) => {
                                a.metrics.refuse("too_many_connections");
                                tokio::spawn(async move {
                                    // Refused by name, over TLS too (bounded: a
                                    // flood costs at most a second per socket).
                                    let e = WireError::TooManyConnections { max: max_conns };
                                    let _ = tokio::time::timeout(Duration::from_secs(1), async {
                                        if let Ok(mut c) = a.tls.accept(s).await {
                                            refuse::<P::Msg>(&mut c, e).await;
                                        }
                                    })
                                    .await;
                                });
                            }
                        }
                    }
                    Err(e) => {
                        if failures == 0 {
                            tracing::warn!(node = node.0, "accept failed: {e}; backing off until it works again");
                        }
                        failures += 1;
                        backoff = (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                        tokio::select! {
                            _ = tokio::time::sleep(backoff) => {}
                            _ = stop_accept.changed() => return,
                        }
                    }
                },
                _ = stop_accept.changed() => return,
            }
        }
    }));
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
    let server = P::server(&cfg, ctx);
    let dc = cluster.topology.dc_of(node);
    let wan: Vec<u64> =
        (0..n).map(|i| cluster.wan_one_way_us[dc.idx()][cluster.topology.dc_of(NodeId(i as u32)).idx()]).collect();
    let mut store = MvStore::new();
    for (k, v) in recovered.versions {
        store.restore(&k, v);
    }
    if let Some(meta) = recovered.meta {
        store.set_meta(meta);
        store.take_dirty_meta();
    }
    store.enable_journal();
    let mut next_seq = vec![1u64; n];
    for (to, s) in &recovered.next_seq {
        next_seq[to.idx()] = *s;
    }
    // What each peer has acknowledged, as far as the log knows: the first
    // message still in the outbox, or everything below the next number.
    let logged_acked: Vec<u64> = (0..n)
        .map(|i| match recovered.outbox.get(&NodeId(i as u32)).and_then(|v| v.first()) {
            Some((seq, _)) => *seq,
            None => next_seq[i],
        })
        .collect();
    for (a, &l) in acked.iter().zip(&logged_acked) {
        a.store(l, Ordering::Relaxed);
    }
    let mut delivered = vec![0u64; n];
    for (from, s) in &recovered.delivered {
        delivered[from.idx()] = *s;
    }
    let mut pl = ProtocolLoop::<P> {
        node,
        dc,
        server,
        store,
        journal_spare: Vec::new(),
        wal,
        fsync: cluster.config.storage.fsync,
        sync_off_thread: matches!(threads, NodeThreads::Own),
        group: Duration::from_millis(cluster.config.storage.group_commit_ms.max(1)),
        inputs: in_rx,
        clients: FxHashMap::default(),
        links,
        acked,
        logged_acked,
        wan_us: wan,
        next_seq,
        delivered,
        durable_delivered,
        timers: BinaryHeap::new(),
        timer_seq: 0,
        short_timer: false,
        clock_floor_us: recovered.clock_floor_us,
        persisted_floor_us: recovered.clock_floor_us,
        out: Vec::new(),
        held: Vec::new(),
        release_spare: Vec::new(),
        reply_pipes: Vec::new(),
        last_sync: Instant::now(),
        inbox_dry: true,
        metrics: metrics.clone(),
        stopping: false,
        logged_peers: (0..n).map(|i| recovered.peer_incarnations.get(&NodeId(i as u32)).copied()).collect(),
        peers,
        _node_dir: node_dir,
        snapshot_bytes: cluster.config.storage.snapshot_bytes.max(1),
        checkpoint_slice: Duration::from_micros(cluster.config.storage.checkpoint_slice_us),
        freezing: None,
        compaction: None,
        freeze_spare: FreezeBuffers::default(),
        in_progress: FxHashMap::default(),
        turn_started: Instant::now(),
        released_at: Instant::now(),
        by_kind: Kept::default(),
        samples: Kept::default(),
    };
    let outbox = recovered.outbox;
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
        pl.resend_outbox(outbox);
        // Recovered, listening, links started: `/readyz` says so.
        pl.metrics.serving.store(true, Ordering::Relaxed);
        pl.run().await;
        // However the loop ended (stopped, or the log failed), the node's
        // network tasks end with it.
        let _ = stop_after.send(true);
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

/// Where a node runs its network tasks (connections, links, the HTTP and
/// Redis listeners). The protocol loop always has a thread of its own.
pub enum NodeThreads<'a> {
    /// On the protocol loop's thread, one current-thread runtime for
    /// everything, as redis-server runs its event loop: a request reaches
    /// the protocol, and its reply the connection, without waking another
    /// thread. On two cores that hand-off cost about a third of the Redis
    /// front door's throughput (BENCHMARKS.md). A server process, and an
    /// embedded cluster of one node, run this way.
    Own,
    /// On a runtime the caller owns, shared with the other nodes of an
    /// embedded cluster: with a runtime per node the threads outnumber the
    /// cores, and the 3-DC demo's six nodes ran 0.63-0.98x as fast for
    /// every protocol but COPS-GT (BENCHMARKS.md).
    Shared(&'a tokio::runtime::Handle),
}

/// Log the versions stored since the journal was last taken, as they stand
/// in the store now ([`MvStore::take_journal`]): serialized from the store,
/// not from a copy made at each insert. `spare` is the buffer handed back
/// for the next turn. Stops at the first failed append.
fn log_journal<V: Versioned + Clone + serde::Serialize>(
    store: &mut MvStore<V>,
    spare: &mut Vec<(KeyIndex, V::Order)>,
    wal: &mut Wal,
) -> Result<(), WalError> {
    let journal = store.take_journal(std::mem::take(spare));
    let mut logged = Ok(());
    for (at, &(index, order)) in journal.iter().enumerate() {
        store.warm_ahead(&journal, at);
        let Some((key, version)) = store.journaled(index, order) else { continue };
        if let Err(e) = wal.append_version(key, version) {
            logged = Err(e);
            break;
        }
    }
    *spare = journal;
    logged
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

// ------------------------------------------------------------ connections

struct Acceptor<M> {
    tls: NodeTls,
    /// With `[auth]`: the tokens a client session must show.
    tokens: Option<Arc<Tokens>>,
    cluster: Arc<Cluster>,
    node: NodeId,
    input: mpsc::UnboundedSender<Input<M>>,
    delivered: Arc<Vec<AtomicU64>>,
    next_client: Arc<AtomicU32>,
    /// Per source node: held while a connection from it pushes a batch, and
    /// bumped (a generation) by each new connection, so an old connection's
    /// reader can never interleave with its replacement's.
    source_locks: Arc<Vec<Mutex<u64>>>,
    metrics: Arc<NodeMetrics>,
    incarnation: u64,
    peers: Arc<PeerIncarnations>,
    /// Connections end with the node: a stopped node (restarted in the same
    /// process) must not leave readers that swallow its peers' frames.
    stop: watch::Receiver<bool>,
}

impl<M> Clone for Acceptor<M> {
    fn clone(&self) -> Self {
        Acceptor {
            tls: self.tls.clone(),
            tokens: self.tokens.clone(),
            cluster: self.cluster.clone(),
            node: self.node,
            input: self.input.clone(),
            delivered: self.delivered.clone(),
            next_client: self.next_client.clone(),
            source_locks: self.source_locks.clone(),
            metrics: self.metrics.clone(),
            incarnation: self.incarnation,
            peers: self.peers.clone(),
            stop: self.stop.clone(),
        }
    }
}

/// Answer with a typed refusal, then close gracefully (shut our side,
/// with TLS's close_notify, and drain what the peer already sent:
/// [`crate::linger::close_after_refusal`]), so that the refusal is read
/// rather than overtaken by a reset.
async fn refuse<M: Message>(s: &mut (impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin), e: WireError) {
    let _ = s.write_all(&encode::<M>(&Wire::Refused(e))).await;
    crate::linger::close_after_refusal(s).await;
}

/// Write one frame and flush it (TLS may hold written bytes until a flush).
async fn send(w: &mut (impl tokio::io::AsyncWrite + Unpin), frame: &[u8]) -> std::io::Result<()> {
    w.write_all(frame).await?;
    w.flush().await
}

impl<M: Message> Acceptor<M> {
    async fn serve(self, tcp: TcpStream) {
        let _ = tcp.set_nodelay(true);
        let max = self.cluster.config.limits.max_frame_bytes;
        // The handshake and the hello share one deadline: a connection that
        // stalls in either holds a descriptor for at most this long.
        let deadline = tokio::time::Instant::now() + Duration::from_millis(self.cluster.config.limits.hello_timeout_ms);
        let mut s = match tokio::time::timeout_at(deadline, self.tls.accept(tcp)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                self.metrics.refuse("tls");
                tracing::info!(node = self.node.0, "TLS handshake refused: {e}");
                return;
            }
            Err(_) => return,
        };
        let hello = match tokio::time::timeout_at(deadline, read_frame(&mut s, max)).await {
            Ok(Ok(Some(b))) => decode::<M>(&b),
            Ok(Err(e)) => Err(e),
            _ => return,
        };
        let cluster_id = &self.cluster.config.cluster_id;
        match hello {
            Ok(Wire::HelloPeer { format, .. } | Wire::HelloClient { format, .. }) if format != WIRE_FORMAT => {
                self.metrics.refuse("wire_format");
                tracing::warn!(node = self.node.0, got = format, "refusing a hello of another data format");
                refuse::<M>(&mut s, WireError::Format { got: format, want: WIRE_FORMAT }).await
            }
            Ok(Wire::HelloPeer { cluster_id: got, from, to, incarnation, format: _ }) => {
                if &got != cluster_id {
                    self.metrics.refuse("wrong_cluster");
                    return refuse::<M>(&mut s, WireError::WrongCluster { got }).await;
                }
                if !self.cluster.topology.contains(from) {
                    self.metrics.refuse("unknown_node");
                    return refuse::<M>(&mut s, WireError::UnknownNode(from.0)).await;
                }
                if to != self.node {
                    self.metrics.refuse("not_for_me");
                    return refuse::<M>(&mut s, WireError::NotForMe { me: self.node.0, to: to.0 }).await;
                }
                if !s.proves(&node_name(from)) {
                    self.metrics.refuse("unauthenticated");
                    tracing::warn!(
                        node = self.node.0,
                        from = from.0,
                        "refusing a peer hello whose certificate is not node {}'s",
                        from.0
                    );
                    return refuse::<M>(&mut s, WireError::Unauthenticated { claimed: node_name(from) }).await;
                }
                if let Err(known) = self.peers.check(from, incarnation) {
                    self.metrics.refuse("stale_incarnation");
                    tracing::error!(
                        node = self.node.0,
                        from = from.0,
                        known = format!("{known:x}"),
                        got = format!("{incarnation:x}"),
                        "refusing a peer that came back as another incarnation (lost data dir, or an impostor); \
                         its sequence numbers no longer match this node's marks"
                    );
                    return refuse::<M>(&mut s, WireError::StaleIncarnation { node: from.0, known, got: incarnation })
                        .await;
                }
                self.serve_peer(s, from).await
            }
            Ok(Wire::HelloClient { cluster_id: got, token, format: _ }) => {
                if &got != cluster_id {
                    self.metrics.refuse("wrong_cluster");
                    return refuse::<M>(&mut s, WireError::WrongCluster { got }).await;
                }
                // A node's certificate may open client sessions too: its
                // Redis front door is a client of its own cluster.
                let nodes = self.cluster.topology.nodes() as u32;
                if !s.proves(CLIENT_NAME) && !(0..nodes).any(|i| s.proves(&node_name(NodeId(i)))) {
                    self.metrics.refuse("unauthenticated");
                    return refuse::<M>(&mut s, WireError::Unauthenticated { claimed: CLIENT_NAME.into() }).await;
                }
                match role_of(self.tokens.as_deref(), token.as_deref()) {
                    Ok(role) => self.serve_client(s, role).await,
                    Err(e) => {
                        self.metrics.refuse(e.reason());
                        tracing::info!(node = self.node.0, "refused a client session: {e}");
                        refuse::<M>(&mut s, e).await
                    }
                }
            }
            Ok(_) => {
                self.metrics.refuse("no_hello");
                refuse::<M>(&mut s, WireError::NoHello).await
            }
            Err(e) => {
                self.metrics.refuse("bad_frame");
                refuse::<M>(&mut s, WireError::BadFrame(e.to_string())).await
            }
        }
    }

    async fn serve_peer(self, s: Conn, from: NodeId) {
        let mut stop = self.stop.clone();
        let max = self.cluster.config.limits.max_frame_bytes;
        let (rd, mut wr) = tokio::io::split(s);
        let mut rd = FrameReader::new(rd, max);
        let my_gen = {
            let mut g = self.source_locks[from.idx()].lock().await;
            *g += 1;
            *g
        };
        let next = self.delivered[from.idx()].load(Ordering::Acquire) + 1;
        if send(&mut wr, &encode::<M>(&Wire::Welcome { next_seq: next, incarnation: self.incarnation })).await.is_err()
        {
            return;
        }
        // Acknowledge durable progress every few milliseconds.
        let delivered = self.delivered.clone();
        let acker = tokio::spawn(async move {
            let mut last = 0;
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let d = delivered[from.idx()].load(Ordering::Acquire);
                if d != last {
                    last = d;
                    if send(&mut wr, &encode::<M>(&Wire::Ack { next_seq: d + 1 })).await.is_err() {
                        return;
                    }
                }
            }
        });
        loop {
            let read = tokio::select! {
                r = rd.next_frame() => r,
                _ = stop.changed() => break,
            };
            let frame = match read {
                Ok(Some(body)) => decode::<M>(body),
                Ok(None) => break,
                Err(e) => Err(e),
            };
            match frame {
                Ok(Wire::Ephemeral { after_seq, msg }) => {
                    let g = self.source_locks[from.idx()].lock().await;
                    if *g != my_gen {
                        break;
                    }
                    if self.input.send(Input::PeerEphemeral { from, after_seq, msg }).is_err() {
                        break;
                    }
                }
                Ok(Wire::Peer { first_seq, msgs }) => {
                    let g = self.source_locks[from.idx()].lock().await;
                    if *g != my_gen {
                        break; // superseded by a newer connection from the same peer
                    }
                    if self.input.send(Input::Peer { from, first_seq, msgs }).is_err() {
                        break;
                    }
                }
                Ok(other) => {
                    tracing::warn!(node = self.node.0, from = from.0, "unexpected frame from a peer: {other:?}");
                    break;
                }
                Err(e) => {
                    if !matches!(e, FrameError::Io(_) | FrameError::Truncated) {
                        tracing::warn!(node = self.node.0, from = from.0, "bad frame from a peer: {e}");
                    }
                    break;
                }
            }
        }
        acker.abort();
    }

    /// A client session with the rights of `role`.
    async fn serve_client(self, s: Conn, role: Role) {
        let mut stop = self.stop.clone();
        let limits = self.cluster.config.limits.clone();
        let (rd, mut wr) = tokio::io::split(s);
        let mut rd = FrameReader::new(rd, limits.max_frame_bytes);
        let client = ClientId(self.next_client.fetch_add(1, Ordering::Relaxed));
        if send(&mut wr, &encode::<M>(&Wire::WelcomeClient { node: self.node, client })).await.is_err() {
            return;
        }
        // Replies go out through the pipe: the protocol thread writes them (see
        // `crate::reply_pipe`), and this connection's refusals go there too.
        let pipe = Arc::new(ReplyPipe::new(wr));
        let writing = pipe.clone();
        let writer = tokio::spawn(async move { writing.writer().await });
        if self.input.send(Input::ClientHello { client, replies: Replies::Frames(PipeSender::new(&pipe, 0)) }).is_err()
        {
            pipe.end();
            return;
        }
        // The connection's logical sessions ([`Wire::RequestOn`]), opened on
        // their first request; slot 0 is the hello's.
        let mut slots: Vec<Option<ClientId>> = vec![Some(client)];
        self.metrics.clients.inc();
        let mut idle = crate::idle::Idle::new(Duration::from_millis(limits.idle_timeout_ms));
        // Made once, not once per frame (a new `changed()` registers anew).
        let stopped = stop.changed();
        tokio::pin!(stopped);
        loop {
            // Closing mid-frame is fine: a client that sends half a frame and
            // stalls for the idle timeout is gone either way.
            let read = tokio::select! {
                // A frame already buffered goes first, without polling the
                // other two (some 600 instructions per request). A client
                // that never pauses cannot hold off a stop: a stopped node's
                // protocol loop refuses its next request (ShuttingDown).
                biased;
                r = rd.next_frame() => Ok(r),
                _ = &mut stopped => break,
                () = idle.expired() => Err(()),
            };
            idle.heard();
            let frame = match read {
                Err(_) => {
                    tracing::debug!(node = self.node.0, client = client.0, "closing an idle client connection");
                    break;
                }
                Ok(Ok(Some(body))) => decode::<M>(body),
                Ok(Ok(None)) => break,
                Ok(Err(e)) => Err(e),
            };
            let refusal = match frame {
                Ok(Wire::Request(msg)) => self.admit_request(client, msg, role, &limits),
                Ok(Wire::RequestOn { slot, msg }) => match self.slot_client(&mut slots, slot, &pipe) {
                    Ok(c) => self.admit_request(c, msg, role, &limits),
                    Err(e) => Some(e),
                },
                Ok(_) => {
                    pipe.send(encode::<M>(&Wire::Refused(WireError::BadFrame("expected a request".into()))));
                    self.metrics.refuse("bad_frame");
                    break;
                }
                Err(FrameError::Io(_)) | Err(FrameError::Truncated) => break,
                Err(e) => {
                    // A malformed frame leaves the stream at an unknown offset: refuse and close.
                    pipe.send(encode::<M>(&Wire::Refused(WireError::BadFrame(e.to_string()))));
                    self.metrics.refuse("bad_frame");
                    break;
                }
            };
            match refusal {
                Some(WireError::ShuttingDown) => {
                    pipe.send(encode::<M>(&Wire::Refused(WireError::ShuttingDown)));
                    break;
                }
                Some(e) => {
                    self.metrics.refuse(e.reason());
                    pipe.send(encode::<M>(&Wire::Refused(e)));
                }
                None => {}
            }
        }
        for client in slots.into_iter().flatten() {
            let _ = self.input.send(Input::ClientGone { client });
        }
        self.metrics.clients.dec();
        pipe.end();
        let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
    }

    /// Hand an admitted request of session `client` to the protocol thread;
    /// the refusal to send back otherwise.
    fn admit_request(&self, client: ClientId, msg: M, role: Role, limits: &crate::config::Limits) -> Option<WireError> {
        if let Err(e) = admit(&msg, role, limits) {
            return Some(e);
        }
        self.input.send(Input::Client { client, msg }).err().map(|_| WireError::ShuttingDown)
    }

    /// The session of `slot` on this connection, opened now if it is new.
    fn slot_client(
        &self,
        slots: &mut Vec<Option<ClientId>>,
        slot: u32,
        pipe: &Arc<ReplyPipe>,
    ) -> Result<ClientId, WireError> {
        if slot >= MAX_SLOTS_PER_CONNECTION {
            return Err(WireError::TooManySlots { slot, max: MAX_SLOTS_PER_CONNECTION });
        }
        let i = slot as usize;
        if slots.len() <= i {
            slots.resize(i + 1, None);
        }
        if let Some(c) = slots[i] {
            return Ok(c);
        }
        let client = ClientId(self.next_client.fetch_add(1, Ordering::Relaxed));
        self.input
            .send(Input::ClientHello { client, replies: Replies::Frames(PipeSender::new(pipe, slot)) })
            .map_err(|_| WireError::ShuttingDown)?;
        slots[i] = Some(client);
        Ok(client)
    }
}

// ------------------------------------------------------------ protocol thread

enum Out<M> {
    Send(NodeId, M),
    Reply(ClientId, M),
}

/// The loop's timers: deadline, the order they were set in, token.
type TimerHeap = BinaryHeap<Reverse<(Instant, u64, u64)>>;

/// Output of a committed turn, waiting for release.
enum Release<M> {
    Peer { to: NodeId, seq: u64, msg: M },
    Ephemeral { to: NodeId, after_seq: u64, msg: M },
    Transient { to: NodeId, after_seq: u64, msg: M },
    Reply(ClientId, M),
}

struct NEnv<'a, M, V: Versioned> {
    node: NodeId,
    dc: DcId,
    now: u64,
    store: &'a mut MvStore<V>,
    out: &'a mut Vec<Out<M>>,
    metrics: &'a NodeMetrics,
    samples: &'a mut Kept<(Counter, Counter)>,
    /// Timers go straight into the loop's heap, their deadline taken when
    /// the handler sets them: one due within the turn fires in it.
    timers: &'a mut TimerHeap,
    timer_seq: &'a mut u64,
    short_timer: &'a mut bool,
}

/// Timers due this soon are fired between a turn's inputs, once due
/// ([`ProtocolLoop::fire_due`]), and spun out at its end.
const SHORT_TIMER_US: u64 = 2;

impl<M, V: Versioned + Clone> ServerEnv<M, V> for NEnv<'_, M, V> {
    fn node(&self) -> NodeId {
        self.node
    }
    fn now_us(&self) -> u64 {
        self.now
    }
    fn send(&mut self, to: NodeId, msg: M) {
        self.out.push(Out::Send(to, msg));
    }
    fn reply(&mut self, to: ClientId, msg: M) {
        self.out.push(Out::Reply(to, msg));
    }
    fn set_timer(&mut self, after_us: u64, token: u64) {
        *self.short_timer |= after_us <= SHORT_TIMER_US;
        *self.timer_seq += 1;
        self.timers.push(Reverse((Instant::now() + Duration::from_micros(after_us), *self.timer_seq, token)));
    }
    fn store(&mut self) -> &mut MvStore<V> {
        self.store
    }
    fn observe(&mut self, obs: Observation<'_>) {
        match obs {
            Observation::Visible { origin, written_us, .. } => self.visible(origin, written_us),
            Observation::Stable { stable_us } => {
                self.metrics.stable_lag_seconds.set(self.now.saturating_sub(stable_us) as f64 / 1e6);
            }
            Observation::Blocked { waited_us, .. } => {
                self.metrics.blocked.inc();
                self.metrics.blocked_seconds.inc_by(waited_us as f64 / 1e6);
            }
            Observation::Sample { what, value } => {
                let metrics = self.metrics;
                let i = self.samples.index(what, || metrics.sample_counters(what));
                let (count, sum) = self.samples.get(i);
                count.inc();
                sum.inc_by(value);
            }
        }
    }
    /// The metrics count what became visible, never look at it: no copy
    /// of the key or value out of the store.
    fn observe_visible_in_store(
        &mut self,
        origin: DcId,
        written_us: u64,
        read: impl for<'s> FnOnce(&'s MvStore<V>) -> Option<(&'s [u8], &'s V)>,
    ) {
        if read(self.store).is_some() {
            self.visible(origin, written_us);
        }
    }
}

impl<M, V: Versioned> NEnv<'_, M, V> {
    /// [`Observation::Visible`]: a local write counted, a remote one's
    /// visibility latency recorded.
    fn visible(&mut self, origin: DcId, written_us: u64) {
        if origin == self.dc {
            self.metrics.local_writes.inc();
        } else {
            self.metrics.remote_visible.inc();
            self.metrics
                .visibility_seconds
                .get_or_create(&crate::metrics::FromDc { from_dc: origin.0 })
                .observe(self.now.saturating_sub(written_us) as f64 / 1e6);
        }
    }
}

/// The environment of one handler call: this node's clock reading and
/// disjoint borrows of the loop's store, output buffer and metrics, so the
/// caller can still borrow `self.server` (a method would borrow all of `self`).
macro_rules! node_env {
    ($s:ident) => {{
        let now = $s.now_us();
        NEnv {
            node: $s.node,
            dc: $s.dc,
            now,
            store: &mut $s.store,
            out: &mut $s.out,
            metrics: &$s.metrics,
            samples: &mut $s.samples,
            timers: &mut $s.timers,
            timer_seq: &mut $s.timer_seq,
            short_timer: &mut $s.short_timer,
        }
    }};
}

/// A checkpoint begun: the log is rotated and the node's other durable
/// state captured; the store's copy ([`MvStore::begin_freeze`]) is made a
/// slice per turn, so no request waits behind all of it.
struct Freezing<P: Protocol> {
    pending: PendingCheckpoint,
    records: Vec<LogRecord<P::Version, P::Msg>>,
    logged_acked: Vec<u64>,
    started: Instant,
    /// Time this thread spent setting the log aside.
    rotate_us: u64,
    /// Time this thread spent copying, and in how many turns.
    copy_us: u64,
    turns: u32,
}

/// Keys a checkpoint copies between two looks at the clock.
const FREEZE_STEP_KEYS: usize = 16;

/// The largest copy buffers a node keeps between checkpoints. Reusing them
/// spares the node's thread the kernel's zeroing of fresh pages for the
/// whole copy at every checkpoint, at the price of holding one snapshot's
/// worth of memory; past this size the memory is given back instead.
const FREEZE_SPARE_MAX_BYTES: usize = 256 << 20;

struct ProtocolLoop<P: Protocol> {
    node: NodeId,
    dc: DcId,
    server: P::Server,
    store: MvStore<P::Version>,
    /// The journal buffer drained last, handed back to the store
    /// ([`MvStore::take_journal`]) so the next turn's reuses its capacity.
    journal_spare: Vec<(KeyIndex, <P::Version as Versioned>::Order)>,
    wal: Wal,
    fsync: Fsync,
    /// Sync the log on tokio's blocking pool, not on this thread: when the
    /// connections share this thread ([`NodeThreads::Own`]) they go on
    /// reading meanwhile. Otherwise the hand-off to the pool and back would
    /// only add two wake-ups per sync.
    sync_off_thread: bool,
    group: Duration,
    inputs: mpsc::UnboundedReceiver<Input<P::Msg>>,
    /// Where each open session's replies go.
    clients: FxHashMap<ClientId, Replies<P::Msg>>,
    links: Vec<Option<mpsc::UnboundedSender<LinkItem<P::Msg>>>>,
    acked: Vec<Arc<AtomicU64>>,
    logged_acked: Vec<u64>,
    wan_us: Vec<u64>,
    next_seq: Vec<u64>,
    delivered: Vec<u64>,
    durable_delivered: Arc<Vec<AtomicU64>>,
    timers: TimerHeap,
    timer_seq: u64,
    /// A handler this turn set a timer due within `SHORT_TIMER_US`: the
    /// turn fires the due ones between its inputs.
    short_timer: bool,
    clock_floor_us: u64,
    persisted_floor_us: u64,
    out: Vec<Out<P::Msg>>,
    /// Replies and peer messages of turns whose log records await the next
    /// group sync.
    held: Vec<Release<P::Msg>>,
    /// The release buffer of the last turn, kept for its capacity (as
    /// `journal_spare`). A turn of pipelined requests releases hundreds of
    /// messages, so a buffer sized afresh was a large allocation and free
    /// per turn.
    release_spare: Vec<Release<P::Msg>>,
    /// The connections this turn's release queued replies for, each once:
    /// their buffers are written when the turn's replies are all in.
    reply_pipes: Vec<Arc<ReplyPipe>>,
    last_sync: Instant,
    /// The last turn took every input there was ([`Fsync::Group`] syncs then).
    inbox_dry: bool,
    metrics: Arc<NodeMetrics>,
    stopping: bool,
    /// Peer incarnations as logged; the shared table may know newer ones.
    logged_peers: Vec<Option<u64>>,
    peers: Arc<PeerIncarnations>,
    /// Holds the data directory's lock for as long as the protocol runs.
    _node_dir: NodeDir,
    snapshot_bytes: u64,
    /// How long one turn may spend copying the store for a checkpoint.
    checkpoint_slice: Duration,
    /// A checkpoint whose copy of the store is being made, a slice a turn.
    freezing: Option<Freezing<P>>,
    /// The thread writing a snapshot, while it runs.
    compaction: Option<std::thread::JoinHandle<Result<FreezeBuffers, WalError>>>,
    /// The last snapshot's copy buffers, for the next one's copy (see
    /// [`FreezeBuffers`]; kept only up to [`FREEZE_SPARE_MAX_BYTES`]).
    freeze_spare: FreezeBuffers,
    /// Each client's request in progress: its kind and arrival, for the
    /// latency metric.
    in_progress: FxHashMap<ClientId, (usize, Instant)>,
    /// When the batch being handled was taken from the inbox, and when the
    /// last commit released its output: read once per turn, not per request
    /// (a clock read per request and per reply was 2 % of the node thread
    /// under pipelined load). A request's latency here is from its batch's
    /// start to the release of its reply, which is when it left.
    turn_started: Instant,
    released_at: Instant,
    /// Each request kind's counter and latency histogram (`in_progress`
    /// holds the index).
    by_kind: Kept<(Counter, Histogram)>,
    /// Each protocol sample's (count, sum) counters, by name, so a sample
    /// (several per write for some protocols) does not look them up in
    /// their families.
    samples: Kept<(Counter, Counter)>,
}

impl<P: Protocol> ProtocolLoop<P> {
    fn now_us(&self) -> u64 {
        system_us().max(self.clock_floor_us)
    }

    /// Queue the recovered outbox again: the links resend whatever the peers
    /// have not acknowledged.
    fn resend_outbox(&mut self, outbox: std::collections::BTreeMap<NodeId, Vec<(u64, P::Msg)>>) {
        for (to, msgs) in outbox {
            if let Some(Some(link)) = self.links.get(to.idx()) {
                for (seq, msg) in msgs {
                    let due = tokio::time::Instant::now() + Duration::from_micros(self.wan_us[to.idx()]);
                    if link.send(LinkItem::Seq { seq, msg, due }).is_err() {
                        return;
                    }
                }
            }
        }
    }

    async fn run(&mut self) {
        {
            let mut env = node_env!(self);
            self.server.on_start(&mut env);
        }
        self.commit().await;
        let mut batch = Vec::with_capacity(1024);
        // One timer for the loop's next deadline, moved only when the
        // deadline moves. A fresh one per turn registered anew with tokio's
        // timer wheel, which then woke the runtime's driver through its
        // eventfd: one `write` syscall per turn for every protocol with a
        // periodic timer (Cure's front door: 955 of them per 20 000 SETs).
        const NEAR: Duration = Duration::from_micros(50);
        let mut wake = Box::pin(tokio::time::sleep_until(tokio::time::Instant::now()));
        let mut wake_at = None;
        while !self.stopping {
            let mut deadline = self.timers.peek().map(|Reverse((t, _, _))| *t);
            if !self.held.is_empty() {
                let sync_at = self.last_sync + self.group;
                deadline = Some(deadline.map_or(sync_at, |d| d.min(sync_at)));
            }
            if self.freezing.is_some() {
                // A checkpoint's copy goes on between requests, idle or not.
                deadline = Some(Instant::now());
            }
            let first = match deadline {
                // Due within a few microseconds (Cure's clock wait for a
                // second write in one microsecond; a checkpoint's copy):
                // tokio's timers fire on whole milliseconds, and arming one
                // wakes the driver through its eventfd, so let the
                // connection tasks run once and take what they queued.
                Some(d) if d <= Instant::now() + NEAR => {
                    tokio::task::yield_now().await;
                    match self.inputs.try_recv() {
                        Ok(i) => Some(i),
                        Err(mpsc::error::TryRecvError::Empty) => None,
                        Err(mpsc::error::TryRecvError::Disconnected) => break,
                    }
                }
                Some(d) => {
                    if wake_at != Some(d) {
                        wake.as_mut().reset(tokio::time::Instant::from_std(d));
                        wake_at = Some(d);
                    }
                    tokio::select! {
                        biased;
                        i = self.inputs.recv() => match i {
                            Some(i) => Some(i),
                            None => break,
                        },
                        () = wake.as_mut() => None,
                    }
                }
                None => match self.inputs.recv().await {
                    Some(i) => Some(i),
                    None => break,
                },
            };
            batch.extend(first);
            self.inbox_dry = false;
            while batch.len() < 1024 {
                match self.inputs.try_recv() {
                    Ok(i) => batch.push(i),
                    Err(_) => {
                        self.inbox_dry = true;
                        break;
                    }
                }
            }
            self.turn_started = Instant::now();
            self.warm(&batch);
            for input in batch.drain(..) {
                self.handle(input);
                if self.short_timer {
                    self.fire_due();
                }
            }
            self.fire_timers();
            self.commit().await;
            if !self.inbox_dry {
                // The connection tasks share this thread: let them run
                // before the next full batch.
                tokio::task::yield_now().await;
            }
        }
        // Everything handled so far is made durable before the thread ends,
        // and a snapshot being written is finished (a restart must not open
        // the log while it is).
        self.fsync = Fsync::Always;
        self.commit().await;
        while self.freezing.is_some() {
            self.advance_checkpoint(Duration::MAX);
        }
        self.reap_compaction(true);
    }

    /// Look up the keys the batch's messages hint at ([`Message::key_hint`])
    /// before any is handled, so their cache misses overlap
    /// ([`MvStore::warm`]).
    fn warm(&self, batch: &[Input<P::Msg>]) {
        for input in batch {
            let msgs = match input {
                Input::Client { msg, .. } | Input::PeerEphemeral { msg, .. } => std::slice::from_ref(msg),
                Input::Peer { msgs, .. } => msgs,
                _ => &[],
            };
            for key in msgs.iter().filter_map(|m| m.key_hint()) {
                self.store.warm(key);
            }
        }
    }

    fn handle(&mut self, input: Input<P::Msg>) {
        let mut env = node_env!(self);
        match input {
            Input::ClientHello { client, replies } => {
                self.clients.insert(client, replies);
            }
            Input::ClientGone { client } => {
                self.clients.remove(&client);
                self.in_progress.remove(&client);
            }
            Input::Client { client, msg } => {
                let (name, metrics) = (msg.kind(), &self.metrics);
                let kind = self.by_kind.index(name, || metrics.request_metrics(name));
                self.by_kind.get(kind).0.inc();
                self.in_progress.insert(client, (kind, self.turn_started));
                self.server.on_client(&mut env, client, msg);
            }
            Input::Peer { from, first_seq, msgs } => {
                for (i, msg) in msgs.into_iter().enumerate() {
                    self.deliver_peer(from, first_seq + i as u64, msg);
                }
            }
            Input::PeerEphemeral { from, after_seq, msg } => {
                if !msg.ephemeral() && !msg.transient() {
                    tracing::warn!(
                        node = self.node.0,
                        from = from.0,
                        kind = msg.kind(),
                        "a sequenced message arrived unsequenced; dropped"
                    );
                    return;
                }
                // Only after everything its sender sent before it.
                if self.delivered[from.idx()] + 1 < after_seq {
                    return;
                }
                self.metrics.peer_in.inc();
                self.server.on_peer(&mut env, from, msg);
            }
            Input::Stop => self.stopping = true,
        }
    }

    /// Deliver the sequenced message `seq` from `from`, once and in order.
    fn deliver_peer(&mut self, from: NodeId, seq: u64, msg: P::Msg) {
        let last = self.delivered[from.idx()];
        if seq <= last {
            return; // a duplicate resent after a reconnect
        }
        if seq != last + 1 {
            tracing::error!(node = self.node.0, from = from.0, seq, last, "peer sequence gap; dropping");
            return;
        }
        self.delivered[from.idx()] = seq;
        self.metrics.peer_in.inc();
        let mut env = node_env!(self);
        self.server.on_peer(&mut env, from, msg);
        // The delivery mark follows the handler's effects in the log.
        let _ = log_journal(env.store, &mut self.journal_spare, &mut self.wal);
        if let Some((bytes, sync)) = env.store.take_dirty_meta() {
            let r = LogRecord::<P::Version, P::Msg>::Meta { bytes };
            let _ = if sync { self.wal.append(&r) } else { self.wal.append_unsynced(&r) };
        }
        let _ = self.wal.append::<P::Version, P::Msg>(&LogRecord::Delivered { from, seq });
    }

    /// Between a turn's inputs, after a handler set a short timer: fire the
    /// timers due now. Cure parks a write that comes in the microsecond of
    /// its partition's last one for 1 µs; a turn of many writes handles
    /// several a microsecond, and each parked one goes in as soon as its
    /// microsecond has come, between the other inputs, instead of all at
    /// the turn's end (where each needs a microsecond of its own).
    fn fire_due(&mut self) {
        self.short_timer = false;
        self.fire_until(Instant::now());
    }

    /// Fire every timer due at `now_i`. One a handler sets meanwhile is due
    /// after `now_i`, so this ends.
    fn fire_until(&mut self, now_i: Instant) {
        while let Some(Reverse((t, _, token))) = self.timers.peek().copied() {
            if t > now_i {
                break;
            }
            self.timers.pop();
            let mut env = node_env!(self);
            self.server.on_timer(&mut env, token);
        }
    }

    /// At a turn's end: fire the due timers, spinning out waits of up to
    /// `SHORT_TIMER_US`, `SPIN_PER_TURN` in all (the parked writes
    /// [`Self::fire_due`] found not yet due). Left to the next turn, such a
    /// timer waited a round of the connection tasks, and the writes
    /// retried together collided again (under `causeway bench`, Cure
    /// parked 68 % of its writes, each for ~225 µs on average).
    fn fire_timers(&mut self) {
        const SPIN_PER_TURN: Duration = Duration::from_micros(50);
        let started = Instant::now();
        for pass in 0.. {
            self.short_timer = false;
            let mut now_i = Instant::now();
            // Past the budget, what this turn's timers set waits for the
            // next turn: a timer that sets itself again at 0 µs must not
            // hold the loop.
            if pass > 0 && now_i >= started + SPIN_PER_TURN {
                return;
            }
            let next = self.timers.peek().map(|Reverse((t, _, _))| *t);
            match next {
                Some(t) if t > now_i && t <= now_i + Duration::from_micros(SHORT_TIMER_US) => {
                    while now_i < t {
                        std::hint::spin_loop();
                        now_i = Instant::now();
                    }
                }
                Some(t) if t <= now_i => {}
                _ => return,
            }
            self.fire_until(now_i);
        }
    }

    /// Log what this turn changed, sync per policy, then release its output.
    async fn commit(&mut self) {
        let logged = log_journal(&mut self.store, &mut self.journal_spare, &mut self.wal);
        self.appended(logged);
        if let Some((bytes, sync)) = self.store.take_dirty_meta() {
            if sync {
                self.log(LogRecord::Meta { bytes });
            } else {
                self.log_unsynced(LogRecord::Meta { bytes });
            }
        }
        // Peer incarnations learned by a hello or a welcome.
        for (i, inc) in self.peers.snapshot().into_iter().enumerate() {
            if let Some(incarnation) = inc
                && self.logged_peers[i] != inc
            {
                self.logged_peers[i] = inc;
                self.log(LogRecord::PeerIncarnation { node: NodeId(i as u32), incarnation });
            }
        }
        // Acknowledgements the links received since the last turn.
        for i in 0..self.acked.len() {
            let a = self.acked[i].load(Ordering::Relaxed);
            if a > self.logged_acked[i] {
                self.logged_acked[i] = a;
                self.log(LogRecord::Acked { to: NodeId(i as u32), next_seq: a });
            }
        }
        let now = self.now_us();
        if now + CLOCK_LEASE_US / 2 > self.persisted_floor_us {
            // Written, not synced on its own account: an idle node would
            // otherwise sync twice a second for nothing else. The record is
            // in the file before this turn's output leaves, so it survives
            // the process being killed; it reaches the disk with the next
            // sync anything durable asks for, which covers every timestamp a
            // durable write or a journaled message carries. Only an
            // operating-system crash can lose it, and then only the floor
            // under timestamps that went out in heartbeats and tree
            // messages since the last sync; it matters only if the system
            // clock is also stepped back below them across the reboot.
            self.persisted_floor_us = now + CLOCK_LEASE_US;
            self.log_unsynced(LogRecord::ClockFloor { us: self.persisted_floor_us });
        }
        let mut out = std::mem::take(&mut self.out);
        let mut release = std::mem::take(&mut self.release_spare);
        release.reserve(out.len());
        for o in out.drain(..) {
            match o {
                Out::Send(to, msg) => {
                    if to.idx() >= self.links.len() || to == self.node {
                        tracing::error!(node = self.node.0, to = to.0, "protocol sent to an invalid node; dropped");
                        continue;
                    }
                    if msg.ephemeral() {
                        // Not journaled: a newer one supersedes it, and the
                        // protocol sends another on its next tick.
                        release.push(Release::Ephemeral { to, after_seq: self.next_seq[to.idx()], msg });
                        continue;
                    }
                    if msg.transient() {
                        // Not journaled: sent at most once (`Message::transient`).
                        release.push(Release::Transient { to, after_seq: self.next_seq[to.idx()], msg });
                        continue;
                    }
                    let seq = self.next_seq[to.idx()];
                    self.next_seq[to.idx()] += 1;
                    self.log_outbox(to, seq, &msg);
                    release.push(Release::Peer { to, seq, msg });
                }
                Out::Reply(c, msg) => release.push(Release::Reply(c, msg)),
            }
        }
        self.out = out;
        let sync_now = match self.fsync {
            Fsync::Always => true,
            Fsync::Never => false,
            Fsync::Group => self.inbox_dry || self.last_sync.elapsed() >= self.group || self.stopping,
        };
        let ok =
            if sync_now && self.sync_off_thread { self.wal.flush_synced().await } else { self.wal.flush(sync_now) };
        if let Err(e) = ok {
            // The log is the promise behind every acknowledgement: without it
            // this node must not acknowledge anything more.
            tracing::error!(node = self.node.0, "write-ahead log failed: {e}; stopping the node");
            self.stopping = true;
            return;
        }
        if self.fsync == Fsync::Group && !sync_now {
            self.held.append(&mut release);
            self.release_spare = release;
            return;
        }
        if sync_now {
            self.last_sync = Instant::now();
        }
        let mut held = std::mem::take(&mut self.held);
        self.released_at = Instant::now();
        for o in held.drain(..).chain(release.drain(..)) {
            self.release(o);
        }
        for pipe in self.reply_pipes.drain(..) {
            pipe.write_now();
        }
        self.held = held;
        self.release_spare = release;
        for (i, d) in self.delivered.iter().enumerate() {
            self.durable_delivered[i].store(*d, Ordering::Release);
        }
        self.reap_compaction(false);
        if self.freezing.is_some() {
            self.advance_checkpoint(self.checkpoint_slice);
        } else if self.wal.bytes > self.snapshot_bytes {
            self.checkpoint();
        }
        self.metrics.versions.set(self.store.version_count() as i64);
        self.metrics.keys.set(self.store.key_count() as i64);
        self.metrics.wal_bytes.set(self.wal.bytes as i64);
        NodeMetrics::catch_up(&self.metrics.wal_syncs, self.wal.syncs);
    }

    /// Compact the log: everything durable about this node, as one snapshot.
    /// Runs after a commit, so every record it replaces is already synced.
    /// The log is rotated and the small state captured now; the store is
    /// copied as it stands now too, but a slice per turn
    /// ([`ProtocolLoop::advance_checkpoint`]), and the snapshot is written by
    /// a thread of its own: a large store copied in one go stopped the node
    /// for about 1 µs per version (a 200 000-version store, 200 ms).
    fn checkpoint(&mut self) {
        if self.compaction.is_some() || self.freezing.is_some() {
            return;
        }
        let started = Instant::now();
        let pending = match self.wal.begin_checkpoint(self.fsync != Fsync::Never) {
            Ok(Some(p)) => p,
            Ok(None) => return,
            Err(e) => {
                tracing::error!(node = self.node.0, "snapshot failed: {e}; stopping the node");
                self.stopping = true;
                return;
            }
        };
        let mut records: Vec<LogRecord<P::Version, P::Msg>> = Vec::with_capacity(16);
        // Every peer's acknowledgement mark. With nothing unacknowledged it
        // equals the next sequence number, which must survive (the restarted
        // node must not resend from 1, or its peer would drop everything new
        // as duplicates); otherwise the copied outbox records carry it.
        for (i, &a) in self.logged_acked.iter().enumerate() {
            if a > 1 {
                records.push(LogRecord::Acked { to: NodeId(i as u32), next_seq: a });
            }
        }
        for (i, &seq) in self.delivered.iter().enumerate() {
            if seq > 0 {
                records.push(LogRecord::Delivered { from: NodeId(i as u32), seq });
            }
        }
        records.push(LogRecord::ClockFloor { us: self.persisted_floor_us });
        if let Some(m) = self.store.meta() {
            records.push(LogRecord::Meta { bytes: m.to_vec() });
        }
        for (i, inc) in self.logged_peers.iter().enumerate() {
            if let Some(incarnation) = *inc {
                records.push(LogRecord::PeerIncarnation { node: NodeId(i as u32), incarnation });
            }
        }
        // What the protocol's collection would drop stays out of the copy: a
        // stabilization protocol's store holds a superseded version of most
        // keys until its pass gets to them, which more than doubled its
        // snapshots over Eventual's (23 MB against 9 MB on DKVF's
        // configuration) and with them the checkpoint's time on this thread.
        let floor = self.server.snapshot_floor();
        self.store.begin_freeze(frame_versions::<P::Version>, std::mem::take(&mut self.freeze_spare), floor);
        let logged_acked = self.logged_acked.clone();
        let rotate_us = started.elapsed().as_micros() as u64;
        self.freezing = Some(Freezing { pending, records, logged_acked, started, rotate_us, copy_us: 0, turns: 0 });
        self.advance_checkpoint(self.checkpoint_slice);
    }

    /// Copy the store for the checkpoint under way for about `slice`; once
    /// the copy is complete, hand it to the snapshot thread, which puts it
    /// in the store's key order ([`causeway_core::Frozen::ordered`]: the snapshot
    /// does not depend on how the copy's slices fell) and writes it.
    fn advance_checkpoint(&mut self, slice: Duration) {
        let Some(f) = self.freezing.as_mut() else { return };
        let began = Instant::now();
        f.turns += 1;
        self.metrics.snapshot_copy_turns.inc();
        let copy = loop {
            if let Some(copy) = self.store.freeze_step(FREEZE_STEP_KEYS) {
                break Some(copy);
            }
            if began.elapsed() >= slice {
                break None;
            }
        };
        f.copy_us += began.elapsed().as_micros() as u64;
        let Some(copy) = copy else { return };
        let Freezing { pending, records, logged_acked, started, rotate_us, copy_us, turns } =
            self.freezing.take().expect("a checkpoint under way");
        let node = self.node.0;
        let handle = std::thread::Builder::new().name(format!("causeway-snapshot-{node}")).spawn(move || {
            let (keys, bytes) = (copy.chains(), copy.byte_len());
            pending
                .write(copy.ordered(), records.into_iter(), |to| logged_acked.get(to.idx()).copied().unwrap_or(0))?;
            tracing::info!(
                node,
                keys,
                bytes,
                rotate_ms = rotate_us / 1000,
                copy_ms = copy_us / 1000,
                turns,
                ms = started.elapsed().as_millis() as u64,
                "log compacted into a snapshot in the background"
            );
            Ok(copy.into_buffers())
        });
        match handle {
            Ok(h) => self.compaction = Some(h),
            Err(e) => {
                tracing::error!(node, "cannot start the snapshot thread: {e}; stopping the node");
                self.stopping = true;
            }
        }
    }

    /// Collect a finished background snapshot (or wait for it with `wait`).
    fn reap_compaction(&mut self, wait: bool) {
        let done = self.compaction.as_ref().is_some_and(|h| h.is_finished());
        if !(done || wait) {
            return;
        }
        let Some(h) = self.compaction.take() else { return };
        match h.join() {
            Ok(Ok(buffers)) => {
                self.metrics.snapshots.inc();
                if buffers.capacity_bytes() <= FREEZE_SPARE_MAX_BYTES {
                    self.freeze_spare = buffers;
                }
            }
            Ok(Err(e)) => {
                tracing::error!(node = self.node.0, "snapshot failed: {e}; stopping the node");
                self.stopping = true;
            }
            Err(_) => {
                tracing::error!(node = self.node.0, "the snapshot thread panicked; stopping the node");
                self.stopping = true;
            }
        }
    }

    fn log(&mut self, r: LogRecord<P::Version, P::Msg>) {
        let appended = self.wal.append(&r);
        self.appended(appended);
    }

    /// [`Self::log`] for a message to a peer, borrowed rather than copied
    /// (`&P::Msg` encodes as `P::Msg` does, so recovery reads it back as an
    /// ordinary outbox record).
    fn log_outbox(&mut self, to: NodeId, seq: u64, msg: &P::Msg) {
        let appended = self.wal.append(&LogRecord::<P::Version, &P::Msg>::Outbox { to, seq, msg });
        self.appended(appended);
    }

    /// [`Self::log`] for a record that asks for no sync of its own
    /// ([`Wal::append_unsynced`]).
    fn log_unsynced(&mut self, r: LogRecord<P::Version, P::Msg>) {
        let appended = self.wal.append_unsynced(&r);
        self.appended(appended);
    }

    /// A failed append stops the node: the log is the promise behind every
    /// acknowledgement.
    fn appended(&mut self, r: Result<(), WalError>) {
        if let Err(e) = r {
            tracing::error!(node = self.node.0, "write-ahead log append failed: {e}");
            self.stopping = true;
        }
    }

    fn release(&mut self, o: Release<P::Msg>) {
        match o {
            Release::Peer { to, seq, msg } => {
                let due =
                    tokio::time::Instant::from_std(self.released_at) + Duration::from_micros(self.wan_us[to.idx()]);
                self.metrics.peer_out.inc();
                if let Some(link) = &self.links[to.idx()] {
                    // Never blocks: the link spills to disk what it cannot
                    // keep in memory.
                    let _ = link.send(LinkItem::Seq { seq, msg, due });
                }
            }
            Release::Ephemeral { to, after_seq, msg } => {
                let due =
                    tokio::time::Instant::from_std(self.released_at) + Duration::from_micros(self.wan_us[to.idx()]);
                self.metrics.peer_out.inc();
                if let Some(link) = &self.links[to.idx()] {
                    let _ = link.send(LinkItem::Ephemeral { after_seq, msg, due });
                }
            }
            Release::Transient { to, after_seq, msg } => {
                let due =
                    tokio::time::Instant::from_std(self.released_at) + Duration::from_micros(self.wan_us[to.idx()]);
                self.metrics.peer_out.inc();
                if let Some(link) = &self.links[to.idx()] {
                    let _ = link.send(LinkItem::Transient { after_seq, msg, due });
                }
            }
            Release::Reply(client, msg) => {
                if let Some((kind, since)) = self.in_progress.remove(&client) {
                    let latency = self.released_at.saturating_duration_since(since);
                    self.by_kind.get(kind).1.observe(latency.as_micros() as f64 / 1e6);
                }
                match self.clients.get_mut(&client) {
                    Some(Replies::Frames(to)) => {
                        let frame = match to.slot {
                            0 => Wire::Reply(msg),
                            slot => Wire::ReplyOn { slot, msg },
                        };
                        // Written at the end of the turn, with the other
                        // replies for the same connection.
                        if to.pipe.push(|b| encode_into(&frame, b)) {
                            self.reply_pipes.push(to.pipe.clone());
                        }
                    }
                    Some(Replies::Local(to)) => to.reply(msg),
                    None => {}
                }
            }
        }
    }
}
