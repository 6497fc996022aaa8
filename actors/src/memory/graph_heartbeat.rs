//! The graph heartbeats. Merge and review (`kernel/memory/heartbeat-merge`,
//! `kernel/memory/heartbeat-review`) ask the graph for proposals
//! ([`super::maintenance`]) and hand every one to the agent as kernel self-input, so
//! the model decides on the `_consolidation_` channel, never preempting the user.
//! Archive (`kernel/memory/heartbeat-archive`) moves the facts of cold documents into
//! the graph and deletes a document only once a relation from it was written.

use std::sync::Arc;

use actix::prelude::*;
use parking_lot::Mutex;
use serde::Serialize;

use super::documents::{ColdDocs, DeleteDoc, DocumentsActor};
use super::graph_actor::{CommitTriples, GraphActor, ProposeMerges, ProposeReviews};
use crate::addr::TAddr;
use crate::host::{Handles, Host, HostContext, KernelActor};

/// Where the merge and review rounds hand their tasks: kernel self-input to the agent
/// (the `_consolidation_` channel). A port the kernel fills with the agent's intake,
/// so the memory layer does not depend on the agent (which depends on the memory).
/// Resolves to the accepted task's id, or why it was not accepted.
pub type TaskSink =
    Arc<dyn Fn(String) -> futures_util::future::LocalBoxFuture<'static, Result<u64, String>> + Send + Sync>;

/// Which maintenance a heartbeat does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Maintenance {
    /// Similar entities → `memory_merge` tasks.
    Merge,
    /// Relations with their sentence → `memory_edit` review tasks.
    Review,
    /// Cold documents (≥ 72 h, read ≤ 2 times) → graph facts.
    Archive,
}

/// What one round did.
#[derive(Debug, Clone, Serialize)]
pub struct MaintenanceRound {
    /// Unix milliseconds.
    pub at_ms: i64,
    pub kind: Maintenance,
    /// Tasks handed to the agent (merge, review) or documents moved into the graph
    /// (archive).
    pub items: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `timer` or `operator`.
    pub trigger: &'static str,
}

/// A maintenance heartbeat: its kind, address and last round.
pub type MaintenanceHandle = (Maintenance, TAddr<GraphHeartbeat>, Arc<Mutex<Option<MaintenanceRound>>>);

/// The heartbeat actor.
pub struct GraphHeartbeat {
    kind: Maintenance,
    graph: TAddr<GraphActor>,
    /// Where tasks go (kernel self-input).
    agent: TaskSink,
    /// The document tier (archive only).
    documents: Option<TAddr<DocumentsActor>>,
    /// Embeds entity names for the merge round's cosine side (merge only; optional).
    embedder: Option<TAddr<super::embed::actor::EmbedderActor>>,
    period: super::heartbeat::Period,
    /// The last round, shared with the status API.
    last: Arc<Mutex<Option<MaintenanceRound>>>,
}

impl GraphHeartbeat {
    pub fn new(
        kind: Maintenance,
        graph: TAddr<GraphActor>,
        agent: TaskSink,
        documents: Option<TAddr<DocumentsActor>>,
        every: super::heartbeat::IntervalCell,
        last: Arc<Mutex<Option<MaintenanceRound>>>,
    ) -> Self {
        Self {
            kind,
            graph,
            agent,
            documents,
            embedder: None,
            period: super::heartbeat::Period::new(every),
            last,
        }
    }

    fn arm(&mut self, ctx: &mut HostContext<Self>) {
        let every = self.period.arm(ctx, || MaintenanceTick);
        tracing::info!(kind = ?self.kind, every = ?every, "graph maintenance heartbeat armed");
    }

    /// Adds the embedder (merge rounds then also compare names by cosine).
    pub fn with_embedder(mut self, embedder: Option<TAddr<super::embed::actor::EmbedderActor>>) -> Self {
        self.embedder = embedder;
        self
    }

