//! The HTTP side: reading one request head, which path gets what, and the
//! bytes of the answer. No sockets here (server.rs owns them), so every
//! rule is testable on byte strings.
//!
//! Answers only hand out the last published text (an `Arc` swapped in by
//! the collection side), so a slow or stuck scraper never holds up an
//! interval, and a body is never copied per request.

use std::sync::{Arc, RwLock};

use super::encode::{OPENMETRICS_TYPE, PROMETHEUS_TYPE};

/// One interval's metrics in both formats.
#[derive(Debug, Default)]
pub(crate) struct Exposition {
    pub openmetrics: Arc<String>,
    pub prometheus: Arc<String>,
}

/// The latest exposition; replaced whole on every interval.
pub(crate) type Published = Arc<RwLock<Arc<Exposition>>>;

const INDEX: &str = "throttlescope Prometheus exporter

GET /metrics   metrics of the last interval: OpenMetrics when the Accept
               header asks for it (Prometheus does), else text format 0.0.4

Metric names and labels: docs/metrics.md
";

/// Request line and headers past this many bytes get 431 and the
/// connection closed: a scrape needs a few hundred, and the server never
/// buffers more than this per connection.
pub(crate) const MAX_HEADER_BYTES: usize = 8 * 1024;

/// The request methods `route` tells apart; every other token is `Other`
/// (a 405 on a known path, like POST).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Other,
}

impl Method {
    fn parse(token: &str) -> Method {
        // Methods are case-sensitive (RFC 9110 9.1): `get` is not GET.
        match token {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            _ => Method::Other,
        }
    }
}

/// What to answer.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Arc<String>,
}

/// Routes one request: GET (or HEAD) of `/metrics` or `/`; any other path
/// is 404, any other method on a known path 405. `/metrics` is OpenMetrics
/// when the client's `accept` header names it (Prometheus does), else the
/// Prometheus text format.
pub(crate) fn route(
    method: &Method,
    url: &str,
    accept: Option<&str>,
    metrics: impl FnOnce() -> Arc<Exposition>,
) -> Reply {
    let path = url.split(['?', '#']).next().unwrap_or("");
    if path != "/metrics" && path != "/" {
        return text(404, "not found: try /metrics\n");
    }
    if !matches!(method, Method::Get | Method::Head) {
        return text(405, "method not allowed: only GET\n");
    }
    if path == "/" {
        return text(200, INDEX);
    }
    let exposition = metrics();
    if accept.is_some_and(|a| a.contains("application/openmetrics-text")) {
        Reply {
            status: 200,
            content_type: OPENMETRICS_TYPE,
            body: exposition.openmetrics.clone(),
        }
    } else {
        Reply {
            status: 200,
            content_type: PROMETHEUS_TYPE,
            body: exposition.prometheus.clone(),
        }
    }
}

fn text(status: u16, body: &str) -> Reply {
    Reply {
        status,
        content_type: "text/plain; charset=utf-8",
        body: Arc::new(body.to_string()),
    }
}

/// The parts of a request head that matter here.
#[derive(Debug, PartialEq)]
pub(crate) struct Request<'a> {
    pub method: Method,
    pub target: &'a str,
    pub accept: Option<&'a str>,
    /// The client may send another request on this connection: HTTP/1.1
    /// without `Connection: close` and without a body (a body is never
    /// read, so what follows it could not be told from a next request).
    pub keep_alive: bool,
}

/// Parses a complete request head (request line and headers, up to and
/// including the blank line). `Err` is the status to answer with.
pub(crate) fn parse_head(head: &[u8]) -> Result<Request<'_>, u16> {
    // Header values may in theory carry obsolete non-ASCII text; no
    // scraper sends any, so refusing it keeps parsing to &str.
    let head = std::str::from_utf8(head).map_err(|_| 400u16)?;
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(400);
    };
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_graphic() && !b"\"(),/:;<=>?@[\\]{}".contains(&b))
    };
    if !token(method) || target.is_empty() || !target.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(400);
    }
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        v if v.starts_with("HTTP/") => return Err(505),
        _ => return Err(400),
    };
    let mut request = Request {
        method: Method::parse(method),
        target,
        accept: None,
        keep_alive: http11,
    };
    for l in lines.take_while(|l| !l.is_empty()) {
        // No colon, an empty or spaced name, or a folded continuation line
        // (leading whitespace, obsolete since RFC 7230): malformed.
        let Some((name, value)) = l.split_once(':') else {
            return Err(400);
        };
        if !token(name) {
            return Err(400);
        }
        let value = value.trim_matches([' ', '\t']);
        if name.eq_ignore_ascii_case("accept") {
            request.accept.get_or_insert(value);
        } else if name.eq_ignore_ascii_case("connection") {
            if value
                .split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("close"))
            {
                request.keep_alive = false;
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            || (name.eq_ignore_ascii_case("content-length") && value != "0")
        {
            request.keep_alive = false;
        }
    }
    Ok(request)
}

