//! The stabilization family: a remote write is stored on arrival but made
//! visible only once a *stable time* computed inside the DC covers it — a
//! scalar GST (GentleRain), a per-DC stable vector (CausalSpartanX), a GSS
//! (Contrarian), a vector GST (Cure); PaRiS's UST, in the transactional
//! family, reuses its tree. The shared
//! kit is the per-DC aggregation tree that computes the stable time
//! ([`stable_tree`]), the coordinator's split and gather of a read-only
//! transaction's slices ([`slices`]), the idle pacing of the heartbeat
//! and tree timers ([`pace`]), the collection of versions below a
//! stable-vector horizon ([`version_gc`]), the remote versions waiting
//! for the stable time to report them visible ([`visibility`]), and the
//! partition server's own plumbing around them — paced heartbeats and ticks,
//! the dense-vector steps of Cure and Contrarian ([`partition`]) — and
//! the client's side of Cure's and Contrarian's reads at a snapshot
//! vector ([`snapshot_read`]). Each protocol's `Protocol` impl comes from
//! `stabilization_protocol!`, with the items all four share.

pub mod causal_spartan_x;
pub mod contrarian;
pub mod cure;
pub mod gentlerain;
pub mod pace;
pub mod partition;
pub mod slices;
pub mod snapshot_read;
pub mod stable_tree;
#[cfg(test)]
pub(crate) mod testnet;
pub mod version_gc;
pub mod visibility;

/// The `[protocol]` parameters every stabilization protocol has: Δ, θ, the
/// stable-time tree's fan-out and the idle pacing of both timers. Each
/// protocol's `Config` keeps them as its own fields (they are its TOML
/// table) and names them with `stabilization_config!`.
pub trait StabilizationConfig {
    /// Δ: how often an idle partition heartbeats its replicas.
    fn heartbeat_interval_us(&self) -> u64;
    /// θ: how often a partition steps the stable-time tree (and GC).
    fn stabilization_interval_us(&self) -> u64;
    fn tree_fanout(&self) -> usize;
    fn pace(&self) -> &pace::PaceConfig;
    /// The checks of the protocol's own `[protocol]` fields, after the
    /// family's ([`validate_stabilization`]).
    fn check_own(&self) -> Result<(), String>;
}

/// Implement [`StabilizationConfig`] for a `Config` with fields
/// `heartbeat_interval_us`, `stabilization_interval_us`, `tree_fanout` and
/// `pace`; `check: f` names the checks of the protocol's own fields
/// ([`StabilizationConfig::check_own`]).
macro_rules! stabilization_config {
    ($config:ty) => {
        $crate::stabilization::stabilization_config!($config, check: |_| Ok(()));
    };
    ($config:ty, check: $check:expr) => {
        impl $crate::stabilization::StabilizationConfig for $config {
            fn check_own(&self) -> Result<(), String> {
                ($check)(self)
            }
            fn heartbeat_interval_us(&self) -> u64 {
                self.heartbeat_interval_us
            }
            fn stabilization_interval_us(&self) -> u64 {
                self.stabilization_interval_us
            }
            fn tree_fanout(&self) -> usize {
                self.tree_fanout
            }
            fn pace(&self) -> &$crate::stabilization::pace::PaceConfig {
                &self.pace
            }
        }
    };
}
pub(crate) use stabilization_config;

/// How long an operation may wait for a stable time to cover what it needs
/// (the liveness bound every protocol of the family declares): one WAN
/// trip and a heartbeat for the VV entry to move, a few tree rounds of the
/// stabilization interval for the DC's minimum to reach the server, the
/// clock skew a timestamp may be ahead by, and 20 ms of slack. An operation
/// that arrives at a quiet cluster ([`pace`]) also waits for it to wake:
/// one more WAN trip and a tree round, inside the same terms.
pub fn stable_time_bound_us(cfg: &impl StabilizationConfig, env: &causeway_core::LivenessEnv) -> u64 {
    20_000
        + env.max_rtt_us
        + 2 * env.max_clock_skew_us
        + 2 * cfg.heartbeat_interval_us()
        + 8 * cfg.stabilization_interval_us()
        + 8 * env.intra_dc_rtt_us
}

