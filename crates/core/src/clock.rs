//! Time as protocols see it: a node's physical clock (which may be offset,
//! drift, and jump), and the hybrid logical clock of Roohitavaf §2.
//!
//! Protocols never read a clock themselves; the runtime hands them
//! `now_us` from a [`ClockModel`] (simulator) or the OS clock (network runtime).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A node's physical clock relative to true time: `local = true + offset +
/// drift·true + Σ jumps so far`. Jumps may be negative (an NTP step back,
/// Roohitavaf §5.6). Readings saturate at zero.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockModel {
    #[serde(default)]
    pub offset_us: i64,
    /// Parts per million: 100 means the clock gains 100 µs per true second.
    #[serde(default)]
    pub drift_ppm: f64,
    /// `(at true µs, step µs)`, applied once true time reaches `at`.
    #[serde(default)]
    pub jumps: Vec<ClockJump>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockJump {
    pub at_us: u64,
    pub step_us: i64,
}

impl ClockModel {
    pub fn with_offset(offset_us: i64) -> Self {
        ClockModel { offset_us, ..Default::default() }
    }

    /// The local reading at true time `true_us`, saturating at zero.
    pub fn read(&self, true_us: u64) -> u64 {
        self.read_signed(true_us).max(0) as u64
    }

    /// The local reading without saturation (it may be negative early on).
    pub fn read_signed(&self, true_us: u64) -> i64 {
        let mut t = true_us as i64 + self.offset_us;
        if self.drift_ppm != 0.0 {
            t += (true_us as f64 * self.drift_ppm / 1e6) as i64;
        }
        for j in &self.jumps {
            if true_us >= j.at_us {
                t += j.step_us;
            }
        }
        t
    }
}

/// A hybrid logical clock timestamp ⟨l, c⟩, ordered lexicographically.
/// `l` approximates physical time in µs; `c` orders events that share an `l`.
/// Its encoding is not `#[derive]`d: see the `Serialize` impl below.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Hlc {
    pub l: u64,
    pub c: u32,
}

impl Hlc {
    pub const ZERO: Hlc = Hlc { l: 0, c: 0 };
    pub const MAX: Hlc = Hlc { l: u64::MAX, c: u32::MAX };

    pub const fn new(l: u64, c: u32) -> Hlc {
        Hlc { l, c }
    }

    /// Send or local event (Roohitavaf Alg 2.1): move past physical time `pt`
    /// and past the previous value. Returns the new timestamp.
    pub fn tick(&mut self, pt: u64) -> Hlc {
        let l_old = self.l;
        self.l = l_old.max(pt);
        if self.l == l_old {
            self.bump(self.c);
        } else {
            self.c = 0;
        }
        *self
    }

    /// Set the counter to `c + 1`. The counter is bounded in Kulkarni et al.;
    /// if a peer ever hands us one at its limit, carry into `l` instead of
    /// overflowing: the timestamp still grows, it only runs 1 µs ahead.
    fn bump(&mut self, c: u32) {
        match c.checked_add(1) {
            Some(c) => self.c = c,
            None => {
                self.l += 1;
                self.c = 0;
            }
        }
    }

    /// Receive event, and the `updateHLC(dt)` of every protocol in Roohitavaf:
    /// move past `pt`, the previous value and the remote or dependency time `m`.
    /// (The source's `else if (HLC.l = l)` is a typo for `= m.l`.)
    pub fn update(&mut self, pt: u64, m: Hlc) -> Hlc {
        let l_old = self.l;
        self.l = l_old.max(m.l).max(pt);
        if self.l == l_old && self.l == m.l {
            self.bump(self.c.max(m.c));
        } else if self.l == l_old {
            self.bump(self.c);
        } else if self.l == m.l {
            self.bump(m.c);
        } else {
            self.c = 0;
        }
        *self
    }
}

/// How an [`Hlc`] is written. In a human-readable format (JSON, TOML) it is
/// the struct `{ l, c }`. In a binary one (the wire, the log, snapshots) it
/// is a byte string: `l` as 8 little-endian bytes, then `c` as a LEB128
/// varint (1 byte while the counter is below 128, as it nearly always is).
///
/// Why not postcard's default (`l` and `c` as two varints): `l` is physical
/// time in µs, a 51-bit number that takes 8 varint bytes, each produced by a
/// shift, a branch and a push of its own, and consumed the same way.
/// A CausalSpartanX server encodes about six HLCs per operation (its
/// dependency sets and vectors), and that codec work was most of what it
/// cost beyond Eventual (callgrind on a node, `scripts/ir-per-op.sh`).
/// Fixed-width `l` costs one byte more per HLC on the wire (the length) and
/// about half the instructions to encode and to decode one.
///
/// Changing this changes the data format ([`crate::DATA_FORMAT`]).
impl Serialize for Hlc {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            return HlcFields { l: self.l, c: self.c }.serialize(s);
        }
        let mut b = [0u8; HLC_BYTES_MAX];
        let n = put_hlc(&mut b, *self);
        s.serialize_bytes(&b[..n])
    }
}

