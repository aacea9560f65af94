//! The Redis-protocol front door over real TCP, against a real embedded
//! cluster: what `redis-cli` and Redis client libraries send, byte for byte.

mod common;
use bytes::{Bytes, BytesMut};
use causeway_net::Fsync;
use causeway_net::embedded::{Embedded, EmbeddedSpec, Ports};
use causeway_protocols::ProtocolName;
use common::{encode, free_ports};
use redis_protocol::resp2::decode::decode_bytes_mut;
use redis_protocol::resp2::types::BytesFrame as Frame;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A base port with `n` free ports after it (bound and released: a small
/// race with other processes, retried by the caller if a bind fails).
fn start(p: ProtocolName, name: &str) -> (Embedded, u16) {
    start_with_limits(p, name, causeway_net::config::Limits::default())
}

fn start_with_limits(p: ProtocolName, name: &str, limits: causeway_net::config::Limits) -> (Embedded, u16) {
    let base = free_ports(4);
    let spec = EmbeddedSpec { ports: Ports { metrics: None, redis: Some(base) }, ..spec(p, name) };
    let cluster = Embedded::start_with_limits(spec, limits, &tokio::runtime::Handle::current()).unwrap();
    (cluster, base)
}

/// A 2-DC × 2-partition cluster's spec in a fresh directory, no front door.
fn spec(p: ProtocolName, name: &str) -> EmbeddedSpec {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("causeway-redis-{name}-{p}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    EmbeddedSpec {
        protocol: p,
        dcs: 2,
        partitions: 2,
        rtt_ms: vec![vec![0.0, 10.0], vec![10.0, 0.0]],
        data_dir: dir,
        fsync: Fsync::Never,
        params: toml::Table::new(),
        ports: Ports::default(),
        tokens: None,
        plaintext: false,
        services: Vec::new(),
        replication: causeway_core::Replication::Full,
        replicas: 1,
        remote_replica: Default::default(),
    }
}

struct Redis {
    s: TcpStream,
    buf: BytesMut,
}

impl Redis {
    async fn connect(port: u16) -> Redis {
        Redis { s: common::connect(port).await, buf: BytesMut::new() }
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).await.unwrap();
    }

    async fn read(&mut self) -> Option<Frame> {
        loop {
            if let Some((f, _, _)) = decode_bytes_mut(&mut self.buf).unwrap() {
                return Some(f);
            }
            let n = tokio::time::timeout(Duration::from_secs(15), self.s.read_buf(&mut self.buf))
                .await
                .expect("a reply within 15 s")
                .unwrap();
            if n == 0 {
                return None;
            }
        }
    }

    async fn cmd(&mut self, args: &[&str]) -> Frame {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.send_raw(&encode(&a)).await;
        self.read().await.expect("the connection stays open")
    }
}

fn ok() -> Frame {
    Frame::SimpleString(Bytes::from_static(b"OK"))
}

fn bulk(s: &str) -> Frame {
    Frame::BulkString(Bytes::copy_from_slice(s.as_bytes()))
}

