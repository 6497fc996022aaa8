//! `kernel/memory/context`: the context tier as an actor (on the blocking arbiter).

use actix::prelude::*;

use super::context::{self, Event};
use super::docindex::Unit;
use super::recall::{Item, Origin};
use super::store::{Document, MemoryError, MemoryStore, QueryVector};
use crate::host::{Handles, HostContext, KernelActor};

/// The context actor: the store plus the events in memory.
pub struct ContextActor {
    store: MemoryStore,
    events: Vec<Event>,
    /// o200k tokens of each window event's words, counted once (by event id).
    tokens: std::collections::HashMap<i64, usize>,
}

impl ContextActor {
    /// Loads the context from the store.
    pub fn open(store: MemoryStore) -> Result<Self, MemoryError> {
        let events = store.events()?;
        tracing::info!(events = events.len(), "context loaded");
        Ok(Self {
            store,
            events,
            tokens: Default::default(),
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
#[rtype(result = "Result<Event, String>")]
pub struct AppendEvent(pub Event);

/// Per-turn recall (`memory::recall`): the window events and archived passages most
/// relevant to `query`, fused with the other tiers' ranked items, deduplicated and cut
/// to `budget`, plus the recency window. Read-only (documents are not "read" by it:
/// their access counts decide when they are cold, and recall touches many passages).
#[derive(Message)]
#[rtype(result = "super::recall::Recollection")]
pub struct Recall {
    /// The input the memory is matched against ("" = the recency window only).
    pub query: String,
    /// The input's embedding, when the embedder answered in time.
    pub qv: Option<QueryVector>,
    pub budget: super::recall::RecallBudget,
    /// Ranked items of the other tiers (graph facts, knowledge), each best first.
    pub tiers: Vec<Vec<super::recall::Item>>,
    /// The graph's `【记忆索引】` line, if any.
    pub index: Option<String>,
}

/// `doc_query`: moves the documents matching `query` back into the timeline (at their
/// original time) and answers the tool's reply.
#[derive(Message)]
#[rtype(result = "Result<String, String>")]
pub struct ConsumeDocs {
    pub query: String,
    pub top_k: usize,
    pub qv: Option<QueryVector>,
}

/// `doc_commit`: stores a document; answers the tool's reply.
#[derive(Message)]
#[rtype(result = "Result<String, String>")]
pub struct CommitDoc {
    pub content: String,
    pub summary: String,
}

/// The whole context window.
#[derive(Message)]
#[rtype(result = "Vec<Event>")]
pub struct GetContext;

/// The documents of the cold tier: all of them (newest first) or, with a query, the
/// 20 most similar (best first). Read-only: access counts are not touched.
#[derive(Message)]
#[rtype(result = "Result<Vec<Document>, String>")]
pub struct GetDocuments {
    pub query: Option<String>,
    pub qv: Option<QueryVector>,
}

/// The distill heartbeat's round: when the window holds more than twice
/// `max_context_size` events, prune it down to `max_context_size` against the most
/// recent input (the last 10 stay); the removed events become a document. Answers how
/// many events were archived.
#[derive(Message)]
#[rtype(result = "Result<usize, String>")]
pub struct DistillContext {
    pub max_context_size: usize,
}

/// Counts for the status API.
#[derive(Message)]
#[rtype(result = "Result<(usize, usize), String>")]
pub struct MemoryCounts;

/// Prunes the context against `query` when it holds more than `top_k` events; the
/// removed ones become a document. Answers how many events were archived.
#[derive(Message)]
#[rtype(result = "Result<usize, String>")]
pub struct PruneContext {
    pub query: String,
    pub context_tokens: usize,
    pub max_context_size: usize,
}

impl Handles<AppendEvent> for ContextActor {
    type Reply = Result<Event, String>;
    fn handle(&mut self, AppendEvent(e): AppendEvent, _: &mut HostContext<Self>) -> Self::Reply {
        let e = self.store.append(e).map_err(|e| e.to_string())?;
        self.events.push(e.clone());
        Ok(e)
    }
}

impl ContextActor {
    /// A window event as a recall item (its token count cached).
    fn window_item(&mut self, e: &Event) -> Item {
        let said = e.said();
        let tokens = *self.tokens.entry(e.id).or_insert_with(|| super::tokens::count(said));
        Item {
            origin: Origin::Window,
            ts_ms: Some(e.ts_ms),
            speaker: e.speaker().to_owned(),
            text: said.to_owned(),
            tokens,
        }
    }

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

    /// The units most relevant to `query`, as items, best first.
    fn relevant_units(&mut self, query: &str, qv: Option<&QueryVector>) -> Vec<Item> {
        let units = match self
            .store
            .search_units(query, qv, super::recall::DENSE_MIN, super::recall::UNIT_CANDIDATES)
        {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!("recall lookup failed, the prompt gets the recency window only: {e}");
                return Vec::new();
            }
        };
        let passage_ids: Vec<i64> = units
            .iter()
            .filter_map(|u| match u {
                Unit::Passage(id) => Some(*id),
                Unit::Event(_) => None,
            })
            .collect();
        let mut passages: std::collections::HashMap<i64, super::store::Passage> =
            match self.store.passages(&passage_ids) {
                Ok(ps) => ps.into_iter().map(|p| (p.id, p)).collect(),
                Err(e) => {
                    tracing::warn!("reading recalled passages failed: {e}");
                    Default::default()
                }
            };
        let mut out = Vec::with_capacity(units.len());
        for u in units {
            match u {
                Unit::Event(id) => {
                    if let Some(i) = self.position_of(id) {
                        let e = self.events[i].clone();
                        out.push(self.window_item(&e));
                    }
                }
                Unit::Passage(id) => {
                    if let Some(p) = passages.remove(&id) {
                        out.push(Item {
                            origin: Origin::Passage { doc_id: p.doc_id },
                            ts_ms: Some(p.ts_ms),
                            speaker: p.speaker,
                            text: p.text,
                            tokens: p.tokens,
                        });
                    }
                }
            }
        }
        out
    }

    /// Forgets the cached counts of events no longer in the window.
    fn trim_token_cache(&mut self) {
        let live: std::collections::HashSet<i64> = self.events.iter().map(|e| e.id).collect();
        self.tokens.retain(|id, _| live.contains(id));
    }
}

impl Handles<Recall> for ContextActor {
    type Reply = actix::MessageResult<crate::host::Envelope<Recall>>;
    fn handle(&mut self, msg: Recall, _: &mut HostContext<Self>) -> Self::Reply {
        let start = self.events.len().saturating_sub(2 * super::recall::RECENT_EVENTS);
        let tail: Vec<Event> = self.events[start..].to_vec();
        let recent: Vec<Item> = tail.iter().map(|e| self.window_item(e)).collect();
        let mut tiers = vec![self.relevant_units(&msg.query, msg.qv.as_ref())];
        tiers.extend(msg.tiers);
        let ranked = super::recall::fuse(tiers);
        actix::MessageResult(super::recall::select(&msg.query, recent, ranked, msg.index, msg.budget))
    }
}

impl Handles<GetContext> for ContextActor {
    type Reply = actix::MessageResult<crate::host::Envelope<GetContext>>;
    fn handle(&mut self, _: GetContext, _: &mut HostContext<Self>) -> Self::Reply {
        actix::MessageResult(self.events.clone())
    }
}

impl Handles<GetDocuments> for ContextActor {
    type Reply = Result<Vec<Document>, String>;
    fn handle(&mut self, m: GetDocuments, _: &mut HostContext<Self>) -> Self::Reply {
        match m.query.as_deref().map(str::trim) {
            Some(q) if !q.is_empty() => self.store.search_documents(q, 20, m.qv.as_ref()),
            _ => self.store.documents(),
        }
        .map_err(|e| e.to_string())
    }
}

impl Handles<PruneContext> for ContextActor {
    type Reply = Result<usize, String>;
    fn handle(&mut self, msg: PruneContext, _: &mut HostContext<Self>) -> Self::Reply {
        let (top_k, protected) = context::top_k_and_protected(&self.events, msg.context_tokens, msg.max_context_size);
        if self.events.len() <= top_k {
            return Ok(0);
        }
        let pruned = context::prune(self.events.clone(), &msg.query, top_k, protected);
        let n = pruned.archived.len();
        // Disk first: if archiving fails, the in-memory window stays as it was.
        let doc = self.store.archive(&pruned.archived).map_err(|e| e.to_string())?;
        self.events = pruned.kept;
        self.trim_token_cache();
        tracing::info!(archived = n, kept = self.events.len(), document = ?doc, "context pruned");
        Ok(n)
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

impl Handles<ConsumeDocs> for ContextActor {
    type Reply = Result<String, String>;
    fn handle(&mut self, msg: ConsumeDocs, _: &mut HostContext<Self>) -> Self::Reply {
        if msg.query.trim().is_empty() {
            return Ok("请输入查询内容".into());
        }
        let top_k = if msg.top_k == 0 { 3 } else { msg.top_k };
        let docs = self
            .store
            .query_documents(&msg.query, top_k, true, msg.qv.as_ref())
            .map_err(|e| e.to_string())?;
        if docs.is_empty() {
            return Ok("未找到相关文档记忆".into());
        }
        let mut refs = Vec::new();
        for (i, d) in docs.iter().enumerate() {
            // Back into the timeline where it happened.
            let event = Event {
                id: 0,
                ts_ms: d.created_at_ms,
                source: "cold_storage".into(),
                input: format!("加载文档记忆: {}", msg.query),
                response: cut_bytes(&d.content, 2000),
                tools_used: vec![],
                tool_results: vec![],
            };
            let stored = self.store.append(event).map_err(|e| e.to_string())?;
            let pos = self.events.partition_point(|e| e.ts_ms <= stored.ts_ms);
            self.events.insert(pos, stored);
            refs.push(format!("#{}({})", i + 1, d.summary));
        }
        Ok(format!(
            "已加载 {} 篇文档记忆: {}\n(完整内容参见对话时序中 cold_storage 事件)",
            docs.len(),
            refs.join(", ")
        ))
    }
}

impl Handles<CommitDoc> for ContextActor {
    type Reply = Result<String, String>;
    fn handle(&mut self, msg: CommitDoc, _: &mut HostContext<Self>) -> Self::Reply {
        if msg.content.trim().is_empty() {
            return Ok("content 不能为空".into());
        }
        let summary = if msg.summary.trim().is_empty() {
            msg.content.chars().take(100).collect()
        } else {
            msg.summary
        };
        match self.store.commit_document(&summary, &msg.content) {
            Ok(id) => Ok(format!("文档已提交 (id: {id}, 摘要: {summary})")),
            Err(e) => Ok(format!("文档写入失败: {e}")),
        }
    }
}

/// The document tools (`doc_query`, `doc_commit`) over a context actor.
pub fn document_tools(
    context: crate::addr::TAddr<ContextActor>,
    embedder: Option<super::embed::actor::EmbedderHandle>,
) -> Vec<(crate::stages::ToolSpec, std::sync::Arc<dyn crate::stages::ToolHandler>)> {
    use futures_util::future::BoxFuture;
    use serde_json::{Value, json};
    let mut query = crate::stages::ToolSpec::new(
        "doc_query",
        "Load archived conversation documents matching a query back into the timeline (they leave the document store).",
        json!({"type": "object", "properties": {
            "query": {"type": "string", "description": "what to look for"},
            "top_k": {"type": "integer", "description": "how many documents (default 3)"}
        }, "required": ["query"]}),
    );
    query.plugin = "memory".into();
    let mut commit = crate::stages::ToolSpec::new(
        "doc_commit",
        "Store a document in long-term document memory.",
        json!({"type": "object", "properties": {
            "content": {"type": "string"},
            "summary": {"type": "string", "description": "one line; defaults to the start of the content"}
        }, "required": ["content"]}),
    );
    commit.plugin = "memory".into();
    let c1 = context.clone();
    let q: std::sync::Arc<dyn crate::stages::ToolHandler> =
        std::sync::Arc::new(move |args: Value| -> BoxFuture<'static, Result<String, String>> {
            let c = c1.clone();
            let e = embedder.clone();
            Box::pin(async move {
                let query = args.get("query").and_then(Value::as_str).unwrap_or("").to_owned();
                let top_k = args.get("top_k").and_then(Value::as_u64).unwrap_or(3) as usize;
                let qv = super::embed::actor::embed_query(e.as_ref(), &query, QUERY_EMBED_WAIT).await;
                c.send(ConsumeDocs { query, top_k, qv })
                    .await
                    .map_err(|_| "文档记忆不可用".to_string())?
            })
        });
    let c2 = context;
    let m: std::sync::Arc<dyn crate::stages::ToolHandler> =
        std::sync::Arc::new(move |args: Value| -> BoxFuture<'static, Result<String, String>> {
            let c = c2.clone();
            Box::pin(async move {
                let content = args.get("content").and_then(Value::as_str).unwrap_or("").to_owned();
                let summary = args.get("summary").and_then(Value::as_str).unwrap_or("").to_owned();
                c.send(CommitDoc { content, summary })
                    .await
                    .map_err(|_| "文档记忆不可用".to_string())?
            })
        });
    vec![(query, q), (commit, m)]
}

impl ContextActor {
    fn prune_to(&mut self, query: &str, top_k: usize) -> Result<usize, String> {
        if self.events.len() <= top_k {
            return Ok(0);
        }
        let pruned = context::prune(self.events.clone(), query, top_k, context::PROTECTED);
        let n = pruned.archived.len();
        let doc = self.store.archive(&pruned.archived).map_err(|e| e.to_string())?;
        self.events = pruned.kept;
        self.trim_token_cache();
        tracing::info!(archived = n, kept = self.events.len(), document = ?doc, "context distilled");
        Ok(n)
    }
}

impl Handles<DistillContext> for ContextActor {
    type Reply = Result<usize, String>;
    fn handle(&mut self, msg: DistillContext, _: &mut HostContext<Self>) -> Self::Reply {
        let max = msg.max_context_size.max(1);
        if self.events.len() <= 2 * max {
            return Ok(0);
        }
        let query = self
            .events
            .iter()
            .rev()
            .find(|e| e.source != "agent" && e.source != "cold_storage")
            .map(|e| e.input.clone())
            .unwrap_or_default();
        self.prune_to(&query, max)
    }
}

impl Handles<MemoryCounts> for ContextActor {
    type Reply = Result<(usize, usize), String>;
    fn handle(&mut self, _: MemoryCounts, _: &mut HostContext<Self>) -> Self::Reply {
        Ok((
            self.events.len(),
            self.store.documents().map_err(|e| e.to_string())?.len(),
        ))
    }
}

/// Documents cold enough for the graph (the archive heartbeat).
#[derive(Message)]
#[rtype(result = "Result<Vec<crate::memory::store::Document>, String>")]
pub struct ColdDocs {
    /// Created before this time (Unix ms).
    pub before_ms: i64,
    /// Read at most this many times.
    pub max_access: i64,
}

impl Handles<ColdDocs> for ContextActor {
    type Reply = Result<Vec<crate::memory::store::Document>, String>;
    fn handle(&mut self, m: ColdDocs, _: &mut HostContext<Self>) -> Self::Reply {
        self.store
            .cold_documents(m.before_ms, m.max_access)
            .map_err(|e| e.to_string())
    }
}

/// Deletes a document (it now lives in the graph); answers whether it existed.
#[derive(Message)]
#[rtype(result = "Result<bool, String>")]
pub struct DeleteDoc(pub String);

impl Handles<DeleteDoc> for ContextActor {
    type Reply = Result<bool, String>;
    fn handle(&mut self, DeleteDoc(id): DeleteDoc, _: &mut HostContext<Self>) -> Self::Reply {
        self.store.delete_document(&id).map_err(|e| e.to_string())
    }
}

/// Stores a document for a plugin (`doc.insert`); answers its id.
#[derive(Message)]
#[rtype(result = "Result<String, String>")]
pub struct InsertDoc {
    pub summary: String,
    pub content: String,
}

impl Handles<InsertDoc> for ContextActor {
    type Reply = Result<String, String>;
    fn handle(&mut self, msg: InsertDoc, _: &mut HostContext<Self>) -> Self::Reply {
        if msg.content.trim().is_empty() {
            return Err("`content` is empty".into());
        }
        let summary = if msg.summary.trim().is_empty() {
            msg.content.chars().take(100).collect()
        } else {
            msg.summary
        };
        self.store
            .commit_document(&summary, &msg.content)
            .map_err(|e| e.to_string())
    }
}

/// Imported turns (one batch of an import, one transaction): each becomes a context
/// event at its own time, unless its digest was imported before. Answers what was
/// stored.
#[derive(Message)]
#[rtype(result = "Result<super::store::ImportedBatch, String>")]
pub struct ImportEvents(pub Vec<super::import::ImportLine>);

impl Handles<ImportEvents> for ContextActor {
    type Reply = Result<super::store::ImportedBatch, String>;
    fn handle(&mut self, ImportEvents(lines): ImportEvents, _: &mut HostContext<Self>) -> Self::Reply {
        let batch = self.store.import_batch(&lines).map_err(|e| e.to_string())?;
        // Into the window where they happened (after equal times, spec §5.2); the
        // window stays chronological, as a reload from the store would order it.
        self.events.extend(batch.events.iter().cloned());
        self.events.sort_by_key(|e| (e.ts_ms, e.id));
        Ok(batch)
    }
}
