//! # `dep_check`: committing a replicated write once its dependencies are
//!
//! ## How a dependency is judged satisfied (a deviation)
//!
//! The dissertation leaves the `dep_check` test unstated; "the key's visible
//! version is at least as new" (a natural reading) is unsafe: with x@5
//! (depending on y@3) not yet arrived and a concurrent x@7 already visible, a
//! write depending on x@5 would pass and expose its reader to the old y.
//! Here a dependency asks for *that* write.
//!
//! ## Committing out of order (a deviation from our earlier design, back to the paper)
//!
//! Lloyd, *Stronger Semantics for Low-Latency Geo-Replicated Storage*
//! (dissertation, 2013), §2.7 step 5 commits a replicated write as soon as
//! its own dependency checks succeed. An earlier version of this module
//! committed one origin's writes strictly in stamp order, so that one stamp
//! per origin, "committed here through s", answered every dependency. That
//! held back every later, *independent* write from the same origin behind
//! one whose dependency lives in a DC that is cut off, for as long as the
//! cut lasted: head-of-line blocking the paper does not have. Now each
//! write commits when its own checks pass, and what is committed from origin `o` is [`Committed`]: a
//! **low-water mark** `low` (every write of `o` stamped ≤ `low` is committed
//! here) plus the set `above` of stamps committed above it. A dependency on
//! `o` is satisfied if its stamp is ≤ `low` (one comparison, the common
//! case) or in `above`. `low` is sound because an origin's FIFO link
//! delivers its writes in stamp order: every write of `o` stamped below the
//! newest one received has been received, and so is committed or pending;
//! `low` rises to the newest committed stamp below the oldest pending one.
//! `above` holds only writes committed behind a blocked one and empties as
//! soon as that one commits.
//!
//! One order is kept: **one key's writes from one origin commit in stamp
//! order** (the next waits for the previous, a local check). Sessions keep
//! one stamp per key and origin (COPS deviation 2, COPS-GT deviation 1):
//! having read x@5 and then x@7 from the same origin they keep x@7, and a
//! dependency on x@7 must then imply x@5 and what x@5 depends on. Writes of
//! other keys never wait for each other. Settling ([`settle`](super::settle)) reports
//! `low` only, so "committed everywhere through s" keeps its meaning.
//! Dependencies always have smaller stamps than the write, and a write
//! waits only for its own dependencies, so nothing can deadlock. A
//! dependency on a write this node stamped itself is always satisfied:
//! local writes commit when they are stamped.
//!
//! ## Durability
//!
//! A replicated write is stored at once, as *pending*, and switched to
//! committed in place ([`MvStore::replace`](causeway_core::MvStore::replace))
//! when its checks pass; the committed table (each origin's `low` and
//! `above`) is saved as the store's metadata after each batch of commits. Both are logged before the runtime marks the message delivered,
//! so after a crash [`DepNode::recover`] rebuilds the queues from the
//! pending versions and the table, and re-sends their checks. A check sent
//! to a node that crashed before answering is lost with that node's memory,
//! so unanswered checks are re-sent every `retry_us` (§2.7 step 4: "if any
//! `dep_check` times out, reissue"); answers are idempotent.
//!
//! One `dep_check` message per owning node carries all the dependencies that
//! node owns, answered once all hold.

use super::msg::{Dep, DepVersion, PathMsg, Stamp};
use super::settle::Settle;
use crate::kit::node::{equivalents_elsewhere, served_partition};
use causeway_core::{Key, KeyIndex, MvStore, NodeCtx, NodeId, Observation, ServerEnv, Topology, Versioned};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A replicated write waiting in its origin's queue.
#[derive(Debug)]
struct Waiting {
    key: Key,
    stamp: Stamp,
    written_us: u64,
    arrived_us: u64,
    /// Checks still outstanding: local ones plus one per `DepCheck` sent
    /// (plus one while `held`).
    missing: usize,
    /// Waits for [`DepNode::release`] besides its checks.
    held: bool,
    /// The previous write of its key from its origin, waited for only to
    /// keep one key's writes in order (not as a listed dependency).
    prev_wait: Option<Stamp>,
}

