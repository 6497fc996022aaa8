//! What enters the agent: an [`Input`], the [`ReplyTo`] a synchronous caller waits on,
//! the [`Settle`] hook that tells the intake what became of an accepted input, and the
//! closed set of [`Refusal`]s an input can meet on its way in.

use serde::Serialize;
use serde_json::Value;
use tokio::sync::oneshot;

use super::inputdef::Policy;
use crate::llm::Usage;
use crate::scheduler::Level;

/// The output channel of kernel self-input (memory merges, distillation callbacks):
/// such tasks run in a critical section and are never preempted.
pub const CONSOLIDATION_CHANNEL: &str = "_consolidation_";

/// One injected message.
#[derive(Debug)]
pub struct Input {
    /// Caller-visible id of the request (`req_<unix nanos>_<n>`).
    pub request_id: String,
    /// Who sent it: a channel plugin name, optionally `/<device>` (`webui/tab-3`).
    pub source: String,
    /// Where a reply should go (defaults to the source's plugin).
    pub channel: String,
    pub text: String,
    /// Interrupt (with its already decided level) or queued input.
    pub level: Option<Level>,
    /// Kernel self-input rather than input from a channel.
    pub kernel: bool,
    /// Keep this turn out of memory.
    pub no_memory: bool,
    /// What it carries beside its text (images, its channel's memory policy, how it
    /// came in).
    pub payload: Payload,
    /// Who it speaks for: the owner unless a plugin injected it (see
    /// [`crate::firewall::principal`]); decides which tools its turn may call.
    pub principal: crate::firewall::Principal,
    /// The synchronous caller, if any.
    pub reply: ReplyTo,
    /// Whoever accepted the input (the durable inbox, the duplicate guard) learns here
    /// when its task starts and how it ended. The scheduler takes it out on enqueue.
    pub settle: Settle,
}

impl Input {
    /// A plain text input from `source`, replying on the same channel.
    pub fn text(source: &str, text: &str) -> Self {
        Self {
            request_id: new_request_id(),
            source: source.to_owned(),
            channel: crate::scheduler::source_root(source).to_owned(),
            text: text.to_owned(),
            level: None,
            kernel: false,
            no_memory: false,
            payload: Default::default(),
            principal: crate::firewall::Principal::owner(),
            reply: ReplyTo::none(),
            settle: Settle::none(),
        }
    }

    /// A kernel interrupt from `source`: the kernel telling the model something it must
    /// act on now (a crashed task, a stopped turn's notice, a resident whose window is
    /// full). It runs at L4 on the `kernel` channel, is marked as the kernel's own both
    /// on the input and in its stored payload, and replies to no one.
    pub fn kernel_interrupt(source: &str, text: &str) -> Self {
        let mut input = Self::text(source, text);
        input.channel = "kernel".into();
        input.kernel = true;
        input.level = Some(Level::L4);
        input.payload.kernel = true;
        input
    }

    pub fn is_interrupt(&self) -> bool {
        self.level.is_some()
    }

    pub fn is_consolidation(&self) -> bool {
        self.channel == CONSOLIDATION_CHANNEL
    }
}

/// What an input carries beside its text, each field set by the kernel where it knows
/// it: the HTTP route or a plugin's injection (images, `again`), the door (its channel's
/// definition), the intake (an interrupt, a kernel notice), the offload. It is stored
/// with the input in the durable inbox and shown as its context entry's `meta`, under
/// these JSON names — the names it always had, so an inbox an earlier version wrote
/// reads as it was written: a field that does not read is left at its default, and a
/// key this version does not know is kept in `other` as it was.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Payload {
    /// The images it carries (`media:` blocks), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "lenient")]
    pub media: Vec<crate::memory::media::parts::MediaRef>,
    /// The owner asked again on purpose (the WebUI's Regenerate): the request's own id,
    /// which makes it another input for the duplicate guard however soon it follows.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
    pub again: Option<String>,
    /// What memory keeps of it, when its channel's cleaner changed the text.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
    pub memory_text: Option<String>,
    /// Whether its turn recalls (its channel's definition).
    #[serde(default, skip_serializing_if = "is_default", deserialize_with = "lenient")]
    pub recall_policy: super::inputdef::RecallPolicy,
    /// Whether the context is pruned against it as it arrives (its channel's definition).
    #[serde(default, skip_serializing_if = "is_default", deserialize_with = "lenient")]
    pub context_policy: super::inputdef::ContextPolicy,
    /// It came in as an interrupt, from `interrupt_source` on `interrupt_channel`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not", deserialize_with = "lenient")]
    pub interrupt: bool,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
    pub interrupt_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
    pub interrupt_channel: Option<String>,
    /// The kernel's own notice.
    #[serde(default, skip_serializing_if = "std::ops::Not::not", deserialize_with = "lenient")]
    pub kernel: bool,
    /// Handed from the main agent's backlog to a triage assistant (who, and when).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
    pub offloaded_from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
    pub offloaded_at: Option<String>,
    /// Keys an earlier version stored that this one does not know, kept as they were.
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// A stored field read leniently: one that does not read (a row from an older
/// version, hand-edited) is its default, and the rest of the payload still reads.
fn lenient<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned + Default,
{
    let v = <Value as serde::Deserialize>::deserialize(d)?;
    Ok(serde_json::from_value(v).unwrap_or_default())
}

