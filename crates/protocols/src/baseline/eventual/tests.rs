//! Eventual's multi-key reads: one request per server, answered in place.

use super::*;
use crate::kit::testkit::{Dest, InFlight, TestNet, bytes, put, text};
use causeway_core::{ClientId, DcId, Key, Op, OpResult, PartitionId};

/// A net of `dcs` DCs of two partitions, one client per DC; DC 0's client
/// (alice), keys `a` and `b` on partition 0 and `c` on partition 1.
fn net_and_keys(dcs: u16) -> (TestNet<Eventual>, ClientId, [Key; 3]) {
    let net = TestNet::<Eventual>::new(dcs, 2, 1, Config::default());
    let topology = &net.topology;
    let on =
        |p: u32| (0..).map(|i| bytes(&format!("k{i}"))).filter(move |k| topology.partition_of(k) == PartitionId(p));
    let mut p0 = on(0);
    let keys = [p0.next().unwrap(), p0.next().unwrap(), on(1).next().unwrap()];
    let alice = net.client(0, 0);
    (net, alice, keys)
}

#[test]
fn a_rot_sends_one_request_per_server_and_returns_values_in_key_order() {
    let (mut net, alice, [a, b, c]) = net_and_keys(1);
    put(&mut net, alice, &a, "a1");
    put(&mut net, alice, &c, "c1");
    net.invoke(alice, Op::Rot { keys: vec![b.clone(), c.clone(), a.clone()] });
    let batches = net.queue.iter().filter(|m| matches!(&m.msg, Msg::GetBatch { keys } if keys.len() == 2)).count();
    let singles = net.queue.iter().filter(|m| matches!(m.msg, Msg::GetReq { .. })).count();
    assert_eq!((batches, singles, net.queue.len()), (1, 1, 2), "one batch for partition 0, one get for 1");
    net.deliver_all();
    let Some(OpResult::Rot(vs)) = net.take_result(alice) else { panic!("the ROT completes") };
    assert_eq!(vs.into_iter().map(text).collect::<Vec<_>>(), vec![None, Some("c1".into()), Some("a1".into())]);
}

#[test]
fn a_batch_with_a_misplaced_key_answers_the_others_and_refuses_it_by_name() {
    let (mut net, alice, [a, _, c]) = net_and_keys(1);
    put(&mut net, alice, &a, "a1");
    let n = net.server_for(DcId(0), &a);
    net.queue.push(InFlight::new(
        Dest::Client(alice),
        Dest::Node(n),
        Msg::GetBatch { keys: vec![a.clone(), c.clone()] },
    ));
    net.deliver_first(|_| true);
    let replies: Vec<Msg> = net.queue.drain(..).map(|m| m.msg).collect();
    assert!(matches!(&replies[0], Msg::Refused { key, .. } if *key == c), "{replies:?}");
    assert!(
        matches!(&replies[1], Msg::GetBatchReply { values } if values.len() == 1 && values[0].0 == a),
        "{replies:?}"
    );
}

/// Several columns of one row (locations `row:default:c<i>`, placed with
/// the row) written by one batch: one `PutBatch`, and one `ReplicateRow`
/// per remote DC carrying them all, as Cassandra ships a row's mutation;
/// a plain key in the same batch still goes as a `Replicate` of its own.
#[test]
fn a_rows_columns_are_written_in_one_request_and_replicated_in_one_message() {
    let (mut net, alice, [a, b, _]) = net_and_keys(2);
    let col = |i: usize| causeway_core::column::location_key(&a, b"default", format!("c{i}").as_bytes()).unwrap();
    let cols = [a.clone(), col(1), col(2)];
    let mut writes: Vec<_> = cols.iter().map(|k| (k.clone(), bytes("v"))).collect();
    writes.push((b.clone(), bytes("b1")));
    net.invoke(alice, Op::Batch { writes });
    assert_eq!(net.queue.len(), 1, "a and its columns and b share a partition: one request");
    net.deliver_first(|_| true);
    let rows: Vec<usize> = net
        .queue
        .iter()
        .filter_map(|m| match &m.msg {
            Msg::ReplicateRow { writes } => Some(writes.len()),
            _ => None,
        })
        .collect();
    let singles = net.queue.iter().filter(|m| matches!(&m.msg, Msg::Replicate { key, .. } if *key == b)).count();
    assert_eq!((rows, singles), (vec![3], 1), "the row in one message, the plain key in its own");
    net.deliver_all();
    assert_eq!(net.take_result(alice), Some(OpResult::Put));
    let bob = net.client(1, 0);
    let got = crate::kit::testkit::rot(&mut net, bob, &cols.iter().collect::<Vec<_>>());
    assert_eq!(got, vec![Some("v".to_string()); 3]);
}
