//! Kernel assembly: the state the boot graph fills, and the modules that fill it.
//!
//! Group 0 (serial, in [`crate::daemon`]) creates the data directory, takes the lock,
//! opens and seeds the settings database and reads the few settings the tree itself
//! needs. Everything after that is a [`Module`] of the boot graph: it declares the
//! facilities it requires and provides, and [`ModuleGraph`] derives the order.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use actix::prelude::*;
use futures_util::future::LocalBoxFuture;
use homeagent_actors::agent::channels::Channels;
use homeagent_actors::agent::intake::{EventLoop, InterceptLoop};
use homeagent_actors::agent::relay::SettingsRelay;
use homeagent_actors::agent::scheduler::SchedulerActor;
use homeagent_actors::agent::task::{AgentSettings, TaskDeps};
use homeagent_actors::config::DisabledPlugins;
use homeagent_actors::config::{ConfigActor, ConfigStore};
use homeagent_actors::llm::provider::LlmActor;
use homeagent_actors::memory::actor::ContextActor;
use homeagent_actors::memory::heartbeat::{DistillHeartbeat, Round};
use homeagent_actors::memory::store::MemoryStore;
use homeagent_actors::modgraph::{Module, ModuleError, ModuleGraph, Produced};
use homeagent_actors::plugins::host::{PluginSet, plugin_supervision};
use homeagent_actors::plugins::process::PluginDeps;
use homeagent_actors::plugins::watch::PluginWatcher;
use homeagent_actors::stages::StageHost;
use homeagent_actors::supervisor::{BackoffPolicy, Intensity, start_root};
use homeagent_actors::{
    EventBus, Exit, Handles, HostContext, KernelActor, Registry, RestartPolicy, Strategy, SupervisorConfig,
    SupervisorRef, TAddr,
};
use homeagent_plugin_protocol::facility::{self, Facility};
use parking_lot::Mutex;
use tokio::sync::oneshot;

/// Settings read once in group 0, before any actor runs.
#[derive(Debug, Clone)]
pub struct BootSettings {
    pub supervisor: SupervisorConfig,
    pub stuck_after: Duration,
    pub heartbeat_interval: Duration,
    pub shutdown_timeout: Duration,
}

impl BootSettings {
    /// Reads the boot settings from an open (seeded) store.
    pub fn read(store: &ConfigStore) -> Result<Self, homeagent_actors::config::ConfigError> {
        let d = |k: &str| store.get_duration(k);
        Ok(Self {
            supervisor: SupervisorConfig {
                strategy: Strategy::OneForOne,
                intensity: Intensity {
                    max_restarts: store.get_u64("core.supervisor.max_restarts")? as u32,
                    window: d("core.supervisor.restart_window")?,
                },
                backoff: BackoffPolicy {
                    initial: d("core.supervisor.backoff_initial")?,
                    max: d("core.supervisor.backoff_max")?,
                    reset_after: d("core.supervisor.backoff_reset_after")?,
                    jitter: true,
                    growth: Default::default(),
                },
                shutdown_timeout: d("core.daemon.shutdown_timeout")?,
            },
            stuck_after: d("core.supervisor.stuck_threshold")?,
            heartbeat_interval: d("core.daemon.heartbeat_interval")?,
            shutdown_timeout: d("core.daemon.shutdown_timeout")?,
        })
    }
}

