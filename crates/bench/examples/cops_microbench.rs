//! Lloyd Table 7.2 on the real state machines: the CPU
//! time COPS and COPS-GT servers spend per `write_after` (1 and 130
//! dependencies) and per `read_by_version`, and the ratios the paper reports
//! as throughputs (COPS-GT/COPS write with 1 dependency 24/30, COPS-GT with
//! 130 dependencies / 1 dependency 20/24, reads 52/52).
//!
//! ```text
//! cargo run --release -p causeway-bench --example cops_microbench [-- --reps 5 --ops 100000]
//! ```
//!
//! Setup, as the paper's: 2 DCs × 1 server (so every `dep_check` is a local
//! call), 2^18 keys loaded first, 10-byte values (the workload's minimum; the
//! paper used 1 B), keys written and read uniformly. The two servers are the
//! protocols' own servers in the real node core, driven in this process by
//! the harness of [`causeway_bench::microbench`]: a request is encoded and
//! decoded with the network runtime's wire codec, stepped, its log records
//! encoded, and every message the server sends is encoded; peer messages are
//! decoded and handled by the other server at once. Each server's time is
//! measured around exactly that work (decode, node step, log encoding,
//! encode, its timers), so it is the CPU cost of one server's protocol,
//! bookkeeping and codec work per operation — without sockets, threads, the
//! log's writes and syncs, or the client library, which the paper's numbers
//! include.
//!
//! Virtual time advances 40 µs per operation (25 K writes/s, the paper's
//! COPS-RT rate), so COPS-GT keeps overwritten versions for `trans_time`
//! (5 s) and garbage-collects them every 100 ms, as it would at that rate.
//! A write's dependencies are what a writing session's context holds: with
//! 1 dependency, its previous write; with 130, its previous 130 writes, of
//! which (for COPS-GT) only the newest is *nearest*, so the remote DC checks
//! one and COPS checks all 130.
//!
//! Protocols, cases and repetitions alternate; medians over repetitions.
//!
//! The paper's throughputs include a Thrift RPC per operation (its ping
//! alone: 60 Kops/s, 16.7 µs), which these figures do not; the last table
//! adds that constant to each operation to show how much of the ratio it
//! would absorb. That column is arithmetic on the measurement, not a
//! measurement.

use causeway_bench::microbench::{Delivery, Servers, decode_reply, encode_request, median};
use causeway_core::{ClientId, Key, NodeId, Protocol, Topology, TopologySpec};
use causeway_protocols::cops::{self, Cops};
use causeway_protocols::cops_gt::{self, CopsGt};
use causeway_protocols::explicit_deps::replication::{Dep, Stamp};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

const KEYS: u64 = 1 << 18;
const VIRTUAL_US_PER_OP: u64 = 40;
const WARMUP_OPS: u64 = 50_000;

/// What the benchmark needs to speak each protocol's client side.
trait Variant: Protocol {
    const LABEL: &'static str;
    fn put(key: Key, value: causeway_core::Value, deps: Vec<Dep>) -> Self::Msg;
    fn get(key: Key) -> Self::Msg;
    fn put_stamp(reply: &Self::Msg) -> Option<Stamp>;
}

impl Variant for Cops {
    const LABEL: &'static str = "COPS";
    fn put(key: Key, value: causeway_core::Value, deps: Vec<Dep>) -> cops::Msg {
        cops::Msg::PutReq { key, value, deps }
    }
    fn get(key: Key) -> cops::Msg {
        cops::Msg::GetReq { key }
    }
    fn put_stamp(reply: &cops::Msg) -> Option<Stamp> {
        match reply {
            cops::Msg::PutReply { result: Ok(s) } => Some(*s),
            _ => None,
        }
    }
}

impl Variant for CopsGt {
    const LABEL: &'static str = "COPS-GT";
    fn put(key: Key, value: causeway_core::Value, deps: Vec<Dep>) -> cops_gt::Msg {
        // A session's context after its own writes: each write depends on
        // the one before it, so only the newest is a nearest dependency.
        let nearest = if deps.is_empty() { vec![] } else { vec![deps.len() as u32 - 1] };
        // No session cut: the server keeps every dependency newer than its
        // checkpoint, which trails the 130 previous writes by a gossip round.
        cops_gt::Msg::PutReq { key, value, deps: deps.into(), nearest: cops_gt::Nearest::from_vec(nearest), cut: 0 }
    }
    fn get(key: Key) -> cops_gt::Msg {
        cops_gt::Msg::Read { attempt: 0, idx: 0, key, trans: false }
    }
    fn put_stamp(reply: &cops_gt::Msg) -> Option<Stamp> {
        match reply {
            cops_gt::Msg::PutReply { result: Ok((s, _)) } => Some(*s),
            _ => None,
        }
    }
}

