//! A DC away for a long time must not freeze the others: replication to it
//! costs bounded memory and never blocks the protocol thread, and when it
//! comes back everything converges. The queue limit is tiny so that a few
//! seconds of load overrun it hundreds of times (what an hour of a real
//! outage does to the default limit).

use bytes::Bytes;
use causeway_core::{DcId, NodeId};
use causeway_net::config::Limits;
use causeway_net::embedded::{Embedded, EmbeddedSpec};
use causeway_net::{Fsync, Session};
use causeway_protocols::{ProtocolName, with_protocol};
use std::time::{Duration, Instant};

const PEER_QUEUE: usize = 4;
const WRITES_PER_DC: usize = 600;

fn spec(p: ProtocolName) -> EmbeddedSpec {
    let d =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-outage-{p}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    EmbeddedSpec {
        protocol: p,
        dcs: 3,
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

async fn outage(p: ProtocolName) {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let rt = tokio::runtime::Handle::current();
    let limits = Limits { peer_queue: PEER_QUEUE, ..Limits::default() };
    let cluster = Embedded::start_with_limits(spec(p), limits, &rt).unwrap();
    let c = cluster.cluster.clone();
    let away: Vec<NodeId> = c.topology.dc_servers(DcId(2)).collect();
    let mut cluster = tokio::task::spawn_blocking(move || {
        let mut cluster = cluster;
        for n in &away {
            cluster.stop_node(*n).unwrap();
        }
        cluster
    })
    .await
    .unwrap();
    // DC0 and DC1 keep serving: every operation answers within its deadline.
    let mut written = Vec::new();
    with_protocol!(p, P => {
        let mut s0 = Session::<P>::new(c.clone(), DcId(0), 1).unwrap();
        let mut s1 = Session::<P>::new(c.clone(), DcId(1), 2).unwrap();
        s0.timeout = Duration::from_secs(5);
        s1.timeout = Duration::from_secs(5);
        for i in 0..WRITES_PER_DC {
            let (k0, k1) = (Bytes::from(format!("a{i}")), Bytes::from(format!("b{i}")));
            s0.put(k0.clone(), k0.clone()).await.unwrap_or_else(|e| panic!("{p}: put {i} in dc0 with dc2 away: {e}"));
            s1.put(k1.clone(), k1.clone()).await.unwrap_or_else(|e| panic!("{p}: put {i} in dc1 with dc2 away: {e}"));
            assert_eq!(s0.get(k0.clone()).await.unwrap_or_else(|e| panic!("{p}: get in dc0: {e}")), Some(k0.clone()));
            written.push(k0);
            written.push(k1);
        }
    });
    // The backlog for the absent DC is on disk, not in memory.
    for writer in [DcId(0), DcId(1)] {
        let from = c.topology.dc_servers(writer).next().unwrap();
        let m = &cluster.node(from).unwrap().metrics;
        for to in c.topology.dc_servers(DcId(2)) {
            // The link task takes each message from the protocol thread
            // after the write was acknowledged, and updates its depth then.
            let since = Instant::now();
            while (m.peer_depth[to.idx()].get() as u64) < WRITES_PER_DC as u64
                && since.elapsed() < Duration::from_secs(10)
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let depth = m.peer_depth[to.idx()].get() as u64;
            let spilled = m.peer_spilled[to.idx()].get() as u64;
            assert!(depth >= WRITES_PER_DC as u64, "{p}: node {from:?} holds {depth} messages for {to:?}");
            assert!(depth - spilled <= PEER_QUEUE as u64, "{p}: {depth} queued, only {spilled} on disk");
        }
    }
    // Heal: DC2 catches up with everything.
    let away: Vec<NodeId> = c.topology.dc_servers(DcId(2)).collect();
    let cluster2 = tokio::task::spawn_blocking(move || {
        for n in &away {
            cluster.restart_node(*n).unwrap();
        }
        cluster
    })
    .await
    .unwrap();
    with_protocol!(p, P => {
        let start = Instant::now();
        let mut s2 = Session::<P>::new(c.clone(), DcId(2), 3).unwrap();
        s2.timeout = Duration::from_secs(5);
        for k in &written {
            loop {
                if s2.get(k.clone()).await.unwrap().as_ref() == Some(k) {
                    break;
                }
                // About a second on a quiet machine: the backlog crosses a
                // 4-message window, one acknowledgement round per window,
                // which a loaded machine (load ≈ 8) stretched past 30 s.
                assert!(start.elapsed() < Duration::from_secs(120), "{p}: {k:?} never reached dc2 after the heal");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });
    tokio::task::spawn_blocking(move || cluster2.stop().unwrap()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absent_dc_never_freezes_the_others_and_catches_up() {
    for p in [ProtocolName::Eventual, ProtocolName::CausalSpartanX, ProtocolName::GentleRain] {
        outage(p).await;
    }
}
