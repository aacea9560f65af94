//! # COPS: causal+ from explicit one-hop dependencies
//!
//! COPS (Lloyd, Freedman, Kaminsky, Andersen, SOSP 2011) as seed 001
//! describes it (dissertation Ch. 4 and §6.1; notes 001 §2). Where the
//! stabilization protocols (GentleRain, CausalSpartanX) make a remote version
//! visible once a stable time passes it, COPS names each write's
//! dependencies and checks them, one by one, before applying it:
//!
//! - **Timestamps** (§2.5): Lamport clocks, a version's timestamp
//!   ([`Stamp`]) carrying the stamping node's id in its low bits, so stamps
//!   are unique and order each key's versions last-writer-wins consistently
//!   with causality.
//! - **Client context** (§2.3): ⟨key, stamp⟩ of everything read since the
//!   session's last write, plus that write. A write sends the context as its
//!   *one-hop* dependencies, then the context shrinks to the write alone:
//!   what the write depended on is now covered through it.
//! - **`write_after`** (§2.6): the key's server in the client's DC stamps
//!   the write above every dependency, applies it, acknowledges, and queues
//!   it for its equivalents in the other DCs.
//! - **`dep_check`** (§2.7): an equivalent receiving the write asks, for each
//!   dependency, the local server owning that key whether it has committed
//!   that version, waiting until it has; then it commits the write. Only the
//!   replication path ever waits: reads and local writes never block.
//!
//! - **Never-depend** (§6.1): once a version is committed in every DC
//!   ([`settle`](crate::settle)) it is flagged, and a client that reads it
//!   adds nothing to its context, so contexts stay at a few entries even
//!   when a session reads many keys between writes.
//!
//! COPS has no read-only transactions ([`cops_gt`](crate::cops_gt) adds
//! them), so [`Op::Rot`] fails as unsupported.
//!
//! ## Choices and deviations from the paper
//!
//! 1. **What satisfies a `dep_check`**, durability and retries: see
//!    [`dep_check`](crate::dep_check), shared with COPS-GT.
//! 2. **The context keeps one stamp per key *and origin***, not per key
//!    (§2.3 says "the most recent timestamp of each key"). A session that
//!    read x@5 (accepted in DC A, depending on y@3) and then a concurrent
//!    x@7 (accepted in DC B) depends on both: keeping only x@7, its next
//!    write could commit in a third DC where x@5, and so y@3, have not
//!    arrived, and a reader there would see the write with an old y.
//!    Versions of one key from one origin commit in stamp order, so the
//!    newest per origin covers the rest: at most one entry per DC per key.
//! 3. **Full replication, one server per partition** ([`Protocol::validate`]).
//! 4. **One stored version per key** (§2.2) *plus* pending replicated
//!    writes newer than it, which wait for their checks in the store so that
//!    a crash cannot lose them.
//! 5. **Measurement**: a replicate carries the origin's clock reading
//!    (`written_us`, not stored) so the network runtime can estimate
//!    visibility latency; the simulator uses true time. Each client write
//!    reports its dependency count as the sample `deps_per_write`.
//!
//! Clients are trusted library code, as in the paper: a forged dependency on
//! a version that was never written stalls replication from its origin.

use crate::common::{client_server_for, fail_unsupported, payload};
use crate::dep_check::{Dep, DepNode, DepVersion, PathMsg, Stamp, validate_topology};
use crate::settle::Settle;
use causeway_core::{
    Client, ClientCtx, ClientEnv, ClientId, Key, Message, NodeCtx, NodeId, Observation, Op, OpError, OpKind, OpResult,
    Protocol, Server, ServerEnv, Topology, Value, Versioned,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub struct Cops;

/// COPS's one tunable, and a deliberately broken variant for tests.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Re-send a `dep_check` unanswered for this long (§2.7 step 4).
    pub dep_check_retry_ms: u64,
    /// How often servers exchange what they have committed, to flag
    /// versions committed in every DC never-depend (§6.1; COPS: 10×/s).
    pub settle_interval_ms: u64,
    /// Test only: commit replicated writes without checking their
    /// dependencies, which the checker and torture must catch.
    pub mutant_skip_dep_check: bool,
    /// Test only: restart without recovering pending replicated writes and
    /// the committed-through table, which crash-restart torture must catch.
    pub mutant_skip_recovery: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            dep_check_retry_ms: 1_000,
            settle_interval_ms: 100,
            mutant_skip_dep_check: false,
            mutant_skip_recovery: false,
        }
    }
}

