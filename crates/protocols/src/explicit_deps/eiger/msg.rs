use crate::explicit_deps::replication::{Dep, DepVersion, PathMsg, Stamp};
use crate::kit::msg::{Thin, payload};
use bytes::Bytes;
use causeway_core::{Key, Value};
use serde::{Deserialize, Serialize};

/// What a read returns (Lloyd §5.3): the value visible (`None`: the key
/// has no version then), the operation's stamp (a dependency's timestamp),
/// and the valid interval [`evt`, `lvt`] in logical time.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Read {
    pub value: Option<Value>,
    pub stamp: Stamp,
    /// Earliest valid time: when this server applied the version.
    pub evt: u64,
    /// Latest valid time: the server's logical time at the read if the
    /// version is still current (first round); for a read at a time
    /// (second round) the requested time itself.
    pub lvt: u64,
    /// A first-round read of a location a prepared write-only transaction
    /// may modify (Lloyd §5.4.4): no value, only an LVT (the server's
    /// time); the client reads the location again at EffT.
    #[serde(default)]
    pub pending: bool,
    /// A counter column (Lloyd §5.2, counter columns): the adds its value
    /// depends on, at most one per DC, which the reader depends on instead
    /// of `stamp` alone.
    #[serde(default)]
    pub deps: Thin<Stamp>,
    /// The write read (for a counter: every add it depends on) is settled,
    /// committed in every DC (Lloyd §6.1, "never-depend", as for COPS): a
    /// dependency on it would always pass its check, so the reader does
    /// not record one. Set on first-round reads; others keep their
    /// dependencies, which is merely conservative.
    #[serde(default)]
    pub never_depend: bool,
    /// A slice: every column of the range that holds a version, in column
    /// order, deleted ones (tombstones) included so that the reader
    /// depends on them (§5.2, "new results for reads"). `value` is `None`.
    #[serde(default)]
    pub cells: Thin<Cell>,
}

/// One column of a slice's answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cell {
    pub column: Bytes,
    pub value: Value,
    pub stamp: Stamp,
    /// A counter's stored dependencies (see [`Read::deps`]).
    pub deps: Vec<Stamp>,
}

/// A slice predicate over one row's family (§3, `(start, stop, count)`):
/// columns named `start` through `stop` inclusive (`stop` empty: to the
/// end), at most `count` of them holding a value (0: no limit).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceSpec {
    pub row: Key,
    pub family: Bytes,
    pub start: Bytes,
    pub stop: Bytes,
    pub count: u32,
}

/// A counter column's state on one stored add (Lloyd §5.2, counter
/// columns). Each add is its own version; once applied here, a version
/// carries the counter's running `total` in this DC's application order
/// (adds commute, so every DC ends at the same sum) and the counter's
/// stored dependencies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counter {
    pub delta: i64,
    /// The counter's value with this add applied (valid once `applied`).
    pub total: i64,
    /// The dependencies the add was written with (the session's one-hop
    /// dependencies plus the previous add accepted in its DC); kept until
    /// it is applied here, for the reduction.
    pub attached: Vec<Dep>,
    /// What a reader of the counter depends on: at most one add per DC.
    pub deps: Vec<Stamp>,
    /// The newest add applied here from each DC, unreduced: the previous
    /// add of this DC that a new local add depends on (the per-DC chain).
    pub chain: Vec<Stamp>,
    /// Folded into the running total (a replicated add is folded when its
    /// checks pass and it commits).
    pub applied: bool,
}

/// Names a write-only transaction cluster-wide: its session's nonce and
/// the session's count of transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TxnId {
    pub session: u64,
    pub seq: u64,
}

/// What every participant knows of a write-only transaction: its id, its
/// coordinator key (Lloyd §5.4: picked at random by the client library
/// among the transaction's keys), and every key it writes, from which each
/// participant derives the others in its own DC. The keys are shared, not
/// copied: every write of the transaction, stored and in flight, carries
/// the info, and a copy per write made a transaction's cost grow with the
/// square of its keys (160 locations for 5 rows of 32 columns).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnInfo {
    pub id: TxnId,
    pub coord_key: Key,
    pub keys: std::sync::Arc<[Key]>,
}

