-- Keep in step with migrations/sqlite.
-- Rules that remember (history terms, `toolgate-policy`'s `history`):
--
-- - `audit_events` admits the kind `allowed` (a call a rule let run after
--   judging its history, recorded with that judgement just before it runs)
--   and `shadowed` (what a rule in shadow mode would have decided);
-- - the events that are calls are indexed by time, by owner and time, and by
--   conversation and time, so a history term reads its window, not the log.

ALTER TABLE audit_events
    DROP CONSTRAINT audit_events_kind_name,
    ADD CONSTRAINT audit_events_kind_name CHECK (kind IN
        ('issued', 'approved', 'denied', 'edited', 'executed', 'failed', 'expired', 'interrupted', 'rejected',
         'voted', 'withdrawn', 'continued', 'escalated', 'reminded', 'notified', 'notification_failed',
         'superseded', 'allowed', 'shadowed'));

CREATE INDEX audit_events_calls ON audit_events (at)
    WHERE kind IN ('executed', 'allowed', 'failed', 'approved', 'interrupted');
CREATE INDEX audit_events_calls_owner ON audit_events (owner, at)
    WHERE kind IN ('executed', 'allowed', 'failed', 'approved', 'interrupted');
CREATE INDEX audit_events_calls_conversation ON audit_events (conversation_id, at)
    WHERE kind IN ('executed', 'allowed', 'failed', 'approved', 'interrupted');
