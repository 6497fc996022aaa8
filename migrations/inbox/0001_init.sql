-- The durable inbox (DATA/inbox.db): every input acknowledged with 202 is a row here
-- before the 202 is sent, and leaves when its task has ended. What is left at boot
-- runs again. See docs/DECISIONS.md ("Durable intake").
CREATE TABLE inbox (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id     TEXT    NOT NULL,
    source         TEXT    NOT NULL,
    channel        TEXT    NOT NULL,
    text           TEXT    NOT NULL,
    -- 1..4 for an interrupt, NULL for queued input.
    level          INTEGER,
    no_memory      INTEGER NOT NULL DEFAULT 0,
    -- The injection's extra fields, a JSON object.
    payload        TEXT    NOT NULL DEFAULT '{}',
    accepted_at_ms INTEGER NOT NULL,
    -- How often its task started without ending (each time the daemon died under it).
    starts         INTEGER NOT NULL DEFAULT 0,
    -- Set when it was given up after too many starts; kept for the operator to see.
    given_up_at_ms INTEGER
);
CREATE INDEX inbox_pending ON inbox(id) WHERE given_up_at_ms IS NULL;
