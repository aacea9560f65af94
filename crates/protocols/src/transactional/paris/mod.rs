//! # PaRiS and BPR: causally consistent transactions with non-blocking reads and partial replication
//!
//! Spirovska, Didona and Zwaenepoel, *PaRiS: Causally Consistent
//! Transactions with Non-blocking Reads and Partial Replication* (ICDCS
//! 2019). Transactional causal consistency over a sharded store in which
//! each partition lives in R of the M DCs:
//!
//! - **Universal Stable Time (UST).** Each partition keeps a version
//!   vector over the DCs storing it (VV[r], the version clock, is what it
//!   has applied; VV[i] what it has received from replica i). A tree
//!   inside each DC takes the minimum of every entry of every partition
//!   (the DC's GST); the roots of the DCs exchange their GSTs and push the
//!   minimum down: the UST, at or below which every version is installed
//!   at every replica of its partition (§IV-B, Alg. 4).
//! - **Non-blocking reads.** A transaction's snapshot is max(UST at its
//!   coordinator, the client's ust_c); a read slice goes to the nearest DC
//!   storing the partition, possibly another DC, and returns the freshest
//!   version at or below the snapshot without waiting for anything
//!   (Alg. 2, Alg. 3).
//! - **Client write cache.** A client keeps its writes the UST does not
//!   cover yet (WC_c) and reads them from there, which gives
//!   read-your-writes while the snapshot lags; a write leaves the cache
//!   once a snapshot the client read at covers it (Alg. 1).
//! - **Commit by 2PC** at one replica per written partition, with hybrid
//!   clocks: each cohort proposes pt = max(HLC, ust) after HLC ← max(Clock,
//!   ht + 1, HLC + 1), where ht is the client's highest timestamp seen; ct
//!   is the largest proposal. Cohorts apply committed transactions in ct
//!   order every Δ_R below ub = min(prepared) − 1 (or the clock when none
//!   is prepared), replicate each ct group to the partition's other
//!   replicas, and heartbeat when idle (Alg. 4).
//! - **GC** keeps, per key, the newest version at or below S_old (the
//!   oldest snapshot a running transaction reads at, or the UST) and
//!   every newer one; S_old is aggregated with the UST.
//!
//! **BPR** (§V, the paper's baseline) is the same code with blocking
//! reads: the snapshot is max(the client's highest timestamp seen, the
//! coordinator's clock), and a read slice waits until the partition has
//! received and applied everything up to it (every VV entry at or above
//! it). The wait is reported as a [`Blocked`](causeway_core::Observation)
//! observation, `read_wait`, which the simulator's metrics summarise (mean
//! and tail per kind) and the network runtime exports.
//!
//! Operations: GET, PUT, ROT, the one-shot read-write transaction
//! [`Op::Txn`](causeway_core::Op::Txn) (reads from one snapshot, then
//! atomic writes), and interactive transactions (START, any number of
//! READ rounds, COMMIT as separate steps: deviation 11).
//!
//! ## Deviations, and why
//!
//! 1. **One-shot transactions in one request.** START, READ and COMMIT of
//!    Alg. 1–2 travel as one `ReadReq` or `TxReq`, and the coordinator
//!    runs them back to back; a session's operation is one round trip to
//!    its coordinator. The client consults its cache *after* the
//!    coordinator answered, once the snapshot is known: it prunes the
//!    cache to the writes above max(ust_c, snapshot) and answers a read
//!    key it holds from there. This is Alg. 1's order (prune at START,
//!    then WS, RS, WC, store) with the same outcome: every write left in
//!    the cache is above the snapshot, hence newer than any version read
//!    there.
//! 2. **Hybrid clock as the listing writes it**: a scalar µs timestamp
//!    (max(Clock, ht + 1, HLC + 1)), not an ⟨l, c⟩ pair.
//! 3. **The UST aggregation.** Δ_G and Δ_U are one period: each tick a
//!    node sends its subtree's minimum (of every VV entry) up the DC's
//!    tree ([`StableTree`](crate::stabilization::stable_tree)); the root
//!    sends the DC's GST to the other DCs' roots and, once it has heard
//!    from all of them, pushes min(own GST, theirs) down as the UST. The
//!    paper keeps a GSV vector per DC (Alg. 4 line 39) but its prose
//!    exchanges a scalar, and the UST is the minimum of everything either
//!    way. Alg. 4 line 39 indexes VV by DC; here VV is indexed by replica,
//!    the DCs storing the partition in ascending order.
//! 4. **Errata of Alg. 4.** Committed transactions with ct ≤ ub (not
//!    ct < ub) are applied, and the version clock is written at the
//!    replica's index r (not m). Whenever VV[r] is advanced to ub, HLC is
//!    raised to ub, so every later proposal (≥ HLC + 1) is above it; else a
//!    prepare in the same clock µs could propose pt = ub ≤ VV[r] and break
//!    Prop. 2. Commit goes to each cohort p_i^j (Alg. 2 line 29 says
//!    p_n^m).
//! 5. **Committed writes are stored at commit time**, stamped ct, and
//!    applied (replicated, reported visible, VV[r] advanced past them) at
//!    the next Δ_R. No read can see them early: a snapshot is at most the
//!    UST ≤ VV[r] < ct (PaRiS), or waits for VV[r] ≥ snapshot (BPR). It
//!    makes them durable in the store's log when the client is answered.
//! 6. **GC at write time.** A version older than the newest one at or
//!    below S_old is collected when its key is written (the store's
//!    `insert_collecting`); a key never written again keeps one superseded
//!    version. S_old is the minimum over every node of min(ust, the
//!    snapshots of the transactions it coordinates), aggregated with the
//!    UST; a new snapshot is at least its coordinator's UST, so never
//!    below it.
//! 7. **Coordinator per operation**: the server in the session's DC of the
//!    first key's partition, else one chosen by it, rather than one fixed
//!    partition for the session (§IV-B says a random one).
//! 8. **Placement check.** Requests carry a hash of the client's view of
//!    the topology (DCs, partitions, replication); a coordinator refuses a
//!    request from a client whose view differs (a misconfigured client
//!    would otherwise be routed right by the coordinator and never learn).
//! 9. **BPR's snapshot is also at least the coordinator's UST**, so it
//!    never reads below the GC horizon (a coordinator whose clock lags the
//!    UST would otherwise pick an older snapshot than PaRiS).
//! 10. **Crash and restart.** The paper leaves 2PC's fault tolerance to
//!     replication (§IV-D: "a failed server blocks UST progress until a
//!     backup takes over"); here any node may crash and restart from its
//!     journal at any moment, coordinator or cohort:
//!     - *A cohort's prepare is durable before its proposal leaves.* The
//!       entry of Prepared_n^m (the transaction, pt, its writes, the
//!       coordinator and its context) goes into the store's durable
//!       metadata in the turn that proposes, and the node core releases a
//!       turn's messages only once its records are durable. A restarted
//!       cohort rebuilds Prepared_n^m with its version clock and HLC from
//!       there, so VV[r] stays below every proposal until the outcome is
//!       known (Alg. 4 line 8), and puts its local versions above VV[r]
//!       back in Committed, to be applied and replicated again (a replica
//!       ignores what it already holds).
//!     - *The coordinator's decision is durable before anyone hears of
//!       it.* Deciding is one turn: COMMIT to every other cohort, its own
//!       writes stored, the client's answer. The node core journals each
//!       sequenced message in the sender's outbox with the turn, releases
//!       nothing of the turn before that is durable, resends what a peer
//!       has not handled after either end restarts, and forgets a message
//!       once its peer has handled it: that outbox is the decision record
//!       — durable before any COMMIT or answer leaves, resent after a
//!       restart, collected once every cohort acknowledged — so none is
//!       kept beside it.
//!     - *Presumed abort for a coordinator lost before deciding* (Mohan,
//!       Lindsay and Obermarck, the Presumed Abort protocol): its context
//!       is volatile, the client never heard "committed" (its request ends
//!       at the runtime's deadline, outcome unknown), and no COMMIT was
//!       sent. A cohort whose entry has waited `prepared_query_us` asks
//!       the coordinator (`OutcomeQuery`, one at a time per entry), which
//!       answers `Undecided` while the context is in its memory and
//!       `Aborted` otherwise; a proposal for a transaction it does not
//!       know is answered `Aborted` at once, and a restarted node drops
//!       the entries it prepared as its own coordinator. On `Aborted` the
//!       cohort drops the entry and its version clock moves on. No such
//!       transaction is ever decided: a coordinator numbers its contexts
//!       from 0 again after a restart, so a proposal names its transaction
//!       too and counts only for that transaction's context. "Committed"
//!       is never an answer: a decided transaction's COMMIT left in the
//!       deciding turn, over the same FIFO channel as any later answer,
//!       and reaches the cohort first.
//!     - *A version clock is never reissued.* VV[r], the HLC and the UST
//!       are journaled with each apply tick without a sync of their own
//!       (an idle partition would otherwise sync every Δ_R), so a crash of
//!       the machine can lose the record of a heartbeat already sent. The
//!       journal also holds a synced ceiling 100 ms above the HLC,
//!       raised (and synced before the turn's messages leave) whenever the
//!       HLC comes within 50 ms of it; a restarted partition's HLC
//!       starts at the ceiling, so no proposal falls at or below a version
//!       clock a peer was told, even when the machine comes back with its
//!       clock set back. The price: a sync per 50 ms of clock on an
//!       otherwise idle partition, and commits a partition coordinates just
//!       after a quick restart up to 100 ms ahead of the clocks (visible
//!       when the UST reaches them; BPR's reads of such snapshots wait
//!       that much).
//!
//!     Interactive transactions' contexts stay volatile (deviation 11). A
//!     node lost for good still freezes the UST everywhere (no backup
//!     takes over here).
//! 11. **Interactive transactions** run Alg. 1–2 as the paper writes them,
//!     one request per step: START (`Begin`) fixes the snapshot at a
//!     coordinator, which keeps the context; each READ (`TxRead`) and the
//!     COMMIT (`TxCommit`) go to that coordinator. WRITE never leaves the
//!     client: the write set is buffered and read back there
//!     ([`TxnBuffer`](causeway_core::TxnBuffer)), and the client's cache
//!     answers a read of a key it wrote in an earlier transaction, as for
//!     one-shot reads. The open snapshot counts in the coordinator's
//!     oldest snapshot, so GC keeps what it can read. Two bounds the paper
//!     does not need: a context whose client has been silent for
//!     `txn_idle_timeout_us` is dropped (a vanished client would otherwise
//!     pin the GC horizon for ever), and at most `max_open_txns` are open
//!     per coordinator. Contexts are not durable: after a coordinator
//!     restarts, the transaction's next step is refused as aborted.

