//! Collection of superseded versions, shared by the protocols that read
//! snapshots at a stable time or vector (GentleRain's GST, CausalSpartanX's
//! DSV, Cure's GST vector, Contrarian's GSS). Every snapshot a read can ask
//! for is at or above the stable vector as it was some time ago, so of a
//! key's versions inside that *horizon* only the newest can still be read:
//! the older ones go. The horizon is the newest recorded stable vector at
//! least `gc_grace_us` old (the grace covers reads whose snapshot was chosen
//! before then and are still gathering slices). Which versions lie inside a
//! snapshot is the protocol's own rule, passed in as `visible`.
//!
//! A write collects its own key as it lands, so a key holds at most the
//! newest version inside the horizon and those written since: however fast
//! it is written, its chain stays as long as its last `gc_grace_us` or so of
//! writes. The periodic pass is for keys that went quiet with more than one
//! version: it looks at [`GC_KEYS_PER_TICK`] of them a tick, oldest first,
//! and only those queued before the horizon was recorded (a later one has
//! nothing the horizon can collect yet) and at least `quiet_us` ago, so a
//! tick costs O([`GC_KEYS_PER_TICK`]) whatever the store holds. A key
//! written again since it was queued is not looked at: its write collected
//! it, and it goes back in the queue. The pass reads the store only for
//! keys that went quiet, which is what it is for; under a steady write load
//! that visited every key about once per `gc_grace_us`, a cache miss into
//! the store each (6.5 % of a node's thread at about 290 000 pipelined
//! writes a second). `quiet_us` is how long "quiet" is: a key written every
//! few seconds (DKVF's configuration writes each of its 100 000 keys about
//! every 3 s) is collected by its own writes for free, where a pass that
//! visited it a grace after each write cost a cache miss per write (6 % of
//! the replica's thread). The price is memory: a key that goes quiet keeps
//! one superseded version up to `quiet_us` longer.

use causeway_core::{Inserted, KeyIndex, Landed, MvStore, Versioned};
use std::collections::VecDeque;

/// The default `gc_grace_us` of every protocol here: 200 ms. The grace
/// covers the reads whose snapshot a coordinator of this DC chose before
/// they reach this partition: every protocol of the family replicates fully
/// and reads only in its own DC, so that is one hop inside the DC (a
/// server-coordinated ROT), or a client's round trip and one (Cure's and
/// Contrarian's two-round ROT), well under a millisecond on a LAN. A read
/// that still comes later finds the key's older versions gone and aborts
/// (`snapshot pruned`), as one did past 1 s before. Every version a write
/// supersedes is kept for the grace, so its length is memory: with 1 s, a
/// store written at about 120 000 SETs a second over 100 000 keys held 3.2
/// versions a key (`store_versions` 326 000), and the kernel's zeroing of
/// the fresh pages that took was 7–9 % of a benchmark's CPU.
pub const DEFAULT_GC_GRACE_US: u64 = 200_000;

/// Keys GC examines per tick at most. At θ = 5 ms this is about 200 000
/// keys a second, above one node's write rate, so the pass keeps up with
/// the keys a workload leaves behind; a tick's pass stays well under a
/// millisecond. (It was 64, 12 800 keys a second: under DKVF's configuration
/// at 30 000 writes a second the queue only grew, and nearly every key held
/// two versions: 200 000 versions for 100 000 keys, 150 000–175 000 now.)
pub const GC_KEYS_PER_TICK: usize = 1024;

#[derive(Debug)]
pub struct VersionGc<S> {
    /// `(local µs, stable vector then)`, oldest first, one entry per tick in
    /// which it changed. Once any entry is `gc_grace_us` old, the front is
    /// the newest such entry: the horizon.
    history: VecDeque<(u64, S)>,
    /// The largest `now_us` seen, so the history stays sorted when the clock
    /// steps back. A step back pauses GC; it cannot make it early.
    clock_us: u64,
    /// Keys that had more than one version when last written, with when
    /// they were queued (by `clock_us`), oldest first. By the store's
    /// [`KeyIndex`], not the key: queueing and visiting then hash and
    /// compare no key bytes (the store's lookup on the write already did).
    dirty: VecDeque<(u64, KeyIndex)>,
    /// Whether the front of `history` is a horizon yet (some entry has
    /// been `gc_grace_us` old).
    has_horizon: bool,
    /// How long a key waits in `dirty` before the pass looks at it.
    quiet_us: u64,
    /// The horizon as the protocol last journaled it, or resumed it after a
    /// restart ([`VersionGc::horizon_to_journal`]).
    journaled: Option<S>,
}

