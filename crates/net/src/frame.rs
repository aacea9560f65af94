//! The wire: length-prefixed binary frames.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes of a
//! postcard-encoded [`Wire`] value. Postcard is compact (varints), has a
//! stable documented format, and needs no schema compiler. (An HLC is the
//! one type written otherwise, its `l` fixed-width: see
//! [`causeway_core::Hlc`]'s `Serialize`.) Hellos carry the sender's
//! [`causeway_core::WIRE_FORMAT`]; another format is refused by name rather
//! than misread. Every decoding
//! failure is a typed [`FrameError`]; nothing a peer sends can panic the
//! reader.

use causeway_core::{ClientId, NodeId};
use serde::de::DeserializeOwned;
use serde::ser::{SerializeSeq, SerializeStructVariant, Serializer};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Largest frame accepted unless configured otherwise (16 MiB).
pub const DEFAULT_MAX_FRAME_BYTES: usize = 16 << 20;

/// Everything that crosses a connection. `M` is the protocol's message type.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Wire<M> {
    /// First frame of a server-to-server connection.
    HelloPeer {
        cluster_id: String,
        from: NodeId,
        to: NodeId,
        /// The sender's incarnation (see [`crate::identity`]): its sequence
        /// numbers mean something only within it.
        incarnation: u64,
        /// The sender's [`causeway_core::WIRE_FORMAT`].
        format: u32,
    },
    /// First frame of a client connection.
    HelloClient {
        cluster_id: String,
        /// An access token ([`crate::auth`]), required when the cluster
        /// has `[auth] tokens`.
        token: Option<String>,
        /// The sender's [`causeway_core::WIRE_FORMAT`].
        format: u32,
    },
    /// Answer to `HelloPeer`: send from this sequence number on (everything
    /// before it has been delivered durably).
    Welcome {
        next_seq: u64,
        /// The receiver's incarnation: a node that lost its data comes back
        /// with a new one, and its old acknowledgements no longer hold.
        incarnation: u64,
    },
    /// Answer to `HelloClient`.
    WelcomeClient {
        node: NodeId,
        client: ClientId,
    },
    /// A batch of peer messages numbered `first_seq`, `first_seq + 1`, ….
    Peer {
        first_seq: u64,
        msgs: Vec<M>,
    },
    /// Everything below `next_seq` has been delivered durably.
    Ack {
        next_seq: u64,
    },
    Request(M),
    Reply(M),
    /// A peer message outside the sequence ([`causeway_core::Message::ephemeral`]
    /// or [`causeway_core::Message::transient`]):
    /// the receiver applies it only once it has delivered every sequenced
    /// message below `after_seq`, the ones sent before it.
    Ephemeral {
        after_seq: u64,
        msg: M,
    },
    /// The other side refuses something; a refusal of the hello closes the
    /// connection. A node stopping on purpose sends `Refused(ShuttingDown)`
    /// on each connection from a peer before closing it ([`crate::acks`]).
    Refused(WireError),
    /// A request of the connection's logical session `slot`. One connection
    /// may carry many independent sessions (a pipelined client: each is
    /// sequential, like every protocol's client assumes, but their requests
    /// share frames and syscalls). `Request` is slot 0.
    RequestOn {
        slot: u32,
        msg: M,
    },
    /// A reply to logical session `slot` ([`Wire::RequestOn`]); `Reply` is slot 0.
    ReplyOn {
        slot: u32,
        msg: M,
    },
}

/// How many logical sessions one client connection may carry
/// ([`Wire::RequestOn`]).
pub const MAX_SLOTS_PER_CONNECTION: u32 = 1024;

