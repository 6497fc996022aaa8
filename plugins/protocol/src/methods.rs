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
