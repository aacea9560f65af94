//! `causeway`: the one binary.
//!
//! - `causeway demo` — the README's main job: a simulated 3-DC run of every
//!   implemented protocol on one workload, and a comparison table.
//! - `causeway sim SCENARIO.toml` — run one scenario and print its report.
//! - `causeway experiment EXPERIMENT.toml` — sweep, repeat, take medians,
//!   write CSV, JSON, SVG plots and a Markdown report.
//!
//! - `causeway server --config C --node N` — one node of a cluster over TCP.
//! - `causeway up` — an embedded cluster on loopback, kept running.
//! - `causeway get/put/rot/wot` — a client against a running cluster.

mod capacity;
mod experiment;
mod net;
mod processes;
mod run;
mod torture;
mod txn;

/// mimalloc rather than glibc's malloc: a server frees old versions (GC)
/// of every size while it allocates frames and messages, and glibc's
/// consolidation and bin searches then cost more per operation than the
/// protocol's own work (profiled on Eiger's get path).
/// mimalloc, built without its transparent huge pages (the `no_thp`
/// feature): by default it madvises its arenas into them, and each first
/// touch of a 2 MB page then zeroes (and, where memory is fragmented,
/// compacts) it all on the faulting thread, which for a store taking writes
/// is the node's. Under `causeway bench`'s SETs that cost CausalSpartanX
/// 14 % of its throughput (a profile put 9 % of the process in the kernel's
/// page zeroing, `clear_page_erms`); pipelined
/// GETs, which the larger pages spared TLB misses, lose some 10 %. Redis
/// turns them off for itself for the same reason (`disable-thp`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use causeway_core::Op;
use causeway_protocols::ProtocolName;
use causeway_sim::{Scenario, SimReport, report};
use clap::{Parser, Subcommand};
use net::ClientCmd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "causeway",
    version,
    about = "Causally consistent geo-replicated storage: store, framework, laboratory"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario in the deterministic simulator.
    Sim {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Protocol to run; repeat for several. Default: every implemented protocol.
        #[arg(long, short)]
        protocol: Vec<ProtocolName>,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Print the reports as JSON (one array).
        #[arg(long)]
        json: bool,
        /// Record the history and write it as JSON to this file (with one
        /// protocol) or to FILE.<protocol>.json (with several).
        #[arg(long)]
        history: Option<PathBuf>,
    },
    /// Run an experiment file: every protocol × swept value × repetition, on
    /// the simulator (or the network runtime), medians, CSV, JSON, SVG plots
    /// and a Markdown report in --out.
    Experiment {
        /// The experiment file (TOML), or a directory: every `*.toml` in it,
        /// in name order.
        file: PathBuf,
        /// A smoke run of each file: the ends of its sweep, one repetition,
        /// at most 600 ms of load (what CI runs).
        #[arg(long)]
        quick: bool,
        /// Where the outputs go.
        #[arg(long, default_value = "experiment-results")]
        out: PathBuf,
        /// Override the file's repetitions.
        #[arg(long)]
        reps: Option<u32>,
        /// Override the file's runtime: sim | network.
        #[arg(long)]
        runtime: Option<String>,
        /// Simulator runs in parallel (default: the number of cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Print what was written as JSON.
        #[arg(long)]
        json: bool,
        /// Run nothing: redraw each report (plots, tables, claims) from the
        /// JSON a run left in --out, refused when the file no longer
        /// describes the runs measured there.
        #[arg(long)]
        render: bool,
        /// Check every experiment's claims against the reports in --out and
        /// write the reproduction table into this file, between its marker
        /// lines (docs/experiments/README.md).
        #[arg(long)]
        table: Option<PathBuf>,
    },
    /// Check a recorded history (JSON) for consistency violations.
    Check {
        history: PathBuf,
        /// eventual | sessions | causal | causal_plus
        #[arg(long, default_value = "causal_plus")]
        level: String,
        /// True time (ms) after which no write was in flight: enables the
        /// convergence and eventual-visibility checks.
        #[arg(long)]
        quiescent_after_ms: Option<u64>,
        /// Every operation invoked after --quiescent-after-ms must complete
        /// within this many ms (default there: the bound the history's
        /// protocol declares for its default config, with --max-rtt-ms);
        /// without --quiescent-after-ms no fault is excused, and every
        /// operation of the history must.
        #[arg(long)]
        liveness_bound_ms: Option<u64>,
        /// The worst round trip between DCs the history was recorded over,
        /// for the protocol's declared liveness bound.
        #[arg(long, default_value_t = 200)]
        max_rtt_ms: u64,
        #[arg(long)]
        json: bool,
        /// Also export the history in dbcop's JSON format to this file.
        #[arg(long)]
        dbcop: Option<PathBuf>,
    },
    /// Random workloads under random fault schedules in the simulator, each
    /// history checked. A failure prints the seed that reproduces it.
    Torture {
        #[arg(long, short)]
        protocol: Vec<ProtocolName>,
        #[arg(long, default_value_t = 100)]
        runs: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Leave out fault kinds (to bisect a failure): partitions, pauses,
        /// spikes, slow_links (also intra_dc_links), intra_dc_links,
        /// slow_nodes, skew, drift, jumps, forward_jumps, backward_jumps,
        /// crashes; `liveness` reports liveness violations without failing
        /// the run (temporary, for known stalls). Leaving out crashes,
        /// slow_nodes, drift, forward_jumps and intra_dc_links replays the
        /// runs of seeds from before those kinds existed.
        #[arg(long, value_delimiter = ',')]
        without: Vec<String>,
        /// Write each failing run's history to DIR/<protocol>-<seed>.json.
        #[arg(long)]
        dump: Option<PathBuf>,
        /// Protocol parameters, as `name=value` (TOML values), e.g.
        /// `--param mutant_skip_visibility_check=true`.
        #[arg(long = "param")]
        params: Vec<String>,
        /// Judge at this level (eventual | sessions | causal | causal_plus) instead of
        /// the protocol's promise.
        #[arg(long)]
        level: Option<String>,
        /// Run every node on the deliberately broken node core that
        /// releases a turn's replies and messages before its log records
        /// are synced: a check that torture's crash faults catch it (runs
        /// should fail).
        #[arg(long)]
        mutant_release_before_sync: bool,
        /// How long one log sync takes, µs, in every run, instead of the
        /// drawn time (0 = instant): to bisect a failure.
        #[arg(long)]
        sync_us: Option<u64>,
        /// Print the summary as JSON (failure details go to stderr).
        #[arg(long)]
        json: bool,
        /// Runs simulated at once, one per thread (default: the machine's
        /// cores). Each run is its own simulation; results are reported in
        /// seed order whatever the number, so output does not depend on it.
        #[arg(long)]
        jobs: Option<usize>,
    },
    /// Run one node of a cluster over TCP until SIGINT or SIGTERM.
    Server {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        node: u32,
    },
    /// Every node of the cluster: its DC and role, whether it answers (and
    /// how fast), and from its metrics endpoint its stable-time lag and
    /// replication queue. Exits 0 when every node is up, 4 otherwise.
    Status {
        #[arg(long, default_value = "causeway-cluster.toml")]
        config: PathBuf,
        /// Per-node deadline for the probe, connecting included.
        #[arg(long, default_value_t = 2000)]
        timeout_ms: u64,
        #[arg(long)]
        json: bool,
        /// Access token (an admin token also reads each node's /metrics).
        #[arg(long, env = "CAUSEWAY_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
    /// Access tokens of a cluster with `[auth] tokens = "FILE"`: `add`
    /// prints a new token's secret once (only its SHA-256 is kept), `list`,
    /// `revoke` (running nodes pick the change up on the next connection).
    Token {
        #[command(subcommand)]
        cmd: TokenCmd,
    },
    /// Make a cluster CA and TLS certificates for every node of the config
    /// and for clients, in the directory its `[tls] dir` names.
    Certs {
        #[arg(long)]
        config: PathBuf,
        /// How long the certificates are valid.
        #[arg(long, default_value_t = 365)]
        days: i64,
        #[arg(long)]
        json: bool,
    },
    /// Start an embedded cluster on loopback (default 3 DCs × 2 partitions,
    /// Virginia/Oregon/Ireland round trips injected) and keep it running.
    Up {
        /// The protocol every node runs.
        #[arg(long, short, default_value = "causalspartanx", value_parser = protocol_parser())]
        protocol: ProtocolName,
        #[arg(long, default_value_t = 3)]
        dcs: u16,
        #[arg(long, default_value_t = 2)]
        partitions: u32,
        /// Where the nodes keep their logs.
        #[arg(long, default_value = "causeway-data")]
        data_dir: PathBuf,
        /// Where to write the cluster config that clients use.
        #[arg(long, default_value = "causeway-cluster.toml")]
        config_out: PathBuf,
        /// No injected WAN delays.
        #[arg(long)]
        no_wan: bool,
        /// Protocol parameters, as `name=value` (TOML values), e.g.
        /// `--param rot_steps=4`; they go into the config's `[params]`.
        #[arg(long = "param")]
        params: Vec<String>,
        /// Serve the Redis protocol: node N on 127.0.0.1:PORT+N (one
        /// connection = one causal session in that node's DC).
        #[arg(long)]
        redis_port: Option<u16>,
        /// Serve /metrics, /healthz and /readyz: node N on 127.0.0.1:PORT+N.
        #[arg(long)]
        metrics_port: Option<u16>,
        /// When the log is synced: always | group | never.
        #[arg(long, default_value = "always")]
        fsync: String,
        /// Access tokens file (`[auth] tokens`): clients then need a token
        /// (`causeway token add … --config <config-out>`).
        #[arg(long)]
        tokens: Option<PathBuf>,
        /// Service nodes per DC, as `name=count`, e.g. `--service eunomia=3`
        /// for three Eunomia replicas; a service the protocol needs and this
        /// leaves out runs one instance per DC.
        #[arg(long = "service")]
        services: Vec<String>,
        /// Store each partition in this many of the DCs (partial
        /// replication: partition p in DCs p, p+1, … mod the DC count), for
        /// protocols that run so (paris, bpr). Default: every DC.
        #[arg(long)]
        replication_factor: Option<u16>,
        /// Under partial replication, the replica of a partition a DC that
        /// does not store it uses: `ring` (the next DC storing it) or
        /// `round-robin` (the DCs not storing it take its replicas in turn,
        /// as PaRiS's evaluation spreads them).
        #[arg(long, default_value = "ring")]
        remote_replica: causeway_core::RemoteReplica,
        /// Servers per partition inside each DC, for protocols whose
        /// partitions are replicated groups (nukv: a Raft group of this
        /// many replicas per partition per DC). Default 1.
        #[arg(long, default_value_t = 1)]
        replicas: u16,
        /// Run every node as a `causeway server` process of its own
        /// (supervised by this one, logs in DATA_DIR/logs), so that one
        /// node can be killed and restarted while the others serve; by
        /// default they all run in this process.
        #[arg(long)]
        processes: bool,
        /// Print the endpoints as one JSON line once the cluster is up.
        #[arg(long)]
        json: bool,
    },
    /// Read a key: prints its value. A missing key prints nothing and exits
    /// with status 3 (with --json: `"found": false`). With columns (eiger's
    /// column families): `causeway get ROW FAMILY:COLUMN…` reads those
    /// columns of the row as one read-only transaction, and `causeway get
    /// ROW FAMILY [--slice START:STOP:COUNT]` the family's columns (a
    /// slice; each part may be empty), one `FAMILY:COLUMN = VALUE` a line.
    Get {
        key: String,
        columns: Vec<String>,
        /// With one FAMILY: only columns START through STOP (inclusive;
        /// empty STOP: to the end), at most COUNT with a value (0 or empty:
        /// no limit).
        #[arg(long)]
        slice: Option<String>,
        /// The session guarantee this read asks for, where the protocol
        /// takes per-operation levels (nukv): eventual, monotonic-read,
        /// read-your-write or monotonic-read-your-write. A causal protocol
        /// gives them all; eventual refuses any but eventual.
        #[arg(long, value_name = "LEVEL")]
        read: Option<causeway_core::ReadLevel>,
        /// The checking group this read names (accf: Roohitavaf, Alg 7.1's
        /// GET(k, cg)), numbered from 0 as the `checking` grouping yields
        /// them (per_replica: group d is DC d's servers; per_server: the
        /// servers DC by DC; per_key: group p is partition p's copies;
        /// explicit groups in the order listed). Default: the first group
        /// of the server the read goes to.
        #[arg(long, value_name = "N")]
        checking_group: Option<u16>,
        #[command(flatten)]
        at: ClientArgs,
    },
    /// Write a key. VALUE `-` reads the value from standard input, `@FILE`
    /// from a file. With columns (eiger): `causeway put ROW
    /// FAMILY:COLUMN=VALUE…` writes the columns as one atomic write (a value
    /// shaped FAMILY:COLUMN=… is always a column write: store such a text
    /// as a plain value through `-` or `@FILE`).
    Put {
        key: String,
        #[arg(required = true)]
        values: Vec<String>,
        /// The session guarantee this write asks for (nukv): eventual,
        /// write-follows-reads, monotonic-write or
        /// monotonic-write-follows-reads.
        #[arg(long, value_name = "LEVEL")]
        write: Option<causeway_core::WriteLevel>,
        #[command(flatten)]
        at: ClientArgs,
    },
    /// Add DELTA (a signed 64-bit integer) to a counter column (eiger), e.g.
    /// `causeway add alice counters:likes 5`; `get` then prints the sum.
    Add {
        row: String,
        column: String,
        #[arg(allow_hyphen_values = true)]
        delta: i64,
        #[command(flatten)]
        at: ClientArgs,
    },
    /// Delete a key: a tombstone is written in its place, ordered causally
    /// like any write (a later write is never seen without the delete), and
    /// reads then find no value (`get` exits with status 3). `causeway del
    /// ROW FAMILY:COLUMN…` deletes columns (eiger), atomically.
    Del {
        key: String,
        columns: Vec<String>,
        #[command(flatten)]
        at: ClientArgs,
    },
    /// Read several keys as one causally consistent snapshot.
    Rot {
        keys: Vec<String>,
        #[command(flatten)]
        at: ClientArgs,
    },
    /// Write several keys as one atomic write-only transaction, e.g.
    /// `causeway wot x=1 y=2` (protocols without them refuse it).
    Wot {
        #[arg(required = true, value_parser = parse_write)]
        writes: Vec<(String, String)>,
        #[command(flatten)]
        at: ClientArgs,
    },
    /// Run one interactive transaction: reads at one causal snapshot,
    /// writes buffered and committed atomically (paris, bpr), e.g.
    /// `causeway txn -e 'r a b; w a=1; commit'`. Statements: `r KEY…`,
    /// `w KEY=VALUE…`, `d KEY…`, `commit`, `abort`, separated by `;` or new
    /// lines. Without `-e` they are read from standard input, at a `txn>`
    /// prompt when it is a terminal. A script that ends without `commit`
    /// is aborted.
    Txn {
        /// The statements.
        #[arg(short = 'e', long = "execute")]
        script: Option<String>,
        #[command(flatten)]
        at: ClientArgs,
    },
    /// Write several keys as one non-atomic batch, all in parallel, e.g.
    /// `causeway batch x=1 y=2`: a reader may see some writes and not
    /// others (protocols without batches refuse it).
    Batch {
        #[arg(required = true, value_parser = parse_write)]
        writes: Vec<(String, String)>,
        #[command(flatten)]
        at: ClientArgs,
    },
    /// The main job: for every implemented protocol, start the embedded
    /// 3-DC cluster (Virginia/Oregon/Ireland round trips injected), drive it
    /// with a mixed workload, check the recorded history, and print one
    /// comparison table. `--sim` runs the same comparison in the simulator.
    Demo {
        /// Seconds of load per protocol.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        /// Client sessions per DC.
        #[arg(long, default_value_t = 8)]
        sessions: u32,
        /// Simulate instead (deterministic; seeded).
        #[arg(long)]
        sim: bool,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print the reports as JSON (progress and verdicts go to stderr).
        #[arg(long)]
        json: bool,
    },
    /// Service capacity (Gunawardhana et al., ATC 2017, Fig 2): one real
    /// Eunomia node and one real sequencer node, each driven over TCP (with
    /// TLS) by N stand-in partitions sending what partitions send; updates
    /// stabilized (or numbered) per second and the service's CPU µs per
    /// update, medians of alternating rounds.
    Capacity {
        /// eunomia, sequencer, or both (alternating).
        #[arg(long, default_value = "both")]
        service: String,
        /// Partition counts to run, e.g. 15,30,60,75.
        #[arg(long, value_delimiter = ',', default_value = "60")]
        partitions: Vec<u32>,
        /// Eunomia: each partition's reporting interval (the paper's 1 ms).
        #[arg(long, default_value_t = 1_000)]
        batch_us: u64,
        /// Eunomia: updates per report per partition (the offered load).
        #[arg(long, default_value_t = 100)]
        ops_per_report: usize,
        /// Eunomia: reports unacknowledged per partition before it skips a
        /// tick; sequencer: requests outstanding per partition.
        #[arg(long, default_value_t = 8)]
        window: u64,
        #[arg(long, default_value_t = 1_000)]
        warmup_ms: u64,
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        #[arg(long, default_value_t = 3)]
        rounds: u64,
        /// The service's log: always | group | never (the paper's services keep none).
        #[arg(long, default_value = "never")]
        fsync: String,
        #[arg(long)]
        plaintext: bool,
        #[arg(long)]
        json: bool,
    },
    /// Throughput of sets then gets over TCP, like redis-benchmark: against
    /// an embedded 1 DC × 1 partition server, or a running cluster (--config).
    Bench {
        /// The protocol of the embedded server (ignored with --config).
        #[arg(long, short, default_value = "eventual", value_parser = protocol_parser())]
        protocol: ProtocolName,
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long, short = 'c', default_value_t = 50)]
        connections: u32,
        /// Pipeline N operations per connection, like redis-benchmark -P:
        /// each connection carries N causal sessions and waits for all N.
        #[arg(long = "pipeline", short = 'P', default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
        pipeline: u32,
        #[arg(long, short = 'd', default_value_t = 64)]
        value_size: usize,
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        #[arg(long, default_value_t = 100_000)]
        keys: u64,
        /// always | group | never (embedded server only).
        #[arg(long, default_value = "always")]
        fsync: String,
        /// Run the embedded server without TLS (as redis-server is), to
        /// compare with a plaintext system or measure what TLS costs.
        #[arg(long, conflicts_with = "config")]
        plaintext: bool,
        #[arg(long)]
        json: bool,
        /// Deadline of each operation, connecting included.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
        /// After the load phase, a mixed closed loop like YCSB's core
        /// workload a (50:50 read:update), b (95:5) or c (reads only).
        #[arg(long, conflicts_with = "read_proportion")]
        workload: Option<String>,
        /// A mixed phase with this share of reads (the rest updates and
        /// ROTs), e.g. `--read-proportion 0.95 --rot-proportion 0.05`.
        #[arg(long)]
        read_proportion: Option<f64>,
        /// With --read-proportion: the share of read-only transactions.
        #[arg(long, default_value_t = 0.0, requires = "read_proportion")]
        rot_proportion: f64,
        /// Keys per read-only transaction.
        #[arg(long, default_value_t = 4)]
        rot_keys: usize,
        /// With --read-proportion: the share of interactive transactions
        /// (begin, one read round of --txn-reads keys, --txn-writes
        /// writes, commit), for a protocol that offers them (paris, bpr).
        #[arg(long, default_value_t = 0.0, requires = "read_proportion")]
        txn_proportion: f64,
        #[arg(long, default_value_t = 4)]
        txn_reads: usize,
        #[arg(long, default_value_t = 1)]
        txn_writes: usize,
        /// Access token, for a cluster with `[auth] tokens`.
        #[arg(long, env = "CAUSEWAY_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
}

