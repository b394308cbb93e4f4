//! The SQL both backends share, and the mapping between rows and ledger types.
//!
//! Every statement here runs unchanged on SQLite and Postgres: both take `$N`
//! placeholders (SQLite reads `$1` as parameter 1, and the same name twice as
//! the same parameter).

use std::sync::OnceLock;

use serde_json::Value;
use toolgate::approval::lifecycle::{Routing, Vote};
use toolgate::ledger::{
    ApprovalQuery, ApprovalRecord, ApprovalState, AuditEvent, AuditKind, AuditQuery, AuditView, ConversationRead,
    DecisionScope, Guard, Lease, LineageStep, Origin, RecordedDecision, StateFilter, StoreError, StoredConversation,
    StoredDecision, Transition,
};
use toolgate_protocol::ToolResultOutput;

/// The columns of `approvals` a record reads, in [`RecordRow`] order
/// (`vote_count` is written with `votes`, never read).
macro_rules! record_columns {
    () => {
        "approval_id, conversation_id, tool_call_id, tool_name, input, input_digest, issued_at, expires_at, \
         state, decision, output, lease_executor, lease_until, updated_at, routing, votes, reason, owner, client, \
         supersedes, superseded_by, origin, input_schema, lineage"
    };
}

/// The columns of `audit_events`, in [`EventRow`] order.
macro_rules! event_columns {
    () => {
        "seq, at, kind, approval_id, tool_call_id, conversation_id, owner, principal, data"
    };
}

pub(crate) use event_columns;

/// The columns of `decisions` a [`DecisionRow`] reads, in its order.
macro_rules! decision_columns {
    () => {
        "id, scope_kind, scope_key, tool_name, created_at, expires_at, body, uses_left, created_by"
    };
}

pub(crate) use record_columns;

/// Inserts an approval unless its id is taken (then no row is affected):
/// [`record_columns!`] and `vote_count`.
pub(crate) const INSERT_RECORD: &str = concat!(
    "INSERT INTO approvals (",
    record_columns!(),
    ", vote_count, timer_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
     $18, $19, $20, $21, $22, $23, $24, $25, $26) ON CONFLICT (approval_id) DO NOTHING"
);

/// The parameters of [`INSERT_RECORD`] (`$1` is the approval id, `$7` its issue time).
pub(crate) const RECORD_PARAMS: usize = 26;

/// The most viewer keys one insert statement holds ([`VIEWER_PARAMS`] parameters each).
pub(crate) const VIEWERS_PER_INSERT: usize = 500;

/// The parameters of one viewer row: viewer, issue time, approval id.
pub(crate) const VIEWER_PARAMS: usize = 3;

/// The columns a viewer insert writes, in the order of [`viewer_rows`].
pub(crate) const VIEWER_INSERT_COLUMNS: &str = "viewer, issued_at, approval_id";

/// The `VALUES` rows of `count` viewers of several approvals: a viewer, its
/// approval's issue time and id per row, numbered from `$first`.
pub(crate) fn viewer_rows(count: usize, first: usize) -> String {
    let rows: Vec<String> = (0..count)
        .map(|row| {
            let start = first + row * VIEWER_PARAMS;
            format!("(${start}, ${}, ${})", start + 1, start + 2)
        })
        .collect();
    rows.join(", ")
}

/// The `VALUES` rows of `count` viewers of the approval [`INSERT_RECORD`]
/// inserts: one parameter per viewer, numbered from `$first`, beside the
/// record's issue time (`$7`) and id (`$1`).
pub(crate) fn record_viewer_rows(count: usize, first: usize) -> String {
    let rows: Vec<String> = (first..first + count).map(|n| format!("(${n}, $7, $1)")).collect();
    rows.join(", ")
}

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

