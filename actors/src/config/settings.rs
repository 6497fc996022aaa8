//! Typed settings: what subsystems read instead of raw keys.
//!
//! A [`Settings`] is one consistent snapshot of every effective value, as the store
//! returned it (`ConfigStore::snapshot`, or the `ReadSettings` message of the config
//! actor). Subsystems read it through typed groups ([`AgentConfig`], [`MemoryConfig`],
//! [`LlmConfig`], [`DaemonConfig`], [`SupervisionConfig`], [`HeartbeatConfig`],
//! [`CliConfig`]), each field bound to one [`Key<T>`](super::keys::Key) constant.
//!
//! # Defaults are defined once
//! The store's snapshot holds every core key (stored value, else the definition's
//! default). A key missing from a snapshot (a hand-built one in a test) falls back to
//! the default of the key table in [`super::defs::core_defs`], never to a literal
//! written next to the reader. A value of the wrong type (a database edited by hand)
//! is an error for [`Settings::try_get`] (boot refuses to start on it) and the table's
//! default with a warning for [`Settings::get`] (a running subsystem keeps going).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;
use std::time::Duration;

use serde_json::Value;

use super::defs::{core_defs, describe_json};
use super::error::ConfigError;
use super::keys::{self as key, Key};
pub use super::values::{EmbedderKind, Secret, SecretMap, SettingValue};

/// The key table's defaults, data-dir independent (path defaults come out relative;
/// a store snapshot always carries the real ones).
static TABLE_DEFAULTS: LazyLock<BTreeMap<&'static str, Value>> = LazyLock::new(|| {
    core_defs(Path::new(""))
        .into_iter()
        .map(|d| (d.key, d.default))
        .collect()
});

/// The key table's default of `key`, decoded (`None` for keys without a definition).
fn table_default<T: SettingValue>(key: Key<T>) -> Option<T> {
    TABLE_DEFAULTS.get(key.name()).and_then(T::decode)
}

/// One consistent snapshot of every setting's effective value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    values: BTreeMap<String, Value>,
}

impl Settings {
    /// A snapshot of the given effective values (what `ConfigStore::all` returns).
    pub fn new(values: BTreeMap<String, Value>) -> Self {
        Self { values }
    }

    /// The raw map, for the subsystems that parse an open-ended family themselves
    /// (LLM sources).
    pub fn raw(&self) -> &BTreeMap<String, Value> {
        &self.values
    }

    /// The raw map, owned.
    pub fn into_raw(self) -> BTreeMap<String, Value> {
        self.values
    }

    /// Sets one value (tests build snapshots this way, still through typed keys).
    pub fn with<T>(mut self, key: Key<T>, value: Value) -> Self {
        self.values.insert(key.name().to_owned(), value);
        self
    }

    /// The value of `key`: the snapshot's, else the key table's default, else the
    /// type's empty value (plugin keys have no table default). A value of another
    /// type is an error that says how to repair it.
    pub fn try_get<T: SettingValue>(&self, key: Key<T>) -> Result<T, ConfigError> {
        match self.values.get(key.name()) {
            Some(v) if !v.is_null() => T::decode(v).ok_or_else(|| ConfigError::WrongType {
                key: key.name().to_owned(),
                expected: T::EXPECTED.to_owned(),
                got: describe_json(v),
            }),
            _ => Ok(table_default(key).unwrap_or_default()),
        }
    }

    /// The value of `key` for a running subsystem: like [`Self::try_get`], but a value
    /// of another type is logged and replaced by the key table's default.
    pub fn get<T: SettingValue>(&self, key: Key<T>) -> T {
        self.try_get(key).unwrap_or_else(|e| {
            tracing::warn!(key = key.name(), "{e}; using the default meanwhile");
            table_default(key).unwrap_or_default()
        })
    }
}

