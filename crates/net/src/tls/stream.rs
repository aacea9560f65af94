//! A TLS 1.3 connection: rustls's own connection object, handshake and
//! record layer both, driven over the socket by tokio-rustls.
//!
//! Everything on the wire is rustls's: the handshake, record protection,
//! key updates (those the peer asks for are answered before this side's
//! next record, and rustls starts its own before the cipher suite's
//! confidentiality limit), session tickets, alerts and `close_notify`.
//! This wrapper adds only what the runtime asks of a connection: the peer's
//! certificate, whether the session was resumed, and one policy for the end
//! of the stream (see [`TlsStream`]'s `poll_read`).

use rustls::pki_types::{CertificateDer, ServerName};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// An established TLS connection, either side.
pub struct TlsStream {
    inner: tokio_rustls::TlsStream<TcpStream>,
    /// The peer ended its direction with `close_notify` (RFC 8446, section
    /// 6.1), not by closing the socket.
    close_notify: bool,
}

/// The client side: handshake with the server named `name` over `tcp`.
pub async fn connect(
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
    tcp: TcpStream,
) -> io::Result<TlsStream> {
    let s = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await?;
    Ok(TlsStream { inner: s.into(), close_notify: false })
}

/// The server side: handshake with a client that connected over `tcp`.
pub async fn accept(config: Arc<rustls::ServerConfig>, tcp: TcpStream) -> io::Result<TlsStream> {
    let s = tokio_rustls::TlsAcceptor::from(config).accept(tcp).await?;
    Ok(TlsStream { inner: s.into(), close_notify: false })
}

impl TlsStream {
    /// The certificate the other side presented (on a resumed session, the
    /// one it presented when the session was first made; rustls keeps it
    /// with the session).
    pub fn peer_certificate(&self) -> Option<&CertificateDer<'static>> {
        self.inner.get_ref().1.peer_certificates().and_then(|c| c.first())
    }

    /// Whether the handshake resumed an earlier session.
    pub fn resumed(&self) -> bool {
        self.inner.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
    }

    /// Queue a KeyUpdate that also asks the peer for one (RFC 8446, section
    /// 4.6.3); it goes out with the next write or flush.
    pub fn update_keys(&mut self) -> io::Result<()> {
        let r = match &mut self.inner {
            tokio_rustls::TlsStream::Client(c) => c.get_mut().1.refresh_traffic_keys(),
            tokio_rustls::TlsStream::Server(s) => s.get_mut().1.refresh_traffic_keys(),
        };
        r.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Whether the peer ended the stream with `close_notify`.
    pub fn close_notify_received(&self) -> bool {
        self.close_notify
    }
}

