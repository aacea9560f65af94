//! The node core: one protocol server, its store and its durable promises,
//! with no I/O of its own.
//!
//! A runtime never calls a protocol's handlers directly. It feeds inputs to
//! a [`Node`] ([`Node::step`]), then ends the turn with [`Node::ready`],
//! which hands out — in the order a replay must see them — the records to
//! append to the node's log ([`Ready::append`]) and says whether they must
//! be synced before anything that depends on them leaves ([`Appended`]).
//! The messages and replies of the turn stay inside the node until the
//! runtime says their records are durable ([`Node::advance`]); only then
//! does [`Node::released`] give them out. So "persist, then send" is not a
//! rule a runtime must remember: a runtime cannot get a turn's output
//! without first having been handed its records, and cannot get it before
//! it declared them durable. The shape is etcd-raft's `RawNode`/`Ready`
//! and quinn-proto's connection: the algorithm and its bookkeeping here,
//! sockets, files, threads and clocks in the runtime.
//!
//! What the node keeps besides the protocol's state is what makes peer
//! channels reliable and exactly-once across crashes, since both runtimes
//! need it and its order against the store's records is the subtle part:
//! each sequenced message to a peer gets the next number on its channel and
//! an outbox record (resent after a crash until the peer has it), and each
//! sequenced message from a peer is handled once, in order, its delivery
//! mark logged *after* the records of what handling it did — store changes
//! and the messages it sent — so any prefix of the log that survives a crash
//! (a torn tail) is a state the node really passed through.
//!
//! Not here: timers, the clock and observations. They are not subject to
//! persist-before-send (a timer is local, an observation is measurement),
//! so a runtime lends them to each step through [`Host`]; the network
//! runtime fires a timer due within the turn between its inputs, which a
//! timer list handed out at the turn's end could not do.

use crate::data::Key;
use crate::ids::{ClientId, DcId, NodeId};
use crate::protocol::{Message, NodeCtx, Observation, Protocol, Server, ServerEnv};
use crate::store::{KeyIndex, MvStore, Versioned};
use std::collections::VecDeque;

/// What a runtime lends a node for one step: its clock, its timers and
/// where observations go.
pub trait Host {
    /// This node's physical clock in µs (may be skewed, drift or jump).
    fn now_us(&self) -> u64;
    /// Feed [`Input::Timer`] with `token` to the node after `after_us` µs.
    fn set_timer(&mut self, after_us: u64, token: u64);
    /// Record an observation ([`Observation`]).
    fn observe(&mut self, obs: Observation<'_>);
}

/// Where a peer message sits on its channel from `from`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seq {
    /// The `n`-th sequenced message on the channel (from 1): handled once,
    /// in order.
    Nth(u64),
    /// An ephemeral or transient message ([`Message::ephemeral`],
    /// [`Message::transient`]) sent when the sender's next sequenced message
    /// on the channel would have been number `n`: it is handled only after
    /// every sequenced message before it.
    After(u64),
}

/// One input to a node.
#[derive(Debug)]
pub enum Input<M> {
    /// A request from a client session (named as this node names it).
    Client { from: ClientId, msg: M },
    /// A message from another node.
    Peer { from: NodeId, seq: Seq, msg: M },
    /// A timer the protocol set.
    Timer { token: u64 },
}

/// What became of an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stepped {
    /// The protocol handled it.
    Handled,
    /// A sequenced message already handled (resent after a reconnect or a
    /// restart): dropped.
    Duplicate,
    /// A sequenced message past the next one expected (`expected`): the
    /// ones between were lost with a crash of this node and the sender will
    /// resend from there. Dropped.
    Gap { expected: u64 },
    /// An unsequenced message that overtook sequenced ones it must follow
    /// (its sender resends those): dropped.
    Early,
    /// A sequenced message that is neither ephemeral nor transient arrived
    /// unsequenced, or the reverse: a peer's bug, dropped.
    Misframed,
}

/// Something that may leave the node once its turn's records are durable.
#[derive(Debug)]
pub enum Output<M> {
    /// A sequenced message: number `seq` on the channel to `to`, in the
    /// outbox until `to` has it durably.
    Peer { to: NodeId, seq: u64, msg: M },
    /// An unsequenced message ([`Seq::After`]), sent at most once.
    Unsequenced { to: NodeId, after_seq: u64, msg: M },
    /// An answer to a client.
    Reply { to: ClientId, msg: M },
}

