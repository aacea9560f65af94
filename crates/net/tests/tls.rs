//! Transport security from outside: who is let in, who is refused, and
//! that nothing a refused party sent reached the store.

use bytes::Bytes;
use causeway_core::{DcId, NodeId, WIRE_FORMAT};
use causeway_net::embedded::{Embedded, EmbeddedSpec};
use causeway_net::frame::{Wire, encode};
use causeway_net::tls::{ClientTls, NodeTls, TlsError, Validity, generate, issue_client};
use causeway_net::{ClientError, Cluster, Fsync, Session};
use causeway_protocols::ProtocolName;
use causeway_protocols::eventual::{Eventual, Msg};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The same cluster, as seen by someone holding the certificates in `dir`.
fn with_certs(c: &Cluster, dir: &std::path::Path) -> Arc<Cluster> {
    let mut c = c.clone();
    c.config.tls.dir = Some(dir.to_path_buf());
    Arc::new(c)
}

/// The server counts a refusal after the client has seen it: wait for it.
async fn wait_for(cond: impl Fn() -> bool, what: &str) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(10), "not within 10 s: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_holders_of_the_clusters_certificates_get_in() {
    let rt = tokio::runtime::Handle::current();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-tls-it-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = EmbeddedSpec {
        protocol: ProtocolName::Eventual,
        dcs: 2,
        partitions: 1,
        rtt_ms: Vec::new(),
        data_dir: dir.join("data"),
        fsync: Fsync::Never,
        params: toml::Table::new(),
        ports: Default::default(),
        tokens: None,
        plaintext: false,
        services: Vec::new(),
        replication: causeway_core::Replication::Full,
        replicas: 1,
        remote_replica: Default::default(),
    };
    let cluster = Embedded::start(spec, &rt).unwrap();
    let c = cluster.cluster.clone();
    let refused = |n: u32| {
        let m = &cluster.node(NodeId(n)).unwrap().metrics;
        m.refused_for("tls") + m.refused_for("unauthenticated")
    };
    // The rightful client: reads and writes over TLS.
    let mut good = Session::<Eventual>::new(c.clone(), DcId(0), 1).unwrap();
    good.put(Bytes::from_static(b"k"), Bytes::from_static(b"v0")).await.unwrap();

    // 1. Plaintext to a TLS node: the handshake fails, nothing is served.
    let before = refused(0);
    let mut s = TcpStream::connect(c.addrs[0]).await.unwrap();
    s.write_all(&encode::<Msg>(&Wire::HelloClient {
        cluster_id: c.config.cluster_id.clone(),
        token: None,
        format: WIRE_FORMAT,
    }))
    .await
    .unwrap();
    s.write_all(&encode(&Wire::Request(Msg::PutReq {
        key: Bytes::from_static(b"k"),
        value: Bytes::from_static(b"plain"),
    })))
    .await
    .unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await.unwrap().unwrap_or(0);
    assert!(n == 0 || buf[0] == 0x15, "a plaintext client was answered {:?}", &buf[..n]);
    wait_for(|| refused(0) > before, "the plaintext client counted as refused").await;

    // 2. Certificates of another CA (another cluster, or a forger): refused
    //    in the handshake, with an error that says so.
    let other = dir.join("other-ca");
    generate(&other, "forged", c.addrs.len(), &Validity { days: 1 }).unwrap();
    let before = refused(0);
    let forged = with_certs(&c, &other);
    let mut s = Session::<Eventual>::new(forged.clone(), DcId(0), 2).unwrap();
    s.timeout = Duration::from_secs(5);
    let e = s.put(Bytes::from_static(b"k"), Bytes::from_static(b"forged")).await.unwrap_err();
    assert!(matches!(e, ClientError::Tls(TlsError::Handshake { .. })), "{e}");
    wait_for(|| refused(0) > before, "the forged client counted as refused").await;
    //    A node of the other CA posing as node 1 to node 0: refused as well.
    let before = refused(0);
    let tcp = TcpStream::connect(c.addrs[0]).await.unwrap();
    let r = NodeTls::load(&forged, NodeId(1)).unwrap().connect(tcp, NodeId(0)).await;
    // The client side may finish before the server rejects its certificate
    // (TLS 1.3); the server then closes without ever reading a frame.
    if let Ok(mut conn) = r {
        let _ = conn
            .write_all(&encode::<Msg>(&Wire::HelloPeer {
                cluster_id: c.config.cluster_id.clone(),
                from: NodeId(1),
                to: NodeId(0),
                incarnation: 7,
                format: WIRE_FORMAT,
            }))
            .await;
        let _ = conn.flush().await;
        let mut b = [0u8; 16];
        let got = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut b)).await.unwrap();
        assert!(!matches!(got, Ok(n) if n > 0), "a forged peer got an answer");
    }
    wait_for(|| refused(0) > before, "the forged peer counted as refused").await;

    // 3. An expired certificate of the right CA is refused too (and the same
    //    call with a valid lifetime is let in, so it is the expiry that
    //    counts).
    let ca_dir = c.config.tls.dir.clone().unwrap();
    let fresh = dir.join("fresh");
    issue_client(&ca_dir, &c.config.cluster_id, &fresh, &Validity { days: 1 }).unwrap();
    let mut s = Session::<Eventual>::new(with_certs(&c, &fresh), DcId(0), 5).unwrap();
    assert_eq!(s.get(Bytes::from_static(b"k")).await.unwrap().as_deref(), Some(&b"v0"[..]));
    let expired = dir.join("expired");
    issue_client(&ca_dir, &c.config.cluster_id, &expired, &Validity { days: 0 }).unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut s = Session::<Eventual>::new(with_certs(&c, &expired), DcId(0), 3).unwrap();
    s.timeout = Duration::from_secs(5);
    let e = s.get(Bytes::from_static(b"k")).await.unwrap_err();
    assert!(matches!(e, ClientError::Tls(TlsError::Handshake { .. })), "{e}");

    // Nothing the refused parties sent landed, and the rightful client is
    // still served.
    assert_eq!(good.get(Bytes::from_static(b"k")).await.unwrap().as_deref(), Some(&b"v0"[..]));
    let mut remote = Session::<Eventual>::new(c.clone(), DcId(1), 4).unwrap();
    assert_ne!(remote.get(Bytes::from_static(b"k")).await.unwrap().as_deref(), Some(&b"forged"[..]));
    // The metric is exported.
    let text = cluster.node(NodeId(0)).unwrap().metrics.render();
    assert!(text.contains("causeway_refused_total{reason=\"tls\"}"), "{text}");
    let _ = ClientTls::load(&c).unwrap();
    tokio::task::spawn_blocking(move || cluster.stop().unwrap()).await.unwrap();
}
