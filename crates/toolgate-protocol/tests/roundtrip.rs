//! Round trips of AI SDK v6 ModelMessage JSON: what an AI SDK app stores reads
//! back unchanged, and serializes to the same JSON.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_protocol::{
    AssistantPart, ModelMessage, StreamPart, ToolCallInfo, ToolPart, ToolResultOutput, parse_messages,
};

fn round_trip(history: Value) {
    let messages = parse_messages(history.clone()).expect("parses");
    assert_eq!(serde_json::to_value(&messages).unwrap(), history);
    let again: Vec<ModelMessage> = serde_json::from_value(history.clone()).unwrap();
    assert_eq!(again, messages);
}

#[test]
fn approval_conversation_round_trips() {
    round_trip(json!([
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "delete /tmp/x"},
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "The user wants a deletion."},
            {"type": "text", "text": "Let me check."},
            {"type": "tool-call", "toolCallId": "call-1", "toolName": "deleteFile", "input": {"path": "/tmp/x"},
             "providerOptions": {"openai": {"itemId": "fc_1"}}},
            {"type": "tool-approval-request", "approvalId": "appr-1", "toolCallId": "call-1", "signature": "c2ln"}
        ]},
        {"role": "tool", "content": [
            {"type": "tool-approval-response", "approvalId": "appr-1", "approved": false, "reason": "no way"}
        ]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "call-1", "toolName": "deleteFile",
             "output": {"type": "execution-denied", "reason": "no way"}}
        ]},
        {"role": "assistant", "content": "Understood, I did not delete it."}
    ]));
}

#[test]
fn every_output_kind_round_trips() {
    let outputs = json!([
        {"type": "text", "value": "ok"},
        {"type": "json", "value": {"a": [1, 2.5, null]}},
        {"type": "execution-denied"},
        {"type": "error-text", "value": "boom"},
        {"type": "error-json", "value": {"code": 7}},
        {"type": "content", "value": [
            {"type": "text", "text": "see"},
            {"type": "media", "data": "AAA=", "mediaType": "image/png"},
            {"type": "file-data", "data": "AAA=", "mediaType": "application/pdf", "filename": "a.pdf"},
            {"type": "file-url", "url": "https://example.com/a"},
            {"type": "file-id", "fileId": {"openai": "file_1"}},
            {"type": "image-data", "data": "AAA=", "mediaType": "image/png"},
            {"type": "image-url", "url": "https://example.com/i.png"},
            {"type": "image-file-id", "fileId": "file_2"},
            {"type": "custom", "providerOptions": {"x": {"y": 1}}}
        ]}
    ]);
    let parts: Vec<Value> = outputs
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, output)| json!({"type": "tool-result", "toolCallId": format!("c{i}"), "toolName": "t", "output": output}))
        .collect();
    round_trip(json!([{"role": "tool", "content": parts}]));
}

#[test]
fn user_parts_and_provider_executed_parts_round_trip() {
    round_trip(json!([
        {"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "image": "https://example.com/cat.png", "mediaType": "image/png"},
            {"type": "file", "data": "AAA=", "mediaType": "application/pdf", "filename": "a.pdf"}
        ], "providerOptions": {"anthropic": {"cacheControl": {"type": "ephemeral"}}}},
        {"role": "assistant", "content": [
            {"type": "tool-call", "toolCallId": "mcp-1", "toolName": "mcp.create_short_url",
             "input": {"url": "https://x"}, "providerExecuted": true},
            {"type": "tool-approval-request", "approvalId": "mcpr_1", "toolCallId": "mcp-1"}
        ]},
        {"role": "tool", "content": [
            {"type": "tool-approval-response", "approvalId": "mcpr_1", "approved": true, "providerExecuted": true,
             "editedInput": {"url": "https://y"}}
        ]},
        {"role": "assistant", "content": [
            {"type": "tool-result", "toolCallId": "mcp-1", "toolName": "mcp.create_short_url",
             "output": {"type": "json", "value": {"short": "https://s/1"}}}
        ]}
    ]));
}

#[test]
fn explicit_nulls_from_js_clients_are_accepted() {
    let messages = parse_messages(json!([
        {"role": "tool", "content": [
            {"type": "tool-approval-response", "approvalId": "a", "approved": true, "reason": null, "providerExecuted": null}
        ], "providerOptions": null}
    ]))
    .unwrap();
    let ModelMessage::Tool(tool) = &messages[0] else { panic!("tool message") };
    let ToolPart::ToolApprovalResponse(response) = &tool.content[0] else { panic!("response") };
    assert_eq!(response.reason, None);
    assert!(response.approved);
}

#[test]
fn typed_parts_are_reachable() {
    let messages = parse_messages(json!([
        {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "c", "toolName": "t", "input": {"k": 1}}]}
    ]))
    .unwrap();
    let ModelMessage::Assistant(assistant) = &messages[0] else { panic!("assistant") };
    let AssistantPart::ToolCall(call) = &assistant.part_slice()[0] else { panic!("tool call") };
    assert_eq!(call.input, json!({"k": 1}));
    assert!(!call.is_provider_executed());
    assert_eq!(ToolResultOutput::from_value(json!("s")), ToolResultOutput::text("s"));
}

#[test]
fn stream_parts_use_full_stream_names() {
    let part = StreamPart::ToolApprovalRequest {
        approval_id: "apr_1".into(),
        tool_call: ToolCallInfo {
            tool_call_id: "call-1".into(),
            tool_name: "delete_file".into(),
            input: json!({"path": "a"}),
            provider_executed: None,
            dynamic: None,
            invalid: None,
            error: None,
            provider_metadata: None,
        },
        signature: None,
        reason: None,
        routing: None,
    };
    assert_eq!(
        serde_json::to_value(&part).unwrap(),
        json!({"type": "tool-approval-request", "approvalId": "apr_1",
               "toolCall": {"toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "a"}}})
    );
    let denied = StreamPart::ToolOutputDenied {
        tool_call_id: "c".into(),
        tool_name: "t".into(),
        provider_executed: None,
        reason: None,
    };
    assert_eq!(
        serde_json::to_value(&denied).unwrap(),
        json!({"type": "tool-output-denied", "toolCallId": "c", "toolName": "t"})
    );
}
