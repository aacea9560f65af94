//! The client library: an async session that carries the protocol's client
//! state (dependency set, stable vector, cache…) and talks to the servers of
//! its own DC.
//!
//! A session is sequential, like the protocols assume: one operation at a
//! time. A pipelined session ([`Session::pipelined`]) is `depth` such
//! sessions sharing one connection per server: each slot is an independent
//! causal session (its own client state and id at the server), and
//! [`Session::execute_many`] runs one operation on each at once, so their
//! requests and replies share frames, writes and wake-ups.
//!
//! A session connects lazily to each server the protocol addresses. An
//! operation that times out or loses a connection leaves the protocol's
//! client state mid-operation, so the session refuses further work with
//! [`ClientError::Broken`]; open a new session (its causal context starts
//! afresh, which is always safe).

use crate::config::Cluster;
use crate::frame::{FrameReader, Wire, WireError, decode, encode, encode_into, read_frame};
use crate::inbox::{LocalConn, LocalDoor, LocalReplies};
use crate::tls::{ClientTls, Conn};
use causeway_core::{Client, ClientCtx, ClientEnv, ClientId, DcId, NodeId, Op, OpError, OpResult, Protocol};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use thiserror::Error;
use tokio::io::{AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// One item per slot of a run of operations: inline for the usual one.
type Slots<T> = SmallVec<[T; 1]>;

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

/// What a connection brings, tagged with the connection's generation: an
/// in-process connection replaced (or dropped by `set_token`) may still
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
    /// The connection's write half, written by the session itself (no
    /// writer task to wake per request), and the frames queued for it:
    /// every request of one turn (all slots of a pipelined session) goes
    /// out in one write. Its read half, read by the session itself too,
    /// while it waits for a reply ([`Session::poll_event`]): no reader task
    /// to wake and no channel to cross per reply. Dropping the link closes
    /// the socket, so the server ends the session at once rather than at
    /// its idle timeout.
    Remote { wr: WriteHalf<Conn>, out: Vec<u8>, rd: FrameReader<ReadHalf<Conn>> },
    /// In the node's own process ([`LocalDoor`]).
    Local(LocalConn<M>),
}

/// An in-process session's replies, put by the node's protocol thread
/// straight into the session's events as a TCP reader would put them:
/// no frame to encode and decode, no task to forward them. The node drops
/// it when it forgets the session or stops, and the session then sees its
/// connection closed.
struct LocalEvents<M> {
    node: NodeId,
    generation: u64,
    tx: mpsc::UnboundedSender<Event<M>>,
}

impl<M: causeway_core::Message> LocalReplies<M> for LocalEvents<M> {
    fn reply(&mut self, msg: M) {
        let _ = self.tx.send(Event::Frame(self.node, self.generation, Wire::Reply(msg)));
    }
}

impl<M> Drop for LocalEvents<M> {
    fn drop(&mut self) {
        let _ = self.tx.send(Event::Closed(self.node, self.generation));
    }
}

impl<M: causeway_core::Message> Link<M> {
    fn send(&mut self, slot: u32, msg: M) -> Result<(), Option<WireError>> {
        match self {
            Link::Remote { out, .. } => {
                let frame = if slot == 0 { Wire::Request(msg) } else { Wire::RequestOn { slot, msg } };
                *out = encode_into(&frame, std::mem::take(out));
                Ok(())
            }
            Link::Local(c) if slot == 0 => c.send(msg).map_err(Some),
            // An in-process session is a single slot (`with_local`).
            Link::Local(_) => Err(Some(WireError::TooManySlots { slot, max: 1 })),
        }
    }
}

