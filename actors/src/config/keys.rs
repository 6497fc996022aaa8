//! Every fixed core setting's key, named once and typed.
//!
//! Code never spells a setting's key as a string: it names one of these constants, so a
//! misspelt key is a compile error instead of a setting nobody reads. The constant also
//! carries the Rust type the value decodes to ([`Key<T>`]); the key table in
//! [`super::defs::core_defs`] is written in terms of the same constants, and a unit test
//! checks that every default there decodes as its constant's type.
//!
//! ```
//! use homeagent_actors::config::{AgentConfig, Settings, keys};
//! let s = Settings::default().with(keys::AGENT_MAX_TOOL_TURNS, serde_json::json!(3));
//! assert_eq!(AgentConfig::read(&s).max_tool_turns, 3);
//! assert_eq!(s.get(keys::AGENT_MAX_TOOL_TURNS), 3u32);
//! ```
//!
//! A misspelt key does not compile:
//!
//! ```compile_fail,E0425
//! use homeagent_actors::config::{Settings, keys};
//! let _ = Settings::default().get(keys::AGENT_MAX_TOOL_TURN);
//! ```
//!
//! Nor does reading a setting as another type than its own:
//!
//! ```compile_fail,E0308
//! use homeagent_actors::config::{Settings, keys};
//! let turns: String = Settings::default().get(keys::AGENT_MAX_TOOL_TURNS);
//! ```
//!
//! The open-ended families (`core.llm.sources.<name>.<field>` and plugin settings) are
//! not listed here; the few plugin keys the kernel itself reads are, at the end.

use std::marker::PhantomData;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::values::{EmbedderKind, Secret, SecretMap, SettingValue};

/// The key of a setting whose value decodes to `T`.
pub struct Key<T> {
    name: &'static str,
    _value: PhantomData<fn() -> T>,
}

impl<T> Clone for Key<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Key<T> {}

impl<T> std::fmt::Debug for Key<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl<T> Key<T> {
    /// A key; only this module makes them.
    const fn new(name: &'static str) -> Self {
        Self {
            name,
            _value: PhantomData,
        }
    }

    /// The flat dotted key as stored (`core.agent.max_tool_turns`).
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// Whether a changed key (from a `setting_changed` event) is this one.
    pub fn is(&self, changed: &str) -> bool {
        self.name == changed
    }
}

impl<T: SettingValue> Key<T> {
    /// Decodes a value of this setting (a stored value or an event's `value`); `None`
    /// when it has another type.
    pub fn decode(&self, value: &Value) -> Option<T> {
        T::decode(value)
    }
}

// Daemon.
pub const DAEMON_DATA_DIR: Key<PathBuf> = Key::new("core.daemon.data_dir");
pub const DAEMON_LOG_LEVEL: Key<String> = Key::new("core.daemon.log_level");
pub const TELEMETRY_OTLP_ENDPOINT: Key<String> = Key::new("core.telemetry.otlp_endpoint");
pub const DAEMON_SHUTDOWN_TIMEOUT: Key<Duration> = Key::new("core.daemon.shutdown_timeout");
pub const DAEMON_HEARTBEAT_INTERVAL: Key<Duration> = Key::new("core.daemon.heartbeat_interval");
/// Comma-separated extra host names the HTTP API answers to.
pub const DAEMON_ALLOWED_HOSTS: Key<String> = Key::new("core.daemon.allowed_hosts");
pub const WEBUI_LISTEN_ADDR: Key<String> = Key::new("webui.listen_addr");

// Backups (`src/backup/`).
/// How often a scheduled backup is taken.
pub const BACKUP_INTERVAL: Key<Duration> = Key::new("core.backup.interval");
/// Scheduled backups kept (0: none are taken).
pub const BACKUP_KEEP: Key<u32> = Key::new("core.backup.keep");
/// Where backups go (empty: `DATA/backups`).
pub const BACKUP_DIR: Key<String> = Key::new("core.backup.dir");

