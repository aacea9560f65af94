//! Experiment files: what to run, what to vary, what to draw.
//!
//! ```toml
//! name = "put-latency-vs-skew"
//! title = "PUT latency against clock skew"
//! paper = "Roohitavaf Fig 5.1a: at 10 ms skew, 4.5 ms (CSX) vs 7.6 ms (GR)."
//! differences = "Two simulated servers; the skew is an offset, not NTP's."  # first lines of the report
//! protocols = ["gentlerain", "causalspartanx"]
//! # An entry may set protocol parameters after a colon, so that one
//! # protocol can be run as several curves: "contrarian:rot_steps=4" (the
//! # `[protocol]` table of that entry's runs gets rot_steps = 4; several
//! # as "name:a=1,b=true"; values are TOML). The entry names its curve.
//!
//! [protocol_params.cclo]              # optional: [protocol] parameters of
//! reader_ttl_us = 500_000             # every entry of that protocol (an
//!                                     # entry's own parameters win)
//!
//! [scenario_params.paris]             # optional: scenario settings of every
//! "topology.replication" = { kind = "partial", factor = 2 }  # entry of that
//!                                     # protocol (dotted paths into
//!                                     # [scenario], set after the sweeps):
//!                                     # one protocol on partial replication
//!                                     # beside one that offers only full
//! repetitions = 5
//! runtime = "sim"                     # or "network", or "capacity" (one
//!                                     # ordering service node driven by
//!                                     # stand-in partitions: crate::capacity)
//! cpu_costs = "costs/model.toml"     # optional: a measured cost file, path
//!                                     # relative to this file (as written by
//!                                     # rot_microbench --costs-out); fills in
//!                                     # what [scenario.cpu] leaves unset
//! metrics = ["latency.put.mean_ms"]   # the report's table columns
//!
//! [sweep]                             # the x axis
//! param = "clocks.node.0.offset_us"   # a dotted path into [scenario]; numbers index arrays
//! values = [5000, 10000, 15000]
//! x = [5, 10, 15]                     # plotted x (default: the values, when numeric)
//! x_label = "clock skew (ms)"
//!
//! [series]                            # optional: one curve per value and protocol
//! param = "workload.amplification"
//! values = [1, 100]
//! labels = ["x1", "x100"]
//!
//! # Either sweep may set several parameters per point instead: `params`
//! # names them (replacing `param`), and each value is an array with one
//! # entry per name, in order. Label such points (or give their x).
//! # [sweep]
//! # params = ["workload.updateproportion", "workload.readproportion"]
//! # values = [[0.8, 0.2], [0.2, 0.8]]
//! # labels = ["4:1", "1:4"]
//!
//! [scenario]                          # a `causeway sim` scenario, inline
//! duration_ms = 10_000
//! # …
//!
//! [[plot]]
//! kind = "line"                       # line | bar | cdf
//! y = "latency.put.mean_ms"           # a metric; for cdf a latency name ("rot")
//! y_label = "mean PUT latency (ms)"
//! # x = "throughput_ops_s"            # line only: plot y against this metric
//!                                     # instead of the sweep's x
//! # x_label = "throughput (ops/s)"    # the x axis's label (default: the
//!                                     # sweep's x_label, or the label of x)
//! # title = "…"                       # default: the experiment's title
//! # log_y = true                      # logarithmic y axis (line, bar)
//! # log_x = true                      # logarithmic x axis (line, cdf)
//! # normalize_to = "eventual"         # line, bar: divide each curve by this
//! #                                   # `protocols` entry's value at the same
//! #                                   # sweep and series value; its own curve
//! #                                   # becomes a dashed reference line at 1
//! # series = "w=0.05"                 # only this series value's curves (its
//! #                                   # label, or its index from 0): one panel
//! #                                   # of a figure; the title gets the label
//!
//! [labels]                            # optional: what a reader sees instead
//! "contrarian:rot_steps=4" = "Contrarian (2 rounds)"  # of a protocols entry,
//! "w=0.01" = "1% writes"              # a series or sweep label, a parameter
//! "workload.zipfian_constant" = "Zipf" # or a metric name, in legends, axis
//!                                     # labels and report tables
//!
//! [[claim]]                           # a headline number of the paper, checked
//! seed = "000"                        # (crates/bench/src/claims.rs): the report
//! figure = "Fig 5.1a"                 # and the reproduction table give ours and
//! text = "PUT latency at 10 ms skew, GR ÷ CSX"  # the verdict
//! paper = 1.69                        # or range = [1, 4], or order = [{…}, {…}]
//! unit = "×"
//! metric = "latency.put.mean_ms"
//! of = { entry = "gentlerain", at = "10" }        # at: a sweep label, max or min
//! over = { entry = "causalspartanx", at = "10" }  # optional: a ratio
//! # less = { entry = "…", at = "10" }             # or a difference instead
//! cause = "…"                         # why, when below reproduced
//! ```
//!
//! Without `[labels]` the registered protocols read as their papers spell
//! them (Contrarian, CC-LO, Cure, COPS, COPS-GT, GentleRain, CausalSpartanX,
//! Eiger, Eventual; an entry with parameters adds them in brackets), common
//! parameters and metrics as words (`workload.clients_per_dc` is "clients
//! per DC", `latency.rot.mean_ms` "mean ROT latency (ms)"; see
//! [`crate::labels`]), and an axis without `x_label` / `y_label` uses them.
//!
//! On a line or bar plot of a throughput metric (`x` or `y` starting with
//! `throughput`), a point whose servers were not saturated is drawn hollow,
//! with the legend entry "hollow: clients, not servers, bound the
//! throughput": its throughput measures the clients, not the capacity.
//! Not saturated means the busiest server's simulated CPU was busy less
//! than 80 % of the measurement window (`server_busy_max_pct`, measured
//! when messages cost CPU time; runs without it are never hollow). The
//! report's tables mark such a throughput with "◦".
//!
//! A line plot against a sweep that gives both `labels` and `x` names its x
//! ticks by the labels ("64:1" at x = 6), unless they would overlap.
//!
//! A reduced run ([`Experiment::reduce`], `--quick`) keeps the sweep's
//! first and last values (or those `[sweep] quick = [i, j]` names), one
//! repetition, a short run, and only the panels (`series = …` plots) of
//! the series value it keeps.

