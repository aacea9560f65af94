//! What the protocol thread lends the node core for one step
//! ([`causeway_core::Host`]): the clock, read once per step and never below
//! the floor recovered from the log; the timer heap, whose deadlines are
//! taken when a handler sets them, so a timer due within the turn fires in
//! it; and observations, turned into metrics.

use crate::metrics::{FromDc, Kept, NodeMetrics};
use causeway_core::{DcId, Host, Observation};
use prometheus_client::metrics::counter::Counter;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Timers due this soon are fired between a turn's inputs, once due, and
/// spun out at its end (the protocol loop's `fire_due` and `fire_timers`).
pub(super) const SHORT_TIMER_US: u64 = 2;

/// The protocol's timers: deadline, the order they were set in, token.
#[derive(Default)]
pub(super) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, u64, u64)>>,
    set: u64,
    /// A handler set a timer due within [`SHORT_TIMER_US`] since the last
    /// [`Timers::take_short`].
    short: bool,
}

impl Timers {
    fn set(&mut self, after_us: u64, token: u64) {
        self.short |= after_us <= SHORT_TIMER_US;
        self.set += 1;
        self.heap.push(Reverse((Instant::now() + Duration::from_micros(after_us), self.set, token)));
    }

    /// The earliest deadline.
    pub(super) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    /// The token of the earliest timer due at `now`, taken off the heap.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<u64> {
        match self.heap.peek() {
            Some(Reverse((t, _, _))) if *t <= now => self.heap.pop().map(|Reverse((_, _, token))| token),
            _ => None,
        }
    }

    /// Whether a short timer was set since the last call.
    pub(super) fn take_short(&mut self) -> bool {
        std::mem::take(&mut self.short)
    }
}

/// The protocol thread's [`Host`].
pub(super) struct LoopHost {
    /// The clock as read for the current step ([`LoopHost::read_clock`]).
    now_us: u64,
    /// No clock reading is below this: the floor recovered from the log.
    clock_floor_us: u64,
    dc: DcId,
    metrics: Arc<NodeMetrics>,
    /// Each protocol sample's (count, sum) counters, by name, so a sample
    /// (several per write for some protocols) does not look them up in
    /// their families.
    samples: Kept<(Counter, Counter)>,
    pub(super) timers: Timers,
}

fn system_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

impl LoopHost {
    pub(super) fn new(dc: DcId, clock_floor_us: u64, metrics: Arc<NodeMetrics>) -> Self {
        let mut host =
            LoopHost { now_us: 0, clock_floor_us, dc, metrics, samples: Kept::default(), timers: Timers::default() };
        host.read_clock();
        host
    }

    /// Read the clock for the next step (one reading per handler call, as
    /// a protocol sees one instant per event) and return it.
    pub(super) fn read_clock(&mut self) -> u64 {
        self.now_us = system_us().max(self.clock_floor_us);
        self.now_us
    }

    /// [`Observation::Visible`]: a local write counted, a remote one's
    /// visibility latency recorded. The metrics count what became visible,
    /// never look at it: no copy of the key or value out of the store.
    fn visible(&mut self, origin: DcId, written_us: u64) {
        if origin == self.dc {
            self.metrics.local_writes.inc();
        } else {
            self.metrics.remote_visible.inc();
            self.metrics
                .visibility_seconds
                .get_or_create(&FromDc { from_dc: origin.0 })
                .observe(self.now_us.saturating_sub(written_us) as f64 / 1e6);
        }
    }
}

impl Host for LoopHost {
    fn now_us(&self) -> u64 {
        self.now_us
    }

    /// Straight into the heap, the deadline taken now: one due within the
    /// turn fires in it.
    fn set_timer(&mut self, after_us: u64, token: u64) {
        self.timers.set(after_us, token);
    }

    fn observe(&mut self, obs: Observation<'_>) {
        match obs {
            Observation::Visible { origin, written_us, .. } => self.visible(origin, written_us),
            Observation::Stable { stable_us } => {
                self.metrics.stable_lag_seconds.set(self.now_us.saturating_sub(stable_us) as f64 / 1e6);
            }
            Observation::Blocked { waited_us, .. } => {
                self.metrics.blocked.inc();
                self.metrics.blocked_seconds.inc_by(waited_us as f64 / 1e6);
            }
            Observation::Sample { what, value } => {
                let metrics = &self.metrics;
                let i = self.samples.index(what, || metrics.sample_counters(what));
                let (count, sum) = self.samples.get(i);
                count.inc();
                sum.inc_by(value);
            }
        }
    }
}
