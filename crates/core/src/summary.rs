//! Latency summaries: percentiles of an HdrHistogram, in µs. Shared so the
//! simulator and the network runtime report the same shape.

use hdrhistogram::Histogram;
use serde::Serialize;

/// A histogram of µs values from 1 µs to a day, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 24 * 3_600 * 1_000_000, 3).expect("valid histogram bounds")
}

/// Percentiles of one distribution, in µs.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl Summary {
    pub fn of(h: &Histogram<u64>) -> Summary {
        if h.is_empty() {
            return Summary::default();
        }
        Summary {
            count: h.len(),
            mean_us: h.mean(),
            p50_us: h.value_at_quantile(0.50),
            p95_us: h.value_at_quantile(0.95),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
        }
    }
}
