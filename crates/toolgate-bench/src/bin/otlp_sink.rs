//! A local OTLP/HTTP trace collector for the benchmarks (`scripts/bench-traces.sh`):
//! `POST /v1/traces` decodes each `ExportTraceServiceRequest`, as a collector
//! must, and counts its spans; `GET /count` answers how many arrived. It keeps
//! nothing else.
//!
//! `otlp_sink [ADDR]` (default `127.0.0.1:4318`); prints `listening on ADDR`.
//! Loopback is up to the caller; it stops when killed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::{get, post};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:4318".to_owned());
    let spans = Arc::new(AtomicU64::new(0));
    let counted = spans.clone();
    let app = axum::Router::new()
        .route(
            "/v1/traces",
            post(move |body: Bytes| {
                let counted = counted.clone();
                async move {
                    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
                        return (StatusCode::BAD_REQUEST, Vec::new());
                    };
                    let received = request
                        .resource_spans
                        .iter()
                        .flat_map(|resource| &resource.scope_spans)
                        .map(|scope| scope.spans.len() as u64)
                        .sum::<u64>();
                    counted.fetch_add(received, Ordering::Relaxed);
                    (StatusCode::OK, Vec::new())
                }
            }),
        )
        .route("/count", get(move || async move { spans.load(Ordering::Relaxed).to_string() }));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on {}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
