//! The wire: length-prefixed binary frames.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes of a
//! postcard-encoded [`Wire`] value. Postcard is compact (varints), has a
//! stable documented format, and needs no schema compiler. Every decoding
//! failure is a typed [`FrameError`]; nothing a peer sends can panic the
//! reader.

use causeway_core::{ClientId, NodeId};
use serde::de::DeserializeOwned;
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
    },
    /// First frame of a client connection.
    HelloClient {
        cluster_id: String,
        /// An access token ([`crate::auth`]), required when the cluster
        /// has `[auth] tokens`.
        token: Option<String>,
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
    /// connection.
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
}

impl WireError {
    /// The refusal's name in the `causeway_refused_total{reason}` metric.
    pub fn reason(&self) -> &'static str {
        match self {
            WireError::WrongCluster { .. } => "wrong_cluster",
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
pub fn encode_into<M: Serialize>(w: &Wire<M>, mut buf: Vec<u8>) -> Vec<u8> {
    let start = buf.len();
    buf.extend_from_slice(&[0u8; 4]);
    let mut buf = postcard::to_extend(w, buf).expect("serialising into a Vec cannot fail");
    let len = (buf.len() - start - 4) as u32;
    buf[start..start + 4].copy_from_slice(&len.to_be_bytes());
    buf
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
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof { FrameError::Truncated } else { FrameError::Io(e) }
    })?;
    Ok(Some(body))
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
