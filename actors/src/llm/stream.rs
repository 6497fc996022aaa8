//! Accumulating a streamed completion (kernel spec §3.8).
//!
//! Content and reasoning are appended in arrival order; tool-call fragments are
//! grouped by the vendor's `index` (never by position in a chunk) and flushed in
//! ascending index at the end, so eight parallel calls always come out in order.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::types::{CompletionResponse, StreamChunk, ToolCall, Usage};

#[derive(Debug, Default)]
struct Bucket {
    id: String,
    name: String,
    arguments: String,
}

/// Builds a [`CompletionResponse`] from stream chunks.
#[derive(Debug)]
pub struct Accumulator {
    content: String,
    reasoning: String,
    finish_reason: String,
    usage: Usage,
    buckets: BTreeMap<u32, Bucket>,
    /// The request's output cap, quoted in the truncation guidance.
    max_tokens: u32,
}

/// What one chunk added, for `content_delta` / `reasoning_delta` events.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Delta {
    pub content: String,
    pub reasoning: String,
}

impl Accumulator {
    pub fn new(max_tokens: u32) -> Self {
        Self {
            content: String::new(),
            reasoning: String::new(),
            finish_reason: String::new(),
            usage: Usage::default(),
            buckets: BTreeMap::new(),
            max_tokens,
        }
    }

    /// True once anything (text or a tool call) has arrived.
    pub fn has_output(&self) -> bool {
        !self.content.is_empty() || !self.reasoning.is_empty() || !self.buckets.is_empty()
    }

    /// Adds one chunk; returns the text it carried.
    pub fn push(&mut self, chunk: &StreamChunk) -> Delta {
        self.content.push_str(&chunk.content);
        self.reasoning.push_str(&chunk.reasoning_content);
        for f in &chunk.tool_calls {
            let empty_name = f.name.as_deref().is_none_or(str::is_empty);
            if f.index == 0 && empty_name && f.raw_arguments.is_empty() && f.id.as_deref().is_none_or(str::is_empty) {
                continue; // an empty placeholder some vendors send
            }
            let b = self.buckets.entry(f.index).or_default();
            if let Some(id) = f.id.as_deref().filter(|s| !s.is_empty()) {
                b.id = id.to_owned();
            }
            if let Some(name) = f.name.as_deref().filter(|s| !s.is_empty()) {
                b.name = name.to_owned();
            }
            b.arguments.push_str(&f.raw_arguments);
        }
        if chunk.done && !chunk.finish_reason.is_empty() {
            if chunk.finish_reason == "length" {
                tracing::warn!(max_tokens = self.max_tokens, "model output hit the token limit");
            }
            self.finish_reason = chunk.finish_reason.clone();
        } else if !chunk.finish_reason.is_empty() {
            self.finish_reason = chunk.finish_reason.clone();
        }
        if let Some(u) = &chunk.usage {
            self.usage.merge(u);
        }
        Delta {
            content: chunk.content.clone(),
            reasoning: chunk.reasoning_content.clone(),
        }
    }

    /// Ends the stream: flushes tool calls in index order, decoding their arguments.
    pub fn finish(self) -> CompletionResponse {
        let truncated = self.finish_reason == "length";
        let max_tokens = self.max_tokens;
        let tool_calls: Vec<ToolCall> = self
            .buckets
            .into_values()
            .filter(|b| !b.name.is_empty())
            .map(|b| {
                let arguments = decode_arguments(&b.name, &b.arguments, truncated, max_tokens);
                ToolCall {
                    id: b.id,
                    name: b.name,
                    arguments,
                    raw_arguments: b.arguments,
                }
            })
            .collect();
        // Some vendors (Ollama, Gemini) end a tool-calling stream with `stop`.
        let finish_reason = if !tool_calls.is_empty() && matches!(self.finish_reason.as_str(), "" | "stop") {
            "tool_calls".to_owned()
        } else {
            self.finish_reason
        };
        CompletionResponse {
            content: self.content,
            reasoning_content: self.reasoning,
            finish_reason,
            usage: self.usage,
            tool_calls,
        }
    }
}

/// Arguments of a streamed tool call: `{}` when empty, the object when valid, the
/// narrowly repaired object when that works, else `{"__arg_error": guidance}` so the
/// tool is not run and the model learns what to fix.
pub fn decode_arguments(tool: &str, raw: &str, truncated: bool, max_tokens: u32) -> Value {
    if raw.trim().is_empty() {
        return json!({});
    }
    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(raw) {
        return v;
    }
    if let Some(fixed) = repair_durations(raw)
        && let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(&fixed)
    {
        return v;
    }
    let text = if truncated {
        crate::i18n::Msg::ToolArgsTruncated { tool, max_tokens }.text()
    } else {
        let head: String = raw.chars().take(160).collect();
        crate::i18n::Msg::ToolArgsInvalid { tool, head: &head }.text()
    };
    json!({ "__arg_error": text })
}