/// The kernel's only shared structure: each module writes its own fields once.
pub struct KernelState {
    pub data_dir: PathBuf,
    pub boot: BootSettings,
    pub registry: Arc<Registry>,
    pub bus: EventBus,
    /// Thread for actors that block (SQLite, files), so they never stall the others.
    pub blocking: Arbiter,
    pub root: OnceLock<SupervisorRef>,
    /// Resolves when the root supervisor exits (shutdown done, or it escalated).
    pub root_exit: Mutex<Option<oneshot::Receiver<Exit>>>,
    pub config: OnceLock<TAddr<ConfigActor>>,
    pub heartbeat: OnceLock<TAddr<Heartbeat>>,
    /// Thread of the LLM actor (its HTTP client and Lua adapters live there).
    pub llm_thread: Arbiter,
    pub llm: OnceLock<TAddr<LlmActor>>,
    pub stages: OnceLock<TAddr<StageHost>>,
    pub context: OnceLock<TAddr<ContextActor>>,
    pub textlog: OnceLock<TAddr<homeagent_actors::memory::textlog::TextLogActor>>,
    /// The knowledge base (plugins reach it through `knowledge.*`).
    pub knowledge: OnceLock<TAddr<homeagent_actors::memory::knowledge::KnowledgeActor>>,
    /// The distill heartbeat and its last round (for the API).
    pub distill: OnceLock<homeagent_actors::memory::heartbeat::DistillHandle>,
    /// The graph tier (`kernel/memory/graph`), for the API.
    pub graph: OnceLock<TAddr<homeagent_actors::memory::graph_actor::GraphActor>>,
    /// The embedder and its status (read by the status API without a message).
    pub embedder: OnceLock<homeagent_actors::memory::embed::actor::EmbedderHandle>,
    /// The embedder's own thread: ONNX inference blocks for tens of milliseconds.
    pub embed_thread: Arbiter,
    /// The rule distiller and its last round (for the API).
    pub rules: OnceLock<homeagent_actors::memory::distiller::DistillerHandle>,
    /// `kernel/memory`, where the graph maintenance heartbeats (started with the agent,
    /// which they feed) live.
    pub memory_sup: OnceLock<SupervisorRef>,
    /// The merge and review heartbeats and their last rounds (for the API).
    pub maintenance: OnceLock<Vec<homeagent_actors::memory::graph_heartbeat::MaintenanceHandle>>,
    pub agent: OnceLock<Agent>,
    pub plugins: OnceLock<Arc<PluginSet>>,
    pub plugins_sup: OnceLock<SupervisorRef>,
    /// Where the CLI channel listens (`--socket`, default `DATA/cli.sock`).
    pub socket_path: PathBuf,
    pub started: std::time::Instant,
}

/// Handles of the agent's actors, for the HTTP API.
#[derive(Clone)]
pub struct Agent {
    pub scheduler: TAddr<SchedulerActor>,
    pub event_loop: TAddr<EventLoop>,
    pub intercept_loop: TAddr<InterceptLoop>,
    pub deps: Arc<TaskDeps>,
}

impl KernelState {
    pub fn new(data_dir: PathBuf, boot: BootSettings, socket_path: PathBuf) -> Self {
        Self {
            socket_path,
            started: std::time::Instant::now(),
            plugins_sup: OnceLock::new(),
            registry: Arc::new(Registry::new(boot.stuck_after)),
            data_dir,
            boot,
            bus: EventBus::default(),
            blocking: Arbiter::new(),
            root: OnceLock::new(),
            root_exit: Mutex::new(None),
            config: OnceLock::new(),
            heartbeat: OnceLock::new(),
            llm_thread: Arbiter::new(),
            llm: OnceLock::new(),
            stages: OnceLock::new(),
            context: OnceLock::new(),
            textlog: OnceLock::new(),
            knowledge: OnceLock::new(),
            distill: OnceLock::new(),
            graph: OnceLock::new(),
            embedder: OnceLock::new(),
            embed_thread: Arbiter::new(),
            rules: OnceLock::new(),
            memory_sup: OnceLock::new(),
            maintenance: OnceLock::new(),
            agent: OnceLock::new(),
            plugins: OnceLock::new(),
        }
    }

    fn root(&self) -> Result<&SupervisorRef, ModuleError> {
        self.root
            .get()
            .ok_or_else(|| "the root supervisor is not running".into())
    }
}

impl Produced for KernelState {
    fn produced(&self, f: Facility) -> bool {
        match f {
            facility::SUPERVISOR => self.root.get().is_some(),
            facility::CONFIG => self.config.get().is_some(),
            facility::LLM => self.llm.get().is_some(),
            facility::AGENT => self.agent.get().is_some(),
            facility::STAGEHOST => self.stages.get().is_some(),
            facility::MEMORY => self.context.get().is_some(),
            facility::PLUGIN_HOST => self.plugins.get().is_some(),
            _ => false,
        }
    }
}

/// All modules of the boot graph. Adding a module is one line here.
pub fn modules() -> Vec<Box<dyn Module<KernelState>>> {
    vec![
        Box::new(SupervisionModule),
        Box::new(ConfigModule),
        Box::new(HeartbeatModule),
        Box::new(LlmModule),
        Box::new(StageHostModule),
        Box::new(MemoryModule),
        Box::new(AgentModule),
        Box::new(PluginHostModule),
        Box::new(CliModule),
    ]
}

/// Builds the graph (a wiring mistake is reported before anything starts).
pub fn graph() -> Result<ModuleGraph<KernelState>, homeagent_actors::modgraph::GraphError> {
    ModuleGraph::build(modules())
}

/// Starts the root supervisor `kernel`.
struct SupervisionModule;

