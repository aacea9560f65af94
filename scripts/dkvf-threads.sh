#!/bin/bash
# One run of DKVF's configuration (as scripts/dkvf-config.sh, plaintext,
# fsync never), with where the CPU goes: per-thread CPU of DC 0's server,
# DC 1's and the bench client over 4 s of the mixed phase (% of a core, from
# /proc/PID/task/*/stat), and each process's minor page faults per 1 000
# operations. Prints the mixed phase's ops/s first.
# SNAP=BYTES sets [storage] snapshot_bytes (4000000000: no checkpoint);
# PARAMS="a = 1\nb = 2" adds protocol [params].
# Usage: scripts/dkvf-threads.sh [causeway-binary] [protocol] [seconds]
set -eu
B=$(realpath "${1:-target/release/causeway}")
P=${2:-causalspartanx}
SECS=${3:-8}
D=$(mktemp -d /tmp/causeway-dkvf-threads.XXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$D"' EXIT
. "$(dirname "$0")/lib/cluster.sh"
two_dc_config "$D/c" "threads-$P" "$P" never 1
if [ -n "${SNAP:-}" ]; then sed -i "s/^fsync = .*/&\nsnapshot_bytes = $SNAP/" "$D/c/cluster.toml"; fi
if [ -n "${PARAMS:-}" ]; then printf "[params]\n$PARAMS\n" >>"$D/c/cluster.toml"; fi
start_two_dc "$D/c"
"$B" bench --config "$D/c/cluster.toml" -c 50 -d 64 --keys 100000 --seconds "$SECS" --workload a --json >"$D/out.json" 2>/dev/null &
BENCH=$!
snap() {
  for pid in $SERVERS $BENCH; do
    for t in /proc/$pid/task/*; do echo "$pid $(tr ' ' _ <"$t/comm") $(awk '{print $14+$15}' "$t/stat")"; done
    echo "$pid minflt $(awk '{print $10}' /proc/$pid/stat)"
  done
}
# The load phase runs SECS seconds too; sample 4 s near the mixed phase's end.
sleep $((2 * SECS - 5))
snap >"$D/a"; sleep 4; snap >"$D/b"
wait $BENCH
python3 - "$D/a" "$D/b" "$D/out.json" "$SERVERS" "$BENCH" <<'PY'
import sys, json, collections
ops = json.load(open(sys.argv[3]))['mixed']['throughput_ops_s']
snaps = []
for f in sys.argv[1:3]:
    d = collections.Counter()
    for line in open(f):
        pid, comm, t = line.split()
        d[(pid, comm)] += int(t)
    snaps.append(d)
servers = sys.argv[4].split()
names = {servers[0]: 'DC0', servers[1]: 'DC1', sys.argv[5]: 'client'}
print(f"mixed {ops:.0f} ops/s")
for (pid, comm), t in sorted(snaps[1].items(), key=lambda kv: names[kv[0][0]]):
    delta = (t - snaps[0][(pid, comm)]) / 4
    if comm == 'minflt':
        print(f"{names[pid]:6} page faults per 1000 ops {delta / ops * 1000:.2f}")
    elif delta > 0.5:
        print(f"{names[pid]:6} {comm:20} {delta:5.1f} % of a core  {delta * 1e4 / ops:5.2f} us/op")
PY
