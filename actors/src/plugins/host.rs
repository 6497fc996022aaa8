//! Plugin discovery and the per-plugin supervisors.
//!
//! Every directory of `DATA/plugins` with a `plugin.json` is a plugin. A subprocess
//! plugin runs as `kernel/plugins/<name>/process` under its own supervisor
//! `kernel/plugins/<name>` (restart intensity 3 in 5 min by default). Past the
//! intensity that supervisor gives up: the plugin is *quarantined* (its supervisor is
//! `failed`) until an operator restarts it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use homeagent_plugin_protocol::{EntryKind, Manifest};
use serde::Serialize;

use super::process::{PluginDeps, PluginInfo, PluginProcess};
use crate::registry::{ActorState, Registry};
use crate::supervisor::{RestartPolicy, SupervisorConfig, SupervisorRef};

/// One known plugin.
pub struct PluginEntry {
    pub name: String,
    pub dir: PathBuf,
    pub kind: Option<EntryKind>,
    /// Why it is not running at all (bad manifest, kind not supported yet, disabled).
    pub problem: Option<String>,
    pub info: Arc<PluginInfo>,
    /// `kernel/plugins/<name>`: restarting it restarts (and un-quarantines) the plugin.
    pub supervisor_id: String,
    pub process_id: String,
}

/// What `GET /api/v1/plugins` shows of a plugin.
#[derive(Debug, Clone, Serialize)]
pub struct PluginStatus {
    pub name: String,
    pub kind: Option<EntryKind>,
    /// `starting|running|backoff|quarantined|disabled|stopped`.
    pub state: &'static str,
    pub pid: Option<u32>,
    pub restarts: u64,
    pub last_exit: Option<String>,
    pub stderr_tail: Vec<String>,
    pub tools: Vec<String>,
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
        let state = if self.problem.is_some() {
            "disabled"
        } else {
            match (sup.as_ref().map(|s| s.state()), proc_.as_ref().map(|p| p.state())) {
                (Some(ActorState::Failed), _) => "quarantined",
                (_, Some(ActorState::Running | ActorState::Busy)) => "running",
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
            restarts: proc_.as_ref().map_or(0, |p| p.restarts()),
            last_exit: proc_.as_ref().and_then(|p| p.last_exit()),
            stderr_tail: self.info.stderr.lock().iter().cloned().collect(),
            tools: self.info.tools.lock().clone(),
            actor: self.supervisor_id.clone(),
            problem: self.problem.clone(),
        }
    }
}

/// Default supervision of one plugin: 3 restarts in 5 minutes, backoff 1 s, 2 s, 4 s
/// (no jitter: one plugin has no siblings to desynchronise from, and operators expect
/// a crashed plugin back within about a second).
pub fn plugin_supervision() -> SupervisorConfig {
    let mut c = SupervisorConfig::default();
    c.backoff.jitter = false;
    c.intensity.max_restarts = 3;
    c.intensity.window = std::time::Duration::from_secs(300);
    c.backoff.initial = std::time::Duration::from_secs(1);
    c.backoff.max = std::time::Duration::from_secs(30);
    c
}

/// Finds and starts every plugin under `plugins_dir` (sorted by directory name).
pub async fn start_all(
    sup: &SupervisorRef,
    plugins_dir: &Path,
    data_dir: &Path,
    deps: PluginDeps,
    config: SupervisorConfig,
    disabled: &[String],
) -> Vec<PluginEntry> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(plugins_dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join("plugin.json").is_file())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    let mut out = Vec::new();
    for dir in dirs {
        let fallback = dir.file_name().and_then(|n| n.to_str()).unwrap_or("plugin").to_owned();
        let supervisor_id = |n: &str| format!("{}/{n}", sup.id());
        let mut entry = PluginEntry {
            name: fallback.clone(),
            dir: dir.clone(),
            kind: None,
            problem: None,
            info: Arc::default(),
            supervisor_id: supervisor_id(&fallback),
            process_id: format!("{}/process", supervisor_id(&fallback)),
        };
        let manifest = match Manifest::load(&dir) {
            Ok(m) => m,
            Err(e) => {
                tracing::error!("plugin in {} not loaded: {e}", dir.display());
                entry.problem = Some(e.to_string());
                out.push(entry);
                continue;
            }
        };
        entry.name = manifest.name.clone();
        entry.supervisor_id = supervisor_id(&manifest.name);
        entry.process_id = format!("{}/process", entry.supervisor_id);
        if disabled.contains(&manifest.name) {
            entry.problem = Some("disabled by an operator".into());
            out.push(entry);
            continue;
        }
        let (path, kind) = match manifest.entry(&dir) {
            Ok(x) => x,
            Err(e) => {
                entry.problem = Some(e.to_string());
                out.push(entry);
                continue;
            }
        };
        entry.kind = Some(kind);
        if kind != EntryKind::Subprocess {
            entry.problem = Some(format!(
                "{kind:?} plugins are not supported yet; only plugin.bin subprocess plugins run"
            ));
            out.push(entry);
            continue;
        }
        let plugin_sup = match sup.supervisor(&manifest.name, RestartPolicy::Temporary, config).await {
            Ok(s) => s,
            Err(e) => {
                entry.problem = Some(e.to_string());
                out.push(entry);
                continue;
            }
        };
        let (info, deps, data) = (
            entry.info.clone(),
            deps.clone(),
            data_dir.join("plugin_data").join(&manifest.name),
        );
        let factory = move || {
            Ok(PluginProcess::new(
                manifest.clone(),
                dir.clone(),
                path.clone(),
                data.clone(),
                deps.clone(),
                info.clone(),
            ))
        };
        if let Err(e) = plugin_sup.worker("process", RestartPolicy::Permanent, factory).await {
            tracing::warn!(plugin = %entry.name, "plugin did not start: {e}");
        }
        out.push(entry);
    }
    out
}
