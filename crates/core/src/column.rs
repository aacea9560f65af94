//! Column-family locations (Eiger's data model, Lloyd et al., "Stronger
//! Semantics for Low-Latency Geo-Replicated Storage", NSDI 2013, §3 /
//! Lloyd's dissertation §5.2): a row holds column families, a family holds
//! columns, and a *location* `row:family:column` holds one value.
//!
//! A location travels as an ordinary [`Key`], so every runtime, the
//! history, the checker and the journal carry it unchanged:
//!
//! - the **default location** of a row, `row:default:value`, *is* the plain
//!   key `row`: `get k` / `put k v` are single-column operations on it, so
//!   every key-value workload runs on a column store unchanged;
//! - any other location is [`LOCATION_TAG`], the row's length (u16, big
//!   endian), the row, the family's length (u8), the family, the column.
//!   Keys of one (row, family) share a prefix and sort by column name, and
//!   the tag's first byte (0xff) never occurs in UTF-8, so no textual key
//!   is mistaken for one.
//!
//! **Partition by row** (§3: "all data for a row resides on one server"):
//! [`row_of`] is what [`crate::Topology::partition_of`] hashes, so every
//! location of a row lives where its plain key does.

use crate::data::Key;
use bytes::{BufMut, Bytes, BytesMut};

/// The first bytes of an encoded location key.
pub const LOCATION_TAG: [u8; 2] = [0xff, b'L'];
/// The family plain keys live in.
pub const DEFAULT_FAMILY: &str = "default";
/// The column plain keys are, in [`DEFAULT_FAMILY`].
pub const DEFAULT_COLUMN: &str = "value";
/// The longest row of a location (its length is a u16).
pub const MAX_ROW_BYTES: usize = u16::MAX as usize;
/// The longest family name (its length is a u8).
pub const MAX_FAMILY_BYTES: usize = u8::MAX as usize;

/// One location, borrowed from its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location<'a> {
    pub row: &'a [u8],
    pub family: &'a [u8],
    pub column: &'a [u8],
}

/// Why bytes are not a location.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LocationError {
    #[error("a row must be 1 to {MAX_ROW_BYTES} bytes, got {0}")]
    Row(usize),
    #[error("a family name must be 1 to {MAX_FAMILY_BYTES} bytes and contain no ':' or '=', got {0:?}")]
    Family(String),
    #[error("a column name must be non-empty, got an empty one in family {0:?}")]
    Column(String),
    #[error("a key starting with the location tag 0xff 'L' is not a well-formed location")]
    Malformed,
}

/// Whether `key` is an encoded (non-default) location.
pub fn is_location_key(key: &[u8]) -> bool {
    key.starts_with(&LOCATION_TAG)
}

fn check_parts(row: &[u8], family: &[u8], column: &[u8]) -> Result<(), LocationError> {
    if row.is_empty() || row.len() > MAX_ROW_BYTES {
        return Err(LocationError::Row(row.len()));
    }
    if family.is_empty() || family.len() > MAX_FAMILY_BYTES || family.iter().any(|b| matches!(b, b':' | b'=')) {
        return Err(LocationError::Family(String::from_utf8_lossy(family).into_owned()));
    }
    if column.is_empty() {
        return Err(LocationError::Column(String::from_utf8_lossy(family).into_owned()));
    }
    Ok(())
}

/// The key of location `row:family:column` (the plain key `row` for the
/// default location).
pub fn location_key(row: &[u8], family: &[u8], column: &[u8]) -> Result<Key, LocationError> {
    check_parts(row, family, column)?;
    if family == DEFAULT_FAMILY.as_bytes() && column == DEFAULT_COLUMN.as_bytes() && !is_location_key(row) {
        return Ok(Bytes::copy_from_slice(row));
    }
    let mut b = BytesMut::with_capacity(LOCATION_TAG.len() + 3 + row.len() + family.len() + column.len());
    b.put_slice(&LOCATION_TAG);
    b.put_u16(row.len() as u16);
    b.put_slice(row);
    b.put_u8(family.len() as u8);
    b.put_slice(family);
    b.put_slice(column);
    Ok(b.freeze())
}

