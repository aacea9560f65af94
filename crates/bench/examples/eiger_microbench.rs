//! Seed 001 (Lloyd, Ch. 7; Lloyd et al. NSDI 2013 §6), Eiger against
//! Eventual on the real state machines: the CPU time a server spends per
//! message it handles, per message kind, under the dynamic workload's
//! defaults (Table 7.5), and the simulator's CPU cost model fitted to it
//! (`[scenario.cpu] us_per_kib` + `[scenario.cpu.kind_us.<protocol>]`).
//!
//! ```text
//! cargo run --release -p causeway-bench --example eiger_microbench [-- --reps 3 --ops 40000 --scale 50]
//! ```
//!
//! Setup: two DCs of 8 partitions, `--clients` closed-loop sessions in DC 0
//! only (the paper's clients load one cluster, which replicates to the
//! other), running the protocols' own clients under Table 7.5's defaults:
//! every read a read-only transaction of `--keys-read` (5) keys, a write
//! fraction `--w` (0.1) of operations writing `--keys-write` (5) keys,
//! `--wtf` (0.5) of them as write-only transactions and the rest as
//! independent PUTs (one after another; `--batches 1`: one non-atomic batch
//! sent at once), `--value` (128) byte values, uniform over `--records`
//! (100 000) keys, `--columns-read` and `--columns-write` (1) columns per
//! key (Table 7.5's default is 5; the simulator's `columns_per_read` and
//! `columns_per_write`). `--preload 1` runs YCSB's load phase first, as
//! the simulator's `preload` does (each client writes its share of the
//! rows, every column): it must fit in the warm-up (`--ops` / 2
//! operations), so that reads find values.
//! The harness is `rot_microbench`'s: every message is delivered at once,
//! FIFO, in this process; a server's time is measured around decoding the
//! frame with the network runtime's codec, the handler, and encoding what
//! it sends, without sockets, threads or the write-ahead log. Client work
//! is not counted.
//!
//! The fit: the run is repeated with 4 KiB values; the per-KiB slope
//! (`us_per_kib`) is the count-weighted mean over message kinds whose size
//! grew of Δµs / ΔKiB, and each kind's `kind_us` is its mean µs at the
//! default workload less that slope times its mean size. Output in µs × `--scale`.

