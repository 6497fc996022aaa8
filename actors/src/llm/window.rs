//! The context window of the model a turn will use (kernel spec §5.8): the source's
//! `context_window` when set, else a table of known models, else a conservative
//! default — each choice logged, so an operator sees why a budget is what it is.

use super::source::SourceConfig;

/// The window assumed when nothing is known: small enough for any current model.
pub const DEFAULT_WINDOW: usize = 8192;

/// Where a window figure came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowOrigin {
    /// `core.llm.sources.<name>.context_window`.
    Configured { source: String },
    /// The known-models table matched the source's model name.
    KnownModel { model: String },
    /// Nothing configured and the model is unknown (or there is no source).
    Default,
}

/// A model's window in tokens, with its origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub tokens: usize,
    pub origin: WindowOrigin,
}

/// Known model families by name prefix (lower case), most specific first. Figures are
/// the vendors' published input windows.
const KNOWN: &[(&str, usize)] = &[
    ("gpt-4.1", 1_000_000),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5", 16_385),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude", 200_000),
    ("gemini-1.5", 1_000_000),
    ("gemini-2", 1_000_000),
    ("gemini", 32_768),
    ("llama3", 8_192),
    ("llama-3", 8_192),
    ("qwen2.5", 32_768),
    ("qwen", 32_768),
    ("deepseek", 65_536),
    ("mistral-large", 128_000),
    ("mistral", 32_768),
    ("kimi", 128_000),
    ("moonshot", 128_000),
];

/// The window of a model by name, when the table knows it. Matches a prefix of the
/// name or of its last path segment (`meta-llama/llama3-8b` → `llama3`).
pub fn known_window(model: &str) -> Option<usize> {
    let m = model.trim().to_lowercase();
    let tail = m.rsplit('/').next().unwrap_or(&m).to_owned();
    KNOWN
        .iter()
        .find(|(p, _)| tail.starts_with(p) || m.starts_with(p))
        .map(|(_, w)| *w)
}

/// The source a turn will use first: the highest priority (ties: the name, as the
/// LLM actor orders them).
pub fn primary(sources: &[SourceConfig]) -> Option<&SourceConfig> {
    sources
        .iter()
        .min_by(|a, b| b.priority.cmp(&a.priority).then(a.name.cmp(&b.name)))
}

/// The window of `source` (none configured: the default).
pub fn window_of(source: Option<&SourceConfig>) -> Window {
    let w = match source {
        Some(s) if s.context_window > 0 => Window {
            tokens: s.context_window as usize,
            origin: WindowOrigin::Configured { source: s.name.clone() },
        },
        Some(s) => match known_window(&s.model) {
            Some(tokens) => Window {
                tokens,
                origin: WindowOrigin::KnownModel { model: s.model.clone() },
            },
            None => Window {
                tokens: DEFAULT_WINDOW,
                origin: WindowOrigin::Default,
            },
        },
        None => Window {
            tokens: DEFAULT_WINDOW,
            origin: WindowOrigin::Default,
        },
    };
    match &w.origin {
        WindowOrigin::Default => tracing::info!(
            window = w.tokens,
            model = source.map(|s| s.model.as_str()).unwrap_or(""),
            "context window unknown: assuming the conservative default; set core.llm.sources.<name>.context_window"
        ),
        origin => tracing::debug!(window = w.tokens, ?origin, "context window"),
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sources(pairs: &[(&str, &str, i64, i64)]) -> Vec<SourceConfig> {
        let mut m = std::collections::BTreeMap::new();
        for (name, model, prio, window) in pairs {
            let p = format!("core.llm.sources.{name}.");
            m.insert(format!("{p}base_url"), json!("http://127.0.0.1:1/v1"));
            m.insert(format!("{p}model"), json!(model));
            m.insert(format!("{p}adapter"), json!("openai"));
            m.insert(format!("{p}priority"), json!(prio));
            if *window > 0 {
                m.insert(format!("{p}context_window"), json!(window));
            }
        }
        super::super::source::sources_from_settings(&m, "").0
    }

    #[test]
    fn configured_then_known_then_default() {
        let s = sources(&[("a", "gpt-4o-mini", 1, 0), ("b", "mystery", 5, 4096)]);
        assert_eq!(primary(&s).unwrap().name, "b", "highest priority first");
        assert_eq!(window_of(primary(&s)).tokens, 4096);
        assert_eq!(window_of(s.iter().find(|x| x.name == "a")).tokens, 128_000);
        let u = sources(&[("c", "mystery", 0, 0)]);
        assert_eq!(window_of(primary(&u)).origin, WindowOrigin::Default);
        assert_eq!(window_of(None).tokens, DEFAULT_WINDOW);
        assert_eq!(known_window("claude-3-5-sonnet"), Some(200_000));
        assert_eq!(known_window("gpt-4.1-mini"), Some(1_000_000));
        assert_eq!(known_window("meta-llama/llama3-8b"), Some(8_192));
        assert_eq!(known_window("deepseek-chat"), Some(65_536));
        assert_eq!(known_window("gemini-2.0-flash"), Some(1_000_000));
    }
}
