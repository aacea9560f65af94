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
    /// Raft's election timeout, in ticks (each node waits a fixed number
    /// of ticks between this and twice this, drawn from its id and start
    /// time so that a group's nodes rarely time out together).
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
    /// Mutant: GETs do not wait for the stable vector (Alg 4.2's blocking
    /// rule switched off), so read-your-writes and monotonic reads break
    /// when a session reads from a lagging replica.
    pub mutant_skip_get_wait: bool,
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
            mutant_skip_get_wait: false,
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
        if self.op_deadline_us < self.client_retry_us {
            return Err(format!(
                "nukv.op_deadline_us ({}) must be at least nukv.client_retry_us ({})",
                self.op_deadline_us, self.client_retry_us
            ));
        }
        Ok(())
    }
}
