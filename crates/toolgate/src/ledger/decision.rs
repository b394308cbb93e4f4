//! Sticky decisions and grants as the store keeps them.
//!
//! A sticky decision is a person's standing answer ("always allow this tool
//! in this conversation", "never allow this input"); an allowing one is a
//! grant (see [`crate::approval::lifecycle::grant`]), with or without a use
//! limit. Policy code (the `toolgate-policy` crate) gives it meaning; the
//! store only keeps it, by scope, expiry and uses left, with its full
//! description as JSON in `body`, and spends its uses one at a time
//! ([`ConversationStore::use_decision`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Millis, StoreError, StoreFuture, StoredConversation};

/// Where a sticky decision applies.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum DecisionScope {
    /// One conversation.
    #[serde(rename_all = "camelCase")]
    Conversation {
        /// The conversation's id.
        conversation_id: String,
    },
    /// Every conversation of one principal.
    Principal {
        /// The principal.
        principal: String,
    },
    /// Everyone, everywhere.
    Global,
}

impl DecisionScope {
    /// `conversation`, `principal` or `global`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Conversation { .. } => "conversation",
            Self::Principal { .. } => "principal",
            Self::Global => "global",
        }
    }

    /// The conversation id or principal it names (none for `global`).
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Conversation { conversation_id } => Some(conversation_id),
            Self::Principal { principal } => Some(principal),
            Self::Global => None,
        }
    }

    /// The scope with this kind and key, if they fit together.
    pub fn from_parts(kind: &str, key: Option<String>) -> Option<Self> {
        match (kind, key) {
            ("conversation", Some(conversation_id)) => Some(Self::Conversation { conversation_id }),
            ("principal", Some(principal)) => Some(Self::Principal { principal }),
            ("global", None) => Some(Self::Global),
            _ => None,
        }
    }
}

/// One sticky decision in the store.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredDecision {
    /// Its id (unique).
    pub id: String,
    /// Where it applies.
    pub scope: DecisionScope,
    /// The tool it is about.
    pub tool_name: String,
    /// When it was made.
    pub created_at: Millis,
    /// When it stops applying (`None`: never).
    pub expires_at: Option<Millis>,
    /// The whole decision as JSON, as its maker wrote it.
    pub body: Value,
    /// How many more calls it may let run (`None`: no limit); one that
    /// reaches 0 no longer applies.
    pub uses_left: Option<i64>,
    /// Who made it (`None`: a server without principals), as a field the
    /// store indexes ([`ConversationStore::decisions_by`]).
    pub created_by: Option<String>,
}

impl StoredDecision {
    /// True while it applies at `now`: not expired, and a use left when it has a limit.
    pub fn is_live(&self, now: Millis) -> bool {
        self.expires_at.is_none_or(|expires_at| now < expires_at) && self.uses_left.is_none_or(|left| left > 0)
    }

    /// True when it applies to this conversation or principal (global ones always do).
    pub fn applies_to(&self, conversation_id: Option<&str>, principal: Option<&str>) -> bool {
        match &self.scope {
            DecisionScope::Global => true,
            DecisionScope::Conversation { conversation_id: scoped } => conversation_id == Some(scoped.as_str()),
            DecisionScope::Principal { principal: scoped } => principal == Some(scoped.as_str()),
        }
    }
}

/// Which sticky decisions to read: the live ones (at `now`) that apply to
/// this conversation or this principal, and the global ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecisionQuery {
    /// The conversation (none: no conversation-scoped decision matches).
    pub conversation_id: Option<String>,
    /// The principal (none: no principal-scoped decision matches).
    pub principal: Option<String>,
    /// Decisions that expired at or before this are left out.
    pub now: Millis,
}

/// What a request reads before it runs: its stored conversation and the
/// sticky decisions that apply to it (see
/// [`ConversationStore::conversation_with_decisions`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationRead {
    /// The stored conversation, if there is one.
    pub conversation: Option<StoredConversation>,
    /// The decisions, or why they could not be read back (a corrupt row):
    /// kept apart, so a reader can fail closed on them alone.
    pub decisions: Result<Vec<StoredDecision>, StoreError>,
}