/// Where one participant's write of a transaction stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// A remote DC's copy, received and waiting for its coordinator's
    /// PREPARE (the participant sent NOTIFY once its earlier writes of the
    /// key were in). Not pending for readers yet.
    Held,
    /// Pending (Lloyd §5.4): the participant voted YES when its logical
    /// clock read `vote`; the commit time will be later. Readers of the
    /// location are answered LVT-only and indirect to the coordinator.
    /// `promised` (a cohort in the accepting DC, deviation 7): it answered
    /// a termination without knowing the outcome, and from then on takes
    /// the outcome from the termination only, never from the coordinator's
    /// COMMIT (which it leaves unacknowledged), so that a coordinator that
    /// was only slow cannot make visible a commit the termination aborts.
    Prepared {
        vote: u64,
        #[serde(default)]
        promised: bool,
    },
    /// The accepting coordinator's own write: the transaction committed at
    /// `at`, which no cohort has acknowledged yet (deviation 7). Still
    /// pending for readers, and the client is not answered, until one has:
    /// the decision is then known to a node that outlives this one.
    Committing { at: u64 },
    /// A remote DC's copy whose commit time `at` is decided, about to be
    /// committed through the replication path.
    Decided { at: u64 },
}

/// One participant's write of a transaction, not yet committed here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnPart {
    pub info: TxnInfo,
    pub phase: Phase,
    /// Replicated from another DC (committed through the replication
    /// path) rather than accepted here.
    pub remote: bool,
    /// The transaction's one-hop dependencies: on the coordinator key's
    /// write only, where the remote coordinator checks them (§5.4: cohorts
    /// send no `dep_check`s).
    pub deps: Vec<Dep>,
    /// Remote DC: the accepting DC committed the transaction, which has
    /// this arbitration stamp (see [`Version::arb`]); the coordinator's
    /// from `TxnCommitted`, a cohort's from PREPARE.
    pub origin_arb: Option<Stamp>,
    /// Remote cohort: the coordinator's vote, from PREPARE. The commit time
    /// in a remote DC is one more than the largest vote (deviation 7), so
    /// cohorts that know every vote know it without their coordinator.
    #[serde(default)]
    pub coord_vote: Option<u64>,
}

/// Kept on the coordinator key's committed version by the coordinator: the
/// transaction, so a late COMMIT check or vote is answered, and whether
/// every cohort (and, in the accepting DC, every remote coordinator) has
/// acknowledged the commit; until then the version is not collected and a
/// restarted coordinator sends COMMIT again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordTag {
    pub info: TxnInfo,
    pub acked: bool,
    pub remote: bool,
}

