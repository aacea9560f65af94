//! Reading requests off a Redis connection, as Redis itself reads them.
//!
//! A request is either a multibulk command (`*<n>` then `n` bulk strings,
//! what every client library sends) or an inline command (one line of
//! words separated by whitespace, what a person types into `telnet`).
//! Nothing else: an array inside an array, a simple string or an integer
//! where a bulk string belongs is a protocol error, refused where it
//! starts and never decoded further. Lengths are checked as soon as they
//! are read, before the bytes they announce arrive, so a refused request
//! never costs the buffer it announced.
//!
//! The rules and the wording of the refusals follow Redis 7's
//! `processMultibulkBuffer` and `processInlineBuffer` (src/networking.c):
//! a count of zero or less is skipped, a length must be a plain decimal
//! (no sign on a bulk length, no leading zero), an inline line is at most
//! 64 KiB, and before `AUTH` a request holds at most 10 arguments of at
//! most 16 KiB each. Redis checks the two bytes after a bulk string no
//! further than skipping them; here they must be CRLF, so that a client
//! that miscounted is told rather than read out of step.

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;
use thiserror::Error;

/// A request's arguments, the command's name first, each a slice of the
/// connection's read buffer: inline for up to three (`GET k`, `SET k v`),
/// so the usual request allocates no vector.
pub type Args = SmallVec<[Bytes; 3]>;

/// Arguments one request may hold before `AUTH` succeeds (Redis's limit
/// for unauthenticated clients): room for `AUTH name secret` and a few
/// harmless commands, nothing that could carry data.
pub const UNAUTHENTICATED_MAX_ARGS: usize = 10;

/// Bytes one argument may hold before `AUTH` succeeds (Redis's limit).
pub const UNAUTHENTICATED_MAX_ARG_BYTES: usize = 16 * 1024;

/// Bytes an inline command may hold, its newline excluded (Redis's
/// `PROTO_INLINE_MAX_SIZE`): more without a newline is not a command.
pub const MAX_INLINE_BYTES: usize = 64 * 1024;

/// The longest length line, `*` or `$` excluded: 19 digits hold every
/// length a 64-bit count can, a sign one more.
const MAX_LENGTH_DIGITS: usize = 20;

/// How much one request may hold, which depends on whether the connection
/// has authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caps {
    /// Tokens are required and `AUTH` has not succeeded yet: at most
    /// [`UNAUTHENTICATED_MAX_ARGS`] arguments of at most
    /// [`UNAUTHENTICATED_MAX_ARG_BYTES`] each.
    Unauthenticated,
    /// At most this many bytes per request, framing included
    /// (`[limits] max_frame_bytes`).
    Open { max_request_bytes: usize },
}

impl Caps {
    /// The most bytes a request still incomplete under these caps can
    /// hold: what the read buffer holds at most between two requests.
    pub fn max_pending_bytes(self) -> usize {
        match self {
            // `*10\r\n`, then ten `$16384\r\n`, arguments and CRLFs; or an
            // inline line.
            Caps::Unauthenticated => MAX_INLINE_BYTES
                .max(5 + UNAUTHENTICATED_MAX_ARGS * (MAX_LENGTH_DIGITS + 3 + UNAUTHENTICATED_MAX_ARG_BYTES + 2)),
            // A request within the cap, or one refused; at most a length
            // line more (`$`, digits, CR) waits for its end.
            Caps::Open { max_request_bytes } => max_request_bytes + MAX_LENGTH_DIGITS + 2,
        }
    }
}

