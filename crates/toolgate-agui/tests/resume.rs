//! Resuming an interrupted run: approve, deny, edit, cancel, several at once.

mod common;

use common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn delete_turns() -> Value {
    json!([
        [{"type": "text", "text": "I will delete it."},
         {"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}}],
        [{"type": "text", "text": "Done."}]
    ])
}

/// Runs turn 1 ("delete notes.txt") and applies it to a fresh client.
async fn interrupted(server: &Server) -> Client {
    let mut client = Client::new();
    client.say("delete notes.txt");
    let events = server.run(client.input(None)).await;
    client.apply(&events);
    assert_eq!(client.interrupts.len(), 1, "{events:#?}");
    client
}

fn resolved(id: &str, payload: Value) -> Value {
    json!([{"interruptId": id, "status": "resolved", "payload": payload}])
}

fn tool_result(call: &str, tool: &str, output: Value) -> Value {
    json!({"role": "tool", "content": [{"type": "tool-result", "toolCallId": call, "toolName": tool, "output": output}]})
}

#[tokio::test]
async fn approval_runs_the_original_call_once_and_reports_it_before_the_new_text() {
    let server = Server::new(delete_turns());
    let mut client = interrupted(&server).await;
    let id = client.interrupt_ids().remove(0);
    let events = server.run(client.input(Some(resolved(&id, json!({"approved": true}))))).await;
    assert_eq!(
        events,
        vec![
            json!({"type": "RUN_STARTED", "threadId": "t1", "runId": "run2"}),
            json!({"type": "TOOL_CALL_RESULT", "messageId": "r2m1", "toolCallId": "call-1",
                "content": "{\"deleted\":\"notes.txt\"}", "role": "tool"}),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "r2m2", "role": "assistant"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "r2m2", "delta": "Done."}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "r2m2"}),
            json!({"type": "STATE_SNAPSHOT", "snapshot": {}}),
            json!({"type": "RUN_FINISHED", "threadId": "t1", "runId": "run2", "outcome": {"type": "success"}}),
        ]
    );
    assert_eq!(server.deletions.all(), ["notes.txt"]);
    assert_eq!(
        server.last_prompt()[2],
        tool_result("call-1", "delete_file", json!({"type": "json", "value": {"deleted": "notes.txt"}}))
    );

    // The next turn replays the conversation the client now holds; nothing runs again.
    client.apply(&events);
    assert_eq!(client.state, json!({}), "the pending list is cleared");
    let roles: Vec<&str> = client.messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    client.say("thanks");
    let events = server.run(client.input(None)).await;
    assert_eq!(events.last().unwrap()["outcome"], json!({"type": "success"}));
    assert_eq!(server.deletions.all(), ["notes.txt"], "the tool ran once");
    assert_eq!(
        server.last_prompt()[2],
        tool_result("call-1", "delete_file", json!({"type": "json", "value": {"deleted": "notes.txt"}}))
    );
}

#[tokio::test]
async fn denial_with_a_reason_reaches_the_model_now_and_on_later_turns() {
    let server = Server::new(delete_turns());
    let mut client = interrupted(&server).await;
    let id = client.interrupt_ids().remove(0);
    let events = server.run(client.input(Some(resolved(&id, json!({"approved": false, "reason": "keep it"}))))).await;
    assert_eq!(
        events[1],
        json!({"type": "TOOL_CALL_RESULT", "messageId": "r2m1", "toolCallId": "call-1",
            "content": "{\"denied\":true,\"reason\":\"keep it\"}", "role": "tool"})
    );
    let denied = tool_result("call-1", "delete_file", json!({"type": "execution-denied", "reason": "keep it"}));
    assert_eq!(server.last_prompt()[2], denied);
    assert!(server.deletions.all().is_empty());

    client.apply(&events);
    client.say("ok then");
    server.run(client.input(None)).await;
    assert_eq!(server.last_prompt()[2], denied, "the adapter's denial round-trips as execution-denied");
}

