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

/// The owner's standing choice for some tools (`core.security.approval_rules`), which
/// overrides the mode for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Runs without asking, even after untrusted content (`always`, also `allow`).
    Always,
    /// Asks every time, even in a turn that read nothing untrusted.
    Ask,
    /// Never runs: refused without asking (`never`, also `deny`).
    Never,
}

impl Rule {
    fn parse(word: &str) -> Option<Self> {
        match word.trim() {
            "always" | "allow" => Some(Self::Always),
            "ask" => Some(Self::Ask),
            "never" | "deny" => Some(Self::Never),
            _ => None,
        }
    }
}

/// Parses `glob=rule, glob=rule` (the first matching glob decides). A rule word that
/// is not one of the three asks: a typo must not turn a question into a yes.
pub fn parse_rules(text: &str) -> Vec<(String, Rule)> {
    text.split(',')
        .filter(|e| !e.trim().is_empty())
        .filter_map(|entry| {
            let (glob, word) = entry.split_once('=').unwrap_or((entry, "ask"));
            let glob = glob.trim();
            if glob.is_empty() {
                tracing::warn!("core.security.approval_rules: `{entry}` has no tool name; ignored");
                return None;
            }
            let rule = Rule::parse(word).unwrap_or_else(|| {
                tracing::warn!(
                    "core.security.approval_rules: `{}` for {glob} is not always, ask or never; it asks",
                    word.trim()
                );
                Rule::Ask
            });
            Some((glob.to_owned(), rule))
        })
        .collect()
}

/// What a call must do before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Run,
    Ask,
    /// Refused by the owner's `never` rule.
    Refuse,
}

/// The decision: whether a call of `tool` must wait for the owner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalPolicy {
    pub mode: Mode,
    /// Tool-name globs that may ask.
    pub tools: Vec<String>,
    /// Per-tool rules, first match wins; they override `mode` and `tools`.
    pub rules: Vec<(String, Rule)>,
}

impl ApprovalPolicy {
    /// What a call of `tool` must do, the turn having read untrusted content or not.
    pub fn verdict(&self, tool: &str, tainted: bool) -> Verdict {
        if let Some((_, rule)) = self.rules.iter().find(|(g, _)| crate::pattern::glob(g, tool)) {
            return match rule {
                Rule::Always => Verdict::Run,
                Rule::Ask => Verdict::Ask,
                Rule::Never => Verdict::Refuse,
            };
        }
        let listed = self.tools.iter().any(|g| crate::pattern::glob(g, tool));
        let ask = listed
            && match self.mode {
                Mode::Never => false,
                Mode::Always => true,
                Mode::Untrusted => tainted,
            };
        if ask { Verdict::Ask } else { Verdict::Run }
    }

    /// Whether `tool` asks (see [`Self::verdict`]).
    pub fn needs(&self, tool: &str, tainted: bool) -> bool {
        self.verdict(tool, tainted) == Verdict::Ask
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

/// An open question; defined beside the bus event that carries it, because the bus
/// stands below the firewall.
pub use crate::bus::Question;

struct Open {
    question: Question,
    answer: tokio::sync::oneshot::Sender<bool>,
}

/// The call's arguments as the owner is shown them (as the model wrote them; the
/// runner adds the kernel's caller only after the question), cut to `SUMMARY_CHARS`.
pub fn summary_of(args: &serde_json::Value) -> String {
    let shown = args.to_string();
    let mut summary: String = shown.chars().take(SUMMARY_CHARS).collect();
    if summary.len() < shown.len() {
        summary.push('…');
    }
    summary
}

/// How a risky call ended, as the audit log keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Allowed,
    Denied,
    /// Nobody answered within [`WAIT`].
    TimedOut,
    /// The owner's `never` rule refused it without asking.
    RefusedByRule,
}

/// One line of the audit log: every question and its answer, and every call a rule
/// refused. Kept on disk (`DATA/audit/approvals.jsonl`) because "who allowed that
/// command?" is asked after a restart, not only within one process's life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct AuditRecord {
    pub at_ms: u64,
    /// The question's id (none for a rule's refusal: nothing was asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    pub task_id: u64,
    pub tool: String,
    pub summary: String,
    pub why: String,
    pub outcome: Outcome,
}

