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

use crate::addr::TAddr;
use crate::host::{Handles, Host, HostContext, KernelActor};
use crate::memory::context::actor::{ContextActor, DistillContext};

/// What one round did.
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    /// Unix milliseconds.
    pub at_ms: i64,
    /// Events moved into a document.
    pub archived: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `timer`, `clock` (the virtual clock) or `operator`.
    pub trigger: &'static str,
    /// Graph snapshot documents written ([`super::snapshot`]).
    #[serde(default)]
    pub snapshots: usize,
}

/// The distill heartbeat's address with its last round (what the API needs).
pub type DistillHandle = (TAddr<DistillHeartbeat>, Arc<Mutex<Option<Round>>>);

/// A heartbeat's period, shared between the actor and its supervisor's factory so a
/// changed setting survives a restart of the actor.
pub type IntervalCell = Arc<Mutex<Duration>>;

/// A heartbeat's schedule: its period (shared, see [`IntervalCell`]), when it is due
/// next on a virtual clock, and (wall clock only) the interval timer running now.
/// The distill, rules and graph heartbeats all keep one.
///
/// Under a virtual clock ([`crate::clock`]) no timer is armed: the clock asks the
/// heartbeat with [`ClockDue`] whenever it passes `next_ms`.
pub struct Period {
    every: IntervalCell,
    timer: Option<SpawnHandle>,
    next_ms: i64,
}

impl Period {
    pub fn new(every: IntervalCell) -> Self {
        Self {
            every,
            timer: None,
            next_ms: i64::MAX,
        }
    }

    /// (Re-)arms the schedule: the next round is one period from now; on the wall clock
    /// `tick()` is also sent to the actor every period. Answers the period.
    pub fn arm<A, M>(&mut self, ctx: &mut HostContext<A>, tick: fn() -> M) -> Duration
    where
        A: KernelActor + Handles<M>,
        M: Message + 'static,
    {
        if let Some(t) = self.timer.take() {
            ctx.cancel_future(t);
        }
        let every = *self.every.lock();
        self.next_ms = crate::clock::now_ms().saturating_add(every.as_millis() as i64);
        if !crate::clock::is_virtual() {
            self.timer = Some(ctx.run_interval(every, move |host, ctx| host.notify(ctx, tick())));
        }
        every
    }

    /// The clock asks at `now`: is a round due? If so the next one is scheduled one
    /// period later. Answers (due, next due time).
    pub fn take_due(&mut self, now: i64) -> (bool, i64) {
        if now < self.next_ms {
            return (false, self.next_ms);
        }
        self.next_ms = now.saturating_add(self.every.lock().as_millis() as i64);
        (true, self.next_ms)
    }

    /// A new period (applies at the next [`Period::arm`]; survives restarts).
    pub fn set(&mut self, every: Duration) {
        *self.every.lock() = every;
    }
}

/// The virtual clock reached `0` (Unix ms): run the round if it is due, answer when the
/// next one is (see [`crate::clock::Beats`]).
#[derive(Message)]
#[rtype(result = "crate::clock::Due")]
pub struct ClockDue(pub i64);

/// The clock's view of a heartbeat actor: a [`crate::clock::DueFn`] sending it
/// [`ClockDue`]. An actor that is down (restarting) is asked again in a minute.
pub fn due_fn<A>(addr: TAddr<A>) -> crate::clock::DueFn
where
    A: KernelActor + Handles<ClockDue>,
{
    std::sync::Arc::new(move |now| {
        let addr = addr.clone();
        Box::pin(async move {
            match addr.send(ClockDue(now)).await {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!("a heartbeat did not answer the clock: {e}");
                    crate::clock::Due {
                        ran: false,
                        failed: true,
                        next_ms: now + 60_000,
                    }
                }
            }
        })
    })
}

