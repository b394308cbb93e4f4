//! One configured server over its whole life: its current connection (or why
//! it has none) and the background task that watches the connection,
//! re-lists tools on `notifications/tools/list_changed`, and reconnects with
//! backoff when the connection ends (see [`crate::restart`]).

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rmcp::Peer;
use rmcp::service::{QuitReason, RoleClient};
use tokio_util::sync::CancellationToken;

use crate::config::McpServerConfig;
use crate::connect::client::Signals;
use crate::connect::{Connection, connect, list_tools};
use crate::error::CallError;
use crate::restart::{Backoff, STABLE_AFTER};

/// Where a server's task keeps the tools it lists: the registry of every
/// server's tools ([`crate::McpTools`]'s), which this file knows only as this.
pub(crate) trait Listings: Send + Sync {
    /// Stores server `index`'s listing; true when it differs from the last one.
    fn set_listing(&self, index: usize, listing: Vec<rmcp::model::Tool>) -> bool;
}

/// How long a closing connection may take to shut its server down.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(8);

/// Where a server stands, as [`McpTools::status`](crate::McpTools::status) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerStatus {
    /// Connected; calls are sent.
    Running {
        /// The process id of a stdio server.
        pid: Option<u32>,
    },
    /// The connection ended and is being re-established in the background;
    /// calls fail at once.
    Restarting {
        /// Why the last connection ended, or why the last attempt failed.
        reason: String,
    },
    /// Shut down for good.
    Stopped,
}

#[derive(Clone)]
enum Link {
    Up { peer: Peer<RoleClient>, pid: Option<u32> },
    Down { reason: String },
    Stopped,
}

/// One configured server.
pub(crate) struct Server {
    pub index: usize,
    pub config: McpServerConfig,
    pub signals: Arc<Signals>,
    link: RwLock<Link>,
}

impl Server {
    pub(crate) fn new(index: usize, config: McpServerConfig, signals: Arc<Signals>) -> Self {
        let link = Link::Down { reason: "not connected yet".into() };
        Self { index, config, signals, link: RwLock::new(link) }
    }

    pub(crate) fn name(&self) -> &str {
        &self.config.name
    }

    /// The connection to send a call on, or why there is none (failing fast).
    pub(crate) fn peer(&self) -> Result<Peer<RoleClient>, CallError> {
        let link = self.link.read().map(|link| link.clone()).unwrap_or(Link::Stopped);
        match link {
            Link::Up { peer, .. } => Ok(peer),
            Link::Down { reason } => Err(CallError::ServerDown { server: self.name().to_owned(), reason }),
            Link::Stopped => Err(CallError::ServerStopped { server: self.name().to_owned() }),
        }
    }

    pub(crate) fn status(&self) -> ServerStatus {
        match self.link.read().map(|link| link.clone()).unwrap_or(Link::Stopped) {
            Link::Up { pid, .. } => ServerStatus::Running { pid },
            Link::Down { reason } => ServerStatus::Restarting { reason },
            Link::Stopped => ServerStatus::Stopped,
        }
    }

    fn set(&self, link: Link) {
        if let Ok(mut slot) = self.link.write() {
            *slot = link;
        }
    }

    /// Marks the server connected; calls go to `peer` from now on.
    pub(crate) fn set_up(&self, connection: &Connection) {
        self.set(Link::Up { peer: connection.service.peer().clone(), pid: connection.pid });
    }

    pub(crate) fn set_stopped(&self) {
        self.set(Link::Stopped);
    }
}

/// Watches `server` from its first connection until `shutdown`: see the module docs.
pub(crate) async fn supervise(
    registry: Arc<dyn Listings>,
    server: Arc<Server>,
    first: Connection,
    shutdown: CancellationToken,
) {
    let mut backoff = Backoff::new();
    let mut connection = first;
    loop {
        let up_since = Instant::now();
        let Some(reason) = run(registry.as_ref(), &server, connection, &shutdown).await else {
            server.set_stopped();
            return;
        };
        if up_since.elapsed() >= STABLE_AFTER {
            backoff.reset();
        }
        tracing::warn!(server = %server.name(), %reason, "MCP server went down; restarting it in the background");
        server.set(Link::Down { reason });
        connection = loop {
            let delay = backoff.next_delay();
            tokio::select! {
                () = shutdown.cancelled() => {
                    server.set_stopped();
                    return;
                }
                () = tokio::time::sleep(delay) => {}
            }
            let attempt = tokio::select! {
                () = shutdown.cancelled() => {
                    server.set_stopped();
                    return;
                }
                attempt = connect(&server.config, Arc::clone(&server.signals)) => attempt,
            };
            match attempt {
                Ok(connection) => {
                    tracing::info!(server = %server.name(), "MCP server restarted");
                    break connection;
                }
                Err(error) => {
                    tracing::warn!(server = %server.name(), %error, "restarting the MCP server failed");
                    server.set(Link::Down { reason: format!("restarting failed: {error}") });
                }
            }
        };
    }
}

/// Serves one connection until it ends (`Some(why)`) or `shutdown` (`None`).
async fn run(
    registry: &dyn Listings,
    server: &Server,
    connection: Connection,
    shutdown: &CancellationToken,
) -> Option<String> {
    server.set_up(&connection);
    let Connection { service, tools, stderr, .. } = connection;
    let peer = service.peer().clone();
    registry.set_listing(server.index, tools);
    let mut stop = Some(service.cancellation_token());
    let mut ended = std::pin::pin!(service.waiting());
    loop {
        tokio::select! {
            () = shutdown.cancelled() => {
                if let Some(stop) = stop.take() {
                    stop.cancel();
                }
                let _ = tokio::time::timeout(SHUTDOWN_GRACE, ended).await;
                return None;
            }
            quit = &mut ended => {
                let why = match quit {
                    Ok(QuitReason::Closed) => "the connection closed (the process may have exited)".to_owned(),
                    Ok(QuitReason::Cancelled) => "the connection was cancelled".to_owned(),
                    Ok(QuitReason::JoinError(error)) | Err(error) => format!("the connection task failed: {error}"),
                    Ok(other) => format!("the connection ended: {other:?}"),
                };
                return Some(format!("{why}{}", stderr.describe().await));
            }
            () = server.signals.tools_changed.notified() => {
                match tokio::time::timeout(server.config.call_timeout(), list_tools(&peer, server.name())).await {
                    Ok(Ok(tools)) => {
                        if registry.set_listing(server.index, tools) {
                            tracing::info!(server = %server.name(), "MCP server's tools changed");
                        }
                    }
                    Ok(Err(error)) => tracing::warn!(server = %server.name(), %error, "re-listing MCP tools failed"),
                    Err(_) => tracing::warn!(server = %server.name(), "re-listing MCP tools timed out"),
                }
            }
        }
    }
}
