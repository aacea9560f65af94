//! The write-ahead log: how an acknowledged write survives `kill -9`.
//!
//! Why a log of our own rather than an embedded database: what must be
//! durable is not only the multi-version store but also the replication
//! outbox (messages to peers not yet acknowledged), the per-peer delivery
//! marks that make redelivery exactly-once, and the clock floor that keeps
//! timestamps from going backwards across a restart. All of it is one
//! append-only sequence written once per event-loop turn and forced with one
//! `fsync` before any acknowledgement of that turn leaves; a log gives that
//! group commit directly, where a B-tree store would add a second log and a
//! second sync underneath ours.
//!
//! Record format: `len: u32 BE | crc32(payload): u32 BE | payload`, the
//! payload a postcard-encoded [`LogRecord`]. On open, a record cut short at
//! the very end of the file is a torn write from a crash (never
//! acknowledged, because acknowledgements wait for the sync) and is
//! truncated away; a checksum failure anywhere else is corruption and a
//! typed [`WalError::Corrupt`], never silent loss.
//!
//! Compaction: once the log passes a size, [`Wal::begin_checkpoint`] sets
//! the log aside as `wal.old` and starts a fresh `wal.log`, and a
//! [`PendingCheckpoint`] then writes the node's whole durable state as of
//! that moment (every version the store held, the unacknowledged outbox
//! copied from disk, the delivery marks, the clock floor) as records to
//! `snapshot.tmp` — on another thread, so request handling never waits for
//! it — syncs it, renames it over `snapshot`, and deletes `wal.old`. (The
//! node copies its store for it a slice per turn, as the store stood at
//! `begin_checkpoint`: `MvStore::begin_freeze`.)
//! Recovery replays `snapshot`, then `wal.log`; a `wal.old` left by a crash
//! mid-checkpoint is first put back in front of `wal.log`. Every record is
//! idempotent (versions deduplicate by order, outbox entries by sequence
//! number, marks and floors take the maximum), so a crash between the rename
//! and the deletion only replays some records twice.

use causeway_core::{Key, NodeId};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub enum LogRecord<V, M> {
    /// A version entered the store.
    Version { key: Key, version: V },
    /// A message to a peer, numbered on its channel.
    Outbox { to: NodeId, seq: u64, msg: M },
    /// The peer has durably delivered everything below `next_seq`.
    Acked { to: NodeId, next_seq: u64 },
    /// Message `seq` from `from` has been handled (its effects precede this
    /// record in the log).
    Delivered { from: NodeId, seq: u64 },
    /// No clock reading handed out before the crash exceeds `us`.
    ClockFloor { us: u64 },
    /// The protocol's durable metadata ([`causeway_core::MvStore::set_meta`]);
    /// the last record wins.
    Meta { bytes: Vec<u8> },
    /// Node `node` (a peer) is incarnation `incarnation`: what this node's
    /// delivery and acknowledgement marks for it refer to.
    PeerIncarnation { node: NodeId, incarnation: u64 },
    /// The records of one node-core turn follow, up to its `TurnCommit`:
    /// a replay applies them only once it reads the commit, so a crash
    /// that tears a turn's records (the process killed while a large turn
    /// was being written) loses the turn whole — never a version without
    /// its replication message, or a delivery mark without the effects
    /// that precede it. (Logs written before turns were bracketed have no
    /// brackets and replay record by record, as they were written.)
    TurnBegin,
    /// The end of turn `lsn`'s records ([`causeway_core::Record::Commit`]).
    TurnCommit { lsn: u64 },
}

#[derive(Debug, Error)]
pub enum WalError {
    #[error("write-ahead log {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("write-ahead log {path} is corrupt at byte {offset}: {reason}; refusing to start rather than lose data")]
    Corrupt { path: String, offset: u64, reason: String },
}

/// What a log held when it was opened.
#[derive(Debug)]
pub struct Recovered<V, M> {
    pub versions: Vec<(Key, V)>,
    /// Per destination, messages not known to be acknowledged, in order.
    pub outbox: BTreeMap<NodeId, Vec<(u64, M)>>,
    /// Per destination, the next sequence number to use.
    pub next_seq: BTreeMap<NodeId, u64>,
    /// Per source, the last sequence number handled.
    pub delivered: BTreeMap<NodeId, u64>,
    pub clock_floor_us: u64,
    /// The protocol's metadata as last logged.
    pub meta: Option<Vec<u8>>,
    /// Each peer's incarnation, as last logged.
    pub peer_incarnations: BTreeMap<NodeId, u64>,
    pub records: u64,
    pub torn_tail_bytes: u64,
}

