//! What a server is, in the topology: the role and placement questions
//! every protocol asks when it is created and when its config is checked.

use causeway_core::{DcId, NodeCtx, NodeId, PartitionId, Topology};

/// The partition this node serves, if it is a partition's server — the
/// one replica of a partition in its DC that takes part in the protocol
/// (service nodes and other replicas of a shared topology stay inert).
pub fn served_partition(ctx: &NodeCtx) -> Option<(DcId, PartitionId)> {
    match ctx.role {
        causeway_core::NodeRole::Partition { dc, partition, replica: 0 }
            if ctx.topology.server(dc, partition) == Some(ctx.id) =>
        {
            Some((dc, partition))
        }
        _ => None,
    }
}

/// The servers of `partition` in the DCs other than `dc`: where a write
/// accepted here is replicated.
pub fn equivalents_elsewhere(topology: &Topology, partition: PartitionId, dc: DcId) -> Vec<NodeId> {
    topology.equivalents(partition).filter(|&(d, _)| d != dc).map(|(_, n)| n).collect()
}

/// Refuse anything but full replication with one server per partition per
/// DC, the placement GentleRain, CausalSpartanX and COPS assume (Roohitavaf Ch. 5, Lloyd §2.2). `why`
/// says what in the protocol needs full replication.
pub fn require_full_replication(name: &str, topology: &Topology, why: &str) -> Result<(), String> {
    if !topology.is_full_replication() {
        return Err(format!("{name} needs full replication (topology.replication = full): {why}"));
    }
    if topology.spec().replicas_per_partition != 1 {
        return Err(format!(
            "{name} runs one server per partition per DC, with no intra-DC replication: \
             topology.replicas_per_partition must be 1"
        ));
    }
    Ok(())
}

/// Declares `Env`, the runtime's side of a server —
/// [`ServerEnv`](causeway_core::ServerEnv) for the invoking module's `Msg`
/// and `Version` — so that a handler's signature reads
/// `env: &mut impl Env` and fits on a line with its message's fields.
macro_rules! server_env {
    () => {
        /// [`ServerEnv`](causeway_core::ServerEnv) for this protocol's
        /// messages and stored versions.
        pub(super) trait Env: causeway_core::ServerEnv<Msg, Version> {}
        impl<E: causeway_core::ServerEnv<Msg, Version>> Env for E {}
    };
}
pub(crate) use server_env;
