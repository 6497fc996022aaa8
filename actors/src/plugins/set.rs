//! Plugin discovery and the per-plugin supervisors.
//!
//! Every directory of `DATA/plugins` with a `plugin.json` is a plugin. A subprocess
//! plugin runs as `kernel/plugins/<name>/process` under its own supervisor
//! `kernel/plugins/<name>` (restart intensity 3 in 5 min by default). Past the
//! intensity that supervisor gives up: the plugin is *quarantined* (its supervisor is
//! `failed`) until an operator restarts it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use homeagent_plugin_protocol::{EntryKind, Manifest};
use serde::Serialize;

use super::process::{PluginDeps, PluginInfo, PluginProcess};
use crate::registry::{ActorState, Registry};
use crate::stages::tools::owners;
use crate::stages::{RegisterTool, UnregisterPlugin};
use crate::supervisor::{RestartPolicy, StartError, SupervisorConfig, SupervisorRef};

type Factory = Arc<dyn Fn() -> Result<PluginProcess, StartError> + Send + Sync>;
type LuaFactory = Arc<dyn Fn() -> Result<super::lua::LuaPlugin, StartError> + Send + Sync>;

/// What a plugin's supervisor runs.
enum LaunchKind {
    Process(Factory),
    Lua(LuaFactory),
}

/// How to (re)start a plugin's process under its own supervisor.
struct Launch {
    sup: SupervisorRef,
    factory: LaunchKind,
}

/// One known plugin.
pub struct PluginEntry {
    pub name: String,
    pub dir: PathBuf,
    pub kind: Option<EntryKind>,
    /// Why it cannot run at all (bad manifest, kind not supported yet).
    pub problem: Option<String>,
    pub info: Arc<PluginInfo>,
    /// `kernel/plugins/<name>`: restarting it restarts (and un-quarantines) the plugin.
    pub supervisor_id: String,
    pub process_id: String,
    /// The file whose content change triggers a hot reload.
    pub entry_path: Option<PathBuf>,
    /// SHA-256 of the entry file when the plugin was last (re)started.
    pub entry_hash: parking_lot::Mutex<Option<[u8; 32]>>,
    /// Disabled by an operator (persisted in the settings database).
    pub disabled: AtomicBool,
    /// Whether its process actor was ever added to its supervisor.
    started: AtomicBool,
    /// For SKILL.md plugins: the parsed skill (no process).
    pub skill: Option<Arc<super::skill::Skill>>,
    /// For a process or Lua plugin: the `SKILL.md` its package ships beside the entry,
    /// in the skill index like a skill plugin's (how the model learns of a plugin that
    /// is not started until asked).
    pub guide: Option<Arc<super::skill::Skill>>,
    /// The manifest's `auto_start`: `false` keeps it stopped at boot and install until
    /// it is enabled or reloaded.
    pub auto_start: bool,
    launch: Option<Launch>,
}

/// SHA-256 of a file (following links), `None` when unreadable.
pub fn file_hash(path: &Path) -> Option<[u8; 32]> {
    use sha2::Digest;
    std::fs::read(path).ok().map(|b| sha2::Sha256::digest(&b).into())
}

impl PluginEntry {
    fn new(name: &str, dir: &Path, parent: &str) -> Self {
        let supervisor_id = format!("{parent}/{name}");
        let info = PluginInfo {
            supervisor_id: supervisor_id.clone(),
            ..PluginInfo::default()
        };
        Self {
            name: name.to_owned(),
            dir: dir.to_owned(),
            kind: None,
            problem: None,
            info: Arc::new(info),
            process_id: format!("{supervisor_id}/process"),
            supervisor_id,
            entry_path: None,
            entry_hash: parking_lot::Mutex::new(None),
            disabled: AtomicBool::new(false),
            started: AtomicBool::new(false),
            skill: None,
            guide: None,
            auto_start: true,
            launch: None,
        }
    }

