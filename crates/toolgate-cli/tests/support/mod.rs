//! Running the `toolgate` binary from tests: one-shot commands and a `serve` on a free port.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use toolgate::approval::input_digest;
use toolgate::approval::lifecycle::Routing;
use toolgate::ledger::{ApprovalRecord, ApprovalState, conversation_key};

/// The repository's `examples/` folder.
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Runs `toolgate ARGS` without the environment's secret and store.
pub fn toolgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .env_remove("TOOLGATE_APPROVAL_SECRET")
        .env_remove("TOOLGATE_STORE")
        .output()
        .unwrap()
}

/// A `toolgate serve` child on a free loopback port; killed on drop.
pub struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Served {
    /// Starts `toolgate serve --addr 127.0.0.1:0 ARGS` and waits until it logs its address.
    pub fn start(args: &[&str]) -> Self {
        Self::start_with_env(args, &[])
    }

    /// [`Served::start`] with these environment variables set for the server alone.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(args)
            .env("TOOLGATE_LOG", "info")
            .env_remove("TOOLGATE_STORE")
            .env_remove("TOOLGATE_APPROVAL_SECRET")
            .envs(env.iter().copied())
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
        // Keep draining the log so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Self { child, url }
    }

    /// The chat endpoint.
    pub fn chat_endpoint(&self) -> String {
        format!("{}/api/chat", self.url)
    }
}

impl Served {
    /// Asks the server to shut down (SIGTERM) and waits until it has.
    pub fn stop(mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Now, in milliseconds since the Unix epoch.
pub fn now() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

/// A pending approval of `tool` in `owner`'s conversation `chat`, issued now:
/// routed to finance when `routed`, else decided by `owner`.
pub fn approval(id: &str, owner: &str, chat: &str, tool: &str, input: Value, routed: bool) -> ApprovalRecord {
    let now = now();
    ApprovalRecord {
        approval_id: id.to_owned(),
        conversation_id: conversation_key(Some(owner), chat),
        owner: Some(owner.to_owned()),
        client: None,
        tool_call_id: format!("call-{id}"),
        tool_name: tool.to_owned(),
        input_digest: input_digest(&input).unwrap(),
        input,
        issued_at: now,
        expires_at: now + 3_600_000,
        state: ApprovalState::Pending,
        decision: None,
        output: None,
        lease: None,
        updated_at: now,
        routing: routed.then(|| Routing {
            approvers: vec!["group:finance".to_owned()],
            members: vec!["bob".to_owned(), "carol".to_owned(), "erin".to_owned()],
            quorum: 2,
            self_approval: false,
            ..Routing::default()
        }),
        votes: Vec::new(),
        reason: Some("transfers over 1000 need approval".to_owned()),
        supersedes: None,
        superseded_by: None,
        origin: Default::default(),
        input_schema: None,
        lineage: Vec::new(),
    }
}
