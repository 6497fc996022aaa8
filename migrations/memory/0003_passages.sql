-- Passages: every archived event stays individually searchable (and embeddable) after
-- it moved into a document. A passage belongs to its document: consuming or deleting
-- the document takes its passages (and their vectors) with it.
CREATE TABLE passages (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    doc_id  TEXT NOT NULL,
    ts_ms   INTEGER NOT NULL,
    speaker TEXT NOT NULL,
    text    TEXT NOT NULL,
    -- o200k tokens of `text`, counted once (0 = not counted yet).
    tokens  INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX passages_doc ON passages (doc_id);

CREATE TRIGGER documents_drop_passages AFTER DELETE ON documents BEGIN
    DELETE FROM passages WHERE doc_id = old.id;
END;

-- Vectors may now belong to passages too: the table is rebuilt with the wider CHECK
-- (the triggers that name it are dropped first and made again after the rename).
DROP TRIGGER context_events_drop_vector;
DROP TRIGGER documents_drop_vector;
CREATE TABLE vectors_new (
    kind  TEXT NOT NULL CHECK (kind IN ('event', 'document', 'passage')),
    ref   TEXT NOT NULL,
    space TEXT NOT NULL,
    vec   BLOB NOT NULL,
    PRIMARY KEY (kind, ref)
) STRICT;
INSERT INTO vectors_new SELECT kind, ref, space, vec FROM vectors;
DROP TABLE vectors;
ALTER TABLE vectors_new RENAME TO vectors;
CREATE INDEX vectors_space ON vectors (space);
CREATE TRIGGER context_events_drop_vector AFTER DELETE ON context_events BEGIN
    DELETE FROM vectors WHERE kind = 'event' AND ref = CAST(old.id AS TEXT);
END;
CREATE TRIGGER documents_drop_vector AFTER DELETE ON documents BEGIN
    DELETE FROM vectors WHERE kind = 'document' AND ref = old.id;
END;

CREATE TRIGGER passages_drop_vector AFTER DELETE ON passages BEGIN
    DELETE FROM vectors WHERE kind = 'passage' AND ref = CAST(old.id AS TEXT);
END;

-- Documents archived before passages existed: their events become passages.
INSERT INTO passages (doc_id, ts_ms, speaker, text)
SELECT d.id,
       json_extract(e.value, '$.ts_ms'),
       CASE json_extract(e.value, '$.source') WHEN 'agent' THEN 'assistant' ELSE json_extract(e.value, '$.source') END,
       CASE json_extract(e.value, '$.source') WHEN 'agent' THEN json_extract(e.value, '$.response') ELSE json_extract(e.value, '$.input') END
FROM documents d, json_each(d.events) e
WHERE d.source = 'context'
  AND COALESCE(CASE json_extract(e.value, '$.source') WHEN 'agent' THEN json_extract(e.value, '$.response') ELSE json_extract(e.value, '$.input') END, '') <> '';