/// A replicated write whose checks all passed: the variant commits it, then
/// calls `DepNode::committed`.
#[derive(Debug)]
pub struct Ready {
    pub key: Key,
    pub stamp: Stamp,
    pub written_us: u64,
    /// How long it waited here, in this node's clock.
    pub waited_us: u64,
}

/// Who waits for a dependency to be committed at this node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Waiter {
    /// A write queued here from `origin`, stamped `stamp`.
    Local { origin: NodeId, stamp: Stamp },
    /// A `DepCheck` from a node of this DC.
    Remote { from: NodeId, id: u64 },
}

/// A check this node sent and has not had answered.
struct SentCheck {
    to: NodeId,
    origin: NodeId,
    stamp: Stamp,
    deps: Vec<Dep>,
    sent_us: u64,
}

/// One partition server's share of the replication path: Lamport clock,
/// equivalents, per-origin queues and the `dep_check` bookkeeping.
pub struct DepNode {
    pub topology: Arc<Topology>,
    pub me: NodeId,
    pub dc: causeway_core::DcId,
    /// Only a partition's server takes part; other nodes ignore all input.
    pub serving: bool,
    /// The broken variant: dependencies are not checked.
    pub skip_checks: bool,
    /// Mutant: [`DepNode::recover`] does nothing (a restart forgets the
    /// pending writes and the committed-through table).
    pub skip_recovery: bool,
    /// This partition's servers in the other DCs.
    pub equivalents: Vec<NodeId>,
    /// Re-send unanswered checks after this long.
    pub retry_us: u64,
    /// Which writes are committed in every DC (Lloyd §6.1); fed by the
    /// `Through`/`Settled` messages this path receives.
    pub settle: Settle,
    /// The Lamport clock (§2.5).
    lamport: u64,
    /// Per origin node: which of its writes are committed here (module doc).
    through: BTreeMap<NodeId, Committed>,
    /// Per origin: writes received and not yet committed, by stamp.
    queues: BTreeMap<NodeId, BTreeMap<Stamp, Waiting>>,
    /// Queued writes whose checks have all passed, to commit next.
    ready: BTreeSet<(NodeId, Stamp)>,
    /// Per (origin, key): the newest write received and not yet committed,
    /// which the origin's next write of the key waits for (module doc).
    last_pending: BTreeMap<(NodeId, Key), Stamp>,
    /// Per origin: (stamp needed, waiter) for dependencies not yet committed.
    waiting: BTreeMap<NodeId, BTreeSet<(Stamp, Waiter)>>,
    /// Remote checks: outstanding dependency count per (from, id).
    remote_checks: BTreeMap<(NodeId, u64), usize>,
    /// Checks this node sent, by id.
    sent_checks: BTreeMap<u64, SentCheck>,
    next_check: u64,
    /// Held writes with one check fewer outstanding since the variant last
    /// took them ([`DepNode::take_held_progress`]): the only way a held
    /// write becomes [`only_held`](DepNode::only_held) other than arriving.
    held_progress: Vec<Stamp>,
}

/// The replication path's settings, the same for every variant.
#[derive(Clone, Copy, Debug)]
pub struct PathConfig {
    /// Re-send unanswered checks after this long (Lloyd §2.7 step 4).
    pub retry_us: u64,
    /// The broken variant: dependencies are not checked.
    pub skip_checks: bool,
    /// The broken variant: a restart recovers nothing.
    pub skip_recovery: bool,
}

