//! A TLS 1.3 connection: rustls's unbuffered API for the handshake, then
//! rustls's kernel API for the secrets, then [`super::record`] for every
//! record, sealed into and opened in this stream's own two buffers.
//!
//! Reads and writes go through `tokio::io::split`, which serializes them,
//! so one object holds both directions: a key update the peer asks for is
//! answered from the read side by sealing into the write buffer.

use super::record::{self, ALERT, APPLICATION_DATA, HANDSHAKE, Key, MAX_CONTENT, MAX_RECORD, invalid};
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::kernel::KernelConnection;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{ConnectionState, EncodeError, InsufficientSizeError, UnbufferedStatus};
use rustls::{ConnectionTrafficSecrets, SupportedCipherSuite};
use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// Bytes read from the socket at most per call; more than one whole record.
const READ_BUF: usize = 32 * 1024;
/// Sealed bytes queued before a write waits for the socket.
const HIGH_WATER: usize = 256 * 1024;
/// Handshake bytes buffered at most (a certificate chain and a few records).
const MAX_HANDSHAKE_BUF: usize = 256 * 1024;
/// Handshake-message bytes held at most after the handshake (a ticket).
const MAX_POST_HANDSHAKE: usize = 64 * 1024;

/// KeyUpdate's handshake type and its request field (RFC 8446, section 4.6.3).
const KEY_UPDATE: u8 = 24;
const NEW_SESSION_TICKET: u8 = 4;
const UPDATE_NOT_REQUESTED: u8 = 0;
const UPDATE_REQUESTED: u8 = 1;

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

enum Kernel {
    Client(KernelConnection<ClientConnectionData>),
    Server(KernelConnection<ServerConnectionData>),
}

impl Kernel {
    fn update_tx(&mut self) -> Result<(u64, ConnectionTrafficSecrets), rustls::Error> {
        match self {
            Kernel::Client(k) => k.update_tx_secret(),
            Kernel::Server(k) => k.update_tx_secret(),
        }
    }
    fn update_rx(&mut self) -> Result<(u64, ConnectionTrafficSecrets), rustls::Error> {
        match self {
            Kernel::Client(k) => k.update_rx_secret(),
            Kernel::Server(k) => k.update_rx_secret(),
        }
    }
    fn suite(&self) -> SupportedCipherSuite {
        match self {
            Kernel::Client(k) => k.negotiated_cipher_suite(),
            Kernel::Server(k) => k.negotiated_cipher_suite(),
        }
    }
}

/// The socket and the two buffers, shared by the handshake and the stream.
struct Io {
    tcp: TcpStream,
    /// Bytes from the socket; `[start, end)` is not yet processed.
    inbuf: Vec<u8>,
    start: usize,
    end: usize,
    /// Sealed bytes; `[sent, len)` is not yet on the socket.
    out: Vec<u8>,
    sent: usize,
}

