//! Random fault schedules for torture runs: DC partitions and heals, node
//! pauses, delay spikes, slow replication links, clock skew and backward
//! clock jumps — drawn from one seed, so a failing run is replayed by its seed.
//!
//! Faults that a protocol does not claim to tolerate are left out by the
//! [`Chaos`] switches (a GentleRain run, for instance, gets no backward jumps:
//! seed 000 §5.6 shows it cannot survive them). Every cut is healed and every
//! pause ends before the load stops, so convergence can be demanded after the
//! drain.

use crate::scenario::{Fault, FaultKind, NodeClock};
use causeway_core::{ClockJump, NodeRole, Topology};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Which faults to draw.
#[derive(Clone, Copy, Debug)]
pub struct Chaos {
    pub partitions: bool,
    pub pauses: bool,
    pub spikes: bool,
    pub slow_links: bool,
    /// Random per-node clock offsets up to this width (µs); 0 disables.
    pub skew_us: u64,
    pub backward_jumps: bool,
}

impl Default for Chaos {
    fn default() -> Self {
        Chaos { partitions: true, pauses: true, spikes: true, slow_links: true, skew_us: 20_000, backward_jumps: true }
    }
}

/// A drawn schedule: faults plus per-node clock settings.
#[derive(Clone, Debug, Default)]
pub struct Schedule {
    pub faults: Vec<Fault>,
    pub clocks: Vec<NodeClock>,
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
        for seed in 0..50 {
            let s = draw(seed, &t, 1_000, Chaos::default());
            any_jump |= s.clocks.iter().any(|c| !c.jumps.is_empty());
            for f in &s.faults {
                assert!(f.time_us() <= 800_000, "fault after 80% of the load: {f:?}");
            }
            let calm = draw(seed, &t, 1_000, Chaos { backward_jumps: false, ..Chaos::default() });
            assert!(calm.clocks.iter().all(|c| c.jumps.is_empty()));
        }
        assert!(any_jump);
    }
}
