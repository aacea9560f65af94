//! The multi-version store every protocol reads and writes through its
//! environment: per key, a chain of versions in last-writer-wins order.
//!
//! The store knows nothing about visibility; protocols pass predicates
//! ("latest version whose dependencies are stable"). It does know how to
//! forget: [`MvStore::gc_key`] drops versions older than the newest one every
//! reader can see, and remembers that it did, so a read that would have
//! needed a dropped version can tell "pruned" from "never existed".
//!
//! It can also *freeze*: hand out a copy of itself as it stood at one
//! moment, encoded by the caller's encoder and made a slice at a time while
//! it keeps changing ([`MvStore::begin_freeze`]), so a snapshot never stops
//! the node that owns the store for longer than one slice.

use crate::data::{Key, Value};
use crate::store_key::StoreKey;
use indexmap::IndexMap;
use rustc_hash::FxBuildHasher;
use std::collections::BTreeSet;
use std::fmt::Debug;

/// What the store needs from a protocol's version type.
pub trait Versioned {
    /// The version's place in its key's last-writer-wins order. Unique per key
    /// (protocols break timestamp ties on a DC or node id).
    type Order: Ord + Copy + Debug + Send + Sync;
    fn order(&self) -> Self::Order;
    /// The value the version carries.
    fn value(&self) -> &Value;
}

#[derive(Debug)]
struct Chain<V> {
    /// Ascending by `order()`.
    versions: Vec<V>,
    /// Set once GC dropped anything from this chain.
    pruned: bool,
    /// The last freeze that copied this chain, or the freeze under way
    /// when the chain was created (which it is not part of).
    frozen: u64,
    /// The caller's word for this key ([`MvStore::mark_at`]).
    mark: u64,
}

impl<V> Chain<V> {
    fn new(frozen: u64) -> Self {
        Chain { versions: Vec::new(), pruned: false, frozen, mark: 0 }
    }
}

impl<V: Versioned> Chain<V> {
    /// Room for one more version, growing by half rather than doubling.
    /// A protocol that keeps superseded versions for a while (Eiger holds
    /// them `trans_time`, 5 s) grows most chains well past a few versions,
    /// and `Vec`'s doubling (4, 8, 16 slots) left about a quarter of that
    /// memory unused, fresh pages the kernel zeroed on the node's thread
    /// (Eiger's resident memory after a 4 s run of overwrites: 338 MB
    /// doubling, 315 MB growing by half). The allocator's size classes
    /// often leave room to grow in place.
    fn make_room(&mut self) {
        let len = self.versions.len();
        if len == self.versions.capacity() {
            self.versions.reserve_exact((len / 2).max(1));
        }
    }

    /// Drop every version older than the newest one satisfying `stable`,
    /// each handed to `dropped`; returns how many went and their value bytes.
    fn drop_below_newest(&mut self, stable: impl FnMut(&V) -> bool, mut dropped: impl FnMut(V)) -> (usize, usize) {
        let Some(keep_from) = self.versions.iter().rposition(stable) else { return (0, 0) };
        if keep_from == 0 {
            return (0, 0);
        }
        let mut freed = 0;
        for v in self.versions.drain(..keep_from) {
            freed += v.value().len();
            dropped(v);
        }
        self.pruned = true;
        (keep_from, freed)
    }
}

/// Versions rewritten in place since the journal was last taken and then
/// dropped, kept for the log.
///
/// The journal names versions by place and the log writes them as they
/// stand when it is taken, so a version dropped before then is not
/// logged. That is right for one stored in the same turn (no record of it
/// exists), but not for one the turn *replaced*: its older record is
/// already in the log, and a replay would give it back in that older state
/// — a pending write or an undecided transaction that the turn had decided
/// — where collection's other drops come back as they last stood. So a
/// replaced version's last state is logged even when collection takes it
/// in the same turn (collection itself is not logged: a replay returns the
/// version, as it returns every collected one).
#[derive(Debug)]
struct Rewrites<V: Versioned> {
    /// (key index, order) of each version replaced this turn.
    replaced: BTreeSet<(usize, V::Order)>,
    /// Of those, the ones dropped since, as they last stood.
    dropped: Vec<(usize, V)>,
    /// The previous `dropped`, which the journal taken last is written with.
    logging: Vec<(usize, V)>,
}

impl<V: Versioned> Default for Rewrites<V> {
    fn default() -> Self {
        Rewrites { replaced: BTreeSet::new(), dropped: Vec::new(), logging: Vec::new() }
    }
}

impl<V: Versioned> Rewrites<V> {
    /// Whether `v`, of the key at `index`, must be kept if it is dropped.
    fn wanted(&self, index: usize, v: &V) -> bool {
        !self.replaced.is_empty() && self.replaced.contains(&(index, v.order()))
    }

    /// `v`, of the key at `index`, leaves the store.
    fn dropped(&mut self, index: usize, v: V) {
        if self.wanted(index, &v) {
            self.dropped.push((index, v));
        }
    }

    /// The journal is taken: this turn's dropped rewrites are what its log
    /// writer reads.
    fn taken(&mut self) {
        self.replaced.clear();
        self.logging.clear();
        std::mem::swap(&mut self.logging, &mut self.dropped);
    }

    fn logged(&self, index: usize, order: V::Order) -> Option<&V> {
        self.logging.iter().find(|(i, v)| *i == index && v.order() == order).map(|(_, v)| v)
    }
}

/// How a freeze copies a chain: it appends what a snapshot needs of
/// `key`'s versions (oldest first) to `out`, in the snapshot's own format.
/// Encoding as it copies means the copy shares nothing with the store: a
/// clone of each version touched every value's reference count (and the
/// first clone of a value allocated one), and the copies were freed on the
/// snapshot thread.
pub type FreezeEncoder<V> = fn(key: &[u8], versions: &[V], out: &mut Vec<u8>);

/// Given a chain of more than one version (oldest first), the index of the
/// oldest version a snapshot keeps: 0 keeps them all.
type ChainCut<V> = Box<dyn Fn(&[V]) -> usize + Send>;

/// Where a freeze may cut a key's versions ([`crate::Server::snapshot_floor`]).
/// The copy keeps the version the cut names and the newer ones; the older
/// ones are garbage the protocol's collection has not reached yet, or
/// would not need after a restart.
pub struct SnapshotFloor<V> {
    cut: ChainCut<V>,
    /// Applied to a copy of the version a cut leaves oldest, before it is
    /// encoded: a protocol whose reads may still ask for what was cut
    /// records there that it is gone.
    mark: Option<fn(&mut V)>,
}

impl<V: 'static> SnapshotFloor<V> {
    /// Cut below the newest version `holds` of: the newest version every
    /// read can still ask for at the oldest (a stabilization protocol's
    /// horizon). A chain it holds of nowhere is copied whole.
    pub fn at_newest(holds: impl Fn(&V) -> bool + Send + 'static) -> Self {
        SnapshotFloor { cut: Box::new(move |vs: &[V]| vs.iter().rposition(&holds).unwrap_or(0)), mark: None }
    }

    /// Cut where `cut` says, and `mark` the copy of the version left oldest
    /// by a cut: for a protocol whose reads may ask for any time and must
    /// learn, after a restart from the snapshot, that the versions before
    /// that one are gone (Eiger's read-only transactions).
    pub fn marked(cut: impl Fn(&[V]) -> usize + Send + 'static, mark: fn(&mut V)) -> Self {
        SnapshotFloor { cut: Box::new(cut), mark: Some(mark) }
    }
}

impl<V: Clone> SnapshotFloor<V> {
    /// The versions of a chain (oldest first) a snapshot cut here keeps,
    /// as it keeps them (the oldest one marked if the cut left any out):
    /// what a node restarted from that snapshot holds of the key.
    pub fn kept(&self, versions: &[V]) -> Vec<V> {
        let from = self.cut(versions);
        let mut kept = versions[from..].to_vec();
        if let (Some(mark), true, Some(oldest)) = (self.mark, from > 0, kept.first_mut()) {
            mark(oldest);
        }
        kept
    }
}

impl<V> SnapshotFloor<V> {
    /// The index of the oldest of `versions` (a chain, oldest first) a
    /// copy keeps.
    pub fn cut(&self, versions: &[V]) -> usize {
        if versions.len() > 1 { (self.cut)(versions) } else { 0 }
    }
}

