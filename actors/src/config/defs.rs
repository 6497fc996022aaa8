//! The table of known settings and the rules that every written value must pass.
//!
//! Three kinds of keys exist:
//! * fixed core keys, listed by [`core_defs`] with a type and a default;
//! * the `core.llm.sources.<name>.<field>` family, one group of [`SOURCE_FIELDS`] per
//!   configured LLM source (the names are chosen by the user, so they cannot be listed);
//! * plugin keys `plugin.<plugin>.<key>`, whose shape each plugin owns: any JSON value.
//!
//! [`lookup`] tells which kind a key is (and rejects unknown core keys with a suggestion);
//! [`validate`] additionally checks and normalises a value.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::duration::{format_duration, parse_duration};
use super::error::ConfigError;
use super::keys as key;

/// Prefix of the per-source LLM settings family.
pub const SOURCES_PREFIX: &str = "core.llm.sources.";
/// Prefix of plugin settings as seen from outside the store.
pub const PLUGIN_PREFIX: &str = "plugin.";
/// Prefix of the LLM section, whose writes are snapshotted first.
pub const LLM_PREFIX: &str = "core.llm.";

/// Log levels accepted by `core.daemon.log_level`, in `tracing`'s spelling.
pub const LOG_LEVELS: &[&str] = &["trace", "debug", "info", "warn", "error"];
/// Values of `core.memory.embedder`.
pub const EMBEDDERS: &[&str] = &["auto", "onnx", "remote", "tfidf"];
/// Values of `core.memory.multimodal_space.provider`.
pub const MULTIMODAL_PROVIDERS: &[&str] = &["none", "remote"];

/// What a setting's value must look like. Validation is done against this before any
/// write, so that a bad value is refused at the settings page instead of crashing the
/// component that reads it later.
#[derive(Debug, Clone, PartialEq)]
pub enum ValueKind {
    /// Any JSON string (prompts, paths, names). Not trimmed: whitespace can be meaningful.
    String,
    /// An `http://` or `https://` URL (LLM endpoints): catching a missing scheme here
    /// gives a clearer error than a failed request later.
    Url,
    /// A `host:port` listen address; an empty host (`:8080`) means all interfaces.
    SocketAddr,
    /// A JSON boolean. The strings `"true"`/`"false"` are refused so that the stored
    /// type is always the one readers expect.
    Bool,
    /// A JSON integer in `min..=max`.
    Int {
        /// Smallest accepted value.
        min: i64,
        /// Largest accepted value.
        max: i64,
    },
    /// A JSON number in `min..=max`.
    Float {
        /// Smallest accepted value.
        min: f64,
        /// Largest accepted value.
        max: f64,
    },
    /// A string with units (`30s`, `1h30m`, `2d`), see [`parse_duration`]. The lower
    /// bound exists because a zero interval would make a timer spin.
    Duration {
        /// Shortest accepted duration.
        min: Duration,
    },
    /// One of a fixed set of lower-case words; matched case-insensitively and stored in
    /// the listed spelling.
    Enum(&'static [&'static str]),
    /// Any non-null JSON value (plugin settings, whose shape the plugin owns).
    Any,
    /// A JSON object of secret names to non-empty strings (`core.security.secrets`):
    /// names as [`super::values::valid_alias`] allows, values at least
    /// [`super::values::MIN_SECRET_LEN`] bytes (shorter ones could not
    /// be masked).
    SecretMap,
}

