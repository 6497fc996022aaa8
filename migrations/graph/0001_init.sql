-- The graph tier (DATA/memory/graph.db): entities, source sentences and relations.
-- Times are Unix milliseconds. `session_id` is never NULL ('' when none) so that the
-- UNIQUE key below really de-duplicates (SQLite treats NULLs as distinct).
CREATE TABLE entities (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    name          TEXT UNIQUE NOT NULL,
    type          TEXT NOT NULL DEFAULT 'Concept',
    mention_count INTEGER NOT NULL DEFAULT 1,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX idx_entity_type ON entities(type);

CREATE TABLE sentences (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    text       TEXT UNIQUE NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE TABLE relations (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    source_id     INTEGER NOT NULL REFERENCES entities(id),
    target_id     INTEGER NOT NULL REFERENCES entities(id),
    relation_type TEXT NOT NULL,
    confidence    REAL NOT NULL DEFAULT 1.0,
    status        TEXT NOT NULL DEFAULT 'active',
    session_id    TEXT NOT NULL DEFAULT '',
    turn_id       INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    date_bucket   TEXT NOT NULL,
    sentence_id   INTEGER NOT NULL DEFAULT 0,
    UNIQUE(source_id, target_id, relation_type, session_id)
);
CREATE INDEX idx_relation_source ON relations(source_id);
CREATE INDEX idx_relation_target ON relations(target_id);
CREATE INDEX idx_relation_type ON relations(relation_type);
CREATE INDEX idx_relation_status ON relations(status);
CREATE INDEX idx_relation_session ON relations(session_id);
CREATE INDEX idx_relation_sentence ON relations(sentence_id);