pub struct Wal {
    path: PathBuf,
    dir: PathBuf,
    out: BufWriter<File>,
    pub bytes: u64,
    /// Records appended since the last sync: an idle node (nothing logged)
    /// must not pay an fsync per event-loop turn.
    unsynced: bool,
    /// Syncs performed, for the metrics.
    pub syncs: u64,
    /// Where a record is encoded before it is framed: reused, so an append
    /// allocates nothing once it has grown to the largest record.
    scratch: Vec<u8>,
    /// Make every sync fail, as a failing disk would: the tests of the
    /// commit show that no output leaves a turn whose sync failed.
    #[cfg(test)]
    fail_syncs: bool,
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> WalError + '_ {
    move |source| WalError::Io { path: path.display().to_string(), source }
}

impl Wal {
    /// Open (creating if needed) the log in `dir` and recover its contents.
    pub fn open<V: DeserializeOwned, M: DeserializeOwned>(dir: &Path) -> Result<(Wal, Recovered<V, M>), WalError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        merge_old_log(dir)?;
        let mut rec = Recovered {
            versions: Vec::new(),
            outbox: BTreeMap::new(),
            next_seq: BTreeMap::new(),
            delivered: BTreeMap::new(),
            clock_floor_us: 0,
            meta: None,
            peer_incarnations: BTreeMap::new(),
            records: 0,
            torn_tail_bytes: 0,
        };
        let mut acked: BTreeMap<NodeId, u64> = BTreeMap::new();
        let mut outbox: BTreeMap<NodeId, BTreeMap<u64, M>> = BTreeMap::new();
        let snapshot = dir.join("snapshot");
        if snapshot.exists() {
            let data = std::fs::read(&snapshot).map_err(io_err(&snapshot))?;
            // A snapshot is complete or absent (it is renamed into place only
            // after its sync), so any damage in it is corruption.
            let end = replay(&data, &snapshot, &mut rec, &mut acked, &mut outbox, false)?;
            debug_assert_eq!(end, data.len());
        }
        let path = dir.join("wal.log");
        let mut file = OpenOptions::new().create(true).read(true).append(true).open(&path).map_err(io_err(&path))?;
        let mut data = Vec::new();
        file.read_to_end(&mut data).map_err(io_err(&path))?;
        let off = replay(&data, &path, &mut rec, &mut acked, &mut outbox, true)?;
        for (to, msgs) in outbox {
            let from = acked.get(&to).copied().unwrap_or(0);
            let v: Vec<(u64, M)> = msgs.into_iter().filter(|(s, _)| *s >= from).collect();
            if !v.is_empty() {
                rec.outbox.insert(to, v);
            }
        }
        if off < data.len() {
            rec.torn_tail_bytes = (data.len() - off) as u64;
            file.set_len(off as u64).map_err(io_err(&path))?;
            file.sync_all().map_err(io_err(&path))?;
        }
        file.seek(SeekFrom::End(0)).map_err(io_err(&path))?;
        let wal = Wal {
            out: BufWriter::with_capacity(1 << 20, file),
            bytes: off as u64,
            path,
            dir: dir.to_path_buf(),
            unsynced: false,
            syncs: 0,
            scratch: Vec::new(),
            #[cfg(test)]
            fail_syncs: false,
        };
        Ok((wal, rec))
    }
}

/// Replay the records of `data` into `rec`; returns where valid records end.
/// With `tail_may_tear`, a damaged last record is a torn write, not corruption.
fn replay<V: DeserializeOwned, M: DeserializeOwned>(
    data: &[u8],
    path: &Path,
    rec: &mut Recovered<V, M>,
    acked: &mut BTreeMap<NodeId, u64>,
    outbox: &mut BTreeMap<NodeId, BTreeMap<u64, M>>,
    tail_may_tear: bool,
) -> Result<usize, WalError> {
    {
        let mut off = 0usize;
        // The turn being read: where it began, and its records so far.
        let mut turn: Option<(usize, Vec<LogRecord<V, M>>)> = None;
        let corrupt = |offset: usize, reason: String| WalError::Corrupt {
            path: path.display().to_string(),
            offset: offset as u64,
            reason,
        };
        while off < data.len() {
            if data.len() - off < 8 {
                if !tail_may_tear {
                    return Err(corrupt(off, "truncated record header".into()));
                }
                break; // torn header
            }
            let len = u32::from_be_bytes(data[off..off + 4].try_into().expect("4 bytes")) as usize;
            let crc = u32::from_be_bytes(data[off + 4..off + 8].try_into().expect("4 bytes"));
            let end = off + 8 + len;
            if end > data.len() {
                if !tail_may_tear {
                    return Err(corrupt(off, "truncated record".into()));
                }
                break; // torn body
            }
            let payload = &data[off + 8..end];
            if crc32fast::hash(payload) != crc {
                if end == data.len() && tail_may_tear {
                    break; // the last record was torn mid-write
                }
                return Err(corrupt(off, "checksum mismatch".into()));
            }
            let r: LogRecord<V, M> =
                postcard::from_bytes(payload).map_err(|e| corrupt(off, format!("undecodable record: {e}")))?;
            match r {
                LogRecord::TurnBegin => {
                    // An earlier turn never committed only if its append
                    // failed, and then the node stopped: drop it.
                    turn = Some((off, Vec::new()));
                }
                LogRecord::TurnCommit { .. } => {
                    let Some((_, records)) = turn.take() else {
                        return Err(corrupt(off, "a turn's commit without its beginning".into()));
                    };
                    for r in records {
                        apply(r, rec, acked, outbox);
                    }
                }
                r @ (LogRecord::Version { .. }
                | LogRecord::Meta { .. }
                | LogRecord::Outbox { .. }
                | LogRecord::Delivered { .. }) => match &mut turn {
                    Some((_, records)) => records.push(r),
                    None => apply(r, rec, acked, outbox),
                },
                r => apply(r, rec, acked, outbox),
            }
            rec.records += 1;
            off = end;
        }
        match turn {
            // A turn whose commit never reached the log: torn, the log ends
            // where it began.
            Some((begun, _)) if tail_may_tear => Ok(begun),
            Some((begun, _)) => Err(corrupt(begun, "a turn without its commit".into())),
            None => Ok(off),
        }
    }
}

