//! Sticky decisions: a person's "always allow this tool here", "always allow
//! exactly this input" or "never allow", kept beyond one call.
//!
//! A [`StickyDecision`] acts as one more rule with the same precedence as the
//! file's rules (deny > ask > allow): a sticky deny is a deny, a sticky allow
//! an allow, so a sticky allow never overrides a file `deny` or `ask` rule.
//! It matches a call when it has not expired (`expires_at > now`), names the
//! call's tool exactly, its `input` (when set) equals the call's input as
//! JSON, and its scope covers the call: [`DecisionScope::Conversation`] only
//! that conversation (and, when it has a `created_by`, only its author's
//! calls there), [`DecisionScope::Principal`] only that principal,
//! [`DecisionScope::Global`] every call. The scope type is the ledger's
//! ([`toolgate::ledger::DecisionScope`]), so a decision and its stored row
//! agree; times are the ledger's [`Millis`]. Storing decisions is the
//! store's job ([`crate::stored`] reads them from one).
//!
//! JSON (camelCase): `{"id", "action": "allow"|"deny", "tool", "input"?,
//! "scope": {"kind": "conversation", "conversationId"} | {"kind": "principal",
//! "principal"} | {"kind": "global"}, "expiresAt"?, "createdAt", "createdBy"?,
//! "note"?, "uses"?, "inputMatch"?, "granterGroups"?, "requester"?, "approvalId"?}`; times
//! are unix milliseconds. A missing or `null` `input` means any input.
//!
//! **An allowing decision is a grant** ([`toolgate::approval::lifecycle::grant`]):
//! it does not rank as a rule, it lifts a question the rules or the tool ask,
//! when its author may ([`toolgate::approval::lifecycle::grant::may_lift`]),
//! spending one of its `uses` (none: no limit; the store counts what is left,
//! [`StickyDecision::uses_left`]). Its `inputMatch` predicates (the rules'
//! operators, by JSON pointer) must all hold for the call's input. A grant
//! made with an approval names it (`approvalId`) and its author's groups
//! (`granterGroups`). Its scope covers the call as above; whether its author
//! may decide the call is the lifecycle's check, not the scope's, so
//! `created_by` narrows only a conversation-scoped *deny* to its author's calls.

use std::time::{SystemTime, UNIX_EPOCH};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
pub use toolgate::ledger::DecisionScope;
use toolgate::ledger::Millis;
use toolgate::tool::{GateAction, GateCall};

use crate::config::PredicateConfig;
use crate::predicate::json_eq;

/// What a sticky decision decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StickyAction {
    /// Always allow.
    Allow,
    /// Never allow.
    Deny,
}

impl From<StickyAction> for GateAction {
    fn from(action: StickyAction) -> Self {
        match action {
            StickyAction::Allow => GateAction::Allow,
            StickyAction::Deny => GateAction::Deny,
        }
    }
}

/// Whether a call in `conversation_id` by `principal` is in `scope` (a
/// conversation-scoped decision with an author also needs the author's call:
/// see [`StickyDecision::matches`]).
pub fn scope_covers(scope: &DecisionScope, conversation_id: Option<&str>, principal: Option<&str>) -> bool {
    match scope {
        DecisionScope::Conversation { conversation_id: id } => conversation_id == Some(id.as_str()),
        DecisionScope::Principal { principal: name } => principal == Some(name.as_str()),
        DecisionScope::Global => true,
    }
}

/// A person's lasting decision about a tool. See the module docs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StickyDecision {
    /// Unique id (shown in reasons).
    pub id: String,
    /// Allow or deny.
    pub action: StickyAction,
    /// The exact tool name.
    pub tool: String,
    /// `None`: any input; `Some`: exactly this input (compared as JSON values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// Where it applies.
    pub scope: DecisionScope,
    /// Unix milliseconds from which on it no longer matches (`expires_at <= now` is expired).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Millis>,
    /// Unix milliseconds when it was made.
    pub created_at: Millis,
    /// Who made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// Free text from the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// For a grant: how many calls it let run when made (none: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses: Option<u32>,
    /// For a grant: how many are left, as the store counts them (not part of
    /// the stored body; set when read back).
    #[serde(skip)]
    pub uses_left: Option<i64>,
    /// For a grant: predicates by JSON pointer that the call's input must all satisfy.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub input_match: BTreeMap<String, PredicateConfig>,
    /// For a grant: its author's groups when they made it (without `group:`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub granter_groups: Vec<String>,
    /// For a grant made with an approval: whose call it was (the
    /// conversation's owner, whose later calls it lets run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester: Option<String>,
    /// For a grant made with an approval: that approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
}

