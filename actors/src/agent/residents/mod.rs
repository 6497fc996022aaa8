//! Resident sub-agents (spec §6.2): light kernels the main agent keeps, each a
//! supervised subtree `kernel/agent/residents/<id>`:
//!
//! * `context` — its own context window and documents, `DATA/residents/<id>/memory.db`
//!   (its temporary memory; deleted with it);
//! * `scheduler` — its own [`SchedulerActor`] (so its own `scheduler::Core`: levels,
//!   preemption, the queue) running the same [`super::task::TaskActor`]s as the main agent;
//! * `event-loop` — its intake for queued input (the duplicate guard; nothing is stored:
//!   a resident's work is the parent's to re-decide, not the inbox's).
//!
//! It shares the parent's output channels (so it may answer where an input came from),
//! LLM, stage host, tools and firewall, recalls from the main graph read-only, and
//! inherits the system prompt with its task appended (`[Task] …` / `【任务】…`). The
//! task is also its first queued input. The parent reaches it with `send`, an L4
//! interrupt (the parent is the only source a resident obeys at L4); each round a
//! parent-made resident completes is reported back to the parent as an **L3** interrupt
//! on `child/<id>`. Destroy and reclaim first take its not-yet-run work and either give
//! it back to the parent's queue (`residual=keep`, reply paths intact) or drop it, each
//! item logged and its waiting caller answered `residual_dropped_by_parent`.
//!
//! The subtree's supervisor restarts its own children (one for all: the scheduler and
//! its intake are rebuilt together) — a crash or an operator restart of a resident never
//! touches the parent's actors. The policy (ids, limits, state, rounds, the offload's
//! choice) lives in [`core`].

pub mod core;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use actix::ArbiterHandle;
use parking_lot::Mutex;
use serde_json::{Value, json};

pub use self::core::{Action, Owner, Resident, ResidentBook, ResidentError, Residual, State, Target};
use super::children::derived_deps;
use super::door::Admitted;
use super::input::{Input, Outcome, Refusal, ReplyTo};
use super::intake::{EventLoop, Inject};
use super::routes::ChannelRoutes;
use super::scheduler::{GetTasks, SchedulerActor, Submit, TakeWaiting, Taken, submit_own};
use super::task::TaskDeps;
use crate::addr::TAddr;
use crate::config::{ConfigActor, ReadSettings, keys};
use crate::i18n::Msg;
use crate::memory::actor::{ContextActor, PruneContext};
use crate::memory::graph_actor::{CommitTriples, ExportTriples, GraphActor, GraphOverlays};
use crate::memory::store::MemoryStore;
use crate::scheduler::Level;
use crate::stages::{ToolHandler, ToolSpec};
use crate::supervisor::{RestartPolicy, Strategy, SupervisorConfig, SupervisorRef};
use futures_util::future::BoxFuture;

pub use super::subagents::{AGENT_PREFIX, NOTE_TOOL, NOTIFY_TOOL, RESIDENT_TOOL};
/// The residents' own tools, which the main agent is not offered.
pub const RESIDENT_ONLY: &[&str] = &[NOTIFY_TOOL, NOTE_TOOL];
/// What a resident may not call: it is no parent (no residents, no helpers of its own),
/// and it has no document memory (spec §6.2: `doc_query` would pull the main agent's
/// archived documents into the main timeline, `doc_commit` write the main store).
pub const REFUSED: &[&str] = &[
    RESIDENT_TOOL,
    super::children::SPAWN_TOOL,
    super::children::RESULT_TOOL,
    "doc_query",
    "doc_commit",
];
/// Events a `compress` keeps in the resident's context (spec §6.2).
pub const COMPRESS_KEEP: usize = 20;
/// The prune a `compress` sends the resident's context: by count only (no token
/// budget binds), down to the last [`COMPRESS_KEEP`] events — a prune keeps
/// `max_context_size − 1` (the seed's rule for the window), hence the one more.
pub fn compress_prune() -> PruneContext {
    PruneContext {
        query: String::new(),
        context_tokens: usize::MAX / 4,
        max_context_size: COMPRESS_KEEP + 1,
    }
}
/// The parent's id as its residents see it (`parent/<id>` sources).
pub const PARENT_ID: &str = "agent";

