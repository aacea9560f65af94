//! Random fault schedules for torture runs: DC partitions and heals, node
//! pauses, delay spikes, slow links (replication and intra-DC), slow nodes,
//! crash-restart cycles, clock skew, drift, and forward and backward clock
//! jumps — drawn from one seed, so a failing run is replayed by its seed.
//!
//! Faults that a protocol does not claim to tolerate
//! ([`causeway_core::Protocol::TOLERATES`]) are left out by the [`Chaos`]
//! switches (a GentleRain run, for instance, gets no backward jumps: Roohitavaf
//! §5.6 shows it cannot survive them). Every cut is healed, every pause,
//! slowdown and crash ends before the load stops, so convergence and
//! liveness can be demanded after the drain.

use crate::scenario::{CrashPoint, Fault, FaultKind, FsyncPolicy, NodeClock};
use causeway_core::{ClockJump, Faults, NodeRole, Topology};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Which faults to draw.
#[derive(Clone, Copy, Debug)]
pub struct Chaos {
    pub partitions: bool,
    pub pauses: bool,
    pub spikes: bool,
    /// Slow replication links between DCs.
    pub slow_links: bool,
    /// Slow links between servers of one DC (drawn after every older kind,
    /// so switching it and the other newer kinds off replays older seeds).
    pub intra_dc_links: bool,
    /// Nodes whose every message is slower for a while.
    pub slow_nodes: bool,
    /// Random per-node clock offsets up to this width (µs); 0 disables.
    pub skew_us: u64,
    /// Random per-node drift up to ± this (ppm); 0 disables.
    pub drift_ppm: f64,
    pub forward_jumps: bool,
    pub backward_jumps: bool,
    /// Crash a node and restart it from its journal.
    pub crash_restarts: bool,
}

impl Default for Chaos {
    fn default() -> Self {
        Chaos::of(&Faults::ALL)
    }
}

impl Chaos {
    /// Draw every fault kind `faults` allows, at torture's sizes.
    pub fn of(faults: &Faults) -> Chaos {
        Chaos {
            partitions: faults.partitions,
            pauses: faults.pauses,
            spikes: faults.spikes,
            slow_links: faults.slow_links,
            intra_dc_links: faults.slow_links,
            slow_nodes: faults.slow_nodes,
            skew_us: if faults.skew { 20_000 } else { 0 },
            drift_ppm: if faults.drift { 200.0 } else { 0.0 },
            forward_jumps: faults.forward_jumps,
            backward_jumps: faults.backward_jumps,
            crash_restarts: faults.crash_restart,
        }
    }
}

/// A drawn schedule: faults plus per-node clock settings, and the log's
/// sync policy the crashes strike under.
#[derive(Clone, Debug, Default)]
pub struct Schedule {
    pub faults: Vec<Fault>,
    pub clocks: Vec<NodeClock>,
    pub fsync: FsyncPolicy,
    /// How long a sync takes (`durability.sync_us`): crashes then also
    /// strike while one is on the disk.
    pub sync_us: u64,
}

