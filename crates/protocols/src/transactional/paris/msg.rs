use crate::kit::msg::payload;
use causeway_core::{DcId, Key, OpError, Value};
use serde::{Deserialize, Serialize};

/// A hybrid-clock timestamp in µs, as Alg. 3 writes it: a scalar that is
/// the physical clock or, when that lags, one above what the partition has
/// seen (deviation 2).
pub type Ts = u64;

/// A transaction's id: the client session's cluster-wide nonce and its
/// operation number. Unique without a coordinator-side generator, and the
/// second key of the versions' last-writer-wins order (§II: ⟨ut, id_T, sr⟩).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TxId {
    pub session: u64,
    pub seq: u64,
}

/// A finished transaction as the coordinator reports it: the snapshot it
/// read (the client's new ust_c), one value per read key in request order,
/// and its commit time (0 for a read-only one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Done {
    pub snapshot: Ts,
    pub values: Vec<Option<Value>>,
    pub ct: Ts,
}

/// How a prepared transaction stands at its coordinator, as an
/// [`Msg::Outcome`] tells a cohort. There is no "committed": a coordinator
/// sends COMMIT to its cohorts in the turn it decides, over the same FIFO
/// channel the answer takes later, so a cohort has every commit of its
/// coordinator before any answer sent after it (deviation 10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The coordinator is still collecting proposals: ask again later.
    Undecided,
    /// The coordinator has no context for the transaction: it lost it in a
    /// crash before deciding, never told the client it committed, and
    /// never will decide it (presumed abort).
    Aborted,
}

/// Every message of PaRiS and BPR.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// A read-only transaction (GET, ROT): START and READ in one request
    /// (deviation 1). `ust` is the client's ust_c (BPR: the highest
    /// timestamp it has seen); `placement` the client's view of the
    /// topology (deviation 8).
    ReadReq {
        tx: TxId,
        ust: Ts,
        placement: u64,
        keys: Vec<Key>,
    },
    /// A read-write transaction (PUT, TXN): START, READ and COMMIT in one
    /// request; `hwt` is the client's hwt_c.
    TxReq {
        tx: TxId,
        ust: Ts,
        hwt: Ts,
        placement: u64,
        reads: Vec<Key>,
        writes: Vec<(Key, Value)>,
    },
    /// A PUT: a `TxReq` of one write and no reads, under its own name so
    /// that per-kind counts tell PUTs from transactions.
    PutReq {
        tx: TxId,
        ust: Ts,
        hwt: Ts,
        placement: u64,
        key: Key,
        value: Value,
    },
    /// START of an interactive transaction (Alg. 1–2 START): the
    /// coordinator fixes the snapshot and keeps the transaction's context
    /// open for its reads and commit. `tx.seq` is this operation's number.
    Begin {
        tx: TxId,
        ust: Ts,
        hwt: Ts,
        placement: u64,
    },
    /// READ in the open transaction `tx`, at its snapshot; `seq` is this
    /// operation's number.
    TxRead {
        tx: TxId,
        seq: u64,
        keys: Vec<Key>,
    },
    /// COMMIT of the open transaction `tx` with its write set (empty: a
    /// read-only transaction, only released).
    TxCommit {
        tx: TxId,
        seq: u64,
        writes: Vec<(Key, Value)>,
    },
    /// Drop the open transaction `tx`; not answered.
    TxAbort {
        tx: TxId,
    },
    /// The coordinator's answer, naming the client's operation number.
    Reply {
        seq: u64,
        result: Result<Done, OpError>,
    },
    /// Alg. 3 ReadSliceReq: the freshest versions at or below `snapshot`.
    /// `cid` and `slice` name the coordinator's context and the slice's
    /// place in it.
    ReadSlice {
        cid: u64,
        slice: u32,
        snapshot: Ts,
        keys: Vec<Key>,
    },
    SliceReply {
        cid: u64,
        slice: u32,
        values: Result<Vec<Option<Value>>, OpError>,
    },
    /// Alg. 3 PrepareReq.
    Prepare {
        cid: u64,
        tx: TxId,
        snapshot: Ts,
        ht: Ts,
        writes: Vec<(Key, Value)>,
    },
    /// A cohort's proposal for `tx`. The coordinator counts it only for the
    /// context `cid` of that same transaction: a coordinator that restarted
    /// numbers its contexts from 0 again, and a late reply of a transaction
    /// lost with the crash must not count for a new one.
    PrepareReply {
        cid: u64,
        tx: TxId,
        pt: Ts,
    },
    /// Alg. 2 line 29, sent to each cohort (the listing's p_n^m is an erratum).
    Commit {
        tx: TxId,
        ct: Ts,
    },
    /// A cohort whose prepared `tx` has waited longer than
    /// `prepared_query_us` asks its coordinator how it ended (deviation 10).
    OutcomeQuery {
        cid: u64,
        tx: TxId,
    },
    /// The coordinator's answer to an `OutcomeQuery`, or its word on a
    /// prepare reply of a transaction it does not know.
    Outcome {
        tx: TxId,
        outcome: Outcome,
    },
    /// Alg. 4 Replicate: the transactions committed at `ct`, in ct order on
    /// the FIFO link.
    Replicate {
        ct: Ts,
        txs: Vec<(TxId, Vec<(Key, Value)>)>,
    },
    /// Alg. 4 Heartbeat: the sender's version clock VV[r].
    Heartbeat {
        t: Ts,
    },
    /// Tree child → parent: [min of the subtree's VV entries, min of its
    /// oldest active snapshots].
    StableReport {
        agg: Vec<Ts>,
    },
    /// Tree parent → child: the UST and the GC horizon S_old.
    StablePush {
        ust: Ts,
        old: Ts,
    },
    /// A DC's root → the other DCs' roots: the DC's GST and oldest snapshot.
    GstExchange {
        gst: Ts,
        old: Ts,
    },
}

