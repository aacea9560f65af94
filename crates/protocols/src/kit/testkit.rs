//! A hand-cranked network for protocol unit tests: every message waits in a
//! queue until the test delivers it, every node's clock is set by the test,
//! and timers fire only when the test says so. It runs the real protocol code
//! through the real interface; it only replaces the simulator's automatic
//! scheduling with explicit steps, so a test can force the exact interleaving
//! a paper's argument is about. Geo-scale runs belong in `causeway-sim`.

use causeway_core::{
    Client, ClientCtx, ClientEnv, ClientId, DcId, MvStore, NodeCtx, NodeId, Observation, Op, OpResult, Protocol,
    Server, ServerEnv, Topology, TopologySpec,
};
use std::sync::Arc;

/// Where a message is going.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    Node(NodeId),
    Client(ClientId),
}

/// A message in flight.
#[derive(Clone, Debug)]
pub struct InFlight<M> {
    pub from: Dest,
    pub to: Dest,
    pub msg: M,
}

/// A recorded observation, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    Visible { node: NodeId, key: Vec<u8>, value: Vec<u8> },
    Blocked { node: NodeId, what: &'static str, waited_us: u64 },
}

pub struct TestNet<P: Protocol> {
    pub topology: Arc<Topology>,
    pub servers: Vec<P::Server>,
    pub stores: Vec<MvStore<P::Version>>,
    pub clients: Vec<P::Client>,
    pub client_dc: Vec<DcId>,
    /// Each node's physical clock reading, µs; tests move it.
    pub clocks: Vec<u64>,
    pub queue: Vec<InFlight<P::Msg>>,
    /// `(node, token)` of timers set and not yet fired (due times are the
    /// test's business).
    pub timers: Vec<(Dest, u64)>,
    /// `(node, after_us)` of every timer a server set, in order: for tests
    /// about how often a protocol wakes.
    pub timer_log: Vec<(NodeId, u64)>,
    pub results: Vec<Option<OpResult>>,
    /// Per client, the labels it noted ([`ClientEnv::note`]) during its
    /// current or last operation (cleared when it invokes the next).
    pub notes: Vec<Vec<&'static str>>,
    pub seen: Vec<Seen>,
    /// Peer messages an operation needs besides client traffic (a ROT's
    /// slices), for [`run`]; protocol tests set it.
    pub also_op_traffic: fn(&P::Msg) -> bool,
    /// Sessions per DC: client `d * clients_per_dc + i` is DC d's i-th.
    pub clients_per_dc: u32,
}

struct SEnv<'a, M, V: causeway_core::Versioned> {
    node: NodeId,
    now: u64,
    store: &'a mut MvStore<V>,
    queue: &'a mut Vec<InFlight<M>>,
    timers: &'a mut Vec<(Dest, u64)>,
    timer_log: &'a mut Vec<(NodeId, u64)>,
    seen: &'a mut Vec<Seen>,
}

impl<M, V: causeway_core::Versioned + Clone> ServerEnv<M, V> for SEnv<'_, M, V> {
    fn node(&self) -> NodeId {
        self.node
    }
    fn now_us(&self) -> u64 {
        self.now
    }
    fn send(&mut self, to: NodeId, msg: M) {
        self.queue.push(InFlight { from: Dest::Node(self.node), to: Dest::Node(to), msg });
    }
    fn reply(&mut self, to: ClientId, msg: M) {
        let to = to.as_seen_by(self.node);
        self.queue.push(InFlight { from: Dest::Node(self.node), to: Dest::Client(to), msg });
    }
    fn set_timer(&mut self, after_us: u64, token: u64) {
        self.timers.push((Dest::Node(self.node), token));
        self.timer_log.push((self.node, after_us));
    }
    fn store(&mut self) -> &mut MvStore<V> {
        self.store
    }
    fn observe(&mut self, obs: Observation<'_>) {
        self.seen.push(match obs {
            Observation::Visible { key, value, .. } => {
                Seen::Visible { node: self.node, key: key.to_vec(), value: value.to_vec() }
            }
            Observation::Blocked { what, waited_us } => Seen::Blocked { node: self.node, what, waited_us },
            Observation::Stable { .. } | Observation::Sample { .. } => return,
        });
    }
}

