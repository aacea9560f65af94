//! Human-readable reports: one run, or several protocols side by side.

use crate::metrics::SimReport;
use std::fmt::Write;

/// µs as milliseconds with one decimal, as every report prints them.
pub fn ms(us: u64) -> String {
    format!("{:.1}", us as f64 / 1_000.0)
}

/// The p50 (or p99) of one operation kind in ms, or "-" if none ran.
pub fn percentile_ms(
    latency: &std::collections::BTreeMap<String, crate::metrics::Summary>,
    kind: &str,
    p99: bool,
) -> String {
    latency.get(kind).map(|l| ms(if p99 { l.p99_us } else { l.p50_us })).unwrap_or_else(|| "-".into())
}

/// A table aligned by comfy-table: a rule under the header, no other
/// lines; columns of numbers (or `-` for none) right-aligned, text left.
/// Every terminal report of the CLI uses it.
pub fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    use comfy_table::{CellAlignment, LineStyle, Table, TableStyle};
    let numeric = |i: usize| {
        let cells = || rows.iter().filter_map(|r| r.get(i)).filter(|c| !c.is_empty() && c.as_str() != "-");
        cells().next().is_some() && cells().all(|c| c.parse::<f64>().is_ok())
    };
    let right: Vec<bool> = (0..header.len()).map(numeric).collect();
    let mut t = Table::new();
    t.load_style(TableStyle::new().header_separator(LineStyle::none().fill('-').junction(' ')));
    t.set_header(header.to_vec());
    for r in rows {
        t.add_row(r);
    }
    for (i, c) in t.column_iter_mut().enumerate() {
        c.set_cell_alignment(if right[i] { CellAlignment::Right } else { CellAlignment::Left });
    }
    let mut s = t.trim_fmt();
    s.push('\n');
    s
}

fn summary_row(s: &mut String, name: &str, l: &crate::metrics::Summary) {
    let _ = writeln!(
        s,
        "    {:<14} {:>9} {:>8.2} {:>8} {:>8} {:>8} {:>8}",
        name,
        l.count,
        l.mean_us / 1e3,
        ms(l.p50_us),
        ms(l.p95_us),
        ms(l.p99_us),
        ms(l.max_us)
    );
}

/// A full text report of one run.
pub fn render(r: &SimReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} on {}: {} DCs × {} partitions, {} clients, seed {}",
        r.protocol, r.scenario, r.dcs, r.partitions, r.clients, r.seed
    );
    let _ = writeln!(
        s,
        "  simulated {:.2} s (measured {:.2} s), {} events, trace {}",
        r.simulated_us as f64 / 1e6,
        r.measured_us as f64 / 1e6,
        r.events,
        r.trace_hash
    );
    let _ =
        writeln!(s, "  throughput {:.0} ops/s ({} ops, {} failed)", r.throughput_ops_s, r.ops_completed, r.ops_failed);
    let _ = writeln!(s, "  latency (ms)        count     mean      p50      p95      p99      max");
    for (k, l) in &r.latency {
        summary_row(&mut s, k, l);
    }
    if !r.blocked.is_empty() {
        let _ = writeln!(s, "  blocked in servers (ms)");
        for (k, l) in &r.blocked {
            summary_row(&mut s, k, l);
        }
    }
    for (k, v) in &r.samples {
        let _ = writeln!(
            s,
            "  {k}: mean {:.2}, p50 {}, p99 {}, max {} ({} samples)",
            v.mean_us, v.p50_us, v.p99_us, v.max_us, v.count
        );
    }
    let _ = writeln!(s, "  update visibility, true time (ms)   count      p50      p95      p99  never");
    for v in &r.visibility {
        let _ = writeln!(
            s,
            "    {:>6} → {:<6} {:>20} {:>8} {:>8} {:>8} {:>6}",
            v.from,
            v.to,
            v.summary.count,
            ms(v.summary.p50_us),
            ms(v.summary.p95_us),
            ms(v.summary.p99_us),
            v.never_visible
        );
    }
    let _ = writeln!(
        s,
        "  per op: {:.2} server msgs, {:.0} server bytes, {:.0} client bytes",
        r.server_msgs_per_op, r.server_bytes_per_op, r.client_bytes_per_op
    );
    let _ = writeln!(s, "  messages            count        bytes");
    for (k, m) in &r.messages {
        let _ = writeln!(s, "    {:<14} {:>9} {:>12}", k, m.count, m.bytes);
    }
    s
}

/// One line per protocol: the comparison table of `causeway demo`.
pub fn comparison(reports: &[SimReport]) -> String {
    let header = [
        "protocol",
        "ops/s",
        "get p50 ms",
        "get p99 ms",
        "put p50 ms",
        "put p99 ms",
        "vis p50 ms",
        "vis p99 ms",
        "msgs/op",
    ];
    let rows = reports
        .iter()
        .map(|r| {
            let lat = |k: &str, p99: bool| percentile_ms(&r.latency, k, p99);
            // Visibility over all DC pairs: the median of the pairs' medians, and the worst p99.
            let mut p50s: Vec<u64> =
                r.visibility.iter().filter(|v| v.summary.count > 0).map(|v| v.summary.p50_us).collect();
            p50s.sort();
            let vis50 = p50s.get(p50s.len() / 2).map(|v| ms(*v)).unwrap_or_else(|| "-".into());
            let vis99 = r
                .visibility
                .iter()
                .filter(|v| v.summary.count > 0)
                .map(|v| v.summary.p99_us)
                .max()
                .map(ms)
                .unwrap_or_else(|| "-".into());
            vec![
                r.protocol.clone(),
                format!("{:.0}", r.throughput_ops_s),
                lat("get", false),
                lat("get", true),
                lat("put", false),
                lat("put", true),
                vis50,
                vis99,
                format!("{:.2}", r.server_msgs_per_op),
            ]
        })
        .collect();
    table(&header, rows)
}
