//! Scripted anomaly scenarios shared by the per-protocol simulation tests.
//! Each returns what a user would have observed; the tests decide whether
//! that is allowed for the protocol.

#![allow(dead_code)]

use bytes::Bytes;
use causeway_core::{History, Key, Op, OpResult, Protocol, Topology, TopologySpec, tagged_value};
use causeway_sim::{Fault, FaultKind, Scenario, ScriptedClient, ScriptedOp, Sim};

/// Two key names from `prefixes` that land on different partitions of `topology`.
pub fn keys_on_different_partitions(t: &Topology, a: &str, b: &str) -> (Key, Key) {
    for i in 0..1000 {
        let ka = Bytes::from(format!("{a}{i}"));
        let kb = Bytes::from(format!("{b}{i}"));
        if t.partition_of(&ka) != t.partition_of(&kb) {
            return (ka, kb);
        }
    }
    unreachable!("no split found")
}

pub fn base(dcs: u16, partitions: u32, duration_ms: u64, seed: u64) -> Scenario {
    let mut sc = Scenario::new(TopologySpec::full(dcs, partitions), duration_ms);
    sc.seed = seed;
    sc.network.default_rtt_ms = 40.0;
    sc.network.intra_dc_us = 200;
    sc.network.jitter_pct = 5.0;
    sc.record_history = true;
    sc
}

pub fn run<P: Protocol>(sc: Scenario) -> (History, Sim<P>) {
    let mut sim = Sim::<P>::new(sc).expect("valid scenario");
    sim.run();
    let h = sim.take_history().expect("history recorded");
    (h, sim)
}

fn put(at_us: u64, key: &Key, value: &Bytes) -> ScriptedOp {
    ScriptedOp { at_us, op: Op::Put { key: key.clone(), value: value.clone() } }
}
fn get(at_us: u64, key: &Key) -> ScriptedOp {
    ScriptedOp { at_us, op: Op::Get { key: key.clone() } }
}

/// Photo-then-album (COPS's motivating example): a DC0 user uploads a photo
/// and then adds it to the album; the link from the photo's partition server
/// in DC0 to its peer in DC1 is slow. A DC1 reader polls the album and, once it sees the entry,
/// opens the photo. Returns the number of times the reader saw the album
/// entry but then no photo (a causality violation), and whether it ever saw
/// the album entry at all (so a test can tell "safe" from "never looked").
pub fn photo_then_album<P: Protocol>(seed: u64) -> (usize, bool) {
    photo_then_album_with::<P>(seed, 1_000, |_, _| {})
}

/// [`photo_then_album`] with the writes at `start_us` and a hook to add
/// faults or clock settings to the scenario.
pub fn photo_then_album_with<P: Protocol>(
    seed: u64,
    start_us: u64,
    tweak: impl FnOnce(&mut Scenario, &Topology),
) -> (usize, bool) {
    let mut sc = base(2, 4, start_us / 1_000 + 1_500, seed);
    let t = Topology::new(sc.topology.clone()).unwrap();
    let (photo, album) = keys_on_different_partitions(&t, "photo", "album");
    let from = t.server_for_key(causeway_core::DcId(0), &photo).unwrap();
    let to = t.server_for_key(causeway_core::DcId(1), &photo).unwrap();
    sc.faults.push(Fault { at_ms: 0, at_us: 0, kind: FaultKind::SlowLink { from: from.0, to: to.0, extra_ms: 300 } });
    tweak(&mut sc, &t);
    let photo_v = tagged_value(1, 16);
    let album_v = tagged_value(2, 16);
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![put(start_us, &photo, &photo_v), put(0, &album, &album_v)] });
    let mut reader = Vec::new();
    for i in 0..300 {
        reader.push(get(start_us + i * 3_000, &album));
        reader.push(get(0, &photo));
    }
    sc.scripted.push(ScriptedClient { dc: 1, ops: reader });
    let (h, _) = run::<P>(sc);
    let reads: Vec<&causeway_core::OpRecord> = h.ops.iter().filter(|r| r.dc.0 == 1).collect();
    let mut violations = 0;
    let mut saw_album = false;
    for w in reads.windows(2) {
        if let (Op::Get { key: k1 }, OpResult::Get(v1), Op::Get { key: k2 }, OpResult::Get(v2)) =
            (&w[0].op, &w[0].result, &w[1].op, &w[1].result)
            && *k1 == album
            && *k2 == photo
            && v1.as_ref() == Some(&album_v)
        {
            saw_album = true;
            if v2.as_ref() != Some(&photo_v) {
                violations += 1;
            }
        }
    }
    (violations, saw_album)
}