/// An answer ready to write: the head bytes, then the body shared with the
/// published exposition (none for HEAD).
#[derive(Debug)]
pub(crate) struct Response {
    pub head: Vec<u8>,
    pub body: Option<Arc<String>>,
    /// Close the connection once written.
    pub close: bool,
}

impl Response {
    pub(crate) fn body_bytes(&self) -> &[u8] {
        self.body.as_deref().map_or(&[], |b| b.as_bytes())
    }

    pub(crate) fn len(&self) -> usize {
        self.head.len() + self.body_bytes().len()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

fn response(reply: Reply, head_only: bool, close: bool) -> Response {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
        reply.status,
        reason(reply.status),
        reply.content_type,
        reply.body.len()
    );
    if reply.status == 405 {
        head.push_str("Allow: GET, HEAD\r\n");
    }
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    Response {
        head: head.into_bytes(),
        body: (!head_only).then_some(reply.body),
        close,
    }
}

/// The answer to a request that could not be taken: closes the connection.
pub(crate) fn refusal(status: u16) -> Response {
    let body = match status {
        431 => format!("request headers over {MAX_HEADER_BYTES} bytes\n"),
        505 => "only HTTP/1.0 and HTTP/1.1\n".to_string(),
        _ => "malformed request\n".to_string(),
    };
    response(text(status, &body), false, true)
}

/// The answer to one complete request head.
pub(crate) fn answer(head: &[u8], published: &Published) -> Response {
    let rq = match parse_head(head) {
        Ok(rq) => rq,
        Err(status) => return refusal(status),
    };
    let reply = route(&rq.method, rq.target, rq.accept, || {
        published.read().unwrap_or_else(|e| e.into_inner()).clone()
    });
    response(reply, rq.method == Method::Head, !rq.keep_alive)
}

/// What a connection's buffered bytes hold.
#[derive(Debug)]
pub(crate) enum Taken {
    /// A whole request head, answered (and taken off the buffer).
    Answer(Response),
    /// No head within `MAX_HEADER_BYTES`: the buffer is dropped, a 431 due.
    TooLarge,
    /// Not yet a whole head: read more.
    Incomplete,
}

/// Takes the first whole request head off `buf` and answers it. Blank lines
/// before a request are tolerated (RFC 9112 2.2: e.g. after a body some
/// client miscounted); what follows the head stays, as the next request of
/// a kept-alive connection (or an unread body, and the answer closes).
pub(crate) fn take_request(buf: &mut Vec<u8>, published: &Published) -> Taken {
    let blank = buf.chunks(2).take_while(|c| *c == b"\r\n").count();
    buf.drain(..2 * blank);
    match buf.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(end) => {
            let response = answer(&buf[..end + 4], published);
            buf.drain(..end + 4);
            Taken::Answer(response)
        }
        None if buf.len() >= MAX_HEADER_BYTES => {
            // Freed, not just emptied: the connection is closing.
            *buf = Vec::new();
            Taken::TooLarge
        }
        None => Taken::Incomplete,
    }
}

/// Fuzzing only (tools/fuzz, target `metrics_http`): `data` as the bytes
/// one client sends on one connection, read the way the server reads them
/// (at most 4096 bytes at a time, never past `MAX_HEADER_BYTES` buffered).
/// Panics when an invariant breaks: the buffer grows past its limit, or an
/// answer is not a well-formed HTTP/1.1 response whose Content-Length is
/// its body's.
pub fn fuzz_connection(data: &[u8]) {
    let published: Published = Arc::new(RwLock::new(Arc::new(Exposition {
        openmetrics: Arc::new("m 1\n# EOF\n".into()),
        prometheus: Arc::new("m 1\n".into()),
    })));
    let mut buf = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let n = (MAX_HEADER_BYTES - buf.len()).min(4096).min(rest.len());
        buf.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        loop {
            match take_request(&mut buf, &published) {
                Taken::Answer(r) => {
                    check_response(&r);
                    if r.close {
                        return;
                    }
                }
                Taken::TooLarge => return,
                Taken::Incomplete => break,
            }
        }
        assert!(buf.len() < MAX_HEADER_BYTES, "buffered {} bytes", buf.len());
    }
}

