//! The SQL both backends share, and the mapping between rows and ledger types.
//!
//! Every statement here runs unchanged on SQLite and Postgres: both take `$N`
//! placeholders (SQLite reads `$1` as parameter 1, and the same name twice as
//! the same parameter).

use std::sync::OnceLock;

use serde_json::Value;
use toolgate::ledger::{
    ApprovalRecord, ApprovalState, AuditEvent, AuditKind, AuditQuery, AuditView, ConversationRead, DecisionScope,
    Guard, Lease, RecordedDecision, StoreError, StoredConversation, StoredDecision, Transition,
};
use toolgate_protocol::ToolResultOutput;

/// The columns of `approvals`, in [`RecordRow`] order.
macro_rules! record_columns {
    () => {
        "approval_id, conversation_id, tool_call_id, tool_name, input, input_digest, issued_at, expires_at, \
         state, decision, output, lease_executor, lease_until, updated_at"
    };
}

/// The columns of `audit_events`, in [`EventRow`] order.
macro_rules! event_columns {
    () => {
        "seq, at, kind, approval_id, tool_call_id, conversation_id, owner, principal, data"
    };
}

/// The columns of `decisions` a [`DecisionRow`] reads, in its order.
macro_rules! decision_columns {
    () => {
        "id, scope_kind, scope_key, tool_name, created_at, expires_at, body"
    };
}

pub(crate) use record_columns;

/// Inserts an approval unless its id is taken (then no row is affected).
pub(crate) const INSERT_RECORD: &str = concat!(
    "INSERT INTO approvals (",
    record_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT (approval_id) DO NOTHING"
);

/// The parameters of [`INSERT_RECORD`].
pub(crate) const RECORD_PARAMS: usize = 14;

/// One approval by id.
pub(crate) const SELECT_RECORD: &str = concat!("SELECT ", record_columns!(), " FROM approvals WHERE approval_id = $1");

/// The most audit events one insert statement holds ([`EVENT_PARAMS`]
/// parameters each, well under SQLite's and Postgres's limits).
pub(crate) const EVENTS_PER_INSERT: usize = 500;

/// The columns an event insert writes, in the order of [`event_rows`].
pub(crate) const EVENT_INSERT_COLUMNS: &str =
    "at, kind, approval_id, tool_call_id, conversation_id, owner, principal, data";

/// The parameters of one event in an insert (its [`EVENT_INSERT_COLUMNS`]).
pub(crate) const EVENT_PARAMS: usize = 8;

/// The `VALUES` rows of `count` audit events: [`EVENT_PARAMS`] parameters per
/// event, in [`EVENT_INSERT_COLUMNS`] order, numbered from `$first` (`($1, …,
/// $8), ($9, …, $16), …` from 1).
pub(crate) fn event_rows(count: usize, first: usize) -> String {
    let rows: Vec<String> = (0..count)
        .map(|event| {
            let start = first + event * EVENT_PARAMS;
            let params: Vec<String> = (start..start + EVENT_PARAMS).map(|n| format!("${n}")).collect();
            format!("({})", params.join(", "))
        })
        .collect();
    rows.join(", ")
}

/// Extends the leases of one executor's running calls.
pub(crate) const RENEW_LEASES: &str =
    "UPDATE approvals SET lease_until = $2 WHERE state = 'executing' AND lease_executor = $1";

/// Rows one prune statement removes at most, so that writers queued behind
/// it wait for one chunk, not for a whole first prune of a large store.
pub(crate) const PRUNE_CHUNK: u64 = 5_000;

/// Prunes up to `$2` (the chunk, [`PRUNE_CHUNK`]) audit events recorded before `$1`, except
/// those of open approvals (pending, approved, executing).
pub(crate) const PRUNE_EVENTS: &str = "DELETE FROM audit_events WHERE seq IN (SELECT seq FROM audit_events \
     WHERE at < $1 AND approval_id NOT IN \
     (SELECT approval_id FROM approvals WHERE state IN ('pending', 'approved', 'executing')) LIMIT $2)";

