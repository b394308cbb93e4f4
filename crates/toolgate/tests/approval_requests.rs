//! A model step: which calls run, which wait for a person, which go back to
//! the client, and how failures of tools and models are contained.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::protocol::{ModelMessage, ToolResultOutput};
use toolgate::{
    ApprovalContext, EngineError, FinishReason, RecordingModel, StopCondition, StreamPart, TextRequest, Tool,
    ToolError, Toolkit, ToolkitError, generate_text, stream_text,
};

fn counter_ids() -> impl Fn() -> String + Send + Sync + 'static {
    let next = AtomicUsize::new(0);
    move || (next.fetch_add(1, Ordering::SeqCst) + 1).to_string()
}

fn user(text: &str) -> Vec<ModelMessage> {
    vec![ModelMessage::user(text)]
}

#[tokio::test]
async fn gated_call_yields_an_approval_request_instead_of_running() {
    let log = Executions::default();
    let model = script(json!([[
        {"type": "text", "text": "Deleting."},
        {"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}},
        {"type": "finish", "finishReason": "tool-calls"}
    ]]));
    let request =
        TextRequest::new(user("delete notes.txt")).toolkit(toolkit(&log)).max_steps(5).id_generator(counter_ids());
    let result = generate_text(&model, request).await.unwrap();

    assert!(log.all().is_empty(), "a gated call must not run");
    assert_eq!(result.finish_reason, FinishReason::ToolCalls);
    assert_eq!(result.steps.len(), 1, "a pending approval ends the loop whatever max_steps says");
    let requests = result.approval_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].approval_id, "apr_1");
    assert_ne!(requests[0].approval_id, requests[0].tool_call.tool_call_id);
    assert_eq!(
        to_json(&result.response_messages),
        json!([{"role": "assistant", "content": [
            {"type": "text", "text": "Deleting."},
            {"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}},
            {"type": "tool-approval-request", "approvalId": "apr_1", "toolCallId": "call-1"}
        ]}])
    );
}

