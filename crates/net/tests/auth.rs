//! Access tokens from outside: every door (client protocol, Redis front
//! door, HTTP) refuses a missing, unknown, revoked or too-weak token with a
//! clear error and a metric, and nothing a refused party sent reaches the
//! store. Also: a recorded TLS session replayed byte for byte gets nowhere.

mod common;
use bytes::Bytes;
use causeway_core::{DcId, NodeId};
use causeway_net::auth::{Role, TokenFile};
use causeway_net::embedded::{Embedded, EmbeddedSpec, Ports};
use causeway_net::frame::WireError;
use causeway_net::{ClientError, Fsync, Session};
use causeway_protocols::ProtocolName;
use causeway_protocols::eventual::Eventual;
use common::free_ports;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Secrets {
    ro: String,
    rw: String,
    admin: String,
}

fn make_tokens(path: &Path) -> Secrets {
    let mut f = TokenFile::read(path).unwrap();
    let s = Secrets {
        ro: f.add(path, "reader", Role::ReadOnly).unwrap(),
        rw: f.add(path, "writer", Role::ReadWrite).unwrap(),
        admin: f.add(path, "ops", Role::Admin).unwrap(),
    };
    f.write(path).unwrap();
    s
}

/// Rewrite the file without `name`, moving its modification time clearly
/// forward (nodes notice a change by it).
fn revoke(path: &Path, name: &str) {
    let mut f = TokenFile::read(path).unwrap();
    f.revoke(path, name).unwrap();
    f.write(path).unwrap();
    let later = SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options().write(true).open(path).unwrap().set_modified(later).unwrap();
}

fn session(c: &Embedded, token: Option<&str>) -> Session<Eventual> {
    let mut s = Session::<Eventual>::new(c.cluster.clone(), DcId(0), rand::random()).unwrap();
    s.timeout = Duration::from_secs(5);
    s.set_token(token.map(str::to_string));
    s
}

fn refused(e: ClientError) -> WireError {
    match e {
        ClientError::Refused { error, .. } => error,
        other => panic!("expected a refusal, got {other}"),
    }
}