/// Why a server refused a connection or a request.
#[derive(Clone, Debug, Error, Serialize, Deserialize, PartialEq, Eq)]
pub enum WireError {
    /// Names only what the caller said: the right cluster id is not told to
    /// whoever asks.
    #[error("this node does not belong to cluster {got:?}")]
    WrongCluster { got: String },
    #[error(
        "node {node} was known here as incarnation {known:x}, not {got:x}: it lost its data (or is an impostor); \
         its sequence numbers no longer match, so the link is refused"
    )]
    StaleIncarnation { node: u32, known: u64, got: u64 },
    #[error("node {0} is not in this cluster's topology")]
    UnknownNode(u32),
    #[error("this is node {me}, not node {to}")]
    NotForMe { me: u32, to: u32 },
    #[error("the first frame must be a hello")]
    NoHello,
    #[error("malformed frame: {0}")]
    BadFrame(String),
    #[error("key of {len} bytes exceeds the limit of {max}")]
    KeyTooLarge { len: usize, max: usize },
    #[error("value of {len} bytes exceeds the limit of {max}")]
    ValueTooLarge { len: usize, max: usize },
    #[error("a client may not send {0:?} messages")]
    NotAClientRequest(String),
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("the node has {max} connections open, its limit; try again later")]
    TooManyConnections { max: usize },
    #[error("said hello as {claimed} without a certificate of this cluster for that name")]
    Unauthenticated { claimed: String },
    #[error("this cluster requires an access token (--token or CAUSEWAY_TOKEN)")]
    TokenRequired,
    #[error("the access token is not valid here (unknown or revoked)")]
    BadToken,
    #[error("a {role} token may not send {kind:?} requests")]
    Forbidden { role: String, kind: String },
    #[error("session slot {slot} is beyond the limit of {max} sessions per connection")]
    TooManySlots { slot: u32, max: u32 },
    /// Last, so that a node of an older format that receives it fails to
    /// decode it rather than reading it as another refusal.
    #[error(
        "this node speaks wire format {want}, the other side {got}: another version of Causeway \
         (upgrade the whole cluster and its clients together)"
    )]
    Format { got: u32, want: u32 },
}

impl WireError {
    /// The refusal's name in the `causeway_refused_total{reason}` metric.
    pub fn reason(&self) -> &'static str {
        match self {
            WireError::WrongCluster { .. } => "wrong_cluster",
            WireError::Format { .. } => "wire_format",
            WireError::StaleIncarnation { .. } => "stale_incarnation",
            WireError::UnknownNode(_) => "unknown_node",
            WireError::NotForMe { .. } => "not_for_me",
            WireError::NoHello => "no_hello",
            WireError::BadFrame(_) => "bad_frame",
            WireError::KeyTooLarge { .. } => "key_too_large",
            WireError::ValueTooLarge { .. } => "value_too_large",
            WireError::NotAClientRequest(_) => "not_a_client_request",
            WireError::ShuttingDown => "shutting_down",
            WireError::TooManyConnections { .. } => "too_many_connections",
            WireError::Unauthenticated { .. } => "unauthenticated",
            WireError::TokenRequired => "no_token",
            WireError::TooManySlots { .. } => "too_many_slots",
            WireError::BadToken => "bad_token",
            WireError::Forbidden { .. } => "forbidden",
        }
    }
}

#[derive(Debug, Error)]
pub enum FrameError {
    #[error("frame of {len} bytes exceeds the limit of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error("malformed frame: {0}")]
    Malformed(String),
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// Encode a frame, length prefix included.
pub fn encode<M: Serialize>(w: &Wire<M>) -> Vec<u8> {
    encode_into(w, Vec::new())
}

/// [`encode`], appended to `buf` (a connection's queue of frames to write):
/// the body is serialised after a placeholder for its length, into the
/// buffer that is sent, with no second buffer and copy per frame.
pub fn encode_into<M: Serialize>(w: &Wire<M>, buf: Vec<u8>) -> Vec<u8> {
    frame_into(w, buf)
}

/// `value`'s frame appended to `buf`: its postcard encoding after a
/// placeholder for its length, filled in at the end.
fn frame_into<T: Serialize>(value: &T, mut buf: Vec<u8>) -> Vec<u8> {
    let start = buf.len();
    buf.extend_from_slice(&[0u8; 4]);
    append_postcard(value, &mut buf);
    let len = (buf.len() - start - 4) as u32;
    buf[start..start + 4].copy_from_slice(&len.to_be_bytes());
    buf
}

/// Append `value`'s postcard encoding to `buf`.
///
/// Not `postcard::to_extend`: its flavor appends a byte string (a value, a
/// key, an HLC) through `Extend<u8>` one byte at a time, a loop of a dozen
/// instructions per byte that was the largest single cost of encoding a
/// version; this flavor appends it with one `extend_from_slice`.
pub(crate) fn append_postcard<T: Serialize + ?Sized>(value: &T, buf: &mut Vec<u8>) {
    postcard::serialize_with_flavor::<T, _, ()>(value, VecTail(buf)).expect("serialising into a Vec cannot fail");
}

/// A postcard flavor that appends to a borrowed `Vec`.
struct VecTail<'a>(&'a mut Vec<u8>);