    /// Whether its process (or Lua state) was ever started in this run.
    pub fn is_started(&self) -> bool {
        self.started.load(Ordering::SeqCst)
    }

    /// An `auto_start: false` plugin, enabled, that nothing has started yet.
    pub fn is_idle(&self) -> bool {
        self.launch.is_some()
            && !self.auto_start
            && !self.started.load(Ordering::SeqCst)
            && !self.disabled.load(Ordering::SeqCst)
    }

    /// Its skill for the index: a skill plugin's own, or the guide a plugin ships.
    pub fn skill_doc(&self) -> Option<&Arc<super::skill::Skill>> {
        self.skill.as_ref().or(self.guide.as_ref())
    }

    /// Adds the process actor (first start); later starts go through the supervisor.
    async fn start(&self) -> Result<(), PluginOpError> {
        let launch = self.launch.as_ref().ok_or_else(|| PluginOpError::CannotRun {
            name: self.name.clone(),
            problem: self.problem.clone().unwrap_or_default(),
        })?;
        if self.started.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        *self.entry_hash.lock() = self.entry_path.as_deref().and_then(file_hash);
        let child = self.process_id.rsplit('/').next().unwrap_or("process").to_owned();
        let started = match &launch.factory {
            LaunchKind::Process(f) => start_child(&launch.sup, &child, f.clone()).await,
            // Each Lua instance on a thread of its own: a call stuck in C code stalls
            // only that plugin, and its restart does not wait behind it.
            LaunchKind::Lua(f) => {
                let f = f.clone();
                launch
                    .sup
                    .worker_on_own_thread(&child, RestartPolicy::Permanent, move || f())
                    .await
                    .map(|_| ())
            }
        };
        Ok(started?)
    }

    /// Restarts the plugin (re-reading its entry file); also ends a quarantine.
    pub async fn restart(&self, registry: &Registry) -> Result<u64, PluginOpError> {
        if self.disabled.load(Ordering::SeqCst) {
            return Err(PluginOpError::Disabled {
                name: self.name.clone(),
            });
        }
        if !self.started.load(Ordering::SeqCst) {
            self.start().await?;
            return Ok(0);
        }
        *self.entry_hash.lock() = self.entry_path.as_deref().and_then(file_hash);
        let before = self.info.instances.newest();
        self.info.instances.replacing(true);
        let restarts = match crate::supervisor::restart_actor(registry, &self.supervisor_id).await {
            Ok(n) => n,
            Err(e) => {
                self.info.instances.replacing(false);
                return Err(e.into());
            }
        };
        // What the caller reports next (the API's state, the manager's tool list) is the
        // new instance's: wait, bounded, until it finished starting.
        if !self
            .info
            .instances
            .ready_after(before, super::process::HANDSHAKE_TIMEOUT)
            .await
        {
            tracing::warn!(plugin = %self.name, "restarted, but not ready within {:?}; see its status", super::process::HANDSHAKE_TIMEOUT);
        }
        Ok(restarts)
    }

    /// Stops the plugin and keeps it stopped (the caller persists the flag).
    pub async fn disable(&self, registry: &Registry) -> Result<(), PluginOpError> {
        self.disabled.store(true, Ordering::SeqCst);
        if self.started.load(Ordering::SeqCst) {
            crate::supervisor::stop_actor(registry, &self.process_id).await?;
        }
        Ok(())
    }

    /// Starts a disabled plugin again.
    pub async fn enable(&self, registry: &Registry) -> Result<(), PluginOpError> {
        self.disabled.store(false, Ordering::SeqCst);
        if self.launch.is_none() && self.problem.is_none() {
            return Ok(()); // a skill: nothing runs, the flag was all there was
        }
        if !self.started.load(Ordering::SeqCst) {
            return self.start().await;
        }
        *self.entry_hash.lock() = self.entry_path.as_deref().and_then(file_hash);
        crate::supervisor::restart_actor(registry, &self.process_id).await?;
        Ok(())
    }
}

