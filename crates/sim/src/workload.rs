//! Operation generators for closed-loop simulated clients: YCSB's core
//! workload under its own names, plus the seeds' shapes (ROTs over a chosen
//! number of partitions, local versus remote transactions under partial
//! replication, DKVF's amplified insert, COPS's key groups).
//!
//! A client asks for a *request*: usually one operation, but an amplified
//! insert is `amplification` PUTs issued one after another, and the request's
//! end-to-end latency is what Roohitavaf's query-amplification experiment plots.

use crate::scenario::{Distribution, Scenario, ScriptedClient, ScriptedOp, Workload};
use bytes::Bytes;
use causeway_core::{DcId, Key, Op, PartitionId, Topology, stable_hash, tagged_value};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

/// The latency name under which whole amplified requests are reported.
pub const AMPLIFIED: &str = "amplified";
/// The latency name of whole multi-key updates (`update_size` > 1), issued
/// as PUTs one after another (not `batch`, the latency name of one
/// `Op::Batch`, whose writes are sent at once).
pub const UPDATE_BATCH: &str = "update_batch";

/// An entry of `values` drawn with probability proportional to its weight;
/// `None` when there are none (the scalar setting applies).
fn pick_weighted(values: &[usize], weights: &[f64], rng: &mut ChaCha8Rng) -> Option<usize> {
    if values.is_empty() {
        return None;
    }
    let total: f64 = weights.iter().sum();
    let mut x = rng.random::<f64>() * total;
    for (v, w) in values.iter().zip(weights) {
        if x < *w {
            return Some(*v);
        }
        x -= w;
    }
    values.last().copied()
}

/// The size of a value to write: drawn from `fieldlength_values`, else `fieldlength`.
fn value_size(w: &Workload, rng: &mut ChaCha8Rng) -> usize {
    pick_weighted(&w.fieldlength_values, &w.fieldlength_weights, rng).unwrap_or(w.fieldlength)
}

/// Column `i` of `row` (Lloyd's column-family data model, §3 of the
/// NSDI 2013 paper): column 0 is the row's default location, the plain key
/// itself, so that one column per key is exactly the key-value workload;
/// column `i` > 0 is `row:default:c<i>`, which every protocol stores on
/// the row's partition ([`causeway_core::column`]) — Eiger as a column of
/// the row, the others as one more key placed with it.
pub fn column_key(row: &Key, i: usize) -> Key {
    if i == 0 {
        return row.clone();
    }
    let family = causeway_core::column::DEFAULT_FAMILY.as_bytes();
    causeway_core::column::location_key(row, family, format!("c{i}").as_bytes()).expect("a workload row is a valid row")
}

/// The first `n` columns of `row`.
fn columns(row: &Key, n: usize) -> impl Iterator<Item = Key> + '_ {
    (0..n).map(move |i| column_key(row, i))
}

/// A read's locations: `columns_per_read` columns of each row, a row's
/// together (the rows themselves when it is 1).
fn read_columns(w: &Workload, rows: Vec<Key>) -> Vec<Key> {
    match w.columns_per_read {
        1 => rows,
        n => rows.iter().flat_map(|r| columns(r, n)).collect(),
    }
}

/// `n` columns of each row, each with a fresh value of the workload's
/// size, a row's together (with `n` = 1, one write per row, drawn as
/// plain keys' writes always were).
fn write_columns(
    w: &Workload,
    rows: Vec<Key>,
    n: usize,
    rng: &mut ChaCha8Rng,
    write_id: &mut impl FnMut() -> u64,
) -> Vec<(Key, causeway_core::Value)> {
    if n == 1 {
        return rows.into_iter().map(|k| (k, tagged_value(write_id(), value_size(w, rng)))).collect();
    }
    let mut out = Vec::with_capacity(rows.len() * n);
    for row in &rows {
        for key in columns(row, n) {
            out.push((key, tagged_value(write_id(), value_size(w, rng))));
        }
    }
    out
}

/// A write of one row's `columns_per_write` columns: a PUT of one, else
/// one non-atomic batch on the row's server (Cassandra's `batch_mutate`
/// of a row's columns: one request).
fn row_write(w: &Workload, row: Key, rng: &mut ChaCha8Rng, write_id: &mut impl FnMut() -> u64) -> Op {
    match w.columns_per_write {
        1 => Op::Put { key: row, value: tagged_value(write_id(), value_size(w, rng)) },
        n => Op::Batch { writes: write_columns(w, vec![row], n, rng, write_id) },
    }
}

/// One request of a client: the operations it issues back to back, and the
/// name its end-to-end latency is reported under when it has several.
pub struct Request {
    pub ops: VecDeque<Op>,
    pub name: Option<&'static str>,
    /// An interactive transaction: its plan (`ops` then holds its START).
    pub interactive: Option<crate::interactive::Plan>,
}

