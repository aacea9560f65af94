//! Eunomia driven by N stand-in partitions of DC 0, shipping to a
//! stand-in receiver of DC 1 (see the module above).

use super::peer::{Outbound, serve_inbound};
use super::{CapacityArgs, CapacityError, CapacityReport, Harness, cluster, tokio_listener};
use causeway_core::{DcId, Key, PartitionId, ServiceSpec, TopologySpec};
use causeway_protocols::ProtocolName;
use causeway_protocols::services::eunomia_kv::{EUNOMIA, EunomiaKv, Msg, OpMeta, RECEIVER};
use std::sync::atomic::Ordering::Relaxed;

/// Keys per partition: the paper's 100 000 keys spread over its partitions
/// (§7: uniform over 100 k keys); each report's updates take the next ones.
const KEYS: u64 = 100_000;

pub fn run(a: &CapacityArgs) -> Result<CapacityReport, CapacityError> {
    let services =
        vec![ServiceSpec { name: EUNOMIA.into(), per_dc: 1 }, ServiceSpec { name: RECEIVER.into(), per_dc: 1 }];
    let (cluster, mut listeners) = cluster(ProtocolName::EunomiaKv, TopologySpec::full(2, a.partitions), services, a)?;
    let t = cluster.topology.clone();
    let eunomia = t.service_nodes(DcId(0), t.service_index(EUNOMIA).expect("configured"))[0];
    let receiver = t.service_nodes(DcId(1), t.service_index(RECEIVER).expect("configured"))[0];
    let h = Harness::start::<EunomiaKv>(&cluster, eunomia, &mut listeners, a)?;
    let (spill, rt, counters, stop) = (&h.spill, &h.rt, &h.counters, &h.stop);

    // The receiver of DC 1: takes every shipment, counts its updates, and
    // acknowledges it as a receiver does once it has queued it (`Shipped`).
    let recv_listener =
        rt.block_on(async { tokio_listener(listeners[receiver.idx()].try_clone()?) }).map_err(CapacityError::Bind)?;
    {
        let _guard = rt.enter();
        let mut back = Outbound::<Msg>::start(&cluster, receiver, eunomia, spill, stop.clone())?;
        let c = counters.clone();
        rt.spawn(serve_inbound::<Msg>(
            cluster.clone(),
            receiver,
            recv_listener,
            move |m| {
                if let Msg::Ship { to_us, ops, .. } = m {
                    c.done.fetch_add(ops.len() as u64, Relaxed);
                    back.send_ephemeral(Msg::Shipped { through_us: to_us });
                }
            },
            stop.clone(),
        ));
    }

    // The partitions of DC 0: a report of `ops_per_report` updates every
    // `batch_us`, while fewer than `window` reports wait unacknowledged.
    for p in 0..a.partitions {
        let me = t.server(DcId(0), PartitionId(p)).expect("full replication");
        let _guard = rt.enter();
        let mut out = Outbound::<Msg>::start(&cluster, me, eunomia, spill, stop.clone())?;
        let (batch_us, k, window, c) = (a.batch_us, a.ops_per_report, a.window, counters.clone());
        let mut stop = stop.clone();
        let epoch = std::time::Instant::now();
        rt.spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_micros(batch_us));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let (mut last_us, mut next_key) = (0u64, p as u64);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.changed() => return,
                }
                if out.unacked() >= window {
                    continue;
                }
                // Timestamps as a partition's hybrid clock stamps them:
                // max(clock, last + 1), strictly increasing (Property 2).
                let clock_us = 1_000_000 + epoch.elapsed().as_micros() as u64;
                let ops: Vec<OpMeta> = (0..k)
                    .map(|_| {
                        last_us = clock_us.max(last_us + 1);
                        next_key = (next_key + 1) % KEYS;
                        let key = Key::from(format!("user{next_key}").into_bytes());
                        OpMeta { key, partition: PartitionId(p), vts: [last_us, 0].as_slice().into(), dep_us: 0 }
                    })
                    .collect();
                c.offered.fetch_add(k as u64, Relaxed);
                out.send(Msg::Report { partition: PartitionId(p), ops, partition_time_us: last_us });
            }
        });
    }
    h.finish(a)
}
