//! Capabilities a plugin declares in `plugin.json` to use kernel services.

use serde::{Deserialize, Serialize};

/// A kernel service a plugin may be granted. Methods not tied to one are always allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    Io,
    Memory,
    DocMemory,
    Knowledge,
    TextMemory,
    Llm,
    Social,
    Events,
    PluginMgr,
    SettingsCross,
}

impl Capability {
    pub const ALL: [Capability; 10] = [
        Self::Io,
        Self::Memory,
        Self::DocMemory,
        Self::Knowledge,
        Self::TextMemory,
        Self::Llm,
        Self::Social,
        Self::Events,
        Self::PluginMgr,
        Self::SettingsCross,
    ];

    /// The name used in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Io => "io",
            Self::Memory => "memory",
            Self::DocMemory => "doc_memory",
            Self::Knowledge => "knowledge",
            Self::TextMemory => "text_memory",
            Self::Llm => "llm",
            Self::Social => "social",
            Self::Events => "events",
            Self::PluginMgr => "plugin_mgr",
            Self::SettingsCross => "settings_cross",
        }
    }

    /// The message a denied call gets: it names what to declare and where.
    pub fn denial(plugin: &str, method: &str, needed: Capability) -> String {
        let known: Vec<_> = Self::ALL.iter().map(|c| c.as_str()).collect();
        format!(
            "plugin `{plugin}` called `{method}`, which needs the `{}` capability; add it to \"capabilities\" in its plugin.json (known: {})",
            needed.as_str(),
            known.join(", ")
        )
    }
}

/// A call the plugin's manifest does not grant. Its text names the capability to
/// declare and where; answered to the plugin as [`crate::frame::RpcError::DENIED`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}", Capability::denial(plugin, method, *needed), other_plugin(plugin, other.as_deref()))]
pub struct Denied {
    /// The plugin that made the call.
    pub plugin: String,
    pub method: &'static str,
    pub needed: Capability,
    /// Another plugin whose settings the call touches (`settings.*Plugin`).
    pub other: Option<String>,
}

fn other_plugin(me: &str, other: Option<&str>) -> String {
    other.map_or_else(String::new, |o| {
        format!(" (it touches plugin `{o}`'s settings; `{me}`'s own settings need no capability)")
    })
}

impl From<Denied> for crate::frame::RpcError {
    fn from(d: Denied) -> Self {
        Self {
            code: Self::DENIED,
            message: d.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoded_calls_map_to_capabilities() {
        use crate::request::PluginRequest;
        use serde_json::json;
        let needs = |method: &str, params: serde_json::Value| {
            PluginRequest::from_message(method, params).unwrap().needs("lamp")
        };
        for (method, params, cap) in [
            ("memory.recall", json!({"query": "q"}), Some(Capability::Memory)),
            ("io.injectText", json!({"text": "t"}), Some(Capability::Io)),
            ("tool.register", json!({"name": "lamp_on"}), None),
            ("settings.get", json!({"key": "k"}), None),
            ("settings.getCore", json!({"key": "k"}), Some(Capability::SettingsCross)),
            ("doc.insert", json!({"content": "c"}), Some(Capability::DocMemory)),
            (
                "knowledge.add",
                json!({"name": "t", "content": "c"}),
                Some(Capability::Knowledge),
            ),
            (
                "textmemory.append",
                json!({"role": "user", "content": "c"}),
                Some(Capability::TextMemory),
            ),
            (
                "social.getTrait",
                json!({"name": "p", "trait": "t"}),
                Some(Capability::Social),
            ),
            ("events.subscribe", json!({"topics": ["x"]}), Some(Capability::Events)),
            ("stage.register", json!({"stage": "on_input"}), None),
            ("output.register", json!({"name": "lamp"}), None),
            ("input.register", json!({"name": "lamp"}), Some(Capability::Io)),
            // The params decide: its own settings are free, another plugin's are not.
            ("settings.getPlugin", json!({"plugin": "lamp", "key": "k"}), None),
            (
                "settings.getPlugin",
                json!({"plugin": "other", "key": "k"}),
                Some(Capability::SettingsCross),
            ),
            (
                "settings.listPlugin",
                json!({"plugin": "other"}),
                Some(Capability::SettingsCross),
            ),
        ] {
            assert_eq!(needs(method, params.clone()), cap, "{method} {params}");
        }
        let msg = Capability::denial("qq", "memory.recall", Capability::Memory);
        assert!(msg.contains("`memory` capability") && msg.contains("plugin.json"));
        let json = serde_json::to_string(&Capability::DocMemory).unwrap();
        assert_eq!(json, "\"doc_memory\"");
    }
}
