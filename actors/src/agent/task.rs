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
use super::tools_exec::{ToolRunner, run_stage};
use crate::addr::TAddr;
use crate::bus::{ChainToolCall, ChainUsage, Event, EventBus, TaskState};
use crate::host::{Host, HostContext, KernelActor};
use crate::llm::provider::{Complete, LlmActor, LlmError};
use crate::llm::types::{WireFunction, WireToolCall};
use crate::llm::{CompletionRequest, Message, ToolCall, Usage};
use crate::memory::actor::{AppendEvent, ContextActor, Timeline};
use crate::memory::context::estimate_tokens;
use crate::memory::now_ms;
use crate::registry::Registry;
use crate::scheduler::Level;
use crate::stages::{GetTools, Stage, StageContext, StageHost, StageToolCall, ToolRegistry};

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
    /// How long one tool may run before the model is told it timed out.
    pub tool_timeout: std::time::Duration,
    /// Events the context window holds before a prune (`core.agent.max_context_size`).
    pub max_context_size: usize,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            prompt: PromptSettings::default(),
            max_tool_turns: 10,
            max_tokens: 4096,
            temperature: 0.7,
            tool_timeout: super::tools_exec::TOOL_TIMEOUT,
            max_context_size: 30,
        }
    }
}

/// What every task needs, shared.
pub struct TaskDeps {
    pub registry: Arc<Registry>,
    pub bus: EventBus,
    pub llm: TAddr<LlmActor>,
    pub stages: TAddr<StageHost>,
    pub context: TAddr<ContextActor>,
    /// The raw JSONL record of every turn.
    pub textlog: TAddr<crate::memory::textlog::TextLogActor>,
    /// The graph tier, for the `【记忆索引】` block (none in kernels without it).
    pub graph: Option<TAddr<crate::memory::graph_actor::GraphActor>>,
    /// The embedder, for the dense side of the document lookup (none: BM25 only).
    pub embedder: Option<crate::memory::embed::actor::EmbedderHandle>,
    pub channels: Channels,
    /// The skill index for the system prompt (filled when SKILL.md plugins load).
    pub skills_index: RwLock<String>,
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
    /// A cancel (stop or preemption) arrived while no LLM call was in flight (the task
    /// was still building its prompt): honoured before the next call is sent.
    cancel_pending: bool,
    /// Plugin tools offered in the current LLM request (and run in its tool step).
    tools: ToolRegistry,
    /// Context-overflow recoveries made so far (spec §5.9).
    overflow: super::overflow::Guard,
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
            tools: ToolRegistry::default(),
            overflow: Default::default(),
            cancel_pending: false,
            done: false,
        }
    }

    /// A stage context carrying this task's routing extras.
    fn stage_ctx(&self) -> StageContext {
        let mut c = StageContext {
            user_id: self.input.source.clone(),
            no_memory: self.input.no_memory,
            ..Default::default()
        };
        c.extra.insert("input_source".into(), json!(self.input.source));
        c.extra.insert("output_channel".into(), json!(self.input.channel));
        c
    }

    fn runner(&self) -> ToolRunner {
        ToolRunner {
            stages: self.deps.stages.clone(),
            tools: self.tools.clone(),
            channels: self.deps.channels.clone(),
            bus: self.deps.bus.clone(),
            task_id: self.id,
            source: self.input.source.clone(),
            channel: self.input.channel.clone(),
            timeout: self.settings().tool_timeout,
        }
    }

    fn settings(&self) -> AgentSettings {
        let mut s = self.deps.settings.read().clone();
        s.prompt.skills = self.deps.skills_index.read().clone();
        s
    }

    /// Builds (or rebuilds, on resume) the prefix and keeps the tail.
    fn build_prefix(&mut self, timeline: &str) {
        let s = self.settings();
        let prefix = prompt::prefix(&s.prompt, &self.deps.channels, &self.input, timeline);
        let tail = self.msgs.split_off(self.prefix_len.min(self.msgs.len()));
        self.prefix_len = prefix.len();
        self.msgs = prefix;
        self.msgs.extend(tail);
    }

    /// Token budget of the timeline (kernel spec §5.8 with the default window).
    fn context_budget(&self) -> usize {
        const WINDOW: usize = 32_768;
        let target = WINDOW * 80 / 100;
        let s = self.settings();
        let fixed = estimate_tokens(&prompt::system_prompt(&s.prompt, &self.deps.channels));
        let available = target.saturating_sub(fixed);
        available - available / 3
    }

    /// Reads the timeline (committed state), then runs `then`.
    fn with_timeline(&mut self, ctx: &mut HostContext<Self>, then: fn(&mut Self, String, &mut HostContext<Self>)) {
        let context = self.deps.context.clone();
        let max_tokens = self.context_budget();
        let query = self.input.text.clone();
        let graph = self.deps.graph.clone();
        let embedder = self.deps.embedder.clone();
        let fut = async move {
            let q = query.clone();
            let read = async move {
                let qv = crate::memory::embed::actor::embed_query(
                    embedder.as_ref(),
                    &q,
                    crate::memory::actor::QUERY_EMBED_WAIT,
                )
                .await;
                context
                    .send(Timeline {
                        max_tokens,
                        query: q,
                        qv,
                    })
                    .await
            };
            // The memory index goes with the timeline (entities this input touches),
            // asked in parallel. Never wait long for it: a busy graph (a big merge
            // round) skips one index.
            let index = async move {
                let Some(graph) = graph else { return String::new() };
                let ask = graph.send(crate::memory::graph_actor::MemoryIndex(query));
                match tokio::time::timeout(std::time::Duration::from_millis(250), ask).await {
                    Ok(Ok(index)) => index,
                    Ok(Err(_)) => String::new(),
                    Err(_) => {
                        tracing::debug!("memory index skipped: the graph did not answer within 250 ms");
                        String::new()
                    }
                }
            };
            let (timeline, index) = futures_util::join!(read, index);
            let mut timeline = timeline.unwrap_or_default();
            if !index.is_empty() {
                if !timeline.is_empty() {
                    timeline.push_str("\n\n");
                }
                timeline.push_str(&index);
            }
            timeline
        };
        ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(fut).map(move |t, host, ctx| then(host.inner(), t, ctx)));
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
        if std::mem::take(&mut self.cancel_pending) {
            return self.on_cancelled(ctx, false);
        }
        let s = self.settings();
        if s.max_tool_turns > 0 && self.turn >= s.max_tool_turns {
            let text = if self.last_text.trim().is_empty() {
                format!("[系统] 已达到最大工具轮次 {}，任务中止。", s.max_tool_turns)
            } else {
                self.last_text.clone()
            };
            return self.finish(ctx, text, TaskState::Done);
        }
        prompt::add_continuation(&mut self.msgs, self.last_batch_reply_only);
        match self
            .overflow
            .check(prompt_tokens(&self.msgs), super::overflow::DEFAULT_WINDOW)
        {
            super::overflow::Verdict::Fits => {}
            super::overflow::Verdict::Recover => return self.recover_overflow(ctx),
            super::overflow::Verdict::Fail(m) => return self.fail(ctx, m),
        }
        let mut request = CompletionRequest {
            model: String::new(),
            messages: self.msgs.clone(),
            temperature: s.temperature,
            max_tokens: s.max_tokens,
            stream: true,
            tools: Vec::new(),
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
                bus.publish(Event::StreamDelta {
                    task_id: id,
                    channel: channel.clone(),
                    content: d.content,
                    reasoning: Some(d.reasoning),
                    reset: false,
                });
            }
        });
        let llm = self.deps.llm.clone();
        let stages = self.deps.stages.clone();
        let channel_tools = self.deps.channels.tools();
        let fut = async move {
            // Tools registered since the last round are offered from this round on.
            let tools = stages.send(GetTools).await.unwrap_or_default();
            request.tools = tools.defs();
            request.tools.extend(channel_tools);
            let msg = Complete {
                request,
                stream: true,
                deltas: Some(tx),
                cancel: token,
            };
            (tools, llm.send(msg).await)
        };
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(fut).map(|(tools, res), host, ctx| {
                let me = host.inner();
                me.cancel = None;
                me.tools = tools;
                match res {
                    Ok(Ok(c)) => me.on_completion(c, ctx),
                    Ok(Err(LlmError::Cancelled)) => me.on_cancelled(ctx, true),
                    Ok(Err(e @ LlmError::ContextFull(_))) => match me.overflow.detected() {
                        super::overflow::Verdict::Fail(m) => me.fail(ctx, format!("{m} ({e})")),
                        _ => me.recover_overflow(ctx),
                    },
                    Ok(Err(e)) => me.fail(ctx, e.to_string()),
                    Err(e) => me.fail(ctx, e.to_string()),
                }
            }),
        );
    }

    /// Overflow recovery: prune the context window (query "" — recency decides) into the
    /// document tier; when events moved, tell the model with a kernel L4 notice; then
    /// rebuild the prompt from committed state and continue at a safe point.
    fn recover_overflow(&mut self, ctx: &mut HostContext<Self>) {
        let context = self.deps.context.clone();
        let (context_tokens, max_context_size) = (self.context_budget(), self.settings().max_context_size);
        let fut = async move {
            context
                .send(crate::memory::actor::PruneContext {
                    query: String::new(),
                    context_tokens,
                    max_context_size,
                })
                .await
        };
        ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(fut).map(|res, host, ctx| {
            let me = host.inner();
            let pruned = match res {
                Ok(Ok(n)) => n,
                Ok(Err(e)) => {
                    tracing::warn!(task = me.id, "overflow recovery could not prune: {e}");
                    0
                }
                Err(e) => return me.fail(ctx, format!("the context store is unavailable: {e}")),
            };
            tracing::warn!(task = me.id, pruned, "context overflow: recovery");
            if pruned > 0 {
                me.overflow.pruned(pruned);
                let mut notice = Input::text("kernel/overflow", &super::overflow::notice(pruned));
                notice.channel = "kernel".into();
                notice.kernel = true;
                notice.level = Some(Level::L4);
                notice.payload.insert("kernel".into(), json!(true));
                if let Err(e) = me.scheduler.do_send(super::scheduler::Submit(notice)) {
                    tracing::warn!(task = me.id, "overflow notice not delivered: {e}");
                }
            }
            me.with_timeline(ctx, |me, timeline, ctx| {
                me.build_prefix(&timeline);
                me.advance(ctx);
            });
        }));
    }

    fn on_completion(&mut self, c: crate::llm::provider::Completion, ctx: &mut HostContext<Self>) {
        // post_action: plugins see the model's text and calls; may rewrite or answer.
        let mut sctx = self.stage_ctx();
        sctx.llm_text = c.response.content.clone();
        sctx.reasoning_content = c.response.reasoning_content.clone();
        sctx.tool_calls = c
            .response
            .tool_calls
            .iter()
            .map(|t| StageToolCall {
                id: t.id.clone(),
                name: t.name.clone(),
                plugin: self
                    .tools
                    .get(&t.name)
                    .map(|x| x.spec.plugin.clone())
                    .unwrap_or_default(),
                arguments: t.arguments.clone(),
            })
            .collect();
        let stages = self.deps.stages.clone();
        let fut = async move { run_stage(&stages, Stage::PostAction, sctx).await };
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(fut).map(move |after, host, ctx| {
                let me = host.inner();
                if let Some(r) = after.response {
                    return me.finish(ctx, r, TaskState::Done);
                }
                let mut c = c;
                c.response.content = after.llm_text;
                // Only id, name and arguments survive a rewrite.
                c.response.tool_calls = after
                    .tool_calls
                    .into_iter()
                    .map(|t| ToolCall {
                        raw_arguments: t.arguments.to_string(),
                        id: t.id,
                        name: t.name,
                        arguments: t.arguments,
                    })
                    .collect();
                me.after_post_action(c, ctx);
            }),
        );
    }

    fn after_post_action(&mut self, c: crate::llm::provider::Completion, ctx: &mut HostContext<Self>) {
        let r = c.response;
        self.usage.prompt_tokens += r.usage.prompt_tokens;
        self.usage.completion_tokens += r.usage.completion_tokens;
        self.usage.total_tokens += r.usage.total_tokens;
        if !r.reasoning_content.is_empty() {
            self.reasoning = r.reasoning_content.clone();
        }
        self.deps.bus.publish(Event::AgentLlmChain {
            task_id: self.id,
            content: r.content.clone(),
            reasoning: r.reasoning_content.clone(),
            tool_calls: r
                .tool_calls
                .iter()
                .map(|t| ChainToolCall {
                    id: t.id.clone(),
                    name: t.name.clone(),
                    arguments: t.arguments.clone(),
                })
                .collect(),
            phase: "intermediate",
            turn: self.turn,
            source: c.source,
            model: c.model,
            usage: ChainUsage {
                prompt: r.usage.prompt_tokens,
                completion: r.usage.completion_tokens,
                total: r.usage.total_tokens,
            },
        });
        if !r.content.trim().is_empty() {
            self.last_text = r.content.clone();
        }
        if r.tool_calls.is_empty() {
            return self.finish(ctx, r.content, TaskState::Done);
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

    /// A cancel took effect: a stop ends the task; a preemption re-sends the call after
    /// the safe point. `in_flight`: a call was cancelled (its partial stream is reset and
    /// it counts as a turn), rather than one not yet sent.
    fn on_cancelled(&mut self, ctx: &mut HostContext<Self>, in_flight: bool) {
        if in_flight {
            self.deps.bus.publish(Event::StreamDelta {
                task_id: self.id,
                channel: self.input.channel.clone(),
                content: String::new(),
                reasoning: None,
                reset: true,
            });
        }
        let sched = self.scheduler.clone();
        let id = self.id;
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(async move { sched.send(TakeStop(id)).await }).map(
                move |res, host, ctx| {
                    let me = host.inner();
                    if matches!(res, Ok(true)) {
                        me.finish(ctx, STOPPED.into(), TaskState::Cancelled);
                    } else {
                        // Preempted: the partial output is discarded, the call counts as a
                        // turn, and it is re-sent after the safe point (maybe after a resume).
                        if in_flight {
                            me.turn += 1;
                        }
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
        let runner = self.runner();
        // A running tool is never interrupted: no safe point until the batch is done.
        let fut = async move {
            let outcomes = runner.run_batch(&calls).await;
            (calls, outcomes)
        };
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(fut).map(move |(calls, outcomes), host, ctx| {
                let me = host.inner();
                for (call, out) in calls.iter().zip(outcomes) {
                    me.tools_used.push(call.name.clone());
                    me.deps.bus.publish(Event::ToolCall {
                        task_id: me.id,
                        id: call.id.clone(),
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                        status: out.status,
                        result: out.text.clone(),
                    });
                    me.msgs.push(Message {
                        role: "tool".into(),
                        content: Value::String(out.text),
                        reasoning_content: None,
                        tool_call_id: Some(call.id.clone()),
                        tool_calls: Vec::new(),
                    });
                }
                me.last_batch_reply_only = reply_only;
                me.turn += 1;
                me.step = Step::Llm;
                me.advance(ctx);
            }),
        );
    }

    fn finish(&mut self, ctx: &mut HostContext<Self>, text: String, state: TaskState) {
        if self.done {
            return;
        }
        self.done = true;
        // before_output may rewrite the final text (a `Response` set there is ignored).
        let mut sctx = self.stage_ctx();
        sctx.final_text = text;
        let stages = self.deps.stages.clone();
        let fut = async move { run_stage(&stages, Stage::BeforeOutput, sctx).await };
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(fut)
                .map(move |out, host, ctx| host.inner().deliver(ctx, out.final_text, state)),
        );
    }

    fn deliver(&mut self, ctx: &mut HostContext<Self>, text: String, state: TaskState) {
        if self.input.is_consolidation() {
            return self.reply(ctx, text, state);
        }
        // Commit the turn before answering: an answered turn is a remembered turn.
        let tool_results = self
            .msgs
            .iter()
            .filter(|m| m.role == "tool")
            .zip(&self.tools_used)
            .map(|(m, name)| {
                let output = m.content.as_str().unwrap_or("").to_owned();
                // The compute layer's view: nothing of a no_memory tool, the cleaned
                // text of a tool with a cleaner.
                let compute = self.tools.get(name).and_then(|t| {
                    if t.spec.no_memory {
                        Some(String::new())
                    } else {
                        t.spec.cleaner.as_ref().map(|c| c(&output))
                    }
                });
                crate::memory::context::ToolOutput {
                    name: name.clone(),
                    output,
                    compute,
                }
            })
            .collect();
        let event = crate::memory::Event {
            id: 0,
            ts_ms: now_ms(),
            source: "agent".into(),
            input: self.input.text.clone(),
            response: text.clone(),
            tools_used: self.tools_used.clone(),
            tool_results,
        };
        if !self.input.no_memory {
            let _ = self
                .deps
                .textlog
                .do_send(crate::memory::textlog::LogText(crate::memory::textlog::TextEvent {
                    ts: event.ts_ms,
                    source: self.input.source.clone(),
                    input: event.input.clone(),
                    response: event.response.clone(),
                    tools_used: event.tools_used.clone(),
                }));
        }
        let context = self.deps.context.clone();
        // The window is kept in size by the distill heartbeat, not per turn.
        let fut = async move { context.send(AppendEvent(event)).await };
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(fut).map(move |res, host, ctx| {
                if let Ok(Err(e)) | Err(e) = res.map_err(|e| e.to_string()) {
                    tracing::error!("the reply could not be recorded in memory: {e}");
                }
                host.inner().reply(ctx, text, state);
            }),
        );
    }

    fn reply(&mut self, ctx: &mut HostContext<Self>, text: String, state: TaskState) {
        self.input.reply.send(Reply {
            content: text.clone(),
            reasoning_content: self.reasoning.clone(),
            tools_used: self.tools_used.clone(),
            usage: self.usage,
            ..Default::default()
        });
        self.deps.bus.publish(Event::AgentOutput {
            task_id: self.id,
            text: text.clone(),
            channel: self.input.channel.clone(),
            source: Some(self.input.source.clone()),
            error: false,
        });
        let mut sctx = self.stage_ctx();
        sctx.final_text = text;
        let stages = self.deps.stages.clone();
        actix::spawn(async move {
            run_stage(&stages, Stage::AfterOutput, sctx).await;
        });
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
        self.deps.bus.publish(Event::AgentOutput {
            task_id: self.id,
            text: format!("处理错误: {error}"),
            channel: self.input.channel.clone(),
            source: None,
            error: true,
        });
        let _ = self.scheduler.do_send(Finished {
            task: self.id,
            state: TaskState::Failed,
        });
        ctx.stop();
    }
}

impl KernelActor for TaskActor {
    const KIND: &'static str = "task";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        tracing::debug!(task = self.id, source = %self.input.source, level = ?self.level, "task started");
        let mut sctx = self.stage_ctx();
        sctx.raw_message = self.input.text.clone();
        let stages = self.deps.stages.clone();
        let fut = async move { run_stage(&stages, Stage::OnInput, sctx).await };
        ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(fut).map(|out, host, ctx| {
            let me = host.inner();
            if let Some(r) = out.response {
                return me.finish(ctx, r, TaskState::Done);
            }
            me.input.text = out.raw_message;
            me.with_timeline(ctx, |me, timeline, ctx| me.record_input(timeline, ctx));
        }));
    }
}