impl Protocol for Cops {
    const NAME: &'static str = "cops";
    const OPS: &'static [OpKind] = &[OpKind::Get, OpKind::Put];
    const CAUSAL: bool = true;
    /// Lamport clocks: physical clock faults do not matter; the pending
    /// replicated writes and the committed-through table are journaled and
    /// recovered on `on_start`.
    const TOLERATES: causeway_core::Faults = causeway_core::Faults::ALL;
    /// GET and PUT are served by the client's own DC (seed 001 §3).
    const AVAILABLE_UNDER_PARTITIONS: bool = true;
    type Msg = Msg;
    type Version = Version;
    type Config = Config;
    type Server = CopsServer;
    type Client = CopsClient;
    /// Client operations never wait for remote DCs.
    fn liveness_bound_us(_cfg: &Config, env: &causeway_core::LivenessEnv) -> u64 {
        10_000 + 8 * env.intra_dc_rtt_us
    }

    fn validate(cfg: &Config, topology: &Topology) -> Result<(), String> {
        if cfg.dep_check_retry_ms == 0 || cfg.settle_interval_ms == 0 {
            return Err("dep_check_retry_ms and settle_interval_ms must be at least 1".into());
        }
        validate_topology("cops", topology)
    }

    fn server(cfg: &Config, ctx: NodeCtx) -> CopsServer {
        let mut node = DepNode::new(&ctx);
        node.skip_checks = cfg.mutant_skip_dep_check;
        node.skip_recovery = cfg.mutant_skip_recovery;
        node.retry_us = cfg.dep_check_retry_ms * 1_000;
        let settle_us = cfg.settle_interval_ms * 1_000;
        CopsServer { node, settle: Settle::new(0, settle_us), settle_us }
    }

    fn client(_cfg: &Config, ctx: ClientCtx) -> CopsClient {
        CopsClient { ctx, context: BTreeMap::new(), pending: None }
    }
}

/// Every message of the protocol.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// `read_by_time(key, LATEST)`.
    GetReq { key: Key },
    /// The latest version, or `Stamp::NONE` and no value; `never_depend`
    /// when it is committed in every DC (§6.1).
    GetReply { value: Option<Value>, stamp: Stamp, never_depend: bool },
    /// `write_after(key, value, one_hop)`.
    PutReq { key: Key, value: Value, deps: Vec<Dep> },
    /// The write's stamp, or why it was refused.
    PutReply { result: Result<Stamp, String> },
    /// `write_after(key, value, one_hop, stamp)` to an equivalent node.
    Replicate { key: Key, value: Value, stamp: Stamp, deps: Vec<Dep>, written_us: u64 },
    /// The shared replication path: `dep_check` and settling.
    Path(PathMsg),
}

impl Message for Msg {
    fn kind(&self) -> &'static str {
        match self {
            Msg::GetReq { .. } => "get_req",
            Msg::GetReply { .. } => "get_reply",
            Msg::PutReq { .. } => "put_req",
            Msg::PutReply { .. } => "put_reply",
            Msg::Replicate { .. } => "replicate",
            Msg::Path(p) => p.kind(),
        }
    }
    fn is_client(&self) -> bool {
        matches!(self, Msg::GetReq { .. } | Msg::GetReply { .. } | Msg::PutReq { .. } | Msg::PutReply { .. })
    }
    fn max_key_value_len(&self) -> (usize, usize) {
        match self {
            Msg::GetReq { key } => (key.len(), 0),
            Msg::PutReq { key, value, deps } => {
                (deps.iter().map(|d| d.key.len()).max().unwrap_or(0).max(key.len()), value.len())
            }
            _ => (0, 0),
        }
    }
    fn payload_bytes(&self) -> usize {
        // Dependency keys are metadata: they name other writes.
        match self {
            Msg::GetReq { key } => key.len(),
            Msg::GetReply { value, .. } => payload(value.iter().map(|v| &v[..])),
            Msg::PutReq { key, value, .. } | Msg::Replicate { key, value, .. } => key.len() + value.len(),
            _ => 0,
        }
    }
}

impl From<PathMsg> for Msg {
    fn from(p: PathMsg) -> Msg {
        Msg::Path(p)
    }
}

/// A stored version: ⟨stamp, value⟩ (§2.2), and while it is a replicated
/// write waiting for its checks, the dependencies to check. Its never-depend
/// flag (§6.1) is not stored: it is "stamp ≤ what its origin has settled",
/// one comparison at read time and no rewrite of every version.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Version {
    pub value: Value,
    pub stamp: Stamp,
    pub pending: Option<Vec<Dep>>,
}

