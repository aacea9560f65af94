//! Bad input at the edge: each gets a typed refusal naming what was wrong,
//! the offending connection is closed where the stream can no longer be
//! trusted, and the server keeps serving everyone else.

use bytes::Bytes;
use causeway_core::{DcId, NodeId, WIRE_FORMAT};
use causeway_net::embedded::{Embedded, EmbeddedSpec};
use causeway_net::frame::{MAX_SLOTS_PER_CONNECTION, Wire, WireError, decode, encode, read_frame};
use causeway_net::tls::{ClientTls, Conn};
use causeway_net::{Fsync, Session};
use causeway_protocols::ProtocolName;
use causeway_protocols::eventual::{Eventual, Msg, Version};
use tokio::io::AsyncWriteExt;

type W = Wire<Msg>;

async fn send(s: &mut Conn, b: &[u8]) {
    s.write_all(b).await.unwrap();
    s.flush().await.unwrap();
}

async fn answer(s: &mut Conn) -> Option<W> {
    let b = tokio::time::timeout(std::time::Duration::from_secs(5), read_frame(s, 1 << 20)).await.ok()?.ok()??;
    decode::<Msg>(&b).ok()
}

async fn closed(s: &mut Conn) -> bool {
    matches!(
        tokio::time::timeout(std::time::Duration::from_secs(5), read_frame(s, 1 << 20)).await,
        Ok(Ok(None)) | Ok(Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_and_the_server_keeps_serving() {
    let rt = tokio::runtime::Handle::current();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = EmbeddedSpec {
        protocol: ProtocolName::Eventual,
        dcs: 2,
        partitions: 1,
        rtt_ms: Vec::new(),
        data_dir: dir,
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
    let id = c.config.cluster_id.clone();
    let limits = c.config.limits.clone();
    let tls = ClientTls::load(&c).unwrap();

    // A healthy client stays connected through everything below.
    let mut good = Session::<Eventual>::new(c.clone(), DcId(0), 1).unwrap();
    good.put(Bytes::from_static(b"k"), Bytes::from_static(b"v0")).await.unwrap();

    // 1. Garbage instead of a hello.
    let mut s = tls.dial(&c, NodeId(0)).await.unwrap();
    send(&mut s, &[0, 0, 0, 3, 0xff, 0xfe, 0xfd]).await;
    assert!(matches!(answer(&mut s).await, Some(W::Refused(WireError::BadFrame(_)))));

    // 2. An oversized frame header.
    let mut s = tls.dial(&c, NodeId(0)).await.unwrap();
    send(&mut s, &u32::MAX.to_be_bytes()).await;
    let r = answer(&mut s).await;
    assert!(matches!(&r, Some(W::Refused(WireError::BadFrame(m))) if m.contains("exceeds")), "{r:?}");

    // 3. Another cluster's hello.
    let mut s = tls.dial(&c, NodeId(0)).await.unwrap();
    send(
        &mut s,
        &encode::<Msg>(&W::HelloClient { cluster_id: "someone-else".into(), token: None, format: WIRE_FORMAT }),
    )
    .await;
    let r = answer(&mut s).await;
    assert!(matches!(&r, Some(W::Refused(WireError::WrongCluster { got })) if got == "someone-else"), "{r:?}");
    // The refusal does not tell the caller the right cluster id.
    assert!(!format!("{r:?}").contains(id.as_str()), "{r:?}");

    // 3b. A hello of another wire format (another version of Causeway), peer or client.
    let mut s = tls.dial(&c, NodeId(0)).await.unwrap();
    send(&mut s, &encode::<Msg>(&W::HelloClient { cluster_id: id.clone(), token: None, format: 1 })).await;
    let r = answer(&mut s).await;
    assert!(matches!(&r, Some(W::Refused(WireError::Format { got: 1, want: WIRE_FORMAT }))), "{r:?}");
    let mut s = tls.dial(&c, NodeId(0)).await.unwrap();
    send(&mut s, &peer_hello(&id, 1, 0, 1)).await;
    let r = answer(&mut s).await;
    assert!(matches!(&r, Some(W::Refused(WireError::Format { got: 1, want: WIRE_FORMAT }))), "{r:?}");

    // 4. A peer claiming a node id outside the topology, and one addressing the wrong node.
    let mut s = tls.dial(&c, NodeId(0)).await.unwrap();
    send(&mut s, &peer_hello(&id, 99, 0, WIRE_FORMAT)).await;
    assert!(matches!(answer(&mut s).await, Some(W::Refused(WireError::UnknownNode(99)))));
    let mut s = tls.dial(&c, NodeId(0)).await.unwrap();
    send(&mut s, &peer_hello(&id, 1, 1, WIRE_FORMAT)).await;
    assert!(matches!(answer(&mut s).await, Some(W::Refused(WireError::NotForMe { me: 0, to: 1 }))));
    // A client's certificate cannot say hello as a peer (it would inject
    // replicated writes and take node 1's sequence numbers).
    let mut s = tls.dial(&c, NodeId(0)).await.unwrap();
    send(&mut s, &peer_hello(&id, 1, 0, WIRE_FORMAT)).await;
    let r = answer(&mut s).await;
    assert!(
        matches!(&r, Some(W::Refused(WireError::Unauthenticated { claimed })) if claimed == "node-1.causeway"),
        "{r:?}"
    );

    // 5. A client connection: over-limit key and value, a peer message, then an
    //    unknown message kind (which leaves the stream untrustworthy: closed).
    let mut s = tls.dial(&c, NodeId(0)).await.unwrap();
    send(&mut s, &encode::<Msg>(&W::HelloClient { cluster_id: id.clone(), token: None, format: WIRE_FORMAT })).await;
    assert!(matches!(answer(&mut s).await, Some(W::WelcomeClient { .. })));
    let big_key = Bytes::from(vec![b'k'; limits.max_key_bytes + 1]);
    send(&mut s, &encode(&W::Request(Msg::GetReq { key: big_key }))).await;
    let r = answer(&mut s).await;
    assert!(
        matches!(&r, Some(W::Refused(WireError::KeyTooLarge { max, .. })) if *max == limits.max_key_bytes),
        "{r:?}"
    );
    let big_value = Bytes::from(vec![0u8; limits.max_value_bytes + 1]);
    send(&mut s, &encode(&W::Request(Msg::PutReq { key: Bytes::from_static(b"k"), value: big_value }))).await;
    assert!(matches!(answer(&mut s).await, Some(W::Refused(WireError::ValueTooLarge { .. }))));
    let forged = Msg::Replicate {
        key: Bytes::from_static(b"k"),
        version: Version { value: Bytes::from_static(b"forged"), ts: u64::MAX, dc: DcId(1) },
    };
    send(&mut s, &encode(&W::Request(forged))).await;
    let r = answer(&mut s).await;
    assert!(matches!(&r, Some(W::Refused(WireError::NotAClientRequest(k))) if k == "replicate"), "{r:?}");
    // The same connection still works after those refusals.
    send(&mut s, &encode(&W::Request(Msg::GetReq { key: Bytes::from_static(b"k") }))).await;
    assert!(matches!(answer(&mut s).await, Some(W::Reply(Msg::GetReply { .. }))));
    // A logical session beyond the per-connection limit is refused by name;
    // one within it is answered under its own slot.
    let get = || Msg::GetReq { key: Bytes::from_static(b"k") };
    send(&mut s, &encode(&W::RequestOn { slot: MAX_SLOTS_PER_CONNECTION, msg: get() })).await;
    let r = answer(&mut s).await;
    assert!(
        matches!(&r, Some(W::Refused(WireError::TooManySlots { slot, .. })) if *slot == MAX_SLOTS_PER_CONNECTION),
        "{r:?}"
    );
    send(&mut s, &encode(&W::RequestOn { slot: 3, msg: get() })).await;
    let r = answer(&mut s).await;
    assert!(matches!(&r, Some(W::ReplyOn { slot: 3, msg: Msg::GetReply { .. } })), "{r:?}");
    // An enum variant index no message has.
    let mut frame = vec![0, 0, 0, 2];
    frame.extend_from_slice(&[7, 200]);
    send(&mut s, &frame).await;
    assert!(matches!(answer(&mut s).await, Some(W::Refused(WireError::BadFrame(_)))));
    assert!(closed(&mut s).await, "a connection that sent an undecodable frame must be closed");

    // The forged replicate never landed, and the healthy session is unaffected.
    assert_eq!(good.get(Bytes::from_static(b"k")).await.unwrap().as_deref(), Some(&b"v0"[..]));
    good.put(Bytes::from_static(b"k"), Bytes::from_static(b"v1")).await.unwrap();
    assert_eq!(good.get(Bytes::from_static(b"k")).await.unwrap().as_deref(), Some(&b"v1"[..]));
    tokio::task::spawn_blocking(move || cluster.stop().unwrap()).await.unwrap();
}

/// Eiger's write-only transactions are at most `MAX_WOT_KEYS` keys (Lloyd
/// et al., "Stronger Semantics for Low-Latency Geo-Replicated Storage",
/// NSDI 2013, §5.4: every participant holds a transaction's writes
/// pending, and the coordinator answers once every cohort voted). The
/// client library refuses a larger one before sending anything; one sent
/// as raw frames straight to the servers (each participant its share, as
/// the library would split it) is refused by every participant with a
/// typed answer (`WotReply` with a non-retryable error, which the client
/// library reports as `BadRequest`), nothing of it becomes visible in
/// either DC, and the same connections then carry a transaction of
/// exactly `MAX_WOT_KEYS` keys, which commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_write_only_transaction_is_refused_and_nothing_is_applied() {
    use causeway_protocols::eiger::{Eiger, MAX_WOT_KEYS, Msg as EMsg, TxnId, TxnInfo};
    type EW = Wire<EMsg>;
    let rt = tokio::runtime::Handle::current();
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-bad-wot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = EmbeddedSpec {
        protocol: ProtocolName::Eiger,
        dcs: 2,
        partitions: 2,
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
    let cluster = Embedded::start(spec, &rt).unwrap();
    let c = cluster.cluster.clone();
    let id = c.config.cluster_id.clone();
    let tls = ClientTls::load(&c).unwrap();
    let dc0: Vec<NodeId> = c.topology.dc_servers(DcId(0)).collect();
    assert_eq!(dc0.len(), 2);

    // One client connection to each server of DC0.
    let mut conns = Vec::new();
    for &n in &dc0 {
        let mut s = tls.dial(&c, n).await.unwrap();
        send(&mut s, &encode::<EMsg>(&EW::HelloClient { cluster_id: id.clone(), token: None, format: WIRE_FORMAT }))
            .await;
        let w = tokio::time::timeout(std::time::Duration::from_secs(5), read_frame(&mut s, 1 << 20))
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(matches!(decode::<EMsg>(&w), Ok(EW::WelcomeClient { .. })));
        conns.push(s);
    }
    async fn eanswer(s: &mut Conn) -> Option<EW> {
        let b = tokio::time::timeout(std::time::Duration::from_secs(5), read_frame(s, 1 << 20)).await.ok()?.ok()??;
        decode::<EMsg>(&b).ok()
    }
    // Sends a transaction of `keys` (the first is the coordinator key),
    // each participant its writes, as the client library would.
    let wot = |seq: u64, keys: &[Bytes]| {
        let info =
            TxnInfo { id: TxnId { session: 0xbad, seq }, coord_key: keys[0].clone(), keys: keys.to_vec().into() };
        let frames: Vec<Vec<u8>> = dc0
            .iter()
            .map(|&n| {
                let writes = keys
                    .iter()
                    .filter(|k| c.topology.server_for_key(DcId(0), k) == Some(n))
                    .map(|k| (k.clone(), Bytes::from_static(b"v")))
                    .collect();
                encode(&EW::Request(EMsg::WotReq { info: Box::new(info.clone()), writes, deps: Vec::new(), floor: 0 }))
            })
            .collect();
        (info.id, frames)
    };
    let keys = |prefix: &str, n: usize| (0..n).map(|i| Bytes::from(format!("{prefix}{i}"))).collect::<Vec<_>>();

    // One key over the limit: every participant refuses it by name.
    let big = keys("big", MAX_WOT_KEYS + 1);
    let (big_id, frames) = wot(1, &big);
    for (s, f) in conns.iter_mut().zip(&frames) {
        send(s, f).await;
    }
    for s in conns.iter_mut() {
        let r = eanswer(s).await;
        assert!(
            matches!(&r, Some(EW::Reply(EMsg::WotReply { id, result: Err((false, why)) }))
                if *id == big_id && why.contains(&format!("at most {MAX_WOT_KEYS} keys"))),
            "a participant did not refuse a transaction of {} keys by name; it answered {r:?}",
            big.len()
        );
    }

    // Exactly at the limit, on the same connections: committed (the
    // coordinator answers; the cohort answers nothing).
    let full = keys("full", MAX_WOT_KEYS);
    let (full_id, frames) = wot(2, &full);
    for (s, f) in conns.iter_mut().zip(&frames) {
        send(s, f).await;
    }
    let coord = dc0.iter().position(|&n| c.topology.server_for_key(DcId(0), &full[0]) == Some(n)).unwrap();
    let r = eanswer(&mut conns[coord]).await;
    assert!(
        matches!(&r, Some(EW::Reply(EMsg::WotReply { id, result: Ok(_) })) if *id == full_id),
        "a transaction of exactly {MAX_WOT_KEYS} keys after the refusal was not committed: {r:?}"
    );

    // Nothing of the refused transaction is visible in either DC; all of
    // the accepted one is, in DC0 at once and in DC1 once replicated.
    for dc in [0, 1] {
        let mut s = Session::<Eiger>::new(c.clone(), DcId(dc), 1).unwrap();
        assert_eq!(s.rot(big.clone()).await.unwrap(), vec![None; big.len()], "dc{dc}: the refused transaction");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let got = s.rot(full.clone()).await.unwrap();
            if got.iter().all(|v| v.as_deref() == Some(&b"v"[..])) {
                break;
            }
            assert!(got.iter().all(Option::is_none), "dc{dc}: the accepted transaction is half-visible: {got:?}");
            assert!(dc == 1 && std::time::Instant::now() < deadline, "dc{dc}: the accepted transaction is missing");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(s.rot(big.clone()).await.unwrap(), vec![None; big.len()], "dc{dc}: the refused transaction");
    }
    tokio::task::spawn_blocking(move || cluster.stop().unwrap()).await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A peer's hello from node `from` to node `to`, of wire format `format`.
fn peer_hello(cluster_id: &str, from: u32, to: u32, format: u32) -> Vec<u8> {
    encode::<Msg>(&W::HelloPeer {
        cluster_id: cluster_id.into(),
        from: NodeId(from),
        to: NodeId(to),
        incarnation: 1,
        format,
    })
}