impl DepNode {
    /// `settle` decides how long a write committed everywhere is held
    /// before it is settled (see [`Settle::new`]).
    pub fn new(ctx: &NodeCtx, settle: Settle, cfg: PathConfig) -> DepNode {
        let topology = ctx.topology.clone();
        let (dc, serving, equivalents) = match served_partition(ctx) {
            Some((dc, partition)) => (dc, true, equivalents_elsewhere(&topology, partition, dc)),
            None => (ctx.role.dc(), false, Vec::new()),
        };
        DepNode {
            topology,
            me: ctx.id,
            dc,
            serving,
            skip_checks: cfg.skip_checks,
            skip_recovery: cfg.skip_recovery,
            equivalents,
            retry_us: cfg.retry_us,
            settle,
            lamport: 0,
            through: BTreeMap::new(),
            queues: BTreeMap::new(),
            ready: BTreeSet::new(),
            last_pending: BTreeMap::new(),
            waiting: BTreeMap::new(),
            remote_checks: BTreeMap::new(),
            sent_checks: BTreeMap::new(),
            next_check: 0,
            held_progress: Vec::new(),
        }
    }

    /// The Lamport clock's current reading.
    pub fn lamport(&self) -> u64 {
        self.lamport
    }

    /// Lamport's receive rule for a time heard in any message (§2.5): the
    /// clock never stays behind it. COPS-GT's checkpoint gossip uses this so
    /// that an idle node's clock, and so the checkpoint, keeps moving.
    pub fn witness(&mut self, lamport: u64) {
        self.lamport = self.lamport.max(lamport);
    }

    /// Origin `o`'s writes committed here: every one through this stamp
    /// (the low-water mark; some above it may be committed too).
    pub fn through(&self, o: NodeId) -> Stamp {
        if o == self.me {
            Stamp::new(self.lamport, self.me)
        } else {
            self.through.get(&o).map_or(Stamp::NONE, |c| c.low)
        }
    }

    /// Whether origin `o`'s write stamped `s` is committed here.
    fn is_committed(&self, s: Stamp) -> bool {
        let o = s.origin();
        o == self.me || self.through.get(&o).is_some_and(|c| c.contains(s))
    }

    /// After a restart: the clock above every stored stamp, the table from
    /// the store's metadata, and every pending version queued again with its
    /// checks re-sent. Pending versions are taken in (origin, stamp) order,
    /// the order they arrived in.
    pub fn recover<M: From<PathMsg>, V: DepVersion>(&mut self, env: &mut impl ServerEnv<M, V>) {
        if self.skip_recovery {
            return;
        }
        // Check ids must not repeat across a restart: a peer may still hold
        // a pre-crash check under its id (and ignore a new one reusing it
        // as a retry), and a pre-crash answer may still be on its way (and
        // would answer the new check). Start above every id a previous
        // incarnation can have used: the clock in µs never falls below the
        // number of checks sent so far (the runtime keeps it from going
        // back across a restart). Found by simulated crash-restart.
        self.next_check = self.next_check.max(env.now_us());
        if let Some(meta) = env.store().meta() {
            self.through = decode_table(meta);
        }
        let keys = env.store().keys_sorted();
        let mut pending: Vec<(Stamp, Key, Vec<Dep>, bool)> = Vec::new();
        for k in &keys {
            for v in env.store().versions(k) {
                self.lamport = self.lamport.max(v.order().lamport());
                if let Some(deps) = v.pending_checks() {
                    pending.push((v.order(), k.clone(), deps.to_vec(), v.held()));
                }
            }
        }
        pending.sort_by_key(|(s, _, _, _)| (s.origin(), *s));
        for (stamp, key, deps, held) in pending {
            if self.is_committed(stamp) {
                // Committed before the crash, though its switch to committed
                // was not logged: the table and the versions are logged in
                // the same turn, so this takes a damaged log. Finish it.
                let now = env.now_us();
                if let Some(v) = env.store().exact(&key, stamp).cloned() {
                    self.lamport += 1;
                    env.store().replace(&key, v.commit_at(now, self.lamport));
                }
                continue;
            }
            // written_us is only a measurement; a recovered write reports 0.
            self.queue_replicated(env, key, stamp, &deps, 0, held);
        }
    }

