//! Turn 1: a gated call pauses the run with an interrupt outcome.

mod common;

use common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::approval::{ApprovalSigner, HeldCalls, SignedCall};
use toolgate_agui::approval_response_schema;

fn delete_turns() -> Value {
    json!([
        [{"type": "text", "text": "I will delete it."},
         {"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}}],
        [{"type": "text", "text": "Done."}]
    ])
}

#[tokio::test]
async fn a_gated_call_pauses_the_run_with_snapshots_and_an_interrupt() {
    let server = Server::new(delete_turns());
    let mut client = Client::new();
    client.say("delete notes.txt");
    let events = server.run(client.input(None)).await;

    let call = json!({"id": "call-1", "type": "function",
        "function": {"name": "delete_file", "arguments": "{\"path\":\"notes.txt\"}"}});
    assert_eq!(
        events,
        vec![
            json!({"type": "RUN_STARTED", "threadId": "t1", "runId": "run1"}),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "r1m1", "role": "assistant"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "r1m1", "delta": "I "}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "r1m1", "delta": "will "}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "r1m1", "delta": "delete "}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "r1m1", "delta": "it."}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "r1m1"}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "call-1", "toolCallName": "delete_file", "parentMessageId": "r1m1"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "call-1", "delta": "{\"path\""}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "call-1", "delta": ":\"notes"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "call-1", "delta": ".txt\"}"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "call-1"}),
            json!({"type": "MESSAGES_SNAPSHOT", "messages": [
                {"id": "u1", "role": "user", "content": "delete notes.txt"},
                {"id": "r1m1", "role": "assistant", "content": "I will delete it.", "toolCalls": [call]}
            ]}),
            json!({"type": "STATE_SNAPSHOT", "snapshot": {"toolgate": {"pendingApprovals": [
                {"interruptId": "apr_n1", "toolCallId": "call-1", "toolName": "delete_file"}
            ]}}}),
            json!({"type": "RUN_FINISHED", "threadId": "t1", "runId": "run1", "outcome": {"type": "interrupt", "interrupts": [{
                "id": "apr_n1", "reason": "tool_call", "message": "delete_file needs approval: tool `delete_file` requires approval", "toolCallId": "call-1",
                "responseSchema": approval_response_schema(),
                "metadata": {"kind": "approval", "toolName": "delete_file", "input": {"path": "notes.txt"}}
            }]}}),
        ]
    );
    let streamed = client.apply(&events);
    assert_eq!(streamed, client.messages, "the snapshot is what the client built from the stream");
    assert!(server.deletions.all().is_empty(), "nothing ran");
}

#[tokio::test]
async fn signed_interrupt_ids_are_the_engines_signed_approval_ids() {
    let server = Server::new(delete_turns()).signed();
    let mut client = Client::new();
    client.say("delete notes.txt");
    let events = server.run(client.input(None)).await;
    client.apply(&events);

    let input = json!({"path": "notes.txt"});
    let call = SignedCall { tool_call_id: "call-1", tool_name: "delete_file", input: &input };
    let expected = ApprovalSigner::new("test secret").unwrap().issue("n1", call, &HeldCalls::none()).unwrap();
    assert_eq!(client.interrupt_ids(), vec![expected.approval_id.clone()]);
    assert!(expected.approval_id.starts_with("apr_n1."));
    assert_eq!(client.state["toolgate"]["pendingApprovals"][0]["interruptId"], json!(expected.approval_id));
}

#[tokio::test]
async fn the_callers_state_is_kept_next_to_toolgates_key() {
    let server = Server::new(delete_turns());
    let mut client = Client::new();
    client.state = json!({"theme": "dark", "cart": [1, 2]});
    client.say("delete notes.txt");
    let events = server.run(client.input(None)).await;
    client.apply(&events);
    assert_eq!(
        client.state,
        json!({"theme": "dark", "cart": [1, 2], "toolgate": {"pendingApprovals": [
            {"interruptId": "apr_n1", "toolCallId": "call-1", "toolName": "delete_file"}
        ]}})
    );
}

