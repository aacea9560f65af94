//! Named metrics of one run, and their medians over repetitions.
//!
//! Names (latencies in ms):
//! - `throughput_ops_s`, `throughput_keys_s` (keys read or written per
//!   second; a ROT or WOT of n keys counts n, a key being a row),
//!   `throughput_columns_s` (columns per second, when the workload reads or
//!   writes several columns per key), `ops_failed`
//! - `latency.<kind>.{mean,p50,p90,p95,p99,max}_ms` and `.count` — kinds
//!   `get`, `put`, `rot`, `wot`, `amplified` (whole amplified requests),
//!   `batch` (whole multi-key updates), `rot_touching_slow` and
//!   `rot_not_touching_slow` (while a node is slowed), and with
//!   `latency_by_rounds` `<kind>_1round`, `<kind>_2rounds`,
//!   `<kind>_3plus_rounds` for get, rot, put and wot, and
//!   `get_indirected`, `rot_indirected` (reads a client noted indirected,
//!   taken out of their rounds names)
//! - `latency.ops.mean_ms`: the mean over every GET, PUT, ROT and WOT
//!   together (a mixed workload's "operation latency", as Roohitavaf's
//!   NuKV figures plot it)
//! - `visibility.<from>-><to>.{mean,p50,p90,p95,p99,max}_ms` per DC pair,
//!   `visibility.all.mean_ms` weighted over pairs, and
//!   `visibility.all.{p50,p90,p95,p99,max}_ms` over every pair's updates
//!   together (its CDF is `visibility.all`, for a `cdf` plot)
//! - `blocked.<what>.{mean,p99}_ms` and `blocked.<what>.count`
//! - `<sample>.{mean,p99,max,count}` for each protocol sample, e.g.
//!   `deps_per_write.mean` (COPS, COPS-GT), and `<sample>.per_s`, its
//!   values summed per second of the window: `service_ops.per_s` is the
//!   updates a DC's ordering service (EunomiaKV's Eunomia, S-Seq's
//!   sequencer) ordered per second; with CPU costs, `<sample>.busy_pct`
//!   (how busy the busiest server observing it was) and
//!   `<sample>.per_cpu_s`, its rate per second of that server's CPU: the
//!   rate it would sustain fully busy (`service_ops.per_cpu_s`, the
//!   service's capacity)
//! - `stale_reads_pct`, `staleness.{mean,p99}_ms`
//! - `msgs_per_op`, `server_bytes_per_op`, `client_bytes_per_op`,
//!   `metadata_bytes_per_msg`, `metadata_bytes_per_version`, `versions_held`
//! - `server_busy_max_pct`: how busy the busiest server's simulated CPU was
//!   over the measurement window, in % (only when messages cost CPU time);
//!   below [`crate::labels::SATURATED_PCT`] the clients, not the servers,
//!   bound the throughput, and plots draw the point hollow

use causeway_core::summary::Summary;
use causeway_net::load::LoadReport;
use causeway_sim::SimReport;
use causeway_sim::metrics::cdf_quantiles;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One run's metrics.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Sample {
    #[serde(deserialize_with = "finite_or_nan")]
    pub metrics: BTreeMap<String, f64>,
    /// Latency in ms at each of [`cdf_quantiles`], per latency name.
    #[serde(default)]
    pub cdfs: BTreeMap<String, Vec<f64>>,
}

/// JSON has no NaN: serde_json writes a NaN metric (a mean of nothing) as
/// `null`, which reads back as NaN.
fn finite_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
    let m: BTreeMap<String, Option<f64>> = BTreeMap::deserialize(d)?;
    Ok(m.into_iter().map(|(k, v)| (k, v.unwrap_or(f64::NAN))).collect())
}

fn ms(us: f64) -> f64 {
    us / 1_000.0
}

impl Sample {
    fn summary(&mut self, prefix: &str, s: &Summary, cdf: Option<&[u64]>) {
        if s.count == 0 {
            return;
        }
        let m = &mut self.metrics;
        m.insert(format!("{prefix}.mean_ms"), ms(s.mean_us));
        m.insert(format!("{prefix}.p50_ms"), ms(s.p50_us as f64));
        m.insert(format!("{prefix}.p95_ms"), ms(s.p95_us as f64));
        m.insert(format!("{prefix}.p99_ms"), ms(s.p99_us as f64));
        m.insert(format!("{prefix}.max_ms"), ms(s.max_us as f64));
        m.insert(format!("{prefix}.count"), s.count as f64);
        if let Some(cdf) = cdf.filter(|c| c.len() >= 90) {
            m.insert(format!("{prefix}.p90_ms"), ms(cdf[89] as f64));
        }
    }

