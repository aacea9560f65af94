//! Interoperation with another TLS 1.3 implementation: OpenSSL's `s_client`
//! against this crate's server side, and `s_server` against its client
//! side, with the certificates `causeway certs` makes (mutual TLS under the
//! cluster CA). Both directions carry many records, key updates are asked
//! for by either end (OpenSSL's interactive `K`: update and ask the peer to
//! update; `k`: update its own; and this side's [`Conn::update_keys`]),
//! data is checked byte for byte after each, each connection ends with
//! `close_notify`, and a second connection resumes the first one's session.
//!
//! OpenSSL reads its interactive commands from the start of each chunk it
//! reads from standard input, so the data written to it is digits, spaces
//! and newlines only, and a command is written alone and its effect awaited
//! before anything else is written.

use causeway_core::NodeId;
use causeway_net::Cluster;
use causeway_net::ClusterConfig;
use causeway_net::tls::{CLIENT_NAME, ClientTls, Conn, NodeTls, Validity, generate, node_name};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, ChildStdin, Command};

/// Generous: only a hang should ever reach it. Nothing here is timed.
const DEADLINE: Duration = Duration::from_secs(120);
/// Rounds of data and key updates per connection: a fault that shows in
/// only some key updates still shows in a run.
const ROUNDS: usize = 12;
/// Lines per burst.
const BURST: usize = 150;

/// Whether `openssl` runs here. CI installs it (`.ci/run`); elsewhere the
/// test says plainly that it did not run.
fn have_openssl(test: &str) -> bool {
    match std::process::Command::new("openssl").arg("version").output() {
        Ok(o) if o.status.success() => true,
        _ => {
            eprintln!("SKIPPED {test}: `openssl` is not installed (apt-get install openssl)");
            false
        }
    }
}

/// A cluster of one node at `addr` whose certificates are in a fresh
/// directory made as `causeway certs` makes them.
fn cluster(tag: &str, addr: &str) -> (Arc<Cluster>, PathBuf) {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("causeway-openssl-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let certs = root.join("certs");
    generate(&certs, "openssl-interop", 1, &Validity { days: 1 }).unwrap();
    let toml = format!(
        "cluster_id = \"openssl-interop\"\nprotocol = \"eventual\"\ndata_dir = {data:?}\nnodes = [{addr:?}]\n\
         [topology]\ndcs = 1\npartitions = 1\n[tls]\ndir = {certs:?}\n",
        data = root.join("data"),
    );
    let c = ClusterConfig::parse(&toml, "interop.toml").unwrap().validate().unwrap();
    (Arc::new(c), root)
}

/// Line `seq`'s content: decimal digits, 1 to 3 000 of them.
fn payload(seq: usize) -> String {
    let mut x = (seq as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let len = 1 + (seq * 7919) % 3000;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'0' + (x % 10) as u8)
        })
        .collect()
}

/// An `openssl` process whose output is gathered as it comes.
struct Openssl {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
}