/// Prunes up to [`PRUNE_CHUNK`] approvals in a final state last changed
/// before `$1` (a superseded one only once its successor is no longer open:
/// the call is found through it); returns their ids (their viewers go in the
/// same transaction).
pub(crate) const PRUNE_APPROVALS: &str = "DELETE FROM approvals WHERE approval_id IN (SELECT approval_id \
     FROM approvals WHERE updated_at < $1 \
     AND (state IN ('denied', 'expired', 'executed', 'failed', 'interrupted', 'withdrawn') \
     OR (state = 'superseded' AND superseded_by NOT IN \
     (SELECT approval_id FROM approvals WHERE state IN ('pending', 'approved', 'executing')))) LIMIT $2) \
     RETURNING approval_id";

/// Prunes up to [`PRUNE_CHUNK`] conversations last saved before `$1` that hold no open approval.
pub(crate) const PRUNE_CONVERSATIONS: &str = "DELETE FROM conversations WHERE conversation_id IN \
     (SELECT conversation_id FROM conversations WHERE updated_at < $1 AND conversation_id NOT IN \
     (SELECT conversation_id FROM approvals WHERE state IN ('pending', 'approved', 'executing')) LIMIT $2)";

/// The newest schema migration applied (sqlx's own table, on both databases).
pub(crate) const NEWEST_MIGRATION: &str = "SELECT MAX(version) FROM _sqlx_migrations WHERE success";

/// How many approvals are pending (the partial index on pending ones serves it).
pub(crate) const COUNT_PENDING: &str = "SELECT COUNT(*) FROM approvals WHERE state = 'pending'";

/// One stored conversation.
pub(crate) const SELECT_CONVERSATION: &str =
    "SELECT conversation_id, owner, messages, version, updated_at FROM conversations WHERE conversation_id = $1";

/// Creates a conversation at version 1, owned by `$4`, unless it exists.
pub(crate) const CREATE_CONVERSATION: &str = "INSERT INTO conversations (conversation_id, messages, version, updated_at, \
     owner) VALUES ($1, $2, 1, $3, $4) ON CONFLICT (conversation_id) DO NOTHING";

/// Saves a conversation over the version the writer read.
pub(crate) const UPDATE_CONVERSATION: &str = "UPDATE conversations SET messages = $2, version = version + 1, \
     updated_at = $3 WHERE conversation_id = $1 AND version = $4";

/// Saves a sticky decision unless its id is taken (then no row is affected);
/// the store assigns `seq`.
pub(crate) const INSERT_DECISION: &str = concat!(
    "INSERT INTO decisions (",
    decision_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING"
);

