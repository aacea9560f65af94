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
            remote_replica: Default::default(),
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
        let dc_order = with_protocol!(p, P => <P as Protocol>::LINEARIZES_DC_WRITES);
        let verdict = check(&h, &CheckConfig::at(level).with_dc_write_order(dc_order));
        assert!(verdict.passed, "{p} over TCP violates {}:\n{verdict}", level.name());
    }
}

/// PaRiS and BPR over TCP with partial replication (3 DCs, each partition
/// in 2; the DCs not storing a partition spread over its replicas
/// round-robin) and the load generator's interactive transactions: begin,
/// a read round, writes, commit, each step a round trip. Every transaction
/// is recorded as one, and the history passes causal+ with its
/// transactions' snapshots and atomicity.
#[test]
fn interactive_transactions_over_partial_replication_pass_the_checker() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for p in [ProtocolName::Paris, ProtocolName::Bpr] {
        let dir =
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-itx-{p}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let spec = EmbeddedSpec {
            dcs: 3,
            partitions: 3,
            rtt_ms: vec![vec![0.0, 10.0, 20.0], vec![10.0, 0.0, 10.0], vec![20.0, 10.0, 0.0]],
            fsync: Fsync::Never,
            replication: causeway_core::Replication::Partial { factor: 2 },
            remote_replica: causeway_core::RemoteReplica::RoundRobin,
            ..EmbeddedSpec::default_for(p, dir.clone())
        };
        let cluster = Embedded::start(spec, rt.handle()).unwrap();
        let c = cluster.cluster.clone();
        let ls = LoadSpec {
            sessions_per_dc: 3,
            duration: Duration::from_millis(1_500),
            warmup: Duration::from_millis(0),
            keys: 30,
            read: 0.3,
            update: 0.2,
            rot: 0.1,
            interactive: 0.4,
            txn_reads: 3,
            txn_writes: 2,
            record_history: true,
            visibility_probes: false,
            ..LoadSpec::default()
        };
        let report = rt.block_on(async { with_protocol!(p, P => load::run::<P>(c, ls, |_| {}).await) });
        cluster.stop().unwrap();
        let _ = std::fs::remove_dir_all(dir);
        assert_eq!(report.errors, 0, "{p}: operations failed on a healthy cluster");
        assert!(report.latency.contains_key("interactive"), "{p}: no interactive latency: {:?}", report.latency.keys());
        let h = report.history.expect("history recorded");
        let txns = h
            .ops
            .iter()
            .filter(
                |o| matches!(&o.op, causeway_core::Op::Txn { reads, writes } if reads.len() == 3 && writes.len() == 2),
            )
            .count();
        assert!(txns > 20, "{p}: only {txns} interactive transactions recorded");
        let verdict = check(&h, &CheckConfig::at(Level::CausalPlus));
        assert!(verdict.passed, "{p} over TCP with interactive transactions violates causal+:\n{verdict}");
    }
}
