//! The `media_blocks` table of `memory.db` (migration 0005): media blocks with their
//! bytes, their own vectors and what they are committed to.
//!
//! `data` is read by exactly one query ([`MediaStore::data`], one block by id): the
//! listing, the ranking index and the stale-vector scan select the other columns only,
//! so a full-table pass never reads megabytes of images (seed 003: "`blockColumns`
//! deliberately excludes `data`").

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use super::check::Image;
use crate::memory::store::MemoryError;

/// The columns every listing reads — never `data`.
const META_COLS: &str = "id, mime, width, height, size, source, created_ms, seen_ms, seen_count, fingerprint";

/// One media block without its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MediaMeta {
    pub id: String,
    pub mime: String,
    pub width: u32,
    pub height: u32,
    pub size: u64,
    pub source: String,
    pub created_ms: i64,
    pub seen_ms: i64,
    pub seen_count: u64,
    /// The space of its vector; `None` until it is embedded.
    pub fingerprint: Option<String>,
    /// What it is committed to (`sentence:…`, `document:…`, `knowledge:…`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
}

fn meta_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<MediaMeta> {
    Ok(MediaMeta {
        id: r.get(0)?,
        mime: r.get(1)?,
        width: r.get::<_, i64>(2)? as u32,
        height: r.get::<_, i64>(3)? as u32,
        size: r.get::<_, i64>(4)? as u64,
        source: r.get(5)?,
        created_ms: r.get(6)?,
        seen_ms: r.get(7)?,
        seen_count: r.get::<_, i64>(8)? as u64,
        fingerprint: r.get(9)?,
        links: Vec::new(),
    })
}

/// Whether a put made a new block or met an existing one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Put {
    New,
    Merged,
}