/// Apply one recovered record.
fn apply<V, M>(
    r: LogRecord<V, M>,
    rec: &mut Recovered<V, M>,
    acked: &mut BTreeMap<NodeId, u64>,
    outbox: &mut BTreeMap<NodeId, BTreeMap<u64, M>>,
) {
    match r {
        LogRecord::Version { key, version } => rec.versions.push((key, version)),
        LogRecord::Meta { bytes } => rec.meta = Some(bytes),
        LogRecord::Outbox { to, seq, msg } => {
            if seq >= acked.get(&to).copied().unwrap_or(0) {
                outbox.entry(to).or_default().insert(seq, msg);
            }
            let n = rec.next_seq.entry(to).or_insert(1);
            *n = (*n).max(seq + 1);
        }
        LogRecord::Acked { to, next_seq } => {
            let a = acked.entry(to).or_insert(0);
            *a = (*a).max(next_seq);
            // Sequence numbers continue above anything acknowledged,
            // even when the messages themselves were compacted away.
            let n = rec.next_seq.entry(to).or_insert(1);
            *n = (*n).max(next_seq);
            // Drop acknowledged messages as we go, to bound memory.
            if let Some(v) = outbox.get_mut(&to) {
                *v = v.split_off(&next_seq);
            }
        }
        LogRecord::Delivered { from, seq } => {
            let d = rec.delivered.entry(from).or_insert(0);
            *d = (*d).max(seq);
        }
        LogRecord::ClockFloor { us } => rec.clock_floor_us = rec.clock_floor_us.max(us),
        LogRecord::PeerIncarnation { node, incarnation } => {
            rec.peer_incarnations.insert(node, incarnation);
        }
        LogRecord::TurnBegin | LogRecord::TurnCommit { .. } => {}
    }
}

impl Wal {
    pub fn append<V: Serialize, M: Serialize>(&mut self, r: &LogRecord<V, M>) -> Result<(), WalError> {
        self.append_unsynced(r)?;
        self.unsynced = true;
        Ok(())
    }

    /// Append a record that does not by itself call for a sync: it reaches
    /// the file at the next [`Wal::flush`] (so it survives the process being
    /// killed) and the disk with the next sync that anything else asks for.
    pub fn append_unsynced<V: Serialize, M: Serialize>(&mut self, r: &LogRecord<V, M>) -> Result<(), WalError> {
        self.bytes += write_record(&mut self.out, &mut self.scratch, r).map_err(io_err(&self.path))?;
        Ok(())
    }

    /// [`Wal::append`] of `LogRecord::Version { key, version }` from
    /// borrowed parts, as the runtime logs a version straight from the
    /// store: the same bytes on disk, without making the key a `Bytes`.
    pub fn append_version<V: Serialize>(&mut self, key: &[u8], version: &V) -> Result<(), WalError> {
        let r: Borrowed<'_, V> = Borrowed::Version { key: KeyBytes(key), version };
        self.bytes += write_record(&mut self.out, &mut self.scratch, &r).map_err(io_err(&self.path))?;
        self.unsynced = true;
        Ok(())
    }

