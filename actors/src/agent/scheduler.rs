//! `kernel/agent/scheduler`: the Scheduler actor around [`crate::scheduler::Core`].
//!
//! It receives inputs from the intake actors, decides (through the core) what runs,
//! starts each task as its own tracked actor (`.../scheduler/task-<id>`), answers the
//! running task's safe-point questions, and parks a preempted task on the core's stack
//! until it is its turn again.
//!
//! Every input it enqueues carries a [`Settle`] hook from whoever accepted it (the
//! durable inbox, the duplicate guard of the intake); the scheduler keeps the hooks by
//! task id and reports each task's start and its one end (`Finished`, a crash, a drop,
//! or the scheduler's own stop).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use actix::prelude::*;

use super::door::Admitted;
use super::input::{Input, Outcome, Refusal, Settle};
use super::protocol::{CancelLlm, Resume, SchedulerLink, SchedulerPort};
pub use super::protocol::{ConsumeCancel, Finished, SafePoint, Submit, TakeStop};
use super::task::{TaskActor, TaskDeps};
use crate::addr::{SendError, TAddr};
use crate::bus::{Event, TaskState};
use crate::host::{Exit, Handles, HostContext, KernelActor};
use crate::scheduler::{Core, Kind, Level, Pick, Snapshot};
use futures_util::future::BoxFuture;

/// What the core queues: a new input, or a parked (suspended) task actor.
enum Job {
    // Boxed: an input is large next to an address, and jobs sit in queues.
    New(Box<Admitted>),
    Parked(TAddr<TaskActor>),
}

struct Running {
    id: u64,
    addr: TAddr<TaskActor>,
    /// When it was enqueued (the offload measures a busy agent from there, spec §6.1).
    since: Instant,
}

/// A waiting or running task's entry: when it was enqueued (the offload's measure) and
/// its label (the operator's task view; the queued payloads are not looked into).
struct Enqueued {
    at: Instant,
    label: crate::scheduler::TaskLabel,
}

impl Enqueued {
    fn now(input: &Input) -> Self {
        Self {
            at: Instant::now(),
            label: crate::scheduler::TaskLabel::new(&input.source, &input.channel, &input.text),
        }
    }
}

/// The Scheduler actor.
pub struct SchedulerActor {
    core: Core<Job, ()>,
    running: Option<Running>,
    /// The acceptors' hooks of the enqueued inputs, by task id.
    settles: HashMap<u64, Settle>,
    /// When each waiting or running task was enqueued, and what it is, by id.
    enqueued: HashMap<u64, Enqueued>,
    deps: Arc<TaskDeps>,
    /// This actor's own tracked address (filled by whoever started it), handed to tasks.
    me: Arc<OnceLock<TAddr<SchedulerActor>>>,
}

impl SchedulerActor {
    pub fn new(deps: Arc<TaskDeps>, me: Arc<OnceLock<TAddr<SchedulerActor>>>) -> Self {
        Self {
            core: Core::default(),
            running: None,
            settles: HashMap::new(),
            enqueued: HashMap::new(),
            deps,
            me,
        }
    }

    fn publish(&self, id: u64, state: TaskState, level: Option<Level>, effective: u8) {
        self.deps.bus.publish(Event::Task {
            task_id: id,
            state,
            level: level.map(|l| format!("L{}", l as u8)),
            effective_level: effective,
        });
    }

    /// Reports the end of task `id` to its acceptor (once; later calls do nothing).
    fn settle(&mut self, id: u64, outcome: Outcome) {
        self.enqueued.remove(&id);
        if let Some(mut s) = self.settles.remove(&id) {
            s.end(outcome);
        }
    }

