//! # causeway-protocols
//!
//! One module per consistency protocol, each a pure state machine over
//! `causeway-core`'s [`Server`](causeway_core::Server) and
//! [`Client`](causeway_core::Client) traits, reading top-down like its paper:
//! state, client side, server handlers, timers.
//!
//! This crate holds no runtime: the simulator and the network runtime drive
//! these modules unchanged. [`ProtocolName`] and [`with_protocol!`] let a
//! runtime pick a protocol by name and monomorphise over it.

pub mod causal_spartan_x;
pub mod common;
pub mod cops;
pub mod cops_gt;
pub mod dep_check;
pub mod eventual;
pub mod gentlerain;
pub mod settle;
pub mod stable_tree;
pub mod testkit;

use std::fmt;
use std::str::FromStr;

/// The implemented protocols, by command-line name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProtocolName {
    Eventual,
    GentleRain,
    CausalSpartanX,
    Cops,
    CopsGt,
}

impl ProtocolName {
    pub const ALL: &'static [ProtocolName] = &[
        ProtocolName::Eventual,
        ProtocolName::GentleRain,
        ProtocolName::CausalSpartanX,
        ProtocolName::Cops,
        ProtocolName::CopsGt,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolName::Eventual => "eventual",
            ProtocolName::GentleRain => "gentlerain",
            ProtocolName::CausalSpartanX => "causalspartanx",
            ProtocolName::Cops => "cops",
            ProtocolName::CopsGt => "copsgt",
        }
    }
}

impl serde::Serialize for ProtocolName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl fmt::Display for ProtocolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownProtocol(pub String);

impl fmt::Display for UnknownProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = ProtocolName::ALL.iter().map(|p| p.as_str()).collect();
        write!(f, "unknown protocol {:?}; known protocols: {}", self.0, names.join(", "))
    }
}
impl std::error::Error for UnknownProtocol {}

impl FromStr for ProtocolName {
    type Err = UnknownProtocol;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let norm = s.to_ascii_lowercase().replace(['-', '_'], "");
        ProtocolName::ALL
            .iter()
            .copied()
            .find(|p| p.as_str().replace(['-', '_'], "") == norm)
            .ok_or_else(|| UnknownProtocol(s.to_string()))
    }
}

/// Run `$body` with `$P` bound to the protocol type named by `$name`.
///
/// ```ignore
/// with_protocol!(name, P => run_scenario::<P>(&scenario))
/// ```
#[macro_export]
macro_rules! with_protocol {
    ($name:expr, $P:ident => $body:expr) => {
        match $name {
            $crate::ProtocolName::Eventual => {
                type $P = $crate::eventual::Eventual;
                $body
            }
            $crate::ProtocolName::GentleRain => {
                type $P = $crate::gentlerain::GentleRain;
                $body
            }
            $crate::ProtocolName::CausalSpartanX => {
                type $P = $crate::causal_spartan_x::CausalSpartanX;
                $body
            }
            $crate::ProtocolName::Cops => {
                type $P = $crate::cops::Cops;
                $body
            }
            $crate::ProtocolName::CopsGt => {
                type $P = $crate::cops_gt::CopsGt;
                $body
            }
        }
    };
}
