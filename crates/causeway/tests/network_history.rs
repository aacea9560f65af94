//! Histories recorded over real TCP pass the checker at the level each
//! protocol promises: the network runtime's histories are checked too, not
//! only the simulator's, since its batching, group commit and reconnects are
//! code the simulator never runs.

use causeway_check::{CheckConfig, Level, check};
use causeway_core::{OpResult, Protocol};
use causeway_net::Fsync;
use causeway_net::embedded::{Embedded, EmbeddedSpec};
use causeway_net::load::{self, LoadSpec};
use causeway_protocols::{ProtocolName, with_protocol};
use std::time::Duration;

#[test]
fn network_histories_pass_the_checker() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for &p in ProtocolName::ALL {
        let dir =
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-nh-{p}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let spec = EmbeddedSpec {
            protocol: p,
            dcs: 2,
            partitions: 2,
            rtt_ms: vec![vec![0.0, 20.0], vec![20.0, 0.0]],
            data_dir: dir.clone(),
            fsync: Fsync::Never,
            params: toml::Table::new(),
            ports: Default::default(),
            tokens: None,
            plaintext: false,
            services: Vec::new(),
            replication: causeway_core::Replication::Full,
            replicas: 1,
        };
        let cluster = Embedded::start(spec, rt.handle()).unwrap();
        let c = cluster.cluster.clone();
        let ls = LoadSpec {
            sessions_per_dc: 4,
            duration: Duration::from_millis(1_500),
            warmup: Duration::from_millis(0),
            keys: 50,
            record_history: true,
            visibility_probes: false,
            ..LoadSpec::default()
        };
        let report = rt.block_on(async { with_protocol!(p, P => load::run::<P>(c, ls, |_| {}).await) });
        cluster.stop().unwrap();
        let _ = std::fs::remove_dir_all(dir);
        let h = report.history.expect("history recorded");
        // A healthy cluster completes every operation: a timeout here is a
        // liveness bug (as Contrarian's ROTs hanging when two servers named
        // one session differently was).
        let timed_out: Vec<_> = h.ops.iter().filter(|o| matches!(o.result, OpResult::Failed(_))).take(3).collect();
        assert!(
            timed_out.is_empty(),
            "{p}: {} operations failed on a healthy cluster, e.g. {timed_out:?}",
            report.errors
        );
        assert!(h.ops.len() > 200, "{p}: only {} operations recorded", h.ops.len());
        // Each protocol is held to what it promises: causal+ for a causal
        // one; a protocol that is not may or may not have shown an anomaly in
        // so short a run, so it is held to eventual consistency only.
        let level = with_protocol!(p, P => Level::promised_by(<P as Protocol>::CAUSAL, <P as Protocol>::SESSIONS));
        let verdict = check(&h, &CheckConfig::at(level));
        assert!(verdict.passed, "{p} over TCP violates {}:\n{verdict}", level.name());
    }
}