/// Quotes bare duration values (`: 20s,` → `: "20s",`) that sit right before `,` or
/// `}`: the one malformation models commonly produce that has an unambiguous fix.
fn repair_durations(raw: &str) -> Option<String> {
    let b = raw.as_bytes();
    let mut out = String::with_capacity(raw.len() + 8);
    let mut i = 0;
    let mut changed = false;
    while i < b.len() {
        out.push(b[i] as char);
        if b[i] == b':' {
            let mut j = i + 1;
            while j < b.len() && b[j] == b' ' {
                j += 1;
            }
            let num_start = j;
            while j < b.len() && (b[j].is_ascii_digit() || b[j] == b'.') {
                j += 1;
            }
            let unit_start = j;
            while j < b.len() && matches!(b[j], b'm' | b's' | b'h' | b'd') {
                j += 1;
            }
            let unit = &raw[unit_start..j];
            let mut k = j;
            while k < b.len() && b[k] == b' ' {
                k += 1;
            }
            let ends = k < b.len() && (b[k] == b',' || b[k] == b'}');
            if unit_start > num_start && matches!(unit, "ms" | "s" | "m" | "h" | "d") && ends {
                out.push_str(&raw[i + 1..num_start]);
                out.push('"');
                out.push_str(&raw[num_start..j]);
                out.push('"');
                changed = true;
                i = j;
                continue;
            }
        }
        i += 1;
    }
    // Non-ASCII bytes were pushed as Latin-1 chars above; only use the result when the
    // input was ASCII (JSON with CJK text is left alone rather than mangled).
    (changed && raw.is_ascii()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::ToolCallFragment;

    fn frag(index: u32, id: &str, name: &str, args: &str) -> ToolCallFragment {
        ToolCallFragment {
            index,
            id: (!id.is_empty()).then(|| id.to_owned()),
            name: (!name.is_empty()).then(|| name.to_owned()),
            raw_arguments: args.to_owned(),
        }
    }

    fn chunk(frags: Vec<ToolCallFragment>) -> StreamChunk {
        StreamChunk {
            tool_calls: frags,
            ..Default::default()
        }
    }

    #[test]
    fn fragments_group_by_index_and_flush_in_index_order() {
        // Eight parallel calls whose fragments arrive interleaved, in scrambled order.
        for round in 0..200u32 {
            let mut acc = Accumulator::new(4096);
            let mut order: Vec<u32> = (0..8).collect();
            order.rotate_left((round % 8) as usize);
            if round % 2 == 1 {
                order.reverse();
            }
            for &i in &order {
                acc.push(&chunk(vec![frag(i, &format!("call_{i}"), &format!("tool_{i}"), "")]));
            }
            for &i in &order {
                acc.push(&chunk(vec![frag(i, "", "", &format!("{{\"n\":{i}"))]));
            }
            for &i in order.iter().rev() {
                acc.push(&chunk(vec![frag(i, "", "", "}")]));
            }
            let r = acc.finish();
            let names: Vec<_> = r.tool_calls.iter().map(|c| c.name.clone()).collect();
            assert_eq!(
                names,
                (0..8).map(|i| format!("tool_{i}")).collect::<Vec<_>>(),
                "round {round}"
            );
            for (i, c) in r.tool_calls.iter().enumerate() {
                assert_eq!(c.arguments, json!({"n": i}));
                assert_eq!(c.id, format!("call_{i}"));
            }
        }
    }

    #[test]
    fn empty_placeholder_and_nameless_buckets_are_dropped() {
        let mut acc = Accumulator::new(10);
        acc.push(&chunk(vec![frag(0, "", "", "")]));
        acc.push(&chunk(vec![frag(3, "x", "", "{}")]));
        assert!(acc.finish().tool_calls.is_empty());
    }

    #[test]
    fn text_usage_and_finish_reason() {
        let mut acc = Accumulator::new(10);
        let d = acc.push(&StreamChunk {
            content: "Hel".into(),
            ..Default::default()
        });
        assert_eq!(d.content, "Hel");
        acc.push(&StreamChunk {
            content: "lo".into(),
            reasoning_content: "hmm".into(),
            ..Default::default()
        });
        acc.push(&StreamChunk {
            done: true,
            finish_reason: "stop".into(),
            usage: Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 2,
                total_tokens: 0,
                cached_tokens: 0,
                cost_micros: 0,
            }),
            ..Default::default()
        });
        let r = acc.finish();
        assert_eq!(
            (
                r.content.as_str(),
                r.reasoning_content.as_str(),
                r.finish_reason.as_str()
            ),
            ("Hello", "hmm", "stop")
        );
        assert_eq!(r.usage.total_tokens, 5);
    }

    #[test]
    fn argument_errors_distinguish_truncation_from_malformed_json() {
        let cut = decode_arguments("write", r#"{"text": "abc"#, true, 4096);
        assert!(cut["__arg_error"].as_str().unwrap().contains("max_tokens=4096"));
        let bad = decode_arguments("write", "{text: abc}", false, 4096);
        let msg = bad["__arg_error"].as_str().unwrap();
        assert!(msg.contains("valid JSON") && msg.contains("{text: abc}"), "{msg}");
        assert_eq!(decode_arguments("t", "", false, 1), json!({}));
    }

    #[test]
    fn narrow_repair_quotes_bare_durations_only() {
        assert_eq!(
            decode_arguments("timer", r#"{"after": 20s, "every": 5m}"#, false, 1),
            json!({"after": "20s", "every": "5m"})
        );
        assert_eq!(
            decode_arguments("timer", r#"{"after": 1.5h}"#, false, 1),
            json!({"after": "1.5h"})
        );
        assert!(
            decode_arguments("timer", r#"{"after": 20x}"#, false, 1)
                .get("__arg_error")
                .is_some()
        );
        assert_eq!(repair_durations(r#"{"a": "20s"}"#), None, "already quoted");
    }
}
