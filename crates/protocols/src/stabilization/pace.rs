//! Idle pacing of the stabilization timers.
//!
//! The stable time (GST, DSV, and next GSS or UST) moves only because every
//! partition sends heartbeats every Δ and runs a tree step every θ. The
//! papers size Δ and θ for a loaded system (10 ms and 5 ms in Roohitavaf's
//! and Du et al.'s evaluations) and never ask what an idle cluster costs:
//! at those rates six idle nodes wake 1 800 times a second and send as many
//! messages, a fifth of a core for nothing.
//!
//! Nothing needs a fresh stable time while nothing is written or read, so a
//! server *goes quiet* when no work has been seen anywhere for
//! `idle_after_us`: its heartbeat and tree timers slow down by
//! `idle_slowdown`. Work is a client request or a replicated write; its time
//! travels on every heartbeat and tree message as `last_work_us` (a maximum
//! of clock readings, so it never keeps itself alive: it expires
//! `idle_after_us` after the last real work). A quiet server that sees work,
//! or hears of work from a peer, *wakes*: it bumps its timer epoch and
//! restarts both timers at once, so its next heartbeat and tree message
//! wake its equivalents and its tree neighbours in turn. A cluster wakes
//! within about one WAN trip and a tree round of its first operation, which
//! the family's liveness bound covers ([`super::stable_time_bound_us`]).
//!
//! Pacing changes only how fresh the stable time is, never what it means:
//! safety does not depend on Δ or θ.

use causeway_core::ServerEnv;
use serde::{Deserialize, Serialize};

/// The `[protocol.pace]` table of a stabilization protocol.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PaceConfig {
    /// A server goes quiet this long after the last work it knows of.
    pub idle_after_us: u64,
    /// While quiet, Δ and θ are multiplied by this. 1 turns pacing off.
    pub idle_slowdown: u64,
}

impl Default for PaceConfig {
    fn default() -> Self {
        PaceConfig { idle_after_us: 1_000_000, idle_slowdown: 50 }
    }
}

impl PaceConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.idle_slowdown == 0 {
            return Err("protocol.pace.idle_slowdown must be ≥ 1 (1 turns idle pacing off)".into());
        }
        Ok(())
    }
}

/// One server's pace: whether it is quiet, and the epoch that tells its
/// current timers from the ones a wake-up superseded.
#[derive(Clone, Debug)]
pub struct Pace {
    cfg: PaceConfig,
    /// The latest time (some server's clock) at which work was seen.
    last_work_us: u64,
    quiet: bool,
    epoch: u64,
}

impl Pace {
    /// A server starts awake; its `on_start` reports its start as work, so
    /// a new cluster runs at the active pace for `idle_after_us`.
    pub fn new(cfg: &PaceConfig) -> Pace {
        Pace { cfg: cfg.clone(), last_work_us: 0, quiet: false, epoch: 0 }
    }

    /// What to put in `last_work_us` of an outgoing heartbeat or tree message.
    pub fn last_work_us(&self) -> u64 {
        self.last_work_us
    }

    /// The timers' epoch: a timer set under an older epoch is stale.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Work seen here (`at_us` = the clock) or reported by a peer as of
    /// `at_us`. If it woke this server, its heartbeat and tree timers
    /// restart at once under the new epoch; `tokens(epoch)` names them.
    pub fn saw_work<M, V: causeway_core::Versioned>(
        &mut self,
        env: &mut impl ServerEnv<M, V>,
        at_us: u64,
        tokens: impl Fn(u64) -> [u64; 2],
    ) {
        if self.wakes(at_us, env.now_us()) {
            for token in tokens(self.epoch) {
                env.set_timer(0, token);
            }
        }
    }

    /// Record work as of `at_us`; true if that wakes a quiet server (the
    /// epoch moves on, so the timers set before are stale).
    fn wakes(&mut self, at_us: u64, now_us: u64) -> bool {
        self.last_work_us = self.last_work_us.max(at_us);
        if self.quiet && self.active(now_us) {
            self.quiet = false;
            self.epoch += 1;
            return true;
        }
        false
    }

    /// The interval until the next tick of a timer whose active interval is
    /// `active_us`; decides, as of `now_us`, whether the server is quiet.
    pub fn interval_us(&mut self, active_us: u64, now_us: u64) -> u64 {
        self.quiet = !self.active(now_us);
        if self.quiet { active_us.saturating_mul(self.cfg.idle_slowdown) } else { active_us }
    }

    pub fn is_quiet(&self) -> bool {
        self.quiet
    }

