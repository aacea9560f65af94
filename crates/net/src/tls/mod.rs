//! Transport security: every connection, client to node and node to node,
//! is mutual TLS under one cluster CA.
//!
//! Why mutual: a node must know that a peer saying hello as node 3 *is*
//! node 3 (a process that could pose as a peer could inject replicated
//! writes and consume the real node's sequence numbers), and that a client
//! holds a credential of this cluster before it reads or writes anything.
//! So each side presents a certificate chained to the cluster CA; the
//! handshake checks the chain (and validity dates), and the hello is then
//! checked against the name in the certificate: a node's certificate is
//! valid for `node-N.causeway` ([`node_name`]) and only for it, a client's
//! for [`CLIENT_NAME`]. A client certificate cannot say hello as a peer, and
//! a node's certificate for node 2 cannot say hello as node 3.
//!
//! The files live in one directory (`[tls] dir` in the cluster config),
//! made by `causeway certs` or, for `causeway up` and `demo`, generated
//! into the data directory as a throw-away CA:
//! `ca.pem` (every process), `ca.key` (only where certificates are made),
//! `node-N.pem`/`node-N.key` (node N), `client.pem`/`client.key` (clients).
//!
//! Only TLS 1.3 is spoken, all of it by rustls: the handshake, the record
//! layer, key updates either way, session tickets and resumption, alerts
//! ([`stream::TlsStream`] drives a rustls connection over the socket with
//! tokio-rustls). No record is sealed or opened, and no key derived,
//! outside rustls.
//!
//! Plaintext is possible only with `[tls] plaintext = true`, and a node
//! started so says it loudly. It is not a fallback: a TLS node refuses a
//! plaintext hello (the handshake fails) and vice versa.
//!
//! What a client may do is not the certificate's business: the client
//! certificate is shared by every client of the cluster and proves only
//! membership. Per-client rights and revocation are access tokens'
//! ([`crate::auth`]): with `[auth] tokens`, a leaked client certificate
//! without a token opens no session, and a token is revoked by removing it
//! from the file, no re-issuing of certificates. Without `[auth]` every
//! holder of a client certificate may read and write.

use crate::config::Cluster;
use causeway_core::NodeId;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use stream::TlsStream;
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

mod stream;

/// The name a client certificate is valid for.
pub const CLIENT_NAME: &str = "client.causeway";

/// The name node `n`'s certificate is valid for, and the server name a
/// connection to node `n` verifies.
pub fn node_name(n: NodeId) -> String {
    format!("node-{}.causeway", n.0)
}

#[derive(Debug, Error)]
pub enum TlsError {
    #[error("TLS: cannot read {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("TLS: cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("TLS: {path} holds no certificate")]
    NoCertificate { path: PathBuf },
    #[error("TLS: {context}: {message}")]
    Setup { context: &'static str, message: String },
    #[error("TLS: cannot make certificates: {0}")]
    Generate(String),
    #[error("TLS handshake with node {node} at {addr} failed: {source}")]
    Handshake { node: u32, addr: std::net::SocketAddr, source: io::Error },
}

fn setup(context: &'static str) -> impl Fn(rustls::Error) -> TlsError {
    move |e| TlsError::Setup { context, message: e.to_string() }
}

// ---------------------------------------------------------------- streams

/// One connection, encrypted or not; the runtime reads and writes frames on
/// it without knowing which.
pub enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl Conn {
    /// The certificate the other side presented (a server sees the client's).
    fn peer_certificate(&self) -> Option<&CertificateDer<'static>> {
        match self {
            Conn::Tls(s) => s.peer_certificate(),
            Conn::Plain(_) => None,
        }
    }

