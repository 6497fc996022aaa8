//! The supervisor actor: executes the decisions of [`Core`] on real actors.

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::core::{Cmd, Core, Status};
use super::policy::{RestartPolicy, SupervisorConfig};
use crate::bus::{Event, EventBus};
use crate::control::RestartError;
use crate::host::{Exit, Handles, Host, HostContext, KernelActor};
use crate::registry::{ActorState, ActorStats};

/// A running instance, as its supervisor sees it: something it can ask to stop.
pub(crate) trait Running: Send + Sync {
    /// Sends the stop request; false when the instance is already gone.
    fn shutdown(&self) -> bool;
}

/// Why a factory could not build its actor (a database that does not open, a plugin
/// whose manifest does not read): any error, its source chain kept. The supervisor
/// records its text as the child's last exit (`start failed: …`) and in
/// [`AddChildError::StartFailed`]; a factory returns its own typed error with `?`.
pub type StartError = Box<dyn std::error::Error + Send + Sync>;

type Starter = dyn Fn(oneshot::Sender<Exit>) -> Result<Box<dyn Running>, StartError> + Send + Sync;

/// How to (re)start one child: kept by the supervisor for the child's whole life.
#[derive(Clone)]
pub struct ChildSpec {
    pub(crate) restart: RestartPolicy,
    pub(crate) stats: Arc<ActorStats>,
    pub(crate) starter: Arc<Starter>,
}

/// Adds a child to a running supervisor and starts it; answers once the first start
/// was attempted (`Err` carries the start error; the child stays supervised).
#[derive(Message)]
#[rtype(result = "Result<(), AddChildError>")]
pub(crate) struct AddChild(pub ChildSpec);

/// Why a child could not be added.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum AddChildError {
    #[error("supervisor is shutting down or failed; it accepts no new children")]
    NotAccepting,
    #[error("child `{id}` failed to start: {reason} (it will be retried with backoff)")]
    StartFailed { id: String, reason: String },
}

/// Operator restart of one child, by its full id.
#[derive(Message)]
#[rtype(result = "Result<u64, RestartError>")]
pub(crate) struct RestartChild(pub String);

/// Operator stop of one child (left stopped until restarted), by its full id.
#[derive(Message)]
#[rtype(result = "Result<(), RestartError>")]
pub(crate) struct StopChild(pub String);

/// Takes one child (by its full id) out of the tree for good: stopped if running, never
/// restarted, and dropped from the specs a later instance of this supervisor would
/// start again.
#[derive(Message)]
#[rtype(result = "Result<(), RestartError>")]
pub(crate) struct RemoveChild(pub String);

/// A supervisor: starts its children in order, watches them, restarts them by policy,
/// stops them in reverse order, and escalates when restarts come too fast.
pub struct Supervisor {
    stats: Arc<ActorStats>,
    bus: EventBus,
    core: Core,
    /// The declared children, shared with later instances of this supervisor so that
    /// children added at run time survive a restart of their supervisor.
    specs: Arc<Mutex<Vec<ChildSpec>>>,
    /// Parallel to the core's children: the live instance of each, if any.
    running: Vec<Option<Box<dyn Running>>>,
    /// Per child: the spec (cloned out of `specs` at start).
    children: Vec<ChildSpec>,
    /// The last start failure (child index, reason), read by `AddChild` to answer
    /// whether the child it added came up.
    last_start_error: Option<(usize, String)>,
}

impl KernelActor for Supervisor {
    const KIND: &'static str = "supervisor";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        let specs = self.specs.lock().clone();
        for spec in specs {
            self.add(spec, ctx);
        }
    }

    fn shutdown(&mut self, ctx: &mut HostContext<Self>) {
        tracing::info!(supervisor = %self.stats.id, "stopping children in reverse start order");
        let cmds = self.core.shutdown();
        self.run(cmds, ctx);
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        // Whatever way this instance ended, its children must not outlive it.
        for r in self.running.iter().flatten() {
            r.shutdown();
        }
    }
}

