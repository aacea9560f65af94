//! The network-runtime commands: `server`, `up`, `get`/`put`/`rot`.

use causeway_core::{DcId, Op, OpResult};
use causeway_net::embedded::{Embedded, EmbeddedSpec};
use causeway_net::frame::WireError;
use causeway_net::server::NodeThreads;
use causeway_net::{Cluster, ClusterConfig, Session};
use causeway_protocols::with_protocol;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

type Error = Box<dyn std::error::Error>;

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

/// Wait for SIGINT or SIGTERM.
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// `causeway certs`: a cluster CA and certificates for every node of the
/// config and one client, in the config's `[tls] dir`.
pub fn certs(config: &Path, days: i64, json: bool) -> Result<(), Error> {
    let c = ClusterConfig::load(config)?;
    let Some(dir) = c.tls.dir.clone() else {
        return Err(format!("{}: [tls] has no `dir` to write the certificates to", config.display()).into());
    };
    let nodes = c.node_count()?;
    causeway_net::tls::generate(&dir, &c.cluster_id, nodes, &causeway_net::tls::Validity { days })?;
    if json {
        println!("{}", serde_json::json!({ "dir": dir.display().to_string(), "nodes": nodes, "days": days }));
        return Ok(());
    }
    println!(
        "wrote a CA and certificates for {nodes} nodes and a client to {} (valid {days} days); \
         give node N ca.pem and node-N.{{pem,key}}, clients ca.pem and client.{{pem,key}}, and keep ca.key offline",
        dir.display()
    );
    Ok(())
}

/// `causeway token add|list|revoke` on the tokens file the config names.
pub fn token(cmd: crate::TokenCmd) -> Result<(), Error> {
    use crate::TokenCmd;
    use causeway_net::auth::{Role, TokenFile};
    let config = match &cmd {
        TokenCmd::Add { config, .. } | TokenCmd::List { config, .. } | TokenCmd::Revoke { config, .. } => config,
    };
    let c = ClusterConfig::load(config)?;
    let Some(path) = c.auth.tokens.clone() else {
        return Err(format!(
            "{}: no [auth] section; add\n\n[auth]\ntokens = \"tokens.toml\"\n\nto it (and restart the nodes) to require tokens",
            config.display()
        )
        .into());
    };
    let mut file = TokenFile::read(&path)?;
    match cmd {
        TokenCmd::Add { name, role, json, .. } => {
            let role: Role = role.parse()?;
            let secret = file.add(&path, &name, role)?;
            file.write(&path)?;
            if json {
                println!("{}", serde_json::json!({ "name": name, "role": role.as_str(), "token": secret }));
            } else {
                println!("{secret}");
                eprintln!(
                    "token {name:?} ({role}) added to {}; the secret above is shown only now \
                     (use it as --token or CAUSEWAY_TOKEN, or AUTH in redis-cli)",
                    path.display()
                );
            }
        }
        TokenCmd::List { json, .. } => {
            if json {
                let rows: Vec<_> =
                    file.token.iter().map(|t| serde_json::json!({ "name": t.name, "role": t.role.as_str() })).collect();
                println!("{}", serde_json::Value::Array(rows));
            } else {
                let rows = file.token.iter().map(|t| vec![t.name.clone(), t.role.to_string()]).collect();
                print!("{}", causeway_sim::report::table(&["name", "role"], rows));
            }
        }
        TokenCmd::Revoke { name, json, .. } => {
            let gone = file.revoke(&path, &name)?;
            file.write(&path)?;
            if json {
                println!("{}", serde_json::json!({ "name": gone.name, "revoked": true }));
            } else {
                println!("revoked {:?} ({})", gone.name, gone.role);
            }
        }
    }
    Ok(())
}

pub fn server(config: &Path, node: u32) -> Result<(), Error> {
    let cluster = Arc::new(ClusterConfig::load(config)?.validate()?);
    let node = cluster.check_node(node)?;
    // Only waits for a signal: the node runs on a thread of its own.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let h = with_protocol!(cluster.protocol, P => causeway_net::server::spawn::<P>(cluster.clone(), node, None, NodeThreads::Own)?);
    tracing::info!(node = node.0, addr = %h.addr, protocol = %cluster.protocol, "serving");
    // A node whose protocol thread died exits (non-zero, through `stop`) so
    // that a supervisor restarts it, rather than holding its port open.
    rt.block_on(async {
        tokio::select! {
            _ = shutdown_signal() => {}
            _ = h.failed() => {}
        }
    });
    tracing::info!(node = node.0, "shutting down");
    h.stop()?;
    Ok(())
}

