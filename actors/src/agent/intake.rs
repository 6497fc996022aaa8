//! The two intake actors in front of the scheduler.
//!
//! * `kernel/agent/event-loop` takes queued input from channels and the kernel's own
//!   self-input (consolidation tasks on the `_consolidation_` channel). It owns the
//!   [`DuplicateGuard`] (an identical input is refused before it is stored, so a 409
//!   never follows a 202) and the **backlog**: stored inputs waiting for room in the
//!   scheduler's ready queue (256), fed in as tasks finish. A durable input is never
//!   refused for a full queue: it waits on disk (the spec's backpressure, §1.12, with
//!   the inbox as the IO channel).
//! * `kernel/agent/intercept-loop` takes interrupts: it decides their level (parsed
//!   from `priority`, clamped to L3 for sources that are not built in, L4 for the
//!   kernel itself) and handles stop requests.
//!
//! **Durable** inputs (asynchronous, from a channel: nobody waits on a reply) are
//! committed to the inbox before the intake answers, so a 202 means "on disk". They
//! leave the inbox when their task ends; at boot [`ReplayInbox`] runs what is left.
//! Synchronous inputs are not stored: their caller holds the connection, sees it break
//! if the daemon dies, and resends. Kernel input (self-input, kernel interrupts) is not
//! stored either: it describes the state of the process that died, which the next one
//! derives afresh.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use parking_lot::Mutex;
use serde_json::Value;

use super::backlog::{Answer, Backlog, Then};
use super::dedupe::{DuplicateGuard, Ticket, Verdict};
use super::door::{self, Admitted};
use super::inbox::{Accept, Dead, Ended, InboxActor, InboxId, Started, TakePending};
use super::input::{CONSOLIDATION_CHANNEL, Input, InputRecord, Lifecycle, Outcome, Refusal, Settle};
use super::scheduler::{SchedulerActor, Stop, Submit};
use crate::addr::TAddr;
use crate::host::{Handles, Host, HostContext, KernelActor};
use crate::scheduler::{interrupt_level, source_root};

/// Sources compiled into the daemon: they may raise L4 interrupts.
pub const BUILTIN_SOURCES: &[&str] = &["webui", "http", "cli"];

/// How long the backlog waits before offering its head again to a full ready queue.
const BACKLOG_RETRY: Duration = Duration::from_millis(50);

/// Whether `source` is privileged (a built-in channel plugin).
pub fn is_builtin_source(source: &str) -> bool {
    BUILTIN_SOURCES.contains(&source_root(source))
}

/// `/approve N` or `/deny N` (the whole input): the question's id and the answer.
pub fn parse_approval_command(text: &str) -> Option<(u64, bool)> {
    let mut words = text.split_whitespace();
    let allow = match words.next()? {
        "/approve" => true,
        "/deny" => false,
        _ => return None,
    };
    let id = words.next()?.trim_start_matches('#').parse().ok()?;
    words.next().is_none().then_some((id, allow))
}

/// Whether an input is kept in the inbox until it ran (see the module docs).
fn is_durable(input: &Input) -> bool {
    !input.kernel && !input.reply.is_waiting()
}

/// What becomes of a stored input's inbox row once its task ended.
#[derive(Debug, PartialEq, Eq)]
enum Afterwards {
    /// On the dead-letter list, with why: kept for the owner to retry or discard.
    Dead(String),
    /// Done (answered, or stopped by the owner): the row goes.
    Done,
    /// Not run to its end (the scheduler stopped): the row stays and runs after the
    /// next start.
    Kept,
}

/// The inbox's side of an input's `outcome` (`error`: the task's, if it failed).
fn afterwards(outcome: Outcome, error: Option<String>) -> Afterwards {
    match outcome {
        Outcome::Failed => Afterwards::Dead(error.unwrap_or_else(|| "its task failed; see the daemon log".into())),
        Outcome::Dropped => Afterwards::Dead("dropped unrun: the interrupt queues overflowed".into()),
        o if o.is_final() => Afterwards::Done,
        _ => Afterwards::Kept,
    }
}

