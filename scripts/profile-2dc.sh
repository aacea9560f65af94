#!/bin/bash
# A system-wide CPU profile of one protocol on DKVF's configuration: two
# `causeway server` processes (2 DCs x 1 partition, plaintext, fsync never)
# and `causeway bench --workload a` (50 sessions, 64-byte values, 100 000
# keys) for 8 s, under `perf record -a`. Read it with
#   perf report -i OUT --no-children --sort comm -g none
#   perf report -i OUT --no-children --comm causeway-node-0,causeway-node-1 --sort sym -g none
# Usage: scripts/profile-2dc.sh PROTOCOL OUT.data [causeway-binary]
set -eu
P=$1
OUT=$(realpath -m "$2")
B=$(realpath "${3:-target/release/causeway}")
D=$(mktemp -d /tmp/causeway-prof.XXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$D"' EXIT
. "$(dirname "$0")/lib/cluster.sh"
two_dc_config "$D" "prof-$P" "$P" never 1
start_two_dc "$D"
perf record -a -e cpu-clock -F 999 -g -o "$OUT" -- sleep 9 >/dev/null 2>&1 &
rec=$!
"$B" bench --config "$D/cluster.toml" -c 50 -d 64 --keys 100000 --seconds 8 --workload a 2>&1 | tail -1
wait $rec
