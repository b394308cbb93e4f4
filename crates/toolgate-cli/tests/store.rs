//! `toolgate run --store` and `toolgate audit`: approvals recorded and settled
//! in a store across separate runs of the command, and the audit log read back.

mod support;

use std::process::Output;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::{examples, toolgate};

fn json_lines(output: &Output) -> Vec<Value> {
    String::from_utf8(output.stdout.clone()).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

#[test]
fn approvals_are_settled_once_across_runs_and_the_audit_log_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let script = format!("script:{}", examples().join("request-approval/script.json").display());
    let history = dir.path().join("history.json");
    std::fs::copy(examples().join("request-approval/messages.json"), &history).unwrap();
    let history_arg = history.display().to_string();
    let common = ["--model", &script, "--store", &store, "--conversation", "c-1", "--approval-secret", "s3cret"];

    // 1. The request: the approval is recorded.
    let mut args = vec!["run", "--messages", &history_arg, "--emit", "messages"];
    args.extend_from_slice(&common);
    let asked = toolgate(&args);
    assert!(asked.status.success(), "{}", String::from_utf8_lossy(&asked.stderr));
    let mut messages: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&history).unwrap()).unwrap();
    messages.extend(json_lines(&asked));
    let approval_id = messages
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .find(|p| p["type"] == "tool-approval-request")
        .map(|p| p["approvalId"].as_str().unwrap().to_owned())
        .expect("an approval request");
    messages.push(json!({"role": "tool", "content": [
        {"type": "tool-approval-response", "approvalId": approval_id, "approved": true}]}));
    std::fs::write(&history, serde_json::to_string(&messages).unwrap()).unwrap();

    // 2. The approved continuation, twice: the second run returns the stored result.
    let mut args = vec!["run", "--messages", &history_arg];
    args.extend_from_slice(&common);
    for _ in 0..2 {
        let run = toolgate(&args);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let result = json_lines(&run).into_iter().find(|p| p["type"] == "tool-result").expect("a tool result");
        assert_eq!(result["output"], json!({"deleted": "notes.txt"}));
    }

    // 3. The same approval in another conversation is refused.
    let mut elsewhere = args.clone();
    let position = elsewhere.iter().position(|arg| *arg == "c-1").unwrap();
    elsewhere[position] = "c-2";
    let refused = toolgate(&elsewhere);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("does not match what was issued"));

    // 4. The audit log.
    let audit = toolgate(&["audit", "--store", &store, "--conversation", "c-1"]);
    assert!(audit.status.success(), "{}", String::from_utf8_lossy(&audit.stderr));
    let kinds: Vec<String> = json_lines(&audit).iter().map(|e| e["kind"].as_str().unwrap().to_owned()).collect();
    assert_eq!(kinds, ["issued", "approved", "executed", "rejected"]);
    let all = toolgate(&["audit", "--store", &store]);
    assert_eq!(json_lines(&all).len(), 5, "c-2's refusal is in the log too");
    let bad = toolgate(&["audit", "--store", &store, "--since", "yesterday"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("RFC 3339"));
    let none = toolgate(&["audit", "--store", "none"]);
    assert!(String::from_utf8_lossy(&none.stderr).contains("needs a store"));
}

#[test]
fn approval_ttl_and_store_specs_are_checked() {
    let messages = examples().join("request-approval/messages.json").display().to_string();
    let script = format!("script:{}", examples().join("request-approval/script.json").display());
    let short = toolgate(&["run", "--messages", &messages, "--store", "memory", "--approval-ttl", "10ms"]);
    assert!(!short.status.success());
    assert!(String::from_utf8_lossy(&short.stderr).contains("shorter than one second"));
    let bad = toolgate(&["run", "--model", &script, "--messages", &messages, "--store", "mysql://x"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("mysql://x"), "{}", String::from_utf8_lossy(&bad.stderr));
}
