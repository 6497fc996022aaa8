//! What enters the agent: an [`Input`], and the [`ReplyTo`] a synchronous caller waits on.

use serde::Serialize;
use serde_json::Value;
use tokio::sync::oneshot;

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
    /// Extra fields of the injection (routing metadata and the like).
    pub payload: serde_json::Map<String, Value>,
    /// The synchronous caller, if any.
    pub reply: ReplyTo,
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
            reply: ReplyTo::none(),
        }
    }

    pub fn is_interrupt(&self) -> bool {
        self.level.is_some()
    }

    pub fn is_consolidation(&self) -> bool {
        self.channel == CONSOLIDATION_CHANNEL
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
    /// Why the input was not run (`empty_input`, `duplicate`, `queue_full`, `agent_stopped`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Why the task failed (what to do next included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub tools_used: Vec<String>,
    pub usage: Usage,
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

    /// Answers "not run" with a reason.
    pub fn skip(&mut self, reason: &str) {
        if self.tx.is_none() {
            tracing::info!(request = %self.request_id, reason, "input dropped (no caller waiting)");
        }
        self.send(Reply {
            skipped: Some(reason.to_owned()),
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

#[cfg(test)]
mod tests {
    use super::*;

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
        r.skip("duplicate");
        assert_eq!(rx.blocking_recv().unwrap().content, "hi");
    }
}
