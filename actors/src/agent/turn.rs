//! The turn of one task as a plain state machine (kernel spec §1.9–§1.15, §3, §5.9).
//!
//! [`TurnCore`] holds every rule of a turn: the prefix and its rebuild on resume (the
//! tail kept), safe points between steps, continuation placeholders, the tool-turn cap,
//! overflow recovery, stop versus preemption, one assistant message per tool batch,
//! usage accumulation, what an interrupt / consolidation / no-memory input records, and
//! that a task finishes or fails exactly once. It knows nothing of actix, mailboxes or
//! clocks (the shell passes `now_ms` in [`Env`]).
//!
//! The request an LLM call sends is the core's to the last field: the shell gathers
//! what only it can reach ([`Cmd::Gather`]: the tools registered by now, the offer made
//! of them, the images the media memory recalls) and the core composes the request
//! from that (`TurnCore::compose`: secrets masked, recalled images within their
//! reserve, the catalogue of tools not offered, the tools offered). The shell then only
//! puts the bytes of the images it names in place of their placeholders.
//!
//! The task actor ([`super::task::TaskActor`]) feeds it [`Event`]s and executes the
//! [`Cmd`]s it returns: each command that waits for something becomes one future whose
//! result is fed back as the next event. At most one such command is outstanding at a
//! time, so the core is always in exactly one `Wait` state; an event that does not
//! answer it (a stale or duplicated one) is ignored.

use serde_json::{Value, json};

use super::budget::Budget;
use super::channels::{Channels, parse_send_tool};
use super::input::Reply;
use super::offer::Offered;
use super::overflow::{self, Guard, Verdict};
use super::prompt::{self, Origin, PromptSettings};
use super::recollect::NotRecorded;
use super::tools_exec::Outcome;
use crate::addr::SendError;
use crate::bus::{ChainToolCall, ChainUsage, Event as BusEvent};
use crate::firewall::CredentialGate;
use crate::i18n::Msg;
use crate::llm::provider::{Completion, LlmError};
use crate::llm::tokens;
use crate::llm::types::{WireFunction, WireToolCall};
use crate::llm::{CompletionRequest, Message, ToolCall, Usage};
use crate::memory::context::Event as MemoryEvent;
use crate::memory::context::ToolOutput;
use crate::memory::media::store::MediaMeta;
use crate::memory::textlog::TextEvent;
use crate::stages::{Stage, StageContext, StageToolCall, ToolRegistry};

/// What the input is, as far as the turn cares (the reply path stays in the shell).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnInput {
    pub source: String,
    pub channel: String,
    pub text: String,
    /// An interrupt: its input is not recorded as a user event (spec §1.14).
    pub interrupt: bool,
    /// The interrupt's level (`None` for queued input), kept in the text log.
    pub level: Option<crate::scheduler::Level>,
    /// Kernel consolidation (`_consolidation_`): neither input nor reply is recorded.
    pub consolidation: bool,
    /// Keep this turn out of the text log.
    pub no_memory: bool,
    /// Images the input carries (blocks of the media memory), put on its message.
    pub media: Vec<crate::memory::media::parts::MediaRef>,
    /// The principal's name when not the owner (`onebot.guest`); empty for the owner.
    /// Recorded on the turn's events and scoping its recall.
    pub principal: String,
    /// What memory keeps of the input (its channel's cleaner applied at admission;
    /// `None`: the text as it is) and whether it recalls ([`super::inputdef::Policy`]).
    pub memory: super::inputdef::Policy,
    /// An acknowledged input nobody waits on (the inbox holds it): its turn waits out
    /// an LLM outage ([`Limits::outage_wait_ms`]) instead of failing at once. A
    /// synchronous caller is there to see the error and resend.
    pub durable: bool,
}

impl TurnInput {
    /// The input as memory keeps it (the model reads [`Self::text`]).
    pub fn memory_text(&self) -> &str {
        self.memory.memory_text.as_deref().unwrap_or(&self.text)
    }
}

impl From<&super::input::Input> for TurnInput {
    fn from(i: &super::input::Input) -> Self {
        Self {
            source: i.source.clone(),
            channel: i.channel.clone(),
            text: i.text.clone(),
            interrupt: i.is_interrupt(),
            level: i.level,
            consolidation: i.is_consolidation(),
            no_memory: i.no_memory,
            principal: if i.principal.is_owner() {
                String::new()
            } else {
                i.principal.name.clone()
            },
            media: i.payload.media.clone(),
            memory: i.payload.policy(),
            durable: !i.kernel && !i.reply.is_waiting(),
        }
    }
}

/// The limits a turn reads; taken afresh with every event, so a settings change
/// applies from the next step on (as the settings store promises).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// 0 = unlimited.
    pub max_tool_turns: u32,
    pub max_tokens: u32,
    pub temperature: f64,
    /// `core.agent.max_context_size`, handed to the prune of an overflow recovery.
    pub max_context_size: usize,
    /// The context window (tokens) of the source the request will go to first
    /// (`llm::window`): the prompt's budget and the overflow check are cut to it.
    pub window: usize,
    /// Tokens kept for the images the media memory may add to a request (what
    /// `TurnCore::compose` adds of [`Gathered::recalled`] fits this):
    /// [`crate::memory::media::parts::recall_reserve`] while some image can be
    /// recalled, else 0.
    pub media_reserve: usize,
    /// How long a durable input's turn waits for an LLM source while none answers
    /// (`core.agent.outage_wait`), counted from the first failure.
    pub outage_wait_ms: i64,
    /// Longest a turn may work (`core.agent.max_turn_time`; 0 = no limit), outage
    /// waits not counted: checked before each LLM call.
    pub max_turn_ms: i64,
}

/// What the core reads with every event (the current settings, the channels and the
/// time), so it owns no clock and no settings store.
pub struct Env<'a> {
    pub prompt: &'a PromptSettings,
    pub channels: &'a Channels,
    pub limits: Limits,
    pub now_ms: i64,
    /// Real milliseconds on a monotonic clock (any origin): what the turn's own time
    /// limit counts, so a virtual clock moved forward by days ends no turn.
    pub mono_ms: i64,
    /// The credential gate in force: whatever stages injected or tools returned, a
    /// request shows the model a secret's `@{alias}` only.
    pub gate: &'a CredentialGate,
}

