//! Vectors of timestamps, indexed by DC (or replica, or partition), and the
//! sparse dependency sets of Roohitavaf (at most one entry per DC).

use crate::clock::{HLC_BYTES_MAX, Hlc, put_hlc, put_varint, take_hlc, take_varint, with_scratch};
use crate::ids::DcId;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use smallvec::{SmallVec, smallvec};
use std::fmt;

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
/// Its encoding: see the `Serialize` impl of `DepSet<Hlc>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
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

/// How a dependency set is written. In a human-readable format, a sequence
/// of `[dc, hlc]` pairs (as `#[derive]` wrote it). In a binary one (the wire,
/// the log, snapshots) one byte string: per entry, the DC as a LEB128
/// varint, then the HLC's binary form (8 bytes of `l`, `c` as a varint).
///
/// Why not the derived sequence: it sent each entry's DC and HLC through the
/// serializer on their own (the HLC as a byte string with its own length),
/// and a CausalSpartanX operation writes three or four of these sets (its
/// reply, the replica it sends, the version it logs); the per-element work
/// was among the largest costs it had over Eventual (callgrind on a node,
/// `scripts/ir-per-op.sh`: some 330 instructions per operation in the
/// sequence's serializer alone, of about 2 000 more than Eventual's). As
/// with the derived form, decoding does not check the order or uniqueness
/// of DCs: the protocol checks what it receives.
///
/// Changing this changes the data format ([`crate::DATA_FORMAT`]).
impl Serialize for DepSet<Hlc> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            return self.0.serialize(s);
        }
        // A DC id is a u16: at most 3 varint bytes.
        with_scratch(self.0.len() * (3 + HLC_BYTES_MAX), |b| {
            let mut n = 0;
            for &(dc, h) in &self.0 {
                n += put_varint(&mut b[n..], u64::from(dc.0));
                n += put_hlc(&mut b[n..], h);
            }
            s.serialize_bytes(&b[..n])
        })
    }
}

impl<'de> Deserialize<'de> for DepSet<Hlc> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            return Ok(DepSet(SmallVec::deserialize(d)?));
        }
        d.deserialize_bytes(DepSetBytes)
    }
}

struct DepSetBytes;

impl<'de> serde::de::Visitor<'de> for DepSetBytes {
    type Value = DepSet<Hlc>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("dependency entries back to back, each a DC as a varint then an HLC")
    }

    fn visit_bytes<E: serde::de::Error>(self, mut b: &[u8]) -> Result<DepSet<Hlc>, E> {
        let whole = b;
        let mut v = SmallVec::new();
        while !b.is_empty() {
            let entry = take_varint(b, u64::from(u16::MAX)).and_then(|(dc, rest)| Some((dc, take_hlc(rest)?)));
            let Some((dc, (h, rest))) = entry else {
                return Err(E::invalid_value(serde::de::Unexpected::Bytes(whole), &self));
            };
            v.push((DcId(dc as u16), h));
            b = rest;
        }
        Ok(DepSet(v))
    }

    fn visit_borrowed_bytes<E: serde::de::Error>(self, b: &'de [u8]) -> Result<DepSet<Hlc>, E> {
        self.visit_bytes(b)
    }

    fn visit_byte_buf<E: serde::de::Error>(self, b: Vec<u8>) -> Result<DepSet<Hlc>, E> {
        self.visit_bytes(&b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dependency_set_is_one_byte_string() {
        let mut d = DepSet::single(DcId(1), Hlc::new(0x0102_0304_0506_0708, 0));
        d.raise(DcId(200), Hlc::new(9, 300));
        let b = postcard::to_stdvec(&d).unwrap();
        assert_eq!(b, [22, 1, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0xc8, 0x01, 9, 0, 0, 0, 0, 0, 0, 0, 0xac, 0x02]);
        assert_eq!(postcard::from_bytes::<DepSet<Hlc>>(&b).unwrap(), d);
        assert_eq!(
            postcard::from_bytes::<DepSet<Hlc>>(&postcard::to_stdvec(&DepSet::<Hlc>::new()).unwrap()).unwrap(),
            DepSet::new()
        );
        let mut wide = DepSet::new();
        for dc in [0, 3, 127, 128, u16::MAX] {
            wide.raise(DcId(dc), Hlc::new(u64::from(dc), u32::from(dc)));
        }
        assert_eq!(postcard::from_bytes::<DepSet<Hlc>>(&postcard::to_stdvec(&wide).unwrap()).unwrap(), wide);
        // A DC past 16 bits, a DC without its HLC, a redundant zero in a DC.
        for bad in [&[4u8, 0x80, 0x80, 0x04, 0][..], &[1, 5], &[11, 0x81, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0]] {
            assert!(postcard::from_bytes::<DepSet<Hlc>>(bad).is_err(), "{bad:?}");
        }
        let j = serde_json::to_string(&d).unwrap();
        assert_eq!(j, r#"[[1,{"l":72623859790382856,"c":0}],[200,{"l":9,"c":300}]]"#);
        assert_eq!(serde_json::from_str::<DepSet<Hlc>>(&j).unwrap(), d);
    }

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
