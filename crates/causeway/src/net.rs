//! The network-runtime commands: `server`, `up`, `get`/`put`/`rot`.

use causeway_core::{DcId, Op, OpResult};
use causeway_net::embedded::{Embedded, EmbeddedSpec};
use causeway_net::{ClusterConfig, Session};
use causeway_protocols::{ProtocolName, with_protocol};
use std::path::{Path, PathBuf};
use std::sync::Arc;

type Error = Box<dyn std::error::Error>;

fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

/// Wait for SIGINT or SIGTERM.
async fn shutdown_signal() {
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

pub fn server(config: &Path, node: u32) -> Result<(), Error> {
    let cluster = Arc::new(ClusterConfig::load(config)?.validate()?);
    let node = cluster.check_node(node)?;
    let rt = runtime()?;
    let h = with_protocol!(cluster.protocol, P => causeway_net::server::spawn::<P>(cluster.clone(), node, None, rt.handle())?);
    tracing::info!(node = node.0, addr = %h.addr, protocol = %cluster.protocol, "serving");
    rt.block_on(shutdown_signal());
    tracing::info!(node = node.0, "shutting down");
    h.stop()?;
    Ok(())
}

pub fn up(
    protocol: ProtocolName,
    dcs: u16,
    partitions: u32,
    data_dir: PathBuf,
    config_out: &Path,
    no_wan: bool,
) -> Result<(), Error> {
    let rt = runtime()?;
    let mut spec = EmbeddedSpec::default_for(protocol, data_dir);
    spec.dcs = dcs;
    spec.partitions = partitions;
    if no_wan || dcs != 3 {
        spec.rtt_ms = Vec::new();
    }
    let cluster = Embedded::start(spec, rt.handle())?;
    std::fs::write(config_out, cluster.cluster.to_toml())?;
    println!(
        "{} cluster up: {} DCs × {} partitions, {} nodes on loopback; config in {}",
        protocol,
        dcs,
        partitions,
        cluster.cluster.addrs.len(),
        config_out.display()
    );
    println!("try: causeway put k v --config {0} && causeway get k --dc 1 --config {0}", config_out.display());
    println!("Ctrl-C to stop.");
    rt.block_on(shutdown_signal());
    cluster.stop()?;
    Ok(())
}

fn show(v: &Option<bytes::Bytes>) -> String {
    match v {
        Some(b) => String::from_utf8_lossy(b).into_owned(),
        None => "(absent)".into(),
    }
}

pub fn client_op(config: &Path, dc: u16, op: Op) -> Result<(), Error> {
    let cluster = Arc::new(ClusterConfig::load(config)?.validate()?);
    let rt = runtime()?;
    let result = rt.block_on(async {
        with_protocol!(cluster.protocol, P => {
            let mut s = Session::<P>::new(cluster.clone(), DcId(dc), std::process::id())?;
            s.execute(op.clone()).await
        })
    })?;
    match (&op, result) {
        (_, OpResult::Get(v)) => println!("{}", show(&v)),
        (_, OpResult::Put) => println!("ok"),
        (Op::Rot { keys }, OpResult::Rot(vs)) => {
            for (k, v) in keys.iter().zip(vs) {
                println!("{} = {}", String::from_utf8_lossy(k), show(&v));
            }
        }
        (_, OpResult::Failed(e)) => return Err(e.into()),
        (_, other) => println!("{other:?}"),
    }
    Ok(())
}
