//! The merge and review heartbeats (`kernel/memory/heartbeat-merge`,
//! `kernel/memory/heartbeat-review`): each round asks the graph for its proposals
//! ([`super::maintenance`]) and hands every one to the agent as kernel self-input, so
//! the model decides on the `_consolidation_` channel, never preempting the user.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use parking_lot::Mutex;
use serde::Serialize;

use super::graph_actor::{GraphActor, ProposeMerges, ProposeReviews};
use crate::addr::TAddr;
use crate::agent::intake::{EventLoop, SelfInput};
use crate::host::{Handles, Host, HostContext, KernelActor};

/// Which maintenance a heartbeat does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Maintenance {
    /// Similar entities → `memory_merge` tasks.
    Merge,
    /// Relations with their sentence → `memory_edit` review tasks.
    Review,
}

/// What one round did.
#[derive(Debug, Clone, Serialize)]
pub struct MaintenanceRound {
    /// Unix milliseconds.
    pub at_ms: i64,
    pub kind: Maintenance,
    /// Tasks handed to the agent.
    pub tasks: usize,
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
    agent: TAddr<EventLoop>,
    every: Duration,
    /// The last round, shared with the status API.
    last: Arc<Mutex<Option<MaintenanceRound>>>,
}

impl GraphHeartbeat {
    pub fn new(
        kind: Maintenance,
        graph: TAddr<GraphActor>,
        agent: TAddr<EventLoop>,
        every: Duration,
        last: Arc<Mutex<Option<MaintenanceRound>>>,
    ) -> Self {
        Self {
            kind,
            graph,
            agent,
            every,
            last,
        }
    }

    fn round(&self, trigger: &'static str) -> impl std::future::Future<Output = MaintenanceRound> + 'static {
        let (kind, graph, agent, last) = (self.kind, self.graph.clone(), self.agent.clone(), self.last.clone());
        async move {
            let proposals = match kind {
                Maintenance::Merge => graph.send(ProposeMerges).await,
                Maintenance::Review => graph.send(ProposeReviews).await,
            };
            let mut round = MaintenanceRound {
                at_ms: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64),
                kind,
                tasks: 0,
                error: None,
                trigger,
            };
            match proposals {
                Ok(Ok(tasks)) => {
                    for text in tasks {
                        match agent.send(SelfInput(text)).await {
                            Ok(Ok(_)) => round.tasks += 1,
                            Ok(Err(e)) => round.error = Some(e),
                            Err(e) => round.error = Some(e.to_string()),
                        }
                    }
                }
                Ok(Err(e)) => round.error = Some(e),
                Err(e) => round.error = Some(e.to_string()),
            }
            match &round.error {
                None => tracing::info!(?kind, tasks = round.tasks, trigger, "graph maintenance round"),
                Some(e) => tracing::warn!(?kind, trigger, "graph maintenance round failed: {e}"),
            }
            *last.lock() = Some(round.clone());
            round
        }
    }
}

impl KernelActor for GraphHeartbeat {
    const KIND: &'static str = "heartbeat";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        tracing::info!(kind = ?self.kind, every = ?self.every, "graph maintenance heartbeat armed");
        ctx.run_interval(self.every, |host, ctx| host.notify(ctx, MaintenanceTick));
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
