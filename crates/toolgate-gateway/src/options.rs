//! How a gateway behaves: the flags of `toolgate mcp-gateway` and the
//! `[gateway]` table of its config file.

use std::time::Duration;

use serde::Deserialize;

/// How long a call is held for an out-of-band decision unless configured
/// otherwise: under the 60 s default request timeout of the official SDKs.
pub const DEFAULT_HOLD: Duration = Duration::from_secs(50);
/// How long after its decision an identical call still gets the stored outcome.
pub const DEFAULT_RETRY_WINDOW: Duration = Duration::from_secs(10 * 60);
/// How often a held call reports progress (when the client gave a progress token).
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// How often a held call reads its approval.
pub const POLL_EVERY: Duration = Duration::from_millis(250);
/// How many pending approvals one principal's gateway calls may hold at once.
pub const DEFAULT_MAX_HELD_CALLS: usize = 100;

/// The gateway's settings.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// The principal of a client whose transport names none (stdio, or HTTP
    /// without a principal source).
    pub principal: String,
    /// The client name approvals are filed under, instead of the
    /// `clientInfo.name` the client sends.
    pub client_name: Option<String>,
    /// How long a call waits for an out-of-band decision before the pending result.
    pub hold: Duration,
    /// How long after its decision an identical call gets the stored outcome.
    pub retry_window: Duration,
    /// The server's public URL (links to an approval's page).
    pub public_url: Option<String>,
    /// Offer the `approval_prompt` tool (Claude Code's `--permission-prompt-tool`).
    pub permission_prompt_tool: bool,
    /// How often a held call reports progress.
    pub progress_every: Duration,
    /// How often a held call reads its approval.
    pub poll: Duration,
    /// How many pending approvals one principal's calls through the gateway
    /// may hold at once; a call that would issue one more is refused.
    pub max_held_calls: usize,
}

impl GatewayOptions {
    /// The defaults, acting for `principal`.
    pub fn new(principal: impl Into<String>) -> Self {
        Self {
            principal: principal.into(),
            client_name: None,
            hold: DEFAULT_HOLD,
            retry_window: DEFAULT_RETRY_WINDOW,
            public_url: None,
            permission_prompt_tool: false,
            progress_every: PROGRESS_EVERY,
            poll: POLL_EVERY,
            max_held_calls: DEFAULT_MAX_HELD_CALLS,
        }
    }
}

/// The `[gateway]` table of a config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewaySection {
    /// Offer the `approval_prompt` tool.
    #[serde(default)]
    pub permission_prompt_tool: bool,
}
