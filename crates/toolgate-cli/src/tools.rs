//! The tools and rules a command runs with: the `--tools` toolkit, the MCP
//! servers of `--config` (their tools join it), and the config's rules.
//!
//! A [`ToolSetup`] keeps the MCP connections open while it lives. The
//! toolkit it gives is a snapshot: [`ToolSetup::changes`] tells when an MCP
//! server's tool list changed, and `serve` then offers the new toolkit from
//! the next request on. [`ToolSetup::watch_rules`] reloads the rules when the
//! file changes; a file that no longer parses keeps the previous rules.

use std::path::Path;

use anyhow::Context;
use clap::ValueEnum;
use tokio::sync::watch;
use toolgate::{Tool, Toolkit};
use toolgate_mcp::McpTools;
use toolgate_policy::{PolicyHandle, Watcher};

use crate::agents::Agents;
use crate::config::{Config, parse_policy};

/// The toolkit's sources and the rules.
pub struct ToolSetup {
    base: Vec<Tool>,
    mcp: Option<McpTools>,
    /// The `[[agent]]`s of `--config`, offered as tools after the others.
    agents: Agents,
    /// The rules of `--config` (empty without one).
    pub policy: PolicyHandle,
    config: Option<Config>,
}

impl ToolSetup {
    /// Loads `--config` (if any), connects its MCP servers, and joins their tools to `tools`.
    pub async fn load(tools: Tools, config: Option<&Path>) -> anyhow::Result<Self> {
        let base = tools.toolkit().map(|toolkit| toolkit.tools().to_vec()).unwrap_or_default();
        let Some(path) = config else {
            let policy = PolicyHandle::default();
            return Ok(Self { base, mcp: None, agents: Agents::default(), policy, config: None });
        };
        let config = Config::load(path)?;
        let policy = PolicyHandle::new(config.policy.clone());
        let mcp = match config.mcp.is_empty() {
            true => None,
            false => Some(
                McpTools::connect(config.mcp.clone())
                    .await
                    .with_context(|| format!("cannot start the MCP servers of --config {}", path.display()))?,
            ),
        };
        let agents = Agents::new(&config.agents, crate::model_spec::model_from_spec)?;
        let setup = Self { base, mcp, agents, policy, config: Some(config) };
        setup.toolkit()?;
        Ok(setup)
    }

    /// The toolkit now: the `--tools` tools, then every MCP tool, then every
    /// `[[agent]]` (over those); `None` when there are none.
    pub fn toolkit(&self) -> anyhow::Result<Option<Toolkit>> {
        let mut tools = self.base.clone();
        if let Some(mcp) = &self.mcp {
            tools.extend(mcp.tools());
        }
        if !self.agents.is_empty() {
            let agents = self.agents.tools(&tools)?;
            tools.extend(agents);
        }
        if tools.is_empty() {
            return Ok(None);
        }
        Toolkit::new(tools).map(Some).context("the --tools and MCP tools do not make one toolkit")
    }

    /// The config file's `admins` (none without a config file).
    pub fn admins(&self) -> &[String] {
        self.config.as_ref().map_or(&[], |config| config.admins.as_slice())
    }

    /// The config file's `[groups]` (none without a config file).
    pub fn groups(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        self.config.as_ref().map(|config| config.groups.clone()).unwrap_or_default()
    }

    /// The config file's `[calls]` table (the defaults without a config file).
    pub fn calls(&self) -> crate::config::CallsSection {
        self.config.as_ref().map(|config| config.calls).unwrap_or_default()
    }

    /// The config file's notification channels (none without a config file).
    pub fn notify(&self) -> toolgate_notify::Channels {
        self.config.as_ref().map(|config| config.notify.clone()).unwrap_or_default()
    }

    /// Changes of the MCP servers' tool lists (none without MCP servers).
    pub fn changes(&self) -> Option<watch::Receiver<u64>> {
        self.mcp.as_ref().map(McpTools::subscribe)
    }

    /// Reloads the rules when the config file changes; keep the watcher alive.
    pub fn watch_rules(&self) -> anyhow::Result<Option<Watcher>> {
        let Some(config) = &self.config else { return Ok(None) };
        let watcher = toolgate_policy::watch_file(&config.path, self.policy.clone(), parse_policy)
            .with_context(|| format!("cannot watch --config {}", config.path.display()))?;
        Ok(Some(watcher))
    }

    /// Stops the MCP servers.
    pub async fn shutdown(&self) {
        if let Some(mcp) = &self.mcp {
            mcp.shutdown().await;
        }
    }
}

/// Built-in toolkits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Tools {
    /// get_weather, delete_file, transfer_money, ask_user.
    Demo,
    /// No tools.
    None,
}

impl Tools {
    /// The toolkit these tools make; `None` for no tools.
    pub fn toolkit(self) -> Option<toolgate::Toolkit> {
        match self {
            Self::Demo => Some(toolgate::demo::toolkit()),
            Self::None => None,
        }
    }
}