/// Record `i` of the key space: `user<i>`, as YCSB names them.
pub fn record_key(i: u64) -> Key {
    Bytes::from(format!("user{i}"))
}

/// How many records the key space starts with (`recordcount`, or one group
/// of `keys_per_group` per workload client), before any insert.
pub fn initial_keys(w: &Workload, clients: u64) -> u64 {
    match w.requestdistribution {
        Distribution::Keygroup => clients.max(1) * w.keys_per_group,
        _ => w.recordcount,
    }
}

/// The key space: `user<i>` like YCSB's, grown by inserts, indexed by
/// partition for the shapes that choose partitions first.
pub struct KeySpace {
    keys: Vec<Key>,
    /// Key indices stored in each partition.
    by_partition: Vec<Vec<u32>>,
    zipf: Option<Zipfian>,
    /// Under `zipfian`, one generator per partition over the keys it starts
    /// with, for the shapes that choose partitions first: PaRiS's and
    /// Contrarian's workloads are "zipf 0.99 within a partition" (Spirovska et
    /// al., PaRiS §VI-A; Didona et al., Contrarian Table 1).
    zipf_in: Vec<Zipfian>,
    /// For key groups: the number of groups (one per workload client).
    groups: u64,
}

impl KeySpace {
    /// `clients` is the number of workload clients (key groups need it).
    pub fn new(w: &Workload, topology: &Topology, clients: u64) -> KeySpace {
        let count = initial_keys(w, clients);
        let groups = match w.requestdistribution {
            Distribution::Keygroup => clients.max(1),
            _ => 0,
        };
        let zipf = match w.requestdistribution {
            Distribution::Zipfian | Distribution::Latest => Some(Zipfian::new(count, w.zipfian_constant)),
            _ => None,
        };
        let mut ks = KeySpace {
            keys: Vec::with_capacity(count as usize),
            by_partition: vec![Vec::new(); topology.partitions()],
            zipf,
            zipf_in: Vec::new(),
            groups,
        };
        for _ in 0..count {
            ks.push(topology);
        }
        if w.requestdistribution == Distribution::Zipfian {
            ks.zipf_in = ks.by_partition.iter().map(|p| Zipfian::new(p.len() as u64, w.zipfian_constant)).collect();
        }
        ks
    }

