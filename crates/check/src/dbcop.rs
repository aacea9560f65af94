//! Export to dbcop's JSON history format, so a history can be cross-checked
//! with dbcop (Biswas & Enea, "On the complexity of checking transactional
//! consistency", OOPSLA 2019; github.com/rnbguy/dbcop).
//!
//! The format is the one dbcop's `verify` command reads for `.json` files,
//! as dbcop's own types define it (its `History`, `Transaction` and `Event`,
//! and its description of the history format):
//!
//! ```json
//! { "params": { "id": 0, "n_node": 2, "n_variable": 3, "n_transaction": 2, "n_event": 2 },
//!   "info": "…", "start": "1970-01-01T00:00:00.000000000+00:00", "end": "…",
//!   "data": [ [ { "events": [ { "Write": { "variable": 0, "version": 7 } } ], "committed": true } ],
//!             [ { "events": [ { "Read":  { "variable": 0, "version": 7 } } ], "committed": true } ] ] }
//! ```
//!
//! `data` alone (an array of sessions) is the "raw" form dbcop's WASM API
//! takes. The mapping:
//!
//! - each client session (by client id) → one dbcop session, operations in
//!   session order;
//! - each `Get` or `Put` → a single-event committed transaction; each `Rot` →
//!   one read-only transaction with its reads in request order; each `Wot` →
//!   one write-only transaction with its writes in request order (so dbcop
//!   holds it to atomic visibility, as its transactional causal consistency
//!   does); each `Txn` → one transaction, its reads then its writes (the
//!   order they happen in);
//! - keys → variables `0..K` in byte order of the keys ([`DbcopExport::variables`]);
//! - values → versions, one per write event (a `Wot` has one per key): the
//!   tagged write ids when every write is tagged with
//!   a distinct non-zero id (dbcop needs versions unique across the whole
//!   history, and treats version 0 specially), otherwise dense ids `1..=W` in
//!   history order ([`DbcopExport::versions`] maps them back to operations);
//! - the initial state → an explicit first transaction, alone in session 0,
//!   writing every key (versions above every write's) and a marker variable
//!   that the first transaction of every other session reads, so it is
//!   ordered before every session; a read of ∅ reads its version of the key.
//!   (dbcop's own implicit initial state, `"version": null`, is a root that
//!   its write-write rule never orders, so a read of ∅ after a causally
//!   earlier write — the photo-then-album anomaly, the README's seed-17
//!   failure — used to pass dbcop.)
//! - a failed `Get` or `Rot` → nothing (it returned nothing); a failed
//!   `Put`, `Wot` or `Txn` nobody read → nothing (dbcop treats even an
//!   uncommitted transaction as a writer, which rejected correct histories
//!   with refused writes); one some read returned → a committed transaction
//!   of its writes in a session of its own, appended after the client
//!   sessions, because it happened but its client never learned so (the
//!   same treatment as [`crate::model`]'s phantom sessions). It keeps its
//!   place after its own session's earlier operations: the transaction
//!   before it writes a fresh marker variable that it reads first. A failed
//!   `Txn` returned no reads, so only its writes are known;
//! - `start`/`end` → the first invocation and last completion, as RFC 3339
//!   times counted from the Unix epoch (simulated histories start at 0).
//!
//! dbcop's `causal` level is Biswas–Enea causal consistency, whose single
//! total commit order makes it the transactional counterpart of this crate's
//! causal+ level (plus read-only transaction snapshots).
//!
//! Confidence: the structs are read from dbcop's current sources, and the
//! export is tested (`crates/causeway/tests/dbcop_oracle.rs`) against an
//! oracle written from Biswas & Enea's published causal check, in its single
//! pass: `co = (so ∪ wr)⁺` acyclic, then one round of arbitration edges
//! (a writer of `x` in the causal past of a read of `x` is ordered before
//! the write it read) and `co ∪ ww` acyclic. The seed-17 failure and a
//! fractured read against the initial state are rejected, a correct history
//! with refused writes is accepted.
//!
//! dbcop's current `causal` level differs from the published algorithm: its
//! saturation adds derived write-write edges to the visibility relation and
//! derives again from them until a fixpoint, which rejects some histories
//! that are causally consistent by Biswas & Enea's own definition, e.g.
//! sessions `[y:=5] [x:=2 y:=20]`, `[x:=1 y==5]`, `[y==20] [x==1]` (causal+:
//! order the writes y:=5, x:=2, x:=1). The single pass does not.
//!
//! So a dbcop verdict is a second opinion, not an oracle. The original 2019
//! artifact used a different, bincode-encoded layout
//! (`Event { write, variable, value, success }`) that this does not produce.