/// `causeway up`: the embedded cluster, every node in this process (with
/// `processes`, each its own `causeway server` process, supervised by this
/// one: [`crate::processes`]).
pub fn up(mut spec: EmbeddedSpec, config_out: &Path, no_wan: bool, json: bool, processes: bool) -> Result<(), Error> {
    if no_wan || spec.dcs != 3 {
        spec.rtt_ms = Vec::new();
    }
    if processes {
        return crate::processes::up(spec, config_out, json);
    }
    let rt = runtime()?;
    let cluster = Embedded::start(spec, rt.handle())?;
    std::fs::write(config_out, cluster.cluster.to_toml())?;
    announce(&cluster.cluster, config_out, json, None)?;
    if !json {
        println!("Ctrl-C to stop.");
    }
    rt.block_on(shutdown_signal());
    cluster.stop()?;
    Ok(())
}

/// What `up` prints once the cluster serves: with `json`, one line of
/// endpoints; otherwise where the config is, where each partition lives,
/// the Redis and dashboard addresses. `pids`: each node's process, when
/// every node runs in one of its own.
pub(crate) fn announce(c: &Cluster, config_out: &Path, json: bool, pids: Option<&[u32]>) -> Result<(), Error> {
    let (protocol, dcs, partitions) = (c.protocol, c.topology.dcs(), c.topology.partitions() as u32);
    if json {
        let nodes: Vec<_> = (0..c.addrs.len())
            .map(|i| {
                let node = causeway_core::NodeId(i as u32);
                serde_json::json!({
                    "node": i, "dc": c.topology.dc_name(c.topology.dc_of(node)), "role": c.topology.role_name(node),
                    "addr": c.addrs[i].to_string(),
                    "metrics": c.metrics_addrs.get(i).map(|a| a.to_string()),
                    "redis": c.redis_addrs.get(i).copied().flatten().map(|a| a.to_string()),
                    "pid": pids.map(|p| p[i]),
                })
            })
            .collect();
        let j = serde_json::json!({
            "protocol": protocol.as_str(), "dcs": dcs, "partitions": partitions,
            "placement": (0..partitions).map(|p| c.topology.dcs_of(causeway_core::PartitionId(p)).iter()
                .map(|&d| c.topology.dc_name(d).to_string()).collect::<Vec<_>>()).collect::<Vec<_>>(),
            "config": config_out.display().to_string(), "nodes": nodes,
        });
        println!("{j}");
        use std::io::Write;
        std::io::stdout().flush()?;
    } else {
        let services: Vec<String> =
            c.topology.spec().services.iter().map(|s| format!(" + {} ×{} per DC", s.name, s.per_dc)).collect();
        println!(
            "{} cluster up: {} DCs × {} partitions{}, {} nodes on loopback; config in {}",
            protocol,
            dcs,
            partitions,
            services.concat(),
            c.addrs.len(),
            config_out.display()
        );
        if let causeway_core::Replication::Partial { factor } = c.topology.spec().replication {
            let t = &c.topology;
            let places: Vec<String> = (0..partitions)
                .map(|p| {
                    let dcs: Vec<String> =
                        t.dcs_of(causeway_core::PartitionId(p)).iter().map(|&d| t.dc_name(d)).collect();
                    format!("p{p}: {}", dcs.join("+"))
                })
                .collect();
            println!("placement (each partition in {factor} DCs; others reach it remotely): {}", places.join(", "));
        }
        println!("try: causeway put k v --config {0} && causeway get k --dc 1 --config {0}", config_out.display());
        for (i, a) in c.redis_addrs.iter().enumerate() {
            if let Some(a) = a {
                let dc = c.topology.dc_name(c.topology.dc_of(causeway_core::NodeId(i as u32)));
                println!("redis: node {i} ({dc}) on redis-cli -h {} -p {}", a.ip(), a.port());
            }
        }
        if let Some(a) = c.metrics_addrs.first() {
            println!("dashboard: http://{a}/  (every node serves it; /metrics, /healthz, /readyz beside it)");
        }
        if let Some(pids) = pids {
            let t = &c.topology;
            let rows = (0..c.addrs.len())
                .map(|i| {
                    let node = causeway_core::NodeId(i as u32);
                    vec![i.to_string(), t.dc_name(t.dc_of(node)), t.role_name(node), pids[i].to_string()]
                })
                .collect();
            print!("{}", causeway_sim::report::table(&["node", "dc", "role", "pid"], rows));
            println!(
                "each node is a process of its own: `kill -9 PID` crashes one, and \
                 `causeway server --config {} --node N` starts node N again from its log",
                config_out.display()
            );
        }
    }
    Ok(())
}

