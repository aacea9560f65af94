//! `kill -9` a server process during writes, restart it, and check that no
//! acknowledged write is lost and that replication resumes. The log is
//! compacted into snapshots every 16 KiB, each copied over several turns of
//! the node's loop, so recovery reads a snapshot plus a log (or a log set
//! aside by a kill mid-copy), and peer sequence numbers must survive
//! compaction.

use bytes::Bytes;
use causeway_core::DcId;
use causeway_net::{ClusterConfig, Session};
use causeway_protocols::{ProtocolName, with_protocol};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `N` distinct free ports: every listener is held until all are bound (one
/// at a time, the OS may hand out the same port twice).
fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<std::net::TcpListener> =
        (0..N).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    std::array::from_fn(|i| held[i].local_addr().unwrap().port())
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
    let [a, b] = free_ports();
    // Snapshots copied one slice of keys per turn, so a kill may land
    // while one is being copied.
    let text = format!(
        "cluster_id = \"crash-test\"\nprotocol = \"{p}\"\ndata_dir = \"{}\"\nnodes = [\"127.0.0.1:{a}\", \"127.0.0.1:{b}\"]\n\
         [topology]\ndcs = 2\npartitions = 1\n[tls]\ndir = \"certs\"\n[storage]\nfsync = \"always\"\nsnapshot_bytes = 16384\n\
         checkpoint_slice_us = 0\n",
        dir.join("data").display(),
    );
    std::fs::write(&config_path, text).unwrap();
    causeway_net::tls::generate(&dir.join("certs"), "crash-test", 2, &causeway_net::tls::Validity { days: 1 }).unwrap();
    let cluster = Arc::new(ClusterConfig::load(&config_path).unwrap().validate().unwrap());
    let mut nodes = Nodes(vec![start(&config_path, 0), start(&config_path, 1)]);
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
                    nodes.0[0].kill().unwrap(); // SIGKILL
                    nodes.0[0].wait().unwrap();
                    killed = true;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    nodes.0[0] = start(&config_path, 0);
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
    drop(nodes);
    assert!(dir.join("data/node-0/snapshot").exists(), "{p}: the log was never compacted");
}

#[test]
fn kill_9_loses_no_acknowledged_write() {
    for &p in ProtocolName::ALL {
        crash_restart(p);
    }
}

/// COPS and COPS-GT hold a replicated write whose dependency has not
/// arrived: it must survive `kill -9` of the node holding it, although its
/// sender already counts it delivered. Three DCs × one partition; DC0→DC2 is
/// 1 s one way, the other links 1 ms. x is written in DC0 and read in DC1,
/// then y is written in DC1: y reaches DC2 at once and waits there for x.
/// DC2's server is killed while y waits, and restarted.
fn pending_write_survives_kill_9(p: ProtocolName) {
    let dir = std::env::temp_dir().join(format!("causeway-pending-{p}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config_path = dir.join("cluster.toml");
    let [a, b, c] = free_ports();
    let text = format!(
        "cluster_id = \"pending-test\"\nprotocol = \"{p}\"\ndata_dir = \"{}\"\n\
         nodes = [\"127.0.0.1:{a}\", \"127.0.0.1:{b}\", \"127.0.0.1:{c}\"]\n\
         [topology]\ndcs = 3\npartitions = 1\n[tls]\ndir = \"certs\"\n[storage]\nfsync = \"always\"\n\
         [wan]\nrtt_ms = [[0, 2, 2000], [2, 0, 2], [2000, 2, 0]]\n",
        dir.join("data").display(),
    );
    std::fs::write(&config_path, text).unwrap();
    causeway_net::tls::generate(&dir.join("certs"), "pending-test", 3, &causeway_net::tls::Validity { days: 1 })
        .unwrap();
    let cluster = Arc::new(ClusterConfig::load(&config_path).unwrap().validate().unwrap());
    let mut nodes = Nodes((0..3).map(|n| start(&config_path, n)).collect());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (x, y) = (Bytes::from_static(b"x"), Bytes::from_static(b"y"));
    let deadline = || Instant::now() + Duration::from_secs(15);
    rt.block_on(async {
        with_protocol!(p, P => {
            let session = |dc: u16, id: u32| {
                let mut s = Session::<P>::new(cluster.clone(), DcId(dc), id).unwrap();
                s.timeout = Duration::from_secs(2);
                s
            };
            let mut s0 = session(0, 1);
            let until = deadline();
            while s0.put(x.clone(), x.clone()).await.is_err() {
                assert!(Instant::now() < until, "{p}: dc0 never accepted the write");
                tokio::time::sleep(Duration::from_millis(50)).await;
                s0 = session(0, 1);
            }
            let mut s1 = session(1, 2);
            let until = deadline();
            loop {
                match s1.get(x.clone()).await {
                    Ok(Some(v)) if v == x => break,
                    Ok(_) => {}
                    Err(_) => s1 = session(1, 2), // dc1 still starting
                }
                assert!(Instant::now() < until, "{p}: x never reached dc1");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            s1.put(y.clone(), y.clone()).await.unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
            let until = deadline();
            let seen = loop {
                if let Ok(v) = session(2, 3).get(y.clone()).await {
                    break v;
                }
                assert!(Instant::now() < until, "{p}: dc2 never answered");
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            assert_eq!(seen, None, "{p}: y must wait at dc2 for x");
        })
    });
    nodes.0[2].kill().unwrap(); // SIGKILL while y waits
    nodes.0[2].wait().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    nodes.0[2] = start(&config_path, 2);
    rt.block_on(async {
        with_protocol!(p, P => {
            let until = deadline();
            loop {
                let mut s2 = Session::<P>::new(cluster.clone(), DcId(2), 4).unwrap();
                s2.timeout = Duration::from_secs(2);
                if let (Ok(Some(gy)), Ok(Some(gx))) = (s2.get(y.clone()).await, s2.get(x.clone()).await) {
                    assert_eq!((gx, gy), (x.clone(), y.clone()));
                    break;
                }
                assert!(Instant::now() < until, "{p}: the write waiting at dc2 was lost in the crash");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    });
}

/// Server processes, killed however the test ends (a failed assertion
/// must not leave them running).
struct Nodes(Vec<Child>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for n in &mut self.0 {
            let _ = n.kill();
            let _ = n.wait();
        }
    }
}

#[test]
fn a_write_waiting_for_its_dependencies_survives_kill_9() {
    pending_write_survives_kill_9(ProtocolName::Cops);
    pending_write_survives_kill_9(ProtocolName::CopsGt);
}
