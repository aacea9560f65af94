//! A turn's end: the node core's records into the write-ahead log, the
//! sync the fsync policy calls for, and only then the turn's output out.
//!
//! The order is the node core's ([`causeway_core::Ready`]): its output
//! leaves only after [`Node::advance`], and this is the one place that
//! calls it, after the sync that covers the turn (or, under
//! `fsync = never`, after the records reached the file). Under
//! `fsync = group` a turn whose records wait for the group's sync is simply
//! not advanced: its output stays in the node core across turns until the
//! sync, so group commit needs no buffer of its own.

use super::release::Outlets;
use crate::acks::Delivered;
use crate::config::Fsync;
use crate::wal::{LogRecord, Wal, WalError};
use causeway_core::{Node, Protocol, Record};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// When the log is synced.
pub(super) struct SyncPolicy {
    pub(super) fsync: Fsync,
    /// Sync the log on tokio's blocking pool, not on this thread: when the
    /// connections share this thread ([`super::NodeThreads::Own`]) they go
    /// on reading meanwhile. Otherwise the hand-off to the pool and back
    /// would only add two wake-ups per sync.
    off_thread: bool,
    /// Under [`Fsync::Group`], the longest a turn's output waits for a sync.
    group: Duration,
    last_sync: Instant,
}

impl SyncPolicy {
    pub(super) fn new(fsync: Fsync, off_thread: bool, group: Duration) -> Self {
        SyncPolicy { fsync, off_thread, group, last_sync: Instant::now() }
    }

    /// When output held for a group sync must leave at the latest.
    pub(super) fn group_deadline(&self) -> Instant {
        self.last_sync + self.group
    }

    /// Whether this turn syncs. `settle`: no more input is waiting (or the
    /// node stops), so a group's sync need not wait for more of it.
    fn sync_now(&self, settle: bool) -> bool {
        match self.fsync {
            Fsync::Always => true,
            Fsync::Never => false,
            Fsync::Group => settle || self.last_sync.elapsed() >= self.group,
        }
    }
}

/// What became of a turn's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Committed {
    /// Its records are durable (as the policy means it) and its output,
    /// with that of every turn before it, has left.
    Released,
    /// Its records wait for the group's sync, and its output with them.
    Held,
}

/// The log, and what the node has durably promised through it.
pub(super) struct Committer {
    pub(super) wal: Wal,
    pub(super) policy: SyncPolicy,
    /// Per source node, the last sequenced message handled in a turn whose
    /// records are durable: what acknowledgements tell the peer. Ahead of
    /// the log, a peer would drop messages this node then loses in a crash.
    durable_delivered: Arc<Delivered>,
}

impl Committer {
    pub(super) fn new(wal: Wal, policy: SyncPolicy, durable_delivered: Arc<Delivered>) -> Self {
        Committer { wal, policy, durable_delivered }
    }

    /// End `node`'s turn (after the runtime's own records of it are
    /// appended): append the node core's records, sync per the policy,
    /// declare the turn durable and release its output into `outlets`.
    /// On an error nothing of the turn leaves, nor of any later one (the
    /// node core holds it for good), and the node must stop: the log is the
    /// promise behind every acknowledgement.
    pub(super) async fn commit<P: Protocol>(
        &mut self,
        node: &mut Node<P>,
        outlets: &mut Outlets<P::Msg>,
        settle: bool,
    ) -> Result<Committed, WalError> {
        let wal = &mut self.wal;
        let ready = node.ready();
        if ready.has_records() {
            // The turn's records are one change: a replay applies them only
            // with their commit ([`LogRecord::TurnBegin`]).
            // The brackets ask for no sync of their own: a turn needs one
            // exactly when its other records do (`must_sync` below), and
            // a turn of unsynced metadata alone (a stabilization horizon
            // moving on an idle node) must not make the log sync.
            wal.append_unsynced(&LogRecord::<P::Version, P::Msg>::TurnBegin)?;
        }
        let appended = ready.append(|r| append::<P>(wal, r))?;
        if appended.must_sync {
            // Metadata the protocol wants synced is appended as any
            // metadata; the node core knows which.
            wal.require_sync();
        }
        let sync = self.policy.sync_now(settle);
        if sync && self.policy.off_thread {
            wal.flush_synced().await?;
        } else {
            wal.flush(sync)?;
        }
        if sync {
            self.policy.last_sync = Instant::now();
        }
        if self.policy.fsync == Fsync::Group && !sync && appended.must_sync {
            return Ok(Committed::Held);
        }
        node.advance(appended.lsn);
        outlets.release(node.released(), Instant::now());
        // Every turn handed out is durable now, and so is every delivery
        // mark.
        for (from, &d) in node.delivered().iter().enumerate() {
            self.durable_delivered.publish(from, d);
        }
        Ok(Committed::Released)
    }
}

