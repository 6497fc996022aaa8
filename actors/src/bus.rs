//! The kernel event bus: a broadcast of everything observable that happens.
//!
//! Not an actor on purpose: publishing must never block, queue behind a mailbox or
//! fail because nobody listens. Slow subscribers lose the oldest events (and learn
//! how many they lost) instead of slowing the kernel down.
//!
//! Every event is one variant of the closed [`Event`] enum. Publishers build a typed
//! value (the compiler checks the fields), consumers `match` on it instead of digging
//! values out of JSON, and the wire shape — `{"type": <kind>, "ts_ms": …, <fields>}`,
//! which the SSE stream, the dashboard and plugins' event subscriptions see — is
//! produced by serde in one place.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;

/// The event type names (the `type` field and the SSE event name), for consumers that
/// filter by name (plugins' subscriptions, the dashboard).
pub mod kinds {
    pub const ACTOR_STARTED: &str = "actor_started";
    pub const ACTOR_EXIT: &str = "actor_exit";
    pub const ACTOR_RESTART: &str = "actor_restart";
    pub const SUPERVISOR_ESCALATED: &str = "supervisor_escalated";
    pub const SETTING_CHANGED: &str = "setting_changed";
    pub const DAEMON: &str = "daemon";
    pub const STAGE: &str = "stage";
    pub const STAGE_HANDLER_ERROR: &str = "stage_handler_error";
    pub const TASK: &str = "task";
    pub const OUTPUT: &str = "output";
    pub const STREAM_DELTA: &str = "stream_delta";
    pub const AGENT_LLM_CHAIN: &str = "agent_llm_chain";
    pub const TOOL_CALL: &str = "tool_call";
    pub const AGENT_OUTPUT: &str = "agent_output";
    pub const MEMORY_IMPORT: &str = "memory_import";
    pub const PLUGIN_EVENT: &str = "plugin_event";
    pub const APPROVAL_REQUESTED: &str = "approval_requested";
    pub const APPROVAL_RESOLVED: &str = "approval_resolved";
    pub const TASK_WAITING: &str = "task_waiting";
    pub const BUDGET_REACHED: &str = "budget_reached";
    pub const RECALLED: &str = "recalled";
    /// Every kernel event type, in the order of [`super::Event`].
    pub const ALL: &[&str] = &[
        ACTOR_STARTED,
        ACTOR_EXIT,
        ACTOR_RESTART,
        SUPERVISOR_ESCALATED,
        SETTING_CHANGED,
        DAEMON,
        STAGE,
        STAGE_HANDLER_ERROR,
        TASK,
        OUTPUT,
        STREAM_DELTA,
        AGENT_LLM_CHAIN,
        TOOL_CALL,
        AGENT_OUTPUT,
        MEMORY_IMPORT,
        PLUGIN_EVENT,
        APPROVAL_REQUESTED,
        APPROVAL_RESOLVED,
        TASK_WAITING,
        BUDGET_REACHED,
        RECALLED,
    ];
}

/// Daemon lifecycle phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DaemonPhase {
    /// Every module is up and the HTTP server is bound.
    Ready,
    /// Shutdown began (SSE streams end on it).
    Stopping,
}

/// A task's lifecycle state, as the scheduler reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Queued,
    Running,
    Suspended,
    Resumed,
    Done,
    Cancelled,
    Failed,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Suspended => "suspended",
            Self::Resumed => "resumed",
            Self::Done => "done",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
        }
    }
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    Error,
    /// A `pre_tool_use` stage handler refused the call.
    Denied,
}

/// One tool call of a model answer, as `agent_llm_chain` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ChainToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// Token usage of one model answer.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ChainUsage {
    pub prompt: u64,
    pub completion: u64,
    pub total: u64,
}

