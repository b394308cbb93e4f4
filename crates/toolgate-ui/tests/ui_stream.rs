//! UI messages in, UI chunks out: the AI SDK v6 round trip through the engine.

use futures::StreamExt;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::approval::ApprovalSigner;
use toolgate::{ScriptedModel, TextRequest, stream_text};
use toolgate_ui::{
    ChatRequest, ConvertError, EncoderOptions, SSE_DONE, UiChunk, UiStreamEncoder, convert_to_model_messages, sse_frame,
};

fn model() -> ScriptedModel {
    ScriptedModel::from_json(
        &json!({"turns": [
            [{"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "tmp/x"}}],
            [{"type": "text", "text": "Deleted it."}]
        ]})
        .to_string(),
    )
    .unwrap()
}

async fn respond(body: Value, signer: Option<ApprovalSigner>, signature_field: bool) -> (Vec<Value>, String) {
    let request = ChatRequest::from_json(body.to_string().as_bytes()).unwrap();
    let message_id = request.continued_message_id().unwrap_or("msg-new").to_owned();
    let messages = convert_to_model_messages(&request.messages).unwrap();
    let mut text_request = TextRequest::new(messages).toolkit(toolgate::demo::toolkit());
    if let Some(signer) = signer {
        text_request = text_request.approval_signer(signer.with_signature_field(signature_field));
    }
    let model = model();
    let mut stream = stream_text(&model, text_request).await.unwrap();
    let mut encoder = UiStreamEncoder::new(EncoderOptions { message_id, signature_field });
    let mut chunks = Vec::new();
    let mut sse = String::new();
    while let Some(part) = stream.next().await {
        for chunk in encoder.encode(&part) {
            sse.push_str(&sse_frame(&chunk));
            chunks.push(serde_json::to_value(&chunk).unwrap());
        }
    }
    sse.push_str(SSE_DONE);
    (chunks, sse)
}

fn without_deltas(chunks: &[Value]) -> Vec<Value> {
    chunks
        .iter()
        .filter(|c| !matches!(c["type"].as_str(), Some("tool-input-start" | "tool-input-delta" | "text-delta")))
        .cloned()
        .collect()
}

#[tokio::test]
async fn first_turn_asks_for_approval_in_the_canonical_sequence() {
    let body = json!({"id": "chat-1", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete tmp/x"}]}
    ]});
    let (chunks, sse) = respond(body, None, false).await;
    let approval_id = chunks.iter().find(|c| c["type"] == "tool-approval-request").unwrap()["approvalId"].clone();
    assert_eq!(
        without_deltas(&chunks),
        vec![
            json!({"type": "start", "messageId": "msg-new"}),
            json!({"type": "start-step"}),
            json!({"type": "tool-input-available", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "tmp/x"}}),
            json!({"type": "data-toolgate-reason", "id": "call-1", "data": {"toolCallId": "call-1", "decision": "ask",
                "reason": "tool `delete_file` requires approval", "approvalId": approval_id}}),
            json!({"type": "tool-approval-request", "approvalId": approval_id, "toolCallId": "call-1"}),
            json!({"type": "finish-step"}),
            json!({"type": "finish", "finishReason": "tool-calls"}),
        ]
    );
    assert_eq!(chunks[2], json!({"type": "tool-input-start", "toolCallId": "call-1", "toolName": "delete_file"}));
    assert!(sse.starts_with("data: {\"type\":\"start\""));
    assert!(sse.ends_with("data: [DONE]\n\n"));
}