impl Module<KernelState> for SupervisionModule {
    fn name(&self) -> &'static str {
        "supervision"
    }
    fn requires(&self) -> &'static [Facility] {
        &[]
    }
    fn provides(&self) -> &'static [Facility] {
        &[facility::SUPERVISOR]
    }
    fn init<'a>(&'a self, s: &'a KernelState) -> LocalBoxFuture<'a, Result<(), ModuleError>> {
        Box::pin(async move {
            let (root, exit) = start_root(s.registry.clone(), s.bus.clone(), "kernel", s.boot.supervisor)?;
            *s.root_exit.lock() = Some(exit);
            let _ = s.root.set(root);
            Ok(())
        })
    }
}

/// The settings registry actor `kernel/config`, on the blocking arbiter.
struct ConfigModule;

impl Module<KernelState> for ConfigModule {
    fn name(&self) -> &'static str {
        "config"
    }
    fn requires(&self) -> &'static [Facility] {
        &[facility::SUPERVISOR]
    }
    fn provides(&self) -> &'static [Facility] {
        &[facility::CONFIG]
    }
    fn init<'a>(&'a self, s: &'a KernelState) -> LocalBoxFuture<'a, Result<(), ModuleError>> {
        Box::pin(async move {
            let path = s.data_dir.join("config.db");
            let data_dir = s.data_dir.clone();
            let bus = s.bus.clone();
            let addr = s
                .root()?
                .worker_on(s.blocking.handle(), "config", RestartPolicy::Permanent, move || {
                    let store = ConfigStore::open(&path, &data_dir).map_err(|e| e.to_string())?;
                    Ok(ConfigActor::new(store, bus.clone()))
                })
                .await?;
            let _ = s.config.set(addr);
            Ok(())
        })
    }
}

/// Writes `DATA/heartbeat` (`t=<unix seconds>`) every `core.daemon.heartbeat_interval`
/// so an outside watchdog can tell a hung daemon from a busy one.
pub struct Heartbeat {
    path: PathBuf,
    interval: Duration,
    /// Consecutive write failures, to log the first one loudly and not flood the log.
    failures: u32,
}

impl Heartbeat {
    pub fn new(path: PathBuf, interval: Duration) -> Self {
        Self {
            path,
            interval,
            failures: 0,
        }
    }

    /// Writes the file atomically (temp file + rename).
    pub fn beat(&mut self) -> std::io::Result<()> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let tmp = self.path.with_extension("tmp");
        std::fs::write(&tmp, format!("t={now}\n"))?;
        std::fs::rename(&tmp, &self.path)
    }
}

/// One heartbeat tick.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Beat;

impl KernelActor for Heartbeat {
    const KIND: &'static str = "heartbeat";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        ctx.run_later(Duration::ZERO, |host, ctx| host.notify(ctx, Beat));
        ctx.run_interval(self.interval, |host, ctx| host.notify(ctx, Beat));
    }
}

impl Handles<Beat> for Heartbeat {
    type Reply = ();
    fn handle(&mut self, _: Beat, _: &mut HostContext<Self>) {
        match self.beat() {
            Ok(()) => {
                if self.failures > 0 {
                    tracing::info!(path = %self.path.display(), "heartbeat file writable again");
                }
                self.failures = 0;
            }
            Err(e) => {
                if self.failures == 0 {
                    tracing::error!(path = %self.path.display(), "cannot write the heartbeat file: {e}; check disk space and permissions");
                }
                self.failures += 1;
            }
        }
    }
}

struct HeartbeatModule;

impl Module<KernelState> for HeartbeatModule {
    fn name(&self) -> &'static str {
        "heartbeat"
    }
    fn requires(&self) -> &'static [Facility] {
        &[facility::SUPERVISOR]
    }
    fn provides(&self) -> &'static [Facility] {
        &[]
    }
    fn init<'a>(&'a self, s: &'a KernelState) -> LocalBoxFuture<'a, Result<(), ModuleError>> {
        Box::pin(async move {
            let path = s.data_dir.join("heartbeat");
            let interval = s.boot.heartbeat_interval;
            let addr = s
                .root()?
                .worker_on(s.blocking.handle(), "heartbeat", RestartPolicy::Permanent, move || {
                    Ok(Heartbeat::new(path.clone(), interval))
                })
                .await?;
            let _ = s.heartbeat.set(addr);
            Ok(())
        })
    }
}

/// `kernel/llm`: the LLM sources, on their own thread. The settings relay configures
/// it as soon as the agent is up (and on every `core.llm.*` change).
struct LlmModule;

