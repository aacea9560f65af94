//! Compaction of a node's log into a snapshot, without stopping the node:
//! the log is set aside and the small state captured in one turn, the
//! store copied a slice per turn ([`MvStore::begin_freeze`]), and the
//! snapshot written by a thread of its own. A large store copied in one go
//! stopped the node for about 1 µs per version (a 200 000-version store,
//! 200 ms).
//!
//! [`MvStore::begin_freeze`]: causeway_core::MvStore::begin_freeze

use super::runtime_log::RuntimeLog;
use crate::metrics::NodeMetrics;
use crate::wal::{LogRecord, PendingCheckpoint, Wal, WalError, frame_versions};
use causeway_core::{FreezeBuffers, Node, Protocol, Server};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Keys a checkpoint copies between two looks at the clock.
const FREEZE_STEP_KEYS: usize = 16;

/// The largest copy buffers a node keeps between checkpoints. Reusing them
/// spares the node's thread the kernel's zeroing of fresh pages for the
/// whole copy at every checkpoint, at the price of holding one snapshot's
/// worth of memory; past this size the memory is given back instead.
const FREEZE_SPARE_MAX_BYTES: usize = 256 << 20;

/// Why a checkpoint failed: the node must stop, as when its log fails.
#[derive(Debug, Error)]
pub(super) enum CheckpointError {
    #[error("snapshot failed: {0}")]
    Snapshot(#[from] WalError),
    #[error("cannot start the snapshot thread: {0}")]
    Thread(std::io::Error),
    #[error("the snapshot thread panicked")]
    Panicked,
}

/// A checkpoint begun: the log is rotated and the node's other durable
/// state captured; the store's copy is made a slice per turn, so no request
/// waits behind all of it.
struct Freezing<P: Protocol> {
    pending: PendingCheckpoint,
    records: Vec<LogRecord<P::Version, P::Msg>>,
    logged_acked: Vec<u64>,
    started: Instant,
    /// Time this thread spent setting the log aside.
    rotate_us: u64,
    /// Time this thread spent copying, and in how many turns.
    copy_us: u64,
    turns: u32,
}

pub(super) struct Checkpoints<P: Protocol> {
    node: u32,
    /// A checkpoint begins once the log has grown past this.
    snapshot_bytes: u64,
    /// How long one turn may spend copying the store for a checkpoint.
    slice: Duration,
    /// A checkpoint whose copy of the store is being made, a slice a turn.
    freezing: Option<Freezing<P>>,
    /// The thread writing a snapshot, while it runs.
    compaction: Option<std::thread::JoinHandle<Result<FreezeBuffers, WalError>>>,
    /// The last snapshot's copy buffers, for the next one's copy (see
    /// [`FreezeBuffers`]; kept only up to [`FREEZE_SPARE_MAX_BYTES`]).
    spare: FreezeBuffers,
    metrics: Arc<NodeMetrics>,
}

impl<P: Protocol> Checkpoints<P> {
    pub(super) fn new(node: u32, snapshot_bytes: u64, slice: Duration, metrics: Arc<NodeMetrics>) -> Self {
        Checkpoints {
            node,
            snapshot_bytes: snapshot_bytes.max(1),
            slice,
            freezing: None,
            compaction: None,
            spare: FreezeBuffers::default(),
            metrics,
        }
    }

    /// Whether a store copy is under way (it goes on between requests, idle
    /// or not).
    pub(super) fn copying(&self) -> bool {
        self.freezing.is_some()
    }

    /// After a turn whose records are durable: collect a finished snapshot,
    /// go on with the copy under way, or begin a checkpoint if the log has
    /// grown past its bound. Every record a checkpoint replaces is then
    /// already durable. `sync`: whether the log set aside must be synced
    /// ([`Wal::begin_checkpoint`]).
    pub(super) fn after_commit(
        &mut self,
        node: &mut Node<P>,
        wal: &mut Wal,
        runtime: &RuntimeLog,
        sync: bool,
    ) -> Result<(), CheckpointError> {
        self.reap(false)?;
        if self.freezing.is_some() {
            self.advance(node, self.slice)
        } else if wal.bytes > self.snapshot_bytes {
            self.begin(node, wal, runtime, sync)
        } else {
            Ok(())
        }
    }

