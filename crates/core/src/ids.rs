//! Identifiers. Small integers, so they index vectors directly and hash cheaply.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A data center (a replica, in the seeds' vocabulary). Dense: `0..topology.dcs()`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct DcId(pub u16);

/// A partition of the key space. Dense: `0..topology.partitions()`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct PartitionId(pub u32);

/// A server process: a partition replica or a per-DC service. Dense over the topology.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct NodeId(pub u32);

/// A client session. Each session is sequential: one operation outstanding at a time.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct ClientId(pub u32);

impl ClientId {
    /// The name server `node` knows session `self` by in the simulators,
    /// and back again (the map is its own inverse). Each server gets
    /// different names for the same session, as the network runtime's
    /// per-server connection numbers are, so a protocol that passes a
    /// `ClientId` from one server to another fails in simulation first.
    pub fn as_seen_by(self, node: NodeId) -> ClientId {
        ClientId(self.0 ^ ((node.0 + 1) << 20))
    }
}

impl DcId {
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}
impl PartitionId {
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}
impl NodeId {
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}
impl ClientId {
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Debug for DcId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dc{}", self.0)
    }
}
impl fmt::Display for DcId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dc{}", self.0)
    }
}
impl fmt::Debug for PartitionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{}", self.0)
    }
}
impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}
impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}
impl fmt::Debug for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}", self.0)
    }
}
impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}", self.0)
    }
}
