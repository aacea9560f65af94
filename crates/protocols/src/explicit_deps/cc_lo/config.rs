use serde::{Deserialize, Serialize};

/// CC-LO's parameters (the `[protocol]` table).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// A session gives up on a ROT attempt that has not completed after
    /// this long and runs it again under a new id (deviation 3: a ROT
    /// lives at most this long, which is what lets reader records expire).
    pub rot_timeout_us: u64,
    /// Attempts of one ROT before it fails as `Aborted`.
    pub rot_attempts: u32,
    /// How long a reader record, and a version's old-reader set, is kept.
    /// Didona et al. §5 keep ROT ids 500 ms (COPS-SNOW: 5 s). Must be at
    /// least `rot_timeout_us + tick_us`. After a restart, a partition
    /// answers no readers check for this long (deviation 7).
    pub reader_ttl_us: u64,
    /// The period of the server's one timer: reader-record and old-reader
    /// expiry, check retries, the hold after a restart. Expiry is counted
    /// in these ticks, never by the clock, so a clock jump cannot expire a
    /// record early.
    pub tick_us: u64,
    /// Re-send a readers check unanswered for this long (the partition
    /// asked may have crashed and forgotten it).
    pub check_retry_us: u64,
    /// Settle versions visible in every DC for a reader TTL, so that
    /// sessions stop depending on them (deviation 10). Off, CC-LO is the
    /// paper's: a session's context is every version it read since its last
    /// write (the seed experiments run it so), and a session that read more
    /// than `MAX_DEPS` versions cannot write.
    pub settle: bool,
    /// A deliberately broken variant: a partition answers another
    /// partition's readers check without any old readers (it still waits
    /// for the dependencies, so the dependency check stands): a version's
    /// old readers are only the ROTs that read on its own partition. The
    /// Fig. 1 race returns (X0, Y1); `tests.rs` and
    /// `crates/check/tests/cclo_jitter.rs` catch it.
    pub mutant_no_old_reader_propagation: bool,
    /// A deliberately broken variant, the straw man of Didona et al. §6
    /// ("each operation is attached to the output of a Lamport clock
    /// alone"): no reader records and no old readers; a partition reads
    /// the newest version stamped at most max(the session's highest
    /// timestamp, its clock) and pushes its clock there. `tests.rs` and
    /// `crates/check/tests/cclo_jitter.rs` catch it.
    pub mutant_lamport_only: bool,
    /// A deliberately broken variant: a replicated version becomes visible
    /// without waiting for its dependencies (the check is answered at
    /// once). The conformance suite's photo-then-album catches it.
    pub mutant_skip_dep_check: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            rot_timeout_us: 250_000,
            rot_attempts: 8,
            reader_ttl_us: 500_000,
            tick_us: 50_000,
            check_retry_us: 200_000,
            settle: true,
            mutant_no_old_reader_propagation: false,
            mutant_lamport_only: false,
            mutant_skip_dep_check: false,
        }
    }
}

impl Config {
    /// Ticks a reader record lives (at least `reader_ttl_us` of time).
    pub fn ttl_ticks(&self) -> u64 {
        self.reader_ttl_us.div_ceil(self.tick_us.max(1))
    }

    /// Ticks between re-sends of an unanswered check (at least one).
    pub fn retry_ticks(&self) -> u64 {
        self.check_retry_us.div_ceil(self.tick_us.max(1)).max(1)
    }

    pub fn check(&self) -> Result<(), String> {
        for (name, v) in [
            ("rot_timeout_us", self.rot_timeout_us),
            ("reader_ttl_us", self.reader_ttl_us),
            ("tick_us", self.tick_us),
            ("check_retry_us", self.check_retry_us),
            ("rot_attempts", self.rot_attempts as u64),
        ] {
            if v == 0 {
                return Err(format!("protocol.{name} must be positive"));
            }
        }
        if self.reader_ttl_us < self.rot_timeout_us.saturating_add(self.tick_us) {
            return Err(format!(
                "protocol.reader_ttl_us ({}) must be at least rot_timeout_us + tick_us ({}): a reader record must \
                 outlive every ROT that may still read",
                self.reader_ttl_us,
                self.rot_timeout_us.saturating_add(self.tick_us)
            ));
        }
        Ok(())
    }
}
