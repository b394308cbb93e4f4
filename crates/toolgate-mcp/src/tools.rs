//! [`McpTools`]: the connected servers and their current tools.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use toolgate::{Tool, Toolkit, ToolkitError};

use crate::config::{McpServerConfig, validate_all};
use crate::connect::client::Signals;
use crate::connect::connect;
use crate::error::McpError;
use crate::server::{Listings, Server, ServerStatus, supervise};
use crate::tool::{McpToolInfo, server_tools};

/// How long [`McpTools::shutdown`] waits for all servers to stop.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// The current tools of all servers, rebuilt whenever a server's listing changes.
pub(crate) struct Registry {
    pub(crate) servers: Vec<Arc<Server>>,
    listings: Mutex<Vec<Vec<rmcp::model::Tool>>>,
    current: RwLock<Arc<[(Tool, McpToolInfo)]>>,
    version: watch::Sender<u64>,
}

impl Listings for Registry {
    /// Stores a server's listing; when it differs from the last one, rebuilds
    /// every tool (so names stay unique across servers, earlier servers first)
    /// and bumps the version. Returns whether anything changed.
    fn set_listing(&self, index: usize, listing: Vec<rmcp::model::Tool>) -> bool {
        let Ok(mut listings) = self.listings.lock() else { return false };
        let Some(slot) = listings.get_mut(index) else { return false };
        if *slot == listing {
            return false;
        }
        *slot = listing;
        let rebuilt = build_all(&self.servers, &listings);
        if let Ok(mut current) = self.current.write() {
            *current = rebuilt;
        }
        drop(listings);
        self.version.send_modify(|version| *version += 1);
        true
    }
}

impl Registry {
    /// Every server's last listing, in config order.
    pub(crate) fn listings(&self) -> Vec<Vec<rmcp::model::Tool>> {
        self.listings.lock().map(|listings| listings.clone()).unwrap_or_default()
    }

    /// One server's last listing.
    pub(crate) fn listing(&self, index: usize) -> Option<Vec<rmcp::model::Tool>> {
        self.listings.lock().ok().and_then(|listings| listings.get(index).cloned())
    }

    pub(crate) fn current(&self) -> Arc<[(Tool, McpToolInfo)]> {
        self.current.read().map(|current| Arc::clone(&current)).unwrap_or_else(|_| Arc::from(Vec::new()))
    }
}

fn build_all(servers: &[Arc<Server>], listings: &[Vec<rmcp::model::Tool>]) -> Arc<[(Tool, McpToolInfo)]> {
    let mut taken = HashSet::new();
    servers.iter().zip(listings).flat_map(|(server, listing)| server_tools(server, listing, &mut taken)).collect()
}

/// Connected MCP servers as toolgate tools.
///
/// Each server's tools are `<server>__<tool>` dynamic tools whose approval
/// defaults come from the tool annotations (see the crate docs). The set can
/// change while it runs (a server sends `notifications/tools/list_changed`,
/// or comes back with other tools after a restart): watch
/// [`McpTools::subscribe`] and rebuild the toolkit from [`McpTools::tools`]
/// when the version moves. It runs one background task per server, so it
/// needs a Tokio runtime with the time and I/O drivers enabled (as
/// `#[tokio::main]` and `Builder::enable_all` do). Dropping it shuts the
/// servers down too, without waiting; [`McpTools::shutdown`] waits. The
/// tools it handed out keep working only while it lives: afterwards their
/// calls fail with [`CallError::ServerStopped`](crate::CallError::ServerStopped).
pub struct McpTools {
    registry: Arc<Registry>,
    shutdown: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for McpTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let servers: Vec<&str> = self.registry.servers.iter().map(|server| server.name()).collect();
        f.debug_struct("McpTools").field("servers", &servers).field("version", &self.version()).finish()
    }
}

