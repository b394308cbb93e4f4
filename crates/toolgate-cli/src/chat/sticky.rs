//! "Always allow" in `toolgate chat`: a sticky decision for this chat, kept
//! where the engine reads it: in the approval store (in-process chats) or on
//! the server (`POST /api/decisions` of `--server`).
//!
//! A sticky allow lifts a tool's own approval; it ranks below the config's
//! `deny` and `ask` rules, which keep asking (or refusing) as before.

use std::sync::Arc;

use anyhow::{Context, bail};
use serde_json::json;
use toolgate::ledger::{Clock, DecisionScope, LedgerStore, SystemClock};
use toolgate_policy::{StickyAction, StickyDecision, to_stored};

/// Where "always allow" goes.
pub enum StickySink {
    /// The store of an in-process chat.
    Store(Arc<dyn LedgerStore>),
    /// A toolgate server's `/api/decisions`, with the chat's bearer token.
    Server {
        /// The decisions endpoint.
        url: reqwest::Url,
        /// `TOOLGATE_TOKEN`, when set.
        token: Option<String>,
        /// The HTTP client.
        client: reqwest::Client,
    },
}

impl StickySink {
    /// The sink of a server whose chat endpoint is `chat_endpoint`.
    pub fn server(chat_endpoint: &str, token: Option<String>) -> anyhow::Result<Self> {
        let mut url = reqwest::Url::parse(chat_endpoint).context("the chat endpoint is not a URL")?;
        url.set_path("/api/decisions");
        url.set_query(None);
        Ok(Self::Server { url, token, client: reqwest::Client::new() })
    }

    /// Records "always allow `tool` in chat `chat_id`"; returns the decision's id.
    pub async fn always_allow(&self, chat_id: &str, tool: &str) -> anyhow::Result<String> {
        match self {
            Self::Store(store) => {
                let scope = DecisionScope::Conversation { conversation_id: chat_id.to_owned() };
                let id = format!("dec_{}", uuid::Uuid::now_v7().simple());
                let decision = StickyDecision::new(id, StickyAction::Allow, tool, scope, SystemClock.now())
                    .note("always allow, from toolgate chat");
                store.save_decision(&to_stored(&decision)).await.context("cannot store the sticky decision")?;
                Ok(decision.id)
            }
            Self::Server { url, token, client } => {
                let body = json!({"action": "allow", "tool": tool, "scope": "conversation", "conversationId": chat_id,
                    "note": "always allow, from toolgate chat"});
                let mut request = client.post(url.clone()).json(&body);
                if let Some(token) = token {
                    request = request.bearer_auth(token);
                }
                let response = request.send().await.with_context(|| format!("cannot reach {url}"))?;
                let status = response.status();
                let text = response.text().await.unwrap_or_default();
                if !status.is_success() {
                    bail!("{url} answered {status}: {text}");
                }
                let decision: StickyDecision = serde_json::from_str(&text)
                    .with_context(|| format!("{url} answered with something else: {text}"))?;
                Ok(decision.id)
            }
        }
    }
}
