//! Method names and their parameter types.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Kernel → plugin: first request (see [`crate::handshake`]).
pub const HANDSHAKE: &str = "handshake";
/// Kernel → plugin: run one of the plugin's tools. Params [`ToolInvoke`]; result
/// [`ToolResult`].
pub const TOOL_INVOKE: &str = "tool.invoke";
/// Kernel → plugin (notification): stop now; stdin closes right after.
pub const PLUGIN_STOP: &str = "plugin.stop";

/// Plugin → kernel: offer a tool to the model. Params [`ToolRegister`].
pub const TOOL_REGISTER: &str = "tool.register";
/// Plugin → kernel: inject a queued input (capability `io`). Params [`InjectText`];
/// result `{"task_id"}`.
pub const IO_INJECT_TEXT: &str = "io.injectText";
/// Plugin → kernel: inject an interrupt (capability `io`). Params [`InjectText`] with
/// `priority`; non-built-in plugins are clamped to L3.
pub const IO_INJECT_INTERRUPT: &str = "io.injectInterrupt";

/// A tool declaration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRegister {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments.
    #[serde(default)]
    pub parameters: Value,
    /// May run in parallel with the other calls of a batch.
    #[serde(default)]
    pub parallel_safe: bool,
    /// Keep the output out of the compute layer of memory.
    #[serde(default)]
    pub no_memory: bool,
}

/// A tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInvoke {
    pub name: String,
    pub args: Value,
}

/// A tool's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub text: String,
}

/// Text to inject as input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InjectText {
    pub text: String,
    /// Defaults to the plugin's name.
    #[serde(default)]
    pub source: Option<String>,
    /// `L1`..`L4`, interrupts only.
    #[serde(default)]
    pub priority: Option<String>,
}

// ---------------------------------------------------------------------------------
// Tool lifecycle, own settings and setting-change events (needed by plugins whose
// tools change at run time, e.g. the MCP bridge).
// ---------------------------------------------------------------------------------

/// Plugin → kernel: withdraw one of the plugin's own tools. Params [`ToolUnregister`];
/// result `{"ok": true}`.
pub const TOOL_UNREGISTER: &str = "tool.unregister";
/// Kernel → plugin (notification): the kernel gave up waiting for a `tool.invoke`
/// (timeout, stopped turn). Params [`ToolCancel`]; the plugin should stop the work.
pub const TOOL_CANCEL: &str = "tool.cancel";
/// Plugin → kernel: read one of the plugin's own settings (`plugin.<name>.<key>`).
/// Params [`SettingsGet`]; result [`SettingValue`] (`value` null when unset).
pub const SETTINGS_GET: &str = "settings.get";
/// Plugin → kernel (capability `events`): start receiving the named topics as
/// notifications. Params [`EventsSubscribe`]; result `{"topics": [...]}`.
pub const EVENTS_SUBSCRIBE: &str = "events.subscribe";
/// Plugin → kernel (capability `events`): stop receiving the named topics.
pub const EVENTS_UNSUBSCRIBE: &str = "events.unsubscribe";
/// Kernel → plugin (notification, after `events.subscribe` to it): one of the plugin's
/// own settings changed. Params [`SettingValue`] with the short key.
pub const SETTINGS_CHANGED: &str = "settings.changed";
/// The topics `events.subscribe` accepts.
pub const EVENT_TOPICS: &[&str] = &[SETTINGS_CHANGED];

/// Withdraws a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUnregister {
    pub name: String,
}

/// The `id` of the abandoned `tool.invoke` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCancel {
    pub id: u64,
}

/// A setting read: `key` is the part after `plugin.<name>.` (the full name is
/// accepted too).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingsGet {
    pub key: String,
}

/// A setting's value (`null` when unset), and for `settings.changed` its short key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingValue {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub value: Value,
}

/// Topics to (un)subscribe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventsSubscribe {
    pub topics: Vec<String>,
}

/// The short key of `full` if it is one of `plugin`'s own settings: `servers` and
/// `plugin.mcp.servers` both give `servers` for plugin `mcp`.
pub fn own_setting_key<'k>(plugin: &str, full: &'k str) -> Option<&'k str> {
    let short = match full.strip_prefix("plugin.") {
        Some(rest) => rest.strip_prefix(plugin)?.strip_prefix('.')?,
        None => full,
    };
    (!short.is_empty()).then_some(short)
}

#[cfg(test)]
mod own_settings_tests {
    use super::own_setting_key;

    #[test]
    fn own_keys_only() {
        assert_eq!(own_setting_key("mcp", "servers"), Some("servers"));
        assert_eq!(own_setting_key("mcp", "plugin.mcp.servers"), Some("servers"));
        assert_eq!(own_setting_key("mcp", "plugin.mcpx.servers"), None);
        assert_eq!(own_setting_key("mcp", "plugin.other.servers"), None);
        assert_eq!(own_setting_key("mcp", "plugin.mcp."), None);
        assert_eq!(own_setting_key("mcp", ""), None);
    }
}
