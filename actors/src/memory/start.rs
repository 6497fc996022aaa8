//! Starting the memory subsystem: `kernel/memory` and its tiers, as one typed result.
//!
//! [`start`] builds the supervisor `kernel/memory` with the documents, the context window, text log,
//! knowledge base, graph, rule distiller, embedder and distill heartbeat, registers
//! their tools with the stage host, and answers [`MemoryHandles`]. Whoever consumes
//! the memory (the agent, the plugin services, the HTTP API) takes `&MemoryHandles`,
//! so the compiler checks that the boot graph wired the memory before them: there is
//! no optional field to find empty at run time.
//!
//! [`start_maintenance`] adds the archive, merge and review heartbeats later, once the
//! agent's intake exists (they hand their tasks to it through a [`TaskSink`]).

use std::path::Path;
use std::sync::Arc;

use actix::ArbiterHandle;
use parking_lot::Mutex;

use super::context::actor::ContextActor;
use super::documents::DocumentsActor;
use super::embed::actor::EmbedderHandle;
use super::graph::actor::GraphActor;
use super::knowledge::KnowledgeActor;
use super::lifecycle::distiller::DistillerHandle;
use super::lifecycle::graph_heartbeat::{GraphHeartbeat, Maintenance, MaintenanceHandle, TaskSink};
use super::lifecycle::heartbeat::{DistillHandle, DistillHeartbeat, IntervalCell};
use super::lifecycle::policy::{Policy, PolicyCell};
use super::store::MemoryStore;
use super::textlog::TextLogActor;
use crate::addr::TAddr;
use crate::config::{ConfigActor, HeartbeatConfig, MemoryConfig, ReadSettings};
use crate::modgraph::ModuleError;
use crate::stages::{RegisterTool, StageHost};
use crate::supervisor::{RestartPolicy, SupervisorConfig, SupervisorRef};

/// What the memory needs to start.
pub struct MemoryDeps<'a> {
    /// Where `kernel/memory` is added (the root supervisor).
    pub parent: &'a SupervisorRef,
    /// The supervision settings of `kernel/memory`.
    pub tree: SupervisorConfig,
    pub data_dir: &'a Path,
    /// The thread for actors that block (SQLite, files).
    pub blocking: ArbiterHandle,
    /// The embedder's own thread (ONNX inference blocks for tens of milliseconds).
    pub embed_thread: ArbiterHandle,
    /// Where the memory's tools are registered.
    pub stages: &'a TAddr<StageHost>,
    /// The settings (embedder, heartbeat periods); the distill heartbeat keeps it.
    pub config: &'a TAddr<ConfigActor>,
    /// The kernel's bus (the media tier follows its settings there).
    pub bus: &'a crate::bus::EventBus,
}

/// The running memory subsystem.
#[derive(Clone)]
pub struct MemoryHandles {
    /// `kernel/memory`, where the maintenance heartbeats are added later.
    pub sup: SupervisorRef,
    /// `kernel/memory/context`: the context window.
    pub context: TAddr<ContextActor>,
    /// `kernel/memory/documents`: the documents, their passages and their indexes.
    pub documents: TAddr<DocumentsActor>,
    /// `kernel/memory/textlog`: the raw JSONL record of every turn.
    pub textlog: TAddr<TextLogActor>,
    /// `kernel/memory/knowledge`: the knowledge base.
    pub knowledge: TAddr<KnowledgeActor>,
    /// `kernel/memory/graph`: the graph tier.
    pub graph: TAddr<GraphActor>,
    /// The residents' temporary graphs, which take their memory tools' calls.
    pub graph_overlays: super::graph::actor::GraphOverlays,
    /// `kernel/memory/embedder` and its status.
    pub embedder: EmbedderHandle,
    /// `kernel/memory/media`: the media blocks and their multimodal space.
    pub media: super::media::actor::MediaHandle,
    /// `kernel/memory/heartbeat-distill` and its last round.
    pub distill: DistillHandle,
    /// `kernel/memory/distiller` (the rule distiller) and its last round.
    pub rules: DistillerHandle,
    /// The thread the tiers run on (context, documents, knowledge, graph): a turn's
    /// recall joins their answers there (`agent::task::TaskDeps::recall_thread`).
    pub thread: ArbiterHandle,
}

