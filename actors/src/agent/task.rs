//! One task (one input's whole turn) as its own actor: the shell around
//! [`super::turn::TurnCore`].
//!
//! The core decides everything about the turn; this actor executes its commands. Each
//! command that waits for something (a stage, the timeline, the scheduler, the LLM, a
//! tool batch, a prune, a commit) becomes one future whose result is fed back to the
//! core as an event. Between two steps the core asks the scheduler whether to yield (a
//! safe point); a yielded task parks with its frame and waits for [`Resume`]. An
//! in-flight LLM call can be cancelled ([`CancelLlm`]: preemption or stop); a running
//! tool is never interrupted. The bus events of a turn are the core's `Cmd::Publish`
//! (plus the streamed deltas, published as they arrive).

use std::sync::Arc;
use tracing::Instrument as _;

use actix::prelude::*;
use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;

use super::budget::Budget;
use super::channels::Channels;
use super::input::Input;
pub use super::offer::Offered;
use super::offer::{Ask, OfferCache};
use super::prompt::PromptSettings;
pub use super::protocol::{CancelLlm, Resume};
use super::protocol::{Finished, SafePoint, SchedulerLink};
use super::recollect::{Answers, Joined, NotRecorded, Recorded, Tiers};
use super::tools_exec::{ToolRunner, run_stage};
use super::turn::{Cmd, Env, Event, Gathered, Limits, LlmFailure, PruneFailure, TurnCore, TurnInput};
use crate::addr::TAddr;
use crate::bus::EventBus;
use crate::clock::now_ms;
use crate::host::{Host, HostContext, KernelActor};
use crate::llm::provider::{Complete, LlmActor};
use crate::memory::context::actor::{AppendEvent, ContextActor, Recall};
use crate::memory::recall::Recollection;
use crate::registry::Registry;
use crate::scheduler::Level;
use crate::stages::{GetTools, Stage, StageHost};

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
    /// How long a durable input's turn waits out an LLM outage (`core.agent.outage_wait`).
    pub outage_wait: std::time::Duration,
    /// Longest a turn may work (`core.agent.max_turn_time`; zero: no limit).
    pub max_turn_time: std::time::Duration,
    /// Events the context window holds before a prune (`core.agent.max_context_size`).
    pub max_context_size: usize,
    /// The context window of the source requests go to first (`llm::window`).
    pub window: usize,
    /// Most tokens a request's tool offer may take (`core.agent.tool_tokens`; 0: the
    /// window's share only), see [`super::toolset::Room`].
    pub tool_tokens: usize,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            prompt: PromptSettings::default(),
            max_tool_turns: 10,
            max_tokens: 4096,
            temperature: 0.7,
            tool_timeout: super::tools_exec::TOOL_TIMEOUT,
            outage_wait: std::time::Duration::from_secs(3600),
            max_turn_time: std::time::Duration::from_secs(1800),
            max_context_size: 30,
            window: crate::llm::window::DEFAULT_WINDOW,
            tool_tokens: 1500,
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
    /// The document tier: per-turn recall asks it for passages beside the context.
    pub documents: TAddr<crate::memory::documents::DocumentsActor>,
    /// The raw JSONL record of every turn.
    pub textlog: TAddr<crate::memory::textlog::TextLogActor>,
    /// The graph tier, for the `【记忆索引】` block (none in kernels without it).
    pub graph: Option<TAddr<crate::memory::graph::actor::GraphActor>>,
    /// The embedder, for the dense side of recall (none: BM25 only).
    pub embedder: Option<crate::memory::embed::actor::EmbedderHandle>,
    /// The knowledge base, a tier of per-turn recall (none in kernels without it).
    pub knowledge: Option<TAddr<crate::memory::knowledge::KnowledgeActor>>,
    /// The thread the memory tiers run on, where a turn's recall joins their answers
    /// (none: joined on the turn's own thread). Only where the join runs depends on it.
    pub recall_thread: Option<actix::ArbiterHandle>,
    /// The tool list last offered and its token count (see [`tool_list`]).
    pub tool_list: parking_lot::Mutex<Option<OfferCache>>,
    /// Owners whose tools the owner's last turns used: offered to the next turns too
    /// ([`super::toolset::Recent`]).
    pub recent_tools: parking_lot::Mutex<super::toolset::Recent>,
    /// Where the owner's last input from a chat bridge came from: the kernel's own
    /// notices go there ([`super::notice`]).
    pub owner_route: Arc<super::notice::OwnerRoute>,
    pub channels: Channels,
    /// The skill index for the system prompt (filled when SKILL.md plugins load).
    pub skills_index: RwLock<String>,
    pub settings: RwLock<AgentSettings>,
    /// The persona file (none in kernels without a data dir): read when a task starts.
    pub persona: Option<Arc<super::persona::PersonaFile>>,
    /// The security firewall every tool call and model request passes.
    pub firewall: Arc<crate::firewall::Firewall>,
    /// The media memory: images of the input and recalled ones join the request just
    /// before it is sent (none in kernels without it).
    pub media: Option<crate::memory::media::actor::MediaHandle>,
    /// Tools this agent's tasks are neither offered nor may call (a `spawn_child`
    /// helper may not spawn helpers; see `agent::children`). Empty for the main agent.
    pub refused_tools: &'static [&'static str],
    /// Tools left out of this agent's tool list although they stay callable (the main
    /// agent is not offered `notify_parent`: it has no parent). Applied when the list is
    /// rebuilt, so it costs nothing per turn.
    pub hidden_tools: &'static [&'static str],
    /// Which agent this is, as its tools see it (`__origin.agent`): `""` for the main
    /// agent, `resident/<id>` for a resident, `child_<n>` for a helper.
    pub agent: String,
}

