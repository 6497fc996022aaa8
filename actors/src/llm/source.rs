//! LLM sources as configured in settings (`core.llm.sources.<name>.<field>`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::config::{format_duration, parse_duration};

/// Prefix of every source setting.
pub const SOURCES_PREFIX: &str = "core.llm.sources.";

/// Default of `<source>.connect_timeout`: a vendor that cannot even accept a connection
/// (TCP and TLS) in 10 s is down or unreachable, whatever the model.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of `<source>.first_byte_timeout`: the old limit of a non-streaming call, so
/// a slow reasoning model that answered before still answers (a non-streamed answer
/// starts only once the model has finished thinking).
pub const DEFAULT_FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(180);
/// Default of `<source>.idle_timeout`: reasoning models pause between stream events
/// while they think, but vendors send content or keep-alive events well within 2 min.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

fn as_duration_string<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

/// One configured vendor endpoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceConfig {
    pub name: String,
    pub base_url: String,
    pub model: String,
    #[serde(skip)]
    pub api_key: String,
    /// Bundled adapter name (`openai`, `anthropic`, ...).
    pub adapter: String,
    /// A script overriding the bundled adapter (relative to the data dir).
    pub adapter_path: String,
    /// Larger is tried first.
    pub priority: i64,
    pub max_concurrent: u32,
    /// Tokens this source may use in a UTC day and month (0 = no limit of its own).
    pub daily_tokens: u64,
    pub monthly_tokens: u64,
    /// Dollars this source may cost in a UTC day and month (0 = no limit of its own).
    pub daily_usd: f64,
    pub monthly_usd: f64,
    /// Tokens the model accepts (0 = unknown).
    pub context_window: u64,
    pub thinking_enabled: bool,
    /// Longest wait to open a connection (TCP and TLS).
    #[serde(serialize_with = "as_duration_string")]
    pub connect_timeout: Duration,
    /// Longest wait from the start of an attempt (connecting included) until the
    /// response's status line arrives.
    #[serde(serialize_with = "as_duration_string")]
    pub first_byte_timeout: Duration,
    /// Longest silence between two pieces of the response body.
    #[serde(serialize_with = "as_duration_string")]
    pub idle_timeout: Duration,
    /// The model accepts images (`<source>.vision`; unset: whether the adapter has a
    /// vision format, see [`super::vision::adapter_sees`]). A source without it gets
    /// the fallback of [`super::vision`].
    pub vision: bool,
}

/// Why a configured source is not used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

fn is_unset(s: &str) -> bool {
    let t = s.trim();
    t.is_empty() || matches!(t, "nil" | "null" | "<nil>")
}

fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', ':']).next().unwrap_or("");
    matches!(host, "127.0.0.1" | "localhost" | "[::1]") || host.starts_with("127.")
}

/// Reads every source from a settings map. A source is used when it has a base URL
/// (http/https), a model and an adapter, and an API key — unless it is on loopback
/// (a local server such as Ollama needs none). `fallback_key` is `core.llm.api_key`.
pub fn sources_from_settings(
    settings: &BTreeMap<String, Value>,
    fallback_key: &str,
) -> (Vec<SourceConfig>, Vec<Skipped>) {
    let mut fields: BTreeMap<&str, BTreeMap<&str, &Value>> = BTreeMap::new();
    for (k, v) in settings {
        if let Some(rest) = k.strip_prefix(SOURCES_PREFIX)
            && let Some((name, field)) = rest.split_once('.')
        {
            fields.entry(name).or_default().insert(field, v);
        }
    }
    let mut ok = Vec::new();
    let mut skipped = Vec::new();
    for (name, f) in fields {
        let s = |k: &str| f.get(k).and_then(|v| v.as_str()).unwrap_or("").to_owned();
        let i = |k: &str| f.get(k).and_then(|v| v.as_i64());
        // The store validated these on write; a value that still does not parse (an
        // old database, a hand-edited file) makes the source unusable, with the reason.
        let mut bad_duration = None;
        let mut d = |k: &str, default: Duration| match f.get(k).and_then(|v| v.as_str()) {
            None => default,
            Some(text) if is_unset(text) => default,
            Some(text) => parse_duration(text).unwrap_or_else(|e| {
                bad_duration.get_or_insert(format!("`{SOURCES_PREFIX}{name}.{k}`: {e}"));
                default
            }),
        };
        let connect_timeout = d("connect_timeout", DEFAULT_CONNECT_TIMEOUT);
        let first_byte_timeout = d("first_byte_timeout", DEFAULT_FIRST_BYTE_TIMEOUT);
        let idle_timeout = d("idle_timeout", DEFAULT_IDLE_TIMEOUT);
        let mut api_key = s("api_key");
        if is_unset(&api_key) {
            api_key = fallback_key.to_owned();
        }
        let src = SourceConfig {
            name: name.to_owned(),
            base_url: s("base_url"),
            model: s("model"),
            adapter: s("adapter"),
            adapter_path: s("adapter_path"),
            priority: i("priority").unwrap_or(0),
            max_concurrent: i("max_concurrent").unwrap_or(8).clamp(1, 1024) as u32,
            daily_tokens: i("daily_tokens").unwrap_or(0).max(0) as u64,
            monthly_tokens: i("monthly_tokens").unwrap_or(0).max(0) as u64,
            daily_usd: f.get("daily_usd").and_then(|v| v.as_f64()).unwrap_or(0.0).max(0.0),
            monthly_usd: f.get("monthly_usd").and_then(|v| v.as_f64()).unwrap_or(0.0).max(0.0),
            context_window: i("context_window").unwrap_or(0).max(0) as u64,
            thinking_enabled: f.get("thinking_enabled").and_then(|v| v.as_bool()).unwrap_or(false),
            vision: f
                .get("vision")
                .and_then(|v| v.as_bool())
                .unwrap_or_else(|| super::vision::adapter_sees(&s("adapter"))),
            api_key,
            connect_timeout,
            first_byte_timeout,
            idle_timeout,
        };
        let reason = if let Some(bad) = bad_duration {
            Some(bad)
        } else if is_unset(&src.base_url)
            || !(src.base_url.starts_with("http://") || src.base_url.starts_with("https://"))
        {
            Some(format!(
                "`{SOURCES_PREFIX}{name}.base_url` must be an http:// or https:// URL"
            ))
        } else if is_unset(&src.model) {
            Some(format!("`{SOURCES_PREFIX}{name}.model` is not set"))
        } else if is_unset(&src.adapter) {
            Some(format!("`{SOURCES_PREFIX}{name}.adapter` is not set (e.g. \"openai\")"))
        } else if is_unset(&src.api_key) && !is_loopback(&src.base_url) {
            Some(format!(
                "no API key: set `{SOURCES_PREFIX}{name}.api_key` (or `core.llm.api_key`)"
            ))
        } else {
            None
        };
        match reason {
            Some(reason) => skipped.push(Skipped {
                name: name.to_owned(),
                reason,
            }),
            None => ok.push(src),
        }
    }
    (ok, skipped)
}

