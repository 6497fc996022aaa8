//! `plugin.json`: what a plugin is and what it may do.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::capability::{Capability, Denied};
use crate::request::PluginRequest;

/// Entry files in probe order when the manifest names none.
pub const ENTRY_PROBE: [&str; 3] = ["plugin.bin", "main.lua", "SKILL.md"];

/// The manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub name: String,
    #[serde(default)]
    pub name_zh: String,
    #[serde(default)]
    pub name_en: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub author: String,
    #[serde(default)]
    pub license: String,
    #[serde(default)]
    pub homepage: String,
    #[serde(default)]
    pub repository: String,
    /// `plugin.bin`, `main.lua` or `SKILL.md`; probed when empty.
    #[serde(default)]
    pub entry: String,
    #[serde(default)]
    pub platforms: Vec<String>,
    #[serde(default)]
    pub min_version: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub deprecated: bool,
    /// Kernel services the plugin uses; empty grants only the core methods.
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// Security profiles the plugin may pick per injected input (profile name → trust),
    /// e.g. `{"owner": "owner", "guest": "guest"}` for a chat bridge that knows which
    /// account is the owner's. Empty: its inputs are guests.
    #[serde(default)]
    pub profiles: std::collections::BTreeMap<String, Trust>,
    /// Kernel facilities the plugin needs (names of `crate::facility`).
    #[serde(default)]
    pub requires_facilities: Vec<String>,
    /// Started when the daemon starts (the default). `false`: the plugin stays stopped
    /// until it is enabled or reloaded (by the owner, or by the model through
    /// `plugin_enable`/`plugin_reload`), so its package must ship a `SKILL.md` that
    /// tells the model it exists (`homed plugin pack` refuses one without).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub auto_start: bool,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// The platforms a manifest's `platforms` may name (`std::env::consts::OS`, with
/// `macos` called `darwin` as the reference does).
pub const PLATFORMS: [&str; 3] = ["linux", "darwin", "windows"];

/// The platform name of `os` (a `std::env::consts::OS` value) in a manifest's terms.
pub fn platform_of(os: &str) -> &str {
    match os {
        "macos" => "darwin",
        other => other,
    }
}

/// Whether `s` is a semantic version (`MAJOR.MINOR.PATCH[-pre][+build]`), the form
/// `version` and `min_version` are written in.
pub fn is_version(s: &str) -> bool {
    semver::Version::parse(s.trim()).is_ok()
}

/// Why a plugin may not be installed or started on this daemon. Each says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompatError {
    #[error(
        "plugin `{name}` needs homed {wanted} or newer, but this is homed {running}; upgrade homed, or install a version of the plugin whose min_version is at most {running}"
    )]
    TooOld {
        name: String,
        wanted: String,
        running: String,
    },
    #[error(
        "plugin `{name}` has min_version `{value}`, which is not a version: write MAJOR.MINOR.PATCH (e.g. 0.1.0) in plugin.json"
    )]
    BadMinVersion { name: String, value: String },
    #[error(
        "plugin `{name}` runs on {wanted} only, and this daemon runs on {running}; install it on one of those, or ask its author for a {running} build"
    )]
    WrongPlatform {
        name: String,
        wanted: String,
        running: String,
    },
    #[error(
        "plugin `{name}` lists platform `{value}`, which is not one of linux, darwin, windows; fix `platforms` in plugin.json (empty means all)"
    )]
    BadPlatform { name: String, value: String },
}

impl CompatError {
    /// A short machine-readable kind for API clients.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TooOld { .. } => "version_too_old",
            Self::WrongPlatform { .. } => "wrong_platform",
            Self::BadMinVersion { .. } | Self::BadPlatform { .. } => "bad_manifest",
        }
    }
}

/// How far a profile's inputs are trusted (see the kernel's `firewall::principal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    Owner,
    Guest,
}

/// How a plugin runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    Subprocess,
    Lua,
    Skill,
}

/// Why a plugin directory cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path} is not a valid plugin manifest: {source}; see docs/PROTOCOL.md for the fields")]
    Json { path: String, source: serde_json::Error },
    #[error("plugin name `{0}` is invalid: use 1-64 characters of [a-z0-9_-]")]
    Name(String),
    #[error("plugin `{name}` has no entry: add one of plugin.bin, main.lua or SKILL.md to {dir}")]
    NoEntry { name: String, dir: String },
    #[error("plugin `{name}` requires unknown facility `{facility}`; known: {known}")]
    Facility {
        name: String,
        facility: String,
        known: String,
    },
}

