-- Keep in step with migrations/postgres.
-- Designated approvers, quorum, the approvals inbox and server-side
-- continuations.
--
-- - `approvals` gains its routing (JSON, NULL without one), its votes (a
--   JSON array, NULL while there are none) and their count (what a vote's
--   conditional update compares with), why a person is asked (`reason`,
--   NULL when unknown), and the state `withdrawn`.
-- - `audit_events` admits the kinds `voted`, `withdrawn` and `continued`; a
--   vote is an answer in a principal's view of the log.
-- - `approval_viewers` lists, for every approval, the keys of who may see it
--   (its requester, '' for a conversation without owner; its approvers as
--   configured and their members at issue): an inbox walks one key's rows
--   newest first. Existing approvals have no routing: their one key is the
--   owner half of the conversation key (the text before its last unit
--   separator, char(31)), or ''.
-- - `continuations` marks the conversations due to continue on the server.
--   Every mark draws a new generation from `continuation_generations`, a
--   one-row counter that only counts up, so a generation is never drawn
--   twice, even after its conversation's row was deleted.
--
-- SQLite cannot alter a CHECK constraint: `approvals` and `audit_events` are
-- rebuilt (every row kept, `seq` values and the AUTOINCREMENT high-water mark
-- too) and their indexes recreated.

CREATE TABLE approvals_0005 (
    approval_id     TEXT    NOT NULL PRIMARY KEY,
    conversation_id TEXT    NOT NULL,
    tool_call_id    TEXT    NOT NULL,
    tool_name       TEXT    NOT NULL,
    input           TEXT    NOT NULL,
    input_digest    TEXT    NOT NULL,
    issued_at       INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN
        ('pending', 'approved', 'denied', 'expired', 'executing', 'executed', 'failed', 'interrupted', 'withdrawn')),
    decision        TEXT,
    output          TEXT,
    lease_executor  TEXT,
    lease_until     INTEGER,
    updated_at      INTEGER NOT NULL,
    routing         TEXT,
    votes           TEXT,
    vote_count      INTEGER NOT NULL DEFAULT 0,
    reason          TEXT,
    CHECK ((lease_executor IS NULL) = (lease_until IS NULL))
) STRICT;

INSERT INTO approvals_0005 (approval_id, conversation_id, tool_call_id, tool_name, input, input_digest, issued_at,
    expires_at, state, decision, output, lease_executor, lease_until, updated_at)
SELECT approval_id, conversation_id, tool_call_id, tool_name, input, input_digest, issued_at,
    expires_at, state, decision, output, lease_executor, lease_until, updated_at
FROM approvals;

DROP TABLE approvals;
ALTER TABLE approvals_0005 RENAME TO approvals;
CREATE INDEX approvals_call ON approvals (conversation_id, tool_call_id);
CREATE INDEX approvals_executing ON approvals (lease_executor) WHERE state = 'executing';

CREATE TABLE audit_events_0005 (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    at              INTEGER NOT NULL,
    kind            TEXT    NOT NULL CHECK (kind IN
        ('issued', 'approved', 'denied', 'edited', 'executed', 'failed', 'expired', 'interrupted', 'rejected',
         'voted', 'withdrawn', 'continued')),
    approval_id     TEXT    NOT NULL,
    tool_call_id    TEXT    NOT NULL,
    conversation_id TEXT    NOT NULL,
    principal       TEXT,
    data            TEXT    NOT NULL,
    owner           TEXT
) STRICT;

INSERT INTO audit_events_0005 (seq, at, kind, approval_id, tool_call_id, conversation_id, principal, data, owner)
SELECT seq, at, kind, approval_id, tool_call_id, conversation_id, principal, data, owner
FROM audit_events;

-- The new table's high-water mark is the old one's (pruned events may have
-- taken numbers above the highest left): no `seq` is ever drawn twice.
DELETE FROM sqlite_sequence WHERE name = 'audit_events_0005';
INSERT INTO sqlite_sequence (name, seq) SELECT 'audit_events_0005', seq FROM sqlite_sequence WHERE name = 'audit_events';

DROP TABLE audit_events;
-- Renaming the table renames its row of sqlite_sequence too.
ALTER TABLE audit_events_0005 RENAME TO audit_events;
CREATE INDEX audit_events_conversation ON audit_events (conversation_id, seq);
CREATE INDEX audit_events_owner ON audit_events (owner, seq);
CREATE INDEX audit_events_answers ON audit_events (principal) WHERE kind IN ('approved', 'denied', 'edited', 'voted');

CREATE TABLE approval_viewers (
    viewer      TEXT    NOT NULL,
    issued_at   INTEGER NOT NULL,
    approval_id TEXT    NOT NULL,
    PRIMARY KEY (viewer, issued_at, approval_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX approval_viewers_approval ON approval_viewers (approval_id);

-- rtrim(key, key without its separators) strips the key back to its last
-- separator: what is left, less that separator, is the owner.
INSERT INTO approval_viewers (viewer, issued_at, approval_id)
SELECT CASE WHEN instr(conversation_id, char(31)) = 0 THEN ''
            ELSE substr(rtrim(conversation_id, replace(conversation_id, char(31), '')), 1,
                        length(rtrim(conversation_id, replace(conversation_id, char(31), ''))) - 1) END,
       issued_at, approval_id
FROM approvals;

CREATE TABLE continuation_generations (
    id   INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    last INTEGER NOT NULL
) STRICT;

INSERT INTO continuation_generations (id, last) VALUES (1, 0);

CREATE TABLE continuations (
    conversation_id TEXT    NOT NULL PRIMARY KEY,
    generation      INTEGER NOT NULL,
    holder          TEXT,
    held_until      INTEGER,
    CHECK ((holder IS NULL) = (held_until IS NULL))
) STRICT;
