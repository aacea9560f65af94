//! Interactive transactions on a [`Session`]: `begin`, any number of
//! `read` rounds (each may use what the earlier ones returned), buffered
//! `write`s, then `commit` or `abort`.
//!
//! The protocol gives the snapshot, the reads from it and the atomic
//! commit ([`causeway_core::OpKind::Interactive`]); what happens between
//! those steps is the shared [`TxnBuffer`]'s: writes stay on the client
//! until commit, a read of a key the transaction wrote returns that write,
//! and a key read twice returns the same value without asking again.

use crate::client::{ClientError, Session};
use bytes::Bytes;
use causeway_core::{Op, OpError, OpKind, OpResult, Protocol, TxnBuffer};

/// An open interactive transaction ([`Session::begin`]). It holds the
/// session: nothing else runs on it until the transaction ends. Dropped
/// without [`Transaction::commit`] or [`Transaction::abort`], it is
/// aborted just before the session's next operation.
pub struct Transaction<'s, P: Protocol> {
    session: &'s mut Session<P>,
    buf: TxnBuffer,
    /// Whether the protocol still holds the transaction open.
    open: bool,
}

impl<P: Protocol> Session<P> {
    /// Open an interactive transaction: its reads all come from one causal
    /// snapshot fixed now, its writes become visible together at commit.
    /// Protocols without interactive transactions refuse with
    /// [`OpError::Unsupported`].
    pub async fn begin(&mut self) -> Result<Transaction<'_, P>, ClientError> {
        if !P::OPS.contains(&OpKind::Interactive) {
            return Err(ClientError::Op(OpError::Unsupported(OpKind::Interactive)));
        }
        match self.execute_raw(Op::Begin).await? {
            OpResult::Done => Ok(Transaction { session: self, buf: TxnBuffer::new(), open: true }),
            OpResult::Failed(e) => Err(e.into()),
            other => unreachable!("a begin answered {other:?}"),
        }
    }
}

impl<P: Protocol> Transaction<'_, P> {
    /// The values of `keys` at the transaction's snapshot, or its own
    /// writes where it wrote them; `None` where a key has no value.
    pub async fn read(&mut self, keys: Vec<Bytes>) -> Result<Vec<Option<Bytes>>, ClientError> {
        self.usable()?;
        keys.iter().try_for_each(|k| self.session.check_key(k))?;
        let fetch = self.buf.to_fetch(&keys);
        if !fetch.is_empty() {
            let r = self.session.execute_raw(Op::TxRead { keys: fetch.clone() }).await;
            match r {
                Ok(OpResult::Rot(values)) => self.buf.fetched(fetch, values),
                Ok(OpResult::Failed(e)) => {
                    // The protocol ended the transaction (its context is gone).
                    self.open = false;
                    return Err(e.into());
                }
                Ok(other) => unreachable!("a transaction's read answered {other:?}"),
                Err(e) => {
                    self.open = false;
                    return Err(e);
                }
            }
        }
        Ok(self.buf.answer(&keys).into_iter().map(causeway_core::data::visible).collect())
    }

    /// Buffer a write of `key`, visible to this transaction's later reads
    /// and to everyone else once it commits.
    pub fn write(&mut self, key: impl Into<Bytes>, value: impl Into<Bytes>) -> Result<(), ClientError> {
        self.usable()?;
        let (key, value) = (key.into(), value.into());
        self.session.check_key(&key)?;
        self.session.check_value(&value)?;
        if causeway_core::is_tombstone(&value) {
            return Err(ClientError::ReservedValue { key: String::from_utf8_lossy(&key).into_owned() });
        }
        self.buf.write(key, value);
        Ok(())
    }

    /// Buffer a delete of `key` (a tombstone, as [`Session::del`] writes).
    pub fn delete(&mut self, key: impl Into<Bytes>) -> Result<(), ClientError> {
        self.usable()?;
        let key = key.into();
        self.session.check_key(&key)?;
        self.buf.write(key, causeway_core::tombstone(rand::random()));
        Ok(())
    }

    /// Commit: every buffered write becomes visible atomically. After an
    /// error the outcome is unknown only for [`OpError::TimedOut`] and a
    /// lost connection; a refusal wrote nothing.
    pub async fn commit(mut self) -> Result<(), ClientError> {
        self.usable()?;
        self.open = false;
        let writes = self.buf.writes().to_vec();
        match self.session.execute_raw(Op::Commit { writes }).await? {
            OpResult::Done => Ok(()),
            OpResult::Failed(e) => Err(e.into()),
            other => unreachable!("a commit answered {other:?}"),
        }
    }

    /// Drop the transaction: none of its writes happen.
    pub async fn abort(mut self) -> Result<(), ClientError> {
        if !self.open {
            return Ok(());
        }
        self.open = false;
        match self.session.execute_raw(Op::Abort).await? {
            OpResult::Done => Ok(()),
            OpResult::Failed(e) => Err(e.into()),
            other => unreachable!("an abort answered {other:?}"),
        }
    }

    /// The transaction's buffered writes, in first-write order.
    pub fn writes(&self) -> &[(Bytes, Bytes)] {
        self.buf.writes()
    }

    /// What the transaction read and buffered so far, for the record a
    /// history keeps of it ([`TxnBuffer::record`]).
    pub(crate) fn buffer(&self) -> &TxnBuffer {
        &self.buf
    }

    fn usable(&self) -> Result<(), ClientError> {
        if self.open {
            Ok(())
        } else {
            let e = OpError::Aborted("the transaction ended on an earlier error".into());
            Err(ClientError::Op(e))
        }
    }
}

impl<P: Protocol> Drop for Transaction<'_, P> {
    fn drop(&mut self) {
        if self.open {
            self.session.abandoned_txn = true;
        }
    }
}
