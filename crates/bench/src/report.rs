//! Writing results: `<name>.csv` (every metric, every point, medians and
//! repetitions), `<name>.json` (the same plus CDFs and the experiment),
//! `<name>-<i>.svg` per plot, and `<name>.md`, the report a person reads.

use crate::experiment::{ExperimentError, PlotKind, PlotSpec, Point};
use crate::labels::{SATURATED_PCT, client_bound, kind_label};
use crate::plot::{Chart, ChartKind, Series, num, render_svg};
use crate::runner::Results;
use causeway_sim::metrics::cdf_quantiles;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Where each file went.
pub struct Written {
    pub markdown: PathBuf,
    pub files: Vec<PathBuf>,
}

/// Write every output of `r` into `dir`. `command` is what regenerates them,
/// quoted in the report.
pub fn write_all(r: &Results, dir: &Path, command: &str) -> Result<Written, ExperimentError> {
    let name = &r.experiment.name;
    let write = |file: String, text: &str| -> Result<PathBuf, ExperimentError> {
        let path = dir.join(file);
        std::fs::write(&path, text).map_err(|source| ExperimentError::Write {
            name: name.clone(),
            path: path.display().to_string(),
            source,
        })?;
        Ok(path)
    };
    std::fs::create_dir_all(dir).map_err(|source| ExperimentError::Write {
        name: name.clone(),
        path: dir.display().to_string(),
        source,
    })?;
    let mut files = vec![write(format!("{name}.csv"), &csv(r))?];
    files.push(write(format!("{name}.json"), &serde_json::to_string_pretty(r).expect("results serialise"))?);
    let mut plots = Vec::new();
    for (i, spec) in r.experiment.plot.iter().enumerate() {
        let chart = chart(r, spec);
        let svg = render_svg(&chart).map_err(|message| ExperimentError::Invalid { name: name.clone(), message })?;
        let file = format!("{name}-{i}.svg");
        files.push(write(file.clone(), &svg)?);
        plots.push((file, chart.title));
    }
    let markdown = write(format!("{name}.md"), &markdown(r, &plots, command))?;
    files.push(markdown.clone());
    Ok(Written { markdown, files })
}

/// The legend name of a curve: the protocol entry's label, and the series
/// value's unless the plot is one series value's panel.
fn curve_name(r: &Results, p: Point, panel: bool) -> String {
    let e = &r.experiment;
    let entry = e.label(&e.entry_label(p));
    match (&e.series, p.series) {
        (Some(_), Some(i)) if !panel => format!("{entry}, {}", e.series_label(i)),
        _ => entry,
    }
}

/// The curves of a line or bar chart, in point order: every one, or those
/// of series value `panel`.
fn curves(r: &Results, panel: Option<usize>) -> Vec<(String, Vec<Point>)> {
    let mut out: Vec<(String, Vec<Point>)> = Vec::new();
    for pr in r.points.iter().filter(|pr| panel.is_none() || pr.point.series == panel) {
        let name = curve_name(r, pr.point, panel.is_some());
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, pts)) => pts.push(pr.point),
            None => out.push((name, vec![pr.point])),
        }
    }
    out
}

fn metric(r: &Results, p: Point, m: &str) -> f64 {
    r.get(p).and_then(|pr| pr.median.metrics.get(m).copied()).unwrap_or(f64::NAN)
}

/// The legend's explanation of hollow markers.
pub const HOLLOW_NOTE: &str = "hollow: clients, not servers, bound the throughput";

