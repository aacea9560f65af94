//! The protocol thread: each turn takes every input that is waiting (a
//! batch), steps the node core with each, fires the protocol's timers that
//! come due within the turn, and ends the turn with its commit
//! ([`super::commit`]): the runtime's own records, then the node core's,
//! the sync, the release. The loop itself neither logs nor sends anything
//! of the protocol's.

use super::checkpoint::Checkpoints;
use super::commit::{Committed, Committer};
use super::host::{LoopHost, SHORT_TIMER_US};
use super::release::Outlets;
use super::runtime_log::RuntimeLog;
use crate::config::Fsync;
use crate::identity::NodeDir;
use crate::inbox::Input;
use crate::metrics::NodeMetrics;
use causeway_core::{Message, Node, NodeId, NodeInput, Protocol, Seq, Stepped};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The most inputs one turn takes.
const BATCH: usize = 1024;

pub(super) struct ProtocolLoop<P: Protocol> {
    pub(super) id: NodeId,
    pub(super) node: Node<P>,
    pub(super) host: LoopHost,
    pub(super) committer: Committer,
    pub(super) runtime_log: RuntimeLog,
    pub(super) outlets: Outlets<P::Msg>,
    pub(super) checkpoints: Checkpoints<P>,
    pub(super) inputs: mpsc::UnboundedReceiver<Input<P::Msg>>,
    pub(super) metrics: Arc<NodeMetrics>,
    /// The last turn took every input there was ([`Fsync::Group`] syncs then).
    pub(super) inbox_dry: bool,
    pub(super) stopping: bool,
    /// The log failed: nothing more is committed, so nothing more leaves.
    pub(super) log_failed: bool,
    /// When the batch being handled was taken from the inbox: read once per
    /// turn, not per request (a clock read per request and per reply was
    /// 2 % of the node thread under pipelined load). A request's latency is
    /// from its batch's start to the release of its reply.
    pub(super) turn_started: Instant,
    /// Holds the data directory's lock for as long as the protocol runs.
    pub(super) _node_dir: NodeDir,
}

