//! Contrarian's 1½-round ROTs over real TCP complete. The coordinator
//! forwards its snapshot to the ROT's other partitions as a transient
//! message (sent once, never acknowledged); one handed to the peer link
//! while the link was writing used to wait there for the next hand-over,
//! which, with one session per DC blocked on that very ROT, did not come
//! before the session's deadline: most runs of a one-session-per-DC load
//! lost an operation that way.

use causeway_core::OpResult;
use causeway_net::Fsync;
use causeway_net::embedded::{Embedded, EmbeddedSpec};
use causeway_net::load::{self, LoadSpec};
use causeway_protocols::ProtocolName;
use causeway_protocols::stabilization::contrarian::Contrarian;
use std::time::Duration;

#[test]
fn one_and_a_half_round_rots_complete_over_tcp() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-crl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = EmbeddedSpec {
        dcs: 2,
        partitions: 4,
        rtt_ms: vec![vec![0.0, 80.0], vec![80.0, 0.0]],
        fsync: Fsync::Never,
        ..EmbeddedSpec::default_for(ProtocolName::Contrarian, dir.clone())
    };
    let cluster = Embedded::start(spec, rt.handle()).unwrap();
    let c = cluster.cluster.clone();
    let ls = LoadSpec {
        sessions_per_dc: 1,
        duration: Duration::from_millis(4_000),
        warmup: Duration::from_millis(0),
        keys: 10_000,
        value_size: 8,
        read: 0.0,
        update: 0.05,
        rot: 0.95,
        rot_size: 4,
        record_history: true,
        visibility_probes: false,
        ..LoadSpec::default()
    };
    let report =
        rt.block_on(async { load::run_with_timeout::<Contrarian>(c, ls, Duration::from_secs(2), |_| {}).await });
    cluster.stop().unwrap();
    let _ = std::fs::remove_dir_all(dir);
    let h = report.history.expect("history recorded");
    let failed: Vec<_> = h.ops.iter().filter(|o| matches!(o.result, OpResult::Failed(_))).collect();
    assert!(failed.is_empty(), "{} of {} operations failed, e.g. {:?}", failed.len(), h.ops.len(), failed.first());
}
