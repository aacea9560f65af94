//! The client library: an async session that carries the protocol's client
//! state (dependency set, stable vector, cache…) and talks to the servers of
//! its own DC.
//!
//! A session is sequential, like the protocols assume: one operation at a
//! time. It connects lazily to each server the protocol addresses. An
//! operation that times out or loses a connection leaves the protocol's
//! client state mid-operation, so the session refuses further work with
//! [`ClientError::Broken`]; open a new session (its causal context starts
//! afresh, which is always safe).

use crate::config::Cluster;
use crate::frame::{Wire, WireError, decode, encode, read_frame};
use crate::inbox::{LocalConn, LocalDoor};
use crate::tls::ClientTls;
use causeway_core::{Client, ClientCtx, ClientEnv, ClientId, DcId, NodeId, Op, OpError, OpResult, Protocol};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use thiserror::Error;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

#[derive(Debug, Error)]
pub enum ClientError {
    #[error("cannot connect to node {node} at {addr}: {source}")]
    Connect { node: u32, addr: SocketAddr, source: std::io::Error },
    #[error("node {node} refused: {error}")]
    Refused { node: u32, error: WireError },
    #[error("cannot connect to node {node} at {addr}: no connection within {after:?}")]
    ConnectTimeout { node: u32, addr: SocketAddr, after: Duration },
    #[error("node {node} at {addr} accepted the connection but did not answer the hello within {after:?}")]
    HelloTimeout { node: u32, addr: SocketAddr, after: Duration },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("lost the connection to node {0}")]
    ConnectionLost(u32),
    #[error("{0}")]
    Op(#[from] OpError),
    #[error("key of {len} bytes exceeds the cluster's limit of {max}")]
    KeyTooLarge { len: usize, max: usize },
    #[error("value of {len} bytes exceeds the cluster's limit of {max}")]
    ValueTooLarge { len: usize, max: usize },
    #[error("DC {dc} is not in the cluster (it has {dcs})")]
    UnknownDc { dc: u16, dcs: usize },
    #[error(
        "the value for key {key:?} is the reserved encoding of a delete's tombstone; it cannot be stored as a value"
    )]
    ReservedValue { key: String },
    #[error("protocol {protocol} has no column families: row:family:column locations, counters and slices need eiger")]
    ColumnsUnsupported { protocol: &'static str },
    #[error("this session broke on an earlier error; open a new one")]
    Broken,
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
}

/// What a connection's reader reports, tagged with the connection's
/// generation: a connection replaced (or dropped by `set_token`) may still
/// report its end, which must not fail its successor.
enum Event<M> {
    Frame(NodeId, u64, Wire<M>),
    Closed(NodeId, u64),
}

struct CEnv<M> {
    now: u64,
    sends: Vec<(NodeId, M)>,
    timers: Vec<(u64, u64)>,
    done: Option<OpResult>,
}

impl<M> ClientEnv<M> for CEnv<M> {
    fn now_us(&self) -> u64 {
        self.now
    }
    fn send(&mut self, to: NodeId, msg: M) {
        self.sends.push((to, msg));
    }
    fn set_timer(&mut self, after_us: u64, token: u64) {
        self.timers.push((after_us, token));
    }
    fn complete(&mut self, result: OpResult) {
        self.done = Some(result);
    }
}

/// How a session reaches one node.
enum Link<M> {
    /// Encoded request frames, for the connection's writer task.
    Remote(mpsc::UnboundedSender<Vec<u8>>),
    /// In the node's own process ([`LocalDoor`]).
    Local(LocalConn<M>),
}

impl<M: causeway_core::Message> Link<M> {
    fn send(&self, msg: M) -> Result<(), Option<WireError>> {
        match self {
            Link::Remote(tx) => tx.send(encode(&Wire::Request(msg))).map_err(|_| None),
            Link::Local(c) => c.send(msg).map_err(Some),
        }
    }
}

