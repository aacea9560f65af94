//! The Redis-protocol front door: an optional listener on a node that speaks
//! RESP2, so that `redis-cli`, `redis-benchmark` and Redis client libraries
//! work unchanged against any Causeway protocol.
//!
//! One Redis connection is one causal session ([`Session`]) in the node's
//! DC: the front door is a client of its own cluster, holding the
//! protocol's client state (dependencies, snapshot vectors…) per connection
//! and reaching the other partitions of the DC over the ordinary client
//! path (TLS under the node's own certificate) and its own node in-process
//! ([`LocalDoor`]: the same admission, no socket or TLS record). So what a
//! connection reads honours what it read and wrote before, as the protocol
//! promises its sessions, and nothing here bypasses the protocol.
//!
//! Commands and what they mean on a causal store:
//! - `GET`, `SET key value` (no options: no expiry or conditional writes),
//!   `DEL` (tombstones; the count is of keys that had a value when read
//!   just before), `EXISTS`.
//! - `MGET`: one read-only transaction (a causally consistent snapshot)
//!   where the protocol has them, else one `GET` per key.
//! - `MSET`: one write-only transaction (all or nothing visible) where the
//!   protocol has them; refused elsewhere rather than silently non-atomic.
//! - `MULTI` … `EXEC`: the queued `GET`/`MGET` become one read-only
//!   transaction, the queued `SET`/`MSET` one write-only transaction, both
//!   one read-write transaction (reads first, as the protocols define it).
//!   A read queued after a write runs the block as an interactive
//!   transaction in queue order where the protocol has them (the read sees
//!   the block's write, as in Redis), and is refused elsewhere.
//! - `PING`, `ECHO`, `INFO`, `SELECT 0`, `QUIT`, and `CONFIG GET`,
//!   `COMMAND`, `CLIENT` answered harmlessly for tools that ask at start.
//!
//! With `[auth] tokens` in the cluster config ([`crate::auth`]), a
//! connection must first `AUTH <token>` (or `AUTH <name> <token>`, the
//! Redis 6 form, with the token's name): everything else but `QUIT` is
//! answered `NOAUTH`. Until then its requests are capped as Redis caps
//! unauthenticated clients (10 arguments, 16 KiB each; [`request`]), so
//! a stranger cannot make the node buffer more than that, and it has
//! `[limits] hello_timeout_ms` from its accept to authenticate, as a
//! connection to the node's own port has for its TLS hello. The token's
//! role holds: a read-only token's `SET`, `MSET`, `DEL` and write-holding
//! `MULTI` are refused with `NOPERM`, and the session shows the token to
//! the nodes, which enforce it again.
//!
//! Requests are answered in order; pipelined requests are read in one go
//! and their replies written in one go. Consecutive pipelined `GET`s run as
//! one read-only transaction and consecutive `SET`s as one write-only
//! transaction where the protocol has them (see `Conn::batchable`): a
//! session has one operation in flight, so this is what lets `-P 16` pay
//! for one round instead of sixteen. A request is a flat array of bulk
//! strings or an inline command, as Redis reads them ([`request`]):
//! anything else (an array inside an array, say) is a protocol error,
//! answered and the connection closed, and so is a request larger than
//! `[limits] max_frame_bytes`, refused on its announced lengths before
//! its bytes arrive. Without `[auth]`, a connection's first request is its
//! hello and must come within `hello_timeout_ms`. If the
//! session breaks (a node did not answer within the deadline), the error is
//! returned and the connection closed: its causal context is gone, and a
//! reconnecting client starts a fresh one.

pub mod request;

use crate::auth::{Grant, Tokens};
use crate::client::{ClientError, Session};
use crate::config::Cluster;
use crate::inbox::LocalDoor;
use crate::metrics::{Kept, NodeMetrics};
use crate::tls::ClientTls;
use bytes::{Bytes, BytesMut};
use causeway_core::{DcId, NodeId, OpKind, Protocol};
use prometheus_client::metrics::counter::Counter;
use redis_protocol::resp2::encode::extend_encode;
use redis_protocol::resp2::types::BytesFrame as Frame;
use request::{Args, Caps};
use smallvec::SmallVec;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Most pipelined requests run as one transaction (bounding its size).
const MAX_BATCH: usize = 256;

/// How many pipelined requests of `kind` run as one operation: consecutive
/// GETs as one read-only transaction where the protocol has them (one
/// causal snapshot, as if issued at one instant, which the session order
/// allows), consecutive SETs as one write-only transaction (visible
/// together, never one without the others); elsewhere one at a time.
fn max_batch<P: Protocol>(kind: OpKind) -> usize {
    if offers::<P>(kind) { MAX_BATCH } else { 1 }
}

/// What a front door needs to open sessions.
struct Door<M> {
    local: LocalDoor<M>,
    /// With `[auth]`: connections must `AUTH` with one of these first.
    tokens: Option<Arc<Tokens>>,
    cluster: Arc<Cluster>,
    node: NodeId,
    dc: DcId,
    tls: ClientTls,
    metrics: Arc<NodeMetrics>,
    next_session: AtomicU32,
}

