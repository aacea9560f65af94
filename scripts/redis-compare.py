#!/usr/bin/env python3
"""Side-by-side throughput: Debian's redis-server vs `causeway bench`.

Runs `redis-benchmark -c 50 -d 64 -t set,get` (random keys over 100 000,
no pipelining) and `causeway bench -c 50 -d 64` for each protocol, alternating
them ROUNDS times in one session on this machine, and prints medians and the
ratio to Redis. Needs redis-server and redis-benchmark on PATH and a release
build of causeway (cargo build --release -p causeway).

usage: scripts/redis-compare.py [ROUNDS] [SECONDS] [FSYNC]
"""
import json, re, statistics, subprocess, sys, time

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
fsync = sys.argv[3] if len(sys.argv) > 3 else "never"
protocols = ["eventual", "causalspartanx"]
causeway = "target/release/causeway"
port = "6399"

redis = subprocess.Popen(["redis-server", "--port", port, "--save", "", "--appendonly", "no"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.5)
res = {("redis", "set"): [], ("redis", "get"): []}
for p in protocols:
    res[(p, "set")] = []
    res[(p, "get")] = []
try:
    for r in range(rounds):
        n = str(40_000 * seconds)
        out = subprocess.run(["redis-benchmark", "-p", port, "-c", "50", "-d", "64", "-r", "100000",
                              "-n", n, "-t", "set,get", "-q"], capture_output=True, text=True).stdout
        out = out.replace("\r", "\n")
        for kind in ("set", "get"):
            m = re.findall(rf"^{kind.upper()}: ([0-9.]+) requests per second", out, re.M)
            res[("redis", kind)].append(float(m[-1]))
        for p in protocols:
            out = subprocess.run([causeway, "bench", "-p", p, "-c", "50", "-d", "64", "--seconds", str(seconds),
                                  "--fsync", fsync, "--json"], capture_output=True, text=True).stdout
            j = json.loads(out)
            for kind in ("set", "get"):
                res[(p, kind)].append(j[kind]["throughput_ops_s"])
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
finally:
    redis.terminate()

print(f"{rounds} alternating rounds, {seconds} s per causeway phase, 50 connections, 64-byte values, "
      f"100 000 keys, causeway fsync={fsync}")
print(f"{'system':<16} {'op':<4} {'median ops/s':>13} {'ratio to redis':>15}   all runs")
for kind in ("set", "get"):
    base = statistics.median(res[("redis", kind)])
    for who in ["redis"] + protocols:
        v = res[(who, kind)]
        med = statistics.median(v)
        print(f"{who:<16} {kind:<4} {med:>13.0f} {med / base:>15.2f}   {' '.join(f'{x:.0f}' for x in v)}")