    /// Whether the other side proved it is `name`: its certificate (already
    /// chained to the cluster CA by the handshake) is valid for that name.
    /// A plaintext connection proves nothing and is accepted as anyone —
    /// that is what `plaintext = true` means.
    pub fn proves(&self, name: &str) -> bool {
        if matches!(self, Conn::Plain(_)) {
            return true;
        }
        let Some(der) = self.peer_certificate() else { return false };
        let Ok(cert) = webpki::EndEntityCert::try_from(der) else { return false };
        let Ok(name) = ServerName::try_from(name) else { return false };
        cert.verify_is_valid_for_subject_name(&name).is_ok()
    }

    pub fn is_tls(&self) -> bool {
        !matches!(self, Conn::Plain(_))
    }

    /// Whether the TLS handshake resumed an earlier session (the identity
    /// checks above then see the certificate of the session's first
    /// handshake). False for plaintext.
    pub fn resumed(&self) -> bool {
        matches!(self, Conn::Tls(s) if s.resumed())
    }

    /// Replace this side's TLS sending key and ask the peer to replace its
    /// own (a TLS 1.3 KeyUpdate); it goes out with the next write or
    /// flush. rustls does this by itself well before a key's usage limit;
    /// this is for checking that both ends follow. Nothing on plaintext.
    pub fn update_keys(&mut self) -> io::Result<()> {
        match self {
            Conn::Tls(s) => s.update_keys(),
            Conn::Plain(_) => Ok(()),
        }
    }

    /// Whether the peer ended a TLS stream with `close_notify`, rather than
    /// by closing the connection (both read as the end of the stream).
    /// False for plaintext.
    pub fn close_notify_received(&self) -> bool {
        matches!(self, Conn::Tls(s) if s.close_notify_received())
    }
}

impl AsyncRead for Conn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
        }
    }
}

// ---------------------------------------------------------------- configs

/// ring's provider, AES-128-GCM preferred: TLS 1.3's mandatory suite, and
/// for the short records a request or reply makes, four fewer AES rounds
/// per block than the default AES-256-GCM.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    let mut p = rustls::crypto::ring::default_provider();
    let first = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256;
    p.cipher_suites.sort_by_key(|s| s.suite() != first.suite());
    Arc::new(p)
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| TlsError::Read { path: path.into(), message: e.to_string() })?
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Read { path: path.into(), message: e.to_string() })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { path: path.into() });
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| TlsError::Read { path: path.into(), message: e.to_string() })
}

fn roots(dir: &Path) -> Result<Arc<rustls::RootCertStore>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in read_certs(&dir.join("ca.pem"))? {
        roots.add(c).map_err(setup("the cluster CA"))?;
    }
    Ok(Arc::new(roots))
}

/// TLS 1.3 only. rustls's defaults otherwise: a client keeps session
/// tickets in memory (256 of them, shared by every connection made with
/// this configuration) and resumes sessions with them.
fn connector(dir: &Path, who: &str) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let certs = read_certs(&dir.join(format!("{who}.pem")))?;
    let key = read_key(&dir.join(format!("{who}.key")))?;
    let cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(setup("client configuration"))?
        .with_root_certificates(roots(dir)?)
        .with_client_auth_cert(certs, key)
        .map_err(setup("the client certificate and key"))?;
    Ok(Arc::new(cfg))
}

/// TLS 1.3 only, client certificates required. rustls's defaults
/// otherwise: two session tickets after each full handshake, backed by an
/// in-memory cache of 256 sessions (a resumed session keeps the client
/// certificate it was made with, so the identity checks hold on it).
fn acceptor(dir: &Path, node: NodeId) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let who = format!("node-{}", node.0);
    let certs = read_certs(&dir.join(format!("{who}.pem")))?;
    let key = read_key(&dir.join(format!("{who}.key")))?;
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots(dir)?, provider())
        .build()
        .map_err(|e| TlsError::Setup { context: "client verifier", message: e.to_string() })?;
    let cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(setup("server configuration"))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(setup("the node certificate and key"))?;
    Ok(Arc::new(cfg))
}

/// The TLS directory the config names, or `None` for plaintext.
fn dir_of(cluster: &Cluster) -> Option<&Path> {
    cluster.config.tls.dir.as_deref()
}

