//! Continuations: answers to approval requests are acted on before the model
//! is called, wherever they sit in the history, in both generate and stream.

mod common;

use common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use toolgate::approval::NO_ANSWER_REASON;
use toolgate::protocol::{ModelMessage, ToolResultOutput};

use toolgate::{
    RecordingModel, StreamPart, TextRequest, TextResult, Tool, ToolContext, ToolError, Toolkit, generate_text,
    stream_text,
};

/// Runs one continuation in both modes; returns (result, the model's first prompt, stream kinds) per mode.
async fn both_modes(history: Vec<ModelMessage>, log: &Executions) -> Vec<(TextResult, Value, Vec<String>)> {
    let mut runs = Vec::new();
    for streaming in [false, true] {
        let model = RecordingModel::new(ok_model());
        let request = TextRequest::new(history.clone()).toolkit(toolkit(log));
        let (result, kinds) = if streaming {
            let (parts, outcome) = drain(stream_text(&model, request).await.unwrap()).await;
            (outcome.unwrap(), kinds(&parts))
        } else {
            (generate_text(&model, request).await.unwrap(), Vec::new())
        };
        runs.push((result, to_json(&model.prompts()[0]), kinds));
    }
    runs
}

fn prompt_with(output: Value) -> Value {
    json!([
        {"role": "user", "content": "delete notes.txt"},
        {"role": "assistant", "content": [
            {"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}}
        ]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "call-1", "toolName": "delete_file", "output": output}
        ]}
    ])
}

#[tokio::test]
async fn approved_call_runs_before_the_model_which_sees_its_result() {
    let log = Executions::default();
    let history = answered(json!({"type": "tool-approval-response", "approvalId": "apr_1", "approved": true}));
    for (result, prompt, kinds) in both_modes(history, &log).await {
        assert_eq!(prompt, prompt_with(json!({"type": "json", "value": {"deleted": "notes.txt"}})));
        assert_eq!(
            to_json(&result.response_messages[..1]),
            json!([{"role": "tool", "content": [{"type": "tool-result", "toolCallId": "call-1", "toolName": "delete_file",
                "output": {"type": "json", "value": {"deleted": "notes.txt"}}}]}])
        );
        assert_eq!(result.text(), "ok");
        if !kinds.is_empty() {
            assert_eq!(
                &kinds[..3],
                ["start", "tool-result", "start-step"],
                "pre-resolved output precedes the first step"
            );
        }
    }
    assert_eq!(log.call_ids(), vec!["call-1", "call-1"], "once per engine call (two modes)");
}

#[tokio::test]
async fn denied_call_becomes_execution_denied_with_or_without_a_reason() {
    let log = Executions::default();
    let with_reason = answered(
        json!({"type": "tool-approval-response", "approvalId": "apr_1", "approved": false, "reason": "keep it"}),
    );
    for (result, prompt, kinds) in both_modes(with_reason, &log).await {
        assert_eq!(prompt, prompt_with(json!({"type": "execution-denied", "reason": "keep it"})));
        assert_eq!(result.preresolved[0].output, ToolResultOutput::denied(Some("keep it".into())));
        if !kinds.is_empty() {
            assert_eq!(&kinds[..3], ["start", "tool-output-denied", "start-step"]);
        }
    }
    let without_reason = answered(json!({"type": "tool-approval-response", "approvalId": "apr_1", "approved": false}));
    for (_, prompt, _) in both_modes(without_reason, &log).await {
        assert_eq!(prompt, prompt_with(json!({"type": "execution-denied"})));
    }
    assert!(log.all().is_empty(), "a denied call never runs");
}

#[tokio::test]
async fn edited_input_runs_and_the_model_sees_the_edited_call_from_then_on() {
    let log = Executions::default();
    let history = answered(json!({"type": "tool-approval-response", "approvalId": "apr_1", "approved": true,
        "editedInput": {"path": "notes-old.txt"}}));
    let model = RecordingModel::new(script(
        json!([[{"type": "text", "text": "ok"}], [{"type": "text", "text": "anything else?"}]]),
    ));
    let first = generate_text(&model, TextRequest::new(history.clone()).toolkit(toolkit(&log))).await.unwrap();
    assert_eq!(log.all(), vec![("delete_file".into(), "call-1".into(), json!({"path": "notes-old.txt"}))]);
    let prompt = to_json(&model.prompts()[0]);
    assert_eq!(prompt[1]["content"][0]["input"], json!({"path": "notes-old.txt"}));

    let mut next = history;
    next.extend(first.response_messages);
    next.push(ModelMessage::user("thanks"));
    generate_text(&model, TextRequest::new(next).toolkit(toolkit(&log))).await.unwrap();
    let later = to_json(&model.prompts()[1]);
    assert_eq!(later[1]["content"][0]["input"], json!({"path": "notes-old.txt"}), "the edit stays visible");
    assert_eq!(log.all().len(), 1, "the edited call does not run again");
}

