//! What to check ([`CheckConfig`], [`Level`]) and what was found
//! ([`CheckReport`]): per-check pass/fail, violations, counts and history
//! statistics, printable for a person and serialisable as JSON.

use crate::error::ModelError;
use crate::explain::ms;
use crate::violation::{Kind, Violation};
use causeway_core::{History, Op, OpResult};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// The consistency a protocol promises, which decides which checks must pass.
/// Every check runs at every level (a failed check that is not required is
/// shown for information); only required checks decide [`CheckReport::passed`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Eventual consistency: no thin-air reads; after quiescence, replicas
    /// converge and every acknowledged write is visible or superseded.
    Eventual,
    /// Eventual consistency plus the two per-key session guarantees a
    /// session's reads can be held to on their own: read-your-writes and
    /// monotonic reads (Terry et al.), what NuKV's default levels promise
    /// (Roohitavaf Ch. 4, Defs 4–5, Thms 1–2). Its per-key monotonic writes
    /// and writes-follow-reads (Defs 6–7) are weaker than this checker's
    /// forms of those two, which follow a session across keys.
    Sessions,
    /// Causal consistency: the above, plus an acyclic causal order, no read of
    /// a causally overwritten value or of ∅ after a causally preceding write,
    /// the four session guarantees, causal snapshots for read-only
    /// transactions and atomic visibility of write-only ones.
    Causal,
    /// Causal+ (causal convergence, CCv): causal, plus one arbitration order
    /// of writes that explains every read — what last-writer-wins over
    /// causally consistent timestamps gives. Every causal protocol of the
    /// catalogue promises this, hence the default.
    #[default]
    CausalPlus,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Eventual => "eventual",
            Level::Sessions => "sessions",
            Level::Causal => "causal",
            Level::CausalPlus => "causal+",
        }
    }

    /// The level a protocol promises, from `Protocol::CAUSAL`.
    pub fn promised(causal: bool) -> Level {
        if causal { Level::CausalPlus } else { Level::Eventual }
    }

    /// The level a protocol promises, from `Protocol::CAUSAL` and
    /// `Protocol::SESSIONS`.
    pub fn promised_by(causal: bool, sessions: bool) -> Level {
        match (causal, sessions) {
            (true, _) => Level::CausalPlus,
            (false, true) => Level::Sessions,
            (false, false) => Level::Eventual,
        }
    }

    /// Whether a violation of `kind` fails a history at this level.
    pub fn requires(self, kind: Kind) -> bool {
        match kind {
            // Liveness kinds are required whenever a liveness spec is given
            // (`check` decides that; see `CheckConfig::liveness`).
            Kind::ThinAirRead
            | Kind::Divergence
            | Kind::NotEventuallyVisible
            | Kind::Unfinished
            | Kind::SlowOperation => true,
            Kind::CyclicArbitration => self == Level::CausalPlus,
            Kind::ReadYourWrites | Kind::MonotonicReads => self >= Level::Sessions,
            _ => self >= Level::Causal,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Level {
    type Err = String;
    fn from_str(s: &str) -> Result<Level, String> {
        match s.to_ascii_lowercase().as_str() {
            "eventual" => Ok(Level::Eventual),
            "sessions" => Ok(Level::Sessions),
            "causal" => Ok(Level::Causal),
            "causal+" | "causal-plus" | "causal_plus" | "causalplus" | "ccv" => Ok(Level::CausalPlus),
            other => Err(format!("unknown consistency level {other:?}; known: eventual, sessions, causal, causal+")),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckConfig {
    pub level: Level,
    /// True time (µs) after which no write is in flight; enables the
    /// convergence and eventual-visibility checks on reads invoked after it.
    pub quiescent_after_us: Option<u64>,
    /// Violations shown per kind (all are counted).
    pub max_reported: usize,
    /// Deadlines for operations ([`crate::liveness`]). With one, the
    /// liveness checks are required at every level; without, operations
    /// still pending at the end of the run are only listed.
    #[serde(default)]
    pub liveness: Option<crate::liveness::Liveness>,
    /// Each DC linearizes the writes it takes, per key, and arbitration
    /// extends that order (`Protocol::LINEARIZES_DC_WRITES`: NuKV's Raft
    /// groups): after quiescence a value is then also lost when an
    /// acknowledged write of the key was invoked in the same DC after it
    /// completed ([`crate::convergence`]). Off by default.
    #[serde(default)]
    pub dc_write_order: bool,
}

impl Default for CheckConfig {
    fn default() -> Self {
        CheckConfig {
            level: Level::default(),
            quiescent_after_us: None,
            max_reported: 10,
            liveness: None,
            dc_write_order: false,
        }
    }
}

impl CheckConfig {
    pub fn at(level: Level) -> Self {
        CheckConfig { level, ..Default::default() }
    }
    pub fn quiescent_after(mut self, us: u64) -> Self {
        self.quiescent_after_us = Some(us);
        self
    }
    /// The check for a protocol that promises `LINEARIZES_DC_WRITES`.
    pub fn with_dc_write_order(mut self, on: bool) -> Self {
        self.dc_write_order = on;
        self
    }
    pub fn with_liveness(mut self, liveness: crate::liveness::Liveness) -> Self {
        self.liveness = Some(liveness);
        self
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Status {
    Pass,
    Fail {
        violations: usize,
    },
    /// Not evaluated (no quiescence time, or the history could not be modelled).
    Skipped {
        reason: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    pub kind: Kind,
    pub name: &'static str,
    /// Whether the level requires this check to pass.
    pub required: bool,
    #[serde(flatten)]
    pub status: Status,
}

/// Counts describing the history.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub ops: usize,
    pub gets: usize,
    pub puts: usize,
    pub rots: usize,
    /// Write-only transactions.
    pub wots: usize,
    /// Read-write transactions.
    pub txns: usize,
    pub failed: usize,
    pub sessions: usize,
    pub dcs: usize,
    pub keys: usize,
    /// Reads: one per `Get`, one per read key of each `Rot` and `Txn`
    /// (successful ops).
    pub reads: usize,
    pub first_invoke_us: u64,
    pub last_complete_us: u64,
}

impl Stats {
    pub fn of(h: &History) -> Stats {
        let mut s = Stats { ops: h.ops.len(), ..Default::default() };
        let mut clients = BTreeSet::new();
        let mut dcs = BTreeSet::new();
        let mut keys = BTreeSet::new();
        s.first_invoke_us = h.ops.iter().map(|r| r.invoke_us).min().unwrap_or(0);
        s.last_complete_us = h.ops.iter().map(|r| r.complete_us).max().unwrap_or(0);
        for r in &h.ops {
            clients.insert(r.client);
            dcs.insert(r.dc);
            match &r.op {
                Op::Get { key } => {
                    s.gets += 1;
                    keys.insert(key);
                }
                Op::Put { key, .. } => {
                    s.puts += 1;
                    keys.insert(key);
                }
                Op::Rot { keys: ks } => {
                    s.rots += 1;
                    keys.extend(ks);
                }
                Op::Wot { writes } => {
                    s.wots += 1;
                    keys.extend(writes.iter().map(|(k, _)| k));
                }
                // Recorded as puts (`OpRecord::expand`); counted so if not.
                Op::Batch { writes } => {
                    s.puts += writes.len();
                    keys.extend(writes.iter().map(|(k, _)| k));
                }
                Op::Txn { reads, writes } => {
                    s.txns += 1;
                    keys.extend(reads.iter().chain(writes.iter().map(|(k, _)| k)));
                }
                Op::Add { key, .. } => {
                    s.puts += 1;
                    keys.insert(key);
                }
                Op::Slice { .. } => s.gets += 1,
                // Never in a checked history (the model refuses them).
                Op::Begin | Op::TxRead { .. } | Op::Commit { .. } | Op::Abort => {}
            }
            match &r.result {
                OpResult::Failed(_) => s.failed += 1,
                OpResult::Get(_) => s.reads += 1,
                OpResult::Rot(v) | OpResult::Txn(v) => s.reads += v.len(),
                OpResult::Slice(v) => s.reads += v.len(),
                OpResult::Put | OpResult::Wot | OpResult::Done => {}
            }
        }
        s.sessions = clients.len();
        s.dcs = dcs.len();
        s.keys = keys.len();
        s
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    pub protocol: String,
    pub level: Level,
    pub quiescent_after_us: Option<u64>,
    /// Every required check passed (and the history could be modelled).
    pub passed: bool,
    pub stats: Stats,
    /// Why the history could not be checked at all.
    pub invalid: Option<ModelError>,
    pub checks: Vec<CheckResult>,
    /// The first `max_reported` violations of each kind, by kind then op.
    pub violations: Vec<Violation>,
    pub max_reported: usize,
}

impl CheckReport {
    /// All violations of `kind` found (not only those listed).
    pub fn count(&self, kind: Kind) -> usize {
        self.checks
            .iter()
            .find(|c| c.kind == kind)
            .map(|c| match c.status {
                Status::Fail { violations } => violations,
                _ => 0,
            })
            .unwrap_or(0)
    }

    /// The listed violations of `kind`.
    pub fn of_kind(&self, kind: Kind) -> impl Iterator<Item = &Violation> {
        self.violations.iter().filter(move |v| v.kind() == kind)
    }

    /// Kinds with at least one violation.
    pub fn failed_kinds(&self) -> Vec<Kind> {
        self.checks.iter().filter(|c| matches!(c.status, Status::Fail { .. })).map(|c| c.kind).collect()
    }
}

fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(ch);
    }
    out
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stats;
        writeln!(
            f,
            "consistency check of a {} history at level {}: {}",
            if self.protocol.is_empty() { "(unnamed)" } else { &self.protocol },
            self.level,
            if self.passed { "PASS" } else { "FAIL" }
        )?;
        writeln!(
            f,
            "  {} ops ({} get, {} put, {} rot, {} wot, {} txn; {} failed) by {} sessions in {} DCs over {} keys, {} \
             of true time",
            thousands(s.ops),
            thousands(s.gets),
            thousands(s.puts),
            thousands(s.rots),
            thousands(s.wots),
            thousands(s.txns),
            thousands(s.failed),
            s.sessions,
            s.dcs,
            thousands(s.keys),
            ms(s.last_complete_us.saturating_sub(s.first_invoke_us))
        )?;
        if let Some(e) = &self.invalid {
            writeln!(f, "  the history cannot be checked: {e}")?;
        }
        for c in &self.checks {
            let note = if c.required { "" } else { "  (not required at this level)" };
            match &c.status {
                Status::Pass => writeln!(f, "  pass  {}{note}", c.name)?,
                Status::Fail { violations } => writeln!(
                    f,
                    "  FAIL  {}: {} violation{}{note}",
                    c.name,
                    thousands(*violations),
                    plural(*violations)
                )?,
                Status::Skipped { reason } => writeln!(f, "  skip  {}: {reason}", c.name)?,
            }
        }
        if !self.violations.is_empty() {
            writeln!(f, "violations (at most {} of each kind):", self.max_reported)?;
            for v in &self.violations {
                writeln!(f, "  [{}] {v}", v.kind())?;
            }
        }
        Ok(())
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
