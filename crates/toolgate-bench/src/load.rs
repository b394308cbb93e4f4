//! A bounded load generator over loopback.
//!
//! C workers, each with its own keep-alive HTTP/1.1 connection (`TCP_NODELAY`),
//! send requests back to back and read every response body to its end. A run
//! stops starting requests once its duration is over or its request budget is
//! spent, whichever comes first; requests in flight then complete and count.
//! Only loopback addresses are accepted, and every request has a timeout.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{CONTENT_TYPE, HOST, HeaderValue};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::bodies::{first_turn_body, round_trip_continuation};
use crate::sse;

/// A server on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// Its address (loopback).
    pub addr: SocketAddr,
}

impl Target {
    /// Reads `http://127.0.0.1:PORT` (a path is ignored); refuses anything but loopback.
    pub fn parse(url: &str) -> anyhow::Result<Self> {
        let rest = url.strip_prefix("http://").with_context(|| format!("`{url}` is not an http:// URL"))?;
        let authority = rest.split('/').next().unwrap_or_default();
        let addr: SocketAddr = authority
            .replace("localhost", "127.0.0.1")
            .parse()
            .with_context(|| format!("`{url}`: expected http://127.0.0.1:PORT"))?;
        if !addr.ip().is_loopback() {
            bail!("`{url}` is not a loopback address: the bench only drives servers on this machine");
        }
        Ok(Self { addr })
    }
}

/// What each request is.
#[derive(Debug, Clone)]
pub enum Workload {
    /// The same `POST` body every time; the response must be a complete UI message stream.
    Post {
        /// The request path.
        path: String,
        /// The body.
        body: Bytes,
    },
    /// `GET` (e.g. `/healthz`): the response must be 200.
    Get {
        /// The request path.
        path: String,
    },
    /// Approval round trips on fresh conversations: the first turn (the
    /// server asks for an approval), then the approved continuation (the call
    /// runs). Two requests each, both timed.
    RoundTrip {
        /// The request path.
        path: String,
        /// Makes chat ids unique across runs against the same store.
        chat_prefix: String,
    },
}

/// When a run stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections, each sending requests back to back.
    pub connections: usize,
    /// No request starts after this much time.
    pub duration: Duration,
    /// No request starts after this many were started.
    pub max_requests: usize,
    /// The longest one request may take.
    pub timeout: Duration,
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Requests completed.
    pub requests: usize,
    /// From the start to the end of the last response.
    pub elapsed: Duration,
    /// Every request's latency, sorted.
    pub latencies: Vec<Duration>,
}