fn is_err(f: &Frame, starts: &str) -> bool {
    matches!(f, Frame::Error(e) if e.starts_with(starts))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_protocol_answers_redis_clients() {
    for &p in ProtocolName::ALL {
        let (cluster, base) = start(p, "all");
        let mut r = Redis::connect(base).await;
        assert_eq!(r.cmd(&["PING"]).await, Frame::SimpleString(Bytes::from_static(b"PONG")), "{p}");
        assert_eq!(r.cmd(&["set", "photo", "p1"]).await, ok(), "{p}");
        assert_eq!(r.cmd(&["GET", "photo"]).await, bulk("p1"), "{p}");
        assert_eq!(r.cmd(&["GET", "nothing"]).await, Frame::Null, "{p}");
        assert_eq!(r.cmd(&["SET", "album", "a1"]).await, ok(), "{p}");
        // MGET: repeats allowed, one snapshot where the protocol has ROTs.
        assert_eq!(
            r.cmd(&["MGET", "photo", "album", "nothing", "photo"]).await,
            Frame::Array(vec![bulk("p1"), bulk("a1"), Frame::Null, bulk("p1")]),
            "{p}"
        );
        assert_eq!(r.cmd(&["EXISTS", "photo", "nothing", "album"]).await, Frame::Integer(2), "{p}");
        assert_eq!(r.cmd(&["DEL", "photo", "nothing"]).await, Frame::Integer(1), "{p}");
        assert_eq!(r.cmd(&["GET", "photo"]).await, Frame::Null, "{p}: read its own delete");
        assert_eq!(r.cmd(&["EXISTS", "photo"]).await, Frame::Integer(0), "{p}");
        // Typed refusals that keep the connection.
        assert!(is_err(&r.cmd(&["GET"]).await, "ERR wrong number of arguments"), "{p}");
        assert!(is_err(&r.cmd(&["SET", "k", "v", "EX", "10"]).await, "ERR SET options"), "{p}");
        assert!(is_err(&r.cmd(&["FLUSHALL"]).await, "ERR unknown command 'FLUSHALL'"), "{p}");
        assert!(is_err(&r.cmd(&["SELECT", "3"]).await, "ERR DB index"), "{p}");
        let info = r.cmd(&["INFO"]).await;
        let Frame::BulkString(info) = info else { panic!("{p}: INFO answered {info:?}") };
        assert!(String::from_utf8_lossy(&info).contains(&format!("causeway_protocol:{p}")), "{p}");
        // MSET is atomic or refused, never silently one SET per key.
        let has_wot = causeway_protocols::with_protocol!(p, P =>
            <P as causeway_core::Protocol>::OPS.contains(&causeway_core::OpKind::Wot));
        let m = r.cmd(&["MSET", "x", "1", "y", "2"]).await;
        if has_wot {
            assert_eq!(m, ok(), "{p}");
            assert_eq!(r.cmd(&["MGET", "x", "y"]).await, Frame::Array(vec![bulk("1"), bulk("2")]), "{p}");
        } else {
            assert!(is_err(&m, "ERR MSET is a write-only transaction"), "{p}: {m:?}");
            assert_eq!(r.cmd(&["MGET", "x", "y"]).await, Frame::Array(vec![Frame::Null, Frame::Null]), "{p}");
        }
        // The album written after the photo's delete becomes visible in DC 1
        // (node 2 is DC 1's first partition) only after that delete.
        assert_eq!(r.cmd(&["SET", "album", "a2"]).await, ok(), "{p}");
        let mut far = Redis::connect(base + 2).await;
        let start = Instant::now();
        while far.cmd(&["GET", "album"]).await != bulk("a2") {
            assert!(start.elapsed() < Duration::from_secs(10), "{p}: album never reached DC 1");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if causeway_protocols::with_protocol!(p, P => <P as causeway_core::Protocol>::CAUSAL) {
            assert_eq!(far.cmd(&["GET", "photo"]).await, Frame::Null, "{p}: the delete came before the album");
        }
        assert_eq!(r.cmd(&["QUIT"]).await, ok(), "{p}");
        assert_eq!(r.read().await, None, "{p}: QUIT closes");
        cluster.stop().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_and_inline_requests_are_answered_in_order() {
    let (cluster, base) = start(ProtocolName::CausalSpartanX, "pipe");
    let mut r = Redis::connect(base + 1).await;
    // 100 SETs and a GET of each in one write, as redis-benchmark -P sends.
    let mut batch = Vec::new();
    for i in 0..100 {
        batch.extend(encode(&[b"SET", format!("k{i}").as_bytes(), format!("v{i}").as_bytes()]));
    }
    for i in 0..100 {
        batch.extend(encode(&[b"GET", format!("k{i}").as_bytes()]));
    }
    r.send_raw(&batch).await;
    for i in 0..100 {
        assert_eq!(r.read().await, Some(ok()), "SET {i}");
    }
    for i in 0..100 {
        assert_eq!(r.read().await, Some(bulk(&format!("v{i}"))), "GET {i}");
    }
    // The pipelined GETs ran as read-only transactions (one per batch of
    // up to 256), not as 100 single reads.
    let requests = |kind: &str| -> u64 {
        let needle = format!("causeway_requests_total{{kind=\"{kind}\"}} ");
        (0..4)
            .filter_map(|n| cluster.node(causeway_core::NodeId(n)))
            .flat_map(|h| h.metrics.render().lines().map(str::to_string).collect::<Vec<_>>())
            .filter_map(|l| l.strip_prefix(&needle).and_then(|v| v.parse::<u64>().ok()))
            .sum()
    };
    assert_eq!(requests("get_req"), 0, "no single GETs for a pipelined batch");
    assert!(requests("rot_req") >= 1);
    // Inline commands, as typed into telnet.
    r.send_raw(b"PING\r\nECHO  hello \r\nGET k7\r\n").await;
    assert_eq!(r.read().await, Some(Frame::SimpleString(Bytes::from_static(b"PONG"))));
    assert_eq!(r.read().await, Some(bulk("hello")));
    assert_eq!(r.read().await, Some(bulk("v7")));
    // Not an array of bulk strings, or not RESP: a protocol error, then
    // the connection closes (as Redis does).
    for bad in [&b"*1\r\n:5\r\n"[..], b"*x\r\n"] {
        r.send_raw(bad).await;
        assert!(is_err(&r.read().await.unwrap(), "ERR Protocol error"));
        assert_eq!(r.read().await, None);
        r = Redis::connect(base + 1).await;
    }
    // A request larger than max_frame_bytes is refused before it is whole.
    let mut r = Redis::connect(base + 1).await;
    let max = cluster.cluster.config.limits.max_frame_bytes;
    r.send_raw(format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", max * 2).as_bytes()).await;
    let chunk = vec![b'x'; 1 << 20];
    let mut sent = 0;
    while sent < max * 2 && r.s.write_all(&chunk).await.is_ok() {
        sent += chunk.len();
    }
    // The refusal is sent before the close; a reset may overtake it, so
    // the metric is the proof, and any reply seen must be the refusal.
    let mut tail = BytesMut::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while let Ok(n) = r.s.read_buf(&mut tail).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
    let tail = String::from_utf8_lossy(&tail).into_owned();
    assert!(tail.is_empty() || tail.starts_with("-ERR request larger than max_frame_bytes"), "{tail}");
    let node = cluster.node(causeway_core::NodeId(1)).unwrap();
    assert_eq!(node.metrics.refused_for("redis_request_too_large"), 1);
    // The node still serves.
    let mut r = Redis::connect(base + 1).await;
    assert_eq!(r.cmd(&["GET", "k99"]).await, bulk("v99"));
    cluster.stop().unwrap();
}

/// Pipelined SETs batched into one write-only transaction, GETs into one
/// read, where Eventual has both: still answered in order, still reading
/// the session's own writes, and a later SET of the same key wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_batches_keep_the_session_order() {
    let (cluster, base) = start(ProtocolName::Eventual, "batch");
    let mut r = Redis::connect(base).await;
    let mut batch = Vec::new();
    for i in 0..300 {
        batch.extend(encode(&[b"SET", format!("k{}", i % 50).as_bytes(), format!("v{i}").as_bytes()]));
    }
    batch.extend(encode(&[b"PING"]));
    for i in 0..50 {
        batch.extend(encode(&[b"GET", format!("k{i}").as_bytes()]));
    }
    r.send_raw(&batch).await;
    for i in 0..300 {
        assert_eq!(r.read().await, Some(ok()), "SET {i}");
    }
    assert_eq!(r.read().await, Some(Frame::SimpleString(Bytes::from_static(b"PONG"))));
    for i in 0..50 {
        // The last of the 300 SETs to k{i} wrote v{250 + i}.
        assert_eq!(r.read().await, Some(bulk(&format!("v{}", 250 + i))), "GET k{i}");
    }
    cluster.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_exec_is_one_transaction_where_the_protocol_has_one() {
    // Eventual offers every transaction shape (trivially); COPS has none.
    let (cluster, base) = start(ProtocolName::Eventual, "multi");
    let mut r = Redis::connect(base).await;
    assert_eq!(r.cmd(&["MULTI"]).await, ok());
    let queued = Frame::SimpleString(Bytes::from_static(b"QUEUED"));
    assert_eq!(r.cmd(&["SET", "a", "1"]).await, queued);
    assert_eq!(r.cmd(&["MSET", "b", "2", "a", "3"]).await, queued);
    assert_eq!(r.cmd(&["EXEC"]).await, Frame::Array(vec![ok(), ok()]));
    assert_eq!(r.cmd(&["MGET", "a", "b"]).await, Frame::Array(vec![bulk("3"), bulk("2")]), "last write wins");
    // Reads then writes: one read-write transaction.
    r.cmd(&["MULTI"]).await;
    r.cmd(&["GET", "a"]).await;
    r.cmd(&["MGET", "b", "zz"]).await;
    r.cmd(&["SET", "c", "4"]).await;
    assert_eq!(r.cmd(&["EXEC"]).await, Frame::Array(vec![bulk("3"), Frame::Array(vec![bulk("2"), Frame::Null]), ok()]));
    // A read after a write in one block would need to see it: refused.
    r.cmd(&["MULTI"]).await;
    r.cmd(&["SET", "d", "5"]).await;
    r.cmd(&["GET", "d"]).await;
    assert!(is_err(&r.cmd(&["EXEC"]).await, "EXECABORT"));
    assert_eq!(r.cmd(&["GET", "d"]).await, Frame::Null, "nothing of an aborted block applied");
    // A command that cannot be queued aborts the block, as in Redis.
    r.cmd(&["MULTI"]).await;
    assert!(is_err(&r.cmd(&["DEL", "a"]).await, "ERR 'del' cannot be queued"));
    r.cmd(&["SET", "e", "6"]).await;
    assert!(is_err(&r.cmd(&["EXEC"]).await, "EXECABORT"));
    assert_eq!(r.cmd(&["GET", "e"]).await, Frame::Null);
    assert!(is_err(&r.cmd(&["EXEC"]).await, "ERR EXEC without MULTI"));
    cluster.stop().unwrap();

    let (cluster, base) = start(ProtocolName::Cops, "multi");
    let mut r = Redis::connect(base).await;
    r.cmd(&["MULTI"]).await;
    r.cmd(&["GET", "a"]).await;
    r.cmd(&["GET", "b"]).await;
    let e = r.cmd(&["EXEC"]).await;
    assert!(is_err(&e, "EXECABORT cops has no read-only transactions"), "{e:?}");
    // Plain MGET still works: one GET per key.
    r.cmd(&["SET", "a", "1"]).await;
    assert_eq!(r.cmd(&["MGET", "a", "b"]).await, Frame::Array(vec![bulk("1"), Frame::Null]));
    cluster.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_closed_and_a_talking_one_is_not() {
    let limits = causeway_net::config::Limits { idle_timeout_ms: 300, ..Default::default() };
    let (cluster, port) = start_with_limits(ProtocolName::Eventual, "idle", limits);
    let mut silent = Redis::connect(port).await;
    let mut talking = Redis::connect(port).await;
    // Talking every 100 ms for 1.5 s (five idle periods): every PING answered.
    for i in 0..15 {
        assert_eq!(talking.cmd(&["PING"]).await, Frame::SimpleString(Bytes::from_static(b"PONG")), "PING {i}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The silent one was closed meanwhile (between one and two periods).
    let t = Instant::now();
    assert_eq!(silent.read().await, None, "the silent connection stayed open");
    assert!(t.elapsed() < Duration::from_secs(1), "closed only {:?} after the talking one ended", t.elapsed());
    drop(talking);
    tokio::task::spawn_blocking(move || cluster.stop().unwrap()).await.unwrap();
}

/// Where the protocol has interactive transactions (PaRiS), a MULTI block
/// that reads after it writes runs in queue order, as in Redis: each GET
/// sees the block's earlier SETs, and the writes commit together. The
/// client library's `Session::begin` is the same transaction, step by step;
/// a protocol without them refuses `begin` with a typed error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_exec_runs_in_queue_order_where_the_protocol_has_interactive_transactions() {
    let (cluster, base) = start(ProtocolName::Paris, "multi-itx");
    let mut r = Redis::connect(base).await;
    assert_eq!(r.cmd(&["SET", "x", "0"]).await, ok());
    r.cmd(&["MULTI"]).await;
    r.cmd(&["SET", "d", "5"]).await;
    r.cmd(&["GET", "d"]).await;
    r.cmd(&["MGET", "d", "x"]).await;
    r.cmd(&["SET", "d", "6"]).await;
    r.cmd(&["GET", "d"]).await;
    assert_eq!(
        r.cmd(&["EXEC"]).await,
        Frame::Array(vec![ok(), bulk("5"), Frame::Array(vec![bulk("5"), bulk("0")]), ok(), bulk("6")])
    );
    assert_eq!(r.cmd(&["GET", "d"]).await, bulk("6"), "the block committed its last write");

    let mut s = causeway_net::Session::<causeway_protocols::paris::Paris>::new(
        cluster.cluster.clone(),
        causeway_core::DcId(1),
        7,
    )
    .unwrap();
    let mut t = s.begin().await.unwrap();
    let got = t.read(vec![Bytes::from_static(b"d"), Bytes::from_static(b"nope")]).await.unwrap();
    // DC 1 may not have d yet (the UST decides): whatever it read, the
    // transaction reads it again the same way, and its own write after.
    let again = t.read(vec![Bytes::from_static(b"d")]).await.unwrap();
    assert_eq!(again[0], got[0], "a key read twice reads the same");
    assert_eq!(got[1], None);
    t.write("d", "7").unwrap();
    assert_eq!(t.read(vec![Bytes::from_static(b"d")]).await.unwrap(), vec![Some(Bytes::from_static(b"7"))]);
    t.commit().await.unwrap();
    assert_eq!(s.get("d").await.unwrap(), Some(Bytes::from_static(b"7")), "read-your-writes after commit");
    // Dropped open: aborted before the next operation, which goes on.
    let mut t = s.begin().await.unwrap();
    t.write("d", "8").unwrap();
    drop(t);
    assert_eq!(s.get("d").await.unwrap(), Some(Bytes::from_static(b"7")), "a dropped transaction wrote nothing");
    let t = s.begin().await.unwrap();
    t.abort().await.unwrap();
    cluster.stop().unwrap();

    let (cluster, _) = start(ProtocolName::Cops, "multi-itx");
    let mut s = causeway_net::Session::<causeway_protocols::cops::Cops>::new(
        cluster.cluster.clone(),
        causeway_core::DcId(0),
        1,
    )
    .unwrap();
    let e = s.begin().await.err().expect("cops has no interactive transactions");
    assert_eq!(e.to_string(), "this protocol does not support Interactive operations");
    cluster.stop().unwrap();
}

/// Partial replication on the network runtime: 3 DCs, each partition in 2
/// of them. An interactive transaction in each DC writes keys of every
/// partition (some stored only elsewhere) and commits; every DC then reads
/// them all back, through the Redis front door too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paris_serves_interactive_transactions_under_partial_replication() {
    let base = free_ports(6);
    let spec = EmbeddedSpec {
        dcs: 3,
        partitions: 3,
        rtt_ms: Vec::new(),
        ports: Ports { metrics: None, redis: Some(base) },
        replication: causeway_core::Replication::Partial { factor: 2 },
        ..spec(ProtocolName::Paris, "partial")
    };
    let cluster = Embedded::start(spec, &tokio::runtime::Handle::current()).unwrap();
    let t = cluster.cluster.topology.clone();
    assert_eq!(t.nodes(), 6, "two replicas of each of 3 partitions");
    let keys: Vec<Bytes> = (0..12).map(|i| Bytes::from(format!("k{i}"))).collect();
    for p in 0..3 {
        assert!(keys.iter().any(|k| t.partition_of(k).0 == p), "partition {p} has a key");
    }
    for dc in 0..3u16 {
        assert!((0..3).any(|p| !t.dcs_of(causeway_core::PartitionId(p)).contains(&causeway_core::DcId(dc))));
        let mut s = causeway_net::Session::<causeway_protocols::paris::Paris>::new(
            cluster.cluster.clone(),
            causeway_core::DcId(dc),
            dc as u32,
        )
        .unwrap();
        let mut txn = s.begin().await.unwrap();
        txn.read(keys.clone()).await.unwrap();
        for k in &keys {
            txn.write(k.clone(), format!("from {dc}")).unwrap();
        }
        txn.commit().await.unwrap();
        let mine = s.rot(keys.clone()).await.unwrap();
        assert!(mine.iter().all(|v| v.as_deref() == Some(format!("from {dc}").as_bytes())), "{mine:?}");
    }
    // Every DC converges on the last commit (DC 2's), read at each DC's
    // snapshot once the UST passes it.
    let deadline = Instant::now() + Duration::from_secs(10);
    for dc in 0..3u16 {
        let mut s = causeway_net::Session::<causeway_protocols::paris::Paris>::new(
            cluster.cluster.clone(),
            causeway_core::DcId(dc),
            10 + dc as u32,
        )
        .unwrap();
        loop {
            let vs = s.rot(keys.clone()).await.unwrap();
            if vs.iter().all(|v| v.as_deref() == Some(&b"from 2"[..])) {
                break;
            }
            assert!(Instant::now() < deadline, "DC {dc} still reads {vs:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let node_in_dc1 = t.dc_servers(causeway_core::DcId(1)).next().unwrap();
    let mut r = Redis::connect(base + node_in_dc1.0 as u16).await;
    let args: Vec<&str> = ["MGET"].into_iter().chain(keys.iter().map(|k| std::str::from_utf8(k).unwrap())).collect();
    assert_eq!(r.cmd(&args).await, Frame::Array(vec![bulk("from 2"); keys.len()]));
    cluster.stop().unwrap();
}

/// `LEVELS` sets the session guarantees a connection's GETs and SETs ask
/// for where the protocol takes per-operation levels (NuKV), is refused by
/// name where it cannot be honoured (Eventual), and is taken (and ignored)
/// by a causal protocol, which gives every guarantee anyway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn levels_are_a_per_connection_default() {
    let (cluster, base) = start(ProtocolName::Nukv, "levels");
    let mut r = Redis::connect(base).await;
    let both = |a: &str, b: &str| Frame::Array(vec![bulk(a), bulk(b)]);
    assert_eq!(r.cmd(&["LEVELS"]).await, both("default", "default"));
    assert_eq!(r.cmd(&["LEVELS", "monotonic-read", "eventual"]).await, ok());
    assert_eq!(r.cmd(&["LEVELS"]).await, both("monotonic-read", "eventual"));
    assert_eq!(r.cmd(&["SET", "k", "v1"]).await, ok());
    assert_eq!(r.cmd(&["LEVELS", "ryw", "mw"]).await, ok(), "short names");
    assert_eq!(r.cmd(&["LEVELS"]).await, both("read-your-write", "monotonic-write"));
    assert_eq!(r.cmd(&["SET", "k", "v2"]).await, ok());
    assert_eq!(r.cmd(&["GET", "k"]).await, bulk("v2"), "read-your-writes at the connection's level");
    let e = r.cmd(&["LEVELS", "sometimes", "eventual"]).await;
    assert!(is_err(&e, "ERR unknown read level \"sometimes\""), "{e:?}");
    assert!(is_err(&r.cmd(&["LEVELS", "eventual"]).await, "ERR wrong number of arguments"));
    assert_eq!(r.cmd(&["LEVELS", "DEFAULT"]).await, ok());
    assert_eq!(r.cmd(&["LEVELS"]).await, both("default", "default"));
    drop(r);
    drop(cluster);

    let (cluster, base) = start(ProtocolName::Eventual, "levels");
    let mut r = Redis::connect(base).await;
    let e = r.cmd(&["LEVELS", "monotonic-read", "eventual"]).await;
    assert!(is_err(&e, "ERR") && format!("{e:?}").contains("monotonic-read"), "{e:?}");
    assert_eq!(r.cmd(&["LEVELS", "eventual", "eventual"]).await, ok());
    assert_eq!(r.cmd(&["SET", "k", "v"]).await, ok());
    drop(r);
    drop(cluster);

    let (_cluster, base) = start(ProtocolName::Cops, "levels");
    let mut r = Redis::connect(base).await;
    assert_eq!(r.cmd(&["LEVELS", "m", "m"]).await, ok());
    assert_eq!(r.cmd(&["SET", "k", "v"]).await, ok());
    assert_eq!(r.cmd(&["GET", "k"]).await, bulk("v"));
}

/// `CHECKINGGROUP` names the checking group a connection's GETs ask for
/// (ACCF, Roohitavaf Alg 7.1's `GET(k, cg)`), as `LEVELS` names levels: a
/// per-connection default, refused by name where the group does not
/// exist or the protocol has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checking_groups_are_a_per_connection_default() {
    let (cluster, base) = start(ProtocolName::Accf, "checking-group");
    let mut r = Redis::connect(base).await;
    assert_eq!(r.cmd(&["CHECKINGGROUP"]).await, bulk("default"));
    assert_eq!(r.cmd(&["SET", "k", "v"]).await, ok());
    assert_eq!(r.cmd(&["CHECKINGGROUP", "1"]).await, ok());
    assert_eq!(r.cmd(&["CHECKINGGROUP"]).await, bulk("1"));
    assert_eq!(r.cmd(&["GET", "k"]).await, bulk("v"), "its write, read in DC 1's group");
    let e = r.cmd(&["CHECKINGGROUP", "2"]).await;
    assert!(is_err(&e, "ERR checking group 2 does not exist") && format!("{e:?}").contains("has 2 groups"), "{e:?}");
    assert!(is_err(&r.cmd(&["CHECKINGGROUP", "one"]).await, "ERR checking group must be a number"));
    assert!(is_err(&r.cmd(&["CHECKINGGROUP", "1", "2"]).await, "ERR wrong number of arguments"));
    assert_eq!(r.cmd(&["CHECKINGGROUP"]).await, bulk("1"), "refusals change nothing");
    assert_eq!(r.cmd(&["CHECKINGGROUP", "default"]).await, ok());
    assert_eq!(r.cmd(&["CHECKINGGROUP"]).await, bulk("default"));
    assert_eq!(r.cmd(&["GET", "k"]).await, bulk("v"));
    drop(r);
    drop(cluster);

    let (_cluster, base) = start(ProtocolName::Cops, "checking-group");
    let mut r = Redis::connect(base).await;
    let e = r.cmd(&["CHECKINGGROUP", "0"]).await;
    assert!(is_err(&e, "ERR this protocol has no checking groups"), "{e:?}");
    assert_eq!(r.cmd(&["CHECKINGGROUP", "DEFAULT"]).await, ok());
}