    /// Whether a `Replicate` of `key`@`stamp` from `from` is new: only the
    /// write's origin, an equivalent, replicates it, and each write once.
    pub fn accepts_replicate<V: DepVersion>(&self, from: NodeId, key: &Key, stamp: Stamp, store: &MvStore<V>) -> bool {
        stamp.origin() == from
            && self.equivalents.contains(&from)
            && !self.is_committed(stamp)
            && store.exact(key, stamp).is_none()
    }

    /// Commit every replicated write whose checks passed (§2.7 step 5),
    /// switching its stored version to committed, and return them for the
    /// variant's bookkeeping. A pending version may already be gone: it
    /// lost last-writer-wins to a committed one and was collected.
    pub fn commit_ready<M: From<PathMsg>, V: DepVersion>(&mut self, env: &mut impl ServerEnv<M, V>) -> Vec<Ready> {
        let mut done = Vec::new();
        let mut any = false;
        while let Some(r) = self.take_ready(env.now_us()) {
            any = true;
            if r.waited_us > 0 {
                env.observe(Observation::Blocked { what: "dep_check", waited_us: r.waited_us });
            }
            let now = env.now_us();
            let (stamp, key) = (r.stamp, r.key.clone());
            if let Some(v) = env.store().exact(&key, stamp).cloned() {
                // A fresh tick: the commit is logically after every DepOk
                // witnessed and before any DepOk this commit releases.
                self.lamport += 1;
                env.store().replace(&key, v.commit_at(now, self.lamport));
                done.push(r);
            }
            self.committed(env, stamp, &key);
        }
        // The table is saved once per batch: the runtime logs it with the
        // batch's versions, in the same turn.
        if any {
            env.store().set_meta(encode_table(&self.through));
        }
        done
    }

    /// Report `key`@`stamp`, just committed, as visible if it is what a read
    /// now returns (a last-writer-wins loser is never read).
    pub fn report_if_newest<M, V: DepVersion>(
        &self,
        env: &mut impl ServerEnv<M, V>,
        key: &Key,
        stamp: Stamp,
        written_us: u64,
    ) {
        if let Some(index) = env.store().index_of(key) {
            self.report_if_newest_at(env, index, stamp, written_us);
        }
    }

    /// [`Self::report_if_newest`] for the key at `index` of the store (no
    /// hashing of the key again right after a write found it).
    pub fn report_if_newest_at<M, V: DepVersion>(
        &self,
        env: &mut impl ServerEnv<M, V>,
        index: KeyIndex,
        stamp: Stamp,
        written_us: u64,
    ) {
        let origin = self.topology.dc_of(stamp.origin());
        env.observe_visible_in_store(origin, written_us, |store| {
            store.latest_where_at(index, V::committed).filter(|(_, v)| v.order() == stamp)
        });
    }

    /// Refuse a request for a key this node does not own: the client's
    /// placement is wrong, and an answer would mislead it (an empty read, a
    /// write no correctly placed reader would find).
    pub fn check_owner(&self, key: &Key) -> Result<(), String> {
        if self.topology.server_for_key(self.dc, key) == Some(self.me) {
            Ok(())
        } else {
            Err(format!("node {} does not own this key", self.me))
        }
    }

    /// Refuse a write whose key this node does not own, or whose
    /// dependencies name nodes that cannot have stamped them.
    pub fn check_request(&self, key: &Key, deps: &[Dep]) -> Result<(), String> {
        self.check_owner(key)?;
        for d in deps {
            let p = self.topology.partition_of(&d.key);
            let origin = d.stamp.origin();
            if !self.topology.contains(origin) || self.topology.equivalents(p).all(|(_, n)| n != origin) {
                return Err(format!("dependency on {:?} names node {origin}, which does not serve that key", d.key));
            }
        }
        Ok(())
    }

    /// A new local stamp above the clock and every dependency (§2.5).
    pub fn next_stamp(&mut self, deps: impl IntoIterator<Item = Stamp>) -> Stamp {
        let seen = deps.into_iter().map(Stamp::lamport).max().unwrap_or(0);
        self.lamport = self.lamport.max(seen) + 1;
        Stamp::new(self.lamport, self.me)
    }

