-- Other names of an entity (issue 28): the name of an entity merged into it, or one a
-- fact gave it ("Melanie —nickname→ Mel", "王伟 —小名→ 小王"). A mention of an alias
-- finds the entity. Rows are only ever inserted or deleted (a merge moves an alias by
-- inserting it anew), so the mention index catches up by id.
CREATE TABLE aliases (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    alias TEXT NOT NULL,
    entity_id INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (alias, entity_id)
);
CREATE INDEX idx_alias_entity ON aliases(entity_id);
CREATE INDEX idx_alias_lower ON aliases(LOWER(alias));
-- An entity's aliases go with it (a merge has inserted them for its target first).
CREATE TRIGGER aliases_follow_entities AFTER DELETE ON entities BEGIN
    DELETE FROM aliases WHERE entity_id = OLD.id;
END;
