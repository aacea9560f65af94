//! A brute-force reference checker: the definitions of the crate's docs
//! applied literally over an explicit transitive closure (bitsets, O(n²)),
//! sharing no code with the checker. Small histories only; no failed ops.
//!
//! It answers, per read, whether it violates CC (WriteCORead or
//! WriteCOInitRead), each session guarantee, and per (ROT, key) whether the
//! snapshot is broken, per read whether it is fractured (it misses part of
//! a write-only transaction it observed); and whether co ∪ cf has a cycle
//! (CCv).

use causeway_core::{History, Op, OpResult};
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub cc: usize,
    pub ryw: usize,
    pub mr: usize,
    pub mw: usize,
    pub wfr: usize,
    pub rot: usize,
    pub fractured: usize,
    pub ccv_cycle: bool,
    pub co_cycle: bool,
}

struct Bits(Vec<u64>);
impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn get(&self, i: usize) -> bool {
        (self.0[i / 64] >> (i % 64)) & 1 == 1
    }
    fn or(&mut self, o: &Bits) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a |= *b;
        }
    }
}

/// Read events: (op, key, source: None = ∅).
type Read = (usize, Vec<u8>, Option<usize>);

pub fn oracle(h: &History) -> Verdict {
    let ops = &h.ops;
    let n = ops.len();
    assert!(ops.iter().all(|o| !matches!(o.result, OpResult::Failed(_))), "the oracle takes no failed ops");
    let mut writer: HashMap<(Vec<u8>, Vec<u8>), usize> = HashMap::new();
    for (i, o) in ops.iter().enumerate() {
        for (key, value) in o.op.writes() {
            writer.insert((key.to_vec(), value.to_vec()), i);
        }
    }
    let mut reads_of: Vec<Vec<Read>> = vec![Vec::new(); n];
    for (i, o) in ops.iter().enumerate() {
        match (&o.op, &o.result) {
            (Op::Get { key }, OpResult::Get(v)) => {
                reads_of[i].push((i, key.to_vec(), v.as_ref().map(|v| writer[&(key.to_vec(), v.to_vec())])))
            }
            (Op::Rot { keys } | Op::Txn { reads: keys, .. }, OpResult::Rot(vs) | OpResult::Txn(vs)) => {
                for (key, v) in keys.iter().zip(vs) {
                    reads_of[i].push((i, key.to_vec(), v.as_ref().map(|v| writer[&(key.to_vec(), v.to_vec())])));
                }
            }
            _ => {}
        }
    }
    let mut sessions: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, o) in ops.iter().enumerate() {
        sessions.entry(o.client.0).or_default().push(i);
    }
    let mut pred = vec![usize::MAX; n];
    let mut session_of = vec![0u32; n];
    for (s, v) in sessions.iter_mut() {
        v.sort_by_key(|&i| (ops[i].invoke_us, i));
        for w in v.windows(2) {
            pred[w[1]] = w[0];
        }
        for &i in v.iter() {
            session_of[i] = *s;
        }
    }
    // Strict causal past, by Kahn's algorithm over so ∪ wr.
    let preds = |i: usize| -> Vec<usize> {
        let mut p: Vec<usize> = reads_of[i].iter().filter_map(|r| r.2).collect();
        if pred[i] != usize::MAX {
            p.push(pred[i]);
        }
        p
    };
    let mut indeg: Vec<usize> = (0..n).map(|i| preds(i).len()).collect();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in 0..n {
        for p in preds(i) {
            succ[p].push(i);
        }
    }
    let mut past: Vec<Bits> = (0..n).map(|_| Bits::new(n)).collect();
    let mut queue: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    let mut done = 0;
    while let Some(i) = queue.pop() {
        done += 1;
        for p in preds(i) {
            let pp = std::mem::replace(&mut past[p], Bits::new(0));
            past[i].or(&pp);
            past[i].set(p);
            past[p] = pp;
        }
        for &s in &succ[i] {
            indeg[s] -= 1;
            if indeg[s] == 0 {
                queue.push(s);
            }
        }
    }
    let mut v = Verdict::default();
    if done < n {
        v.co_cycle = true;
        return v;
    }
    let co = |a: usize, b: usize| past[b].get(a);
    let put_keys: Vec<Vec<Vec<u8>>> =
        ops.iter().map(|o| o.op.writes().iter().map(|(k, _)| k.to_vec()).collect()).collect();
    let writes_key = |w: usize, k: &Vec<u8>| put_keys[w].contains(k);
    let mut writes_by_key: HashMap<Vec<u8>, Vec<usize>> = HashMap::new();
    for (w, ks) in put_keys.iter().enumerate() {
        for k in ks {
            writes_by_key.entry(k.clone()).or_default().push(w);
        }
    }
    let overwritten = |src: Option<usize>, w: usize| src != Some(w) && src.is_none_or(|s| co(s, w));
    let mut cf: Vec<(usize, usize)> = Vec::new();
    for i in 0..n {
        for (_, key, src) in &reads_of[i] {
            // The read's own past: session past plus its own source.
            let in_past = |w: usize| {
                (pred[i] != usize::MAX && (past[pred[i]].get(w) || pred[i] == w))
                    || src.is_some_and(|s| s == w || co(w, s))
            };
            let writes_of_key: &[usize] = writes_by_key.get(key).map(|v| v.as_slice()).unwrap_or(&[]);
            if writes_of_key.iter().any(|&w| in_past(w) && overwritten(*src, w)) {
                v.cc += 1;
            }
            // Arbitration: against everything the op observed (a ROT's
            // whole snapshot).
            let observed = |w: usize| {
                (pred[i] != usize::MAX && (past[pred[i]].get(w) || pred[i] == w))
                    || reads_of[i].iter().any(|r| r.2.is_some_and(|s| s == w || co(w, s)))
            };
            for &w in writes_of_key {
                if observed(w)
                    && Some(w) != *src
                    && let Some(s) = src
                {
                    cf.push((w, *s));
                }
            }
            let earlier: Vec<usize> = sessions[&session_of[i]].iter().copied().take_while(|&j| j != i).collect();
            if earlier.iter().any(|&w| writes_key(w, key) && overwritten(*src, w)) {
                v.ryw += 1;
            }
            let earlier_reads: Vec<&Read> = earlier.iter().flat_map(|&j| reads_of[j].iter()).collect();
            if earlier_reads.iter().any(|r| r.1 == *key && r.2.is_some_and(|w| overwritten(*src, w))) {
                v.mr += 1;
            }
            let seen: Vec<usize> =
                earlier_reads.iter().filter_map(|r| r.2).filter(|&w| session_of[w] != session_of[i]).collect();
            let mw = seen.iter().any(|&w2| {
                let s2 = &sessions[&session_of[w2]];
                s2.iter().take_while(|&&j| j != w2).any(|&w| writes_key(w, key) && overwritten(*src, w))
            });
            if mw {
                v.mw += 1;
            }
            let wfr = seen.iter().any(|&w2| {
                let s2 = &sessions[&session_of[w2]];
                s2.iter()
                    .take_while(|&&j| j != w2)
                    .flat_map(|&j| reads_of[j].iter())
                    .any(|r| r.1 == *key && r.2.is_some_and(|w| overwritten(*src, w)))
            });
            if wfr {
                v.wfr += 1;
            }
            // Fractured: a multi-key write of `key` this op (through another
            // key) or an earlier op of the session (by reading it, or by
            // being it) observed, which overwrites what the read returned.
            let txn = |t: usize| put_keys[t].len() > 1 && writes_key(t, key);
            let observed_txn = |t: usize| {
                reads_of[i].iter().any(|r| r.1 != *key && r.2 == Some(t))
                    || earlier.iter().any(|&j| j == t || reads_of[j].iter().any(|r| r.2 == Some(t)))
            };
            if (0..n).any(|t| txn(t) && observed_txn(t) && overwritten(*src, t)) {
                v.fractured += 1;
            }
        }
        // Snapshot: per key y of a ROT.
        if reads_of[i].len() > 1 {
            for (j, (_, y, src)) in reads_of[i].iter().enumerate() {
                let broken = reads_of[i].iter().enumerate().any(|(k, (_, _, sx))| {
                    k != j
                        && sx.is_some_and(|wx| {
                            writes_by_key.get(y).is_some_and(|ws| ws.iter().any(|&w| co(w, wx) && overwritten(*src, w)))
                        })
                });
                if broken {
                    v.rot += 1;
                }
            }
        }
    }
    // co ∪ cf acyclic? (DFS three-colour.)
    let mut out: Vec<Vec<usize>> = succ.clone();
    for (a, b) in cf {
        out[a].push(b);
    }
    let mut colour = vec![0u8; n];
    for root in 0..n {
        if colour[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        colour[root] = 1;
        while let Some((u, k)) = stack.pop() {
            if k < out[u].len() {
                stack.push((u, k + 1));
                let w = out[u][k];
                if colour[w] == 1 {
                    v.ccv_cycle = true;
                } else if colour[w] == 0 {
                    colour[w] = 1;
                    stack.push((w, 0));
                }
            } else {
                colour[u] = 2;
            }
        }
    }
    v
}