    fn satisfied(&self, d: &Dep) -> bool {
        self.is_committed(d.stamp)
    }

    /// A replicated write arrived (§2.7), already stored as pending: check
    /// its dependencies — here for keys this node owns, by `DepCheck` for
    /// the others — and queue it behind earlier writes from its origin.
    pub fn on_replicate<M: From<PathMsg>, V: Versioned>(
        &mut self,
        env: &mut impl ServerEnv<M, V>,
        key: Key,
        stamp: Stamp,
        deps: &[Dep],
        written_us: u64,
    ) {
        self.queue_replicated(env, key, stamp, deps, written_us, false);
    }

    /// As [`DepNode::on_replicate`], for a write that also waits for the
    /// variant's say-so ([`DepNode::release`]): a write of an Eiger
    /// write-only transaction, committed in this DC only by its
    /// coordinator's decision. It holds back its origin's low-water mark
    /// like any pending write.
    pub fn on_replicate_held<M: From<PathMsg>, V: Versioned>(
        &mut self,
        env: &mut impl ServerEnv<M, V>,
        key: Key,
        stamp: Stamp,
        deps: &[Dep],
        written_us: u64,
    ) {
        self.queue_replicated(env, key, stamp, deps, written_us, true);
    }

    /// Whether a held write's dependency checks are all done. It may still
    /// wait for the previous write of its key from its origin: that keeps
    /// the order in which it counts as committed here (for checks of
    /// writes depending on it), but must not hold back its transaction,
    /// whose writes at other nodes may be queued behind writes of another
    /// transaction that waits for this node's previous write in turn.
    pub fn only_held(&self, stamp: Stamp) -> bool {
        self.queues.get(&stamp.origin()).and_then(|q| q.get(&stamp)).is_some_and(|w| {
            let prev = usize::from(w.prev_wait.is_some_and(|p| !self.is_committed(p)));
            w.held && w.missing == 1 + prev
        })
    }

    /// The held writes that came closer to [`only_held`](DepNode::only_held)
    /// since the last call (a check answered, a dependency or the previous
    /// write of the key committed here), so that a variant waiting for
    /// them looks at those alone rather than at everything it holds.
    pub fn take_held_progress(&mut self) -> Vec<Stamp> {
        std::mem::take(&mut self.held_progress)
    }

    /// Release a held write: once its checks are done it is ready to commit
    /// ([`DepNode::commit_ready`]). Releasing twice is harmless.
    pub fn release(&mut self, stamp: Stamp) {
        let origin = stamp.origin();
        if let Some(w) = self.queues.get_mut(&origin).and_then(|q| q.get_mut(&stamp))
            && w.held
        {
            w.held = false;
            self.one_less(origin, stamp);
        }
    }

