//! The real `@modelcontextprotocol/server-filesystem` as toolgate tools:
//! reads run without approval only from a trusted server, writes always ask,
//! and an approved write runs once while a denied one leaves the files alone.

mod support;

use std::path::Path;

use serde_json::json;
use support::*;
use toolgate::{ApprovalContext, ModelMessage, Verdict};
use toolgate_mcp::McpTools;

fn listing(dir: &Path) -> Vec<(String, String)> {
    let mut entries: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            (entry.file_name().to_string_lossy().into_owned(), std::fs::read_to_string(entry.path()).unwrap())
        })
        .collect();
    entries.sort();
    entries
}

async fn connect(trusted: bool) -> Option<(McpTools, tempfile::TempDir)> {
    let npm = NpmServers::get()?;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
    let config = npm.filesystem("fs", dir.path()).trusted(trusted);
    Some((McpTools::connect(vec![config]).await.expect("the filesystem server connects"), dir))
}

#[tokio::test]
async fn tools_are_listed_with_prefixes_schemas_and_approval_defaults() {
    let Some((mcp, _dir)) = connect(true).await else { return };
    let tools = mcp.tools();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name()).collect();
    for expected in ["fs__read_text_file", "fs__write_file", "fs__list_directory", "fs__move_file"] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    assert!(names.iter().all(|name| name.starts_with("fs__")));
    let write = tools.iter().find(|tool| tool.name() == "fs__write_file").unwrap();
    assert_eq!(write.input_schema()["type"], "object");
    assert_eq!(write.input_schema()["required"], json!(["path", "content"]));
    assert!(write.validate_input(&json!({"path": "x"})).is_err(), "the server's schema is enforced");
    assert!(write.is_idempotent(), "idempotentHint from a trusted server");
    assert!(write.ask_reason().contains("may modify data"));

    let context = || ApprovalContext::new("c", Vec::<ModelMessage>::new());
    let read = tools.iter().find(|tool| tool.name() == "fs__read_text_file").unwrap();
    assert_eq!(read.decide(&json!({"path": "notes.txt"}), context()).await, Verdict::allow());
    assert_eq!(write.decide(&json!({"path": "a", "content": "b"}), context()).await, Verdict::ask());
    let infos = mcp.tool_infos();
    let info = infos.iter().find(|info| info.name == "fs__read_text_file").unwrap();
    assert_eq!((info.server.as_str(), info.mcp_name.as_str()), ("fs", "read_text_file"));
    assert_eq!(mcp.version(), 0);
    mcp.toolkit().expect("a valid toolkit");
    mcp.shutdown().await;
}

#[tokio::test]
async fn a_read_from_a_trusted_server_runs_without_approval() {
    let Some((mcp, dir)) = connect(true).await else { return };
    let path = dir.path().join("notes.txt").display().to_string();
    let model = calls("fs__read_text_file", json!({"path": path}));
    let result =
        run(&model, messages(json!([{"role": "user", "content": "read my notes"}])), mcp.toolkit().unwrap()).await;
    assert!(result.approval_requests().is_empty());
    assert_eq!(first_output(&result), json!({"type": "json", "value": {"content": "hello\n"}}));
    assert_eq!(result.text(), "done");
    mcp.shutdown().await;
}

#[tokio::test]
async fn a_write_asks_and_runs_once_when_approved() {
    let Some((mcp, dir)) = connect(true).await else { return };
    let before = listing(dir.path());
    let target = dir.path().join("new.txt");
    let model = calls("fs__write_file", json!({"path": target.display().to_string(), "content": "written"}));
    let history = messages(json!([{"role": "user", "content": "write a file"}]));

    let asked = run(&model, history.clone(), mcp.toolkit().unwrap()).await;
    let [request] = asked.approval_requests() else { panic!("the write asks: {:?}", asked.steps) };
    assert_eq!(request.tool_call.tool_name, "fs__write_file");
    assert_eq!(
        request.reason.as_deref(),
        Some("MCP tool `fs__write_file` may modify data (destructiveHint or no annotations)")
    );
    assert_eq!(listing(dir.path()), before, "nothing was written before the approval");

    let approved = run(&model, answer(history, &asked, true), mcp.toolkit().unwrap()).await;
    assert_eq!(approved.preresolved.len(), 1, "the approved call ran once");
    let output = serde_json::to_value(&approved.preresolved[0].output).unwrap();
    assert_eq!(output["type"], "json", "{output}");
    assert!(output["value"]["content"].as_str().unwrap().contains("Successfully wrote"));
    assert!(approved.steps.iter().all(|step| step.tool_results.is_empty()), "and only once");
    let mut expected = before;
    expected.push(("new.txt".into(), "written".into()));
    expected.sort();
    assert_eq!(listing(dir.path()), expected, "the file exists exactly once, with its content");
    mcp.shutdown().await;
}

#[tokio::test]
async fn a_denied_write_leaves_the_directory_untouched() {
    let Some((mcp, dir)) = connect(true).await else { return };
    let before = listing(dir.path());
    let notes = dir.path().join("notes.txt").display().to_string();
    let model = calls("fs__write_file", json!({"path": notes, "content": "overwritten"}));
    let history = messages(json!([{"role": "user", "content": "overwrite my notes"}]));
    let asked = run(&model, history.clone(), mcp.toolkit().unwrap()).await;
    let denied = run(&model, answer(history, &asked, false), mcp.toolkit().unwrap()).await;
    assert_eq!(
        serde_json::to_value(&denied.preresolved[0].output).unwrap(),
        json!({"type": "execution-denied", "reason": "not that one"})
    );
    assert_eq!(listing(dir.path()), before);
    mcp.shutdown().await;
}

#[tokio::test]
async fn reads_from_an_untrusted_server_ask_too() {
    let Some((mcp, dir)) = connect(false).await else { return };
    let path = dir.path().join("notes.txt").display().to_string();
    let model = calls("fs__read_text_file", json!({"path": path}));
    let result = run(&model, messages(json!([{"role": "user", "content": "read"}])), mcp.toolkit().unwrap()).await;
    let [request] = result.approval_requests() else { panic!("the read asks") };
    let reason = request.reason.as_deref().unwrap();
    assert!(reason.contains("server `fs` is not trusted, so readOnlyHint is not believed"), "{reason}");
    assert!(mcp.tools().iter().all(|tool| !tool.is_idempotent()), "no hint is believed");
    mcp.shutdown().await;
}

#[tokio::test]
async fn a_failing_call_is_an_error_result_and_the_conversation_goes_on() {
    let Some((mcp, _dir)) = connect(true).await else { return };
    let model = calls("fs__read_text_file", json!({"path": "/etc/hostname"}));
    let result = run(&model, messages(json!([{"role": "user", "content": "read"}])), mcp.toolkit().unwrap()).await;
    let output = first_output(&result);
    assert_eq!(output["type"], "error-text", "{output}");
    assert!(output["value"].as_str().unwrap().contains("outside allowed directories"), "{output}");
    assert_eq!(result.text(), "done");
    mcp.shutdown().await;
}
