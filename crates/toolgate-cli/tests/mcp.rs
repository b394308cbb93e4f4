//! MCP servers through `toolgate serve --config`: the reference filesystem
//! server on a temp directory, a scripted model, and the Rust chat client as
//! the person. A read runs without asking (the server is trusted), a write
//! waits for approval and runs once approved, a denial leaves the directory
//! untouched, and a `[[rule]]` of the same file decides over MCP tools too.

#[path = "../../toolgate-mcp/tests/support/mod.rs"]
#[allow(dead_code)]
mod mcp_support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use mcp_support::NpmServers;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate_client::{Chat, Decision, HttpTransport, ToolState};

/// The model reads `a.txt`, then writes `b.txt`; then it says it is done.
fn script(dir: &Path, root: &Path) -> String {
    let turns = json!({"turns": [
        [{"type": "tool-call", "toolCallId": "read-1", "toolName": "fs__read_text_file",
          "input": {"path": root.join("a.txt")}},
         {"type": "tool-call", "toolCallId": "write-1", "toolName": "fs__write_file",
          "input": {"path": root.join("b.txt"), "content": "written by the model"}},
         {"type": "finish", "finishReason": "tool-calls"}],
        [{"type": "text", "text": "Done."}, {"type": "finish", "finishReason": "stop"}]
    ]});
    let path = dir.join("script.json");
    std::fs::write(&path, turns.to_string()).unwrap();
    path.display().to_string()
}

/// The config file: the filesystem server (trusted) and optionally rules.
fn config(dir: &Path, servers: &NpmServers, root: &Path, rules: &str) -> String {
    let fs = servers.filesystem("fs", root);
    let args: Vec<String> = fs.args.iter().map(|arg| format!("{arg:?}")).collect();
    let text = format!(
        "[[mcp]]\nname = \"fs\"\ncommand = {:?}\nargs = [{}]\ntrusted = true\n\n{rules}",
        fs.command.unwrap(),
        args.join(", ")
    );
    let path = dir.join("toolgate.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// `toolgate serve --tools none` on a free port; killed on drop.
struct Served {
    child: Child,
    endpoint: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(script: &str, config: &str, data_dir: &Path) -> Served {
    let data_dir = data_dir.display().to_string();
    let model = format!("script:{script}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--addr", "127.0.0.1:0", "--tools", "none", "--model", &model, "--config", config])
        .args(["--data-dir", &data_dir])
        .env("TOOLGATE_LOG", "info")
        .env_remove("TOOLGATE_STORE")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().expect("the server logs its address").unwrap();
        if let Some(at) = line.find("serving on http://") {
            let rest = &line[at + "serving on ".len()..];
            let end = rest.find(|c: char| c.is_whitespace() || c == '\u{1b}').unwrap_or(rest.len());
            break rest[..end].to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    Served { child, endpoint: format!("{url}/api/chat") }
}

/// (tool call id, state, output) of every tool part of the chat.
fn calls(chat: &Chat) -> Vec<(String, ToolState, Option<Value>)> {
    chat.messages()
        .iter()
        .flat_map(|message| message.tool_parts().map(|(_, part)| part.clone()).collect::<Vec<_>>())
        .map(|part| (part.tool_call_id, part.state, part.output))
        .collect()
}

fn approval_of(chat: &Chat, call: &str) -> String {
    let messages = chat.messages();
    let part =
        messages.iter().flat_map(|message| message.tool_parts().map(|(_, part)| part.clone()).collect::<Vec<_>>());
    part.into_iter().find(|part| part.tool_call_id == call).and_then(|part| part.approval).expect("an approval").id
}

struct Setup {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    served: Served,
}

fn setup(rules: &str) -> Option<Setup> {
    let servers = NpmServers::get()?;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("files")).unwrap();
    // The server compares real paths (the temp dir may sit behind a symlink).
    let root = dir.path().join("files").canonicalize().unwrap();
    std::fs::write(root.join("a.txt"), "alpha").unwrap();
    let script = script(dir.path(), &root);
    let config = config(dir.path(), &servers, &root, rules);
    let served = serve(&script, &config, &dir.path().join("data"));
    Some(Setup { _dir: dir, root, served })
}

#[tokio::test]
async fn a_read_runs_a_write_waits_and_runs_once_approved() {
    let Some(setup) = setup("") else { return };
    let chat = Chat::new("chat-mcp-1", HttpTransport::new(&setup.served.endpoint));
    chat.send_message("read a.txt and write b.txt").await.unwrap();

    let seen = calls(&chat);
    assert_eq!(seen[0].1, ToolState::OutputAvailable, "the trusted read ran without asking: {seen:?}");
    assert!(seen[0].2.as_ref().unwrap().to_string().contains("alpha"), "{seen:?}");
    assert_eq!(seen[1].1, ToolState::ApprovalRequested);
    assert!(!setup.root.join("b.txt").exists(), "nothing is written before the approval");

    chat.add_tool_approval_response(&approval_of(&chat, "write-1"), Decision::Approve).await.unwrap();
    assert_eq!(std::fs::read_to_string(setup.root.join("b.txt")).unwrap(), "written by the model");
    assert_eq!(calls(&chat)[1].1, ToolState::OutputAvailable);
}

#[tokio::test]
async fn a_denied_write_leaves_the_directory_untouched() {
    let Some(setup) = setup("") else { return };
    let chat = Chat::new("chat-mcp-2", HttpTransport::new(&setup.served.endpoint));
    chat.send_message("read a.txt and write b.txt").await.unwrap();
    let approval = approval_of(&chat, "write-1");
    chat.add_tool_approval_response(&approval, Decision::Deny { reason: Some("not today".into()) }).await.unwrap();

    assert_eq!(calls(&chat)[1].1, ToolState::OutputDenied);
    let mut names: Vec<String> = std::fs::read_dir(&setup.root)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["a.txt"]);
}

#[tokio::test]
async fn rules_decide_over_mcp_tools() {
    let rules = "[[rule]]\nname = \"no-writes\"\naction = \"deny\"\ntool = \"fs__write_*\"\n\n\
                 [[rule]]\nname = \"ask-reads\"\naction = \"ask\"\ntool = \"fs__read_*\"\n";
    let Some(setup) = setup(rules) else { return };
    let chat = Chat::new("chat-mcp-3", HttpTransport::new(&setup.served.endpoint));
    chat.send_message("read a.txt and write b.txt").await.unwrap();
    let seen = calls(&chat);
    assert_eq!(seen[0].1, ToolState::ApprovalRequested, "an ask rule outranks the trusted read-only hint");
    assert_eq!(seen[1].1, ToolState::OutputDenied, "a deny rule refuses the write before anyone is asked");
    assert!(!setup.root.join("b.txt").exists());
}
