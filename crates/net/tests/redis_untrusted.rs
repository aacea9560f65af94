//! The Redis front door against a stranger, over real TCP against a real
//! embedded cluster: a request no Redis would read as a command, and
//! connections that never authenticate, leave the node serving everyone
//! else, with nothing buffered for what they announce.

mod common;
use causeway_core::NodeId;
use causeway_net::auth::{Role, TokenFile};
use causeway_net::config::Limits;
use causeway_net::embedded::{Embedded, EmbeddedSpec, Ports};
use causeway_net::{Fsync, redis::request};
use causeway_protocols::ProtocolName;
use common::{connect, encode, free_ports};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A one-node cluster with a front door (and `[auth]` with one
/// read-write token named `app`, whose secret is returned, if `auth`).
fn start(name: &str, auth: bool, limits: Limits) -> (Embedded, u16, Option<String>, PathBuf) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("causeway-untrusted-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (tokens, secret) = if auth {
        let path = dir.join("tokens.toml");
        let mut f = TokenFile::read(&path).unwrap();
        let secret = f.add(&path, "app", Role::ReadWrite).unwrap();
        f.write(&path).unwrap();
        (Some(path), Some(secret))
    } else {
        (None, None)
    };
    let base = free_ports(1);
    let spec = EmbeddedSpec {
        protocol: ProtocolName::Eventual,
        dcs: 1,
        partitions: 1,
        rtt_ms: Vec::new(),
        data_dir: dir.join("data"),
        fsync: Fsync::Never,
        params: toml::Table::new(),
        ports: Ports { metrics: None, redis: Some(base) },
        tokens,
        plaintext: false,
        services: Vec::new(),
        replication: causeway_core::Replication::Full,
        replicas: 1,
        remote_replica: Default::default(),
    };
    let c = Embedded::start_with_limits(spec, limits, &tokio::runtime::Handle::current()).unwrap();
    (c, base, secret, dir)
}

/// Everything the node sends until it closes the connection (within 10 s).
async fn until_closed(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let r = tokio::time::timeout(Duration::from_secs(10), async {
        let mut b = [0u8; 4096];
        loop {
            match s.read(&mut b).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&b[..n]),
            }
        }
    })
    .await;
    assert!(r.is_ok(), "the node kept the connection open; it sent {:?}", String::from_utf8_lossy(&got));
    String::from_utf8_lossy(&got).into_owned()
}

/// One reply line (a bulk string's value for `$`), the connection kept.
async fn line(s: &mut TcpStream) -> String {
    let mut l = Vec::new();
    let mut b = [0u8; 1];
    while !l.ends_with(b"\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut b)).await.expect("a reply").unwrap();
        assert_eq!(n, 1, "closed after {:?}", String::from_utf8_lossy(&l));
        l.push(b[0]);
    }
    let l = String::from_utf8(l).unwrap().trim_end().to_string();
    match l.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
        Some(n) => {
            let mut v = vec![0u8; n + 2];
            s.read_exact(&mut v).await.unwrap();
            String::from_utf8_lossy(&v[..n]).into_owned()
        }
        None => l,
    }
}

async fn cmd(s: &mut TcpStream, args: &[&str]) -> String {
    let a: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    s.write_all(&encode(&a)).await.unwrap();
    line(s).await
}

fn refused(c: &Embedded, reason: &'static str) -> u64 {
    c.node(NodeId(0)).unwrap().metrics.refused_for(reason)
}