/// Exit status of `causeway get` for a key with no value, so scripts can
/// tell it from a stored value (and from an error, status 1).
pub const EXIT_NOT_FOUND: u8 = 3;

/// The key has no value (the error carries the exit status).
#[derive(Debug)]
pub struct NotFound;

impl std::fmt::Display for NotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not found")
    }
}

impl std::error::Error for NotFound {}

/// A closed stdout (`causeway get k | head -c 10`) is the reader's choice,
/// not a failure: exit quietly.
pub fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

/// What a client command needs besides its operation.
pub struct ClientOpts {
    pub config: PathBuf,
    /// A DC number or name.
    pub dc: String,
    pub timeout: Duration,
    pub json: bool,
    pub token: Option<String>,
    /// The session levels the operation asks for (`get --read`, `put
    /// --write`); `None`: the protocol's own promise.
    pub levels: Option<causeway_core::Levels>,
    /// The checking group a GET names (`get --checking-group`, accf);
    /// `None`: the protocol's choice.
    pub checking_group: Option<u16>,
}

/// `put`'s value: `-` is standard input, `@FILE` a file's contents, anything
/// else the value itself.
pub fn read_value(arg: &str) -> Result<bytes::Bytes, Error> {
    use std::io::Read;
    if arg == "-" {
        let mut v = Vec::new();
        std::io::stdin().read_to_end(&mut v).map_err(|e| format!("reading the value from standard input: {e}"))?;
        Ok(v.into())
    } else if let Some(path) = arg.strip_prefix('@') {
        Ok(std::fs::read(path).map_err(|e| format!("reading the value from {path}: {e}"))?.into())
    } else {
        Ok(bytes::Bytes::copy_from_slice(arg.as_bytes()))
    }
}

/// `--dc`: a number, or a DC's name in the topology (case-insensitive).
pub(crate) fn resolve_dc(cluster: &causeway_net::Cluster, dc: &str) -> Result<DcId, Error> {
    let t = &cluster.topology;
    if let Ok(n) = dc.parse::<u16>()
        && (n as usize) < t.dcs()
    {
        return Ok(DcId(n));
    }
    t.dc_ids().find(|&d| t.dc_name(d).eq_ignore_ascii_case(dc)).ok_or_else(|| {
        let names: Vec<String> = t.dc_ids().map(|d| format!("{} ({})", d.0, t.dc_name(d))).collect();
        format!("--dc {dc:?} is not a DC of this cluster; it has {}", names.join(", ")).into()
    })
}

pub(crate) fn json_value(v: &Option<bytes::Bytes>) -> serde_json::Value {
    match v {
        Some(b) => serde_json::Value::String(String::from_utf8_lossy(b).into_owned()),
        None => serde_json::Value::Null,
    }
}

/// A client command: an operation, an operation on one row's columns
/// (printed by column name), or a delete of keys or locations (written as
/// tombstones, see [`causeway_core::tombstone`]).
pub enum ClientCmd {
    Op(Op),
    Columns { row: bytes::Bytes, op: Op },
    Del(Vec<bytes::Bytes>),
}

/// `FAMILY:COLUMN=VALUE` split, if `s` has that shape (a family name has
/// no ':' or '=').
pub fn parse_column_write(s: &str) -> Option<(&str, &str)> {
    let (loc, value) = s.split_once('=')?;
    let (family, column) = loc.split_once(':')?;
    (!family.is_empty() && !column.is_empty()).then_some((loc, value))
}

/// The key of location `row:FAMILY:COLUMN`.
pub fn column_key(row: &str, column: &str) -> Result<bytes::Bytes, Error> {
    let (family, column) = column.split_once(':').ok_or_else(|| format!("expected FAMILY:COLUMN, got {column:?}"))?;
    Ok(causeway_core::column::location_key(row.as_bytes(), family.as_bytes(), column.as_bytes())?)
}

