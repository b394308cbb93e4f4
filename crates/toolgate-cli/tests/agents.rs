//! `[[agent]]` tables end to end: `toolgate run` offers a configured agent to
//! the root model; its gated call is asked at the root, answered by the next
//! process on the same SQLite store, and runs exactly once.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use support::Served;

fn toolgate(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    for name in ["TOOLGATE_APPROVAL_SECRET", "TOOLGATE_STORE", "TOOLGATE_TOKEN", "VISUAL", "EDITOR"] {
        command.env_remove(name);
    }
    command.args(args).output().unwrap()
}

/// A chain of `depth` agents (`agent1` calls `agent2` ...; the last deletes
/// notes.txt) in a config file, and the root's script; returns (config, root model spec).
fn chain(dir: &Path, depth: usize) -> (String, String) {
    let turns = |tool: &str, input: Value, done: &str| {
        json!({"turns": [
            [{"type": "tool-call", "toolCallId": "call-1", "toolName": tool, "input": input}],
            [{"type": "text", "text": done}]
        ]})
    };
    let mut config = String::new();
    for level in 1..=depth {
        let (tool, input) = match level == depth {
            true => ("delete_file".to_owned(), json!({"path": "notes.txt"})),
            false => (format!("agent{}", level + 1), json!({"task": "go on"})),
        };
        let script = write(dir, &format!("agent{level}.json"), &turns(&tool, input, &format!("agent{level} done")));
        config.push_str(&format!(
            "[[agent]]\nname = \"agent{level}\"\nmodel = \"script:{script}\"\ntools = [\"{tool}\"]\n"
        ));
    }
    let path = dir.join("chain.toml");
    std::fs::write(&path, config).unwrap();
    let root = write(dir, "root.json", &turns("agent1", json!({"task": "tidy up"}), "All tidy."));
    (path.display().to_string(), format!("script:{root}"))
}

/// Whether `event` records a run of the gated tool (the agents' own calls are on record too).
fn ran_delete_file(event: &Value) -> bool {
    event["kind"] == "executed" && event["data"]["toolName"] == "delete_file"
}

/// How many times the gated tool ran.
fn executed(store: &str) -> usize {
    let audit = lines(&toolgate(&["audit", "--store", store]));
    audit.iter().filter(|event| ran_delete_file(event)).count()
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
    let executed: Vec<&Value> = audit.iter().filter(|event| ran_delete_file(event)).collect();
    assert_eq!(executed.len(), 1, "{audit:#?}");
    assert_eq!(executed[0]["toolCallId"], "call-1");
    // The agent's own call ran once too, on record as any call a policy lets run.
    let agent = audit.iter().filter(|event| event["kind"] == "executed" && event["data"]["toolName"] == "janitor");
    assert_eq!(agent.count(), 1, "{audit:#?}");
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

#[test]
fn toolgate_chat_answers_a_depth_two_approval_as_any_other() {
    let dir = tempfile::tempdir().unwrap();
    let (config, model) = chain(dir.path(), 2);
    let store = format!("sqlite://{}", dir.path().join("chat.db").display());
    let output = toolgate(&[
        "chat",
        "--model",
        &model,
        "--config",
        &config,
        "--store",
        &store,
        "--approve-all",
        "-m",
        "tidy up",
    ]);
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(out.contains("→ approved delete_file (--approve-all)"), "{out}");
    assert!(out.contains("All tidy."), "{out}");
    assert_eq!(executed(&store), 1);
}

/// Alice asks on one replica (a chain of three agents), that replica is
/// killed with SIGKILL while they wait, and a second replica on the same
/// store (started before the kill) gets the answer: the call runs once.
fn killed_at_depth_three_then_answered_elsewhere(store: &str, chat: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (config, model) = chain(dir.path(), 3);
    let args = ["--model", model.as_str(), "--config", config.as_str(), "--store", store];
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = reqwest::Client::new();
    let user = json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "tidy up"}]});

    let first = Served::start(&args);
    let body = json!({"id": chat, "trigger": "submit-message", "messages": [user]});
    let reply = runtime
        .block_on(async { client.post(first.chat_endpoint()).json(&body).send().await.unwrap().text().await.unwrap() });
    assert!(reply.contains("\"toolCallId\":\"call-1/call-1/call-1/call-1\""), "{reply}");
    let stored: Value = runtime.block_on(async {
        client.get(format!("{}/api/chats/{chat}", first.url)).send().await.unwrap().json().await.unwrap()
    });
    let second = Served::start(&args);
    drop(first); // SIGKILL while the three agents wait

    let mut assistant = stored["messages"][1].clone();
    let parts = assistant["parts"].as_array_mut().unwrap();
    let nested =
        parts.iter().find(|part| part["toolCallId"] == "call-1/call-1/call-1/call-1").expect("the nested call");
    let approval_id = nested["approval"]["id"].clone();
    // As `addToolApprovalResponse` does: every part showing that approval (the agent call waiting shows it too).
    for part in parts.iter_mut().filter(|part| part["approval"]["id"] == approval_id) {
        part["state"] = json!("approval-responded");
        part["approval"] = json!({"id": approval_id, "approved": true});
    }
    let message_id = assistant["id"].clone();
    let body = json!({"id": chat, "trigger": "submit-message", "messageId": message_id, "messages": [user, assistant]});
    let send = || {
        runtime.block_on(async {
            client.post(second.chat_endpoint()).json(&body).send().await.unwrap().text().await.unwrap()
        })
    };
    let reply = send();
    assert!(reply.contains("\"output\":\"agent1 done\"") && reply.contains("\"delta\":\"tidy.\""), "{reply}");
    // Sent again (a client retrying): the server replays the stored turn.
    let again = send();
    assert!(again.contains("tidy."), "{again}");
    drop(second);
    let audit = lines(&toolgate(&["audit", "--store", store]));
    // The nested call's events are its sub-run's: the chat's id, then the agent call ids.
    let ran = audit
        .iter()
        .filter(|event| ran_delete_file(event) && event["conversationId"].as_str().unwrap().starts_with(chat))
        .count();
    assert_eq!(ran, 1, "{audit:#?}");
}

#[test]
fn a_server_killed_while_paused_at_depth_three_runs_the_call_once_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    killed_at_depth_three_then_answered_elsewhere(
        &format!("sqlite://{}", dir.path().join("served.db").display()),
        "chat-1",
    );
}

#[test]
fn postgres_replicas_resume_a_depth_three_tree_one_of_them_left() {
    let Ok(url) = std::env::var("TOOLGATE_TEST_POSTGRES_URL") else {
        assert!(std::env::var("TOOLGATE_TEST_REQUIRE_POSTGRES").is_err(), "TOOLGATE_TEST_POSTGRES_URL is required");
        return;
    };
    let chat = format!("chat-{}", std::process::id());
    killed_at_depth_three_then_answered_elsewhere(&url, &chat);
}