/// One record of the node's log, borrowed from the node for
/// [`Ready::append`]. A replay of the records of every durable turn, in
/// order, gives back the node's durable state ([`Durable`]).
#[derive(Debug)]
pub enum Record<'a, V, M> {
    /// A version entered the store (or replaced the one of the same order).
    Version { key: &'a [u8], version: &'a V },
    /// The protocol's durable metadata ([`MvStore::set_meta`]): the last
    /// one wins.
    Meta { bytes: &'a [u8] },
    /// Sequenced message `seq` to `to`.
    Outbox { to: NodeId, seq: u64, msg: &'a M },
    /// Sequenced message `seq` from `from` has been handled: its effects
    /// precede this record.
    Delivered { from: NodeId, seq: u64 },
    /// The end of turn `lsn`'s records. A turn's records are one atomic
    /// change: a replay applies them only up to the last `Commit` it finds,
    /// so a torn tail never leaves half a turn — a version stored whose
    /// replication message is lost, or the reverse.
    Commit { lsn: u64 },
}

/// A turn's records, handed out: the turn's number, and whether its
/// records (or an earlier turn's still unsynced) must be synced before the
/// runtime may call [`Node::advance`] with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "the turn's output is released only after advance(lsn)"]
pub struct Appended {
    pub lsn: u64,
    pub must_sync: bool,
}

/// Settings of the node core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeOptions {
    /// A deliberately broken node that releases each turn's output as soon
    /// as its records are handed out, before they are durable. For the
    /// mutant suite only: the simulator's crash-before-sync faults must
    /// catch it (an acknowledged write lost, a peer told of a state the
    /// node forgot).
    pub mutant_release_before_sync: bool,
}

/// The durable state of a node, as a replay of its log's records gives it
/// back: what [`Node::recover`] starts from.
#[derive(Debug)]
pub struct Durable<V: Versioned, M> {
    pub store: MvStore<V>,
    /// Per destination, sequenced messages the destination may not have.
    pub outbox: Vec<VecDeque<(u64, M)>>,
    /// Per destination, the last sequence number used.
    pub sent_seq: Vec<u64>,
    /// Per source, the last sequence number handled.
    pub delivered: Vec<u64>,
}

impl<V: Versioned + Clone, M: Clone> Durable<V, M> {
    /// The state of a node that has logged nothing, in a cluster of `nodes`.
    pub fn empty(nodes: usize) -> Self {
        Durable {
            store: MvStore::new(),
            outbox: (0..nodes).map(|_| VecDeque::new()).collect(),
            sent_seq: vec![0; nodes],
            delivered: vec![0; nodes],
        }
    }

    /// Apply one record, as a replay does.
    pub fn apply(&mut self, r: &Record<'_, V, M>) {
        match r {
            Record::Version { key, version } => self.store.restore(key, (*version).clone()),
            Record::Meta { bytes } => {
                self.store.set_meta(bytes.to_vec());
                self.store.take_dirty_meta();
            }
            Record::Outbox { to, seq, msg } => {
                let i = to.idx();
                debug_assert!(*seq > self.sent_seq[i], "outbox records are numbered in order");
                self.sent_seq[i] = *seq;
                self.outbox[i].push_back((*seq, (*msg).clone()));
            }
            Record::Delivered { from, seq } => self.delivered[from.idx()] = *seq,
            Record::Commit { .. } => {}
        }
    }

    /// Apply a log's records in order, each turn only once its
    /// [`Record::Commit`] is read: what a crash left of a turn without its
    /// commit (a torn tail) is dropped. Returns how many records were
    /// dropped so.
    pub fn replay<'r>(&mut self, records: impl IntoIterator<Item = Record<'r, V, M>>) -> usize
    where
        V: 'r,
        M: 'r,
    {
        let mut turn = Vec::new();
        for r in records {
            if let Record::Commit { .. } = r {
                for r in turn.drain(..) {
                    self.apply(&r);
                }
            } else {
                turn.push(r);
            }
        }
        turn.len()
    }

    /// Forget outbox entries `to` has durably handled (`delivered` is its
    /// durable delivery mark for this node): a link's acknowledgement.
    pub fn acked(&mut self, to: NodeId, delivered: u64) {
        let q = &mut self.outbox[to.idx()];
        while q.front().is_some_and(|(s, _)| *s <= delivered) {
            q.pop_front();
        }
    }
}