/// Starts `kernel/memory` (see the module docs).
pub async fn start(d: MemoryDeps<'_>) -> Result<MemoryHandles, ModuleError> {
    let settings = d.config.send(ReadSettings).await??;
    let (memory_cfg, periods) = (MemoryConfig::read(&settings), HeartbeatConfig::read(&settings));
    tracing::debug!(?memory_cfg, ?periods, "memory settings");
    let sup = d.parent.supervisor("memory", RestartPolicy::Permanent, d.tree).await?;
    // The tokenizer's tables load off the boot path, so the first turn does not wait.
    std::thread::Builder::new()
        .name("tokenizer-warm-up".into())
        .spawn(crate::llm::tokens::warm_up)
        .map_err(|e| tracing::warn!("tokenizer warm-up thread not started (the first turn loads it): {e}"))
        .ok();
    let mem_dir = d.data_dir.join("memory");

    // The document tier first: the context tier archives into it. Each opens its own
    // connection to memory.db (WAL, IMMEDIATE writes, busy timeout: see `open_db`).
    let path = mem_dir.join("memory.db");
    let doc_path = path.clone();
    let documents = sup
        .worker_on(d.blocking.clone(), "documents", RestartPolicy::Permanent, move || {
            let store = MemoryStore::open(&doc_path)?;
            Ok(DocumentsActor::new(store))
        })
        .await?;
    let docs = documents.clone();
    let context = sup
        .worker_on(d.blocking.clone(), "context", RestartPolicy::Permanent, move || {
            let store = MemoryStore::open(&path)?;
            Ok(ContextActor::open(store, docs.clone())?)
        })
        .await?;
    let text_dir = mem_dir.join("text");
    let textlog = sup
        .worker_on(d.blocking.clone(), "textlog", RestartPolicy::Permanent, move || {
            use super::textlog::{MAX_AGE, MAX_BYTES, TextLog};
            Ok(TextLogActor::new(TextLog::new(&text_dir, MAX_AGE, MAX_BYTES)))
        })
        .await?;
    let kb_dir = d.data_dir.join("knowledge");
    let knowledge = sup
        .worker_on(d.blocking.clone(), "knowledge", RestartPolicy::Permanent, move || {
            Ok(KnowledgeActor::new(super::knowledge::KnowledgeBase::new(&kb_dir)))
        })
        .await?;
    let graph_path = mem_dir.join("graph.db");
    let graph = sup
        .worker_on(d.blocking.clone(), "graph", RestartPolicy::Permanent, move || {
            Ok(GraphActor::new(super::graph::GraphStore::open(&graph_path)?))
        })
        .await?;
    let rules_last: Arc<Mutex<Option<super::lifecycle::distiller::RulesRound>>> = Arc::default();
    let (g, l, dir) = (graph.clone(), rules_last.clone(), mem_dir.clone());
    let rules = sup
        .worker_on(d.blocking.clone(), "distiller", RestartPolicy::Permanent, move || {
            use super::lifecycle::distiller::{INTERVAL, RuleDistiller};
            Ok(RuleDistiller::new(
                dir.join("text"),
                dir.join("distiller.cursor"),
                g.clone(),
                INTERVAL,
                l.clone(),
            ))
        })
        .await?;
    let overlays = super::graph::actor::GraphOverlays::default();
    let mut tools = super::graph::actor::graph_tools(graph.clone(), Some(textlog.clone()), overlays.clone());
    tools.extend(super::knowledge::knowledge_tools(knowledge.clone()));

    // The embedder: its own thread; the model loads after boot, in the background.
    let embed_cfg = super::embed::embed_config(&memory_cfg);
    let status = super::embed::actor::EmbedderActor::status_handle(&embed_cfg);
    let (st, dd, db) = (status.clone(), d.data_dir.to_path_buf(), mem_dir.join("memory.db"));
    let embedder = sup
        .worker_on(
            d.embed_thread.clone(),
            "embedder",
            RestartPolicy::Permanent,
            move || {
                use super::embed::actor::EmbedderActor;
                let store = MemoryStore::open(&db)?;
                Ok(EmbedderActor::new(embed_cfg.clone(), dd.clone(), store, st.clone()))
            },
        )
        .await?;
    let embedder = EmbedderHandle { addr: embedder, status };
    tools.extend(super::documents::tools::document_tools(
        documents.clone(),
        context.clone(),
        Some(embedder.clone()),
    ));

    // The media tier: its own connection to memory.db, on the blocking thread.
    let media = start_media(&sup, &d, mem_dir.join("memory.db"), &settings).await?;
    super::media::tools::with_media_digests(&mut tools, &media);
    for (spec, handler) in tools {
        d.stages.send(RegisterTool { spec, handler }).await??;
    }

    // The distill heartbeat; its period follows `core.agent.distill_interval`.
    let every: IntervalCell = Arc::new(Mutex::new(periods.distill_interval));
    let last: Arc<Mutex<Option<super::lifecycle::heartbeat::Round>>> = Arc::default();
    let (c, l, cfg) = (context.clone(), last.clone(), d.config.clone());
    let (g, docs, mark) = (
        graph.clone(),
        documents.clone(),
        super::lifecycle::snapshot::Mark::default(),
    );
    let distill = sup
        .worker("heartbeat-distill", RestartPolicy::Permanent, move || {
            Ok(
                DistillHeartbeat::new(c.clone(), cfg.clone(), every.clone(), l.clone()).with_snapshot(
                    g.clone(),
                    docs.clone(),
                    mark.clone(),
                ),
            )
        })
        .await?;
    Ok(MemoryHandles {
        sup,
        context,
        documents,
        textlog,
        knowledge,
        graph,
        graph_overlays: overlays,
        embedder,
        media,
        distill: (distill, last),
        rules: (rules, rules_last),
        thread: d.blocking,
    })
}

