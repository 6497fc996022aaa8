//! One task (one input's whole turn) as its own actor: prepare → LLM → tools → … .
//!
//! Between two steps the task asks the scheduler whether to yield (a safe point). A
//! yielding task parks: it keeps its frame (messages, step, turn) and waits for
//! [`Resume`]. An in-flight LLM call can be cancelled ([`CancelLlm`]: preemption or
//! stop); a running tool is never interrupted.

use std::sync::Arc;

use actix::prelude::*;
use parking_lot::RwLock;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::channels::{Channels, parse_send_tool};
use super::input::{Input, Reply};
use super::prompt::{self, PromptSettings};
use super::scheduler::{ConsumeCancel, Finished, SafePoint, SchedulerActor, TakeStop};
use crate::addr::TAddr;
use crate::bus::EventBus;
use crate::host::{Host, HostContext, KernelActor};
use crate::llm::provider::{Complete, LlmActor, LlmError};
use crate::llm::types::{WireFunction, WireToolCall};
use crate::llm::{CompletionRequest, Message, ToolCall, Usage};
use crate::registry::Registry;
use crate::scheduler::Level;

/// Reply when a stop ends the running task.
pub const STOPPED: &str = "已停止生成。";
/// Reply of an input that was waiting when stop was pressed.
pub const CANCELLED_BY_STOP: &str = "已取消（用户停止）。";

/// Settings a task reads (reloaded when `core.agent.*` / `core.llm.*` change).
#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub prompt: PromptSettings,
    /// 0 = unlimited.
    pub max_tool_turns: u32,
    pub max_tokens: u32,
    pub temperature: f64,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            prompt: PromptSettings::default(),
            max_tool_turns: 10,
            max_tokens: 4096,
            temperature: 0.7,
        }
    }
}

/// What every task needs, shared.
pub struct TaskDeps {
    pub registry: Arc<Registry>,
    pub bus: EventBus,
    pub llm: TAddr<LlmActor>,
    pub channels: Channels,
    pub settings: RwLock<AgentSettings>,
}

#[derive(Debug)]
enum Step {
    Llm,
    Tools(Vec<ToolCall>),
}

/// The task actor.
pub struct TaskActor {
    id: u64,
    input: Input,
    level: Option<Level>,
    deps: Arc<TaskDeps>,
    scheduler: TAddr<SchedulerActor>,
    /// The frame: messages so far, of which the first `prefix_len` are the prefix
    /// (rebuilt on resume from committed state).
    msgs: Vec<Message>,
    prefix_len: usize,
    step: Step,
    turn: u32,
    tools_used: Vec<String>,
    usage: Usage,
    last_text: String,
    reasoning: String,
    last_batch_reply_only: bool,
    /// The in-flight LLM call, cancellable by preemption or stop.
    cancel: Option<CancellationToken>,
    done: bool,
}

impl TaskActor {
    pub fn new(
        id: u64,
        mut input: Input,
        level: Option<Level>,
        deps: Arc<TaskDeps>,
        scheduler: TAddr<SchedulerActor>,
    ) -> Self {
        input.reply.task_id = id;
        Self {
            id,
            input,
            level,
            deps,
            scheduler,
            msgs: Vec::new(),
            prefix_len: 0,
            step: Step::Llm,
            turn: 0,
            tools_used: Vec::new(),
            usage: Usage::default(),
            last_text: String::new(),
            reasoning: String::new(),
            last_batch_reply_only: false,
            cancel: None,
            done: false,
        }
    }

    fn settings(&self) -> AgentSettings {
        self.deps.settings.read().clone()
    }

    /// Builds (or rebuilds, on resume) the prefix and keeps the tail.
    fn build_prefix(&mut self) {
        let s = self.settings();
        let prefix = prompt::prefix(&s.prompt, &self.deps.channels, &self.input);
        let tail = self.msgs.split_off(self.prefix_len.min(self.msgs.len()));
        self.prefix_len = prefix.len();
        self.msgs = prefix;
        self.msgs.extend(tail);
    }