impl postcard::ser_flavors::Flavor for VecTail<'_> {
    type Output = ();

    #[inline(always)]
    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    #[inline(always)]
    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// [`Wire::Peer`]'s index among `Wire`'s variants, as serde numbers them
/// (declaration order). `peer_batch_encodes_as_wire_peer` checks it.
const PEER_VARIANT_INDEX: u32 = 4;

/// The frame of `Wire::Peer { first_seq, msgs }`, appended to `buf`, with
/// the messages serialised where they lie (a peer link's window) rather
/// than cloned into a `Vec` first: a clone per message is a reference-count
/// update per key and value and an allocation per dependency list, and a
/// batch of hundreds of them is a `Vec` past the allocator's medium sizes.
/// The bytes are exactly [`encode`]'s for the same batch.
pub fn encode_peer_batch_into<'a, M, I>(first_seq: u64, msgs: I, buf: Vec<u8>) -> Vec<u8>
where
    M: Serialize + 'a,
    I: ExactSizeIterator<Item = &'a M> + Clone,
{
    struct Batch<I>(u64, I);
    struct Msgs<I>(I);
    impl<'a, M: Serialize + 'a, I: ExactSizeIterator<Item = &'a M> + Clone> Serialize for Msgs<I> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let msgs = self.0.clone();
            let mut seq = s.serialize_seq(Some(msgs.len()))?;
            for m in msgs {
                seq.serialize_element(m)?;
            }
            seq.end()
        }
    }
    impl<'a, M: Serialize + 'a, I: ExactSizeIterator<Item = &'a M> + Clone> Serialize for Batch<I> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut v = s.serialize_struct_variant("Wire", PEER_VARIANT_INDEX, "Peer", 2)?;
            v.serialize_field("first_seq", &self.0)?;
            v.serialize_field("msgs", &Msgs(self.1.clone()))?;
            v.end()
        }
    }
    frame_into(&Batch(first_seq, msgs), buf)
}

/// Decode a frame body (without its length prefix).
pub fn decode<M: DeserializeOwned>(body: &[u8]) -> Result<Wire<M>, FrameError> {
    match postcard::take_from_bytes::<Wire<M>>(body) {
        Ok((w, [])) => Ok(w),
        Ok((_, rest)) => Err(FrameError::Malformed(format!("{} trailing bytes", rest.len()))),
        Err(e) => Err(FrameError::Malformed(e.to_string())),
    }
}

/// Read one frame body. `Ok(None)` on a clean end of stream between frames.
///
/// Reads no byte past the frame, so it suits a handshake read from a
/// stream that is handed on afterwards. A connection that reads frame after
/// frame uses a [`FrameReader`], which reads whatever has arrived at once.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, max: usize) -> Result<Option<Vec<u8>>, FrameError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = r.read(&mut len[got..]).await?;
        if n == 0 {
            return if got == 0 { Ok(None) } else { Err(FrameError::Truncated) };
        }
        got += n;
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof { FrameError::Truncated } else { FrameError::Io(e) }
    })?;
    Ok(Some(body))
}

/// The largest buffer a [`FrameReader`] keeps once the frame that grew it
/// is read: a connection that once carried a large value does not hold
/// that much for the rest of its life.
const READ_BUFFER_KEPT_BYTES: usize = 1 << 20;

/// Frames read from a stream into one buffer that every read fills with
/// whatever has arrived, so a burst of small frames (a pipelined client's
/// requests, a session's replies) costs one read, and each body is decoded
/// where it lies. Cancel-safe: a frame half read when the caller stops
/// polling stays in the buffer for the next poll, so a connection task can
/// `select!` it against a stop or a timeout, and a client session polls
/// [`FrameReader::poll_frame`] in the same wait as its timer and its other
/// connections.
///
/// Why: a reader task per client connection that forwarded each reply over
/// a channel cost a task wake-up, a channel send and a receive per reply on
/// top of the waiting session's own, about a tenth of a bench client's user
/// time. On the server, a `BufReader` under a length-then-body read copied
/// each frame a second time, out of its buffer into the body's.
pub struct FrameReader<R> {
    r: R,
    buf: Vec<u8>,
    /// `buf[start..end]` is read and not yet returned.
    start: usize,
    end: usize,
    max: usize,
}