/// Prunes up to [`PRUNE_CHUNK`] approvals in a final state last changed before `$1`.
pub(crate) const PRUNE_APPROVALS: &str = "DELETE FROM approvals WHERE approval_id IN (SELECT approval_id \
     FROM approvals WHERE updated_at < $1 AND state IN ('denied', 'expired', 'executed', 'failed', 'interrupted') \
     LIMIT $2)";

/// Prunes up to [`PRUNE_CHUNK`] conversations last saved before `$1` that hold no open approval.
pub(crate) const PRUNE_CONVERSATIONS: &str = "DELETE FROM conversations WHERE conversation_id IN \
     (SELECT conversation_id FROM conversations WHERE updated_at < $1 AND conversation_id NOT IN \
     (SELECT conversation_id FROM approvals WHERE state IN ('pending', 'approved', 'executing')) LIMIT $2)";

/// One stored conversation.
pub(crate) const SELECT_CONVERSATION: &str =
    "SELECT conversation_id, messages, version, updated_at FROM conversations WHERE conversation_id = $1";

/// Creates a conversation at version 1 unless it exists.
pub(crate) const CREATE_CONVERSATION: &str = "INSERT INTO conversations (conversation_id, messages, version, updated_at) \
     VALUES ($1, $2, 1, $3) ON CONFLICT (conversation_id) DO NOTHING";

/// Saves a conversation over the version the writer read.
pub(crate) const UPDATE_CONVERSATION: &str = "UPDATE conversations SET messages = $2, version = version + 1, \
     updated_at = $3 WHERE conversation_id = $1 AND version = $4";

/// Saves a sticky decision unless its id is taken (then no row is affected);
/// the store assigns `seq`.
pub(crate) const INSERT_DECISION: &str = concat!(
    "INSERT INTO decisions (",
    decision_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING"
);

/// The condition on `decisions` that selects the ones live at `$1` that are
/// global, or scoped to the conversation `$2` or the principal `$3` (a NULL
/// one matches nothing).
macro_rules! decisions_that_apply {
    () => {
        "(expires_at IS NULL OR expires_at > $1) AND (scope_kind = 'global' \
         OR (scope_kind = 'conversation' AND scope_key = $2) OR (scope_kind = 'principal' AND scope_key = $3))"
    };
}

/// The sticky decisions that apply (`decisions_that_apply!`), oldest first.
pub(crate) const SELECT_DECISIONS: &str = concat!(
    "SELECT ",
    decision_columns!(),
    " FROM decisions WHERE ",
    decisions_that_apply!(),
    " ORDER BY created_at, seq"
);

/// A conversation (`$4`) and the decisions [`SELECT_DECISIONS`] selects
/// (`$1` now, `$2` conversation, `$3` principal) in one statement: the
/// conversation's row first (`part` 0, when it is stored), then the decisions
/// (`part` 1), oldest first, in [`ReadRow`]'s columns.
pub(crate) const SELECT_CONVERSATION_WITH_DECISIONS: &str = concat!(
    "SELECT 0 AS part, conversation_id AS id, NULL AS scope_kind, NULL AS scope_key, NULL AS tool_name, \
     version AS created_at, updated_at AS expires_at, messages AS body, 0 AS seq \
     FROM conversations WHERE conversation_id = $4 UNION ALL SELECT 1, ",
    decision_columns!(),
    ", seq FROM decisions WHERE ",
    decisions_that_apply!(),
    " ORDER BY part, created_at, seq"
);

/// Removes one sticky decision and returns its row.
pub(crate) const DELETE_DECISION: &str = concat!("DELETE FROM decisions WHERE id = $1 RETURNING ", decision_columns!());

/// What happens to the lease columns in a transition (mirrors `Transition::write_into`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseWrite {
    /// The transition sets a lease.
    Set,
    /// It moves into `executing` without one: keep the current lease.
    Keep,
    /// It leaves (or never enters) `executing`: clear the lease.
    Clear,
}

impl LeaseWrite {
    pub(crate) fn of(transition: &Transition) -> Self {
        if transition.update.lease.is_some() {
            Self::Set
        } else if transition.to == ApprovalState::Executing {
            Self::Keep
        } else {
            Self::Clear
        }
    }
}