impl Manifest {
    /// Reads `dir/plugin.json` and checks it.
    pub fn load(dir: &Path) -> Result<Self, ManifestError> {
        let path = dir.join("plugin.json");
        let text = std::fs::read_to_string(&path).map_err(|source| ManifestError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let m: Manifest = serde_json::from_str(&text).map_err(|source| ManifestError::Json {
            path: path.display().to_string(),
            source,
        })?;
        let ok = !m.name.is_empty()
            && m.name.len() <= 64
            && m.name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !ok {
            return Err(ManifestError::Name(m.name));
        }
        if let Some(f) = m.requires_facilities.iter().find(|f| !crate::facility::is_known(f)) {
            return Err(ManifestError::Facility {
                name: m.name.clone(),
                facility: f.clone(),
                known: crate::facility::ALL.join(", "),
            });
        }
        Ok(m)
    }

    /// The entry file and its kind: the manifest's `entry`, else the first of
    /// [`ENTRY_PROBE`] that exists.
    pub fn entry(&self, dir: &Path) -> Result<(PathBuf, EntryKind), ManifestError> {
        let candidates: Vec<&str> = if self.entry.is_empty() {
            ENTRY_PROBE.to_vec()
        } else {
            vec![self.entry.as_str()]
        };
        for c in candidates {
            let p = dir.join(c);
            if p.is_file() {
                let kind = match c {
                    "main.lua" => EntryKind::Lua,
                    "SKILL.md" => EntryKind::Skill,
                    _ => EntryKind::Subprocess,
                };
                return Ok((p, kind));
            }
        }
        Err(ManifestError::NoEntry {
            name: self.name.clone(),
            dir: dir.display().to_string(),
        })
    }

    /// Whether `min_version` parses and `platforms` names only known platforms —
    /// what a package must get right wherever it is built or installed.
    pub fn check_fields(&self) -> Result<(), CompatError> {
        if let Some(p) = self.platforms.iter().find(|p| !PLATFORMS.contains(&p.as_str())) {
            return Err(CompatError::BadPlatform {
                name: self.name.clone(),
                value: p.clone(),
            });
        }
        self.min_version().map(|_| ())
    }

    /// `min_version` parsed (`None` when absent).
    fn min_version(&self) -> Result<Option<semver::Version>, CompatError> {
        let v = self.min_version.trim();
        if v.is_empty() {
            return Ok(None);
        }
        semver::Version::parse(v)
            .map(Some)
            .map_err(|_| CompatError::BadMinVersion {
                name: self.name.clone(),
                value: self.min_version.clone(),
            })
    }

    /// Whether the plugin may run on a daemon of version `core_version` on `os` (a
    /// `std::env::consts::OS` value): its fields are valid, `min_version` is at most
    /// `core_version`, and `platforms` is empty or names `os`. Checked at install and
    /// at every start.
    pub fn check_host(&self, core_version: &str, os: &str) -> Result<(), CompatError> {
        self.check_fields()?;
        let platform = platform_of(os);
        if !self.platforms.is_empty() && !self.platforms.iter().any(|p| p == platform) {
            return Err(CompatError::WrongPlatform {
                name: self.name.clone(),
                wanted: self.platforms.join(", "),
                running: platform.to_owned(),
            });
        }
        if let Some(wanted) = self.min_version()? {
            // The daemon's own version always parses (Cargo requires semver); if it
            // did not, nothing could be compared and the plugin is let through.
            if let Ok(running) = semver::Version::parse(core_version)
                && running < wanted
            {
                return Err(CompatError::TooOld {
                    name: self.name.clone(),
                    wanted: wanted.to_string(),
                    running: running.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Whether the plugin may make `call`. Least privilege: a capability must be
    /// declared to be granted, so a manifest without a list (or with an empty one) gets
    /// the core methods only — a package cannot gain everything by saying nothing.
    /// Decided on the decoded call ([`PluginRequest::needs`]), so the params count.
    pub fn permits(&self, call: &PluginRequest) -> Result<(), Denied> {
        match call.needs(&self.name) {
            Some(needed) if !self.capabilities.contains(&needed) => Err(Denied {
                plugin: self.name.clone(),
                method: call.method(),
                needed,
                other: match call {
                    PluginRequest::SettingsGetPlugin(p) => Some(p.plugin.clone()),
                    PluginRequest::SettingsSetPlugin(p) => Some(p.plugin.clone()),
                    PluginRequest::SettingsListPlugin(p) => Some(p.plugin.clone()),
                    _ => None,
                },
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_entry_and_capabilities() {
        let dir = std::env::temp_dir().join(format!("manifest-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("plugin.json"), r#"{"name": "timer", "capabilities": ["io"]}"#).unwrap();
        let m = Manifest::load(&dir).unwrap();
        assert!(
            m.entry(&dir)
                .unwrap_err()
                .to_string()
                .contains("plugin.bin, main.lua or SKILL.md")
        );
        std::fs::write(dir.join("main.lua"), "").unwrap();
        assert_eq!(m.entry(&dir).unwrap().1, EntryKind::Lua);
        std::fs::write(dir.join("plugin.bin"), "").unwrap();
        assert_eq!(
            m.entry(&dir).unwrap().1,
            EntryKind::Subprocess,
            "plugin.bin is probed first"
        );
        let call = |method: &str, params: serde_json::Value| PluginRequest::from_message(method, params).unwrap();
        let inject = call("io.injectText", serde_json::json!({"text": "hi"}));
        let recall = call("memory.recall", serde_json::json!({"query": "q"}));
        let register = call("tool.register", serde_json::json!({"name": "timer_set"}));
        assert!(m.permits(&inject).is_ok());
        assert!(
            m.permits(&recall)
                .unwrap_err()
                .to_string()
                .contains("`memory` capability")
        );
        assert!(m.permits(&register).is_ok());
        // No list, or an empty one, grants nothing beyond the core methods.
        for manifest in [r#"{"name": "bare"}"#, r#"{"name": "bare", "capabilities": []}"#] {
            std::fs::write(dir.join("plugin.json"), manifest).unwrap();
            let m = Manifest::load(&dir).unwrap();
            assert!(m.permits(&register).is_ok());
            for denied in [
                inject.clone(),
                call("settings.setCore", serde_json::json!({"key": "k"})),
                recall.clone(),
                call("events.subscribe", serde_json::json!({})),
                call("settings.getPlugin", serde_json::json!({"plugin": "other", "key": "k"})),
            ] {
                let e = m.permits(&denied).expect_err(manifest);
                assert!(e.to_string().contains("plugin.json"), "{manifest}: {e}");
            }
            assert!(
                m.permits(&call("settings.listPlugin", serde_json::json!({"plugin": "bare"})))
                    .is_ok(),
                "its own settings"
            );
        }
        // A method outside the protocol is not a call at all.
        assert!(PluginRequest::from_message("plugin.list", serde_json::json!({})).is_err());
        std::fs::write(dir.join("plugin.json"), r#"{"name": "Bad Name"}"#).unwrap();
        assert!(Manifest::load(&dir).is_err());
        std::fs::write(
            dir.join("plugin.json"),
            r#"{"name": "x", "requires_facilities": ["memroy"]}"#,
        )
        .unwrap();
        assert!(Manifest::load(&dir).unwrap_err().to_string().contains("memroy"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn manifest(json: &str) -> Manifest {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn auto_start_defaults_to_true() {
        assert!(manifest(r#"{"name": "a"}"#).auto_start);
        assert!(!manifest(r#"{"name": "a", "auto_start": false}"#).auto_start);
    }

    #[test]
    fn min_version_is_compared_as_semver() {
        let m = |v: &str| manifest(&format!(r#"{{"name": "p", "min_version": "{v}"}}"#));
        assert!(m("").check_host("0.1.0", "linux").is_ok(), "absent: any version");
        assert!(m("0.1.0").check_host("0.1.0", "linux").is_ok(), "equal is enough");
        assert!(m("0.1.0").check_host("0.2.0", "linux").is_ok());
        assert!(m("0.1.9").check_host("0.1.10", "linux").is_ok(), "numeric, not textual");
        assert!(
            m("1.0.0-rc.1").check_host("1.0.0", "linux").is_ok(),
            "a release is past its pre-release"
        );
        let err = m("0.2.0").check_host("0.1.0", "linux").unwrap_err();
        assert_eq!(err.kind(), "version_too_old");
        let text = err.to_string();
        assert!(
            text.contains("0.2.0") && text.contains("0.1.0") && text.contains("upgrade homed"),
            "{text}"
        );
        assert!(
            m("1.0.0").check_host("1.0.0-rc.1", "linux").is_err(),
            "a pre-release is older"
        );
        for bad in ["0.1", "v0.1.0", "latest", "1.0.0.0", ">=0.1.0"] {
            let err = m(bad).check_host("9.9.9", "linux").unwrap_err();
            assert_eq!(err.kind(), "bad_manifest", "{bad}");
            assert!(err.to_string().contains("MAJOR.MINOR.PATCH"), "{err}");
        }
    }

    #[test]
    fn platforms_are_a_subset_and_name_this_one() {
        let m = |p: &str| manifest(&format!(r#"{{"name": "p", "platforms": {p}}}"#));
        assert!(m("[]").check_host("0.1.0", "linux").is_ok(), "empty: every platform");
        assert!(m(r#"["linux", "darwin"]"#).check_host("0.1.0", "linux").is_ok());
        assert!(
            m(r#"["darwin"]"#).check_host("0.1.0", "macos").is_ok(),
            "macos is darwin"
        );
        let err = m(r#"["darwin", "windows"]"#).check_host("0.1.0", "linux").unwrap_err();
        assert_eq!(err.kind(), "wrong_platform");
        assert!(
            err.to_string().contains("darwin, windows") && err.to_string().contains("on linux"),
            "{err}"
        );
        let err = m(r#"["linux", "freebsd"]"#).check_host("0.1.0", "linux").unwrap_err();
        assert_eq!(err.kind(), "bad_manifest");
        assert!(err.to_string().contains("`freebsd`"), "{err}");
        assert!(m(r#"["macos"]"#).check_fields().is_err(), "the manifest says darwin");
    }
}
