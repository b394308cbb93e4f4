//! The client drives someone else's server: a stock Vercel AI SDK v6 backend
//! (`streamText` + `toUIMessageStream`, tools with `needsApproval`, a
//! scripted `LanguageModelV3`), started from `e2e/ai-sdk-backend`. Approve,
//! deny with a reason, edit, and two approvals in one step.

mod support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::ai_sdk_backend::AiSdkBackend;
use support::{last_text, pending_approval, tool_parts};
use toolgate_client::{Chat, ChatOptions, Decision, EditForm, HttpTransport, Status, ToolState};

/// A chat with the backend; stock servers take edits as a replaced input.
fn chat_with(backend: &AiSdkBackend) -> Chat {
    let options = ChatOptions { edit_form: EditForm::ReplaceInput, ..ChatOptions::default() };
    Chat::with_messages("chat-1", HttpTransport::new(backend.chat_url()), Vec::new(), options)
}

/// Every (tool, state) of the chat.
fn states(chat: &Chat) -> Vec<(String, ToolState)> {
    tool_parts(&chat.messages()).into_iter().map(|tool| (tool.tool_name, tool.state)).collect()
}

#[tokio::test]
async fn approve_runs_the_call_once_and_the_model_sees_the_result() {
    let Some(backend) = AiSdkBackend::start() else { return };
    let chat = chat_with(&backend);
    chat.send_message("delete /tmp/a").await.unwrap();
    assert_eq!(states(&chat), [("delete_file".to_owned(), ToolState::ApprovalRequested)]);
    assert!(backend.executions().await.is_empty(), "nothing runs before the answer");

    chat.add_tool_approval_response(
        &pending_approval(&chat, |tool| tool.tool_name == "delete_file"),
        Decision::Approve,
    )
    .await
    .unwrap();
    assert_eq!(chat.status(), Status::Ready, "{:?}", chat.error());
    assert_eq!(backend.executions().await, [json!({"tool": "delete_file", "input": {"path": "/tmp/a"}})]);
    assert_eq!(states(&chat), [("delete_file".to_owned(), ToolState::OutputAvailable)]);
    assert_eq!(chat.messages().len(), 2, "the continuation extends the assistant message");
    assert_eq!(last_text(&chat), r#"done: delete_file -> {"deleted":"/tmp/a"}"#);

    // A later message does not send the approval again (a stateless server would re-run it).
    chat.send_message("hello").await.unwrap();
    assert_eq!(last_text(&chat), "echo: hello");
    assert_eq!(backend.executions().await.len(), 1);
}

#[tokio::test]
async fn deny_with_a_reason_runs_nothing_and_the_model_gets_the_reason() {
    let Some(backend) = AiSdkBackend::start() else { return };
    let chat = chat_with(&backend);
    chat.send_message("delete /tmp/a").await.unwrap();
    let approval = pending_approval(&chat, |tool| tool.tool_name == "delete_file");
    chat.add_tool_approval_response(&approval, Decision::deny_because("not today")).await.unwrap();
    assert_eq!(states(&chat), [("delete_file".to_owned(), ToolState::OutputDenied)]);
    assert_eq!(last_text(&chat), "denied: delete_file (reason: not today)");
    assert_eq!(backend.executions().await, Vec::<Value>::new());
}

#[tokio::test]
async fn an_edit_runs_the_edited_input() {
    let Some(backend) = AiSdkBackend::start() else { return };
    let chat = chat_with(&backend);
    chat.send_message("delete /tmp/a").await.unwrap();
    let approval = pending_approval(&chat, |tool| tool.tool_name == "delete_file");
    chat.add_tool_approval_response(&approval, Decision::ApproveWithInput(json!({"path": "/tmp/b"}))).await.unwrap();
    assert_eq!(backend.executions().await, [json!({"tool": "delete_file", "input": {"path": "/tmp/b"}})]);
    assert_eq!(last_text(&chat), r#"done: delete_file -> {"deleted":"/tmp/b"}"#);
}

#[tokio::test]
async fn two_approvals_in_one_step_are_sent_together() {
    let Some(backend) = AiSdkBackend::start() else { return };
    let chat = chat_with(&backend);
    chat.send_message("delete /tmp/x and email bob@example.com").await.unwrap();
    let delete = pending_approval(&chat, |tool| tool.tool_name == "delete_file");
    let email = pending_approval(&chat, |tool| tool.tool_name == "send_email");
    chat.add_tool_approval_response(&email, Decision::deny_because("spam")).await.unwrap();
    assert_eq!(chat.messages().len(), 2, "one answer of two sends nothing");
    chat.add_tool_approval_response(&delete, Decision::Approve).await.unwrap();
    assert_eq!(backend.executions().await, [json!({"tool": "delete_file", "input": {"path": "/tmp/x"}})]);
    assert_eq!(
        states(&chat),
        [("delete_file".to_owned(), ToolState::OutputAvailable), ("send_email".to_owned(), ToolState::OutputDenied)]
    );
    let text = last_text(&chat);
    assert!(text.contains("done: delete_file") && text.contains("denied: send_email (reason: spam)"), "{text}");
}
