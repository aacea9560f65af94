#!/usr/bin/env python3
"""Seed 004 (Didona et al., docs/references.md): the derived figures the paper reports, from a load
sweep's CSV written by `causeway experiment` (contrarian-load-1dc/2dc):
peak throughput of each curve and their ratios, low-load ROT latencies, the
throughput at which CC-LO's mean ROT latency stops being lower than
Contrarian's (both curves interpolated linearly against throughput), and
CC-LO's PUT latency over Contrarian's.

    scripts/seed004_summary.py docs/experiments/results/contrarian-load-1dc.csv
"""
import csv
import sys
from collections import defaultdict


def load(path):
    d = defaultdict(dict)  # (entry, series) -> {x: {metric: value}}
    for r in csv.DictReader(open(path)):
        d[(r["protocol"], r["series"])].setdefault(float(r["x"]), {})[r["metric"]] = float(r["median"])
    return d


def curve(d, entry, series, metric):
    pts = d[(entry, series)]
    return [(x, pts[x].get(metric, float("nan"))) for x in sorted(pts)]


def interp(points, t):
    """y at throughput t on a curve of (throughput, y), rising part only."""
    rising = []
    for p in points:
        if rising and p[0] <= rising[-1][0]:
            break
        rising.append(p)
    for (x0, y0), (x1, y1) in zip(rising, rising[1:]):
        if x0 <= t <= x1:
            return y0 + (y1 - y0) * (t - x0) / (x1 - x0)
    return None


def main(path):
    d = load(path)
    series = sorted({s for _, s in d})
    entries = ["contrarian", "contrarian:rot_steps=4", "cclo", "cure"]
    for s in series:
        print(f"## {s}")
        peak = {}
        for e in entries:
            tp = curve(d, e, s, "throughput_ops_s")
            peak[e] = max(v for _, v in tp)
            low = curve(d, e, s, "latency.rot.mean_ms")[0]
            print(f"  {e:24} peak {peak[e]:8.0f} ops/s   ROT at {low[0]:.0f} clients {low[1]:.2f} ms")
        c, c2, lo, cu = (peak[e] for e in entries)
        print(f"  peak contrarian 1½ / cclo {c / lo:.2f}   2 rounds / 1½ {c2 / c:.2f}   "
              f"2 rounds / cclo {c2 / lo:.2f}   contrarian 1½ / cure {c / cu:.2f}")
        # Latency against throughput.
        xy = {}
        for e in entries:
            tp = dict(curve(d, e, s, "throughput_ops_s"))
            lat = dict(curve(d, e, s, "latency.rot.mean_ms"))
            xy[e] = [(tp[x], lat[x]) for x in sorted(tp)]
        for other in ["contrarian", "contrarian:rot_steps=4"]:
            cross = None
            prev = None
            for t, l in xy["cclo"]:
                o = interp(xy[other], t)
                if o is None:
                    continue
                if l > o and prev is not None:
                    # Linear between the last point where CC-LO was ahead and this one.
                    (t0, d0), d1 = prev, l - o
                    cross = t0 + (t - t0) * (-d0) / (d1 - d0)
                    break
                prev = (t, l - o)
            if cross:
                print(f"  CC-LO's ROT latency lower than {other}'s up to {cross:.0f} ops/s = "
                      f"{cross / peak[other]:.0%} of {other}'s peak")
            else:
                print(f"  no crossover found against {other}")
        put = [(x, a / b) for (x, a), (_, b) in zip(curve(d, "cclo", s, "latency.put.mean_ms"),
                                                   curve(d, "contrarian", s, "latency.put.mean_ms"))]
        print("  PUT latency cclo / contrarian by clients: " + ", ".join(f"{x:.0f}: {r:.1f}x" for x, r in put))


if __name__ == "__main__":
    main(sys.argv[1])
