-- Archiving keeps what it archives (issue 28): a document whose facts went into the
-- graph is marked with the time it happened and stays, with its passages, recallable
-- verbatim. Only the owner deletes documents. The archive heartbeat looks for
-- unmarked documents idle since a time (last access), so that lookup is indexed.
ALTER TABLE documents ADD COLUMN archived_at_ms INTEGER;
CREATE INDEX documents_idle ON documents (last_access_ms) WHERE archived_at_ms IS NULL;