/// The invariants `fuzz_connection` checks on each answer.
fn check_response(r: &Response) {
    let head = std::str::from_utf8(&r.head).expect("an ASCII head");
    assert!(
        head.starts_with("HTTP/1.1 ") && head.ends_with("\r\n\r\n"),
        "{head:?}"
    );
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("a Content-Length");
    // HEAD answers carry the length of the body they do not send.
    if let Some(body) = &r.body {
        assert_eq!(length, body.len(), "{head:?}");
    }
    assert_eq!(
        r.close,
        head.contains("\r\nConnection: close\r\n"),
        "{head:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fuzz harness's own paths: pipelined requests, blank lines
    /// before one, a head that never ends, a HEAD, a bad request.
    #[test]
    fn the_fuzz_harness_walks_a_connection() {
        fuzz_connection(
            b"GET /metrics HTTP/1.1\r\n\r\n\r\nHEAD / HTTP/1.1\r\n\r\nGET /x HTTP/1.0\r\n\r\n",
        );
        fuzz_connection(&[b'a'; 3 * MAX_HEADER_BYTES]);
        fuzz_connection(b"BREW /pot HTCPCP/1.0\r\n\r\nGET / HTTP/1.1\r\n\r\n");
        fuzz_connection(b"");
        let published: Published = Default::default();
        let mut buf = b"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\nGET".to_vec();
        assert!(matches!(
            take_request(&mut buf, &published),
            Taken::Answer(_)
        ));
        assert_eq!(buf, b"GET");
        assert!(matches!(
            take_request(&mut buf, &published),
            Taken::Incomplete
        ));
    }

    fn metrics() -> Arc<Exposition> {
        Arc::new(Exposition {
            openmetrics: Arc::new("m 1\n# EOF\n".into()),
            prometheus: Arc::new("m 1\n".into()),
        })
    }

    #[test]
    fn routes() {
        let om = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
        let r = route(&Method::Get, "/metrics", Some(om), metrics);
        assert_eq!((r.status, r.content_type), (200, OPENMETRICS_TYPE));
        assert_eq!(r.body.as_str(), "m 1\n# EOF\n");
        for accept in [None, Some("*/*"), Some("text/plain")] {
            let r = route(&Method::Get, "/metrics", accept, metrics);
            assert_eq!((r.status, r.content_type), (200, PROMETHEUS_TYPE));
            assert_eq!(r.body.as_str(), "m 1\n");
        }
        assert_eq!(
            route(&Method::Get, "/metrics?x=1", None, metrics).status,
            200
        );
        assert_eq!(route(&Method::Head, "/metrics", None, metrics).status, 200);
        let index = route(&Method::Get, "/", None, metrics);
        assert_eq!(index.status, 200);
        assert!(index.body.contains("/metrics"));
        assert_eq!(route(&Method::Get, "/metricsx", None, metrics).status, 404);
        assert_eq!(route(&Method::Get, "/metrics/", None, metrics).status, 404);
        assert_eq!(route(&Method::Post, "/metrics", None, metrics).status, 405);
        assert_eq!(route(&Method::Delete, "/", None, metrics).status, 405);
        assert_eq!(route(&Method::Post, "/nope", None, metrics).status, 404);
    }

    #[test]
    fn parses_heads() {
        let rq = parse_head(
            b"GET /metrics HTTP/1.1\r\nHost: x\r\naccept:  application/openmetrics-text \r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            rq,
            Request {
                method: Method::Get,
                target: "/metrics",
                accept: Some("application/openmetrics-text"),
                keep_alive: true,
            }
        );
        let close = |h: &[u8]| !parse_head(h).unwrap().keep_alive;
        assert!(close(b"GET / HTTP/1.0\r\n\r\n"));
        assert!(close(
            b"GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n"
        ));
        assert!(close(b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\n"));
        assert!(close(
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        ));
        assert!(!close(b"GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n"));
        assert_eq!(
            parse_head(b"BREW / HTTP/1.1\r\n\r\n").unwrap().method,
            Method::Other
        );
        for bad in [
            &b"\x00\xff garbage\r\n\r\n"[..],
            b"GET /metrics\r\n\r\n",
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1 x\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\n folded: x\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nsp ace: x\r\n\r\n",
            b"GET /metrics FTP/1.1\r\n\r\n",
        ] {
            assert_eq!(
                parse_head(bad),
                Err(400),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(parse_head(b"GET /metrics HTTP/9.9\r\n\r\n"), Err(505));
    }

    #[test]
    fn answers_share_the_body_and_head_has_none() {
        let published: Published = Arc::new(RwLock::new(metrics()));
        let r = answer(b"GET /metrics HTTP/1.1\r\n\r\n", &published);
        let head = String::from_utf8(r.head.clone()).unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains("Content-Length: 4\r\n"), "{head}");
        assert!(!r.close && !head.contains("Connection"));
        let shared = published.read().unwrap().prometheus.clone();
        assert!(Arc::ptr_eq(r.body.as_ref().unwrap(), &shared));

        let r = answer(
            b"HEAD /metrics HTTP/1.1\r\nConnection: close\r\n\r\n",
            &published,
        );
        let head = String::from_utf8(r.head.clone()).unwrap();
        assert!(head.contains("Content-Length: 4\r\n") && head.contains("Connection: close\r\n"));
        assert!(r.body.is_none() && r.close);

        let r = answer(b"DELETE / HTTP/1.1\r\n\r\n", &published);
        let head = String::from_utf8(r.head).unwrap();
        assert!(
            head.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nAllow: GET, HEAD\r\n"), "{head}");
        let r = refusal(431);
        assert!(r.close && r.head.starts_with(b"HTTP/1.1 431 "));
    }
}
