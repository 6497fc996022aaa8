//! The graph heartbeats. Merge and review (`kernel/memory/heartbeat-merge`,
//! `kernel/memory/heartbeat-review`) ask the graph for proposals
//! ([`crate::memory::lifecycle::maintenance`]) and hand every one to the agent as kernel self-input, so
//! the model decides on the `_consolidation_` channel, never preempting the user.
//! Archive (`kernel/memory/heartbeat-archive`) distils the facts of cold documents into
//! the graph and marks the documents archived; it never deletes one.

use std::sync::Arc;

use actix::prelude::*;
use parking_lot::Mutex;
use serde::Serialize;

use crate::addr::TAddr;
use crate::host::{Handles, Host, HostContext, KernelActor};
use crate::memory::documents::{ColdDocs, DocumentsActor, MarkArchived};
use crate::memory::graph::actor::{CommitDated, GraphActor, ProposeMerges, ProposeReviews};

/// Where the merge and review rounds hand their tasks: kernel self-input to the agent
/// (the `_consolidation_` channel). A port the kernel fills with the agent's intake,
/// so the memory layer does not depend on the agent (which depends on the memory).
/// Resolves to the accepted task's id, or why it was not accepted.
pub type TaskSink =
    Arc<dyn Fn(String) -> futures_util::future::LocalBoxFuture<'static, Result<u64, NotTaken>> + Send + Sync>;

/// Why the agent did not take a task: its intake's own error, opaque to this layer.
pub type NotTaken = Box<dyn std::error::Error + Send + Sync>;

use super::RoundError;
pub use super::policy::Maintenance;
use super::policy::{Decision, Policy, PolicyCell, Skip};

/// What one round did.
#[derive(Debug, Clone, Serialize)]
pub struct MaintenanceRound {
    /// Unix milliseconds.
    pub at_ms: i64,
    pub kind: Maintenance,
    /// Tasks handed to the agent (merge, review) or documents distilled into the graph
    /// (archive).
    pub items: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `timer`, `clock` (the virtual clock) or `operator`.
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
    embedder: Option<TAddr<crate::memory::embed::actor::EmbedderActor>>,
    /// What a round may do (shared by the three maintenance heartbeats).
    policy: PolicyCell,
    period: crate::memory::lifecycle::heartbeat::Period,
    /// The last round, shared with the status API.
    last: Arc<Mutex<Option<MaintenanceRound>>>,
}

impl GraphHeartbeat {
    pub fn new(
        kind: Maintenance,
        graph: TAddr<GraphActor>,
        agent: TaskSink,
        documents: Option<TAddr<DocumentsActor>>,
        every: crate::memory::lifecycle::heartbeat::IntervalCell,
        last: Arc<Mutex<Option<MaintenanceRound>>>,
    ) -> Self {
        Self {
            kind,
            graph,
            agent,
            documents,
            embedder: None,
            policy: Arc::new(Mutex::new(Policy::new(usize::MAX))),
            period: crate::memory::lifecycle::heartbeat::Period::new(every),
            last,
        }
    }

    /// Shares the lifecycle policy (the day's task budget of merge and review).
    pub fn with_policy(mut self, policy: PolicyCell) -> Self {
        self.policy = policy;
        self
    }

    fn arm(&mut self, ctx: &mut HostContext<Self>) {
        let every = self.period.arm(ctx, || MaintenanceTick);
        tracing::info!(kind = ?self.kind, every = ?every, "graph maintenance heartbeat armed");
    }

    /// Adds the embedder (merge rounds then also compare names by cosine).
    pub fn with_embedder(mut self, embedder: Option<TAddr<crate::memory::embed::actor::EmbedderActor>>) -> Self {
        self.embedder = embedder;
        self
    }