/// Why a request was refused. The connection is closed after the reply,
/// as Redis does: what follows a malformed request cannot be trusted to
/// start where a request starts.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum RequestError {
    /// An array, or anything else that is not a bulk string, where a
    /// command's argument belongs. Redis's wording; nesting is named
    /// because it is what a request must never do.
    #[error("Protocol error: expected '$', got '*' (a command is one flat array of bulk strings, never nested)")]
    Nested,
    #[error("Protocol error: expected '$', got '{}'", char::from(*.0).escape_default())]
    NotBulk(u8),
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    #[error("Protocol error: a bulk string of {len} bytes is not followed by CRLF")]
    MissingCrlf { len: usize },
    #[error(
        "Protocol error: unauthenticated multibulk length ({got} arguments; at most {UNAUTHENTICATED_MAX_ARGS} before AUTH)"
    )]
    UnauthenticatedMultibulkLength { got: u64 },
    #[error(
        "Protocol error: unauthenticated bulk length ({got} bytes; at most {UNAUTHENTICATED_MAX_ARG_BYTES} per argument before AUTH)"
    )]
    UnauthenticatedBulkLength { got: u64 },
    #[error("Protocol error: too big inline request (no newline within {MAX_INLINE_BYTES} bytes)")]
    InlineTooBig,
    #[error("request larger than max_frame_bytes ({max_request_bytes})")]
    TooLarge { max_request_bytes: usize },
}

impl RequestError {
    /// The reason it is counted under in `causeway_refused_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            RequestError::Nested => "redis_nested",
            RequestError::UnauthenticatedMultibulkLength { .. } | RequestError::UnauthenticatedBulkLength { .. } => {
                "redis_unauthenticated_limit"
            }
            RequestError::TooLarge { .. } | RequestError::InlineTooBig => "redis_request_too_large",
            RequestError::NotBulk(_)
            | RequestError::InvalidMultibulkLength
            | RequestError::InvalidBulkLength
            | RequestError::MissingCrlf { .. } => "redis_protocol",
        }
    }
}

/// Take the next request off the front of `input`.
///
/// `Ok(Some(args))`: a whole request, removed from `input`; its arguments
/// share `input`'s buffer. `Ok(None)`: the request at the front is not
/// whole yet; it is left in place (empty lines and empty multibulks
/// before it, which Redis skips, are removed) and cannot outgrow
/// [`Caps::max_pending_bytes`] without being refused. `Err`: the request
/// is refused as soon as the bytes that make it wrong are in, whatever
/// follows; `input` is then left in no particular state.
///
/// Never recurses and never allocates for what a length announces: the
/// work is linear in the bytes present and the memory in the arguments
/// present.
pub fn decode(input: &mut BytesMut, caps: Caps) -> Result<Option<Args>, RequestError> {
    loop {
        let Some(&first) = input.first() else { return Ok(None) };
        let parsed = if first == b'*' { multibulk(input, caps)? } else { inline(input, caps)? };
        match parsed {
            Parsed::Request(args) => return Ok(Some(args)),
            Parsed::Incomplete => return Ok(None),
            Parsed::Skipped => continue,
        }
    }
}

enum Parsed {
    Request(Args),
    Incomplete,
    /// Something Redis reads as no command (an empty line, `*0`), taken off.
    Skipped,
}

/// A length line's number, read as Redis's `string2ll` reads one: an
/// optional `-`, then `0` alone or digits not starting with `0`, ending in
/// CRLF. `None` if the line is not whole yet; `Some(Err)` if it cannot
/// become a number whatever follows.
fn length(b: &[u8], at: usize) -> Option<Result<(i64, usize), ()>> {
    let mut i = at;
    let negative = b.get(i) == Some(&b'-');
    if negative {
        i += 1;
    }
    let digits_at = i;
    let mut n: i64 = 0;
    loop {
        match b.get(i) {
            None => return if i - at > MAX_LENGTH_DIGITS { Some(Err(())) } else { None },
            Some(c @ b'0'..=b'9') => {
                // `0` stands alone: no leading zero, no `-0`.
                if i > digits_at && b[digits_at] == b'0' || negative && *c == b'0' && i == digits_at {
                    return Some(Err(()));
                }
                n = match n.checked_mul(10).and_then(|n| n.checked_add(i64::from(c - b'0'))) {
                    Some(n) => n,
                    None => return Some(Err(())),
                };
            }
            Some(b'\r') if i > digits_at => {
                return match b.get(i + 1) {
                    None => None,
                    Some(b'\n') => Some(Ok((if negative { -n } else { n }, i + 2))),
                    Some(_) => Some(Err(())),
                };
            }
            Some(_) => return Some(Err(())),
        }
        i += 1;
    }
}