use crate::error::ModelError;
use crate::model::{Model, Source};
use crate::names::key_name;
use causeway_core::{History, Op, OpResult, write_id_of};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DbcopParams {
    pub id: u64,
    pub n_node: u64,
    pub n_variable: u64,
    pub n_transaction: u64,
    pub n_event: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DbcopEvent {
    Read { variable: u64, version: Option<u64> },
    Write { variable: u64, version: u64 },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DbcopTransaction {
    pub events: Vec<DbcopEvent>,
    pub committed: bool,
}

/// dbcop's `History` (the file `dbcop verify` reads).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DbcopHistory {
    pub params: DbcopParams,
    pub info: String,
    pub start: String,
    pub end: String,
    pub data: Vec<Vec<DbcopTransaction>>,
}

/// The export and the maps back to the Causeway history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbcopExport {
    pub history: DbcopHistory,
    /// Variable id → key (printable), then the initial-state marker and one
    /// marker per read failed write.
    pub variables: Vec<String>,
    /// Version → op index of the write (a `Wot` owns several), ascending by
    /// version; the initial transaction's and the markers' versions are
    /// above all of these and not listed.
    pub versions: Vec<(u64, usize)>,
    /// Whether versions are the tagged write ids (else dense ids).
    pub tagged_versions: bool,
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ExportError {
    #[error(transparent)]
    Model(#[from] ModelError),
    /// dbcop rejects a read whose version no transaction wrote.
    #[error("op #{op} read {key} from no write (thin-air read); dbcop cannot represent it")]
    ThinAirRead { op: usize, key: String },
    /// A batch's writes are unordered within their session (a fork and a
    /// join); a dbcop session is a sequence of transactions.
    #[error("op #{op} is a write of a non-atomic batch; dbcop's sessions cannot represent its parallel writes")]
    Batch { op: usize },
}

/// Export a history.
pub fn to_dbcop(history: &History) -> Result<DbcopExport, ExportError> {
    let m = Model::build(history)?;
    let ops = &history.ops;
    if let Some(op) = ops.iter().position(|r| r.batch.is_some()) {
        return Err(ExportError::Batch { op });
    }

    // Versions: one per write event, a `Wot` having one per key.
    let events: Vec<(u32, u32, Option<u64>)> = (0..ops.len() as u32)
        .flat_map(|i| {
            let ids: Vec<Option<u64>> =
                ops[i as usize].op.writes().iter().map(|(_, v)| write_id_of(v).filter(|&id| id != 0)).collect();
            m.keys_written(i).iter().zip(ids).map(move |(&k, id)| (i, k, id)).collect::<Vec<_>>()
        })
        .collect();
    let mut distinct: Vec<u64> = events.iter().filter_map(|e| e.2).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let tagged = events.iter().all(|e| e.2.is_some()) && distinct.len() == events.len();
    let mut version: FxHashMap<(u32, u32), u64> = FxHashMap::default();
    let mut versions: Vec<(u64, usize)> = Vec::with_capacity(events.len());
    for (n, &(i, k, id)) in events.iter().enumerate() {
        let v = if tagged { id.expect("all tagged") } else { n as u64 + 1 };
        version.insert((i, k), v);
        versions.push((v, i as usize));
    }
    versions.sort_unstable();

    // Versions of the synthetic variables, above every write's: the initial
    // transaction's version of each key, its marker, one marker per phantom.
    let k_count = m.keys.len() as u64;
    let base = versions.last().map(|v| v.0).unwrap_or(0) + 1;
    let init_version = |k: u32| base + k as u64;
    let init_marker = (k_count, base + k_count);
    let phantom_marker = |j: usize| (k_count + 1 + j as u64, base + k_count + 1 + j as u64);

    let read_event = |i: usize| -> Result<Vec<DbcopEvent>, ExportError> {
        m.reads_of(i as u32)
            .iter()
            .map(|rd| match rd.source {
                Source::Init => Ok(DbcopEvent::Read { variable: rd.key as u64, version: Some(init_version(rd.key)) }),
                Source::Write(w) => {
                    Ok(DbcopEvent::Read { variable: rd.key as u64, version: Some(version[&(w, rd.key)]) })
                }
                Source::ThinAir => Err(ExportError::ThinAirRead { op: i, key: key_name(&m.keys[rd.key as usize]) }),
            })
            .collect()
    };
    let write_events = |i: usize| -> Vec<DbcopEvent> {
        m.keys_written(i as u32)
            .iter()
            .map(|&k| DbcopEvent::Write { variable: k as u64, version: version[&(i as u32, k)] })
            .collect()
    };

    // The initial state as a transaction writing every key (and a marker),
    // alone in the first session, and read by the first transaction of every
    // other session: dbcop then orders it before everything and judges reads
    // of ∅ like any other read (its own synthetic root constrains nothing).
    let mut init: Vec<DbcopEvent> =
        (0..k_count as u32).map(|k| DbcopEvent::Write { variable: k as u64, version: init_version(k) }).collect();
    init.push(DbcopEvent::Write { variable: init_marker.0, version: init_marker.1 });
    let starts = || DbcopTransaction {
        events: vec![DbcopEvent::Read { variable: init_marker.0, version: Some(init_marker.1) }],
        committed: true,
    };
    let mut data: Vec<Vec<DbcopTransaction>> = vec![vec![DbcopTransaction { events: init, committed: true }]];

    // Sessions in the model's order: clients ascending, ops by invoke time.
    let mut by_client: BTreeMap<causeway_core::ClientId, Vec<usize>> = BTreeMap::new();
    for (i, r) in ops.iter().enumerate() {
        by_client.entry(r.client).or_default().push(i);
    }
    // Failed writes some read returned: (op, session index in `data`, the
    // position of the transaction it follows in that session).
    let mut phantoms: Vec<(usize, usize, usize)> = Vec::new();
    for (_, mut idx) in by_client {
        idx.sort_by_key(|&i| (ops[i].invoke_us, ops[i].complete_us, i));
        let mut session = vec![starts()];
        for i in idx {
            let txn = match (&ops[i].op, &ops[i].result) {
                (Op::Get { .. } | Op::Rot { .. }, OpResult::Get(_) | OpResult::Rot(_)) => {
                    DbcopTransaction { events: read_event(i)?, committed: true }
                }
                (Op::Put { .. } | Op::Wot { .. }, OpResult::Put | OpResult::Wot) => {
                    DbcopTransaction { events: write_events(i), committed: true }
                }
                (Op::Txn { .. }, OpResult::Txn(_)) => {
                    let mut events = read_event(i)?;
                    events.extend(write_events(i));
                    DbcopTransaction { events, committed: true }
                }
                // It may have happened (someone read it), after its
                // session's earlier operations, but nothing of its session
                // is ordered after it (its client never learned).
                (Op::Put { .. } | Op::Wot { .. } | Op::Txn { .. }, _) if m.is_node[i] => {
                    phantoms.push((i, data.len(), session.len() - 1));
                    continue;
                }
                // A failed write nobody read is left out: dbcop would treat
                // even an uncommitted one as a writer.
                (Op::Put { .. } | Op::Wot { .. } | Op::Txn { .. }, _) => continue,
                (Op::Get { .. } | Op::Rot { .. }, _) => continue, // a failed read returned nothing
                (Op::Add { .. } | Op::Slice { .. }, _) => continue, // no register read or written
                // Refused by the model: a history records the transaction whole.
                (Op::Begin | Op::TxRead { .. } | Op::Commit { .. } | Op::Abort, _) => continue,
                // Refused above (the model rejects a batch recorded whole,
                // and the export one recorded as puts).
                (Op::Batch { .. }, _) => return Err(ExportError::Batch { op: i }),
            };
            session.push(txn);
        }
        data.push(session);
    }
    // Each phantom in a session of its own, placed after its session's
    // earlier transactions by reading a marker the one before it writes.
    phantoms.sort_unstable();
    for (j, &(i, s, pos)) in phantoms.iter().enumerate() {
        let (var, v) = phantom_marker(j);
        data[s][pos].events.push(DbcopEvent::Write { variable: var, version: v });
        let mut events = vec![DbcopEvent::Read { variable: var, version: Some(v) }];
        events.extend(write_events(i));
        data.push(vec![DbcopTransaction { events, committed: true }]);
    }
    let n_variables = k_count + 1 + phantoms.len() as u64;
    let mut variables: Vec<String> = m.keys.iter().map(|k| key_name(k)).collect();
    variables.push("⟨initial state marker⟩".into());
    variables.extend(phantoms.iter().map(|&(i, _, _)| format!("⟨marker before op #{i}⟩")));

    let start = ops.iter().map(|r| r.invoke_us).min().unwrap_or(0);
    let end = ops.iter().map(|r| r.complete_us).max().unwrap_or(0);
    let history = DbcopHistory {
        params: DbcopParams {
            id: 0,
            n_node: data.len() as u64,
            n_variable: n_variables,
            n_transaction: data.iter().map(|s| s.len()).max().unwrap_or(0) as u64,
            n_event: data.iter().flatten().map(|t| t.events.len()).max().unwrap_or(0) as u64,
        },
        info: format!("causeway {} history, {} ops", history.protocol, ops.len()),
        start: rfc3339(start),
        end: rfc3339(end),
        data,
    };
    Ok(DbcopExport { history, variables, versions, tagged_versions: tagged })
}

/// Export a history as dbcop's JSON.
pub fn to_dbcop_json(history: &History) -> Result<String, ExportError> {
    let e = to_dbcop(history)?;
    Ok(serde_json::to_string_pretty(&e.history).expect("dbcop structs serialise"))
}

/// µs since the Unix epoch as RFC 3339 with nanoseconds and a `+00:00`
/// offset, the shape chrono's `DateTime` serialises to and parses.
pub fn rfc3339(us: u64) -> String {
    let secs = us / 1_000_000;
    let nanos = (us % 1_000_000) * 1_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, mo, d) = civil_from_days(days);
    format!("{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{nanos:09}+00:00", rem / 3_600, (rem / 60) % 60, rem % 60)
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian
/// calendar (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000000+00:00");
        assert_eq!(rfc3339(1_500_123), "1970-01-01T00:00:01.500123000+00:00");
        // 2024-02-29T12:34:56Z = 1709210096 s.
        assert_eq!(rfc3339(1_709_210_096_000_000), "2024-02-29T12:34:56.000000000+00:00");
    }
}
