//! # causeway-check
//!
//! The consistency checker: it reads a [`History`] (what every client
//! invoked and saw, from the simulator or the network runtime) and decides
//! whether it is eventually consistent, causally consistent, causal+
//! (convergent), whether sessions got read-your-writes, monotonic reads,
//! monotonic writes and writes-follow-reads, whether read-only
//! transactions read causal snapshots, and whether write-only transactions
//! are atomically visible (no fractured reads), and whether every operation
//! finished within the protocol's liveness bound ([`liveness`]). Each violation names the few
//! operations that show it, as a sentence a person can check by hand. It also
//! exports histories to dbcop's JSON format ([`dbcop`]).
//!
//! It is not a linearizability or serializability checker (those are NP-hard
//! in general and no Causeway protocol promises them), it never looks at
//! server state or timestamps (only at what clients observed), and it cannot
//! prove a protocol correct: a passing history is one execution that showed no
//! anomaly. All checks are polynomial — O(n·S) for n operations and S
//! sessions, via vector clocks ([`clock`]) — and deterministic.
//!
//! ```no_run
//! let history = causeway_check::load_history("run.history.json").unwrap();
//! let report = causeway_check::check(&history, &causeway_check::CheckConfig::default());
//! println!("{report}");
//! ```

pub mod arbitration;
pub mod atomic;
pub mod causal;
pub mod clock;
pub mod convergence;
pub mod cycles;
pub mod dbcop;
pub mod error;
pub mod explain;
pub mod guaranteed;
pub mod liveness;
pub mod model;
pub mod names;
pub mod report;
pub mod rot;
pub mod session;
pub mod violation;

pub use error::{CheckError, ModelError};
pub use explain::{Action, Link, OpRef, Path};
pub use liveness::{FaultWindow, Liveness};
pub use model::Model;
pub use names::ValueName;
pub use report::{CheckConfig, CheckReport, CheckResult, Level, Stats, Status};
pub use violation::{Kind, Violation};

use causeway_core::History;
use clock::{Clocks, Visitor};
use explain::Explainer;
use model::Source;
use violation::{Collector, Raw};

/// Check `history` at `cfg.level`. A history that cannot be modelled (two
/// writes of one value, overlapping session operations, results that do not
/// fit their operations) yields a failed report whose `invalid` says why.
pub fn check(history: &History, cfg: &CheckConfig) -> CheckReport {
    let stats = Stats::of(history);
    let mut report = CheckReport {
        protocol: history.protocol.clone(),
        level: cfg.level,
        quiescent_after_us: cfg.quiescent_after_us,
        passed: false,
        stats,
        invalid: None,
        checks: Vec::new(),
        violations: Vec::new(),
        max_reported: cfg.max_reported,
    };
    let m = match Model::build(history) {
        Ok(m) => m,
        Err(e) => {
            report.checks = Kind::ALL
                .iter()
                .map(|&kind| CheckResult {
                    kind,
                    name: kind.name(),
                    required: required(cfg, kind),
                    status: Status::Skipped { reason: "the history cannot be modelled".into() },
                })
                .collect();
            report.invalid = Some(e);
            return report;
        }
    };
    let mut out = Collector::new(cfg.max_reported);

    // Thin-air reads are a property of the model alone.
    for rd in &m.reads {
        if rd.source == Source::ThinAir && m.is_node[rd.op as usize] {
            out.add(Kind::ThinAirRead, || Raw::ThinAir { read: *rd });
        }
    }

    // One pass in causal order runs the per-operation checks.
    let mut pass =
        Pass { out, causal: Default::default(), session: session::SessionCheck::new(&m), rot: Default::default() };
    let clocks = Clocks::compute(&m, &mut pass);
    let Pass { mut out, causal, .. } = pass;

    cycles::check_cyclic_co(&m, &clocks, &mut out);
    atomic::check_fractured(&m, &clocks, &mut out);
    let cf_preds = arbitration::check_cyclic_cf(&m, &clocks, &causal.cf, &mut out);
    let causal_arbitration = cfg.level >= Level::Causal;
    let convergence = cfg
        .quiescent_after_us
        .map(|t| convergence::check_convergence(&m, &clocks, t, causal_arbitration, cfg.dc_write_order, &mut out));
    liveness::check_liveness(&m, cfg.liveness.as_ref(), &mut out);

    // Render the kept violations, with paths, in kind then history order.
    let mut ex = Explainer::new(&m, &clocks);
    ex.cf_preds = cf_preds;
    let mut violations: Vec<Violation> = out.raw.iter().map(|r| r.render(&mut ex)).collect();
    violations.sort_by_key(|v| (v.kind(), v.primary_op()));

    report.checks = Kind::ALL
        .iter()
        .map(|&kind| {
            let status = match (kind, &convergence) {
                (Kind::Divergence | Kind::NotEventuallyVisible, None) => {
                    Status::Skipped { reason: "no quiescence time given".into() }
                }
                (Kind::Divergence | Kind::NotEventuallyVisible, Some(Err(reason))) => {
                    Status::Skipped { reason: reason.clone() }
                }
                _ => match out.count(kind) {
                    0 => Status::Pass,
                    n => Status::Fail { violations: n },
                },
            };
            CheckResult { kind, name: kind.name(), required: required(cfg, kind), status }
        })
        .collect();
    report.passed = report.checks.iter().all(|c| !c.required || !matches!(c.status, Status::Fail { .. }));
    report.violations = violations;
    report
}

/// Whether a violation of `kind` fails the history under `cfg`: the level
/// decides for safety kinds; liveness kinds need a deadline to judge by.
fn required(cfg: &CheckConfig, kind: Kind) -> bool {
    match kind {
        Kind::Unfinished | Kind::SlowOperation => cfg.liveness.as_ref().is_some_and(|l| l.required),
        _ => cfg.level.requires(kind),
    }
}

/// Read a history written by `serde_json::to_writer(&history)`.
pub fn load_history(path: impl AsRef<std::path::Path>) -> Result<History, CheckError> {
    let path = path.as_ref();
    let p = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|source| CheckError::Io { path: p.clone(), source })?;
    serde_json::from_reader(std::io::BufReader::new(file)).map_err(|e| {
        if e.is_io() {
            CheckError::Io { path: p, source: e.into() }
        } else {
            CheckError::Json { path: p, line: e.line(), column: e.column(), message: e.to_string() }
        }
    })
}

/// The per-operation checks, fed by the clock pass.
struct Pass {
    out: Collector,
    causal: causal::CausalCheck,
    session: session::SessionCheck,
    rot: rot::RotCheck,
}

impl Visitor for Pass {
    fn visit(&mut self, m: &Model<'_>, c: &Clocks, op: u32, before: &[u32], vc: &[u32]) {
        self.causal.visit(m, c, op, before, vc, &mut self.out);
        self.session.visit(m, c, op, &mut self.out);
        self.rot.visit(m, c, op, &mut self.out);
    }
}
