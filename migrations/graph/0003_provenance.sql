-- Provenance is kept (issue 28). A reviewed relation is marked with the time of its
-- review instead of losing its source sentence; facts the archive heartbeat took from a
-- document are committed under the session `doc:<document id>`, so deleting the
-- document finds them. `merge_proposed` remembers which entity pairs a merge round
-- already put to the model and when: a pair is proposed again only once one of its
-- entities changed after that, so a graph without new material costs no model call.
ALTER TABLE relations ADD COLUMN reviewed_at INTEGER NOT NULL DEFAULT 0;
CREATE INDEX idx_relation_unreviewed ON relations(confidence, id) WHERE reviewed_at = 0 AND sentence_id != 0;
CREATE TABLE merge_proposed (
    pair  TEXT PRIMARY KEY,
    at_ms INTEGER NOT NULL
) STRICT;