/// The prefix shared by every location key of `row:family` (for a slice
/// over the family's columns, which sort by name after it).
pub fn family_prefix(row: &[u8], family: &[u8]) -> Result<Key, LocationError> {
    let k = location_key(row, family, b"\0")?;
    Ok(if is_location_key(&k) { k.slice(..k.len() - 1) } else { unreachable!("column \\0 is never the default") })
}

/// The location a key names: an encoded location, or else the default
/// location of the row the plain key is.
pub fn parse_location(key: &[u8]) -> Result<Location<'_>, LocationError> {
    if !is_location_key(key) {
        if key.is_empty() {
            return Err(LocationError::Row(0));
        }
        return Ok(Location { row: key, family: DEFAULT_FAMILY.as_bytes(), column: DEFAULT_COLUMN.as_bytes() });
    }
    let rest = &key[LOCATION_TAG.len()..];
    let (len, rest) = rest.split_first_chunk::<2>().ok_or(LocationError::Malformed)?;
    let row_len = u16::from_be_bytes(*len) as usize;
    if rest.len() < row_len + 1 {
        return Err(LocationError::Malformed);
    }
    let (row, rest) = rest.split_at(row_len);
    let fam_len = rest[0] as usize;
    let rest = &rest[1..];
    if rest.len() < fam_len {
        return Err(LocationError::Malformed);
    }
    let (family, column) = rest.split_at(fam_len);
    check_parts(row, family, column)?;
    if family == DEFAULT_FAMILY.as_bytes() && column == DEFAULT_COLUMN.as_bytes() && !is_location_key(row) {
        // The default location has one spelling only: the plain key.
        return Err(LocationError::Malformed);
    }
    Ok(Location { row, family, column })
}

/// The row a key belongs to (what placement hashes): the row of an encoded
/// location, the key itself otherwise (also for malformed encodings, which
/// every reader refuses).
pub fn row_of(key: &[u8]) -> &[u8] {
    match parse_location(key) {
        Ok(l) if is_location_key(key) => l.row,
        _ => key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_round_trip_and_the_default_one_is_the_plain_key() {
        let k = location_key(b"alice", b"assocs", b"bob").unwrap();
        assert!(is_location_key(&k));
        assert_eq!(parse_location(&k).unwrap(), Location { row: b"alice", family: b"assocs", column: b"bob" });
        assert_eq!(row_of(&k), b"alice");
        let d = location_key(b"alice", b"default", b"value").unwrap();
        assert_eq!(&d[..], b"alice");
        assert_eq!(parse_location(b"alice").unwrap().family, b"default");
        assert_eq!(row_of(b"alice"), b"alice");
        let p = family_prefix(b"alice", b"assocs").unwrap();
        assert!(k.starts_with(&p));
        assert!(!location_key(b"alice", b"assocsx", b"b").unwrap().starts_with(&p));
    }

    #[test]
    fn malformed_locations_are_named() {
        assert_eq!(location_key(b"", b"f", b"c"), Err(LocationError::Row(0)));
        assert!(matches!(location_key(b"r", b"", b"c"), Err(LocationError::Family(_))));
        assert!(matches!(location_key(b"r", b"a:b", b"c"), Err(LocationError::Family(_))));
        assert!(matches!(location_key(b"r", b"f", b""), Err(LocationError::Column(_))));
        assert_eq!(parse_location(&[0xff, b'L', 0, 9, b'x']), Err(LocationError::Malformed));
        let mut k = location_key(b"r", b"f", b"c").unwrap().to_vec();
        k.truncate(k.len() - 1);
        assert!(parse_location(&k).is_err(), "no column");
        // The default location spelled as an encoding is refused.
        let mut enc = vec![0xff, b'L', 0, 1, b'r', 7];
        enc.extend_from_slice(b"defaultvalue");
        assert_eq!(parse_location(&enc), Err(LocationError::Malformed));
    }
}
