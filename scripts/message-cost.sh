#!/bin/bash
# The fixed CPU cost of one message on the network runtime, for the
# simulator's `cpu.service_us`: what a server spends per request beyond its
# protocol handler. Eventual on DKVF's configuration (scripts/lib/cluster.sh:
# 2 DCs x 1 partition, fsync never), 50 sessions of reads only (`bench
# --workload c`, after the load phase), plaintext and then TLS: node 0's user
# + system CPU over 5 s of the read phase (/proc/PID/stat) divided by the
# reads of those 5 s is its CPU per read; one read is one request in and one
# reply out, so that minus the in-process cost of Eventual's `get_req` (the
# handler, decode and encode, from the seed 001 cost file) is the fixed cost
# per message. Medians of ROUNDS rounds.
# Usage: scripts/message-cost.sh [causeway-binary] [rounds]
set -eu
B=$(realpath "${1:-target/release/causeway}")
ROUNDS=${2:-3}
SECS=6
HZ=$(getconf CLK_TCK)
cd "$(dirname "$0")/.."
. scripts/lib/cluster.sh
COSTS=docs/experiments/costs/seed001-eiger.toml
# kind_us are scaled by the file's `scale`.
HANDLER_US=$(python3 -c "
import tomllib; c = tomllib.load(open('$COSTS', 'rb'))
print(c['cpu']['kind_us']['eventual']['get_req'] / c['measured']['scale'])")
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
one() {
  local plain=$1 d before after
  d=$(mktemp -d /tmp/causeway-msg.XXXX)
  two_dc_config "$d" "msg-$plain" eventual never "$plain"
  start_two_dc "$d"
  "$B" bench --config "$d/cluster.toml" -c 50 -d 64 --keys 100000 --seconds $SECS --workload c \
    --json >"$d/out.json" 2>/dev/null &
  local bench=$!
  sleep $((SECS + 1)).5
  set -- $SERVERS
  before=$(cpu "$1")
  sleep 5
  after=$(cpu "$1")
  wait $bench
  kill $SERVERS 2>/dev/null; wait $SERVERS 2>/dev/null || true
  python3 -c "
import json
ops = json.load(open('$d/out.json'))['mixed']['throughput_ops_s'] * 5
print(($after - $before) / $HZ * 1e6 / ops)"
  rm -rf "$d"
}
plain=(); tls=()
for r in $(seq "$ROUNDS"); do
  plain+=("$(one 1)"); tls+=("$(one 0)")
done
python3 - "$HANDLER_US" "$COSTS" "${plain[*]}" "${tls[*]}" <<'PY'
import statistics as st, sys, tomllib
handler, costs = float(sys.argv[1]), sys.argv[2]
plain = [float(x) for x in sys.argv[3].split()]
tls = [float(x) for x in sys.argv[4].split()]
commit = tomllib.load(open(costs, "rb"))["measured"]["commit"]
print(f"in-process get_req (handler, decode, encode; {costs} at {commit}): {handler:.2f} µs")
for name, xs in (("plaintext", plain), ("TLS", tls)):
    m = st.median(xs)
    print(f"{name}: node CPU per read {m:.2f} µs (rounds: {', '.join(f'{x:.2f}' for x in xs)}); "
          f"fixed cost per message {m - handler:.2f} µs")
PY
