//! Aggregation of per-partition vectors over a tree inside one DC, as
//! GentleRain computes its GST and CausalSpartanX its DSV (Roohitavaf §5.3:
//! "computed over a tree, not by broadcast").
//!
//! The partition servers of a DC form a k-ary tree in partition order: the
//! i-th server's parent is the ⌊(i−1)/k⌋-th. Every θ, each node sends up the
//! entry-wise min of its own vector and its children's latest reports; the
//! root's min is the DC-wide stable vector, which it pushes back down. This
//! module is only the bookkeeping: the protocol owns the messages and timers.

use causeway_core::{NodeId, Topology, vmin};

/// One node's place in its DC's aggregation tree.
#[derive(Debug, Clone)]
pub struct StableTree<T> {
    parent: Option<NodeId>,
    children: Vec<NodeId>,
    /// Latest report from each child, by position in `children`.
    reports: Vec<Option<Vec<T>>>,
}

/// What to do with an aggregate this tick.
#[derive(Debug, PartialEq)]
pub enum TreeStep<T> {
    /// Send the aggregate to the parent.
    Report { parent: NodeId, aggregate: Vec<T> },
    /// This is the root: the aggregate is the DC's new stable vector; push it
    /// down to [`StableTree::children`].
    Stable(Vec<T>),
    /// Some child has not reported yet.
    Waiting,
}

impl<T: Ord + Copy> StableTree<T> {
    /// The tree position of `me`, a partition server, with fan-out `fanout` (≥ 1).
    pub fn new(topology: &Topology, me: NodeId, fanout: usize) -> Self {
        let fanout = fanout.max(1);
        let dc = topology.dc_of(me);
        let servers: Vec<NodeId> = topology.dc_servers(dc).collect();
        let i = servers.iter().position(|&n| n == me).expect("tree member must be a partition primary of its DC");
        let parent = if i == 0 { None } else { Some(servers[(i - 1) / fanout]) };
        let children: Vec<NodeId> =
            (i * fanout + 1..=(i * fanout + fanout)).filter(|&c| c < servers.len()).map(|c| servers[c]).collect();
        let reports = vec![None; children.len()];
        StableTree { parent, children, reports }
    }

    pub fn is_root(&self) -> bool {
        self.parent.is_none()
    }
    pub fn children(&self) -> &[NodeId] {
        &self.children
    }
    /// The DC's only partition: its own vector is the DC-wide minimum, known
    /// at every change rather than at the next step.
    pub fn is_alone(&self) -> bool {
        self.parent.is_none() && self.children.is_empty()
    }

    /// Record a child's report. Reports from nodes that are not children are
    /// ignored (and returned as `false`) rather than trusted.
    pub fn on_report(&mut self, from: NodeId, v: Vec<T>) -> bool {
        match self.children.iter().position(|&c| c == from) {
            Some(i) => {
                self.reports[i] = Some(v);
                true
            }
            None => false,
        }
    }

    /// The periodic step: combine `own` with the children's reports.
    pub fn step(&self, own: &[T]) -> TreeStep<T> {
        let mut agg = own.to_vec();
        for r in &self.reports {
            match r {
                Some(v) => vmin(&mut agg, v),
                None => return TreeStep::Waiting,
            }
        }
        match self.parent {
            Some(parent) => TreeStep::Report { parent, aggregate: agg },
            None => TreeStep::Stable(agg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::{DcId, TopologySpec};

    #[test]
    fn tree_shape_and_aggregation() {
        let t = Topology::new(TopologySpec::full(2, 8)).unwrap();
        let s: Vec<NodeId> = t.dc_servers(DcId(1)).collect();
        let root = StableTree::<u64>::new(&t, s[0], 4);
        assert!(root.is_root());
        assert_eq!(root.children(), &s[1..5]);
        let mid = StableTree::<u64>::new(&t, s[1], 4);
        assert_eq!(mid.children(), &s[5..8]);
        let leaf = StableTree::<u64>::new(&t, s[7], 4);
        assert_eq!(leaf.step(&[3, 4]), TreeStep::Report { parent: s[1], aggregate: vec![3, 4] });

        let mut root = root;
        assert_eq!(root.step(&[9, 9]), TreeStep::Waiting);
        for (i, c) in s[1..5].iter().enumerate() {
            assert!(root.on_report(*c, vec![5 + i as u64, 2 + i as u64]));
        }
        assert!(!root.on_report(s[6], vec![0, 0]));
        assert_eq!(root.step(&[9, 9]), TreeStep::Stable(vec![5, 2]));
    }
}