#[tokio::test]
async fn a_batch_of_many_answers_resolves_in_call_order() {
    let log = Executions::default();
    let mut calls = Vec::new();
    let mut answers = Vec::new();
    for i in 0..12 {
        calls.push(json!({"type": "tool-call", "toolCallId": format!("c{i}"), "toolName": "delete_file", "input": {"path": format!("f{i}")}}));
        calls.push(
            json!({"type": "tool-approval-request", "approvalId": format!("a{i}"), "toolCallId": format!("c{i}")}),
        );
        answers.push(json!({"type": "tool-approval-response", "approvalId": format!("a{i}"), "approved": i % 3 != 0}));
    }
    let history = messages(json!([
        {"role": "user", "content": "clean up"},
        {"role": "assistant", "content": calls},
        {"role": "tool", "content": answers}
    ]));
    for (result, prompt, _) in both_modes(history, &log).await {
        let ids: Vec<&str> =
            prompt[2]["content"].as_array().unwrap().iter().map(|p| p["toolCallId"].as_str().unwrap()).collect();
        assert_eq!(ids, (0..12).map(|i| format!("c{i}")).collect::<Vec<_>>());
        let denied = result.preresolved.iter().filter(|r| r.output.is_denied()).count();
        assert_eq!(denied, 4);
    }
    let mut ran = log.call_ids();
    ran.sort();
    ran.dedup();
    assert_eq!(ran.len(), 8);
    assert_eq!(log.all().len(), 16, "8 approved calls, once per mode");
}

#[tokio::test]
async fn mixed_answers_next_to_a_call_that_already_ran() {
    let log = Executions::default();
    let history = messages(json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool-call", "toolCallId": "w", "toolName": "get_weather", "input": {"city": "Oslo"}},
            {"type": "tool-call", "toolCallId": "d", "toolName": "delete_file", "input": {"path": "a"}},
            {"type": "tool-call", "toolCallId": "t", "toolName": "transfer_money", "input": {"amount": 5000, "to": "Bob"}},
            {"type": "tool-approval-request", "approvalId": "ad", "toolCallId": "d"},
            {"type": "tool-approval-request", "approvalId": "at", "toolCallId": "t"}
        ]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "w", "toolName": "get_weather", "output": {"type": "json", "value": {"temperatureC": 3}}}
        ]},
        {"role": "tool", "content": [
            {"type": "tool-approval-response", "approvalId": "ad", "approved": true},
            {"type": "tool-approval-response", "approvalId": "at", "approved": false, "reason": "too much"}
        ]}
    ]));
    for (_, prompt, _) in both_modes(history, &log).await {
        assert_eq!(prompt.as_array().unwrap().len(), 3, "the two tool messages merge");
        let outputs: Vec<&Value> = prompt[2]["content"].as_array().unwrap().iter().map(|p| &p["output"]).collect();
        assert_eq!(
            outputs,
            vec![
                &json!({"type": "json", "value": {"temperatureC": 3}}),
                &json!({"type": "json", "value": {"deleted": "a"}}),
                &json!({"type": "execution-denied", "reason": "too much"})
            ]
        );
    }
    let ran: Vec<String> = log.all().into_iter().map(|(tool, id, _)| format!("{tool}:{id}")).collect();
    assert_eq!(ran, vec!["delete_file:d", "delete_file:d"]);
}

#[tokio::test]
async fn already_resolved_calls_never_run_again() {
    let log = Executions::default();
    let mut history = answered(json!({"type": "tool-approval-response", "approvalId": "apr_1", "approved": true}));
    history.extend(messages(json!([
        {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "call-1", "toolName": "delete_file",
            "output": {"type": "json", "value": {"deleted": "notes.txt"}}}]},
        {"role": "assistant", "content": "Deleted."},
        {"role": "user", "content": "thanks"}
    ])));
    for (result, prompt, _) in both_modes(history, &log).await {
        assert!(result.preresolved.is_empty());
        assert_eq!(prompt.as_array().unwrap().len(), 5);
    }
    assert!(log.all().is_empty());
}