use causeway_protocols::ProtocolName;
use causeway_sim::{Scenario, ScenarioError};
use serde::{Deserialize, Serialize};
use std::path::Path;
use thiserror::Error;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    pub name: String,
    #[serde(default)]
    pub title: String,
    /// What the paper reports for this experiment, quoted in the report.
    #[serde(default)]
    pub paper: String,
    /// How the reproduction compares with the paper, quoted in the report.
    #[serde(default)]
    pub comparison: String,
    /// Where this experiment's settings differ from the paper's, printed in
    /// the report's first lines so that no reader mistakes one for the other.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub differences: String,
    pub protocols: Vec<String>,
    /// `[protocol]` parameters per protocol name, for every entry of it.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub protocol_params: std::collections::BTreeMap<String, toml::Table>,
    /// Scenario settings per protocol name (dotted paths into `[scenario]`),
    /// for every entry of it: what one protocol of the comparison runs on
    /// and the others cannot (partial replication beside full).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub scenario_params: std::collections::BTreeMap<String, toml::Table>,
    #[serde(default = "three")]
    pub repetitions: u32,
    #[serde(default)]
    pub runtime: Runtime,
    pub sweep: Sweep,
    #[serde(default)]
    pub series: Option<Sweep>,
    /// Metrics tabulated in the report (see [`crate::measure`] for names).
    #[serde(default)]
    pub metrics: Vec<String>,
    pub scenario: toml::Table,
    /// A cost file (path relative to the experiment file) whose `[cpu]`
    /// table fills in what `[scenario.cpu]` leaves unset: the per-message
    /// CPU costs measured on the real state machines by a microbenchmark
    /// (`rot_microbench --costs-out`), so that experiments name one
    /// measurement instead of each carrying its own copy of old numbers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpu_costs: String,
    /// Where the cost file's numbers come from (its `[measured]` table), for
    /// the report's first lines.
    #[serde(skip)]
    pub costs_provenance: String,
    #[serde(default)]
    pub plot: Vec<PlotSpec>,
    /// What a reader sees instead of internal names (see [`crate::labels`]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// The paper's headline numbers this experiment answers, each with the
    /// point of our results that answers it ([`crate::claims`]).
    #[serde(default, rename = "claim", skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<crate::claims::Claim>,
}

/// Copy into `to` every entry of `from` it lacks, tables recursively.
fn fill(to: &mut toml::Table, from: toml::Table) {
    for (k, v) in from {
        match (to.get_mut(&k), v) {
            (None, v) => {
                to.insert(k, v);
            }
            (Some(toml::Value::Table(t)), toml::Value::Table(f)) => fill(t, f),
            (Some(_), _) => {}
        }
    }
}

