//! Kernel assembly: the state the boot graph fills, and the modules that fill it.
//!
//! Group 0 (serial, in [`crate::daemon`]) creates the data directory, takes the lock,
//! opens and seeds the settings database and reads the few settings the tree itself
//! needs. Everything after that is a [`Module`] of the boot graph: it declares the
//! facilities it requires and provides, and [`ModuleGraph`] derives the order.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures_util::future::LocalBoxFuture;
use homeagent_actors::agent::AgentHandles;
use homeagent_actors::agent::channels::Channels;
use homeagent_actors::agent::inbox::{InboxActor, InboxStore};
use homeagent_actors::agent::intake::{ReplayInbox, SelfInput};
use homeagent_actors::agent::relay::{SettingsRelay, agent_settings};
use homeagent_actors::agent::start::Profile;
use homeagent_actors::agent::task::TaskDeps;
use homeagent_actors::config::{
    ConfigActor, ConfigStore, DaemonConfig, DisabledPlugins, Key, ReadSettings, Settings, SupervisionConfig, keys,
};
use homeagent_actors::llm::provider::LlmActor;
use homeagent_actors::memory::lifecycle::graph_heartbeat::{Maintenance, MaintenanceHandle, TaskSink};
use homeagent_actors::memory::start::{MemoryDeps, MemoryHandles};
use homeagent_actors::modgraph::{Module, ModuleError, ModuleGraph, Produced, Slot};
use homeagent_actors::plugins::process::PluginDeps;
use homeagent_actors::plugins::set::{PluginSet, plugin_supervision};
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
    /// Reads the boot settings from a snapshot of the (seeded) store; a value of the
    /// wrong type is an error here, so the daemon refuses to start on it.
    pub fn read(settings: &Settings) -> Result<Self, homeagent_actors::config::ConfigError> {
        let sup = SupervisionConfig::try_read(settings)?;
        let daemon = DaemonConfig::try_read(settings)?;
        Ok(Self::from_config(&sup, &daemon))
    }

    /// The tree's configuration out of the typed groups.
    pub fn from_config(sup: &SupervisionConfig, daemon: &DaemonConfig) -> Self {
        Self {
            supervisor: SupervisorConfig {
                strategy: Strategy::OneForOne,
                intensity: Intensity {
                    max_restarts: sup.max_restarts,
                    window: sup.restart_window,
                },
                backoff: BackoffPolicy {
                    initial: sup.backoff_initial,
                    max: sup.backoff_max,
                    reset_after: sup.backoff_reset_after,
                    jitter: true,
                    growth: Default::default(),
                },
                shutdown_timeout: daemon.shutdown_timeout,
            },
            stuck_after: sup.stuck_threshold,
            heartbeat_interval: daemon.heartbeat_interval,
            shutdown_timeout: daemon.shutdown_timeout,
        }
    }
}

