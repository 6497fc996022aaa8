//! `spawn_child` and `child_result` (spec §6.3): one-shot helpers with their own turn.
//!
//! A helper is a supervised subtree `kernel/agent/children/child_<n>` with two actors:
//! `context`, its own empty context window (SQLite in memory: the helper sees its task,
//! not the parent's conversation — the spec's "minimal prompt"), and `task`, the same
//! [`TaskActor`] the main agent runs — the same pure turn core, the same tool runner
//! and firewall — with its own limits: `max_turns` tool rounds, no output channels, and
//! the [`REFUSED`] tools neither offered nor callable. Its scheduler link
//! (`ChildPort`) never preempts: a helper has one task and nothing else to run.
//!
//! When the task ends, its answer (or error) goes into the [`ChildBook`], the subtree
//! leaves the tree, and a self message on the spawning task's channel tells the parent
//! (it fetches the full answer with `child_result`). Helpers run in parallel with each
//! other and with the parent. A crashed helper is not restarted: its tools may have had
//! effects, so its end is reported as a failure and the parent decides.
//!
//! The policy lives in [`core`]; this module only executes it.

pub mod core;

use std::sync::Arc;

use parking_lot::Mutex;

pub use self::core::{ChildBook, ChildCmd, ChildEnd, ChildError, Fetch, Spawn};
use super::channels::Channels;
use super::input::{Input, ReplyTo};
use super::protocol::{Finished, SafePoint, SchedulerLink, SchedulerPort};
use super::scheduler::{SchedulerActor, submit_own};
use super::task::{TaskActor, TaskDeps};
use crate::addr::{SendError, TAddr};
use crate::i18n::Msg;
use crate::memory::context::actor::ContextActor;
use crate::memory::store::MemoryStore;
use crate::stages::{Caller, ToolHandler, ToolSpec};
use crate::supervisor::{RestartPolicy, SupervisorConfig, SupervisorRef};
use futures_util::future::BoxFuture;

/// The owner of the agent's own tools (`spawn_child`, `child_result`,
/// `resident_agents`): a `.` no plugin name can contain, so no plugin's stop withdraws them.
pub const OWNER: &str = "builtin.agent";
pub use super::subagents::{RESULT_TOOL, SPAWN_TOOL};
/// What a helper may not call (spec §6.3, plus the resident control plane: a helper
/// must not outlive its job through a resident). `output_send__*` are absent because
/// a helper has no output channels at all.
pub const REFUSED: &[&str] = &[
    SPAWN_TOOL,
    "output_list_channels",
    "plgreload",
    super::subagents::RESIDENT_TOOL,
    super::subagents::NOTIFY_TOOL,
    super::subagents::NOTE_TOOL,
];
/// The first task id of helpers' turns (apart from the scheduler's ids on the bus).
const TASK_ID_BASE: u64 = 1 << 40;
/// Characters of a result shown in the announcement.
const PREVIEW_CHARS: usize = 200;

/// `spawn_child`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct SpawnArgs {
    /// the job, complete and self-contained: the helper sees nothing of this conversation
    pub task: String,
    /// most tool rounds (default 5)
    #[schemars(range(min = core::MIN_TURNS, max = core::MAX_TURNS))]
    #[serde(default)]
    pub max_turns: Option<i64>,
    #[serde(rename = "__origin", default)]
    #[schemars(skip)]
    pub caller: Caller,
}

/// `child_result`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct ResultArgs {
    pub id: String,
}

/// Why a helper tool did nothing (or a helper failed).
#[derive(Debug, thiserror::Error)]
pub enum ChildToolError {
    #[error(transparent)]
    Refused(#[from] core::ChildError),
    /// Booked, but its subtree did not start (the text says what to do).
    #[error("{0}")]
    NotStarted(String),
    #[error("helper {id} failed: {error}")]
    Failed { id: String, error: String },
}

/// The scheduler link of a helper's only task: never yield, never a stop, nothing to
/// submit (a kernel notice of a helper's overflow recovery is logged, not run).
struct ChildPort {
    id: String,
}

impl SchedulerPort for ChildPort {
    fn safe_point(&self, _: SafePoint) -> BoxFuture<'static, Result<bool, SendError>> {
        Box::pin(async { Ok(false) })
    }
    fn take_stop(&self, _: u64) -> BoxFuture<'static, Result<bool, SendError>> {
        Box::pin(async { Ok(false) })
    }
    fn consume_cancel(&self, _: u64) -> BoxFuture<'static, Result<bool, SendError>> {
        Box::pin(async { Ok(false) })
    }
    fn finished(&self, _: Finished) -> Result<(), SendError> {
        Ok(())
    }
    fn submit(&self, input: super::door::Admitted) -> Result<(), SendError> {
        tracing::info!(child = %self.id, notice = %input.text, "helper's kernel notice not run (a helper has no queue)");
        Ok(())
    }
}

