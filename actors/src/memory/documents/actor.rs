//! `kernel/memory/documents`: the document tier as its own actor (issue 9 item 6; the
//! design card: "every memory tier … are actix actors exchanging typed messages").
//!
//! It owns the document rows of `memory.db` (documents, their passages, the
//! `archived_events` record) through its own connection, and the two search indexes
//! over them (whole documents for `doc_query` and the memory browser, passages for
//! per-turn recall), rebuilt from SQLite on the first search after a (re)start.
//!
//! Who talks to it, each through a `TAddr<DocumentsActor>` the boot graph hands out
//! (`MemoryHandles::documents`): the context actor (archiving: [`ArchiveEvents`]),
//! per-turn recall ([`RecallPassages`], sent beside the context actor's `Recall`, not
//! after it), the `doc_query` / `doc_commit` tools ([`document_tools`]), the plugin
//! services (`doc.*`), the HTTP memory browser, the archive heartbeat ([`ColdDocs`],
//! [`MarkArchived`]), the owner's deletions ([`DeleteDoc`]) and the status API
//! ([`CountDocuments`]).
//!
//! A crash here is invisible to the context tier: recall goes on without passages
//! for that moment (logged), and an archive asked meanwhile fails, so the context
//! actor keeps its events and archives them on a later prune.

use actix::prelude::*;

use crate::host::{Handles, Host, HostContext, KernelActor};
use crate::memory::context::Event;
use crate::memory::index::docindex::{Ranked, Unit};
use crate::memory::recall::{Item, Origin};
use crate::memory::store::{Document, MemoryError, MemoryStore, QueryVector, Tier};

/// Why the document tier refused or failed a request.
#[derive(Debug, thiserror::Error)]
pub enum DocError {
    #[error(transparent)]
    Store(#[from] MemoryError),
    #[error("`content` is empty; give the document's text")]
    EmptyContent,
}

/// The documents actor: its store (own connection) with the indexes it builds.
pub struct DocumentsActor {
    store: MemoryStore,
    /// Recall hits not written yet: document id → (passages of it shown, when last
    /// shown). Written in one transaction a moment after the turn that read them
    /// ([`FlushAccess`]), so a turn's recall never waits on a write; the time is the
    /// read's, not the write's (a virtual clock may have moved in between).
    hits: std::collections::HashMap<String, (u32, i64)>,
    /// A flush is scheduled.
    flush_armed: bool,
}

/// How long recall hits wait before they are written (they are batched meanwhile).
const ACCESS_FLUSH: std::time::Duration = std::time::Duration::from_millis(500);

impl DocumentsActor {
    pub fn new(store: MemoryStore) -> Self {
        Self {
            store,
            hits: Default::default(),
            flush_armed: false,
        }
    }

    /// Counts the documents as read and schedules the write.
    fn record_hits(&mut self, ids: Vec<String>, ctx: &mut HostContext<Self>) {
        let now = crate::clock::now_ms();
        for id in ids {
            let hit = self.hits.entry(id).or_insert((0, now));
            hit.0 += 1;
            hit.1 = hit.1.max(now);
        }
        if !self.hits.is_empty() && !self.flush_armed {
            self.flush_armed = true;
            ctx.run_later(ACCESS_FLUSH, |host, ctx| host.notify(ctx, FlushAccess));
        }
    }