/// Two DCs of one server each, cranked by hand.
struct Cluster<P: Variant> {
    servers: Servers<P>,
    /// `(due µs, node, token)`.
    timers: BinaryHeap<Reverse<(u64, NodeId, u64)>>,
    rng: u64,
}

impl<P: Variant> Cluster<P> {
    fn new(seed: u64) -> Self {
        let topology = Arc::new(Topology::new(TopologySpec::full(2, 1)).expect("valid topology"));
        let mut c = Cluster {
            servers: Servers::new(&topology, &P::Config::default(), 1_000_000),
            timers: BinaryHeap::new(),
            rng: seed | 1,
        };
        c.run();
        c
    }

    fn random_key(&mut self) -> Key {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        key((self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) % KEYS)
    }

    /// Deliver everything the servers released, and what that causes, at
    /// once; arm the timers they set. Returns the client reply, if any.
    fn run(&mut self) -> Option<P::Msg> {
        let mut reply = None;
        let mut work: VecDeque<Delivery> = VecDeque::new();
        loop {
            work.extend(self.servers.out.drain(..));
            for (due, node, token) in self.servers.timers.drain(..) {
                self.timers.push(Reverse((due, node, token)));
            }
            match work.pop_front() {
                None => return reply,
                Some(Delivery::Reply { frame, .. }) => reply = Some(decode_reply::<P::Msg>(&frame)),
                Some(d) => self.servers.deliver(d),
            }
        }
    }

    /// Advance virtual time by one operation, firing due timers.
    fn tick(&mut self) {
        self.servers.now_us += VIRTUAL_US_PER_OP;
        while let Some(&Reverse((due, node, token))) = self.timers.peek() {
            if due > self.servers.now_us {
                break;
            }
            self.timers.pop();
            self.servers.timer(node, token);
            self.run();
        }
    }

    fn request(&mut self, msg: P::Msg) -> Option<P::Msg> {
        self.tick();
        let frame = encode_request(msg);
        self.servers.deliver(Delivery::Request { client: ClientId(0), to: NodeId(0), frame });
        self.run()
    }

    /// One write of `key` with dependencies `deps`; its stamp.
    fn write(&mut self, key: Key, deps: Vec<Dep>) -> Stamp {
        let reply = self.request(P::put(key, causeway_core::Value::from_static(b"0123456789"), deps));
        reply.as_ref().and_then(P::put_stamp).expect("the write succeeds")
    }

    fn reset(&mut self) {
        self.servers.reset_stats();
    }

    /// (writes, dependencies) the servers reported since the last reset.
    fn deps(&self) -> (u64, u64) {
        self.servers.samples.get("deps_per_write").copied().unwrap_or((0, 0))
    }
}

fn key(i: u64) -> Key {
    Key::from(format!("user{i}"))
}

/// CPU per operation of each server, and mean dependencies per write.
#[derive(Clone, Copy, Default)]
struct Measured {
    origin_us: f64,
    remote_us: f64,
    deps: f64,
}

/// Writes whose dependencies are the session's previous `d` writes.
fn writes<P: Variant>(c: &mut Cluster<P>, d: usize, ops: u64) -> Measured {
    let mut window: VecDeque<Dep> = VecDeque::new();
    for phase in 0..2 {
        c.reset();
        let n = if phase == 0 { WARMUP_OPS } else { ops };
        for _ in 0..n {
            let k = c.random_key();
            let stamp = c.write(k.clone(), window.iter().cloned().collect());
            window.push_back(Dep { key: k, stamp });
            if window.len() > d {
                window.pop_front();
            }
        }
    }
    Measured {
        origin_us: c.servers.busy_ns[0] as f64 / ops as f64 / 1e3,
        remote_us: c.servers.busy_ns[1] as f64 / ops as f64 / 1e3,
        deps: c.deps().1 as f64 / c.deps().0.max(1) as f64,
    }
}

fn reads<P: Variant>(c: &mut Cluster<P>, ops: u64) -> Measured {
    c.reset();
    for _ in 0..ops {
        let k = c.random_key();
        c.request(P::get(k)).expect("a read reply");
    }
    Measured { origin_us: c.servers.busy_ns[0] as f64 / ops as f64 / 1e3, remote_us: 0.0, deps: 0.0 }
}

/// Load every key once, then the three cases of Table 7.2. Before the
/// reads, the cluster idles (timers only) for 6 s of virtual time, so that
/// COPS-GT has collected the dependencies of the 130-dependency writes, as
/// the paper's reads of settled keys would find them.
fn one_rep<P: Variant>(seed: u64, ops: u64) -> [Measured; 3] {
    let mut c = Cluster::<P>::new(seed);
    for i in 0..KEYS {
        c.write(key(i), vec![]);
    }
    let w1 = writes(&mut c, 1, ops);
    let w130 = writes(&mut c, 130, ops);
    for _ in 0..6_000_000 / VIRTUAL_US_PER_OP {
        c.tick();
    }
    [w1, w130, reads(&mut c, ops)]
}