    fn queue_replicated<M: From<PathMsg>, V: Versioned>(
        &mut self,
        env: &mut impl ServerEnv<M, V>,
        key: Key,
        stamp: Stamp,
        deps: &[Dep],
        written_us: u64,
        held: bool,
    ) {
        let origin = stamp.origin();
        debug_assert_ne!(origin, self.me);
        self.lamport = self.lamport.max(stamp.lamport());
        let now = env.now_us();
        // One key's writes from one origin still commit in stamp order
        // (module doc): wait for the previous one if it is pending.
        let mut missing = usize::from(held);
        let mut prev_wait = None;
        if let Some(prev) = self.last_pending.insert((origin, key.clone()), stamp)
            && !self.skip_checks
            && !self.is_committed(prev)
        {
            assert!(prev < stamp, "one origin's writes of a key arrive in stamp order");
            missing += 1;
            self.waiting.entry(origin).or_default().insert((prev, Waiter::Local { origin, stamp }));
            prev_wait = Some(prev).filter(|&p| deps.iter().all(|d| d.stamp != p));
        }
        let mut w = Waiting { key, stamp, written_us, arrived_us: now, missing, held, prev_wait };
        let mut by_owner: BTreeMap<NodeId, Vec<Dep>> = BTreeMap::new();
        for d in deps.iter().filter(|_| !self.skip_checks) {
            debug_assert!(d.stamp < stamp, "a dependency is stamped before its dependent");
            let Some(owner) = self.topology.server_for_key(self.dc, &d.key) else { continue };
            if owner == self.me {
                // Counted once per distinct stamp: the previous write of
                // this key (waited for above) may also be a listed dependency.
                if !self.satisfied(d)
                    && self
                        .waiting
                        .entry(d.stamp.origin())
                        .or_default()
                        .insert((d.stamp, Waiter::Local { origin, stamp }))
                {
                    w.missing += 1;
                }
            } else {
                by_owner.entry(owner).or_default().push(d.clone());
            }
        }
        for (to, deps) in by_owner {
            let id = self.next_check;
            self.next_check += 1;
            w.missing += 1;
            env.send(to, PathMsg::DepCheck { id, deps: deps.clone() }.into());
            self.sent_checks.insert(id, SentCheck { to, origin, stamp, deps, sent_us: now });
        }
        if w.missing == 0 {
            self.ready.insert((origin, stamp));
        }
        let replaced = self.queues.entry(origin).or_default().insert(stamp, w);
        assert!(replaced.is_none(), "a replicated write was queued twice");
    }

    /// `dep_check` handler (§2.7 step 3): answer at once if every
    /// dependency is committed here, else when the last one is. A repeated
    /// check (a retry) that is already waiting is ignored.
    pub fn on_dep_check<M: From<PathMsg>, V: Versioned>(
        &mut self,
        env: &mut impl ServerEnv<M, V>,
        from: NodeId,
        id: u64,
        deps: Vec<Dep>,
    ) {
        if self.topology.dc_of(from) != self.dc || self.remote_checks.contains_key(&(from, id)) {
            return;
        }
        let mut missing = 0;
        for d in deps {
            // A dependency on a key this node does not own is the asker's
            // mistake; it cannot be satisfied here, so it is not waited for.
            if self.topology.server_for_key(self.dc, &d.key) == Some(self.me) && !self.satisfied(&d) {
                missing += 1;
                self.waiting.entry(d.stamp.origin()).or_default().insert((d.stamp, Waiter::Remote { from, id }));
            }
        }
        if missing == 0 {
            env.send(from, PathMsg::DepOk { id, lamport: self.lamport }.into());
        } else {
            self.remote_checks.insert((from, id), missing);
        }
    }

    /// A check this node sent was answered (a repeated answer is ignored).
    pub fn on_dep_ok(&mut self, id: u64) {
        if let Some(c) = self.sent_checks.remove(&id) {
            self.one_less(c.origin, c.stamp);
        }
    }

    fn one_less(&mut self, origin: NodeId, stamp: Stamp) {
        if let Some(w) = self.queues.get_mut(&origin).and_then(|q| q.get_mut(&stamp)) {
            assert!(w.missing > 0, "a write's check was answered twice");
            w.missing -= 1;
            if w.missing == 0 {
                self.ready.insert((origin, stamp));
            }
            if w.held {
                self.held_progress.push(stamp);
            }
        }
    }

    /// The next write whose checks are all done, if any, whatever its
    /// place among its origin's writes (module doc). The variant commits it
    /// and then calls [`DepNode::committed`] before asking again.
    pub fn take_ready(&mut self, now_us: u64) -> Option<Ready> {
        let (o, stamp) = self.ready.pop_first()?;
        let q = self.queues.get_mut(&o).expect("a ready write is queued");
        let w = q.remove(&stamp).expect("a ready write is queued");
        assert_eq!(w.missing, 0, "a write is ready only once its checks passed");
        let waited_us = now_us.saturating_sub(w.arrived_us);
        Some(Ready { key: w.key, stamp: w.stamp, written_us: w.written_us, waited_us })
    }

