//! `causeway experiment`: run experiment files (or redraw their reports from
//! the JSON a run left), and gather every report's claims into the
//! reproduction table.

use causeway_bench::experiment::Runtime;
use causeway_bench::reproduction;
use causeway_bench::{Experiment, Results};
use std::path::{Path, PathBuf};

type Error = Box<dyn std::error::Error>;

/// What `causeway experiment` was asked to do.
pub struct Args {
    pub file: PathBuf,
    pub quick: bool,
    pub out: PathBuf,
    pub reps: Option<u32>,
    pub runtime: Option<String>,
    pub threads: Option<usize>,
    pub json: bool,
    pub render: bool,
    pub table: Option<PathBuf>,
}

/// The experiment files `file` names: itself, or every `*.toml` in it.
fn files(file: &Path) -> Result<Vec<PathBuf>, Error> {
    if !file.is_dir() {
        return Ok(vec![file.to_path_buf()]);
    }
    let mut fs: Vec<PathBuf> = std::fs::read_dir(file)
        .map_err(|e| format!("{}: {e}", file.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    fs.sort();
    Ok(fs)
}

pub fn main(a: Args) -> Result<(), Error> {
    let mut reports = Vec::new();
    let several = a.file.is_dir();
    for file in files(&a.file)? {
        let written = if a.render {
            match render(&file, &a.out) {
                Ok(w) => w,
                // Redrawing a directory redraws what still matches its
                // results; the table marks the rest stale.
                Err(e) if several => {
                    eprintln!("skipped: {e}");
                    continue;
                }
                Err(e) => return Err(e),
            }
        } else {
            run(&file, &a)?
        };
        if !a.json {
            println!(
                "{}: {} files written; report: {}",
                file.display(),
                written.files.len(),
                written.markdown.display()
            );
        }
        reports.push(written);
    }
    if let Some(table) = &a.table {
        write_table(&a.file, &a.out, table)?;
        if !a.json {
            println!("reproduction table written into {}", table.display());
        }
    }
    if a.json {
        let all: Vec<serde_json::Value> = reports
            .iter()
            .map(|w| {
                let files: Vec<String> = w.files.iter().map(|f| f.display().to_string()).collect();
                serde_json::json!({ "files": files, "report": w.markdown.display().to_string() })
            })
            .collect();
        println!("{}", serde_json::Value::Array(all));
    }
    Ok(())
}

/// The command that regenerates `file`'s report, quoted in it.
fn command(file: &Path, a: &Args) -> String {
    let mut command =
        format!("cargo run --release -p causeway -- experiment {} --out {}", file.display(), a.out.display());
    if a.quick {
        command.push_str(" --quick");
    }
    if let Some(r) = a.reps {
        command.push_str(&format!(" --reps {r}"));
    }
    if let Some(r) = &a.runtime {
        command.push_str(&format!(" --runtime {r}"));
    }
    command
}

/// Run one experiment file and write its report.
fn run(file: &Path, a: &Args) -> Result<causeway_bench::report::Written, Error> {
    let mut exp = Experiment::load(file)?;
    if a.quick {
        exp.reduce();
    }
    let mut opts = causeway_bench::runner::RunOptions { repetitions: a.reps, ..Default::default() };
    if let Some(t) = a.threads {
        opts.threads = t;
    }
    opts.runtime = match a.runtime.as_deref() {
        None => None,
        Some("sim") => Some(Runtime::Sim),
        Some("network") => Some(Runtime::Network),
        Some(other) => return Err(format!("--runtime must be sim or network, not {other:?}").into()),
    };
    let points = exp.points()?.len();
    eprintln!("{}: {} points × {} repetitions", exp.name, points, a.reps.unwrap_or(exp.repetitions));
    let progress = causeway_bench::progress::Progress::new(&exp.name);
    let results = causeway_bench::run(&exp, &opts, |done, total| progress.set(done as f64 / total as f64))?;
    Ok(causeway_bench::report::write_all(&results, &a.out, &command(file, a))?)
}

/// The results a run of `file` left in `out`.
fn load_results(file: &Path, name: &str, out: &Path) -> Result<Results, Error> {
    let path = out.join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("{}: cannot read {} (run the experiment first): {e}", file.display(), path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{}: {} is not a results file: {e}", file.display(), path.display()).into())
}

/// Redraw `file`'s report (plots, tables, claims, prose) from the results a
/// run left in `out`, without running anything: only when the file still
/// describes the runs those results measured.
fn render(file: &Path, out: &Path) -> Result<causeway_bench::report::Written, Error> {
    let exp = Experiment::load(file)?;
    let mut results = load_results(file, &exp.name, out)?;
    exp.same_runs(&results.experiment).map_err(|why| {
        format!(
            "{}: the results in {} were measured for another version of this file ({why}): run it again",
            file.display(),
            out.display()
        )
    })?;
    // The command that regenerated it is the one a run would quote.
    let mut cmd = format!("cargo run --release -p causeway -- experiment {} --out {}", file.display(), out.display());
    if results.repetitions != exp.repetitions {
        cmd.push_str(&format!(" --reps {}", results.repetitions));
    }
    results.experiment = exp;
    Ok(causeway_bench::report::write_all(&results, out, &cmd)?)
}

/// Check every experiment's claims against the results in `out` and write
/// the reproduction table into `table` between its marker lines.
fn write_table(dir: &Path, out: &Path, table: &Path) -> Result<(), Error> {
    let base = table.parent().unwrap_or(Path::new(""));
    let mut entries = Vec::new();
    for file in files(dir)? {
        let exp = Experiment::load(&file)?;
        if exp.claims.is_empty() {
            continue;
        }
        let report_path = out.join(format!("{}.md", exp.name));
        let report = report_path.strip_prefix(base).unwrap_or(&report_path).display().to_string();
        let mut stale = false;
        let (checked, provenance) = match load_results(&file, &exp.name, out) {
            Ok(mut r) => {
                let provenance = match exp.same_runs(&r.experiment) {
                    Ok(()) => r.provenance.clone(),
                    Err(why) => {
                        stale = true;
                        format!("{} — stale: {why}", r.provenance)
                    }
                };
                r.experiment = exp;
                (causeway_bench::claims::check(&r), provenance)
            }
            Err(e) => {
                let mut r = Results {
                    experiment: exp,
                    runtime: Runtime::Sim,
                    repetitions: 0,
                    points: Vec::new(),
                    wall_s: 0.0,
                    provenance: String::new(),
                };
                let checked = causeway_bench::claims::check(&r);
                r.provenance = e.to_string();
                (checked, r.provenance)
            }
        };
        entries.push(reproduction::Entry {
            experiment: file.display().to_string(),
            report,
            provenance,
            stale,
            checked,
        });
    }
    let text = std::fs::read_to_string(table).map_err(|e| format!("{}: {e}", table.display()))?;
    let spliced =
        reproduction::splice(&text, &reproduction::table(&entries)).map_err(|e| format!("{}: {e}", table.display()))?;
    std::fs::write(table, spliced).map_err(|e| format!("{}: {e}", table.display()))?;
    Ok(())
}