#[tokio::test]
async fn approved_continuation_reuses_the_message_and_outputs_before_the_first_step() {
    // The body ai@6 sends after addToolApprovalResponse (reference §4.3).
    let body = json!({"id": "chat-1", "messages": [
        {"parts": [{"type": "text", "text": "delete tmp/x"}], "id": "G9ZT705yZEF7KW68", "role": "user"},
        {"id": "msg-a1", "role": "assistant", "parts": [{"type": "step-start"},
            {"type": "tool-delete_file", "toolCallId": "call-1", "state": "approval-responded", "input": {"path": "tmp/x"},
             "approval": {"id": "appr-1", "approved": true}}]}
    ], "trigger": "submit-message", "messageId": "msg-a1"});
    let (chunks, _) = respond(body, None, false).await;
    assert_eq!(
        without_deltas(&chunks),
        vec![
            json!({"type": "start", "messageId": "msg-a1"}),
            json!({"type": "tool-output-available", "toolCallId": "call-1", "output": {"deleted": "tmp/x"}}),
            json!({"type": "start-step"}),
            json!({"type": "text-start", "id": "1-0"}),
            json!({"type": "text-end", "id": "1-0"}),
            json!({"type": "finish-step"}),
            json!({"type": "finish", "finishReason": "stop"}),
        ]
    );
}

#[tokio::test]
async fn denied_continuation_sends_output_denied() {
    let body = json!({"id": "c", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete tmp/x"}]},
        {"id": "a1", "role": "assistant", "parts": [{"type": "step-start"},
            {"type": "tool-delete_file", "toolCallId": "call-1", "state": "approval-responded", "input": {"path": "tmp/x"},
             "approval": {"id": "appr-1", "approved": false, "reason": "no way", "signature": "sig-abc"}}]}
    ]});
    let (chunks, _) = respond(body, None, false).await;
    assert_eq!(
        chunks[1],
        json!({"type": "data-toolgate-reason", "id": "call-1",
            "data": {"toolCallId": "call-1", "decision": "deny", "reason": "no way"}})
    );
    assert_eq!(chunks[2], json!({"type": "tool-output-denied", "toolCallId": "call-1"}));
    assert_eq!(chunks[3], json!({"type": "start-step"}));
}

#[test]
fn conversion_follows_the_ai_sdk_rules() {
    let request = ChatRequest::from_json(
        json!({"id": "c", "messages": [
            {"id": "s", "role": "system", "parts": [{"type": "text", "text": "Be careful."}]},
            {"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"},
                {"type": "file", "url": "data:text/plain;base64,aGk=", "mediaType": "text/plain"},
                {"type": "data-progress", "data": {"x": 1}}]},
            {"id": "a", "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "text", "text": "Checking."},
                {"type": "tool-get_weather", "toolCallId": "w", "state": "output-available", "input": {"city": "Oslo"}, "output": {"temperatureC": 3}},
                {"type": "step-start"},
                {"type": "tool-delete_file", "toolCallId": "d", "state": "output-denied", "input": {"path": "a"},
                 "approval": {"id": "ad", "approved": false, "reason": "keep"}},
                {"type": "tool-delete_file", "toolCallId": "e", "state": "output-error", "input": {"path": "b"}, "errorText": "disk on fire",
                 "approval": {"id": "ae", "approved": true, "editedInput": {"path": "c"}}},
                {"type": "dynamic-tool", "toolName": "mcp.search", "toolCallId": "m", "state": "output-available", "input": {"q": "x"},
                 "output": {"hits": 1}, "providerExecuted": true},
                {"type": "tool-get_weather", "toolCallId": "s", "state": "input-streaming", "input": {"ci": 1}}
            ]}
        ]})
        .to_string()
        .as_bytes(),
    )
    .unwrap();
    let messages = serde_json::to_value(convert_to_model_messages(&request.messages).unwrap()).unwrap();
    assert_eq!(
        messages,
        json!([
            {"role": "system", "content": "Be careful."},
            {"role": "user", "content": [{"type": "text", "text": "hi"},
                {"type": "file", "data": "data:text/plain;base64,aGk=", "mediaType": "text/plain"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Checking."},
                {"type": "tool-call", "toolCallId": "w", "toolName": "get_weather", "input": {"city": "Oslo"}}]},
            {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "w", "toolName": "get_weather",
                "output": {"type": "json", "value": {"temperatureC": 3}}}]},
            {"role": "assistant", "content": [
                {"type": "tool-call", "toolCallId": "d", "toolName": "delete_file", "input": {"path": "a"}},
                {"type": "tool-approval-request", "approvalId": "ad", "toolCallId": "d"},
                {"type": "tool-call", "toolCallId": "e", "toolName": "delete_file", "input": {"path": "b"}},
                {"type": "tool-approval-request", "approvalId": "ae", "toolCallId": "e"},
                {"type": "tool-call", "toolCallId": "m", "toolName": "mcp.search", "input": {"q": "x"}, "providerExecuted": true},
                {"type": "tool-result", "toolCallId": "m", "toolName": "mcp.search", "output": {"type": "json", "value": {"hits": 1}}}
            ]},
            {"role": "tool", "content": [
                {"type": "tool-approval-response", "approvalId": "ad", "approved": false, "reason": "keep"},
                {"type": "tool-result", "toolCallId": "d", "toolName": "delete_file", "output": {"type": "execution-denied", "reason": "keep"}},
                {"type": "tool-approval-response", "approvalId": "ae", "approved": true, "editedInput": {"path": "c"}},
                {"type": "tool-result", "toolCallId": "e", "toolName": "delete_file", "output": {"type": "error-text", "value": "disk on fire"}}
            ]}
        ])
    );
}

