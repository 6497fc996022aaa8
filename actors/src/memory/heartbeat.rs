//! Memory heartbeats: maintenance rounds on their own timers, each its own actor.
//!
//! Today the distill heartbeat (`core.agent.distill_interval`, 30 min): when the
//! context window holds more than twice `core.agent.max_context_size` events it is
//! pruned back to that size and the pruned events become a document. The archive,
//! merge and review heartbeats work on the graph tier and arrive with it.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use parking_lot::Mutex;
use serde::Serialize;

use super::actor::{ContextActor, DistillContext};
use crate::addr::TAddr;
use crate::host::{Handles, Host, HostContext, KernelActor};

/// What one round did.
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    /// Unix milliseconds.
    pub at_ms: i64,
    /// Events moved into a document.
    pub archived: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `timer` or `operator`.
    pub trigger: &'static str,
}

/// The distill heartbeat's address with its last round (what the API needs).
pub type DistillHandle = (TAddr<DistillHeartbeat>, Arc<Mutex<Option<Round>>>);

/// A heartbeat's period, shared between the actor and its supervisor's factory so a
/// changed setting survives a restart of the actor.
pub type IntervalCell = Arc<Mutex<Duration>>;

/// A heartbeat's timer: its period (shared, see [`IntervalCell`]) and the interval
/// running now. The distill and graph heartbeats both keep one.
pub struct Period {
    every: IntervalCell,
    timer: Option<SpawnHandle>,
}

impl Period {
    pub fn new(every: IntervalCell) -> Self {
        Self { every, timer: None }
    }

    /// (Re-)arms the timer: `tick()` is sent to the actor every period. Answers the period.
    pub fn arm<A, M>(&mut self, ctx: &mut HostContext<A>, tick: fn() -> M) -> Duration
    where
        A: KernelActor + Handles<M>,
        M: Message + 'static,
    {
        if let Some(t) = self.timer.take() {
            ctx.cancel_future(t);
        }
        let every = *self.every.lock();
        self.timer = Some(ctx.run_interval(every, move |host, ctx| host.notify(ctx, tick())));
        every
    }

    /// A new period (applies at the next [`Period::arm`]; survives restarts).
    pub fn set(&mut self, every: Duration) {
        *self.every.lock() = every;
    }
}

/// A heartbeat's period changed (a `core.agent.*_interval` setting): re-arm the timer.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetInterval(pub Duration);

/// The distill heartbeat.
pub struct DistillHeartbeat {
    context: TAddr<ContextActor>,
    /// Read at every round, so `core.agent.max_context_size` changes apply at once.
    config: TAddr<crate::config::ConfigActor>,
    period: Period,
    /// The last round, shared with the status API.
    pub last: Arc<Mutex<Option<Round>>>,
}

impl DistillHeartbeat {
    pub fn new(
        context: TAddr<ContextActor>,
        config: TAddr<crate::config::ConfigActor>,
        every: IntervalCell,
        last: Arc<Mutex<Option<Round>>>,
    ) -> Self {
        Self {
            context,
            config,
            period: Period::new(every),
            last,
        }
    }

    fn arm(&mut self, ctx: &mut HostContext<Self>) {
        let every = self.period.arm(ctx, || Tick);
        tracing::info!(every = ?every, "distill heartbeat armed");
    }

    fn round(&self, trigger: &'static str) -> impl std::future::Future<Output = Round> + 'static {
        let (context, config, last) = (self.context.clone(), self.config.clone(), self.last.clone());
        async move {
            // The current window size (it may have changed since the last round); the
            // key table's default while the settings actor is unreachable.
            let max = match config.send(crate::config::ReadSettings).await {
                Ok(Ok(s)) => crate::config::AgentConfig::read(&s).max_context_size,
                _ => crate::config::AgentConfig::defaults().max_context_size,
            };
            let result = context.send(DistillContext { max_context_size: max }).await;
            let at_ms = super::now_ms();
            let round = match result {
                Ok(Ok(archived)) => Round {
                    at_ms,
                    archived,
                    error: None,
                    trigger,
                },
                Ok(Err(e)) => Round {
                    at_ms,
                    archived: 0,
                    error: Some(e),
                    trigger,
                },
                Err(e) => Round {
                    at_ms,
                    archived: 0,
                    error: Some(e.to_string()),
                    trigger,
                },
            };
            match &round.error {
                None => tracing::info!(archived = round.archived, trigger, "distill heartbeat round"),
                Some(e) => tracing::warn!(trigger, "distill heartbeat round failed: {e}"),
            }
            *last.lock() = Some(round.clone());
            round
        }
    }
}

impl KernelActor for DistillHeartbeat {
    const KIND: &'static str = "heartbeat";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        self.arm(ctx);
    }
}

/// The timer fired.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Tick;

/// An operator asked for a round now; answers what it did.
#[derive(Message)]
#[rtype(result = "Round")]
pub struct RunNow;

impl Handles<Tick> for DistillHeartbeat {
    type Reply = ();
    fn handle(&mut self, _: Tick, ctx: &mut HostContext<Self>) {
        let round = self.round("timer");
        ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(async move {
            round.await;
        }));
    }
}

impl Handles<RunNow> for DistillHeartbeat {
    type Reply = ResponseFuture<Round>;
    fn handle(&mut self, _: RunNow, _: &mut HostContext<Self>) -> Self::Reply {
        Box::pin(self.round("operator"))
    }
}

impl Handles<SetInterval> for DistillHeartbeat {
    type Reply = ();
    fn handle(&mut self, SetInterval(d): SetInterval, ctx: &mut HostContext<Self>) {
        self.period.set(d);
        self.arm(ctx);
    }
}