impl Payload {
    /// What the duplicate guard compares for an input with `text`: the text, plus the
    /// images' ids when there are any (the same question about another photo is not a
    /// duplicate), plus the request's id when the owner asked again on purpose.
    pub fn dedupe_key<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        if self.media.is_empty() && self.again.is_none() {
            return std::borrow::Cow::Borrowed(text);
        }
        let ids: Vec<&str> = self.media.iter().map(|r| r.id.as_str()).collect();
        std::borrow::Cow::Owned(format!(
            "{text}\0{}\0{}",
            ids.join(","),
            self.again.as_deref().unwrap_or("")
        ))
    }

    /// What its channel's definition says about its memory (set at the door).
    pub fn policy(&self) -> Policy {
        Policy {
            memory_text: self.memory_text.clone(),
            recall: self.recall_policy,
            context: self.context_policy,
        }
    }

    /// Sets what its channel's definition says about its memory (whatever the caller
    /// set is replaced).
    pub fn set_policy(&mut self, p: Policy) {
        self.memory_text = p.memory_text;
        self.recall_policy = p.recall;
        self.context_policy = p.context;
    }

    /// The payload as JSON (the inbox's column, a context entry's `meta`).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a payload serialises")
    }

    /// A payload stored as JSON text (an unreadable one is empty).
    pub fn parse(text: &str) -> Self {
        serde_json::from_str(text).unwrap_or_default()
    }
}

/// A fresh request id.
pub fn new_request_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("req_{nanos}_{}", N.fetch_add(1, Ordering::Relaxed))
}

/// How a task ended, as its synchronous caller sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Reply {
    pub task_id: u64,
    pub request_id: String,
    /// The final text (empty when skipped or failed).
    pub content: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reasoning_content: String,
    /// Why the input was not run (serialized as its code: `empty_input`, `duplicate`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<Refusal>,
    /// Why the task failed (what to do next included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub tools_used: Vec<String>,
    pub usage: Usage,
    /// Tokens of recalled memory (and timeline) the answer's prompt carried.
    pub memory_tokens: usize,
    /// The `error` is the owner's budget refusing the call (HTTP callers get 429).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub over_budget: bool,
}

/// The reply path of a synchronous caller. Dropping it unanswered (a task that
/// panicked, a daemon shutting down) answers with an error, so no caller ever hangs.
#[derive(Debug, Default)]
pub struct ReplyTo {
    tx: Option<oneshot::Sender<Reply>>,
    /// Filled in when the task gets its id, for the error reply on drop.
    pub task_id: u64,
    pub request_id: String,
}

impl ReplyTo {
    /// No caller waits (asynchronous injection).
    pub fn none() -> Self {
        Self::default()
    }

    /// A caller waits on the returned receiver.
    pub fn channel(request_id: &str) -> (Self, oneshot::Receiver<Reply>) {
        let (tx, rx) = oneshot::channel();
        (
            Self {
                tx: Some(tx),
                task_id: 0,
                request_id: request_id.to_owned(),
            },
            rx,
        )
    }

    pub fn is_waiting(&self) -> bool {
        self.tx.is_some()
    }

    /// Answers the caller (once; later calls do nothing).
    pub fn send(&mut self, mut reply: Reply) {
        if let Some(tx) = self.tx.take() {
            reply.task_id = self.task_id;
            reply.request_id = self.request_id.clone();
            let _ = tx.send(reply);
        }
    }