impl TaskDeps {
    /// Task dependencies for a sub-agent of this agent (a helper or a resident): this
    /// agent's LLM, stage host, firewall and bus, its own context and documents (and
    /// graph), its own limits and refused tools. The one place a sub-agent's dependencies
    /// are made.
    pub fn derived(
        &self,
        (context, documents): (TAddr<ContextActor>, TAddr<crate::memory::documents::DocumentsActor>),
        graph: Option<TAddr<crate::memory::graph::actor::GraphActor>>,
        channels: Channels,
        max_tool_turns: u32,
        refused_tools: &'static [&'static str],
        agent: String,
    ) -> Self {
        let mut settings = self.settings.read().clone();
        settings.max_tool_turns = max_tool_turns;
        Self {
            registry: self.registry.clone(),
            bus: self.bus.clone(),
            llm: self.llm.clone(),
            stages: self.stages.clone(),
            context,
            documents,
            textlog: self.textlog.clone(),
            graph,
            embedder: None,
            knowledge: None,
            recall_thread: self.recall_thread.clone(),
            tool_list: Default::default(),
            recent_tools: Default::default(),
            owner_route: self.owner_route.clone(),
            channels,
            skills_index: parking_lot::RwLock::new(self.skills_index.read().clone()),
            settings: parking_lot::RwLock::new(settings),
            persona: self.persona.clone(),
            firewall: self.firewall.clone(),
            // A sub-agent recalls nothing from the main memory, images included.
            media: None,
            refused_tools,
            hidden_tools: &[],
            agent,
        }
    }
}

/// The task actor.
pub struct TaskActor {
    id: u64,
    /// The input; the shell keeps it for its reply path (the core has a copy of the rest).
    input: Input,
    level: Option<Level>,
    deps: Arc<TaskDeps>,
    scheduler: SchedulerLink,
    core: TurnCore,
    /// The in-flight LLM call, cancelled when the core says so.
    cancel: Option<CancellationToken>,
    /// The images this task's requests carry, fetched once.
    media: Arc<crate::memory::media::parts::Prepared>,
    /// Owners whose tools the model asked for (`get_plugin_tools`) or called by name in
    /// this turn: offered from the next step on when only a subset fits. An owner's
    /// turn starts with the owners its last turns used ([`TaskDeps::recent_tools`]).
    expanded: std::collections::BTreeSet<String>,
    /// The owners this turn reached for, told to [`TaskDeps::recent_tools`] when it
    /// replies (`None`: a guest's or the kernel's own turn, which leaves no trace there).
    reached: Option<std::collections::BTreeSet<String>>,
    /// See [`Self::settings`].
    settings: Option<Arc<AgentSettings>>,
    /// The error of the reply sent, for the scheduler (and the inbox's dead-letter list).
    error: Option<String>,
    /// The turn committed rows the embedder should vector once the reply is out.
    embed_after_reply: bool,
    /// Why the turn is untrusted, once it is (see `ToolRunner::untrusted`).
    untrusted: Arc<parking_lot::Mutex<Option<String>>>,
    /// The turn's trace span ([`crate::trace`]): recall, each LLM call and each tool
    /// call are its children; it ends when the task does.
    span: tracing::Span,
    /// The tools and the offer recall counted into the prompt's budget: the next
    /// [`Cmd::Gather`] that asks the same takes them instead of fetching and choosing
    /// again (a turn's first request offers what its budget was cut for).
    counted: Option<Offering>,
}

/// What an offer is asked for: `(window, fixed, query, expanded owners)`.
type Asked = (usize, usize, String, std::collections::BTreeSet<String>);

/// The tools registered at one moment and what a request out of them offers, with
/// what it was asked for.
struct Offering {
    asked: Asked,
    tools: crate::stages::ToolRegistry,
    offered: Offered,
}