impl Versioned for Version {
    type Order = Stamp;
    fn order(&self) -> Stamp {
        self.stamp
    }
    fn value(&self) -> &Value {
        &self.value
    }
}

impl DepVersion for Version {
    fn pending_checks(&self) -> Option<&[Dep]> {
        self.pending.as_deref()
    }
    fn commit(self, _now_us: u64) -> Self {
        Version { pending: None, ..self }
    }
}

// ---------------------------------------------------------------- client

/// A session (the paper's actor): its context of one-hop dependencies.
pub struct CopsClient {
    ctx: ClientCtx,
    /// (key, origin) → the newest stamp of it read or written since the
    /// last write (deviation 2).
    context: BTreeMap<(Key, NodeId), Stamp>,
    pending: Option<Pending>,
}

enum Pending {
    Get { key: Key },
    Put { key: Key },
}

impl Client for CopsClient {
    type Msg = Msg;

    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        match op {
            // read(key): read_by_time(key, LATEST) at the local owner (§2.8).
            Op::Get { key } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                self.pending = Some(Pending::Get { key: key.clone() });
                env.send(to, Msg::GetReq { key });
            }
            // write(key, value): the context is the write's one-hop
            // dependencies (§2.6 step 1).
            Op::Put { key, value } => {
                let Some(to) = client_server_for(&self.ctx, env, &key) else { return };
                let deps = self.context.iter().map(|((k, _), &stamp)| Dep { key: k.clone(), stamp }).collect();
                self.pending = Some(Pending::Put { key: key.clone() });
                env.send(to, Msg::PutReq { key, value, deps });
            }
            other => fail_unsupported(env, other.kind()),
        }
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, _from: NodeId, msg: Msg) {
        match (self.pending.take(), msg) {
            (Some(Pending::Get { key }), Msg::GetReply { value, stamp, never_depend }) => {
                // A version committed everywhere constrains no write (§6.1).
                if value.is_some() && !never_depend {
                    let e = self.context.entry((key, stamp.origin())).or_default();
                    *e = (*e).max(stamp);
                }
                env.complete(OpResult::Get(value));
            }
            // Clear the context and repopulate it with the write alone
            // (§2.3): it covers everything it depended on.
            (Some(Pending::Put { key }), Msg::PutReply { result }) => match result {
                Ok(stamp) => {
                    self.context.clear();
                    self.context.insert((key, stamp.origin()), stamp);
                    env.complete(OpResult::Put);
                }
                Err(why) => env.complete(OpResult::Failed(OpError::BadRequest(why))),
            },
            (p, _) => self.pending = p, // a stray reply: ignore it
        }
    }
}

// ---------------------------------------------------------------- server

pub struct CopsServer {
    node: DepNode,
    /// Which writes are committed everywhere ([`crate::settle`]).
    settle: Settle,
    settle_us: u64,
}

/// Re-send unanswered checks.
const RETRY_TIMER: u64 = 0;
/// Exchange what is committed; flag settled versions.
const SETTLE_TIMER: u64 = 1;

impl Server for CopsServer {
    type Msg = Msg;
    type Version = Version;

