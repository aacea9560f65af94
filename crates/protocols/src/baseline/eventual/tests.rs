//! Eventual's multi-key reads: one request per server, answered in place.

use super::*;
use crate::kit::testkit::{Dest, InFlight, TestNet, bytes, put, text};
use causeway_core::{DcId, Op, OpResult};

/// Keys `(a, b)` on partition 0 and `c` on partition 1.
fn keys(net: &TestNet<Eventual>) -> (causeway_core::Key, causeway_core::Key, causeway_core::Key) {
    let on = |p: u32| {
        (0..)
            .map(|i| bytes(&format!("k{i}")))
            .filter(move |k| net.topology.partition_of(k) == causeway_core::PartitionId(p))
    };
    let mut p0 = on(0);
    (p0.next().unwrap(), p0.next().unwrap(), on(1).next().unwrap())
}

#[test]
fn a_rot_sends_one_request_per_server_and_returns_values_in_key_order() {
    let mut net = TestNet::<Eventual>::new(1, 2, 1, Config::default());
    let alice = net.client(0, 0);
    let (a, b, c) = keys(&net);
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
    let mut net = TestNet::<Eventual>::new(1, 2, 1, Config::default());
    let alice = net.client(0, 0);
    let (a, _, c) = keys(&net);
    put(&mut net, alice, &a, "a1");
    let n = net.server_for(DcId(0), &a);
    net.queue.push(InFlight {
        from: Dest::Client(alice),
        to: Dest::Node(n),
        msg: Msg::GetBatch { keys: vec![a.clone(), c.clone()] },
    });
    net.deliver_first(|_| true);
    let replies: Vec<Msg> = net.queue.drain(..).map(|m| m.msg).collect();
    assert!(matches!(&replies[0], Msg::Refused { key, .. } if *key == c), "{replies:?}");
    assert!(
        matches!(&replies[1], Msg::GetBatchReply { values } if values.len() == 1 && values[0].0 == a),
        "{replies:?}"
    );
}
