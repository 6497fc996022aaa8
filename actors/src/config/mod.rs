//! The configuration registry: every setting of the daemon and its plugins, typed,
//! validated and kept in SQLite.
//!
//! # Namespaces
//! Keys are flat and dotted. Core settings live under `webui.*`, `core.daemon.*`,
//! `core.llm.*`, `core.plugin.*`, `core.memory.*`, `core.knowledge.*`, `core.log.*`,
//! `core.agent.*` and `core.supervisor.*`; each has a [`SettingDef`] (type, default,
//! description) in [`core_defs`]. Two families are open-ended: LLM sources
//! (`core.llm.sources.<name>.<field>`, fields in [`SOURCE_FIELDS`]) and plugin settings
//! (`plugin.<plugin>.<key>`, any JSON value, shaped by the plugin). An unknown core key
//! is refused with the closest known key as a suggestion, so a typo never silently
//! creates a setting nobody reads.
//!
//! # Seeding
//! [`ConfigStore::seed_defaults`] inserts each definition's default only where the key is
//! absent. It never overwrites what the user set, is idempotent, and lets a newer release
//! add settings to an existing database. Deleting a key (writing `null`) means "back to
//! the default": reads fall back to the definition at once, and the next start re-seeds
//! it. Plugins register their own defaults the same way with
//! [`ConfigStore::register_plugin_def`].
//!
//! # Storage
//! One SQLite file (`<data>/config.db`, WAL, `synchronous=FULL`) owned by a single
//! [`ConfigStore`]. Values are stored as JSON text. Every write is validated first and
//! committed before the call returns; [`ConfigStore::set_many`] is all-or-nothing. Writes
//! to `core.llm.*` first save the whole LLM section to `<data>/config-llm-snapshot.json`
//! (mode 0600, it holds API keys) so that a bad provider change can be undone with
//! [`ConfigStore::restore_llm_snapshot`].
//!
//! # Why one table per plugin
//! Core settings are in the `config` table; each plugin's settings are in its own
//! `config_<plugin>` table, created when the plugin first registers or writes a key.
//! Two plugins may use the same key (`api_key`, `addr`) without colliding, no plugin key
//! can shadow or leak into a core key, and removing a plugin's settings is dropping one
//! table. The `plugin_tables` table maps plugin names to table names, so that names that
//! sanitise alike (`my-plugin`, `my_plugin`) still get distinct tables.
//!
//! # Reading settings
//! Code outside this module never spells a key: it reads a typed group
//! ([`AgentConfig`], [`MemoryConfig`], …) out of a [`Settings`] snapshot
//! ([`ConfigStore::snapshot`], or the [`ReadSettings`] message), or names a
//! [`keys`] constant. A misspelt key is therefore a compile error, and each default is
//! written once, in the key table ([`core_defs`]).
//!
//! This module is plain Rust; the actor that owns the store and publishes
//! `setting_changed` events from the returned [`Change`]s lives next to it.

use std::path::PathBuf;

use thiserror::Error;

mod actor;
mod defs;
mod duration;
pub mod keys;
pub mod live;
pub mod seal;
mod settings;
pub(crate) mod store;
mod values;

pub use actor::{
    Author, ConfigActor, DisabledPlugins, GetDefs, GetHistory, GetMaskedSetting, GetPluginDefs, GetRawSettings,
    GetSetting, GetSettings, MASKED, ReadSettings, RegisterPluginDef, Revert, SetPluginDisabled, UpdateSettings,
};
pub use defs::{
    DEFAULT_SYSTEM_PROMPT, KeyInfo, LLM_PREFIX, LOG_LEVELS, PLUGIN_PREFIX, SOURCE_FIELDS, SOURCES_PREFIX, SettingDef,
    SourceField, ValueKind, WORKSPACE_DIR, core_defs, is_valid_name, is_valid_plugin_key, lookup, validate,
};
pub use duration::{DurationError, format_duration, parse_duration};
pub use keys::Key;
pub use settings::{
    AgentConfig, BackupConfig, CliConfig, DaemonConfig, EmbedderKind, HeartbeatConfig, InputLimits, LlmConfig,
    MediaConfig, MemoryConfig, Secret, SecretMap, SecurityConfig, SettingValue, Settings, SupervisionConfig,
};
pub use store::{Change, ConfigStore, DisabledPlugin, HistoryEntry, LLM_SNAPSHOT_FILE, PluginDef, PluginMeta};
pub use values::{MIN_SECRET_LEN, valid_alias};

