//! Per-operation session guarantees: the levels a GET or PUT may ask for.
//!
//! Roohitavaf, *Consistency for Distributed Data Stores* (PhD dissertation,
//! MSU 2019), §4.2: NuKV lets every operation pick its guarantee, per key
//! (Defs 4–7). A read may ask for monotonic reads (it sees at least what
//! the session read of the key before), read-your-writes (at least what
//! the session wrote of it), both, or neither; a write for monotonic
//! writes (it wins over the session's earlier writes of the key),
//! writes-follow-reads (over what the session read of it), both, or
//! neither. A causal protocol gives all four to every operation, so it
//! takes any level and ignores it; a protocol that promises none of them
//! refuses any level above eventual ([`Levels::refusal`]).
//!
//! This is not a consistency level of a protocol as a whole (the checker's
//! `Level`), only what one operation asks of the session it runs in.

use crate::protocol::{Op, OpError};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A read's guarantee (Alg 4.1's `ReadConsistencyLevel`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadLevel {
    Eventual,
    MonotonicRead,
    ReadYourWrite,
    #[default]
    MonotonicReadYourWrite,
}

/// A write's guarantee (Alg 4.1's `WriteConsistencyLevel`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteLevel {
    Eventual,
    WriteFollowsReads,
    MonotonicWrite,
    #[default]
    MonotonicWriteFollowsReads,
}

impl ReadLevel {
    pub const ALL: [ReadLevel; 4] =
        [ReadLevel::Eventual, ReadLevel::MonotonicRead, ReadLevel::ReadYourWrite, ReadLevel::MonotonicReadYourWrite];

    /// Def 4: the read sees at least what its session read of the key.
    pub fn monotonic_read(self) -> bool {
        matches!(self, ReadLevel::MonotonicRead | ReadLevel::MonotonicReadYourWrite)
    }

    /// Def 5: the read sees at least what its session wrote of the key.
    pub fn read_your_write(self) -> bool {
        matches!(self, ReadLevel::ReadYourWrite | ReadLevel::MonotonicReadYourWrite)
    }

    pub fn name(self) -> &'static str {
        match self {
            ReadLevel::Eventual => "eventual",
            ReadLevel::MonotonicRead => "monotonic-read",
            ReadLevel::ReadYourWrite => "read-your-write",
            ReadLevel::MonotonicReadYourWrite => "monotonic-read-your-write",
        }
    }
}

impl WriteLevel {
    pub const ALL: [WriteLevel; 4] = [
        WriteLevel::Eventual,
        WriteLevel::WriteFollowsReads,
        WriteLevel::MonotonicWrite,
        WriteLevel::MonotonicWriteFollowsReads,
    ];

    /// Def 6: the write wins over its session's earlier writes of the key.
    pub fn monotonic_write(self) -> bool {
        matches!(self, WriteLevel::MonotonicWrite | WriteLevel::MonotonicWriteFollowsReads)
    }

    /// Def 7: the write wins over what its session read of the key.
    pub fn write_follows_reads(self) -> bool {
        matches!(self, WriteLevel::WriteFollowsReads | WriteLevel::MonotonicWriteFollowsReads)
    }

    pub fn name(self) -> &'static str {
        match self {
            WriteLevel::Eventual => "eventual",
            WriteLevel::WriteFollowsReads => "write-follows-reads",
            WriteLevel::MonotonicWrite => "monotonic-write",
            WriteLevel::MonotonicWriteFollowsReads => "monotonic-write-follows-reads",
        }
    }
}

impl fmt::Display for ReadLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for WriteLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Short names too (`e`, `mr`, `ryw`, `m`), as the paper's tables write
/// them (Table 4.1: E, M).
impl FromStr for ReadLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<ReadLevel, String> {
        match s.to_ascii_lowercase().as_str() {
            "eventual" | "e" => Ok(ReadLevel::Eventual),
            "monotonic-read" | "mr" => Ok(ReadLevel::MonotonicRead),
            "read-your-write" | "read-your-writes" | "ryw" => Ok(ReadLevel::ReadYourWrite),
            "monotonic-read-your-write" | "monotonic-read-your-writes" | "m" => Ok(ReadLevel::MonotonicReadYourWrite),
            other => Err(format!(
                "unknown read level {other:?}; known: eventual, monotonic-read, read-your-write, \
                 monotonic-read-your-write"
            )),
        }
    }
}

