//! SQLite persistence of the memory tiers (`DATA/memory/memory.db`).
//!
//! Write-through: an event is committed to the WAL before `append` returns, so an
//! acknowledged message survives `kill -9` — unlike the reference's JSON file written
//! 5 s after a change. We run WAL with `synchronous=NORMAL`: a commit is written to
//! the OS at once but fsynced at checkpoints, so only an OS crash or power loss can
//! lose the very last turns. FULL (an fsync per commit, two per turn) cost ~0.8 ms per
//! turn here and broke the 1 ms kernel-overhead budget (see `homed bench turn`).

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};
use rusqlite_migration::{M, Migrations};

use super::context::{Event, ToolOutput};
use super::index::docindex::Unit;
use crate::clock::now_ms;

/// Why the memory store failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("memory database error: {0}; check disk space and permissions of DATA/memory")]
    Sql(#[from] rusqlite::Error),
    #[error("memory database migration failed: {0}; the file may be from a newer homed")]
    Migration(#[from] rusqlite_migration::Error),
}

/// The source of an event that shows a stored document in the timeline (`doc_query`).
pub const COLD_STORAGE: &str = "cold_storage";

/// A document of the cold tier.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Document {
    pub id: String,
    pub created_at_ms: i64,
    pub source: String,
    pub summary: String,
    pub content: String,
    pub access_count: i64,
}

/// The columns [`document_row`] reads, in its order.
const DOCUMENT_COLS: &str = "id, created_at_ms, source, summary, content, access_count";

fn document_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Document> {
    Ok(Document {
        id: r.get(0)?,
        created_at_ms: r.get(1)?,
        source: r.get(2)?,
        summary: r.get(3)?,
        content: r.get(4)?,
        access_count: r.get(5)?,
    })
}

/// The columns [`event_row`] reads, in its order.
pub(crate) const EVENT_COLS: &str = "id, ts_ms, source, input, response, tools_used, tool_results, principal";

pub(crate) fn event_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Event> {
    let tools_used: String = r.get(5)?;
    let tool_results: String = r.get(6)?;
    Ok(Event {
        id: r.get(0)?,
        ts_ms: r.get(1)?,
        source: r.get(2)?,
        input: r.get(3)?,
        response: r.get(4)?,
        tools_used: serde_json::from_str(&tools_used).unwrap_or_default(),
        tool_results: serde_json::from_str::<Vec<ToolOutput>>(&tool_results).unwrap_or_default(),
        principal: r.get(7)?,
    })
}

/// An archived event kept as its own searchable unit (spec subsystems §1.5: documents; here
/// also their parts, so recall can show the matching words rather than a header).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Passage {
    pub id: i64,
    pub doc_id: String,
    pub ts_ms: i64,
    pub speaker: String,
    pub text: String,
    /// o200k tokens of `text`.
    pub tokens: usize,
    /// Whose words they were when not the owner's (see `Event::principal`).
    pub principal: String,
}

/// One of the two recall indexes a store keeps: the context window's events (the
/// context tier) or the archived events' passages (the document tier).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    Events,
    Passages,
}

/// A query's dense side: its vector and the space it lives in.
#[derive(Debug, Clone)]
pub struct QueryVector {
    pub space: String,
    pub vec: Vec<f32>,
}

/// Cosine below which a document is not "related" on the dense side alone (MiniLM
/// scores unrelated sentences ~0.0–0.25).
pub const DENSE_MIN: f32 = 0.35;

/// A row that can carry a vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VectorRef {
    Event(i64),
    Document(String),
    Passage(i64),
}

/// The store: one connection to `memory.db`. The context tier and the document tier
/// each open their own (see `docs/DECISIONS.md`, "the document tier as its own
/// actor"): the context actor's only touches events (and builds `events_ix`), the
/// documents actor's only documents and passages (and builds `index` and
/// `passages_ix`). Tests and `homed eval` use one store for both.
pub struct MemoryStore {
    conn: Connection,
    /// The document search index, built on the first search and kept in step with
    /// every document this store adds or removes.
    index: Option<super::index::docindex::DocIndex>,
    /// The recall index of the context events, built on the first recall and kept in
    /// step the same way.
    events_ix: Option<super::index::docindex::RecallIndex>,
    /// The recall index of the passages, likewise.
    passages_ix: Option<super::index::docindex::RecallIndex>,
    /// Passages read for recall, by id: a turn reads its ~80 candidates, and the next
    /// turn mostly the same ones. Passages never change (their token count aside, filled
    /// before caching) and their ids are never reused; a deleted document's passages
    /// leave here with it ([`Self::unindex`]).
    passage_cache: std::cell::RefCell<std::collections::HashMap<i64, Passage>>,
    /// Per space and kind (`event`, `passage`), an id up to which every row had a
    /// vector of that space when last looked: [`Self::missing_vectors`] scans only
    /// above it. Why: the embedder asks after every turn and every poll, and the
    /// anti-join over all rows (100 ms of SQLite at 12k rows) kept a waiting query
    /// embedding queued behind it. Safe because row ids only grow, a vector leaves only
    /// with its row, and storing another space's vectors forgets the marks of the rest
    /// (`INSERT OR REPLACE` replaces a row's vector of any space).
    vector_marks: std::cell::RefCell<std::collections::HashMap<(String, &'static str), i64>>,
}

/// Passages kept in [`MemoryStore::passages`]' cache before it starts afresh.
const PASSAGE_CACHE: usize = 8192;

pub(crate) fn migrations() -> Migrations<'static> {
    Migrations::new(vec![
        M::up(include_str!("../../../migrations/memory/0001_init.sql")),
        M::up(include_str!("../../../migrations/memory/0002_vectors.sql")),
        M::up(include_str!("../../../migrations/memory/0003_passages.sql")),
        M::up(include_str!("../../../migrations/memory/0004_imports.sql")),
        M::up(include_str!("../../../migrations/memory/0005_media.sql")),
        M::up(include_str!("../../../migrations/memory/0006_archived_events.sql")),
        M::up(include_str!("../../../migrations/memory/0007_archive_keeps.sql")),
        M::up(include_str!("../../../migrations/memory/0008_event_principal.sql")),
        M::up(include_str!("../../../migrations/memory/0009_passage_principal.sql")),
    ])
}

/// Brings a connection to `memory.db` to the latest schema (the media store opens its
/// own connection and must not depend on which tier started first).
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), MemoryError> {
    migrations().to_latest(conn)?;
    Ok(())
}

impl MemoryStore {
    /// Opens (creating) the database at `path` and applies migrations.
    pub fn open(path: &Path) -> Result<Self, MemoryError> {
        let mut conn = super::open_db(path)?;
        migrations().to_latest(&mut conn)?;
        Ok(Self {
            conn,
            index: None,
            events_ix: None,
            passages_ix: None,
            passage_cache: Default::default(),
            vector_marks: Default::default(),
        })
    }

