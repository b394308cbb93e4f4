-- Sticky decisions (SQLite). Keep in step with migrations/postgres.
-- `body` holds serde_json text as written (key order kept). Listings are
-- oldest first: by `created_at`, then by `seq`, the order of saving. `seq` is
-- the INTEGER PRIMARY KEY (an alias of the rowid, never reused with
-- AUTOINCREMENT and never renumbered by VACUUM, unlike an implicit rowid), so
-- the id is the table's other unique key.
-- A scope has a key (the conversation id or the principal) exactly when it
-- is not global.

CREATE TABLE decisions (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT    NOT NULL UNIQUE,
    scope_kind TEXT    NOT NULL CHECK (scope_kind IN ('conversation', 'principal', 'global')),
    scope_key  TEXT    CHECK ((scope_key IS NULL) = (scope_kind = 'global')),
    tool_name  TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    body       TEXT    NOT NULL
) STRICT;

CREATE INDEX decisions_scope ON decisions (scope_kind, scope_key);