/// Declares a typed settings group: a struct whose every field is read from one key.
/// Generates `read` (lenient), `try_read` (strict, for boot), `KEYS` and `concerns`.
macro_rules! settings_group {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty = $key:ident, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            /// The keys this group reads.
            pub const KEYS: &'static [&'static str] = &[$( key::$key.name(), )*];

            /// Reads the group; a value of the wrong type falls back to its default
            /// (logged).
            pub fn read(s: &Settings) -> Self {
                Self { $( $field: s.get(key::$key), )* }
            }

            /// Reads the group; a value of the wrong type is an error.
            pub fn try_read(s: &Settings) -> Result<Self, ConfigError> {
                Ok(Self { $( $field: s.try_get(key::$key)?, )* })
            }

            /// The group as the key table's defaults make it.
            pub fn defaults() -> Self {
                Self::read(&Settings::default())
            }

            /// Whether a changed key is one this group reads.
            pub fn concerns(changed: &str) -> bool {
                Self::KEYS.contains(&changed)
            }
        }
    };
}

settings_group! {
    /// What the daemon's shell reads (`core.daemon.*`).
    pub struct DaemonConfig {
        /// `tracing` filter level (`info`, …).
        pub log_level: String = DAEMON_LOG_LEVEL,
        /// How long a graceful shutdown may take.
        pub shutdown_timeout: Duration = DAEMON_SHUTDOWN_TIMEOUT,
        /// Period of `DATA/heartbeat`.
        pub heartbeat_interval: Duration = DAEMON_HEARTBEAT_INTERVAL,
        /// Extra host names (comma-separated) the HTTP API answers to.
        pub allowed_hosts: String = DAEMON_ALLOWED_HOSTS,
    }
}

settings_group! {
    /// Scheduled backups (`core.backup.*`), read at every check (they apply live).
    pub struct BackupConfig {
        pub interval: Duration = BACKUP_INTERVAL,
        /// Scheduled backups kept; 0 = none taken.
        pub keep: u32 = BACKUP_KEEP,
        /// Empty: `DATA/backups`.
        pub dir: String = BACKUP_DIR,
    }
}

settings_group! {
    /// The supervision tree's settings (`core.supervisor.*`), read once at boot.
    pub struct SupervisionConfig {
        pub max_restarts: u32 = SUPERVISOR_MAX_RESTARTS,
        pub restart_window: Duration = SUPERVISOR_RESTART_WINDOW,
        pub backoff_initial: Duration = SUPERVISOR_BACKOFF_INITIAL,
        pub backoff_max: Duration = SUPERVISOR_BACKOFF_MAX,
        pub backoff_reset_after: Duration = SUPERVISOR_BACKOFF_RESET_AFTER,
        /// Time in one handler after which an actor is reported stuck.
        pub stuck_threshold: Duration = SUPERVISOR_STUCK_THRESHOLD,
    }
}

settings_group! {
    /// The global LLM knobs (`core.llm.*` outside the per-source family).
    pub struct LlmConfig {
        /// The source preferred for requests.
        pub provider: String = LLM_PROVIDER,
        /// The key a source without its own falls back to.
        pub api_key: Secret = LLM_API_KEY,
        pub temperature: f64 = LLM_TEMPERATURE,
        pub max_tokens: u32 = LLM_MAX_TOKENS,
        pub thinking_enabled: bool = LLM_THINKING_ENABLED,
        /// Model → price (see `usage::Prices`).
        pub prices: Value = LLM_PRICES,
        /// The one source background work uses (empty: the usual order).
        pub background_source: String = LLM_BACKGROUND_SOURCE,
        /// Tokens a UTC day, all calls (0 = none).
        pub budget_daily_tokens: u64 = LLM_BUDGET_DAILY_TOKENS,
        /// Dollars a UTC day, all calls (0 = none).
        pub budget_daily_usd: f64 = LLM_BUDGET_DAILY_USD,
        /// Dollars a UTC month, all calls (0 = none).
        pub budget_monthly_usd: f64 = LLM_BUDGET_MONTHLY_USD,
        /// Tokens a UTC month, all calls (0 = none).
        pub budget_monthly_tokens: u64 = LLM_BUDGET_MONTHLY_TOKENS,
        /// Tokens a UTC day of each guest (0 = none).
        pub budget_guest_daily_tokens: u64 = LLM_BUDGET_GUEST_DAILY_TOKENS,
        /// Tokens a UTC day of background work (0 = none).
        pub budget_background_daily_tokens: u64 = LLM_BUDGET_BACKGROUND_DAILY_TOKENS,
        /// The rest of the background cells (0 = none).
        pub budget_background_monthly_tokens: u64 = LLM_BUDGET_BACKGROUND_MONTHLY_TOKENS,
        pub budget_background_daily_usd: f64 = LLM_BUDGET_BACKGROUND_DAILY_USD,
        pub budget_background_monthly_usd: f64 = LLM_BUDGET_BACKGROUND_MONTHLY_USD,
        /// The rest of the guest cells (0 = none).
        pub budget_guest_monthly_tokens: u64 = LLM_BUDGET_GUEST_MONTHLY_TOKENS,
        pub budget_guest_daily_usd: f64 = LLM_BUDGET_GUEST_DAILY_USD,
        pub budget_guest_monthly_usd: f64 = LLM_BUDGET_GUEST_MONTHLY_USD,
    }
}

