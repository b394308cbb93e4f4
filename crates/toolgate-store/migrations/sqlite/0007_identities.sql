-- Keep in step with migrations/postgres.
-- Identities are fields. The conversation key (`owner`, U+001F, `id`) stays
-- the binding key of approvals, stored conversations and deliveries, but
-- nothing reads an identity back out of it any more:
--
-- - `approvals` gains `owner` (the principal whose conversation it gates: the
--   requester) and `client` (the MCP client that asked, for gateway calls);
-- - `conversations` and `notifications` gain `owner`.
--
-- Rows written before this migration get their owner from their key, once,
-- here: the part before the key's last separator (ids never held control
-- characters, so the last separator is the owner's). `client` stays NULL for
-- them.

ALTER TABLE approvals ADD COLUMN owner TEXT;
ALTER TABLE approvals ADD COLUMN client TEXT;
ALTER TABLE conversations ADD COLUMN owner TEXT;
ALTER TABLE notifications ADD COLUMN owner TEXT;

-- The id is what follows the last U+001F: rtrim strips every character but
-- the separators from the right, leaving the owner and its separator.
UPDATE approvals SET owner = substr(rtrim(conversation_id, replace(conversation_id, char(31), '')), 1,
    length(rtrim(conversation_id, replace(conversation_id, char(31), ''))) - 1)
    WHERE instr(conversation_id, char(31)) > 0;
UPDATE conversations SET owner = substr(rtrim(conversation_id, replace(conversation_id, char(31), '')), 1,
    length(rtrim(conversation_id, replace(conversation_id, char(31), ''))) - 1)
    WHERE instr(conversation_id, char(31)) > 0;
UPDATE notifications SET owner = substr(rtrim(conversation_id, replace(conversation_id, char(31), '')), 1,
    length(rtrim(conversation_id, replace(conversation_id, char(31), ''))) - 1)
    WHERE instr(conversation_id, char(31)) > 0;