/// The kernel's only shared structure. Beside the few values group 0 sets, it is one
/// typed [`Slot`] per module output: a module fills its own slot once, and a module
/// that requires a facility reads that one typed handle (`&MemoryHandles`, …) and
/// hands it to typed start functions. No consumer digs an optional field out of a
/// bag of them.
pub struct KernelState {
    pub data_dir: PathBuf,
    pub boot: BootSettings,
    pub registry: Arc<Registry>,
    pub bus: EventBus,
    /// Thread for actors that block (SQLite, files), so they never stall the others.
    pub blocking: Arbiter,
    /// Thread of the LLM actor (its HTTP client and Lua adapters live there).
    pub llm_thread: Arbiter,
    /// The embedder's own thread: ONNX inference blocks for tens of milliseconds.
    pub embed_thread: Arbiter,
    /// Where the CLI channel listens (`--socket`, default `DATA/cli.sock`).
    pub socket_path: PathBuf,
    pub started: std::time::Instant,
    /// Resolves when the root supervisor exits (shutdown done, or it escalated).
    pub root_exit: Mutex<Option<oneshot::Receiver<Exit>>>,
    /// `kernel` ([`facility::SUPERVISOR`]).
    pub root: Slot<SupervisorRef>,
    /// `kernel/config` ([`facility::CONFIG`]).
    pub config: Slot<TAddr<ConfigActor>>,
    /// `kernel/heartbeat` (no facility: nothing depends on it).
    pub heartbeat: Slot<TAddr<Heartbeat>>,
    /// `kernel/backups`, scheduled backups (nothing depends on it but the HTTP API).
    pub backups: Slot<crate::backup::actor::BackupHandle>,
    /// `kernel/llm` ([`facility::LLM`]).
    pub llm: Slot<TAddr<LlmActor>>,
    /// `kernel/usage`, the usage ledger the LLM actor records every call in (made by
    /// the llm module; nothing depends on it but the HTTP API).
    pub usage: Slot<TAddr<homeagent_actors::usage::UsageActor>>,
    /// `kernel/stages` ([`facility::STAGEHOST`]).
    pub stages: Slot<TAddr<StageHost>>,
    /// `kernel/memory` and its tiers ([`facility::MEMORY`]).
    pub memory: Slot<MemoryHandles>,
    /// `kernel/agent` ([`facility::AGENT`]), with the maintenance heartbeats it feeds.
    pub agent: Slot<AgentModuleOutput>,
    /// `kernel/plugins` ([`facility::PLUGIN_HOST`]).
    pub plugins: Slot<PluginHandles>,
    /// The security firewall (no actor: a shared policy the tool runner and the HTTP
    /// API read; the agent's settings relay reconfigures it).
    pub firewall: Arc<homeagent_actors::firewall::Firewall>,
    /// How many LLM sources `kernel/llm` has configured (no actor: the HTTP API reads
    /// it on every message instead of asking the LLM thread).
    pub llm_sources: homeagent_actors::llm::provider::SourceGauge,
}

/// What the agent module makes: the agent, and the graph maintenance heartbeats
/// (they live in `kernel/memory` but start with the agent, whose intake they feed).
#[derive(Clone)]
pub struct AgentModuleOutput {
    pub agent: AgentHandles,
    pub maintenance: Vec<MaintenanceHandle>,
    /// The lifecycle policy the maintenance heartbeats share (the settings follower
    /// changes its daily budget).
    pub maintenance_policy: homeagent_actors::memory::lifecycle::policy::PolicyCell,
}

/// The plugin host.
#[derive(Clone)]
pub struct PluginHandles {
    pub set: Arc<PluginSet>,
    /// `kernel/plugins`, where the CLI channel is added.
    pub sup: SupervisorRef,
}

impl KernelState {
    pub fn new(data_dir: PathBuf, boot: BootSettings, socket_path: PathBuf) -> Self {
        Self {
            socket_path,
            started: std::time::Instant::now(),
            registry: Arc::new(Registry::new(boot.stuck_after)),
            data_dir,
            boot,
            bus: EventBus::default(),
            blocking: Arbiter::new(),
            llm_thread: Arbiter::new(),
            embed_thread: Arbiter::new(),
            firewall: Arc::default(),
            llm_sources: Default::default(),
            root_exit: Mutex::new(None),
            root: Slot::new(facility::SUPERVISOR),
            config: Slot::new(facility::CONFIG),
            heartbeat: Slot::new("heartbeat"),
            backups: Slot::new("backups"),
            llm: Slot::new(facility::LLM),
            usage: Slot::new("usage"),
            stages: Slot::new(facility::STAGEHOST),
            memory: Slot::new(facility::MEMORY),
            agent: Slot::new(facility::AGENT),
            plugins: Slot::new(facility::PLUGIN_HOST),
        }
    }
}