/// Stored conversations and sticky decisions, read together before a request runs.
pub trait ConversationStore: Send + Sync + std::fmt::Debug {
    /// A stored conversation.
    fn conversation<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Option<StoredConversation>>;

    /// Saves a conversation (by its key) if its stored version is still
    /// `expected_version` (`None`: it must not exist yet). `owner` is
    /// recorded when the conversation is created and never changed. Returns
    /// the new version, or `None` when another writer saved first.
    fn save_conversation<'a>(
        &'a self,
        conversation_id: &'a str,
        owner: Option<&'a str>,
        messages: &'a serde_json::Value,
        expected_version: Option<i64>,
        at: Millis,
    ) -> StoreFuture<'a, Option<i64>>;

    /// Saves a sticky decision. An id already stored fails with
    /// [`StoreError::DuplicateDecision`].
    fn save_decision<'a>(&'a self, decision: &'a StoredDecision) -> StoreFuture<'a, ()>;

    /// The sticky decisions the query selects (see [`DecisionQuery`]), oldest first.
    fn decisions<'a>(&'a self, query: &'a DecisionQuery) -> StoreFuture<'a, Vec<StoredDecision>>;

    /// Removes a sticky decision; returns it, or `None` when no decision has this id.
    fn revoke_decision<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredDecision>>;

    /// The live decisions (at `now`) `author` made, oldest first; `None`:
    /// every live decision, whoever made it (a server without principals).
    fn decisions_by<'a>(&'a self, author: Option<&'a str>, now: Millis) -> StoreFuture<'a, Vec<StoredDecision>>;

    /// Spends one use of a decision (a grant) and appends `events`, in one
    /// conditional write: only if it is still stored, live at `now` and, when
    /// it has a use limit, has a use left (then one fewer). Returns it as it
    /// is after, or `None` (and appends nothing) when it was not live. Of
    /// concurrent calls on a grant with `n` uses left, exactly `n` succeed.
    fn use_decision<'a>(
        &'a self,
        id: &'a str,
        now: Millis,
        events: &'a [super::AuditEvent],
    ) -> StoreFuture<'a, Option<StoredDecision>>;

    /// Spends one use of a decision (a grant) as [`Self::use_decision`] does
    /// and issues `records` with `events` as
    /// [`super::ApprovalStore::issue`] does, in one conditional write: the
    /// use is bound to the call the records are issued for. Returns the
    /// decision as it is after, or `None` (nothing written) when it was not
    /// live; a taken approval id is [`super::StoreError::DuplicateApproval`]
    /// and spends nothing. So of concurrent requests for the same call (the
    /// same next approval id), one spends a use and issues it.
    fn use_decision_issuing<'a>(
        &'a self,
        id: &'a str,
        now: Millis,
        records: &'a [super::ApprovalRecord],
        events: &'a [super::AuditEvent],
    ) -> StoreFuture<'a, Option<StoredDecision>>;

    /// [`Self::conversation`] and [`Self::decisions`] together, as a request
    /// needs them before it runs: one round trip where the backend can. An
    /// unreachable store fails the call; a decision that cannot be read back
    /// fails only [`ConversationRead::decisions`]. This default reads one
    /// after the other.
    fn conversation_with_decisions<'a>(
        &'a self,
        conversation_id: &'a str,
        query: &'a DecisionQuery,
    ) -> StoreFuture<'a, ConversationRead> {
        Box::pin(async move {
            let conversation = self.conversation(conversation_id).await?;
            let decisions = match self.decisions(query).await {
                Err(StoreError::Corrupt(detail)) => Err(StoreError::Corrupt(detail)),
                other => Ok(other?),
            };
            Ok(ConversationRead { conversation, decisions })
        })
    }
}