/// The conditional update of one transition. Parameters: `$1` approval id,
/// `$2` from, `$3` to, `$4` at, `$5` decision or NULL, `$6` output or NULL,
/// then the guard's time when it has one, then the lease executor and
/// until when it sets one. Returns the updated row. Each of the twelve
/// guard and lease shapes is written once per process.
pub(crate) fn transition_sql(guard: Guard, lease: LeaseWrite) -> &'static str {
    static TEXTS: OnceLock<Vec<String>> = OnceLock::new();
    const GUARDS: [Guard; 4] = [Guard::None, Guard::NotExpiredAt(0), Guard::ExpiredAt(0), Guard::LeaseLapsedAt(0)];
    const LEASES: [LeaseWrite; 3] = [LeaseWrite::Set, LeaseWrite::Keep, LeaseWrite::Clear];
    let texts = TEXTS.get_or_init(|| {
        GUARDS.iter().flat_map(|guard| LEASES.iter().map(|lease| write_transition_sql(*guard, *lease))).collect()
    });
    let guard_index = match guard {
        Guard::None => 0,
        Guard::NotExpiredAt(_) => 1,
        Guard::ExpiredAt(_) => 2,
        Guard::LeaseLapsedAt(_) => 3,
    };
    let lease_index = match lease {
        LeaseWrite::Set => 0,
        LeaseWrite::Keep => 1,
        LeaseWrite::Clear => 2,
    };
    &texts[guard_index * LEASES.len() + lease_index]
}

fn write_transition_sql(guard: Guard, lease: LeaseWrite) -> String {
    let mut next = 7;
    let mut param = || {
        let name = format!("${next}");
        next += 1;
        name
    };
    let guard = match guard {
        Guard::None => String::new(),
        Guard::NotExpiredAt(_) => format!(" AND expires_at > {}", param()),
        Guard::ExpiredAt(_) => format!(" AND expires_at <= {}", param()),
        Guard::LeaseLapsedAt(_) => {
            let at = param();
            format!(" AND (lease_until IS NULL OR lease_until <= {at})")
        }
    };
    let lease = match lease {
        LeaseWrite::Set => format!("lease_executor = {}, lease_until = {}", param(), param()),
        LeaseWrite::Keep => "lease_executor = lease_executor, lease_until = lease_until".to_owned(),
        LeaseWrite::Clear => "lease_executor = NULL, lease_until = NULL".to_owned(),
    };
    format!(
        "UPDATE approvals SET state = $3, updated_at = $4, decision = COALESCE($5, decision), \
         output = COALESCE($6, output), {lease} WHERE approval_id = $1 AND state = $2{guard} RETURNING {}",
        record_columns!()
    )
}

/// How many parameters [`transition_sql`] takes.
pub(crate) fn transition_params(guard: Guard, lease: LeaseWrite) -> usize {
    6 + usize::from(guard_time(guard).is_some()) + if lease == LeaseWrite::Set { 2 } else { 0 }
}

/// The time a guard compares with, when it has one.
pub(crate) fn guard_time(guard: Guard) -> Option<i64> {
    match guard {
        Guard::None => None,
        Guard::NotExpiredAt(at) | Guard::ExpiredAt(at) | Guard::LeaseLapsedAt(at) => Some(at),
    }
}

/// The audit query with its filters as `$N` parameters, in the order
/// conversation id, since, after seq, the view's principal, limit (each only
/// when given).
pub(crate) fn audit_sql(query: &AuditQuery) -> String {
    let mut sql = concat!("SELECT ", event_columns!(), " FROM audit_events").to_owned();
    let mut next = 1;
    let mut filters = Vec::new();
    for (given, filter) in [
        (query.conversation_id.is_some(), "conversation_id = "),
        (query.since.is_some(), "at >= "),
        (query.after_seq.is_some(), "seq > "),
    ] {
        if given {
            filters.push(format!("{filter}${next}"));
            next += 1;
        }
    }
    match &query.view {
        AuditView::Principal(_) => {
            filters.push(format!(
                "(owner = ${next} OR approval_id IN (SELECT approval_id FROM audit_events \
                 WHERE principal = ${next} AND kind IN ('approved', 'denied', 'edited')))"
            ));
            next += 1;
        }
        AuditView::Anonymous => filters.push("owner IS NULL".to_owned()),
        AuditView::All => {}
        // Fail closed: a view this store does not know sees nothing.
        _ => filters.push("1 = 0".to_owned()),
    }
    if !filters.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&filters.join(" AND "));
    }
    sql.push_str(" ORDER BY seq");
    if query.limit.is_some() {
        sql.push_str(&format!(" LIMIT ${next}"));
    }
    sql
}