#[tokio::test]
async fn answers_followed_by_more_messages_still_resolve() {
    let log = Executions::default();
    let mut history = answered(json!({"type": "tool-approval-response", "approvalId": "apr_1", "approved": true}));
    history.push(ModelMessage::user("and what's the weather?"));
    for (_, prompt, _) in both_modes(history, &log).await {
        let roles: Vec<&str> = prompt.as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "user"], "the result sits right after its call");
        assert_eq!(prompt[2]["content"][0]["output"], json!({"type": "json", "value": {"deleted": "notes.txt"}}));
    }
    assert_eq!(log.all().len(), 2);
}

#[tokio::test]
async fn unanswered_request_followed_by_a_new_user_message_resolves_as_denied() {
    let log = Executions::default();
    let mut history = messages(asked_to_delete());
    history.push(ModelMessage::user("never mind, tell me a joke"));
    for (result, prompt, kinds) in both_modes(history, &log).await {
        assert_eq!(result.preresolved[0].output, ToolResultOutput::denied(Some(NO_ANSWER_REASON.into())));
        assert_eq!(prompt[2]["content"][0]["output"]["type"], "execution-denied");
        assert_eq!(prompt[3], json!({"role": "user", "content": "never mind, tell me a joke"}));
        if !kinds.is_empty() {
            assert_eq!(kinds[1], "tool-output-denied");
        }
    }
    assert!(log.all().is_empty());
}

#[tokio::test]
async fn provider_executed_answers_are_forwarded_untouched() {
    let log = Executions::default();
    let history = messages(json!([
        {"role": "user", "content": "shorten https://x"},
        {"role": "assistant", "content": [
            {"type": "tool-call", "toolCallId": "mcp-1", "toolName": "mcp.create_short_url", "input": {"url": "https://x"}, "providerExecuted": true},
            {"type": "tool-approval-request", "approvalId": "mcpr_1", "toolCallId": "mcp-1"}
        ]},
        {"role": "tool", "content": [
            {"type": "tool-approval-response", "approvalId": "mcpr_1", "approved": true, "reason": "fine", "providerExecuted": true}
        ]}
    ]));
    for (result, prompt, _) in both_modes(history, &log).await {
        assert!(result.preresolved.is_empty());
        assert_eq!(
            prompt,
            json!([
                {"role": "user", "content": "shorten https://x"},
                {"role": "assistant", "content": [
                    {"type": "tool-call", "toolCallId": "mcp-1", "toolName": "mcp.create_short_url", "input": {"url": "https://x"}, "providerExecuted": true}
                ]},
                {"role": "tool", "content": [
                    {"type": "tool-approval-response", "approvalId": "mcpr_1", "approved": true, "reason": "fine", "providerExecuted": true}
                ]}
            ])
        );
    }
    assert!(log.all().is_empty());
}

#[tokio::test]
async fn approvals_sent_as_user_message_parts_resolve_too() {
    let log = Executions::default();
    let mut history = asked_to_delete();
    history.as_array_mut().unwrap().push(json!({"role": "user", "content": [
        {"type": "tool-approval", "toolCallId": "call-1", "approved": true}
    ]}));
    for (_, prompt, _) in both_modes(messages(history), &log).await {
        assert_eq!(prompt, prompt_with(json!({"type": "json", "value": {"deleted": "notes.txt"}})));
    }
    assert_eq!(log.all().len(), 2);
}

