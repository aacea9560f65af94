//! Keys, values, and the write tags that let a runtime recognise a version
//! without the protocol's help.

use bytes::Bytes;

/// Keys are opaque bytes. `Bytes` makes the many clones a replicating store
/// needs (store, replication message, reply) reference-count bumps.
pub type Key = Bytes;
/// Values are opaque bytes.
pub type Value = Bytes;

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

    #[test]
    fn tag_round_trips_and_rejects_untagged() {
        let v = tagged_value(0xdead_beef_0102, 64);
        assert_eq!(v.len(), 64);
        assert_eq!(write_id_of(&v), Some(0xdead_beef_0102));
        assert_eq!(write_id_of(b"hello world!"), None);
        assert_eq!(write_id_of(b"CW"), None);
    }

    #[test]
    fn stable_hash_is_fnv1a() {
        // Reference vectors of 64-bit FNV-1a.
        assert_eq!(stable_hash(b""), 0xcbf29ce484222325);
        assert_eq!(stable_hash(b"a"), 0xaf63dc4c8601ec8c);
    }
}
