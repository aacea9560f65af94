//! The microbenchmarks' harness (`examples/*_microbench.rs`): a protocol's
//! nodes driven in this process, one input at a time, each input's CPU
//! time measured and charged to its node and its message kind.
//!
//! The nodes are the real node core ([`Node`]), the one the simulator and
//! the network runtime drive, so a measured input costs what it costs
//! there minus sockets, threads and the disk:
//!
//! - decoding its frame with the network runtime's codec
//!   ([`causeway_net::frame`]);
//! - the node's step: the protocol's handler and the node core's per-channel
//!   bookkeeping (sequence numbers, delivery marks, outbox marks);
//! - logging the turn's records: each one encoded as the write-ahead log
//!   encodes a record (postcard, then a length and CRC-32 header) into a
//!   buffer reused from turn to turn ([`LogEncoder`]). The encoding is
//!   counted because the network runtime pays it on its event loop for
//!   every record; the write to the file and the sync are not, since they
//!   are the disk's time, not the protocol's;
//! - encoding every message and reply the turn released.
//!
//! Every turn is declared durable as soon as it is logged. Client work is
//! not counted. [`closed_loop`] adds closed-loop sessions running the
//! protocols' own clients over a simulator workload.

pub mod closed_loop;

use causeway_core::{
    ClientId, Host, Message, Node, NodeCtx, NodeId, NodeInput, NodeOptions, Observation, Output, Protocol, Record, Seq,
    Stepped, Topology, Versioned, wire_size,
};
use causeway_net::frame::{Wire, decode, encode};
use serde::Serialize;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

/// Per message kind at the servers: inputs handled, their bytes on the
/// wire (each message's [`wire_size`]) and the ns they took.
#[derive(Clone, Copy, Default, Debug)]
pub struct KindStat {
    pub n: u64,
    pub bytes: u64,
    pub ns: u64,
    /// The items the messages carried ([`Message::items`]; 0 for timers).
    pub items: u64,
}

/// A frame between a client and a node or between nodes, encoded as the
/// network runtime sends it (4-byte length, then the body).
#[derive(Debug)]
pub enum Delivery {
    /// A client session's request to a node.
    Request { client: ClientId, to: NodeId, frame: Vec<u8> },
    /// A peer message (one per frame), sequenced or not.
    Peer { from: NodeId, to: NodeId, frame: Vec<u8> },
    /// A node's answer to a client session.
    Reply { client: ClientId, from: NodeId, frame: Vec<u8> },
}

/// Decode a reply frame (client-side work, not measured).
pub fn decode_reply<M: Message>(frame: &[u8]) -> M {
    match decode::<M>(&frame[4..]).expect("a frame the harness encoded") {
        Wire::Reply(m) => m,
        _ => unreachable!("replies are replies"),
    }
}

/// Encode a client's request frame (client-side work, not measured).
pub fn encode_request<M: Message>(msg: M) -> Vec<u8> {
    encode(&Wire::Request(msg))
}

/// Run `reps` rounds of every variant, each round starting with the next
/// variant (`run(variant, round)`, rounds numbered from 1), so that drift
/// in a shared machine's load favours none of them; reports each round's
/// end on stderr.
pub fn alternating_rounds(reps: u64, variants: usize, mut run: impl FnMut(usize, u64)) {
    let started = std::time::Instant::now();
    for rep in 0..reps {
        for k in 0..variants {
            run((k + rep as usize) % variants, rep + 1);
        }
        eprintln!("repetition {}/{} done ({:.0} s)", rep + 1, reps, started.elapsed().as_secs_f64());
    }
}

/// The median (NaN for none).
pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 }
}

/// A protocol's nodes and what their inputs cost.
pub struct Servers<P: Protocol> {
    nodes: Vec<Node<P>>,
    /// The virtual clock every node reads, in µs; the driver moves it.
    pub now_us: u64,
    /// What the inputs handled released, in order: the driver delivers it.
    pub out: Vec<Delivery>,
    /// Timers set by the inputs handled: `(due µs, node, token)`; the
    /// driver fires them ([`Servers::timer`]).
    pub timers: Vec<(u64, NodeId, u64)>,
    /// Per message kind (`"start"`, `"timer"`, or the message's kind).
    pub kinds: BTreeMap<&'static str, KindStat>,
    /// Per node, ns spent on its inputs.
    pub busy_ns: Vec<u64>,
    /// Per node, its inputs per kind (the same as `kinds`, split by node).
    pub node_kinds: Vec<BTreeMap<&'static str, KindStat>>,
    /// The protocols' [`Observation::Sample`]s: count and sum per name.
    pub samples: BTreeMap<&'static str, (u64, u64)>,
    log: LogEncoder,
    set: Vec<(u64, u64)>,
}

