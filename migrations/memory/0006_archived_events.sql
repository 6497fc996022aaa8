-- Which context events were archived into which document. The document tier writes a
-- row in the transaction that commits the document; the context tier deletes the
-- events only after that commit (two actors, two connections). A crash between the two
-- leaves events that are already archived: the context tier drops them when it opens
-- (and the document tier never archives an event twice), so nothing is lost or doubled.
CREATE TABLE archived_events (
    event_id       INTEGER PRIMARY KEY,
    doc_id         TEXT NOT NULL,
    archived_at_ms INTEGER NOT NULL
) STRICT;
