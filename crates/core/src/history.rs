//! Histories: what every client saw — each operation with its invoke and
//! complete times, session, keys, the unique value each write wrote, what
//! each read returned and its transaction's bounds (`docs/architecture.md`,
//! "Two runtimes"). Both runtimes record them; the checker consumes them.

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
    /// Set on the `Put`s one [`Op::Batch`] was recorded as: the batch's
    /// number, unique within its client's session. The writes of one batch
    /// were issued together and are unordered among themselves (the
    /// checker's model forks the session at the batch and joins it after).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u64>,
    /// The session guarantees a GET or PUT asked for ([`crate::Levels`]);
    /// `None` when it named none, and the protocol's own promise applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<crate::Levels>,
    /// The checking group a GET named for itself (ACCF's `GET(k, cg)`,
    /// Roohitavaf Alg 7.1); `None` when it named none and its server's
    /// first group applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checking_group: Option<u16>,
}

impl OpRecord {
    /// The records to keep of this one: itself, or for a [`Op::Batch`] one
    /// `Put` per write, each with the batch's result and times and `batch`
    /// set to `id` (unique among the client's batches), so that every write
    /// has an index of its own in the history.
    pub fn expand(self, id: u64) -> Vec<OpRecord> {
        let OpRecord { client, dc, op, result, invoke_us, complete_us, levels, checking_group, .. } = self;
        match op {
            Op::Batch { writes } => writes
                .into_iter()
                .map(|(key, value)| OpRecord {
                    client,
                    dc,
                    op: Op::Put { key, value },
                    result: result.clone(),
                    invoke_us,
                    complete_us,
                    batch: Some(id),
                    levels,
                    checking_group,
                })
                .collect(),
            op => {
                vec![OpRecord { client, dc, op, result, invoke_us, complete_us, batch: None, levels, checking_group }]
            }
        }
    }
}

/// All operations of a run, in completion order (pending ones last).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    pub protocol: String,
    pub ops: Vec<OpRecord>,
}