/// An audit limit as SQL takes it.
pub(crate) fn limit_param(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// Maps a database error: undecodable values are corrupt, the rest unavailable.
pub(crate) fn db_error(error: sqlx::Error) -> StoreError {
    match error {
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => StoreError::Corrupt(error.to_string()),
        error => StoreError::Unavailable(error.to_string()),
    }
}

fn to_json<T: serde::Serialize>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|error| StoreError::Corrupt(format!("cannot encode {what}: {error}")))
}

fn from_json<T: serde::de::DeserializeOwned>(text: &str, what: &str, id: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|error| StoreError::Corrupt(format!("{what} of `{id}`: {error}")))
}

/// The JSON text of an optional value.
pub(crate) fn json_opt<T: serde::Serialize>(value: Option<&T>, what: &str) -> Result<Option<String>, StoreError> {
    value.map(|value| to_json(value, what)).transpose()
}

/// The JSON columns of an approval as they are written.
pub(crate) struct RecordParams {
    pub(crate) input: String,
    pub(crate) decision: Option<String>,
    pub(crate) output: Option<String>,
}

impl RecordParams {
    pub(crate) fn new(record: &ApprovalRecord) -> Result<Self, StoreError> {
        Ok(Self {
            input: to_json(&record.input, "an approval input")?,
            decision: json_opt(record.decision.as_ref(), "a decision")?,
            output: json_opt(record.output.as_ref(), "an output")?,
        })
    }
}

/// An audit event's data as written.
pub(crate) fn event_data(event: &AuditEvent) -> Result<String, StoreError> {
    to_json(&event.data, "audit event data")
}

/// One row of `approvals`.
#[derive(sqlx::FromRow)]
pub(crate) struct RecordRow {
    approval_id: String,
    conversation_id: String,
    tool_call_id: String,
    tool_name: String,
    input: String,
    input_digest: String,
    issued_at: i64,
    expires_at: i64,
    state: String,
    decision: Option<String>,
    output: Option<String>,
    lease_executor: Option<String>,
    lease_until: Option<i64>,
    updated_at: i64,
}

impl RecordRow {
    /// The record this row stores.
    pub(crate) fn into_record(self) -> Result<ApprovalRecord, StoreError> {
        let id = self.approval_id;
        let state = ApprovalState::parse(&self.state)
            .ok_or_else(|| StoreError::Corrupt(format!("approval `{id}` has unknown state `{}`", self.state)))?;
        let lease = match (self.lease_executor, self.lease_until) {
            (Some(executor), Some(until)) => Some(Lease { executor, until }),
            (None, None) => None,
            _ => return Err(StoreError::Corrupt(format!("approval `{id}` has half a lease"))),
        };
        let decision: Option<RecordedDecision> =
            self.decision.as_deref().map(|text| from_json(text, "the decision", &id)).transpose()?;
        let output: Option<ToolResultOutput> =
            self.output.as_deref().map(|text| from_json(text, "the output", &id)).transpose()?;
        Ok(ApprovalRecord {
            input: from_json(&self.input, "the input", &id)?,
            approval_id: id,
            conversation_id: self.conversation_id,
            tool_call_id: self.tool_call_id,
            tool_name: self.tool_name,
            input_digest: self.input_digest,
            issued_at: self.issued_at,
            expires_at: self.expires_at,
            state,
            decision,
            output,
            lease,
            updated_at: self.updated_at,
        })
    }
}

/// One row of `audit_events`.
#[derive(sqlx::FromRow)]
pub(crate) struct EventRow {
    seq: i64,
    at: i64,
    kind: String,
    approval_id: String,
    tool_call_id: String,
    conversation_id: String,
    owner: Option<String>,
    principal: Option<String>,
    data: String,
}

