//! Seed 004 (Didona et al., Contrarian vs CC-LO vs Cure) on the real state
//! machines: the CPU time a server spends per message it handles, per
//! message kind, for each protocol under the paper's default workload, and
//! the simulator's CPU cost model (`[scenario.cpu] service_us` per message +
//! `us_per_kib` per KiB of it) fitted to those measurements.
//!
//! ```text
//! cargo run --release -p causeway-bench --example rot_microbench [-- --reps 3 --ops 60000 --clients 64 --zipf 0.99 --w 0.05]
//! ```
//!
//! Setup: one DC of 8 partitions (`--dcs 2` for two), `--clients` closed-loop
//! sessions running the protocols' own [`Client`]s, the paper's workload
//! (Table 1 defaults: ROTs of 4 keys on 4 distinct partitions, write ratio
//! w = #PUT / (#PUT + #keys read) = 0.05, 8-byte values (here 10, the
//! workload's minimum), zipfian 0.99 over the key space), drawn by the
//! simulator's own generator. Every message is delivered at once, FIFO, in
//! this process. A server's time is measured around exactly its work on one
//! input: decoding the frame with the network runtime's codec
//! ([`causeway_net::frame`]), the handler, and encoding what it sends —
//! without sockets, threads or the write-ahead log. Client work is not
//! counted. Virtual time advances `--us-per-msg` (default 2) µs per message
//! delivered, so timers (Contrarian's and Cure's 5 ms stabilization, CC-LO's
//! 500 ms reader TTL) fire at a plausible rate.
//!
//! Output: per protocol, CPU µs per operation (all servers), messages and
//! KiB per operation; per message kind, count, mean size and mean µs; then
//! the least-squares fit µs = a + b × KiB over every (protocol, kind) mean,
//! weighted by count, and how well that model predicts each protocol's
//! measured CPU per operation. Protocols and repetitions alternate; medians
//! over repetitions.

use causeway_core::{
    Client as _, ClientCtx, ClientId, DcId, Message, MvStore, NodeCtx, NodeId, Observation, OpResult, Protocol,
    Server as _, ServerEnv, Topology, TopologySpec, wire_size,
};
use causeway_net::frame::{Wire, decode, encode};
use causeway_protocols::{cc_lo::CcLo, contrarian::Contrarian, cure::Cure};
use causeway_sim::Workload;
use causeway_sim::scenario::Distribution;
use causeway_sim::workload::Generator;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

#[derive(Clone, Copy)]
struct Opts {
    reps: u64,
    ops: u64,
    clients: u32,
    dcs: u16,
    partitions: u32,
    zipf: f64,
    w: f64,
    us_per_msg: u64,
    scale: f64,
}

/// Per message kind at the servers: count, bytes, ns.
#[derive(Clone, Copy, Default, Debug)]
struct KindStat {
    n: u64,
    bytes: u64,
    ns: u64,
}

enum Delivery {
    Client { client: usize, to: NodeId, bytes: Vec<u8> },
    Peer { from: NodeId, to: NodeId, bytes: Vec<u8> },
    Reply { client: usize, from: NodeId, bytes: Vec<u8> },
    Timer { token: u64 },
}

struct SEnv<'a, V: causeway_core::Versioned> {
    node: NodeId,
    now: u64,
    store: &'a mut MvStore<V>,
    out: &'a mut Vec<(Option<NodeId>, Option<usize>, Vec<u8>)>,
    timers: &'a mut Vec<(u64, u64)>,
    samples: &'a mut BTreeMap<&'static str, (u64, u64)>,
}

impl<M: serde::Serialize, V: causeway_core::Versioned + Clone> ServerEnv<M, V> for SEnv<'_, V> {
    fn node(&self) -> NodeId {
        self.node
    }
    fn now_us(&self) -> u64 {
        self.now
    }
    fn send(&mut self, to: NodeId, msg: M) {
        self.out.push((Some(to), None, encode(&Wire::Peer { first_seq: 0, msgs: vec![msg] })));
    }
    fn reply(&mut self, to: ClientId, msg: M) {
        self.out.push((None, Some(to.0 as usize), encode(&Wire::Reply(msg))));
    }
    fn set_timer(&mut self, after_us: u64, token: u64) {
        self.timers.push((self.now + after_us, token));
    }
    fn store(&mut self) -> &mut MvStore<V> {
        self.store
    }
    fn observe(&mut self, obs: Observation<'_>) {
        if let Observation::Sample { what, value } = obs {
            let e = self.samples.entry(what).or_default();
            e.0 += 1;
            e.1 += value;
        }
    }
}