#[derive(Subcommand)]
enum TokenCmd {
    /// Make a token: prints its secret, which is stored nowhere.
    Add {
        name: String,
        /// read-only | read-write | admin
        #[arg(long)]
        role: String,
        #[arg(long, default_value = "causeway-cluster.toml")]
        config: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// The tokens: names and roles (secrets are not kept).
    List {
        #[arg(long, default_value = "causeway-cluster.toml")]
        config: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Remove a token: new connections showing it are refused.
    Revoke {
        name: String,
        #[arg(long, default_value = "causeway-cluster.toml")]
        config: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Args)]
struct ClientArgs {
    /// The cluster config (what `causeway up` writes).
    #[arg(long, default_value = "causeway-cluster.toml")]
    config: PathBuf,
    /// The DC to attach to: its number or its name (e.g. `oregon`).
    #[arg(long, default_value = "0")]
    dc: String,
    /// Deadline of the operation, connecting included: a node that does not
    /// answer is an error after this long, never a hang.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// Access token, for a cluster with `[auth] tokens` (`causeway token add`).
    #[arg(long, env = "CAUSEWAY_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// The protocol names, so `--help` lists them.
fn protocol_parser() -> impl clap::builder::TypedValueParser<Value = ProtocolName> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(ProtocolName::ALL.iter().map(|p| p.as_str()))
        .map(|s| s.parse::<ProtocolName>().expect("a listed protocol name parses"))
}

/// `--service name=count`: a service the protocol runs, with its instances
/// per DC (1 to 64).
/// `--replication-factor`: checked against the DC count and the protocol
/// here, so that the error names the flag.
fn replication_for(
    protocol: ProtocolName,
    dcs: u16,
    factor: Option<u16>,
) -> Result<causeway_core::Replication, Box<dyn std::error::Error>> {
    let Some(factor) = factor else { return Ok(causeway_core::Replication::Full) };
    if !(1..=dcs).contains(&factor) {
        return Err(format!("--replication-factor {factor}: must be 1 to the {dcs} DCs").into());
    }
    if factor == dcs {
        return Ok(causeway_core::Replication::Full);
    }
    if !causeway_protocols::with_protocol!(protocol, P => <P as causeway_core::Protocol>::PARTIAL_REPLICATION) {
        let partial: Vec<&str> = causeway_protocols::ProtocolName::ALL
            .iter()
            .filter(
                |&&p| causeway_protocols::with_protocol!(p, P => <P as causeway_core::Protocol>::PARTIAL_REPLICATION),
            )
            .map(|p| p.as_str())
            .collect();
        return Err(format!(
            "--replication-factor {factor}: {protocol} stores every partition in every DC; partial replication needs {}",
            partial.join(" or ")
        )
        .into());
    }
    Ok(causeway_core::Replication::Partial { factor })
}

fn parse_services(
    protocol: ProtocolName,
    given: &[String],
) -> Result<Vec<causeway_core::ServiceSpec>, Box<dyn std::error::Error>> {
    let known = causeway_protocols::with_protocol!(protocol, P => <P as causeway_core::Protocol>::SERVICES);
    given
        .iter()
        .map(|g| {
            let (name, count) = g.split_once('=').ok_or_else(|| format!("--service {g:?}: expected name=count"))?;
            if !known.iter().any(|(k, _)| *k == name) {
                let names: Vec<&str> = known.iter().map(|(k, _)| *k).collect();
                return Err(if names.is_empty() {
                    format!("--service {g:?}: {protocol} runs no service nodes")
                } else {
                    format!("--service {g:?}: {protocol} runs {}, not {name:?}", names.join(" and "))
                }
                .into());
            }
            let per_dc = count
                .parse::<u16>()
                .ok()
                .filter(|n| (1..=64).contains(n))
                .ok_or_else(|| format!("--service {g:?}: the count must be 1 to 64 instances per DC"))?;
            Ok(causeway_core::ServiceSpec { name: name.to_string(), per_dc })
        })
        .collect()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let level = std::env::var("CAUSEWAY_LOG").ok().and_then(|l| l.parse().ok()).unwrap_or(tracing::Level::INFO);
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if net::is_broken_pipe(e.as_ref()) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<net::NotFound>().is_some() => ExitCode::from(net::EXIT_NOT_FOUND),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    match cli.cmd {
        Cmd::Sim { scenario, protocol, seed, json, history } => {
            let mut sc = Scenario::load(&scenario)?;
            if let Some(s) = seed {
                sc.seed = s;
            }
            sc.record_history |= history.is_some();
            let protocols = if protocol.is_empty() { ProtocolName::ALL.to_vec() } else { protocol };
            let several = protocols.len() > 1;
            let mut reports = Vec::new();
            for p in protocols {
                let started = Instant::now();
                let (r, h) = causeway_sim::run_named_with_history(p, sc.clone())?;
                if let (Some(path), Some(h)) = (&history, h) {
                    let path = if several { path.with_extension(format!("{p}.json")) } else { path.clone() };
                    std::fs::write(&path, serde_json::to_vec(&h)?)?;
                    eprintln!("history of {p} ({} ops) written to {}", h.ops.len(), path.display());
                }
                let wall = started.elapsed().as_secs_f64();
                if !json {
                    print!("{}", report::render(&r));
                    println!("  wall {:.2} s, {:.2} M events/s\n", wall, r.events as f64 / wall / 1e6);
                }
                reports.push(r);
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&reports)?);
            } else if reports.len() > 1 {
                print!("{}", report::comparison(&reports));
            }
        }
        Cmd::Server { config, node } => net::server(&config, node)?,
        Cmd::Certs { config, days, json } => net::certs(&config, days, json)?,
        Cmd::Token { cmd } => net::token(cmd)?,
        Cmd::Status { config, timeout_ms, json, token } => {
            if !net::status(&config, std::time::Duration::from_millis(timeout_ms), json, token.as_deref())? {
                std::process::exit(4);
            }
        }
        Cmd::Experiment { file, quick, out, reps, runtime, threads, json, render, table } => {
            experiment::main(experiment::Args { file, quick, out, reps, runtime, threads, json, render, table })?
        }
        Cmd::Check { history, level, quiescent_after_ms, liveness_bound_ms, max_rtt_ms, json, dbcop } => {
            let level = parse_level(&level)?;
            let h = causeway_check::load_history(&history)?;
            let mut cfg = causeway_check::CheckConfig::at(level);
            cfg.quiescent_after_us = quiescent_after_ms.map(|ms| ms * 1_000);
            // A history of a protocol that linearizes each DC's writes is
            // held to that order too.
            if let Ok(p) = h.protocol.parse::<ProtocolName>() {
                cfg.dc_write_order =
                    causeway_protocols::with_protocol!(p, P => <P as causeway_core::Protocol>::LINEARIZES_DC_WRITES);
            }
            if quiescent_after_ms.is_some() || liveness_bound_ms.is_some() {
                let bound_us = match liveness_bound_ms {
                    Some(ms) => ms * 1_000,
                    None => declared_bound_us(&h.protocol, max_rtt_ms)?,
                };
                // Without a quiescence time there is no fault to excuse:
                // the bound holds from the start.
                let quiet_us = quiescent_after_ms.unwrap_or(0) * 1_000;
                cfg.liveness = Some(causeway_check::Liveness::after_quiescence(quiet_us, bound_us));
            }
            let started = Instant::now();
            let report = causeway_check::check(&h, &cfg);
            let took = started.elapsed();
            if let Some(out) = dbcop {
                std::fs::write(&out, causeway_check::dbcop::to_dbcop_json(&h)?)?;
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{report}");
                println!("checked {} operations in {:.2} s", h.ops.len(), took.as_secs_f64());
            }
            if !report.passed {
                return Err("the history violates the requested consistency level".into());
            }
        }
        Cmd::Torture {
            protocol,
            runs,
            seed,
            without,
            dump,
            params,
            level,
            mutant_release_before_sync,
            sync_us,
            json,
            jobs,
        } => {
            // With --json, stdout holds only the summary; the rest is for people.
            macro_rules! say {
                ($($t:tt)*) => { if json { eprintln!($($t)*) } else { println!($($t)*) } };
            }
            let mut summary = Vec::new();
            let mut opts = torture::Options {
                without,
                level: level.as_deref().map(parse_level).transpose()?,
                release_before_sync: mutant_release_before_sync,
                sync_us,
                ..Default::default()
            };
            opts.params = parse_params(&params)?;
            let protocols = if protocol.is_empty() { ProtocolName::ALL.to_vec() } else { protocol };
            let mut failed = Vec::new();
            let liveness_kinds = [causeway_check::Kind::Unfinished, causeway_check::Kind::SlowOperation];
            for p in protocols {
                let started = Instant::now();
                let mut ops = 0;
                let mut stalled = 0;
                let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
                for (s, run) in torture::in_order(p, seed, runs, jobs, &opts) {
                    let (report, history) = match run {
                        Ok(r) => r?,
                        Err(why) => {
                            say!("{p}: run with seed {s} PANICKED ({why}); replay: {}", replay_command(p, s, &opts));
                            failed.push((p, s));
                            continue;
                        }
                    };
                    ops += report.stats.ops;
                    if !report.passed {
                        say!("{p}: run with seed {s} FAILED; replay: {}", replay_command(p, s, &opts));
                        say!("{report}");
                        say!("{}", torture::describe(p, s, &opts)?);
                        if let Some(dir) = &dump {
                            std::fs::create_dir_all(dir)?;
                            let path = dir.join(format!("{p}-{s}.json"));
                            std::fs::write(&path, serde_json::to_vec(&history)?)?;
                            say!("history written to {}", path.display());
                        }
                        failed.push((p, s));
                    } else if liveness_kinds.iter().any(|&k| report.count(k) > 0) {
                        let n: usize = liveness_kinds.iter().map(|&k| report.count(k)).sum();
                        say!(
                            "{p}: run with seed {s} has {n} liveness violation{} (reported, not judged: --without \
                             liveness); see: {}",
                            if n == 1 { "" } else { "s" },
                            replay_command(
                                p,
                                s,
                                &torture::Options {
                                    without: opts.without.iter().filter(|w| *w != "liveness").cloned().collect(),
                                    ..opts.clone()
                                }
                            )
                        );
                        stalled += 1;
                    }
                }
                let secs = started.elapsed().as_secs_f64();
                if stalled > 0 {
                    say!("{p}: {stalled} runs with liveness violations reported but not judged (--without liveness)");
                }
                summary.push(serde_json::json!({
                    "protocol": p.as_str(), "runs": runs, "operations": ops, "seconds": secs,
                    "failed_seeds": failed.iter().filter(|f| f.0 == p).map(|f| f.1).collect::<Vec<_>>(),
                    "liveness_reported": stalled,
                }));
                say!(
                    "{p}: {runs} runs, {ops} operations checked, {} failed, {:.1} s ({:.0} runs/min)",
                    failed.iter().filter(|f| f.0 == p).count(),
                    secs,
                    runs as f64 * 60.0 / secs
                );
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&summary)?);
            }
            if !failed.is_empty() {
                return Err(format!("{} torture runs failed", failed.len()).into());
            }
        }
        Cmd::Up {
            protocol,
            dcs,
            partitions,
            data_dir,
            config_out,
            no_wan,
            params,
            redis_port,
            metrics_port,
            fsync,
            tokens,
            services,
            replication_factor,
            remote_replica,
            replicas,
            processes,
            json,
        } => {
            let ports = causeway_net::embedded::Ports { metrics: metrics_port, redis: redis_port };
            let spec = causeway_net::embedded::EmbeddedSpec {
                dcs,
                partitions,
                fsync: parse_fsync(&fsync)?,
                params: parse_params(&params)?,
                ports,
                services: parse_services(protocol, &services)?,
                replication: replication_for(protocol, dcs, replication_factor)?,
                remote_replica,
                replicas,
                ..causeway_net::embedded::EmbeddedSpec::default_for(protocol, data_dir)
            };
            let tokens = tokens.map(|t| std::path::absolute(&t).unwrap_or(t));
            net::up(causeway_net::embedded::EmbeddedSpec { tokens, ..spec }, &config_out, no_wan, json, processes)?
        }
        Cmd::Get { key, columns, slice, read, checking_group, at } if columns.is_empty() => {
            if slice.is_some() {
                return Err("--slice needs a FAMILY to slice".into());
            }
            let levels = read.map(|read| causeway_core::Levels { read, ..causeway_core::Levels::EVENTUAL });
            let opts = net::ClientOpts { levels, checking_group, ..at.into() };
            net::client_op(&opts, ClientCmd::Op(Op::Get { key: key.into() }))?
        }
        Cmd::Get { read: Some(_), .. } => return Err("--read is for a plain key's read, not columns".into()),
        Cmd::Get { checking_group: Some(_), .. } => {
            return Err("--checking-group is for a plain key's read, not columns".into());
        }
        Cmd::Get { key, columns, slice, at, .. } => {
            net::client_op(&at.into(), net::column_read(&key, &columns, slice)?)?
        }
        Cmd::Put { key, values, write, at } => match &values[..] {
            [value] if net::parse_column_write(value).is_none() => {
                let value = net::read_value(value)?;
                let levels = write.map(|write| causeway_core::Levels { write, ..causeway_core::Levels::EVENTUAL });
                net::client_op(
                    &net::ClientOpts { levels, ..at.into() },
                    ClientCmd::Op(Op::Put { key: key.into(), value }),
                )?
            }
            _ if write.is_some() => return Err("--write is for a plain key's write, not columns".into()),
            _ => net::client_op(&at.into(), net::column_write(&key, &values)?)?,
        },
        Cmd::Add { row, column, delta, at } => {
            let key = net::column_key(&row, &column)?;
            net::client_op(&at.into(), ClientCmd::Columns { row: row.into(), op: Op::Add { key, delta } })?
        }
        Cmd::Del { key, columns, at } if columns.is_empty() => {
            net::client_op(&at.into(), ClientCmd::Del(vec![key.into()]))?
        }
        Cmd::Del { key, columns, at } => {
            let keys = columns.iter().map(|c| net::column_key(&key, c)).collect::<Result<Vec<_>, _>>()?;
            net::client_op(&at.into(), ClientCmd::Del(keys))?
        }
        Cmd::Rot { keys, at } => net::client_op(
            &at.into(),
            ClientCmd::Op(Op::Rot { keys: keys.into_iter().map(bytes::Bytes::from).collect() }),
        )?,
        Cmd::Wot { writes, at } => net::client_op(
            &at.into(),
            ClientCmd::Op(Op::Wot {
                writes: writes.into_iter().map(|(k, v)| (bytes::Bytes::from(k), bytes::Bytes::from(v))).collect(),
            }),
        )?,
        Cmd::Txn { script, at } => txn::run(&at.into(), script.map_or(txn::Source::Stdin, txn::Source::Script))?,
        Cmd::Batch { writes, at } => net::client_op(
            &at.into(),
            ClientCmd::Op(Op::Batch {
                writes: writes.into_iter().map(|(k, v)| (bytes::Bytes::from(k), bytes::Bytes::from(v))).collect(),
            }),
        )?,
        Cmd::Capacity {
            service,
            partitions,
            batch_us,
            ops_per_report,
            window,
            warmup_ms,
            seconds,
            rounds,
            fsync,
            plaintext,
            json,
        } => {
            use causeway_bench::capacity::Service;
            let services = match service.as_str() {
                "eunomia" => vec![Service::Eunomia],
                "sequencer" => vec![Service::Sequencer],
                "both" => vec![Service::Eunomia, Service::Sequencer],
                other => return Err(format!("--service must be eunomia, sequencer or both, not {other:?}").into()),
            };
            if partitions.is_empty() || partitions.contains(&0) || rounds == 0 || seconds.is_nan() || seconds <= 0.0 {
                return Err("--partitions, --rounds and --seconds must be positive".into());
            }
            capacity::run(capacity::Args {
                services,
                partitions,
                batch_us,
                ops_per_report,
                window,
                warmup_ms,
                seconds,
                rounds,
                fsync: parse_fsync(&fsync)?,
                plaintext,
                json,
            })?
        }
        Cmd::Bench {
            protocol,
            config,
            connections,
            pipeline,
            value_size,
            seconds,
            keys,
            fsync,
            plaintext,
            json,
            timeout_ms,
            workload,
            read_proportion,
            rot_proportion,
            rot_keys,
            txn_proportion,
            txn_reads,
            txn_writes,
            token,
        } => {
            let fsync = parse_fsync(&fsync)?;
            let mix = match (workload, read_proportion) {
                (Some(w), _) => Some(run::Mix::ycsb(&w)?),
                (None, Some(r)) => {
                    let shares = [r, rot_proportion, txn_proportion];
                    if shares.iter().any(|x| !(0.0..=1.0).contains(x)) || shares.iter().sum::<f64>() > 1.0 + 1e-9 {
                        return Err(format!(
                            "--read-proportion {r}, --rot-proportion {rot_proportion} and --txn-proportion \
                             {txn_proportion} must be shares in [0, 1] summing to at most 1"
                        )
                        .into());
                    }
                    if txn_proportion > 0.0
                        && !causeway_protocols::with_protocol!(protocol, P => <P as causeway_core::Protocol>::OPS.contains(&causeway_core::OpKind::Interactive))
                    {
                        return Err(format!("--txn-proportion: {protocol} offers no interactive transactions").into());
                    }
                    Some(run::Mix {
                        read: r,
                        update: (1.0 - r - rot_proportion - txn_proportion).max(0.0),
                        rot: rot_proportion,
                        rot_keys,
                        txn: txn_proportion,
                        txn_reads,
                        txn_writes,
                    })
                }
                (None, None) => None,
            };
            let op_timeout = std::time::Duration::from_millis(timeout_ms);
            run::bench(run::BenchArgs {
                protocol,
                config,
                connections,
                pipeline,
                value_size,
                seconds,
                keys,
                fsync,
                plaintext,
                json,
                op_timeout,
                mix,
                token,
            })?
        }
        Cmd::Demo { seconds, sessions, sim: false, json, .. } => run::demo_network(seconds, sessions, json)?,
        Cmd::Demo { seed, seconds, sim: true, json, .. } => {
            macro_rules! say {
                ($($t:tt)*) => { if json { eprintln!($($t)*) } else { println!($($t)*) } };
            }
            let sc = demo_scenario(seed, seconds)?;
            say!(
                "Simulating 3 DCs (Virginia, Oregon, Ireland; RTT 80/80/160 ms) × 4 partitions, {} clients per DC, {} s of load, seed {}.\n",
                sc.workload.clients_per_dc,
                seconds,
                seed
            );
            let mut reports: Vec<SimReport> = Vec::new();
            for &p in ProtocolName::ALL {
                let started = Instant::now();
                let r = causeway_sim::run_named(p, sc.clone())?;
                say!(
                    "  {:<16} {:>9} ops in {:.1} s wall",
                    p.as_str(),
                    r.ops_completed,
                    started.elapsed().as_secs_f64()
                );
                reports.push(r);
            }
            say!();
            if json {
                println!("{}", serde_json::to_string_pretty(&reports)?);
            } else {
                print!("{}", report::comparison(&reports));
            }
        }
    }
    Ok(())
}

