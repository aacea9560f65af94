//! The README's simulation and checking examples, run as written (read from
//! README.md itself): each must do what its comment says. A check example
//! that names convergence or liveness must pass those checks, not skip
//! them, and the history it judges must hold the final reads the README
//! says it does.

use causeway_core::{History, Op};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The README's example command lines that run `causeway <sub>`, as
/// (arguments after `causeway`, comment), from its `sh` blocks.
fn examples(sub: &str) -> Vec<(Vec<String>, String)> {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let mut out = Vec::new();
    let mut in_sh = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let (command, comment) = line.split_once('#').unwrap_or((line, ""));
        let words: Vec<String> = command.split_whitespace().map(str::to_string).collect();
        if words.first().is_some_and(|w| w == "causeway") && words.get(1).is_some_and(|w| w == sub) {
            out.push((words[1..].to_vec(), comment.trim().to_string()));
        }
    }
    out
}

fn run(dir: &Path, args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(args)
        .current_dir(dir)
        .env("CAUSEWAY_LOG", "warn")
        .output()
        .unwrap()
}

/// The value following `flag` in `args`.
fn value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).map(String::as_str)
}

#[test]
fn the_readme_sim_and_check_examples_do_what_they_say() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The examples name scenario files relative to the repository.
    std::os::unix::fs::symlink(repo().join("scenarios"), dir.join("scenarios")).unwrap();

    // The simulation whose history the check examples judge.
    let (sim, _) = examples("sim")
        .into_iter()
        .find(|(args, _)| value(args, "--history").is_some())
        .expect("the README has a `causeway sim … --history` example");
    let o = run(&dir, &sim);
    assert!(o.status.success(), "causeway {}: {o:?}", sim.join(" "));
    let history_file = value(&sim, "--history").unwrap();
    let scenario_file = sim[1].as_str();

    // The history holds what the README says it judges: after the load, a
    // read of every key in every DC, none invoked before the quiescence time.
    let sc = causeway_sim::scenario::Scenario::load(&dir.join(scenario_file)).unwrap();
    let after_ms = sc.final_reads_after_ms.expect("the scenario has final reads");
    let quiet_us = (sc.duration_ms + after_ms) * 1_000;
    let h: History = serde_json::from_slice(&std::fs::read(dir.join(history_file)).unwrap()).unwrap();
    let final_reads = h.ops.iter().filter(|r| r.invoke_us >= quiet_us && matches!(r.op, Op::Get { .. })).count() as u64;
    assert_eq!(final_reads, u64::from(sc.topology.dcs) * sc.workload.recordcount);
    assert!(h.ops.iter().all(|r| r.op.writes().is_empty() || r.complete_us <= quiet_us), "a write after the load");

    let checks = examples("check");
    assert!(checks.len() >= 3, "the README's check examples: {checks:?}");
    for (args, comment) in &checks {
        assert_eq!(value(args, "check"), Some(history_file), "causeway {} judges another history", args.join(" "));
        let o = run(&dir, args);
        let stdout = String::from_utf8_lossy(&o.stdout);
        let what = format!("causeway {}  # {comment}\n{stdout}{}", args.join(" "), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success() && stdout.contains(": PASS"), "{what}");
        let passes = |check: &str| stdout.lines().any(|l| l.trim_start().starts_with(&format!("pass  {check}")));
        if let Some(t) = value(args, "--quiescent-after-ms") {
            assert_eq!(t.parse::<u64>().unwrap() * 1_000, quiet_us, "{what}");
            assert!(passes("convergence after quiescence") && passes("eventual visibility"), "{what}");
        }
        if comment.contains("liveness") || value(args, "--liveness-bound-ms").is_some() {
            assert!(passes("liveness: operations complete within"), "{what}");
            assert!(!stdout.contains("not required"), "liveness was not required: {what}");
        }
        if comment.contains("convergence") {
            assert!(value(args, "--quiescent-after-ms").is_some(), "{what}");
        }
        if let Some(f) = value(args, "--dbcop") {
            assert!(std::fs::metadata(dir.join(f)).is_ok_and(|m| m.len() > 0), "no dbcop export: {what}");
        }
    }

    // The known failure is one.
    let torture = examples("torture");
    let (known, _) = torture.iter().find(|(_, c)| c.contains("known failure")).expect("the known-failure example");
    let o = run(&dir, known);
    assert_eq!(o.status.code(), Some(1), "causeway {}: {o:?}", known.join(" "));
    let _ = std::fs::remove_dir_all(&dir);
}
