//! The MCP client side of one connection: what the client announces and
//! what it does with the server's notifications.

use std::sync::Arc;

use rmcp::ClientHandler;
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProtocolVersion};
use rmcp::service::{NotificationContext, RoleClient};
use tokio::sync::Notify;

/// What a server's notifications feed, shared by every connection (restart) of one server.
#[derive(Debug)]
pub(crate) struct Signals {
    /// The server's name, for logs.
    pub server: String,
    /// Routes `notifications/progress` to the call that asked for them.
    pub progress: ProgressDispatcher,
    /// Woken by `notifications/tools/list_changed` (a permit is kept if nobody waits).
    pub tools_changed: Notify,
}

impl Signals {
    pub(crate) fn new(server: &str) -> Arc<Self> {
        Arc::new(Self { server: server.to_owned(), progress: ProgressDispatcher::new(), tools_changed: Notify::new() })
    }
}

/// The [`ClientHandler`] of every connection: announces no optional client
/// capabilities (no sampling, roots or elicitation) and the last protocol
/// version with the `initialize` handshake, so list-changed notifications
/// arrive unscoped.
pub(crate) struct Handler {
    pub signals: Arc<Signals>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("toolgate-mcp", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        self.signals.progress.handle_notification(params).await;
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.signals.server, "MCP server says its tool list changed");
        self.signals.tools_changed.notify_one();
    }
}
