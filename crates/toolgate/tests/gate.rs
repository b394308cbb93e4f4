//! Request-wide gates: how their verdicts combine with each tool's own policy,
//! on new calls, approved calls, edits and held calls, and why a person is asked.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use futures::FutureExt;
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::protocol::{ContentOutputPart, ModelMessage, ToolResultOutput};
use toolgate::{
    CallGate, EngineError, GateAction, GateCall, StreamPart, TextRequest, Tool, ToolError, Toolkit, Verdict,
    generate_text, stream_text,
};

/// A gate from a function of the call.
struct FnGate<F>(F);

impl<F> CallGate for FnGate<F>
where
    F: Fn(GateCall<'_>) -> Option<Verdict> + Send + Sync,
{
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, Option<Verdict>> {
        futures::future::ready((self.0)(call)).boxed()
    }
}

/// A gate that gives `action` for calls of `tool` and has nothing to say about others.
fn gate_for(tool: &'static str, action: GateAction) -> Arc<dyn CallGate> {
    Arc::new(FnGate(move |call: GateCall<'_>| {
        (call.tool_name == tool).then(|| Verdict {
            action,
            reason: Some(format!("rule `{}` matched", action.as_str())),
            route: None,
        })
    }))
}

fn calls(tool: &str, input: Value) -> toolgate::ScriptedModel {
    script(json!([
        [
            {"type": "tool-call", "toolCallId": "call-1", "toolName": tool, "input": input},
            {"type": "finish", "finishReason": "tool-calls"}
        ],
        [{"type": "text", "text": "done"}, {"type": "finish", "finishReason": "stop"}]
    ]))
}

fn request(log: &Executions, text: &str) -> TextRequest {
    TextRequest::new(vec![ModelMessage::user(text)]).toolkit(toolkit(log))
}

fn denied_reason(messages: &[ModelMessage]) -> Option<String> {
    results(messages).into_iter().find_map(|(_, output)| match output {
        ToolResultOutput::ExecutionDenied { reason, .. } => reason,
        _ => None,
    })
}

#[tokio::test]
async fn a_gate_deny_wins_over_a_tool_that_needs_no_approval() {
    let log = Executions::default();
    let request = request(&log, "weather").gate(gate_for("get_weather", GateAction::Deny));
    let result = generate_text(&calls("get_weather", json!({"city": "Paris"})), request).await.unwrap();

    assert!(log.all().is_empty(), "a denied call must not run");
    assert!(result.approval_requests().is_empty(), "a denied call never reaches a person");
    assert_eq!(denied_reason(&result.response_messages).as_deref(), Some("rule `deny` matched"));
}

#[tokio::test]
async fn a_gate_allow_lifts_the_tools_own_approval() {
    let log = Executions::default();
    let request = request(&log, "delete").gate(gate_for("delete_file", GateAction::Allow));
    let result = generate_text(&calls("delete_file", json!({"path": "a"})), request).await.unwrap();

    assert_eq!(log.call_ids(), ["call-1"]);
    assert!(result.approval_requests().is_empty());
}

