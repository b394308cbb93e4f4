-- Keep in step with migrations/postgres.
-- An edit that needs other approvers becomes a new approval
-- (`toolgate::approval::lifecycle::supersede`):
--
-- - `approvals` admits the state `superseded` and gains `supersedes` (on the
--   new approval: the one it replaced) and `superseded_by` (on the replaced
--   one: its successor), both approval ids, NULL for every row before;
-- - `audit_events` admits the kind `superseded`.
--
-- SQLite cannot alter a CHECK constraint: both tables are rebuilt as in 0005
-- (every row kept, `seq` values and the AUTOINCREMENT high-water mark too)
-- and their indexes recreated.

CREATE TABLE approvals_0008 (
    approval_id     TEXT    NOT NULL PRIMARY KEY,
    conversation_id TEXT    NOT NULL,
    tool_call_id    TEXT    NOT NULL,
    tool_name       TEXT    NOT NULL,
    input           TEXT    NOT NULL,
    input_digest    TEXT    NOT NULL,
    issued_at       INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN
        ('pending', 'approved', 'denied', 'expired', 'executing', 'executed', 'failed', 'interrupted', 'withdrawn',
         'superseded')),
    decision        TEXT,
    output          TEXT,
    lease_executor  TEXT,
    lease_until     INTEGER,
    updated_at      INTEGER NOT NULL,
    routing         TEXT,
    votes           TEXT,
    vote_count      INTEGER NOT NULL DEFAULT 0,
    reason          TEXT,
    timer_at        INTEGER,
    owner           TEXT,
    client          TEXT,
    supersedes      TEXT,
    superseded_by   TEXT,
    CHECK ((lease_executor IS NULL) = (lease_until IS NULL)),
    CHECK ((superseded_by IS NULL) = (state <> 'superseded'))
) STRICT;

INSERT INTO approvals_0008 (approval_id, conversation_id, tool_call_id, tool_name, input, input_digest, issued_at,
    expires_at, state, decision, output, lease_executor, lease_until, updated_at, routing, votes, vote_count, reason,
    timer_at, owner, client)
SELECT approval_id, conversation_id, tool_call_id, tool_name, input, input_digest, issued_at,
    expires_at, state, decision, output, lease_executor, lease_until, updated_at, routing, votes, vote_count, reason,
    timer_at, owner, client
FROM approvals;

DROP TABLE approvals;
ALTER TABLE approvals_0008 RENAME TO approvals;
CREATE INDEX approvals_call ON approvals (conversation_id, tool_call_id);
CREATE INDEX approvals_executing ON approvals (lease_executor) WHERE state = 'executing';
CREATE INDEX approvals_timer ON approvals (timer_at) WHERE state = 'pending' AND timer_at IS NOT NULL;
CREATE INDEX approvals_newest ON approvals (issued_at, approval_id);
CREATE INDEX approvals_pending_newest ON approvals (issued_at, approval_id) WHERE state = 'pending';

CREATE TABLE audit_events_0008 (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    at              INTEGER NOT NULL,
    kind            TEXT    NOT NULL CHECK (kind IN
        ('issued', 'approved', 'denied', 'edited', 'executed', 'failed', 'expired', 'interrupted', 'rejected',
         'voted', 'withdrawn', 'continued', 'escalated', 'reminded', 'notified', 'notification_failed',
         'superseded')),
    approval_id     TEXT    NOT NULL,
    tool_call_id    TEXT    NOT NULL,
    conversation_id TEXT    NOT NULL,
    principal       TEXT,
    data            TEXT    NOT NULL,
    owner           TEXT
) STRICT;

INSERT INTO audit_events_0008 (seq, at, kind, approval_id, tool_call_id, conversation_id, principal, data, owner)
SELECT seq, at, kind, approval_id, tool_call_id, conversation_id, principal, data, owner
FROM audit_events;

DELETE FROM sqlite_sequence WHERE name = 'audit_events_0008';
INSERT INTO sqlite_sequence (name, seq) SELECT 'audit_events_0008', seq FROM sqlite_sequence WHERE name = 'audit_events';

DROP TABLE audit_events;
ALTER TABLE audit_events_0008 RENAME TO audit_events;
CREATE INDEX audit_events_conversation ON audit_events (conversation_id, seq);
CREATE INDEX audit_events_owner ON audit_events (owner, seq);
CREATE INDEX audit_events_answers ON audit_events (principal) WHERE kind IN ('approved', 'denied', 'edited', 'voted');
