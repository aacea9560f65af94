//! Where a measurement comes from: the date, the commit and the machine, so
//! that a report or a cost file says what code it describes.

/// When, from which code and on what a report was generated: today's date,
/// the commit (marked when the tree had changes), the machine's cores.
pub fn provenance() -> String {
    let Provenance { date, commit, machine } = Provenance::now();
    format!("{date} at commit {commit} on {machine}")
}

/// The parts of [`provenance`], for files that record them as fields.
pub struct Provenance {
    /// YYYY-MM-DD, UTC.
    pub date: String,
    /// The short commit hash (HEAD when the run started), followed by " with
    /// uncommitted changes" when tracked files other than the experiment
    /// reports differed from it.
    pub commit: String,
    /// Cores, OS and architecture.
    pub machine: String,
}

impl Provenance {
    pub fn now() -> Provenance {
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(args)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        };
        let commit = git(&["rev-parse", "--short=10", "HEAD"]).unwrap_or_else(|| "unknown".into());
        // The reports a regeneration is rewriting are not the code it runs.
        let dirty = git(&["status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs/experiments/results"])
            .is_some_and(|s| !s.is_empty());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Provenance {
            date: today(),
            commit: format!("{commit}{}", if dirty { " with uncommitted changes" } else { "" }),
            machine: format!("{cores} cores ({} {})", std::env::consts::OS, std::env::consts::ARCH),
        }
    }
}

/// Today's date (UTC), as YYYY-MM-DD.
pub fn today() -> String {
    let days =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}-{m:02}-{d:02}")
}
