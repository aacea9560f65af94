#!/usr/bin/env python3
"""Side-by-side throughput: Debian's redis-server vs Causeway.

Default mode: `redis-benchmark -c 50 -d 64 -t set,get -r 100000 -P N`
against redis-server, and `causeway bench -c 50 -d 64 -P N` (its own
client, in-process embedded node) for each protocol.

--front-door: the same client binary on both sides. redis-benchmark drives
redis-server and, for each protocol, a one-node `causeway up --redis-port`
(1 DC x 1 partition, its Redis front door), with -P PIPELINE if given.

Rounds alternate the systems in one session on this machine, each run from an
empty keyspace (redis-server is flushed before each of its rounds); medians and
ratios to Redis are printed. Needs redis-server and redis-benchmark on PATH
(apt-get install redis-server redis-tools) and a release build of causeway
(cargo build --release -p causeway).

--plaintext: the embedded server without TLS, as redis-server runs
(default mode only).

usage: scripts/redis-compare.py [--front-door] [--plaintext] [-P N] [--protocols a,b] [ROUNDS] [SECONDS] [FSYNC]
(protocols default: eventual,causalspartanx)
"""
import json, os, re, shutil, socket, statistics, subprocess, sys, tempfile, time

args = sys.argv[1:]
front_door = "--front-door" in args
plaintext = "--plaintext" in args
args = [a for a in args if a not in ("--front-door", "--plaintext")]
pipeline = 1
if "-P" in args:
    i = args.index("-P")
    pipeline = int(args[i + 1])
    del args[i:i + 2]
protocols = ["eventual", "causalspartanx"]
if "--protocols" in args:
    i = args.index("--protocols")
    protocols = args[i + 1].split(",")
    del args[i:i + 2]
rounds = int(args[0]) if len(args) > 0 else 5
seconds = int(args[1]) if len(args) > 1 else 4
fsync = args[2] if len(args) > 2 else "never"
causeway = os.environ.get("CAUSEWAY", "target/release/causeway")
redis_port = "6399"
# redis-benchmark's -n: requests per kind and second of the intended run.
REQUESTS = 40_000
door_port = 6480


def wait_port(port, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing answered on port {port}")


def flushall(port):
    """Empty redis-server, so that each of its rounds starts from an empty
    keyspace as each Causeway run does (a fresh node): without it Redis's
    rounds after the first overwrote keys already there."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"*1\r\n$8\r\nFLUSHALL\r\n")
        if not s.recv(64).startswith(b"+OK"):
            raise SystemExit("redis-server did not answer FLUSHALL with +OK")


def redis_benchmark(port, kinds, requests):
    """ops/s per kind from one redis-benchmark run."""
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-c", "50", "-d", "64", "-r", "100000",
                          "-n", str(requests), "-P", str(pipeline), "-t", ",".join(kinds), "-q"],
                         capture_output=True, text=True).stdout.replace("\r", "\n")
    res = {}
    for kind in kinds:
        m = re.findall(rf"^{kind.upper()}: ([0-9.]+) requests per second", out, re.M)
        if not m:
            raise SystemExit(f"redis-benchmark printed no {kind} rate:\n{out}")
        res[kind] = float(m[-1])
    return res


def front_door_run(p):
    """Start a one-node cluster with a Redis front door, benchmark it, stop it."""
    d = tempfile.mkdtemp(prefix=f"causeway-door-{p}-")
    up = subprocess.Popen([causeway, "up", "-p", p, "--dcs", "1", "--partitions", "1", "--no-wan",
                           "--fsync", fsync, "--redis-port", str(door_port), "--data-dir", f"{d}/data",
                           "--config-out", f"{d}/cluster.toml"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(door_port)
        # The same redis-benchmark command as Redis gets (the same number of
        # requests, from an empty keyspace on both sides).
        return redis_benchmark(door_port, ("set", "get"), REQUESTS * seconds * pipeline)
    finally:
        up.terminate()
        up.wait()
        shutil.rmtree(d, ignore_errors=True)


redis = subprocess.Popen(["redis-server", "--port", redis_port, "--save", "", "--appendonly", "no"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
wait_port(int(redis_port))
res = {(who, kind): [] for who in ["redis"] + protocols for kind in ("set", "get")}
try:
    for r in range(rounds):
        flushall(int(redis_port))
        for kind, v in redis_benchmark(redis_port, ("set", "get"), REQUESTS * seconds * pipeline).items():
            res[("redis", kind)].append(v)
        for p in protocols:
            if front_door:
                got = front_door_run(p)
            else:
                out = subprocess.run([causeway, "bench", "-p", p, "-c", "50", "-d", "64", "-P", str(pipeline), "--seconds",
                                      str(seconds), "--fsync", fsync, "--json"] + (["--plaintext"] if plaintext else []),
                                     capture_output=True, text=True).stdout
                j = json.loads(out)
                got = {kind: j[kind]["throughput_ops_s"] for kind in ("set", "get")}
            for kind, v in got.items():
                res[(p, kind)].append(v)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
finally:
    redis.terminate()

client = f"redis-benchmark -P {pipeline} on both sides (Causeway: its Redis front door)" if front_door \
    else f"redis-benchmark vs causeway bench, -P {pipeline}, causeway {'plaintext' if plaintext else 'TLS'}"
print(f"{rounds} alternating rounds, {client}, 50 connections, 64-byte values, 100 000 keys, "
      f"causeway fsync={fsync}")
# Two ratios: of the medians, and the median of each round's ratio to Redis's
# run in the same round (which a machine that slows down or speeds up over
# the run, as these shared ones do, moves less).
print(f"{'system':<16} {'op':<4} {'median ops/s':>13} {'ratio to redis':>15} {'paired':>7}   all runs")
for kind in ("set", "get"):
    base = statistics.median(res[("redis", kind)])
    for who in ["redis"] + protocols:
        v = res[(who, kind)]
        med = statistics.median(v)
        paired = statistics.median(x / r for x, r in zip(v, res[("redis", kind)]))
        print(f"{who:<16} {kind:<4} {med:>13.0f} {med / base:>15.2f} {paired:>7.2f}   {' '.join(f'{x:.0f}' for x in v)}")
