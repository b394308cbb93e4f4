-- Sticky decisions (Postgres). Keep in step with migrations/sqlite.
-- `body` is TEXT, not JSONB, as in 0001: it reads back exactly as written.
-- Listings are oldest first: by `created_at`, then by `seq`, the order of
-- saving.
-- A scope has a key (the conversation id or the principal) exactly when it
-- is not global.

CREATE TABLE decisions (
    id         TEXT      NOT NULL PRIMARY KEY,
    seq        BIGSERIAL NOT NULL UNIQUE,
    scope_kind TEXT      NOT NULL CONSTRAINT decisions_scope_kind_name CHECK (scope_kind IN
        ('conversation', 'principal', 'global')),
    scope_key  TEXT      CONSTRAINT decisions_scope_key_unless_global CHECK
        ((scope_key IS NULL) = (scope_kind = 'global')),
    tool_name  TEXT      NOT NULL,
    created_at BIGINT    NOT NULL,
    expires_at BIGINT,
    body       TEXT      NOT NULL
);

CREATE INDEX decisions_scope ON decisions (scope_kind, scope_key);
