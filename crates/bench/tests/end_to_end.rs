//! An experiment file in, every output out: the way `causeway experiment`
//! runs it, on both runtimes.

use causeway_bench::experiment::{Experiment, Runtime};
use causeway_bench::runner::RunOptions;
use causeway_bench::{report, run};

const SKEW: &str = r#"
name = "skew"
title = "PUT latency against skew"
protocols = ["gentlerain", "causalspartanx"]
repetitions = 2
metrics = ["latency.put.mean_ms"]
[sweep]
param = "clocks.node.0.offset_us"
values = [2000, 10000]
x = [2, 10]
x_label = "skew (ms)"
[scenario]
duration_ms = 2_000
drain_ms = 100
[scenario.topology]
dcs = 1
partitions = 2
[[scenario.clocks.node]]
node = 1
[scenario.workload]
clients_per_dc = 1
readproportion = 0.0
updateproportion = 1.0
amplification = 10
recordcount = 100
[[plot]]
kind = "line"
y = "latency.put.mean_ms"
[[plot]]
kind = "bar"
y = "latency.put.mean_ms"
[[plot]]
kind = "cdf"
y = "put"
point = 1
"#;

fn out_dir(name: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("causeway-bench-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_sim_experiment_writes_csv_json_plots_and_a_report() {
    let exp = Experiment::from_toml_str(SKEW, "skew.toml").unwrap();
    let r = run(&exp, &RunOptions { threads: 2, ..Default::default() }, |_, _| {}).unwrap();
    assert_eq!(r.points.len(), 4);
    assert!(r.points.iter().all(|p| p.repetitions.len() == 2));
    // GentleRain waits out the skew; CausalSpartanX does not.
    let mean = |proto: usize, x: usize| r.points[proto * 2 + x].median.metrics["latency.put.mean_ms"];
    assert!(mean(0, 1) > mean(0, 0) + 2.0, "GR {} → {}", mean(0, 0), mean(0, 1));
    assert!((mean(1, 1) - mean(1, 0)).abs() < 0.05, "CSX {} → {}", mean(1, 0), mean(1, 1));

    let dir = out_dir("sim");
    let w = report::write_all(&r, &dir, "causeway experiment skew.toml").unwrap();
    assert_eq!(w.files.len(), 2 + 3 + 1, "csv, json, three plots, markdown");
    let md = std::fs::read_to_string(&w.markdown).unwrap();
    // Tables and legends name the protocols as their papers do; the CSV
    // keeps the entries as written.
    assert!(md.contains("| skew (ms) | GentleRain | CausalSpartanX | GentleRain / CausalSpartanX |"), "{md}");
    assert!(md.contains("![PUT latency against skew](skew-0.svg)"), "{md}");
    let csv = std::fs::read_to_string(dir.join("skew.csv")).unwrap();
    assert!(csv.lines().any(|l| l.starts_with("gentlerain,,10,10,latency.put.mean_ms,")), "{csv}");
    for i in 0..3 {
        let svg = std::fs::read_to_string(dir.join(format!("skew-{i}.svg"))).unwrap();
        assert!(svg.contains("GentleRain") && svg.contains("CausalSpartanX"), "plot {i}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("skew.json")).unwrap()).unwrap();
    assert_eq!(json["points"].as_array().unwrap().len(), 4);
    let _ = std::fs::remove_dir_all(dir);
}

/// Two claims on the skew sweep: one the run bears out, one it cannot.
const CLAIMS: &str = r#"
[[claim]]
seed = "000"
figure = "Fig 5.1a"
text = "PUT latency at 10 ms skew, GentleRain ÷ CausalSpartanX"
paper = 1.5
unit = "×"
metric = "latency.put.mean_ms"
of = { entry = "gentlerain", at = "10" }
over = { entry = "causalspartanx", at = "10" }

[[claim]]
seed = "000"
figure = "Fig 5.1a"
text = "the reverse"
paper = 1.5
unit = "×"
metric = "latency.put.mean_ms"
of = { entry = "causalspartanx", at = "10" }
over = { entry = "gentlerain", at = "10" }
cause = "CausalSpartanX does not wait"
"#;

#[test]
fn a_report_is_redrawn_from_its_json_with_its_claims_checked() {
    let exp = Experiment::from_toml_str(&format!("{SKEW}{CLAIMS}"), "skew.toml").unwrap();
    let r = run(&exp, &RunOptions { threads: 2, ..Default::default() }, |_, _| {}).unwrap();
    assert!(!r.provenance.is_empty());
    let dir = out_dir("render");
    report::write_all(&r, &dir, "causeway experiment skew.toml").unwrap();
    // Read back, the results are the same numbers at the same points.
    let back: causeway_bench::Results =
        serde_json::from_str(&std::fs::read_to_string(dir.join("skew.json")).unwrap()).unwrap();
    assert_eq!(back.points.len(), r.points.len());
    // JSON keeps a NaN as null, and serde_json reads a float back to within
    // an ulp, not always exactly.
    let same = |x: f64, y: f64| (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-12 * x.abs().max(1.0);
    for (a, b) in r.points.iter().zip(&back.points) {
        assert_eq!(a.point, b.point);
        assert_eq!(a.median.metrics.len(), b.median.metrics.len());
        for (k, x) in &a.median.metrics {
            assert!(same(*x, b.median.metrics[k]), "{k}: {x} read back as {}", b.median.metrics[k]);
        }
        assert_eq!(a.repetitions.len(), b.repetitions.len());
        for (k, xs) in &a.median.cdfs {
            assert!(xs.iter().zip(&b.median.cdfs[k]).all(|(x, y)| same(*x, *y)), "cdf {k}");
        }
    }
    assert_eq!(back.provenance, r.provenance);
    exp.same_runs(&back.experiment).unwrap();
    let mut moved = exp.clone();
    moved.protocols.reverse();
    assert!(moved.same_runs(&back.experiment).unwrap_err().contains("protocols"));

    let checked = causeway_bench::claims::check(&back);
    use causeway_bench::claims::Verdict;
    assert_eq!(checked[0].verdict, Verdict::Reproduced, "{:?}", checked[0]);
    assert!(checked[0].ours[0] > 1.5);
    assert_eq!(checked[1].verdict, Verdict::NotReproduced, "{:?}", checked[1]);
    report::write_all(&back, &dir, "causeway experiment skew.toml --render").unwrap();
    let md = std::fs::read_to_string(dir.join("skew.md")).unwrap();
    assert!(md.contains("## The paper's numbers against ours"), "{md}");
    assert!(md.contains("| not reproduced | CausalSpartanX does not wait |"), "{md}");
    assert!(md.contains(&r.provenance), "{md}");

    let table = causeway_bench::reproduction::table(&[causeway_bench::reproduction::Entry {
        experiment: "skew.toml".into(),
        report: "results/skew.md".into(),
        provenance: back.provenance.clone(),
        stale: false,
        checked,
    }]);
    assert!(table.contains("| 000 | Fig 5.1a | not reproduced | [skew](results/skew.md) |"), "{table}");

    // A ratio of peak throughputs is one of capacities only where servers,
    // not clients, bound both peaks: a client-bound peak fails the claim,
    // whatever the numbers, and says why.
    let claim: causeway_bench::claims::Claim = toml::from_str(
        r#"
        seed = "000"
        figure = "Fig 0"
        text = "peak throughput ratio"
        paper = 1.5
        unit = "×"
        metric = "throughput_ops_s"
        of = { entry = "causalspartanx", at = "max" }
        over = { entry = "gentlerain", at = "max" }
        "#,
    )
    .unwrap();
    let mut peaks = back.clone();
    peaks.experiment.claims = vec![claim];
    let with_busy = |busy_pct: f64| {
        let mut r = peaks.clone();
        for (i, p) in r.points.iter_mut().enumerate() {
            p.median.metrics.insert("throughput_ops_s".into(), 100.0 * (i + 1) as f64);
            p.median.metrics.insert("server_busy_max_pct".into(), busy_pct);
        }
        causeway_bench::claims::check(&r).remove(0)
    };
    let bound = with_busy(10.0);
    assert_eq!(bound.verdict, Verdict::NotReproduced, "{bound:?}");
    assert!(bound.cause_text().contains("client-bound"), "{bound:?}");
    let saturated = with_busy(95.0);
    assert_eq!(saturated.verdict, Verdict::Reproduced, "{saturated:?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_network_runtime_runs_what_it_can_express_and_names_what_it_cannot() {
    let exp = Experiment::from_toml_str(SKEW, "skew.toml").unwrap();
    let opts = RunOptions { runtime: Some(Runtime::Network), repetitions: Some(1), ..Default::default() };
    let e = run(&exp, &opts, |_, _| {}).unwrap_err().to_string();
    assert!(e.contains("clocks") && e.contains("workload.amplification"), "{e}");

    let small = r#"
        name = "load"
        protocols = ["eventual"]
        repetitions = 1
        runtime = "network"
        [sweep]
        param = "workload.clients_per_dc"
        values = [1, 2]
        [scenario]
        duration_ms = 600
        warmup_ms = 100
        [scenario.topology]
        dcs = 2
        partitions = 1
        [scenario.network]
        default_rtt_ms = 10
        [scenario.workload]
        clients_per_dc = 1
        recordcount = 50
    "#;
    let exp = Experiment::from_toml_str(small, "load.toml").unwrap();
    let r = run(&exp, &RunOptions::default(), |_, _| {}).unwrap();
    for p in &r.points {
        assert!(p.median.metrics["throughput_ops_s"] > 10.0, "{:?}", p.median.metrics);
        assert!(p.median.metrics.contains_key("latency.get.p50_ms"));
    }
}