impl Outcome {
    /// Requests per second.
    pub fn throughput(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// The `p` quantile of the latencies (0.5 for the median), nearest rank.
    pub fn percentile(&self, p: f64) -> Duration {
        percentile(&self.latencies, p)
    }
}

/// The `p` quantile of sorted `values`, nearest rank; zero when empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Shared by the workers of one run: when to stop starting requests.
struct Budget {
    deadline: Instant,
    started: AtomicUsize,
    max: usize,
    failed: AtomicBool,
}

impl Budget {
    /// Claims `n` requests; false once the run is over.
    fn take(&self, n: usize) -> bool {
        !self.failed.load(Ordering::Relaxed)
            && Instant::now() < self.deadline
            && self.started.fetch_add(n, Ordering::Relaxed) < self.max
    }
}

/// One keep-alive connection, opened again if the server closed it.
struct Connection {
    target: Target,
    host: HeaderValue,
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl Connection {
    fn new(target: Target) -> anyhow::Result<Self> {
        let host = HeaderValue::from_str(&target.addr.to_string())?;
        Ok(Self { target, host, sender: None })
    }

    async fn connect(&mut self) -> anyhow::Result<&mut SendRequest<Full<Bytes>>> {
        if self.sender.as_ref().is_none_or(SendRequest::is_closed) {
            let stream = TcpStream::connect(self.target.addr)
                .await
                .with_context(|| format!("cannot connect to {}", self.target.addr))?;
            stream.set_nodelay(true)?;
            let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(async move {
                // Ends when the server or this side closes the connection.
                let _ = connection.await;
            });
            self.sender = Some(sender);
        }
        Ok(self.sender.as_mut().expect("connected above"))
    }

    /// Sends one request and reads the whole response body.
    async fn send(&mut self, method: Method, path: &str, body: Bytes) -> anyhow::Result<(StatusCode, Bytes)> {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, self.host.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(body))?;
        let sender = self.connect().await?;
        sender.ready().await?;
        let response = sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}

/// Sends one request within `timeout`; fails unless it is a 200 that passes `check`.
async fn timed(
    connection: &mut Connection,
    method: Method,
    path: &str,
    body: Bytes,
    timeout: Duration,
    latencies: &mut Vec<Duration>,
) -> anyhow::Result<Bytes> {
    let started = Instant::now();
    let (status, body) = tokio::time::timeout(timeout, connection.send(method, path, body))
        .await
        .with_context(|| format!("no complete response within {}", humantime::format_duration(timeout)))??;
    latencies.push(started.elapsed());
    if status != StatusCode::OK {
        bail!("HTTP {status}: {}", excerpt(&body));
    }
    Ok(body)
}

/// The start of a body, for error messages.
pub fn excerpt(body: &[u8]) -> String {
    const MAX: usize = 600;
    let text = String::from_utf8_lossy(&body[..body.len().min(MAX)]);
    if body.len() > MAX { format!("{text}… ({} bytes)", body.len()) } else { text.into_owned() }
}

async fn worker(
    index: usize,
    target: Target,
    workload: Arc<Workload>,
    limits: Limits,
    budget: Arc<Budget>,
) -> anyhow::Result<Vec<Duration>> {
    let mut connection = Connection::new(target)?;
    let mut latencies = Vec::new();
    let mut sequence = 0usize;
    let per_iteration = if matches!(*workload, Workload::RoundTrip { .. }) { 2 } else { 1 };
    while budget.take(per_iteration) {
        match &*workload {
            Workload::Post { path, body } => {
                let response =
                    timed(&mut connection, Method::POST, path, body.clone(), limits.timeout, &mut latencies).await?;
                if !sse::is_complete(&response) {
                    bail!("the stream does not end with `data: [DONE]`: {}", excerpt(&response));
                }
            }
            Workload::Get { path } => {
                timed(&mut connection, Method::GET, path, Bytes::new(), limits.timeout, &mut latencies).await?;
            }
            Workload::RoundTrip { path, chat_prefix } => {
                let chat_id = format!("{chat_prefix}-{index}-{sequence}");
                let user_id = format!("user-{index}-{sequence}");
                sequence += 1;
                let first = first_turn_body(&chat_id, &user_id);
                let response =
                    timed(&mut connection, Method::POST, path, first, limits.timeout, &mut latencies).await?;
                let text = String::from_utf8_lossy(&response);
                let issued = sse::issued_request(&text)
                    .map_err(|error| anyhow::anyhow!("first turn of {chat_id}: {error}: {}", excerpt(&response)))?;
                let continuation = round_trip_continuation(&chat_id, &user_id, &issued);
                let response =
                    timed(&mut connection, Method::POST, path, continuation, limits.timeout, &mut latencies).await?;
                sse::check_round_trip(&String::from_utf8_lossy(&response), &issued)
                    .map_err(|error| anyhow::anyhow!("continuation of {chat_id}: {error}: {}", excerpt(&response)))?;
            }
        }
    }
    Ok(latencies)
}

/// Drives `target` with `workload` within `limits`. Any failed request fails the run.
pub async fn run(target: Target, workload: Workload, limits: Limits) -> anyhow::Result<Outcome> {
    anyhow::ensure!(limits.connections > 0, "at least one connection");
    let workload = Arc::new(workload);
    let started = Instant::now();
    let budget = Arc::new(Budget {
        deadline: started + limits.duration,
        started: AtomicUsize::new(0),
        max: limits.max_requests.max(1),
        failed: AtomicBool::new(false),
    });
    let workers: Vec<_> = (0..limits.connections)
        .map(|index| {
            let (workload, budget) = (Arc::clone(&workload), Arc::clone(&budget));
            tokio::spawn(async move {
                let result = worker(index, target, workload, limits, Arc::clone(&budget)).await;
                if result.is_err() {
                    budget.failed.store(true, Ordering::Relaxed);
                }
                result
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut first_error = None;
    for handle in workers {
        match handle.await.context("a load worker panicked")? {
            Ok(mut worker_latencies) => latencies.append(&mut worker_latencies),
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    let elapsed = started.elapsed();
    if let Some(error) = first_error {
        return Err(error.context(format!("a request to {} failed", target.addr)));
    }
    latencies.sort_unstable();
    Ok(Outcome { requests: latencies.len(), elapsed, latencies })
}

/// Sends `body` once to `path` and returns the status and the whole response body.
pub async fn post_once(
    target: Target,
    path: &str,
    body: Bytes,
    timeout: Duration,
) -> anyhow::Result<(StatusCode, Bytes)> {
    let mut connection = Connection::new(target)?;
    tokio::time::timeout(timeout, connection.send(Method::POST, path, body))
        .await
        .with_context(|| format!("no complete response within {}", humantime::format_duration(timeout)))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_targets() {
        assert_eq!(Target::parse("http://127.0.0.1:3000").unwrap().addr.port(), 3000);
        assert_eq!(Target::parse("http://localhost:8080/api/chat").unwrap().addr.port(), 8080);
        assert!(Target::parse("http://[::1]:3000/").is_ok());
        assert!(Target::parse("http://10.0.0.1:3000").is_err());
        assert!(Target::parse("https://127.0.0.1:3000").is_err());
        assert!(Target::parse("127.0.0.1:3000").is_err());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&values, 0.5), Duration::from_millis(50));
        assert_eq!(percentile(&values, 0.99), Duration::from_millis(99));
        assert_eq!(percentile(&values, 1.0), Duration::from_millis(100));
        assert_eq!(percentile(&values[..1], 0.99), Duration::from_millis(1));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }
}
