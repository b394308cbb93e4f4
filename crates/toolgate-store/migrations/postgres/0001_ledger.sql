-- The approval ledger (Postgres). Keep in step with migrations/sqlite.
-- JSON columns are TEXT, not JSONB: JSONB reorders keys, and records must
-- read back exactly as written.

CREATE TABLE approvals (
    approval_id     TEXT   NOT NULL PRIMARY KEY,
    conversation_id TEXT   NOT NULL,
    tool_call_id    TEXT   NOT NULL,
    tool_name       TEXT   NOT NULL,
    input           TEXT   NOT NULL,
    input_digest    TEXT   NOT NULL,
    issued_at       BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    state           TEXT   NOT NULL CONSTRAINT approvals_state_name CHECK (state IN
        ('pending', 'approved', 'denied', 'expired', 'executing', 'executed', 'failed', 'interrupted')),
    decision        TEXT,
    output          TEXT,
    lease_executor  TEXT,
    lease_until     BIGINT,
    updated_at      BIGINT NOT NULL,
    CONSTRAINT approvals_lease_whole CHECK ((lease_executor IS NULL) = (lease_until IS NULL))
);

CREATE INDEX approvals_call ON approvals (conversation_id, tool_call_id);
CREATE INDEX approvals_state ON approvals (state);

CREATE TABLE audit_events (
    seq             BIGSERIAL PRIMARY KEY,
    at              BIGINT NOT NULL,
    kind            TEXT   NOT NULL CONSTRAINT audit_events_kind_name CHECK (kind IN
        ('issued', 'approved', 'denied', 'edited', 'executed', 'failed', 'expired', 'interrupted', 'rejected')),
    approval_id     TEXT   NOT NULL,
    tool_call_id    TEXT   NOT NULL,
    conversation_id TEXT   NOT NULL,
    principal       TEXT,
    data            TEXT   NOT NULL
);

CREATE INDEX audit_events_conversation ON audit_events (conversation_id, seq);

CREATE TABLE conversations (
    conversation_id TEXT   NOT NULL PRIMARY KEY,
    messages        TEXT   NOT NULL,
    version         BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
