-- Keep in step with migrations/postgres.
-- Rules that remember (history terms, `toolgate-policy`'s `history`):
--
-- - `audit_events` admits the kind `allowed` (a call a rule let run after
--   judging its history, recorded with that judgement just before it runs)
--   and `shadowed` (what a rule in shadow mode would have decided);
-- - the events that are calls are indexed by time, by owner and time, and by
--   conversation and time, so a history term reads its window, not the log.
--
-- SQLite cannot alter a CHECK constraint: the table is rebuilt as in 0008
-- (every row kept, `seq` values and the AUTOINCREMENT high-water mark too)
-- and its indexes recreated.

CREATE TABLE audit_events_0009 (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    at              INTEGER NOT NULL,
    kind            TEXT    NOT NULL CHECK (kind IN
        ('issued', 'approved', 'denied', 'edited', 'executed', 'failed', 'expired', 'interrupted', 'rejected',
         'voted', 'withdrawn', 'continued', 'escalated', 'reminded', 'notified', 'notification_failed',
         'superseded', 'allowed', 'shadowed')),
    approval_id     TEXT    NOT NULL,
    tool_call_id    TEXT    NOT NULL,
    conversation_id TEXT    NOT NULL,
    principal       TEXT,
    data            TEXT    NOT NULL,
    owner           TEXT
) STRICT;

INSERT INTO audit_events_0009 (seq, at, kind, approval_id, tool_call_id, conversation_id, principal, data, owner)
SELECT seq, at, kind, approval_id, tool_call_id, conversation_id, principal, data, owner
FROM audit_events;

DELETE FROM sqlite_sequence WHERE name = 'audit_events_0009';
INSERT INTO sqlite_sequence (name, seq) SELECT 'audit_events_0009', seq FROM sqlite_sequence WHERE name = 'audit_events';

DROP TABLE audit_events;
ALTER TABLE audit_events_0009 RENAME TO audit_events;
CREATE INDEX audit_events_conversation ON audit_events (conversation_id, seq);
CREATE INDEX audit_events_owner ON audit_events (owner, seq);
CREATE INDEX audit_events_answers ON audit_events (principal) WHERE kind IN ('approved', 'denied', 'edited', 'voted');
CREATE INDEX audit_events_calls ON audit_events (at)
    WHERE kind IN ('executed', 'allowed', 'failed', 'approved', 'interrupted');
CREATE INDEX audit_events_calls_owner ON audit_events (owner, at)
    WHERE kind IN ('executed', 'allowed', 'failed', 'approved', 'interrupted');
CREATE INDEX audit_events_calls_conversation ON audit_events (conversation_id, at)
    WHERE kind IN ('executed', 'allowed', 'failed', 'approved', 'interrupted');
