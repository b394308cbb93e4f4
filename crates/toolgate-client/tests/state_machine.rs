//! The chat's state machine through its public API, with a transport whose
//! responses the test writes chunk by chunk: answers mid-stream, answers in
//! either order, chained approvals, denials, edits, client results, errors,
//! stop and resume. Every test counts the requests the chat made.

mod support;

use futures::{Stream, StreamExt};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::{TestTransport, approval_response, text_of, text_response, tool_parts};
use toolgate_client::{
    ApprovalForm, Chat, ChatEvent, ChatOptions, ClientError, Decision, EditForm, Status, ToolOutput, ToolState,
    UiMessage, UiPart,
};

fn new_chat(options: ChatOptions) -> (Chat, TestTransport) {
    let transport = TestTransport::default();
    (Chat::with_messages("chat-1", transport.clone(), Vec::new(), options), transport)
}

/// Waits for the first event matching `matches`.
async fn wait_for(events: &mut (impl Stream<Item = ChatEvent> + Unpin), matches: impl Fn(&ChatEvent) -> bool) {
    let wait = async {
        while let Some(event) = events.next().await {
            if matches(&event) {
                return;
            }
        }
        panic!("the chat's events ended");
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), wait).await.expect("waited 10 s for an event");
}

fn approval_requested(approval: &'static str) -> impl Fn(&ChatEvent) -> bool {
    move |event| matches!(event, ChatEvent::ApprovalRequested { approval_id, .. } if approval_id == approval)
}

/// A tool part of a message list, as JSON (what went over the wire).
fn tool_part(messages: &[UiMessage], call_id: &str) -> Value {
    let part = tool_parts(messages)
        .into_iter()
        .find(|tool| tool.tool_call_id == call_id)
        .unwrap_or_else(|| panic!("no tool part {call_id}"));
    serde_json::to_value(UiPart::Tool(Box::new(part))).unwrap()
}

fn state_of(chat: &Chat, call_id: &str) -> ToolState {
    serde_json::from_value(tool_part(&chat.messages(), call_id)["state"].clone()).unwrap()
}

/// Sends `text` on a task of its own (so the test can answer while it streams).
fn send_in_background(chat: &Chat, text: &str) -> tokio::task::JoinHandle<Result<(), ClientError>> {
    let chat = chat.clone();
    let text = text.to_owned();
    tokio::spawn(async move { chat.send_message(text).await })
}

#[tokio::test]
async fn an_answer_given_mid_stream_is_sent_when_the_stream_ends() {
    let (chat, transport) = new_chat(ChatOptions::default());
    let mut events = chat.subscribe();
    let first = transport.respond();
    let sending = send_in_background(&chat, "delete notes.txt");
    approval_response(&first, "m1", &[("c1", "delete_file", json!({"path": "notes.txt"}))]);
    wait_for(&mut events, approval_requested("ap-c1")).await;

    let second = transport.respond();
    chat.add_tool_approval_response("ap-c1", Decision::Approve).await.unwrap();
    assert_eq!(transport.requests().len(), 1, "nothing is sent while the first response streams");
    assert_eq!(state_of(&chat, "c1"), ToolState::ApprovalResponded);

    first.chunk(json!({"type": "finish", "finishReason": "tool-calls"}));
    first.end();
    transport.wait_for_requests(2).await;
    second.chunk(json!({"type": "start", "messageId": "m1"}));
    second.chunk(json!({"type": "tool-output-available", "toolCallId": "c1", "output": {"deleted": "notes.txt"}}));
    text_response(&second, "deleted");
    second.end();
    sending.await.unwrap().unwrap();

    let requests = transport.requests();
    assert_eq!(requests.len(), 2, "the answer is sent exactly once");
    let sent = tool_part(&requests[1].messages, "c1");
    assert_eq!(sent["state"], "approval-responded");
    assert_eq!(sent["approval"], json!({"id": "ap-c1", "approved": true}));
    assert_eq!(requests[1].message_id.as_deref(), Some("m1"), "the continuation names the message it extends");
    let messages = chat.messages();
    assert_eq!(messages.len(), 2, "the continuation extends the assistant message");
    assert_eq!(state_of(&chat, "c1"), ToolState::OutputAvailable);
    assert_eq!(text_of(&messages[1]), "deleted");
    assert_eq!(chat.status(), Status::Ready);
}

