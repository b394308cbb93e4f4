//! Chat-message approvals (`{type: "tool-approval", toolCallId, approved}` in
//! a user message) and whole-message round trips.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_protocol::{LegacyToolApprovalPart, ModelMessage, UserContent, UserPart};
use toolgate_ui::{ConvertError, UiPart, convert_to_model_messages, parse_ui_messages};

fn user_parts(messages: &[ModelMessage]) -> Vec<UserPart> {
    match &messages[0] {
        ModelMessage::User(user) => match &user.content {
            UserContent::Parts(parts) => parts.clone(),
            UserContent::Text(text) => panic!("plain text {text}"),
        },
        other => panic!("not a user message: {other:?}"),
    }
}

#[test]
fn a_user_tool_approval_part_is_an_approval_keyed_by_the_call() {
    let messages = parse_ui_messages(json!([
        {"id": "u2", "role": "user", "parts": [
            {"type": "tool-approval", "toolCallId": "call-1", "approved": false, "reason": "not that one"},
            {"type": "text", "text": "delete the other one instead"},
            {"type": "tool-approval", "toolCallId": "call-2", "approved": true}
        ], "metadata": {"isToolApproval": true}}
    ]))
    .unwrap();
    assert_eq!(
        messages[0].parts[0],
        UiPart::ToolApproval { tool_call_id: "call-1".into(), approved: false, reason: Some("not that one".into()) }
    );
    let converted = convert_to_model_messages(&messages).unwrap();
    assert_eq!(
        user_parts(&converted),
        vec![
            UserPart::ToolApproval(LegacyToolApprovalPart {
                tool_call_id: "call-1".into(),
                approved: false,
                reason: Some("not that one".into())
            }),
            UserPart::Text(toolgate_protocol::TextPart::new("delete the other one instead")),
            UserPart::ToolApproval(LegacyToolApprovalPart {
                tool_call_id: "call-2".into(),
                approved: true,
                reason: None
            }),
        ]
    );
}

#[test]
fn malformed_user_approvals_name_the_message_part_and_field() {
    let cases = [
        (json!({"type": "tool-approval", "approved": true}), "toolCallId"),
        (json!({"type": "tool-approval", "toolCallId": "c", "approved": null}), "`approved`"),
        (json!({"type": "tool-approval", "toolCallId": "c", "approved": "yes"}), "`approved`"),
        (json!({"type": "tool-approval", "toolCallId": "c", "approved": true, "reason": 3}), "`reason`"),
    ];
    for (part, field) in cases {
        let error = parse_ui_messages(json!([
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
            {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "ok"}, part.clone()]}
        ]))
        .unwrap_err();
        let ConvertError::InvalidMessage { message_index, part_index, detail } = &error else { panic!("{error:?}") };
        assert_eq!((*message_index, *part_index), (1, Some(1)), "{part}");
        assert!(detail.contains(field), "{part}: {detail}");
    }
}

#[test]
fn in_an_assistant_message_tool_approval_is_a_tool_named_approval() {
    let messages = parse_ui_messages(json!([
        {"id": "a1", "role": "assistant", "parts": [
            {"type": "tool-approval", "toolCallId": "c9", "state": "output-available", "input": {}, "output": "fine"}
        ]}
    ]))
    .unwrap();
    let UiPart::Tool(part) = &messages[0].parts[0] else { panic!("{:?}", messages[0].parts[0]) };
    assert_eq!(part.tool_name, "approval");
    let missing_state = parse_ui_messages(json!([
        {"id": "a1", "role": "assistant", "parts": [{"type": "tool-approval", "toolCallId": "c9", "approved": true}]}
    ]));
    assert!(matches!(missing_state, Err(ConvertError::InvalidMessage { .. })));
}

#[test]
fn a_message_serializes_back_with_its_metadata_and_unknown_fields() {
    let original = json!([
        {"id": "u1", "role": "user", "createdAt": "2026-11-24T10:00:00.000Z", "metadata": {"isToolApproval": true},
         "parts": [
            {"type": "tool-approval", "toolCallId": "call-1", "approved": true},
            {"type": "tool-approval", "toolCallId": "call-2", "approved": false, "reason": "no"},
            {"type": "text", "text": "and then?"},
            {"type": "file", "url": "data:text/plain;base64,aGk=", "mediaType": "text/plain", "filename": "hi.txt"},
            {"type": "data-weather", "id": "d1", "data": {"c": 21}}
        ]},
        {"id": "a1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "text": "thinking"},
            {"type": "text", "text": "Deleting."},
            {"type": "tool-delete_file", "toolCallId": "call-1", "state": "approval-requested",
             "input": {"path": "a"}, "approval": {"id": "apr_1"}},
            {"type": "dynamic-tool", "toolName": "mcp.x", "toolCallId": "m1", "state": "output-available",
             "input": {}, "output": {"ok": true}, "providerExecuted": true},
            {"type": "source-url", "sourceId": "s", "url": "https://example.invalid"}
        ]}
    ]);
    let messages = parse_ui_messages(original.clone()).unwrap();
    assert_eq!(messages[0].extra.get("createdAt"), Some(&json!("2026-11-24T10:00:00.000Z")));
    let back: Value = serde_json::to_value(&messages).unwrap();
    assert_eq!(back, original);
    assert_eq!(parse_ui_messages(back).unwrap(), messages);
}