/// `causeway put ROW FAMILY:COLUMN=VALUE…`: one column is a put, several
/// one atomic write (a write-only transaction on the row's one server).
pub fn column_write(row: &str, args: &[String]) -> Result<ClientCmd, Error> {
    let mut writes = Vec::with_capacity(args.len());
    for a in args {
        let (loc, value) = parse_column_write(a).ok_or_else(|| format!("expected FAMILY:COLUMN=VALUE, got {a:?}"))?;
        writes.push((column_key(row, loc)?, bytes::Bytes::copy_from_slice(value.as_bytes())));
    }
    let op = match <[_; 1]>::try_from(writes) {
        Ok([(key, value)]) => Op::Put { key, value },
        Err(writes) => Op::Wot { writes },
    };
    Ok(ClientCmd::Columns { row: bytes::Bytes::copy_from_slice(row.as_bytes()), op })
}

/// `causeway get ROW FAMILY:COLUMN…` (one read-only transaction) or
/// `causeway get ROW FAMILY [--slice START:STOP:COUNT]` (a slice).
pub fn column_read(row: &str, args: &[String], slice: Option<String>) -> Result<ClientCmd, Error> {
    let row_b = bytes::Bytes::copy_from_slice(row.as_bytes());
    let op = match args {
        [family] if !family.contains(':') => {
            let (start, stop, count) = match slice.as_deref() {
                None => ("", "", 0),
                Some(s) => match s.splitn(3, ':').collect::<Vec<_>>()[..] {
                    [start, stop, count] => {
                        let count = if count.is_empty() {
                            0
                        } else {
                            count.parse().map_err(|_| format!("--slice COUNT must be a number, got {count:?}"))?
                        };
                        (start, stop, count)
                    }
                    _ => return Err(format!("--slice takes START:STOP:COUNT, got {s:?}").into()),
                },
            };
            let b = |s: &str| bytes::Bytes::copy_from_slice(s.as_bytes());
            Op::Slice { row: row_b.clone(), family: b(family), start: b(start), stop: b(stop), count }
        }
        _ => {
            if slice.is_some() {
                return Err("--slice takes exactly one FAMILY, no columns".into());
            }
            let keys = args.iter().map(|c| column_key(row, c)).collect::<Result<Vec<_>, _>>()?;
            Op::Rot { keys }
        }
    };
    Ok(ClientCmd::Columns { row: row_b, op })
}

/// `FAMILY:COLUMN` of a location key (the key itself if it is none).
fn column_name(key: &[u8]) -> String {
    match causeway_core::column::parse_location(key) {
        Ok(l) => format!("{}:{}", String::from_utf8_lossy(l.family), String::from_utf8_lossy(l.column)),
        Err(_) => String::from_utf8_lossy(key).into_owned(),
    }
}

/// Print a column operation's result: `FAMILY:COLUMN = VALUE` lines (JSON:
/// one array of objects); a write prints `ok`.
fn print_columns(
    out: &mut impl std::io::Write,
    json: bool,
    row: &[u8],
    op: &Op,
    result: OpResult,
) -> Result<(), Error> {
    let cells: Vec<(String, Option<bytes::Bytes>)> = match (op, result) {
        (_, OpResult::Failed(e)) => return Err(e.into()),
        (Op::Rot { keys }, OpResult::Rot(vs)) => keys.iter().map(|k| column_name(k)).zip(vs).collect(),
        (Op::Slice { family, .. }, OpResult::Slice(cs)) => cs
            .into_iter()
            .map(|(c, v)| (format!("{}:{}", String::from_utf8_lossy(family), String::from_utf8_lossy(&c)), Some(v)))
            .collect(),
        (_, OpResult::Put | OpResult::Wot) => {
            if json {
                writeln!(out, "{}", serde_json::json!({ "row": String::from_utf8_lossy(row), "ok": true }))?;
            } else {
                writeln!(out, "ok")?;
            }
            return Ok(());
        }
        (_, other) => return Err(format!("unexpected answer {other:?}").into()),
    };
    if json {
        let items: Vec<serde_json::Value> = cells
            .iter()
            .map(|(c, v)| serde_json::json!({ "row": String::from_utf8_lossy(row), "column": c, "found": v.is_some(), "value": json_value(v) }))
            .collect();
        writeln!(out, "{}", serde_json::Value::Array(items))?;
    } else {
        for (c, v) in cells {
            let shown = v.map_or("(absent)".into(), |b| String::from_utf8_lossy(&b).into_owned());
            writeln!(out, "{c} = {shown}")?;
        }
    }
    Ok(())
}

