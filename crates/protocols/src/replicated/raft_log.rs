//! A Raft group's persisted state kept in the node's store, behind tikv's
//! `raft::Storage`.
//!
//! ## Why tikv's `raft` crate
//!
//! Consensus is not written by hand here. tikv's `raft` (the etcd design
//! ported to Rust) is a pure state machine driven by `tick`, `step`,
//! `propose` and `ready`/`advance` (`RawNode`/`Ready`): no thread, socket,
//! clock or disk inside, which is the shape of Causeway's own node core, so
//! a group runs unchanged inside a protocol's handler in both runtimes and
//! replays exactly in the simulator. openraft, the other maintained Rust
//! Raft, is async and owns its I/O tasks, which neither runtime could drive
//! turn by turn. The crate is built with its rust-protobuf codec (whose
//! build script runs the `protoc` that its `protobuf-build` dependency
//! ships, so no system package is needed) and without its default logger.
//!
//! Its one source of global randomness is the election timeout, drawn from
//! `rand::thread_rng()` in `[min_election_tick, max_election_tick)` at
//! every reset of a member's election clock. A group member here replaces
//! each such draw, right after the call into Raft that made it, with one
//! it derives from its node id, its start time and the draw's number
//! ([`election_ticks_for`]), so a seed replays exactly. (A timeout fixed
//! per member is not Raft's: two members that drew the same one and wait
//! in step split every election between them for ever.)
//!
//! ## The log in the store
//!
//! Raft needs its hard state and its entries durable before any message
//! that depends on them leaves, and the node core already promises that for
//! a turn's store changes (persist, then send). So each entry is a version
//! of one reserved key per group, ordered by its index, and the hard state,
//! the snapshot point and the last index are part of the node's metadata
//! ([`GroupMeta`]); a replay of the node's log then rebuilds exactly what
//! Raft last persisted. [`GroupLog`] is the in-memory image Raft reads
//! through `Storage`; every change to it is written through to the store in
//! the same turn. Entries past the last index left behind by a truncation
//! stay in the store until overwritten: the metadata's last index says
//! where the log ends. Compaction drops entries up to an index from memory
//! and from the store (a replay may bring dropped ones back; the snapshot
//! point in the metadata ignores them).

use causeway_core::{MvStore, Value, Versioned};
use raft::prelude::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, StorageError};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};

/// A store version that can also hold one Raft log entry, encoded.
pub trait LogVersion: Versioned + Clone {
    /// The version holding entry `index`, encoded as `record`.
    fn log_record(index: u64, record: Value) -> Self;
    /// The entry's index and encoding, when this version is a log record.
    fn as_log_record(&self) -> Option<(u64, &Value)>;
}

/// What the node's metadata keeps of a group: enough, with the entries in
/// the store, to give Raft back its state after a restart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupMeta {
    pub term: u64,
    pub vote: u64,
    pub commit: u64,
    pub snap_index: u64,
    pub snap_term: u64,
    pub last_index: u64,
}

/// A group's log and hard state, as Raft reads them.
pub struct GroupLog {
    hard: HardState,
    conf: ConfState,
    snap_index: u64,
    snap_term: u64,
    /// `entries[i].index == snap_index + 1 + i`.
    entries: Vec<Entry>,
    /// A snapshot of the state machine built for a lagging peer.
    prepared: RefCell<Option<Snapshot>>,
    /// Raft asked for a snapshot that is not prepared yet.
    wanted: Cell<bool>,
    /// Changed since the node's metadata was last written.
    dirty: bool,
}

fn encode(e: &Entry) -> Value {
    use protobuf::Message as _;
    Value::from(e.write_to_bytes().expect("a raft entry always encodes"))
}

fn decode(b: &[u8]) -> Entry {
    use protobuf::Message as _;
    // Only this node wrote it, through `encode`: a record that does not
    // decode is a corrupted log, which recovery must not paper over.
    Entry::parse_from_bytes(b).expect("a logged raft entry decodes")
}

impl GroupLog {
    /// A new member of a group whose membership is `conf`, with an empty log.
    pub fn new(conf: ConfState) -> GroupLog {
        GroupLog {
            hard: HardState::default(),
            conf,
            snap_index: 0,
            snap_term: 0,
            entries: Vec::new(),
            prepared: RefCell::new(None),
            wanted: Cell::new(false),
            dirty: false,
        }
    }

    /// The member restarted from `meta` and the versions of its log key
    /// (`records`, oldest first, as the store holds them).
    pub fn restore<V: LogVersion>(conf: ConfState, meta: GroupMeta, records: &[V]) -> GroupLog {
        let mut log = GroupLog::new(conf);
        log.hard.term = meta.term;
        log.hard.vote = meta.vote;
        log.hard.commit = meta.commit;
        log.snap_index = meta.snap_index;
        log.snap_term = meta.snap_term;
        for v in records {
            let Some((index, record)) = v.as_log_record() else { continue };
            if index <= meta.snap_index || index > meta.last_index {
                continue;
            }
            let e = decode(record);
            assert_eq!(e.index, index, "a log record is stored under its own index");
            assert_eq!(index, log.snap_index + 1 + log.entries.len() as u64, "the restored log has a gap at {index}");
            log.entries.push(e);
        }
        assert_eq!(log.last(), meta.last_index, "the store lost log entries up to {}", meta.last_index);
        log
    }

