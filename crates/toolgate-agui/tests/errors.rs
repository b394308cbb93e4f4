//! Resumes that do not answer every pending interrupt exactly once, tampered
//! state and messages, and bad input: typed errors, `RUN_ERROR`, nothing runs.

mod common;

use common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_agui::{AguiError, InputError, ResumeError, RunAgentInput, prepare_run};

fn two_deletions() -> Value {
    json!([
        [{"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "a.txt"}},
         {"type": "tool-call", "toolCallId": "call-2", "toolName": "delete_file", "input": {"path": "b.txt"}}],
        [{"type": "text", "text": "Done."}]
    ])
}

/// Turn 1 with two pending deletions, applied to a fresh client.
async fn interrupted(server: &Server) -> (Client, Vec<String>) {
    let mut client = Client::new();
    client.say("delete a.txt and b.txt");
    let events = server.run(client.input(None)).await;
    client.apply(&events);
    let ids = client.interrupt_ids();
    assert_eq!(ids.len(), 2);
    (client, ids)
}

fn approve(id: &str) -> Value {
    json!({"interruptId": id, "status": "resolved", "payload": {"approved": true}})
}

/// Runs the input, expects `RUN_STARTED` + `RUN_ERROR` and nothing else, and returns the error.
async fn run_error(server: &Server, input: Value) -> Value {
    let prompts_before = server.prompts().len();
    let events = server.run(input).await;
    assert_eq!(kinds(&events), ["RUN_STARTED", "RUN_ERROR"], "{events:#?}");
    assert_eq!(server.prompts().len(), prompts_before, "the model is not called");
    assert!(server.deletions.all().is_empty(), "nothing runs");
    events[1].clone()
}

fn prepared_error(input: &Value) -> AguiError {
    prepare_run(&RunAgentInput::from_value(input.clone()).unwrap()).unwrap_err()
}

#[tokio::test]
async fn a_pending_interrupt_without_an_entry_fails_the_run() {
    let server = Server::new(two_deletions());
    let (mut client, ids) = interrupted(&server).await;
    let input = client.input(Some(json!([approve(&ids[0])])));
    assert_eq!(
        prepared_error(&input),
        AguiError::Resume(ResumeError::MissingEntries { interrupt_ids: vec![ids[1].clone()] })
    );
    assert_eq!(
        run_error(&server, input).await,
        json!({"type": "RUN_ERROR", "message": format!("pending interrupts have no resume entry: {}", ids[1]),
            "code": "missing_resume_entry"})
    );

    // A new message without a resume does not skip the pending approvals either.
    client.say("never mind");
    let input = client.input(None);
    assert_eq!(prepared_error(&input), AguiError::Resume(ResumeError::MissingEntries { interrupt_ids: ids.clone() }));
    assert_eq!(run_error(&server, input).await["code"], "missing_resume_entry");
}

#[tokio::test]
async fn an_entry_for_an_interrupt_that_is_not_pending_fails_the_run() {
    let server = Server::new(two_deletions());
    let (mut client, ids) = interrupted(&server).await;
    let input = client.input(Some(json!([approve(&ids[0]), approve("apr_made_up"), approve(&ids[1])])));
    assert_eq!(
        prepared_error(&input),
        AguiError::Resume(ResumeError::UnknownInterrupt { index: 1, interrupt_id: "apr_made_up".into() })
    );
    assert_eq!(
        run_error(&server, input).await,
        json!({"type": "RUN_ERROR", "message": "resume entry 1: interrupt `apr_made_up` is not pending",
            "code": "unknown_interrupt"})
    );
}

#[tokio::test]
async fn two_entries_for_one_interrupt_fail_the_run() {
    let server = Server::new(two_deletions());
    let (mut client, ids) = interrupted(&server).await;
    let deny = json!({"interruptId": ids[0], "status": "resolved", "payload": {"approved": false}});
    let input = client.input(Some(json!([approve(&ids[0]), approve(&ids[1]), deny])));
    assert_eq!(
        prepared_error(&input),
        AguiError::Resume(ResumeError::DuplicateEntry { index: 2, first_index: 0, interrupt_id: ids[0].clone() })
    );
    let error = run_error(&server, input).await;
    assert_eq!(error["code"], "duplicate_resume_entry");
    assert_eq!(error["message"], format!("resume entry 2: interrupt `{}` was already answered by entry 0", ids[0]));
}

#[tokio::test]
async fn a_resume_without_the_pending_state_fails_the_run() {
    let server = Server::new(two_deletions());
    let (mut client, ids) = interrupted(&server).await;
    client.state = json!({});
    let input = client.input(Some(json!([approve(&ids[0]), approve(&ids[1])])));
    assert_eq!(
        prepared_error(&input),
        AguiError::Resume(ResumeError::NoPendingInterrupts { index: 0, interrupt_id: ids[0].clone() })
    );
    assert_eq!(run_error(&server, input).await["code"], "no_pending_interrupts");

    client.state = json!({"toolgate": {"pendingApprovals": "everything"}});
    let input = client.input(Some(json!([approve(&ids[0]), approve(&ids[1])])));
    assert!(matches!(prepared_error(&input), AguiError::Resume(ResumeError::InvalidState { .. })));
    assert_eq!(run_error(&server, input).await["code"], "invalid_state");
}

#[tokio::test]
async fn a_tampered_state_is_rejected_by_the_signature_check() {
    let server = Server::new(two_deletions()).signed();
    let (mut client, ids) = interrupted(&server).await;
    // Swap which call each signed interrupt is for.
    let pending = &mut client.state["toolgate"]["pendingApprovals"];
    pending[0]["toolCallId"] = json!("call-2");
    pending[1]["toolCallId"] = json!("call-1");
    let error = run_error(&server, client.input(Some(json!([approve(&ids[0]), approve(&ids[1])])))).await;
    assert_eq!(error["code"], "invalid_approval_signature");
    assert_eq!(
        error["message"],
        format!(
            "tool approval signature verification failed for approval `{}` (tool call `call-2`): invalid signature",
            ids[0]
        )
    );
}

#[tokio::test]
async fn tampered_arguments_are_rejected_by_the_signature_check() {
    let server = Server::new(two_deletions()).signed();
    let (mut client, ids) = interrupted(&server).await;
    client.messages[1]["toolCalls"][0]["function"]["arguments"] = json!("{\"path\":\"/etc/passwd\"}");
    let error = run_error(&server, client.input(Some(json!([approve(&ids[0]), approve(&ids[1])])))).await;
    assert_eq!(error["code"], "invalid_approval_signature");
}

#[tokio::test]
async fn signed_approvals_that_were_not_tampered_with_run() {
    let server = Server::new(two_deletions()).signed();
    let (mut client, ids) = interrupted(&server).await;
    let events = server.run(client.input(Some(json!([approve(&ids[0]), approve(&ids[1])])))).await;
    assert_eq!(events.last().unwrap()["outcome"], json!({"type": "success"}));
    assert_eq!(server.deletions.all(), ["a.txt", "b.txt"]);
}

#[tokio::test]
async fn a_pending_interrupt_must_match_the_messages() {
    let server = Server::new(two_deletions());
    let (mut client, ids) = interrupted(&server).await;
    let resume = json!([approve(&ids[0]), approve(&ids[1])]);

    client.state["toolgate"]["pendingApprovals"][1]["toolName"] = json!("get_weather");
    let input = client.input(Some(resume.clone()));
    assert_eq!(
        prepared_error(&input),
        AguiError::Resume(ResumeError::ToolNameMismatch {
            interrupt_id: ids[1].clone(),
            tool_call_id: "call-2".into(),
            pending: "get_weather".into(),
            found: "delete_file".into(),
        })
    );
    assert_eq!(run_error(&server, input).await["code"], "interrupt_tool_mismatch");

    client.state["toolgate"]["pendingApprovals"][1]["toolName"] = json!("delete_file");
    client.state["toolgate"]["pendingApprovals"][1]["toolCallId"] = json!("call-9");
    let input = client.input(Some(resume));
    assert_eq!(
        prepared_error(&input),
        AguiError::Resume(ResumeError::ToolCallNotFound {
            interrupt_id: ids[1].clone(),
            tool_call_id: "call-9".into()
        })
    );
    assert_eq!(run_error(&server, input).await["code"], "interrupt_tool_call_not_found");
}

#[tokio::test]
async fn bad_messages_fail_with_their_index() {
    let server = Server::new(two_deletions());
    let base = json!({"threadId": "t1", "runId": "r1", "messages": [
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "a1", "role": "assistant", "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":"}}
        ]}
    ]});
    assert_eq!(
        prepared_error(&base),
        AguiError::Input(InputError::InvalidToolArguments {
            index: 1,
            tool_call_id: "c1".into(),
            detail: "EOF while parsing a value at line 1 column 8".into()
        })
    );
    assert_eq!(run_error(&server, base).await["code"], "invalid_tool_arguments");

    let orphan = json!({"threadId": "t1", "runId": "r1", "messages": [
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "x1", "role": "tool", "toolCallId": "nope", "content": "{}"}
    ]});
    assert_eq!(
        prepared_error(&orphan),
        AguiError::Input(InputError::UnknownToolCall { index: 1, tool_call_id: "nope".into() })
    );

    let not_object = json!({"threadId": "t1", "runId": "r1", "state": [1, 2], "messages": []});
    assert_eq!(prepared_error(&not_object), AguiError::Input(InputError::StateNotObject));
    assert_eq!(run_error(&server, not_object).await["code"], "invalid_state");
}

#[test]
fn unknown_roles_and_malformed_entries_are_rejected_when_decoding() {
    let input = json!({"threadId": "t", "runId": "r", "messages": [
        {"id": "1", "role": "user", "content": "hi"},
        {"id": "2", "role": "robot", "content": "beep"}
    ]});
    let error = RunAgentInput::from_value(input).unwrap_err();
    assert_eq!(error, InputError::UnknownRole { index: 1, role: "robot".into() });
    assert_eq!(error.code(), "unknown_role");
    assert_eq!(error.to_string(), "message 1: unknown role `robot`");

    let input = json!({"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "user"}]});
    assert!(matches!(RunAgentInput::from_value(input), Err(InputError::InvalidMessage { index: 0, .. })));

    let input = json!({"threadId": "t", "runId": "r", "messages": [], "resume": [{"interruptId": "a"}, {"status": "resolved"}]});
    assert_eq!(
        RunAgentInput::from_value(input).unwrap_err(),
        InputError::InvalidResumeEntry { index: 1, detail: "`interruptId` is missing".into() }
    );

    let error = RunAgentInput::from_json(b"{\"threadId\": 1}").unwrap_err();
    assert_eq!(error.code(), "invalid_input");
}