impl Produced for KernelState {
    fn produced(&self, f: Facility) -> bool {
        match f {
            facility::SUPERVISOR => self.root.is_provided(),
            facility::CONFIG => self.config.is_provided(),
            facility::LLM => self.llm.is_provided(),
            facility::AGENT => self.agent.is_provided(),
            facility::STAGEHOST => self.stages.is_provided(),
            facility::MEMORY => self.memory.is_provided(),
            facility::PLUGIN_HOST => self.plugins.is_provided(),
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
        Box::new(BackupModule),
        Box::new(LlmModule),
        Box::new(StageHostModule),
        Box::new(MemoryModule),
        Box::new(AgentModule),
        Box::new(PluginHostModule),
        Box::new(CliModule),
        Box::new(ReplayModule),
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
            s.root.provide(root)?;
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
                .root
                .get()?
                .worker_on(s.blocking.handle(), "config", RestartPolicy::Permanent, move || {
                    let store = ConfigStore::open(&path, &data_dir)?;
                    Ok(ConfigActor::new(store, bus.clone()))
                })
                .await?;
            s.config.provide(addr)?;
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
                // The service manager's watchdog is fed by the same proof of life.
                crate::service::notify("WATCHDOG=1");
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
                .root
                .get()?
                .worker_on(s.blocking.handle(), "heartbeat", RestartPolicy::Permanent, move || {
                    Ok(Heartbeat::new(path.clone(), interval))
                })
                .await?;
            s.heartbeat.provide(addr)?;
            Ok(())
        })
    }
}

/// `kernel/backups`: scheduled backups and the WebUI's "Back up now" (`backup::actor`).
struct BackupModule;

impl Module<KernelState> for BackupModule {
    fn name(&self) -> &'static str {
        "backups"
    }
    fn requires(&self) -> &'static [Facility] {
        &[facility::SUPERVISOR, facility::CONFIG]
    }
    fn provides(&self) -> &'static [Facility] {
        &[]
    }
    fn init<'a>(&'a self, s: &'a KernelState) -> LocalBoxFuture<'a, Result<(), ModuleError>> {
        Box::pin(async move {
            let (data, config) = (s.data_dir.clone(), s.config.get()?.clone());
            let status: Arc<crate::backup::actor::Status> = Arc::default();
            let st = status.clone();
            let addr = s
                .root
                .get()?
                .worker("backups", RestartPolicy::Permanent, move || {
                    Ok(crate::backup::actor::BackupActor::new(
                        data.clone(),
                        config.clone(),
                        st.clone(),
                    ))
                })
                .await?;
            s.backups.provide(crate::backup::actor::BackupHandle { addr, status })?;
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
            let (data_dir, gauge) = (s.data_dir.clone(), s.llm_sources.clone());
            let usage_path = s.data_dir.join("usage.db");
            let usage = s
                .root
                .get()?
                .worker_on(s.blocking.handle(), "usage", RestartPolicy::Permanent, move || {
                    let store = homeagent_actors::usage::UsageStore::open(&usage_path)?;
                    Ok(homeagent_actors::usage::UsageActor::new(store))
                })
                .await?;
            let (ledger, bus) = (usage.clone(), s.bus.clone());
            let addr = s
                .root
                .get()?
                .worker_on(s.llm_thread.handle(), "llm", RestartPolicy::Permanent, move || {
                    Ok(LlmActor::with_gauge(data_dir.clone(), gauge.clone())
                        .with_usage(ledger.clone())
                        .with_bus(bus.clone()))
                })
                .await?;
            // What the budget's periods spent so far, so a restart does not hand out a
            // day's or a month's budget again (the ledger holds every answered call).
            let asked = usage
                .send(homeagent_actors::usage::GetSpent {
                    now_ms: homeagent_actors::clock::now_ms(),
                })
                .await;
            match asked {
                Ok(Ok(spent)) => {
                    let _ = addr.send(homeagent_actors::llm::provider::SeedBudget(spent)).await;
                }
                other => {
                    tracing::warn!("the model usage so far could not be read ({other:?}); the budget counts from zero")
                }
            }
            s.usage.provide(usage)?;
            s.llm.provide(addr)?;
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
                .root
                .get()?
                .worker("stages", RestartPolicy::Permanent, move || {
                    Ok(StageHost::new("kernel/stages", registry.clone(), bus.clone()).with_state(state.clone()))
                })
                .await?;
            s.stages.provide(addr)?;
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
        // Memory and LLM are read for the plugin services (`memory.*`, `llm.*`).
        &[
            facility::SUPERVISOR,
            facility::STAGEHOST,
            facility::AGENT,
            facility::CONFIG,
            facility::MEMORY,
            facility::LLM,
        ]
    }
    fn provides(&self) -> &'static [Facility] {
        &[facility::PLUGIN_HOST]
    }
    fn init<'a>(&'a self, s: &'a KernelState) -> LocalBoxFuture<'a, Result<(), ModuleError>> {
        Box::pin(async move {
            let (stages, config) = (s.stages.get()?, s.config.get()?);
            let agent = &s.agent.get()?.agent;
            let sup = s
                .root
                .get()?
                .supervisor("plugins", RestartPolicy::Permanent, s.boot.supervisor)
                .await?;
            let deps = plugin_deps(s, agent, stages, config)?;
            let confiner = deps.confiner.clone();
            confiner.set_owner_settings(config.send(homeagent_actors::config::ReadSettings).await??.raw());
            let dir = s.data_dir.join("plugins");
            install_bundled(&dir);
            let disabled = config.send(DisabledPlugins).await?.unwrap_or_default();
            let sink_deps = agent.deps.clone();
            let on_skills: homeagent_actors::plugins::set::SkillsSink =
                Arc::new(move |index| *sink_deps.skills_index.write() = index);
            let setup = homeagent_actors::plugins::set::PluginSetup {
                plugins_dir: dir.clone(),
                data_dir: s.data_dir.clone(),
                deps,
                config: plugin_supervision(),
                registry: s.registry.clone(),
                on_skills,
            };
            let entries = PluginSet::start(sup.clone(), setup, &disabled).await;
            tracing::info!(plugins = entries.len(), dir = %dir.display(), "plugins loaded");
            // The `pluginmgr` tools and `get_plugin_tools` act on the live plugin set.
            let manager = homeagent_actors::plugins::manager::Manager {
                plugins: entries.clone(),
                registry: s.registry.clone(),
                config: config.clone(),
                llm: s.llm.get()?.clone(),
                stages: stages.clone(),
                channels: agent.deps.channels.clone(),
            };
            homeagent_actors::plugins::manager::register(Arc::new(manager))
                .await
                .map_err(|e| format!("cannot register the pluginmgr tools: {e}"))?;
            // `selftest` checks the live sources, embedder, databases and plugins.
            let check = homeagent_actors::agent::selftest::Selftest {
                llm: s.llm.get()?.clone(),
                embedder: s.memory.get()?.embedder.clone(),
                plugins: {
                    let (e, r) = (entries.clone(), s.registry.clone());
                    Box::new(move || {
                        e.list()
                            .iter()
                            .map(|p| serde_json::to_value(p.status(&r)).unwrap_or(serde_json::Value::Null))
                            .collect()
                    })
                },
                data_dir: s.data_dir.clone(),
            };
            stages
                .send(homeagent_actors::stages::RegisterTool {
                    spec: homeagent_actors::agent::selftest::spec(),
                    handler: homeagent_actors::agent::selftest::handler(Arc::new(check)),
                })
                .await??;
            let (e, r) = (entries.clone(), s.registry.clone());
            sup.worker_on(s.blocking.handle(), "watcher", RestartPolicy::Permanent, move || {
                Ok(PluginWatcher::new(
                    e.clone(),
                    r.clone(),
                    std::time::Duration::from_secs(2),
                    confiner.clone(),
                ))
            })
            .await?;
            s.plugins.provide(PluginHandles { set: entries, sup })?;
            Ok(())
        })
    }
}