    fn active(&self, now_us: u64) -> bool {
        now_us < self.last_work_us.saturating_add(self.cfg.idle_after_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::testkit::{TestNet, get, put, stabilize};
    use causeway_core::{NodeId, Protocol};

    /// The shortest and longest interval any server set a timer for since
    /// the log was last cleared (wake-ups' zero delays left out), and how
    /// many servers set one.
    fn intervals<P: Protocol>(net: &mut TestNet<P>) -> (u64, u64, usize) {
        let log = std::mem::take(&mut net.timer_log);
        let delays = log.iter().map(|&(_, us)| us).filter(|&us| us > 0);
        let nodes: std::collections::BTreeSet<NodeId> = log.iter().map(|&(n, _)| n).collect();
        (delays.clone().min().unwrap_or(0), delays.max().unwrap_or(0), nodes.len())
    }

    /// Fire every timer and deliver everything, `rounds` times, the clocks
    /// moving `step_us` before each round.
    fn tick<P: Protocol>(net: &mut TestNet<P>, rounds: usize, step_us: u64) {
        for _ in 0..rounds {
            net.advance_clocks(step_us);
            net.fire_all_timers();
            net.deliver_all();
        }
    }

    /// An idle cluster of a stabilization protocol slows its timers by the
    /// configured factor; one PUT in one DC wakes every server of every DC
    /// within a few message hops, and the write then becomes visible in the
    /// other DC as usual. `active` is the protocol's longer of Δ and θ.
    fn idle_cluster_goes_quiet_and_one_write_wakes_it<P: Protocol>(cfg: P::Config, active_us: u64, slowdown: u64) {
        let mut net = TestNet::<P>::new(2, 3, 1, cfg);
        let servers = net.nodes.len();
        tick(&mut net, 3, 600_000); // idle for 1.8 s > idle_after_us
        intervals(&mut net);
        tick(&mut net, 1, 0);
        let (min_us, _, nodes) = intervals(&mut net);
        assert_eq!(nodes, servers, "every server ticked");
        assert!(min_us >= active_us / 2 * slowdown, "quiet: every timer slowed ({min_us} µs)");

        let k = net.key_on(1);
        let (writer, reader) = (net.client(0, 0), net.client(1, 0));
        put(&mut net, writer, &k, "wake up");
        tick(&mut net, 4, 0);
        intervals(&mut net);
        tick(&mut net, 1, 1_000);
        let (_, max_us, nodes) = intervals(&mut net);
        assert_eq!(nodes, servers, "every server ticked");
        assert!(max_us <= active_us, "awake: every server is back at the active pace ({max_us} µs)");
        net.advance_clocks(50_000);
        stabilize(&mut net);
        assert_eq!(get(&mut net, reader, &k).as_deref(), Some("wake up"));
    }

    /// [`idle_cluster_goes_quiet_and_one_write_wakes_it`] at `P`'s default
    /// config: active at the longer of its Δ and θ, slowed by its pacing.
    fn idle_default_goes_quiet_and_wakes<P: Protocol>()
    where
        P::Config: crate::stabilization::StabilizationConfig,
    {
        use crate::stabilization::StabilizationConfig;
        let cfg = P::Config::default();
        let (active_us, slowdown) =
            (cfg.heartbeat_interval_us().max(cfg.stabilization_interval_us()), cfg.pace().idle_slowdown);
        idle_cluster_goes_quiet_and_one_write_wakes_it::<P>(cfg, active_us, slowdown);
    }

    #[test]
    fn idle_gentlerain_goes_quiet_and_wakes() {
        idle_default_goes_quiet_and_wakes::<crate::stabilization::gentlerain::GentleRain>();
    }

    #[test]
    fn idle_causal_spartan_x_goes_quiet_and_wakes() {
        idle_default_goes_quiet_and_wakes::<crate::stabilization::causal_spartan_x::CausalSpartanX>();
    }

    #[test]
    fn idle_contrarian_goes_quiet_and_wakes() {
        idle_default_goes_quiet_and_wakes::<crate::stabilization::contrarian::Contrarian>();
    }

    #[test]
    fn quiet_after_idle_awake_on_work_and_the_epoch_marks_stale_timers() {
        let cfg = PaceConfig { idle_after_us: 1_000, idle_slowdown: 10 };
        let mut p = Pace::new(&cfg);
        assert_eq!(p.interval_us(5, 999), 5);
        assert!(!p.is_quiet());
        assert_eq!(p.interval_us(5, 1_000), 50, "idle for idle_after_us: quiet");
        assert!(p.is_quiet());
        assert!(!p.wakes(100, 1_200), "news of work older than idle_after_us does not wake");
        assert!(p.wakes(1_100, 1_200), "recent work wakes");
        assert_eq!(p.epoch(), 1);
        assert!(!p.wakes(1_150, 1_200), "already awake: no second restart");
        assert_eq!(p.interval_us(5, 1_300), 5);
        assert_eq!(p.last_work_us(), 1_150);
        assert_eq!(p.interval_us(5, 2_150), 50, "expires idle_after_us after the last work");
    }

    #[test]
    fn a_slowdown_of_one_never_changes_the_intervals() {
        let mut p = Pace::new(&PaceConfig { idle_after_us: 0, idle_slowdown: 1 });
        assert_eq!(p.interval_us(7, 10_000_000), 7);
        assert!(PaceConfig { idle_after_us: 0, idle_slowdown: 0 }.validate().is_err());
    }
}
