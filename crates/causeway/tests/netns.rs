//! Real hosts on one machine: each DC in its own Linux network namespace,
//! joined by a veth pair with a netem delay, separate server processes, and
//! the CLI as the client inside each namespace. Checks replication and
//! causal order across them.
//!
//! Needs root and `ip` (iproute2); without them the test says why and
//! returns. Without the netem qdisc (a kernel module some sandboxes lack) it
//! injects the delay in the transport instead (`[wan]`) and says so. All traffic stays inside the
//! namespaces it creates.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn sh(args: &[&str]) -> Output {
    Command::new(args[0]).args(&args[1..]).output().expect("run a command")
}

struct Namespaces {
    names: Vec<String>,
    veth: String,
    children: Vec<Child>,
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in &self.names {
            let _ = sh(&["ip", "netns", "del", n]);
        }
        let _ = sh(&["ip", "link", "del", &self.veth]);
    }
}

fn in_ns(ns: &str, args: &[&str]) -> Output {
    let bin = env!("CARGO_BIN_EXE_causeway");
    let mut v = vec!["ip", "netns", "exec", ns, bin];
    v.extend_from_slice(args);
    sh(&v)
}

#[test]
fn two_dcs_in_network_namespaces() {
    let root = sh(&["id", "-u"]).stdout == b"0\n";
    if !root {
        eprintln!("SKIPPED two_dcs_in_network_namespaces: needs root to create network namespaces");
        return;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        eprintln!("SKIPPED two_dcs_in_network_namespaces: `ip` (iproute2) is not installed");
        return;
    }
    let pid = std::process::id();
    let ns = [format!("cw{pid}a"), format!("cw{pid}b")];
    let veth = format!("cw{pid}x");
    let peer = format!("cw{pid}y");
    let mut guard = Namespaces { names: Vec::new(), veth: veth.clone(), children: Vec::new() };
    for n in &ns {
        let o = sh(&["ip", "netns", "add", n]);
        if !o.status.success() {
            eprintln!(
                "SKIPPED two_dcs_in_network_namespaces: cannot create a namespace: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            return;
        }
        guard.names.push(n.clone());
        sh(&["ip", "netns", "exec", n, "ip", "link", "set", "lo", "up"]);
    }
    assert!(sh(&["ip", "link", "add", &veth, "type", "veth", "peer", "name", &peer]).status.success());
    assert!(sh(&["ip", "link", "set", &veth, "netns", &ns[0]]).status.success());
    assert!(sh(&["ip", "link", "set", &peer, "netns", &ns[1]]).status.success());
    for (n, dev, ip) in [(&ns[0], &veth, "10.231.0.1/24"), (&ns[1], &peer, "10.231.0.2/24")] {
        assert!(sh(&["ip", "netns", "exec", n, "ip", "addr", "add", ip, "dev", dev]).status.success());
        assert!(sh(&["ip", "netns", "exec", n, "ip", "link", "set", dev, "up"]).status.success());
    }
    let mut delayed = true;
    for (n, dev) in [(&ns[0], &veth), (&ns[1], &peer)] {
        let o = sh(&["ip", "netns", "exec", n, "tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", "20ms"]);
        delayed &= o.status.success();
    }
    if !delayed {
        eprintln!(
            "NOTE: the netem qdisc is unavailable on this kernel; injecting the 40 ms round trip in the transport instead"
        );
    }

    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-netns-{pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("cluster.toml");
    std::fs::write(
        &config,
        format!(
            "cluster_id = \"netns\"\nprotocol = \"causalspartanx\"\ndata_dir = \"{}\"\n\
             nodes = [\"10.231.0.1:7400\", \"10.231.0.1:7401\", \"10.231.0.2:7400\", \"10.231.0.2:7401\"]\n\
             [topology]\ndcs = 2\npartitions = 2\n[tls]\ndir = \"certs\"\n{}",
            dir.join("data").display(),
            if delayed { "" } else { "[wan]\nrtt_ms = [[0, 40], [40, 0]]\n" }
        ),
    )
    .unwrap();
    causeway_net::tls::generate(&dir.join("certs"), "netns", 4, &causeway_net::tls::Validity { days: 1 }).unwrap();
    let cfg = config.to_str().unwrap();
    let bin = env!("CARGO_BIN_EXE_causeway");
    for (node, n) in [(0, &ns[0]), (1, &ns[0]), (2, &ns[1]), (3, &ns[1])] {
        let c = Command::new("ip")
            .args(["netns", "exec", n, bin, "server", "--config", cfg, "--node", &node.to_string()])
            .env("CAUSEWAY_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        guard.children.push(c);
    }
    std::thread::sleep(Duration::from_millis(500));
    let put = |k: &str, v: &str| {
        let o = in_ns(&ns[0], &["put", k, v, "--config", cfg, "--dc", "0"]);
        assert!(o.status.success(), "put failed: {}", String::from_utf8_lossy(&o.stderr));
    };
    put("photo", "p1");
    put("album", "a1");
    let start = Instant::now();
    loop {
        let o = in_ns(&ns[1], &["rot", "album", "photo", "--config", cfg, "--dc", "1"]);
        assert!(o.status.success(), "rot failed: {}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        if out.contains("album = a1") {
            assert!(out.contains("photo = p1"), "album visible in dc1 without its photo:\n{out}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(15), "the write never reached dc1; last read:\n{out}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = in_ns(&ns[1], &["get", "photo", "--config", cfg, "--dc", "1"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "p1");
    drop(guard);
    let _ = std::fs::remove_dir_all(&dir);
}