/// What plugins reach of the kernel: built from the typed handles of the modules the
/// plugin host requires.
fn plugin_deps(
    s: &KernelState,
    agent: &AgentHandles,
    stages: &TAddr<StageHost>,
    config: &TAddr<ConfigActor>,
) -> Result<PluginDeps, ModuleError> {
    let memory = s.memory.get()?;
    Ok(PluginDeps {
        stages: stages.clone(),
        event_loop: agent.event_loop.clone(),
        intercept_loop: agent.intercept_loop.clone(),
        config: config.clone(),
        bus: s.bus.clone(),
        services: homeagent_actors::plugins::services::KernelServices {
            bus: s.bus.clone(),
            channels: agent.deps.channels.clone(),
            context: Some(memory.context.clone()),
            documents: Some(memory.documents.clone()),
            textlog: Some(memory.textlog.clone()),
            graph: Some(memory.graph.clone()),
            knowledge: Some(memory.knowledge.clone()),
            config: Some(config.clone()),
            llm: Some(s.llm.get()?.clone()),
            media: Some(memory.media.clone()),
        },
        confiner: Arc::new(homeagent_actors::plugins::confine::Confiner::new(
            s.data_dir.clone(),
            s.firewall.clone(),
        )),
        registry: s.registry.clone(),
    })
}