    /// At the node's end: finish the copy under way and wait for the
    /// snapshot being written (a restart must not open the log while it is).
    pub(super) fn finish(&mut self, node: &mut Node<P>) -> Result<(), CheckpointError> {
        while self.freezing.is_some() {
            self.advance(node, Duration::MAX)?;
        }
        self.reap(true)
    }

    /// Compact the log: everything durable about this node, as one snapshot.
    /// The log is rotated and the small state captured now; the store is
    /// copied as it stands now too, but a slice per turn
    /// ([`Checkpoints::advance`]).
    fn begin(
        &mut self,
        node: &mut Node<P>,
        wal: &mut Wal,
        runtime: &RuntimeLog,
        sync: bool,
    ) -> Result<(), CheckpointError> {
        if self.compaction.is_some() || self.freezing.is_some() {
            return Ok(());
        }
        let started = Instant::now();
        let Some(pending) = wal.begin_checkpoint(sync)? else { return Ok(()) };
        let records = runtime.snapshot_records(node.delivered(), node.store().meta());
        // What the protocol's collection would drop stays out of the copy: a
        // stabilization protocol's store holds a superseded version of most
        // keys until its pass gets to them, which more than doubled its
        // snapshots over Eventual's (23 MB against 9 MB on DKVF's
        // configuration) and with them the checkpoint's time on this thread.
        let floor = node.server().snapshot_floor();
        node.store_mut().begin_freeze(frame_versions::<P::Version>, std::mem::take(&mut self.spare), floor);
        let logged_acked = runtime.logged_acked().to_vec();
        let rotate_us = started.elapsed().as_micros() as u64;
        self.freezing = Some(Freezing { pending, records, logged_acked, started, rotate_us, copy_us: 0, turns: 0 });
        self.advance(node, self.slice)
    }

    /// Copy the store for the checkpoint under way for about `slice`; once
    /// the copy is complete, hand it to the snapshot thread, which puts it
    /// in the store's key order ([`causeway_core::Frozen::ordered`]: the
    /// snapshot does not depend on how the copy's slices fell) and writes it.
    fn advance(&mut self, node: &mut Node<P>, slice: Duration) -> Result<(), CheckpointError> {
        let Some(f) = self.freezing.as_mut() else { return Ok(()) };
        let began = Instant::now();
        f.turns += 1;
        self.metrics.snapshot_copy_turns.inc();
        let store = node.store_mut();
        let copy = loop {
            if let Some(copy) = store.freeze_step(FREEZE_STEP_KEYS) {
                break Some(copy);
            }
            if began.elapsed() >= slice {
                break None;
            }
        };
        f.copy_us += began.elapsed().as_micros() as u64;
        let Some(copy) = copy else { return Ok(()) };
        let Freezing { pending, records, logged_acked, started, rotate_us, copy_us, turns } =
            self.freezing.take().expect("a checkpoint under way");
        let node = self.node;
        let metrics = self.metrics.clone();
        let handle = std::thread::Builder::new().name(format!("causeway-snapshot-{node}")).spawn(move || {
            let (keys, bytes) = (copy.chains(), copy.byte_len());
            let written = pending
                .write(copy.ordered(), records.into_iter(), |to| logged_acked.get(to.idx()).copied().unwrap_or(0))?;
            metrics.snapshot_bytes.set(written as i64);
            tracing::info!(
                node,
                keys,
                bytes,
                rotate_ms = rotate_us / 1000,
                copy_ms = copy_us / 1000,
                turns,
                ms = started.elapsed().as_millis() as u64,
                "log compacted into a snapshot in the background"
            );
            Ok(copy.into_buffers())
        });
        self.compaction = Some(handle.map_err(CheckpointError::Thread)?);
        Ok(())
    }

    /// Collect a finished background snapshot (or wait for it with `wait`).
    fn reap(&mut self, wait: bool) -> Result<(), CheckpointError> {
        let done = self.compaction.as_ref().is_some_and(|h| h.is_finished());
        if !(done || wait) {
            return Ok(());
        }
        let Some(h) = self.compaction.take() else { return Ok(()) };
        let buffers = h.join().map_err(|_| CheckpointError::Panicked)??;
        self.metrics.snapshots.inc();
        if buffers.capacity_bytes() <= FREEZE_SPARE_MAX_BYTES {
            self.spare = buffers;
        }
        Ok(())
    }
}