#[tokio::test]
async fn siblings_that_need_no_approval_run_and_requests_follow_the_results() {
    let log = Executions::default();
    let model = script(json!([[
        {"type": "tool-call", "toolCallId": "call-w", "toolName": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool-call", "toolCallId": "call-d", "toolName": "delete_file", "input": {"path": "a"}},
        {"type": "finish", "finishReason": "tool-calls"}
    ]]));
    let request = TextRequest::new(user("go")).toolkit(toolkit(&log)).id_generator(counter_ids());
    let (parts, outcome) = drain(stream_text(&model, request).await.unwrap()).await;
    let result = outcome.unwrap();

    assert_eq!(log.call_ids(), vec!["call-w"]);
    let tail: Vec<String> = kinds(&parts).into_iter().filter(|k| !k.starts_with("tool-input")).collect();
    assert_eq!(
        tail,
        [
            "start",
            "start-step",
            "tool-call",
            "tool-call",
            "tool-result",
            "tool-approval-request",
            "finish-step",
            "finish"
        ]
    );
    assert_eq!(result.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        results(&result.response_messages),
        vec![("call-w".to_owned(), ToolResultOutput::json(json!({"city": "Paris", "temperatureC": 21})))]
    );
}

#[tokio::test]
async fn policy_function_gates_by_input() {
    let log = Executions::default();
    let model = script(json!([[
        {"type": "tool-call", "toolCallId": "small", "toolName": "transfer_money", "input": {"amount": 50, "to": "Ana"}},
        {"type": "tool-call", "toolCallId": "large", "toolName": "transfer_money", "input": {"amount": 5000, "to": "Bob"}}
    ]]));
    let result = generate_text(&model, TextRequest::new(user("pay")).toolkit(toolkit(&log))).await.unwrap();
    assert_eq!(log.call_ids(), vec!["small"]);
    let gated: Vec<&str> = result.approval_requests().iter().map(|r| r.tool_call.tool_call_id.as_str()).collect();
    assert_eq!(gated, vec!["large"]);
}

#[tokio::test]
async fn async_policy_reads_application_state_and_the_call_context() {
    let locked = Arc::new(AtomicBool::new(true));
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (state, seen_in_policy) = (Arc::clone(&locked), Arc::clone(&seen));
    let tool = Tool::function::<PathInput>("archive")
        .approval_when_async(move |input: PathInput, context: ApprovalContext| {
            let (state, seen) = (Arc::clone(&state), Arc::clone(&seen_in_policy));
            async move {
                tokio::task::yield_now().await;
                seen.lock().unwrap().push((context.tool_call_id().to_owned(), context.messages().len(), input.path));
                Ok::<_, std::convert::Infallible>(state.load(Ordering::SeqCst))
            }
        })
        .handler(|input: PathInput, _| async move { Ok::<_, ToolError>(json!({"archived": input.path})) });
    let toolkit = Toolkit::new([tool]).unwrap();
    let turn = json!([[{"type": "tool-call", "toolCallId": "c1", "toolName": "archive", "input": {"path": "x"}}]]);

    let gated = generate_text(&script(turn.clone()), TextRequest::new(user("archive x")).toolkit(toolkit.clone()))
        .await
        .unwrap();
    assert_eq!(gated.approval_requests().len(), 1);

    locked.store(false, Ordering::SeqCst);
    let free =
        generate_text(&script(turn), TextRequest::new(user("archive x")).toolkit(toolkit).max_steps(1)).await.unwrap();
    assert!(free.approval_requests().is_empty());
    assert_eq!(results(&free.response_messages)[0].1, ToolResultOutput::json(json!({"archived": "x"})));
    assert_eq!(seen.lock().unwrap()[0], ("c1".to_owned(), 1, "x".to_owned()));
}

#[tokio::test]
async fn policies_fail_closed() {
    let context = || ApprovalContext::new("c", Vec::new());
    let decode_fails = Tool::dynamic("t", json!({})).approval_when(|input: &TransferInput, _| input.amount > 1.0);
    assert!(decode_fails.requires_approval(&json!({"unexpected": true}), context()).await);
    assert!(!decode_fails.requires_approval(&json!({"amount": 0.5, "to": "a"}), context()).await);

    let errors = Tool::dynamic("t", json!({}))
        .approval_when_async(|_: Value, _| async { Err::<bool, _>("the policy service is down") });
    assert!(errors.requires_approval(&json!({}), context()).await);

    let panics_sync = Tool::dynamic("t", json!({})).approval_when(|_: &Value, _| panic!("policy bug"));
    assert!(panics_sync.requires_approval(&json!({}), context()).await);

    let panics_async = Tool::dynamic("t", json!({})).approval_when_async(|_: Value, _| async {
        if true {
            panic!("async policy bug")
        }
        Ok::<bool, String>(false)
    });
    assert!(panics_async.requires_approval(&json!({}), context()).await);

    // Through the engine: a panicking policy gates the call instead of running it.
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let tool = Tool::dynamic("risky", json!({"type": "object"}))
        .approval_when(|_: &Value, _| panic!("policy bug"))
        .handler(move |_: Value, _| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, ToolError>(json!(null)) }
        });
    let model = script(json!([[{"type": "tool-call", "toolCallId": "c1", "toolName": "risky", "input": {}}]]));
    let result =
        generate_text(&model, TextRequest::new(user("go")).toolkit(Toolkit::new([tool]).unwrap())).await.unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(result.approval_requests().len(), 1);
}