// LLM (the global knobs; each source's fields are the `core.llm.sources.*` family).
pub const LLM_PROVIDER: Key<String> = Key::new("core.llm.provider");
pub const LLM_PRICES: Key<serde_json::Value> = Key::new("core.llm.prices");
pub const LLM_BACKGROUND_SOURCE: Key<String> = Key::new("core.llm.background_source");
pub const LLM_BUDGET_DAILY_TOKENS: Key<u64> = Key::new("core.llm.budget.daily_tokens");
pub const LLM_BUDGET_DAILY_USD: Key<f64> = Key::new("core.llm.budget.daily_usd");
pub const LLM_BUDGET_MONTHLY_USD: Key<f64> = Key::new("core.llm.budget.monthly_usd");
pub const LLM_BUDGET_MONTHLY_TOKENS: Key<u64> = Key::new("core.llm.budget.monthly_tokens");
pub const LLM_BUDGET_GUEST_DAILY_TOKENS: Key<u64> = Key::new("core.llm.budget.guest_daily_tokens");
pub const LLM_BUDGET_BACKGROUND_DAILY_TOKENS: Key<u64> = Key::new("core.llm.budget.background_daily_tokens");
pub const LLM_BUDGET_BACKGROUND_MONTHLY_TOKENS: Key<u64> = Key::new("core.llm.budget.background_monthly_tokens");
pub const LLM_BUDGET_BACKGROUND_DAILY_USD: Key<f64> = Key::new("core.llm.budget.background_daily_usd");
pub const LLM_BUDGET_BACKGROUND_MONTHLY_USD: Key<f64> = Key::new("core.llm.budget.background_monthly_usd");
pub const LLM_BUDGET_GUEST_MONTHLY_TOKENS: Key<u64> = Key::new("core.llm.budget.guest_monthly_tokens");
pub const LLM_BUDGET_GUEST_DAILY_USD: Key<f64> = Key::new("core.llm.budget.guest_daily_usd");
pub const LLM_BUDGET_GUEST_MONTHLY_USD: Key<f64> = Key::new("core.llm.budget.guest_monthly_usd");
pub const LLM_API_KEY: Key<Secret> = Key::new("core.llm.api_key");
pub const LLM_TEMPERATURE: Key<f64> = Key::new("core.llm.temperature");
pub const LLM_MAX_TOKENS: Key<u32> = Key::new("core.llm.max_tokens");
pub const LLM_THINKING_ENABLED: Key<bool> = Key::new("core.llm.thinking_enabled");

// Locations.
pub const PLUGIN_DIR: Key<PathBuf> = Key::new("core.plugin.dir");
pub const MEMORY_GRAPH: Key<PathBuf> = Key::new("core.memory.graph");
pub const MEMORY_TEXT: Key<PathBuf> = Key::new("core.memory.text");
pub const MEMORY_DOCUMENTS: Key<PathBuf> = Key::new("core.memory.documents");
pub const KNOWLEDGE_PATH: Key<PathBuf> = Key::new("core.knowledge.path");
pub const LOG_PATH: Key<PathBuf> = Key::new("core.log.path");

// Memory (the embedder).
pub const MEMORY_EMBEDDER: Key<EmbedderKind> = Key::new("core.memory.embedder");
pub const MEMORY_ONNX_DIR: Key<String> = Key::new("core.memory.onnx_dir");
pub const MEMORY_ONNX_THREADS: Key<usize> = Key::new("core.memory.onnx_threads");
pub const MEMORY_EMBED_URL: Key<String> = Key::new("core.memory.embed_url");
pub const MEMORY_EMBED_MODEL: Key<String> = Key::new("core.memory.embed_model");
pub const MEMORY_EMBED_API_KEY: Key<Secret> = Key::new("core.memory.embed_api_key");

