//! Hosting a kernel actor: the actix shell every kernel actor runs inside.
//!
//! A kernel actor is a plain struct implementing [`KernelActor`] and one [`Handles`]
//! impl per message type. The actix actor is [`Host<A>`], which wraps it and adds what
//! actix lacks: every handler call is counted in the actor's [`ActorStats`], timed
//! (busy/stuck), and guarded by `catch_unwind`, so a panic becomes an [`Exit`] reported
//! to the supervisor instead of an actor that silently vanishes.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use actix::dev::{MessageResponse, OneshotSender};
use actix::prelude::*;
use tokio::sync::oneshot;

use crate::panic::{payload_message, take_last_panic, take_recent_panic};
use crate::registry::{ActorState, ActorStats};

/// The actix context a kernel actor's handlers receive.
pub type HostContext<A> = Context<Host<A>>;

/// Why an actor instance ended. Supervisors decide on restarts from this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// The actor stopped itself (`ctx.stop()`) without an error.
    Normal,
    /// Its supervisor (or the daemon) asked it to stop.
    Shutdown,
    /// A handler, hook or spawned future panicked; the message says where.
    Panic(String),
    /// The actor failed on purpose ([`Host::fail`]) or could not be started.
    Error(String),
}

impl Exit {
    /// Normal and requested stops are not failures; everything else is.
    pub fn is_abnormal(&self) -> bool {
        matches!(self, Exit::Panic(_) | Exit::Error(_))
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Normal => f.write_str("normal"),
            Exit::Shutdown => f.write_str("shutdown"),
            Exit::Panic(m) => write!(f, "panic: {m}"),
            Exit::Error(m) => write!(f, "error: {m}"),
        }
    }
}

/// A plain struct that runs as a supervised, tracked actor.
///
/// Keep the logic in plain methods (unit-testable without actix) and let the
/// [`Handles`] impls only translate messages into calls.
pub trait KernelActor: Sized + Unpin + 'static {
    /// What kind of actor this is, shown in the dashboard (`config`, `supervisor`, ...).
    const KIND: &'static str;

    /// Called once the instance runs; may spawn intervals or futures on `ctx`.
    fn started(&mut self, _ctx: &mut HostContext<Self>) {}

    /// Asked to stop by its supervisor. The default stops at once; an actor with
    /// children (a supervisor) stops them first and calls `ctx.stop()` when done.
    fn shutdown(&mut self, ctx: &mut HostContext<Self>) {
        ctx.stop();
    }

    /// Last call on the instance, on every exit path (after a panic too, so resources
    /// can be released; the state may be inconsistent then, so keep it to cleanup).
    fn stopped(&mut self, _ctx: &mut HostContext<Self>) {}
}

/// A kernel actor handles message `M`. `Reply` is what `M::Result` is produced from;
/// plain values, `Result`, `Option` and actix's `ResponseActFuture` all work.
pub trait Handles<M: Message>: KernelActor {
    type Reply: MessageResponse<Host<Self>, Envelope<M>>;
    fn handle(&mut self, msg: M, ctx: &mut HostContext<Self>) -> Self::Reply;
}

/// A message on its way through a tracked mailbox.
pub struct Envelope<M>(pub(crate) M);

impl<M: Message> Message for Envelope<M> {
    type Result = M::Result;
}

/// Stop request from a supervisor (or the daemon at shutdown).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;

/// Makes an actor exit with an error from inside its own handlers (see [`Host::fail`]).
#[derive(Message)]
#[rtype(result = "()")]
struct Fail(String);

/// The actix actor around a [`KernelActor`].
pub struct Host<A: KernelActor> {
    actor: A,
    stats: Arc<ActorStats>,
    /// Set once the exit reason is known; reported when the host is dropped, which
    /// happens on every path, including a panic inside a spawned future.
    exit: Option<Exit>,
    /// Where the exit goes (the supervisor's monitor). `None` for unsupervised hosts.
    exit_tx: Option<oneshot::Sender<Exit>>,
}

impl<A: KernelActor> Host<A> {
    /// Wraps `actor`; its exit will be sent on `exit_tx`.
    pub fn new(actor: A, stats: Arc<ActorStats>, exit_tx: Option<oneshot::Sender<Exit>>) -> Self {
        stats.on_new_instance();
        stats.set_state(ActorState::Starting);
        Self {
            actor,
            stats,
            exit: None,
            exit_tx,
        }
    }

    /// The hosted actor (for futures spawned on the context that map back into it).
    pub fn inner(&mut self) -> &mut A {
        &mut self.actor
    }

    /// The counters of this actor.
    pub fn stats(&self) -> &Arc<ActorStats> {
        &self.stats
    }