/// A heartbeat as the virtual clock drives it: its schedule and its round. Every
/// heartbeat (distill, rules, archive, merge, review) implements it, and so answers
/// [`ClockDue`] the same way: when due, the round runs and is waited for.
pub trait Scheduled: KernelActor {
    /// What a round answers.
    type Round: 'static;
    fn period(&mut self) -> &mut Period;
    /// A round now; `trigger` is `timer`, `clock` or `operator`.
    fn run(&self, trigger: &'static str) -> std::pin::Pin<Box<dyn std::future::Future<Output = Self::Round>>>;
    /// Whether the round failed.
    fn failed(round: &Self::Round) -> bool;
}

impl<A: Scheduled> Handles<ClockDue> for A {
    type Reply = ResponseFuture<crate::clock::Due>;
    fn handle(&mut self, ClockDue(now): ClockDue, _: &mut HostContext<Self>) -> Self::Reply {
        let (due, next_ms) = self.period().take_due(now);
        if !due {
            return Box::pin(std::future::ready(crate::clock::Due {
                ran: false,
                failed: false,
                next_ms,
            }));
        }
        let round = self.run("clock");
        Box::pin(async move {
            let r = round.await;
            crate::clock::Due {
                ran: true,
                failed: A::failed(&r),
                next_ms,
            }
        })
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
    /// The graph → document snapshot, run after the distill (none in kernels without a
    /// graph).
    snapshot: Option<(
        TAddr<crate::memory::graph::actor::GraphActor>,
        TAddr<crate::memory::documents::DocumentsActor>,
        super::snapshot::Mark,
    )>,
}

impl DistillHeartbeat {
    /// Also writes the graph's snapshot documents each round.
    pub fn with_snapshot(
        mut self,
        graph: TAddr<crate::memory::graph::actor::GraphActor>,
        documents: TAddr<crate::memory::documents::DocumentsActor>,
        mark: super::snapshot::Mark,
    ) -> Self {
        self.snapshot = Some((graph, documents, mark));
        self
    }

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
            snapshot: None,
        }
    }

    fn arm(&mut self, ctx: &mut HostContext<Self>) {
        let every = self.period.arm(ctx, || Tick);
        tracing::info!(every = ?every, "distill heartbeat armed");
    }

    fn round(&self, trigger: &'static str) -> impl std::future::Future<Output = Round> + 'static {
        let (context, config, last) = (self.context.clone(), self.config.clone(), self.last.clone());
        let snapshot = self.snapshot.clone();
        async move {
            // The current window size (it may have changed since the last round); the
            // key table's default while the settings actor is unreachable.
            let max = match config.send(crate::config::ReadSettings).await {
                Ok(Ok(s)) => crate::config::AgentConfig::read(&s).max_context_size,
                _ => crate::config::AgentConfig::defaults().max_context_size,
            };
            let result = context.send(DistillContext { max_context_size: max }).await;
            let at_ms = crate::clock::now_ms();
            let mut round = match result {
                Ok(Ok(archived)) => Round {
                    at_ms,
                    archived,
                    error: None,
                    trigger,
                    snapshots: 0,
                },
                Ok(Err(e)) => Round {
                    at_ms,
                    archived: 0,
                    error: Some(e.to_string()),
                    trigger,
                    snapshots: 0,
                },
                Err(e) => Round {
                    at_ms,
                    archived: 0,
                    error: Some(e.to_string()),
                    trigger,
                    snapshots: 0,
                },
            };
            if let Some((graph, documents, mark)) = &snapshot {
                match super::snapshot::sync(graph, documents, mark).await {
                    Ok(n) => round.snapshots = n,
                    Err(e) => {
                        tracing::warn!("graph snapshot documents not written this round: {e}");
                        round.error.get_or_insert(format!("graph snapshot: {e}"));
                    }
                }
            }
            match &round.error {
                None => tracing::info!(
                    archived = round.archived,
                    snapshots = round.snapshots,
                    trigger,
                    "distill heartbeat round"
                ),
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

impl Scheduled for DistillHeartbeat {
    type Round = Round;
    fn period(&mut self) -> &mut Period {
        &mut self.period
    }
    fn run(&self, trigger: &'static str) -> std::pin::Pin<Box<dyn std::future::Future<Output = Round>>> {
        Box::pin(self.round(trigger))
    }
    fn failed(r: &Round) -> bool {
        r.error.is_some()
    }
}

impl Handles<SetInterval> for DistillHeartbeat {
    type Reply = ();
    fn handle(&mut self, SetInterval(d): SetInterval, ctx: &mut HostContext<Self>) {
        self.period.set(d);
        self.arm(ctx);
    }
}