/// Roohitavaf §3.3 / COPS's ACL example with a ROT: the ACL starts public and
/// the album old; Alice (DC0) makes the ACL friends-only, then posts to the
/// album. The ACL's partition server in DC0 is slow to replicate. A DC1 ROT
/// over {acl, album} must never return ⟨public, new album⟩. Returns
/// (violations, how many ROTs saw the new album).
pub fn acl_album_rot<P: Protocol>(seed: u64) -> (usize, usize) {
    acl_album_rot_with::<P>(seed, "")
}

/// [`acl_album_rot`] with the boolean protocol parameter `flag` set (none
/// when empty): a broken variant.
pub fn acl_album_rot_with<P: Protocol>(seed: u64, flag: &str) -> (usize, usize) {
    let mut sc = base(2, 4, 2_500, seed);
    if !flag.is_empty() {
        sc.protocol.insert(flag.into(), true.into());
    }
    let t = Topology::new(sc.topology.clone()).unwrap();
    let (acl, album) = keys_on_different_partitions(&t, "acl", "album");
    let from = t.server_for_key(causeway_core::DcId(0), &acl).unwrap();
    let to = t.server_for_key(causeway_core::DcId(1), &acl).unwrap();
    let public = tagged_value(10, 16);
    let old = tagged_value(11, 16);
    let friends = tagged_value(12, 16);
    let new = tagged_value(13, 16);
    sc.faults.push(Fault { at_ms: 500, at_us: 0, kind: FaultKind::SlowLink { from: from.0, to: to.0, extra_ms: 300 } });
    sc.scripted.push(ScriptedClient {
        dc: 0,
        ops: vec![put(1_000, &acl, &public), put(0, &album, &old), put(600_000, &acl, &friends), put(0, &album, &new)],
    });
    let mut reader = Vec::new();
    for i in 0..400 {
        reader.push(ScriptedOp { at_us: 550_000 + i * 3_000, op: Op::Rot { keys: vec![acl.clone(), album.clone()] } });
    }
    sc.scripted.push(ScriptedClient { dc: 1, ops: reader });
    let (h, _) = run::<P>(sc);
    let mut violations = 0;
    let mut saw_new = 0;
    for r in h.ops.iter().filter(|r| r.dc.0 == 1) {
        if let OpResult::Rot(vals) = &r.result
            && vals[1].as_ref() == Some(&new)
        {
            saw_new += 1;
            if vals[0].as_ref() == Some(&public) {
                violations += 1;
            }
        }
    }
    (violations, saw_new)
}

/// What one DC's readers saw in [`rot_order_in_every_dc`].
#[derive(Debug, Default, Clone, Copy)]
pub struct RotOrder {
    /// ROTs over {acl, album} that returned the new album with the public ACL.
    pub acl_violations: usize,
    /// ROTs that returned the new album at all.
    pub acl_saw_new: usize,
    /// ROTs over {photo, album} that returned the album entry without its photo.
    pub photo_violations: usize,
    /// ROTs that returned the album entry at all.
    pub photo_saw_album: usize,
}