/// A running resident's actors.
#[derive(Clone)]
struct Live {
    scheduler: TAddr<SchedulerActor>,
    event_loop: TAddr<EventLoop>,
    context: TAddr<ContextActor>,
    /// Its temporary graph (`graph.db`): its memory tools write here, `reclaim` promotes it.
    graph: TAddr<GraphActor>,
    dir: PathBuf,
}

struct Inner {
    book: Mutex<ResidentBook>,
    live: Mutex<HashMap<String, Live>>,
    /// `kernel/agent/residents`.
    sup: SupervisorRef,
    parent: Arc<TaskDeps>,
    /// The main agent's scheduler: reports and kept residual work go there.
    parent_scheduler: TAddr<SchedulerActor>,
    data_dir: PathBuf,
    blocking: ArbiterHandle,
    config: TAddr<ConfigActor>,
    /// Where the memory tools look up a resident's temporary graph.
    overlays: GraphOverlays,
    /// The input channels assigned to residents (the main intake routes by it).
    routes: ChannelRoutes,
}

/// `create`'s `input_channels`: an array of channel names (absent: none).
fn input_channels(args: &Value) -> Result<Vec<String>, String> {
    match args.get("input_channels") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|c| {
                c.as_str()
                    .map(|s| s.trim().to_owned())
                    .ok_or_else(|| "`input_channels` must be an array of channel names".to_owned())
            })
            .collect(),
        Some(_) => Err("`input_channels` must be an array of channel names, e.g. [\"qq:group:42\"]".into()),
    }
}

/// A resident's agent id, as its tools see it (`__origin.agent`).
pub fn agent_id(id: &str) -> String {
    format!("{AGENT_PREFIX}{id}")
}

/// The resident a task belongs to, from its channel (`child/<id>`, `sub/<id>`).
pub fn resident_of_channel(channel: &str) -> Option<&str> {
    channel
        .strip_prefix("child/")
        .or_else(|| channel.strip_prefix("sub/"))
        .filter(|id| core::valid_id(id))
}

/// Residents do not outlive their daemon (the book is in memory, and the work they held
/// went back to the inbox as abandoned): directories a previous run left are deleted at
/// start, each logged, so no temporary memory is orphaned.
fn clear_stale(root: &std::path::Path) {
    let Ok(dir) = std::fs::read_dir(root) else { return };
    for entry in dir.flatten() {
        let path = entry.path();
        let named = path.file_name().and_then(|n| n.to_str()).is_some_and(core::valid_id);
        if named && path.is_dir() {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => tracing::info!(dir = %path.display(), "a previous run's resident memory deleted"),
                Err(e) => tracing::warn!(dir = %path.display(), "a previous run's resident memory not deleted: {e}"),
            }
        }
    }
}

/// The limits read from the settings at each create (so a change applies at once).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_residents: usize,
    pub max_tool_turns: u32,
}

/// The main agent's residents (cheap to clone).
#[derive(Clone)]
pub struct Residents(Arc<Inner>);

/// What a resident is asked to do, and whether its end is reported to the parent.
struct Job {
    input: Input,
    report: bool,
}

/// What the residents share with the main agent (see [`Residents::new`]).
pub struct ResidentsDeps {
    /// `kernel/agent/residents`.
    pub sup: SupervisorRef,
    pub parent: Arc<TaskDeps>,
    /// The main agent's scheduler: reports and kept residual work go there.
    pub parent_scheduler: TAddr<SchedulerActor>,
    pub data_dir: PathBuf,
    pub blocking: ArbiterHandle,
    pub config: TAddr<ConfigActor>,
    /// Where the memory tools look up a resident's temporary graph.
    pub overlays: GraphOverlays,
    /// The input channels assigned to residents (the main intake routes by it).
    pub routes: ChannelRoutes,
}

impl Residents {
    pub fn new(d: ResidentsDeps) -> Self {
        clear_stale(&d.data_dir.join("residents"));
        Self(Arc::new(Inner {
            book: Mutex::default(),
            live: Mutex::default(),
            sup: d.sup,
            parent: d.parent,
            parent_scheduler: d.parent_scheduler,
            data_dir: d.data_dir,
            blocking: d.blocking,
            config: d.config,
            overlays: d.overlays,
            routes: d.routes,
        }))
    }

