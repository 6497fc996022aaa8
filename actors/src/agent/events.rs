//! Every bus event of a turn, and the one function that publishes them.
//!
//! The task actor and its tool runner publish nothing else and nowhere else, so the
//! kinds and fields subscribers know (`stream_delta`, `agent_llm_chain`, `tool_call`,
//! `agent_output`, `output`) are mapped onto the kernel's [`crate::bus::Event`] once, in
//! [`TurnEvent::into_bus`].

use serde_json::Value;

use crate::bus::{ChainToolCall, ChainUsage, Event as BusEvent, EventBus, ToolStatus};
use crate::llm::{ToolCall, Usage};

/// What happened in a turn that subscribers see on the bus. Every event the task
/// publishes is one of these (the shell turns them into bus events in one place).
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    /// Streamed text of the running LLM call.
    StreamDelta {
        task_id: u64,
        channel: String,
        content: String,
        reasoning: String,
    },
    /// Drop the partial stream: the call was cancelled.
    StreamReset { task_id: u64, channel: String },
    /// One successful LLM call, after post_action (spec §3.9).
    LlmChain {
        task_id: u64,
        content: String,
        reasoning: String,
        tool_calls: Vec<ToolCall>,
        turn: u32,
        source: String,
        model: String,
        usage: Usage,
    },
    /// One tool call's outcome.
    ToolCall {
        task_id: u64,
        id: String,
        name: String,
        arguments: Value,
        status: ToolStatus,
        result: String,
    },
    /// The final text.
    Output {
        task_id: u64,
        text: String,
        channel: String,
        source: String,
    },
    /// The failure text.
    Failed {
        task_id: u64,
        text: String,
        channel: String,
    },
    /// A checked `output_send__<channel>` message, before its delivery (the tool
    /// runner's; the channel's plugin may deliver it from the bus).
    ChannelOutput {
        channel: String,
        payload: String,
        content_type: String,
        meta: Value,
        task_id: u64,
        source: String,
    },
}

impl TurnEvent {
    /// The kernel event subscribers (SSE, WebUI, plugins, tests) see.
    pub fn into_bus(self) -> BusEvent {
        match self {
            TurnEvent::StreamDelta {
                task_id,
                channel,
                content,
                reasoning,
            } => BusEvent::StreamDelta {
                task_id,
                channel,
                content,
                reasoning: Some(reasoning),
                reset: false,
            },
            TurnEvent::StreamReset { task_id, channel } => BusEvent::StreamDelta {
                task_id,
                channel,
                content: String::new(),
                reasoning: None,
                reset: true,
            },
            TurnEvent::LlmChain {
                task_id,
                content,
                reasoning,
                tool_calls,
                turn,
                source,
                model,
                usage,
            } => BusEvent::AgentLlmChain {
                task_id,
                content,
                reasoning,
                tool_calls: tool_calls
                    .into_iter()
                    .map(|t| ChainToolCall {
                        id: t.id,
                        name: t.name,
                        arguments: t.arguments,
                    })
                    .collect(),
                phase: "intermediate",
                turn,
                source,
                model,
                usage: ChainUsage {
                    prompt: usage.prompt_tokens,
                    completion: usage.completion_tokens,
                    total: usage.total_tokens,
                },
            },
            TurnEvent::ToolCall {
                task_id,
                id,
                name,
                arguments,
                status,
                result,
            } => BusEvent::ToolCall {
                task_id,
                id,
                name,
                arguments,
                status,
                result,
            },
            TurnEvent::Output {
                task_id,
                text,
                channel,
                source,
            } => BusEvent::AgentOutput {
                task_id,
                text,
                channel,
                source: Some(source),
                error: false,
            },
            TurnEvent::Failed { task_id, text, channel } => BusEvent::AgentOutput {
                task_id,
                text,
                channel,
                source: None,
                error: true,
            },
            TurnEvent::ChannelOutput {
                channel,
                payload,
                content_type,
                meta,
                task_id,
                source,
            } => BusEvent::Output {
                channel,
                payload,
                content_type,
                meta,
                task_id,
                source,
            },
        }
    }
}

/// Publishes a turn's event on the bus.
pub fn publish(bus: &EventBus, event: TurnEvent) {
    bus.publish(event.into_bus());
}
