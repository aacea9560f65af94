//! What a PaRiS or BPR partition keeps in the store's durable metadata:
//! its clocks and its prepared transactions (deviation 10). A prepared
//! transaction must outlive a crash of its cohort: the cohort proposed a
//! commit time and promised, by answering PREPARE, that its version clock
//! stays below it until the outcome is known (Spirovska et al. §IV-B, Alg.
//! 3 lines 10–15 and Alg. 4 line 8). The UST and the GC horizon S_old come
//! back too, so that a restarted coordinator never hands out a snapshot
//! below what GC may have collected.

use super::msg::{Ts, TxId};
use causeway_core::{Key, NodeId, Value};
use serde::{Deserialize, Serialize};

/// The first byte of the metadata: its layout. [`FORMAT_V1`] is the layout
/// before the clock ceiling was kept; metadata of another length and tag is
/// the layout before prepared transactions were kept: the two clocks, 8
/// bytes each.
const FORMAT: u8 = 2;
const FORMAT_V1: u8 = 1;
const LEGACY_LEN: usize = 16;

/// The durable part of a prepared transaction: its proposed time, its
/// writes to this partition, and whom to ask how it ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct PreparedTx {
    pub pt: Ts,
    pub writes: Vec<(Key, Value)>,
    /// The coordinator, and its context of the transaction.
    pub coord: NodeId,
    pub cid: u64,
}

/// A partition's clocks: VV[r] (the version clock), HLC, ust and S_old,
/// the synced ceiling above every clock value the partition has sent, and
/// how many times it has started (its coordinator contexts are numbered
/// within the start, so that an answer meant for a context from before a
/// crash never reaches one after it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Clocks {
    pub vv_r: Ts,
    pub hlc: Ts,
    pub ust: Ts,
    pub s_old: Ts,
    pub ceiling: Ts,
    pub epoch: u64,
}

/// [`Journal`] as [`FORMAT_V1`] wrote it: the clocks without a ceiling.
#[derive(Deserialize)]
struct JournalV1 {
    clocks: (Ts, Ts, Ts, Ts),
    prepared: Vec<(TxId, PreparedTx)>,
}

/// The metadata, as written: borrowed from the partition.
#[derive(Serialize)]
struct JournalRef<'a> {
    clocks: Clocks,
    prepared: Vec<(&'a TxId, &'a PreparedTx)>,
}

/// The metadata, as read back (the same layout as [`JournalRef`]).
#[derive(Debug, PartialEq, Eq, Deserialize)]
pub(super) struct Journal {
    pub clocks: Clocks,
    pub prepared: Vec<(TxId, PreparedTx)>,
}

/// Encode the clocks and the prepared transactions.
pub(super) fn encode<'a>(clocks: Clocks, prepared: impl Iterator<Item = (&'a TxId, &'a PreparedTx)>) -> Vec<u8> {
    let journal = JournalRef { clocks, prepared: prepared.collect() };
    postcard::to_extend(&journal, vec![FORMAT]).expect("the journal encodes into a vector")
}

/// Decode metadata written by [`encode`] (or an older layout, with no
/// ceiling); `None` for bytes of no layout.
pub(super) fn decode(meta: &[u8]) -> Option<Journal> {
    if let Some((&FORMAT, rest)) = meta.split_first()
        && let Ok(j) = postcard::from_bytes::<Journal>(rest)
    {
        return Some(j);
    }
    if let Some((&FORMAT_V1, rest)) = meta.split_first()
        && let Ok(j) = postcard::from_bytes::<JournalV1>(rest)
    {
        let (vv_r, hlc, ust, s_old) = j.clocks;
        return Some(Journal { clocks: Clocks { vv_r, hlc, ust, s_old, ceiling: 0, epoch: 0 }, prepared: j.prepared });
    }
    if meta.len() == LEGACY_LEN {
        let word = |i: usize| u64::from_le_bytes(meta[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let clocks = Clocks { vv_r: word(0), hlc: word(1), ..Clocks::default() };
        return Some(Journal { clocks, prepared: Vec::new() });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepared_transactions_round_trip() {
        let tx = TxId { session: 7, seq: 3 };
        let p = PreparedTx {
            pt: 1_234_567,
            writes: vec![(Key::from_static(b"x"), Value::from_static(b"1"))],
            coord: NodeId(4),
            cid: 9,
        };
        let clocks = Clocks { vv_r: 100, hlc: 200, ust: 90, s_old: 80, ceiling: 1_000_200, epoch: 3 };
        let back = decode(&encode(clocks, [(&tx, &p)].into_iter())).expect("decodes");
        assert_eq!(back, Journal { clocks, prepared: vec![(tx, p.clone())] });
        // The layout before the ceiling: the same, with a ceiling of 0.
        #[derive(Serialize)]
        struct V1<'a> {
            clocks: (Ts, Ts, Ts, Ts),
            prepared: Vec<(&'a TxId, &'a PreparedTx)>,
        }
        let v1 = postcard::to_extend(&V1 { clocks: (100, 200, 90, 80), prepared: vec![(&tx, &p)] }, vec![FORMAT_V1])
            .expect("encodes");
        let clocks = Clocks { ceiling: 0, epoch: 0, ..clocks };
        assert_eq!(decode(&v1), Some(Journal { clocks, prepared: vec![(tx, p)] }));
    }

    #[test]
    fn the_two_clock_layout_still_reads() {
        let mut meta = 5u64.to_le_bytes().to_vec();
        meta.extend_from_slice(&6u64.to_le_bytes());
        let clocks = Clocks { vv_r: 5, hlc: 6, ..Clocks::default() };
        assert_eq!(decode(&meta), Some(Journal { clocks, prepared: Vec::new() }));
        assert_eq!(decode(&[9, 9, 9]), None);
    }
}
