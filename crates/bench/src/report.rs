//! Writing results: `<name>.csv` (every metric, every point, medians and
//! repetitions), `<name>.json` (the same plus CDFs and the experiment),
//! `<name>-<i>.svg` per plot, and `<name>.md`, the report a person reads.

use crate::experiment::{ExperimentError, PlotKind, PlotSpec, Point};
use crate::plot::{Chart, ChartKind, Series, render_svg};
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

/// The legend name of a curve: the protocol, and the series value if any.
fn curve_name(r: &Results, p: Point) -> String {
    match (&r.experiment.series, p.series) {
        (Some(s), Some(i)) => format!("{} {}", r.experiment.entry_label(p), s.label(i)),
        _ => r.experiment.entry_label(p),
    }
}

/// The curves of a line or bar chart, in point order.
fn curves(r: &Results) -> Vec<(String, Vec<Point>)> {
    let mut out: Vec<(String, Vec<Point>)> = Vec::new();
    for pr in &r.points {
        let name = curve_name(r, pr.point);
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

pub fn chart(r: &Results, spec: &PlotSpec) -> Chart {
    let e = &r.experiment;
    let title = if spec.title.is_empty() { e.title.clone() } else { spec.title.clone() };
    let y_label = if spec.y_label.is_empty() { spec.y.clone() } else { spec.y_label.clone() };
    match spec.kind {
        PlotKind::Line | PlotKind::Bar => {
            let bar = spec.kind == PlotKind::Bar;
            let series = curves(r)
                .into_iter()
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
                            (x, metric(r, p, &spec.y))
                        })
                        .collect(),
                })
                .collect();
            let x_label = if !spec.x.is_empty() {
                if spec.x_label.is_empty() { spec.x.clone() } else { spec.x_label.clone() }
            } else if e.sweep.x_label.is_empty() {
                e.sweep.name()
            } else {
                e.sweep.x_label.clone()
            };
            Chart {
                kind: if bar { ChartKind::Bar } else { ChartKind::Line },
                title,
                x_label,
                y_label,
                categories: (0..e.sweep.values.len()).map(|i| e.sweep.label(i)).collect(),
                series,
            }
        }
        PlotKind::Cdf => {
            let qs: Vec<f64> = cdf_quantiles().collect();
            let series = r
                .points
                .iter()
                .filter(|pr| pr.point.x == spec.point)
                .map(|pr| Series {
                    name: curve_name(r, pr.point),
                    points: pr
                        .median
                        .cdfs
                        .get(&spec.y)
                        .map(|c| c.iter().zip(&qs).map(|(&ms, &q)| (ms, q)).collect())
                        .unwrap_or_default(),
                })
                .collect();
            Chart {
                kind: ChartKind::Cdf,
                title,
                x_label: format!("{} latency (ms)", spec.y),
                y_label: "fraction of operations".into(),
                categories: Vec::new(),
                series,
            }
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
    for c in &checked {
        let cause = if c.verdict == crate::claims::Verdict::Reproduced { "" } else { c.claim.cause.as_str() };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            c.claim.figure,
            c.claim.text.replace('|', "\\|"),
            c.paper_text().replace('|', "\\|"),
            c.ours_text().replace('|', "\\|"),
            c.verdict.as_str(),
            cause.replace('|', "\\|").replace('\n', " ")
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
    let curves = curves(r);
    let two = curves.len() == 2;
    for m in &e.metrics {
        let _ = writeln!(s, "**{m}** (median)\n");
        let mut head =
            format!("| {} |", if e.sweep.x_label.is_empty() { e.sweep.name() } else { e.sweep.x_label.clone() });
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
        for x in 0..e.sweep.values.len() {
            let mut row = format!("| {} |", e.sweep.label(x));
            let vals: Vec<f64> = curves
                .iter()
                .map(|(_, pts)| pts.iter().find(|p| p.x == x).map_or(f64::NAN, |&p| metric(r, p, m)))
                .collect();
            for v in &vals {
                row.push_str(&format!(" {} |", fmt(*v)));
            }
            if two {
                row.push_str(&format!(" {}× |", fmt(vals[0] / vals[1])));
            }
            let _ = writeln!(s, "{row}");
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
