//! The messages between the scheduler and its task actors, and the port through which
//! a task talks to its scheduler.
//!
//! Both sides import this module; the scheduler knows the task actor (it starts it),
//! the task knows only [`SchedulerLink`]. That keeps the dependency one-way
//! (`scheduler → task → protocol`) instead of the old `scheduler ↔ task` cycle.

use std::sync::Arc;

use actix::prelude::*;
use futures_util::future::BoxFuture;

use super::door::Admitted;
use crate::addr::SendError;

/// A new input (queued, or an interrupt when `level` is set). Replies with its task
/// id, or why it was not queued.
#[derive(Message)]
#[rtype(result = "Result<u64, super::input::Refusal>")]
pub struct Submit(pub Admitted);

/// From the running task, between two steps: must it yield now?
#[derive(Message)]
#[rtype(result = "bool")]
pub struct SafePoint {
    pub task: u64,
    pub consolidation: bool,
}

/// From a task whose LLM call was cancelled: was that a stop (end the task)?
#[derive(Message)]
#[rtype(result = "bool")]
pub struct TakeStop(pub u64);

/// From a task after its prepare phase: was it waiting when stop was pressed?
#[derive(Message)]
#[rtype(result = "bool")]
pub struct ConsumeCancel(pub u64);

/// From a task: it reached a terminal state.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Finished {
    pub task: u64,
    pub state: crate::bus::TaskState,
    /// Why it failed (the error its reply carried).
    pub error: Option<String>,
}

/// To a task: cancel the in-flight LLM call, if any (preemption or stop).
#[derive(Message)]
#[rtype(result = "()")]
pub struct CancelLlm;

/// To a parked task: continue after a suspension.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Resume;

/// What a task asks of its scheduler. Implemented by the scheduler's tracked address
/// (in `scheduler.rs`); a test may implement it with a script.
pub trait SchedulerPort: Send + Sync + 'static {
    fn safe_point(&self, msg: SafePoint) -> BoxFuture<'static, Result<bool, SendError>>;
    fn take_stop(&self, task: u64) -> BoxFuture<'static, Result<bool, SendError>>;
    fn consume_cancel(&self, task: u64) -> BoxFuture<'static, Result<bool, SendError>>;
    fn finished(&self, msg: Finished) -> Result<(), SendError>;
    fn submit(&self, input: Admitted) -> Result<(), SendError>;
}

/// A task's handle on its scheduler.
#[derive(Clone)]
pub struct SchedulerLink(Arc<dyn SchedulerPort>);

impl SchedulerLink {
    pub fn new(port: impl SchedulerPort) -> Self {
        Self(Arc::new(port))
    }
}

impl std::ops::Deref for SchedulerLink {
    type Target = dyn SchedulerPort;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}
