#!/bin/bash
# Instructions per SET through the Redis front door: the whole one-node
# `causeway up` process (RESP, the session's client side, the protocol, the
# log, all on the node's one thread) under valgrind's callgrind, driven by
# redis-benchmark -c 50 -d 64 -r 100000 -t set. Two runs, of 1 000 and of
# 21 000 requests; their difference / 20 000 leaves start-up and shutdown
# out. Prints PROTOCOL BINARY instructions per SET and the run's memcpy
# instructions (the cost of messages moved past the inline line).
#
# Why: front-door throughput rounds on these shared two-core machines move
# 20-35 %, far above the few per cent a change to a protocol's per-request
# work is worth; an instruction count repeats to about 1 %. It is not time
# (see scripts/ir-per-op.sh): compare binaries, alternated, not one run.
# KEEP=DIR keeps callgrind's two outputs there (for callgrind_annotate).
# Usage: scripts/door-ir.sh [causeway-binary] [protocol]
set -eu
B=$(realpath "${1:-target/release/causeway}")
P=${2:-eventual}
PORT=${PORT:-6482}
command -v valgrind >/dev/null || { echo "needs valgrind (apt install valgrind)" >&2; exit 2; }
command -v redis-benchmark >/dev/null || { echo "needs redis-benchmark (apt install redis-tools)" >&2; exit 2; }
D=$(mktemp -d /tmp/causeway-door-ir.XXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$D"' EXIT
run() {
  local n=$1 out=$2
  rm -rf "$D/data"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$B" up -p "$P" --dcs 1 --partitions 1 --no-wan \
    --fsync never --redis-port "$PORT" --data-dir "$D/data" --config-out "$D/cluster.toml" >"$D/up.log" 2>&1 &
  local vp=$!
  for _ in $(seq 1 200); do (echo >/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break; sleep 0.3; done
  redis-benchmark -p "$PORT" -c 50 -d 64 -r 100000 -n "$n" -t set -q >/dev/null 2>&1
  kill -INT "$vp"
  wait "$vp" || true
}
total() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}'; }
memcpy() { callgrind_annotate "$1" 2>/dev/null | awk '/__memcpy_avx_unaligned_erms|__memmove_avx_unaligned_erms/ {gsub(",", "", $1); print $1; exit}'; }
run 1000 "$D/small.out"
run 21000 "$D/large.out"
a=$(total "$D/small.out"); c=$(total "$D/large.out"); m=$(memcpy "$D/large.out")
echo "$P $(basename "$B") $(( (c - a) / 20000 )) instructions per SET, memcpy ${m:-0} in the 21 000-request run"
if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP"; cp "$D/small.out" "$D/large.out" "$KEEP/"; fi
