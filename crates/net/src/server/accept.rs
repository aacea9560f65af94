//! Connections to a node: the listener, the TLS handshake and hello, and
//! the sessions behind them — a peer's stream of messages into the
//! protocol thread's inbox with durable acknowledgements back, and a
//! client's requests in and replies out through its reply pipe.

use crate::acks::{self, Delivered};
use crate::auth::{Role, Tokens};
use crate::config::Cluster;
use crate::frame::{FrameError, FrameReader, MAX_SLOTS_PER_CONNECTION, Wire, WireError, decode, encode, read_frame};
use crate::identity::PeerIncarnations;
use crate::inbox::{Input, Replies, admit, role_of};
use crate::metrics::NodeMetrics;
use crate::reply_pipe::{PipeSender, ReplyPipe};
use crate::tls::{CLIENT_NAME, Conn, NodeTls, node_name};
use causeway_core::{ClientId, Message, NodeId, WIRE_FORMAT};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc as smpsc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, mpsc, watch};

pub(super) struct Acceptor<M> {
    pub(super) tls: NodeTls,
    /// With `[auth]`: the tokens a client session must show.
    pub(super) tokens: Option<Arc<Tokens>>,
    pub(super) cluster: Arc<Cluster>,
    pub(super) node: NodeId,
    pub(super) input: mpsc::UnboundedSender<Input<M>>,
    /// Per source node, the last sequenced message handled and durable:
    /// what acknowledgements and welcomes tell the peer.
    pub(super) delivered: Arc<Delivered>,
    pub(super) next_client: Arc<AtomicU32>,
    /// Per source node: held while a connection from it pushes a batch, and
    /// bumped (a generation) by each new connection, so an old connection's
    /// reader can never interleave with its replacement's.
    pub(super) source_locks: Arc<Vec<Mutex<u64>>>,
    pub(super) metrics: Arc<NodeMetrics>,
    pub(super) incarnation: u64,
    pub(super) peers: Arc<PeerIncarnations>,
    /// Connections end with the node: a stopped node (restarted in the same
    /// process) must not leave readers that swallow its peers' frames.
    pub(super) stop: watch::Receiver<bool>,
    /// Never sent on: held by the accept loop and every connection, so that
    /// its receiver sees the channel close once all of them have ended (a
    /// stopping node waits for that, briefly, for its goodbyes to leave).
    pub(super) open: mpsc::Sender<()>,
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
            open: self.open.clone(),
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
        let next = self.delivered.get(from) + 1;
        if send(&mut wr, &encode::<M>(&Wire::Welcome { next_seq: next, incarnation: self.incarnation })).await.is_err()
        {
            return;
        }
        let acker = tokio::spawn(acks::acknowledge(wr, self.delivered.clone(), from, next - 1, self.stop.clone()));
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
        acks::part(acker, &mut rd, &stop).await;
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

/// Accept connections on `listener` until the node stops, each served by a
/// task of its own, at most `[limits] max_connections` at once (the rest
/// refused by name). `done` is dropped, and with it the listener, when this
/// ends: a stopped node's address is free again.
pub(super) async fn accept_loop<M: Message>(
    listener: std::net::TcpListener,
    acceptor: Acceptor<M>,
    done: smpsc::Sender<()>,
) {
    let _done = done;
    let node = acceptor.node;
    let mut stop_accept = acceptor.stop.clone();
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
                                        refuse::<M>(&mut c, e).await;
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
}
