//! The gateway's shared state: the upstream servers, the rules, the ledger
//! and the settings; and who a call is from.

use std::sync::Arc;

use serde_json::Value;
use toolgate::ApprovalContext;
use toolgate::approval::lifecycle::held::{self, Admitted, HeldCall, HeldError};
use toolgate::approval::lifecycle::{EditCheck, EditRefusal, Voter, check_edit};
use toolgate::ledger::{ApprovalQuery, ApprovalRecord, Ledger, LedgerConfig, Origin, StateFilter, conversation_key};
use toolgate::tool::{CallGate, Caller, GateAction};
use toolgate_mcp::{McpTools, RelayedTool};
use toolgate_policy::{DecisionScope, PolicyHandle, StickyAction, StickyDecision, StoredGate, to_stored};

use crate::options::GatewayOptions;

/// The prefix of every conversation id the gateway files approvals under.
pub const CONVERSATION_PREFIX: &str = "mcp:";

/// Who a call is from: the principal and their groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The principal.
    pub principal: String,
    /// Their groups (without `group:`).
    pub groups: Vec<String>,
}

/// One client's view: who it acts for and the name it is filed under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Who the calls are from.
    pub identity: Identity,
    /// The client's name (`clientInfo.name`, or the configured override).
    pub client: String,
}

impl Session {
    /// The conversation id approvals of this session are filed under:
    /// `mcp:<principal>:<client>`. It depends on nothing of the transport, so
    /// a retry after a reconnect or a gateway restart finds its approval.
    pub fn conversation_id(&self) -> String {
        format!("{CONVERSATION_PREFIX}{}:{}", self.identity.principal, self.client)
    }

    /// The conversation's key in the store (owned by the principal, so the
    /// inbox shows its approvals to them as the requester).
    pub fn conversation_key(&self) -> String {
        conversation_key(Some(&self.identity.principal), &self.conversation_id())
    }
}

/// The session's principal asking, under `gate`, in the conversation `key`.
pub(crate) fn requester<'a>(session: &'a Session, gate: &'a StoredGate, key: &'a str) -> Caller<'a> {
    Caller {
        gate: Some(gate),
        conversation_id: Some(key),
        principal: Some(&session.identity.principal),
        groups: &session.identity.groups,
    }
}

/// The gateway: upstream servers, rules and sticky decisions, the ledger.
pub struct Gateway {
    mcp: Arc<McpTools>,
    policy: PolicyHandle,
    ledger: LedgerConfig,
    options: GatewayOptions,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").field("mcp", &self.mcp).field("options", &self.options).finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway in front of `mcp`, deciding with `policy` and recording in `ledger`'s store.
    pub fn new(mcp: Arc<McpTools>, policy: PolicyHandle, ledger: LedgerConfig, options: GatewayOptions) -> Arc<Self> {
        Arc::new(Self { mcp, policy, ledger, options })
    }

    /// The settings.
    pub fn options(&self) -> &GatewayOptions {
        &self.options
    }

    /// The upstream servers.
    pub fn mcp(&self) -> &Arc<McpTools> {
        &self.mcp
    }

    /// The ledger of a session: the principal's conversation, recording the
    /// principal as its owner and the client as every approval's client, answered by the principal.
    pub fn ledger(&self, session: &Session) -> Ledger {
        let principal = &session.identity.principal;
        self.ledger
            .owned(Some(principal), &session.conversation_id())
            .client(session.client.clone())
            .principal(principal.clone())
            .origin(Origin::Gateway)
    }

    /// The tool offered under `name`, if any.
    pub fn tool(&self, name: &str) -> Option<RelayedTool> {
        self.mcp.relayed_tool(name)
    }

    /// The rules and the session's sticky decisions, as of now.
    pub fn gate(&self, session: &Session) -> StoredGate {
        StoredGate::new(
            self.policy.current(),
            Arc::clone(&self.ledger.store),
            Some(session.conversation_key()),
            Some(session.identity.principal.clone()),
            self.ledger.clock.now(),
        )
        .with_history(Arc::clone(&self.ledger.store), Arc::clone(&self.ledger.groups))
        .with_clock(Arc::clone(&self.ledger.clock))
    }

    /// The digest of the rules config now loaded ([`toolgate_policy::Policy::digest`]),
    /// which the approvals the gateway holds record for their receipts.
    pub fn config_digest(&self) -> Option<String> {
        self.policy.current().digest().map(str::to_owned)
    }