impl Offering {
    /// Fetches the tools registered by now, less the agent's refused ones, and makes
    /// the offer `asked` describes (out of no registered tools when the stage host did
    /// not answer: the channels' send tools are offered still).
    async fn make(deps: &TaskDeps, channel: &str, asked: Asked) -> Self {
        let mut tools = deps.stages.send(GetTools).await.unwrap_or_default();
        // A sub-agent's refused tools leave the snapshot its turn (and so its tool
        // runner) keeps: not offered, and a call by name meets "no such tool". (The
        // main agent refuses none, so its snapshot — and the tool list cached by it —
        // stays the registry's own.)
        for name in deps.refused_tools {
            if let Some(plugin) = tools.get(name).map(|t| t.spec.plugin.clone()) {
                let _ = tools.unregister(&plugin, name);
            }
        }
        let (window, fixed, query, expanded) = &asked;
        let offered = offer(deps, &tools, (*window, *fixed), query, channel, expanded);
        Self { asked, tools, offered }
    }
}

impl TaskActor {
    pub fn new(
        id: u64,
        input: super::door::Admitted,
        level: Option<Level>,
        deps: Arc<TaskDeps>,
        scheduler: impl Into<SchedulerLink>,
    ) -> Self {
        // Through the door: its secrets are aliases already (`door::admit`).
        let mut input = input.into_inner();
        input.reply.task_id = id;
        let core = TurnCore::new(id, TurnInput::from(&input));
        // A guest's words are untrusted from the start.
        let untrusted = (!input.principal.is_owner()).then(|| format!("the input came from {}", input.principal.name));
        // A conversation goes on with the tools it used ("now the next one"), whose
        // words the new input need not repeat.
        let owners_turn = input.principal.is_owner() && !input.is_consolidation();
        if owners_turn && deps.channels.deliver(&input.channel).is_some() {
            deps.owner_route.set(super::notice::Route {
                channel: input.channel.clone(),
                meta: input.payload.to_value(),
            });
        }
        let expanded = if owners_turn {
            deps.recent_tools.lock().owners()
        } else {
            Default::default()
        };
        let span = crate::trace_span!(
            "turn",
            task = id,
            channel = %input.channel,
            guest = !input.principal.is_owner()
        );
        Self {
            id,
            input,
            level,
            deps,
            scheduler: scheduler.into(),
            core,
            cancel: None,
            media: Arc::default(),
            expanded,
            reached: owners_turn.then(Default::default),
            settings: None,
            error: None,
            embed_after_reply: false,
            untrusted: Arc::new(parking_lot::Mutex::new(untrusted)),
            span,
            counted: None,
        }
    }

    /// Remembers the owners the model reached for: the argument of `get_plugin_tools`,
    /// and the owner of any tool it called by name (offered or from the catalogue).
    fn note_expansions(&mut self, calls: &[crate::llm::types::ToolCall]) {
        let tools = self.core.tools();
        for c in calls {
            let Some(o) =
                super::toolset::reached_owner(&c.name, &c.arguments, |n| tools.get(n).map(|t| t.spec.plugin.clone()))
            else {
                continue;
            };
            if let Some(r) = &mut self.reached {
                r.insert(o.clone());
            }
            if self.expanded.insert(o.clone()) {
                tracing::debug!(task = self.id, owner = %o, "tools of this owner offered from the next step");
            }
        }
    }

    /// The settings this task runs under, read once when it starts: one turn is built
    /// under one set of settings (a change applies from the next turn on), and the
    /// prompt texts are not copied on every event of the turn.
    fn settings(&mut self) -> Arc<AgentSettings> {
        self.settings
            .get_or_insert_with(|| {
                let mut s = self.deps.settings.read().clone();
                s.prompt.skills = self.deps.skills_index.read().clone();
                if let Some(persona) = &self.deps.persona {
                    s.prompt.persona = persona.text();
                    // Only the main agent asks: a helper or resident talks to no one.
                    s.prompt.first_run = s.prompt.persona.is_none()
                        && self.deps.agent.is_empty()
                        && s.prompt.personal_prompt.trim().is_empty();
                }
                Arc::new(s)
            })
            .clone()
    }

    /// Feeds one event to the core and executes what it answers.
    fn feed(&mut self, event: Event, ctx: &mut HostContext<Self>) {
        let s = self.settings();
        let firewall = self.deps.firewall.config();
        let env = Env {
            gate: &firewall.gate,
            prompt: &s.prompt,
            channels: &self.deps.channels,
            limits: Limits {
                max_tool_turns: s.max_tool_turns,
                max_tokens: s.max_tokens,
                temperature: s.temperature,
                max_context_size: s.max_context_size,
                window: s.window,
                media_reserve: media_reserve(&self.deps, s.window),
                outage_wait_ms: s.outage_wait.as_millis() as i64,
                max_turn_ms: s.max_turn_time.as_millis() as i64,
            },
            now_ms: now_ms(),
            mono_ms: mono_ms(),
        };
        let cmds = self.core.handle(event, &env);
        for cmd in cmds {
            self.exec(cmd, &s, ctx);
        }
    }

