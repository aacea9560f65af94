//! # The partition server's plumbing, shared by the stabilization family
//!
//! Every server of the family is a partition that stores remote versions on
//! arrival, heartbeats its replicas when it has nothing to replicate, steps
//! the DC's stable-time tree every θ and, in a DC of one partition, raises
//! the stable time as its own version vector moves. GentleRain (Du et al.
//! §4, Alg. 2–3), CausalSpartanX (Roohitavaf Alg 5.3), Cure (Akkoorath et
//! al. §4) and Contrarian (Didona et al. §4) all describe that loop; what
//! differs is the clock a heartbeat carries, the stable-time rule and the
//! read rule, which stay in each protocol's module. What does not differ
//! lives here:
//!
//! - [`Ticker`]: the heartbeat and stabilization timers under the family's
//!   idle pacing ([`Pace`]), and "heartbeat only if nothing was replicated
//!   since the last tick" (Du et al. Alg. 3; Roohitavaf Alg 5.3; Didona et
//!   al. §4);
//! - the dense-vector steps of Cure and Contrarian, whose dependency vector
//!   (DV), version vector (VV) and stable vector (GST, GSS) have one entry
//!   per DC: raising the stable vector, admitting the remote versions it
//!   now covers ([`newly_visible`], [`land_remote`]), the one-partition
//!   shortcut ([`alone_raise`]), the visibility report
//!   ([`report_if_read`]), the snapshot rule DV ≤ TV ([`in_snapshot`]),
//!   a replicated version's shape ([`well_formed`]), key checks and the
//!   scan of a restarted store ([`for_each_stored`]);
//! - the GC step of every θ tick and the journaling of the horizon it
//!   reaches ([`collect_garbage`]), for CausalSpartanX, Cure and
//!   Contrarian.

use crate::stabilization::pace::{Pace, PaceConfig};
use crate::stabilization::stable_tree::StableTree;
use crate::stabilization::version_gc::VersionGc;
use crate::stabilization::visibility::{self, PendingVisible};
use causeway_core::{DcId, Inserted, Key, KeyIndex, MvStore, OpError, PartitionId, ServerEnv, Topology, Versioned};
use std::fmt::Debug;

/// Timer kinds, in a token's low two bits; above them the pace epoch the
/// timer was set under (a wake-up makes older timers stale) or, for a
/// protocol's own kind 3, whatever that protocol parks.
pub const TIMER_HEARTBEAT: u64 = 1;
pub const TIMER_STABILIZE: u64 = 2;

/// A timer token: `kind` in the low two bits, `epoch_or_id` above.
pub fn timer(kind: u64, epoch_or_id: u64) -> u64 {
    debug_assert!(kind < 4, "a timer kind takes two bits");
    (epoch_or_id << 2) | kind
}

/// A token's kind ([`TIMER_HEARTBEAT`], [`TIMER_STABILIZE`] or the
/// protocol's kind 3).
pub fn timer_kind(token: u64) -> u64 {
    token & 3
}

/// What a token carries above its kind: an epoch or a parked id.
pub fn timer_arg(token: u64) -> u64 {
    token >> 2
}

/// The heartbeat (Δ) and stabilization (θ) timers of a partition, paced
/// while idle, and whether a heartbeat is due: a partition that sent a
/// Replicate since the last Δ tick needs none, its versions carry its clock.
/// A heartbeat goes out on each tick that had no Replicate since the one
/// before, rather than "if none went out in the past Δ", so a clock that
/// steps back cannot silence it.
pub struct Ticker {
    pace: Pace,
    replicated_since_heartbeat: bool,
}

impl Ticker {
    pub fn new(cfg: &PaceConfig) -> Self {
        Ticker { pace: Pace::new(cfg), replicated_since_heartbeat: false }
    }

