//! The running agent's handles, as its consumers (HTTP API, CLI channel, plugins) get
//! them. Defined here, beside the agent, so that a consumer in the daemon crate depends
//! on the agent and not on the kernel assembly that built it (which would make
//! `kernel ↔ cli_socket` a cycle).

use std::sync::Arc;

use super::intake::{EventLoop, InterceptLoop};
use super::scheduler::SchedulerActor;
use super::task::TaskDeps;
use crate::addr::TAddr;

/// Handles of the agent's actors.
#[derive(Clone)]
pub struct AgentHandles {
    pub scheduler: TAddr<SchedulerActor>,
    /// Queued and kernel self-input.
    pub event_loop: TAddr<EventLoop>,
    /// Interrupts, levels and stop requests.
    pub intercept_loop: TAddr<InterceptLoop>,
    /// What every task shares (LLM, stage host, memory tiers, settings).
    pub deps: Arc<TaskDeps>,
    /// The `spawn_child` helpers (`kernel/agent/children`).
    pub children: super::children::Children,
    /// The resident sub-agents (`kernel/agent/residents`).
    pub residents: super::residents::Residents,
}
