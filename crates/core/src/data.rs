//! Keys, values, and the write tags that let a runtime recognise a version
//! without the protocol's help.

use bytes::Bytes;

/// Keys are opaque bytes. `Bytes` makes the many clones a replicating store
/// needs (store, replication message, reply) reference-count bumps.
pub type Key = Bytes;
/// Values are opaque bytes.
pub type Value = Bytes;

/// Values up to this many bytes are copied by [`copy_if_short`] rather
/// than shared.
pub const COPY_SHORT_MAX_BYTES: usize = 512;

/// A second handle to `value` that shares no reference count with it when
/// it is short (a copy of its bytes), another reference otherwise. For a
/// stored value handed to a read's reply, and for a written value both
/// stored and sent to the peers.
///
/// Why: a shared value's reference count lies in an allocation of its own.
/// By the time a key is read or overwritten again that count has long left
/// the cache, or was last written by another core (the one that dropped a
/// replication message's reference), and sharing it for a reply, or
/// dropping a superseded version, waits for it: on DKVF's configuration
/// (64-byte values, 100 000 keys) about 200 ns of a server's thread per
/// GET. A short copy reads only the bytes, which encoding the message reads
/// anyway, and leaves each handle the sole owner of its allocation, freed
/// with no atomic operation.
pub fn copy_if_short(value: &Value) -> Value {
    if value.len() <= COPY_SHORT_MAX_BYTES { Bytes::copy_from_slice(value) } else { value.clone() }
}

/// Runtime-generated values start with this tag and a unique 64-bit write id,
/// so that visibility events and histories can name the write a version came
/// from. Protocols never look inside values; user values without the tag are
/// simply not tracked.
pub const WRITE_TAG: [u8; 2] = *b"CW";
/// Bytes taken by the tag and the write id.
pub const WRITE_TAG_LEN: usize = 10;

/// A value of `len` bytes (at least [`WRITE_TAG_LEN`]) carrying `write_id`.
pub fn tagged_value(write_id: u64, len: usize) -> Value {
    let mut v = Vec::with_capacity(len.max(WRITE_TAG_LEN));
    v.extend_from_slice(&WRITE_TAG);
    v.extend_from_slice(&write_id.to_le_bytes());
    v.resize(len.max(WRITE_TAG_LEN), b'.');
    Bytes::from(v)
}

/// The write id of a tagged value, if it is one.
pub fn write_id_of(value: &[u8]) -> Option<u64> {
    if value.len() >= WRITE_TAG_LEN && value[..2] == WRITE_TAG {
        Some(u64::from_le_bytes(value[2..10].try_into().ok()?))
    } else {
        None
    }
}

/// What follows the write tag and id in a tombstone: the marker that makes
/// the value a delete.
pub const TOMBSTONE_MARK: [u8; 6] = *b"\0DEL\0\xff";
/// Bytes of a tombstone: tag, write id, marker.
pub const TOMBSTONE_LEN: usize = WRITE_TAG_LEN + TOMBSTONE_MARK.len();

/// A delete, written as an ordinary version whose value is this tombstone.
///
/// Why in-band: every protocol already replicates, orders, journals and
/// collects versions; a delete that is "a write of nothing" gets all of that
/// unchanged, takes its place in the causal order (a write that follows a
/// delete is never seen without it, Lloyd et al., "Stronger Semantics for
/// Low-Latency Geo-Replicated Storage", §3 keeps deletes as tombstones for
/// the same reason) and is checked by the checker as the unique write it is.
/// User-facing reads ([`visible`]) turn it into "no value", and
/// clients refuse to store a user value that would read as one
/// ([`is_tombstone`]), so nothing a user writes is ever mistaken for a
/// delete. The tombstone stays as the key's newest version: deleting a key
/// does not reclaim its 16 bytes.
pub fn tombstone(write_id: u64) -> Value {
    let mut v = Vec::with_capacity(TOMBSTONE_LEN);
    v.extend_from_slice(&WRITE_TAG);
    v.extend_from_slice(&write_id.to_le_bytes());
    v.extend_from_slice(&TOMBSTONE_MARK);
    Bytes::from(v)
}

/// Whether `value` is a delete's tombstone.
pub fn is_tombstone(value: &[u8]) -> bool {
    value.len() == TOMBSTONE_LEN && value[..2] == WRITE_TAG && value[WRITE_TAG_LEN..] == TOMBSTONE_MARK
}

/// A read's value as a user sees it: a tombstone reads as no value.
pub fn visible(value: Option<Value>) -> Option<Value> {
    value.filter(|v| !is_tombstone(v))
}

/// Stable 64-bit FNV-1a. Placement must agree across processes, platforms and
/// releases, so it cannot use a std hasher (randomly seeded) or any hash whose
/// output may change between crate versions.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short value is copied (its own allocation, so no shared reference
    /// count); a long one is shared. Either way the bytes are the same.
    #[test]
    fn a_short_value_is_copied_and_a_long_one_shared() {
        for (len, shared) in [(0, false), (64, false), (COPY_SHORT_MAX_BYTES, false), (COPY_SHORT_MAX_BYTES + 1, true)]
        {
            let v = tagged_value(7, len.max(WRITE_TAG_LEN));
            let v = if len == 0 { Value::new() } else { v };
            let c = copy_if_short(&v);
            assert_eq!(c, v, "{len} bytes");
            if len > 0 {
                assert_eq!(c.as_ptr() == v.as_ptr(), shared, "{len} bytes: shared {shared}");
            }
        }
    }

    #[test]
    fn tag_round_trips_and_rejects_untagged() {
        let v = tagged_value(0xdead_beef_0102, 64);
        assert_eq!(v.len(), 64);
        assert_eq!(write_id_of(&v), Some(0xdead_beef_0102));
        assert_eq!(write_id_of(b"hello world!"), None);
        assert_eq!(write_id_of(b"CW"), None);
    }

    #[test]
    fn a_tombstone_is_a_tagged_write_that_reads_as_nothing() {
        let t = tombstone(42);
        assert!(is_tombstone(&t));
        assert_eq!(write_id_of(&t), Some(42), "a delete is tracked as the write it is");
        assert_eq!(visible(Some(t)), None);
        assert_eq!(visible(Some(tagged_value(42, TOMBSTONE_LEN))), Some(tagged_value(42, TOMBSTONE_LEN)));
        assert!(!is_tombstone(b"hello"));
        let mut longer = tombstone(1).to_vec();
        longer.push(b'x');
        assert!(!is_tombstone(&longer), "only the exact encoding is a tombstone");
    }

    #[test]
    fn stable_hash_is_fnv1a() {
        // Reference vectors of 64-bit FNV-1a.
        assert_eq!(stable_hash(b""), 0xcbf29ce484222325);
        assert_eq!(stable_hash(b"a"), 0xaf63dc4c8601ec8c);
    }
}