    /// Arm both timers for the first time (epoch 0).
    pub fn start<M, V: Versioned>(
        &self,
        env: &mut impl ServerEnv<M, V>,
        heartbeat_interval_us: u64,
        stabilization_interval_us: u64,
    ) {
        env.set_timer(heartbeat_interval_us, timer(TIMER_HEARTBEAT, 0));
        env.set_timer(stabilization_interval_us, timer(TIMER_STABILIZE, 0));
    }

    /// Work seen here or reported by a peer as of `at_us`; waking from idle
    /// restarts both timers at once ([`Pace::saw_work`]).
    pub fn saw_work<M, V: Versioned>(&mut self, env: &mut impl ServerEnv<M, V>, at_us: u64) {
        self.pace.saw_work(env, at_us, |e| [timer(TIMER_HEARTBEAT, e), timer(TIMER_STABILIZE, e)]);
    }

    /// A heartbeat or stabilization token set under an older epoch: a
    /// wake-up's timer superseded it.
    pub fn is_stale(&self, token: u64) -> bool {
        timer_arg(token) != self.pace.epoch()
    }

    /// The newest work this partition knows of, for its peers' pacing.
    pub fn last_work_us(&self) -> u64 {
        self.pace.last_work_us()
    }

    /// A Replicate went out to `peers` replicas.
    pub fn replicated(&mut self, peers: usize) {
        self.replicated_since_heartbeat |= peers > 0;
    }

    /// At a Δ tick: whether this tick sends a heartbeat (no Replicate since
    /// the previous tick). Starts the next Δ's count.
    pub fn heartbeat_due(&mut self) -> bool {
        !std::mem::take(&mut self.replicated_since_heartbeat)
    }

    /// Set the next Δ tick, slowed down while idle.
    pub fn rearm_heartbeat<M, V: Versioned>(&mut self, env: &mut impl ServerEnv<M, V>, heartbeat_interval_us: u64) {
        let after_us = self.pace.interval_us(heartbeat_interval_us, env.now_us());
        env.set_timer(after_us, timer(TIMER_HEARTBEAT, self.pace.epoch()));
    }

    /// Set the next θ tick, slowed down while idle.
    pub fn rearm_stabilize<M, V: Versioned>(&mut self, env: &mut impl ServerEnv<M, V>, stabilization_interval_us: u64) {
        let after_us = self.pace.interval_us(stabilization_interval_us, env.now_us());
        env.set_timer(after_us, timer(TIMER_STABILIZE, self.pace.epoch()));
    }
}

/// A version whose dependencies are a dense vector with one entry per DC
/// (Cure's and Contrarian's DV): visible in a DC once DV ≤ its stable
/// vector.
pub trait VectorVersion: Versioned + Clone {
    type Time: Ord + Copy + Debug;
    fn dv(&self) -> &[Self::Time];
    /// The timestamp its origin DC stamped it with (`dv[sr]`).
    fn ts(&self) -> Self::Time;
    /// Its origin DC.
    fn sr(&self) -> DcId;
}

/// `impl Versioned` — last-writer-wins by ⟨ts, sr⟩: a causally later write
/// has a higher `ts` — and [`VectorVersion`] for a stored version with
/// fields `value`, `ts`, `sr` and `dv`, its timestamps of type `$time`.
macro_rules! vector_version {
    ($ty:ty, $time:ty) => {
        $crate::impl_versioned!($ty, ($time, causeway_core::DcId) = (ts, sr));

        impl $crate::stabilization::partition::VectorVersion for $ty {
            type Time = $time;
            fn dv(&self) -> &[$time] {
                &self.dv
            }
            fn ts(&self) -> $time {
                self.ts
            }
            fn sr(&self) -> causeway_core::DcId {
                self.sr
            }
        }
    };
}
pub(crate) use vector_version;

