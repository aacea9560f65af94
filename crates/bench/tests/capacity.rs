//! The capacity harness against real service nodes: stand-in partitions
//! reach one Eunomia and one sequencer over TCP and TLS, the services
//! order their updates, and the counts and CPU add up.

use causeway_bench::capacity::{CapacityArgs, Service, run};
use std::time::Duration;

fn args(service: Service, name: &str) -> CapacityArgs {
    CapacityArgs {
        service,
        partitions: 4,
        batch_us: 1_000,
        ops_per_report: 20,
        window: 4,
        warmup: Duration::from_millis(300),
        measure: Duration::from_millis(700),
        fsync: causeway_net::Fsync::Never,
        plaintext: false,
        dir: std::env::temp_dir().join(format!("causeway-capacity-test-{name}-{}", std::process::id())),
    }
}

#[test]
fn eunomia_ships_what_the_partitions_report_and_the_sequencer_answers_them() {
    for (service, name) in [(Service::Eunomia, "eunomia"), (Service::Sequencer, "sequencer")] {
        let a = args(service, name);
        let r = run(&a).unwrap_or_else(|e| panic!("{name}: {e}"));
        let _ = std::fs::remove_dir_all(&a.dir);
        // Four partitions reporting 20 updates a millisecond offer 80 000
        // a second; even a loaded machine orders a few thousand.
        assert!(r.ops_s > 2_000.0, "{name}: {r:?}");
        assert!(r.service_cpu_us_per_op.is_finite() && r.service_cpu_us_per_op > 0.0, "{name}: {r:?}");
        if service == Service::Eunomia {
            // Nothing is shipped that was not reported (the window's edges
            // may hold up to a round's worth either way).
            assert!(r.ops_s <= r.offered_ops_s * 1.2 + 20_000.0, "{name}: {r:?}");
        }
    }
}