/// The message every request gets while no source is usable.
pub fn no_source_message(skipped: &[Skipped]) -> String {
    let mut msg = crate::i18n::Msg::NoLlmSource.text();
    for s in skipped {
        msg.push_str(&format!("; source `{}` skipped: {}", s.name, s.reason));
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn complete_sources_are_used_and_incomplete_ones_say_why() {
        let s = settings(&[
            ("core.llm.sources.a.base_url", json!("https://api.example.com/v1")),
            ("core.llm.sources.a.model", json!("m")),
            ("core.llm.sources.a.adapter", json!("openai")),
            ("core.llm.sources.a.api_key", json!("sk")),
            ("core.llm.sources.a.priority", json!(3)),
            ("core.llm.sources.local.base_url", json!("http://127.0.0.1:11434")),
            ("core.llm.sources.local.model", json!("llama3")),
            ("core.llm.sources.local.adapter", json!("ollama")),
            ("core.llm.sources.nokey.base_url", json!("https://api.deepseek.com")),
            ("core.llm.sources.nokey.model", json!("x")),
            ("core.llm.sources.nokey.adapter", json!("deepseek")),
            ("core.llm.sources.bad.base_url", json!("ftp://x")),
        ]);
        let (ok, skipped) = sources_from_settings(&s, "");
        let names: Vec<_> = ok.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "local"]);
        assert_eq!(ok[0].priority, 3);
        assert_eq!(ok[0].max_concurrent, 8);
        assert_eq!(skipped.len(), 2);
        assert!(
            skipped
                .iter()
                .any(|s| s.name == "nokey" && s.reason.contains("api_key"))
        );
        let (ok, _) = sources_from_settings(&s, "sk-global");
        assert!(
            ok.iter().any(|s| s.name == "nokey" && s.api_key == "sk-global"),
            "core.llm.api_key is the fallback"
        );
        assert!(no_source_message(&skipped).contains("core.llm.sources.<name>.base_url"));
    }

    #[test]
    fn timeouts_default_for_slow_models_and_can_be_tightened() {
        let mut s = settings(&[
            ("core.llm.sources.a.base_url", json!("http://127.0.0.1:1/v1")),
            ("core.llm.sources.a.model", json!("m")),
            ("core.llm.sources.a.adapter", json!("openai")),
        ]);
        let (ok, _) = sources_from_settings(&s, "");
        assert_eq!(
            (ok[0].connect_timeout, ok[0].first_byte_timeout, ok[0].idle_timeout),
            (
                DEFAULT_CONNECT_TIMEOUT,
                DEFAULT_FIRST_BYTE_TIMEOUT,
                DEFAULT_IDLE_TIMEOUT
            )
        );
        s.insert("core.llm.sources.a.connect_timeout".into(), json!("2s"));
        s.insert("core.llm.sources.a.first_byte_timeout".into(), json!("3s"));
        s.insert("core.llm.sources.a.idle_timeout".into(), json!("1m30s"));
        let (ok, _) = sources_from_settings(&s, "");
        assert_eq!(
            (ok[0].connect_timeout, ok[0].first_byte_timeout, ok[0].idle_timeout),
            (Duration::from_secs(2), Duration::from_secs(3), Duration::from_secs(90))
        );
        let status = serde_json::to_value(&ok[0]).unwrap();
        assert_eq!(
            (&status["first_byte_timeout"], &status["idle_timeout"]),
            (&json!("3s"), &json!("1m30s"))
        );
        s.insert("core.llm.sources.a.idle_timeout".into(), json!("ninety"));
        let (ok, skipped) = sources_from_settings(&s, "");
        assert!(ok.is_empty());
        assert!(skipped[0].reason.contains("idle_timeout"), "{skipped:?}");
    }
}
