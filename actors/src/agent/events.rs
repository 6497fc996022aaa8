//! Every bus event of a turn, and the one function that publishes them.
//!
//! The task actor and its tool runner publish nothing else and nowhere else, so the
//! kinds and fields subscribers know (`stream_delta`, `agent_llm_chain`, `tool_call`,
//! `agent_output`, `output`) are written down once, in [`TurnEvent::to_bus`].

use serde_json::{Value, json};

use crate::bus::EventBus;
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
        status: &'static str,
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
    ChannelOutput(Value),
}

impl TurnEvent {
    /// The bus kind and data, exactly as subscribers (SSE, WebUI, tests) know them.
    pub fn to_bus(&self) -> (&'static str, Value) {
        match self {
            TurnEvent::StreamDelta {
                task_id,
                channel,
                content,
                reasoning,
            } => (
                "stream_delta",
                json!({"task_id": task_id, "channel": channel, "content": content, "reasoning": reasoning}),
            ),
            TurnEvent::StreamReset { task_id, channel } => (
                "stream_delta",
                json!({"task_id": task_id, "channel": channel, "content": "", "reset": true}),
            ),
            TurnEvent::LlmChain {
                task_id,
                content,
                reasoning,
                tool_calls,
                turn,
                source,
                model,
                usage,
            } => (
                "agent_llm_chain",
                json!({
                    "task_id": task_id, "content": content, "reasoning": reasoning,
                    "tool_calls": tool_calls.iter().map(|t| json!({"id": t.id, "name": t.name, "arguments": t.arguments})).collect::<Vec<_>>(),
                    "phase": "intermediate", "turn": turn, "source": source, "model": model,
                    "usage": {"prompt": usage.prompt_tokens, "completion": usage.completion_tokens, "total": usage.total_tokens},
                }),
            ),
            TurnEvent::ToolCall {
                task_id,
                id,
                name,
                arguments,
                status,
                result,
            } => (
                "tool_call",
                json!({"task_id": task_id, "id": id, "name": name, "arguments": arguments, "status": status, "result": result}),
            ),
            TurnEvent::Output {
                task_id,
                text,
                channel,
                source,
            } => (
                "agent_output",
                json!({"task_id": task_id, "text": text, "channel": channel, "source": source}),
            ),
            TurnEvent::Failed { task_id, text, channel } => (
                "agent_output",
                json!({"task_id": task_id, "text": text, "channel": channel, "error": true}),
            ),
            TurnEvent::ChannelOutput(message) => ("output", message.clone()),
        }
    }
}

/// Publishes a turn's event on the bus.
pub fn publish(bus: &EventBus, event: &TurnEvent) {
    let (kind, data) = event.to_bus();
    bus.publish(kind, data);
}
