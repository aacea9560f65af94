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
//! Small messages are coalesced: one frame carries every message that is due,
//! up to [`MAX_BATCH`]. When `peer_queue` messages are unacknowledged the link
//! stops taking new ones, its bounded channel fills, and the protocol thread
//! blocks: backpressure instead of unbounded queues. Injected WAN delay is a
//! `due` time per message; delays are constant per link, so FIFO holds.

use crate::frame::{FrameError, Wire, decode, encode, read_frame};
use causeway_core::{Message, NodeId};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep, sleep_until, timeout};

/// Messages per frame at most.
pub const MAX_BATCH: usize = 512;

pub struct LinkItem<M> {
    pub seq: u64,
    pub msg: M,
    pub due: Instant,
}

pub struct LinkParams {
    pub cluster_id: String,
    pub me: NodeId,
    pub to: NodeId,
    pub addr: SocketAddr,
    pub cap: usize,
    pub max_frame: usize,
    /// Where the link reports acknowledgements (so the protocol thread can
    /// log them) — the latest `next_seq` acknowledged.
    pub acked: Arc<AtomicU64>,
    /// Unacknowledged messages, for the metrics endpoint.
    pub depth: Arc<AtomicU64>,
}

pub async fn run<M: Message>(p: LinkParams, mut rx: mpsc::Receiver<LinkItem<M>>, mut stop: watch::Receiver<bool>) {
    let mut unacked: VecDeque<LinkItem<M>> = VecDeque::new();
    let mut backoff = Duration::from_millis(20);
    loop {
        if unacked.is_empty() {
            tokio::select! {
                it = rx.recv() => match it {
                    Some(it) => unacked.push_back(it),
                    None => return,
                },
                _ = stop.changed() => return,
            }
        }
        let stream = tokio::select! {
            s = TcpStream::connect(p.addr) => s,
            _ = stop.changed() => return,
        };
        let Ok(stream) = stream else {
            tokio::select! {
                _ = sleep(backoff) => {}
                _ = stop.changed() => return,
            }
            backoff = (backoff * 2).min(Duration::from_secs(1));
            continue;
        };
        let _ = stream.set_nodelay(true);
        match session(&p, stream, &mut rx, &mut unacked, &mut stop).await {
            Ok(()) => return,
            Err(e) => {
                tracing::debug!(from = p.me.0, to = p.to.0, "peer link dropped: {e}");
                backoff = Duration::from_millis(20);
                tokio::select! {
                    _ = sleep(backoff) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    }
}

fn trim<M>(unacked: &mut VecDeque<LinkItem<M>>, next_seq: u64, p: &LinkParams) {
    while unacked.front().is_some_and(|i| i.seq < next_seq) {
        unacked.pop_front();
    }
    p.acked.fetch_max(next_seq, Ordering::Relaxed);
    p.depth.store(unacked.len() as u64, Ordering::Relaxed);
}

/// One connection's life. `Ok` only when asked to stop.
async fn session<M: Message>(
    p: &LinkParams,
    stream: TcpStream,
    rx: &mut mpsc::Receiver<LinkItem<M>>,
    unacked: &mut VecDeque<LinkItem<M>>,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), FrameError> {
    let (rd, mut wr) = stream.into_split();
    let mut rd = tokio::io::BufReader::with_capacity(64 * 1024, rd);
    wr.write_all(&encode::<M>(&Wire::HelloPeer { cluster_id: p.cluster_id.clone(), from: p.me, to: p.to })).await?;
    let body = timeout(Duration::from_secs(5), read_frame(&mut rd, p.max_frame))
        .await
        .map_err(|_| FrameError::Malformed("no welcome within 5 s".into()))??
        .ok_or(FrameError::Truncated)?;
    let mut next_send = match decode::<M>(&body)? {
        Wire::Welcome { next_seq } => next_seq,
        Wire::Refused(e) => {
            tracing::error!(from = p.me.0, to = p.to.0, "peer refused the link: {e}");
            return Err(FrameError::Malformed(format!("refused: {e}")));
        }
        other => return Err(FrameError::Malformed(format!("expected a welcome, got {other:?}"))),
    };
    trim(unacked, next_send, p);
    // Acknowledgements arrive on their own task so that reading is never
    // cancelled half-way through a frame.
    let (ack_tx, mut ack_rx) = watch::channel(next_send);
    let max = p.max_frame;
    let reader = tokio::spawn(async move {
        loop {
            match read_frame(&mut rd, max).await {
                Ok(Some(b)) => match decode::<M>(&b) {
                    Ok(Wire::Ack { next_seq }) => {
                        let _ = ack_tx.send(next_seq);
                    }
                    _ => return,
                },
                _ => return,
            }
        }
    });
    let result = async {
        loop {
            // Send everything that is due, in order, in batches.
            let now = Instant::now();
            let mut next_due = None;
            // Sequence numbers in `unacked` are contiguous.
            while let Some(front) = unacked.front() {
                let start = next_send.saturating_sub(front.seq) as usize;
                if start >= unacked.len() {
                    break;
                }
                let mut msgs = Vec::new();
                let first_seq = unacked[start].seq;
                for it in unacked.iter().skip(start) {
                    if it.due > now {
                        next_due = Some(it.due);
                        break;
                    }
                    msgs.push(it.msg.clone());
                    if msgs.len() == MAX_BATCH {
                        break;
                    }
                }
                if msgs.is_empty() {
                    break;
                }
                next_send = first_seq + msgs.len() as u64;
                wr.write_all(&encode(&Wire::Peer { first_seq, msgs })).await?;
            }
            let room = unacked.len() < p.cap;
            tokio::select! {
                it = rx.recv(), if room => match it {
                    Some(it) => {
                        unacked.push_back(it);
                        // Take whatever else is already queued, without waiting.
                        while unacked.len() < p.cap {
                            match rx.try_recv() {
                                Ok(it) => unacked.push_back(it),
                                Err(_) => break,
                            }
                        }
                        p.depth.store(unacked.len() as u64, Ordering::Relaxed);
                    }
                    None => return Ok(()),
                },
                changed = ack_rx.changed() => {
                    if changed.is_err() {
                        return Err(FrameError::Truncated);
                    }
                    let n = *ack_rx.borrow_and_update();
                    trim(unacked, n, p);
                }
                _ = async { sleep_until(next_due.expect("guarded")).await }, if next_due.is_some() => {}
                _ = stop.changed() => return Ok(()),
            }
        }
    }
    .await;
    reader.abort();
    result
}
