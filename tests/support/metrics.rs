//! What tests/offline/metrics.rs and tests/lab/metrics.rs share: they were one
//! file before its tests were split by whether they need root.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One HTTP exchange over a fresh connection: sends `request` as is, reads
/// until the server closes. Returns (status, headers, body); status 0 when
/// the connection closed without an answer.
pub fn exchange(addr: SocketAddr, request: &[u8]) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may answer and close before it read everything we send.
    let _ = s.write_all(request);
    let mut raw = Vec::new();
    if let Err(e) = s.read_to_end(&mut raw) {
        // A reset (the server closed with our bytes unread) is a closed
        // connection; whatever answer came before it is in `raw`.
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::ConnectionReset,
            "reading from {addr}: {e} (got {} bytes)",
            raw.len()
        );
    }
    let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        assert!(
            raw.is_empty(),
            "partial answer: {:?}",
            String::from_utf8_lossy(&raw)
        );
        return (0, String::new(), Vec::new());
    };
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line: {head}"));
    (status, head, raw[split + 4..].to_vec())
}

pub fn get(addr: SocketAddr, path: &str, accept: &str) -> (u16, String, String) {
    let rq = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    );
    let (status, head, body) = exchange(addr, rq.as_bytes());
    (status, head, String::from_utf8(body).expect("UTF-8 body"))
}

pub const OPENMETRICS: &str = "application/openmetrics-text;version=1.0.0";