async fn wait_for(cond: impl Fn() -> bool, what: &str) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(10), "not within 10 s: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn http_get(addr: std::net::SocketAddr, path: &str, bearer: Option<&str>) -> u16 {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let auth = bearer.map(|t| format!("authorization: Bearer {t}\r\n")).unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nhost: x\r\n{auth}connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    body.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// One RESP request, and the first line of its answer.
async fn redis(s: &mut TcpStream, args: &[&str]) -> String {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(out.as_bytes()).await.unwrap();
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        assert_eq!(s.read(&mut b).await.unwrap(), 1, "the front door closed the connection");
        line.push(b[0]);
    }
    let mut line = String::from_utf8(line).unwrap().trim_end().to_string();
    if let Some(n) = line.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
        let mut v = vec![0u8; n + 2];
        s.read_exact(&mut v).await.unwrap();
        line = String::from_utf8_lossy(&v[..n]).into_owned();
    }
    line
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_door_holds_tokens_to_their_roles() {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-auth-it-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let tokens = dir.join("tokens.toml");
    let t = make_tokens(&tokens);
    let base = free_ports(4);
    let spec = EmbeddedSpec {
        protocol: ProtocolName::Eventual,
        dcs: 1,
        partitions: 2,
        rtt_ms: Vec::new(),
        data_dir: dir.join("data"),
        fsync: Fsync::Never,
        params: toml::Table::new(),
        ports: Ports { metrics: Some(base), redis: Some(base + 2) },
        tokens: Some(tokens.clone()),
        plaintext: false,
        services: Vec::new(),
        replication: causeway_core::Replication::Full,
        replicas: 1,
        remote_replica: Default::default(),
    };
    let c = Embedded::start(spec, &tokio::runtime::Handle::current()).unwrap();
    let m = |reason: &'static str| (0..2).map(|n| c.node(NodeId(n)).unwrap().metrics.refused_for(reason)).sum::<u64>();
    let k = |s: &str| Bytes::copy_from_slice(s.as_bytes());

    // The client protocol. No token, an unknown one: refused at the hello.
    let e = session(&c, None).put(k("a"), k("1")).await.unwrap_err();
    assert_eq!(refused(e), WireError::TokenRequired);
    assert!(m("no_token") >= 1);
    let e = session(&c, Some("cwt_00112233")).get(k("a")).await.unwrap_err();
    assert_eq!(refused(e), WireError::BadToken);
    assert!(m("bad_token") >= 1);
    // Read-write reads and writes; read-only reads and is refused writing.
    let mut rw = session(&c, Some(&t.rw));
    rw.put(k("a"), k("1")).await.unwrap();
    let mut ro = session(&c, Some(&t.ro));
    assert_eq!(ro.get(k("a")).await.unwrap(), Some(k("1")));
    let e = ro.put(k("a"), k("evil")).await.unwrap_err();
    assert!(matches!(refused(e), WireError::Forbidden { ref role, .. } if role == "read-only"));
    wait_for(|| m("forbidden") >= 1, "the forbidden write counted").await;
    let mut ro2 = session(&c, Some(&t.ro));
    let e = ro2.del(k("a")).await.unwrap_err();
    assert!(matches!(refused(e), WireError::Forbidden { .. }), "a delete is a write");
    assert_eq!(rw.get(k("a")).await.unwrap(), Some(k("1")), "nothing the read-only token sent was applied");

    // The Redis front door: NOAUTH first, WRONGPASS for an unknown token,
    // NOPERM for a read-only one's writes (direct or queued), nothing applied.
    let mut r = TcpStream::connect(("127.0.0.1", base + 2)).await.unwrap();
    assert!(redis(&mut r, &["GET", "a"]).await.starts_with("-NOAUTH"));
    assert!(redis(&mut r, &["AUTH", "cwt_nope"]).await.starts_with("-WRONGPASS"));
    assert_eq!(redis(&mut r, &["AUTH", &t.ro]).await, "+OK");
    assert_eq!(redis(&mut r, &["GET", "a"]).await, "1");
    assert!(redis(&mut r, &["SET", "a", "evil"]).await.starts_with("-NOPERM"));
    assert!(redis(&mut r, &["DEL", "a"]).await.starts_with("-NOPERM"));
    assert_eq!(redis(&mut r, &["MULTI"]).await, "+OK");
    assert!(redis(&mut r, &["SET", "a", "evil"]).await.starts_with("-NOPERM"));
    assert!(redis(&mut r, &["EXEC"]).await.starts_with("-EXECABORT"));
    // `AUTH name token` (Redis 6), read-write: writes go through.
    assert_eq!(redis(&mut r, &["AUTH", "writer", &t.rw]).await, "+OK");
    assert_eq!(redis(&mut r, &["SET", "b", "2"]).await, "+OK");
    assert_eq!(rw.get(k("a")).await.unwrap(), Some(k("1")));
    assert_eq!(rw.get(k("b")).await.unwrap(), Some(k("2")));

    // HTTP: health is open; metrics and the dashboard need an admin token.
    let http = c.cluster.metrics_addrs[0];
    assert_eq!(http_get(http, "/healthz", None).await, 200);
    assert_eq!(http_get(http, "/metrics", None).await, 401);
    assert_eq!(http_get(http, "/metrics", Some(&t.rw)).await, 403);
    assert_eq!(http_get(http, "/metrics", Some(&t.admin)).await, 200);
    assert_eq!(http_get(http, "/api/cluster", None).await, 401);
    assert_eq!(http_get(http, &format!("/api/cluster?token={}", t.admin), None).await, 200);

    // Revocation takes effect on the next connection, no restart.
    revoke(&tokens, "writer");
    let e = session(&c, Some(&t.rw)).get(k("a")).await.unwrap_err();
    assert_eq!(refused(e), WireError::BadToken);
    let mut r = TcpStream::connect(("127.0.0.1", base + 2)).await.unwrap();
    assert!(redis(&mut r, &["AUTH", &t.rw]).await.starts_with("-WRONGPASS"));
    assert_eq!(http_get(http, "/metrics", Some(&t.admin)).await, 200, "other tokens still hold");
    c.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A man in the middle records a whole client session (TLS handshake,
/// hello with its token, a write) and plays the client's bytes again to the
/// node. TLS 1.3 binds the session to fresh randomness from both sides, so
/// the replay fails the handshake: nothing in it is decrypted or applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_session_gets_nowhere() {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-replay-it-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let tokens = dir.join("tokens.toml");
    let t = make_tokens(&tokens);
    let mut spec = EmbeddedSpec::default_for(ProtocolName::Eventual, dir.join("data"));
    (spec.dcs, spec.partitions, spec.rtt_ms, spec.fsync) = (1, 1, Vec::new(), Fsync::Never);
    spec.tokens = Some(tokens);
    let c = Embedded::start(spec, &tokio::runtime::Handle::current()).unwrap();
    let node = c.cluster.addrs[0];

    // The recording proxy: the client is given its address for node 0.
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut via = (*c.cluster).clone();
    via.addrs[0] = proxy.local_addr().unwrap();
    let recorded = Arc::new(Mutex::new(Vec::<u8>::new()));
    let rec = recorded.clone();
    tokio::spawn(async move {
        let (mut client, _) = proxy.accept().await.unwrap();
        let mut server = TcpStream::connect(node).await.unwrap();
        let (mut cr, mut cw) = client.split();
        let (mut sr, mut sw) = server.split();
        let up = async {
            let mut b = [0u8; 4096];
            loop {
                let n = cr.read(&mut b).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                rec.lock().unwrap().extend_from_slice(&b[..n]);
                if sw.write_all(&b[..n]).await.is_err() {
                    break;
                }
            }
        };
        let down = tokio::io::copy(&mut sr, &mut cw);
        tokio::select! { _ = up => {}, _ = down => {} }
    });
    let mut s = Session::<Eventual>::new(Arc::new(via), DcId(0), 7).unwrap();
    s.set_token(Some(t.rw.clone()));
    s.timeout = Duration::from_secs(5);
    s.put(Bytes::from_static(b"r"), Bytes::from_static(b"1")).await.unwrap();
    drop(s);
    // The rightful owner writes 2 afterwards; a replay that worked would
    // bring 1 back.
    let mut rw = session(&c, Some(&t.rw));
    rw.put(Bytes::from_static(b"r"), Bytes::from_static(b"2")).await.unwrap();
    let bytes = recorded.lock().unwrap().clone();
    assert!(bytes.len() > 200, "recorded a handshake and more ({} bytes)", bytes.len());

    let tls_refusals = || c.node(NodeId(0)).unwrap().metrics.refused_for("tls");
    let before = tls_refusals();
    let mut replay = TcpStream::connect(node).await.unwrap();
    let _ = replay.write_all(&bytes).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), replay.read_to_end(&mut answer)).await;
    wait_for(|| tls_refusals() > before, "the replayed handshake refused and counted").await;
    assert_eq!(rw.get(Bytes::from_static(b"r")).await.unwrap(), Some(Bytes::from_static(b"2")), "nothing replayed");
    c.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