async fn two_approvals_answered(first_answer: &str, second_answer: &str) {
    let (chat, transport) = new_chat(ChatOptions::default());
    let first = transport.respond();
    approval_response(
        &first,
        "m1",
        &[("a", "delete_file", json!({"path": "a.txt"})), ("b", "delete_file", json!({"path": "b.txt"}))],
    );
    first.chunk(json!({"type": "finish", "finishReason": "tool-calls"}));
    first.end();
    chat.send_message("delete a and b").await.unwrap();

    chat.add_tool_approval_response(first_answer, Decision::Approve).await.unwrap();
    assert_eq!(transport.requests().len(), 1, "one answer of two sends nothing");
    let second = transport.respond();
    text_response(&second, "done");
    second.end();
    chat.add_tool_approval_response(second_answer, Decision::deny_because("not that one")).await.unwrap();

    let requests = transport.requests();
    assert_eq!(requests.len(), 2);
    let approved = if first_answer == "ap-a" { "a" } else { "b" };
    let denied = if approved == "a" { "b" } else { "a" };
    assert_eq!(tool_part(&requests[1].messages, approved)["approval"]["approved"], true);
    assert_eq!(
        tool_part(&requests[1].messages, denied)["approval"],
        json!({"id": format!("ap-{denied}"), "approved": false, "reason": "not that one"})
    );
}

#[tokio::test]
async fn two_approvals_are_sent_together_whichever_is_answered_first() {
    two_approvals_answered("ap-a", "ap-b").await;
    two_approvals_answered("ap-b", "ap-a").await;
}

#[tokio::test]
async fn a_chained_approval_answered_while_the_continuation_streams_is_not_lost() {
    // Seed 003's bug: the answer to B arrives while the continuation carrying A streams.
    let (chat, transport) = new_chat(ChatOptions::default());
    let mut events = chat.subscribe();
    let first = transport.respond();
    approval_response(&first, "m1", &[("a", "delete_file", json!({"path": "a.txt"}))]);
    first.chunk(json!({"type": "finish", "finishReason": "tool-calls"}));
    first.end();
    chat.send_message("delete a, then b").await.unwrap();

    let second = transport.respond();
    let answering = {
        let chat = chat.clone();
        tokio::spawn(async move { chat.add_tool_approval_response("ap-a", Decision::Approve).await })
    };
    transport.wait_for_requests(2).await;
    second.chunk(json!({"type": "start", "messageId": "m1"}));
    second.chunk(json!({"type": "tool-output-available", "toolCallId": "a", "output": {"deleted": "a.txt"}}));
    second.chunk(json!({"type": "start-step"}));
    second.chunk(json!({"type": "tool-input-available", "toolCallId": "b", "toolName": "delete_file", "input": {"path": "b.txt"}}));
    second.chunk(json!({"type": "tool-approval-request", "approvalId": "ap-b", "toolCallId": "b"}));
    wait_for(&mut events, approval_requested("ap-b")).await;

    let third = transport.respond();
    chat.add_tool_approval_response("ap-b", Decision::Approve).await.unwrap();
    assert_eq!(transport.requests().len(), 2, "B's answer waits for the stream carrying A");
    second.chunk(json!({"type": "finish-step"}));
    second.chunk(json!({"type": "finish", "finishReason": "tool-calls"}));
    second.end();
    transport.wait_for_requests(3).await;
    third.chunk(json!({"type": "tool-output-available", "toolCallId": "b", "output": {"deleted": "b.txt"}}));
    text_response(&third, "both deleted");
    third.end();
    answering.await.unwrap().unwrap();

    let requests = transport.requests();
    assert_eq!(requests.len(), 3, "each state is sent once");
    assert_eq!(tool_part(&requests[2].messages, "a")["state"], "output-available");
    assert_eq!(tool_part(&requests[2].messages, "b")["state"], "approval-responded");
    assert_eq!(state_of(&chat, "b"), ToolState::OutputAvailable);
    assert_eq!(chat.messages().len(), 2);
    assert_eq!(chat.status(), Status::Ready);
}