settings_group! {
    /// The agent's knobs (`core.agent.*` that tasks read).
    pub struct AgentConfig {
        pub system_prompt: String = AGENT_SYSTEM_PROMPT,
        pub personal_prompt: String = AGENT_PERSONAL_PROMPT,
        /// 0 means unlimited.
        pub max_tool_turns: u32 = AGENT_MAX_TOOL_TURNS,
        pub tool_timeout: Duration = AGENT_TOOL_TIMEOUT,
        /// How long a durable input waits out an LLM outage.
        pub outage_wait: Duration = AGENT_OUTAGE_WAIT,
        /// Longest a turn may work.
        pub max_turn_time: Duration = AGENT_MAX_TURN_TIME,
        /// Tokens of tool schemas a request may carry (0: the window's share only).
        pub tool_tokens: usize = AGENT_TOOL_TOKENS,
        /// Events kept in the model's context window.
        pub max_context_size: usize = AGENT_MAX_CONTEXT_SIZE,
    }
}

settings_group! {
    /// The memory heartbeats' periods (`core.agent.*_interval`; they apply live).
    pub struct HeartbeatConfig {
        pub distill_interval: Duration = AGENT_DISTILL_INTERVAL,
        pub archive_interval: Duration = AGENT_ARCHIVE_INTERVAL,
        pub merge_interval: Duration = AGENT_MERGE_INTERVAL,
        pub review_interval: Duration = AGENT_REVIEW_INTERVAL,
        /// Model tasks the merge and review rounds may hand out per day, together.
        pub maintenance_daily_tasks: usize = AGENT_MAINTENANCE_DAILY_TASKS,
    }
}

settings_group! {
    /// The memory's embedder (`core.memory.embedder`, `onnx_*`, `embed_*`).
    pub struct MemoryConfig {
        pub embedder: EmbedderKind = MEMORY_EMBEDDER,
        /// Empty: search the default places.
        pub onnx_dir: String = MEMORY_ONNX_DIR,
        pub onnx_threads: usize = MEMORY_ONNX_THREADS,
        pub embed_url: String = MEMORY_EMBED_URL,
        pub embed_model: String = MEMORY_EMBED_MODEL,
        pub embed_api_key: Secret = MEMORY_EMBED_API_KEY,
    }
}

settings_group! {
    /// Images: the input checks, the vision fallback and the media memory's space
    /// (`core.input_processing.image.*`, `core.memory.multimodal_space.*`,
    /// `core.memory.media.*`).
    pub struct MediaConfig {
        pub max_bytes: usize = IMAGE_MAX_BYTES,
        pub max_count: usize = IMAGE_MAX_COUNT,
        /// Empty: any source with vision; `none`: never describe.
        pub fallback_provider: String = IMAGE_FALLBACK_PROVIDER,
        /// `none` or `remote`.
        pub provider: String = MULTIMODAL_PROVIDER,
        pub base_url: String = MULTIMODAL_BASE_URL,
        pub model: String = MULTIMODAL_MODEL,
        pub api_key: Secret = MULTIMODAL_API_KEY,
        pub recall_k: usize = MEDIA_RECALL_K,
        pub recall_min_score: f64 = MEDIA_RECALL_MIN_SCORE,
    }
}

settings_group! {
    /// The bounds of what one input may be (`core.input_processing.text.*`,
    /// `core.memory.import.*`).
    pub struct InputLimits {
        /// Largest text of one message or import line, in bytes.
        pub max_text_bytes: usize = TEXT_MAX_BYTES,
        /// Earliest accepted time of an imported turn, unix seconds.
        pub import_earliest: i64 = IMPORT_EARLIEST,
        /// How far ahead of now an imported turn may be dated.
        pub import_max_future: Duration = IMPORT_MAX_FUTURE,
    }
}

