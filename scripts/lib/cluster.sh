# Shared by the scripts that start `causeway server` processes; source it
# after setting B (the causeway binary).

# A free loopback port.
port() { python3 -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])"; }

# DKVF's configuration (the setup of its published figures) in DIR/cluster.toml: 2 DCs x 1 partition,
# storage FSYNC; plaintext if PLAINTEXT is 1, else TLS with fresh
# certificates. Usage: two_dc_config DIR CLUSTER_ID PROTOCOL FSYNC PLAINTEXT
two_dc_config() {
  local dir=$1 id=$2 protocol=$3 fsync=$4 plaintext=$5 tls='dir = "certs"'
  if [ "$plaintext" = 1 ]; then tls='plaintext = true'; fi
  mkdir -p "$dir"
  cat >"$dir/cluster.toml" <<TOML
cluster_id = "$id"
protocol = "$protocol"
data_dir = "data"
nodes = ["127.0.0.1:$(port)", "127.0.0.1:$(port)"]
[topology]
dcs = 2
partitions = 1
[storage]
fsync = "$fsync"
[tls]
$tls
TOML
  if [ "$plaintext" != 1 ]; then "$B" certs --config "$dir/cluster.toml" >/dev/null; fi
}

# Start both nodes of DIR/cluster.toml in the background (their pids in
# SERVERS) and wait until the cluster takes a write.
start_two_dc() {
  local dir=$1
  CAUSEWAY_LOG=error "$B" server --config "$dir/cluster.toml" --node 0 &
  SERVERS=$!
  CAUSEWAY_LOG=error "$B" server --config "$dir/cluster.toml" --node 1 &
  SERVERS="$SERVERS $!"
  until "$B" put ready 1 --config "$dir/cluster.toml" --timeout-ms 500 >/dev/null 2>&1; do sleep 0.1; done
}
