//! `toolgate run` end to end, on the shipped examples.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn toolgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate")).args(args).env_remove("TOOLGATE_APPROVAL_SECRET").output().unwrap()
}

fn run_example(name: &str, extra: &[&str]) -> Vec<Value> {
    let dir = examples().join(name);
    let model = format!("script:{}", dir.join("script.json").display());
    let messages = dir.join("messages.json").display().to_string();
    let mut args = vec!["run", "--model", &model, "--messages", &messages];
    args.extend_from_slice(extra);
    let output = toolgate(&args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    json_lines(&output)
}

fn json_lines(output: &Output) -> Vec<Value> {
    String::from_utf8(output.stdout.clone()).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

fn types(parts: &[Value]) -> Vec<&str> {
    parts
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .filter(|t| !t.starts_with("tool-input") && !t.starts_with("text-"))
        .collect()
}

#[test]
fn request_approval_example_asks_before_deleting() {
    let parts = run_example("request-approval", &[]);
    assert_eq!(types(&parts), ["start", "start-step", "tool-call", "tool-approval-request", "finish-step", "finish"]);
    let request = parts.iter().find(|p| p["type"] == "tool-approval-request").unwrap();
    assert!(request["approvalId"].as_str().unwrap().starts_with("apr_"));
    assert_eq!(
        request["toolCall"],
        json!({"toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}})
    );
    assert_eq!(parts.last().unwrap()["finishReason"], "tool-calls");
}

#[test]
fn approved_example_deletes_before_the_model_speaks() {
    let parts = run_example("approved", &[]);
    assert_eq!(types(&parts), ["start", "tool-result", "start-step", "finish-step", "finish"]);
    assert_eq!(parts[1]["output"], json!({"deleted": "notes.txt"}));
}

#[test]
fn denied_example_tells_the_model_why() {
    let parts = run_example("denied", &[]);
    assert_eq!(types(&parts), ["start", "tool-output-denied", "start-step", "finish-step", "finish"]);
    let prompts = run_example("denied", &["--emit", "prompts"]);
    assert_eq!(
        prompts[0][2],
        json!({"role": "tool", "content": [{"type": "tool-result", "toolCallId": "call-1", "toolName": "delete_file",
            "output": {"type": "execution-denied", "reason": "I still need that file"}}]})
    );
}

#[test]
fn edited_input_example_runs_the_edit() {
    let parts = run_example("edited-input", &[]);
    assert_eq!(parts[1]["input"], json!({"path": "notes-old.txt"}));
    assert_eq!(parts[1]["output"], json!({"deleted": "notes-old.txt"}));
}

#[test]
fn mixed_batch_example_runs_what_is_safe_and_asks_for_the_rest() {
    let messages = run_example("mixed-batch", &["--emit", "messages"]);
    let assistant = &messages[0]["content"];
    let requested: Vec<&str> = assistant
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "tool-approval-request")
        .map(|p| p["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(requested, ["call-d", "call-l"]);
    assert_eq!(
        messages[1]["content"],
        json!([
            {"type": "tool-result", "toolCallId": "call-w", "toolName": "get_weather",
             "output": {"type": "json", "value": {"city": "Paris", "temperatureC": 21, "condition": "sunny"}}},
            {"type": "tool-result", "toolCallId": "call-s", "toolName": "transfer_money",
             "output": {"type": "json", "value": {"transferred": 50, "to": "Ana"}}}
        ])
    );
}

#[test]
fn signed_approvals_round_trip_and_tampering_is_refused() {
    let dir = examples().join("request-approval");
    let model = format!("script:{}", dir.join("script.json").display());
    let first = toolgate(&[
        "run",
        "--model",
        &model,
        "--messages",
        &dir.join("messages.json").display().to_string(),
        "--approval-secret",
        "k3y",
        "--emit",
        "messages",
    ]);
    assert!(first.status.success());
    let response = json_lines(&first);
    let approval_id = response[0]["content"][2]["approvalId"].as_str().unwrap().to_owned();
    assert!(approval_id.contains('.'), "signed ids carry the signature: {approval_id}");

    let scratch = std::env::temp_dir().join(format!("toolgate-cli-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let continue_with = |assistant: Value, secret: &str| {
        let history = json!([
            {"role": "user", "content": "Please delete notes.txt"},
            assistant,
            {"role": "tool", "content": [{"type": "tool-approval-response", "approvalId": approval_id, "approved": true}]}
        ]);
        let file = scratch.join(format!("{secret}-{}.json", history.to_string().len()));
        std::fs::write(&file, history.to_string()).unwrap();
        toolgate(&["run", "--model", &model, "--messages", &file.display().to_string(), "--approval-secret", secret])
    };

    let approved = continue_with(response[0].clone(), "k3y");
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    assert_eq!(json_lines(&approved)[1]["output"], json!({"deleted": "notes.txt"}));

    let mut tampered = response[0].clone();
    tampered["content"][1]["input"]["path"] = json!("/etc/passwd");
    let refused = continue_with(tampered, "k3y");
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("signature verification failed") && stderr.contains("invalid signature"), "{stderr}");
    assert!(refused.stdout.is_empty(), "nothing ran, nothing streamed");

    let wrong_secret = continue_with(response[0].clone(), "other");
    assert_eq!(wrong_secret.status.code(), Some(1));
    std::fs::remove_dir_all(&scratch).ok();
}

#[test]
fn malformed_histories_are_reported_with_their_location() {
    let scratch = std::env::temp_dir().join(format!("toolgate-cli-bad-{}.json", std::process::id()));
    std::fs::write(
        &scratch,
        r#"[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool-call","toolName":"x"}]}]"#,
    )
    .unwrap();
    let model = format!("script:{}", examples().join("request-approval/script.json").display());
    let output = toolgate(&["run", "--model", &model, "--messages", &scratch.display().to_string()]);
    std::fs::remove_file(&scratch).ok();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("invalid message 1 at `content[0]`") && stderr.contains("toolCallId"), "{stderr}");

    let unknown = toolgate(&["run", "--model", "gpt:x", "--messages", "x.json"]);
    assert_eq!(unknown.status.code(), Some(1));
}