#[tokio::test]
async fn edits_go_as_edited_input_or_replace_the_input() {
    for (edit_form, field) in [(EditForm::EditedInput, "approval"), (EditForm::ReplaceInput, "input")] {
        let (chat, transport) = new_chat(ChatOptions { edit_form, ..ChatOptions::default() });
        let first = transport.respond();
        approval_response(&first, "m1", &[("c1", "delete_file", json!({"path": "notes.txt"}))]);
        first.end();
        chat.send_message("delete notes.txt").await.unwrap();
        let second = transport.respond();
        text_response(&second, "ok");
        second.end();
        let edit = json!({"path": "old.txt"});
        chat.add_tool_approval_response("ap-c1", Decision::ApproveWithInput(edit.clone())).await.unwrap();

        let sent = tool_part(&transport.requests()[1].messages, "c1");
        match field {
            "approval" => {
                assert_eq!(sent["input"], json!({"path": "notes.txt"}), "the model's input stays");
                assert_eq!(sent["approval"], json!({"id": "ap-c1", "approved": true, "editedInput": edit}));
            }
            _ => {
                assert_eq!(sent["input"], edit);
                assert_eq!(sent["approval"], json!({"id": "ap-c1", "approved": true}));
            }
        }
    }
}

#[tokio::test]
async fn a_client_tool_result_continues_the_chat() {
    let (chat, transport) = new_chat(ChatOptions::default());
    let first = transport.respond();
    first.chunk(json!({"type": "start", "messageId": "m1"}));
    first.chunk(json!({"type": "start-step"}));
    first.chunk(json!({"type": "tool-input-available", "toolCallId": "q", "toolName": "ask_user", "input": {"question": "which?"}}));
    first.chunk(json!({"type": "finish", "finishReason": "tool-calls"}));
    first.end();
    chat.send_message("ask me").await.unwrap();
    assert_eq!(
        chat.add_tool_output("nope", ToolOutput::Output(json!(1))).await,
        Err(ClientError::UnknownToolCall("nope".into()))
    );

    let second = transport.respond();
    text_response(&second, "thanks");
    second.end();
    chat.add_tool_output("q", ToolOutput::Output(json!("notes.txt"))).await.unwrap();
    let sent = tool_part(&transport.requests()[1].messages, "q");
    assert_eq!((sent["state"].clone(), sent["output"].clone()), (json!("output-available"), json!("notes.txt")));
    assert!(matches!(
        chat.add_tool_output("q", ToolOutput::Error("again".into())).await,
        Err(ClientError::ToolCallNotAwaitingOutput { state: ToolState::OutputAvailable, .. })
    ));
    assert_eq!(transport.requests().len(), 2);
}

#[tokio::test]
async fn answers_are_checked_and_never_sent_twice() {
    let (chat, transport) = new_chat(ChatOptions::default());
    let first = transport.respond();
    approval_response(&first, "m1", &[("c1", "delete_file", json!({"path": "notes.txt"}))]);
    first.end();
    chat.send_message("delete notes.txt").await.unwrap();
    assert_eq!(
        chat.add_tool_approval_response("ap-unknown", Decision::Approve).await,
        Err(ClientError::UnknownApproval("ap-unknown".into()))
    );
    let second = transport.respond();
    text_response(&second, "ok");
    second.end();
    chat.add_tool_approval_response("ap-c1", Decision::Approve).await.unwrap();
    for decision in [Decision::Approve, Decision::deny_because("changed my mind")] {
        assert_eq!(
            chat.add_tool_approval_response("ap-c1", decision).await,
            Err(ClientError::ApprovalNotPending { approval_id: "ap-c1".into(), state: ToolState::ApprovalResponded })
        );
    }
    assert_eq!(transport.requests().len(), 2, "a repeated answer sends nothing");
}