    /// An in-memory store (tests).
    pub fn open_in_memory() -> Result<Self, MemoryError> {
        let mut conn = Connection::open_in_memory()?;
        migrations().to_latest(&mut conn)?;
        Ok(Self {
            conn,
            index: None,
            events_ix: None,
            passages_ix: None,
            passage_cache: Default::default(),
            vector_marks: Default::default(),
        })
    }

    /// Appends an event; returns it with its id. Committed when this returns.
    pub fn append(&mut self, mut e: Event) -> Result<Event, MemoryError> {
        // Cached: every turn appends, and parsing the statement cost as much as running it.
        self.conn
            .prepare_cached(
                "INSERT INTO context_events (ts_ms, source, input, response, tools_used, tool_results, principal) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                e.ts_ms,
                e.source,
                e.input,
                e.response,
                serde_json::to_string(&e.tools_used).unwrap_or_else(|_| "[]".into()),
                serde_json::to_string(&e.tool_results).unwrap_or_else(|_| "[]".into()),
                e.principal,
            ])?;
        e.id = self.conn.last_insert_rowid();
        if let Some(ix) = self.events_ix.as_mut() {
            ix.add_unit(&Unit::Event(e.id), e.ts_ms, e.speaker(), e.said());
        }
        Ok(e)
    }

    /// The whole context, chronological.
    pub fn events(&self) -> Result<Vec<Event>, MemoryError> {
        let mut st = self
            .conn
            .prepare(&format!("SELECT {EVENT_COLS} FROM context_events ORDER BY ts_ms, id"))?;
        let rows = st.query_map([], event_row)?;
        rows.collect::<Result<_, _>>().map_err(Into::into)
    }

    /// Moves `archived` events out of the context into one document: the document
    /// tier's [`Self::archive_documents`], then the context tier's
    /// [`Self::forget_events`] (what the two actors do, on one connection).
    pub fn archive(&mut self, archived: &[Event]) -> Result<Option<String>, MemoryError> {
        let doc = self.archive_documents(archived)?;
        let ids: Vec<i64> = archived.iter().map(|e| e.id).collect();
        self.forget_events(&ids)?;
        Ok(doc)
    }

    /// The document tier's half of an archive: `archived` events become one document
    /// with one passage each, and each event id is recorded in `archived_events`, in one
    /// transaction. The events themselves are not touched (the context tier deletes
    /// them once this committed). Events archived before (a retry after a crash between
    /// the two halves) are skipped; when all are, the answer is their document. A
    /// document with the same content hash is refreshed, not duplicated.
    pub fn archive_documents(&mut self, archived: &[Event]) -> Result<Option<String>, MemoryError> {
        if archived.is_empty() {
            return Ok(None);
        }
        let mut done: Option<String> = None;
        let mut fresh: Vec<&Event> = Vec::with_capacity(archived.len());
        {
            let mut st = self
                .conn
                .prepare_cached("SELECT doc_id FROM archived_events WHERE event_id = ?1")?;
            for e in archived {
                match st.query_row([e.id], |r| r.get::<_, String>(0)).optional()? {
                    Some(doc) => {
                        tracing::info!(event = e.id, document = %doc, "event archived before; not archived twice");
                        done.get_or_insert(doc);
                    }
                    None => fresh.push(e),
                }
            }
        }
        if fresh.is_empty() {
            return Ok(done);
        }
        let archived: Vec<Event> = fresh.into_iter().cloned().collect();
        let content = document_content(&archived);
        let hash = content_hash(&content);
        let summary = document_summary(&archived);
        let now = now_ms();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let existing: Option<String> = tx
            .query_row("SELECT id FROM documents WHERE content_hash = ?1", params![hash], |r| {
                r.get(0)
            })
            .optional()?;
        let mut new_doc = None;
        let id = match existing {
            Some(id) => {
                tx.execute(
                    "UPDATE documents SET updated_at_ms = ?1, last_access_ms = ?1 WHERE id = ?2",
                    params![now, id],
                )?;
                id
            }
            None => {
                let id = format!(
                    "doc_{}",
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos())
                );
                let created = archived.first().map_or(now, |e| e.ts_ms);
                tx.execute(
                    "INSERT INTO documents (id, created_at_ms, updated_at_ms, source, summary, content, events, content_hash, access_count, last_access_ms)
                     VALUES (?1, ?2, ?3, 'context', ?4, ?5, ?6, ?7, 1, ?3)",
                    params![id, created, now, summary, content, serde_json::to_string(&archived).unwrap_or_else(|_| "[]".into()), hash],
                )?;
                new_doc = Some(id.clone());
                id
            }
        };
        // Each event stays searchable as a passage of the document (a refreshed
        // document keeps the passages it has). The event's vector moves with it: the
        // same `docindex::vector_text`, no second embedding.
        let mut added = Vec::new();
        let has_passages: bool =
            tx.query_row("SELECT EXISTS (SELECT 1 FROM passages WHERE doc_id = ?1)", [&id], |r| {
                r.get(0)
            })?;
        for e in &archived {
            let said = e.said();
            // A document `doc_query` showed in the timeline is a copy of one that is still
            // stored: it is not made a passage twice.
            let copy = e.source == COLD_STORAGE;
            if !has_passages && !copy && !said.trim().is_empty() {
                let tokens = crate::llm::tokens::count(said);
                tx.execute(
                    "INSERT INTO passages (doc_id, ts_ms, speaker, text, tokens, principal) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![id, e.ts_ms, e.speaker(), said, tokens as i64, e.principal],
                )?;
                let pid = tx.last_insert_rowid();
                tx.execute(
                    "INSERT OR REPLACE INTO vectors (kind, ref, space, vec)
                     SELECT 'passage', ?1, space, vec FROM vectors WHERE kind = 'event' AND ref = ?2",
                    params![pid.to_string(), e.id.to_string()],
                )?;
                added.push((pid, e.ts_ms, e.speaker().to_owned(), said.to_owned()));
            }
            tx.execute(
                "INSERT OR IGNORE INTO archived_events (event_id, doc_id, archived_at_ms) VALUES (?1, ?2, ?3)",
                params![e.id, id, now],
            )?;
        }
        tx.commit()?;
        if let (Some(doc), Some(ix)) = (&new_doc, self.index.as_mut()) {
            ix.add(doc, &super::index::docindex::doc_text(&summary, &content));
        }
        if let Some(ix) = self.passages_ix.as_mut() {
            for (pid, ts, speaker, text) in &added {
                ix.add_unit(&Unit::Passage(*pid), *ts, speaker, text);
            }
        }
        Ok(Some(id))
    }

    /// The context tier's half of an archive: deletes events (committed in a document
    /// already) from `context_events`, in one transaction, and from the event index.
    pub fn forget_events(&mut self, ids: &[i64]) -> Result<(), MemoryError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut st = tx.prepare_cached("DELETE FROM context_events WHERE id = ?1")?;
            for id in ids {
                st.execute([id])?;
            }
        }
        tx.commit()?;
        if let Some(ix) = self.events_ix.as_mut() {
            let mut rebuild = false;
            for id in ids {
                rebuild |= ix.remove(&Unit::Event(*id));
            }
            if rebuild {
                self.events_ix = None;
            }
        }
        Ok(())
    }

    /// Finishes archives a crash interrupted: deletes the context events whose
    /// document was committed (`archived_events`) but which the context tier had not
    /// deleted yet. Answers how many. Called when the context tier opens, before it
    /// loads its window.
    pub fn forget_archived(&mut self) -> Result<usize, MemoryError> {
        let n = self.conn.execute(
            "DELETE FROM context_events WHERE id IN (SELECT event_id FROM archived_events)",
            [],
        )?;
        if n > 0 {
            self.events_ix = None;
            tracing::warn!(
                events = n,
                "events already archived into documents left the window (an archive was interrupted)"
            );
        }
        Ok(n)
    }

    /// Documents not read since `idle_before_ms`, read at most `max_access` times and
    /// not yet distilled into the graph: cold enough for the archive heartbeat. Each
    /// comes with its passages (who said what, when: what its facts are taken from).
    /// Least recently read first, at most `limit`.
    pub fn cold_documents(
        &self,
        idle_before_ms: i64,
        max_access: i64,
        limit: usize,
    ) -> Result<Vec<(Document, Vec<Passage>)>, MemoryError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {DOCUMENT_COLS} FROM documents
             WHERE archived_at_ms IS NULL AND last_access_ms < ?1 AND access_count <= ?2
             ORDER BY last_access_ms, id LIMIT ?3"
        ))?;
        let docs: Vec<Document> = stmt
            .query_map(params![idle_before_ms, max_access, limit as i64], document_row)?
            .collect::<Result<_, _>>()?;
        let mut out = Vec::with_capacity(docs.len());
        for d in docs {
            let ps = self.doc_passages(&d.id)?;
            out.push((d, ps));
        }
        Ok(out)
    }

    /// A document's passages, oldest first (none when it does not exist).
    pub fn doc_passages(&self, doc_id: &str) -> Result<Vec<Passage>, MemoryError> {
        let ids = self.passage_ids(doc_id)?;
        let mut ps = self.passages(&ids)?;
        ps.sort_by_key(|p| (p.ts_ms, p.id));
        Ok(ps)
    }

    /// Marks documents as distilled into the graph at `at_ms` (they stay where they are).
    pub fn mark_archived(&mut self, ids: &[String], at_ms: i64) -> Result<usize, MemoryError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut n = 0;
        {
            let mut st = tx.prepare_cached("UPDATE documents SET archived_at_ms = ?1 WHERE id = ?2")?;
            for id in ids {
                n += st.execute(params![at_ms, id])?;
            }
        }
        tx.commit()?;
        Ok(n)
    }

    /// Records reads of documents (recall hits, batched by the documents actor): each
    /// id's access count grows by its number of hits and its last access becomes the
    /// time of its latest hit (if later). Unknown ids (deleted meanwhile) are ignored.
    pub fn touch_documents(&mut self, hits: &std::collections::HashMap<String, (u32, i64)>) -> Result<(), MemoryError> {
        if hits.is_empty() {
            return Ok(());
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut st = tx.prepare_cached(
                "UPDATE documents SET access_count = access_count + ?1, last_access_ms = MAX(last_access_ms, ?2) WHERE id = ?3",
            )?;
            for (id, (n, at_ms)) in hits {
                st.execute(params![i64::from(*n), at_ms, id])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Deletes a document; false when it was not there.
    pub fn delete_document(&mut self, id: &str) -> Result<bool, MemoryError> {
        let passages = self.passage_ids(id)?;
        let gone = self.conn.execute("DELETE FROM documents WHERE id = ?1", [id])? > 0;
        self.unindex(id, &passages);
        Ok(gone)
    }

    fn passage_ids(&self, doc_id: &str) -> Result<Vec<i64>, MemoryError> {
        let mut st = self.conn.prepare_cached("SELECT id FROM passages WHERE doc_id = ?1")?;
        let ids = st.query_map([doc_id], |r| r.get(0))?.collect::<Result<_, _>>()?;
        Ok(ids)
    }

    /// Takes a removed document and its passages out of the search indexes (rebuilt
    /// later when many are).
    fn unindex(&mut self, id: &str, passages: &[i64]) {
        let cache = self.passage_cache.get_mut();
        for p in passages {
            cache.remove(p);
        }
        if self.index.as_mut().is_some_and(|ix| ix.remove(&id.to_owned())) {
            self.index = None;
        }
        if let Some(ix) = self.passages_ix.as_mut() {
            let mut rebuild = false;
            for p in passages {
                rebuild |= ix.remove(&Unit::Passage(*p));
            }
            if rebuild {
                self.passages_ix = None;
            }
        }
    }

    /// The documents most similar to `text` (TF-IDF cosine above 0.05), best first.
    /// With `consume` they are removed from the store (consume-on-read); otherwise
    /// their access count and time are updated.
    pub fn query_documents(
        &mut self,
        text: &str,
        top_k: usize,
        consume: bool,
        qv: Option<&QueryVector>,
    ) -> Result<Vec<Document>, MemoryError> {
        let scored = self.search_documents(text, top_k, qv)?;
        let now = now_ms();
        let mut consumed = Vec::new();
        if consume {
            for d in &scored {
                consumed.push((d.id.clone(), self.passage_ids(&d.id)?));
            }
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for d in &scored {
            if consume {
                // Its passages (and their vectors) go with it, by trigger.
                tx.execute("DELETE FROM documents WHERE id = ?1", params![d.id])?;
            } else {
                tx.execute(
                    "UPDATE documents SET access_count = access_count + 1, last_access_ms = ?1 WHERE id = ?2",
                    params![now, d.id],
                )?;
            }
        }
        tx.commit()?;
        for (id, passages) in consumed {
            self.unindex(&id, &passages);
        }
        Ok(scored)
    }

    /// The documents most related to `text`, best first, without touching them (an
    /// operator's look does not count as a read: reads decide when a document is cold).
    /// Hybrid ranking (`retrieve`): BM25 over summary + content, fused with dense cosine
    /// when `qv` is given and documents have vectors of its space.
    pub fn search_documents(
        &mut self,
        text: &str,
        top_k: usize,
        qv: Option<&QueryVector>,
    ) -> Result<Vec<Document>, MemoryError> {
        if text.trim().is_empty() {
            return Ok(Vec::new());
        }
        if self.index.is_none() {
            self.index = Some(super::index::docindex::DocIndex::build(&self.conn)?);
        }
        let ix = self.index.as_mut().expect("built above");
        if let Some(q) = qv {
            ix.sync_vectors(&self.conn, &q.space)?;
        }
        let ids = ix.search(text, qv.map(|q| q.vec.as_slice()), DENSE_MIN, top_k.max(1));
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(d) = self.documents_by_id(&id)? {
                out.push(d);
            }
        }
        Ok(out)
    }

    /// The recall units (window events and passages) most related to `text`, best
    /// first: the hybrid retriever (BM25 fused with dense cosine of `qv` at
    /// ≥ `dense_min`) over both tiers' recall indexes, merged by their scores
    /// (`docindex::merge`) — what per-turn recall does with the two actors' answers.
    pub fn search_units(
        &mut self,
        text: &str,
        qv: Option<&QueryVector>,
        dense_min: f32,
        top_k: usize,
    ) -> Result<Vec<Unit>, MemoryError> {
        let events = self.search_event_units(text, qv, dense_min, top_k)?;
        let passages = self.search_passage_units(text, qv, dense_min, top_k)?;
        Ok(super::index::docindex::merge(vec![events, passages], top_k.max(1)))
    }

    /// The context events most related to `text`, with their scores (the context
    /// tier's half of [`Self::search_units`]); the event index is built on the first call.
    pub fn search_event_units(
        &mut self,
        text: &str,
        qv: Option<&QueryVector>,
        dense_min: f32,
        top_k: usize,
    ) -> Result<super::index::docindex::Ranked<Unit>, MemoryError> {
        let (conn, slot, build) = self.tier(Tier::Events);
        Self::scored(conn, slot, build, text, qv, dense_min, top_k)
    }

    /// The passages most related to `text`, with their scores (the document tier's
    /// half of [`Self::search_units`]); the passage index is built on the first call.
    pub fn search_passage_units(
        &mut self,
        text: &str,
        qv: Option<&QueryVector>,
        dense_min: f32,
        top_k: usize,
    ) -> Result<super::index::docindex::Ranked<Unit>, MemoryError> {
        let (conn, slot, build) = self.tier(Tier::Passages);
        Self::scored(conn, slot, build, text, qv, dense_min, top_k)
    }

    /// The BM25 half of [`Self::search_event_units`] or [`Self::search_passage_units`],
    /// ranked while the query's vector is still being computed (`None`: an empty
    /// query, which searches nothing).
    pub fn lexical_units(
        &mut self,
        tier: Tier,
        text: &str,
    ) -> Result<Option<super::index::docindex::Lexical>, MemoryError> {
        if text.trim().is_empty() {
            return Ok(None);
        }
        let (conn, slot, build) = self.tier(tier);
        Ok(Some(Self::index_in(conn, slot, build)?.lexical(text)))
    }

    /// The search of [`Self::lexical_units`] finished with the vector that came since.
    pub fn finish_units(
        &mut self,
        tier: Tier,
        lexical: Option<super::index::docindex::Lexical>,
        qv: Option<&QueryVector>,
        dense_min: f32,
        top_k: usize,
    ) -> Result<super::index::docindex::Ranked<Unit>, MemoryError> {
        let Some(lexical) = lexical else {
            return Ok(Default::default());
        };
        let (conn, slot, build) = self.tier(tier);
        let ix = Self::index_in(conn, slot, build)?;
        if let Some(q) = qv {
            ix.sync_vectors(conn, &q.space)?;
        }
        Ok(ix.finish(lexical, qv.map(|q| q.vec.as_slice()), dense_min, top_k.max(1)))
    }

    /// The connection, index slot and index builder of one recall tier.
    #[allow(clippy::type_complexity)]
    fn tier(
        &mut self,
        tier: Tier,
    ) -> (
        &Connection,
        &mut Option<super::index::docindex::RecallIndex>,
        fn(&Connection) -> rusqlite::Result<super::index::docindex::RecallIndex>,
    ) {
        match tier {
            Tier::Events => (&self.conn, &mut self.events_ix, events_index),
            Tier::Passages => (&self.conn, &mut self.passages_ix, passages_index),
        }
    }

    /// The index in `slot`, built by `build` when there is none (first use, or
    /// dropped for a rebuild).
    fn index_in<'s>(
        conn: &Connection,
        slot: &'s mut Option<super::index::docindex::RecallIndex>,
        build: fn(&Connection) -> rusqlite::Result<super::index::docindex::RecallIndex>,
    ) -> Result<&'s mut super::index::docindex::RecallIndex, MemoryError> {
        if slot.is_none() {
            *slot = Some(build(conn)?);
        }
        Ok(slot.as_mut().expect("built above"))
    }

    /// Searches the index in `slot`, built by `build` on the first call (an empty
    /// query searches nothing and builds nothing).
    fn scored(
        conn: &Connection,
        slot: &mut Option<super::index::docindex::RecallIndex>,
        build: fn(&Connection) -> rusqlite::Result<super::index::docindex::RecallIndex>,
        text: &str,
        qv: Option<&QueryVector>,
        dense_min: f32,
        top_k: usize,
    ) -> Result<super::index::docindex::Ranked<Unit>, MemoryError> {
        if text.trim().is_empty() {
            return Ok(Default::default());
        }
        let ix = Self::index_in(conn, slot, build)?;
        if let Some(q) = qv {
            ix.sync_vectors(conn, &q.space)?;
        }
        Ok(ix.search_scored(text, qv.map(|q| q.vec.as_slice()), dense_min, top_k.max(1)))
    }

    /// Passages by id (missing ones skipped), in the order asked. A passage whose
    /// token count was not stored yet (migrated from before passages) is counted now.
    pub fn passages(&self, ids: &[i64]) -> Result<Vec<Passage>, MemoryError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT id, doc_id, ts_ms, speaker, text, tokens, principal FROM passages WHERE id = ?1")?;
        let mut out = Vec::with_capacity(ids.len());
        let mut cache = self.passage_cache.borrow_mut();
        for id in ids {
            if let Some(p) = cache.get(id) {
                out.push(p.clone());
                continue;
            }
            let p = st
                .query_row([id], |r| {
                    Ok(Passage {
                        id: r.get(0)?,
                        doc_id: r.get(1)?,
                        ts_ms: r.get(2)?,
                        speaker: r.get(3)?,
                        text: r.get(4)?,
                        tokens: r.get::<_, i64>(5)? as usize,
                        principal: r.get(6)?,
                    })
                })
                .optional()?;
            if let Some(mut p) = p {
                if p.tokens == 0 && !p.text.is_empty() {
                    p.tokens = crate::llm::tokens::count(&p.text);
                    self.conn.execute(
                        "UPDATE passages SET tokens = ?1 WHERE id = ?2",
                        params![p.tokens as i64, p.id],
                    )?;
                }
                if cache.len() >= PASSAGE_CACHE {
                    cache.clear();
                }
                cache.insert(p.id, p.clone());
                out.push(p);
            }
        }
        Ok(out)
    }

    /// The passage said after `p` in its document, if any.
    pub fn next_passage(&self, p: &Passage) -> Result<Option<Passage>, MemoryError> {
        let next: Option<i64> = self
            .conn
            .prepare_cached("SELECT id FROM passages WHERE doc_id = ?1 AND id > ?2 ORDER BY id LIMIT 1")?
            .query_row(params![p.doc_id, p.id], |r| r.get(0))
            .optional()?;
        Ok(match next {
            Some(id) => self.passages(&[id])?.pop(),
            None => None,
        })
    }

    /// Rows that have no vector of `space` yet (with `events`, the recall units first:
    /// context events, then passages; then documents, oldest first), with the text to
    /// embed: at most `limit`.
    pub fn missing_vectors(
        &self,
        space: &str,
        limit: usize,
        events: bool,
    ) -> Result<Vec<(VectorRef, String)>, MemoryError> {
        let mut out = Vec::new();
        if !events {
            return self.missing_document_vectors(space, limit, out);
        }
        let cols = EVENT_COLS
            .split(", ")
            .map(|c| format!("e.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let events_sql = format!(
            "SELECT {cols} FROM context_events e LEFT JOIN vectors v
               ON v.kind = 'event' AND v.ref = CAST(e.id AS TEXT) AND v.space = ?1
             WHERE v.ref IS NULL AND e.id > ?3 AND e.id <= ?4 ORDER BY e.id LIMIT ?2"
        );
        let found = self.missing_above(
            space,
            "event",
            "context_events",
            &events_sql,
            limit,
            event_row,
            |e: &super::context::Event| e.id,
        )?;
        out.extend(found.into_iter().map(|e| {
            (
                VectorRef::Event(e.id),
                super::index::docindex::vector_text(e.speaker(), e.said()),
            )
        }));
        if out.len() < limit {
            let found = self.missing_above(
                space,
                "passage",
                "passages",
                "SELECT p.id, p.speaker, p.text FROM passages p LEFT JOIN vectors v
                   ON v.kind = 'passage' AND v.ref = CAST(p.id AS TEXT) AND v.space = ?1
                 WHERE v.ref IS NULL AND p.id > ?3 AND p.id <= ?4 ORDER BY p.id LIMIT ?2",
                limit - out.len(),
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)),
                |p: &(i64, String, String)| p.0,
            )?;
            out.extend(found.into_iter().map(|(id, speaker, text)| {
                (
                    VectorRef::Passage(id),
                    super::index::docindex::vector_text(&speaker, &text),
                )
            }));
        }
        self.missing_document_vectors(space, limit, out)
    }

    /// Rows of `table` (`kind` in `vectors`) without a vector of `space`, above this
    /// store's mark (see `vector_marks`), at most `limit`, by `sql` (parameters: space,
    /// limit, mark, the highest id when asked). The mark then moves up to just below
    /// the first row found, or to that highest id when none is missing: rows added
    /// meanwhile are above it.
    #[allow(clippy::too_many_arguments)]
    fn missing_above<T>(
        &self,
        space: &str,
        kind: &'static str,
        table: &str,
        sql: &str,
        limit: usize,
        row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
        id_of: fn(&T) -> i64,
    ) -> Result<Vec<T>, MemoryError> {
        let key = (space.to_owned(), kind);
        let mark = self.vector_marks.borrow().get(&key).copied().unwrap_or(0);
        let top: i64 = self
            .conn
            .query_row(&format!("SELECT COALESCE(MAX(id), 0) FROM {table}"), [], |r| r.get(0))?;
        let mut st = self.conn.prepare_cached(sql)?;
        let found: Vec<T> = st
            .query_map(params![space, limit as i64, mark, top], row)?
            .collect::<Result<_, _>>()?;
        let next = found.first().map_or(top, |f| id_of(f) - 1);
        self.vector_marks.borrow_mut().insert(key, next.max(mark));
        Ok(found)
    }

    fn missing_document_vectors(
        &self,
        space: &str,
        limit: usize,
        mut out: Vec<(VectorRef, String)>,
    ) -> Result<Vec<(VectorRef, String)>, MemoryError> {
        if out.len() < limit {
            let mut st = self.conn.prepare(
                "SELECT d.id, d.summary, d.content FROM documents d LEFT JOIN vectors v
                   ON v.kind = 'document' AND v.ref = d.id AND v.space = ?1
                 WHERE v.ref IS NULL ORDER BY d.created_at_ms LIMIT ?2",
            )?;
            let rows = st.query_map(params![space, (limit - out.len()) as i64], |r| {
                Ok((
                    VectorRef::Document(r.get(0)?),
                    format!("{} {}", r.get::<_, String>(1)?, r.get::<_, String>(2)?),
                ))
            })?;
            for row in rows {
                out.push(row?);
            }
        }
        Ok(out)
    }

    /// The vectors of `space` of the context events, by event id.
    pub fn event_vectors(&self, space: &str) -> Result<std::collections::HashMap<i64, Vec<f32>>, MemoryError> {
        let mut st = self
            .conn
            .prepare("SELECT ref, vec FROM vectors WHERE kind = 'event' AND space = ?1")?;
        let rows = st.query_map([space], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?)))?;
        let mut out = std::collections::HashMap::new();
        for row in rows {
            let (id, blob) = row?;
            if let (Ok(id), Some(v)) = (id.parse::<i64>(), super::embed::from_blob(&blob)) {
                out.insert(id, v);
            }
        }
        Ok(out)
    }

    /// How many rows exist (documents, plus context events and passages with `events`)
    /// and how many of them have a vector of `space`.
    pub fn vector_counts(&self, space: &str, events: bool) -> Result<(usize, usize), MemoryError> {
        let (total_sql, done_sql) = if events {
            (
                "SELECT (SELECT COUNT(*) FROM context_events) + (SELECT COUNT(*) FROM documents) + (SELECT COUNT(*) FROM passages)",
                "SELECT COUNT(*) FROM vectors WHERE space = ?1",
            )
        } else {
            (
                "SELECT COUNT(*) FROM documents",
                "SELECT COUNT(*) FROM vectors WHERE space = ?1 AND kind = 'document'",
            )
        };
        let total: i64 = self.conn.query_row(total_sql, [], |r| r.get(0))?;
        let done: i64 = self.conn.query_row(done_sql, [space], |r| r.get(0))?;
        Ok((total as usize, done as usize))
    }

    /// Stores vectors of one space (replacing any other space's vector of the same row),
    /// in one transaction. Rows deleted meanwhile are skipped.
    pub fn put_vectors(&mut self, space: &str, items: &[(VectorRef, Vec<f32>)]) -> Result<(), MemoryError> {
        // A row's vector of another space is replaced: that space's marks no longer hold.
        self.vector_marks.borrow_mut().retain(|(s, _), _| s == space);
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for (r, v) in items {
            let (kind, id, exists) = match r {
                VectorRef::Event(id) => (
                    "event",
                    id.to_string(),
                    tx.query_row("SELECT 1 FROM context_events WHERE id = ?1", [id], |_| Ok(()))
                        .optional()?
                        .is_some(),
                ),
                VectorRef::Document(id) => (
                    "document",
                    id.clone(),
                    tx.query_row("SELECT 1 FROM documents WHERE id = ?1", [id], |_| Ok(()))
                        .optional()?
                        .is_some(),
                ),
                VectorRef::Passage(id) => (
                    "passage",
                    id.to_string(),
                    tx.query_row("SELECT 1 FROM passages WHERE id = ?1", [id], |_| Ok(()))
                        .optional()?
                        .is_some(),
                ),
            };
            if exists {
                tx.execute(
                    "INSERT OR REPLACE INTO vectors (kind, ref, space, vec) VALUES (?1, ?2, ?3, ?4)",
                    params![kind, id, space, super::embed::to_blob(v)],
                )?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Stores a document written on purpose (`doc_commit`); the same content again
    /// returns the existing document's id.
    pub fn commit_document(&mut self, summary: &str, content: &str) -> Result<String, MemoryError> {
        let hash = content_hash(content);
        if let Some(id) = self
            .conn
            .query_row("SELECT id FROM documents WHERE content_hash = ?1", params![hash], |r| {
                r.get::<_, String>(0)
            })
            .optional()?
        {
            return Ok(id);
        }
        let now = now_ms();
        let id = format!(
            "doc_{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        self.conn.execute(
            "INSERT INTO documents (id, created_at_ms, updated_at_ms, source, summary, content, content_hash, access_count, last_access_ms)
             VALUES (?1, ?2, ?2, 'manual', ?3, ?4, ?5, 1, ?2)",
            params![id, now, summary, content, hash],
        )?;
        if let Some(ix) = self.index.as_mut() {
            ix.add(&id, &super::index::docindex::doc_text(summary, content));
        }
        // A written document is recalled as one passage (its summary says what it is).
        let text = if summary.trim().is_empty() || content.starts_with(summary.trim()) {
            content.to_owned()
        } else {
            format!("{summary}: {content}")
        };
        self.conn.execute(
            "INSERT INTO passages (doc_id, ts_ms, speaker, text, tokens) VALUES (?1, ?2, 'document', ?3, ?4)",
            params![id, now, text, crate::llm::tokens::count(&text) as i64],
        )?;
        let pid = self.conn.last_insert_rowid();
        if let Some(ix) = self.passages_ix.as_mut() {
            ix.add_unit(&Unit::Passage(pid), now, "document", &text);
        }
        Ok(id)
    }

    /// The graph → document snapshot of one entity (`syncGraphToDocs`): the document
    /// `graph:<entity>` (source `graph_snapshot`) holds `content`, replaced when it
    /// changed; answers whether it was written.
    ///
    /// It has no passages: per-turn recall already brings graph facts through the facts
    /// tier, and the same fact twice would only take the evidence's place in the
    /// budget. It is found by `doc_query` and listed in the Memory view, and it is
    /// marked archived at once, so the archive heartbeat never distills it back into
    /// the graph it came from.
    pub fn upsert_snapshot(&mut self, entity: &str, content: &str) -> Result<bool, MemoryError> {
        let id = format!("graph:{entity}");
        // Salted: a snapshot never collides with a written document of the same text.
        let hash = content_hash(&format!("graph_snapshot\0{content}"));
        let stored: Option<String> = self
            .conn
            .query_row("SELECT content_hash FROM documents WHERE id = ?1", [&id], |r| r.get(0))
            .optional()?;
        if stored.as_deref() == Some(hash.as_str()) {
            return Ok(false);
        }
        let now = now_ms();
        let summary = crate::i18n::Msg::GraphSnapshot { entity }.text();
        if stored.is_some() {
            self.conn.execute(
                "UPDATE documents SET content = ?2, summary = ?3, content_hash = ?4, updated_at_ms = ?5 WHERE id = ?1",
                params![id, content, summary, hash, now],
            )?;
            self.conn
                .execute("DELETE FROM vectors WHERE kind = 'document' AND ref = ?1", [&id])?;
            self.unindex(&id, &[]);
        } else {
            self.conn.execute(
                "INSERT INTO documents (id, created_at_ms, updated_at_ms, source, summary, content, content_hash, access_count, last_access_ms, archived_at_ms)
                 VALUES (?1, ?2, ?2, 'graph_snapshot', ?3, ?4, ?5, 0, ?2, ?2)",
                params![id, now, summary, content, hash],
            )?;
        }
        if let Some(ix) = self.index.as_mut() {
            ix.add(&id, &super::index::docindex::doc_text(&summary, content));
        }
        Ok(true)
    }

    /// One document by id.
    pub fn documents_by_id(&self, id: &str) -> Result<Option<Document>, MemoryError> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {DOCUMENT_COLS} FROM documents WHERE id = ?1"),
                [id],
                document_row,
            )
            .optional()?)
    }

    /// How many documents there are — what was said or written; the graph's snapshot
    /// documents (derived, rewritten as the graph changes) are not counted.
    pub fn count_documents(&self) -> Result<usize, MemoryError> {
        let n: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM documents WHERE source != 'graph_snapshot'",
            [],
            |r| r.get(0),
        )?;
        Ok(n as usize)
    }

    /// Every document, newest first.
    pub fn documents(&self) -> Result<Vec<Document>, MemoryError> {
        let mut st = self.conn.prepare(&format!(
            "SELECT {DOCUMENT_COLS} FROM documents ORDER BY created_at_ms DESC"
        ))?;
        let rows = st.query_map([], document_row)?;
        rows.collect::<Result<_, _>>().map_err(Into::into)
    }

    /// Folds the WAL back into the database file (shutdown).
    pub fn checkpoint(&self) -> Result<(), MemoryError> {
        self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
        Ok(())
    }
}