impl Openssl {
    fn spawn(args: &[&str]) -> Openssl {
        // Standard output unbuffered (coreutils' `stdbuf`): OpenSSL writes
        // the data it opens straight to the descriptor but its notes through
        // stdio, which would otherwise hold them back (a note that says a
        // command was carried out would come late) or split one note across
        // two writes with data between.
        let mut child = Command::new("stdbuf")
            .arg("-o0")
            .arg("openssl")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("stdbuf (coreutils) runs openssl");
        let gather = |mut r: Box<dyn tokio::io::AsyncRead + Unpin + Send>| {
            let buf = Arc::new(Mutex::new(Vec::new()));
            let into = buf.clone();
            tokio::spawn(async move {
                let mut chunk = [0u8; 8192];
                while let Ok(n @ 1..) = r.read(&mut chunk).await {
                    into.lock().unwrap().extend_from_slice(&chunk[..n]);
                }
            });
            buf
        };
        let out = gather(Box::new(child.stdout.take().unwrap()));
        let err = gather(Box::new(child.stderr.take().unwrap()));
        Openssl { stdin: child.stdin.take(), child, out, err }
    }

    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.err.lock().unwrap()).into_owned()
    }

    async fn write(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        let r = tokio::time::timeout(DEADLINE, async {
            stdin.write_all(text.as_bytes()).await?;
            stdin.flush().await
        })
        .await;
        assert!(matches!(r, Ok(Ok(()))), "writing to openssl: {r:?}\nstderr: {}", self.stderr());
    }

    /// A command (`K`, `k`), alone in its chunk of standard input, then
    /// the `count`-th appearance of `done` in its output (`in_stderr` or
    /// stdout), which says it was carried out.
    async fn command(&mut self, letter: &str, done: &str, in_stderr: bool, count: usize) {
        self.write(&format!("{letter}\n")).await;
        let what = format!("`{letter}` carried out ({done} #{count})");
        self.wait(&what, |o| (if in_stderr { &o.1 } else { &o.0 }).matches(done).count() >= count).await;
    }

    /// Wait until `cond(stdout, stderr)` holds.
    async fn wait(&self, what: &str, cond: impl Fn(&(String, String)) -> bool) {
        let start = tokio::time::Instant::now();
        loop {
            let o = (self.stdout(), self.stderr());
            if cond(&o) {
                return;
            }
            if start.elapsed() > DEADLINE {
                panic!(
                    "openssl: not within {DEADLINE:?}: {what}\n--- stdout:\n{}\n--- stderr:\n{}",
                    tail(&o.0),
                    tail(&o.1)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Close standard input (which ends an `s_client` session) and wait for
    /// the process to exit.
    async fn finish(mut self) -> (std::process::ExitStatus, String, String) {
        drop(self.stdin.take());
        let status = tokio::time::timeout(DEADLINE, self.child.wait()).await.expect("openssl exits").unwrap();
        // Let the gathering tasks take the last output.
        tokio::time::sleep(Duration::from_millis(100)).await;
        (status, self.stdout(), self.stderr())
    }
}

/// The end of `output`, long lines cut, for a failure's message.
fn tail(output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    let from = lines.len().saturating_sub(40);
    lines[from..].iter().map(|l| format!("{:.100}\n", l)).collect()
}

/// The lines of `output` that start with one of `tags`, after removing the
/// notes OpenSSL prints between two records (a line this side wrote may
/// arrive in two records, and a note can fall between them).
fn tagged(output: &str, tags: &[&str]) -> Vec<String> {
    let mut clean = output.to_string();
    for note in ["read R BLOCK\n", "read W BLOCK\n", "Read BLOCK\n", "Write BLOCK\n"] {
        clean = clean.replace(note, "");
    }
    clean.lines().filter(|l| tags.iter().any(|t| l.starts_with(t))).map(str::to_string).collect()
}

/// Lines read from a connection.
struct Lines {
    conn: Conn,
    buf: Vec<u8>,
}

impl Lines {
    /// The next line without its newline, or `None` at the end of the stream.
    async fn next(&mut self) -> Option<String> {
        loop {
            if let Some(at) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=at).collect();
                return Some(String::from_utf8(line[..at].to_vec()).expect("text"));
            }
            let mut chunk = [0u8; 4096];
            let n = self.conn.read(&mut chunk).await.expect("a TLS read");
            if n == 0 {
                assert!(self.buf.is_empty(), "the stream ended inside a line");
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    async fn send(&mut self, text: &str) {
        self.conn.write_all(text.as_bytes()).await.expect("a TLS write");
        self.conn.flush().await.expect("a TLS flush");
    }
}

/// What this side's server saw of one connection.
struct Served {
    /// Every data line received, in order.
    data: Vec<String>,
    resumed: bool,
    proved_client: bool,
    close_notify: bool,
}

/// This side's server for one connection: lines `SEQ DIGITS` are data,
/// echoed as `echo SEQ DIGITS`; `SEQ u` updates this side's keys (asking
/// the client to update its own) and answers `updated SEQ`; `SEQ s N`
/// streams N lines `stream SEQ I DIGITS` without waiting; `SEQ bye`
/// answers `bye SEQ` and closes with `close_notify`.
async fn serve(conn: Conn) -> Served {
    let resumed = conn.resumed();
    let proved_client = conn.proves(CLIENT_NAME) && !conn.proves(&node_name(NodeId(0)));
    let mut lines = Lines { conn, buf: Vec::new() };
    let mut data = Vec::new();
    while let Some(line) = lines.next().await {
        let (seq, body) = line.split_once(' ').expect("SEQ BODY");
        match body.split(' ').collect::<Vec<_>>()[..] {
            ["u"] => {
                lines.conn.update_keys().unwrap();
                lines.send(&format!("updated {seq}\n")).await;
            }
            ["s", n] => {
                for i in 0..n.parse::<usize>().unwrap() {
                    // One write per line: one record each, while the
                    // client's key update may arrive at any point.
                    lines.conn.write_all(format!("stream {seq} {i} {}\n", payload(i)).as_bytes()).await.unwrap();
                }
                lines.conn.flush().await.unwrap();
            }
            ["bye"] => {
                lines.send(&format!("bye {seq}\n")).await;
                lines.conn.shutdown().await.unwrap();
            }
            [digits] => {
                data.push(line.clone());
                assert!(digits.bytes().all(|b| b.is_ascii_digit()), "data line {seq}: {line:?}");
                lines.send(&format!("echo {line}\n")).await;
            }
            _ => panic!("unknown line {line:?}"),
        }
    }
    let close_notify = lines.conn.close_notify_received();
    Served { data, resumed, proved_client, close_notify }
}

/// What `s_client` is sent on one connection, and what it must print.
struct Script {
    seq: usize,
    /// Data lines sent, as the server must receive them.
    sent: Vec<String>,
    /// Lines the server must answer with, in order.
    expected: Vec<String>,
    key_updates: usize,
}

impl Script {
    fn new(first: usize) -> Script {
        Script { seq: first, sent: Vec::new(), expected: Vec::new(), key_updates: 0 }
    }

    fn next(&mut self) -> usize {
        self.seq += 1;
        self.seq
    }

    /// `n` data lines in one write; waits for their echoes.
    async fn burst(&mut self, c: &mut Openssl, n: usize) {
        let mut text = String::new();
        for _ in 0..n {
            let seq = self.next();
            let line = format!("{seq} {}", payload(seq));
            text.push_str(&line);
            text.push('\n');
            self.expected.push(format!("echo {line}"));
            self.sent.push(line);
        }
        c.write(&text).await;
        self.await_answers(c).await;
    }

    /// Waits until `s_client` has printed every answer expected so far.
    async fn await_answers(&self, c: &Openssl) {
        let want = self.expected.len();
        let last = self.expected.last().cloned().unwrap_or_default();
        c.wait(&format!("answer {want}: {:.60}", last), |o| {
            tagged(&o.0, &["echo ", "updated ", "stream ", "bye "]).len() >= want
        })
        .await;
    }

    /// `K` or `k` typed into `s_client`.
    async fn openssl_key_update(&mut self, c: &mut Openssl, letter: &str) {
        self.key_updates += 1;
        c.command(letter, "KEYUPDATE", true, self.key_updates).await;
    }

    /// This side's server updates its keys and asks `s_client` to update.
    async fn server_key_update(&mut self, c: &mut Openssl) {
        let seq = self.next();
        self.expected.push(format!("updated {seq}"));
        c.write(&format!("{seq} u\n")).await;
        self.await_answers(c).await;
    }

    /// The server streams `n` records while `s_client` asks for a key
    /// update in the middle of them.
    async fn stream_across_key_update(&mut self, c: &mut Openssl, n: usize, letter: &str) {
        let seq = self.next();
        let first = self.expected.len();
        for i in 0..n {
            self.expected.push(format!("stream {seq} {i} {}", payload(i)));
        }
        c.write(&format!("{seq} s {n}\n")).await;
        // The request was read (the stream has begun) before the command
        // is written, so the two are never in one chunk.
        c.wait("the stream begins", |o| tagged(&o.0, &["echo ", "updated ", "stream ", "bye "]).len() > first).await;
        self.openssl_key_update(c, letter).await;
        self.await_answers(c).await;
    }

    fn check(&self, stdout: &str, served: &Served) {
        let got = tagged(stdout, &["echo ", "updated ", "stream ", "bye "]);
        assert_eq!(got.len(), self.expected.len(), "answers printed by s_client");
        for (i, (g, e)) in got.iter().zip(&self.expected).enumerate() {
            assert!(g == e, "answer {i} differs: got {:.80}… want {:.80}…", g, e);
        }
        assert_eq!(served.data, self.sent, "data lines the server received");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openssl_s_client_and_this_server_agree_across_key_updates_and_resume() {
    if !have_openssl("openssl_s_client_and_this_server_agree_across_key_updates_and_resume") {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (c, root) = cluster("server", &addr.to_string());
    let tls = NodeTls::load(&c, NodeId(0)).unwrap();
    let server = tokio::spawn(async move {
        let mut served = Vec::new();
        for _ in 0..2 {
            let (tcp, _) = listener.accept().await.unwrap();
            let conn = tokio::time::timeout(DEADLINE, tls.accept(tcp)).await.unwrap().expect("handshake");
            served.push(serve(conn).await);
        }
        served
    });
    let certs = c.config.tls.dir.clone().unwrap();
    let file = |f: &str| certs.join(f).to_str().unwrap().to_string();
    let session = root.join("session.pem").to_str().unwrap().to_string();
    let connect = addr.to_string();
    let name = node_name(NodeId(0));
    let args = |resume: (&str, &str)| {
        vec![
            "s_client".to_string(),
            "-connect".into(),
            connect.clone(),
            "-tls1_3".into(),
            "-cert".into(),
            file("client.pem"),
            "-key".into(),
            file("client.key"),
            "-CAfile".into(),
            file("ca.pem"),
            "-verify_return_error".into(),
            "-verify_hostname".into(),
            name.clone(),
            "-servername".into(),
            name.clone(),
            resume.0.into(),
            resume.1.into(),
        ]
    };

    // 1. A full handshake; the session is saved for the second connection.
    let a = args(("-sess_out", &session));
    let mut s_client = Openssl::spawn(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let mut script = Script::new(0);
    script.burst(&mut s_client, 1).await;
    for round in 0..ROUNDS {
        script.burst(&mut s_client, BURST).await;
        // OpenSSL updates and asks this side to (K), or updates alone (k);
        // then the very next record each way.
        script.openssl_key_update(&mut s_client, if round % 2 == 0 { "K" } else { "k" }).await;
        script.burst(&mut s_client, 1).await;
        script.server_key_update(&mut s_client).await;
        script.burst(&mut s_client, 3).await;
        script.stream_across_key_update(&mut s_client, 200, "K").await;
    }
    // Standard input's end: s_client sends close_notify and exits.
    let (status, stdout, stderr) = s_client.finish().await;
    assert!(stdout.contains("New, TLSv1.3"), "a full TLS 1.3 handshake:\n{}", tail(&stdout));
    assert!(
        stdout.contains("Verify return code: 0 (ok)"),
        "OpenSSL verified the node's certificate:\n{}",
        tail(&stdout)
    );
    assert!(!stderr.contains("bad record mac") && !stderr.contains(":error:"), "OpenSSL reports:\n{}", tail(&stderr));
    assert!(status.success(), "s_client: {status}\n{}", tail(&stderr));
    let first = (script, stdout);

    // 2. The saved session resumed; the server ends it this time.
    let a = args(("-sess_in", &session));
    let mut s_client = Openssl::spawn(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let mut script = Script::new(100_000);
    script.burst(&mut s_client, BURST).await;
    script.openssl_key_update(&mut s_client, "K").await;
    script.burst(&mut s_client, BURST).await;
    script.server_key_update(&mut s_client).await;
    script.burst(&mut s_client, BURST).await;
    let seq = script.next();
    script.expected.push(format!("bye {seq}"));
    s_client.write(&format!("{seq} bye\n")).await;
    // This side's close_notify ends s_client's session on its own.
    s_client.wait("s_client reads close_notify", |o| o.0.contains("closed\n")).await;
    let (status, stdout, stderr) = s_client.finish().await;
    assert!(stdout.contains("Reused, TLSv1.3"), "the session is resumed:\n{}", tail(&stdout));
    assert!(!stderr.contains("bad record mac") && !stderr.contains(":error:"), "OpenSSL reports:\n{}", tail(&stderr));
    assert!(status.success(), "s_client: {status}\n{}", tail(&stderr));

    let served = tokio::time::timeout(DEADLINE, server).await.unwrap().unwrap();
    first.0.check(&first.1, &served[0]);
    script.check(&stdout, &served[1]);
    let resumed: Vec<bool> = served.iter().map(|s| s.resumed).collect();
    assert_eq!(resumed, [false, true], "the second connection resumed the first session");
    assert!(served.iter().all(|s| s.proved_client), "the client certificate proves a client, resumed or not");
    assert!(served.iter().all(|s| s.close_notify), "both connections ended with s_client's close_notify");
    let _ = std::fs::remove_dir_all(&root);
}

/// What this side has exchanged with `s_server` so far, across its
/// connections (its output holds them all).
struct Exchange {
    seq: usize,
    /// Data lines `s_server` has printed.
    printed: usize,
    /// `K`/`k` commands `s_server` has carried out.
    key_updates: usize,
}

impl Exchange {
    /// `n` lines from this side, one write (so one record) each; `s_server`
    /// prints each line it opens.
    async fn send_lines(&mut self, lines: &mut Lines, s_server: &Openssl, n: usize) {
        let mut want = Vec::new();
        for _ in 0..n {
            self.seq += 1;
            let line = format!("data {} {}", self.seq, payload(self.seq));
            lines.conn.write_all(format!("{line}\n").as_bytes()).await.unwrap();
            want.push(line);
        }
        lines.conn.flush().await.unwrap();
        let until = self.printed + n;
        let what = format!("s_server prints data line {}", self.seq);
        s_server.wait(&what, |o| tagged(&o.0, &["data "]).len() >= until).await;
        let got = tagged(&s_server.stdout(), &["data "]);
        for (g, w) in got[self.printed..until].iter().zip(&want) {
            assert!(g == w, "s_server opened {:.80}… where this side sent {:.80}…", g, w);
        }
        self.printed = until;
    }

    /// `n` lines typed into `s_server`; this side reads each.
    async fn receive_lines(&mut self, lines: &mut Lines, s_server: &mut Openssl, n: usize) {
        let mut text = String::new();
        let mut want = Vec::new();
        for _ in 0..n {
            self.seq += 1;
            let line = format!("{} {}", self.seq, payload(self.seq));
            text.push_str(&line);
            text.push('\n');
            want.push(line);
        }
        s_server.write(&text).await;
        for w in want {
            let got = tokio::time::timeout(DEADLINE, lines.next()).await.expect("s_server's data arrives");
            assert_eq!(got.as_deref(), Some(&w[..]), "what this side opened");
        }
    }

    /// One connection: bursts each way, key updates from `s_server` (`K`
    /// asks this side to update too, `k` does not) and from this side,
    /// the next records each way after each, then this side's
    /// `close_notify`. Returns whether `s_server` answered with its own.
    async fn session(&mut self, s_server: &mut Openssl, conn: Conn, rounds: usize) -> bool {
        let mut lines = Lines { conn, buf: Vec::new() };
        for round in 0..rounds {
            self.send_lines(&mut lines, s_server, BURST).await;
            self.receive_lines(&mut lines, s_server, BURST).await;
            self.key_updates += 1;
            let letter = if round % 2 == 0 { "K" } else { "k" };
            s_server.command(letter, "SSL_do_handshake -> 1", false, self.key_updates).await;
            self.receive_lines(&mut lines, s_server, 1).await;
            self.send_lines(&mut lines, s_server, 1).await;
            lines.conn.update_keys().unwrap();
            self.send_lines(&mut lines, s_server, 3).await;
            self.receive_lines(&mut lines, s_server, 3).await;
        }
        lines.conn.shutdown().await.unwrap();
        let rest = tokio::time::timeout(DEADLINE, lines.next()).await.expect("s_server ends the connection");
        assert_eq!(rest, None, "nothing after this side's close_notify");
        lines.conn.close_notify_received()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_client_and_openssl_s_server_agree_across_key_updates_and_resume() {
    if !have_openssl("this_client_and_openssl_s_server_agree_across_key_updates_and_resume") {
        return;
    }
    // The certificates first (the cluster's address is s_server's, known
    // once it listens; the certificates do not depend on it).
    let (c, root) = cluster("client", "127.0.0.1:1");
    let certs = c.config.tls.dir.clone().unwrap();
    let file = |f: &str| certs.join(f).to_str().unwrap().to_string();
    #[rustfmt::skip]
    let args = [
        "s_server", "-accept", "127.0.0.1:0", "-tls1_3", "-naccept", "2",
        "-cert", &file("node-0.pem"), "-key", &file("node-0.key"),
        // Mutual TLS: a client certificate of the cluster CA is required.
        "-CAfile", &file("ca.pem"), "-Verify", "1", "-verify_return_error",
    ];
    let mut s_server = Openssl::spawn(&args);
    s_server.wait("s_server listens", |o| o.0.contains("ACCEPT 127.0.0.1:")).await;
    let port: u16 = {
        let out = s_server.stdout();
        let at = out.find("ACCEPT 127.0.0.1:").unwrap() + "ACCEPT 127.0.0.1:".len();
        out[at..].lines().next().unwrap().trim().parse().unwrap()
    };
    let tls = ClientTls::load(&c).unwrap();
    let tls = &tls;
    let dial = move || async move {
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        tokio::time::timeout(DEADLINE, tls.connect(tcp, NodeId(0))).await.unwrap().expect("handshake with s_server")
    };
    let mut x = Exchange { seq: 0, printed: 0, key_updates: 0 };

    let conn = dial().await;
    assert!(conn.proves(&node_name(NodeId(0))) && !conn.resumed());
    let first_close_notify = x.session(&mut s_server, conn, ROUNDS).await;
    s_server.wait("s_server reads close_notify", |o| o.0.matches("DONE").count() >= 1).await;

    // The same client configuration again: it holds s_server's tickets.
    let conn = dial().await;
    assert!(conn.proves(&node_name(NodeId(0))), "the server's certificate, kept with the session");
    assert!(conn.resumed(), "the second connection resumes the first session");
    let second_close_notify = x.session(&mut s_server, conn, 2).await;
    s_server.wait("s_server reads close_notify", |o| o.0.matches("DONE").count() >= 2).await;

    let (status, stdout, stderr) = s_server.finish().await;
    assert!(status.success(), "s_server: {status}\n{}\n{}", tail(&stdout), tail(&stderr));
    assert!(!stderr.contains("bad record mac") && !stderr.contains(":error:"), "OpenSSL reports:\n{}", tail(&stderr));
    assert!(first_close_notify && second_close_notify, "s_server answered close_notify with its own");
    let _ = std::fs::remove_dir_all(&root);
}