    /// Runs `fut` on the actor and feeds its result, mapped by `to_event`, to the core.
    fn await_event<F, T>(&self, ctx: &mut HostContext<Self>, fut: F, to_event: fn(T) -> Event)
    where
        F: std::future::Future<Output = T> + 'static,
        T: 'static,
    {
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(fut).map(move |t, host, ctx| host.inner().feed(to_event(t), ctx)),
        );
    }

    fn exec(&mut self, cmd: Cmd, s: &AgentSettings, ctx: &mut HostContext<Self>) {
        match cmd {
            Cmd::RunStage(stage, sctx) => {
                let stages = self.deps.stages.clone();
                let fut = async move { (stage, run_stage(&stages, stage, sctx).await) };
                self.await_event(ctx, fut, |(stage, out)| Event::stage(stage, out));
            }
            Cmd::AfterOutput(sctx) => {
                let stages = self.deps.stages.clone();
                actix::spawn(async move {
                    run_stage(&stages, Stage::AfterOutput, sctx).await;
                });
            }
            Cmd::ReadTimeline {
                query,
                window,
                fixed,
                record,
                memory,
            } => {
                let guest = (!self.input.principal.is_owner()).then(|| self.input.principal.name.clone());
                let fut = recall(
                    self.deps.clone(),
                    (window, fixed, query, self.expanded.clone()),
                    self.input.channel.clone(),
                    record,
                    Tiers::of(guest, memory),
                )
                .instrument(crate::trace_span!(parent: &self.span, "recall"));
                let started = std::time::Instant::now();
                ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(fut).map(
                    move |(r, recorded, counted), host, ctx| {
                        let me = host.inner();
                        me.counted = Some(counted);
                        me.deps.bus.publish(crate::bus::Event::Recalled {
                            task_id: me.id,
                            ms: started.elapsed().as_secs_f64() * 1e3,
                        });
                        me.feed(Event::Timeline(r.render()), ctx);
                        if let Some(res) = recorded {
                            me.feed(Event::InputRecorded(res), ctx);
                        }
                    },
                ));
            }
            Cmd::ConsumeCancel => {
                let fut = self.scheduler.consume_cancel(self.id);
                self.await_event(ctx, fut, |res| Event::StopBudget(matches!(res, Ok(true))));
            }
            Cmd::AskSafePoint { consolidation } => {
                let fut = self.scheduler.safe_point(SafePoint {
                    task: self.id,
                    consolidation,
                });
                self.await_event(ctx, fut, Event::SafePoint);
            }
            Cmd::Park => tracing::debug!(task = self.id, "parked until the scheduler resumes it"),
            Cmd::Gather {
                tools_query,
                media_query,
                window,
                fixed,
            } => {
                let deps = self.deps.clone();
                let (media, prepared) = (self.deps.media.clone(), self.media.clone());
                let channel = self.input.channel.clone();
                let asked = (window, fixed, tools_query, self.expanded.clone());
                // What recall counted, when this call asks the same (the turn's first).
                let counted = self.counted.take().filter(|c| c.asked == asked);
                if counted.is_none() {
                    tracing::debug!(
                        task = self.id,
                        "gather: the tools are fetched and offered for this call"
                    );
                }
                let fut = async move {
                    let Offering { tools, offered, .. } = match counted {
                        Some(c) => c,
                        None => Offering::make(&deps, &channel, asked).await,
                    };
                    let recalled = match &media {
                        Some(m) => crate::memory::media::parts::recall(m, &prepared, &media_query).await,
                        None => Vec::new(),
                    };
                    Gathered {
                        tools,
                        offered,
                        recalled,
                    }
                };
                self.await_event(ctx, fut, Event::Gathered);
            }
            Cmd::CallLlm(request) => self.call_llm(request, ctx),
            Cmd::CancelLlm => {
                if let Some(t) = &self.cancel {
                    t.cancel();
                }
            }
            Cmd::TakeStop => {
                let fut = self.scheduler.take_stop(self.id);
                self.await_event(ctx, fut, |res| Event::StopTaken(matches!(res, Ok(true))));
            }
            Cmd::RunTools(calls) => {
                self.note_expansions(&calls);
                let runner = ToolRunner {
                    stages: self.deps.stages.clone(),
                    tools: self.core.tools().clone(),
                    channels: self.deps.channels.clone(),
                    bus: self.deps.bus.clone(),
                    task_id: self.id,
                    source: self.input.source.clone(),
                    channel: self.input.channel.clone(),
                    timeout: s.tool_timeout,
                    firewall: self.deps.firewall.clone(),
                    principal: self.input.principal.clone(),
                    agent: self.deps.agent.clone(),
                    meta: self.input.payload.to_value(),
                    untrusted: self.untrusted.clone(),
                    span: self.span.clone(),
                };
                // A running tool is never interrupted: no safe point until the batch is done.
                let fut = async move { runner.run_batch(&calls).await };
                self.await_event(ctx, fut, Event::ToolsDone);
            }
            Cmd::Prune {
                context_tokens,
                max_context_size,
            } => {
                let context = self.deps.context.clone();
                let fut = async move {
                    context
                        .send(crate::memory::context::actor::PruneContext {
                            query: String::new(),
                            context_tokens,
                            max_context_size,
                        })
                        .await
                };
                self.await_event(ctx, fut, |res| {
                    Event::Pruned(match res {
                        Ok(Ok(n)) => Ok(n),
                        Ok(Err(e)) => Err(PruneFailure::Store(e.to_string())),
                        Err(e) => Err(PruneFailure::Unavailable(e)),
                    })
                });
            }
            Cmd::SubmitNotice { source, text } => {
                let notice = Input::kernel_interrupt(source, &text);
                let sent = super::door::Admitted::own(notice)
                    .map_err(|r| r.to_string())
                    .and_then(|n| self.scheduler.submit(n).map_err(|e| e.to_string()));
                if let Err(e) = sent {
                    tracing::warn!(task = self.id, "kernel notice not delivered: {e}");
                }
            }
            Cmd::Publish(event) => self.deps.bus.publish(event),
            Cmd::LogText(line) => {
                let _ = self.deps.textlog.do_send(crate::memory::textlog::LogText(line));
            }
            Cmd::Commit { event, prune_window } => {
                if prune_window {
                    let (context, query, max) = (
                        self.deps.context.clone(),
                        event.input.clone(),
                        self.settings().max_context_size,
                    );
                    actix::spawn(async move {
                        let pruned = context
                            .send(crate::memory::context::actor::PruneContext {
                                query,
                                // 0: by count only, `max_context_size − 1` (the seed's rule).
                                context_tokens: 0,
                                max_context_size: max,
                            })
                            .await;
                        if let Ok(Ok(n)) = pruned
                            && n > 0
                        {
                            tracing::info!(
                                archived = n,
                                "memory pass (input): the window was pruned against the input"
                            );
                        }
                    });
                }
                let context = self.deps.context.clone();
                // The turn's rows (its input and this reply) get their vectors now, not
                // at the embedder's next poll: a follow-up question a moment later
                // finds them on the dense side too. Poked once the reply is out: ONNX
                // takes both cores for a few milliseconds, and the reply must not wait.
                self.embed_after_reply = self.deps.embedder.as_ref().is_some_and(|e| e.embeds_rows());
                let fut = async move { context.send(AppendEvent(event)).await };
                self.await_event(ctx, fut, |res| {
                    Event::Committed(match res {
                        Ok(Ok(_)) => Ok(()),
                        Ok(Err(e)) => Err(NotRecorded::Refused(e.to_string())),
                        Err(e) => Err(NotRecorded::Unanswered(e)),
                    })
                });
            }
            Cmd::Reply(reply) => {
                if let Some(reached) = self.reached.take() {
                    self.deps.recent_tools.lock().push(reached);
                }
                self.error.clone_from(&reply.error);
                self.input.reply.send(reply);
                if std::mem::take(&mut self.embed_after_reply)
                    && let Some(e) = &self.deps.embedder
                {
                    let _ = e.addr.do_send(crate::memory::embed::actor::Fill);
                }
            }
            Cmd::Backoff(wait) => {
                self.await_event(ctx, tokio::time::sleep(wait), |()| Event::BackoffOver);
            }
            Cmd::Finish(end) => {
                let _ = self.scheduler.finished(Finished {
                    task: self.id,
                    state: end.into(),
                    error: self.error.take(),
                });
                ctx.stop();
            }
        }
    }

    /// What this task's model calls are for, in the usage ledger.
    fn purpose(&self) -> crate::usage::Purpose {
        purpose_of(&self.input, &self.deps.agent)
    }

    /// Sends the core's request as it is, with the bytes of the images it names in
    /// place of their placeholders, streaming its deltas.
    fn call_llm(&mut self, mut request: crate::llm::CompletionRequest, ctx: &mut HostContext<Self>) {
        let token = CancellationToken::new();
        self.cancel = Some(token.clone());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<crate::llm::stream::Delta>();
        let bus = self.deps.bus.clone();
        let (task_id, channel) = (self.id, self.input.channel.clone());
        // What this call streamed so far, as published: a stopped call's answer keeps it.
        let shown = std::sync::Arc::new(parking_lot::Mutex::new(String::new()));
        let shown_by_forwarder = shown.clone();
        actix::spawn(async move {
            while let Some(d) = rx.recv().await {
                shown_by_forwarder.lock().push_str(&d.content);
                bus.publish(crate::bus::Event::StreamDelta {
                    task_id,
                    channel: channel.clone(),
                    content: d.content,
                    reasoning: Some(d.reasoning),
                    reset: false,
                });
            }
        });
        let llm = self.deps.llm.clone();
        let (media, prepared) = (self.deps.media.clone(), self.media.clone());
        let purpose = self.purpose();
        let span = crate::trace_span!(
            parent: &self.span,
            "llm_call",
            purpose = purpose.kind.as_str(),
            source = tracing::field::Empty,
            model = tracing::field::Empty,
            input_tokens = tracing::field::Empty,
            output_tokens = tracing::field::Empty,
            error = tracing::field::Empty
        );
        let fut = async move {
            if let Some(media) = media {
                crate::memory::media::parts::fill(&media, &prepared, &mut request).await;
            }
            let msg = Complete {
                request,
                purpose,
                stream: true,
                deltas: Some(tx),
                cancel: token,
            };
            let result = match llm.send(msg).await {
                Ok(Ok(c)) => Ok(c),
                Ok(Err(crate::llm::provider::LlmError::Cancelled)) => Err(LlmFailure::Cancelled {
                    partial: std::mem::take(&mut *shown.lock()),
                }),
                Ok(Err(e)) => Err(LlmFailure::from(e)),
                Err(e) => Err(LlmFailure::Other(e.to_string())),
            };
            let span = tracing::Span::current();
            match &result {
                Ok(c) => {
                    span.record("source", c.source.as_str());
                    span.record("model", c.model.as_str());
                    span.record("input_tokens", c.response.usage.prompt_tokens);
                    span.record("output_tokens", c.response.usage.completion_tokens);
                }
                Err(e) => {
                    span.record("error", tracing::field::debug(e));
                }
            }
            result
        }
        .instrument(span);
        ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(fut).map(|result, host, ctx| {
            let me = host.inner();
            me.cancel = None;
            me.feed(Event::Llm { result }, ctx);
        }));
    }
}

