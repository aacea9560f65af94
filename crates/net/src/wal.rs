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
//! Not yet done: compaction. The log grows with every version written; a
//! snapshot-and-truncate checkpoint is the next step.

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
    pub records: u64,
    pub torn_tail_bytes: u64,
}

pub struct Wal {
    path: PathBuf,
    out: BufWriter<File>,
    pub bytes: u64,
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> WalError + '_ {
    move |source| WalError::Io { path: path.display().to_string(), source }
}

impl Wal {
    /// Open (creating if needed) the log in `dir` and recover its contents.
    pub fn open<V: DeserializeOwned, M: DeserializeOwned>(dir: &Path) -> Result<(Wal, Recovered<V, M>), WalError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let path = dir.join("wal.log");
        let mut file = OpenOptions::new().create(true).read(true).append(true).open(&path).map_err(io_err(&path))?;
        let mut data = Vec::new();
        file.read_to_end(&mut data).map_err(io_err(&path))?;
        let mut rec = Recovered {
            versions: Vec::new(),
            outbox: BTreeMap::new(),
            next_seq: BTreeMap::new(),
            delivered: BTreeMap::new(),
            clock_floor_us: 0,
            records: 0,
            torn_tail_bytes: 0,
        };
        let mut acked: BTreeMap<NodeId, u64> = BTreeMap::new();
        let mut off = 0usize;
        let corrupt = |offset: usize, reason: String| WalError::Corrupt {
            path: path.display().to_string(),
            offset: offset as u64,
            reason,
        };
        while off < data.len() {
            if data.len() - off < 8 {
                break; // torn header
            }
            let len = u32::from_be_bytes(data[off..off + 4].try_into().expect("4 bytes")) as usize;
            let crc = u32::from_be_bytes(data[off + 4..off + 8].try_into().expect("4 bytes"));
            let end = off + 8 + len;
            if end > data.len() {
                break; // torn body
            }
            let payload = &data[off + 8..end];
            if crc32fast::hash(payload) != crc {
                if end == data.len() {
                    break; // the last record was torn mid-write
                }
                return Err(corrupt(off, "checksum mismatch".into()));
            }
            let r: LogRecord<V, M> =
                postcard::from_bytes(payload).map_err(|e| corrupt(off, format!("undecodable record: {e}")))?;
            match r {
                LogRecord::Version { key, version } => rec.versions.push((key, version)),
                LogRecord::Outbox { to, seq, msg } => {
                    rec.outbox.entry(to).or_default().push((seq, msg));
                    let n = rec.next_seq.entry(to).or_insert(1);
                    *n = (*n).max(seq + 1);
                }
                LogRecord::Acked { to, next_seq } => {
                    let a = acked.entry(to).or_insert(0);
                    *a = (*a).max(next_seq);
                    // Drop acknowledged messages as we go, to bound memory.
                    if let Some(v) = rec.outbox.get_mut(&to) {
                        v.retain(|(s, _)| *s >= next_seq);
                    }
                }
                LogRecord::Delivered { from, seq } => {
                    let d = rec.delivered.entry(from).or_insert(0);
                    *d = (*d).max(seq);
                }
                LogRecord::ClockFloor { us } => rec.clock_floor_us = rec.clock_floor_us.max(us),
            }
            rec.records += 1;
            off = end;
        }
        if off < data.len() {
            rec.torn_tail_bytes = (data.len() - off) as u64;
            file.set_len(off as u64).map_err(io_err(&path))?;
            file.sync_all().map_err(io_err(&path))?;
        }
        file.seek(SeekFrom::End(0)).map_err(io_err(&path))?;
        let wal = Wal { out: BufWriter::with_capacity(1 << 20, file), bytes: off as u64, path };
        Ok((wal, rec))
    }

    pub fn append<V: Serialize, M: Serialize>(&mut self, r: &LogRecord<V, M>) -> Result<(), WalError> {
        let payload = postcard::to_stdvec(r).expect("serialising a record cannot fail");
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&(payload.len() as u32).to_be_bytes());
        head[4..].copy_from_slice(&crc32fast::hash(&payload).to_be_bytes());
        self.out.write_all(&head).map_err(io_err(&self.path))?;
        self.out.write_all(&payload).map_err(io_err(&self.path))?;
        self.bytes += 8 + payload.len() as u64;
        Ok(())
    }

    /// Hand buffered records to the OS, and force them to disk if `sync`.
    pub fn flush(&mut self, sync: bool) -> Result<(), WalError> {
        self.out.flush().map_err(io_err(&self.path))?;
        if sync {
            self.out.get_ref().sync_data().map_err(io_err(&self.path))?;
        }
        Ok(())
    }
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
        w.flush(true).unwrap();
        drop(w);
        let (_, r) = Wal::open::<u64, String>(&d).unwrap();
        assert_eq!(r.versions, vec![(Bytes::from_static(b"k"), 7)]);
        assert_eq!(r.outbox[&NodeId(2)], vec![(2, "b".to_string())]);
        assert_eq!(r.next_seq[&NodeId(2)], 3);
        assert_eq!(r.delivered[&NodeId(3)], 9);
        assert_eq!(r.clock_floor_us, 1234);
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
