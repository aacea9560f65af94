//! # causeway-sim
//!
//! A deterministic discrete-event geo-simulator. It drives the same protocol
//! state machines the network runtime does, in virtual time: a latency matrix
//! between DCs with jitter, intra-DC latency, FIFO channels, per-node clock
//! offset, drift and jumps, link cuts and heals, node pauses and slowdowns,
//! crashes that strike between a node's log append, its sync and its output
//! (each node drives the same [`causeway_core::Node`] core as the network
//! runtime, over a simulated write-ahead log), CPU time per message during
//! which a node's output waits and its inputs queue, closed-loop YCSB-style
//! clients and scripted sessions. One seed, one trace.
//!
//! It is not a network emulator: there is no bandwidth model or packet loss
//! (channels are reliable, as DKVF's contract promises). Its crashes lose
//! what a machine's crash loses: every log record not yet synced (under the
//! `always` and `group` sync policies; under `never` a turn's records count
//! as on disk once the turn ends, which only a process crash honours).

pub mod chaos;
pub mod engine;
pub mod interactive;
mod log;
pub mod metrics;
pub mod report;
pub mod scenario;
pub mod workload;

pub use engine::Sim;
pub use metrics::{SimReport, Summary};
pub use scenario::{
    CrashPoint, DurabilitySpec, Fault, FaultKind, FsyncPolicy, Scenario, ScenarioError, ScriptedClient, ScriptedOp,
    Workload,
};

use causeway_protocols::{ProtocolName, with_protocol};

/// Run a scenario with the named protocol.
pub fn run_named(protocol: ProtocolName, scenario: Scenario) -> Result<SimReport, ScenarioError> {
    with_protocol!(protocol, P => {
        let mut sim = Sim::<P>::new(scenario)?;
        Ok(sim.run())
    })
}

/// Run a scenario with the named protocol and also return its history (when
/// the scenario records one).
pub fn run_named_with_history(
    protocol: ProtocolName,
    scenario: Scenario,
) -> Result<(SimReport, Option<causeway_core::History>), ScenarioError> {
    with_protocol!(protocol, P => {
        let mut sim = Sim::<P>::new(scenario)?;
        let r = sim.run();
        Ok((r, sim.take_history()))
    })
}
