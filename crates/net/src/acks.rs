//! The receiving end of a peer link ([`crate::link`]): acknowledging what
//! has been delivered durably, and saying goodbye when this node stops.
//!
//! The protocol thread [publishes](Delivered::publish) after each turn's
//! log sync how far each peer's messages are durable; each connection from
//! a peer [acknowledges](acknowledge) that with `Ack { next_seq }`, at most
//! once per [`ACK_INTERVAL`] (a busy link gets one acknowledgement per
//! interval, not one per turn) and only when it moved: an idle cluster's
//! connections sleep until there is something to acknowledge rather than
//! waking every few milliseconds to find nothing new.
//!
//! A node that stops on purpose writes `Refused(ShuttingDown)` on every
//! connection from a peer before closing it, so the peer's link knows the
//! close is orderly and logs it as such rather than as an outage; a node
//! that crashes or is cut off says nothing, and its peers warn.

use crate::frame::{FrameReader, Wire, WireError, encode};
use causeway_core::NodeId;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout};

/// How long acknowledgements gather before one is written.
pub const ACK_INTERVAL: Duration = Duration::from_millis(5);

/// How long a stopping node spends on each peer connection's goodbye: the
/// write, then the peer hanging up (closing a socket with unread input
/// makes the kernel send a reset, which can overtake the goodbye).
pub const GOODBYE_TIMEOUT: Duration = Duration::from_secs(1);

/// How far each peer's sequenced messages are durable here: the last
/// sequence number delivered and in the log, per source node.
pub struct Delivered {
    from: Vec<watch::Sender<u64>>,
}

impl Delivered {
    /// `seqs[i]`: what the log says was delivered from node `i`.
    pub fn new(seqs: impl IntoIterator<Item = u64>) -> Delivered {
        Delivered { from: seqs.into_iter().map(|s| watch::channel(s).0).collect() }
    }

    /// The last sequence number from `from` that is durable here.
    pub fn get(&self, from: NodeId) -> u64 {
        *self.from[from.idx()].borrow()
    }

    /// Record that everything from node `from` up to `seq` is durable; wakes
    /// that peer's connection only if it moved.
    pub fn publish(&self, from: usize, seq: u64) {
        let s = &self.from[from];
        if *s.borrow() != seq {
            s.send_replace(seq);
        }
    }
}

/// The reply half of a connection from peer `from` whose hello was answered
/// with everything up to `welcomed` delivered: acknowledges durable
/// progress until the connection ends (the caller aborts this task) or this
/// node stops, and then says goodbye.
pub async fn acknowledge<W: AsyncWrite + Unpin>(
    mut wr: W,
    delivered: std::sync::Arc<Delivered>,
    from: NodeId,
    welcomed: u64,
    mut stop: watch::Receiver<bool>,
) {
    let mut durable = delivered.from[from.idx()].subscribe();
    let mut acked = welcomed;
    let stopping = loop {
        if *durable.borrow_and_update() == acked {
            tokio::select! {
                r = durable.changed() => if r.is_err() { break false },
                _ = stop.wait_for(|s| *s) => break true,
            }
        }
        let d = *durable.borrow_and_update();
        if d != acked {
            if send(&mut wr, &encode::<()>(&Wire::Ack { next_seq: d + 1 })).await.is_err() {
                break false;
            }
            acked = d;
        }
        // What the next turns make durable gathers into the next
        // acknowledgement: a busy link gets one per interval, not one per
        // turn, and the first progress after a quiet spell goes at once.
        tokio::select! {
            _ = sleep(ACK_INTERVAL) => {}
            _ = stop.wait_for(|s| *s) => break true,
        }
    };
    if stopping {
        let _ = timeout(GOODBYE_TIMEOUT, async {
            send(&mut wr, &encode::<()>(&Wire::Refused(WireError::ShuttingDown))).await?;
            // TLS close_notify and FIN: nothing more comes from this side.
            wr.shutdown().await
        })
        .await;
    }
}

