//! Servers that fail: missing commands, servers that speak no MCP or never
//! start, calls that hang or get garbage, servers that die mid-conversation,
//! and tool lists that change. None of them ends a conversation.

mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use support::*;
use toolgate::protocol::StreamPart;
use toolgate::{ModelMessage, TextRequest, stream_text};
use toolgate_mcp::{ConfigError, McpError, McpServerConfig, McpTools, ServerStatus};

fn user(text: &str) -> Vec<ModelMessage> {
    messages(json!([{"role": "user", "content": text}]))
}

/// The fake server (trusted, so its read-only tools run without approval),
/// with its notification log and refuse flag in a temp dir.
async fn fake(timeout: Duration) -> Option<(McpTools, tempfile::TempDir)> {
    let dir = tempfile::tempdir().unwrap();
    let config =
        fake_server("fake", &dir.path().join("log.jsonl"), &dir.path().join("refuse"))?.timeout(timeout).trusted(true);
    Some((McpTools::connect(vec![config]).await.expect("the fake server connects"), dir))
}

async fn call(mcp: &McpTools, tool: &str, input: Value) -> Value {
    let result = run(&calls(tool, input), user("go"), mcp.toolkit().unwrap()).await;
    assert_eq!(result.text(), "done", "the conversation goes on: {:#?}", result.steps);
    first_output(&result)
}

fn error_text(output: &Value) -> &str {
    assert_eq!(output["type"], "error-text", "an error result: {output}");
    output["value"].as_str().unwrap()
}

#[tokio::test]
async fn a_command_that_does_not_exist_is_a_typed_connect_error() {
    let config = McpServerConfig::stdio("nope", "toolgate-mcp-no-such-command", Vec::<String>::new());
    let error = McpTools::connect(vec![config]).await.unwrap_err();
    assert!(matches!(&error, McpError::Spawn { server, .. } if server == "nope"), "{error:?}");
    assert_eq!(error.server(), Some("nope"));
    assert!(error.to_string().contains("toolgate-mcp-no-such-command"), "{error}");
}