/// Whether `v` belongs to the snapshot TV: DV ≤ TV ("an item belongs to
/// the snapshot encoded by TV if DV ≤ TV", Didona et al. §4; Akkoorath et
/// al. §4). `skip_remote` is the visibility mutant: only a local version's
/// timestamp is checked. On every read and every write's collection.
#[inline]
pub fn in_snapshot<V: VectorVersion>(v: &V, tv: &[V::Time], m: DcId, skip_remote: bool) -> bool {
    if skip_remote {
        return v.sr() != m || v.ts() <= tv[m.idx()];
    }
    let dv = v.dv();
    dv.len() == tv.len() && dv.iter().zip(tv).all(|(d, t)| d <= t)
}

/// A replicated version as Cure and Contrarian write it: one DV entry per
/// DC (`dcs`), `dv[sr] == ts`, every other entry strictly below.
pub fn well_formed<V: VectorVersion>(v: &V, dcs: usize) -> bool {
    let (dv, sr, ts) = (v.dv(), v.sr().idx(), v.ts());
    dv.len() == dcs && sr < dcs && dv[sr] == ts && dv.iter().enumerate().all(|(i, &d)| i == sr || d < ts)
}

/// The entries of `v` other than DC `m`'s, as (index, value).
pub fn remote_entries<T: Copy>(v: &[T], m: usize) -> impl Iterator<Item = (usize, T)> + '_ {
    v.iter().copied().enumerate().filter(move |&(i, _)| i != m)
}

/// Every entry of `v` except DC `m`'s is ≤ `vv`'s.
pub fn remote_covered<T: Ord>(v: &[T], vv: &[T], m: usize) -> bool {
    v.len() == vv.len() && v.iter().zip(vv).enumerate().all(|(i, (a, b))| i == m || a <= b)
}

/// Raise `stable`'s entries to `entries` where they are higher; true if
/// any grew. Only ever raised, entry by entry: the stable vector is
/// monotonic by construction, and no copy of it is needed to tell whether
/// it grew (this runs for every replicated version in a one-partition DC).
pub fn raise_entries<T: Ord + Copy>(stable: &mut [T], entries: impl IntoIterator<Item = (usize, T)>) -> bool {
    let mut grew = false;
    for (i, t) in entries {
        if let Some(e) = stable.get_mut(i)
            && t > *e
        {
            *e = t;
            grew = true;
        }
    }
    grew
}

/// In a DC of one partition, the stable vector's entry k (the entry-wise
/// minimum of the DC's VVs) is this partition's own VV[k]: the value to
/// raise it to when VV[k] moved past it, rather than θ later (the tree's
/// step computes the same value). A remote version whose DV is covered but
/// for its own DC's entry is then visible on arrival, where it was parked
/// for up to θ; the FIFO link has brought every earlier version of DC k, so
/// VV[k] covers its DV[k].
pub fn alone_raise<T: Ord + Copy>(tree: &StableTree<T>, vv: &[T], stable: &[T], k: usize) -> Option<T> {
    (tree.is_alone() && vv[k] > stable[k]).then_some(vv[k])
}

/// After the stable vector grew: the remote versions it no longer holds
/// back on the entry each was parked on. A version still above another
/// entry is parked again there; the rest are returned, in arrival order,
/// for the caller to report visible.
pub fn newly_visible<M, V: VectorVersion>(
    env: &mut impl ServerEnv<M, V>,
    pending: &mut PendingVisible<V::Time, V::Order>,
    stable: &[V::Time],
) -> Vec<(KeyIndex, V::Order)> {
    let unblocked = pending.unblocked(stable);
    let mut visible = Vec::new();
    for (at, &(index, order)) in unblocked.iter().enumerate() {
        env.store().warm_ahead(&unblocked, at);
        let Some(version) = env.store().exact_at(index, order) else { continue };
        let blocker = visibility::first_above(version.dv(), stable);
        visible.extend(pending.admit(blocker, index, order));
    }
    visible
}

