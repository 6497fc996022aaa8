-- Every settings change with who made it (issue 33): listed, and reverted one by one
-- or back to a point in time, from the WebUI and the API. A secret's values are never
-- kept here (old and new are NULL for it). Times are Unix milliseconds on the kernel's
-- clock.
CREATE TABLE history (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms  INTEGER NOT NULL,
    key    TEXT    NOT NULL,
    old    TEXT    CHECK (old IS NULL OR json_valid(old)),
    new    TEXT    CHECK (new IS NULL OR json_valid(new)),
    secret INTEGER NOT NULL,
    author TEXT    NOT NULL
) STRICT;
CREATE INDEX idx_history_key ON history(key, id);