impl Module<KernelState> for LlmModule {
    fn name(&self) -> &'static str {
        "llm"
    }
    fn requires(&self) -> &'static [Facility] {
        &[facility::SUPERVISOR]
    }
    fn provides(&self) -> &'static [Facility] {
        &[facility::LLM]
    }
    fn init<'a>(&'a self, s: &'a KernelState) -> LocalBoxFuture<'a, Result<(), ModuleError>> {
        Box::pin(async move {
            let data_dir = s.data_dir.clone();
            let addr = s
                .root()?
                .worker_on(s.llm_thread.handle(), "llm", RestartPolicy::Permanent, move || {
                    Ok(LlmActor::new(data_dir.clone()))
                })
                .await?;
            let _ = s.llm.set(addr);
            Ok(())
        })
    }
}

/// `kernel/stages`: the stage host (stage handlers and the tool registry).
struct StageHostModule;

impl Module<KernelState> for StageHostModule {
    fn name(&self) -> &'static str {
        "stage-host"
    }
    fn requires(&self) -> &'static [Facility] {
        &[facility::SUPERVISOR]
    }
    fn provides(&self) -> &'static [Facility] {
        &[facility::STAGEHOST]
    }
    fn init<'a>(&'a self, s: &'a KernelState) -> LocalBoxFuture<'a, Result<(), ModuleError>> {
        Box::pin(async move {
            let (registry, bus) = (s.registry.clone(), s.bus.clone());
            // Tools and stage handlers outlive a restart of the host.
            let state = homeagent_actors::stages::StageCell::default();
            let addr = s
                .root()?
                .worker("stages", RestartPolicy::Permanent, move || {
                    Ok(StageHost::new("kernel/stages", registry.clone(), bus.clone()).with_state(state.clone()))
                })
                .await?;
            let _ = s.stages.set(addr);
            Ok(())
        })
    }
}

/// `kernel/plugins`: one supervisor per plugin found in `DATA/plugins`.
struct PluginHostModule;

impl Module<KernelState> for PluginHostModule {
    fn name(&self) -> &'static str {
        "plugin-host"
    }
    fn requires(&self) -> &'static [Facility] {
        &[
            facility::SUPERVISOR,
            facility::STAGEHOST,
            facility::AGENT,
            facility::CONFIG,
        ]
    }
    fn provides(&self) -> &'static [Facility] {
        &[facility::PLUGIN_HOST]
    }
    fn init<'a>(&'a self, s: &'a KernelState) -> LocalBoxFuture<'a, Result<(), ModuleError>> {
        Box::pin(async move {
            let sup = s
                .root()?
                .supervisor("plugins", RestartPolicy::Permanent, s.boot.supervisor)
                .await?;
            let agent = s.agent.get().ok_or("agent missing")?;
            let deps = PluginDeps {
                stages: s.stages.get().cloned().ok_or("stage host missing")?,
                event_loop: agent.event_loop.clone(),
                intercept_loop: agent.intercept_loop.clone(),
                config: s.config.get().cloned().ok_or("config missing")?,
                bus: s.bus.clone(),
                services: homeagent_actors::plugins::services::KernelServices {
                    bus: s.bus.clone(),
                    channels: agent.deps.channels.clone(),
                    context: Some(agent.deps.context.clone()),
                    textlog: Some(agent.deps.textlog.clone()),
                    graph: agent.deps.graph.clone(),
                    knowledge: s.knowledge.get().cloned(),
                    config: s.config.get().cloned(),
                    llm: s.llm.get().cloned(),
                },
            };
            let dir = s.data_dir.join("plugins");
            install_bundled(&dir);
            let config = s.config.get().cloned().ok_or("config missing")?;
            let disabled = config.send(DisabledPlugins).await?.unwrap_or_default();
            let sink_deps = agent.deps.clone();
            let on_skills: homeagent_actors::plugins::host::SkillsSink =
                Arc::new(move |index| *sink_deps.skills_index.write() = index);
            let setup = homeagent_actors::plugins::host::PluginSetup {
                plugins_dir: dir.clone(),
                data_dir: s.data_dir.clone(),
                deps,
                config: plugin_supervision(),
                registry: s.registry.clone(),
                on_skills,
            };
            let entries = PluginSet::start(sup.clone(), setup, &disabled).await;
            tracing::info!(plugins = entries.len(), dir = %dir.display(), "plugins loaded");
            let (e, r) = (entries.clone(), s.registry.clone());
            sup.worker_on(s.blocking.handle(), "watcher", RestartPolicy::Permanent, move || {
                Ok(PluginWatcher::new(
                    e.clone(),
                    r.clone(),
                    std::time::Duration::from_secs(2),
                ))
            })
            .await?;
            let _ = s.plugins.set(entries);
            let _ = s.plugins_sup.set(sup);
            Ok(())
        })
    }
}

