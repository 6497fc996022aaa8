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

    /// The capability a method needs, by its prefix; `None` for core methods.
    pub fn required_for(method: &str) -> Option<Capability> {
        let prefix = method.split('.').next().unwrap_or(method);
        Some(match prefix {
            "io" if method != "io.setToolBlocks" => Self::Io,
            // Declaring how its injected inputs are remembered is part of injecting.
            "input" => Self::Io,
            "memory" => Self::Memory,
            "doc" => Self::DocMemory,
            "knowledge" => Self::Knowledge,
            "textmemory" => Self::TextMemory,
            "llm" => Self::Llm,
            "social" => Self::Social,
            "events" => Self::Events,
            "plugin" if method != "plugin.init" && method != "plugin.start" && method != "plugin.stop" => {
                Self::PluginMgr
            }
            "settings" if method.contains("Core") || method == "settings.plugins" || method == "settings.dump" => {
                Self::SettingsCross
            }
            _ => return None,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_map_to_capabilities() {
        assert_eq!(Capability::required_for("memory.recall"), Some(Capability::Memory));
        assert_eq!(Capability::required_for("io.injectText"), Some(Capability::Io));
        assert_eq!(Capability::required_for("io.setToolBlocks"), None);
        assert_eq!(Capability::required_for("tool.register"), None);
        assert_eq!(Capability::required_for("settings.get"), None);
        assert_eq!(
            Capability::required_for("settings.getCore"),
            Some(Capability::SettingsCross)
        );
        for (method, cap) in [
            ("doc.insert", Some(Capability::DocMemory)),
            ("knowledge.add", Some(Capability::Knowledge)),
            ("textmemory.append", Some(Capability::TextMemory)),
            ("social.getTrait", Some(Capability::Social)),
            ("events.subscribe", Some(Capability::Events)),
            ("stage.register", None),
            ("output.register", None),
            ("input.register", Some(Capability::Io)),
        ] {
            assert_eq!(Capability::required_for(method), cap, "{method}");
        }
        let msg = Capability::denial("qq", "memory.recall", Capability::Memory);
        assert!(msg.contains("`memory` capability") && msg.contains("plugin.json"));
        let json = serde_json::to_string(&Capability::DocMemory).unwrap();
        assert_eq!(json, "\"doc_memory\"");
    }
}