    /// [`Wal::append_unsynced`] of `LogRecord::Meta { bytes }` from
    /// borrowed bytes. Whether the metadata needs a sync is the node
    /// core's to say ([`causeway_core::Appended::must_sync`], passed on by
    /// [`Wal::require_sync`]), not the record's.
    pub fn append_meta(&mut self, bytes: &[u8]) -> Result<(), WalError> {
        let r: Borrowed<'_, ()> = Borrowed::Meta { bytes: KeyBytes(bytes) };
        self.bytes += write_record(&mut self.out, &mut self.scratch, &r).map_err(io_err(&self.path))?;
        Ok(())
    }

    /// The next [`Wal::flush`] with a sync must sync, even if every record
    /// since the last one was appended unsynced: records whose durability
    /// the caller knows to be needed (or a turn before them still unsynced).
    pub fn require_sync(&mut self) {
        self.unsynced = true;
    }

    /// Replace the log by a snapshot made of `records` (see the module doc),
    /// preceded by every outbox record of the current snapshot and log whose
    /// sequence number is at least `acked(to)`. The outbox is copied from
    /// disk, record by record, because it may be far larger than memory
    /// should hold: a peer away for an hour leaves an hour of messages.
    pub fn checkpoint<V: Serialize, M: Serialize>(
        &mut self,
        records: impl Iterator<Item = LogRecord<V, M>>,
        acked: impl Fn(NodeId) -> u64,
    ) -> Result<(), WalError> {
        match self.begin_checkpoint(true)? {
            Some(pending) => pending.write(std::iter::empty(), records, acked).map(drop),
            None => Ok(()),
        }
    }

    /// Start a checkpoint of the state as of now: the log so far is set
    /// aside as `wal.old` and new records go to a fresh `wal.log`, so the
    /// snapshot can be written by another thread while this one keeps
    /// logging. `None` while a previous checkpoint is still being written.
    ///
    /// With `sync`, the log set aside is forced to disk first, and the new
    /// file's name too: a record in it may be one whose acknowledgement
    /// waits for the next sync (group commit), which will sync only the new
    /// file. A node that never syncs (`fsync = never`) passes false: its
    /// log survives a process crash from the page cache alone, and forcing
    /// up to `snapshot_bytes` of it out stopped the node for 50–70 ms.
    pub fn begin_checkpoint(&mut self, sync: bool) -> Result<Option<PendingCheckpoint>, WalError> {
        let old = self.dir.join(OLD_LOG);
        if old.exists() {
            return Ok(None);
        }
        self.flush(sync)?;
        std::fs::rename(&self.path, &old).map_err(io_err(&old))?;
        let file =
            OpenOptions::new().create(true).read(true).append(true).open(&self.path).map_err(io_err(&self.path))?;
        if sync {
            sync_dir(&self.dir)?;
        }
        self.out = BufWriter::with_capacity(1 << 20, file);
        self.bytes = 0;
        self.unsynced = false;
        Ok(Some(PendingCheckpoint { dir: self.dir.clone(), old }))
    }

    /// Hand buffered records to the OS, and force them to disk if `sync`.
    pub fn flush(&mut self, sync: bool) -> Result<(), WalError> {
        self.out.flush().map_err(io_err(&self.path))?;
        if sync && self.unsynced {
            self.injected_sync_failure()?;
            self.out.get_ref().sync_data().map_err(io_err(&self.path))?;
            self.synced();
        }
        Ok(())
    }

    /// [`Wal::flush`] with a sync, the `fsync` itself on tokio's blocking
    /// pool: the node's runtime thread, which also runs its connections and
    /// links, keeps reading requests while the disk syncs (they queue for
    /// the next turn, which is how group commit fills its groups). The
    /// caller appends nothing until this returns.
    pub async fn flush_synced(&mut self) -> Result<(), WalError> {
        self.out.flush().map_err(io_err(&self.path))?;
        if !self.unsynced {
            return Ok(());
        }
        self.injected_sync_failure()?;
        let file = self.out.get_ref().try_clone().map_err(io_err(&self.path))?;
        tokio::task::spawn_blocking(move || file.sync_data())
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
            .map_err(io_err(&self.path))?;
        self.synced();
        Ok(())
    }

    fn synced(&mut self) {
        self.unsynced = false;
        self.syncs += 1;
    }

    /// Every later sync fails (see `fail_syncs`).
    #[cfg(test)]
    pub(crate) fn fail_syncs(&mut self) {
        self.fail_syncs = true;
    }

    fn injected_sync_failure(&self) -> Result<(), WalError> {
        #[cfg(test)]
        if self.fail_syncs {
            let source = std::io::Error::other("sync failed (injected by a test)");
            return Err(io_err(&self.path)(source));
        }
        Ok(())
    }
}

const OLD_LOG: &str = "wal.old";

fn sync_dir(dir: &Path) -> Result<(), WalError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_err(dir))
}

impl Wal {
    /// Bytes in the snapshot the log was last compacted into (0 if none).
    pub fn snapshot_bytes(&self) -> u64 {
        std::fs::metadata(self.dir.join("snapshot")).map_or(0, |m| m.len())
    }
}

