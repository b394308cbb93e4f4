//! A sub-agent's progress over AG-UI: while an agent call runs (and when it
//! pauses on a gated call), each progress report is a `CUSTOM` event
//! `toolgate.subagent.progress` naming the sub-run (`subagentRunId`, its
//! `lineage`), and the run ends with the nested call's interrupt as before.

mod common;

use std::sync::Arc;

use common::*;
use futures::StreamExt;
use serde_json::{Value, json};
use toolgate::ledger::{LedgerConfig, ManualClock, MemoryStore};
use toolgate::{Agent, TextRequest, Tool, Toolkit};
use toolgate_agui::{EncoderOptions, RunAgentInput, SUBAGENT_PROGRESS_EVENT, run_events};

/// The root asks the `janitor`, which deletes notes.txt (gated) after looking
/// at the weather (not gated); every id and time is deterministic.
async fn events() -> Vec<Value> {
    let deletions = Deletions::default();
    let janitor = Agent::new(script(json!([
        [{"type": "tool-call", "toolCallId": "j1", "toolName": "get_weather", "input": {"city": "Oslo"}}],
        [{"type": "tool-call", "toolCallId": "j2", "toolName": "delete_file", "input": {"path": "notes.txt"}}],
        [{"type": "text", "text": "Deleted."}]
    ])))
    .toolkit(toolkit(&deletions));
    let root = script(json!([
        [{"type": "tool-call", "toolCallId": "c1", "toolName": "janitor", "input": {"task": "delete notes.txt"}}],
        [{"type": "text", "text": "Done."}]
    ]));
    let tools = Toolkit::new([Tool::agent("janitor", janitor)]).unwrap();
    let ledger = LedgerConfig::new(Arc::new(MemoryStore::new()))
        .clock(Arc::new(ManualClock::new(1_767_225_600_000)))
        .conversation("t1");
    let input = RunAgentInput::from_value(json!({"threadId": "t1", "runId": "r1", "state": {}, "tools": [],
        "context": [], "messages": [{"id": "u1", "role": "user", "content": "tidy up"}]}))
    .unwrap();
    let options = EncoderOptions::default().id_generator(counter("m"));
    let events = run_events(&root, input, options, move |messages| {
        TextRequest::new(messages).toolkit(tools).id_generator(counter("n")).ledger(ledger)
    });
    events.map(|event| serde_json::to_value(event).unwrap()).collect().await
}

#[tokio::test]
async fn a_sub_agents_progress_is_tagged_with_its_sub_run() {
    let events = events().await;
    let progress: Vec<&Value> =
        events.iter().filter(|e| e["type"] == "CUSTOM" && e["name"] == SUBAGENT_PROGRESS_EVENT).collect();
    assert!(progress.len() >= 3, "a report per step and call event: {events:#?}");
    for event in &progress {
        let value = &event["value"];
        assert_eq!((&value["toolCallId"], &value["subagentRunId"]), (&json!("c1"), &json!("c1")));
        assert_eq!(value["lineage"], json!([{"agent": "janitor", "toolCallId": "c1"}]));
        assert_eq!(value["progress"]["agent"], "janitor");
    }
    assert_eq!(progress.last().unwrap()["value"]["progress"]["status"], "awaiting-approval");
    let finished = events.last().unwrap();
    assert_eq!(finished["outcome"]["interrupts"][0]["subagentRunId"], "c1");
    insta::assert_json_snapshot!("subagent_progress_events", events);
}
