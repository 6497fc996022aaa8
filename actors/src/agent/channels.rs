//! Output channels and the tools generated for them (kernel spec §7).
//!
//! The kernel never forwards a reply to a channel by itself (the output gate):
//! synchronous callers get the final text on their reply path, and a channel receives
//! anything else only when the model calls `output_send__<channel>`.

use serde::Serialize;
use serde_json::{Value, json};

use crate::llm::{ToolDef, types::ToolFunction};

/// Capability flags of a channel.
pub mod caps {
    pub const TEXT: u8 = 1;
    pub const FILE: u8 = 2;
    pub const IMAGE: u8 = 4;
    pub const AUDIO: u8 = 8;
    pub const STRUCTURED: u8 = 16;
}

/// Prefix of the generated send tools.
pub const SEND_PREFIX: &str = "output_send__";

/// One place replies can go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Channel {
    pub name: String,
    pub description: String,
    pub caps: u8,
    /// Synchronous channels (the caller waits for the reply) need no send tool call.
    pub sync: bool,
}

impl Channel {
    pub fn cap_names(&self) -> Vec<&'static str> {
        [
            (caps::TEXT, "text"),
            (caps::FILE, "file"),
            (caps::IMAGE, "image"),
            (caps::AUDIO, "audio"),
            (caps::STRUCTURED, "structured"),
        ]
        .into_iter()
        .filter(|(bit, _)| self.caps & bit != 0)
        .map(|(_, n)| n)
        .collect()
    }
}

/// Whether a tool name is a generated output tool: `(channel, is_help)`.
pub fn parse_send_tool(name: &str) -> Option<(&str, bool)> {
    let rest = name.strip_prefix(SEND_PREFIX)?;
    match rest.strip_suffix("_help") {
        Some(ch) => Some((ch, true)),
        None => Some((rest, false)),
    }
}

/// Delivers a checked `output_send__<ch>` message (`{channel, payload, type, meta,
/// task_id, source}`) to the plugin that owns the channel; answers the tool's reply.
pub type Deliver = std::sync::Arc<dyn crate::stages::ToolHandler>;

/// A channel registered by a plugin, with its owner and delivery.
#[derive(Clone)]
struct PluginChannel {
    channel: Channel,
    plugin: String,
    deliver: Deliver,
}

/// The registered output channels. Clones share one list: a channel a plugin
/// registers is seen by every task from then on, and removed when the plugin stops.
#[derive(Clone, Default)]
pub struct Channels {
    list: Vec<Channel>,
    plugins: std::sync::Arc<parking_lot::RwLock<Vec<PluginChannel>>>,
    /// Input channels' definitions (`input.register`), longest name first.
    inputs: std::sync::Arc<parking_lot::RwLock<Vec<super::inputdef::InputDef>>>,
}

impl std::fmt::Debug for Channels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.all()).finish()
    }
}

/// Why a plugin's channel was refused.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error(
        "channel name `{0}` is invalid: use [A-Za-z0-9_-], and keep `output_send__<name>_help` within 64 characters"
    )]
    Name(String),
    #[error("an output channel `{0}` already exists (owned by {1})")]
    Duplicate(String, String),
}

impl Channels {
    /// Adds (or replaces) a plugin's input channel definition.
    pub fn register_input(&self, def: super::inputdef::InputDef) {
        let mut inputs = self.inputs.write();
        inputs.retain(|d| d.name != def.name);
        inputs.push(def);
        // The most specific channel decides (`onebot/group` before `onebot`).
        inputs.sort_by_key(|d| std::cmp::Reverse(d.name.len()));
    }

    /// The definition inputs from `source` follow, if a plugin declared one.
    pub fn input_for(&self, source: &str) -> Option<super::inputdef::InputDef> {
        self.inputs.read().iter().find(|d| d.covers(source)).cloned()
    }

    /// Adds a plugin's channel; its send tool appears in the next model call.
    pub fn register(&self, plugin: &str, channel: Channel, deliver: Deliver) -> Result<(), ChannelError> {
        let n = &channel.name;
        let valid = !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            && SEND_PREFIX.len() + n.len() + "_help".len() <= 64;
        if !valid {
            return Err(ChannelError::Name(n.clone()));
        }
        if self.list.iter().any(|c| &c.name == n) {
            return Err(ChannelError::Duplicate(n.clone(), "the kernel".into()));
        }
        let mut plugins = self.plugins.write();
        if let Some(other) = plugins.iter().find(|p| &p.channel.name == n) {
            return Err(ChannelError::Duplicate(n.clone(), format!("plugin `{}`", other.plugin)));
        }
        tracing::info!(plugin, channel = %n, "output channel registered");
        plugins.push(PluginChannel {
            channel,
            plugin: plugin.to_owned(),
            deliver,
        });
        Ok(())
    }

