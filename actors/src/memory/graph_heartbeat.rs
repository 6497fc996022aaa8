//! The graph heartbeats. Merge and review (`kernel/memory/heartbeat-merge`,
//! `kernel/memory/heartbeat-review`) ask the graph for proposals
//! ([`super::maintenance`]) and hand every one to the agent as kernel self-input, so
//! the model decides on the `_consolidation_` channel, never preempting the user.
//! Archive (`kernel/memory/heartbeat-archive`) distils the facts of cold documents into
//! the graph and marks the documents archived; it never deletes one.

use std::sync::Arc;

use actix::prelude::*;
use parking_lot::Mutex;
use serde::Serialize;

use super::documents::{ColdDocs, DocumentsActor, MarkArchived};
use super::graph_actor::{CommitDated, GraphActor, ProposeMerges, ProposeReviews};
use crate::addr::TAddr;
use crate::host::{Handles, Host, HostContext, KernelActor};

/// Where the merge and review rounds hand their tasks: kernel self-input to the agent
/// (the `_consolidation_` channel). A port the kernel fills with the agent's intake,
/// so the memory layer does not depend on the agent (which depends on the memory).
/// Resolves to the accepted task's id, or why it was not accepted.
pub type TaskSink =
    Arc<dyn Fn(String) -> futures_util::future::LocalBoxFuture<'static, Result<u64, String>> + Send + Sync>;

/// The day's allowance of model tasks for the merge and review rounds, shared by both
/// (`core.agent.maintenance_daily_tasks`): each task is one model call the owner pays
/// for, so upkeep never spends more than this a day, whatever the graph holds. A plain
/// struct; days are UTC days of the kernel's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DailyBudget {
    limit: usize,
    day: i64,
    used: usize,
}

impl DailyBudget {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            day: i64::MIN,
            used: 0,
        }
    }

    /// A changed setting: applies at once (what was spent today stays spent).
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    fn roll(&mut self, now_ms: i64) {
        let day = now_ms.div_euclid(86_400_000);
        if day != self.day {
            self.day = day;
            self.used = 0;
        }
    }

    /// Tasks that may still be handed out on the day of `now_ms`.
    pub fn remaining(&mut self, now_ms: i64) -> usize {
        self.roll(now_ms);
        self.limit.saturating_sub(self.used)
    }

    /// `n` tasks were handed out at `now_ms`.
    pub fn spend(&mut self, now_ms: i64, n: usize) {
        self.roll(now_ms);
        self.used += n;
    }

    /// (limit, used today) as of `now_ms`, for the status API.
    pub fn view(&mut self, now_ms: i64) -> (usize, usize) {
        self.roll(now_ms);
        (self.limit, self.used)
    }
}

/// The budget shared by the merge and review heartbeats (and the settings follower).
pub type BudgetCell = Arc<Mutex<DailyBudget>>;