/// Draw a schedule for a run whose load lasts `duration_ms`. All faults
/// start and end within the first 80 % of it.
pub fn draw(seed: u64, topology: &Topology, duration_ms: u64, chaos: Chaos) -> Schedule {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xc4a0_5eed);
    let mut s = Schedule::default();
    let m = topology.dcs() as u16;
    let n = topology.nodes() as u32;
    let horizon = (duration_ms * 8 / 10).max(2);
    let window = |rng: &mut ChaCha8Rng| {
        let start = rng.random_range(0..horizon - 1);
        let len = rng.random_range(1..=(horizon - start).min(duration_ms / 4 + 1));
        (start, len)
    };
    if chaos.partitions && m > 1 {
        for _ in 0..rng.random_range(0..=2) {
            let a = rng.random_range(0..m);
            let b = (a + rng.random_range(1..m)) % m;
            let (start, len) = window(&mut rng);
            s.faults.push(Fault { at_ms: start, at_us: 0, kind: FaultKind::Cut { a, b } });
            s.faults.push(Fault { at_ms: start + len, at_us: 0, kind: FaultKind::Heal { a, b } });
        }
    }
    if chaos.pauses {
        for _ in 0..rng.random_range(0..=2) {
            let node = rng.random_range(0..n);
            let (start, len) = window(&mut rng);
            s.faults.push(Fault { at_ms: start, at_us: 0, kind: FaultKind::Pause { node, for_ms: len } });
        }
    }
    if chaos.spikes && m > 1 {
        for _ in 0..rng.random_range(0..=2) {
            let a = rng.random_range(0..m);
            let b = (a + rng.random_range(1..m)) % m;
            let (start, len) = window(&mut rng);
            let extra_ms = rng.random_range(10..=300);
            s.faults.push(Fault { at_ms: start, at_us: 0, kind: FaultKind::Spike { a, b, extra_ms, for_ms: len } });
        }
    }
    if chaos.slow_links && m > 1 {
        for _ in 0..rng.random_range(0..=3) {
            // A replication link between two equivalents of one partition.
            let from = rng.random_range(0..n);
            let NodeRole::Partition { partition, dc, .. } = topology.role(causeway_core::NodeId(from)) else {
                continue;
            };
            let others: Vec<u32> =
                topology.equivalents(partition).filter(|(d, _)| *d != dc).map(|(_, x)| x.0).collect();
            if others.is_empty() {
                continue;
            }
            let to = others[rng.random_range(0..others.len())];
            let (start, len) = window(&mut rng);
            let extra_ms = rng.random_range(20..=400);
            s.faults.push(Fault { at_ms: start, at_us: 0, kind: FaultKind::SlowLink { from, to, extra_ms } });
            s.faults.push(Fault { at_ms: start + len, at_us: 0, kind: FaultKind::SlowLink { from, to, extra_ms: 0 } });
        }
    }
    if chaos.skew_us > 0 || chaos.backward_jumps {
        for node in 0..n {
            let half = chaos.skew_us as i64 / 2;
            let offset_us = if half > 0 { rng.random_range(-half..=half) } else { 0 };
            let mut jumps = Vec::new();
            if chaos.backward_jumps && rng.random_bool(0.2) {
                let at_us = rng.random_range(0..horizon) * 1_000;
                jumps.push(ClockJump { at_us, step_us: -rng.random_range(1_000..=100_000) });
            }
            if offset_us != 0 || !jumps.is_empty() {
                s.clocks.push(NodeClock { node, offset_us, drift_ppm: 0.0, jumps });
            }
        }
    }
    // Kinds added later are drawn after the older ones, from the same
    // stream, so a schedule without them is what it was before they existed.
    if chaos.intra_dc_links {
        for _ in 0..rng.random_range(0..=2) {
            // A link between two servers of one DC (the stabilization tree's).
            let from = rng.random_range(0..n);
            let dc = topology.dc_of(causeway_core::NodeId(from));
            let others: Vec<u32> =
                (0..n).filter(|&x| x != from && topology.dc_of(causeway_core::NodeId(x)) == dc).collect();
            if others.is_empty() {
                continue;
            }
            let to = others[rng.random_range(0..others.len())];
            let (start, len) = window(&mut rng);
            let extra_ms = rng.random_range(5..=100);
            s.faults.push(Fault { at_ms: start, at_us: 0, kind: FaultKind::SlowLink { from, to, extra_ms } });
            s.faults.push(Fault { at_ms: start + len, at_us: 0, kind: FaultKind::SlowLink { from, to, extra_ms: 0 } });
        }
    }
    if chaos.slow_nodes {
        for _ in 0..rng.random_range(0..=1) {
            let node = rng.random_range(0..n);
            let (start, len) = window(&mut rng);
            let extra_ms = rng.random_range(5..=100);
            s.faults.push(Fault { at_ms: start, at_us: 0, kind: FaultKind::Slow { node, extra_ms } });
            s.faults.push(Fault { at_ms: start + len, at_us: 0, kind: FaultKind::Slow { node, extra_ms: 0 } });
        }
    }
    if chaos.crash_restarts {
        // Where each crash strikes, and the sync policy, on a stream of
        // their own: the other draws replay as before they existed. Every
        // crash point is drawn under `always` and `group`, the policies
        // under which a node promises to lose nothing it acknowledged.
        let mut durable_rng = ChaCha8Rng::seed_from_u64(seed ^ 0xd0_5eed);
        s.fsync = if durable_rng.random_bool(0.5) { FsyncPolicy::Always } else { FsyncPolicy::Group };
        // The sync's duration on a third stream, for the same reason.
        let mut disk_rng = ChaCha8Rng::seed_from_u64(seed ^ 0xd15c_5eed);
        s.sync_us = [0, 0, 100, 1_000][disk_rng.random_range(0..4)];
        for _ in 0..rng.random_range(0..=2) {
            let node = rng.random_range(0..n);
            let (start, len) = window(&mut rng);
            let at = match durable_rng.random_range(0..4) {
                0 => None,
                1 => Some(CrashPoint::AfterAppend),
                2 => Some(CrashPoint::AfterSync),
                _ => Some(CrashPoint::TornTail),
            };
            s.faults.push(Fault { at_ms: start, at_us: 0, kind: FaultKind::Crash { node, for_ms: len, at } });
        }
    }
    if chaos.forward_jumps || chaos.drift_ppm > 0.0 {
        for node in 0..n {
            let jump = chaos.forward_jumps && rng.random_bool(0.2);
            let at_us = rng.random_range(0..horizon) * 1_000;
            let step_us = rng.random_range(1_000..=100_000i64);
            let drift_ppm =
                if chaos.drift_ppm > 0.0 { rng.random_range(-chaos.drift_ppm..=chaos.drift_ppm) } else { 0.0 };
            if !jump && drift_ppm == 0.0 {
                continue;
            }
            let i = match s.clocks.iter().position(|c| c.node == node) {
                Some(i) => i,
                None => {
                    s.clocks.push(NodeClock { node, offset_us: 0, drift_ppm: 0.0, jumps: Vec::new() });
                    s.clocks.len() - 1
                }
            };
            let c = &mut s.clocks[i];
            c.drift_ppm = drift_ppm;
            if jump {
                c.jumps.push(ClockJump { at_us, step_us });
                c.jumps.sort_by_key(|j| j.at_us);
            }
        }
    }
    s.faults.sort_by_key(|f| f.time_us());
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::TopologySpec;

    #[test]
    fn schedules_are_reproducible_and_respect_switches() {
        let t = Topology::new(TopologySpec::full(3, 4)).unwrap();
        let a = draw(5, &t, 1_000, Chaos::default());
        let b = draw(5, &t, 1_000, Chaos::default());
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        let mut any_jump = false;
        let mut any_crash = false;
        for seed in 0..50 {
            let s = draw(seed, &t, 1_000, Chaos::default());
            any_jump |= s.clocks.iter().any(|c| !c.jumps.is_empty());
            for f in &s.faults {
                assert!(f.time_us() <= 800_000, "fault after 80% of the load: {f:?}");
            }
            let calm = draw(seed, &t, 1_000, Chaos { backward_jumps: false, forward_jumps: false, ..Chaos::default() });
            assert!(calm.clocks.iter().all(|c| c.jumps.is_empty()));
            let none = draw(seed, &t, 1_000, Chaos::of(&Faults::NETWORK));
            assert!(none.clocks.is_empty(), "no clock faults unless claimed");
            assert!(none.faults.iter().all(|f| !matches!(f.kind, FaultKind::Crash { .. })));
            for f in &s.faults {
                if let FaultKind::Crash { for_ms, .. } = f.kind {
                    any_crash = true;
                    assert!(f.time_us() + for_ms * 1_000 <= 800_000, "a crash lasting past 80% of the load: {f:?}");
                }
            }
        }
        assert!(any_jump);
        assert!(any_crash);
    }
}
