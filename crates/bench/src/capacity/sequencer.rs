//! S-Seq's sequencer driven by N stand-in partitions of one DC, each with
//! `window` requests outstanding (see the module above).

use super::peer::{Outbound, serve_inbound};
use super::{CapacityArgs, CapacityError, CapacityReport, Counters, cluster, generator_runtime, tokio_listener};
use causeway_core::{DcId, PartitionId, ServiceSpec, TopologySpec};
use causeway_net::server::{self, NodeThreads};
use causeway_protocols::ProtocolName;
use causeway_protocols::services::sequencer::{Msg, SSeq};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use tokio::sync::watch;

pub fn run(a: &CapacityArgs) -> Result<CapacityReport, CapacityError> {
    let services =
        vec![ServiceSpec { name: "sequencer".into(), per_dc: 1 }, ServiceSpec { name: "receiver".into(), per_dc: 1 }];
    let (cluster, mut listeners) = cluster(ProtocolName::SSeq, TopologySpec::full(1, a.partitions), services, a)?;
    let t = cluster.topology.clone();
    let sequencer = t.service_nodes(DcId(0), t.service_index("sequencer").expect("configured"))[0];
    let spill = super::node_dir_of(&a.dir);
    std::fs::create_dir_all(&spill).map_err(|source| CapacityError::Dir { path: spill.clone(), source })?;
    let rt = generator_runtime()?;
    let counters = Arc::new(Counters { done: AtomicU64::new(0), offered: AtomicU64::new(0) });
    let (stop_tx, stop) = watch::channel(false);
    let listener = std::mem::replace(
        &mut listeners[sequencer.idx()],
        std::net::TcpListener::bind("127.0.0.1:0").map_err(CapacityError::Bind)?,
    );
    let node = server::spawn::<SSeq>(cluster.clone(), sequencer, Some(listener), NodeThreads::Own)?;

    // Each partition asks for `window` numbers at once and for another as
    // each answer comes back: a closed loop of `window` waiting updates.
    for p in 0..a.partitions {
        let me = t.server(DcId(0), PartitionId(p)).expect("full replication");
        let _guard = rt.enter();
        let l = tokio_listener(listeners[me.idx()].try_clone().map_err(CapacityError::Bind)?)
            .map_err(CapacityError::Bind)?;
        let mut out = Outbound::<Msg>::start(&cluster, me, sequencer, &spill, stop.clone())?;
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
    let report = super::measure(a, &counters);
    let _ = stop_tx.send(true);
    node.stop()?;
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    Ok(report)
}
