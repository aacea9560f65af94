//! `kill -9` a server process during writes, restart it, and check that no
//! acknowledged write is lost and that replication resumes. The log is
//! compacted into snapshots every 16 KiB, so recovery reads a snapshot plus
//! a log, and peer sequence numbers must survive compaction.

use bytes::Bytes;
use causeway_core::DcId;
use causeway_net::{ClusterConfig, Session};
use causeway_protocols::{ProtocolName, with_protocol};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start(config: &std::path::Path, node: u32) -> Child {
    Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(["server", "--config", config.to_str().unwrap(), "--node", &node.to_string()])
        .env("CAUSEWAY_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start a server process")
}

fn crash_restart(p: ProtocolName) {
    let dir = std::env::temp_dir().join(format!("causeway-crash-{p}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config_path = dir.join("cluster.toml");
    let text = format!(
        "cluster_id = \"crash-test\"\nprotocol = \"{p}\"\ndata_dir = \"{}\"\nnodes = [\"127.0.0.1:{}\", \"127.0.0.1:{}\"]\n\
         [topology]\ndcs = 2\npartitions = 1\n[storage]\nfsync = \"always\"\nsnapshot_bytes = 16384\n",
        dir.join("data").display(),
        free_port(),
        free_port()
    );
    std::fs::write(&config_path, text).unwrap();
    let cluster = Arc::new(ClusterConfig::load(&config_path).unwrap().validate().unwrap());
    let mut n0 = start(&config_path, 0);
    let mut n1 = start(&config_path, 1);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let acked: Vec<Bytes> = rt.block_on(async {
        with_protocol!(p, P => {
            let mut acked = Vec::new();
            let mut session = None;
            let started = Instant::now();
            let mut killed = false;
            let mut i = 0u32;
            while started.elapsed() < Duration::from_secs(6) {
                if !killed && acked.len() >= 200 {
                    n0.kill().unwrap(); // SIGKILL
                    n0.wait().unwrap();
                    killed = true;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    n0 = start(&config_path, 0);
                }
                if killed && acked.len() >= 400 {
                    break;
                }
                let s = match session.as_mut() {
                    Some(s) => s,
                    None => {
                        let mut s = Session::<P>::new(cluster.clone(), DcId(0), 1).unwrap();
                        s.timeout = Duration::from_secs(2);
                        session.insert(s)
                    }
                };
                let k = Bytes::from(format!("key{i}"));
                i += 1;
                match s.put(k.clone(), k.clone()).await {
                    Ok(()) => acked.push(k),
                    Err(_) => {
                        // The server is down or restarting: a new session after a pause.
                        session = None;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            assert!(killed, "{p}: never got to the crash");
            assert!(acked.len() >= 400, "{p}: only {} writes acknowledged; the restarted node did not resume", acked.len());
            acked
        })
    });
    // Every acknowledged write is in DC0 after the restart, and reaches DC1.
    rt.block_on(async {
        with_protocol!(p, P => {
            let mut r0 = Session::<P>::new(cluster.clone(), DcId(0), 2).unwrap();
            for k in &acked {
                assert_eq!(r0.get(k.clone()).await.unwrap().as_ref(), Some(k), "{p}: acknowledged {k:?} lost");
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut r1 = Session::<P>::new(cluster.clone(), DcId(1), 3).unwrap();
            for k in &acked {
                loop {
                    if r1.get(k.clone()).await.unwrap().as_ref() == Some(k) {
                        break;
                    }
                    assert!(Instant::now() < deadline, "{p}: {k:?} never replicated to dc1 after the restart");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        })
    });
    let _ = n0.kill();
    let _ = n1.kill();
    let _ = n0.wait();
    let _ = n1.wait();
    assert!(dir.join("data/node-0/snapshot").exists(), "{p}: the log was never compacted");
}

#[test]
fn kill_9_loses_no_acknowledged_write() {
    for &p in ProtocolName::ALL {
        crash_restart(p);
    }
}