/// Everything that can go wrong in the configuration registry. Messages are shown to the
/// user as they are, so each one says what to do next.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The key is not a known setting (and not in an open-ended family).
    #[error("unknown setting `{key}`; {hint}")]
    UnknownKey {
        /// The key as given.
        key: String,
        /// The closest known key and/or the keys of its namespace.
        hint: String,
    },
    /// The key is in an open-ended family but malformed (bad plugin or source name).
    #[error("invalid setting key `{key}`: {reason}")]
    InvalidKey {
        /// The key as given.
        key: String,
        /// The expected shape.
        reason: String,
    },
    /// The value does not follow the setting's rule; nothing was written.
    #[error("invalid value for `{key}`: expected {expected}, for example {example}; got {got}")]
    InvalidValue {
        /// The setting.
        key: String,
        /// The expected type, e.g. "an integer from 1 to 100".
        expected: String,
        /// A valid value, written as JSON.
        example: String,
        /// What was received and why it is wrong.
        got: String,
    },
    /// A typed read of a setting that has neither a stored value nor a default.
    #[error("setting `{key}` has no value and no default; set it before using it")]
    Missing {
        /// The setting.
        key: String,
    },
    /// A typed read found a value of another type (written by an older version, or
    /// asked for with the wrong getter).
    #[error(
        "setting `{key}` holds {got}, but {expected} is needed; set a valid value, or set it to null to restore the default"
    )]
    WrongType {
        /// The setting.
        key: String,
        /// What the getter needs.
        expected: String,
        /// What is stored.
        got: String,
    },
    /// A stored value is not valid JSON (the database was edited by hand).
    #[error("stored value of `{key}` is not valid JSON ({source}); set it to null to restore the default")]
    Corrupt {
        /// The setting.
        key: String,
        /// The JSON parse error.
        source: serde_json::Error,
    },
    /// A secret setting could not be sealed or opened (see [`seal`]).
    #[error(transparent)]
    Seal(#[from] seal::SealError),
    /// SQLite failed.
    #[error("config database error: {0}; check that the data directory is writable and that no other daemon uses it")]
    Database(#[from] rusqlite::Error),
    /// The schema could not be brought up to date.
    #[error(
        "could not update the config database schema: {0}; if the file comes from a newer HomeAgent, upgrade, or restore a backup"
    )]
    Migration(#[from] rusqlite_migration::Error),
    /// A file next to the database (the LLM snapshot) could not be read or written.
    #[error("could not {action} `{path}`: {source}; check that the data directory exists and is writable")]
    Io {
        /// What was being done ("write", "read", ...).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A history entry asked for by id does not exist.
    #[error("no settings change #{id}; GET /api/v1/settings/history lists them")]
    NoSuchChange { id: i64 },
    /// A secret's old value is not kept, so its change cannot be undone.
    #[error("`{key}` is a secret: its old value is not kept, so the change cannot be reverted; set it again instead")]
    SecretNotKept { key: String },
    /// [`ConfigStore::restore_llm_snapshot`] found no snapshot.
    #[error(
        "no LLM settings snapshot at `{path}`; one is written automatically before every change to a `core.llm.*` setting"
    )]
    NoSnapshot {
        /// Where the snapshot was expected.
        path: PathBuf,
    },
    /// The snapshot file exists but cannot be applied.
    #[error("LLM settings snapshot `{path}` cannot be restored: {reason}; fix or delete the file")]
    BadSnapshot {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

impl ConfigError {
    /// Whether the request was at fault (a key or value to fix), as opposed to the
    /// daemon's storage (a full disk, a damaged or unwritable file): the HTTP edge
    /// answers 4xx for the first and 5xx for the second, so a client retries only what
    /// can succeed unchanged.
    pub fn is_request_error(&self) -> bool {
        matches!(
            self,
            Self::UnknownKey { .. }
                | Self::InvalidKey { .. }
                | Self::InvalidValue { .. }
                | Self::Missing { .. }
                | Self::WrongType { .. }
                | Self::NoSnapshot { .. }
                | Self::BadSnapshot { .. }
                | Self::NoSuchChange { .. }
                | Self::SecretNotKept { .. }
        )
    }

    /// The storage is full (SQLite's `SQLITE_FULL`, or `ENOSPC` on a file next to it).
    pub fn is_disk_full(&self) -> bool {
        match self {
            Self::Database(rusqlite::Error::SqliteFailure(e, _)) => e.code == rusqlite::ErrorCode::DiskFull,
            Self::Io { source, .. } => source.raw_os_error() == Some(28),
            _ => false,
        }
    }
}

#[cfg(test)]
mod error_kind_tests {
    use super::ConfigError;

    #[test]
    fn a_full_disk_is_the_stores_fault_not_the_requests() {
        let full = ConfigError::Database(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            None,
        ));
        assert!(!full.is_request_error() && full.is_disk_full());
        let locked = ConfigError::Database(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            None,
        ));
        assert!(!locked.is_request_error() && !locked.is_disk_full());
        let unknown = ConfigError::UnknownKey {
            key: "core.nope".into(),
            hint: String::new(),
        };
        assert!(unknown.is_request_error());
    }
}