    fn flush_access(&mut self) {
        self.flush_armed = false;
        let hits = std::mem::take(&mut self.hits);
        if let Err(e) = self.store.touch_documents(&hits) {
            // Only coldness depends on it: the documents stay documents a while longer.
            tracing::warn!(documents = hits.len(), "recording recall hits failed: {e}");
        }
    }
}

/// A turn's prompt showed passages of these documents (one id per passage): they were
/// read. Batched: written a moment later, in one transaction with the other hits.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RecordReads(pub Vec<String>);

impl Handles<RecordReads> for DocumentsActor {
    type Reply = ();
    fn handle(&mut self, RecordReads(ids): RecordReads, ctx: &mut HostContext<Self>) {
        self.record_hits(ids, ctx);
    }
}

/// Writes the recall hits gathered since the last flush.
#[derive(Message)]
#[rtype(result = "()")]
pub struct FlushAccess;

impl Handles<FlushAccess> for DocumentsActor {
    type Reply = ();
    fn handle(&mut self, _: FlushAccess, _: &mut HostContext<Self>) {
        self.flush_access();
    }
}

impl KernelActor for DocumentsActor {
    const KIND: &'static str = "documents";

    fn started(&mut self, _: &mut HostContext<Self>) {
        match self.store.count_documents() {
            Ok(n) => tracing::info!(
                documents = n,
                "document tier ready (its indexes build on the first search)"
            ),
            Err(e) => tracing::warn!("document tier started but cannot count its documents: {e}"),
        }
    }