impl ValueKind {
    /// A phrase naming the expected type, used in error messages ("expected …").
    pub fn describe(&self) -> String {
        match self {
            ValueKind::String => "a string".to_owned(),
            ValueKind::Url => "an http:// or https:// URL string".to_owned(),
            ValueKind::SocketAddr => "a \"host:port\" address string".to_owned(),
            ValueKind::Bool => "true or false (a JSON boolean, not a string)".to_owned(),
            ValueKind::Int { min, max } if *max == i64::MAX => {
                format!("an integer of at least {min} (a JSON number, not a string)")
            }
            ValueKind::Int { min, max } => {
                format!("an integer from {min} to {max} (a JSON number, not a string)")
            }
            ValueKind::Float { min, max } => format!("a number from {min} to {max}"),
            ValueKind::Duration { min } if min.is_zero() => {
                "a duration string with a unit (ns, us, ms, s, m, h, d, w)".to_owned()
            }
            ValueKind::Duration { min } => format!(
                "a duration string with a unit (ns, us, ms, s, m, h, d, w) of at least {}",
                format_duration(*min)
            ),
            ValueKind::Enum(options) => format!(
                "one of {}",
                options
                    .iter()
                    .map(|o| format!("\"{o}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ValueKind::Any => "any JSON value other than null".to_owned(),
            ValueKind::SecretMap => "an object of secret names to their values".to_owned(),
        }
    }

    /// A valid value of this kind, written as JSON, for error messages.
    pub fn example(&self) -> String {
        match self {
            ValueKind::String => "\"some text\"".to_owned(),
            ValueKind::Url => "\"https://api.example.com/v1\"".to_owned(),
            ValueKind::SocketAddr => "\"127.0.0.1:8080\"".to_owned(),
            ValueKind::Bool => "true".to_owned(),
            ValueKind::Int { min, max } => (*min).max(0).min(*max).to_string(),
            ValueKind::Float { min, max } => json!(min.max(0.0).min(*max)).to_string(),
            ValueKind::Duration { min } => {
                format!("\"{}\"", format_duration((*min).max(Duration::from_secs(30))))
            }
            ValueKind::Enum(options) => format!("\"{}\"", options.first().unwrap_or(&"")),
            ValueKind::Any => "{\"enabled\": true}".to_owned(),
            ValueKind::SecretMap => "{\"github_token\": \"ghp_…\"}".to_owned(),
        }
    }

    /// Checks `value` against this kind and returns the normalised value to store.
    ///
    /// The error is a description of what was received (and why it is wrong), meant to
    /// follow "got" in [`ConfigError::InvalidValue`].
    pub fn normalize(&self, value: &Value) -> Result<Value, String> {
        match self {
            ValueKind::String => match value {
                Value::String(_) => Ok(value.clone()),
                other => Err(describe_json(other)),
            },
            ValueKind::Url => {
                let s = expect_str(value)?;
                let t = s.trim();
                let rest = t.strip_prefix("https://").or_else(|| t.strip_prefix("http://"));
                match rest {
                    Some(host) if !host.is_empty() && !host.contains(char::is_whitespace) => {
                        Ok(Value::String(t.to_owned()))
                    }
                    _ => Err(format!("{}, which is not an http(s) URL", describe_json(value))),
                }
            }
            ValueKind::SocketAddr => {
                let s = expect_str(value)?;
                let t = s.trim();
                if is_listen_addr(t) {
                    Ok(Value::String(t.to_owned()))
                } else {
                    Err(format!("{}, which is not a host:port address", describe_json(value)))
                }
            }
            ValueKind::Bool => match value {
                Value::Bool(_) => Ok(value.clone()),
                other => Err(describe_json(other)),
            },
            ValueKind::Int { min, max } => {
                let n = as_integer(value).ok_or_else(|| describe_json(value))?;
                if n < *min || n > *max {
                    return Err(format!("{n}, which is out of range"));
                }
                Ok(json!(n))
            }
            ValueKind::Float { min, max } => {
                let n = value.as_f64().ok_or_else(|| describe_json(value))?;
                if !n.is_finite() || n < *min || n > *max {
                    return Err(format!("{n}, which is out of range"));
                }
                Ok(json!(n))
            }
            ValueKind::Duration { min } => {
                let s = expect_str(value)?;
                let d = parse_duration(s).map_err(|e| format!("\"{}\" ({e})", clip(s)))?;
                if d < *min {
                    return Err(format!(
                        "\"{}\", which is shorter than the minimum of {}",
                        clip(s),
                        format_duration(*min)
                    ));
                }
                Ok(Value::String(s.trim().to_owned()))
            }
            ValueKind::Enum(options) => {
                let s = expect_str(value)?;
                options
                    .iter()
                    .find(|o| o.eq_ignore_ascii_case(s.trim()))
                    .map(|o| Value::String((*o).to_owned()))
                    .ok_or_else(|| describe_json(value))
            }
            ValueKind::Any => match value {
                Value::Null => Err("null".to_owned()),
                other => Ok(other.clone()),
            },
            ValueKind::SecretMap => {
                use super::values::{MIN_SECRET_LEN, valid_alias};
                let Value::Object(map) = value else {
                    return Err(describe_json(value));
                };
                for (name, v) in map {
                    if !valid_alias(name) {
                        return Err(format!(
                            "the name \"{}\" (a name starts with a letter and holds only letters, digits, `_`, `-`, `.`)",
                            clip(name)
                        ));
                    }
                    match v.as_str() {
                        Some(t) if t.len() >= MIN_SECRET_LEN => {}
                        Some(_) => {
                            return Err(format!(
                                "a value for \"{name}\" shorter than {MIN_SECRET_LEN} bytes (too short to mask safely)"
                            ));
                        }
                        None => return Err(format!("a non-string value for \"{name}\"")),
                    }
                }
                Ok(value.clone())
            }
        }
    }
}

/// One known setting: its key, the rule its value must follow, and the value it has
/// until someone changes it.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingDef {
    /// Flat dotted key, e.g. `core.llm.max_tokens`.
    pub key: &'static str,
    /// The rule every written value is checked against.
    pub kind: ValueKind,
    /// Seeded when the key is absent, and returned by reads after the key was deleted.
    /// A `Value` rather than a constant because path defaults depend on the data dir.
    pub default: Value,
    /// One line for the settings page, saying what the setting changes.
    pub description: &'static str,
    /// Hide the value in listings and logs (API keys). The store keeps it in clear
    /// text; the flag is for whoever displays it.
    pub secret: bool,
}

impl SettingDef {
    fn new(key: &'static str, kind: ValueKind, default: Value, description: &'static str) -> Self {
        Self {
            key,
            kind,
            default,
            description,
            secret: false,
        }
    }

    fn secret(mut self) -> Self {
        self.secret = true;
        self
    }
}

/// One field of the `core.llm.sources.<name>.<field>` family.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceField {
    /// The `<field>` part of the key.
    pub name: &'static str,
    /// The rule every written value is checked against.
    pub kind: ValueKind,
    /// One line for the settings page.
    pub description: &'static str,
    /// Hide the value when displayed (API keys).
    pub secret: bool,
}

/// The fields every LLM source may have. Only fields that are actually written exist in
/// the store; readers apply their own fallbacks (for example the global
/// `core.llm.api_key` when a source has no key).
pub const SOURCE_FIELDS: &[SourceField] = &[
    SourceField {
        name: "base_url",
        kind: ValueKind::Url,
        description: "HTTP endpoint of the provider's API",
        secret: false,
    },
    SourceField {
        name: "model",
        kind: ValueKind::String,
        description: "Model name sent to the provider",
        secret: false,
    },
    SourceField {
        name: "api_key",
        kind: ValueKind::String,
        description: "API key for this source; empty falls back to core.llm.api_key",
        secret: true,
    },
    SourceField {
        name: "adapter",
        kind: ValueKind::String,
        description: "Name of the Lua adapter that translates requests for this vendor",
        secret: false,
    },
    SourceField {
        name: "adapter_path",
        kind: ValueKind::String,
        description: "Path of the adapter script, relative to the data directory",
        secret: false,
    },
    SourceField {
        name: "priority",
        kind: ValueKind::Int {
            min: i64::MIN,
            max: i64::MAX,
        },
        description: "Order of use in automatic fallback: larger is tried first",
        secret: false,
    },
    SourceField {
        name: "max_concurrent",
        kind: ValueKind::Int { min: 1, max: i64::MAX },
        description: "Largest number of requests in flight to this source at once",
        secret: false,
    },
    SourceField {
        name: "daily_tokens",
        kind: ValueKind::Int { min: 0, max: i64::MAX },
        description: "Most tokens this source may use in a UTC day; at the limit the next source in the order answers (0 = no limit of its own)",
        secret: false,
    },
    SourceField {
        name: "monthly_tokens",
        kind: ValueKind::Int { min: 0, max: i64::MAX },
        description: "Most tokens this source may use in a UTC calendar month; at the limit the next source in the order answers (0 = no limit of its own)",
        secret: false,
    },
    SourceField {
        name: "daily_usd",
        kind: ValueKind::Float { min: 0.0, max: 1e12 },
        description: "Most dollars this source may cost in a UTC day, priced by core.llm.prices; a call whose worst case no longer fits goes to the next source in the order (0 = no limit of its own)",
        secret: false,
    },
    SourceField {
        name: "monthly_usd",
        kind: ValueKind::Float { min: 0.0, max: 1e12 },
        description: "Most dollars this source may cost in a UTC calendar month, as daily_usd (0 = no limit of its own)",
        secret: false,
    },
    SourceField {
        name: "context_window",
        kind: ValueKind::Int { min: 0, max: i64::MAX },
        description: "Model context size in tokens; 0 means unknown",
        secret: false,
    },
    SourceField {
        name: "thinking_enabled",
        kind: ValueKind::Bool,
        description: "Ask the model for its reasoning output when it supports it",
        secret: false,
    },
    SourceField {
        name: "connect_timeout",
        kind: at_least(Duration::from_millis(100)),
        description: "Longest wait to open the connection to this source (TCP and TLS); default 10s",
        secret: false,
    },
    SourceField {
        name: "first_byte_timeout",
        kind: at_least(Duration::from_millis(100)),
        description: "Longest wait from sending a request until the response starts; default 3m, for slow reasoning models",
        secret: false,
    },
    SourceField {
        name: "idle_timeout",
        kind: at_least(Duration::from_millis(100)),
        description: "Longest silence between two pieces of a response or stream; default 2m",
        secret: false,
    },
    SourceField {
        name: "vision",
        kind: ValueKind::Bool,
        description: "The model accepts images",
        secret: false,
    },
    SourceField {
        name: "audio",
        kind: ValueKind::Bool,
        description: "The model accepts audio",
        secret: false,
    },
];

/// The built-in system prompt (`core.agent.system_prompt`).
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are HomeAgent, a personal assistant that runs on \
the user's own computer and remembers past conversations. Answer concisely and accurately. \
Use the available tools when they help, say so when you are not sure, and never invent facts \
about the user or about what a tool returned.";

/// The default owner-only tools: what touches the machine, the plugins, or changes
/// and deletes what the agent remembers.
pub const OWNER_ONLY_TOOLS: &str = "files_*, cmd_*, terminal_*, plugin_*, mcp__*, seq_*, llm_source_use, selftest, memory_*, doc_*, knowledge_*, person_*, persona_set, settings_*, spawn_child, child_result, resident_agents";

/// The default per-tool approval rules: the persona is the owner's to confirm.
pub const APPROVAL_RULES: &str = "persona_set=ask";

/// `DATA/workspace`: the default write root, the one place inside the data dir that
/// tools and confined plugins may use.
pub const WORKSPACE_DIR: &str = "workspace";

/// The words of `core.security.approval`.
pub const APPROVAL_MODES: &[&str] = &["untrusted", "always", "never"];
/// The side-effecting tools that ask the owner once a turn read untrusted content.
pub const APPROVAL_TOOLS: &str =
    "cmd_*, terminal_create, terminal_send, files_write, files_edit, plugin_install, plugin_enable, settings_set";

/// Defaults of earlier versions that a data dir stored at its first start and that
/// are replaced at the next start when still unchanged (the owner never edited them):
/// `(key, old default, why)`. The owner-only list once let a guest read the owner's
/// memory and knowledge (`knowledge_search`, `memory_recall`, `person_query`).
/// `persona_set` and the settings tools joined the owner-only list (and the persona
/// the approval rules) later.
pub const SUPERSEDED_DEFAULTS: &[(&str, &str)] = &[
    (
        "core.security.owner_only_tools",
        "files_*, cmd_*, terminal_*, plugin_*, mcp__*, seq_*, llm_source_use, selftest, memory_commit, memory_edit, memory_merge, memory_block_merge, memory_delete_entity, memory_purge, doc_commit, doc_query, knowledge_create, knowledge_delete, person_set_trait, person_relate, spawn_child, child_result, resident_agents",
    ),
    (
        "core.security.owner_only_tools",
        "files_*, cmd_*, terminal_*, plugin_*, mcp__*, seq_*, llm_source_use, selftest, memory_*, doc_*, knowledge_*, person_*, spawn_child, child_result, resident_agents",
    ),
    ("core.security.approval_rules", ""),
    (
        "core.security.approval_tools",
        "cmd_*, terminal_create, terminal_send, files_write, files_edit, plugin_install, plugin_enable",
    ),
];

/// Settings earlier versions defined and this one no longer has, deleted from a data
/// dir at start (they would otherwise be listed as values nothing reads).
/// `core.llm.model`, `.base_url` and `.adapter` described a "default source" that no
/// code read since sources became the `core.llm.sources.<name>.*` family: a person
/// who set them saw no effect, and the settings page showed the LLM in two places.
pub const RETIRED_KEYS: &[&str] = &["core.llm.model", "core.llm.base_url", "core.llm.adapter"];

fn path_default(data_dir: &Path, rel: &str) -> Value {
    let path = if rel.is_empty() {
        data_dir.to_path_buf()
    } else {
        data_dir.join(rel)
    };
    Value::String(path.to_string_lossy().into_owned())
}

const fn at_least(d: Duration) -> ValueKind {
    ValueKind::Duration { min: d }
}

const fn int(min: i64, max: i64) -> ValueKind {
    ValueKind::Int { min, max }
}

/// The core settings with their types and defaults: the one place a default is written.
/// Keys are the typed constants of [`super::keys`] (code reads them through the typed
/// groups of `super::settings`). Paths default to locations inside `data_dir`.
pub fn core_defs(data_dir: &Path) -> Vec<SettingDef> {
    use ValueKind as K;
    let ms = Duration::from_millis;
    let secs = Duration::from_secs;
    vec![
        // Daemon.
        SettingDef::new(
            key::DAEMON_DATA_DIR.name(),
            K::String,
            path_default(data_dir, ""),
            "Directory holding the daemon's databases, plugins and logs",
        ),
        SettingDef::new(
            key::DAEMON_LOG_LEVEL.name(),
            K::Enum(LOG_LEVELS),
            json!("info"),
            "Least severe log level that is recorded",
        ),
        SettingDef::new(
            key::TELEMETRY_OTLP_ENDPOINT.name(),
            K::String,
            json!(""),
            "An OpenTelemetry collector's OTLP/HTTP address (e.g. http://127.0.0.1:4318): each turn's trace (recall, model calls, tool calls) is sent there; empty = off. Plain http: reach a remote or TLS collector through a local OpenTelemetry Collector",
        ),
        SettingDef::new(
            key::DAEMON_SHUTDOWN_TIMEOUT.name(),
            at_least(ms(100)),
            json!("10s"),
            "How long a graceful shutdown may take before remaining actors are stopped",
        ),
        SettingDef::new(
            key::DAEMON_HEARTBEAT_INTERVAL.name(),
            at_least(ms(100)),
            json!("15s"),
            "How often DATA/heartbeat is rewritten (t=<unix seconds>) for outside watchdogs",
        ),
        SettingDef::new(
            key::BACKUP_INTERVAL.name(),
            at_least(secs(3600)),
            json!("1d"),
            "How often a backup of the whole data directory is taken on its own (kept in core.backup.dir)",
        ),
        SettingDef::new(
            key::BACKUP_KEEP.name(),
            int(0, 1000),
            json!(7),
            "How many scheduled backups are kept (the oldest are removed); 0 = no scheduled backups",
        ),
        SettingDef::new(
            key::BACKUP_DIR.name(),
            K::String,
            json!(""),
            "Where backups are written; empty = DATA/backups. Another disk protects against losing this one",
        ),
        SettingDef::new(
            key::DAEMON_ALLOWED_HOSTS.name(),
            K::String,
            json!(""),
            "Extra host names (comma-separated, no ports) the HTTP API answers to besides loopback names and the listen address, e.g. a reverse proxy's name",
        ),
        SettingDef::new(
            key::WEBUI_LISTEN_ADDR.name(),
            K::SocketAddr,
            json!("127.0.0.1:8080"),
            "Address the HTTP API and WebUI listen on, recorded at each start from --listen (or HOMED_LISTEN); to move the daemon, restart it with another --listen (a value written here is replaced at the next start)",
        ),
        // LLM.
        SettingDef::new(
            key::LLM_PROVIDER.name(),
            K::String,
            json!(""),
            "The LLM source asked first among those of the same priority (empty: by priority, then name)",
        ),
        SettingDef::new(
            key::LLM_BACKGROUND_SOURCE.name(),
            K::String,
            json!(""),
            "The one LLM source background work (the heartbeats' model tasks and the resident agents' rounds) uses, e.g. a cheap or local model; it never falls back to another. Empty: the usual order",
        ),
        SettingDef::new(
            key::LLM_BUDGET_DAILY_TOKENS.name(),
            int(0, i64::MAX),
            json!(0),
            "Most tokens (prompt and answer) all model calls together may use in a UTC day, checked before each call; 0 = no limit",
        ),
        SettingDef::new(
            key::LLM_BUDGET_DAILY_USD.name(),
            K::Float { min: 0.0, max: 1e12 },
            json!(0.0),
            "Most dollars all model calls may cost in a UTC day, priced by core.llm.prices; a source whose worst case no longer fits is skipped for the next (cheaper) one. 0 = no limit",
        ),
        SettingDef::new(
            key::LLM_BUDGET_MONTHLY_USD.name(),
            K::Float { min: 0.0, max: 1e12 },
            json!(0.0),
            "Most dollars all model calls may cost in a UTC calendar month, as core.llm.budget.daily_usd; 0 = no limit",
        ),
        SettingDef::new(
            key::LLM_BUDGET_MONTHLY_TOKENS.name(),
            int(0, i64::MAX),
            json!(0),
            "Most tokens (prompt and answer) all model calls together may use in a UTC calendar month, checked before each call; 0 = no limit",
        ),
        SettingDef::new(
            key::LLM_BUDGET_GUEST_DAILY_TOKENS.name(),
            int(0, i64::MAX),
            json!(0),
            "Most tokens each guest (a person on a chat bridge who is not the owner) may use in a UTC day, within the daily limit; 0 = no limit of their own",
        ),
        SettingDef::new(
            key::LLM_BUDGET_BACKGROUND_DAILY_TOKENS.name(),
            int(0, i64::MAX),
            json!(0),
            "Most tokens a UTC day the background work (the heartbeats' model tasks and the resident agents' rounds) may use, within the daily limit; 0 = no limit of its own",
        ),
        SettingDef::new(
            key::LLM_BUDGET_BACKGROUND_MONTHLY_TOKENS.name(),
            int(0, i64::MAX),
            json!(0),
            "Most tokens the background work (the heartbeats' model tasks and the resident agents' rounds) may use in a UTC calendar month, within the monthly limit; 0 = no limit of its own",
        ),
        SettingDef::new(
            key::LLM_BUDGET_BACKGROUND_DAILY_USD.name(),
            K::Float { min: 0.0, max: 1e12 },
            json!(0.0),
            "Most dollars the background work (the heartbeats' model tasks and the resident agents' rounds) may cost in a UTC day, priced by core.llm.prices; 0 = no limit of its own",
        ),
        SettingDef::new(
            key::LLM_BUDGET_BACKGROUND_MONTHLY_USD.name(),
            K::Float { min: 0.0, max: 1e12 },
            json!(0.0),
            "Most dollars the background work (the heartbeats' model tasks and the resident agents' rounds) may cost in a UTC calendar month, priced by core.llm.prices; 0 = no limit of its own",
        ),
        SettingDef::new(
            key::LLM_BUDGET_GUEST_MONTHLY_TOKENS.name(),
            int(0, i64::MAX),
            json!(0),
            "Most tokens each guest (a person on a chat bridge who is not the owner) may use in a UTC calendar month, within the monthly limit; 0 = no limit of its own",
        ),
        SettingDef::new(
            key::LLM_BUDGET_GUEST_DAILY_USD.name(),
            K::Float { min: 0.0, max: 1e12 },
            json!(0.0),
            "Most dollars each guest (a person on a chat bridge who is not the owner) may cost in a UTC day, priced by core.llm.prices; 0 = no limit of its own",
        ),
        SettingDef::new(
            key::LLM_BUDGET_GUEST_MONTHLY_USD.name(),
            K::Float { min: 0.0, max: 1e12 },
            json!(0.0),
            "Most dollars each guest (a person on a chat bridge who is not the owner) may cost in a UTC calendar month, priced by core.llm.prices; 0 = no limit of its own",
        ),
        SettingDef::new(
            key::LLM_PRICES.name(),
            K::Any,
            json!({}),
            "What each model costs, US dollars per million tokens, for the usage ledger: {\"<model or glob>\": {\"input\": 0.15, \"output\": 0.6, \"cached\": 0.075}}; a model without a price has its tokens counted and its cost shown as unknown",
        ),
        SettingDef::new(
            key::LLM_API_KEY.name(),
            K::String,
            json!(""),
            "The API key a source without its own uses",
        )
        .secret(),
        SettingDef::new(
            key::LLM_TEMPERATURE.name(),
            K::Float { min: 0.0, max: 2.0 },
            json!(0.7),
            "Sampling temperature: lower is more deterministic",
        ),
        SettingDef::new(
            key::LLM_MAX_TOKENS.name(),
            int(1, i64::from(u32::MAX)),
            json!(4096),
            "Largest number of tokens a single reply may have",
        ),
        SettingDef::new(
            key::LLM_THINKING_ENABLED.name(),
            K::Bool,
            json!(false),
            "Ask the model for its reasoning output when it supports it",
        ),
        // Locations.
        SettingDef::new(
            key::PLUGIN_DIR.name(),
            K::String,
            path_default(data_dir, "plugins"),
            "Directory scanned for installed plugins",
        ),
        SettingDef::new(
            key::MEMORY_GRAPH.name(),
            K::String,
            path_default(data_dir, "memory/graph.db"),
            "Database file of the graph memory",
        ),
        SettingDef::new(
            key::MEMORY_TEXT.name(),
            K::String,
            path_default(data_dir, "memory/text"),
            "Directory of the text (conversation) memory",
        ),
        SettingDef::new(
            key::MEMORY_DOCUMENTS.name(),
            K::String,
            path_default(data_dir, "memory/documents"),
            "Directory of the document memory",
        ),
        SettingDef::new(
            key::MEMORY_EMBEDDER.name(),
            K::Enum(EMBEDDERS),
            json!("auto"),
            "Dense embeddings for memory retrieval: auto (ONNX when installed, else TF-IDF/BM25), onnx, remote (an OpenAI-style /v1/embeddings server) or tfidf (none)",
        ),
        SettingDef::new(
            key::MEMORY_ONNX_DIR.name(),
            K::String,
            json!(""),
            "Directory filled by scripts/install-embedder.sh (ONNX Runtime + MiniLM); empty searches HOMEAGENT_EMBEDDER_DIR, DATA/models/embedder and the source checkout's .deps/embedder",
        ),
        SettingDef::new(
            key::MEMORY_ONNX_THREADS.name(),
            int(1, 64),
            json!(1),
            "Threads ONNX Runtime may use for embeddings",
        ),
        SettingDef::new(
            key::MEMORY_EMBED_URL.name(),
            K::String,
            json!(""),
            "Base URL of a remote embeddings server (OpenAI /v1/embeddings format), for core.memory.embedder = remote",
        ),
        SettingDef::new(
            key::MEMORY_EMBED_MODEL.name(),
            K::String,
            json!(""),
            "Model name sent to the remote embeddings server",
        ),
        SettingDef::new(
            key::MEMORY_EMBED_API_KEY.name(),
            K::String,
            json!(""),
            "API key for the remote embeddings server (sent as a bearer token)",
        )
        .secret(),
        // Text inputs: one message's cap, checked before anything is stored.
        SettingDef::new(
            key::TEXT_MAX_BYTES.name(),
            int(1024, 4 << 20),
            json!(super::live::DEFAULT_MAX_TEXT_BYTES),
            "Largest text accepted in one message (and one import line), in bytes of UTF-8; a bigger one is refused with a 413 naming this limit and nothing is stored",
        ),
        SettingDef::new(
            key::IMPORT_EARLIEST.name(),
            int(0, 253_402_300_799),
            json!(86_400),
            "Earliest time a history import accepts for a turn, in unix seconds (default 1970-01-02: a turn dated 0 or year 1 is a broken export, not a memory)",
        ),
        SettingDef::new(
            key::IMPORT_MAX_FUTURE.name(),
            at_least(Duration::ZERO),
            json!("5m"),
            "How far in the future a history import accepts a turn (clock skew between machines); a later one would sort after turns said live afterwards",
        ),
        // Images: input checks, the vision fallback, the media memory's own space.
        SettingDef::new(
            key::IMAGE_MAX_BYTES.name(),
            int(1024, 20 << 20),
            json!(5 << 20),
            "Largest image accepted in a message, in bytes (decoded); a bigger one is refused with a 400 and nothing is stored",
        ),
        SettingDef::new(
            key::IMAGE_MAX_COUNT.name(),
            int(1, 16),
            json!(4),
            "Most images accepted in one message",
        ),
        SettingDef::new(
            key::IMAGE_FALLBACK_PROVIDER.name(),
            K::String,
            json!(""),
            "For a source marked vision = false: the vision-capable source that describes its images first; empty takes any source with vision = true, `none` never describes (the model is told an image arrived that it cannot see)",
        ),
        SettingDef::new(
            key::MULTIMODAL_PROVIDER.name(),
            K::Enum(MULTIMODAL_PROVIDERS),
            json!("none"),
            "The multimodal space media blocks are recalled in (text and images in one space): none, or remote (a Jina-style /v1/embeddings server taking {\"image\": base64} inputs)",
        ),
        SettingDef::new(
            key::MULTIMODAL_BASE_URL.name(),
            K::String,
            json!(""),
            "Base URL of the multimodal embeddings server, for core.memory.multimodal_space.provider = remote",
        ),
        SettingDef::new(
            key::MULTIMODAL_MODEL.name(),
            K::String,
            json!(""),
            "Model name sent to the multimodal embeddings server (part of the space's fingerprint: a change re-embeds every media block)",
        ),
        SettingDef::new(
            key::MULTIMODAL_API_KEY.name(),
            K::String,
            json!(""),
            "API key for the multimodal embeddings server (sent as a bearer token)",
        )
        .secret(),
        SettingDef::new(
            key::MEDIA_RECALL_K.name(),
            int(0, 8),
            json!(2),
            "Most remembered images added to a turn's prompt (found by the input's text in the multimodal space); 0 turns media recall off",
        ),
        SettingDef::new(
            key::MEDIA_RECALL_MIN_SCORE.name(),
            K::Float { min: -1.0, max: 1.0 },
            json!(0.25),
            "Least cosine similarity between the input's text and an image for the image to be recalled",
        ),
        SettingDef::new(
            key::KNOWLEDGE_PATH.name(),
            K::String,
            path_default(data_dir, "knowledge"),
            "Directory of the knowledge base",
        ),
        SettingDef::new(
            key::LOG_PATH.name(),
            K::String,
            path_default(data_dir, "log"),
            "Directory where log files are written",
        ),
        // Security (the firewall).
        SettingDef::new(
            key::SECURITY_TOOL_ALLOW.name(),
            K::String,
            json!(""),
            "Tools the agent may call (comma-separated names or globs such as mcp__*); empty allows every tool that is not denied",
        ),
        SettingDef::new(
            key::SECURITY_TOOL_DENY.name(),
            K::String,
            json!(""),
            "Tools the agent may never call (comma-separated names or globs); deny wins over allow",
        ),
        SettingDef::new(
            key::SECURITY_READ_ROOTS.name(),
            K::String,
            json!(""),
            "Directories tools may read besides the write roots (comma-separated absolute paths)",
        ),
        SettingDef::new(
            key::SECURITY_WRITE_ROOTS.name(),
            K::String,
            path_default(data_dir, WORKSPACE_DIR),
            "Directories tools may read and write (comma-separated absolute paths); the first is the tools' working directory",
        ),
        SettingDef::new(
            key::SECURITY_NETWORK.name(),
            K::Bool,
            json!(true),
            "Whether tools may use the network",
        ),
        SettingDef::new(
            key::SECURITY_CONFINEMENT.name(),
            K::Bool,
            json!(true),
            "Confine every subprocess plugin and the commands it runs by the kernel (Landlock): only the sandbox roots, the plugin's own directories and the system's read-only directories, never the daemon's data, port or environment. Turning it off runs them with the daemon's full rights; it takes effect when plugins restart",
        ),
        SettingDef::new(
            key::SECURITY_SECRETS.name(),
            K::SecretMap,
            json!({}),
            "Secrets tools may use: the model sees only @{name}, the real value is filled in when a tool runs",
        )
        .secret(),
        SettingDef::new(
            key::SECURITY_SECRET_DESTINATIONS.name(),
            K::Any,
            json!({}),
            "Where each secret may go: {\"<name>\": {\"hosts\": [\"api.example.com\", \"*.example.com\"], \"tools\": [\"web_fetch\"], \"in_query\": false}}. A secret goes over the network only to its hosts, into a command line only for tools listed, and never for a guest",
        ),
        SettingDef::new(
            key::SECURITY_REVIEW.name(),
            K::Bool,
            json!(true),
            "Warn the model about prompt injections and sensitive data found in tool results",
        ),
        SettingDef::new(
            key::SECURITY_APPROVAL.name(),
            K::Enum(APPROVAL_MODES),
            json!("untrusted"),
            "When a risky tool call waits for your yes (WebUI, CLI /approve, POST /api/v1/approvals/<id>): untrusted = once the turn read a web page, an MCP answer, a flagged tool result or a guest's words; always; never",
        ),
        SettingDef::new(
            key::SECURITY_APPROVAL_TOOLS.name(),
            K::String,
            json!(APPROVAL_TOOLS),
            "The tools that ask first (comma-separated globs)",
        ),
        SettingDef::new(
            key::SECURITY_APPROVAL_RULES.name(),
            K::String,
            json!(APPROVAL_RULES),
            "Per-tool rules over the two above, first match wins: `glob=always|ask|never, …` (always = never asks, ask = asks every time, never = refused); e.g. `cmd_run=ask, plugin_install=never`",
        ),
        SettingDef::new(
            key::SECURITY_OWNER_ONLY_TOOLS.name(),
            K::String,
            json!(OWNER_ONLY_TOOLS),
            "Tools only the owner's inputs may call (comma-separated globs); inputs a plugin marks as a guest profile are refused them",
        ),
        // Agent.
        SettingDef::new(
            key::AGENT_TOOL_TIMEOUT.name(),
            at_least(secs(1)),
            json!("60s"),
            "How long one tool call may run before the model is told it timed out (the call is cancelled)",
        ),
        SettingDef::new(
            key::AGENT_OUTAGE_WAIT.name(),
            at_least(Duration::ZERO),
            json!("1h"),
            "How long an acknowledged (asynchronous) input waits for an LLM source while every source is failing or paused, retrying as sources come back, before it goes to the dead-letter list (0 = fail at once)",
        ),
        SettingDef::new(
            key::AGENT_MAX_TURN_TIME.name(),
            at_least(Duration::ZERO),
            json!("30m"),
            "Longest one turn may work, LLM calls and tools together (waiting out an outage not counted); checked before each LLM call (0 = no limit)",
        ),
        SettingDef::new(
            key::AGENT_TOOL_TOKENS.name(),
            int(0, 1_000_000),
            json!(1500),
            "Most tokens one request's tool schemas may take, with the list of the tools left out: the tools relevant to the input are offered, the rest are one get_plugin_tools call away (0 = offer every tool that fits the window's share)",
        ),
        SettingDef::new(
            key::AGENT_MAX_TOOL_TURNS.name(),
            int(0, 10_000),
            json!(10),
            "Most tool-call rounds in one task before it is stopped; 0 means unlimited",
        ),
        SettingDef::new(
            key::AGENT_MAX_CONTEXT_SIZE.name(),
            int(1, 100_000),
            json!(30),
            "Number of recent events kept in the model's context",
        ),
        SettingDef::new(
            key::AGENT_DISTILL_INTERVAL.name(),
            at_least(secs(1)),
            json!("30m"),
            "How often recent conversation is distilled into memory",
        ),
        SettingDef::new(
            key::AGENT_ARCHIVE_INTERVAL.name(),
            at_least(secs(1)),
            json!("60m"),
            "How often old context is archived",
        ),
        SettingDef::new(
            key::AGENT_REVIEW_INTERVAL.name(),
            at_least(secs(1)),
            json!("120m"),
            "How often stored memories are reviewed",
        ),
        SettingDef::new(
            key::AGENT_MERGE_INTERVAL.name(),
            at_least(secs(1)),
            json!("120m"),
            "How often duplicate memories are merged",
        ),
        SettingDef::new(
            key::AGENT_MAINTENANCE_DAILY_TASKS.name(),
            int(0, 100_000),
            json!(40),
            "Most memory upkeep tasks (merge and review) handed to the model per day; each is one model call, 0 means none",
        ),
        SettingDef::new(
            key::AGENT_SYSTEM_PROMPT.name(),
            K::String,
            json!(DEFAULT_SYSTEM_PROMPT),
            "Instructions given to the model at the start of every conversation",
        ),
        SettingDef::new(
            key::AGENT_PERSONAL_PROMPT.name(),
            K::String,
            json!(""),
            "Extra instructions from the user, appended to the system prompt",
        ),
        SettingDef::new(
            key::AGENT_LANGUAGE.name(),
            K::Enum(crate::i18n::Lang::CODES),
            json!("en"),
            "Language of every text the kernel writes for you or the model (prompt blocks, notices, errors, reminders, CLI replies): en or zh; applies at once",
        ),
        SettingDef::new(
            key::AGENT_MAX_RESIDENTS.name(),
            int(1, 64),
            json!(8),
            "Most resident sub-agents (resident_agents create, the triage offload) alive at once",
        ),
        SettingDef::new(
            key::AGENT_RESIDENT_MAX_TOOL_TURNS.name(),
            int(1, 100),
            json!(10),
            "Most tool-call rounds in one task of a resident sub-agent",
        ),
        SettingDef::new(
            key::AGENT_OFFLOAD_ENABLED.name(),
            K::Bool,
            json!(false),
            "Hand queued messages to a temporary triage assistant when the agent has been busy with one task for long",
        ),
        SettingDef::new(
            key::AGENT_OFFLOAD_BUSY_AFTER.name(),
            at_least(secs(1)),
            json!("5m"),
            "How long one task must have run before waiting messages are handed to the triage assistant",
        ),
        SettingDef::new(
            key::AGENT_OFFLOAD_MIN_PENDING.name(),
            int(0, 256),
            json!(3),
            "How many messages must wait before they are handed over (all or nothing; 0 means the default, 3)",
        ),
        SettingDef::new(
            key::AGENT_OFFLOAD_MAX_RESIDENTS.name(),
            int(0, 16),
            json!(2),
            "Most triage assistants at once (0 means the default, 2)",
        ),
        // Supervision.
        SettingDef::new(
            key::SUPERVISOR_MAX_RESTARTS.name(),
            int(0, 10_000),
            json!(5),
            "Restarts allowed within the restart window before the failure is escalated",
        ),
        SettingDef::new(
            key::SUPERVISOR_RESTART_WINDOW.name(),
            at_least(ms(1)),
            json!("30s"),
            "Window in which restarts are counted against max_restarts",
        ),
        SettingDef::new(
            key::SUPERVISOR_BACKOFF_INITIAL.name(),
            at_least(ms(1)),
            json!("100ms"),
            "Delay before the first restart of a failed actor",
        ),
        SettingDef::new(
            key::SUPERVISOR_BACKOFF_MAX.name(),
            at_least(ms(1)),
            json!("30s"),
            "Longest delay between restarts",
        ),
        SettingDef::new(
            key::SUPERVISOR_BACKOFF_RESET_AFTER.name(),
            at_least(ms(1)),
            json!("60s"),
            "Uptime after which an actor's restart delay starts again from backoff_initial",
        ),
        SettingDef::new(
            key::SUPERVISOR_STUCK_THRESHOLD.name(),
            at_least(ms(1)),
            json!("5s"),
            "Time in one handler after which an actor is reported as stuck",
        ),
    ]
}

/// What a key refers to, as found by [`lookup`].
#[derive(Debug, Clone, Copy)]
pub enum KeyInfo<'d, 'k> {
    /// A key with a definition (all fixed core keys and the seeded default source).
    Defined(&'d SettingDef),
    /// A field of an LLM source that has no definition of its own.
    SourceField {
        /// The `<name>` part of the key.
        source: &'k str,
        /// The field's rule.
        field: &'static SourceField,
    },
    /// A plugin setting `plugin.<plugin>.<key>`.
    Plugin {
        /// The plugin's name.
        plugin: &'k str,
        /// The key inside the plugin's namespace (may contain dots).
        key: &'k str,
    },
}

static ANY: ValueKind = ValueKind::Any;

impl KeyInfo<'_, '_> {
    /// The rule a value for this key must follow.
    pub fn kind(&self) -> &ValueKind {
        match self {
            KeyInfo::Defined(def) => &def.kind,
            KeyInfo::SourceField { field, .. } => &field.kind,
            KeyInfo::Plugin { .. } => &ANY,
        }
    }

