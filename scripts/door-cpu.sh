#!/bin/bash
# CPU per request of the server process, redis-server against Causeway's
# Redis front door (a one-node `causeway up -p PROTOCOL --redis-port`, fsync
# never), both driven by the same `redis-benchmark -c 50 -d 64 -r 100000 -n N
# -t set` (then `-t get`), alternating in each round. Prints per run the
# server's user and system µs per request and the rate, then the medians and
# each protocol's total µs per request over Redis's.
#
# Why: front-door throughput rounds on these shared two-core machines move
# 20-35 % from round to round; the server's CPU time per request moves far
# less, and says the same thing (the server has one core of the two, the
# benchmark client the other).
# Usage: scripts/door-cpu.sh [causeway-binary] [rounds] [requests] [protocol...]
set -eu
B=$(realpath "${1:-target/release/causeway}")
ROUNDS=${2:-3}
N=${3:-200000}
shift 3 2>/dev/null || shift $#
PROTOCOLS=${*:-eventual}
command -v redis-server >/dev/null || { echo "needs redis-server (apt install redis-server)" >&2; exit 2; }
HZ=$(getconf CLK_TCK)
D=$(mktemp -d /tmp/causeway-door-cpu.XXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$D"' EXIT
. "$(dirname "$0")/lib/cluster.sh"
# One run: PORT PID NAME KIND -> a line "NAME KIND user sys total rate".
measure() {
  local port=$1 pid=$2 name=$3 kind=$4 before after t0 t1
  before=$(awk '{print $14, $15}' "/proc/$pid/stat")
  t0=$(date +%s.%N)
  redis-benchmark -p "$port" -c 50 -d 64 -r 100000 -n "$N" -t "$kind" -q >/dev/null 2>&1
  t1=$(date +%s.%N)
  after=$(awk '{print $14, $15}' "/proc/$pid/stat")
  python3 -c "
b, a = '$before'.split(), '$after'.split()
u = (int(a[0]) - int(b[0])) / $HZ * 1e6 / $N
s = (int(a[1]) - int(b[1])) / $HZ * 1e6 / $N
print(f'$name $kind {u:.2f} {s:.2f} {u + s:.2f} {$N / ($t1 - $t0):.0f}')" | tee -a "$D/runs"
}
RPORT=$(port)
redis-server --port "$RPORT" --save '' --appendonly no --daemonize no >/dev/null 2>&1 &
RPID=$!
for p in $PROTOCOLS; do
  eval "PORT_$p=$(port)"
  pp=PORT_$p
  CAUSEWAY_LOG=error "$B" up -p "$p" --dcs 1 --partitions 1 --no-wan --fsync never --redis-port "${!pp}" \
    --data-dir "$D/$p" --config-out "$D/$p.toml" >"$D/$p.log" 2>&1 &
  eval "PID_$p=$!"
done
for p in redis $PROTOCOLS; do
  pp=PORT_$p; port=${!pp:-$RPORT}
  for _ in $(seq 1 100); do (echo >/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.3; done
done
echo "system op user_us sys_us total_us_per_request requests_per_s"
for r in $(seq "$ROUNDS"); do
  for kind in set get; do
    redis-cli -p "$RPORT" flushall >/dev/null
    measure "$RPORT" "$RPID" redis $kind
    for p in $PROTOCOLS; do
      pp=PORT_$p; pid=PID_$p
      measure "${!pp}" "${!pid}" "$p" $kind
    done
  done
done
python3 - "$D/runs" <<'PY'
import statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    name, kind, u, s, t, rate = line.split()
    rows.setdefault((name, kind), []).append((float(u), float(s), float(t), float(rate)))
for kind in ("set", "get"):
    redis = st.median(r[2] for r in rows[("redis", kind)])
    for (name, k), rs in rows.items():
        if k != kind:
            continue
        med = [st.median(c) for c in zip(*rs)]
        print(f"median {name:<16} {kind}: user {med[0]:.2f} sys {med[1]:.2f} total {med[2]:.2f} us/request "
              f"({med[2] / redis:.2f}x Redis's), {med[3]:.0f} requests/s")
PY