impl AsyncRead for TlsStream {
    /// The stream's end is read as an end either way the peer ends it: with
    /// `close_notify`, or by closing the socket (a process that exits or
    /// crashes). rustls reports the second as `UnexpectedEof` because a cut
    /// stream is indistinguishable from a truncated one; every frame on
    /// these connections carries its own length, so a truncation inside a
    /// frame is still seen, as such, by the frame reader.
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        match ready!(Pin::new(&mut me.inner).poll_read(cx, buf)) {
            Ok(()) => {
                if buf.filled().len() == before && buf.remaining() > 0 {
                    me.close_notify = true;
                }
                Poll::Ready(Ok(()))
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Poll::Ready(Ok(())),
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    /// Sends `close_notify`, then shuts the socket's write side.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    //! What the runtime relies on, end to end over loopback: data crosses
    //! intact across key updates either side asks for, the end of a stream
    //! reads as an end however it came, bytes that are no record of the
    //! connection end it with an error, a stranger's certificate is refused
    //! with a reason, and a resumed session keeps its certificate.
    use super::*;
    use crate::tls::{CLIENT_NAME, Conn, Validity, acceptor, connector, generate, node_name};
    use causeway_core::NodeId;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Generous: only a hang should ever reach it.
    const DEADLINE: Duration = Duration::from_secs(60);

    fn certs(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("causeway-tls-stream-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        generate(&dir, "test-cluster", 1, &Validity { days: 1 }).unwrap();
        dir
    }

    /// `a` writes `rounds` messages of growing size, `b` echoes each back;
    /// every byte must come back unchanged.
    async fn echo_rounds(a: &mut TlsStream, b: &mut TlsStream, rounds: usize) {
        for i in 0..rounds {
            let len = 1 + (i * 7919) % 40_000;
            let msg: Vec<u8> = (0..len).map(|j| (i + j) as u8).collect();
            let (sent, ()) = tokio::join!(
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

    /// A handshaken pair: (server, client).
    async fn pair(server: &Arc<rustls::ServerConfig>, client: &Arc<rustls::ClientConfig>) -> (TlsStream, TlsStream) {
        let (s, c) = sockets().await;
        let (s, c) = tokio::join!(accept(server.clone(), s), connect(client.clone(), node0(), c));
        (s.unwrap(), c.unwrap())
    }

    #[tokio::test]
    async fn data_crosses_intact_across_key_updates_either_side_asks_for() {
        let dir = certs("updates");
        let (server, client) = (acceptor(&dir, NodeId(0)).unwrap(), connector(&dir, "client").unwrap());
        for client_closes in [true, false] {
            let (mut s, mut c) = tokio::time::timeout(DEADLINE, pair(&server, &client)).await.unwrap();
            let run = async {
                echo_rounds(&mut c, &mut s, 10).await;
                for turn in 0..6 {
                    // Each update asks the other side for one too; data
                    // after it, both ways, must open under the new keys.
                    if turn % 2 == 0 {
                        c.update_keys().unwrap()
                    } else {
                        s.update_keys().unwrap()
                    }
                    echo_rounds(&mut c, &mut s, 5).await;
                    echo_rounds(&mut s, &mut c, 5).await;
                }
                let (closer, other) = if client_closes { (&mut c, &mut s) } else { (&mut s, &mut c) };
                closer.shutdown().await.unwrap();
                let mut rest = Vec::new();
                other.read_to_end(&mut rest).await.unwrap();
                assert!(rest.is_empty(), "nothing after close_notify");
                assert!(other.close_notify_received(), "the end came as close_notify");
            };
            tokio::time::timeout(DEADLINE, run).await.unwrap();
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_connection_closed_without_close_notify_reads_as_its_end() {
        let dir = certs("cut");
        let (server, client) = (acceptor(&dir, NodeId(0)).unwrap(), connector(&dir, "client").unwrap());
        let (mut s, mut c) = pair(&server, &client).await;
        echo_rounds(&mut c, &mut s, 2).await;
        // The client process goes away: its socket closes, no alert
        // (dropping a stream sends none).
        drop(c);
        let mut rest = Vec::new();
        tokio::time::timeout(DEADLINE, s.read_to_end(&mut rest)).await.unwrap().unwrap();
        assert!(rest.is_empty());
        assert!(!s.close_notify_received());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn bytes_that_are_no_record_of_this_connection_end_it_with_an_error() {
        let dir = certs("garbage");
        let (server, client) = (acceptor(&dir, NodeId(0)).unwrap(), connector(&dir, "client").unwrap());
        for garbage in [
            // An application-data record the peer did not seal.
            &b"\x17\x03\x03\x00\x20not a record sealed by the peer!"[..],
            // A plaintext handshake record after the handshake.
            b"\x16\x03\x01\x00\x05hello",
            // A record longer than TLS allows.
            b"\x17\x03\x03\xff\xff",
            // Not TLS at all.
            b"GET / HTTP/1.1\r\n\r\n",
        ] {
            let (mut s, mut c) = pair(&server, &client).await;
            echo_rounds(&mut c, &mut s, 2).await;
            // Straight onto the socket, under the client's TLS.
            c.inner.get_mut().0.write_all(garbage).await.unwrap();
            let mut rest = Vec::new();
            let e = tokio::time::timeout(DEADLINE, s.read_to_end(&mut rest))
                .await
                .unwrap()
                .expect_err("garbage is refused");
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{garbage:?}: {e}");
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

    #[tokio::test]
    async fn a_resumed_session_still_proves_who_the_client_is() {
        let dir = certs("resumed");
        let (server, client) = (acceptor(&dir, NodeId(0)).unwrap(), connector(&dir, "client").unwrap());
        let (mut s, mut c) = pair(&server, &client).await;
        assert!(!s.resumed() && !c.resumed());
        // The client takes in the server's tickets with the first data.
        echo_rounds(&mut s, &mut c, 2).await;
        c.shutdown().await.unwrap();
        let (s, c) = pair(&server, &client).await;
        assert!(s.resumed() && c.resumed(), "the second handshake resumes the first session");
        let (s, c) = (Conn::Tls(Box::new(s)), Conn::Tls(Box::new(c)));
        assert!(s.proves(CLIENT_NAME) && !s.proves(&node_name(NodeId(0))), "the client's certificate, as first shown");
        assert!(c.proves(&node_name(NodeId(0))));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
