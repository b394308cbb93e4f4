-- Keep in step with migrations/postgres.
-- Which path holds an approval is a field (`toolgate::ledger::Origin`), set
-- when it is issued, never read out of its ids:
--
-- - `approvals` gains `origin`: `chat` (a chat's conversation, AG-UI, a
--   sub-agent's run), `gateway` (a call the MCP gateway holds) or `calls` (a
--   call of the call-gating API), and `input_schema` (the JSON Schema the
--   API's caller said the input must pass, which an approver's edit must pass
--   too; NULL for every other approval).
--
-- Rows written before this migration get their origin once, here, from what
-- the paths wrote then: held calls (the gateway's and the API's) carried a
-- tool call id `held_…`, and the API's lived in conversations named `api:…`
-- (the key's part after its owner and the separator U+001F).

ALTER TABLE approvals ADD COLUMN origin TEXT NOT NULL DEFAULT 'chat'
    CHECK (origin IN ('chat', 'gateway', 'calls'));
ALTER TABLE approvals ADD COLUMN input_schema TEXT;

UPDATE approvals
SET origin = CASE
    WHEN substr(conversation_id, COALESCE(length(owner) + 2, 1), 4) = 'api:' THEN 'calls'
    ELSE 'gateway'
END
WHERE tool_call_id LIKE 'held\_%' ESCAPE '\';
