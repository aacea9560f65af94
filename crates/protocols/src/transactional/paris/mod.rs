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
//! 10. **Failures.** The paper leaves 2PC fault tolerance to replication
//!     (§IV-D). Here a restarted node recovers its version clock and HLC
//!     from the store's journal and re-applies the stored local versions
//!     above its version clock, but a prepared, not yet committed
//!     transaction is lost with a crash, and a coordinator lost between
//!     prepare and commit leaves its cohorts' `Prepared` entry for ever,
//!     which holds back their version clocks and so the UST. Hence
//!     crash-restart is not in `TOLERATES`, and a permanently lost node
//!     freezes the UST everywhere (as the paper says: "a failed server
//!     blocks UST progress until a backup takes over").
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
/// never goes back); crash-restart is not (deviation 10).
const TOLERATES: Faults = Faults { crash_restart: false, ..Faults::ALL };

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
    /// rounds.
    fn liveness_bound_us(cfg: &Config, env: &LivenessEnv) -> u64 {
        4 * env.max_rtt_us + 2 * env.max_clock_skew_us + 4 * cfg.apply_interval_us + 1_000_000
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