// Inputs: the text cap, the import's time bounds; images (the media memory and the
// input checks).
pub const TEXT_MAX_BYTES: Key<usize> = Key::new("core.input_processing.text.max_bytes");
pub const IMPORT_EARLIEST: Key<i64> = Key::new("core.memory.import.earliest");
pub const IMPORT_MAX_FUTURE: Key<Duration> = Key::new("core.memory.import.max_future");
pub const IMAGE_MAX_BYTES: Key<usize> = Key::new("core.input_processing.image.max_bytes");
pub const IMAGE_MAX_COUNT: Key<usize> = Key::new("core.input_processing.image.max_count");
pub const IMAGE_FALLBACK_PROVIDER: Key<String> = Key::new("core.input_processing.image.fallback_provider");
pub const MULTIMODAL_PROVIDER: Key<String> = Key::new("core.memory.multimodal_space.provider");
pub const MULTIMODAL_BASE_URL: Key<String> = Key::new("core.memory.multimodal_space.base_url");
pub const MULTIMODAL_MODEL: Key<String> = Key::new("core.memory.multimodal_space.model");
pub const MULTIMODAL_API_KEY: Key<Secret> = Key::new("core.memory.multimodal_space.api_key");
pub const MEDIA_RECALL_K: Key<usize> = Key::new("core.memory.media.recall_k");
pub const MEDIA_RECALL_MIN_SCORE: Key<f64> = Key::new("core.memory.media.recall_min_score");

// Agent.
pub const AGENT_TOOL_TIMEOUT: Key<Duration> = Key::new("core.agent.tool_timeout");
pub const AGENT_OUTAGE_WAIT: Key<Duration> = Key::new("core.agent.outage_wait");
pub const AGENT_MAX_TURN_TIME: Key<Duration> = Key::new("core.agent.max_turn_time");
pub const AGENT_TOOL_TOKENS: Key<usize> = Key::new("core.agent.tool_tokens");
pub const AGENT_MAX_TOOL_TURNS: Key<u32> = Key::new("core.agent.max_tool_turns");
pub const AGENT_MAX_CONTEXT_SIZE: Key<usize> = Key::new("core.agent.max_context_size");
pub const AGENT_DISTILL_INTERVAL: Key<Duration> = Key::new("core.agent.distill_interval");
pub const AGENT_ARCHIVE_INTERVAL: Key<Duration> = Key::new("core.agent.archive_interval");
pub const AGENT_REVIEW_INTERVAL: Key<Duration> = Key::new("core.agent.review_interval");
pub const AGENT_MERGE_INTERVAL: Key<Duration> = Key::new("core.agent.merge_interval");
pub const AGENT_MAINTENANCE_DAILY_TASKS: Key<usize> = Key::new("core.agent.maintenance_daily_tasks");
pub const AGENT_SYSTEM_PROMPT: Key<String> = Key::new("core.agent.system_prompt");
pub const AGENT_PERSONAL_PROMPT: Key<String> = Key::new("core.agent.personal_prompt");
/// `en` or `zh`: the message catalog's language (`crate::i18n`).
pub const AGENT_LANGUAGE: Key<String> = Key::new("core.agent.language");
/// Resident sub-agents (spec §6.2): how many may exist, and each task's tool rounds.
pub const AGENT_MAX_RESIDENTS: Key<u32> = Key::new("core.agent.max_residents");
pub const AGENT_RESIDENT_MAX_TOOL_TURNS: Key<u32> = Key::new("core.agent.resident_max_tool_turns");
/// The triage offload (spec §6.1).
pub const AGENT_OFFLOAD_ENABLED: Key<bool> = Key::new("core.agent.offload_enabled");
pub const AGENT_OFFLOAD_BUSY_AFTER: Key<Duration> = Key::new("core.agent.offload_busy_after");
pub const AGENT_OFFLOAD_MIN_PENDING: Key<u32> = Key::new("core.agent.offload_min_pending");
pub const AGENT_OFFLOAD_MAX_RESIDENTS: Key<u32> = Key::new("core.agent.offload_max_residents");

