//! What a reader sees instead of internal names: protocol entries, series
//! labels, parameter and metric names, looked up in the experiment's
//! `[labels]` table first, then in the defaults here.

use crate::experiment::{Experiment, PlotSpec, SeriesPick};
use crate::runner::Results;

/// The registered protocols as their papers spell them.
const PROTOCOLS: &[(&str, &str)] = &[
    ("eventual", "Eventual"),
    ("gentlerain", "GentleRain"),
    ("causalspartanx", "CausalSpartanX"),
    ("contrarian", "Contrarian"),
    ("cure", "Cure"),
    ("cops", "COPS"),
    ("copsgt", "COPS-GT"),
    ("eiger", "Eiger"),
    ("cclo", "CC-LO"),
    ("eunomiakv", "EunomiaKV"),
    ("sseq", "S-Seq"),
    ("sseq:mutant_async_sequencer=true", "A-Seq"),
    ("paris", "PaRiS"),
    ("bpr", "BPR"),
    ("accf", "ACCF"),
    ("nukv", "NuKV"),
];

/// Parameters often swept, as an axis names them.
const PARAMS: &[(&str, &str)] = &[
    ("workload.clients_per_dc", "clients per DC"),
    ("workload.amplification", "amplification factor"),
    ("workload.fieldlength", "value size (bytes)"),
    ("workload.rot_size", "keys per read"),
    ("workload.wot_size", "keys per write transaction"),
    ("workload.recordcount", "keys"),
    ("workload.zipfian_constant", "Zipf constant"),
    ("workload.columns_per_read", "columns per key read"),
    ("workload.columns_per_write", "columns per key written"),
    ("workload.updateproportion", "PUT fraction"),
    ("workload.readproportion", "GET fraction"),
    ("workload.rotproportion", "ROT fraction"),
    ("workload.wotproportion", "write transaction fraction"),
    ("topology.partitions", "partitions per DC"),
    ("topology.dcs", "data centers"),
    ("clocks.skew_us", "clock skew (µs)"),
    ("cpu.service_us", "CPU µs per message"),
    ("network.rtt_ms", "round trip (ms)"),
];

/// Operation kinds in metric names.
const KINDS: &[(&str, &str)] = &[
    ("get", "GET"),
    ("put", "PUT"),
    ("rot", "ROT"),
    ("wot", "write transaction"),
    ("amplified", "request"),
    ("batch", "batched write"),
    ("rot_touching_slow", "ROT touching the slow partition"),
    ("rot_not_touching_slow", "ROT not touching the slow partition"),
    ("ops", "operation"),
];

/// An operation kind of a latency name (`rot`) as words ("ROT").
pub fn kind_label(kind: &str) -> String {
    lookup(KINDS, kind).map_or_else(|| kind.replace('_', " "), str::to_string)
}