/// Lloyd Table 7.2: COPS and COPS-GT server CPU per write_after and read_by_version.
#[derive(clap::Parser)]
#[command(args_override_self = true)]
struct Args {
    /// Repetitions (protocols alternate within each; medians over them).
    #[arg(long, default_value_t = 5)]
    reps: u64,
    /// Measured operations per case and repetition (after the warm-up writes).
    #[arg(long, default_value_t = 100_000)]
    ops: u64,
}

fn main() {
    let Args { reps, ops } = clap::Parser::parse();
    let started = Instant::now();
    // [protocol][case][rep]
    let mut all: [[Vec<Measured>; 3]; 2] = Default::default();
    for rep in 0..reps {
        // Alternate which protocol goes first, so drift in the machine's
        // load does not favour one.
        let order = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
        for p in order {
            let m = if p == 0 { one_rep::<Cops>(rep + 1, ops) } else { one_rep::<CopsGt>(rep + 1, ops) };
            for (case, x) in m.into_iter().enumerate() {
                all[p][case].push(x);
            }
        }
        eprintln!("repetition {}/{reps} done ({:.0} s)", rep + 1, started.elapsed().as_secs_f64());
    }
    let med = |p: usize, case: usize, f: fn(&Measured) -> f64| median(all[p][case].iter().map(f).collect());
    let names = [Cops::LABEL, CopsGt::LABEL];
    let cases = ["write_after (1 dep)", "write_after (130 deps)", "read_by_version"];
    println!(
        "{reps} repetitions × {ops} measured operations per case (after {WARMUP_OPS} warm-up writes), medians; \
         CPU µs per operation of each server (decode + node step + log encoding + encode + timers)\n"
    );
    println!("| system | operation | deps/write | origin DC µs/op | remote DC µs/op | bottleneck Kops/s |");
    println!("|---|---|---:|---:|---:|---:|");
    let mut kops = [[0.0; 3]; 2];
    for p in 0..2 {
        for case in 0..3 {
            let o = med(p, case, |m| m.origin_us);
            let r = med(p, case, |m| m.remote_us);
            let d = med(p, case, |m| m.deps);
            kops[p][case] = 1e3 / o.max(r);
            let dcol = if case == 2 { "–".to_string() } else { format!("{d:.1}") };
            let rcol = if case == 2 { "–".to_string() } else { format!("{r:.2}") };
            println!("| {} | {} | {dcol} | {o:.2} | {rcol} | {:.0} |", names[p], cases[case], kops[p][case]);
        }
    }
    println!("\nRatios of the bottleneck server's throughput (paper, Table 7.2, in parentheses):\n");
    println!("| ratio | measured | paper |");
    println!("|---|---:|---:|");
    println!("| COPS-GT / COPS, write_after 1 dep | {:.2} | 0.80 (24/30) |", kops[1][0] / kops[0][0]);
    println!("| COPS-GT 130 deps / 1 dep | {:.2} | 0.83 (20/24) |", kops[1][1] / kops[1][0]);
    println!("| COPS 130 deps / 1 dep | {:.2} | – (not measured) |", kops[0][1] / kops[0][0]);
    println!("| COPS-GT / COPS, read_by_version | {:.2} | 1.00 (52/52) |", kops[1][2] / kops[0][2]);
    println!("| COPS read / write_after 1 dep | {:.2} | 1.73 (52/30) |", kops[0][2] / kops[0][0]);
    // The paper's Thrift ping: 60 Kops/s.
    let rpc_us = 1e3 / 60.0;
    let with_rpc = |p: usize, case: usize| 1e3 / (1e3 / kops[p][case] + rpc_us);
    println!("\nThe same ratios with the paper's Thrift ping cost ({rpc_us:.1} µs) added to every operation:\n");
    println!("| ratio | with RPC cost | paper |");
    println!("|---|---:|---:|");
    println!("| COPS-GT / COPS, write_after 1 dep | {:.2} | 0.80 |", with_rpc(1, 0) / with_rpc(0, 0));
    println!("| COPS-GT 130 deps / 1 dep | {:.2} | 0.83 |", with_rpc(1, 1) / with_rpc(1, 0));
    println!("| COPS-GT / COPS, read_by_version | {:.2} | 1.00 |", with_rpc(1, 2) / with_rpc(0, 2));
    eprintln!("done in {:.0} s", started.elapsed().as_secs_f64());
}