    pub fn from_sim(r: &SimReport) -> Sample {
        let mut s = Sample::default();
        s.metrics.insert("throughput_ops_s".into(), r.throughput_ops_s);
        s.metrics.insert("throughput_keys_s".into(), r.throughput_keys_s);
        if let Some(c) = r.throughput_columns_s {
            s.metrics.insert("throughput_columns_s".into(), c);
        }
        s.metrics.insert("ops_failed".into(), r.ops_failed as f64);
        if let Some(b) = r.server_busy_max_pct {
            s.metrics.insert("server_busy_max_pct".into(), b);
        }
        for (k, sum) in &r.latency {
            let cdf = r.latency_cdf.get(k).map(Vec::as_slice);
            s.summary(&format!("latency.{k}"), sum, cdf);
            if let Some(c) = cdf.filter(|c| !c.is_empty()) {
                s.cdfs.insert(k.clone(), c.iter().map(|&us| ms(us as f64)).collect());
            }
        }
        let (mut n, mut total) = (0u64, 0.0);
        for k in ["get", "put", "rot", "wot"] {
            if let Some(sum) = r.latency.get(k) {
                n += sum.count;
                total += sum.mean_us * sum.count as f64;
            }
        }
        if n > 0 {
            s.metrics.insert("latency.ops.mean_ms".into(), ms(total / n as f64));
        }
        let (mut n, mut total) = (0u64, 0.0);
        for v in &r.visibility {
            s.summary(&format!("visibility.{}->{}", v.from, v.to), &v.summary, Some(&v.cdf));
            n += v.summary.count;
            total += v.summary.mean_us * v.summary.count as f64;
        }
        if n > 0 {
            s.metrics.insert("visibility.all.mean_ms".into(), ms(total / n as f64));
        }
        if let Some((sum, cdf)) = &r.visibility_all {
            // Percentiles over every pair (the mean stays the one above).
            let mean = s.metrics.get("visibility.all.mean_ms").copied();
            s.summary("visibility.all", sum, Some(cdf));
            if let Some(m) = mean {
                s.metrics.insert("visibility.all.mean_ms".into(), m);
            }
            if !cdf.is_empty() {
                s.cdfs.insert("visibility.all".into(), cdf.iter().map(|&us| ms(us as f64)).collect());
            }
        }
        for (k, sum) in &r.blocked {
            s.summary(&format!("blocked.{k}"), sum, None);
        }
        for (k, sum) in r.samples.iter().filter(|(_, s)| s.count > 0) {
            s.metrics.insert(format!("{k}.mean"), sum.mean_us);
            s.metrics.insert(format!("{k}.p99"), sum.p99_us as f64);
            s.metrics.insert(format!("{k}.max"), sum.max_us as f64);
            s.metrics.insert(format!("{k}.count"), sum.count as f64);
            if r.measured_us > 0 {
                // The sample's values summed per second of the window: for
                // `service_ops`, the updates the DC's ordering service
                // handled per second (from the histogram's mean, within
                // its 0.1 % precision).
                let per_s = sum.mean_us * sum.count as f64 * 1e6 / r.measured_us as f64;
                s.metrics.insert(format!("{k}.per_s"), per_s);
                if let Some(&busy) = r.sample_busy_pct.get(k).filter(|&&b| b > 0.0) {
                    // What the servers observing it would sustain fully busy.
                    s.metrics.insert(format!("{k}.busy_pct"), busy);
                    s.metrics.insert(format!("{k}.per_cpu_s"), per_s * 100.0 / busy);
                }
            }
        }
        s.metrics.insert("stale_reads_pct".into(), r.stale_reads_pct);
        s.summary("staleness", &r.staleness, None);
        for (k, v) in [
            ("msgs_per_op", r.server_msgs_per_op),
            ("server_bytes_per_op", r.server_bytes_per_op),
            ("client_bytes_per_op", r.client_bytes_per_op),
            ("metadata_bytes_per_msg", r.metadata_bytes_per_msg),
            ("metadata_bytes_per_version", r.metadata_bytes_per_version),
            ("versions_held", r.versions_held as f64),
        ] {
            s.metrics.insert(k.into(), v);
        }
        s
    }

    /// What the network load generator measures: throughput, latency per
    /// kind and probed visibility (no CDFs, blocking or byte counts).
    pub fn from_load(r: &LoadReport) -> Sample {
        let mut s = Sample::default();
        s.metrics.insert("throughput_ops_s".into(), r.throughput_ops_s);
        s.metrics.insert("throughput_keys_s".into(), r.throughput_keys_s);
        s.metrics.insert("ops_failed".into(), r.errors as f64);
        // The whole process's CPU (servers, links, load generator) per
        // operation: on one machine, what throughput is made of.
        s.metrics.insert("cpu_user_us_per_op".into(), r.cpu_user_us_per_op);
        s.metrics.insert("cpu_system_us_per_op".into(), r.cpu_system_us_per_op);
        for (k, sum) in &r.latency {
            s.summary(&format!("latency.{k}"), sum, None);
        }
        for v in &r.visibility {
            s.summary(&format!("visibility.{}->{}", v.from, v.to), &v.summary, None);
        }
        s
    }
}

/// The median of each metric (and each CDF quantile) over the samples that
/// have it; the mean of the middle two for an even count.
pub fn median(samples: &[Sample]) -> Sample {
    let mut out = Sample::default();
    let names: std::collections::BTreeSet<&String> = samples.iter().flat_map(|s| s.metrics.keys()).collect();
    for name in names {
        let xs: Vec<f64> = samples.iter().filter_map(|s| s.metrics.get(name).copied()).collect();
        out.metrics.insert(name.clone(), median_of(xs));
    }
    let cdf_names: std::collections::BTreeSet<&String> = samples.iter().flat_map(|s| s.cdfs.keys()).collect();
    for name in cdf_names {
        let cdfs: Vec<&Vec<f64>> = samples.iter().filter_map(|s| s.cdfs.get(name)).collect();
        let n = cdf_quantiles().count();
        let med = (0..n).map(|i| median_of(cdfs.iter().filter_map(|c| c.get(i).copied()).collect())).collect();
        out.cdfs.insert(name.clone(), med);
    }
    out
}

pub fn median_of(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_skip_missing_metrics() {
        let mk = |v: &[(&str, f64)]| Sample {
            metrics: v.iter().map(|(k, x)| (k.to_string(), *x)).collect(),
            cdfs: BTreeMap::new(),
        };
        let m = median(&[mk(&[("a", 3.0), ("b", 1.0)]), mk(&[("a", 1.0)]), mk(&[("a", 2.0), ("b", 5.0)])]);
        assert_eq!(m.metrics["a"], 2.0);
        assert_eq!(m.metrics["b"], 3.0);
        assert!(median_of(vec![]).is_nan());
    }
}
