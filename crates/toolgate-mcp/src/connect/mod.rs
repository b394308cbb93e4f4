//! Opening one connection to one server: spawn (stdio) or reach (HTTP) it,
//! run the MCP handshake, and list its tools (every page), all within the
//! server's `startup_timeout`. Listing is lenient per tool: a tool that does
//! not decode is skipped with a warning, not the whole server.

pub(crate) mod client;

use std::collections::{HashSet, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use process_wrap::tokio::{CommandWrap, ProcessGroup};
use rmcp::model::{ClientRequest, ListToolsRequest, PaginatedRequestParams};
use rmcp::service::{ClientInitializeError, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{Peer, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::config::{McpServerConfig, TransportKind};
use crate::error::McpError;
use client::{Handler, Signals};

/// How many of the last stderr lines of a stdio server are kept for error messages.
const STDERR_TAIL_LINES: usize = 12;
/// How long a kept stderr line may be.
const STDERR_LINE_CHARS: usize = 300;
/// How long to let the stderr reader catch up before quoting it in an error.
const STDERR_SETTLE: Duration = Duration::from_millis(300);

/// A running connection: the rmcp service, its first tool listing and the process id of a stdio server.
pub(crate) struct Connection {
    pub service: RunningService<RoleClient, Handler>,
    pub tools: Vec<rmcp::model::Tool>,
    pub pid: Option<u32>,
    pub stderr: StderrTail,
}

/// The last lines a stdio server wrote to stderr (logged at `debug` as they come).
#[derive(Clone, Default)]
pub(crate) struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    reader: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl StderrTail {
    fn follow(server: &str, stderr: tokio::process::ChildStderr) -> Self {
        let tail = Self::default();
        let lines = Arc::clone(&tail.lines);
        let server = server.to_owned();
        let reader = tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                tracing::debug!(target: "toolgate_mcp::stderr", server = %server, "{line}");
                let line: String = line.chars().take(STDERR_LINE_CHARS).collect();
                if let Ok(mut lines) = lines.lock() {
                    if lines.len() == STDERR_TAIL_LINES {
                        lines.pop_front();
                    }
                    lines.push_back(line);
                }
            }
        });
        if let Ok(mut slot) = tail.reader.lock() {
            *slot = Some(reader);
        }
        tail
    }

    /// `"; stderr: a | b"` with the last lines, after giving the reader a moment
    /// to read what a dying process wrote; empty when there is none.
    pub(crate) async fn describe(&self) -> String {
        let reader = self.reader.lock().ok().and_then(|mut slot| slot.take());
        if let Some(reader) = reader {
            let _ = tokio::time::timeout(STDERR_SETTLE, reader).await;
        }
        let lines = self.lines.lock().map(|lines| lines.iter().cloned().collect::<Vec<_>>()).unwrap_or_default();
        let lines: Vec<String> = lines.into_iter().filter(|line| !line.trim().is_empty()).collect();
        if lines.is_empty() { String::new() } else { format!("; stderr: {}", lines.join(" | ")) }
    }
}

/// Connects to the server, runs the handshake and lists its tools.
pub(crate) async fn connect(config: &McpServerConfig, signals: Arc<Signals>) -> Result<Connection, McpError> {
    let server = config.name.clone();
    let handler = Handler { signals };
    let timeout = config.connect_timeout();
    let (serve, pid, stderr): (Serve, _, _) = match config.validate()? {
        TransportKind::Stdio => {
            let command = config.command.clone().unwrap_or_default();
            let mut cmd = tokio::process::Command::new(&command);
            // The process group lets a kill reach what the command starts (e.g. `npx` → `node`);
            // kill-on-drop stops the leader at once even when no runtime is left to run rmcp's cleanup.
            cmd.args(&config.args).envs(&config.env).kill_on_drop(true);
            let mut wrapped = CommandWrap::from(cmd);
            wrapped.wrap(ProcessGroup::leader());
            let (process, stderr) = TokioChildProcess::builder(wrapped)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|source| McpError::Spawn { server: server.clone(), command, source })?;
            let pid = process.id();
            let tail = stderr.map(|stderr| StderrTail::follow(&server, stderr)).unwrap_or_default();
            (Box::pin(handler.serve(process)), pid, tail)
        }
        TransportKind::Http => {
            let url = config.url.clone().unwrap_or_default();
            let http = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(config.header_map()?);
            let transport = StreamableHttpClientTransport::from_config(http);
            (Box::pin(handler.serve(transport)), None, StderrTail::default())
        }
    };
    let started = tokio::time::timeout(timeout, async {
        let service =
            serve.await.map_err(|error| McpError::Initialize { server: server.clone(), detail: error.to_string() })?;
        let tools = list_tools(service.peer(), &server)
            .await
            .map_err(|detail| McpError::ListTools { server: server.clone(), detail })?;
        Ok::<_, McpError>((service, tools))
    })
    .await;
    if !matches!(started, Ok(Ok(_))) {
        // Dropping a half-started stdio transport schedules the kill of its
        // process group; let that task run before reporting.
        tokio::task::yield_now().await;
    }
    match started {
        Ok(Ok((service, tools))) => Ok(Connection { service, tools, pid, stderr }),
        Ok(Err(McpError::Initialize { server, detail })) => {
            Err(McpError::Initialize { server, detail: format!("{detail}{}", stderr.describe().await) })
        }
        Ok(Err(error)) => Err(error),
        Err(_elapsed) => Err(McpError::StartupTimeout { server, timeout }),
    }
}

/// The most pages of `tools/list` followed.
const MAX_LIST_PAGES: usize = 100;

/// Lists every tool, following `nextCursor`. Lenient about each tool: one
/// that does not decode (e.g. it has no `inputSchema`) is skipped with a
/// warning instead of failing the listing.
pub(crate) async fn list_tools(peer: &Peer<RoleClient>, server: &str) -> Result<Vec<rmcp::model::Tool>, String> {
    let mut tools = Vec::new();
    let mut cursors = HashSet::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor.clone());
        let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
        let page = peer.send_request(request).await.map_err(|error| error.to_string())?;
        let page = serde_json::to_value(&page).map_err(|error| error.to_string())?;
        let Some(items) = page.get("tools").and_then(Value::as_array) else {
            return Err(format!("the reply is not a tool list: {}", crate::output::preview(&page)));
        };
        for item in items {
            match serde_json::from_value::<rmcp::model::Tool>(item.clone()) {
                Ok(tool) => tools.push(tool),
                Err(error) => {
                    let name = item.get("name").and_then(Value::as_str).unwrap_or("?");
                    tracing::warn!(server, tool = name, %error, "skipping an MCP tool that does not decode");
                }
            }
        }
        cursor = page.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
        match &cursor {
            None => return Ok(tools),
            Some(next) if !cursors.insert(next.clone()) => {
                return Err(format!("the tool list repeats the page cursor `{next}`"));
            }
            Some(_) => {}
        }
    }
    Err(format!("the tool list has more than {MAX_LIST_PAGES} pages"))
}

/// The handshake in progress, whichever the transport.
type Serve = futures::future::BoxFuture<'static, Result<RunningService<RoleClient, Handler>, ClientInitializeError>>;