impl<P: Protocol> ProtocolLoop<P> {
    pub(super) async fn run(&mut self) {
        self.host.read_clock();
        self.node.start(&mut self.host);
        self.commit().await;
        let mut batch = Vec::with_capacity(BATCH);
        // One timer for the loop's next deadline, moved only when the
        // deadline moves. A fresh one per turn registered anew with tokio's
        // timer wheel, which then woke the runtime's driver through its
        // eventfd: one `write` syscall per turn for every protocol with a
        // periodic timer (Cure's front door: 955 of them per 20 000 SETs).
        const NEAR: Duration = Duration::from_micros(50);
        let mut wake = Box::pin(tokio::time::sleep_until(tokio::time::Instant::now()));
        let mut wake_at = None;
        while !self.stopping {
            let mut deadline = self.host.timers.next();
            if self.node.holds_output() {
                let sync_at = self.committer.policy.group_deadline();
                deadline = Some(deadline.map_or(sync_at, |d| d.min(sync_at)));
            }
            if self.checkpoints.copying() {
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
            while batch.len() < BATCH {
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
                if self.host.timers.take_short() {
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
        self.committer.policy.fsync = Fsync::Always;
        self.commit().await;
        if let Err(e) = self.checkpoints.finish(&mut self.node) {
            tracing::error!(node = self.id.0, "{e}");
        }
    }

    /// Look up the keys the batch's messages hint at ([`Message::key_hint`])
    /// before any is handled, so their cache misses overlap
    /// ([`causeway_core::MvStore::warm`]).
    fn warm(&self, batch: &[Input<P::Msg>]) {
        let store = self.node.store();
        for input in batch {
            let msgs = match input {
                Input::Client { msg, .. } | Input::PeerEphemeral { msg, .. } => std::slice::from_ref(msg),
                Input::Peer { msgs, .. } => msgs,
                _ => &[],
            };
            for key in msgs.iter().filter_map(|m| m.key_hint()) {
                store.warm(key);
            }
        }
    }

    fn handle(&mut self, input: Input<P::Msg>) {
        match input {
            Input::ClientHello { client, replies } => self.outlets.opened(client, replies),
            Input::ClientGone { client } => self.outlets.gone(client),
            Input::Client { client, msg } => {
                self.outlets.request(client, msg.kind(), self.turn_started);
                self.step(NodeInput::Client { from: client, msg });
            }
            Input::Peer { from, first_seq, msgs } => {
                for (i, msg) in msgs.into_iter().enumerate() {
                    self.step_peer(from, Seq::Nth(first_seq + i as u64), msg);
                }
            }
            Input::PeerEphemeral { from, after_seq, msg } => self.step_peer(from, Seq::After(after_seq), msg),
            Input::Stop => self.stopping = true,
        }
    }

    /// Feed one input to the node core, the clock read for it.
    fn step(&mut self, input: NodeInput<P::Msg>) -> Stepped {
        self.host.read_clock();
        self.node.step(&mut self.host, input)
    }

    /// A message from peer `from`: handled once and in order by the node
    /// core, or dropped (a duplicate after a reconnect, an unsequenced one
    /// that overtook what it must follow: the peer resends those).
    fn step_peer(&mut self, from: NodeId, seq: Seq, msg: P::Msg) {
        let kind = msg.kind();
        match self.step(NodeInput::Peer { from, seq, msg }) {
            Stepped::Handled => {
                self.metrics.peer_in.inc();
            }
            Stepped::Duplicate | Stepped::Early => {}
            Stepped::Gap { expected } => {
                tracing::error!(node = self.id.0, from = from.0, ?seq, expected, "peer sequence gap; dropping");
            }
            Stepped::Misframed => tracing::warn!(
                node = self.id.0,
                from = from.0,
                kind,
                ?seq,
                "a message arrived sequenced that must not be, or the reverse; dropped"
            ),
        }
    }

    /// Between a turn's inputs, after a handler set a short timer: fire the
    /// timers due now. Cure parks a write that comes in the microsecond of
    /// its partition's last one for 1 µs; a turn of many writes handles
    /// several a microsecond, and each parked one goes in as soon as its
    /// microsecond has come, between the other inputs, instead of all at
    /// the turn's end (where each needs a microsecond of its own).
    fn fire_due(&mut self) {
        self.fire_until(Instant::now());
    }

    /// Fire every timer due at `now_i`. One a handler sets meanwhile is due
    /// after `now_i`, so this ends.
    fn fire_until(&mut self, now_i: Instant) {
        while let Some(token) = self.host.timers.pop_due(now_i) {
            self.step(NodeInput::Timer { token });
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
            self.host.timers.take_short();
            let mut now_i = Instant::now();
            // Past the budget, what this turn's timers set waits for the
            // next turn: a timer that sets itself again at 0 µs must not
            // hold the loop.
            if pass > 0 && now_i >= started + SPIN_PER_TURN {
                return;
            }
            match self.host.timers.next() {
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

    /// End the turn: the runtime's own records, then the node core's, the
    /// sync, and the release ([`Committer::commit`]); then the checkpoint's
    /// share of the turn and the metrics. A failed log stops the node.
    async fn commit(&mut self) {
        if self.log_failed {
            return;
        }
        let now_us = self.host.read_clock();
        let settle = self.inbox_dry || self.stopping;
        let committed = match self.runtime_log.append_turn::<P::Version, P::Msg>(&mut self.committer.wal, now_us) {
            Ok(()) => self.committer.commit(&mut self.node, &mut self.outlets, settle).await,
            Err(e) => Err(e),
        };
        match committed {
            Ok(Committed::Released) => {}
            Ok(Committed::Held) => return,
            Err(e) => {
                // The log is the promise behind every acknowledgement:
                // without it this node must not acknowledge anything more.
                tracing::error!(node = self.id.0, "write-ahead log failed: {e}; stopping the node");
                self.log_failed = true;
                self.stopping = true;
                return;
            }
        }
        let wal = &mut self.committer.wal;
        let sync = self.committer.policy.fsync != Fsync::Never;
        if let Err(e) = self.checkpoints.after_commit(&mut self.node, wal, &self.runtime_log, sync) {
            tracing::error!(node = self.id.0, "{e}; stopping the node");
            self.stopping = true;
        }
        let store = self.node.store();
        self.metrics.versions.set(store.version_count() as i64);
        self.metrics.keys.set(store.key_count() as i64);
        self.metrics.wal_bytes.set(wal.bytes as i64);
        NodeMetrics::catch_up(&self.metrics.wal_syncs, wal.syncs);
    }
}
