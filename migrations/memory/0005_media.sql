-- Media memory (seed 003, "media *is* a block"): an image is a memory block whose
-- bytes live in its own row and die with it. The id is content-derived,
-- blk_media_<sha256(mime || 0x00 || data)[:12]>, so the same image stored twice is one
-- row (INSERT ... ON CONFLICT). Queries that list or rank blocks never select `data`.
CREATE TABLE media_blocks (
    id          TEXT PRIMARY KEY,
    mime        TEXT NOT NULL,
    width       INTEGER NOT NULL,
    height      INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    data        BLOB NOT NULL,
    -- who sent it first (`http`, `webui/tab-1`, a plugin)
    source      TEXT NOT NULL DEFAULT '',
    created_ms  INTEGER NOT NULL,
    -- the latest time it arrived again, and how often it arrived
    seen_ms     INTEGER NOT NULL,
    seen_count  INTEGER NOT NULL DEFAULT 1,
    -- its own vector in the multimodal space (little-endian f32), and that space's
    -- fingerprint; NULL until embedded
    vector      BLOB,
    fingerprint TEXT
);
CREATE INDEX media_blocks_by_time ON media_blocks(created_ms);

-- What a block is committed to: a graph sentence (memory_commit), a document
-- (doc_commit), a knowledge entry (knowledge_create). Deleted with the block.
CREATE TABLE media_links (
    block_id   TEXT NOT NULL,
    kind       TEXT NOT NULL,
    target     TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (block_id, kind, target)
);
