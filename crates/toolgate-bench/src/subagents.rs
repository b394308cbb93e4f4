//! `subagents_bench --http`: the sub-agent approval round trip over HTTP, the
//! way a stock AI SDK client (`useChat`) makes it.
//!
//! Two `toolgate serve --store sqlite` processes share one directory of
//! files: one whose root model calls the gated `delete_file` itself (flat),
//! one whose root model calls `agent1`, an `[[agent]]` that calls `agent2`,
//! that calls `agent3`, that calls `delete_file` (depth 3). Each is driven by
//! one keep-alive connection of one principal, one request at a time.
//!
//! A round trip is two timed `POST /api/chat`: the one that asks (its stream
//! ends with the approval request) and the one that approves and runs to the
//! root's answer. Between them, untimed, the client's copy of the assistant
//! message is read back (`GET /api/chats/{id}`) and every part carrying the
//! approval is marked answered, as `addToolApprovalResponse` does.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::inbox::client::Client;
use crate::inbox::server::{ServeOptions, Server};
use crate::load::excerpt;
use crate::sse;

/// The root's answer when a round trip is done.
pub const ANSWER: &str = "All tidy.";

/// The bearer token of the one principal (`alice`) both servers know.
const TOKEN: &str = "subagents-bench-token-alice";

/// A scripted model: one call of `tool` with `input`, then the text `done`.
fn script(tool: &str, input: Value, done: &str) -> Value {
    json!({"turns": [
        [{"type": "tool-call", "toolCallId": "call-1", "toolName": tool, "input": input}],
        [{"type": "text", "text": done}]
    ]})
}

fn write(path: &Path, text: &str) -> anyhow::Result<PathBuf> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path.to_owned())
}

/// The files of a server whose root reaches the gated call through `depth`
/// agents, under `work/NAME-*`: (its config, its root model's script).
pub fn write_tree(work: &Path, name: &str, depth: usize) -> anyhow::Result<(PathBuf, PathBuf)> {
    let mut config = format!("# {name}: the root reaches delete_file through {depth} agents.\n");
    for level in 1..=depth {
        let (tool, input) = match level == depth {
            true => ("delete_file".to_owned(), json!({"path": "notes.txt"})),
            false => (format!("agent{}", level + 1), json!({"task": "go on"})),
        };
        let script_path = work.join(format!("{name}-agent{level}.json"));
        write(&script_path, &script(&tool, input, &format!("agent{level} done")).to_string())?;
        config.push_str(&format!(
            "\n[[agent]]\nname = \"agent{level}\"\ndescription = \"Level {level}\"\nmodel = \"script:{}\"\n\
             instructions = \"You are agent {level}.\"\ntools = [\"{tool}\"]\n",
            script_path.display()
        ));
    }
    let (tool, input) = match depth {
        0 => ("delete_file", json!({"path": "notes.txt"})),
        _ => ("agent1", json!({"task": "tidy up"})),
    };
    let root = write(&work.join(format!("{name}-root.json")), &script(tool, input, ANSWER).to_string())?;
    Ok((write(&work.join(format!("{name}.toml")), &config)?, root))
}

/// Starts `toolgate serve --store sqlite` (a fresh file under `work/NAME`) for a tree of `depth` agents.
pub fn serve(toolgate: &Path, work: &Path, name: &str, depth: usize) -> anyhow::Result<Server> {
    let (config, script) = write_tree(work, name, depth)?;
    // Private, as the server asks of a tokens file and a data directory (it warns otherwise).
    let tokens = work.join("tokens.json");
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tokens)?;
    file.write_all(json!({TOKEN: "alice"}).to_string().as_bytes())?;
    let data_dir = work.join(name);
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&data_dir)?;
    let store = format!("sqlite://{}", data_dir.join("toolgate.db").display());
    let log = work.join(format!("{name}.log"));
    let options = ServeOptions {
        toolgate,
        store: &store,
        data_dir: &data_dir,
        tokens: &tokens,
        config: &config,
        script: &script,
        log: &log,
        flags: &[],
    };
    Server::start(&options)
}

/// One keep-alive connection of the principal to `server`.
pub fn client(server: &Server) -> anyhow::Result<Client> {
    Client::new(server.addr, TOKEN)
}

fn user_message(chat_id: &str) -> Value {
    json!({"id": format!("{chat_id}-u"), "role": "user", "parts": [{"type": "text", "text": "tidy up"}]})
}

/// The continuation body: the user's message and the client's copy of the
/// assistant message with every part that carries `approval_id` answered (approved).
pub fn continuation(chat_id: &str, mut assistant: Value, approval_id: &str) -> anyhow::Result<Value> {
    let parts = assistant["parts"].as_array_mut().context("the assistant message has no parts")?;
    let mut answered = 0;
    for part in parts.iter_mut().filter(|part| part["approval"]["id"] == approval_id) {
        part["state"] = json!("approval-responded");
        part["approval"] = json!({"id": approval_id, "approved": true});
        answered += 1;
    }
    anyhow::ensure!(answered > 0, "no part of the assistant message carries approval {approval_id}");
    let message_id = assistant["id"].clone();
    Ok(json!({"id": chat_id, "trigger": "submit-message", "messageId": message_id,
              "messages": [user_message(chat_id), assistant]}))
}

