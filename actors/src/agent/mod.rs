//! The agent: intake, scheduling and the task lifecycle, as actors around plain cores.
//!
//! An input's way, in module order:
//!
//! * [`input`]: what enters (an [`Input`], its typed `Payload`) and how synchronous
//!   callers are answered; [`inputdef`]: each channel's definition and text cleaners;
//! * [`door`]: every input checked, masked and classified once — an `Admitted` is the
//!   only thing a scheduler queues; [`dedupe`]: the duplicate-input guard (a core);
//! * [`inbox`]: the durable inbox (`DATA/inbox.db`) that holds every acknowledged input
//!   until its task has ended, and its group-committing actor;
//! * [`intake`]: the EventLoop (queued and self input) and InterceptLoop (interrupts,
//!   levels, stop) actors; [`backlog`]: the intake's backlog (a core); [`routes`]:
//!   which agent takes a channel's input;
//! * [`scheduler`]: the Scheduler actor around [`crate::scheduler::Core`];
//!   [`protocol`]: the messages between the scheduler and its tasks;
//! * [`turn`]: the rules of one task's turn as a plain state machine (prepare → LLM →
//!   tools → …, safe points, stop and preemption, overflow recovery); [`budget`],
//!   [`overflow`]: the prompt's token budget and the overflow decision; [`recollect`]:
//!   the recall fan-out's tiers and join (a core); [`offer`], [`toolset`]: the tool
//!   offer and the subset that fits; [`prompt`]: the prompt text;
//! * [`task`]: one task per actor, executing what the turn core decides;
//!   [`tools_exec`]: one batch of tool calls through the stages and the firewall;
//!   [`seq`]: the built-in `seq_run` tool's plan and report (the runner runs it);
//! * [`channels`]: output channels with their generated tools; [`notice`]: what the
//!   kernel itself tells the owner, on the owner's channel;
//! * [`start`]: one wiring of an agent's loops (the main agent and residents);
//!   [`handles`]: [`AgentHandles`], what the agent's consumers hold; [`relay`]: setting
//!   changes applied to the running agent.
//!
//! Sub-agents: [`children`] (`spawn_child` helpers, each a supervised subtree with its
//! own turn), [`residents`] (each a subtree with its own scheduler and memory),
//! [`offload`] (the triage offload of a busy agent's backlog to a resident), and
//! [`subagents`] (the names both share).
//!
//! The kernel's own agent tools: [`persona`] (`persona_set`), [`settings`]
//! (`settings_get`/`settings_set`), [`selftest`] (`selftest`).

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
pub mod settings;
pub mod start;
pub mod subagents;
pub mod task;
pub mod tools_exec;
pub mod toolset;
pub mod turn;

pub use handles::AgentHandles;
pub use input::{Input, Outcome, Refusal, Reply, ReplyTo};
