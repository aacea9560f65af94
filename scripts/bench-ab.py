#!/usr/bin/env python3
"""Two causeway binaries side by side: `causeway bench` alternating A and B.

Each round runs `A bench ARGS --json` then `B bench ARGS --json`; the
medians of throughput and of CPU per operation (user + system µs) are
printed per phase (set, get, mixed), with B's ratio to A. For a change's
before/after on this shared machine: build the old commit, copy its binary
aside, build the new one.

usage: scripts/bench-ab.py A B ROUNDS [bench args...]
e.g.   scripts/bench-ab.py /tmp/causeway-old target/release/causeway 5 -p eventual --plaintext --fsync never --seconds 3
"""
import json, statistics, subprocess, sys

if len(sys.argv) < 4:
    raise SystemExit(__doc__)
a, b, rounds, args = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
runs = {}
for _ in range(rounds):
    for name, binary in (("A", a), ("B", b)):
        out = subprocess.run([binary, "bench", *args, "--json"], capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"{binary} bench failed (exit {out.returncode}):\n{out.stderr}")
        for phase, r in json.loads(out.stdout).items():
            cpu = r["cpu_user_us_per_op"] + r["cpu_system_us_per_op"]
            runs.setdefault((phase, name), []).append((r["throughput_ops_s"], cpu))
print(f"A = {a}\nB = {b}\n{rounds} alternating rounds of: bench {' '.join(args)}")
print(f"{'phase':6} {'A ops/s':>9} {'B ops/s':>9} {'B/A':>5} {'A cpu us/op':>12} {'B cpu us/op':>12}   runs A | B")
for phase in sorted({p for p, _ in runs}):
    ra, rb = runs[(phase, "A")], runs[(phase, "B")]
    ma, mb = statistics.median(x for x, _ in ra), statistics.median(x for x, _ in rb)
    ca, cb = statistics.median(c for _, c in ra), statistics.median(c for _, c in rb)
    print(f"{phase:6} {ma:9.0f} {mb:9.0f} {mb / ma:5.2f} {ca:12.1f} {cb:12.1f}   "
          f"{' '.join(str(int(x)) for x, _ in ra)} | {' '.join(str(int(x)) for x, _ in rb)}")