/// The condition on `decisions` that selects the ones live at `$1` that are
/// global, or scoped to the conversation `$2` or the principal `$3` (a NULL
/// one matches nothing).
macro_rules! decisions_that_apply {
    () => {
        "(expires_at IS NULL OR expires_at > $1) AND (uses_left IS NULL OR uses_left > 0) AND (scope_kind = 'global' \
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
/// (`part` 1), oldest first, in [`ReadRow`]'s columns (a conversation's
/// owner in `scope_key`).
pub(crate) const SELECT_CONVERSATION_WITH_DECISIONS: &str = concat!(
    "SELECT 0 AS part, conversation_id AS id, NULL AS scope_kind, owner AS scope_key, NULL AS tool_name, \
     version AS created_at, updated_at AS expires_at, messages AS body, NULL AS uses_left, NULL AS created_by, 0 AS seq \
     FROM conversations WHERE conversation_id = $4 UNION ALL SELECT 1, ",
    decision_columns!(),
    ", seq FROM decisions WHERE ",
    decisions_that_apply!(),
    " ORDER BY part, created_at, seq"
);

/// Spends one use of the decision `$1` if it is live at `$2` (a NULL limit
/// stays NULL) and returns its row after; no row when it is not live.
pub(crate) const USE_DECISION: &str = concat!(
    "UPDATE decisions SET uses_left = uses_left - 1 WHERE id = $1 AND (expires_at IS NULL OR expires_at > $2) \
     AND (uses_left IS NULL OR uses_left > 0) RETURNING ",
    decision_columns!()
);

/// The decisions live at `$1` (a use left, not expired), oldest first.
macro_rules! live_decisions {
    () => {
        concat!(
            "SELECT ",
            decision_columns!(),
            " FROM decisions WHERE (expires_at IS NULL OR expires_at > $1) AND (uses_left IS NULL OR uses_left > 0)"
        )
    };
}

/// Every live decision (`$1` now), oldest first.
pub(crate) const SELECT_LIVE_DECISIONS: &str = concat!(live_decisions!(), " ORDER BY created_at, seq");

/// The live decisions (`$1` now) made by `$2`, oldest first.
pub(crate) const SELECT_DECISIONS_BY: &str =
    concat!(live_decisions!(), " AND created_by = $2 ORDER BY created_at, seq");

/// Removes one sticky decision and returns its row.
pub(crate) const DELETE_DECISION: &str = concat!("DELETE FROM decisions WHERE id = $1 RETURNING ", decision_columns!());

/// The newest-first order of an inbox listing.
const NEWEST_FIRST: &str = "ORDER BY issued_at DESC, approval_id DESC";

/// The condition on an approval's `state` (named `column`) of an inbox
/// listing's states; `None` for every state.
fn state_condition(states: StateFilter, column: &str) -> Option<String> {
    match states {
        StateFilter::Pending => Some(format!("{column} = 'pending'")),
        StateFilter::Decided => Some(format!("{column} <> 'pending'")),
        StateFilter::All => None,
        // Fail closed: a filter this store does not know admits nothing.
        _ => Some("1 = 0".to_owned()),
    }
}

/// The most viewer keys a listing walks one by one (see [`list_sql`]; SQLite
/// allows 500 terms in a compound `SELECT`).
const MAX_KEY_WALKS: usize = 64;

/// An inbox listing ([`ApprovalQuery`]) for `keys` distinct viewer keys (all
/// approvals when `None`). Parameters: the keys, then the conversation when
/// the query names one, then a conversation name (twice: the name, and the
/// owner's separator before it), then the limit.
///
/// - Without keys, the approvals of the states asked (of the conversation, on
///   its index), newest first.
/// - With keys and a conversation, the conversation's approvals (on its
///   index) that have a viewer row with one of the keys.
/// - With keys alone, each key's newest approvals of the states asked, up to
///   the limit, walking that key's `approval_viewers` rows backwards from the
///   newest (its primary key is `(viewer, issued_at, approval_id)`, so a key
///   reads only as many rows as it shows), then the newest of those (each
///   once: `UNION` leaves out the approvals several keys found). More than
///   [`MAX_KEY_WALKS`] keys are looked up per approval instead, as with a
///   conversation (a scan of the approvals of the states asked).
pub(crate) fn list_sql(query: &ApprovalQuery, keys: Option<usize>) -> String {
    let columns = record_columns!();
    let key_count = keys.unwrap_or(0);
    let conversation = query.conversation_id.as_ref().map(|_| format!("${}", key_count + 1));
    let mut next = key_count + 1 + usize::from(conversation.is_some());
    // A conversation name binds the name, then the owner's separator and the name, then both followed by the
    // sub-run separator: an approval names it when its key is the name (no owner) or its stored owner, the
    // separator and the name; or, for a sub-agent's approval (with a lineage), when its key starts with one of
    // those and the sub-run separator (its root conversation's key, see `toolgate::agent`).
    let named = query.conversation_name.as_ref().map(|_| {
        next += 4;
        (format!("${}", next - 4), format!("${}", next - 3), format!("${}", next - 2), format!("${}", next - 1))
    });
    let limit = format!("${next}");
    let mut filters: Vec<String> = state_condition(query.states, "state").into_iter().collect();
    if let Some(conversation) = &conversation {
        filters.push(format!("conversation_id = {conversation}"));
    }
    if let Some((name, owned, sub, owned_sub)) = &named {
        filters.push(format!(
            "((owner IS NULL AND conversation_id = {name}) \
             OR (owner IS NOT NULL AND conversation_id = owner || {owned}) \
             OR (lineage IS NOT NULL AND ((owner IS NULL \
                 AND substr(conversation_id, 1, length(CAST({sub} AS TEXT))) = {sub}) \
             OR (owner IS NOT NULL \
                 AND substr(conversation_id, 1, length(owner) + length(CAST({owned_sub} AS TEXT))) = owner || {owned_sub}))))"
        ));
    }
    let walk = keys.is_some_and(|keys| keys <= MAX_KEY_WALKS) && conversation.is_none() && named.is_none();
    if !walk {
        if keys.is_some() {
            let params: Vec<String> = (1..=key_count).map(|n| format!("${n}")).collect();
            filters.push(format!(
                "EXISTS (SELECT 1 FROM approval_viewers v WHERE v.approval_id = approvals.approval_id \
                 AND v.viewer IN ({}))",
                params.join(", ")
            ));
        }
        let filter = if filters.is_empty() { String::new() } else { format!(" WHERE {}", filters.join(" AND ")) };
        return format!("SELECT {columns} FROM approvals{filter} {NEWEST_FIRST} LIMIT {limit}");
    }
    let state = state_condition(query.states, "a.state").map_or_else(String::new, |state| {
        format!(" AND EXISTS (SELECT 1 FROM approvals a WHERE a.approval_id = v.approval_id AND {state})")
    });
    let walks: Vec<String> = (1..=key_count)
        .map(|n| {
            format!(
                "SELECT * FROM (SELECT v.issued_at, v.approval_id FROM approval_viewers v \
                 WHERE v.viewer = ${n}{state} ORDER BY v.issued_at DESC, v.approval_id DESC \
                 LIMIT {limit}) AS key{n}"
            )
        })
        .collect();
    format!(
        "SELECT {columns} FROM approvals WHERE approval_id IN (SELECT approval_id FROM ({}) AS keyed \
         {NEWEST_FIRST} LIMIT {limit}) {NEWEST_FIRST}",
        walks.join(" UNION ")
    )
}

/// The conversations due to continue that nobody holds at `$1`, oldest mark first, at most `$2`.
pub(crate) const DUE_CONTINUATIONS: &str = "SELECT conversation_id FROM continuations \
     WHERE holder IS NULL OR held_until <= $1 ORDER BY generation LIMIT $2";

/// Claims the mark of conversation `$1` for executor `$2` until `$3`, unless
/// another executor holds it at `$4`; returns its generation.
pub(crate) const CLAIM_CONTINUATION: &str = "UPDATE continuations SET holder = $2, held_until = $3 \
     WHERE conversation_id = $1 AND (holder IS NULL OR holder = $2 OR held_until <= $4) RETURNING generation";

/// Clears the mark of conversation `$1` if its generation is still `$2` and
/// nobody but executor `$3` holds it.
pub(crate) const FINISH_CONTINUATION: &str = "DELETE FROM continuations \
     WHERE conversation_id = $1 AND generation = $2 AND (holder IS NULL OR holder = $3) RETURNING generation";

/// Releases the mark of conversation `$1` if executor `$2` holds it.
pub(crate) const RELEASE_CONTINUATION: &str = "UPDATE continuations SET holder = NULL, held_until = NULL \
     WHERE conversation_id = $1 AND holder = $2 RETURNING generation";

/// The generation of conversation `$1`'s mark, when it has one.
pub(crate) const CONTINUATION_GENERATION: &str = "SELECT generation FROM continuations WHERE conversation_id = $1";

/// Marks conversation `$1` due with the generation `$generation` (the
/// backend's next one: an SQL expression), keeping any holder.
macro_rules! mark_due_sql {
    ($generation:expr) => {
        concat!(
            "INSERT INTO continuations (conversation_id, generation) VALUES ($1, ",
            $generation,
            ") ON CONFLICT (conversation_id) DO UPDATE SET generation = excluded.generation"
        )
    };
}

/// Whether the existing mark may be claimed by executor `$2` at `$4` (in an upsert of `continuations`).
macro_rules! claimable {
    () => {
        "continuations.holder IS NULL OR continuations.holder = $2 OR continuations.held_until <= $4"
    };
}

/// Marks conversation `$1` due with the generation `$generation` (as
/// [`mark_due_sql!`]) and claims it for executor `$2` until `$3`, unless
/// another executor holds it at `$4`: one upsert. Returns the generation and
/// whether `$2` holds it now.
macro_rules! mark_and_claim_sql {
    ($generation:expr) => {
        concat!(
            "INSERT INTO continuations (conversation_id, generation, holder, held_until) VALUES ($1, ",
            $generation,
            ", $2, $3) ON CONFLICT (conversation_id) DO UPDATE SET generation = excluded.generation, \
             holder = CASE WHEN ",
            $crate::sql::claimable!(),
            " THEN excluded.holder ELSE continuations.holder END, held_until = CASE WHEN ",
            $crate::sql::claimable!(),
            " THEN excluded.held_until ELSE continuations.held_until END RETURNING generation, holder = $2"
        )
    };
}

pub(crate) use {claimable, mark_and_claim_sql, mark_due_sql};

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

/// Whether a transition writes the votes (and their count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VotesWrite {
    /// It replaces them (`Update::votes`).
    Set,
    /// It keeps them.
    Keep,
}

impl VotesWrite {
    pub(crate) fn of(transition: &Transition) -> Self {
        if transition.update.votes.is_some() { Self::Set } else { Self::Keep }
    }
}

/// The guards [`transition_sql`] writes, in the order of its table.
const GUARDS: [Guard; 5] = [
    Guard::None,
    Guard::NotExpiredAt(0),
    Guard::ExpiredAt(0),
    Guard::LeaseLapsedAt(0),
    Guard::Votes { count: 0, at: 0 },
];

/// The conditional update of one transition. Parameters: `$1` approval id,
/// `$2` from, `$3` to, `$4` at, `$5` decision or NULL, `$6` output or NULL,
/// `$7` the successor (`superseded_by`) or NULL, then the guard's values ([`guard_values`]), then the lease executor and
/// until when it sets one, then the votes and their count when it writes
/// them. Returns the updated row. Each of the thirty guard, lease and votes
/// shapes is written once per process.
pub(crate) fn transition_sql(guard: Guard, lease: LeaseWrite, votes: VotesWrite) -> &'static str {
    static TEXTS: OnceLock<Vec<String>> = OnceLock::new();
    const LEASES: [LeaseWrite; 3] = [LeaseWrite::Set, LeaseWrite::Keep, LeaseWrite::Clear];
    const VOTES: [VotesWrite; 2] = [VotesWrite::Keep, VotesWrite::Set];
    let texts = TEXTS.get_or_init(|| {
        let mut texts = Vec::with_capacity(GUARDS.len() * LEASES.len() * VOTES.len());
        for guard in GUARDS {
            for lease in LEASES {
                texts.extend(VOTES.iter().map(|votes| write_transition_sql(guard, lease, *votes)));
            }
        }
        texts
    });
    let guard_index = match guard {
        Guard::None => 0,
        Guard::NotExpiredAt(_) => 1,
        Guard::ExpiredAt(_) => 2,
        Guard::LeaseLapsedAt(_) => 3,
        Guard::Votes { .. } => 4,
    };
    let lease_index = match lease {
        LeaseWrite::Set => 0,
        LeaseWrite::Keep => 1,
        LeaseWrite::Clear => 2,
    };
    let votes_index = usize::from(votes == VotesWrite::Set);
    &texts[(guard_index * LEASES.len() + lease_index) * VOTES.len() + votes_index]
}