#[tokio::test]
async fn a_refused_request_keeps_its_answers_for_the_next_try() {
    let (chat, transport) = new_chat(ChatOptions::default());
    let mut events = chat.subscribe();
    let first = transport.respond();
    approval_response(&first, "m1", &[("c1", "delete_file", json!({"path": "notes.txt"}))]);
    first.end();
    chat.send_message("delete notes.txt").await.unwrap();
    let refusal = ClientError::Rejected {
        status: Some(409),
        code: "approval_in_progress".into(),
        message: "the call is executing".into(),
    };
    transport.refuse(refusal.clone());
    assert_eq!(chat.add_tool_approval_response("ap-c1", Decision::Approve).await, Err(refusal.clone()));
    assert_eq!((chat.status(), chat.error()), (Status::Error, Some(refusal.clone())));
    assert_eq!(chat.messages().len(), 2, "the conversation is as it was");
    wait_for(
        &mut events,
        |event| matches!(event, ChatEvent::Error { error } if error.code() == Some("approval_in_progress")),
    )
    .await;

    let retry = transport.respond();
    text_response(&retry, "ok");
    retry.end();
    chat.resubmit().await.unwrap();
    let requests = transport.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(tool_part(&requests[2].messages, "c1")["approval"]["approved"], true);
    assert_eq!((chat.status(), chat.error()), (Status::Ready, None));
}

#[tokio::test]
async fn a_server_error_mid_stream_keeps_what_arrived() {
    let (chat, transport) = new_chat(ChatOptions::default());
    let response = transport.respond();
    response.chunk(json!({"type": "start", "messageId": "m1"}));
    response.chunk(json!({"type": "text-start", "id": "t"}));
    response.chunk(json!({"type": "text-delta", "id": "t", "delta": "half an ans"}));
    response.chunk(json!({"type": "error", "errorText": "the model went away"}));
    response.end();
    chat.send_message("hi").await.unwrap();
    assert_eq!(chat.status(), Status::Error);
    assert_eq!(chat.error(), Some(ClientError::Stream("the model went away".into())));
    assert_eq!(text_of(&chat.messages()[1]), "half an ans");
}

#[tokio::test]
async fn a_dropped_stream_is_resumed_from_its_start_without_doubling() {
    let (chat, transport) = new_chat(ChatOptions::default());
    let response = transport.respond();
    response.chunk(json!({"type": "start", "messageId": "m1"}));
    response.chunk(json!({"type": "text-start", "id": "t"}));
    response.chunk(json!({"type": "text-delta", "id": "t", "delta": "hello "}));
    response.fail(ClientError::Disconnected);
    assert_eq!(chat.send_message("hi").await, Err(ClientError::Disconnected));
    assert_eq!(chat.status(), Status::Error);

    let replay = transport.respond_to_reconnect();
    replay.chunk(json!({"type": "start", "messageId": "m1"}));
    replay.chunk(json!({"type": "text-start", "id": "t"}));
    replay.chunk(json!({"type": "text-delta", "id": "t", "delta": "hello "}));
    replay.chunk(json!({"type": "text-delta", "id": "t", "delta": "world"}));
    replay.chunk(json!({"type": "text-end", "id": "t"}));
    replay.chunk(json!({"type": "finish", "finishReason": "stop"}));
    replay.end();
    chat.resume().await.unwrap();
    let messages = chat.messages();
    assert_eq!(messages.len(), 2);
    assert_eq!(text_of(&messages[1]), "hello world");
    assert_eq!(chat.status(), Status::Ready);
    assert_eq!(chat.resume().await, Err(ClientError::NothingToResume));
}

#[tokio::test]
async fn stop_keeps_the_partial_response_and_the_chat_usable() {
    let (chat, transport) = new_chat(ChatOptions::default());
    let mut events = chat.subscribe();
    let response = transport.respond();
    let sending = send_in_background(&chat, "tell me a long story");
    response.chunk(json!({"type": "start", "messageId": "m1"}));
    response.chunk(json!({"type": "text-start", "id": "t"}));
    response.chunk(json!({"type": "text-delta", "id": "t", "delta": "once upon"}));
    wait_for(&mut events, |event| matches!(event, ChatEvent::MessageUpdated { .. })).await;
    assert_eq!(chat.send_message("another").await, Err(ClientError::Busy));
    chat.stop();
    sending.await.unwrap().unwrap();
    assert_eq!(chat.status(), Status::Ready);
    assert_eq!(text_of(&chat.messages()[1]), "once upon");

    let next = transport.respond();
    text_response(&next, "hello");
    next.end();
    chat.send_message("hi").await.unwrap();
    assert_eq!(chat.messages().len(), 4);
}