/// A file of a bundled plugin: its name, content and whether it is executable.
type BundledFile = (&'static str, &'static str, bool);

/// The bundled plugins. `timer` and `mcp` (the MCP bridge) are Rust plugins compiled
/// into `homed`: their `plugin.bin` is a two-line script that runs this very executable
/// (`homed plugin <name>`), so they always match the daemon. `units` (Lua) and `meeting-notes`
/// (SKILL.md) are examples shipped as their source files.
const BUNDLED: &[(&str, &[BundledFile])] = &[
    (
        "timer",
        &[
            ("plugin.json", include_str!("../plugins/timer/plugin.json"), false),
            ("plugin.bin", "#!/bin/sh\nexec '@HOMED@' plugin timer\n", true),
        ],
    ),
    (
        "mcp",
        &[
            ("plugin.json", include_str!("../plugins/mcp/plugin.json"), false),
            ("plugin.bin", "#!/bin/sh\nexec '@HOMED@' plugin mcp\n", true),
        ],
    ),
    (
        "units",
        &[
            ("plugin.json", include_str!("../plugins/units/plugin.json"), false),
            ("main.lua", include_str!("../plugins/units/main.lua"), false),
        ],
    ),
    (
        "meeting-notes",
        &[
            (
                "plugin.json",
                include_str!("../plugins/meeting-notes/plugin.json"),
                false,
            ),
            ("SKILL.md", include_str!("../plugins/meeting-notes/SKILL.md"), false),
        ],
    ),
];

/// Installs the bundled plugins into `DATA/plugins` the first time the daemon sees
/// this data directory. A plugin removed by the user stays removed:
/// `DATA/plugins/.bundled` remembers what was installed once. A directory the user
/// already has under that name is left alone.
fn install_bundled(dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let marker = dir.join(".bundled");
    let done = std::fs::read_to_string(&marker).unwrap_or_default();
    let Ok(exe) = std::env::current_exe() else {
        tracing::warn!("cannot find the homed executable; bundled plugins not installed");
        return;
    };
    let quoted = exe.display().to_string().replace('\'', "'\\''");
    for (name, files) in BUNDLED {
        if done.lines().any(|l| l == *name) {
            continue;
        }
        let target = dir.join(name);
        let result = (|| -> std::io::Result<()> {
            if !target.exists() {
                // Written next to the target, then renamed: never half a plugin.
                let staging = dir.join(format!(".bundled-{name}"));
                let _ = std::fs::remove_dir_all(&staging);
                std::fs::create_dir_all(&staging)?;
                for (file, content, exec) in *files {
                    let path = staging.join(file);
                    std::fs::write(&path, content.replace("@HOMED@", &quoted))?;
                    if *exec {
                        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
                    }
                }
                std::fs::rename(&staging, &target)?;
            }
            let mut m = std::fs::OpenOptions::new().create(true).append(true).open(&marker)?;
            std::io::Write::write_all(&mut m, format!("{name}\n").as_bytes())
        })();
        match result {
            Ok(()) => tracing::info!(plugin = name, "bundled plugin installed"),
            Err(e) => tracing::warn!(plugin = name, "cannot install the bundled plugin: {e}"),
        }
    }
}

/// `kernel/plugins/cli`: the built-in CLI channel on the Unix socket.
struct CliModule;

impl Module<KernelState> for CliModule {
    fn name(&self) -> &'static str {
        "cli"
    }
    fn requires(&self) -> &'static [Facility] {
        &[facility::PLUGIN_HOST, facility::AGENT, facility::CONFIG]
    }
    fn provides(&self) -> &'static [Facility] {
        &[]
    }
    fn init<'a>(&'a self, s: &'a KernelState) -> LocalBoxFuture<'a, Result<(), ModuleError>> {
        Box::pin(async move {
            let deps = crate::cli_socket::CliDeps {
                agent: s.agent.get().cloned().ok_or("agent missing")?,
                config: s.config.get().cloned().ok_or("config missing")?,
                registry: s.registry.clone(),
                plugins: s.plugins.get().cloned().ok_or("plugin host missing")?,
                started: s.started,
            };
            let path = s.socket_path.clone();
            s.plugins_sup
                .get()
                .ok_or("plugins supervisor missing")?
                .worker("cli", RestartPolicy::Permanent, move || {
                    Ok(crate::cli_socket::CliSocket::new(path.clone(), deps.clone()))
                })
                .await?;
            Ok(())
        })
    }
}

