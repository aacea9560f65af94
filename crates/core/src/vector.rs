//! Vectors of timestamps, indexed by DC (or replica, or partition), and the
//! sparse dependency sets of Roohitavaf (at most one entry per DC).

use crate::ids::DcId;
use serde::{Deserialize, Serialize};
use smallvec::{SmallVec, smallvec};

/// Entry-wise max of `b` into `a`. Vectors of different lengths are a bug.
pub fn vmax<T: Ord + Copy>(a: &mut [T], b: &[T]) {
    assert_eq!(a.len(), b.len(), "vector length mismatch");
    for (x, y) in a.iter_mut().zip(b) {
        if *y > *x {
            *x = *y;
        }
    }
}

/// Entry-wise min of `b` into `a`.
pub fn vmin<T: Ord + Copy>(a: &mut [T], b: &[T]) {
    assert_eq!(a.len(), b.len(), "vector length mismatch");
    for (x, y) in a.iter_mut().zip(b) {
        if *y < *x {
            *x = *y;
        }
    }
}

/// `a ≤ b` entry-wise.
pub fn vleq<T: Ord + Copy>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x <= y)
}

/// The smallest entry.
pub fn vmin_entry<T: Ord + Copy>(a: &[T]) -> Option<T> {
    a.iter().copied().min()
}

/// Entries a [`DepSet`] holds without allocating.
const DEP_SET_INLINE: usize = 2;

/// A dependency set: at most one ⟨dc, timestamp⟩ entry per DC, sorted by DC.
/// Sparse because most clients depend on only a few DCs, and the seeds measure
/// metadata size. Up to [`DEP_SET_INLINE`] entries live inline: every stored
/// CausalSpartanX version carries one, and a copy of it (a snapshot copies
/// every version) then allocates nothing and reads no second cache line.
/// Encoded as a sequence, as a `Vec` is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DepSet<T>(SmallVec<[(DcId, T); DEP_SET_INLINE]>);

impl<T: Ord + Copy> DepSet<T> {
    pub fn new() -> Self {
        DepSet(SmallVec::new())
    }
    pub fn single(dc: DcId, t: T) -> Self {
        DepSet(smallvec![(dc, t)])
    }
    pub fn entries(&self) -> &[(DcId, T)] {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn get(&self, dc: DcId) -> Option<T> {
        self.0.binary_search_by_key(&dc, |e| e.0).ok().map(|i| self.0[i].1)
    }
    /// `maxDS(self, {⟨dc, t⟩})`.
    pub fn raise(&mut self, dc: DcId, t: T) {
        match self.0.binary_search_by_key(&dc, |e| e.0) {
            Ok(i) => {
                if t > self.0[i].1 {
                    self.0[i].1 = t
                }
            }
            Err(i) => self.0.insert(i, (dc, t)),
        }
    }
    /// `maxDS(self, {⟨dc, t⟩})` as a new set, in at most one allocation (a
    /// clone then [`DepSet::raise`] of a new DC could allocate twice).
    pub fn raised(&self, dc: DcId, t: T) -> Self {
        let mut v = SmallVec::with_capacity(self.0.len() + 1);
        v.extend_from_slice(&self.0);
        let mut set = DepSet(v);
        set.raise(dc, t);
        set
    }
    /// `maxDS(self, other)` (Roohitavaf Alg 5.1).
    pub fn merge(&mut self, other: &DepSet<T>) {
        for &(dc, t) in &other.0 {
            self.raise(dc, t);
        }
    }
    /// The largest timestamp in the set.
    pub fn max_value(&self) -> Option<T> {
        self.0.iter().map(|e| e.1).max()
    }
    /// Every entry ≤ the vector's entry for its DC.
    pub fn covered_by(&self, v: &[T]) -> bool {
        self.0.iter().all(|&(dc, t)| t <= v[dc.idx()])
    }
    /// Drop entries already ≤ `v` (they no longer constrain anything).
    pub fn prune_covered(&mut self, v: &[T]) {
        self.0.retain(|e| e.1 > v[e.0.idx()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_ops() {
        let mut a = vec![1, 5, 3];
        vmax(&mut a, &[2, 4, 3]);
        assert_eq!(a, vec![2, 5, 3]);
        vmin(&mut a, &[0, 9, 1]);
        assert_eq!(a, vec![0, 5, 1]);
        assert!(vleq(&a, &[0, 5, 1]));
        assert!(!vleq(&a, &[0, 4, 1]));
    }

    #[test]
    fn depset_merges_per_dc() {
        let mut d = DepSet::single(DcId(2), 10u64);
        d.raise(DcId(0), 4);
        d.raise(DcId(2), 7);
        assert_eq!(d.entries(), &[(DcId(0), 4), (DcId(2), 10)]);
        let mut e = DepSet::single(DcId(1), 3u64);
        e.merge(&d);
        assert_eq!(e.len(), 3);
        assert_eq!(e.max_value(), Some(10));
        assert!(e.covered_by(&[4, 3, 10]));
        assert!(!e.covered_by(&[4, 2, 10]));
        e.prune_covered(&[4, 2, 10]);
        assert_eq!(e.entries(), &[(DcId(1), 3)]);
    }

    #[test]
    fn raised_is_a_raised_copy() {
        let d = DepSet::single(DcId(2), 10u64);
        for (dc, t) in [(DcId(0), 4), (DcId(2), 7), (DcId(2), 12), (DcId(3), 1)] {
            let mut want = d.clone();
            want.raise(dc, t);
            assert_eq!(d.raised(dc, t), want);
        }
        assert_eq!(d.entries(), &[(DcId(2), 10)], "the original is unchanged");
    }
}