/// What the shell gathered for one LLM call ([`Cmd::Gather`]); the empty value is what
/// a daemon without plugins, channels' send tools or images answers.
#[derive(Default)]
pub struct Gathered {
    /// The tools registered by now, less the agent's refused ones: what the call's tool
    /// step may run (a tool registered since the last round is offered from this round).
    pub tools: ToolRegistry,
    /// What of them the request offers (`offer::OfferCache`'s choice).
    pub offered: Offered,
    /// The images the media memory recalled for the input, best first.
    pub recalled: Vec<MediaMeta>,
}

/// Why an LLM call came back without a completion, as the turn distinguishes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LlmFailure {
    /// Cancelled by a preemption or a stop; `partial`: the text the call had streamed
    /// (what the owner saw), which a stop keeps as the answer.
    Cancelled { partial: String },
    /// The vendor said the prompt does not fit (the text is the error's own message).
    ContextFull(String),
    /// No source could answer now (every one failed or is paused, or none is up
    /// yet): a durable input waits and tries again. `retry_in_s`: when the first
    /// paused source is available again, when known.
    Unavailable { error: String, retry_in_s: Option<u64> },
    /// The owner's budget refused the call (which limit, when it resets): the task
    /// fails with it, and its caller is told it is a limit, not a failure.
    OverBudget(String),
    /// Anything else: the task fails with this message.
    Other(String),
}

impl From<LlmError> for LlmFailure {
    fn from(e: LlmError) -> Self {
        match e {
            LlmError::Cancelled => Self::Cancelled { partial: String::new() },
            e @ LlmError::ContextFull(_) => Self::ContextFull(e.to_string()),
            LlmError::AllPaused { wait_s, .. } => Self::Unavailable {
                retry_in_s: Some(wait_s),
                error: e.to_string(),
            },
            e @ (LlmError::AllFailed(_) | LlmError::NoSource(_)) => Self::Unavailable {
                error: e.to_string(),
                retry_in_s: None,
            },
            // The owner's limit, not an outage: waiting would only spend tomorrow's.
            e @ LlmError::Budget(_) => Self::OverBudget(e.to_string()),
        }
    }
}

/// Why a task failed. The texts are what the caller reads after [`Msg::TaskFailed`]'s prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TurnError {
    #[error("the scheduler is unavailable: {0}")]
    SchedulerUnavailable(SendError),
    #[error("cannot record the input in memory: {0}")]
    RecordInput(String),
    #[error("the context store is unavailable: {0}")]
    StoreUnavailable(SendError),
    /// The overflow budget is spent (the guard's message names the setting to lower).
    #[error("{0}")]
    Overflow(String),
    /// The input alone (with the system prompt) is over the window's target: refused
    /// before it was recorded ([`Msg::InputOverWindow`]).
    #[error("{0}")]
    InputOverWindow(String),
    /// The budget is spent and the vendor said "context full" once more.
    #[error("{guard} ({vendor})")]
    OverflowAtVendor { guard: String, vendor: String },
    /// The LLM call failed (every source, or the LLM actor itself).
    #[error("{0}")]
    Llm(String),
    /// The owner's budget refused the call.
    #[error("{0}")]
    OverBudget(String),
    /// The turn worked longer than `core.agent.max_turn_time`.
    #[error(
        "the turn ran longer than {limit_s} s (core.agent.max_turn_time) and was ended before its next step; ask again in smaller steps, or raise the setting"
    )]
    TooLong { limit_s: i64 },
}

/// Why a prune did not report a count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PruneFailure {
    /// The store refused it: the recovery goes on as if nothing moved.
    Store(String),
    /// The context actor did not answer: the task fails.
    Unavailable(SendError),
}

/// How a task ended, as the scheduler shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Done,
    Cancelled,
    Failed,
}

impl From<End> for crate::bus::TaskState {
    fn from(e: End) -> Self {
        match e {
            End::Done => Self::Done,
            End::Cancelled => Self::Cancelled,
            End::Failed => Self::Failed,
        }
    }
}

/// What the shell reports to the core.
pub enum Event {
    /// The actor runs: start the prepare phase.
    Started,
    /// The answer of [`Cmd::RunStage`] for `on_input`.
    OnInput(StageContext),
    /// The answer of [`Cmd::ReadTimeline`]: the recalled memory and the recency
    /// timeline, rendered (`memory::recall::Recollection::render`).
    Timeline(crate::memory::recall::MemoryText),
    /// The answer of [`Cmd::ReadTimeline`]'s `record` (the store refused it, or the
    /// context actor is unavailable: [`super::recollect::NotRecorded`]).
    InputRecorded(super::recollect::Recorded),
    /// The answer of [`Cmd::RunStage`] for `pre_action`.
    PreAction(StageContext),
    /// The answer of [`Cmd::ConsumeCancel`]: was this input waiting when stop was pressed?
    StopBudget(bool),
    /// The answer of [`Cmd::AskSafePoint`]: `Ok(true)` = yield now.
    SafePoint(Result<bool, SendError>),
    /// The answer of [`Cmd::Gather`].
    Gathered(Gathered),
    /// The answer of [`Cmd::CallLlm`].
    Llm { result: Result<Completion, LlmFailure> },
    /// The answer of [`Cmd::RunStage`] for `post_action`.
    PostAction(StageContext),
    /// The answer of [`Cmd::TakeStop`]: `true` = the cancel was a stop.
    StopTaken(bool),
    /// The answer of [`Cmd::RunTools`]: one outcome per call, in call order.
    ToolsDone(Vec<Outcome>),
    /// The answer of [`Cmd::Prune`]: how many events moved out of the window.
    Pruned(Result<usize, PruneFailure>),
    /// The answer of [`Cmd::RunStage`] for `before_output`.
    BeforeOutput(StageContext),
    /// The answer of [`Cmd::Commit`] (an error is logged; the reply goes out anyway).
    Committed(Result<(), NotRecorded>),
    /// The wait of [`Cmd::Backoff`] is over.
    BackoffOver,
    /// Preemption or stop: cancel the LLM call, or remember to before the next one.
    Cancel,
    /// The scheduler resumed this parked task.
    Resume,
}