/// `kernel/memory`: the memory tiers (context, text log, knowledge, graph) and the distill heartbeat.
struct MemoryModule;

impl Module<KernelState> for MemoryModule {
    fn name(&self) -> &'static str {
        "memory"
    }
    fn requires(&self) -> &'static [Facility] {
        &[facility::SUPERVISOR, facility::STAGEHOST, facility::CONFIG]
    }
    fn provides(&self) -> &'static [Facility] {
        &[facility::MEMORY]
    }
    fn init<'a>(&'a self, s: &'a KernelState) -> LocalBoxFuture<'a, Result<(), ModuleError>> {
        Box::pin(async move {
            let sup = s
                .root()?
                .supervisor("memory", RestartPolicy::Permanent, s.boot.supervisor)
                .await?;
            let path = s.data_dir.join("memory").join("memory.db");
            let context = sup
                .worker_on(s.blocking.handle(), "context", RestartPolicy::Permanent, move || {
                    let store = MemoryStore::open(&path).map_err(|e| e.to_string())?;
                    ContextActor::open(store).map_err(|e| e.to_string())
                })
                .await?;
            let text_dir = s.data_dir.join("memory").join("text");
            let textlog = sup
                .worker_on(s.blocking.handle(), "textlog", RestartPolicy::Permanent, move || {
                    use homeagent_actors::memory::textlog::{MAX_AGE, MAX_BYTES, TextLog, TextLogActor};
                    Ok(TextLogActor::new(TextLog::new(&text_dir, MAX_AGE, MAX_BYTES)))
                })
                .await?;
            let _ = s.textlog.set(textlog);
            let kb_dir = s.data_dir.join("knowledge");
            let knowledge = sup
                .worker_on(s.blocking.handle(), "knowledge", RestartPolicy::Permanent, move || {
                    use homeagent_actors::memory::knowledge::{KnowledgeActor, KnowledgeBase};
                    Ok(KnowledgeActor::new(KnowledgeBase::new(&kb_dir)))
                })
                .await?;
            let _ = s.knowledge.set(knowledge.clone());
            let graph_path = s.data_dir.join("memory").join("graph.db");
            let graph = sup
                .worker_on(s.blocking.handle(), "graph", RestartPolicy::Permanent, move || {
                    use homeagent_actors::memory::{graph::GraphStore, graph_actor::GraphActor};
                    Ok(GraphActor::new(
                        GraphStore::open(&graph_path).map_err(|e| e.to_string())?,
                    ))
                })
                .await?;
            let _ = s.graph.set(graph.clone());
            let rules_last: Arc<Mutex<Option<homeagent_actors::memory::distiller::RulesRound>>> = Arc::default();
            let (g, l, dir) = (graph.clone(), rules_last.clone(), s.data_dir.join("memory"));
            let rules = sup
                .worker_on(s.blocking.handle(), "distiller", RestartPolicy::Permanent, move || {
                    use homeagent_actors::memory::distiller::{INTERVAL, RuleDistiller};
                    Ok(RuleDistiller::new(
                        dir.join("text"),
                        dir.join("distiller.cursor"),
                        g.clone(),
                        INTERVAL,
                        l.clone(),
                    ))
                })
                .await?;
            let _ = s.rules.set((rules, rules_last));
            let stages = s.stages.get().cloned().ok_or("stage host missing")?;
            for (spec, handler) in homeagent_actors::memory::graph_actor::graph_tools(graph, s.textlog.get().cloned()) {
                stages
                    .send(homeagent_actors::stages::RegisterTool { spec, handler })
                    .await??;
            }
            for (spec, handler) in homeagent_actors::memory::knowledge::knowledge_tools(knowledge) {
                stages
                    .send(homeagent_actors::stages::RegisterTool { spec, handler })
                    .await??;
            }
            // The embedder: its own thread; the model loads after boot, in the background.
            let config = s.config.get().cloned().ok_or("config missing")?;
            let all = config.send(homeagent_actors::config::GetRawSettings).await??;
            let embed_cfg = homeagent_actors::memory::embed::embed_config(&all);
            let status = homeagent_actors::memory::embed::actor::EmbedderActor::status_handle(&embed_cfg);
            let (st, dd, db) = (
                status.clone(),
                s.data_dir.clone(),
                s.data_dir.join("memory").join("memory.db"),
            );
            let embedder = sup
                .worker_on(
                    s.embed_thread.handle(),
                    "embedder",
                    RestartPolicy::Permanent,
                    move || {
                        use homeagent_actors::memory::embed::actor::EmbedderActor;
                        let store = MemoryStore::open(&db).map_err(|e| e.to_string())?;
                        Ok(EmbedderActor::new(embed_cfg.clone(), dd.clone(), store, st.clone()))
                    },
                )
                .await?;
            let handle = homeagent_actors::memory::embed::actor::EmbedderHandle { addr: embedder, status };
            let _ = s.embedder.set(handle.clone());
            for (spec, handler) in homeagent_actors::memory::actor::document_tools(context.clone(), Some(handle)) {
                stages
                    .send(homeagent_actors::stages::RegisterTool { spec, handler })
                    .await??;
            }
            // The distill heartbeat; its period follows `core.agent.distill_interval`.
            let every: homeagent_actors::memory::heartbeat::IntervalCell =
                Arc::new(Mutex::new(interval(&all, "core.agent.distill_interval", 30)));
            let last: Arc<Mutex<Option<Round>>> = Arc::default();
            let (c, l, cfg) = (context.clone(), last.clone(), config.clone());
            let distill = sup
                .worker("heartbeat-distill", RestartPolicy::Permanent, move || {
                    Ok(DistillHeartbeat::new(c.clone(), cfg.clone(), every.clone(), l.clone()))
                })
                .await?;
            let _ = s.distill.set((distill, last));
            let _ = s.memory_sup.set(sup.clone());
            let _ = s.context.set(context);
            Ok(())
        })
    }
}

