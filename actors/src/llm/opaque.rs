//! Long message texts pass the Lua adapter as short markers.
//!
//! After the tool list (`tools_cache`), the largest part of a request is its text: the
//! system prompt with the recalled memory, the timeline, the input — tens of KB on
//! every call, decoded into Lua tables and encoded back (JSON → Lua → JSON) although no
//! bundled adapter does more with a long text than move it (into `system`, a content
//! block, a `parts` entry) or join it with its neighbours. So the adapter sees each
//! long `system` / `user` / `assistant` text as a marker, and the markers in its output
//! are replaced by the texts, JSON-escaped — valid wherever the adapter put them, also
//! inside a joined string.
//!
//! Trust is learned, not assumed: the first marked call of an adapter is also converted
//! in full, and if the two bodies differ as JSON (an adapter that cuts, searches or
//! rewrites texts) that adapter keeps the full path for good. Tool results stay real
//! (adapters parse them: Gemini sends a JSON result as an object). A marker carries a
//! per-process random nonce, so no text can forge one; a request whose text contains the
//! marker prefix is converted in full.

use serde_json::Value;

use super::types::CompletionRequest;

/// Texts shorter than this go through the adapter as they are (nothing to gain, and
/// short texts are the ones adapters test, e.g. for emptiness).
pub const MIN_LEN: usize = 512;

/// The marker prefix of this process: `@@ha-<nonce>-` (ASCII that JSON never escapes).
pub fn prefix() -> &'static str {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PREFIX.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        format!("@@ha-{:016x}-", h.finish())
    })
}

fn marker(i: usize) -> String {
    format!("{}{i}@@", prefix())
}

/// The texts taken out of a request, in marker order.
#[derive(Debug, Default)]
pub struct Taken {
    /// (message index, the text).
    texts: Vec<(usize, String)>,
}

impl Taken {
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}

/// Swaps every long text of `req` for its marker. Empty when nothing qualifies or a
/// text contains the marker prefix (then nothing is swapped).
pub fn take(req: &mut CompletionRequest) -> Taken {
    let p = prefix();
    let long = |m: &super::types::Message| {
        matches!(m.role.as_str(), "system" | "user" | "assistant")
            && m.content.as_str().is_some_and(|s| s.len() >= MIN_LEN)
    };
    if req
        .messages
        .iter()
        .any(|m| m.content.as_str().is_some_and(|s| s.contains(p)))
    {
        return Taken::default();
    }
    let mut taken = Taken::default();
    for (i, m) in req.messages.iter_mut().enumerate() {
        if long(m) {
            let n = taken.texts.len();
            let Value::String(text) = std::mem::replace(&mut m.content, Value::String(marker(n))) else {
                unreachable!("checked above")
            };
            taken.texts.push((i, text));
        }
    }
    taken
}

/// Puts the texts back into `req`.
pub fn restore(req: &mut CompletionRequest, taken: &Taken) {
    for (i, text) in &taken.texts {
        req.messages[*i].content = Value::String(text.clone());
    }
}

/// Like [`restore`], consuming the texts (no copy).
pub fn restore_owned(req: &mut CompletionRequest, taken: Taken) {
    for (i, text) in taken.texts {
        req.messages[i].content = Value::String(text);
    }
}

