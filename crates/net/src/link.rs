//! Outbound peer links: DKVF's contract of reliable FIFO delivery over TCP.
//!
//! Every message to a peer carries a per-channel sequence number. The link
//! keeps each message until the receiver acknowledges it (`Ack { next_seq }`,
//! sent once the receiver's log holds its effects). On every (re)connection
//! the receiver says where to resume (`Welcome { next_seq }`), the link drops
//! what is acknowledged and resends the rest in order; the receiver discards
//! sequence numbers it has already handled. Nothing is lost or reordered
//! across a reconnect, and duplicates are suppressed.
//!
//! A peer may be away for hours (a DC down for maintenance) while this node
//! keeps serving at full speed, so nothing here may block the protocol thread
//! or grow without bound:
//!
//! - the protocol thread hands messages over on an unbounded channel that
//!   this task drains at all times — connected, connecting or backing off —
//!   so the hand-over never waits;
//! - at most `cap` unacknowledged messages stay in memory; the rest go to a
//!   spill file in the node's directory and are read back in order as
//!   acknowledgements make room. The spill is only a cache: every sequenced
//!   message is already in the write-ahead log, which is what survives a
//!   crash (the restarted node resends its outbox from there);
//! - ephemeral messages (heartbeats, stable-time reports:
//!   [`Message::ephemeral`]) are not sequenced: only the newest of each kind
//!   waits, sent once every sequenced message produced before it is out.
//!
//! Small messages are coalesced: one frame carries every message that is due,
//! up to [`MAX_BATCH`]. A link to another DC also lingers
//! ([`LinkParams::linger`]): after a write it gathers for up to that long
//! before the next, so that under load the receiver is woken once per linger
//! rather than once per turn of the sender (about 6 000 times a second on
//! DKVF's configuration, each wake-up a core taken from the nodes and
//! clients beside it). Injected WAN delay is a `due` time per message;
//! delays are constant per link, so FIFO holds. A link logs one line when its
//! peer becomes unreachable (a warning, unless the peer said it was stopping:
//! [`crate::acks`]), one when it is back, and one each time its in-memory
//! window saturates and drains.

use crate::frame::{FrameError, FrameReader, Wire, WireError, decode, encode, encode_into, encode_peer_batch_into};
use crate::tls::Conn;
use causeway_core::{Message, NodeId};
use prometheus_client::metrics::gauge::Gauge;
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::io::WriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until, timeout};

/// Messages per frame at most.
pub const MAX_BATCH: usize = 512;

/// The largest write buffer a link session keeps between writes.
const OUT_BUFFER_KEPT_BYTES: usize = 1 << 20;

/// How long a connection attempt or a welcome may take before the link
/// counts the peer as unreachable and backs off.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const WELCOME_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// How long a link whose peer said goodbye waits for a stop of its own
/// before it logs the peer's absence.
const STOP_GRACE: Duration = Duration::from_millis(100);

/// What the protocol thread hands a link.
pub enum LinkItem<M> {
    /// A sequenced message: kept until acknowledged.
    Seq { seq: u64, msg: M, due: Instant },
    /// An ephemeral message, to follow every sequenced message below
    /// `after_seq`; a newer one of the same kind replaces it.
    Ephemeral { after_seq: u64, msg: M, due: Instant },
    /// A transient message (`Message::transient`): sent at most once, after
    /// every sequenced message below `after_seq`; never kept for a
    /// reconnect beyond the in-memory bound.
    Transient { after_seq: u64, msg: M, due: Instant },
}

struct Item<M> {
    seq: u64,
    msg: M,
    due: Instant,
}

pub struct LinkParams {
    /// How to connect: TLS as this node, or plaintext.
    pub tls: crate::tls::NodeTls,
    pub cluster_id: String,
    pub me: NodeId,
    pub to: NodeId,
    pub addr: SocketAddr,
    /// Unacknowledged messages kept in memory at most; the rest spill to disk.
    pub cap: usize,
    pub max_frame: usize,
    /// Where messages beyond `cap` wait (a cache, recreated on start).
    pub spill_path: PathBuf,
    /// After a write, how long the link gathers what comes next before it
    /// writes again ([`crate::config::Links::linger_us`]); zero writes as
    /// soon as anything is due.
    pub linger: Duration,
    /// This node's incarnation, said in every hello.
    pub incarnation: u64,
    /// Peers' incarnations: a welcome from another one than known is refused.
    pub peers: Arc<crate::identity::PeerIncarnations>,
    /// Where the link reports acknowledgements (so the protocol thread can
    /// log them) — the latest `next_seq` acknowledged.
    pub acked: Arc<AtomicU64>,
    /// Unacknowledged messages, for the metrics endpoint.
    pub depth: Gauge,
    /// Of those, the ones in the spill file.
    pub spilled: Gauge,
}