/// Where the records of the turn in progress go, in order: the store's
/// journal up to a length, then a metadata change, an outbox record or a
/// delivery mark.
#[derive(Debug)]
enum Mark {
    /// The store's journal entries up to this length.
    Journal(usize),
    Meta(Vec<u8>),
    /// The output at this index of the turn's outputs (a [`Output::Peer`]).
    Outbox(usize),
    Delivered {
        from: NodeId,
        seq: u64,
    },
}

/// A protocol server, its store, and its channels' durable bookkeeping.
pub struct Node<P: Protocol> {
    id: NodeId,
    dc: DcId,
    server: P::Server,
    store: MvStore<P::Version>,
    options: NodeOptions,
    /// Per destination, the last sequence number used.
    sent_seq: Vec<u64>,
    /// Per source, the last sequence number handled.
    delivered: Vec<u64>,
    /// The turn in progress: its outputs and the order of its records.
    out: Vec<Output<P::Msg>>,
    marks: Vec<Mark>,
    /// Whether the turn in progress has records that need a sync.
    dirty: bool,
    /// The journal buffer drained last, for the next turn's capacity.
    journal_spare: Vec<(KeyIndex, <P::Version as Versioned>::Order)>,
    /// Outputs of handed-out turns not yet durable, oldest first, and each
    /// such turn's (lsn, output count).
    held: VecDeque<Output<P::Msg>>,
    held_turns: VecDeque<(u64, usize)>,
    /// The last turn handed out, the last one the runtime declared durable,
    /// and the last one with records that need a sync.
    lsn: u64,
    durable_lsn: u64,
    dirty_lsn: u64,
    /// A turn's records could not all be handed to the log: nothing is
    /// declared durable from then on.
    log_failed: bool,
}

impl<P: Protocol> Node<P> {
    /// A node starting from `durable` (an empty [`Durable`] for a new one),
    /// with the outbox its runtime must resend: per destination, the
    /// sequenced messages the destination may not have. Call
    /// [`Node::start`] before any input.
    #[allow(clippy::type_complexity)]
    pub fn recover(
        cfg: &P::Config,
        ctx: NodeCtx,
        durable: Durable<P::Version, P::Msg>,
        options: NodeOptions,
    ) -> (Self, Vec<VecDeque<(u64, P::Msg)>>) {
        let nodes = ctx.topology.nodes();
        assert_eq!(durable.sent_seq.len(), nodes, "durable state for another topology");
        assert_eq!(durable.delivered.len(), nodes, "durable state for another topology");
        let (id, dc) = (ctx.id, ctx.topology.dc_of(ctx.id));
        let Durable { mut store, outbox, sent_seq, delivered } = durable;
        store.enable_journal();
        let node = Node {
            id,
            dc,
            server: P::server(cfg, ctx),
            store,
            options,
            sent_seq,
            delivered,
            out: Vec::new(),
            marks: Vec::new(),
            dirty: false,
            journal_spare: Vec::new(),
            held: VecDeque::new(),
            held_turns: VecDeque::new(),
            lsn: 0,
            durable_lsn: 0,
            dirty_lsn: 0,
            log_failed: false,
        };
        (node, outbox)
    }

    /// A new node with nothing logged.
    pub fn new(cfg: &P::Config, ctx: NodeCtx, options: NodeOptions) -> Self {
        let nodes = ctx.topology.nodes();
        Self::recover(cfg, ctx, Durable::empty(nodes), options).0
    }

    pub fn id(&self) -> NodeId {
        self.id
    }
    pub fn dc(&self) -> DcId {
        self.dc
    }
    /// The protocol server, for tests and reports that look inside it.
    pub fn server(&self) -> &P::Server {
        &self.server
    }
    pub fn server_mut(&mut self) -> &mut P::Server {
        &mut self.server
    }
    pub fn store(&self) -> &MvStore<P::Version> {
        &self.store
    }
    /// The store, for a runtime's own work on it that logs nothing (warming
    /// a batch's keys, a checkpoint's copy). A change made through this
    /// between a turn's steps is journaled with the turn.
    pub fn store_mut(&mut self) -> &mut MvStore<P::Version> {
        &mut self.store
    }
    /// Per source, the last sequenced message handled (durable only once
    /// the turn that handled it is).
    pub fn delivered(&self) -> &[u64] {
        &self.delivered
    }
    /// Per destination, the last sequence number used.
    pub fn sent_seq(&self) -> &[u64] {
        &self.sent_seq
    }
    /// The last turn declared durable.
    pub fn durable_lsn(&self) -> u64 {
        self.durable_lsn
    }
    /// Whether outputs wait for a turn to become durable.
    pub fn holds_output(&self) -> bool {
        !self.held.is_empty()
    }

