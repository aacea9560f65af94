//! Closed-loop sessions for the microbenchmarks: each runs the protocol's
//! own [`Client`] over a simulator [`Workload`], issuing its next operation
//! as soon as the last completes. Every frame is delivered at once, FIFO
//! across the whole cluster, in this process; virtual time advances a fixed
//! step per delivery so that timers fire at a plausible rate.

use super::{Delivery, KindStat, Servers, decode_reply, encode_request};
use causeway_core::{Client, ClientCtx, ClientEnv, ClientId, DcId, NodeId, Op, OpResult, Protocol, Topology};
use causeway_sim::Workload;
use causeway_sim::workload::Generator;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::sync::Arc;

/// A cluster and its sessions, cranked one delivery at a time.
pub struct ClosedLoop<P: Protocol> {
    pub servers: Servers<P>,
    workload: Workload,
    generator: Generator,
    rng: ChaCha8Rng,
    clients: Vec<P::Client>,
    client_dc: Vec<DcId>,
    /// `(due µs, is a client's, node or client index, token)`.
    timers: BinaryHeap<Reverse<(u64, bool, u32, u64)>>,
    queue: VecDeque<Delivery>,
    /// Virtual µs per delivery.
    us_per_msg: u64,
    pub completed: u64,
    pub failed: u64,
    write_id: u64,
    /// The rest of each session's request (a multi-key update's PUTs, or
    /// the load phase's writes).
    pending: Vec<VecDeque<Op>>,
}

/// What a session's client sees: the virtual clock, its sends, timers and
/// completion.
struct CEnv<'a, M> {
    now: u64,
    out: &'a mut Vec<(NodeId, M)>,
    timers: &'a mut Vec<(u64, u64)>,
    done: &'a mut Option<OpResult>,
}

impl<M> ClientEnv<M> for CEnv<'_, M> {
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

impl<P: Protocol> ClosedLoop<P> {
    /// One session per entry of `client_dc` (its DC), all started; with
    /// `workload.preload`, each first writes its share of the rows.
    pub fn new(
        topology: Arc<Topology>,
        cfg: &P::Config,
        workload: Workload,
        client_dc: Vec<DcId>,
        seed: u64,
        us_per_msg: u64,
    ) -> Self {
        let n = client_dc.len();
        let clients = (0..n)
            .map(|c| {
                let ctx = ClientCtx {
                    id: ClientId(c as u32),
                    nonce: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (c as u64 + 1),
                    dc: client_dc[c],
                    topology: topology.clone(),
                };
                P::client(cfg, ctx)
            })
            .collect();
        let generator = Generator::new(&workload, topology.clone(), n as u64);
        let mut h = ClosedLoop {
            servers: Servers::new(&topology, cfg, 1_000_000),
            workload,
            generator,
            rng: ChaCha8Rng::seed_from_u64(seed),
            clients,
            client_dc,
            timers: BinaryHeap::new(),
            queue: VecDeque::new(),
            us_per_msg,
            completed: 0,
            failed: 0,
            write_id: 0,
            pending: vec![VecDeque::new(); n],
        };
        h.collect();
        if h.workload.preload {
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

    /// Session `c`'s next operations, as long as each completes at once
    /// (a protocol refusing an operation it does not offer answers without
    /// a message). A loop, not recursion through [`Self::client_input`]:
    /// a workload the protocol refuses entirely overflowed the stack.
    fn invoke(&mut self, c: usize) {
        let mut at_once = 0u32;
        while let Some(result) = self.invoke_one(c) {
            at_once += 1;
            assert!(
                at_once < 100_000,
                "{}: session {c}'s operations all complete at once, never reaching a server (the last: {result:?}); \
                 does the protocol offer the workload's operations?",
                P::NAME
            );
        }
    }

    /// Session `c`'s next operation; its result when it completed at once.
    fn invoke_one(&mut self, c: usize) -> Option<OpResult> {
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
                // Each operation here is one protocol operation; an
                // interactive transaction's steps would need its driver.
                assert!(req.interactive.is_none(), "the microbenchmarks run no interactive transactions");
                let mut ops = req.ops;
                let op = ops.pop_front().expect("a request has an operation");
                self.pending[c] = ops;
                op
            }
        };
        self.client_input_done(c, |cl, env| cl.invoke(env, op))
    }

