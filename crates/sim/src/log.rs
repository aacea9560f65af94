//! A node's write-ahead log, simulated: the records of its turns, split into
//! what is durable and what was appended but not yet synced.
//!
//! The durable part is kept as the state a replay of it gives back
//! ([`Durable`]: a store, the outbox, the channel marks) rather than as a
//! list of records, so a restart is a copy, not a replay of the whole run.
//! What was appended and not synced stays a list of records, because a
//! crash keeps none of it, or (a torn tail) only a prefix. Now and then,
//! when nothing is unsynced, the durable store is replaced by a copy of the
//! live one, as the network runtime's checkpoint replaces its log with a
//! snapshot, so versions the protocol collected do not pile up here.
//!
//! A node no fault crashes never reads its own durable state back, so its
//! *volatile* log keeps of each turn only what another node's restart
//! reads: the messages to nodes that may crash (resent to them when they
//! restart) and the turn's end, so that syncs, group commit and torn turns
//! count and time exactly as before. It copies no version and no
//! metadata, and its checkpoints only trim those messages. At PaRiS's
//! scale the durable copy and its checkpoints were about a fifth of the
//! simulator's time.

use causeway_core::{Appended, Durable, MvStore, NodeId, OwnedRecord, Protocol, Ready, Record, SnapshotFloor};

pub(crate) struct SimLog<P: Protocol> {
    durable: Durable<P::Version, P::Msg>,
    /// Appended, not synced, oldest first.
    pending: Vec<OwnedRecord<P::Version, P::Msg>>,
    /// The last turn appended.
    appended: Appended,
    /// Records made durable since the last compaction.
    applied: usize,
    /// Volatile (its node never crashes): per destination, whether its
    /// outbox is kept (that node may crash); `None`: every record is kept.
    volatile: Option<Vec<bool>>,
}

impl<P: Protocol> SimLog<P> {
    pub fn new(nodes: usize) -> Self {
        SimLog {
            durable: Durable::empty(nodes),
            pending: Vec::new(),
            appended: Appended { lsn: 0, must_sync: false },
            applied: 0,
            volatile: None,
        }
    }

    /// A log for a node that never crashes: it keeps the messages to the
    /// nodes `may_crash` names, and the ends of turns.
    pub fn volatile(may_crash: Vec<bool>) -> Self {
        let nodes = may_crash.len();
        SimLog { volatile: Some(may_crash), ..SimLog::new(nodes) }
    }

    pub fn is_volatile(&self) -> bool {
        self.volatile.is_some()
    }

    /// Append a turn's records. `durable_at_once`: they are synced as they
    /// are appended (a turn that syncs at its end with nothing that could
    /// come between), so they skip the pending list.
    pub fn append(&mut self, ready: Ready<'_, P>, durable_at_once: bool) -> Appended {
        let (durable, pending, applied) = (&mut self.durable, &mut self.pending, &mut self.applied);
        let volatile = self.volatile.as_deref();
        let appended = ready
            .append::<std::convert::Infallible>(|r| {
                let kept = match (volatile, &r) {
                    (None, _) | (Some(_), Record::Commit { .. }) => true,
                    (Some(may_crash), Record::Outbox { to, .. }) => may_crash[to.idx()],
                    (Some(_), _) => false,
                };
                if !kept {
                    return Ok(());
                }
                if durable_at_once {
                    durable.apply(&r);
                    *applied += 1;
                } else {
                    pending.push(OwnedRecord::of(&r));
                }
                Ok(())
            })
            .unwrap_or_else(|never| match never {});
        self.appended = appended;
        appended
    }

    /// The last turn appended.
    pub fn appended(&self) -> Appended {
        self.appended
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Sync: everything appended is durable.
    pub fn sync(&mut self) {
        self.tear(self.pending.len());
    }

    /// Sync the oldest `count` pending records (whole turns: those a sync
    /// that took time began with); the rest stay pending.
    pub fn sync_prefix(&mut self, count: usize) {
        let count = count.min(self.pending.len());
        let rest = self.pending.split_off(count);
        let dropped = self.durable.replay(self.pending.iter().map(|r| r.as_record()));
        debug_assert_eq!(dropped, 0, "a sync covered part of a turn");
        self.applied += count - dropped;
        self.pending = rest;
    }

    /// A crash with the first `keep` unsynced records on disk and the rest
    /// lost (`keep` = 0: all lost). A replay keeps whole turns only
    /// ([`Durable::replay`]), so a turn cut short by the tear is lost whole.
    pub fn tear(&mut self, keep: usize) {
        assert!(self.volatile.is_none() || keep == self.pending.len(), "a volatile log torn: its node crashed");
        let kept = keep.min(self.pending.len());
        let dropped = self.durable.replay(self.pending[..kept].iter().map(|r| r.as_record()));
        self.applied += kept - dropped;
        self.pending.clear();
    }

    /// Per destination, the sequenced messages durably in the outbox.
    pub fn outbox_to(&self, to: NodeId) -> impl Iterator<Item = &(u64, P::Msg)> {
        self.durable.outbox[to.idx()].iter()
    }

    /// What a node restarted from this log starts from: a copy of the
    /// durable state, each chain cut at `floor` when the restart is from a
    /// snapshot.
    pub fn recovered(&self, floor: Option<&SnapshotFloor<P::Version>>) -> Durable<P::Version, P::Msg> {
        assert!(self.volatile.is_none(), "a node restarted from a volatile log");
        Durable {
            store: self.durable.store.restarted(floor),
            outbox: self.durable.outbox.clone(),
            sent_seq: self.durable.sent_seq.clone(),
            delivered: self.durable.delivered.clone(),
        }
    }

    /// Whether a checkpoint is due: nothing is unsynced, and more was
    /// logged since the last than twice what the live store holds (a
    /// volatile log, which copies no store: 4 096 records, to trim its
    /// outbox).
    pub fn wants_compaction(&self, live: &MvStore<P::Version>) -> bool {
        let live_versions = if self.is_volatile() { 0 } else { live.version_count() };
        self.pending.is_empty() && self.applied >= 2 * live_versions + 4_096
    }

    /// A checkpoint: the durable store becomes a copy of `live` (the same
    /// versions, less what the protocol collected), and outbox entries
    /// each destination has durably handled (`acked[to]`) are forgotten.
    pub fn compact(&mut self, live: &MvStore<P::Version>, acked: &[u64]) {
        debug_assert!(self.pending.is_empty(), "a checkpoint of a log with unsynced records");
        self.applied = 0;
        if !self.is_volatile() {
            self.durable.store = live.restarted(None);
        }
        for (to, &a) in acked.iter().enumerate() {
            self.durable.acked(NodeId(to as u32), a);
        }
    }

    /// The durable delivery mark for messages from `from`.
    pub fn delivered(&self, from: NodeId) -> u64 {
        self.durable.delivered[from.idx()]
    }
}
