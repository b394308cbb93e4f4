-- Keep in step with migrations/postgres.
-- Signed receipts and the audit chain (`toolgate::receipt`, `seal_ops.rs`):
--
-- - `audit_chain`: each audit event's link, written by the sealer after the
--   event committed: its digest, the hash before it and its own, and how many
--   events the chain holds up to it (`n`, pruned ones included);
-- - `audit_seals`: signed checkpoints of the chain's head and signed prunes;
-- - `audit_receipts`: the signed receipt of each event that decides or ends an
--   approval, by the event's `seq`;
-- - `receipt_keys`: every public key that signed here (the JWKS served).

CREATE TABLE audit_chain (
    seq    INTEGER PRIMARY KEY,
    n      INTEGER NOT NULL,
    prev   TEXT    NOT NULL,
    digest TEXT    NOT NULL,
    hash   TEXT    NOT NULL
) STRICT;

CREATE TABLE audit_seals (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    kind     TEXT    NOT NULL CHECK (kind IN ('checkpoint', 'prune')),
    head_seq INTEGER NOT NULL,
    at       INTEGER NOT NULL,
    body     TEXT    NOT NULL
) STRICT;

CREATE INDEX audit_seals_kind ON audit_seals (kind, head_seq);

CREATE TABLE audit_receipts (
    seq         INTEGER PRIMARY KEY,
    approval_id TEXT    NOT NULL,
    body        TEXT    NOT NULL
) STRICT;

CREATE INDEX audit_receipts_approval ON audit_receipts (approval_id, seq);

CREATE TABLE receipt_keys (
    kid      TEXT    PRIMARY KEY,
    jwk      TEXT    NOT NULL,
    added_at INTEGER NOT NULL
) STRICT;

-- Each approval's events, in order: the seal reads the first (issued, or decided by a rule) for what receipts name.
CREATE INDEX audit_events_approval ON audit_events (approval_id, seq);
