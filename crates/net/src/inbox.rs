//! The protocol thread's inbox, and the sessions that write to it from
//! inside the node's process.
//!
//! Everything that reaches a node's protocol thread is an [`Input`] on one
//! channel: client hellos, requests and departures from the connection
//! tasks, peer messages from the links. [`LocalDoor`] opens client sessions
//! on that channel directly, for the node's own Redis front door: the same
//! admission as a TCP session ([`role_of`], [`admit`]) and then no socket,
//! TLS record or connection task. It lives apart from `server` so that the
//! client library can use it without depending on the node runtime that
//! also starts the front door.

use crate::auth::{Role, Tokens};
use crate::frame::WireError;
use crate::metrics::NodeMetrics;
use causeway_core::{ClientId, Message, NodeId};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use tokio::sync::mpsc;

/// What the protocol thread is told.
pub(crate) enum Input<M> {
    /// A logical session opened: where its replies go.
    ClientHello {
        client: ClientId,
        replies: Replies<M>,
    },
    Client {
        client: ClientId,
        msg: M,
    },
    ClientGone {
        client: ClientId,
    },
    /// One frame's worth of sequenced peer messages, numbered `first_seq`,
    /// `first_seq + 1`, …: one hand-off to the protocol thread per frame
    /// rather than per message.
    Peer {
        from: NodeId,
        first_seq: u64,
        msgs: Vec<M>,
    },
    /// An unsequenced message from `from`, sent after its `after_seq - 1`.
    PeerEphemeral {
        from: NodeId,
        after_seq: u64,
        msg: M,
    },
    Stop,
}

/// Where the protocol thread puts a session's replies.
pub(crate) enum Replies<M> {
    /// A TCP connection: each reply encoded as a frame for the sender's
    /// slot of the connection ([`crate::frame::Wire::ReplyOn`]; 0: plain
    /// `Reply`), into its [`crate::reply_pipe::ReplyPipe`].
    Frames(crate::reply_pipe::PipeSender),
    /// An in-process session ([`LocalDoor`]): the message itself, neither
    /// encoded nor decoded nor handed through a task of its own.
    Local(Box<dyn LocalReplies<M>>),
}

/// An in-process session's reply queue, called on the protocol thread
/// with each reply to the session. The node drops it when the session
/// ends or the node stops, which is how the session learns that its node
/// is gone.
pub trait LocalReplies<M>: Send {
    fn reply(&mut self, msg: M);
}

/// What a client session may do, from the token its hello showed: anything
/// without `[auth]`, else the token's role.
pub(crate) fn role_of(tokens: Option<&Tokens>, token: Option<&str>) -> Result<Role, WireError> {
    match (tokens, token) {
        (None, _) => Ok(Role::Admin),
        (Some(_), None) => Err(WireError::TokenRequired),
        (Some(tokens), Some(secret)) => tokens.check(secret).map(|g| g.role).ok_or(WireError::BadToken),
    }
}

/// Whether a client session with `role` may send `msg`: a client request,
/// a write only with a role that may write, keys and values within limits.
pub(crate) fn admit<M: Message>(msg: &M, role: Role, limits: &crate::config::Limits) -> Result<(), WireError> {
    let (k, v) = msg.max_key_value_len();
    if !msg.is_client() {
        Err(WireError::NotAClientRequest(msg.kind().to_string()))
    } else if msg.is_write() && !role.may_write() {
        Err(WireError::Forbidden { role: role.to_string(), kind: msg.kind().to_string() })
    } else if k > limits.max_key_bytes {
        Err(WireError::KeyTooLarge { len: k, max: limits.max_key_bytes })
    } else if v > limits.max_value_bytes {
        Err(WireError::ValueTooLarge { len: v, max: limits.max_value_bytes })
    } else {
        Ok(())
    }
}

/// Client sessions inside the node's own process (its Redis front door):
/// requests go straight to the protocol thread and replies come back as the
/// frames a TCP session would read, with no socket, TLS record or extra
/// task in between. Admission (token, role, limits) is the TCP path's.
pub struct LocalDoor<M> {
    pub node: NodeId,
    pub(crate) input: mpsc::UnboundedSender<Input<M>>,
    pub(crate) next_client: Arc<AtomicU32>,
    pub(crate) metrics: Arc<NodeMetrics>,
    pub(crate) limits: crate::config::Limits,
    pub(crate) tokens: Option<Arc<Tokens>>,
}

impl<M> Clone for LocalDoor<M> {
    fn clone(&self) -> Self {
        LocalDoor {
            node: self.node,
            input: self.input.clone(),
            next_client: self.next_client.clone(),
            metrics: self.metrics.clone(),
            limits: self.limits.clone(),
            tokens: self.tokens.clone(),
        }
    }
}

/// One in-process session: send with [`LocalConn::send`]; replies reach
/// the [`LocalReplies`] given to [`LocalDoor::attach`]. Dropping it ends
/// the session at the node.
pub struct LocalConn<M> {
    client: ClientId,
    role: Role,
    door: LocalDoor<M>,
}

impl<M: Message> LocalDoor<M> {
    /// Open a session showing `token`, as a hello would, its replies going
    /// to `replies`.
    pub fn attach(&self, token: Option<&str>, replies: Box<dyn LocalReplies<M>>) -> Result<LocalConn<M>, WireError> {
        let role = role_of(self.tokens.as_deref(), token).inspect_err(|e| self.metrics.refuse(e.reason()))?;
        let client = ClientId(self.next_client.fetch_add(1, Ordering::Relaxed));
        self.input
            .send(Input::ClientHello { client, replies: Replies::Local(replies) })
            .map_err(|_| WireError::ShuttingDown)?;
        self.metrics.clients.inc();
        Ok(LocalConn { client, role, door: self.clone() })
    }
}

impl<M: Message> LocalConn<M> {
    pub fn send(&self, msg: M) -> Result<(), WireError> {
        admit(&msg, self.role, &self.door.limits).inspect_err(|e| self.door.metrics.refuse(e.reason()))?;
        self.door.input.send(Input::Client { client: self.client, msg }).map_err(|_| WireError::ShuttingDown)
    }
}

impl<M> Drop for LocalConn<M> {
    fn drop(&mut self) {
        let _ = self.door.input.send(Input::ClientGone { client: self.client });
        self.door.metrics.clients.dec();
    }
}
