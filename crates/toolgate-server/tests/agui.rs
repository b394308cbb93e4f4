//! `POST /ag-ui` over a real socket: interrupt, resume, and refused resumes.

mod common;

use common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

async fn run(server: &Server, input: Value) -> Vec<Value> {
    agui_events(&post(server, "/ag-ui", "application/json", input.to_string().as_bytes()).await)
}

#[tokio::test]
async fn an_approval_interrupts_the_run_and_a_resume_runs_the_tool() {
    let server = start(None).await;
    let first = run(
        &server,
        json!({"threadId": "t1", "runId": "r1", "state": {}, "tools": [], "context": [],
               "messages": [{"id": "m1", "role": "user", "content": "delete notes.txt"}]}),
    )
    .await;
    assert_eq!(first[0]["type"], "RUN_STARTED");
    let finished = last_event(&first, "RUN_FINISHED");
    let interrupt = &finished["outcome"]["interrupts"][0];
    assert_eq!(finished["outcome"]["type"], "interrupt");
    assert_eq!(interrupt["reason"], "tool_call");
    assert_eq!(interrupt["toolCallId"], "call-1");
    assert!(interrupt["id"].as_str().unwrap().contains('.'), "signed interrupt id");

    let resumed = run(
        &server,
        json!({"threadId": "t1", "runId": "r2", "tools": [], "context": [],
               "messages": last_event(&first, "MESSAGES_SNAPSHOT")["messages"],
               "state": last_event(&first, "STATE_SNAPSHOT")["snapshot"],
               "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": true}}]}),
    )
    .await;
    let kinds: Vec<&str> = resumed.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let result = kinds.iter().position(|k| *k == "TOOL_CALL_RESULT").unwrap();
    let text = kinds.iter().position(|k| *k == "TEXT_MESSAGE_START").unwrap();
    assert!(result < text, "the approved result precedes the model's answer: {kinds:?}");
    assert!(!kinds.contains(&"TOOL_CALL_START"), "the call is not announced again");
    assert_eq!(resumed[result]["toolCallId"], "call-1");
    assert_eq!(
        serde_json::from_str::<Value>(resumed[result]["content"].as_str().unwrap()).unwrap(),
        json!({"deleted": "notes.txt"})
    );
    assert_eq!(last_event(&resumed, "RUN_FINISHED")["outcome"]["type"], "success");
}

#[tokio::test]
async fn refused_resumes_report_run_error_and_bad_bodies_a_4xx() {
    let server = start(None).await;
    let unknown = run(
        &server,
        json!({"threadId": "t", "runId": "r", "tools": [], "context": [],
               "messages": [{"id": "m1", "role": "user", "content": "hi"}],
               "state": {}, "resume": [{"interruptId": "apr_nope", "status": "resolved", "payload": {"approved": true}}]}),
    )
    .await;
    let types: Vec<&str> = unknown.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["RUN_STARTED", "RUN_ERROR"], "{unknown:#?}");
    let error = last_event(&unknown, "RUN_ERROR");
    assert_eq!(error["code"], "no_pending_interrupts", "{error}");
    assert!(error["message"].is_string(), "{error}");
    assert_eq!(server.trace_text(), "", "the model was never called");

    let bad = post(&server, "/ag-ui", "application/json", b"{\"threadId\": 3}").await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["error"]["code"], "invalid_input", "{}", bad.body);
    assert!(bad.json()["error"]["message"].is_string());
    let wrong_type = post(&server, "/ag-ui", "text/plain", b"{}").await;
    assert_eq!(wrong_type.status, 415);
}