/// Sequenced messages beyond the in-memory window, in order, in a file.
/// Records are `len: u32 LE | postcard (seq, due_us, msg)`, written and read
/// at explicit offsets; the file is emptied whenever it has been read out.
struct Spill {
    path: PathBuf,
    file: Option<File>,
    write_off: u64,
    read_off: u64,
    count: u64,
}

impl Spill {
    fn file(&mut self) -> std::io::Result<&File> {
        if self.file.is_none() {
            let f = OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&self.path)?;
            self.file = Some(f);
        }
        Ok(self.file.as_ref().expect("just opened"))
    }

    fn push<M: Message>(&mut self, seq: u64, due_us: u64, msg: &M) -> std::io::Result<()> {
        let body = postcard::to_stdvec(&(seq, due_us, msg)).map_err(std::io::Error::other)?;
        let mut rec = Vec::with_capacity(4 + body.len());
        rec.extend_from_slice(&(body.len() as u32).to_le_bytes());
        rec.extend_from_slice(&body);
        let off = self.write_off;
        self.file()?.write_all_at(&rec, off)?;
        self.write_off += rec.len() as u64;
        self.count += 1;
        Ok(())
    }

    fn pop<M: Message>(&mut self) -> std::io::Result<(u64, u64, M)> {
        let off = self.read_off;
        let f = self.file()?;
        let mut len = [0u8; 4];
        f.read_exact_at(&mut len, off)?;
        let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
        f.read_exact_at(&mut body, off + 4)?;
        let r = postcard::from_bytes(&body).map_err(std::io::Error::other)?;
        self.read_off += 4 + body.len() as u64;
        self.count -= 1;
        if self.count == 0 {
            self.read_off = 0;
            self.write_off = 0;
            self.file()?.set_len(0)?;
        }
        Ok(r)
    }
}

/// An ephemeral message waiting: (after_seq, due, msg).
type Pending<M> = (u64, Instant, M);

/// Everything a link holds for its peer.
struct Queue<M> {
    /// Unacknowledged messages in memory, contiguous sequence numbers.
    window: VecDeque<Item<M>>,
    spill: Spill,
    /// Ephemeral messages by kind, oldest first: (after_seq, due, msg).
    /// Once one is due, the older ones are dropped (it supersedes them); the
    /// ones not yet due wait their turn, so a message produced every 10 ms
    /// over an 80 ms injected delay is not superseded forever before it is
    /// ever due. At most delay ÷ period + 1 per kind.
    ephemeral: Vec<(&'static str, VecDeque<Pending<M>>)>,
    /// Transient messages not yet written, in order. At most `cap`: while
    /// the peer is away the oldest are dropped (their senders cope with
    /// losing them, and they would be stale by the time it is back).
    transient: VecDeque<Pending<M>>,
    cap: usize,
    epoch: Instant,
    saturated: bool,
    me: NodeId,
    to: NodeId,
    depth: Gauge,
    spilled: Gauge,
}

impl<M: Message> Queue<M> {
    fn is_empty(&self) -> bool {
        self.window.is_empty()
            && self.spill.count == 0
            && self.transient.is_empty()
            && self.ephemeral.iter().all(|(_, q)| q.is_empty())
    }

    fn gauges(&self) {
        self.depth.set((self.window.len() as u64 + self.spill.count) as i64);
        self.spilled.set(self.spill.count as i64);
    }