/// The backlog's reading of the scheduler's answer to a fed input: a full queue (or a
/// scheduler restarting) means "later", never "refused" — the input waits on disk.
fn answer_of(res: &Result<Result<u64, Refusal>, crate::addr::SendError>) -> Answer {
    match res {
        Ok(Ok(_)) => Answer::Taken,
        Ok(Err(Refusal::QueueFull)) | Err(_) => Answer::Later,
        Ok(Err(_)) => Answer::Refused,
    }
}

/// The guard shared by the event loop and the hooks it puts on its inputs.
type Guard = Arc<Mutex<DuplicateGuard>>;

/// The hook that tells the guard and the inbox what became of an input.
fn settle_hook(guard: Option<(Guard, Ticket)>, stored: Option<(TAddr<InboxActor>, InboxId)>) -> Settle {
    if guard.is_none() && stored.is_none() {
        return Settle::none();
    }
    let mut error = None;
    Settle::new(move |step| match step {
        Lifecycle::Started => {
            if let Some((inbox, id)) = &stored {
                let _ = inbox.do_send(Started(*id));
            }
        }
        Lifecycle::Error(e) => error = Some(e),
        Lifecycle::Ended(outcome) => {
            if let Some((g, ticket)) = &guard {
                g.lock().finished(ticket, outcome == Outcome::Succeeded);
            }
            if let Some((inbox, id)) = &stored {
                match afterwards(outcome, error.take()) {
                    Afterwards::Dead(why) => {
                        tracing::warn!(input = %id, "a stored input failed; it waits on the dead-letter list (GET /api/v1/inbox/dead): {why}");
                        let _ = inbox.do_send(Dead(*id, why));
                    }
                    Afterwards::Done => {
                        let _ = inbox.do_send(Ended(*id));
                    }
                    Afterwards::Kept => {
                        tracing::info!(input = %id, ?outcome, "stored input not finished; it runs after the next start");
                    }
                }
            }
        }
    })
}

/// What the intake did with an accepted input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Accepted {
    /// The scheduler's task id; `None` while the input waits in the backlog (the ready
    /// queue is full) — it gets one when it is fed in.
    pub task_id: Option<u64>,
    /// The inbox row, for a durable input.
    pub input_id: Option<InboxId>,
}

/// A stored input waiting for room in the ready queue.
struct Waiting {
    id: InboxId,
    record: InputRecord,
    ticket: Option<Ticket>,
    /// Stored by an earlier run (replayed at boot): masked again when fed, for a row
    /// stored before inputs were masked at the door. One of this run passed the door.
    replayed: bool,
}

/// Intake of queued input and kernel self-input.
pub struct EventLoop {
    scheduler: TAddr<SchedulerActor>,
    /// `None`: nothing is stored (actor tests, or a daemon without a data dir).
    inbox: Option<TAddr<InboxActor>>,
    /// Masks secrets in the text before anything stores or forwards it.
    firewall: Option<Arc<crate::firewall::Firewall>>,
    guard: Guard,
    /// Stored inputs waiting for room in the ready queue ([`Backlog`]: the rules).
    backlog: Backlog<Waiting>,
    /// Channels assigned to residents: their input goes to that resident's scheduler.
    routes: Option<super::routes::ChannelRoutes>,
    /// Where the plugins' input channel definitions are (none: no input is cleaned).
    channels: Option<super::channels::Channels>,
}

impl EventLoop {
    pub fn new(scheduler: TAddr<SchedulerActor>) -> Self {
        Self {
            scheduler,
            inbox: None,
            firewall: None,
            guard: Arc::default(),
            backlog: Backlog::default(),
            routes: None,
            channels: None,
        }
    }

    /// Applies the plugins' input channel definitions at admission
    /// ([`super::inputdef`]): what memory keeps of an input is decided at the door.
    pub fn with_channels(mut self, channels: super::channels::Channels) -> Self {
        self.channels = Some(channels);
        self
    }

    /// Routes the input of channels assigned to residents to them (spec §6.2).
    pub fn with_routes(mut self, routes: super::routes::ChannelRoutes) -> Self {
        self.routes = Some(routes);
        self
    }