/// 20 000 arrays each holding the next, then a PING: the request that
/// overflowed the stack of a recursive decoder and took every node of the
/// process down. It is refused at its second `*` (before and after AUTH),
/// and the node serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_arrays_are_refused_and_the_node_serves_on() {
    let mut payload = b"*1\r\n".repeat(20_000);
    payload.extend_from_slice(b"$4\r\nPING\r\n");
    for auth in [false, true] {
        let (c, port, secret, dir) = start("nested", auth, Limits::default());
        let mut s = connect(port).await;
        // The whole payload may not be read before the refusal and close.
        let _ = s.write_all(&payload).await;
        let got = until_closed(&mut s).await;
        assert!(got.starts_with("-ERR Protocol error: expected '$', got '*'"), "{got:?}");
        assert_eq!(refused(&c, "redis_nested"), 1);
        // After AUTH too, and the requests before it are answered first.
        let mut s = connect(port).await;
        if let Some(secret) = &secret {
            assert_eq!(cmd(&mut s, &["AUTH", "app", secret]).await, "+OK");
        }
        let mut pipelined = encode(&[b"SET", b"k", b"v"]);
        pipelined.extend_from_slice(&payload);
        let _ = s.write_all(&pipelined).await;
        let got = until_closed(&mut s).await;
        assert!(got.starts_with("+OK\r\n-ERR Protocol error: expected '$', got '*'"), "{got:?}");
        // The node still serves, and applied what came before.
        let mut s = connect(port).await;
        if let Some(secret) = &secret {
            assert_eq!(cmd(&mut s, &["AUTH", secret]).await, "+OK");
        }
        assert_eq!(cmd(&mut s, &["GET", "k"]).await, "v");
        assert_eq!(cmd(&mut s, &["PING"]).await, "+PONG");
        tokio::task::spawn_blocking(move || c.stop().unwrap()).await.unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Forty connections that never authenticate, each announcing a 15 MB
/// value: each is refused on the length line, before a byte of the value
/// is sent, so the node never buffers for them. Before AUTH a request
/// holds at most 10 arguments of 16 KiB; `AUTH` pipelined with a large
/// `SET` still works, the `SET` being read under the caps AUTH lifted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_connections_are_capped_as_redis_caps_them() {
    let (c, port, secret, dir) = start("unauth", true, Limits::default());
    let secret = secret.unwrap();
    let mut strangers = Vec::new();
    for _ in 0..40 {
        let mut s = connect(port).await;
        s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$15000000\r\n").await.unwrap();
        strangers.push(s);
    }
    for s in &mut strangers {
        let got = until_closed(s).await;
        assert!(got.starts_with("-ERR Protocol error: unauthenticated bulk length (15000000 bytes;"), "{got:?}");
        assert!(got.contains(&request::UNAUTHENTICATED_MAX_ARG_BYTES.to_string()), "names the limit: {got:?}");
    }
    assert_eq!(refused(&c, "redis_unauthenticated_limit"), 40);
    let mut s = connect(port).await;
    s.write_all(&encode(&[&b"MGET"[..]; 11])).await.unwrap();
    let got = until_closed(&mut s).await;
    assert!(got.starts_with("-ERR Protocol error: unauthenticated multibulk length (11 arguments;"), "{got:?}");
    // Within the caps, a stranger is only told to authenticate.
    let mut s = connect(port).await;
    let small = vec![b'v'; request::UNAUTHENTICATED_MAX_ARG_BYTES];
    s.write_all(&encode(&[b"SET", b"k", &small])).await.unwrap();
    assert!(line(&mut s).await.starts_with("-NOAUTH"));
    // AUTH, then at once a value beyond the unauthenticated cap.
    let big = vec![b'v'; 1 << 20];
    let mut pipelined = encode(&[b"AUTH", secret.as_bytes()]);
    pipelined.extend(encode(&[b"SET", b"big", &big]));
    pipelined.extend(encode(&[b"STRLEN", b"big"]));
    s.write_all(&pipelined).await.unwrap();
    assert_eq!(line(&mut s).await, "+OK");
    assert_eq!(line(&mut s).await, "+OK");
    assert!(line(&mut s).await.starts_with("-ERR unknown command 'STRLEN'"));
    assert_eq!(cmd(&mut s, &["GET", "big"]).await.len(), 1 << 20);
    // Every stranger's connection is gone.
    let clients = || c.node(NodeId(0)).unwrap().metrics.redis_clients.get();
    let t = Instant::now();
    while clients() != 1 {
        assert!(t.elapsed() < Duration::from_secs(10), "{} front-door connections open, 1 expected", clients());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::task::spawn_blocking(move || c.stop().unwrap()).await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `AUTH name secret`: the name must be the secret's token's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_with_a_name_checks_the_name() {
    let (c, port, secret, dir) = start("authname", true, Limits::default());
    let secret = secret.unwrap();
    let mut s = connect(port).await;
    for name in ["default", "someone-else", "APP", ""] {
        let got = cmd(&mut s, &["AUTH", name, &secret]).await;
        assert_eq!(got, "-WRONGPASS invalid username-password pair or user is disabled.", "AUTH {name:?}");
        assert!(cmd(&mut s, &["GET", "k"]).await.starts_with("-NOAUTH"), "still not authenticated");
    }
    assert_eq!(cmd(&mut s, &["AUTH", "app", &secret]).await, "+OK");
    assert_eq!(cmd(&mut s, &["SET", "k", "v"]).await, "+OK");
    // A failed AUTH later keeps the grant the connection has, as in Redis.
    assert!(cmd(&mut s, &["AUTH", "other", &secret]).await.starts_with("-WRONGPASS"));
    assert_eq!(cmd(&mut s, &["GET", "k"]).await, "v");
    assert!(refused(&c, "bad_token") >= 5);
    tokio::task::spawn_blocking(move || c.stop().unwrap()).await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A connection that has not said hello within `hello_timeout_ms` is
/// closed, as on the node's own port: with `[auth]`, one that has not
/// authenticated (however much it says); without, one that has sent no
/// request. One that has said hello stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_without_hello_is_closed_at_the_deadline() {
    let limits = Limits { hello_timeout_ms: 300, ..Limits::default() };
    for auth in [true, false] {
        let (c, port, secret, dir) = start("hello", auth, limits.clone());
        let mut silent = connect(port).await;
        let mut talking = connect(port).await;
        let mut hello = connect(port).await;
        match &secret {
            Some(secret) => assert_eq!(cmd(&mut hello, &["AUTH", secret]).await, "+OK"),
            None => assert_eq!(cmd(&mut hello, &["PING"]).await, "+PONG"),
        }
        // A partial request is not a hello either.
        talking.write_all(b"*2\r\n$3\r\nGET\r\n").await.unwrap();
        if auth {
            // Talking without authenticating does not keep it open.
            let mut noauth = connect(port).await;
            let t = Instant::now();
            let closed = loop {
                if t.elapsed() > Duration::from_secs(10) {
                    break false;
                }
                if noauth.write_all(&encode(&[b"PING"])).await.is_err() {
                    break true;
                }
                let mut b = [0u8; 64];
                match noauth.read(&mut b).await {
                    Ok(0) | Err(_) => break true,
                    Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            };
            assert!(closed, "a connection answered NOAUTH for 10 s stayed open");
        }
        assert_eq!(until_closed(&mut silent).await, "", "closed without a word, as the TLS port does");
        assert_eq!(until_closed(&mut talking).await, "");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(cmd(&mut hello, &["PING"]).await, "+PONG", "a connection that said hello stays");
        assert!(refused(&c, "hello_timeout") >= 2);
        tokio::task::spawn_blocking(move || c.stop().unwrap()).await.unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