#[tokio::test]
async fn client_executed_calls_are_handed_back_and_their_results_continue_the_turn() {
    let log = Executions::default();
    let model = RecordingModel::new(script(json!([
        [{"type": "tool-call", "toolCallId": "ask-1", "toolName": "ask_user", "input": {"question": "Which file?"}},
         {"type": "tool-call", "toolCallId": "w-1", "toolName": "get_weather", "input": {"city": "Oslo"}}],
        [{"type": "text", "text": "Thanks."}]
    ])));
    let first =
        generate_text(&model, TextRequest::new(user("help")).toolkit(toolkit(&log)).max_steps(4)).await.unwrap();
    assert_eq!(first.steps.len(), 1, "a client call ends the loop");
    assert_eq!(first.client_tool_calls()[0].tool_call_id, "ask-1");
    assert_eq!(log.call_ids(), vec!["w-1"]);

    let mut history = user("help");
    history.extend(first.response_messages.clone());
    history.extend(messages(json!([{"role": "tool", "content": [
        {"type": "tool-result", "toolCallId": "ask-1", "toolName": "ask_user", "output": {"type": "text", "value": "notes.txt"}}
    ]}])));
    let second = generate_text(&model, TextRequest::new(history).toolkit(toolkit(&log))).await.unwrap();
    assert_eq!(second.text(), "Thanks.");
    let prompt = to_json(&model.prompts()[1]);
    assert_eq!(prompt[2]["content"][0]["toolCallId"], "ask-1", "client result sits right after its call");
    assert_eq!(prompt[2]["content"][1]["toolCallId"], "w-1");
}

#[tokio::test]
async fn provider_executed_calls_never_run_locally_and_keep_the_provider_approval() {
    let log = Executions::default();
    let model = script(json!([[
        {"type": "tool-call", "toolCallId": "mcp-1", "toolName": "mcp.delete_file", "input": {"path": "x"}, "providerExecuted": true},
        {"type": "tool-approval-request", "approvalId": "mcpr_1", "toolCallId": "mcp-1"},
        {"type": "finish", "finishReason": "stop"}
    ]]));
    let result = generate_text(&model, TextRequest::new(user("go")).toolkit(toolkit(&log))).await.unwrap();
    assert!(log.all().is_empty());
    let request = &result.approval_requests()[0];
    assert_eq!((request.approval_id.as_str(), request.provider_executed), ("mcpr_1", true));
    assert_eq!(result.steps.len(), 1);
    assert_eq!(
        to_json(&result.response_messages)[0]["content"][1],
        json!({"type": "tool-approval-request", "approvalId": "mcpr_1", "toolCallId": "mcp-1"})
    );
}

#[tokio::test]
async fn held_batch_runs_after_the_decision() {
    let log = Executions::default();
    let model = script(json!([
        [{"type": "tool-call", "toolCallId": "call-w", "toolName": "get_weather", "input": {"city": "Rome"}},
         {"type": "tool-call", "toolCallId": "call-d", "toolName": "delete_file", "input": {"path": "a"}}],
        [{"type": "text", "text": "done"}]
    ]));
    let request =
        TextRequest::new(user("go")).toolkit(toolkit(&log)).hold_batch_for_approval(true).id_generator(counter_ids());
    let first = generate_text(&model, request).await.unwrap();
    assert!(log.all().is_empty(), "held calls wait for the decision");
    assert_eq!(first.steps[0].held_tool_calls[0].tool_call_id, "call-w");
    assert_eq!(first.response_messages.len(), 1, "no results yet");

    let mut history = user("go");
    history.extend(first.response_messages);
    history.extend(messages(json!([{"role": "tool", "content": [
        {"type": "tool-approval-response", "approvalId": "apr_1", "approved": true}
    ]}])));
    let second = generate_text(&model, TextRequest::new(history).toolkit(toolkit(&log)).hold_batch_for_approval(true))
        .await
        .unwrap();
    let mut ran = log.call_ids();
    ran.sort();
    assert_eq!(ran, vec!["call-d", "call-w"]);
    let preresolved: Vec<&str> = second.preresolved.iter().map(|r| r.tool_call_id.as_str()).collect();
    assert_eq!(preresolved, vec!["call-w", "call-d"]);
    assert_eq!(second.text(), "done");
}