    fn stopped(&mut self, _: &mut HostContext<Self>) {
        self.flush_access();
        if let Err(e) = self.store.checkpoint() {
            tracing::warn!("memory checkpoint of the document tier at shutdown failed: {e}");
        }
    }
}

/// The document half of an archive: the events become one document (with a passage
/// each) and are recorded as archived, in one transaction. Answers the document's id
/// (`None`: nothing to archive). The context actor deletes the events only after `Ok`.
#[derive(Message)]
#[rtype(result = "Result<Option<String>, DocError>")]
pub struct ArchiveEvents(pub Vec<Event>);

/// The document half of per-turn recall: the passages most relevant to `query`, with
/// their scores (merged with the context actor's events by `docindex::merge`).
/// Read-only: the passages that make it into the prompt are reported back with
/// [`RecordReads`] (coldness is by last access). A failing lookup answers nothing
/// (logged): the prompt goes without passages.
#[derive(Message)]
#[rtype(result = "Ranked<Item>")]
pub struct RecallPassages {
    pub query: String,
    /// The query's embedding on its way (see `memory::context::actor::Recall::qv`).
    pub qv: Option<crate::memory::embed::actor::PendingVector>,
}

/// The documents: all of them (newest first) or, with a query, the 20 most similar
/// (best first). Read-only: access counts are not touched.
#[derive(Message)]
#[rtype(result = "Result<Vec<Document>, DocError>")]
pub struct GetDocuments {
    pub query: Option<String>,
    pub qv: Option<QueryVector>,
}

/// `doc_query`'s lookup: the `top_k` documents matching `query`, best first, left in
/// place (`doc_query` shows them in the timeline and records the read).
#[derive(Message)]
#[rtype(result = "Result<Vec<Document>, DocError>")]
pub struct FindDocuments {
    pub query: String,
    pub top_k: usize,
    pub qv: Option<QueryVector>,
}

/// Stores a written document (`doc_commit`, a plugin's `doc.insert`); the same content
/// again answers the existing id. An empty summary becomes the content's first 100
/// characters.
#[derive(Message)]
#[rtype(result = "Result<String, DocError>")]
pub struct CommitDocument {
    pub summary: String,
    pub content: String,
}

/// Writes one entity's graph snapshot document (`MemoryStore::upsert_snapshot`);
/// answers whether it changed.
#[derive(Message)]
#[rtype(result = "Result<bool, DocError>")]
pub struct UpsertSnapshot {
    pub entity: String,
    pub content: String,
}

impl Handles<UpsertSnapshot> for DocumentsActor {
    type Reply = Result<bool, DocError>;
    fn handle(&mut self, m: UpsertSnapshot, _: &mut HostContext<Self>) -> Self::Reply {
        Ok(self.store.upsert_snapshot(&m.entity, &m.content)?)
    }
}

/// Documents cold enough for the graph (the archive heartbeat), with their passages.
#[derive(Message)]
#[rtype(result = "Result<Vec<(Document, Vec<crate::memory::store::Passage>)>, DocError>")]
pub struct ColdDocs {
    /// Not read since this time (Unix ms).
    pub idle_before_ms: i64,
    /// Read at most this many times.
    pub max_access: i64,
    /// At most this many.
    pub limit: usize,
}

/// The archive heartbeat distilled these documents into the graph at `at_ms`: they are
/// marked (never deleted) so they are not distilled again.
#[derive(Message)]
#[rtype(result = "Result<usize, DocError>")]
pub struct MarkArchived {
    pub ids: Vec<String>,
    pub at_ms: i64,
}

/// Deletes a document with its passages and their vectors (the owner asked: the HTTP
/// API, the memory page, a plugin's `doc.remove`); answers whether it existed. The facts
/// derived from it alone leave the graph with it ([`crate::memory::lifecycle::forget::forget_document`]).
#[derive(Message)]
#[rtype(result = "Result<bool, DocError>")]
pub struct DeleteDoc(pub String);

/// A document's passages (none when it does not exist), oldest first.
#[derive(Message)]
#[rtype(result = "Result<Vec<crate::memory::store::Passage>, DocError>")]
pub struct DocPassages(pub String);

impl Handles<DocPassages> for DocumentsActor {
    type Reply = Result<Vec<crate::memory::store::Passage>, DocError>;
    fn handle(&mut self, DocPassages(id): DocPassages, _: &mut HostContext<Self>) -> Self::Reply {
        Ok(self.store.doc_passages(&id)?)
    }
}

/// How many documents there are (the status API).
#[derive(Message)]
#[rtype(result = "Result<usize, DocError>")]
pub struct CountDocuments;

impl Handles<ArchiveEvents> for DocumentsActor {
    type Reply = Result<Option<String>, DocError>;
    fn handle(&mut self, ArchiveEvents(events): ArchiveEvents, _: &mut HostContext<Self>) -> Self::Reply {
        crate::fault::point(
            crate::fault::site::DOCUMENTS_ARCHIVE,
            events.first().map_or("", |e| e.said()),
        );
        Ok(self.store.archive_documents(&events)?)
    }
}

impl Handles<RecallPassages> for DocumentsActor {
    type Reply = ResponseActFuture<Host<Self>, Ranked<Item>>;
    fn handle(&mut self, m: RecallPassages, _: &mut HostContext<Self>) -> Self::Reply {
        use crate::memory::recall::{DENSE_MIN, UNIT_CANDIDATES};
        crate::fault::point(crate::fault::site::DOCUMENTS_RECALL, &m.query);
        let Some(pending) = m.qv else {
            let units = self
                .store
                .search_passage_units(&m.query, None, DENSE_MIN, UNIT_CANDIDATES);
            return Box::pin(actix::fut::ready(self.resolve_passages(units)));
        };
        // BM25 now, the fusion once the query's vector is there (as in the context tier).
        let lexical = self.store.lexical_units(Tier::Passages, &m.query);
        Box::pin(
            actix::fut::wrap_future::<_, Host<Self>>(pending).map(move |qv, host, _| {
                let me = host.inner();
                let units = lexical.and_then(|l| {
                    me.store
                        .finish_units(Tier::Passages, l, qv.as_ref(), DENSE_MIN, UNIT_CANDIDATES)
                });
                me.resolve_passages(units)
            }),
        )
    }
}

/// A passage as a recall item.
fn item_of(p: crate::memory::store::Passage) -> Item {
    Item {
        origin: Origin::Passage { doc_id: p.doc_id },
        ts_ms: Some(p.ts_ms),
        speaker: p.speaker,
        text: p.text,
        tokens: p.tokens,
        principal: p.principal,
        reply: None,
    }
}

impl DocumentsActor {
    /// The passages of a search's units, as scored items, best first (a failed lookup
    /// leaves the prompt without documents this turn).
    fn resolve_passages(&mut self, units: Result<Ranked<Unit>, MemoryError>) -> Ranked<Item> {
        let units = match units {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!("passage recall failed, the prompt goes without documents this turn: {e}");
                return Ranked::default();
            }
        };
        let ids: Vec<i64> = units
            .rows
            .iter()
            .filter_map(|u| match u.row {
                Unit::Passage(id) => Some(id),
                Unit::Event(_) => None,
            })
            .collect();
        let mut passages: std::collections::HashMap<i64, crate::memory::store::Passage> = match self
            .store
            .passages(&ids)
        {
            Ok(ps) => ps.into_iter().map(|p| (p.id, p)).collect(),
            Err(e) => {
                tracing::warn!("reading recalled passages failed, the prompt goes without documents this turn: {e}");
                return Ranked::default();
            }
        };
        units.filter_map(|u| {
            let Unit::Passage(id) = u else { return None };
            let p = passages.remove(&id)?;
            // The reply to a question asked in it (the next passage of its document);
            // read only for a passage that asks (most do not).
            let next = if crate::memory::recall::asks(&p.text) {
                self.store.next_passage(&p).unwrap_or_else(|e| {
                    tracing::debug!("the reply to passage {} was not read: {e}", p.id);
                    None
                })
            } else {
                None
            };
            Some(crate::memory::recall::with_reply(item_of(p), next.map(item_of)))
        })
    }
}