fn three() -> u32 {
    3
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Runtime {
    #[default]
    Sim,
    /// An embedded cluster on loopback with WAN delay injected in the
    /// transport, driven by the network load generator.
    Network,
    /// One ordering service node on the network runtime, driven over TCP
    /// by `topology.partitions` stand-in partitions ([`crate::capacity`]):
    /// `eunomiakv` runs its Eunomia, `sseq` its sequencer. Measures
    /// `service_ops.per_s` and the service's CPU (`service_cpu_us_per_op`,
    /// `service_cpu_pct`); the scenario's `warmup_ms` and `duration_ms`
    /// time it, `[protocol] batch_interval_us` is the partitions' reporting
    /// interval, and `[capacity]`-free: the stand-ins' other settings are
    /// the `causeway capacity` defaults.
    Capacity,
}

/// One varied parameter, or several varied together.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// The parameter's dotted path; empty when `params` is used.
    #[serde(default)]
    pub param: String,
    /// Several parameters set at each point: each value is then an array
    /// holding one entry per parameter, in this order.
    #[serde(default)]
    pub params: Vec<String>,
    pub values: Vec<toml::Value>,
    /// Names of the values in tables and legends (default: the values).
    #[serde(default)]
    pub labels: Vec<String>,
    /// Plotted x of each value (default: the value, when it is a number).
    #[serde(default)]
    pub x: Vec<f64>,
    #[serde(default)]
    pub x_label: String,
    /// The values a reduced run (`--quick`) keeps, by index (default: the
    /// first and the last). For a sweep whose last point is the costliest
    /// to simulate, so that CI's reduced run of it stays short.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quick: Vec<usize>,
}

impl Sweep {
    /// What is varied, for headers and messages: `param`, or `params` joined.
    pub fn name(&self) -> String {
        if self.params.is_empty() { self.param.clone() } else { self.params.join(" + ") }
    }

    /// The (dotted path, value) pairs that value `i` sets.
    pub fn assignments(&self, i: usize) -> Result<Vec<(&str, toml::Value)>, String> {
        let v = &self.values[i];
        if self.params.is_empty() {
            return Ok(vec![(self.param.as_str(), v.clone())]);
        }
        match v {
            toml::Value::Array(a) if a.len() == self.params.len() => {
                Ok(self.params.iter().map(String::as_str).zip(a.iter().cloned()).collect())
            }
            _ => Err(format!("value #{i} must be an array of {} entries, one per params entry", self.params.len())),
        }
    }

    pub fn label(&self, i: usize) -> String {
        match self.labels.get(i) {
            Some(l) => l.clone(),
            None if !self.x.is_empty() => format!("{}", self.x[i]),
            None => match &self.values[i] {
                toml::Value::String(s) => s.clone(),
                v => v.to_string(),
            },
        }
    }

    /// The plotted x of value `i`: `x[i]`, else the value itself, else its index.
    pub fn x(&self, i: usize) -> f64 {
        if let Some(x) = self.x.get(i) {
            return *x;
        }
        match &self.values[i] {
            toml::Value::Integer(n) => *n as f64,
            toml::Value::Float(f) => *f,
            _ => i as f64,
        }
    }

