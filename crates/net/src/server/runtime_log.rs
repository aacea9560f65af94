//! The records only the runtime writes to a node's log, beside the node
//! core's: the clock floor (no clock reading after a restart goes below
//! what was handed out before it), peer incarnations (what the delivery
//! and acknowledgement marks refer to), and the acknowledgements the links
//! received (so a restart resends only what a peer may not have). None of
//! them is output's precondition as the node core's records are; each turn
//! writes them before the node core's, so they too are in the file before
//! the turn's output leaves.

use crate::identity::PeerIncarnations;
use crate::wal::{LogRecord, Wal, WalError};
use causeway_core::NodeId;
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The clock floor is pushed this far ahead of the clock whenever the clock
/// gets within half of it, so a restarted node never reads a clock below
/// anything it handed out before the crash.
const CLOCK_LEASE_US: u64 = 1_000_000;

pub(super) struct RuntimeLog {
    /// Per peer, the next sequence number it has not acknowledged, as its
    /// link last heard.
    acked: Vec<Arc<AtomicU64>>,
    /// The same, as logged.
    logged_acked: Vec<u64>,
    /// Peer incarnations learned by a hello or a welcome, and as logged.
    peers: Arc<PeerIncarnations>,
    logged_peers: Vec<Option<u64>>,
    /// The clock floor as logged.
    persisted_floor_us: u64,
}

impl RuntimeLog {
    pub(super) fn new(
        acked: Vec<Arc<AtomicU64>>,
        logged_acked: Vec<u64>,
        peers: Arc<PeerIncarnations>,
        logged_peers: Vec<Option<u64>>,
        clock_floor_us: u64,
    ) -> Self {
        RuntimeLog { acked, logged_acked, peers, logged_peers, persisted_floor_us: clock_floor_us }
    }

    /// Per peer, the acknowledgement mark as logged.
    pub(super) fn logged_acked(&self) -> &[u64] {
        &self.logged_acked
    }

    /// Append what changed since the last turn; `now_us` is the clock as
    /// the turn last read it.
    pub(super) fn append_turn<V: Serialize, M: Serialize>(
        &mut self,
        wal: &mut Wal,
        now_us: u64,
    ) -> Result<(), WalError> {
        for (i, inc) in self.peers.snapshot().into_iter().enumerate() {
            if let Some(incarnation) = inc
                && self.logged_peers[i] != inc
            {
                self.logged_peers[i] = inc;
                wal.append(&LogRecord::<V, M>::PeerIncarnation { node: NodeId(i as u32), incarnation })?;
            }
        }
        for (i, acked) in self.acked.iter().enumerate() {
            let a = acked.load(Ordering::Relaxed);
            if a > self.logged_acked[i] {
                self.logged_acked[i] = a;
                wal.append(&LogRecord::<V, M>::Acked { to: NodeId(i as u32), next_seq: a })?;
            }
        }
        if now_us + CLOCK_LEASE_US / 2 > self.persisted_floor_us {
            // Written, not synced on its own account: an idle node would
            // otherwise sync twice a second for nothing else. The record is
            // in the file before this turn's output leaves, so it survives
            // the process being killed; it reaches the disk with the next
            // sync anything durable asks for, which covers every timestamp a
            // durable write or a journaled message carries. Only an
            // operating-system crash can lose it, and then only the floor
            // under timestamps that went out in heartbeats and tree
            // messages since the last sync; it matters only if the system
            // clock is also stepped back below them across the reboot.
            self.persisted_floor_us = now_us + CLOCK_LEASE_US;
            wal.append_unsynced(&LogRecord::<V, M>::ClockFloor { us: self.persisted_floor_us })?;
        }
        Ok(())
    }

    /// This state as a snapshot's records, beside the node core's durable
    /// state: its delivery marks `delivered` and metadata `meta`.
    pub(super) fn snapshot_records<V, M>(&self, delivered: &[u64], meta: Option<&[u8]>) -> Vec<LogRecord<V, M>> {
        let mut records = Vec::with_capacity(16);
        // Every peer's acknowledgement mark. With nothing unacknowledged it
        // equals the next sequence number, which must survive (the restarted
        // node must not resend from 1, or its peer would drop everything new
        // as duplicates); otherwise the copied outbox records carry it.
        for (i, &a) in self.logged_acked.iter().enumerate() {
            if a > 1 {
                records.push(LogRecord::Acked { to: NodeId(i as u32), next_seq: a });
            }
        }
        for (i, &seq) in delivered.iter().enumerate() {
            if seq > 0 {
                records.push(LogRecord::Delivered { from: NodeId(i as u32), seq });
            }
        }
        records.push(LogRecord::ClockFloor { us: self.persisted_floor_us });
        if let Some(m) = meta {
            records.push(LogRecord::Meta { bytes: m.to_vec() });
        }
        for (i, inc) in self.logged_peers.iter().enumerate() {
            if let Some(incarnation) = *inc {
                records.push(LogRecord::PeerIncarnation { node: NodeId(i as u32), incarnation });
            }
        }
        records
    }
}