    /// Removes a plugin's channel by name (only its own); answers whether it existed.
    pub fn unregister(&self, plugin: &str, name: &str) -> bool {
        let mut plugins = self.plugins.write();
        let before = plugins.len();
        plugins.retain(|p| !(p.plugin == plugin && p.channel.name == name));
        before != plugins.len()
    }

    /// Removes every channel of a plugin (it stopped or crashed); answers how many.
    pub fn unregister_plugin(&self, plugin: &str) -> usize {
        self.inputs.write().retain(|d| d.plugin != plugin);
        let mut plugins = self.plugins.write();
        let before = plugins.len();
        plugins.retain(|p| p.plugin != plugin);
        before - plugins.len()
    }

    /// The delivery of a plugin's channel (`None` for the kernel's own channels).
    pub fn deliver(&self, name: &str) -> Option<Deliver> {
        self.plugins
            .read()
            .iter()
            .find(|p| p.channel.name == name)
            .map(|p| p.deliver.clone())
    }

    /// The channels built into the daemon: the HTTP API and the WebUI (both synchronous).
    pub fn builtin() -> Self {
        Self {
            plugins: Default::default(),
            inputs: Default::default(),
            list: vec![
                Channel {
                    name: "http".into(),
                    description: "replies to callers of the HTTP API (POST /api/v1/messages)".into(),
                    caps: caps::TEXT | caps::STRUCTURED,
                    sync: true,
                },
                Channel {
                    name: "cli".into(),
                    description: "the terminal client `waiter` on the daemon's Unix socket".into(),
                    caps: caps::TEXT,
                    sync: true,
                },
                Channel {
                    name: "webui".into(),
                    description: "the browser dashboard and chat".into(),
                    caps: caps::TEXT | caps::IMAGE | caps::FILE,
                    sync: true,
                },
            ],
        }
    }

    pub fn get(&self, name: &str) -> Option<Channel> {
        self.list.iter().find(|c| c.name == name).cloned().or_else(|| {
            self.plugins
                .read()
                .iter()
                .find(|p| p.channel.name == name)
                .map(|p| p.channel.clone())
        })
    }

    /// The kernel's channels, then the plugins' in registration order.
    pub fn all(&self) -> Vec<Channel> {
        let mut v = self.list.clone();
        v.extend(self.plugins.read().iter().map(|p| p.channel.clone()));
        v
    }

    /// What [`Self::tools`] is made of (names, descriptions, capabilities), as a cheap
    /// key: the turn rebuilds the tool list only when it changes.
    pub fn tools_key(&self) -> String {
        let mut key = String::new();
        for c in &self.all() {
            use std::fmt::Write as _;
            let _ = write!(key, "{}\u{1}{}\u{1}{}\u{2}", c.name, c.description, c.caps);
        }
        key
    }

    /// `output_send__<ch>` and `output_send__<ch>_help` for every channel.
    pub fn tools(&self) -> Vec<ToolDef> {
        let mut out = Vec::new();
        for c in &self.all() {
            out.push(ToolDef {
                kind: "function".into(),
                function: ToolFunction {
                    name: format!("{SEND_PREFIX}{}", c.name),
                    description: format!(
                        "Send a message to the `{}` channel ({}). Capabilities: {}. Call {SEND_PREFIX}{}_help if unsure how.",
                        c.name,
                        c.description,
                        c.cap_names().join(", "),
                        c.name
                    ),
                    parameters: json!({
                        "type": "object",
                        "properties": {
                            "payload": {"type": "string", "description": "The message body: text, or a URL/path for file and image"},
                            "meta": {"type": "string", "description": "Routing metadata as a JSON object in a string, e.g. {\"user_id\":\"42\"}"},
                            "type": {"type": "string", "description": "text (default), voice, image or file"}
                        },
                        "required": ["payload"]
                    }),
                },
            });
            out.push(ToolDef {
                kind: "function".into(),
                function: ToolFunction {
                    name: format!("{SEND_PREFIX}{}_help", c.name),
                    description: format!(
                        "How to send to the `{}` channel: parameters, types and an example.",
                        c.name
                    ),
                    parameters: json!({"type": "object", "properties": {}}),
                },
            });
        }
        out
    }

    /// The text `output_send__<ch>_help` returns.
    pub fn help(&self, name: &str) -> String {
        match self.get(name) {
            None => format!("There is no output channel `{name}`. Channels: {}.", self.names()),
            Some(c) => json!({
                "channel": c.name,
                "description": c.description,
                "capabilities": c.cap_names(),
                "synchronous": c.sync,
                "parameters": {
                    "payload": "message body (required): text, or a URL/path for file/image",
                    "meta": "JSON object as a string with routing keys such as user_id, group_id, reply_to",
                    "type": ["text", "voice", "image", "file"]
                },
                "example": {"name": format!("{SEND_PREFIX}{}", c.name), "arguments": {"payload": "Hello!", "type": "text"}},
                "note": if c.sync { "This channel is synchronous: a plain text answer already reaches the caller." } else { "Plain text answers are NOT delivered here: call the send tool." }
            })
            .to_string(),
        }
    }