impl std::fmt::Debug for Event {
    /// The variant only: stage contexts and tool registries are large and the log line
    /// that prints an event only needs to say which one it was.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            Event::Started => "Started",
            Event::OnInput(_) => "OnInput",
            Event::Timeline(_) => "Timeline",
            Event::InputRecorded(_) => "InputRecorded",
            Event::PreAction(_) => "PreAction",
            Event::StopBudget(_) => "StopBudget",
            Event::SafePoint(_) => "SafePoint",
            Event::Gathered(_) => "Gathered",
            Event::Llm { .. } => "Llm",
            Event::PostAction(_) => "PostAction",
            Event::StopTaken(_) => "StopTaken",
            Event::ToolsDone(_) => "ToolsDone",
            Event::Pruned(_) => "Pruned",
            Event::BeforeOutput(_) => "BeforeOutput",
            Event::Committed(_) => "Committed",
            Event::Cancel => "Cancel",
            Event::Resume => "Resume",
            Event::BackoffOver => "BackoffOver",
        };
        f.write_str(name)
    }
}

impl Event {
    /// The answer of [`Cmd::RunStage`] for `stage`.
    pub fn stage(stage: Stage, ctx: StageContext) -> Self {
        match stage {
            Stage::OnInput => Event::OnInput(ctx),
            Stage::PreAction => Event::PreAction(ctx),
            Stage::PostAction => Event::PostAction(ctx),
            _ => Event::BeforeOutput(ctx),
        }
    }
}

/// What the shell must do next.
#[derive(Debug)]
pub enum Cmd {
    /// Run a stage; answer with [`Event::stage`].
    RunStage(Stage, StageContext),
    /// Run `after_output` and do not wait for it.
    AfterOutput(StageContext),
    /// Recall memory for `query` (per-turn recall, `memory::recall`) within the budget
    /// of a `window`-token model of which `fixed` tokens (system prompt, source context,
    /// input) are taken — the shell adds the tool schemas' tokens, which only it knows
    /// — and answer [`Event::Timeline`]. With `record`, commit that event (the input)
    /// to the context window in the same round trip, once the memory is recalled (the
    /// input is not its own memory), and answer [`Event::InputRecorded`] right after.
    ///
    /// Without `memory` (a channel declared `recall_policy: none`), the answer is the
    /// recency window alone (`Recollection::window_only`).
    ReadTimeline {
        query: String,
        window: usize,
        fixed: usize,
        record: Option<MemoryEvent>,
        memory: bool,
    },
    /// Ask the scheduler's stop budget; answer [`Event::StopBudget`].
    ConsumeCancel,
    /// Ask the scheduler whether to yield; answer [`Event::SafePoint`].
    AskSafePoint { consolidation: bool },
    /// Yielded: nothing to do until [`Event::Resume`].
    Park,
    /// Gather what the next LLM call needs of the outside: the tools registered by now
    /// (less the refused), the offer of them for `tools_query` on the input's channel
    /// within a `window`-token model of which `fixed` tokens are taken, and the images
    /// the media memory recalls for `media_query` (none for an empty one); answer
    /// [`Event::Gathered`].
    Gather {
        tools_query: String,
        media_query: String,
        window: usize,
        fixed: usize,
    },
    /// Send this request as it is — the shell only puts the bytes of the images it
    /// names in place of their placeholders — streaming the deltas as `stream_delta`
    /// bus events; answer [`Event::Llm`].
    CallLlm(CompletionRequest),
    /// Cancel the in-flight LLM call (it then answers `LlmFailure::Cancelled`).
    CancelLlm,
    /// Ask the scheduler whether the cancel was a stop; answer [`Event::StopTaken`].
    TakeStop,
    /// Run one tool batch (never interrupted) with the tools of the latest request
    /// ([`TurnCore::tools`]); answer [`Event::ToolsDone`].
    RunTools(Vec<ToolCall>),
    /// Prune the context window into the document tier (query "": recency decides);
    /// answer [`Event::Pruned`].
    Prune {
        context_tokens: usize,
        max_context_size: usize,
    },
    /// Submit a kernel L4 notice (channel `kernel`) to the scheduler.
    SubmitNotice { source: &'static str, text: String },
    /// Publish on the bus.
    Publish(BusEvent),
    /// Append a line to the raw text log (not waited for).
    LogText(TextEvent),
    /// Commit the finished turn to the context window; answer [`Event::Committed`].
    /// With `prune_window` (a channel declared `context_policy: prune`), also prune the
    /// window against the turn's input, off the reply's path (not waited for).
    Commit { event: MemoryEvent, prune_window: bool },
    /// Answer the synchronous caller, if any.
    Reply(Reply),
    /// Tell the scheduler the task ended, and stop the actor.
    Finish(End),
    /// Wait this long, then answer [`Event::BackoffOver`] (an LLM outage).
    Backoff(std::time::Duration),
}

/// The step that runs after the next safe point.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Llm,
    Tools(Vec<ToolCall>),
}

/// Why the timeline is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rebuild {
    /// The prepare phase: the first prefix.
    Prepare,
    /// After a resume or an overflow recovery: new prefix, tail kept, then a safe point.
    Rebase,
}

/// What a [`Wait::Backoff`] tries again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// The LLM call (through a safe point).
    Llm,
    /// Recording the input (the prepare phase's read and commit).
    Record,
}

/// The one answer the core waits for.
#[derive(Debug)]
enum Wait {
    /// Not started yet.
    Start,
    OnInput,
    Timeline(Rebuild),
    InputRecorded,
    PreAction,
    StopBudget,
    SafePoint,
    /// Yielded; waiting for a resume.
    Parked,
    /// Waiting out an outage before trying again: of the LLM sources, or of the
    /// memory store the input must be recorded in (a full disk).
    Backoff(Retry),
    /// What the next LLM call needs of the outside (`Cmd::Gather`).
    Gather,
    Llm,
    /// post_action, with the completion's vendor and model.
    PostAction(Completion),
    /// `in_flight`: the cancelled call was sent (rather than one about to be sent);
    /// `partial`: what it had streamed.
    StopTaken {
        in_flight: bool,
        partial: String,
    },
    Tools {
        reply_only: bool,
    },
    Prune,
    BeforeOutput(End),
    Committed {
        text: String,
        end: End,
    },
    /// Finished or failed: nothing more happens.
    Done,
}