#[tokio::test]
async fn concurrency_limit_is_honoured() {
    async fn peak(limit: usize) -> usize {
        let (current, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (c, p) = (Arc::clone(&current), Arc::clone(&peak));
        let tool = Tool::dynamic("slow", json!({"type": "object"})).handler(move |_: Value, _| {
            let (current, peak) = (Arc::clone(&c), Arc::clone(&p));
            async move {
                let now = current.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                current.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, ToolError>(json!("done"))
            }
        });
        let calls: Vec<Value> = (0..6)
            .map(|i| json!({"type": "tool-call", "toolCallId": format!("c{i}"), "toolName": "slow", "input": {}}))
            .collect();
        let model = script(json!([calls]));
        let request =
            TextRequest::new(user("go")).toolkit(Toolkit::new([tool]).unwrap()).tool_concurrency(limit).max_steps(1);
        let result = generate_text(&model, request).await.unwrap();
        assert_eq!(result.steps[0].tool_results.len(), 6);
        peak.load(Ordering::SeqCst)
    }
    assert_eq!(peak(2).await, 2);
    assert_eq!(peak(1).await, 1);
    assert_eq!(peak(6).await, 6);
}

#[tokio::test]
async fn preliminary_results_stream_before_the_final_one() {
    let tool = Tool::dynamic("search", json!({"type": "object"})).handler(|_: Value, ctx| async move {
        ctx.report(json!({"progress": 1}));
        tokio::task::yield_now().await;
        ctx.report(json!({"progress": 2}));
        Ok::<_, ToolError>(json!({"hits": 3}))
    });
    let model = script(json!([[{"type": "tool-call", "toolCallId": "s1", "toolName": "search", "input": {}}]]));
    let request = TextRequest::new(user("go")).toolkit(Toolkit::new([tool]).unwrap()).max_steps(1);
    let (parts, outcome) = drain(stream_text(&model, request).await.unwrap()).await;
    let outputs: Vec<(Value, Option<bool>)> = parts
        .iter()
        .filter_map(|part| match part {
            StreamPart::ToolResult { output, preliminary, .. } => Some((output.clone(), *preliminary)),
            _ => None,
        })
        .collect();
    assert_eq!(
        outputs,
        vec![(json!({"progress": 1}), Some(true)), (json!({"progress": 2}), Some(true)), (json!({"hits": 3}), None)]
    );
    assert_eq!(
        results(&outcome.unwrap().response_messages),
        vec![("s1".to_owned(), ToolResultOutput::json(json!({"hits": 3})))]
    );
}

#[tokio::test]
async fn tool_failures_become_results_and_the_turn_goes_on() {
    let tools = [
        Tool::dynamic("panics", json!({})).handler(|_: Value, _| async move {
            if true {
                panic!("boom");
            }
            Ok::<Value, ToolError>(json!(null))
        }),
        Tool::dynamic("io", json!({})).handler(|_: Value, _| async move {
            Err::<Value, _>(std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"))
        }),
        Tool::dynamic("structured", json!({}))
            .handler(|_: Value, _| async move { Err::<Value, _>(ToolError::json(json!({"code": 42}))) }),
    ];
    let model = script(json!([
        [{"type": "tool-call", "toolCallId": "p", "toolName": "panics", "input": {}},
         {"type": "tool-call", "toolCallId": "i", "toolName": "io", "input": {}},
         {"type": "tool-call", "toolCallId": "s", "toolName": "structured", "input": {}}],
        [{"type": "text", "text": "recovered"}]
    ]));
    let request = TextRequest::new(user("go")).toolkit(Toolkit::new(tools).unwrap());
    let (parts, outcome) = drain(stream_text(&model, request).await.unwrap()).await;
    let result = outcome.unwrap();
    assert_eq!(result.text(), "recovered", "the model saw the errors and answered");
    let errors = parts.iter().filter(|p| matches!(p, StreamPart::ToolError { .. })).count();
    assert_eq!(errors, 3);
    let outputs = results(&result.response_messages);
    assert!(matches!(&outputs[0].1, ToolResultOutput::ErrorText { value, .. } if value.contains("boom")));
    assert_eq!(outputs[1].1, ToolResultOutput::error_text("no such file"));
    assert_eq!(outputs[2].1, ToolResultOutput::error_json(json!({"code": 42})));
}

#[tokio::test]
async fn invalid_calls_get_error_results_and_nothing_runs() {
    let log = Executions::default();
    let model = script(json!([
        [{"type": "tool-call", "toolCallId": "u", "toolName": "format_disk", "input": {}},
         {"type": "tool-call", "toolCallId": "b", "toolName": "delete_file", "input": {"path": 3}}],
        [{"type": "text", "text": "sorry"}]
    ]));
    let (parts, outcome) =
        drain(stream_text(&model, TextRequest::new(user("go")).toolkit(toolkit(&log))).await.unwrap()).await;
    let result = outcome.unwrap();
    assert!(log.all().is_empty());
    assert!(result.steps[0].approval_requests.is_empty(), "invalid input is refused, not sent for approval");
    let invalid =
        parts.iter().filter(|p| matches!(p, StreamPart::ToolCall(info) if info.invalid == Some(true))).count();
    assert_eq!(invalid, 2);
    let outputs = results(&result.response_messages);
    assert!(
        matches!(&outputs[0].1, ToolResultOutput::ErrorText { value, .. } if value.contains("unavailable tool 'format_disk'"))
    );
    assert!(
        matches!(&outputs[1].1, ToolResultOutput::ErrorText { value, .. } if value.contains("Invalid input for tool delete_file"))
    );
    assert_eq!(result.text(), "sorry");
}

#[tokio::test]
async fn a_cut_stream_keeps_what_was_said_and_the_pending_approval() {
    let log = Executions::default();
    let model = script(json!([[
        {"type": "text", "text": "Deleting"},
        {"type": "tool-call", "toolCallId": "call-d", "toolName": "delete_file", "input": {"path": "a"}},
        {"type": "tool-call", "toolCallId": "call-w", "toolName": "get_weather", "input": {"city": "Oslo"}},
        {"type": "error", "message": "connection reset"}
    ]]));
    let request = TextRequest::new(user("go")).toolkit(toolkit(&log)).id_generator(counter_ids());
    let (parts, outcome) = drain(stream_text(&model, request).await.unwrap()).await;
    assert!(log.all().is_empty(), "nothing runs on a cut stream");
    let kinds = kinds(&parts);
    assert!(kinds.contains(&"tool-approval-request".to_owned()));
    assert_eq!(&kinds[kinds.len() - 3..], ["finish-step", "error", "finish"]);
    let Err(EngineError::Model { source, response_messages }) = outcome else { panic!("expected a model error") };
    assert!(source.to_string().contains("connection reset"));
    let json = to_json(&response_messages);
    assert_eq!(
        json[0]["content"][3],
        json!({"type": "tool-approval-request", "approvalId": "apr_1", "toolCallId": "call-d"})
    );
    assert!(matches!(&results(&response_messages)[0], (id, ToolResultOutput::ErrorText { .. }) if id == "call-w"));
}

#[tokio::test]
async fn stop_conditions_end_the_loop() {
    let log = Executions::default();
    let model = script(json!([
        [{"type": "tool-call", "toolCallId": "w1", "toolName": "get_weather", "input": {"city": "A"}}],
        [{"type": "tool-call", "toolCallId": "w2", "toolName": "get_weather", "input": {"city": "B"}}],
        [{"type": "text", "text": "end"}]
    ]));
    let all = generate_text(&model, TextRequest::new(user("go")).toolkit(toolkit(&log))).await.unwrap();
    assert_eq!(all.steps.len(), 3);
    let stopped = generate_text(
        &model,
        TextRequest::new(user("go")).toolkit(toolkit(&log)).stop_when(StopCondition::ToolCalled("get_weather".into())),
    )
    .await
    .unwrap();
    assert_eq!(stopped.steps.len(), 1);
    let capped = generate_text(&model, TextRequest::new(user("go")).toolkit(toolkit(&log)).max_steps(2)).await.unwrap();
    assert_eq!(capped.steps.len(), 2);
}

#[test]
fn toolkits_refuse_unusable_tools() {
    let no_handler = Toolkit::new([Tool::dynamic("orphan", json!({}))]).unwrap_err();
    assert_eq!(no_handler, ToolkitError::MissingHandler { name: "orphan".into() });
    let twice = Toolkit::new([
        Tool::function::<PathInput>("a").client_executed(),
        Tool::function::<PathInput>("a").client_executed(),
    ]);
    assert_eq!(twice.unwrap_err(), ToolkitError::DuplicateTool { name: "a".into() });
    let bad_schema = Toolkit::new([Tool::dynamic("bad", json!({"type": 7})).client_executed()]).unwrap_err();
    assert!(matches!(bad_schema, ToolkitError::InvalidSchema { name, .. } if name == "bad"));
}

#[tokio::test]
async fn a_provider_approval_stops_the_loop_even_when_other_calls_ran() {
    let log = Executions::default();
    let model = script(json!([
        [{"type": "tool-call", "toolCallId": "p1", "toolName": "mcp.x", "input": {}, "providerExecuted": true},
         {"type": "tool-approval-request", "approvalId": "prov-apr", "toolCallId": "p1"},
         {"type": "tool-call", "toolCallId": "w", "toolName": "get_weather", "input": {"city": "A"}}],
        [{"type": "text", "text": "next"}]
    ]));
    let result = generate_text(&model, TextRequest::new(user("go")).toolkit(toolkit(&log))).await.unwrap();
    assert_eq!(result.steps.len(), 1, "the model is not called while an approval is pending");
    assert_eq!(result.approval_requests()[0].approval_id, "prov-apr");
    assert_eq!(log.call_ids(), vec!["w"]);
}

#[tokio::test]
async fn calls_of_a_truncated_response_are_not_held_for_later() {
    let log = Executions::default();
    let model = script(json!([[
        {"type": "tool-call", "toolCallId": "w", "toolName": "get_weather", "input": {"city": "A"}},
        {"type": "tool-call", "toolCallId": "d", "toolName": "delete_file", "input": {"path": "a"}},
        {"type": "finish", "finishReason": "length"}
    ]]));
    let request = TextRequest::new(user("go")).toolkit(toolkit(&log)).hold_batch_for_approval(true);
    let result = generate_text(&model, request).await.unwrap();
    assert!(result.steps[0].held_tool_calls.is_empty());
    assert!(matches!(&results(&result.response_messages)[0], (id, ToolResultOutput::ErrorText { value, .. })
        if id == "w" && value.contains("finish reason `length`")));
    assert_eq!(result.approval_requests().len(), 1, "the complete gated call can still be decided");
    assert!(log.all().is_empty());
}

#[tokio::test]
async fn undeclared_provider_tools_stream_as_dynamic() {
    let log = Executions::default();
    let model = script(json!([[
        {"type": "tool-call", "toolCallId": "mcp-1", "toolName": "mcp.shorten", "input": {"url": "x"}, "providerExecuted": true},
        {"type": "tool-approval-request", "approvalId": "mcpr_1", "toolCallId": "mcp-1"},
        {"type": "tool-call", "toolCallId": "w", "toolName": "get_weather", "input": {"city": "A"}}
    ]]));
    let (parts, _) =
        drain(stream_text(&model, TextRequest::new(user("go")).toolkit(toolkit(&log)).max_steps(1)).await.unwrap())
            .await;
    let dynamic: Vec<(String, Option<bool>)> = parts
        .iter()
        .filter_map(|part| match part {
            StreamPart::ToolInputStart { id, dynamic, .. } => Some((format!("start {id}"), *dynamic)),
            StreamPart::ToolCall(info) => Some((format!("call {}", info.tool_call_id), info.dynamic)),
            StreamPart::ToolApprovalRequest { tool_call, .. } => {
                Some((format!("approval {}", tool_call.tool_call_id), tool_call.dynamic))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        dynamic,
        vec![
            ("start mcp-1".to_owned(), Some(true)),
            ("call mcp-1".to_owned(), Some(true)),
            ("approval mcp-1".to_owned(), Some(true)),
            ("start w".to_owned(), None),
            ("call w".to_owned(), None),
        ]
    );
}