    /// The settings' limits (defaults when the settings actor does not answer).
    pub async fn limits(&self) -> Limits {
        let s = match self.0.config.send(ReadSettings).await {
            Ok(Ok(s)) => s,
            _ => crate::config::Settings::default(),
        };
        Limits {
            max_residents: s.get(keys::AGENT_MAX_RESIDENTS) as usize,
            max_tool_turns: s.get(keys::AGENT_RESIDENT_MAX_TOOL_TURNS),
        }
    }

    /// The subtree id of resident `id`.
    pub fn actor_id(&self, id: &str) -> String {
        format!("{}/{id}", self.0.sup.id())
    }

    /// The book (for the offload's choice).
    pub fn with_book<T>(&self, f: impl FnOnce(&ResidentBook) -> T) -> T {
        f(&self.0.book.lock())
    }

    fn live(&self, id: &str) -> Result<Live, ResidentError> {
        self.0
            .live
            .lock()
            .get(id)
            .cloned()
            .ok_or_else(|| ResidentError::Unknown(id.to_owned()))
    }

    /// Creates resident `id` working on `task` (appended to its prompt; for a
    /// parent-made resident also its first queued input, from `parent/agent` on
    /// `child/<id>` — a triage assistant starts idle: its work is the backlog).
    pub async fn create(
        &self,
        id: &str,
        task: &str,
        owner: Owner,
        principal: crate::firewall::Principal,
        channels: &[String],
    ) -> Result<(), String> {
        let limits = self.limits().await;
        self.0.routes.check(id, channels).map_err(|e| e.to_string())?;
        self.0
            .book
            .lock()
            .create(id, task, owner, limits.max_residents)
            .map_err(|e| e.to_string())?;
        match self.start(id, task, owner, principal, limits, channels).await {
            Ok(live) => {
                self.0.live.lock().insert(id.to_owned(), live);
                tracing::info!(resident = id, ?owner, "resident created");
                Ok(())
            }
            Err(e) => {
                let _ = self.0.book.lock().remove(id);
                self.0.overlays.remove(&agent_id(id));
                self.0.routes.release(id);
                let full = self.actor_id(id);
                if self.0.parent.registry.get(&full).is_some() {
                    let _ = self.0.sup.remove_child(&full).await;
                }
                Err(format!("resident `{id}` could not be started: {e}"))
            }
        }
    }

