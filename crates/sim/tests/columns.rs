//! Columns per key (Lloyd's dissertation, Table 7.5: "columns per key for
//! reads / for writes", 1–32, default 5): the workload names several
//! columns of each row it reads or writes; Eiger reads and writes a row's
//! columns in one request per server (Cassandra's `multiget_slice` and
//! `batch_mutate` name a row's columns together), and Eventual, the
//! baseline, touches exactly the same columns, grouped the same way.

use causeway_core::column::row_of;
use causeway_core::{DcId, Key, NodeId, Op, OpResult, Protocol};
use causeway_protocols::baseline::eventual::{self, Eventual};
use causeway_protocols::explicit_deps::eiger::{self, Eiger};
use causeway_protocols::kit::testkit::{Dest, TestNet};
use causeway_sim::workload::{Generator, column_key};
use causeway_sim::{Scenario, Sim, Workload};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};

/// Every request the client sent to a server: the locations it names.
type Sent = Vec<(NodeId, Vec<Key>)>;

fn generate(w: &Workload, net_topology: std::sync::Arc<causeway_core::Topology>, seed: u64) -> Op {
    let mut g = Generator::new(w, net_topology, 1);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut id = 0;
    let mut r = g.next_request(w, 0, DcId(0), &mut rng, || {
        id += 1;
        id
    });
    assert_eq!(r.ops.len(), 1);
    r.ops.pop_front().unwrap()
}

/// Invoke `op` on a fresh cluster's client and return the requests it sent
/// (first round / the writes), by the locations each names.
fn sent<P: Protocol>(op: &Op, locations: impl Fn(&P::Msg) -> Option<Vec<Key>>) -> Sent {
    let mut net = TestNet::<P>::new(2, 4, 1, P::Config::default());
    let c = net.client(0, 0);
    net.invoke(c, op.clone());
    net.queue
        .iter()
        .filter(|m| m.from == Dest::Client(c))
        .map(|m| {
            let Dest::Node(to) = m.to else { panic!("a client sends to servers") };
            (to, locations(&m.msg).expect("a read or write request"))
        })
        .collect()
}

fn eiger_locations(m: &eiger::Msg) -> Option<Vec<Key>> {
    match m {
        eiger::Msg::Read { keys, .. } => Some(keys.iter().map(|(_, k)| k.clone()).collect()),
        eiger::Msg::PutReq { key, .. } => Some(vec![key.clone()]),
        eiger::Msg::BatchReq { writes, .. } | eiger::Msg::WotReq { writes, .. } => {
            Some(writes.iter().map(|(k, _)| k.clone()).collect())
        }
        _ => None,
    }
}

fn eventual_locations(m: &eventual::Msg) -> Option<Vec<Key>> {
    match m {
        eventual::Msg::GetReq { key } | eventual::Msg::PutReq { key, .. } => Some(vec![key.clone()]),
        eventual::Msg::GetBatch { keys } => Some(keys.clone()),
        eventual::Msg::PutBatch { writes } => Some(writes.iter().map(|(k, _)| k.clone()).collect()),
        _ => None,
    }
}

/// Each row named in exactly one request, with exactly `columns` columns,
/// and one request per server: returns the rows.
fn one_request_per_row(sent: &Sent, columns: usize) -> BTreeSet<Vec<u8>> {
    let mut per_row: BTreeMap<Vec<u8>, (usize, BTreeSet<usize>)> = BTreeMap::new();
    for (i, (_, keys)) in sent.iter().enumerate() {
        for k in keys {
            let e = per_row.entry(row_of(k).to_vec()).or_default();
            e.0 += 1;
            e.1.insert(i);
        }
    }
    for (row, (cols, requests)) in &per_row {
        assert_eq!(*cols, columns, "row {:?}: {cols} columns", String::from_utf8_lossy(row));
        assert_eq!(requests.len(), 1, "row {:?} is split over requests {requests:?}", String::from_utf8_lossy(row));
    }
    let servers: BTreeSet<NodeId> = sent.iter().map(|(n, _)| *n).collect();
    assert_eq!(servers.len(), sent.len(), "one request per server: {sent:?}");
    per_row.into_keys().collect()
}

fn locations(sent: &Sent) -> BTreeSet<Key> {
    sent.iter().flat_map(|(_, ks)| ks.iter().cloned()).collect()
}

fn topology() -> std::sync::Arc<causeway_core::Topology> {
    TestNet::<Eventual>::new(2, 4, 1, Default::default()).topology.clone()
}

#[test]
fn a_read_of_three_columns_per_key_is_one_request_per_row_for_eiger_and_eventual() {
    let w = Workload {
        recordcount: 200,
        readproportion: 0.0,
        updateproportion: 0.0,
        rotproportion: 1.0,
        rot_size: 5,
        columns_per_read: 3,
        ..Default::default()
    };
    for seed in 1..=20 {
        let op = generate(&w, topology(), seed);
        let Op::Rot { keys } = &op else { panic!("{op:?}") };
        assert_eq!(keys.len(), 15, "5 rows × 3 columns");
        let rows: BTreeSet<&[u8]> = keys.iter().map(|k| row_of(k)).collect();
        assert_eq!(rows.len(), 5);
        assert!(keys.iter().any(|k| !causeway_core::column::is_location_key(k)), "column 0 is the plain key");
        let by_eiger = sent::<Eiger>(&op, eiger_locations);
        let by_eventual = sent::<Eventual>(&op, eventual_locations);
        assert_eq!(one_request_per_row(&by_eiger, 3).len(), 5);
        assert_eq!(one_request_per_row(&by_eventual, 3).len(), 5);
        assert_eq!(locations(&by_eiger), locations(&by_eventual), "both read the same columns");
        assert_eq!(by_eiger.len(), by_eventual.len(), "in as many requests");
    }
}

