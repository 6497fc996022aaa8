-- Dense vectors of context events and documents. Each carries the fingerprint of the
-- space (model + dimension) that made it: vectors of different spaces are never
-- compared; a row whose vector is of another space is re-embedded in the background.
CREATE TABLE vectors (
    kind  TEXT NOT NULL CHECK (kind IN ('event', 'document')),
    ref   TEXT NOT NULL,
    space TEXT NOT NULL,
    vec   BLOB NOT NULL,
    PRIMARY KEY (kind, ref)
) STRICT;
CREATE INDEX vectors_space ON vectors (space);

-- A deleted event or document takes its vector with it.
CREATE TRIGGER context_events_drop_vector AFTER DELETE ON context_events BEGIN
    DELETE FROM vectors WHERE kind = 'event' AND ref = CAST(old.id AS TEXT);
END;
CREATE TRIGGER documents_drop_vector AFTER DELETE ON documents BEGIN
    DELETE FROM vectors WHERE kind = 'document' AND ref = old.id;
END;
