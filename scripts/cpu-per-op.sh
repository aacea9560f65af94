#!/bin/bash
# CPU per operation on DKVF's configuration (as scripts/dkvf-config.sh: 2 DCs x
# 1 partition, plaintext, fsync never, 50 sessions at 50:50, 64-byte values,
# 100 000 keys): user and system µs per operation of DC 0's server, DC 1's
# and the bench client, from /proc/PID/stat over 5 s of the mixed phase,
# divided by the operations of those 5 s (the mixed phase's mean rate). On
# this 2-core machine the three processes together use about both cores, so
# ops/s is close to 2 000 000 / (total µs per op): the total says where a
# protocol's throughput goes, and is steadier than ops/s.
# Protocols alternate within each round; medians at the end.
# Usage: scripts/cpu-per-op.sh [causeway-binary] [rounds] [protocol...]
set -eu
B=$(realpath "${1:-target/release/causeway}")
ROUNDS=${2:-3}
shift 2 2>/dev/null || shift $#
PROTOCOLS=${*:-eventual causalspartanx}
SECS=8
HZ=$(getconf CLK_TCK)
. "$(dirname "$0")/lib/cluster.sh"
cpu() { awk '{print $14, $15}' "/proc/$1/stat"; }
OUT=$(mktemp /tmp/causeway-cpu.XXXX)
one() {
  local p=$1 d
  d=$(mktemp -d /tmp/causeway-cpu.XXXX)
  two_dc_config "$d" "cpu-$p" "$p" never 1
  start_two_dc "$d"
  "$B" bench --config "$d/cluster.toml" -c 50 -d 64 --keys 100000 --seconds $SECS --workload a \
    --json >"$d/out.json" 2>/dev/null &
  local bench=$! before after
  # The load phase runs SECS seconds, then the mixed phase SECS more.
  sleep $((SECS + 1)).5
  set -- $SERVERS
  before="$(cpu $1) $(cpu $2) $(cpu $bench)"
  sleep 5
  after="$(cpu $1) $(cpu $2) $(cpu $bench)"
  wait $bench
  kill $SERVERS 2>/dev/null; wait $SERVERS 2>/dev/null || true
  python3 - "$p" "$HZ" "$d/out.json" "$before" "$after" <<'PY' | tee -a "$OUT"
import json, sys
p, hz, out, before, after = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(), sys.argv[5].split()
ops = json.load(open(out))["mixed"]["throughput_ops_s"] * 5
us = [(int(b) - int(a)) / hz * 1e6 / ops for a, b in zip(before, after)]
cells = " ".join(f"{us[2 * i]:.2f} {us[2 * i + 1]:.2f}" for i in range(3))
print(f"{p} {ops / 5:.0f} {cells} {sum(us):.2f}")
PY
  rm -rf "$d"
}
echo "protocol ops/s | user sys µs/op: node0 | node1 | client | total"
for r in $(seq "$ROUNDS"); do
  for p in $PROTOCOLS; do one "$p"; done
done
python3 - "$OUT" <<'PY'
import statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault(f[0], []).append([float(x) for x in f[1:]])
names = ["ops/s", "node0 user", "node0 sys", "node1 user", "node1 sys", "client user", "client sys", "total"]
for p, rs in rows.items():
    med = [st.median(col) for col in zip(*rs)]
    print(f"median {p:<16} " + ", ".join(f"{n} {v:.0f}" if n == "ops/s" else f"{n} {v:.2f}" for n, v in zip(names, med)))
PY
rm -f "$OUT"