/// What the model calls of a task on `input`, run by `agent` (`""`: the main agent),
/// are for in the usage ledger: a heartbeat's consolidation, a resident's or a
/// helper's work, a guest's turn (named by its principal) or the owner's.
fn purpose_of(input: &Input, agent: &str) -> crate::usage::Purpose {
    use crate::usage::{Kind, Purpose};
    let guest = !input.principal.is_owner();
    let kind = if input.is_consolidation() {
        Kind::Heartbeat
    } else if agent.starts_with(super::subagents::AGENT_PREFIX) {
        Kind::Resident
    } else if !agent.is_empty() {
        Kind::SubAgent
    } else if guest {
        Kind::GuestTurn
    } else {
        Kind::OwnerTurn
    };
    Purpose {
        kind,
        principal: if guest {
            input.principal.name.clone()
        } else {
            String::new()
        },
    }
}

/// How long recall waits for the graph and the knowledge base (a busy tier — a big
/// merge round — skips one turn rather than delaying it).
const TIER_WAIT: std::time::Duration = std::time::Duration::from_millis(250);
/// Facts and knowledge items a tier offers per turn (before the budget cut).
const TIER_ITEMS: usize = 8;

/// The model's tool list — the registry's tools, then the channels' send tools — and the
/// tokens its schemas take, rebuilt only when the registry or the channels changed
/// ([`OfferCache`]).
pub fn tool_list(deps: &TaskDeps, registry: &crate::stages::ToolRegistry) -> (crate::llm::types::ToolList, usize) {
    let mut slot = deps.tool_list.lock();
    cache_for(deps, registry, &mut slot).list()
}

