//! Errors: connecting servers ([`McpError`]) and calling their tools ([`CallError`]).
//!
//! A [`CallError`] never ends a conversation: the tool handler turns it into
//! a [`ToolError`](toolgate::ToolError), which the model reads as an error
//! result, and the engine goes on.

use std::time::Duration;

use crate::config::ConfigError;

/// Why [`McpTools::connect`](crate::McpTools::connect) failed. Every variant names the server.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// A config is invalid (or two share a name).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The stdio server's command could not be started (e.g. it does not exist).
    #[error("cannot start MCP server `{server}` (command `{command}`): {source}")]
    Spawn {
        /// The server.
        server: String,
        /// The command as configured.
        command: String,
        /// Why the process could not be spawned.
        #[source]
        source: std::io::Error,
    },
    /// The MCP handshake (`initialize`) failed: the process exited, the URL
    /// did not answer, or the server spoke something else than MCP.
    #[error("MCP server `{server}` did not complete the MCP handshake: {detail}")]
    Initialize {
        /// The server.
        server: String,
        /// What went wrong, with the end of the server's stderr when there is one.
        detail: String,
    },
    /// `tools/list` failed.
    #[error("MCP server `{server}` did not list its tools: {detail}")]
    ListTools {
        /// The server.
        server: String,
        /// What went wrong.
        detail: String,
    },
    /// Connecting and listing took longer than `startup_timeout`.
    #[error("MCP server `{server}` did not start within {}", humantime::format_duration(*.timeout))]
    StartupTimeout {
        /// The server.
        server: String,
        /// The configured startup timeout.
        timeout: Duration,
    },
}

impl McpError {
    /// The server the error is about, when it is about one.
    pub fn server(&self) -> Option<&str> {
        match self {
            Self::Config(ConfigError::InvalidName { name, .. } | ConfigError::DuplicateName { name }) => Some(name),
            Self::Config(
                ConfigError::MissingTransport { server }
                | ConfigError::ConflictingTransports { server }
                | ConfigError::MisplacedField { server, .. }
                | ConfigError::EmptyCommand { server }
                | ConfigError::InvalidUrl { server, .. }
                | ConfigError::InvalidHeader { server, .. }
                | ConfigError::ZeroTimeout { server, .. },
            )
            | Self::Spawn { server, .. }
            | Self::Initialize { server, .. }
            | Self::ListTools { server, .. }
            | Self::StartupTimeout { server, .. } => Some(server),
        }
    }
}

/// Why one tool call failed. The model reads its text as an error result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No current tool has this name.
    #[error("no MCP tool is named `{tool}`")]
    UnknownTool {
        /// The name asked for.
        tool: String,
    },
    /// The server is down and being restarted in the background; the call was not sent.
    #[error(
        "MCP server `{server}` is not running ({reason}); it is being restarted in the background, try again shortly"
    )]
    ServerDown {
        /// The server.
        server: String,
        /// Why it is down.
        reason: String,
    },
    /// [`McpTools::shutdown`](crate::McpTools::shutdown) was called (or the `McpTools` dropped).
    #[error("MCP server `{server}` has been shut down")]
    ServerStopped {
        /// The server.
        server: String,
    },
    /// The input is not a JSON object (MCP arguments are objects).
    #[error("MCP tool `{tool}` takes a JSON object as input, not {found}")]
    InvalidInput {
        /// The tool's model-facing name.
        tool: String,
        /// What the input was.
        found: String,
    },
    /// The call took longer than the server's `timeout`; it was cancelled.
    #[error("MCP tool `{tool}` (server `{server}`) did not answer within {}; the call was cancelled", humantime::format_duration(*.timeout))]
    Timeout {
        /// The server.
        server: String,
        /// The tool's model-facing name.
        tool: String,
        /// The configured timeout.
        timeout: Duration,
    },
    /// The caller abandoned the call (the tool context was cancelled); the server was told.
    #[error("the call to MCP tool `{tool}` was cancelled")]
    Cancelled {
        /// The tool's model-facing name.
        tool: String,
    },
    /// The connection closed while the call ran (e.g. the process died).
    #[error(
        "MCP server `{server}` closed the connection during the call to `{tool}` (it may have exited); it is being restarted in the background"
    )]
    Disconnected {
        /// The server.
        server: String,
        /// The tool's model-facing name.
        tool: String,
    },
    /// The server answered with a JSON-RPC error (unknown tool, invalid params, …).
    #[error("MCP server `{server}` rejected the call to `{tool}`: {message} (JSON-RPC error {code})")]
    Rejected {
        /// The server.
        server: String,
        /// The tool's model-facing name.
        tool: String,
        /// The JSON-RPC error code.
        code: i32,
        /// The server's message.
        message: String,
    },
    /// The reply is not a tool result.
    #[error("MCP server `{server}` answered the call to `{tool}` with something that is not a tool result: {detail}")]
    InvalidResponse {
        /// The server.
        server: String,
        /// The tool's model-facing name.
        tool: String,
        /// What was wrong with it.
        detail: String,
    },
    /// The server asked for something this client does not do (tasks, elicitation).
    #[error("MCP server `{server}` answered the call to `{tool}` with {what}, which toolgate-mcp does not support")]
    Unsupported {
        /// The server.
        server: String,
        /// The tool's model-facing name.
        tool: String,
        /// What it asked for.
        what: String,
    },
    /// The request could not be sent.
    #[error("cannot send the call to `{tool}` to MCP server `{server}`: {detail}")]
    Transport {
        /// The server.
        server: String,
        /// The tool's model-facing name.
        tool: String,
        /// The transport's error.
        detail: String,
    },
}
