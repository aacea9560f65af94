//! The paper's headline numbers, each checked against an experiment's
//! medians: a claim names a figure, the paper's number, and the point (or the
//! ratio of two points) of our results that answers it, and gets a verdict.
//!
//! The verdict rule is one for every seed: a claim is *reproduced* when ours
//! is within ±25 % of the paper's number or stronger in the paper's
//! direction; *ordering only* when a ratio lands on the paper's side of 1 but
//! outside that band (or an ordering of several curves holds while their
//! ratios do not); *not reproduced* otherwise. A figure's verdict is its
//! worst claim's. Reports list their claims, and `causeway experiment DIR
//! --table FILE` gathers every report's claims into one table.
//!
//! What this is not: a statistical test. Medians of a few repetitions of a
//! deterministic simulator are compared with numbers read off the papers'
//! text and plots; a verdict below *reproduced* names its cause in words
//! (`cause`), measured elsewhere in the report.

use crate::experiment::Point;
use crate::runner::Results;
use serde::{Deserialize, Serialize};

/// How far from the paper's number ours may land and still reproduce it.
pub const TOLERANCE: f64 = 0.25;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// Which seed ("000" … "004").
    pub seed: String,
    /// The figure or table, as the paper numbers it ("Fig 5", "Table 7.4").
    pub figure: String,
    /// What is compared, in the paper's terms.
    pub text: String,
    /// The paper's number (a ratio when `over` is given). Absent for an
    /// ordering claim (`order`).
    #[serde(default)]
    pub paper: Option<f64>,
    /// A range the paper gives instead of one number ("always 1–4"): ours
    /// reproduces it inside, and nothing else.
    #[serde(default)]
    pub range: Option<[f64; 2]>,
    /// The metric compared (a name from [`crate::measure`]).
    pub metric: String,
    /// Our number: the metric at this point …
    #[serde(default)]
    pub of: Option<Select>,
    /// … divided by the metric at this one, when the claim is a ratio.
    #[serde(default)]
    pub over: Option<Select>,
    /// … or less the metric at this one, when the claim is a difference
    /// (an extra latency in ms: "adds ~10 ms over eventual"). Not with
    /// `over`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub less: Option<Select>,
    /// An ordering claim instead: these points' metric rises in this order.
    #[serde(default)]
    pub order: Vec<Select>,
    /// Subtracted from each point's metric first: a delay the paper
    /// factors out (the one-way trip, for a visibility the paper counts
    /// from the update's arrival).
    #[serde(default)]
    pub minus: f64,
    /// Ours is multiplied by this before comparing (0.02 for a run slowed
    /// 50× whose latencies the paper gives in real time).
    #[serde(default = "one")]
    pub scale: f64,
    /// Which side of the paper's number counts as stronger.
    #[serde(default)]
    pub stronger: Stronger,
    /// Printed after both numbers ("×", " ms").
    #[serde(default)]
    pub unit: String,
    /// For a verdict below reproduced: its cause, as measured.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cause: String,
}

fn one() -> f64 {
    1.0
}

/// One point of the results: a `protocols` entry, a series label and a
/// sweep label (or `max` / `min` over the sweep).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Select {
    /// The `protocols` entry, exactly as written there.
    pub entry: String,
    /// The series label (empty when the experiment has no series).
    #[serde(default)]
    pub series: String,
    /// The sweep label; `max` or `min` take the metric's extreme over the
    /// sweep (peak throughput); empty when the sweep has one value.
    #[serde(default)]
    pub at: String,
    /// Another metric for this side only.
    #[serde(default)]
    pub metric: String,
    /// Divide by this entry's value at the same series and sweep point, so
    /// that an ordering claim can compare ratios ("Eiger ÷ Eventual rises
    /// with the value size").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub per: String,
}

impl Select {
    /// The point in a table: its entry, series and sweep label.
    pub fn label(&self) -> String {
        self.label_named(|e| e.to_string())
    }

    /// [`Select::label`] with each entry named by `name` (the report's
    /// `[labels]` name: "Cure, 5 ms" for `cure:stabilization_interval_us=5000`).
    pub fn label_named(&self, name: impl Fn(&str) -> String) -> String {
        let entry = if self.per.is_empty() {
            name(&self.entry)
        } else {
            format!("{} ÷ {}", name(&self.entry), name(&self.per))
        };
        [entry.as_str(), self.series.as_str(), self.at.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stronger {
    /// A ratio above 1 is stronger higher, one below 1 stronger lower; a
    /// plain value has no stronger side.
    #[default]
    Auto,
    Higher,
    Lower,
    Neither,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Reproduced,
    OrderingOnly,
    NotReproduced,
    /// The report lacks a point the claim names (not run, or a run failed).
    Missing,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::OrderingOnly => "ordering only",
            Verdict::NotReproduced => "not reproduced",
            Verdict::Missing => "missing",
        }
    }
}

/// A claim with our number and its verdict.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Checked {
    pub claim: Claim,
    /// Ours, scaled; for an ordering claim, each point's value in `order`.
    pub ours: Vec<f64>,
    pub verdict: Verdict,
    /// An ordering claim's points as the report names them (its entries'
    /// labels); empty for other claims, and in reports written before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
}

