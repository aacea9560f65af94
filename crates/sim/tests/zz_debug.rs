mod common;
use causeway_core::{Protocol, Topology};
use causeway_protocols::explicit_deps::eiger::{Eiger, State};

#[test]
fn debug_loss() {
    let seed: u64 = std::env::var("SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let size: usize = std::env::var("SIZE").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    let key = std::env::var("KEY").unwrap_or("user10".into());
    let want: Vec<u64> = std::env::var("IDS").unwrap_or_default().split(',').filter_map(|x| x.parse().ok()).collect();
    let bound = std::env::var("BOUND_US").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| <Eiger as Protocol>::liveness_bound_us(&Default::default(), &common::LOSS_LIVENESS_ENV));
    let (r, sim) = common::permanent_loss_during_commit_sim::<Eiger>(seed, size, bound);
    eprintln!("bound {bound} in flight {} reads {} late {}: {:?}", r.in_flight_at_crash, r.reads_checked, r.late.len(), r.late.iter().take(3).collect::<Vec<_>>());
    eprintln!("check {}", r.check_failure.as_deref().map(|s| s.lines().filter(|l| l.contains("FAIL") || l.starts_with("  [")).collect::<Vec<_>>().join("\n")).unwrap_or_default());
    let t = Topology::new(sim.topology().spec().clone()).unwrap();
    for dc in 0..3u16 {
        let n = t.server_for_key(causeway_core::DcId(dc), key.as_bytes()).unwrap();
        eprintln!("DC{dc} node {}:", n.0);
        for v in sim.store(n).versions(key.as_bytes()) {
            let w = causeway_core::write_id_of(&v.value);
            if !(w.is_some_and(|w| want.contains(&w)) || !matches!(v.state, State::Committed { .. })) {
                continue;
            }
            let st = match &v.state {
                State::Txn(p) => format!("Txn {:?} id {:?} coord {:?} remote {}", p.phase, p.info.id, String::from_utf8_lossy(&p.info.coord_key), p.remote),
                s => format!("{s:?}"),
            };
            eprintln!("   w{:?} {}@{} arb {:?} {}", w, v.stamp.lamport(), v.stamp.origin().0, v.arb.map(|a| (a.lamport(), a.origin().0)), st);
        }
    }
}

#[test]
fn debug_pending() {
    let seed: u64 = std::env::var("SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let size: usize = std::env::var("SIZE").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    let bound = <Eiger as Protocol>::liveness_bound_us(&Default::default(), &common::LOSS_LIVENESS_ENV);
    let (r, sim) = common::permanent_loss_during_commit_sim::<Eiger>(seed, size, bound);
    eprintln!("late {}: {:?}", r.late.len(), r.late.iter().take(3).collect::<Vec<_>>());
    let t = Topology::new(sim.topology().spec().clone()).unwrap();
    for n in t.node_ids() {
        let dc = t.dc_of(n);
        for k in sim.store(n).keys_sorted() {
            for v in sim.store(n).versions(&k) {
                let State::Txn(p) = &v.state else { continue };
                let coord = t.server_for_key(dc, &p.info.coord_key).unwrap();
                let parts: Vec<u32> = p.info.keys.iter().map(|k| t.server_for_key(dc, k).unwrap().0).collect();
                eprintln!("node {} dc{} key {} {}@{} {:?} id {:?} coord node {} parts {:?} remote {} coord_vote {:?} origin_arb {:?}",
                    n.0, dc.0, String::from_utf8_lossy(&k), v.stamp.lamport(), v.stamp.origin().0, p.phase, p.info.id, coord.0, parts, p.remote, p.coord_vote, p.origin_arb.map(|a| a.lamport()));
            }
        }
    }
}