/// What `GET /api/v1/plugins` shows of a plugin.
#[derive(Debug, Clone, Serialize)]
pub struct PluginStatus {
    pub name: String,
    pub kind: Option<EntryKind>,
    /// `starting|running|backoff|quarantined|disabled|stopped|idle` (`idle`: an
    /// `auto_start: false` plugin not started yet).
    pub state: &'static str,
    pub pid: Option<u32>,
    pub restarts: u64,
    pub last_exit: Option<String>,
    pub stderr_tail: Vec<String>,
    pub tools: Vec<String>,
    /// Named APIs (`POST /api/v1/plugins/{name}/api/{api}`).
    pub apis: Vec<String>,
    /// The actor to restart (`POST /api/v1/actors/{id}/restart`).
    pub actor: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl PluginEntry {
    /// Its status, read from the registry's counters and the plugin's live info.
    pub fn status(&self, registry: &Registry) -> PluginStatus {
        let sup = registry.get(&self.supervisor_id);
        let proc_ = registry.get(&self.process_id);
        let state = if self.problem.is_some() || self.disabled.load(Ordering::SeqCst) {
            "disabled"
        } else if self.skill.is_some() {
            "running" // a skill is available as soon as it parsed
        } else if self.is_idle() {
            "idle"
        } else {
            match (sup.as_ref().map(|s| s.state()), proc_.as_ref().map(|p| p.state())) {
                (Some(ActorState::Failed), _) => "quarantined",
                // Until its registrations are in, a plugin is still starting.
                (_, Some(ActorState::Running | ActorState::Busy)) if self.info.instances.is_ready() => "running",
                (_, Some(ActorState::Running | ActorState::Busy)) => "starting",
                (_, Some(ActorState::Backoff | ActorState::Failed)) => "backoff",
                (_, Some(ActorState::Starting)) | (_, None) => "starting",
                (_, Some(ActorState::Stopped)) => "stopped",
            }
        };
        PluginStatus {
            name: self.name.clone(),
            kind: self.kind,
            state,
            pid: *self.info.pid.lock(),
            // Crash restarts of the process plus operator restarts and hot reloads (which
            // restart its supervisor, hence a fresh process actor).
            restarts: proc_.as_ref().map_or(0, |p| p.restarts()) + sup.as_ref().map_or(0, |s| s.restarts()),
            last_exit: proc_.as_ref().and_then(|p| p.last_exit()),
            stderr_tail: self.info.stderr.lock().iter().cloned().collect(),
            tools: self.info.tools.lock().clone(),
            apis: self.info.apis.lock().names.clone(),
            actor: self.supervisor_id.clone(),
            problem: self.problem.clone(),
        }
    }
}

/// Starts a plugin's child actor (process or Lua state) under its supervisor.
async fn start_child<A: crate::host::KernelActor>(
    sup: &SupervisorRef,
    name: &str,
    factory: Arc<dyn Fn() -> Result<A, StartError> + Send + Sync>,
) -> Result<(), crate::supervisor::SpawnError> {
    sup.worker(name, RestartPolicy::Permanent, move || factory())
        .await
        .map(|_| ())
}

/// Default supervision of one plugin: 3 restarts in 5 minutes, backoff 1 s, 2 s, 3 s
/// (no jitter: one plugin has no siblings to desynchronise from, and operators expect
/// a crashed plugin back within about a second).
pub fn plugin_supervision() -> SupervisorConfig {
    let mut c = SupervisorConfig::default();
    c.backoff.jitter = false;
    c.intensity.max_restarts = 3;
    c.intensity.window = std::time::Duration::from_secs(300);
    c.backoff.initial = std::time::Duration::from_secs(1);
    c.backoff.growth = crate::supervisor::Growth::Linear;
    c.backoff.max = std::time::Duration::from_secs(30);
    c
}

/// Every plugin directory under `plugins_dir`, sorted by name. Hidden directories
/// (`.install-*` staging areas of a package install) are skipped.
fn discover(plugins_dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(plugins_dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .map(|e| e.path())
                .filter(|p| p.join("plugin.json").is_file())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

pub use super::package::plugin_data_dir;

/// A plugin named after a kernel tool group ([`owners::RESERVED`]): it gets no entry at
/// all, since an entry's stop, disable or uninstall withdraws the tools of its name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "plugin name `{name}` (in {dir}) is reserved for the kernel's own tools; rename the plugin (its manifest's `name` and its directory)"
)]
pub struct ReservedName {
    pub name: String,
    pub dir: String,
}

/// Reads one plugin directory and prepares its supervisor (does not start it). A plugin
/// whose name (or, when its manifest does not read, whose directory's name) is a kernel
/// tool group's is refused whole.
async fn load_one(
    sup: &SupervisorRef,
    dir: PathBuf,
    data_dir: &Path,
    deps: &PluginDeps,
    config: SupervisorConfig,
) -> Result<PluginEntry, ReservedName> {
    let fallback = dir.file_name().and_then(|n| n.to_str()).unwrap_or("plugin").to_owned();
    let reserved = |name: &str| {
        owners::RESERVED.contains(&name).then(|| ReservedName {
            name: name.to_owned(),
            dir: dir.display().to_string(),
        })
    };
    let manifest = match Manifest::load(&dir) {
        Ok(m) => m,
        Err(e) => {
            if let Some(r) = reserved(&fallback) {
                return Err(r);
            }
            tracing::error!("plugin in {} not loaded: {e}", dir.display());
            let mut entry = PluginEntry::new(&fallback, &dir, sup.id());
            entry.problem = Some(e.to_string());
            return Ok(entry);
        }
    };
    if let Some(r) = reserved(&manifest.name) {
        return Err(r);
    }
    let mut entry = PluginEntry::new(&manifest.name, &dir, sup.id());
    entry.auto_start = manifest.auto_start;
    let (path, kind) = match manifest.entry(&dir) {
        Ok(x) => x,
        Err(e) => {
            entry.problem = Some(e.to_string());
            return Ok(entry);
        }
    };
    entry.kind = Some(kind);
    // A plugin on disk that wants a newer daemon or another platform is not started;
    // the list shows why (install refuses such a package before it gets here).
    if let Err(e) = manifest.check_host(super::CORE_VERSION, std::env::consts::OS) {
        tracing::error!(plugin = %manifest.name, "plugin not started: {e}");
        entry.problem = Some(e.to_string());
        return Ok(entry);
    }
    if kind == EntryKind::Skill {
        match super::skill::Skill::load(&dir) {
            Ok(skill) => {
                tracing::info!(skill = %skill.name, "skill loaded");
                entry.skill = Some(Arc::new(skill));
            }
            Err(e) => entry.problem = Some(e.to_string()),
        }
        return Ok(entry);
    }
    let plugin_sup = match sup.supervisor(&manifest.name, RestartPolicy::Temporary, config).await {
        Ok(s) => s,
        Err(e) => {
            entry.problem = Some(e.to_string());
            return Ok(entry);
        }
    };
    if dir.join("SKILL.md").is_file() {
        match super::skill::Skill::load(&dir) {
            Ok(guide) => entry.guide = Some(Arc::new(guide)),
            Err(e) => tracing::warn!(plugin = %manifest.name, "the plugin's SKILL.md is not in the skill index: {e}"),
        }
    }
    entry.entry_path = Some(path.clone());
    let (info, deps, data) = (
        entry.info.clone(),
        deps.clone(),
        plugin_data_dir(data_dir, &manifest.name),
    );
    let factory = if kind == EntryKind::Lua {
        entry.process_id = format!("{}/script", entry.supervisor_id);
        let manifest = manifest.clone();
        LaunchKind::Lua(Arc::new(move || {
            let loaded = std::fs::read_to_string(&path)
                .map_err(|e| StartError::from(format!("cannot read {}: {e}", path.display())))
                .and_then(|source| {
                    Ok(super::lua::LuaPlugin::load(
                        &manifest,
                        &source,
                        deps.clone(),
                        info.clone(),
                    )?)
                });
            if loaded.is_err() {
                // An instance that failed before its actor ran: a restart waiting for
                // the new instance stops waiting (`Instances::ready_after`).
                info.instances.ended(info.instances.begin());
            }
            loaded
        }))
    } else {
        LaunchKind::Process(Arc::new(move || {
            Ok(PluginProcess::new(
                manifest.clone(),
                dir.clone(),
                path.clone(),
                data.clone(),
                deps.clone(),
                info.clone(),
            ))
        }))
    };
    entry.launch = Some(Launch {
        sup: plugin_sup,
        factory,
    });
    Ok(entry)
}

/// Called with the new skill index whenever the set of skills changes.
pub type SkillsSink = Arc<dyn Fn(String) + Send + Sync>;

/// What a [`PluginSet`] needs besides its supervisor.
pub struct PluginSetup {
    /// `DATA/plugins`.
    pub plugins_dir: PathBuf,
    /// `DATA` (plugin data goes to `DATA/plugin_data/<name>`).
    pub data_dir: PathBuf,
    pub deps: PluginDeps,
    /// Supervision of each plugin ([`plugin_supervision`]).
    pub config: SupervisorConfig,
    pub registry: Arc<Registry>,
    /// Receives the skill index for the system prompt.
    pub on_skills: SkillsSink,
}

/// The live set of plugins: loaded at boot, grown at run time by package installs.
pub struct PluginSet {
    entries: parking_lot::RwLock<Vec<Arc<PluginEntry>>>,
    sup: SupervisorRef,
    plugins_dir: PathBuf,
    data_dir: PathBuf,
    deps: PluginDeps,
    config: SupervisorConfig,
    /// One install at a time (name checks and the rename must not interleave).
    installing: tokio::sync::Mutex<()>,
    on_skills: SkillsSink,
    registry: Arc<Registry>,
}

impl PluginSet {
    /// Finds every plugin under `plugins_dir` (sorted by directory name), gives each
    /// subprocess or Lua plugin its supervisor, starts those not in `disabled`, and
    /// publishes the skill index (`on_skills`) and the `skill_info` tool.
    pub async fn start(sup: SupervisorRef, setup: PluginSetup, disabled: &[String]) -> Arc<Self> {
        let PluginSetup {
            plugins_dir,
            data_dir,
            deps,
            config,
            registry,
            on_skills,
        } = setup;
        let (plugins_dir, data_dir) = (plugins_dir.as_path(), data_dir.as_path());
        let mut out = Vec::new();
        for dir in discover(plugins_dir) {
            let entry = match load_one(&sup, dir, data_dir, &deps, config).await {
                Ok(entry) => entry,
                Err(refused) => {
                    tracing::error!("plugin not loaded: {refused}");
                    continue;
                }
            };
            if disabled.contains(&entry.name) {
                entry.disabled.store(true, Ordering::SeqCst);
                tracing::info!(plugin = %entry.name, "plugin disabled by an operator; not started");
            } else if entry.launch.is_some() && !entry.auto_start {
                tracing::info!(plugin = %entry.name, "plugin has auto_start: false; not started until enabled or reloaded");
            } else if entry.launch.is_some()
                && let Err(e) = entry.start().await
            {
                tracing::warn!(plugin = %entry.name, "plugin did not start: {e}");
            }
            out.push(Arc::new(entry));
        }
        let set = Arc::new(Self {
            entries: parking_lot::RwLock::new(out),
            sup,
            plugins_dir: plugins_dir.to_owned(),
            data_dir: data_dir.to_owned(),
            deps,
            config,
            installing: tokio::sync::Mutex::new(()),
            on_skills,
            registry,
        });
        set.refresh_skills().await;
        set
    }

