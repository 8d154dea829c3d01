//! One OTLP/HTTP request: a blocking HTTP/1.1 POST over a plain TCP
//! connection, with a deadline on connecting, sending and reading the
//! answer. Plain `http://` only: the collector is normally a local agent,
//! and no TLS stack is linked (the static release stays free of openssl
//! and rustls; docs/metrics.md, "OTLP").

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// An `http://host:port[/prefix]` endpoint: the signal paths
/// (`/v1/metrics`, `/v1/logs`) are appended to the prefix, as the
/// OpenTelemetry SDKs do with a base endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `host:port` as given, for the Host header and messages.
    pub authority: String,
    /// The path prefix, without a trailing slash ("" for none).
    pub prefix: String,
}

/// The OTLP/HTTP default port, when the URL names none.
const DEFAULT_PORT: u16 = 4318;

impl Endpoint {
    pub fn parse(url: &str) -> Result<Self, String> {
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest,
            Some(("https", _)) => {
                return Err(format!(
                    "{url}: https is not supported (no TLS is linked): point --otlp at a local collector or agent over http://"
                ))
            }
            _ => return Err(format!("{url}: not an http:// URL (e.g. http://127.0.0.1:4318)")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("{url}: expected http://HOST[:PORT][/PATH]"));
        }
        // A bracketed IPv6 address has colons of its own.
        let has_port = match authority.rfind(']') {
            Some(b) => authority[b..].contains(':'),
            None => authority.contains(':'),
        };
        let authority = if has_port {
            authority.to_string()
        } else {
            format!("{authority}:{DEFAULT_PORT}")
        };
        Ok(Endpoint {
            authority,
            prefix: path.trim_end_matches('/').to_string(),
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}{path}", self.authority, self.prefix)
    }

    fn addrs(&self) -> Result<Vec<SocketAddr>, String> {
        self.authority
            .to_socket_addrs()
            .map(|a| a.collect())
            .map_err(|e| format!("resolving {}: {e}", self.authority))
    }
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// 2xx: the collector took the batch.
    Delivered,
    /// Worth trying again later: no connection, a timeout, 429, 502, 503,
    /// 504 (the OTLP specification's retryable answers).
    Retry(String),
    /// The collector refused this batch for good (another 4xx or 5xx):
    /// sending it again would be refused again.
    Rejected(String),
}

/// Answers longer than this are not read further: only the status line
/// matters, and a misbehaving server must not make the exporter buffer.
const MAX_ANSWER: usize = 16 * 1024;

/// POSTs `body` (a serialised protobuf request) to `path` under
/// `endpoint`, all within `timeout`.
pub fn post(endpoint: &Endpoint, path: &str, body: &[u8], timeout: Duration) -> Outcome {
    match try_post(endpoint, path, body, timeout) {
        Ok(status) => classify(status),
        Err(e) => Outcome::Retry(e),
    }
}

fn classify(status: u16) -> Outcome {
    match status {
        200..=299 => Outcome::Delivered,
        429 | 502 | 503 | 504 => Outcome::Retry(format!("HTTP {status}")),
        _ => Outcome::Rejected(format!("HTTP {status}")),
    }
}