/// Every message of the protocol.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// First-round read (`multiget_slice`, Lloyd §5.3): the current
    /// version of each location, one request per server for all of the
    /// transaction's locations there, as the paper's client library sends
    /// its parallel `multiget_slice`s. `floor` is the session's logical
    /// time, which the server witnesses first (deviation 2). `attempt`
    /// names the operation attempt and each `u32` the key's place in it.
    Read {
        attempt: u32,
        keys: Vec<(u32, Key)>,
        floor: u64,
    },
    /// The answers to a [`Msg::Read`] of several keys, all valid through
    /// one LVT (the server's time when it read them). A read of one key (a
    /// get) is answered by a [`Msg::ReadReply`] instead, with no vector.
    ReadsReply {
        attempt: u32,
        reads: Vec<(u32, Read)>,
    },
    /// Second-round read (`multiget_slice_by_time`, Fig 5.5): the version
    /// visible at logical time `at`.
    ReadAt {
        attempt: u32,
        idx: u32,
        key: Key,
        at: u64,
    },
    /// Second-round reads of several columns of one row at `at`, in one
    /// request (the paper's `multiget_slice_by_time` names a row's columns
    /// together); each is answered by a [`Msg::ReadReply`] of its own, as
    /// a [`Msg::ReadAt`] would be. A row re-read in one column, a plain key,
    /// goes as a `ReadAt`.
    ReadsAt {
        attempt: u32,
        keys: Vec<(u32, Key)>,
        at: u64,
    },
    /// `Err(())`: the version visible at the requested time was collected
    /// (the transaction restarts, §5.3).
    ReadReply {
        attempt: u32,
        idx: u32,
        read: Result<Read, ()>,
        /// A second-round read the server answered only after asking a
        /// pending transaction's coordinator (`commit_check`, Lloyd §5.4.4).
        /// For measurement only (the "Eiger indirected" row of Lloyd's
        /// dissertation, Table 7.4): the client never acts on it.
        indirected: bool,
    },
    /// First-round read of a slice (`multiget_slice` with a slice
    /// predicate): one location set on the row's server, answered as one
    /// [`Read`] whose EVT is the newest EVT among the columns it covers.
    SliceRead {
        attempt: u32,
        idx: u32,
        slice: Box<SliceSpec>,
        floor: u64,
    },
    /// Second-round read of a slice at logical time `at`.
    SliceReadAt {
        attempt: u32,
        idx: u32,
        slice: Box<SliceSpec>,
        at: u64,
    },
    /// A read refused: this server does not own the key.
    Refused {
        attempt: u32,
        reason: String,
    },
    /// A write with its one-hop dependencies on operations (§5.2) and the
    /// session's logical time (deviation 2).
    PutReq {
        key: Key,
        value: Value,
        deps: Vec<Dep>,
        floor: u64,
    },
    /// A counter add (§5.2): commutative; its stamp comes back in
    /// `PutReply`.
    AddReq {
        key: Key,
        delta: i64,
        deps: Vec<Dep>,
        floor: u64,
    },
    /// The write's stamp, or why it was refused.
    PutReply {
        result: Result<Stamp, String>,
    },
    /// A non-atomic batch's writes to one server (Cassandra's
    /// `batch_mutate`, the "normal (2)" writes of Lloyd's dissertation,
    /// Table 7.4): each is a put of its own with the session's one-hop
    /// dependencies; none depends on another.
    BatchReq {
        writes: Vec<(Key, Value)>,
        deps: Vec<Dep>,
        floor: u64,
    },
    /// The batch's stamps, one per write in request order, or why it was
    /// refused (then none of its writes was applied).
    BatchReply {
        result: Result<Vec<Stamp>, String>,
    },
    /// A write-only transaction's sub-request to one participant (Lloyd
    /// §5.4, the implicit PREPARE in the accepting DC): its writes, the
    /// transaction, its one-hop dependencies and the session's time.
    WotReq {
        info: Box<TxnInfo>,
        writes: Vec<(Key, Value)>,
        deps: Vec<Dep>,
        floor: u64,
    },
    /// From the coordinator once committed: the coordinator key's stamp and
    /// the commit time; or, from any participant, why it was refused
    /// (`true`: aborted by the coordinator, after a participant's
    /// sub-request was lost; nothing is applied either way).
    WotReply {
        id: TxnId,
        result: Result<(Stamp, u64), (bool, String)>,
    },
    /// One write of a transaction shipped to an equivalent node, when
    /// prepared (in stamp order); `deps` only with the coordinator key's.
    ReplicateTxn(Box<ReplicaTxn>),
    /// Several columns of one row written by one transaction, shipped in
    /// one message (as [`Msg::ReplicateRow`]); `deps` are the
    /// transaction's, given to the coordinator key's write if it is in the
    /// row (empty otherwise), as `ReplicateTxn` carries them.
    ReplicateTxnRow {
        writes: Vec<(Key, Value, Stamp)>,
        info: Box<TxnInfo>,
        deps: Vec<Dep>,
        written_us: u64,
    },
    /// Accepting coordinator → its equivalents: the transaction committed in
    /// its DC (the remote DC commits it only after this).
    TxnCommitted {
        id: TxnId,
        coord_key: Key,
        arb: Stamp,
    },
    /// Accepting coordinator → its equivalents: the transaction aborted.
    TxnAborted {
        id: TxnId,
        coord_key: Key,
    },
    /// Coordinator → cohorts: discard the transaction's writes (deviation:
    /// a coordinator aborts a transaction whose votes never all came,
    /// because a participant lost its sub-request in a crash); or a cohort
    /// that terminated the transaction → the other participants.
    Abort {
        id: TxnId,
        coord_key: Key,
    },
    /// The answer to `TxnCommitted`.
    RemoteAck {
        id: TxnId,
        coord_key: Key,
    },
    /// Cohort → coordinator: prepared, its clock read `vote` then.
    YesVote {
        id: TxnId,
        coord_key: Key,
        vote: u64,
    },
    /// Remote cohort → coordinator: its writes arrived (§5.4, NOTIFY).
    Notify {
        id: TxnId,
        coord_key: Key,
    },
    /// Remote coordinator → cohorts, once every cohort notified and the
    /// dependencies were checked: prepare and vote. Carries the
    /// coordinator's own vote and the accepting DC's arbitration stamp, so
    /// that cohorts can commit without it (deviation 7).
    Prepare {
        id: TxnId,
        vote: u64,
        arb: Stamp,
    },
    /// Coordinator → cohorts: apply at logical time `at`.
    Commit {
        id: TxnId,
        coord_key: Key,
        at: u64,
        arb: Stamp,
    },
    Ack {
        id: TxnId,
        coord_key: Key,
    },
    /// Cohort → coordinator (§5.4.4, indirection): is the transaction
    /// committed, as of logical time `at`?
    CommitCheck {
        id: TxnId,
        coord_key: Key,
        at: u64,
    },
    /// The outcome as of `at` (`Open`: not committed, and it will commit
    /// after `at`: the coordinator's clock has passed it).
    CheckReply {
        id: TxnId,
        at: u64,
        outcome: Outcome,
    },
    /// A cohort whose coordinator has not answered for `txn_terminate_ms`
    /// → the transaction's other participants in its DC (deviation 7): what
    /// do you know of it?
    TermQuery {
        id: TxnId,
        coord_key: Key,
    },
    /// The answer to a [`Msg::TermQuery`].
    TermReply {
        id: TxnId,
        state: TermState,
    },
    /// To the witness of a transaction with one cohort (the coordinator
    /// key's server in the next DC, deviation 7): record `proposal` —
    /// committed with this arbitration stamp (from the coordinator, whose
    /// cohort does not acknowledge), or aborted (`None`, from the cohort,
    /// whose coordinator does not answer) — unless an outcome is recorded
    /// already. Answered by [`Msg::Witnessed`] with the recorded one.
    Witness {
        id: TxnId,
        coord_key: Key,
        proposal: Option<Stamp>,
    },
    /// The outcome the witness holds for the transaction.
    Witnessed {
        id: TxnId,
        coord_key: Key,
        outcome: Outcome,
    },
    /// To the witness: the participant that could still ask knows the
    /// outcome; the record may go.
    Release {
        id: TxnId,
        coord_key: Key,
    },
    /// The write shipped to an equivalent node.
    Replicate(Box<Replica>),
    /// Several columns of one row written by one non-atomic batch (one
    /// after another in it), shipped to an equivalent node in one message
    /// (Cassandra replicates a row's mutation as one message). `deps` are the batch's one-hop
    /// dependencies, checked once for the row: the receiver gives them to
    /// the row's first column and makes every other column depend on that
    /// one (a local wait, no `dep_check`), where separate `Replicate`s
    /// would each check them. A batch's single-column rows go as
    /// `Replicate`s.
    ReplicateRow {
        writes: Vec<(Key, Value, Stamp)>,
        deps: Vec<Dep>,
        written_us: u64,
    },
    /// A counter add shipped to an equivalent node; `deps` include the
    /// previous add accepted in its DC (the per-DC chain, §5.2).
    ReplicateAdd {
        key: Key,
        delta: i64,
        stamp: Stamp,
        deps: Vec<Dep>,
        written_us: u64,
    },
    /// The shared replication path: `dep_check` (its answer carries the
    /// checked server's clock) and settling.
    Path(PathMsg),
}

