//! Causal convergence (CCv, "causal+" with last-writer-wins), after
//! Bouajjani et al. (POPL 2017): a history is CCv iff there is ONE total
//! arbitration order `arb` of all writes, containing co, such that every read
//! of `x` returns the `arb`-last write of `x` in its causal past (∅ if none).
//! Last-writer-wins over a global timestamp order that respects causality
//! (Lamport clocks, HLC, GentleRain's ⟨ts, dc⟩) is such an order.
//!
//! The paper characterises it by the bad pattern **CyclicCF**: let
//! `w cf w1` when some read of `x` returned `w1` while another write `w` of
//! `x` was in its causal past — `arb` must put `w` before `w1`. A read-only
//! transaction reads one snapshot, so for its reads "causal past" is that of
//! the whole transaction (every write it returned and their pasts): the
//! transactional causal+ of Cure and Contrarian, and dbcop's causal level. The history is
//! CCv iff it is CC and `co ∪ cf` is acyclic. That is what this module
//! checks (the exact test, not a sufficient one): [`crate::causal`] collects
//! `cf` while scanning each read's past, keeping only edges not already
//! implied by co, and taking only the co-maximal writes of `x` per session in
//! the past (an earlier write of the same session reaches `w1` through the
//! later one, so dropping it loses no cycle). A cycle of `co ∪ cf` is then
//! found as a non-trivial strongly connected component.
//!
//! Cost: O(n·S) cf edges at most (in practice about one per read), then
//! O(n + edges) for the components. The order is global, as the paper's: a
//! cycle may run through writes of several keys (two sessions disagreeing on
//! the order of `x`'s writes in a way that contradicts how they ordered
//! `y`'s), which a per-key order would not catch.
//!
//! With a cyclic co (reported separately), the reads-from edges the clock pass
//! dropped are left out here so the same cycle is not reported twice.

use crate::clock::Clocks;
use crate::cycles::nontrivial_sccs;
use crate::model::Model;
use crate::violation::{Collector, Kind, Raw};
use rustc_hash::FxHashMap;

/// Report each cycle of co ∪ cf (one per strongly connected component).
/// Returns the cf edges by target, for explaining the cycles.
pub fn check_cyclic_cf(
    m: &Model<'_>,
    c: &Clocks,
    cf: &FxHashMap<(u32, u32), u32>,
    out: &mut Collector,
) -> FxHashMap<u32, Vec<(u32, u32)>> {
    let mut succ: Vec<Vec<u32>> = m.so_succ.clone();
    for (i, s) in succ.iter_mut().enumerate() {
        if let Some(r) = m.readers.get(&(i as u32)) {
            s.extend(r.iter().copied().filter(|&r| !c.is_dropped(r, i as u32)));
        }
    }
    let mut edges: Vec<(u32, u32, u32)> = cf.iter().map(|(&(w, w1), &r)| (w, w1, r)).collect();
    edges.sort_unstable();
    let mut preds: FxHashMap<u32, Vec<(u32, u32)>> = FxHashMap::default();
    for &(w, w1, r) in &edges {
        succ[w as usize].push(w1);
        preds.entry(w1).or_default().push((w, r));
    }
    let nodes = c.order.iter().copied();
    for comp in nontrivial_sccs(m.n_ops(), nodes, &succ) {
        // co alone is acyclic here, so the component holds a cf edge; it is
        // looked up only for the components that will be shown.
        if !out.wants(Kind::CyclicArbitration) {
            out.tally(Kind::CyclicArbitration);
            continue;
        }
        let edge = edges.iter().find(|&&(w, w1, _)| comp.binary_search(&w).is_ok() && comp.binary_search(&w1).is_ok());
        if let Some(&(from, to, read)) = edge {
            out.add(Kind::CyclicArbitration, || Raw::CyclicCf { from, to, read, members: comp });
        }
    }
    preds
}
