//! The explicit-dependency family: a write carries the writes it depends
//! on, and a replicated write commits at a remote DC only once its
//! dependencies have (`dep_check`; Lloyd, *Stronger Semantics for
//! Low-Latency Geo-Replicated Storage*, §2). COPS, COPS-GT and Eiger share the
//! [`replication`] path. CC-LO (the COPS-SNOW design) runs its own combined
//! dependency and readers check ([`cc_lo`]).

pub mod cc_lo;
pub mod cops;
pub mod cops_gt;
pub mod eiger;
pub mod replication;

/// The `Protocol` items COPS, COPS-GT and Eiger share: the causal promise,
/// the protocol's parts ([`protocol_parts`](crate::kit::protocol_parts)),
/// and `validate` — the config's own `check`, then the topology the shared
/// replication path needs ([`replication::validate_topology`]).
///
/// `two_round_reads` adds what COPS-GT's and Eiger's read-only transactions
/// share (Lloyd §6.1, §5.3): the liveness bound of two local read rounds, a
/// round that lost its version to collection restarting once more after a
/// back-off; and torture parameters that shorten `trans_time` (5 s by
/// default, longer than a torture run) to 50–400 ms and the GC period to
/// 10–50 ms, so that version, dependency and client-metadata collection and
/// read restarts all run under the faults.
macro_rules! explicit_deps_protocol {
    ($server:ident, $client:ident) => {
        const CAUSAL: bool = true;
        $crate::kit::protocol_parts!($server, $client);

        fn validate(cfg: &Config, topology: &causeway_core::Topology) -> Result<(), String> {
            cfg.check().map_err(|e| e.to_string())?;
            $crate::explicit_deps::replication::validate_topology(Self::NAME, topology)
        }
    };
    ($server:ident, $client:ident, two_round_reads) => {
        $crate::explicit_deps::explicit_deps_protocol!($server, $client);

        fn liveness_bound_us(_cfg: &Config, env: &causeway_core::LivenessEnv) -> u64 {
            10_000 + 16 * env.intra_dc_rtt_us
        }

        fn torture_params(draw: &mut dyn FnMut(u64, u64) -> u64) -> Vec<(&'static str, u64)> {
            vec![("trans_time_ms", draw(50, 400)), ("gc_interval_ms", draw(10, 50)), ("clock_margin_ms", 10)]
        }
    };
}
pub(crate) use explicit_deps_protocol;