impl Handles<GetDocuments> for DocumentsActor {
    type Reply = Result<Vec<Document>, DocError>;
    fn handle(&mut self, m: GetDocuments, _: &mut HostContext<Self>) -> Self::Reply {
        Ok(match m.query.as_deref().map(str::trim) {
            Some(q) if !q.is_empty() => self.store.search_documents(q, 20, m.qv.as_ref())?,
            _ => self.store.documents()?,
        })
    }
}

impl Handles<FindDocuments> for DocumentsActor {
    type Reply = Result<Vec<Document>, DocError>;
    fn handle(&mut self, m: FindDocuments, _: &mut HostContext<Self>) -> Self::Reply {
        Ok(self.store.search_documents(&m.query, m.top_k.max(1), m.qv.as_ref())?)
    }
}

impl Handles<CommitDocument> for DocumentsActor {
    type Reply = Result<String, DocError>;
    fn handle(&mut self, m: CommitDocument, _: &mut HostContext<Self>) -> Self::Reply {
        if m.content.trim().is_empty() {
            return Err(DocError::EmptyContent);
        }
        let summary = if m.summary.trim().is_empty() {
            m.content.chars().take(100).collect()
        } else {
            m.summary
        };
        Ok(self.store.commit_document(&summary, &m.content)?)
    }
}

impl Handles<ColdDocs> for DocumentsActor {
    type Reply = Result<Vec<(Document, Vec<crate::memory::store::Passage>)>, DocError>;
    fn handle(&mut self, m: ColdDocs, _: &mut HostContext<Self>) -> Self::Reply {
        Ok(self.store.cold_documents(m.idle_before_ms, m.max_access, m.limit)?)
    }
}

impl Handles<MarkArchived> for DocumentsActor {
    type Reply = Result<usize, DocError>;
    fn handle(&mut self, m: MarkArchived, _: &mut HostContext<Self>) -> Self::Reply {
        Ok(self.store.mark_archived(&m.ids, m.at_ms)?)
    }
}

impl Handles<DeleteDoc> for DocumentsActor {
    type Reply = Result<bool, DocError>;
    fn handle(&mut self, DeleteDoc(id): DeleteDoc, _: &mut HostContext<Self>) -> Self::Reply {
        Ok(self.store.delete_document(&id)?)
    }
}

impl Handles<CountDocuments> for DocumentsActor {
    type Reply = Result<usize, DocError>;
    fn handle(&mut self, _: CountDocuments, _: &mut HostContext<Self>) -> Self::Reply {
        Ok(self.store.count_documents()?)
    }
}
