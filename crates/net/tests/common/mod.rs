//! Helpers the network tests share: free loopback ports, a connection to a
//! port that is still coming up, and a Redis command as a client sends it.
#![allow(dead_code)] // each test binary uses its own part

use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// The first of `n` consecutive loopback ports that are free now.
pub fn free_ports(n: u16) -> u16 {
    loop {
        let base = 20_000 + (rand::random::<u16>() % 30_000);
        let all: Vec<_> = (0..n).map(|i| std::net::TcpListener::bind(("127.0.0.1", base + i))).collect();
        if all.iter().all(|l| l.is_ok()) {
            return base;
        }
    }
}

/// Connect to `port`, retrying for up to 5 s while the server starts.
pub async fn connect(port: u16) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match TcpStream::connect(("127.0.0.1", port)).await {
            Ok(s) => return s,
            Err(e) if Instant::now() > deadline => panic!("front door on {port} never came up: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// A command as a Redis client sends it: an array of bulk strings.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}