/// One task's turn.
pub struct TurnCore {
    id: u64,
    input: TurnInput,
    wait: Wait,
    /// The frame: messages so far, of which the first `prefix_len` are the prefix
    /// (rebuilt from committed state on resume and after an overflow recovery).
    msgs: Vec<Message>,
    prefix_len: usize,
    step: Step,
    /// Completed tool batches plus cancelled (preempted) calls: the tool-turn cap counts these.
    turn: u32,
    tools_used: Vec<String>,
    usage: Usage,
    /// Tokens of recalled memory the last prefix carried (told with the reply).
    memory_tokens: usize,
    last_text: String,
    reasoning: String,
    last_batch_reply_only: bool,
    /// An LLM call is in flight (a cancel then cancels it).
    in_flight: bool,
    /// A cancel (stop or preemption) arrived while no LLM call was in flight: honoured
    /// before the next call is sent.
    cancel_pending: bool,
    /// Context messages pre_action added, held until the stop budget said go on.
    pending_context: Vec<Message>,
    /// Plugin tools offered in the latest LLM request (and run in its tool step).
    tools: ToolRegistry,
    overflow: Guard,
    /// Finish or fail has begun: the second attempt is ignored.
    done: bool,
    /// When the current LLM outage began for this turn (its first unavailable answer),
    /// and how many attempts failed since.
    outage: Option<(i64, u32)>,
    /// When the turn started (`Env::mono_ms`) and how long it has waited out outages
    /// since: the turn's working time is the difference.
    started_mono: Option<i64>,
    waited_ms: i64,
}

impl TurnCore {
    pub fn new(id: u64, input: TurnInput) -> Self {
        Self {
            id,
            input,
            wait: Wait::Start,
            msgs: Vec::new(),
            prefix_len: 0,
            step: Step::Llm,
            turn: 0,
            tools_used: Vec::new(),
            memory_tokens: 0,
            usage: Usage::default(),
            last_text: String::new(),
            reasoning: String::new(),
            last_batch_reply_only: false,
            in_flight: false,
            cancel_pending: false,
            pending_context: Vec::new(),
            tools: ToolRegistry::default(),
            overflow: Guard::default(),
            done: false,
            outage: None,
            started_mono: None,
            waited_ms: 0,
        }
    }

    /// The frame's messages (for the shell's logs and the tests).
    pub fn messages(&self) -> &[Message] {
        &self.msgs
    }

    /// How many of [`Self::messages`] are the prefix.
    pub fn prefix_len(&self) -> usize {
        self.prefix_len
    }

    /// Turns counted toward the cap so far.
    pub fn turn(&self) -> u32 {
        self.turn
    }