    /// The scheduler that runs input of `channel`: its resident's, else the agent's own.
    fn target(&self, channel: &str) -> TAddr<SchedulerActor> {
        self.routes
            .as_ref()
            .and_then(|r| r.scheduler_for(channel))
            .unwrap_or_else(|| self.scheduler.clone())
    }

    /// Stores asynchronous channel input in `inbox` before acknowledging it.
    pub fn with_inbox(mut self, inbox: TAddr<InboxActor>) -> Self {
        self.inbox = Some(inbox);
        self
    }

    /// Masks the credential gate's secrets in every input before it is stored.
    pub fn with_firewall(mut self, firewall: Arc<crate::firewall::Firewall>) -> Self {
        self.firewall = Some(firewall);
        self
    }

    /// The owner's `/approve N` or `/deny N` from any channel (a chat bridge, the
    /// WebUI's chat): answered here, never a turn. Only the owner's inputs — a guest
    /// of the same chat cannot answer the owner's question (its words run as a turn,
    /// and the model cannot answer questions at all).
    fn answer_approval(&self, input: &mut Input) -> Option<Result<Accepted, Refusal>> {
        if input.kernel || !input.principal.is_owner() {
            return None;
        }
        let (id, allow) = parse_approval_command(&input.text)?;
        let firewall = self.firewall.as_ref()?;
        let text = match firewall.approvals.answer(id, allow) {
            Ok(q) => {
                tracing::info!(id, tool = %q.tool, allowed = allow, source = %input.source, "the owner answered an approval");
                crate::i18n::Msg::ApprovalAnswered {
                    id,
                    tool: &q.tool,
                    allowed: allow,
                }
                .text()
            }
            Err(e) => e.to_string(),
        };
        input.reply.send(super::input::Reply {
            content: text,
            ..Default::default()
        });
        Some(Ok(Accepted {
            task_id: None,
            input_id: None,
        }))
    }

    /// A queued input through the door ([`door::admit`], with its channel's
    /// definition), then the duplicate guard's verdict (a refusal already answered).
    fn admit(&self, input: Input) -> Result<(Admitted, Ticket), Refusal> {
        let def = self.channels.as_ref().and_then(|c| c.input_for(&input.source));
        let mut input = door::admit(input, self.firewall.as_deref(), def.as_ref())?;
        // The same words with other images are another input.
        let key = input.payload.dedupe_key(&input.text);
        match self.guard.lock().seen(&input.source, &key, Instant::now()) {
            Verdict::Admit(t) => Ok((input, t)),
            Verdict::Duplicate => {
                tracing::info!(source = %input.source, request = %input.request_id, "duplicate input dropped");
                input.reply.skip(Refusal::Duplicate);
                Err(Refusal::Duplicate)
            }
        }
    }

    /// Submits a non-durable input; the guard forgets it if the scheduler refuses.
    fn submit_direct(
        &self,
        mut input: Admitted,
        ticket: Option<Ticket>,
    ) -> ResponseActFuture<Host<Self>, Result<Accepted, Refusal>> {
        let guard = self.guard.clone();
        input.settle = settle_hook(ticket.clone().map(|t| (guard.clone(), t)), None);
        let s = self.target(&input.channel);
        let fut = async move {
            let r = match s.send(Submit(input)).await {
                Ok(r) => r,
                Err(e) => Err(Refusal::from(e)),
            };
            if r.is_err()
                && let Some(t) = &ticket
            {
                guard.lock().finished(t, false);
            }
            r.map(|task| Accepted {
                task_id: Some(task),
                input_id: None,
            })
        };
        Box::pin(actix::fut::wrap_future(fut))
    }

