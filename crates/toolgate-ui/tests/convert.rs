//! The two forms of the UI → model conversion: copying the UI messages and
//! moving out of them give the same model messages, for every kind of part.

use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate::protocol::{AssistantContent, AssistantPart, ModelMessage, ToolPart, ToolResultOutput, UserContent};
use toolgate_ui::{convert_to_model_messages, into_model_messages, parse_ui_messages};

#[test]
fn copying_and_moving_convert_alike() {
    let messages = parse_ui_messages(json!([
        {"id": "s", "role": "system", "parts": [{"type": "text", "text": "Be careful."}]},
        {"id": "u1", "role": "user", "metadata": {"big": [1, 2, 3]}, "createdAt": "2026-01-01", "parts": [
            {"type": "text", "text": "Clean up."},
            {"type": "file", "url": "data:text/plain;base64,aGk=", "mediaType": "text/plain", "filename": "a.txt"},
            {"type": "data-note", "data": {"ignored": true}}
        ]},
        {"id": "a1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "text": "Two files."},
            {"type": "text", "text": "Deleting."},
            {"type": "source-url", "sourceId": "s1", "url": "https://example.com"},
            {"type": "tool-delete_file", "toolCallId": "c1", "state": "output-available",
             "input": {"path": "a.txt"}, "output": {"deleted": "b.txt"},
             "approval": {"id": "ap1", "approved": true, "editedInput": {"path": "b.txt"}}},
            {"type": "data-toolgate-reason", "id": "c2",
             "data": {"toolCallId": "c2", "decision": "deny", "reason": "rule `keep` matched"}},
            {"type": "tool-delete_file", "toolCallId": "c2", "state": "output-denied", "input": {"path": "k.txt"}},
            {"type": "step-start"},
            {"type": "tool-get_weather", "toolCallId": "c3", "state": "output-error",
             "rawInput": "{\"city\":", "errorText": "bad input"},
            {"type": "dynamic-tool", "toolName": "search", "toolCallId": "c4", "state": "output-available",
             "input": {"q": "x"}, "output": ["r"], "providerExecuted": true},
            {"type": "tool-delete_file", "toolCallId": "c5", "state": "approval-responded",
             "input": {"path": "c.txt"}, "approval": {"id": "ap5", "approved": false, "reason": "no"}}
        ]},
        {"id": "u2", "role": "user", "parts": [
            {"type": "tool-approval", "toolCallId": "c9", "approved": true}
        ]}
    ]))
    .expect("valid UI messages");

    let copied = convert_to_model_messages(&messages).expect("convertible");
    let moved = into_model_messages(messages).expect("convertible");
    assert_eq!(copied, moved);
    assert_exact(&moved);

    // What the two agree on is the conversion, not nothing: the rule's reason
    // reaches the denied call, data parts do not reach the model.
    let tool_results: Vec<&ToolResultOutput> = moved
        .iter()
        .filter_map(|message| match message {
            ModelMessage::Tool(tool) => Some(&tool.content),
            _ => None,
        })
        .flatten()
        .filter_map(|part| match part {
            ToolPart::ToolResult(result) => Some(&result.output),
            ToolPart::ToolApprovalResponse(_) => None,
        })
        .collect();
    assert!(tool_results.contains(&&ToolResultOutput::denied(Some("rule `keep` matched".into()))), "{tool_results:?}");
    let provider_results = moved
        .iter()
        .filter_map(|message| match message {
            ModelMessage::Assistant(assistant) => Some(assistant.part_slice()),
            _ => None,
        })
        .flatten()
        .filter(|part| matches!(part, AssistantPart::ToolResult(_)))
        .count();
    assert_eq!(provider_results, 1, "the provider-executed result stays in the assistant message");
    assert_eq!(moved.len(), 7, "system, user, two steps of an assistant and a tool message each, user: {moved:#?}");
    assert!(!format!("{moved:?}").contains("ignored"), "a data part reached the model");
}

/// Every message's parts sit in a vector of their exact size: grown one push
/// at a time, a message of one or two parts would hold room for four, and a
/// long conversation would take twice the memory it needs.
fn assert_exact(messages: &[ModelMessage]) {
    for message in messages {
        let (len, capacity) = match message {
            ModelMessage::Assistant(assistant) => match &assistant.content {
                AssistantContent::Parts(parts) => (parts.len(), parts.capacity()),
                AssistantContent::Text(_) => continue,
            },
            ModelMessage::Tool(tool) => (tool.content.len(), tool.content.capacity()),
            ModelMessage::User(user) => match &user.content {
                UserContent::Parts(parts) => (parts.len(), parts.capacity()),
                UserContent::Text(_) => continue,
            },
            ModelMessage::System(_) => continue,
        };
        assert_eq!(len, capacity, "spare room in {message:?}");
    }
}
