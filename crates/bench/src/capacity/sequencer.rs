//! S-Seq's sequencer driven by N stand-in partitions of one DC, each with
//! `window` requests outstanding (see the module above).

use super::peer::{Outbound, serve_inbound};
use super::{CapacityArgs, CapacityError, CapacityReport, Harness, cluster, tokio_listener};
use causeway_core::{DcId, PartitionId, ServiceSpec, TopologySpec};
use causeway_protocols::ProtocolName;
use causeway_protocols::services::sequencer::{Msg, SSeq};
use std::sync::atomic::Ordering::Relaxed;

pub fn run(a: &CapacityArgs) -> Result<CapacityReport, CapacityError> {
    let services =
        vec![ServiceSpec { name: "sequencer".into(), per_dc: 1 }, ServiceSpec { name: "receiver".into(), per_dc: 1 }];
    let (cluster, mut listeners) = cluster(ProtocolName::SSeq, TopologySpec::full(1, a.partitions), services, a)?;
    let t = cluster.topology.clone();
    let sequencer = t.service_nodes(DcId(0), t.service_index("sequencer").expect("configured"))[0];
    let h = Harness::start::<SSeq>(&cluster, sequencer, &mut listeners, a)?;
    let (spill, rt, counters, stop) = (&h.spill, &h.rt, &h.counters, &h.stop);

    // Each partition asks for `window` numbers at once and for another as
    // each answer comes back: a closed loop of `window` waiting updates.
    for p in 0..a.partitions {
        let me = t.server(DcId(0), PartitionId(p)).expect("full replication");
        let _guard = rt.enter();
        let l = tokio_listener(listeners[me.idx()].try_clone().map_err(CapacityError::Bind)?)
            .map_err(CapacityError::Bind)?;
        let mut out = Outbound::<Msg>::start(&cluster, me, sequencer, spill, stop.clone())?;
        let mut next_id = 0u64;
        for _ in 0..a.window {
            next_id += 1;
            out.send(Msg::SeqReq { id: next_id });
        }
        counters.offered.fetch_add(a.window, Relaxed);
        let c = counters.clone();
        rt.spawn(serve_inbound::<Msg>(
            cluster.clone(),
            me,
            l,
            move |m| {
                if let Msg::SeqReply { .. } = m {
                    c.done.fetch_add(1, Relaxed);
                    c.offered.fetch_add(1, Relaxed);
                    next_id += 1;
                    out.send(Msg::SeqReq { id: next_id });
                }
            },
            stop.clone(),
        ));
    }
    h.finish(a)
}