struct CEnv<'a, M> {
    client: ClientId,
    now: u64,
    queue: &'a mut Vec<InFlight<M>>,
    timers: &'a mut Vec<(Dest, u64)>,
    result: &'a mut Option<OpResult>,
    notes: &'a mut Vec<&'static str>,
}

impl<M> ClientEnv<M> for CEnv<'_, M> {
    fn now_us(&self) -> u64 {
        self.now
    }
    fn send(&mut self, to: NodeId, msg: M) {
        self.queue.push(InFlight { from: Dest::Client(self.client), to: Dest::Node(to), msg });
    }
    fn set_timer(&mut self, _after_us: u64, token: u64) {
        self.timers.push((Dest::Client(self.client), token));
    }
    fn complete(&mut self, result: OpResult) {
        assert!(self.result.is_none(), "client {:?} completed an operation twice", self.client);
        *self.result = Some(result);
    }
    fn note(&mut self, label: &'static str) {
        assert!(self.result.is_none(), "client {:?} noted {label:?} after completing", self.client);
        self.notes.push(label);
    }
}

impl<P: Protocol> TestNet<P> {
    /// A full-replication cluster with `clients_per_dc` sessions in every DC;
    /// client `d * clients_per_dc + i` is the i-th client of DC d. Every
    /// server's `on_start` has run; the timers it set are in `timers`.
    pub fn new(dcs: u16, partitions: u32, clients_per_dc: u32, cfg: P::Config) -> Self {
        Self::with_spec(TopologySpec::full(dcs, partitions), clients_per_dc, cfg)
    }

    pub fn with_spec(spec: TopologySpec, clients_per_dc: u32, cfg: P::Config) -> Self {
        let topology = Arc::new(Topology::new(spec).expect("valid topology"));
        P::validate(&cfg, &topology).expect("valid protocol config");
        let servers: Vec<P::Server> = topology
            .node_ids()
            .map(|id| P::server(&cfg, NodeCtx { id, role: topology.role(id), topology: topology.clone() }))
            .collect();
        let mut clients = Vec::new();
        let mut client_dc = Vec::new();
        for d in topology.dc_ids() {
            for _ in 0..clients_per_dc {
                let id = ClientId(clients.len() as u32);
                clients.push(P::client(
                    &cfg,
                    ClientCtx { id, dc: d, nonce: 0x5e55_0000 + id.0 as u64, topology: topology.clone() },
                ));
                client_dc.push(d);
            }
        }
        let n = topology.nodes();
        let mut net = TestNet {
            stores: (0..n).map(|_| MvStore::new()).collect(),
            clocks: vec![1_000; n],
            results: vec![None; clients.len()],
            notes: vec![Vec::new(); clients.len()],
            topology,
            servers,
            clients,
            client_dc,
            queue: Vec::new(),
            timers: Vec::new(),
            timer_log: Vec::new(),
            seen: Vec::new(),
            also_op_traffic: |_| false,
            clients_per_dc,
        };
        for i in 0..n {
            let (server, mut env): (&mut P::Server, _) = net.split(NodeId(i as u32));
            server.on_start(&mut env);
        }
        net
    }

    fn split(&mut self, node: NodeId) -> (&mut P::Server, SEnv<'_, P::Msg, P::Version>) {
        let i = node.idx();
        (
            &mut self.servers[i],
            SEnv {
                node,
                now: self.clocks[i],
                store: &mut self.stores[i],
                queue: &mut self.queue,
                timers: &mut self.timers,
                timer_log: &mut self.timer_log,
                seen: &mut self.seen,
            },
        )
    }

    /// Crash and restart `node`: a new server object over the same store
    /// (what its write-ahead log would give back), its timers and the
    /// messages it had received forgotten; `on_start` runs again.
    pub fn restart(&mut self, node: NodeId, cfg: &P::Config) {
        let ctx = NodeCtx { id: node, role: self.topology.role(node), topology: self.topology.clone() };
        self.servers[node.idx()] = P::server(cfg, ctx);
        self.timers.retain(|(d, _)| *d != Dest::Node(node));
        let (server, mut env) = self.split(node);
        server.on_start(&mut env);
    }

