#!/bin/bash
# Idle cost of an embedded `causeway up` (3 DCs x 2 partitions, the default
# protocol or the one named, WAN delays injected): CPU of the process over
# 30 s after a 10 s warm-up, growth of the data dir, and log syncs counted by
# strace over 30 s.
# Usage: scripts/idle-cost.sh [path/to/causeway] [protocol]
set -eu
B=${1:-target/release/causeway}
P=${2:-causalspartanx}
B=$(realpath "$B")
D=$(mktemp -d /tmp/causeway-idle.XXXX)
cd "$D"
"$B" up -p "$P" --config-out "$D/c.toml" --data-dir "$D/data" >up.out 2>up.err &
PID=$!
sleep 10
t0=$(awk '{print $14+$15}' /proc/$PID/stat); w0=$(du -sb data | cut -f1); s0=$(date +%s.%N)
sleep 30
t1=$(awk '{print $14+$15}' /proc/$PID/stat); w1=$(du -sb data | cut -f1); s1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
echo "cpu_percent_of_one_core $(echo "scale=1; ($t1-$t0)*100/$hz/($s1-$s0)" | bc)"
echo "data_dir_growth_bytes_per_s $(echo "scale=1; ($w1-$w0)/($s1-$s0)" | bc)"
timeout 30 strace -f -c -e trace=fsync,fdatasync -p $PID -o "$D/strace.txt" >/dev/null 2>&1 || true
echo "log syncs in 30 s:"; grep -E "fsync|fdatasync" "$D/strace.txt" || echo "none"
kill -INT $PID; wait $PID || true
rm -rf "$D"