/// The offer's memo of this registry snapshot and channel set, rebuilt when either
/// changed (both are read on every turn, and change when a plugin comes or goes).
fn cache_for<'a>(
    deps: &TaskDeps,
    registry: &crate::stages::ToolRegistry,
    slot: &'a mut Option<OfferCache>,
) -> &'a mut OfferCache {
    let defs = registry.shared_defs();
    let channels = deps.channels.tools_key();
    if !slot.as_ref().is_some_and(|c| c.is_of(defs, &channels)) {
        *slot = Some(OfferCache::build(
            defs,
            deps.hidden_tools,
            channels,
            deps.channels.tools(),
            |name| {
                registry
                    .get(name)
                    .map(|t| (t.spec.plugin.clone(), t.spec.keywords.join(" ")))
            },
        ));
    }
    slot.as_mut().expect("filled above")
}

/// The tokens a turn keeps for the images the media memory may add to its requests
/// (`media::parts::recall_reserve`; none while no image can be recalled).
fn media_reserve(deps: &TaskDeps, window: usize) -> usize {
    deps.media.as_ref().filter(|m| m.can_recall()).map_or(0, |m| {
        crate::memory::media::parts::recall_reserve(m.config.read().recall_k, window)
    })
}

/// What a turn's requests may offer: out of `window` with `fixed` taken, for the input
/// `query` on `channel`, with the owners `expanded` in this turn (the choice is
/// `toolset`'s, remembered by [`OfferCache`]; the memo is locked once).
pub fn offer(
    deps: &TaskDeps,
    registry: &crate::stages::ToolRegistry,
    (window, fixed): (usize, usize),
    query: &str,
    channel: &str,
    expanded: &std::collections::BTreeSet<String>,
) -> Offered {
    use super::toolset::{Room, always_offered};
    let available = Budget::new(window, fixed).target.saturating_sub(fixed);
    let room = Room::of(available, deps.settings.read().tool_tokens);
    // An asynchronous channel is answered through its send tool: that one stays.
    let send = deps
        .channels
        .get(channel)
        .filter(|c| !c.sync)
        .map(|c| format!("{}{}", super::channels::SEND_PREFIX, c.name));
    let always = |n: &str| always_offered(n, send.as_deref());
    let mut slot = deps.tool_list.lock();
    cache_for(deps, registry, &mut slot).offer(&Ask {
        available,
        room,
        query,
        channel,
        always: &always,
        expanded,
    })
}