    /// A replicated write from `stamp.origin()` was committed: record it,
    /// raise the origin's low-water mark as far as no write is pending
    /// below it, and release every waiter that needed no more.
    fn committed<M: From<PathMsg>, V: Versioned>(&mut self, env: &mut impl ServerEnv<M, V>, stamp: Stamp, key: &Key) {
        let o = stamp.origin();
        let slot = (o, key.clone());
        if self.last_pending.get(&slot) == Some(&stamp) {
            self.last_pending.remove(&slot);
        }
        let oldest_pending = self.queues.get(&o).and_then(|q| q.first_key_value()).map(|(&s, _)| s);
        let c = self.through.entry(o).or_default();
        assert!(!c.contains(stamp), "a write is committed once");
        c.above.insert(stamp);
        c.raise(oldest_pending);
        let low = c.low;
        let Some(w) = self.waiting.get_mut(&o) else { return };
        // Waiters for any stamp ≤ low, and for this one exactly.
        let rest = w.split_off(&(Stamp(low.0 + 1), Waiter::Local { origin: NodeId(0), stamp: Stamp::NONE }));
        let mut ready = std::mem::replace(w, rest);
        if stamp > low {
            let from = (stamp, Waiter::Local { origin: NodeId(0), stamp: Stamp::NONE });
            let exact: Vec<(Stamp, Waiter)> = w.range(from..).take_while(|(s, _)| *s == stamp).copied().collect();
            for e in exact {
                w.remove(&e);
                ready.insert(e);
            }
        }
        for (_, waiter) in ready {
            match waiter {
                Waiter::Local { origin, stamp } => self.one_less(origin, stamp),
                Waiter::Remote { from, id } => {
                    if let Some(n) = self.remote_checks.get_mut(&(from, id)) {
                        *n -= 1;
                        if *n == 0 {
                            self.remote_checks.remove(&(from, id));
                            env.send(from, PathMsg::DepOk { id, lamport: self.lamport }.into());
                        }
                    }
                }
            }
        }
    }

    /// Handle a message of the shared path. Returns the versions a
    /// `Settled` from an origin settled here, which a variant that keeps
    /// per-version metadata rewrites (COPS-GT; COPS has none).
    pub fn on_path<M: From<PathMsg>, V: Versioned>(
        &mut self,
        env: &mut impl ServerEnv<M, V>,
        from: NodeId,
        msg: PathMsg,
    ) -> Vec<(Stamp, Key)> {
        let equivalent = self.equivalents.contains(&from);
        match msg {
            PathMsg::DepCheck { id, deps } => self.on_dep_check(env, from, id, deps),
            PathMsg::DepOk { id, lamport } => {
                self.witness(lamport);
                self.on_dep_ok(id)
            }
            PathMsg::Through { stamp } if equivalent => {
                self.settle.on_through(&self.equivalents, from, stamp, env.now_us())
            }
            PathMsg::Settled { through } if equivalent => return self.settle.settle(from, through),
            _ => {}
        }
        Vec::new()
    }

    /// One settling tick (see [`Settle::tick`]): returns this node's own
    /// versions that became settled.
    pub fn settle_tick<M: From<PathMsg>, V: Versioned>(&mut self, env: &mut impl ServerEnv<M, V>) -> Vec<(Stamp, Key)> {
        let through: Vec<(NodeId, Stamp)> = self.equivalents.iter().map(|&e| (e, self.through(e))).collect();
        self.settle.tick(self.me, &through, env)
    }

    /// Re-send every check unanswered for `retry_us` (the receiver may have
    /// crashed and forgotten it).
    pub fn retry_checks<M: From<PathMsg>, V: Versioned>(&mut self, env: &mut impl ServerEnv<M, V>) {
        let now = env.now_us();
        for (&id, c) in self.sent_checks.iter_mut() {
            if now.saturating_sub(c.sent_us) >= self.retry_us {
                c.sent_us = now;
                env.send(c.to, PathMsg::DepCheck { id, deps: c.deps.clone() }.into());
            }
        }
    }
}