    /// Feed session `c` an input; when its operation completes, count it
    /// and start the next.
    fn client_input(&mut self, c: usize, f: impl FnOnce(&mut P::Client, &mut CEnv<'_, P::Msg>)) {
        if self.client_input_done(c, f).is_some() {
            self.invoke(c);
        }
    }

    /// Feed session `c` an input; the result of its operation if that
    /// completed (counted, the next not started).
    fn client_input_done(
        &mut self,
        c: usize,
        f: impl FnOnce(&mut P::Client, &mut CEnv<'_, P::Msg>),
    ) -> Option<OpResult> {
        let (mut out, mut timers, mut done) = (Vec::new(), Vec::new(), None);
        let mut env = CEnv { now: self.servers.now_us, out: &mut out, timers: &mut timers, done: &mut done };
        f(&mut self.clients[c], &mut env);
        for (to, msg) in out {
            self.queue.push_back(Delivery::Request { client: ClientId(c as u32), to, frame: encode_request(msg) });
        }
        for (due, token) in timers {
            self.timers.push(Reverse((due, true, c as u32, token)));
        }
        let r = done?;
        if matches!(r, OpResult::Failed(_)) {
            self.failed += 1;
        }
        self.completed += 1;
        Some(r)
    }

    /// Queue what the servers released and arm the timers they set.
    fn collect(&mut self) {
        self.queue.extend(self.servers.out.drain(..));
        for (due, node, token) in self.servers.timers.drain(..) {
            self.timers.push(Reverse((due, false, node.0, token)));
        }
    }

    /// Deliver one frame (or fire due timers); false when nothing is left.
    fn step(&mut self) -> bool {
        self.servers.now_us += self.us_per_msg;
        while let Some(&Reverse((due, is_client, idx, token))) = self.timers.peek() {
            if due > self.servers.now_us {
                break;
            }
            self.timers.pop();
            if is_client {
                self.client_input(idx as usize, |cl, env| cl.on_timer(env, token));
            } else {
                self.servers.timer(NodeId(idx), token);
                self.collect();
            }
        }
        let Some(d) = self.queue.pop_front() else {
            return !self.timers.is_empty();
        };
        match d {
            Delivery::Reply { client, from, frame } => {
                let m = decode_reply::<P::Msg>(&frame);
                self.client_input(client.idx(), |cl, env| cl.on_reply(env, from, m));
            }
            d => {
                self.servers.deliver(d);
                self.collect();
            }
        }
        true
    }

    /// Deliver until `ops` more operations have completed.
    pub fn run_ops(&mut self, ops: u64) {
        let target = self.completed + ops;
        while self.completed < target {
            assert!(self.step(), "the cluster went idle");
        }
    }

    /// Forget what was measured and counted (not the cluster's state).
    pub fn reset(&mut self) {
        self.servers.reset_stats();
        self.completed = 0;
        self.failed = 0;
    }

    /// Warm up for `ops / 2` operations, then measure `ops`.
    pub fn measure(mut self, ops: u64) -> Measured {
        self.run_ops(ops / 2);
        self.reset();
        self.run_ops(ops);
        Measured {
            ops: self.completed,
            failed: self.failed,
            kinds: std::mem::take(&mut self.servers.kinds),
            samples: std::mem::take(&mut self.servers.samples),
        }
    }
}

/// One run's measurement.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    pub ops: u64,
    pub failed: u64,
    pub kinds: BTreeMap<&'static str, KindStat>,
    pub samples: BTreeMap<&'static str, (u64, u64)>,
}

impl Measured {
    pub fn total(&self) -> KindStat {
        self.kinds.values().fold(KindStat::default(), |a, k| KindStat {
            n: a.n + k.n,
            bytes: a.bytes + k.bytes,
            ns: a.ns + k.ns,
            items: a.items + k.items,
        })
    }
    pub fn us_per_op(&self) -> f64 {
        self.total().ns as f64 / 1e3 / self.ops as f64
    }
    pub fn msgs_per_op(&self) -> f64 {
        self.total().n as f64 / self.ops as f64
    }
    pub fn kib_per_op(&self) -> f64 {
        self.total().bytes as f64 / 1024.0 / self.ops as f64
    }
}