/// Per-turn recall for the prefix (`memory::recall`): every tier is asked at once —
/// the graph's facts and index line, the knowledge items, the context actor (its
/// events) and the documents actor (their passages) — beside the budget of §5.8 (once
/// the tool schemas are counted) and the query's embedding. The context and document
/// tiers get the embedding as a pending value: they rank BM25 while the embedder works
/// and fuse when it answers, so the query's vector overlaps the lexical work instead of
/// preceding it. The tiers are merged and cut to the budget here (`recall::assemble`).
/// Why all at once: the memory actors share one thread, and messages that arrive
/// together are handled in one wake-up of it, not one each.
///
/// With `record` (the input of a prepare phase), the context tier commits it in the same
/// round trip, after the read; its answer is the second value ([`NotRecorded`] says
/// whether the store refused it or the tier did not answer). `ask` says which tiers
/// are asked ([`Tiers::of`]). `asked` is the offer's question — `(window, fixed,
/// query, expanded owners)` — and the third value its answer, the tools and the offer
/// the budget counted: the turn's first request sends that offer, not one made again.
async fn recall(
    deps: Arc<TaskDeps>,
    asked: Asked,
    channel: String,
    record: Option<crate::memory::context::Event>,
    ask: Tiers,
) -> (Recollection, Option<Recorded>, Offering) {
    let (window, fixed, query) = (asked.0, asked.1, asked.2.clone());
    let recording = record.is_some();
    let relevance = ask.relevance;
    let qv = if ask.by_meaning {
        crate::memory::embed::actor::query_vector_soon(
            deps.embedder.as_ref(),
            &query,
            crate::memory::context::actor::QUERY_EMBED_WAIT,
        )
    } else {
        None
    };
    let dense = qv.is_some();
    // The tiers' answers are joined where the tiers live (`recall_thread`): their four
    // replies then wake that thread, which is running them anyway, and the turn's
    // thread is woken once, by the joined answer, instead of once per tier.
    let answered = ask_tiers(deps.clone(), query.clone(), qv, record, ask);
    let tiers = async {
        match &deps.recall_thread {
            Some(thread) => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                thread.spawn(async move {
                    let _ = tx.send(answered.await);
                });
                // Not run: the thread is gone (shutdown), and with it the tiers.
                rx.await.unwrap_or_else(|_| {
                    Answers::none(crate::addr::SendError::Exited {
                        id: deps.context.id().to_owned(),
                        reason: "the memory thread has stopped".into(),
                    })
                })
            }
            None => answered.await,
        }
    };
    // The turn's first offer: what its first request sends (the next ones may offer
    // more, within the expansion room the offer keeps free inside the same budget).
    let tools = Offering::make(&deps, &channel, asked);
    let (offering, answers) = futures_util::join!(tools, tiers);
    let tool_tokens = offering.offered.tokens;
    let budget = Budget::with_tools(window, fixed, tool_tokens);
    tracing::debug!(?budget, tool_tokens, dense, "prompt budget");
    let upkeep = channel == super::input::CONSOLIDATION_CHANNEL;
    let Joined {
        recollection,
        recorded,
        read,
    } = super::recollect::join(&query, answers, &budget, recording, upkeep);
    // What the window itself ranked by relevance goes too: the recency window alone.
    let recollection = if relevance {
        recollection
    } else {
        recollection.window_only()
    };
    // Batched by the tier, off this path.
    if !read.is_empty() {
        let _ = deps.documents.do_send(crate::memory::documents::RecordReads(read));
    }
    (recollection, recorded, offering)
}