    /// Run the protocol's `on_start` (once, before any input, and again
    /// after each recovery).
    pub fn start(&mut self, host: &mut impl Host) {
        let (server, mut env) = self.env(host);
        server.on_start(&mut env);
        self.mark_meta();
    }

    /// Feed one input to the protocol.
    pub fn step(&mut self, host: &mut impl Host, input: Input<P::Msg>) -> Stepped {
        match input {
            Input::Client { from, msg } => {
                let (server, mut env) = self.env(host);
                server.on_client(&mut env, from, msg);
            }
            Input::Timer { token } => {
                let (server, mut env) = self.env(host);
                server.on_timer(&mut env, token);
            }
            Input::Peer { from, seq: Seq::Nth(seq), msg } => {
                if msg.ephemeral() || msg.transient() {
                    return Stepped::Misframed;
                }
                let last = self.delivered[from.idx()];
                if seq <= last {
                    return Stepped::Duplicate;
                }
                if seq != last + 1 {
                    return Stepped::Gap { expected: last + 1 };
                }
                self.delivered[from.idx()] = seq;
                let (server, mut env) = self.env(host);
                server.on_peer(&mut env, from, msg);
                // The delivery mark follows everything handling it did.
                self.mark_meta();
                self.marks.push(Mark::Journal(self.store.journal_len()));
                self.marks.push(Mark::Delivered { from, seq });
                self.dirty = true;
            }
            Input::Peer { from, seq: Seq::After(after), msg } => {
                if !msg.ephemeral() && !msg.transient() {
                    return Stepped::Misframed;
                }
                if self.delivered[from.idx()] + 1 < after {
                    return Stepped::Early;
                }
                let (server, mut env) = self.env(host);
                server.on_peer(&mut env, from, msg);
            }
        }
        Stepped::Handled
    }

    /// The handler environment: disjoint borrows of the node's parts.
    #[allow(clippy::type_complexity)]
    fn env<'a, H: Host>(&'a mut self, host: &'a mut H) -> (&'a mut P::Server, Env<'a, P::Msg, P::Version, H>) {
        let env = Env {
            node: self.id,
            store: &mut self.store,
            out: &mut self.out,
            marks: &mut self.marks,
            dirty: &mut self.dirty,
            sent_seq: &mut self.sent_seq,
            host,
        };
        (&mut self.server, env)
    }

    fn mark_meta(&mut self) {
        if let Some((bytes, sync)) = self.store.take_dirty_meta() {
            self.dirty |= sync;
            self.marks.push(Mark::Journal(self.store.journal_len()));
            self.marks.push(Mark::Meta(bytes));
        }
    }

    /// End the turn: what must be logged before its output may leave.
    pub fn ready(&mut self) -> Ready<'_, P> {
        self.mark_meta();
        let journal = self.store.take_journal(std::mem::take(&mut self.journal_spare));
        self.dirty |= !journal.is_empty();
        Ready { node: self, journal }
    }

    /// Everything up to turn `lsn` is durable: its output may leave
    /// ([`Node::released`]). Ignored once an append failed
    /// ([`Ready::append`]): the failed turn's records are not all in the
    /// log, so no later sync makes its output safe.
    pub fn advance(&mut self, lsn: u64) {
        assert!(lsn <= self.lsn, "turn {lsn} declared durable, but only {} were handed out", self.lsn);
        if self.log_failed {
            return;
        }
        self.durable_lsn = self.durable_lsn.max(lsn);
    }

    /// The output of every durable turn, oldest first.
    pub fn released(&mut self) -> std::collections::vec_deque::Drain<'_, Output<P::Msg>> {
        let mut n = 0;
        while let Some(&(lsn, count)) = self.held_turns.front() {
            if lsn > self.durable_lsn {
                break;
            }
            n += count;
            self.held_turns.pop_front();
        }
        self.held.drain(..n)
    }
}

/// A turn ended: its records, to be appended before anything else happens
/// to the node (it is borrowed until then).
pub struct Ready<'n, P: Protocol> {
    node: &'n mut Node<P>,
    journal: Vec<(KeyIndex, <P::Version as Versioned>::Order)>,
}