struct Inner {
    book: Mutex<ChildBook>,
    /// `kernel/agent/children`.
    sup: SupervisorRef,
    parent: Arc<TaskDeps>,
    /// Where announcements go.
    scheduler: TAddr<SchedulerActor>,
}

/// The agent's helpers (cheap to clone).
#[derive(Clone)]
pub struct Children(Arc<Inner>);

impl Children {
    pub fn new(sup: SupervisorRef, parent: Arc<TaskDeps>, scheduler: TAddr<SchedulerActor>) -> Self {
        Self(Arc::new(Inner {
            book: Mutex::default(),
            sup,
            parent,
            scheduler,
        }))
    }

    /// The ids of the helpers running now.
    pub fn running(&self) -> Vec<String> {
        self.0.book.lock().running_ids()
    }

    /// Every helper still known (running, or its result kept), for the operator.
    pub fn view(&self) -> Vec<core::ChildView> {
        self.0.book.lock().view()
    }

    /// `spawn_child`: books the helper, starts its subtree, answers at once.
    pub async fn spawn(&self, args: SpawnArgs) -> Result<String, ChildToolError> {
        // The helper speaks for its caller's principal (a guest's helper is a guest).
        let caller = args.caller;
        let spawn = self.0.book.lock().spawn(&args.task, args.max_turns, &caller.channel)?;
        tracing::info!(child = %spawn.id, max_turns = spawn.max_turns, notify = %spawn.notify, "spawn_child");
        if let Err(e) = self.start(&spawn, caller.principal).await {
            let text = format!("the helper could not be started ({e}); do the job yourself or retry later");
            tracing::error!(child = %spawn.id, "{text}");
            self.ended(&spawn.id, ChildEnd::Failed(text.clone()));
            return Err(ChildToolError::NotStarted(text));
        }
        Ok(Msg::ChildStarted {
            id: &spawn.id,
            max_turns: spawn.max_turns,
        }
        .text())
    }

    async fn start(
        &self,
        spawn: &Spawn,
        principal: crate::firewall::Principal,
    ) -> Result<(), crate::supervisor::SpawnError> {
        let sub = self
            .0
            .sup
            .supervisor(&spawn.id, RestartPolicy::Temporary, SupervisorConfig::default())
            .await?;
        // A helper's memory lives as long as it does: in-memory stores, one per tier
        // (what its context archives stays in its own document tier).
        let documents = sub
            .worker("documents", RestartPolicy::Temporary, || {
                let store = MemoryStore::open_in_memory()?;
                Ok(crate::memory::documents::DocumentsActor::new(store))
            })
            .await?;
        let docs = documents.clone();
        let context = sub
            .worker("context", RestartPolicy::Temporary, move || {
                let store = MemoryStore::open_in_memory()?;
                Ok(ContextActor::open(store, docs.clone())?)
            })
            .await?;
        let deps = Arc::new(self.0.parent.derived(
            (context, documents),
            None,
            Channels::default(),
            spawn.max_turns,
            REFUSED,
            spawn.id.clone(),
        ));
        let n: u64 = spawn.id.trim_start_matches("child_").parse().unwrap_or(0);
        let (me, id, task, principal) = (self.clone(), spawn.id.clone(), spawn.task.clone(), principal);
        sub.worker("task", RestartPolicy::Temporary, move || {
            let mut input = Input::text("agent", &task);
            input.channel = format!("child/{id}");
            input.no_memory = true;
            input.principal = principal.clone();
            let (reply, rx) = ReplyTo::channel(&input.request_id);
            input.reply = reply;
            let (me, child) = (me.clone(), id.clone());
            actix::spawn(async move {
                let end = match rx.await {
                    Ok(r) => match (r.error, r.skipped) {
                        (Some(e), _) => ChildEnd::Failed(e),
                        (None, Some(s)) => ChildEnd::Failed(s.to_string()),
                        (None, None) => ChildEnd::Done(r.content),
                    },
                    Err(_) => ChildEnd::Failed("the helper ended without answering".into()),
                };
                me.ended(&child, end);
            });
            let port = SchedulerLink::new(ChildPort { id: id.clone() });
            let input = super::door::Admitted::own(input).map_err(|r| r.to_string())?;
            Ok(TaskActor::new(TASK_ID_BASE + n, input, None, deps.clone(), port))
        })
        .await?;
        Ok(())
    }

