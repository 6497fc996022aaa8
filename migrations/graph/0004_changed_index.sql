-- The graph → document snapshot asks, every distill round, which entities changed
-- after its mark (issue 33): by the time of the change, not a scan of every relation.
CREATE INDEX idx_relation_updated ON relations(updated_at);
CREATE INDEX idx_entity_updated ON entities(updated_at);