pub fn client_op(opts: &ClientOpts, cmd: ClientCmd) -> Result<(), Error> {
    use std::io::Write;
    let cluster = Arc::new(ClusterConfig::load(&opts.config)?.validate()?);
    let dc = resolve_dc(&cluster, &opts.dc)?;
    let rt = runtime()?;
    let result = rt.block_on(async {
        with_protocol!(cluster.protocol, P => {
            let mut s = Session::<P>::new(cluster.clone(), dc, std::process::id())?;
            s.timeout = opts.timeout;
            s.set_token(opts.token.clone());
            s.set_levels(opts.levels)?;
            s.set_checking_group(opts.checking_group)?;
            match &cmd {
                ClientCmd::Op(op) | ClientCmd::Columns { op, .. } => s.execute(op.clone()).await,
                ClientCmd::Del(keys) => s.del_many(keys.clone()).await.map(|()| OpResult::Put),
            }
        })
    })?;
    let op = match cmd {
        ClientCmd::Op(op) => op,
        ClientCmd::Columns { row, op } => {
            let mut out = std::io::stdout().lock();
            print_columns(&mut out, opts.json, &row, &op, result)?;
            out.flush()?;
            return Ok(());
        }
        ClientCmd::Del(keys) => {
            if let OpResult::Failed(e) = result {
                return Err(e.into());
            }
            let mut out = std::io::stdout().lock();
            if opts.json {
                let key = String::from_utf8_lossy(&keys[0]);
                writeln!(out, "{}", serde_json::json!({ "key": key, "deleted": true }))?;
            } else {
                writeln!(out, "ok")?;
            }
            out.flush()?;
            return Ok(());
        }
    };
    let mut out = std::io::stdout().lock();
    let mut missing = false;
    match (&op, result) {
        (_, OpResult::Failed(e)) => return Err(e.into()),
        (Op::Get { key }, OpResult::Get(v)) => {
            missing = v.is_none();
            if opts.json {
                let j = serde_json::json!({ "key": String::from_utf8_lossy(key), "found": v.is_some(), "value": json_value(&v) });
                writeln!(out, "{j}")?;
            } else if let Some(v) = v {
                out.write_all(&v)?;
                if !v.ends_with(b"\n") {
                    out.write_all(b"\n")?;
                }
            }
        }
        (Op::Put { key, .. }, OpResult::Put) => {
            if opts.json {
                writeln!(out, "{}", serde_json::json!({ "key": String::from_utf8_lossy(key), "ok": true }))?;
            } else {
                writeln!(out, "ok")?;
            }
        }
        (Op::Rot { keys }, OpResult::Rot(vs)) => {
            if opts.json {
                let items: Vec<serde_json::Value> = keys
                    .iter()
                    .zip(&vs)
                    .map(|(k, v)| serde_json::json!({ "key": String::from_utf8_lossy(k), "found": v.is_some(), "value": json_value(v) }))
                    .collect();
                writeln!(out, "{}", serde_json::Value::Array(items))?;
            } else {
                for (k, v) in keys.iter().zip(vs) {
                    let shown = v.map_or("(absent)".into(), |b| String::from_utf8_lossy(&b).into_owned());
                    writeln!(out, "{} = {shown}", String::from_utf8_lossy(k))?;
                }
            }
        }
        (Op::Wot { .. } | Op::Batch { .. }, OpResult::Wot | OpResult::Put) if opts.json => {
            writeln!(out, "{}", serde_json::json!({ "ok": true }))?
        }
        (Op::Wot { .. } | Op::Batch { .. }, OpResult::Wot | OpResult::Put) => writeln!(out, "ok")?,
        (_, other) => writeln!(out, "{other:?}")?,
    }
    out.flush()?;
    if missing {
        return Err(NotFound.into());
    }
    Ok(())
}

/// One node's line in `causeway status`.
struct NodeStatus {
    node: u32,
    dc: String,
    role: String,
    addr: String,
    up: bool,
    /// Connect + handshake + hello + welcome, ms.
    hello_ms: Option<f64>,
    error: Option<String>,
    /// From the node's metrics endpoint, when the config lists one.
    stable_lag_ms: Option<f64>,
    replication_queue: Option<u64>,
    refused_total: Option<u64>,
}

