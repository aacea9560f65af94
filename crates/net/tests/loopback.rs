//! Loopback integration: real TCP, real logs, every implemented protocol.

use bytes::Bytes;
use causeway_core::{DcId, NodeId, Protocol};
use causeway_net::embedded::{Embedded, EmbeddedSpec};
use causeway_net::{Fsync, Session};
use causeway_protocols::{ProtocolName, with_protocol};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn tmp(name: &str) -> PathBuf {
    let d =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn spec(p: ProtocolName, name: &str) -> EmbeddedSpec {
    EmbeddedSpec {
        protocol: p,
        dcs: 2,
        partitions: 2,
        rtt_ms: vec![vec![0.0, 20.0], vec![20.0, 0.0]],
        data_dir: tmp(&format!("{name}-{p}")),
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

/// Stop each of `nodes` cleanly and start it again from its log.
async fn restart(mut cluster: Embedded, nodes: Vec<NodeId>) -> Embedded {
    tokio::task::spawn_blocking(move || {
        for n in &nodes {
            cluster.stop_node(*n).unwrap();
            cluster.restart_node(*n).unwrap();
        }
        cluster
    })
    .await
    .unwrap()
}

async fn replicate_and_order(p: ProtocolName) {
    let rt = tokio::runtime::Handle::current();
    let cluster = Embedded::start(spec(p, "repl"), &rt).unwrap();
    with_protocol!(p, P => {
        let mut w = Session::<P>::new(cluster.cluster.clone(), DcId(0), 1).unwrap();
        let mut r = Session::<P>::new(cluster.cluster.clone(), DcId(1), 2).unwrap();
        // Photo, then album, in one session.
        w.put(Bytes::from_static(b"photo"), Bytes::from_static(b"p1")).await.unwrap();
        w.put(Bytes::from_static(b"album"), Bytes::from_static(b"a1")).await.unwrap();
        assert_eq!(w.get(Bytes::from_static(b"album")).await.unwrap().as_deref(), Some(&b"a1"[..]));
        let start = Instant::now();
        loop {
            let album = r.get(Bytes::from_static(b"album")).await.unwrap();
            if album.is_some() {
                let photo = r.get(Bytes::from_static(b"photo")).await.unwrap();
                if P::CAUSAL {
                    assert_eq!(photo.as_deref(), Some(&b"p1"[..]), "{p}: album visible without its photo");
                }
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "{p}: write never became visible in dc1");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });
    // The metrics saw it: request latencies by kind where the writes landed,
    // remote visibility where they were read.
    let t = cluster.cluster.topology.clone();
    let writer = cluster.node(t.server_for_key(DcId(0), b"album").unwrap()).unwrap().metrics.render();
    assert!(writer.contains("causeway_request_duration_seconds_count{kind=\"put_req\"} 1"), "{p}:\n{writer}");
    assert!(writer.contains("causeway_local_writes_total 1"), "{p}:\n{writer}");
    let reader = cluster.node(t.server_for_key(DcId(1), b"album").unwrap()).unwrap().metrics.render();
    // Visibility by origin DC: the album came from DC 0.
    assert!(reader.contains("causeway_visibility_seconds_count{from_dc=\"0\"} "), "{p}:\n{reader}");
    assert!(!reader.contains("causeway_visibility_seconds_count{from_dc=\"0\"} 0"), "{p}:\n{reader}");
    if with_protocol!(p, P => P::CAUSAL) {
        assert!(reader.contains("causeway_stable_lag_seconds "), "{p}:\n{reader}");
    }
    tokio::task::spawn_blocking(move || cluster.stop().unwrap()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_protocol_replicates_over_tcp() {
    for &p in ProtocolName::ALL {
        replicate_and_order(p).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_a_restart() {
    let p = ProtocolName::Eventual;
    let rt = tokio::runtime::Handle::current();
    let mut s = spec(p, "restart");
    s.fsync = Fsync::Always;
    let cluster = Embedded::start(s, &rt).unwrap();
    let c = cluster.cluster.clone();
    let keys: Vec<Bytes> = (0..50).map(|i| Bytes::from(format!("k{i}"))).collect();
    with_protocol!(p, P => {
        let mut w = Session::<P>::new(c.clone(), DcId(0), 1).unwrap();
        for k in &keys {
            w.put(k.clone(), k.clone()).await.unwrap();
        }
    });
    let nodes: Vec<NodeId> = c.topology.dc_servers(DcId(0)).collect();
    let cluster = restart(cluster, nodes).await;
    with_protocol!(p, P => {
        let mut r = Session::<P>::new(c.clone(), DcId(0), 3).unwrap();
        for k in &keys {
            assert_eq!(r.get(k.clone()).await.unwrap().as_ref(), Some(k), "lost {k:?} across a restart");
        }
    });
    tokio::task::spawn_blocking(move || cluster.stop().unwrap()).await.unwrap();
}

/// A log compacted every few writes (a 4 KiB `snapshot_bytes`) while writes
/// keep coming, each snapshot copied over several turns of the node's loop
/// (`checkpoint_slice_us = 0`): after a restart every acknowledged write is back, for a
/// protocol that keeps one version per key and for one that keeps several
/// and collects them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_a_restart_from_snapshots_taken_under_load() {
    use causeway_net::config::StorageConfig;
    for p in [ProtocolName::Eventual, ProtocolName::CausalSpartanX] {
        let rt = tokio::runtime::Handle::current();
        let mut s = spec(p, "snapshots");
        s.dcs = 1;
        s.partitions = 1;
        s.rtt_ms = Vec::new();
        if p == ProtocolName::CausalSpartanX {
            // A 2 ms GC horizon, so collection runs during the writes and
            // the snapshots copy collected chains.
            s.params.insert("gc_grace_us".into(), toml::Value::Integer(2_000));
        }
        // One slice of keys copied per turn: each snapshot's copy spans
        // several turns, with the sessions' writes landing in between.
        let storage = StorageConfig {
            fsync: Fsync::Never,
            snapshot_bytes: 4096,
            checkpoint_slice_us: 0,
            ..StorageConfig::default()
        };
        let cluster = Embedded::start_with_storage(s, storage, &rt).unwrap();
        let c = cluster.cluster.clone();
        // Each key written in rounds, the last round's value the one to
        // survive; the sessions' writes interleave, so compactions start
        // between them. A snapshot is counted once its thread has finished,
        // and a loaded machine (CI runs tests side by side) may finish the
        // first only after three rounds, so the writers go on, round by
        // round, until two snapshots are counted and collection has run (at
        // most 100 rounds).
        let node = NodeId(0);
        let node_metrics = cluster.node(node).unwrap().metrics.clone();
        let keys: Vec<Bytes> = (0..300).map(|i| Bytes::from(format!("k{i:03}"))).collect();
        let mut last_round = Vec::new();
        with_protocol!(p, P => {
            let mut tasks = Vec::new();
            for (w, chunk) in keys.chunks(75).enumerate() {
                let (c, chunk, node_metrics) = (c.clone(), chunk.to_vec(), node_metrics.clone());
                tasks.push(tokio::spawn(async move {
                    let mut s = Session::<P>::new(c, DcId(0), 1 + w as u32).unwrap();
                    let mut round = 0;
                    loop {
                        for k in &chunk {
                            s.put(k.clone(), Bytes::from(format!("{k:?}-{round}"))).await.unwrap();
                        }
                        // And until collection has run: before there is a
                        // horizon (three rounds can take a few ms) the store
                        // holds every version.
                        let collected = node_metrics.versions.get() < 2 * 300;
                        if (round >= 2 && node_metrics.snapshots.get() >= 2 && collected) || round >= 99 {
                            return round;
                        }
                        round += 1;
                    }
                }));
            }
            for t in tasks {
                last_round.push(t.await.unwrap());
            }
        });
        let written = 75 * last_round.iter().map(|r| r + 1).sum::<u64>();
        let metrics = cluster.node(node).unwrap().metrics.render();
        let metric = |name: &str| -> u64 {
            let line = metrics.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_default();
            line.rsplit(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0)
        };
        let count = metric("causeway_snapshots_total");
        assert!(count >= 2, "{p}: expected the log compacted several times during the writes, got {count}");
        let turns = metric("causeway_snapshot_copy_turns_total");
        assert!(turns > count, "{p}: {count} snapshots copied in {turns} turns: none spanned several");
        // What the dashboard shows as the node's snapshot: the file's size.
        let snapshot_bytes = metric("causeway_snapshot_bytes");
        assert!(snapshot_bytes > 0, "{p}: {count} snapshots written, yet the snapshot size reads 0");
        let versions = metric("causeway_store_versions");
        assert!(versions < written, "{p}: {written} writes left {versions} versions: nothing was collected");
        let cluster = restart(cluster, vec![node]).await;
        with_protocol!(p, P => {
            let mut r = Session::<P>::new(c.clone(), DcId(0), 99).unwrap();
            for (i, k) in keys.iter().enumerate() {
                let want = Bytes::from(format!("{k:?}-{}", last_round[i / 75]));
                assert_eq!(r.get(k.clone()).await.unwrap(), Some(want), "{p}: lost {k:?} across a restart");
            }
        });
        tokio::task::spawn_blocking(move || cluster.stop().unwrap()).await.unwrap();
    }
}

/// Write-only transactions and non-atomic batches over TCP: the protocols
/// that offer them apply every write; the others refuse them with a typed
/// error and keep serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_only_transactions_and_batches_are_applied_or_refused_by_name() {
    use causeway_core::OpKind;
    for &p in ProtocolName::ALL {
        let rt = tokio::runtime::Handle::current();
        let cluster = Embedded::start(spec(p, "wot"), &rt).unwrap();
        with_protocol!(p, P => {
            for (i, kind) in [OpKind::Wot, OpKind::Batch].into_iter().enumerate() {
                let mut s = Session::<P>::new(cluster.cluster.clone(), DcId(0), 1 + 2 * i as u32).unwrap();
                let (x, y) = (Bytes::from(format!("x{i}")), Bytes::from(format!("y{i}")));
                let writes = vec![(x.clone(), Bytes::from_static(b"1")), (y.clone(), Bytes::from_static(b"2"))];
                let offered = <P as causeway_core::Protocol>::OPS.contains(&kind);
                let r = if kind == OpKind::Wot { s.wot(writes).await } else { s.batch(writes).await };
                match r {
                    Ok(()) => {
                        assert!(offered, "{p} accepted a {kind:?} it does not list");
                        assert_eq!(s.get(x.clone()).await.unwrap().as_deref(), Some(&b"1"[..]));
                        assert_eq!(s.get(y.clone()).await.unwrap().as_deref(), Some(&b"2"[..]));
                    }
                    Err(e) => {
                        assert!(!offered, "{p}: {e}");
                        assert!(e.to_string().contains(&format!("does not support {kind:?}")), "{p}: {e}");
                        // The session and the server go on.
                        let mut s = Session::<P>::new(cluster.cluster.clone(), DcId(0), 2 + 2 * i as u32).unwrap();
                        s.put(x, Bytes::from_static(b"3")).await.unwrap();
                    }
                }
            }
        });
        tokio::task::spawn_blocking(move || cluster.stop().unwrap()).await.unwrap();
    }
}

/// Heartbeats and stable-time messages are coalesced in the link (only the
/// newest matters), but with an injected delay longer than their period a
/// newer one arrives before the older is due: each must still go out when
/// due, or stable time stops at the last replicated write and a remote ROT
/// never sees the writes after it (it did: the newest replaced the pending
/// one and pushed its due time forever ahead).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stable_time_keeps_moving_under_an_injected_delay() {
    for p in [ProtocolName::CausalSpartanX, ProtocolName::GentleRain] {
        let rt = tokio::runtime::Handle::current();
        let mut s = spec(p, "stable");
        s.rtt_ms = vec![vec![0.0, 100.0], vec![100.0, 0.0]];
        let cluster = Embedded::start(s, &rt).unwrap();
        with_protocol!(p, P => {
            let mut w = Session::<P>::new(cluster.cluster.clone(), DcId(0), 1).unwrap();
            // Keys on both partitions, so stable time needs both to move.
            let keys: Vec<Bytes> = (0..8).map(|i| Bytes::from(format!("k{i}"))).collect();
            for k in &keys {
                w.put(k.clone(), k.clone()).await.unwrap();
            }
            let mut r = Session::<P>::new(cluster.cluster.clone(), DcId(1), 2).unwrap();
            let start = Instant::now();
            loop {
                let got = r.rot(keys.clone()).await.unwrap();
                if got.iter().zip(&keys).all(|(v, k)| v.as_ref() == Some(k)) {
                    break;
                }
                assert!(start.elapsed() < Duration::from_secs(10), "{p}: a remote ROT still reads {got:?}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        tokio::task::spawn_blocking(move || cluster.stop().unwrap()).await.unwrap();
    }
}

/// A delete is a write in the causal order: a reader in another DC that
/// sees the write made after the delete sees the key gone, and a ROT hides
/// the tombstone too. A value that would read as a tombstone is refused.
async fn delete_is_ordered(p: ProtocolName) {
    let rt = tokio::runtime::Handle::current();
    let cluster = Embedded::start(spec(p, "del"), &rt).unwrap();
    with_protocol!(p, P => {
        let mut w = Session::<P>::new(cluster.cluster.clone(), DcId(0), 1).unwrap();
        let mut r = Session::<P>::new(cluster.cluster.clone(), DcId(1), 2).unwrap();
        let (x, y) = (Bytes::from_static(b"x"), Bytes::from_static(b"y"));
        w.put(x.clone(), Bytes::from_static(b"x1")).await.unwrap();
        w.del(x.clone()).await.unwrap();
        assert_eq!(w.get(x.clone()).await.unwrap(), None, "{p}: a session does not read its own delete");
        w.put(y.clone(), Bytes::from_static(b"y1")).await.unwrap();
        let start = Instant::now();
        while r.get(y.clone()).await.unwrap().is_none() {
            assert!(start.elapsed() < Duration::from_secs(10), "{p}: y never became visible in dc1");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        if P::CAUSAL {
            assert_eq!(r.get(x.clone()).await.unwrap(), None, "{p}: y visible before the delete it follows");
        }
        match w.rot(vec![x.clone(), y.clone()]).await {
            Ok(vals) => assert_eq!(vals, vec![None, Some(Bytes::from_static(b"y1"))], "{p}"),
            Err(causeway_net::ClientError::Op(causeway_core::OpError::Unsupported(_))) => {}
            Err(e) => panic!("{p}: rot failed: {e}"),
        }
        let forged = causeway_core::tombstone(7);
        let err = w.put(x.clone(), forged).await.unwrap_err();
        assert!(matches!(err, causeway_net::ClientError::ReservedValue { .. }), "{p}: {err}");
        // What the session refuses before sending, for GET and SET (checked
        // on their own short path) and for the other operations alike.
        let limits = cluster.cluster.config.limits.clone();
        let long_key = Bytes::from(vec![b'k'; limits.max_key_bytes + 1]);
        let long_value = Bytes::from(vec![b'v'; limits.max_value_bytes + 1]);
        let err = w.get(long_key.clone()).await.unwrap_err();
        assert!(matches!(err, causeway_net::ClientError::KeyTooLarge { .. }), "{p}: {err}");
        let err = w.put(long_key.clone(), Bytes::from_static(b"v")).await.unwrap_err();
        assert!(matches!(err, causeway_net::ClientError::KeyTooLarge { .. }), "{p}: {err}");
        let err = w.put(x.clone(), long_value.clone()).await.unwrap_err();
        assert!(matches!(err, causeway_net::ClientError::ValueTooLarge { .. }), "{p}: {err}");
        let err = w.rot(vec![x.clone(), long_key]).await.unwrap_err();
        assert!(matches!(err, causeway_net::ClientError::KeyTooLarge { .. }), "{p}: {err}");
        let location = causeway_core::column::location_key(b"row", b"family", b"column").unwrap();
        if !<P as causeway_core::Protocol>::OPS.contains(&causeway_core::OpKind::Slice) {
            let err = w.get(location).await.unwrap_err();
            assert!(matches!(err, causeway_net::ClientError::ColumnsUnsupported { .. }), "{p}: {err}");
        }
        // The session is still usable after the refusals.
        w.put(x.clone(), Bytes::from_static(b"x2")).await.unwrap();
        assert_eq!(w.get(x).await.unwrap().as_deref(), Some(&b"x2"[..]), "{p}");
    });
    tokio::task::spawn_blocking(move || cluster.stop().unwrap()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_are_causally_ordered_over_tcp() {
    for &p in ProtocolName::ALL {
        delete_is_ordered(p).await;
    }
}

/// Contrarian's 1½-round ROTs send the coordinator's snapshot as a
/// transient message (`Message::transient`): the ROTs complete over TCP, and
/// the log does not grow with them (a journaled forward would cost every
/// ROT an outbox record at the coordinator and a delivery record at the
/// partition).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_read_forwards_are_not_journaled() {
    use causeway_protocols::stabilization::contrarian::Contrarian;
    let rt = tokio::runtime::Handle::current();
    let cluster = Embedded::start(spec(ProtocolName::Contrarian, "transient"), &rt).unwrap();
    let c = cluster.cluster.clone();
    let t = c.topology.clone();
    // Two keys on different partitions of DC 0, so every ROT has a coordinator
    // and one other partition.
    let mut keys: Vec<Bytes> = Vec::new();
    for i in 0.. {
        let k = Bytes::from(format!("k{i}"));
        if keys.iter().all(|o| t.server_for_key(DcId(0), o) != t.server_for_key(DcId(0), &k)) {
            keys.push(k);
        }
        if keys.len() == 2 {
            break;
        }
    }
    let mut s = Session::<Contrarian>::new(c.clone(), DcId(0), 1).unwrap();
    for k in &keys {
        s.put(k.clone(), k.clone()).await.unwrap();
    }
    let nodes: Vec<NodeId> = t.dc_servers(DcId(0)).collect();
    let wal = || nodes.iter().map(|n| cluster.node(*n).unwrap().metrics.wal_bytes.get()).sum::<i64>();
    // Let the writes' own records and the first clock floors settle.
    assert_eq!(s.rot(keys.clone()).await.unwrap(), keys.iter().cloned().map(Some).collect::<Vec<_>>());
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = wal();
    const ROTS: i64 = 300;
    for _ in 0..ROTS {
        assert_eq!(s.rot(keys.clone()).await.unwrap(), keys.iter().cloned().map(Some).collect::<Vec<_>>());
    }
    let grown = wal() - before;
    // Clock floors (about one per second per node) may be written meanwhile;
    // nothing per ROT.
    assert!(grown < ROTS * 8, "the log grew by {grown} bytes over {ROTS} ROTs");
    tokio::task::spawn_blocking(move || cluster.stop().unwrap()).await.unwrap();
}

/// A pipelined session (`causeway bench -P`): its slots are independent
/// causal sessions sharing one connection per server. Every slot writes a
/// photo then an album in one batch each; a reader in the other DC that
/// sees a slot's album sees its photo, and each slot reads its own writes.
async fn pipelined_slots_are_causal_sessions(p: ProtocolName) {
    use causeway_core::{Op, OpResult};
    const DEPTH: u32 = 8;
    let rt = tokio::runtime::Handle::current();
    let cluster = Embedded::start(spec(p, "pipe"), &rt).unwrap();
    let key = |what: &str, slot: u32| Bytes::from(format!("{what}-{slot}"));
    with_protocol!(p, P => {
        let mut w = Session::<P>::pipelined(cluster.cluster.clone(), DcId(0), 1, DEPTH).unwrap();
        assert_eq!(w.depth(), DEPTH as usize);
        for what in ["photo", "album"] {
            let ops = (0..DEPTH).map(|i| Op::Put { key: key(what, i), value: key(what, i) }).collect();
            let r = w.execute_many(ops).await.unwrap();
            assert!(r.iter().all(|r| matches!(r, OpResult::Put)), "{p}: {r:?}");
        }
        // Each slot reads its own album, and fewer operations than slots run too.
        let ops = (0..DEPTH / 2).map(|i| Op::Get { key: key("album", i) }).collect();
        let r = w.execute_many(ops).await.unwrap();
        for (i, r) in r.iter().enumerate() {
            assert_eq!(r, &OpResult::Get(Some(key("album", i as u32))), "{p}: slot {i}");
        }
        let mut r = Session::<P>::pipelined(cluster.cluster.clone(), DcId(1), 100, DEPTH).unwrap();
        let start = Instant::now();
        let mut seen = vec![false; DEPTH as usize];
        while !seen.iter().all(|s| *s) {
            let ops = (0..DEPTH).map(|i| Op::Get { key: key("album", i) }).collect();
            let albums = r.execute_many(ops).await.unwrap();
            let ops = (0..DEPTH).map(|i| Op::Get { key: key("photo", i) }).collect();
            let photos = r.execute_many(ops).await.unwrap();
            for i in 0..DEPTH as usize {
                if albums[i] != OpResult::Get(None) {
                    seen[i] = true;
                    if P::CAUSAL {
                        assert_eq!(photos[i], OpResult::Get(Some(key("photo", i as u32))), "{p}: slot {i}'s album without its photo");
                    }
                }
            }
            assert!(start.elapsed() < Duration::from_secs(10), "{p}: albums never all visible in dc1: {seen:?}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });
    tokio::task::spawn_blocking(move || cluster.stop().unwrap()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_protocol_serves_pipelined_sessions() {
    for &p in ProtocolName::ALL {
        pipelined_slots_are_causal_sessions(p).await;
    }
}

/// Two DCs 200 ms apart: far enough that a write cannot reach the other DC
/// before a session's next request does.
fn two_dcs_200ms_apart(p: ProtocolName, name: &str) -> EmbeddedSpec {
    EmbeddedSpec { rtt_ms: vec![vec![0.0, 200.0], vec![200.0, 0.0]], ..spec(p, name) }
}

/// Client migration over TCP: a NuKV session writes in DC 0, moves to DC 1
/// (200 ms away, so the write cannot have arrived yet) and reads its write
/// at read-your-writes: the read waits there for it (Roohitavaf, Ch. 4:
/// the cost of moving is a blocking read). A causal protocol refuses the
/// move with a typed error and the session keeps working where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nukv_session_moves_to_another_dc_and_still_reads_its_writes() {
    use causeway_core::{OpError, ReadLevel};
    use causeway_net::ClientError;
    let rt = tokio::runtime::Handle::current();
    let far = |p| two_dcs_200ms_apart(p, "migrate");
    let cluster = Embedded::start(far(ProtocolName::Nukv), &rt).unwrap();
    let mut s = Session::<causeway_protocols::nukv::Nukv>::new(cluster.cluster.clone(), DcId(0), 1).unwrap();
    for i in 0..5 {
        let key = Bytes::from(format!("moving-{i}"));
        let value = Bytes::from(format!("v{i}"));
        s.put(key.clone(), value.clone()).await.unwrap();
        s.migrate(DcId(((i + 1) % 2) as u16)).unwrap();
        let got = s.get_at(key, ReadLevel::ReadYourWrite).await.unwrap();
        assert_eq!(got, Some(value), "read-your-writes after moving to DC {}", (i + 1) % 2);
    }
    assert!(matches!(s.migrate(DcId(2)), Err(ClientError::UnknownDc { dc: 2, dcs: 2 })));
    drop(s);
    drop(cluster);

    let cluster = Embedded::start(far(ProtocolName::Cure), &rt).unwrap();
    let mut s = Session::<causeway_protocols::cure::Cure>::new(cluster.cluster.clone(), DcId(0), 1).unwrap();
    s.put(Bytes::from_static(b"k"), Bytes::from_static(b"v")).await.unwrap();
    let e = s.migrate(DcId(1)).unwrap_err();
    assert!(matches!(e, ClientError::Op(OpError::Sticky { dc: 1 })), "{e}");
    assert!(e.to_string().contains("sticky clients"), "{e}");
    assert_eq!(s.get(Bytes::from_static(b"k")).await.unwrap().as_deref(), Some(&b"v"[..]));
}

/// ACCF's per-request checking group over TCP (Roohitavaf, *Consistency
/// for Distributed Data Stores*, Ch. 7, Alg 7.1's `GET(k, cg)`): under the
/// default `per_replica` grouping (group d: DC d's servers), a session of
/// DC 0 writes, names DC 1's group and reads its write there (200 ms away:
/// DC 1's server waits at Alg 7.2 line 3 until the write has arrived), and
/// back in its own group reads it again; one GET names a group of its own
/// (`get_in`). A group the grouping lacks is refused by name and count,
/// changing nothing, and a protocol without checking groups refuses any.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accf_session_names_a_checking_group_and_reads_its_writes() {
    use causeway_core::{CheckingGroupError, OpError};
    use causeway_net::ClientError;
    let rt = tokio::runtime::Handle::current();
    let far = |p| two_dcs_200ms_apart(p, "checking-group");
    let cluster = Embedded::start(far(ProtocolName::Accf), &rt).unwrap();
    let mut s = Session::<causeway_protocols::accf::Accf>::new(cluster.cluster.clone(), DcId(0), 1).unwrap();
    for i in 0..4 {
        let key = Bytes::from(format!("grouped-{i}"));
        let value = Bytes::from(format!("v{i}"));
        s.put(key.clone(), value.clone()).await.unwrap();
        s.set_checking_group(Some(1)).unwrap();
        assert_eq!(s.checking_group(), Some(1));
        let started = Instant::now();
        assert_eq!(s.get(key.clone()).await.unwrap(), Some(value.clone()), "its write, read in DC 1's group");
        // The write reaches DC 1 a one-way trip (100 ms) after it is
        // acknowledged (the cluster delays server links, not clients').
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(60), "DC 1's server waited for the write only {waited:?}");
        s.set_checking_group(None).unwrap();
        assert_eq!(s.get(key.clone()).await.unwrap(), Some(value.clone()), "its write, back home");
        assert_eq!(s.get_in(key, 0).await.unwrap(), Some(value), "its write, naming DC 0's group");
        assert_eq!(s.checking_group(), None, "get_in names its group for one GET");
    }
    let e = s.set_checking_group(Some(2)).unwrap_err();
    assert!(
        matches!(e, ClientError::Op(OpError::CheckingGroup(CheckingGroupError::OutOfRange { group: 2, groups: 2 }))),
        "{e}"
    );
    assert!(e.to_string().contains("has 2 groups"), "{e}");
    assert!(!s.is_broken(), "a refused group ends nothing");
    assert_eq!(s.get(Bytes::from_static(b"grouped-0")).await.unwrap().as_deref(), Some(&b"v0"[..]));
    drop(s);
    drop(cluster);

    let cluster = Embedded::start(spec(ProtocolName::Cure, "checking-group"), &rt).unwrap();
    let mut s = Session::<causeway_protocols::cure::Cure>::new(cluster.cluster.clone(), DcId(0), 1).unwrap();
    let e = s.set_checking_group(Some(0)).unwrap_err();
    assert!(matches!(e, ClientError::Op(OpError::CheckingGroup(CheckingGroupError::Unsupported { group: 0 }))), "{e}");
    s.set_checking_group(None).unwrap();
    s.put(Bytes::from_static(b"k"), Bytes::from_static(b"v")).await.unwrap();
    assert_eq!(s.get(Bytes::from_static(b"k")).await.unwrap().as_deref(), Some(&b"v"[..]));
}
