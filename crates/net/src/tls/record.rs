//! TLS 1.3 record protection (RFC 8446, section 5.2) under the traffic
//! secrets rustls negotiated: what kernel TLS does, done in user space.
//!
//! Why here and not in rustls: rustls 0.23's record layer, buffered or
//! "unbuffered", seals each record into a fresh heap buffer and copies it
//! out, and opens each record into a fresh heap buffer that the reader then
//! copies again. A request or a reply of `causeway bench` is one short
//! record, so that bookkeeping cost about as much as AES-GCM itself
//! (BENCHMARKS.md, thirty-sixth and thirty-seventh sessions). rustls's kernel
//! API (`rustls::kernel`) exists to hand the record layer to someone else
//! after the handshake: rustls still does the handshake, verifies the
//! certificates, derives every secret (the first ones and those after a key
//! update) and stores session tickets; this module only seals and opens
//! records with ring's AEAD, in the caller's buffers.
//!
//! A record here: header `23 03 03 len` (the additional data), then the
//! AEAD of `content ‖ content type`, nonce = IV ⊕ sequence number. No
//! padding is sent; padding received is stripped.

use rustls::ConnectionTrafficSecrets;
use std::io;

/// The record header: outer type, legacy version, length.
pub const HEADER_LEN: usize = 5;
/// Most content one record carries (RFC 8446, section 5.1).
pub const MAX_CONTENT: usize = 1 << 14;
/// Longest encrypted record body allowed (RFC 8446, section 5.2).
pub const MAX_BODY: usize = MAX_CONTENT + 256;
/// A whole record at its largest.
pub const MAX_RECORD: usize = HEADER_LEN + MAX_BODY;
const TAG_LEN: usize = 16;

/// Inner content types (RFC 8446, section 5.1).
pub const ALERT: u8 = 21;
pub const HANDSHAKE: u8 = 22;
pub const APPLICATION_DATA: u8 = 23;

pub fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// One direction's key: an AEAD key, its IV and the next sequence number.
pub struct Key {
    key: ring::aead::LessSafeKey,
    iv: [u8; 12],
    /// Sequence number of the next record (RFC 8446, section 5.3).
    pub seq: u64,
}

impl Key {
    pub fn new(seq: u64, secrets: ConnectionTrafficSecrets) -> io::Result<Key> {
        use ring::aead;
        let (alg, key, iv) = match &secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&aead::AES_128_GCM, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&aead::AES_256_GCM, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => (&aead::CHACHA20_POLY1305, key, iv),
            _ => return Err(invalid("TLS: the negotiated cipher suite has no record layer here".into())),
        };
        let key =
            aead::UnboundKey::new(alg, key.as_ref()).map_err(|_| invalid("TLS: bad traffic key length".into()))?;
        let iv = iv.as_ref().try_into().map_err(|_| invalid("TLS: bad traffic IV length".into()))?;
        Ok(Key { key: aead::LessSafeKey::new(key), iv, seq })
    }

    /// The per-record nonce: the sequence number, big-endian, padded to the
    /// IV's length and XORed with it (RFC 8446, section 5.3).
    fn nonce(&self) -> ring::aead::Nonce {
        let mut n = self.iv;
        for (b, s) in n[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *b ^= s;
        }
        ring::aead::Nonce::assume_unique_for_key(n)
    }

    /// Append one record carrying `content` of inner type `typ` to `out`.
    pub fn seal(&mut self, typ: u8, content: &[u8], out: &mut Vec<u8>) {
        assert!(content.len() <= MAX_CONTENT, "a record carries at most 2^14 bytes");
        let body_len = content.len() + 1 + TAG_LEN;
        let at = out.len();
        out.reserve(HEADER_LEN + body_len);
        out.extend_from_slice(&[APPLICATION_DATA, 3, 3, (body_len >> 8) as u8, body_len as u8]);
        out.extend_from_slice(content);
        out.push(typ);
        let (head, body) = out[at..].split_at_mut(HEADER_LEN);
        let aad = ring::aead::Aad::from(<[u8; HEADER_LEN]>::try_from(&*head).expect("five bytes"));
        let tag = self
            .key
            .seal_in_place_separate_tag(self.nonce(), aad, body)
            .expect("a record is far below the AEAD's length limit");
        out.extend_from_slice(tag.as_ref());
        self.seq += 1;
    }

    /// Open the whole record `record` in place; returns its inner content
    /// type and the length of its content, which now sits at
    /// `record[HEADER_LEN..HEADER_LEN + len]`.
    pub fn open(&mut self, record: &mut [u8]) -> io::Result<(u8, usize)> {
        let (head, body) = record.split_at_mut(HEADER_LEN);
        let aad = ring::aead::Aad::from(<[u8; HEADER_LEN]>::try_from(&*head).expect("five bytes"));
        let plain = self
            .key
            .open_in_place(self.nonce(), aad, body)
            .map_err(|_| invalid(format!("TLS: record {} failed authentication (bad_record_mac)", self.seq)))?;
        self.seq += 1;
        // The content type is the last non-zero byte; zeros after it are padding.
        let end = plain
            .iter()
            .rposition(|&b| b != 0)
            .ok_or_else(|| invalid("TLS: a record with no content type (unexpected_message)".into()))?;
        Ok((plain[end], end))
    }
}