#[test]
fn bad_bodies_name_what_is_wrong() {
    let error = |body: &str| ChatRequest::from_json(body.as_bytes()).unwrap_err();
    assert!(matches!(error("{"), ConvertError::InvalidJson(_)));
    assert!(matches!(error("[]"), ConvertError::InvalidBody(_)));
    assert!(matches!(error(r#"{"id": "c"}"#), ConvertError::InvalidBody(_)));
    let unknown = error(
        r#"{"messages": [{"id": "a", "role": "user", "parts": [{"type": "text", "text": "x"}, {"type": "hologram"}]}]}"#,
    );
    assert_eq!(
        unknown,
        ConvertError::InvalidMessage {
            message_index: 0,
            part_index: Some(1),
            detail: "unknown part type `hologram`".into()
        }
    );
    assert_eq!(unknown.to_string(), "invalid message 0, part 1: unknown part type `hologram`");
    let unanswered = error(
        r#"{"messages": [{"id": "a", "role": "assistant", "parts": [{"type": "tool-x", "toolCallId": "c", "state": "approval-responded", "input": {}, "approval": {"id": "p"}}]}]}"#,
    );
    assert!(unanswered.to_string().contains("approval.approved"), "{unanswered}");
    let strict_bool = error(
        r#"{"messages": [{"id": "a", "role": "assistant", "parts": [{"type": "tool-x", "toolCallId": "c", "state": "approval-responded", "input": {}, "approval": {"id": "p", "approved": "yes"}}]}]}"#,
    );
    assert!(strict_bool.to_string().contains("approval.approved"), "{strict_bool}");
    let bad_role = error(r#"{"messages": [{"id": "a", "role": "tool", "parts": []}]}"#);
    assert!(bad_role.to_string().contains("unknown role"), "{bad_role}");
}

#[tokio::test]
async fn signature_field_is_sent_only_when_configured() {
    let body =
        json!({"id": "c", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}]});
    let signer = ApprovalSigner::new("k").unwrap();
    let (plain, _) = respond(body.clone(), Some(signer.clone()), false).await;
    let request = plain.iter().find(|c| c["type"] == "tool-approval-request").unwrap();
    assert!(request.get("signature").is_none(), "ai@6.0.0 rejects unknown keys");
    assert!(request["approvalId"].as_str().unwrap().contains('.'), "the signature rides in the approval id");
    let (with_field, _) = respond(body, Some(signer), true).await;
    let request = with_field.iter().find(|c| c["type"] == "tool-approval-request").unwrap();
    assert!(request["signature"].is_string());
}

#[test]
fn chunks_parse_back() {
    let chunk = UiChunk::ToolOutputAvailable {
        tool_call_id: "c".into(),
        output: json!(1),
        provider_executed: None,
        dynamic: None,
        preliminary: Some(true),
    };
    let json = serde_json::to_value(&chunk).unwrap();
    assert_eq!(json, json!({"type": "tool-output-available", "toolCallId": "c", "output": 1, "preliminary": true}));
    assert_eq!(serde_json::from_value::<UiChunk>(json).unwrap(), chunk);
}