/// Applies changed `core.agent.{distill,archive,merge,review}_interval` settings to the
/// running heartbeats (they re-arm their timers; the new period also survives their
/// restarts). Listens on the kernel bus for as long as the kernel runs.
fn follow_heartbeat_intervals(s: &KernelState) {
    use homeagent_actors::memory::graph_heartbeat::Maintenance;
    use homeagent_actors::memory::heartbeat::SetInterval;
    let distill = s.distill.get().map(|(a, _)| a.clone());
    let maintenance: Vec<_> = s
        .maintenance
        .get()
        .map(|v| v.iter().map(|(k, a, _)| (*k, a.clone())).collect())
        .unwrap_or_default();
    let mut rx = s.bus.subscribe();
    actix_rt::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            let ev = match rx.recv().await {
                Ok(ev) => ev,
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => break,
            };
            let Some((key, value)) = ev.changed_setting() else {
                continue;
            };
            let kind = match key {
                "core.agent.distill_interval" => None,
                "core.agent.archive_interval" => Some(Maintenance::Archive),
                "core.agent.merge_interval" => Some(Maintenance::Merge),
                "core.agent.review_interval" => Some(Maintenance::Review),
                _ => continue,
            };
            let Some(every) = value
                .as_str()
                .and_then(|v| homeagent_actors::config::parse_duration(v).ok())
            else {
                continue;
            };
            tracing::info!(key, ?every, "heartbeat interval changed");
            match kind {
                None => {
                    if let Some(a) = &distill {
                        let _ = a.do_send(SetInterval(every));
                    }
                }
                Some(k) => {
                    for (_, a) in maintenance.iter().filter(|(mk, _)| *mk == k) {
                        let _ = a.do_send(SetInterval(every));
                    }
                }
            }
        }
    });
}

/// A heartbeat interval setting as read at start (a changed value applies after a
/// restart), or its default in minutes when absent or unreadable.
fn interval(
    all: &std::collections::BTreeMap<String, serde_json::Value>,
    key: &str,
    default_min: u64,
) -> std::time::Duration {
    all.get(key)
        .and_then(serde_json::Value::as_str)
        .and_then(|v| homeagent_actors::config::parse_duration(v).ok())
        .unwrap_or(std::time::Duration::from_secs(default_min * 60))
}

/// `kernel/agent`: scheduler, intake loops and the settings relay.
struct AgentModule;

