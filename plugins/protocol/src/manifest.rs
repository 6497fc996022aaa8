//! `plugin.json`: what a plugin is and what it may do.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::capability::Capability;

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

    /// Whether the plugin may call `method`. Least privilege: a capability must be
    /// declared to be granted, so a manifest without a list (or with an empty one) gets
    /// the core methods only — a package cannot gain everything by saying nothing.
    pub fn allows(&self, method: &str) -> Result<(), String> {
        match Capability::required_for(method) {
            Some(c) if !self.capabilities.contains(&c) => Err(Capability::denial(&self.name, method, c)),
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
        assert!(m.allows("io.injectText").is_ok());
        assert!(m.allows("memory.recall").unwrap_err().contains("`memory` capability"));
        assert!(m.allows("tool.register").is_ok());
        // No list, or an empty one, grants nothing beyond the core methods.
        for manifest in [r#"{"name": "bare"}"#, r#"{"name": "bare", "capabilities": []}"#] {
            std::fs::write(dir.join("plugin.json"), manifest).unwrap();
            let m = Manifest::load(&dir).unwrap();
            assert!(m.allows("tool.register").is_ok());
            for method in [
                "io.injectText",
                "settings.setCore",
                "memory.recall",
                "events.subscribe",
                "plugin.list",
            ] {
                assert!(m.allows(method).is_err(), "{manifest}: {method} must be denied");
            }
        }
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
}