/// Serve the Redis protocol on `addr` for node `node` until `stop` fires.
pub async fn serve<P: Protocol>(
    addr: SocketAddr,
    cluster: Arc<Cluster>,
    local: LocalDoor<P::Msg>,
    metrics: Arc<NodeMetrics>,
    mut stop: watch::Receiver<bool>,
) {
    let node = local.node;
    let tls = match ClientTls::for_node(&cluster, node) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(node = node.0, "redis front door {addr}: {e}");
            return;
        }
    };
    let tokens = match cluster.config.auth.tokens.as_deref().map(Tokens::open).transpose() {
        Ok(t) => t.map(Arc::new),
        Err(e) => {
            tracing::error!(node = node.0, "redis front door {addr}: {e}");
            return;
        }
    };
    let l = match TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(node = node.0, "redis front door {addr}: {e}");
            return;
        }
    };
    tracing::info!(node = node.0, "redis front door on {addr} ({})", P::NAME);
    let dc = cluster.topology.dc_of(node);
    let permits = Arc::new(tokio::sync::Semaphore::new(cluster.config.limits.max_connections));
    let door = Arc::new(Door { local, tokens, cluster, node, dc, tls, metrics, next_session: AtomicU32::new(1) });
    let mut backoff = Duration::ZERO;
    // The connections, ended all at once when the door closes (dropped with
    // the set) and one by one when idle (`sweep`): a connection watches
    // neither `stop` nor a timer of its own at each read, which cost some
    // 900 instructions of a SET's 13 500 (callgrind, scripts/door-ir.sh).
    let mut connections = tokio::task::JoinSet::new();
    let mut live: rustc_hash::FxHashMap<tokio::task::Id, (tokio::task::AbortHandle, Arc<Liveness>)> =
        Default::default();
    let idle = Duration::from_millis(door.cluster.config.limits.idle_timeout_ms);
    let mut sweep = tokio::time::interval_at(tokio::time::Instant::now() + idle, idle);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            Some(r) = connections.join_next_with_id(), if !connections.is_empty() => {
                live.remove(&r.map_or_else(|e| e.id(), |(id, ())| id));
            }
            // A connection neither heard from since the last sweep nor busy
            // is closed: silent for between one and two `idle_timeout_ms`
            // after its last reply, as Redis's own `timeout` is enforced by
            // a periodic sweep too.
            _ = sweep.tick() => live.retain(|_, (task, liveness)| {
                let keep = liveness.sweep();
                if !keep {
                    task.abort();
                }
                keep
            }),
            r = l.accept() => match r {
                Ok((s, _)) => {
                    backoff = Duration::ZERO;
                    let Ok(permit) = permits.clone().try_acquire_owned() else {
                        door.metrics.refuse("too_many_connections");
                        let mut s = s;
                        tokio::spawn(async move {
                            let _ = s.write_all(b"-ERR max number of clients reached\r\n").await;
                        });
                        continue;
                    };
                    let door = door.clone();
                    let liveness = Arc::new(Liveness::new());
                    let task = {
                        let liveness = liveness.clone();
                        connections.spawn(async move {
                            let _counted = Counted::new(&door.metrics.redis_clients);
                            connection::<P>(&door, s, &liveness).await;
                            drop(permit);
                        })
                    };
                    live.insert(task.id(), (task, liveness));
                }
                Err(e) => {
                    // EMFILE and the like repeat while their cause lasts.
                    tracing::warn!(node = door.node.0, "redis front door: accept failed: {e}");
                    backoff = (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                    tokio::time::sleep(backoff).await;
                }
            },
            _ = stop.changed() => return,
        }
    }
}

/// What the idle sweep knows of a connection: whether it was heard from
/// since the last sweep, and whether it is busy with requests (an operation
/// may wait on the cluster for as long as the session's deadline, and that
/// is not idleness: only waiting for the next request is).
struct Liveness(AtomicU8);

impl Liveness {
    const HEARD: u8 = 1;
    const BUSY: u8 = 2;

    /// Accepted: counts as heard from.
    fn new() -> Self {
        Liveness(AtomicU8::new(Self::HEARD))
    }

    /// Requests came in: heard from, and busy until [`Liveness::waiting`].
    fn busy(&self) {
        self.0.store(Self::HEARD | Self::BUSY, Ordering::Relaxed);
    }

    /// Everything read is answered; waiting for the next request.
    fn waiting(&self) {
        self.0.store(Self::HEARD, Ordering::Relaxed);
    }

    /// The sweep's question: does the connection stay (heard from since
    /// the last sweep, or busy)? Forgets that it was heard from.
    fn sweep(&self) -> bool {
        self.0.fetch_and(Self::BUSY, Ordering::Relaxed) != 0
    }
}

/// The open-connections gauge, counted down however the connection ends
/// (aborted with the door included).
struct Counted<'a>(&'a prometheus_client::metrics::gauge::Gauge);

