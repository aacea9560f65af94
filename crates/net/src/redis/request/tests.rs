use super::*;
use redis_protocol::resp2::decode::decode_bytes_mut;
use redis_protocol::resp2::types::BytesFrame as Frame;

const OPEN: Caps = Caps::Open { max_request_bytes: 1 << 20 };

fn decode_all(wire: &[u8], caps: Caps) -> (Vec<Vec<Vec<u8>>>, Result<(), RequestError>, BytesMut) {
    let mut input = BytesMut::from(wire);
    let mut got = Vec::new();
    loop {
        match decode(&mut input, caps) {
            Ok(Some(args)) => got.push(args.iter().map(|a| a.to_vec()).collect()),
            Ok(None) => return (got, Ok(()), input),
            Err(e) => return (got, Err(e), input),
        }
    }
}

fn one(wire: &[u8], caps: Caps) -> Result<Option<Vec<Vec<u8>>>, RequestError> {
    let mut input = BytesMut::from(wire);
    decode(&mut input, caps).map(|r| r.map(|args| args.iter().map(|a| a.to_vec()).collect()))
}

fn words(ws: &[&str]) -> Vec<Vec<u8>> {
    ws.iter().map(|w| w.as_bytes().to_vec()).collect()
}

/// Whole requests are taken off one by one, every prefix of one is
/// incomplete and left in place, and each agrees with the general RESP
/// decoder of the `redis-protocol` crate.
#[test]
fn flat_requests_are_read_as_the_general_decoder_reads_them() {
    let wire = b"*3\r\n$3\r\nSET\r\n$4\r\nkey1\r\n$0\r\n\r\n*2\r\n$3\r\nGET\r\n$4\r\nkey1\r\n";
    let (got, end, rest) = decode_all(wire, OPEN);
    assert_eq!(got, vec![words(&["SET", "key1", ""]), words(&["GET", "key1"])]);
    assert_eq!(end, Ok(()));
    assert!(rest.is_empty());
    let mut general = BytesMut::from(&wire[..]);
    for request in &got {
        let (frame, _, _) = decode_bytes_mut(&mut general).expect("valid").expect("whole");
        let Frame::Array(items) = frame else { panic!("an array") };
        let items: Vec<Vec<u8>> =
            items.into_iter().map(|f| if let Frame::BulkString(b) = f { b.to_vec() } else { panic!() }).collect();
        assert_eq!(&items, request);
    }
    let first = b"*3\r\n$3\r\nSET\r\n$4\r\nkey1\r\n$0\r\n\r\n".len();
    for cut in 0..first {
        for caps in [OPEN, Caps::Unauthenticated] {
            let mut part = BytesMut::from(&wire[..cut]);
            assert_eq!(decode(&mut part, caps), Ok(None), "cut at {cut}");
            assert_eq!(&part[..], &wire[..cut], "an incomplete request is left in place");
        }
    }
}