    fn push(&mut self, topology: &Topology) -> usize {
        let i = self.keys.len();
        let key = record_key(i as u64);
        self.by_partition[topology.partition_of(&key).idx()].push(i as u32);
        self.keys.push(key);
        i
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// A key by the workload's request distribution, for workload client `client`.
    pub fn pick(&self, w: &Workload, client: u64, rng: &mut ChaCha8Rng) -> &Key {
        &self.keys[self.pick_index(w, client, rng)]
    }

    /// [`KeySpace::pick`]'s key as its index in the key space.
    fn pick_index(&self, w: &Workload, client: u64, rng: &mut ChaCha8Rng) -> usize {
        let n = self.keys.len() as u64;
        let i = match w.requestdistribution {
            Distribution::Uniform => rng.random_range(0..n),
            // Scrambled, as YCSB does, so hot keys spread over partitions.
            Distribution::Zipfian => stable_hash(&self.zipf().next(rng).to_le_bytes()) % n,
            // YCSB's "latest": zipfian over recency, the newest insert hottest.
            Distribution::Latest => n - 1 - self.zipf().next(rng).min(n - 1),
            // YCSB's hotspot: `hotspotopnfraction` of operations go to the
            // first `hotspotdatafraction` of the keys.
            Distribution::Hotspot => {
                let hot = ((n as f64 * w.hotspotdatafraction) as u64).clamp(1, n);
                if rng.random::<f64>() < w.hotspotopnfraction || hot == n {
                    rng.random_range(0..hot)
                } else {
                    rng.random_range(hot..n)
                }
            }
            // Lloyd §7: a group drawn from a normal
            // distribution centred on the client's own group, then a key
            // uniformly inside it. Variance 0 keeps a client in its group.
            Distribution::Keygroup => {
                let z = standard_normal(rng) * w.keygroup_variance.sqrt();
                let g = (client as f64 + z).round() as i64;
                let g = g.rem_euclid(self.groups as i64) as u64;
                g * w.keys_per_group + rng.random_range(0..w.keys_per_group)
            }
        };
        i as usize
    }

    fn zipf(&self) -> &Zipfian {
        self.zipf.as_ref().expect("zipfian distributions build their generator")
    }

    /// A key of partition `p`: by a zipfian over the partition's own keys
    /// under `zipfian` (scrambled, as [`KeySpace::pick_index`] scrambles the
    /// global one, so keys inserted later are drawn too), uniformly under
    /// every other distribution (`latest`, `hotspot` and key groups rank keys
    /// by their place in the whole key space, which a partition's share of it
    /// does not keep).
    fn pick_in(&self, p: PartitionId, rng: &mut ChaCha8Rng) -> Option<&Key> {
        self.pick_index_in(p, rng).map(|i| &self.keys[i])
    }

    /// [`KeySpace::pick_in`]'s key as its index in the key space.
    fn pick_index_in(&self, p: PartitionId, rng: &mut ChaCha8Rng) -> Option<usize> {
        let ks = &self.by_partition[p.idx()];
        if ks.is_empty() {
            return None;
        }
        let at = match self.zipf_in.get(p.idx()) {
            // The partition joins the hash, so that the hottest keys of
            // partitions of equal size are not at one place in each list.
            Some(z) if z.n > 0 => {
                // A stack array, not a concatenated Vec: this runs for
                // every key of every transaction.
                let mut bytes = [0u8; 16];
                bytes[..8].copy_from_slice(&z.next(rng).to_le_bytes());
                bytes[8..].copy_from_slice(&u64::from(p.0).to_le_bytes());
                stable_hash(&bytes) as usize % ks.len()
            }
            _ => rng.random_range(0..ks.len()),
        };
        Some(ks[at] as usize)
    }
}

/// Box–Muller: one standard normal sample. (Hand-written: it is the only
/// distribution the workloads need beyond `rand`'s uniform.)
fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The random workload of a run: the key space, and the state requests share
/// across clients (inserted keys).
pub struct Generator {
    pub keys: KeySpace,
    topology: std::sync::Arc<Topology>,
    pools: Pools,
}

/// The partitions a transaction's keys can come from, per DC: computed once
/// (a transaction is chosen for every operation) and again only when an
/// insert gives keys to a partition that had none.
struct Pools {
    /// Partitions holding keys, ascending.
    all: Vec<PartitionId>,
    /// Per DC: those of `all` it stores, and those it does not.
    here: Vec<Vec<PartitionId>>,
    away: Vec<Vec<PartitionId>>,
}

impl Pools {
    fn new(keys: &KeySpace, topology: &Topology) -> Pools {
        let all: Vec<PartitionId> = (0..topology.partitions() as u32)
            .map(PartitionId)
            .filter(|p| !keys.by_partition[p.idx()].is_empty())
            .collect();
        let split = |stored: bool| -> Vec<Vec<PartitionId>> {
            topology
                .dc_ids()
                .map(|d| all.iter().copied().filter(|p| topology.stores(d, *p) == stored).collect())
                .collect()
        };
        Pools { here: split(true), away: split(false), all }
    }
}

impl Generator {
    pub fn new(w: &Workload, topology: std::sync::Arc<Topology>, clients: u64) -> Generator {
        let keys = KeySpace::new(w, &topology, clients);
        let pools = Pools::new(&keys, &topology);
        Generator { keys, topology, pools }
    }

