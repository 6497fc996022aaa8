//! `kernel/memory/context`: the context tier as an actor (on the blocking arbiter).
//!
//! It owns the context window (the `context_events` rows, through its own connection,
//! and the events in memory) and the recall index of those events. Documents are the
//! documents actor's (`memory::documents`): an archive asks it to commit the document
//! first and removes the events from the window only once it did (see
//! `ContextActor::archive`).

use actix::prelude::*;

use crate::addr::TAddr;
use crate::host::{Handles, Host, HostContext, KernelActor};
use crate::i18n::Msg;
use crate::memory::context::{self, Event};
use crate::memory::documents::{ArchiveEvents, DocumentsActor};
use crate::memory::index::docindex::{Ranked, Unit};
use crate::memory::recall::{Item, Origin, WindowRecall};
use crate::memory::store::{Document, MemoryError, MemoryStore, Tier};

/// The context actor: the store plus the events in memory.
pub struct ContextActor {
    store: MemoryStore,
    events: Vec<Event>,
    /// o200k tokens of each window event's words, counted once (by event id).
    /// Keyed by event id (ours, sequential): a fast hash, not a DoS-resistant one.
    tokens: rustc_hash::FxHashMap<i64, usize>,
    /// Where archived events go.
    documents: TAddr<DocumentsActor>,
    /// An archive waits for the documents actor: a second prune meanwhile does nothing
    /// (its events are still in the window; the next prune archives them).
    archiving: bool,
}

/// Why the context tier did not do what it was asked (its messages' typed error).
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// The store failed (its text says what to check).
    #[error(transparent)]
    Store(#[from] MemoryError),
    /// The document tier refused the archive; nothing left the window.
    #[error(
        "the document tier could not store the archive ({0}); the events stay in the window and a later prune retries"
    )]
    NotArchived(crate::memory::documents::DocError),
}

impl ContextActor {
    /// Loads the context from the store, after finishing any archive a crash
    /// interrupted (events whose document was committed leave the window now).
    pub fn open(mut store: MemoryStore, documents: TAddr<DocumentsActor>) -> Result<Self, MemoryError> {
        store.forget_archived()?;
        let events = store.events()?;
        tracing::info!(events = events.len(), "context loaded");
        Ok(Self {
            store,
            events,
            tokens: Default::default(),
            documents,
            archiving: false,
        })
    }
}

impl KernelActor for ContextActor {
    const KIND: &'static str = "context";

    fn stopped(&mut self, _: &mut HostContext<Self>) {
        if let Err(e) = self.store.checkpoint() {
            tracing::warn!("memory checkpoint at shutdown failed: {e}");
        }
    }
}

/// How long a document lookup waits for its query's embedding.
pub const QUERY_EMBED_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// Appends an event; answers once it is committed to disk.
#[derive(Message)]
#[rtype(result = "Result<Event, ContextError>")]
pub struct AppendEvent(pub Event);

/// The context half of per-turn recall (`memory::recall`): the recency window and the
/// window events most relevant to `query`, with their scores. The documents actor's
/// `RecallPassages` is asked at the same time; `recall::assemble` merges both.
///
/// With `record`, the event (a turn's input) is appended once the recency window and
/// the BM25 half are taken — the input is not its own memory — and its commit is
/// answered beside the recall: one round trip where a turn used to make two.
#[derive(Message)]
#[rtype(result = "(WindowRecall, Option<Result<Event, ContextError>>)")]
pub struct Recall {
    /// The input the memory is matched against ("" = the recency window only).
    pub query: String,
    /// The input's embedding on its way (`None`: no dense side this turn). The BM25
    /// half is ranked on arrival, the fusion once the vector is there.
    pub qv: Option<crate::memory::embed::actor::PendingVector>,
    /// An event to append after the read ([`AppendEvent`]'s work and answer).
    pub record: Option<Event>,
    /// A guest's turn: only this principal's own events, and no search of the rest
    /// (`None`: the owner's turn, everything).
    pub only_principal: Option<String>,
}

/// `doc_query`'s second step: documents found in the document tier go back into the
/// timeline at their original time (as `cold_storage` events). Answers how many.
#[derive(Message)]
#[rtype(result = "Result<usize, ContextError>")]
pub struct RestoreDocuments {
    /// What was asked (the restored events say it).
    pub query: String,
    pub docs: Vec<Document>,
}

