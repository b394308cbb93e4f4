//! One `tools/call`: fail fast when the server is down, report progress as
//! preliminary outputs, cancel on timeout or when the caller cancels, and
//! turn every failure into a typed [`CallError`].

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, RequestId, ServerResult,
};
use rmcp::service::{PeerRequestOptions, RoleClient};
use serde_json::Value;
use toolgate::{ToolContext, ToolError};

use crate::error::CallError;
use crate::output::{CallOutcome, interpret, preview, progress_value};
use crate::server::Server;

/// How long telling the server about a cancellation may take.
const CANCEL_NOTICE_TIMEOUT: Duration = Duration::from_secs(2);

/// Which tool a handler calls.
pub(crate) struct Target {
    pub server: Arc<Server>,
    /// The tool's name on the server.
    pub mcp_name: String,
    /// The tool's model-facing name.
    pub tool: String,
}

/// Runs one call (see the module docs). `Ok` is the handler's output
/// ([`crate::output`]); a result with `isError: true` is an `Err` with the
/// server's text.
pub(crate) async fn call_tool(target: &Target, input: Value, context: ToolContext) -> Result<Value, ToolError> {
    let report = |update: Value| context.report(update);
    let raw = send(target, input, context.cancellation(), &report).await?;
    let server = target.server.name();
    match interpret(raw) {
        Ok(CallOutcome::Success(output)) => Ok(output),
        Ok(CallOutcome::ToolFailed(text)) => Err(ToolError::text(text)),
        Err(detail) => {
            tracing::warn!(server, tool = %target.tool, %detail, "MCP server sent an invalid tool result");
            Err(CallError::InvalidResponse { server: server.to_owned(), tool: target.tool.clone(), detail }.into())
        }
    }
}

/// Sends the request and waits for the raw result; `report` gets each
/// progress notification (as [`progress_value`]); `cancel` stops the call.
pub(crate) async fn send(
    target: &Target,
    input: Value,
    cancel: &tokio_util::sync::CancellationToken,
    report: &(dyn Fn(Value) + Send + Sync),
) -> Result<Value, CallError> {
    let server = target.server.name().to_owned();
    let tool = target.tool.clone();
    let peer = target.server.peer()?;
    let arguments = match input {
        Value::Object(arguments) => arguments,
        Value::Null => Default::default(),
        other => return Err(CallError::InvalidInput { tool, found: preview(&other) }),
    };
    let params = CallToolRequestParams::new(target.mcp_name.clone()).with_arguments(arguments);
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = peer
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .map_err(|error| service_error(&server, &tool, error))?;
    let mut pending = PendingCall { peer: peer.clone(), request_id: Some(handle.id.clone()) };
    let mut progress = target.server.signals.progress.subscribe(handle.progress_token.clone()).await;
    let timeout = target.server.config.call_timeout();
    let mut response = std::pin::pin!(handle.await_response());
    let mut deadline = std::pin::pin!(tokio::time::sleep(timeout));
    let result = loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => {
                pending.cancel(CANCELLED_REASON).await;
                return Err(CallError::Cancelled { tool });
            }
            () = &mut deadline => {
                pending.cancel("timed out").await;
                return Err(CallError::Timeout { server, tool, timeout });
            }
            Some(update) = progress.next() => {
                report(progress_value(update.progress, update.total, update.message));
            }
            result = &mut response => break result,
        }
    };
    pending.request_id = None;
    // Progress sent just before the answer may still be on its way (rmcp
    // hands notifications to spawned tasks): let them run, then drain.
    tokio::task::yield_now().await;
    while let Some(Some(update)) = progress.next().now_or_never() {
        report(progress_value(update.progress, update.total, update.message));
    }
    match result {
        Ok(ServerResult::CreateTaskResult(_) | ServerResult::TaskAckResult(_)) => {
            Err(CallError::Unsupported { server, tool, what: "a task to poll".into() })
        }
        Ok(ServerResult::InputRequiredResult(_)) => {
            Err(CallError::Unsupported { server, tool, what: "a request for more input (elicitation)".into() })
        }
        Ok(result) => serde_json::to_value(&result).map_err(|error| CallError::InvalidResponse {
            server,
            tool,
            detail: error.to_string(),
        }),
        Err(error) => Err(service_error(&server, &tool, error)),
    }
}

/// Why the server is told to stop when the caller cancels or drops the call.
const CANCELLED_REASON: &str = "cancelled by the client";

/// A request in flight. If the call's future is dropped before the answer
/// (the engine's stream was dropped), the server is told to stop.
struct PendingCall {
    peer: rmcp::Peer<RoleClient>,
    request_id: Option<RequestId>,
}

impl PendingCall {
    async fn cancel(&mut self, reason: &str) {
        if let Some(request_id) = self.request_id.take() {
            cancel(&self.peer, request_id, reason).await;
        }
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        let Some(request_id) = self.request_id.take() else { return };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let peer = self.peer.clone();
            runtime.spawn(async move { cancel(&peer, request_id, CANCELLED_REASON).await });
        }
    }
}

/// Tells the server to stop working on a request (best effort, bounded).
async fn cancel(peer: &rmcp::Peer<RoleClient>, request_id: RequestId, reason: &str) {
    let notice = peer.notify_cancelled(CancelledNotificationParam::new(Some(request_id), Some(reason.to_owned())));
    if !matches!(tokio::time::timeout(CANCEL_NOTICE_TIMEOUT, notice).await, Ok(Ok(()))) {
        tracing::debug!(reason, "could not tell the MCP server that a call was cancelled");
    }
}

fn service_error(server: &str, tool: &str, error: ServiceError) -> CallError {
    let (server, tool) = (server.to_owned(), tool.to_owned());
    match error {
        ServiceError::McpError(error) => {
            CallError::Rejected { server, tool, code: error.code.0, message: error.message.into_owned() }
        }
        ServiceError::TransportClosed => CallError::Disconnected { server, tool },
        ServiceError::UnexpectedResponse => {
            CallError::InvalidResponse { server, tool, detail: "a reply of another request type".into() }
        }
        ServiceError::Cancelled { .. } => CallError::Cancelled { tool },
        other => CallError::Transport { server, tool, detail: other.to_string() },
    }
}
