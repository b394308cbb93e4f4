-- Keep in step with migrations/postgres.
-- Conversations belong to their owner. Approvals, stored conversations and
-- conversation-scoped decisions are keyed by the conversation key (the id
-- alone for a conversation without owner, so every existing row keeps its
-- key: they all have none). Audit events record the owner beside the id, and
-- the log is read per owner and per answering principal.
ALTER TABLE audit_events ADD COLUMN owner TEXT;
CREATE INDEX audit_events_owner ON audit_events (owner, seq);
CREATE INDEX audit_events_answers ON audit_events (principal) WHERE kind IN ('approved', 'denied', 'edited');