    /// A durable input was stored as `id`: submit it, or queue it behind the backlog.
    fn enqueue_stored(
        &mut self,
        id: InboxId,
        input: Admitted,
        ticket: Ticket,
        ctx: &mut HostContext<Self>,
    ) -> ResponseActFuture<Host<Self>, Result<Accepted, Refusal>> {
        let Some(inbox) = self.inbox.clone() else {
            unreachable!("only stored with an inbox")
        };
        let record = input.record();
        if self.backlog.must_wait() {
            // Behind others that wait: keep the arrival order.
            self.backlog.push(Waiting {
                id,
                record,
                ticket: Some(ticket),
                replayed: false,
            });
            self.feed(ctx);
            return Box::pin(actix::fut::ready(Ok(Accepted {
                task_id: None,
                input_id: Some(id),
            })));
        }
        let mut input = input;
        input.settle = settle_hook(Some((self.guard.clone(), ticket.clone())), Some((inbox.clone(), id)));
        let s = self.target(&input.channel);
        let fut = async move { s.send(Submit(input)).await };
        Box::pin(
            actix::fut::wrap_future::<_, Host<Self>>(fut).map(move |res, host, ctx| {
                let me = host.inner();
                match res {
                    Ok(Ok(task)) => Ok(Accepted {
                        task_id: Some(task),
                        input_id: Some(id),
                    }),
                    // Full, or the scheduler is restarting: the input waits on disk.
                    Ok(Err(Refusal::QueueFull)) | Err(_) => {
                        tracing::debug!(input = %id, "ready queue full: the input waits in the backlog");
                        me.backlog.push(Waiting {
                            id,
                            record,
                            ticket: Some(ticket),
                            replayed: false,
                        });
                        me.feed(ctx);
                        Ok(Accepted {
                            task_id: None,
                            input_id: Some(id),
                        })
                    }
                    Ok(Err(r)) => {
                        me.guard.lock().finished(&ticket, false);
                        let _ = inbox.do_send(Ended(id));
                        Err(r)
                    }
                }
            }),
        )
    }

    /// Offers the backlog's head to the scheduler, one at a time, until it is empty
    /// (or the queue is full: then again after [`BACKLOG_RETRY`]).
    fn feed(&mut self, ctx: &mut HostContext<Self>) {
        let Some(inbox) = self.inbox.clone() else {
            return;
        };
        let Some(w) = self.backlog.head_to_send() else {
            return;
        };
        let (id, input, ticket, replayed) = (w.id, w.record.to_input(), w.ticket.clone(), w.replayed);
        let gate = if replayed { self.firewall.as_deref() } else { None };
        let mut input = Admitted::stored(input, gate);
        input.settle = settle_hook(ticket.map(|t| (self.guard.clone(), t)), Some((inbox, id)));
        let s = self.target(&input.channel);
        let fut = async move { s.send(Submit(input)).await };
        ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(fut).map(|res, host, ctx| {
            let me = host.inner();
            match me.backlog.answered(answer_of(&res)) {
                Then::Next(w) => {
                    let task = res.ok().and_then(Result::ok).unwrap_or_default();
                    tracing::debug!(input = %w.id, task, waiting = me.backlog.len(), "backlog: input fed to the scheduler");
                    me.feed(ctx);
                }
                Then::Pause => {
                    ctx.run_later(BACKLOG_RETRY, |host, ctx| {
                        let me = host.inner();
                        me.backlog.retry();
                        me.feed(ctx);
                    });
                }
                Then::Drop(w) => {
                    let why = match res {
                        Ok(Err(r)) => r.to_string(),
                        _ => String::new(),
                    };
                    tracing::warn!(input = %w.id, "stored input refused by the scheduler, dropped: {why}");
                    if let Some(t) = &w.ticket {
                        me.guard.lock().finished(t, false);
                    }
                    if let Some(inbox) = &me.inbox {
                        let _ = inbox.do_send(Ended(w.id));
                    }
                    me.feed(ctx);
                }
            }
        }));
    }
}

impl KernelActor for EventLoop {
    const KIND: &'static str = "event-loop";
}

/// How many stored inputs wait in the intake for room in the ready queue (the part of
/// the agent's backlog the scheduler does not hold yet).
#[derive(Message)]
#[rtype(result = "usize")]
pub struct GetStoredWaiting;

impl Handles<GetStoredWaiting> for EventLoop {
    type Reply = usize;
    fn handle(&mut self, _: GetStoredWaiting, _: &mut HostContext<Self>) -> usize {
        self.backlog.len()
    }
}

/// Queued input from a channel. Replies with what became of it.
#[derive(Message)]
#[rtype(result = "Result<Accepted, Refusal>")]
pub struct Inject(pub Input);