/// A snapshot to write, of the state when [`Wal::begin_checkpoint`] set the
/// log aside. Until it is written, recovery reads the previous snapshot,
/// `wal.old` and `wal.log`, which together hold everything.
#[must_use]
pub struct PendingCheckpoint {
    dir: PathBuf,
    old: PathBuf,
}

impl PendingCheckpoint {
    /// Write the snapshot: the still-unacknowledged outbox records of the
    /// previous snapshot and of the set-aside log, then `framed` (records
    /// already framed, as [`frame_versions`] writes them), then `records`;
    /// sync it, rename it into place, and drop the set-aside log. Returns
    /// the snapshot's size in bytes.
    pub fn write<'a, V: Serialize, M: Serialize>(
        self,
        framed: impl Iterator<Item = &'a [u8]>,
        records: impl Iterator<Item = LogRecord<V, M>>,
        acked: impl Fn(NodeId) -> u64,
    ) -> Result<u64, WalError> {
        let tmp = self.dir.join("snapshot.tmp");
        let fin = self.dir.join("snapshot");
        let bytes = {
            let f = File::create(&tmp).map_err(io_err(&tmp))?;
            let mut w = BufWriter::with_capacity(1 << 20, f);
            for src in [&fin, &self.old] {
                copy_outbox(src, &mut w, &tmp, &acked)?;
            }
            for chunk in framed {
                w.write_all(chunk).map_err(io_err(&tmp))?;
            }
            let mut scratch = Vec::new();
            for r in records {
                write_record(&mut w, &mut scratch, &r).map_err(io_err(&tmp))?;
            }
            w.flush().map_err(io_err(&tmp))?;
            w.get_ref().sync_all().map_err(io_err(&tmp))?;
            w.get_ref().metadata().map_err(io_err(&tmp))?.len()
        };
        std::fs::rename(&tmp, &fin).map_err(io_err(&fin))?;
        sync_dir(&self.dir)?;
        std::fs::remove_file(&self.old).map_err(io_err(&self.old))?;
        sync_dir(&self.dir)?;
        Ok(bytes)
    }
}

/// A checkpoint interrupted by a crash left `wal.old`: put its records back
/// in front of `wal.log` (in order), so recovery and the next checkpoint see
/// one log again.
fn merge_old_log(dir: &Path) -> Result<(), WalError> {
    let old = dir.join(OLD_LOG);
    if !old.exists() {
        return Ok(());
    }
    let log = dir.join("wal.log");
    let tmp = dir.join("wal.merge");
    let mut data = std::fs::read(&old).map_err(io_err(&old))?;
    match std::fs::read(&log) {
        Ok(d) => data.extend_from_slice(&d),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(&log)(e)),
    }
    {
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(&data).map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
    }
    std::fs::rename(&tmp, &log).map_err(io_err(&log))?;
    sync_dir(dir)?;
    std::fs::remove_file(&old).map_err(io_err(&old))?;
    sync_dir(dir)
}

/// Copy the still-unacknowledged outbox records of the log file `src` to `w`
/// as they are. Only the variant index and the `(to, seq)` fields are
/// decoded (postcard writes an enum as its variant index, a varint, then
/// the fields in order), so messages are neither decoded nor re-encoded.
fn copy_outbox(src: &Path, w: &mut impl Write, tmp: &Path, acked: &impl Fn(NodeId) -> u64) -> Result<(), WalError> {
    const OUTBOX_VARIANT: u32 = 1;
    let f = match File::open(src) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(src)(e)),
    };
    let mut r = std::io::BufReader::with_capacity(1 << 20, f);
    let mut head = [0u8; 8];
    let mut payload = Vec::new();
    loop {
        match r.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(io_err(src)(e)),
        }
        let len = u32::from_be_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        payload.resize(len, 0);
        match r.read_exact(&mut payload) {
            Ok(()) => {}
            // Cannot happen right after a flush; a torn tail holds nothing.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(io_err(src)(e)),
        }
        let Ok((variant, rest)) = postcard::take_from_bytes::<u32>(&payload) else { continue };
        if variant != OUTBOX_VARIANT {
            continue;
        }
        let Ok(((to, seq), _)) = postcard::take_from_bytes::<(NodeId, u64)>(rest) else { continue };
        if seq >= acked(to) {
            w.write_all(&head).map_err(io_err(tmp))?;
            w.write_all(&payload).map_err(io_err(tmp))?;
        }
    }
}

