-- Turns imported from a history (`POST /api/v1/memory/import`): one row per imported
-- line, keyed by its digest (time, speaker, text), so importing the same lines again
-- imports nothing twice. The row outlives its event: once the event is archived into a
-- document (or purged) the turn still counts as imported.
CREATE TABLE imported_turns (
    digest         TEXT PRIMARY KEY,
    ts_ms          INTEGER NOT NULL,
    speaker        TEXT NOT NULL,
    -- Where the history came from and the turn's id there (e.g. a LoCoMo dia_id).
    origin         TEXT,
    external_id    TEXT,
    -- The context event the turn became (it may since have left the window).
    event_id       INTEGER NOT NULL,
    imported_at_ms INTEGER NOT NULL
) STRICT;
