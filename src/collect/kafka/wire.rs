//! One connection to one broker over Kafka's protocol, PLAINTEXT only: the
//! messages are `kafka-protocol`'s (generated from Kafka's own schemas);
//! here are only the frame (a 4-byte size), the headers, the version
//! negotiation and the bounds (a deadline on every read and write, a
//! largest response).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The largest response read: a DescribeGroups of a batch of groups with
/// their assignments is the biggest the lookup asks for.
pub(crate) const MAX_RESPONSE: usize = 16 << 20;
const CLIENT_ID: &str = "throttlescope";

/// What the lookups cost the cluster, since start.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Cost {
    pub requests: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// Why a lookup failed, in words that say what to do.
#[derive(Debug)]
pub(crate) struct Failure(pub String);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Failure {}

pub(crate) struct Conn {
    stream: TcpStream,
    addr: String,
    correlation: i32,
    deadline: Instant,
    /// The broker's supported versions, per API key.
    versions: Vec<(i16, i16, i16)>,
    /// Whether a request after ApiVersions has been answered: a connection
    /// closed before it is a TLS or SASL listener's doing.
    answered: bool,
}

impl Conn {
    /// Connects to `addr` and negotiates versions with ApiVersions, all
    /// by `deadline`.
    pub(crate) fn open(addr: &str, deadline: Instant, cost: &mut Cost) -> Result<Conn> {
        let sock = resolve(addr)?;
        let left = remaining(deadline, addr)?;
        let stream = TcpStream::connect_timeout(&sock, left).map_err(|e| match e.kind() {
            ErrorKind::ConnectionRefused => anyhow!(Failure(format!(
                "{addr}: connection refused: is a broker listening there? give --kafka \
                 HOST:PORT of its PLAINTEXT listener, or --kafka off"
            ))),
            ErrorKind::TimedOut | ErrorKind::WouldBlock => anyhow!(Failure(format!(
                "{addr}: no connection within {}: is the address reachable from this \
                 namespace?",
                crate::shared::units::secs(left.as_secs_f64())
            ))),
            _ => anyhow!(Failure(format!("{addr}: {e}"))),
        })?;
        stream.set_nodelay(true).ok();
        let mut c = Conn {
            stream,
            addr: addr.to_string(),
            correlation: 0,
            deadline,
            versions: Vec::new(),
            answered: false,
        };
        // Version 0 is what every broker since 0.10 answers, whatever it
        // supports (a newer request could be refused by an older broker).
        let r: ApiVersionsResponse = c
            .call_at(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default(), cost)
            .map_err(|e| {
                if e.downcast_ref::<Failure>().is_some() {
                    e
                } else {
                    anyhow!(Failure(format!(
                        "{addr}: no Kafka answer to ApiVersions ({e:#}): a TLS listener (SSL, \
                         SASL_SSL) or a broker older than 0.10? throttlescope speaks PLAINTEXT \
                         only: give --kafka a PLAINTEXT listener, or --kafka off"
                    )))
                }
            })?;
        if r.error_code != 0 {
            bail!(Failure(format!(
                "{addr}: ApiVersions refused (error {}): too old a broker?",
                r.error_code
            )));
        }
        c.versions = r
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        c.answered = false;
        Ok(c)
    }

    /// The highest version of `key` both sides know, None when none.
    pub(crate) fn version(&self, key: ApiKey, ours: (i16, i16)) -> Option<i16> {
        let &(_, min, max) = self.versions.iter().find(|v| v.0 == key as i16)?;
        let v = max.min(ours.1);
        (v >= min.max(ours.0)).then_some(v)
    }

    /// `req` at the highest common version of `key` within `ours`.
    pub(crate) fn call<Q: Encodable, R: Decodable>(
        &mut self,
        key: ApiKey,
        ours: (i16, i16),
        req: impl Fn(i16) -> Q,
        cost: &mut Cost,
    ) -> Result<(R, i16)> {
        let Some(v) = self.version(key, ours) else {
            bail!(Failure(format!(
                "{}: the broker supports no version of {key:?} this build knows \
                 ({}..={}): too old or too new a broker",
                self.addr, ours.0, ours.1
            )));
        };
        let r = self.call_at(key, v, &req(v), cost).map_err(|e| {
            if self.answered || e.downcast_ref::<Failure>().is_some() {
                e
            } else {
                anyhow!(Failure(format!(
                    "{}: the broker answered ApiVersions but not {key:?} ({e:#}): a SASL \
                     listener that wants authentication? throttlescope speaks PLAINTEXT only: \
                     give --kafka a PLAINTEXT listener, or --kafka off",
                    self.addr
                )))
            }
        })?;
        self.answered = true;
        Ok((r, v))
    }

    fn call_at<Q: Encodable, R: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Q,
        cost: &mut Cost,
    ) -> Result<R> {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
        let mut body = BytesMut::new();
        header.encode(&mut body, key.request_header_version(version))?;
        req.encode(&mut body, version)?;
        let mut frame = Vec::with_capacity(body.len() + 4);
        frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
        frame.extend_from_slice(&body);
        self.stream
            .set_write_timeout(Some(remaining(self.deadline, &self.addr)?))?;
        self.stream.write_all(&frame)?;
        cost.requests += 1;
        cost.bytes_sent += frame.len() as u64;

        let mut size = [0u8; 4];
        self.read_exact(&mut size)?;
        let n = i32::from_be_bytes(size);
        if size[0] == 0x15 && size[1] == 0x03 {
            bail!(Failure(format!(
                "{}: the answer is a TLS alert: an SSL or SASL_SSL listener; throttlescope \
                 speaks PLAINTEXT only: give --kafka a PLAINTEXT listener, or --kafka off",
                self.addr
            )));
        }
        if n < 0 || n as usize > MAX_RESPONSE {
            bail!(Failure(format!(
                "{}: a {key:?} response of {n} bytes, past the lookup's bound of {} MiB",
                self.addr,
                MAX_RESPONSE >> 20
            )));
        }
        let mut buf = vec![0u8; n as usize];
        self.read_exact(&mut buf)?;
        cost.bytes_received += 4 + n as u64;
        let mut buf = Bytes::from(buf);
        let h = ResponseHeader::decode(&mut buf, key.response_header_version(version))?;
        if h.correlation_id != self.correlation {
            bail!(
                "{}: response to request {} came for {}",
                self.addr,
                self.correlation,
                h.correlation_id
            );
        }
        R::decode(&mut buf, version)
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<()> {
        self.stream
            .set_read_timeout(Some(remaining(self.deadline, &self.addr)?))?;
        self.stream.read_exact(buf).map_err(|e| match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => anyhow!(Failure(format!(
                "{}: no answer before the lookup's deadline",
                self.addr
            ))),
            ErrorKind::UnexpectedEof => anyhow!("the broker closed the connection"),
            _ => anyhow!("{e}"),
        })
    }
}

/// Time left before `deadline`, an error when none.
fn remaining(deadline: Instant, addr: &str) -> Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left < Duration::from_millis(1) {
        bail!(Failure(format!("{addr}: the lookup's deadline passed")));
    }
    Ok(left)
}

/// `HOST:PORT` to one address (the first the resolver gives).
pub(crate) fn resolve(addr: &str) -> Result<SocketAddr> {
    addr.to_socket_addrs()
        .map_err(|e| anyhow!(Failure(format!("{addr}: cannot resolve ({e})"))))?
        .next()
        .ok_or_else(|| anyhow!(Failure(format!("{addr}: resolves to no address"))))
}
