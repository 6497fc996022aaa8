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
use std::sync::Arc;

use actix::ArbiterHandle;
use parking_lot::Mutex;
use serde_json::{Value, json};

pub use self::core::{
    Action, Command, ControlArgs, Owner, Resident, ResidentBook, ResidentError, Residual, State, Target, TextArgs,
};
use super::door::Admitted;
use super::input::{Input, Outcome, Refusal, ReplyTo};
use super::intake::{EventLoop, Inject};
use super::routes::ChannelRoutes;
use super::scheduler::{GetTasks, SchedulerActor, Submit, TakeWaiting, Taken, submit_own};
use super::task::TaskDeps;
use crate::addr::TAddr;
use crate::config::{ConfigActor, ReadSettings, keys};
use crate::i18n::Msg;
use crate::memory::context::actor::{ContextActor, PruneContext};
use crate::memory::graph::actor::{CommitTriples, ExportTriples, GraphActor, GraphOverlays};
use crate::memory::store::MemoryStore;
use crate::stages::{Caller, ToolHandler, ToolSpec};
use crate::supervisor::{RestartPolicy, Strategy, SupervisorConfig, SupervisorRef};

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

/// Why a resident operation did nothing; each says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum ResidentsError {
    /// The book refused (an unknown id, a bad one, too many, a missing argument).
    #[error(transparent)]
    Book(#[from] ResidentError),
    #[error(transparent)]
    Route(#[from] super::routes::RouteError),
    #[error("resident `{id}` could not be started: {why}")]
    NotStarted { id: String, why: Box<ResidentsError> },
    #[error("cannot create {}: {error}", path.display())]
    Dir { path: PathBuf, error: std::io::Error },
    #[error(transparent)]
    Spawn(#[from] crate::supervisor::SpawnError),
    #[error(transparent)]
    Mailbox(#[from] crate::addr::SendError),
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("refused by resident {id}: {refusal}")]
    RefusedBy { id: String, refusal: Refusal },
    #[error("resident {id} unavailable: {error}")]
    Gone { id: String, error: crate::addr::SendError },
    #[error("reclaim of `{id}` failed, its memory is untouched ({why}); try again, or destroy it to drop its memory")]
    Reclaim { id: String, why: String },
    #[error("the parent did not take the notice ({0}); try again later")]
    NoticeRefused(super::scheduler::OwnInputError),
    #[error("{tool} is for resident sub-agents; this task has no parent")]
    NoParent { tool: &'static str },
    #[error(transparent)]
    Context(#[from] crate::memory::context::actor::ContextError),
    #[error(transparent)]
    Restart(#[from] crate::supervisor::RestartError),
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
    ) -> Result<(), ResidentsError> {
        let limits = self.limits().await;
        self.0.routes.check(id, channels)?;
        self.0.book.lock().create(id, task, owner, limits.max_residents)?;
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
                Err(ResidentsError::NotStarted {
                    id: id.to_owned(),
                    why: Box::new(e),
                })
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
    ) -> Result<Live, ResidentsError> {
        let dir = self.0.data_dir.join("residents").join(id);
        std::fs::create_dir_all(&dir).map_err(|error| ResidentsError::Dir {
            path: dir.clone(),
            error,
        })?;
        let config = SupervisorConfig::default().with_strategy(Strategy::OneForAll);
        let sub = self.0.sup.supervisor(id, RestartPolicy::Permanent, config).await?;
        let path = dir.join("memory.db");
        let doc_path = path.clone();
        let documents = sub
            .worker_on(
                self.0.blocking.clone(),
                "documents",
                RestartPolicy::Permanent,
                move || {
                    let store = MemoryStore::open(&doc_path)?;
                    Ok(crate::memory::documents::DocumentsActor::new(store))
                },
            )
            .await?;
        let docs = documents.clone();
        let context = sub
            .worker_on(
                self.0.blocking.clone(),
                "context",
                RestartPolicy::Permanent,
                move || {
                    let store = MemoryStore::open(&path)?;
                    Ok(ContextActor::open(store, docs.clone())?)
                },
            )
            .await?;
        let graph_path = dir.join("graph.db");
        let graph = sub
            .worker_on(self.0.blocking.clone(), "graph", RestartPolicy::Permanent, move || {
                let store = crate::memory::graph::GraphStore::open(&graph_path)?;
                Ok(GraphActor::new(store))
            })
            .await?;
        let agent = agent_id(id);
        self.0.overlays.insert(&agent, graph.clone());
        // Per-turn recall reads the main graph (read-only for it); its tools read both.
        let deps = self.0.parent.derived(
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
        let loops = super::start::start(&sub, Arc::new(deps), super::start::Profile::resident()).await?;
        let (scheduler, event_loop) = (loops.scheduler, loops.event_loop);
        // Its input channels: their queued input goes to its scheduler from now on.
        self.0.routes.assign(id, channels, &scheduler)?;
        if !channels.is_empty() {
            tracing::info!(resident = id, ?channels, "input channels assigned to the resident");
        }
        let live = Live {
            scheduler,
            event_loop,
            context,
            graph,
            dir,
        };
        if owner == Owner::Parent {
            // Its task is also its first input (queued, through its own intake).
            let job = Job {
                input: core::inputs::first(id, PARENT_ID, task, principal),
                report: true,
            };
            self.dispatch(id, &live, job, false).await?;
        }
        Ok(live)
    }

    /// Gives `job` to the resident: queued through its intake, or as an interrupt
    /// (already levelled) straight to its scheduler. A reported job gets a reply path
    /// whose answer is recorded as a round and reported to the parent.
    async fn dispatch(&self, id: &str, live: &Live, mut job: Job, interrupt: bool) -> Result<(), ResidentsError> {
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
                .send(Submit(Admitted::own(job.input)?))
                .await?
                .map(|_| ())
        } else {
            live.event_loop.send(Inject(job.input)).await?.map(|_| ())
        };
        Ok(res?)
    }

    /// A reported round ended: its record, and an L3 interrupt to the parent.
    fn round_done(&self, id: &str, input: &str, reply: &super::input::Reply) {
        let Some((record, report)) = core::inputs::round_end(id, self.is_live(id), input, reply) else {
            return;
        };
        self.0.book.lock().round(id, record);
        self.check_context(id);
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
            let Ok(events) = live.context.send(crate::memory::context::actor::GetContext).await else {
                return;
            };
            let tokens: usize = events
                .iter()
                .map(|e| crate::llm::tokens::count(&e.input) + crate::llm::tokens::count(&e.response))
                .sum();
            if !core::context_is_full(tokens, window) || !me.0.book.lock().context_full(&id) {
                return;
            }
            tracing::warn!(resident = %id, tokens, window, "resident's context is full; the parent is told");
            let notice = core::inputs::context_full(&id, tokens, window);
            if let Err(e) = submit_own(&me.0.parent_scheduler, notice) {
                tracing::warn!(resident = %id, "contextfull notice not delivered: {e}");
            }
        });
    }

    /// `send`: an L4 interrupt into the resident (the parent is its only L4 source).
    pub async fn send(
        &self,
        id: &str,
        text: &str,
        principal: crate::firewall::Principal,
    ) -> Result<String, ResidentsError> {
        let first_channel = self.0.routes.channels_of(id).into_iter().next();
        let input = core::inputs::sent(id, PARENT_ID, text, first_channel, principal)?;
        let live = self.live(id)?;
        let report = self
            .0
            .book
            .lock()
            .get(id)
            .map(|r| r.owner == Owner::Parent)
            .unwrap_or(true);
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
    pub async fn forward(&self, id: &str, input: Admitted) -> Result<(), ResidentsError> {
        let live = self.live(id)?;
        self.check_context(id);
        match live.scheduler.send(Submit(input)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(refusal)) => Err(ResidentsError::RefusedBy {
                id: id.to_owned(),
                refusal,
            }),
            Err(error) => Err(ResidentsError::Gone {
                id: id.to_owned(),
                error,
            }),
        }
    }

    /// One resident's view: its book entry, its queues, its directory.
    pub async fn inspect(&self, id: &str) -> Result<Value, ResidentError> {
        let entry = self.0.book.lock().get(id).cloned()?;
        let live = self.live(id)?;
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
    pub async fn compress(&self, id: &str) -> Result<String, ResidentsError> {
        let live = self.live(id)?;
        let archived = live.context.send(compress_prune()).await??;
        self.0.book.lock().compress(id)?;
        Ok(Msg::ResidentCompressed { id, archived }.text())
    }

    /// `destroy` (and `reclaim`): residual work handled by `residual`, the subtree
    /// stopped and removed, its directory deleted.
    pub async fn destroy(&self, id: &str, residual: Residual, reclaim: bool) -> Result<String, ResidentsError> {
        let live = self.live(id)?;
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
        if core::is_own_dir(&live.dir, &self.0.data_dir.join("residents"), id)
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
    async fn promote(&self, id: &str, live: &Live) -> Result<usize, ResidentsError> {
        let unavailable = |e: &dyn std::fmt::Display| ResidentsError::Reclaim {
            id: id.to_owned(),
            why: e.to_string(),
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
        let count = taken.len();
        for t in taken {
            let mut input = t.input;
            match policy {
                Residual::Keep => {
                    if let Err(e) = self.0.parent_scheduler.do_send(Submit(core::inputs::kept(input))) {
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
        core::inputs::residual_text(policy, count)
    }

    /// Restarts resident `id`'s subtree through its supervisor (the operator's button).
    pub async fn restart(&self, id: &str) -> Result<u64, ResidentsError> {
        self.live(id)?;
        Ok(crate::supervisor::restart_actor(&self.0.parent.registry, &self.actor_id(id)).await?)
    }

    /// The `resident_agents` tool.
    pub async fn call(&self, args: ControlArgs) -> Result<String, ResidentsError> {
        let principal = args.caller.principal.clone();
        match Command::decode(&args)? {
            Command::List => Ok(Value::Array(self.list().await).to_string()),
            Command::Create { id, task, channels } => {
                self.create(&id, &task, Owner::Parent, principal, &channels).await?;
                Ok(Msg::ResidentCreated { id: &id }.text())
            }
            Command::Send { id, text } => self.send(&id, &text, principal).await,
            Command::Inspect { id } => Ok(self.inspect(&id).await?.to_string()),
            Command::Compress { id } => self.compress(&id).await,
            Command::Remove { id, residual, reclaim } => self.destroy(&id, residual, reclaim).await,
        }
    }

    /// `notify_parent`: an L3 interrupt to the parent on `child/<id>`, from the resident
    /// whose task called it (known from the calling task's channel: `child/<id>` for its
    /// own task, `sub/<id>` for a `send`).
    pub fn notify(&self, args: TextArgs) -> Result<String, ResidentsError> {
        let text = core::inputs::notice_text(&args.text)?;
        let id = self.calling_resident(&args.caller, NOTIFY_TOOL)?;
        let note = core::inputs::notice(&id, text);
        submit_own(&self.0.parent_scheduler, note).map_err(ResidentsError::NoticeRefused)?;
        Ok("ok".into())
    }

    /// The resident whose task made this call: from the runner's `__origin.agent`, or
    /// (older paths) its `child/<id>` / `sub/<id>` channel.
    fn calling_resident(&self, caller: &Caller, tool: &'static str) -> Result<String, ResidentsError> {
        caller
            .agent
            .strip_prefix("resident/")
            .or_else(|| resident_of_channel(&caller.channel))
            .filter(|id| self.is_live(id))
            .map(str::to_owned)
            .ok_or(ResidentsError::NoParent { tool })
    }

    /// `inputch_note`: the resident's own record of the round in progress.
    pub fn note(&self, args: TextArgs) -> Result<String, ResidentsError> {
        let id = self.calling_resident(&args.caller, NOTE_TOOL)?;
        self.0.book.lock().note(&id, &args.text)?;
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
        run: fn(&Self, TextArgs) -> Result<String, ResidentsError>,
    ) -> (ToolSpec, Arc<dyn ToolHandler>) {
        let mut spec = ToolSpec::typed::<TextArgs>(name, description);
        spec.plugin = super::children::OWNER.into();
        spec.parallel_safe = true;
        spec.origin = true;
        let me = self.clone();
        let handler = crate::stages::typed(move |args: TextArgs| std::future::ready(run(&me, args)));
        (spec, handler)
    }

    fn control_tool(&self) -> (ToolSpec, Arc<dyn ToolHandler>) {
        let mut spec = ToolSpec::typed::<ControlArgs>(
            RESIDENT_TOOL,
            "Keep resident sub-agents: lightweight assistants with their own queue and temporary memory that work on a standing task beside you and report each round back to you. Actions: list; create (id, task); send (id, text: an urgent instruction, runs first); inspect (id: state, queue, rounds); compress (id: trim its context); reclaim or destroy (id, residual: keep = its waiting work comes back to your queue (default), drop = discarded).",
        );
        spec.plugin = super::children::OWNER.into();
        spec.serial = true;
        spec.origin = true;
        spec = spec.with_keywords(
            "resident, background agent, watch, watches, monitor, keep an eye, standing task, every round, \
             常驻, 监控, 后台, 盯着",
        );
        let me = self.clone();
        let handler = crate::stages::typed(move |args: ControlArgs| {
            let me = me.clone();
            async move { me.call(args).await }
        });
        (spec, handler)
    }
}
