//! A stand-in peer: a node identity of the cluster that is not a running
//! node but speaks the network runtime's peer protocol as one — its
//! messages leave over the runtime's own outbound link ([`link::run`]:
//! mutual TLS, hello, sequence numbers, batching into frames,
//! acknowledgements), and a listener at its address takes the real node's
//! link in (TLS as that node, welcome, frames, acknowledgements) and hands
//! every message to the driver.

use causeway_core::{Message, NodeId};
use causeway_net::config::Cluster;
use causeway_net::frame::{FrameReader, Wire, decode, encode};
use causeway_net::link::{self, LinkItem, LinkParams};
use causeway_net::tls::NodeTls;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, watch};

/// The outbound half: messages from `me` to the real node `to`.
pub struct Outbound<M> {
    tx: mpsc::UnboundedSender<LinkItem<M>>,
    /// The last sequence number handed to the link.
    pub sent: u64,
    /// The next sequence number the real node has durably handled.
    pub acked: Arc<AtomicU64>,
}

impl<M: Message> Outbound<M> {
    /// Start the runtime's own link from `me` to `to` (links inside a DC
    /// write at once, as a node's do; across DCs they linger as configured).
    pub fn start(
        cluster: &Arc<Cluster>,
        me: NodeId,
        to: NodeId,
        spill_dir: &std::path::Path,
        stop: watch::Receiver<bool>,
    ) -> Result<Self, causeway_net::tls::TlsError> {
        let tls = NodeTls::load(cluster, me)?;
        let acked = Arc::new(AtomicU64::new(0));
        let t = &cluster.topology;
        let params = LinkParams {
            tls,
            cluster_id: cluster.config.cluster_id.clone(),
            me,
            to,
            addr: cluster.addrs[to.idx()],
            cap: cluster.config.limits.peer_queue,
            max_frame: cluster.config.limits.max_frame_bytes,
            spill_path: spill_dir.join(format!("spill-{}-to-{}", me.0, to.0)),
            linger: if t.dc_of(to) == t.dc_of(me) {
                Duration::ZERO
            } else {
                Duration::from_micros(cluster.config.links.linger_us)
            },
            incarnation: incarnation_of(me),
            peers: Arc::new(causeway_net::identity::PeerIncarnations::new(t.nodes(), &Default::default())),
            acked: acked.clone(),
            depth: Default::default(),
            spilled: Default::default(),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(link::run::<M>(params, rx, stop));
        Ok(Outbound { tx, sent: 0, acked })
    }

    /// Hand the link a sequenced message.
    pub fn send(&mut self, msg: M) {
        self.sent += 1;
        let _ = self.tx.send(LinkItem::Seq { seq: self.sent, msg, due: tokio::time::Instant::now() });
    }

    /// Hand the link an ephemeral message ([`Message::ephemeral`]).
    pub fn send_ephemeral(&mut self, msg: M) {
        let item = LinkItem::Ephemeral { after_seq: self.sent + 1, msg, due: tokio::time::Instant::now() };
        let _ = self.tx.send(item);
    }

    /// Sequenced messages handed over and not yet acknowledged.
    pub fn unacked(&self) -> u64 {
        (self.sent + 1).saturating_sub(self.acked.load(std::sync::atomic::Ordering::Relaxed).max(1))
    }
}

/// A stand-in's incarnation: fixed per identity (each run has fresh
/// directories, so the real node has never known another).
fn incarnation_of(me: NodeId) -> u64 {
    0x5eed_0000 + me.0 as u64
}

/// Serve the real node's links to stand-in `me` on `listener` until
/// `stop`: welcome each connection where the last one left off,
/// acknowledge every frame once its messages are handed to `on_msg`.
pub async fn serve_inbound<M: Message>(
    cluster: Arc<Cluster>,
    me: NodeId,
    listener: tokio::net::TcpListener,
    mut on_msg: impl FnMut(M),
    mut stop: watch::Receiver<bool>,
) {
    let Ok(tls) = NodeTls::load(&cluster, me) else { return };
    let max = cluster.config.limits.max_frame_bytes;
    let mut next_seq = 1u64;
    loop {
        let tcp = tokio::select! {
            a = listener.accept() => match a { Ok((tcp, _)) => tcp, Err(_) => continue },
            _ = stop.changed() => return,
        };
        let _ = tcp.set_nodelay(true);
        let Ok(conn) = tls.accept(tcp).await else { continue };
        let (rd, mut wr) = tokio::io::split(conn);
        let mut frames = FrameReader::new(rd, max);
        match frames.next_frame().await {
            Ok(Some(body)) if matches!(decode::<M>(body), Ok(Wire::HelloPeer { .. })) => {}
            _ => continue,
        }
        let welcome = encode::<M>(&Wire::Welcome { next_seq, incarnation: incarnation_of(me) });
        if wr.write_all(&welcome).await.is_err() {
            continue;
        }
        loop {
            let frame = tokio::select! {
                f = frames.next_frame() => match f {
                    Ok(Some(body)) => decode::<M>(body),
                    _ => break,
                },
                _ = stop.changed() => return,
            };
            match frame {
                Ok(Wire::Peer { first_seq, msgs }) => {
                    let n = msgs.len() as u64;
                    for (seq, m) in (first_seq..).zip(msgs) {
                        if seq >= next_seq {
                            on_msg(m);
                        }
                    }
                    next_seq = next_seq.max(first_seq + n);
                    if wr.write_all(&encode::<M>(&Wire::Ack { next_seq })).await.is_err() {
                        break;
                    }
                }
                Ok(Wire::Ephemeral { msg, .. }) => on_msg(msg),
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
}
