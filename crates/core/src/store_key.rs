//! A key as the store's map holds it: its bytes inside the map's own entry
//! when they fit, so that finding a key compares bytes already fetched with
//! the entry's hash rather than following a pointer to a separate
//! allocation.
//!
//! Why: with 100 000 keys written at random, a store lookup is a chain of
//! dependent cache misses (control bytes, index slot, entry, key bytes,
//! versions). A [`crate::Key`] is a `Bytes`, whose bytes and reference count
//! live elsewhere, so it added a miss to every lookup and a shared atomic to
//! every clone. Keys up to [`INLINE_BYTES`] cost neither (most keys: the
//! benchmarks' `user12345` and redis-benchmark's `key:000000012345` are
//! 9–16 bytes); a longer key is one owned allocation, as before.
//!
//! It is not a general-purpose key type: protocols and messages keep
//! [`crate::Key`], and the store copies into this at a key's first insert.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// The longest key kept inline: the type stays 32 bytes, the size of the
/// `Bytes` it replaces, so the map's entries do not grow.
pub const INLINE_BYTES: usize = 30;

#[derive(Clone)]
pub enum StoreKey {
    Inline { len: u8, bytes: [u8; INLINE_BYTES] },
    Heap(Box<[u8]>),
}

const _: () = assert!(std::mem::size_of::<StoreKey>() == 32, "a store key is as large as the Bytes it replaces");

impl StoreKey {
    pub fn new(key: &[u8]) -> Self {
        if key.len() <= INLINE_BYTES {
            let mut bytes = [0; INLINE_BYTES];
            bytes[..key.len()].copy_from_slice(key);
            StoreKey::Inline { len: key.len() as u8, bytes }
        } else {
            StoreKey::Heap(key.into())
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            StoreKey::Inline { len, bytes } => &bytes[..*len as usize],
            StoreKey::Heap(b) => b,
        }
    }
}

impl Deref for StoreKey {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

/// Lets the map be searched by `&[u8]` ([`indexmap::Equivalent`] follows from it).
impl Borrow<[u8]> for StoreKey {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

/// Hashes exactly as `[u8]` does, which `Borrow<[u8]>` requires.
impl Hash for StoreKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl PartialEq for StoreKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for StoreKey {}

impl fmt::Debug for StoreKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&bytes::Bytes::copy_from_slice(self.as_slice()), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxBuildHasher;
    use std::hash::BuildHasher;

    #[test]
    fn keys_read_back_and_hash_as_their_bytes_inline_or_not() {
        let hasher = FxBuildHasher;
        for len in [0, 1, 16, INLINE_BYTES, INLINE_BYTES + 1, 200] {
            let raw: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
            let k = StoreKey::new(&raw);
            assert_eq!(k.as_slice(), &raw[..], "len {len}");
            assert_eq!(matches!(k, StoreKey::Inline { .. }), len <= INLINE_BYTES, "len {len}");
            assert_eq!(hasher.hash_one(&k), hasher.hash_one(&raw[..]), "len {len}");
            assert_eq!(k, StoreKey::new(&raw));
        }
        // A shorter key whose bytes prefix a longer one's is another key.
        assert_ne!(StoreKey::new(b"ab"), StoreKey::new(b"abc"));
        assert_ne!(StoreKey::new(b""), StoreKey::new(b"\0"));
    }
}
