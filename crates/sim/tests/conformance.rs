//! The conformance suite: every registered protocol, held to the same
//! promises. A protocol gets these tests by being registered
//! (`crates/protocols/src/registry.rs`); nothing here names one.
//!
//! - reads its own writes, and monotonic reads across a partition;
//! - photo-then-album across DCs: never for a causal protocol, and seen for
//!   one that is not (the scenario's proof that it can fail);
//! - ACL/album and photo/album read with read-only transactions in every DC;
//! - convergence after a partition heals;
//! - a node restarted from what it journaled keeps every acknowledged write
//!   and serves on, and goes on serving its DC at once while another DC is
//!   cut off (where the protocol promises availability under partitions);
//! - a request the server cannot serve (a key it does not store) is refused
//!   with a typed error — the client's operation completes, it never waits;
//! - each of the protocol's deliberately broken variants
//!   ([`Protocol::MUTANTS`]) is caught.

mod common;

use causeway_core::{ClientCtx, ClientId, DcId, Message, NodeId, Op, OpResult, Protocol, Topology, TopologySpec};
use causeway_protocols::kit::testkit::{Dest, InFlight, TestNet, bytes};
use causeway_protocols::{ProtocolName, with_protocol};
use causeway_sim::{Fault, FaultKind, Scenario};
use std::sync::Arc;

