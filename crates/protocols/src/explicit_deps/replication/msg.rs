//! The replication path's wire types: stamps, dependencies, the versions it
//! needs, and the messages its servers exchange.

use causeway_core::{Key, NodeId, Topology, Versioned};
use serde::{Deserialize, Serialize};

/// A version's timestamp (§2.5): Lamport time in the high bits, the id of
/// the node that stamped it in the low [`Stamp::NODE_BITS`]. Unique, and
/// ordered like the Lamport times. `Stamp(0)` stands for "no version".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Stamp(pub u64);

impl Stamp {
    pub const NODE_BITS: u32 = 16;
    pub const NONE: Stamp = Stamp(0);

    pub fn new(lamport: u64, node: NodeId) -> Stamp {
        debug_assert!(node.0 < 1 << Self::NODE_BITS);
        Stamp((lamport << Self::NODE_BITS) | node.0 as u64)
    }
    pub fn lamport(self) -> u64 {
        self.0 >> Self::NODE_BITS
    }
    /// The node that stamped (accepted) the write.
    pub fn origin(self) -> NodeId {
        NodeId((self.0 & ((1 << Self::NODE_BITS) - 1)) as u32)
    }
}

/// ⟨key, stamp⟩: the write of `key` stamped `stamp`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Dep {
    pub key: Key,
    pub stamp: Stamp,
}

/// What the replication path needs from a variant's stored version.
pub trait DepVersion: Versioned<Order = Stamp> + Clone {
    /// The dependencies still to check while the version is a pending
    /// replicated write; `None` once committed.
    fn pending_checks(&self) -> Option<&[Dep]>;
    /// The same version, committed at `now_us` of this node's clock.
    fn commit(self, now_us: u64) -> Self;
    /// The same version, committed at `now_us` and at logical time
    /// `lamport`, a fresh tick of this node's Lamport clock (Eiger's EVT,
    /// Lloyd §5.3). Variants without per-version valid times ignore it.
    fn commit_at(self, now_us: u64, lamport: u64) -> Self {
        let _ = lamport;
        self.commit(now_us)
    }
    fn committed(&self) -> bool {
        self.pending_checks().is_none()
    }
    /// A pending version that also waits for the variant's release (an
    /// Eiger transaction's write, see [`DepNode::on_replicate_held`](super::DepNode::on_replicate_held));
    /// recovery queues it held again.
    fn held(&self) -> bool {
        false
    }
}

/// The messages of the shared replication path between servers: the
/// `dep_check` exchange, and settling ([`settle`](crate::explicit_deps::replication::settle)). Each variant's
/// message enum carries them in one variant (`Msg::Path`), so `M:
/// From<PathMsg>` is all this module needs of it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum PathMsg {
    /// `dep_check` of every dependency the receiver owns; answered by
    /// [`PathMsg::DepOk`] with the same `id` once all are committed there.
    DepCheck { id: u64, deps: Vec<Dep> },
    /// All of check `id`'s dependencies are committed at the sender, whose
    /// Lamport clock reads `lamport`: the asker witnesses it, so whatever
    /// it commits next is logically after them (Eiger's valid times need
    /// this, Lloyd §5.3; harmless for COPS).
    DepOk { id: u64, lamport: u64 },
    /// To an origin: its writes are committed here through `stamp`.
    Through { stamp: Stamp },
    /// From an origin: its writes through `through` are committed in every
    /// DC (and have been for the variant's hold time).
    Settled { through: Stamp },
}

crate::impl_kinds!(PathMsg: DepCheck, DepOk, Through, Settled);

/// `impl From<PathMsg> for $msg`: a protocol's message enum carries the
/// replication path's messages in its variant `Path`, so that [`DepNode`](super::DepNode)
/// can send them.
macro_rules! path_variant {
    ($msg:ident) => {
        impl From<$crate::explicit_deps::replication::PathMsg> for $msg {
            fn from(p: $crate::explicit_deps::replication::PathMsg) -> $msg {
                $msg::Path(p)
            }
        }
    };
}
pub(crate) use path_variant;

/// The topology both COPS variants need: the paper's equivalent nodes
/// replicate every key range to every DC, one logical server per range.
pub fn validate_topology(name: &str, topology: &Topology) -> Result<(), String> {
    crate::kit::node::require_full_replication(
        name,
        topology,
        "a remote write's dependencies are checked at their keys' servers in the receiving DC",
    )?;
    if topology.nodes() > 1 << Stamp::NODE_BITS {
        return Err(format!("{name} stamps carry a {}-bit node id: at most 65 536 nodes", Stamp::NODE_BITS));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_order_by_lamport_then_node_and_name_their_origin() {
        let a = Stamp::new(5, NodeId(3));
        let b = Stamp::new(5, NodeId(4));
        let c = Stamp::new(6, NodeId(0));
        assert!(a < b && b < c);
        assert_eq!((a.lamport(), a.origin()), (5, NodeId(3)));
    }
}
