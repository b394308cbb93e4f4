//! `POST /api/chat` does work linear in the size of its body: bytes allocated
//! for a conversation of K and of 4K answered approvals, end to end through
//! the router (parsing, UI conversion, the engine, the SSE response), grow
//! about 4x, not 16x.
//!
//! One test in this binary: the counting allocator is global.

use std::alloc::System;
use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use serde_json::json;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use toolgate::ScriptedModel;
use toolgate_server::{AppState, ApprovalSecret, ServerConfig, router};
use tower::ServiceExt;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const K: usize = 300;

/// A chat whose assistant message holds `k` steps, each with a denied
/// deletion: every answer is acted on before the model is called.
fn body(k: usize) -> Vec<u8> {
    let mut parts = Vec::new();
    for i in 0..k {
        parts.push(json!({"type": "step-start"}));
        parts.push(json!({"type": "tool-delete_file", "toolCallId": format!("d{i}"), "state": "approval-responded",
            "input": {"path": "a.txt"}, "approval": {"id": format!("apr_d{i}"), "approved": false, "reason": "no"}}));
    }
    json!({"id": "chat", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "tidy up"}]},
        {"id": "a1", "role": "assistant", "parts": parts}
    ]})
    .to_string()
    .into_bytes()
}

fn state(dir: &std::path::Path) -> AppState {
    let model = ScriptedModel::from_json(r#"{"turns": [[{"type": "text", "text": "ok"}]]}"#).unwrap();
    let secret = ApprovalSecret::resolve(Some("complexity-secret"), dir).unwrap();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), toolgate::demo::toolkit(), secret);
    config.max_body_bytes = 64 * 1024 * 1024;
    AppState::new(config, Arc::new(model)).unwrap()
}

/// Bytes allocated while the router answers `body` and the response is read.
fn bytes_allocated(runtime: &tokio::runtime::Runtime, state: &AppState, body: Vec<u8>) -> usize {
    let request = Request::post("/api/chat").header("content-type", "application/json").body(Body::from(body)).unwrap();
    let app = router(state.clone());
    let region = Region::new(GLOBAL);
    let text = runtime.block_on(async {
        let response = app.oneshot(request).await.unwrap();
        assert_eq!(response.status(), 200);
        response.into_body().collect().await.unwrap().to_bytes()
    });
    let allocated = region.change().bytes_allocated;
    let text = String::from_utf8_lossy(&text);
    assert!(text.contains(r#""type":"tool-output-denied""#) && text.ends_with("data: [DONE]\n\n"), "{text}");
    allocated
}

#[test]
fn a_chat_request_costs_work_linear_in_its_size() {
    let dir = std::env::temp_dir().join(format!("toolgate-complexity-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let state = state(&dir);
    // Warm up once-per-process allocations (the schema validators, tracing).
    bytes_allocated(&runtime, &state, body(4));
    let small = bytes_allocated(&runtime, &state, body(K));
    let large = bytes_allocated(&runtime, &state, body(4 * K));
    let ratio = large as f64 / small as f64;
    println!("/api/chat: {small} bytes for K = {K}, {large} for 4K, ratio {ratio:.2}");
    std::fs::remove_dir_all(&dir).ok();
    assert!(ratio < 6.0, "4x the conversation allocates {ratio:.1}x the bytes");
}
