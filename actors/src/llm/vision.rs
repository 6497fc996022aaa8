//! Images for a source that cannot see (`<source>.vision = false`): the seed's fallback.
//!
//! Before such a source gets a request with image parts, each image is replaced by a
//! text part: its description by a vision-capable source when one is configured
//! (`core.input_processing.image.fallback_provider`: a source name, empty for any
//! source with vision, `none` for never), otherwise a note from the catalog telling the
//! model that an image arrived that it cannot see. Nothing here runs for a request
//! without image parts ([`has_images`] is one type check per message).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::types::{CompletionRequest, Message};
use crate::i18n::Msg;

/// Bundled adapters whose vendor format has no image input.
const TEXT_ONLY_ADAPTERS: &[&str] = &["deepseek"];

/// Whether a source using `adapter` sees images when `<source>.vision` is unset.
pub fn adapter_sees(adapter: &str) -> bool {
    !TEXT_ONLY_ADAPTERS.contains(&adapter.trim())
}

fn is_image_part(p: &Value) -> bool {
    p.get("type").and_then(Value::as_str) == Some("image_url")
}

fn url_of(p: &Value) -> &str {
    p.pointer("/image_url/url")
        .or_else(|| p.get("image_url"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Whether any message carries an image part.
pub fn has_images(req: &CompletionRequest) -> bool {
    req.messages
        .iter()
        .any(|m| m.content.as_array().is_some_and(|a| a.iter().any(is_image_part)))
}

/// The distinct image URLs of a request, in order.
pub fn image_urls(req: &CompletionRequest) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in &req.messages {
        for p in m.content.as_array().into_iter().flatten().filter(|p| is_image_part(p)) {
            let u = url_of(p);
            if !u.is_empty() && !out.iter().any(|o| o == u) {
                out.push(u.to_owned());
            }
        }
    }
    out
}

/// The MIME type of a `data:` URL (`image` when unknown).
fn mime_of(url: &str) -> &str {
    url.strip_prefix("data:")
        .and_then(|r| r.split([';', ',']).next())
        .filter(|m| !m.is_empty())
        .unwrap_or("image")
}

/// `req` with every image part replaced by a text part: its description when
/// `descriptions` has one for its URL, else the note that it cannot be seen.
pub fn without_images(req: &CompletionRequest, descriptions: &HashMap<String, String>) -> CompletionRequest {
    let mut out = req.clone();
    for m in &mut out.messages {
        let Some(parts) = m.content.as_array_mut() else {
            continue;
        };
        for p in parts.iter_mut().filter(|p| is_image_part(p)) {
            let url = url_of(p).to_owned();
            let text = match descriptions.get(&url) {
                Some(d) => Msg::ImageDescribed { description: d.trim() }.text(),
                None => Msg::ImageNotSeen { mime: mime_of(&url) }.text(),
            };
            *p = json!({"type": "text", "text": text});
        }
    }
    out
}

/// The describe pass's request for one image (not streamed, no tools).
pub fn describe_request(url: &str, max_tokens: u32) -> CompletionRequest {
    let mut m = Message::text("user", "");
    m.content = json!([
        {"type": "text", "text": Msg::DescribeImagePrompt.text()},
        {"type": "image_url", "image_url": {"url": url}},
    ]);
    CompletionRequest {
        model: String::new(),
        messages: vec![m],
        temperature: 0.2,
        max_tokens: max_tokens.min(1024),
        stream: false,
        tools: Default::default(),
        tool_choice: None,
        disable_thinking: true,
        extra_body: Default::default(),
    }
}

/// Which source describes images, from the setting and the sources in fallback order
/// (`(name, vision)`): `none` → nobody; a name → that source if it sees; empty → the
/// first that sees.
pub fn describer<'a>(setting: &str, sources: impl IntoIterator<Item = (&'a str, bool)>) -> Option<&'a str> {
    let want = setting.trim();
    if want.eq_ignore_ascii_case("none") {
        return None;
    }
    sources
        .into_iter()
        .find(|(name, sees)| *sees && (want.is_empty() || *name == want))
        .map(|(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_image() -> CompletionRequest {
        let mut r = describe_request("data:image/png;base64,AAAA", 4096);
        r.messages.insert(0, Message::text("system", "s"));
        r
    }

    #[test]
    fn images_become_descriptions_or_the_note() {
        let r = with_image();
        assert!(has_images(&r));
        assert_eq!(image_urls(&r), vec!["data:image/png;base64,AAAA"]);
        let noted = without_images(&r, &HashMap::new());
        assert!(!has_images(&noted));
        let text = noted.messages[1].content[1]["text"].as_str().unwrap().to_owned();
        assert!(text.contains("image/png") && text.contains("cannot see"), "{text}");
        let d = HashMap::from([("data:image/png;base64,AAAA".to_owned(), "a red bike".to_owned())]);
        let described = without_images(&r, &d);
        assert!(
            described.messages[1].content[1]["text"]
                .as_str()
                .unwrap()
                .contains("a red bike")
        );
        assert!(!has_images(&CompletionRequest {
            messages: vec![Message::text("user", "hi")],
            ..r
        }));
    }

    #[test]
    fn the_describer_follows_the_setting() {
        let srcs = [("text", false), ("eyes", true), ("eyes2", true)];
        assert_eq!(describer("", srcs), Some("eyes"));
        assert_eq!(describer("eyes2", srcs), Some("eyes2"));
        assert_eq!(describer("text", srcs), None, "a named source that cannot see");
        assert_eq!(describer("none", srcs), None);
        assert!(!adapter_sees("deepseek") && adapter_sees("openai"));
    }
}