/// [`LogRecord::Version`]'s and [`LogRecord::Meta`]'s encodings from
/// borrowed parts: the same variant indices as in `LogRecord` (postcard
/// writes a variant as its index), and the bytes as bytes, which is how
/// postcard encodes both `Bytes` and `Vec<u8>`
/// (`borrowed_appends_write_what_append_writes` holds them together). The
/// unit variants only keep the indices in step and are never written.
#[derive(Serialize)]
#[allow(dead_code)]
enum Borrowed<'a, V> {
    Version { key: KeyBytes<'a>, version: &'a V },
    Outbox,
    Acked,
    Delivered,
    ClockFloor,
    Meta { bytes: KeyBytes<'a> },
}

struct KeyBytes<'a>(&'a [u8]);

impl Serialize for KeyBytes<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// `LogRecord::Version { key, version }` of each of `versions`, framed as
/// the log frames a record, appended to `out`: a store's chain as a
/// snapshot holds it ([`causeway_core::FreezeEncoder`]), encoded where it is
/// copied so that the snapshot thread only writes bytes.
pub fn frame_versions<V: Serialize>(key: &[u8], versions: &[V], out: &mut Vec<u8>) {
    for version in versions {
        frame_into(out, &Borrowed::Version { key: KeyBytes(key), version });
    }
}

/// Append `r` framed (length, CRC, payload) to `out`; returns the frame's
/// length.
fn frame_into(out: &mut Vec<u8>, r: &impl Serialize) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0; 8]);
    crate::frame::append_postcard(r, out);
    let len = u32::try_from(out.len() - at - 8).expect("a record stays under 4 GiB");
    let crc = crc32fast::hash(&out[at + 8..]);
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    out[at + 4..at + 8].copy_from_slice(&crc.to_be_bytes());
    out.len() - at
}

