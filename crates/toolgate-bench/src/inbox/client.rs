//! A keep-alive HTTP/1.1 client for one principal (`Authorization: Bearer`),
//! sending one request at a time over one connection (`TCP_NODELAY`),
//! reopened if the server closed it; and inbox streams
//! (`GET /api/approvals/stream`), each on its own connection.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::load::excerpt;

/// The longest one request may take.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// One principal's connection to the server.
#[derive(Debug)]
pub struct Client {
    addr: SocketAddr,
    host: HeaderValue,
    authorization: HeaderValue,
    sender: Option<SendRequest<Full<Bytes>>>,
}

/// A response: its status, body, and how long it took to read it all.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The whole body.
    pub body: Bytes,
    /// From sending the request to the end of the body.
    pub elapsed: Duration,
}

impl Answer {
    /// The body as JSON, if the status is 200.
    pub fn json(&self) -> anyhow::Result<serde_json::Value> {
        if self.status != StatusCode::OK {
            bail!("HTTP {}: {}", self.status, excerpt(&self.body));
        }
        serde_json::from_slice(&self.body).context("the response is not JSON")
    }
}

impl Client {
    /// A client of the server at `addr` (loopback) with this bearer token.
    pub fn new(addr: SocketAddr, token: &str) -> anyhow::Result<Self> {
        anyhow::ensure!(addr.ip().is_loopback(), "{addr} is not a loopback address");
        Ok(Self {
            addr,
            host: HeaderValue::from_str(&addr.to_string())?,
            authorization: HeaderValue::from_str(&format!("Bearer {token}"))?,
            sender: None,
        })
    }

    /// Sends the requests from now on with this bearer token (another principal, the same connection).
    pub fn set_token(&mut self, token: &str) -> anyhow::Result<()> {
        self.authorization = HeaderValue::from_str(&format!("Bearer {token}"))?;
        Ok(())
    }

    async fn sender(&mut self) -> anyhow::Result<&mut SendRequest<Full<Bytes>>> {
        if self.sender.as_ref().is_none_or(SendRequest::is_closed) {
            let (sender, _) = handshake(self.addr).await?;
            self.sender = Some(sender);
        }
        Ok(self.sender.as_mut().expect("connected above"))
    }

    /// Sends one request and reads the whole response, within [`TIMEOUT`].
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> anyhow::Result<Answer> {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, self.host.clone())
            .header(AUTHORIZATION, self.authorization.clone());
        let body = match body {
            Some(json) => {
                request = request.header(CONTENT_TYPE, "application/json");
                Bytes::from(serde_json::to_vec(&json)?)
            }
            None => Bytes::new(),
        };
        let request = request.body(Full::new(body))?;
        let exchange = async {
            let sender = self.sender().await?;
            sender.ready().await?;
            let started = Instant::now();
            let response = sender.send_request(request).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            anyhow::Ok(Answer { status, body, elapsed: started.elapsed() })
        };
        tokio::time::timeout(TIMEOUT, exchange).await.with_context(|| format!("no answer within {TIMEOUT:?}"))?
    }

    /// `GET path`.
    pub async fn get(&mut self, path: &str) -> anyhow::Result<Answer> {
        self.send(Method::GET, path, None).await
    }

    /// `POST /api/approvals/{id}` with `{"decision": "approve"}`.
    pub async fn approve(&mut self, approval_id: &str) -> anyhow::Result<Answer> {
        let body = serde_json::json!({"decision": "approve"});
        self.send(Method::POST, &format!("/api/approvals/{approval_id}"), Some(body)).await
    }

    /// Opens `GET /api/approvals/stream` on a connection of its own.
    pub async fn open_stream(&self) -> anyhow::Result<Stream> {
        let (mut sender, connection) = handshake(self.addr).await?;
        let request = Request::builder()
            .method(Method::GET)
            .uri("/api/approvals/stream")
            .header(HOST, self.host.clone())
            .header(AUTHORIZATION, self.authorization.clone())
            .header(ACCEPT, "text/event-stream")
            .body(Full::new(Bytes::new()))?;
        sender.ready().await?;
        let response = sender.send_request(request).await?;
        if response.status() != StatusCode::OK {
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            bail!("the stream answered HTTP {status}: {}", excerpt(&body));
        }
        Ok(Stream { body: response.into_body(), _sender: sender, connection })
    }
}

/// An open inbox stream: its body, and the task driving its connection
/// (aborted when the stream is dropped, which closes the connection).
#[derive(Debug)]
pub struct Stream {
    /// The event stream.
    pub body: Incoming,
    _sender: SendRequest<Full<Bytes>>,
    connection: JoinHandle<()>,
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.connection.abort();
    }
}

/// Connects to `addr` and performs the HTTP/1.1 handshake; the connection runs in a task.
async fn handshake(addr: SocketAddr) -> anyhow::Result<(SendRequest<Full<Bytes>>, JoinHandle<()>)> {
    let stream = TcpStream::connect(addr).await.with_context(|| format!("cannot connect to {addr}"))?;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // Ends when the server or this side closes the connection.
    let task = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok((sender, task))
}
