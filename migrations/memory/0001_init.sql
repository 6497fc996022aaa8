-- The context tier (working memory) and the document tier (cold context).
CREATE TABLE context_events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    ts_ms        INTEGER NOT NULL,
    source       TEXT NOT NULL,
    input        TEXT NOT NULL,
    response     TEXT NOT NULL DEFAULT '',
    tools_used   TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tools_used)),
    tool_results TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tool_results))
) STRICT;
CREATE INDEX context_events_ts ON context_events (ts_ms, id);

CREATE TABLE documents (
    id            TEXT PRIMARY KEY,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    source        TEXT NOT NULL,
    summary       TEXT NOT NULL,
    content       TEXT NOT NULL,
    events        TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(events)),
    content_hash  TEXT NOT NULL UNIQUE,
    access_count  INTEGER NOT NULL DEFAULT 1,
    last_access_ms INTEGER NOT NULL
) STRICT;
