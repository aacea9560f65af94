//! A one-line progress bar on stderr for long runs.

use std::io::Write;

/// Draw `label [####    ]  42%` for a fraction in [0, 1]; a newline at 1.
pub fn bar(label: &str, fraction: f64) {
    let width = 30;
    let f = fraction.clamp(0.0, 1.0);
    let filled = (f * width as f64).round() as usize;
    eprint!("\r  {label:<16} [{}{}] {:>3.0}%", "#".repeat(filled), " ".repeat(width - filled), f * 100.0);
    if f >= 1.0 {
        eprintln!();
    }
    let _ = std::io::stderr().flush();
}
