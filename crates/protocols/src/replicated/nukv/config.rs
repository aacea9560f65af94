use serde::{Deserialize, Serialize};

/// The levels are the core's ([`causeway_core::Levels`]): the client
/// library, the CLI and the simulator name them per operation.
pub use causeway_core::{ReadLevel, WriteLevel};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The guarantee a session's GETs ask for unless an operation names
    /// its own.
    pub read_level: ReadLevel,
    /// The guarantee a session's PUTs ask for unless an operation names
    /// its own.
    pub write_level: WriteLevel,
    /// One Raft tick, µs: every group's logical clock.
    pub tick_us: u64,
    /// Raft's election timeout, in ticks (each node waits a number of
    /// ticks between this and twice this, drawn anew at every restart of
    /// its election clock from its id, its start time and the draw's
    /// number, so that a group's nodes rarely time out together twice).
    pub election_ticks: u64,
    /// Raft's heartbeat interval, in ticks.
    pub heartbeat_ticks: u64,
    /// Compact a group's log once it holds this many entries beyond its
    /// snapshot (and the forwarder has shipped them everywhere).
    pub compact_entries: u64,
    /// How long a forwarder waits for another DC's acknowledgement before
    /// it ships the unacknowledged writes again, µs.
    pub forward_retry_us: u64,
    /// How long a GET may wait at a replica for its stable vector to reach
    /// the session's, µs, before the replica answers `Behind` and the
    /// client asks another.
    pub get_wait_us: u64,
    /// How long a client waits for any one answer before it asks another
    /// replica (a GET, a PUT refused with `NotLeader`) or gives up (a PUT
    /// that may have been proposed), µs.
    pub client_retry_us: u64,
    /// How long an operation may take in all before the client fails it
    /// with `TimedOut`, µs.
    pub op_deadline_us: u64,
    /// The share of GETs a session sends to a replica of another DC (one
    /// drawn at random) instead of its own DC's, 0–1: one minus the
    /// "local access probability" of Roohitavaf's evaluation (§4.4.1:
    /// a client thread reads from "one of the six replicas" and writes on
    /// "one of the leaders", drawn "with the given probabilities"; Figs
    /// 4.3, 4.4, 4.6). Drawn per operation from a generator seeded by the
    /// session's nonce, so a simulation replays exactly.
    pub remote_read_share: f64,
    /// The share of PUTs a session sends to another DC's leader, 0–1 (as
    /// `remote_read_share`, for writes).
    pub remote_write_share: f64,
    /// How a PUT is ordered after the writes its level makes it depend on
    /// (§4.4.2, the HLC subscript of Table 4.1). `true`, Alg 4.1/4.2: it
    /// carries the session's dependency time `dt` and the leader stamps
    /// it past `dt` at once (`updateHLC(dt)`), so a PUT never waits.
    /// `false`, the thesis's "without HLC" runs: "the PUT operation must
    /// wait until the current server receives all the relevant updates
    /// that must occur before [it]" — the session sends the log indexes
    /// its level depends on for the key's partition (`hrm[:,p]` for
    /// write-follows-reads, `hwm[:,p]` for monotonic-write, their maximum
    /// for both), the leader holds the PUT until its stable vector covers
    /// them (having applied those writes, its clock is past their stamps),
    /// then stamps it with its own clock alone.
    pub hlc: bool,
    /// Mutant: GETs do not wait for the stable vector (Alg 4.2's blocking
    /// rule switched off), so read-your-writes and monotonic reads break
    /// when a session reads from a lagging replica.
    pub mutant_skip_get_wait: bool,
    /// Mutant: a leader stamps a write with its physical clock alone, not
    /// past its HLC (Alg 4.2's `updateHLC` switched off), so after its clock
    /// steps back, or under a new leader whose clock is behind, a later
    /// write of the DC stamps below an earlier one and loses to it
    /// everywhere: the DC's write order breaks.
    pub mutant_stamp_physical: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            read_level: ReadLevel::default(),
            write_level: WriteLevel::default(),
            tick_us: 5_000,
            election_ticks: 10,
            heartbeat_ticks: 2,
            compact_entries: 256,
            forward_retry_us: 200_000,
            get_wait_us: 500_000,
            client_retry_us: 300_000,
            op_deadline_us: 4_000_000,
            remote_read_share: 0.0,
            remote_write_share: 0.0,
            hlc: true,
            mutant_skip_get_wait: false,
            mutant_stamp_physical: false,
        }
    }
}

impl Config {
    /// Every field in range, named when not.
    pub fn check(&self) -> Result<(), String> {
        if self.tick_us == 0 {
            return Err("nukv.tick_us must be at least 1".into());
        }
        if self.heartbeat_ticks == 0 || self.election_ticks <= self.heartbeat_ticks {
            return Err(format!(
                "nukv.election_ticks ({}) must exceed nukv.heartbeat_ticks ({}), which must be at least 1",
                self.election_ticks, self.heartbeat_ticks
            ));
        }
        if self.compact_entries == 0 {
            return Err("nukv.compact_entries must be at least 1".into());
        }
        for (name, v) in [
            ("forward_retry_us", self.forward_retry_us),
            ("get_wait_us", self.get_wait_us),
            ("client_retry_us", self.client_retry_us),
        ] {
            if v == 0 {
                return Err(format!("nukv.{name} must be at least 1"));
            }
        }
        for (name, v) in
            [("remote_read_share", self.remote_read_share), ("remote_write_share", self.remote_write_share)]
        {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("nukv.{name} must be a share between 0 and 1, got {v}"));
            }
        }
        if self.op_deadline_us < self.client_retry_us {
            return Err(format!(
                "nukv.op_deadline_us ({}) must be at least nukv.client_retry_us ({})",
                self.op_deadline_us, self.client_retry_us
            ));
        }
        Ok(())
    }
}