/// What is committed here from one origin (module doc): every write
/// stamped ≤ `low`, and the writes in `above`, all stamped > `low`, committed
/// while a write below them was still pending.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Committed {
    pub(super) low: Stamp,
    pub(super) above: BTreeSet<Stamp>,
}

impl Committed {
    fn contains(&self, s: Stamp) -> bool {
        s <= self.low || self.above.contains(&s)
    }

    /// Move into `low` every stamp of `above` below `oldest_pending` (all of
    /// them if nothing is pending): no write of the origin below them is
    /// missing, by FIFO delivery.
    fn raise(&mut self, oldest_pending: Option<Stamp>) {
        let keep = match oldest_pending {
            Some(p) => self.above.split_off(&p),
            None => BTreeSet::new(),
        };
        if let Some(&top) = self.above.last() {
            self.low = self.low.max(top);
        }
        self.above = keep;
        debug_assert!(self.above.first().is_none_or(|&a| a > self.low));
    }
}

/// The committed table as store metadata, per origin, little-endian: node
/// id (4 bytes), `low` (8), the number of stamps in `above` (4), and those
/// stamps (8 each). Usually 16 bytes per origin: `above` is empty unless a
/// write of that origin is blocked.
fn encode_table(t: &BTreeMap<NodeId, Committed>) -> Vec<u8> {
    let mut out = Vec::with_capacity(t.len() * 16);
    for (n, c) in t {
        out.extend_from_slice(&n.0.to_le_bytes());
        out.extend_from_slice(&c.low.0.to_le_bytes());
        out.extend_from_slice(&(c.above.len() as u32).to_le_bytes());
        for s in &c.above {
            out.extend_from_slice(&s.0.to_le_bytes());
        }
    }
    out
}

/// The inverse of [`encode_table`]; a truncated table (a damaged log) keeps
/// the origins read whole.
fn decode_table(mut b: &[u8]) -> BTreeMap<NodeId, Committed> {
    let mut t = BTreeMap::new();
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    while b.len() >= 16 {
        let (n, low, count) = (u32_at(b, 0), u64_at(b, 4), u32_at(b, 12) as usize);
        let Some(end) = count.checked_mul(8).and_then(|x| x.checked_add(16)).filter(|&e| e <= b.len()) else { break };
        let above = (0..count).map(|i| Stamp(u64_at(b, 16 + 8 * i))).collect();
        t.insert(NodeId(n), Committed { low: Stamp(low), above });
        b = &b[end..];
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_through_table_round_trips() {
        let above = [Stamp::new(12, NodeId(1)), Stamp::new(15, NodeId(1))].into();
        let t: BTreeMap<NodeId, Committed> = [
            (NodeId(1), Committed { low: Stamp::new(9, NodeId(1)), above }),
            (NodeId(70_000 % 65_536), Committed { low: Stamp(u64::MAX), above: BTreeSet::new() }),
        ]
        .into();
        let bytes = encode_table(&t);
        assert_eq!(decode_table(&bytes), t);
        // A truncated table keeps the origins read whole.
        assert_eq!(decode_table(&bytes[..bytes.len() - 3]).len(), 1);
    }

    #[test]
    fn the_low_water_mark_rises_past_committed_stamps_below_the_oldest_pending_one() {
        let s = |l| Stamp::new(l, NodeId(1));
        let mut c = Committed::default();
        // 5 is blocked; 7 and 9 commit above it.
        c.above.extend([s(7), s(9)]);
        c.raise(Some(s(5)));
        assert_eq!((c.low, c.above.len()), (Stamp::NONE, 2));
        assert!(c.contains(s(7)) && !c.contains(s(5)) && !c.contains(s(8)));
        // 3 commits: the mark rises to it, not past the pending 5.
        c.above.insert(s(3));
        c.raise(Some(s(5)));
        assert_eq!(c.low, s(3));
        // 5 commits, nothing pending: everything is below the mark.
        c.above.insert(s(5));
        c.raise(None);
        assert_eq!((c.low, c.above.len()), (s(9), 0));
    }
}
