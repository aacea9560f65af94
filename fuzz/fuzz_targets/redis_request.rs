//! Fuzz the Redis front door's request decoder: whatever bytes arrive,
//! under either set of caps, decoding returns requests, "incomplete" or a
//! typed refusal and never panics; every request it takes is a flat array
//! of bulk strings that the general RESP decoder of the `redis-protocol`
//! crate reads the same way (or an inline line of words), within the caps;
//! and what is left incomplete stays within the bound the read buffer
//! relies on.
//!
//! Run: `cargo +nightly fuzz run redis_request` (from the repository root).

#![no_main]

use bytes::BytesMut;
use causeway_net::redis::request::{
    Caps, MAX_INLINE_BYTES, UNAUTHENTICATED_MAX_ARG_BYTES, UNAUTHENTICATED_MAX_ARGS, decode,
};
use libfuzzer_sys::fuzz_target;
use redis_protocol::resp2::decode::decode_bytes_mut;
use redis_protocol::resp2::types::BytesFrame as Frame;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the caps; a small request cap reaches its
    // refusals with short inputs.
    let Some((&pick, data)) = data.split_first() else { return };
    let caps = match pick % 3 {
        0 => Caps::Unauthenticated,
        1 => Caps::Open { max_request_bytes: 64 + usize::from(pick) },
        _ => Caps::Open { max_request_bytes: 16 << 20 },
    };
    let mut input = BytesMut::from(data);
    // Where `input` starts in `data`: requests are taken off its front.
    let mut at = 0;
    loop {
        match decode(&mut input, caps) {
            Ok(Some(args)) => {
                assert!(!args.is_empty(), "a request has a command name");
                let taken = &data[at..data.len() - input.len()];
                at += taken.len();
                let multibulk = canonical(&args);
                if taken.ends_with(&multibulk) {
                    // The request's bytes are exactly these arguments as a
                    // flat array of bulk strings, which the crate reads
                    // alike.
                    let mut general = BytesMut::from(&taken[taken.len() - multibulk.len()..]);
                    let (frame, _, _) = decode_bytes_mut(&mut general).expect("valid RESP").expect("whole");
                    assert!(general.is_empty());
                    let Frame::Array(items) = frame else { panic!("an array: {frame:?}") };
                    assert_eq!(items.len(), args.len());
                    for (item, arg) in items.iter().zip(&args) {
                        assert!(matches!(item, Frame::BulkString(b) if b == arg), "{item:?} vs {arg:?}");
                    }
                    match caps {
                        Caps::Unauthenticated => {
                            assert!(args.len() <= UNAUTHENTICATED_MAX_ARGS);
                            assert!(args.iter().all(|a| a.len() <= UNAUTHENTICATED_MAX_ARG_BYTES));
                        }
                        Caps::Open { max_request_bytes } => assert!(multibulk.len() <= max_request_bytes),
                    }
                } else {
                    // An inline command: the last line taken, its words.
                    assert_eq!(taken.last(), Some(&b'\n'));
                    let start = taken[..taken.len() - 1].iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
                    let line = &taken[start..];
                    assert_ne!(line[0], b'*');
                    assert!(line.len() <= MAX_INLINE_BYTES + 2);
                    let words: Vec<&[u8]> = line.split(u8::is_ascii_whitespace).filter(|w| !w.is_empty()).collect();
                    assert_eq!(words, args.iter().map(|a| &a[..]).collect::<Vec<_>>());
                }
            }
            Ok(None) => {
                assert!(input.len() <= caps.max_pending_bytes());
                assert!(data.ends_with(&input), "taken off the front only");
                // Incomplete: whatever is left is a prefix the decoder
                // keeps, so decoding it again changes nothing.
                let mut again = input.clone();
                assert_eq!(decode(&mut again, caps), Ok(None));
                assert_eq!(again, input);
                return;
            }
            Err(e) => {
                assert!(!e.to_string().contains(['\r', '\n']), "a refusal is one line: {e}");
                return;
            }
        }
    }
});

/// `args` as a multibulk request in canonical form, the only form the
/// decoder accepts (lengths without sign or leading zeros).
fn canonical(args: &[bytes::Bytes]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}