/// The bytes past which the audit log is rotated to `approvals.1.jsonl` (one older
/// generation kept): questions are asked by a person, so this is years of them.
const AUDIT_ROTATE_BYTES: u64 = 4 << 20;

/// The approvals' audit log (appended as decisions are taken; off until [`Self::open`]).
#[derive(Debug, Default)]
pub struct AuditLog {
    path: std::sync::OnceLock<std::path::PathBuf>,
    write: parking_lot::Mutex<()>,
}

impl AuditLog {
    /// Keeps the log at `path` from now on (the kernel's boot; tests leave it off).
    pub fn open(&self, path: std::path::PathBuf) {
        let _ = self.path.set(path);
    }

    /// Appends `r`; a failure is logged, never fatal (the decision stands, the
    /// in-memory decision log has it).
    pub fn append(&self, r: &AuditRecord) {
        use std::io::Write as _;
        let Some(path) = self.path.get() else { return };
        let _guard = self.write.lock();
        let res = (|| -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            if std::fs::metadata(path).is_ok_and(|m| m.len() > AUDIT_ROTATE_BYTES) {
                std::fs::rename(path, path.with_extension("1.jsonl"))?;
            }
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
            let mut line = serde_json::to_vec(r).map_err(std::io::Error::other)?;
            line.push(b'\n');
            f.write_all(&line)?;
            f.sync_data()
        })();
        if let Err(e) = res {
            tracing::warn!(
                "the approvals' audit log {} could not be written: {e}; check the disk",
                path.display()
            );
        }
    }

    /// The last `n` records, oldest first (the current file only).
    pub fn tail(&self, n: usize) -> Vec<AuditRecord> {
        let Some(text) = self.path.get().and_then(|p| std::fs::read_to_string(p).ok()) else {
            return Vec::new();
        };
        let mut out: Vec<AuditRecord> = text
            .lines()
            .rev()
            .filter_map(|l| serde_json::from_str(l).ok())
            .take(n)
            .collect();
        out.reverse();
        out
    }
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
        let question = Question {
            id,
            task_id,
            tool: tool.to_owned(),
            summary: summary_of(args),
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
            rules: Vec::new(),
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
    fn the_audit_log_keeps_every_outcome_across_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit/approvals.jsonl");
        let log = AuditLog::default();
        assert!(log.tail(10).is_empty(), "off until opened");
        log.open(path.clone());
        for (i, outcome) in [
            Outcome::Allowed,
            Outcome::Denied,
            Outcome::TimedOut,
            Outcome::RefusedByRule,
        ]
        .into_iter()
        .enumerate()
        {
            log.append(&AuditRecord {
                at_ms: i as u64,
                id: (outcome != Outcome::RefusedByRule).then_some(i as u64),
                task_id: 9,
                tool: "cmd_run".into(),
                summary: r#"{"command":"ls"}"#.into(),
                why: "web page".into(),
                outcome,
            });
        }
        let again = AuditLog::default();
        again.open(path);
        let t = again.tail(3);
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].outcome, Outcome::Denied);
        assert_eq!((t[2].outcome, t[2].id), (Outcome::RefusedByRule, None));
    }

    #[test]
    fn per_tool_rules_override_the_mode() {
        let p = ApprovalPolicy {
            mode: Mode::Untrusted,
            tools: vec!["cmd_*".into()],
            rules: parse_rules("cmd_run=always, plugin_*=never, files_write=ask, web_fetch=maybe, =ask"),
        };
        assert_eq!(p.rules.len(), 4, "the entry without a tool is dropped");
        assert_eq!(
            p.verdict("cmd_run", true),
            Verdict::Run,
            "always: no question even when tainted"
        );
        assert_eq!(
            p.verdict("cmd_exec", true),
            Verdict::Ask,
            "unruled tools follow the mode"
        );
        assert_eq!(p.verdict("plugin_install", false), Verdict::Refuse);
        assert_eq!(
            p.verdict("files_write", false),
            Verdict::Ask,
            "ask: even a trusted turn asks"
        );
        assert_eq!(
            p.verdict("web_fetch", false),
            Verdict::Ask,
            "a typo asks rather than allows"
        );
        assert_eq!(p.verdict("files_read", true), Verdict::Run);
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