    /// The plugins, in load order.
    pub fn list(&self) -> Vec<Arc<PluginEntry>> {
        self.entries.read().clone()
    }

    /// The running plugins that follow the kernel's clock, by name (what
    /// `clock::follower` tells the time at each moment of an advance).
    pub fn clock_followers(&self) -> Vec<(String, super::clock::Follower)> {
        self.entries
            .read()
            .iter()
            .filter_map(|e| e.info.clock.lock().clone().map(|f| (e.name.clone(), f)))
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<Arc<PluginEntry>> {
        self.entries.read().iter().find(|e| e.name == name).cloned()
    }

    pub fn names(&self) -> Vec<String> {
        self.entries.read().iter().map(|e| e.name.clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.entries.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.read().is_empty()
    }

    /// Installs an `.hmap` package into `DATA/plugins` and starts the plugin at once
    /// (no daemon restart). Refusals leave `DATA/plugins` untouched.
    pub async fn install(&self, bytes: Vec<u8>) -> Result<(super::package::Installed, PluginStatus), InstallError> {
        let _one = self.installing.lock().await;
        let dir = self.plugins_dir.clone();
        let installed = tokio::task::spawn_blocking(move || super::package::install(&bytes, &dir))
            .await
            .map_err(|e| InstallError::Package(super::package::PackageError::Io(std::io::Error::other(e))))??;
        if self.get(&installed.name).is_some() {
            // A plugin of that name is loaded although its directory was gone.
            let _ = std::fs::remove_dir_all(&installed.dir);
            return Err(InstallError::Package(super::package::PackageError::Exists(
                installed.name,
            )));
        }
        let loaded = load_one(
            &self.sup,
            installed.dir.clone(),
            &self.data_dir,
            &self.deps,
            self.config,
        )
        .await;
        let entry = match loaded {
            Ok(entry) => Arc::new(entry),
            Err(refused) => {
                let _ = std::fs::remove_dir_all(&installed.dir);
                return Err(InstallError::Reserved(refused));
            }
        };
        if let Some(problem) = &entry.problem {
            // Valid as a package but not loadable here: keep nothing half-installed.
            let _ = std::fs::remove_dir_all(&installed.dir);
            return Err(InstallError::Load(problem.clone()));
        }
        self.entries.write().push(entry.clone());
        // An `auto_start: false` plugin waits, as at boot, for an enable or a reload.
        if entry.launch.is_some() && entry.auto_start {
            // Installed means running: wait for the first start's outcome (handshake or
            // Lua `start()`), and take everything back out when it failed.
            let started = match entry.start().await {
                Err(e) => Err(e.to_string()),
                Ok(()) => entry
                    .info
                    .readiness
                    .wait(super::process::HANDSHAKE_TIMEOUT + std::time::Duration::from_secs(2))
                    .await
                    .unwrap_or_else(|| Err(format!("no handshake within {:?}", super::process::HANDSHAKE_TIMEOUT))),
            };
            if let Err(e) = started {
                self.roll_back(&entry, &installed.dir).await;
                return Err(InstallError::Start(e));
            }
        }
        if entry.skill_doc().is_some() {
            self.refresh_skills().await;
        }
        tracing::info!(plugin = %entry.name, started = entry.is_started(), "plugin installed");
        let status = entry.status(&self.registry);
        Ok((installed, status))
    }

    /// Disables `entry` (the caller persisted the flag): the plugin stops, and its tools,
    /// output channels and skill leave the very next prompt. A process withdraws its own
    /// only once its exit is seen, after the stop has answered; withdrawing twice is
    /// harmless. The HTTP route and the `plugin_disable` tool both come here.
    pub async fn disable(&self, entry: &Arc<PluginEntry>) -> Result<(), PluginOpError> {
        entry.disable(&self.registry).await?;
        self.deps.services.channels.unregister_plugin(&entry.name);
        if let Err(e) = self.deps.stages.send(UnregisterPlugin(entry.name.clone())).await {
            tracing::warn!(plugin = %entry.name, "withdrawing the disabled plugin's tools: {e}");
        }
        if entry.skill_doc().is_some() {
            self.refresh_skills().await;
        }
        Ok(())
    }

    /// Enables `entry` again (the caller persisted the flag): a plugin starts, a skill
    /// comes back into the prompt's skill index.
    pub async fn enable(&self, entry: &Arc<PluginEntry>) -> Result<(), PluginOpError> {
        entry.enable(&self.registry).await?;
        if entry.skill_doc().is_some() {
            self.refresh_skills().await;
        }
        Ok(())
    }

    /// Undoes an install whose plugin did not start: its subtree leaves the supervision
    /// tree (and the dashboard), its tools the registry, its directory the disk.
    async fn roll_back(&self, entry: &Arc<PluginEntry>, dir: &Path) {
        if let Err(e) = self.withdraw(entry, dir).await {
            tracing::warn!(plugin = %entry.name, "rolling back: {e}");
        }
        tracing::warn!(plugin = %entry.name, "install rolled back: the plugin did not start");
    }

    /// Uninstalls a plugin: it stops, its supervisor leaves the tree, its tools, output
    /// channels and skill leave the next prompt, and its directory is deleted (its data
    /// in `DATA/plugin_data/<name>` is kept, as after a removal by hand). Only a
    /// directory inside `DATA/plugins` is ever deleted.
    pub async fn uninstall(&self, entry: &Arc<PluginEntry>) -> Result<(), PluginOpError> {
        let inside = entry.dir.parent().is_some_and(|p| p == self.plugins_dir)
            && entry.dir.file_name().is_some_and(|n| n != "." && n != "..");
        if !inside {
            return Err(PluginOpError::Outside {
                name: entry.name.clone(),
                plugins_dir: self.plugins_dir.clone(),
                dir: entry.dir.clone(),
            });
        }
        // Stop first, so the process exits before its files go.
        if entry.started.load(Ordering::SeqCst) && !entry.disabled.load(Ordering::SeqCst) {
            entry.disable(&self.registry).await?;
        }
        self.deps.services.channels.unregister_plugin(&entry.name);
        self.withdraw(entry, &entry.dir).await?;
        if entry.skill_doc().is_some() {
            self.refresh_skills().await;
        }
        tracing::info!(plugin = %entry.name, "plugin uninstalled");
        Ok(())
    }

    /// Takes a plugin out: its subtree leaves the supervision tree, the entry the set,
    /// its tools the registry, and `dir` the disk.
    async fn withdraw(&self, entry: &Arc<PluginEntry>, dir: &Path) -> Result<(), PluginOpError> {
        if self.registry.get(&entry.supervisor_id).is_some()
            && let Err(e) = self.sup.remove_child(&entry.supervisor_id).await
        {
            tracing::warn!(plugin = %entry.name, "cannot remove the plugin's actors: {e}");
        }
        self.entries.write().retain(|e| !Arc::ptr_eq(e, entry));
        let _ = self.deps.stages.send(UnregisterPlugin(entry.name.clone())).await;
        std::fs::remove_dir_all(dir).map_err(|source| PluginOpError::NotDeleted {
            name: entry.name.clone(),
            dir: dir.to_owned(),
            source,
        })
    }

    /// Publishes the skill index and (re)registers `skill_info` over the current skills.
    async fn refresh_skills(&self) {
        let list = self.list();
        let _ = self.deps.stages.send(UnregisterPlugin(owners::SKILLS.into())).await;
        match skills_tool(&list) {
            Some((index, spec, handler)) => {
                (self.on_skills)(index);
                match self.deps.stages.send(RegisterTool { spec, handler }).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::warn!("cannot register skill_info: {e}"),
                    Err(e) => tracing::warn!("cannot register skill_info: {e}"),
                }
            }
            None => (self.on_skills)(String::new()),
        }
    }
}

/// Why an operation on an installed plugin (start, restart, enable, disable,
/// uninstall) failed; each says what to do next. The HTTP routes answer it as 409, the
/// plugin manager's tools as their error.
#[derive(Debug, thiserror::Error)]
pub enum PluginOpError {
    /// It has nothing to run: its manifest or entry file did not load.
    #[error("plugin `{name}` cannot run: {problem}. Fix its directory (or reinstall it) first")]
    CannotRun { name: String, problem: String },
    #[error("plugin `{name}` is disabled; enable it first")]
    Disabled { name: String },
    /// Its actor could not be added to the supervision tree.
    #[error(transparent)]
    Spawn(#[from] crate::supervisor::SpawnError),
    /// Its supervisor refused or missed the restart or stop.
    #[error(transparent)]
    Control(#[from] crate::supervisor::RestartError),
    #[error("plugin `{name}` lives outside {} ({}); remove it by hand", plugins_dir.display(), dir.display())]
    Outside {
        name: String,
        plugins_dir: PathBuf,
        dir: PathBuf,
    },
    #[error(
        "plugin `{name}` stopped and unregistered, but its directory {} could not be deleted: {source}; delete it by hand",
        dir.display()
    )]
    NotDeleted {
        name: String,
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// Why `POST /api/v1/plugins/install` failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(transparent)]
    Package(#[from] super::package::PackageError),
    #[error("the package installed but the plugin cannot load: {0}")]
    Load(String),
    #[error(transparent)]
    Reserved(#[from] ReservedName),
    #[error(
        "the plugin did not start, so the install was rolled back (nothing was kept); fix the package and install it again: {0}"
    )]
    Start(String),
}

/// `skill_info`'s arguments.
#[derive(serde::Deserialize)]
struct SkillInfo {
    name: String,
}

/// Why `skill_info` answered nothing.
#[derive(Debug, thiserror::Error)]
enum SkillError {
    #[error("no skill `{name}`; skills: {}", known.join(", "))]
    Unknown { name: String, known: Vec<String> },
}

/// The `skill_info` tool over the loaded skills, and the index for the system prompt.
pub fn skills_tool(
    entries: &[Arc<PluginEntry>],
) -> Option<(String, crate::stages::ToolSpec, Arc<dyn crate::stages::ToolHandler>)> {
    let skills: Vec<Arc<super::skill::Skill>> = entries
        .iter()
        .filter(|e| !e.disabled.load(Ordering::SeqCst))
        .filter_map(|e| e.skill_doc().cloned())
        .collect();
    if skills.is_empty() {
        return None;
    }
    let index = super::skill::index(&skills.iter().map(|s| (**s).clone()).collect::<Vec<_>>());
    let names: Vec<String> = skills.iter().map(|s| s.name.clone()).collect();
    let mut spec = crate::stages::ToolSpec::new(
        "skill_info",
        "Read the full instructions of a skill listed under # Skills in the system prompt.",
        serde_json::json!({"type": "object", "properties": {"name": {"type": "string", "enum": names}}, "required": ["name"]}),
    );
    spec.plugin = owners::SKILLS.into();
    spec.parallel_safe = true;
    spec.no_memory = true;
    // The schema stays written out: its `enum` is the skills installed now.
    let handler = crate::stages::typed(move |SkillInfo { name }: SkillInfo| {
        let found = skills.iter().find(|s| s.name == name).cloned();
        let known: Vec<String> = skills.iter().map(|s| s.name.clone()).collect();
        std::future::ready(match found {
            Some(s) => Ok(format!("# Skill: {}\n{}\n\n{}", s.name, s.description, s.body)),
            None => Err(SkillError::Unknown { name, known }),
        })
    });
    Some((index, spec, handler))
}
