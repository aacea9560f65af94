//! Liveness: every invoked operation finishes, and in time.
//!
//! A history holds every invoked operation (see [`causeway_core::OpRecord`]):
//! one that never completed is recorded as failed with
//! [`OpError::Pending`](causeway_core::OpError::Pending) and the end of the
//! run as its `complete_us`, one the client gave up on with
//! [`OpError::TimedOut`](causeway_core::OpError::TimedOut). Safety checks
//! treat both as "outcome unknown" (a possibly-applied write); this module
//! judges them, and slow completions, against a [`Liveness`] spec:
//!
//! - An operation invoked at `t` has a **deadline** `t + bound`. Each fault
//!   window the protocol may wait out (a pause, a crash until its restart, a
//!   slow link, a partition when the protocol does not promise availability
//!   under partitions, …) that overlaps `[t, deadline)` pushes the deadline
//!   to the window's end plus `bound`, repeatedly: the protocol gets `bound`
//!   after the last fault its operation ran into. Windows that do not excuse
//!   (partitions, for a protocol that promises availability under them) do
//!   not move the deadline.
//! - An operation that **completed** (successfully or with a refusal) after
//!   its deadline is reported as [`Kind::SlowOperation`].
//! - An operation that **never completed** (pending at the end of the run,
//!   or timed out) although its deadline had passed by then is reported as
//!   [`Kind::Unfinished`] — unless it timed out after overlapping a window
//!   that loses client requests (a crash): a request the crashed node lost is
//!   answered by the client's deadline, not by the protocol.
//!
//! Without a spec, no deadline is known: every operation still pending at
//! the end of the run is listed under [`Kind::Unfinished`] for information
//! (not required, since the run may simply have stopped under it).
//!
//! "What it waited for" is told as far as the history can tell: the
//! operation's session context (its previous operation and the writes from
//! other DCs its session had read, which a dependency-tracking protocol
//! waits for) and the fault windows its run overlapped.

use crate::model::Model;
use crate::violation::{Collector, Ending, Kind, Raw};
use causeway_core::{OpError, OpResult};
use serde::{Deserialize, Serialize};

/// What the liveness checks hold operations to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Liveness {
    /// How long an operation may take after its invocation, or after the end
    /// of the last excusing fault window it overlapped (µs). The protocol
    /// declares it ([`causeway_core::Protocol::liveness_bound_us`]).
    pub bound_us: u64,
    /// The run's fault windows, in true time.
    #[serde(default)]
    pub faults: Vec<FaultWindow>,
    /// Whether a liveness violation fails the history. False reports them
    /// for information only (torture's `--without liveness`, meant for
    /// known stalls awaiting a fix, not as a setting to keep).
    #[serde(default = "yes")]
    pub required: bool,
}

fn yes() -> bool {
    true
}

/// A fault active over `[from_us, to_us)` of true time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultWindow {
    pub from_us: u64,
    pub to_us: u64,
    /// "dc0 cut off from dc2", "node 3 crashed", shown in explanations.
    pub what: String,
    /// The protocol may wait it out: operations overlapping it get until its
    /// end plus the bound.
    pub excuses: bool,
    /// Client requests in flight may be lost (a crash), so an operation
    /// overlapping it may end by the client's timeout.
    #[serde(default)]
    pub loses_requests: bool,
}

impl Liveness {
    /// Everything invoked at or after `quiet_us` must complete within
    /// `bound_us`; before it, anything goes (one excusing window from 0).
    pub fn after_quiescence(quiet_us: u64, bound_us: u64) -> Liveness {
        let faults = (quiet_us > 0)
            .then(|| FaultWindow {
                from_us: 0,
                to_us: quiet_us,
                what: "the run before the quiescence time".into(),
                excuses: true,
                loses_requests: true,
            })
            .into_iter()
            .collect();
        Liveness { bound_us, faults, required: true }
    }

    /// The deadline of an operation invoked at `t`, and whether it ran into
    /// a window that loses requests.
    pub fn deadline(&self, t: u64) -> (u64, bool) {
        let mut d = t.saturating_add(self.bound_us);
        let mut lossy = false;
        loop {
            let mut moved = false;
            for w in &self.faults {
                if w.from_us < d && w.to_us > t {
                    lossy |= w.loses_requests;
                    let until = w.to_us.saturating_add(self.bound_us);
                    if w.excuses && until > d {
                        d = until;
                        moved = true;
                    }
                }
            }
            if !moved {
                return (d, lossy);
            }
        }
    }

    /// The windows overlapping `[from, to)`, for explanations.
    pub fn overlapping(&self, from: u64, to: u64) -> Vec<String> {
        self.faults
            .iter()
            .filter(|w| w.from_us < to.max(from + 1) && w.to_us > from)
            .map(|w| {
                format!(
                    "{} ({} – {}{})",
                    w.what,
                    crate::explain::ms(w.from_us),
                    crate::explain::ms(w.to_us),
                    if w.excuses { "" } else { ", which the protocol promises to stay available through" }
                )
            })
            .collect()
    }
}

