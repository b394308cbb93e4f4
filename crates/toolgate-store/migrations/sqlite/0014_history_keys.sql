-- Keep in step with migrations/postgres.
-- History terms read the calls of a requester or of a conversation through
-- one index range each (`history_ops.rs`):
--
-- - a call's requester is its conversation's owner, else its principal:
--   `COALESCE(owner, principal)`; before, a term over a principal's calls
--   read two ranges of the owner index (owned, and unowned by principal);
-- - a conversation's key is its owner, the unit separator and its id, or the
--   id alone when it has no owner (`toolgate::ledger::conversation_key`);
--   before, a term over a conversation's calls read the whole window.
--
-- The indexes they replace are dropped: every append writes each index.

DROP INDEX audit_events_calls_owner;
DROP INDEX audit_events_calls_conversation;
CREATE INDEX audit_events_calls_requester ON audit_events (COALESCE(owner, principal), at)
    WHERE kind IN ('executed', 'allowed', 'failed', 'approved', 'interrupted');
CREATE INDEX audit_events_calls_key ON audit_events (COALESCE(owner || char(31), '') || conversation_id, at)
    WHERE kind IN ('executed', 'allowed', 'failed', 'approved', 'interrupted');