#[tokio::test]
async fn a_gate_ask_gates_a_free_tool_and_says_why_on_the_request_and_the_stream() {
    let log = Executions::default();
    let request = request(&log, "weather").gate(gate_for("get_weather", GateAction::Ask));
    let (parts, outcome) =
        drain(stream_text(calls("get_weather", json!({"city": "Oslo"})), request).await.unwrap()).await;
    let result = outcome.unwrap();

    assert!(log.all().is_empty());
    assert_eq!(result.approval_requests()[0].reason.as_deref(), Some("rule `ask` matched"));
    let streamed = parts.iter().find_map(|part| match part {
        StreamPart::ToolApprovalRequest { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    assert_eq!(streamed, Some(Some("rule `ask` matched".to_owned())));
}

#[tokio::test]
async fn without_a_verdict_the_tools_own_reason_is_given() {
    let log = Executions::default();
    let result = generate_text(&calls("delete_file", json!({"path": "a"})), request(&log, "delete")).await.unwrap();
    assert_eq!(result.approval_requests()[0].reason.as_deref(), Some("tool `delete_file` requires approval"));

    let tool = Tool::function::<PathInput>("wipe")
        .needs_approval(true)
        .approval_reason("wiping cannot be undone")
        .handler(|_: PathInput, _| async { Ok::<_, ToolError>(json!({})) });
    let request = TextRequest::new(vec![ModelMessage::user("wipe")]).toolkit(Toolkit::new([tool]).unwrap());
    let result = generate_text(&calls("wipe", json!({"path": "a"})), request).await.unwrap();
    assert_eq!(result.approval_requests()[0].reason.as_deref(), Some("wiping cannot be undone"));
}

#[tokio::test]
async fn a_tools_own_verdict_may_say_why_it_asks_and_a_reasonless_deny_still_names_one() {
    let tool = Tool::function::<PathInput>("sweep")
        .approval_reason("sweeping needs a look")
        .policy(|input: &PathInput, _| match input.path.as_str() {
            "tmp" => Verdict::ask().because("sweeping tmp empties every session's scratch space"),
            "home" => Verdict { action: GateAction::Deny, reason: None, route: None },
            _ => Verdict::ask(),
        })
        .handler(|_: PathInput, _| async { Ok::<_, ToolError>(json!({})) });
    let toolkit = Toolkit::new([tool]).unwrap();
    let run = |path: &str| {
        let request = TextRequest::new(vec![ModelMessage::user("sweep")]).toolkit(toolkit.clone());
        let model = calls("sweep", json!({ "path": path }));
        async move { generate_text(&model, request).await.unwrap() }
    };

    let result = run("tmp").await;
    let reason = result.approval_requests()[0].reason.clone();
    assert_eq!(reason.as_deref(), Some("sweeping tmp empties every session's scratch space"));
    let result = run("logs").await;
    assert_eq!(result.approval_requests()[0].reason.as_deref(), Some("sweeping needs a look"));
    let result = run("home").await;
    assert!(result.approval_requests().is_empty());
    let reason = denied_reason(&result.response_messages);
    assert_eq!(reason.as_deref(), Some("tool `sweep` denies this call"));
}

#[tokio::test]
async fn a_gate_allow_never_lifts_a_refusal_the_tools_own_code_makes() {
    let tool = Tool::function::<PathInput>("guarded")
        .policy(|input: &PathInput, _| match input.path.starts_with("/etc") {
            true => Verdict::deny("system files are off limits"),
            false => Verdict::allow(),
        })
        .handler(|_: PathInput, _| async { Ok::<_, ToolError>(json!({"ran": true})) });
    let request = TextRequest::new(vec![ModelMessage::user("go")])
        .toolkit(Toolkit::new([tool]).unwrap())
        .gate(gate_for("guarded", GateAction::Allow));
    let result = generate_text(&calls("guarded", json!({"path": "/etc/passwd"})), request).await.unwrap();

    assert_eq!(denied_reason(&result.response_messages).as_deref(), Some("system files are off limits"));
}

#[tokio::test]
async fn an_approved_call_a_gate_now_denies_does_not_run() {
    let log = Executions::default();
    let history = answered(json!({"type": "tool-approval-response", "approvalId": "apr_1", "approved": true}));
    let request = TextRequest::new(history).toolkit(toolkit(&log)).gate(gate_for("delete_file", GateAction::Deny));
    let result = generate_text(&ok_model(), request).await.unwrap();

    assert!(log.all().is_empty(), "a deny rule holds against an approval given before it");
    assert_eq!(denied_reason(&result.response_messages).as_deref(), Some("rule `deny` matched"));
}

#[tokio::test]
async fn an_edit_a_gate_denies_fails_the_request_and_runs_nothing() {
    let log = Executions::default();
    let deny_etc: Arc<dyn CallGate> = Arc::new(FnGate(|call: GateCall<'_>| {
        let path = call.input["path"].as_str().unwrap_or_default();
        path.starts_with("/etc").then(|| Verdict::deny("rule `no-etc`"))
    }));
    let history = answered(json!({"type": "tool-approval-response", "approvalId": "apr_1", "approved": true,
        "editedInput": {"path": "/etc/passwd"}}));
    let request = TextRequest::new(history).toolkit(toolkit(&log)).gate(deny_etc);
    let error = generate_text(&ok_model(), request).await.unwrap_err();

    assert!(log.all().is_empty());
    assert!(matches!(&error, EngineError::EditDenied { reason, .. } if reason == "rule `no-etc`"), "{error:?}");
}

#[tokio::test]
async fn the_gate_sees_the_conversation_and_the_principal() {
    let log = Executions::default();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let gate: Arc<dyn CallGate> = Arc::new(FnGate(move |call: GateCall<'_>| {
        let who = (call.conversation_id.map(str::to_owned), call.principal.map(str::to_owned));
        record.lock().unwrap().push((call.tool_name.to_owned(), call.tool_call_id.to_owned(), who));
        None
    }));
    let request = request(&log, "weather").gate(gate).conversation_id("chat-7").principal("alice");
    generate_text(&calls("get_weather", json!({"city": "Rome"})), request).await.unwrap();

    let who = (Some("chat-7".to_owned()), Some("alice".to_owned()));
    assert_eq!(*seen.lock().unwrap(), [("get_weather".to_owned(), "call-1".to_owned(), who)]);
}

#[tokio::test]
async fn a_gate_that_panics_asks_a_person() {
    let log = Executions::default();
    let gate: Arc<dyn CallGate> = Arc::new(FnGate(|_: GateCall<'_>| -> Option<Verdict> { panic!("broken rule") }));
    let request = request(&log, "weather").gate(gate);
    let result = generate_text(&calls("get_weather", json!({"city": "Rome"})), request).await.unwrap();

    assert!(log.all().is_empty(), "a failing gate must not let a call run");
    let reason = result.approval_requests()[0].reason.clone().unwrap();
    assert!(reason.contains("broken rule"), "{reason}");
}

#[tokio::test]
async fn a_tool_maps_its_output_to_what_the_model_reads() {
    let tool = Tool::dynamic("snapshot", json!({"type": "object"}))
        .handler(|_: Value, _| async { Ok::<_, ToolError>(json!({"png": "aGk="})) })
        .to_model_output(|output| ToolResultOutput::Content {
            value: vec![ContentOutputPart::ImageData {
                data: output["png"].as_str().unwrap_or_default().to_owned(),
                media_type: "image/png".into(),
                provider_options: None,
            }],
            provider_options: None,
        });
    let request = TextRequest::new(vec![ModelMessage::user("look")]).toolkit(Toolkit::new([tool]).unwrap());
    let result = generate_text(&calls("snapshot", json!({})), request).await.unwrap();

    let outputs = results(&result.response_messages);
    assert!(
        matches!(&outputs[0].1, ToolResultOutput::Content { value, .. }
            if matches!(&value[0], ContentOutputPart::ImageData { data, .. } if data == "aGk=")),
        "{outputs:?}"
    );
}