settings_group! {
    /// The firewall (`core.security.*`).
    pub struct SecurityConfig {
        /// Comma-separated tool names or globs; empty allows all not denied.
        pub tool_allow: String = SECURITY_TOOL_ALLOW,
        /// Comma-separated tool names or globs; deny wins.
        pub tool_deny: String = SECURITY_TOOL_DENY,
        /// Comma-separated absolute paths.
        pub read_roots: String = SECURITY_READ_ROOTS,
        /// Comma-separated absolute paths; the first is the tools' working directory.
        pub write_roots: String = SECURITY_WRITE_ROOTS,
        pub network: bool = SECURITY_NETWORK,
        /// Subprocess plugins (and every command they run) confined by the kernel.
        pub confinement: bool = SECURITY_CONFINEMENT,
        pub secrets: SecretMap = SECURITY_SECRETS,
        /// Alias → `{hosts, tools, in_query}` (see `firewall::destinations`).
        pub secret_destinations: Value = SECURITY_SECRET_DESTINATIONS,
        pub review: bool = SECURITY_REVIEW,
        /// `untrusted`, `always` or `never` (see `firewall::approval`).
        pub approval: String = SECURITY_APPROVAL,
        /// Comma-separated tool globs that ask the owner first.
        pub approval_tools: String = SECURITY_APPROVAL_TOOLS,
        /// `glob=always|ask|never, …`: per-tool rules over the two above.
        pub approval_rules: String = SECURITY_APPROVAL_RULES,
        /// Comma-separated tool globs only the owner's inputs may call.
        pub owner_only_tools: String = SECURITY_OWNER_ONLY_TOOLS,
    }
}