crate::impl_message! {
    Msg {
        client: ReadReq, Reply, Begin, TxRead, TxAbort;
        writes: TxReq, PutReq, TxCommit;
        peer: ReadSlice, SliceReply, Prepare, PrepareReply, Commit, OutcomeQuery, Outcome, Replicate, Heartbeat,
            StableReport, StablePush, GstExchange;
        nested: ;
    }
    fn ephemeral(&self) -> bool {
        matches!(self, Msg::Heartbeat { .. } | Msg::StableReport { .. } | Msg::StablePush { .. } | Msg::GstExchange { .. })
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        let longest = |keys: &mut dyn Iterator<Item = usize>| keys.max().unwrap_or(0);
        match self {
            Msg::ReadReq { keys, .. } | Msg::ReadSlice { keys, .. } | Msg::TxRead { keys, .. } => {
                (longest(&mut keys.iter().map(|k| k.len())), 0)
            }
            Msg::TxCommit { writes, .. } => {
                (longest(&mut writes.iter().map(|(k, _)| k.len())), longest(&mut writes.iter().map(|(_, v)| v.len())))
            }
            Msg::TxReq { reads, writes, .. } => (
                longest(&mut reads.iter().chain(writes.iter().map(|(k, _)| k)).map(|k| k.len())),
                longest(&mut writes.iter().map(|(_, v)| v.len())),
            ),
            Msg::PutReq { key, value, .. } => (key.len(), value.len()),
            _ => (0, 0),
        }
    }
    fn key_hint(&self) -> Option<&[u8]> {
        match self {
            Msg::PutReq { key, .. } => Some(key),
            Msg::TxReq { writes, reads, .. } => writes.first().map(|(k, _)| k).or(reads.first()).map(|k| &k[..]),
            Msg::ReadReq { keys, .. } | Msg::ReadSlice { keys, .. } | Msg::TxRead { keys, .. } => {
                keys.first().map(|k| &k[..])
            }
            Msg::Prepare { writes, .. } | Msg::TxCommit { writes, .. } => writes.first().map(|(k, _)| &k[..]),
            Msg::Replicate { txs, .. } => txs.first().and_then(|(_, w)| w.first()).map(|(k, _)| &k[..]),
            _ => None,
        }
    }
    fn payload_bytes(&self) -> usize {
        let writes = |w: &[(Key, Value)]| payload(w.iter().flat_map(|(k, v)| [&k[..], &v[..]]));
        match self {
            Msg::ReadReq { keys, .. } | Msg::ReadSlice { keys, .. } | Msg::TxRead { keys, .. } => {
                payload(keys.iter().map(|k| &k[..]))
            }
            Msg::TxCommit { writes: w, .. } => writes(w),
            Msg::TxReq { reads, writes: w, .. } => payload(reads.iter().map(|k| &k[..])) + writes(w),
            Msg::PutReq { key, value, .. } => key.len() + value.len(),
            Msg::Reply { result: Ok(d), .. } => payload(d.values.iter().flatten().map(|v| &v[..])),
            Msg::SliceReply { values: Ok(vs), .. } => payload(vs.iter().flatten().map(|v| &v[..])),
            Msg::Prepare { writes: w, .. } => writes(w),
            Msg::Replicate { txs, .. } => txs.iter().map(|(_, w)| writes(w)).sum(),
            Msg::Reply { result: Err(_), .. }
            | Msg::SliceReply { values: Err(_), .. }
            | Msg::PrepareReply { .. }
            | Msg::Begin { .. }
            | Msg::TxAbort { .. }
            | Msg::Commit { .. }
            | Msg::OutcomeQuery { .. }
            | Msg::Outcome { .. }
            | Msg::Heartbeat { .. }
            | Msg::StableReport { .. }
            | Msg::StablePush { .. }
            | Msg::GstExchange { .. } => 0,
        }
    }
}

/// A stored version (§IV-A's item d = ⟨k, v, ut, id_T, sr⟩, the key being
/// the store's): ordered by ⟨ut, id_T, sr⟩, last-writer-wins.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    pub ut: Ts,
    pub tx: TxId,
    pub sr: DcId,
}

crate::impl_versioned!(Version, (Ts, TxId, DcId) = (ut, tx, sr));
