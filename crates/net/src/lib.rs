//! # causeway-net
//!
//! The network runtime: every protocol of `causeway-protocols`, unchanged, as
//! real servers over TCP. Length-prefixed postcard frames ([`frame`]), peer
//! links with DKVF's reliable FIFO contract across reconnects ([`link`]), a
//! write-ahead log so an acknowledged write survives `kill -9` ([`wal`]), the
//! node runtime ([`server`]), the async client library ([`client`]), the
//! embedded one-command cluster ([`embedded`]), mutual TLS on every
//! connection ([`tls`]), access tokens with roles ([`auth`]), metrics, health and a live dashboard over HTTP ([`metrics`],
//! [`http`], [`dashboard`]) and the
//! Redis-protocol front door ([`redis`]).
//!
//! It is not a simulator: time is the machine's clock, and runs are not
//! reproducible. Protocol logic lives in `causeway-protocols`, never here.

pub mod acks;
pub mod auth;
pub mod client;
pub mod config;
pub mod dashboard;
pub mod embedded;
pub mod frame;
pub mod http;
pub mod identity;
mod idle;
pub mod inbox;
mod linger;
pub mod link;
pub mod load;
pub mod metrics;
pub mod redis;
mod reply_pipe;
pub mod server;
pub mod tls;
pub mod transaction;
pub mod wal;

pub use client::{ClientError, Session, probe};
pub use config::{Cluster, ClusterConfig, ConfigError, Fsync};
pub use server::{NodeError, NodeHandle};
pub use transaction::Transaction;