/// Every move of a message of over 128 bytes with the runtime's envelope is
/// a call to `memmove` (see CausalSpartanX's `Msg`). Eiger's was 168: a
/// slice predicate (136 bytes) and a transaction's description (64) are
/// boxed, and a read's counter dependencies and slice cells, nearly always
/// empty, are [`Thin`] lists. None of it changes the encoding.
const _: () = assert!(std::mem::size_of::<Msg>() <= 104, "an Eiger message moves inline");

crate::impl_message! {
    Msg {
        client: Read, ReadAt, ReadsAt, SliceRead, SliceReadAt, ReadReply, ReadsReply, Refused, PutReply, BatchReply, WotReply;
        writes: PutReq, BatchReq, WotReq, AddReq;
        peer: Replicate, ReplicateRow, ReplicateAdd, ReplicateTxn, ReplicateTxnRow, TxnCommitted, TxnAborted, Abort, RemoteAck, YesVote, Notify, Prepare, Commit, Ack,
            CommitCheck, CheckReply, TermQuery, TermReply, Witness, Witnessed, Release;
        nested: Path;
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        match self {
            Msg::Read { keys, .. } | Msg::ReadsAt { keys, .. } => {
                (keys.iter().map(|(_, k)| k.len()).max().unwrap_or(0), 0)
            }
            Msg::ReadAt { key, .. } | Msg::AddReq { key, .. } => (key.len(), 0),
            Msg::SliceRead { slice, .. } | Msg::SliceReadAt { slice, .. } => (slice.row.len(), 0),
            Msg::PutReq { key, value, deps, .. } => {
                (deps.iter().map(|d| d.key.len()).max().unwrap_or(0).max(key.len()), value.len())
            }
            Msg::BatchReq { writes, deps, .. } => {
                let keys = writes.iter().map(|(k, _)| k).chain(deps.iter().map(|d| &d.key));
                let key_len = keys.map(|k| k.len()).max().unwrap_or(0);
                (key_len, writes.iter().map(|(_, v)| v.len()).max().unwrap_or(0))
            }
            Msg::WotReq { info, writes, deps, .. } => {
                let keys = info.keys.iter().chain(writes.iter().map(|(k, _)| k)).chain(deps.iter().map(|d| &d.key));
                let key_len = keys.map(|k| k.len()).max().unwrap_or(0).max(info.coord_key.len());
                (key_len, writes.iter().map(|(_, v)| v.len()).max().unwrap_or(0))
            }
            _ => (0, 0),
        }
    }
    fn key_hint(&self) -> Option<&[u8]> {
        match self {
            Msg::ReadAt { key, .. }
            | Msg::PutReq { key, .. }
            | Msg::AddReq { key, .. }
            | Msg::ReplicateAdd { key, .. } => Some(key),
            Msg::Replicate(r) => Some(&r.key),
            Msg::ReplicateTxn(r) => Some(&r.key),
            _ => None,
        }
    }
    fn payload_bytes(&self) -> usize {
        match self {
            Msg::Read { keys, .. } | Msg::ReadsAt { keys, .. } => keys.iter().map(|(_, k)| k.len()).sum(),
            Msg::ReplicateRow { writes, .. } | Msg::ReplicateTxnRow { writes, .. } => {
                writes.iter().map(|(k, v, _)| k.len() + v.len()).sum()
            }
            Msg::ReadAt { key, .. } | Msg::AddReq { key, .. } => key.len(),
            Msg::ReplicateAdd { key, .. } => key.len() + 8,
            Msg::SliceRead { slice, .. } | Msg::SliceReadAt { slice, .. } => {
                slice.row.len() + slice.family.len() + slice.start.len() + slice.stop.len()
            }
            Msg::ReadsReply { reads, .. } => payload(reads.iter().filter_map(|(_, r)| r.value.as_deref())),
            Msg::ReadReply { read, .. } => {
                payload(read.iter().filter_map(|r| r.value.as_deref()))
                    + read.iter().flat_map(|r| &r.cells).map(|c| c.column.len() + c.value.len()).sum::<usize>()
            }
            Msg::PutReq { key, value, .. } => key.len() + value.len(),
            Msg::Replicate(r) => r.key.len() + r.value.len(),
            Msg::ReplicateTxn(r) => r.key.len() + r.value.len(),
            Msg::WotReq { writes, .. } | Msg::BatchReq { writes, .. } => {
                writes.iter().map(|(k, v)| k.len() + v.len()).sum()
            }
            _ => 0,
        }
    }
}