/// Asks the tiers `ask` names at once and joins their answers (graph and knowledge
/// within [`TIER_WAIT`]); where it runs is the caller's choice (see [`recall`]).
async fn ask_tiers(
    deps: Arc<TaskDeps>,
    query: String,
    qv: Option<crate::memory::embed::actor::PendingVector>,
    record: Option<crate::memory::context::Event>,
    ask: Tiers,
) -> Answers {
    // Delivered now (`request`), so the tiers work while the others are asked.
    let window = deps.context.request(Recall {
        query: query.clone(),
        qv: qv.clone(),
        record,
        only_principal: ask.window_of,
    });
    let passages = ask.owners_memory.then(|| {
        deps.documents.request(crate::memory::documents::RecallPassages {
            query: query.clone(),
            qv,
        })
    });
    let graph = deps.graph.as_ref().filter(|_| ask.owners_memory).map(|g| {
        g.request(crate::memory::graph::actor::RecallFacts {
            input: query.clone(),
            limit: TIER_ITEMS,
        })
    });
    let knowledge = deps.knowledge.as_ref().filter(|_| ask.relevance).map(|kb| {
        kb.request(crate::memory::knowledge::RecallKnowledge {
            input: query,
            limit: TIER_ITEMS,
            public_only: ask.public_knowledge_only,
        })
    });
    let graph = async {
        let Some(ask) = graph else {
            return (Vec::new(), String::new());
        };
        match tokio::time::timeout(TIER_WAIT, ask).await {
            Ok(Ok(r)) => (r.facts, r.index),
            Ok(Err(_)) => (Vec::new(), String::new()),
            Err(_) => {
                tracing::debug!("graph recall skipped: the graph did not answer within {TIER_WAIT:?}");
                (Vec::new(), String::new())
            }
        }
    };
    let knowledge = async {
        let Some(ask) = knowledge else {
            return Vec::new();
        };
        match tokio::time::timeout(TIER_WAIT, ask).await {
            Ok(Ok(items)) => items,
            _ => {
                tracing::debug!("knowledge recall skipped: no answer within {TIER_WAIT:?}");
                Vec::new()
            }
        }
    };
    let passages = async {
        match passages {
            Some(ask) => Some(ask.await),
            None => None,
        }
    };
    let ((facts, index), knowledge, window, passages) = futures_util::join!(graph, knowledge, window, passages);
    Answers {
        facts,
        index,
        knowledge,
        window: Some(window),
        passages,
    }
}

impl KernelActor for TaskActor {
    const KIND: &'static str = "task";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        tracing::debug!(task = self.id, source = %self.input.source, level = ?self.level, "task started");
        self.feed(Event::Started, ctx);
    }
}

impl crate::host::Handles<CancelLlm> for TaskActor {
    type Reply = ();
    fn handle(&mut self, _: CancelLlm, ctx: &mut HostContext<Self>) {
        self.feed(Event::Cancel, ctx);
    }
}

impl crate::host::Handles<Resume> for TaskActor {
    type Reply = ();
    fn handle(&mut self, _: Resume, ctx: &mut HostContext<Self>) {
        self.feed(Event::Resume, ctx);
    }
}

/// Milliseconds on the process's monotonic clock (origin: its first call), for the
/// turn's own time limit (`turn::Env::mono_ms`).
fn mono_ms() -> i64 {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(std::time::Instant::now).elapsed().as_millis() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::Kind;

    #[test]
    fn a_tasks_calls_are_accounted_to_who_ran_it_and_for_whom() {
        let owner = Input::text("http", "hi");
        let mut guest = Input::text("qq/dev", "hi");
        guest.principal = crate::firewall::Principal::plugin_guest("qq");
        let mut beat = Input::text("kernel", "consolidate");
        beat.channel = super::super::input::CONSOLIDATION_CHANNEL.into();
        let resident = format!("{}w", super::super::subagents::AGENT_PREFIX);
        let cases = [
            (&owner, "", Kind::OwnerTurn),
            (&guest, "", Kind::GuestTurn),
            (&beat, "", Kind::Heartbeat),
            (&owner, resident.as_str(), Kind::Resident),
            (&owner, "child_3", Kind::SubAgent),
        ];
        for (input, agent, kind) in cases {
            assert_eq!(purpose_of(input, agent).kind, kind, "{agent:?} {}", input.source);
        }
        assert_eq!(
            purpose_of(&guest, "").principal,
            guest.principal.name,
            "a guest is named"
        );
        assert_eq!(purpose_of(&owner, "").principal, "", "the owner is not");
    }
}