/// What one import batch wrote.
#[derive(Debug, Default)]
pub struct ImportedBatch {
    /// The events stored (with their ids), in the batch's order.
    pub events: Vec<Event>,
    /// Lines skipped because their digest was imported before (or earlier in the batch).
    pub skipped: usize,
}

impl MemoryStore {
    /// Stores imported turns in one transaction: each line's digest first (a digest
    /// seen before skips the line), then its event. Either the whole batch is committed
    /// or nothing is.
    pub fn import_batch(&mut self, lines: &[super::context::import::ImportLine]) -> Result<ImportedBatch, MemoryError> {
        let now = now_ms();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut out = ImportedBatch::default();
        {
            let mut mark = tx.prepare_cached(
                "INSERT OR IGNORE INTO imported_turns (digest, ts_ms, speaker, origin, external_id, event_id, imported_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6)",
            )?;
            let mut insert = tx.prepare_cached(
                "INSERT INTO context_events (ts_ms, source, input, response, tools_used, tool_results) VALUES (?1, ?2, ?3, '', '[]', '[]')",
            )?;
            let mut link = tx.prepare_cached("UPDATE imported_turns SET event_id = ?1 WHERE digest = ?2")?;
            for l in lines {
                let digest = l.digest();
                if mark.execute(params![digest, l.ts_ms, l.speaker, l.source, l.id, now])? == 0 {
                    out.skipped += 1;
                    continue;
                }
                let mut e = l.event();
                insert.execute(params![e.ts_ms, e.source, e.input])?;
                e.id = tx.last_insert_rowid();
                link.execute(params![e.id, digest])?;
                out.events.push(e);
            }
        }
        tx.commit()?;
        if let Some(ix) = self.events_ix.as_mut() {
            for e in &out.events {
                ix.add_unit(&Unit::Event(e.id), e.ts_ms, e.speaker(), e.said());
            }
        }
        Ok(out)
    }
}

