//! A link's sequence numbers belong to one incarnation of a node: an
//! impostor cannot consume them, and a node that lost its data is refused
//! loudly instead of silently diverging.

use bytes::Bytes;
use causeway_core::{DcId, NodeId, WIRE_FORMAT};
use causeway_net::embedded::{Embedded, EmbeddedSpec};
use causeway_net::frame::{Wire, WireError, decode, encode, read_frame};
use causeway_net::tls::NodeTls;
use causeway_net::{Fsync, Session};
use causeway_protocols::ProtocolName;
use causeway_protocols::eventual::{Eventual, Msg};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

async fn visible(c: &std::sync::Arc<causeway_net::Cluster>, dc: DcId, key: &'static [u8]) {
    let mut s = Session::<Eventual>::new(c.clone(), dc, 50 + dc.0 as u32).unwrap();
    let start = Instant::now();
    while s.get(Bytes::from_static(key)).await.unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(10), "{key:?} never replicated to {dc:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequence_numbers_belong_to_one_incarnation() {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-identity-it-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = EmbeddedSpec {
        protocol: ProtocolName::Eventual,
        dcs: 2,
        partitions: 1,
        rtt_ms: Vec::new(),
        data_dir: dir.clone(),
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
    let rt = tokio::runtime::Handle::current();
    let cluster = Embedded::start(spec, &rt).unwrap();
    let c = cluster.cluster.clone();
    let mut w1 = Session::<Eventual>::new(c.clone(), DcId(1), 1).unwrap();
    w1.put(Bytes::from_static(b"a"), Bytes::from_static(b"1")).await.unwrap();
    visible(&c, DcId(0), b"a").await;

    // An impostor says hello as node 1 with the right cluster id, and even
    // node 1's certificate (a stale copy of its credentials).
    let tcp = TcpStream::connect(c.addrs[0]).await.unwrap();
    let mut s = NodeTls::load(&c, NodeId(1)).unwrap().connect(tcp, NodeId(0)).await.unwrap();
    let hello = Wire::<Msg>::HelloPeer {
        cluster_id: c.config.cluster_id.clone(),
        from: NodeId(1),
        to: NodeId(0),
        incarnation: 42,
        format: WIRE_FORMAT,
    };
    s.write_all(&encode(&hello)).await.unwrap();
    s.flush().await.unwrap();
    let answer = read_frame(&mut s, 1 << 20).await.unwrap().map(|b| decode::<Msg>(&b).unwrap());
    assert!(
        matches!(answer, Some(Wire::Refused(WireError::StaleIncarnation { node: 1, got: 42, .. }))),
        "an impostor was answered {answer:?}"
    );
    // Had it been welcomed, its batch would have advanced node 1's sequence.
    let batch = Wire::Peer { first_seq: 2, msgs: (0..8).map(|_| Msg::PutReply).collect::<Vec<_>>() };
    let _ = s.write_all(&encode(&batch)).await;
    drop(s);
    // The real node 1's next writes still replicate.
    w1.put(Bytes::from_static(b"b"), Bytes::from_static(b"2")).await.unwrap();
    visible(&c, DcId(0), b"b").await;

    // Node 1 loses its data dir and comes back: node 0 refuses it loudly.
    let refused_before = cluster.node(NodeId(0)).unwrap().metrics.refused_total();
    let n1_dir = c.node_dir(NodeId(1));
    let mut cluster = tokio::task::spawn_blocking(move || {
        let mut cluster = cluster;
        cluster.stop_node(NodeId(1)).unwrap();
        std::fs::remove_dir_all(&n1_dir).unwrap();
        cluster.restart_node(NodeId(1)).unwrap();
        cluster
    })
    .await
    .unwrap();
    // Its first write tries to replicate on a sequence node 0 has already
    // seen from its previous life: refused (not dropped as a duplicate).
    let mut w1 = Session::<Eventual>::new(c.clone(), DcId(1), 2).unwrap();
    w1.put(Bytes::from_static(b"c"), Bytes::from_static(b"3")).await.unwrap();
    let start = Instant::now();
    while cluster.node(NodeId(0)).unwrap().metrics.refused_total() == refused_before {
        assert!(start.elapsed() < Duration::from_secs(10), "node 0 took back a node 1 that lost its data");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A second process cannot open a running node's data dir.
    let e = with_node_dir_open(&c, NodeId(0));
    assert!(e.contains("in use by another process"), "{e}");
    let _ = &mut cluster;
    tokio::task::spawn_blocking(move || cluster.stop().unwrap()).await.unwrap();
}

fn with_node_dir_open(c: &causeway_net::Cluster, node: NodeId) -> String {
    match causeway_net::identity::NodeDir::open(&c.node_dir(node), &c.config.cluster_id, node, &c.node_place(node)) {
        Ok(_) => "opened".into(),
        Err(e) => e.to_string(),
    }
}
