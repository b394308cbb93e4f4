//! The real `@modelcontextprotocol/server-everything`: annotation defaults,
//! error results, images, structured content, progress, and the streamable
//! HTTP transport.

mod support;

use futures::StreamExt;
use serde_json::{Value, json};
use support::*;
use toolgate::protocol::{ContentOutputPart, StreamPart};
use toolgate::{ModelMessage, TextRequest, ToolResultOutput, stream_text};
use toolgate_mcp::{McpServerConfig, McpTools};

async fn connect(trusted: bool) -> Option<McpTools> {
    let npm = NpmServers::get()?;
    Some(McpTools::connect(vec![npm.everything("ev").trusted(trusted)]).await.expect("the everything server connects"))
}

fn user(text: &str) -> Vec<ModelMessage> {
    messages(json!([{"role": "user", "content": text}]))
}

#[tokio::test]
async fn annotated_tools_get_the_right_defaults() {
    let Some(mcp) = connect(true).await else { return };
    let infos = mcp.tool_infos();
    let info = |name: &str| infos.iter().find(|info| info.name == name).unwrap_or_else(|| panic!("{name} listed"));
    for read_only in ["ev__echo", "ev__get-tiny-image", "ev__get-sum", "ev__trigger-long-running-operation"] {
        assert!(!info(read_only).approval.needs_approval, "{read_only} is read-only on a trusted server");
        assert!(info(read_only).approval.idempotent);
    }
    let logging = info("ev__toggle-simulated-logging");
    assert!(logging.approval.needs_approval, "not read-only");
    assert!(logging.approval.reason.contains("not marked readOnlyHint"), "{}", logging.approval.reason);
    let gzip = info("ev__gzip-file-as-resource");
    assert!(gzip.approval.needs_approval);
    assert!(gzip.approval.reason.contains("outside systems"), "{}", gzip.approval.reason);
    let tools = mcp.tools();
    let tool = |name: &str| tools.iter().find(|tool| tool.name() == name).unwrap().clone();
    assert!(tool("ev__gzip-file-as-resource").is_idempotent(), "idempotentHint from a trusted server");
    assert!(!tool("ev__toggle-simulated-logging").is_idempotent());
    mcp.shutdown().await;

    let Some(untrusted) = connect(false).await else { return };
    assert!(untrusted.tool_infos().iter().all(|info| info.approval.needs_approval), "nothing is believed");
    untrusted.shutdown().await;
}

#[tokio::test]
async fn a_tool_error_is_an_error_result() {
    let Some(mcp) = connect(true).await else { return };
    let model = calls("ev__get-resource-reference", json!({"resourceId": 0}));
    let result = run(&model, user("get resource 0"), mcp.toolkit().unwrap()).await;
    assert_eq!(
        first_output(&result),
        json!({"type": "error-text", "value": "Invalid resourceId: 0. Must be a finite positive integer."})
    );
    assert_eq!(result.text(), "done", "the conversation goes on");
    mcp.shutdown().await;
}

#[tokio::test]
async fn an_image_is_a_content_result_with_an_image_part() {
    let Some(mcp) = connect(true).await else { return };
    let model = calls("ev__get-tiny-image", json!({}));
    let result = run(&model, user("show me"), mcp.toolkit().unwrap()).await;
    let output = &result.steps[0].tool_results[0].output;
    let ToolResultOutput::Content { value: parts, .. } = output else { panic!("a content result: {output:?}") };
    assert!(matches!(&parts[0], ContentOutputPart::Text { text, .. } if text.contains("image you requested")));
    let ContentOutputPart::ImageData { data, media_type, .. } = &parts[1] else { panic!("an image part: {parts:?}") };
    assert_eq!(media_type, "image/png");
    assert!(data.starts_with("iVBOR"), "base64 PNG");
    assert_eq!(parts.len(), 3);
    mcp.shutdown().await;
}

#[tokio::test]
async fn structured_content_is_a_json_result_and_text_is_text() {
    let Some(mcp) = connect(true).await else { return };
    let model = calls("ev__get-structured-content", json!({"location": "Chicago"}));
    let result = run(&model, user("weather"), mcp.toolkit().unwrap()).await;
    let output = first_output(&result);
    assert_eq!(output["type"], "json");
    assert!(output["value"]["temperature"].is_number(), "{output}");

    let model = calls("ev__echo", json!({"message": "hi there"}));
    let result = run(&model, user("echo"), mcp.toolkit().unwrap()).await;
    assert_eq!(first_output(&result), json!({"type": "text", "value": "Echo: hi there"}));
    mcp.shutdown().await;
}

#[tokio::test]
async fn progress_notifications_are_preliminary_outputs() {
    let Some(mcp) = connect(true).await else { return };
    let model = calls("ev__trigger-long-running-operation", json!({"duration": 1, "steps": 2}));
    let request = TextRequest::new(user("work")).toolkit(mcp.toolkit().unwrap());
    let mut stream = stream_text(&model, request).await.unwrap();
    let mut results: Vec<(Option<bool>, Value)> = Vec::new();
    while let Some(part) = stream.next().await {
        if let StreamPart::ToolResult { preliminary, output, .. } = part {
            results.push((preliminary, output));
        }
    }
    let outcome = stream.finish().await.unwrap();
    assert_eq!(outcome.text(), "done");
    assert_eq!(
        results[..2],
        [(Some(true), json!({"progress": 1.0, "total": 2.0})), (Some(true), json!({"progress": 2.0, "total": 2.0}))]
    );
    let (preliminary, last) = results.last().unwrap();
    assert_eq!(*preliminary, None);
    assert!(last["content"][0]["text"].as_str().unwrap().contains("Long running operation completed"), "{last}");
    mcp.shutdown().await;
}

#[tokio::test]
async fn an_http_server_works_like_a_stdio_one() {
    let Some(npm) = NpmServers::get() else { return };
    let (mut process, url) = npm.everything_http();
    let mcp =
        McpTools::connect(vec![McpServerConfig::http("web", url).trusted(true)]).await.expect("connects over HTTP");
    assert!(mcp.tools().iter().any(|tool| tool.name() == "web__echo"));
    assert_eq!(mcp.server_pid("web"), None, "no process of ours");
    let model = calls("web__echo", json!({"message": "over http"}));
    let result = run(&model, user("echo"), mcp.toolkit().unwrap()).await;
    assert_eq!(first_output(&result), json!({"type": "text", "value": "Echo: over http"}));
    mcp.shutdown().await;
    let _ = process.kill();
    let _ = process.wait();
}