    /// The definition's default, if the key has a definition.
    pub fn default(&self) -> Option<&Value> {
        match self {
            KeyInfo::Defined(def) => Some(&def.default),
            _ => None,
        }
    }

    /// Whether displays should hide the value.
    pub fn secret(&self) -> bool {
        match self {
            KeyInfo::Defined(def) => def.secret,
            KeyInfo::SourceField { field, .. } => field.secret,
            KeyInfo::Plugin { .. } => false,
        }
    }
}

/// `[a-z0-9_-]{1,64}`: the shape of plugin and LLM source names. Restricting it keeps
/// keys unambiguous (no dots) and table names predictable.
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// `[a-z0-9_.-]{1,128}`: the shape of a key inside a plugin's namespace.
pub fn is_valid_plugin_key(key: &str) -> bool {
    (1..=128).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-' | b'.'))
}

/// Finds what `key` refers to. Unknown core keys are refused with a suggestion; malformed
/// plugin and source keys are refused with the expected shape.
pub fn lookup<'d, 'k>(defs: &'d [SettingDef], key: &'k str) -> Result<KeyInfo<'d, 'k>, ConfigError> {
    if let Some(def) = defs.iter().find(|d| d.key == key) {
        return Ok(KeyInfo::Defined(def));
    }

    if let Some(rest) = key.strip_prefix(PLUGIN_PREFIX) {
        let Some((plugin, inner)) = rest.split_once('.') else {
            return Err(invalid_key(
                key,
                "plugin settings are named `plugin.<plugin>.<key>`, for example `plugin.webui.username`",
            ));
        };
        if !is_valid_name(plugin) {
            return Err(invalid_key(
                key,
                "plugin names use only a-z, 0-9, `_` and `-` (1 to 64 characters)",
            ));
        }
        if !is_valid_plugin_key(inner) {
            return Err(invalid_key(
                key,
                "keys inside a plugin use only a-z, 0-9, `_`, `-` and `.` (1 to 128 characters)",
            ));
        }
        return Ok(KeyInfo::Plugin { plugin, key: inner });
    }

    if let Some(rest) = key.strip_prefix(SOURCES_PREFIX) {
        let fields = || SOURCE_FIELDS.iter().map(|f| f.name).collect::<Vec<_>>().join(", ");
        let Some((source, field)) = rest.split_once('.') else {
            return Err(invalid_key(
                key,
                &format!(
                    "LLM source settings are named `core.llm.sources.<name>.<field>` with <field> one of: {}",
                    fields()
                ),
            ));
        };
        if !is_valid_name(source) {
            return Err(invalid_key(
                key,
                "LLM source names use only a-z, 0-9, `_` and `-` (1 to 64 characters)",
            ));
        }
        if let Some(f) = SOURCE_FIELDS.iter().find(|f| f.name == field) {
            return Ok(KeyInfo::SourceField { source, field: f });
        }
        let candidates = SOURCE_FIELDS.iter().map(|f| f.name);
        let hint = match closest(field, candidates) {
            Some(best) => format!(
                "did you mean `{SOURCES_PREFIX}{source}.{best}`? Fields of an LLM source: {}",
                fields()
            ),
            None => format!("fields of an LLM source: {}", fields()),
        };
        return Err(ConfigError::UnknownKey {
            key: key.to_owned(),
            hint,
        });
    }

    Err(ConfigError::UnknownKey {
        key: key.to_owned(),
        hint: unknown_key_hint(defs, key),
    })
}

/// Checks that `key` may be written and that `value` suits it, and returns the value to
/// store. `Value::Null` is accepted for every valid key: it means "delete, go back to the
/// default".
pub fn validate(defs: &[SettingDef], key: &str, value: &Value) -> Result<Value, ConfigError> {
    let info = lookup(defs, key)?;
    if value.is_null() {
        return Ok(Value::Null);
    }
    check_value(&info, key, value)
}

/// Validates `value` for an already looked-up key.
pub(crate) fn check_value(info: &KeyInfo<'_, '_>, key: &str, value: &Value) -> Result<Value, ConfigError> {
    let kind = info.kind();
    kind.normalize(value).map_err(|got| {
        let example = match info.default() {
            Some(d) if kind.normalize(d).is_ok() && d != &json!("") => d.to_string(),
            _ => kind.example(),
        };
        ConfigError::InvalidValue {
            key: key.to_owned(),
            expected: kind.describe(),
            example: clip(&example),
            got,
        }
    })
}

fn invalid_key(key: &str, reason: &str) -> ConfigError {
    ConfigError::InvalidKey {
        key: key.to_owned(),
        reason: reason.to_owned(),
    }
}

/// Builds the hint for an unknown key: the closest known key, and the contents of the
/// deepest namespace of `key` that exists.
fn unknown_key_hint(defs: &[SettingDef], key: &str) -> String {
    let suggestion = closest(key, defs.iter().map(|d| d.key));

    // Deepest existing namespace, e.g. `core.llm.` for `core.llm.modle`.
    let namespace = key
        .match_indices('.')
        .map(|(i, _)| &key[..=i])
        .rfind(|ns| defs.iter().any(|d| d.key.starts_with(*ns)));

    let listing = match namespace {
        Some(ns) => {
            let mut children: Vec<String> = Vec::new();
            // The sources family has no definitions of its own (no source is seeded).
            if ns == LLM_PREFIX {
                children.push("sources.<name>.<field>".to_owned());
            }
            for def in defs.iter().filter(|d| d.key.starts_with(ns)) {
                let rest = &def.key[ns.len()..];
                let child = match rest.split_once('.') {
                    Some((head, _)) => format!("{head}.*"),
                    None => rest.to_owned(),
                };
                if !children.contains(&child) {
                    children.push(child);
                }
            }
            children.sort();
            format!("settings under `{ns}*`: {}", children.join(", "))
        }
        None => {
            let mut namespaces: Vec<String> = Vec::new();
            for def in defs.iter().filter(|d| !d.key.starts_with(SOURCES_PREFIX)) {
                if let Some((ns, _)) = def.key.rsplit_once('.') {
                    let ns = format!("{ns}.*");
                    if !namespaces.contains(&ns) {
                        namespaces.push(ns);
                    }
                }
            }
            namespaces.sort();
            namespaces.push("core.llm.sources.<name>.<field>".to_owned());
            namespaces.push("plugin.<plugin>.<key>".to_owned());
            format!("settings live under: {}", namespaces.join(", "))
        }
    };

    match suggestion {
        Some(best) => format!("did you mean `{best}`? ({listing})"),
        None => format!("{listing}; use one of them"),
    }
}

/// The candidate closest to `input` by edit distance, if it is close enough to be a
/// plausible typo.
fn closest<'a>(input: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (input.chars().count() / 6).clamp(2, 4);
    candidates
        .map(|c| (edit_distance(input, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

fn expect_str(value: &Value) -> Result<&str, String> {
    value.as_str().ok_or_else(|| describe_json(value))
}

/// Integers arrive as JSON numbers; `10.0` is accepted as 10 because some JSON encoders
/// write every number as a float.
fn as_integer(value: &Value) -> Option<i64> {
    if let Some(n) = value.as_i64() {
        return Some(n);
    }
    let f = value.as_f64()?;
    if value.is_f64() && f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64 {
        // Exact: f is integral and within range.
        #[allow(clippy::cast_possible_truncation)]
        return Some(f as i64);
    }
    None
}

/// A listen address: `host:port`, `[v6]:port` or `:port`.
fn is_listen_addr(s: &str) -> bool {
    if s.parse::<std::net::SocketAddr>().is_ok() {
        return true;
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return false;
    };
    port.parse::<u16>().is_ok()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
}

/// How a received JSON value is described after "got" in error messages.
pub(crate) fn describe_json(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string \"{}\"", clip(s)),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// Shortens long text for error messages (prompts can be kilobytes).
fn clip(s: &str) -> String {
    const MAX: usize = 60;
    if s.chars().count() <= MAX {
        s.to_owned()
    } else {
        let head: String = s.chars().take(MAX).collect();
        format!("{head}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defs() -> Vec<SettingDef> {
        core_defs(Path::new("/data"))
    }

    #[test]
    fn every_default_passes_its_own_rule() {
        for def in defs() {
            let normalized = def
                .kind
                .normalize(&def.default)
                .unwrap_or_else(|e| panic!("default of {} is invalid: {e}", def.key));
            assert_eq!(normalized, def.default, "default of {} is not normalised", def.key);
        }
    }

    #[test]
    fn keys_are_unique_and_well_formed() {
        let defs = defs();
        for (i, d) in defs.iter().enumerate() {
            assert!(defs[i + 1..].iter().all(|o| o.key != d.key), "duplicate key {}", d.key);
            assert!(!d.key.starts_with(PLUGIN_PREFIX));
            assert!(
                d.key
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.'),
                "{}",
                d.key
            );
        }
    }

    #[test]
    fn paths_default_inside_data_dir() {
        let defs = defs();
        let get = |k: &str| defs.iter().find(|d| d.key == k).unwrap().default.clone();
        assert_eq!(get("core.daemon.data_dir"), json!("/data"));
        assert_eq!(get("core.plugin.dir"), json!("/data/plugins"));
        assert_eq!(get("core.memory.graph"), json!("/data/memory/graph.db"));
        assert_eq!(get("core.log.path"), json!("/data/log"));
    }

    #[test]
    fn unknown_core_key_suggests_closest() {
        let err = validate(&defs(), "core.llm.max_tokns", &json!("x")).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ConfigError::UnknownKey { .. }));
        assert!(msg.contains("did you mean `core.llm.max_tokens`?"), "{msg}");
        assert!(msg.contains("settings under `core.llm.*`"), "{msg}");
        assert!(msg.contains("sources.<name>.<field>"), "{msg}");

        let msg = validate(&defs(), "nothing.here", &json!(1)).unwrap_err().to_string();
        assert!(
            msg.contains("settings live under") && msg.contains("core.agent.*"),
            "{msg}"
        );
        assert!(msg.contains("plugin.<plugin>.<key>"), "{msg}");

        let msg = validate(&defs(), "core.agent.distil_interval", &json!("1m"))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("`core.agent.distill_interval`"), "{msg}");
    }

    #[test]
    fn wrong_types_name_expected_type_and_example() {
        let d = defs();
        let err = validate(&d, "core.llm.max_tokens", &json!("4096")).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ConfigError::InvalidValue { .. }));
        assert!(msg.contains("an integer") && msg.contains("4096"), "{msg}");
        assert!(msg.contains("the string \"4096\""), "{msg}");

        let msg = validate(&d, "core.llm.thinking_enabled", &json!("true"))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("JSON boolean"), "{msg}");