/// What Redis's own protocol tests (tests/unit/protocol.tcl) expect.
#[test]
fn redis_protocol_cases() {
    // An empty query and a negative or zero multibulk length are no command.
    assert_eq!(decode_all(b"\r\n*-10\r\n*0\r\nPING\r\n", OPEN).0, vec![words(&["PING"])]);
    assert_eq!(one(b"*3000000000\r\n", OPEN), Err(RequestError::InvalidMultibulkLength));
    assert_eq!(one(b"*20000000\r\n", OPEN), Err(RequestError::TooLarge { max_request_bytes: 1 << 20 }));
    assert_eq!(one(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n", OPEN), Err(RequestError::NotBulk(b'f')));
    assert_eq!(one(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$-10\r\n", OPEN), Err(RequestError::InvalidBulkLength));
    assert_eq!(one(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$blabla\r\n", OPEN), Err(RequestError::InvalidBulkLength));
    assert_eq!(one(b"*blabla\r\n", OPEN), Err(RequestError::InvalidMultibulkLength));
    // Lengths as Redis's string2ll reads them: no sign on a bulk length,
    // no leading zero, no `-0`, no empty number.
    for bad in [&b"*01\r\n"[..], b"*-0\r\n", b"*\r\n", b"*+1\r\n", b"*1 \r\n", b"*1\rx"] {
        assert_eq!(one(bad, OPEN), Err(RequestError::InvalidMultibulkLength), "{}", String::from_utf8_lossy(bad));
    }
    for bad in [&b"*1\r\n$03\r\nGET\r\n"[..], b"*1\r\n$-0\r\n", b"*1\r\n$\r\n", b"*1\r\n$99999999999999999999\r\n"] {
        assert_eq!(one(bad, OPEN), Err(RequestError::InvalidBulkLength), "{}", String::from_utf8_lossy(bad));
    }
    assert_eq!(one(b"*1\r\n$0\r\n\r\n", OPEN), Ok(Some(words(&[""]))));
    // A miscounted bulk string is told, not read out of step.
    assert_eq!(one(b"*1\r\n$3\r\nPINGPONG\r\n", OPEN), Err(RequestError::MissingCrlf { len: 3 }));
    // A length line that can never end is refused without waiting for it.
    let endless = [&b"*"[..], &[b'9'; 40]].concat();
    assert_eq!(one(&endless, OPEN), Err(RequestError::InvalidMultibulkLength));
    let endless = [&b"*1\r\n$"[..], &[b'1'; 40]].concat();
    assert_eq!(one(&endless, OPEN), Err(RequestError::InvalidBulkLength));
}

/// Inline commands: words split on whitespace, `\n` or `\r\n` ending the
/// line, at most 64 KiB without a newline.
#[test]
fn inline_commands() {
    let (got, end, rest) = decode_all(b"PING\r\nECHO  hello \r\n\r\n   \nGET k7\nSET k", OPEN);
    assert_eq!(got, vec![words(&["PING"]), words(&["ECHO", "hello"]), words(&["GET", "k7"])]);
    assert_eq!((end, &rest[..]), (Ok(()), &b"SET k"[..]));
    // Not starting with `*`: an inline command, as Redis reads it.
    assert_eq!(one(b"$3\r\nGET\r\n", OPEN), Ok(Some(words(&["$3"]))));
    let mut long = vec![b'a'; MAX_INLINE_BYTES];
    assert_eq!(one(&long, Caps::Unauthenticated), Ok(None));
    long.extend_from_slice(b"\r\n");
    assert_eq!(one(&long, Caps::Unauthenticated).map(|r| r.map(|a| a[0].len())), Ok(Some(MAX_INLINE_BYTES)));
    long.truncate(MAX_INLINE_BYTES);
    long.extend_from_slice(b"aa");
    assert_eq!(one(&long, Caps::Unauthenticated), Err(RequestError::InlineTooBig));
    long.truncate(MAX_INLINE_BYTES + 1);
    long.push(b'\n');
    assert_eq!(one(&long, OPEN), Err(RequestError::InlineTooBig));
}

/// The request that overflowed the stack of a recursive decoder: 20 000
/// arrays each holding the next. Refused at the second `*`, whatever
/// follows, in constant stack.
#[test]
fn nested_arrays_are_refused_where_they_start() {
    let mut wire = b"*1\r\n".repeat(20_000);
    wire.extend_from_slice(b"$4\r\nPING\r\n");
    for caps in [OPEN, Caps::Unauthenticated] {
        assert_eq!(one(&wire, caps), Err(RequestError::Nested));
        assert_eq!(one(&wire[..8], caps), Err(RequestError::Nested));
        assert_eq!(one(b"*2\r\n$3\r\nGET\r\n*1\r\n$1\r\nk\r\n", caps), Err(RequestError::Nested));
    }
    for (wire, got) in [(&b"*1\r\n:5\r\n"[..], b':'), (b"*1\r\n+PING\r\n", b'+'), (b"*1\r\n\r\n", b'\r')] {
        let e = one(wire, OPEN).unwrap_err();
        assert_eq!(e, RequestError::NotBulk(got));
        assert!(!e.to_string().contains('\r'), "the refusal is one line: {e}");
    }
}

/// Before AUTH, a request holds at most 10 arguments of at most 16 KiB,
/// refused as soon as the length is read; after, the request size cap
/// holds, also checked on the announced lengths.
#[test]
fn lengths_are_capped_when_announced() {
    let u = Caps::Unauthenticated;
    assert_eq!(one(b"*11\r\n", u), Err(RequestError::UnauthenticatedMultibulkLength { got: 11 }));
    assert_eq!(one(b"*10\r\n", u), Ok(None));
    assert_eq!(one(b"*1\r\n$16385\r\n", u), Err(RequestError::UnauthenticatedBulkLength { got: 16_385 }));
    assert_eq!(one(b"*1\r\n$16384\r\n", u), Ok(None));
    // A 15 MB value announced before AUTH: refused on its length line.
    let e = one(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$15000000\r\n", u).unwrap_err();
    assert_eq!(e, RequestError::UnauthenticatedBulkLength { got: 15_000_000 });
    assert!(e.to_string().starts_with("Protocol error: unauthenticated bulk length"), "{e}");
    assert!(e.to_string().contains("16384"), "names the limit: {e}");
    assert_eq!(e.reason(), "redis_unauthenticated_limit");
    // `AUTH name secret` and its neighbours fit.
    let auth = b"*3\r\n$4\r\nAUTH\r\n$3\r\napp\r\n$44\r\ncwt_0123456789012345678901234567890123456789\r\n";
    assert_eq!(one(auth, u).unwrap().unwrap().len(), 3);
    // After AUTH: the whole request within max_request_bytes, refused on
    // the length that would exceed it.
    let open = Caps::Open { max_request_bytes: 1000 };
    assert_eq!(one(b"*2\r\n$3\r\nSET\r\n$979\r\n", open), Ok(None));
    assert_eq!(one(b"*2\r\n$3\r\nSET\r\n$980\r\n", open), Err(RequestError::TooLarge { max_request_bytes: 1000 }));
    assert_eq!(one(b"*200\r\n", open), Err(RequestError::TooLarge { max_request_bytes: 1000 }));
    let mut fits = b"*2\r\n$3\r\nSET\r\n$979\r\n".to_vec();
    fits.extend(std::iter::repeat_n(b'v', 979));
    fits.extend_from_slice(b"\r\n");
    assert_eq!(fits.len(), 1000);
    assert_eq!(one(&fits, open).unwrap().unwrap()[1].len(), 979);
}

/// Whatever an incomplete request holds stays within
/// `Caps::max_pending_bytes`: the read buffer's bound between requests.
#[test]
fn an_incomplete_request_stays_within_its_bound() {
    let u = Caps::Unauthenticated;
    let mut biggest = b"*10\r\n".to_vec();
    for _ in 0..9 {
        biggest.extend_from_slice(b"$16384\r\n");
        biggest.extend(std::iter::repeat_n(b'x', 16_384));
        biggest.extend_from_slice(b"\r\n");
    }
    biggest.extend_from_slice(b"$16384\r\n");
    biggest.extend(std::iter::repeat_n(b'x', 16_385));
    assert_eq!(one(&biggest, u), Ok(None));
    assert!(biggest.len() <= u.max_pending_bytes());
    assert!(MAX_INLINE_BYTES < u.max_pending_bytes());
    assert!(u.max_pending_bytes() < 256 * 1024, "a small bound: {}", u.max_pending_bytes());
}