/// Frame `r` onto `w`, encoding it in `scratch`; returns the bytes written.
fn write_record(w: &mut impl Write, scratch: &mut Vec<u8>, r: &impl Serialize) -> std::io::Result<u64> {
    scratch.clear();
    let n = frame_into(scratch, r);
    w.write_all(scratch)?;
    Ok(n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    type R = LogRecord<u64, String>;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("causeway-wal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn borrowed_appends_write_what_append_writes() {
        let (a, b) = (dir("version-owned"), dir("version-borrowed"));
        let (mut wa, _) = Wal::open::<u64, String>(&a).unwrap();
        let (mut wb, _) = Wal::open::<u64, String>(&b).unwrap();
        let written = [(&b"k"[..], 7u64), (&[0xff; 300][..], u64::MAX), (&b""[..], 0)];
        for (key, version) in written {
            wa.append(&R::Version { key: Bytes::copy_from_slice(key), version }).unwrap();
            wb.append_version(key, &version).unwrap();
            wa.append_unsynced(&R::Meta { bytes: key.to_vec() }).unwrap();
            wb.append_meta(key).unwrap();
        }
        wa.flush(false).unwrap();
        wb.flush(false).unwrap();
        drop((wa, wb));
        let bytes = |d: &Path| {
            let mut files: Vec<_> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().path()).collect();
            files.sort();
            files.iter().map(|f| std::fs::read(f).unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(bytes(&a), bytes(&b));
        let (_, r) = Wal::open::<u64, String>(&b).unwrap();
        let read: Vec<(Vec<u8>, u64)> = r.versions.into_iter().map(|(k, v)| (k.to_vec(), v)).collect();
        assert_eq!(read, written.map(|(k, v)| (k.to_vec(), v)));
        assert_eq!(r.meta, Some(Vec::new()), "the last metadata written");
        let _ = std::fs::remove_dir_all(&a);
        let _ = std::fs::remove_dir_all(&b);
    }

    /// A chain framed by [`frame_versions`] is the bytes the log writes for
    /// its versions one by one, and a snapshot made of framed chains reads
    /// back as those versions, in the chains' order, ahead of its records.
    #[test]
    fn framed_versions_are_what_the_log_writes() {
        let (a, b) = (dir("framed-log"), dir("framed-snapshot"));
        let (mut wa, _) = Wal::open::<u64, String>(&a).unwrap();
        let chains: [(&[u8], &[u64]); 3] = [(b"k", &[1, 5, 9]), (&[0xff; 300], &[u64::MAX]), (b"", &[0, 2])];
        let mut framed = Vec::new();
        let mut starts = Vec::new();
        for (key, versions) in chains {
            starts.push(framed.len());
            frame_versions(key, versions, &mut framed);
            for &version in versions {
                wa.append(&R::Version { key: Bytes::copy_from_slice(key), version }).unwrap();
            }
        }
        wa.flush(false).unwrap();
        drop(wa);
        assert_eq!(std::fs::read(a.join("wal.log")).unwrap(), framed);
        let (mut wb, _) = Wal::open::<u64, String>(&b).unwrap();
        starts.push(framed.len());
        let pending = wb.begin_checkpoint(true).unwrap().expect("no checkpoint in progress");
        let chunks = starts.windows(2).map(|w| &framed[w[0]..w[1]]);
        pending.write(chunks, vec![R::ClockFloor { us: 77 }].into_iter(), |_| 0).unwrap();
        drop(wb);
        let (_, r) = Wal::open::<u64, String>(&b).unwrap();
        let read: Vec<(Vec<u8>, u64)> = r.versions.into_iter().map(|(k, v)| (k.to_vec(), v)).collect();
        let want: Vec<(Vec<u8>, u64)> = chains.iter().flat_map(|(k, vs)| vs.iter().map(|&v| (k.to_vec(), v))).collect();
        assert_eq!(read, want);
        assert_eq!(r.clock_floor_us, 77);
        let _ = std::fs::remove_dir_all(&a);
        let _ = std::fs::remove_dir_all(&b);
    }

    #[test]
    fn recovers_everything_written() {
        let d = dir("all");
        let (mut w, r) = Wal::open::<u64, String>(&d).unwrap();
        assert_eq!(r.records, 0);
        w.append(&R::Version { key: Bytes::from_static(b"k"), version: 7 }).unwrap();
        w.append(&R::Outbox { to: NodeId(2), seq: 1, msg: "a".into() }).unwrap();
        w.append(&R::Outbox { to: NodeId(2), seq: 2, msg: "b".into() }).unwrap();
        w.append(&R::Acked { to: NodeId(2), next_seq: 2 }).unwrap();
        w.append(&R::Delivered { from: NodeId(3), seq: 9 }).unwrap();
        w.append(&R::ClockFloor { us: 1234 }).unwrap();
        w.append(&R::Meta { bytes: vec![1] }).unwrap();
        w.append(&R::Meta { bytes: vec![2, 3] }).unwrap();
        w.flush(true).unwrap();
        drop(w);
        let (_, r) = Wal::open::<u64, String>(&d).unwrap();
        assert_eq!(r.versions, vec![(Bytes::from_static(b"k"), 7)]);
        assert_eq!(r.meta, Some(vec![2, 3]), "the last metadata record wins");
        assert_eq!(r.outbox[&NodeId(2)], vec![(2, "b".to_string())]);
        assert_eq!(r.next_seq[&NodeId(2)], 3);
        assert_eq!(r.delivered[&NodeId(3)], 9);
        assert_eq!(r.clock_floor_us, 1234);
    }

    #[test]
    fn checkpoint_replaces_the_log_and_recovery_reads_both() {
        let d = dir("ckpt");
        let (mut w, _) = Wal::open::<u64, String>(&d).unwrap();
        for i in 0..100 {
            w.append(&R::Version { key: Bytes::from(format!("k{i}")), version: i }).unwrap();
        }
        w.append(&R::Outbox { to: NodeId(1), seq: 1, msg: "old".into() }).unwrap();
        w.flush(true).unwrap();
        // Only the state still live goes into the snapshot.
        let live = vec![
            R::Version { key: Bytes::from_static(b"k99"), version: 99 },
            R::Delivered { from: NodeId(2), seq: 4 },
            R::ClockFloor { us: 77 },
        ];
        w.checkpoint(live.into_iter(), |_| 0).unwrap();
        assert_eq!(w.bytes, 0);
        w.append(&R::Version { key: Bytes::from_static(b"new"), version: 1 }).unwrap();
        w.append(&R::Acked { to: NodeId(1), next_seq: 2 }).unwrap();
        w.flush(true).unwrap();
        drop(w);
        let (_, r) = Wal::open::<u64, String>(&d).unwrap();
        assert_eq!(r.versions.len(), 2);
        assert!(r.outbox.is_empty(), "the acknowledgement after the snapshot drops the old message");
        assert_eq!(r.next_seq[&NodeId(1)], 2);
        assert_eq!(r.delivered[&NodeId(2)], 4);
        assert_eq!(r.clock_floor_us, 77);
        // A damaged snapshot is corruption, never a silent loss.
        let snap = d.join("snapshot");
        let mut bad = std::fs::read(&snap).unwrap();
        let n = bad.len();
        bad[n - 1] ^= 0xff;
        std::fs::write(&snap, &bad).unwrap();
        assert!(matches!(Wal::open::<u64, String>(&d), Err(WalError::Corrupt { .. })));
    }

    /// After a snapshot taken with nothing unacknowledged, no outbox record
    /// remains; the acknowledgement mark must still carry the sequence
    /// numbers forward, or the restarted node would resend from 1 and its
    /// peer would drop everything new as duplicates.
    #[test]
    fn sequence_numbers_survive_a_snapshot_with_an_empty_outbox() {
        let d = dir("seq");
        let (mut w, _) = Wal::open::<u64, String>(&d).unwrap();
        w.checkpoint(vec![R::Acked { to: NodeId(3), next_seq: 42 }].into_iter(), |_| 42).unwrap();
        drop(w);
        let (_, r) = Wal::open::<u64, String>(&d).unwrap();
        assert_eq!(r.next_seq[&NodeId(3)], 42);
        assert!(r.outbox.is_empty());
    }

    /// The outbox is not held in memory: a snapshot copies the unacknowledged
    /// messages from the previous snapshot and the log, and only those.
    #[test]
    fn checkpoints_copy_the_unacknowledged_outbox_from_disk() {
        let d = dir("outbox");
        let (mut w, _) = Wal::open::<u64, String>(&d).unwrap();
        for seq in 1..=5 {
            w.append(&R::Outbox { to: NodeId(1), seq, msg: format!("a{seq}") }).unwrap();
            w.append(&R::Outbox { to: NodeId(2), seq, msg: format!("b{seq}") }).unwrap();
            w.append(&R::Version { key: Bytes::from_static(b"k"), version: seq }).unwrap();
        }
        let acked = |to: NodeId| if to == NodeId(1) { 4 } else { 6 };
        w.checkpoint(std::iter::empty::<R>(), acked).unwrap();
        w.append(&R::Outbox { to: NodeId(1), seq: 6, msg: "a6".into() }).unwrap();
        // A second snapshot reads the first one's copies and the new log.
        w.checkpoint(std::iter::empty::<R>(), |to| if to == NodeId(1) { 5 } else { 6 }).unwrap();
        drop(w);
        let (_, r) = Wal::open::<u64, String>(&d).unwrap();
        assert_eq!(r.outbox[&NodeId(1)], vec![(5, "a5".to_string()), (6, "a6".to_string())]);
        assert!(!r.outbox.contains_key(&NodeId(2)));
        assert!(r.versions.is_empty(), "versions come from the caller's records, not the old log");
    }

    /// A crash while a background snapshot is being written (after the log
    /// was set aside) loses nothing, and the next checkpoint works.
    #[test]
    fn a_checkpoint_interrupted_by_a_crash_loses_nothing() {
        let d = dir("interrupted");
        let (mut w, _) = Wal::open::<u64, String>(&d).unwrap();
        w.append(&R::Version { key: Bytes::from_static(b"before"), version: 1 }).unwrap();
        w.append(&R::Outbox { to: NodeId(1), seq: 1, msg: "m1".into() }).unwrap();
        let pending = w.begin_checkpoint(true).unwrap().expect("no checkpoint in progress");
        assert!(w.begin_checkpoint(true).unwrap().is_none(), "one checkpoint at a time");
        w.append(&R::Version { key: Bytes::from_static(b"after"), version: 2 }).unwrap();
        w.flush(true).unwrap();
        drop(pending); // the crash: the snapshot was never written
        drop(w);
        let (mut w, r) = Wal::open::<u64, String>(&d).unwrap();
        let keys: Vec<&[u8]> = r.versions.iter().map(|(k, _)| &k[..]).collect();
        assert_eq!(keys, vec![&b"before"[..], &b"after"[..]], "the set-aside log is read first");
        assert_eq!(r.outbox[&NodeId(1)], vec![(1, "m1".to_string())]);
        assert!(!d.join(OLD_LOG).exists());
        w.checkpoint(r.versions.into_iter().map(|(key, version)| R::Version { key, version }), |_| 0).unwrap();
        drop(w);
        let (_, r) = Wal::open::<u64, String>(&d).unwrap();
        assert_eq!(r.versions.len(), 2);
        assert_eq!(r.outbox[&NodeId(1)].len(), 1);
    }

    #[test]
    fn torn_tail_is_truncated_but_corruption_is_an_error() {
        let d = dir("torn");
        let (mut w, _) = Wal::open::<u64, String>(&d).unwrap();
        for i in 0..3 {
            w.append(&R::Version { key: Bytes::from_static(b"k"), version: i }).unwrap();
        }
        w.flush(true).unwrap();
        drop(w);
        let path = d.join("wal.log");
        let full = std::fs::read(&path).unwrap();
        // Cut the last record in half: recovery keeps the first two.
        std::fs::write(&path, &full[..full.len() - 3]).unwrap();
        let (_, r) = Wal::open::<u64, String>(&d).unwrap();
        assert_eq!(r.versions.len(), 2);
        assert!(r.torn_tail_bytes > 0);
        // Flip a byte inside the first record: refuse to start.
        let mut bad = std::fs::read(&path).unwrap();
        bad[9] ^= 0xff;
        std::fs::write(&path, &bad).unwrap();
        let err = Wal::open::<u64, String>(&d).err().expect("corruption detected");
        assert!(matches!(err, WalError::Corrupt { offset: 0, .. }), "{err}");
    }
}