/// Run the checks. Returns nothing; violations go to `out`.
pub fn check_liveness(m: &Model<'_>, spec: Option<&Liveness>, out: &mut Collector) {
    let ops = &m.history.ops;
    for (i, r) in ops.iter().enumerate() {
        let ending = match &r.result {
            OpResult::Failed(OpError::Pending) => Ending::Pending,
            OpResult::Failed(OpError::TimedOut { .. }) => Ending::TimedOut,
            _ => Ending::Completed,
        };
        let Some(spec) = spec else {
            if ending == Ending::Pending {
                out.add(Kind::Unfinished, || Raw::Stall {
                    op: i as u32,
                    deadline_us: None,
                    ending,
                    faults: Vec::new(),
                });
            }
            continue;
        };
        let (deadline, lossy) = spec.deadline(r.invoke_us);
        match ending {
            Ending::Completed if r.complete_us > deadline => out.add(Kind::SlowOperation, || Raw::Stall {
                op: i as u32,
                deadline_us: Some(deadline),
                ending,
                faults: spec.overlapping(r.invoke_us, r.complete_us),
            }),
            Ending::Pending | Ending::TimedOut
                if r.complete_us >= deadline && !(lossy && ending == Ending::TimedOut) =>
            {
                out.add(Kind::Unfinished, || Raw::Stall {
                    op: i as u32,
                    deadline_us: Some(deadline),
                    ending,
                    faults: spec.overlapping(r.invoke_us, r.complete_us),
                })
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CheckConfig, Kind, Level, check};
    use causeway_core::{ClientId, DcId, History, Op, OpRecord};

    fn window(from_us: u64, to_us: u64, excuses: bool, loses_requests: bool) -> FaultWindow {
        FaultWindow { from_us, to_us, what: "w".into(), excuses, loses_requests }
    }

    #[test]
    fn deadlines_extend_through_excusing_windows_only() {
        let l = Liveness {
            bound_us: 100,
            faults: vec![window(50, 400, true, false), window(450, 900, true, false), window(0, 10_000, false, false)],
            required: true,
        };
        // Invoked before the first window: pushed to its end, then (as the
        // new deadline overlaps it) through the second.
        assert_eq!(l.deadline(0), (1_000, false));
        // After both: only the bound; the non-excusing window changes nothing.
        assert_eq!(l.deadline(2_000), (2_100, false));
        let crash = Liveness { bound_us: 100, faults: vec![window(150, 160, true, true)], required: true };
        assert_eq!(crash.deadline(100), (260, true));
        assert_eq!(crash.deadline(0), (100, false), "a window after the deadline does not apply");
    }

    fn get(at: u64, done: u64, result: OpResult) -> OpRecord {
        OpRecord {
            client: ClientId(0),
            dc: DcId(1),
            op: Op::Get { key: bytes::Bytes::from_static(b"k") },
            result,
            invoke_us: at,
            complete_us: done,
            batch: None,
            levels: None,
            checking_group: None,
        }
    }

    #[test]
    fn slow_unfinished_and_excused_operations() {
        let h = History {
            protocol: "t".into(),
            ops: vec![
                get(0, 50, OpResult::Get(None)),                                        // in time
                get(100, 300, OpResult::Get(None)),                                     // slow
                get(1_000, 1_500, OpResult::Failed(OpError::TimedOut { after_ms: 0 })), // lost to a crash
                get(2_000, 5_000, OpResult::Failed(OpError::Pending)),                  // stalled
            ],
        };
        let l = Liveness { bound_us: 100, faults: vec![window(1_050, 1_060, true, true)], required: true };
        let r = check(&h, &CheckConfig::at(Level::Eventual).with_liveness(l.clone()));
        assert!(!r.passed);
        assert_eq!((r.count(Kind::SlowOperation), r.count(Kind::Unfinished)), (1, 1), "{r}");
        let text = r.of_kind(Kind::Unfinished).next().unwrap().to_string();
        assert!(
            text.contains("still pending at the end of the run") && text.contains("deadline was 2.100 ms"),
            "{text}"
        );
        // Reported but not judged.
        let r = check(&h, &CheckConfig::at(Level::Eventual).with_liveness(Liveness { required: false, ..l }));
        assert!(r.passed && r.count(Kind::Unfinished) == 1, "{r}");
        // No spec: the pending operation is listed, nothing is judged.
        let r = check(&h, &CheckConfig::at(Level::Eventual));
        assert!(r.passed && r.count(Kind::Unfinished) == 1 && r.count(Kind::SlowOperation) == 0, "{r}");
    }
}
