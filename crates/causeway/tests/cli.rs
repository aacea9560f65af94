//! The client commands as an operator uses them: deadlines, exit codes,
//! values from stdin or a file, JSON, DCs by name, a closed pipe.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_causeway"));
    c.env("CAUSEWAY_LOG", "warn");
    c
}

/// Wait for a child, killing it (and failing) if it outlives `limit`.
fn wait(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the command hung for more than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child =
        bin().args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(b) = stdin {
        input.write_all(b).unwrap();
    }
    drop(input);
    wait(child, Duration::from_secs(30))
}

fn config(dir: &Path, addr: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("cluster.toml");
    let text = format!(
        "cluster_id = \"cli\"\nprotocol = \"eventual\"\ndata_dir = \"data\"\nnodes = [\"{addr}\"]\n\
         [topology]\ndcs = 1\npartitions = 1\ndc_names = [\"lisbon\"]\n[storage]\nfsync = \"never\"\n\
         [tls]\ndir = \"certs\"\n"
    );
    std::fs::write(&path, text).unwrap();
    // Certificates as an operator makes them.
    let o = run(&["certs", "--config", path.to_str().unwrap()], None);
    assert!(o.status.success(), "{o:?}");
    assert!(dir.join("certs/node-0.pem").exists() && dir.join("certs/client.key").exists());
    path
}

fn tmp(name: &str) -> PathBuf {
    let d =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn get_against_a_node_that_never_answers_fails_within_its_timeout() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    // Accept and hold connections without a word.
    std::thread::spawn(move || {
        let mut keep = Vec::new();
        for s in l.incoming() {
            keep.push(s);
        }
    });
    let cfg = config(&tmp("silent"), &addr);
    let cfg = cfg.to_str().unwrap();
    for args in [
        vec!["get", "k", "--config", cfg, "--timeout-ms", "300"],
        vec!["put", "k", "v", "--config", cfg, "--timeout-ms", "300"],
        vec!["rot", "a", "b", "--config", cfg, "--timeout-ms", "300"],
    ] {
        let o = run(&args, None);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("did not answer the hello"), "{args:?}: {err}");
    }
    let o = wait(
        bin()
            .args(["bench", "--config", cfg, "--seconds", "1", "-c", "2", "--timeout-ms", "300"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        Duration::from_secs(30),
    );
    // A bench whose every operation failed is an error, not a table of zeros.
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("every operation failed"), "{o:?}");
    // `status` names the silent node as down and exits 4, within its deadline.
    let o = run(&["status", "--config", cfg, "--timeout-ms", "300"], None);
    assert_eq!(o.status.code(), Some(4), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("DOWN"), "{o:?}");
}

struct Server(Child);