#[tokio::test]
async fn edited_arguments_run_instead_and_replace_the_call_in_the_conversation() {
    let server = Server::new(delete_turns());
    let mut client = interrupted(&server).await;
    let id = client.interrupt_ids().remove(0);
    let payload = json!({"approved": true, "editedArgs": {"path": "notes-old.txt"}});
    let events = server.run(client.input(Some(resolved(&id, payload)))).await;
    assert_eq!(server.deletions.all(), ["notes-old.txt"], "the edit ran, not the proposal");
    assert_eq!(
        kinds(&events),
        [
            "RUN_STARTED",
            "TOOL_CALL_RESULT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "MESSAGES_SNAPSHOT",
            "STATE_SNAPSHOT",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(
        first(&events, "MESSAGES_SNAPSHOT")["messages"],
        json!([
            {"id": "u1", "role": "user", "content": "delete notes.txt"},
            {"id": "r1m1", "role": "assistant", "content": "I will delete it.", "toolCalls": [{
                "id": "call-1", "type": "function",
                "function": {"name": "delete_file", "arguments": "{\"path\":\"notes-old.txt\"}"},
                "metadata": {"toolgate": {"originalArguments": "{\"path\":\"notes.txt\"}"}}
            }]},
            {"id": "r2m1", "role": "tool", "content": "{\"deleted\":\"notes-old.txt\"}", "toolCallId": "call-1"},
            {"id": "r2m2", "role": "assistant", "content": "Done."}
        ])
    );
    assert_eq!(server.last_prompt()[1]["content"][1]["input"], json!({"path": "notes-old.txt"}));

    client.apply(&events);
    client.say("thanks");
    server.run(client.input(None)).await;
    assert_eq!(server.last_prompt()[1]["content"][1]["input"], json!({"path": "notes-old.txt"}), "the edit stays");
    assert_eq!(server.deletions.all(), ["notes-old.txt"]);
}

#[tokio::test]
async fn a_cancelled_interrupt_is_a_denial() {
    let server = Server::new(delete_turns());
    let client = &mut interrupted(&server).await;
    let id = client.interrupt_ids().remove(0);
    let events = server.run(client.input(Some(json!([{"interruptId": id, "status": "cancelled"}])))).await;
    assert_eq!(first(&events, "TOOL_CALL_RESULT")["content"], "{\"denied\":true,\"reason\":\"cancelled\"}");
    assert_eq!(
        server.last_prompt()[2],
        tool_result("call-1", "delete_file", json!({"type": "execution-denied", "reason": "cancelled"}))
    );
    assert!(server.deletions.all().is_empty());
}

#[tokio::test]
async fn malformed_payloads_deny_and_say_which_entry_and_why() {
    let cases = [
        (json!({"approved": "yes"}), "`payload.approved` must be a boolean, got \"yes\""),
        (json!({"reason": "fine"}), "`payload.approved` is missing"),
        (json!({"approved": true, "editedArgs": ["x"]}), "`payload.editedArgs` must be an object, got [\"x\"]"),
        (json!({"approved": true, "reason": 5}), "`payload.reason` must be a string, got 5"),
        (json!(true), "`payload` must be an object, got true"),
    ];
    for (payload, problem) in cases {
        let server = Server::new(delete_turns());
        let client = &mut interrupted(&server).await;
        let id = client.interrupt_ids().remove(0);
        let events = server.run(client.input(Some(resolved(&id, payload)))).await;
        let reason = format!("resume entry 0 (interrupt `{id}`) is malformed: {problem}; the call was denied");
        let content: Value =
            serde_json::from_str(first(&events, "TOOL_CALL_RESULT")["content"].as_str().unwrap()).unwrap();
        assert_eq!(content, json!({"denied": true, "reason": reason}));
        assert_eq!(
            events.last().unwrap()["outcome"],
            json!({"type": "success"}),
            "a malformed entry does not fail the run"
        );
        assert!(server.deletions.all().is_empty(), "{problem}: fails closed");
    }

    let server = Server::new(delete_turns());
    let client = &mut interrupted(&server).await;
    let id = client.interrupt_ids().remove(0);
    let events = server.run(client.input(Some(json!([{"interruptId": id, "status": "approved"}])))).await;
    let content = first(&events, "TOOL_CALL_RESULT")["content"].as_str().unwrap().to_owned();
    assert!(
        content.contains("`status` must be \\\"resolved\\\" or \\\"cancelled\\\", got \\\"approved\\\""),
        "{content}"
    );
    assert!(server.deletions.all().is_empty());
}

#[tokio::test]
async fn two_interrupts_answered_in_one_resume() {
    let server = Server::new(json!([
        [{"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "a.txt"}},
         {"type": "tool-call", "toolCallId": "call-2", "toolName": "transfer_money", "input": {"amount": 5000, "to": "Bob"}}],
        [{"type": "text", "text": "Done."}]
    ]));
    let mut client = Client::new();
    client.say("clean up and pay Bob");
    let events = server.run(client.input(None)).await;
    client.apply(&events);
    let ids = client.interrupt_ids();
    assert_eq!(ids.len(), 2);
    assert_eq!(
        client.state["toolgate"]["pendingApprovals"],
        json!([
            {"interruptId": ids[0], "toolCallId": "call-1", "toolName": "delete_file"},
            {"interruptId": ids[1], "toolCallId": "call-2", "toolName": "transfer_money"}
        ])
    );
    assert_eq!(
        client.interrupts[1]["message"],
        "transfer_money needs approval: tool `transfer_money` requires approval"
    );
    assert_eq!(
        client.interrupts[1]["metadata"],
        json!({"kind": "approval", "toolName": "transfer_money", "input": {"amount": 5000, "to": "Bob"}})
    );

    let resume = json!([
        {"interruptId": ids[1], "status": "resolved", "payload": {"approved": false, "reason": "too much"}},
        {"interruptId": ids[0], "status": "resolved", "payload": {"approved": true}}
    ]);
    let events = server.run(client.input(Some(resume))).await;
    let mut results: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["type"] == "TOOL_CALL_RESULT")
        .map(|e| (e["toolCallId"].as_str().unwrap().to_owned(), e["content"].as_str().unwrap().to_owned()))
        .collect();
    results.sort();
    assert_eq!(
        results,
        [
            ("call-1".to_owned(), "{\"deleted\":\"a.txt\"}".to_owned()),
            ("call-2".to_owned(), "{\"denied\":true,\"reason\":\"too much\"}".to_owned())
        ]
    );
    assert!(!kinds(&events).contains(&"TOOL_CALL_START"), "calls of the previous run are not restarted");
    assert_eq!(server.deletions.all(), ["a.txt"]);
    let prompts = server.prompts();
    let outputs: Vec<&Value> = prompts[1][2]["content"].as_array().unwrap().iter().map(|p| &p["output"]).collect();
    assert_eq!(
        outputs,
        [
            &json!({"type": "json", "value": {"deleted": "a.txt"}}),
            &json!({"type": "execution-denied", "reason": "too much"})
        ]
    );
}

#[tokio::test]
async fn a_mixed_batch_runs_the_safe_calls_at_once_and_the_gated_ones_after_the_decision() {
    let server = Server::new(json!([
        [{"type": "tool-call", "toolCallId": "w", "toolName": "get_weather", "input": {"city": "Oslo"}},
         {"type": "tool-call", "toolCallId": "t-small", "toolName": "transfer_money", "input": {"amount": 50, "to": "Ann"}},
         {"type": "tool-call", "toolCallId": "d", "toolName": "delete_file", "input": {"path": "x.txt"}},
         {"type": "tool-call", "toolCallId": "t-big", "toolName": "transfer_money", "input": {"amount": 5000, "to": "Bob"}}],
        [{"type": "text", "text": "All settled."}]
    ]));
    let mut client = Client::new();
    client.say("do the errands");
    let events = server.run(client.input(None)).await;
    let answered: Vec<&str> =
        events.iter().filter(|e| e["type"] == "TOOL_CALL_RESULT").map(|e| e["toolCallId"].as_str().unwrap()).collect();
    assert_eq!(answered, ["w", "t-small"]);
    let streamed = client.apply(&events);
    assert_eq!(streamed, client.messages, "the snapshot matches the stream, results included");
    let pending: Vec<&str> = client.interrupts.iter().map(|i| i["toolCallId"].as_str().unwrap()).collect();
    assert_eq!(pending, ["d", "t-big"]);

    let ids = client.interrupt_ids();
    let resume = json!([
        {"interruptId": ids[0], "status": "resolved", "payload": {"approved": true, "editedArgs": {"path": "y.txt"}}},
        {"interruptId": ids[1], "status": "cancelled"}
    ]);
    let events = server.run(client.input(Some(resume))).await;
    assert_eq!(events.last().unwrap()["outcome"], json!({"type": "success"}));
    assert_eq!(server.deletions.all(), ["y.txt"]);
    let prompt = server.last_prompt();
    let outputs: Vec<(&str, &Value)> = prompt[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["toolCallId"].as_str().unwrap(), &p["output"]))
        .collect();
    assert_eq!(
        outputs,
        [
            ("w", &json!({"type": "json", "value": {"city": "Oslo", "temperatureC": 21, "condition": "sunny"}})),
            ("t-small", &json!({"type": "json", "value": {"transferred": 50, "to": "Ann"}})),
            ("d", &json!({"type": "json", "value": {"deleted": "y.txt"}})),
            ("t-big", &json!({"type": "execution-denied", "reason": "cancelled"}))
        ]
    );
}

#[tokio::test]
async fn a_placeholder_result_the_client_wrote_for_the_answered_call_is_dropped_and_the_tool_runs() {
    let server = Server::new(delete_turns());
    let mut client = interrupted(&server).await;
    let id = client.interrupt_ids().remove(0);
    // What @tanstack/ai-client puts in its history when the person approves.
    let placeholder = json!({"approved": true, "pendingExecution": true, "message": "User approved this action"});
    client.messages.push(json!({"id": "t1", "role": "tool", "toolCallId": "call-1",
        "content": placeholder.to_string()}));
    let events = server.run(client.input(Some(resolved(&id, json!({"approved": true}))))).await;
    let result = events.iter().find(|e| e["type"] == "TOOL_CALL_RESULT").expect("the tool ran");
    assert_eq!(
        serde_json::from_str::<Value>(result["content"].as_str().unwrap()).unwrap(),
        json!({"deleted": "notes.txt"})
    );
    let prompt = server.last_prompt();
    let outputs: Vec<&Value> = prompt
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|p| p["type"] == "tool-result")
        .map(|p| &p["output"])
        .collect();
    assert_eq!(outputs, vec![&json!({"type": "json", "value": {"deleted": "notes.txt"}})], "{prompt:#}");
}