/// Everything the kernel publishes. Serialised internally tagged: the variant name
/// (snake_case) is the `type` field, its fields sit beside it.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A supervised actor instance started.
    ActorStarted { id: String, generation: u64 },
    /// An actor instance exited (or failed to start).
    ActorExit { id: String, reason: String, abnormal: bool },
    /// An actor is being restarted by its supervisor.
    ActorRestart { id: String, restarts: u64 },
    /// A supervisor gave up (restart intensity exceeded) and escalated.
    SupervisorEscalated { id: String, reason: String },
    /// A setting changed (`value` masked for secrets; `null` when deleted; `reset`:
    /// set back to its default).
    SettingChanged { key: String, value: Value, reset: bool },
    /// Daemon lifecycle.
    Daemon { phase: DaemonPhase },
    /// A stage is about to run on its handlers.
    Stage {
        phase: &'static str,
        channel: Option<Value>,
        tool: Option<String>,
    },
    /// A stage handler failed or timed out (the stage went on without it).
    StageHandlerError {
        stage: &'static str,
        handler: String,
        error: String,
    },
    /// A task changed state (`level` as `"L1"`…`"L4"`, none for queued input).
    Task {
        task_id: u64,
        state: TaskState,
        level: Option<String>,
        effective_level: u8,
    },
    /// A message went out through an output channel (`output_send__<channel>`).
    /// `content_type` is the message type (`text`, `image`, …): named so because the
    /// event's own `type` is taken.
    Output {
        channel: String,
        payload: String,
        content_type: String,
        meta: Value,
        task_id: u64,
        source: String,
    },
    /// Streamed model text; `reset: true` (with empty content) discards what streamed
    /// so far (the call was cancelled by a preemption).
    StreamDelta {
        task_id: u64,
        channel: String,
        content: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        reset: bool,
    },
    /// One model answer inside a turn.
    AgentLlmChain {
        task_id: u64,
        content: String,
        reasoning: String,
        tool_calls: Vec<ChainToolCall>,
        phase: &'static str,
        turn: u32,
        source: String,
        model: String,
        usage: ChainUsage,
    },
    /// A tool call ran, failed or was refused.
    ToolCall {
        task_id: u64,
        id: String,
        name: String,
        arguments: Value,
        status: ToolStatus,
        result: String,
    },
    /// A task's final answer (`error: true` when it failed; then there is no source).
    AgentOutput {
        task_id: u64,
        text: String,
        channel: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        source: Option<String>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        error: bool,
    },
    /// Progress of a history import (`POST /api/v1/memory/import`): after each batch,
    /// and once more with `finished` when it is over (`error` when it stopped early;
    /// what was committed before stays imported).
    MemoryImport {
        /// Lines processed so far, of `total`.
        done: usize,
        total: usize,
        imported: usize,
        skipped: usize,
        /// Events moved from the window into documents by the import's distill rounds.
        archived: usize,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        finished: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// An event a plugin published (`events.publish`): `plugin` is stamped by the
    /// kernel, `topic` and `data` are the plugin's (e.g. the terminal's output).
    PluginEvent { plugin: String, topic: String, data: Value },
    /// A call waits for the owner's yes (`firewall::approval`): answer with
    /// `POST /api/v1/approvals/<id>`.
    ApprovalRequested {
        #[serde(flatten)]
        question: Question,
    },
    /// A question was answered (`allowed`) or timed out (`allowed: false`, `by: "timeout"`).
    ApprovalResolved {
        id: u64,
        task_id: u64,
        allowed: bool,
        by: &'static str,
    },
    /// An acknowledged input's turn waits out an LLM outage: attempt `attempt` failed
    /// with `error`, the next comes in `retry_in_ms` (`core.agent.outage_wait` bounds it).
    TaskWaiting {
        task_id: u64,
        channel: String,
        attempt: u32,
        retry_in_ms: u64,
        error: String,
    },
    /// A budget limit refused a model call, or made the order skip a source, for the
    /// first time in its period: the owner hears of it once (`message` says which
    /// limit, what is spent and when it resets), not once per refused call.
    BudgetReached { setting: String, message: String },
    /// A turn's recall answered: how long every tier took together (the query's
    /// embedding included), for the latency metric.
    Recalled { task_id: u64, ms: f64 },
}