pub struct Session<P: Protocol> {
    tls: ClientTls,
    cluster: Arc<Cluster>,
    proto: P::Client,
    /// Per node: the open connection and its generation.
    conns: FxHashMap<NodeId, (u64, Link<P::Msg>)>,
    conn_gen: u64,
    /// A node reached in-process instead of over TCP.
    local: Option<LocalDoor<P::Msg>>,
    events_tx: mpsc::UnboundedSender<Event<P::Msg>>,
    events: mpsc::UnboundedReceiver<Event<P::Msg>>,
    timers: BinaryHeap<Reverse<(Instant, u64, u64)>>,
    timer_seq: u64,
    /// Deadline of one operation, connecting and the hello included: a
    /// session never waits longer for anything.
    pub timeout: Duration,
    broken: bool,
    /// The access token shown in every hello ([`crate::auth`]).
    token: Option<String>,
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

impl<P: Protocol> Session<P> {
    /// A session attached to `dc`. `id` names the session in protocol state
    /// (any value unique among the caller's sessions).
    pub fn new(cluster: Arc<Cluster>, dc: DcId, id: u32) -> Result<Session<P>, ClientError> {
        let tls = ClientTls::load(&cluster)?;
        Self::with_tls(cluster, dc, id, tls)
    }

    /// [`Session::new`] with given credentials (a node's front door shows
    /// the node's certificate).
    pub fn with_tls(cluster: Arc<Cluster>, dc: DcId, id: u32, tls: ClientTls) -> Result<Session<P>, ClientError> {
        if dc.idx() >= cluster.topology.dcs() {
            return Err(ClientError::UnknownDc { dc: dc.0, dcs: cluster.topology.dcs() });
        }
        let cfg: P::Config = cluster.config.params.clone().try_into().expect("validated with the cluster config");
        let proto = P::client(
            &cfg,
            ClientCtx { id: ClientId(id), dc, nonce: rand::random(), topology: cluster.topology.clone() },
        );
        let (events_tx, events) = mpsc::unbounded_channel();
        Ok(Session {
            tls,
            cluster,
            proto,
            conns: FxHashMap::default(),
            events_tx,
            events,
            timers: BinaryHeap::new(),
            timer_seq: 0,
            timeout: Duration::from_secs(10),
            broken: false,
            token: None,
            local: None,
            conn_gen: 0,
        })
    }

    /// Show `token` in the hello of every connection from now on
    /// (connections already open are closed, so each reopens with it).
    pub fn set_token(&mut self, token: Option<String>) {
        self.token = token;
        self.conns.clear();
    }

    /// Reach `door`'s node in-process rather than over TCP (what a node's
    /// Redis front door does for its own node).
    pub fn with_local(mut self, door: LocalDoor<P::Msg>) -> Self {
        self.local = Some(door);
        self
    }

