//! The state of write-only transactions ([`super::txn`]) a server keeps,
//! and the shape checks the client library and servers share: below the
//! server, which holds these, and the modules that run the protocol.

use super::config::MAX_WOT_KEYS;
use super::msg::*;
use crate::explicit_deps::replication::Stamp;
use causeway_core::{ClientId, Key, NodeId, Value};
use std::collections::{BTreeMap, BTreeSet};

/// A transaction this node coordinates.
#[derive(Default)]
pub(super) struct Coord {
    /// Known once the coordinator's own writes arrived.
    pub info: Option<TxnInfo>,
    pub remote: bool,
    /// Whom to answer (accepting DC; forgotten across a restart).
    pub client: Option<ClientId>,
    /// The coordinator's own writes: (key, stamp).
    pub own: Vec<(Key, Stamp)>,
    /// Remote: cohorts that sent NOTIFY.
    pub notified: BTreeSet<NodeId>,
    /// Remote: the accepting DC committed the transaction, with this
    /// arbitration stamp.
    pub origin_arb: Option<Stamp>,
    /// The transaction's arbitration stamp, once committed.
    pub arb: Stamp,
    /// The coordinator's own writes are pending (prepared).
    pub prepared: bool,
    /// YESVOTEs: cohort → its clock when it voted.
    pub votes: BTreeMap<NodeId, u64>,
    /// The commit time, once decided.
    pub committed: Option<u64>,
    /// After the commit: participants that have not acknowledged it.
    pub unacked: BTreeSet<NodeId>,
    /// When this node started tracking it (for the accepting DC's abort).
    pub since_us: u64,
    /// The coordinator key named by votes (known before `info`).
    pub vote_key: Option<Key>,
    /// The commit is visible: the coordinator's own writes are readable
    /// and the client answered. In the accepting DC from the first ACK (or
    /// the witness's record, deviation 7) on; in a remote DC at once.
    pub exposed: bool,
    /// When the commit was decided (this incarnation): the accepting DC's
    /// witness is asked after `txn_terminate_ms` without an ACK.
    pub decided_us: u64,
    /// The witness recorded this commit: released once the cohort ACKs.
    pub witnessed: bool,
    /// Remote: the coordinator's own vote (sent with PREPARE); 0 before it
    /// prepared.
    pub own_vote: u64,
    /// Remote: commit checks waiting for the commit time (the votes did not
    /// show it later than the time asked about): (asker, time).
    pub checks: Vec<(NodeId, u64)>,
    /// Remote: the accepting DC's outcome has not come; its participants
    /// are asked at this time (this node's clock; 0: not yet planned), and
    /// had been asked this many times (deviation 7).
    pub origin_poll_us: u64,
    pub origin_polls: u32,
}

/// A transaction with writes at this node as a cohort, not committed here.
pub(super) struct Part {
    pub info: TxnInfo,
    pub remote: bool,
    pub writes: Vec<(Key, Stamp)>,
    /// Remote: NOTIFY sent (since the last restart).
    pub notified: bool,
    /// `mutant_cohort_skips_coordinator_dep_check`: applied on arrival.
    pub applied_early: bool,
    /// When its writes became pending (this incarnation; 0: not yet): the
    /// termination starts `txn_terminate_ms` later (deviation 7).
    pub prepared_us: u64,
    /// The termination has begun: queries (or the witness) are asked.
    pub terminating: bool,
    /// Accepting DC: promised to take the outcome from the termination
    /// only (mirrors the stored phase).
    pub promised: bool,
    /// Termination answers so far: participant → what it knows.
    pub answers: BTreeMap<NodeId, TermState>,
}

impl Part {
    /// Test only: (terminating, promised).
    #[cfg(test)]
    pub(super) fn clone_state(&self) -> (bool, bool) {
        (self.terminating, self.promised)
    }

    pub(super) fn new(info: TxnInfo, remote: bool) -> Part {
        Part {
            info,
            remote,
            writes: Vec::new(),
            notified: false,
            applied_early: false,
            prepared_us: 0,
            terminating: false,
            promised: false,
            answers: BTreeMap::new(),
        }
    }
}

/// What a read names: one location, or a slice of a row's family.
pub(super) enum Target {
    Key(Key),
    Slice(SliceSpec),
}

/// A second-round read waiting for commit checks.
pub(super) struct Deferred {
    pub client: ClientId,
    pub attempt: u32,
    pub idx: u32,
    pub target: Target,
    pub at: u64,
    /// Transactions whose check is outstanding: id → coordinator key.
    pub waiting: BTreeMap<TxnId, Key>,
    /// Transactions known not committed by `at`.
    pub cleared: BTreeSet<TxnId>,
    /// Some commit check was sent for this read: its answer waited on a
    /// coordinator (told to the client, for measurement only).
    pub indirected: bool,
}

impl Deferred {
    pub(super) fn new(client: ClientId, attempt: u32, idx: u32, target: Target, at: u64) -> Deferred {
        Deferred {
            client,
            attempt,
            idx,
            target,
            at,
            waiting: BTreeMap::new(),
            cleared: BTreeSet::new(),
            indirected: false,
        }
    }
}

/// Two second-round reads of columns of one row by the same request (one
/// client's attempt, at one time): a commit check one sent answers both.
/// Plain keys are rows of their own, so never share.
pub(super) fn same_row_read(a: &Deferred, b: &Deferred) -> bool {
    let (Target::Key(x), Target::Key(y)) = (&a.target, &b.target) else { return false };
    a.client == b.client
        && a.attempt == b.attempt
        && a.at == b.at
        && x != y
        && causeway_core::column::row_of(x) == causeway_core::column::row_of(y)
}

/// The shape every participant checks, and the client library before it
/// sends anything: some keys, at most [`MAX_WOT_KEYS`], each once, and the
/// coordinator key among them.
pub fn check_wot_shape(keys: &[Key], coord_key: &Key) -> Result<(), String> {
    if keys.is_empty() {
        return Err("a write-only transaction writes at least one key".into());
    }
    if !distinct_keys("a write-only transaction", keys.iter())?.contains(coord_key) {
        return Err("the coordinator key is not one of the transaction's keys".into());
    }
    Ok(())
}

/// A non-atomic batch's shape, checked by the client library before it
/// sends anything and by each server it reaches: at most [`MAX_WOT_KEYS`]
/// keys (a batch's writes share one reply per server, as a transaction's
/// do), each once, so that every write has a stamp of its own in the
/// session's context.
pub fn check_batch_shape(writes: &[(Key, Value)]) -> Result<(), String> {
    distinct_keys("a batch", writes.iter().map(|(k, _)| k)).map(|_| ())
}

/// The keys of a multi-key write (`what` names it in errors), refused when
/// more than [`MAX_WOT_KEYS`] or when one is named twice.
fn distinct_keys<'a>(what: &str, keys: impl ExactSizeIterator<Item = &'a Key>) -> Result<BTreeSet<&'a Key>, String> {
    let n = keys.len();
    if n > MAX_WOT_KEYS {
        return Err(format!("{what} writes at most {MAX_WOT_KEYS} keys, got {n}"));
    }
    let distinct: BTreeSet<&Key> = keys.collect();
    if distinct.len() != n {
        return Err(format!("{what} writes each key once"));
    }
    Ok(distinct)
}