impl<'de> Deserialize<'de> for Hlc {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let HlcFields { l, c } = HlcFields::deserialize(d)?;
            return Ok(Hlc { l, c });
        }
        d.deserialize_bytes(HlcBytes)
    }
}

/// The longest binary HLC: 8 bytes of `l` and a 5-byte varint `c`.
pub(crate) const HLC_BYTES_MAX: usize = 13;

/// Run `f` on a zeroed scratch buffer of `len` bytes: on the stack when
/// short, as every vector and dependency set of a few DCs is.
#[inline]
pub(crate) fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    let mut stack = [0u8; 64];
    match stack.get_mut(..len) {
        Some(b) => f(b),
        None => f(&mut vec![0; len]),
    }
}

/// Write `h`'s binary form (8 little-endian bytes of `l`, then `c` as a
/// LEB128 varint) at the start of `b`; returns its length.
#[inline]
pub(crate) fn put_hlc(b: &mut [u8], h: Hlc) -> usize {
    b[..8].copy_from_slice(&h.l.to_le_bytes());
    8 + put_varint(&mut b[8..], u64::from(h.c))
}

/// Write `v` as a LEB128 varint at the start of `b`; returns its length.
#[inline]
pub(crate) fn put_varint(b: &mut [u8], mut v: u64) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        b[n] = v as u8 | 0x80;
        v >>= 7;
        n += 1;
    }
    b[n] = v as u8;
    n + 1
}

/// A canonical LEB128 varint below `limit` at the start of `b`, and the
/// bytes after it: every byte but the last has the continuation bit, the
/// last is not a redundant zero, and the value fits.
pub(crate) fn take_varint(b: &[u8], limit: u64) -> Option<(u64, &[u8])> {
    // One byte, as a DC id or an HLC counter nearly always is.
    if let Some((&x, rest)) = b.split_first()
        && x < 0x80
    {
        return (u64::from(x) <= limit).then_some((u64::from(x), rest));
    }
    let end = b.iter().position(|&x| x & 0x80 == 0)?;
    // At most 5 bytes (35 bits of payload), enough for every field read so
    // (at most 32 bits); `limit` then bounds the value.
    if end >= 5 || (end > 0 && b[end] == 0) {
        return None;
    }
    let v = b[..=end].iter().rev().fold(0u64, |acc, &x| (acc << 7) | u64::from(x & 0x7f));
    (v <= limit).then_some((v, &b[end + 1..]))
}

/// An HLC's binary form at the start of `b`, and the bytes after it.
#[inline]
pub(crate) fn take_hlc(b: &[u8]) -> Option<(Hlc, &[u8])> {
    let (l, rest) = b.split_first_chunk::<8>()?;
    let (c, rest) = take_varint(rest, u64::from(u32::MAX))?;
    Some((Hlc { l: u64::from_le_bytes(*l), c: c as u32 }, rest))
}

/// Up to this many DCs, an [`HlcVec`] keeps its entries inline.
pub const HLC_VEC_INLINE: usize = 3;

/// A vector of HLCs, one per DC, that a message carries on every request or
/// reply (a CausalSpartanX session's DSV): inline up to
/// [`HLC_VEC_INLINE`] DCs, so copying it for a request and decoding it from
/// one allocate nothing (a `Vec` was an allocation and a free at each end of
/// every GET and PUT). More DCs spill to the heap and work the same.
pub type HlcVec = smallvec::SmallVec<[Hlc; HLC_VEC_INLINE]>;

/// A vector of physical times in µs, one per DC, that a message carries on
/// every request or reply and a version keeps (Cure's dependency and
/// snapshot vectors): inline up to [`HLC_VEC_INLINE`] DCs, as [`HlcVec`].
/// Inline in a stored version, reading it for a snapshot check is no second
/// cache miss after the version's own. Encode it with [`times`].
pub type TimeVec = smallvec::SmallVec<[u64; HLC_VEC_INLINE]>;