impl Supervisor {
    pub(crate) fn new(
        stats: Arc<ActorStats>,
        bus: EventBus,
        config: SupervisorConfig,
        specs: Arc<Mutex<Vec<ChildSpec>>>,
    ) -> Self {
        Self {
            stats,
            bus,
            core: Core::new(config),
            specs,
            running: Vec::new(),
            children: Vec::new(),
            last_start_error: None,
        }
    }

    /// The index of the child with full id `id` (operator requests name children by id).
    fn child_index(&self, id: &str) -> Result<usize, RestartError> {
        self.children
            .iter()
            .position(|c| c.stats.id == id)
            .ok_or_else(|| RestartError::Unknown(id.to_owned()))
    }

    fn add(&mut self, spec: ChildSpec, ctx: &mut HostContext<Self>) -> Option<usize> {
        let (i, cmd) = self.core.add_child(spec.restart)?;
        self.children.push(spec);
        self.running.push(None);
        self.run(vec![cmd], ctx);
        Some(i)
    }

    /// Executes commands until none are left (a start failure can produce more).
    fn run(&mut self, cmds: Vec<Cmd>, ctx: &mut HostContext<Self>) {
        let mut work: std::collections::VecDeque<Cmd> = cmds.into();
        while let Some(cmd) = work.pop_front() {
            match cmd {
                Cmd::Start { child, restart } => work.extend(self.start(child, restart, ctx)),
                Cmd::StartAfter { plan, children, delay } => {
                    for &c in &children {
                        self.children[c].stats.set_backoff(delay);
                    }
                    tracing::info!(
                        supervisor = %self.stats.id,
                        children = ?children.iter().map(|&c| self.children[c].stats.id.as_str()).collect::<Vec<_>>(),
                        ?delay,
                        "restarting after backoff"
                    );
                    ctx.run_later(delay, move |host, ctx| {
                        let me = host.inner();
                        let cmds = me.core.backoff_elapsed(plan, &children);
                        me.run(cmds, ctx);
                    });
                }
                Cmd::Stop {
                    child,
                    generation,
                    timeout,
                } => {
                    let sent = self.running[child].as_ref().is_some_and(|r| r.shutdown());
                    if !sent {
                        // Already gone; its exit report is on its way or was lost.
                        work.extend(self.core.stop_timeout(child, generation));
                        continue;
                    }
                    ctx.run_later(timeout, move |host, ctx| {
                        let me = host.inner();
                        let cmds = me.core.stop_timeout(child, generation);
                        if !cmds.is_empty() || me.core.status(child) != Status::Stopping {
                            tracing::warn!(
                                child = %me.children[child].stats.id,
                                ?timeout,
                                "child did not stop within its shutdown timeout; abandoned"
                            );
                        }
                        me.run(cmds, ctx);
                    });
                }
                Cmd::Escalate(reason) => {
                    tracing::error!(supervisor = %self.stats.id, "{reason}; escalating to the parent");
                    self.bus.publish(Event::SupervisorEscalated {
                        id: self.stats.id.to_string(),
                        reason: reason.clone(),
                    });
                    Host::<Self>::fail(ctx, reason);
                }
                Cmd::Finished => ctx.stop(),
            }
        }
    }