fn write_transition_sql(guard: Guard, lease: LeaseWrite, votes: VotesWrite) -> String {
    let mut next = 8;
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
        Guard::Votes { .. } => {
            let count = param();
            format!(" AND vote_count = {count} AND expires_at > {}", param())
        }
    };
    let lease = match lease {
        LeaseWrite::Set => format!("lease_executor = {}, lease_until = {}", param(), param()),
        LeaseWrite::Keep => "lease_executor = lease_executor, lease_until = lease_until".to_owned(),
        LeaseWrite::Clear => "lease_executor = NULL, lease_until = NULL".to_owned(),
    };
    let votes = match votes {
        VotesWrite::Set => format!(", votes = {}, vote_count = {}", param(), param()),
        VotesWrite::Keep => String::new(),
    };
    format!(
        "UPDATE approvals SET state = $3, updated_at = $4, decision = COALESCE($5, decision), \
         output = COALESCE($6, output), superseded_by = COALESCE($7, superseded_by), {lease}{votes} WHERE approval_id = $1 AND state = $2{guard} RETURNING {}",
        record_columns!()
    )
}

/// How many parameters [`transition_sql`] takes.
pub(crate) fn transition_params(guard: Guard, lease: LeaseWrite, votes: VotesWrite) -> usize {
    7 + guard_values(guard).iter().flatten().count()
        + if lease == LeaseWrite::Set { 2 } else { 0 }
        + if votes == VotesWrite::Set { 2 } else { 0 }
}