        let msg = validate(&d, "core.agent.distill_interval", &json!("30"))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("no unit") && msg.contains("\"30m\""), "{msg}");

        let msg = validate(&d, "core.agent.distill_interval", &json!(1800))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("duration string"), "{msg}");

        assert!(validate(&d, "core.llm.temperature", &json!(2.5)).is_err());
        assert!(validate(&d, "core.agent.max_tool_turns", &json!(-1)).is_err());
        assert!(validate(&d, "core.agent.review_interval", &json!("0s")).is_err());
        assert!(validate(&d, "core.daemon.log_level", &json!("loud")).is_err());
        assert!(validate(&d, "core.llm.sources.x.base_url", &json!("api.deepseek.com")).is_err());
        assert!(validate(&d, "webui.listen_addr", &json!("localhost")).is_err());
    }

    #[test]
    fn values_are_normalised() {
        let d = defs();
        assert_eq!(
            validate(&d, "core.daemon.log_level", &json!("DEBUG")).unwrap(),
            json!("debug")
        );
        assert_eq!(validate(&d, "core.llm.max_tokens", &json!(100.0)).unwrap(), json!(100));
        assert_eq!(
            validate(&d, "core.agent.distill_interval", &json!(" 1h30m ")).unwrap(),
            json!("1h30m")
        );
        assert_eq!(validate(&d, "core.llm.temperature", &json!(1)).unwrap(), json!(1.0));
        assert_eq!(
            validate(&d, "webui.listen_addr", &json!(":9000")).unwrap(),
            json!(":9000")
        );
        assert_eq!(
            validate(&d, "webui.listen_addr", &json!("[::1]:8080")).unwrap(),
            json!("[::1]:8080")
        );
        assert_eq!(validate(&d, "core.llm.provider", &Value::Null).unwrap(), Value::Null);
    }

    #[test]
    fn source_family() {
        let d = defs();
        assert_eq!(
            validate(&d, "core.llm.sources.local-1.max_concurrent", &json!(2)).unwrap(),
            json!(2)
        );
        assert!(validate(&d, "core.llm.sources.local-1.max_concurrent", &json!(0)).is_err());
        assert!(validate(&d, "core.llm.sources.local-1.context_window", &json!(-1)).is_err());
        // The secrets store: names an alias can carry, values long enough to mask.
        let secrets = key::SECURITY_SECRETS.name();
        assert!(validate(&d, secrets, &json!({"github": "ghp_0123456789"})).is_ok());
        assert!(validate(&d, secrets, &json!({"1bad": "ghp_0123456789"})).is_err());
        assert!(validate(&d, secrets, &json!({"short": "abc"})).is_err());
        assert!(validate(&d, secrets, &json!({"n": 12345678})).is_err());
        assert!(validate(&d, secrets, &json!("ghp_0123456789")).is_err());
        assert!(validate(&d, "core.llm.sources.local-1.priority", &json!(-3)).is_ok());
        assert!(validate(&d, "core.llm.sources.x.thinking_enabled", &json!(true)).is_ok());
        assert_eq!(
            validate(&d, "core.llm.sources.x.first_byte_timeout", &json!(" 3s ")).unwrap(),
            json!("3s")
        );
        assert!(validate(&d, "core.llm.sources.x.idle_timeout", &json!("90")).is_err());
        assert!(validate(&d, "core.llm.sources.x.connect_timeout", &json!("0s")).is_err());
        assert!(matches!(
            validate(&d, "core.llm.sources.Bad.model", &json!("m")),
            Err(ConfigError::InvalidKey { .. })
        ));
        assert!(matches!(
            validate(&d, "core.llm.sources.x", &json!("m")),
            Err(ConfigError::InvalidKey { .. })
        ));
        let long = format!("core.llm.sources.{}.model", "a".repeat(65));
        assert!(validate(&d, &long, &json!("m")).is_err());
        let msg = validate(&d, "core.llm.sources.x.modle", &json!("m"))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("did you mean `core.llm.sources.x.model`?"), "{msg}");
        // No source is seeded (a fresh daemon's first source comes from the setup):
        // every source, a first `deepseek` too, is the family's and can be removed.
        assert!(!matches!(
            lookup(&d, "core.llm.sources.deepseek.model"),
            Ok(KeyInfo::Defined(_))
        ));
    }

    #[test]
    fn plugin_keys() {
        let d = defs();
        assert!(matches!(
            lookup(&d, "plugin.webui.session.ttl"),
            Ok(KeyInfo::Plugin {
                plugin: "webui",
                key: "session.ttl"
            })
        ));
        assert_eq!(
            validate(&d, "plugin.webui.x", &json!({"a": [1, 2]})).unwrap(),
            json!({"a": [1, 2]})
        );
        assert!(matches!(
            validate(&d, "plugin.webui", &json!(1)),
            Err(ConfigError::InvalidKey { .. })
        ));
        assert!(validate(&d, "plugin.Web.x", &json!(1)).is_err());
        assert!(validate(&d, "plugin.web.X", &json!(1)).is_err());
        assert!(validate(&d, &format!("plugin.web.{}", "k".repeat(129)), &json!(1)).is_err());
    }

    /// The settings page shows each description in English and Chinese: every core
    /// setting and every source field has its Chinese in the catalog
    /// (`homeagent_i18n::describe`), keeping the English's numbers and names, and the
    /// catalog names no setting that is gone. (The bundled plugins' declared settings
    /// are checked in `tests/webui.rs`, against a daemon that declared them.)
    #[test]
    fn every_setting_has_its_chinese_description() {
        use crate::i18n::describe::{SETTINGS_ZH, SOURCE_FIELDS_ZH};
        use crate::i18n::{check_zh, setting_zh, source_field_zh};
        let defs = defs();
        let mut wrong = Vec::new();
        for d in &defs {
            match setting_zh(d.key) {
                Some(zh) => wrong.extend(check_zh(d.description, zh).err().map(|e| format!("{}: {e}", d.key))),
                None => wrong.push(format!("{}: no Chinese description", d.key)),
            }
        }
        for f in SOURCE_FIELDS {
            match source_field_zh(f.name) {
                Some(zh) => wrong.extend(check_zh(f.description, zh).err().map(|e| format!("{}: {e}", f.name))),
                None => wrong.push(format!("source field {}: no Chinese description", f.name)),
            }
        }
        for (key, _) in SETTINGS_ZH.iter().filter(|(k, _)| !k.starts_with(PLUGIN_PREFIX)) {
            if !defs.iter().any(|d| d.key == *key) {
                wrong.push(format!("{key}: in the catalog, but no such setting"));
            }
        }
        for (name, _) in SOURCE_FIELDS_ZH {
            if !SOURCE_FIELDS.iter().any(|f| f.name == *name) {
                wrong.push(format!("source field {name}: in the catalog, but no such field"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn edit_distance_basics() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
