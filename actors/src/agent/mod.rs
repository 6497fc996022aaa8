//! The agent: intake, scheduling and the task lifecycle, as actors.
//!
//! * [`input`]: what enters (an [`Input`]) and how synchronous callers are answered;
//! * [`intake`]: the EventLoop (queued and self input) and InterceptLoop (interrupts,
//!   levels, stop) actors;
//! * [`scheduler`]: the Scheduler actor around [`crate::scheduler::Core`];
//! * [`task`]: one task per actor (prepare → LLM → tools → …, safe points, parking);
//! * [`channels`], [`prompt`]: output channels with their generated tools, and the
//!   prompt text;
//! * [`dedupe`]: the duplicate-input guard (a plain state machine);
//! * [`inbox`]: the durable inbox (`DATA/inbox.db`) that holds every acknowledged
//!   input until its task has ended, and its group-committing actor.

pub mod channels;
pub mod dedupe;
pub mod inbox;
pub mod input;
pub mod intake;
pub mod overflow;
pub mod prompt;
pub mod relay;
pub mod scheduler;
pub mod task;
pub mod tools_exec;

pub use input::{Input, Outcome, Refusal, Reply, ReplyTo};
