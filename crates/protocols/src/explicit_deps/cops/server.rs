use super::config::*;
use super::msg::*;
use crate::explicit_deps::replication::{DepNode, DepVersion, PathConfig, Settle, Stamp};
use causeway_core::{ClientId, Key, NodeCtx, NodeId, Observation, Server, ServerEnv};

crate::kit::node::server_env!();

pub struct CopsServer {
    node: DepNode,
    settle_us: u64,
}

impl CopsServer {
    pub(super) fn new(cfg: &Config, ctx: NodeCtx) -> CopsServer {
        let settle_us = cfg.settle_interval_ms * 1_000;
        let path = PathConfig {
            retry_us: cfg.dep_check_retry_ms * 1_000,
            skip_checks: cfg.mutant_skip_dep_check,
            skip_recovery: cfg.mutant_skip_recovery,
        };
        let node = DepNode::new(&ctx, Settle::new(0, settle_us), path);
        CopsServer { node, settle_us }
    }
}

/// Re-send unanswered checks.
pub(super) const RETRY_TIMER: u64 = 0;
/// Exchange what is committed; flag settled versions.
pub(super) const SETTLE_TIMER: u64 = 1;

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
                if let Err(reason) = self.node.check_owner(&key) {
                    return env.reply(from, Msg::Refused { reason });
                }
                let (value, stamp, never_depend) = match env.store().latest_where(&key, Version::committed) {
                    Some(v) => {
                        (Some(causeway_core::copy_if_short(&v.value)), v.stamp, self.node.settle.is_settled(v.stamp))
                    }
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
                // The store's copy shares no reference count with the
                // replicas' ([`causeway_core::copy_if_short`]).
                let version = Version { value: causeway_core::copy_if_short(&value), stamp, pending: None };
                env.store().insert(&key, version);
                self.node.settle.own_write(stamp);
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
                env.store().insert(&key, v);
                self.node.on_replicate(env, key, stamp, &deps, written_us);
            }
            // COPS stores nothing per settled version: never-depend is
            // computed from the settled stamps at read time.
            Msg::Path(p) => {
                self.node.on_path(env, from, p);
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
                self.node.settle_tick(env);
                env.set_timer(self.settle_us, SETTLE_TIMER);
            }
            _ => {}
        }
    }
}

impl CopsServer {
    /// Commit every replicated write whose checks passed (§2.7 step 5).
    fn commit_ready(&mut self, env: &mut impl Env) {
        for r in self.node.commit_ready(env) {
            self.publish(env, &r.key, r.stamp, r.written_us);
        }
    }

    /// A version was committed: report it when a read now returns it, and
    /// keep one committed version per key (§2.2), with any pending ones
    /// newer than it.
    fn publish(&mut self, env: &mut impl Env, key: &Key, stamp: Stamp, written_us: u64) {
        // §2.7 step 5: a replicated write becomes readable only once its
        // dependency checks passed, which committing it records (it may be
        // gone already, having lost last-writer-wins).
        assert!(
            env.store().exact(key, stamp).is_none_or(|v| v.committed()),
            "a write was published before it was committed"
        );
        self.node.report_if_newest(env, key, stamp, written_us);
        // Pending versions stay until committed: after a crash the store is
        // all recovery has, and a later write may depend on one.
        env.store().gc_key_keeping(key, Version::committed, |v| !v.committed());
    }
}
