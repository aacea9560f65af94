//! Remote versions stored but not yet visible, waiting for the stable time.
//!
//! A stabilization protocol stores a replicated version on arrival and makes
//! it visible once the DC's stable time covers its dependencies: every
//! entry of CausalSpartanX's DSV, Cure's GST or Contrarian's GSS at or above
//! the version's. To report the instant that happens
//! ([`causeway_core::Observation::Visible`]), each waiting version is parked
//! on the first entry that still holds it back, in a min-heap per entry, so
//! growing an entry pops only what it unblocks: O(log n) per version, not a
//! scan per stable-time change.
//!
//! A parked version is kept as its place in the store ([`KeyIndex`] and
//! order), not a copy: the protocol reads its dependencies back from the
//! store when it is unblocked. A version GC dropped meanwhile can never be
//! read, so it is never reported. That keeps a second hash lookup of the key
//! and a copy of its value off every replicated write.

use causeway_core::{DcId, KeyIndex, ServerEnv, Versioned};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The waiting versions of one partition server. `T` is a stable-time
/// entry (an HLC or µs), `O` the versions' order in the store.
pub struct PendingVisible<T, O> {
    /// `heaps[i]`: the versions held back by entry `i`, least threshold first.
    heaps: Vec<BinaryHeap<Reverse<(T, u64)>>>,
    /// By arrival number, which also orders the reports.
    parked: rustc_hash::FxHashMap<u64, (KeyIndex, O)>,
    next: u64,
}

impl<T: Ord + Copy, O: Copy> PendingVisible<T, O> {
    /// For a stable time of `entries` entries (one per DC).
    pub fn new(entries: usize) -> Self {
        PendingVisible { heaps: (0..entries).map(|_| BinaryHeap::new()).collect(), parked: Default::default(), next: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.parked.is_empty()
    }

    /// Park the version at (`index`, `order`) until stable-time entry
    /// `entry` reaches `threshold`.
    pub fn park(&mut self, entry: usize, threshold: T, index: KeyIndex, order: O) {
        let id = self.next;
        self.next += 1;
        self.heaps[entry].push(Reverse((threshold, id)));
        self.parked.insert(id, (index, order));
    }

    /// Park the version at (`index`, `order`) on `blocker`, the stable-time
    /// entry that still holds it back and the value that entry must reach,
    /// or hand it back to be reported now if nothing does.
    pub fn admit(&mut self, blocker: Option<(usize, T)>, index: KeyIndex, order: O) -> Option<(KeyIndex, O)> {
        match blocker {
            None => Some((index, order)),
            Some((entry, threshold)) => {
                self.park(entry, threshold, index, order);
                None
            }
        }
    }

    /// Take every version that `stable` no longer holds back on the entry
    /// it was parked on, in arrival order. Another entry may still hold it:
    /// the caller checks and parks it again.
    pub fn unblocked(&mut self, stable: &[T]) -> Vec<(KeyIndex, O)> {
        if self.parked.is_empty() {
            return Vec::new();
        }
        let mut ids = Vec::new();
        for (heap, &s) in self.heaps.iter_mut().zip(stable) {
            while let Some(&Reverse((threshold, id))) = heap.peek() {
                if threshold > s {
                    break;
                }
                heap.pop();
                ids.push(id);
            }
        }
        ids.sort_unstable();
        ids.into_iter().filter_map(|id| self.parked.remove(&id)).collect()
    }
}

/// For a protocol whose dependencies and stable time are dense vectors
/// (Cure's DV and GST, Contrarian's DV and GSS): the first entry where the
/// dependency is still above the stable time, and the dependency there.
pub fn first_above<T: Ord + Copy>(deps: &[T], stable: &[T]) -> Option<(usize, T)> {
    deps.iter().zip(stable).position(|(d, s)| d > s).map(|i| (i, deps[i]))
}

/// Report the version at (`index`, `order`), written in DC `origin` at
/// `written_us`, visible if it is what a local GET returns now, `visible`
/// being the GET's rule: a version that lost last-writer-wins to one
/// already visible is never read, so it is never reported (the meaning of
/// [`causeway_core::Observation::Visible`]).
pub fn report_if_read<M, V: Versioned + Clone>(
    env: &mut impl ServerEnv<M, V>,
    index: KeyIndex,
    order: V::Order,
    origin: DcId,
    written_us: u64,
    visible: impl FnMut(&V) -> bool,
) {
    env.observe_visible_in_store(origin, written_us, |store| {
        store.latest_where_at(index, visible).filter(|(_, v)| v.order() == order)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::MvStore;

    fn indexes(n: usize) -> Vec<KeyIndex> {
        // KeyIndex is only made by a store: insert n keys.
        #[derive(Clone, Debug)]
        struct V(u64, causeway_core::Value);
        impl causeway_core::Versioned for V {
            type Order = u64;
            fn order(&self) -> u64 {
                self.0
            }
            fn value(&self) -> &causeway_core::Value {
                &self.1
            }
        }
        let mut s = MvStore::new();
        (0..n)
            .map(|i| {
                s.insert_collecting(&bytes::Bytes::from(format!("k{i}")), V(1, bytes::Bytes::new()), |_| false).index
            })
            .collect()
    }

    #[test]
    fn first_above_names_the_first_entry_still_ahead() {
        assert_eq!(first_above(&[1, 5, 9], &[1, 4, 3]), Some((1, 5)));
        assert_eq!(first_above(&[1, 4, 3], &[1, 4, 3]), None, "equal is covered");
        assert_eq!(first_above::<u64>(&[], &[]), None);
    }

    #[test]
    fn an_entry_growing_releases_exactly_what_it_held_back_in_arrival_order() {
        let ix = indexes(4);
        let mut p: PendingVisible<u64, u64> = PendingVisible::new(2);
        assert!(p.is_empty());
        p.park(0, 10, ix[0], 100);
        p.park(1, 5, ix[1], 101);
        p.park(0, 7, ix[2], 102);
        p.park(0, 20, ix[3], 103);
        assert!(p.unblocked(&[6, 4]).is_empty(), "nothing reached yet");
        assert_eq!(p.unblocked(&[10, 4]), vec![(ix[0], 100), (ix[2], 102)], "arrival order, not threshold order");
        assert_eq!(p.unblocked(&[10, 5]), vec![(ix[1], 101)]);
        assert!(!p.is_empty());
        assert_eq!(p.unblocked(&[u64::MAX, u64::MAX]), vec![(ix[3], 103)]);
        assert!(p.is_empty());
        assert!(p.unblocked(&[u64::MAX, u64::MAX]).is_empty(), "each version is released once");
    }
}