/// Which maintenance a heartbeat does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Maintenance {
    /// Similar entities → `memory_merge` tasks.
    Merge,
    /// Relations with their sentence → `memory_edit` review tasks.
    Review,
    /// Cold documents (idle ≥ 72 h, read ≤ 2 times) → graph facts (documents kept).
    Archive,
}

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
    embedder: Option<TAddr<super::embed::actor::EmbedderActor>>,
    /// The day's allowance of model tasks (merge and review).
    budget: BudgetCell,
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
            budget: Arc::new(Mutex::new(DailyBudget::new(usize::MAX))),
            period: super::heartbeat::Period::new(every),
            last,
        }
    }

    /// Shares the day's task allowance (merge and review).
    pub fn with_budget(mut self, budget: BudgetCell) -> Self {
        self.budget = budget;
        self
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
        let budget = self.budget.clone();
        async move {
            let now = crate::clock::now_ms();
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
                    let limit = budget.lock().remaining(now).min(super::maintenance::PER_ROUND);
                    if limit == 0 {
                        tracing::debug!(?kind, "maintenance round skipped: today's task budget is spent");
                        Ok(())
                    } else {
                        let proposals = match kind {
                            Maintenance::Merge => {
                                let vectors = name_vectors(&graph, embedder.as_ref()).await;
                                graph.send(ProposeMerges { vectors, limit }).await
                            }
                            _ => graph.send(ProposeReviews { limit }).await,
                        };
                        match proposals.map_err(|e| e.to_string()).and_then(|r| r) {
                            Ok(tasks) => {
                                let mut result = Ok(());
                                for text in tasks {
                                    match agent(text).await {
                                        Ok(_) => {
                                            round.items += 1;
                                            budget.lock().spend(now, 1);
                                        }
                                        Err(e) => result = Err(e),
                                    }
                                }
                                result
                            }
                            Err(e) => Err(e),
                        }
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

/// One archive round: the facts of each cold document (idle for [`COLD_AGE_MS`], read
/// at most [`COLD_MAX_ACCESS`] times, not archived before) are committed to the graph
/// under the document's own session, dated by the turns they were said in, and the
/// document is marked archived. **Nothing is deleted**: the document and its passages
/// stay recallable verbatim (see `docs/DECISIONS.md`, "archiving keeps what it
/// archives"). Counts the documents archived.
///
/// [`COLD_AGE_MS`]: super::maintenance::COLD_AGE_MS
/// [`COLD_MAX_ACCESS`]: super::maintenance::COLD_MAX_ACCESS
async fn archive(
    graph: &TAddr<GraphActor>,
    documents: &TAddr<DocumentsActor>,
    now: i64,
    moved: &mut usize,
) -> Result<(), String> {
    use super::maintenance::{ARCHIVE_PER_ROUND, COLD_AGE_MS, COLD_MAX_ACCESS, doc_session, doc_to_triples};
    let docs = documents
        .send(ColdDocs {
            idle_before_ms: now - COLD_AGE_MS,
            max_access: COLD_MAX_ACCESS,
            limit: ARCHIVE_PER_ROUND,
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
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
                .await
                .map_err(|e| e.to_string())??
                .1
        };
        tracing::debug!(doc = %doc.id, passages = passages.len(), relations, "archive: document's facts in the graph; the document stays");
        done.push(doc.id);
    }
    if !done.is_empty() {
        *moved += documents
            .send(MarkArchived { ids: done, at_ms: now })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
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
        self.period.ticked();
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

impl Handles<super::heartbeat::ClockDue> for GraphHeartbeat {
    type Reply = ResponseFuture<crate::clock::Due>;
    fn handle(
        &mut self,
        super::heartbeat::ClockDue(now): super::heartbeat::ClockDue,
        _: &mut HostContext<Self>,
    ) -> Self::Reply {
        let round = self.round("clock");
        super::heartbeat::on_clock(
            &mut self.period,
            now,
            move || Box::pin(round),
            |r: &MaintenanceRound| r.error.is_some(),
        )
    }
}

impl Handles<super::heartbeat::SetInterval> for GraphHeartbeat {
    type Reply = ();
    fn handle(&mut self, super::heartbeat::SetInterval(d): super::heartbeat::SetInterval, ctx: &mut HostContext<Self>) {
        self.period.set(d);
        self.arm(ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::DailyBudget;

    #[test]
    fn the_daily_budget_is_shared_spent_and_renewed_each_day() {
        const DAY: i64 = 86_400_000;
        let mut b = DailyBudget::new(5);
        assert_eq!(b.remaining(10 * DAY), 5);
        b.spend(10 * DAY + 1, 3);
        assert_eq!(b.remaining(10 * DAY + 2), 2);
        b.spend(10 * DAY + 3, 2);
        assert_eq!(b.remaining(11 * DAY - 1), 0, "spent for today");
        assert_eq!(b.remaining(11 * DAY), 5, "a new day");
        b.spend(11 * DAY, 4);
        b.set_limit(2);
        assert_eq!(b.remaining(11 * DAY + 5), 0, "a lower limit applies at once");
        assert_eq!(b.view(11 * DAY + 5), (2, 4));
        assert_eq!(DailyBudget::new(0).remaining(0), 0, "0: no task at all");
    }
}
