//! Histories: what every client saw, as DESIGN.md defines them. Both runtimes
//! record them; the checker consumes them.

use crate::ids::{ClientId, DcId};
use crate::protocol::{Op, OpResult};
use serde::{Deserialize, Serialize};

/// One invoked client operation: completed, failed, timed out, or never
/// completed. An operation still in progress when the run ended is recorded
/// with `result: Failed(OpError::Pending)` and `complete_us` the end of the
/// run, so a history holds every invoked operation: one that blocks or
/// livelocks shows up (and the liveness checks judge it) instead of
/// vanishing. Older histories, which held completed operations only, read
/// unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpRecord {
    pub client: ClientId,
    pub dc: DcId,
    pub op: Op,
    pub result: OpResult,
    /// True (not skewed) time at invocation and completion, µs (for a
    /// pending operation, the end of the run; for a timed-out one, when the
    /// client gave up).
    pub invoke_us: u64,
    pub complete_us: u64,
}

/// All operations of a run, in completion order (pending ones last).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    pub protocol: String,
    pub ops: Vec<OpRecord>,
}
