//! Where the output the node core releases goes: sequenced and unsequenced
//! messages to the peer links (held there until the link's injected WAN
//! delay is due), replies to their sessions' reply pipes or in-process
//! queues; and the request latency metric, from a request's batch to the
//! release of its reply, which is when it left.

use crate::frame::{Wire, encode_into};
use crate::inbox::Replies;
use crate::link::LinkItem;
use crate::metrics::{Kept, NodeMetrics};
use crate::reply_pipe::ReplyPipe;
use causeway_core::{ClientId, Message, NodeId, Output};
use prometheus_client::metrics::{counter::Counter, histogram::Histogram};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub(super) struct Outlets<M> {
    /// Per destination, its link (none to this node itself).
    pub(super) links: Vec<Option<mpsc::UnboundedSender<LinkItem<M>>>>,
    /// Per destination, the one-way WAN delay injected before a message
    /// leaves for it.
    pub(super) wan_us: Vec<u64>,
    /// Where each open session's replies go.
    clients: FxHashMap<ClientId, Replies<M>>,
    /// Each client's request in progress: its kind and arrival, for the
    /// latency metric.
    in_progress: FxHashMap<ClientId, (usize, Instant)>,
    /// Each request kind's counter and latency histogram (`in_progress`
    /// holds the index).
    by_kind: Kept<(Counter, Histogram)>,
    /// The connections a release queued replies for, each once: their
    /// buffers are written when the release's replies are all in.
    reply_pipes: Vec<Arc<ReplyPipe>>,
    metrics: Arc<NodeMetrics>,
}

impl<M: Message> Outlets<M> {
    pub(super) fn new(
        links: Vec<Option<mpsc::UnboundedSender<LinkItem<M>>>>,
        wan_us: Vec<u64>,
        metrics: Arc<NodeMetrics>,
    ) -> Self {
        Outlets {
            links,
            wan_us,
            clients: FxHashMap::default(),
            in_progress: FxHashMap::default(),
            by_kind: Kept::default(),
            reply_pipes: Vec::new(),
            metrics,
        }
    }

    /// A session opened: its replies go to `replies`.
    pub(super) fn opened(&mut self, client: ClientId, replies: Replies<M>) {
        self.clients.insert(client, replies);
    }

    /// A session ended.
    pub(super) fn gone(&mut self, client: ClientId) {
        self.clients.remove(&client);
        self.in_progress.remove(&client);
    }

    /// A request of kind `kind` from `client`, taken from the inbox at
    /// `since`: counted, and timed until its reply is released.
    pub(super) fn request(&mut self, client: ClientId, kind: &'static str, since: Instant) {
        let metrics = &self.metrics;
        let i = self.by_kind.index(kind, || metrics.request_metrics(kind));
        self.by_kind.get(i).0.inc();
        self.in_progress.insert(client, (i, since));
    }

    /// Queue a recovered outbox again: the links resend whatever the peers
    /// have not acknowledged.
    pub(super) fn resend(&self, outbox: Vec<VecDeque<(u64, M)>>) {
        for (to, msgs) in outbox.into_iter().enumerate() {
            let Some(Some(link)) = self.links.get(to) else { continue };
            for (seq, msg) in msgs {
                let due = tokio::time::Instant::now() + Duration::from_micros(self.wan_us[to]);
                if link.send(LinkItem::Seq { seq, msg, due }).is_err() {
                    return;
                }
            }
        }
    }

    /// Send what the node core released, at `released_at` (read once per
    /// release, not per message: a clock read per request and per reply was
    /// 2 % of the node thread under pipelined load). A connection's replies
    /// are written together, once all are in.
    pub(super) fn release(&mut self, released: impl Iterator<Item = Output<M>>, released_at: Instant) {
        for o in released {
            match o {
                Output::Peer { to, seq, msg } => {
                    let due = self.due(to, released_at);
                    // Never blocks: the link spills to disk what it cannot
                    // keep in memory.
                    self.to_link(to, LinkItem::Seq { seq, msg, due });
                }
                Output::Unsequenced { to, after_seq, msg } => {
                    let due = self.due(to, released_at);
                    let item = if msg.ephemeral() {
                        // A newer one supersedes it, and the protocol sends
                        // another on its next tick.
                        LinkItem::Ephemeral { after_seq, msg, due }
                    } else {
                        // Sent at most once (`Message::transient`).
                        LinkItem::Transient { after_seq, msg, due }
                    };
                    self.to_link(to, item);
                }
                Output::Reply { to, msg } => self.reply(to, msg, released_at),
            }
        }
        for pipe in self.reply_pipes.drain(..) {
            pipe.write_now();
        }
    }

    fn due(&self, to: NodeId, released_at: Instant) -> tokio::time::Instant {
        tokio::time::Instant::from_std(released_at) + Duration::from_micros(self.wan_us[to.idx()])
    }

    fn to_link(&self, to: NodeId, item: LinkItem<M>) {
        self.metrics.peer_out.inc();
        if let Some(link) = &self.links[to.idx()] {
            let _ = link.send(item);
        }
    }

    fn reply(&mut self, client: ClientId, msg: M, released_at: Instant) {
        if let Some((kind, since)) = self.in_progress.remove(&client) {
            let latency = released_at.saturating_duration_since(since);
            self.by_kind.get(kind).1.observe(latency.as_micros() as f64 / 1e6);
        }
        match self.clients.get_mut(&client) {
            Some(Replies::Frames(to)) => {
                let frame = match to.slot {
                    0 => Wire::Reply(msg),
                    slot => Wire::ReplyOn { slot, msg },
                };
                // Written at the end of the release, with the other replies
                // for the same connection.
                if to.pipe.push(|b| encode_into(&frame, b)) {
                    self.reply_pipes.push(to.pipe.clone());
                }
            }
            Some(Replies::Local(to)) => to.reply(msg),
            None => {}
        }
    }
}