/// Kernel self-input (memory merges, distillation follow-ups): runs on the
/// `_consolidation_` channel, never preempted.
#[derive(Message)]
#[rtype(result = "Result<u64, Refusal>")]
pub struct SelfInput(pub String);

/// At boot, after the agent is up: queues every input the inbox still holds (the
/// previous run died before they finished). Replies with how many.
#[derive(Message)]
#[rtype(result = "Result<usize, Refusal>")]
pub struct ReplayInbox;

/// Stored inputs waiting for room in the ready queue.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct BacklogLen;

/// Stop was pressed: the inputs waiting in the backlog are cancelled like those
/// waiting in the ready queue (they were waiting at that moment too). Replies with
/// how many.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct CancelBacklog;

impl Handles<Inject> for EventLoop {
    type Reply = ResponseActFuture<Host<Self>, Result<Accepted, Refusal>>;
    fn handle(&mut self, Inject(mut input): Inject, _: &mut HostContext<Self>) -> Self::Reply {
        input.level = None;
        if let Some(answered) = self.answer_approval(&mut input) {
            return Box::pin(actix::fut::ready(answered));
        }
        let (mut input, ticket) = match self.admit(input) {
            Ok(t) => t,
            Err(r) => return Box::pin(actix::fut::ready(Err(r))),
        };
        let Some(inbox) = self.inbox.clone().filter(|_| is_durable(&input)) else {
            return self.submit_direct(input, Some(ticket));
        };
        let record = input.record();
        let fut = async move { inbox.send(Accept(record)).await };
        Box::pin(
            actix::fut::wrap_future::<_, Host<Self>>(fut).then(move |res, host, ctx| {
                let me = host.inner();
                let stored = match res {
                    Ok(Ok(id)) => Ok(id),
                    Ok(Err(e)) => Err(Refusal::NotStored(e.to_string())),
                    Err(e) => Err(Refusal::NotStored(e.to_string())),
                };
                match stored {
                    Ok(id) => me.enqueue_stored(id, input, ticket, ctx),
                    Err(r) => {
                        tracing::error!(source = %input.source, "input refused: {r}");
                        me.guard.lock().finished(&ticket, false);
                        input.reply.skip(r.clone());
                        Box::pin(actix::fut::ready(Err(r)))
                    }
                }
            }),
        )
    }
}

impl Handles<SelfInput> for EventLoop {
    type Reply = ResponseActFuture<Host<Self>, Result<u64, Refusal>>;
    fn handle(&mut self, SelfInput(text): SelfInput, _: &mut HostContext<Self>) -> Self::Reply {
        let mut input = Input::text("kernel", &text);
        input.channel = CONSOLIDATION_CHANNEL.into();
        input.kernel = true;
        input.no_memory = true;
        let (input, ticket) = match self.admit(input) {
            Ok(t) => t,
            Err(r) => return Box::pin(actix::fut::ready(Err(r))),
        };
        Box::pin(
            self.submit_direct(input, Some(ticket))
                .map(|r, _, _| r.map(|a| a.task_id.unwrap_or_default())),
        )
    }
}

impl Handles<ReplayInbox> for EventLoop {
    type Reply = ResponseActFuture<Host<Self>, Result<usize, Refusal>>;
    fn handle(&mut self, _: ReplayInbox, _: &mut HostContext<Self>) -> Self::Reply {
        let Some(inbox) = self.inbox.clone() else {
            return Box::pin(actix::fut::ready(Ok(0)));
        };
        let fut = async move { inbox.send(TakePending).await };
        Box::pin(actix::fut::wrap_future::<_, Host<Self>>(fut).map(|res, host, ctx| {
            let pending = match res {
                Ok(Ok(p)) => p,
                Ok(Err(e)) => return Err(Refusal::NotStored(e.to_string())),
                Err(e) => return Err(Refusal::from(e)),
            };
            let me = host.inner();
            let n = pending.len();
            let now = Instant::now();
            for p in pending {
                // Queued input is guarded again (a resend of it waits for it);
                // interrupts never are.
                let ticket = p
                    .record
                    .level
                    .is_none()
                    .then(|| me.guard.lock().track(&p.record.source, &p.record.text, now));
                me.backlog.push(Waiting {
                    id: p.id,
                    record: p.record,
                    ticket,
                    replayed: true,
                });
            }
            if n > 0 {
                tracing::info!(
                    inputs = n,
                    "replaying the inputs the previous run accepted but did not finish"
                );
            }
            me.feed(ctx);
            Ok(n)
        }))
    }
}