/// A file of a bundled plugin: its name, content and whether it is executable.
type BundledFile = (&'static str, &'static str, bool);

/// The bundled plugins. `timer`, `mcp` (the MCP bridge), `files`, `cmd`, `web`, `terminal`, `onebot` (the QQ bridge) and `memo` (notes with reminders) are Rust plugins compiled
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
        "files",
        &[
            ("plugin.json", include_str!("../plugins/files/plugin.json"), false),
            ("plugin.bin", "#!/bin/sh\nexec '@HOMED@' plugin files\n", true),
        ],
    ),
    (
        "cmd",
        &[
            ("plugin.json", include_str!("../plugins/cmd/plugin.json"), false),
            ("plugin.bin", "#!/bin/sh\nexec '@HOMED@' plugin cmd\n", true),
        ],
    ),
    (
        "web",
        &[
            ("plugin.json", include_str!("../plugins/web/plugin.json"), false),
            ("plugin.bin", "#!/bin/sh\nexec '@HOMED@' plugin web\n", true),
        ],
    ),
    (
        "terminal",
        &[
            ("plugin.json", include_str!("../plugins/terminal/plugin.json"), false),
            ("plugin.bin", "#!/bin/sh\nexec '@HOMED@' plugin terminal\n", true),
        ],
    ),
    (
        "onebot",
        &[
            ("plugin.json", include_str!("../plugins/onebot/plugin.json"), false),
            ("plugin.bin", "#!/bin/sh\nexec '@HOMED@' plugin onebot\n", true),
        ],
    ),
    (
        "memo",
        &[
            ("plugin.json", include_str!("../plugins/memo/plugin.json"), false),
            ("plugin.bin", "#!/bin/sh\nexec '@HOMED@' plugin memo\n", true),
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
            let plugins = s.plugins.get()?;
            let deps = crate::cli_socket::CliDeps {
                agent: s.agent.get()?.agent.clone(),
                config: s.config.get()?.clone(),
                registry: s.registry.clone(),
                plugins: plugins.set.clone(),
                started: s.started,
            };
            let path = s.socket_path.clone();
            plugins
                .sup
                .worker("cli", RestartPolicy::Permanent, move || {
                    Ok(crate::cli_socket::CliSocket::new(path.clone(), deps.clone()))
                })
                .await?;
            Ok(())
        })
    }
}

/// Runs the inputs the previous run acknowledged but did not finish, once everything
/// they may need is up (plugins bring tools) and the LLM sources are loaded. Without a
/// source after [`REPLAY_WAIT`] they stay stored for the next start rather than fail.
struct ReplayModule;

/// How long the replay waits for the settings relay to load the LLM sources.
const REPLAY_WAIT: Duration = Duration::from_secs(30);

impl Module<KernelState> for ReplayModule {
    fn name(&self) -> &'static str {
        "replay"
    }
    fn requires(&self) -> &'static [Facility] {
        &[facility::AGENT, facility::LLM, facility::PLUGIN_HOST]
    }
    fn provides(&self) -> &'static [Facility] {
        &[]
    }
    fn init<'a>(&'a self, s: &'a KernelState) -> LocalBoxFuture<'a, Result<(), ModuleError>> {
        Box::pin(async move {
            let event_loop = s.agent.get()?.agent.event_loop.clone();
            let llm = s.llm.get()?.clone();
            actix_rt::spawn(async move {
                use homeagent_actors::llm::provider::GetLlmStatus;
                let deadline = std::time::Instant::now() + REPLAY_WAIT;
                while !llm.send(GetLlmStatus).await.is_ok_and(|st| !st.sources.is_empty()) {
                    if std::time::Instant::now() > deadline {
                        tracing::warn!(
                            "no LLM source after 30 s: inputs the previous run stored (if any) wait for the next start"
                        );
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                match event_loop.send(ReplayInbox).await {
                    Ok(Ok(n)) => tracing::info!(inputs = n, "inbox replayed"),
                    Ok(Err(e)) => tracing::error!("cannot replay the inbox: {e}"),
                    Err(e) => tracing::error!("cannot replay the inbox: {e}"),
                }
            });
            Ok(())
        })
    }
}

/// `kernel/memory`: the memory tiers (context, text log, knowledge, graph), the
/// embedder and the distill heartbeat ([`homeagent_actors::memory::start`]).
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
            let memory = homeagent_actors::memory::start::start(MemoryDeps {
                parent: s.root.get()?,
                tree: s.boot.supervisor,
                data_dir: &s.data_dir,
                blocking: s.blocking.handle(),
                embed_thread: s.embed_thread.handle(),
                stages: s.stages.get()?,
                config: s.config.get()?,
                bus: &s.bus,
            })
            .await?;
            s.memory.provide(memory)?;
            Ok(())
        })
    }
}