/// The values a guard compares with, in the order [`transition_sql`] binds them.
pub(crate) fn guard_values(guard: Guard) -> [Option<i64>; 2] {
    match guard {
        Guard::None => [None, None],
        Guard::NotExpiredAt(at) | Guard::ExpiredAt(at) | Guard::LeaseLapsedAt(at) => [Some(at), None],
        Guard::Votes { count, at } => [Some(i64::from(count)), Some(at)],
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
                 WHERE principal = ${next} AND approval_id <> '' \
                 AND kind IN ('approved', 'denied', 'edited', 'voted')))"
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

/// The JSON columns of an approval as they are written, and its viewers.
pub(crate) struct RecordParams {
    pub(crate) input: String,
    pub(crate) decision: Option<String>,
    pub(crate) output: Option<String>,
    pub(crate) routing: Option<String>,
    pub(crate) votes: Option<String>,
    pub(crate) input_schema: Option<String>,
    pub(crate) vote_count: i64,
    /// The lineage as written: a JSON array, or NULL for a call of the root.
    pub(crate) lineage: Option<String>,
    /// When its next timer is due (`toolgate::approval::lifecycle::next_due`).
    pub(crate) timer_at: Option<i64>,
    /// Its keys in `approval_viewers` ([`toolgate::approval::lifecycle::viewers`]).
    pub(crate) viewers: Vec<String>,
}