impl Io {
    /// Move unprocessed bytes to the front, growing the buffer if full.
    fn make_room(&mut self, most: usize) -> io::Result<()> {
        if self.start > 0 {
            self.inbuf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.inbuf.len() {
            if self.inbuf.len() >= most {
                return Err(invalid(format!("TLS: more than {most} bytes buffered without a whole message")));
            }
            self.inbuf.resize((self.inbuf.len() * 2).min(most), 0);
        }
        Ok(())
    }

    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.out.len() {
            let n = ready!(Pin::new(&mut self.tcp).poll_write(cx, &self.out[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.out.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

/// The two sides of rustls's unbuffered connection, driven alike.
trait Unbuffered {
    type Data;
    fn process<'c, 'i>(&'c mut self, incoming: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data>;
}

impl Unbuffered for UnbufferedClientConnection {
    type Data = ClientConnectionData;
    fn process<'c, 'i>(&'c mut self, incoming: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(incoming)
    }
}

impl Unbuffered for UnbufferedServerConnection {
    type Data = ServerConnectionData;
    fn process<'c, 'i>(&'c mut self, incoming: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(incoming)
    }
}

enum Step {
    Again,
    Transmit,
    Read,
    Done,
}

/// Encode one handshake record from rustls at the end of `out`.
fn encode<D>(e: &mut rustls::unbuffered::EncodeTlsData<'_, D>, out: &mut Vec<u8>) -> io::Result<()> {
    let at = out.len();
    let mut room = 4096;
    loop {
        out.resize(at + room, 0);
        match e.encode(&mut out[at..]) {
            Ok(n) => {
                out.truncate(at + n);
                return Ok(());
            }
            Err(EncodeError::InsufficientSize(InsufficientSizeError { required_size })) => room = required_size,
            Err(e) => {
                out.truncate(at);
                return Err(invalid(format!("TLS: {e}")));
            }
        }
    }
}

/// Run the handshake to its end: rustls says what to send and when to read.
/// Application data that arrives with the handshake's last flight is
/// returned (rustls opened it already).
async fn handshake<C: Unbuffered>(conn: &mut C, io: &mut Io) -> io::Result<Vec<u8>> {
    let mut early = Vec::new();
    loop {
        let UnbufferedStatus { mut discard, state } = conn.process(&mut io.inbuf[io.start..io.end]);
        let step = match state {
            Ok(ConnectionState::EncodeTlsData(mut e)) => {
                encode(&mut e, &mut io.out)?;
                Step::Again
            }
            Ok(ConnectionState::TransmitTlsData(t)) => {
                // Marked sent before it is: the write below comes before
                // anything else is asked of rustls.
                t.done();
                Step::Transmit
            }
            Ok(ConnectionState::BlockedHandshake) => Step::Read,
            Ok(ConnectionState::WriteTraffic(_)) => Step::Done,
            Ok(ConnectionState::ReadTraffic(mut r)) => {
                while let Some(rec) = r.next_record() {
                    let rec = rec.map_err(tls_error)?;
                    discard += rec.discard;
                    early.extend_from_slice(rec.payload);
                }
                Step::Again
            }
            Ok(ConnectionState::PeerClosed | ConnectionState::Closed) => {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "TLS: peer closed during the handshake"));
            }
            Ok(other) => return Err(invalid(format!("TLS: unexpected handshake state {other:?}"))),
            Err(e) => {
                io.start += discard;
                send_alert(conn, io).await;
                return Err(tls_error(e));
            }
        };
        io.start += discard;
        match step {
            Step::Again => {}
            Step::Transmit => {
                io.tcp.write_all(&io.out).await?;
                io.out.clear();
            }
            Step::Read => {
                io.make_room(MAX_HANDSHAKE_BUF)?;
                let n = io.tcp.read(&mut io.inbuf[io.end..]).await?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "TLS: connection closed during the handshake",
                    ));
                }
                io.end += n;
            }
            Step::Done => {
                debug_assert!(io.out.is_empty(), "the handshake's last flight was sent");
                return Ok(early);
            }
        }
    }
}

/// After a failed handshake rustls has queued an alert naming the cause;
/// send it so the other side's error says why. Best effort, and one call
/// only: a second would deframe the rest of the input again, and a second
/// error would try to send a second fatal alert (a debug assertion in
/// rustls; the `auth` test that replays a recorded session reaches it).
async fn send_alert<C: Unbuffered>(conn: &mut C, io: &mut Io) {
    io.out.clear();
    let UnbufferedStatus { discard, state } = conn.process(&mut io.inbuf[io.start..io.end]);
    if let Ok(ConnectionState::EncodeTlsData(mut e)) = state {
        let _ = encode(&mut e, &mut io.out);
    }
    io.start += discard;
    if !io.out.is_empty() {
        let _ = io.tcp.write_all(&io.out).await;
    }
}

/// An established TLS 1.3 connection.
pub struct TlsStream {
    io: Io,
    kernel: Kernel,
    tx: Key,
    rx: Key,
    /// Records sealed under one key before it is replaced by a key update:
    /// half the cipher suite's confidentiality limit.
    tx_limit: u64,
    /// Opened content not yet read: application data that came with the
    /// handshake, then content inside `inbuf`.
    early: Vec<u8>,
    pending: Range<usize>,
    /// A post-handshake handshake message split across records.
    hs: Vec<u8>,
    peer_closed: bool,
    close_sent: bool,
    peer: Option<CertificateDer<'static>>,
}

fn new_io(tcp: TcpStream) -> Io {
    Io { tcp, inbuf: vec![0; READ_BUF], start: 0, end: 0, out: Vec::new(), sent: 0 }
}

/// The client side: handshake with the server named `name` over `tcp`.
pub async fn connect(
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
    tcp: TcpStream,
) -> io::Result<TlsStream> {
    let mut conn = UnbufferedClientConnection::new(config, name).map_err(tls_error)?;
    let mut io = new_io(tcp);
    let early = handshake(&mut conn, &mut io).await?;
    let peer = conn.peer_certificates().and_then(|c| c.first()).map(|c| c.clone().into_owned());
    let (secrets, kernel) = conn.dangerous_into_kernel_connection().map_err(tls_error)?;
    TlsStream::new(io, Kernel::Client(kernel), secrets, early, peer)
}

/// The server side: handshake with a client that connected over `tcp`.
pub async fn accept(config: Arc<rustls::ServerConfig>, tcp: TcpStream) -> io::Result<TlsStream> {
    let mut conn = UnbufferedServerConnection::new(config).map_err(tls_error)?;
    let mut io = new_io(tcp);
    let early = handshake(&mut conn, &mut io).await?;
    let peer = conn.peer_certificates().and_then(|c| c.first()).map(|c| c.clone().into_owned());
    let (secrets, kernel) = conn.dangerous_into_kernel_connection().map_err(tls_error)?;
    TlsStream::new(io, Kernel::Server(kernel), secrets, early, peer)
}

impl TlsStream {
    fn new(
        io: Io,
        kernel: Kernel,
        secrets: rustls::ExtractedSecrets,
        early: Vec<u8>,
        peer: Option<CertificateDer<'static>>,
    ) -> io::Result<TlsStream> {
        #[allow(unreachable_patterns)] // TLS 1.2 is built only if another crate asks for it
        let limit = match kernel.suite() {
            SupportedCipherSuite::Tls13(s) => s.common.confidentiality_limit,
            _ => return Err(invalid("TLS: only TLS 1.3 is spoken here".into())),
        };
        Ok(TlsStream {
            io,
            kernel,
            tx: Key::new(secrets.tx.0, secrets.tx.1)?,
            rx: Key::new(secrets.rx.0, secrets.rx.1)?,
            tx_limit: limit / 2,
            early,
            pending: 0..0,
            hs: Vec::new(),
            peer_closed: false,
            close_sent: false,
            peer,
        })
    }

    /// The certificate the other side presented.
    pub fn peer_certificate(&self) -> Option<&CertificateDer<'static>> {
        self.peer.as_ref()
    }

    /// Replace this side's sending key after `records` records (tests use a
    /// small number to exercise key updates).
    #[cfg(test)]
    pub(crate) fn set_key_update_after(&mut self, records: u64) {
        self.tx_limit = records;
    }

    /// Send a KeyUpdate under the current key, then switch to the next one
    /// (RFC 8446, section 4.6.3).
    fn update_tx_key(&mut self, request: u8) -> io::Result<()> {
        self.tx.seal(HANDSHAKE, &[KEY_UPDATE, 0, 0, 1, request], &mut self.io.out);
        let (seq, secrets) = self.kernel.update_tx().map_err(tls_error)?;
        self.tx = Key::new(seq, secrets)?;
        Ok(())
    }

    fn seal_data(&mut self, data: &[u8]) -> io::Result<()> {
        for chunk in data.chunks(MAX_CONTENT) {
            if self.tx.seq >= self.tx_limit {
                self.update_tx_key(UPDATE_NOT_REQUESTED)?;
            }
            self.tx.seal(APPLICATION_DATA, chunk, &mut self.io.out);
        }
        Ok(())
    }

    fn on_alert(&mut self, content: Range<usize>) -> io::Result<()> {
        match self.io.inbuf[content] {
            // close_notify (RFC 8446, section 6.1): the end of the stream.
            [_, 0] => {
                self.peer_closed = true;
                Ok(())
            }
            // user_canceled: a warning, followed by close_notify.
            [_, 90] => Ok(()),
            [_, code] => Err(invalid(format!("TLS: the peer sent alert {code}"))),
            _ => Err(invalid("TLS: a malformed alert (decode_error)".into())),
        }
    }

    /// Handshake messages after the handshake: session tickets (to the
    /// client) and key updates (either way).
    fn on_handshake(&mut self, content: Range<usize>) -> io::Result<()> {
        self.hs.extend_from_slice(&self.io.inbuf[content]);
        if self.hs.len() > MAX_POST_HANDSHAKE {
            return Err(invalid("TLS: an oversized handshake message after the handshake".into()));
        }
        while let [typ, a, b, c, ..] = self.hs[..] {
            let len = u32::from_be_bytes([0, a, b, c]) as usize;
            if self.hs.len() < 4 + len {
                break;
            }
            let body = &self.hs[4..4 + len];
            match (typ, &mut self.kernel) {
                (NEW_SESSION_TICKET, Kernel::Client(k)) => k.handle_new_session_ticket(body).map_err(tls_error)?,
                (KEY_UPDATE, _) => {
                    let request = match body {
                        [r @ (UPDATE_NOT_REQUESTED | UPDATE_REQUESTED)] => *r,
                        _ => return Err(invalid("TLS: a malformed key update (decode_error)".into())),
                    };
                    // A key update ends its record: what follows is under the new key.
                    if self.hs.len() != 4 + len {
                        return Err(invalid("TLS: data after a key update in its record (unexpected_message)".into()));
                    }
                    let (seq, secrets) = self.kernel.update_rx().map_err(tls_error)?;
                    self.rx = Key::new(seq, secrets)?;
                    if request == UPDATE_REQUESTED {
                        self.update_tx_key(UPDATE_NOT_REQUESTED)?;
                    }
                }
                _ => {
                    return Err(invalid(format!(
                        "TLS: handshake message {typ} after the handshake (unexpected_message)"
                    )));
                }
            }
            self.hs.drain(..4 + len);
        }
        Ok(())
    }

    /// Open the next whole record in `inbuf`, if there is one.
    fn open_next(&mut self) -> io::Result<bool> {
        let io = &mut self.io;
        let Some(len) = record::record_len(&io.inbuf[io.start..io.end])? else { return Ok(false) };
        if io.end - io.start < len {
            return Ok(false);
        }
        let at = io.start;
        io.start += len;
        let (typ, n) = self.rx.open(&mut io.inbuf[at..at + len])?;
        let content = at + record::HEADER_LEN..at + record::HEADER_LEN + n;
        match typ {
            APPLICATION_DATA => self.pending = content,
            ALERT => self.on_alert(content)?,
            HANDSHAKE => self.on_handshake(content)?,
            other => return Err(invalid(format!("TLS: record of inner type {other} (unexpected_message)"))),
        }
        Ok(true)
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let wanted = buf.remaining();
        if wanted == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if !me.early.is_empty() {
                let n = me.early.len().min(buf.remaining());
                buf.put_slice(&me.early[..n]);
                me.early.drain(..n);
            }
            if !me.pending.is_empty() {
                let n = me.pending.len().min(buf.remaining());
                buf.put_slice(&me.io.inbuf[me.pending.start..me.pending.start + n]);
                me.pending.start += n;
            }
            if buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            if me.peer_closed {
                return Poll::Ready(Ok(()));
            }
            if me.open_next()? {
                continue;
            }
            if buf.remaining() < wanted {
                return Poll::Ready(Ok(()));
            }
            // Nothing opened is left (`pending` is empty), so moving the
            // unprocessed bytes is safe.
            me.io.make_room(MAX_RECORD.max(READ_BUF))?;
            let io = &mut me.io;
            let mut rb = ReadBuf::new(&mut io.inbuf[io.end..]);
            ready!(Pin::new(&mut io.tcp).poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            if n == 0 {
                if io.start == io.end {
                    // Closed without close_notify: our frames carry their
                    // own lengths, so a cut is seen by the frame reader.
                    me.peer_closed = true;
                    return Poll::Ready(Ok(()));
                }
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "TLS: connection closed inside a record",
                )));
            }
            io.end += n;
        }
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        if me.io.out.len() - me.io.sent >= HIGH_WATER {
            ready!(me.io.poll_send(cx))?;
        }
        let n = buf.len().min(HIGH_WATER);
        me.seal_data(&buf[..n])?;
        // Out at once, as rustls's own stream did; a flush finishes what
        // the socket did not take.
        if let Poll::Ready(Err(e)) = me.io.poll_send(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.io.poll_send(cx))?;
        Pin::new(&mut me.io.tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if !me.close_sent {
            // close_notify, level warning (RFC 8446, section 6.1).
            me.tx.seal(ALERT, &[1, 0], &mut me.io.out);
            me.close_sent = true;
        }
        ready!(me.io.poll_send(cx))?;
        Pin::new(&mut me.io.tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    //! Interoperation with a stock rustls stream (tokio-rustls) at the other
    //! end: what this side seals, rustls opens, and the reverse, across key
    //! updates asked for by either side and session tickets.
    use super::*;
    use crate::tls::{Validity, acceptor, connector, generate, node_name};
    use causeway_core::NodeId;
    use tokio::net::TcpListener;

    fn certs(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("causeway-tls-stream-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        generate(&dir, "test-cluster", 1, &Validity { days: 1 }).unwrap();
        dir
    }

    /// Each side writes `rounds` messages of growing size, the other echoes
    /// them back; every byte must come back unchanged.
    async fn echo_rounds<A, B>(a: &mut A, b: &mut B, rounds: usize)
    where
        A: AsyncRead + AsyncWrite + Unpin,
        B: AsyncRead + AsyncWrite + Unpin,
    {
        for i in 0..rounds {
            let len = 1 + (i * 7919) % 40_000;
            let msg: Vec<u8> = (0..len).map(|j| (i + j) as u8).collect();
            let (sent, echoed) = tokio::join!(
                async {
                    a.write_all(&msg).await.unwrap();
                    a.flush().await.unwrap();
                    let mut back = vec![0; len];
                    a.read_exact(&mut back).await.unwrap();
                    back
                },
                async {
                    let mut got = vec![0; len];
                    b.read_exact(&mut got).await.unwrap();
                    b.write_all(&got).await.unwrap();
                    b.flush().await.unwrap();
                }
            );
            let () = echoed;
            assert_eq!(sent, msg, "round {i}: the echo differs");
        }
    }

    /// Two ends of one loopback TCP connection: (accepted, dialed).
    async fn sockets() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (dialed, accepted) = tokio::join!(TcpStream::connect(listener.local_addr().unwrap()), listener.accept());
        (accepted.unwrap().0, dialed.unwrap())
    }

    fn node0() -> ServerName<'static> {
        ServerName::try_from(node_name(NodeId(0))).unwrap()
    }

    type Theirs<S> = tokio_rustls::TlsStream<S>;

    /// This side's server and a stock rustls client, handshaken.
    async fn our_server(dir: &std::path::Path) -> (TlsStream, Theirs<TcpStream>) {
        let (s, c) = sockets().await;
        let client = tokio_rustls::TlsConnector::from(connector(dir, "client").unwrap());
        let (ours, theirs) = tokio::join!(accept(acceptor(dir, NodeId(0)).unwrap(), s), client.connect(node0(), c));
        (ours.unwrap(), theirs.unwrap().into())
    }

    /// This side's client and a stock rustls server, handshaken.
    async fn our_client(dir: &std::path::Path) -> (TlsStream, Theirs<TcpStream>) {
        let (s, c) = sockets().await;
        let server = tokio_rustls::TlsAcceptor::from(acceptor(dir, NodeId(0)).unwrap());
        let (ours, theirs) = tokio::join!(connect(connector(dir, "client").unwrap(), node0(), c), server.accept(s));
        (ours.unwrap(), theirs.unwrap().into())
    }

    fn refresh(theirs: &mut Theirs<TcpStream>) {
        match theirs {
            tokio_rustls::TlsStream::Client(c) => c.get_mut().1.refresh_traffic_keys().unwrap(),
            tokio_rustls::TlsStream::Server(c) => c.get_mut().1.refresh_traffic_keys().unwrap(),
        }
    }

    /// Echo 20 rounds each way, the stock end asking for a key update in
    /// between, then close cleanly from this side or the stock one.
    async fn agree(mut ours: TlsStream, mut theirs: Theirs<TcpStream>, ours_closes: bool) {
        echo_rounds(&mut ours, &mut theirs, 20).await;
        // rustls asks for a key update; this side must answer with its own.
        refresh(&mut theirs);
        echo_rounds(&mut theirs, &mut ours, 20).await;
        let mut rest = Vec::new();
        if ours_closes {
            ours.shutdown().await.unwrap();
            theirs.read_to_end(&mut rest).await.unwrap();
        } else {
            theirs.shutdown().await.unwrap();
            ours.read_to_end(&mut rest).await.unwrap();
        }
        assert!(rest.is_empty(), "a clean close_notify, nothing after it");
    }

    #[tokio::test]
    async fn this_client_and_a_rustls_server_agree_across_key_updates() {
        let dir = certs("client");
        let (mut ours, theirs) = our_client(&dir).await;
        assert!(ours.peer_certificate().is_some());
        ours.set_key_update_after(5);
        agree(ours, theirs, true).await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_rustls_client_and_this_server_agree_across_key_updates() {
        let dir = certs("server");
        let (mut ours, theirs) = our_server(&dir).await;
        assert!(ours.peer_certificate().is_some(), "the client's certificate");
        ours.set_key_update_after(3);
        agree(ours, theirs, false).await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn two_ends_of_this_stream_update_keys_in_turn() {
        let dir = certs("both");
        let (s, c) = sockets().await;
        let (server, client) = tokio::join!(
            accept(acceptor(&dir, NodeId(0)).unwrap(), s),
            connect(connector(&dir, "client").unwrap(), node0(), c)
        );
        let (mut server, mut client) = (server.unwrap(), client.unwrap());
        client.set_key_update_after(4);
        server.set_key_update_after(7);
        echo_rounds(&mut client, &mut server, 30).await;
        echo_rounds(&mut server, &mut client, 30).await;
        // A key update that asks the other side to update too: it answers
        // with its own before its next data.
        server.update_tx_key(UPDATE_REQUESTED).unwrap();
        echo_rounds(&mut server, &mut client, 3).await;
        client.shutdown().await.unwrap();
        let mut rest = Vec::new();
        server.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn bytes_that_are_no_record_of_this_connection_end_it_with_an_error() {
        let dir = certs("garbage");
        for garbage in [
            &b"\x17\x03\x03\x00\x20not a record sealed by the peer!"[..],
            b"\x16\x03\x01\x00\x05hello",
            b"\x17\x03\x03\xff\xff",
        ] {
            let (mut ours, mut theirs) = our_server(&dir).await;
            echo_rounds(&mut theirs, &mut ours, 2).await;
            // Straight onto the socket under the peer's TLS.
            theirs.get_mut().0.write_all(garbage).await.unwrap();
            let mut rest = Vec::new();
            let e = ours.read_to_end(&mut rest).await.expect_err("garbage is refused");
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
            assert!(rest.is_empty(), "nothing of it read as data");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_client_without_a_cluster_certificate_is_refused_and_told_why() {
        let dir = certs("refused");
        let other = certs("other");
        let (s, c) = sockets().await;
        // A client of another cluster: its CA does not know this server either.
        let (server, client) = tokio::join!(
            accept(acceptor(&dir, NodeId(0)).unwrap(), s),
            connect(connector(&other, "client").unwrap(), node0(), c)
        );
        let (client, server) = (client.err().unwrap().to_string(), server.err().unwrap().to_string());
        assert!(client.contains("certificate"), "the client says why: {client}");
        // The client's alert reached the server, which says why too.
        assert!(server.contains("alert"), "the server says why: {server}");
        let _ = (std::fs::remove_dir_all(&dir), std::fs::remove_dir_all(&other));
    }
}