/// The checks every stabilization protocol's `validate` makes: its timer
/// and tree parameters, with errors that name the `[protocol]` field, and
/// full replication (`why` says what would break without it: a stable-time
/// entry for a DC that does not store a partition would never advance).
pub fn validate_stabilization(
    name: &str,
    cfg: &impl StabilizationConfig,
    topology: &causeway_core::Topology,
    why: &str,
) -> Result<(), String> {
    if cfg.heartbeat_interval_us() == 0 {
        return Err("protocol.heartbeat_interval_us must be positive".into());
    }
    if cfg.stabilization_interval_us() == 0 {
        return Err("protocol.stabilization_interval_us must be positive".into());
    }
    if cfg.tree_fanout() == 0 {
        return Err("protocol.tree_fanout must be at least 1".into());
    }
    cfg.pace().validate()?;
    crate::kit::node::require_full_replication(name, topology, why)?;
    cfg.check_own()
}

/// A stabilization protocol: the unit struct `$name` and its `Protocol`
/// impl, whose items all four protocols share — GET, PUT and ROT, the
/// causal promise, the family's liveness bound ([`stable_time_bound_us`]:
/// every wait is for a stable time or a clock), [`validate_stabilization`]
/// and the protocol's parts ([`protocol_parts`](crate::kit::protocol_parts)).
/// The invocation gives the protocol's name, parts and why it needs full
/// replication (for a dense stable vector, whose entry for a DC that stores
/// no partition would never advance, just the vector's name), then its own
/// items: its mutants, tolerated faults, availability claim and any other.
macro_rules! stabilization_protocol {
    ($name:ident = $id:literal, $server:ident, $client:ident, stable_vector: $vector:literal; $($items:tt)*) => {
        $crate::stabilization::stabilization_protocol!(
            $name = $id, $server, $client,
            full_replication_because:
                concat!("a ", $vector, " entry for a DC that does not store a partition would never advance");
            $($items)*
        );
    };
    ($name:ident = $id:literal, $server:ident, $client:ident, full_replication_because: $why:expr; $($items:tt)*) => {
        pub struct $name;

        impl causeway_core::Protocol for $name {
            const NAME: &'static str = $id;
            const OPS: &'static [causeway_core::OpKind] =
                &[causeway_core::OpKind::Get, causeway_core::OpKind::Put, causeway_core::OpKind::Rot];
            const CAUSAL: bool = true;
            $crate::kit::protocol_parts!($server, $client);

            fn liveness_bound_us(cfg: &Config, env: &causeway_core::LivenessEnv) -> u64 {
                $crate::stabilization::stable_time_bound_us(cfg, env)
            }

            fn validate(cfg: &Config, topology: &causeway_core::Topology) -> Result<(), String> {
                $crate::stabilization::validate_stabilization(Self::NAME, cfg, topology, $why)
            }

            $($items)*
        }
    };
}
pub(crate) use stabilization_protocol;

/// What GentleRain and Cure tolerate: their timestamps are physical clocks,
/// which may be skewed, drift or jump forward, but a clock that steps back
/// can stamp a version under a stable time already handed out (Roohitavaf
/// §5.1.1). Crash-restart is survived by each one's journaled state.
pub const FORWARD_CLOCKS: causeway_core::Faults =
    causeway_core::Faults { backward_jumps: false, ..causeway_core::Faults::ALL };

/// Heartbeats and the stable-time tree's reports and pushes (by message
/// kind) are sent every tick and their handlers keep the maximum (or the
/// newest from each sender): the newest one of each kind says all the older
/// ones did, so the runtimes neither journal nor queue them
/// ([`Message::ephemeral`](causeway_core::Message::ephemeral)).
pub fn ephemeral_kind(kind: &str) -> bool {
    matches!(kind, "heartbeat" | "stable_report" | "stable_push")
}