impl Checked {
    /// The paper's number as the table prints it.
    pub fn paper_text(&self) -> String {
        let c = &self.claim;
        match (c.paper, c.range) {
            (_, Some([lo, hi])) => format!("{}–{}{}", number(lo), number(hi), c.unit),
            (Some(p), None) => format!("{}{}", number(p), c.unit),
            (None, None) => self.order_names().join(" < "),
        }
    }

    /// The ordering claim's points, named as the report names them.
    fn order_names(&self) -> Vec<String> {
        if self.labels.len() == self.claim.order.len() {
            self.labels.clone()
        } else {
            self.claim.order.iter().map(Select::label).collect()
        }
    }

    /// The cause a table prints: only for a verdict below reproduced.
    pub fn cause_text(&self) -> &str {
        if self.verdict == Verdict::Reproduced { "" } else { &self.claim.cause }
    }

    /// Ours as the table prints it.
    pub fn ours_text(&self) -> String {
        let c = &self.claim;
        if self.verdict == Verdict::Missing {
            return "–".into();
        }
        if c.order.is_empty() {
            format!("{}{}", number(self.ours[0]), c.unit)
        } else {
            let mut by: Vec<(f64, String)> = self.ours.iter().copied().zip(self.order_names()).collect();
            by.sort_by(|a, b| a.0.total_cmp(&b.0));
            by.iter().map(|(v, e)| format!("{e} ({}{})", number(*v), c.unit)).collect::<Vec<_>>().join(" < ")
        }
    }
}

