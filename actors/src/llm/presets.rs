//! Provider presets: what a person picks from when they connect their first model
//! (the WebUI's setup card, `GET /api/v1/llm/presets`). One per bundled adapter, with
//! the base URL the adapter's endpoint is appended to and a few models to start with
//! (a suggestion list: any model name the vendor knows is accepted).
//!
//! Plain data; the local Ollama's models are found by the HTTP layer at request time
//! (`GET http://127.0.0.1:11434/api/tags`), never guessed here.

use serde::Serialize;

/// One provider a person can connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Preset {
    /// The source name it is saved under, and the bundled adapter it uses.
    pub adapter: &'static str,
    /// The vendor's name, for a person.
    pub label: &'static str,
    pub base_url: &'static str,
    /// Models to suggest, the usual first.
    pub models: &'static [&'static str],
    /// Whether the vendor needs an API key (a local server does not).
    pub needs_key: bool,
    /// Where a person gets a key.
    pub key_url: &'static str,
}

/// Every preset, in the order the setup lists them.
pub const PRESETS: &[Preset] = &[
    Preset {
        adapter: "deepseek",
        label: "DeepSeek",
        base_url: "https://api.deepseek.com",
        models: &["deepseek-chat", "deepseek-reasoner"],
        needs_key: true,
        key_url: "https://platform.deepseek.com/api_keys",
    },
    Preset {
        adapter: "openai",
        label: "OpenAI",
        base_url: "https://api.openai.com/v1",
        models: &["gpt-4.1-mini", "gpt-4.1", "gpt-4o-mini", "gpt-4o"],
        needs_key: true,
        key_url: "https://platform.openai.com/api-keys",
    },
    Preset {
        adapter: "anthropic",
        label: "Anthropic",
        base_url: "https://api.anthropic.com",
        models: &["claude-sonnet-4-20250514", "claude-3-5-haiku-latest"],
        needs_key: true,
        key_url: "https://console.anthropic.com/settings/keys",
    },
    Preset {
        adapter: "gemini",
        label: "Google Gemini",
        base_url: "https://generativelanguage.googleapis.com",
        models: &["gemini-2.5-flash", "gemini-2.5-pro"],
        needs_key: true,
        key_url: "https://aistudio.google.com/apikey",
    },
    Preset {
        adapter: "mistral",
        label: "Mistral",
        base_url: "https://api.mistral.ai",
        models: &["mistral-large-latest", "mistral-small-latest"],
        needs_key: true,
        key_url: "https://console.mistral.ai/api-keys",
    },
    Preset {
        adapter: "groq",
        label: "Groq",
        base_url: "https://api.groq.com",
        models: &["llama-3.3-70b-versatile", "llama-3.1-8b-instant"],
        needs_key: true,
        key_url: "https://console.groq.com/keys",
    },
    Preset {
        adapter: "kimicode",
        label: "Moonshot Kimi",
        base_url: "https://api.moonshot.cn",
        models: &["kimi-k2"],
        needs_key: true,
        key_url: "https://platform.moonshot.cn/console/api-keys",
    },
    Preset {
        adapter: "github",
        label: "GitHub Models",
        base_url: "https://models.github.ai/inference",
        models: &["openai/gpt-4.1-mini", "openai/gpt-4o"],
        needs_key: true,
        key_url: "https://github.com/settings/tokens",
    },
    Preset {
        adapter: "ollama",
        label: "Ollama (on this machine)",
        base_url: "http://127.0.0.1:11434",
        models: &[],
        needs_key: false,
        key_url: "",
    },
];

/// The preset of `adapter`.
pub fn preset(adapter: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.adapter == adapter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_uses_a_bundled_adapter_and_an_http_url() {
        for p in PRESETS {
            assert!(
                super::super::bundled::bundled(p.adapter).is_some(),
                "{} has no bundled adapter",
                p.adapter
            );
            assert!(
                p.base_url.starts_with("https://") || p.base_url.starts_with("http://127.0.0.1"),
                "{p:?}"
            );
            assert_eq!(p.needs_key, !p.key_url.is_empty(), "{p:?}");
        }
        assert_eq!(preset("ollama").map(|p| p.needs_key), Some(false));
    }
}