    fn start(&mut self, i: usize, restart: bool, ctx: &mut HostContext<Self>) -> Vec<Cmd> {
        let spec = self.children[i].clone();
        if restart {
            let n = spec.stats.inc_restarts();
            self.bus.publish(Event::ActorRestart {
                id: spec.stats.id.to_string(),
                restarts: n,
            });
        }
        let (tx, rx) = oneshot::channel();
        let now = Instant::now();
        match (spec.starter)(tx) {
            Ok(running) => {
                let generation = self.core.started(i, now);
                self.running[i] = Some(running);
                tracing::debug!(actor = %spec.stats.id, generation, "started");
                self.bus.publish(Event::ActorStarted {
                    id: spec.stats.id.to_string(),
                    generation,
                });
                ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(rx).map(move |res, host, ctx| {
                    let exit = res.unwrap_or_else(|_| Exit::Panic("exit report lost".into()));
                    host.inner().on_exit(i, generation, exit, ctx);
                }));
                Vec::new()
            }
            Err(e) => {
                // The tree, the bus and the core keep the reason as text: it is shown.
                let reason = e.to_string();
                tracing::error!(actor = %spec.stats.id, "start failed: {reason}");
                spec.stats.record_exit(&format!("start failed: {reason}"));
                spec.stats.set_state(ActorState::Failed);
                self.bus.publish(Event::ActorExit {
                    id: spec.stats.id.to_string(),
                    reason: format!("start failed: {reason}"),
                    abnormal: true,
                });
                self.last_start_error = Some((i, reason.clone()));
                self.core.start_failed(i, reason, now)
            }
        }
    }

    fn on_exit(&mut self, i: usize, generation: u64, exit: Exit, ctx: &mut HostContext<Self>) {
        let id = &self.children[i].stats.id;
        if exit.is_abnormal() {
            tracing::warn!(actor = %id, %exit, "child exited abnormally");
        } else {
            tracing::info!(actor = %id, %exit, "child exited");
        }
        self.bus.publish(Event::ActorExit {
            id: id.to_string(),
            reason: exit.to_string(),
            abnormal: exit.is_abnormal(),
        });
        if self.core.generation(i) == generation {
            self.running[i] = None;
        }
        let cmds = self.core.exited(i, generation, &exit, Instant::now());
        self.run(cmds, ctx);
    }
}

impl Handles<AddChild> for Supervisor {
    type Reply = Result<(), AddChildError>;

    fn handle(&mut self, AddChild(spec): AddChild, ctx: &mut HostContext<Self>) -> Self::Reply {
        let id = spec.stats.id.clone();
        self.last_start_error = None;
        let i = self.add(spec.clone(), ctx).ok_or(AddChildError::NotAccepting)?;
        self.specs.lock().push(spec);
        match self.last_start_error.take() {
            Some((failed, reason)) if failed == i => Err(AddChildError::StartFailed { id, reason }),
            _ => Ok(()),
        }
    }
}

impl Handles<RestartChild> for Supervisor {
    type Reply = Result<u64, RestartError>;

    fn handle(&mut self, RestartChild(id): RestartChild, ctx: &mut HostContext<Self>) -> Self::Reply {
        let i = self.child_index(&id)?;
        let cmds = self
            .core
            .operator_restart(i)
            .map_err(|reason| RestartError::Refused { id: id.clone(), reason })?;
        tracing::info!(actor = %id, "restart requested by an operator");
        let before = self.children[i].stats.restarts();
        self.run(cmds, ctx);
        Ok(before + 1)
    }
}

impl Handles<StopChild> for Supervisor {
    type Reply = Result<(), RestartError>;

    fn handle(&mut self, StopChild(id): StopChild, ctx: &mut HostContext<Self>) -> Self::Reply {
        let i = self.child_index(&id)?;
        let cmds = self
            .core
            .operator_stop(i)
            .map_err(|reason| RestartError::Refused { id: id.clone(), reason })?;
        tracing::info!(actor = %id, "stop requested by an operator");
        if cmds.is_empty() {
            self.children[i].stats.set_state(crate::registry::ActorState::Stopped);
        }
        self.run(cmds, ctx);
        Ok(())
    }
}

impl Handles<RemoveChild> for Supervisor {
    type Reply = Result<(), RestartError>;

    fn handle(&mut self, RemoveChild(id): RemoveChild, ctx: &mut HostContext<Self>) -> Self::Reply {
        let i = self.child_index(&id)?;
        let cmds = self
            .core
            .remove(i)
            .map_err(|reason| RestartError::Refused { id: id.clone(), reason })?;
        tracing::info!(actor = %id, "removed from the tree");
        self.specs.lock().retain(|s| s.stats.id != id);
        // Removed at once (it was not running); otherwise stopped now or, while another
        // stop sequence runs, after it.
        if self.core.status(i) == Status::Removed {
            self.children[i].stats.set_state(crate::registry::ActorState::Stopped);
        }
        self.run(cmds, ctx);
        Ok(())
    }
}
