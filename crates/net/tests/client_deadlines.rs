//! A client never waits without a deadline: not on a node that accepts TCP
//! but never says welcome (stopped, overloaded), not on one that welcomes
//! and never replies, not on one whose accept queue is full.

use bytes::Bytes;
use causeway_core::DcId;
use causeway_net::frame::{Wire, encode};
use causeway_net::{ClientError, ClusterConfig, Session};
use causeway_protocols::eventual::{Eventual, Msg};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

fn cluster(addr: SocketAddr) -> Arc<causeway_net::Cluster> {
    let text = format!(
        "cluster_id = \"t\"\nprotocol = \"eventual\"\nnodes = [\"{addr}\"]\n[topology]\ndcs = 1\npartitions = 1\n[tls]\nplaintext = true\n"
    );
    Arc::new(ClusterConfig::parse(&text, "t.toml").unwrap().validate().unwrap())
}

/// Run a get with a short deadline; a hang fails the test instead of
/// blocking it forever.
async fn get(addr: SocketAddr) -> Result<Option<Bytes>, ClientError> {
    let mut s = Session::<Eventual>::new(cluster(addr), DcId(0), 1).unwrap();
    s.timeout = Duration::from_millis(300);
    tokio::time::timeout(Duration::from_secs(20), s.get(Bytes::from_static(b"k")))
        .await
        .expect("the client hung past its deadline")
}

#[tokio::test]
async fn a_node_that_accepts_but_never_welcomes_times_out_with_a_typed_error() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut keep = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            keep.push(s);
        }
    });
    let e = get(addr).await.unwrap_err();
    assert!(matches!(e, ClientError::HelloTimeout { node: 0, .. }), "{e}");
    assert!(e.to_string().contains("did not answer the hello"), "{e}");
    held.abort();
}

#[tokio::test]
async fn a_node_that_never_replies_times_out() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut keep = Vec::new();
        while let Ok((mut s, _)) = l.accept().await {
            let welcome = encode::<Msg>(&Wire::WelcomeClient {
                node: causeway_core::NodeId(0),
                client: causeway_core::ClientId(1),
            });
            let _ = s.write_all(&welcome).await;
            keep.push(s);
        }
    });
    let e = get(addr).await.unwrap_err();
    assert!(matches!(e, ClientError::Timeout(_)), "{e}");
    held.abort();
}

/// A listener that never accepts, with its backlog full: the kernel drops
/// new SYNs, so `connect` itself would wait for minutes.
#[tokio::test]
async fn a_full_accept_queue_times_out_the_connect() {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = sock.local_addr().unwrap();
    let _listener = sock.listen(0).unwrap();
    let mut fillers = Vec::new();
    for _ in 0..8 {
        match tokio::time::timeout(Duration::from_millis(200), tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(s)) => fillers.push(s),
            _ => break,
        }
    }
    let e = get(addr).await.unwrap_err();
    assert!(
        matches!(e, ClientError::ConnectTimeout { node: 0, .. } | ClientError::HelloTimeout { node: 0, .. }),
        "{e}"
    );
}

/// A session keeps its reply timer from one operation to the next. A timer
/// belongs to the runtime it was made on, so a session used on a runtime
/// since dropped, then on another, must make a new one: reusing the old
/// one would panic in tokio instead of waiting.
#[test]
fn a_session_outlives_the_runtime_it_ran_on() {
    use causeway_net::embedded::{Embedded, EmbeddedSpec};
    use causeway_protocols::ProtocolName;
    let nodes_rt = tokio::runtime::Runtime::new().unwrap();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("causeway-session-runtimes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut spec = EmbeddedSpec::default_for(ProtocolName::Eventual, dir.clone());
    (spec.dcs, spec.partitions, spec.rtt_ms, spec.plaintext) = (1, 1, vec![vec![0.0]], true);
    let cluster = Embedded::start(spec, nodes_rt.handle()).unwrap();
    let mut s = Session::<Eventual>::new(cluster.cluster.clone(), DcId(0), 1).unwrap();
    let first = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    first.block_on(s.put(Bytes::from_static(b"k"), Bytes::from_static(b"v"))).unwrap();
    drop(first);
    // Its connections went with the first runtime; showing a token (none)
    // drops them, so the next operation connects afresh on the second.
    s.set_token(None);
    let second = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let got = second.block_on(s.get(Bytes::from_static(b"k"))).unwrap();
    assert_eq!(got.as_deref(), Some(&b"v"[..]));
    cluster.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