    async fn connect(&mut self, node: NodeId, deadline: Instant) -> Result<(), ClientError> {
        if self.conns.contains_key(&node) {
            return Ok(());
        }
        self.conn_gen += 1;
        let generation = self.conn_gen;
        if let Some(door) = self.local.as_ref().filter(|d| d.node == node) {
            let (conn, mut replies) =
                door.attach(self.token.as_deref()).map_err(|error| ClientError::Refused { node: node.0, error })?;
            let tx = self.events_tx.clone();
            tokio::spawn(async move {
                while let Some(b) = replies.recv().await {
                    // The frame as a TCP session reads it: a length prefix, then the body.
                    let Ok(w) = decode::<P::Msg>(&b[4..]) else { break };
                    if tx.send(Event::Frame(node, generation, w)).is_err() {
                        return;
                    }
                }
                let _ = tx.send(Event::Closed(node, generation));
            });
            self.conns.insert(node, (generation, Link::Local(conn)));
            return Ok(());
        }
        let addr = self.cluster.addrs[node.idx()];
        let deadline = tokio::time::Instant::from_std(deadline);
        let tcp = tokio::time::timeout_at(deadline, TcpStream::connect(addr))
            .await
            .map_err(|_| ClientError::ConnectTimeout { node: node.0, addr, after: self.timeout })?
            .map_err(|source| ClientError::Connect { node: node.0, addr, source })?;
        let s = tokio::time::timeout_at(deadline, self.tls.connect(tcp, node))
            .await
            .map_err(|_| ClientError::HelloTimeout { node: node.0, addr, after: self.timeout })?
            .map_err(|source| ClientError::Tls(crate::tls::TlsError::Handshake { node: node.0, addr, source }))?;
        let (rd, mut wr) = tokio::io::split(s);
        let mut rd = tokio::io::BufReader::with_capacity(64 * 1024, rd);
        let hello = encode::<P::Msg>(&Wire::HelloClient {
            cluster_id: self.cluster.config.cluster_id.clone(),
            token: self.token.clone(),
        });
        let hello_timeout = ClientError::HelloTimeout { node: node.0, addr, after: self.timeout };
        tokio::time::timeout_at(deadline, async {
            wr.write_all(&hello).await?;
            wr.flush().await
        })
        .await
        .map_err(|_| hello_timeout)?
        .map_err(|source| ClientError::Connect { node: node.0, addr, source })?;
        let max = self.cluster.config.limits.max_frame_bytes;
        let welcome = tokio::time::timeout_at(deadline, read_frame(&mut rd, max))
            .await
            .map_err(|_| ClientError::HelloTimeout { node: node.0, addr, after: self.timeout })?;
        // Over TLS 1.3 a server that rejects the client's certificate says
        // so after the client's side of the handshake finished: its alert
        // arrives here, in place of the welcome.
        let welcome = match welcome {
            Err(crate::frame::FrameError::Io(source)) if self.tls.is_tls() => {
                return Err(ClientError::Tls(crate::tls::TlsError::Handshake { node: node.0, addr, source }));
            }
            w => w,
        };
        match welcome.ok().flatten().map(|b| decode::<P::Msg>(&b)) {
            Some(Ok(Wire::WelcomeClient { .. })) => {}
            Some(Ok(Wire::Refused(error))) => return Err(ClientError::Refused { node: node.0, error }),
            _ => return Err(ClientError::ConnectionLost(node.0)),
        }
        let tx = self.events_tx.clone();
        tokio::spawn(async move {
            while let Ok(Some(b)) = read_frame(&mut rd, max).await {
                let Ok(w) = decode::<P::Msg>(&b) else { break };
                if tx.send(Event::Frame(node, generation, w)).is_err() {
                    return;
                }
            }
            let _ = tx.send(Event::Closed(node, generation));
        });
        let (wtx, mut wrx) = mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            let mut batch = Vec::new();
            while let Some(b) = wrx.recv().await {
                // Frames already queued go out with it in one write (one TLS
                // record, one syscall) rather than one each.
                batch.clear();
                batch.extend_from_slice(&b);
                while batch.len() < 64 * 1024 {
                    let Ok(b) = wrx.try_recv() else { break };
                    batch.extend_from_slice(&b);
                }
                if wr.write_all(&batch).await.is_err() {
                    return;
                }
                if wr.flush().await.is_err() {
                    return;
                }
            }
        });
        self.conns.insert(node, (generation, Link::Remote(wtx)));
        Ok(())
    }

    async fn flush(&mut self, env: &mut CEnv<P::Msg>, deadline: Instant) -> Result<(), ClientError> {
        for (after_us, token) in env.timers.drain(..) {
            self.timer_seq += 1;
            self.timers.push(Reverse((Instant::now() + Duration::from_micros(after_us), self.timer_seq, token)));
        }
        for (to, msg) in std::mem::take(&mut env.sends) {
            self.connect(to, deadline).await?;
            match self.conns.get(&to).map(|(_, c)| c.send(msg)) {
                Some(Ok(())) => {}
                Some(Err(Some(error))) => return Err(ClientError::Refused { node: to.0, error }),
                Some(Err(None)) | None => {
                    self.conns.remove(&to);
                    return Err(ClientError::ConnectionLost(to.0));
                }
            }
        }
        Ok(())
    }

    fn check_sizes(&self, op: &Op) -> Result<(), ClientError> {
        let l = &self.cluster.config.limits;
        let key = |k: &[u8]| {
            if k.len() > l.max_key_bytes {
                Err(ClientError::KeyTooLarge { len: k.len(), max: l.max_key_bytes })
            } else {
                Ok(())
            }
        };
        op.keys().into_iter().try_for_each(|k| key(k))?;
        match op.writes().into_iter().map(|(_, v)| v.len()).max() {
            Some(len) if len > l.max_value_bytes => Err(ClientError::ValueTooLarge { len, max: l.max_value_bytes }),
            _ => Ok(()),
        }
    }

    /// Run one operation to completion, as a user sees it: a value that
    /// would read as a delete's tombstone is refused before anything is
    /// sent ([`ClientError::ReservedValue`]), and values read that are
    /// tombstones come back as "no value".
    pub async fn execute(&mut self, op: Op) -> Result<OpResult, ClientError> {
        if let Some((key, _)) = op.writes().into_iter().find(|(_, v)| causeway_core::is_tombstone(v)) {
            return Err(ClientError::ReservedValue { key: String::from_utf8_lossy(key).into_owned() });
        }
        Ok(self.execute_raw(op).await?.visible())
    }

    /// Run one operation to completion exactly as the protocol answered it:
    /// tombstones are returned as the writes they are. History recorders use
    /// this, so that the checker sees which delete a read returned.
    pub async fn execute_raw(&mut self, op: Op) -> Result<OpResult, ClientError> {
        if self.broken {
            return Err(ClientError::Broken);
        }
        // A protocol without the column-family model would store an
        // encoded location as an opaque key: refuse it instead.
        if !P::OPS.contains(&causeway_core::OpKind::Slice)
            && op.keys().iter().any(|k| causeway_core::column::is_location_key(k))
        {
            return Err(ClientError::ColumnsUnsupported { protocol: P::NAME });
        }
        self.check_sizes(&op)?;
        let r = self.execute_inner(op).await;
        if r.is_err() {
            self.broken = true;
            self.conns.clear();
        }
        r
    }

    /// Whether an earlier error ended this session (see [`ClientError::Broken`]).
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    async fn execute_inner(&mut self, op: Op) -> Result<OpResult, ClientError> {
        let deadline = Instant::now() + self.timeout;
        let mut env = CEnv { now: now_us(), sends: Vec::new(), timers: Vec::new(), done: None };
        self.proto.invoke(&mut env, op);
        self.flush(&mut env, deadline).await?;
        loop {
            if let Some(r) = env.done.take() {
                return Ok(r);
            }
            let next_timer = self.timers.peek().map(|Reverse((t, _, _))| *t);
            let wake = next_timer.map_or(deadline, |t| t.min(deadline));
            let ev = tokio::time::timeout_at(tokio::time::Instant::from_std(wake), self.events.recv()).await;
            env.now = now_us();
            match ev {
                Ok(Some(Event::Frame(node, generation, _)))
                    if self.conns.get(&node).is_none_or(|c| c.0 != generation) => {}
                Ok(Some(Event::Frame(node, _, Wire::Reply(msg)))) => self.proto.on_reply(&mut env, node, msg),
                Ok(Some(Event::Frame(node, _, Wire::Refused(error)))) => {
                    return Err(ClientError::Refused { node: node.0, error });
                }
                Ok(Some(Event::Frame(..))) => {}
                Ok(Some(Event::Closed(node, generation)))
                    if self.conns.get(&node).is_none_or(|c| c.0 != generation) => {}
                Ok(Some(Event::Closed(node, _))) => {
                    self.conns.remove(&node);
                    return Err(ClientError::ConnectionLost(node.0));
                }
                Ok(None) => unreachable!("the session holds a sender"),
                Err(_) => {
                    if Instant::now() >= deadline {
                        return Err(ClientError::Timeout(self.timeout));
                    }
                    while let Some(Reverse((t, _, token))) = self.timers.peek().copied() {
                        if t > Instant::now() {
                            break;
                        }
                        self.timers.pop();
                        self.proto.on_timer(&mut env, token);
                    }
                }
            }
            self.flush(&mut env, deadline).await?;
        }
    }

    pub async fn get(&mut self, key: impl Into<bytes::Bytes>) -> Result<Option<bytes::Bytes>, ClientError> {
        match self.execute(Op::Get { key: key.into() }).await? {
            OpResult::Get(v) => Ok(v),
            OpResult::Failed(e) => Err(e.into()),
            other => unreachable!("a get answered {other:?}"),
        }
    }

    pub async fn put(
        &mut self,
        key: impl Into<bytes::Bytes>,
        value: impl Into<bytes::Bytes>,
    ) -> Result<(), ClientError> {
        match self.execute(Op::Put { key: key.into(), value: value.into() }).await? {
            OpResult::Put => Ok(()),
            OpResult::Failed(e) => Err(e.into()),
            other => unreachable!("a put answered {other:?}"),
        }
    }

    /// Delete `key`: write a tombstone ([`causeway_core::tombstone`]), an
    /// ordinary version in the causal order that reads as no value.
    pub async fn del(&mut self, key: impl Into<bytes::Bytes>) -> Result<(), ClientError> {
        let value = causeway_core::tombstone(rand::random());
        match self.execute_raw(Op::Put { key: key.into(), value }).await? {
            OpResult::Put => Ok(()),
            OpResult::Failed(e) => Err(e.into()),
            other => unreachable!("a delete answered {other:?}"),
        }
    }

    /// Delete several locations at once (one atomic write-only transaction
    /// of tombstones; one key: a plain delete).
    pub async fn del_many(&mut self, keys: Vec<bytes::Bytes>) -> Result<(), ClientError> {
        if let [key] = &keys[..] {
            return self.del(key.clone()).await;
        }
        let writes = keys.into_iter().map(|k| (k, causeway_core::tombstone(rand::random()))).collect();
        match self.execute_raw(Op::Wot { writes }).await? {
            OpResult::Wot => Ok(()),
            OpResult::Failed(e) => Err(e.into()),
            other => unreachable!("a delete answered {other:?}"),
        }
    }

    /// Add `delta` to the counter column at location `key`
    /// ([`causeway_core::column::location_key`]); protocols without
    /// counters answer [`OpError::Unsupported`](causeway_core::OpError).
    pub async fn add(&mut self, key: impl Into<bytes::Bytes>, delta: i64) -> Result<(), ClientError> {
        match self.execute(Op::Add { key: key.into(), delta }).await? {
            OpResult::Put => Ok(()),
            OpResult::Failed(e) => Err(e.into()),
            other => unreachable!("an add answered {other:?}"),
        }
    }

    /// The columns of `row`'s `family` named `start` through `stop`
    /// (inclusive; `stop` empty: to the end), at most `count` of them (0:
    /// no limit), deleted ones left out: (column, value) in column order.
    pub async fn slice(
        &mut self,
        row: impl Into<bytes::Bytes>,
        family: impl Into<bytes::Bytes>,
        start: impl Into<bytes::Bytes>,
        stop: impl Into<bytes::Bytes>,
        count: u32,
    ) -> Result<Vec<(bytes::Bytes, bytes::Bytes)>, ClientError> {
        let op = Op::Slice { row: row.into(), family: family.into(), start: start.into(), stop: stop.into(), count };
        match self.execute(op).await? {
            OpResult::Slice(cells) => Ok(cells),
            OpResult::Failed(e) => Err(e.into()),
            other => unreachable!("a slice answered {other:?}"),
        }
    }

    /// Write every pair atomically (a write-only transaction); protocols
    /// without them answer [`OpError::Unsupported`](causeway_core::OpError).
    pub async fn wot(&mut self, writes: Vec<(bytes::Bytes, bytes::Bytes)>) -> Result<(), ClientError> {
        match self.execute(Op::Wot { writes }).await? {
            OpResult::Wot => Ok(()),
            OpResult::Failed(e) => Err(e.into()),
            other => unreachable!("a wot answered {other:?}"),
        }
    }

    /// A read-write transaction: read `reads` from one snapshot, then write
    /// `writes` atomically; returns the values read. Protocols without them
    /// answer [`OpError::Unsupported`](causeway_core::OpError).
    pub async fn txn(
        &mut self,
        reads: Vec<bytes::Bytes>,
        writes: Vec<(bytes::Bytes, bytes::Bytes)>,
    ) -> Result<Vec<Option<bytes::Bytes>>, ClientError> {
        match self.execute(Op::Txn { reads, writes }).await? {
            OpResult::Txn(v) => Ok(v),
            OpResult::Failed(e) => Err(e.into()),
            other => unreachable!("a txn answered {other:?}"),
        }
    }

    pub async fn rot(&mut self, keys: Vec<bytes::Bytes>) -> Result<Vec<Option<bytes::Bytes>>, ClientError> {
        match self.execute(Op::Rot { keys }).await? {
            OpResult::Rot(v) => Ok(v),
            OpResult::Failed(e) => Err(e.into()),
            other => unreachable!("a rot answered {other:?}"),
        }
    }
}