impl<P: Protocol> Ready<'_, P> {
    /// Whether the turn produced any record at all.
    pub fn has_records(&self) -> bool {
        !self.journal.is_empty() || !self.node.marks.is_empty()
    }

    /// Hand every record of the turn, in order, to `write` (which appends
    /// it to the log). On an error the turn's output stays held for good:
    /// a node whose log fails must acknowledge nothing more.
    pub fn append<E>(
        self,
        mut write: impl FnMut(Record<'_, P::Version, P::Msg>) -> Result<(), E>,
    ) -> Result<Appended, E> {
        let Ready { node, journal } = self;
        let mut from = 0;
        let marks = std::mem::take(&mut node.marks);
        let mut result = Ok(());
        let store = &node.store;
        type Write<'w, V, M, E> = dyn FnMut(Record<'_, V, M>) -> Result<(), E> + 'w;
        let mut versions = |upto: usize, write: &mut Write<'_, P::Version, P::Msg, E>| {
            for at in from..upto.min(journal.len()) {
                store.warm_ahead(&journal, at);
                let (index, order) = journal[at];
                // A version dropped since it was stored has nothing to log:
                // the store as it stands is what a replay must give back.
                if let Some((key, version)) = store.journaled(index, order) {
                    write(Record::Version { key, version })?;
                }
            }
            from = from.max(upto.min(journal.len()));
            Ok(())
        };
        for mark in &marks {
            let r = match mark {
                Mark::Journal(upto) => versions(*upto, &mut write),
                Mark::Meta(bytes) => write(Record::Meta { bytes }),
                Mark::Outbox(i) => match &node.out[*i] {
                    Output::Peer { to, seq, msg } => write(Record::Outbox { to: *to, seq: *seq, msg }),
                    _ => unreachable!("an outbox mark names a sequenced message"),
                },
                Mark::Delivered { from, seq } => write(Record::Delivered { from: *from, seq: *seq }),
            };
            if r.is_err() {
                result = r;
                break;
            }
        }
        if result.is_ok() {
            result = versions(usize::MAX, &mut write);
        }
        node.lsn += 1;
        let lsn = node.lsn;
        if result.is_ok() && (!marks.is_empty() || !journal.is_empty()) {
            result = write(Record::Commit { lsn });
        }
        node.journal_spare = journal;
        let mut marks = marks;
        marks.clear();
        node.marks = marks;
        if std::mem::take(&mut node.dirty) {
            node.dirty_lsn = lsn;
        }
        let count = node.out.len();
        node.held.extend(node.out.drain(..));
        if count > 0 {
            node.held_turns.push_back((lsn, count));
        }
        node.log_failed |= result.is_err();
        result?;
        let must_sync = node.dirty_lsn > node.durable_lsn;
        if node.options.mutant_release_before_sync {
            node.durable_lsn = lsn;
        }
        Ok(Appended { lsn, must_sync })
    }
}

/// The one [`ServerEnv`]: sends and replies are buffered as the turn's
/// output (sequenced messages numbered and marked for the outbox), the store
/// is the node's, and the clock, timers and observations are the host's.
struct Env<'a, M, V: Versioned, H> {
    node: NodeId,
    store: &'a mut MvStore<V>,
    out: &'a mut Vec<Output<M>>,
    marks: &'a mut Vec<Mark>,
    dirty: &'a mut bool,
    sent_seq: &'a mut Vec<u64>,
    host: &'a mut H,
}

impl<M: Message, V: Versioned + Clone, H: Host> ServerEnv<M, V> for Env<'_, M, V, H> {
    fn node(&self) -> NodeId {
        self.node
    }
    fn now_us(&self) -> u64 {
        self.host.now_us()
    }
    fn send(&mut self, to: NodeId, msg: M) {
        assert!(to != self.node, "{:?} sent a message to itself", self.node);
        assert!(to.idx() < self.sent_seq.len(), "{:?} sent to {to:?}, which is not in the topology", self.node);
        let next = self.sent_seq[to.idx()] + 1;
        if msg.ephemeral() || msg.transient() {
            self.out.push(Output::Unsequenced { to, after_seq: next, msg });
            return;
        }
        self.sent_seq[to.idx()] = next;
        self.marks.push(Mark::Journal(self.store.journal_len()));
        self.marks.push(Mark::Outbox(self.out.len()));
        *self.dirty = true;
        self.out.push(Output::Peer { to, seq: next, msg });
    }
    fn reply(&mut self, to: ClientId, msg: M) {
        self.out.push(Output::Reply { to, msg });
    }
    fn set_timer(&mut self, after_us: u64, token: u64) {
        self.host.set_timer(after_us, token);
    }
    fn store(&mut self) -> &mut MvStore<V> {
        self.store
    }
    fn observe(&mut self, obs: Observation<'_>) {
        self.host.observe(obs);
    }
    fn observe_visible_in_store(
        &mut self,
        origin: DcId,
        written_us: u64,
        read: impl for<'s> FnOnce(&'s MvStore<V>) -> Option<(&'s [u8], &'s V)>,
    ) {
        if let Some((key, v)) = read(self.store) {
            self.host.observe(Observation::Visible { key, value: v.value(), origin, written_us });
        }
    }
}