    /// Asks the scheduler whether to yield, then runs the next step (or parks).
    fn advance(&mut self, ctx: &mut HostContext<Self>) {
        if self.done {
            return;
        }
        let sched = self.scheduler.clone();
        let msg = SafePoint {
            task: self.id,
            consolidation: self.input.is_consolidation(),
        };
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(async move { sched.send(msg).await }).map(|res, host, ctx| {
                let me = host.inner();
                match res {
                    Ok(true) => tracing::debug!(task = me.id, "yielded at a safe point"),
                    Ok(false) => me.run_step(ctx),
                    Err(e) => me.fail(ctx, format!("the scheduler is unavailable: {e}")),
                }
            }),
        );
    }

    fn run_step(&mut self, ctx: &mut HostContext<Self>) {
        match std::mem::replace(&mut self.step, Step::Llm) {
            Step::Llm => self.llm_step(ctx),
            Step::Tools(calls) => self.tool_step(calls, ctx),
        }
    }

    fn llm_step(&mut self, ctx: &mut HostContext<Self>) {
        let s = self.settings();
        if s.max_tool_turns > 0 && self.turn >= s.max_tool_turns {
            let text = if self.last_text.trim().is_empty() {
                format!("[系统] 已达到最大工具轮次 {}，任务中止。", s.max_tool_turns)
            } else {
                self.last_text.clone()
            };
            return self.finish(ctx, text, "done");
        }
        prompt::add_continuation(&mut self.msgs, self.last_batch_reply_only);
        let request = CompletionRequest {
            model: String::new(),
            messages: self.msgs.clone(),
            temperature: s.temperature,
            max_tokens: s.max_tokens,
            stream: true,
            tools: self.deps.channels.tools(),
            tool_choice: Some(json!("auto")),
            disable_thinking: true,
            extra_body: Default::default(),
        };
        let token = CancellationToken::new();
        self.cancel = Some(token.clone());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<crate::llm::stream::Delta>();
        let bus = self.deps.bus.clone();
        let (id, channel) = (self.id, self.input.channel.clone());
        actix::spawn(async move {
            while let Some(d) = rx.recv().await {
                bus.publish(
                    "stream_delta",
                    json!({"task_id": id, "channel": channel, "content": d.content, "reasoning": d.reasoning}),
                );
            }
        });
        let llm = self.deps.llm.clone();
        let msg = Complete {
            request,
            stream: true,
            deltas: Some(tx),
            cancel: token,
        };
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(async move { llm.send(msg).await }).map(|res, host, ctx| {
                let me = host.inner();
                me.cancel = None;
                match res {
                    Ok(Ok(c)) => me.on_completion(c, ctx),
                    Ok(Err(LlmError::Cancelled)) => me.on_cancelled(ctx),
                    Ok(Err(e)) => me.fail(ctx, e.to_string()),
                    Err(e) => me.fail(ctx, e.to_string()),
                }
            }),
        );
    }

    fn on_completion(&mut self, c: crate::llm::provider::Completion, ctx: &mut HostContext<Self>) {
        let r = c.response;
        self.usage.prompt_tokens += r.usage.prompt_tokens;
        self.usage.completion_tokens += r.usage.completion_tokens;
        self.usage.total_tokens += r.usage.total_tokens;
        if !r.reasoning_content.is_empty() {
            self.reasoning = r.reasoning_content.clone();
        }
        self.deps.bus.publish(
            "agent_llm_chain",
            json!({
                "task_id": self.id, "content": r.content, "reasoning": r.reasoning_content,
                "tool_calls": r.tool_calls.iter().map(|t| json!({"id": t.id, "name": t.name, "arguments": t.arguments})).collect::<Vec<_>>(),
                "phase": "intermediate", "turn": self.turn, "source": c.source, "model": c.model,
                "usage": {"prompt": r.usage.prompt_tokens, "completion": r.usage.completion_tokens, "total": r.usage.total_tokens},
            }),
        );
        if !r.content.trim().is_empty() {
            self.last_text = r.content.clone();
        }
        if r.tool_calls.is_empty() {
            return self.finish(ctx, r.content, "done");
        }
        // Exactly one assistant message per batch, carrying every call of the batch.
        self.msgs.push(Message {
            role: "assistant".into(),
            content: if r.content.is_empty() {
                Value::Null
            } else {
                Value::String(r.content.clone())
            },
            reasoning_content: (!r.reasoning_content.is_empty()).then(|| r.reasoning_content.clone()),
            tool_call_id: None,
            tool_calls: r
                .tool_calls
                .iter()
                .map(|t| WireToolCall {
                    id: t.id.clone(),
                    kind: "function".into(),
                    function: WireFunction {
                        name: t.name.clone(),
                        arguments: t.raw_arguments.clone(),
                    },
                })
                .collect(),
        });
        self.step = Step::Tools(r.tool_calls);
        self.advance(ctx);
    }

    fn on_cancelled(&mut self, ctx: &mut HostContext<Self>) {
        self.deps.bus.publish(
            "stream_delta",
            json!({"task_id": self.id, "channel": self.input.channel, "content": "", "reset": true}),
        );
        let sched = self.scheduler.clone();
        let id = self.id;
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(async move { sched.send(TakeStop(id)).await }).map(
                |res, host, ctx| {
                    let me = host.inner();
                    if matches!(res, Ok(true)) {
                        me.finish(ctx, STOPPED.into(), "cancelled");
                    } else {
                        // Preempted: the partial output is discarded, the call counts as a
                        // turn, and it is re-sent after the safe point (maybe after a resume).
                        me.turn += 1;
                        me.step = Step::Llm;
                        me.advance(ctx);
                    }
                },
            ),
        );
    }

    fn tool_step(&mut self, calls: Vec<ToolCall>, ctx: &mut HostContext<Self>) {
        let reply_only = calls
            .iter()
            .all(|c| parse_send_tool(&c.name).is_some_and(|(_, help)| !help));
        for call in calls {
            self.tools_used.push(call.name.clone());
            let (text, status) = self.execute(&call);
            self.deps.bus.publish(
                "tool_call",
                json!({"task_id": self.id, "id": call.id, "name": call.name, "arguments": call.arguments, "status": status, "result": text}),
            );
            self.msgs.push(Message {
                role: "tool".into(),
                content: Value::String(text),
                reasoning_content: None,
                tool_call_id: Some(call.id.clone()),
                tool_calls: Vec::new(),
            });
        }
        self.last_batch_reply_only = reply_only;
        self.turn += 1;
        self.step = Step::Llm;
        self.advance(ctx);
    }

    /// Runs one built-in tool; returns the text for the model and a status.
    fn execute(&self, call: &ToolCall) -> (String, &'static str) {
        if let Some(err) = call.arguments.get("__arg_error").and_then(Value::as_str) {
            return (err.to_owned(), "error");
        }
        match parse_send_tool(&call.name) {
            Some((channel, true)) => (self.deps.channels.help(channel), "ok"),
            Some((channel, false)) => match self.deps.channels.check_send(channel, &call.arguments) {
                Ok(mut out) => {
                    out["task_id"] = json!(self.id);
                    out["source"] = json!(self.input.source);
                    self.deps.bus.publish("output", out);
                    ("ok".into(), "ok")
                }
                Err(text) => (text, "error"),
            },
            None => (
                format!(
                    "工具 {} 不存在 (no such tool). Available tools: {}.",
                    call.name,
                    self.deps
                        .channels
                        .tools()
                        .iter()
                        .map(|t| t.function.name.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "error",
            ),
        }
    }

    fn finish(&mut self, ctx: &mut HostContext<Self>, text: String, state: &'static str) {
        if self.done {
            return;
        }
        self.done = true;
        self.input.reply.send(Reply {
            content: text.clone(),
            reasoning_content: self.reasoning.clone(),
            tools_used: self.tools_used.clone(),
            usage: self.usage,
            ..Default::default()
        });
        self.deps.bus.publish(
            "agent_output",
            json!({"task_id": self.id, "text": text, "channel": self.input.channel, "source": self.input.source}),
        );
        let _ = self.scheduler.do_send(Finished { task: self.id, state });
        ctx.stop();
    }

    fn fail(&mut self, ctx: &mut HostContext<Self>, error: String) {
        if self.done {
            return;
        }
        tracing::warn!(task = self.id, "task failed: {error}");
        self.done = true;
        self.input.reply.send(Reply {
            content: format!("处理错误: {error}"),
            error: Some(error.clone()),
            tools_used: self.tools_used.clone(),
            usage: self.usage,
            ..Default::default()
        });
        self.deps.bus.publish("agent_output", json!({"task_id": self.id, "text": format!("处理错误: {error}"), "channel": self.input.channel, "error": true}));
        let _ = self.scheduler.do_send(Finished {
            task: self.id,
            state: "failed",
        });
        ctx.stop();
    }
}

impl KernelActor for TaskActor {
    const KIND: &'static str = "task";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        tracing::debug!(task = self.id, source = %self.input.source, level = ?self.level, "task started");
        self.build_prefix();
        // Inputs that were waiting when stop was pressed end here, before any LLM call.
        let sched = self.scheduler.clone();
        let id = self.id;
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(async move { sched.send(ConsumeCancel(id)).await }).map(
                |res, host, ctx| {
                    let me = host.inner();
                    if matches!(res, Ok(true)) {
                        me.finish(ctx, CANCELLED_BY_STOP.into(), "cancelled");
                    } else {
                        me.advance(ctx);
                    }
                },
            ),
        );
    }
}

/// Cancel the in-flight LLM call, if any (preemption or stop).
#[derive(Message)]
#[rtype(result = "()")]
pub struct CancelLlm;

/// Continue after a suspension.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Resume;

impl crate::host::Handles<CancelLlm> for TaskActor {
    type Reply = ();
    fn handle(&mut self, _: CancelLlm, _: &mut HostContext<Self>) {
        if let Some(t) = &self.cancel {
            t.cancel();
        }
    }
}

impl crate::host::Handles<Resume> for TaskActor {
    type Reply = ();
    fn handle(&mut self, _: Resume, ctx: &mut HostContext<Self>) {
        tracing::debug!(task = self.id, "resumed");
        // Rebuild the prefix from committed state; keep the tail (tool rounds).
        self.build_prefix();
        self.advance(ctx);
    }
}
