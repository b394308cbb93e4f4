-- Keep in step with migrations/sqlite.
-- An edit that needs other approvers becomes a new approval
-- (`toolgate::approval::lifecycle::supersede`):
--
-- - `approvals` admits the state `superseded` and gains `supersedes` (on the
--   new approval: the one it replaced) and `superseded_by` (on the replaced
--   one: its successor), both approval ids, NULL for every row before;
-- - `audit_events` admits the kind `superseded`.

ALTER TABLE approvals
    ADD COLUMN supersedes TEXT,
    ADD COLUMN superseded_by TEXT,
    DROP CONSTRAINT approvals_state_name,
    ADD CONSTRAINT approvals_state_name CHECK (state IN
        ('pending', 'approved', 'denied', 'expired', 'executing', 'executed', 'failed', 'interrupted', 'withdrawn',
         'superseded')),
    ADD CONSTRAINT approvals_superseded_linked CHECK ((superseded_by IS NULL) = (state <> 'superseded'));

ALTER TABLE audit_events
    DROP CONSTRAINT audit_events_kind_name,
    ADD CONSTRAINT audit_events_kind_name CHECK (kind IN
        ('issued', 'approved', 'denied', 'edited', 'executed', 'failed', 'expired', 'interrupted', 'rejected',
         'voted', 'withdrawn', 'continued', 'escalated', 'reminded', 'notified', 'notification_failed',
         'superseded'));