/// Why the dead-letter list could not be read or settled.
#[derive(Debug, thiserror::Error)]
pub enum DeadLetterError {
    /// The inbox's database failed.
    #[error(transparent)]
    Inbox(#[from] super::inbox::InboxError),
    /// The inbox actor did not answer (restarting, or the daemon is stopping).
    #[error(transparent)]
    Unavailable(#[from] crate::addr::SendError),
    /// The retried input was refused on its way in again (a duplicate, over the cap).
    #[error(transparent)]
    Refused(#[from] Refusal),
}

/// The inbox's dead-letter list, newest first (at most the count).
#[derive(Message)]
#[rtype(result = "Result<Vec<super::inbox::DeadInput>, DeadLetterError>")]
pub struct ListDeadInputs(pub usize);

/// The owner's decision on a dead input: run it again (`retry`) or drop it for good.
/// Answers whether it was on the list (`Ok(None)`: no such dead input) and, for a
/// retry, how the intake took it.
#[derive(Message)]
#[rtype(result = "Result<Option<Accepted>, DeadLetterError>")]
pub struct SettleDead {
    pub id: InboxId,
    pub retry: bool,
}

impl Handles<ListDeadInputs> for EventLoop {
    type Reply = ResponseFuture<Result<Vec<super::inbox::DeadInput>, DeadLetterError>>;
    fn handle(&mut self, ListDeadInputs(n): ListDeadInputs, _: &mut HostContext<Self>) -> Self::Reply {
        let inbox = self.inbox.clone();
        Box::pin(async move {
            let Some(inbox) = inbox else { return Ok(Vec::new()) };
            Ok(inbox.send(super::inbox::ListDead(n)).await??)
        })
    }
}

impl Handles<SettleDead> for EventLoop {
    type Reply = ResponseActFuture<Host<Self>, Result<Option<Accepted>, DeadLetterError>>;
    fn handle(&mut self, m: SettleDead, _: &mut HostContext<Self>) -> Self::Reply {
        let Some(inbox) = self.inbox.clone() else {
            return Box::pin(actix::fut::ready(Ok(None)));
        };
        let fut = async move { inbox.send(super::inbox::Revive(m.id)).await };
        Box::pin(
            actix::fut::wrap_future::<_, Host<Self>>(fut).then(move |res, host, ctx| {
                let record = match res {
                    Ok(Ok(r)) => r,
                    Ok(Err(e)) => return Box::pin(actix::fut::ready(Err(e.into()))) as Self::Reply,
                    Err(e) => return Box::pin(actix::fut::ready(Err(e.into()))),
                };
                match record {
                    None => Box::pin(actix::fut::ready(Ok(None))),
                    Some(r) if !m.retry => {
                        tracing::info!(input = %m.id, source = %r.source, "the owner discarded a dead input");
                        Box::pin(actix::fut::ready(Ok(Some(Accepted {
                            task_id: None,
                            input_id: None,
                        }))))
                    }
                    Some(r) => {
                        tracing::info!(input = %m.id, source = %r.source, "the owner retries a dead input");
                        // A new acknowledged input: stored again (under a new row) before
                        // it runs, so a crash now loses nothing either.
                        let input = r.to_input();
                        Box::pin(
                            <Self as Handles<Inject>>::handle(host.inner(), Inject(input), ctx)
                                .map(|r, _, _| r.map(Some).map_err(DeadLetterError::from)),
                        )
                    }
                }
            }),
        )
    }
}

impl Handles<BacklogLen> for EventLoop {
    type Reply = usize;
    fn handle(&mut self, _: BacklogLen, _: &mut HostContext<Self>) -> usize {
        self.backlog.len()
    }
}

impl Handles<CancelBacklog> for EventLoop {
    type Reply = usize;
    fn handle(&mut self, _: CancelBacklog, _: &mut HostContext<Self>) -> usize {
        // The head may be on its way to the scheduler right now; it is left to run
        // (or to be cancelled there, had it arrived before the stop).
        let cancelled = self.backlog.cancel();
        for w in &cancelled {
            if let Some(t) = &w.ticket {
                self.guard.lock().finished(t, false);
            }
            if let Some(inbox) = &self.inbox {
                let _ = inbox.do_send(Ended(w.id));
            }
        }
        if !cancelled.is_empty() {
            tracing::info!(
                inputs = cancelled.len(),
                "stop: cancelled the inputs waiting in the backlog"
            );
        }
        cancelled.len()
    }
}

/// Intake of interrupts and stop requests.
pub struct InterceptLoop {
    scheduler: TAddr<SchedulerActor>,
    inbox: Option<TAddr<InboxActor>>,
    firewall: Option<Arc<crate::firewall::Firewall>>,
    /// Whose backlog a stop cancels too.
    event_loop: Option<TAddr<EventLoop>>,
}

impl InterceptLoop {
    pub fn new(scheduler: TAddr<SchedulerActor>) -> Self {
        Self {
            scheduler,
            inbox: None,
            firewall: None,
            event_loop: None,
        }
    }

    /// A stop also cancels the inputs waiting in `event_loop`'s backlog.
    pub fn with_event_loop(mut self, event_loop: TAddr<EventLoop>) -> Self {
        self.event_loop = Some(event_loop);
        self
    }

    /// Stores asynchronous channel interrupts in `inbox` before acknowledging them.
    pub fn with_inbox(mut self, inbox: TAddr<InboxActor>) -> Self {
        self.inbox = Some(inbox);
        self
    }

    /// Masks the credential gate's secrets in every interrupt before it is stored.
    pub fn with_firewall(mut self, firewall: Arc<crate::firewall::Firewall>) -> Self {
        self.firewall = Some(firewall);
        self
    }
}

impl KernelActor for InterceptLoop {
    const KIND: &'static str = "intercept-loop";
}

/// An interrupt from a channel: `priority` as sent (`"L1"`..`"L4"`), `stop` to cancel
/// the current inference (with `text` as an optional remark for the model).
#[derive(Message)]
#[rtype(result = "Result<Option<u64>, Refusal>")]
pub struct InjectInterrupt {
    pub input: Input,
    pub priority: Option<Value>,
    pub stop: bool,
    /// With `stop`: cancel the waiting inputs too (the queue and the stored backlog).
    pub clear_queue: bool,
}

/// An interrupt raised by the kernel itself: always L4.
#[derive(Message)]
#[rtype(result = "Result<u64, Refusal>")]
pub struct KernelInterrupt(pub String);

impl Handles<InjectInterrupt> for InterceptLoop {
    type Reply = ResponseFuture<Result<Option<u64>, Refusal>>;
    fn handle(&mut self, msg: InjectInterrupt, _: &mut HostContext<Self>) -> Self::Reply {
        let InjectInterrupt {
            input,
            priority,
            stop,
            clear_queue,
        } = msg;
        let s = self.scheduler.clone();
        // A stop's remark is about the task it stopped: not worth running after a restart.
        let inbox = self.inbox.clone().filter(|_| !stop && is_durable(&input));
        let event_loop = self.event_loop.clone();
        // Through the door, but for a stop without a remark: that is no input at all.
        let input = if stop && input.text.trim().is_empty() {
            None
        } else {
            match door::admit(input, self.firewall.as_deref(), None) {
                Ok(a) => Some(a),
                Err(r) => return Box::pin(async move { Err(r) }),
            }
        };
        Box::pin(async move {
            if stop {
                s.send(Stop { clear_queue }).await?;
                if clear_queue && let Some(el) = &event_loop {
                    let _ = el.send(CancelBacklog).await;
                }
            }
            let Some(mut input) = input else {
                return Ok(None);
            };
            let level = interrupt_level(priority.as_ref(), is_builtin_source(&input.source));
            input.level = Some(level);
            input.payload.interrupt = true;
            input.payload.interrupt_source = Some(input.source.clone());
            input.payload.interrupt_channel = Some(input.channel.clone());
            let stored = match &inbox {
                Some(inbox) => {
                    let id = match inbox.send(Accept(input.record())).await {
                        Ok(Ok(id)) => id,
                        Ok(Err(e)) => return Err(Refusal::NotStored(e.to_string())),
                        Err(e) => return Err(Refusal::NotStored(e.to_string())),
                    };
                    input.settle = settle_hook(None, Some((inbox.clone(), id)));
                    Some((inbox.clone(), id))
                }
                None => None,
            };
            let r = match s.send(Submit(input)).await {
                Ok(r) => r,
                Err(e) => Err(Refusal::from(e)),
            };
            if r.is_err()
                && let Some((inbox, id)) = stored
            {
                let _ = inbox.do_send(Ended(id));
            }
            r.map(Some)
        })
    }
}

impl Handles<KernelInterrupt> for InterceptLoop {
    type Reply = ResponseFuture<Result<u64, Refusal>>;
    fn handle(&mut self, KernelInterrupt(text): KernelInterrupt, _: &mut HostContext<Self>) -> Self::Reply {
        let input = Input::kernel_interrupt("kernel", &text);
        let s = self.scheduler.clone();
        Box::pin(async move { s.send(Submit(Admitted::own(input)?)).await? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_commands_are_whole_inputs() {
        assert_eq!(parse_approval_command("/approve 3"), Some((3, true)));
        assert_eq!(parse_approval_command("  /deny #12 "), Some((12, false)));
        assert_eq!(parse_approval_command("/approve"), None);
        assert_eq!(parse_approval_command("/approve 3 and also rm -rf"), None);
        assert_eq!(parse_approval_command("please /approve 3"), None);
        assert_eq!(parse_approval_command("/approve three"), None);
    }

    #[test]
    fn a_stored_input_is_kept_until_it_ran_and_a_failed_one_waits_for_the_owner() {
        assert_eq!(
            afterwards(Outcome::Failed, Some("every source failed".into())),
            Afterwards::Dead("every source failed".into())
        );
        assert_eq!(
            afterwards(Outcome::Failed, None),
            Afterwards::Dead("its task failed; see the daemon log".into())
        );
        assert!(matches!(afterwards(Outcome::Dropped, None), Afterwards::Dead(why) if why.contains("overflowed")));
        assert_eq!(afterwards(Outcome::Succeeded, None), Afterwards::Done);
        assert_eq!(
            afterwards(Outcome::Cancelled, None),
            Afterwards::Done,
            "the owner stopped it"
        );
        assert_eq!(
            afterwards(Outcome::Abandoned, Some("scheduler stopped".into())),
            Afterwards::Kept,
            "never ran: it runs after the next start"
        );
    }

    #[test]
    fn a_full_queue_or_a_restarting_scheduler_makes_the_backlog_wait_not_drop() {
        assert_eq!(answer_of(&Ok(Ok(7))), Answer::Taken);
        assert_eq!(answer_of(&Ok(Err(Refusal::QueueFull))), Answer::Later);
        let restarting = crate::addr::SendError::Unavailable {
            id: "kernel/agent/scheduler".into(),
            state: "backoff",
        };
        assert_eq!(answer_of(&Err(restarting)), Answer::Later);
        assert_eq!(answer_of(&Ok(Err(Refusal::ResidualDropped))), Answer::Refused);
    }

    #[test]
    fn builtin_sources_are_privileged() {
        assert!(is_builtin_source("webui/tab-1"));
        assert!(is_builtin_source("http"));
        assert!(!is_builtin_source("qq"));
        assert!(!is_builtin_source("/webui"));
    }

    #[test]
    fn only_asynchronous_channel_input_is_durable() {
        let mut i = Input::text("http", "hi");
        assert!(is_durable(&i));
        let (reply, _rx) = super::super::input::ReplyTo::channel("req");
        i.reply = reply;
        assert!(!is_durable(&i), "a caller waits: it resends if the daemon dies");
        let mut k = Input::text("kernel", "merge");
        k.kernel = true;
        assert!(!is_durable(&k));
    }
}
