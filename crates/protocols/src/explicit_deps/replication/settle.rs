//! # Settling: knowing when a write is committed in every DC
//!
//! Lloyd §6.1 collects metadata once a write is
//! committed in all DCs: the write is flagged **never-depend**, clients drop
//! it from their contexts, and (COPS-GT) its stored dependency list is
//! dropped. The dissertation has each remote DC notify the write's origin per
//! version. Here (a deviation) every server tells each origin, once per tick,
//! how far it has committed that origin's writes — one stamp, the
//! low-water mark of [`dep_check`](crate::explicit_deps::replication::dep_check)
//! (every write of the origin through it is committed; writes committed above
//! it, behind a blocked one, are reported once the mark passes them) — and the origin, `hold_us` after every DC has a write, tells all
//! DCs, again with one stamp, that its writes through it are settled. O(1)
//! messages per tick instead of per write.
//!
//! `hold_us` is 0 for COPS (a dependency on a write committed everywhere
//! never needs checking) and `trans_time` for COPS-GT (a transaction still
//! running may need the dependency list, §6.1).

use super::msg::{PathMsg, Stamp};
use causeway_core::{Key, NodeId, ServerEnv};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// One partition server's settling state.
#[derive(Default)]
pub struct Settle {
    /// Wait this long after a write is everywhere before settling it.
    hold_us: u64,
    /// Send `Through` unchanged every this many ticks (the origin may have
    /// restarted and forgotten).
    refresh_ticks: u64,
    ticks: u64,
    /// Per equivalent: how far it has committed this node's writes.
    reported: BTreeMap<NodeId, Stamp>,
    /// Per equivalent: the `Through` last sent to it.
    sent_through: BTreeMap<NodeId, Stamp>,
    /// This node's writes not yet known committed in every DC, in stamp order.
    unreplicated: VecDeque<Stamp>,
    /// Own writes committed everywhere, with the time (this node's clock)
    /// from which they are settled.
    holding: VecDeque<(Stamp, u64)>,
    /// Per origin: committed versions not yet settled, by stamp (they
    /// commit out of stamp order when one is blocked)
    /// (only for variants that rewrite settled versions: COPS-GT).
    unsettled: BTreeMap<NodeId, BTreeSet<(Stamp, Key)>>,
    /// Per origin: its writes through this stamp are settled.
    settled: BTreeMap<NodeId, Stamp>,
}

impl Settle {
    pub fn new(hold_us: u64, tick_us: u64) -> Settle {
        Settle { hold_us, refresh_ticks: (1_000_000 / tick_us.max(1)).max(1), ..Settle::default() }
    }

    /// This node stamped a write.
    pub fn own_write(&mut self, stamp: Stamp) {
        self.unreplicated.push_back(stamp);
    }

    /// A version was committed here (own or replicated) and will need
    /// rewriting when settled ([`Settle::settle`] returns it).
    pub fn committed(&mut self, stamp: Stamp, key: Key) {
        self.unsettled.entry(stamp.origin()).or_default().insert((stamp, key));
    }

    /// The oldest own write not yet committed everywhere.
    pub fn oldest_unreplicated(&self) -> Option<Stamp> {
        self.unreplicated.front().copied()
    }

    /// An equivalent reported how far it committed this node's writes.
    /// `equivalents` are this node's partition's servers in the other DCs.
    pub fn on_through(&mut self, equivalents: &[NodeId], from: NodeId, stamp: Stamp, now_us: u64) {
        let r = self.reported.entry(from).or_default();
        *r = (*r).max(stamp);
        self.advance(equivalents.iter().copied(), now_us);
    }

    fn advance(&mut self, equivalents: impl Iterator<Item = NodeId>, now_us: u64) {
        let everywhere = equivalents.map(|e| self.reported.get(&e).copied().unwrap_or_default()).min();
        while let Some(&s) = self.unreplicated.front() {
            if everywhere.is_some_and(|e| e < s) {
                break;
            }
            self.unreplicated.pop_front();
            self.holding.push_back((s, now_us + self.hold_us));
        }
    }

    /// One tick: report to each origin how far its writes are committed
    /// here; when this node's own writes are settled through a newer stamp,
    /// tell the equivalents and settle them here too, returning the versions
    /// to rewrite (as [`Settle::settle`]). `through` holds, per equivalent,
    /// how far this node has committed that equivalent's writes.
    pub fn tick<M: From<PathMsg>, V: causeway_core::Versioned>(
        &mut self,
        me: NodeId,
        through: &[(NodeId, Stamp)],
        env: &mut impl ServerEnv<M, V>,
    ) -> Vec<(Stamp, Key)> {
        let now_us = env.now_us();
        self.ticks += 1;
        let refresh = self.ticks.is_multiple_of(self.refresh_ticks);
        for &(e, t) in through {
            if refresh || self.sent_through.get(&e) != Some(&t) {
                self.sent_through.insert(e, t);
                env.send(e, PathMsg::Through { stamp: t }.into());
            }
        }
        self.advance(through.iter().map(|&(e, _)| e), now_us);
        let mut settled = None;
        while let Some(&(s, at)) = self.holding.front()
            && at <= now_us
        {
            self.holding.pop_front();
            settled = Some(s);
        }
        let Some(s) = settled else { return Vec::new() };
        for &(e, _) in through {
            env.send(e, PathMsg::Settled { through: s }.into());
        }
        self.settle(me, s)
    }

    /// Whether the write stamped `stamp` is settled: committed in every DC
    /// (for `hold_us`). After a restart this is false until the origin next
    /// reports, which is merely conservative.
    pub fn is_settled(&self, stamp: Stamp) -> bool {
        self.settled.get(&stamp.origin()).is_some_and(|&t| stamp <= t)
    }

    /// `origin`'s writes through `through` are settled: the versions
    /// recorded with [`Settle::committed`] to rewrite, oldest first (some
    /// may since have been collected).
    pub fn settle(&mut self, origin: NodeId, through: Stamp) -> Vec<(Stamp, Key)> {
        let t = self.settled.entry(origin).or_default();
        *t = (*t).max(through);
        let mut out = Vec::new();
        let Some(q) = self.unsettled.get_mut(&origin) else { return out };
        while let Some((s, _)) = q.first()
            && *s <= through
        {
            out.push(q.pop_first().expect("first exists"));
        }
        out
    }

    /// After a restart: the committed versions not flagged yet, sorted by
    /// stamp; own ones are treated as not yet everywhere until the
    /// equivalents' next reports.
    pub fn rebuild(&mut self, me: NodeId, mut unsettled: Vec<(Stamp, Key)>) {
        unsettled.sort();
        for (s, key) in unsettled {
            if s.origin() == me {
                self.unreplicated.push_back(s);
            }
            self.committed(s, key);
        }
    }
}
