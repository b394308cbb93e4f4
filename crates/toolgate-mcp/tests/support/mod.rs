//! Real MCP servers for the tests, and conversation helpers.
//!
//! The npm servers (`@modelcontextprotocol/server-filesystem` and
//! `@modelcontextprotocol/server-everything`, versions pinned in
//! `tests/npm/package.json` with the whole tree locked in
//! `tests/npm/package-lock.json`) are installed on first use with
//! `npm install --prefix <target>/tmp/toolgate-mcp-npm`, once for all tests
//! and test processes (a directory lock serializes installs; a stamp holding
//! the lockfile marks a finished one), and run with `node` directly.
//! Without `node`/`npm` the tests print that they were skipped, unless
//! `TOOLGATE_TEST_REQUIRE_NODE=1` makes that a failure. The misbehaving
//! server (`fake_server.py`) needs `python3`, likewise skipped unless
//! `TOOLGATE_TEST_REQUIRE_PYTHON=1`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate::{ModelMessage, ScriptedModel, TextRequest, TextResult, Toolkit, generate_text};
use toolgate_mcp::{McpServerConfig, McpTools, ServerStatus};

const PACKAGE_JSON: &str = include_str!("../npm/package.json");
const PACKAGE_LOCK: &str = include_str!("../npm/package-lock.json");

/// The installed npm MCP servers.
pub struct NpmServers {
    dir: PathBuf,
}

impl NpmServers {
    /// Installs the servers if needed; `None` (after a loud note) when `node`
    /// or `npm` is missing, unless `TOOLGATE_TEST_REQUIRE_NODE=1`.
    pub fn get() -> Option<Self> {
        if !toolgate_testkit::node_or_skip("the real MCP servers") {
            return None;
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("toolgate-mcp-npm");
        toolgate_testkit::install_once(&dir, || installed(&dir), || install(&dir));
        Some(Self { dir })
    }

    fn script(&self, package: &str) -> String {
        let path = self.dir.join("node_modules/@modelcontextprotocol").join(package).join("dist/index.js");
        assert!(path.is_file(), "{} is missing after the install", path.display());
        path.display().to_string()
    }

    /// The filesystem server, allowed to touch `root` only.
    pub fn filesystem(&self, name: &str, root: &Path) -> McpServerConfig {
        McpServerConfig::stdio(name, "node", [self.script("server-filesystem"), root.display().to_string()])
    }

    /// The everything server over stdio.
    pub fn everything(&self, name: &str) -> McpServerConfig {
        McpServerConfig::stdio(name, "node", [self.script("server-everything"), "stdio".to_owned()])
    }

    /// Starts the everything server over streamable HTTP on a free loopback port;
    /// returns the process (kill it when done) and the endpoint URL.
    pub fn everything_http(&self) -> (std::process::Child, String) {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("node")
            .args([self.script("server-everything"), "streamableHttp".to_owned()])
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("node starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the everything server did not listen on {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        (child, format!("http://127.0.0.1:{port}/mcp"))
    }
}

fn installed(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(".installed")).is_ok_and(|stamp| stamp == PACKAGE_LOCK)
}

/// Installs the pinned packages and stamps the directory with the lockfile.
fn install(dir: &Path) {
    std::fs::write(dir.join("package.json"), PACKAGE_JSON).expect("write package.json");
    std::fs::write(dir.join("package-lock.json"), PACKAGE_LOCK).expect("write package-lock.json");
    toolgate_testkit::npm(dir, &["ci"]);
    std::fs::write(dir.join(".installed"), PACKAGE_LOCK).expect("write the install stamp");
}

/// The misbehaving stdio server (`fake_server.py`), logging the messages it
/// receives to `log` and refusing to start while `refuse` exists. `None`
/// (after a loud note) without `python3`, unless `TOOLGATE_TEST_REQUIRE_PYTHON=1`.
pub fn fake_server(name: &str, log: &Path, refuse: &Path) -> Option<McpServerConfig> {
    if !toolgate_testkit::runs("python3") {
        assert_ne!(
            std::env::var("TOOLGATE_TEST_REQUIRE_PYTHON").as_deref(),
            Ok("1"),
            "TOOLGATE_TEST_REQUIRE_PYTHON=1 but `python3` is not on PATH"
        );
        eprintln!("\n=== SKIPPED: `python3` is not on PATH, so the misbehaving MCP server cannot run ===\n");
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/fake_server.py");
    let mut config = McpServerConfig::stdio(name, "python3", ["-u".to_owned(), script.display().to_string()]);
    config.env.insert("FAKE_LOG".into(), log.display().to_string());
    config.env.insert("FAKE_REFUSE".into(), refuse.display().to_string());
    Some(config)
}

/// The messages the fake server received.
pub fn logged(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// Waits until `check` holds, for at most `within`.
pub async fn eventually(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the server runs again, with another process than `old_pid`.
pub async fn wait_running(mcp: &McpTools, server: &str, old_pid: Option<u32>) {
    eventually(
        Duration::from_secs(20),
        "the server to run again",
        || matches!(mcp.status(server), Some(ServerStatus::Running { pid }) if pid != old_pid),
    )
    .await;
}

/// Kills a process outright (SIGKILL).
pub fn kill(pid: u32) {
    let status = Command::new("kill").args(["-9", &pid.to_string()]).status().expect("run kill");
    assert!(status.success(), "kill -9 {pid}");
}

/// A scripted model from its turns (`[[part, ...], ...]`).
pub fn script(turns: Value) -> ScriptedModel {
    ScriptedModel::from_json(&json!({ "turns": turns }).to_string()).expect("a valid script")
}

/// A model that calls `tool` with `input` once, then says "done".
pub fn calls(tool: &str, input: Value) -> ScriptedModel {
    script(json!([
        [{"type": "tool-call", "toolCallId": "call-1", "toolName": tool, "input": input}],
        [{"type": "text", "text": "done"}]
    ]))
}

/// Messages from their JSON.
pub fn messages(value: Value) -> Vec<ModelMessage> {
    serde_json::from_value(value).expect("valid messages")
}

/// Runs one request: the history, then the model with the toolkit.
pub async fn run(model: &ScriptedModel, history: Vec<ModelMessage>, toolkit: Toolkit) -> TextResult {
    generate_text(model, TextRequest::new(history).toolkit(toolkit)).await.expect("the engine call succeeds")
}

/// The history after `result`, with an answer to its (single) approval request.
pub fn answer(mut history: Vec<ModelMessage>, result: &TextResult, approved: bool) -> Vec<ModelMessage> {
    let [request] = result.approval_requests() else { panic!("expected one approval request") };
    history.extend(result.response_messages.iter().cloned());
    let mut response =
        json!({"type": "tool-approval-response", "approvalId": request.approval_id, "approved": approved});
    if !approved {
        response["reason"] = json!("not that one");
    }
    history.extend(messages(json!([{"role": "tool", "content": [response]}])));
    history
}

/// The output of the only tool result of the first step, as JSON.
pub fn first_output(result: &TextResult) -> Value {
    let step = result.steps.first().expect("a step");
    let [tool_result] = step.tool_results.as_slice() else {
        panic!("expected one tool result, got {:?}", step.tool_results)
    };
    serde_json::to_value(&tool_result.output).expect("serializable")
}
