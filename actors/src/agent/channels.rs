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

/// The registered output channels.
#[derive(Debug, Clone, Default)]
pub struct Channels {
    list: Vec<Channel>,
}

impl Channels {
    /// The channels built into the daemon: the HTTP API and the WebUI (both synchronous).
    pub fn builtin() -> Self {
        Self {
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

    pub fn get(&self, name: &str) -> Option<&Channel> {
        self.list.iter().find(|c| c.name == name)
    }

    pub fn all(&self) -> &[Channel] {
        &self.list
    }

    /// `output_send__<ch>` and `output_send__<ch>_help` for every channel.
    pub fn tools(&self) -> Vec<ToolDef> {
        let mut out = Vec::new();
        for c in &self.list {
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
        self.list.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// Checks an `output_send__<ch>` call; `Ok` carries the normalised message
    /// (`{payload, type, meta}`) to deliver, `Err` the text returned to the model.
    pub fn check_send(&self, name: &str, args: &Value) -> Result<Value, String> {
        let payload = args.get("payload").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() || payload.is_empty() {
            return Err(format!(
                "工具名称格式: {SEND_PREFIX}{{channel}}，payload 不能为空 (payload must not be empty)"
            ));
        }
        let Some(c) = self.get(name) else {
            return Err(format!(
                "Output channel `{name}` does not exist. Channels: {}.",
                self.names()
            ));
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
            return Err(format!(
                "Channel `{name}` cannot take type `{kind}` (capabilities: {}).",
                c.cap_names().join(", ")
            ));
        }
        let meta = match args.get("meta") {
            Some(Value::String(s)) if !s.trim().is_empty() => serde_json::from_str::<Value>(s)
                .map_err(|e| format!("`meta` must be a JSON object in a string: {e}"))?,
            Some(Value::Object(m)) => Value::Object(m.clone()),
            _ => json!({}),
        };
        Ok(json!({"channel": name, "payload": payload, "type": kind, "meta": meta}))
    }
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
        assert!(c.check_send("http", &json!({})).unwrap_err().contains("payload"));
        assert!(
            c.check_send("qq", &json!({"payload": "x"}))
                .unwrap_err()
                .contains("does not exist")
        );
        assert!(
            c.check_send("http", &json!({"payload": "x", "type": "voice"}))
                .unwrap_err()
                .contains("cannot take")
        );
        let ok = c
            .check_send("webui", &json!({"payload": "hi", "meta": "{\"user_id\":\"1\"}"}))
            .unwrap();
        assert_eq!(
            ok,
            json!({"channel": "webui", "payload": "hi", "type": "text", "meta": {"user_id": "1"}})
        );
        assert!(c.help("http").contains("synchronous"));
    }
}