/// A metric's value (summed over its label sets) from Prometheus text.
fn metric(text: &str, name: &str) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (key, value) = line.rsplit_once(' ')?;
        let bare = key.split('{').next().unwrap_or(key);
        if bare == name {
            *found.get_or_insert(0.0) += value.parse::<f64>().ok()?;
        }
    }
    found
}

/// Scrape a node's `/metrics`, giving up at `deadline`.
async fn scrape(addr: std::net::SocketAddr, deadline: tokio::time::Instant, token: Option<&str>) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let auth = token.map(|t| format!("authorization: Bearer {t}\r\n")).unwrap_or_default();
    let request = format!("GET /metrics HTTP/1.1\r\nhost: causeway\r\n{auth}connection: close\r\n\r\n");
    tokio::time::timeout_at(deadline, async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(request.as_bytes()).await.ok()?;
        let mut body = String::new();
        s.read_to_string(&mut body).await.ok()?;
        Some(body.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
    })
    .await
    .ok()
    .flatten()
}

/// What `status` learns about node `i`, under one deadline `timeout` from
/// now: the hello probe and the metrics scrape run side by side, so a node
/// that accepts connections and never answers costs `timeout` once, not once
/// per question.
async fn node_status(c: Arc<Cluster>, i: usize, timeout: Duration, token: Option<String>) -> NodeStatus {
    let deadline = tokio::time::Instant::now() + timeout;
    let node = causeway_core::NodeId(i as u32);
    let t = &c.topology;
    let role = t.role_name(node);
    // The probe starts at once (both run under `join!` below), so its own
    // deadline, `timeout` from its start, is the shared one; given the time
    // left instead, its error would name a timeout a few µs short.
    let probe = causeway_net::probe(&c, node, timeout, token.as_deref());
    let metrics = async {
        match c.metrics_addrs.get(i) {
            Some(a) => scrape(*a, deadline, token.as_deref()).await,
            None => None,
        }
    };
    let (probe, metrics) = tokio::join!(probe, metrics);
    // A node that refuses the token still answered: it is up.
    let probe = match probe {
        Err(causeway_net::ClientError::Refused {
            error: e @ (WireError::TokenRequired | WireError::BadToken), ..
        }) => Err(format!("up, but {e}")),
        p => p.map_err(|e| e.to_string()),
    };
    let up = probe.is_ok() || probe.as_ref().is_err_and(|e| e.starts_with("up, but"));
    let m = |name: &str| metrics.as_deref().and_then(|t| metric(t, name));
    NodeStatus {
        node: i as u32,
        dc: t.dc_name(t.dc_of(node)),
        role,
        addr: c.addrs[i].to_string(),
        up,
        hello_ms: probe.as_ref().ok().map(|d| d.as_secs_f64() * 1e3),
        error: probe.err(),
        stable_lag_ms: m("causeway_stable_lag_seconds").map(|s| s * 1e3),
        replication_queue: m("causeway_replication_queue").map(|v| v as u64),
        refused_total: m("causeway_refused_total").map(|v| v as u64),
    }
}

/// Every node's status, all nodes at once: the whole survey takes one
/// `timeout` however many nodes hang.
async fn node_statuses(cluster: Arc<Cluster>, timeout: Duration, token: Option<&str>) -> Vec<NodeStatus> {
    let token = token.map(str::to_string);
    futures_join_all((0..cluster.addrs.len()).map(|i| node_status(cluster.clone(), i, timeout, token.clone()))).await
}