pub fn chart(r: &Results, spec: &PlotSpec) -> Chart {
    let e = &r.experiment;
    let panel = e.plot_series(spec).ok().flatten();
    let mut title = if spec.title.is_empty() { e.title.clone() } else { spec.title.clone() };
    if let Some(i) = panel {
        let l = e.series_label(i);
        if !title.replace(' ', "").contains(&l.replace(' ', "")) {
            title = format!("{title} ({l})");
        }
    }
    let reference = if spec.normalize_to.is_empty() { None } else { e.entry_named(&spec.normalize_to) };
    let ref_label = reference.map(|i| e.label(&e.protocols[i]));
    let y_label = match (&ref_label, spec.y_label.is_empty()) {
        (_, false) => spec.y_label.clone(),
        (Some(l), true) => format!("{}, relative to {l}", e.label(&spec.y)),
        (None, true) => e.label(&spec.y),
    };
    match spec.kind {
        PlotKind::Line | PlotKind::Bar => {
            let bar = spec.kind == PlotKind::Bar;
            // Throughput measured with idle servers measures the clients.
            let throughput = spec.y.starts_with("throughput") || spec.x.starts_with("throughput");
            let value = |p: Point| {
                let y = metric(r, p, &spec.y);
                match reference {
                    Some(re) => {
                        let at = |q: &&crate::runner::PointResult| {
                            q.point.entry == re && q.point.series == p.series && q.point.x == p.x
                        };
                        y / r.points.iter().find(at).map_or(f64::NAN, |q| metric(r, q.point, &spec.y))
                    }
                    None => y,
                }
            };
            let series = curves(r, panel)
                .into_iter()
                .filter(|(_, pts)| reference.is_none_or(|re| pts.first().is_none_or(|p| p.entry != re)))
                .map(|(name, pts)| Series {
                    name,
                    points: pts
                        .iter()
                        .map(|&p| {
                            let x = if bar {
                                p.x as f64
                            } else if !spec.x.is_empty() {
                                metric(r, p, &spec.x)
                            } else {
                                e.sweep.x(p.x)
                            };
                            (x, value(p))
                        })
                        .collect(),
                    hollow: pts.iter().map(|&p| throughput && client_bound(r, p)).collect(),
                })
                .collect();
            let x_label = if !spec.x_label.is_empty() {
                spec.x_label.clone()
            } else if !spec.x.is_empty() {
                e.label(&spec.x)
            } else {
                e.sweep_label()
            };
            let mut c = Chart::new(if bar { ChartKind::Bar } else { ChartKind::Line }, &title, &x_label, &y_label);
            c.categories = (0..e.sweep.values.len()).map(|i| e.label(&e.sweep.label(i))).collect();
            c.series = series;
            c.log_x = spec.log_x;
            c.log_y = spec.log_y;
            c.reference = ref_label.map(|l| (1.0, format!("{l} (= 1)")));
            c.hollow_note = HOLLOW_NOTE.into();
            // A sweep whose points are named and placed names the x ticks.
            if !bar && spec.x.is_empty() && !e.sweep.labels.is_empty() && !e.sweep.x.is_empty() {
                c.x_ticks = (0..e.sweep.values.len()).map(|i| (e.sweep.x(i), e.label(&e.sweep.label(i)))).collect();
            }
            c
        }
        PlotKind::Cdf => {
            let qs: Vec<f64> = cdf_quantiles().collect();
            let series = r
                .points
                .iter()
                .filter(|pr| pr.point.x == spec.point && (panel.is_none() || pr.point.series == panel))
                .map(|pr| Series {
                    name: curve_name(r, pr.point, panel.is_some()),
                    points: pr
                        .median
                        .cdfs
                        .get(&spec.y)
                        .map(|c| c.iter().zip(&qs).map(|(&ms, &q)| (ms, q)).collect())
                        .unwrap_or_default(),
                    hollow: Vec::new(),
                })
                .collect();
            let x_label = if spec.x_label.is_empty() {
                format!("{} latency (ms)", kind_label(&spec.y))
            } else {
                spec.x_label.clone()
            };
            let y_label = if spec.y_label.is_empty() { "fraction of operations" } else { spec.y_label.as_str() };
            let mut c = Chart::new(ChartKind::Cdf, &title, &x_label, y_label);
            c.series = series;
            c.log_x = spec.log_x;
            c
        }
    }
}

fn csv(r: &Results) -> String {
    let e = &r.experiment;
    let mut s = String::from("protocol,series,sweep,x,metric,median,repetitions\n");
    for pr in &r.points {
        let p = pr.point;
        let series = match (&e.series, p.series) {
            (Some(sw), Some(i)) => sw.label(i),
            _ => String::new(),
        };
        for (m, v) in &pr.median.metrics {
            let reps: Vec<String> =
                pr.repetitions.iter().map(|s| s.metrics.get(m).map_or(String::new(), |x| format!("{x}"))).collect();
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{}",
                quote(&e.entry_label(p)),
                quote(&series),
                quote(&e.sweep.label(p.x)),
                e.sweep.x(p.x),
                m,
                v,
                reps.join(";")
            );
        }
    }
    s
}

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

