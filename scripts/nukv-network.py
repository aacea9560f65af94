#!/usr/bin/env python3
"""NuKV on the network runtime against Eventual, side by side.

Roohitavaf's NuKV deployment (Ch. 4: each partition a Raft group inside
each DC, plus the cross-DC forwarder) on loopback, three clusters per
round in alternating order:

  eventual   Eventual, one replica of each partition per DC
  nukv-E     NuKV, 3 replicas per DC, read and write levels eventual
  nukv-MM    NuKV, 3 replicas per DC, the default levels (the paper's M/M)

each `causeway up --dcs 2 --partitions 2 --no-wan --fsync FSYNC`, then
`causeway bench --config … -c 50 -d 64 --keys 10000 --seconds S --workload a`
(50 sessions in DC 0, every operation local: a load phase, then 50:50).
Prints the median mixed-phase ops/s of each, the ratios the issue asks
for (nukv-E ÷ eventual; nukv-MM ÷ nukv-E, M/M's overhead over E with
every access local), and writes per fsync: writes accepted ÷ log syncs,
summed over DC 0's nodes (a write is logged by every replica of its
group and by the forwarder, so an unbatched log would show 1 ÷ 4).

usage: scripts/nukv-network.py BINARY ROUNDS SECONDS FSYNC
e.g.   scripts/nukv-network.py target/release/causeway 3 5 always
"""
import json, random, re, statistics, subprocess, sys, tempfile, time, urllib.request

if len(sys.argv) != 5:
    raise SystemExit(__doc__)
binary, rounds, seconds, fsync = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

CONFIGS = {
    "eventual": ["-p", "eventual"],
    "nukv-E": ["-p", "nukv", "--replicas", "3", "--param", 'read_level="eventual"',
               "--param", 'write_level="eventual"'],
    "nukv-MM": ["-p", "nukv", "--replicas", "3"],
}


def counter(text, name):
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M))


def run(name, args, tmp):
    base = random.randint(20000, 50000)
    up = subprocess.Popen(
        [binary, "up", *args, "--dcs", "2", "--partitions", "2", "--no-wan", "--fsync", fsync,
         "--metrics-port", str(base), "--data-dir", f"{tmp}/{name}-data", "--config-out", f"{tmp}/{name}.toml",
         "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        info = json.loads(up.stdout.readline())
        config = info["config"]
        deadline = time.time() + 30
        while subprocess.run([binary, "put", "ready", "1", "--config", config, "--timeout-ms", "500"],
                             capture_output=True).returncode != 0:
            if time.time() > deadline:
                raise SystemExit(f"{name}: the cluster never took a write")
            time.sleep(0.1)
        out = subprocess.run([binary, "bench", "--config", config, "-c", "50", "-d", "64", "--keys", "10000",
                              "--seconds", str(seconds), "--workload", "a", "--json"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"{name}: bench failed:\n{out.stderr}")
        ops = json.loads(out.stdout)["mixed"]["throughput_ops_s"]
        home = info["nodes"][0]["dc"]
        writes = syncs = 0.0
        for n in info["nodes"]:
            if n["dc"] != home or not n["metrics"]:
                continue
            text = urllib.request.urlopen(f"http://{n['metrics']}/metrics", timeout=5).read().decode()
            writes += counter(text, "causeway_local_writes_total")
            syncs += counter(text, "causeway_wal_syncs_total")
        return ops, (writes / syncs if syncs else float("nan"))
    finally:
        up.terminate()
        up.wait()


results = {name: [] for name in CONFIGS}
with tempfile.TemporaryDirectory(prefix="causeway-nukv-net.") as tmp:
    for r in range(rounds):
        order = list(CONFIGS) if r % 2 == 0 else list(reversed(CONFIGS))
        for name in order:
            ops, wps = run(f"{name}-{r}", CONFIGS[name], tmp)
            results[name].append((ops, wps))
            print(f"round {r + 1} {name:9} {ops:9.0f} ops/s  {wps:6.2f} writes per fsync", flush=True)

med = {n: statistics.median(o for o, _ in v) for n, v in results.items()}
wps = {n: statistics.median(w for _, w in v) for n, v in results.items()}
print(f"\n{rounds} alternating rounds, fsync = {fsync}, {seconds} s mixed phase, medians:")
for n in CONFIGS:
    print(f"  {n:9} {med[n]:9.0f} ops/s  {wps[n]:6.2f} writes per fsync (DC 0's nodes)")
print(f"  nukv-E ÷ eventual: {med['nukv-E'] / med['eventual']:.3f}")
print(f"  nukv-MM ÷ nukv-E:  {med['nukv-MM'] / med['nukv-E']:.3f} (M/M's overhead over E, every access local)")
