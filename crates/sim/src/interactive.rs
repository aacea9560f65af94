//! The workload's interactive transactions, driven step by step: a plan
//! drawn with the request, and the run that turns each step's answer into
//! the next step and, at the end, into the one record the history keeps.
//!
//! The second read round depends on what the first returned, as a user's
//! transaction does (read an index, then the rows it names): the keys it
//! reads are chosen among the plan's candidates by a hash of the values
//! the first round saw. It also reads back one of the transaction's own
//! writes, which [`TxnBuffer`] answers, and the run asserts it does.

use causeway_core::{Key, Op, OpResult, TxnBuffer, Value};

/// What one interactive transaction will do, drawn by the workload.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The first read round.
    pub first: Vec<Key>,
    /// The second round's keys are chosen among these.
    pub candidates: Vec<Key>,
    /// Buffered after the first round, committed at the end.
    pub writes: Vec<(Key, Value)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Begin,
    First,
    Second,
    Commit,
}

/// An interactive transaction in progress in a simulated session.
#[derive(Clone, Debug)]
pub struct Run {
    plan: Plan,
    buf: TxnBuffer,
    stage: Stage,
    /// The keys the read in flight asked for, and those the round reads.
    fetching: Vec<Key>,
    round: Vec<Key>,
    /// When the transaction's START was invoked (true time, µs).
    pub invoke_us: u64,
    /// When its last step was answered (true time, µs; START's invocation
    /// before any): every read it recorded had been answered by then.
    pub answered_us: u64,
}

/// What the session does after a step's answer.
pub enum Next {
    /// Invoke this step now.
    Step(Op),
    /// The transaction is over; record this (nothing when it failed before
    /// reading anything).
    Ended(Option<(Op, OpResult)>),
}

impl Run {
    pub fn new(plan: Plan, invoke_us: u64) -> Self {
        Run {
            plan,
            buf: TxnBuffer::new(),
            stage: Stage::Begin,
            fetching: Vec::new(),
            round: Vec::new(),
            invoke_us,
            answered_us: invoke_us,
        }
    }

    /// The answer to the step in flight.
    pub fn on_result(&mut self, result: OpResult) -> Next {
        if let OpResult::Failed(_) = result {
            return Next::Ended(self.ended(&result));
        }
        match (self.stage, result) {
            (Stage::Begin, OpResult::Done) => {
                self.stage = Stage::First;
                let keys = self.plan.first.clone();
                self.read(keys)
            }
            (Stage::First | Stage::Second, OpResult::Rot(values)) => {
                let fetched = std::mem::take(&mut self.fetching);
                self.buf.fetched(fetched, values);
                self.after_round()
            }
            (Stage::Commit, OpResult::Done) => Next::Ended(self.ended(&OpResult::Done)),
            (stage, other) => panic!("an interactive transaction at {stage:?} answered {other:?}"),
        }
    }

    /// The record of a transaction still in flight when the run ends.
    pub fn pending_record(&self) -> Option<(Op, OpResult)> {
        self.clone().ended(&OpResult::Failed(causeway_core::OpError::Pending))
    }

    /// A round's keys: ask for what the buffer cannot answer, or go on at
    /// once when it can answer them all.
    fn read(&mut self, keys: Vec<Key>) -> Next {
        self.fetching = self.buf.to_fetch(&keys);
        self.round = keys;
        if self.fetching.is_empty() {
            return self.after_round();
        }
        Next::Step(Op::TxRead { keys: self.fetching.clone() })
    }

    fn after_round(&mut self) -> Next {
        let round = std::mem::take(&mut self.round);
        let values = self.buf.answer(&round);
        match self.stage {
            Stage::First => {
                for (k, v) in &self.plan.writes {
                    self.buf.write(k.clone(), v.clone());
                }
                // The second round: the candidates the first round's values
                // select, and the first write (read back from the buffer).
                let h = causeway_core::stable_hash(format!("{values:?}").as_bytes());
                let mut keys: Vec<Key> = self
                    .plan
                    .candidates
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| h >> (i % 64) & 1 == 1)
                    .map(|(_, k)| k.clone())
                    .collect();
                if let Some((k, _)) = self.plan.writes.first()
                    && !keys.contains(k)
                {
                    keys.push(k.clone());
                }
                self.stage = Stage::Second;
                self.read(keys)
            }
            Stage::Second => {
                for (k, v) in round.iter().zip(&values) {
                    if let Some((_, w)) = self.buf.writes().iter().find(|(wk, _)| wk == k) {
                        assert_eq!(v.as_ref(), Some(w), "a transaction read back something other than its own write");
                    }
                }
                self.stage = Stage::Commit;
                Next::Step(Op::Commit { writes: self.buf.writes().to_vec() })
            }
            Stage::Begin | Stage::Commit => unreachable!("no read round at {:?}", self.stage),
        }
    }

    /// The record of the transaction ending with `result`: a commit's
    /// outcome once it was asked to commit, else its reads alone.
    fn ended(&mut self, result: &OpResult) -> Option<(Op, OpResult)> {
        let buf = std::mem::take(&mut self.buf);
        if self.stage == Stage::Commit { Some(buf.record(result)) } else { buf.record_aborted() }
    }
}