/// One record of the node core's, as the log writes it: versions and
/// metadata straight from the store, the outbox message borrowed.
fn append<P: Protocol>(wal: &mut Wal, r: Record<'_, P::Version, P::Msg>) -> Result<(), WalError> {
    match r {
        Record::Version { key, version } => wal.append_version(key, version),
        Record::Meta { bytes } => wal.append_meta(bytes),
        // `&P::Msg` encodes as `P::Msg` does, so recovery reads it back as
        // an ordinary outbox record.
        Record::Outbox { to, seq, msg } => wal.append(&LogRecord::<P::Version, &P::Msg>::Outbox { to, seq, msg }),
        Record::Delivered { from, seq } => wal.append(&LogRecord::<P::Version, P::Msg>::Delivered { from, seq }),
        Record::Commit { lsn } => wal.append_unsynced(&LogRecord::<P::Version, P::Msg>::TurnCommit { lsn }),
    }
}

#[cfg(test)]
mod tests {
    //! A real node core (Eventual) and a real log, a client's write, and
    //! the one reply path that needs no socket (an in-process session, as
    //! the Redis front door's): no reply leaves before the write is synced.
    use super::*;
    use crate::inbox::{LocalReplies, Replies};
    use crate::wal::Recovered;
    use causeway_core::{ClientId, NodeCtx, NodeId, NodeInput, NodeOptions, Observation, Topology, TopologySpec};
    use causeway_protocols::eventual::{Eventual, Msg};
    use std::sync::Mutex;

    struct Got(Arc<Mutex<Vec<Msg>>>);
    impl LocalReplies<Msg> for Got {
        fn reply(&mut self, msg: Msg) {
            self.0.lock().unwrap().push(msg);
        }
    }

    struct NoHost;
    impl causeway_core::Host for NoHost {
        fn now_us(&self) -> u64 {
            1_000
        }
        fn set_timer(&mut self, _after_us: u64, _token: u64) {}
        fn observe(&mut self, _obs: Observation<'_>) {}
    }

    struct Rig {
        node: Node<Eventual>,
        committer: Committer,
        outlets: Outlets<Msg>,
        replies: Arc<Mutex<Vec<Msg>>>,
        dir: std::path::PathBuf,
    }