mod client;
mod config;
mod journal;
mod msg;
mod server;
#[cfg(test)]
mod tests;

pub use client::*;
pub use config::*;
pub use msg::*;
pub use server::*;

use causeway_core::{ClientCtx, Faults, LivenessEnv, NodeCtx, OpKind, Protocol, Topology};

/// What both accept: any replication, one server per partition per DC.
fn validate(cfg: &Config, topology: &Topology) -> Result<(), String> {
    cfg.check()?;
    if topology.spec().replicas_per_partition != 1 {
        return Err(
            "paris and bpr run one server per partition per DC: topology.replicas_per_partition must be 1".into()
        );
    }
    Ok(())
}

/// Hybrid clocks: skew, drift and jumps either way are survived (the HLC
/// never goes back); crash-restart too (deviation 10).
const TOLERATES: Faults = Faults::ALL;

/// Torture asks about prepared transactions soon, so that a run of a few
/// seconds resolves orphans and meets "undecided" answers too.
fn torture_params(draw: &mut dyn FnMut(u64, u64) -> u64) -> Vec<(&'static str, u64)> {
    vec![("prepared_query_us", draw(20, 400) * 1_000)]
}

/// PaRiS.
pub struct Paris;

impl Protocol for Paris {
    const NAME: &'static str = "paris";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put, OpKind::Rot, OpKind::Txn, OpKind::Interactive];
    const CAUSAL: bool = true;
    const MUTANTS: &'static [&'static str] = &["mutant_read_above_ust", "mutant_fresh_snapshot_per_step"];
    const TOLERATES: Faults = TOLERATES;
    /// Reads never wait and a commit waits only for the cohorts it writes
    /// to: a DC's clients go on while another DC is cut off (the UST
    /// freezes, the cache keeps their own writes in sight).
    const AVAILABLE_UNDER_PARTITIONS: bool = true;
    const PARTIAL_REPLICATION: bool = true;
    const SERVES_ON_AFTER_PERMANENT_LOSS: bool = false;
    type Msg = Msg;
    type Version = Version;
    type Config = Config;
    type Server = ParisServer;
    type Client = ParisClient;

    /// A transaction waits for at most a read round and a prepare round,
    /// each possibly to another DC.
    fn liveness_bound_us(_cfg: &Config, env: &LivenessEnv) -> u64 {
        3 * env.max_rtt_us + env.max_clock_skew_us + 1_000_000
    }
    fn torture_params(draw: &mut dyn FnMut(u64, u64) -> u64) -> Vec<(&'static str, u64)> {
        torture_params(draw)
    }
    fn validate(cfg: &Config, topology: &Topology) -> Result<(), String> {
        validate(cfg, topology)
    }
    fn server(cfg: &Config, ctx: NodeCtx) -> ParisServer {
        ParisServer::new(cfg, ctx, false)
    }
    fn client(cfg: &Config, ctx: ClientCtx) -> ParisClient {
        ParisClient::new(cfg, ctx, false)
    }
}

