//! Alg 4.1: a session's side. It keeps, per DC and partition, the highest
//! log index it has read (`hrm`) and written (`hwm`), and the highest
//! timestamps it has read and written (`dtr`, `dtw`); none of it travels
//! with the data. Each operation takes what its level needs from them.
//!
//! A session belongs to one DC but, as in the thesis's evaluation
//! (§4.4.1), may send a share of its GETs and PUTs to another DC's
//! replicas and leaders (`remote_read_share`, `remote_write_share`); the
//! vectors are per DC, so a level holds wherever an operation goes.

use super::config::*;
use super::msg::*;
use causeway_core::{
    Client, ClientCtx, ClientEnv, DcId, Hlc, Key, Levels, NodeId, Op, OpError, OpResult, PartitionId, Value,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What the operation in progress is.
enum Pending {
    Get { key: Key, hwv: Vec<u64>, hrv: Vec<u64> },
    Put { key: Key, value: Value, dep: Dep },
}

struct InProgress {
    op: Pending,
    partition: PartitionId,
    /// The DC whose replicas this operation asks.
    dc: DcId,
    /// Where in that DC's group a GET starts (the session's nonce at
    /// home, a random replica elsewhere).
    spread: usize,
    started_us: u64,
    /// Replicas asked so far (the next one is chosen from it).
    tries: usize,
    /// The replica asked last.
    asked: NodeId,
    /// Numbers this attempt's timer; an older attempt's timer is ignored.
    attempt: u64,
    /// Whether the runtime reported that `asked` could not be reached
    /// ([`Client::on_unreachable`]): nothing was delivered, so even a PUT
    /// may be asked of another replica when this attempt's timer fires.
    undelivered: bool,
}

/// How long a client waits before asking the next replica when the runtime
/// could not reach the last one, µs: long enough that a group whose every
/// member refuses connections is not asked in a busy loop, short against
/// an election.
const UNREACHABLE_PAUSE_US: u64 = 20_000;

pub struct NukvClient {
    cfg: Config,
    ctx: ClientCtx,
    /// `hrm[d][p]`, `hwm[d][p]` of Alg 4.1.
    hrm: Vec<Vec<u64>>,
    hwm: Vec<Vec<u64>>,
    dtr: Hlc,
    dtw: Hlc,
    /// Per DC and partition, the leader last heard of.
    leader: Vec<Vec<Option<NodeId>>>,
    /// Draws which DC an operation goes to (seeded by the session's
    /// nonce: a protocol has no randomness of its own).
    rng: ChaCha8Rng,
    current: Option<InProgress>,
    attempts: u64,
}

impl NukvClient {
    pub(super) fn new(cfg: &Config, ctx: ClientCtx) -> NukvClient {
        let (d, p) = (ctx.topology.dcs(), ctx.topology.partitions());
        NukvClient {
            cfg: cfg.clone(),
            hrm: vec![vec![0; p]; d],
            hwm: vec![vec![0; p]; d],
            dtr: Hlc::ZERO,
            dtw: Hlc::ZERO,
            leader: vec![vec![None; p]; d],
            rng: ChaCha8Rng::seed_from_u64(ctx.nonce),
            current: None,
            attempts: 0,
            ctx,
        }
    }

    fn column(m: &[Vec<u64>], p: PartitionId) -> Vec<u64> {
        m.iter().map(|row| row[p.idx()]).collect()
    }

    /// Send the operation in progress to `to`, with a timer for its answer.
    fn ask(&mut self, env: &mut impl ClientEnv<Msg>, to: NodeId) {
        let Some(cur) = &mut self.current else { return };
        self.attempts += 1;
        cur.attempt = self.attempts;
        cur.asked = to;
        cur.tries += 1;
        cur.undelivered = false;
        let req = cur.attempt;
        let msg = match &cur.op {
            Pending::Get { key, hwv, hrv } => {
                Msg::GetReq(Box::new(GetReq { key: key.clone(), hwv: hwv.clone(), hrv: hrv.clone(), req }))
            }
            Pending::Put { key, value, dep } => {
                Msg::PutReq { key: key.clone(), value: value.clone(), dep: dep.clone(), req }
            }
        };
        env.send(to, msg);
        // A PUT may have been proposed once sent: it is never sent again
        // after its answer is late, only failed at the deadline.
        let wait = match cur.op {
            Pending::Get { .. } => self.cfg.client_retry_us,
            Pending::Put { .. } => self.cfg.op_deadline_us.saturating_sub(env.now_us() - cur.started_us).max(1),
        };
        env.set_timer(wait, cur.attempt);
    }

    /// The replica of `dc` a GET asks on its `tries`-th attempt: from
    /// `spread`, round the group.
    fn reader(&self, dc: DcId, p: PartitionId, spread: usize, tries: usize) -> NodeId {
        let rs = self.ctx.topology.replicas(dc, p);
        rs[spread.wrapping_add(tries) % rs.len()]
    }

    /// The replica of `dc` a PUT asks: the leader last heard of, else
    /// round the group from `spread` (the session's place in it at home, so
    /// that sessions that know no leader do not all start at a replica that
    /// may be down).
    fn writer(&self, dc: DcId, p: PartitionId, spread: usize, tries: usize) -> NodeId {
        let rs = self.ctx.topology.replicas(dc, p);
        self.leader[dc.idx()][p.idx()].unwrap_or(rs[spread.wrapping_add(tries) % rs.len()])
    }

    /// Where the next operation goes: with probability `share` another DC
    /// (each equally likely) and a random start in its group, else the
    /// session's own DC and the session's place in its group. No draw at
    /// all with a share of 0, so a sticky session's choices are as before.
    fn destination(&mut self, share: f64) -> (DcId, usize) {
        let home = (self.ctx.dc, self.ctx.nonce as usize);
        let dcs = self.ctx.topology.dcs();
        if share <= 0.0 || dcs < 2 || !self.rng.random_bool(share) {
            return home;
        }
        let other = self.rng.random_range(0..dcs - 1);
        let dc = if other >= self.ctx.dc.idx() { other + 1 } else { other };
        (DcId(dc as u16), self.rng.random_range(0..usize::from(u16::MAX)))
    }

    fn fail(&mut self, env: &mut impl ClientEnv<Msg>, err: OpError) {
        self.current = None;
        env.complete(OpResult::Failed(err));
    }

    fn out_of_time(&self, now_us: u64) -> bool {
        self.current.as_ref().is_some_and(|c| now_us.saturating_sub(c.started_us) >= self.cfg.op_deadline_us)
    }

    fn timed_out(&mut self, env: &mut impl ClientEnv<Msg>) {
        let after_ms = self.cfg.op_deadline_us / 1000;
        self.fail(env, OpError::TimedOut { after_ms });
    }

    /// Try the next replica, or fail the operation once out of time.
    fn retry(&mut self, env: &mut impl ClientEnv<Msg>) {
        if self.out_of_time(env.now_us()) {
            self.timed_out(env);
            return;
        }
        let Some(cur) = &self.current else { return };
        let to = match cur.op {
            Pending::Get { .. } => self.reader(cur.dc, cur.partition, cur.spread, cur.tries),
            Pending::Put { .. } => self.writer(cur.dc, cur.partition, cur.spread, cur.tries),
        };
        self.ask(env, to);
    }
}

impl Client for NukvClient {
    type Msg = Msg;

    /// At the config's levels.
    fn invoke(&mut self, env: &mut impl ClientEnv<Msg>, op: Op) {
        let levels = Levels { read: self.cfg.read_level, write: self.cfg.write_level };
        self.invoke_at(env, op, levels)
    }

    /// Alg 4.1: what the operation sends follows its own level.
    fn invoke_at(&mut self, env: &mut impl ClientEnv<Msg>, op: Op, levels: Levels) {
        let t = &self.ctx.topology;
        let (pending, partition) = match op {
            Op::Get { key } => {
                let p = t.partition_of(&key);
                let zero = vec![0; t.dcs()];
                let (hwv, hrv) = match levels.read {
                    ReadLevel::Eventual => (zero.clone(), zero),
                    ReadLevel::MonotonicRead => (zero, Self::column(&self.hrm, p)),
                    ReadLevel::ReadYourWrite => (Self::column(&self.hwm, p), zero),
                    ReadLevel::MonotonicReadYourWrite => (Self::column(&self.hwm, p), Self::column(&self.hrm, p)),
                };
                (Pending::Get { key, hwv, hrv }, p)
            }
            Op::Put { key, value } => {
                let p = t.partition_of(&key);
                let dep = if self.cfg.hlc {
                    Dep::Time(match levels.write {
                        WriteLevel::Eventual => Hlc::ZERO,
                        WriteLevel::WriteFollowsReads => self.dtr,
                        WriteLevel::MonotonicWrite => self.dtw,
                        WriteLevel::MonotonicWriteFollowsReads => self.dtr.max(self.dtw),
                    })
                } else {
                    let mut after = vec![0; t.dcs()];
                    for (d, a) in after.iter_mut().enumerate() {
                        if levels.write.write_follows_reads() {
                            *a = (*a).max(self.hrm[d][p.idx()]);
                        }
                        if levels.write.monotonic_write() {
                            *a = (*a).max(self.hwm[d][p.idx()]);
                        }
                    }
                    Dep::Applied(after.into())
                };
                (Pending::Put { key, value, dep }, p)
            }
            other => {
                crate::kit::client::fail_unsupported(env, other.kind());
                return;
            }
        };
        if !t.stores(self.ctx.dc, partition) {
            env.complete(OpResult::Failed(OpError::NoReplica));
            return;
        }
        let (dc, spread) = match pending {
            Pending::Get { .. } => self.destination(self.cfg.remote_read_share),
            Pending::Put { .. } => self.destination(self.cfg.remote_write_share),
        };
        let first = match pending {
            Pending::Get { .. } => self.reader(dc, partition, spread, 0),
            Pending::Put { .. } => self.writer(dc, partition, spread, 0),
        };
        self.current = Some(InProgress {
            op: pending,
            partition,
            dc,
            spread,
            started_us: env.now_us(),
            tries: 0,
            asked: first,
            attempt: 0,
            undelivered: false,
        });
        self.ask(env, first);
    }

    fn on_reply(&mut self, env: &mut impl ClientEnv<Msg>, from: NodeId, msg: Msg) {
        let Some(cur) = &self.current else { return };
        let req = match &msg {
            Msg::GetReply { req, .. }
            | Msg::Behind { req }
            | Msg::PutReply { req, .. }
            | Msg::NotLeader { req, .. }
            | Msg::Refused { req, .. } => *req,
            _ => return,
        };
        if from != cur.asked || req != cur.attempt {
            return; // a late answer to an earlier request
        }
        let (p, at) = (cur.partition, cur.dc);
        match (msg, &cur.op) {
            (Msg::GetReply { value, dc, idx, t, .. }, Pending::Get { .. }) => {
                if value.is_some() {
                    let h = &mut self.hrm[dc.idx()][p.idx()];
                    *h = (*h).max(idx);
                    self.dtr = self.dtr.max(t);
                }
                self.current = None;
                env.complete(OpResult::Get(value));
            }
            // A GET asks another replica; a PUT the leader held for its
            // dependencies was not proposed, and asks again.
            (Msg::Behind { .. }, _) => self.retry(env),
            (Msg::PutReply { dc, idx, t, .. }, Pending::Put { .. }) => {
                self.leader[at.idx()][p.idx()] = Some(from);
                let h = &mut self.hwm[dc.idx()][p.idx()];
                *h = (*h).max(idx);
                self.dtw = self.dtw.max(t);
                self.current = None;
                env.complete(OpResult::Put);
            }
            (Msg::NotLeader { leader, .. }, Pending::Put { .. }) => {
                // Nothing was proposed: ask the leader it names, or (it
                // waited for an election that named none) the next replica.
                self.leader[at.idx()][p.idx()] = leader.filter(|&l| l != from);
                self.retry(env);
            }
            (Msg::Refused { reason, .. }, _) => self.fail(env, OpError::BadRequest(reason)),
            _ => {}
        }
    }

    fn on_timer(&mut self, env: &mut impl ClientEnv<Msg>, token: u64) {
        let Some(cur) = &self.current else { return };
        if token != cur.attempt {
            return;
        }
        match cur.op {
            Pending::Get { .. } => self.retry(env),
            // Never delivered: the next replica may be asked.
            Pending::Put { .. } if cur.undelivered => self.retry(env),
            // The PUT may have committed: its outcome is unknown.
            Pending::Put { .. } => self.timed_out(env),
        }
    }

    /// Alg 4.1 keeps `hrm`, `hwm`, `dtr` and `dtw` per DC and partition,
    /// so they hold wherever the session goes: moving is only a new home.
    fn migrate(&mut self, dc: DcId) -> bool {
        debug_assert!(dc.idx() < self.ctx.topology.dcs(), "runtimes check the DC");
        if self.current.is_some() {
            return false;
        }
        self.ctx.dc = dc;
        true
    }

    /// The replica asked could not be reached: forget it as leader, and
    /// ask the next one after a pause.
    fn on_unreachable(&mut self, env: &mut impl ClientEnv<Msg>, node: NodeId) -> bool {
        let Some(cur) = &mut self.current else { return false };
        if cur.asked != node {
            return false;
        }
        let leader = &mut self.leader[cur.dc.idx()][cur.partition.idx()];
        if *leader == Some(node) {
            *leader = None;
        }
        cur.undelivered = true;
        let left_us = self.cfg.op_deadline_us.saturating_sub(env.now_us().saturating_sub(cur.started_us));
        env.set_timer(UNREACHABLE_PAUSE_US.min(left_us).max(1), cur.attempt);
        true
    }
}