    async fn start(
        &self,
        id: &str,
        task: &str,
        owner: Owner,
        principal: crate::firewall::Principal,
        limits: Limits,
        channels: &[String],
    ) -> Result<Live, String> {
        let dir = self.0.data_dir.join("residents").join(id);
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let config = SupervisorConfig::default().with_strategy(Strategy::OneForAll);
        let sub = self
            .0
            .sup
            .supervisor(id, RestartPolicy::Permanent, config)
            .await
            .map_err(|e| e.to_string())?;
        let path = dir.join("memory.db");
        let doc_path = path.clone();
        let documents = sub
            .worker_on(
                self.0.blocking.clone(),
                "documents",
                RestartPolicy::Permanent,
                move || {
                    let store = MemoryStore::open(&doc_path).map_err(|e| e.to_string())?;
                    Ok(crate::memory::documents::DocumentsActor::new(store))
                },
            )
            .await
            .map_err(|e| e.to_string())?;
        let docs = documents.clone();
        let context = sub
            .worker_on(
                self.0.blocking.clone(),
                "context",
                RestartPolicy::Permanent,
                move || {
                    let store = MemoryStore::open(&path).map_err(|e| e.to_string())?;
                    ContextActor::open(store, docs.clone()).map_err(|e| e.to_string())
                },
            )
            .await
            .map_err(|e| e.to_string())?;
        let graph_path = dir.join("graph.db");
        let graph = sub
            .worker_on(self.0.blocking.clone(), "graph", RestartPolicy::Permanent, move || {
                let store = crate::memory::graph::GraphStore::open(&graph_path).map_err(|e| e.to_string())?;
                Ok(GraphActor::new(store))
            })
            .await
            .map_err(|e| e.to_string())?;
        let agent = agent_id(id);
        self.0.overlays.insert(&agent, graph.clone());
        // Per-turn recall reads the main graph (read-only for it); its tools read both.
        let deps = derived_deps(
            &self.0.parent,
            (context.clone(), documents),
            self.0.parent.graph.clone(),
            self.0.parent.channels.clone(),
            limits.max_tool_turns,
            REFUSED,
            agent,
        );
        {
            let mut s = deps.settings.write();
            let block = Msg::ResidentTask { task }.text();
            s.prompt.personal_prompt = if s.prompt.personal_prompt.trim().is_empty() {
                block
            } else {
                format!("{}\n\n{block}", s.prompt.personal_prompt)
            };
        }
        let deps = Arc::new(deps);
        let me: Arc<OnceLock<TAddr<SchedulerActor>>> = Arc::default();
        let (d, m) = (deps.clone(), me.clone());
        let scheduler = sub
            .worker("scheduler", RestartPolicy::Permanent, move || {
                Ok(SchedulerActor::new(d.clone(), m.clone()))
            })
            .await
            .map_err(|e| e.to_string())?;
        let _ = me.set(scheduler.clone());
        // Its input channels: their queued input goes to its scheduler from now on.
        self.0
            .routes
            .assign(id, channels, &scheduler)
            .map_err(|e| e.to_string())?;
        if !channels.is_empty() {
            tracing::info!(resident = id, ?channels, "input channels assigned to the resident");
        }
        let sc = scheduler.clone();
        let event_loop = sub
            .worker("event-loop", RestartPolicy::Permanent, move || {
                Ok(EventLoop::new(sc.clone()))
            })
            .await
            .map_err(|e| e.to_string())?;
        let live = Live {
            scheduler,
            event_loop,
            context,
            graph,
            dir,
        };
        if owner == Owner::Parent {
            // Its task is also its first input (queued, through its own intake).
            let mut first = Input::text(&format!("parent/{PARENT_ID}"), task);
            first.channel = format!("child/{id}");
            first.principal = principal;
            let job = Job {
                input: first,
                report: true,
            };
            self.dispatch(id, &live, job, false).await?;
        }
        Ok(live)
    }

    /// Gives `job` to the resident: queued through its intake, or as an interrupt
    /// (already levelled) straight to its scheduler. A reported job gets a reply path
    /// whose answer is recorded as a round and reported to the parent.
    async fn dispatch(&self, id: &str, live: &Live, mut job: Job, interrupt: bool) -> Result<(), String> {
        // The contextfull rule runs before the task's first LLM call: here, as it is handed over.
        self.check_context(id);
        if job.report {
            let (reply, rx) = ReplyTo::channel(&job.input.request_id);
            job.input.reply = reply;
            let (me, rid, text) = (self.clone(), id.to_owned(), job.input.text.clone());
            actix::spawn(async move {
                if let Ok(r) = rx.await {
                    me.round_done(&rid, &text, &r);
                }
            });
        }
        let res = if interrupt {
            live.scheduler
                .send(Submit(Admitted::own(job.input).map_err(|r| r.to_string())?))
                .await
                .map_err(|e| e.to_string())?
                .map(|_| ())
        } else {
            live.event_loop
                .send(Inject(job.input))
                .await
                .map_err(|e| e.to_string())?
                .map(|_| ())
        };
        res.map_err(|r| r.to_string())
    }

    /// A reported round ended: its record, and an L3 interrupt to the parent.
    fn round_done(&self, id: &str, input: &str, reply: &super::input::Reply) {
        let output = match (&reply.error, &reply.skipped) {
            (Some(e), _) => e.clone(),
            (None, Some(s)) => s.to_string(),
            (None, None) => reply.content.clone(),
        };
        let (i, o) = (
            core::head(input, core::INPUT_RUNES),
            core::head(&output, core::OUTPUT_RUNES),
        );
        if !self.is_live(id) || reply.skipped.is_some() {
            // Destroyed with this work pending (kept or dropped): the parent decided already.
            return;
        }
        self.0
            .book
            .lock()
            .round(id, Msg::ResidentRound { input: &i, output: &o }.text());
        self.check_context(id);
        let mut report = Input::text(
            &format!("child/{id}"),
            &Msg::ResidentReport {
                id,
                input: &i,
                output: &output,
            }
            .text(),
        );
        report.channel = format!("child/{id}");
        report.level = Some(Level::L3);
        if let Err(e) = submit_own(&self.0.parent_scheduler, report) {
            tracing::warn!(resident = id, "round not reported to the parent: {e}");
        }
    }