/// The whole context window.
#[derive(Message)]
#[rtype(result = "Vec<Event>")]
pub struct GetContext;

/// The distill heartbeat's round: when the window holds more than twice
/// `max_context_size` events, prune it down to `max_context_size` against the most
/// recent input (the last 10 stay); the removed events become a document. Answers how
/// many events were archived.
#[derive(Message)]
#[rtype(result = "Result<usize, ContextError>")]
pub struct DistillContext {
    pub max_context_size: usize,
}

/// How many events the window holds (the status API; the documents actor counts the
/// documents).
#[derive(Message)]
#[rtype(result = "usize")]
pub struct CountEvents;

/// Prunes the context against `query` when it holds more than `top_k` events; the
/// removed ones become a document. Answers how many events were archived.
#[derive(Message)]
#[rtype(result = "Result<usize, ContextError>")]
pub struct PruneContext {
    pub query: String,
    pub context_tokens: usize,
    pub max_context_size: usize,
}

impl Handles<AppendEvent> for ContextActor {
    type Reply = Result<Event, ContextError>;
    fn handle(&mut self, AppendEvent(e): AppendEvent, _: &mut HostContext<Self>) -> Self::Reply {
        self.append(e)
    }
}

impl ContextActor {
    /// Commits `e` to disk, then to the window.
    fn append(&mut self, e: Event) -> Result<Event, ContextError> {
        let e = self.store.append(e)?;
        self.events.push(e.clone());
        Ok(e)
    }
}

/// A window event as a recall item, its token count cached in `tokens`.
fn item_of(tokens: &mut rustc_hash::FxHashMap<i64, usize>, e: &Event) -> Item {
    let said = e.said();
    let tokens = *tokens.entry(e.id).or_insert_with(|| crate::llm::tokens::count(said));
    // A guest's words (and the replies to them) are labelled with whose they were and
    // carry the principal: the prompt quotes them as data (`MemoryText::quoted`), never
    // as the owner's memory.
    // Reviewed as a tool result is: an injection attempt in a guest's words is named.
    let speaker = if e.principal.is_empty() {
        e.speaker().to_owned()
    } else if crate::firewall::review::review(said).is_empty() {
        crate::i18n::Msg::GuestSpeaker {
            speaker: e.speaker(),
            principal: &e.principal,
        }
        .text()
    } else {
        crate::i18n::Msg::GuestSpeakerFlagged {
            speaker: e.speaker(),
            principal: &e.principal,
        }
        .text()
    };
    Item {
        origin: Origin::Window,
        ts_ms: Some(e.ts_ms),
        speaker,
        text: said.to_owned(),
        tokens,
        principal: e.principal.clone(),
        reply: None,
    }
}

impl ContextActor {
    /// Where event `id` is in the window. Appends keep ids ascending, so a binary search
    /// finds it; a window reordered by a document moved back (`doc_query` inserts at the
    /// original time) falls back to a scan. No map of the whole window per turn: it
    /// holds thousands of events between two distill rounds.
    fn position_of(&self, id: i64) -> Option<usize> {
        match self.events.binary_search_by_key(&id, |e| e.id) {
            Ok(i) => Some(i),
            Err(_) => self.events.iter().position(|e| e.id == id),
        }
    }

    /// The window events of a search's units, as scored items, best first (a failed
    /// lookup leaves the prompt with the recency window only).
    fn resolve_events(&mut self, units: Result<Ranked<Unit>, MemoryError>) -> Ranked<Item> {
        let units = match units {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!("recall lookup failed, the prompt gets the recency window only: {e}");
                return Ranked::default();
            }
        };
        units.filter_map(|u| {
            let Unit::Event(id) = u else { return None };
            let i = self.position_of(id)?;
            let item = item_of(&mut self.tokens, &self.events[i]);
            // The next event is read only for an item that asks (most do not).
            let next = if crate::memory::recall::asks(&item.text) {
                self.events.get(i + 1).map(|e| item_of(&mut self.tokens, e))
            } else {
                None
            };
            Some(crate::memory::recall::with_reply(item, next))
        })
    }

    /// Forgets the cached counts of events no longer in the window.
    fn trim_token_cache(&mut self) {
        let live: std::collections::HashSet<i64> = self.events.iter().map(|e| e.id).collect();
        self.tokens.retain(|id, _| live.contains(id));
    }
}