#[test]
fn a_get_of_three_columns_is_a_read_transaction_over_them() {
    let w = Workload {
        recordcount: 50,
        readproportion: 1.0,
        updateproportion: 0.0,
        columns_per_read: 3,
        ..Default::default()
    };
    let op = generate(&w, topology(), 1);
    let Op::Rot { keys } = &op else { panic!("{op:?}") };
    assert_eq!(keys.len(), 3);
    assert_eq!(one_request_per_row(&sent::<Eiger>(&op, eiger_locations), 3).len(), 1);
    assert_eq!(one_request_per_row(&sent::<Eventual>(&op, eventual_locations), 3).len(), 1);
}

#[test]
fn writes_of_three_columns_per_key_are_one_request_per_row_for_eiger_and_eventual() {
    // A PUT of a row's columns is one non-atomic batch on its server.
    let w = Workload {
        recordcount: 200,
        readproportion: 0.0,
        updateproportion: 1.0,
        columns_per_write: 3,
        ..Default::default()
    };
    let op = generate(&w, topology(), 1);
    let Op::Batch { writes } = &op else { panic!("{op:?}") };
    let ids: BTreeSet<u64> = writes.iter().map(|(_, v)| causeway_core::write_id_of(v).unwrap()).collect();
    assert_eq!(ids.len(), 3, "each column is a write of its own");
    assert!(writes.iter().all(|(_, v)| v.len() == w.fieldlength));
    let by_eiger = sent::<Eiger>(&op, eiger_locations);
    assert_eq!((by_eiger.len(), one_request_per_row(&by_eiger, 3).len()), (1, 1));
    let by_eventual = sent::<Eventual>(&op, eventual_locations);
    assert_eq!(locations(&by_eiger), locations(&by_eventual));
    // A write-only transaction of 4 rows × 3 columns: one sub-request per
    // participant, each row whole in one of them.
    let w = Workload { wotproportion: 1.0, updateproportion: 0.0, wot_size: 4, ..w };
    for seed in 1..=20 {
        let op = generate(&w, topology(), seed);
        let Op::Wot { writes } = &op else { panic!("{op:?}") };
        assert_eq!(writes.len(), 12);
        let by_eiger = sent::<Eiger>(&op, eiger_locations);
        let by_eventual = sent::<Eventual>(&op, eventual_locations);
        assert_eq!(one_request_per_row(&by_eiger, 3).len(), 4);
        assert_eq!(one_request_per_row(&by_eventual, 3).len(), 4);
        assert_eq!(locations(&by_eiger), locations(&by_eventual));
    }
}

#[test]
fn one_column_per_key_is_the_key_value_workload_unchanged() {
    let w = Workload { recordcount: 100, readproportion: 0.5, updateproportion: 0.5, ..Default::default() };
    for seed in 1..=20 {
        match generate(&w, topology(), seed) {
            Op::Get { key } | Op::Put { key, .. } => assert!(!causeway_core::column::is_location_key(&key)),
            other => panic!("{other:?}"),
        }
    }
    let row = Key::from_static(b"user7");
    assert_eq!(column_key(&row, 0), row);
    assert_eq!(row_of(&column_key(&row, 31)), &row[..]);
}

/// A short simulated run: keys count rows, columns count locations; the
/// load phase wrote every column a read asks for; Eiger's replication of a
/// row written in several columns is one message per row.
#[test]
fn a_simulated_run_counts_rows_and_columns() {
    let mut sc = Scenario::new(causeway_core::TopologySpec::full(2, 4), 1_500);
    sc.warmup_ms = 500;
    sc.record_history = true;
    sc.workload = Workload {
        clients_per_dc: 8,
        dcs: vec![0],
        recordcount: 200,
        preload: true,
        readproportion: 0.0,
        rotproportion: 0.9,
        rot_size: 2,
        updateproportion: 0.1,
        columns_per_read: 3,
        columns_per_write: 2,
        ..Default::default()
    };
    let mut sim = Sim::<Eiger>::new(sc).expect("valid scenario");
    let r = sim.run();
    assert_eq!(r.ops_failed, 0);
    let columns = r.throughput_columns_s.expect("a workload with columns reports columns/s");
    // ROTs: 2 rows, 6 columns; updates: 1 row, 2 columns.
    let per_key = columns / r.throughput_keys_s;
    assert!((2.5..3.0).contains(&per_key), "{per_key} columns per key");
    let h = sim.take_history().expect("history");
    let empty = h
        .ops
        .iter()
        .filter(|o| matches!(&o.result, OpResult::Rot(vs) if vs.iter().any(Option::is_none)))
        .filter(|o| o.invoke_us > 500_000)
        .count();
    assert_eq!(empty, 0, "the load phase wrote every column read");
    let rows = r.messages.get("replicate_row").map_or(0, |m| m.count);
    let singles = r.messages.get("replicate").map_or(0, |m| m.count);
    assert!(rows > 0 && singles == 0, "{rows} row messages, {singles} single-column ones");
}
