-- Keep in step with migrations/sqlite.
-- A sub-agent's approval names where it comes from (`toolgate::agent`):
-- `approvals` gains `lineage`, the agent calls from the root conversation
-- down to the sub-run that made the call, as a JSON array of
-- `{agent, toolCallId}` (NULL for a call of the root, and for every row
-- before).

ALTER TABLE approvals ADD COLUMN lineage TEXT;