/// Per key, whether it is in `dirty` and when it was last written: kept in
/// the store's word for the key ([`MvStore::mark_at`]), next to the
/// versions a write has just touched. (A table of its own here, indexed by
/// [`KeyIndex::get`], was a cache miss per write: 88 % of `apply`'s time on
/// a replica.)
#[derive(Clone, Copy, Debug)]
struct KeyState {
    /// By `clock_us`.
    written_us: u64,
    queued: bool,
}

impl KeyState {
    /// From the store's word for the key: `written_us` above, `queued` in
    /// the low bit. A µs clock needs 63 bits for some 146 000 years.
    fn of(mark: u64) -> Self {
        KeyState { written_us: mark >> 1, queued: mark & 1 == 1 }
    }

    fn mark(self) -> u64 {
        debug_assert!(self.written_us < 1 << 63, "a µs clock past 63 bits");
        self.written_us << 1 | u64::from(self.queued)
    }
}

impl<S> Default for VersionGc<S> {
    /// A GC whose pass looks at a key as soon as the horizon allows.
    fn default() -> Self {
        Self::new(0)
    }
}

impl<S> VersionGc<S> {
    /// A GC whose pass looks at a key only once it has been queued for
    /// `quiet_us` (see the module doc).
    pub fn new(quiet_us: u64) -> Self {
        VersionGc {
            history: VecDeque::new(),
            clock_us: 0,
            dirty: VecDeque::new(),
            has_horizon: false,
            quiet_us,
            journaled: None,
        }
    }
}

impl<S: Clone + PartialEq> VersionGc<S> {
    /// Insert into the store, dropping the key's versions older than the
    /// newest one `visible` at the current horizon (so a key written faster
    /// than the periodic pass reaches it holds no more versions than its
    /// last `gc_grace_us` of writes), and note the key if it still has
    /// versions to collect. Returns where the version landed, whose index
    /// lets the caller come back to the key without hashing it.
    pub fn apply<V: Versioned + Clone>(
        &mut self,
        store: &mut MvStore<V>,
        key: &[u8],
        version: V,
        visible: impl Fn(&V, &S) -> bool,
    ) -> Landed {
        let landed = match self.horizon() {
            Some(h) => store.insert_collecting(key, version, |v| visible(v, h)),
            None => store.insert_collecting(key, version, |_| false),
        };
        if landed.inserted != Inserted::Duplicate {
            let mark = store.mark_at(landed.index).expect("the key just written");
            let mut state = KeyState::of(*mark);
            state.written_us = self.clock_us;
            if landed.left > 1 && !state.queued {
                state.queued = true;
                self.dirty.push_back((self.clock_us, landed.index));
            }
            *mark = state.mark();
        }
        landed
    }

