//! The document tools: `doc_query` (find archived documents and show them in the
//! timeline) and `doc_commit` (store one). They span two tiers, the documents and the
//! context window `doc_query` restores into, so they stand above both actors rather
//! than inside either (the context tier archives into the documents tier; the documents
//! tier knows nothing of the context).

use super::actor::{CommitDocument, DocError, DocumentsActor, FindDocuments, RecordReads};
use crate::addr::TAddr;
use crate::i18n::Msg;
use crate::memory::store::QueryVector;

/// `doc_query`: finds the documents and shows them in the timeline at their original
/// time (the context actor). They stay in the document store, counted as read: the
/// reference consumed them here, but the timeline gets only their first 2000 bytes, so
/// a consumed document lost the rest of its turns (`docs/DECISIONS.md`, "archiving keeps
/// what it archives"). The shown copy is not archived as passages again.
async fn query_documents(
    documents: &TAddr<DocumentsActor>,
    context: &TAddr<crate::memory::context::actor::ContextActor>,
    query: String,
    top_k: usize,
    qv: Option<QueryVector>,
) -> Result<String, DocToolError> {
    if query.trim().is_empty() {
        return Ok(Msg::DocQueryRequired.text());
    }
    let top_k = if top_k == 0 { 3 } else { top_k };
    let docs = documents
        .send(FindDocuments {
            query: query.clone(),
            top_k,
            qv,
        })
        .await
        .map_err(|_| DocToolError::Unavailable)??;
    if docs.is_empty() {
        return Ok(Msg::DocNothing.text());
    }
    let refs: Vec<String> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| format!("#{}({})", i + 1, d.summary))
        .collect();
    let ids: Vec<String> = docs.iter().map(|d| d.id.clone()).collect();
    let count = docs.len();
    context
        .send(crate::memory::context::actor::RestoreDocuments { query, docs })
        .await
        .map_err(|_| DocToolError::Unavailable)??;
    let _ = documents.do_send(RecordReads(ids));
    Ok(Msg::DocsLoaded {
        count,
        refs: &refs.join(", "),
    }
    .text())
}

/// Why a document tool did nothing. (What the model asked wrong — an empty query or
/// content — is answered as the tool's text, as it always was.)
#[derive(Debug, thiserror::Error)]
pub enum DocToolError {
    #[error("{}", Msg::DocsUnavailable.text())]
    Unavailable,
    #[error(transparent)]
    Store(#[from] DocError),
    #[error(transparent)]
    Timeline(#[from] crate::memory::context::actor::ContextError),
}

/// `doc_query`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct QueryArgs {
    /// what to look for
    query: String,
    /// how many documents (default 3)
    #[serde(default)]
    top_k: Option<usize>,
}

/// `doc_commit`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct CommitArgs {
    content: String,
    /// one line; defaults to the start of the content
    #[serde(default)]
    summary: String,
}

/// The document tools (`doc_query`, `doc_commit`) over the documents actor (and the
/// context actor, where `doc_query` puts what it found).
pub fn document_tools(
    documents: TAddr<DocumentsActor>,
    context: TAddr<crate::memory::context::actor::ContextActor>,
    embedder: Option<crate::memory::embed::actor::EmbedderHandle>,
) -> Vec<(crate::stages::ToolSpec, std::sync::Arc<dyn crate::stages::ToolHandler>)> {
    let mut query = crate::stages::ToolSpec::typed::<QueryArgs>(
        "doc_query",
        "Load archived conversation documents matching a query back into the timeline (they stay stored).",
    );
    query.plugin = crate::stages::tools::owners::MEMORY.into();
    query = query.with_keywords("archived, old conversation, earlier conversation, back then, 以前, 聊过");
    let mut commit =
        crate::stages::ToolSpec::typed::<CommitArgs>("doc_commit", "Store a document in long-term document memory.");
    commit.plugin = crate::stages::tools::owners::MEMORY.into();
    commit = commit.with_keywords("keep this document, archive, store text, 存档");
    let d1 = documents.clone();
    let q = crate::stages::typed(move |a: QueryArgs| {
        let (d, c, e) = (d1.clone(), context.clone(), embedder.clone());
        async move {
            let qv = crate::memory::embed::actor::embed_query(
                e.as_ref(),
                &a.query,
                crate::memory::context::actor::QUERY_EMBED_WAIT,
            )
            .await;
            query_documents(&d, &c, a.query, a.top_k.unwrap_or(3), qv).await
        }
    });
    let d2 = documents;
    let m = crate::stages::typed(move |CommitArgs { content, summary }: CommitArgs| {
        let d = d2.clone();
        async move {
            let summary_shown = if summary.trim().is_empty() {
                content.chars().take(100).collect()
            } else {
                summary.clone()
            };
            match d
                .send(CommitDocument { summary, content })
                .await
                .map_err(|_| DocToolError::Unavailable)?
            {
                Ok(id) => Ok(Msg::DocCommitted {
                    id: &id,
                    summary: &summary_shown,
                }
                .text()),
                Err(DocError::EmptyContent) => Ok(Msg::ContentRequired.text()),
                Err(e) => Ok::<_, DocToolError>(Msg::DocCommitFailed { error: &e.to_string() }.text()),
            }
        }
    });
    vec![(query, q), (commit, m)]
}