impl Handles<Recall> for ContextActor {
    type Reply = ResponseActFuture<Host<Self>, (WindowRecall, Option<Result<Event, ContextError>>)>;
    fn handle(&mut self, msg: Recall, _: &mut HostContext<Self>) -> Self::Reply {
        use crate::memory::recall::{DENSE_MIN, UNIT_CANDIDATES};
        let start = self
            .events
            .len()
            .saturating_sub(2 * crate::memory::recall::RECENT_EVENTS);
        let tokens = &mut self.tokens;
        if let Some(principal) = &msg.only_principal {
            // Its own conversation only: the last events of this principal, oldest first.
            let mut own: Vec<Item> = self
                .events
                .iter()
                .rev()
                .filter(|e| &e.principal == principal)
                .take(2 * crate::memory::recall::RECENT_EVENTS)
                .map(|e| item_of(tokens, e))
                .collect();
            own.reverse();
            let recorded = msg.record.map(|e| self.append(e));
            return Box::pin(actix::fut::ready((
                WindowRecall {
                    recent: own,
                    units: Default::default(),
                },
                recorded,
            )));
        }
        let recent: Vec<Item> = self.events[start..].iter().map(|e| item_of(tokens, e)).collect();
        let Some(pending) = msg.qv else {
            let units = self
                .store
                .search_event_units(&msg.query, None, DENSE_MIN, UNIT_CANDIDATES);
            let units = self.resolve_events(units);
            let recorded = msg.record.map(|e| self.append(e));
            return Box::pin(actix::fut::ready((WindowRecall { recent, units }, recorded)));
        };
        // BM25 now, while the embedder works on the query; the fusion when it answers.
        // Other messages are handled meanwhile (an event appended or pruned in between
        // is found, or left out, as if the search had started then). The recorded input
        // has no vector yet, so the dense side does not find it either.
        let lexical = self.store.lexical_units(Tier::Events, &msg.query);
        let recorded = msg.record.map(|e| self.append(e));
        let own = recorded.as_ref().and_then(|r| r.as_ref().ok()).map(|e| e.id);
        Box::pin(
            actix::fut::wrap_future::<_, Host<Self>>(pending).map(move |qv, host, _| {
                let me = host.inner();
                let units = lexical
                    .and_then(|l| {
                        me.store
                            .finish_units(Tier::Events, l, qv.as_ref(), DENSE_MIN, UNIT_CANDIDATES)
                    })
                    .map(|mut u| {
                        // Embedded in the meantime (a background poll): still not its own memory.
                        u.rows.retain(|r| Some(r.row) != own.map(Unit::Event));
                        u
                    });
                (
                    WindowRecall {
                        recent,
                        units: me.resolve_events(units),
                    },
                    recorded,
                )
            }),
        )
    }
}

impl Handles<GetContext> for ContextActor {
    type Reply = actix::MessageResult<crate::host::Envelope<GetContext>>;
    fn handle(&mut self, _: GetContext, _: &mut HostContext<Self>) -> Self::Reply {
        actix::MessageResult(self.events.clone())
    }
}

/// What an archive answers: how many events left the window.
type Archived = ResponseActFuture<Host<ContextActor>, Result<usize, ContextError>>;

impl ContextActor {
    /// Archives `archived` (events of the window): the documents actor commits their
    /// document first; only on its `Ok` are the events deleted from `context_events`
    /// and the window. If the documents actor fails, is restarting, or another archive
    /// is in flight, the events stay and a later prune archives them (answer 0; a
    /// store failure of the document tier is an error). Crash-safe in both orders: an
    /// event recorded as archived but still here is dropped when this actor opens
    /// ([`MemoryStore::forget_archived`]), and never archived twice.
    fn archive(&mut self, archived: Vec<Event>, what: &'static str) -> Archived {
        if archived.is_empty() {
            return Box::pin(actix::fut::ready(Ok(0)));
        }
        if self.archiving {
            tracing::debug!(
                events = archived.len(),
                "an archive is in flight: these events wait for the next prune"
            );
            return Box::pin(actix::fut::ready(Ok(0)));
        }
        self.archiving = true;
        let n = archived.len();
        let ids: Vec<i64> = archived.iter().map(|e| e.id).collect();
        let documents = self.documents.clone();
        let fut = async move { documents.send(ArchiveEvents(archived)).await };
        Box::pin(actix::fut::wrap_future::<_, Host<Self>>(fut).map(move |res, host, _| {
            let me = host.inner();
            me.archiving = false;
            let doc = match res {
                Ok(Ok(doc)) => doc,
                Ok(Err(e)) => {
                    tracing::warn!(events = n, "archive not stored, the events stay in the window: {e}");
                    return Err(ContextError::NotArchived(e));
                }
                Err(e) => {
                    tracing::warn!(events = n, "archive deferred, the events stay in the window: {e}");
                    return Ok(0);
                }
            };
            // The document is committed: the events may go. If deleting them
            // fails they stay (here and on disk) and leave at the next open.
            me.store.forget_events(&ids)?;
            let gone: std::collections::HashSet<i64> = ids.into_iter().collect();
            me.events.retain(|e| !gone.contains(&e.id));
            me.trim_token_cache();
            tracing::info!(archived = n, kept = me.events.len(), document = ?doc, "context {what}");
            Ok(n)
        }))
    }
}

