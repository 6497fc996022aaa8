//! What each subprocess plugin may touch, enforced by the kernel (see `homeagent_confine`).
//!
//! A plugin process — and every command, terminal and MCP server it starts, since a
//! confinement is inherited and cannot be undone — may:
//! - read and execute the system's usual directories, the `homed` executable (the
//!   bundled plugins are `homed plugin <name>`) and its own plugin directory;
//! - read and write its own data directory (`DATA/plugin_data/<name>`, also its
//!   `HOME` and `TMPDIR`) and the sandbox's write roots; read the sandbox's read roots;
//! - connect over TCP anywhere but the daemon's own port.
//!
//! Never the rest of the data dir (the owner token, the settings and their keys, the
//! databases, other plugins), even when a sandbox root contains it; never the daemon's
//! environment (it is not passed, and `/proc/<daemon>/environ` is out of reach), never a
//! signal or `ptrace` to anything outside. The sandbox roots are read when the process
//! starts; a change to them restarts the plugins (see `plugins::watch`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use homeagent_confine::{ClosedPort, ConfineError, Confinement, Prepared, Support};

use serde_json::Value;

use crate::firewall::Firewall;

/// Environment variables a plugin process inherits from the daemon; everything else
/// (API keys exported for the daemon among them) stays behind.
const KEPT_ENV: &[&str] = &[
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TERM",
    "USER",
    "LOGNAME",
    "RUST_BACKTRACE",
];

/// Builds each plugin's confinement from the current firewall settings.
#[derive(Debug)]
pub struct Confiner {
    support: Support,
    /// `DATA`: forbidden as a whole; only the grants below reach inside it.
    data_dir: PathBuf,
    firewall: Arc<Firewall>,
    /// The daemon's port closed to TCP connects: one shared layer, built at first use
    /// (the address is declared before any plugin starts).
    closed_port: OnceLock<Option<ClosedPort>>,
    /// What plugins' own settings grant them ([`owner_granted`]), kept here rather than
    /// in the firewall so that a change is known before the plugin restarts for it.
    owner: parking_lot::RwLock<BTreeMap<String, OwnerGrants>>,
}

impl Confiner {
    /// Probes the kernel and says at start what it can and cannot enforce.
    pub fn new(data_dir: PathBuf, firewall: Arc<Firewall>) -> Self {
        let support = Support::probe();
        if support.complete() {
            tracing::info!(
                landlock_abi = support.abi,
                "plugins and their commands run confined by the kernel"
            );
        } else if support.filesystem() {
            tracing::warn!(
                landlock_abi = support.abi,
                missing = ?support.missing(),
                "plugins run confined, but this kernel cannot enforce all of it"
            );
        } else {
            tracing::error!(
                missing = ?support.missing(),
                "this kernel cannot confine plugins: subprocess plugins are refused unless core.security.confinement is false"
            );
        }
        Self {
            support,
            data_dir,
            firewall,
            closed_port: OnceLock::new(),
            owner: Default::default(),
        }
    }

    /// The environment a plugin process starts with.
    pub fn environment(plugin_data: &Path) -> Vec<(String, std::ffi::OsString)> {
        let mut env: Vec<(String, std::ffi::OsString)> = KEPT_ENV
            .iter()
            .filter_map(|k| std::env::var_os(k).map(|v| ((*k).to_owned(), v)))
            .collect();
        env.push(("HOME".into(), plugin_data.into()));
        env.push(("TMPDIR".into(), plugin_data.join("tmp").into()));
        env
    }

    /// Takes the plugins' own grants from all the settings (at start).
    pub fn set_owner_settings(&self, settings: &BTreeMap<String, Value>) {
        *self.owner.write() = owner_granted(settings);
    }

    /// Records a changed setting of `plugin`; true when it changes what the plugin is
    /// granted (the plugin must restart to get it: a running confinement only narrows).
    pub fn owner_setting_changed(&self, plugin: &str, key: &str, value: &Value) -> bool {
        if key != MCP_SERVERS {
            return false;
        }
        let new = owner_granted(&BTreeMap::from([(key.to_owned(), value.clone())]))
            .remove(plugin)
            .unwrap_or_default();
        let mut owner = self.owner.write();
        if owner.get(plugin) == Some(&new) {
            return false;
        }
        owner.insert(plugin.to_owned(), new);
        true
    }