/// `--param name=value` options, each a TOML assignment, as one table.
fn parse_params(params: &[String]) -> Result<toml::Table, String> {
    let mut out = toml::Table::new();
    for p in params {
        let t: toml::Table = toml::from_str(p).map_err(|e| format!("--param {p:?} is not name=value: {e}"))?;
        out.extend(t);
    }
    Ok(out)
}

/// The command that replays run `seed` exactly, options included.
fn replay_command(p: ProtocolName, seed: u64, opts: &torture::Options) -> String {
    let mut c = format!("causeway torture -p {p} --runs 1 --seed {seed}");
    if !opts.without.is_empty() {
        c.push_str(&format!(" --without {}", opts.without.join(",")));
    }
    for (k, v) in &opts.params {
        c.push_str(&format!(" --param '{k}={v}'"));
    }
    if let Some(l) = opts.level {
        c.push_str(&format!(" --level {}", l.name()));
    }
    if opts.release_before_sync {
        c.push_str(" --mutant-release-before-sync");
    }
    if let Some(us) = opts.sync_us {
        c.push_str(&format!(" --sync-us {us}"));
    }
    c
}

/// The liveness bound the history's protocol declares for its default
/// config, with `max_rtt_ms` between DCs and an intra-DC round trip of 1 ms.
fn declared_bound_us(protocol: &str, max_rtt_ms: u64) -> Result<u64, String> {
    let p: ProtocolName = protocol
        .parse()
        .map_err(|e| format!("the history's protocol {protocol:?} is not known ({e}); give --liveness-bound-ms"))?;
    let env =
        causeway_core::LivenessEnv { max_rtt_us: max_rtt_ms * 1_000, intra_dc_rtt_us: 1_000, max_clock_skew_us: 0 };
    Ok(causeway_protocols::with_protocol!(p, P => {
        <P as causeway_core::Protocol>::liveness_bound_us(&Default::default(), &env)
    }))
}

