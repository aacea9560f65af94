//! A hand-cranked network for protocol unit tests: every message waits in a
//! queue until the test delivers it, every node's clock is set by the test,
//! and timers fire only when the test says so. It runs the real protocol
//! code in the real node core ([`Node`], which the simulator and the network
//! runtime drive too); it only replaces the simulator's automatic scheduling
//! with explicit steps, so a test can force the exact interleaving a paper's
//! argument is about. Geo-scale runs belong in `causeway-sim`.
//!
//! Each delivery, timer or start is one turn of one node: the kit steps the
//! node, appends the turn's records to the node's log ([`TestNet::logs`],
//! in memory), declares them durable at once and queues what the node then
//! releases. (A crash between append and sync is the simulator's fault to
//! inject, not this kit's.) A restart rebuilds the node from its log, as the
//! network runtime rebuilds one from its write-ahead log: whatever a
//! protocol keeps only in memory is gone, and whatever it logged comes back.
//!
//! Peer links. The test picks which message to deliver, but a node handles
//! a channel's sequenced messages once and in order, as the runtimes'
//! reliable FIFO links hand them over; so delivering a peer message first
//! delivers the sequenced messages still queued that were sent before it on
//! the same channel, as a FIFO link would. Holding a message back holds
//! back nothing behind it only when the whole channel is held ([`channel`]).
//! (Unsequenced messages — heartbeats — are not pulled along: a link may
//! lose them, so one held back is as good as lost.) A message the test
//! drops is lost as over a cut link, until an end of its channel restarts:
//! then the links reconnect and resend what the receiver has not handled,
//! as the runtime's do. Delivering a sequenced message after one the test
//! dropped is a history no link produces, and the kit panics on it.

use causeway_core::{
    Client, ClientCtx, ClientEnv, ClientId, DcId, Durable, Host, Message, Node, NodeCtx, NodeId, NodeInput,
    NodeOptions, Observation, Op, OpResult, Output, OwnedRecord, Protocol, Seq, Server, Stepped, Topology,
    TopologySpec,
};
use std::collections::BTreeMap;
use std::convert::Infallible;
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
    /// Where a peer message sits on its channel, as its sender's node core
    /// numbered it; `None` for client traffic and for a message a test made
    /// up ([`InFlight::new`]).
    seq: Option<Seq>,
}

impl<M> InFlight<M> {
    /// A message a test puts in the queue itself. Between nodes it is taken
    /// for the sender's next message on the channel when delivered (a peer
    /// that sends nonsense still sends it over its link), and the channel's
    /// later messages move up one.
    pub fn new(from: Dest, to: Dest, msg: M) -> Self {
        InFlight { from, to, msg, seq: None }
    }

    /// Where a peer message sits on its channel ([`InFlight::seq`]'s doc).
    pub fn seq(&self) -> Option<Seq> {
        self.seq
    }

    fn on_channel(&self, from: NodeId, to: NodeId) -> bool {
        self.from == Dest::Node(from) && self.to == Dest::Node(to)
    }
}

/// A recorded observation, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    Visible { node: NodeId, key: Vec<u8>, value: Vec<u8> },
    Blocked { node: NodeId, what: &'static str, waited_us: u64 },
}

type Log<P> = Vec<OwnedRecord<<P as Protocol>::Version, <P as Protocol>::Msg>>;

pub struct TestNet<P: Protocol> {
    pub topology: Arc<Topology>,
    /// Every node of the topology, by id: `nodes[i].server()` and
    /// `nodes[i].store()` are what a test looks at.
    pub nodes: Vec<Node<P>>,
    /// Per node, the records of every turn since it started (or since the
    /// snapshot of its last [`TestNet::restart_from_snapshot`]), in order.
    pub logs: Vec<Log<P>>,
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
    /// Per node, the durable state its log starts from: a snapshot's, or
    /// none (an empty one).
    snapshots: Vec<Option<Durable<P::Version, P::Msg>>>,
    /// Per node, how many records of its log a sync has made durable: the
    /// rest were written without one ([`MvStore::set_meta_unsynced`]) and
    /// a crash of the machine loses them
    /// ([`TestNet::restart_losing_unsynced`]).
    ///
    /// [`MvStore::set_meta_unsynced`]: causeway_core::MvStore::set_meta_unsynced
    synced: Vec<usize>,
    /// Per channel `(from, to)`, how many made-up messages were delivered
    /// on it: the receiver numbers the sender's later messages that much
    /// higher.
    made_up: BTreeMap<(NodeId, NodeId), u64>,
}

