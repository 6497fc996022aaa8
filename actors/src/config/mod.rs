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

mod actor;
mod defs;
mod duration;
mod error;
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
pub use error::ConfigError;
pub use keys::Key;
pub use settings::{
    AgentConfig, BackupConfig, CliConfig, DaemonConfig, EmbedderKind, HeartbeatConfig, InputLimits, LlmConfig,
    MediaConfig, MemoryConfig, Secret, SecretMap, SecurityConfig, SettingValue, Settings, SupervisionConfig,
};
pub use store::{Change, ConfigStore, DisabledPlugin, HistoryEntry, LLM_SNAPSHOT_FILE, PluginDef, PluginMeta};
pub use values::{MIN_SECRET_LEN, valid_alias};