impl McpTools {
    /// Validates the configs, then connects every server at once (spawn or
    /// reach it, MCP handshake, `tools/list` over every page, within each
    /// server's `startup_timeout`). Fails if any server fails, naming it; the
    /// servers already started are stopped again.
    pub async fn connect(configs: Vec<McpServerConfig>) -> Result<Self, McpError> {
        validate_all(&configs)?;
        let servers: Vec<Arc<Server>> = configs
            .into_iter()
            .enumerate()
            .map(|(index, config)| {
                let signals = Signals::new(&config.name);
                Arc::new(Server::new(index, config, signals))
            })
            .collect();
        let attempts = futures::future::join_all(
            servers.iter().map(|server| connect(&server.config, Arc::clone(&server.signals))),
        )
        .await;
        let mut connections = Vec::with_capacity(attempts.len());
        let mut failure = None;
        for attempt in attempts {
            match attempt {
                Ok(connection) => connections.push(connection),
                Err(error) => {
                    failure.get_or_insert(error);
                }
            }
        }
        if let Some(error) = failure {
            for mut connection in connections {
                let _ = connection.service.close_with_timeout(SHUTDOWN_TIMEOUT).await;
            }
            return Err(error);
        }
        for (server, connection) in servers.iter().zip(&connections) {
            server.set_up(connection);
        }
        let listings: Vec<Vec<rmcp::model::Tool>> =
            connections.iter().map(|connection| connection.tools.clone()).collect();
        let current = build_all(&servers, &listings);
        let (version, _) = watch::channel(0);
        let registry = Arc::new(Registry {
            servers: servers.clone(),
            listings: Mutex::new(listings),
            current: RwLock::new(current),
            version,
        });
        let shutdown = CancellationToken::new();
        let tasks = servers
            .into_iter()
            .zip(connections)
            .map(|(server, connection)| tokio::spawn(supervise(registry.clone(), server, connection, shutdown.clone())))
            .collect();
        Ok(Self { registry, shutdown, tasks: Mutex::new(tasks) })
    }

    /// The current tools of every server: servers in config order, each
    /// server's tools in the order it lists them.
    pub fn tools(&self) -> Vec<Tool> {
        self.registry.current().iter().map(|(tool, _)| tool.clone()).collect()
    }

    /// A toolkit of [`McpTools::tools`] (to combine them with other tools, use `tools()`).
    pub fn toolkit(&self) -> Result<Toolkit, ToolkitError> {
        Toolkit::new(self.tools())
    }

    /// What is known about each current tool (names, annotations, approval defaults).
    pub fn tool_infos(&self) -> Vec<McpToolInfo> {
        self.registry.current().iter().map(|(_, info)| info.clone()).collect()
    }

    /// A receiver of the tool-set version: it starts at 0 and goes up each
    /// time the tools change, so a caller can rebuild its toolkit
    /// (`receiver.changed().await`).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.registry.version.subscribe()
    }

    /// The current tool-set version (see [`McpTools::subscribe`]).
    pub fn version(&self) -> u64 {
        *self.registry.version.borrow()
    }

    /// The configured server names, in config order.
    pub fn server_names(&self) -> Vec<String> {
        self.registry.servers.iter().map(|server| server.name().to_owned()).collect()
    }

    /// Where the server named `server` stands, if there is one by that name.
    pub fn status(&self, server: &str) -> Option<ServerStatus> {
        self.find(server).map(|server| server.status())
    }

    /// The process id of a running stdio server.
    pub fn server_pid(&self, server: &str) -> Option<u32> {
        match self.status(server)? {
            ServerStatus::Running { pid } => pid,
            ServerStatus::Restarting { .. } | ServerStatus::Stopped => None,
        }
    }

    /// Stops every server (closing stdio servers' input, then terminating
    /// them) and waits for them, at most 10 seconds. Calls made afterwards
    /// fail with [`CallError::ServerStopped`](crate::CallError::ServerStopped).
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let tasks = self.tasks.lock().map(|mut tasks| std::mem::take(&mut *tasks)).unwrap_or_default();
        let _ = tokio::time::timeout(SHUTDOWN_TIMEOUT, futures::future::join_all(tasks)).await;
        for server in &self.registry.servers {
            server.set_stopped();
        }
    }

    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    fn find(&self, name: &str) -> Option<&Arc<Server>> {
        self.registry.servers.iter().find(|server| server.name() == name)
    }
}

impl Drop for McpTools {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_can_be_shared_across_tasks() {
        fn shareable<T: Send + Sync + 'static>() {}
        shareable::<McpTools>();
        shareable::<crate::McpError>();
        shareable::<crate::CallError>();
    }
}
