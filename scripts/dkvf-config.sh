#!/bin/bash
# Our side of the DKVF comparison (issue 18), on DKVF's own configuration:
# 2 DCs × 1 partition as two `causeway server` processes, storage unsynced,
# 50 client sessions on DC 0, 64-byte values, 100 000 keys, YCSB workload a
# (50:50 read:update) after a load phase. One line per protocol and round;
# medians at the end. The DKVF figures to compare with are in BENCHMARKS.md.
# PLAINTEXT=1 runs the servers without TLS, as DKVF's Java sockets are;
# PROTOCOLS="a b" picks the protocols.
# Usage: scripts/dkvf-config.sh [causeway-binary] [rounds] [seconds] [fsync]
set -eu
B=$(realpath "${1:-target/release/causeway}")
ROUNDS=${2:-3}
SECS=${3:-10}
FSYNC=${4:-never}
PROTOCOLS=${PROTOCOLS:-"eventual gentlerain causalspartanx cops"}
if [ "${PLAINTEXT:-0}" = 1 ]; then TLS='plaintext = true'; else TLS='dir = "certs"'; fi
D=$(mktemp -d /tmp/causeway-dkvf.XXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$D"' EXIT
port() { python3 -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])"; }
for r in $(seq 1 "$ROUNDS"); do
  for p in $PROTOCOLS; do
    dir="$D/$p-$r"
    mkdir -p "$dir"
    cat >"$dir/cluster.toml" <<TOML
cluster_id = "dkvf-$p-$r"
protocol = "$p"
data_dir = "data"
nodes = ["127.0.0.1:$(port)", "127.0.0.1:$(port)"]
[topology]
dcs = 2
partitions = 1
[storage]
fsync = "$FSYNC"
[tls]
$TLS
TOML
    if [ "${PLAINTEXT:-0}" != 1 ]; then "$B" certs --config "$dir/cluster.toml" >/dev/null; fi
    CAUSEWAY_LOG=error "$B" server --config "$dir/cluster.toml" --node 0 &
    s0=$!
    CAUSEWAY_LOG=error "$B" server --config "$dir/cluster.toml" --node 1 &
    s1=$!
    until "$B" put ready 1 --config "$dir/cluster.toml" --timeout-ms 500 >/dev/null 2>&1; do sleep 0.1; done
    out=$("$B" bench --config "$dir/cluster.toml" -c 50 -d 64 --keys 100000 --seconds "$SECS" --workload a --json 2>/dev/null)
    ops=$(python3 -c "import json,sys;print(round(json.loads(sys.argv[1])['mixed']['throughput_ops_s']))" "$out")
    echo "round $r $p $ops"
    kill $s0 $s1; wait $s0 $s1 2>/dev/null || true
  done
done | tee "$D/runs.txt"
python3 - "$D/runs.txt" <<'PY'
import sys, statistics, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, _, p, ops = line.split()
    runs[p].append(int(ops))
for p, v in runs.items():
    print(f"{p:<16} median {statistics.median(v):>8.0f} ops/s   runs {' '.join(map(str, v))}")
PY