pub struct Session<P: Protocol> {
    tls: ClientTls,
    cluster: Arc<Cluster>,
    /// One protocol client per logical session (slot) of the connections.
    protos: Vec<P::Client>,
    /// Per node: the open connection and its generation.
    conns: FxHashMap<NodeId, (u64, Link<P::Msg>)>,
    conn_gen: u64,
    /// A node reached in-process instead of over TCP.
    local: Option<LocalDoor<P::Msg>>,
    events_tx: mpsc::UnboundedSender<Event<P::Msg>>,
    events: mpsc::UnboundedReceiver<Event<P::Msg>>,
    /// (due, order, slot, token).
    timers: BinaryHeap<Reverse<(Instant, u64, usize, u64)>>,
    timer_seq: u64,
    /// Deadline of one operation, connecting and the hello included: a
    /// session never waits longer for anything.
    pub timeout: Duration,
    /// The one timer a wait for a reply arms, kept from operation to
    /// operation: a fresh one per wait is an insertion into the timer
    /// wheel and a removal from it, for every request; this one is moved
    /// only when it would fire too late.
    sleep: Option<(tokio::runtime::Id, Pin<Box<tokio::time::Sleep>>)>,
    broken: bool,
    /// The slots' environments, kept between operations.
    spare_envs: Vec<CEnv<P::Msg>>,
    /// Whether a remote link holds encoded requests not yet written
    /// ([`Session::write_queued`]); an in-process session's never do.
    unwritten: bool,
    /// The access token shown in every hello ([`crate::auth`]).
    token: Option<String>,
    /// A [`crate::transaction::Transaction`] was dropped without commit or
    /// abort: the next operation aborts it first.
    pub(crate) abandoned_txn: bool,
    /// The session guarantees this session's GETs and PUTs ask for
    /// ([`Session::set_levels`]); `None`: the protocol's own promise.
    levels: Option<causeway_core::Levels>,
    /// The checking group this session's GETs name
    /// ([`Session::set_checking_group`]); `None`: the protocol's choice.
    checking_group: Option<u16>,
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
        Self::build(cluster, dc, id, 1, tls)
    }

    /// `depth` independent sessions over one connection per server, named
    /// `first_id`, `first_id + 1`, … in protocol state; run operations on
    /// them together with [`Session::execute_many`] (what `causeway bench
    /// -P` does).
    pub fn pipelined(cluster: Arc<Cluster>, dc: DcId, first_id: u32, depth: u32) -> Result<Session<P>, ClientError> {
        let tls = ClientTls::load(&cluster)?;
        Self::build(cluster, dc, first_id, depth.clamp(1, crate::frame::MAX_SLOTS_PER_CONNECTION), tls)
    }

    fn build(cluster: Arc<Cluster>, dc: DcId, id: u32, depth: u32, tls: ClientTls) -> Result<Session<P>, ClientError> {
        if dc.idx() >= cluster.topology.dcs() {
            return Err(ClientError::UnknownDc { dc: dc.0, dcs: cluster.topology.dcs() });
        }
        let cfg: P::Config = cluster.config.params.clone().try_into().expect("validated with the cluster config");
        let protos = (0..depth)
            .map(|slot| {
                let ctx = ClientCtx {
                    id: ClientId(id.wrapping_add(slot)),
                    dc,
                    nonce: rand::random(),
                    topology: cluster.topology.clone(),
                };
                P::client(&cfg, ctx)
            })
            .collect();
        let (events_tx, events) = mpsc::unbounded_channel();
        Ok(Session {
            tls,
            cluster,
            protos,
            conns: FxHashMap::default(),
            events_tx,
            events,
            timers: BinaryHeap::new(),
            timer_seq: 0,
            timeout: Duration::from_secs(10),
            broken: false,
            spare_envs: Vec::new(),
            unwritten: false,
            token: None,
            abandoned_txn: false,
            levels: None,
            checking_group: None,
            local: None,
            sleep: None,
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
    /// Redis front door does for its own node). In-process sessions are not
    /// pipelined: only slot 0 reaches that node.
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
            let replies = Box::new(LocalEvents { node, generation, tx: self.events_tx.clone() });
            let conn = door
                .attach(self.token.as_deref(), replies)
                .map_err(|error| ClientError::Refused { node: node.0, error })?;
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
        let max = self.cluster.config.limits.max_frame_bytes;
        let mut rd = FrameReader::new(rd, max);
        let hello = encode::<P::Msg>(&Wire::HelloClient {
            cluster_id: self.cluster.config.cluster_id.clone(),
            token: self.token.clone(),
            format: causeway_core::WIRE_FORMAT,
        });
        let hello_timeout = ClientError::HelloTimeout { node: node.0, addr, after: self.timeout };
        tokio::time::timeout_at(deadline, async {
            wr.write_all(&hello).await?;
            wr.flush().await
        })
        .await
        .map_err(|_| hello_timeout)?
        .map_err(|source| ClientError::Connect { node: node.0, addr, source })?;
        let welcome = tokio::time::timeout_at(
            deadline,
            std::future::poll_fn(|cx| rd.poll_frame(cx).map_ok(|b| b.map(|b| b.to_vec()))),
        )
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
        self.conns.insert(node, (generation, Link::Remote { wr, out: Vec::new(), rd }));
        Ok(())
    }

    /// Write out the requests queued on each connection, one write (one TLS
    /// record, one syscall) per connection, within the deadline.
    async fn write_queued(&mut self, deadline: Instant) -> Result<(), ClientError> {
        let mut lost = None;
        for (node, (_, link)) in self.conns.iter_mut() {
            let Link::Remote { wr, out, .. } = link else { continue };
            if out.is_empty() {
                continue;
            }
            let write = async {
                wr.write_all(out).await?;
                wr.flush().await
            };
            match tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), write).await {
                Ok(Ok(())) => out.clear(),
                Ok(Err(_)) => {
                    lost = Some(*node);
                    break;
                }
                Err(_) => return Err(ClientError::Timeout(self.timeout)),
            }
        }
        match lost {
            Some(node) => {
                self.conns.remove(&node);
                Err(ClientError::ConnectionLost(node.0))
            }
            None => {
                self.unwritten = false;
                Ok(())
            }
        }
    }

    /// Send what slot `slot`'s client asked to send and arm its timers.
    /// A node that cannot be connected to is the protocol client's to
    /// route around ([`causeway_core::Client::on_unreachable`]) where it
    /// can; what it sends and arms instead is flushed in turn.
    async fn flush(&mut self, slot: usize, env: &mut CEnv<P::Msg>, deadline: Instant) -> Result<(), ClientError> {
        while !env.timers.is_empty() || !env.sends.is_empty() {
            for (after_us, token) in env.timers.drain(..) {
                self.timer_seq += 1;
                self.timers.push(Reverse((
                    Instant::now() + Duration::from_micros(after_us),
                    self.timer_seq,
                    slot,
                    token,
                )));
            }
            let sends = std::mem::take(&mut env.sends);
            self.flush_sends(slot, env, sends, deadline).await?;
        }
        Ok(())
    }

    async fn flush_sends(
        &mut self,
        slot: usize,
        env: &mut CEnv<P::Msg>,
        sends: Vec<(NodeId, P::Msg)>,
        deadline: Instant,
    ) -> Result<(), ClientError> {
        for (to, msg) in sends {
            if !self.conns.contains_key(&to) {
                // Boxed: connecting (TCP, the TLS handshake, the hello) is a
                // future of kilobytes that every request's future would
                // otherwise carry, and copy, though it is rarely run.
                match Box::pin(self.connect(to, deadline)).await {
                    Ok(()) => {}
                    Err(e @ ClientError::Connect { .. }) => {
                        env.now = now_us();
                        if self.protos[slot].on_unreachable(env, to) {
                            continue;
                        }
                        return Err(e);
                    }
                    Err(e) => return Err(e),
                }
            }
            match self.conns.get_mut(&to).map(|(_, c)| (matches!(c, Link::Remote { .. }), c.send(slot as u32, msg))) {
                Some((remote, Ok(()))) => self.unwritten |= remote,
                Some((_, Err(Some(error)))) => return Err(ClientError::Refused { node: to.0, error }),
                Some((_, Err(None))) | None => {
                    self.conns.remove(&to);
                    return Err(ClientError::ConnectionLost(to.0));
                }
            }
        }
        Ok(())
    }

    /// A key this session may send: within the size limit, and not an
    /// encoded column location unless the protocol has the column-family
    /// model (one without it would store the location as an opaque key).
    pub(crate) fn check_key(&self, k: &[u8]) -> Result<(), ClientError> {
        let max = self.cluster.config.limits.max_key_bytes;
        if k.len() > max {
            return Err(ClientError::KeyTooLarge { len: k.len(), max });
        }
        if !P::OPS.contains(&causeway_core::OpKind::Slice) && causeway_core::column::is_location_key(k) {
            return Err(ClientError::ColumnsUnsupported { protocol: P::NAME });
        }
        Ok(())
    }

    pub(crate) fn check_value(&self, v: &[u8]) -> Result<(), ClientError> {
        let max = self.cluster.config.limits.max_value_bytes;
        if v.len() > max { Err(ClientError::ValueTooLarge { len: v.len(), max }) } else { Ok(()) }
    }

    /// Run one operation to completion, as a user sees it: a value that
    /// would read as a delete's tombstone is refused before anything is
    /// sent ([`ClientError::ReservedValue`]), and values read that are
    /// tombstones come back as "no value".
    pub async fn execute(&mut self, op: Op) -> Result<OpResult, ClientError> {
        self.admit_op(&op, true)?;
        let r = self.execute_inner(smallvec::smallvec![op]).await;
        self.end(r, true)
    }

    /// Run one operation to completion exactly as the protocol answered it:
    /// tombstones are returned as the writes they are. History recorders use
    /// this, so that the checker sees which delete a read returned.
    pub async fn execute_raw(&mut self, op: Op) -> Result<OpResult, ClientError> {
        self.admit_op(&op, false)?;
        let r = self.execute_inner(smallvec::smallvec![op]).await;
        self.end(r, false)
    }

    // One operation runs as `admit_op`, `execute_inner`, `end`, written out in
    // each caller rather than in one more async function: every layer of
    // async functions holds the future of the one below it and copies it,
    // some kilobytes, when it starts (five layers deep, that copying was
    // the largest cost a front-door request added to a session's).

    /// Refuse `op` before anything is sent: as [`Session::admit`], and for
    /// a user's operation (`user`) a value that would read as a tombstone.
    fn admit_op(&self, op: &Op, user: bool) -> Result<(), ClientError> {
        if user {
            let reserved = match op {
                Op::Get { .. } => None,
                Op::Put { key, value } => causeway_core::is_tombstone(value).then_some(key),
                op => op.each_write().find(|(_, v)| causeway_core::is_tombstone(v)).map(|(k, _)| k),
            };
            if let Some(key) = reserved {
                return Err(ClientError::ReservedValue { key: String::from_utf8_lossy(key).into_owned() });
            }
        }
        self.admit(std::slice::from_ref(op))
    }

    /// The one operation's result, as a user sees it (`user`: tombstones
    /// read as no value) or raw; an error ends the session ([`Session::ended`]).
    fn end(&mut self, r: Result<Slots<OpResult>, ClientError>, user: bool) -> Result<OpResult, ClientError> {
        let r = self.ended(r)?.pop().expect("one result per operation");
        Ok(if user { r.visible() } else { r })
    }

    /// A level above eventual is refused by a protocol that promises no
    /// session guarantee, before anything is sent.
    fn check_levels(&self, op: &Op) -> Result<(), ClientError> {
        match self.levels.and_then(|l| l.refusal(op, P::LEVELS, P::CAUSAL)) {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Set the session guarantees this session's GETs and PUTs ask for
    /// from now on (Roohitavaf's per-operation levels, §4.2; a GET uses
    /// the read level, a PUT the write level), or `None` for the
    /// protocol's own promise. Refused, naming the level, when the
    /// protocol cannot honour it ([`causeway_core::Levels::refusal`]).
    pub fn set_levels(&mut self, levels: Option<causeway_core::Levels>) -> Result<(), ClientError> {
        if let Some(l) = levels {
            let (k, v) = (bytes::Bytes::from_static(b"k"), bytes::Bytes::from_static(b"v"));
            for op in [Op::Get { key: k.clone() }, Op::Put { key: k, value: v }] {
                if let Some(e) = l.refusal(&op, P::LEVELS, P::CAUSAL) {
                    return Err(e.into());
                }
            }
        }
        self.levels = levels;
        Ok(())
    }

    /// Move the session to `dc`: its later operations go to that DC's
    /// servers, keeping what the session tracked (client migration; NuKV
    /// lets clients switch DCs, Roohitavaf, *Consistency for Distributed
    /// Data Stores*, Ch. 4, at the cost of reads that wait there for what
    /// the session saw). Refused with [`OpError::Sticky`] by a protocol
    /// that keeps sessions in their DC ([`Protocol::MIGRATES`]), which
    /// every causal one must (Ch. 6), and with
    /// [`ClientError::UnknownDc`] for a DC the cluster lacks.
    pub fn migrate(&mut self, dc: DcId) -> Result<(), ClientError> {
        if dc.idx() >= self.cluster.topology.dcs() {
            return Err(ClientError::UnknownDc { dc: dc.0, dcs: self.cluster.topology.dcs() });
        }
        if !P::MIGRATES {
            return Err(OpError::Sticky { dc: dc.0 }.into());
        }
        // Between operations (`&mut self`): no slot has one in progress.
        for proto in &mut self.protos {
            if !proto.migrate(dc) {
                return Err(OpError::Sticky { dc: dc.0 }.into());
            }
        }
        Ok(())
    }

    /// Name the checking group this session's GETs ask their servers to
    /// check from now on (ACCF: Roohitavaf, *Consistency for Distributed
    /// Data Stores*, Ch. 7, Alg 7.1's `GET(k, cg)`; numbered as the
    /// cluster's `checking` grouping yields them, e.g. `per_replica`:
    /// group d is DC d's servers), or `None` for the protocol's choice
    /// (ACCF: the first group of the server each GET goes to). Refused,
    /// changing nothing, with [`causeway_core::CheckingGroupError`]:
    /// `OutOfRange` naming the group and how many exist, or `Unsupported`
    /// by a protocol without checking groups.
    pub fn set_checking_group(&mut self, cg: Option<u16>) -> Result<(), ClientError> {
        // Between operations (`&mut self`); every slot has the same config,
        // so the first refuses if any does.
        for proto in &mut self.protos {
            proto.set_checking_group(cg).map_err(OpError::from)?;
        }
        self.checking_group = cg;
        Ok(())
    }

    /// The group set by [`Session::set_checking_group`].
    pub fn checking_group(&self) -> Option<u16> {
        self.checking_group
    }

    /// One GET naming checking group `cg` (the session's own group, if
    /// any, is kept for its other GETs).
    pub async fn get_in(&mut self, key: impl Into<bytes::Bytes>, cg: u16) -> Result<Option<bytes::Bytes>, ClientError> {
        let saved = self.checking_group;
        self.set_checking_group(Some(cg))?;
        let r = self.get(key).await;
        self.set_checking_group(saved)?; // accepted when it was set
        r
    }

    /// The levels set by [`Session::set_levels`].
    pub fn levels(&self) -> Option<causeway_core::Levels> {
        self.levels
    }

    /// One GET at the read level `level` (the session's write level, if
    /// any, is kept for its PUTs).
    pub async fn get_at(
        &mut self,
        key: impl Into<bytes::Bytes>,
        level: causeway_core::ReadLevel,
    ) -> Result<Option<bytes::Bytes>, ClientError> {
        let saved = self.levels;
        self.levels = Some(causeway_core::Levels { read: level, ..saved.unwrap_or_default() });
        let r = self.get(key).await;
        self.levels = saved;
        r
    }

    /// One PUT at the write level `level`.
    pub async fn put_at(
        &mut self,
        key: impl Into<bytes::Bytes>,
        value: impl Into<bytes::Bytes>,
        level: causeway_core::WriteLevel,
    ) -> Result<(), ClientError> {
        let saved = self.levels;
        self.levels = Some(causeway_core::Levels { write: level, ..saved.unwrap_or_default() });
        let r = self.put(key, value).await;
        self.levels = saved;
        r
    }

    /// Run `ops[i]` on slot `i` ([`Session::pipelined`]), all at once, and
    /// return their results (raw, as [`Session::execute_raw`]) when every
    /// one has completed. Any error ends the whole session: the outcome of
    /// the operations still running is then unknown.
    pub async fn execute_many(&mut self, ops: Vec<Op>) -> Result<Vec<OpResult>, ClientError> {
        self.admit(&ops)?;
        let r = self.execute_inner(SmallVec::from_vec(ops)).await;
        Ok(self.ended(r)?.into_vec())
    }

    /// Whether the session may run `ops` at all: it is not broken, has a
    /// slot for each, and each is one this protocol and the limits allow.
    fn admit(&self, ops: &[Op]) -> Result<(), ClientError> {
        if self.broken {
            return Err(ClientError::Broken);
        }
        assert!(
            ops.len() <= self.protos.len(),
            "{} operations for a session of depth {}",
            ops.len(),
            self.protos.len()
        );
        for op in ops {
            // GET and SET directly, the rest through the general iterators.
            match op {
                Op::Get { key } => {
                    self.check_key(key)?;
                    self.check_levels(op)?;
                }
                Op::Put { key, value } => {
                    self.check_key(key)?;
                    self.check_value(value)?;
                    self.check_levels(op)?;
                }
                op => {
                    op.each_key().try_for_each(|k| self.check_key(k))?;
                    op.each_write().try_for_each(|(_, v)| self.check_value(v))?;
                }
            }
        }
        Ok(())
    }

    /// `r`, having ended the session if it is an error: the outcome of the
    /// operations still running is then unknown.
    fn ended<T>(&mut self, r: Result<T, ClientError>) -> Result<T, ClientError> {
        if r.is_err() {
            self.broken = true;
            self.conns.clear();
        }
        r
    }

    /// How many operations [`Session::execute_many`] can run at once.
    pub fn depth(&self) -> usize {
        self.protos.len()
    }

    /// Whether an earlier error ended this session (see [`ClientError::Broken`]).
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    async fn execute_inner(&mut self, ops: Slots<Op>) -> Result<Slots<OpResult>, ClientError> {
        let deadline = Instant::now() + self.timeout;
        let n = ops.len();
        let now = now_us();
        // One environment per slot, idle ones included: a late reply to an
        // earlier operation of an idle slot still reaches its client.
        // Kept from the last operation (allocations a request need not make).
        let mut envs = std::mem::take(&mut self.spare_envs);
        envs.resize_with(self.protos.len(), || CEnv { now, sends: Vec::new(), timers: Vec::new(), done: None });
        for env in &mut envs {
            env.now = now;
            env.sends.clear();
            env.timers.clear();
            env.done = None;
        }
        let mut results: Slots<Option<OpResult>> = SmallVec::new();
        results.resize_with(n, || None);
        if std::mem::take(&mut self.abandoned_txn) {
            // End the transaction dropped open, in the same flush as this
            // operation: an abort completes without waiting ([`Op::Abort`]).
            self.protos[0].invoke(&mut envs[0], Op::Abort);
            envs[0].done = None;
        }
        for (slot, op) in ops.into_iter().enumerate() {
            match self.levels {
                Some(l) if matches!(op, Op::Get { .. } | Op::Put { .. }) => {
                    self.protos[slot].invoke_at(&mut envs[slot], op, l)
                }
                _ => self.protos[slot].invoke(&mut envs[slot], op),
            }
        }
        for (slot, env) in envs.iter_mut().enumerate().take(n) {
            self.flush(slot, env, deadline).await?;
        }
        if self.unwritten {
            self.write_queued(deadline).await?;
        }
        let mut left = n;
        let mut first = true;
        loop {
            for (slot, env) in envs.iter_mut().enumerate() {
                if let Some(r) = env.done.take()
                    && slot < n
                    && results[slot].is_none()
                {
                    results[slot] = Some(r);
                    left -= 1;
                }
            }
            if left == 0 {
                self.spare_envs = envs;
                let mut done = Slots::with_capacity(n);
                for r in results {
                    done.push(r.expect("every slot completed"));
                }
                return Ok(done);
            }
            let next_timer = self.timers.peek().map(|Reverse((t, ..))| *t);
            let wake = next_timer.map_or(deadline, |t| t.min(deadline));
            // Timers and the deadline go first when due. The deadline was
            // set just now, so on the first pass only a timer can be due
            // (one clock read less per request).
            let due = match next_timer {
                None if first => false,
                _ => wake <= Instant::now(),
            };
            first = false;
            let ev = if due {
                Err(())
            } else {
                let wake = tokio::time::Instant::from_std(wake);
                let runtime = tokio::runtime::Handle::current().id();
                let sleep = match &mut self.sleep {
                    // Kept as it is when it fires no later than `wake` (the
                    // last operation's deadline, usually): firing early costs
                    // one more pass of this loop once per timeout, where
                    // moving it costs a timer-wheel update per request.
                    Some((r, s)) if *r == runtime => {
                        if s.deadline() > wake || s.is_elapsed() {
                            s.as_mut().reset(wake);
                        }
                        s
                    }
                    // A timer belongs to the runtime it was made on: one kept
                    // from a runtime since dropped would fail (a panic in
                    // tokio) rather than fire.
                    _ => &mut self.sleep.insert((runtime, Box::pin(tokio::time::sleep_until(wake)))).1,
                };
                // A reply already queued (the usual case for all but the
                // first of a pipelined batch) is taken without polling the
                // timer.
                let (conns, events) = (&mut self.conns, &mut self.events);
                tokio::select! {
                    biased;
                    e = std::future::poll_fn(|cx| Self::poll_event(conns, events, cx)) => Ok(e),
                    () = sleep.as_mut() => Err(()),
                }
            };
            let now = now_us();
            let touched = match ev {
                Ok(Event::Frame(node, generation, _)) if self.conns.get(&node).is_none_or(|c| c.0 != generation) => {
                    None
                }
                Ok(Event::Frame(node, _, Wire::Reply(msg))) => self.deliver(&mut envs, 0, node, msg, now),
                Ok(Event::Frame(node, _, Wire::ReplyOn { slot, msg })) => {
                    self.deliver(&mut envs, slot as usize, node, msg, now)
                }
                Ok(Event::Frame(node, _, Wire::Refused(error))) => {
                    return Err(ClientError::Refused { node: node.0, error });
                }
                Ok(Event::Frame(..)) => None,
                Ok(Event::Closed(node, generation)) if self.conns.get(&node).is_none_or(|c| c.0 != generation) => None,
                Ok(Event::Closed(node, _)) => {
                    self.conns.remove(&node);
                    return Err(ClientError::ConnectionLost(node.0));
                }
                Err(_) => {
                    if Instant::now() >= deadline {
                        return Err(ClientError::Timeout(self.timeout));
                    }
                    while let Some(Reverse((t, _, slot, token))) = self.timers.peek().copied() {
                        if t > Instant::now() {
                            break;
                        }
                        self.timers.pop();
                        envs[slot].now = now;
                        self.protos[slot].on_timer(&mut envs[slot], token);
                    }
                    None
                }
            };
            match touched {
                Some(slot) => self.flush(slot, &mut envs[slot], deadline).await?,
                // Timers may have fired on any slot.
                None => {
                    for (slot, env) in envs.iter_mut().enumerate() {
                        if !env.sends.is_empty() || !env.timers.is_empty() {
                            self.flush(slot, env, deadline).await?;
                        }
                    }
                }
            }
            if self.unwritten {
                self.write_queued(deadline).await?;
            }
        }
    }

    /// The next thing a connection brings: a reply or the end of an
    /// in-process connection from `events`, else a frame or the end of a
    /// remote one, read from its socket here. A frame that does not decode
    /// ends its connection as a closed socket would.
    fn poll_event(
        conns: &mut FxHashMap<NodeId, (u64, Link<P::Msg>)>,
        events: &mut mpsc::UnboundedReceiver<Event<P::Msg>>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Event<P::Msg>> {
        use std::task::Poll;
        if let Poll::Ready(Some(e)) = events.poll_recv(cx) {
            return Poll::Ready(e);
        }
        for (&node, (generation, link)) in conns.iter_mut() {
            let Link::Remote { rd, .. } = link else { continue };
            match rd.poll_frame(cx) {
                Poll::Pending => {}
                Poll::Ready(Ok(Some(body))) => {
                    return Poll::Ready(match decode::<P::Msg>(body) {
                        Ok(w) => Event::Frame(node, *generation, w),
                        Err(_) => Event::Closed(node, *generation),
                    });
                }
                Poll::Ready(Ok(None) | Err(_)) => return Poll::Ready(Event::Closed(node, *generation)),
            }
        }
        Poll::Pending
    }

    /// Hand a reply to slot `slot`'s client; the slot, if it has one.
    fn deliver(
        &mut self,
        envs: &mut [CEnv<P::Msg>],
        slot: usize,
        node: NodeId,
        msg: P::Msg,
        now: u64,
    ) -> Option<usize> {
        // A slot this session never opened: nothing of ours to answer.
        let env = envs.get_mut(slot)?;
        env.now = now;
        self.protos[slot].on_reply(env, node, msg);
        Some(slot)
    }

    pub async fn get(&mut self, key: impl Into<bytes::Bytes>) -> Result<Option<bytes::Bytes>, ClientError> {
        // `execute` written out (see `admit_op`): the front door's GET.
        let op = Op::Get { key: key.into() };
        self.admit_op(&op, true)?;
        let r = self.execute_inner(smallvec::smallvec![op]).await;
        match self.end(r, true)? {
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
        // `execute` written out (see `admit_op`): the front door's SET.
        let op = Op::Put { key: key.into(), value: value.into() };
        self.admit_op(&op, true)?;
        let r = self.execute_inner(smallvec::smallvec![op]).await;
        match self.end(r, true)? {
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

    /// Write every pair as its own write, all in parallel and not
    /// atomically (Cassandra's `batch_mutate`): a reader may see some and
    /// not others, and none depends on another; the session's later
    /// operations follow all of them. Protocols without batches answer
    /// [`OpError::Unsupported`](causeway_core::OpError).
    pub async fn batch(&mut self, writes: Vec<(bytes::Bytes, bytes::Bytes)>) -> Result<(), ClientError> {
        match self.execute(Op::Batch { writes }).await? {
            OpResult::Put => Ok(()),
            OpResult::Failed(e) => Err(e.into()),
            other => unreachable!("a batch answered {other:?}"),
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
        format: causeway_core::WIRE_FORMAT,
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