/// Which heartbeat a changed setting re-arms (`None` inside: the distill heartbeat;
/// else the maintenance kind) and the period's typed key; `None` when the setting is
/// no heartbeat period.
fn heartbeat_for(changed: &str) -> Option<(Option<Maintenance>, Key<Duration>)> {
    [
        (None, keys::AGENT_DISTILL_INTERVAL),
        (Some(Maintenance::Archive), keys::AGENT_ARCHIVE_INTERVAL),
        (Some(Maintenance::Merge), keys::AGENT_MERGE_INTERVAL),
        (Some(Maintenance::Review), keys::AGENT_REVIEW_INTERVAL),
    ]
    .into_iter()
    .find(|(_, k)| k.is(changed))
}

/// Applies changed heartbeat periods
/// ([`HeartbeatConfig`](homeagent_actors::config::HeartbeatConfig)) to the running
/// heartbeats (they re-arm their timers; the new period also survives their restarts).
/// Listens on the kernel bus for as long as the kernel runs.
fn follow_heartbeat_intervals(
    bus: &EventBus,
    memory: &MemoryHandles,
    maintenance: &[MaintenanceHandle],
    policy: &homeagent_actors::memory::lifecycle::policy::PolicyCell,
) {
    use homeagent_actors::memory::lifecycle::heartbeat::SetInterval;
    let distill = memory.distill.0.clone();
    let policy = policy.clone();
    let maintenance: Vec<_> = maintenance.iter().map(|(k, a, _)| (*k, a.clone())).collect();
    let mut rx = bus.subscribe_settings();
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
            if keys::AGENT_MAINTENANCE_DAILY_TASKS.is(key) {
                if let Some(n) = keys::AGENT_MAINTENANCE_DAILY_TASKS.decode(value) {
                    tracing::info!(tasks = n, "memory upkeep budget changed");
                    policy.lock().set_daily_tasks(n);
                }
                continue;
            }
            let Some((kind, key)) = heartbeat_for(key) else {
                continue;
            };
            let Some(every) = key.decode(value) else {
                continue;
            };
            tracing::info!(key = key.name(), ?every, "heartbeat interval changed");
            match kind {
                None => {
                    let _ = distill.do_send(SetInterval(every));
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
            let (config, memory) = (s.config.get()?, s.memory.get()?);
            let agent = start_agent(s, s.llm.get()?, s.stages.get()?, config, memory).await?;
            // The graph maintenance heartbeats hand their tasks to the event loop.
            let event_loop = agent.event_loop.clone();
            let tasks: TaskSink = Arc::new(move |text| {
                let event_loop = event_loop.clone();
                Box::pin(async move {
                    match event_loop.send(SelfInput(text)).await {
                        Ok(Ok(task)) => Ok(task),
                        Ok(Err(refused)) => Err(refused.into()),
                        Err(unavailable) => Err(unavailable.into()),
                    }
                })
            });
            let (maintenance, maintenance_policy) =
                homeagent_actors::memory::start::start_maintenance(memory, tasks, config).await?;
            follow_heartbeat_intervals(&s.bus, memory, &maintenance, &maintenance_policy);
            s.agent.provide(AgentModuleOutput {
                agent,
                maintenance,
                maintenance_policy,
            })?;
            Ok(())
        })
    }
}

