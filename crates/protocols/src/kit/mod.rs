//! What every protocol shares, so that a protocol's folder holds only its
//! algorithm: client-side routing and fan-out helpers, and the hand-cranked
//! network the step-by-step tests drive.

pub mod client;
pub mod msg;
pub mod node;
pub mod testkit;

/// The `Protocol` items that only name a protocol's own modules: its
/// `Msg`, `Version` and `Config`, and its server and client halves, each
/// built by its `new(cfg, ctx)`. Invoked inside a protocol's
/// `impl Protocol`, so that the impl spells out only what the protocol
/// claims (its name, operations, tolerated faults, liveness bound, checks).
macro_rules! protocol_parts {
    ($server:ident, $client:ident) => {
        type Msg = Msg;
        type Version = Version;
        type Config = Config;
        type Server = $server;
        type Client = $client;

        fn server(cfg: &Config, ctx: causeway_core::NodeCtx) -> $server {
            $server::new(cfg, ctx)
        }

        fn client(cfg: &Config, ctx: causeway_core::ClientCtx) -> $client {
            $client::new(cfg, ctx)
        }
    };
}
pub(crate) use protocol_parts;