/// Store a replicated version (noting its key for GC) and park it on the
/// first entry of `stable` its DV is above; returns it when nothing holds
/// it back, for the caller to report visible. A duplicate is neither.
pub fn land_remote<M, V: VectorVersion>(
    env: &mut impl ServerEnv<M, V>,
    gc: &mut VersionGc<Vec<V::Time>>,
    pending: &mut PendingVisible<V::Time, V::Order>,
    stable: &[V::Time],
    key: &[u8],
    version: V,
    gc_visible: impl Fn(&V, &Vec<V::Time>) -> bool,
) -> Option<(KeyIndex, V::Order)> {
    let order = version.order();
    let blocker = visibility::first_above(version.dv(), stable);
    let landed = gc.apply(env.store(), key, version, gc_visible);
    if landed.inserted == Inserted::Duplicate {
        return None;
    }
    pending.admit(blocker, landed.index, order)
}

/// Report the remote version at (`index`, `order`) visible if it is what a
/// local read returns now (`visible`, the read rule at the current stable
/// vector). Invariant: a remote version is visible only once its DV ≤
/// `stable`; `what` names the protocol and its stable vector in the panic.
#[allow(clippy::too_many_arguments)]
pub fn report_if_read<M, V: VectorVersion>(
    env: &mut impl ServerEnv<M, V>,
    index: KeyIndex,
    order: V::Order,
    origin: DcId,
    written_us: u64,
    stable: &[V::Time],
    what: &str,
    visible: impl FnMut(&V) -> bool,
) {
    if let Some(v) = env.store().exact_at(index, order) {
        assert!(
            v.dv().iter().zip(stable).all(|(d, g)| d <= g),
            "{what}: version {order:?} reported visible with DV {:?} above {stable:?}",
            v.dv(),
        );
    }
    visibility::report_if_read(env, index, order, origin, written_us, visible);
}

/// Whether `key` belongs to `partition`, the partition this server of DC
/// `m` stores; a request naming another's key is refused.
pub fn check_key(topology: &Topology, partition: PartitionId, m: DcId, key: &[u8]) -> Result<(), OpError> {
    if topology.partition_of(key) == partition {
        Ok(())
    } else {
        Err(OpError::BadRequest(format!("key not stored at this server ({partition:?} of {m:?})")))
    }
}

/// [`check_key`] for every key of a read, which must name at least one.
pub fn check_keys(topology: &Topology, partition: PartitionId, m: DcId, keys: &[Key]) -> Result<(), OpError> {
    if keys.is_empty() {
        return Err(OpError::BadRequest("a read names no key".into()));
    }
    keys.iter().try_for_each(|k| check_key(topology, partition, m, k))
}

/// A stabilization tick's GC step: [`VersionGc::collect`] on a bounded
/// number of keys below the horizon of `stable` (the newest stable vector
/// at least `grace_us` old), then the horizon it reached if that is new
/// ([`VersionGc::horizon_to_journal`]), for the protocol to journal as its
/// metadata in this same turn: a restart resumes its stable vector there.
/// The protocols write it unsynced: a checkpoint cut at it carries it in
/// its own synced copy of the metadata, and until then the log still holds
/// every version collection dropped from memory.
pub fn collect_garbage<'gc, V: Versioned + Clone, S: Clone + PartialEq>(
    gc: &'gc mut VersionGc<S>,
    store: &mut MvStore<V>,
    now_us: u64,
    stable: &S,
    grace_us: u64,
    visible: impl Fn(&V, &S) -> bool,
) -> Option<&'gc S> {
    gc.collect(store, now_us, stable, grace_us, visible);
    gc.horizon_to_journal()
}

/// Every stored version, key by key in key order, oldest first: the scan
/// with which a restarted partition rebuilds its clock and vectors.
/// Returns how many keys the store holds.
pub fn for_each_stored<M, V: Versioned + Clone>(env: &mut impl ServerEnv<M, V>, mut f: impl FnMut(&V)) -> usize {
    let keys = env.store().keys_sorted();
    for k in &keys {
        env.store().versions(k).iter().for_each(&mut f);
    }
    keys.len()
}
