#!/bin/bash
# Throughput with TLS vs plaintext, side by side: two single-node eventual
# servers (fsync never), one with [tls] dir, one with plaintext = true;
# `causeway bench -c 50 -d 64` against each in turn, ROUNDS alternating
# rounds of SECONDS each. Prints one line per run and the medians.
# Usage: scripts/tls-cost.sh [path/to/causeway] [rounds] [seconds]
set -eu
SCRIPTS=$(realpath "$(dirname "$0")")
B=$(realpath "${1:-target/release/causeway}")
ROUNDS=${2:-5}
SECS=${3:-10}
D=$(mktemp -d /tmp/causeway-tls-cost.XXXX)
cd "$D"
. "$SCRIPTS/lib/cluster.sh"
for mode in tls plain; do
  mkdir -p $mode
  if [ $mode = tls ]; then sec='dir = "certs"'; else sec='plaintext = true'; fi
  cat >$mode/cluster.toml <<TOML
cluster_id = "tls-cost-$mode"
protocol = "eventual"
data_dir = "data"
nodes = ["127.0.0.1:$(port)"]
[topology]
dcs = 1
partitions = 1
[storage]
fsync = "never"
[tls]
$sec
TOML
  if [ $mode = tls ]; then "$B" certs --config $mode/cluster.toml >/dev/null; fi
  CAUSEWAY_LOG=error "$B" server --config $mode/cluster.toml --node 0 2>$mode/server.log &
  echo $! >$mode/pid
done
sleep 2
for r in $(seq "$ROUNDS"); do
  for mode in tls plain; do
    "$B" bench --config $mode/cluster.toml -c 50 -d 64 --keys 100000 --seconds "$SECS" --json >$mode/r$r.json 2>/dev/null
    python3 -c "
import json; d = json.load(open('$mode/r$r.json'))
print('$mode', 'round', $r, 'set', round(d['set']['throughput_ops_s']), 'get', round(d['get']['throughput_ops_s']))"
  done
done | tee runs.txt
python3 - <<'PY'
import statistics as st
rows = [l.split() for l in open('runs.txt')]
for op, i in (('set', 4), ('get', 6)):
    t = [float(r[i]) for r in rows if r[0] == 'tls']
    p = [float(r[i]) for r in rows if r[0] == 'plain']
    ratios = [a / b for a, b in zip(t, p)]
    print(f"{op}: tls median {st.median(t):.0f} ops/s, plaintext median {st.median(p):.0f} ops/s, "
          f"median of paired ratios {st.median(ratios):.3f}")
PY
for mode in tls plain; do kill -INT "$(cat $mode/pid)"; done
wait || true
rm -rf "$D"