use causeway_core::{
    Client as _, ClientCtx, ClientId, DcId, Message, MvStore, NodeCtx, NodeId, Observation, OpResult, Protocol,
    Server as _, ServerEnv, Topology, TopologySpec, wire_size,
};
use causeway_net::frame::{Wire, decode, encode};
use causeway_protocols::{baseline::eventual::Eventual, explicit_deps::eiger::Eiger};
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
    value: usize,
    keys_read: usize,
    keys_write: usize,
    w: f64,
    wtf: f64,
    us_per_msg: u64,
    scale: f64,
    /// The non-transactional writes as one non-atomic `Op::Batch` each
    /// (all keys sent at once) instead of PUTs one after another.
    batches: bool,
    /// Columns per key for reads and for writes (Table 7.5's default is 5;
    /// 1, plain keys, is what the cost model was first calibrated with).
    columns_read: usize,
    columns_write: usize,
    /// Keys (rows) in the key space.
    records: u64,
    /// YCSB's load phase first (each client writes its share of the rows,
    /// in every column read or written), inside the warm-up: reads then
    /// find values, as in the simulator's runs with `preload`.
    preload: bool,
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
    /// The rest of each client's request (a multi-key update's PUTs).
    pending: Vec<VecDeque<causeway_core::Op>>,
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
        let workload = Workload {
            clients_per_dc: opts.clients,
            dcs: vec![0],
            recordcount: opts.records,
            preload: opts.preload,
            readproportion: 0.0,
            rotproportion: 1.0 - opts.w,
            rot_size: opts.keys_read,
            wotproportion: opts.w * opts.wtf,
            wot_size: opts.keys_write,
            updateproportion: if opts.batches { 0.0 } else { opts.w * (1.0 - opts.wtf) },
            batchproportion: if opts.batches { opts.w * (1.0 - opts.wtf) } else { 0.0 },
            update_size: opts.keys_write,
            requestdistribution: Distribution::Uniform,
            fieldlength: opts.value,
            columns_per_read: opts.columns_read,
            columns_per_write: opts.columns_write,
            ..Workload::default()
        };
        let n = workload.clients_per_dc as usize;
        let client_dc: Vec<DcId> = vec![DcId(0); n];
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
            pending: vec![VecDeque::new(); n],
        };
        for i in 0..h.servers.len() {
            h.server_input(NodeId(i as u32), None);
        }
        if h.workload.preload {
            // The load phase, first in each client's queue.
            for c in 0..n {
                let mut wid = h.write_id;
                let ops = h.generator.preload_ops(&h.workload, c as u64, n as u64, &mut h.rng, || {
                    wid += 1;
                    wid
                });
                h.write_id = wid;
                h.pending[c] = ops;
            }
        }
        for c in 0..n {
            h.invoke(c);
        }
        h
    }

    fn invoke(&mut self, c: usize) {
        let op = match self.pending[c].pop_front() {
            Some(op) => op,
            None => {
                let mut wid = self.write_id;
                let req =
                    self.generator.next_request(&self.workload, c as u64, self.client_dc[c], &mut self.rng, || {
                        wid += 1;
                        wid
                    });
                self.write_id = wid;
                let mut ops = req.ops;
                let op = ops.pop_front().expect("a request has an operation");
                self.pending[c] = ops;
                op
            }
        };
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

const VARIANTS: [&str; 2] = ["eiger", "eventual"];

fn run_variant(v: usize, opts: Opts, seed: u64) -> Measured {
    match v {
        0 => measure::<Eiger>(opts, "", seed),
        _ => measure::<Eventual>(opts, "", seed),
    }
}

fn kind_mean(ms: &[Measured], k: &str, f: fn(&KindStat) -> f64) -> f64 {
    median(ms.iter().filter_map(|m| m.kinds.get(k).filter(|s| s.n > 0).map(f)).collect())
}

fn main() {
    let mut o = Opts {
        reps: 3,
        ops: 40_000,
        clients: 64,
        dcs: 2,
        partitions: 8,
        value: 128,
        keys_read: 5,
        keys_write: 5,
        w: 0.1,
        wtf: 0.5,
        us_per_msg: 2,
        scale: 50.0,
        batches: false,
        columns_read: 1,
        columns_write: 1,
        records: 100_000,
        preload: false,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for a in args.chunks(2) {
        let v = a.get(1).map(String::as_str).unwrap_or("");
        let bad = || -> ! {
            eprintln!(
                "usage: eiger_microbench [--reps N] [--ops N] [--clients N] [--dcs N] [--partitions N] [--value B] \
                 [--keys-read N] [--keys-write N] [--w W] [--wtf F] [--us-per-msg N] [--scale F] [--batches 0|1] \
                 [--columns-read N] [--columns-write N] [--records N] [--preload 0|1]"
            );
            std::process::exit(2)
        };
        match a[0].as_str() {
            "--reps" => o.reps = v.parse().unwrap_or_else(|_| bad()),
            "--ops" => o.ops = v.parse().unwrap_or_else(|_| bad()),
            "--clients" => o.clients = v.parse().unwrap_or_else(|_| bad()),
            "--dcs" => o.dcs = v.parse().unwrap_or_else(|_| bad()),
            "--partitions" => o.partitions = v.parse().unwrap_or_else(|_| bad()),
            "--value" => o.value = v.parse().unwrap_or_else(|_| bad()),
            "--keys-read" => o.keys_read = v.parse().unwrap_or_else(|_| bad()),
            "--keys-write" => o.keys_write = v.parse().unwrap_or_else(|_| bad()),
            "--w" => o.w = v.parse().unwrap_or_else(|_| bad()),
            "--wtf" => o.wtf = v.parse().unwrap_or_else(|_| bad()),
            "--us-per-msg" => o.us_per_msg = v.parse().unwrap_or_else(|_| bad()),
            "--scale" => o.scale = v.parse().unwrap_or_else(|_| bad()),
            "--batches" => o.batches = v.parse::<u8>().unwrap_or_else(|_| bad()) == 1,
            "--columns-read" => o.columns_read = v.parse().unwrap_or_else(|_| bad()),
            "--columns-write" => o.columns_write = v.parse().unwrap_or_else(|_| bad()),
            "--records" => o.records = v.parse().unwrap_or_else(|_| bad()),
            "--preload" => o.preload = v.parse::<u8>().unwrap_or_else(|_| bad()) == 1,
            _ => bad(),
        }
    }
    if o.preload && o.records > o.ops / 2 {
        eprintln!(
            "--preload 1 needs --records ({}) at most --ops / 2 ({}): the load phase runs in the warm-up",
            o.records,
            o.ops / 2
        );
        std::process::exit(2);
    }
    let started = Instant::now();
    let big = Opts { value: 4096, ..o };
    let mut all: Vec<Vec<Measured>> = vec![Vec::new(); VARIANTS.len()];
    let mut all_big: Vec<Vec<Measured>> = vec![Vec::new(); VARIANTS.len()];
    for rep in 0..o.reps {
        // Alternate which protocol goes first, so drift in the machine's
        // load does not favour one.
        for k in 0..VARIANTS.len() {
            let v = (k + rep as usize) % VARIANTS.len();
            all[v].push(run_variant(v, o, rep + 1));
            all_big[v].push(run_variant(v, big, rep + 1));
        }
        eprintln!("repetition {}/{} done ({:.0} s)", rep + 1, o.reps, started.elapsed().as_secs_f64());
    }
    println!(
        "{} repetition(s) × {} measured operations (after {} warm-up), {} DC(s) × {} partitions, {} clients in DC 0, \
         ROTs of {} keys, write fraction {} of {}-key writes ({} of them WOTs, the rest independent PUTs), {}-byte \
         values, {} column(s) per key read and {} per key written, uniform over {} keys{}; medians. CPU = decode + handler + \
         encode of each server input (timers included), all DCs\n",
        o.reps,
        o.ops,
        o.ops / 2,
        o.dcs,
        o.partitions,
        o.clients,
        o.keys_read,
        o.w,
        o.keys_write,
        o.wtf,
        o.value,
        o.columns_read,
        o.columns_write,
        o.records,
        if o.preload { " (written first by a load phase)" } else { "" }
    );
    println!("| protocol | values | server CPU µs/op | server msgs/op | KiB in/op | µs/msg | failed ops |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (set, size) in [(&all, o.value), (&all_big, big.value)] {
        for (v, name) in VARIANTS.iter().enumerate() {
            let med = |f: &dyn Fn(&Measured) -> f64| median(set[v].iter().map(f).collect());
            println!(
                "| {name} | {size} B | {:.2} | {:.2} | {:.3} | {:.2} | {} |",
                med(&|m| m.us_per_op()),
                med(&|m| m.msgs_per_op()),
                med(&|m| m.kib_per_op()),
                med(&|m| m.us_per_op() / m.msgs_per_op()),
                med(&|m| m.failed as f64),
            );
        }
    }
    println!("\n| protocol | protocol sample | mean | per op |");
    println!("|---|---|---:|---:|");
    for (v, name) in VARIANTS.iter().enumerate() {
        let names: std::collections::BTreeSet<&str> = all[v].iter().flat_map(|m| m.samples.keys().copied()).collect();
        for k in names {
            let mean =
                median(all[v].iter().filter_map(|m| m.samples.get(k).map(|(n, s)| *s as f64 / *n as f64)).collect());
            let per_op =
                median(all[v].iter().filter_map(|m| m.samples.get(k).map(|(n, _)| *n as f64 / m.ops as f64)).collect());
            println!("| {name} | {k} | {mean:.2} | {per_op:.4} |");
        }
    }
    println!(
        "\n| protocol | message kind | per op | mean bytes | mean µs | mean bytes ({} B values) | mean µs |",
        big.value
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    // The slope: Δµs / ΔKiB per kind whose size grew, weighted by count.
    let (mut wsum, mut slope_sum) = (0.0, 0.0);
    for (v, name) in VARIANTS.iter().enumerate() {
        let kinds: std::collections::BTreeSet<&str> = all[v].iter().flat_map(|m| m.kinds.keys().copied()).collect();
        for k in kinds {
            let per_op =
                median(all[v].iter().filter_map(|m| m.kinds.get(k).map(|s| s.n as f64 / m.ops as f64)).collect());
            let bytes = kind_mean(&all[v], k, |s| s.bytes as f64 / s.n as f64);
            let us = kind_mean(&all[v], k, |s| s.ns as f64 / 1e3 / s.n as f64);
            let bytes_big = kind_mean(&all_big[v], k, |s| s.bytes as f64 / s.n as f64);
            let us_big = kind_mean(&all_big[v], k, |s| s.ns as f64 / 1e3 / s.n as f64);
            println!("| {name} | {k} | {per_op:.3} | {bytes:.0} | {us:.2} | {bytes_big:.0} | {us_big:.2} |");
            let dkib = (bytes_big - bytes) / 1024.0;
            if dkib > 0.5 && us_big.is_finite() {
                let weight = per_op;
                slope_sum += weight * (us_big - us) / dkib;
                wsum += weight;
            }
        }
    }
    let b = if wsum > 0.0 { (slope_sum / wsum).max(0.0) } else { 0.0 };
    println!("\nCPU per KiB of message (count-weighted over kinds that carry values): {b:.2} µs\n");
    let f = o.scale;
    println!("Calibrated cost model (×{f}), for an experiment's [scenario.cpu]:\n");
    println!("```toml\n[scenario.cpu]\nus_per_kib = {:.0}", f * b);
    let mut model_per_op = [0.0; VARIANTS.len()];
    for (v, name) in VARIANTS.iter().enumerate() {
        println!("\n[scenario.cpu.kind_us.{name}]");
        let kinds: std::collections::BTreeSet<&str> = all[v].iter().flat_map(|m| m.kinds.keys().copied()).collect();
        for k in kinds {
            let us = kind_mean(&all[v], k, |s| s.ns as f64 / 1e3 / s.n as f64);
            let kib = kind_mean(&all[v], k, |s| s.bytes as f64 / 1024.0 / s.n as f64);
            let c = (us - b * kib).max(0.0);
            if k != "start" {
                println!("{k} = {:.1}", f * c);
            }
            let per_op =
                median(all[v].iter().filter_map(|m| m.kinds.get(k).map(|s| s.n as f64 / m.ops as f64)).collect());
            if per_op.is_finite() {
                model_per_op[v] += per_op * (c + b * kib);
            }
        }
    }
    println!("```\n");
    println!("| protocol | measured µs/op | model µs/op | model / measured | measured capacity vs eventual |");
    println!("|---|---:|---:|---:|---:|");
    let base = median(all[1].iter().map(|m| m.us_per_op()).collect());
    for (v, name) in VARIANTS.iter().enumerate() {
        let meas = median(all[v].iter().map(|m| m.us_per_op()).collect());
        println!(
            "| {name} | {meas:.2} | {:.2} | {:.2} | {:.3} |",
            model_per_op[v],
            model_per_op[v] / meas,
            base / meas
        );
    }
    eprintln!("done in {:.0} s", started.elapsed().as_secs_f64());
}
