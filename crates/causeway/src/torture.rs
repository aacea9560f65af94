//! `causeway torture`: random workloads under random fault schedules in the
//! simulator, every history checked at the level the protocol promises.
//!
//! Run `i` uses seed `seed + i` for everything — topology size, workload mix,
//! fault schedule, clocks and the simulator itself — so a failure prints one
//! seed and `causeway torture -p P --runs 1 --seed S` replays it exactly.

use causeway_check::{CheckConfig, CheckReport, Level, check};
use causeway_core::{Key, Op, Protocol, TopologySpec};
use causeway_protocols::{ProtocolName, with_protocol};
use causeway_sim::chaos::{self, Chaos};
use causeway_sim::{Scenario, ScriptedClient, ScriptedOp, Sim};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The faults a protocol claims to tolerate.
pub fn chaos_for(p: ProtocolName) -> Chaos {
    match p {
        // Last-writer-wins on physical clocks: with skew a causally later
        // write can lose to an earlier one, which eventual consistency allows
        // but our checker's eventual-visibility rule (superseded in causal
        // order) does not model. Run it with synchronised clocks.
        ProtocolName::Eventual => Chaos { skew_us: 0, backward_jumps: false, ..Chaos::default() },
        // Seed 000 §5.6: GentleRain is not safe when clocks step back.
        ProtocolName::GentleRain => Chaos { backward_jumps: false, ..Chaos::default() },
        ProtocolName::CausalSpartanX => Chaos::default(),
        // Lamport clocks: physical skew and jumps do not matter.
        ProtocolName::Cops => Chaos::default(),
        // Lamport clocks too, but trans_time is a duration on physical
        // clocks: a jump larger than its margin can collect too early
        // (cops_gt.rs, deviation 4). Skew is harmless.
        ProtocolName::CopsGt => Chaos { backward_jumps: false, ..Chaos::default() },
    }
}

/// Build run `seed`'s scenario.
pub fn scenario(p: ProtocolName, seed: u64, opts: &Options) -> Result<(Scenario, u64), String> {
    let without = &opts.without;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x70_27_u64);
    let dcs = rng.random_range(2..=3);
    let partitions = rng.random_range(1..=4);
    let load_ms = rng.random_range(600..=1_500);
    let mut sc = Scenario::new(TopologySpec::full(dcs, partitions), load_ms);
    sc.name = format!("torture-{seed}");
    sc.seed = seed;
    sc.drain_ms = 4_000;
    sc.record_history = true;
    sc.count_bytes = false;
    sc.network.rtt_ms = Vec::new();
    sc.network.default_rtt_ms = rng.random_range(10.0..=120.0);
    sc.network.intra_dc_us = rng.random_range(100..=500);
    sc.network.jitter_pct = rng.random_range(0.0..=30.0);
    let w = &mut sc.workload;
    w.clients_per_dc = rng.random_range(2..=8);
    w.recordcount = [20, 100, 1_000][rng.random_range(0..3)];
    w.readproportion = rng.random_range(0.2..=0.6);
    w.updateproportion = rng.random_range(0.2..=0.6);
    w.rotproportion = rng.random_range(0.0..=0.3);
    w.rot_size = rng.random_range(2..=4usize).min(w.recordcount as usize);
    w.think_time_us = rng.random_range(0..=2_000);
    w.fieldlength = 16;
    // Write-only and read-write transactions where the protocol offers them
    // (drawn only then, so other protocols' seeds replay as before).
    // Only where they are transactions: the eventual baseline's are parallel
    // puts, which the checker's model (a transaction is one event) does not
    // describe, so its eventual-visibility rule would misjudge them (a WOT
    // write applied after a causally later one wins last-writer-wins).
    let offers = |k| with_protocol!(p, P => <P as Protocol>::CAUSAL && <P as Protocol>::OPS.contains(&k));
    if offers(causeway_core::OpKind::Wot) {
        w.wotproportion = rng.random_range(0.0..=0.2);
        w.wot_size = rng.random_range(2..=4usize).min(w.recordcount as usize);
    }
    if offers(causeway_core::OpKind::Txn) {
        w.txnproportion = rng.random_range(0.0..=0.2);
        w.txn_reads = rng.random_range(0..=4usize).min(w.recordcount as usize);
        w.txn_writes = rng.random_range(1..=3usize).min(w.recordcount as usize);
    }
    let topology = causeway_core::Topology::new(sc.topology.clone()).expect("valid topology");
    let mut c = chaos_for(p);
    for w in without {
        match w.as_str() {
            "partitions" => c.partitions = false,
            "pauses" => c.pauses = false,
            "spikes" => c.spikes = false,
            "slow_links" => c.slow_links = false,
            "skew" => c.skew_us = 0,
            "jumps" => c.backward_jumps = false,
            other => {
                return Err(format!(
                    "--without {other:?}: expected partitions, pauses, spikes, slow_links, skew or jumps"
                ));
            }
        }
    }
    let s = chaos::draw(seed, &topology, load_ms, c);
    sc.protocol = garbage_collection_params(p, seed);
    sc.protocol.extend(opts.params.clone());
    sc.faults = s.faults;
    sc.clocks.node = s.clocks;
    // After the load and the faults, one reader per DC reads every key:
    // convergence and eventual visibility are judged on these reads.
    let quiet_us = (load_ms + 2_500) * 1_000;
    for dc in 0..dcs {
        let ops: Vec<ScriptedOp> = (0..sc.workload.recordcount)
            .map(|i| ScriptedOp {
                at_us: if i == 0 { quiet_us } else { 0 },
                op: Op::Get { key: Key::from(format!("user{i}")) },
            })
            .collect();
        sc.scripted.push(ScriptedClient { dc, ops });
    }
    Ok((sc, quiet_us))
}

/// COPS-GT's garbage collection waits `trans_time` (5 s by default), longer
/// than a torture run: draw it between 50 and 400 ms, and the GC period
/// between 10 and 50 ms, so that version, dependency and client-metadata
/// collection all run under the faults. From its own random stream, so the
/// other protocols' seeds replay as before. `--param` overrides.
fn garbage_collection_params(p: ProtocolName, seed: u64) -> toml::Table {
    let mut t = toml::Table::new();
    if p == ProtocolName::CopsGt {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6c_u64);
        t.insert("trans_time_ms".into(), toml::Value::Integer(rng.random_range(50..=400)));
        t.insert("gc_interval_ms".into(), toml::Value::Integer(rng.random_range(10..=50)));
        t.insert("clock_margin_ms".into(), toml::Value::Integer(10));
    }
    t
}

/// One run: simulate and check.
/// What to vary from the defaults.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Fault kinds to leave out.
    pub without: Vec<String>,
    /// Protocol parameters (the scenario's `[protocol]` table).
    pub params: toml::Table,
    /// Judge at this level instead of the one the protocol promises.
    pub level: Option<Level>,
}

pub fn run_one(p: ProtocolName, seed: u64, opts: &Options) -> Result<(CheckReport, causeway_core::History), String> {
    let (sc, quiet_us) = scenario(p, seed, opts)?;
    let history = with_protocol!(p, P => {
        let mut sim = Sim::<P>::new(sc).map_err(|e| e.to_string())?;
        sim.run();
        sim.take_history().expect("history recorded")
    });
    let level = opts.level.unwrap_or_else(|| with_protocol!(p, P => Level::promised(<P as Protocol>::CAUSAL)));
    let report = check(&history, &CheckConfig::at(level).quiescent_after(quiet_us));
    Ok((report, history))
}
