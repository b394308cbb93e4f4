//! MCP servers through `toolgate serve --config`: the reference filesystem
//! server on a temp directory, the scripted and the local model, and the Rust
//! chat client as the person. A read runs without asking (the server is
//! trusted), a write waits for approval and runs once approved, a denial
//! leaves the directory untouched, and a `[[rule]]` of the same file decides
//! over MCP tools too.
//!
//! The local model (135M parameters) picks the first tool it is offered, so
//! its scenarios offer one tool each (`tools = [...]` in `[[mcp]]`). They need
//! the default model (`toolgate model pull`); without it they are skipped,
//! unless `TOOLGATE_REQUIRE_LOCAL_MODEL=1` (CI) makes that a failure.

// The MCP crate's test support: one pinned install of the reference servers for both crates.
#[path = "../../toolgate-mcp/tests/support/mod.rs"]
mod mcp_support;

mod support;

use std::path::Path;
use std::process::Command;

use mcp_support::NpmServers;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::Served;
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

/// The config file: the filesystem server (trusted, offering `only` when given) and `rules`.
fn config(dir: &Path, servers: &NpmServers, root: &Path, only: Option<&[&str]>, rules: &str) -> String {
    let fs = servers.filesystem("fs", root);
    let quoted = |items: &[String]| items.iter().map(|item| format!("{item:?}")).collect::<Vec<_>>().join(", ");
    let mut text = format!(
        "[[mcp]]\nname = \"fs\"\ncommand = {:?}\nargs = [{}]\ntrusted = true\n",
        fs.command.unwrap(),
        quoted(&fs.args)
    );
    if let Some(only) = only {
        let only: Vec<String> = only.iter().map(|tool| (*tool).to_owned()).collect();
        text.push_str(&format!("tools = [{}]\n", quoted(&only)));
    }
    text.push_str(&format!("\n{rules}"));
    let path = dir.join("toolgate.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn serve(model: &str, config: &str, data_dir: &Path) -> Served {
    let data_dir = data_dir.display().to_string();
    Served::start(&["--tools", "none", "--model", model, "--config", config, "--data-dir", &data_dir])
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

/// The filesystem server on a temp directory holding `a.txt`, behind `toolgate serve` with the scripted model.
fn setup(rules: &str) -> Option<Setup> {
    setup_with(None, None, rules)
}

/// [`setup`] with another model (`None`: the script) and only some of the server's tools.
fn setup_with(model: Option<&str>, only: Option<&[&str]>, rules: &str) -> Option<Setup> {
    let servers = NpmServers::get()?;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("files")).unwrap();
    // The server compares real paths (the temp dir may sit behind a symlink).
    let root = dir.path().join("files").canonicalize().unwrap();
    std::fs::write(root.join("a.txt"), "alpha").unwrap();
    let model = model.map_or_else(|| format!("script:{}", script(dir.path(), &root)), str::to_owned);
    let config = config(dir.path(), &servers, &root, only, rules);
    let served = serve(&model, &config, &dir.path().join("data"));
    Some(Setup { _dir: dir, root, served })
}

#[tokio::test]
async fn a_read_runs_a_write_waits_and_runs_once_approved() {
    let Some(setup) = setup("") else { return };
    let chat = Chat::new("chat-mcp-1", HttpTransport::new(setup.served.chat_endpoint()));
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
    let chat = Chat::new("chat-mcp-2", HttpTransport::new(setup.served.chat_endpoint()));
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
    let chat = Chat::new("chat-mcp-3", HttpTransport::new(setup.served.chat_endpoint()));
    chat.send_message("read a.txt and write b.txt").await.unwrap();
    let seen = calls(&chat);
    assert_eq!(seen[0].1, ToolState::ApprovalRequested, "an ask rule outranks the trusted read-only hint");
    assert_eq!(seen[1].1, ToolState::OutputDenied, "a deny rule refuses the write before anyone is asked");
    assert!(!setup.root.join("b.txt").exists());
}

/// The default local model, or `None` (after a note) when it is not installed and not required.
fn local_model() -> Option<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_toolgate")).args(["model", "path"]).output().unwrap();
    let path = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if Path::new(&path).is_file() {
        return Some(format!("local:{path}"));
    }
    assert_ne!(
        std::env::var("TOOLGATE_REQUIRE_LOCAL_MODEL").as_deref(),
        Ok("1"),
        "TOOLGATE_REQUIRE_LOCAL_MODEL=1 but there is no model at {path}: run `toolgate model pull`"
    );
    eprintln!("\n=== SKIPPED: no local model at {path} (`toolgate model pull`) ===\n");
    None
}

/// The files of the directory, sorted.
fn files(root: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(root).unwrap().map(|entry| entry.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

#[tokio::test]
async fn the_local_model_reads_without_asking() {
    let Some(model) = local_model() else { return };
    let Some(setup) = setup_with(Some(&model), Some(&["read_text_file"]), "") else { return };
    let chat = Chat::new("chat-local-read", HttpTransport::new(setup.served.chat_endpoint()));
    chat.send_message("Read the file a.txt").await.unwrap();
    let messages = chat.messages();
    let read = messages
        .iter()
        .flat_map(|message| message.tool_parts().map(|(_, part)| part.clone()).collect::<Vec<_>>())
        .next()
        .expect("the model calls the read tool");
    assert_eq!(read.tool_name, "fs__read_text_file");
    assert!(read.approval.is_none(), "a trusted read is not asked about");
    assert!(matches!(read.state, ToolState::OutputAvailable | ToolState::OutputError), "it ran: {read:?}");
}

#[tokio::test]
async fn the_local_models_write_waits_and_runs_only_once_approved() {
    let Some(model) = local_model() else { return };
    for approve in [false, true] {
        let Some(setup) = setup_with(Some(&model), Some(&["write_file"]), "") else { return };
        let chat = Chat::new(format!("chat-local-write-{approve}"), HttpTransport::new(setup.served.chat_endpoint()));
        chat.send_message("Write hello to the file hello.txt").await.unwrap();
        let seen = calls(&chat);
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].1, ToolState::ApprovalRequested, "a write waits for a person");
        assert_eq!(files(&setup.root), ["a.txt"], "nothing is written before the answer");

        let approval = approval_of(&chat, &seen[0].0);
        let decision = if approve { Decision::Approve } else { Decision::Deny { reason: Some("no".into()) } };
        chat.add_tool_approval_response(&approval, decision).await.unwrap();
        let after = calls(&chat);
        if approve {
            assert_eq!(after[0].1, ToolState::OutputAvailable, "{after:?}");
            assert!(files(&setup.root).len() > 1, "the approved write ran: {:?}", files(&setup.root));
        } else {
            assert_eq!(after[0].1, ToolState::OutputDenied);
            assert_eq!(files(&setup.root), ["a.txt"], "a denial leaves the directory untouched");
        }
    }
}