#[tokio::test]
async fn regenerate_replaces_the_last_response() {
    let (chat, transport) = new_chat(ChatOptions::default());
    let first = transport.respond();
    first.chunk(json!({"type": "start", "messageId": "m1"}));
    text_response(&first, "first");
    first.end();
    chat.send_message("hi").await.unwrap();
    let second = transport.respond();
    second.chunk(json!({"type": "start", "messageId": "m2"}));
    text_response(&second, "second");
    second.end();
    chat.regenerate().await.unwrap();

    let request = &transport.requests()[1];
    assert_eq!(request.trigger.as_str(), "regenerate-message");
    assert_eq!(request.message_id.as_deref(), Some("m1"));
    assert_eq!(request.messages.len(), 1, "the replaced response is not sent");
    let messages = chat.messages();
    assert_eq!((messages.len(), text_of(&messages[1])), (2, "second".to_owned()));
}

#[tokio::test]
async fn approvals_can_travel_as_user_message_parts() {
    let options = ChatOptions { approval_form: ApprovalForm::UserMessage, ..ChatOptions::default() };
    let (chat, transport) = new_chat(options);
    let first = transport.respond();
    approval_response(&first, "m1", &[("c1", "delete_file", json!({"path": "notes.txt"}))]);
    first.end();
    chat.send_message("delete notes.txt").await.unwrap();
    assert_eq!(
        chat.add_tool_approval_response("ap-c1", Decision::ApproveWithInput(json!({"path": "x"}))).await,
        Err(ClientError::EditNotSupported)
    );
    // A refused request takes its approval message back; the retry sends one again.
    transport.refuse(ClientError::Transport("connection refused".into()));
    let refused = chat.add_tool_approval_response("ap-c1", Decision::deny_because("keep it")).await;
    assert_eq!(refused, Err(ClientError::Transport("connection refused".into())));
    assert_eq!(chat.messages().len(), 2);
    let second = transport.respond();
    second.chunk(json!({"type": "start", "messageId": "m2"}));
    second.chunk(json!({"type": "tool-output-denied", "toolCallId": "c1"}));
    text_response(&second, "kept it");
    second.end();
    chat.resubmit().await.unwrap();

    let sent = &transport.requests()[2].messages;
    assert_eq!(sent.len(), 3);
    let approval_message = serde_json::to_value(&sent[2]).unwrap();
    assert_eq!(approval_message["role"], "user");
    assert_eq!(
        approval_message["parts"],
        json!([{"type": "tool-approval", "toolCallId": "c1", "approved": false, "reason": "keep it"}])
    );
    let part = tool_part(sent, "c1");
    assert_eq!(part["state"], "approval-requested", "the answer travels only in the user message");
    assert_eq!(part["approval"], json!({"id": "ap-c1"}));
    assert_eq!(state_of(&chat, "c1"), ToolState::OutputDenied, "the output lands on the earlier message");
    assert_eq!(chat.messages().len(), 4);
}

#[tokio::test]
async fn events_arrive_in_order_on_streams_and_callbacks() {
    let (chat, transport) = new_chat(ChatOptions::default());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorder = {
        let seen = seen.clone();
        chat.on_event(move |event| seen.lock().unwrap().push(event.clone()))
    };
    let events = chat.subscribe();
    let response = transport.respond();
    approval_response(&response, "m1", &[("c1", "delete_file", json!({"path": "notes.txt"}))]);
    response.end();
    chat.send_message("delete notes.txt").await.unwrap();
    drop(chat);
    let streamed: Vec<ChatEvent> = events.collect().await;
    recorder.await.unwrap();
    assert_eq!(*seen.lock().unwrap(), streamed, "callbacks see what streams see");

    let kinds: Vec<String> = streamed
        .iter()
        .filter_map(|event| match event {
            ChatEvent::MessageAdded { message } => Some(format!("added {:?}", message.role)),
            ChatEvent::StatusChanged { to, .. } => Some(format!("status {}", to.as_str())),
            ChatEvent::ToolStateChanged { from, to, .. } => {
                Some(format!("tool {} -> {}", from.map_or("none", |s| s.as_str()), to.as_str()))
            }
            ChatEvent::ApprovalRequested { approval_id, .. } => Some(format!("approval {approval_id}")),
            ChatEvent::MessageUpdated { .. } | ChatEvent::Error { .. } => None,
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "added User",
            "status submitted",
            "status streaming",
            "added Assistant",
            "tool none -> input-available",
            "tool input-available -> approval-requested",
            "approval ap-c1",
            "status ready"
        ]
    );
}
