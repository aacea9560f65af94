#!/bin/bash
# Our side of the DKVF comparison, on DKVF's own configuration:
# 2 DCs × 1 partition as two `causeway server` processes, storage unsynced,
# 50 client sessions on DC 0, 64-byte values, 100 000 keys, YCSB workload a
# (50:50 read:update) after a load phase. One line per protocol and round;
# medians at the end. A ratio to DKVF needs DKVF run on the same machine in
# alternating rounds (BENCHMARKS.md says how the current ones were measured).
# PLAINTEXT=1 runs the servers without TLS, as DKVF's Java sockets are;
# PROTOCOLS="a b" picks the protocols.
# Usage: scripts/dkvf-config.sh [causeway-binary] [rounds] [seconds] [fsync]
set -eu
B=$(realpath "${1:-target/release/causeway}")
ROUNDS=${2:-3}
SECS=${3:-10}
FSYNC=${4:-never}
PROTOCOLS=${PROTOCOLS:-"eventual gentlerain causalspartanx cops"}
D=$(mktemp -d /tmp/causeway-dkvf.XXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$D"' EXIT
. "$(dirname "$0")/lib/cluster.sh"
for r in $(seq 1 "$ROUNDS"); do
  for p in $PROTOCOLS; do
    dir="$D/$p-$r"
    two_dc_config "$dir" "dkvf-$p-$r" "$p" "$FSYNC" "${PLAINTEXT:-0}"
    start_two_dc "$dir"
    out=$("$B" bench --config "$dir/cluster.toml" -c 50 -d 64 --keys 100000 --seconds "$SECS" --workload a --json 2>/dev/null)
    ops=$(python3 -c "import json,sys;print(round(json.loads(sys.argv[1])['mixed']['throughput_ops_s']))" "$out")
    echo "round $r $p $ops"
    kill $SERVERS; wait $SERVERS 2>/dev/null || true
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