    fn round(&self, trigger: &'static str) -> impl std::future::Future<Output = MaintenanceRound> + 'static {
        let (kind, graph, agent, last) = (self.kind, self.graph.clone(), self.agent.clone(), self.last.clone());
        let documents = self.documents.clone();
        let embedder = self.embedder.clone();
        let policy = self.policy.clone();
        async move {
            let now = crate::clock::now_ms();
            let mut round = MaintenanceRound {
                at_ms: now,
                kind,
                items: 0,
                error: None,
                trigger,
            };
            let decision = policy.lock().decide(kind, now);
            let result = match (decision, documents) {
                (
                    Decision::FindCold {
                        idle_before_ms,
                        max_access,
                        limit,
                    },
                    Some(documents),
                ) => {
                    let cold = ColdDocs {
                        idle_before_ms,
                        max_access,
                        limit,
                    };
                    archive(&graph, &documents, cold, now, &mut round.items).await
                }
                (Decision::FindCold { .. }, None) => Err(RoundError::NoDocuments),
                (Decision::Skip(Skip::BudgetSpent), _) => {
                    tracing::debug!(?kind, "maintenance round skipped: today's task budget is spent");
                    Ok(())
                }
                (Decision::Propose { limit }, _) => {
                    let proposals = match kind {
                        Maintenance::Merge => {
                            let vectors = name_vectors(&graph, embedder.as_ref()).await;
                            graph.send(ProposeMerges { vectors, limit }).await
                        }
                        _ => graph.send(ProposeReviews { limit }).await,
                    };
                    match proposals
                        .map_err(RoundError::from)
                        .and_then(|r| r.map_err(RoundError::from))
                    {
                        Ok(tasks) => {
                            let mut result = Ok(());
                            for text in tasks {
                                match agent(text).await {
                                    Ok(_) => {
                                        round.items += 1;
                                        policy.lock().handed(now, 1);
                                    }
                                    Err(e) => result = Err(RoundError::NotTaken(e)),
                                }
                            }
                            result
                        }
                        Err(e) => Err(e),
                    }
                }
            };
            round.error = result.err().map(|e| e.to_string());
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
    embedder: Option<&TAddr<crate::memory::embed::actor::EmbedderActor>>,
) -> std::collections::HashMap<String, Vec<f32>> {
    let Some(embedder) = embedder else {
        return Default::default();
    };
    let names = match graph
        .send(crate::memory::graph::actor::MergeNames(
            crate::memory::lifecycle::maintenance::MERGE_EMBED_LIMIT,
        ))
        .await
    {
        Ok(Ok(n)) if !n.is_empty() => n,
        _ => return Default::default(),
    };
    match embedder
        .send(crate::memory::embed::actor::EmbedTexts(names.clone()))
        .await
    {
        Ok(Some((_, vectors))) if vectors.len() == names.len() => names.into_iter().zip(vectors).collect(),
        _ => Default::default(),
    }
}

/// One archive round: the facts of each cold document (as the policy's `cold` query
/// finds them) are committed to the graph under the document's own session, dated by
/// the turns they were said in, and the document is marked archived. **Nothing is
/// deleted**: the document and its passages stay recallable verbatim (see
/// `docs/DECISIONS.md`, "archiving keeps what it archives"). Counts the documents
/// archived.
async fn archive(
    graph: &TAddr<GraphActor>,
    documents: &TAddr<DocumentsActor>,
    cold: ColdDocs,
    now: i64,
    moved: &mut usize,
) -> Result<(), RoundError> {
    use crate::memory::lifecycle::maintenance::{doc_session, doc_to_triples};
    let docs = documents.send(cold).await??;
    let mut done = Vec::with_capacity(docs.len());
    for (doc, passages) in docs {
        let groups = doc_to_triples(&doc, &passages);
        let relations = if groups.is_empty() {
            0
        } else {
            graph
                .send(CommitDated {
                    groups,
                    session: doc_session(&doc.id),
                })
                .await??
                .1
        };
        tracing::debug!(doc = %doc.id, passages = passages.len(), relations, "archive: document's facts in the graph; the document stays");
        done.push(doc.id);
    }
    if !done.is_empty() {
        *moved += documents.send(MarkArchived { ids: done, at_ms: now }).await??;
        tracing::info!(
            documents = *moved,
            "archive: cold documents distilled into the graph (kept as documents)"
        );
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

impl crate::memory::lifecycle::heartbeat::Scheduled for GraphHeartbeat {
    type Round = MaintenanceRound;
    fn period(&mut self) -> &mut crate::memory::lifecycle::heartbeat::Period {
        &mut self.period
    }
    fn run(&self, trigger: &'static str) -> std::pin::Pin<Box<dyn std::future::Future<Output = MaintenanceRound>>> {
        Box::pin(self.round(trigger))
    }
    fn failed(r: &MaintenanceRound) -> bool {
        r.error.is_some()
    }
}

impl Handles<crate::memory::lifecycle::heartbeat::SetInterval> for GraphHeartbeat {
    type Reply = ();
    fn handle(
        &mut self,
        crate::memory::lifecycle::heartbeat::SetInterval(d): crate::memory::lifecycle::heartbeat::SetInterval,
        ctx: &mut HostContext<Self>,
    ) {
        self.period.set(d);
        self.arm(ctx);
    }
}