struct CEnv<'a, M> {
    now: u64,
    out: &'a mut Vec<(NodeId, M)>,
    timers: &'a mut Vec<(u64, u64)>,
    done: &'a mut Option<OpResult>,
}

impl<M> causeway_core::ClientEnv<M> for CEnv<'_, M> {
    fn now_us(&self) -> u64 {
        self.now
    }
    fn send(&mut self, to: NodeId, msg: M) {
        self.out.push((to, msg));
    }
    fn set_timer(&mut self, after_us: u64, token: u64) {
        self.timers.push((self.now + after_us, token));
    }
    fn complete(&mut self, result: OpResult) {
        *self.done = Some(result);
    }
}

struct Harness<P: Protocol> {
    opts: Opts,
    workload: Workload,
    generator: Generator,
    rng: ChaCha8Rng,
    servers: Vec<P::Server>,
    stores: Vec<MvStore<P::Version>>,
    clients: Vec<P::Client>,
    client_dc: Vec<DcId>,
    now: u64,
    /// (due, is client, index, token)
    timers: BinaryHeap<Reverse<(u64, bool, u32, u64)>>,
    queue: VecDeque<Delivery>,
    kinds: BTreeMap<&'static str, KindStat>,
    samples: BTreeMap<&'static str, (u64, u64)>,
    completed: u64,
    failed: u64,
    write_id: u64,
}

impl<P: Protocol> Harness<P> {
    fn new(opts: Opts, params: &str, seed: u64) -> Self {
        let topology = Arc::new(Topology::new(TopologySpec::full(opts.dcs, opts.partitions)).expect("valid topology"));
        let cfg: P::Config = toml::from_str(params).expect("valid protocol parameters");
        P::validate(&cfg, &topology).expect("valid config");
        let servers: Vec<P::Server> = topology
            .node_ids()
            .map(|id| P::server(&cfg, NodeCtx { id, role: topology.role(id), topology: topology.clone() }))
            .collect();
        // w = u / (u + 4 r) with u + r = 1 (every ROT reads 4 keys).
        let u = 4.0 * opts.w / (1.0 + 3.0 * opts.w);
        let workload = Workload {
            clients_per_dc: opts.clients / opts.dcs as u32,
            recordcount: 100_000,
            readproportion: 0.0,
            updateproportion: u,
            rotproportion: 1.0 - u,
            rot_size: 4,
            rot_partitions: 4,
            requestdistribution: if opts.zipf > 0.0 { Distribution::Zipfian } else { Distribution::Uniform },
            zipfian_constant: if opts.zipf > 0.0 { opts.zipf } else { 0.99 },
            fieldlength: 10,
            ..Workload::default()
        };
        let n = workload.clients_per_dc as usize * opts.dcs as usize;
        let client_dc: Vec<DcId> = (0..n).map(|c| DcId((c % opts.dcs as usize) as u16)).collect();
        let clients = (0..n)
            .map(|c| {
                P::client(
                    &cfg,
                    ClientCtx {
                        id: ClientId(c as u32),
                        nonce: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (c as u64 + 1),
                        dc: client_dc[c],
                        topology: topology.clone(),
                    },
                )
            })
            .collect();
        let generator = Generator::new(&workload, topology.clone(), n as u64);
        let mut h = Harness {
            opts,
            workload,
            generator,
            rng: ChaCha8Rng::seed_from_u64(seed),
            stores: (0..servers.len()).map(|_| MvStore::new()).collect(),
            servers,
            clients,
            client_dc,
            now: 1_000_000,
            timers: BinaryHeap::new(),
            queue: VecDeque::new(),
            kinds: BTreeMap::new(),
            samples: BTreeMap::new(),
            completed: 0,
            failed: 0,
            write_id: 0,
        };
        for i in 0..h.servers.len() {
            h.server_input(NodeId(i as u32), None);
        }
        for c in 0..n {
            h.invoke(c);
        }
        h
    }

