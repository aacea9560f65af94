//! Histories: what every client saw, as DESIGN.md defines them. Both runtimes
//! record them; the checker consumes them.

use crate::ids::{ClientId, DcId};
use crate::protocol::{Op, OpResult};
use serde::{Deserialize, Serialize};

/// One completed (or failed) client operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpRecord {
    pub client: ClientId,
    pub dc: DcId,
    pub op: Op,
    pub result: OpResult,
    /// True (not skewed) time at invocation and completion, µs.
    pub invoke_us: u64,
    pub complete_us: u64,
}

/// All operations of a run, in completion order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    pub protocol: String,
    pub ops: Vec<OpRecord>,
}
