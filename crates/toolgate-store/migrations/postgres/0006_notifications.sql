-- Keep in step with migrations/sqlite.
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

ALTER TABLE approvals ADD COLUMN timer_at BIGINT;
UPDATE approvals SET timer_at = expires_at WHERE state = 'pending' AND routing IS NOT NULL;
CREATE INDEX approvals_timer ON approvals (timer_at) WHERE state = 'pending' AND timer_at IS NOT NULL;
CREATE INDEX approvals_newest ON approvals (issued_at, approval_id);
CREATE INDEX approvals_pending_newest ON approvals (issued_at, approval_id) WHERE state = 'pending';

ALTER TABLE audit_events
    DROP CONSTRAINT audit_events_kind_name,
    ADD CONSTRAINT audit_events_kind_name CHECK (kind IN
        ('issued', 'approved', 'denied', 'edited', 'executed', 'failed', 'expired', 'interrupted', 'rejected',
         'voted', 'withdrawn', 'continued', 'escalated', 'reminded', 'notified', 'notification_failed'));

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
    created_at       BIGINT  NOT NULL,
    state            TEXT    NOT NULL CONSTRAINT notifications_state_name CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_at          BIGINT  NOT NULL,
    first_attempt_at BIGINT,
    last_error       TEXT,
    holder           TEXT,
    held_until       BIGINT,
    CONSTRAINT notifications_hold_whole CHECK ((holder IS NULL) = (held_until IS NULL))
);

CREATE INDEX notifications_due ON notifications (next_at) WHERE state = 'pending';
CREATE INDEX notifications_approval ON notifications (approval_id, created_at);
CREATE INDEX notifications_ended ON notifications (next_at) WHERE state <> 'pending';

CREATE TABLE notify_cursor (
    id  INTEGER NOT NULL PRIMARY KEY CONSTRAINT notify_cursor_one_row CHECK (id = 1),
    seq BIGINT  NOT NULL
);

INSERT INTO notify_cursor (id, seq) SELECT 1, COALESCE(MAX(seq), 0) FROM audit_events;

CREATE TABLE link_uses (
    link_id    TEXT   NOT NULL PRIMARY KEY,
    used_at    BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE INDEX link_uses_expiry ON link_uses (expires_at);

ANALYZE approvals;