/// `*<n>\r\n` then `n` bulk strings.
fn multibulk(input: &mut BytesMut, caps: Caps) -> Result<Parsed, RequestError> {
    let b = &input[..];
    debug_assert_eq!(b[0], b'*');
    let (count, mut at) = match length(b, 1) {
        None => return Ok(Parsed::Incomplete),
        Some(Err(())) => return Err(RequestError::InvalidMultibulkLength),
        Some(Ok(x)) => x,
    };
    if count <= 0 {
        let _ = input.split_to(at);
        return Ok(Parsed::Skipped);
    }
    let count = count as u64;
    if count > i32::MAX as u64 {
        return Err(RequestError::InvalidMultibulkLength);
    }
    match caps {
        Caps::Unauthenticated if count > UNAUTHENTICATED_MAX_ARGS as u64 => {
            return Err(RequestError::UnauthenticatedMultibulkLength { got: count });
        }
        // Each argument takes at least `$0\r\n\r\n`.
        Caps::Open { max_request_bytes }
            if (at as u64).saturating_add(count.saturating_mul(6)) > max_request_bytes as u64 =>
        {
            return Err(RequestError::TooLarge { max_request_bytes });
        }
        _ => {}
    }
    // Where each argument lies; the buffer is split once all are there.
    let mut spans: SmallVec<[(usize, usize); 4]> = SmallVec::new();
    for _ in 0..count {
        match b.get(at) {
            None => return Ok(Parsed::Incomplete),
            Some(b'$') => {}
            Some(b'*') => return Err(RequestError::Nested),
            Some(&c) => return Err(RequestError::NotBulk(c)),
        }
        let (len, start) = match length(b, at + 1) {
            None => return Ok(Parsed::Incomplete),
            Some(Err(())) => return Err(RequestError::InvalidBulkLength),
            Some(Ok((len, _))) if len < 0 => return Err(RequestError::InvalidBulkLength),
            Some(Ok((len, start))) => (len as u64, start),
        };
        match caps {
            Caps::Unauthenticated if len > UNAUTHENTICATED_MAX_ARG_BYTES as u64 => {
                return Err(RequestError::UnauthenticatedBulkLength { got: len });
            }
            Caps::Open { max_request_bytes } if start as u64 + len + 2 > max_request_bytes as u64 => {
                return Err(RequestError::TooLarge { max_request_bytes });
            }
            _ => {}
        }
        // Within the caps, so within the address space.
        let len = len as usize;
        let end = start + len;
        if b.len() < end + 2 {
            return Ok(Parsed::Incomplete);
        }
        if &b[end..end + 2] != b"\r\n" {
            return Err(RequestError::MissingCrlf { len });
        }
        spans.push((start, end));
        at = end + 2;
    }
    let whole = input.split_to(at).freeze();
    Ok(Parsed::Request(spans.into_iter().map(|(s, e)| whole.slice(s..e)).collect()))
}

/// One line of words separated by whitespace (`PING\r\n`, as typed into
/// `telnet`); a line of none is skipped.
fn inline(input: &mut BytesMut, caps: Caps) -> Result<Parsed, RequestError> {
    let max = match caps {
        Caps::Unauthenticated => MAX_INLINE_BYTES,
        Caps::Open { max_request_bytes } => MAX_INLINE_BYTES.min(max_request_bytes),
    };
    let Some(end) = input.iter().take(max + 2).position(|b| *b == b'\n') else {
        return if input.len() > max + 1 { Err(RequestError::InlineTooBig) } else { Ok(Parsed::Incomplete) };
    };
    let line = input.split_to(end + 1).freeze();
    let text = line.strip_suffix(b"\n").unwrap_or(&line);
    let text = text.strip_suffix(b"\r").unwrap_or(text);
    if text.len() > max {
        return Err(RequestError::InlineTooBig);
    }
    let args: Args =
        text.split(|b| b.is_ascii_whitespace()).filter(|w| !w.is_empty()).map(|w| line.slice_ref(w)).collect();
    Ok(if args.is_empty() { Parsed::Skipped } else { Parsed::Request(args) })
}

#[cfg(test)]
mod tests;
