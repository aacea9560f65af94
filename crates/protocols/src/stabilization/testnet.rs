//! Test scaffolding the stabilization protocols share: nets whose
//! operations include their ROT slices, and client naming.

use crate::kit::testkit::{InFlight, TestNet, client_traffic, get, put, stabilize};
use causeway_core::{ClientId, DcId, Message, NodeId, Protocol, TopologySpec};

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

/// Two DCs of one partition, a key and its server in DC 0.
fn one_key<P: Protocol>(cfg: &P::Config) -> (TestNet<P>, causeway_core::Key, causeway_core::NodeId) {
    let net = net_with::<P>(2, 1, cfg.clone());
    let key = net.keys_on_distinct_partitions(1).swap_remove(0);
    let server = net.server_for(DC0, &key);
    (net, key, server)
}

/// One more stabilization round reports nothing again: `value` of `key`
/// was reported visible at `node` exactly once.
pub fn assert_reported_once<P: Protocol>(net: &mut TestNet<P>, node: NodeId, key: &[u8], value: &str) {
    stabilize(net);
    assert_eq!(net.visible_reports(node, key, value), 1, "reported exactly once");
}

/// The GC horizon is journaled, and a restart resumes the stable vector
/// (CausalSpartanX's DSV, Cure's GST, Contrarian's GSS) there. `y` is
/// written in DC 1 only, so nothing stored in DC 0 depends on DC 1's stable
/// time; collection left it in DC 0 with the versions from the horizon on.
/// Without the horizon the vector restarted below them, and a fresh
/// session's read before any heartbeat or stabilization step found none:
/// here it failed as pruned, and in a real restart, whose store forgot the
/// pruning, it read `y` as absent. `cfg` needs a short GC grace (1 ms).
pub fn a_restart_keeps_a_collected_remote_key_readable<P: Protocol>(cfg: P::Config) {
    let (mut net, y, p0) = one_key::<P>(&cfg);
    let y = &y;
    for i in 0..4 {
        net.advance_clocks(5_000);
        stabilize(&mut net); // replicates the last write to DC 0, where GC sees it
        put(&mut net, cl(1, 0), y, &format!("Y{i}"));
    }
    net.advance_clocks(5_000);
    stabilize(&mut net);
    assert!(net.nodes[p0.idx()].store().was_pruned(y), "{}: collection dropped y's oldest versions in DC 0", P::NAME);
    net.restart(p0, &cfg);
    assert!(get(&mut net, cl(0, 1), y).is_some(), "{}: a fresh session reads one of y's kept versions", P::NAME);
}

/// A restart resumes the stable vector at or above its own writes'
/// dependencies (each a stable vector of this DC its writer had seen), so a
/// fresh session's read right after the restart, before any heartbeat or
/// stabilization step, returns the newest write stored there. (Contrarian
/// and Cure restarted at zero, below the newest writes' dependencies on DC
/// 1, and read an older version, or none if collection had dropped them.)
pub fn a_restart_keeps_the_newest_local_write_readable<P: Protocol>(cfg: P::Config) {
    let (mut net, x, p0) = one_key::<P>(&cfg);
    let x = &x;
    for i in 0..4 {
        net.advance_clocks(5_000);
        stabilize(&mut net); // DC 1's heartbeats raise DC 0's stable vector
        get(&mut net, cl(0, 0), x); // and the writer learns it
        put(&mut net, cl(0, 0), x, &format!("X{i}"));
    }
    net.restart(p0, &cfg);
    // A millisecond passes (Cure's snapshot ends a µs below its clock), but
    // no timer fires: no heartbeat or stabilization step yet.
    net.advance_clocks(1_000);
    assert_eq!(get(&mut net, cl(0, 1), x), Some("X3".into()), "{}: a fresh session reads the newest write", P::NAME);
}

/// A partition that had stored nothing crashes after its stable vector
/// moved (`moved`) and comes back with VV = 0; the DC's next stable vector
/// reaches it before any heartbeat from DC 1 does, above what it has
/// received since. It takes it and serves on: any restart may have
/// forgotten heartbeats, so the "stable vector never exceeds what this
/// partition received" check resumes only once it has heard from every DC
/// again. (CausalSpartanX, torture seed 77086, and Cure, seed 505, fired
/// that assertion: only a partition that found versions in its store
/// counted as restarted.)
pub fn a_partition_restarted_with_nothing_stored_serves<P: Protocol>(moved: impl Fn(&TestNet<P>, NodeId) -> bool) {
    for restarted in [0u32, 1] {
        let mut net = net_with::<P>(2, 2, P::Config::default());
        for _ in 0..3 {
            net.advance_clocks(5_000);
            stabilize(&mut net);
        }
        assert!(moved(&net, NodeId(restarted)), "{}: the stable vector moved before the crash", P::NAME);
        net.restart(NodeId(restarted), &P::Config::default());
        net.advance_clocks(5_000);
        net.fire_all_timers();
        net.deliver_while(|m| !matches!(m.msg.kind(), "heartbeat" | "replicate"));
        stabilize(&mut net);
        let c = cl(0, 0);
        let k = net.key_on(restarted);
        put(&mut net, c, &k, "after");
        net.advance_clocks(10); // Cure's snapshot ends a µs below its clock
        assert_eq!(get(&mut net, c, &k), Some("after".into()), "{}: the restarted partition serves", P::NAME);
    }
}

/// In the `tests.rs` of a protocol whose journal keeps its GC horizon and
/// stable vector (CausalSpartanX, Cure, Contrarian): the two restart tests
/// above, at a GC grace of 1 ms.
macro_rules! restart_tests {
    ($protocol:ty) => {
        /// See [`testnet::a_restart_keeps_the_newest_local_write_readable`].
        #[test]
        fn a_restart_keeps_the_newest_local_write_readable() {
            let cfg = Config { gc_grace_us: 1_000, ..Config::default() };
            $crate::stabilization::testnet::a_restart_keeps_the_newest_local_write_readable::<$protocol>(cfg);
        }

        /// See [`testnet::a_restart_keeps_a_collected_remote_key_readable`].
        #[test]
        fn a_restart_keeps_a_collected_remote_key_readable() {
            let cfg = Config { gc_grace_us: 1_000, ..Config::default() };
            $crate::stabilization::testnet::a_restart_keeps_a_collected_remote_key_readable::<$protocol>(cfg);
        }
    };
}
pub(crate) use restart_tests;

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
