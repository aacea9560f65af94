//! `causeway up --processes`: the embedded cluster with every node — partition
//! server, Eunomia replica, receiver, forwarder — a `causeway server` process
//! of its own, so an operator can `kill -9` one node (a Eunomia leader, a
//! Raft leader) and watch the others carry on, exactly as in a deployment.
//!
//! This process lays the cluster out ([`causeway_net::embedded::plan`]:
//! addresses, certificates, the config), starts the nodes, waits until each
//! answers a hello, prints where everything is (with each node's pid), and
//! then supervises: a node that exits is reported with its log and the
//! command that starts it again, and the others keep serving. It does not
//! restart nodes itself: a crashed node staying down is what a fault
//! experiment wants, and restarting is one command. SIGINT or SIGTERM stops
//! them all (a clean stop: each syncs its log); if this process is killed
//! outright, the kernel stops them (`PR_SET_PDEATHSIG`), so no node outlives
//! its supervisor holding a port.

use crate::net::{announce, shutdown_signal};
use causeway_net::Cluster;
use causeway_net::config::{Limits, StorageConfig};
use causeway_net::embedded::{EmbeddedSpec, plan};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error>;

/// How long the nodes have to answer their first hello (recovery of a large
/// log included) before `up` gives up and stops them.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a clean stop may take before the stragglers are killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// How often the supervisor looks for nodes that exited.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// One node's process and where its output goes.
struct NodeProcess {
    node: usize,
    child: Child,
    log: PathBuf,
    /// The log's length when this process started: what it wrote is after.
    log_from: u64,
    /// Set once it has exited (and been reported).
    exited: Option<ExitStatus>,
}

pub fn up(spec: EmbeddedSpec, config_out: &Path, json: bool) -> Result<(), Error> {
    let storage = StorageConfig { fsync: spec.fsync, ..StorageConfig::default() };
    let planned = plan(&spec, Limits::default(), storage)?;
    let c = planned.cluster;
    std::fs::write(config_out, c.to_toml())?;
    let config = std::path::absolute(config_out)?;
    // The ports were held only to choose them; each node binds its own.
    drop(planned.listeners);
    let logs = c.config.data_dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    let exe = std::env::current_exe()?;
    let mut nodes = Vec::with_capacity(c.addrs.len());
    for i in 0..c.addrs.len() {
        match start(&exe, &config, i, &logs) {
            Ok(p) => nodes.push(p),
            Err(e) => {
                stop_all(&mut nodes);
                return Err(format!("starting node {i}: {e}").into());
            }
        }
    }
    // A current-thread runtime: everything below runs on the main thread,
    // the one that started the children (the parent-death signal follows
    // the thread that forked, not the process).
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    if let Err(e) = rt.block_on(wait_ready(&c, &mut nodes)) {
        stop_all(&mut nodes);
        return Err(e);
    }
    let pids: Vec<u32> = nodes.iter().map(|p| p.child.id()).collect();
    announce(&c, config_out, json, Some(&pids))?;
    if !json {
        println!("node logs in {}; Ctrl-C to stop.", logs.display());
    }
    use std::io::Write;
    std::io::stdout().flush()?;
    rt.block_on(supervise(&c, &mut nodes, &config));
    stop_all(&mut nodes);
    Ok(())
}

/// Start node `i` as `causeway server --config CONFIG --node i`, its output
/// appended to `logs/node-i.log`.
fn start(exe: &Path, config: &Path, i: usize, logs: &Path) -> std::io::Result<NodeProcess> {
    let log = logs.join(format!("node-{i}.log"));
    let out = std::fs::OpenOptions::new().create(true).append(true).open(&log)?;
    let log_from = out.metadata()?.len();
    let mut cmd = Command::new(exe);
    cmd.arg("server").arg("--config").arg(config).arg("--node").arg(i.to_string());
    cmd.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: between fork and exec only async-signal-safe calls:
        // prctl, getppid and _exit, no allocation.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The supervisor died before the signal was armed.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
    Ok(NodeProcess { node: i, child: cmd.spawn()?, log, log_from, exited: None })
}

