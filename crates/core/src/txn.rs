//! The client side of an interactive transaction that every runtime shares:
//! what the transaction has read and buffered, which keys still have to be
//! asked of the protocol, and the one history record it becomes.
//!
//! A protocol offering [`OpKind::Interactive`](crate::OpKind) implements
//! three steps: a snapshot ([`Op::Begin`]), reads from it ([`Op::TxRead`]),
//! and an atomic commit of a write set ([`Op::Commit`]). Everything a user
//! expects between those steps is the same for every protocol and lives
//! here, not in the protocols: writes are buffered until commit; a read of
//! a key the transaction wrote returns that write; a second read of a key
//! returns what the first did (reads are repeatable without asking again).
//!
//! The transaction is one event of the causal order, as a one-shot
//! [`Op::Txn`] is, and the checker judges it as one: [`TxnBuffer::record`]
//! turns it into an `Op::Txn` whose reads are the keys read from the
//! snapshot (each once, in first-read order) and whose writes are the
//! final buffered ones. Reads of the transaction's own writes are not
//! snapshot reads; [`TxnBuffer::own_reads`] keeps them, so a test can hold
//! each to the write it must return.

use crate::{Key, Op, OpResult, Value};
use std::collections::HashMap;

/// An interactive transaction in progress, on the client.
#[derive(Clone, Debug, Default)]
pub struct TxnBuffer {
    /// Keys read from the snapshot, in first-read order, and their values.
    snapshot_reads: Vec<(Key, Option<Value>)>,
    read_at: HashMap<Key, usize>,
    /// Buffered writes in first-write order; a later write of a key
    /// replaces the earlier one in place.
    writes: Vec<(Key, Value)>,
    written_at: HashMap<Key, usize>,
    /// Reads answered from the buffered writes: (key, value returned).
    own_reads: Vec<(Key, Value)>,
}

impl TxnBuffer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Of `keys`, those the protocol must read: neither written nor read
    /// by the transaction before, each once.
    pub fn to_fetch(&self, keys: &[Key]) -> Vec<Key> {
        let mut out: Vec<Key> = Vec::new();
        for k in keys {
            if !self.written_at.contains_key(k) && !self.read_at.contains_key(k) && !out.contains(k) {
                out.push(k.clone());
            }
        }
        out
    }

    /// The protocol's answer to a [`TxnBuffer::to_fetch`] read: one value
    /// per fetched key, in order.
    ///
    /// # Panics
    /// If the lengths differ or a key was fetched before: the runtime
    /// asked for what `to_fetch` did not name.
    pub fn fetched(&mut self, keys: Vec<Key>, values: Vec<Option<Value>>) {
        assert_eq!(keys.len(), values.len(), "one value per key read");
        for (k, v) in keys.into_iter().zip(values) {
            assert!(!self.read_at.contains_key(&k) && !self.written_at.contains_key(&k), "a key fetched twice");
            self.read_at.insert(k.clone(), self.snapshot_reads.len());
            self.snapshot_reads.push((k, v));
        }
    }

    /// The values of `keys` as the transaction sees them: its own write if
    /// it wrote the key, else what it read from the snapshot. Every key
    /// must have been fetched or written.
    ///
    /// # Panics
    /// If a key was neither fetched nor written.
    pub fn answer(&mut self, keys: &[Key]) -> Vec<Option<Value>> {
        keys.iter()
            .map(|k| {
                if let Some(&i) = self.written_at.get(k) {
                    let v = self.writes[i].1.clone();
                    self.own_reads.push((k.clone(), v.clone()));
                    Some(v)
                } else {
                    let i = *self.read_at.get(k).expect("a key answered before it was fetched");
                    self.snapshot_reads[i].1.clone()
                }
            })
            .collect()
    }

    /// Buffer a write of `key`; a later write of the same key replaces it.
    pub fn write(&mut self, key: Key, value: Value) {
        match self.written_at.get(&key) {
            Some(&i) => self.writes[i].1 = value,
            None => {
                self.written_at.insert(key.clone(), self.writes.len());
                self.writes.push((key, value));
            }
        }
    }

    /// The buffered writes, each key once with its last value.
    pub fn writes(&self) -> &[(Key, Value)] {
        &self.writes
    }

    /// Reads the buffer answered from the transaction's own writes.
    pub fn own_reads(&self) -> &[(Key, Value)] {
        &self.own_reads
    }

    /// Whether the transaction has read or written anything.
    pub fn is_empty(&self) -> bool {
        self.snapshot_reads.is_empty() && self.writes.is_empty()
    }

    /// The transaction as the one operation a history records, given how
    /// its commit ended (`committed`: the protocol's result of
    /// [`Op::Commit`]). A committed transaction is an [`Op::Txn`] answered
    /// with its snapshot reads; a failed commit keeps its failure (the
    /// checker then treats its writes as possibly applied). An aborted
    /// transaction is recorded as read-only: its reads happened, its writes
    /// never did.
    pub fn record(self, committed: &OpResult) -> (Op, OpResult) {
        let (reads, values): (Vec<Key>, Vec<Option<Value>>) = self.snapshot_reads.into_iter().unzip();
        let op = Op::Txn { reads, writes: self.writes };
        let result = match committed {
            OpResult::Failed(e) => OpResult::Failed(e.clone()),
            _ => OpResult::Txn(values),
        };
        (op, result)
    }

    /// [`TxnBuffer::record`] for an aborted transaction: its reads only.
    /// `None` when it read nothing (nothing happened to record).
    pub fn record_aborted(self) -> Option<(Op, OpResult)> {
        if self.snapshot_reads.is_empty() {
            return None;
        }
        let (reads, values): (Vec<Key>, Vec<Option<Value>>) = self.snapshot_reads.into_iter().unzip();
        Some((Op::Txn { reads, writes: Vec::new() }, OpResult::Txn(values)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn k(s: &str) -> Key {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn own_writes_are_read_back_and_never_fetched() {
        let mut t = TxnBuffer::new();
        assert_eq!(t.to_fetch(&[k("a"), k("b"), k("a")]), vec![k("a"), k("b")]);
        t.fetched(vec![k("a"), k("b")], vec![Some(k("1")), None]);
        t.write(k("a"), k("2"));
        t.write(k("c"), k("3"));
        t.write(k("c"), k("4"));
        assert!(t.to_fetch(&[k("a"), k("b"), k("c")]).is_empty(), "all known");
        assert_eq!(t.answer(&[k("a"), k("b"), k("c")]), vec![Some(k("2")), None, Some(k("4"))]);
        assert_eq!(t.own_reads(), &[(k("a"), k("2")), (k("c"), k("4"))]);
        let (op, r) = t.record(&OpResult::Done);
        // The snapshot read of `a` stays the value before the write: the
        // history's Txn reads come first, as a one-shot Txn's do.
        assert_eq!(op, Op::Txn { reads: vec![k("a"), k("b")], writes: vec![(k("a"), k("2")), (k("c"), k("4"))] });
        assert_eq!(r, OpResult::Txn(vec![Some(k("1")), None]));
    }

    #[test]
    fn an_aborted_transaction_keeps_only_its_reads() {
        let mut t = TxnBuffer::new();
        t.write(k("x"), k("1"));
        assert!(t.clone().record_aborted().is_none());
        t.fetched(vec![k("y")], vec![None]);
        assert_eq!(
            t.record_aborted(),
            Some((Op::Txn { reads: vec![k("y")], writes: vec![] }, OpResult::Txn(vec![None])))
        );
    }
}