impl Event {
    /// The `type` name of this event (the SSE event name).
    pub fn kind(&self) -> &'static str {
        use kinds::*;
        match self {
            Self::ActorStarted { .. } => ACTOR_STARTED,
            Self::ActorExit { .. } => ACTOR_EXIT,
            Self::ActorRestart { .. } => ACTOR_RESTART,
            Self::SupervisorEscalated { .. } => SUPERVISOR_ESCALATED,
            Self::SettingChanged { .. } => SETTING_CHANGED,
            Self::Daemon { .. } => DAEMON,
            Self::Stage { .. } => STAGE,
            Self::StageHandlerError { .. } => STAGE_HANDLER_ERROR,
            Self::Task { .. } => TASK,
            Self::Output { .. } => OUTPUT,
            Self::StreamDelta { .. } => STREAM_DELTA,
            Self::AgentLlmChain { .. } => AGENT_LLM_CHAIN,
            Self::ToolCall { .. } => TOOL_CALL,
            Self::AgentOutput { .. } => AGENT_OUTPUT,
            Self::MemoryImport { .. } => MEMORY_IMPORT,
            Self::PluginEvent { .. } => PLUGIN_EVENT,
            Self::ApprovalRequested { .. } => APPROVAL_REQUESTED,
            Self::ApprovalResolved { .. } => APPROVAL_RESOLVED,
            Self::TaskWaiting { .. } => TASK_WAITING,
            Self::BudgetReached { .. } => BUDGET_REACHED,
            Self::Recalled { .. } => RECALLED,
        }
    }
}

/// One published event and when it happened.
#[derive(Debug, Clone, Serialize)]
pub struct KernelEvent {
    #[serde(flatten)]
    pub event: Event,
    /// Unix time in milliseconds.
    pub ts_ms: u64,
}

impl KernelEvent {
    /// The `type` name (the SSE event name).
    pub fn kind(&self) -> &'static str {
        self.event.kind()
    }

    /// The key of a `setting_changed` event.
    pub fn changed_setting(&self) -> Option<(&str, &Value)> {
        match &self.event {
            Event::SettingChanged { key, value, .. } => Some((key, value)),
            _ => None,
        }
    }

    /// The event as one JSON object (`type`, `ts_ms` and its fields).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Cheap-to-clone handle to the bus.
#[derive(Clone)]
pub struct EventBus {
    tx: broadcast::Sender<Arc<KernelEvent>>,
    /// The `setting_changed` events alone, for the many listeners that follow settings
    /// and nothing else. Why a second channel: a subscriber of the whole bus is woken by
    /// every event (a turn publishes about ten), and one on the memory thread woke that
    /// thread for each of them.
    settings: broadcast::Sender<Arc<KernelEvent>>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new(1024)
    }
}

impl EventBus {
    /// A bus that keeps up to `capacity` events for the slowest subscriber.
    pub fn new(capacity: usize) -> Self {
        Self {
            tx: broadcast::channel(capacity).0,
            settings: broadcast::channel(capacity).0,
        }
    }

    /// Publishes an event, stamped with the current time.
    pub fn publish(&self, event: Event) {
        let ts_ms = crate::clock::now_ms().max(0) as u64;
        tracing::trace!(kind = event.kind(), "event");
        let event = Arc::new(KernelEvent { event, ts_ms });
        if event.changed_setting().is_some() {
            let _ = self.settings.send(event.clone());
        }
        let _ = self.tx.send(event); // Err only means "no subscriber"
    }

    /// A new subscription, starting with the next event.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<KernelEvent>> {
        self.tx.subscribe()
    }

    /// A new subscription to the `setting_changed` events only, starting with the next.
    pub fn subscribe_settings(&self) -> broadcast::Receiver<Arc<KernelEvent>> {
        self.settings.subscribe()
    }
}