impl RecordParams {
    pub(crate) fn new(record: &ApprovalRecord) -> Result<Self, StoreError> {
        Ok(Self {
            input: to_json(&record.input, "an approval input")?,
            decision: json_opt(record.decision.as_ref(), "a decision")?,
            output: json_opt(record.output.as_ref(), "an output")?,
            routing: json_opt(record.routing.as_ref(), "a routing")?,
            votes: votes_text(&record.votes)?,
            input_schema: json_opt(record.input_schema.as_ref(), "an input schema")?,
            vote_count: vote_count(&record.votes),
            lineage: if record.lineage.is_empty() { None } else { Some(to_json(&record.lineage, "a lineage")?) },
            // The time its timer is stored with.
            timer_at: toolgate::approval::lifecycle::next_due(record),
            viewers: toolgate::approval::lifecycle::viewers(record),
        })
    }
}

/// The votes as written: a JSON array, or NULL when there are none.
pub(crate) fn votes_text(votes: &[Vote]) -> Result<Option<String>, StoreError> {
    if votes.is_empty() { Ok(None) } else { to_json(&votes, "votes").map(Some) }
}

/// The `vote_count` of these votes.
pub(crate) fn vote_count(votes: &[Vote]) -> i64 {
    i64::try_from(votes.len()).unwrap_or(i64::MAX)
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
    routing: Option<String>,
    votes: Option<String>,
    reason: Option<String>,
    owner: Option<String>,
    client: Option<String>,
    supersedes: Option<String>,
    superseded_by: Option<String>,
    origin: String,
    input_schema: Option<String>,
    lineage: Option<String>,
}

