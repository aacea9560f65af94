#!/bin/bash
# Request latency while the log is compacted: one eventual node with an
# 8 MiB snapshot threshold and fsync on every write; `causeway bench` (16
# connections, 100-byte values over 60 000 keys) writes for 20 s, which
# compacts the log several times, while a loop times 1 500 `causeway get`
# processes (each connects, says hello and reads one key). Prints the
# probes' latency, the bench's put/get latency, and each compaction's
# protocol-thread pause (copy_ms) and total background time (ms).
# Usage: scripts/compaction-latency.sh [path/to/causeway]
set -eu
SCRIPTS=$(realpath "$(dirname "$0")")
B=$(realpath "${1:-target/release/causeway}")
D=$(mktemp -d /tmp/causeway-compaction.XXXX)
cd "$D"
. "$SCRIPTS/lib/cluster.sh"
cat >cluster.toml <<TOML
cluster_id = "compaction-bench"
protocol = "eventual"
data_dir = "data"
nodes = ["127.0.0.1:$(port)"]
[topology]
dcs = 1
partitions = 1
[storage]
fsync = "always"
snapshot_bytes = 8388608
[tls]
dir = "certs"
TOML
"$B" certs --config cluster.toml >/dev/null
CAUSEWAY_LOG=info "$B" server --config cluster.toml --node 0 2>server.log &
SERVER=$!
sleep 2
"$B" put user1 v --config cluster.toml >/dev/null
"$B" bench --config cluster.toml --seconds 20 -c 16 --keys 60000 -d 100 --json >bench.json 2>bench.err &
BENCH=$!
sleep 1
for i in $(seq 1500); do
  s=$(date +%s%N); "$B" get user1 --config cluster.toml --timeout-ms 5000 >/dev/null 2>&1; e=$(date +%s%N)
  echo $(( (e - s) / 1000 ))
done | sort -n | awk '{a[NR]=$1} END {print "get probes", NR, "p50_us", a[int(NR*0.5)], "p99_us", a[int(NR*0.99)], "max_us", a[NR]}'
wait $BENCH
python3 -c "
import json; d = json.load(open('bench.json'))
for ph in ('set', 'get'):
    r = d[ph]
    print(ph, round(r['throughput_ops_s']), 'ops/s, errors', r['errors'], {k: {'p50_us': v['p50_us'], 'p99_us': v['p99_us'], 'max_us': v['max_us']} for k, v in r['latency'].items()})
"
kill -INT $SERVER; wait $SERVER || true
grep compacted server.log | sed 's/.*INFO //'
rm -rf "$D"