/// One open approval question (`firewall::approval`), as the API and the WebUI show it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Question {
    pub id: u64,
    pub task_id: u64,
    pub tool: String,
    /// The call's arguments as the model wrote them (secrets as `@{alias}`, without the
    /// kernel's `__origin`), cut.
    pub summary: String,
    /// What made the turn untrusted (or `always`).
    pub why: String,
    pub at_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_subscribers_see_setting_changes_only() {
        let bus = EventBus::new(8);
        let (mut all, mut settings) = (bus.subscribe(), bus.subscribe_settings());
        bus.publish(Event::ActorExit {
            id: "kernel/x".into(),
            reason: "stopped".into(),
            abnormal: false,
        });
        bus.publish(Event::SettingChanged {
            key: "core.agent.max_tool_turns".into(),
            value: serde_json::json!(3),
            reset: false,
        });
        assert_eq!(all.try_recv().unwrap().kind(), "actor_exit");
        assert_eq!(all.try_recv().unwrap().kind(), "setting_changed");
        let only = settings.try_recv().unwrap();
        assert_eq!(
            only.changed_setting().map(|(k, _)| k),
            Some("core.agent.max_tool_turns")
        );
        assert!(settings.try_recv().is_err(), "nothing else reaches it");
    }

    #[test]
    fn events_reach_every_subscriber_as_flat_json() {
        let bus = EventBus::new(8);
        let mut a = bus.subscribe();
        let mut b = bus.subscribe();
        bus.publish(Event::ActorExit {
            id: "kernel/x".into(),
            reason: "panic: boom".into(),
            abnormal: true,
        });
        let ev = a.try_recv().unwrap();
        assert_eq!(b.try_recv().unwrap().kind(), "actor_exit");
        let json = ev.to_json();
        assert_eq!(json["type"], "actor_exit");
        assert_eq!(json["id"], "kernel/x");
        assert_eq!(json["abnormal"], true);
        assert!(json["ts_ms"].as_u64().unwrap() > 0);
    }

    #[test]
    fn slow_subscriber_lags_instead_of_blocking() {
        let bus = EventBus::new(2);
        let mut rx = bus.subscribe();
        for phase in [
            DaemonPhase::Ready,
            DaemonPhase::Ready,
            DaemonPhase::Ready,
            DaemonPhase::Stopping,
        ] {
            bus.publish(Event::Daemon { phase });
        }
        assert!(matches!(rx.try_recv(), Err(broadcast::error::TryRecvError::Lagged(2))));
        assert_eq!(rx.try_recv().unwrap().to_json()["phase"], "ready");
        assert_eq!(rx.try_recv().unwrap().to_json()["phase"], "stopping");
    }

    /// The wire shapes the dashboard, the SSE clients and plugin subscribers read: the
    /// same fields the untyped bus produced (optional ones absent, not `null`).
    #[test]
    fn wire_shapes_are_stable() {
        let ev = |event| KernelEvent { event, ts_ms: 1 }.to_json();
        let delta = ev(Event::StreamDelta {
            task_id: 3,
            channel: "http".into(),
            content: "hi".into(),
            reasoning: Some(String::new()),
            reset: false,
        });
        assert_eq!(
            delta,
            serde_json::json!({"type": "stream_delta", "ts_ms": 1, "task_id": 3, "channel": "http", "content": "hi", "reasoning": ""})
        );
        let reset = ev(Event::StreamDelta {
            task_id: 3,
            channel: "http".into(),
            content: String::new(),
            reasoning: None,
            reset: true,
        });
        assert_eq!(reset["reset"], true);
        assert!(reset.get("reasoning").is_none());
        let task = ev(Event::Task {
            task_id: 9,
            state: TaskState::Queued,
            level: None,
            effective_level: 0,
        });
        assert_eq!(
            task,
            serde_json::json!({"type": "task", "ts_ms": 1, "task_id": 9, "state": "queued", "level": null, "effective_level": 0})
        );
        let failed = ev(Event::AgentOutput {
            task_id: 9,
            text: "x".into(),
            channel: "http".into(),
            source: None,
            error: true,
        });
        assert_eq!(failed["error"], true);
        assert!(failed.get("source").is_none());
        let chain = ev(Event::AgentLlmChain {
            task_id: 1,
            content: String::new(),
            reasoning: String::new(),
            tool_calls: vec![],
            phase: "intermediate",
            turn: 0,
            source: "main".into(),
            model: "m".into(),
            usage: ChainUsage::default(),
        });
        assert_eq!(
            chain["usage"],
            serde_json::json!({"prompt": 0, "completion": 0, "total": 0})
        );
        for (i, kind) in kinds::ALL.iter().enumerate() {
            assert!(
                !kind.is_empty() && kinds::ALL[..i].iter().all(|k| k != kind),
                "{kind} unique"
            );
        }
    }
}