/// A [`TimeVec`] in a message, for `#[serde(with =
/// "causeway_core::clock::times")]`: the same encoding as a `Vec<u64>` (a
/// sequence), decoded entry by entry with nothing reserved for the length
/// the sender claims (`SmallVec`'s own `Deserialize` reserves it up front,
/// which a hostile length turns into a huge allocation).
pub mod times {
    use super::TimeVec;
    use serde::de::{SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};
    use std::fmt;

    pub fn serialize<S: Serializer>(v: &[u64], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<TimeVec, D::Error> {
        d.deserialize_seq(Times)
    }

    struct Times;

    impl<'de> Visitor<'de> for Times {
        type Value = TimeVec;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a sequence of times in µs")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TimeVec, A::Error> {
            let mut v = TimeVec::new();
            while let Some(t) = seq.next_element()? {
                v.push(t);
            }
            Ok(v)
        }
    }
}

/// A vector of HLCs (one per DC) in a message, a `Vec<Hlc>` or an
/// [`HlcVec`], for `#[serde(with = "causeway_core::clock::hlcs")]`: in a
/// binary format one byte string, the HLCs' binary forms back to back,
/// where a plain `Vec<Hlc>` is a sequence of byte strings, each with its
/// length, each its own trip through the serializer (the per-element work
/// was a large part of what a CausalSpartanX operation cost over
/// Eventual's: about 110 instructions to encode a vector and 190 to decode
/// one, by callgrind). In a human-readable format, a
/// sequence of `{ l, c }` as before.
pub mod hlcs {
    use super::{HLC_BYTES_MAX, Hlc, put_hlc, take_hlc, with_scratch};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::fmt;
    use std::marker::PhantomData;

    pub fn serialize<S: Serializer>(v: &[Hlc], s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            return v.serialize(s);
        }
        with_scratch(v.len() * HLC_BYTES_MAX, |b| {
            let mut n = 0;
            for &h in v {
                n += put_hlc(&mut b[n..], h);
            }
            s.serialize_bytes(&b[..n])
        })
    }

    /// What a vector of HLCs decodes into: a `Vec<Hlc>` or an [`HlcVec`].
    /// (`Extend` would do, but `SmallVec`'s costs tens of instructions per
    /// entry where a `push` costs a few.)
    pub trait Hlcs: Default {
        fn push(&mut self, h: Hlc);
    }

    impl Hlcs for Vec<Hlc> {
        fn push(&mut self, h: Hlc) {
            Vec::push(self, h)
        }
    }

    impl Hlcs for super::HlcVec {
        fn push(&mut self, h: Hlc) {
            smallvec::SmallVec::push(self, h)
        }
    }

    pub fn deserialize<'de, D, C>(d: D) -> Result<C, D::Error>
    where
        D: Deserializer<'de>,
        C: Hlcs + Deserialize<'de>,
    {
        if d.is_human_readable() {
            return C::deserialize(d);
        }
        d.deserialize_bytes(Visitor(PhantomData))
    }

    struct Visitor<C>(PhantomData<C>);

    impl<'de, C: Hlcs> serde::de::Visitor<'de> for Visitor<C> {
        type Value = C;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("HLCs back to back, each 8 bytes of l then c as a varint")
        }

        fn visit_bytes<E: serde::de::Error>(self, mut b: &[u8]) -> Result<C, E> {
            let whole = b;
            let mut v = C::default();
            while !b.is_empty() {
                let Some((h, rest)) = take_hlc(b) else {
                    return Err(E::invalid_value(serde::de::Unexpected::Bytes(whole), &self));
                };
                v.push(h);
                b = rest;
            }
            Ok(v)
        }

        fn visit_borrowed_bytes<E: serde::de::Error>(self, b: &'de [u8]) -> Result<C, E> {
            self.visit_bytes(b)
        }

        fn visit_byte_buf<E: serde::de::Error>(self, b: Vec<u8>) -> Result<C, E> {
            self.visit_bytes(&b)
        }
    }
}

/// The human-readable form, as `#[derive]` would write the struct.
#[derive(Serialize, Deserialize)]
#[serde(rename = "Hlc", deny_unknown_fields)]
struct HlcFields {
    l: u64,
    c: u32,
}

struct HlcBytes;

impl<'de> serde::de::Visitor<'de> for HlcBytes {
    type Value = Hlc;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an HLC: 8 bytes of l, then c as a varint")
    }

    fn visit_bytes<E: serde::de::Error>(self, b: &[u8]) -> Result<Hlc, E> {
        match take_hlc(b) {
            Some((h, [])) => Ok(h),
            _ => Err(E::invalid_value(serde::de::Unexpected::Bytes(b), &self)),
        }
    }

    fn visit_borrowed_bytes<E: serde::de::Error>(self, b: &'de [u8]) -> Result<Hlc, E> {
        self.visit_bytes(b)
    }

    fn visit_byte_buf<E: serde::de::Error>(self, b: Vec<u8>) -> Result<Hlc, E> {
        self.visit_bytes(&b)
    }
}