// Security (the firewall).
pub const SECURITY_TOOL_ALLOW: Key<String> = Key::new("core.security.tool_allow");
pub const SECURITY_TOOL_DENY: Key<String> = Key::new("core.security.tool_deny");
pub const SECURITY_READ_ROOTS: Key<String> = Key::new("core.security.sandbox.read_roots");
pub const SECURITY_WRITE_ROOTS: Key<String> = Key::new("core.security.sandbox.write_roots");
pub const SECURITY_NETWORK: Key<bool> = Key::new("core.security.sandbox.network");
pub const SECURITY_CONFINEMENT: Key<bool> = Key::new("core.security.confinement");
pub const SECURITY_SECRETS: Key<SecretMap> = Key::new("core.security.secrets");
pub const SECURITY_SECRET_DESTINATIONS: Key<serde_json::Value> = Key::new("core.security.secret_destinations");
pub const SECURITY_REVIEW: Key<bool> = Key::new("core.security.review");
pub const SECURITY_APPROVAL: Key<String> = Key::new("core.security.approval");
pub const SECURITY_APPROVAL_TOOLS: Key<String> = Key::new("core.security.approval_tools");
pub const SECURITY_APPROVAL_RULES: Key<String> = Key::new("core.security.approval_rules");
pub const SECURITY_OWNER_ONLY_TOOLS: Key<String> = Key::new("core.security.owner_only_tools");

// Supervision.
pub const SUPERVISOR_MAX_RESTARTS: Key<u32> = Key::new("core.supervisor.max_restarts");
pub const SUPERVISOR_RESTART_WINDOW: Key<Duration> = Key::new("core.supervisor.restart_window");
pub const SUPERVISOR_BACKOFF_INITIAL: Key<Duration> = Key::new("core.supervisor.backoff_initial");
pub const SUPERVISOR_BACKOFF_MAX: Key<Duration> = Key::new("core.supervisor.backoff_max");
pub const SUPERVISOR_BACKOFF_RESET_AFTER: Key<Duration> = Key::new("core.supervisor.backoff_reset_after");
pub const SUPERVISOR_STUCK_THRESHOLD: Key<Duration> = Key::new("core.supervisor.stuck_threshold");

// Plugin settings the kernel itself reads (no core definition: an absent value is the
// type's empty value).
/// `plugin.cli.api_key`: when set, a CLI session must start with `/auth <key>`.
pub const CLI_API_KEY: Key<Secret> = Key::new("plugin.cli.api_key");

/// Settings only the owner may change (through the HTTP API, the WebUI or the CLI),
/// never a plugin: those that decide where credentials go (a source's `base_url`,
/// `adapter` and key, the embedder's and image space's endpoints), what confines and
/// reviews tools (`core.security.*`, the MCP bridge's server commands, which run
/// programs and grant paths), who may reach the daemon (`core.daemon.*`, the CLI key)
/// and where plugins are loaded from. A plugin that could change them could send the
/// owner's LLM key to itself on the next turn, or switch off its own walls.
pub fn owner_only_setting(key: &str) -> bool {
    const CREDENTIAL_ROUTES: &[&str] = &[
        "base_url",
        "api_key",
        "adapter",
        "adapter_path",
        "embed_url",
        "embed_api_key",
    ];
    let last = key.rsplit('.').next().unwrap_or(key);
    key.starts_with("core.security.")
        || key.starts_with("core.daemon.")
        || key == CLI_API_KEY.name()
        || key == "core.plugin.dir"
        || key == "plugin.mcp.servers"
        || ((key.starts_with("core.llm.") || key.starts_with("core.memory.")) && CREDENTIAL_ROUTES.contains(&last))
}

#[cfg(test)]
mod owner_only_tests {
    use super::owner_only_setting;

    #[test]
    fn credential_routes_and_walls_are_owner_only() {
        for k in [
            "core.llm.sources.main.base_url",
            "core.llm.api_key",
            "core.llm.sources.x.api_key",
            "core.llm.sources.x.adapter_path",
            "core.memory.embed_url",
            "core.memory.multimodal_space.base_url",
            "core.security.review",
            "core.security.sandbox.read_roots",
            "core.daemon.allowed_hosts",
            "plugin.cli.api_key",
            "plugin.mcp.servers",
        ] {
            assert!(owner_only_setting(k), "{k}");
        }
        for k in [
            "core.llm.max_tokens",
            "core.agent.language",
            "plugin.onebot.url",
            "core.llm.sources.x.priority",
        ] {
            assert!(!owner_only_setting(k), "{k}");
        }
    }
}