/// End a peer connection's acknowledging task, its reader `rd` being done
/// with. While this node stops, the goodbye is written and the peer given
/// the time to hang up (both within [`GOODBYE_TIMEOUT`]); otherwise the
/// task ends at once.
pub async fn part<R: AsyncRead + Unpin>(
    mut acker: JoinHandle<()>,
    rd: &mut FrameReader<R>,
    stop: &watch::Receiver<bool>,
) {
    if *stop.borrow() {
        let _ = timeout(GOODBYE_TIMEOUT, async {
            let _ = (&mut acker).await;
            // What the peer sent meanwhile is read and dropped until it closes.
            while let Ok(Some(_)) = rd.next_frame().await {}
        })
        .await;
    }
    acker.abort();
}

/// Write one frame and flush it (TLS may hold written bytes until a flush).
async fn send(w: &mut (impl AsyncWrite + Unpin), frame: &[u8]) -> std::io::Result<()> {
    w.write_all(frame).await?;
    w.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{decode, read_frame};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, DuplexStream};

    /// The next frame from the acknowledging side, if one comes within `within`.
    async fn next(peer: &mut DuplexStream, within: Duration) -> Option<Wire<()>> {
        match timeout(within, read_frame(peer, 1 << 10)).await {
            Ok(Ok(Some(body))) => Some(decode::<()>(&body).unwrap()),
            Ok(other) => panic!("the connection ended: {other:?}"),
            Err(_) => None,
        }
    }

    fn ack_of(w: Option<Wire<()>>) -> u64 {
        match w {
            Some(Wire::Ack { next_seq }) => next_seq,
            other => panic!("expected an ack, got {other:?}"),
        }
    }

    /// On tokio's paused clock: an idle connection writes nothing however
    /// long it waits; progress is acknowledged once per interval, the
    /// newest; a publish of what is already known writes nothing.
    #[tokio::test(start_paused = true)]
    async fn acknowledges_progress_once_per_interval_and_nothing_while_idle() {
        let delivered = Arc::new(Delivered::new([0, 7]));
        let (mine, mut peer) = tokio::io::duplex(1 << 16);
        let (_stop_tx, stop) = watch::channel(false);
        tokio::spawn(acknowledge(mine, delivered.clone(), NodeId(1), 7, stop));
        assert!(next(&mut peer, Duration::from_secs(3600)).await.is_none(), "an idle link was acknowledged");
        delivered.publish(1, 8);
        delivered.publish(1, 9);
        assert_eq!(ack_of(next(&mut peer, ACK_INTERVAL * 2).await), 10);
        delivered.publish(1, 9);
        delivered.publish(0, 3);
        assert!(next(&mut peer, Duration::from_secs(60)).await.is_none(), "acknowledged what it had");
        delivered.publish(1, 12);
        assert_eq!(ack_of(next(&mut peer, ACK_INTERVAL * 2).await), 13);
    }

    /// Progress made before the connection's task started (after the
    /// welcome) is acknowledged without waiting for more.
    #[tokio::test(start_paused = true)]
    async fn acknowledges_what_moved_since_the_welcome() {
        let delivered = Arc::new(Delivered::new([5]));
        let (mine, mut peer) = tokio::io::duplex(1 << 16);
        let (_stop_tx, stop) = watch::channel(false);
        tokio::spawn(acknowledge(mine, delivered, NodeId(0), 2, stop));
        assert_eq!(ack_of(next(&mut peer, ACK_INTERVAL).await), 6);
    }

    /// A stopping node says so, then closes its side.
    #[tokio::test]
    async fn says_goodbye_when_the_node_stops() {
        let delivered = Arc::new(Delivered::new([0]));
        let (mine, mut peer) = tokio::io::duplex(1 << 16);
        let (stop_tx, stop) = watch::channel(false);
        let acker = tokio::spawn(acknowledge(mine, delivered, NodeId(0), 0, stop));
        stop_tx.send(true).unwrap();
        let bye = next(&mut peer, Duration::from_secs(10)).await;
        assert!(matches!(bye, Some(Wire::Refused(WireError::ShuttingDown))), "{bye:?}");
        let mut rest = Vec::new();
        assert_eq!(timeout(Duration::from_secs(10), peer.read_to_end(&mut rest)).await.unwrap().unwrap(), 0);
        timeout(Duration::from_secs(10), acker).await.unwrap().unwrap();
    }
}
