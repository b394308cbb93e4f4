//! The Rust chat client answers a depth-2 approval unchanged: the nested call
//! is one more approval of the turn, and answering it continues the root.

mod support;

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::{call, last_text, pending_approval, text};
use toolgate::ledger::{LedgerConfig, MemoryStore};
use toolgate::model::ScriptedModel;
use toolgate::{Agent, SharedModel, TextRequest, Tool, Toolkit, demo};
use toolgate_client::{Chat, Decision, InProcessTransport, ToolState};

fn scripted(turns: Value) -> ScriptedModel {
    ScriptedModel::from_json(&json!({ "turns": turns }).to_string()).expect("a valid script")
}

#[tokio::test]
async fn a_depth_two_approval_is_answered_like_any_other() {
    let janitor =
        Agent::new(scripted(json!([[call("c", "delete_file", json!({"path": "notes.txt"}))], [text("gone")]])))
            .toolkit(demo::toolkit());
    let manager =
        Agent::new(scripted(json!([[call("j", "janitor", json!({"task": "delete notes"}))], [text("done")]])))
            .toolkit(Toolkit::new([Tool::agent("janitor", janitor)]).unwrap());
    let toolkit = Toolkit::new([Tool::agent("manager", manager)]).unwrap();
    let root: SharedModel =
        Arc::new(scripted(json!([[call("m", "manager", json!({"task": "tidy"}))], [text("all tidy")]])));
    let ledger = LedgerConfig::new(Arc::new(MemoryStore::new()));
    let transport = InProcessTransport::with_requests(root, move |chat_id, messages| {
        TextRequest::new(messages)
            .toolkit(toolkit.clone())
            .ledger(ledger.owned(Some("alice"), chat_id).principal("alice"))
    });
    let chat = Chat::new("nested", transport);
    chat.send_message("tidy up").await.unwrap();
    let approval = pending_approval(&chat, |tool| tool.tool_call_id == "m/j/c");
    chat.add_tool_approval_response(&approval, Decision::Approve).await.unwrap();
    assert_eq!(last_text(&chat), "all tidy");
    let messages = chat.messages();
    let states: Vec<(String, ToolState)> = messages
        .iter()
        .flat_map(|message| message.tool_parts().map(|(_, tool)| (tool.tool_call_id.clone(), tool.state)))
        .collect();
    assert!(states.contains(&("m".into(), ToolState::OutputAvailable)), "{states:?}");
}