/// Checks the stream that approved: no error, and the root's answer.
pub fn check_answered(body: &str) -> anyhow::Result<()> {
    let chunks = sse::chunks(body);
    if let Some(error) = chunks.iter().find(|chunk| chunk["type"] == "error" || chunk["type"] == "tool-output-error") {
        bail!("the continuation streamed {error}");
    }
    let text: String =
        chunks.iter().filter(|c| c["type"] == "text-delta").filter_map(|c| c["delta"].as_str()).collect();
    anyhow::ensure!(text == ANSWER, "the root answered {text:?}, not {ANSWER:?}: {}", excerpt(body.as_bytes()));
    Ok(())
}

/// One round trip on a fresh conversation `chat_id`: the time of its two `POST /api/chat`.
pub async fn round_trip(client: &mut Client, chat_id: &str) -> anyhow::Result<Duration> {
    let first = json!({"id": chat_id, "trigger": "submit-message", "messages": [user_message(chat_id)]});
    let asked = client.send(hyper::Method::POST, "/api/chat", Some(first)).await?;
    let text = String::from_utf8_lossy(&asked.body);
    anyhow::ensure!(asked.status == hyper::StatusCode::OK, "HTTP {} asking: {}", asked.status, excerpt(&asked.body));
    let chunks = sse::chunks(&text);
    let request = chunks.iter().find(|chunk| chunk["type"] == "tool-approval-request");
    let request = request.with_context(|| format!("{chat_id}: no approval request: {}", excerpt(&asked.body)))?;
    let approval_id = request["approvalId"].as_str().context("an approval request without approvalId")?;
    let stored = client.get(&format!("/api/chats/{chat_id}")).await?.json()?;
    let assistant = stored["messages"][1].clone();
    let body = continuation(chat_id, assistant, approval_id).with_context(|| chat_id.to_owned())?;
    let done = client.send(hyper::Method::POST, "/api/chat", Some(body)).await?;
    anyhow::ensure!(done.status == hyper::StatusCode::OK, "HTTP {} approving: {}", done.status, excerpt(&done.body));
    check_answered(&String::from_utf8_lossy(&done.body)).with_context(|| chat_id.to_owned())?;
    Ok(asked.elapsed + done.elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_depth_three_config_chains_the_agents_to_the_gated_tool() {
        let dir = tempfile::tempdir().unwrap();
        let (config, root) = write_tree(dir.path(), "deep", 3).unwrap();
        let config = std::fs::read_to_string(config).unwrap();
        assert_eq!(config.matches("[[agent]]").count(), 3);
        assert!(config.contains("name = \"agent3\"") && config.contains("tools = [\"delete_file\"]"));
        assert!(config.contains("tools = [\"agent2\"]") && config.contains("tools = [\"agent3\"]"));
        let root: Value = serde_json::from_str(&std::fs::read_to_string(root).unwrap()).unwrap();
        assert_eq!(root["turns"][0][0]["toolName"], "agent1");
        let (flat, root) = write_tree(dir.path(), "flat", 0).unwrap();
        assert!(!std::fs::read_to_string(flat).unwrap().contains("[[agent]]"));
        assert!(std::fs::read_to_string(root).unwrap().contains("delete_file"));
    }

    #[test]
    fn the_continuation_answers_every_part_with_the_approval() {
        let assistant = json!({"id": "m1", "role": "assistant", "parts": [
            {"type": "tool-agent1", "toolCallId": "call-1", "state": "approval-requested", "approval": {"id": "apr_1"}},
            {"type": "dynamic-tool", "toolCallId": "call-1/call-1", "state": "approval-requested", "approval": {"id": "apr_1"}},
            {"type": "text", "text": "x"}]});
        let body = continuation("c1", assistant.clone(), "apr_1").unwrap();
        assert_eq!(body["messageId"], "m1");
        let parts = body["messages"][1]["parts"].as_array().unwrap();
        for part in &parts[..2] {
            assert_eq!((&part["state"], &part["approval"]["approved"]), (&json!("approval-responded"), &json!(true)));
        }
        assert!(continuation("c1", assistant, "apr_2").is_err());
    }

    #[test]
    fn only_the_roots_answer_without_errors_passes() {
        let done = "data: {\"type\":\"text-delta\",\"id\":\"t\",\"delta\":\"All tidy.\"}\n\ndata: [DONE]\n\n";
        assert!(check_answered(done).is_ok());
        assert!(check_answered(&done.replace("All tidy.", "Nope")).is_err());
        let failed = format!("data: {{\"type\":\"error\",\"errorText\":\"x\"}}\n\n{done}");
        assert!(check_answered(&failed).is_err());
    }
}
