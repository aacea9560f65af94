#!/bin/bash
# Instructions per operation on DKVF's configuration (as scripts/dkvf-config.sh:
# 2 DCs x 1 partition, plaintext, fsync never, 50 sessions at 50:50, 64-byte
# values, 100 000 keys), counted by valgrind's callgrind over 6 s of the
# mixed phase, for one process: DC 0's server (WHO=node0, the default), DC 1's
# (WHO=node1, which only receives replication: the clients are on DC 0) or the
# bench client (WHO=client). The other processes run natively.
#
# Why: on these shared two-core machines two throughput runs of the same
# binary differ by 5-10 %, so a change worth 2 % cannot be seen in ops/s.
# An instruction count is repeatable (DC 0's to about 1 %, the client's to
# about 3 %) whatever else the machine does. It is not time: a call to
# memmove or a cache miss costs more than its instructions say, and the
# process under valgrind runs some 10x slower, which changes how requests
# batch (the same for both sides of a comparison). Use it to compare two
# binaries or two protocols, next to a throughput run, not instead of one.
#
# Prints: WHO PROTOCOL BINARY mixed-phase ops/s and instructions per op.
# KEEP=FILE keeps callgrind's output there (for callgrind_annotate, per function).
# Usage: [WHO=node0|node1|client] [KEEP=FILE] scripts/ir-per-op.sh [causeway-binary] [protocol]
set -eu
B=$(realpath "${1:-target/release/causeway}")
P=${2:-causalspartanx}
WHO=${WHO:-node0}
SECS=8
command -v valgrind >/dev/null || { echo "needs valgrind (apt install valgrind)" >&2; exit 2; }
D=$(mktemp -d /tmp/causeway-ir.XXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$D"' EXIT
. "$(dirname "$0")/lib/cluster.sh"
two_dc_config "$D" "ir-$P" "$P" never 1
CG="valgrind --tool=callgrind --callgrind-out-file=$D/cg.out"
case $WHO in
node0)
  CAUSEWAY_LOG=error $CG "$B" server --config "$D/cluster.toml" --node 0 2>"$D/vg.log" &
  TARGET=$!
  CAUSEWAY_LOG=error "$B" server --config "$D/cluster.toml" --node 1 &
  until "$B" put ready 1 --config "$D/cluster.toml" --timeout-ms 2000 >/dev/null 2>&1; do sleep 0.5; done
  BENCH_CMD=("$B")
  ;;
node1)
  CAUSEWAY_LOG=error "$B" server --config "$D/cluster.toml" --node 0 &
  CAUSEWAY_LOG=error $CG "$B" server --config "$D/cluster.toml" --node 1 2>"$D/vg.log" &
  TARGET=$!
  until "$B" put ready 1 --config "$D/cluster.toml" --timeout-ms 2000 >/dev/null 2>&1; do sleep 0.5; done
  BENCH_CMD=("$B")
  ;;
client)
  start_two_dc "$D"
  BENCH_CMD=($CG "$B")
  ;;
*) echo "WHO is node0, node1 or client" >&2; exit 2 ;;
esac
"${BENCH_CMD[@]}" bench --config "$D/cluster.toml" -c 50 -d 64 --keys 100000 --seconds $SECS --workload a \
  --json >"$D/out.json" 2>>"$D/vg.log" &
BENCH=$!
if [ "$WHO" = client ]; then TARGET=$BENCH; fi
# The load phase runs SECS seconds, then the mixed phase SECS more: count
# from 1.5 s into the mixed phase for 6 s.
sleep $((SECS + 1)).5
callgrind_control -z $TARGET >/dev/null 2>&1
sleep 6
callgrind_control -d $TARGET >/dev/null 2>&1
wait $BENCH
if [ -n "${KEEP:-}" ]; then cp "$D/cg.out.1" "$KEEP"; fi
ops=$(python3 -c "import json; print(json.load(open('$D/out.json'))['mixed']['throughput_ops_s'])")
ir=$(callgrind_annotate "$D/cg.out.1" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
python3 -c "print(f'$WHO $P $(basename "$B") mixed {$ops:.0f} ops/s, {$ir / ($ops * 6):.0f} instructions/op')"