impl<P: Protocol> Servers<P> {
    /// Every node of `topology`, started (their starts are measured as
    /// kind `"start"`), the clock at `now_us`.
    pub fn new(topology: &Arc<Topology>, cfg: &P::Config, now_us: u64) -> Self {
        P::validate(cfg, topology).expect("valid protocol config");
        let nodes: Vec<Node<P>> = topology
            .node_ids()
            .map(|id| {
                let ctx = NodeCtx { id, role: topology.role(id), topology: topology.clone() };
                Node::new(cfg, ctx, NodeOptions::default())
            })
            .collect();
        let n = nodes.len();
        let mut s = Servers {
            nodes,
            now_us,
            out: Vec::new(),
            timers: Vec::new(),
            kinds: BTreeMap::new(),
            busy_ns: vec![0; n],
            node_kinds: vec![BTreeMap::new(); n],
            samples: BTreeMap::new(),
            log: LogEncoder::default(),
            set: Vec::new(),
        };
        for i in 0..n {
            s.turn(NodeId(i as u32), Turn::Start);
        }
        s
    }

    /// Deliver a request or peer frame to its node.
    pub fn deliver(&mut self, d: Delivery) {
        match d {
            Delivery::Request { client, to, frame } => self.turn(to, Turn::Request(client, frame)),
            Delivery::Peer { from, to, frame } => self.turn(to, Turn::Peer(from, frame)),
            Delivery::Reply { .. } => panic!("a reply goes to a client, not a node"),
        }
    }

    /// Fire timer `token` of `node`.
    pub fn timer(&mut self, node: NodeId, token: u64) {
        self.turn(node, Turn::Timer(token));
    }

    /// Forget what was measured (not the nodes' state).
    pub fn reset_stats(&mut self) {
        self.kinds.clear();
        self.samples.clear();
        self.busy_ns.iter_mut().for_each(|ns| *ns = 0);
        self.node_kinds.iter_mut().for_each(|k| k.clear());
    }

    /// One measured turn of `node`: decode, step, log, encode.
    fn turn(&mut self, node: NodeId, input: Turn) {
        let i = node.idx();
        let t0 = Instant::now();
        let mut host = BenchHost { now_us: self.now_us, timers: &mut self.set, samples: &mut self.samples };
        let n = &mut self.nodes[i];
        let (mut kind, mut bytes, mut items) = ("timer", 0, 0);
        match input {
            Turn::Start => {
                kind = "start";
                n.start(&mut host);
            }
            Turn::Timer(token) => step(n, &mut host, NodeInput::Timer { token }),
            Turn::Request(from, frame) => match decode::<P::Msg>(&frame[4..]).expect("a frame") {
                Wire::Request(msg) => {
                    (kind, bytes, items) = (msg.kind(), wire_size(&msg), msg.items());
                    step(n, &mut host, NodeInput::Client { from, msg });
                }
                _ => unreachable!("client frames are requests"),
            },
            Turn::Peer(from, frame) => match decode::<P::Msg>(&frame[4..]).expect("a frame") {
                Wire::Peer { first_seq, msgs } => {
                    for (seq, msg) in (first_seq..).zip(msgs) {
                        (kind, bytes, items) = (msg.kind(), wire_size(&msg), msg.items());
                        step(n, &mut host, NodeInput::Peer { from, seq: Seq::Nth(seq), msg });
                    }
                }
                Wire::Ephemeral { after_seq, msg } => {
                    (kind, bytes, items) = (msg.kind(), wire_size(&msg), msg.items());
                    step(n, &mut host, NodeInput::Peer { from, seq: Seq::After(after_seq), msg });
                }
                _ => unreachable!("peer frames are batches or ephemeral messages"),
            },
        }
        let log = &mut self.log;
        let Ok(appended) = n.ready().append(|r| {
            log.encode(&r);
            Ok::<_, Infallible>(())
        });
        n.advance(appended.lsn);
        for o in n.released() {
            self.out.push(match o {
                Output::Peer { to, seq, msg } => {
                    Delivery::Peer { from: node, to, frame: encode(&Wire::Peer { first_seq: seq, msgs: vec![msg] }) }
                }
                Output::Unsequenced { to, after_seq, msg } => {
                    Delivery::Peer { from: node, to, frame: encode(&Wire::Ephemeral { after_seq, msg }) }
                }
                Output::Reply { to, msg } => {
                    Delivery::Reply { client: to, from: node, frame: encode(&Wire::Reply(msg)) }
                }
            });
        }
        let ns = t0.elapsed().as_nanos() as u64;
        self.busy_ns[i] += ns;
        for k in [self.kinds.entry(kind).or_default(), self.node_kinds[i].entry(kind).or_default()] {
            k.n += 1;
            k.bytes += bytes as u64;
            k.ns += ns;
            k.items += items as u64;
        }
        for (after_us, token) in self.set.drain(..) {
            self.timers.push((self.now_us + after_us, node, token));
        }
    }
}