crate::lite::from_lite_row!(RecordRow {
    approval_id,
    conversation_id,
    tool_call_id,
    tool_name,
    input,
    input_digest,
    issued_at,
    expires_at,
    state,
    decision,
    output,
    lease_executor,
    lease_until,
    updated_at,
    routing,
    votes,
    reason,
    owner,
    client,
    supersedes,
    superseded_by,
    origin,
    input_schema,
    lineage
});

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
        let routing: Option<Routing> =
            self.routing.as_deref().map(|text| from_json(text, "the routing", &id)).transpose()?;
        let votes: Vec<Vote> =
            self.votes.as_deref().map(|text| from_json(text, "the votes", &id)).transpose()?.unwrap_or_default();
        let origin = Origin::parse(&self.origin)
            .ok_or_else(|| StoreError::Corrupt(format!("approval `{id}` has unknown origin `{}`", self.origin)))?;
        let input_schema: Option<Value> =
            self.input_schema.as_deref().map(|text| from_json(text, "the input schema", &id)).transpose()?;
        let lineage: Vec<LineageStep> =
            self.lineage.as_deref().map(|text| from_json(text, "the lineage", &id)).transpose()?.unwrap_or_default();
        Ok(ApprovalRecord {
            input: from_json(&self.input, "the input", &id)?,
            approval_id: id,
            conversation_id: self.conversation_id,
            owner: self.owner,
            client: self.client,
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
            routing,
            votes,
            reason: self.reason,
            supersedes: self.supersedes,
            superseded_by: self.superseded_by,
            origin,
            input_schema,
            lineage,
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

crate::lite::from_lite_row!(EventRow {
    seq,
    at,
    kind,
    approval_id,
    tool_call_id,
    conversation_id,
    owner,
    principal,
    data
});

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
    owner: Option<String>,
    messages: String,
    version: i64,
    updated_at: i64,
}

crate::lite::from_lite_row!(ConversationRow { conversation_id, owner, messages, version, updated_at });

impl ConversationRow {
    /// The conversation this row stores.
    pub(crate) fn into_conversation(self) -> Result<StoredConversation, StoreError> {
        Ok(StoredConversation {
            messages: from_json(&self.messages, "the messages", &self.conversation_id)?,
            conversation_id: self.conversation_id,
            owner: self.owner,
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
    uses_left: Option<i64>,
    created_by: Option<String>,
}

crate::lite::from_lite_row!(ReadRow {
    part,
    id,
    scope_kind,
    scope_key,
    tool_name,
    created_at,
    expires_at,
    body,
    uses_left,
    created_by
});

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
                owner: row.scope_key,
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
            uses_left: row.uses_left,
            created_by: row.created_by,
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
    uses_left: Option<i64>,
    created_by: Option<String>,
}

crate::lite::from_lite_row!(DecisionRow {
    id,
    scope_kind,
    scope_key,
    tool_name,
    created_at,
    expires_at,
    body,
    uses_left,
    created_by
});

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
            uses_left: self.uses_left,
            created_by: self.created_by,
        })
    }
}
