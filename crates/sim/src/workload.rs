//! Operation generators for closed-loop simulated clients.

use crate::scenario::{Distribution, Workload};
use bytes::Bytes;
use causeway_core::{Key, Op, stable_hash, tagged_value};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// The key space: `recordcount` keys named `user<i>` like YCSB's, built once
/// and shared (cloning a `Bytes` is a reference-count bump).
pub struct KeySpace {
    keys: Vec<Key>,
    zipf: Option<Zipfian>,
}

impl KeySpace {
    pub fn new(w: &Workload) -> KeySpace {
        let keys = (0..w.recordcount).map(|i| Bytes::from(format!("user{i}"))).collect();
        let zipf = match w.requestdistribution {
            Distribution::Uniform => None,
            Distribution::Zipfian => Some(Zipfian::new(w.recordcount, w.zipfian_constant)),
        };
        KeySpace { keys, zipf }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn pick(&self, rng: &mut ChaCha8Rng) -> &Key {
        let n = self.keys.len() as u64;
        let i = match &self.zipf {
            None => rng.random_range(0..n),
            // Scrambled, as YCSB does, so hot keys spread over partitions.
            Some(z) => stable_hash(&z.next(rng).to_le_bytes()) % n,
        };
        &self.keys[i as usize]
    }
}

/// The next operation of a random client.
pub fn next_op(w: &Workload, keys: &KeySpace, rng: &mut ChaCha8Rng, write_id: u64) -> Op {
    let total = w.readproportion + w.updateproportion + w.rotproportion;
    let x = rng.random::<f64>() * total;
    if x < w.readproportion {
        Op::Get { key: keys.pick(rng).clone() }
    } else if x < w.readproportion + w.updateproportion {
        Op::Put { key: keys.pick(rng).clone(), value: tagged_value(write_id, w.fieldlength) }
    } else {
        let mut ks: Vec<Key> = Vec::with_capacity(w.rot_size);
        while ks.len() < w.rot_size {
            let k = keys.pick(rng);
            if !ks.contains(k) {
                ks.push(k.clone());
            }
        }
        Op::Rot { keys: ks }
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

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

    #[test]
    fn rot_keys_are_distinct() {
        let w = Workload {
            recordcount: 5,
            readproportion: 0.0,
            updateproportion: 0.0,
            rotproportion: 1.0,
            rot_size: 5,
            ..Default::default()
        };
        let ks = KeySpace::new(&w);
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        match next_op(&w, &ks, &mut rng, 1) {
            Op::Rot { keys } => {
                let mut k = keys.clone();
                k.sort();
                k.dedup();
                assert_eq!(k.len(), 5);
            }
            other => panic!("expected a rot, got {other:?}"),
        }
    }
}
