//! The unified (OpenAI-shaped) LLM data types every adapter maps to and from.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// A string, an array of content blocks, or `null` for a tool-calls-only message.
    #[serde(default)]
    pub content: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// For `tool` messages: the call this result answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<WireToolCall>,
}

impl Message {
    pub fn text(role: &str, text: impl Into<String>) -> Self {
        Self {
            role: role.to_owned(),
            content: Value::String(text.into()),
            reasoning_content: None,
            tool_call_id: None,
            tool_calls: Vec::new(),
        }
    }
}

/// A tool call as it travels in request history (`arguments` is a JSON string).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: WireFunction,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireFunction {
    pub name: String,
    pub arguments: String,
}

fn function_type() -> String {
    "function".to_owned()
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: ToolFunction,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolFunction {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments object.
    #[serde(default)]
    pub parameters: Value,
}

/// The tools offered to the model, shared between requests.
pub type ToolList = std::sync::Arc<Vec<ToolDef>>;

fn no_tools(t: &ToolList) -> bool {
    t.is_empty()
}

/// The unified request handed to `transform_request`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionRequest {
    pub model: String,
    pub messages: Vec<Message>,
    pub temperature: f64,
    pub max_tokens: u32,
    pub stream: bool,
    /// Shared: the same list goes to every call of every turn until a plugin changes it
    /// (see `ToolRegistry::shared_defs`), and each call copies the request.
    #[serde(default, skip_serializing_if = "no_tools")]
    pub tools: ToolList,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// Always serialised (adapters decide whether the vendor understands it).
    pub disable_thinking: bool,
    /// Vendor-specific keys merged into the top level of the body by the adapter.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra_body: serde_json::Map<String, Value>,
}

/// Token accounting of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
    /// Input tokens served from the vendor's prompt cache (part of `prompt_tokens`);
    /// 0 when the vendor does not say.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u64,
    /// What the call cost by the owner's price table, in millionths of a dollar (0:
    /// no price); set by the LLM actor, summed over a turn's calls.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cost_micros: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Field-wise merge for streams: a non-zero new value wins, zero means "not carried".
    pub fn merge(&mut self, other: &Usage) {
        for (mine, theirs) in [
            (&mut self.prompt_tokens, other.prompt_tokens),
            (&mut self.completion_tokens, other.completion_tokens),
            (&mut self.total_tokens, other.total_tokens),
            (&mut self.cached_tokens, other.cached_tokens),
        ] {
            if theirs != 0 {
                *mine = theirs;
            }
        }
        // A frame that does not carry the total (Anthropic's `message_delta` only has
        // output tokens) leaves it to be derived from the parts.
        if other.total_tokens == 0 {
            self.total_tokens = self.prompt_tokens + self.completion_tokens;
        }
    }
}

/// A decoded tool call of a response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The decoded arguments object (see [`parse_arguments`]).
    #[serde(default)]
    pub arguments: Value,
    /// The arguments exactly as the model produced them.
    #[serde(default)]
    pub raw_arguments: String,
}

/// The unified response of `transform_response` (and of an accumulated stream).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompletionResponse {
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub reasoning_content: String,
    #[serde(default)]
    pub finish_reason: String,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
}

/// A partial tool call inside a stream chunk; fragments of one call share `index`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCallFragment {
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub raw_arguments: String,
}

/// The unified stream chunk of `transform_stream_chunk`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamChunk {
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub reasoning_content: String,
    #[serde(default)]
    pub done: bool,
    #[serde(default)]
    pub finish_reason: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCallFragment>,
    #[serde(default)]
    pub usage: Option<Usage>,
}

/// Decodes a tool call's argument string: an object is used as is, another JSON value
/// becomes `{"value": v}`, invalid JSON becomes `{"raw": "<string>"}`.
pub fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => v,
        Ok(other) => serde_json::json!({ "value": other }),
        Err(_) => serde_json::json!({ "raw": raw }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_decoding_rules() {
        assert_eq!(parse_arguments(r#"{"a":1}"#), json!({"a": 1}));
        assert_eq!(parse_arguments("[1]"), json!({"value": [1]}));
        assert_eq!(parse_arguments("{oops"), json!({"raw": "{oops"}));
        assert_eq!(parse_arguments(""), json!({}));
    }

    #[test]
    fn usage_merge_keeps_carried_values() {
        let mut u = Usage {
            prompt_tokens: 10,
            ..Default::default()
        };
        u.merge(&Usage {
            completion_tokens: 5,
            ..Default::default()
        });
        assert_eq!(
            u,
            Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
                total_tokens: 15,
                cached_tokens: 0,
                cost_micros: 0,
            }
        );
        u.merge(&Usage {
            total_tokens: 20,
            ..Default::default()
        });
        assert_eq!(u.total_tokens, 20);
    }

    #[test]
    fn request_always_serialises_disable_thinking() {
        let r = CompletionRequest {
            model: "m".into(),
            messages: vec![Message::text("user", "hi")],
            temperature: 0.7,
            max_tokens: 4096,
            stream: false,
            tools: Default::default(),
            tool_choice: None,
            disable_thinking: false,
            extra_body: Default::default(),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["disable_thinking"], false);
        assert!(v.get("tools").is_none());
    }
}
