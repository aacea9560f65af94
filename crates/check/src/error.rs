//! Typed errors: a history that cannot be read, or one whose shape makes the
//! checks meaningless (two writes of one value, a session with overlapping
//! operations, a result that does not fit its operation).

use causeway_core::{ClientId, OpKind};
use serde::Serialize;
use thiserror::Error;

/// Why a history could not be loaded.
#[derive(Debug, Error)]
pub enum CheckError {
    #[error("cannot read history {path}: {source}")]
    Io { path: String, source: std::io::Error },
    /// The file is not the JSON that `serde_json::to_writer(&history)` writes.
    #[error("history {path} is not valid history JSON: {message}")]
    Json { path: String, line: usize, column: usize, message: String },
}

/// Why a history cannot be checked as it stands. Each names the operations
/// (indices into `History::ops`) that show the problem.
#[derive(Clone, Debug, Error, PartialEq, Eq, Serialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum ModelError {
    /// Reads are matched to writes by value, so two writes of the same value
    /// to the same key make it impossible to tell which one a read saw.
    #[error("ops #{first} and #{second} both write {value} to key {key}: reads of it are ambiguous")]
    DuplicateWrite { key: String, value: String, first: usize, second: usize },
    /// A session is sequential: it never has two operations outstanding.
    #[error("client {client} has overlapping operations #{first} and #{second}: sessions must be sequential")]
    OverlappingSession { client: ClientId, first: usize, second: usize },
    #[error("op #{index} is a {op:?} but its result is a {result}")]
    ResultMismatch { index: usize, op: OpKind, result: &'static str },
    #[error("op #{index} is a transaction reading {keys} keys but returned {values} values")]
    RotArity { index: usize, keys: usize, values: usize },
    #[error("op #{index} is a {} that names key {key} twice", op.name())]
    DuplicateKey { index: usize, op: OpKind, key: String },
    #[error("the history has {0} operations; the checker indexes them with 32 bits")]
    TooLarge(usize),
    /// A batch is recorded as one `Put` per write ([`causeway_core::OpRecord::expand`]),
    /// so that each write has an index of its own.
    #[error("op #{index} is a batch recorded whole; record one put per write (OpRecord::expand)")]
    UnexpandedBatch { index: usize },
    #[error("op #{index} is marked as a write of batch {batch} but is a {}", op.name())]
    BatchNotPut { index: usize, batch: u64, op: OpKind },
    /// An interactive transaction is recorded as one `Txn`
    /// ([`causeway_core::TxnBuffer::record`]), never step by step.
    #[error(
        "op #{index} is a step of an interactive transaction; record the transaction as one txn (TxnBuffer::record)"
    )]
    InteractiveStep { index: usize },
}