    pub fn meta(&self) -> GroupMeta {
        GroupMeta {
            term: self.hard.term,
            vote: self.hard.vote,
            commit: self.hard.commit,
            snap_index: self.snap_index,
            snap_term: self.snap_term,
            last_index: self.last(),
        }
    }

    /// Whether the metadata changed since [`GroupLog::clean`].
    pub fn dirty(&self) -> bool {
        self.dirty
    }
    pub fn clean(&mut self) {
        self.dirty = false;
    }
    /// Ask for the metadata to be written this turn: the caller keeps
    /// state beside Raft's in it (how far it applied the log) that moved.
    pub fn touch(&mut self) {
        self.dirty = true;
    }

    pub fn first(&self) -> u64 {
        self.snap_index + 1
    }
    pub fn last(&self) -> u64 {
        self.snap_index + self.entries.len() as u64
    }
    pub fn snap_index(&self) -> u64 {
        self.snap_index
    }
    pub fn entry_count(&self) -> u64 {
        self.entries.len() as u64
    }

    /// Term of entry `index`, when this member still holds it.
    pub fn term_of(&self, index: u64) -> Option<u64> {
        if index == self.snap_index {
            return Some(self.snap_term);
        }
        if index < self.first() || index > self.last() {
            return None;
        }
        Some(self.entries[(index - self.first()) as usize].term)
    }

    pub fn set_hard_state(&mut self, hs: &HardState) {
        if self.hard != *hs {
            self.hard = hs.clone();
            self.dirty = true;
        }
    }

    pub fn set_commit(&mut self, commit: u64) {
        if self.hard.commit != commit {
            self.hard.commit = commit;
            self.dirty = true;
        }
    }

    /// Append `entries` (contiguous), replacing any this member holds from
    /// the first one's index on, and write them to the store under `key`.
    pub fn append<V: LogVersion>(&mut self, store: &mut MvStore<V>, key: &[u8], entries: &[Entry]) {
        let Some(first) = entries.first() else { return };
        assert!(first.index > self.snap_index, "raft appended entry {} at or below the snapshot", first.index);
        assert!(
            first.index <= self.last() + 1,
            "raft appended entry {} past the log's end {}",
            first.index,
            self.last()
        );
        self.entries.truncate((first.index - self.first()) as usize);
        for e in entries {
            assert_eq!(e.index, self.last() + 1, "raft appended entries out of order");
            store.restore(key, V::log_record(e.index, encode(e)));
            self.entries.push(e.clone());
        }
        self.dirty = true;
    }

    /// Install a snapshot received from the leader: the log restarts after
    /// it (entries it covers are dropped, so are later ones, which the
    /// leader sends again).
    pub fn apply_snapshot<V: LogVersion>(&mut self, store: &mut MvStore<V>, key: &[u8], meta: &SnapshotMetadata) {
        assert!(meta.index >= self.hard.commit, "a snapshot behind the commit index is never applied");
        self.drop_records(store, key, self.last().max(meta.index));
        self.entries.clear();
        self.snap_index = meta.index;
        self.snap_term = meta.term;
        self.hard.commit = meta.index;
        self.hard.term = self.hard.term.max(meta.term);
        self.prepared.replace(None);
        self.dirty = true;
    }

    /// Drop every entry up to `index` (applied by this member, and by the
    /// forwarder), keeping its term for Raft's matching.
    pub fn compact<V: LogVersion>(&mut self, store: &mut MvStore<V>, key: &[u8], index: u64) {
        if index <= self.snap_index {
            return;
        }
        assert!(index <= self.last(), "compacting to {index} past the log's end {}", self.last());
        let term = self.term_of(index).expect("a held entry has a term");
        self.entries.drain(..(index - self.snap_index) as usize);
        self.snap_index = index;
        self.snap_term = term;
        self.drop_records(store, key, index);
        self.dirty = true;
    }

    /// Remove the log key's versions up to entry `index` from the store.
    fn drop_records<V: LogVersion>(&self, store: &mut MvStore<V>, key: &[u8], index: u64) {
        store.collect_planned(
            key,
            |vs| {
                let keep = vs.iter().position(|v| v.as_log_record().is_some_and(|(i, _)| i > index));
                match keep {
                    Some(0) => None,
                    Some(i) => Some(i),
                    // Every record goes but the last, which a chain must
                    // keep; it is past nothing the metadata still names.
                    None if vs.len() > 1 => Some(vs.len() - 1),
                    None => None,
                }
            },
            |_, _| false,
            |_| {},
        );
    }

    /// Whether Raft asked for a snapshot to send to a lagging peer.
    pub fn snapshot_wanted(&self) -> bool {
        self.wanted.get()
    }

