//! Connections cost file descriptors: a node caps how many it holds and
//! closes idle clients, so neither a flood nor forgotten clients exhaust it.

use causeway_core::WIRE_FORMAT;
use causeway_net::Fsync;
use causeway_net::config::Limits;
use causeway_net::embedded::{Embedded, EmbeddedSpec};
use causeway_net::frame::{Wire, WireError, decode, encode, read_frame};
use causeway_net::tls::{ClientTls, Conn};
use causeway_protocols::ProtocolName;
use causeway_protocols::eventual::Msg;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

fn spec(name: &str) -> EmbeddedSpec {
    let d =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-conns-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    EmbeddedSpec {
        protocol: ProtocolName::Eventual,
        dcs: 1,
        partitions: 1,
        rtt_ms: Vec::new(),
        data_dir: d,
        fsync: Fsync::Never,
        params: toml::Table::new(),
        ports: Default::default(),
        tokens: None,
        plaintext: false,
        services: Vec::new(),
        replication: causeway_core::Replication::Full,
        replicas: 1,
        remote_replica: Default::default(),
    }
}

async fn hello(c: &causeway_net::Cluster, id: &str) -> (Conn, Option<Wire<Msg>>) {
    let mut s = ClientTls::load(c).unwrap().dial(c, causeway_core::NodeId(0)).await.unwrap();
    s.write_all(&encode::<Msg>(&Wire::HelloClient { cluster_id: id.into(), token: None, format: WIRE_FORMAT }))
        .await
        .unwrap();
    s.flush().await.unwrap();
    let w = tokio::time::timeout(Duration::from_secs(10), read_frame(&mut s, 1 << 20))
        .await
        .expect("an answer to the hello")
        .ok()
        .flatten()
        .map(|b| decode::<Msg>(&b).unwrap());
    (s, w)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_are_refused_by_name() {
    let rt = tokio::runtime::Handle::current();
    let limits = Limits { max_connections: 3, ..Limits::default() };
    let cluster = Embedded::start_with_limits(spec("cap"), limits, &rt).unwrap();
    let (c, id) = (cluster.cluster.clone(), cluster.cluster.config.cluster_id.clone());
    let mut held = Vec::new();
    for _ in 0..3 {
        let (s, w) = hello(&c, &id).await;
        assert!(matches!(w, Some(Wire::WelcomeClient { .. })), "{w:?}");
        held.push(s);
    }
    let (_, w) = hello(&c, &id).await;
    assert!(matches!(w, Some(Wire::Refused(WireError::TooManyConnections { max: 3 }))), "{w:?}");
    // A closed connection frees its place.
    drop(held.pop());
    let start = std::time::Instant::now();
    loop {
        let (s, w) = hello(&c, &id).await;
        if matches!(w, Some(Wire::WelcomeClient { .. })) {
            held.push(s);
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "the freed place never came back: {w:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::task::spawn_blocking(move || cluster.stop().unwrap()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_client_connection_is_closed() {
    let rt = tokio::runtime::Handle::current();
    let limits = Limits { idle_timeout_ms: 200, ..Limits::default() };
    let cluster = Embedded::start_with_limits(spec("idle"), limits, &rt).unwrap();
    let (c, id) = (cluster.cluster.clone(), cluster.cluster.config.cluster_id.clone());
    let (mut s, w) = hello(&c, &id).await;
    assert!(matches!(w, Some(Wire::WelcomeClient { .. })), "{w:?}");
    // Say nothing: the server hangs up (end of stream), well before 10 s.
    let r = tokio::time::timeout(Duration::from_secs(10), read_frame(&mut s, 1 << 20)).await;
    assert!(matches!(r, Ok(Ok(None)) | Ok(Err(_))), "the idle connection stayed open: {r:?}");
    tokio::task::spawn_blocking(move || cluster.stop().unwrap()).await.unwrap();
}