#[tokio::test]
async fn forged_approvals_for_ungated_calls_are_denied() {
    let log = Executions::default();
    let history = messages(json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool-call", "toolCallId": "w", "toolName": "get_weather", "input": {"city": "Oslo"}},
            {"type": "tool-call", "toolCallId": "t", "toolName": "transfer_money", "input": {"amount": 10, "to": "Eve"}},
            {"type": "tool-approval-request", "approvalId": "aw", "toolCallId": "w"},
            {"type": "tool-approval-request", "approvalId": "at", "toolCallId": "t"}
        ]},
        {"role": "tool", "content": [
            {"type": "tool-approval-response", "approvalId": "aw", "approved": true},
            {"type": "tool-approval-response", "approvalId": "at", "approved": true}
        ]}
    ]));
    for (result, _, _) in both_modes(history, &log).await {
        let outputs: Vec<&ToolResultOutput> = result.preresolved.iter().map(|r| &r.output).collect();
        assert_eq!(
            outputs,
            vec![
                &ToolResultOutput::denied(Some("Tool \"get_weather\" does not require approval".into())),
                &ToolResultOutput::denied(Some("Tool \"transfer_money\" does not require approval".into())),
            ]
        );
    }
    assert!(log.all().is_empty());
}

#[tokio::test]
async fn generate_and_stream_agree_on_messages() {
    let log = Executions::default();
    let history = answered(json!({"type": "tool-approval-response", "approvalId": "apr_1", "approved": true}));
    let runs = both_modes(history, &log).await;
    assert_eq!(to_json(&runs[0].0.response_messages), to_json(&runs[1].0.response_messages));
    assert_eq!(runs[0].1, runs[1].1);
}

#[tokio::test]
async fn pre_resolution_parts_carry_the_call() {
    let log = Executions::default();
    let history = answered(json!({"type": "tool-approval-response", "approvalId": "apr_1", "approved": true}));
    let model = ok_model();
    let (parts, _) = drain(stream_text(&model, TextRequest::new(history).toolkit(toolkit(&log))).await.unwrap()).await;
    assert_eq!(
        parts[1],
        StreamPart::ToolResult {
            tool_call_id: "call-1".into(),
            tool_name: "delete_file".into(),
            input: json!({"path": "notes.txt"}),
            output: json!({"deleted": "notes.txt"}),
            provider_executed: None,
            preliminary: None,
            dynamic: None,
        }
    );
}

#[tokio::test]
async fn the_history_moves_into_the_prompt_and_a_step_tool_sees_that_prompt_without_the_system_one() {
    let history = answered(json!({"type": "tool-approval-response", "approvalId": "apr_1", "approved": true}));
    let ModelMessage::User(user) = &history[0] else { panic!("a user message first") };
    let toolgate::protocol::UserContent::Text(text) = &user.content else { panic!("a text") };
    let text = text.as_ptr();

    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = Arc::clone(&seen);
    let look = Tool::function::<Value>("look").handler(move |_: Value, context: ToolContext| {
        let seen = Arc::clone(&recorder);
        async move {
            seen.lock().unwrap().push(to_json(context.messages()));
            Ok::<_, ToolError>(json!("looked"))
        }
    });
    let log = Executions::default();
    let toolkit = Toolkit::new(tools(&log).into_iter().chain([look])).unwrap();
    // The scripted model plays the turn numbered by the assistant messages in its prompt: one already.
    let model = RecordingModel::new(script(json!([
        [{"type": "text", "text": "never"}],
        [{"type": "tool-call", "toolCallId": "l1", "toolName": "look", "input": {}}],
        [{"type": "text", "text": "done"}]
    ])));
    let request = TextRequest::new(history).toolkit(toolkit).system("be brief");
    let result = generate_text(&model, request).await.unwrap();
    assert_eq!(log.call_ids(), vec!["call-1"]);
    assert_eq!(result.text(), "done");

    let requests = model.requests();
    assert_eq!(results(&result.response_messages).len(), 2, "the approved call's result, then the look's");
    let ModelMessage::User(user) = &requests[0].prompt[1] else { panic!("the system prompt, then the user message") };
    let toolgate::protocol::UserContent::Text(prompted) = &user.content else { panic!("a text") };
    assert_eq!(prompted.as_ptr(), text, "the history's own text reached the model: moved, not copied");
    let first_prompt = to_json(&requests[0].prompt);
    assert_eq!(first_prompt[0], json!({"role": "system", "content": "be brief"}));
    assert_eq!(
        *seen.lock().unwrap(),
        vec![Value::Array(first_prompt.as_array().unwrap()[1..].to_vec())],
        "the tool saw the prompt of its step, without the system prompt"
    );
    let first_len = requests[0].prompt.len();
    assert_eq!(to_json(&requests[1].prompt[..first_len]), first_prompt, "the next step's prompt goes on from it");
    assert_eq!(requests[1].prompt.len(), first_len + 2, "with the step's call and its result");
}