settings_group! {
    /// The built-in CLI channel (`plugin.cli.*`).
    pub struct CliConfig {
        /// Empty: no `/auth` needed.
        pub api_key: Secret = CLI_API_KEY,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::defs::{EMBEDDERS, SOURCES_PREFIX};

    /// Every key a typed group reads, with a check that the table's default decodes.
    fn typed_keys() -> Vec<(&'static str, bool)> {
        fn d<T: SettingValue>(k: Key<T>) -> (&'static str, bool) {
            (
                k.name(),
                TABLE_DEFAULTS.get(k.name()).is_some_and(|v| T::decode(v).is_some()),
            )
        }
        use key::*;
        vec![
            d(DAEMON_DATA_DIR),
            d(DAEMON_LOG_LEVEL),
            d(TELEMETRY_OTLP_ENDPOINT),
            d(DAEMON_SHUTDOWN_TIMEOUT),
            d(DAEMON_HEARTBEAT_INTERVAL),
            d(DAEMON_ALLOWED_HOSTS),
            d(BACKUP_INTERVAL),
            d(BACKUP_KEEP),
            d(BACKUP_DIR),
            d(WEBUI_LISTEN_ADDR),
            d(LLM_PROVIDER),
            d(LLM_PRICES),
            d(LLM_BACKGROUND_SOURCE),
            d(LLM_BUDGET_DAILY_TOKENS),
            d(LLM_BUDGET_MONTHLY_TOKENS),
            d(LLM_BUDGET_DAILY_USD),
            d(LLM_BUDGET_MONTHLY_USD),
            d(LLM_BUDGET_GUEST_DAILY_TOKENS),
            d(LLM_BUDGET_BACKGROUND_DAILY_TOKENS),
            d(LLM_BUDGET_BACKGROUND_MONTHLY_TOKENS),
            d(LLM_BUDGET_BACKGROUND_DAILY_USD),
            d(LLM_BUDGET_BACKGROUND_MONTHLY_USD),
            d(LLM_BUDGET_GUEST_MONTHLY_TOKENS),
            d(LLM_BUDGET_GUEST_DAILY_USD),
            d(LLM_BUDGET_GUEST_MONTHLY_USD),
            d(LLM_API_KEY),
            d(LLM_TEMPERATURE),
            d(LLM_MAX_TOKENS),
            d(LLM_THINKING_ENABLED),
            d(PLUGIN_DIR),
            d(MEMORY_GRAPH),
            d(MEMORY_TEXT),
            d(MEMORY_DOCUMENTS),
            d(KNOWLEDGE_PATH),
            d(LOG_PATH),
            d(MEMORY_EMBEDDER),
            d(MEMORY_ONNX_DIR),
            d(MEMORY_ONNX_THREADS),
            d(MEMORY_EMBED_URL),
            d(MEMORY_EMBED_MODEL),
            d(MEMORY_EMBED_API_KEY),
            d(AGENT_TOOL_TIMEOUT),
            d(AGENT_OUTAGE_WAIT),
            d(AGENT_MAX_TURN_TIME),
            d(AGENT_TOOL_TOKENS),
            d(AGENT_MAX_TOOL_TURNS),
            d(AGENT_MAX_CONTEXT_SIZE),
            d(AGENT_DISTILL_INTERVAL),
            d(AGENT_ARCHIVE_INTERVAL),
            d(AGENT_REVIEW_INTERVAL),
            d(AGENT_MERGE_INTERVAL),
            d(AGENT_MAINTENANCE_DAILY_TASKS),
            d(AGENT_SYSTEM_PROMPT),
            d(AGENT_PERSONAL_PROMPT),
            d(AGENT_LANGUAGE),
            d(AGENT_MAX_RESIDENTS),
            d(AGENT_RESIDENT_MAX_TOOL_TURNS),
            d(AGENT_OFFLOAD_ENABLED),
            d(AGENT_OFFLOAD_BUSY_AFTER),
            d(AGENT_OFFLOAD_MIN_PENDING),
            d(AGENT_OFFLOAD_MAX_RESIDENTS),
            d(SECURITY_TOOL_ALLOW),
            d(SECURITY_TOOL_DENY),
            d(SECURITY_READ_ROOTS),
            d(SECURITY_WRITE_ROOTS),
            d(SECURITY_CONFINEMENT),
            d(SECURITY_NETWORK),
            d(SECURITY_SECRETS),
            d(SECURITY_SECRET_DESTINATIONS),
            d(SECURITY_REVIEW),
            d(SECURITY_APPROVAL),
            d(SECURITY_APPROVAL_TOOLS),
            d(SECURITY_APPROVAL_RULES),
            d(SECURITY_OWNER_ONLY_TOOLS),
            d(SUPERVISOR_MAX_RESTARTS),
            d(SUPERVISOR_RESTART_WINDOW),
            d(SUPERVISOR_BACKOFF_INITIAL),
            d(SUPERVISOR_BACKOFF_MAX),
            d(SUPERVISOR_BACKOFF_RESET_AFTER),
            d(SUPERVISOR_STUCK_THRESHOLD),
            d(TEXT_MAX_BYTES),
            d(IMPORT_EARLIEST),
            d(IMPORT_MAX_FUTURE),
            d(IMAGE_MAX_BYTES),
            d(IMAGE_MAX_COUNT),
            d(IMAGE_FALLBACK_PROVIDER),
            d(MULTIMODAL_PROVIDER),
            d(MULTIMODAL_BASE_URL),
            d(MULTIMODAL_MODEL),
            d(MULTIMODAL_API_KEY),
            d(MEDIA_RECALL_K),
            d(MEDIA_RECALL_MIN_SCORE),
        ]
    }

    #[test]
    fn every_typed_key_has_a_table_default_of_its_type_and_every_fixed_key_is_typed() {
        let typed = typed_keys();
        for (name, decodes) in &typed {
            assert!(decodes, "the key table has no default of the right type for `{name}`");
        }
        // The other direction: the table has no fixed key without a typed constant
        // (the seeded default source belongs to the open-ended source family).
        for def in core_defs(Path::new("/data")) {
            if def.key.starts_with(SOURCES_PREFIX) {
                continue;
            }
            assert!(
                typed.iter().any(|(n, _)| *n == def.key),
                "`{}` has no constant in config::keys",
                def.key
            );
        }
    }

    #[test]
    fn groups_read_the_table_defaults_when_a_snapshot_lacks_a_key() {
        let a = AgentConfig::defaults();
        assert_eq!(a.max_tool_turns, 10);
        assert_eq!(a.tool_timeout, Duration::from_secs(60));
        assert_eq!(a.max_context_size, 30);
        assert!(a.system_prompt.starts_with("You are HomeAgent"));
        let h = HeartbeatConfig::defaults();
        assert_eq!(
            (
                h.distill_interval,
                h.archive_interval,
                h.merge_interval,
                h.review_interval
            ),
            (
                Duration::from_secs(30 * 60),
                Duration::from_secs(60 * 60),
                Duration::from_secs(120 * 60),
                Duration::from_secs(120 * 60)
            )
        );
        let l = LlmConfig::defaults();
        assert_eq!((l.max_tokens, l.temperature), (4096, 0.7));
        assert_eq!(MemoryConfig::defaults().onnx_threads, 1);
        assert!(
            CliConfig::defaults().api_key.is_empty(),
            "a plugin key without a value is empty"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_is_an_error_when_strict_and_the_default_when_lenient() {
        let s = Settings::default()
            .with(key::AGENT_TOOL_TIMEOUT, json!("soon"))
            .with(key::AGENT_MAX_TOOL_TURNS, json!(3));
        let err = AgentConfig::try_read(&s).unwrap_err();
        assert!(
            matches!(&err, ConfigError::WrongType { key, .. } if key == "core.agent.tool_timeout"),
            "{err}"
        );
        assert!(err.to_string().contains("set it to null"), "says how to repair: {err}");
        let a = AgentConfig::read(&s);
        assert_eq!(a.tool_timeout, Duration::from_secs(60));
        assert_eq!(a.max_tool_turns, 3);
        // Null (a deleted key in an event) is the default, not an error.
        let s = Settings::default().with(key::AGENT_MAX_TOOL_TURNS, Value::Null);
        assert_eq!(AgentConfig::try_read(&s).unwrap().max_tool_turns, 10);
    }

    #[test]
    fn a_store_snapshot_carries_stored_values_and_every_default() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = crate::config::ConfigStore::open_in_memory(dir.path()).unwrap();
        store.set(key::AGENT_MAX_TOOL_TURNS.name(), json!(3)).unwrap();
        store.set(key::AGENT_DISTILL_INTERVAL.name(), json!("5m")).unwrap();
        let snap = store.snapshot().unwrap();
        let a = AgentConfig::try_read(&snap).unwrap();
        assert_eq!((a.max_tool_turns, a.max_context_size), (3, 30));
        assert_eq!(
            HeartbeatConfig::try_read(&snap).unwrap().distill_interval,
            Duration::from_secs(300)
        );
        // Path defaults in a snapshot are the real ones (inside the data dir).
        assert_eq!(snap.get(key::PLUGIN_DIR), dir.path().join("plugins"));
    }

    #[test]
    fn concerns_names_exactly_the_keys_a_group_reads() {
        assert!(AgentConfig::concerns("core.agent.max_tool_turns"));
        assert!(!AgentConfig::concerns("core.agent.distill_interval"));
        assert!(HeartbeatConfig::concerns("core.agent.distill_interval"));
        assert!(MemoryConfig::concerns("core.memory.embed_url"));
        assert!(!MemoryConfig::concerns("core.memory.graph"));
        assert!(DaemonConfig::concerns(key::DAEMON_LOG_LEVEL.name()));
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let s = Settings::default().with(key::LLM_API_KEY, json!("sk-very-secret"));
        let l = LlmConfig::read(&s);
        assert_eq!(l.api_key.expose(), "sk-very-secret");
        let shown = format!("{l:?}");
        assert!(
            !shown.contains("sk-very-secret") && shown.contains("Secret(****)"),
            "{shown}"
        );
    }

    #[test]
    fn every_embedder_word_of_the_table_parses_to_its_kind() {
        let kinds: Vec<_> = EMBEDDERS.iter().map(|w| EmbedderKind::parse(w)).collect();
        assert_eq!(
            kinds,
            [
                EmbedderKind::Auto,
                EmbedderKind::Onnx,
                EmbedderKind::Remote,
                EmbedderKind::Tfidf
            ]
        );
        assert_eq!(serde_json::to_value(EmbedderKind::Tfidf).unwrap(), json!(EMBEDDERS[3]));
    }
}