/// The buffers a freeze copies into, handed back by [`Frozen::into_buffers`]
/// for the next one. A buffer used before has its pages mapped: fresh ones
/// the size of the copy made the kernel zero that many pages, on the
/// node's thread, at every snapshot (7 % of a node's thread under
/// CausalSpartanX's pipelined writes, with the per-chain copies this
/// replaced). The bytes go in chunks of 1 MiB (`FREEZE_CHUNK_BYTES`) rather than
/// one growing buffer, whose doublings copied the copy again and faulted
/// in twice its size on a node's first snapshots.
#[derive(Debug, Default)]
pub struct FreezeBuffers {
    /// Chunks in use first (`chunks[..used]`), then spare ones kept from
    /// earlier freezes, cleared.
    chunks: Vec<Vec<u8>>,
    used: usize,
    chains: Vec<ChainAt>,
}

/// Bytes per chunk of a freeze's copy. A chain that does not fit in what a
/// chunk has left starts the next one (unless the chunk is empty: a chain
/// larger than a chunk grows its chunk).
const FREEZE_CHUNK_BYTES: usize = 1 << 20;

/// Where one copied chain's bytes are.
#[derive(Clone, Copy, Debug)]
struct ChainAt {
    /// The key's index in the store.
    index: usize,
    chunk: u32,
    start: u32,
    end: u32,
}

impl FreezeBuffers {
    /// Bytes the buffers hold allocated.
    pub fn capacity_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.capacity()).sum::<usize>()
            + self.chains.capacity() * std::mem::size_of::<ChainAt>()
    }

    /// Empty, keeping the allocations.
    fn clear(&mut self) {
        for c in &mut self.chunks[..self.used] {
            c.clear();
        }
        self.used = 0;
        self.chains.clear();
    }

    /// Append `encode`'s bytes for the chain of key `index`: `head`, if
    /// any, then `rest` (oldest first).
    fn push_chain<V>(&mut self, index: usize, encode: FreezeEncoder<V>, key: &[u8], head: Option<&V>, rest: &[V]) {
        // Room for a typical chain left in the current chunk, or the next.
        let full = |c: &Vec<u8>| !c.is_empty() && c.len() + FREEZE_CHUNK_BYTES / 16 > FREEZE_CHUNK_BYTES;
        if self.used == 0 || full(&self.chunks[self.used - 1]) {
            if self.used == self.chunks.len() {
                self.chunks.push(Vec::with_capacity(FREEZE_CHUNK_BYTES));
            }
            self.used += 1;
        }
        let chunk = self.used - 1;
        let out = &mut self.chunks[chunk];
        let start = out.len();
        if let Some(head) = head {
            encode(key, std::slice::from_ref(head), out);
        }
        encode(key, rest, out);
        let end = out.len();
        let narrow = |x: usize| u32::try_from(x).expect("a freeze chunk stays under 4 GiB");
        self.chains.push(ChainAt { index, chunk: narrow(chunk), start: narrow(start), end: narrow(end) });
    }
}

/// A copy of the store as it stood when [`MvStore::begin_freeze`] ran,
/// filled by [`MvStore::freeze_step`] in key-index order and, for a chain
/// about to change first, by the change itself (copy before write).
struct Freeze<V> {
    epoch: u64,
    /// Chains at indices below this existed at the start; later ones did not.
    end: usize,
    /// The next index `freeze_step` looks at.
    next: usize,
    encode: FreezeEncoder<V>,
    /// Where each chain may be cut, as of the freeze's start.
    floor: Option<SnapshotFloor<V>>,
    /// The copied chains, encoded in the order they were copied, and each
    /// one's key index and place.
    copy: FreezeBuffers,
}

impl<V> std::fmt::Debug for Freeze<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Freeze")
            .field("epoch", &self.epoch)
            .field("end", &self.end)
            .field("next", &self.next)
            .field("floor", &self.floor.is_some())
            .field("copy", &self.copy)
            .finish()
    }
}

/// A finished copy of the store as it stood when [`MvStore::begin_freeze`]
/// ran (see [`MvStore::freeze_step`]), each chain as its encoder wrote it.
#[derive(Debug)]
pub struct Frozen {
    copy: FreezeBuffers,
}

impl Frozen {
    /// Chains in the copy (keys that held any version).
    pub fn chains(&self) -> usize {
        self.copy.chains.len()
    }

    /// Bytes of the encoded copy.
    pub fn byte_len(&self) -> usize {
        self.copy.chunks[..self.copy.used].iter().map(|c| c.len()).sum()
    }

    /// The copy a chain at a time, in the order keys were first stored:
    /// the same for the same store however the freeze's slices fell. Steps
    /// copy chains in index order, but under writes most chains are copied
    /// out of turn, just before a write changes them, so the chains' places
    /// are sorted here (24 bytes each) and the bytes are read where they
    /// lie. Meant for the thread that writes the snapshot, not the store's
    /// owner.
    pub fn ordered(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut order = self.copy.chains.clone();
        // A chain is copied once per freeze, so indices are distinct and
        // the unstable sort is deterministic.
        order.sort_unstable_by_key(|c| c.index);
        debug_assert!(order.windows(2).all(|w| w[0].index < w[1].index), "a chain copied twice in one freeze");
        let chunks = &self.copy.chunks;
        order.into_iter().map(move |c| &chunks[c.chunk as usize][c.start as usize..c.end as usize])
    }

    /// The buffers, emptied, for the next freeze.
    pub fn into_buffers(self) -> FreezeBuffers {
        let mut b = self.copy;
        b.clear();
        b
    }
}

/// Multi-version key-value store. Keys live in an insertion-ordered hash map
/// with a fixed hasher (no per-process random seed). Chains are never
/// removed, so a key's index is stable for the store's life.
#[derive(Debug)]
pub struct MvStore<V: Versioned> {
    chains: IndexMap<StoreKey, Chain<V>, FxBuildHasher>,
    versions: usize,
    value_bytes: usize,
    /// Where each version stored or replaced since the last
    /// [`MvStore::take_journal`] is: the runtime logs it from the store as
    /// it stands then ([`MvStore::journaled`]), rather than from a copy
    /// made at every insert.
    journal: Option<Vec<(KeyIndex, V::Order)>>,
    rewrites: Rewrites<V>,
    /// The protocol's durable metadata (see [`MvStore::set_meta`]),
    /// whether it changed since the runtime last logged it, and whether
    /// that change asks for a sync.
    meta: Option<Vec<u8>>,
    meta_dirty: bool,
    meta_sync: bool,
    freeze: Option<Freeze<V>>,
    /// The epoch of the latest freeze begun (0: none yet).
    freeze_epoch: u64,
}

impl<V: Versioned> Default for MvStore<V> {
    fn default() -> Self {
        MvStore {
            chains: IndexMap::default(),
            versions: 0,
            value_bytes: 0,
            journal: None,
            rewrites: Rewrites::default(),
            meta: None,
            meta_dirty: false,
            meta_sync: false,
            freeze: None,
            freeze_epoch: 0,
        }
    }
}

/// Where an insert landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted {
    /// The new version is the key's latest.
    Newest,
    /// An existing version orders after it (it lost last-writer-wins).
    Older,
    /// A version with the same order already exists; the insert was ignored
    /// (a replayed replication message).
    Duplicate,
}

/// A key's place in the store. Chains are never removed, so it names the
/// same key for the store's life: a caller that must come back to a key
/// (a GC queue) can keep this instead of the key and reach the chain again
/// without hashing and comparing the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyIndex(usize);

impl KeyIndex {
    /// Dense from 0 in the order keys were first stored: usable as an index
    /// into a caller's own per-key table.
    pub fn get(self) -> usize {
        self.0
    }
}

/// What [`MvStore::insert_collecting`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Landed {
    pub inserted: Inserted,
    /// Versions the key holds afterwards.
    pub left: usize,
    pub index: KeyIndex,
}

