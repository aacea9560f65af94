//! # A client's read-only transaction at a snapshot vector
//!
//! Cure and Contrarian read the same way from the client's side (Didona et
//! al. §4, §5: the two run in one code base with one GET/PUT/ROT API, so
//! they differ only where the designs do): a coordinator — the partition of
//! the first key — fixes a snapshot vector TV; in two rounds it hands TV
//! back and the client reads every partition at TV; each partition answers
//! with its keys' values and the TV it read at. A GET is a ROT of one key.
//! The client's `last`, the snapshot it piggybacks, only grows with every
//! vector the DC hands it. How the first round is sent (Cure's `ReadOne` or
//! `SnapshotReq`, Contrarian's 1½ rounds) stays in each client; which
//! partitions are still to answer, for which keys, and how their answers
//! complete the operation live here.

use causeway_core::{ClientEnv, Key, NodeId, OpError, OpResult, Value, vmax};
use std::collections::BTreeMap;
use std::ops::DerefMut;

/// A ROT (or GET) in progress at a client.
pub struct SnapshotRead {
    pub rot: u64,
    /// A GET: complete with `OpResult::Get`.
    single: bool,
    /// The partitions still to answer, with the positions (in request
    /// order) of the keys each reads.
    awaiting: BTreeMap<NodeId, Vec<usize>>,
    /// Two rounds: the coordinator, until its snapshot arrives.
    coordinator: Option<NodeId>,
    keys: Vec<Key>,
    values: Vec<Option<Value>>,
}

impl SnapshotRead {
    /// A read of `keys` (a GET when `single`), `servers[i]` the partition
    /// of `keys[i]`; one round unless [`SnapshotRead::await_snapshot`].
    pub fn new(rot: u64, single: bool, keys: Vec<Key>, servers: &[NodeId]) -> Self {
        debug_assert_eq!(keys.len(), servers.len(), "one server per key");
        let mut awaiting: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
        for (i, &s) in servers.iter().enumerate() {
            awaiting.entry(s).or_default().push(i);
        }
        let values = vec![None; keys.len()];
        SnapshotRead { rot, single, awaiting, coordinator: None, keys, values }
    }

    /// How many partitions the read touches.
    pub fn partitions(&self) -> usize {
        self.awaiting.len()
    }

    /// The partitions the read touches, in id order.
    pub fn servers(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.awaiting.keys().copied()
    }

    /// The keys partition `n` reads, in request order.
    pub fn keys_for(&self, n: NodeId) -> Vec<Key> {
        self.awaiting.get(&n).map_or_else(Vec::new, |ps| ps.iter().map(|&i| self.keys[i].clone()).collect())
    }

    /// Two rounds: no slice counts until `coordinator`'s snapshot is in.
    pub fn await_snapshot(&mut self, coordinator: NodeId) {
        self.coordinator = Some(coordinator);
    }

    /// Whether the read is still waiting for the coordinator's snapshot.
    pub fn awaits_snapshot(&self) -> bool {
        self.coordinator.is_some()
    }

    /// The coordinator's snapshot (or its refusal) from `from`: merge it
    /// into the session's vector with `learn`, then ask every partition to
    /// read at it (`read_at(rot, keys, tv)`). A reply from anyone but the
    /// awaited coordinator is ignored. Returns the read while it goes on.
    pub fn on_snapshot<M, TV: Clone>(
        mut self,
        env: &mut impl ClientEnv<M>,
        from: NodeId,
        tv: Result<TV, OpError>,
        learn: impl FnOnce(&TV) -> Result<(), OpError>,
        read_at: impl Fn(u64, Vec<Key>, TV) -> M,
    ) -> Option<Self> {
        if self.coordinator != Some(from) {
            return Some(self); // not asked: ignore
        }
        self.coordinator = None;
        match tv.and_then(|tv| learn(&tv).map(|()| tv)) {
            Ok(tv) => {
                for (&n, positions) in &self.awaiting {
                    let keys = positions.iter().map(|&i| self.keys[i].clone()).collect();
                    env.send(n, read_at(self.rot, keys, tv.clone()));
                }
                Some(self)
            }
            Err(e) => {
                env.complete(OpResult::Failed(e));
                None
            }
        }
    }

    /// A partition's slice (its values and the vector it read at, or a
    /// refusal) from `from`: merge the vector with `learn` and place the
    /// values; complete the operation once every partition answered or one
    /// failed. A slice from a partition not awaited (a duplicate, a stray)
    /// is ignored. Returns the read while it goes on.
    pub fn on_slice<M, TV>(
        mut self,
        env: &mut impl ClientEnv<M>,
        from: NodeId,
        slice: Result<(Vec<Option<Value>>, TV), OpError>,
        learn: impl FnOnce(&TV) -> Result<(), OpError>,
    ) -> Option<Self> {
        if self.coordinator.is_some() {
            return Some(self); // two rounds: no slice before the snapshot
        }
        let Some(positions) = self.awaiting.remove(&from) else {
            return Some(self); // a duplicate or stray slice
        };
        let absorbed = slice.and_then(|(values, tv)| {
            if values.len() != positions.len() {
                return Err(OpError::Aborted("a partition answered a different number of keys".into()));
            }
            learn(&tv)?;
            for (&i, v) in positions.iter().zip(values) {
                self.values[i] = v;
            }
            Ok(())
        });
        match absorbed {
            Err(e) => env.complete(OpResult::Failed(e)),
            Ok(()) if !self.awaiting.is_empty() => return Some(self),
            Ok(()) if self.single => env.complete(OpResult::Get(self.values.pop().flatten())),
            Ok(()) => {
                debug_assert_eq!(self.values.len(), self.keys.len());
                env.complete(OpResult::Rot(self.values));
            }
        }
        None
    }
}

/// Merge a vector the DC handed the session into `last`, which only grows;
/// a vector of the wrong length is a malformed reply.
pub fn learn<T: Ord + Copy>(last: &mut [T], tv: &[T]) -> Result<(), OpError> {
    if tv.len() != last.len() {
        return Err(OpError::Aborted("malformed snapshot in a reply".into()));
    }
    vmax(last, tv);
    Ok(())
}

/// What a PUT's reply teaches the session: the partition's stable vector,
/// with the local entry (DC `m`) the new version's timestamp `ts`.
pub fn learn_put<T: Ord + Copy>(
    last: &mut [T],
    m: usize,
    mut stable: impl DerefMut<Target = [T]>,
    ts: T,
) -> Result<(), OpError> {
    if stable.len() == last.len() {
        stable[m] = ts;
    }
    learn(last, &stable)
}