/// Feed one input to a node: the harness delivers every channel's frames
/// once and in order, so the node handles each.
fn step<P: Protocol>(n: &mut Node<P>, host: &mut BenchHost<'_>, input: NodeInput<P::Msg>) {
    let stepped = n.step(host, input);
    assert_eq!(stepped, Stepped::Handled, "frames are delivered once, in order");
}

/// One input of a node, as it arrives.
enum Turn {
    Start,
    Timer(u64),
    Request(ClientId, Vec<u8>),
    Peer(NodeId, Vec<u8>),
}

/// What the harness lends a node for a turn: the virtual clock, where its
/// timers go, and the sample counters.
struct BenchHost<'a> {
    now_us: u64,
    timers: &'a mut Vec<(u64, u64)>,
    samples: &'a mut BTreeMap<&'static str, (u64, u64)>,
}

impl Host for BenchHost<'_> {
    fn now_us(&self) -> u64 {
        self.now_us
    }
    fn set_timer(&mut self, after_us: u64, token: u64) {
        self.timers.push((after_us, token));
    }
    fn observe(&mut self, obs: Observation<'_>) {
        if let Observation::Sample { what, value } = obs {
            let e = self.samples.entry(what).or_default();
            e.0 += 1;
            e.1 += value;
        }
    }
}

/// Encodes log records as the write-ahead log frames them — a length and
/// a CRC-32 of the payload, then the payload, postcard — into one buffer
/// that is cleared, not written, before each record: the CPU the network
/// runtime spends on a record before its write.
#[derive(Default)]
pub struct LogEncoder {
    buf: Vec<u8>,
    /// Records and bytes encoded so far.
    pub records: u64,
    pub bytes: u64,
}

/// A record as the log encodes it: the key and metadata as byte strings.
#[derive(Serialize)]
enum LogFrame<'a, V, M> {
    Version { key: ByteStr<'a>, version: &'a V },
    Outbox { to: NodeId, seq: u64, msg: &'a M },
    Delivered { from: NodeId, seq: u64 },
    Meta { bytes: ByteStr<'a> },
    Commit { lsn: u64 },
}

struct ByteStr<'a>(&'a [u8]);

impl Serialize for ByteStr<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

impl LogEncoder {
    pub fn encode<V: Versioned + Serialize, M: Serialize>(&mut self, r: &Record<'_, V, M>) {
        let frame = match *r {
            Record::Version { key, version } => LogFrame::Version { key: ByteStr(key), version },
            Record::Outbox { to, seq, msg } => LogFrame::Outbox { to, seq, msg },
            Record::Delivered { from, seq } => LogFrame::Delivered { from, seq },
            Record::Meta { bytes } => LogFrame::Meta { bytes: ByteStr(bytes) },
            Record::Commit { lsn } => LogFrame::Commit { lsn },
        };
        self.buf.clear();
        self.buf.extend_from_slice(&[0; 8]);
        // `to_io` appends byte strings whole (`to_extend` pushes them a byte
        // at a time, which the runtime's encoder avoids too).
        postcard::to_io(&frame, &mut self.buf).expect("a record encodes into memory");
        let len = u32::try_from(self.buf.len() - 8).expect("a record stays under 4 GiB");
        let crc = crc32fast::hash(&self.buf[8..]);
        self.buf[..4].copy_from_slice(&len.to_be_bytes());
        self.buf[4..8].copy_from_slice(&crc.to_be_bytes());
        self.records += 1;
        self.bytes += self.buf.len() as u64;
    }
}