/// What the kit lends a node for one turn: its clock as the test set it,
/// the kit's timer list and observation record.
struct KitHost<'a> {
    node: NodeId,
    now_us: u64,
    timers: &'a mut Vec<(Dest, u64)>,
    timer_log: &'a mut Vec<(NodeId, u64)>,
    seen: &'a mut Vec<Seen>,
}

impl Host for KitHost<'_> {
    fn now_us(&self) -> u64 {
        self.now_us
    }
    fn set_timer(&mut self, after_us: u64, token: u64) {
        self.timers.push((Dest::Node(self.node), token));
        self.timer_log.push((self.node, after_us));
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
        self.queue.push(InFlight::new(Dest::Client(self.client), Dest::Node(to), msg));
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

/// A copy of durable state (a snapshot is restarted from more than once).
fn copy_durable<P: Protocol>(d: &Durable<P::Version, P::Msg>) -> Durable<P::Version, P::Msg> {
    Durable {
        store: d.store.restarted(None),
        outbox: d.outbox.clone(),
        sent_seq: d.sent_seq.clone(),
        delivered: d.delivered.clone(),
    }
}

impl<P: Protocol> TestNet<P> {
    /// A full-replication cluster with `clients_per_dc` sessions in every DC;
    /// client `d * clients_per_dc + i` is the i-th client of DC d. Every
    /// server's `on_start` has run; the timers it set are in `timers`.
    pub fn new(dcs: u16, partitions: u32, clients_per_dc: u32, cfg: P::Config) -> Self {
        Self::with_spec(TopologySpec::full(dcs, partitions), clients_per_dc, cfg)
    }

    pub fn with_spec(mut spec: TopologySpec, clients_per_dc: u32, cfg: P::Config) -> Self {
        spec.add_missing_services(P::SERVICES);
        let topology = Arc::new(Topology::new(spec).expect("valid topology"));
        P::validate(&cfg, &topology).expect("valid protocol config");
        let nodes: Vec<Node<P>> = topology
            .node_ids()
            .map(|id| {
                Node::new(
                    &cfg,
                    NodeCtx { id, role: topology.role(id), topology: topology.clone() },
                    NodeOptions::default(),
                )
            })
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
            logs: (0..n).map(|_| Vec::new()).collect(),
            snapshots: (0..n).map(|_| None).collect(),
            synced: vec![0; n],
            made_up: BTreeMap::new(),
            clocks: vec![1_000; n],
            results: vec![None; clients.len()],
            notes: vec![Vec::new(); clients.len()],
            topology,
            nodes,
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
            net.turn(NodeId(i as u32), None);
        }
        net
    }

    /// One turn of `node`: `input` (`None`: its start), then the turn's
    /// records appended to its log and declared durable, and what the node
    /// released queued.
    fn turn(&mut self, node: NodeId, input: Option<NodeInput<P::Msg>>) -> Stepped {
        let i = node.idx();
        let mut host = KitHost {
            node,
            now_us: self.clocks[i],
            timers: &mut self.timers,
            timer_log: &mut self.timer_log,
            seen: &mut self.seen,
        };
        let n = &mut self.nodes[i];
        let stepped = match input {
            None => {
                n.start(&mut host);
                Stepped::Handled
            }
            Some(input) => n.step(&mut host, input),
        };
        let log = &mut self.logs[i];
        let Ok(appended) = n.ready().append(|r| {
            log.push(OwnedRecord::of(&r));
            Ok::<_, Infallible>(())
        });
        n.advance(appended.lsn);
        if appended.must_sync {
            self.synced[i] = log.len();
        }
        for out in n.released() {
            self.queue.push(match out {
                Output::Peer { to, seq, msg } => {
                    InFlight { from: Dest::Node(node), to: Dest::Node(to), msg, seq: Some(Seq::Nth(seq)) }
                }
                Output::Unsequenced { to, after_seq, msg } => {
                    InFlight { from: Dest::Node(node), to: Dest::Node(to), msg, seq: Some(Seq::After(after_seq)) }
                }
                Output::Reply { to, msg } => InFlight::new(Dest::Node(node), Dest::Client(to.as_seen_by(node)), msg),
            });
        }
        stepped
    }

    /// Crash and restart `node` from its log: a new node core and server
    /// over the durable state its records rebuild, its timers forgotten;
    /// `on_start` runs again, and its links reconnect
    /// ([`TestNet::reconnect`]).
    pub fn restart(&mut self, node: NodeId, cfg: &P::Config) {
        let durable = self.durable(node);
        self.recover(node, cfg, durable);
    }

    /// Crash `node`'s machine and restart it: the log records no sync made
    /// durable are lost (their turns' output has left, as it may when
    /// nothing in them asked for a sync), then as [`TestNet::restart`].
    pub fn restart_losing_unsynced(&mut self, node: NodeId, cfg: &P::Config) {
        let i = node.idx();
        self.logs[i].truncate(self.synced[i]);
        self.restart(node, cfg);
    }

    /// Crash `node` and restart it from a snapshot taken as it crashed:
    /// its store as it stood, each chain cut where the server's
    /// [`causeway_core::Server::snapshot_floor`] says, as the network
    /// runtime's checkpoint cuts it, and its channels' state from its log;
    /// the log starts afresh after the snapshot. Then as
    /// [`TestNet::restart`].
    pub fn restart_from_snapshot(&mut self, node: NodeId, cfg: &P::Config) {
        let i = node.idx();
        let floor = self.nodes[i].server().snapshot_floor();
        let mut durable = self.durable(node);
        durable.store = self.nodes[i].store().restarted(floor.as_ref());
        self.snapshots[i] = Some(copy_durable::<P>(&durable));
        self.logs[i].clear();
        self.synced[i] = 0;
        self.recover(node, cfg, durable);
    }

    /// What a replay of `node`'s log gives back, its outbox cut to what
    /// each peer has not handled yet (the acknowledgements its links got).
    fn durable(&self, node: NodeId) -> Durable<P::Version, P::Msg> {
        let i = node.idx();
        let mut d = match &self.snapshots[i] {
            Some(s) => copy_durable::<P>(s),
            None => Durable::empty(self.nodes.len()),
        };
        for r in &self.logs[i] {
            d.apply(&r.as_record());
        }
        for peer in self.topology.node_ids().filter(|&p| p != node) {
            d.acked(peer, self.handled(node, peer));
        }
        d
    }

    fn recover(&mut self, node: NodeId, cfg: &P::Config, durable: Durable<P::Version, P::Msg>) {
        let ctx = NodeCtx { id: node, role: self.topology.role(node), topology: self.topology.clone() };
        let (fresh, _outbox) = Node::recover(cfg, ctx, durable, NodeOptions::default());
        self.nodes[node.idx()] = fresh;
        self.timers.retain(|(d, _)| *d != Dest::Node(node));
        self.turn(node, None);
        self.reconnect(node);
    }

    /// The links of `node` reconnect, and each end resends the sequenced
    /// messages the other has not handled, as the runtime's links do after
    /// a crash: the ones the test dropped come back (in their place on
    /// their channel), the ones still queued are in flight already.
    pub fn reconnect(&mut self, node: NodeId) {
        for other in self.topology.node_ids().filter(|&o| o != node) {
            for (from, to) in [(node, other), (other, node)] {
                for (seq, msg) in self.unhandled(from, to) {
                    let on_channel = |m: &InFlight<P::Msg>| m.on_channel(from, to);
                    if self.queue.iter().any(|m| on_channel(m) && m.seq == Some(Seq::Nth(seq))) {
                        continue;
                    }
                    let later = |m: &InFlight<P::Msg>| {
                        on_channel(m) && matches!(m.seq, Some(Seq::Nth(s) | Seq::After(s)) if s > seq)
                    };
                    let at = self.queue.iter().position(later).unwrap_or(self.queue.len());
                    let m = InFlight { from: Dest::Node(from), to: Dest::Node(to), msg, seq: Some(Seq::Nth(seq)) };
                    self.queue.insert(at, m);
                }
            }
        }
    }

    /// The sequenced messages `from` logged for `to` that `to` has not
    /// handled, in order (`from`'s outbox for `to`).
    fn unhandled(&self, from: NodeId, to: NodeId) -> Vec<(u64, P::Msg)> {
        let handled = self.handled(from, to);
        let snapshot = self.snapshots[from.idx()].iter().flat_map(|s| s.outbox[to.idx()].iter().cloned());
        let logged = self.logs[from.idx()].iter().filter_map(|r| match r {
            OwnedRecord::Outbox { to: t, seq, msg } if *t == to => Some((*seq, msg.clone())),
            _ => None,
        });
        snapshot.chain(logged).filter(|(seq, _)| *seq > handled).collect()
    }

    /// The last sequenced message from `from` that `to` has handled, as
    /// `from` numbered it.
    fn handled(&self, from: NodeId, to: NodeId) -> u64 {
        self.nodes[to.idx()].delivered()[from.idx()] - self.made_up.get(&(from, to)).copied().unwrap_or(0)
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

    /// [`TestNet::keys_on_distinct_partitions`] as an array, for
    /// `let [x, y] = &net.distinct_keys();`.
    pub fn distinct_keys<const N: usize>(&self) -> [causeway_core::Key; N] {
        self.keys_on_distinct_partitions(N).try_into().expect("N keys")
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
        self.nodes[node.idx()].store().latest(k).expect("a version").clone()
    }

    /// How many times `node` reported `k` = `v` visible.
    pub fn visible_reports(&self, node: NodeId, k: &[u8], v: &str) -> usize {
        let want = Seen::Visible { node, key: k.to_vec(), value: v.as_bytes().to_vec() };
        self.seen.iter().filter(|s| **s == want).count()
    }

    /// Assert that no server reported waiting (a `Blocked` observation):
    /// for the protocols whose operations never block.
    pub fn assert_never_blocked(&self) {
        let blocked: Vec<&Seen> = self.seen.iter().filter(|s| matches!(s, Seen::Blocked { .. })).collect();
        assert!(blocked.is_empty(), "{} never blocks, saw {blocked:?}", P::NAME);
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
        self.notes[client.idx()].clear();
        self.with_client(client, |c, env| c.invoke(env, op));
    }

    /// Start an operation that asks for session levels of its own
    /// ([`causeway_core::Client::invoke_at`]).
    pub fn invoke_at(&mut self, client: ClientId, op: Op, levels: causeway_core::Levels) {
        assert!(self.results[client.idx()].is_none(), "previous result not taken");
        self.notes[client.idx()].clear();
        self.with_client(client, |c, env| c.invoke_at(env, op, levels));
    }

    /// Run `f` on client `c` with its environment: its clock reads as the
    /// first node's, its messages and timers go to the net's queues.
    fn with_client(&mut self, c: ClientId, f: impl FnOnce(&mut P::Client, &mut CEnv<'_, P::Msg>)) {
        let now = self.clocks.first().copied().unwrap_or(0);
        let mut env = CEnv {
            client: c,
            now,
            queue: &mut self.queue,
            timers: &mut self.timers,
            result: &mut self.results[c.idx()],
            notes: &mut self.notes[c.idx()],
        };
        f(&mut self.clients[c.idx()], &mut env);
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
    /// until none match, oldest first. A message sent before a matching one
    /// on the same channel is delivered before it, matching or not (see the
    /// module doc).
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
            (Dest::Node(from), Dest::Node(to)) => self.deliver_peer(from, to, m.seq, m.msg),
            (Dest::Client(from), Dest::Node(to)) => {
                self.turn(to, Some(NodeInput::Client { from: from.as_seen_by(to), msg: m.msg }));
            }
            (Dest::Node(from), Dest::Client(to)) => {
                self.with_client(to, |client, env| client.on_reply(env, from, m.msg));
            }
            (Dest::Client(_), Dest::Client(_)) => unreachable!("clients do not talk to clients"),
        }
    }

    /// Hand a peer message to `to`'s node core as its link would: numbered
    /// on its channel, after everything sent before it.
    fn deliver_peer(&mut self, from: NodeId, to: NodeId, seq: Option<Seq>, msg: P::Msg) {
        assert!(
            from.idx() < self.nodes.len(),
            "a message from {from:?}, which is not in the topology: the runtimes refuse such a peer at its \
             hello, so nothing it sends reaches a node"
        );
        let kind = msg.kind();
        let made_up = self.made_up.get(&(from, to)).copied().unwrap_or(0);
        let seq = match seq {
            Some(seq) => {
                let bound = match seq {
                    Seq::Nth(s) | Seq::After(s) => s,
                };
                self.flush_before(from, to, bound);
                match seq {
                    Seq::Nth(s) => Seq::Nth(s + made_up),
                    Seq::After(s) => Seq::After(s + made_up),
                }
            }
            None => {
                let next = self.nodes[to.idx()].delivered()[from.idx()] + 1;
                if msg.ephemeral() || msg.transient() {
                    Seq::After(next)
                } else {
                    *self.made_up.entry((from, to)).or_default() += 1;
                    Seq::Nth(next)
                }
            }
        };
        match self.turn(to, Some(NodeInput::Peer { from, seq, msg })) {
            // A copy of a message handled already, or an unsequenced one
            // behind a sequenced message the test dropped: the node drops
            // it, as it would behind a real link.
            Stepped::Handled | Stepped::Duplicate | Stepped::Early => {}
            Stepped::Gap { expected } => panic!(
                "{kind} ({seq:?}) from {from:?} to {to:?} delivered, but message {expected} of the channel (as \
                 {to:?} numbers it) never was: the test dropped it. A link loses nothing it sequenced (it resends \
                 after reconnecting), so drop the channel's later messages too, or restart an end of it"
            ),
            Stepped::Misframed => unreachable!("the node core frames its own messages"),
        }
    }

    /// Deliver, in order, the sequenced messages still queued on channel
    /// `from` → `to` numbered below `bound`: a FIFO link hands a message
    /// over only after those sent before it. (Unsequenced ones stay queued:
    /// a link may lose them, so one held back is one lost, or late.)
    fn flush_before(&mut self, from: NodeId, to: NodeId, bound: u64) {
        let earlier = |m: &InFlight<P::Msg>| match m.seq {
            Some(Seq::Nth(s)) if s < bound && m.on_channel(from, to) => Some(s),
            _ => None,
        };
        while let Some(at) = (0..self.queue.len())
            .filter(|&i| earlier(&self.queue[i]).is_some())
            .min_by_key(|&i| earlier(&self.queue[i]))
        {
            let m = self.queue.remove(at);
            self.deliver_peer(from, to, m.seq, m.msg);
        }
    }

    /// Fire every pending timer of `node` once (timers set while firing wait
    /// for the next call).
    pub fn fire_timers(&mut self, node: NodeId) {
        let (mine, rest): (Vec<_>, Vec<_>) = self.timers.drain(..).partition(|t| t.0 == Dest::Node(node));
        self.timers = rest;
        for (_, token) in mine {
            self.turn(node, Some(NodeInput::Timer { token }));
        }
    }

    /// Fire every pending timer of client `c` once (timers set while firing
    /// wait for the next call). Its clock reads as the first node's.
    pub fn fire_client_timers(&mut self, c: ClientId) {
        let (mine, rest): (Vec<_>, Vec<_>) = self.timers.drain(..).partition(|t| t.0 == Dest::Client(c));
        self.timers = rest;
        for (_, token) in mine {
            self.with_client(c, |client, env| client.on_timer(env, token));
        }
    }

    /// Fire every server's pending timers once.
    pub fn fire_all_timers(&mut self) {
        for i in 0..self.nodes.len() {
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

/// Three DCs of three partitions, each partition stored in two of them:
/// the topology a protocol needing full replication refuses in `validate`.
pub fn partial_replication() -> causeway_core::Topology {
    let mut spec = causeway_core::TopologySpec::full(3, 3);
    spec.replication = causeway_core::Replication::Partial { factor: 2 };
    causeway_core::Topology::new(spec).expect("a valid topology")
}

/// `dcs` DCs of `partitions` partitions, every partition in every DC.
pub fn full_replication(dcs: u16, partitions: u32) -> causeway_core::Topology {
    causeway_core::Topology::new(causeway_core::TopologySpec::full(dcs, partitions)).expect("a valid topology")
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
