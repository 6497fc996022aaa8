//! The agent: intake, scheduling and the task lifecycle, as actors.
//!
//! * [`input`]: what enters (an [`Input`]) and how synchronous callers are answered;
//! * [`intake`]: the EventLoop (queued and self input) and InterceptLoop (interrupts,
//!   levels, stop) actors;
//! * [`scheduler`]: the Scheduler actor around [`crate::scheduler::Core`];
//! * [`turn`]: the rules of one task's turn as a plain state machine (prepare → LLM →
//!   tools → …, safe points, stop and preemption, overflow recovery);
//! * [`task`]: one task per actor, executing what the turn core decides;
//! * [`protocol`]: the messages between the scheduler and its tasks;
//! * [`channels`], [`prompt`]: output channels with their generated tools, and the
//!   prompt text;
//! * [`dedupe`]: the duplicate-input guard (a plain state machine);
//! * [`handles`]: [`AgentHandles`], what the agent's consumers hold;
//! * [`children`]: `spawn_child` helpers, each a supervised subtree with its own turn;
//! * [`residents`]: resident sub-agents, each a subtree with its own scheduler and memory;
//! * [`offload`]: the triage offload of a busy agent's backlog to a resident;
//! * [`seq`]: the built-in `seq_run` tool's plan and report (the runner runs it);
//! * [`inbox`]: the durable inbox (`DATA/inbox.db`) that holds every acknowledged
//!   input until its task has ended, and its group-committing actor.

pub mod backlog;
pub mod budget;
pub mod channels;
pub mod children;
pub mod dedupe;
pub mod door;
pub mod handles;
pub mod inbox;
pub mod input;
pub mod inputdef;
pub mod intake;
pub mod notice;
pub mod offer;
pub mod offload;
pub mod overflow;
pub mod persona;
pub mod prompt;
pub mod protocol;
pub mod recollect;
pub mod relay;
pub mod residents;
pub mod routes;
pub mod scheduler;
pub mod selftest;
pub mod seq;
pub mod start;
pub mod subagents;
pub mod task;
pub mod tools_exec;
pub mod toolset;
pub mod turn;

pub use handles::AgentHandles;
pub use input::{Input, Outcome, Refusal, Reply, ReplyTo};