/// Node 0 of the cluster `cfg` names, started and serving (a write
/// succeeds), within 20 s.
fn serving(cfg: &str) -> Server {
    let server = Server(
        bin()
            .args(["server", "--config", cfg, "--node", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    while !run(&["put", "ready", "1", "--config", cfg], None).status.success() {
        assert!(start.elapsed() < Duration::from_secs(20), "the server never came up");
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_client_commands_as_scripts_use_them() {
    let dir = tmp("ops");
    let cfg = config(&dir, &format!("127.0.0.1:{}", free_port()));
    let cfg = cfg.to_str().unwrap();
    let _server = serving(cfg);
    // `status` shows the node up, and says so in JSON too.
    let o = run(&["status", "--config", cfg], None);
    assert!(o.status.success(), "{o:?}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("lisbon") && out.contains(" up"), "{out}");
    let o = run(&["status", "--config", cfg, "--json"], None);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j[0]["up"], true, "{j}");
    // A value from stdin, one from a file, and --dc by name.
    let o = run(&["put", "a", "-", "--config", cfg], Some(b"from\nstdin"));
    assert!(o.status.success(), "{o:?}");
    std::fs::write(dir.join("v.bin"), b"from a file").unwrap();
    let file_arg = format!("@{}", dir.join("v.bin").display());
    assert!(run(&["put", "b", &file_arg, "--config", cfg, "--dc", "lisbon"], None).status.success());
    let o = run(&["get", "a", "--config", cfg], None);
    assert_eq!(o.stdout, b"from\nstdin\n");
    let o = run(&["get", "b", "--config", cfg, "--json"], None);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j, serde_json::json!({ "key": "b", "found": true, "value": "from a file" }));
    // A missing key is not a value: exit status 3, and found=false in JSON.
    let o = run(&["get", "nope", "--config", cfg], None);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    assert!(o.stdout.is_empty());
    let o = run(&["get", "nope", "--config", cfg, "--json"], None);
    assert_eq!(o.status.code(), Some(3));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["found"], false);
    let o = run(&["put", "c", "1", "--config", cfg, "--json"], None);
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["ok"], true);
    let o = run(&["rot", "a", "nope", "--config", cfg, "--json"], None);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j[1], serde_json::json!({ "key": "nope", "found": false, "value": null }));
    // A delete: the key reads as missing afterwards (exit 3), in a ROT too.
    let o = run(&["del", "c", "--config", cfg], None);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(o.stdout, b"ok\n");
    assert_eq!(run(&["get", "c", "--config", cfg], None).status.code(), Some(3));
    let o = run(&["del", "a", "--config", cfg, "--json"], None);
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["deleted"], true);
    let o = run(&["rot", "a", "b", "--config", cfg, "--json"], None);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j[0]["found"], false, "{j}");
    assert_eq!(j[1]["found"], true, "{j}");
    // An unknown DC name is named in the error.
    let o = run(&["get", "a", "--config", cfg, "--dc", "atlantis"], None);
    assert!(String::from_utf8_lossy(&o.stderr).contains("atlantis"), "{o:?}");
    // A reader that closed the pipe (`| head -c 0`) makes no panic.
    let big = "x".repeat(200_000);
    assert!(run(&["put", "big", "-", "--config", cfg], Some(big.as_bytes())).status.success());
    let mut child =
        bin().args(["get", "big", "--config", cfg]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    let o = wait(child, Duration::from_secs(30));
    assert!(o.status.success(), "{o:?}");
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// At the file-descriptor limit the accept loop backs off and logs once per
/// episode, instead of spinning a core and logging thousands of lines a
/// second; once descriptors are free again it serves.
#[test]
fn a_server_out_of_file_descriptors_backs_off_and_recovers() {
    let dir = tmp("fds");
    let addr = format!("127.0.0.1:{}", free_port());
    let cfg = config(&dir, &addr);
    let script =
        format!("ulimit -n 48 && exec {} server --config {} --node 0", env!("CARGO_BIN_EXE_causeway"), cfg.display());
    let log_path = dir.join("server.log");
    let server = Server(
        Command::new("sh")
            .args(["-c", &script])
            .env("CAUSEWAY_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(start.elapsed() < Duration::from_secs(20), "the server never came up");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Hold more connections than it has descriptors, for two seconds.
    let mut flood = Vec::new();
    for _ in 0..100 {
        if let Ok(s) = std::net::TcpStream::connect(&addr) {
            flood.push(s);
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    drop(flood);
    let cfg_s = cfg.to_str().unwrap();
    let start = Instant::now();
    while !run(&["put", "after", "1", "--config", cfg_s, "--timeout-ms", "2000"], None).status.success() {
        assert!(start.elapsed() < Duration::from_secs(30), "the server never served again");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(server);
    let log = std::fs::read_to_string(&log_path).unwrap();
    // Count the accept loop's own messages, not every line its module logs
    // (each refused handshake of the flood is logged once, on its own).
    let accept_lines =
        log.lines().filter(|l| l.contains("accept failed") || l.contains("accepting connections again")).count();
    assert!(log.contains("accept failed"), "the descriptor limit was never reached:\n{log}");
    assert!(accept_lines < 20, "{accept_lines} lines about accept errors:\n{}", &log[..log.len().min(2000)]);
}

/// Tokens as an operator uses them: `[auth]` in the config, `token add`
/// prints a secret once, clients pass it by flag or environment, a
/// read-only token cannot write, `status` still sees a node that wants a
/// token, `revoke` takes effect without a restart.
#[test]
fn tokens_gate_what_clients_may_do() {
    let dir = tmp("tokens");
    let cfg = config(&dir, &format!("127.0.0.1:{}", free_port()));
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("[auth]\ntokens = \"tokens.toml\"\n");
    std::fs::write(&cfg, text).unwrap();
    let cfg = cfg.to_str().unwrap();
    let add = |name: &str, role: &str| {
        let o = run(&["token", "add", name, "--role", role, "--config", cfg], None);
        assert!(o.status.success(), "{o:?}");
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    let rw = add("app", "read-write");
    let ro = add("report", "read-only");
    let o = run(&["token", "add", "bad", "--role", "root", "--config", cfg], None);
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown role \"root\""), "{o:?}");
    let stored = std::fs::read_to_string(dir.join("tokens.toml")).unwrap();
    assert!(!stored.contains(&rw) && stored.contains("report"), "only digests are stored");
    let _server = Server(
        bin()
            .args(["server", "--config", cfg, "--node", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    while !run(&["put", "k", "1", "--config", cfg, "--token", &rw], None).status.success() {
        assert!(start.elapsed() < Duration::from_secs(20), "the server never came up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = run(&["get", "k", "--config", cfg], None);
    assert!(String::from_utf8_lossy(&o.stderr).contains("requires an access token"), "{o:?}");
    let o = bin()
        .args(["get", "k", "--config", cfg])
        .env("CAUSEWAY_TOKEN", &ro)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(o.stdout, b"1\n", "{o:?}");
    let o = run(&["put", "k", "2", "--config", cfg, "--token", &ro], None);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("read-only"), "{o:?}");
    assert_eq!(run(&["get", "k", "--config", cfg, "--token", &rw], None).stdout, b"1\n");
    // A node that wants a token is up, not down.
    let o = run(&["status", "--config", cfg, "--json"], None);
    assert!(o.status.success(), "{o:?}");
    let o = run(&["token", "list", "--config", cfg, "--json"], None);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j.as_array().unwrap().len(), 2, "{j}");
    assert!(run(&["token", "revoke", "app", "--config", cfg], None).status.success());
    // Nodes notice the file changed by its modification time.
    let later = std::time::SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options().write(true).open(dir.join("tokens.toml")).unwrap().set_modified(later).unwrap();
    let o = run(&["get", "k", "--config", cfg, "--token", &rw], None);
    assert!(String::from_utf8_lossy(&o.stderr).contains("not valid here"), "{o:?}");
}

/// `--json` puts only JSON on stdout, whatever else the command says.
#[test]
fn json_output_is_only_json() {
    let o = run(&["torture", "-p", "eventual", "--runs", "2", "--seed", "5", "--json"], None);
    assert!(o.status.success(), "{o:?}");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is one JSON document");
    assert_eq!(j[0]["protocol"], "eventual");
    assert_eq!(j[0]["runs"], 2);
    assert_eq!(j[0]["failed_seeds"], serde_json::json!([]));
    let dir = tmp("json");
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("c.toml");
    std::fs::write(
        &cfg,
        "cluster_id = \"j\"\nprotocol = \"eventual\"\nnodes = [\"127.0.0.1:1\"]\n[topology]\ndcs = 1\npartitions = 1\n\
         [tls]\ndir = \"certs\"\n",
    )
    .unwrap();
    let o = run(&["certs", "--config", cfg.to_str().unwrap(), "--json"], None);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    assert_eq!(j["nodes"], 1, "{j}");
    // A YCSB-style mixed phase after the load phase.
    let o = run(
        &["bench", "--workload", "a", "--seconds", "1", "-c", "4", "--keys", "100", "--fsync", "never", "--json"],
        None,
    );
    assert!(o.status.success(), "{o:?}");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    assert!(j["mixed"]["throughput_ops_s"].as_f64().unwrap() > 0.0, "{j}");
    assert!(j["mixed"]["latency"]["get"].is_object() && j["mixed"]["latency"]["put"].is_object(), "{j}");
    let o = run(&["bench", "--workload", "z"], None);
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected a, b or c"), "{o:?}");
}

/// Eiger's column families from the command line: columns of one row
/// written at once and read back by name, a slice, a counter, a column
/// delete, and the typed refusals (an unknown family, `add` to a regular
/// column, `put` to a counter); a plain `put k v` / `get k` still works;
/// `wot` read back by `rot`, and a malformed `wot` refused whole.
/// The eventual baseline refuses columns by name.
#[test]
fn eiger_columns_counters_and_slices_from_the_cli() {
    let dir = tmp("columns");
    let cfg = config(&dir, &format!("127.0.0.1:{}", free_port()));
    let text = std::fs::read_to_string(&cfg).unwrap().replace("protocol = \"eventual\"", "protocol = \"eiger\"");
    std::fs::write(&cfg, text).unwrap();
    let cfg = cfg.to_str().unwrap();
    let _server = serving(cfg);
    let ok = |args: &[&str]| {
        let mut a = args.to_vec();
        a.extend(["--config", cfg]);
        let o = run(&a, None);
        assert!(o.status.success(), "{args:?}: {o:?}");
        String::from_utf8(o.stdout).unwrap()
    };
    assert_eq!(ok(&["get", "ready"]), "1\n", "a plain key still works");
    assert_eq!(ok(&["get", "ready", "default:value"]), "default:value = 1\n", "it is the default column");
    assert_eq!(ok(&["put", "alice", "default:town=Rome", "default:job=chef", "default:zoo=z"]), "ok\n");
    assert_eq!(ok(&["get", "alice", "default:town", "default:job"]), "default:town = Rome\ndefault:job = chef\n");
    assert_eq!(ok(&["get", "alice", "default", "--slice", "a:u:2"]), "default:job = chef\ndefault:town = Rome\n");
    assert_eq!(ok(&["get", "alice", "default", "--slice", "k::"]), "default:town = Rome\ndefault:zoo = z\n");
    assert_eq!(ok(&["add", "alice", "counters:likes", "5"]), "ok\n");
    assert_eq!(ok(&["add", "alice", "counters:likes", "-2"]), "ok\n");
    assert_eq!(ok(&["get", "alice", "counters:likes"]), "counters:likes = 3\n");
    assert_eq!(ok(&["del", "alice", "default:job"]), "ok\n");
    assert_eq!(ok(&["get", "alice", "default"]), "default:town = Rome\ndefault:zoo = z\n", "deleted: stripped");
    assert_eq!(ok(&["get", "alice", "default:job"]), "default:job = (absent)\n");
    let o = run(&["get", "alice", "default:job", "--json", "--config", cfg], None);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j[0]["found"], false, "{j}");
    for (args, why) in [
        (&["put", "alice", "nosuch:c=1"][..], "unknown column family"),
        (&["get", "alice", "nosuch"][..], "unknown column family"),
        (&["add", "alice", "default:town", "1"][..], "not a counter"),
        (&["put", "alice", "counters:likes=1"][..], "is a counter"),
        (&["add", "alice", "nocolon", "1"][..], "FAMILY:COLUMN"),
    ] {
        let mut a = args.to_vec();
        a.extend(["--config", cfg]);
        let o = run(&a, None);
        assert!(!o.status.success(), "{args:?} must fail");
        assert!(String::from_utf8_lossy(&o.stderr).contains(why), "{args:?}: {o:?}");
    }
    assert_eq!(ok(&["get", "alice", "counters:likes"]), "counters:likes = 3\n", "nothing applied, still serving");

    // A write-only transaction (2PC-PCI over whichever servers hold the
    // keys) read back with a read-only transaction; a WOT that writes one
    // key twice, or over MAX_WOT_KEYS keys, is refused whole.
    assert_eq!(ok(&["wot", "x=1", "y=2", "z=3"]), "ok\n");
    let o = ok(&["rot", "x", "y", "z", "--json"]);
    let j: serde_json::Value = serde_json::from_str(&o).unwrap();
    let values: Vec<&str> = j.as_array().unwrap().iter().map(|e| e["value"].as_str().unwrap()).collect();
    assert_eq!(values, ["1", "2", "3"], "{j}");
    let max = causeway_protocols::eiger::MAX_WOT_KEYS;
    let many: Vec<String> = (0..=max).map(|i| format!("w{i}=v")).collect();
    let too_many: Vec<&str> = ["wot"].into_iter().chain(many.iter().map(|s| s.as_str())).collect();
    let too_many_why = format!("at most {max} keys, got {}", max + 1);
    for (args, why) in [(&["wot", "x=9", "q=9", "x=8"][..], "writes each key once"), (&too_many[..], &too_many_why[..])]
    {
        let mut a = args.to_vec();
        a.extend(["--config", cfg]);
        let o = run(&a, None);
        assert!(!o.status.success(), "a WOT of {} writes must fail", args.len() - 1);
        assert!(String::from_utf8_lossy(&o.stderr).contains(why), "{o:?}");
    }
    assert_eq!(ok(&["get", "x"]), "1\n", "the refused WOTs applied nothing");
    assert!(!run(&["get", "q", "--config", cfg], None).status.success(), "q was never written");
    assert!(!run(&["get", "w0", "--config", cfg], None).status.success(), "w0 was never written");
}

/// Other protocols refuse columns, counters and slices with a typed error.
#[test]
fn other_protocols_refuse_columns_by_name() {
    let dir = tmp("nocolumns");
    let cfg = config(&dir, &format!("127.0.0.1:{}", free_port()));
    let cfg = cfg.to_str().unwrap();
    let _server = serving(cfg);
    for (args, why) in [
        (&["put", "alice", "default:town=Rome"][..], "column families"),
        (&["add", "alice", "counters:likes", "1"][..], "column families"),
        (&["get", "alice", "default"][..], "does not support Slice"),
    ] {
        let mut a = args.to_vec();
        a.extend(["--config", cfg]);
        let o = run(&a, None);
        assert!(!o.status.success(), "{args:?} must fail");
        assert!(String::from_utf8_lossy(&o.stderr).contains(why), "{args:?}: {o:?}");
    }
}

/// `causeway txn` against a PaRiS node: a script commits its writes and
/// prints its reads (its own writes read back), one from standard input
/// too; a script without `commit` is aborted and fails; a typo is named
/// before anything runs; a protocol without interactive transactions
/// refuses by name.
#[test]
fn interactive_transactions_from_the_cli() {
    let dir = tmp("txn");
    let cfg = config(&dir, &format!("127.0.0.1:{}", free_port()));
    let eventual_cfg = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, eventual_cfg.replace("protocol = \"eventual\"", "protocol = \"paris\"")).unwrap();
    let cfg = cfg.to_str().unwrap();
    let _server = serving(cfg);
    let o = run(&["txn", "-e", "w a=1 b=2; r a nope; commit", "--config", cfg], None);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "a=1\nnope (none)\ncommitted (2 writes)\n");
    let o = run(&["txn", "--config", cfg], Some(b"r a\nw a=3; r a\ncommit\n"));
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "a=1\na=3\ncommitted (1 write)\n");
    assert_eq!(run(&["get", "a", "--config", cfg], None).stdout, b"3\n");
    let o = run(&["txn", "-e", "w a=4; r a b", "--config", cfg, "--json"], None);
    assert!(!o.status.success(), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("without `commit`"), "{o:?}");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j, serde_json::json!({ "read": { "a": "4", "b": "2" } }));
    assert_eq!(run(&["get", "a", "--config", cfg], None).stdout, b"3\n", "the aborted write never happened");
    let o = run(&["txn", "-e", "r a; select b", "--config", cfg], None);
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown statement `select`"), "{o:?}");
    drop(_server);

    let cfg2 = config(&tmp("txn-eventual"), &format!("127.0.0.1:{}", free_port()));
    let cfg2 = cfg2.to_str().unwrap();
    let _server = serving(cfg2);
    let o = run(&["txn", "-e", "r a; commit", "--config", cfg2], None);
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not support Interactive"), "{o:?}");
}

/// `causeway up -p nukv --replicas 3` runs a Raft group of three replicas
/// per partition per DC plus each DC's forwarder, and `get --read` / `put
/// --write` name each operation's session guarantee; a protocol that
/// promises none refuses a level above eventual by name, and a typo is
/// named with the levels there are.
#[test]
fn nukv_groups_and_per_operation_levels_from_the_cli() {
    use std::io::BufRead;
    let dir = tmp("nukv-up");
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("cluster.toml");
    let mut child = bin()
        .args(["up", "-p", "nukv", "--dcs", "2", "--partitions", "2", "--replicas", "3", "--no-wan"])
        .args(["--fsync", "never", "--json", "--data-dir"])
        .arg(dir.join("data"))
        .arg("--config-out")
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let _up = Server(child);
    let j: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    let nodes = j["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2 * (2 * 3 + 1), "3 replicas of 2 partitions and a forwarder per DC: {j}");
    assert_eq!(nodes.iter().filter(|n| n["role"].as_str().unwrap().contains("xc")).count(), 2, "{j}");
    let cfg = cfg.to_str().unwrap();
    let start = Instant::now();
    while !run(&["put", "k", "v1", "--write", "monotonic-write", "--config", cfg], None).status.success() {
        assert!(start.elapsed() < Duration::from_secs(20), "no group elected a leader");
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = run(&["put", "k", "v2", "--write", "eventual", "--config", cfg], None);
    assert!(o.status.success(), "{o:?}");
    let o = run(&["get", "k", "--read", "monotonic-read-your-write", "--config", cfg, "--dc", "1"], None);
    assert!(o.status.success() || o.status.code() == Some(3), "{o:?}");
    let o = run(&["get", "k", "--read", "ryw", "--config", cfg], None);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "v2\n", "{o:?}");
    let o = run(&["get", "k", "--read", "sometimes", "--config", cfg], None);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("monotonic-read-your-write"), "{o:?}");

    let cfg2 = config(&tmp("levels-eventual"), &format!("127.0.0.1:{}", free_port()));
    let cfg2 = cfg2.to_str().unwrap();
    let _server = serving(cfg2);
    let o = run(&["get", "k", "--read", "monotonic-read", "--config", cfg2], None);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot serve read level monotonic-read"), "{o:?}");
    assert!(run(&["put", "k", "v", "--write", "eventual", "--config", cfg2], None).status.success());
}

/// `causeway up --processes` with the endpoints line read: the child
/// (stderr into `err`), its JSON, and each node's pid.
fn up_processes(args: &[&str], dir: &Path) -> (Server, serde_json::Value, Vec<u32>, PathBuf) {
    use std::io::BufRead;
    std::fs::create_dir_all(dir).unwrap();
    let err = dir.join("up.err");
    let mut child = bin()
        .args(["up", "--processes", "--no-wan", "--fsync", "never", "--json"])
        .args(args)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--config-out")
        .arg(dir.join("cluster.toml"))
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let up = Server(child);
    let j: serde_json::Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("{e}: {line:?}; up said: {}", std::fs::read_to_string(&err).unwrap_or_default()));
    let pids: Vec<u32> = j["nodes"].as_array().unwrap().iter().map(|n| n["pid"].as_u64().unwrap() as u32).collect();
    let mut distinct = pids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), pids.len(), "one process per node: {j}");
    assert!(!pids.contains(&up.0.id()), "{j}");
    for p in &pids {
        assert!(Path::new(&format!("/proc/{p}")).exists(), "node process {p} is not running: {j}");
    }
    (up, j, pids, dir.join("cluster.toml"))
}