    /// The next request of workload client `client` (attached to `dc`).
    /// `write_id` hands out the unique ids written values carry.
    pub fn next_request(
        &mut self,
        w: &Workload,
        client: u64,
        dc: DcId,
        rng: &mut ChaCha8Rng,
        mut write_id: impl FnMut() -> u64,
    ) -> Request {
        let total = w.readproportion
            + w.updateproportion
            + w.insertproportion
            + w.rotproportion
            + w.wotproportion
            + w.batchproportion
            + w.txnproportion
            + w.interactiveproportion;
        let x = rng.random::<f64>() * total;
        let one = |op| Request { ops: VecDeque::from([op]), name: None, interactive: None };
        if x < w.readproportion {
            let row = self.keys.pick(w, client, rng).clone();
            return one(match w.columns_per_read {
                1 => Op::Get { key: row },
                // A read of several columns of a row is a read-only
                // transaction over them (as `causeway get ROW F:C…` is).
                n => Op::Rot { keys: columns(&row, n).collect() },
            });
        }
        let x = x - w.readproportion;
        if x < w.updateproportion + w.insertproportion {
            if w.amplification > 0 {
                return self.amplified(w, client, rng, write_id);
            }
            if x < w.updateproportion && w.update_size > 1 {
                let keys = self.txn_keys(w, w.update_size, client, dc, rng);
                let ops = keys.into_iter().map(|key| row_write(w, key, rng, &mut write_id)).collect();
                return Request { ops, name: Some(UPDATE_BATCH), interactive: None };
            }
            let key = if x < w.updateproportion {
                self.keys.pick(w, client, rng).clone()
            } else {
                let i = self.keys.push(&self.topology);
                if self.keys.by_partition[self.topology.partition_of(&self.keys.keys[i]).idx()].len() == 1 {
                    self.pools = Pools::new(&self.keys, &self.topology);
                }
                self.keys.keys[i].clone()
            };
            return one(row_write(w, key, rng, &mut write_id));
        }
        let x = x - w.updateproportion - w.insertproportion;
        if x < w.rotproportion {
            let size = match pick_weighted(&w.rot_size_values, &w.rot_size_weights, rng) {
                Some(n) => n.min(self.keys.len()),
                None => w.rot_size,
            };
            return one(Op::Rot { keys: read_columns(w, self.txn_keys(w, size, client, dc, rng)) });
        }
        let x = x - w.rotproportion;
        let mut writes =
            |keys: Vec<Key>, rng: &mut ChaCha8Rng| write_columns(w, keys, w.columns_per_write, rng, &mut write_id);
        if x < w.wotproportion {
            let keys = self.txn_keys(w, w.wot_size, client, dc, rng);
            return one(Op::Wot { writes: writes(keys, rng) });
        }
        let x = x - w.wotproportion;
        if x < w.batchproportion {
            let keys = self.txn_keys(w, w.wot_size, client, dc, rng);
            return one(Op::Batch { writes: writes(keys, rng) });
        }
        let x = x - w.batchproportion;
        if x < w.txnproportion || w.interactiveproportion == 0.0 {
            let reads = read_columns(w, self.txn_keys(w, w.txn_reads, client, dc, rng));
            let keys = self.txn_keys(w, w.txn_writes, client, dc, rng);
            return one(Op::Txn { reads, writes: writes(keys, rng) });
        }
        // An interactive transaction: the first round reads half the keys,
        // the second chooses among the rest by what the first returned.
        let mut reads = read_columns(w, self.txn_keys(w, w.txn_reads, client, dc, rng));
        let candidates = reads.split_off(reads.len().div_ceil(2));
        let keys = self.txn_keys(w, w.txn_writes, client, dc, rng);
        let plan = crate::interactive::Plan { first: reads, candidates, writes: writes(keys, rng) };
        Request { ops: VecDeque::from([Op::Begin]), name: None, interactive: Some(plan) }
    }

    /// YCSB's load phase for workload client `client` of `clients`: a PUT
    /// of every key `i` with `i mod clients == client`, in order, with
    /// values of the workload's sizes.
    pub fn preload_ops(
        &self,
        w: &Workload,
        client: u64,
        clients: u64,
        rng: &mut ChaCha8Rng,
        mut write_id: impl FnMut() -> u64,
    ) -> VecDeque<Op> {
        let clients = clients.max(1) as usize;
        let n = w.columns_per_read.max(w.columns_per_write);
        (client as usize..self.keys.len())
            .step_by(clients)
            .map(|i| {
                let row = self.keys.keys[i].clone();
                match n {
                    1 => Op::Put { key: row, value: tagged_value(write_id(), value_size(w, rng)) },
                    n => Op::Batch { writes: write_columns(w, vec![row], n, rng, &mut write_id) },
                }
            })
            .collect()
    }

    /// DKVF's amplified insert (Roohitavaf §8, Fig 5.2): `amplification` PUTs
    /// sent round-robin over the partitions, one after another; the request
    /// completes when the last is acknowledged.
    fn amplified(
        &mut self,
        w: &Workload,
        client: u64,
        rng: &mut ChaCha8Rng,
        mut write_id: impl FnMut() -> u64,
    ) -> Request {
        let parts = self.topology.partitions() as u32;
        let start = rng.random_range(0..parts);
        let ops = (0..w.amplification)
            .map(|i| {
                let p = PartitionId((start + i) % parts);
                let key = match self.keys.pick_in(p, rng) {
                    Some(k) => k.clone(),
                    None => self.keys.pick(w, client, rng).clone(),
                };
                Op::Put { key, value: tagged_value(write_id(), w.fieldlength) }
            })
            .collect();
        Request { ops, name: Some(AMPLIFIED), interactive: None }
    }