impl<'a> Counted<'a> {
    fn new(g: &'a prometheus_client::metrics::gauge::Gauge) -> Self {
        g.inc();
        Counted(g)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A connection's read and write buffers start this large.
const BUFFER_BYTES: usize = 16 * 1024;

/// A buffer grown past this for one large request or reply is given back
/// once emptied, so that a connection that once carried a large value
/// does not hold its buffers while it sits idle.
const KEPT_BUFFER_BYTES: usize = 64 * 1024;

/// One connection: read what is there, answer every whole request in it,
/// write the answers at once.
///
/// Until it has said hello (sent its first request; with `[auth]`, an
/// `AUTH` that succeeded) a connection has `[limits] hello_timeout_ms`
/// from its accept to do so, as a connection to the node's own port has
/// for its TLS handshake and hello: its reads and writes wait at most
/// until then, and it is closed if it has not said hello by then. Before
/// `AUTH` its requests are capped as Redis caps unauthenticated clients
/// ([`request::Caps::Unauthenticated`]) and read one at a time, so that
/// the requests after an `AUTH` are read under the caps it leaves. After
/// the hello nothing here waits on a timer: the idle sweep closes silent
/// connections.
async fn connection<P: Protocol>(door: &Door<P::Msg>, mut s: TcpStream, liveness: &Liveness) {
    let limits = &door.cluster.config.limits;
    let hello_by = tokio::time::Instant::now() + Duration::from_millis(limits.hello_timeout_ms);
    let _ = s.set_nodelay(true);
    let id = door.next_session.fetch_add(1, Ordering::Relaxed);
    let session = match Session::<P>::with_tls(door.cluster.clone(), door.dc, id, door.tls.clone()) {
        Ok(x) => x.with_local(door.local.clone()),
        Err(e) => {
            let _ = tokio::time::timeout_at(hello_by, s.write_all(format!("-ERR {e}\r\n").as_bytes())).await;
            return;
        }
    };
    let mut c = Conn::<P> { session, multi: None, info: info::<P>(door), tokens: door.tokens.clone(), grant: None };
    let mut input = BytesMut::with_capacity(BUFFER_BYTES);
    let mut out = BytesMut::with_capacity(BUFFER_BYTES);
    // Whether `input`'s allocation grew past `KEPT_BUFFER_BYTES`.
    let mut input_grew = false;
    let mut said_hello = false;
    let mut counts = Kept::default();
    // Every whole request read and not yet answered, in order.
    let mut requests: std::collections::VecDeque<Args> = Default::default();
    loop {
        let caps = c.caps(limits.max_frame_bytes);
        let one_at_a_time = caps == Caps::Unauthenticated;
        let mut refused = None;
        debug_assert!(requests.is_empty());
        loop {
            match request::decode(&mut input, caps) {
                Ok(Some(args)) => {
                    requests.push_back(args);
                    if one_at_a_time {
                        break;
                    }
                }
                Ok(None) => break,
                // Answered after the requests before it.
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        let decoded = !requests.is_empty();
        let mut close = false;
        let mut refusing = false;
        while let Some(args) = requests.pop_front() {
            count(&mut counts, &door.metrics, &args[0]);
            let answer = match c.admit(&args) {
                Ok(()) => match c.batchable(&args) {
                    Some(kind) => {
                        // Pipelined GETs (or SETs) that follow it run with it.
                        let mut batch: SmallVec<[Args; 1]> = smallvec::smallvec![args];
                        while let Some(next) = requests.front() {
                            if batch.len() >= max_batch::<P>(kind)
                                || c.batchable(next) != Some(kind)
                                || c.admit(next).is_err()
                            {
                                break;
                            }
                            count(&mut counts, &door.metrics, &next[0]);
                            batch.push(requests.pop_front().expect("a front"));
                        }
                        if c.batch(kind, batch, &mut out).await {
                            close = true;
                            break;
                        }
                        continue;
                    }
                    None => c.command(args).await,
                },
                Err((reason, f)) => {
                    door.metrics.refuse(reason);
                    Answer::Reply(f)
                }
            };
            match answer {
                Answer::Reply(f) => reply(&mut out, &f),
                Answer::Close(f) => {
                    reply(&mut out, &f);
                    close = true;
                    break;
                }
            }
        }
        if let Some(e) = refused
            && !close
        {
            door.metrics.refuse(e.reason());
            tracing::debug!(node = door.node.0, "redis front door: {e}");
            reply(&mut out, &error(format!("ERR {e}")));
            close = true;
            refusing = true;
        }
        said_hello |= decoded && c.authenticated();
        if one_at_a_time && decoded && !close {
            // More whole requests may wait in `input`: answer them before
            // writing, under the caps this one left.
            continue;
        }
        if !out.is_empty() {
            let written = if said_hello {
                s.write_all(&out).await.is_ok()
            } else {
                matches!(tokio::time::timeout_at(hello_by, s.write_all(&out)).await, Ok(Ok(())))
            };
            if !written {
                return;
            }
            out.clear();
            if out.capacity() > KEPT_BUFFER_BYTES {
                out = BytesMut::with_capacity(BUFFER_BYTES);
            }
        }
        if close {
            if refusing {
                // Unread input is likely: let the refusal arrive first.
                crate::linger::close_after_refusal(&mut s).await;
            }
            return;
        }
        if input_grew && input.is_empty() {
            input = BytesMut::with_capacity(BUFFER_BYTES);
            input_grew = false;
        }
        debug_assert!(input.len() <= c.caps(limits.max_frame_bytes).max_pending_bytes(), "decode bounds the input");
        liveness.waiting();
        let read = if said_hello {
            s.read_buf(&mut input).await
        } else {
            match tokio::time::timeout_at(hello_by, s.read_buf(&mut input)).await {
                Ok(r) => r,
                Err(_) => {
                    door.metrics.refuse("hello_timeout");
                    tracing::debug!(node = door.node.0, "redis front door: no hello within hello_timeout_ms");
                    return;
                }
            }
        };
        liveness.busy();
        input_grew |= input.capacity() > KEPT_BUFFER_BYTES;
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Encode a reply. The replies of GET and SET are written here directly
/// (the crate's general encoder first measures the frame, which costs as
/// much as the rest of a GET's reply path); the rest go through the crate.
fn reply(out: &mut BytesMut, f: &Frame) {
    match f {
        Frame::BulkString(b) => {
            out.reserve(b.len() + 16);
            out.extend_from_slice(b"$");
            out.extend_from_slice(itoa::Buffer::new().format(b.len()).as_bytes());
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Frame::Null => out.extend_from_slice(b"$-1\r\n"),
        Frame::SimpleString(s) if s.as_ref() == b"OK" => out.extend_from_slice(b"+OK\r\n"),
        f => extend_encode(out, f, false).map(|_| ()).expect("encoding a reply into a growable buffer"),
    }
}

/// Count a request of command `name` on a connection's kept counters.
fn count(kept: &mut Kept<Counter>, metrics: &NodeMetrics, name: &[u8]) {
    let name = command_name(name);
    let i = kept.index(name, || metrics.redis_counter(name));
    kept.get(i).inc();
}

/// The command's name for metrics: one of a fixed set, so that a client
/// cannot grow the label set.
fn command_name(name: &[u8]) -> &'static str {
    const KNOWN: [&str; 19] = [
        "get", "set", "del", "exists", "mget", "mset", "multi", "exec", "discard", "ping", "echo", "info", "select",
        "quit", "config", "command", "client", "hello", "auth",
    ];
    KNOWN.iter().find(|k| name.eq_ignore_ascii_case(k.as_bytes())).copied().unwrap_or("other")
}

fn info<P: Protocol>(door: &Door<P::Msg>) -> String {
    let t = &door.cluster.topology;
    format!(
        "# Server\r\nredis_version:7.0.0\r\ncauseway_version:{}\r\ncauseway_protocol:{}\r\ncauseway_cluster:{}\r\n\
         causeway_node:{}\r\ncauseway_dc:{}\r\ncausal:{}\r\nread_only_transactions:{}\r\n\
         write_only_transactions:{}\r\nread_write_transactions:{}\r\n",
        env!("CARGO_PKG_VERSION"),
        P::NAME,
        door.cluster.config.cluster_id,
        door.node.0,
        t.dc_name(door.dc),
        P::CAUSAL,
        offers::<P>(OpKind::Rot),
        offers::<P>(OpKind::Wot),
        offers::<P>(OpKind::Txn),
    )
}

fn offers<P: Protocol>(k: OpKind) -> bool {
    P::OPS.contains(&k)
}

enum Answer {
    Reply(Frame),
    /// Reply, then close the connection.
    Close(Frame),
}

fn ok() -> Answer {
    Answer::Reply(Frame::SimpleString(Bytes::from_static(b"OK")))
}

fn err(msg: impl Into<String>) -> Answer {
    Answer::Reply(error(msg))
}

fn error(msg: impl Into<String>) -> Frame {
    Frame::Error(msg.into().into())
}

fn bulk(v: Option<Bytes>) -> Frame {
    v.map_or(Frame::Null, Frame::BulkString)
}

fn arity(name: &str) -> Answer {
    err(format!("ERR wrong number of arguments for '{name}' command"))
}

/// A queued command of a MULTI block.
enum Queued {
    Get(Bytes),
    MGet(Vec<Bytes>),
    Set(Vec<(Bytes, Bytes)>),
}

struct Multi {
    queued: Vec<Queued>,
    /// A command was refused while queueing: EXEC aborts (as Redis does).
    failed: bool,
}

struct Conn<P: Protocol> {
    session: Session<P>,
    multi: Option<Multi>,
    info: String,
    tokens: Option<Arc<Tokens>>,
    /// Who `AUTH` said this connection is.
    grant: Option<Grant>,
}

/// Commands that change the store, directly or queued.
fn writes(name: &[u8]) -> bool {
    [b"set".as_slice(), b"mset", b"del"].iter().any(|w| name.eq_ignore_ascii_case(w))
}

impl<P: Protocol> Conn<P> {
    /// Whether the connection may run this command: `AUTH` and `QUIT`
    /// always; with tokens required, anything else only after `AUTH`, and
    /// writes only with a token that may write. The refusal's metric
    /// reason and reply otherwise.
    fn admit(&mut self, args: &[Bytes]) -> Result<(), (&'static str, Frame)> {
        let name = &args[0];
        if name.eq_ignore_ascii_case(b"auth") {
            return self.auth(&args[1..]);
        }
        if self.tokens.is_none() || name.eq_ignore_ascii_case(b"quit") {
            return Ok(());
        }
        let Some(g) = &self.grant else {
            return Err(("no_token", error("NOAUTH Authentication required.")));
        };
        let queued_write = name.eq_ignore_ascii_case(b"exec")
            && self.multi.as_ref().is_some_and(|m| m.queued.iter().any(|q| matches!(q, Queued::Set(_))));
        if !g.role.may_write() && (writes(name) || queued_write) {
            if let Some(m) = &mut self.multi {
                m.failed = true;
            }
            let shown = String::from_utf8_lossy(name).to_ascii_lowercase();
            let msg = format!("NOPERM the {} token {:?} may not run the '{shown}' command", g.role, g.name);
            return Err(("forbidden", error(msg)));
        }
        Ok(())
    }

    /// `AUTH secret`, or `AUTH name secret` (Redis 6's form), where the
    /// name must be the token's: a right secret under another name is
    /// refused as a wrong pair, as Redis refuses a password given for
    /// another user.
    fn auth(&mut self, rest: &[Bytes]) -> Result<(), (&'static str, Frame)> {
        let Some(tokens) = &self.tokens else {
            return Err((
                "bad_token",
                error(
                    "ERR AUTH <password> called without any password configured for the default user. \
                     Are you sure your configuration is correct?",
                ),
            ));
        };
        let (name, secret) = match rest {
            [secret] => (None, secret),
            [name, secret] => (Some(name), secret),
            _ => return Err(("bad_frame", error("ERR wrong number of arguments for 'auth' command"))),
        };
        let secret = String::from_utf8_lossy(secret).into_owned();
        match tokens.check(&secret) {
            Some(g) if name.is_none_or(|n| n.as_ref() == g.name.as_bytes()) => {
                self.grant = Some(g);
                self.session.set_token(Some(secret));
                // `command` answers OK.
                Ok(())
            }
            _ => Err(("bad_token", error("WRONGPASS invalid username-password pair or user is disabled."))),
        }
    }

    /// `LEVELS READ WRITE` sets the session guarantees this connection's
    /// GETs and SETs ask for from now on (Roohitavaf's per-operation
    /// levels, §4.2, where the protocol takes them), `LEVELS DEFAULT` goes
    /// back to the protocol's own, and `LEVELS` alone answers the two in
    /// force (`default default` when none were set).
    fn levels(&mut self, rest: &[Bytes]) -> Answer {
        use causeway_core::{Levels, ReadLevel, WriteLevel};
        let word = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
        let set = match rest {
            [] => {
                let (r, w) = match self.session.levels() {
                    Some(l) => (l.read.name(), l.write.name()),
                    None => ("default", "default"),
                };
                return Answer::Reply(Frame::Array(vec![
                    Frame::BulkString(Bytes::from_static(r.as_bytes())),
                    Frame::BulkString(Bytes::from_static(w.as_bytes())),
                ]));
            }
            [d] if d.eq_ignore_ascii_case(b"default") => None,
            [r, w] => {
                let read = match word(r).parse::<ReadLevel>() {
                    Ok(l) => l,
                    Err(e) => return err(format!("ERR {e}")),
                };
                let write = match word(w).parse::<WriteLevel>() {
                    Ok(l) => l,
                    Err(e) => return err(format!("ERR {e}")),
                };
                Some(Levels { read, write })
            }
            _ => return err("ERR wrong number of arguments for 'levels' command (LEVELS READ WRITE, or DEFAULT)"),
        };
        match self.session.set_levels(set) {
            Ok(()) => ok(),
            Err(e) => err(format!("ERR {e}")),
        }
    }

    /// `CHECKINGGROUP N` names the checking group this connection's GETs
    /// ask their servers to check from now on (accf: Roohitavaf, Alg 7.1's
    /// `GET(k, cg)`, numbered as the `checking` grouping yields them),
    /// `CHECKINGGROUP DEFAULT` goes back to the protocol's choice, and
    /// `CHECKINGGROUP` alone answers the group in force (`default` when
    /// none was named).
    fn checking_group(&mut self, rest: &[Bytes]) -> Answer {
        let set = match rest {
            [] => {
                let shown = self.session.checking_group().map_or("default".to_string(), |g| g.to_string());
                return Answer::Reply(Frame::BulkString(shown.into()));
            }
            [d] if d.eq_ignore_ascii_case(b"default") => None,
            [n] => match std::str::from_utf8(n).ok().and_then(|n| n.parse::<u16>().ok()) {
                Some(g) => Some(g),
                None => return err("ERR checking group must be a number from 0 to 65535, or DEFAULT"),
            },
            _ => return err("ERR wrong number of arguments for 'checkinggroup' command (CHECKINGGROUP N, or DEFAULT)"),
        };
        match self.session.set_checking_group(set) {
            Ok(()) => ok(),
            Err(e) => err(format!("ERR {e}")),
        }
    }

    /// Whether the connection may run commands: no tokens are required,
    /// or `AUTH` succeeded.
    fn authenticated(&self) -> bool {
        self.tokens.is_none() || self.grant.is_some()
    }

    /// What the connection's next request may hold.
    fn caps(&self, max_frame_bytes: usize) -> Caps {
        if self.authenticated() { Caps::Open { max_request_bytes: max_frame_bytes } } else { Caps::Unauthenticated }
    }

    async fn command(&mut self, args: Args) -> Answer {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
        let rest = &args[1..];
        if let Some(m) = &mut self.multi {
            match name.as_str() {
                "exec" | "discard" | "multi" => {}
                _ => {
                    let q = match queued(&name, rest) {
                        Ok(q) => q,
                        Err(e) => {
                            m.failed = true;
                            return Answer::Reply(e);
                        }
                    };
                    m.queued.push(q);
                    return Answer::Reply(Frame::SimpleString(Bytes::from_static(b"QUEUED")));
                }
            }
        }
        match name.as_str() {
            "ping" => match rest {
                [] => Answer::Reply(Frame::SimpleString(Bytes::from_static(b"PONG"))),
                [m] => Answer::Reply(Frame::BulkString(m.clone())),
                _ => arity("ping"),
            },
            "echo" => match rest {
                [m] => Answer::Reply(Frame::BulkString(m.clone())),
                _ => arity("echo"),
            },
            "quit" => Answer::Close(Frame::SimpleString(Bytes::from_static(b"OK"))),
            // `admit` checked the token and took it.
            "auth" => ok(),
            "select" => match rest {
                [db] if db.as_ref() == b"0" => ok(),
                [_] => err("ERR DB index is out of range (Causeway has one keyspace: 0)"),
                _ => arity("select"),
            },
            "info" => Answer::Reply(Frame::BulkString(self.info.clone().into())),
            // Tools ask for these at start; nothing here is configurable
            // through Redis, so answer with empty values.
            "config" => match rest {
                [sub, params @ ..] if sub.eq_ignore_ascii_case(b"get") => Answer::Reply(Frame::Array(
                    params
                        .iter()
                        .filter(|p| !p.contains(&b'*'))
                        .flat_map(|p| [Frame::BulkString(p.clone()), Frame::BulkString(Bytes::new())])
                        .collect(),
                )),
                _ => err("ERR CONFIG is not supported by Causeway's front door (only CONFIG GET, answered empty)"),
            },
            "command" => Answer::Reply(Frame::Array(Vec::new())),
            "levels" => self.levels(rest),
            "checkinggroup" => self.checking_group(rest),
            "client" => ok(),
            "hello" => err("NOPROTO this server speaks RESP2 only"),
            "get" => match rest {
                [k] => self.run(Exec::Get(k.clone())).await,
                _ => arity("get"),
            },
            "set" => match rest {
                [k, v] => self.run(Exec::Set(vec![(owned(k), owned(v))])).await,
                [_, _, ..] => {
                    err("ERR SET options are not supported: a causal store has no expiry or conditional writes")
                }
                _ => arity("set"),
            },
            "mget" => match rest {
                [] => arity("mget"),
                keys => self.run(Exec::MGet(keys.to_vec())).await,
            },
            "mset" => match pairs(rest) {
                Some(w) => self.run(Exec::Set(w)).await,
                None => arity("mset"),
            },
            "exists" => match rest {
                [] => arity("exists"),
                keys => self.run(Exec::Exists(keys.to_vec())).await,
            },
            "del" => match rest {
                [] => arity("del"),
                keys => self.run(Exec::Del(keys.iter().map(owned).collect())).await,
            },
            "multi" => {
                if self.multi.is_some() {
                    return err("ERR MULTI calls can not be nested");
                }
                self.multi = Some(Multi { queued: Vec::new(), failed: false });
                ok()
            }
            "discard" => match self.multi.take() {
                Some(_) => ok(),
                None => err("ERR DISCARD without MULTI"),
            },
            "exec" => match self.multi.take() {
                None => err("ERR EXEC without MULTI"),
                Some(m) if m.failed => err("EXECABORT Transaction discarded because of previous errors."),
                Some(m) => self.run(Exec::Multi(m.queued)).await,
            },
            _ => err(format!(
                "ERR unknown command '{}', with args beginning with: {}",
                String::from_utf8_lossy(&args[0]),
                rest.iter().take(3).map(|a| format!("'{}' ", String::from_utf8_lossy(a))).collect::<String>()
            )),
        }
    }

    /// Whether a request runs on the session's short path ([`Conn::batch`]),
    /// a plain `GET` or `SET`: alone, or together with the same kind of
    /// requests pipelined after it where the protocol has the transaction
    /// for that ([`max_batch`]).
    fn batchable(&self, args: &[Bytes]) -> Option<OpKind> {
        if self.multi.is_some() || args.len() < 2 {
            return None;
        }
        let name = &args[0];
        if args.len() == 2 && name.eq_ignore_ascii_case(b"get") {
            Some(OpKind::Rot)
        } else if args.len() == 3 && name.eq_ignore_ascii_case(b"set") {
            Some(OpKind::Wot)
        } else {
            None
        }
    }

    /// Run a batch of `batchable` requests of one kind, one reply each into
    /// `out`; whether the session ended (the connection then closes). A
    /// lone request, the usual case, allocates nothing here.
    async fn batch(&mut self, kind: OpKind, mut batch: SmallVec<[Args; 1]>, out: &mut BytesMut) -> bool {
        let n = batch.len();
        let result = if kind == OpKind::Rot && n == 1 {
            let key = batch[0].swap_remove(1);
            self.session.get(key).await.map(|v| reply(out, &bulk(v)))
        } else if kind == OpKind::Rot {
            let keys: Vec<Bytes> = batch.into_iter().map(|mut a| a.swap_remove(1)).collect();
            read(&mut self.session, &keys).await.map(|vs| vs.into_iter().for_each(|v| reply(out, &bulk(v))))
        } else {
            let r = if n == 1 {
                self.session.put(owned(&batch[0][1]), owned(&batch[0][2])).await
            } else {
                let writes = batch.iter().map(|a| (owned(&a[1]), owned(&a[2]))).collect();
                self.session.wot(last_write_wins(writes)).await
            };
            r.map(|()| (0..n).for_each(|_| out.extend_from_slice(b"+OK\r\n")))
        };
        match result {
            Ok(()) => false,
            Err(e) => {
                let ended = self.session.is_broken();
                let msg = if ended {
                    format!("ERR {e}; this connection's causal session has ended, reconnect")
                } else {
                    format!("ERR {e}")
                };
                let f = error(msg);
                (0..n).for_each(|_| reply(out, &f));
                ended
            }
        }
    }

    /// Run a data command; a session error that ends the session closes
    /// the connection after its reply.
    async fn run(&mut self, e: Exec) -> Answer {
        match self.exec(e).await {
            Ok(f) => Answer::Reply(f),
            Err(Failure::Refused(msg)) => err(msg),
            Err(Failure::Client(e)) if self.session.is_broken() => {
                Answer::Close(error(format!("ERR {e}; this connection's causal session has ended, reconnect")))
            }
            Err(Failure::Client(e)) => err(format!("ERR {e}")),
        }
    }

    async fn exec(&mut self, e: Exec) -> Result<Frame, Failure> {
        let s = &mut self.session;
        Ok(match e {
            Exec::Get(k) => bulk(s.get(k).await?),
            Exec::Set(mut w) if w.len() == 1 => {
                let (k, v) = w.pop().expect("one write");
                s.put(k, v).await?;
                Frame::SimpleString(Bytes::from_static(b"OK"))
            }
            Exec::Set(w) => {
                if !offers::<P>(OpKind::Wot) {
                    return Err(Failure::Refused(format!(
                        "ERR MSET is a write-only transaction, which {} does not have; use one SET per key",
                        P::NAME
                    )));
                }
                s.wot(last_write_wins(w)).await?;
                Frame::SimpleString(Bytes::from_static(b"OK"))
            }
            Exec::MGet(keys) => Frame::Array(read(s, &keys).await?.into_iter().map(bulk).collect()),
            Exec::Exists(keys) => Frame::Integer(read(s, &keys).await?.iter().filter(|v| v.is_some()).count() as i64),
            Exec::Del(keys) => {
                let found = read(s, &keys).await?;
                let mut unique = Vec::new();
                for k in keys {
                    if !unique.contains(&k) {
                        unique.push(k);
                    }
                }
                for k in unique {
                    s.del(k).await?;
                }
                Frame::Integer(found.iter().filter(|v| v.is_some()).count() as i64)
            }
            Exec::Multi(queued) => self.multi(queued).await?,
        })
    }

    /// EXEC: the queued reads as one snapshot, the queued writes as one
    /// atomic write, or both as one read-write transaction.
    async fn multi(&mut self, queued: Vec<Queued>) -> Result<Frame, Failure> {
        let mut reads: Vec<Bytes> = Vec::new();
        let mut writes: Vec<(Bytes, Bytes)> = Vec::new();
        for q in &queued {
            match q {
                Queued::Get(k) => reads.push(k.clone()),
                Queued::MGet(ks) => reads.extend(ks.iter().cloned()),
                Queued::Set(w) => writes.extend(w.iter().cloned()),
            }
        }
        let first_write = queued.iter().position(|q| matches!(q, Queued::Set(_)));
        let last_read = queued.iter().rposition(|q| !matches!(q, Queued::Set(_)));
        if let (Some(w), Some(r)) = (first_write, last_read)
            && r > w
        {
            if offers::<P>(OpKind::Interactive) {
                return self.multi_interactive(queued).await;
            }
            return Err(Failure::Refused(
                "EXECABORT a Causeway transaction reads from one snapshot before it writes: queue the GETs first"
                    .into(),
            ));
        }
        let need = match (reads.is_empty(), writes.is_empty()) {
            (true, true) => return Ok(Frame::Array(Vec::new())),
            (false, true) => OpKind::Rot,
            (true, false) => OpKind::Wot,
            (false, false) => OpKind::Txn,
        };
        if !offers::<P>(need) {
            return Err(Failure::Refused(format!(
                "EXECABORT {} has no {} transactions",
                P::NAME,
                match need {
                    OpKind::Rot => "read-only",
                    OpKind::Wot => "write-only",
                    _ => "read-write",
                }
            )));
        }
        let (unique, index) = dedup(&reads);
        let values = match need {
            OpKind::Rot => self.session.rot(unique).await?,
            OpKind::Wot => {
                self.session.wot(last_write_wins(writes)).await?;
                Vec::new()
            }
            _ => self.session.txn(unique, last_write_wins(writes)).await?,
        };
        let mut values = index.into_iter().map(|i| values[i].clone());
        Ok(Frame::Array(
            queued
                .iter()
                .map(|q| match q {
                    Queued::Get(_) => bulk(values.next().expect("one value per read")),
                    Queued::MGet(ks) => Frame::Array(ks.iter().map(|_| bulk(values.next().expect("read"))).collect()),
                    Queued::Set(_) => Frame::SimpleString(Bytes::from_static(b"OK")),
                })
                .collect(),
        ))
    }
}

impl<P: Protocol> Conn<P> {
    /// EXEC of a block that reads after it writes, on a protocol with
    /// interactive transactions: the commands run in queue order in one
    /// transaction, so a GET sees the block's earlier SETs (as in Redis),
    /// the other reads come from one snapshot, and the writes commit
    /// atomically at the end.
    async fn multi_interactive(&mut self, queued: Vec<Queued>) -> Result<Frame, Failure> {
        let mut txn = self.session.begin().await?;
        let mut out = Vec::with_capacity(queued.len());
        for q in queued {
            out.push(match q {
                Queued::Get(k) => bulk(txn.read(vec![k]).await?.pop().expect("one value")),
                Queued::MGet(ks) => Frame::Array(txn.read(ks).await?.into_iter().map(bulk).collect()),
                Queued::Set(w) => {
                    for (k, v) in w {
                        txn.write(k, v)?;
                    }
                    Frame::SimpleString(Bytes::from_static(b"OK"))
                }
            });
        }
        txn.commit().await?;
        Ok(Frame::Array(out))
    }
}

enum Exec {
    Get(Bytes),
    Set(Vec<(Bytes, Bytes)>),
    MGet(Vec<Bytes>),
    Exists(Vec<Bytes>),
    Del(Vec<Bytes>),
    Multi(Vec<Queued>),
}

enum Failure {
    /// Refused before anything was sent.
    Refused(String),
    Client(ClientError),
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        Failure::Client(e)
    }
}

/// A command queued inside MULTI, or why it cannot be.
fn queued(name: &str, rest: &[Bytes]) -> Result<Queued, Frame> {
    match (name, rest) {
        ("get", [k]) => Ok(Queued::Get(k.clone())),
        ("mget", keys) if !keys.is_empty() => Ok(Queued::MGet(keys.to_vec())),
        ("set", [k, v]) => Ok(Queued::Set(vec![(owned(k), owned(v))])),
        ("mset", kv) => {
            pairs(kv).map(Queued::Set).ok_or_else(|| error("ERR wrong number of arguments for 'mset' command"))
        }
        ("get" | "mget" | "set", _) => Err(error(format!("ERR wrong number of arguments for '{name}' command"))),
        _ => Err(error(format!("ERR '{name}' cannot be queued: a Causeway transaction holds GET, MGET, SET and MSET"))),
    }
}

fn pairs(kv: &[Bytes]) -> Option<Vec<(Bytes, Bytes)>> {
    if kv.is_empty() || !kv.len().is_multiple_of(2) {
        return None;
    }
    Some(kv.chunks(2).map(|p| (owned(&p[0]), owned(&p[1]))).collect())
}

/// Transactions take distinct keys; a key set twice keeps its last value,
/// as consecutive Redis SETs would leave it.
fn last_write_wins(w: Vec<(Bytes, Bytes)>) -> Vec<(Bytes, Bytes)> {
    let mut out: Vec<(Bytes, Bytes)> = Vec::with_capacity(w.len());
    for (k, v) in w {
        match out.iter_mut().find(|(k2, _)| *k2 == k) {
            Some(slot) => slot.1 = v,
            None => out.push((k, v)),
        }
    }
    out
}

/// A key or value that will be stored, in an allocation of its own. A
/// request's arguments are slices of the connection's read buffer, and a
/// stored slice would keep that whole buffer alive as long as its version
/// lives (a million SETs over 100 000 keys left an Eventual node at 164 MB
/// resident, 75 MB with the copy).
fn owned(b: &Bytes) -> Bytes {
    Bytes::copy_from_slice(b)
}

/// The distinct keys, and for each requested key its index among them.
fn dedup(keys: &[Bytes]) -> (Vec<Bytes>, Vec<usize>) {
    let mut unique: Vec<Bytes> = Vec::new();
    let index = keys
        .iter()
        .map(|k| match unique.iter().position(|u| u == k) {
            Some(i) => i,
            None => {
                unique.push(k.clone());
                unique.len() - 1
            }
        })
        .collect();
    (unique, index)
}

/// Read `keys` (repeats allowed): one snapshot where the protocol has
/// read-only transactions, else one read per distinct key.
async fn read<P: Protocol>(s: &mut Session<P>, keys: &[Bytes]) -> Result<Vec<Option<Bytes>>, ClientError> {
    let (unique, index) = dedup(keys);
    let values = if unique.len() > 1 && offers::<P>(OpKind::Rot) {
        s.rot(unique).await?
    } else {
        let mut v = Vec::with_capacity(unique.len());
        for k in unique {
            v.push(s.get(k).await?);
        }
        v
    };
    Ok(index.into_iter().map(|i| values[i].clone()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idle_sweep_keeps_a_connection_heard_from_or_busy() {
        let l = Liveness::new();
        assert!(l.sweep(), "a connection just accepted stays one period");
        assert!(!l.sweep(), "silent a whole period: closed");
        l.busy();
        for i in 0..5 {
            assert!(l.sweep(), "busy with a request for {i} sweeps: it stays");
        }
        l.waiting();
        assert!(l.sweep(), "answered since the last sweep: it stays");
        assert!(!l.sweep(), "then silent a whole period: closed");
    }

    #[test]
    fn duplicate_keys_are_read_once_and_written_last() {
        let b = |s: &'static str| Bytes::from_static(s.as_bytes());
        let (u, i) = dedup(&[b("a"), b("b"), b("a")]);
        assert_eq!(u, vec![b("a"), b("b")]);
        assert_eq!(i, vec![0, 1, 0]);
        assert_eq!(
            last_write_wins(vec![(b("k"), b("1")), (b("j"), b("2")), (b("k"), b("3"))]),
            vec![(b("k"), b("3")), (b("j"), b("2"))]
        );
        assert_eq!(pairs(&[b("k")]), None);
        assert_eq!(command_name(b"GeT"), "get");
        assert_eq!(command_name(b"flushall"), "other");
    }

    /// The replies written directly agree with the crate's encoder.
    #[test]
    fn replies_match_the_general_encoder() {
        let frames = [
            Frame::BulkString(Bytes::from_static(b"value")),
            Frame::BulkString(Bytes::new()),
            Frame::BulkString(Bytes::from(vec![7u8; 1000])),
            Frame::Null,
            Frame::SimpleString(Bytes::from_static(b"OK")),
            Frame::SimpleString(Bytes::from_static(b"QUEUED")),
            Frame::Integer(-3),
            Frame::Array(vec![Frame::Null, Frame::BulkString(Bytes::from_static(b"x"))]),
        ];
        for f in &frames {
            let (mut fast, mut general) = (BytesMut::new(), BytesMut::new());
            reply(&mut fast, f);
            extend_encode(&mut general, f, false).expect("encodes");
            assert_eq!(fast, general, "{f:?}");
        }
    }
}