impl Msg {
    /// The write-only transaction a message between servers is about.
    pub fn txn_id(&self) -> Option<TxnId> {
        match self {
            Msg::ReplicateTxn(r) => Some(r.info.id),
            Msg::ReplicateTxnRow { info, .. } => Some(info.id),
            Msg::TxnCommitted { id, .. }
            | Msg::TxnAborted { id, .. }
            | Msg::Abort { id, .. }
            | Msg::RemoteAck { id, .. }
            | Msg::YesVote { id, .. }
            | Msg::Notify { id, .. }
            | Msg::Prepare { id, .. }
            | Msg::Commit { id, .. }
            | Msg::Ack { id, .. }
            | Msg::CommitCheck { id, .. }
            | Msg::CheckReply { id, .. }
            | Msg::TermQuery { id, .. }
            | Msg::TermReply { id, .. }
            | Msg::Witness { id, .. }
            | Msg::Witnessed { id, .. }
            | Msg::Release { id, .. } => Some(*id),
            // Every other kind listed, so that a new transaction message
            // cannot be left out by a catch-all (advance_txns would then
            // see it only on the retry timer).
            Msg::Read { .. }
            | Msg::ReadAt { .. }
            | Msg::ReadsAt { .. }
            | Msg::SliceRead { .. }
            | Msg::SliceReadAt { .. }
            | Msg::ReadReply { .. }
            | Msg::ReadsReply { .. }
            | Msg::Refused { .. }
            | Msg::PutReply { .. }
            | Msg::BatchReply { .. }
            | Msg::WotReply { .. }
            | Msg::PutReq { .. }
            | Msg::BatchReq { .. }
            | Msg::WotReq { .. }
            | Msg::AddReq { .. }
            | Msg::Replicate(_)
            | Msg::ReplicateRow { .. }
            | Msg::ReplicateAdd { .. }
            | Msg::Path(_) => None,
        }
    }
}

