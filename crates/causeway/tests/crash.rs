//! `kill -9` a server process during writes, restart it, and check that no
//! acknowledged write is lost and that replication resumes. The log is
//! compacted into snapshots every 16 KiB, each copied over several turns of
//! the node's loop, so recovery reads a snapshot plus a log (or a log set
//! aside by a kill mid-copy), and peer sequence numbers must survive
//! compaction.

use bytes::Bytes;
use causeway_core::{DcId, PartitionId};
use causeway_net::{ClusterConfig, Session};
use causeway_protocols::eiger::Eiger;
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

/// `n` distinct free ports, as [`free_ports`].
fn free_port_list(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> =
        (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    held.iter().map(|l| l.local_addr().unwrap().port()).collect()
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
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-crash-{p}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config_path = dir.join("cluster.toml");
    // Two partition servers (node 0 in DC0, node 1 in DC1), then the
    // protocol's service nodes, if it runs any.
    let topology = causeway_net::config::topology_for(p, &causeway_core::TopologySpec::full(2, 1));
    let n = causeway_core::Topology::new(topology).unwrap().nodes();
    let nodes_list: Vec<String> = free_port_list(n).iter().map(|port| format!("\"127.0.0.1:{port}\"")).collect();
    // Snapshots copied one slice of keys per turn, so a kill may land
    // while one is being copied.
    let text = format!(
        "cluster_id = \"crash-test\"\nprotocol = \"{p}\"\ndata_dir = \"{}\"\nnodes = [{}]\n\
         [topology]\ndcs = 2\npartitions = 1\n[tls]\ndir = \"certs\"\n[storage]\nfsync = \"always\"\nsnapshot_bytes = 16384\n\
         checkpoint_slice_us = 0\n",
        dir.join("data").display(),
        nodes_list.join(", "),
    );
    std::fs::write(&config_path, text).unwrap();
    causeway_net::tls::generate(&dir.join("certs"), "crash-test", n, &causeway_net::tls::Validity { days: 1 }).unwrap();
    let cluster = Arc::new(ClusterConfig::load(&config_path).unwrap().validate().unwrap());
    let mut nodes = Nodes((0..n as u32).map(|i| start(&config_path, i)).collect());
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
    // Read again until a deadline: a fresh session of some protocols reads
    // at a stable snapshot slightly in the past (PaRiS's UST), which the
    // last writes take a few stabilization rounds to fall under.
    rt.block_on(async {
        with_protocol!(p, P => {
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut r0 = Session::<P>::new(cluster.clone(), DcId(0), 2).unwrap();
            for k in &acked {
                while r0.get(k.clone()).await.unwrap().as_ref() != Some(k) {
                    assert!(Instant::now() < deadline, "{p}: acknowledged {k:?} lost in dc0");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
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

/// EunomiaKV's fault-tolerant Eunomia as separate server processes:
/// two replicas per DC (Gunawardhana et al. §3.3), so one may fail. DC0's
/// leading replica is killed with `kill -9` during writes and never comes
/// back: writes go on being acknowledged (Eunomia is off their path), and
/// every acknowledged write, before and after the kill, becomes visible in
/// DC1 once the other replica leads. Then DC1's receiver is killed and
/// restarted, and a last write still arrives.
#[test]
fn eunomiakv_survives_the_permanent_loss_of_its_leading_eunomia_replica() {
    let p = ProtocolName::EunomiaKv;
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-eunomia-ft-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config_path = dir.join("cluster.toml");
    let topology_toml = "[topology]\ndcs = 2\npartitions = 1\nservices = [{ name = \"eunomia\", per_dc = 2 }]\n";
    let n = 2 + 2 * (2 + 1); // two partition servers; per DC two Eunomia replicas and a receiver
    let nodes_list: Vec<String> = free_port_list(n).iter().map(|port| format!("\"127.0.0.1:{port}\"")).collect();
    let text = format!(
        "cluster_id = \"eunomia-ft\"\nprotocol = \"{p}\"\ndata_dir = \"{}\"\nnodes = [{}]\n{topology_toml}\
         [tls]\ndir = \"certs\"\n[storage]\nfsync = \"always\"\n[wan]\nrtt_ms = [[0, 20], [20, 0]]\n",
        dir.join("data").display(),
        nodes_list.join(", "),
    );
    std::fs::write(&config_path, text).unwrap();
    causeway_net::tls::generate(&dir.join("certs"), "eunomia-ft", n, &causeway_net::tls::Validity { days: 1 }).unwrap();
    let cluster = Arc::new(ClusterConfig::load(&config_path).unwrap().validate().unwrap());
    let t = &cluster.topology;
    assert_eq!(t.nodes(), n);
    let eunomia = t.service_index("eunomia").unwrap();
    let leader = t.service_nodes(DcId(0), eunomia)[0];
    let receiver = t.service_nodes(DcId(1), t.service_index("receiver").unwrap())[0];
    let mut nodes = Nodes((0..n as u32).map(|i| start(&config_path, i)).collect());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let session = |dc: u16, id: u32| {
        let mut s =
            Session::<causeway_protocols::services::eunomia_kv::EunomiaKv>::new(cluster.clone(), DcId(dc), id).unwrap();
        s.timeout = Duration::from_secs(2);
        s
    };
    let deadline = || Instant::now() + Duration::from_secs(20);
    let mut acked = Vec::new();
    rt.block_on(async {
        let mut w = session(0, 1);
        let until = deadline();
        let mut i = 0u32;
        while acked.len() < 300 {
            assert!(Instant::now() < until, "{p}: only {} writes acknowledged", acked.len());
            if acked.len() == 100 && nodes.0[leader.idx()].try_wait().unwrap().is_none() {
                nodes.0[leader.idx()].kill().unwrap(); // SIGKILL, for good
                nodes.0[leader.idx()].wait().unwrap();
            }
            let k = Bytes::from(format!("key{i}"));
            i += 1;
            match w.put(k.clone(), k.clone()).await {
                Ok(()) => acked.push(k),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await; // DC0 still starting
                    w = session(0, 1);
                }
            }
        }
    });
    let all_visible_in_dc1 = |acked: &[Bytes], what: &str| {
        rt.block_on(async {
            let until = deadline();
            let mut r = session(1, 2);
            for k in acked {
                loop {
                    match r.get(k.clone()).await {
                        Ok(Some(v)) if v == k => break,
                        Ok(_) => {}
                        Err(_) => r = session(1, 2),
                    }
                    assert!(Instant::now() < until, "{p}: {k:?} never became visible in dc1 {what}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        })
    };
    all_visible_in_dc1(&acked, "after its leading Eunomia replica died");
    nodes.0[receiver.idx()].kill().unwrap();
    nodes.0[receiver.idx()].wait().unwrap();
    nodes.0[receiver.idx()] = start(&config_path, receiver.0);
    let last = Bytes::from_static(b"last");
    rt.block_on(async {
        let until = deadline();
        while session(0, 3).put(last.clone(), last.clone()).await.is_err() {
            assert!(Instant::now() < until, "{p}: dc0 stopped taking writes");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    all_visible_in_dc1(&[last], "after its receiver restarted");
}

/// NuKV's Raft groups as separate server processes (Roohitavaf, *Consistency
/// for Distributed Data Stores*, §4.3: a partition is a Raft group of
/// replicas in each DC, and a stateless forwarder ships its committed writes
/// to the other DCs). Two DCs × one partition, three replicas per group.
/// Each of DC0's three replicas, and then its forwarder, is killed with
/// `kill -9` in turn during writes and restarted: whichever was leading,
/// writes go on being acknowledged once the others elect a leader, the
/// writing session reads its own latest write after each round, and every
/// acknowledged write is then readable in both DCs.
#[test]
fn a_nukv_group_loses_each_replica_and_its_forwarder_to_kill_9_in_turn() {
    use causeway_protocols::nukv::{Nukv, XC_SERVICE};
    let p = ProtocolName::Nukv;
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-nukv-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config_path = dir.join("cluster.toml");
    let mut spec = causeway_core::TopologySpec::full(2, 1);
    spec.replicas_per_partition = 3;
    let n = causeway_core::Topology::new(causeway_net::config::topology_for(p, &spec)).unwrap().nodes();
    let nodes_list: Vec<String> = free_port_list(n).iter().map(|port| format!("\"127.0.0.1:{port}\"")).collect();
    let text = format!(
        "cluster_id = \"nukv-kill\"\nprotocol = \"{p}\"\ndata_dir = \"{}\"\nnodes = [{}]\n\
         [topology]\ndcs = 2\npartitions = 1\nreplicas_per_partition = 3\n\
         [tls]\ndir = \"certs\"\n[storage]\nfsync = \"always\"\n[wan]\nrtt_ms = [[0, 20], [20, 0]]\n",
        dir.join("data").display(),
        nodes_list.join(", "),
    );
    std::fs::write(&config_path, text).unwrap();
    causeway_net::tls::generate(&dir.join("certs"), "nukv-kill", n, &causeway_net::tls::Validity { days: 1 }).unwrap();
    let cluster = Arc::new(ClusterConfig::load(&config_path).unwrap().validate().unwrap());
    let t = &cluster.topology;
    assert_eq!(t.nodes(), n);
    let mut victims = t.replicas(DcId(0), PartitionId(0)).to_vec();
    assert_eq!(victims.len(), 3, "three replicas in DC0's group");
    victims.push(t.service_nodes(DcId(0), t.service_index(XC_SERVICE).unwrap())[0]);
    let mut nodes = Nodes((0..n as u32).map(|i| start(&config_path, i)).collect());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let session = |dc: u16, id: u32| {
        let mut s = Session::<Nukv>::new(cluster.clone(), DcId(dc), id).unwrap();
        s.timeout = Duration::from_secs(2);
        s
    };
    let mut acked: Vec<Bytes> = Vec::new();
    rt.block_on(async {
        let mut w = session(0, 1);
        let mut i = 0u32;
        // Until `target` writes are acknowledged, a new session after a
        // failure (a request lost with its leader, or the cluster starting).
        let mut write_until = async |w: &mut Session<Nukv>, acked: &mut Vec<Bytes>, target: usize, what: &str| {
            let until = Instant::now() + Duration::from_secs(30);
            while acked.len() < target {
                assert!(Instant::now() < until, "only {} writes acknowledged {what}", acked.len());
                let k = Bytes::from(format!("key{i}"));
                i += 1;
                match w.put(k.clone(), k.clone()).await {
                    Ok(()) => acked.push(k),
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        *w = session(0, 1);
                    }
                }
            }
            // Read-your-writes through the group: the session's last write.
            let last = acked.last().unwrap().clone();
            let got = w.get(last.clone()).await.unwrap_or_else(|e| panic!("reading back {last:?} {what}: {e}"));
            assert_eq!(got.as_ref(), Some(&last), "the session lost its own write {what}");
        };
        write_until(&mut w, &mut acked, 50, "before any kill").await;
        for (round, victim) in victims.iter().enumerate() {
            nodes.0[victim.idx()].kill().unwrap(); // SIGKILL
            nodes.0[victim.idx()].wait().unwrap();
            let what = format!("with node {} ({}) killed", victim.0, t.role_name(*victim));
            write_until(&mut w, &mut acked, 50 + 100 * round + 50, &what).await;
            nodes.0[victim.idx()] = start(&config_path, victim.0);
            let what = format!("after node {} ({}) restarted", victim.0, t.role_name(*victim));
            write_until(&mut w, &mut acked, 50 + 100 * (round + 1), &what).await;
        }
    });
    // Every acknowledged write is in both DCs: DC0's group kept it through
    // the loss of each of its members, and the restarted forwarder shipped
    // what it had not (it keeps no state: it resumes from the group's log).
    rt.block_on(async {
        for dc in [0u16, 1] {
            let until = Instant::now() + Duration::from_secs(20);
            let mut r = session(dc, 10 + dc as u32);
            for k in &acked {
                loop {
                    match r.get(k.clone()).await {
                        Ok(Some(v)) if v == k => break,
                        Ok(_) => {}
                        Err(_) => r = session(dc, 10 + dc as u32),
                    }
                    assert!(Instant::now() < until, "acknowledged {k:?} is not readable in dc{dc}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    });
}

/// COPS and COPS-GT hold a replicated write whose dependency has not
/// arrived: it must survive `kill -9` of the node holding it, although its
/// sender already counts it delivered. Three DCs × one partition; DC0→DC2 is
/// 1 s one way, the other links 1 ms. x is written in DC0 and read in DC1,
/// then y is written in DC1: y reaches DC2 at once and waits there for x.
/// DC2's server is killed while y waits, and restarted.
fn pending_write_survives_kill_9(p: ProtocolName) {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-pending-{p}-{}", std::process::id()));
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

// ------------------------------------------------- Eiger write-only transactions

/// Where one write-only transaction of [`eiger_wot_survives_kill_9_of_any_participant`]
/// stands, as its client saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WotState {
    /// Sent, no answer yet.
    InFlight,
    /// The coordinator answered: committed.
    Acked,
    /// An error (lost connection, timeout, `Aborted`): may be present or
    /// absent, never partial.
    Failed,
}

/// One write-only transaction: its own fresh keys (two on each partition),
/// which it writes once with `value`, and its state.
struct WotGroup {
    keys: Vec<Bytes>,
    value: Bytes,
    state: WotState,
}

/// What the writers, readers and the test driver share.
struct WotShared {
    groups: Vec<WotGroup>,
    /// The scenario running, named in every violation.
    scenario: &'static str,
    /// Half-visible answers seen by the readers during the scenario.
    violations: Vec<String>,
    acked_in_scenario: usize,
    /// Read-only transactions answered during the scenario, per DC.
    rots_ok: [usize; 2],
    stop: bool,
}

type SharedWots = Arc<std::sync::Mutex<WotShared>>;

/// The first `per_partition` keys named `{prefix}-{c}` on each partition.
fn keys_on_each_partition(cluster: &causeway_net::Cluster, prefix: &str, per_partition: usize) -> Vec<Bytes> {
    let parts = cluster.topology.partitions();
    let mut by_part: Vec<Vec<Bytes>> = vec![Vec::new(); parts];
    for c in 0.. {
        if by_part.iter().all(|v| v.len() == per_partition) {
            break;
        }
        let k = format!("{prefix}-{c}");
        let p = cluster.topology.partition_of(k.as_bytes()).idx();
        if by_part[p].len() < per_partition {
            by_part[p].push(Bytes::from(k));
        }
    }
    by_part.concat()
}

/// Atomic visibility in one read-only transaction's answer `got` over
/// `hot` (written by every transaction) followed by each group's keys:
/// the hot keys all show the same transaction, and each group's keys are
/// all absent or all its value. What is wrong, if anything.
fn half_visible(hot: usize, groups: &[(Vec<Bytes>, Bytes)], got: &[Option<Bytes>]) -> Option<String> {
    let (h, mut rest) = got.split_at(hot);
    if h.iter().any(|v| v != &h[0]) {
        return Some(format!("the hot keys show different transactions: {h:?}"));
    }
    for (keys, value) in groups {
        let (g, tail) = rest.split_at(keys.len());
        rest = tail;
        let all_absent = g.iter().all(Option::is_none);
        let all_present = g.iter().all(|v| v.as_ref() == Some(value));
        if !all_absent && !all_present {
            return Some(format!("transaction {value:?} half-visible: keys {keys:?} read {g:?}"));
        }
    }
    None
}

fn eiger_session(cluster: &Arc<causeway_net::Cluster>, dc: u16, id: u32) -> Session<Eiger> {
    let mut s = Session::<Eiger>::new(cluster.clone(), DcId(dc), id).unwrap();
    s.timeout = Duration::from_secs(2);
    s
}

/// A client of DC0 issuing write-only transactions back to back, each over
/// the hot keys and fresh keys of its own, until told to stop.
async fn wot_writer(cluster: Arc<causeway_net::Cluster>, shared: SharedWots, hot: Vec<Bytes>, writer: u32) {
    let mut session = None;
    loop {
        let s = session.get_or_insert_with(|| eiger_session(&cluster, 0, 100 + writer));
        // Numbered across writers and scenarios: every key is written once.
        let (idx, keys, value) = {
            let mut sh = shared.lock().unwrap();
            if sh.stop {
                return;
            }
            let idx = sh.groups.len();
            let keys = keys_on_each_partition(&cluster, &format!("g{idx}"), 2);
            let value = Bytes::from(format!("wot{idx}"));
            sh.groups.push(WotGroup { keys: keys.clone(), value: value.clone(), state: WotState::InFlight });
            (idx, keys, value)
        };
        let writes = hot.iter().chain(&keys).map(|k| (k.clone(), value.clone())).collect();
        let ok = s.wot(writes).await.is_ok();
        {
            let mut sh = shared.lock().unwrap();
            sh.groups[idx].state = if ok { WotState::Acked } else { WotState::Failed };
            sh.acked_in_scenario += usize::from(ok);
        }
        if !ok {
            // A server is down or restarting: a new session after a pause.
            session = None;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A client of `dc` reading, in one read-only transaction, the hot keys,
/// the newest transactions (most still in flight: their writes pending in
/// DC0, or held in DC1) and a few older ones, and recording any answer
/// that shows a transaction half-applied.
async fn wot_reader(cluster: Arc<causeway_net::Cluster>, shared: SharedWots, hot: Vec<Bytes>, dc: u16) {
    let mut session = None;
    loop {
        let groups: Vec<(Vec<Bytes>, Bytes)> = {
            let sh = shared.lock().unwrap();
            if sh.stop {
                return;
            }
            let n = sh.groups.len();
            let mut pick: Vec<usize> = (n.saturating_sub(4)..n).collect();
            if n > 0 {
                pick.extend((0..2).map(|_| rand::random_range(0..n)));
                pick.sort_unstable();
                pick.dedup();
            }
            pick.into_iter().map(|i| (sh.groups[i].keys.clone(), sh.groups[i].value.clone())).collect()
        };
        let keys: Vec<Bytes> = hot.iter().chain(groups.iter().flat_map(|(k, _)| k)).cloned().collect();
        let s = session.get_or_insert_with(|| eiger_session(&cluster, dc, 200 + u32::from(dc)));
        match s.rot(keys).await {
            Ok(got) => {
                let mut sh = shared.lock().unwrap();
                sh.rots_ok[dc as usize] += 1;
                if let Some(what) = half_visible(hot.len(), &groups, &got) {
                    let v = format!("{}: a read-only transaction in dc{dc} during the crash: {what}", sh.scenario);
                    sh.violations.push(v);
                }
            }
            Err(_) => {
                session = None;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// After a scenario, with no transaction running: every acknowledged
/// transaction is fully present in DC0 at once (a read that errs because a
/// server is still starting is retried), no transaction is half-visible
/// in either DC, and DC1 converges to DC0 (every acknowledged transaction
/// arrives whole, an unacknowledged one is there exactly if DC0 has it,
/// the hot keys agree) within `deadline`.
async fn check_wots(cluster: &Arc<causeway_net::Cluster>, shared: &SharedWots, hot: &[Bytes], deadline: Instant) {
    let (scenario, groups) = {
        let sh = shared.lock().unwrap();
        let groups: Vec<(Vec<Bytes>, Bytes, WotState)> =
            sh.groups.iter().map(|g| (g.keys.clone(), g.value.clone(), g.state)).collect();
        (sh.scenario, groups)
    };
    let mut sessions = [None, None];
    // Reads `keys` in `dc`, retrying errors until the deadline.
    async fn rot_until(
        cluster: &Arc<causeway_net::Cluster>,
        sessions: &mut [Option<Session<Eiger>>; 2],
        dc: u16,
        keys: &[Bytes],
        deadline: Instant,
        scenario: &str,
    ) -> Vec<Option<Bytes>> {
        loop {
            let s = sessions[dc as usize].get_or_insert_with(|| eiger_session(cluster, dc, 300 + u32::from(dc)));
            match s.rot(keys.to_vec()).await {
                Ok(got) => return got,
                Err(e) => {
                    assert!(
                        Instant::now() < deadline,
                        "{scenario}: dc{dc} never answered a read after the restart: {e}"
                    );
                    sessions[dc as usize] = None;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    for chunk in groups.chunks(16) {
        let pairs: Vec<(Vec<Bytes>, Bytes)> = chunk.iter().map(|(k, v, _)| (k.clone(), v.clone())).collect();
        let keys: Vec<Bytes> = hot.iter().chain(chunk.iter().flat_map(|(k, _, _)| k)).cloned().collect();
        loop {
            let got0 = rot_until(cluster, &mut sessions, 0, &keys, deadline, scenario).await;
            if let Some(what) = half_visible(hot.len(), &pairs, &got0) {
                panic!("{scenario}: after the restart, in dc0: {what}");
            }
            let mut at = hot.len();
            for (keys, value, state) in chunk {
                if *state == WotState::Acked && got0[at].is_none() {
                    panic!("{scenario}: acknowledged transaction {value:?} (keys {keys:?}) lost in dc0");
                }
                at += keys.len();
            }
            let got1 = rot_until(cluster, &mut sessions, 1, &keys, deadline, scenario).await;
            if let Some(what) = half_visible(hot.len(), &pairs, &got1) {
                panic!("{scenario}: after the restart, in dc1: {what}");
            }
            if got1 == got0 {
                break;
            }
            if Instant::now() >= deadline {
                let mut at = hot.len();
                for (keys, value, state) in chunk {
                    if got0[at] != got1[at] {
                        panic!(
                            "{scenario}: {state:?} transaction {value:?} (keys {keys:?}) is {} in dc0 but {} in dc1 \
                             at the deadline: never replicated whole",
                            if got0[at].is_some() { "present" } else { "absent" },
                            if got1[at].is_some() { "present" } else { "absent" },
                        );
                    }
                    at += keys.len();
                }
                panic!("{scenario}: the hot keys never converged: dc0 {:?}, dc1 {:?}", &got0[..2], &got1[..2]);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Eiger's write-only transactions (Lloyd et al., "Stronger Semantics for
/// Low-Latency Geo-Replicated Storage", NSDI 2013, §5.4: 2PC-PCI) survive
/// `kill -9` of any participant: two DCs × two partitions, one server
/// process each, every transaction writing two keys on each partition
/// (and one hot key on each, which every transaction overwrites), so it
/// has a coordinator and a cohort on different processes in each DC.
/// While four clients of DC0 issue transactions back to back and a reader
/// in each DC runs read-only transactions over the newest and some older
/// transactions' keys, one process is killed and restarted:
///
/// - (a) and (b): DC0's server of partition 0, then of partition 1. The
///   client library picks each transaction's coordinator key at random
///   (§5.4), so each kill catches the killed server as the coordinator of
///   some transactions in flight and as a cohort of others;
/// - (c): DC1's server of partition 0, with a 400 ms round trip between
///   the DCs, so that replicated transactions are held or prepared there
///   (their commit from DC0 still on its way) when it is killed. It stays
///   down 1.5 s while DC0 goes on committing, so it restarts with a
///   backlog of transactions, each waiting for its session's previous one
///   (§5.4's one-hop dependency), that DC1 must work off within the
///   deadline. The 1.5 s downtime is deliberate: it is what exposed
///   `advance_txns` scanning every held transaction after every message
///   (quadratic in the backlog). With that scan (the protocol code before
///   the `dirty_txns` change) this scenario fails: the restarted server
///   does not even answer a client's hello within 2 s, and the check below
///   panics with "dc1 never answered a read after the restart"; (a) and (b)
///   pass with either.
///
/// No read ever sees a transaction half-applied (in either DC, during the
/// crash or after it); after each restart every acknowledged transaction
/// is present in DC0, and DC1 converges to DC0 within a deadline. The
/// scenarios run one after the other on the same cluster, so a later
/// crash must not lose what earlier ones left.
#[test]
fn eiger_wot_survives_kill_9_of_any_participant() {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-eiger-wot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config_path = dir.join("cluster.toml");
    let ports: [u16; 4] = free_ports();
    let nodes_list = ports.iter().map(|p| format!("\"127.0.0.1:{p}\"")).collect::<Vec<_>>().join(", ");
    // Snapshots small enough that the log is compacted during the test, so
    // recovery also reads transaction state from a snapshot.
    let text = format!(
        "cluster_id = \"eiger-wot-crash\"\nprotocol = \"eiger\"\ndata_dir = \"{}\"\nnodes = [{nodes_list}]\n\
         [topology]\ndcs = 2\npartitions = 2\n[tls]\ndir = \"certs\"\n[storage]\nfsync = \"always\"\n\
         snapshot_bytes = 65536\ncheckpoint_slice_us = 0\n[wan]\nrtt_ms = [[0, 400], [400, 0]]\n",
        dir.join("data").display(),
    );
    std::fs::write(&config_path, text).unwrap();
    causeway_net::tls::generate(&dir.join("certs"), "eiger-wot-crash", 4, &causeway_net::tls::Validity { days: 1 })
        .unwrap();
    let cluster = Arc::new(ClusterConfig::load(&config_path).unwrap().validate().unwrap());
    let server = |dc: u16, p: u32| cluster.topology.server(DcId(dc), PartitionId(p)).unwrap().0 as usize;
    let mut nodes = Nodes((0..4).map(|n| start(&config_path, n)).collect());
    let hot = keys_on_each_partition(&cluster, "hot", 1);
    let shared: SharedWots = Arc::new(std::sync::Mutex::new(WotShared {
        groups: Vec::new(),
        scenario: "startup",
        violations: Vec::new(),
        acked_in_scenario: 0,
        rots_ok: [0, 0],
        stop: false,
    }));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let started = Instant::now();
    // (scenario, the server killed, how long it stays down).
    let scenarios = [
        ("(a) kill -9 of dc0's partition-0 server (coordinator or cohort)", server(0, 0), 300),
        ("(b) kill -9 of dc0's partition-1 server (cohort or coordinator)", server(0, 1), 300),
        ("(c) kill -9 of dc1's partition-0 server (remote coordinator or cohort)", server(1, 0), 1_500),
    ];
    for (scenario, victim, down_ms) in scenarios {
        {
            let mut sh = shared.lock().unwrap();
            sh.scenario = scenario;
            sh.acked_in_scenario = 0;
            sh.rots_ok = [0, 0];
            sh.stop = false;
        }
        let mut tasks = Vec::new();
        for w in 0..4 {
            tasks.push(rt.spawn(wot_writer(cluster.clone(), shared.clone(), hot.clone(), w)));
        }
        for dc in 0..2 {
            tasks.push(rt.spawn(wot_reader(cluster.clone(), shared.clone(), hot.clone(), dc)));
        }
        let acked = || shared.lock().unwrap().acked_in_scenario;
        // Load for a while before the kill (long enough that transactions
        // are pending in DC1, behind the WAN delay), then kill -9.
        let phase = Instant::now();
        while acked() < 30 || phase.elapsed() < Duration::from_millis(600) {
            assert!(
                phase.elapsed() < Duration::from_secs(20),
                "{scenario}: only {} transactions acknowledged before the kill",
                acked()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        nodes.0[victim].kill().unwrap(); // SIGKILL
        nodes.0[victim].wait().unwrap();
        std::thread::sleep(Duration::from_millis(down_ms));
        nodes.0[victim] = start(&config_path, victim as u32);
        let mark = acked();
        let restarted = Instant::now();
        while acked() < mark + 30 {
            assert!(
                restarted.elapsed() < Duration::from_secs(20),
                "{scenario}: the cluster did not resume acknowledging transactions after the restart ({} since)",
                acked() - mark
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        shared.lock().unwrap().stop = true;
        for t in tasks {
            rt.block_on(t).unwrap();
        }
        {
            let sh = shared.lock().unwrap();
            assert!(
                sh.violations.is_empty(),
                "{} half-visible reads, the first: {}",
                sh.violations.len(),
                sh.violations[0]
            );
            assert!(
                sh.rots_ok.iter().all(|&n| n > 0),
                "{scenario}: no read-only transaction answered in some DC: {:?}",
                sh.rots_ok
            );
        }
        rt.block_on(check_wots(&cluster, &shared, &hot, Instant::now() + Duration::from_secs(15)));
        let sh = shared.lock().unwrap();
        let count = |s| sh.groups.iter().filter(|g| g.state == s).count();
        eprintln!(
            "{scenario}: {} acknowledged, {} failed so far; {:?} reads in dc0/dc1; {:.1} s",
            count(WotState::Acked),
            count(WotState::Failed),
            sh.rots_ok,
            started.elapsed().as_secs_f64()
        );
    }
    drop(nodes);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stabilization protocol's snapshot leaves out the superseded versions
/// its GC would drop, and Eiger's every superseded version
/// ([`causeway_core::Server::snapshot_floor`]); what it keeps must still
/// hold each key's newest write. For each of CausalSpartanX, Cure,
/// Contrarian and Eiger: overwrite a few keys for longer than the GC's
/// grace (1 s) while filler writes compact the log every 16 KiB, `kill -9`
/// DC 0's server, restart it, and read every key's last acknowledged value back.
#[test]
fn a_snapshot_cut_at_the_gc_horizon_keeps_every_keys_newest_write() {
    for p in [ProtocolName::CausalSpartanX, ProtocolName::Cure, ProtocolName::Contrarian, ProtocolName::Eiger] {
        let dir =
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-cut-{p}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config_path = dir.join("cluster.toml");
        let [a, b] = free_ports();
        let text = format!(
            "cluster_id = \"cut-test\"\nprotocol = \"{p}\"\ndata_dir = \"{}\"\nnodes = [\"127.0.0.1:{a}\", \"127.0.0.1:{b}\"]\n\
             [topology]\ndcs = 2\npartitions = 1\n[tls]\nplaintext = true\n[storage]\nfsync = \"always\"\n\
             snapshot_bytes = 16384\n",
            dir.join("data").display(),
        );
        std::fs::write(&config_path, text).unwrap();
        let cluster = Arc::new(ClusterConfig::load(&config_path).unwrap().validate().unwrap());
        let mut nodes = Nodes(vec![start(&config_path, 0), start(&config_path, 1)]);
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            with_protocol!(p, P => {
                let hot: Vec<Bytes> = (0..4).map(|i| Bytes::from(format!("hot{i}"))).collect();
                let mut last: Vec<Option<Bytes>> = vec![None; hot.len()];
                // Until the servers listen.
                let deadline = Instant::now() + Duration::from_secs(10);
                let mut s = loop {
                    let mut s = Session::<P>::new(cluster.clone(), DcId(0), 1).unwrap();
                    match s.put(Bytes::from_static(b"ready"), Bytes::from_static(b"1")).await {
                        Ok(()) => break s,
                        Err(e) => assert!(Instant::now() < deadline, "{p}: the cluster never took a write: {e}"),
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                };
                let started = Instant::now();
                let mut round = 0u32;
                while started.elapsed() < Duration::from_millis(2_500) {
                    for (i, k) in hot.iter().enumerate() {
                        let v = Bytes::from(format!("{k:?} round {round}"));
                        s.put(k.clone(), v.clone()).await.unwrap_or_else(|e| panic!("{p}: put {k:?}: {e}"));
                        last[i] = Some(v);
                    }
                    for j in 0..20 {
                        let f = Bytes::from(format!("filler{round}-{j}"));
                        s.put(f.clone(), f).await.unwrap_or_else(|e| panic!("{p}: filler put: {e}"));
                    }
                    round += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                nodes.0[0].kill().unwrap(); // SIGKILL
                nodes.0[0].wait().unwrap();
                nodes.0[0] = start(&config_path, 0);
                let deadline = Instant::now() + Duration::from_secs(10);
                let mut r = loop {
                    match Session::<P>::new(cluster.clone(), DcId(0), 2) {
                        Ok(r) => break r,
                        Err(e) => assert!(Instant::now() < deadline, "{p}: no session after the restart: {e}"),
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                };
                for (k, v) in hot.iter().zip(&last) {
                    let got = loop {
                        match r.get(k.clone()).await {
                            Ok(got) => break got,
                            Err(e) => {
                                assert!(Instant::now() < deadline, "{p}: get {k:?} after the restart: {e}");
                                r = Session::<P>::new(cluster.clone(), DcId(0), 2).unwrap();
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                        }
                    };
                    assert_eq!(got.as_ref(), v.as_ref(), "{p}: {k:?} after the restart is not its last write");
                }
            })
        });
        drop(nodes);
        assert!(dir.join("data/node-0/snapshot").exists(), "{p}: the log was never compacted");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