impl TaskActor {
    /// Commits the input to the context (not for interrupts) before the LLM runs: once
    /// this returns, the message survives a crash.
    fn record_input(&mut self, timeline: String, ctx: &mut HostContext<Self>) {
        self.build_prefix(&timeline);
        if self.input.is_interrupt() || self.input.is_consolidation() {
            return self.pre_action(ctx);
        }
        let event = crate::memory::Event {
            id: 0,
            ts_ms: now_ms(),
            source: self.input.source.clone(),
            input: self.input.text.clone(),
            response: String::new(),
            tools_used: vec![],
            tool_results: vec![],
        };
        let context = self.deps.context.clone();
        let fut = async move { context.send(AppendEvent(event)).await };
        ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(fut).map(|res, host, ctx| {
            let me = host.inner();
            match res {
                Ok(Ok(_)) => me.pre_action(ctx),
                Ok(Err(e)) => me.fail(ctx, format!("cannot record the input in memory: {e}")),
                Err(e) => me.fail(ctx, format!("the context store is unavailable: {e}")),
            }
        }));
    }

    /// pre_action (may add context messages or answer), then the stop check: inputs
    /// that were waiting when stop was pressed end here, before any LLM call.
    fn pre_action(&mut self, ctx: &mut HostContext<Self>) {
        let sctx = self.stage_ctx();
        let stages = self.deps.stages.clone();
        let sched = self.scheduler.clone();
        let id = self.id;
        let fut = async move {
            let out = run_stage(&stages, Stage::PreAction, sctx).await;
            if out.response.is_some() {
                return (out, false);
            }
            let cancelled = matches!(sched.send(ConsumeCancel(id)).await, Ok(true));
            (out, cancelled)
        };
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(fut).map(|(out, cancelled), host, ctx| {
                let me = host.inner();
                if let Some(r) = out.response {
                    return me.finish(ctx, r, TaskState::Done);
                }
                if cancelled {
                    return me.finish(ctx, CANCELLED_BY_STOP.into(), TaskState::Cancelled);
                }
                for m in out.context_msgs.into_iter().filter(|m| !m.role.is_empty()) {
                    me.msgs.push(Message::text(&m.role, m.content));
                }
                me.advance(ctx);
            }),
        );
    }
}

/// The estimated size of a prompt (spec §5.8's estimate over every message's text).
fn prompt_tokens(msgs: &[Message]) -> usize {
    msgs.iter()
        .map(|m| {
            let content = match &m.content {
                Value::String(s) => estimate_tokens(s),
                Value::Null => 0,
                other => estimate_tokens(&other.to_string()),
            };
            content
                + m.tool_calls
                    .iter()
                    .map(|c| estimate_tokens(&c.function.arguments) + estimate_tokens(&c.function.name))
                    .sum::<usize>()
        })
        .sum()
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
        match &self.cancel {
            Some(t) => t.cancel(),
            None => self.cancel_pending = true,
        }
    }
}

impl crate::host::Handles<Resume> for TaskActor {
    type Reply = ();
    fn handle(&mut self, _: Resume, ctx: &mut HostContext<Self>) {
        tracing::debug!(task = self.id, "resumed");
        // Rebuild the prefix from committed state (the timeline now holds whatever the
        // interrupting task committed); keep the tail (tool rounds).
        self.with_timeline(ctx, |me, timeline, ctx| {
            me.build_prefix(&timeline);
            me.advance(ctx);
        });
    }
}