    fn round(&self, trigger: &'static str) -> impl std::future::Future<Output = MaintenanceRound> + 'static {
        let (kind, graph, agent, last) = (self.kind, self.graph.clone(), self.agent.clone(), self.last.clone());
        let documents = self.documents.clone();
        let embedder = self.embedder.clone();
        async move {
            let now = super::now_ms();
            let mut round = MaintenanceRound {
                at_ms: now,
                kind,
                items: 0,
                error: None,
                trigger,
            };
            let result = match (kind, documents) {
                (Maintenance::Archive, Some(documents)) => archive(&graph, &documents, now, &mut round.items).await,
                (Maintenance::Archive, None) => Err("the archive heartbeat has no document tier".to_owned()),
                (Maintenance::Merge | Maintenance::Review, _) => {
                    let proposals = match kind {
                        Maintenance::Merge => {
                            let vectors = name_vectors(&graph, embedder.as_ref()).await;
                            graph.send(ProposeMerges { vectors }).await
                        }
                        _ => graph.send(ProposeReviews).await,
                    };
                    match proposals.map_err(|e| e.to_string()).and_then(|r| r) {
                        Ok(tasks) => {
                            let mut result = Ok(());
                            for text in tasks {
                                match agent(text).await {
                                    Ok(_) => round.items += 1,
                                    Err(e) => result = Err(e),
                                }
                            }
                            result
                        }
                        Err(e) => Err(e),
                    }
                }
            };
            round.error = result.err();
            match &round.error {
                None => tracing::info!(?kind, items = round.items, trigger, "graph maintenance round"),
                Some(e) => tracing::warn!(?kind, trigger, "graph maintenance round failed: {e}"),
            }
            *last.lock() = Some(round.clone());
            round
        }
    }
}

/// Embeddings of the most mentioned entity names, when an embedder is there (empty
/// otherwise, or when it fails: the Jaccard side still works).
async fn name_vectors(
    graph: &TAddr<GraphActor>,
    embedder: Option<&TAddr<super::embed::actor::EmbedderActor>>,
) -> std::collections::HashMap<String, Vec<f32>> {
    let Some(embedder) = embedder else {
        return Default::default();
    };
    let names = match graph
        .send(super::graph_actor::MergeNames(super::maintenance::MERGE_EMBED_LIMIT))
        .await
    {
        Ok(Ok(n)) if !n.is_empty() => n,
        _ => return Default::default(),
    };
    match embedder.send(super::embed::actor::EmbedTexts(names.clone())).await {
        Ok(Some((_, vectors))) if vectors.len() == names.len() => names.into_iter().zip(vectors).collect(),
        _ => Default::default(),
    }
}

/// One archive round: each cold document's facts are committed; the document is
/// deleted once at least one of its relations was written. Counts moved documents.
async fn archive(
    graph: &TAddr<GraphActor>,
    documents: &TAddr<DocumentsActor>,
    now: i64,
    moved: &mut usize,
) -> Result<(), String> {
    use super::maintenance::{ARCHIVAL_SESSION, COLD_AGE_MS, COLD_MAX_ACCESS, doc_to_triples};
    let docs = documents
        .send(ColdDocs {
            before_ms: now - COLD_AGE_MS,
            max_access: COLD_MAX_ACCESS,
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    for doc in docs {
        let triples = doc_to_triples(&doc);
        if triples.is_empty() {
            tracing::debug!(doc = %doc.id, "archive: no facts found, the document stays");
            continue;
        }
        let session = ARCHIVAL_SESSION.to_owned();
        let (_, relations) = graph
            .send(CommitTriples { triples, session })
            .await
            .map_err(|e| e.to_string())??;
        if relations > 0 {
            documents
                .send(DeleteDoc(doc.id.clone()))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            tracing::info!(doc = %doc.id, relations, "archive: document moved into the graph");
            *moved += 1;
        }
    }
    Ok(())
}

impl KernelActor for GraphHeartbeat {
    const KIND: &'static str = "heartbeat";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        self.arm(ctx);
    }
}

/// The timer fired.
#[derive(Message)]
#[rtype(result = "()")]
pub struct MaintenanceTick;

/// An operator asked for a round now; answers what it did.
#[derive(Message)]
#[rtype(result = "MaintenanceRound")]
pub struct RunMaintenance;

impl Handles<MaintenanceTick> for GraphHeartbeat {
    type Reply = ();
    fn handle(&mut self, _: MaintenanceTick, ctx: &mut HostContext<Self>) {
        let round = self.round("timer");
        ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(async move {
            round.await;
        }));
    }
}

impl Handles<RunMaintenance> for GraphHeartbeat {
    type Reply = ResponseFuture<MaintenanceRound>;
    fn handle(&mut self, _: RunMaintenance, _: &mut HostContext<Self>) -> Self::Reply {
        Box::pin(self.round("operator"))
    }
}

impl Handles<super::heartbeat::SetInterval> for GraphHeartbeat {
    type Reply = ();
    fn handle(&mut self, super::heartbeat::SetInterval(d): super::heartbeat::SetInterval, ctx: &mut HostContext<Self>) {
        self.period.set(d);
        self.arm(ctx);
    }
}
