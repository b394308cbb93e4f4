-- Keep in step with migrations/sqlite.
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

UPDATE approvals SET owner = substring(conversation_id FROM E'^(.*)\x1f') WHERE position(E'\x1f' IN conversation_id) > 0;
UPDATE conversations SET owner = substring(conversation_id FROM E'^(.*)\x1f') WHERE position(E'\x1f' IN conversation_id) > 0;
UPDATE notifications SET owner = substring(conversation_id FROM E'^(.*)\x1f') WHERE position(E'\x1f' IN conversation_id) > 0;