    fn on_start(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        if !self.node.serving {
            return;
        }
        self.node.recover(env);
        self.commit_ready(env);
        env.set_timer(self.node.retry_us, RETRY_TIMER);
        env.set_timer(self.settle_us, SETTLE_TIMER);
    }

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        if !self.node.serving {
            return;
        }
        match msg {
            Msg::GetReq { key } => {
                let (value, stamp, never_depend) = match env.store().latest_where(&key, Version::committed) {
                    Some(v) => (Some(v.value.clone()), v.stamp, self.settle.is_settled(v.stamp)),
                    None => (None, Stamp::NONE, false),
                };
                env.reply(from, Msg::GetReply { value, stamp, never_depend });
            }
            Msg::PutReq { key, value, deps } => {
                if let Err(why) = self.node.check_request(&key, &deps) {
                    return env.reply(from, Msg::PutReply { result: Err(why) });
                }
                // write_after at the local owner (§2.6 step 2): stamp above
                // every dependency, commit, acknowledge, queue for the
                // equivalents.
                env.observe(Observation::Sample { what: "deps_per_write", value: deps.len() as u64 });
                let stamp = self.node.next_stamp(deps.iter().map(|d| d.stamp));
                let written_us = env.now_us();
                let version = Version { value: value.clone(), stamp, pending: None };
                env.store().insert(key.clone(), version);
                self.settle.own_write(stamp);
                self.publish(env, &key, stamp, written_us);
                env.reply(from, Msg::PutReply { result: Ok(stamp) });
                for &to in &self.node.equivalents {
                    let msg = Msg::Replicate {
                        key: key.clone(),
                        value: value.clone(),
                        stamp,
                        deps: deps.clone(),
                        written_us,
                    };
                    env.send(to, msg);
                }
            }
            _ => {} // replies and peer messages never come from clients; the runtime rejects them at the edge
        }
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: NodeId, msg: Msg) {
        if !self.node.serving || !self.node.topology.contains(from) {
            return;
        }
        match msg {
            Msg::Replicate { key, value, stamp, deps, written_us } => {
                if !self.node.accepts_replicate(from, &key, stamp, env.store()) {
                    return;
                }
                let v = Version { value, stamp, pending: Some(deps.clone()) };
                env.store().insert(key.clone(), v);
                self.node.on_replicate(env, key, stamp, &deps, written_us);
            }
            // COPS stores nothing per settled version: never-depend is
            // computed from the settled stamps at read time.
            Msg::Path(p) => {
                self.node.on_path(&mut self.settle, env, from, p);
            }
            _ => {}
        }
        self.commit_ready(env);
    }

    fn on_timer(&mut self, env: &mut impl ServerEnv<Msg, Version>, token: u64) {
        match token {
            RETRY_TIMER => {
                self.node.retry_checks(env);
                env.set_timer(self.node.retry_us, RETRY_TIMER);
            }
            SETTLE_TIMER => {
                self.settle.tick(&self.node, env);
                env.set_timer(self.settle_us, SETTLE_TIMER);
            }
            _ => {}
        }
    }
}

impl CopsServer {
    /// Commit every replicated write whose checks passed (§2.7 step 5).
    fn commit_ready(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        for r in self.node.commit_ready(env) {
            self.publish(env, &r.key, r.stamp, r.written_us);
        }
    }

    /// A version was committed: report it when a read now returns it, and
    /// keep one committed version per key (§2.2), with any pending ones
    /// newer than it.
    fn publish(&mut self, env: &mut impl ServerEnv<Msg, Version>, key: &Key, stamp: Stamp, written_us: u64) {
        self.node.report_if_newest(env, key, stamp, written_us);
        // Pending versions stay until committed: after a crash the store is
        // all recovery has, and a later write may depend on one.
        env.store().gc_key_keeping(key, Version::committed, |v| !v.committed());
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{TestNet, bytes, channel, client_traffic, get, put};
    use causeway_core::{ClientId, DcId, Protocol};

    /// A replicated write waiting for its dependency survives a crash of
    /// the node holding it: x is written in DC0, read and followed by a
    /// write of y in DC1; DC2 receives y first, so y waits for x; DC2's
    /// server restarts; then x arrives and y must still be applied.
    pub(crate) fn pending_write_survives_a_restart<P: Protocol>(cfg: P::Config) {
        let mut net = TestNet::<P>::new(3, 1, 1, cfg.clone());
        let (c0, c1, c2) = (ClientId(0), ClientId(1), ClientId(2));
        let (x, y) = (bytes("x"), bytes("y"));
        let [n0, n1, n2] = [0, 1, 2].map(|d| net.server_for(DcId(d), b"x"));
        put(&mut net, c0, &x, "x1");
        net.deliver_while(channel(n0, n1));
        assert_eq!(get(&mut net, c1, &x), Some("x1".into()));
        put(&mut net, c1, &y, "y1");
        net.deliver_while(|m| !channel::<P::Msg>(n0, n2)(m) && !client_traffic(m));
        assert_eq!(get(&mut net, c2, &y), None, "y waits for x at DC2");
        net.restart(n2, &cfg);
        net.deliver_all();
        for _ in 0..3 {
            net.advance_clocks(2_000_000);
            net.fire_all_timers();
            net.deliver_all();
        }
        assert_eq!(get(&mut net, c2, &x), Some("x1".into()));
        assert_eq!(get(&mut net, c2, &y), Some("y1".into()), "the pending write was lost in the crash");
    }

    #[test]
    fn a_pending_replicated_write_survives_a_restart() {
        pending_write_survives_a_restart::<super::Cops>(Default::default());
        pending_write_survives_a_restart::<crate::cops_gt::CopsGt>(Default::default());
    }
}