    /// Accepts one input; returns its task id (or why it was not queued). The duplicate
    /// guard is the intake's (it must answer before the input is stored); a refused
    /// input's [`Settle`] hook is not called: the submitter handles the refusal.
    fn submit(&mut self, mut input: Admitted, ctx: &mut HostContext<Self>) -> Result<u64, Refusal> {
        let settle = std::mem::take(&mut input.settle);
        let kind = if input.kernel { Kind::SelfMsg } else { Kind::Input };
        let entry = Enqueued::now(&input);
        let id = match input.level {
            None => match self.core.enqueue(Job::New(Box::new(input)), kind) {
                Ok(id) => {
                    self.settles.insert(id, settle);
                    self.enqueued.insert(id, entry);
                    self.publish(id, TaskState::Queued, None, 0);
                    id
                }
                Err(job) => {
                    if let Job::New(mut i) = job {
                        i.reply.skip(Refusal::QueueFull);
                    }
                    tracing::warn!("ready queue full (256): input rejected");
                    return Err(Refusal::QueueFull);
                }
            },
            Some(level) => {
                let r = self
                    .core
                    .register_interrupt(Job::New(Box::new(input)), level, kind, Instant::now());
                self.settles.insert(r.id, settle);
                self.enqueued.insert(r.id, entry);
                self.publish(r.id, TaskState::Queued, Some(level), level as u8);
                if let Some(mut dropped) = r.dropped {
                    tracing::warn!(
                        task = dropped.meta.id,
                        "interrupt queues full: dropped the oldest lowest-level interrupt"
                    );
                    if let Job::New(i) = &mut dropped.payload {
                        i.reply.task_id = dropped.meta.id;
                        i.reply.skip(Refusal::QueueFull);
                    }
                    self.settle(dropped.meta.id, Outcome::Dropped);
                }
                match (&self.running, r.preempts) {
                    (Some(run), true) => {
                        tracing::info!(victim = run.id, interrupt = r.id, level = level.name(), "preempt");
                        let _ = run.addr.do_send(CancelLlm);
                    }
                    (_, false) => {
                        tracing::debug!(interrupt = r.id, because = ?r.queued_because, "interrupt queued");
                    }
                    _ => {}
                }
                r.id
            }
        };
        self.pump(ctx);
        Ok(id)
    }

    /// Starts or resumes the next task when nothing runs.
    fn pump(&mut self, ctx: &mut HostContext<Self>) {
        while self.running.is_none() {
            let Some(pick) = self.core.pick_next() else { return };
            let meta = self.core.running().cloned().expect("just picked");
            match pick {
                Pick::Start(task) => {
                    let Job::New(input) = task.payload else {
                        unreachable!("parked tasks resume")
                    };
                    // Kernel consolidation runs as one critical section: interrupts
                    // wait for it instead of cancelling its LLM calls.
                    self.core.set_critical(input.is_consolidation());
                    if let Some(s) = self.settles.get_mut(&meta.id) {
                        s.started();
                    }
                    let me = self
                        .me
                        .get()
                        .cloned()
                        .expect("scheduler address is set before inputs arrive");
                    let actor = TaskActor::new(meta.id, *input, meta.level(), self.deps.clone(), me);
                    let parent = self.me.get().map(|a| a.id().to_owned()).unwrap_or_default();
                    match TAddr::spawn_unsupervised(&self.deps.registry, &parent, &format!("task-{}", meta.id), actor) {
                        Ok((addr, exit)) => {
                            self.publish(meta.id, TaskState::Running, meta.level(), meta.effective());
                            self.watch(meta.id, meta.level(), addr.id().to_owned(), exit, ctx);
                            self.running = Some(Running {
                                id: meta.id,
                                addr,
                                since: self.enqueued.get(&meta.id).map_or_else(Instant::now, |e| e.at),
                            });
                        }
                        Err(e) => {
                            tracing::error!(task = meta.id, "cannot start the task actor: {e}");
                            self.core.finish();
                            self.settle(meta.id, Outcome::Failed);
                        }
                    }
                }
                Pick::Resume(task, ()) => {
                    let Job::Parked(addr) = task.payload else {
                        unreachable!("new tasks start")
                    };
                    if addr.do_send(Resume).is_err() {
                        tracing::error!(task = meta.id, "a suspended task vanished; dropping it");
                        self.core.finish();
                        self.settle(meta.id, Outcome::Failed);
                        continue;
                    }
                    self.publish(meta.id, TaskState::Resumed, meta.level(), meta.effective());
                    let since = self.enqueued.get(&meta.id).map_or_else(Instant::now, |e| e.at);
                    self.running = Some(Running {
                        id: meta.id,
                        addr,
                        since,
                    });
                }
            }
        }
    }

