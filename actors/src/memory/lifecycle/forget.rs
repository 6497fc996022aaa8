//! Deletion the owner asked for, complete across the tiers: a document leaves with its
//! passages and their vectors (the document tier), and the facts derived from it alone
//! leave the graph (the relations the archive heartbeat committed under its session,
//! with the entities and sentences nothing else refers to).
//!
//! The kernel never deletes memory on its own (`docs/DECISIONS.md`, "archiving keeps
//! what it archives"); this is the one path that removes what was said, and every
//! owner-facing deletion of a document (HTTP, the memory page, a plugin's `doc.remove`)
//! goes through it.
//!
//! "Derived from it": the relations the archive heartbeat committed under the document's
//! session, and the relations whose source sentence is one of its turns as the rule
//! distiller wrote it (live or at import) — the same words said elsewhere are the same
//! sentence, and go too. The raw text log (`DATA/memory/text`, the chat history) is a
//! record of what was said, not memory the agent recalls from; it is left as it is.

use crate::addr::TAddr;
use crate::memory::documents::{DeleteDoc, DocError, DocPassages, DocumentsActor};
use crate::memory::graph::actor::{ForgetSource, GraphActor};

/// What forgetting a document did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Forgotten {
    /// The document existed (and is gone).
    pub existed: bool,
    /// Graph relations derived from it alone, deleted.
    pub facts: usize,
}

/// Why a document could not be forgotten (completely).
#[derive(Debug, thiserror::Error)]
pub enum ForgetError {
    #[error("the document tier is not running: {0}; retry once it restarted")]
    Unavailable(#[from] crate::addr::SendError),
    #[error(transparent)]
    Documents(#[from] DocError),
    #[error("the document is gone but its facts could not be removed from the graph ({0}); delete it again to retry")]
    Graph(String),
}

/// Deletes document `id` and what was derived from it alone. The graph side runs even
/// when the document was already gone, so a retry after a half-done deletion completes it.
pub async fn forget_document(
    documents: &TAddr<DocumentsActor>,
    graph: Option<&TAddr<GraphActor>>,
    id: &str,
) -> Result<Forgotten, ForgetError> {
    let passages = documents.send(DocPassages(id.to_owned())).await??;
    let existed = documents.send(DeleteDoc(id.to_owned())).await??;
    let facts = match graph {
        Some(g) => g
            .send(ForgetSource {
                session: crate::memory::lifecycle::maintenance::doc_session(id),
                // The sentences the rule distiller keeps: the text as it read it.
                sentences: passages
                    .iter()
                    .flat_map(|p| [p.text.clone(), crate::memory::text::rules::said_by(&p.speaker, &p.text)])
                    .collect(),
            })
            .await
            .map_err(|e| ForgetError::Graph(e.to_string()))?
            .map_err(|e| ForgetError::Graph(e.to_string()))?,
        None => 0,
    };
    Ok(Forgotten { existed, facts })
}