    /// The plugin tools of the latest request.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// Whether the task has finished or failed.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Feeds one event; returns what to do, in order.
    pub fn handle(&mut self, event: Event, env: &Env) -> Vec<Cmd> {
        let mut out = Vec::new();
        match (event, std::mem::replace(&mut self.wait, Wait::Done)) {
            (Event::Cancel, Wait::Backoff(retry)) => {
                // A stop (or a preemption) need not wait for the next attempt: it comes
                // now (a record that fails again then fails the turn), and the next LLM
                // step honours the cancel.
                self.cancel_pending = true;
                match retry {
                    Retry::Llm => self.advance(&mut out),
                    Retry::Record => self.read_timeline(Rebuild::Prepare, env, &mut out),
                }
            }
            (Event::Cancel, wait) => {
                self.wait = wait;
                if self.in_flight {
                    out.push(Cmd::CancelLlm);
                } else if !self.done {
                    tracing::debug!(task = self.id, "cancel kept for the next LLM call");
                    self.cancel_pending = true;
                }
            }
            (Event::Started, Wait::Start) => {
                let mut c = self.stage_ctx();
                c.raw_message = self.input.text.clone();
                self.await_(Wait::OnInput, Cmd::RunStage(Stage::OnInput, c), &mut out);
            }
            (Event::OnInput(c), Wait::OnInput) => {
                if let Some(r) = c.response {
                    return self.finish(r, End::Done, out);
                }
                self.input.text = c.raw_message;
                // An input whose text cannot fit the window is refused before it is
                // recorded: kept in the window it would overflow every later turn too.
                // (Images are not kept in the window; the overflow guard weighs them.)
                let (fixed, target) = (self.fixed_text_tokens(env), Budget::new(env.limits.window, 0).target);
                if fixed > target {
                    let m = Msg::InputOverWindow {
                        tokens: fixed,
                        target,
                        window: env.limits.window,
                    }
                    .text();
                    return self.fail(TurnError::InputOverWindow(m), out);
                }
                self.read_timeline(Rebuild::Prepare, env, &mut out);
            }
            (Event::Timeline(t), Wait::Timeline(why)) => {
                self.build_prefix(&t, env);
                match why {
                    Rebuild::Rebase => self.advance(&mut out),
                    // The input went with the read: its answer comes next.
                    Rebuild::Prepare if self.records_input() => self.wait = Wait::InputRecorded,
                    Rebuild::Prepare => self.pre_action(&mut out),
                }
            }
            (Event::InputRecorded(r), Wait::InputRecorded) => match r {
                Ok(()) => {
                    self.outage = None;
                    self.pre_action(&mut out)
                }
                Err(e) => {
                    let error = match e {
                        NotRecorded::Refused(e) => TurnError::RecordInput(e),
                        NotRecorded::Unanswered(e) => TurnError::StoreUnavailable(e),
                    };
                    // A full disk or a restarting store is an outage too: a durable
                    // input waits for it (nothing was recorded, so trying again
                    // records it once).
                    let Some(wait) = self.outage_backoff(None, env) else {
                        return self.fail(error, out);
                    };
                    self.wait_out(Retry::Record, wait, error.to_string(), &mut out);
                }
            },
            (Event::PreAction(c), Wait::PreAction) => {
                if let Some(r) = c.response {
                    return self.finish(r, End::Done, out);
                }
                self.pending_context = c
                    .context_msgs
                    .into_iter()
                    .filter(|m| !m.role.is_empty())
                    .map(|m| Message::text(&m.role, m.content))
                    .collect();
                // Only after pre_action did not answer: inputs that were waiting when
                // stop was pressed end here, before any LLM call (spec §1.11).
                self.await_(Wait::StopBudget, Cmd::ConsumeCancel, &mut out);
            }
            (Event::StopBudget(cancelled), Wait::StopBudget) => {
                if cancelled {
                    return self.finish(Msg::CancelledByStop.text(), End::Cancelled, out);
                }
                let context = std::mem::take(&mut self.pending_context);
                self.msgs.extend(context);
                self.advance(&mut out);
            }
            (Event::SafePoint(r), Wait::SafePoint) => match r {
                Ok(true) => {
                    tracing::debug!(task = self.id, "yielded at a safe point");
                    self.await_(Wait::Parked, Cmd::Park, &mut out);
                }
                Ok(false) => self.run_step(env, &mut out),
                Err(e) => return self.fail(TurnError::SchedulerUnavailable(e), out),
            },
            (Event::Resume, Wait::Parked) => {
                tracing::debug!(task = self.id, "resumed");
                // The timeline now holds whatever the interrupting task committed.
                self.read_timeline(Rebuild::Rebase, env, &mut out);
            }
            (Event::Gathered(g), Wait::Gather) => {
                // A cancel that came while gathering: nothing was sent.
                if std::mem::take(&mut self.cancel_pending) {
                    self.cancelled(false, String::new(), &mut out);
                    return out;
                }
                let request = self.compose(g, env);
                self.in_flight = true;
                self.await_(Wait::Llm, Cmd::CallLlm(request), &mut out);
            }
            (Event::Llm { result }, Wait::Llm) => {
                self.in_flight = false;
                if result.is_ok() {
                    self.outage = None;
                }
                match result {
                    Ok(c) => self.post_action(c, &mut out),
                    Err(LlmFailure::Cancelled { partial }) => self.cancelled(true, partial, &mut out),
                    Err(LlmFailure::ContextFull(vendor)) => match self.overflow.detected() {
                        Verdict::Fail(guard) => return self.fail(TurnError::OverflowAtVendor { guard, vendor }, out),
                        _ => self.recover_overflow(env, &mut out),
                    },
                    Err(LlmFailure::Unavailable { error, retry_in_s }) => {
                        if let Some(wait) = self.outage_backoff(retry_in_s, env) {
                            self.wait_out(Retry::Llm, wait, error, &mut out);
                        } else {
                            return self.fail(TurnError::Llm(error), out);
                        }
                    }
                    Err(LlmFailure::OverBudget(e)) => return self.fail(TurnError::OverBudget(e), out),
                    Err(LlmFailure::Other(e)) => return self.fail(TurnError::Llm(e), out),
                }
            }
            (Event::BackoffOver, Wait::Backoff(Retry::Llm)) => self.advance(&mut out),
            (Event::BackoffOver, Wait::Backoff(Retry::Record)) => self.read_timeline(Rebuild::Prepare, env, &mut out),
            (Event::PostAction(after), Wait::PostAction(mut c)) => {
                if let Some(r) = after.response {
                    return self.finish(r, End::Done, out);
                }
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
                return self.after_post_action(c, out);
            }
            (Event::StopTaken(stop), Wait::StopTaken { in_flight, partial }) => {
                if stop {
                    // Stopped: the words the owner saw stay, marked as stopped.
                    let text = if partial.trim().is_empty() {
                        Msg::Stopped.text()
                    } else {
                        Msg::StoppedPartial { partial: &partial }.text()
                    };
                    return self.finish(text, End::Cancelled, out);
                }
                // Preempted: the partial output is discarded (the stream is reset), the
                // call counts as a turn, and it is re-sent after the safe point (maybe
                // after a resume).
                if in_flight {
                    out.push(Cmd::Publish(BusEvent::StreamDelta {
                        task_id: self.id,
                        channel: self.input.channel.clone(),
                        content: String::new(),
                        reasoning: None,
                        reset: true,
                    }));
                    self.turn += 1;
                }
                self.step = Step::Llm;
                self.advance(&mut out);
            }
            (Event::ToolsDone(outcomes), Wait::Tools { reply_only }) => {
                let Step::Tools(calls) = std::mem::replace(&mut self.step, Step::Llm) else {
                    unreachable!("a tool batch runs only from Step::Tools")
                };
                for (call, o) in calls.iter().zip(outcomes) {
                    self.tools_used.push(call.name.clone());
                    out.push(Cmd::Publish(BusEvent::ToolCall {
                        task_id: self.id,
                        id: call.id.clone(),
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                        status: o.status,
                        result: o.text.clone(),
                    }));
                    self.msgs.push(Message {
                        role: "tool".into(),
                        content: Value::String(o.text),
                        reasoning_content: None,
                        tool_call_id: Some(call.id.clone()),
                        tool_calls: Vec::new(),
                    });
                }
                self.last_batch_reply_only = reply_only;
                self.turn += 1;
                self.advance(&mut out);
            }
            (Event::Pruned(r), Wait::Prune) => {
                let pruned = match r {
                    Ok(n) => n,
                    Err(PruneFailure::Store(e)) => {
                        tracing::warn!(task = self.id, "overflow recovery could not prune: {e}");
                        0
                    }
                    Err(PruneFailure::Unavailable(e)) => return self.fail(TurnError::StoreUnavailable(e), out),
                };
                tracing::warn!(task = self.id, pruned, "context overflow: recovery");
                if pruned > 0 {
                    self.overflow.pruned(pruned);
                    out.push(Cmd::SubmitNotice {
                        source: "kernel/overflow",
                        text: overflow::notice(pruned),
                    });
                }
                self.read_timeline(Rebuild::Rebase, env, &mut out);
            }
            (Event::BeforeOutput(c), Wait::BeforeOutput(end)) => {
                // A `Response` set in before_output is ignored (spec §3.10).
                return self.deliver(c.final_text, end, env, out);
            }
            (Event::Committed(r), Wait::Committed { text, end }) => {
                if let Err(e) = r {
                    tracing::error!(task = self.id, "the reply could not be recorded in memory: {e}");
                }
                return self.reply(text, end, out);
            }
            (event, wait) => {
                tracing::debug!(
                    task = self.id,
                    ?event,
                    ?wait,
                    "event ignored: not what the turn waits for"
                );
                self.wait = wait;
            }
        }
        out
    }