    /// Where a snapshot may cut each key's versions
    /// ([`causeway_core::Server::snapshot_floor`]): at the newest one
    /// `visible` at the horizon as it stands, which is where this
    /// collection cuts too. A key that went quiet keeps a superseded
    /// version in the store until the pass reaches it (`quiet_us`); a
    /// checkpoint need not copy it. `None` until there is a horizon.
    pub fn snapshot_floor<V: 'static>(
        &self,
        visible: impl Fn(&V, &S) -> bool + Send + 'static,
    ) -> Option<causeway_core::SnapshotFloor<V>>
    where
        S: Send + 'static,
    {
        let horizon = self.horizon()?.clone();
        Some(causeway_core::SnapshotFloor::at_newest(move |v| visible(v, &horizon)))
    }

    /// A horizon this collection reached since the protocol last journaled
    /// one, now to be journaled (it is recorded as journaled). A protocol
    /// journals its horizon as the store's metadata and, after a restart,
    /// resumes its stable vector there ([`VersionGc::resume_journaled`]).
    pub fn horizon_to_journal(&mut self) -> Option<&S> {
        let h = self.horizon().filter(|&h| Some(h) != self.journaled.as_ref())?.clone();
        self.journaled = Some(h);
        self.journaled.as_ref()
    }

    /// The horizon last journaled (or resumed), for a protocol rewriting
    /// its metadata for another reason.
    pub fn journaled(&self) -> Option<&S> {
        self.journaled.as_ref()
    }

    /// After a restart: `h` is the journaled horizon, which the protocol's
    /// stable vector has resumed at; it stays journaled until collection
    /// reaches a newer one.
    pub fn resume_journaled(&mut self, h: S) {
        self.journaled = Some(h);
    }

    /// The stable vector every read's snapshot is at or above: the newest
    /// recorded one at least `gc_grace_us` old, once [`VersionGc::collect`]
    /// has found one. What this collection (and a checkpoint cut at
    /// [`VersionGc::snapshot_floor`]) dropped is below it, so a protocol
    /// journals it and, after a restart, resumes its stable vector at or
    /// above it: a snapshot below it could find a key's versions gone.
    pub fn horizon(&self) -> Option<&S> {
        if self.has_horizon { self.history.front().map(|(_, s)| s) } else { None }
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
        self.has_horizon = true;
        let (horizon_us, horizon) = (self.history[0].0, &self.history[0].1);
        // A key queued after the horizon was recorded holds nothing the
        // horizon can collect: its newest version inside the horizon is the
        // one it had before, since the stable vectors of these protocols
        // cover only versions a node has already received (a version
        // written later lies outside). So the pass stops at the first such
        // key rather than visit it in vain; the queue is in time order, and
        // while the stable vector stands still there is nothing newer to
        // collect anyway.
        // A key queued less than `quiet_us` ago waits too (and so does
        // every key behind it).
        for _ in 0..GC_KEYS_PER_TICK {
            match self.dirty.front() {
                Some(&(queued_us, _))
                    if queued_us <= horizon_us && queued_us.saturating_add(self.quiet_us) <= now_us => {}
                _ => break,
            }
            let Some((queued_us, index)) = self.dirty.pop_front() else { break };
            let Some(&mut mark) = store.mark_at(index) else { continue };
            // Written since it was queued: that write collected the key at
            // its own horizon. Collecting it again now would cost time for
            // little more; it stays queued, and is collected once it has
            // gone quiet.
            if KeyState::of(mark).written_us > queued_us {
                self.dirty.push_back((now_us, index));
                continue;
            }
            if store.gc_at(index, |v| visible(v, horizon)).1 > 1 {
                self.dirty.push_back((now_us, index));
            } else if let Some(mark) = store.mark_at(index) {
                *mark = KeyState { queued: false, ..KeyState::of(*mark) }.mark();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use causeway_core::Key;

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

    /// A version is inside a snapshot `s` when its order is at most `s`.
    fn visible(x: &V, s: &u64) -> bool {
        x.0 <= *s
    }

    /// An empty store, its GC and the one key the tests write.
    fn fixture() -> (MvStore<V>, VersionGc<u64>, Key) {
        (MvStore::default(), VersionGc::default(), Bytes::from_static(b"k"))
    }

    /// Whether no key of `store` is queued, by the marks of the keys at
    /// `indices` (`KeyIndex` is dense from 0, but only the store makes one).
    fn none_queued(store: &mut MvStore<V>, indices: &[KeyIndex]) -> bool {
        indices.iter().all(|&i| !KeyState::of(*store.mark_at(i).unwrap()).queued)
    }

    fn orders(store: &MvStore<V>, k: &Key) -> Vec<u64> {
        store.versions(k).iter().map(|x| x.0).collect()
    }

    /// Versions inside the horizon but older than its newest go once the
    /// horizon is `grace_us` old; newer ones and the newest inside stay.
    #[test]
    fn collects_below_the_horizon_after_the_grace() {
        let (mut store, mut gc, k) = fixture();
        let at = gc.apply(&mut store, &k, v(1), visible).index;
        for t in [2, 3, 5] {
            gc.apply(&mut store, &k, v(t), visible);
        }
        gc.collect(&mut store, 1_000, &3, 500, visible);
        assert_eq!(store.versions(&k).len(), 4, "nothing is collected before the grace");
        gc.collect(&mut store, 1_600, &5, 500, visible);
        assert_eq!(orders(&store, &k), vec![3, 5], "horizon 3: the newest inside it and everything newer stay");
        gc.collect(&mut store, 2_200, &5, 500, visible);
        assert_eq!(store.versions(&k).len(), 1);
        assert!(gc.dirty.is_empty() && none_queued(&mut store, &[at]), "a key with one version is no longer dirty");
    }

    /// Each key is queued once however often it is written while queued,
    /// and the pass finds every queued key again by its index.
    #[test]
    fn a_key_is_queued_once_and_the_pass_reaches_each() {
        let (mut store, mut gc, a) = fixture();
        let b = Bytes::from_static(b"b");
        let mut at = Vec::new();
        for t in [1, 2, 3] {
            at = vec![gc.apply(&mut store, &a, v(t), visible).index, gc.apply(&mut store, &b, v(t), visible).index];
        }
        assert_eq!(gc.dirty.len(), 2, "one entry per key");
        gc.collect(&mut store, 1_000, &3, 500, visible);
        gc.collect(&mut store, 1_600, &3, 500, visible);
        assert_eq!((orders(&store, &a), orders(&store, &b)), (vec![3], vec![3]));
        assert!(gc.dirty.is_empty() && none_queued(&mut store, &at));
        gc.apply(&mut store, &b, v(4), visible);
        assert_eq!(gc.dirty.iter().map(|d| d.1.get()).collect::<Vec<_>>(), vec![1], "b queued again, by its index");
    }

    /// The pass does not read the store for a key written again since it
    /// was queued (the write collected it then), but keeps it queued, and
    /// collects it once it has gone quiet.
    #[test]
    fn the_pass_skips_a_key_written_since_it_was_queued() {
        let (mut store, mut gc, k) = fixture();
        let at = gc.apply(&mut store, &k, v(1), visible).index;
        gc.apply(&mut store, &k, v(2), visible);
        gc.collect(&mut store, 1_000, &2, 500, visible);
        // Written at 1 000 µs; queued at 0. No horizon yet, so this write
        // collected nothing.
        gc.apply(&mut store, &k, v(3), visible);
        gc.collect(&mut store, 1_600, &3, 500, visible);
        assert_eq!(orders(&store, &k), vec![1, 2, 3], "horizon 2 would drop 1, but the key was written since");
        assert_eq!(gc.dirty.iter().map(|d| d.0).collect::<Vec<_>>(), vec![1_600], "queued again");
        gc.collect(&mut store, 2_200, &3, 500, visible);
        assert_eq!(orders(&store, &k), vec![3], "quiet since: collected at horizon 3");
        assert!(gc.dirty.is_empty() && none_queued(&mut store, &[at]));
    }

    /// A clock that steps back does not reorder the history or collect early.
    #[test]
    fn a_clock_step_back_pauses_collection() {
        let (mut store, mut gc, k) = fixture();
        gc.apply(&mut store, &k, v(1), visible);
        gc.apply(&mut store, &k, v(2), visible);
        gc.collect(&mut store, 1_000, &2, 500, visible);
        gc.collect(&mut store, 100, &2, 500, visible);
        assert_eq!(store.versions(&k).len(), 2);
    }

    /// Once there is a horizon, a write collects its own key: a key
    /// rewritten faster than the periodic pass visits it keeps only the
    /// newest version inside the horizon and the ones above it.
    #[test]
    fn a_write_collects_its_key_below_the_horizon() {
        let (mut store, mut gc, k) = fixture();
        let at = gc.apply(&mut store, &k, v(1), visible).index;
        for t in 2..=10 {
            gc.apply(&mut store, &k, v(t), visible);
        }
        assert_eq!(store.versions(&k).len(), 10, "no horizon yet: every version stays");
        // A horizon of 8 (recorded at 0 µs, 500 µs grace), with no keys
        // visited by the pass.
        gc.collect(&mut store, 0, &8, 500, visible);
        gc.dirty.clear();
        *store.mark_at(at).unwrap() = 0;
        gc.collect(&mut store, 600, &20, 500, visible);
        assert_eq!(store.versions(&k).len(), 10, "the pass had no key to visit");
        gc.apply(&mut store, &k, v(11), visible);
        assert_eq!(orders(&store, &k), vec![8, 9, 10, 11], "the newest inside the horizon and everything newer stay");
        assert!(store.was_pruned(&k));
    }

    /// With `quiet_us`, the pass leaves a key alone until it has been
    /// queued that long, then collects it; a write in between sends it
    /// back to wait again.
    #[test]
    fn the_pass_waits_until_a_key_has_been_quiet() {
        let (mut store, _, k) = fixture();
        let mut gc: VersionGc<u64> = VersionGc::new(5_000);
        for t in [1, 2] {
            gc.apply(&mut store, &k, v(t), visible);
        }
        gc.collect(&mut store, 1_000, &2, 500, visible);
        gc.collect(&mut store, 1_600, &2, 500, visible);
        assert_eq!(orders(&store, &k), vec![1, 2], "inside the horizon, but queued only 1 600 us ago");
        gc.collect(&mut store, 4_999, &2, 500, visible);
        assert_eq!(store.versions(&k).len(), 2, "still under 5 000 us");
        gc.collect(&mut store, 5_000, &2, 500, visible);
        assert_eq!(orders(&store, &k), vec![2], "quiet for 5 000 us: collected");
        assert!(gc.dirty.is_empty());
        // Written again (queued at 5 000), and again at 9 000, which sends
        // it back to wait from when the pass finds it written (11 000).
        gc.apply(&mut store, &k, v(3), visible);
        gc.collect(&mut store, 6_000, &3, 500, visible);
        gc.collect(&mut store, 9_000, &3, 500, visible);
        gc.apply(&mut store, &k, v(4), visible);
        gc.collect(&mut store, 11_000, &4, 500, visible);
        assert_eq!(gc.dirty.iter().map(|d| d.0).collect::<Vec<_>>(), vec![11_000], "written since: queued again");
        assert_eq!(orders(&store, &k), vec![3, 4], "the write at 9 000 collected 2");
        gc.collect(&mut store, 15_999, &4, 500, visible);
        assert_eq!(store.versions(&k).len(), 2);
        gc.collect(&mut store, 16_000, &4, 500, visible);
        assert_eq!(orders(&store, &k), vec![4]);
    }

    /// A snapshot's floor is the collection's own cut: none before there is
    /// a horizon; then, of a quiet key the pass has not reached, it holds of
    /// the newest version inside the horizon, so a checkpoint leaves out
    /// exactly what the pass later drops.
    #[test]
    fn a_snapshots_floor_cuts_where_the_pass_will() {
        let (mut store, _, k) = fixture();
        let mut gc: VersionGc<u64> = VersionGc::new(5_000);
        for t in [1, 2, 3, 4] {
            gc.apply(&mut store, &k, v(t), visible);
        }
        assert!(gc.snapshot_floor(visible).is_none(), "no horizon yet");
        gc.collect(&mut store, 1_000, &2, 500, visible);
        gc.collect(&mut store, 1_600, &2, 500, visible);
        assert_eq!(orders(&store, &k), vec![1, 2, 3, 4], "quiet for less than 5 000 us: not collected yet");
        let floor = gc.snapshot_floor(visible).expect("a horizon (2, recorded at 1 000)");
        let cut = floor.cut(store.versions(&k));
        let copied: Vec<u64> = store.versions(&k)[cut..].iter().map(|x| x.0).collect();
        assert_eq!(copied, vec![2, 3, 4]);
        gc.collect(&mut store, 6_000, &2, 500, visible);
        assert_eq!(orders(&store, &k), copied, "the pass, once the key is quiet, cuts at the same version");
    }

    /// A horizon is handed out to journal once, when reached; one resumed
    /// after a restart stays journaled until collection reaches a newer
    /// one, even while collection has no horizon of its own yet.
    #[test]
    fn each_horizon_is_journaled_once_and_a_resumed_one_is_kept() {
        let (mut store, _, _) = fixture();
        let mut gc: VersionGc<u64> = VersionGc::new(5_000);
        gc.resume_journaled(1);
        gc.collect(&mut store, 1_000, &2, 500, visible);
        assert_eq!(gc.horizon_to_journal(), None, "no horizon yet");
        assert_eq!(gc.journaled(), Some(&1), "the resumed horizon is still the journaled one");
        gc.collect(&mut store, 1_600, &3, 500, visible);
        assert_eq!(gc.horizon_to_journal(), Some(&2));
        assert_eq!(gc.horizon_to_journal(), None, "journaled once");
        assert_eq!(gc.journaled(), Some(&2));
    }

    /// The pass leaves alone a key queued after the horizon was recorded
    /// (it would find nothing to collect), and visits it once a later
    /// horizon is.
    #[test]
    fn the_pass_waits_for_a_horizon_newer_than_the_key() {
        let (mut store, mut gc, k) = fixture();
        gc.collect(&mut store, 0, &1, 500, visible);
        gc.collect(&mut store, 100, &2, 500, visible);
        for t in [1, 2] {
            gc.apply(&mut store, &k, v(t), visible);
        }
        gc.collect(&mut store, 550, &2, 500, visible);
        assert_eq!(gc.dirty.front().map(|d| d.0), Some(100), "queued at 100, after the horizon (recorded at 0)");
        assert_eq!(store.versions(&k).len(), 2);
        gc.collect(&mut store, 700, &2, 500, visible);
        assert_eq!(store.versions(&k).len(), 1, "the horizon recorded at 100 collects the key");
        assert!(gc.dirty.is_empty());
    }
}