    /// The keys of a transaction: `size` distinct keys, from exactly
    /// `min(rot_partitions, size)` partitions when that is set, and under
    /// partial replication local (all partitions stored in the client's DC)
    /// with probability `local_txn_ratio`.
    ///
    /// Keys are drawn as indices and compared as such (PaRiS's 20-key
    /// transactions spent a tenth of the simulator's time comparing key
    /// bytes here).
    fn txn_keys(&self, w: &Workload, size: usize, client: u64, dc: DcId, rng: &mut ChaCha8Rng) -> Vec<Key> {
        let mut ks: Vec<usize> = Vec::with_capacity(size);
        let local = w.local_txn_ratio.map(|r| rng.random::<f64>() < r);
        let keys = |ks: Vec<usize>| ks.into_iter().map(|i| self.keys.keys[i].clone()).collect();
        if w.rot_partitions == 0 && local.is_none() {
            while ks.len() < size {
                let k = self.keys.pick_index(w, client, rng);
                if !ks.contains(&k) {
                    ks.push(k);
                }
            }
            return keys(ks);
        }
        let want = if w.rot_partitions == 0 { size } else { (w.rot_partitions as usize).min(size) };
        let parts = self.choose_partitions(want, dc, local, rng);
        // Spread the keys round-robin over the chosen partitions; a partition
        // with too few keys left lends its turn to the others.
        let mut stuck = 0;
        let mut i = 0;
        while ks.len() < size && stuck < 64 * size {
            let p = parts[i % parts.len()];
            i += 1;
            match self.keys.pick_index_in(p, rng) {
                Some(k) if !ks.contains(&k) => ks.push(k),
                _ => stuck += 1,
            }
        }
        while ks.len() < size {
            let k = self.keys.pick_index(w, client, rng);
            if !ks.contains(&k) {
                ks.push(k);
            }
        }
        keys(ks)
    }

    /// `want` distinct partitions holding keys. `local = Some(true)`: all
    /// stored in `dc`; `Some(false)`: at least one not stored there (when
    /// such a partition exists).
    fn choose_partitions(&self, want: usize, dc: DcId, local: Option<bool>, rng: &mut ChaCha8Rng) -> Vec<PartitionId> {
        let (all, here, away) = (&self.pools.all, &self.pools.here[dc.idx()], &self.pools.away[dc.idx()]);
        let mut out = Vec::with_capacity(want);
        let mut take_from = |pool: &[PartitionId], n: usize, out: &mut Vec<PartitionId>| {
            let mut pool: Vec<PartitionId> = pool.iter().copied().filter(|p| !out.contains(p)).collect();
            for _ in 0..n.min(pool.len()) {
                out.push(pool.swap_remove(rng.random_range(0..pool.len())));
            }
        };
        match local {
            Some(true) if !here.is_empty() => take_from(here, want, &mut out),
            // (A transaction with no reads wants no partitions for them.)
            Some(false) if !away.is_empty() && want > 0 => {
                take_from(away, 1, &mut out);
                take_from(all, want - 1, &mut out);
            }
            _ => take_from(all, want, &mut out),
        }
        out
    }
}

/// YCSB's ZipfianGenerator (Gray et al., "Quickly generating billion-record
/// synthetic databases"): item 0 is the most popular.
pub struct Zipfian {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipfian {
    pub fn new(n: u64, theta: f64) -> Zipfian {
        let zeta = |n: u64| (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let zetan = zeta(n);
        let zeta2 = zeta(2.min(n));
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipfian { n, theta, alpha, zetan, eta }
    }

    pub fn next(&self, rng: &mut ChaCha8Rng) -> u64 {
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.n - 1);
        }
        let v = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.n - 1)
    }
}