fn try_post(
    endpoint: &Endpoint,
    path: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<u16, String> {
    let deadline = Instant::now() + timeout;
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("no answer within {} s", timeout.as_secs_f64()))
    };
    let mut last_err = String::from("no address");
    let mut stream = None;
    for addr in endpoint.addrs()? {
        match TcpStream::connect_timeout(&addr, left()?) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last_err = format!("connecting to {addr}: {e}"),
        }
    }
    let mut stream = stream.ok_or(last_err)?;
    let io = |e: std::io::Error| match e.kind() {
        // A socket timeout reads as EAGAIN ("Resource temporarily
        // unavailable"): say what it means.
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => format!(
            "{}: no answer within {} s",
            endpoint.authority,
            timeout.as_secs_f64()
        ),
        _ => format!("{}: {e}", endpoint.authority),
    };
    let head = format!(
        "POST {}{path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\nUser-Agent: throttlescope/{}\r\nConnection: close\r\n\r\n",
        endpoint.prefix,
        endpoint.authority,
        body.len(),
        env!("CARGO_PKG_VERSION"),
    );
    stream.set_write_timeout(Some(left()?)).map_err(io)?;
    stream.write_all(head.as_bytes()).map_err(io)?;
    stream.write_all(body).map_err(io)?;
    let mut answer = Vec::with_capacity(512);
    let mut buf = [0u8; 2048];
    // Read until the status line is complete; the rest of the answer
    // (headers, a partial-success body) is not needed.
    while !answer.contains(&b'\n') {
        stream.set_read_timeout(Some(left()?)).map_err(io)?;
        let n = stream.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
        if answer.len() > MAX_ANSWER {
            break;
        }
    }
    parse_status(&answer).ok_or_else(|| {
        format!(
            "{}: not an HTTP answer: {:?}",
            endpoint.authority,
            String::from_utf8_lossy(&answer[..answer.len().min(80)])
        )
    })
}

/// The status code of `HTTP/1.x NNN ...`.
fn parse_status(answer: &[u8]) -> Option<u16> {
    let line = answer.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split_whitespace();
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    parts.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn endpoints_parse_with_default_port_and_prefix() {
        let e = Endpoint::parse("http://127.0.0.1:4318").unwrap();
        assert_eq!(e.authority, "127.0.0.1:4318");
        assert_eq!(e.url("/v1/metrics"), "http://127.0.0.1:4318/v1/metrics");
        let e = Endpoint::parse("http://collector/otlp/").unwrap();
        assert_eq!(e.authority, "collector:4318");
        assert_eq!(e.url("/v1/logs"), "http://collector:4318/otlp/v1/logs");
        let e = Endpoint::parse("http://[::1]").unwrap();
        assert_eq!(e.authority, "[::1]:4318");
        assert!(Endpoint::parse("https://x:4318")
            .unwrap_err()
            .contains("no TLS"));
        assert!(Endpoint::parse("127.0.0.1:4318").is_err());
        assert!(Endpoint::parse("http://user@x").is_err());
    }

    #[test]
    fn statuses_are_classified_as_otlp_says() {
        assert_eq!(classify(200), Outcome::Delivered);
        assert_eq!(classify(204), Outcome::Delivered);
        assert!(matches!(classify(503), Outcome::Retry(_)));
        assert!(matches!(classify(429), Outcome::Retry(_)));
        assert!(matches!(classify(400), Outcome::Rejected(_)));
        assert_eq!(parse_status(b"HTTP/1.1 200 OK\r\n"), Some(200));
        assert_eq!(parse_status(b"SSH-2.0\r\n"), None);
    }

    /// A real round trip: the request as a server reads it, and its answer.
    #[test]
    fn posts_the_body_and_reads_the_status() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            while !got.ends_with(b"body!") {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0);
                got.extend_from_slice(&buf[..n]);
            }
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .unwrap();
            String::from_utf8(got).unwrap()
        });
        let e = Endpoint::parse(&format!("http://{addr}")).unwrap();
        let out = post(&e, "/v1/metrics", b"body!", Duration::from_secs(5));
        assert_eq!(out, Outcome::Delivered);
        let req = server.join().unwrap();
        assert!(req.starts_with("POST /v1/metrics HTTP/1.1\r\n"), "{req}");
        assert!(req.contains("Content-Type: application/x-protobuf\r\n"));
        assert!(req.contains("Content-Length: 5\r\n"));
    }

    /// A server that accepts and never answers: the request ends at its
    /// timeout, as one to retry.
    #[test]
    fn a_silent_server_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let e = Endpoint::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let t = Instant::now();
        let out = post(&e, "/v1/metrics", b"x", Duration::from_millis(300));
        assert!(matches!(out, Outcome::Retry(_)), "{out:?}");
        assert!(t.elapsed() < Duration::from_secs(3));
        drop(listener);
    }
}