/// The photo/album example (Lloyd §3.2) and the ACL/album race (Lloyd §4.3,
/// `read_trans((ACL, album))`), read with read-only transactions by a
/// reader in *every* DC, the writers' own included, on 3 DCs × 4
/// partitions. Alice (DC0) makes the ACL friends-only, then posts to
/// the album; Bob (DC0) uploads a photo, then adds it to a second album.
/// The ACL's and the photo's servers in DC0 replicate slowly to both other
/// DCs, so a remote DC receives each album write long before what it
/// depends on. Returns what each DC's reader saw, indexed by DC.
pub fn rot_order_in_every_dc<P: Protocol>(seed: u64) -> Vec<RotOrder> {
    let mut sc = base(3, 4, 2_500, seed);
    let t = Topology::new(sc.topology.clone()).unwrap();
    let (acl, album) = keys_on_different_partitions(&t, "acl", "album");
    let (photo, album2) = keys_on_different_partitions(&t, "photo", "shared");
    for slow in [&acl, &photo] {
        let from = t.server_for_key(causeway_core::DcId(0), slow).unwrap();
        for dc in 1..3 {
            let to = t.server_for_key(causeway_core::DcId(dc), slow).unwrap();
            sc.faults.push(Fault {
                at_ms: 500,
                at_us: 0,
                kind: FaultKind::SlowLink { from: from.0, to: to.0, extra_ms: 300 },
            });
        }
    }
    let (public, old, friends, new) =
        (tagged_value(10, 16), tagged_value(11, 16), tagged_value(12, 16), tagged_value(13, 16));
    let (photo_v, entry) = (tagged_value(20, 16), tagged_value(21, 16));
    sc.scripted.push(ScriptedClient {
        dc: 0,
        ops: vec![put(1_000, &acl, &public), put(0, &album, &old), put(600_000, &acl, &friends), put(0, &album, &new)],
    });
    sc.scripted.push(ScriptedClient { dc: 0, ops: vec![put(600_000, &photo, &photo_v), put(0, &album2, &entry)] });
    for dc in 0..3 {
        let mut reader = Vec::new();
        for i in 0..300 {
            reader.push(ScriptedOp {
                at_us: 550_000 + i * 4_000,
                op: Op::Rot { keys: vec![acl.clone(), album.clone()] },
            });
            reader.push(ScriptedOp { at_us: 0, op: Op::Rot { keys: vec![photo.clone(), album2.clone()] } });
        }
        sc.scripted.push(ScriptedClient { dc, ops: reader });
    }
    let (h, _) = run::<P>(sc);
    let mut seen = vec![RotOrder::default(); 3];
    for r in &h.ops {
        let (Op::Rot { keys }, OpResult::Rot(vals)) = (&r.op, &r.result) else { continue };
        let s = &mut seen[r.dc.0 as usize];
        if keys[0] == acl && vals[1].as_ref() == Some(&new) {
            s.acl_saw_new += 1;
            s.acl_violations += usize::from(vals[0].as_ref() == Some(&public));
        }
        if keys[0] == photo && vals[1].as_ref() == Some(&entry) {
            s.photo_saw_album += 1;
            s.photo_violations += usize::from(vals[0].as_ref() != Some(&photo_v));
        }
    }
    seen
}

/// A DC0 client writes and immediately reads back at its own DC: returns
/// how many of its reads missed its own preceding write.
pub fn read_your_writes_local<P: Protocol>(seed: u64) -> usize {
    let mut sc = base(3, 4, 500, seed);
    let k = Bytes::from_static(b"mine");
    let mut ops = Vec::new();
    for i in 0..50u64 {
        ops.push(put(if i == 0 { 1_000 } else { 0 }, &k, &tagged_value(100 + i, 16)));
        ops.push(get(0, &k));
    }
    sc.scripted.push(ScriptedClient { dc: 0, ops });
    let (h, _) = run::<P>(sc);
    let mut misses = 0;
    for w in h.ops.windows(2) {
        if let (Op::Put { value, .. }, OpResult::Get(v)) = (&w[0].op, &w[1].result)
            && v.as_ref() != Some(value)
        {
            misses += 1;
        }
    }
    misses
}