/// Whether node `node` answers a client hello, and how fast: connect, TLS
/// handshake, hello, welcome, all within `timeout`. What `causeway status`
/// asks of every node. `token` is shown in the hello, as a session would.
pub async fn probe(
    cluster: &Cluster,
    node: NodeId,
    timeout: Duration,
    token: Option<&str>,
) -> Result<Duration, ClientError> {
    let start = Instant::now();
    let addr = cluster.addrs[node.idx()];
    let deadline = tokio::time::Instant::now() + timeout;
    let tls = ClientTls::load(cluster)?;
    let tcp = tokio::time::timeout_at(deadline, TcpStream::connect(addr))
        .await
        .map_err(|_| ClientError::ConnectTimeout { node: node.0, addr, after: timeout })?
        .map_err(|source| ClientError::Connect { node: node.0, addr, source })?;
    let hello_timeout = || ClientError::HelloTimeout { node: node.0, addr, after: timeout };
    let mut s = tokio::time::timeout_at(deadline, tls.connect(tcp, node))
        .await
        .map_err(|_| hello_timeout())?
        .map_err(|source| ClientError::Tls(crate::tls::TlsError::Handshake { node: node.0, addr, source }))?;
    // The hello carries no protocol message, so any message type encodes it.
    let hello = encode::<()>(&Wire::HelloClient {
        cluster_id: cluster.config.cluster_id.clone(),
        token: token.map(str::to_string),
    });
    let answer = tokio::time::timeout_at(deadline, async {
        s.write_all(&hello).await?;
        s.flush().await?;
        read_frame(&mut s, cluster.config.limits.max_frame_bytes).await.map_err(std::io::Error::other)
    })
    .await
    .map_err(|_| hello_timeout())?
    .map_err(|source| ClientError::Tls(crate::tls::TlsError::Handshake { node: node.0, addr, source }))?;
    match answer.map(|b| decode::<()>(&b)) {
        Some(Ok(Wire::WelcomeClient { .. })) => Ok(start.elapsed()),
        Some(Ok(Wire::Refused(error))) => Err(ClientError::Refused { node: node.0, error }),
        _ => Err(ClientError::ConnectionLost(node.0)),
    }
}