/// `s` as one Markdown table cell: pipes escaped, on one line.
pub fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A number with three significant digits, integers without `.0`.
pub fn number(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let a = v.abs();
    if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The point `s` names, or why there is none. `at = max|min` picks, among
/// the sweep's points, the one whose `metric` is extreme.
fn value(r: &Results, s: &Select, metric: &str) -> Result<f64, String> {
    located(r, s, metric).map(|(_, v)| v)
}

/// A peak throughput (`at = "max"`) whose point clients, not servers,
/// bound: it is no capacity, so a ratio of peaks built on it says nothing
/// of the paper's. The reason, for the claim's cause.
fn client_bound_peak(r: &Results, s: &Select, metric: &str) -> Option<String> {
    let metric = if s.metric.is_empty() { metric } else { s.metric.as_str() };
    if s.at != "max" || !metric.starts_with("throughput") {
        return None;
    }
    let (p, _) = located(r, s, metric).ok()?;
    crate::labels::client_bound(r, p?).then(|| {
        format!(
            "{}'s highest throughput here is client-bound (its busiest server was busy less than {} % of the \
             run): more clients than the sweep has would be needed to reach its capacity",
            crate::labels::protocol_label(s.entry.split(':').next().unwrap_or_default()),
            crate::labels::SATURATED_PCT
        )
    })
}

/// [`value`], with the point it was read at (none for a `per` ratio).
fn located(r: &Results, s: &Select, metric: &str) -> Result<(Option<Point>, f64), String> {
    if !s.per.is_empty() {
        if matches!(s.at.as_str(), "max" | "min") {
            return Err(format!("{:?}: `per` needs a sweep label in `at`, not {:?}", s.entry, s.at));
        }
        let top = value(r, &Select { per: String::new(), ..s.clone() }, metric)?;
        let bottom = value(r, &Select { entry: s.per.clone(), per: String::new(), ..s.clone() }, metric)?;
        return Ok((None, top / bottom));
    }
    let e = &r.experiment;
    let metric = if s.metric.is_empty() { metric } else { s.metric.as_str() };
    let candidates: Vec<Point> = r
        .points
        .iter()
        .map(|pr| pr.point)
        .filter(|p| e.protocols.get(p.entry).is_some_and(|en| *en == s.entry))
        .filter(|p| match (&e.series, p.series) {
            (Some(sw), Some(i)) => sw.label(i) == s.series,
            _ => s.series.is_empty(),
        })
        .collect();
    if candidates.is_empty() {
        return Err(format!("no point of entry {:?} with series {:?}", s.entry, s.series));
    }
    let metric_at = |p: Point| r.get(p).and_then(|pr| pr.median.metrics.get(metric).copied()).unwrap_or(f64::NAN);
    let measured = candidates.iter().map(|&p| (p, metric_at(p))).filter(|(_, v)| v.is_finite());
    let extreme = |pick_first: fn(f64, f64) -> bool| {
        measured.clone().fold(None, |best: Option<(Point, f64)>, (p, v)| match best {
            Some((_, b)) if !pick_first(v, b) => best,
            _ => Some((p, v)),
        })
    };
    let (p, v) = match s.at.as_str() {
        "max" => extreme(|v, b| v > b).unwrap_or((candidates[0], f64::NAN)),
        "min" => extreme(|v, b| v < b).unwrap_or((candidates[0], f64::NAN)),
        "" if e.sweep.values.len() == 1 => (candidates[0], metric_at(candidates[0])),
        "" => return Err(format!("entry {:?}: say `at` (a sweep label, max or min)", s.entry)),
        label => match candidates.iter().find(|p| e.sweep.label(p.x) == label) {
            Some(&p) => (p, metric_at(p)),
            None => return Err(format!("no sweep value labelled {label:?}")),
        },
    };
    if v.is_finite() { Ok((Some(p), v)) } else { Err(format!("{metric} is not measured at {:?} {:?}", s.entry, s.at)) }
}

/// Check every claim of an experiment against its results.
pub fn check(r: &Results) -> Vec<Checked> {
    r.experiment.claims.iter().map(|c| check_one(r, c)).collect()
}

fn check_one(r: &Results, c: &Claim) -> Checked {
    let missing = || Checked { claim: c.clone(), ours: vec![f64::NAN], verdict: Verdict::Missing, labels: Vec::new() };
    if !c.order.is_empty() {
        let Ok(ours) = c.order.iter().map(|s| value(r, s, &c.metric).map(|v| (v - c.minus) * c.scale)).collect() else {
            return missing();
        };
        let ours: Vec<f64> = ours;
        let rising = ours.windows(2).all(|w| w[0] < w[1]);
        return Checked {
            claim: c.clone(),
            verdict: if rising { Verdict::Reproduced } else { Verdict::NotReproduced },
            ours,
            labels: c.order.iter().map(|s| s.label_named(|e| r.experiment.label(e))).collect(),
        };
    }
    let Some(of) = &c.of else { return missing() };
    let Ok(top) = value(r, of, &c.metric).map(|v| v - c.minus) else { return missing() };
    let ours = match (&c.over, &c.less) {
        (Some(_), Some(_)) => return missing(),
        (Some(over), None) => match value(r, over, &c.metric) {
            Ok(bottom) => top / (bottom - c.minus),
            Err(_) => return missing(),
        },
        (None, Some(less)) => match value(r, less, &c.metric) {
            Ok(bottom) => top - (bottom - c.minus),
            Err(_) => return missing(),
        },
        (None, None) => top,
    } * c.scale;
    if let Some([lo, hi]) = c.range {
        let inside = ours.is_finite() && (lo..=hi).contains(&ours);
        let verdict = if inside { Verdict::Reproduced } else { Verdict::NotReproduced };
        return Checked { claim: c.clone(), ours: vec![ours], verdict, labels: Vec::new() };
    }
    let Some(paper) = c.paper else { return missing() };
    let bound = [Some(of), c.over.as_ref()].into_iter().flatten().find_map(|s| client_bound_peak(r, s, &c.metric));
    if let Some(why) = bound {
        let mut claim = c.clone();
        if claim.cause.is_empty() {
            claim.cause = why;
        }
        return Checked { claim, ours: vec![ours], verdict: Verdict::NotReproduced, labels: Vec::new() };
    }
    let verdict = verdict(paper, ours, c.stronger, c.over.is_some());
    Checked { claim: c.clone(), ours: vec![ours], verdict, labels: Vec::new() }
}

/// The rule in the module doc.
pub fn verdict(paper: f64, ours: f64, stronger: Stronger, ratio: bool) -> Verdict {
    if !ours.is_finite() {
        return Verdict::Missing;
    }
    let side = match stronger {
        Stronger::Auto if ratio && paper > 1.0 => Stronger::Higher,
        Stronger::Auto if ratio && paper < 1.0 => Stronger::Lower,
        Stronger::Auto => Stronger::Neither,
        s => s,
    };
    let within = paper != 0.0 && (ours / paper - 1.0).abs() <= TOLERANCE;
    let beyond = match side {
        Stronger::Higher => ours >= paper,
        Stronger::Lower => ours <= paper,
        _ => false,
    };
    if within || beyond {
        Verdict::Reproduced
    } else if ratio && paper != 1.0 && (ours > 1.0) == (paper > 1.0) && ours != 1.0 {
        Verdict::OrderingOnly
    } else {
        Verdict::NotReproduced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_rule() {
        use Stronger::*;
        use Verdict::*;
        // Within ±25 %.
        assert_eq!(verdict(1.45, 1.2, Auto, true), Reproduced);
        assert_eq!(verdict(1.45, 1.7, Auto, true), Reproduced);
        // Stronger in the paper's direction.
        assert_eq!(verdict(1.45, 3.0, Auto, true), Reproduced);
        assert_eq!(verdict(0.5, 0.1, Auto, true), Reproduced);
        // The right side of 1 but too weak: ordering only.
        assert_eq!(verdict(2.0, 1.1, Auto, true), OrderingOnly);
        assert_eq!(verdict(0.5, 0.9, Auto, true), OrderingOnly);
        // The wrong side of 1.
        assert_eq!(verdict(1.45, 0.9, Auto, true), NotReproduced);
        assert_eq!(verdict(0.9, 1.3, Auto, true), NotReproduced);
        // A plain value has no side: ±25 % or nothing.
        assert_eq!(verdict(0.35, 0.3, Auto, false), Reproduced);
        assert_eq!(verdict(0.35, 0.6, Auto, false), NotReproduced);
        assert_eq!(verdict(10.0, 40.0, Higher, false), Reproduced);
        // "Competitive" (a ratio of 1) is within the band or not reproduced.
        assert_eq!(verdict(1.0, 0.8, Auto, true), Reproduced);
        assert_eq!(verdict(1.0, 0.3, Auto, true), NotReproduced);
        assert_eq!(verdict(1.0, f64::NAN, Auto, true), Missing);
    }

    /// Two entries at one sweep point, latency 3 ms (eventual) and 13 ms
    /// (gentlerain), with `claim` appended.
    fn checked_one(claim: &str) -> Checked {
        use crate::experiment::{Experiment, Runtime};
        use crate::measure::Sample;
        use crate::runner::PointResult;
        let text = format!(
            "name = \"t\"\nprotocols = [\"eventual\", \"gentlerain\"]\n[sweep]\nparam = \"workload.clients_per_dc\"\n\
             values = [4]\n[scenario]\nduration_ms = 100\n[scenario.topology]\ndcs = 1\npartitions = 1\n{claim}"
        );
        let e = Experiment::from_toml_str(&text, "t.toml").unwrap();
        let points = e
            .points()
            .unwrap()
            .into_iter()
            .map(|p| {
                let mut m = Sample::default();
                m.metrics.insert("latency.get.mean_ms".into(), 3.0 + 10.0 * p.entry as f64);
                PointResult { point: p, repetitions: vec![m.clone()], median: m }
            })
            .collect();
        let r = Results {
            experiment: e,
            runtime: Runtime::Sim,
            repetitions: 1,
            points,
            wall_s: 0.0,
            provenance: String::new(),
        };
        check(&r).remove(0)
    }

    #[test]
    fn a_difference_claim_subtracts_and_cannot_also_be_a_ratio() {
        let claim = "[[claim]]\nseed = \"000\"\nfigure = \"F\"\ntext = \"extra\"\npaper = 10\n\
                     metric = \"latency.get.mean_ms\"\nof = { entry = \"gentlerain\" }\nless = { entry = \"eventual\" }\n";
        let c = checked_one(claim);
        assert_eq!(c.ours, vec![10.0]);
        assert_eq!(c.verdict, Verdict::Reproduced);
        let c = checked_one(&format!("{claim}over = {{ entry = \"eventual\" }}\n"));
        assert_eq!(c.verdict, Verdict::Missing, "`less` and `over` together name no one number");
    }

    #[test]
    fn an_ordering_claim_names_its_points_as_the_report_does() {
        let claim = "[[claim]]\nseed = \"000\"\nfigure = \"F\"\ntext = \"order\"\nmetric = \"latency.get.mean_ms\"\n\
                     order = [{ entry = \"eventual\" }, { entry = \"gentlerain\" }]\n[labels]\ngentlerain = \"GR\"\n";
        let c = checked_one(claim);
        assert_eq!(c.verdict, Verdict::Reproduced);
        assert_eq!(c.paper_text(), "Eventual < GR");
        assert_eq!(c.ours_text(), "Eventual (3) < GR (13)");
    }

    #[test]
    fn numbers_print_without_trailing_zeros() {
        assert_eq!(number(3.0), "3");
        assert_eq!(number(1.456), "1.46");
        assert_eq!(number(0.3512), "0.351");
        assert_eq!(number(61500.4), "61500");
        assert_eq!(number(f64::NAN), "–");
    }
}