/// A client's side: connects to nodes. `None` inside means plaintext.
#[derive(Clone)]
pub struct ClientTls(Option<Arc<rustls::ClientConfig>>);

impl ClientTls {
    pub fn load(cluster: &Cluster) -> Result<Self, TlsError> {
        Ok(ClientTls(dir_of(cluster).map(|d| connector(d, "client")).transpose()?))
    }

    /// A client side that shows node `node`'s certificate: what a node's
    /// Redis front door uses to open sessions (a node holds no client
    /// certificate, and a node's credential is already trusted with more).
    pub fn for_node(cluster: &Cluster, node: NodeId) -> Result<Self, TlsError> {
        Ok(ClientTls(dir_of(cluster).map(|d| connector(d, &format!("node-{}", node.0))).transpose()?))
    }

    /// Wrap a fresh TCP connection to node `to`, verifying it is that node.
    pub async fn connect(&self, tcp: TcpStream, to: NodeId) -> io::Result<Conn> {
        connect(self.0.as_ref(), tcp, to).await
    }

    pub fn is_tls(&self) -> bool {
        self.0.is_some()
    }

    /// Connect to node `to` of `cluster` (TCP, then the handshake).
    pub async fn dial(&self, cluster: &Cluster, to: NodeId) -> io::Result<Conn> {
        let tcp = TcpStream::connect(cluster.addrs[to.idx()]).await?;
        self.connect(tcp, to).await
    }
}

/// A node's side: accepts clients and peers, connects to peers.
#[derive(Clone)]
pub struct NodeTls {
    acceptor: Option<Arc<rustls::ServerConfig>>,
    connector: Option<Arc<rustls::ClientConfig>>,
}

impl NodeTls {
    pub fn load(cluster: &Cluster, node: NodeId) -> Result<Self, TlsError> {
        match dir_of(cluster) {
            None => Ok(NodeTls::plaintext()),
            Some(d) => Ok(NodeTls {
                acceptor: Some(acceptor(d, node)?),
                connector: Some(connector(d, &format!("node-{}", node.0))?),
            }),
        }
    }

    /// No TLS on either side (a cluster with `[tls] plaintext = true`).
    pub fn plaintext() -> Self {
        NodeTls { acceptor: None, connector: None }
    }

    pub fn is_plaintext(&self) -> bool {
        self.acceptor.is_none()
    }

    /// The server side of a handshake on an accepted connection.
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<Conn> {
        match &self.acceptor {
            None => Ok(Conn::Plain(tcp)),
            Some(a) => Ok(Conn::Tls(Box::new(stream::accept(a.clone(), tcp).await?))),
        }
    }

    /// Connect to peer `to`, verifying it is that node.
    pub async fn connect(&self, tcp: TcpStream, to: NodeId) -> io::Result<Conn> {
        connect(self.connector.as_ref(), tcp, to).await
    }
}

async fn connect(c: Option<&Arc<rustls::ClientConfig>>, tcp: TcpStream, to: NodeId) -> io::Result<Conn> {
    let _ = tcp.set_nodelay(true);
    match c {
        None => Ok(Conn::Plain(tcp)),
        Some(c) => {
            let name =
                ServerName::try_from(node_name(to)).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            Ok(Conn::Tls(Box::new(stream::connect(c.clone(), name, tcp).await?)))
        }
    }
}

// ---------------------------------------------------------------- certificates

/// How long generated certificates are valid.
pub struct Validity {
    pub days: i64,
}

fn params(name: Option<&str>, common_name: &str, validity: &Validity) -> Result<rcgen::CertificateParams, TlsError> {
    let g = |e: rcgen::Error| TlsError::Generate(e.to_string());
    let mut p = rcgen::CertificateParams::new(name.map(|n| vec![n.to_string()]).unwrap_or_default()).map_err(g)?;
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(rcgen::DnType::CommonName, common_name);
    let now = time::OffsetDateTime::now_utc();
    // An hour of slack for clocks a little behind the issuer's.
    p.not_before = now - time::Duration::hours(1);
    p.not_after = now + time::Duration::days(validity.days);
    Ok(p)
}