/// `out` (the adapter's body for the marked request) with every marker replaced by its
/// text, JSON-escaped. `None` when a marker is missing (the adapter dropped or changed a
/// text: the caller converts in full).
pub fn fill(out: &str, taken: &Taken) -> Option<String> {
    let p = prefix();
    let extra: usize = taken.texts.iter().map(|(_, t)| t.len() + t.len() / 8).sum();
    let mut body = String::with_capacity(out.len() + extra);
    let mut seen = vec![false; taken.texts.len()];
    let mut rest = out;
    while let Some(at) = rest.find(p) {
        body.push_str(&rest[..at]);
        let after = &rest[at + p.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let n: usize = after[..digits].parse().ok()?;
        let tail = after[digits..].strip_prefix("@@")?;
        let (_, text) = taken.texts.get(n)?;
        escape_into(&mut body, text);
        seen[n] = true;
        rest = tail;
    }
    body.push_str(rest);
    seen.iter().all(|s| *s).then_some(body)
}

/// Appends `text` JSON-escaped exactly as serde_json escapes a string's contents (`\"`,
/// `\\`, `\b \f \n \r \t`, other controls as `\u00xx`; everything else as it is).
/// Eight bytes are checked at a time: the texts are the prompt's kilobytes on every
/// request, and nearly all of their bytes need nothing.
pub fn escape_into(out: &mut String, text: &str) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    /// Whether any byte of `w` is below 0x20, a quote or a backslash (exact: the
    /// borrow trick can only err on which byte, never on whether one is).
    fn special(w: u64) -> bool {
        let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
        (w.wrapping_sub(ONES * 0x20) & !w & HIGH) | zero(w ^ (ONES * b'"' as u64)) | zero(w ^ (ONES * b'\\' as u64))
            != 0
    }
    let bytes = text.as_bytes();
    let (mut i, mut run) = (0, 0);
    while i < bytes.len() {
        if let Some(chunk) = bytes.get(i..i + 8)
            && !special(u64::from_le_bytes(chunk.try_into().unwrap_or_default()))
        {
            i += 8;
            continue;
        }
        let b = bytes[i];
        let esc = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0c => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..0x20 => "",
            _ => {
                i += 1;
                continue;
            }
        };
        // `run..i` holds no special byte and ends before an ASCII one: a char boundary.
        out.push_str(&text[run..i]);
        if esc.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 0xf) as usize] as char);
        } else {
            out.push_str(esc);
        }
        i += 1;
        run = i;
    }
    out.push_str(&text[run..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::Message;

    fn request(texts: &[(&str, String)]) -> CompletionRequest {
        CompletionRequest {
            model: "m".into(),
            messages: texts.iter().map(|(r, t)| Message::text(r, t.clone())).collect(),
            temperature: 0.5,
            max_tokens: 100,
            stream: true,
            tools: Default::default(),
            tool_choice: None,
            disable_thinking: false,
            extra_body: Default::default(),
        }
    }

    #[test]
    fn escaping_equals_serde_json_for_every_byte_and_position() {
        let mut texts: Vec<String> = (0u8..0x80)
            .map(|b| format!("ab{}cdefghij{}", b as char, b as char))
            .collect();
        texts.push("汉字 \"quoted\" \\ back\nline\u{7f}\u{1f}é🦀".repeat(9));
        texts.push(String::new());
        // Every special byte at every offset of a word.
        for at in 0..17 {
            for sp in ["\"", "\\", "\n", "\u{0}", "\u{1f}", "é", "\u{7f}", " "] {
                texts.push(format!("{}{sp}{}", "x".repeat(at), "y".repeat(at % 5)));
            }
        }
        for t in &texts {
            let mut out = String::new();
            escape_into(&mut out, t);
            let quoted = serde_json::to_string(t).unwrap();
            assert_eq!(out, quoted[1..quoted.len() - 1], "{t:?}");
        }
    }

    #[test]
    fn long_texts_become_markers_and_come_back_escaped_wherever_they_landed() {
        let long = format!("line one \"quoted\"\n\ttab \\ back {}", "x".repeat(600));
        let mut req = request(&[
            ("system", long.clone()),
            ("user", "short".into()),
            ("tool", long.clone()),
        ]);
        let taken = take(&mut req);
        assert_eq!(taken.texts.len(), 1, "the system text only: short and tool texts stay");
        assert_eq!(req.messages[0].content, Value::String(marker(0)));
        assert_eq!(req.messages[2].content, Value::String(long.clone()));
        // An adapter that joins the text with another one, as Anthropic's system does.
        let out = serde_json::json!({"system": format!("{}\nmore", marker(0)), "n": 1}).to_string();
        let body = fill(&out, &taken).unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["system"], Value::String(format!("{long}\nmore")));
        restore(&mut req, &taken);
        assert_eq!(req.messages[0].content, Value::String(long));
    }

    #[test]
    fn a_dropped_marker_or_a_forged_prefix_means_the_full_path() {
        let long = "y".repeat(700);
        let mut req = request(&[("user", long.clone()), ("assistant", long.clone())]);
        let taken = take(&mut req);
        assert_eq!(taken.texts.len(), 2);
        let only_first = serde_json::json!({"a": marker(0)}).to_string();
        assert!(fill(&only_first, &taken).is_none(), "marker 1 missing");
        let mut forged = request(&[("user", format!("{}0@@ {long}", prefix()))]);
        assert!(take(&mut forged).is_empty(), "a text holding the prefix is not marked");
    }
}
