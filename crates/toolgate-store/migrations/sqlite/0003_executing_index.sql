-- Keep in step with migrations/postgres.
-- Smaller writes: the index on every approval's state (rewritten by each
-- transition) becomes an index of the executing ones only, which is all that
-- reads it (renewing an executor's leases). A transition that neither starts
-- nor ends an execution no longer touches an index page.
DROP INDEX approvals_state;
CREATE INDEX approvals_executing ON approvals (lease_executor) WHERE state = 'executing';