    /// The wait before the next LLM attempt in an outage, or `None` when the turn
    /// gives up (a synchronous input, a pending stop, or `outage_wait` spent since the
    /// outage's first failure). The paused sources' own hint when there is one, else
    /// doubling from 2 s; between 0.5 and 60 s, never past the limit.
    fn outage_backoff(&mut self, retry_in_s: Option<u64>, env: &Env) -> Option<std::time::Duration> {
        if !self.input.durable || self.cancel_pending {
            return None;
        }
        let (since, attempts) = self.outage.get_or_insert((env.now_ms, 0));
        *attempts += 1;
        let left = env.limits.outage_wait_ms - (env.now_ms - *since);
        if left <= 0 {
            return None;
        }
        let doubling = 1_000i64 << (*attempts).min(6);
        let wait = retry_in_s
            .map_or(doubling, |s| s as i64 * 1_000)
            .clamp(500, 60_000)
            .min(left);
        Some(std::time::Duration::from_millis(wait as u64))
    }

    /// Waits `wait` out before trying `retry` again: says so on the bus
    /// (`task_waiting`, which the chat shows) and keeps the wait out of the turn's
    /// working time.
    fn wait_out(&mut self, retry: Retry, wait: std::time::Duration, error: String, out: &mut Vec<Cmd>) {
        let attempt = self.outage.map_or(0, |o| o.1);
        tracing::warn!(
            task = self.id,
            attempt,
            ?retry,
            wait_ms = wait.as_millis() as u64,
            "an outage (no LLM source, or the memory store) holds the input; it waits and tries again: {error}"
        );
        out.push(Cmd::Publish(BusEvent::TaskWaiting {
            task_id: self.id,
            channel: self.input.channel.clone(),
            attempt,
            retry_in_ms: wait.as_millis() as u64,
            error,
        }));
        self.waited_ms += wait.as_millis() as i64;
        self.await_(Wait::Backoff(retry), Cmd::Backoff(wait), out);
    }

    fn await_(&mut self, wait: Wait, cmd: Cmd, out: &mut Vec<Cmd>) {
        self.wait = wait;
        out.push(cmd);
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

    fn origin(&self) -> Origin {
        Origin {
            source: self.input.source.clone(),
            channel: self.input.channel.clone(),
            interrupt: self.input.interrupt,
        }
    }

    /// Tokens of the prefix's fixed parts: system prompt, source context, the input.
    /// (The system prompt is the same turn after turn: its count is memoised.)
    /// The input's images count what a vendor charges for them, and the images the
    /// media memory may still add are reserved ([`Limits::media_reserve`]).
    fn fixed_tokens(&self, env: &Env) -> usize {
        self.fixed_text_tokens(env)
            + crate::memory::media::parts::input_image_tokens(&self.input.media)
            + env.limits.media_reserve
    }

    /// The text part of [`Self::fixed_tokens`]: what the window would keep of the input.
    fn fixed_text_tokens(&self, env: &Env) -> usize {
        tokens::count_memo(&prompt::system_prompt(env.prompt, env.channels))
            // The same few lines per channel pair, turn after turn.
            + tokens::count_memo(&prompt::origin_context(&self.origin()))
            + tokens::count(&self.input.text)
            + PER_MESSAGE_TOKENS * 3
    }

    /// What an image part of the frame costs: the input's images by their size, any
    /// other (an image of an earlier step) at the most an image may cost.
    fn image_cost(&self) -> impl Fn(&str) -> usize + '_ {
        move |id: &str| {
            self.input
                .media
                .iter()
                .find(|m| m.id == id)
                .map_or(crate::memory::media::parts::IMAGE_TOKENS_MAX, |m| {
                    crate::memory::media::parts::image_tokens(m.width, m.height)
                })
        }
    }

    /// Token budget of the timeline (spec §5.8), handed to an overflow recovery's prune.
    fn context_budget(&self, env: &Env) -> usize {
        Budget::new(env.limits.window, self.fixed_tokens(env)).timeline
    }

    /// Whether the prepare phase records the input: an interrupt's input is no user
    /// speech and consolidation is the kernel talking to itself, so neither is (spec
    /// §1.14).
    fn records_input(&self) -> bool {
        !(self.input.interrupt || self.input.consolidation)
    }

    fn read_timeline(&mut self, why: Rebuild, env: &Env, out: &mut Vec<Cmd>) {
        // Committed before the LLM runs (once recorded, the message survives a crash),
        // in the same round trip to the context tier as the read.
        let record = (matches!(why, Rebuild::Prepare) && self.records_input()).then(|| MemoryEvent {
            id: 0,
            ts_ms: env.now_ms,
            source: self.input.source.clone(),
            input: self.input.memory_text().to_owned(),
            response: String::new(),
            tools_used: vec![],
            tool_results: vec![],
            principal: self.input.principal.clone(),
        });
        let cmd = Cmd::ReadTimeline {
            query: self.input.memory_text().to_owned(),
            window: env.limits.window,
            fixed: self.fixed_tokens(env),
            record,
            memory: self.input.memory.recall != super::inputdef::RecallPolicy::None,
        };
        self.await_(Wait::Timeline(why), cmd, out);
    }

    /// Builds (or rebuilds) the prefix from committed state and keeps the tail
    /// (stage-injected context, tool rounds, placeholders).
    fn build_prefix(&mut self, memory: &crate::memory::recall::MemoryText, env: &Env) {
        self.memory_tokens = memory.tokens;
        let mut prefix = prompt::prefix_of(env.prompt, env.channels, &self.origin(), &self.input.text, memory);
        crate::memory::media::parts::attach(&mut prefix, &self.input.media);
        let tail = self.msgs.split_off(self.prefix_len.min(self.msgs.len()));
        self.prefix_len = prefix.len();
        self.msgs = prefix;
        self.msgs.extend(tail);
    }

    fn pre_action(&mut self, out: &mut Vec<Cmd>) {
        let c = self.stage_ctx();
        self.await_(Wait::PreAction, Cmd::RunStage(Stage::PreAction, c), out);
    }

