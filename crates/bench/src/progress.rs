//! Progress of long runs on stderr: an indicatif bar on a terminal, and
//! plain lines at each quarter when stderr is a pipe or a file (no `\r`
//! litter in CI logs, and still a sign of life).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;

/// Progress of one labelled task, as a fraction in [0, 1].
pub struct Progress {
    label: String,
    bar: Option<ProgressBar>,
    /// Quarters already reported as plain lines.
    quarters: Mutex<u8>,
}

const STEPS: u64 = 1000;

impl Progress {
    pub fn new(label: &str) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::with_draw_target(Some(STEPS), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("  {prefix:<16} [{bar:30}] {percent:>3}%  {elapsed_precise}")
                .expect("a valid template")
                .progress_chars("#>-");
            b.set_style(style);
            b.set_prefix(label.to_string());
            b
        });
        Progress { label: label.into(), bar, quarters: Mutex::new(0) }
    }

    /// Report `fraction` done; 1 finishes the bar.
    pub fn set(&self, fraction: f64) {
        let f = fraction.clamp(0.0, 1.0);
        match &self.bar {
            Some(b) => {
                b.set_position((f * STEPS as f64).round() as u64);
                if f >= 1.0 {
                    b.finish();
                }
            }
            None => {
                let q = (f * 4.0).floor() as u8;
                let mut done = self.quarters.lock().unwrap_or_else(|e| e.into_inner());
                if q > *done {
                    *done = q;
                    eprintln!("  {}: {}%", self.label, q as u32 * 25);
                }
            }
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = &self.bar
            && !b.is_finished()
        {
            b.abandon();
        }
    }
}