    /// Watches a task actor: unregisters it when it ends and, if it crashed while
    /// running, frees the scheduler and tells the model through a kernel interrupt.
    fn watch(
        &self,
        id: u64,
        level: Option<Level>,
        actor_id: String,
        exit: tokio::sync::oneshot::Receiver<Exit>,
        ctx: &mut HostContext<Self>,
    ) {
        ctx.spawn(
            actix::fut::wrap_future::<_, crate::host::Host<Self>>(exit).map(move |res, host, ctx| {
                let me = host.inner();
                me.deps.registry.unregister(&actor_id);
                let exit = res.unwrap_or(Exit::Panic("exit report lost".into()));
                if !exit.is_abnormal() {
                    return;
                }
                tracing::error!(task = id, %exit, "task crashed");
                me.settle(id, Outcome::Failed);
                me.publish(id, TaskState::Failed, level, level.map_or(0, |l| l as u8));
                if me.running.as_ref().is_some_and(|r| r.id == id) {
                    me.running = None;
                    me.core.finish();
                }
                if level != Some(Level::L4) {
                    let notice = Input::kernel_interrupt(
                        "kernel",
                        &crate::i18n::Msg::TaskPanicked {
                            id,
                            exit: &exit.to_string(),
                        }
                        .text(),
                    );
                    match Admitted::own(notice) {
                        Ok(n) => {
                            let _ = me.submit(n, ctx);
                        }
                        Err(r) => tracing::warn!("the panic notice was not queued: {r}"),
                    }
                } else {
                    me.pump(ctx);
                }
            }),
        );
    }
}

impl KernelActor for SchedulerActor {
    const KIND: &'static str = "scheduler";

    fn stopped(&mut self, _: &mut HostContext<Self>) {
        // Everyone still waiting learns the agent stopped instead of hanging.
        for mut t in self.core.drain() {
            if let Job::New(i) = &mut t.payload {
                i.reply.task_id = t.meta.id;
                i.reply.skip(Refusal::AgentStopped);
            }
        }
        // Queued, suspended and running inputs alike never finished here: a stored
        // one stays in the inbox and runs after the next start.
        for (_, mut s) in self.settles.drain() {
            s.end(Outcome::Abandoned);
        }
    }
}

/// The user pressed stop: cancel the current inference and the inputs waiting now.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct Stop {
    /// Cancel the inputs waiting in the ready queue too.
    pub clear_queue: bool,
}

/// The scheduler's whole state.
#[derive(Message)]
#[rtype(result = "Snapshot")]
pub struct GetTasks;

impl Handles<Submit> for SchedulerActor {
    type Reply = Result<u64, Refusal>;
    fn handle(&mut self, Submit(input): Submit, ctx: &mut HostContext<Self>) -> Self::Reply {
        crate::fault::point(crate::fault::site::SCHEDULER_SUBMIT, &input.text);
        self.submit(input, ctx)
    }
}

impl Handles<Stop> for SchedulerActor {
    type Reply = usize;
    fn handle(&mut self, Stop { clear_queue }: Stop, _: &mut HostContext<Self>) -> usize {
        let n = self.core.arm_stop(clear_queue);
        tracing::info!(
            queued = n,
            clear_queue,
            "stop: cancelling the current inference (and, with clear_queue, the waiting inputs)"
        );
        if let Some(r) = &self.running {
            let _ = r.addr.do_send(CancelLlm);
        }
        n
    }
}

impl Handles<SafePoint> for SchedulerActor {
    type Reply = bool;
    fn handle(&mut self, msg: SafePoint, ctx: &mut HostContext<Self>) -> bool {
        let Some(run) = &self.running else { return false };
        if run.id != msg.task || !self.core.safe_point(msg.consolidation, Instant::now()) {
            return false;
        }
        let run = self.running.take().expect("checked");
        self.core.suspend(Job::Parked(run.addr), (), Instant::now());
        let meta = self.core.snapshot().stack.last().cloned();
        if let Some(m) = meta {
            self.publish(m.id, TaskState::Suspended, m.level, m.effective_level);
        }
        self.pump(ctx);
        true
    }
}

impl Handles<TakeStop> for SchedulerActor {
    type Reply = bool;
    fn handle(&mut self, TakeStop(id): TakeStop, _: &mut HostContext<Self>) -> bool {
        self.core.take_stop(id)
    }
}