    /// Answers "not run" with the reason.
    pub fn skip(&mut self, reason: Refusal) {
        if self.tx.is_none() {
            tracing::info!(request = %self.request_id, reason = reason.code(), "input dropped (no caller waiting)");
        }
        self.send(Reply {
            skipped: Some(reason),
            ..Default::default()
        });
    }

    /// Answers with an error.
    pub fn fail(&mut self, error: impl Into<String>) {
        self.send(Reply {
            error: Some(error.into()),
            ..Default::default()
        });
    }
}

impl Drop for ReplyTo {
    fn drop(&mut self) {
        if self.tx.is_some() {
            self.fail("the task ended without answering (it crashed or the daemon is stopping); see the daemon log");
        }
    }
}

/// Why an input was not run. Closed: the HTTP edge and the CLI socket map every case
/// (status code, wording) with an exhaustive `match`, so a new refusal cannot reach a
/// caller unmapped. The texts are what the HTTP API has always answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Nothing to run (blank text).
    #[error("`text` is empty")]
    EmptyInput,
    /// The same text from the same source is still queued or running, or succeeded,
    /// and arrived less than the duplicate window ago.
    #[error("the same text from the same source arrived less than 10 s ago; it was dropped")]
    Duplicate,
    /// The ready queue (256) is full and the input could not wait on disk.
    #[error("the agent's queue is full (256 waiting); retry later")]
    QueueFull,
    /// The scheduler stopped before the input ran.
    #[error("the agent stopped before the input ran; send it again once the daemon is back")]
    AgentStopped,
    /// The durable inbox could not commit the input, so it was not accepted.
    #[error("the input could not be stored, so it was not accepted (resend it once fixed): {0}")]
    NotStored(String),
    /// An intake or the scheduler did not answer (restarting, or the daemon is stopping).
    #[error("the agent did not take the input ({0}); it may be restarting: retry in a moment")]
    Unavailable(String),
    /// The text is over `core.input_processing.text.max_bytes`: refused before anything
    /// is stored, so one oversized message cannot sit in the window and slow every turn.
    #[error(
        "the message is {bytes} bytes, over the limit of {limit} bytes (core.input_processing.text.max_bytes); send it in parts, save it as a knowledge document, or raise the setting"
    )]
    TooLarge { bytes: usize, limit: usize },
    /// It waited in a resident sub-agent that the main agent destroyed with
    /// `residual=drop` (spec §6.2).
    #[error("the sub-agent holding this input was removed and its waiting work dropped; send it again")]
    ResidualDropped,
}

impl Refusal {
    /// [`Refusal::TooLarge`] when `text` is over the text cap as committed now
    /// ([`crate::config::live::max_text_bytes`]); every way in asks this before storing.
    pub fn check_size(text: &str) -> Result<(), Refusal> {
        let limit = crate::config::live::max_text_bytes();
        if text.len() > limit {
            return Err(Refusal::TooLarge {
                bytes: text.len(),
                limit,
            });
        }
        Ok(())
    }

    /// The short machine-readable code (`empty_input`, `duplicate`, `queue_full`,
    /// `agent_stopped`, `not_stored`, `unavailable`), as serialized in a [`Reply`].
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::EmptyInput => "empty_input",
            Refusal::Duplicate => "duplicate",
            Refusal::QueueFull => "queue_full",
            Refusal::AgentStopped => "agent_stopped",
            Refusal::NotStored(_) => "not_stored",
            Refusal::Unavailable(_) => "unavailable",
            Refusal::ResidualDropped => "residual_dropped_by_parent",
            Refusal::TooLarge { .. } => "too_large",
        }
    }
}

impl Serialize for Refusal {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.code())
    }
}

impl From<crate::SendError> for Refusal {
    fn from(e: crate::SendError) -> Self {
        Refusal::Unavailable(e.to_string())
    }
}

/// How an accepted input's task ended, as its acceptor (inbox, duplicate guard) sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The task answered (`done`).
    Succeeded,
    /// The task failed (LLM errors, a crash).
    Failed,
    /// The user pressed stop.
    Cancelled,
    /// The scheduler dropped it unrun for good (the interrupt queues overflowed).
    Dropped,
    /// It never ran because the scheduler stopped (daemon shutdown, scheduler restart):
    /// a stored input stays pending and runs after the next start.
    Abandoned,
}

