//! Read-only transactions by slices, as the stabilization protocols run
//! them: the coordinator (the server the client asked) fixes a snapshot,
//! reads the keys of its own partition itself, and asks every other
//! partition of its DC for a *slice* — the keys that partition stores, read
//! at the snapshot — then answers the client once every slice is in
//! (Roohitavaf §5.3, Alg 5.4 lines 12–18 for CausalSpartanX; Du et al. §4
//! for GentleRain). What a slice carries and what a snapshot is differ per
//! protocol; splitting the keys, matching replies to the keys they answer
//! and keeping the transactions in flight do not, and live here.

use causeway_core::{DcId, Key, NodeId, Topology};
use std::collections::BTreeMap;

/// A transaction's keys split by the server of this DC that stores them.
#[derive(Debug, Default)]
pub struct Split {
    /// Positions (in request order) of the keys the coordinator stores.
    pub local: Vec<usize>,
    /// The other servers and the positions each reads, ascending by node.
    pub remote: Vec<(NodeId, Vec<usize>)>,
}

/// Split `keys` among the servers of `dc`; `me` is the coordinator. `None`
/// when a key's partition is not stored in `dc`.
pub fn split(topology: &Topology, dc: DcId, me: NodeId, keys: &[Key]) -> Option<Split> {
    let mut by_node: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
    for (i, k) in keys.iter().enumerate() {
        by_node.entry(topology.server_for_key(dc, k)?).or_default().push(i);
    }
    let local = by_node.remove(&me).unwrap_or_default();
    Some(Split { local, remote: by_node.into_iter().collect() })
}

/// The keys at `positions`.
pub fn keys_at(keys: &[Key], positions: &[usize]) -> Vec<Key> {
    positions.iter().map(|&i| keys[i].clone()).collect()
}

/// A coordinator's transactions waiting for slices, by id. `T` is the
/// protocol's per-transaction state.
#[derive(Debug)]
pub struct Gathering<T> {
    next_id: u64,
    open: BTreeMap<u64, Gather<T>>,
}

/// One transaction: its state and the slices still outstanding.
#[derive(Debug)]
pub struct Gather<T> {
    pub state: T,
    awaiting: Vec<(NodeId, Vec<usize>)>,
}

impl<T> Default for Gathering<T> {
    fn default() -> Self {
        Gathering { next_id: 0, open: BTreeMap::new() }
    }
}

impl<T> Gathering<T> {
    /// The id the next transaction will get (a slice request carries it).
    pub fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Wait for `awaiting`'s slices under `id`; returns `state` back when
    /// there is nothing to wait for (every key was local).
    pub fn open(&mut self, id: u64, state: T, awaiting: Vec<(NodeId, Vec<usize>)>) -> Option<T> {
        if awaiting.is_empty() {
            return Some(state);
        }
        self.open.insert(id, Gather { state, awaiting });
        None
    }

    /// A slice of transaction `id` arrived from `from`: its state and the
    /// positions the slice answers, and whether it was the last one. `None`
    /// for an unknown transaction or a server not asked (a duplicate or a
    /// stray reply). Call [`Gathering::close`] when done, or on a failure.
    pub fn answer(&mut self, id: u64, from: NodeId) -> Option<(&mut T, Vec<usize>, bool)> {
        let g = self.open.get_mut(&id)?;
        let at = g.awaiting.iter().position(|(n, _)| *n == from)?;
        let (_, positions) = g.awaiting.swap_remove(at);
        let last = g.awaiting.is_empty();
        Some((&mut g.state, positions, last))
    }

    /// Stop waiting for transaction `id`.
    pub fn close(&mut self, id: u64) -> Option<T> {
        self.open.remove(&id).map(|g| g.state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::TopologySpec;

    #[test]
    fn keys_split_by_server_and_replies_match_their_positions() {
        let t = Topology::new(TopologySpec::full(2, 3)).unwrap();
        let keys: Vec<Key> = (0..12).map(|i| Key::from(format!("k{i}"))).collect();
        let me = t.server_for_key(DcId(0), &keys[0]).unwrap();
        let s = split(&t, DcId(0), me, &keys).unwrap();
        assert!(s.local.contains(&0));
        let mut all: Vec<usize> = s.local.clone();
        for (n, pos) in &s.remote {
            assert_ne!(*n, me);
            for &i in pos {
                assert_eq!(t.server_for_key(DcId(0), &keys[i]), Some(*n));
            }
            all.extend(pos);
        }
        all.sort();
        assert_eq!(all, (0..12).collect::<Vec<_>>());

        let mut g = Gathering::default();
        let id = g.next_id();
        assert!(g.open(id, "rot", s.remote.clone()).is_none());
        let (first, pos) = s.remote[0].clone();
        let (_, got, last) = g.answer(id, first).unwrap();
        assert_eq!(got, pos);
        assert_eq!(last, s.remote.len() == 1);
        assert!(g.answer(id, first).is_none(), "a duplicate reply is ignored");
        assert_eq!(g.close(id), Some("rot"));
        assert_eq!(Gathering::<()>::default().open(0, (), Vec::new()), Some(()));
    }
}