/// The node of `j` in DC `dc` (its name) with role `role`.
fn node_of(j: &serde_json::Value, dc: &str, role: &str) -> usize {
    j["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .position(|n| n["dc"] == dc && n["role"] == role)
        .unwrap_or_else(|| panic!("no {role} in {dc}: {j}"))
}

fn kill(signal: &str, pid: u32) {
    assert!(Command::new("kill").args([signal, &pid.to_string()]).status().unwrap().success(), "kill {signal} {pid}");
}

/// Until `get key --dc dc` reads `want`, within `limit`.
fn until_reads(cfg: &str, key: &str, dc: &str, want: &str, limit: Duration) {
    let start = Instant::now();
    loop {
        let o = run(&["get", key, "--dc", dc, "--config", cfg, "--timeout-ms", "2000"], None);
        if o.stdout == format!("{want}\n").as_bytes() {
            return;
        }
        assert!(start.elapsed() < limit, "{key} never read {want:?} in DC {dc} within {limit:?}; last: {o:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGTERM to `up` stops it and every node it started.
fn stop_up(mut up: Server, pids: &[u32]) {
    kill("-TERM", up.0.id());
    let start = Instant::now();
    let status = loop {
        if let Some(s) = up.0.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(40), "up did not stop within 40 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    for p in pids {
        assert!(!Path::new(&format!("/proc/{p}")).exists(), "node process {p} outlived up");
    }
}

/// `causeway up -p eunomiakv --processes`: the partitions and the service
/// nodes each a process of their own. `kill -9` of DC 0's leading Eunomia
/// replica does not stop writes there (a PUT answers at once), their
/// visibility in DC 1 resumes once the next replica leads, `up` names the
/// node that exited, and SIGTERM to `up` stops every node.
#[test]
fn up_processes_runs_every_node_and_service_node_as_its_own_process() {
    let dir = tmp("up-processes");
    let (up, j, pids, cfg) =
        up_processes(&["-p", "eunomiakv", "--dcs", "2", "--partitions", "1", "--service", "eunomia=2"], &dir);
    assert_eq!(pids.len(), 2 + 2 * 2 + 2, "a partition, two Eunomia replicas and a receiver per DC: {j}");
    let cfg = cfg.to_str().unwrap();
    let dc0 = j["nodes"][0]["dc"].as_str().unwrap().to_string();
    let o = run(&["put", "k", "v1", "--config", cfg], None);
    assert!(o.status.success(), "{o:?}");
    until_reads(cfg, "k", "1", "v1", Duration::from_secs(20));

    let leader = node_of(&j, &dc0, "eunomia 0");
    kill("-9", pids[leader]);
    let start = Instant::now();
    let o = run(&["put", "k", "v2", "--config", cfg, "--timeout-ms", "2000"], None);
    assert!(o.status.success(), "a write in DC 0 with its Eunomia leader dead: {o:?}");
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
    until_reads(cfg, "k", "1", "v2", Duration::from_secs(30));
    let start = Instant::now();
    let said = loop {
        let said = std::fs::read_to_string(dir.join("up.err")).unwrap();
        if said.contains(&format!("node {leader} (eunomia 0")) || start.elapsed() > Duration::from_secs(5) {
            break said;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(said.contains("exited") && said.contains(&format!("--node {leader}")), "{said}");
    stop_up(up, &pids);
}

/// `causeway up -p nukv --replicas 3 --processes`: three replica processes
/// per partition per DC and the forwarders. Each replica of DC 0's group is
/// killed (`kill -9`) in turn, so the leader is among them, and started
/// again with the command `up` prints: after each kill a write succeeds
/// once the group has a leader, and every write acknowledged so far reads
/// back.
#[test]
fn up_processes_a_nukv_group_survives_kill_9_of_each_replica() {
    let dir = tmp("up-processes-nukv");
    let (up, j, pids, cfg) = up_processes(&["-p", "nukv", "--dcs", "2", "--partitions", "1", "--replicas", "3"], &dir);
    assert_eq!(pids.len(), 2 * (3 + 1), "three replicas and a forwarder per DC: {j}");
    let cfg = cfg.to_str().unwrap();
    let dc0 = j["nodes"][0]["dc"].as_str().unwrap().to_string();
    let put = |key: &str, value: &str| {
        let start = Instant::now();
        loop {
            let o = run(&["put", key, value, "--config", cfg, "--timeout-ms", "3000"], None);
            if o.status.success() {
                return;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "no leader took {key}={value} within 30 s: {o:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    put("k0", "v0");
    let mut restarted = Vec::new();
    for r in 0..3u32 {
        let role = if r == 0 { "partition 0".to_string() } else { format!("partition 0 replica {r}") };
        let node = node_of(&j, &dc0, &role);
        kill("-9", pids[node]);
        let key = format!("k{}", r + 1);
        put(&key, &format!("v{}", r + 1));
        for w in 0..=r + 1 {
            until_reads(cfg, &format!("k{w}"), "0", &format!("v{w}"), Duration::from_secs(20));
        }
        restarted.push(Server(
            bin()
                .args(["server", "--config", cfg, "--node", &node.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        ));
    }
    let live: Vec<u32> = pids.iter().copied().filter(|p| Path::new(&format!("/proc/{p}")).exists()).collect();
    stop_up(up, &live);
    drop(restarted);
}