fn write(path: &Path, text: &str, secret: bool) -> Result<(), TlsError> {
    let w = |source| TlsError::Write { path: path.into(), source };
    std::fs::write(path, text).map_err(w)?;
    if secret {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(w)?;
    }
    Ok(())
}

fn ca_params(cluster_id: &str, validity: &Validity) -> Result<rcgen::CertificateParams, TlsError> {
    let mut p = params(None, &format!("Causeway cluster CA ({cluster_id})"), validity)?;
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    p.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
    Ok(p)
}

/// A leaf certificate for `name`, signed by `issuer`, written as
/// `dir/file.pem` and `dir/file.key`.
fn leaf(
    issuer: &rcgen::Issuer<'_, rcgen::KeyPair>,
    dir: &Path,
    file: &str,
    name: &str,
    validity: &Validity,
) -> Result<(), TlsError> {
    let g = |e: rcgen::Error| TlsError::Generate(e.to_string());
    let key = rcgen::KeyPair::generate().map_err(g)?;
    let mut p = params(Some(name), name, validity)?;
    // Nodes are servers to their clients and clients of their peers.
    p.extended_key_usages =
        vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth, rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let cert = p.signed_by(&key, issuer).map_err(g)?;
    write(&dir.join(format!("{file}.pem")), &cert.pem(), false)?;
    write(&dir.join(format!("{file}.key")), &key.serialize_pem(), true)
}

/// Another client certificate from the CA in `ca_dir` (which `generate`
/// made for `cluster_id`), written with a copy of `ca.pem` to `out`: what a
/// new client machine needs, without the CA's key.
pub fn issue_client(ca_dir: &Path, cluster_id: &str, out: &Path, validity: &Validity) -> Result<(), TlsError> {
    let key_path = ca_dir.join("ca.key");
    let pem = std::fs::read_to_string(&key_path)
        .map_err(|e| TlsError::Read { path: key_path.clone(), message: e.to_string() })?;
    let key = rcgen::KeyPair::from_pem(&pem).map_err(|e| TlsError::Read { path: key_path, message: e.to_string() })?;
    let issuer = rcgen::Issuer::new(ca_params(cluster_id, validity)?, key);
    std::fs::create_dir_all(out).map_err(|source| TlsError::Write { path: out.into(), source })?;
    std::fs::copy(ca_dir.join("ca.pem"), out.join("ca.pem"))
        .map_err(|source| TlsError::Write { path: out.join("ca.pem"), source })?;
    leaf(&issuer, out, "client", CLIENT_NAME, validity)
}

/// Make a cluster CA and certificates for nodes `0..nodes` and one client
/// in `dir` (created if missing). Refuses to overwrite an existing CA: a new
/// CA would lock every node made under the old one out of the cluster.
pub fn generate(dir: &Path, cluster_id: &str, nodes: usize, validity: &Validity) -> Result<(), TlsError> {
    let g = |e: rcgen::Error| TlsError::Generate(e.to_string());
    if dir.join("ca.pem").exists() {
        return Err(TlsError::Generate(format!(
            "{} already holds a CA; remove the directory to start over (every certificate under it stops working)",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|source| TlsError::Write { path: dir.into(), source })?;
    let ca_key = rcgen::KeyPair::generate().map_err(g)?;
    let ca_params = ca_params(cluster_id, validity)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(g)?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    for n in 0..nodes {
        leaf(&issuer, dir, &format!("node-{n}"), &node_name(NodeId(n as u32)), validity)?;
    }
    leaf(&issuer, dir, "client", CLIENT_NAME, validity)?;
    write(&dir.join("ca.pem"), &ca_cert.pem(), false)?;
    write(&dir.join("ca.key"), &issuer.key().serialize_pem(), true)
}