    /// Offer Raft a snapshot of the state machine at `index` (applied
    /// here, and still in the log or at its snapshot point).
    pub fn prepare_snapshot(&mut self, index: u64, data: Value) {
        let term = self.term_of(index).expect("a snapshot is taken at an index this member holds");
        let mut s = Snapshot { data, ..Default::default() };
        let m = s.mut_metadata();
        m.index = index;
        m.term = term;
        m.set_conf_state(self.conf.clone());
        self.prepared.replace(Some(s));
        self.wanted.set(false);
    }
}

impl raft::Storage for GroupLog {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(self.hard.clone(), self.conf.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low < self.first() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > self.last() + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let from = (low - self.first()) as usize;
        let to = (high - self.first()) as usize;
        let mut out = self.entries[from..to].to_vec();
        raft::util::limit_size(&mut out, max_size.into());
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx < self.snap_index {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        self.term_of(idx).ok_or(raft::Error::Store(StorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.first())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        if let Some(s) = self.prepared.borrow().as_ref()
            && s.get_metadata().index >= request_index
            && s.get_metadata().index >= self.snap_index
        {
            return Ok(s.clone());
        }
        self.wanted.set(true);
        Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable))
    }
}

/// An election timeout, in ticks, in `[election_ticks, 2 * election_ticks)`,
/// from a hash of a node and a seed (no global randomness: a seed replays
/// exactly).
pub fn election_ticks_for(election_ticks: u64, node: u32, seed: u64) -> u64 {
    // SplitMix64's finalizer: neighbouring ids and seeds spread over the range.
    let mut z = (u64::from(node) << 32 ^ seed).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    election_ticks + z % election_ticks
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::Storage as _;

    #[derive(Clone, Debug)]
    struct Rec(u64, Value);
    impl Versioned for Rec {
        type Order = u64;
        fn order(&self) -> u64 {
            self.0
        }
        fn value(&self) -> &Value {
            &self.1
        }
    }
    impl LogVersion for Rec {
        fn log_record(index: u64, record: Value) -> Self {
            Rec(index, record)
        }
        fn as_log_record(&self) -> Option<(u64, &Value)> {
            Some((self.0, &self.1))
        }
    }

    fn entry(index: u64, term: u64) -> Entry {
        Entry { index, term, data: Value::from(format!("e{index}")), ..Default::default() }
    }

    const KEY: &[u8] = b"log";

    #[test]
    fn a_restart_gives_back_the_log_and_hard_state_after_truncation_and_compaction() {
        let mut store: MvStore<Rec> = MvStore::new();
        let conf = ConfState::from((vec![1, 2, 3], vec![4]));
        let mut log = GroupLog::new(conf.clone());
        log.append(&mut store, KEY, &(1..=6).map(|i| entry(i, 1)).collect::<Vec<_>>());
        // A new leader overwrites 5 and 6 with its own 5.
        log.append(&mut store, KEY, &[entry(5, 2)]);
        let hs = HardState { term: 2, vote: 3, commit: 4, ..Default::default() };
        log.set_hard_state(&hs);
        log.compact(&mut store, KEY, 2);
        assert_eq!((log.first(), log.last()), (3, 5));

        let back = GroupLog::restore(conf, log.meta(), store.versions(KEY));
        assert_eq!(back.meta(), log.meta());
        assert_eq!(back.initial_state().unwrap().hard_state, hs);
        assert_eq!(back.term(2).unwrap(), 1, "the snapshot point keeps its term");
        assert_eq!(back.term(5).unwrap(), 2, "the overwritten entry is the new leader's");
        assert!(matches!(back.term(1), Err(raft::Error::Store(StorageError::Compacted))));
        assert!(matches!(back.term(6), Err(raft::Error::Store(StorageError::Unavailable))));
        let es = back.entries(3, 6, None, GetEntriesContext::empty(false)).unwrap();
        assert_eq!(es.iter().map(|e| (e.index, e.term)).collect::<Vec<_>>(), [(3, 1), (4, 1), (5, 2)]);
    }

    #[test]
    fn a_snapshot_is_offered_only_once_prepared() {
        let mut store: MvStore<Rec> = MvStore::new();
        let mut log = GroupLog::new(ConfState::from((vec![1], vec![])));
        log.append(&mut store, KEY, &[entry(1, 1), entry(2, 1)]);
        assert!(log.snapshot(2, 7).is_err());
        assert!(log.snapshot_wanted());
        log.prepare_snapshot(2, Value::from("state"));
        assert!(!log.snapshot_wanted());
        let s = log.snapshot(2, 7).unwrap();
        assert_eq!((s.get_metadata().index, s.get_metadata().term), (2, 1));
        assert_eq!(&s.data[..], b"state");
    }

    #[test]
    fn election_timeouts_stay_in_range_and_differ_between_members() {
        let ts: Vec<u64> = (0..3).map(|n| election_ticks_for(10, n, 0)).collect();
        assert!(ts.iter().all(|&t| (10..20).contains(&t)));
        assert!(ts[0] != ts[1] || ts[1] != ts[2], "three members drew one timeout: {ts:?}");
    }
}
