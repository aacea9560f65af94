//! Cycles: strongly connected components (Tarjan, iterative so deep
//! histories cannot overflow the stack), and the CyclicCO bad pattern.
//!
//! Session order alone is acyclic, so a cycle of co needs a read that returned
//! a write from its own causal future (e.g. a value its own session writes
//! later, or a pair of sessions each reading the other's later write). The
//! clock pass ([`crate::clock`]) notices this as a stall and breaks it; only
//! then is this O(n + edges) search run, once.

use crate::clock::Clocks;
use crate::model::{Model, NONE, Source};
use crate::violation::{Collector, Kind, Raw};

/// The strongly connected components with more than one node of the graph
/// over `nodes` with successor lists `succ` (indexed by node id < `n`).
pub fn nontrivial_sccs(n: usize, nodes: impl Iterator<Item = u32>, succ: &[Vec<u32>]) -> Vec<Vec<u32>> {
    let mut index = vec![NONE; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut call: Vec<(u32, usize)> = Vec::new();
    let mut next = 0u32;
    let mut out = Vec::new();
    for root in nodes {
        if index[root as usize] != NONE {
            continue;
        }
        index[root as usize] = next;
        low[root as usize] = next;
        next += 1;
        stack.push(root);
        on_stack[root as usize] = true;
        call.push((root, 0));
        while let Some(&mut (v, ref mut i)) = call.last_mut() {
            if let Some(&w) = succ[v as usize].get(*i) {
                *i += 1;
                if index[w as usize] == NONE {
                    index[w as usize] = next;
                    low[w as usize] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w as usize] = true;
                    call.push((w, 0));
                } else if on_stack[w as usize] {
                    low[v as usize] = low[v as usize].min(index[w as usize]);
                }
            } else {
                call.pop();
                if let Some(&(p, _)) = call.last() {
                    low[p as usize] = low[p as usize].min(low[v as usize]);
                }
                if low[v as usize] == index[v as usize] {
                    let mut comp = Vec::new();
                    loop {
                        let w = stack.pop().expect("v is on the stack");
                        on_stack[w as usize] = false;
                        comp.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if comp.len() > 1 {
                        comp.sort_unstable();
                        out.push(comp);
                    }
                }
            }
        }
    }
    out.sort();
    out
}

/// Successor lists of session order ∪ reads-from (all edges, none dropped).
pub fn co_successors(m: &Model<'_>) -> Vec<Vec<u32>> {
    let mut succ: Vec<Vec<u32>> = m.so_succ.clone();
    for (i, s) in succ.iter_mut().enumerate() {
        if let Some(r) = m.readers.get(&(i as u32)) {
            s.extend_from_slice(r);
        }
    }
    succ
}

/// Report each cycle of co (one per strongly connected component).
pub fn check_cyclic_co(m: &Model<'_>, c: &Clocks, out: &mut Collector) {
    if c.dropped.is_empty() {
        return; // the pass found a topological order: co is acyclic
    }
    let succ = co_successors(m);
    let nodes = (0..m.n_ops() as u32).filter(|&i| m.is_node[i as usize]);
    for comp in nontrivial_sccs(m.n_ops(), nodes, &succ) {
        // Session order is acyclic, so the component has a reads-from edge
        // inside it; the cycle is that edge plus a path back.
        let edge = comp.iter().find_map(|&r| {
            m.reads_of(r).iter().find_map(|rd| match rd.source {
                Source::Write(w) if comp.binary_search(&w).is_ok() => Some((w, r)),
                _ => None,
            })
        });
        if let Some((write, reader)) = edge {
            let ops_involved = comp.len();
            out.add(Kind::CyclicCausalOrder, || Raw::CyclicCo { write, reader, ops_involved, members: comp });
        }
    }
}