/// The buffer a [`FrameReader`] reads into, and keeps at least.
const FRAME_READER_BYTES: usize = 64 * 1024;

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Frames of at most `max` bytes from `r`.
    pub fn new(r: R, max: usize) -> Self {
        FrameReader { r, buf: Vec::new(), start: 0, end: 0, max }
    }

    /// The next frame's body, or `None` on a clean end of stream between
    /// frames. The body lies in this reader's buffer until the next read.
    pub async fn next_frame(&mut self) -> Result<Option<&[u8]>, FrameError> {
        let body = std::future::poll_fn(|cx| self.poll_body(cx)).await?;
        Ok(body.map(|b| &self.buf[b]))
    }

    /// [`FrameReader::next_frame`] as a poll.
    pub fn poll_frame(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<Option<&[u8]>, FrameError>> {
        self.poll_body(cx).map(|r| r.map(|b| b.map(|b| &self.buf[b])))
    }

    /// Where the next frame's body lies in `buf`.
    fn poll_body(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<Option<std::ops::Range<usize>>, FrameError>> {
        use std::task::Poll;
        loop {
            let held = self.end - self.start;
            let need = if held >= 4 {
                let len =
                    u32::from_be_bytes(self.buf[self.start..self.start + 4].try_into().expect("4 bytes")) as usize;
                if len > self.max {
                    return Poll::Ready(Err(FrameError::TooLarge { len, max: self.max }));
                }
                if held >= 4 + len {
                    let body = self.start + 4..self.start + 4 + len;
                    self.start = body.end;
                    return Poll::Ready(Ok(Some(body)));
                }
                4 + len
            } else {
                4
            };
            self.make_room(need);
            let mut rb = tokio::io::ReadBuf::new(&mut self.buf[self.end..]);
            match std::pin::Pin::new(&mut self.r).poll_read(cx, &mut rb) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(FrameError::Io(e))),
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    if n == 0 {
                        return Poll::Ready(if held == 0 { Ok(None) } else { Err(FrameError::Truncated) });
                    }
                    self.end += n;
                }
            }
        }
    }

    /// Room after `end` for the rest of a frame of `need` bytes from
    /// `start`, and for more than that when the buffer allows (a read takes
    /// every reply that arrived). A buffer grown for a large frame shrinks
    /// back once it is empty, so a connection that once read a large value
    /// does not keep its size.
    fn make_room(&mut self, need: usize) {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
            if self.buf.len() > READ_BUFFER_KEPT_BYTES.max(need) {
                self.buf = Vec::new();
            }
        } else if self.buf.len() - self.start < need.max(FRAME_READER_BYTES / 2) {
            self.buf.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        let want = need.max(FRAME_READER_BYTES);
        if self.buf.len() - self.start < want {
            self.buf.resize(self.start + want, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_protocols::eventual::Msg;
    use rand::{Rng, SeedableRng};

    #[tokio::test]
    async fn round_trip_and_limits() {
        let w: Wire<Msg> = Wire::Peer { first_seq: 7, msgs: vec![Msg::PutReply, Msg::PutReply] };
        let bytes = encode(&w);
        let mut r = &bytes[..];
        let body = read_frame(&mut r, 1024).await.unwrap().unwrap();
        assert!(matches!(decode::<Msg>(&body).unwrap(), Wire::Peer { first_seq: 7, msgs } if msgs.len() == 2));
        assert!(read_frame(&mut r, 1024).await.unwrap().is_none());
        let mut r = &bytes[..];
        assert!(matches!(read_frame(&mut r, 2).await, Err(FrameError::TooLarge { .. })));
        let mut r = &bytes[..bytes.len() - 1];
        assert!(matches!(read_frame(&mut r, 1024).await, Err(FrameError::Truncated)));
    }

    /// A `Thin` list (COPS-GT's `Nearest`, Eiger's read dependencies and
    /// cells: a thin pointer in memory) is on the wire what the `Vec` it
    /// replaced was, so `WIRE_FORMAT` stands.
    #[test]
    fn cops_gt_nearest_encodes_as_a_vec() {
        use causeway_protocols::cops_gt::Nearest;
        for v in [vec![], vec![0u32, 3, 70_000]] {
            let bytes = postcard::to_allocvec(&Nearest::from_vec(v.clone())).unwrap();
            assert_eq!(bytes, postcard::to_allocvec(&v).unwrap());
            let back: Nearest = postcard::from_bytes(&bytes).unwrap();
            assert_eq!(back.as_slice(), &v[..]);
        }
    }

    /// Frames appended to one buffer read back one by one, in order.
    #[tokio::test]
    async fn appended_frames_read_back_in_order() {
        let mut buf = encode_into::<Msg>(&Wire::Ack { next_seq: 1 }, Vec::new());
        buf = encode_into::<Msg>(&Wire::RequestOn { slot: 3, msg: Msg::PutReply }, buf);
        let mut r = &buf[..];
        let first = read_frame(&mut r, 1024).await.unwrap().unwrap();
        assert!(matches!(decode::<Msg>(&first).unwrap(), Wire::Ack { next_seq: 1 }));
        let second = read_frame(&mut r, 1024).await.unwrap().unwrap();
        assert!(matches!(decode::<Msg>(&second).unwrap(), Wire::RequestOn { slot: 3, msg: Msg::PutReply }));
        assert!(read_frame(&mut r, 1024).await.unwrap().is_none());
    }

    /// A batch serialised from where its messages lie is byte for byte the
    /// frame of the same `Wire::Peer`; this also pins `PEER_VARIANT_INDEX`.
    #[test]
    fn peer_batch_encodes_as_wire_peer() {
        let window: std::collections::VecDeque<Msg> = (0..300u32)
            .map(|i| match i % 3 {
                0 => Msg::PutReq { key: format!("user{i}").into(), value: vec![i as u8; 64].into() },
                1 => Msg::GetReq { key: format!("k{i}").into() },
                _ => Msg::PutReply,
            })
            .collect();
        for (first_seq, range) in [(0u64, 0..0), (7, 0..1), (1 << 40, 5..300), (u64::MAX - 1, 299..300)] {
            let msgs: Vec<Msg> = window.range(range.clone()).cloned().collect();
            let want = encode(&Wire::Peer { first_seq, msgs });
            let got = encode_peer_batch_into(first_seq, window.range(range.clone()), vec![9, 9]);
            assert_eq!(&got[..2], &[9, 9], "appends after what the buffer held");
            assert_eq!(&got[2..], &want[..], "batch {range:?} at {first_seq}");
        }
    }

    /// One reader reads a large frame and then a smaller one: the second
    /// body is exactly its own, not the tail of the first; and a frame past
    /// the kept size does not leave its buffer behind.
    #[tokio::test]
    async fn a_frame_reader_holds_each_frame_exactly() {
        let big: Vec<Msg> =
            (0..1000u32).map(|i| Msg::PutReq { key: format!("k{i}").into(), value: vec![1; 64].into() }).collect();
        let mut buf = encode(&Wire::Peer { first_seq: 1, msgs: big });
        buf = encode_into::<Msg>(&Wire::Ack { next_seq: 2 }, buf);
        let mut r = FrameReader::new(&buf[..], 1 << 20);
        let body = r.next_frame().await.unwrap().unwrap();
        assert!(matches!(decode::<Msg>(body).unwrap(), Wire::Peer { msgs, .. } if msgs.len() == 1000));
        let body = r.next_frame().await.unwrap().unwrap();
        assert!(matches!(decode::<Msg>(body).unwrap(), Wire::Ack { next_seq: 2 }));
        assert!(r.next_frame().await.unwrap().is_none());
        let huge = encode::<Msg>(&Wire::Request(Msg::PutReq { key: "k".into(), value: vec![3; 2 << 20].into() }));
        let small = encode::<Msg>(&Wire::Ack { next_seq: 9 });
        let both = [huge, small.clone(), small].concat();
        let mut r = FrameReader::new(Chunks(both.chunks(3 << 20).map(<[u8]>::to_vec).collect()), 4 << 20);
        let body = r.next_frame().await.unwrap().unwrap();
        assert!(
            matches!(decode::<Msg>(body).unwrap(), Wire::Request(Msg::PutReq { value, .. }) if value.len() == 2 << 20)
        );
        for _ in 0..2 {
            let body = r.next_frame().await.unwrap().unwrap();
            assert!(matches!(decode::<Msg>(body).unwrap(), Wire::Ack { next_seq: 9 }));
        }
        assert!(r.next_frame().await.unwrap().is_none());
        assert!(r.buf.len() <= READ_BUFFER_KEPT_BYTES, "a large frame's buffer kept: {}", r.buf.len());
    }

    /// A reader that hands out its bytes in the chunks given, one per read.
    struct Chunks(std::collections::VecDeque<Vec<u8>>);

    impl AsyncRead for Chunks {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            if let Some(mut c) = self.0.pop_front() {
                let n = c.len().min(buf.remaining());
                buf.put_slice(&c[..n]);
                if n < c.len() {
                    self.0.push_front(c.split_off(n));
                }
            }
            std::task::Poll::Ready(Ok(()))
        }
    }

    async fn next_frame<R: AsyncRead + Unpin>(r: &mut FrameReader<R>) -> Result<Option<Wire<Msg>>, FrameError> {
        std::future::poll_fn(|cx| r.poll_frame(cx).map_ok(|b| b.map(|b| decode::<Msg>(b).unwrap()))).await
    }

    /// A `FrameReader` returns each frame whole however the stream cuts
    /// the bytes: many frames in one read, a frame over many reads (its
    /// length prefix split too), a frame larger than its buffer; then a
    /// clean end; a cut inside a frame is `Truncated`, a frame over the
    /// limit `TooLarge`. Seeded cuts; a failure prints the seed.
    #[tokio::test]
    async fn a_frame_reader_reassembles_frames_cut_anywhere() {
        let frames: Vec<Wire<Msg>> = (0..200u32)
            .map(|i| match i % 4 {
                0 => Wire::Ack { next_seq: i as u64 },
                1 => Wire::RequestOn {
                    slot: i,
                    msg: Msg::PutReq { key: format!("k{i}").into(), value: vec![i as u8; 64].into() },
                },
                2 => Wire::Request(Msg::PutReq { key: "big".into(), value: vec![7; 100_000 + i as usize].into() }),
                _ => Wire::Request(Msg::PutReply),
            })
            .collect();
        let bytes = frames.iter().fold(Vec::new(), |b, f| encode_into(f, b));
        for seed in 0..20u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut chunks = std::collections::VecDeque::new();
            let mut at = 0;
            while at < bytes.len() {
                let n = match rng.random_range(0..3) {
                    0 => rng.random_range(1..8),
                    1 => rng.random_range(1..2000),
                    _ => rng.random_range(1..300_000),
                }
                .min(bytes.len() - at);
                chunks.push_back(bytes[at..at + n].to_vec());
                at += n;
            }
            let mut r = FrameReader::new(Chunks(chunks), 1 << 20);
            for (i, want) in frames.iter().enumerate() {
                let got = next_frame(&mut r).await.unwrap_or_else(|e| panic!("seed {seed}, frame {i}: {e}"));
                assert_eq!(format!("{got:?}"), format!("{:?}", Some(want)), "seed {seed}, frame {i}");
            }
            assert!(next_frame(&mut r).await.unwrap().is_none(), "seed {seed}: a clean end");
        }
        let cut = Chunks([bytes[..bytes.len() - 1].to_vec()].into());
        let mut r = FrameReader::new(cut, 1 << 20);
        let mut last = Ok(None);
        for _ in 0..frames.len() {
            last = next_frame(&mut r).await;
        }
        assert!(matches!(last, Err(FrameError::Truncated)), "{last:?}");
        let mut r = FrameReader::new(Chunks([bytes.clone()].into()), 1000);
        for _ in 0..2 {
            assert!(next_frame(&mut r).await.is_ok());
        }
        assert!(matches!(next_frame(&mut r).await, Err(FrameError::TooLarge { max: 1000, .. })));
    }

    /// Random bytes never panic the decoder (the cargo-fuzz target in
    /// `fuzz/` explores this far more thoroughly).
    #[test]
    fn decoder_survives_garbage() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let valid = encode::<Msg>(&Wire::Request(Msg::GetReq { key: bytes::Bytes::from_static(b"k") }));
        for i in 0..20_000 {
            let mut b: Vec<u8> = if i % 2 == 0 {
                (0..rng.random_range(0..64)).map(|_| rng.random()).collect()
            } else {
                valid[4..].to_vec()
            };
            if i % 2 == 1 && !b.is_empty() {
                let j = rng.random_range(0..b.len());
                b[j] = rng.random();
            }
            let _ = decode::<Msg>(&b);
        }
        assert!(matches!(decode::<Msg>(&[250, 1, 2]), Err(FrameError::Malformed(_))));
    }
}