/// BPR: PaRiS with blocking reads at a fresher snapshot (§V).
pub struct Bpr;

impl Protocol for Bpr {
    const NAME: &'static str = "bpr";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put, OpKind::Rot, OpKind::Txn, OpKind::Interactive];
    const CAUSAL: bool = true;
    const MUTANTS: &'static [&'static str] = &["mutant_skip_read_wait"];
    const TOLERATES: Faults = TOLERATES;
    const PARTIAL_REPLICATION: bool = true;
    const SERVES_ON_AFTER_PERMANENT_LOSS: bool = false;
    type Msg = Msg;
    type Version = Version;
    type Config = Config;
    type Server = ParisServer;
    type Client = ParisClient;

    /// A read waits for every replica's version clock to pass its
    /// snapshot: a WAN trip, a clock skew and a few Δ_R, on top of PaRiS's
    /// rounds; and, after a coordinator crashed, for an orphaned prepare
    /// to be resolved (`prepared_query_us`, a Δ_R to notice, a round trip
    /// to ask).
    fn liveness_bound_us(cfg: &Config, env: &LivenessEnv) -> u64 {
        5 * env.max_rtt_us + 2 * env.max_clock_skew_us + 5 * cfg.apply_interval_us + cfg.prepared_query_us + 1_000_000
    }
    fn torture_params(draw: &mut dyn FnMut(u64, u64) -> u64) -> Vec<(&'static str, u64)> {
        torture_params(draw)
    }
    fn validate(cfg: &Config, topology: &Topology) -> Result<(), String> {
        validate(cfg, topology)
    }
    fn server(cfg: &Config, ctx: NodeCtx) -> ParisServer {
        ParisServer::new(cfg, ctx, true)
    }
    fn client(cfg: &Config, ctx: ClientCtx) -> ParisClient {
        ParisClient::new(cfg, ctx, true)
    }
}