    fn invoke(&mut self, c: usize) {
        let mut wid = self.write_id;
        let req = self.generator.next_request(&self.workload, c as u64, self.client_dc[c], &mut self.rng, || {
            wid += 1;
            wid
        });
        self.write_id = wid;
        let op = req.ops.into_iter().next().expect("a request has an operation");
        self.client_input(c, |cl, env| cl.invoke(env, op));
    }

    fn client_input(&mut self, c: usize, f: impl FnOnce(&mut P::Client, &mut CEnv<'_, P::Msg>)) {
        let (mut out, mut timers, mut done) = (Vec::new(), Vec::new(), None);
        {
            let mut env = CEnv { now: self.now, out: &mut out, timers: &mut timers, done: &mut done };
            f(&mut self.clients[c], &mut env);
        }
        for (to, msg) in out {
            self.queue.push_back(Delivery::Client { client: c, to, bytes: encode(&Wire::Request(msg)) });
        }
        for (due, token) in timers {
            self.timers.push(Reverse((due, true, c as u32, token)));
        }
        if let Some(r) = done {
            if matches!(r, OpResult::Failed(_)) {
                self.failed += 1;
            }
            self.completed += 1;
            self.invoke(c);
        }
    }

    /// One timed input of a server: decode, handler, encode.
    fn server_input(&mut self, node: NodeId, input: Option<Delivery>) {
        let i = node.0 as usize;
        let (mut out, mut timers) = (Vec::new(), Vec::new());
        let t0 = Instant::now();
        let mut kind = "timer";
        let mut bytes = 0;
        {
            let mut env = SEnv {
                node,
                now: self.now,
                store: &mut self.stores[i],
                out: &mut out,
                timers: &mut timers,
                samples: &mut self.samples,
            };
            let server = &mut self.servers[i];
            match input {
                None => {
                    kind = "start";
                    server.on_start(&mut env)
                }
                Some(Delivery::Timer { token, .. }) => server.on_timer(&mut env, token),
                Some(Delivery::Client { client, bytes: b, .. }) => match decode::<P::Msg>(&b[4..]).expect("a frame") {
                    Wire::Request(m) => {
                        kind = m.kind();
                        bytes = wire_size(&m);
                        server.on_client(&mut env, ClientId(client as u32), m)
                    }
                    _ => unreachable!("client frames are requests"),
                },
                Some(Delivery::Peer { from, bytes: b, .. }) => match decode::<P::Msg>(&b[4..]).expect("a frame") {
                    Wire::Peer { msgs, .. } => {
                        for m in msgs {
                            kind = m.kind();
                            bytes = wire_size(&m);
                            server.on_peer(&mut env, from, m);
                        }
                    }
                    _ => unreachable!("peer frames are batches"),
                },
                Some(_) => unreachable!("not a server input"),
            }
        }
        let ns = t0.elapsed().as_nanos() as u64;
        let k = self.kinds.entry(kind).or_default();
        k.n += 1;
        k.bytes += bytes as u64;
        k.ns += ns;
        for (due, token) in timers {
            self.timers.push(Reverse((due, false, node.0, token)));
        }
        for (to, client, b) in out {
            match (to, client) {
                (Some(to), _) => self.queue.push_back(Delivery::Peer { from: node, to, bytes: b }),
                (None, Some(client)) => self.queue.push_back(Delivery::Reply { client, from: node, bytes: b }),
                _ => unreachable!(),
            }
        }
    }

    /// Deliver one message (or fire due timers); false when nothing is left.
    fn step(&mut self) -> bool {
        self.now += self.opts.us_per_msg;
        while let Some(&Reverse((due, is_client, idx, token))) = self.timers.peek() {
            if due > self.now {
                break;
            }
            self.timers.pop();
            if is_client {
                self.client_input(idx as usize, |cl, env| cl.on_timer(env, token));
            } else {
                self.server_input(NodeId(idx), Some(Delivery::Timer { token }));
            }
        }
        let Some(d) = self.queue.pop_front() else {
            return !self.timers.is_empty();
        };
        match d {
            Delivery::Client { to, .. } | Delivery::Peer { to, .. } => self.server_input(to, Some(d)),
            Delivery::Reply { client, from, bytes } => {
                let m = match decode::<P::Msg>(&bytes[4..]).expect("a frame") {
                    Wire::Reply(m) => m,
                    _ => unreachable!("replies are replies"),
                };
                self.client_input(client, |cl, env| cl.on_reply(env, from, m));
            }
            Delivery::Timer { .. } => unreachable!("timers are not queued"),
        }
        true
    }

    fn run_ops(&mut self, ops: u64) {
        let target = self.completed + ops;
        while self.completed < target {
            assert!(self.step(), "the cluster went idle");
        }
    }

    fn reset(&mut self) {
        self.kinds.clear();
        self.samples.clear();
        self.completed = 0;
        self.failed = 0;
    }
}

/// One protocol's measurement.
#[derive(Clone, Debug, Default)]
struct Measured {
    ops: u64,
    failed: u64,
    kinds: BTreeMap<&'static str, KindStat>,
    samples: BTreeMap<&'static str, (u64, u64)>,
}

impl Measured {
    fn total(&self) -> KindStat {
        self.kinds.values().fold(KindStat::default(), |a, k| KindStat {
            n: a.n + k.n,
            bytes: a.bytes + k.bytes,
            ns: a.ns + k.ns,
        })
    }
    fn us_per_op(&self) -> f64 {
        self.total().ns as f64 / 1e3 / self.ops as f64
    }
    fn msgs_per_op(&self) -> f64 {
        self.total().n as f64 / self.ops as f64
    }
    fn kib_per_op(&self) -> f64 {
        self.total().bytes as f64 / 1024.0 / self.ops as f64
    }
}

fn measure<P: Protocol>(opts: Opts, params: &str, seed: u64) -> Measured {
    let mut h = Harness::<P>::new(opts, params, seed);
    h.run_ops(opts.ops / 2);
    h.reset();
    h.run_ops(opts.ops);
    Measured { ops: h.completed, failed: h.failed, kinds: h.kinds.clone(), samples: h.samples.clone() }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 }
}