/// The length of the whole record at the front of `buf`, or `None` if its
/// header has not all arrived. After the handshake every record is an
/// encrypted one (outer type application_data).
pub fn record_len(buf: &[u8]) -> io::Result<Option<usize>> {
    let Some(head) = buf.get(..HEADER_LEN) else { return Ok(None) };
    if head[0] != APPLICATION_DATA {
        return Err(invalid(format!("TLS: record of outer type {} after the handshake (unexpected_message)", head[0])));
    }
    let body = u16::from_be_bytes([head[3], head[4]]) as usize;
    if body > MAX_BODY {
        return Err(invalid(format!("TLS: record of {body} bytes (record_overflow)")));
    }
    Ok(Some(HEADER_LEN + body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::crypto::cipher::{AeadKey, Iv};

    fn key(seq: u64) -> Key {
        let secrets = ConnectionTrafficSecrets::Aes256Gcm { key: AeadKey::from([7u8; 32]), iv: Iv::from([9u8; 12]) };
        Key::new(seq, secrets).unwrap()
    }

    #[test]
    fn a_sealed_record_opens_to_its_content_and_type() {
        let (mut tx, mut rx) = (key(3), key(3));
        let mut out = Vec::new();
        tx.seal(APPLICATION_DATA, b"hello", &mut out);
        tx.seal(HANDSHAKE, b"", &mut out);
        let first = record_len(&out).unwrap().unwrap();
        assert_eq!(first, HEADER_LEN + 5 + 1 + TAG_LEN);
        let (typ, len) = rx.open(&mut out[..first]).unwrap();
        assert_eq!((typ, &out[HEADER_LEN..HEADER_LEN + len]), (APPLICATION_DATA, &b"hello"[..]));
        assert_eq!(rx.open(&mut out[first..]).unwrap(), (HANDSHAKE, 0));
        assert_eq!((tx.seq, rx.seq), (5, 5));
    }

    #[test]
    fn a_record_out_of_sequence_or_altered_is_refused() {
        let mut out = Vec::new();
        key(0).seal(APPLICATION_DATA, b"x", &mut out);
        assert!(key(1).open(&mut out.clone()).is_err(), "replayed at another sequence number");
        let mut bent = out.clone();
        bent[HEADER_LEN] ^= 1;
        assert!(key(0).open(&mut bent).is_err(), "a flipped bit");
        assert!(key(0).open(&mut out).is_ok());
    }

    #[test]
    fn headers_are_checked_before_anything_is_opened() {
        assert!(record_len(&[23, 3, 3]).unwrap().is_none());
        assert!(record_len(&[22, 3, 3, 0, 1]).is_err(), "a plaintext handshake record");
        assert!(record_len(&[23, 3, 3, 0x41, 0x01]).is_err(), "longer than 2^14 + 256");
        assert_eq!(record_len(&[23, 3, 3, 0x41, 0x00]).unwrap(), Some(MAX_RECORD));
    }
}