/// Reads of every key the workload wrote, after the load: here rather than
/// in `scenario.rs`, which describes runs and knows nothing of key spaces.
impl Scenario {
    /// The sessions of the final reads ([`Scenario::final_reads_after_ms`]),
    /// for a run with `workload_clients` workload clients; none without it.
    pub fn final_readers(&self, workload_clients: u64) -> Vec<ScriptedClient> {
        let Some(after_ms) = self.final_reads_after_ms else { return Vec::new() };
        let at_us = (self.duration_ms + after_ms) * 1_000;
        let keys = initial_keys(&self.workload, workload_clients);
        let readers = u64::from(self.workload.clients_per_dc.max(1));
        let mut sessions = Vec::new();
        for dc in 0..self.topology.dcs {
            for first in 0..readers.min(keys) {
                let ops = (first..keys)
                    .step_by(readers as usize)
                    .enumerate()
                    .map(|(n, i)| ScriptedOp {
                        at_us: if n == 0 { at_us } else { 0 },
                        op: Op::Get { key: record_key(i) },
                        from_dc: None,
                        checking_group: None,
                    })
                    .collect();
                sessions.push(ScriptedClient { dc, ops });
            }
        }
        sessions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::TopologySpec;
    use rand::SeedableRng;
    use std::sync::Arc;

    fn generator(w: &Workload, spec: TopologySpec, clients: u64) -> Generator {
        Generator::new(w, Arc::new(Topology::new(spec).unwrap()), clients)
    }

    fn request(g: &mut Generator, w: &Workload, client: u64, rng: &mut ChaCha8Rng) -> Request {
        let mut id = 0;
        g.next_request(w, client, DcId(0), rng, || {
            id += 1;
            id
        })
    }

    #[test]
    fn zipfian_favours_low_ranks() {
        let z = Zipfian::new(1000, 0.99);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut hits = [0u32; 1000];
        for _ in 0..100_000 {
            hits[z.next(&mut rng) as usize] += 1;
        }
        assert!(hits[0] > hits[10] && hits[10] > hits[500]);
        assert!(hits[0] > 10_000, "rank 0 should take >10% at θ=0.99, got {}", hits[0]);
    }

    /// PaRiS's and Contrarian's "zipf 0.99 within a partition": a
    /// transaction's partitions are chosen first, and its keys inside each
    /// follow the request distribution, not a uniform draw.
    #[test]
    fn transaction_keys_follow_the_zipfian_inside_their_partitions() {
        let rots = |requestdistribution| {
            let w = Workload {
                recordcount: 4_000,
                readproportion: 0.0,
                updateproportion: 0.0,
                rotproportion: 1.0,
                rot_size: 2,
                rot_partitions: 2,
                requestdistribution,
                zipfian_constant: 0.99,
                ..Default::default()
            };
            let mut g = generator(&w, TopologySpec::full(1, 4), 1);
            let mut rng = ChaCha8Rng::seed_from_u64(3);
            let mut hits: std::collections::HashMap<Key, u32> = Default::default();
            for _ in 0..5_000 {
                let Some(Op::Rot { keys }) = request(&mut g, &w, 0, &mut rng).ops.pop_front() else {
                    panic!("expected a rot")
                };
                let mut parts: Vec<_> = keys.iter().map(|k| g.topology.partition_of(k)).collect();
                parts.dedup();
                assert_eq!(parts.len(), 2, "{keys:?}");
                for k in keys {
                    *hits.entry(k).or_default() += 1;
                }
            }
            hits.into_values().max().unwrap()
        };
        // 10 000 draws over 4 partitions of ~1 000 keys: a partition's
        // hottest key takes about a ninth of that partition's draws under
        // zipf 0.99 (≈ 280), a few draws under a uniform one.
        let (zipf, uniform) = (rots(Distribution::Zipfian), rots(Distribution::Uniform));
        assert!(zipf > 150, "hottest key drawn {zipf} times under zipf 0.99");
        assert!(uniform < 20, "hottest key drawn {uniform} times under uniform");
    }

    #[test]
    fn rot_keys_are_distinct_and_span_the_asked_partitions() {
        let topology = TopologySpec::full(1, 6);
        let w = Workload {
            recordcount: 600,
            readproportion: 0.0,
            updateproportion: 0.0,
            rotproportion: 1.0,
            rot_size: 3,
            rot_partitions: 2,
            ..Default::default()
        };
        let mut g = generator(&w, topology, 1);
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for _ in 0..200 {
            let r = request(&mut g, &w, 0, &mut rng);
            let Some(Op::Rot { keys }) = r.ops.front() else { panic!("expected a rot") };
            let mut k = keys.clone();
            k.sort();
            k.dedup();
            assert_eq!(k.len(), 3);
            let mut parts: Vec<_> = keys.iter().map(|k| g.topology.partition_of(k)).collect();
            parts.sort();
            parts.dedup();
            assert_eq!(parts.len(), 2, "{keys:?}");
        }
    }

    #[test]
    fn write_and_read_write_transactions_have_their_shape() {
        let topology = TopologySpec::full(1, 8);
        let w = Workload {
            recordcount: 800,
            readproportion: 0.0,
            updateproportion: 0.0,
            wotproportion: 0.5,
            wot_size: 3,
            txnproportion: 0.5,
            txn_reads: 19,
            txn_writes: 1,
            rot_partitions: 4,
            ..Default::default()
        };
        let mut g = generator(&w, topology, 1);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let (mut wots, mut txns) = (0, 0);
        for _ in 0..200 {
            let r = request(&mut g, &w, 0, &mut rng);
            let op = r.ops.front().expect("one op");
            // (The runtime makes ids unique per run; `request` counts per request.)
            let mut ids: Vec<u64> = op.writes().iter().map(|(_, v)| causeway_core::write_id_of(v).unwrap()).collect();
            ids.sort();
            ids.dedup();
            assert_eq!(ids.len(), op.writes().len(), "each write of a transaction has its own id");
            match op {
                Op::Wot { writes } => {
                    wots += 1;
                    let mut k: Vec<_> = writes.iter().map(|(k, _)| k).collect();
                    k.sort();
                    k.dedup();
                    assert_eq!(k.len(), 3);
                }
                Op::Txn { reads, writes } => {
                    txns += 1;
                    assert_eq!((reads.len(), writes.len()), (19, 1));
                    let mut parts: Vec<_> = reads.iter().map(|k| g.topology.partition_of(k)).collect();
                    parts.sort();
                    parts.dedup();
                    assert_eq!(parts.len(), 4, "PaRiS's partitions per transaction");
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(wots > 60 && txns > 60, "{wots} wots, {txns} txns");
    }

    #[test]
    fn local_transactions_stay_in_the_clients_dc() {
        let mut spec = TopologySpec::full(3, 6);
        spec.replication = causeway_core::Replication::Partial { factor: 2 };
        let w = Workload {
            recordcount: 600,
            readproportion: 0.0,
            updateproportion: 0.0,
            rotproportion: 1.0,
            rot_size: 2,
            local_txn_ratio: Some(0.5),
            ..Default::default()
        };
        let mut g = generator(&w, spec, 1);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let (mut local, mut remote) = (0, 0);
        for _ in 0..1_000 {
            let r = request(&mut g, &w, 0, &mut rng);
            let Some(Op::Rot { keys }) = r.ops.front() else { panic!("expected a rot") };
            if keys.iter().all(|k| g.topology.stores(DcId(0), g.topology.partition_of(k))) {
                local += 1;
            } else {
                remote += 1;
            }
        }
        assert!((400..600).contains(&local), "local {local} remote {remote}");
    }

    /// Under partial replication, a transaction with no reads and a
    /// remote share asks for no partitions to read (torture draws
    /// `txn_reads = 0`); it once underflowed there.
    #[test]
    fn a_write_only_txn_with_a_remote_share_needs_no_read_partitions() {
        let mut spec = TopologySpec::full(3, 6);
        spec.replication = causeway_core::Replication::Partial { factor: 2 };
        let w = Workload {
            recordcount: 600,
            readproportion: 0.0,
            updateproportion: 0.0,
            txnproportion: 1.0,
            txn_reads: 0,
            txn_writes: 2,
            local_txn_ratio: Some(0.5),
            ..Default::default()
        };
        let mut g = generator(&w, spec, 1);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for _ in 0..200 {
            let r = request(&mut g, &w, 0, &mut rng);
            let Some(Op::Txn { reads, writes }) = r.ops.front() else { panic!("expected a txn") };
            assert!(reads.is_empty() && writes.len() == 2, "{reads:?} {writes:?}");
        }
    }

    #[test]
    fn amplified_insert_is_round_robin_puts() {
        let w = Workload {
            recordcount: 100,
            readproportion: 0.0,
            updateproportion: 1.0,
            amplification: 8,
            ..Default::default()
        };
        let mut g = generator(&w, TopologySpec::full(1, 4), 1);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let r = request(&mut g, &w, 0, &mut rng);
        assert_eq!(r.name, Some(AMPLIFIED));
        let parts: Vec<u32> = r
            .ops
            .iter()
            .map(|op| match op {
                Op::Put { key, .. } => g.topology.partition_of(key).0,
                other => panic!("expected puts, got {other:?}"),
            })
            .collect();
        assert_eq!(parts.len(), 8);
        for w2 in parts.windows(2) {
            assert_eq!(w2[1], (w2[0] + 1) % 4, "{parts:?}");
        }
    }

    #[test]
    fn keygroups_follow_the_variance() {
        let mut w = Workload {
            requestdistribution: Distribution::Keygroup,
            keys_per_group: 10,
            keygroup_variance: 0.0,
            ..Default::default()
        };
        let g = generator(&w, TopologySpec::full(1, 2), 5);
        assert_eq!(g.keys.len(), 50);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let group = |k: &Key| std::str::from_utf8(&k[4..]).unwrap().parse::<u64>().unwrap() / 10;
        for _ in 0..100 {
            assert_eq!(group(g.keys.pick(&w, 3, &mut rng)), 3);
        }
        w.keygroup_variance = 1.0;
        let mut own = 0;
        for _ in 0..10_000 {
            own += (group(g.keys.pick(&w, 3, &mut rng)) == 3) as u32;
        }
        // P(|z| < 0.5) for a standard normal is 0.383.
        assert!((3_500..4_200).contains(&own), "{own}");
    }

    #[test]
    fn hotspot_and_latest() {
        let w = Workload {
            recordcount: 100,
            requestdistribution: Distribution::Hotspot,
            hotspotdatafraction: 0.1,
            hotspotopnfraction: 0.9,
            ..Default::default()
        };
        let g = generator(&w, TopologySpec::full(1, 1), 1);
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        let idx = |k: &Key| std::str::from_utf8(&k[4..]).unwrap().parse::<u64>().unwrap();
        let hot = (0..10_000).filter(|_| idx(g.keys.pick(&w, 0, &mut rng)) < 10).count();
        assert!((8_800..9_200).contains(&hot), "{hot}");

        let mut w = Workload {
            recordcount: 100,
            readproportion: 0.5,
            updateproportion: 0.0,
            insertproportion: 0.5,
            requestdistribution: Distribution::Latest,
            ..Default::default()
        };
        w.zipfian_constant = 0.99;
        let mut g = generator(&w, TopologySpec::full(1, 1), 1);
        for _ in 0..50 {
            request(&mut g, &w, 0, &mut rng);
        }
        assert!(g.keys.len() > 110);
        let newest = (0..1_000).filter(|_| idx(g.keys.pick(&w, 0, &mut rng)) + 5 >= g.keys.len() as u64).count();
        assert!(newest > 300, "the newest keys should be the hottest, got {newest}/1000");
    }

    #[test]
    fn value_and_rot_sizes_follow_their_distributions() {
        let w = Workload {
            recordcount: 1_000,
            readproportion: 0.0,
            updateproportion: 0.5,
            rotproportion: 0.5,
            fieldlength_values: vec![16, 4096],
            fieldlength_weights: vec![0.9, 0.1],
            rot_size_values: vec![1, 8],
            rot_size_weights: vec![3.0, 1.0],
            ..Default::default()
        };
        let topology = TopologySpec::full(1, 4);
        w.validate(&Topology::new(topology.clone()).unwrap()).unwrap();
        let mut g = generator(&w, topology, 1);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (mut small, mut large, mut one, mut eight) = (0, 0, 0, 0);
        for _ in 0..4_000 {
            match request(&mut g, &w, 0, &mut rng).ops.pop_front().unwrap() {
                Op::Put { value, .. } if value.len() == 16 => small += 1,
                Op::Put { value, .. } if value.len() == 4096 => large += 1,
                Op::Rot { keys } if keys.len() == 1 => one += 1,
                Op::Rot { keys } if keys.len() == 8 => eight += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!((1_650..1_950).contains(&small) && (120..280).contains(&large), "{small} {large}");
        assert!((1_350..1_650).contains(&one) && (400..600).contains(&eight), "{one} {eight}");
        // Mismatched or empty weights are refused by name.
        let topo = Topology::new(TopologySpec::full(1, 4)).unwrap();
        let bad = Workload { fieldlength_weights: vec![1.0], ..w.clone() };
        assert!(bad.validate(&topo).unwrap_err().contains("fieldlength_values"));
        let bad = Workload { rot_size_weights: vec![0.0, 0.0], ..w.clone() };
        assert!(bad.validate(&topo).unwrap_err().contains("rot_size_weights"));
        // Without a distribution the draws are the scalar settings', and
        // consume no randomness (other experiments are unchanged).
        let plain = Workload { fieldlength: 64, ..Default::default() };
        let mut r1 = ChaCha8Rng::seed_from_u64(1);
        assert_eq!(value_size(&plain, &mut r1), 64);
        assert_eq!(r1.random::<u64>(), ChaCha8Rng::seed_from_u64(1).random::<u64>());
    }

    #[test]
    fn multi_key_updates_are_batches_of_puts_and_preload_covers_every_key() {
        let w = Workload {
            recordcount: 100,
            readproportion: 0.0,
            updateproportion: 1.0,
            update_size: 5,
            rot_partitions: 2,
            ..Default::default()
        };
        let mut g = generator(&w, TopologySpec::full(1, 4), 3);
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let r = request(&mut g, &w, 0, &mut rng);
        assert_eq!(r.name, Some(UPDATE_BATCH));
        let keys: Vec<Key> = r
            .ops
            .iter()
            .map(|op| match op {
                Op::Put { key, .. } => key.clone(),
                other => panic!("expected puts, got {other:?}"),
            })
            .collect();
        let mut distinct = keys.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 5);
        let mut parts: Vec<_> = keys.iter().map(|k| g.topology.partition_of(k)).collect();
        parts.sort();
        parts.dedup();
        assert_eq!(parts.len(), 2, "a batch's keys follow rot_partitions");
        // The load phase: three clients write the 100 keys once between them.
        let mut all: Vec<Key> = Vec::new();
        let mut id = 0;
        for c in 0..3 {
            let ops = g.preload_ops(&w, c, 3, &mut rng, || {
                id += 1;
                id
            });
            all.extend(ops.into_iter().map(|op| match op {
                Op::Put { key, value } => {
                    assert_eq!(value.len(), w.fieldlength);
                    key
                }
                other => panic!("expected puts, got {other:?}"),
            }));
        }
        assert_eq!(all.len(), 100);
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 100);
    }
}