    /// Crash `node` and restart it from a snapshot taken as it crashed:
    /// each chain cut where the server's
    /// [`causeway_core::Server::snapshot_floor`] says, as the network
    /// runtime's checkpoint cuts it; then as [`TestNet::restart`].
    pub fn restart_from_snapshot(&mut self, node: NodeId, cfg: &P::Config) {
        let floor = self.servers[node.idx()].snapshot_floor();
        self.stores[node.idx()] = self.stores[node.idx()].restarted(floor.as_ref());
        self.restart(node, cfg);
    }

    /// The `i`-th client of DC `dc`.
    pub fn client(&self, dc: u16, i: u32) -> ClientId {
        assert!(i < self.clients_per_dc, "DC {dc} has {} clients", self.clients_per_dc);
        ClientId(dc as u32 * self.clients_per_dc + i)
    }

    /// The first key (`key0`, `key1`, …) that lives on partition `p`.
    pub fn key_on(&self, p: u32) -> causeway_core::Key {
        (0..)
            .map(|i| bytes(&format!("key{i}")))
            .find(|k| self.topology.partition_of(k) == causeway_core::PartitionId(p))
            .expect("some key lands on every partition")
    }

    /// `n` keys on `n` different partitions.
    pub fn keys_on_distinct_partitions(&self, n: usize) -> Vec<causeway_core::Key> {
        assert!(n <= self.topology.partitions(), "only {} partitions", self.topology.partitions());
        let mut seen = std::collections::BTreeSet::new();
        (0..)
            .map(|i| bytes(&format!("key{i}")))
            .filter(|k| seen.insert(self.topology.partition_of(k)))
            .take(n)
            .collect()
    }

    /// The newest stored version of `k` at `node`, visible or not.
    pub fn latest(&self, node: NodeId, k: &[u8]) -> P::Version {
        self.stores[node.idx()].latest(k).expect("a version").clone()
    }

    /// How many times `node` reported `k` = `v` visible.
    pub fn visible_reports(&self, node: NodeId, k: &[u8], v: &str) -> usize {
        let want = Seen::Visible { node, key: k.to_vec(), value: v.as_bytes().to_vec() };
        self.seen.iter().filter(|s| **s == want).count()
    }

    /// Every `Blocked { what }` observation: (node, waited µs).
    pub fn blocked(&self, what: &str) -> Vec<(NodeId, u64)> {
        self.seen
            .iter()
            .filter_map(|s| match s {
                Seen::Blocked { node, what: w, waited_us } if *w == what => Some((*node, *waited_us)),
                _ => None,
            })
            .collect()
    }

    /// The primary of `key`'s partition in `dc`.
    pub fn server_for(&self, dc: DcId, key: &[u8]) -> NodeId {
        self.topology.server_for_key(dc, key).expect("dc stores key")
    }

    /// Start an operation on a client. Its messages go to the queue.
    pub fn invoke(&mut self, client: ClientId, op: Op) {
        assert!(self.results[client.idx()].is_none(), "previous result not taken");
        let now = self.clocks.first().copied().unwrap_or(0);
        let mut env = CEnv {
            client,
            now,
            queue: &mut self.queue,
            timers: &mut self.timers,
            result: &mut self.results[client.idx()],
            notes: &mut self.notes[client.idx()],
        };
        env.notes.clear();
        self.clients[client.idx()].invoke(&mut env, op);
    }

    /// Take a client's completed result, if it has one.
    pub fn take_result(&mut self, client: ClientId) -> Option<OpResult> {
        self.results[client.idx()].take()
    }

    /// Deliver the oldest queued message matching `pred`; false if none.
    pub fn deliver_first(&mut self, mut pred: impl FnMut(&InFlight<P::Msg>) -> bool) -> bool {
        match self.queue.iter().position(&mut pred) {
            Some(i) => {
                let m = self.queue.remove(i);
                self.deliver(m);
                true
            }
            None => false,
        }
    }