    /// Whether the values are categories rather than points on an axis.
    pub fn categorical(&self) -> bool {
        self.x.is_empty() && self.values.iter().any(|v| !matches!(v, toml::Value::Integer(_) | toml::Value::Float(_)))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlotKind {
    /// y against the sweep's x, one line per protocol (and series value).
    Line,
    /// Grouped bars: one group per sweep value, one bar per protocol (and series value).
    Bar,
    /// The latency distribution `y` at sweep value `point`, one curve per protocol.
    Cdf,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlotSpec {
    pub kind: PlotKind,
    pub y: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub y_label: String,
    /// For a CDF: the index of the sweep value to draw.
    #[serde(default)]
    pub point: usize,
    /// For a line: a metric to plot `y` against instead of the sweep's x
    /// (e.g. latency against throughput, one point per sweep value).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub x: String,
    /// The x axis's label, for any kind (default: the sweep's, or `x`'s).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub x_label: String,
    /// Logarithmic axes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub log_x: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub log_y: bool,
    /// A `protocols` entry (as written, or its label) every curve is divided
    /// by, point by point.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub normalize_to: String,
    /// Only the curves of this series value: one panel of a figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<SeriesPick>,
}

/// A series value, by its label or its index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SeriesPick {
    Index(usize),
    Label(String),
}

#[derive(Debug, Error)]
pub enum ExperimentError {
    #[error("cannot read experiment {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("experiment {path} is not valid: {source}")]
    Parse { path: String, source: Box<toml::de::Error> },
    #[error("experiment {name}: {message}")]
    Invalid { name: String, message: String },
    #[error("experiment {name}, point {point}: {source}")]
    Scenario { name: String, point: String, source: ScenarioError },
    #[error("experiment {name}: cannot write {path}: {source}")]
    Write { name: String, path: String, source: std::io::Error },
    #[error("experiment {name}, point {point}, network runtime: {message}")]
    Network { name: String, point: String, message: String },
    #[error("experiment {path}: cost file {costs}: {message}")]
    Costs { path: String, costs: String, message: String },
}

/// One run configuration: a protocol at a sweep value (and series value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Point {
    pub protocol: ProtocolName,
    /// The index of the `protocols` entry (a protocol and its parameters).
    pub entry: usize,
    pub series: Option<usize>,
    pub x: usize,
}

impl Experiment {
    pub fn load(path: &Path) -> Result<Experiment, ExperimentError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ExperimentError::Io { path: p.clone(), source: e })?;
        Self::from_toml_str(&text, &p)
    }

    /// Parse an experiment; `path` names it in errors and is where a
    /// `cpu_costs` file is looked up from.
    pub fn from_toml_str(text: &str, path: &str) -> Result<Experiment, ExperimentError> {
        let mut e: Experiment =
            toml::from_str(text).map_err(|e| ExperimentError::Parse { path: path.into(), source: Box::new(e) })?;
        if !e.cpu_costs.is_empty() {
            e.apply_costs(path)?;
        }
        e.validate()?;
        Ok(e)
    }

    /// Fill `[scenario.cpu]` from the cost file: a key the experiment sets
    /// itself (a sweep's base value, a deliberate override) wins, per
    /// protocol and message kind for `kind_us`.
    fn apply_costs(&mut self, path: &str) -> Result<(), ExperimentError> {
        let file = Path::new(path).parent().unwrap_or(Path::new(".")).join(&self.cpu_costs);
        let err =
            |message: String| ExperimentError::Costs { path: path.into(), costs: file.display().to_string(), message };
        let text = std::fs::read_to_string(&file).map_err(|e| err(e.to_string()))?;
        let mut costs: toml::Table = toml::from_str(&text).map_err(|e| err(e.to_string()))?;
        let Some(toml::Value::Table(from)) = costs.remove("cpu") else {
            return Err(err("it has no [cpu] table".into()));
        };
        let cpu = match self.scenario.entry("cpu").or_insert_with(|| toml::Value::Table(toml::Table::new())) {
            toml::Value::Table(t) => t,
            _ => return Err(err("the experiment's scenario.cpu is not a table".into())),
        };
        fill(cpu, from);
        self.costs_provenance = match costs.get("measured") {
            Some(toml::Value::Table(m)) => {
                let field = |k: &str| m.get(k).and_then(|v| v.as_str()).unwrap_or("unrecorded").to_string();
                format!(
                    "`{}` (measured {} at commit {} on {}, by `{}`)",
                    self.cpu_costs,
                    field("date"),
                    field("commit"),
                    field("machine"),
                    field("command")
                )
            }
            _ => return Err(err("it has no [measured] table saying when and how it was measured".into())),
        };
        Ok(())
    }

    fn invalid(&self, message: impl Into<String>) -> ExperimentError {
        ExperimentError::Invalid { name: self.name.clone(), message: message.into() }
    }

    pub fn protocol_names(&self) -> Result<Vec<ProtocolName>, ExperimentError> {
        self.protocols.iter().map(|p| Ok(self.protocol_entry(p)?.0)).collect()
    }

    /// A `protocols` entry: the protocol, and the `[protocol]` parameters
    /// after its colon (`"contrarian:rot_steps=4,tree_fanout=2"`).
    pub fn protocol_entry(&self, entry: &str) -> Result<(ProtocolName, Vec<(String, toml::Value)>), ExperimentError> {
        let (name, params) = entry.split_once(':').unwrap_or((entry, ""));
        let protocol =
            name.trim().parse().map_err(|e: causeway_protocols::UnknownProtocol| self.invalid(e.to_string()))?;
        let mut out = Vec::new();
        for kv in params.split(',').map(str::trim).filter(|kv| !kv.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| self.invalid(format!("protocol entry {entry:?}: {kv:?} must be name=value")))?;
            let v = v.trim();
            let value = toml::from_str::<toml::Table>(&format!("v = {v}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(v.to_string()));
            out.push((k.trim().to_string(), value));
        }
        Ok((protocol, out))
    }

    /// Every point, protocol-major.
    pub fn points(&self) -> Result<Vec<Point>, ExperimentError> {
        let series: Vec<Option<usize>> = match &self.series {
            Some(s) => (0..s.values.len()).map(Some).collect(),
            None => vec![None],
        };
        let mut out = Vec::new();
        for (entry, protocol) in self.protocol_names()?.into_iter().enumerate() {
            for &s in &series {
                for x in 0..self.sweep.values.len() {
                    out.push(Point { protocol, entry, series: s, x });
                }
            }
        }
        Ok(out)
    }

    /// Shrink the experiment to a smoke run of its own settings: the first
    /// and last value of its sweep, the first of its series, one
    /// repetition, at most 600 ms of load. CI runs every experiment file so,
    /// which keeps each one runnable on the current code (a parameter
    /// renamed or a metric gone fails it) without the time the full sweeps
    /// take.
    pub fn reduce(&mut self) {
        // A panel of a series value the reduction drops goes with it.
        let panels: Vec<bool> = self.plot.iter().map(|p| matches!(self.plot_series(p), Ok(None | Some(0)))).collect();
        let mut keep = panels.into_iter();
        self.plot.retain(|_| keep.next().unwrap_or(true));
        fn reduced<T: Clone>(v: &mut Vec<T>, quick: &[usize]) {
            if !quick.is_empty() && !v.is_empty() {
                *v = quick.iter().map(|&i| v[i].clone()).collect();
            } else if v.len() > 2 {
                *v = vec![v[0].clone(), v[v.len() - 1].clone()];
            }
        }
        let quick = std::mem::take(&mut self.sweep.quick);
        reduced(&mut self.sweep.values, &quick);
        reduced(&mut self.sweep.labels, &quick);
        reduced(&mut self.sweep.x, &quick);
        if let Some(series) = &mut self.series {
            series.values.truncate(1);
            series.labels.truncate(1);
            series.x.truncate(1);
        }
        self.repetitions = 1;
        let cap = |t: &mut toml::Table, key: &str, max: i64| {
            if let Some(toml::Value::Integer(v)) = t.get_mut(key) {
                *v = (*v).min(max);
            }
        };
        cap(&mut self.scenario, "duration_ms", 600);
        cap(&mut self.scenario, "warmup_ms", 100);
        cap(&mut self.scenario, "drain_ms", 500);
    }

    /// Whether results measured for `other` answer this experiment's points:
    /// the same protocols, parameters, sweeps and scenario (costs merged in).
    /// Titles, prose, claims and plots may differ; that is what a redrawn
    /// report changes.
    pub fn same_runs(&self, other: &Experiment) -> Result<(), String> {
        let sweep = |s: &Sweep| (s.param.clone(), s.params.clone(), s.values.clone());
        let checks = [
            ("protocols", self.protocols == other.protocols),
            ("protocol_params", self.protocol_params == other.protocol_params),
            ("scenario_params", self.scenario_params == other.scenario_params),
            ("sweep", sweep(&self.sweep) == sweep(&other.sweep)),
            ("series", self.series.as_ref().map(sweep) == other.series.as_ref().map(sweep)),
            ("scenario (with its cost file)", self.scenario == other.scenario),
            ("runtime", self.runtime == other.runtime),
        ];
        let differ: Vec<&str> = checks.iter().filter(|(_, same)| !same).map(|(n, _)| *n).collect();
        if differ.is_empty() { Ok(()) } else { Err(format!("its {} changed since", differ.join(", "))) }
    }

    /// A readable name of a point, for errors and progress.
    pub fn point_name(&self, p: Point) -> String {
        let mut s = format!("{} {}={}", self.entry_label(p), self.sweep.name(), self.sweep.label(p.x));
        if let (Some(i), Some(series)) = (p.series, &self.series) {
            s.push_str(&format!(" {}={}", series.name(), series.label(i)));
        }
        s
    }

    /// The name of a point's curve: its `protocols` entry as written.
    pub fn entry_label(&self, p: Point) -> String {
        self.protocols.get(p.entry).map_or_else(|| p.protocol.to_string(), |e| e.trim().to_string())
    }

    /// The scenario of `point` at repetition `rep` (seed + rep).
    pub fn scenario(&self, point: Point, rep: u32) -> Result<Scenario, ExperimentError> {
        let mut t = self.scenario.clone();
        let set = |t: &mut toml::Table, sweep: &Sweep, i: usize| {
            for (path, v) in sweep.assignments(i).map_err(|m| self.invalid(m))? {
                set_path(t, path, v).map_err(|m| self.invalid(m))?;
            }
            Ok::<(), ExperimentError>(())
        };
        set(&mut t, &self.sweep, point.x)?;
        if let (Some(s), Some(i)) = (&self.series, point.series) {
            set(&mut t, s, i)?;
        }
        if let Some(params) = self.scenario_params.get(point.protocol.as_str()) {
            for (path, v) in params {
                set_path(&mut t, path, v.clone()).map_err(|m| self.invalid(m))?;
            }
        }
        if let Some(params) = self.protocol_params.get(point.protocol.as_str()) {
            for (k, v) in params {
                set_path(&mut t, &format!("protocol.{k}"), v.clone()).map_err(|m| self.invalid(m))?;
            }
        }
        if let Some(entry) = self.protocols.get(point.entry) {
            for (k, v) in self.protocol_entry(entry)?.1 {
                set_path(&mut t, &format!("protocol.{k}"), v).map_err(|m| self.invalid(m))?;
            }
        }
        let err = |source| ExperimentError::Scenario { name: self.name.clone(), point: self.point_name(point), source };
        let mut sc =
            Scenario::from_toml_str(&toml::to_string(&t).expect("a table serialises"), "[scenario]").map_err(err)?;
        sc.name = self.name.clone();
        sc.seed = sc.seed.wrapping_add(rep as u64);
        sc.validate().map_err(err)?;
        Ok(sc)
    }

    fn validate(&self) -> Result<(), ExperimentError> {
        if self.name.is_empty() || !self.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(self.invalid("name must be non-empty letters, digits, '-' or '_' (it names the output files)"));
        }
        if self.protocols.is_empty() {
            return Err(self.invalid("protocols must name at least one protocol"));
        }
        self.protocol_names()?;
        let names = self.protocol_names()?;
        for (table, p) in self
            .protocol_params
            .keys()
            .map(|p| ("protocol_params", p))
            .chain(self.scenario_params.keys().map(|p| ("scenario_params", p)))
        {
            if !names.iter().any(|n| n.as_str() == p) {
                return Err(self.invalid(format!("{table}.{p} names no protocol of this experiment")));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for p in &self.protocols {
            if !seen.insert(p.trim()) {
                return Err(self.invalid(format!("protocol entry {p:?} is listed twice")));
            }
        }
        if self.repetitions == 0 {
            return Err(self.invalid("repetitions must be at least 1"));
        }
        for (what, s) in std::iter::once(("sweep", &self.sweep)).chain(self.series.iter().map(|s| ("series", s))) {
            if s.values.is_empty() {
                return Err(self.invalid(format!("{what}.values must not be empty")));
            }
            if s.param.is_empty() == s.params.is_empty() {
                return Err(self.invalid(format!("{what} must set exactly one of param and params")));
            }
            if let Some(i) = s.quick.iter().find(|&&i| i >= s.values.len()) {
                return Err(self.invalid(format!("{what}.quick names value {i}; there are {}", s.values.len())));
            }
            for (field, n) in [("labels", s.labels.len()), ("x", s.x.len())] {
                if n != 0 && n != s.values.len() {
                    return Err(self.invalid(format!("{what}.{field} has {n} entries for {} values", s.values.len())));
                }
            }
        }
        for (i, p) in self.plot.iter().enumerate() {
            if p.kind == PlotKind::Cdf && p.point >= self.sweep.values.len() {
                return Err(self.invalid(format!("plot #{i}: point {} is past the sweep's values", p.point)));
            }
            if !p.x.is_empty() && p.kind != PlotKind::Line {
                return Err(self.invalid(format!("plot #{i}: x (a metric) is only for kind = \"line\"")));
            }
            self.validate_plot(p).map_err(|m| self.invalid(format!("plot #{i}: {m}")))?;
        }
        // Build every point's scenario now, so a typo fails before hours of runs.
        for p in self.points()? {
            self.scenario(p, 0)?;
        }
        Ok(())
    }
}

/// Set `path` (dot-separated; numeric segments index arrays) in `t`,
/// creating missing tables on the way.
pub fn set_path(t: &mut toml::Table, path: &str, value: toml::Value) -> Result<(), String> {
    let segs: Vec<&str> = path.split('.').collect();
    if segs.iter().any(|s| s.is_empty()) {
        return Err(format!("parameter path {path:?} has an empty segment"));
    }
    let mut cur: &mut toml::Value = &mut *t.entry(segs[0]).or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if segs.len() == 1 {
        *cur = value;
        return Ok(());
    }
    for (i, seg) in segs.iter().enumerate().skip(1) {
        let last = i == segs.len() - 1;
        cur = match cur {
            toml::Value::Table(tt) => {
                let e = tt.entry(*seg).or_insert_with(|| toml::Value::Table(toml::Table::new()));
                if last {
                    *e = value;
                    return Ok(());
                }
                e
            }
            toml::Value::Array(a) => {
                let idx: usize =
                    seg.parse().map_err(|_| format!("parameter path {path:?}: {seg:?} must index an array"))?;
                let len = a.len();
                let e = a
                    .get_mut(idx)
                    .ok_or_else(|| format!("parameter path {path:?}: index {idx} is past the array's {len} entries"))?;
                if last {
                    *e = value;
                    return Ok(());
                }
                e
            }
            _ => return Err(format!("parameter path {path:?}: {:?} is not a table or array", segs[i - 1])),
        };
    }
    unreachable!("the loop returns at the last segment")
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
        name = "t"
        protocols = ["gentlerain", "causalspartanx"]
        [sweep]
        param = "clocks.node.0.offset_us"
        values = [1000, 2000]
        [series]
        param = "workload.amplification"
        values = [1, 3]
        [scenario]
        duration_ms = 100
        [scenario.topology]
        dcs = 1
        partitions = 2
        [scenario.workload]
        clients_per_dc = 1
        [[scenario.clocks.node]]
        node = 1
        offset_us = 0
    "#;

    #[test]
    fn points_set_their_parameters() {
        let e = Experiment::from_toml_str(BASE, "t.toml").unwrap();
        let pts = e.points().unwrap();
        assert_eq!(pts.len(), 2 * 2 * 2);
        let sc = e.scenario(pts[3], 2).unwrap();
        assert_eq!(sc.clocks.node[0].offset_us, 2000);
        assert_eq!(sc.workload.amplification, 3);
        assert_eq!(sc.seed, 2);
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let e = Experiment::from_toml_str(&BASE.replace("\"gentlerain\"", "\"nope\""), "t.toml").unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        let e = Experiment::from_toml_str(&BASE.replace("clocks.node.0", "clocks.node.5"), "t.toml").unwrap_err();
        assert!(e.to_string().contains("index 5"), "{e}");
        let e = Experiment::from_toml_str(&BASE.replace("workload.amplification", "workload.amplificaton"), "t.toml")
            .unwrap_err();
        assert!(e.to_string().contains("amplificaton"), "{e}");
        let e =
            Experiment::from_toml_str(&BASE.replace("name = \"t\"", "name = \"t\"\nbogus = 1"), "t.toml").unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
    }

    #[test]
    fn a_sweep_can_set_several_parameters_per_point() {
        let multi = BASE.replace(
            "param = \"clocks.node.0.offset_us\"\n        values = [1000, 2000]",
            "params = [\"workload.updateproportion\", \"workload.readproportion\"]\n        \
             values = [[0.8, 0.2], [0.25, 0.75]]\n        labels = [\"4:1\", \"1:3\"]",
        );
        let e = Experiment::from_toml_str(&multi, "t.toml").unwrap();
        assert_eq!(e.sweep.name(), "workload.updateproportion + workload.readproportion");
        let pts = e.points().unwrap();
        let sc = e.scenario(pts[1], 0).unwrap();
        assert_eq!((sc.workload.updateproportion, sc.workload.readproportion), (0.25, 0.75));
        assert_eq!(sc.workload.amplification, 1);
        assert!(e.point_name(pts[1]).contains("1:3"), "{}", e.point_name(pts[1]));
        // A value that is not one entry per parameter, and param with params.
        let e = Experiment::from_toml_str(&multi.replace("[0.25, 0.75]", "0.25"), "t.toml").unwrap_err();
        assert!(e.to_string().contains("value #1"), "{e}");
        let both = multi.replace("params = [", "param = \"workload.amplification\"\n        params = [");
        let e = Experiment::from_toml_str(&both, "t.toml").unwrap_err();
        assert!(e.to_string().contains("exactly one of param and params"), "{e}");
    }

    #[test]
    fn one_protocol_can_run_with_several_parameter_settings() {
        let two = BASE.replace(
            "protocols = [\"gentlerain\", \"causalspartanx\"]",
            "protocols = [\"contrarian\", \"contrarian:rot_steps=4, tree_fanout=2\", \"cclo\"]",
        );
        let e = Experiment::from_toml_str(&two, "t.toml").unwrap();
        let pts = e.points().unwrap();
        assert_eq!(pts.len(), 3 * 2 * 2);
        let (a, b, c) = (pts[0], pts[4], pts[8]);
        assert_eq!((a.protocol, b.protocol), (ProtocolName::Contrarian, ProtocolName::Contrarian));
        assert_ne!(a, b);
        assert!(e.scenario(a, 0).unwrap().protocol.is_empty());
        let p = e.scenario(b, 0).unwrap().protocol;
        assert_eq!(p.get("rot_steps"), Some(&toml::Value::Integer(4)));
        assert_eq!(p.get("tree_fanout"), Some(&toml::Value::Integer(2)));
        assert!(e.scenario(c, 0).unwrap().protocol.is_empty());
        assert_eq!(e.entry_label(b), "contrarian:rot_steps=4, tree_fanout=2");
        assert!(e.point_name(b).starts_with("contrarian:rot_steps=4"), "{}", e.point_name(b));
        // Malformed parameters, and the same entry twice.
        let bad = two.replace("tree_fanout=2", "tree_fanout");
        let err = Experiment::from_toml_str(&bad, "t.toml").unwrap_err();
        assert!(err.to_string().contains("name=value"), "{err}");
        // Per-protocol parameters reach every entry of that protocol only.
        let shared = two.replace("[sweep]", "[protocol_params.contrarian]\nstabilization_interval_us = 7\n[sweep]");
        let e = Experiment::from_toml_str(&shared, "t.toml").unwrap();
        for p in [a, b] {
            let t = e.scenario(p, 0).unwrap().protocol;
            assert_eq!(t.get("stabilization_interval_us"), Some(&toml::Value::Integer(7)));
        }
        assert!(e.scenario(c, 0).unwrap().protocol.is_empty());
        let err =
            Experiment::from_toml_str(&shared.replace("protocol_params.contrarian", "protocol_params.cure"), "t.toml")
                .unwrap_err();
        assert!(err.to_string().contains("names no protocol"), "{err}");
        let dup = two.replace("\"cclo\"", "\"contrarian\"");
        let err = Experiment::from_toml_str(&dup, "t.toml").unwrap_err();
        assert!(err.to_string().contains("twice"), "{err}");
    }

    /// Scenario settings per protocol reach that protocol's points only, set
    /// after the sweeps; a table naming no protocol of the file is refused.
    #[test]
    fn scenario_params_set_one_protocols_scenario() {
        let mixed = BASE.replace("\"gentlerain\"", "\"paris\"").replace(
            "[sweep]",
            "[scenario_params.paris]\n\"topology.dcs\" = 3\n\"topology.replication\" = { kind = \"partial\", factor = 2 }\n[sweep]",
        );
        let e = Experiment::from_toml_str(&mixed, "t.toml").unwrap();
        let pts = e.points().unwrap();
        let paris = pts.iter().find(|p| p.protocol == ProtocolName::Paris).unwrap();
        let csx = pts.iter().find(|p| p.protocol == ProtocolName::CausalSpartanX).unwrap();
        let (a, b) = (e.scenario(*paris, 0).unwrap(), e.scenario(*csx, 0).unwrap());
        assert_eq!((a.topology.dcs, b.topology.dcs), (3, 1));
        assert_ne!(a.topology.replication, b.topology.replication);
        assert_eq!(a.clocks.node[0].offset_us, 1000, "the sweep still applies");
        let err = Experiment::from_toml_str(&mixed.replace("scenario_params.paris", "scenario_params.cure"), "t.toml")
            .unwrap_err();
        assert!(err.to_string().contains("scenario_params.cure names no protocol"), "{err}");
    }

    #[test]
    fn a_line_may_plot_one_metric_against_another() {
        let xy = format!("{BASE}\n[[plot]]\nkind = \"line\"\ny = \"latency.rot.mean_ms\"\nx = \"throughput_ops_s\"\n");
        let e = Experiment::from_toml_str(&xy, "t.toml").unwrap();
        assert_eq!(e.plot[0].x, "throughput_ops_s");
        let err = Experiment::from_toml_str(&xy.replace("kind = \"line\"", "kind = \"bar\""), "t.toml").unwrap_err();
        assert!(err.to_string().contains("only for kind"), "{err}");
    }

    #[test]
    fn a_cost_file_fills_in_what_the_experiment_leaves_unset() {
        let dir = std::env::temp_dir().join(format!("causeway-costs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("costs")).unwrap();
        let costs = "[measured]\ndate = \"2026-12-06\"\ncommit = \"abc\"\nmachine = \"m\"\ncommand = \"c\"\n\
                     [cpu]\nservice_us = 0\nus_per_kib = 5.0\n[cpu.kind_us.gentlerain]\nput_req = 3.0\nget_req = 2.0\n";
        std::fs::write(dir.join("costs/c.toml"), costs).unwrap();
        let text = BASE.replace("[sweep]", "cpu_costs = \"costs/c.toml\"\n[sweep]")
            + "[scenario.cpu]\nus_per_kib = 7.0\n[scenario.cpu.kind_us.gentlerain]\nget_req = 9.0\n";
        let path = dir.join("e.toml");
        std::fs::write(&path, &text).unwrap();
        let e = Experiment::load(&path).unwrap();
        let p = e.points().unwrap()[0];
        let sc = e.scenario(p, 0).unwrap();
        assert_eq!(sc.cpu.us_per_kib, 7.0, "the experiment's own value wins");
        assert_eq!(sc.cpu.kind_us["gentlerain"]["put_req"], 3.0, "the file fills in");
        assert_eq!(sc.cpu.kind_us["gentlerain"]["get_req"], 9.0, "per kind, the experiment wins");
        assert!(e.costs_provenance.contains("commit abc"), "{}", e.costs_provenance);
        // A cost file that does not say where it comes from is refused.
        std::fs::write(dir.join("costs/c.toml"), costs.replace("[measured]", "[other]")).unwrap();
        let err = Experiment::load(&path).unwrap_err();
        assert!(err.to_string().contains("[measured]"), "{err}");
        std::fs::remove_file(dir.join("costs/c.toml")).unwrap();
        let err = Experiment::load(&path).unwrap_err();
        assert!(err.to_string().contains("costs/c.toml"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
