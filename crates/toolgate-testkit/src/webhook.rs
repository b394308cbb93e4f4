//! A webhook receiver for tests: records, verifies and answers as scripted.
//!
//! [`WebhookReceiver::start`] serves HTTP on a free port of 127.0.0.1 from a
//! thread with its own tokio runtime (so it works under any test runtime).
//! Every request, whatever its method and path, is recorded as a
//! [`ReceivedRequest`]: delivery id, event type, body, the attempt number for
//! its delivery id, and whether its `toolgate-signature` verified with
//! [`toolgate_notify::verify_signature`] (failures are also kept as texts,
//! see [`WebhookReceiver::signature_failures`]). Answers come from the queue
//! set by [`WebhookReceiver::respond_with`] (status and optional
//! `Retry-After` seconds), then 200.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header::RETRY_AFTER};
use axum::response::{IntoResponse, Response};
use tokio::sync::oneshot;
use toolgate_notify::{SIGNATURE_TOLERANCE, unix_now, verify_signature};

/// One request the receiver got.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest {
    /// The `toolgate-delivery` header (empty when absent).
    pub delivery_id: String,
    /// The `toolgate-event` header (empty when absent).
    pub event_type: String,
    /// The body as JSON (`Null` when it is not JSON).
    pub body: serde_json::Value,
    /// The body as sent.
    pub raw_body: Vec<u8>,
    /// The `toolgate-signature` header, when present.
    pub signature: Option<String>,
    /// Whether the signature verified (always true for an unsigned receiver).
    pub signature_ok: bool,
    /// 1 for the first request with this delivery id, 2 for the second, …
    pub attempt: usize,
    /// The status the receiver answered with.
    pub status: u16,
}

/// A delivery id's requests, summed up.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedDelivery {
    /// The delivery id.
    pub delivery_id: String,
    /// The event type of its last request.
    pub event_type: String,
    /// The body of its last request.
    pub body: serde_json::Value,
    /// How many requests carried it.
    pub attempts: usize,
}

#[derive(Default)]
struct Inner {
    secret: Option<Vec<u8>>,
    script: VecDeque<(u16, Option<u64>)>,
    requests: Vec<ReceivedRequest>,
    signature_failures: Vec<String>,
}

type Shared = Arc<Mutex<Inner>>;

fn lock(shared: &Shared) -> MutexGuard<'_, Inner> {
    shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running receiver; stops when dropped.
pub struct WebhookReceiver {
    addr: SocketAddr,
    shared: Shared,
    shutdown: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for WebhookReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookReceiver").field("addr", &self.addr).finish()
    }
}

impl WebhookReceiver {
    /// Starts a receiver that verifies every request's signature with `secret`.
    pub fn start(secret: impl Into<Vec<u8>>) -> WebhookReceiver {
        WebhookReceiver::start_with(Some(secret.into()))
    }

    /// Starts a receiver that checks no signature (for `slack` channels without a secret).
    pub fn start_unsigned() -> WebhookReceiver {
        WebhookReceiver::start_with(None)
    }

    fn start_with(secret: Option<Vec<u8>>) -> WebhookReceiver {
        let shared: Shared = Arc::new(Mutex::new(Inner { secret, ..Inner::default() }));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("cannot bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("cannot make the listener non-blocking");
        let addr = listener.local_addr().expect("the listener has an address");
        let (shutdown, stopped) = oneshot::channel::<()>();
        let app = Router::new().fallback(handle).with_state(Arc::clone(&shared));
        std::thread::Builder::new()
            .name(format!("webhook-receiver-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("cannot build the receiver's runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("cannot adopt the listener");
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(async move {
                            let _ = stopped.await;
                        })
                        .await;
                });
            })
            .expect("cannot start the receiver's thread");
        WebhookReceiver { addr, shared, shutdown: Some(shutdown) }
    }

    /// The URL to configure as the channel's `webhook`.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// Answers the next requests with these statuses (and `Retry-After`
    /// seconds), then with 200; replaces any queue left.
    pub fn respond_with(&self, script: Vec<(u16, Option<u64>)>) {
        lock(&self.shared).script = script.into();
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        lock(&self.shared).requests.clone()
    }

    /// The distinct delivery ids in order of first arrival, each with its last body.
    pub fn deliveries(&self) -> Vec<ReceivedDelivery> {
        let inner = lock(&self.shared);
        let mut out: Vec<ReceivedDelivery> = Vec::new();
        for request in &inner.requests {
            match out.iter_mut().find(|d| d.delivery_id == request.delivery_id) {
                Some(delivery) => {
                    delivery.event_type.clone_from(&request.event_type);
                    delivery.body.clone_from(&request.body);
                    delivery.attempts += 1;
                }
                None => out.push(ReceivedDelivery {
                    delivery_id: request.delivery_id.clone(),
                    event_type: request.event_type.clone(),
                    body: request.body.clone(),
                    attempts: 1,
                }),
            }
        }
        out
    }

    /// How many requests carried this delivery id.
    pub fn attempts(&self, delivery_id: &str) -> usize {
        lock(&self.shared).requests.iter().filter(|r| r.delivery_id == delivery_id).count()
    }

    /// Why signatures failed, one text per failing request.
    pub fn signature_failures(&self) -> Vec<String> {
        lock(&self.shared).signature_failures.clone()
    }

    /// Waits until `pred` holds for the requests so far and returns them;
    /// panics after `timeout`. Async, so the code under test keeps running on
    /// a single-threaded runtime.
    pub async fn wait_for(&self, pred: impl Fn(&[ReceivedRequest]) -> bool, timeout: Duration) -> Vec<ReceivedRequest> {
        let deadline = Instant::now() + timeout;
        loop {
            let requests = self.requests();
            if pred(&requests) {
                return requests;
            }
            assert!(Instant::now() < deadline, "the webhook receiver waited {timeout:?} in vain; it got {requests:#?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for WebhookReceiver {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

async fn handle(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let mut inner = lock(&shared);
    let delivery_id = header(&headers, "toolgate-delivery").unwrap_or_default();
    let signature = header(&headers, "toolgate-signature");
    let verdict = match (&inner.secret, &signature) {
        (None, _) => Ok(()),
        (Some(_), None) => Err("no toolgate-signature header".to_owned()),
        (Some(secret), Some(signature)) => {
            verify_signature(secret, signature, &body, unix_now(), SIGNATURE_TOLERANCE).map_err(|e| e.to_string())
        }
    };
    if let Err(why) = &verdict {
        inner.signature_failures.push(format!("delivery {delivery_id:?}: {why}"));
    }
    let (status, retry_after) = inner.script.pop_front().unwrap_or((200, None));
    let attempt = 1 + inner.requests.iter().filter(|r| r.delivery_id == delivery_id).count();
    inner.requests.push(ReceivedRequest {
        delivery_id,
        event_type: header(&headers, "toolgate-event").unwrap_or_default(),
        body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
        raw_body: body.to_vec(),
        signature,
        signature_ok: verdict.is_ok(),
        attempt,
        status,
    });
    drop(inner);
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, "ok").into_response();
    if let Some(secs) = retry_after {
        response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}