impl Module<KernelState> for AgentModule {
    fn name(&self) -> &'static str {
        "agent"
    }
    fn requires(&self) -> &'static [Facility] {
        &[
            facility::SUPERVISOR,
            facility::CONFIG,
            facility::LLM,
            facility::STAGEHOST,
            facility::MEMORY,
        ]
    }
    fn provides(&self) -> &'static [Facility] {
        &[facility::AGENT]
    }
    fn init<'a>(&'a self, s: &'a KernelState) -> LocalBoxFuture<'a, Result<(), ModuleError>> {
        Box::pin(async move {
            let root = s.root()?;
            let sup = root
                .supervisor("agent", RestartPolicy::Permanent, s.boot.supervisor)
                .await?;
            let deps = Arc::new(TaskDeps {
                registry: s.registry.clone(),
                bus: s.bus.clone(),
                llm: s.llm.get().cloned().ok_or("llm missing")?,
                stages: s.stages.get().cloned().ok_or("stage host missing")?,
                context: s.context.get().cloned().ok_or("context missing")?,
                textlog: s.textlog.get().cloned().ok_or("text log missing")?,
                graph: s.graph.get().cloned(),
                embedder: s.embedder.get().cloned(),
                channels: Channels::builtin(),
                skills_index: Default::default(),
                settings: parking_lot::RwLock::new(AgentSettings::default()),
            });
            let me: Arc<OnceLock<TAddr<SchedulerActor>>> = Arc::default();
            let (d, m) = (deps.clone(), me.clone());
            let scheduler = sup
                .worker("scheduler", RestartPolicy::Permanent, move || {
                    Ok(SchedulerActor::new(d.clone(), m.clone()))
                })
                .await?;
            let _ = me.set(scheduler.clone());
            let sc = scheduler.clone();
            let event_loop = sup
                .worker("event-loop", RestartPolicy::Permanent, move || {
                    Ok(EventLoop::new(sc.clone()))
                })
                .await?;
            let sc = scheduler.clone();
            let intercept_loop = sup
                .worker("intercept-loop", RestartPolicy::Permanent, move || {
                    Ok(InterceptLoop::new(sc.clone()))
                })
                .await?;
            let config = s.config.get().cloned().ok_or("config missing")?;
            let d = deps.clone();
            sup.worker("settings-relay", RestartPolicy::Permanent, move || {
                Ok(SettingsRelay::new(config.clone(), d.clone()))
            })
            .await?;
            // The graph maintenance heartbeats hand their tasks to the event loop.
            if let (Some(msup), Some(graph)) = (s.memory_sup.get(), s.graph.get()) {
                use homeagent_actors::memory::graph_heartbeat::{GraphHeartbeat, Maintenance};
                let config = s.config.get().cloned().ok_or("config missing")?;
                let all = config.send(homeagent_actors::config::GetRawSettings).await??;
                let mut handles = Vec::new();
                for (kind, key, name, default_min) in [
                    (
                        Maintenance::Archive,
                        "core.agent.archive_interval",
                        "heartbeat-archive",
                        60,
                    ),
                    (Maintenance::Merge, "core.agent.merge_interval", "heartbeat-merge", 120),
                    (
                        Maintenance::Review,
                        "core.agent.review_interval",
                        "heartbeat-review",
                        120,
                    ),
                ] {
                    let every: homeagent_actors::memory::heartbeat::IntervalCell =
                        Arc::new(Mutex::new(interval(&all, key, default_min)));
                    let last: Arc<Mutex<Option<homeagent_actors::memory::graph_heartbeat::MaintenanceRound>>> =
                        Arc::default();
                    let (g, e, l) = (graph.clone(), event_loop.clone(), Arc::clone(&last));
                    let c = (kind == Maintenance::Archive)
                        .then(|| s.context.get().cloned())
                        .flatten();
                    let em = (kind == Maintenance::Merge)
                        .then(|| s.embedder.get().map(|h| h.addr.clone()))
                        .flatten();
                    let hb = msup
                        .worker(name, RestartPolicy::Permanent, move || {
                            Ok(
                                GraphHeartbeat::new(kind, g.clone(), e.clone(), c.clone(), every.clone(), l.clone())
                                    .with_embedder(em.clone()),
                            )
                        })
                        .await?;
                    handles.push((kind, hb, last));
                }
                let _ = s.maintenance.set(handles);
            }
            follow_heartbeat_intervals(s);
            let _ = s.agent.set(Agent {
                scheduler,
                event_loop,
                intercept_loop,
                deps,
            });
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_boot_graph_resolves() {
        let g = graph().expect("the kernel's own modules must form a valid graph");
        assert_eq!(
            g.layers(),
            vec![
                vec!["supervision"],
                vec!["config", "heartbeat", "llm", "stage-host"],
                vec!["memory"],
                vec!["agent"],
                vec!["plugin-host"],
                vec!["cli"]
            ]
        );
    }

    #[test]
    fn heartbeat_writes_the_file_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let mut hb = Heartbeat::new(dir.path().join("heartbeat"), Duration::from_secs(1));
        hb.beat().unwrap();
        let text = std::fs::read_to_string(dir.path().join("heartbeat")).unwrap();
        let t: u64 = text.trim().strip_prefix("t=").unwrap().parse().unwrap();
        assert!(t > 1_700_000_000);
        assert!(!dir.path().join("heartbeat.tmp").exists());
    }
}
