-- Keep in step with migrations/sqlite.
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
--   separator, chr(31)), or ''.
-- - `continuations` marks the conversations due to continue on the server.
--   Every mark draws a new generation from the sequence
--   `continuation_generations`, so a generation is never drawn twice, even
--   after its conversation's row was deleted.

ALTER TABLE approvals
    ADD COLUMN routing    TEXT,
    ADD COLUMN votes      TEXT,
    ADD COLUMN vote_count INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN reason     TEXT,
    DROP CONSTRAINT approvals_state_name,
    ADD CONSTRAINT approvals_state_name CHECK (state IN
        ('pending', 'approved', 'denied', 'expired', 'executing', 'executed', 'failed', 'interrupted', 'withdrawn'));

ALTER TABLE audit_events
    DROP CONSTRAINT audit_events_kind_name,
    ADD CONSTRAINT audit_events_kind_name CHECK (kind IN
        ('issued', 'approved', 'denied', 'edited', 'executed', 'failed', 'expired', 'interrupted', 'rejected',
         'voted', 'withdrawn', 'continued'));

DROP INDEX audit_events_answers;
CREATE INDEX audit_events_answers ON audit_events (principal) WHERE kind IN ('approved', 'denied', 'edited', 'voted');

CREATE TABLE approval_viewers (
    viewer      TEXT   NOT NULL,
    issued_at   BIGINT NOT NULL,
    approval_id TEXT   NOT NULL,
    PRIMARY KEY (viewer, issued_at, approval_id)
);

CREATE INDEX approval_viewers_approval ON approval_viewers (approval_id);

-- The greedy `(.*)` runs to the last separator.
INSERT INTO approval_viewers (viewer, issued_at, approval_id)
SELECT COALESCE(substring(conversation_id FROM '^(.*)' || chr(31)), ''), issued_at, approval_id
FROM approvals;

CREATE SEQUENCE continuation_generations AS BIGINT;

CREATE TABLE continuations (
    conversation_id TEXT   NOT NULL PRIMARY KEY,
    generation      BIGINT NOT NULL,
    holder          TEXT,
    held_until      BIGINT,
    CONSTRAINT continuations_hold_whole CHECK ((holder IS NULL) = (held_until IS NULL))
);