    /// A safe point: ask the scheduler whether to yield before the next step.
    fn advance(&mut self, out: &mut Vec<Cmd>) {
        if self.done {
            return;
        }
        let cmd = Cmd::AskSafePoint {
            consolidation: self.input.consolidation,
        };
        self.await_(Wait::SafePoint, cmd, out);
    }

    fn run_step(&mut self, env: &Env, out: &mut Vec<Cmd>) {
        match &self.step {
            Step::Llm => self.llm_step(env, out),
            Step::Tools(calls) => {
                // A batch of output-delivery tools only (not their `_help`): the model is
                // told next that plain text ends the turn.
                let reply_only = calls
                    .iter()
                    .all(|c| parse_send_tool(&c.name).is_some_and(|(_, help)| !help));
                let cmd = Cmd::RunTools(calls.clone());
                self.await_(Wait::Tools { reply_only }, cmd, out);
            }
        }
    }

    fn llm_step(&mut self, env: &Env, out: &mut Vec<Cmd>) {
        if std::mem::take(&mut self.cancel_pending) {
            return self.cancelled(false, String::new(), out);
        }
        let limits = env.limits;
        let started = *self.started_mono.get_or_insert(env.mono_ms);
        if limits.max_turn_ms > 0 && env.mono_ms - started - self.waited_ms > limits.max_turn_ms {
            let limit_s = limits.max_turn_ms / 1_000;
            out.extend(self.fail(TurnError::TooLong { limit_s }, Vec::new()));
            return;
        }
        if limits.max_tool_turns > 0 && self.turn >= limits.max_tool_turns {
            let text = if self.last_text.trim().is_empty() {
                Msg::MaxToolTurns {
                    limit: limits.max_tool_turns,
                }
                .text()
            } else {
                self.last_text.clone()
            };
            tracing::info!(task = self.id, turn = self.turn, "tool-turn cap reached");
            out.extend(self.finish(text, End::Done, Vec::new()));
            return;
        }
        prompt::add_continuation(&mut self.msgs, self.last_batch_reply_only);
        let size = prompt_size(&self.msgs, limits.window, &self.image_cost()) + limits.media_reserve;
        match self.overflow.check(size, limits.window) {
            Verdict::Fits => {}
            Verdict::Recover => return self.recover_overflow(env, out),
            Verdict::Fail(m) => {
                out.extend(self.fail(TurnError::Overflow(m), Vec::new()));
                return;
            }
        }
        // Recall by the input's own text; kernel self-talk recalls no images.
        let media_query = if self.input.consolidation {
            String::new()
        } else {
            self.input.text.clone()
        };
        let cmd = Cmd::Gather {
            tools_query: self.input.memory_text().to_owned(),
            media_query,
            window: limits.window,
            fixed: self.fixed_tokens(env),
        };
        self.await_(Wait::Gather, cmd, out);
    }

    /// The request of the next LLM call, exactly as it is sent (but for the bytes of
    /// the images it names): the frame with every secret masked, the recalled images
    /// that fit the media reserve added to the last user message, the catalogue of the
    /// tools not offered spliced into the system prompt, and the offered tools. The
    /// gathered registry is what the call's tool step runs.
    fn compose(&mut self, g: Gathered, env: &Env) -> CompletionRequest {
        let mut messages = self.msgs.clone();
        if !env.gate.is_empty() {
            for m in &mut messages {
                env.gate.mask_value(&mut m.content);
            }
        }
        let mut request = CompletionRequest {
            model: String::new(),
            messages,
            temperature: env.limits.temperature,
            max_tokens: env.limits.max_tokens,
            stream: true,
            tools: Default::default(),
            tool_choice: Some(json!("auto")),
            disable_thinking: true,
            extra_body: Default::default(),
        };
        if !g.recalled.is_empty() {
            crate::memory::media::parts::add_recalled(&mut request, &g.recalled, env.limits.media_reserve);
        }
        if !g.offered.catalogue.is_empty()
            && let Some(first) = request.messages.first_mut()
            && let Some(text) = first.content.as_str()
        {
            first.content = Value::String(g.offered.splice(text));
        }
        request.tools = g.offered.list;
        self.tools = g.tools;
        request
    }

    /// Overflow recovery (spec §5.9): prune, tell the model when events moved, rebuild
    /// the prompt from committed state, continue at a safe point.
    fn recover_overflow(&mut self, env: &Env, out: &mut Vec<Cmd>) {
        let cmd = Cmd::Prune {
            context_tokens: self.context_budget(env),
            max_context_size: env.limits.max_context_size,
        };
        self.await_(Wait::Prune, cmd, out);
    }

    /// A cancel took effect: ask whether it was a stop. `in_flight`: a sent call was
    /// cancelled, rather than one about to be sent; `partial`: what it had streamed
    /// (kept by a stop, reset by a preemption).
    fn cancelled(&mut self, in_flight: bool, partial: String, out: &mut Vec<Cmd>) {
        self.await_(Wait::StopTaken { in_flight, partial }, Cmd::TakeStop, out);
    }

    /// post_action: plugins see the model's text and calls; may rewrite or answer.
    fn post_action(&mut self, c: Completion, out: &mut Vec<Cmd>) {
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
        self.await_(Wait::PostAction(c), Cmd::RunStage(Stage::PostAction, sctx), out);
    }