impl fmt::Debug for Hlc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "⟨{},{}⟩", self.l, self.c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_model_applies_offset_drift_and_jumps() {
        let c = ClockModel {
            offset_us: 500,
            drift_ppm: 100.0,
            jumps: vec![ClockJump { at_us: 2_000_000, step_us: -10_000 }],
        };
        assert_eq!(c.read(0), 500);
        assert_eq!(c.read(1_000_000), 1_000_000 + 500 + 100);
        assert_eq!(c.read(2_000_000), 2_000_000 + 500 + 200 - 10_000);
        assert_eq!(ClockModel::with_offset(-50).read(10), 0);
    }

    #[test]
    fn hlc_is_monotonic_and_tracks_physical_time() {
        let mut h = Hlc::ZERO;
        let a = h.tick(100);
        assert_eq!(a, Hlc::new(100, 0));
        // The physical clock went backwards: l stays, c counts.
        let b = h.tick(90);
        assert_eq!(b, Hlc::new(100, 1));
        assert!(b > a);
        // A message from the future pulls l forward.
        let c = h.update(95, Hlc::new(200, 7));
        assert_eq!(c, Hlc::new(200, 8));
        // Equal l on all three sides takes max c + 1.
        let mut h2 = Hlc::new(200, 3);
        assert_eq!(h2.update(150, Hlc::new(200, 5)), Hlc::new(200, 6));
        // Physical time ahead of everything resets c.
        assert_eq!(h2.update(300, Hlc::new(200, 9)), Hlc::new(300, 0));
        // A counter at its limit carries into l rather than overflowing.
        let mut h3 = Hlc::new(500, 0);
        let t = h3.update(100, Hlc::new(500, u32::MAX));
        assert_eq!(t, Hlc::new(501, 0));
        assert!(t > Hlc::new(500, u32::MAX));
    }

    #[test]
    fn hlc_binary_form_is_fixed_width_l_and_varint_c() {
        let t = Hlc::new(0x0102_0304_0506_0708, 0);
        assert_eq!(postcard::to_stdvec(&t).unwrap(), [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
        for t in [
            Hlc::ZERO,
            Hlc::MAX,
            Hlc::new(1_764_000_000_000_000, 1),
            Hlc::new(5, 127),
            Hlc::new(5, 128),
            Hlc::new(5, 1 << 21),
            Hlc::new(5, u32::MAX / 2),
        ] {
            let b = postcard::to_stdvec(&t).unwrap();
            assert_eq!(postcard::from_bytes::<Hlc>(&b).unwrap(), t, "{b:?}");
            // Inside a sequence too: the length prefix delimits each one.
            let v = vec![t, Hlc::new(7, 3), t];
            assert_eq!(postcard::from_bytes::<Vec<Hlc>>(&postcard::to_stdvec(&v).unwrap()).unwrap(), v);
        }
    }

    #[test]
    fn hlc_binary_form_refuses_what_it_never_writes() {
        let l = [1, 0, 0, 0, 0, 0, 0, 0];
        let with = |c: &[u8]| {
            let mut b = vec![(8 + c.len()) as u8];
            b.extend_from_slice(&l);
            b.extend_from_slice(c);
            postcard::from_bytes::<Hlc>(&b)
        };
        assert_eq!(with(&[0x81, 0x01]).unwrap(), Hlc::new(1, 129));
        assert!(with(&[]).is_err(), "no counter");
        assert!(with(&[0x80, 0x00]).is_err(), "a redundant zero byte");
        assert!(with(&[0x81]).is_err(), "a continuation bit on the last byte");
        assert!(with(&[0xff, 0xff, 0xff, 0xff, 0x10]).is_err(), "beyond 32 bits");
        assert_eq!(with(&[0xff, 0xff, 0xff, 0xff, 0x0f]).unwrap(), Hlc::new(1, u32::MAX));
        assert!(with(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]).is_err(), "too long");
        assert!(postcard::from_bytes::<Hlc>(&[3, 1, 2, 3]).is_err(), "too short");
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Vectors {
        #[serde(with = "hlcs")]
        v: Vec<Hlc>,
        after: u8,
    }

    #[test]
    fn a_vector_of_hlcs_is_one_byte_string() {
        let v = Vectors { v: vec![Hlc::new(0x0102_0304_0506_0708, 0), Hlc::new(9, 300)], after: 7 };
        let b = postcard::to_stdvec(&v).unwrap();
        assert_eq!(b, [19, 8, 7, 6, 5, 4, 3, 2, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0xac, 0x02, 7]);
        assert_eq!(postcard::from_bytes::<Vectors>(&b).unwrap(), v);
        for v in [vec![], vec![Hlc::MAX], vec![Hlc::ZERO; 5]] {
            let v = Vectors { v, after: 1 };
            assert_eq!(postcard::from_bytes::<Vectors>(&postcard::to_stdvec(&v).unwrap()).unwrap(), v);
        }
        // A truncated HLC, a redundant zero in a counter, a counter past 32 bits.
        for bad in [
            &[4u8, 1, 2, 3, 4, 0][..],
            &[10, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x00, 0],
            &[13, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x10, 0],
        ] {
            assert!(postcard::from_bytes::<Vectors>(bad).is_err(), "{bad:?}");
        }
        let j = serde_json::to_string(&v).unwrap();
        assert_eq!(j, r#"{"v":[{"l":72623859790382856,"c":0},{"l":9,"c":300}],"after":7}"#);
        assert_eq!(serde_json::from_str::<Vectors>(&j).unwrap(), v);
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Inline {
        #[serde(with = "hlcs")]
        v: HlcVec,
        after: u8,
    }

    /// `inline` (of a vector of `n` entries) encodes as `wide`, in binary
    /// and JSON, and decodes back from either.
    fn same_encoding<W, I>(wide: &W, inline: &I, n: usize)
    where
        W: Serialize,
        I: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let b = postcard::to_stdvec(wide).unwrap();
        assert_eq!(postcard::to_stdvec(inline).unwrap(), b, "{n} entries");
        assert_eq!(&postcard::from_bytes::<I>(&b).unwrap(), inline, "{n} entries");
        let j = serde_json::to_string(inline).unwrap();
        assert_eq!(j, serde_json::to_string(wide).unwrap());
        assert_eq!(&serde_json::from_str::<I>(&j).unwrap(), inline);
    }

    /// An [`HlcVec`] is written as a `Vec<Hlc>` is, so either side of a link
    /// may hold either, and one of more DCs than it keeps inline still
    /// decodes whole.
    #[test]
    fn an_inline_vector_of_hlcs_has_the_same_encoding() {
        for n in [0, 1, HLC_VEC_INLINE, HLC_VEC_INLINE + 2] {
            let v: Vec<Hlc> = (0..n as u64).map(|i| Hlc::new(i << 40 | 7, (i * 200) as u32)).collect();
            let inline = Inline { v: HlcVec::from_slice(&v), after: 3 };
            same_encoding(&Vectors { v: v.clone(), after: 3 }, &inline, n);
            assert_eq!(inline.v.spilled(), n > HLC_VEC_INLINE);
        }
        assert!(postcard::from_bytes::<Inline>(&[4u8, 1, 2, 3, 4, 0]).is_err(), "a truncated HLC");
    }

    /// A `TimeVec` encodes as the `Vec<u64>` it replaced, inline or
    /// spilled, in binary and JSON; a length the bytes do not hold is an
    /// error, not an allocation of that size.
    #[test]
    fn a_time_vector_has_the_encoding_of_a_vec() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Wide {
            v: Vec<u64>,
            after: u8,
        }
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Inline {
            #[serde(with = "times")]
            v: TimeVec,
            after: u8,
        }
        for n in [0, 1, HLC_VEC_INLINE, HLC_VEC_INLINE + 2] {
            let v: Vec<u64> = (0..n as u64).map(|i| i << 40 | 7).collect();
            let inline = Inline { v: TimeVec::from_slice(&v), after: 3 };
            same_encoding(&Wide { v: v.clone(), after: 3 }, &inline, n);
            assert_eq!(inline.v.spilled(), n > HLC_VEC_INLINE);
        }
        // A claimed length of 2^62 entries, then two.
        let hostile = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 1, 2];
        assert!(postcard::from_bytes::<Inline>(&hostile).is_err());
    }

    #[test]
    fn hlc_human_readable_form_is_the_struct() {
        let t = Hlc::new(12, 3);
        let j = serde_json::to_string(&t).unwrap();
        assert_eq!(j, r#"{"l":12,"c":3}"#);
        assert_eq!(serde_json::from_str::<Hlc>(&j).unwrap(), t);
        assert!(serde_json::from_str::<Hlc>(r#"{"l":12,"c":3,"x":1}"#).is_err());
    }
}
