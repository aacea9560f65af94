//! The stabilization family: a remote write is stored on arrival but made
//! visible only once a *stable time* computed inside the DC covers it — a
//! scalar GST (GentleRain), a per-DC stable vector (CausalSpartanX), and
//! next a vector GST (Cure), a GSS (Contrarian) or a UST (PaRiS). The shared
//! kit is the per-DC aggregation tree that computes the stable time.

pub mod causal_spartan_x;
pub mod gentlerain;
pub mod slices;
pub mod stable_tree;

/// How long an operation may wait for a stable time to cover what it needs
/// (the liveness bound GentleRain and CausalSpartanX declare): one WAN trip
/// and a heartbeat for the VV entry to move, a few tree rounds of the
/// stabilization interval for the DC's minimum to reach the server, the
/// clock skew a timestamp may be ahead by, and 20 ms of slack.
pub fn stable_time_bound_us(
    heartbeat_interval_us: u64,
    stabilization_interval_us: u64,
    env: &causeway_core::LivenessEnv,
) -> u64 {
    20_000
        + env.max_rtt_us
        + 2 * env.max_clock_skew_us
        + 2 * heartbeat_interval_us
        + 8 * stabilization_interval_us
        + 8 * env.intra_dc_rtt_us
}