    /// Deliver queued messages matching `pred` (including ones they cause)
    /// until none match, oldest first, preserving FIFO per channel.
    pub fn deliver_while(&mut self, mut pred: impl FnMut(&InFlight<P::Msg>) -> bool) -> usize {
        let mut n = 0;
        while self.deliver_first(&mut pred) {
            n += 1;
            assert!(n < 1_000_000, "message storm");
        }
        n
    }

    /// Deliver client requests and replies (and nothing between servers).
    pub fn deliver_client_traffic(&mut self) -> usize {
        self.deliver_while(|m| matches!(m.to, Dest::Client(_)) || matches!(m.from, Dest::Client(_)))
    }

    /// Deliver everything.
    pub fn deliver_all(&mut self) -> usize {
        self.deliver_while(|_| true)
    }

    fn deliver(&mut self, m: InFlight<P::Msg>) {
        match (m.from, m.to) {
            (Dest::Node(from), Dest::Node(to)) => {
                let (server, mut env) = self.split(to);
                server.on_peer(&mut env, from, m.msg);
            }
            (Dest::Client(from), Dest::Node(to)) => {
                let (server, mut env) = self.split(to);
                server.on_client(&mut env, from.as_seen_by(to), m.msg);
            }
            (Dest::Node(from), Dest::Client(to)) => {
                let now = self.clocks.first().copied().unwrap_or(0);
                let mut env = CEnv {
                    client: to,
                    now,
                    queue: &mut self.queue,
                    timers: &mut self.timers,
                    result: &mut self.results[to.idx()],
                    notes: &mut self.notes[to.idx()],
                };
                self.clients[to.idx()].on_reply(&mut env, from, m.msg);
            }
            (Dest::Client(_), Dest::Client(_)) => unreachable!("clients do not talk to clients"),
        }
    }

    /// Fire every pending timer of `node` once (timers set while firing wait
    /// for the next call).
    pub fn fire_timers(&mut self, node: NodeId) {
        let (mine, rest): (Vec<_>, Vec<_>) = self.timers.drain(..).partition(|t| t.0 == Dest::Node(node));
        self.timers = rest;
        for (_, token) in mine {
            let (server, mut env) = self.split(node);
            server.on_timer(&mut env, token);
        }
    }

    /// Fire every pending timer of client `c` once (timers set while firing
    /// wait for the next call). Its clock reads as the first node's.
    pub fn fire_client_timers(&mut self, c: ClientId) {
        let (mine, rest): (Vec<_>, Vec<_>) = self.timers.drain(..).partition(|t| t.0 == Dest::Client(c));
        self.timers = rest;
        for (_, token) in mine {
            let now = self.clocks.first().copied().unwrap_or(0);
            let mut env = CEnv {
                client: c,
                now,
                queue: &mut self.queue,
                timers: &mut self.timers,
                result: &mut self.results[c.idx()],
                notes: &mut self.notes[c.idx()],
            };
            self.clients[c.idx()].on_timer(&mut env, token);
        }
    }

    /// Fire every server's pending timers once.
    pub fn fire_all_timers(&mut self) {
        for i in 0..self.servers.len() {
            self.fire_timers(NodeId(i as u32));
        }
    }

    /// Advance every node's clock by `us`.
    pub fn advance_clocks(&mut self, us: u64) {
        for c in &mut self.clocks {
            *c += us;
        }
    }

    /// Run an op to completion with every message delivered at once; panics
    /// if it does not complete.
    pub fn run(&mut self, client: ClientId, op: Op) -> OpResult {
        self.run_dropping(client, op, |_| false).expect("operation did not complete")
    }

    /// [`TestNet::run`] with every message `dropped` names lost (a cut
    /// link, a DC away); `None` if the operation is still waiting after
    /// 10 000 rounds of 1 ms.
    pub fn run_dropping(
        &mut self,
        client: ClientId,
        op: Op,
        dropped: impl Fn(&InFlight<P::Msg>) -> bool,
    ) -> Option<OpResult> {
        self.invoke(client, op);
        for _ in 0..10_000 {
            self.queue.retain(|m| !dropped(m));
            self.deliver_while(|m| !dropped(m));
            if let Some(r) = self.take_result(client) {
                return Some(r);
            }
            self.advance_clocks(1_000);
            self.fire_all_timers();
        }
        None
    }
}