/// Starts `kernel/memory/media` and answers its handle.
async fn start_media(
    sup: &SupervisorRef,
    d: &MemoryDeps<'_>,
    db: std::path::PathBuf,
    settings: &crate::config::Settings,
) -> Result<super::media::actor::MediaHandle, ModuleError> {
    use super::media::actor::{MediaActor, MediaHandle};
    let cfg = crate::config::MediaConfig::read(settings);
    // The handle's shared status and settings outlive restarts: each new instance
    // writes into the same cells.
    let status = Arc::new(parking_lot::RwLock::new(super::media::actor::MediaStatus::default()));
    let config = Arc::new(parking_lot::RwLock::new(cfg));
    let (st, cf, bus, cfg_addr) = (status.clone(), config.clone(), d.bus.clone(), d.config.clone());
    let addr = sup
        .worker_on(d.blocking.clone(), "media", RestartPolicy::Permanent, move || {
            let store = super::media::store::MediaStore::open(&db)?;
            let cfg = cf.read().clone();
            Ok(MediaActor::new(store, cfg)
                .with_cells(st.clone(), cf.clone())
                .follow_settings(bus.clone(), cfg_addr.clone()))
        })
        .await?;
    Ok(MediaHandle { addr, status, config })
}

/// The heartbeats a virtual clock drives, in the order material flows from the window
/// to the graph: distill, rules, then archive, merge and review as `maintenance` holds
/// them (see [`crate::clock::Beats`]).
pub fn clock_beats(memory: &MemoryHandles, maintenance: &[MaintenanceHandle]) -> crate::clock::Beats {
    use super::lifecycle::heartbeat::due_fn;
    let mut beats = crate::clock::Beats::default();
    beats.add("distill", due_fn(memory.distill.0.clone()));
    beats.add("rules", due_fn(memory.rules.0.clone()));
    for (kind, addr, _) in maintenance {
        beats.add(kind.name(), due_fn(addr.clone()));
    }
    beats
}

/// Which heartbeat period a maintenance kind follows, and its actor's name.
pub fn maintenance_period(kind: Maintenance, periods: &HeartbeatConfig) -> (std::time::Duration, &'static str) {
    match kind {
        Maintenance::Archive => (periods.archive_interval, "heartbeat-archive"),
        Maintenance::Merge => (periods.merge_interval, "heartbeat-merge"),
        Maintenance::Review => (periods.review_interval, "heartbeat-review"),
    }
}

/// Adds the archive, merge and review heartbeats to `kernel/memory`; `tasks` is where
/// the merge and review rounds hand their tasks (the agent's intake).
pub async fn start_maintenance(
    memory: &MemoryHandles,
    tasks: TaskSink,
    config: &TAddr<ConfigActor>,
) -> Result<(Vec<MaintenanceHandle>, PolicyCell), ModuleError> {
    let periods = HeartbeatConfig::read(&config.send(ReadSettings).await??);
    let policy: PolicyCell = Arc::new(Mutex::new(Policy::new(periods.maintenance_daily_tasks)));
    let mut handles = Vec::new();
    for kind in [Maintenance::Archive, Maintenance::Merge, Maintenance::Review] {
        let (period, name) = maintenance_period(kind, &periods);
        let every: IntervalCell = Arc::new(Mutex::new(period));
        let last: Arc<Mutex<Option<super::lifecycle::graph_heartbeat::MaintenanceRound>>> = Arc::default();
        let (g, t, l) = (memory.graph.clone(), tasks.clone(), last.clone());
        let c = (kind == Maintenance::Archive).then(|| memory.documents.clone());
        let em = (kind == Maintenance::Merge).then(|| memory.embedder.addr.clone());
        let p = policy.clone();
        let hb = memory
            .sup
            .worker(name, RestartPolicy::Permanent, move || {
                Ok(
                    GraphHeartbeat::new(kind, g.clone(), t.clone(), c.clone(), every.clone(), l.clone())
                        .with_embedder(em.clone())
                        .with_policy(p.clone()),
                )
            })
            .await?;
        handles.push((kind, hb, last));
    }
    Ok((handles, policy))
}
