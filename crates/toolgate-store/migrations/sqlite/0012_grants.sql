-- Keep in step with migrations/postgres.
-- Grants: bounded approvals (`toolgate::approval::lifecycle::grant`).
--
-- - A grant is a sticky decision that allows, with a use limit: `uses_left`
--   counts the calls it may still let run (NULL: no limit), spent one at a
--   time by one conditional UPDATE. Every decision stored before this
--   migration keeps NULL: an "always allow" decision is now a grant without
--   a use limit (one concept, not two), and a "never allow" one stays a deny.
-- - `created_by` is who made a decision, as a column (indexed): copied from
--   each stored body's `createdBy`, so people list and revoke the grants
--   they made (`GET /api/grants`).
-- - `audit_events` admits the kind `granted` (a call that ran on a grant,
--   naming it). SQLite cannot alter a CHECK constraint: the table is rebuilt
--   as in 0009 (every row, `seq` and the AUTOINCREMENT high-water mark kept)
--   and its indexes recreated.

ALTER TABLE decisions ADD COLUMN uses_left INTEGER CHECK (uses_left IS NULL OR uses_left >= 0);
ALTER TABLE decisions ADD COLUMN created_by TEXT;
UPDATE decisions SET created_by = json_extract(body, '$.createdBy');
CREATE INDEX decisions_created_by ON decisions (created_by);

CREATE TABLE audit_events_0012 (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    at              INTEGER NOT NULL,
    kind            TEXT    NOT NULL CHECK (kind IN
        ('issued', 'approved', 'denied', 'edited', 'executed', 'failed', 'expired', 'interrupted', 'rejected',
         'voted', 'withdrawn', 'continued', 'escalated', 'reminded', 'notified', 'notification_failed',
         'superseded', 'allowed', 'shadowed', 'granted')),
    approval_id     TEXT    NOT NULL,
    tool_call_id    TEXT    NOT NULL,
    conversation_id TEXT    NOT NULL,
    principal       TEXT,
    data            TEXT    NOT NULL,
    owner           TEXT
) STRICT;

INSERT INTO audit_events_0012 (seq, at, kind, approval_id, tool_call_id, conversation_id, principal, data, owner)
SELECT seq, at, kind, approval_id, tool_call_id, conversation_id, principal, data, owner
FROM audit_events;

DELETE FROM sqlite_sequence WHERE name = 'audit_events_0012';
INSERT INTO sqlite_sequence (name, seq) SELECT 'audit_events_0012', seq FROM sqlite_sequence WHERE name = 'audit_events';

DROP TABLE audit_events;
ALTER TABLE audit_events_0012 RENAME TO audit_events;
CREATE INDEX audit_events_conversation ON audit_events (conversation_id, seq);
CREATE INDEX audit_events_owner ON audit_events (owner, seq);
CREATE INDEX audit_events_answers ON audit_events (principal) WHERE kind IN ('approved', 'denied', 'edited', 'voted');
CREATE INDEX audit_events_calls ON audit_events (at)
    WHERE kind IN ('executed', 'allowed', 'failed', 'approved', 'interrupted');
CREATE INDEX audit_events_calls_owner ON audit_events (owner, at)
    WHERE kind IN ('executed', 'allowed', 'failed', 'approved', 'interrupted');
CREATE INDEX audit_events_calls_conversation ON audit_events (conversation_id, at)
    WHERE kind IN ('executed', 'allowed', 'failed', 'approved', 'interrupted');
