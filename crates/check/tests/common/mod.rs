//! Hand-built histories: a tiny builder, so each test states its history in a
//! few lines. Values are tagged with the given write id (so they print as
//! `w<id>`); every op gets its own 10 µs slot, so sessions are sequential.

#![allow(dead_code)]

use bytes::Bytes;
use causeway_core::{
    ClientId, DcId, History, Levels, Op, OpError, OpRecord, OpResult, ReadLevel, WriteLevel, tagged_value,
};

pub fn v(id: u64) -> Bytes {
    tagged_value(id, 16)
}

pub fn k(name: &str) -> Bytes {
    Bytes::copy_from_slice(name.as_bytes())
}

#[derive(Default)]
pub struct H {
    pub ops: Vec<OpRecord>,
    t: u64,
}

impl H {
    pub fn new() -> H {
        H::default()
    }

    fn push(&mut self, client: u32, op: Op, result: OpResult) -> usize {
        self.t += 10;
        // DC = client % 2 unless set otherwise: enough for tests to tell DCs apart.
        self.ops.push(OpRecord {
            client: ClientId(client),
            dc: DcId((client % 2) as u16),
            op,
            result,
            invoke_us: self.t,
            complete_us: self.t + 5,
            batch: None,
            levels: None,
            checking_group: None,
        });
        self.ops.len() - 1
    }

    pub fn put(&mut self, client: u32, key: &str, id: u64) -> usize {
        self.push(client, Op::Put { key: k(key), value: v(id) }, OpResult::Put)
    }

    pub fn failed_put(&mut self, client: u32, key: &str, id: u64) -> usize {
        self.push(client, Op::Put { key: k(key), value: v(id) }, OpResult::Failed(OpError::Aborted("timeout".into())))
    }

    /// A write-only transaction writing each key with its id.
    pub fn wot(&mut self, client: u32, writes: &[(&str, u64)]) -> usize {
        self.push(client, Op::Wot { writes: writes.iter().map(|&(key, id)| (k(key), v(id))).collect() }, OpResult::Wot)
    }

    /// A non-atomic batch, recorded as the runtimes record it: one put per
    /// write, sharing a batch number (`OpRecord::expand`). Returns the
    /// puts' indices.
    pub fn batch(&mut self, client: u32, writes: &[(&str, u64)]) -> Vec<usize> {
        self.t += 10;
        let rec = OpRecord {
            client: ClientId(client),
            dc: DcId((client % 2) as u16),
            op: Op::Batch { writes: writes.iter().map(|&(key, id)| (k(key), v(id))).collect() },
            result: OpResult::Put,
            invoke_us: self.t,
            complete_us: self.t + 5,
            batch: None,
            levels: None,
            checking_group: None,
        };
        let first = self.ops.len();
        self.ops.extend(rec.expand(first as u64));
        (first..self.ops.len()).collect()
    }

    /// A read-write transaction: its reads (`None`: ∅), then its writes.
    pub fn txn(&mut self, client: u32, reads: &[(&str, Option<u64>)], writes: &[(&str, u64)]) -> usize {
        self.push(
            client,
            Op::Txn {
                reads: reads.iter().map(|(key, _)| k(key)).collect(),
                writes: writes.iter().map(|&(key, id)| (k(key), v(id))).collect(),
            },
            OpResult::Txn(reads.iter().map(|(_, id)| id.map(v)).collect()),
        )
    }

    /// `id: None` reads ∅.
    pub fn get(&mut self, client: u32, key: &str, id: Option<u64>) -> usize {
        self.push(client, Op::Get { key: k(key) }, OpResult::Get(id.map(v)))
    }

    /// A write at its own session levels (`Levels::write` is what counts).
    pub fn put_at(&mut self, client: u32, key: &str, id: u64, write: WriteLevel) -> usize {
        let i = self.put(client, key, id);
        self.ops[i].levels = Some(Levels { write, ..Levels::default() });
        i
    }

    /// A read at its own read level.
    pub fn get_at(&mut self, client: u32, key: &str, id: Option<u64>, read: ReadLevel) -> usize {
        let i = self.get(client, key, id);
        self.ops[i].levels = Some(Levels { read, ..Levels::default() });
        i
    }

    pub fn rot(&mut self, client: u32, reads: &[(&str, Option<u64>)]) -> usize {
        self.push(
            client,
            Op::Rot { keys: reads.iter().map(|(key, _)| k(key)).collect() },
            OpResult::Rot(reads.iter().map(|(_, id)| id.map(v)).collect()),
        )
    }

    /// Advance the clock (e.g. past a quiescence time).
    pub fn wait_until(&mut self, t: u64) {
        self.t = self.t.max(t);
    }

    pub fn now(&self) -> u64 {
        self.t
    }

    pub fn history(&self) -> History {
        History { protocol: "hand-built".into(), ops: self.ops.clone() }
    }
}
pub mod oracle;