impl StickyDecision {
    /// A decision for any input of `tool`, without expiry, author or note.
    pub fn new(
        id: impl Into<String>,
        action: StickyAction,
        tool: impl Into<String>,
        scope: DecisionScope,
        created_at: Millis,
    ) -> Self {
        Self {
            id: id.into(),
            action,
            tool: tool.into(),
            input: None,
            scope,
            expires_at: None,
            created_at,
            created_by: None,
            note: None,
            uses: None,
            uses_left: None,
            input_match: BTreeMap::new(),
            granter_groups: Vec::new(),
            requester: None,
            approval_id: None,
        }
    }

    /// Restricts it to exactly this input.
    pub fn with_input(mut self, input: Value) -> Self {
        self.input = Some(input);
        self
    }

    /// Sets the expiry (unix milliseconds).
    pub fn expires_at(mut self, expires_at: Millis) -> Self {
        self.expires_at = Some(expires_at);
        self
    }

    /// Sets the author.
    pub fn created_by(mut self, created_by: impl Into<String>) -> Self {
        self.created_by = Some(created_by.into());
        self
    }

    /// Sets the note.
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    /// True when `expires_at <= now_ms`.
    pub fn is_expired(&self, now_ms: Millis) -> bool {
        self.expires_at.is_some_and(|expires_at| expires_at <= now_ms)
    }

    /// Whether it decides `call` at `now_ms` (module docs): not expired, the
    /// same tool, the same input (when it names one), and a scope that covers
    /// the call. A conversation-scoped decision with a `created_by` applies
    /// only to its author's calls in that conversation, so nobody decides for
    /// someone else's calls by sharing their conversation.
    pub fn matches(&self, call: &GateCall<'_>, now_ms: Millis) -> bool {
        !self.is_expired(now_ms)
            && self.uses_left.is_none_or(|left| left > 0)
            && self.tool == call.tool_name
            && scope_covers(&self.scope, call.conversation_id, call.principal)
            && self.author_covers(call)
            && self.input.as_ref().is_none_or(|input| json_eq(input, call.input))
            && crate::predicate::grant_input_holds(&self.id, &self.input_match, call.input)
    }

    /// A grant's author need not be the caller (the lifecycle checks they may
    /// decide the call); a conversation-scoped deny binds its author's calls only.
    fn author_covers(&self, call: &GateCall<'_>) -> bool {
        match (self.action, &self.scope, &self.created_by) {
            (StickyAction::Deny, DecisionScope::Conversation { .. }, Some(author)) => {
                call.principal == Some(author.as_str())
            }
            _ => true,
        }
    }

    /// The reason text, e.g. ``sticky decision `d1` (always allow `fs__write_file` in this conversation, by alice)``.
    pub fn describe(&self) -> String {
        let verb = match (self.action, self.uses) {
            (StickyAction::Allow, None) => "always allow".to_owned(),
            (StickyAction::Allow, Some(uses)) => format!("allow {uses} calls of"),
            (StickyAction::Deny, _) => "never allow".to_owned(),
        };
        let what = if self.action == StickyAction::Allow { "grant" } else { "sticky decision" };
        let mut text = format!("{what} `{}` ({verb} `{}`", self.id, self.tool);
        if self.input.is_some() {
            text.push_str(" with exactly this input");
        }
        if !self.input_match.is_empty() {
            text.push_str(" with inputs like this");
        }
        match &self.scope {
            DecisionScope::Conversation { .. } => text.push_str(" in this conversation"),
            DecisionScope::Principal { principal } => text.push_str(&format!(" for {principal}")),
            DecisionScope::Global => text.push_str(" everywhere"),
        }
        if let Some(by) = &self.created_by {
            text.push_str(&format!(", by {by}"));
        }
        text.push(')');
        if let Some(note) = &self.note {
            text.push_str(&format!(": {note}"));
        }
        text
    }
}

/// The current time in unix milliseconds (0 if the clock is before 1970).
pub fn now_ms() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| Millis::try_from(elapsed.as_millis()).unwrap_or(Millis::MAX))
}