impl Outcome {
    /// From the terminal state a task reports in `Finished`; a non-terminal state
    /// there would be a bug and counts as a failure, so a retry is never blocked.
    pub fn from_state(state: crate::bus::TaskState) -> Self {
        use crate::bus::TaskState;
        match state {
            TaskState::Done => Outcome::Succeeded,
            TaskState::Cancelled => Outcome::Cancelled,
            TaskState::Failed | TaskState::Queued | TaskState::Running | TaskState::Suspended | TaskState::Resumed => {
                Outcome::Failed
            }
        }
    }

    /// Whether the input is finished for good (its stored copy can go).
    pub fn is_final(self) -> bool {
        self != Outcome::Abandoned
    }
}

/// A step in an accepted input's life, as reported to its [`Settle`] hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lifecycle {
    /// Its task started running (counted, so an input that kills the daemon every time
    /// it runs is given up after a few starts instead of looping forever).
    Started,
    /// Why its task failed, just before [`Lifecycle::Ended`] with [`Outcome::Failed`]
    /// (kept with the input on the inbox's dead-letter list).
    Error(String),
    /// Its task ended (or it was dropped or abandoned unrun).
    Ended(Outcome),
}

type SettleFn = Box<dyn FnMut(Lifecycle) + Send>;

/// The acceptor's hook on an input. The scheduler reports [`Lifecycle::Started`] and
/// exactly one [`Lifecycle::Ended`] for every input it enqueued. An input the scheduler
/// refused is not reported: the submitter sees the refusal and cleans up itself.
#[derive(Default)]
pub struct Settle(Option<SettleFn>);

impl Settle {
    /// Nobody to tell.
    pub fn none() -> Self {
        Self(None)
    }

    pub fn new(f: impl FnMut(Lifecycle) + Send + 'static) -> Self {
        Self(Some(Box::new(f)))
    }

    pub fn is_armed(&self) -> bool {
        self.0.is_some()
    }

    /// The input's task started.
    pub fn started(&mut self) {
        if let Some(f) = &mut self.0 {
            f(Lifecycle::Started);
        }
    }

    /// The input's task failed with `error`; then it ended.
    pub fn fail(&mut self, error: String) {
        if let Some(f) = &mut self.0 {
            f(Lifecycle::Error(error));
        }
        self.end(Outcome::Failed);
    }

    /// The input ended; later calls do nothing.
    pub fn end(&mut self, outcome: Outcome) {
        if let Some(mut f) = self.0.take() {
            f(Lifecycle::Ended(outcome));
        }
    }
}

impl std::fmt::Debug for Settle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_armed() {
            "Settle(armed)"
        } else {
            "Settle(none)"
        })
    }
}

/// What the durable inbox keeps of an input: everything needed to run it again after a
/// restart (the reply path and the hooks belong to the process that died).
#[derive(Debug, Clone, PartialEq)]
pub struct InputRecord {
    pub request_id: String,
    pub source: String,
    pub channel: String,
    pub text: String,
    pub level: Option<Level>,
    pub no_memory: bool,
    pub payload: Payload,
    pub principal: crate::firewall::Principal,
}

impl Input {
    /// The part of this input that survives a restart.
    pub fn record(&self) -> InputRecord {
        InputRecord {
            request_id: self.request_id.clone(),
            source: self.source.clone(),
            channel: self.channel.clone(),
            text: self.text.clone(),
            level: self.level,
            no_memory: self.no_memory,
            payload: self.payload.clone(),
            principal: self.principal.clone(),
        }
    }
}