impl FromStr for WriteLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<WriteLevel, String> {
        match s.to_ascii_lowercase().as_str() {
            "eventual" | "e" => Ok(WriteLevel::Eventual),
            "write-follows-reads" | "writes-follow-reads" | "wfr" => Ok(WriteLevel::WriteFollowsReads),
            "monotonic-write" | "monotonic-writes" | "mw" => Ok(WriteLevel::MonotonicWrite),
            "monotonic-write-follows-reads" | "m" => Ok(WriteLevel::MonotonicWriteFollowsReads),
            other => Err(format!(
                "unknown write level {other:?}; known: eventual, write-follows-reads, monotonic-write, \
                 monotonic-write-follows-reads"
            )),
        }
    }
}

/// The guarantees one operation asks for: a GET uses `read`, a PUT
/// `write`. The default is the strongest of both (the paper's M/M).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Levels {
    pub read: ReadLevel,
    pub write: WriteLevel,
}

impl Levels {
    /// Neither reads nor writes ask for anything.
    pub const EVENTUAL: Levels = Levels { read: ReadLevel::Eventual, write: WriteLevel::Eventual };

    /// Whether `op` under these levels asks for more than eventual.
    pub fn asks_anything_of(self, op: &Op) -> bool {
        match op {
            Op::Get { .. } => self.read != ReadLevel::Eventual,
            Op::Put { .. } => self.write != WriteLevel::Eventual,
            _ => false,
        }
    }

    /// Why a protocol must refuse `op` at these levels, if it must: levels
    /// are for GETs and PUTs only, and a protocol that neither takes
    /// per-operation levels (`Protocol::LEVELS`) nor gives every session
    /// guarantee (`Protocol::CAUSAL`) cannot honour one above eventual.
    pub fn refusal(self, op: &Op, takes_levels: bool, causal: bool) -> Option<OpError> {
        if !matches!(op, Op::Get { .. } | Op::Put { .. }) {
            return Some(OpError::BadRequest(format!(
                "session levels are for single-key reads and writes, not {:?} operations",
                op.kind()
            )));
        }
        if takes_levels || causal || !self.asks_anything_of(op) {
            return None;
        }
        let asked = match op {
            Op::Get { .. } => format!("read level {}", self.read),
            _ => format!("write level {}", self.write),
        };
        Some(OpError::BadRequest(format!(
            "this protocol promises no session guarantee, so it cannot serve {asked}; only eventual"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_by_long_and_short_name_and_print_back() {
        for l in ReadLevel::ALL {
            assert_eq!(l.name().parse::<ReadLevel>(), Ok(l));
        }
        for l in WriteLevel::ALL {
            assert_eq!(l.name().parse::<WriteLevel>(), Ok(l));
        }
        assert_eq!("M".parse::<ReadLevel>(), Ok(ReadLevel::MonotonicReadYourWrite));
        assert_eq!("e".parse::<WriteLevel>(), Ok(WriteLevel::Eventual));
        let err = "monotonic".parse::<ReadLevel>().unwrap_err();
        assert!(err.contains("\"monotonic\"") && err.contains("monotonic-read"), "{err}");
    }

    #[test]
    fn only_a_protocol_without_guarantees_refuses_a_level_above_eventual() {
        let get = Op::Get { key: crate::Key::from_static(b"k") };
        let mr = Levels { read: ReadLevel::MonotonicRead, write: WriteLevel::Eventual };
        assert!(mr.refusal(&get, false, false).is_some());
        assert!(mr.refusal(&get, true, false).is_none());
        assert!(mr.refusal(&get, false, true).is_none());
        assert!(Levels::EVENTUAL.refusal(&get, false, false).is_none());
        let put = Op::Put { key: crate::Key::from_static(b"k"), value: crate::Value::from_static(b"v") };
        assert!(mr.refusal(&put, false, false).is_none(), "a write at eventual asks nothing");
        let rot = Op::Rot { keys: vec![crate::Key::from_static(b"k")] };
        assert!(Levels::EVENTUAL.refusal(&rot, true, true).is_some());
    }
}