/// A calibrated cost model, as the cost file an experiment names with
/// `cpu_costs`: per protocol, per message kind, µs (already scaled).
pub type KindCosts<'a> = BTreeMap<&'a str, Vec<(&'a str, f64)>>;

/// Write the cost file experiments name with `cpu_costs`: `header` (comment
/// lines on what was measured, without the `#`), a `[measured]` table saying
/// when, on what code and machine and by which `command`, and the `[cpu]`
/// model with `service_us = 0` (the fixed cost of a message on a real network
/// stack is not measured in-process; an experiment that needs it sets it).
pub fn write_cost_file(
    path: &std::path::Path,
    header: &str,
    command: &str,
    scale: f64,
    us_per_kib: f64,
    kind_us: &KindCosts<'_>,
) {
    use std::fmt::Write;
    let mut s = String::new();
    for line in header.lines() {
        let _ = writeln!(s, "# {line}");
    }
    let crate::provenance::Provenance { date, commit, machine } = crate::provenance::Provenance::now();
    let _ = writeln!(s, "\n[measured]");
    let _ = writeln!(s, "date = {date:?}\ncommit = {commit:?}\nmachine = {machine:?}\ncommand = {command:?}");
    let _ = writeln!(s, "scale = {scale}\n\n[cpu]\nservice_us = 0\nus_per_kib = {us_per_kib}");
    for (proto, kinds) in kind_us {
        let _ = writeln!(s, "\n[cpu.kind_us.{proto}]");
        for (k, us) in kinds {
            let _ = writeln!(s, "{k} = {us:?}");
        }
    }
    std::fs::write(path, s).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    eprintln!("cost file written to {}", path.display());
}

/// Append to a cost file written by [`write_cost_file`] the per-item
/// costs (`[cpu.item_us.<protocol>]`, µs per item of a message of a kind,
/// already scaled) that `causeway_sim::scenario::CpuSpec::item_us` reads.
pub fn append_item_costs(path: &std::path::Path, item_us: &KindCosts<'_>) {
    use std::fmt::Write;
    let mut s = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    for (proto, kinds) in item_us {
        let _ = writeln!(s, "\n[cpu.item_us.{proto}]");
        for (k, us) in kinds {
            let _ = writeln!(s, "{k} = {us:?}");
        }
    }
    std::fs::write(path, s).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

#[cfg(test)]
mod tests {
    use super::closed_loop::ClosedLoop;
    use super::*;
    use causeway_core::{DcId, TopologySpec, Value};
    use causeway_protocols::baseline::eventual::{Eventual, Version};
    use causeway_sim::Workload;

    /// What a version record is charged is the log's own encoding of it:
    /// the same bytes as the write-ahead log frames.
    #[test]
    fn a_version_record_is_encoded_as_the_log_encodes_it() {
        let version = Version { value: Value::from_static(b"value"), ts: 42, dc: DcId(1) };
        let mut log = LogEncoder::default();
        log.encode::<Version, ()>(&Record::Version { key: b"key", version: &version });
        let mut wal = Vec::new();
        causeway_net::wal::frame_versions(b"key", std::slice::from_ref(&version), &mut wal);
        assert_eq!(log.buf, wal);
        assert_eq!((log.records, log.bytes), (1, wal.len() as u64));
    }

    /// Sessions in one DC of two write and read through the node core:
    /// operations complete, each input is charged to its kind, the writes
    /// are logged, and they replicate to the other DC.
    #[test]
    fn a_closed_loop_runs_operations_through_the_node_core() {
        let topology = Arc::new(Topology::new(TopologySpec::full(2, 2)).expect("valid topology"));
        let workload = Workload { clients_per_dc: 4, recordcount: 100, ..Workload::default() };
        let mut h = ClosedLoop::<Eventual>::new(topology, &Default::default(), workload, vec![DcId(0); 4], 7, 2);
        h.run_ops(200);
        assert!(h.completed >= 200 && h.failed == 0, "{} completed, {} failed", h.completed, h.failed);
        let kinds = &h.servers.kinds;
        for kind in ["put_req", "get_req", "replicate"] {
            assert!(kinds.get(kind).is_some_and(|k| k.n > 0 && k.ns > 0), "{kind}: {kinds:?}");
        }
        assert!(h.servers.log.records >= kinds["put_req"].n, "every write logged");
        assert!(h.servers.busy_ns.iter().all(|&ns| ns > 0), "every node worked");
    }

    /// A workload the protocol refuses entirely (COPS offers no ROTs)
    /// completes every operation at once: the loop says so by name instead
    /// of recursing until the stack overflows.
    #[test]
    #[should_panic(expected = "operations all complete at once")]
    fn a_workload_the_protocol_refuses_is_named_not_a_stack_overflow() {
        let topology = Arc::new(Topology::new(TopologySpec::full(1, 2)).expect("valid topology"));
        let workload = Workload {
            clients_per_dc: 1,
            recordcount: 100,
            readproportion: 0.0,
            updateproportion: 0.0,
            rotproportion: 1.0,
            ..Workload::default()
        };
        ClosedLoop::<causeway_protocols::cops::Cops>::new(topology, &Default::default(), workload, vec![DcId(0)], 7, 2);
    }
}