    fn accept(&mut self, it: LinkItem<M>) {
        match it {
            LinkItem::Seq { seq, msg, due } => {
                if self.spill.count == 0 && self.window.len() < self.cap {
                    self.window.push_back(Item { seq, msg, due });
                } else {
                    if !self.saturated {
                        self.saturated = true;
                        tracing::warn!(
                            from = self.me.0,
                            to = self.to.0,
                            cap = self.cap,
                            "replication queue full; further messages wait on disk in {}",
                            self.spill.path.display()
                        );
                    }
                    let due_us = due.saturating_duration_since(self.epoch).as_micros() as u64;
                    if let Err(e) = self.spill.push(seq, due_us, &msg) {
                        // Order must hold, so everything after this waits in
                        // memory too; the log still has it all.
                        tracing::error!(
                            from = self.me.0,
                            to = self.to.0,
                            "cannot spill to disk: {e}; keeping in memory"
                        );
                        self.unspill_all();
                        self.window.push_back(Item { seq, msg, due });
                    }
                }
            }
            LinkItem::Ephemeral { after_seq, msg, due } => {
                let kind = msg.kind();
                let i = match self.ephemeral.iter().position(|(k, _)| *k == kind) {
                    Some(i) => i,
                    None => {
                        self.ephemeral.push((kind, VecDeque::new()));
                        self.ephemeral.len() - 1
                    }
                };
                let q = &mut self.ephemeral[i].1;
                q.push_back((after_seq, due, msg));
                let now = Instant::now();
                while q.len() >= 2 && q[1].1 <= now {
                    q.pop_front();
                }
            }
            LinkItem::Transient { after_seq, msg, due } => {
                if self.transient.len() >= self.cap {
                    self.transient.pop_front();
                }
                self.transient.push_back((after_seq, due, msg));
            }
        }
        self.gauges();
    }

    /// Move everything spilled into memory (only when the disk fails).
    fn unspill_all(&mut self) {
        while self.spill.count > 0 {
            match self.spill.pop::<M>() {
                Ok((seq, due_us, msg)) => {
                    self.window.push_back(Item { seq, msg, due: self.epoch + Duration::from_micros(due_us) })
                }
                Err(e) => {
                    tracing::error!(from = self.me.0, to = self.to.0, "spill file unreadable: {e}");
                    return;
                }
            }
        }
    }