/// Until every node answers a hello: a node that exits first, or the
/// deadline, is an error naming the node and the end of its log.
async fn wait_ready(c: &Arc<Cluster>, nodes: &mut [NodeProcess]) -> Result<(), Error> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let mut ready = vec![false; nodes.len()];
    loop {
        for (i, p) in nodes.iter_mut().enumerate() {
            if let Some(status) = p.child.try_wait()? {
                return Err(format!(
                    "node {i} ({}) exited while starting ({status}); the end of {}:\n{}",
                    c.topology.role_name(causeway_core::NodeId(i as u32)),
                    p.log.display(),
                    tail(&p.log, p.log_from, 20)
                )
                .into());
            }
            if !ready[i] {
                ready[i] = answers(c, i).await;
            }
        }
        if ready.iter().all(|&r| r) {
            return Ok(());
        }
        if Instant::now() > deadline {
            let waiting: Vec<String> =
                ready.iter().enumerate().filter(|(_, r)| !**r).map(|(i, _)| i.to_string()).collect();
            return Err(format!(
                "nodes {} did not answer within {READY_TIMEOUT:?} (their logs are in {})",
                waiting.join(", "),
                nodes[0].log.parent().map(|d| d.display().to_string()).unwrap_or_default()
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether node `i` answers a client hello (a node that asks for a token
/// has answered too).
async fn answers(c: &Arc<Cluster>, i: usize) -> bool {
    match causeway_net::probe(c, causeway_core::NodeId(i as u32), Duration::from_millis(500), None).await {
        Ok(_) => true,
        Err(causeway_net::ClientError::Refused { .. }) => true,
        Err(_) => false,
    }
}

/// Report each node that exits, until a signal or until none is left.
async fn supervise(c: &Arc<Cluster>, nodes: &mut [NodeProcess], config: &Path) {
    let stop = shutdown_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = tokio::time::sleep(POLL_INTERVAL) => {}
        }
        for p in nodes.iter_mut().filter(|p| p.exited.is_none()) {
            let Ok(Some(status)) = p.child.try_wait() else { continue };
            p.exited = Some(status);
            let node = causeway_core::NodeId(p.node as u32);
            let t = &c.topology;
            eprintln!(
                "node {} ({}, {}, pid {}) exited ({status}); the others keep serving. Its log: {}. \
                 Start it again from its log with: causeway server --config {} --node {}",
                p.node,
                t.role_name(node),
                t.dc_name(t.dc_of(node)),
                p.child.id(),
                p.log.display(),
                config.display(),
                p.node
            );
        }
        if nodes.iter().all(|p| p.exited.is_some()) {
            eprintln!("every node has exited");
            return;
        }
    }
}

/// Ask every node still running to stop (SIGTERM: a clean stop that syncs
/// its log), wait for them, and kill what is left after [`STOP_TIMEOUT`].
fn stop_all(nodes: &mut [NodeProcess]) {
    for p in nodes.iter_mut() {
        if p.exited.is_none() && matches!(p.child.try_wait(), Ok(None)) {
            #[cfg(unix)]
            // SAFETY: kill(2) on our own child's pid, which we have not
            // reaped yet (so it names that process).
            unsafe {
                libc::kill(p.child.id() as libc::pid_t, libc::SIGTERM);
            }
            #[cfg(not(unix))]
            let _ = p.child.kill();
        }
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    for p in nodes.iter_mut() {
        loop {
            match p.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    eprintln!("node {} did not stop within {STOP_TIMEOUT:?}: killed", p.node);
                    let _ = p.child.kill();
                    let _ = p.child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

/// The last `lines` lines a log file gained past byte `from`.
fn tail(path: &Path, from: u64, lines: usize) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(bytes.get(from as usize..).unwrap_or_default());
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
