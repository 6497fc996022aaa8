//! Asking the owner before a risky action, once the turn has read untrusted content.
//!
//! A prompt injection is one web page away: after a turn has read something nobody
//! vouches for — a fetched page, an MCP tool's answer, a tool result the review
//! flagged, a guest's input — its side-effecting calls (commands, terminals, file
//! writes, plugin installs) wait for the owner's yes in the WebUI, the CLI or over the
//! API. The owner chooses when to be asked (`core.security.approval`: `untrusted`,
//! `always`, `never`) and for which tools (`core.security.approval_tools`, globs); every
//! answer — and every question nobody answered in [`WAIT`] — is in the firewall's
//! decision log.
//!
//! [`ApprovalPolicy`] is the decision (plain data in, a yes/no out); [`Approvals`] holds
//! the open questions and hands each answer to the waiting call.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

/// How long a call waits for the owner before it is refused.
pub const WAIT: Duration = Duration::from_secs(300);

/// When to ask (`core.security.approval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// After the turn read untrusted content.
    #[default]
    Untrusted,
    /// Before every listed tool.
    Always,
    /// Never.
    Never,
}

impl Mode {
    pub fn parse(s: &str) -> Self {
        match s.trim() {
            "always" => Self::Always,
            "never" => Self::Never,
            _ => Self::Untrusted,
        }
    }
}

/// The decision: whether a call of `tool` must wait for the owner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalPolicy {
    pub mode: Mode,
    /// Tool-name globs that may ask.
    pub tools: Vec<String>,
}

impl ApprovalPolicy {
    /// Whether `tool` asks, the turn having read untrusted content or not.
    pub fn needs(&self, tool: &str, tainted: bool) -> bool {
        let listed = self.tools.iter().any(|g| super::policy::glob(g, tool));
        listed
            && match self.mode {
                Mode::Never => false,
                Mode::Always => true,
                Mode::Untrusted => tainted,
            }
    }
}

/// Why an approval could not be given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalError {
    #[error(
        "no open approval {0}: it was answered, timed out, or never existed; GET /api/v1/approvals lists the open ones"
    )]
    Unknown(u64),
}

/// One open question, as the API and the WebUI show it.
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

struct Open {
    question: Question,
    answer: tokio::sync::oneshot::Sender<bool>,
}

/// The open questions.
#[derive(Default)]
pub struct Approvals {
    next: AtomicU64,
    open: parking_lot::Mutex<BTreeMap<u64, Open>>,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals")
            .field("open", &self.open.lock().len())
            .finish()
    }
}

/// The longest argument summary a question carries.
const SUMMARY_CHARS: usize = 600;

impl Approvals {
    /// Opens a question; the receiver gets the owner's answer.
    pub fn ask(
        &self,
        task_id: u64,
        tool: &str,
        args: &serde_json::Value,
        why: &str,
    ) -> (Question, tokio::sync::oneshot::Receiver<bool>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        // The kernel's own `__origin` is no part of what the model asked for.
        let shown = match args {
            serde_json::Value::Object(o) if o.contains_key(crate::stages::ORIGIN_ARG) => {
                let mut o = o.clone();
                o.remove(crate::stages::ORIGIN_ARG);
                serde_json::Value::Object(o).to_string()
            }
            other => other.to_string(),
        };
        let mut summary: String = shown.chars().take(SUMMARY_CHARS).collect();
        if summary.len() < shown.len() {
            summary.push('…');
        }
        let question = Question {
            id,
            task_id,
            tool: tool.to_owned(),
            summary,
            why: why.to_owned(),
            at_ms: crate::clock::now_ms().max(0) as u64,
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.open.lock().insert(
            id,
            Open {
                question: question.clone(),
                answer: tx,
            },
        );
        (question, rx)
    }

    /// The owner's answer to question `id`.
    pub fn answer(&self, id: u64, allow: bool) -> Result<Question, ApprovalError> {
        let open = self.open.lock().remove(&id).ok_or(ApprovalError::Unknown(id))?;
        // The call may have given up (timed out) just now: the answer is then moot.
        let _ = open.answer.send(allow);
        Ok(open.question)
    }

    /// Withdraws a question nobody answered.
    pub fn withdraw(&self, id: u64) {
        self.open.lock().remove(&id);
    }

    /// The open questions, oldest first.
    pub fn list(&self) -> Vec<Question> {
        self.open.lock().values().map(|o| o.question.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_tools_ask_after_untrusted_content_by_default() {
        let p = ApprovalPolicy {
            mode: Mode::Untrusted,
            tools: vec!["cmd_*".into(), "files_write".into()],
        };
        assert!(!p.needs("cmd_run", false));
        assert!(p.needs("cmd_run", true));
        assert!(!p.needs("files_read", true));
        let always = ApprovalPolicy {
            mode: Mode::Always,
            ..p.clone()
        };
        assert!(always.needs("files_write", false));
        let never = ApprovalPolicy { mode: Mode::Never, ..p };
        assert!(!never.needs("cmd_run", true));
    }

    #[test]
    fn an_answer_reaches_the_waiting_call_once() {
        let a = Approvals::default();
        let (q, mut rx) = a.ask(7, "cmd_run", &serde_json::json!({"command": "ls"}), "web page");
        assert_eq!(a.list(), vec![q.clone()]);
        assert_eq!(a.answer(q.id, true).unwrap().tool, "cmd_run");
        assert_eq!(rx.try_recv(), Ok(true));
        assert_eq!(a.answer(q.id, false), Err(ApprovalError::Unknown(q.id)));
        assert!(a.list().is_empty());
    }
}