/// One line per event: `[HH:MM] source: input → response`, plus tool lines.
fn document_content(events: &[Event]) -> String {
    let mut out = String::new();
    for e in events {
        let secs = e.ts_ms.div_euclid(1000).rem_euclid(86_400);
        out.push_str(&format!(
            "[{:02}:{:02}] {}: {}",
            secs / 3600,
            (secs % 3600) / 60,
            e.source,
            e.input
        ));
        if !e.response.is_empty() {
            out.push_str(&format!(" → {}", super::truncate_chars(&e.response, 100, "…")));
        }
        out.push('\n');
        for t in &e.tool_results {
            out.push_str(
                &crate::i18n::Msg::DocumentToolLine {
                    tool: &t.name,
                    output: &super::truncate_chars(&t.output, 200, "…"),
                }
                .text(),
            );
        }
    }
    out
}

/// The extractive summary line of archived events (see [`super::documents::summary`]).
fn document_summary(events: &[Event]) -> String {
    super::documents::summary::summarize(&super::documents::summary::utterances(events)).render()
}

/// `h%08x` of a 31-multiplier rolling hash over the characters.
/// The dedupe key of a document's content: SHA-256. (A 32-bit hash, as first written,
/// made two different documents "equal" about once in 65k — and the second was lost.)
fn content_hash(s: &str) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(s.as_bytes());
    let mut out = String::with_capacity(71);
    out.push_str("sha256:");
    for b in d {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The recall index over every context event of `conn` (the context tier's half of
/// recall). The store reads its own rows; the index only ranks.
fn events_index(conn: &Connection) -> rusqlite::Result<super::index::docindex::RecallIndex> {
    let mut ix = super::index::docindex::RecallIndex::default();
    let mut st = conn.prepare(&format!("SELECT {EVENT_COLS} FROM context_events ORDER BY ts_ms, id"))?;
    for e in st.query_map([], event_row)? {
        let e = e?;
        ix.add_unit(&Unit::Event(e.id), e.ts_ms, e.speaker(), e.said());
    }
    tracing::debug!(units = ix.len(), "event recall index built");
    Ok(ix)
}

/// The recall index over every passage of `conn` (the document tier's half of recall).
fn passages_index(conn: &Connection) -> rusqlite::Result<super::index::docindex::RecallIndex> {
    let mut ix = super::index::docindex::RecallIndex::default();
    let mut st = conn.prepare("SELECT id, ts_ms, speaker, text FROM passages ORDER BY id")?;
    let rows = st.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
        ))
    })?;
    for row in rows {
        let (id, ts, speaker, text) = row?;
        ix.add_unit(&Unit::Passage(id), ts, &speaker, &text);
    }
    tracing::debug!(units = ix.len(), "passage recall index built");
    Ok(ix)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: i64, input: &str) -> Event {
        Event {
            id: 0,
            ts_ms: ts,
            source: "http".into(),
            input: input.into(),
            response: "ok".into(),
            tools_used: vec![],
            tool_results: vec![],
            principal: String::new(),
        }
    }

    #[test]
    fn a_graph_snapshot_is_replaced_when_it_changes_and_never_a_passage() {
        let mut s = MemoryStore::open_in_memory().unwrap();
        assert!(
            s.upsert_snapshot("Ingrid", "Ingrid (Person)\n- Ingrid lives in Tromsø\n")
                .unwrap()
        );
        assert!(
            !s.upsert_snapshot("Ingrid", "Ingrid (Person)\n- Ingrid lives in Tromsø\n")
                .unwrap(),
            "unchanged"
        );
        assert!(
            s.upsert_snapshot("Ingrid", "Ingrid (Person)\n- Ingrid lives in Oslo\n")
                .unwrap()
        );
        let found = s.search_documents("Ingrid Oslo", 3, None).unwrap();
        assert_eq!(found[0].id, "graph:Ingrid");
        assert!(found[0].content.contains("Oslo") && !found[0].content.contains("Tromsø"));
        assert!(s.doc_passages("graph:Ingrid").unwrap().is_empty());
        assert!(
            s.cold_documents(i64::MAX, i64::MAX, 10).unwrap().is_empty(),
            "never distilled again"
        );
    }

    #[test]
    fn the_search_index_follows_every_change_and_vectors_of_the_asked_space() {
        let mut s = MemoryStore::open_in_memory().unwrap();
        let a = s.commit_document("puppy", "we adopted a puppy named Max").unwrap();
        assert_eq!(s.search_documents("puppy", 3, None).unwrap()[0].id, a);
        // Added after the index was built: found without a rebuild.
        let b = s.commit_document("garden", "tomatoes in the garden").unwrap();
        assert_eq!(s.search_documents("tomatoes", 3, None).unwrap()[0].id, b);
        let shed = s.append(ev(1, "the garden shed needs paint")).unwrap();
        let archived = s.archive(&[shed]).unwrap().unwrap();
        assert_eq!(s.search_documents("shed paint", 3, None).unwrap()[0].id, archived);
        // Removed: never found again.
        assert!(s.delete_document(&a).unwrap());
        assert!(s.search_documents("puppy", 3, None).unwrap().is_empty());
        assert_eq!(s.query_documents("tomatoes", 3, true, None).unwrap().len(), 1);
        assert!(s.search_documents("tomatoes", 3, None).unwrap().is_empty());
        // Dense side: a vector close to the query ranks a document BM25 cannot see.
        s.put_vectors("sp/2", &[(VectorRef::Document(archived.clone()), vec![1.0, 0.0])])
            .unwrap();
        let qv = QueryVector {
            space: "sp/2".into(),
            vec: vec![0.9, 0.1],
        };
        assert_eq!(
            s.search_documents("unrelated words", 3, Some(&qv)).unwrap()[0].id,
            archived
        );
        // Vectors of another space are never compared.
        let other = QueryVector {
            space: "other/2".into(),
            vec: vec![0.9, 0.1],
        };
        assert!(
            s.search_documents("unrelated words", 3, Some(&other))
                .unwrap()
                .is_empty()
        );
        // A far vector does not make a document "related".
        let far = QueryVector {
            space: "sp/2".into(),
            vec: vec![0.0, 1.0],
        };
        assert!(s.search_documents("unrelated words", 3, Some(&far)).unwrap().is_empty());
    }

    #[test]
    fn an_archive_interrupted_between_its_two_halves_is_finished_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.db");
        // The two tiers' connections, as the two actors hold them.
        let mut context = MemoryStore::open(&path).unwrap();
        let mut documents = MemoryStore::open(&path).unwrap();
        let events: Vec<Event> = (0..3)
            .map(|i| {
                context
                    .append(ev(i * 1000, &format!("note {i} about the shed")))
                    .unwrap()
            })
            .collect();
        assert!(
            documents
                .search_passage_units("shed", None, 0.2, 10)
                .unwrap()
                .rows
                .is_empty()
        );
        // The document half commits; the context "crashes" before deleting the events.
        let doc = documents.archive_documents(&events[..2]).unwrap().unwrap();
        assert_eq!(context.events().unwrap().len(), 3, "the events are still there");
        assert_eq!(
            documents
                .search_passage_units("shed", None, 0.2, 10)
                .unwrap()
                .rows
                .len(),
            2,
            "the passage index follows the archive"
        );
        // Asked again (a retry): the same document, nothing archived twice.
        assert_eq!(documents.archive_documents(&events[..2]).unwrap(), Some(doc.clone()));
        assert_eq!(documents.count_documents().unwrap(), 1);
        assert_eq!(documents.passage_ids(&doc).unwrap().len(), 2);
        // The context tier reopens: the archived events leave, the third stays.
        drop(context);
        let mut context = MemoryStore::open(&path).unwrap();
        assert_eq!(context.forget_archived().unwrap(), 2);
        let left = context.events().unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].input, "note 2 about the shed");
        assert_eq!(context.forget_archived().unwrap(), 0, "done once");
        // Each tier searches only its own rows; together they are every unit once.
        let ev_hits = context.search_event_units("shed", None, 0.2, 10).unwrap();
        let doc_hits = documents.search_passage_units("shed", None, 0.2, 10).unwrap();
        assert_eq!((ev_hits.rows.len(), doc_hits.rows.len()), (1, 2));
        assert!(
            ev_hits
                .rows
                .iter()
                .chain(&doc_hits.rows)
                .all(|s| s.bm25.is_some() && s.cos.is_none())
        );
        assert_eq!((ev_hits.stats.n, doc_hits.stats.n), (1, 2), "each its own rows");
    }

    #[test]
    fn imported_turns_are_stored_once() {
        use crate::memory::context::import::decode;
        let body = br#"{"time": 1683554160, "speaker": "Caroline", "text": "I adopted a greyhound"}
{"time": 1683554161, "speaker": "Melanie", "text": "Lovely!"}
{"time": 1683554160, "speaker": "Caroline", "text": "I adopted a greyhound", "source": "again"}"#;
        let lines = decode(body, i64::MAX / 2).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.db");
        let mut s = MemoryStore::open(&path).unwrap();
        let first = s.import_batch(&lines).unwrap();
        assert_eq!(
            (first.events.len(), first.skipped),
            (2, 1),
            "a repeat inside the body is skipped"
        );
        assert!(first.events.iter().all(|e| e.id > 0));
        drop(s);
        let mut s = MemoryStore::open(&path).unwrap();
        let again = s.import_batch(&lines).unwrap();
        assert_eq!((again.events.len(), again.skipped), (0, 3), "digests survive a reopen");
        let events = s.events().unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(
            (events[0].source.as_str(), events[0].ts_ms),
            ("Caroline", 1_683_554_160_000)
        );
        // Archived events still count as imported.
        s.archive(&events).unwrap();
        assert_eq!(s.import_batch(&lines[..1]).unwrap().skipped, 1);
    }

    #[test]
    fn query_consume_and_commit() {
        let mut s = MemoryStore::open_in_memory().unwrap();
        s.archive(&[ev(1000, "我的猫叫咪咪")]).unwrap();
        let a = s.commit_document("天气", "明天下雨，记得带伞").unwrap();
        assert_eq!(
            s.commit_document("天气", "明天下雨，记得带伞").unwrap(),
            a,
            "same content, same document"
        );
        s.commit_document("北京", "下周去北京出差").unwrap();
        let hits = s.query_documents("猫叫什么", 3, false, None).unwrap();
        assert_eq!(hits.len(), 1);
        assert!(hits[0].content.contains("咪咪"));
        assert_eq!(
            s.documents()
                .unwrap()
                .iter()
                .find(|d| d.id == hits[0].id)
                .unwrap()
                .access_count,
            2
        );
        let taken = s.query_documents("带伞 下雨", 3, true, None).unwrap();
        assert_eq!(taken.len(), 1);
        assert_eq!(s.documents().unwrap().len(), 2, "consumed on read");
        assert!(s.query_documents("", 3, false, None).unwrap().is_empty());
    }

    #[test]
    fn appended_events_survive_reopen_and_archive_moves_them_to_a_document() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.db");
        {
            let mut s = MemoryStore::open(&path).unwrap();
            for i in 0..3 {
                s.append(ev(i * 1000, &format!("m{i}"))).unwrap();
            }
        } // dropped without any flush call: the rows are committed already
        let mut s = MemoryStore::open(&path).unwrap();
        let events = s.events().unwrap();
        assert_eq!(
            events.iter().map(|e| e.input.as_str()).collect::<Vec<_>>(),
            ["m0", "m1", "m2"]
        );
        let id = s.archive(&events[..2]).unwrap().unwrap();
        assert_eq!(s.events().unwrap().len(), 1);
        let docs = s.documents().unwrap();
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0].id, id);
        assert!(docs[0].content.contains("http: m0 → ok"));
        assert!(
            docs[0].summary.contains("turns between http and agent"),
            "{}",
            docs[0].summary
        );
        // The same content again refreshes the document instead of duplicating it.
        let again: Vec<Event> = events[..2]
            .iter()
            .map(|e| {
                let mut e = e.clone();
                e.id = 999;
                e
            })
            .collect();
        assert_eq!(s.archive(&again).unwrap().unwrap(), id);
        assert_eq!(s.documents().unwrap().len(), 1);
    }
}