    /// The contextfull rule (spec §6.2): once a resident's inputs and responses reach
    /// 0.9 × the window, the parent is told once (an L4 kernel interrupt from
    /// `child/<id>`) to inspect it, then compress, reclaim or destroy it. Checked when a
    /// task is handed to the resident (so before its first LLM call, offloaded inputs
    /// included) and after each reported round (so the parent hears of it without
    /// waiting for more work).
    fn check_context(&self, id: &str) {
        let Ok(live) = self.live(id) else { return };
        let (me, id) = (self.clone(), id.to_owned());
        let window = self.0.parent.settings.read().window;
        actix::spawn(async move {
            let Ok(events) = live.context.send(crate::memory::actor::GetContext).await else {
                return;
            };
            let tokens: usize = events
                .iter()
                .map(|e| crate::memory::tokens::count(&e.input) + crate::memory::tokens::count(&e.response))
                .sum();
            if !core::context_is_full(tokens, window) || !me.0.book.lock().context_full(&id) {
                return;
            }
            tracing::warn!(resident = %id, tokens, window, "resident's context is full; the parent is told");
            let text = Msg::ResidentContextFull {
                id: &id,
                tokens,
                window,
            }
            .text();
            let mut notice = Input::text(&format!("child/{id}"), &text);
            notice.channel = "kernel".into();
            notice.kernel = true;
            notice.level = Some(Level::L4);
            notice.payload.insert("kernel".into(), json!(true));
            if let Err(e) = submit_own(&me.0.parent_scheduler, notice) {
                tracing::warn!(resident = %id, "contextfull notice not delivered: {e}");
            }
        });
    }

    /// `send`: an L4 interrupt into the resident (the parent is its only L4 source).
    pub async fn send(&self, id: &str, text: &str, principal: crate::firewall::Principal) -> Result<String, String> {
        if text.trim().is_empty() {
            return Err(ResidentError::Missing("text").to_string());
        }
        let live = self.live(id).map_err(|e| e.to_string())?;
        let report = self
            .0
            .book
            .lock()
            .get(id)
            .map(|r| r.owner == Owner::Parent)
            .unwrap_or(true);
        let mut input = Input::text(&format!("parent/{PARENT_ID}"), text);
        // Its first assigned input channel, else `sub/<id>` (spec §6.2).
        input.channel = self
            .0
            .routes
            .channels_of(id)
            .into_iter()
            .next()
            .unwrap_or_else(|| format!("sub/{id}"));
        input.level = Some(Level::L4);
        input.principal = principal;
        self.dispatch(id, &live, Job { input, report }, true).await?;
        Ok(Msg::ResidentSent { id }.text())
    }

    /// Whether resident `id` is running now.
    pub fn is_live(&self, id: &str) -> bool {
        self.0.live.lock().contains_key(id)
    }