/// Concurrent writers in every DC hammer a few keys; after the load stops and
/// the network quiesces, a reader in each DC reads every key. Returns the
/// keys on which DCs disagree (empty means converged), and how many keys were read.
pub fn convergence<P: Protocol>(seed: u64) -> (Vec<String>, usize) {
    convergence_with::<P>(seed, |_| {})
}

/// [`convergence`] with a hook to add faults or parameters to the scenario.
pub fn convergence_with<P: Protocol>(seed: u64, tweak: impl FnOnce(&mut Scenario)) -> (Vec<String>, usize) {
    let mut sc = base(3, 4, 2_000, seed);
    sc.workload.clients_per_dc = 8;
    sc.workload.recordcount = 5;
    sc.workload.readproportion = 0.2;
    sc.workload.updateproportion = 0.8;
    sc.drain_ms = 3_000;
    sc.record_history = true;
    let keys: Vec<Key> = (0..5).map(|i| Bytes::from(format!("user{i}"))).collect();
    for dc in 0..3 {
        sc.scripted.push(ScriptedClient {
            dc,
            ops: keys.iter().enumerate().map(|(i, k)| get(if i == 0 { 4_000_000 } else { 0 }, k)).collect(),
        });
    }
    tweak(&mut sc);
    let (h, _) = run::<P>(sc);
    let mut finals: Vec<Vec<Option<Bytes>>> = vec![Vec::new(); 3];
    for r in &h.ops {
        if r.invoke_us >= 4_000_000
            && let OpResult::Get(v) = &r.result
        {
            finals[r.dc.idx()].push(v.clone());
        }
    }
    let mut bad = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let vals: Vec<&Option<Bytes>> = finals.iter().map(|f| &f[i]).collect();
        if vals.iter().any(|v| *v != vals[0]) || vals[0].is_none() {
            bad.push(format!("{}: {:?}", String::from_utf8_lossy(k), vals));
        }
    }
    (bad, finals[0].len())
}

/// One writer in DC0 writes `k` 100 times (values tagged 1, 2, …); a reader
/// in DC1 reads `k` 400 times while the DCs are cut apart and healed. Returns
/// the reads that went back to an older value than one the reader had
/// already seen (monotonic reads), and the newest tag it saw.
pub fn monotonic_reads<P: Protocol>(seed: u64) -> (usize, u64) {
    let mut sc = base(2, 2, 2_000, seed);
    let k = Bytes::from_static(b"counter");
    sc.faults.push(Fault { at_ms: 300, at_us: 0, kind: FaultKind::Cut { a: 0, b: 1 } });
    sc.faults.push(Fault { at_ms: 700, at_us: 0, kind: FaultKind::Heal { a: 0, b: 1 } });
    let writes = (1..=100u64).map(|i| put(1_000 + i * 5_000, &k, &tagged_value(i, 16))).collect();
    sc.scripted.push(ScriptedClient { dc: 0, ops: writes });
    let reads = (0..400u64).map(|i| get(1_000 + i * 3_000, &k)).collect();
    sc.scripted.push(ScriptedClient { dc: 1, ops: reads });
    let (h, _) = run::<P>(sc);
    let tags: Vec<u64> = (1..=100u64).collect();
    let tag_of = |v: &Bytes| tags.iter().copied().find(|&i| *v == tagged_value(i, 16)).expect("a written value");
    let (mut newest, mut regressions) = (0, 0);
    for r in h.ops.iter().filter(|r| r.dc.0 == 1) {
        if let OpResult::Get(Some(v)) = &r.result {
            let t = tag_of(v);
            if t < newest {
                regressions += 1;
            }
            newest = newest.max(t);
        }
    }
    (regressions, newest)
}