/// Run `f` for every registered protocol, naming the protocol on failure
/// (a panic, such as the testkit's "operation did not complete", included).
///
/// `CAUSEWAY_PROTOCOLS=paris,bpr` limits a run to the protocols named
/// (for working on one; CI sets nothing and runs them all).
fn each(f: impl Fn(ProtocolName) -> Result<(), String> + std::panic::RefUnwindSafe) {
    let only: Option<Vec<ProtocolName>> = std::env::var("CAUSEWAY_PROTOCOLS")
        .ok()
        .map(|s| s.split(',').map(|n| n.trim().parse().expect("a protocol name")).collect());
    let failures: Vec<String> = ProtocolName::ALL
        .iter()
        .filter(|p| only.as_ref().is_none_or(|o| o.contains(p)))
        .filter_map(|&p| {
            let outcome = std::panic::catch_unwind(|| f(p)).unwrap_or_else(|e| {
                let msg =
                    e.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| e.downcast_ref::<String>().cloned());
                Err(format!("panicked: {}", msg.unwrap_or_default()))
            });
            outcome.err().map(|e| format!("{p}: {e}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_protocol_reads_its_own_writes() {
    each(|p| {
        let misses = with_protocol!(p, P => common::read_your_writes_local::<P>(1));
        if misses == 0 { Ok(()) } else { Err(format!("{misses} reads missed the session's own write")) }
    });
}

#[test]
fn every_protocol_gives_monotonic_reads_across_a_partition() {
    each(|p| {
        for seed in 1..=3 {
            let (regressions, newest) = with_protocol!(p, P => common::monotonic_reads::<P>(seed));
            if regressions > 0 {
                return Err(format!("seed {seed}: {regressions} reads went back to an older value"));
            }
            if newest < 100 {
                return Err(format!("seed {seed}: the reader never saw the last write (newest {newest})"));
            }
        }
        Ok(())
    });
}

#[test]
fn photo_then_album_is_causal_exactly_where_promised() {
    each(|p| {
        let causal = with_protocol!(p, P => <P as Protocol>::CAUSAL);
        let mut seen = 0;
        for seed in 1..=3 {
            let (violations, saw) = with_protocol!(p, P => common::photo_then_album::<P>(seed));
            if !saw {
                return Err(format!("seed {seed}: the reader never saw the album entry"));
            }
            if causal && violations > 0 {
                return Err(format!("seed {seed}: the album entry was visible without its photo"));
            }
            seen += violations;
        }
        if !causal && seen == 0 {
            return Err("not causal, yet the scenario never showed the album before its photo".into());
        }
        Ok(())
    });
}

/// Read-only transactions keep causal order in every DC, the writers' own
/// included: ⟨public ACL, new album⟩ and ⟨no photo, album entry⟩ are never
/// returned. The readers must also have seen the new writes, or the check
/// proves nothing. (Eventual has ROTs and no causal promise; its
/// anomalies are shown in `photo_then_album_is_causal_exactly_where_promised`.)
#[test]
fn read_only_transactions_keep_causal_order_in_every_dc() {
    each(|p| {
        let (causal, rot) = with_protocol!(p, P => (<P as Protocol>::CAUSAL, <P as Protocol>::OPS.contains(&causeway_core::OpKind::Rot)));
        if !causal || !rot {
            return Ok(());
        }
        for seed in 1..=2 {
            let seen = with_protocol!(p, P => common::rot_order_in_every_dc::<P>(seed));
            for (dc, s) in seen.iter().enumerate() {
                if s.acl_violations > 0 || s.photo_violations > 0 {
                    return Err(format!("seed {seed}, DC {dc}: {s:?}"));
                }
                if s.acl_saw_new == 0 || s.photo_saw_album == 0 {
                    return Err(format!("seed {seed}, DC {dc}: the reader never saw the new writes: {s:?}"));
                }
            }
        }
        Ok(())
    });
}

#[test]
fn every_protocol_converges_after_a_partition_heals() {
    each(|p| {
        let cut = |sc: &mut Scenario| {
            sc.faults.push(Fault { at_ms: 200, at_us: 0, kind: FaultKind::Cut { a: 0, b: 2 } });
            sc.faults.push(Fault { at_ms: 1_200, at_us: 0, kind: FaultKind::Heal { a: 0, b: 2 } });
        };
        let (bad, read) = with_protocol!(p, P => common::convergence_with::<P>(3, cut));
        match (bad.is_empty(), read) {
            (true, 5) => Ok(()),
            (true, n) => Err(format!("the final reads returned {n} of 5 keys")),
            (false, _) => Err(format!("DCs disagree after the heal: {bad:?}")),
        }
    });
}

/// Write, restart the key's server from its journal (the store, as the
/// write-ahead log gives it back; every volatile field and timer lost),
/// then read it back locally and in the other DC, and write again.
fn survives_restart<P: Protocol>() -> Result<(), String> {
    let cfg = P::Config::default();
    let mut net = TestNet::<P>::new(2, 2, 1, cfg.clone());
    let (writer, reader) = (net.client(0, 0), net.client(1, 0));
    let k = net.key_on(1);
    let put = |v: &str| Op::Put { key: k.clone(), value: bytes(v) };
    let get = Op::Get { key: k.clone() };
    expect(net.run(writer, put("v1")), OpResult::Put, "first write")?;
    let server = net.server_for(DcId(0), &k);
    net.restart(server, &cfg);
    expect(net.run(writer, get.clone()), OpResult::Get(Some(bytes("v1"))), "local read after the restart")?;
    read_eventually(&mut net, reader, &get, "v1")?;
    expect(net.run(writer, put("v2")), OpResult::Put, "a write after the restart")?;
    read_eventually(&mut net, reader, &get, "v2")
}

fn expect(got: OpResult, want: OpResult, what: &str) -> Result<(), String> {
    if got == want { Ok(()) } else { Err(format!("{what}: got {got:?}, expected {want:?}")) }
}

/// Read until `want` shows (replication and stabilization take a few
/// rounds of timers in the testkit), or fail after 200 tries.
fn read_eventually<P: Protocol>(net: &mut TestNet<P>, c: ClientId, get: &Op, want: &str) -> Result<(), String> {
    for _ in 0..200 {
        if net.run(c, get.clone()) == OpResult::Get(Some(bytes(want))) {
            return Ok(());
        }
        net.advance_clocks(5_000);
        net.fire_all_timers();
        net.deliver_all();
    }
    Err(format!("the other DC never read {want:?}"))
}

#[test]
fn every_protocol_survives_a_restart_from_its_journal() {
    each(|p| with_protocol!(p, P => survives_restart::<P>()));
}

/// Write and read with both DCs talking (so the session has learned DC 1's
/// progress), cut DC 1 off, restart the key's server in DC 0 from its
/// journal, then read, write and read again (and a read-only transaction
/// where the protocol has them): each must complete while DC 1 stays away.
/// A protocol that promises availability under partitions must not let a
/// restart turn into a wait for another DC (Cure's restarted VV once did:
/// its reads waited for DC 1's next heartbeat).
fn serves_after_a_restart_while_a_dc_is_away<P: Protocol>(partitions: u32) -> Result<(), String> {
    let cfg = P::Config::default();
    let mut net = TestNet::<P>::new(2, partitions, 1, cfg.clone());
    let c = net.client(0, 0);
    let k = net.key_on(0);
    let put = |v: &str| Op::Put { key: k.clone(), value: bytes(v) };
    let get = Op::Get { key: k.clone() };
    expect(net.run(c, put("v1")), OpResult::Put, "first write")?;
    for _ in 0..20 {
        net.advance_clocks(5_000);
        net.fire_all_timers();
        net.deliver_all();
    }
    expect(net.run(c, get.clone()), OpResult::Get(Some(bytes("v1"))), "read before the cut")?;
    let topology = net.topology.clone();
    let from_dc1 = move |m: &InFlight<P::Msg>| matches!(m.from, Dest::Node(n) if topology.dc_of(n) == DcId(1));
    net.restart(net.server_for(DcId(0), &k), &cfg);
    let mut ops = vec![
        (get.clone(), OpResult::Get(Some(bytes("v1")))),
        (put("v2"), OpResult::Put),
        (get, OpResult::Get(Some(bytes("v2")))),
    ];
    if P::OPS.contains(&causeway_core::OpKind::Rot) {
        ops.push((Op::Rot { keys: vec![k.clone()] }, OpResult::Rot(vec![Some(bytes("v2"))])));
    }
    for (op, want) in ops {
        let what = format!("{partitions} partitions: {:?} after the restart, DC 1 away", op.kind());
        match net.run_dropping(c, op, &from_dc1) {
            None => return Err(format!("{what}: still waiting after 10 simulated seconds")),
            Some(got) => expect(got, want, &what)?,
        }
    }
    Ok(())
}

#[test]
fn every_available_protocol_serves_a_restarted_node_while_a_dc_is_away() {
    each(|p| {
        if !with_protocol!(p, P => <P as Protocol>::AVAILABLE_UNDER_PARTITIONS) {
            return Ok(());
        }
        for partitions in [1, 2] {
            with_protocol!(p, P => serves_after_a_restart_while_a_dc_is_away::<P>(partitions))?;
        }
        Ok(())
    });
}

/// A client whose idea of the placement is wrong (it believes in three
/// partitions where the servers have two) sends requests to servers that do
/// not store their keys. Each must be refused with a typed error: the
/// operation completes as `Failed`, and nothing is acknowledged that a
/// correctly placed reader could never find.
fn refuses_misrouted<P: Protocol>() -> Result<(), String> {
    let cfg = P::Config::default();
    let mut net = TestNet::<P>::new(1, 2, 1, cfg.clone());
    let wrong = Arc::new(Topology::new(TopologySpec::full(1, 3)).expect("valid"));
    let c = ClientId(0);
    net.clients[0] = P::client(&cfg, ClientCtx { id: c, dc: DcId(0), nonce: 7, topology: wrong.clone() });
    // A key the wrong view sends to node 0 or 1 that the servers place on the other one.
    let k = (0..10_000)
        .map(|i| bytes(&format!("key{i}")))
        .find(|k| {
            let to = wrong.server_for_key(DcId(0), k).expect("placed");
            to.0 < 2 && Some(to) != net.topology.server_for_key(DcId(0), k)
        })
        .expect("a misrouted key");
    for op in [Op::Put { key: k.clone(), value: bytes("x") }, Op::Get { key: k.clone() }] {
        let what = format!(
            "{:?} of a key node {} does not store",
            op.kind(),
            wrong.server_for_key(DcId(0), &k).map_or(NodeId(0), |n| n).0
        );
        match net.run(c, op) {
            OpResult::Failed(_) => {}
            other => return Err(format!("{what}: answered {other:?} instead of a typed refusal")),
        }
    }
    Ok(())
}

#[test]
fn every_protocol_refuses_a_request_for_a_key_it_does_not_store() {
    each(|p| with_protocol!(p, P => refuses_misrouted::<P>()));
}

/// Key hints ([`causeway_core::Message::key_hint`]) name only keys the
/// operation is about: a PUT's request names its key, and no message of a
/// PUT (its replication and dependency checks included) or of a GET names
/// another. A wrong hint would only cost the runtime a wasted lookup, so
/// nothing else would notice it.
fn hints_name_the_operations_key<P: Protocol>() -> Result<(), String> {
    let mut net = TestNet::<P>::new(2, 2, 1, P::Config::default());
    let c = net.client(0, 0);
    let k = net.key_on(1);
    for op in [Op::Put { key: k.clone(), value: bytes("v") }, Op::Get { key: k.clone() }] {
        let is_put = matches!(op, Op::Put { .. });
        let (wrong, request_named_it) = (std::cell::RefCell::new(Vec::new()), std::cell::Cell::new(false));
        // Drops nothing: looks at every message as it is delivered.
        let looked_at = |m: &InFlight<P::Msg>| {
            match m.msg.key_hint() {
                Some(h) if h != &k[..] => wrong.borrow_mut().push(m.msg.kind()),
                Some(_) if matches!(m.from, Dest::Client(_)) => request_named_it.set(true),
                _ => {}
            }
            false
        };
        if net.run_dropping(c, op, looked_at).is_none() {
            return Err("the operation did not complete".into());
        }
        if !wrong.borrow().is_empty() {
            return Err(format!("messages {:?} hint at a key the operation is not about", wrong.borrow()));
        }
        if is_put && !request_named_it.get() {
            return Err("a PUT's request gives no key hint".into());
        }
    }
    Ok(())
}

#[test]
fn every_protocols_key_hints_name_the_operations_key() {
    each(|p| with_protocol!(p, P => hints_name_the_operations_key::<P>()));
}

#[test]
fn every_broken_variant_is_caught() {
    each(|p| {
        let mutants = with_protocol!(p, P => <P as Protocol>::MUTANTS);
        for &m in mutants {
            let caught = (1..=3).any(|seed| {
                let set = |sc: &mut Scenario, _: &Topology| {
                    sc.protocol.insert(m.into(), true.into());
                };
                let (violations, _) = with_protocol!(p, P => common::photo_then_album_with::<P>(seed, 1_000, set));
                let rot = with_protocol!(p, P => <P as Protocol>::OPS.contains(&causeway_core::OpKind::Rot));
                // Interactive transactions run in the partial-replication
                // scenario (their rounds apart by a think time).
                let partial = with_protocol!(p, P => <P as Protocol>::PARTIAL_REPLICATION);
                violations > 0
                    || (rot && with_protocol!(p, P => common::acl_album_rot_with::<P>(seed, m)).0 > 0)
                    || (partial && with_protocol!(p, P => partial_replication_run::<P>(seed, m)).0.is_err())
            });
            if !caught {
                return Err(format!("mutant {m} passed every scenario"));
            }
        }
        Ok(())
    });
}

/// Permanent node loss during commit, for every protocol with transactions
/// (write-only or read-write): a DC0 server crashes for good while
/// transactions commit through it; operations that name none of its keys
/// — in its DC and in the others — complete within the protocol's declared
/// liveness bound, and the history passes the checker (fractured reads
/// included). See [`common::permanent_loss_during_commit`].
#[test]
fn every_transactional_protocol_serves_on_after_a_node_is_lost_mid_commit() {
    each(|p| {
        let txns = with_protocol!(p, P => <P as Protocol>::OPS
            .iter()
            .any(|k| matches!(k, causeway_core::OpKind::Wot | causeway_core::OpKind::Txn)));
        // A protocol whose stable time needs every node says it does not
        // survive a permanent loss (`Protocol::SERVES_ON_AFTER_PERMANENT_LOSS`).
        if !txns || !with_protocol!(p, P => <P as Protocol>::SERVES_ON_AFTER_PERMANENT_LOSS) {
            return Ok(());
        }
        for seed in 1..=4u64 {
            let wot_size = 2 + (seed % 2) as usize;
            let bound_us = with_protocol!(p, P => <P as Protocol>::liveness_bound_us(
                &Default::default(),
                &common::LOSS_LIVENESS_ENV,
            ));
            let r = with_protocol!(p, P => common::permanent_loss_during_commit::<P>(seed, wot_size, bound_us));
            if r.in_flight_at_crash == 0 {
                return Err(format!("seed {seed}: no transaction of the lost node was in flight when it crashed"));
            }
            if r.reads_checked < 1_000 {
                return Err(format!("seed {seed}: only {} reads of live keys were made", r.reads_checked));
            }
            if !r.late.is_empty() {
                return Err(format!(
                    "seed {seed} ({wot_size} keys per transaction): {} operations on live partitions missed the \
                     {} ms bound after the loss, e.g. {}",
                    r.late.len(),
                    bound_us / 1_000,
                    r.late.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
                ));
            }
            if let Some(why) = r.check_failure {
                return Err(format!("seed {seed} ({wot_size} keys per transaction): the checker failed:\n{why}"));
            }
        }
        Ok(())
    });
}

/// A random workload of GETs, PUTs, ROTs and read-write transactions (half
/// of them reaching a partition the client's DC does not store) on three
/// DCs of six partitions, each stored in two DCs, with DC 0 and DC 2 cut
/// off from each other for a second; after a quiet time one reader per DC
/// reads every key. Returns the checker's verdict at the causal+ level
/// (convergence of the final reads included) and how many transactions
/// committed (writes, for a protocol without transactions).
fn partial_replication_run<P: Protocol>(seed: u64, flag: &str) -> (Result<(), String>, usize) {
    use causeway_check::{CheckConfig, Level, check};
    const QUIET_US: u64 = 4_000_000;
    let mut spec = TopologySpec::full(3, 6);
    spec.replication = causeway_core::Replication::Partial { factor: 2 };
    let mut sc = common::base(3, 6, 2_000, seed);
    sc.topology = spec;
    sc.drain_ms = 3_000;
    if !flag.is_empty() {
        sc.protocol.insert(flag.into(), true.into());
    }
    let offers = |k| P::OPS.contains(&k);
    let w = &mut sc.workload;
    w.clients_per_dc = 4;
    w.recordcount = 24;
    w.think_time_us = 500;
    w.readproportion = 0.3;
    w.updateproportion = 0.3;
    // ROTs and transactions where the protocol has them (ACCF has GET and
    // PUT only): their share goes to GETs and PUTs otherwise.
    if offers(causeway_core::OpKind::Rot) {
        w.rotproportion = 0.1;
        w.rot_size = 3;
    } else {
        w.readproportion += 0.1;
    }
    if offers(causeway_core::OpKind::Txn) {
        w.txnproportion = 0.3;
        w.txn_reads = 3;
        w.txn_writes = 2;
        w.local_txn_ratio = Some(0.5);
        // Half of them interactive where the protocol offers that: START,
        // two read rounds (the second chosen by the first's values), COMMIT.
        if offers(causeway_core::OpKind::Interactive) {
            w.txnproportion = 0.15;
            w.interactiveproportion = 0.15;
            w.interactive_think_us = 10_000;
        }
    } else {
        w.readproportion += 0.15;
        w.updateproportion += 0.15;
    }
    sc.faults.push(Fault { at_ms: 500, at_us: 0, kind: FaultKind::Cut { a: 0, b: 2 } });
    sc.faults.push(Fault { at_ms: 1_500, at_us: 0, kind: FaultKind::Heal { a: 0, b: 2 } });
    final_readers(&mut sc, 3, 24, QUIET_US);
    let (h, _) = common::run::<P>(sc);
    // Without transactions, the writes that completed stand in for them.
    let txns = if offers(causeway_core::OpKind::Txn) {
        h.ops.iter().filter(|r| matches!((&r.op, &r.result), (Op::Txn { .. }, OpResult::Txn(_)))).count()
    } else {
        h.ops.iter().filter(|r| matches!((&r.op, &r.result), (Op::Put { .. }, OpResult::Put))).count()
    };
    let report = check(&h, &CheckConfig::at(Level::CausalPlus).quiescent_after(QUIET_US));
    (if report.passed { Ok(()) } else { Err(report.to_string()) }, txns)
}

/// A protocol that linearizes each DC's writes (`Protocol::LINEARIZES_DC_WRITES`:
/// NuKV's Raft groups) keeps that order, and its promised level, through
/// crashes and restarts of each member of a group in turn (the leader among
/// them), a member paused (cut off inside its DC) and DC 0's clocks stepped
/// 10 s ahead and back once writes flow again: a random workload of GETs and PUTs on a few hot keys,
/// 2 DCs × 2 partitions, groups of 3 replicas; after a quiet time one
/// reader per DC reads every key, and the checker holds the history to the
/// protocol's promised level with each DC's write order
/// (`CheckConfig::dc_write_order`).
#[test]
fn every_dc_linearizing_protocol_keeps_each_dcs_write_order_through_crashes() {
    each(|p| {
        if !with_protocol!(p, P => <P as Protocol>::LINEARIZES_DC_WRITES) {
            return Ok(());
        }
        for seed in 1..=3 {
            with_protocol!(p, P => dc_write_order_run::<P>(seed, None)).map_err(|e| format!("seed {seed}: {e}"))?;
        }
        // The proof that the scenario can fail: a leader that stamps with
        // its physical clock alone (NuKV's `mutant_stamp_physical`) lets the
        // writes stamped while the clock ran ahead win over later ones.
        if p == ProtocolName::Nukv
            && with_protocol!(p, P => dc_write_order_run::<P>(1, Some("mutant_stamp_physical"))).is_ok()
        {
            return Err("the physical-stamp mutant kept each DC's write order".into());
        }
        Ok(())
    });
}

fn dc_write_order_run<P: Protocol>(seed: u64, mutant: Option<&str>) -> Result<(), String> {
    use causeway_check::{CheckConfig, Level, check};
    use causeway_core::{ClockJump, NodeRole};
    use causeway_sim::scenario::NodeClock;
    const QUIET_US: u64 = 6_500_000;
    const KEYS: usize = 6;
    let mut spec = TopologySpec::full(2, 2);
    spec.replicas_per_partition = 3;
    let mut sc = common::base(2, 2, 4_000, seed);
    sc.topology = spec;
    sc.drain_ms = 4_000;
    sc.client_timeout_ms = 2_000;
    let w = &mut sc.workload;
    w.clients_per_dc = 4;
    w.recordcount = KEYS as u64;
    w.think_time_us = 1_000;
    w.readproportion = 0.5;
    w.updateproportion = 0.5;
    let t = Topology::new(sc.topology.clone()).map_err(|e| e.to_string())?;
    let in_dc0 = |n: u32| t.dc_of(NodeId(n)) == DcId(0);
    for n in (0..t.nodes() as u32).filter(|&n| in_dc0(n)) {
        if let NodeRole::Partition { partition, replica, .. } = t.role(NodeId(n)) {
            if partition.0 == 0 {
                let at_ms = 600 + 800 * u64::from(replica);
                sc.faults.push(Fault { at_ms, at_us: 0, kind: FaultKind::Crash { node: n, for_ms: 400, at: None } });
            } else if replica == 1 {
                sc.faults.push(Fault { at_ms: 1_000, at_us: 0, kind: FaultKind::Pause { node: n, for_ms: 600 } });
            }
        }
        let jumps = vec![
            ClockJump { at_us: 2_800_000, step_us: 10_000_000 },
            ClockJump { at_us: 3_200_000, step_us: -10_000_000 },
        ];
        sc.clocks.node.push(NodeClock { node: n, offset_us: 0, drift_ppm: 0.0, jumps });
    }
    final_readers(&mut sc, 2, KEYS, QUIET_US);
    if let Some(m) = mutant {
        sc.protocol.insert(m.into(), true.into());
    }
    let (h, _) = common::run::<P>(sc);
    let writes = h.ops.iter().filter(|r| matches!((&r.op, &r.result), (Op::Put { .. }, OpResult::Put))).count();
    if writes < 50 {
        return Err(format!("only {writes} writes were acknowledged"));
    }
    let level = Level::promised_by(P::CAUSAL, P::SESSIONS);
    let report = check(&h, &CheckConfig::at(level).quiescent_after(QUIET_US).with_dc_write_order(true));
    if report.passed { Ok(()) } else { Err(report.to_string()) }
}

/// One reader per DC of `dcs` that reads every workload key (`user0` …)
/// one after another from `at_us` on, the quiet time: the reads the
/// checker's convergence checks judge.
fn final_readers(sc: &mut Scenario, dcs: u16, keys: usize, at_us: u64) {
    use causeway_sim::{ScriptedClient, ScriptedOp};
    for dc in 0..dcs {
        let ops = (0..keys)
            .map(|i| ScriptedOp {
                at_us: if i == 0 { at_us } else { 0 },
                op: Op::Get { key: bytes::Bytes::from(format!("user{i}")) },
                from_dc: None,
                checking_group: None,
            })
            .collect();
        sc.scripted.push(ScriptedClient { dc, ops });
    }
}

/// Protocols that run on partial replication (`Protocol::PARTIAL_REPLICATION`)
/// keep their promises there too, with transactions (or, for a protocol
/// without them, GETs and PUTs) that read and write partitions stored only
/// in other DCs, and each of their broken variants is caught there as well.
#[test]
fn every_partially_replicating_protocol_keeps_its_promises_with_rf_2_of_3() {
    each(|p| {
        if !with_protocol!(p, P => <P as Protocol>::PARTIAL_REPLICATION) {
            return Ok(());
        }
        for seed in 1..=2 {
            let (verdict, txns) = with_protocol!(p, P => partial_replication_run::<P>(seed, ""));
            verdict.map_err(|e| format!("seed {seed}: the checker failed:\n{e}"))?;
            if txns < 50 {
                return Err(format!("seed {seed}: only {txns} transactions (or writes, without them) committed"));
            }
        }
        for &m in with_protocol!(p, P => <P as Protocol>::MUTANTS) {
            if (1..=3).all(|seed| with_protocol!(p, P => partial_replication_run::<P>(seed, m)).0.is_ok()) {
                return Err(format!("mutant {m} passed the checker under partial replication"));
            }
        }
        Ok(())
    });
}
