//! # causeway-protocols
//!
//! Causeway's consistency protocols, each a pure state machine over
//! `causeway-core`'s [`Server`](causeway_core::Server) and
//! [`Client`](causeway_core::Client) traits, reading top-down like its paper.
//! It holds no runtime: the simulator and the network runtime drive these
//! modules unchanged, and nothing here touches sockets, threads, the wall
//! clock or a global random source.
//!
//! The tree shows the families. A protocol is a folder — `mod.rs` (summary,
//! deviations from its paper, the `Protocol` impl), `config.rs`, `msg.rs`
//! (messages and stored versions), `server.rs`, `client.rs`, `tests.rs` —
//! inside the folder of its family, next to the kit that family shares:
//!
//! - [`baseline`]: Eventual (last-writer-wins), the yardstick.
//! - [`stabilization`]: protocols that make remote writes visible once a
//!   stable time covers them — the per-DC [`stable_tree`](stabilization::stable_tree);
//!   GentleRain, CausalSpartanX, Contrarian, Cure.
//! - [`explicit_deps`]: protocols whose writes carry their dependencies,
//!   checked before a replicated write commits — the shared replication
//!   path; COPS, COPS-GT, Eiger, CC-LO.
//! - [`transactional`]: causally consistent read-write transactions by
//!   two-phase commit over partial replication — PaRiS and BPR, one
//!   implementation.
//! - [`services`]: protocols with per-DC service nodes besides the
//!   partitions — EunomiaKV (a Eunomia stabilizer and a receiver per DC).
//! - [`adaptive`]: protocols whose tracking and checking groupings are
//!   configuration — ACCF (Roohitavaf Ch. 7).
//! - [`kit`]: what every protocol shares: client helpers, and the
//!   hand-cranked [`testkit`](kit::testkit) network for step-by-step tests.
//!
//! Protocols are registered once, in [`registry`], which generates
//! [`ProtocolName`] and [`with_protocol!`]; `docs/adding-a-protocol.md`
//! walks through adding one.

#[macro_use]
pub mod registry;

pub mod adaptive;
pub mod baseline;
pub mod explicit_deps;
pub mod kit;
pub mod replicated;
pub mod services;
pub mod stabilization;
pub mod transactional;

pub use registry::{ProtocolName, UnknownProtocol};

// Every protocol by its short name, whatever its family.
pub use adaptive::accf;
pub use baseline::eventual;
pub use explicit_deps::{cc_lo, cops, cops_gt, eiger};
pub use replicated::nukv;
pub use services::{eunomia_kv, sequencer};
pub use stabilization::{causal_spartan_x, contrarian, cure, gentlerain};
pub use transactional::paris;
