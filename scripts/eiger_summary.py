#!/usr/bin/env python3
"""Seed 001 (Lloyd, docs/references.md), Eiger against Eventual: the figures Lloyd's Ch. 7
reports, from the CSVs `causeway experiment` writes for the eiger-*.toml files.

For every experiment: per sweep point (and series value), the throughput of
each protocols entry (ops/s and keys/s), and each Eiger entry's throughput
normalised to Eventual's at the same point (Fig 7.6, 7.7, Table 7.6) with
the overhead 1 − ratio. For eiger-scaling, throughput normalised to the
first point (Fig 7.8) and the mean increase per doubling between points.
For eiger-latency, the share of reads that took a second round (two-round
and indirected ones: since indirected reads have their own latency name,
`get_indirected`, the `get_2rounds` bucket no longer holds them), and the
indirected reads' latency.

    scripts/eiger_summary.py docs/experiments/results/eiger-*.csv
"""
import csv
import math
import sys
from collections import defaultdict


def load(path):
    d = defaultdict(dict)  # (entry, series, sweep label) -> {metric: value}
    order = []
    for r in csv.DictReader(open(path)):
        key = (r["protocol"], r["series"], r["sweep"])
        if key not in d:
            order.append(key)
        d[key][r["metric"]] = float(r["median"]) if r["median"] not in ("", "NaN", "nan") else float("nan")
        d[key]["_x"] = float(r["x"]) if r["x"] else float("nan")
    return d, order


def summary(path):
    d, order = load(path)
    name = path.rsplit("/", 1)[-1].removesuffix(".csv")
    print(f"## {name}\n")
    entries = list(dict.fromkeys(k[0] for k in order))
    points = list(dict.fromkeys((k[1], k[2]) for k in order))
    base = next((e for e in entries if e.startswith("eventual")), None)
    if name.startswith("eiger-latency"):
        print("| entry | point | get p50 | 1-round get p50 | 2-round get p50 | indirected get p50 / p90 / p99 | second-round share | indirected gets (commit checks) | put p50 | wot p50 | wot p99 |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for e in entries:
            for s, x in points:
                m = d.get((e, s, x), {})
                g = m.get("latency.get.count", float("nan"))
                two = m.get("latency.get_2rounds.count", 0.0)
                ind = m.get("latency.get_indirected.count", 0.0)
                cc = m.get("commit_checks.count", 0.0)
                ind_lat = " / ".join(f"{m.get(f'latency.get_indirected.{q}_ms', math.nan):.3f}" for q in ("p50", "p90", "p99"))
                print(f"| {e} | {x} | {m.get('latency.get.p50_ms', math.nan):.3f} | "
                      f"{m.get('latency.get_1round.p50_ms', math.nan):.3f} | {m.get('latency.get_2rounds.p50_ms', math.nan):.3f} | "
                      f"{ind_lat} | {100 * (two + ind) / g:.2f}% | {ind:.0f} ({cc:.0f}) | {m.get('latency.put.p50_ms', math.nan):.3f} | "
                      f"{m.get('latency.wot.p50_ms', math.nan):.3f} | {m.get('latency.wot.p99_ms', math.nan):.3f} |")
        print()
        return
    print("| point | entry | ops/s | keys/s | ops/s ÷ eventual | keys/s ÷ eventual | overhead |")
    print("|---|---|---:|---:|---:|---:|---:|")
    ratios = []
    for s, x in points:
        b = d.get((base, s, x), {}) if base else {}
        for e in entries:
            m = d.get((e, s, x))
            if m is None:
                continue
            ops, keys = m.get("throughput_ops_s", math.nan), m.get("throughput_keys_s", math.nan)
            r_ops = ops / b["throughput_ops_s"] if b.get("throughput_ops_s") else math.nan
            r_keys = keys / b["throughput_keys_s"] if b.get("throughput_keys_s") else math.nan
            if e != base and not math.isnan(r_ops):
                ratios.append(r_ops)
            label = f"{s} {x}".strip()
            print(f"| {label} | {e} | {ops:.0f} | {keys:.0f} | {r_ops:.3f} | {r_keys:.3f} | {100 * (1 - r_ops):.1f}% |")
    if ratios:
        print(f"\nEiger ÷ Eventual (ops/s) over the points: min {min(ratios):.3f}, max {max(ratios):.3f} "
              f"(overhead {100 * (1 - max(ratios)):.1f}%–{100 * (1 - min(ratios)):.1f}%)")
    if name.startswith("eiger-scaling"):
        for e in entries:
            pts = [(d[(e, s, x)]["_x"], d[(e, s, x)]["throughput_ops_s"]) for s, x in points if (e, s, x) in d]
            pts.sort()
            n1, t1 = pts[0]
            print(f"\n{e}: normalised to N={n1:.0f}: " + ", ".join(f"N={n:.0f} {t / t1:.2f}" for n, t in pts))
            for (na, ta), (nb, tb) in zip(pts, pts[1:]):
                doublings = math.log2(nb / na)
                per = (tb / ta) ** (1 / doublings) - 1
                print(f"  N={na:.0f}→{nb:.0f}: mean increase per doubling {100 * per:.0f}%")
    print()


for p in sys.argv[1:]:
    summary(p)