impl InputRecord {
    /// An input again (no caller waits: the one that sent it is gone or got its 202).
    pub fn to_input(&self) -> Input {
        Input {
            request_id: self.request_id.clone(),
            source: self.source.clone(),
            channel: self.channel.clone(),
            text: self.text.clone(),
            level: self.level,
            kernel: false,
            no_memory: self.no_memory,
            payload: self.payload.clone(),
            principal: self.principal.clone(),
            reply: ReplyTo::none(),
            settle: Settle::none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_is_stored_under_the_names_it_always_had_and_reads_leniently() {
        let p = Payload {
            media: vec![crate::memory::media::parts::MediaRef {
                id: "blk_media_dddddddddddd".into(),
                mime: "image/png".into(),
                width: 2,
                height: 3,
            }],
            interrupt: true,
            interrupt_source: Some("webui".into()),
            kernel: true,
            ..Default::default()
        };
        let v = p.to_value();
        assert_eq!(v["media"][0]["id"], "blk_media_dddddddddddd");
        assert_eq!(
            (&v["interrupt"], &v["interrupt_source"], &v["kernel"]),
            (
                &serde_json::json!(true),
                &serde_json::json!("webui"),
                &serde_json::json!(true)
            )
        );
        assert!(
            v.get("again").is_none() && v.get("recall_policy").is_none(),
            "defaults are not written: {v}"
        );
        assert_eq!(Payload::parse(&v.to_string()), p);
        // A row from an older version: a field that does not read is its default, the
        // rest still reads, and a key this version does not know is kept.
        let old = Payload::parse(
            r#"{"media": "not a list", "again": "req_9", "recall_policy": "sometimes", "group_id": 42}"#,
        );
        assert!(old.media.is_empty());
        assert_eq!(old.again.as_deref(), Some("req_9"));
        assert_eq!(old.recall_policy, super::super::inputdef::RecallPolicy::Auto);
        assert_eq!(old.other["group_id"], 42);
        assert_eq!(old.to_value()["group_id"], 42);
        assert_eq!(Payload::parse("not json"), Payload::default());
    }

    #[test]
    fn the_duplicate_guard_tells_other_images_and_a_regenerate_apart() {
        let mut p = Payload::default();
        assert_eq!(p.dedupe_key("hi"), "hi");
        p.media = vec![crate::memory::media::parts::MediaRef {
            id: "blk_media_dddddddddddd".into(),
            mime: "image/png".into(),
            width: 1,
            height: 1,
        }];
        let with_image = p.dedupe_key("hi").into_owned();
        assert_ne!(with_image, "hi");
        p.again = Some("req_1".into());
        assert_ne!(p.dedupe_key("hi"), with_image);
    }

    #[test]
    fn an_unanswered_caller_gets_an_error_not_a_hang() {
        let (mut r, rx) = ReplyTo::channel("req_1");
        r.task_id = 7;
        drop(r);
        let reply = rx.blocking_recv().unwrap();
        assert_eq!(reply.task_id, 7);
        assert!(reply.error.unwrap().contains("without answering"));
    }

    #[test]
    fn a_reply_is_sent_once() {
        let (mut r, rx) = ReplyTo::channel("req_2");
        r.send(Reply {
            content: "hi".into(),
            ..Default::default()
        });
        r.skip(Refusal::Duplicate);
        assert_eq!(rx.blocking_recv().unwrap().content, "hi");
    }

    #[test]
    fn a_skipped_reply_serializes_the_refusal_code() {
        let r = Reply {
            skipped: Some(Refusal::QueueFull),
            ..Default::default()
        };
        assert_eq!(serde_json::to_value(&r).unwrap()["skipped"], "queue_full");
        assert_eq!(Refusal::NotStored("disk full".into()).code(), "not_stored");
    }

    #[test]
    fn settle_reports_start_and_one_end() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let mut s = Settle::new(move |l| s2.lock().unwrap().push(l));
        s.started();
        s.end(Outcome::Succeeded);
        s.end(Outcome::Failed);
        s.started();
        assert_eq!(
            *seen.lock().unwrap(),
            [Lifecycle::Started, Lifecycle::Ended(Outcome::Succeeded)]
        );
        assert_eq!(
            Outcome::from_state(crate::bus::TaskState::Cancelled),
            Outcome::Cancelled
        );
        assert_eq!(Outcome::from_state(crate::bus::TaskState::Done), Outcome::Succeeded);
        assert_eq!(Outcome::from_state(crate::bus::TaskState::Running), Outcome::Failed);
        assert!(!Outcome::Abandoned.is_final());
    }

    #[test]
    fn a_kernel_interrupt_is_the_kernels_own_l4_on_the_kernel_channel() {
        let i = Input::kernel_interrupt("child/r1", "look at r1");
        assert_eq!(
            (i.source.as_str(), i.channel.as_str(), i.text.as_str()),
            ("child/r1", "kernel", "look at r1")
        );
        assert_eq!(i.level, Some(Level::L4));
        assert!(i.kernel && i.payload.kernel && i.is_interrupt());
        assert!(!i.reply.is_waiting());
        // Stored and read back (a restart's inbox), it is still the kernel's.
        assert!(i.record().to_input().payload.kernel);
    }

    #[test]
    fn a_record_round_trips_into_an_input() {
        let mut i = Input::text("qq/dev", "hello");
        i.level = Some(Level::L3);
        i.no_memory = true;
        i.payload.other.insert("k".into(), serde_json::json!(1));
        i.payload.kernel = true;
        let back = i.record().to_input();
        assert_eq!(back.record(), i.record());
        assert!(!back.reply.is_waiting());
    }
}