    /// Node 0 of 2 DCs × 1 partition, started and its first turn
    /// committed, with client 1 attached.
    fn rig(name: &str, fsync: Fsync) -> Rig {
        let dir = std::env::temp_dir().join(format!("causeway-commit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (wal, _) = Wal::open::<<Eventual as Protocol>::Version, Msg>(&dir).unwrap();
        let topology = Arc::new(Topology::new(TopologySpec::full(2, 1)).unwrap());
        let ctx = NodeCtx { id: NodeId(0), role: topology.role(NodeId(0)), topology };
        let mut node = Node::<Eventual>::new(&Default::default(), ctx, NodeOptions::default());
        node.start(&mut NoHost);
        let metrics = Arc::new(crate::metrics::NodeMetrics::new(2));
        let mut outlets = Outlets::new(vec![None, None], vec![0, 0], metrics);
        let replies = Arc::new(Mutex::new(Vec::new()));
        outlets.opened(ClientId(1), Replies::Local(Box::new(Got(replies.clone()))));
        let delivered = Arc::new(Delivered::new([0, 0]));
        let committer = Committer::new(wal, SyncPolicy::new(fsync, false, Duration::from_secs(3600)), delivered);
        let mut rig = Rig { node, committer, outlets, replies, dir };
        rig.commit(true).unwrap();
        rig
    }

    impl Rig {
        fn put(&mut self, key: &'static str) {
            let msg = Msg::PutReq { key: key.into(), value: "v".into() };
            self.node.step(&mut NoHost, NodeInput::Client { from: ClientId(1), msg });
        }
        fn commit(&mut self, settle: bool) -> Result<Committed, WalError> {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            rt.block_on(self.committer.commit(&mut self.node, &mut self.outlets, settle))
        }
        fn replies(&self) -> usize {
            self.replies.lock().unwrap().len()
        }
        fn recovered(&mut self) -> Recovered<<Eventual as Protocol>::Version, Msg> {
            self.committer.wal.flush(false).unwrap();
            Wal::open(&self.dir).unwrap().1
        }
    }

    #[test]
    fn a_reply_leaves_after_its_write_is_synced() {
        let mut r = rig("synced", Fsync::Always);
        r.put("k");
        assert_eq!(r.commit(true).unwrap(), Committed::Released);
        assert_eq!(r.replies(), 1);
        assert!(r.committer.wal.syncs > 0);
        let rec = r.recovered();
        assert_eq!(rec.versions.len(), 1);
        assert_eq!(rec.outbox[&NodeId(1)].len(), 1, "the replication to DC 1 is in the outbox");
        let _ = std::fs::remove_dir_all(&r.dir);
    }

    /// An idle stabilization node moves its horizon (metadata that asks
    /// for no sync) every few milliseconds: such a turn is written, bracket
    /// and all, but under `fsync = always` the disk is not synced for it.
    #[test]
    fn a_turn_of_unsynced_metadata_alone_does_not_sync() {
        let mut r = rig("unsynced-meta", Fsync::Always);
        let before = r.committer.wal.syncs;
        r.node.store_mut().set_meta_unsynced(b"horizon".to_vec());
        assert_eq!(r.commit(true).unwrap(), Committed::Released);
        assert_eq!(r.committer.wal.syncs, before, "a turn of unsynced metadata synced the log");
        assert_eq!(r.recovered().meta.as_deref(), Some(&b"horizon"[..]), "the metadata was not written");
        // The next turn that needs a sync makes it durable with its own.
        r.put("k");
        assert_eq!(r.commit(true).unwrap(), Committed::Released);
        assert_eq!(r.committer.wal.syncs, before + 1);
        let _ = std::fs::remove_dir_all(&r.dir);
    }

    #[test]
    fn no_reply_leaves_when_the_sync_fails() {
        let mut r = rig("sync-fails", Fsync::Always);
        r.committer.wal.fail_syncs();
        r.put("k");
        assert!(r.commit(true).is_err());
        assert_eq!(r.replies(), 0, "a reply left before its write was durable");
        // Nor later: a turn whose records were never synced keeps the
        // output of every turn after it.
        r.put("j");
        assert!(r.commit(true).is_err());
        assert_eq!(r.replies(), 0);
        assert!(r.node.holds_output());
        let _ = std::fs::remove_dir_all(&r.dir);
    }

    #[test]
    fn group_commit_holds_replies_until_the_groups_sync() {
        let mut r = rig("group", Fsync::Group);
        r.put("k");
        assert_eq!(r.commit(false).unwrap(), Committed::Held, "more input waits: no sync yet");
        r.put("j");
        assert_eq!(r.commit(false).unwrap(), Committed::Held);
        assert_eq!(r.replies(), 0);
        let syncs = r.committer.wal.syncs;
        assert_eq!(r.commit(true).unwrap(), Committed::Released);
        assert_eq!(r.committer.wal.syncs, syncs + 1, "one sync for the group");
        assert_eq!(r.replies(), 2);
        let _ = std::fs::remove_dir_all(&r.dir);
    }

    #[test]
    fn a_group_whose_sync_fails_releases_nothing() {
        let mut r = rig("group-fails", Fsync::Group);
        r.put("k");
        assert_eq!(r.commit(false).unwrap(), Committed::Held);
        r.committer.wal.fail_syncs();
        assert!(r.commit(true).is_err());
        assert_eq!(r.replies(), 0);
        let _ = std::fs::remove_dir_all(&r.dir);
    }
}