/// The durable state a node's records rebuild, from a list of owned
/// records: the simulator's log and tests keep records owned.
#[derive(Clone, Debug)]
pub enum OwnedRecord<V, M> {
    Version { key: Key, version: V },
    Meta { bytes: Vec<u8> },
    Outbox { to: NodeId, seq: u64, msg: M },
    Delivered { from: NodeId, seq: u64 },
    Commit { lsn: u64 },
}

impl<V: Clone, M: Clone> OwnedRecord<V, M> {
    pub fn of(r: &Record<'_, V, M>) -> Self {
        match r {
            Record::Version { key, version } => {
                OwnedRecord::Version { key: bytes::Bytes::copy_from_slice(key), version: (*version).clone() }
            }
            Record::Meta { bytes } => OwnedRecord::Meta { bytes: bytes.to_vec() },
            Record::Outbox { to, seq, msg } => OwnedRecord::Outbox { to: *to, seq: *seq, msg: (*msg).clone() },
            Record::Delivered { from, seq } => OwnedRecord::Delivered { from: *from, seq: *seq },
            Record::Commit { lsn } => OwnedRecord::Commit { lsn: *lsn },
        }
    }
    pub fn as_record(&self) -> Record<'_, V, M> {
        match self {
            OwnedRecord::Version { key, version } => Record::Version { key, version },
            OwnedRecord::Meta { bytes } => Record::Meta { bytes },
            OwnedRecord::Outbox { to, seq, msg } => Record::Outbox { to: *to, seq: *seq, msg },
            OwnedRecord::Delivered { from, seq } => Record::Delivered { from: *from, seq: *seq },
            OwnedRecord::Commit { lsn } => Record::Commit { lsn: *lsn },
        }
    }
}

#[cfg(test)]
mod tests {
    //! The node core with a toy protocol: a put stores a version, replies,
    //! and tells every peer; a peer's word stores it too.
    use super::*;
    use crate::protocol::{Client, ClientCtx, ClientEnv, Op, OpKind};
    use crate::topology::{Topology, TopologySpec};
    use bytes::Bytes;
    use serde::{Deserialize, Serialize};
    use std::sync::Arc;