    /// Sends `msg` to this actor itself, counted like any other message (timers use
    /// this: `ctx.run_interval(d, |host, ctx| host.notify(ctx, Tick))`).
    pub fn notify<M>(&self, ctx: &mut HostContext<A>, msg: M)
    where
        A: Handles<M>,
        M: Message + 'static,
    {
        self.stats.on_send();
        ctx.notify(Envelope(msg));
    }

    /// Ends the actor with an error exit (its supervisor applies the restart policy).
    pub fn fail(ctx: &mut HostContext<A>, reason: impl Into<String>) {
        ctx.notify(Fail(reason.into()));
    }

    fn guarded<R>(&mut self, ctx: &mut HostContext<A>, f: impl FnOnce(&mut A, &mut HostContext<A>) -> R) -> Option<R> {
        match catch_unwind(AssertUnwindSafe(|| f(&mut self.actor, ctx))) {
            Ok(r) => Some(r),
            Err(payload) => {
                // The hook saw the panic first and has the location; prefer its text.
                let msg = take_last_panic().unwrap_or_else(|| payload_message(&*payload));
                tracing::error!(actor = %self.stats.id, "actor panicked: {msg}");
                self.exit.get_or_insert(Exit::Panic(msg));
                ctx.stop();
                None
            }
        }
    }
}

impl<A: KernelActor> Actor for Host<A> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // actix bounds mailboxes at 16 by default (only `send`/`try_send` respect it);
        // back-pressure; kernel mailboxes are unbounded by design (`do_send`), and
        // their depth is what the dashboard shows.
        ctx.set_mailbox_capacity(0); // 0 = unbounded
        self.stats.set_state(ActorState::Running);
        self.guarded(ctx, |a, ctx| a.started(ctx));
    }

    fn stopped(&mut self, ctx: &mut Self::Context) {
        if self.exit.is_none() {
            // Nobody asked it to stop and no handler panicked. Either the actor called
            // `ctx.stop()`, or a future it spawned panicked: tokio caught that panic and
            // is dropping the context, which runs this hook. The hook saw the panic
            // a moment ago on this very thread.
            let exit = match take_recent_panic(std::time::Duration::from_millis(250)) {
                Some(msg) => {
                    tracing::error!(actor = %self.stats.id, "actor panicked in a spawned future: {msg}");
                    Exit::Panic(msg)
                }
                None => Exit::Normal,
            };
            self.exit = Some(exit);
        }
        self.guarded(ctx, |a, ctx| a.stopped(ctx));
    }
}

impl<A: KernelActor> Drop for Host<A> {
    fn drop(&mut self) {
        let exit = self.exit.take().unwrap_or_else(|| {
            // Dropped without `stopped`: tokio caught a panic in a future of ours.
            Exit::Panic(take_last_panic().unwrap_or_else(|| "actor task was dropped".into()))
        });
        self.stats.record_exit(&exit.to_string());
        self.stats.set_state(if exit.is_abnormal() {
            ActorState::Failed
        } else {
            ActorState::Stopped
        });
        if let Some(tx) = self.exit_tx.take() {
            let _ = tx.send(exit);
        }
    }
}

impl<A: KernelActor> Handler<Shutdown> for Host<A> {
    type Result = ();
    fn handle(&mut self, _: Shutdown, ctx: &mut Self::Context) {
        self.exit.get_or_insert(Exit::Shutdown);
        self.guarded(ctx, |a, ctx| a.shutdown(ctx));
    }
}

impl<A: KernelActor> Handler<Fail> for Host<A> {
    type Result = ();
    fn handle(&mut self, msg: Fail, ctx: &mut Self::Context) {
        tracing::warn!(actor = %self.stats.id, "actor failed: {}", msg.0);
        self.exit.get_or_insert(Exit::Error(msg.0));
        ctx.stop();
    }
}

/// A handler's reply, or nothing when it panicked (the caller then sees the
/// mailbox closed and reads the panic from the actor's `last_exit`).
pub enum Guarded<R> {
    Replied(R),
    Panicked,
}

impl<A, M, R> MessageResponse<Host<A>, Envelope<M>> for Guarded<R>
where
    A: KernelActor,
    M: Message,
    R: MessageResponse<Host<A>, Envelope<M>>,
{
    fn handle(self, ctx: &mut HostContext<A>, tx: Option<OneshotSender<M::Result>>) {
        match self {
            Guarded::Replied(r) => r.handle(ctx, tx),
            Guarded::Panicked => drop(tx),
        }
    }
}

impl<A, M> Handler<Envelope<M>> for Host<A>
where
    A: Handles<M>,
    M: Message,
{
    type Result = Guarded<A::Reply>;

    fn handle(&mut self, Envelope(msg): Envelope<M>, ctx: &mut Self::Context) -> Self::Result {
        self.stats.on_handle_start();
        let reply = self.guarded(ctx, |a, ctx| a.handle(msg, ctx));
        self.stats.on_handle_end();
        match reply {
            Some(r) => Guarded::Replied(r),
            None => Guarded::Panicked,
        }
    }
}
