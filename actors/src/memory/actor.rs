//! `kernel/memory/context`: the context tier as an actor (on the blocking arbiter).

use actix::prelude::*;

use super::context::{self, Event};
use super::store::{Document, MemoryError, MemoryStore};
use crate::host::{Handles, HostContext, KernelActor};

/// The context actor: the store plus the events in memory.
pub struct ContextActor {
    store: MemoryStore,
    events: Vec<Event>,
}

impl ContextActor {
    /// Loads the context from the store.
    pub fn open(store: MemoryStore) -> Result<Self, MemoryError> {
        let events = store.events()?;
        tracing::info!(events = events.len(), "context loaded");
        Ok(Self { store, events })
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

/// Appends an event; answers once it is committed to disk.
#[derive(Message)]
#[rtype(result = "Result<Event, String>")]
pub struct AppendEvent(pub Event);

/// The `【对话时序】` block within a token budget.
#[derive(Message)]
#[rtype(result = "String")]
pub struct Timeline {
    pub max_tokens: usize,
}

/// The whole context window.
#[derive(Message)]
#[rtype(result = "Vec<Event>")]
pub struct GetContext;

/// Every document of the cold tier.
#[derive(Message)]
#[rtype(result = "Result<Vec<Document>, String>")]
pub struct GetDocuments;

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

impl Handles<Timeline> for ContextActor {
    type Reply = String;
    fn handle(&mut self, msg: Timeline, _: &mut HostContext<Self>) -> String {
        context::timeline(&self.events, msg.max_tokens)
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
    fn handle(&mut self, _: GetDocuments, _: &mut HostContext<Self>) -> Self::Reply {
        self.store.documents().map_err(|e| e.to_string())
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
        tracing::info!(archived = n, kept = self.events.len(), document = ?doc, "context pruned");
        Ok(n)
    }
}
