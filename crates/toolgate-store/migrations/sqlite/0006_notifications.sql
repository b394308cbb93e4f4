-- Keep in step with migrations/postgres.
-- Notifications, one-time approval links, escalation and reminders.
--
-- - `approvals` gains `timer_at`: when a pending routed approval's next
--   timer (escalation step, reminder, expiry) is due; NULL without one.
--   Pending routed approvals issued before this migration get their expiry.
-- - `audit_events` admits the kinds `escalated`, `reminded`, `notified` and
--   `notification_failed`.
-- - `notifications` is the outbox: one row per event, channel and
--   recipient, delivered at least once by whichever process claims it.
-- - `notify_cursor` holds the last audit event notifications were enqueued
--   for. An existing log starts after its last event: history is not
--   notified again.
-- - `link_uses` records each one-time link used, until the link expires.
-- - `approvals_newest` and `approvals_pending_newest` serve listings of every
--   approval (admins, single-user servers) newest first without a scan.
--
-- SQLite cannot alter a CHECK constraint: `audit_events` is rebuilt as in
-- 0005 (every row, the `seq` values and the AUTOINCREMENT high-water mark
-- kept) and its indexes recreated.

ALTER TABLE approvals ADD COLUMN timer_at INTEGER;
UPDATE approvals SET timer_at = expires_at WHERE state = 'pending' AND routing IS NOT NULL;
CREATE INDEX approvals_timer ON approvals (timer_at) WHERE state = 'pending' AND timer_at IS NOT NULL;
CREATE INDEX approvals_newest ON approvals (issued_at, approval_id);
CREATE INDEX approvals_pending_newest ON approvals (issued_at, approval_id) WHERE state = 'pending';

CREATE TABLE audit_events_0006 (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    at              INTEGER NOT NULL,
    kind            TEXT    NOT NULL CHECK (kind IN
        ('issued', 'approved', 'denied', 'edited', 'executed', 'failed', 'expired', 'interrupted', 'rejected',
         'voted', 'withdrawn', 'continued', 'escalated', 'reminded', 'notified', 'notification_failed')),
    approval_id     TEXT    NOT NULL,
    tool_call_id    TEXT    NOT NULL,
    conversation_id TEXT    NOT NULL,
    principal       TEXT,
    data            TEXT    NOT NULL,
    owner           TEXT
) STRICT;

INSERT INTO audit_events_0006 (seq, at, kind, approval_id, tool_call_id, conversation_id, principal, data, owner)
SELECT seq, at, kind, approval_id, tool_call_id, conversation_id, principal, data, owner
FROM audit_events;

DELETE FROM sqlite_sequence WHERE name = 'audit_events_0006';
INSERT INTO sqlite_sequence (name, seq) SELECT 'audit_events_0006', seq FROM sqlite_sequence WHERE name = 'audit_events';

DROP TABLE audit_events;
ALTER TABLE audit_events_0006 RENAME TO audit_events;
CREATE INDEX audit_events_conversation ON audit_events (conversation_id, seq);
CREATE INDEX audit_events_owner ON audit_events (owner, seq);
CREATE INDEX audit_events_answers ON audit_events (principal) WHERE kind IN ('approved', 'denied', 'edited', 'voted');

CREATE TABLE notifications (
    delivery_id      TEXT    NOT NULL PRIMARY KEY,
    event_id         TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    channel          TEXT    NOT NULL,
    recipient        TEXT,
    approval_id      TEXT    NOT NULL,
    conversation_id  TEXT    NOT NULL,
    tool_call_id     TEXT    NOT NULL,
    body             TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_at          INTEGER NOT NULL,
    first_attempt_at INTEGER,
    last_error       TEXT,
    holder           TEXT,
    held_until       INTEGER,
    CHECK ((holder IS NULL) = (held_until IS NULL))
) STRICT;

CREATE INDEX notifications_due ON notifications (next_at) WHERE state = 'pending';
CREATE INDEX notifications_approval ON notifications (approval_id, created_at);
CREATE INDEX notifications_ended ON notifications (next_at) WHERE state <> 'pending';

CREATE TABLE notify_cursor (
    id  INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
) STRICT;

INSERT INTO notify_cursor (id, seq) SELECT 1, COALESCE(MAX(seq), 0) FROM audit_events;

CREATE TABLE link_uses (
    link_id    TEXT    NOT NULL PRIMARY KEY,
    used_at    INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX link_uses_expiry ON link_uses (expires_at);