    /// What no plugin may touch even beneath a granted root: the data dir, the key that
    /// seals the secrets (`config::seal`) and where service managers put credentials.
    fn forbidden(&self) -> Vec<PathBuf> {
        let mut out = vec![self.data_dir.clone()];
        out.extend(crate::config::seal::key_file().and_then(|f| f.parent().map(Path::to_path_buf)));
        out.extend(std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from));
        out.extend(["/run/credentials", "/run/secrets"].map(PathBuf::from));
        out
    }

    fn data_of(&self, name: &str) -> PathBuf {
        super::package::plugin_data_dir(&self.data_dir, name)
    }

    /// What the plugin `name` in `plugin_dir` may touch under the current settings.
    pub fn grants(&self, name: &str, plugin_dir: &Path) -> Grants {
        let config = self.firewall.config();
        let mut read = vec![plugin_dir.to_owned()];
        read.extend(std::env::current_exe().ok());
        read.extend(config.sandbox.read_roots().iter().cloned());
        let mut write = vec![self.data_of(name)];
        write.extend(config.sandbox.write_roots().iter().cloned());
        if let Some(own) = self.owner.read().get(name) {
            read.extend(own.read.iter().cloned());
            write.extend(own.write.iter().cloned());
        }
        Grants {
            read,
            write,
            unconfined: config.unconfined,
        }
    }

    /// `grants` as rules ready to apply in the plugin's child; `None` when the owner
    /// turned confinement off.
    pub fn prepare(&self, name: &str, plugin_dir: &Path, grants: &Grants) -> Result<Option<Prepared>, ConfineError> {
        if grants.unconfined {
            tracing::warn!(plugin = %name, "running unconfined: core.security.confinement is false");
            return Ok(None);
        }
        let data = self.data_of(name);
        let _ = std::fs::create_dir_all(data.join("tmp"));
        let closed_port = match self.closed_port.get() {
            Some(p) => p.clone(),
            None => {
                let port = crate::llm::adapter::own_addresses().first().map(|a| a.port());
                let built = port.map(|p| ClosedPort::new(p, self.support)).transpose()?;
                self.closed_port.get_or_init(|| built).clone()
            }
        };
        let mut read = homeagent_confine::system_read_roots();
        read.extend(grants.read.iter().cloned());
        Confinement {
            read,
            write: grants.write.clone(),
            devices: homeagent_confine::system_devices(),
            forbidden: self.forbidden(),
            exempt: vec![
                plugin_dir.to_owned(),
                data,
                self.data_dir.join(crate::firewall::WORKSPACE_DIR),
            ],
            closed_port,
        }
        .prepare(self.support)
        .map(Some)
    }
}

/// What one plugin process was granted, as paths: compared with the current settings'
/// grants by the plugin watcher, which restarts a plugin whose grants changed (a
/// confinement can only narrow, never widen, once a process runs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grants {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub unconfined: bool,
}

/// The MCP bridge's servers: the one plugin setting that grants paths.
const MCP_SERVERS: &str = "plugin.mcp.servers";

/// Paths a plugin's own settings grant it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OwnerGrants {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
}

/// Grants that follow from a plugin's own settings, which only the owner sets: the
/// programs the MCP bridge starts (`plugin.mcp.servers`). For each absolute `command`
/// or argument that is a file, its directory may be read; a `bin` or `.bin` directory
/// grants its parent (a virtualenv, a `node_modules` tree). An argument that is a
/// directory (the folder a filesystem server serves) may be read and written.
/// Commands found on `PATH` in system directories need nothing; paths that do not
/// exist are skipped.
pub fn owner_granted(settings: &BTreeMap<String, Value>) -> BTreeMap<String, OwnerGrants> {
    let mut out = BTreeMap::new();
    let Some(mut servers) = settings.get(MCP_SERVERS).and_then(|v| v.as_object()) else {
        return out;
    };
    // Claude Desktop's file format nests them.
    if let Some(inner) = servers.get("mcpServers").and_then(|v| v.as_object()) {
        servers = inner;
    }
    let mut grants = OwnerGrants::default();
    let add = |list: &mut Vec<PathBuf>, p: &Path| {
        if !list.iter().any(|d| d == p) {
            list.push(p.to_owned());
        }
    };
    for server in servers.values() {
        let command = server.get("command").and_then(|c| c.as_str());
        let args = server
            .get("args")
            .and_then(|a| a.as_array())
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str());
        for word in command.into_iter().chain(args) {
            let path = Path::new(word);
            // A path that does not exist grants nothing (and changes nothing).
            if !path.is_absolute() || !path.exists() {
                continue;
            }
            if path.is_dir() {
                add(&mut grants.write, path);
                continue;
            }
            let Some(parent) = path.parent() else { continue };
            let dir = match parent.file_name().and_then(|n| n.to_str()) {
                Some("bin" | ".bin") => parent.parent().unwrap_or(parent),
                _ => parent,
            };
            add(&mut grants.read, dir);
        }
    }
    out.insert("mcp".to_owned(), grants);
    out
}