fn lookup(table: &[(&str, &'static str)], key: &str) -> Option<&'static str> {
    table.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// A protocol name as the papers spell it (unknown ones capitalised).
pub fn protocol_label(name: &str) -> String {
    lookup(PROTOCOLS, name).map_or_else(
        || {
            let mut c = name.chars();
            c.next().map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
        },
        str::to_string,
    )
}

/// A metric's default label: `latency.rot.mean_ms` is "mean ROT latency (ms)".
pub fn metric_label(m: &str) -> String {
    match m {
        "throughput_ops_s" => return "throughput (ops/s)".into(),
        "throughput_keys_s" => return "keys per second".into(),
        "throughput_columns_s" => return "columns per second".into(),
        "server_busy_max_pct" => return "busiest server's CPU busy (%)".into(),
        "msgs_per_op" => return "messages per operation".into(),
        "server_bytes_per_op" => return "server bytes per operation".into(),
        "stale_reads_pct" => return "stale reads (%)".into(),
        _ => {}
    }
    let stat = |s: &str| match s {
        "mean_ms" | "mean" => Some("mean"),
        "p50_ms" => Some("median"),
        "p90_ms" => Some("p90"),
        "p95_ms" => Some("p95"),
        "p99_ms" | "p99" => Some("p99"),
        "max_ms" | "max" => Some("max"),
        _ => None,
    };
    let parts: Vec<&str> = m.split('.').collect();
    match parts.as_slice() {
        ["latency", kind, s] if stat(s).is_some() => {
            let k = lookup(KINDS, kind).map_or_else(|| kind.replace('_', " "), str::to_string);
            format!("{} {k} latency (ms)", stat(s).unwrap_or_default())
        }
        ["latency", kind, "count"] => {
            let k = lookup(KINDS, kind).map_or_else(|| kind.replace('_', " "), str::to_string);
            format!("{k} count")
        }
        ["visibility", pair, s] if stat(s).is_some() => {
            format!("{} visibility latency {} (ms)", stat(s).unwrap_or_default(), pair.replace("->", "→"))
        }
        [sample, s] if stat(s).is_some() => format!("{} {}", stat(s).unwrap_or_default(), sample.replace('_', " ")),
        _ => m.to_string(),
    }
}

/// A parameter's default label: the known ones, else its last segment.
pub fn param_label(p: &str) -> String {
    lookup(PARAMS, p).map_or_else(|| p.rsplit('.').next().unwrap_or(p).replace('_', " "), str::to_string)
}

impl Experiment {
    /// What a reader sees for `key` (a `protocols` entry, a series or sweep
    /// label, a parameter or metric name): the `[labels]` entry, else the
    /// default for a protocol entry, parameter or metric, else `key`.
    pub fn label(&self, key: &str) -> String {
        let key = key.trim();
        if let Some(l) = self.labels.get(key) {
            return l.clone();
        }
        if self.protocols.iter().any(|p| p.trim() == key) {
            let (name, params) = key.split_once(':').unwrap_or((key, ""));
            let base = self.labels.get(name.trim()).cloned().unwrap_or_else(|| protocol_label(name.trim()));
            return if params.trim().is_empty() { base } else { format!("{base} ({})", params.trim()) };
        }
        if key.contains('.') && !key.contains(' ') && (key.starts_with("workload.") || self.is_param(key)) {
            return param_label(key);
        }
        let m = metric_label(key);
        if m != key {
            return m;
        }
        key.to_string()
    }

    fn is_param(&self, key: &str) -> bool {
        std::iter::once(&self.sweep)
            .chain(self.series.iter())
            .any(|s| s.param == key || s.params.iter().any(|p| p == key))
    }

    /// The x axis's label for the sweep: its `x_label`, else the label of
    /// what it varies.
    pub fn sweep_label(&self) -> String {
        if !self.sweep.x_label.is_empty() {
            return self.sweep.x_label.clone();
        }
        let names: Vec<String> =
            if self.sweep.params.is_empty() { vec![self.sweep.param.clone()] } else { self.sweep.params.clone() };
        names.iter().map(|n| self.label(n)).collect::<Vec<_>>().join(" and ")
    }

    /// The label of series value `i`.
    pub fn series_label(&self, i: usize) -> String {
        self.series.as_ref().map_or_else(String::new, |s| self.label(&s.label(i)))
    }

    /// The protocol entry a plot's `normalize_to` names (as written, or by
    /// its label).
    pub fn entry_named(&self, name: &str) -> Option<usize> {
        let name = name.trim();
        self.protocols
            .iter()
            .position(|p| p.trim() == name)
            .or_else(|| self.protocols.iter().position(|p| self.label(p).eq_ignore_ascii_case(name)))
    }

    /// The series value a plot restricts itself to, if any.
    pub fn plot_series(&self, spec: &PlotSpec) -> Result<Option<usize>, String> {
        let Some(pick) = &spec.series else { return Ok(None) };
        let Some(series) = &self.series else { return Err("series is set but the experiment has no [series]".into()) };
        let n = series.values.len();
        match pick {
            SeriesPick::Index(i) if *i < n => Ok(Some(*i)),
            SeriesPick::Index(i) => Err(format!("series {i} is past the {n} series values")),
            SeriesPick::Label(l) => (0..n)
                .find(|&i| series.label(i) == *l || self.series_label(i) == *l)
                .map(Some)
                .ok_or_else(|| format!("series {l:?} is no series label")),
        }
    }

    /// Check a plot's options that name something of the experiment.
    pub fn validate_plot(&self, spec: &PlotSpec) -> Result<(), String> {
        self.plot_series(spec)?;
        if !spec.normalize_to.is_empty() && self.entry_named(&spec.normalize_to).is_none() {
            return Err(format!("normalize_to {:?} names no protocols entry", spec.normalize_to));
        }
        use crate::experiment::PlotKind;
        if spec.kind == PlotKind::Cdf && !spec.normalize_to.is_empty() {
            return Err("normalize_to is for line and bar plots".into());
        }
        if spec.kind == PlotKind::Bar && spec.log_x {
            return Err("log_x is for line and cdf plots (a bar plot's x is categories)".into());
        }
        if spec.kind == PlotKind::Cdf && spec.log_y {
            return Err("log_y is for line and bar plots (a CDF's y is a fraction)".into());
        }
        Ok(())
    }
}

/// Whether the point's servers were not saturated, so that clients, not
/// servers, bound its throughput: the busiest server's CPU was busy less
/// than [`SATURATED_PCT`] of the measurement window. `false` when the run
/// did not measure it (no CPU costs, or the network runtime).
pub fn client_bound(r: &Results, p: crate::experiment::Point) -> bool {
    r.get(p).and_then(|pr| pr.median.metrics.get("server_busy_max_pct")).is_some_and(|&b| b < SATURATED_PCT)
}

/// The busy percentage of the busiest server at or above which a point
/// counts as server-bound.
pub const SATURATED_PCT: f64 = 80.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_labels_read_as_words() {
        assert_eq!(metric_label("latency.rot.mean_ms"), "mean ROT latency (ms)");
        assert_eq!(metric_label("latency.put.p99_ms"), "p99 PUT latency (ms)");
        assert_eq!(metric_label("visibility.A->B.mean_ms"), "mean visibility latency A→B (ms)");
        assert_eq!(metric_label("deps_per_write.mean"), "mean deps per write");
        assert_eq!(metric_label("throughput_ops_s"), "throughput (ops/s)");
        assert_eq!(metric_label("something_else"), "something_else");
        assert_eq!(protocol_label("cclo"), "CC-LO");
        assert_eq!(protocol_label("copsgt"), "COPS-GT");
        assert_eq!(protocol_label("newone"), "Newone");
        assert_eq!(param_label("workload.clients_per_dc"), "clients per DC");
        assert_eq!(param_label("workload.some_knob"), "some knob");
    }

    /// A protocol registered without a name here would read as its
    /// command-line name capitalized ("Eunomiakv").
    #[test]
    fn every_registered_protocol_has_its_papers_name() {
        for p in causeway_protocols::ProtocolName::ALL {
            assert!(PROTOCOLS.iter().any(|(k, _)| *k == p.as_str()), "{p} has no label");
        }
    }
}