    /// Forwards an original input (its reply path and acceptor hook intact) into the
    /// resident's queue: the offload's hand-over. An input that cannot be delivered is
    /// answered by its own reply path (dropping it tells a waiting caller).
    pub async fn forward(&self, id: &str, input: Admitted) -> Result<(), String> {
        let live = self.live(id).map_err(|e| e.to_string())?;
        self.check_context(id);
        match live.scheduler.send(Submit(input)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(r)) => Err(format!("refused by resident {id}: {r}")),
            Err(e) => Err(format!("resident {id} unavailable: {e}")),
        }
    }

    /// One resident's view: its book entry, its queues, its directory.
    pub async fn inspect(&self, id: &str) -> Result<Value, String> {
        let entry = self.0.book.lock().get(id).cloned().map_err(|e| e.to_string())?;
        let live = self.live(id).map_err(|e| e.to_string())?;
        let tasks = live.scheduler.send(GetTasks).await.ok();
        Ok(json!({
            "id": entry.id,
            "actor": self.actor_id(id),
            "owner": entry.owner,
            "state": entry.state,
            "task": entry.task,
            "input_channels": self.0.routes.channels_of(id),
            "rounds": tasks.as_ref().map_or(0, |t| t.stats.executed),
            "round_table": entry.rounds,
            "tasks": tasks,
            "dir": live.dir,
        }))
    }

    /// Every resident's view, by id.
    pub async fn list(&self) -> Vec<Value> {
        let ids: Vec<String> = self.0.book.lock().all().map(|r| r.id.clone()).collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Ok(v) = self.inspect(&id).await {
                out.push(v);
            }
        }
        out
    }

    /// `compress`: the context cut to its last [`COMPRESS_KEEP`] events, the round
    /// table cleared, the state `running`.
    pub async fn compress(&self, id: &str) -> Result<String, String> {
        let live = self.live(id).map_err(|e| e.to_string())?;
        let archived = live
            .context
            .send(compress_prune())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        self.0.book.lock().compress(id).map_err(|e| e.to_string())?;
        Ok(Msg::ResidentCompressed { id, archived }.text())
    }

    /// `destroy` (and `reclaim`): residual work handled by `residual`, the subtree
    /// stopped and removed, its directory deleted.
    pub async fn destroy(&self, id: &str, residual: Residual, reclaim: bool) -> Result<String, String> {
        let live = self.live(id).map_err(|e| e.to_string())?;
        // Reclaim: its temporary graph's facts into the main graph first, so a failure
        // leaves the resident (and its memory) in place for another try.
        let promoted = if reclaim {
            Some(self.promote(id, &live).await?)
        } else {
            None
        };
        let taken = live.scheduler.send(TakeWaiting).await.unwrap_or_default();
        // Out of the live set first: the report paths of the residual work it drops or
        // hands back then answer nobody.
        self.0.live.lock().remove(id);
        self.0.overlays.remove(&agent_id(id));
        let released = self.0.routes.release(id);
        if !released.is_empty() {
            tracing::info!(resident = id, channels = ?released, "input channels back with the main agent");
        }
        let residual_text = self.residual(id, taken, residual);
        let full = self.actor_id(id);
        if let Err(e) = self.0.sup.remove_child(&full).await {
            tracing::warn!(resident = id, "resident's subtree not removed cleanly: {e}");
        }
        let _ = self.0.book.lock().remove(id);
        // Only a directory named after the resident, under DATA/residents.
        if live.dir.file_name().is_some_and(|n| n == id)
            && live.dir.starts_with(self.0.data_dir.join("residents"))
            && let Err(e) = std::fs::remove_dir_all(&live.dir)
        {
            tracing::warn!(resident = id, dir = %live.dir.display(), "temporary memory not deleted: {e}");
        }
        tracing::info!(resident = id, ?promoted, "resident removed; {residual_text}");
        Ok(Msg::ResidentRemoved {
            id,
            promoted,
            residual: &residual_text,
        }
        .text())
    }

    /// `reclaim`'s promotion (spec §6.2): every active fact of the resident's temporary
    /// graph committed to the main graph under session `reclaim/<id>` (the parent's
    /// filter keeps all). Answers how many facts were promoted (a fact the main graph
    /// knew already is reinforced there, not doubled).
    async fn promote(&self, id: &str, live: &Live) -> Result<usize, String> {
        let unavailable = |e: &dyn std::fmt::Display| {
            format!(
                "reclaim of `{id}` failed, its memory is untouched ({e}); try again, or destroy it to drop its memory"
            )
        };
        let triples = live
            .graph
            .send(ExportTriples)
            .await
            .map_err(|e| unavailable(&e))?
            .map_err(|e| unavailable(&e))?;
        if triples.is_empty() {
            return Ok(0);
        }
        let Some(main) = self.0.parent.graph.clone() else {
            return Err(unavailable(&"this agent has no main graph"));
        };
        let n = triples.len();
        let (entities, relations) = main
            .send(CommitTriples {
                triples,
                session: format!("reclaim/{id}"),
            })
            .await
            .map_err(|e| unavailable(&e))?
            .map_err(|e| unavailable(&e))?;
        tracing::info!(
            resident = id,
            facts = n,
            entities,
            new_relations = relations,
            "resident's temporary memory promoted"
        );
        Ok(n)
    }

    /// Executes the residual policy on the work taken from resident `id`.
    fn residual(&self, id: &str, taken: Vec<Taken>, policy: Residual) -> String {
        if taken.is_empty() {
            return Msg::ResidualNone.text();
        }
        let count = taken.len();
        for t in taken {
            let mut input = t.input;
            match policy {
                Residual::Keep => {
                    // An interrupt of the resident's own levels means nothing to the
                    // parent: it waits in the parent's queue like any input.
                    input.level = None;
                    if input.source.starts_with("parent/") {
                        // The parent's own instruction: it runs it now, nobody to report to.
                        input.reply = ReplyTo::none();
                    }
                    if let Err(e) = self.0.parent_scheduler.do_send(Submit(input)) {
                        tracing::error!(
                            resident = id,
                            "residual task lost: the main scheduler is unavailable: {e}"
                        );
                    }
                }
                Residual::Drop => {
                    tracing::info!(
                        resident = id,
                        source = %input.source,
                        channel = %input.channel,
                        request = %input.request_id,
                        text = %core::head(&input.text, core::INPUT_RUNES),
                        "residual task dropped by the parent"
                    );
                    input.reply.skip(Refusal::ResidualDropped);
                    input.settle.end(Outcome::Dropped);
                }
            }
        }
        match policy {
            Residual::Keep => Msg::ResidualKept { count }.text(),
            Residual::Drop => Msg::ResidualDropped { count }.text(),
        }
    }

    /// Restarts resident `id`'s subtree through its supervisor (the operator's button).
    pub async fn restart(&self, id: &str) -> Result<u64, String> {
        self.live(id).map_err(|e| e.to_string())?;
        crate::supervisor::restart_actor(&self.0.parent.registry, &self.actor_id(id))
            .await
            .map_err(|e| e.to_string())
    }

    /// The `resident_agents` tool.
    pub async fn call(&self, args: Value) -> Result<String, String> {
        let action =
            Action::parse(args.get("action").and_then(Value::as_str).unwrap_or("")).map_err(|e| e.to_string())?;
        let arg = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("").trim().to_owned();
        let id = arg("id");
        let principal = super::children::origin_principal(&args);
        let need_id = || {
            if id.is_empty() {
                Err(ResidentError::Missing("id").to_string())
            } else {
                Ok(id.as_str())
            }
        };
        match action {
            Action::List => Ok(Value::Array(self.list().await).to_string()),
            Action::Create => {
                let id = need_id()?;
                let channels = input_channels(&args)?;
                self.create(id, &arg("task"), Owner::Parent, principal, &channels)
                    .await?;
                Ok(Msg::ResidentCreated { id }.text())
            }
            Action::Send => {
                let text = match arg("text") {
                    t if t.is_empty() => arg("task"),
                    t => t,
                };
                self.send(need_id()?, &text, principal).await
            }
            Action::Inspect => Ok(self.inspect(need_id()?).await?.to_string()),
            Action::Compress => self.compress(need_id()?).await,
            Action::Reclaim | Action::Destroy => {
                let residual = Residual::parse(args.get("residual").and_then(Value::as_str));
                self.destroy(need_id()?, residual, action == Action::Reclaim).await
            }
        }
    }

    /// `notify_parent`: an L3 interrupt to the parent on `child/<id>`, from the resident
    /// whose task called it (known from the calling task's channel: `child/<id>` for its
    /// own task, `sub/<id>` for a `send`).
    pub fn notify(&self, args: &Value) -> Result<String, String> {
        let text = args.get("text").and_then(Value::as_str).unwrap_or("").trim();
        if text.is_empty() {
            return Err(ResidentError::Missing("text").to_string());
        }
        let id = self.calling_resident(args, NOTIFY_TOOL)?;
        let id = id.as_str();
        let mut note = Input::text(&format!("child/{id}"), &Msg::ResidentNotice { id, text }.text());
        note.channel = format!("child/{id}");
        note.level = Some(Level::L3);
        submit_own(&self.0.parent_scheduler, note)
            .map_err(|e| format!("the parent did not take the notice ({e}); try again later"))?;
        Ok("ok".into())
    }

    /// The resident whose task made this call: from the runner's `__origin.agent`, or
    /// (older paths) its `child/<id>` / `sub/<id>` channel.
    fn calling_resident(&self, args: &Value, tool: &str) -> Result<String, String> {
        let agent = crate::stages::origin_agent(args);
        let channel = args[super::children::ORIGIN_ARG]["channel"].as_str().unwrap_or("");
        agent
            .strip_prefix("resident/")
            .or_else(|| resident_of_channel(channel))
            .filter(|id| self.is_live(id))
            .map(str::to_owned)
            .ok_or_else(|| format!("{tool} is for resident sub-agents; this task has no parent"))
    }

    /// `inputch_note`: the resident's own record of the round in progress.
    pub fn note(&self, args: &Value) -> Result<String, String> {
        let id = self.calling_resident(args, NOTE_TOOL)?;
        let text = args.get("text").and_then(Value::as_str).unwrap_or("");
        self.0.book.lock().note(&id, text).map_err(|e| e.to_string())?;
        Ok(Msg::InputNoted.text())
    }

    /// The tools, to register with the stage host.
    pub fn tools(&self) -> Vec<(ToolSpec, Arc<dyn ToolHandler>)> {
        let notify = self.resident_tool(
            NOTIFY_TOOL,
            "Tell the main assistant (your parent) something now — progress, a finding, a question — without ending your task. Your final answer is reported to it anyway.",
            Self::notify,
        );
        let note = self.resident_tool(
            NOTE_TOOL,
            "Write this round's line in your parent's table of your work yourself (what you did, what is left), instead of the automatic summary of your input and answer.",
            Self::note,
        );
        vec![self.control_tool(), notify, note]
    }

    /// One of a resident's own `{text}` tools (they answer at once, from the calling task's origin).
    fn resident_tool(
        &self,
        name: &str,
        description: &str,
        run: fn(&Self, &Value) -> Result<String, String>,
    ) -> (ToolSpec, Arc<dyn ToolHandler>) {
        let mut spec = ToolSpec::new(
            name,
            description,
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        );
        spec.plugin = super::children::OWNER.into();
        spec.parallel_safe = true;
        spec.origin = true;
        let me = self.clone();
        // Not typed yet: the family's errors are its texts (`ToolFailure::Text`).
        let handler = move |args: Value| -> BoxFuture<'static, crate::stages::ToolResult> {
            let r = run(&me, &args).map_err(crate::stages::ToolFailure::Text);
            Box::pin(async move { r })
        };
        (spec, Arc::new(handler))
    }

    fn control_tool(&self) -> (ToolSpec, Arc<dyn ToolHandler>) {
        let mut spec = ToolSpec::new(
            RESIDENT_TOOL,
            "Keep resident sub-agents: lightweight assistants with their own queue and temporary memory that work on a standing task beside you and report each round back to you. Actions: list; create (id, task); send (id, text: an urgent instruction, runs first); inspect (id: state, queue, rounds); compress (id: trim its context); reclaim or destroy (id, residual: keep = its waiting work comes back to your queue (default), drop = discarded).",
            json!({"type": "object", "properties": {
                "action": {"type": "string", "enum": ["list", "create", "send", "inspect", "compress", "reclaim", "destroy"]},
                "id": {"type": "string", "description": "the resident's id: lowercase letters, digits, - and _"},
                "task": {"type": "string", "description": "create: its standing task"},
                "text": {"type": "string", "description": "send: the instruction"},
                "residual": {"type": "string", "enum": ["keep", "drop"], "description": "reclaim/destroy: what becomes of its waiting work"},
                "input_channels": {"type": "array", "items": {"type": "string"}, "description": "create: input channels whose messages it handles instead of you (until it is destroyed)"}
            }, "required": ["action"]}),
        );
        spec.plugin = super::children::OWNER.into();
        spec.serial = true;
        spec.origin = true;
        spec = spec.with_keywords(
            "resident, background agent, watch, watches, monitor, keep an eye, standing task, every round, \
             常驻, 监控, 后台, 盯着",
        );
        let me = self.clone();
        let handler = move |args: Value| -> BoxFuture<'static, crate::stages::ToolResult> {
            let me = me.clone();
            Box::pin(async move { me.call(args).await.map_err(crate::stages::ToolFailure::Text) })
        };
        (spec, Arc::new(handler))
    }
}