    fn after_post_action(&mut self, c: Completion, mut out: Vec<Cmd>) -> Vec<Cmd> {
        let r = c.response;
        self.usage.prompt_tokens += r.usage.prompt_tokens;
        self.usage.completion_tokens += r.usage.completion_tokens;
        self.usage.total_tokens += r.usage.total_tokens;
        self.usage.cost_micros += r.usage.cost_micros;
        if !r.reasoning_content.is_empty() {
            self.reasoning = r.reasoning_content.clone();
        }
        out.push(Cmd::Publish(BusEvent::AgentLlmChain {
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
        }));
        if !r.content.trim().is_empty() {
            self.last_text = r.content.clone();
        }
        if r.tool_calls.is_empty() {
            return self.finish(r.content, End::Done, out);
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
        self.advance(&mut out);
        out
    }

    /// The finish phase (once): before_output may rewrite the text, then deliver.
    fn finish(&mut self, text: String, end: End, mut out: Vec<Cmd>) -> Vec<Cmd> {
        if self.done {
            return out;
        }
        self.done = true;
        let mut sctx = self.stage_ctx();
        sctx.final_text = text;
        self.await_(
            Wait::BeforeOutput(end),
            Cmd::RunStage(Stage::BeforeOutput, sctx),
            &mut out,
        );
        out
    }

    /// Commits the turn before answering (an answered turn is a remembered turn);
    /// consolidation answers without a commit.
    fn deliver(&mut self, text: String, end: End, env: &Env, mut out: Vec<Cmd>) -> Vec<Cmd> {
        if self.input.consolidation {
            return self.reply(text, end, out);
        }
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
                ToolOutput {
                    name: name.clone(),
                    output,
                    compute,
                }
            })
            .collect();
        let event = MemoryEvent {
            id: 0,
            ts_ms: env.now_ms,
            source: "agent".into(),
            input: self.input.memory_text().to_owned(),
            response: text.clone(),
            tools_used: self.tools_used.clone(),
            tool_results,
            principal: self.input.principal.clone(),
        };
        if !self.input.no_memory {
            out.push(Cmd::LogText(TextEvent {
                ts: event.ts_ms,
                source: self.input.source.clone(),
                // The raw record keeps the input as it arrived (a bridge's header too);
                // the tiers keep what its channel's cleaner left.
                input: self.input.text.clone(),
                response: event.response.clone(),
                tools_used: event.tools_used.clone(),
                imported: false,
                level: self.input.level.map(|l| format!("L{}", l as u8)),
                media: self.input.media.iter().map(|m| m.id.clone()).collect(),
            }));
        }
        // The window is kept in size by the distill heartbeat, not per turn.
        let prune_window = self.input.memory.context == super::inputdef::ContextPolicy::Prune;
        self.await_(
            Wait::Committed { text, end },
            Cmd::Commit { event, prune_window },
            &mut out,
        );
        out
    }

    fn reply(&mut self, text: String, end: End, mut out: Vec<Cmd>) -> Vec<Cmd> {
        self.wait = Wait::Done;
        out.push(Cmd::Reply(Reply {
            content: text.clone(),
            reasoning_content: self.reasoning.clone(),
            tools_used: self.tools_used.clone(),
            usage: self.usage,
            memory_tokens: self.memory_tokens,
            ..Default::default()
        }));
        out.push(Cmd::Publish(BusEvent::AgentOutput {
            task_id: self.id,
            text: text.clone(),
            channel: self.input.channel.clone(),
            source: Some(self.input.source.clone()),
            error: false,
        }));
        let mut sctx = self.stage_ctx();
        sctx.final_text = text;
        out.push(Cmd::AfterOutput(sctx));
        out.push(Cmd::Finish(end));
        out
    }

    /// Fails the task (once): the caller and subscribers read [`Msg::TaskFailed`].
    fn fail(&mut self, error: TurnError, mut out: Vec<Cmd>) -> Vec<Cmd> {
        if self.done {
            return out;
        }
        tracing::warn!(task = self.id, "task failed: {error}");
        self.done = true;
        self.wait = Wait::Done;
        self.in_flight = false;
        let over_budget = matches!(error, TurnError::OverBudget(_));
        let error = error.to_string();
        let text = Msg::TaskFailed { error: &error }.text();
        out.push(Cmd::Reply(Reply {
            content: text.clone(),
            error: Some(error),
            over_budget,
            tools_used: self.tools_used.clone(),
            usage: self.usage,
            ..Default::default()
        }));
        out.push(Cmd::Publish(BusEvent::AgentOutput {
            task_id: self.id,
            text,
            channel: self.input.channel.clone(),
            source: None,
            error: true,
        }));
        out.push(Cmd::Finish(End::Failed));
        out
    }
}

/// What a chat message's framing (role, separators) costs beyond its text, as OpenAI
/// documents it for its chat formats.
pub const PER_MESSAGE_TOKENS: usize = 4;

/// The size of a prompt's messages in o200k tokens (tool schemas not included: the
/// overflow check compares against 1.25 × the window, which they fit within). Each
/// text is counted once and remembered (`tokens::count_memo`): the system prompt and the
/// timeline repeat across the steps and turns.
pub fn prompt_tokens(msgs: &[Message], image: &dyn Fn(&str) -> usize) -> usize {
    measure(msgs, tokens::count_memo, image)
}

/// What the overflow check needs to know of the prompt's size against `window`: the
/// byte bound when it already proves the prompt fits (o200k is a byte-level BPE, so a
/// text never has more tokens than bytes — with a 128k window that is nearly every
/// turn, and counting a long prompt is the largest part of a turn's kernel time),
/// else the exact count.
pub fn prompt_size(msgs: &[Message], window: usize, image: &dyn Fn(&str) -> usize) -> usize {
    let window = if window == 0 {
        super::overflow::DEFAULT_WINDOW
    } else {
        window
    };
    let bound = measure(msgs, str::len, image);
    if (bound as f64) <= window as f64 * super::overflow::THRESHOLD {
        bound
    } else {
        prompt_tokens(msgs, image)
    }
}

/// The messages' size with `size` per text (content, tool-call arguments and names),
/// plus the per-message overhead. Structured content is measured part by part as its
/// JSON, which only over-estimates — except an image placeholder, which weighs what
/// the image will (`image`, by block id), not its few bytes of URL.
fn measure(msgs: &[Message], size: impl Fn(&str) -> usize, image: &dyn Fn(&str) -> usize) -> usize {
    msgs.iter()
        .map(|m| {
            let content = match &m.content {
                Value::String(s) => size(s),
                Value::Null => 0,
                Value::Array(parts) => parts
                    .iter()
                    .map(|p| match crate::memory::media::parts::placeholder_of(p) {
                        Some(id) => image(id),
                        None => size(&p.to_string()),
                    })
                    .sum(),
                other => size(&other.to_string()),
            };
            PER_MESSAGE_TOKENS
                + content
                + m.tool_calls
                    .iter()
                    .map(|c| size(&c.function.arguments) + size(&c.function.name))
                    .sum::<usize>()
        })
        .sum()
}

#[cfg(test)]
mod tests;