impl EventRow {
    /// The event this row stores.
    pub(crate) fn into_event(self) -> Result<AuditEvent, StoreError> {
        let seq = self.seq;
        let kind = AuditKind::parse(&self.kind)
            .ok_or_else(|| StoreError::Corrupt(format!("audit event {seq} has unknown kind `{}`", self.kind)))?;
        let data: Value = from_json(&self.data, "the data", &format!("audit event {seq}"))?;
        Ok(AuditEvent {
            seq,
            at: self.at,
            kind,
            approval_id: self.approval_id,
            tool_call_id: self.tool_call_id,
            conversation_id: self.conversation_id,
            owner: self.owner,
            principal: self.principal,
            data,
        })
    }
}

/// One row of `conversations`.
#[derive(sqlx::FromRow)]
pub(crate) struct ConversationRow {
    conversation_id: String,
    messages: String,
    version: i64,
    updated_at: i64,
}

impl ConversationRow {
    /// The conversation this row stores.
    pub(crate) fn into_conversation(self) -> Result<StoredConversation, StoreError> {
        Ok(StoredConversation {
            messages: from_json(&self.messages, "the messages", &self.conversation_id)?,
            conversation_id: self.conversation_id,
            version: self.version,
            updated_at: self.updated_at,
        })
    }
}

/// One row of [`SELECT_CONVERSATION_WITH_DECISIONS`]: a decision's columns,
/// or (`part` 0) a conversation's id, version, update time and messages in
/// `id`, `created_at`, `expires_at` and `body`.
#[derive(sqlx::FromRow)]
pub(crate) struct ReadRow {
    part: i32,
    id: String,
    scope_kind: Option<String>,
    scope_key: Option<String>,
    tool_name: Option<String>,
    created_at: i64,
    expires_at: Option<i64>,
    body: String,
}

/// The conversation and decisions of [`SELECT_CONVERSATION_WITH_DECISIONS`]'s
/// rows. A conversation that does not decode fails the read; a decision that
/// does not decode fails only the decisions.
pub(crate) fn conversation_read(rows: Vec<ReadRow>) -> Result<ConversationRead, StoreError> {
    let mut conversation = None;
    let mut decisions = Vec::with_capacity(rows.len());
    for row in rows {
        if row.part == 0 {
            let stored = ConversationRow {
                conversation_id: row.id,
                messages: row.body,
                version: row.created_at,
                updated_at: row.expires_at.unwrap_or_default(),
            };
            conversation = Some(stored.into_conversation()?);
            continue;
        }
        let stored = DecisionRow {
            id: row.id,
            scope_kind: row.scope_kind.unwrap_or_default(),
            scope_key: row.scope_key,
            tool_name: row.tool_name.unwrap_or_default(),
            created_at: row.created_at,
            expires_at: row.expires_at,
            body: row.body,
        };
        decisions.push(stored.into_decision());
    }
    Ok(ConversationRead { conversation, decisions: decisions.into_iter().collect() })
}

/// The JSON text of a conversation's messages.
pub(crate) fn messages_text(messages: &Value) -> Result<String, StoreError> {
    to_json(messages, "conversation messages")
}

/// The JSON text of a sticky decision's body.
pub(crate) fn decision_body(decision: &StoredDecision) -> Result<String, StoreError> {
    to_json(&decision.body, "a sticky decision body")
}

/// One row of `decisions`.
#[derive(sqlx::FromRow)]
pub(crate) struct DecisionRow {
    id: String,
    scope_kind: String,
    scope_key: Option<String>,
    tool_name: String,
    created_at: i64,
    expires_at: Option<i64>,
    body: String,
}

impl DecisionRow {
    /// The sticky decision this row stores.
    pub(crate) fn into_decision(self) -> Result<StoredDecision, StoreError> {
        let id = self.id;
        let scope = DecisionScope::from_parts(&self.scope_kind, self.scope_key.clone()).ok_or_else(|| {
            let key = self.scope_key.as_ref().map_or_else(|| "no key".to_owned(), |key| format!("key `{key}`"));
            StoreError::Corrupt(format!("sticky decision `{id}` has scope kind `{}` with {key}", self.scope_kind))
        })?;
        Ok(StoredDecision {
            body: from_json(&self.body, "the body", &format!("sticky decision {id}"))?,
            id,
            scope,
            tool_name: self.tool_name,
            created_at: self.created_at,
            expires_at: self.expires_at,
        })
    }
}