    fn names(&self) -> String {
        self.all()
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Checks an `output_send__<ch>` call: the message to deliver, or why not (the
    /// refusal's text is what the model reads).
    pub fn check_send(&self, name: &str, args: &Value) -> Result<Outgoing, SendRefused> {
        let payload = args.get("payload").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() || payload.is_empty() {
            return Err(SendRefused::Arguments);
        }
        let Some(c) = self.get(name) else {
            return Err(SendRefused::NoChannel {
                name: name.to_owned(),
                channels: self.names(),
            });
        };
        let kind = args
            .get("type")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("text");
        let needed = match kind {
            "text" => Some(caps::TEXT),
            "voice" | "audio" => Some(caps::AUDIO),
            "image" => Some(caps::IMAGE),
            "file" => Some(caps::FILE),
            _ => None,
        };
        if let Some(bit) = needed
            && c.caps & bit == 0
        {
            return Err(SendRefused::CannotTake {
                name: name.to_owned(),
                kind: kind.to_owned(),
                caps: c.cap_names().join(", "),
            });
        }
        let meta = match args.get("meta") {
            Some(Value::String(s)) if !s.trim().is_empty() => {
                serde_json::from_str::<Value>(s).map_err(|e| SendRefused::Meta(e.to_string()))?
            }
            Some(Value::Object(m)) => Value::Object(m.clone()),
            _ => json!({}),
        };
        Ok(Outgoing {
            channel: name.to_owned(),
            payload: payload.to_owned(),
            kind: kind.to_owned(),
            meta,
        })
    }
}

/// A message the model sends to a channel, checked ([`Channels::check_send`]); its
/// JSON (with the task's id and source) is what the channel's plugin receives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outgoing {
    pub channel: String,
    pub payload: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The channel's own addressing (a chat id, a user id), as the model passed it.
    pub meta: Value,
}

impl Outgoing {
    /// A text for `channel`, addressed by `meta`.
    pub fn text(channel: &str, payload: String, meta: Value) -> Self {
        Self {
            channel: channel.to_owned(),
            payload,
            kind: "text".into(),
            meta,
        }
    }

    /// What the channel's plugin receives: the message with the id and the source of
    /// the task that sent it.
    pub fn to_wire(&self, task_id: u64, source: &str) -> Value {
        #[derive(Serialize)]
        struct Wire<'a> {
            #[serde(flatten)]
            msg: &'a Outgoing,
            task_id: u64,
            source: &'a str,
        }
        serde_json::to_value(Wire {
            msg: self,
            task_id,
            source,
        })
        .expect("strings, a number and a JSON value serialize")
    }
}

/// Why an `output_send__<ch>` call was refused; the text is the tool's result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendRefused {
    /// No channel named, or no `payload`.
    #[error("{}", crate::i18n::Msg::SendArgsInvalid { prefix: SEND_PREFIX }.text())]
    Arguments,
    #[error("Output channel `{name}` does not exist. Channels: {channels}.")]
    NoChannel { name: String, channels: String },
    #[error("Channel `{name}` cannot take type `{kind}` (capabilities: {caps}).")]
    CannotTake { name: String, kind: String, caps: String },
    /// `meta` was a string that is not JSON.
    #[error("`meta` must be a JSON object in a string: {0}")]
    Meta(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_generated_per_channel() {
        let c = Channels::builtin();
        let names: Vec<_> = c.tools().into_iter().map(|t| t.function.name).collect();
        assert_eq!(
            names,
            [
                "output_send__http",
                "output_send__http_help",
                "output_send__cli",
                "output_send__cli_help",
                "output_send__webui",
                "output_send__webui_help"
            ]
        );
        assert_eq!(parse_send_tool("output_send__webui_help"), Some(("webui", true)));
        assert_eq!(parse_send_tool("output_send__webui"), Some(("webui", false)));
        assert_eq!(parse_send_tool("memory_recall"), None);
    }

    #[test]
    fn send_checks() {
        let c = Channels::builtin();
        let refused = |name, args| c.check_send(name, &args).unwrap_err().to_string();
        assert!(refused("http", json!({})).contains("payload"));
        assert!(refused("qq", json!({"payload": "x"})).contains("does not exist"));
        assert!(refused("http", json!({"payload": "x", "type": "voice"})).contains("cannot take"));
        let ok = c
            .check_send("webui", &json!({"payload": "hi", "meta": "{\"user_id\":\"1\"}"}))
            .unwrap();
        assert_eq!(
            serde_json::to_value(ok).unwrap(),
            json!({"channel": "webui", "payload": "hi", "type": "text", "meta": {"user_id": "1"}})
        );
        assert!(c.help("http").contains("synchronous"));
    }
}