impl Handles<ConsumeCancel> for SchedulerActor {
    type Reply = bool;
    fn handle(&mut self, ConsumeCancel(id): ConsumeCancel, _: &mut HostContext<Self>) -> bool {
        self.core.consume_cancel(id)
    }
}

impl Handles<Finished> for SchedulerActor {
    type Reply = ();
    fn handle(&mut self, msg: Finished, ctx: &mut HostContext<Self>) {
        match (Outcome::from_state(msg.state), msg.error) {
            (Outcome::Failed, Some(error)) => {
                self.enqueued.remove(&msg.task);
                if let Some(mut s) = self.settles.remove(&msg.task) {
                    s.fail(error);
                }
            }
            (outcome, _) => self.settle(msg.task, outcome),
        }
        if self.running.as_ref().is_some_and(|r| r.id == msg.task) {
            let level = self.core.running().and_then(|m| m.level());
            self.running = None;
            self.core.finish();
            self.publish(msg.task, msg.state, level, level.map_or(0, |l| l as u8));
        }
        self.pump(ctx);
    }
}

impl Handles<GetTasks> for SchedulerActor {
    type Reply = actix::MessageResult<crate::host::Envelope<GetTasks>>;
    fn handle(&mut self, _: GetTasks, _: &mut HostContext<Self>) -> Self::Reply {
        let mut snapshot = self.core.snapshot();
        snapshot.label(|id| self.enqueued.get(&id).map(|e| e.label.clone()));
        actix::MessageResult(snapshot)
    }
}

/// A task reaches its scheduler through this port (the task does not know the
/// scheduler's type: see [`super::protocol`]).
impl SchedulerPort for TAddr<SchedulerActor> {
    fn safe_point(&self, msg: SafePoint) -> BoxFuture<'static, Result<bool, SendError>> {
        let me = self.clone();
        Box::pin(async move { me.send(msg).await })
    }
    fn take_stop(&self, task: u64) -> BoxFuture<'static, Result<bool, SendError>> {
        let me = self.clone();
        Box::pin(async move { me.send(TakeStop(task)).await })
    }
    fn consume_cancel(&self, task: u64) -> BoxFuture<'static, Result<bool, SendError>> {
        let me = self.clone();
        Box::pin(async move { me.send(ConsumeCancel(task)).await })
    }
    fn finished(&self, msg: Finished) -> Result<(), SendError> {
        self.do_send(msg)
    }
    fn submit(&self, input: Admitted) -> Result<(), SendError> {
        self.do_send(Submit(input))
    }
}

impl From<TAddr<SchedulerActor>> for SchedulerLink {
    fn from(addr: TAddr<SchedulerActor>) -> Self {
        SchedulerLink::new(addr)
    }
}

/// Why the agent's own input was not queued.
#[derive(Debug, thiserror::Error)]
pub enum OwnInputError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("the scheduler is unavailable: {0}")]
    Unavailable(#[from] SendError),
}

/// Queues the agent's own input (a notice, a report; [`Admitted::own`]) without waiting
/// for its task id.
pub fn submit_own(to: &TAddr<SchedulerActor>, input: Input) -> Result<(), OwnInputError> {
    to.do_send(Submit(Admitted::own(input)?))?;
    Ok(())
}

/// An input taken out of the scheduler's queues before it ran (a resident's residual
/// work, the offload's backlog), with its acceptor's hook back in
/// [`Input::settle`] so whoever runs it next reports its end.
pub struct Taken {
    pub meta: crate::scheduler::Meta,
    pub input: Admitted,
}

/// Takes every input not yet run (ready queue, interrupt queues, immediate; not the
/// suspended frames). Kernel self-input is discarded, logged (spec §6.2).
#[derive(Message)]
#[rtype(result = "Vec<Taken>")]
pub struct TakeWaiting;

/// Takes the first `n` queued channel inputs (not kernel notices, not self-input), all
/// or nothing (spec §6.1).
#[derive(Message)]
#[rtype(result = "Vec<Taken>")]
pub struct TakeFront(pub usize);

/// Puts inputs taken by [`TakeFront`] back at the front of the ready queue.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PutFront(pub Vec<Taken>);