    /// Decides a call of the session (an upstream tool, or a stand-in for
    /// a tool the gateway does not offer) and, when a person must answer,
    /// finds or issues its approval, through the lifecycle's one path
    /// ([`held::admit_asked`]): the rules and sticky decisions first (deny >
    /// ask > allow), then the tool's own default from its trusted
    /// annotations; a question a grant covers is lifted; a call a history
    /// term let through is recorded with that history before it runs, and a
    /// question is issued only while the history it was judged on stands. A
    /// new question is refused when the principal has too many waiting
    /// ([`Self::check_held_capacity`]). Fails closed. With what was admitted,
    /// the rule that allowed the call when one did (`CallGate::allowed_by`,
    /// which its `executed` event and receipt name).
    pub async fn admit(
        &self,
        session: &Session,
        tool: &toolgate::Tool,
        held_call: HeldCall<'_>,
        call_id: &str,
    ) -> Result<(Admitted, Option<String>), HeldError> {
        let (gate, key) = (self.gate(session), session.conversation_key());
        let caller = requester(session, &gate, &key);
        let ledger = self.ledger(session);
        let context = ApprovalContext::new(call_id, Vec::new());
        let room = || self.check_held_capacity(session, call_id);
        let admitted =
            held::admit_asked(&ledger, caller, tool, context, held_call, self.options.retry_window, room).await?;
        let rule = match &admitted {
            Admitted::Decided(verdict) if verdict.action == GateAction::Allow => gate.allowed_by(call_id),
            _ => None,
        };
        Ok((admitted, rule))
    }

    /// Whether a decided edit of `record` may run: the lifecycle's one edit
    /// check ([`check_edit`]), the edited input judged as the session's own
    /// call of `tool` (an upstream tool, or a stand-in without a policy for
    /// a tool the gateway does not offer), approved by whoever decided the
    /// record (their groups from the config's `[groups]`).
    pub async fn check_edit(
        &self,
        session: &Session,
        tool: &toolgate::Tool,
        record: &ApprovalRecord,
        edit: &Value,
    ) -> Result<(), EditRefusal> {
        let (gate, key) = (self.gate(session), session.conversation_key());
        let requester = requester(session, &gate, &key);
        let decider = record.decision.as_ref().and_then(|decision| decision.principal.clone());
        let groups = match &decider {
            Some(principal) => self.ledger.member_groups(principal),
            None => Vec::new(),
        };
        let voter = Voter { principal: decider, groups, ..Voter::default() };
        let context = ApprovalContext::new(record.tool_call_id.clone(), Vec::new());
        let routed = record.routing.is_some();
        let input_schema = record.input_schema.as_ref();
        check_edit(EditCheck { tool, edit, requester, context, routed, voter: Some(&voter), input_schema }).await
    }

    /// Refuses a call that would hold one more approval than the principal
    /// may have pending through the gateway ([`GatewayOptions::max_held_calls`]);
    /// a call whose approval is already pending (a retry) attaches to it.
    pub async fn check_held_capacity(&self, session: &Session, call_id: &str) -> Result<(), String> {
        let principal = &session.identity.principal;
        let max = self.options.max_held_calls;
        let query = ApprovalQuery {
            viewer_keys: Some(vec![principal.clone()]),
            states: StateFilter::Pending,
            limit: max.saturating_add(1),
            ..ApprovalQuery::default()
        };
        let pending = self.ledger.store.list_approvals(&query).await.map_err(|error| error.to_string())?;
        let prefix = conversation_key(Some(principal), CONVERSATION_PREFIX);
        let held: Vec<_> = pending.iter().filter(|record| record.conversation_id.starts_with(&prefix)).collect();
        if held.len() < max || held.iter().any(|record| record.tool_call_id == call_id) {
            return Ok(());
        }
        Err(format!(
            "`{principal}` already has {max} calls waiting for approval through this gateway (--max-held-calls); \
             decide or withdraw some, then call again"
        ))
    }

    /// Saves "always allow `tool_name` in this session" (the client's `approve_always`).
    pub async fn allow_always(&self, session: &Session, tool_name: &str) -> Result<(), toolgate::ledger::StoreError> {
        let scope = DecisionScope::Conversation { conversation_id: session.conversation_key() };
        let id = format!("dec_{}", uuid::Uuid::now_v7().simple());
        let decision = StickyDecision::new(id, StickyAction::Allow, tool_name, scope, self.ledger.clock.now())
            .created_by(session.identity.principal.clone())
            .note("approve_always, from the MCP client");
        self.ledger.store.save_decision(&to_stored(&decision)).await
    }
}