const VARIANTS: [(&str, &str); 4] = [
    ("contrarian (1½ rounds)", "rot_steps = 3"),
    ("contrarian (2 rounds)", "rot_steps = 4"),
    ("cclo", ""),
    ("cure", ""),
];

fn run_variant(v: usize, opts: Opts, seed: u64) -> Measured {
    match v {
        0 | 1 => measure::<Contrarian>(opts, VARIANTS[v].1, seed),
        2 => measure::<CcLo>(opts, VARIANTS[v].1, seed),
        _ => measure::<Cure>(opts, VARIANTS[v].1, seed),
    }
}

fn main() {
    let mut o = Opts {
        reps: 3,
        ops: 60_000,
        clients: 64,
        dcs: 1,
        partitions: 8,
        zipf: 0.99,
        w: 0.05,
        us_per_msg: 2,
        scale: 20.0,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for a in args.chunks(2) {
        let v = a.get(1).map(String::as_str).unwrap_or("");
        let bad = || -> ! {
            eprintln!(
                "usage: rot_microbench [--reps N] [--ops N] [--clients N] [--dcs N] [--partitions N] [--zipf Z] [--w W] \
                 [--us-per-msg N] [--scale F]"
            );
            std::process::exit(2)
        };
        match a[0].as_str() {
            "--reps" => o.reps = v.parse().unwrap_or_else(|_| bad()),
            "--ops" => o.ops = v.parse().unwrap_or_else(|_| bad()),
            "--clients" => o.clients = v.parse().unwrap_or_else(|_| bad()),
            "--dcs" => o.dcs = v.parse().unwrap_or_else(|_| bad()),
            "--partitions" => o.partitions = v.parse().unwrap_or_else(|_| bad()),
            "--zipf" => o.zipf = v.parse().unwrap_or_else(|_| bad()),
            "--w" => o.w = v.parse().unwrap_or_else(|_| bad()),
            "--us-per-msg" => o.us_per_msg = v.parse().unwrap_or_else(|_| bad()),
            "--scale" => o.scale = v.parse().unwrap_or_else(|_| bad()),
            _ => bad(),
        }
    }
    let started = Instant::now();
    let mut all: Vec<Vec<Measured>> = vec![Vec::new(); VARIANTS.len()];
    for rep in 0..o.reps {
        // Rotate which protocol goes first, so drift in the machine's load
        // does not favour one.
        for k in 0..VARIANTS.len() {
            let v = (k + rep as usize) % VARIANTS.len();
            all[v].push(run_variant(v, o, rep + 1));
        }
        eprintln!("repetition {}/{} done ({:.0} s)", rep + 1, o.reps, started.elapsed().as_secs_f64());
    }
    println!(
        "{} repetition(s) × {} measured operations (after {} warm-up), {} DC(s) × {} partitions, {} clients, \
         w = {}, zipf {}, ROTs of 4 keys on 4 partitions, 10-byte values; medians. CPU = decode + handler + encode \
         of each server input (timers included)\n",
        o.reps,
        o.ops,
        o.ops / 2,
        o.dcs,
        o.partitions,
        o.clients,
        o.w,
        o.zipf
    );
    println!(
        "| protocol | server CPU µs/op | server msgs/op | KiB in/op | µs/msg | readers_check_ids mean | failed ops |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let med = |v: usize, f: &dyn Fn(&Measured) -> f64| median(all[v].iter().map(f).collect());
    for (v, (name, _)) in VARIANTS.iter().enumerate() {
        let ids = med(v, &|m| m.samples.get("readers_check_ids").map_or(f64::NAN, |(n, s)| *s as f64 / *n as f64));
        println!(
            "| {name} | {:.2} | {:.2} | {:.3} | {:.2} | {} | {} |",
            med(v, &|m| m.us_per_op()),
            med(v, &|m| m.msgs_per_op()),
            med(v, &|m| m.kib_per_op()),
            med(v, &|m| m.us_per_op() / m.msgs_per_op()),
            if ids.is_nan() { "–".to_string() } else { format!("{ids:.1}") },
            med(v, &|m| m.failed as f64),
        );
    }
    // Per kind: the median over repetitions of each kind's mean size and time.
    println!("\n| protocol | message kind | per op | mean bytes | mean µs |");
    println!("|---|---|---:|---:|---:|");
    for (v, (name, _)) in VARIANTS.iter().enumerate() {
        let kinds: std::collections::BTreeSet<&str> = all[v].iter().flat_map(|m| m.kinds.keys().copied()).collect();
        for k in kinds {
            let stat = |f: &dyn Fn(&KindStat, &Measured) -> f64| {
                median(all[v].iter().filter_map(|m| m.kinds.get(k).map(|s| f(s, m))).collect())
            };
            let per_op = stat(&|s, m| s.n as f64 / m.ops as f64);
            let bytes = stat(&|s, _| s.bytes as f64 / s.n as f64);
            let us = stat(&|s, _| s.ns as f64 / 1e3 / s.n as f64);
            println!("| {name} | {k} | {per_op:.3} | {bytes:.0} | {us:.2} |");
        }
    }
    // The readers check's cost grows with what it collects (Fig. 6): CC-LO
    // at several client counts, the check's CPU (request at the asked
    // partition + reply at the writer's) against the reply's size.
    println!("\nCC-LO's readers check against the number of clients (medians):\n");
    println!("| clients | readers_check_ids | check_reply bytes | check_req µs | check_reply µs | cclo µs/op |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut pts: Vec<(f64, f64)> = Vec::new(); // (reply KiB, req + reply µs)
    for clients in [16, 64, 256] {
        let oc = Opts { clients, ..o };
        let ms: Vec<Measured> = (0..o.reps).map(|rep| run_variant(2, oc, rep + 1)).collect();
        let m = |f: &dyn Fn(&Measured) -> f64| median(ms.iter().map(f).collect());
        let kind = |k: &'static str, f: fn(&KindStat) -> f64| m(&move |x| x.kinds.get(k).map_or(f64::NAN, f));
        let bytes = kind("check_reply", |s| s.bytes as f64 / s.n as f64);
        let (req, rep) = (
            kind("check_req", |s| s.ns as f64 / 1e3 / s.n as f64),
            kind("check_reply", |s| s.ns as f64 / 1e3 / s.n as f64),
        );
        let ids = m(&|x| x.samples.get("readers_check_ids").map_or(f64::NAN, |(n, s)| *s as f64 / *n as f64));
        println!("| {clients} | {ids:.1} | {bytes:.0} | {req:.2} | {rep:.2} | {:.2} |", m(&|x| x.us_per_op()));
        pts.push((bytes / 1024.0, req + rep));
    }
    let n = pts.len() as f64;
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let b = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
    println!("\nSlope of the readers check's CPU against its reply's size: {b:.2} µs per KiB\n");
    // The cost model: us_per_kib = F·b for every message, plus, per protocol
    // and message kind, F·(measured mean − b × mean KiB), so that each kind
    // costs what it measured at this load and the readers check grows with
    // what it carries. F slows the simulated cluster so it saturates with
    // few clients (latencies ×F, throughputs ÷F against real time).
    let f = o.scale;
    println!("Calibrated cost model (×{f}), for an experiment's [scenario.cpu]:\n");
    println!("```toml\n[scenario.cpu]\nservice_us = 0\nus_per_kib = {:.0}", f * b);
    let mut model_per_op = vec![0.0; VARIANTS.len()];
    for (proto, variants) in [("contrarian", &[0usize, 1][..]), ("cclo", &[2][..]), ("cure", &[3][..])] {
        println!("[scenario.cpu.kind_us.{proto}]");
        let kinds: std::collections::BTreeSet<&str> =
            variants.iter().flat_map(|&v| all[v].iter().flat_map(|m| m.kinds.keys().copied())).collect();
        let ms: Vec<&Measured> = variants.iter().flat_map(|&v| all[v].iter()).collect();
        // CC-LO's timer expires reader records: work per record made, so
        // it is charged to the read that made it (its rate follows the
        // load), not per tick (the microbenchmark's virtual time runs much
        // faster than the simulated cluster's).
        let amortized = |m: &Measured, k: &str| -> f64 {
            let (Some(t), Some(r)) = (m.kinds.get("timer"), m.kinds.get("rot_req")) else { return 0.0 };
            if proto == "cclo" && k == "rot_req" { t.ns as f64 / 1e3 / r.n as f64 } else { 0.0 }
        };
        for k in kinds {
            if proto == "cclo" && k == "timer" {
                continue;
            }
            // Pooled over the variants sharing the protocol's kinds.
            let per = |g: &dyn Fn(&KindStat, &Measured) -> f64| {
                median(ms.iter().filter_map(|m| m.kinds.get(k).map(|s| g(s, m))).collect())
            };
            let us = per(&|s, m| s.ns as f64 / 1e3 / s.n as f64 + amortized(m, k));
            let kib = per(&|s, _| s.bytes as f64 / 1024.0 / s.n as f64);
            let c = (us - b * kib).max(0.0);
            println!("{k} = {:.1}", f * c);
            for &v in variants {
                let per_op =
                    median(all[v].iter().filter_map(|m| m.kinds.get(k).map(|s| s.n as f64 / m.ops as f64)).collect());
                if per_op.is_finite() {
                    model_per_op[v] += per_op * (c + b * kib);
                }
            }
        }
    }
    println!("```\n");
    println!("| protocol | measured µs/op | model µs/op | model / measured | measured capacity vs contrarian 1½ |");
    println!("|---|---:|---:|---:|---:|");
    let base = med(0, &|m| m.us_per_op());
    for (v, (name, _)) in VARIANTS.iter().enumerate() {
        let meas = med(v, &|m| m.us_per_op());
        println!(
            "| {name} | {meas:.2} | {:.2} | {:.2} | {:.2} |",
            model_per_op[v],
            model_per_op[v] / meas,
            base / meas
        );
    }
    eprintln!("done in {:.0} s", started.elapsed().as_secs_f64());
}