/// Starts `kernel/agent` (scheduler, intake loops, settings relay) on the typed
/// handles of what it needs: the LLM, the stage host, the settings and the memory.
async fn start_agent(
    s: &KernelState,
    llm: &TAddr<LlmActor>,
    stages: &TAddr<StageHost>,
    config: &TAddr<ConfigActor>,
    memory: &MemoryHandles,
) -> Result<AgentHandles, ModuleError> {
    let sup = s
        .root
        .get()?
        .supervisor("agent", RestartPolicy::Permanent, s.boot.supervisor)
        .await?;
    // The current settings from the start (the relay keeps them current).
    let settings = config.send(ReadSettings).await??;
    let persona = Arc::new(homeagent_actors::agent::persona::PersonaFile::new(&s.data_dir));
    let deps = Arc::new(TaskDeps {
        registry: s.registry.clone(),
        bus: s.bus.clone(),
        llm: llm.clone(),
        stages: stages.clone(),
        context: memory.context.clone(),
        documents: memory.documents.clone(),
        textlog: memory.textlog.clone(),
        graph: Some(memory.graph.clone()),
        embedder: Some(memory.embedder.clone()),
        knowledge: Some(memory.knowledge.clone()),
        recall_thread: Some(memory.thread.clone()),
        tool_list: Default::default(),
        recent_tools: Default::default(),
        owner_route: Default::default(),
        channels: Channels::builtin(),
        skills_index: Default::default(),
        settings: parking_lot::RwLock::new(agent_settings(&settings)),
        persona: Some(persona.clone()),
        firewall: s.firewall.clone(),
        media: Some(memory.media.clone()),
        // None: the main agent's tool snapshot stays the registry's own, so the tool
        // list cached by it is reused turn after turn.
        refused_tools: &[],
        // A resident's own tools: the main agent has no parent (a call by name still
        // answers so).
        hidden_tools: homeagent_actors::agent::residents::RESIDENT_ONLY,
        agent: String::new(),
    });
    // `seq_run` is built in (the runner runs its steps; see agent::seq).
    stages
        .send(homeagent_actors::stages::RegisterTool {
            spec: homeagent_actors::agent::seq::spec(),
            handler: homeagent_actors::agent::seq::handler(),
        })
        .await??;
    // `settings_get`/`settings_set`: the owner's model reads and changes knobs, never doors.
    homeagent_actors::agent::settings::register(config.clone(), stages)
        .await
        .map_err(|e| format!("cannot register the settings tools: {e}"))?;
    // `persona_set` writes DATA/personal/personal.md (owner-only, the owner confirms).
    stages
        .send(homeagent_actors::stages::RegisterTool {
            spec: homeagent_actors::agent::persona::spec(),
            handler: homeagent_actors::agent::persona::handler(persona),
        })
        .await??;
    // The default write root (the tools' working directory) exists from the start: a
    // sandbox skips roots that do not.
    let _ = std::fs::create_dir_all(s.data_dir.join(homeagent_actors::firewall::WORKSPACE_DIR));
    s.firewall
        .configure(homeagent_actors::firewall::FirewallConfig::from_settings(&settings));
    s.firewall.audit.open(s.data_dir.join("audit").join("approvals.jsonl"));
    // A budget limit reached is told to the owner on the chat bridge they last wrote from.
    homeagent_actors::agent::notice::forward_notices(&s.bus, deps.channels.clone(), deps.owner_route.clone());
    // Acknowledged asynchronous input is committed here before its 202.
    let inbox_path = s.data_dir.join("inbox.db");
    let inbox = sup
        .worker_on(s.blocking.handle(), "inbox", RestartPolicy::Permanent, move || {
            Ok(InboxActor::new(InboxStore::open(&inbox_path)?))
        })
        .await?;
    // The input channels assigned to residents are routed by the main intake.
    let routes = homeagent_actors::agent::routes::ChannelRoutes::default();
    let profile = Profile::main(inbox, s.firewall.clone(), routes.clone(), deps.channels.clone());
    let loops = homeagent_actors::agent::start::start(&sup, deps.clone(), profile).await?;
    let scheduler = loops.scheduler.clone();
    // `spawn_child` helpers: one subtree each under `kernel/agent/children`.
    let children_sup = sup
        .supervisor("children", RestartPolicy::Permanent, s.boot.supervisor)
        .await?;
    let children = homeagent_actors::agent::children::Children::new(children_sup, deps.clone(), scheduler.clone());
    // Resident sub-agents: one subtree each under `kernel/agent/residents`.
    let residents_sup = sup
        .supervisor("residents", RestartPolicy::Permanent, s.boot.supervisor)
        .await?;
    let residents =
        homeagent_actors::agent::residents::Residents::new(homeagent_actors::agent::residents::ResidentsDeps {
            sup: residents_sup,
            parent: deps.clone(),
            parent_scheduler: scheduler.clone(),
            data_dir: s.data_dir.clone(),
            blocking: s.blocking.handle(),
            config: config.clone(),
            overlays: memory.graph_overlays.clone(),
            routes: routes.clone(),
        });
    // The triage offload watches the main scheduler (spec §6.1; off by default).
    let (c, sc, r) = (config.clone(), scheduler.clone(), residents.clone());
    sup.worker("offload", RestartPolicy::Permanent, move || {
        Ok(homeagent_actors::agent::offload::OffloadActor::new(
            c.clone(),
            sc.clone(),
            r.clone(),
        ))
    })
    .await?;
    let mut agent_tools = children.tools();
    agent_tools.extend(residents.tools());
    for (spec, handler) in agent_tools {
        stages
            .send(homeagent_actors::stages::RegisterTool { spec, handler })
            .await??;
    }
    let (c, d) = (config.clone(), deps.clone());
    sup.worker("settings-relay", RestartPolicy::Permanent, move || {
        Ok(SettingsRelay::new(c.clone(), d.clone()))
    })
    .await?;
    Ok(AgentHandles {
        scheduler,
        event_loop: loops.event_loop,
        intercept_loop: loops.intercept_loop.expect("the main profile takes interrupts"),
        deps,
        children,
        residents,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use homeagent_actors::config::HeartbeatConfig;

    #[test]
    fn the_real_boot_graph_resolves() {
        let g = graph().expect("the kernel's own modules must form a valid graph");
        assert_eq!(
            g.layers(),
            vec![
                vec!["supervision"],
                vec!["config", "heartbeat", "llm", "stage-host"],
                vec!["backups", "memory"],
                vec!["agent"],
                vec!["plugin-host"],
                vec!["cli", "replay"]
            ]
        );
    }

    #[test]
    fn boot_settings_come_from_the_typed_groups_and_a_wrong_type_refuses_the_boot() {
        let b = BootSettings::read(&Settings::default()).unwrap();
        assert_eq!(b.supervisor.intensity.max_restarts, 5);
        assert_eq!(b.supervisor.backoff.initial, Duration::from_millis(100));
        assert_eq!(
            (b.shutdown_timeout, b.stuck_after),
            (Duration::from_secs(10), Duration::from_secs(5))
        );
        let s = Settings::default().with(keys::SUPERVISOR_BACKOFF_MAX, serde_json::json!(30));
        let err = BootSettings::read(&s).unwrap_err().to_string();
        assert!(
            err.contains("core.supervisor.backoff_max") && err.contains("null"),
            "{err}"
        );
    }

    #[test]
    fn each_heartbeat_period_setting_re_arms_its_own_heartbeat() {
        assert_eq!(
            heartbeat_for(keys::AGENT_DISTILL_INTERVAL.name()).map(|(k, _)| k),
            Some(None)
        );
        for kind in [Maintenance::Archive, Maintenance::Merge, Maintenance::Review] {
            let (_, name) = homeagent_actors::memory::start::maintenance_period(kind, &HeartbeatConfig::defaults());
            let (k, key) = HeartbeatConfig::KEYS
                .iter()
                .find_map(|k| heartbeat_for(k).filter(|(m, _)| *m == Some(kind)))
                .unwrap_or_else(|| panic!("{name}: no setting re-arms it"));
            assert_eq!(k, Some(kind));
            assert!(HeartbeatConfig::concerns(key.name()));
        }
        assert!(heartbeat_for(keys::AGENT_MAX_TOOL_TURNS.name()).is_none());
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