fn parse_fsync(s: &str) -> Result<causeway_net::Fsync, String> {
    match s {
        "always" => Ok(causeway_net::Fsync::Always),
        "group" => Ok(causeway_net::Fsync::Group),
        "never" => Ok(causeway_net::Fsync::Never),
        other => Err(format!("--fsync must be always, group or never, not {other:?}")),
    }
}

fn parse_level(s: &str) -> Result<causeway_check::Level, String> {
    s.parse()
}

impl From<ClientArgs> for net::ClientOpts {
    fn from(a: ClientArgs) -> net::ClientOpts {
        net::ClientOpts {
            config: a.config,
            dc: a.dc,
            timeout: std::time::Duration::from_millis(a.timeout_ms),
            json: a.json,
            token: a.token,
            levels: None,
            checking_group: None,
        }
    }
}

/// `key=value` of `causeway wot`.
fn parse_write(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected key=value, got {s:?}")),
    }
}

/// Check a history recorded by the network demo at the level the protocol
/// promises, print the verdict, and say which violations were found.
pub(crate) fn check_history(p: ProtocolName, h: Option<&causeway_core::History>, json: bool) -> bool {
    macro_rules! say {
        ($($t:tt)*) => { if json { eprint!($($t)*) } else { print!($($t)*) } };
    }
    let Some(h) = h else { return true };
    let level = causeway_protocols::with_protocol!(p, P => causeway_check::Level::promised_by(<P as causeway_core::Protocol>::CAUSAL, <P as causeway_core::Protocol>::SESSIONS));
    let dc_order = causeway_protocols::with_protocol!(p, P => <P as causeway_core::Protocol>::LINEARIZES_DC_WRITES);
    let report = causeway_check::check(h, &causeway_check::CheckConfig::at(level).with_dc_write_order(dc_order));
    if report.passed {
        say!("  {:<16} history of {} operations: {} holds\n", p.as_str(), h.ops.len(), level.name());
    } else {
        say!("  {:<16} history of {} operations VIOLATES {}:\n", p.as_str(), h.ops.len(), level.name());
        say!("{report}");
    }
    report.passed
}

fn demo_scenario(seed: u64, seconds: u64) -> Result<Scenario, Box<dyn std::error::Error>> {
    let mut sc = Scenario::from_toml_str(include_str!("../../../scenarios/demo.toml"), "scenarios/demo.toml")?;
    sc.seed = seed;
    sc.duration_ms = seconds * 1_000 + sc.warmup_ms;
    Ok(sc)
}