/// A new conversation: the whole window becomes a document (recall still finds every
/// word of it), and the timeline the next prompt shows starts empty. Answers how many
/// events were set aside.
#[derive(Message)]
#[rtype(result = "Result<usize, ContextError>")]
pub struct ArchiveAll;

impl Handles<ArchiveAll> for ContextActor {
    type Reply = Archived;
    fn handle(&mut self, _: ArchiveAll, _: &mut HostContext<Self>) -> Self::Reply {
        self.archive(self.events.clone(), "set aside for a new conversation")
    }
}

impl Handles<PruneContext> for ContextActor {
    type Reply = Archived;
    fn handle(&mut self, msg: PruneContext, _: &mut HostContext<Self>) -> Self::Reply {
        let (top_k, protected) = context::top_k_and_protected(&self.events, msg.context_tokens, msg.max_context_size);
        if self.events.len() <= top_k {
            return Box::pin(actix::fut::ready(Ok(0)));
        }
        let pruned = context::prune(self.events.clone(), &msg.query, top_k, protected);
        self.archive(pruned.archived, "pruned")
    }
}

fn cut_bytes(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

impl Handles<RestoreDocuments> for ContextActor {
    type Reply = Result<usize, ContextError>;
    fn handle(&mut self, msg: RestoreDocuments, _: &mut HostContext<Self>) -> Self::Reply {
        for d in &msg.docs {
            // Back into the timeline where it happened.
            let event = Event {
                id: 0,
                ts_ms: d.created_at_ms,
                source: crate::memory::store::COLD_STORAGE.into(),
                input: Msg::DocLoadEvent { query: &msg.query }.text(),
                response: cut_bytes(&d.content, 2000),
                tools_used: vec![],
                tool_results: vec![],
                principal: String::new(),
            };
            let stored = self.store.append(event)?;
            let pos = self.events.partition_point(|e| e.ts_ms <= stored.ts_ms);
            self.events.insert(pos, stored);
        }
        Ok(msg.docs.len())
    }
}

impl Handles<DistillContext> for ContextActor {
    type Reply = Archived;
    fn handle(&mut self, msg: DistillContext, _: &mut HostContext<Self>) -> Self::Reply {
        let max = msg.max_context_size.max(1);
        if self.events.len() <= 2 * max {
            return Box::pin(actix::fut::ready(Ok(0)));
        }
        let query = self
            .events
            .iter()
            .rev()
            .find(|e| e.source != "agent" && e.source != "cold_storage")
            .map(|e| e.input.clone())
            .unwrap_or_default();
        let pruned = context::prune(self.events.clone(), &query, max, context::PROTECTED);
        self.archive(pruned.archived, "distilled")
    }
}

impl Handles<CountEvents> for ContextActor {
    type Reply = usize;
    fn handle(&mut self, _: CountEvents, _: &mut HostContext<Self>) -> Self::Reply {
        self.events.len()
    }
}

/// Imported turns (one batch of an import, one transaction): each becomes a context
/// event at its own time, unless its digest was imported before. Answers what was
/// stored.
#[derive(Message)]
#[rtype(result = "Result<crate::memory::store::ImportedBatch, ContextError>")]
pub struct ImportEvents(pub Vec<crate::memory::context::import::ImportLine>);

impl Handles<ImportEvents> for ContextActor {
    type Reply = Result<crate::memory::store::ImportedBatch, ContextError>;
    fn handle(&mut self, ImportEvents(lines): ImportEvents, _: &mut HostContext<Self>) -> Self::Reply {
        let batch = self.store.import_batch(&lines)?;
        // Into the window where they happened (after equal times, spec §5.2); the
        // window stays chronological, as a reload from the store would order it.
        self.events.extend(batch.events.iter().cloned());
        self.events.sort_by_key(|e| (e.ts_ms, e.id));
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt as _;

    fn said(ts_ms: i64, text: &str) -> Event {
        Event {
            id: 0,
            ts_ms,
            source: "http".into(),
            input: text.into(),
            response: String::new(),
            tools_used: vec![],
            tool_results: vec![],
            principal: String::new(),
        }
    }

    /// A context tier (with its documents actor) over a fresh `memory.db` in the dir;
    /// the third value keeps both actors' exits alive.
    fn tier() -> (tempfile::TempDir, TAddr<ContextActor>, Box<dyn std::any::Any>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.db");
        let registry = std::sync::Arc::new(crate::Registry::new(std::time::Duration::from_secs(5)));
        let docs = DocumentsActor::new(MemoryStore::open(&path).unwrap());
        let (docs, d) = TAddr::spawn_unsupervised(&registry, "test", "documents", docs).unwrap();
        let context = ContextActor::open(MemoryStore::open(&path).unwrap(), docs).unwrap();
        let (context, c) = TAddr::spawn_unsupervised(&registry, "test", "context", context).unwrap();
        (dir, context, Box::new((d, c, registry)))
    }

    /// A resident's `compress` keeps its last 20 events (kernel spec §6.2), though a
    /// prune keeps one fewer than the size it is given.
    #[actix_rt::test]
    async fn a_residents_compress_keeps_its_last_twenty_events() {
        let (_dir, context, _actors) = tier();
        for i in 0..30 {
            let e = said(i * 1000, &format!("remark number {i}"));
            context.send(AppendEvent(e)).await.unwrap().unwrap();
        }
        let archived = context
            .send(crate::agent::residents::compress_prune())
            .await
            .unwrap()
            .unwrap();
        let kept = context.send(GetContext).await.unwrap();
        assert_eq!((archived, kept.len()), (10, crate::agent::residents::COMPRESS_KEEP));
        assert_eq!(kept.last().unwrap().input, "remark number 29");
    }

    /// One round trip reads and records: the BM25 half and the recency window are taken
    /// before the input is appended (it is not its own memory), the append is committed
    /// while the query's vector is still on its way (the actor answers others
    /// meanwhile), and the fusion comes when the vector does.
    #[actix_rt::test]
    async fn a_recall_records_its_input_after_the_read_and_fuses_when_the_vector_comes() {
        let (dir, context, _actors) = tier();
        let path = dir.path().join("memory.db");
        for (i, t) in ["my sister adopted a greyhound called Biscuit", "the weather is fine"]
            .iter()
            .enumerate()
        {
            context
                .send(AppendEvent(said(i as i64 * 1000, t)))
                .await
                .unwrap()
                .unwrap();
        }
        let (tx, rx) = tokio::sync::oneshot::channel::<Option<QueryVectorOf>>();
        let pending: crate::memory::embed::actor::PendingVector =
            async move { rx.await.ok().flatten() }.boxed().shared();
        let answer = context.request(Recall {
            query: "what is the greyhound called".into(),
            qv: Some(pending),
            record: Some(said(5000, "what is the greyhound called")),
            only_principal: None,
        });
        // Not blocked by the wait, and the input is already on disk and in the window.
        assert_eq!(context.send(CountEvents).await.unwrap(), 3);
        let reopened = MemoryStore::open(&path).unwrap().events().unwrap();
        assert_eq!(
            reopened.last().map(|e| e.input.as_str()),
            Some("what is the greyhound called")
        );
        tx.send(None).unwrap(); // the embedder gave up: BM25 alone
        let (window, recorded) = answer.await.unwrap();
        let recorded = recorded.expect("asked to record").unwrap();
        assert!(recorded.id > 0);
        let found: Vec<&str> = window.units.rows.iter().map(|r| r.row.text.as_str()).collect();
        assert_eq!(
            found.first(),
            Some(&"my sister adopted a greyhound called Biscuit"),
            "{found:?}"
        );
        assert!(!found.contains(&"what is the greyhound called"), "{found:?}");
        assert!(
            window.recent.iter().all(|i| i.text != "what is the greyhound called"),
            "the recency window was taken before the input"
        );
    }

    type QueryVectorOf = crate::memory::store::QueryVector;
}