#[tokio::test]
async fn a_run_without_approvals_finishes_with_success_and_no_snapshots() {
    let server = Server::new(json!([
        [{"type": "tool-call", "toolCallId": "w1", "toolName": "get_weather", "input": {"city": "Oslo"}}],
        [{"type": "text", "text": "Sunny."}]
    ]));
    let mut client = Client::new();
    client.say("weather in Oslo?");
    let events = server.run(client.input(None)).await;
    assert_eq!(
        kinds(&events),
        [
            "RUN_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(
        first(&events, "TOOL_CALL_RESULT"),
        &json!({"type": "TOOL_CALL_RESULT", "messageId": "r1m2", "toolCallId": "w1",
            "content": "{\"city\":\"Oslo\",\"temperatureC\":21,\"condition\":\"sunny\"}", "role": "tool"})
    );
    assert_eq!(first(&events, "TEXT_MESSAGE_START")["messageId"], "r1m3", "each step is its own assistant message");
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "RUN_FINISHED", "threadId": "t1", "runId": "run1", "outcome": {"type": "success"}})
    );
}

#[tokio::test]
async fn client_executed_calls_are_left_pending_on_success() {
    let server = Server::new(json!([
        [{"type": "tool-call", "toolCallId": "ask-1", "toolName": "ask_user", "input": {"question": "Which file?"}}],
        [{"type": "text", "text": "Deleting notes.txt then."}]
    ]));
    let mut client = Client::new();
    client.say("delete a file");
    let events = server.run(client.input(None)).await;
    assert_eq!(events.last().unwrap()["outcome"], json!({"type": "success", "pendingToolCallIds": ["ask-1"]}));
    client.apply(&events);

    // The application answers the call and runs again; the answer reaches the model as a text result.
    client.messages.push(json!({"id": "a1", "role": "tool", "toolCallId": "ask-1", "content": "notes.txt"}));
    let events = server.run(client.input(None)).await;
    assert_eq!(events.last().unwrap()["outcome"], json!({"type": "success"}));
    assert_eq!(
        server.last_prompt()[2],
        json!({"role": "tool", "content": [{"type": "tool-result", "toolCallId": "ask-1", "toolName": "ask_user",
            "output": {"type": "text", "value": "notes.txt"}}]})
    );
}

#[tokio::test]
async fn reasoning_streams_as_reasoning_events() {
    let server = Server::new(json!([[{"type": "reasoning", "text": "Easy one."}, {"type": "text", "text": "Hi!"}]]));
    let mut client = Client::new();
    client.say("hello");
    let events = server.run(client.input(None)).await;
    assert_eq!(
        events[1..6].to_vec(),
        vec![
            json!({"type": "REASONING_START", "messageId": "r1m2"}),
            json!({"type": "REASONING_MESSAGE_START", "messageId": "r1m2", "role": "reasoning"}),
            json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1m2", "delta": "Easy "}),
            json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1m2", "delta": "one."}),
            json!({"type": "REASONING_MESSAGE_END", "messageId": "r1m2"}),
        ]
    );
    assert_eq!(events[6], json!({"type": "REASONING_END", "messageId": "r1m2"}));
    client.apply(&events);
    // Reasoning comes back as a `reasoning` message and is not replayed to the model.
    client.say("again");
    server.run(client.input(None)).await;
    let prompt = server.last_prompt();
    let roles: Vec<&str> = prompt.as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
}

#[tokio::test]
async fn a_model_failure_mid_stream_is_a_run_error() {
    let server =
        Server::new(json!([[{"type": "text", "text": "Let me"}, {"type": "error", "message": "connection reset"}]]));
    let mut client = Client::new();
    client.say("hi");
    let events = server.run(client.input(None)).await;
    assert_eq!(
        kinds(&events),
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_ERROR"
        ]
    );
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "RUN_ERROR", "message": "the model stream was cut off: connection reset", "code": "model_error"})
    );
}
