-- The usage ledger (DATA/usage.db, issue 31): one row per model call that answered —
-- what it was for, where it went, what it cost. Never rewritten; read by day, source,
-- model, kind and principal (GET /api/v1/usage).
CREATE TABLE calls (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    ts_ms       INTEGER NOT NULL,
    source      TEXT    NOT NULL,
    model       TEXT    NOT NULL,
    -- owner_turn, guest_turn, heartbeat, sub_agent, vision, selftest
    kind        TEXT    NOT NULL,
    -- the guest's principal; '' for the owner and the kernel
    principal   TEXT    NOT NULL DEFAULT '',
    input       INTEGER NOT NULL,
    output      INTEGER NOT NULL,
    cached      INTEGER NOT NULL DEFAULT 0,
    -- 1: the vendor reported no usage, the daemon counted (o200k)
    estimated   INTEGER NOT NULL DEFAULT 0,
    -- millionths of a US dollar; NULL: no price for this model
    cost_micros INTEGER
) STRICT;
CREATE INDEX calls_ts ON calls (ts_ms);
