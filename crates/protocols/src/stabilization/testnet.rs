//! Test scaffolding the stabilization protocols share: nets whose
//! operations include their ROT slices, and client naming.

use crate::kit::testkit::{InFlight, TestNet, client_traffic};
use causeway_core::{ClientId, DcId, Message, Protocol, TopologySpec};

/// Sessions per DC in these nets.
pub const PER_DC: u32 = 2;
pub const DC0: DcId = DcId(0);
pub const DC1: DcId = DcId(1);

/// The i-th client of DC `dc`.
pub fn cl(dc: u16, i: u32) -> ClientId {
    ClientId(dc as u32 * PER_DC + i)
}

/// A ROT's slices (and Contrarian's coordinator-to-partition snapshot)
/// are part of the operation's own traffic.
pub fn slices<M: Message>(m: &M) -> bool {
    matches!(m.kind(), "slice_req" | "slice_reply" | "snapshot")
}

/// What an operation needs: client traffic and the slices of a ROT.
pub fn op_traffic<M: Message>(m: &InFlight<M>) -> bool {
    client_traffic(m) || slices(&m.msg)
}

pub fn net_spec<P: Protocol>(spec: TopologySpec, cfg: P::Config) -> TestNet<P> {
    let mut n = TestNet::<P>::with_spec(spec, PER_DC, cfg);
    n.also_op_traffic = slices::<P::Msg>;
    n
}

pub fn net_with<P: Protocol>(dcs: u16, partitions: u32, cfg: P::Config) -> TestNet<P> {
    net_spec(TopologySpec::full(dcs, partitions), cfg)
}

/// In a protocol's `tests.rs`: `type Net` and its constructors `net(dcs,
/// partitions)`, `net_with(dcs, partitions, cfg)` and `net_spec(spec, cfg)`.
macro_rules! test_net {
    ($protocol:ty) => {
        type Net = TestNet<$protocol>;
        fn net(dcs: u16, partitions: u32) -> Net {
            net_with(dcs, partitions, Config::default())
        }
        fn net_with(dcs: u16, partitions: u32, cfg: Config) -> Net {
            $crate::stabilization::testnet::net_with(dcs, partitions, cfg)
        }
        #[allow(dead_code)]
        fn net_spec(spec: TopologySpec, cfg: Config) -> Net {
            $crate::stabilization::testnet::net_spec(spec, cfg)
        }
    };
}
pub(crate) use test_net;
