//! Collection of superseded versions, shared by the protocols that read
//! snapshots at a stable vector (CausalSpartanX's DSV, Cure's GST vector,
//! Contrarian's GSS). Every snapshot a read can ask for is at or above the
//! stable vector as it was some time ago, so of a key's versions inside that
//! *horizon* only the newest can still be read: the older ones go. The
//! horizon is the newest recorded stable vector at least `gc_grace_us` old
//! (the grace covers reads whose snapshot was chosen before then and are
//! still gathering slices). Which versions lie inside a snapshot is the
//! protocol's own rule, passed in as `visible`.
//!
//! Only keys with more than one version are looked at, a bounded number per
//! tick, oldest first, so a tick costs O([`GC_KEYS_PER_TICK`]) whatever the
//! store holds.

use causeway_core::{Inserted, Key, MvStore, Versioned};
use rustc_hash::FxHashSet;
use std::collections::VecDeque;

/// Keys GC examines per tick at most.
pub const GC_KEYS_PER_TICK: usize = 64;

#[derive(Debug)]
pub struct VersionGc<S> {
    /// `(local µs, stable vector then)`, oldest first, one entry per tick in
    /// which it changed. Once any entry is `gc_grace_us` old, the front is
    /// the newest such entry: the horizon.
    history: VecDeque<(u64, S)>,
    /// The largest `now_us` seen, so the history stays sorted when the clock
    /// steps back. A step back pauses GC; it cannot make it early.
    clock_us: u64,
    /// Keys that had more than one version when last written, oldest first.
    dirty: VecDeque<Key>,
    /// Membership only (the order is `dirty`'s): a hash set, since an
    /// ordered one compares whole keys on every write.
    dirty_set: FxHashSet<Key>,
}

impl<S> Default for VersionGc<S> {
    fn default() -> Self {
        VersionGc { history: VecDeque::new(), clock_us: 0, dirty: VecDeque::new(), dirty_set: FxHashSet::default() }
    }
}

impl<S: Clone + PartialEq> VersionGc<S> {
    /// Insert into the store and note the key if it now has versions to
    /// collect.
    pub fn apply<V: Versioned + Clone>(&mut self, store: &mut MvStore<V>, key: Key, version: V) -> Inserted {
        let inserted = store.insert(key.clone(), version);
        if inserted != Inserted::Duplicate && store.versions(&key).len() > 1 && self.dirty_set.insert(key.clone()) {
            self.dirty.push_back(key);
        }
        inserted
    }

    /// Record `stable` as of `now_us`; then, on at most
    /// [`GC_KEYS_PER_TICK`] keys, drop the versions older than the newest
    /// one `visible` at the horizon.
    pub fn collect<V: Versioned + Clone>(
        &mut self,
        store: &mut MvStore<V>,
        now_us: u64,
        stable: &S,
        grace_us: u64,
        visible: impl Fn(&V, &S) -> bool,
    ) {
        self.clock_us = self.clock_us.max(now_us);
        let now_us = self.clock_us;
        match self.history.back_mut() {
            Some((at_us, s)) if *at_us == now_us => s.clone_from(stable),
            Some((_, s)) if s == stable => {}
            _ => self.history.push_back((now_us, stable.clone())),
        }
        let Some(h) = self.history.iter().rposition(|(at_us, _)| at_us.saturating_add(grace_us) <= now_us) else {
            return;
        };
        self.history.drain(..h);
        let horizon = &self.history[0].1;
        for _ in 0..GC_KEYS_PER_TICK.min(self.dirty.len()) {
            let Some(key) = self.dirty.pop_front() else { break };
            store.gc_key(&key, |v| visible(v, horizon));
            if store.versions(&key).len() > 1 {
                self.dirty.push_back(key);
            } else {
                self.dirty_set.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[derive(Clone, Debug, PartialEq)]
    struct V(u64, causeway_core::Value);

    impl Versioned for V {
        type Order = u64;
        fn order(&self) -> u64 {
            self.0
        }
        fn value(&self) -> &causeway_core::Value {
            &self.1
        }
    }

    fn v(t: u64) -> V {
        V(t, Bytes::from_static(b"x"))
    }

    /// Versions inside the horizon but older than its newest go once the
    /// horizon is `grace_us` old; newer ones and the newest inside stay.
    #[test]
    fn collects_below_the_horizon_after_the_grace() {
        let mut store = MvStore::default();
        let mut gc = VersionGc::<u64>::default();
        let k = Bytes::from_static(b"k");
        for t in [1, 2, 3, 5] {
            gc.apply(&mut store, k.clone(), v(t));
        }
        let visible = |x: &V, s: &u64| x.0 <= *s;
        gc.collect(&mut store, 1_000, &3, 500, visible);
        assert_eq!(store.versions(&k).len(), 4, "nothing is collected before the grace");
        gc.collect(&mut store, 1_600, &5, 500, visible);
        let left: Vec<u64> = store.versions(&k).iter().map(|x| x.0).collect();
        assert_eq!(left, vec![3, 5], "horizon 3: the newest inside it and everything newer stay");
        gc.collect(&mut store, 2_200, &5, 500, visible);
        assert_eq!(store.versions(&k).len(), 1);
        assert!(gc.dirty.is_empty() && gc.dirty_set.is_empty(), "a key with one version is no longer dirty");
    }

    /// A clock that steps back does not reorder the history or collect early.
    #[test]
    fn a_clock_step_back_pauses_collection() {
        let mut store = MvStore::default();
        let mut gc = VersionGc::<u64>::default();
        let k = Bytes::from_static(b"k");
        gc.apply(&mut store, k.clone(), v(1));
        gc.apply(&mut store, k.clone(), v(2));
        let visible = |x: &V, s: &u64| x.0 <= *s;
        gc.collect(&mut store, 1_000, &2, 500, visible);
        gc.collect(&mut store, 100, &2, 500, visible);
        assert_eq!(store.versions(&k).len(), 2);
    }
}