    /// Feeds a helper's end to the book and executes what it answers.
    fn ended(&self, id: &str, end: ChildEnd) {
        tracing::info!(child = id, ok = matches!(end, ChildEnd::Done(_)), "helper ended");
        let cmds = self.0.book.lock().ended(id, end);
        for cmd in cmds {
            match cmd {
                ChildCmd::Remove { id } => {
                    let (sup, full) = (self.0.sup.clone(), format!("{}/{id}", self.0.sup.id()));
                    actix::spawn(async move {
                        if let Err(e) = sup.remove_child(&full).await {
                            tracing::warn!(child = %full, "helper's actors not removed: {e}");
                        }
                    });
                }
                ChildCmd::Announce { id, channel, end } => {
                    let preview: String = end.text().chars().take(PREVIEW_CHARS).collect();
                    let text = Msg::ChildEnded {
                        id: &id,
                        ok: matches!(end, ChildEnd::Done(_)),
                        preview: &preview,
                    }
                    .text();
                    let mut notice = Input::text(&format!("child/{id}"), &text);
                    notice.channel = channel;
                    notice.kernel = true;
                    if let Err(e) = submit_own(&self.0.scheduler, notice) {
                        tracing::warn!(child = %id, "helper's end not announced (the result stays for child_result): {e}");
                    }
                }
            }
        }
    }

    /// `child_result`.
    pub fn fetch(&self, id: &str) -> Result<String, ChildToolError> {
        let fetch = self.0.book.lock().fetch(id)?;
        Ok(match fetch {
            Fetch::Running => Msg::ChildRunning { id }.text(),
            Fetch::Result(ChildEnd::Done(text)) => text,
            Fetch::Result(ChildEnd::Failed(error)) => {
                return Err(ChildToolError::Failed {
                    id: id.to_owned(),
                    error,
                });
            }
            Fetch::AlreadyDelivered => Msg::ChildDelivered { id }.text(),
            Fetch::Evicted => Msg::ChildEvicted {
                id,
                kept: core::KEPT_RESULTS,
            }
            .text(),
        })
    }

    /// The two tools, to register with the stage host.
    pub fn tools(&self) -> Vec<(ToolSpec, Arc<dyn ToolHandler>)> {
        let mut spawn = ToolSpec::typed::<SpawnArgs>(
            SPAWN_TOOL,
            "Start a helper that does one self-contained job on its own, in parallel with you (it has the same tools, except output channels and helpers). Returns at once with its id; when it ends you get a message, then child_result gives its answer. Use it to fan out independent work.",
        );
        spawn.plugin = OWNER.into();
        spawn.origin = true;
        spawn = spawn.with_keywords(
            "parallel, helper, helpers, sub-agent, delegate, split, fan out, at the same time, concurrently, \
             independent, 并行, 助手, 同时, 分头",
        );
        // Starting helpers does not touch shared state: several may start in one batch.
        spawn.parallel_safe = true;
        let mut result = ToolSpec::typed::<ResultArgs>(
            RESULT_TOOL,
            "The answer of a helper started with spawn_child, by its id (child_<n>). The first call returns it; later calls say it was delivered.",
        );
        result.plugin = OWNER.into();
        result.parallel_safe = true;
        let me = self.clone();
        let spawn_h = crate::stages::typed(move |args: SpawnArgs| {
            let me = me.clone();
            async move { me.spawn(args).await }
        });
        let me = self.clone();
        let result_h = crate::stages::typed(move |args: ResultArgs| std::future::ready(me.fetch(&args.id)));
        vec![(spawn, spawn_h), (result, result_h)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::ORIGIN_ARG;
    use serde_json::json;

    #[test]
    fn a_sub_agent_speaks_for_its_caller_and_never_more() {
        let owner = crate::firewall::Principal::owner();
        let guest = crate::firewall::Principal::plugin_guest("chat");
        // What `spawn_child` reads its caller's principal from: its typed arguments.
        let origin_principal = |args: serde_json::Value| {
            crate::stages::tools::decode_args::<SpawnArgs>(args)
                .ok()
                .unwrap()
                .caller
                .principal
        };
        let args = |p: &crate::firewall::Principal| json!({"task": "x", ORIGIN_ARG: {"principal": p}});
        assert!(origin_principal(args(&owner)).is_owner());
        assert_eq!(origin_principal(args(&guest)), guest);
        assert!(!origin_principal(json!({"task": "x"})).is_owner(), "no origin: a guest");
        assert!(!origin_principal(json!({"task": "x", ORIGIN_ARG: {"principal": "owner"}})).is_owner());
    }
}
