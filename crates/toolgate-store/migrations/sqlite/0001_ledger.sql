-- The approval ledger (SQLite). Keep in step with migrations/postgres.
-- JSON columns hold serde_json text as written (key order kept).

CREATE TABLE approvals (
    approval_id     TEXT    NOT NULL PRIMARY KEY,
    conversation_id TEXT    NOT NULL,
    tool_call_id    TEXT    NOT NULL,
    tool_name       TEXT    NOT NULL,
    input           TEXT    NOT NULL,
    input_digest    TEXT    NOT NULL,
    issued_at       INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN
        ('pending', 'approved', 'denied', 'expired', 'executing', 'executed', 'failed', 'interrupted')),
    decision        TEXT,
    output          TEXT,
    lease_executor  TEXT,
    lease_until     INTEGER,
    updated_at      INTEGER NOT NULL,
    CHECK ((lease_executor IS NULL) = (lease_until IS NULL))
) STRICT;

CREATE INDEX approvals_call ON approvals (conversation_id, tool_call_id);
CREATE INDEX approvals_state ON approvals (state);

CREATE TABLE audit_events (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    at              INTEGER NOT NULL,
    kind            TEXT    NOT NULL CHECK (kind IN
        ('issued', 'approved', 'denied', 'edited', 'executed', 'failed', 'expired', 'interrupted', 'rejected')),
    approval_id     TEXT    NOT NULL,
    tool_call_id    TEXT    NOT NULL,
    conversation_id TEXT    NOT NULL,
    principal       TEXT,
    data            TEXT    NOT NULL
) STRICT;

CREATE INDEX audit_events_conversation ON audit_events (conversation_id, seq);

CREATE TABLE conversations (
    conversation_id TEXT    NOT NULL PRIMARY KEY,
    messages        TEXT    NOT NULL,
    version         INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;