#[tokio::test]
async fn a_command_that_speaks_no_mcp_is_a_typed_connect_error_quoting_its_stderr() {
    let config = McpServerConfig::stdio("sh", "sh", ["-c", "echo 'this is no MCP server' >&2; echo hello"]);
    let error = McpTools::connect(vec![config]).await.unwrap_err();
    assert!(matches!(&error, McpError::Initialize { server, .. } if server == "sh"), "{error:?}");
    assert!(error.to_string().contains("this is no MCP server"), "{error}");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_at_startup() {
    let config = McpServerConfig::stdio("mute", "sh", ["-c", "sleep 30"]).startup_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let error = McpTools::connect(vec![config]).await.unwrap_err();
    assert!(matches!(&error, McpError::StartupTimeout { server, .. } if server == "mute"), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn invalid_configs_are_refused_before_anything_starts() {
    let mut both = McpServerConfig::stdio("both", "true", Vec::<String>::new());
    both.url = Some("http://127.0.0.1:1/mcp".into());
    let error = McpTools::connect(vec![both]).await.unwrap_err();
    assert!(matches!(error, McpError::Config(ConfigError::ConflictingTransports { .. })));
    let twice =
        vec![McpServerConfig::http("a", "http://127.0.0.1:1/"), McpServerConfig::http("a", "http://127.0.0.1:2/")];
    assert!(matches!(McpTools::connect(twice).await.unwrap_err(), McpError::Config(ConfigError::DuplicateName { .. })));
}

#[tokio::test]
async fn listings_are_paginated_sanitized_capped_and_skip_broken_schemas() {
    let Some((mcp, _dir)) = fake(Duration::from_secs(10)).await else { return };
    let names: Vec<String> = mcp.tools().iter().map(|tool| tool.name().to_owned()).collect();
    let long = names.iter().find(|name| name.starts_with("fake__lll")).expect("the long name is listed");
    assert_eq!(long.len(), 64);
    assert_eq!(
        names.iter().filter(|name| !name.starts_with("fake__lll")).cloned().collect::<Vec<_>>(),
        [
            "fake__echo",
            "fake__hang",
            "fake__garbage",
            "fake__crash",
            "fake__reject",
            "fake__slow",
            "fake__add_tool",
            "fake__dotted_name_x",
            "fake__dotted_name_x_2"
        ],
        "both pages; `bad.schema` and the tools that do not decode skipped"
    );
    let infos = mcp.tool_infos();
    assert_eq!(infos.iter().find(|info| info.name == "fake__dotted_name_x").unwrap().mcp_name, "dotted.name/x");
    let called = |name: &str| json!({"type": "text", "value": format!("called {name}")});
    assert_eq!(
        call(&mcp, "fake__dotted_name_x", json!({})).await,
        called("dotted.name/x"),
        "the server's own name is sent"
    );
    assert_eq!(call(&mcp, "fake__dotted_name_x_2", json!({})).await, called("dotted_name_x"));
    mcp.shutdown().await;
}

#[tokio::test]
async fn a_hanging_call_times_out_is_cancelled_and_the_server_stays_usable() {
    let Some((mcp, dir)) = fake(Duration::from_secs(1)).await else { return };
    let started = Instant::now();
    let output = call(&mcp, "fake__hang", json!({})).await;
    let text = error_text(&output);
    assert!(text.contains("`fake__hang`") && text.contains("did not answer within 1s"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let log = dir.path().join("log.jsonl");
    eventually(Duration::from_secs(5), "the cancellation to reach the server", || {
        logged(&log).iter().any(|n| n["method"] == "notifications/cancelled" && n["params"]["reason"] == "timed out")
    })
    .await;
    assert_eq!(
        call(&mcp, "fake__echo", json!({"text": "still here"})).await,
        json!({"type": "text", "value": "still here"})
    );
    mcp.shutdown().await;
}

#[tokio::test]
async fn garbage_and_rejections_are_typed_errors() {
    let Some((mcp, _dir)) = fake(Duration::from_secs(10)).await else { return };
    let output = call(&mcp, "fake__garbage", json!({})).await;
    assert!(error_text(&output).contains("not a tool result"), "{output}");
    let output = call(&mcp, "fake__reject", json!({})).await;
    let text = error_text(&output);
    assert!(
        text.contains("MCP server `fake` rejected the call to `fake__reject`") && text.contains("-32602"),
        "{text}"
    );
    assert_eq!(call(&mcp, "fake__echo", json!({"text": "ok"})).await, json!({"type": "text", "value": "ok"}));
    mcp.shutdown().await;
    let output = call(&mcp, "fake__echo", json!({"text": "after"})).await;
    assert!(error_text(&output).contains("has been shut down"), "{output}");
}

#[tokio::test]
async fn dropping_the_stream_cancels_the_mcp_request() {
    let Some((mcp, dir)) = fake(Duration::from_secs(30)).await else { return };
    let model = calls("fake__hang", json!({}));
    let mut stream = stream_text(&model, TextRequest::new(user("go")).toolkit(mcp.toolkit().unwrap())).await.unwrap();
    while let Some(part) = stream.next().await {
        if matches!(part, StreamPart::ToolCall(_)) {
            break;
        }
    }
    // Keep the engine going until the call reached the server, then walk away.
    let log = dir.path().join("log.jsonl");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !logged(&log).iter().any(|m| m["method"] == "tools/call" && m["params"]["name"] == "hang") {
        assert!(Instant::now() < deadline, "the call reaches the server");
        assert!(tokio::time::timeout(Duration::from_millis(20), stream.next()).await.is_err(), "the call hangs");
    }
    drop(stream);
    eventually(Duration::from_secs(5), "the cancellation to reach the server", || {
        logged(&log)
            .iter()
            .any(|n| n["method"] == "notifications/cancelled" && n["params"]["reason"] == "cancelled by the client")
    })
    .await;
    mcp.shutdown().await;
}

#[tokio::test]
async fn list_changed_relists_and_bumps_the_version() {
    let Some((mcp, _dir)) = fake(Duration::from_secs(10)).await else { return };
    let mut versions = mcp.subscribe();
    assert_eq!(*versions.borrow(), 0);
    assert!(!mcp.tools().iter().any(|tool| tool.name() == "fake__extra"));
    assert_eq!(call(&mcp, "fake__add_tool", json!({})).await, json!({"type": "text", "value": "added"}));
    tokio::time::timeout(Duration::from_secs(5), versions.changed()).await.expect("the version moves").unwrap();
    assert_eq!(mcp.version(), 1);
    assert!(mcp.tools().iter().any(|tool| tool.name() == "fake__extra"));
    assert_eq!(call(&mcp, "fake__extra", json!({})).await, json!({"type": "text", "value": "extra ran"}));
    mcp.shutdown().await;
}

#[tokio::test]
async fn a_dead_server_fails_fast_while_down_and_comes_back() {
    let Some((mcp, dir)) = fake(Duration::from_secs(10)).await else { return };
    let first_pid = mcp.server_pid("fake");
    assert!(first_pid.is_some());
    let refuse = dir.path().join("refuse");
    std::fs::write(&refuse, "").unwrap();
    let output = call(&mcp, "fake__crash", json!({})).await;
    assert!(error_text(&output).contains("closed the connection"), "{output}");

    eventually(Duration::from_secs(10), "the server to be seen down", || {
        matches!(mcp.status("fake"), Some(ServerStatus::Restarting { .. }))
    })
    .await;
    let started = Instant::now();
    let output = call(&mcp, "fake__echo", json!({"text": "anyone?"})).await;
    let text = error_text(&output);
    assert!(text.contains("MCP server `fake` is not running"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(1), "fails fast");
    eventually(Duration::from_secs(10), "a failed restart to be reported", || {
        matches!(mcp.status("fake"), Some(ServerStatus::Restarting { reason }) if reason.contains("refusing to start"))
    })
    .await;

    std::fs::remove_file(&refuse).unwrap();
    wait_running(&mcp, "fake", first_pid).await;
    assert_eq!(call(&mcp, "fake__echo", json!({"text": "back"})).await, json!({"type": "text", "value": "back"}));
    assert_eq!(mcp.version(), 0, "same tools after the restart");
    mcp.shutdown().await;
    assert_eq!(mcp.status("fake"), Some(ServerStatus::Stopped));
}

#[tokio::test]
async fn a_real_server_killed_mid_call_gives_an_error_result_and_is_restarted() {
    let Some(npm) = NpmServers::get() else { return };
    let mcp = McpTools::connect(vec![npm.everything("ev").trusted(true)]).await.unwrap();
    let pid = mcp.server_pid("ev").expect("a stdio server has a pid");
    let model = calls("ev__trigger-long-running-operation", json!({"duration": 20, "steps": 20}));
    let request = TextRequest::new(user("go")).toolkit(mcp.toolkit().unwrap());
    let mut stream = stream_text(&model, request).await.unwrap();
    let mut killed = false;
    while let Some(part) = stream.next().await {
        // Kill the server once the call is surely running: at its first progress report.
        if let StreamPart::ToolResult { preliminary: Some(true), .. } = part
            && !killed
        {
            kill(pid);
            killed = true;
        }
    }
    assert!(killed, "the call reported progress");
    let result = stream.finish().await.unwrap();
    assert_eq!(result.text(), "done", "the conversation goes on");
    let output = first_output(&result);
    let text = error_text(&output);
    assert!(text.contains("MCP server `ev` closed the connection"), "{text}");

    wait_running(&mcp, "ev", Some(pid)).await;
    let output = call(&mcp, "ev__echo", json!({"message": "again"})).await;
    assert_eq!(output, json!({"type": "text", "value": "Echo: again"}));
    mcp.shutdown().await;
}