/// Ask the processor to start loading the cache lines `at` spans (a
/// version is two or three), without waiting for them
/// ([`MvStore::warm`]). A hint only: elsewhere than x86-64 it does nothing.
#[inline(always)]
fn prefetch<T>(at: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        const LINE: usize = 64;
        let start = (at as *const T).cast::<i8>();
        let lines = (start as usize % LINE + std::mem::size_of::<T>()).div_ceil(LINE).max(1);
        for line in 0..lines {
            // SAFETY: a prefetch reads nothing and faults on no address;
            // SSE, which it needs, is part of the x86-64 baseline.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(start.wrapping_add(line * LINE))
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Copy before write: a chain that existed when the freeze under way began
/// and is about to change for the first time since is copied as it stands.
fn preserve<V: Clone>(freeze: &mut Option<Freeze<V>>, index: usize, key: &[u8], chain: &mut Chain<V>) {
    if let Some(f) = freeze
        && chain.frozen != f.epoch
    {
        chain.frozen = f.epoch;
        // The chain is as it stood at the freeze's start (this is its first
        // change since), and the floor is that moment's horizon: what the
        // cut leaves out, collection then would have dropped.
        // A chain of one version is copied whole whatever the floor says
        // (a chain the floor holds of nowhere is copied whole too): most
        // chains, which skip the floor's call (~50 ns a write on
        // CausalSpartanX's checkpoints, whose floor reads a dependency set).
        let vs = &chain.versions;
        let (from, mark) = match &f.floor {
            Some(floor) if vs.len() > 1 => (floor.cut(vs), floor.mark),
            _ => (0, None),
        };
        assert!(from == 0 || from < vs.len(), "a cut keeps the chain's newest version");
        match mark {
            // One clone per cut chain, for the mark: the store's own
            // version stays as it is.
            Some(mark) if from > 0 => {
                let mut head = vs[from].clone();
                mark(&mut head);
                f.copy.push_chain(index, f.encode, key, Some(&head), &vs[from + 1..]);
            }
            _ if !vs.is_empty() => f.copy.push_chain(index, f.encode, key, None, &vs[from..]),
            _ => {}
        }
    }
}

impl<V: Versioned + Clone> MvStore<V> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Note where every stored or replaced version is until
    /// [`MvStore::take_journal`]. The network runtime uses this to write
    /// ahead before it acknowledges.
    pub fn enable_journal(&mut self) {
        self.journal.get_or_insert_with(Vec::new);
    }

    /// The versions journaled since the last call, oldest first, as
    /// (key index, order) for [`MvStore::journaled`], with `spare`
    /// (emptied) put in the journal's place. A caller that hands back the
    /// buffer it drained last time keeps its capacity, so a turn's journal
    /// grows without reallocating (a fresh vector each turn reallocated as
    /// it doubled, at a pipelined client's hundreds of writes a turn).
    ///
    /// A version stored and then dropped (collected, or lost to a newer one
    /// under a collecting insert) before the journal is taken is gone from
    /// the store, so there is nothing to log for it: the store as it stands
    /// is what a replay of the log must give back, as a snapshot does. A
    /// version *replaced* and then dropped is the exception ([`Rewrites`]):
    /// the log already holds an older state of it.
    pub fn take_journal(&mut self, mut spare: Vec<(KeyIndex, V::Order)>) -> Vec<(KeyIndex, V::Order)> {
        spare.clear();
        self.rewrites.taken();
        match self.journal.as_mut() {
            Some(j) => std::mem::replace(j, spare),
            None => Vec::new(),
        }
    }

    /// How many entries the journal holds now: a position in the turn's
    /// journal, so records of other kinds can be ordered among its versions
    /// ([`crate::node::Node`]).
    pub fn journal_len(&self) -> usize {
        self.journal.as_ref().map_or(0, Vec::len)
    }

    /// Insert a version in order.
    pub fn insert(&mut self, key: &[u8], v: V) -> Inserted {
        // No collection pass: it scans the whole chain, which for a long
        // one (a Raft log kept as one key's versions) made every append
        // cost the log's length.
        self.insert_landing(key, v, None::<fn(&V) -> bool>).inserted
    }

    /// Insert a version in order, then drop the key's versions older than
    /// the newest one satisfying `stable` (as [`MvStore::gc_key`]) in the
    /// same lookup: a write-heavy key is collected as it is written, not
    /// only when a periodic pass reaches it. Returns where the version
    /// landed, how many versions the key holds afterwards, and the key's index.
    pub fn insert_collecting(&mut self, key: &[u8], v: V, stable: impl FnMut(&V) -> bool) -> Landed {
        self.insert_landing(key, v, Some(stable))
    }

    fn insert_landing(&mut self, key: &[u8], v: V, stable: Option<impl FnMut(&V) -> bool>) -> Landed {
        let order = v.order();
        let bytes = v.value().len();
        // Looked up by its bytes; copied into the map only when new.
        let i = match self.chains.get_index_of(key) {
            Some(i) => i,
            None => self.chains.insert_full(StoreKey::new(key), Chain::new(self.freeze_epoch)).0,
        };
        let (key, chain) = self.chains.get_index_mut(i).expect("just found or inserted");
        preserve(&mut self.freeze, i, key, chain);
        // Versions nearly always arrive newest-last; check the tail first.
        let pos = match chain.versions.last() {
            None => 0,
            Some(last) if last.order() < order => chain.versions.len(),
            _ => match chain.versions.binary_search_by(|x| x.order().cmp(&order)) {
                Ok(_) => {
                    return Landed { inserted: Inserted::Duplicate, left: chain.versions.len(), index: KeyIndex(i) };
                }
                Err(i) => i,
            },
        };
        let newest = pos == chain.versions.len();
        chain.make_room();
        chain.versions.insert(pos, v);
        if let Some(j) = self.journal.as_mut() {
            j.push((KeyIndex(i), order));
        }
        self.versions += 1;
        self.value_bytes += bytes;
        let inserted = if newest { Inserted::Newest } else { Inserted::Older };
        if let Some(stable) = stable
            && chain.versions.len() > 1
        {
            let rewrites = &mut self.rewrites;
            let (dropped, freed) = chain.drop_below_newest(stable, |v| rewrites.dropped(i, v));
            self.versions -= dropped;
            self.value_bytes -= freed;
        }
        Landed { inserted, left: chain.versions.len(), index: KeyIndex(i) }
    }

    /// Overwrite the version of `key` with the same order as `v` (a
    /// protocol changing a version's state in place, e.g. COPS committing a
    /// replicated write it stored as pending). Journaled like an insert,
    /// unless the journal's last entry already names this version (stored
    /// and replaced in one step, as a CC-LO PUT whose readers check ends at
    /// once): the log writes it as it stands then, so once is enough.
    /// Returns false, changing nothing, when no such version is stored.
    pub fn replace(&mut self, key: &[u8], v: V) -> bool {
        let order = v.order();
        let Some((ki, k, c)) = self.chains.get_full_mut(key) else { return false };
        let Ok(i) = c.versions.binary_search_by(|x| x.order().cmp(&order)) else { return false };
        preserve(&mut self.freeze, ki, k, c);
        self.value_bytes = self.value_bytes - c.versions[i].value().len() + v.value().len();
        if let Some(j) = self.journal.as_mut() {
            if j.last() != Some(&(KeyIndex(ki), order)) {
                j.push((KeyIndex(ki), order));
            }
            self.rewrites.replaced.insert((ki, order));
        }
        c.versions[i] = v;
        true
    }

    /// Collect one key's old versions in a single lookup, for a protocol
    /// whose rule must see the whole chain first. `plan` looks at the
    /// versions (oldest first) and names the one to keep as the new floor
    /// (its index), or `None` to change nothing. Every version before the
    /// floor goes unless `keep(version, floor)` holds. Then `mark` changes
    /// the floor in place *without* journaling it: only for a mark that
    /// recovery can do without, one summarising state a replayed log gives
    /// back anyway (Eiger's `collected_below` says older versions were
    /// collected; collection is not journaled either, so a replay returns
    /// those versions and needs no mark, while a snapshot copies the
    /// in-memory state, mark included). `mark` must keep the version's
    /// order and value. Returns how many versions were dropped.
    pub fn collect_planned(
        &mut self,
        key: &[u8],
        plan: impl FnOnce(&[V]) -> Option<usize>,
        keep: impl FnMut(&V, &V) -> bool,
        mark: impl FnOnce(&mut V),
    ) -> usize {
        match self.chains.get_index_of(key) {
            Some(i) => self.collect_planned_at(KeyIndex(i), plan, keep, mark),
            None => 0,
        }
    }

    /// [`MvStore::collect_planned`] for the key at `index` (from this
    /// store: an index it never handed out collects nothing).
    pub fn collect_planned_at(
        &mut self,
        index: KeyIndex,
        plan: impl FnOnce(&[V]) -> Option<usize>,
        mut keep: impl FnMut(&V, &V) -> bool,
        mark: impl FnOnce(&mut V),
    ) -> usize {
        let ki = index.0;
        let Some((k, c)) = self.chains.get_index_mut(ki) else { return 0 };
        let Some(floor) = plan(&c.versions) else { return 0 };
        assert!(floor < c.versions.len(), "the plan names a stored version");
        preserve(&mut self.freeze, ki, k, c);
        // Chains are short (a few versions): removing in place beats a
        // scratch buffer.
        let (mut freed, mut dropped, mut at) = (0, 0, floor);
        for i in (0..floor).rev() {
            if !keep(&c.versions[i], &c.versions[at]) {
                let v = c.versions.remove(i);
                freed += v.value().len();
                self.rewrites.dropped(ki, v);
                dropped += 1;
                at -= 1;
            }
        }
        if dropped > 0 {
            c.pruned = true;
            self.versions -= dropped;
            self.value_bytes -= freed;
        }
        let (order, len) = (c.versions[at].order(), c.versions[at].value().len());
        mark(&mut c.versions[at]);
        assert!(
            c.versions[at].order() == order && c.versions[at].value().len() == len,
            "a mark keeps the version's order and value"
        );
        dropped
    }

    /// Recovery: put back a logged version, the later record winning when
    /// one with the same order is already there (it was replaced).
    pub fn restore(&mut self, key: &[u8], v: V) {
        if !self.replace(key, v.clone()) {
            self.insert(key, v);
        }
    }

    /// The store a node restarted from this one's durable state holds: its
    /// versions (each chain cut at `floor`, as a checkpoint cuts it, when
    /// restarting from a snapshot) and its metadata, none of it dirty.
    /// Marks and journal are not durable and start afresh. For the
    /// simulator's and the test kit's restarts.
    pub fn restarted(&self, floor: Option<&SnapshotFloor<V>>) -> MvStore<V> {
        let mut store = MvStore::new();
        for key in self.keys_sorted() {
            let versions = self.versions(&key);
            let kept = match floor {
                Some(floor) => floor.kept(versions),
                None => versions.to_vec(),
            };
            for v in kept {
                store.restore(&key, v);
            }
        }
        if let Some(meta) = self.meta() {
            store.set_meta(meta.to_vec());
            store.take_dirty_meta();
        }
        store
    }

    /// Set the protocol's durable metadata: a small blob (a few hundred
    /// bytes) the runtime logs with this turn's versions and hands back
    /// after a restart through [`MvStore::meta`]. For state that is not a
    /// version but must survive a crash together with the versions, such as
    /// COPS's per-origin "committed through" table.
    pub fn set_meta(&mut self, meta: Vec<u8>) {
        self.meta = Some(meta);
        self.meta_dirty = true;
        self.meta_sync = true;
    }

    /// [`MvStore::set_meta`] for metadata whose loss in an operating-system
    /// crash costs only liveness, never safety: it is written to the log
    /// before this turn's output leaves (so it survives the process being
    /// killed) but asks for no sync of its own, reaching the disk with the
    /// next sync something else asks for. An idle node that records it
    /// every few milliseconds then does not sync that often. (A change set
    /// with [`MvStore::set_meta`] in the same turn still syncs.)
    pub fn set_meta_unsynced(&mut self, meta: Vec<u8>) {
        self.meta = Some(meta);
        self.meta_dirty = true;
    }

    /// The metadata last set (or recovered).
    pub fn meta(&self) -> Option<&[u8]> {
        self.meta.as_deref()
    }

    /// For the runtime: the metadata, if it changed since the last call,
    /// and whether it asks for a sync.
    pub fn take_dirty_meta(&mut self) -> Option<(Vec<u8>, bool)> {
        let sync = std::mem::take(&mut self.meta_sync);
        if std::mem::take(&mut self.meta_dirty) { self.meta.clone().map(|m| (m, sync)) } else { None }
    }

    /// Bring `key`'s entry and its newest version toward the cache, for a
    /// request about to be handled: a lookup at 100 000 keys is a chain of
    /// dependent cache misses (the hash slot, the entry and its key bytes,
    /// then the version buffer). Looking up a whole batch's keys first, in
    /// a loop doing nothing else, lets the processor overlap the misses of
    /// different keys, which the handlers, each stalled on its own, do not.
    /// The newest versions are prefetched rather than read, so nothing
    /// waits for them.
    pub fn warm(&self, key: &[u8]) {
        // The newest two: an insert that collects reads back to the newest
        // stable version, most often the one before the newest.
        for version in self.chains.get(key).into_iter().flat_map(|c| c.versions.iter().rev().take(2)) {
            prefetch(version);
        }
    }

    /// For a loop reading the versions at `places` in order (a turn's
    /// journal, read back by the log at each commit; the remote versions a
    /// stable time just admitted): start loading, without waiting, what the
    /// items a few places after `at` will read. By then those versions have
    /// mostly left the cache, and each read waited for its key's entry, then
    /// its version, then the value's bytes. Here each step of that chain is
    /// started for a later item as soon as the step before it has arrived:
    /// the entry 12 items ahead, the newest version 6 ahead, its value 3
    /// ahead.
    pub fn warm_ahead(&self, places: &[(KeyIndex, V::Order)], at: usize) {
        let chain = |j: usize| places.get(j).and_then(|&(index, _)| self.chains.get_index(index.0)).map(|(_, c)| c);
        if let Some(c) = chain(at + 12) {
            // The address only: nothing is read here.
            prefetch(c);
        }
        if let Some(newest) = chain(at + 6).and_then(|c| c.versions.last()) {
            prefetch(newest);
        }
        if let Some(first_byte) = chain(at + 3).and_then(|c| c.versions.last()).and_then(|v| v.value().first()) {
            prefetch(first_byte);
        }
    }

    /// The latest version of `key`.
    pub fn latest(&self, key: &[u8]) -> Option<&V> {
        self.chains.get(key).and_then(|c| c.versions.last())
    }

    /// The latest version of `key` satisfying `pred`, scanning newest first.
    pub fn latest_where(&self, key: &[u8], mut pred: impl FnMut(&V) -> bool) -> Option<&V> {
        self.chains.get(key).and_then(|c| c.versions.iter().rev().find(|v| pred(v)))
    }

    /// The latest version of `key` satisfying `below`, which must hold on a
    /// prefix of the versions in order (a bound on their order, such as a
    /// snapshot's timestamp on versions ordered by timestamp): a binary
    /// search where [`MvStore::latest_where`] scans. A snapshot read of a
    /// hot key skips every version newer than its snapshot, and under a
    /// skewed load with a stable time some hundreds of ms behind that is
    /// tens of versions per read.
    pub fn latest_below(&self, key: &[u8], below: impl FnMut(&V) -> bool) -> Option<&V> {
        let c = self.chains.get(key)?;
        let n = c.versions.partition_point(below);
        n.checked_sub(1).map(|i| &c.versions[i])
    }

    /// [`MvStore::latest_where`] for the key at `index`, with the key: no
    /// hashing or comparing of key bytes, which at 100 000 keys is a few
    /// cache misses per lookup.
    pub fn latest_where_at(&self, index: KeyIndex, mut pred: impl FnMut(&V) -> bool) -> Option<(&[u8], &V)> {
        let (k, c) = self.chains.get_index(index.0)?;
        c.versions.iter().rev().find(|v| pred(v)).map(|v| (k.as_slice(), v))
    }

    /// A journaled version ([`MvStore::take_journal`]) as it stands now,
    /// with its key; `None` if it has been dropped since, unless its turn
    /// replaced it first (then as it last stood, see [`Rewrites`]).
    pub fn journaled(&self, index: KeyIndex, order: V::Order) -> Option<(&[u8], &V)> {
        let (k, c) = self.chains.get_index(index.0)?;
        match c.versions.binary_search_by(|x| x.order().cmp(&order)) {
            Ok(i) => Some((k.as_slice(), &c.versions[i])),
            Err(_) => self.rewrites.logged(index.0, order).map(|v| (k.as_slice(), v)),
        }
    }

    /// [`MvStore::exact`] for the key at `index`.
    pub fn exact_at(&self, index: KeyIndex, order: V::Order) -> Option<&V> {
        let (_, c) = self.chains.get_index(index.0)?;
        c.versions.binary_search_by(|x| x.order().cmp(&order)).ok().map(|i| &c.versions[i])
    }

    /// The version of `key` with exactly this order.
    pub fn exact(&self, key: &[u8], order: V::Order) -> Option<&V> {
        let c = self.chains.get(key)?;
        c.versions.binary_search_by(|x| x.order().cmp(&order)).ok().map(|i| &c.versions[i])
    }

    /// All versions of `key`, oldest first.
    pub fn versions(&self, key: &[u8]) -> &[V] {
        self.chains.get(key).map(|c| c.versions.as_slice()).unwrap_or(&[])
    }

    /// The versions of the key at `index`, oldest first (none for an index
    /// this store never handed out).
    pub fn versions_at(&self, index: KeyIndex) -> &[V] {
        self.chains.get_index(index.0).map(|(_, c)| c.versions.as_slice()).unwrap_or(&[])
    }

    /// Whether GC has dropped versions of `key`.
    pub fn was_pruned(&self, key: &[u8]) -> bool {
        self.chains.get(key).is_some_and(|c| c.pruned)
    }

    /// Drop every version older than the newest one satisfying `stable`:
    /// a version every present and future reader would skip for a newer one.
    /// Returns how many were dropped and how many the key holds afterwards.
    pub fn gc_key(&mut self, key: &[u8], stable: impl FnMut(&V) -> bool) -> (usize, usize) {
        match self.chains.get_index_of(key) {
            Some(i) => self.gc_at(KeyIndex(i), stable),
            None => (0, 0),
        }
    }

    /// A word of the caller's own for the key at `index`, 0 until it is
    /// set; `None` for an index this store never handed out. Not stored
    /// durably, nor in a snapshot: it lives as long as this store.
    ///
    /// Why here and not in a table of the caller's indexed by
    /// [`KeyIndex::get`]: a write has just brought the key's entry into the
    /// cache, and a version GC's bookkeeping per written key in a table
    /// of its own was a cache miss per write, most of that GC's cost on
    /// a replica.
    pub fn mark_at(&mut self, index: KeyIndex) -> Option<&mut u64> {
        self.chains.get_index_mut(index.0).map(|(_, c)| &mut c.mark)
    }

    /// `key`'s versions (oldest first) and the caller's word for it
    /// ([`MvStore::mark_at`]), in one lookup; `None` for a key never stored.
    pub fn versions_and_mark(&mut self, key: &[u8]) -> Option<(&[V], &mut u64)> {
        self.chains.get_mut(key).map(|c| (c.versions.as_slice(), &mut c.mark))
    }

    /// Where `key`'s chain is, if the key was ever stored.
    pub fn index_of(&self, key: &[u8]) -> Option<KeyIndex> {
        self.chains.get_index_of(key).map(KeyIndex)
    }

    /// [`MvStore::gc_key`] for the key at `index` (from this store: an
    /// index it never handed out collects nothing).
    pub fn gc_at(&mut self, index: KeyIndex, stable: impl FnMut(&V) -> bool) -> (usize, usize) {
        let Some((k, c)) = self.chains.get_index_mut(index.0) else { return (0, 0) };
        if c.versions.len() > 1 {
            preserve(&mut self.freeze, index.0, k, c);
        }
        let rewrites = &mut self.rewrites;
        let (dropped, freed) = c.drop_below_newest(stable, |v| rewrites.dropped(index.0, v));
        self.versions -= dropped;
        self.value_bytes -= freed;
        (dropped, c.versions.len())
    }

    /// [`MvStore::gc_key`], but versions matching `keep` survive wherever
    /// they are. For a protocol whose older, not-yet-applied versions still
    /// have work to do: COPS keeps a pending replicated write that lost
    /// last-writer-wins until its dependency checks pass, because after a
    /// crash the store is all that recovery has, and a later write from the
    /// same origin may depend on it.
    pub fn gc_key_keeping(
        &mut self,
        key: &[u8],
        mut stable: impl FnMut(&V) -> bool,
        mut keep: impl FnMut(&V) -> bool,
    ) -> usize {
        let Some((ki, k, c)) = self.chains.get_full_mut(key) else { return 0 };
        let Some(keep_from) = c.versions.iter().rposition(&mut stable) else { return 0 };
        if keep_from > 0 {
            preserve(&mut self.freeze, ki, k, c);
        }
        let mut freed = 0;
        let mut dropped = 0;
        let mut i = 0;
        let rewrites = &mut self.rewrites;
        c.versions.retain(|v| {
            let old = i < keep_from;
            i += 1;
            if old && !keep(v) {
                freed += v.value().len();
                dropped += 1;
                if rewrites.wanted(ki, v) {
                    rewrites.dropped.push((ki, v.clone()));
                }
                false
            } else {
                true
            }
        });
        if dropped > 0 {
            c.pruned = true;
            self.versions -= dropped;
            self.value_bytes -= freed;
        }
        dropped
    }

    /// Begin a copy of the store as it stands now: every chain, as `encode`
    /// writes it, in `buffers` (a previous copy's, from
    /// [`Frozen::into_buffers`], or new). [`MvStore::freeze_step`] makes it
    /// a slice at a time, and the store may change in between: the first
    /// change to a chain not copied yet copies it first, and chains created
    /// since are left out. So the copy is exactly the store at this call,
    /// and a snapshot made of it is exact with the log position at this
    /// call. The network runtime's checkpoint uses it, so that a large
    /// store does not stop the node for the whole copy.
    ///
    /// With a `floor`, each chain is copied from its newest version the
    /// floor holds of: the older ones, which the protocol's collection would
    /// drop, stay out of the copy (and of the snapshot made of it).
    pub fn begin_freeze(
        &mut self,
        encode: FreezeEncoder<V>,
        mut buffers: FreezeBuffers,
        floor: Option<SnapshotFloor<V>>,
    ) {
        assert!(self.freeze.is_none(), "one freeze at a time");
        self.freeze_epoch += 1;
        buffers.clear();
        buffers.chains.reserve(self.chains.len());
        let end = self.chains.len();
        self.freeze = Some(Freeze { epoch: self.freeze_epoch, end, next: 0, encode, floor, copy: buffers });
    }

    /// Whether a freeze is under way.
    pub fn freezing(&self) -> bool {
        self.freeze.is_some()
    }

    /// Copy up to `max_keys` more chains of the freeze under way; the whole
    /// copy once it is complete.
    pub fn freeze_step(&mut self, max_keys: usize) -> Option<Frozen> {
        let f = self.freeze.as_mut().expect("freeze_step without begin_freeze");
        let (start, end) = (f.next, f.end);
        f.next = end.min(start.saturating_add(max_keys));
        for i in start..f.next {
            let (key, chain) = self.chains.get_index_mut(i).expect("chains are never removed");
            // A chain changed since the start was copied then; the rest now.
            preserve(&mut self.freeze, i, key, chain);
        }
        if self.freeze.as_ref().is_some_and(|f| f.next < end) {
            return None;
        }
        self.freeze.take().map(|f| Frozen { copy: f.copy })
    }

    /// Keys in byte order (for convergence checks and restarts; O(n log n)).
    pub fn keys_sorted(&self) -> Vec<Key> {
        let mut k: Vec<Key> = self.chains.keys().map(|k| Key::copy_from_slice(k)).collect();
        k.sort();
        k
    }

    pub fn key_count(&self) -> usize {
        self.chains.len()
    }

    /// Every stored version, in no particular order: only for order-free
    /// aggregates (sizes, counts), never for anything a run's outcome depends on.
    pub fn all_versions(&self) -> impl Iterator<Item = &V> + '_ {
        self.chains.values().flat_map(|c| c.versions.iter())
    }
    pub fn version_count(&self) -> usize {
        self.versions
    }
    pub fn value_bytes(&self) -> usize {
        self.value_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[derive(Clone, Debug)]
    struct V(u64, Value);
    impl Versioned for V {
        type Order = u64;
        fn order(&self) -> u64 {
            self.0
        }
        fn value(&self) -> &Value {
            &self.1
        }
    }
    fn v(t: u64) -> V {
        V(t, Bytes::from(format!("v{t}")))
    }
    fn k() -> Key {
        Bytes::from_static(b"k")
    }

    #[test]
    fn chains_grow_by_half_not_double() {
        let mut s = MvStore::new();
        for t in 1..=40 {
            s.insert(&k(), v(t));
            let cap = s.chains.get(&k()[..]).unwrap().versions.capacity();
            assert!(cap >= t as usize && cap <= (t as usize * 3).div_ceil(2), "{t} versions in {cap} slots");
        }
        // One version, as most chains under a protocol that keeps only the
        // newest, takes one slot (`Vec` would start at four).
        s.insert(b"one", v(1));
        assert_eq!(s.chains.get(&b"one"[..]).unwrap().versions.capacity(), 1);
    }

    #[test]
    fn an_index_reaches_the_same_chain_as_its_key() {
        let mut s = MvStore::new();
        s.insert(b"a", v(1));
        let landed = s.insert_collecting(&k(), v(1), |_| false);
        s.insert(&k(), v(2));
        assert_eq!(s.index_of(&k()), Some(landed.index));
        assert_eq!(s.index_of(b"nowhere"), None);
        assert_eq!(s.versions_at(landed.index).iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 2]);
        // Collect below the newest, by index.
        let dropped = s.collect_planned_at(landed.index, |vs| Some(vs.len() - 1), |_, _| false, |_| {});
        assert_eq!(dropped, 1);
        assert_eq!(s.versions(&k()).iter().map(|x| x.0).collect::<Vec<_>>(), vec![2]);
        assert_eq!(s.versions(b"a").len(), 1, "another key's chain untouched");
    }

    /// A version with a mark that `collect_planned` may change in place.
    #[derive(Clone, Debug, PartialEq)]
    struct M(u64, Value, u32);
    impl Versioned for M {
        type Order = u64;
        fn order(&self) -> u64 {
            self.0
        }
        fn value(&self) -> &Value {
            &self.1
        }
    }

    #[test]
    fn chain_is_ordered_and_deduplicated() {
        let mut s = MvStore::new();
        assert_eq!(s.insert(&k(), v(5)), Inserted::Newest);
        assert_eq!(s.insert(&k(), v(3)), Inserted::Older);
        assert_eq!(s.insert(&k(), v(9)), Inserted::Newest);
        assert_eq!(s.insert(&k(), v(5)), Inserted::Duplicate);
        let orders: Vec<u64> = s.versions(b"k").iter().map(|x| x.0).collect();
        assert_eq!(orders, vec![3, 5, 9]);
        assert_eq!(s.latest(b"k").unwrap().0, 9);
        assert_eq!(s.latest_where(b"k", |x| x.0 < 9).unwrap().0, 5);
        assert_eq!(s.exact(b"k", 3).unwrap().0, 3);
        assert_eq!(s.version_count(), 3);
    }

    /// The binary search answers as the scan does for every bound, at both
    /// ends of the chain and on a missing key.
    #[test]
    fn latest_below_answers_as_the_scan() {
        let mut s = MvStore::new();
        for t in [2, 4, 6, 8, 10] {
            s.insert(&k(), v(t));
        }
        for bound in 0..12 {
            let scan = s.latest_where(b"k", |x| x.0 <= bound).map(|x| x.0);
            assert_eq!(s.latest_below(b"k", |x| x.0 <= bound).map(|x| x.0), scan, "bound {bound}");
        }
        assert!(s.latest_below(b"absent", |_| true).is_none());
    }

    /// The by-index reads answer as the by-key ones do, for the key the
    /// insert's `Landed::index` names, and follow the chain as it changes.
    #[test]
    fn reads_by_index_match_reads_by_key() {
        let mut s = MvStore::new();
        let other = Bytes::from_static(b"other");
        let a = s.insert_collecting(&k(), v(5), |_| false).index;
        let b = s.insert_collecting(&other, v(7), |_| false).index;
        assert_ne!(a, b);
        assert_eq!(s.insert_collecting(&k(), v(3), |_| false).index, a, "a key keeps its index");
        let (key, latest) = s.latest_where_at(a, |_| true).unwrap();
        assert_eq!((key, latest.0), (&k()[..], 5));
        assert_eq!(s.latest_where_at(a, |x| x.0 < 5).unwrap().1.0, 3);
        assert!(s.latest_where_at(a, |x| x.0 > 5).is_none());
        assert_eq!(s.latest_where_at(b, |_| true).unwrap().0, &other);
        assert_eq!(s.exact_at(a, 3).unwrap().0, 3);
        assert!(s.exact_at(a, 4).is_none());
        // A collecting insert drops 3 and 5 below the stable 9: gone by index too.
        s.insert_collecting(&k(), v(9), |x| x.0 == 9);
        assert!(s.exact_at(a, 3).is_none());
        assert_eq!(s.exact_at(a, 9).unwrap().0, 9);
        assert_eq!(s.exact(b"k", 9).unwrap().0, 9);
    }
    #[test]
    fn gc_keeps_newest_stable_and_everything_after() {
        let mut s = MvStore::new();
        for t in [1, 2, 3, 4, 5] {
            s.insert(&k(), v(t));
        }
        assert!(!s.was_pruned(b"k"));
        assert_eq!(s.gc_key(b"k", |x| x.0 <= 3), (2, 3));
        let orders: Vec<u64> = s.versions(b"k").iter().map(|x| x.0).collect();
        assert_eq!(orders, vec![3, 4, 5]);
        assert!(s.was_pruned(b"k"));
        assert_eq!(s.version_count(), 3);
        assert_eq!(s.value_bytes(), 6);
        // Nothing stable: nothing dropped.
        assert_eq!(s.gc_key(b"k", |_| false), (0, 3));
    }

    #[test]
    fn planned_collection_drops_below_the_floor_and_marks_it_unjournaled() {
        let mut s: MvStore<M> = MvStore::new();
        s.enable_journal();
        s.insert(&k(), M(1, Bytes::from_static(b"x"), 0));
        s.insert(&k(), M(2, Bytes::from_static(b"y"), 0));
        let _ = s.take_journal(Vec::new());
        s.insert(&k(), M(3, Bytes::from_static(b"zz"), 0));
        let _ = s.take_journal(Vec::new());
        // Floor at order 3; order 2 is kept by `keep`, order 1 goes.
        let dropped = s.collect_planned(
            b"k",
            |vs| vs.iter().position(|m| m.0 == 3),
            |m, floor| m.0 == 2 && floor.0 == 3,
            |m| m.2 = 1,
        );
        assert_eq!(dropped, 1);
        let got: Vec<(u64, u32)> = s.versions(b"k").iter().map(|m| (m.0, m.2)).collect();
        assert_eq!(got, vec![(2, 0), (3, 1)], "the floor is marked, the kept version not");
        assert!(s.take_journal(Vec::new()).is_empty(), "neither collection nor the mark is journaled");
        assert_eq!((s.version_count(), s.value_bytes()), (2, 3));
        assert!(s.was_pruned(b"k"));
        // No plan: nothing changes; no key: nothing happens.
        assert_eq!(s.collect_planned(b"k", |_| None, |_, _| false, |m| m.2 = 0), 0);
        assert_eq!(s.versions(b"k")[1].2, 1);
        assert_eq!(s.collect_planned(b"j", |_| Some(0), |_, _| false, |_| ()), 0);
    }

    /// The records a log writes for a turn: its journal read back from the
    /// store as the turn ends.
    fn log_turn(s: &mut MvStore<V>) -> Vec<(Key, V)> {
        let journal = s.take_journal(Vec::new());
        journal
            .iter()
            .filter_map(|&(i, o)| s.journaled(i, o))
            .map(|(k, v)| (Key::copy_from_slice(k), v.clone()))
            .collect()
    }

    /// A version an earlier turn logged, which a turn replaces and then
    /// drops (collection, a collecting insert, GC), is logged as it last
    /// stood, whichever path dropped it: a replay must not give it back in
    /// the state of its older record (an undecided transaction the turn
    /// decided). One stored and dropped in the same turn is not logged.
    #[test]
    fn a_version_replaced_then_dropped_in_one_turn_is_logged_as_it_last_stood() {
        type Drop = fn(&mut MvStore<V>);
        let paths: [(&str, Drop); 4] = [
            ("collect_planned", |s| {
                s.collect_planned(b"k", |vs| Some(vs.len() - 1), |_, _| false, |_| ());
            }),
            ("insert_collecting", |s| {
                s.insert_collecting(b"k", v(9), |x| x.0 == 9);
            }),
            ("gc_key", |s| {
                s.gc_key(b"k", |x| x.0 == 3);
            }),
            ("gc_key_keeping", |s| {
                s.gc_key_keeping(b"k", |x| x.0 == 3, |_| false);
            }),
        ];
        for (path, drop) in paths {
            let mut s: MvStore<V> = MvStore::new();
            s.enable_journal();
            s.insert(&k(), V(1, Bytes::from_static(b"pending")));
            let mut log = log_turn(&mut s);
            // The next turn decides version 1, stores 2 and 3, and drops
            // what is below the newest.
            assert!(s.replace(b"k", V(1, Bytes::from_static(b"decided"))));
            s.insert(&k(), v(2));
            s.insert(&k(), v(3));
            drop(&mut s);
            assert!(s.exact(b"k", 1).is_none() && s.exact(b"k", 2).is_none(), "{path}: 1 and 2 collected");
            log.extend(log_turn(&mut s));
            let mut replayed: MvStore<V> = MvStore::new();
            for (key, v) in log {
                replayed.restore(&key, v);
            }
            let got: Vec<(u64, Bytes)> = replayed.versions(b"k").iter().map(|v| (v.0, v.1.clone())).collect();
            assert_eq!(got[0], (1, Bytes::from_static(b"decided")), "{path}: the replay gave back {got:?}");
            assert!(got.iter().all(|(o, _)| *o != 2), "{path}: 2, stored and dropped in one turn, is logged: {got:?}");
            // The rewrite is logged with its own turn only.
            assert!(log_turn(&mut s).is_empty(), "{path}");
            assert!(s.journaled(KeyIndex(0), 1).is_none(), "{path}");
        }
    }

    #[test]
    fn replace_overwrites_in_place_and_is_journaled() {
        let mut s = MvStore::new();
        s.insert(&k(), v(1));
        s.enable_journal();
        assert!(s.replace(b"k", V(1, Bytes::from_static(b"changed"))));
        assert!(!s.replace(b"k", v(2)), "no version 2 to replace");
        assert_eq!(s.exact(b"k", 1).unwrap().1, Bytes::from_static(b"changed"));
        assert_eq!(s.value_bytes(), 7);
        assert_eq!(s.take_journal(Vec::new()).len(), 1);
        s.restore(&k(), V(1, Bytes::from_static(b"again")));
        s.restore(&k(), v(3));
        assert_eq!(s.versions(b"k").len(), 2);
        assert_eq!(s.exact(b"k", 1).unwrap().1, Bytes::from_static(b"again"));
    }

    /// A version stored and replaced before the journal is taken is logged
    /// once (the log reads it as it stands); replaced after another entry,
    /// or after the journal was taken, it is logged again.
    #[test]
    fn a_version_replaced_right_after_it_was_journaled_is_logged_once() {
        let mut s = MvStore::new();
        s.enable_journal();
        s.insert(&k(), v(1));
        assert!(s.replace(b"k", V(1, Bytes::from_static(b"visible"))));
        assert!(s.replace(b"k", V(1, Bytes::from_static(b"again"))));
        let j = s.take_journal(Vec::new());
        assert_eq!(j.len(), 1);
        assert_eq!(s.journaled(j[0].0, j[0].1).unwrap().1.1, Bytes::from_static(b"again"));
        assert!(s.replace(b"k", v(1)));
        s.insert(&k(), v(2));
        assert!(s.replace(b"k", v(1)));
        assert_eq!(s.take_journal(Vec::new()).len(), 3);
    }

    /// A buffer handed back takes the journal's place emptied, with its
    /// capacity: what it held before is never journaled again.
    #[test]
    fn take_journal_reuses_the_spare_buffer() {
        let mut s = MvStore::new();
        assert!(s.take_journal(Vec::new()).is_empty(), "no journal: nothing, whatever is inserted");
        s.enable_journal();
        s.insert(&k(), v(1));
        s.insert(&k(), v(2));
        let first = s.take_journal(Vec::new());
        assert_eq!(first.iter().map(|&(_, x)| x).collect::<Vec<_>>(), vec![1, 2]);
        let capacity = first.capacity();
        s.insert(&k(), v(3));
        let second = s.take_journal(first);
        assert_eq!(second.iter().map(|&(_, x)| x).collect::<Vec<_>>(), vec![3], "the spare's old entries are gone");
        s.insert(&k(), v(4));
        let third = s.take_journal(second);
        assert!(third.capacity() >= capacity, "the first buffer came back with its capacity");
        assert_eq!(third.iter().map(|&(_, x)| x).collect::<Vec<_>>(), vec![4]);
    }

    #[test]
    fn meta_is_dirty_once_per_change() {
        let mut s: MvStore<V> = MvStore::new();
        assert_eq!(s.take_dirty_meta(), None);
        s.set_meta(vec![1, 2]);
        assert_eq!(s.take_dirty_meta(), Some((vec![1, 2], true)));
        assert_eq!(s.take_dirty_meta(), None);
        assert_eq!(s.meta(), Some(&[1u8, 2][..]));
        s.set_meta_unsynced(vec![3]);
        assert_eq!(s.take_dirty_meta(), Some((vec![3], false)));
        s.set_meta(vec![4]);
        s.set_meta_unsynced(vec![5]);
        assert_eq!(s.take_dirty_meta(), Some((vec![5], true)), "a synced change in the same turn still syncs");
    }

    /// The journal names where versions are, and `journaled` gives them as
    /// they stand when the runtime logs them: a version replaced since is
    /// logged as replaced, one dropped since leaves nothing to log, and a
    /// duplicate insert journals nothing.
    #[test]
    fn journal_is_read_back_from_the_store_as_it_stands() {
        let mut s = MvStore::new();
        s.enable_journal();
        s.insert(&k(), v(1));
        assert_eq!(s.insert(&k(), v(1)), Inserted::Duplicate);
        assert!(s.replace(b"k", V(1, Bytes::from_static(b"changed"))));
        let (i, o) = s.take_journal(Vec::new())[0];
        assert_eq!(
            s.journaled(i, o).map(|(key, x)| (Key::copy_from_slice(key), x.1.clone())),
            Some((k(), Bytes::from_static(b"changed")))
        );
        s.insert(&k(), v(3));
        s.insert_collecting(&k(), v(4), |x| x.0 == 4);
        let j = s.take_journal(Vec::new());
        assert_eq!(j.iter().map(|&(_, o)| o).collect::<Vec<_>>(), vec![3, 4]);
        let logged: Vec<u64> = j.iter().filter_map(|&(i, o)| s.journaled(i, o)).map(|(_, x)| x.0).collect();
        assert_eq!(logged, vec![4], "version 3 was collected before the log was written");
    }

    #[test]
    fn journal_records_inserts_until_drained() {
        let mut s = MvStore::new();
        s.insert(&k(), v(1));
        s.enable_journal();
        s.insert(&k(), v(2));
        let j = s.take_journal(Vec::new());
        assert_eq!(j.len(), 1);
        assert!(s.take_journal(Vec::new()).is_empty());
    }

    /// A test encoding of a chain: per version, the key, the order, the
    /// value and the mark, each length-prefixed where it needs one.
    fn encode_m(key: &[u8], versions: &[M], out: &mut Vec<u8>) {
        for m in versions {
            out.extend((key.len() as u32).to_le_bytes());
            out.extend(key);
            out.extend(m.0.to_le_bytes());
            out.extend((m.1.len() as u32).to_le_bytes());
            out.extend(&m.1[..]);
            out.extend(m.2.to_le_bytes());
        }
    }

    /// One chain's bytes back as (key, version) pairs.
    fn decode_m(mut b: &[u8]) -> Vec<(Key, M)> {
        fn take<'a>(b: &mut &'a [u8], n: usize) -> &'a [u8] {
            let (head, rest) = b.split_at(n);
            *b = rest;
            head
        }
        fn u32_of(b: &mut &[u8]) -> u32 {
            u32::from_le_bytes(take(b, 4).try_into().expect("4 bytes"))
        }
        let mut all = Vec::new();
        while !b.is_empty() {
            let klen = u32_of(&mut b) as usize;
            let key = Key::copy_from_slice(take(&mut b, klen));
            let order = u64::from_le_bytes(take(&mut b, 8).try_into().expect("8 bytes"));
            let vlen = u32_of(&mut b) as usize;
            let value = Bytes::copy_from_slice(take(&mut b, vlen));
            let mark = u32_of(&mut b);
            all.push((key, M(order, value, mark)));
        }
        all
    }

    fn contents(s: &MvStore<M>) -> Vec<(Key, M)> {
        let mut all: Vec<(Key, M)> = s
            .keys_sorted()
            .into_iter()
            .flat_map(|k| s.versions(&k).iter().map(move |v| (k.clone(), v.clone())))
            .collect();
        all.sort_by(|a, b| (&a.0, a.1.0).cmp(&(&b.0, b.1.0)));
        all
    }

    /// Every kind of change, interleaved at random with freeze steps: the
    /// finished copy is the store as it stood when the freeze began.
    #[test]
    fn a_freeze_copies_the_store_as_it_stood_at_its_start() {
        for seed in 1..=300u64 {
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut next = |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n
            };
            let mut s = MvStore::new();
            let key = |i: u64| Bytes::from(format!("k{i}"));
            let mut t = 0;
            for _ in 0..next(40) {
                t += 1;
                s.insert(&key(next(12)), M(t, Bytes::from(format!("v{t}")), 0));
            }
            // Each freeze reuses the buffers of the one before.
            let mut buffers = FreezeBuffers::default();
            for freeze in 0..3 {
                let before = contents(&s);
                let first_stored: Vec<Key> = s.chains.keys().map(|k| Key::copy_from_slice(k)).collect();
                s.begin_freeze(encode_m, std::mem::take(&mut buffers), None);
                let copy = loop {
                    match next(6) {
                        0 => {
                            if let Some(copy) = s.freeze_step(1 + next(3) as usize) {
                                break copy;
                            }
                        }
                        1 => {
                            t += 1;
                            s.insert(&key(next(16)), M(t, Bytes::from(format!("v{t}")), 0));
                        }
                        2 => {
                            let k = key(next(16));
                            if let Some(v) = s.versions(&k).first().cloned() {
                                s.replace(&k, M(v.0, Bytes::from(format!("r{t}")), v.2));
                            }
                        }
                        3 => {
                            let cut = t.saturating_sub(next(8));
                            s.gc_key(&key(next(16)), |v| v.0 <= cut);
                        }
                        4 => {
                            let cut = t.saturating_sub(next(8));
                            s.gc_key_keeping(&key(next(16)), |v| v.0 <= cut, |v| v.0 % 3 == 0);
                        }
                        _ => {
                            let mark = next(100) as u32 + 1;
                            s.collect_planned(
                                &key(next(16)),
                                |vs| vs.len().checked_sub(1),
                                |_, _| false,
                                |v| v.2 = mark,
                            );
                        }
                    }
                };
                let chains: Vec<Vec<(Key, M)>> = copy.ordered().map(decode_m).collect();
                assert!(
                    chains.iter().all(|vs| !vs.is_empty() && vs.iter().all(|(k, _)| *k == vs[0].0)),
                    "seed {seed}: a chain's bytes hold other than one key's versions"
                );
                assert_eq!(copy.chains(), chains.len());
                buffers = copy.into_buffers();
                let mut copy: Vec<(Key, M)> = chains.into_iter().flatten().collect();
                // A key at a time, oldest first, whatever the slices were.
                for w in copy.windows(2) {
                    if w[0].0 == w[1].0 {
                        assert!(w[0].1.0 < w[1].1.0, "seed {seed}: a key's versions out of order");
                    }
                }
                let keys: Vec<&Key> = copy.iter().map(|e| &e.0).collect();
                let mut runs = keys.clone();
                runs.dedup();
                let mut distinct = runs.clone();
                distinct.sort();
                distinct.dedup();
                assert_eq!(runs.len(), distinct.len(), "seed {seed}: a key's versions are not together");
                let at: Vec<usize> = runs
                    .iter()
                    .map(|k| first_stored.iter().position(|f| f == *k).expect("a key of the store"))
                    .collect();
                assert!(at.is_sorted(), "seed {seed}: keys not in the order they were first stored: {at:?}");
                copy.sort_by(|a, b| (&a.0, a.1.0).cmp(&(&b.0, b.1.0)));
                assert_eq!(
                    copy, before,
                    "seed {seed}, freeze {freeze}: the copy is not the store at the freeze's start"
                );
                assert!(!s.freezing());
            }
        }
    }

    /// A copy larger than a chunk, with a chain larger than a chunk, reads
    /// back as the store; the next freeze reuses the buffers without
    /// growing them.
    #[test]
    fn a_freeze_spans_chunks_and_reuses_them() {
        let mut s: MvStore<M> = MvStore::new();
        for i in 0..3_000u64 {
            s.insert(format!("k{i}").as_bytes(), M(i, Bytes::from(vec![i as u8; 1_000]), 0));
        }
        s.insert(b"huge", M(1, Bytes::from(vec![7; 2 * FREEZE_CHUNK_BYTES]), 0));
        let mut buffers = FreezeBuffers::default();
        let mut capacity = 0;
        for round in 0..2 {
            s.begin_freeze(encode_m, std::mem::take(&mut buffers), None);
            let copy = s.freeze_step(usize::MAX).expect("one step copies everything");
            assert!(copy.copy.used > 3, "the copy spans chunks");
            let mut got: Vec<(Key, M)> = copy.ordered().flat_map(decode_m).collect();
            got.sort_by(|a, b| (&a.0, a.1.0).cmp(&(&b.0, b.1.0)));
            assert_eq!(got, contents(&s));
            buffers = copy.into_buffers();
            if round == 1 {
                assert_eq!(buffers.capacity_bytes(), capacity, "the second freeze allocated nothing");
            }
            capacity = buffers.capacity_bytes();
        }
    }

    /// With a floor, a chain is copied from its newest version the floor
    /// holds of, whether a step copies it or a write to it does first (as
    /// it stood before the write); a chain the floor holds of nowhere is
    /// copied whole. The store itself keeps every version.
    #[test]
    fn a_freeze_with_a_floor_leaves_out_what_collection_would_drop() {
        let mut s: MvStore<M> = MvStore::new();
        for k in ["a", "b", "c"] {
            for v in 1..=4u64 {
                s.insert(k.as_bytes(), M(v, Bytes::from_static(b"x"), 0));
            }
        }
        s.insert(b"d", M(3, Bytes::from_static(b"x"), 0));
        s.insert(b"d", M(4, Bytes::from_static(b"x"), 0));
        s.begin_freeze(encode_m, FreezeBuffers::default(), Some(SnapshotFloor::at_newest(|m: &M| m.0 <= 2)));
        assert!(s.freeze_step(1).is_none(), "one key a step");
        s.insert(b"c", M(5, Bytes::from_static(b"x"), 0));
        let copy = s.freeze_step(usize::MAX).expect("the rest");
        let got: Vec<(String, u64)> =
            copy.ordered().flat_map(decode_m).map(|(k, m)| (String::from_utf8(k.to_vec()).unwrap(), m.0)).collect();
        let want: Vec<(String, u64)> = [("a", 2), ("a", 3), ("a", 4), ("b", 2), ("b", 3), ("b", 4)]
            .into_iter()
            .chain([("c", 2), ("c", 3), ("c", 4), ("d", 3), ("d", 4)])
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(got, want);
        assert_eq!(s.versions(b"a").len(), 4, "the store keeps what the copy leaves out");
    }

    /// A marked cut copies the version it leaves oldest with the mark
    /// applied, whether a step copies the chain or a write to it does
    /// first; the store's own version keeps no mark, and an uncut chain
    /// is copied unmarked.
    #[test]
    fn a_marked_cut_marks_the_copy_of_the_version_it_leaves_oldest() {
        let mut s: MvStore<M> = MvStore::new();
        for k in ["a", "b"] {
            for v in 1..=3u64 {
                s.insert(k.as_bytes(), M(v, Bytes::from_static(b"x"), 0));
            }
        }
        s.insert(b"c", M(1, Bytes::from_static(b"x"), 0));
        s.insert(b"c", M(2, Bytes::from_static(b"x"), 0));
        // Cut at the newest version when it is 3; keep chains ending elsewhere whole.
        let cut = |vs: &[M]| if vs.last().is_some_and(|m| m.0 == 3) { vs.len() - 1 } else { 0 };
        s.begin_freeze(encode_m, FreezeBuffers::default(), Some(SnapshotFloor::marked(cut, |m: &mut M| m.2 = 7)));
        assert!(s.freeze_step(1).is_none(), "one key a step");
        s.insert(b"b", M(4, Bytes::from_static(b"x"), 0));
        let copy = s.freeze_step(usize::MAX).expect("the rest");
        let got: Vec<(String, u64, u32)> = copy
            .ordered()
            .flat_map(decode_m)
            .map(|(k, m)| (String::from_utf8(k.to_vec()).unwrap(), m.0, m.2))
            .collect();
        let want = [("a", 3, 7), ("b", 3, 7), ("c", 1, 0), ("c", 2, 0)].map(|(k, v, m)| (k.to_string(), v, m));
        assert_eq!(got, want);
        assert!(s.versions(b"a").iter().all(|m| m.2 == 0), "the store's versions are not marked");
        assert_eq!(s.versions(b"b").len(), 4);
    }

    #[test]
    fn a_freeze_of_an_empty_store_completes_at_once() {
        let mut s: MvStore<M> = MvStore::new();
        s.begin_freeze(encode_m, FreezeBuffers::default(), None);
        assert!(s.freezing());
        assert_eq!(s.freeze_step(1).map(|c| (c.chains(), c.byte_len())), Some((0, 0)));
        assert!(!s.freezing());
    }
}
