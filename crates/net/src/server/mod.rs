//! One node of any protocol, as a real server.
//!
//! The protocol runs inside a [`causeway_core::Node`], the node core that
//! every runtime drives: it owns the protocol's server, its store, and the
//! numbering and delivery marks that make peer channels exactly-once, and
//! it hands out each turn's log records before the turn's messages and
//! replies, which it gives out only once told the records are durable.
//! This runtime executes what the node core asks and nothing else: it feeds
//! it inputs, appends its records to the write-ahead log, syncs per the
//! fsync policy, and sends what it then releases.
//!
//! The node core runs on a thread of its own (a protocol is single-threaded
//! by design), as an async loop on a current-thread tokio runtime. Tokio
//! tasks accept connections, read frames, run the peer links and serve
//! metrics; they talk to the protocol loop through channels. Where those
//! tasks run is [`NodeThreads`]: on the protocol thread's runtime too (a
//! server process: one event loop, as redis-server has, and no wake-up of
//! another thread between a request and its reply; the log's `fsync` then
//! runs on tokio's blocking pool so the connections keep reading), or on a
//! runtime shared by the nodes of an embedded cluster.
//!
//! Each turn of the protocol thread takes every input that is waiting (a
//! batch), steps the node core with each, appends the turn's records to the
//! log, syncs it according to the fsync policy, and only then releases the
//! turn's replies and peer messages: nothing is acknowledged before it is
//! durable. That is group commit by construction. A turn's replies to a
//! client connection go out in one write, made by the protocol thread
//! itself when the socket takes it ([`crate::reply_pipe`]).
//!
//! The parts, one concern each:
//! - `spawn`: a node's start — recovery from the log, links, listeners,
//!   the protocol thread — and its end.
//! - `accept`: connections — TLS, the hello, peer and client sessions.
//! - `protocol_loop`: the protocol thread — batches of inputs fed to the
//!   node core, timers, the turn's end.
//! - `commit`: a turn's records to the log, the sync, the release.
//! - `runtime_log`: the records only the runtime writes (clock floor, peer
//!   incarnations, acknowledgements).
//! - `host`: what the node core borrows for a step — clock, timers, and
//!   observations turned into metrics.
//! - `release`: where released output goes — peer links, reply pipes —
//!   and the request latency metric.
//! - `checkpoint`: compaction of the log into a snapshot.

mod accept;
mod checkpoint;
mod commit;
mod host;
mod protocol_loop;
mod release;
mod runtime_log;
mod spawn;

use crate::identity::IdentityError;
use crate::metrics::NodeMetrics;
use crate::wal::WalError;
use causeway_core::NodeId;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as smpsc;
use std::time::Duration;
use thiserror::Error;
use tokio::sync::watch;

pub use spawn::spawn;

#[derive(Debug, Error)]
pub enum NodeError {
    #[error("node {node}: cannot listen on {addr}: {source}")]
    Bind { node: u32, addr: SocketAddr, source: std::io::Error },
    #[error("node {node}: {source}")]
    Wal { node: u32, source: WalError },
    #[error("node {node}: {source}")]
    DataDir { node: u32, source: IdentityError },
    #[error(
        "node {node}: its log names node {peer}, but the cluster has {nodes} nodes: the log was written by a \
         cluster of another shape; give this one its own data_dir, or move the node's directory aside"
    )]
    ForeignLog { node: u32, peer: u32, nodes: usize },
    #[error("node {node}: the protocol loop panicked")]
    Panicked { node: u32 },
    #[error("node {node}: cannot start its thread or runtime: {source}")]
    Thread { node: u32, source: std::io::Error },
    #[error("node {node}: {source}")]
    Tls { node: u32, source: crate::tls::TlsError },
    #[error("node {node}: {source}")]
    Auth { node: u32, source: crate::auth::AuthError },
}

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
    /// Tell the node's network tasks to stop, without waiting for them
    /// ([`stop`](Self::stop) waits).
    pub fn signal_stop(&self) {
        self.metrics.serving.store(false, Ordering::Relaxed);
        let _ = self.stop_tasks.send(true);
    }

    /// Stop serving: close the listener and links, finish the current turn
    /// (so everything acknowledged is in the log) and join the protocol thread.
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