/// What [`Msg::Replicate`] carries.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Replica {
    pub key: Key,
    pub value: Value,
    pub stamp: Stamp,
    pub deps: Vec<Dep>,
    pub written_us: u64,
}

/// What [`Msg::ReplicateTxn`] carries.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReplicaTxn {
    pub key: Key,
    pub value: Value,
    pub stamp: Stamp,
    pub info: TxnInfo,
    pub deps: Vec<Dep>,
    pub written_us: u64,
}

impl From<PathMsg> for Msg {
    fn from(p: PathMsg) -> Msg {
        Msg::Path(p)
    }
}

/// Where a stored version stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    /// A replicated write waiting for its dependency checks.
    Pending { deps: Vec<Dep> },
    /// Applied here at logical time `evt` (its EVT, §5.3) and at `at_us`
    /// of this node's clock (for collection).
    Committed { evt: u64, at_us: u64 },
    /// A write of a write-only transaction not committed here yet (§5.4).
    Txn(Box<TxnPart>),
    /// A write of an aborted transaction (never visible), or, on a
    /// coordinator key, a coordinator's record that it aborted the
    /// transaction. `remote`: a remote DC's copy, still to go through the
    /// replication path (as a write nobody can depend on).
    Aborted { id: TxnId, remote: bool },
    /// On a coordinator key at the witness of a one-cohort transaction
    /// accepted in another DC (deviation 7): the outcome it recorded
    /// (committed or aborted, never open), kept until `released`. Never
    /// visible.
    Witness { id: TxnId, outcome: Outcome, released: bool },
}

/// What a participant answers a termination (deviation 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TermState {
    /// The outcome, applied here (committed: at this time, with this
    /// arbitration stamp).
    Known(Outcome),
    /// Accepting DC: prepared, outcome unknown; promised to take it from
    /// the termination only (see [`Phase::Prepared`]).
    Promised,
    /// Remote DC: prepared, with this vote.
    Voted(u64),
    /// No record of the transaction here: not prepared (yet), or finished
    /// and forgotten. Never taken as a refusal.
    Unknown,
}

/// What a coordinator knows of a transaction's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Not decided: it commits after the time the question was asked at.
    Open,
    /// Committed at this time, with this arbitration stamp.
    Committed(u64, Stamp),
    Aborted,
}

