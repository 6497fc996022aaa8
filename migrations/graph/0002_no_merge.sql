-- "Do not propose merging these two entities for N more rounds" (memory_block_merge).
-- pair = the two names sorted and joined with '||'; a row is deleted when it reaches 0.
CREATE TABLE no_merge (
    pair   TEXT PRIMARY KEY,
    rounds INTEGER NOT NULL CHECK (rounds > 0)
) STRICT;