fn fmt(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v.is_finite() && v == v.round() && v.abs() < 1e15 {
        num(v)
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The claims section: the paper's numbers, ours, and the verdicts.
fn claims(s: &mut String, r: &Results) {
    let checked = crate::claims::check(r);
    if checked.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "## The paper's numbers against ours
"
    );
    let _ = writeln!(
        s,
        "Reproduced: within ±{:.0} % of the paper's number or stronger in its direction; ordering only: a ratio on \
         the paper's side of 1 but outside that band.\n",
        crate::claims::TOLERANCE * 100.0
    );
    let _ = writeln!(s, "| figure | claim | paper | ours | verdict | cause |\n|---|---|---:|---:|---|---|");
    use crate::claims::cell;
    for c in &checked {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            cell(&c.claim.figure),
            cell(&c.claim.text),
            cell(&c.paper_text()),
            cell(&c.ours_text()),
            c.verdict.as_str(),
            cell(c.cause_text())
        );
    }
    let _ = writeln!(s);
}

fn markdown(r: &Results, plots: &[(String, String)], command: &str) -> String {
    let e = &r.experiment;
    let mut s = String::new();
    let title = if e.title.is_empty() { &e.name } else { &e.title };
    let _ = writeln!(s, "# {title}\n");
    let _ = writeln!(s, "Regenerate with:\n\n```\n{command}\n```\n");
    let _ = writeln!(
        s,
        "Runtime: {:?}; {} repetition(s) per point (seeds {}…), medians shown; measured {} in {:.0} s.\n",
        r.runtime,
        r.repetitions,
        e.scenario.get("seed").map_or("0".to_string(), |v| v.to_string()),
        if r.provenance.is_empty() { "(no provenance recorded)" } else { &r.provenance },
        r.wall_s
    );
    if !e.differences.is_empty() {
        let _ = writeln!(s, "**Settings that differ from the paper's:** {}\n", e.differences.trim());
    }
    if !e.costs_provenance.is_empty() {
        let _ = writeln!(s, "CPU costs per message kind: {}.\n", e.costs_provenance);
    }
    if !e.paper.is_empty() {
        let _ = writeln!(s, "## What the paper reports\n\n{}\n", e.paper.trim());
    }
    claims(&mut s, r);
    if !e.comparison.is_empty() {
        let _ = writeln!(s, "## How this run compares\n\n{}\n", e.comparison.trim());
    }
    let _ = writeln!(s, "## Results\n");
    for (file, title) in plots {
        let _ = writeln!(s, "![{title}]({file})\n");
    }
    let curves = curves(r, None);
    let two = curves.len() == 2;
    for m in &e.metrics {
        let label = e.label(m);
        if label == *m {
            let _ = writeln!(s, "**{m}** (median)\n");
        } else {
            let _ = writeln!(s, "**{label}** (`{m}`, median)\n");
        }
        let mut head = format!("| {} |", e.sweep_label());
        let mut rule = String::from("|---|");
        for (name, _) in &curves {
            head.push_str(&format!(" {name} |"));
            rule.push_str("---:|");
        }
        if two {
            head.push_str(&format!(" {} / {} |", curves[0].0, curves[1].0));
            rule.push_str("---:|");
        }
        let _ = writeln!(s, "{head}\n{rule}");
        let mut marked = false;
        for x in 0..e.sweep.values.len() {
            let mut row = format!("| {} |", e.label(&e.sweep.label(x)));
            let at: Vec<Option<Point>> = curves.iter().map(|(_, pts)| pts.iter().find(|p| p.x == x).copied()).collect();
            let vals: Vec<f64> = at.iter().map(|p| p.map_or(f64::NAN, |p| metric(r, p, m))).collect();
            for (v, p) in vals.iter().zip(&at) {
                // A throughput the clients bound, not the servers.
                let idle = m.starts_with("throughput") && p.is_some_and(|p| client_bound(r, p));
                marked |= idle;
                row.push_str(&format!(" {}{} |", fmt(*v), if idle { " ◦" } else { "" }));
            }
            if two {
                row.push_str(&format!(" {}× |", fmt(vals[0] / vals[1])));
            }
            let _ = writeln!(s, "{row}");
        }
        if marked {
            let _ = writeln!(
                s,
                "\n◦ clients, not servers, bound the throughput (the busiest server's CPU was busy less than {} % \
                 of the run; hollow markers in the plots).",
                SATURATED_PCT
            );
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "Every metric of every point, with each repetition, is in `{0}.csv` and `{0}.json`.\n\n## Experiment file\n\n```toml\n{1}```",
        e.name,
        toml::to_string(e).unwrap_or_default()
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::{Experiment, Runtime, SeriesPick};
    use crate::measure::Sample;
    use crate::runner::PointResult;

    const EXP: &str = r#"
        name = "t"
        title = "Throughput"
        protocols = ["eiger", "eventual", "contrarian:rot_steps=4"]
        metrics = ["throughput_ops_s", "latency.rot.mean_ms"]
        [sweep]
        param = "workload.clients_per_dc"
        values = [1, 2]
        [series]
        param = "cpu.service_us"
        values = [800, 0]
        labels = ["+16 µs/msg", "in-process only"]
        [labels]
        "contrarian:rot_steps=4" = "Contrarian (2 rounds)"
        [scenario]
        duration_ms = 100
        [scenario.topology]
        dcs = 1
        partitions = 2
    "#;

    /// Results of `EXP` with `plots` appended: throughput 100 × (entry + 1)
    /// × (series + 1) × (x + 1), Eventual's 1000 × (series + 1) × (x + 1);
    /// the servers 50 % busy at x = 0 and 95 % at x = 1.
    fn results(plots: &str) -> Results {
        let e = Experiment::from_toml_str(&format!("{EXP}\n{plots}"), "t.toml").unwrap();
        let points = e
            .points()
            .unwrap()
            .into_iter()
            .map(|p| {
                let scale = ((p.series.unwrap() + 1) * (p.x + 1)) as f64;
                let tput = if p.entry == 1 { 1000.0 } else { 100.0 * (p.entry + 1) as f64 } * scale;
                let mut m = Sample::default();
                m.metrics.insert("throughput_ops_s".into(), tput);
                m.metrics.insert("latency.rot.mean_ms".into(), 2.0 + p.x as f64 * 0.5);
                m.metrics.insert("server_busy_max_pct".into(), if p.x == 0 { 50.0 } else { 95.0 });
                PointResult { point: p, repetitions: vec![m.clone()], median: m }
            })
            .collect();
        Results { experiment: e, runtime: Runtime::Sim, repetitions: 1, points, wall_s: 0.0, provenance: String::new() }
    }

    fn names(c: &Chart) -> Vec<&str> {
        c.series.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn curves_axes_and_tables_read_as_labels() {
        let r = results("[[plot]]\nkind = \"line\"\ny = \"throughput_ops_s\"\n");
        let c = chart(&r, &r.experiment.plot[0]);
        assert_eq!(
            names(&c),
            [
                "Eiger, +16 µs/msg",
                "Eiger, in-process only",
                "Eventual, +16 µs/msg",
                "Eventual, in-process only",
                "Contrarian (2 rounds), +16 µs/msg",
                "Contrarian (2 rounds), in-process only"
            ]
        );
        assert_eq!(c.x_label, "clients per DC", "never the parameter's path");
        assert_eq!(c.y_label, "throughput (ops/s)");
        let md = markdown(&r, &[], "cmd");
        assert!(md.contains("| clients per DC | Eiger, +16 µs/msg |"), "{md}");
        assert!(md.contains("**throughput (ops/s)** (`throughput_ops_s`, median)"), "{md}");
        // Integers without decimals, other values as before.
        assert!(md.contains("| 1 | 100 ◦ | 200 ◦ | 1000 ◦ |"), "{md}");
        assert!(md.contains("| 2 | 200 | 400 | 2000 |"), "servers 95 % busy: {md}");
        assert!(md.contains("◦ clients, not servers, bound the throughput"), "{md}");
        assert!(md.contains("| 2.50 |"), "{md}");
        assert!(!md.contains("100.0 |"), "{md}");
    }

    #[test]
    fn a_plot_normalized_to_an_entry_divides_point_by_point() {
        let r = results("[[plot]]\nkind = \"line\"\ny = \"throughput_ops_s\"\nnormalize_to = \"eventual\"\n");
        let c = chart(&r, &r.experiment.plot[0]);
        assert!(
            !names(&c).iter().any(|n| n.starts_with("Eventual")),
            "the reference is the line at 1: {:?}",
            names(&c)
        );
        assert_eq!(c.series.len(), 4);
        // Eiger 100 vs Eventual 1000 at every point; Contrarian 300 vs 1000.
        for s in &c.series {
            let want = if s.name.starts_with("Eiger") { 0.1 } else { 0.3 };
            for &(_, y) in &s.points {
                assert!((y - want).abs() < 1e-12, "{}: {y}", s.name);
            }
        }
        assert_eq!(c.reference, Some((1.0, "Eventual (= 1)".to_string())));
        assert_eq!(c.y_label, "throughput (ops/s), relative to Eventual");
        // By label too; an unknown entry is refused when the file is read.
        let r = results("[[plot]]\nkind = \"bar\"\ny = \"throughput_ops_s\"\nnormalize_to = \"Eventual\"\n");
        assert_eq!(chart(&r, &r.experiment.plot[0]).series.len(), 4);
        let err = Experiment::from_toml_str(
            &format!("{EXP}\n[[plot]]\nkind = \"line\"\ny = \"throughput_ops_s\"\nnormalize_to = \"cassandra\"\n"),
            "t.toml",
        )
        .unwrap_err();
        assert!(err.to_string().contains("cassandra"), "{err}");
    }

    #[test]
    fn a_panel_draws_one_series_value() {
        let r = results(
            "[[plot]]\nkind = \"line\"\ny = \"throughput_ops_s\"\nseries = \"in-process only\"\n\
             [[plot]]\nkind = \"line\"\ny = \"throughput_ops_s\"\nseries = 0\ntitle = \"At +16 µs/msg\"\n",
        );
        assert_eq!(r.experiment.plot[1].series, Some(SeriesPick::Index(0)));
        let c = chart(&r, &r.experiment.plot[0]);
        assert_eq!(names(&c), ["Eiger", "Eventual", "Contrarian (2 rounds)"]);
        assert_eq!(c.title, "Throughput (in-process only)");
        // Series 1 doubles every throughput.
        assert_eq!(c.series[0].points, [(1.0, 200.0), (2.0, 400.0)]);
        let c = chart(&r, &r.experiment.plot[1]);
        assert_eq!(c.title, "At +16 µs/msg", "a title naming the value is kept");
        assert_eq!(c.series[0].points, [(1.0, 100.0), (2.0, 200.0)]);
        // A value that is not there is refused when the file is read.
        for bad in ["series = 2", "series = \"x\""] {
            let text = format!("{EXP}\n[[plot]]\nkind = \"line\"\ny = \"throughput_ops_s\"\n{bad}\n");
            let err = Experiment::from_toml_str(&text, "t.toml").unwrap_err();
            assert!(err.to_string().contains("plot #0: series"), "{err}");
        }
        // A reduced run keeps the panels of the series value it keeps.
        let mut e = r.experiment.clone();
        e.reduce();
        assert_eq!(e.plot.len(), 1);
        assert_eq!(e.plot[0].series, Some(SeriesPick::Index(0)));
    }

    #[test]
    fn throughput_with_idle_servers_is_drawn_hollow() {
        let r = results(
            "[[plot]]\nkind = \"line\"\ny = \"throughput_ops_s\"\n\
             [[plot]]\nkind = \"line\"\ny = \"latency.rot.mean_ms\"\nx = \"throughput_ops_s\"\n\
             [[plot]]\nkind = \"line\"\ny = \"latency.rot.mean_ms\"\n",
        );
        for (i, want) in [(0, vec![true, false]), (1, vec![true, false]), (2, vec![false, false])] {
            let c = chart(&r, &r.experiment.plot[i]);
            for s in &c.series {
                assert_eq!(s.hollow, want, "plot {i}, {}", s.name);
            }
        }
        let svg = render_svg(&chart(&r, &r.experiment.plot[1])).unwrap();
        assert!(svg.contains("hollow:"), "the legend explains hollow markers");
        let svg = render_svg(&chart(&r, &r.experiment.plot[2])).unwrap();
        assert!(!svg.contains("hollow:"), "no hollow point, no note");
    }
}
