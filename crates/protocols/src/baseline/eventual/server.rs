use super::config::*;
use super::msg::*;
use crate::kit::node::equivalents_elsewhere;
use causeway_core::{ClientId, DcId, Key, NodeCtx, NodeId, Observation, PartitionId, Server, ServerEnv, Topology};
use std::sync::Arc;

crate::kit::node::server_env!();

pub struct EventualServer {
    dc: DcId,
    /// Timestamps are unique per server: max(clock, last + 1).
    last_ts: u64,
    topology: Arc<Topology>,
    /// By partition: its servers in the other DCs, where a write here is
    /// replicated. Worked out once, not per write.
    peers: Vec<Vec<NodeId>>,
}

impl EventualServer {
    pub(super) fn new(_cfg: &Config, ctx: NodeCtx) -> EventualServer {
        let dc = ctx.role.dc();
        let peers = (0..ctx.topology.partitions())
            .map(|p| equivalents_elsewhere(&ctx.topology, PartitionId(p as u32), dc))
            .collect();
        EventualServer { dc, last_ts: 0, topology: ctx.topology, peers }
    }

    fn peers_of(&self, key: &[u8]) -> &[NodeId] {
        &self.peers[self.topology.partition_of(key).0 as usize]
    }
}

impl EventualServer {
    /// Insert, then forget everything but the winner: last-writer-wins needs
    /// one version per key, and reads never ask for an older one.
    fn apply(env: &mut impl Env, key: &[u8], version: Version) -> causeway_core::Landed {
        let order = (version.ts, version.dc);
        let landed = env.store().insert_collecting(key, version, |_| true);
        // Last-writer-wins never goes back: the key now holds the newer of
        // what it held and what arrived, and only that.
        let kept = env.store().latest_where_at(landed.index, |_| true).map(|(_, v)| (v.ts, v.dc));
        assert!(kept.is_some_and(|k| k >= order), "last-writer-wins went back: kept {kept:?} below {order:?}");
        assert_eq!(landed.left, 1, "last-writer-wins keeps one version per key");
        landed
    }
}

/// One row's columns written by a batch, for its `ReplicateRow`.
type RowWrites = Vec<(Key, Version)>;

impl EventualServer {
    /// A client's write: stamp, apply, replicate. The last of the store and
    /// the peers' messages takes the version itself, the others a copy.
    fn write(&mut self, env: &mut impl Env, key: Key, value: causeway_core::Value) {
        let version = self.stamp(env, &key, value);
        let Some((&last, rest)) = self.peers_of(&key).split_last() else {
            Self::apply(env, &key, version);
            return;
        };
        // The store's copy shares no reference count with the messages'
        // ([`causeway_core::copy_if_short`]).
        let stored = Version { value: causeway_core::copy_if_short(&version.value), ..version };
        Self::apply(env, &key, stored);
        for &n in rest {
            env.send(n, Msg::Replicate { key: key.clone(), version: version.clone() });
        }
        env.send(last, Msg::Replicate { key, version });
    }

    /// Stamp a client's write, visible here at once.
    fn stamp(&mut self, env: &mut impl Env, key: &Key, value: causeway_core::Value) -> Version {
        let before = self.last_ts;
        self.last_ts = env.now_us().max(self.last_ts + 1);
        // Stamps are unique per server, so ⟨ts, dc⟩ orders all writes totally.
        assert!(self.last_ts > before, "a stamp repeated");
        let version = Version { value, ts: self.last_ts, dc: self.dc };
        env.observe(Observation::Visible { key, value: &version.value, origin: self.dc, written_us: version.ts });
        version
    }