    #[derive(Clone, Debug, Serialize, Deserialize)]
    enum Msg {
        Put(u64),
        Ack,
        Tell(u64),
        Beat,
    }
    impl Message for Msg {
        fn kind(&self) -> &'static str {
            "toy"
        }
        fn is_client(&self) -> bool {
            matches!(self, Msg::Put(_) | Msg::Ack)
        }
        fn is_write(&self) -> bool {
            matches!(self, Msg::Put(_))
        }
        fn payload_bytes(&self) -> usize {
            0
        }
        fn ephemeral(&self) -> bool {
            matches!(self, Msg::Beat)
        }
    }
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct V(u64, Bytes);
    impl Versioned for V {
        type Order = u64;
        fn order(&self) -> u64 {
            self.0
        }
        fn value(&self) -> &Bytes {
            &self.1
        }
    }
    struct Srv {
        peers: Vec<NodeId>,
    }
    impl Server for Srv {
        type Msg = Msg;
        type Version = V;
        fn on_client(&mut self, env: &mut impl ServerEnv<Msg, V>, from: ClientId, msg: Msg) {
            let Msg::Put(t) = msg else { return };
            env.store().insert(b"k", V(t, Bytes::from_static(b"v")));
            env.store().set_meta(t.to_le_bytes().to_vec());
            for &p in &self.peers {
                env.send(p, Msg::Tell(t));
                env.send(p, Msg::Beat);
            }
            env.reply(from, Msg::Ack);
        }
        fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, V>, _from: NodeId, msg: Msg) {
            if let Msg::Tell(t) = msg {
                env.store().insert(b"k", V(t, Bytes::from_static(b"r")));
            }
        }
        fn on_timer(&mut self, _env: &mut impl ServerEnv<Msg, V>, _token: u64) {}
    }
    struct Cli;
    impl Client for Cli {
        type Msg = Msg;
        fn invoke(&mut self, _env: &mut impl ClientEnv<Msg>, _op: Op) {}
        fn on_reply(&mut self, _env: &mut impl ClientEnv<Msg>, _from: NodeId, _msg: Msg) {}
    }
    struct Toy;
    impl Protocol for Toy {
        const NAME: &'static str = "toy";
        const OPS: &'static [OpKind] = &[OpKind::Put];
        const CAUSAL: bool = false;
        type Msg = Msg;
        type Version = V;
        type Config = ();
        type Server = Srv;
        type Client = Cli;
        fn server(_cfg: &(), ctx: NodeCtx) -> Srv {
            let peers = ctx.topology.node_ids().filter(|&n| n != ctx.id).collect();
            Srv { peers }
        }
        fn client(_cfg: &(), _ctx: ClientCtx) -> Cli {
            Cli
        }
    }

    #[derive(Default)]
    struct H;
    impl Host for H {
        fn now_us(&self) -> u64 {
            0
        }
        fn set_timer(&mut self, _after_us: u64, _token: u64) {}
        fn observe(&mut self, _obs: Observation<'_>) {}
    }

    fn topo() -> Arc<Topology> {
        Arc::new(Topology::new(TopologySpec::full(2, 1)).unwrap())
    }
    fn node(id: u32) -> Node<Toy> {
        let topology = topo();
        let ctx = NodeCtx { id: NodeId(id), role: topology.role(NodeId(id)), topology };
        let mut n = Node::new(&(), ctx, NodeOptions::default());
        n.start(&mut H);
        n
    }
    fn log(n: &mut Node<Toy>) -> (Appended, Vec<OwnedRecord<V, Msg>>) {
        let mut recs = Vec::new();
        let a = n
            .ready()
            .append::<()>(|r| {
                recs.push(OwnedRecord::of(&r));
                Ok(())
            })
            .unwrap();
        (a, recs)
    }

    #[test]
    fn output_leaves_only_after_its_turn_is_durable() {
        let mut n = node(0);
        let _ = log(&mut n);
        assert_eq!(n.step(&mut H, Input::Client { from: ClientId(7), msg: Msg::Put(5) }), Stepped::Handled);
        let (a, recs) = log(&mut n);
        assert!(a.must_sync);
        assert_eq!(n.released().count(), 0, "nothing leaves before advance");
        // The version, then the metadata, then the outbox record: a replay
        // of any prefix is a state the node passed through.
        assert!(matches!(recs[0], OwnedRecord::Version { .. }), "{recs:?}");
        assert!(matches!(recs[1], OwnedRecord::Outbox { seq: 1, .. }), "{recs:?}");
        assert!(matches!(recs[recs.len() - 2], OwnedRecord::Meta { .. }), "{recs:?}");
        assert!(matches!(recs.last(), Some(OwnedRecord::Commit { lsn }) if *lsn == a.lsn), "{recs:?}");
        n.advance(a.lsn);
        let out: Vec<_> = n.released().collect();
        assert_eq!(out.len(), 3, "{out:?}");
        assert!(matches!(out[0], Output::Peer { seq: 1, .. }));
        assert!(matches!(out[1], Output::Unsequenced { after_seq: 2, .. }));
        assert!(matches!(out[2], Output::Reply { to: ClientId(7), .. }));
    }

    #[test]
    fn a_read_only_turn_waits_for_the_unsynced_turn_before_it() {
        let mut n = node(0);
        let _ = log(&mut n);
        n.step(&mut H, Input::Client { from: ClientId(1), msg: Msg::Put(5) });
        let (first, _) = log(&mut n);
        // A turn with no records of its own still may not overtake.
        n.step(&mut H, Input::Client { from: ClientId(2), msg: Msg::Beat });
        let (second, recs) = log(&mut n);
        assert!(recs.is_empty());
        assert!(second.must_sync, "an earlier turn is not yet durable");
        n.advance(first.lsn);
        assert_eq!(n.released().count(), 3);
        n.advance(second.lsn);
        assert_eq!(n.released().count(), 0);
    }

    #[test]
    fn peer_messages_are_handled_once_in_order_and_marked_after_their_effects() {
        let mut n = node(1);
        let _ = log(&mut n);
        let tell = |seq| Input::Peer { from: NodeId(0), seq: Seq::Nth(seq), msg: Msg::Tell(seq) };
        assert_eq!(n.step(&mut H, tell(2)), Stepped::Gap { expected: 1 });
        assert_eq!(n.step(&mut H, tell(1)), Stepped::Handled);
        assert_eq!(n.step(&mut H, tell(1)), Stepped::Duplicate);
        let beat = |after| Input::Peer { from: NodeId(0), seq: Seq::After(after), msg: Msg::Beat };
        assert_eq!(n.step(&mut H, beat(3)), Stepped::Early);
        assert_eq!(n.step(&mut H, beat(2)), Stepped::Handled);
        let (_, recs) = log(&mut n);
        assert!(matches!(recs[0], OwnedRecord::Version { .. }));
        assert!(matches!(recs[1], OwnedRecord::Delivered { seq: 1, .. }));
        assert_eq!(n.delivered()[0], 1);
    }

    #[test]
    fn recovery_from_the_records_gives_back_the_durable_state() {
        let mut n = node(0);
        let mut all = Vec::new();
        for t in 1..=3 {
            n.step(&mut H, Input::Client { from: ClientId(1), msg: Msg::Put(t) });
            all.extend(log(&mut n).1);
        }
        let mut d = Durable::<V, Msg>::empty(2);
        // A torn tail: the last turn's records without its commit.
        let torn = all.len() - 1;
        assert_eq!(d.replay(all[..torn].iter().map(|r| r.as_record())), 3, "the torn turn is dropped whole");
        assert_eq!(d.store.versions(b"k").len(), 2);
        let mut d = Durable::<V, Msg>::empty(2);
        assert_eq!(d.replay(all.iter().map(|r| r.as_record())), 0);
        assert_eq!(d.store.versions(b"k").len(), 3);
        assert_eq!(d.store.meta(), Some(&3u64.to_le_bytes()[..]));
        assert_eq!(d.sent_seq[1], 3);
        assert_eq!(d.outbox[1].len(), 3);
        d.acked(NodeId(1), 2);
        assert_eq!(d.outbox[1].len(), 1);
        let topology = topo();
        let ctx = NodeCtx { id: NodeId(0), role: topology.role(NodeId(0)), topology };
        let (mut back, outbox) = Node::<Toy>::recover(&(), ctx, d, NodeOptions::default());
        assert_eq!(outbox[1].len(), 1);
        back.start(&mut H);
        back.step(&mut H, Input::Client { from: ClientId(1), msg: Msg::Put(9) });
        let (_, recs) = log(&mut back);
        assert!(recs.iter().any(|r| matches!(r, OwnedRecord::Outbox { seq: 4, .. })), "numbering resumes: {recs:?}");
    }

    #[test]
    fn a_failed_append_holds_output_for_good() {
        let mut n = node(0);
        let _ = log(&mut n);
        n.step(&mut H, Input::Client { from: ClientId(1), msg: Msg::Put(5) });
        let mut written = 0;
        let failed = n.ready().append(|_| {
            if written == 1 {
                return Err("disk full");
            }
            written += 1;
            Ok(())
        });
        assert_eq!(failed, Err("disk full"));
        // A later turn that logs fine is declared durable: the failed
        // turn's reply and messages still never leave.
        n.step(&mut H, Input::Client { from: ClientId(2), msg: Msg::Put(6) });
        let (a, _) = log(&mut n);
        n.advance(a.lsn);
        assert_eq!(n.released().count(), 0);
        assert!(n.holds_output());
    }

    #[test]
    fn the_mutant_releases_before_its_records_are_durable() {
        let topology = topo();
        let ctx = NodeCtx { id: NodeId(0), role: topology.role(NodeId(0)), topology };
        let mut n = Node::<Toy>::new(&(), ctx, NodeOptions { mutant_release_before_sync: true });
        n.start(&mut H);
        n.step(&mut H, Input::Client { from: ClientId(1), msg: Msg::Put(1) });
        let (a, _) = log(&mut n);
        assert!(a.must_sync);
        assert_eq!(n.released().count(), 3);
    }
}
