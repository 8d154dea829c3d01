//! The HTTP side: which path gets what, and the worker loop that answers.
//!
//! Workers only read the last published text (an `Arc` swapped in by the
//! collection side), so a slow or stuck scraper never holds up an interval.
//! tiny_http parses requests; malformed ones get its 400 and are closed.

use std::io::Cursor;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use tiny_http::{Header, Method, Request, Response, Server, StatusCode};

use super::encode::{OPENMETRICS_TYPE, PROMETHEUS_TYPE};

/// One interval's metrics in both formats.
#[derive(Debug, Default)]
pub struct Exposition {
    pub openmetrics: Arc<String>,
    pub prometheus: Arc<String>,
}

/// The latest exposition; replaced whole on every interval.
pub type Published = Arc<RwLock<Arc<Exposition>>>;

const INDEX: &str = "throttlescope Prometheus exporter

GET /metrics   metrics of the last interval: OpenMetrics when the Accept
               header asks for it (Prometheus does), else text format 0.0.4

Metric names and labels: docs/metrics.md
";

/// What to answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Arc<String>,
}

/// Routes one request: GET (or HEAD) of `/metrics` or `/`; any other path
/// is 404, any other method on a known path 405. `/metrics` is OpenMetrics
/// when the client's `accept` header names it (Prometheus does), else the
/// Prometheus text format.
pub fn route(
    method: &Method,
    url: &str,
    accept: Option<&str>,
    metrics: impl FnOnce() -> Arc<Exposition>,
) -> Reply {
    let path = url.split(['?', '#']).next().unwrap_or("");
    let text = |status, body: &str| Reply {
        status,
        content_type: "text/plain; charset=utf-8",
        body: Arc::new(body.to_string()),
    };
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

/// The body without copying the shared text.
struct SharedBody(Arc<String>);

impl AsRef<[u8]> for SharedBody {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// Request line and headers past this many bytes get 431: a scrape needs a
/// few hundred. (tiny_http has read them by then; this keeps the answer
/// honest, not the memory bounded: see docs/metrics.md, Security.)
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

fn header_bytes(rq: &Request) -> usize {
    rq.url().len()
        + rq.headers()
            .iter()
            .map(|h| h.field.as_str().as_str().len() + h.value.as_str().len() + 4)
            .sum::<usize>()
}

fn answer(rq: Request, published: &Published) {
    if header_bytes(&rq) > MAX_HEADER_BYTES {
        let body = format!("request headers over {MAX_HEADER_BYTES} bytes\n");
        let _ = rq.respond(Response::from_string(body).with_status_code(431));
        return;
    }
    let accept = rq
        .headers()
        .iter()
        .find(|h| h.field.equiv("Accept"))
        .map(|h| h.value.as_str().to_string());
    let reply = route(rq.method(), rq.url(), accept.as_deref(), || {
        published.read().unwrap_or_else(|e| e.into_inner()).clone()
    });
    let mut headers = vec![
        Header::from_bytes("Content-Type", reply.content_type).expect("static header is valid")
    ];
    if reply.status == 405 {
        headers.push(Header::from_bytes("Allow", "GET, HEAD").expect("static header is valid"));
    }
    let len = reply.body.len();
    let response = Response::new(
        StatusCode(reply.status),
        headers,
        Cursor::new(SharedBody(reply.body)),
        Some(len),
        None,
    );
    // A client that went away is its own problem, not the exporter's.
    let _ = rq.respond(response);
}

/// Answers requests until `stop` is set and the server unblocked.
pub fn worker(server: Arc<Server>, published: Published, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Acquire) {
        // Err: unblocked for shutdown, or a failed accept (already
        // reported to that client); either way look at `stop` again.
        if let Ok(rq) = server.recv() {
            answer(rq, &published);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