    /// A batch's writes, in order, each stamped and applied; a row written
    /// in several columns is replicated as one `ReplicateRow` (after the
    /// batch's other writes), a plain key as a `Replicate` of its own.
    fn write_batch(&mut self, env: &mut impl Env, writes: Vec<(Key, causeway_core::Value)>) {
        if !writes.iter().any(|(k, _)| causeway_core::column::is_location_key(k)) {
            // Plain keys only (every batch but a workload's columns): no
            // rows to gather, so nothing to count or copy per key.
            for (key, value) in writes {
                self.write(env, key, value);
            }
            return;
        }
        let row = |k: &Key| causeway_core::column::row_of(k).to_vec();
        let mut per_row: std::collections::BTreeMap<Vec<u8>, usize> = Default::default();
        for (k, _) in &writes {
            *per_row.entry(row(k)).or_default() += 1;
        }
        if per_row.len() == writes.len() {
            // One write per row (plain keys): each its own replication.
            for (key, value) in writes {
                self.write(env, key, value);
            }
            return;
        }
        let mut rows: Vec<(Vec<u8>, RowWrites)> = Vec::new();
        for (key, value) in writes {
            let r = row(&key);
            if per_row[&r] == 1 {
                self.write(env, key, value);
                continue;
            }
            let version = self.stamp(env, &key, value);
            Self::apply(env, &key, version.clone());
            match rows.iter_mut().find(|(x, _)| *x == r) {
                Some((_, ws)) => ws.push((key, version)),
                None => rows.push((r, vec![(key, version)])),
            }
        }
        for (_, writes) in rows {
            for &n in self.peers_of(&writes[0].0) {
                env.send(n, Msg::ReplicateRow { writes: writes.clone() });
            }
        }
    }

    /// A replicated write: applied, and reported if it is now the newest.
    fn on_replicated(env: &mut impl Env, key: Key, version: Version) {
        let (origin, written_us) = (version.dc, version.ts);
        let landed = Self::apply(env, &key, version);
        if landed.inserted == causeway_core::Inserted::Newest {
            env.observe_visible_in_store(origin, written_us, |store| store.latest_where_at(landed.index, |_| true));
        }
    }
}

impl Server for EventualServer {
    type Msg = Msg;
    type Version = Version;

    /// After a restart, stamp above everything stored: a write in the same
    /// clock tick as one logged before the crash would otherwise take its
    /// ⟨ts, dc⟩, be dropped as a duplicate, and still be acknowledged.
    fn on_start(&mut self, env: &mut impl ServerEnv<Msg, Version>) {
        let keys = env.store().keys_sorted();
        for k in keys {
            if let Some(v) = env.store().latest(&k) {
                self.last_ts = self.last_ts.max(v.ts);
            }
        }
    }

    fn on_client(&mut self, env: &mut impl ServerEnv<Msg, Version>, from: ClientId, msg: Msg) {
        let me = env.node();
        let misplaced = |key: &Key| self.topology.server_for_key(self.dc, key) != Some(me);
        let bad = match &msg {
            Msg::GetReq { key } | Msg::PutReq { key, .. } => Some(key).filter(|k| misplaced(k)),
            Msg::PutBatch { writes } => writes.iter().map(|(k, _)| k).find(|k| misplaced(k)),
            _ => None,
        };
        if let Some(key) = bad {
            let reason = format!("node {} does not store this key", env.node());
            return env.reply(from, Msg::Refused { key: key.clone(), reason });
        }
        match msg {
            Msg::GetReq { key } => {
                let value = env.store().latest(&key).map(|v| causeway_core::copy_if_short(&v.value));
                env.reply(from, Msg::GetReply { key, value });
            }
            // Each key answered on its own terms: a misplaced one refused
            // by name, the others read.
            Msg::GetBatch { keys } => {
                let mut values = Vec::with_capacity(keys.len());
                for key in keys {
                    if misplaced(&key) {
                        let reason = format!("node {me} does not store this key");
                        env.reply(from, Msg::Refused { key, reason });
                    } else {
                        let value = env.store().latest(&key).map(|v| causeway_core::copy_if_short(&v.value));
                        values.push((key, value));
                    }
                }
                env.reply(from, Msg::GetBatchReply { values });
            }
            Msg::PutReq { key, value } => {
                self.write(env, key, value);
                env.reply(from, Msg::PutReply);
            }
            Msg::PutBatch { writes } => {
                self.write_batch(env, writes);
                env.reply(from, Msg::PutReply);
            }
            _ => {} // replies and peer messages never come from clients; the runtime rejects them at the edge
        }
    }

    fn on_peer(&mut self, env: &mut impl ServerEnv<Msg, Version>, _from: NodeId, msg: Msg) {
        match msg {
            Msg::Replicate { key, version } => Self::on_replicated(env, key, version),
            Msg::ReplicateRow { writes } => {
                for (key, version) in writes {
                    Self::on_replicated(env, key, version);
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, _env: &mut impl ServerEnv<Msg, Version>, _token: u64) {}
}