// ------------------------------------------------------------ test helpers
//
// Shared by the protocol modules' tests: short names for the steps every
// scenario takes.

/// Messages between servers.
pub fn server_to_server<M>(m: &InFlight<M>) -> bool {
    matches!((m.from, m.to), (Dest::Node(_), Dest::Node(_)))
}

/// Client requests and replies.
pub fn client_traffic<M>(m: &InFlight<M>) -> bool {
    matches!(m.from, Dest::Client(_)) || matches!(m.to, Dest::Client(_))
}

/// Every message on one channel: holding it back holds everything behind it (FIFO).
pub fn channel<M>(from: NodeId, to: NodeId) -> impl Fn(&InFlight<M>) -> bool {
    move |m| m.from == Dest::Node(from) && m.to == Dest::Node(to)
}

pub fn bytes(s: &str) -> bytes::Bytes {
    bytes::Bytes::copy_from_slice(s.as_bytes())
}

pub fn text(v: Option<causeway_core::Value>) -> Option<String> {
    v.map(|v| String::from_utf8_lossy(&v).into_owned())
}

/// Run an op delivering only its own traffic (client messages and whatever
/// `net.also_op_traffic` names): no timer fires, no replication or
/// stabilization moves. Panics if it would have to wait.
pub fn run<P: Protocol>(net: &mut TestNet<P>, c: ClientId, op: Op) -> OpResult {
    net.invoke(c, op);
    let also = net.also_op_traffic;
    net.deliver_while(|m| client_traffic(m) || also(&m.msg));
    net.take_result(c).expect("the operation completes without timers or other traffic")
}

pub fn put<P: Protocol>(net: &mut TestNet<P>, c: ClientId, k: &causeway_core::Key, v: &str) {
    assert_eq!(run(net, c, Op::Put { key: k.clone(), value: bytes(v) }), OpResult::Put);
}

pub fn get<P: Protocol>(net: &mut TestNet<P>, c: ClientId, k: &causeway_core::Key) -> Option<String> {
    match run(net, c, Op::Get { key: k.clone() }) {
        OpResult::Get(v) => text(v),
        other => panic!("GET returned {other:?}"),
    }
}

pub fn rot<P: Protocol>(net: &mut TestNet<P>, c: ClientId, keys: &[&causeway_core::Key]) -> Vec<Option<String>> {
    match run(net, c, Op::Rot { keys: keys.iter().map(|&k| k.clone()).collect() }) {
        OpResult::Rot(vs) => vs.into_iter().map(text).collect(),
        other => panic!("ROT returned {other:?}"),
    }
}

/// Rounds of every timer plus all server-to-server traffic except `held`:
/// enough for heartbeats to reach the vectors and a stabilization tree to
/// push its result down.
pub fn stabilize_holding<P: Protocol>(net: &mut TestNet<P>, held: &dyn Fn(&InFlight<P::Msg>) -> bool) {
    for _ in 0..4 {
        net.fire_all_timers();
        net.deliver_while(|m| server_to_server(m) && !held(m));
    }
}

pub fn stabilize<P: Protocol>(net: &mut TestNet<P>) {
    stabilize_holding(net, &|_| false);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eventual::Eventual;
    use bytes::Bytes;

    #[test]
    fn eventual_replicates_and_converges_through_the_testkit() {
        let mut net = TestNet::<Eventual>::new(2, 2, 1, Default::default());
        let (a, b) = (ClientId(0), ClientId(1));
        let k = Bytes::from_static(b"k");
        net.invoke(a, Op::Put { key: k.clone(), value: Bytes::from_static(b"1") });
        // Only the client's request and the reply: replication waits in the queue.
        net.deliver_client_traffic();
        assert_eq!(net.take_result(a), Some(OpResult::Put));
        net.invoke(b, Op::Get { key: k.clone() });
        net.deliver_client_traffic();
        assert_eq!(net.take_result(b), Some(OpResult::Get(None)));
        net.deliver_all();
        assert_eq!(net.run(b, Op::Get { key: k }), OpResult::Get(Some(Bytes::from_static(b"1"))));
    }
}
