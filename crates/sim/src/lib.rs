//! # causeway-sim
//!
//! A deterministic discrete-event geo-simulator. It drives the same protocol
//! state machines the network runtime does, in virtual time: a latency matrix
//! between DCs with jitter, intra-DC latency, FIFO channels, per-node clock
//! offset, drift and jumps, link cuts and heals, node pauses, crashes and
//! slowdowns, optional CPU service time per message, closed-loop YCSB-style
//! clients and scripted sessions. One seed, one trace.
//!
//! It is not a network emulator: there is no bandwidth model or packet loss
//! (channels are reliable, as DKVF's contract promises). A crashed node
//! loses its volatile state and, when it restarts, is rebuilt from what it
//! journaled, as the network runtime recovers from its write-ahead log.

pub mod chaos;
pub mod engine;
pub mod metrics;
pub mod report;
pub mod scenario;
pub mod workload;

pub use engine::Sim;
pub use metrics::{SimReport, Summary};
pub use scenario::{Fault, FaultKind, Scenario, ScenarioError, ScriptedClient, ScriptedOp, Workload};

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