/// A stored version: ⟨stamp, value⟩ and its state. `collected_below`: older
/// versions of the key were collected, so nothing is known of the key
/// before this version's EVT (a read at such a time restarts).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    pub stamp: Stamp,
    pub state: State,
    pub collected_below: bool,
    /// On the coordinator key's version at the coordinator: the
    /// transaction it committed.
    #[serde(default)]
    pub coord: Option<Box<CoordTag>>,
    /// A transaction's write: the transaction's place in last-writer-wins
    /// order, the same for all its writes in every DC — its commit time in
    /// the accepting DC with the coordinator's id (the paper's single
    /// timestamp per transaction, §5.4). `None`: the stamp.
    #[serde(default)]
    pub arb: Option<Stamp>,
    /// A counter column's add (§5.2). Its `arb` is, once applied, this
    /// node's application order (its EVT with this node's id): the newest
    /// applied version carries the running total.
    #[serde(default)]
    pub counter: Option<Box<Counter>>,
}

impl Version {
    /// A version as a write first stores it: not a coordinator key's, no
    /// transaction arbitration yet, not a counter's add.
    pub(super) fn new(value: Value, stamp: Stamp, state: State) -> Version {
        Version { value, stamp, state, collected_below: false, coord: None, arb: None, counter: None }
    }

    /// The EVT of a readable version: committed, or a remote DC's copy of
    /// a transaction's write whose commit time is decided (readable at it,
    /// though it may still wait in the replication path to count as
    /// committed for dependency checks).
    pub(super) fn evt(&self) -> Option<u64> {
        match &self.state {
            State::Committed { evt, .. } => Some(*evt),
            State::Txn(p) => match p.phase {
                Phase::Decided { at } => Some(at),
                Phase::Held | Phase::Prepared { .. } | Phase::Committing { .. } => None,
            },
            State::Pending { .. } | State::Aborted { .. } | State::Witness { .. } => None,
        }
    }

    /// Its place in last-writer-wins order (what reads compare).
    pub(super) fn arb(&self) -> Stamp {
        self.arb.unwrap_or(self.stamp)
    }

    /// Whether reads may return it.
    pub(super) fn readable(&self) -> bool {
        self.evt().is_some()
    }

    /// The transaction write this version is, while not committed here.
    pub(super) fn part(&self) -> Option<&TxnPart> {
        match &self.state {
            State::Txn(p) => Some(p),
            _ => None,
        }
    }
}

crate::impl_versioned!(Version, Stamp = stamp);

impl DepVersion for Version {
    /// A transaction's write accepted here is this node's own write: the
    /// replication path does not queue it (`committed` below still says
    /// it is not).
    fn pending_checks(&self) -> Option<&[Dep]> {
        match &self.state {
            State::Pending { deps } => Some(deps),
            State::Txn(p) if p.remote => Some(&p.deps),
            State::Aborted { remote: true, .. } => Some(&[]),
            State::Committed { .. } | State::Txn(_) | State::Aborted { .. } | State::Witness { .. } => None,
        }
    }
    fn committed(&self) -> bool {
        matches!(self.state, State::Committed { .. })
    }
    fn held(&self) -> bool {
        matches!(&self.state, State::Txn(p) if p.remote)
    }
    fn commit(self, _now_us: u64) -> Self {
        unreachable!("Eiger commits with a logical time: commit_at")
    }
    /// A replicated write applied here: its EVT is this node's logical time
    /// now, later than its stamp (§5.3: "in remote DCs EVT > timestamp").
    /// A transaction's write commits at the time its coordinator decided
    /// (one EVT for the whole transaction in this DC, §5.4).
    fn commit_at(self, now_us: u64, lamport: u64) -> Self {
        let evt = match &self.state {
            State::Committed { .. } | State::Aborted { .. } | State::Witness { .. } => return self,
            State::Txn(p) => match p.phase {
                Phase::Decided { at } => at,
                _ => lamport,
            },
            State::Pending { .. } => lamport,
        };
        Version { state: State::Committed { evt, at_us: now_us }, ..self }
    }
}
