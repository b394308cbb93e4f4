//! `[[agent]]` tables end to end: `toolgate run` offers a configured agent to
//! the root model; its gated call is asked at the root, answered by the next
//! process on the same SQLite store, and runs exactly once.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn toolgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate")).args(args).env_remove("TOOLGATE_APPROVAL_SECRET").output().unwrap()
}

fn write(dir: &Path, name: &str, value: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, value.to_string()).unwrap();
    path.display().to_string()
}

fn lines(output: &Output) -> Vec<Value> {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

#[test]
fn a_configured_agent_asks_at_the_root_and_runs_once_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let root = write(
        dir.path(),
        "root.json",
        &json!({"turns": [
            [{"type": "tool-call", "toolCallId": "call-1", "toolName": "janitor", "input": {"task": "remove notes"}}],
            [{"type": "text", "text": "The janitor is done."}]
        ]}),
    );
    let janitor = write(
        dir.path(),
        "janitor.json",
        &json!({"turns": [
            [{"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}}],
            [{"type": "text", "text": "notes.txt deleted"}]
        ]}),
    );
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[[agent]]\nname = \"janitor\"\ndescription = \"Cleans up files\"\nmodel = \"script:{janitor}\"\n\
             instructions = \"You clean up.\"\ntools = [\"delete_file\"]\nmax_steps = 3\n"
        ),
    )
    .unwrap();
    let store = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let config = config.display().to_string();
    let run = |history: &Value, emit: &str| {
        let messages = write(dir.path(), "messages.json", history);
        let model = format!("script:{root}");
        lines(&toolgate(&[
            "run",
            "--model",
            &model,
            "--messages",
            &messages,
            "--config",
            &config,
            "--store",
            &store,
            "--emit",
            emit,
        ]))
    };

    let mut history = vec![json!({"role": "user", "content": "tidy up"})];
    let asked = run(&json!(history), "messages");
    let parts = asked[0]["content"].as_array().unwrap();
    let call = parts.iter().find(|part| part["toolCallId"] == "call-1/call-1" && part["type"] == "tool-call").unwrap();
    assert_eq!((&call["toolName"], &call["input"]), (&json!("delete_file"), &json!({"path": "notes.txt"})));
    let request = parts.iter().find(|part| part["type"] == "tool-approval-request").expect("asked at the root");
    assert_eq!(request["toolCallId"], "call-1/call-1");
    let approval_id = request["approvalId"].as_str().unwrap().to_owned();

    // The next process answers; the one after gets the same answer again.
    history.extend(asked);
    history.push(json!({"role": "tool", "content": [
        {"type": "tool-approval-response", "approvalId": approval_id, "approved": true}
    ]}));
    let done = run(&json!(history), "messages");
    let result = &done[0]["content"][0];
    assert_eq!(
        (&result["toolName"], &result["output"]),
        (&json!("janitor"), &json!({"type": "text", "value": "notes.txt deleted"}))
    );
    assert_eq!(done.last().unwrap()["content"][0]["text"], "The janitor is done.");
    assert_eq!(run(&json!(history), "messages"), done);

    let audit = lines(&toolgate(&["audit", "--store", &store]));
    let executed: Vec<&Value> = audit.iter().filter(|event| event["kind"] == "executed").collect();
    assert_eq!(executed.len(), 1, "{audit:#?}");
    assert_eq!(executed[0]["toolCallId"], "call-1");
}

#[test]
fn a_circle_of_agents_is_refused_when_the_config_loads() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[[agent]]\nname = \"a\"\nmodel = \"script:x.json\"\ntools = [\"b\"]\n\
         [[agent]]\nname = \"b\"\nmodel = \"script:x.json\"\ntools = [\"a\"]\n",
    )
    .unwrap();
    let messages = dir.path().join("m.json");
    std::fs::write(&messages, r#"[{"role": "user", "content": "hi"}]"#).unwrap();
    let model = format!("script:{}", write(dir.path(), "x.json", &json!({"turns": [[]]})));
    let output = toolgate(&[
        "run",
        "--model",
        &model,
        "--messages",
        &messages.display().to_string(),
        "--config",
        &config.display().to_string(),
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("call each other in a circle: a -> b -> a"), "{stderr}");
}