pub(crate) fn vec_to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn blob_to_vec(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A connection to `memory.db` for the media tier.
pub struct MediaStore {
    conn: Connection,
}

impl MediaStore {
    /// Opens (creating, migrating) `memory.db` at `path`.
    pub fn open(path: &Path) -> Result<Self, MemoryError> {
        let mut conn = crate::memory::open_db(path)?;
        crate::memory::store::migrate(&mut conn)?;
        Ok(Self { conn })
    }

    /// An in-memory store (tests, benches).
    pub fn open_in_memory() -> Result<Self, MemoryError> {
        let mut conn = Connection::open_in_memory()?;
        crate::memory::store::migrate(&mut conn)?;
        Ok(Self { conn })
    }

    /// Stores an image as a block; the same bytes again only refresh `seen_*`.
    /// Committed when this returns.
    pub fn put(&mut self, img: &Image, source: &str, now_ms: i64) -> Result<(String, Put), MemoryError> {
        let id = img.block_id();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let existed = tx
            .query_row("SELECT 1 FROM media_blocks WHERE id = ?1", [&id], |_| Ok(()))
            .optional()?
            .is_some();
        tx.execute(
            "INSERT INTO media_blocks (id, mime, width, height, size, data, source, created_ms, seen_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)
             ON CONFLICT(id) DO UPDATE SET seen_ms = excluded.seen_ms, seen_count = seen_count + 1",
            params![
                id,
                img.mime,
                img.width,
                img.height,
                img.data.len() as i64,
                img.data,
                source,
                now_ms
            ],
        )?;
        tx.commit()?;
        Ok((id, if existed { Put::Merged } else { Put::New }))
    }

    /// One block's metadata (with its links), or `None`.
    pub fn meta(&self, id: &str) -> Result<Option<MediaMeta>, MemoryError> {
        let sql = format!("SELECT {META_COLS} FROM media_blocks WHERE id = ?1");
        let Some(mut m) = self.conn.query_row(&sql, [id], meta_row).optional()? else {
            return Ok(None);
        };
        m.links = self.links(id)?;
        Ok(Some(m))
    }

    fn links(&self, id: &str) -> Result<Vec<String>, MemoryError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT kind, target FROM media_links WHERE block_id = ?1 ORDER BY created_ms")?;
        let rows = st.query_map([id], |r| {
            Ok(format!("{}:{}", r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The bytes and type of one block: the only query that reads `data`.
    pub fn data(&self, id: &str) -> Result<Option<(String, Vec<u8>)>, MemoryError> {
        Ok(self
            .conn
            .query_row("SELECT mime, data FROM media_blocks WHERE id = ?1", [id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?)
    }

    /// The newest blocks first, `limit` at most, before `before_ms` when given.
    pub fn list(&self, limit: usize, before_ms: Option<i64>) -> Result<Vec<MediaMeta>, MemoryError> {
        let sql =
            format!("SELECT {META_COLS} FROM media_blocks WHERE created_ms < ?1 ORDER BY created_ms DESC, id LIMIT ?2");
        let mut st = self.conn.prepare_cached(&sql)?;
        let rows = st.query_map(params![before_ms.unwrap_or(i64::MAX), limit as i64], meta_row)?;
        let mut out: Vec<MediaMeta> = rows.collect::<Result<_, _>>()?;
        for m in &mut out {
            m.links = self.links(&m.id)?;
        }
        Ok(out)
    }

    pub fn count(&self) -> Result<usize, MemoryError> {
        Ok(self
            .conn
            .query_row("SELECT COUNT(*) FROM media_blocks", [], |r| r.get::<_, i64>(0))? as usize)
    }

    /// Deletes a block — its bytes, vector and links with it. `false` when unknown.
    pub fn delete(&mut self, id: &str) -> Result<bool, MemoryError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute("DELETE FROM media_links WHERE block_id = ?1", [id])?;
        let n = tx.execute("DELETE FROM media_blocks WHERE id = ?1", [id])?;
        tx.commit()?;
        Ok(n > 0)
    }

    /// The full id of a digest as a model may write it: the block id, or its 12 hex
    /// digits. `None` when no block has it.
    pub fn resolve(&self, digest: &str) -> Result<Option<String>, MemoryError> {
        let d = digest.trim();
        let hex = d.strip_prefix(super::ID_PREFIX).unwrap_or(d).to_ascii_lowercase();
        if hex.len() != 12 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let id = format!("{}{hex}", super::ID_PREFIX);
        Ok(self
            .conn
            .query_row("SELECT id FROM media_blocks WHERE id = ?1", [&id], |r| r.get(0))
            .optional()?)
    }

    /// Records that `id` is committed to `kind:target` (idempotent).
    pub fn link(&mut self, id: &str, kind: &str, target: &str, now_ms: i64) -> Result<(), MemoryError> {
        self.conn.execute(
            "INSERT OR IGNORE INTO media_links (block_id, kind, target, created_ms) VALUES (?1, ?2, ?3, ?4)",
            params![id, kind, target, now_ms],
        )?;
        Ok(())
    }

    /// Ids of blocks whose vector is missing or of another space than `fingerprint`
    /// (oldest first), `limit` at most.
    pub fn stale(&self, fingerprint: &str, limit: usize) -> Result<Vec<String>, MemoryError> {
        let mut st = self.conn.prepare_cached(
            "SELECT id FROM media_blocks WHERE vector IS NULL OR fingerprint IS NULL OR fingerprint <> ?1
             ORDER BY created_ms LIMIT ?2",
        )?;
        let rows = st.query_map(params![fingerprint, limit as i64], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// How many blocks have a vector of `fingerprint`.
    pub fn embedded(&self, fingerprint: &str) -> Result<usize, MemoryError> {
        Ok(self.conn.query_row(
            "SELECT COUNT(*) FROM media_blocks WHERE fingerprint = ?1 AND vector IS NOT NULL",
            [fingerprint],
            |r| r.get::<_, i64>(0),
        )? as usize)
    }

    /// Stores a block's vector in the space `fingerprint` (a deleted block is skipped).
    pub fn put_vector(&mut self, id: &str, fingerprint: &str, v: &[f32]) -> Result<(), MemoryError> {
        self.conn.execute(
            "UPDATE media_blocks SET vector = ?2, fingerprint = ?3 WHERE id = ?1",
            params![id, vec_to_blob(v), fingerprint],
        )?;
        Ok(())
    }

    /// Every vector of the space `fingerprint`, for the ranking index (no `data`).
    pub fn vectors(&self, fingerprint: &str) -> Result<Vec<(String, Vec<f32>)>, MemoryError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT id, vector FROM media_blocks WHERE fingerprint = ?1 AND vector IS NOT NULL")?;
        let rows = st.query_map([fingerprint], |r| {
            Ok((r.get::<_, String>(0)?, blob_to_vec(&r.get::<_, Vec<u8>>(1)?)))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::super::check::{Limits, check, tests::png_2x3};
    use super::*;

    fn img() -> Image {
        let l = Limits {
            max_bytes: 1 << 20,
            max_count: 4,
        };
        check(0, None, png_2x3(), &l).unwrap()
    }

    #[test]
    fn the_same_image_twice_is_one_block() {
        let mut s = MediaStore::open_in_memory().unwrap();
        let (a, p) = s.put(&img(), "http", 1).unwrap();
        assert_eq!(p, Put::New);
        let (b, p) = s.put(&img(), "webui", 2).unwrap();
        assert_eq!((a.as_str(), p), (b.as_str(), Put::Merged));
        assert_eq!(s.count().unwrap(), 1);
        let m = s.meta(&a).unwrap().unwrap();
        assert_eq!((m.seen_count, m.source.as_str(), m.width, m.height), (2, "http", 2, 3));
        assert_eq!(s.data(&a).unwrap().unwrap().1, png_2x3());
    }

    #[test]
    fn deleting_the_block_deletes_bytes_vector_and_links() {
        let mut s = MediaStore::open_in_memory().unwrap();
        let (id, _) = s.put(&img(), "http", 1).unwrap();
        s.link(&id, "sentence", "my bike", 2).unwrap();
        s.put_vector(&id, "fp/2", &[1.0, 0.0]).unwrap();
        assert_eq!(s.meta(&id).unwrap().unwrap().links, vec!["sentence:my bike"]);
        assert!(s.delete(&id).unwrap());
        assert!(s.data(&id).unwrap().is_none());
        assert!(s.vectors("fp/2").unwrap().is_empty());
        let links: i64 = s
            .conn
            .query_row("SELECT COUNT(*) FROM media_links", [], |r| r.get(0))
            .unwrap();
        assert_eq!(links, 0);
        assert!(!s.delete(&id).unwrap());
    }

    #[test]
    fn digests_resolve_by_full_id_or_short_hex_only() {
        let mut s = MediaStore::open_in_memory().unwrap();
        let (id, _) = s.put(&img(), "http", 1).unwrap();
        let hex = id.trim_start_matches("blk_media_").to_owned();
        assert_eq!(s.resolve(&id).unwrap().as_deref(), Some(id.as_str()));
        assert_eq!(s.resolve(&hex.to_uppercase()).unwrap().as_deref(), Some(id.as_str()));
        assert_eq!(s.resolve("blk_media_000000000000").unwrap(), None);
        assert_eq!(s.resolve("' OR 1=1 --").unwrap(), None);
    }

    #[test]
    fn stale_vectors_are_missing_or_of_another_space() {
        let mut s = MediaStore::open_in_memory().unwrap();
        let (id, _) = s.put(&img(), "http", 1).unwrap();
        assert_eq!(s.stale("new/2", 10).unwrap(), vec![id.clone()]);
        s.put_vector(&id, "old/3", &[1.0, 0.0, 0.0]).unwrap();
        assert_eq!(
            s.stale("new/2", 10).unwrap(),
            vec![id.clone()],
            "another space is stale"
        );
        s.put_vector(&id, "new/2", &[0.0, 1.0]).unwrap();
        assert!(s.stale("new/2", 10).unwrap().is_empty());
        assert_eq!(s.vectors("new/2").unwrap(), vec![(id, vec![0.0, 1.0])]);
        assert_eq!(s.embedded("new/2").unwrap(), 1);
    }

    /// Only the read of one block by id selects its bytes: a new query that selects
    /// `data`, or `data` among the listing's columns, fails here.
    #[test]
    fn only_the_one_by_id_read_selects_the_bytes() {
        let code = include_str!("store.rs");
        let code = &code[..code.find("#[cfg(test)]").unwrap()];
        let selecting_data: Vec<&str> = code
            .match_indices("SELECT ")
            .filter_map(|(i, _)| {
                let rest = &code[i + 7..];
                Some(&rest[..rest.find(" FROM ")?])
            })
            .filter(|cols| cols.split(',').any(|c| c.trim() == "data"))
            .collect();
        assert_eq!(selecting_data, ["mime, data"]);
        assert!(!META_COLS.split(',').any(|c| c.trim() == "data"), "{META_COLS}");
        assert!(code.contains("\"SELECT mime, data FROM media_blocks WHERE id = ?1\""));
    }
}