/// `causeway status`: every node of the config, whether it answers a client
/// hello (over TLS when the cluster uses it) and how fast, and from its
/// metrics endpoint (if the config lists them) its stable-time lag,
/// replication queue and refusals. Returns whether every node is up.
pub fn status(config: &Path, timeout: Duration, json: bool, token: Option<&str>) -> Result<bool, Error> {
    let cluster = Arc::new(ClusterConfig::load(config)?.validate()?);
    let rt = runtime()?;
    let rows = rt.block_on(node_statuses(cluster.clone(), timeout, token));
    let all_up = rows.iter().all(|r| r.up);
    if json {
        let rows: Vec<_> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "node": r.node, "dc": r.dc, "role": r.role, "addr": r.addr, "up": r.up,
                    "hello_ms": r.hello_ms, "error": r.error, "stable_lag_ms": r.stable_lag_ms,
                    "replication_queue": r.replication_queue, "refused_total": r.refused_total,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(all_up);
    }
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into());
    let header = ["node", "dc", "role", "address", "state", "hello ms", "stable lag ms", "queue", "error"];
    let table_rows = rows
        .iter()
        .map(|r| {
            vec![
                r.node.to_string(),
                r.dc.clone(),
                r.role.clone(),
                r.addr.clone(),
                if r.up { "up" } else { "DOWN" }.to_string(),
                opt(r.hello_ms),
                opt(r.stable_lag_ms),
                r.replication_queue.map(|q| q.to_string()).unwrap_or_else(|| "-".into()),
                r.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    print!("{}", causeway_sim::report::table(&header, table_rows));
    if let Some(groups) = checking_groups(&cluster) {
        print!("{groups}");
    }
    Ok(all_up)
}

/// ACCF's checking groups as a session names them (`get --checking-group
/// N`, Roohitavaf Alg 7.1's `GET(k, cg)`): each group's number and its
/// servers as `"<dc>:<partition>"`. `None` for any other protocol.
fn checking_groups(cluster: &Cluster) -> Option<String> {
    use causeway_protocols::{ProtocolName, accf};
    if cluster.protocol != ProtocolName::Accf {
        return None;
    }
    let cfg: accf::Config = cluster.config.params.clone().try_into().ok()?;
    let groups = cfg.resolve(&cluster.topology).ok()?;
    let mut out = String::from("checking groups (get --checking-group N):\n");
    for g in 0..groups.checking_count() as u16 {
        let names: Vec<String> = groups
            .members(g)
            .iter()
            .filter_map(|&n| match cluster.topology.role(n) {
                causeway_core::NodeRole::Partition { dc, partition, .. } => Some(format!("{}:{}", dc.0, partition.0)),
                causeway_core::NodeRole::Service { .. } => None,
            })
            .collect();
        out.push_str(&format!("  {g}: {}\n", names.join(" ")));
    }
    Some(out)
}

/// Await every future, concurrently (a down node's timeout is paid once,
/// not once per node).
async fn futures_join_all<F>(fs: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = fs.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.expect("a status probe panicked"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes whose node and metrics ports accept connections (into the
    /// listen backlog) and never answer: the survey of all of them ends at
    /// one deadline, the probe and the scrape of a node sharing it. Time is
    /// tokio's paused clock, which jumps to the next timer whenever nothing
    /// else can run, so the elapsed time counts deadlines, not scheduling:
    /// sharing one deadline gives exactly `timeout`, a probe then a scrape
    /// twice that, a node after another once per node.
    #[tokio::test(start_paused = true)]
    async fn hung_nodes_cost_one_deadline_in_all() {
        const NODES: usize = 4;
        let hung: Vec<std::net::TcpListener> =
            (0..2 * NODES).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
        let list = |ls: &[std::net::TcpListener]| {
            ls.iter().map(|l| format!("\"{}\"", l.local_addr().unwrap())).collect::<Vec<_>>().join(", ")
        };
        let text = format!(
            "cluster_id = \"hung\"\nprotocol = \"eventual\"\nnodes = [{}]\nmetrics = [{}]\n\
             [topology]\ndcs = 2\npartitions = 2\n[tls]\nplaintext = true\n",
            list(&hung[..NODES]),
            list(&hung[NODES..])
        );
        let cluster = Arc::new(ClusterConfig::parse(&text, "hung.toml").unwrap().validate().unwrap());
        let timeout = Duration::from_secs(30);
        let start = tokio::time::Instant::now();
        let rows = node_statuses(cluster, timeout, None).await;
        let elapsed = start.elapsed();
        assert_eq!(rows.len(), NODES);
        for r in &rows {
            assert!(!r.up, "node {} answered nothing yet is up", r.node);
            let e = r.error.as_deref().unwrap_or_default();
            assert!(e.contains("did not answer") || e.contains("connect"), "node {}: {e}", r.node);
            assert!(r.stable_lag_ms.is_none() && r.replication_queue.is_none());
        }
        assert!(elapsed >= timeout, "gave up after {elapsed:?}, before its deadline");
        assert!(
            elapsed < timeout + Duration::from_secs(1),
            "{NODES} hung nodes took {elapsed:?} for a {timeout:?} deadline"
        );
    }
}
