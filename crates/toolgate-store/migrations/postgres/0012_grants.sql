-- Keep in step with migrations/sqlite.
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
--   naming it).

ALTER TABLE decisions
    ADD COLUMN uses_left BIGINT CONSTRAINT decisions_uses_left_not_negative CHECK (uses_left IS NULL OR uses_left >= 0),
    ADD COLUMN created_by TEXT;
UPDATE decisions SET created_by = body::jsonb ->> 'createdBy';
CREATE INDEX decisions_created_by ON decisions (created_by);

ALTER TABLE audit_events
    DROP CONSTRAINT audit_events_kind_name,
    ADD CONSTRAINT audit_events_kind_name CHECK (kind IN
        ('issued', 'approved', 'denied', 'edited', 'executed', 'failed', 'expired', 'interrupted', 'rejected',
         'voted', 'withdrawn', 'continued', 'escalated', 'reminded', 'notified', 'notification_failed',
         'superseded', 'allowed', 'shadowed', 'granted'));