    /// Drop what the peer acknowledged and refill the window from the spill.
    fn trim(&mut self, next_seq: u64, acked: &AtomicU64) {
        while self.window.front().is_some_and(|i| i.seq < next_seq) {
            self.window.pop_front();
        }
        while self.window.len() < self.cap && self.spill.count > 0 {
            match self.spill.pop::<M>() {
                Ok((seq, due_us, msg)) => {
                    self.window.push_back(Item { seq, msg, due: self.epoch + Duration::from_micros(due_us) })
                }
                Err(e) => {
                    tracing::error!(from = self.me.0, to = self.to.0, "spill file unreadable: {e}");
                    break;
                }
            }
        }
        if self.saturated && self.spill.count == 0 {
            self.saturated = false;
            tracing::info!(from = self.me.0, to = self.to.0, "replication queue drained below its limit");
        }
        acked.fetch_max(next_seq, Ordering::Relaxed);
        self.gauges();
    }
}

/// Why a session or a wait ended early.
enum End {
    /// Asked to stop, or the protocol thread is gone.
    Stop,
    /// The peer is stopping on purpose: it said so (`Refused(ShuttingDown)`,
    /// see [`crate::acks`]) before closing the connection.
    PeerStopping,
    Failed(FrameError),
}

/// How long a session that failed waits for its reader's account of why
/// (the peer's goodbye may be in the receive buffer behind a failed write).
const VERDICT_TIMEOUT: Duration = Duration::from_millis(100);

/// The peer closed the connection between frames without a goodbye (a
/// crash, a kill, or a node of a version that does not say goodbye).
fn closed_without_goodbye() -> FrameError {
    FrameError::Io(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the peer closed the connection"))
}

impl From<FrameError> for End {
    fn from(e: FrameError) -> End {
        End::Failed(e)
    }
}

impl From<std::io::Error> for End {
    fn from(e: std::io::Error) -> End {
        End::Failed(FrameError::Io(e))
    }
}

/// Take one hand-over (and whatever else is waiting, without waiting).
fn take<M: Message>(q: &mut Queue<M>, rx: &mut mpsc::UnboundedReceiver<LinkItem<M>>, it: Option<LinkItem<M>>) -> bool {
    let Some(it) = it else { return false };
    q.accept(it);
    while let Ok(it) = rx.try_recv() {
        q.accept(it);
    }
    true
}

/// Sleep, still taking hand-overs.
async fn pause<M: Message>(
    d: Duration,
    q: &mut Queue<M>,
    rx: &mut mpsc::UnboundedReceiver<LinkItem<M>>,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), End> {
    let until = Instant::now() + d;
    loop {
        tokio::select! {
            _ = sleep_until(until) => return Ok(()),
            it = rx.recv() => if !take(q, rx, it) { return Err(End::Stop) },
            _ = stop.changed() => return Err(End::Stop),
        }
    }
}

/// Write a whole buffer, still taking hand-overs while the peer is slow to
/// read (a stopped process keeps its socket open and stops reading).
async fn write_all<M: Message>(
    wr: &mut WriteHalf<Conn>,
    buf: &[u8],
    q: &mut Queue<M>,
    rx: &mut mpsc::UnboundedReceiver<LinkItem<M>>,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), End> {
    let mut off = 0;
    while off < buf.len() {
        tokio::select! {
            // `write` is cancel-safe: it either wrote `n` bytes or nothing.
            n = wr.write(&buf[off..]) => {
                let n = n?;
                if n == 0 {
                    return Err(FrameError::Truncated.into());
                }
                off += n;
            }
            it = rx.recv() => if !take(q, rx, it) { return Err(End::Stop) },
            _ = stop.changed() => return Err(End::Stop),
        }
    }
    // TLS may hold what was written until a flush (cancel-safe: it only
    // drives pending output).
    loop {
        tokio::select! {
            r = wr.flush() => return Ok(r?),
            it = rx.recv() => if !take(q, rx, it) { return Err(End::Stop) },
            _ = stop.changed() => return Err(End::Stop),
        }
    }
}

pub async fn run<M: Message>(
    p: LinkParams,
    mut rx: mpsc::UnboundedReceiver<LinkItem<M>>,
    mut stop: watch::Receiver<bool>,
) {
    let _ = std::fs::remove_file(&p.spill_path);
    let mut q = Queue {
        window: VecDeque::new(),
        spill: Spill { path: p.spill_path.clone(), file: None, write_off: 0, read_off: 0, count: 0 },
        ephemeral: Vec::new(),
        transient: VecDeque::new(),
        cap: p.cap.max(1),
        epoch: Instant::now(),
        saturated: false,
        me: p.me,
        to: p.to,
        depth: p.depth.clone(),
        spilled: p.spilled.clone(),
    };
    let _ = linked(&p, &mut q, &mut rx, &mut stop).await;
    drop(q.spill.file.take());
    let _ = std::fs::remove_file(&p.spill_path);
}

async fn linked<M: Message>(
    p: &LinkParams,
    q: &mut Queue<M>,
    rx: &mut mpsc::UnboundedReceiver<LinkItem<M>>,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), End> {
    let mut backoff = Duration::from_millis(20);
    // Since when the peer has been unreachable (logged once per outage).
    let mut down_since: Option<std::time::Instant> = None;
    loop {
        while q.is_empty() {
            tokio::select! {
                it = rx.recv() => if !take(q, rx, it) { return Err(End::Stop) },
                _ = stop.changed() => return Err(End::Stop),
            }
        }
        // The TCP connect and the TLS handshake share the deadline.
        let connect = timeout(CONNECT_TIMEOUT, async {
            let tcp = TcpStream::connect(p.addr).await?;
            p.tls.connect(tcp, p.to).await
        });
        tokio::pin!(connect);
        let stream = loop {
            tokio::select! {
                r = &mut connect => break r,
                it = rx.recv() => if !take(q, rx, it) { return Err(End::Stop) },
                _ = stop.changed() => return Err(End::Stop),
            }
        };
        let stream = match stream {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                stopping(stop)?;
                note_down(p, &mut down_since, Some(&e), q);
                pause(backoff, q, rx, stop).await?;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
            Err(_) => {
                stopping(stop)?;
                note_down(p, &mut down_since, Some(&format!("no connection within {CONNECT_TIMEOUT:?}")), q);
                pause(backoff, q, rx, stop).await?;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        match session(p, stream, q, rx, stop, &mut down_since).await {
            Err(End::Stop) => return Err(End::Stop),
            Err(End::Failed(e)) => {
                tracing::debug!(from = p.me.0, to = p.to.0, "peer link dropped: {e}");
                stopping(stop)?;
                note_down(p, &mut down_since, Some(&e), q);
                backoff = (backoff * 2).min(MAX_BACKOFF);
                pause(backoff, q, rx, stop).await?;
            }
            Err(End::PeerStopping) => {
                stopping(stop)?;
                // A whole cluster stopping is told node by node: a peer's
                // goodbye may arrive just before this node's own stop.
                pause(STOP_GRACE, q, rx, stop).await?;
                note_down(p, &mut down_since, None, q);
                backoff = (backoff * 2).min(MAX_BACKOFF);
                pause(backoff, q, rx, stop).await?;
            }
            Ok(()) => {}
        }
    }
}

/// Ends the link quietly if this node is stopping: its peers going away at
/// the same time (a whole cluster shut down) is not an outage to warn about.
fn stopping(stop: &watch::Receiver<bool>) -> Result<(), End> {
    if *stop.borrow() { Err(End::Stop) } else { Ok(()) }
}

/// Log once per absence of the peer that it is away: a warning when it is
/// unreachable (`why`), at info when it said it was stopping (`None`), as
/// the failed reconnections that follow until it is back are then no
/// outage to warn about.
fn note_down<M: Message>(
    p: &LinkParams,
    down_since: &mut Option<std::time::Instant>,
    why: Option<&dyn std::fmt::Display>,
    q: &Queue<M>,
) {
    if down_since.is_some() {
        return;
    }
    *down_since = Some(std::time::Instant::now());
    let (from, to, addr, queued) = (p.me.0, p.to.0, p.addr, q.window.len() as u64 + q.spill.count);
    match why {
        Some(why) => tracing::warn!(
            from,
            to,
            %addr,
            queued,
            "peer unreachable ({why}); keeping its messages until it is back"
        ),
        None => {
            tracing::info!(from, to, %addr, queued, "peer stopping (it said so); keeping its messages until it is back")
        }
    }
}

/// One connection's life; it only ends with an error (or a stop).
async fn session<M: Message>(
    p: &LinkParams,
    stream: Conn,
    q: &mut Queue<M>,
    rx: &mut mpsc::UnboundedReceiver<LinkItem<M>>,
    stop: &mut watch::Receiver<bool>,
    down_since: &mut Option<std::time::Instant>,
) -> Result<(), End> {
    let (rd, mut wr) = tokio::io::split(stream);
    let mut rd = FrameReader::new(rd, p.max_frame);
    let hello = encode::<M>(&Wire::HelloPeer {
        cluster_id: p.cluster_id.clone(),
        from: p.me,
        to: p.to,
        incarnation: p.incarnation,
        format: causeway_core::WIRE_FORMAT,
    });
    write_all(&mut wr, &hello, q, rx, stop).await?;
    let welcome = {
        let welcome = timeout(WELCOME_TIMEOUT, rd.next_frame());
        tokio::pin!(welcome);
        let body = loop {
            tokio::select! {
                r = &mut welcome => break r,
                it = rx.recv() => if !take(q, rx, it) { return Err(End::Stop) },
                _ = stop.changed() => return Err(End::Stop),
            }
        };
        let body = body
            .map_err(|_| FrameError::Malformed(format!("no welcome within {WELCOME_TIMEOUT:?}")))??
            .ok_or_else(closed_without_goodbye)?;
        decode::<M>(body)?
    };
    let mut next_send = match welcome {
        Wire::Welcome { next_seq, incarnation } => {
            if let Err(known) = p.peers.check(p.to, incarnation) {
                // Its acknowledgements were for another life: resending from
                // its `next_seq` would skip or repeat messages silently.
                tracing::error!(
                    from = p.me.0,
                    to = p.to.0,
                    known = format!("{known:x}"),
                    got = format!("{incarnation:x}"),
                    "peer came back as another incarnation (lost its data dir?); not replicating to it"
                );
                return Err(FrameError::Malformed(format!("peer is incarnation {incarnation:x}, not {known:x}")).into());
            }
            next_seq
        }
        Wire::Refused(WireError::ShuttingDown) => return Err(End::PeerStopping),
        Wire::Refused(e) => {
            tracing::error!(from = p.me.0, to = p.to.0, "peer refused the link: {e}");
            return Err(FrameError::Malformed(format!("refused: {e}")).into());
        }
        other => return Err(FrameError::Malformed(format!("expected a welcome, got {other:?}")).into()),
    };
    if let Some(since) = down_since.take() {
        tracing::info!(
            from = p.me.0,
            to = p.to.0,
            after_s = since.elapsed().as_secs_f64(),
            queued = q.window.len() as u64 + q.spill.count,
            "peer reachable again; resending what it has not acknowledged"
        );
    }
    q.trim(next_send, &p.acked);
    // Acknowledgements arrive on their own task so that reading is never
    // cancelled half-way through a frame. It ends with why the connection
    // did.
    let (ack_tx, mut ack_rx) = watch::channel(next_send);
    let mut reader = tokio::spawn(async move {
        loop {
            let frame = match rd.next_frame().await {
                Ok(Some(b)) => decode::<M>(b),
                Ok(None) => return End::Failed(closed_without_goodbye()),
                Err(e) => return End::Failed(e),
            };
            match frame {
                Ok(Wire::Ack { next_seq }) => {
                    let _ = ack_tx.send(next_seq);
                }
                Ok(Wire::Refused(WireError::ShuttingDown)) => return End::PeerStopping,
                Ok(other) => return End::Failed(FrameError::Malformed(format!("expected an ack, got {other:?}"))),
                Err(e) => return End::Failed(e),
            }
        }
    });
    // One buffer for every frame this session writes, kept from write to
    // write: a batch runs to tens of kilobytes, and a fresh one each time
    // is page faults on the node's thread.
    let mut out = Vec::new();
    // When this session last wrote, for the linger ([`LinkParams::linger`]).
    let mut last_write: Option<Instant> = None;
    let result = async {
        loop {
            let now = Instant::now();
            let mut next_due = None;
            // A link that wrote less than `linger` ago holds what came since
            // (unless a full batch waits), to write it all at once then.
            let unsent =
                q.window.front().map_or(0, |f| q.window.len().saturating_sub(next_send.saturating_sub(f.seq) as usize));
            let holding = last_write.map(|t| t + p.linger).filter(|&until| until > now && unsent < MAX_BATCH);
            let mut wrote = false;
            if let Some(until) = holding {
                if unsent > 0 || q.ephemeral.iter().any(|(_, eq)| !eq.is_empty()) || !q.transient.is_empty() {
                    next_due = Some(until);
                }
            } else {
                // Send everything that is due, in order, in batches.
                // Sequence numbers in the window are contiguous.
                while let Some(front) = q.window.front() {
                    let start = next_send.saturating_sub(front.seq) as usize;
                    if start >= q.window.len() {
                        break;
                    }
                    let first_seq = q.window[start].seq;
                    let mut n = 0;
                    for it in q.window.iter().skip(start) {
                        if it.due > now {
                            next_due = Some(it.due);
                            break;
                        }
                        n += 1;
                        if n == MAX_BATCH {
                            break;
                        }
                    }
                    if n == 0 {
                        break;
                    }
                    next_send = first_seq + n as u64;
                    out.clear();
                    out = encode_peer_batch_into(first_seq, q.window.range(start..start + n).map(|it| &it.msg), out);
                    write_all(&mut wr, &out, q, rx, stop).await?;
                    wrote = true;
                }
                // Then the ephemeral messages whose predecessors are all out.
                // Of each kind, only the newest sendable one goes out.
                let mut ready = Vec::new();
                for (_, eq) in q.ephemeral.iter_mut() {
                    let mut newest = None;
                    while let Some(&(after_seq, due, _)) = eq.front() {
                        if after_seq <= next_send && due <= now {
                            newest = eq.pop_front();
                        } else {
                            if after_seq <= next_send {
                                next_due = Some(next_due.map_or(due, |d: Instant| d.min(due)));
                            }
                            break;
                        }
                    }
                    ready.extend(newest);
                }
                // Transient messages in order, those due together in one write;
                // each is taken off the queue before it is written (at most once).
                out.clear();
                while let Some(&(after_seq, due, _)) = q.transient.front() {
                    if after_seq > next_send {
                        break;
                    }
                    if due > now {
                        next_due = Some(next_due.map_or(due, |d: Instant| d.min(due)));
                        break;
                    }
                    let (after_seq, _, msg) = q.transient.pop_front().expect("just seen");
                    out = encode_into(&Wire::Ephemeral { after_seq, msg }, out);
                    if out.len() >= 64 * 1024 {
                        next_due = Some(now); // the rest right after this write
                        break;
                    }
                }
                for (after_seq, _, msg) in ready {
                    out = encode_into(&Wire::Ephemeral { after_seq, msg }, out);
                }
                if !out.is_empty() {
                    write_all(&mut wr, &out, q, rx, stop).await?;
                    wrote = true;
                }
            }
            if wrote && !p.linger.is_zero() {
                last_write = Some(Instant::now());
            }
            if wrote {
                // `write_all` takes what the node hands over while it writes,
                // and nothing may come to wake this loop for it: a transient
                // message (a read forwarded within the DC) has no
                // acknowledgement coming back, and its sender may have nothing
                // more for this peer until its client gives up. So look again
                // at once rather than wait for the next hand-over or ack.
                next_due = Some(now);
            }
            // A burst of large values leaves a large buffer; it is not kept.
            if out.capacity() > OUT_BUFFER_KEPT_BYTES {
                out = Vec::new();
            }
            tokio::select! {
                it = rx.recv() => if !take(q, rx, it) { return Err(End::Stop) },
                changed = ack_rx.changed() => {
                    if changed.is_err() {
                        // The reader ended; it says why, below.
                        return Err(FrameError::Truncated.into());
                    }
                    let n = *ack_rx.borrow_and_update();
                    q.trim(n, &p.acked);
                }
                _ = async { sleep_until(next_due.expect("guarded")).await }, if next_due.is_some() => {}
                _ = stop.changed() => return Err(End::Stop),
            }
        }
    }
    .await;
    // A session that failed may have failed because the peer went away: the
    // reader knows whether it said goodbye first.
    let result = match result {
        Err(End::Failed(e)) => match timeout(VERDICT_TIMEOUT, &mut reader).await {
            Ok(Ok(verdict)) => Err(verdict),
            _ => Err(End::Failed(e)),
        },
        r => r,
    };
    reader.abort();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::read_frame;
    use causeway_protocols::eventual::Msg;
    use tokio::net::TcpListener;

    /// A peer that welcomes the link, never acknowledges, and reports the
    /// number of messages in each frame it reads.
    async fn counting_peer(listener: TcpListener, frames: mpsc::UnboundedSender<usize>) {
        let (mut s, _) = listener.accept().await.unwrap();
        let hello = read_frame(&mut s, 1 << 20).await.unwrap().unwrap();
        assert!(matches!(decode::<Msg>(&hello).unwrap(), Wire::HelloPeer { .. }));
        s.write_all(&encode::<Msg>(&Wire::Welcome { next_seq: 1, incarnation: 7 })).await.unwrap();
        while let Ok(Some(body)) = read_frame(&mut s, 1 << 20).await {
            if let Ok(Wire::Peer { msgs, .. }) = decode::<Msg>(&body) {
                let _ = frames.send(msgs.len());
            }
        }
    }

    /// A link from node 0 to a [`counting_peer`], with `linger`; its
    /// sender, and the peer's report of each frame's size.
    async fn link_with(
        linger: Duration,
        name: &str,
    ) -> (mpsc::UnboundedSender<LinkItem<Msg>>, mpsc::UnboundedReceiver<usize>, watch::Sender<bool>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (frames_tx, frames) = mpsc::unbounded_channel();
        tokio::spawn(counting_peer(listener, frames_tx));
        let (tx, rx) = mpsc::unbounded_channel();
        let (stop_tx, stop_rx) = watch::channel(false);
        tokio::spawn(run::<Msg>(params(addr, name, linger), rx, stop_rx));
        (tx, frames, stop_tx)
    }

    /// A plaintext link from node 0 to node 1 at `addr`.
    fn params(addr: SocketAddr, name: &str, linger: Duration) -> LinkParams {
        let spill_path = std::env::temp_dir().join(format!("causeway-link-{name}-{}", std::process::id()));
        LinkParams {
            tls: crate::tls::NodeTls::plaintext(),
            cluster_id: "linger".into(),
            me: NodeId(0),
            to: NodeId(1),
            addr,
            cap: 10_000,
            max_frame: 1 << 20,
            spill_path,
            linger,
            incarnation: 1,
            peers: Arc::new(crate::identity::PeerIncarnations::new(2, &Default::default())),
            acked: Arc::new(AtomicU64::new(0)),
            depth: Gauge::default(),
            spilled: Gauge::default(),
        }
    }

    fn seq(tx: &mpsc::UnboundedSender<LinkItem<Msg>>, seq: u64) {
        tx.send(LinkItem::Seq { seq, msg: Msg::PutReply, due: Instant::now() }).unwrap();
    }

    async fn next_frame(frames: &mut mpsc::UnboundedReceiver<usize>, within: Duration) -> Option<usize> {
        timeout(within, frames.recv()).await.ok().flatten()
    }

    /// Four messages handed over 50 ms apart.
    async fn trickle(tx: &mpsc::UnboundedSender<LinkItem<Msg>>, from: u64) {
        for s in from..from + 4 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            seq(tx, s);
        }
    }

    #[tokio::test]
    async fn a_lingering_link_writes_a_lone_message_at_once_and_gathers_what_follows() {
        let (tx, mut frames, _stop) = link_with(Duration::from_secs(2), "gather").await;
        seq(&tx, 1);
        // The link had not written for the linger: no wait.
        assert_eq!(next_frame(&mut frames, Duration::from_millis(1500)).await, Some(1), "a lone message waits");
        // Within the linger of that write, what comes is held and goes as one frame.
        trickle(&tx, 2).await;
        assert_eq!(next_frame(&mut frames, Duration::from_secs(10)).await, Some(4));
        // A full batch does not wait for the linger.
        for s in 6..6 + MAX_BATCH as u64 {
            seq(&tx, s);
        }
        assert_eq!(next_frame(&mut frames, Duration::from_millis(1500)).await, Some(MAX_BATCH), "a full batch waits");
    }

    #[tokio::test]
    async fn without_a_linger_each_message_goes_when_it_comes() {
        let (tx, mut frames, _stop) = link_with(Duration::ZERO, "eager").await;
        seq(&tx, 1);
        assert_eq!(next_frame(&mut frames, Duration::from_secs(10)).await, Some(1));
        trickle(&tx, 2).await;
        for _ in 0..4 {
            assert_eq!(next_frame(&mut frames, Duration::from_secs(10)).await, Some(1));
        }
    }

    /// A peer that welcomes the link, then leaves: it says goodbye first
    /// (`Refused(ShuttingDown)`, as a node stopping on purpose does) or
    /// not (as a crashed one), and stops listening, so that reconnections
    /// are refused.
    async fn leaving_peer(listener: TcpListener, goodbye: bool) {
        let (mut s, _) = listener.accept().await.unwrap();
        drop(listener);
        let hello = read_frame(&mut s, 1 << 20).await.unwrap().unwrap();
        assert!(matches!(decode::<Msg>(&hello).unwrap(), Wire::HelloPeer { .. }));
        s.write_all(&encode::<Msg>(&Wire::Welcome { next_seq: 1, incarnation: 7 })).await.unwrap();
        if goodbye {
            s.write_all(&encode::<Msg>(&Wire::Refused(WireError::ShuttingDown))).await.unwrap();
        }
        s.shutdown().await.unwrap();
        // Read until the link hangs up, so that closing with unread input
        // does not reset the connection under the goodbye.
        let _ =
            timeout(Duration::from_secs(10), async { while let Ok(Some(_)) = read_frame(&mut s, 1 << 20).await {} })
                .await;
    }

    /// A log line sink for one test's subscriber.
    #[derive(Clone, Default)]
    struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What a link logs when its peer leaves ([`leaving_peer`]) and stays
    /// away through several attempts to reconnect. One thread runs it all,
    /// so the test's own subscriber sees every line.
    fn log_of_a_link_whose_peer_leaves(goodbye: bool, name: &str) -> String {
        let log = Captured::default();
        let sink = log.clone();
        let subscriber = tracing_subscriber::fmt().with_writer(move || sink.clone()).with_ansi(false).finish();
        tracing::subscriber::with_default(subscriber, || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                let peer = tokio::spawn(leaving_peer(listener, goodbye));
                let (tx, rx) = mpsc::unbounded_channel();
                let (stop_tx, stop_rx) = watch::channel(false);
                let link = tokio::spawn(run::<Msg>(params(addr, name, Duration::ZERO), rx, stop_rx));
                seq(&tx, 1);
                peer.await.unwrap();
                // Past the grace, and a few refused reconnections.
                tokio::time::sleep(STOP_GRACE + Duration::from_millis(500)).await;
                stop_tx.send(true).unwrap();
                link.await.unwrap();
            })
        });
        String::from_utf8(log.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn a_peer_that_says_it_is_stopping_is_no_outage() {
        let log = log_of_a_link_whose_peer_leaves(true, "goodbye");
        assert!(log.contains("peer stopping (it said so)"), "{log}");
        assert!(!log.contains("WARN"), "{log}");
    }

    #[test]
    fn a_peer_that_vanishes_is_an_outage() {
        let log = log_of_a_link_whose_peer_leaves(false, "vanish");
        assert!(
            log.contains("WARN") && log.contains("peer unreachable (i/o error: the peer closed the connection)"),
            "{log}"
        );
        assert!(!log.contains("it said so"), "{log}");
    }
}