/// Queues an input at the *front* of the ready queue (the offload's notice, spec §6.1
/// step 5: the main agent reads it before anything else that waits). An input with a
/// level is an interrupt and goes where interrupts go.
#[derive(Message)]
#[rtype(result = "Result<u64, Refusal>")]
pub struct SubmitFront(pub Admitted);

/// Whether a task has been running for at least `after`, and how many queued channel
/// inputs wait behind it (the offload's trigger, spec §6.1).
#[derive(Message)]
#[rtype(result = "Busy")]
pub struct GetBusy;

/// The answer of [`GetBusy`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Busy {
    /// How long the running task has run (none runs: `None`).
    pub running_for: Option<std::time::Duration>,
    /// Queued channel inputs waiting (not kernel notices nor self-input).
    pub pending_inputs: usize,
}

impl SchedulerActor {
    fn taken(&mut self, t: crate::scheduler::Task<Job>) -> Option<Taken> {
        let Job::New(mut input) = t.payload else { return None };
        input.settle = self.settles.remove(&t.meta.id).unwrap_or_default();
        self.enqueued.remove(&t.meta.id);
        Some(Taken {
            meta: t.meta,
            input: *input,
        })
    }
}

impl Handles<TakeWaiting> for SchedulerActor {
    type Reply = actix::MessageResult<crate::host::Envelope<TakeWaiting>>;
    fn handle(&mut self, _: TakeWaiting, _: &mut HostContext<Self>) -> Self::Reply {
        let mut out = Vec::new();
        for t in self.core.take_waiting() {
            if t.meta.kind == Kind::SelfMsg {
                tracing::info!(task = t.meta.id, "residual kernel self-input discarded");
                self.settle(t.meta.id, Outcome::Dropped);
                continue;
            }
            out.extend(self.taken(t));
        }
        actix::MessageResult(out)
    }
}

impl Handles<TakeFront> for SchedulerActor {
    type Reply = actix::MessageResult<crate::host::Envelope<TakeFront>>;
    fn handle(&mut self, TakeFront(n): TakeFront, _: &mut HostContext<Self>) -> Self::Reply {
        let tasks = self.core.take_front(n, |t| {
            t.meta.kind == Kind::Input && matches!(&t.payload, Job::New(i) if !i.kernel && i.source != "kernel")
        });
        actix::MessageResult(tasks.into_iter().filter_map(|t| self.taken(t)).collect())
    }
}

impl Handles<PutFront> for SchedulerActor {
    type Reply = ();
    fn handle(&mut self, PutFront(taken): PutFront, ctx: &mut HostContext<Self>) {
        let tasks = taken
            .into_iter()
            .map(|mut t| {
                self.settles.insert(t.meta.id, std::mem::take(&mut t.input.settle));
                self.enqueued.insert(t.meta.id, Enqueued::now(&t.input));
                crate::scheduler::Task {
                    meta: t.meta,
                    payload: Job::New(Box::new(t.input)),
                }
            })
            .collect();
        self.core.put_front(tasks);
        self.pump(ctx);
    }
}

impl Handles<SubmitFront> for SchedulerActor {
    type Reply = Result<u64, Refusal>;
    fn handle(&mut self, SubmitFront(input): SubmitFront, ctx: &mut HostContext<Self>) -> Self::Reply {
        let queued = input.level.is_none();
        let id = self.submit(input, ctx)?;
        if queued {
            // Enqueued at the back (or already running, if nothing ran): moved to the front.
            let task = self.core.take_front(1, |t| t.meta.id == id);
            self.core.put_front(task);
        }
        Ok(id)
    }
}

impl Handles<GetBusy> for SchedulerActor {
    type Reply = actix::MessageResult<crate::host::Envelope<GetBusy>>;
    fn handle(&mut self, _: GetBusy, _: &mut HostContext<Self>) -> Self::Reply {
        let pending_inputs = self.core.count_ready(|t| {
            t.meta.kind == Kind::Input && matches!(&t.payload, Job::New(i) if !i.kernel && i.source != "kernel")
        });
        actix::MessageResult(Busy {
            running_for: self.running.as_ref().map(|r| r.since.elapsed()),
            pending_inputs,
        })
    }
}
