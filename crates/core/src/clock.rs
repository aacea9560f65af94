//! Time as protocols see it: a node's physical clock (which may be offset,
//! drift, and jump), and the hybrid logical clock of Roohitavaf §2.
//!
//! Protocols never read a clock themselves; the runtime hands them
//! `now_us` from a [`ClockModel`] (simulator) or the OS clock (network runtime).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A node's physical clock relative to true time: `local = true + offset +
/// drift·true + Σ jumps so far`. Jumps may be negative (an NTP step back,
/// Roohitavaf §5.6). Readings saturate at zero.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockModel {
    #[serde(default)]
    pub offset_us: i64,
    /// Parts per million: 100 means the clock gains 100 µs per true second.
    #[serde(default)]
    pub drift_ppm: f64,
    /// `(at true µs, step µs)`, applied once true time reaches `at`.
    #[serde(default)]
    pub jumps: Vec<ClockJump>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockJump {
    pub at_us: u64,
    pub step_us: i64,
}

impl ClockModel {
    pub fn with_offset(offset_us: i64) -> Self {
        ClockModel { offset_us, ..Default::default() }
    }

    /// The local reading at true time `true_us`, saturating at zero.
    pub fn read(&self, true_us: u64) -> u64 {
        self.read_signed(true_us).max(0) as u64
    }

    /// The local reading without saturation (it may be negative early on).
    pub fn read_signed(&self, true_us: u64) -> i64 {
        let mut t = true_us as i64 + self.offset_us;
        if self.drift_ppm != 0.0 {
            t += (true_us as f64 * self.drift_ppm / 1e6) as i64;
        }
        for j in &self.jumps {
            if true_us >= j.at_us {
                t += j.step_us;
            }
        }
        t
    }
}

/// A hybrid logical clock timestamp ⟨l, c⟩, ordered lexicographically.
/// `l` approximates physical time in µs; `c` orders events that share an `l`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Hlc {
    pub l: u64,
    pub c: u32,
}

impl Hlc {
    pub const ZERO: Hlc = Hlc { l: 0, c: 0 };
    pub const MAX: Hlc = Hlc { l: u64::MAX, c: u32::MAX };

    pub const fn new(l: u64, c: u32) -> Hlc {
        Hlc { l, c }
    }

    /// Send or local event (Roohitavaf Alg 2.1): move past physical time `pt`
    /// and past the previous value. Returns the new timestamp.
    pub fn tick(&mut self, pt: u64) -> Hlc {
        let l_old = self.l;
        self.l = l_old.max(pt);
        if self.l == l_old {
            self.bump(self.c);
        } else {
            self.c = 0;
        }
        *self
    }

    /// Set the counter to `c + 1`. The counter is bounded in Kulkarni et al.;
    /// if a peer ever hands us one at its limit, carry into `l` instead of
    /// overflowing: the timestamp still grows, it only runs 1 µs ahead.
    fn bump(&mut self, c: u32) {
        match c.checked_add(1) {
            Some(c) => self.c = c,
            None => {
                self.l += 1;
                self.c = 0;
            }
        }
    }

    /// Receive event, and the `updateHLC(dt)` of every protocol in Roohitavaf:
    /// move past `pt`, the previous value and the remote or dependency time `m`.
    /// (The source's `else if (HLC.l = l)` is a typo for `= m.l`.)
    pub fn update(&mut self, pt: u64, m: Hlc) -> Hlc {
        let l_old = self.l;
        self.l = l_old.max(m.l).max(pt);
        if self.l == l_old && self.l == m.l {
            self.bump(self.c.max(m.c));
        } else if self.l == l_old {
            self.bump(self.c);
        } else if self.l == m.l {
            self.bump(m.c);
        } else {
            self.c = 0;
        }
        *self
    }
}

impl fmt::Debug for Hlc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "⟨{},{}⟩", self.l, self.c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_model_applies_offset_drift_and_jumps() {
        let c = ClockModel {
            offset_us: 500,
            drift_ppm: 100.0,
            jumps: vec![ClockJump { at_us: 2_000_000, step_us: -10_000 }],
        };
        assert_eq!(c.read(0), 500);
        assert_eq!(c.read(1_000_000), 1_000_000 + 500 + 100);
        assert_eq!(c.read(2_000_000), 2_000_000 + 500 + 200 - 10_000);
        assert_eq!(ClockModel::with_offset(-50).read(10), 0);
    }

    #[test]
    fn hlc_is_monotonic_and_tracks_physical_time() {
        let mut h = Hlc::ZERO;
        let a = h.tick(100);
        assert_eq!(a, Hlc::new(100, 0));
        // The physical clock went backwards: l stays, c counts.
        let b = h.tick(90);
        assert_eq!(b, Hlc::new(100, 1));
        assert!(b > a);
        // A message from the future pulls l forward.
        let c = h.update(95, Hlc::new(200, 7));
        assert_eq!(c, Hlc::new(200, 8));
        // Equal l on all three sides takes max c + 1.
        let mut h2 = Hlc::new(200, 3);
        assert_eq!(h2.update(150, Hlc::new(200, 5)), Hlc::new(200, 6));
        // Physical time ahead of everything resets c.
        assert_eq!(h2.update(300, Hlc::new(200, 9)), Hlc::new(300, 0));
        // A counter at its limit carries into l rather than overflowing.
        let mut h3 = Hlc::new(500, 0);
        let t = h3.update(100, Hlc::new(500, u32::MAX));
        assert_eq!(t, Hlc::new(501, 0));
        assert!(t > Hlc::new(500, u32::MAX));
    }
}
