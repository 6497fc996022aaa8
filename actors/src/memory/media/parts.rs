//! Images in a turn's request: how they sit in the frame and when the bytes join.
//!
//! The turn's frame never holds image bytes: an attached image is an `image_url` part
//! whose URL is the placeholder `media:<block id>` next to a short text part naming
//! the block (so the model can pass it in `media_digests`). Before an LLM call the
//! task shell asks which images the input's text recalls from the multimodal space
//! ([`recall`], once per task) and the turn's core adds those that fit its reserve
//! ([`add_recalled`]); right before the call the shell swaps each placeholder for the
//! block's `data:` URL, loaded once per task ([`fill`]). A text-only turn costs one
//! check per message (is its content an array?) and no message to the media actor;
//! recall asks nothing unless some block has a vector ([`MediaHandle::can_recall`]).
//!
//! The OpenAI content-part shape is the unified one (`llm::types`); each adapter turns
//! it into its vendor's (Anthropic `image` blocks, Gemini `inlineData`, Ollama
//! `images`); a source with `vision = false` gets the fallback of `llm::vision`.

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::actor::{LoadMedia, MediaHandle, RecallMedia};
use super::store::MediaMeta;
use crate::i18n::Msg;
use crate::llm::{CompletionRequest, Message};

/// The placeholder scheme of an image part in the frame.
pub const URL_PREFIX: &str = "media:";
/// The longest a turn waits for the query's vector before going on without recall.
pub const RECALL_WAIT: Duration = Duration::from_secs(3);

/// An image an input carries, by block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaRef {
    pub id: String,
    pub mime: String,
    pub width: u32,
    pub height: u32,
}

impl From<&MediaMeta> for MediaRef {
    fn from(m: &MediaMeta) -> Self {
        Self {
            id: m.id.clone(),
            mime: m.mime.clone(),
            width: m.width,
            height: m.height,
        }
    }
}

/// What one recalled image may cost, reserved in a turn's budget before the recall has
/// run (its size is known only after): the largest of the bundled vendors' costs at
/// the default size cap (a 12-megapixel photo).
pub const IMAGE_TOKENS_MAX: usize = 6_192;

/// The tokens a `width` × `height` image costs a vendor, as an upper bound over the
/// bundled adapters' formats (the request's source is known, its fallbacks not):
/// OpenAI's high detail (fit in 2048², shortest side at most 768, 170 per 512-pixel
/// tile plus 85), Anthropic's (long side at most 1568, width × height / 750) and
/// Gemini's (258 up to 384 pixels, else 258 per 768-pixel tile). Unknown dimensions
/// (0) cost [`IMAGE_TOKENS_MAX`].
pub fn image_tokens(width: u32, height: u32) -> usize {
    if width == 0 || height == 0 {
        return IMAGE_TOKENS_MAX;
    }
    let (w, h) = (f64::from(width), f64::from(height));
    let openai = {
        let fit = (2048.0 / w.max(h)).min(1.0);
        let (w, h) = (w * fit, h * fit);
        let short = (768.0 / w.min(h)).min(1.0);
        let (w, h) = (w * short, h * short);
        85 + 170 * ((w / 512.0).ceil() * (h / 512.0).ceil()) as usize
    };
    let anthropic = {
        let fit = (1568.0 / w.max(h)).min(1.0);
        ((w * fit) * (h * fit) / 750.0).ceil() as usize
    };
    let gemini = if width <= 384 && height <= 384 {
        258
    } else {
        258 * ((w / 768.0).ceil() * (h / 768.0).ceil()) as usize
    };
    openai.max(anthropic).max(gemini)
}

/// What the input's images add to its message: each image's [`image_tokens`] and the
/// note naming it (counted as the JSON part it is sent as).
pub fn input_image_tokens(refs: &[MediaRef]) -> usize {
    refs.iter()
        .map(|r| image_tokens(r.width, r.height) + crate::llm::tokens::count(&text_part(&attached_note(r)).to_string()))
        .sum()
}

/// The room a turn keeps for recalled images: `recall_k` of the largest, but never
/// more than an eighth of the window (a small local model must still get its memory;
/// recalled images that do not fit are left out, [`add_recalled`]).
pub fn recall_reserve(recall_k: usize, window: usize) -> usize {
    (recall_k * IMAGE_TOKENS_MAX).min(window / 8)
}

/// The block id of an image part of the frame (a placeholder), if `part` is one.
pub fn placeholder_of(part: &Value) -> Option<&str> {
    part.pointer("/image_url/url")
        .and_then(Value::as_str)
        .and_then(|u| u.strip_prefix(URL_PREFIX))
}

fn image_part(id: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": format!("{URL_PREFIX}{id}")}})
}

/// The note naming an attached image (its id, for `media_digests`), sent before it.
fn attached_note(r: &MediaRef) -> String {
    Msg::ImageAttached {
        id: &r.id,
        mime: &r.mime,
        width: r.width,
        height: r.height,
    }
    .text()
}

fn text_part(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// Puts the images on the input's message of a prefix: the last message when it is
/// the `user` input, else (an interrupt's system-marked input) a `user` message of
/// their own after it — vendors take images in user messages only.
pub fn attach(msgs: &mut Vec<Message>, refs: &[MediaRef]) {
    if refs.is_empty() {
        return;
    }
    let mut parts = Vec::with_capacity(1 + 2 * refs.len());
    match msgs.last_mut() {
        Some(m) if m.role == "user" => {
            if let Some(t) = m.content.as_str().filter(|t| !t.is_empty()) {
                parts.push(text_part(t));
            }
        }
        _ => msgs.push(Message::text("user", "")),
    }
    for r in refs {
        parts.push(text_part(&attached_note(r)));
        parts.push(image_part(&r.id));
    }
    if let Some(m) = msgs.last_mut() {
        m.content = Value::Array(parts);
    }
}

/// The block ids of the placeholders in `req`, in order, without repeats.
pub fn placeholders(req: &CompletionRequest) -> Vec<String> {
    let mut out = Vec::new();
    for m in &req.messages {
        let Some(parts) = m.content.as_array() else { continue };
        for p in parts {
            if let Some(id) = placeholder_of(p)
                && !out.iter().any(|o| o == id)
            {
                out.push(id.to_owned());
            }
        }
    }
    out
}

/// A `data:` URL of some bytes.
pub fn data_url(mime: &str, data: &[u8]) -> String {
    format!(
        "data:{mime};base64,{}",
        base64::engine::general_purpose::STANDARD.encode(data)
    )
}

/// Swaps each placeholder for its data URL; a placeholder without one (the block was
/// deleted meanwhile) leaves the request, with its note.
pub fn resolve(req: &mut CompletionRequest, urls: &HashMap<String, String>) {
    for m in &mut req.messages {
        let Some(parts) = m.content.as_array_mut() else {
            continue;
        };
        parts.retain_mut(|p| {
            let Some(url) = p.pointer_mut("/image_url/url") else {
                return true;
            };
            let Some(id) = url.as_str().and_then(|u| u.strip_prefix(URL_PREFIX)) else {
                return true;
            };
            match urls.get(id) {
                Some(data) => {
                    *url = Value::String(data.clone());
                    true
                }
                None => false,
            }
        });
    }
}

/// Adds recalled images (note + placeholder) to the last user message, skipping
/// blocks the request already carries, best first while they fit `room` tokens (the
/// turn's reserve, [`recall_reserve`]).
pub fn add_recalled(req: &mut CompletionRequest, recalled: &[MediaMeta], room: usize) {
    let present = placeholders(req);
    let mut used = 0;
    let fresh: Vec<(&MediaMeta, String)> = recalled
        .iter()
        .filter(|m| !present.contains(&m.id))
        .filter_map(|m| {
            let date = crate::memory::text::dates::Day::of_ms(m.created_ms).to_string();
            let note = Msg::ImageRecalled { id: &m.id, date: &date }.text();
            let cost = image_tokens(m.width, m.height) + crate::llm::tokens::count(&text_part(&note).to_string());
            if used + cost > room {
                tracing::debug!(block = %m.id, cost, room, "recalled image left out: no room left in the budget");
                return None;
            }
            used += cost;
            Some((m, note))
        })
        .collect();
    if fresh.is_empty() {
        return;
    }
    let Some(m) = req.messages.iter_mut().rev().find(|m| m.role == "user") else {
        return;
    };
    let mut parts = match std::mem::take(&mut m.content) {
        Value::Array(a) => a,
        Value::String(s) if !s.is_empty() => vec![text_part(&s)],
        _ => Vec::new(),
    };
    for (r, note) in fresh {
        parts.push(text_part(&note));
        parts.push(image_part(&r.id));
    }
    m.content = Value::Array(parts);
}

/// What one task has fetched already (the recall, the data URLs), so the LLM calls
/// of its tool loop ask once.
#[derive(Default)]
pub struct Prepared {
    recalled: tokio::sync::OnceCell<Vec<MediaMeta>>,
    urls: parking_lot::Mutex<HashMap<String, String>>,
}

/// The images the media memory recalls for `query` (best first; none when nothing can
/// be recalled or the query is empty), asked once per task: the LLM calls of its tool
/// loop get the same answer. What of them a request carries is the turn's choice
/// ([`add_recalled`], within its reserve).
pub async fn recall(media: &MediaHandle, prep: &Prepared, query: &str) -> Vec<MediaMeta> {
    if !media.can_recall() || query.trim().is_empty() {
        return Vec::new();
    }
    let (k, min) = {
        let c = media.config.read();
        (c.recall_k, c.recall_min_score as f32)
    };
    prep.recalled
        .get_or_init(|| async {
            let ask = media.addr.send(RecallMedia {
                query: query.to_owned(),
                k,
                min_score: min,
            });
            match tokio::time::timeout(RECALL_WAIT, ask).await {
                Ok(Ok(hits)) => {
                    for (m, score) in &hits {
                        tracing::info!(block = %m.id, score, "image recalled for the turn");
                    }
                    hits.into_iter().map(|(m, _)| m).collect()
                }
                Ok(Err(e)) => {
                    tracing::debug!("media recall skipped: {e}");
                    Vec::new()
                }
                Err(_) => {
                    tracing::info!("media recall skipped: no answer within {RECALL_WAIT:?}");
                    Vec::new()
                }
            }
        })
        .await
        .clone()
}

/// Puts the bytes of every image `req` names in place of its placeholder (data URLs
/// loaded once per task). Does nothing for a request without images.
pub async fn fill(media: &MediaHandle, prep: &Prepared, req: &mut CompletionRequest) {
    let ids = placeholders(req);
    if ids.is_empty() {
        return;
    }
    let missing: Vec<String> = {
        let urls = prep.urls.lock();
        ids.iter().filter(|id| !urls.contains_key(*id)).cloned().collect()
    };
    if !missing.is_empty() {
        match media.addr.send(LoadMedia(missing)).await {
            Ok(loaded) => {
                let mut urls = prep.urls.lock();
                for (id, (mime, data)) in loaded {
                    urls.insert(id, data_url(&mime, &data));
                }
            }
            Err(e) => tracing::warn!("images left out of the request: the media store did not answer ({e})"),
        }
    }
    let urls = prep.urls.lock();
    resolve(req, &urls);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_costs_the_most_any_bundled_vendor_charges() {
        // Small: Gemini's flat 258 is the most (OpenAI 85 + 170, Anthropic 54).
        assert_eq!(image_tokens(200, 200), 258);
        // 1024²: OpenAI 85 + 170 × 4 = 765, Anthropic 1399, Gemini 4 × 258 = 1032.
        assert_eq!(image_tokens(1024, 1024), 1399);
        // A 12-megapixel photo: Gemini's 6 × 4 tiles.
        assert_eq!(image_tokens(4000, 3000), IMAGE_TOKENS_MAX);
        assert_eq!(image_tokens(0, 480), IMAGE_TOKENS_MAX);
        let part = image_part("blk_media_0123456789ab");
        assert_eq!(placeholder_of(&part), Some("blk_media_0123456789ab"));
        assert_eq!(placeholder_of(&text_part("media:x")), None);
    }

    fn req(msgs: Vec<Message>) -> CompletionRequest {
        CompletionRequest {
            model: String::new(),
            messages: msgs,
            temperature: 0.7,
            max_tokens: 10,
            stream: true,
            tools: Default::default(),
            tool_choice: None,
            disable_thinking: true,
            extra_body: Default::default(),
        }
    }

    fn r(id: &str) -> MediaRef {
        MediaRef {
            id: id.into(),
            mime: "image/png".into(),
            width: 2,
            height: 3,
        }
    }

    #[test]
    fn attached_images_become_parts_of_the_user_input_and_resolve_to_data_urls() {
        let mut msgs = vec![Message::text("system", "s"), Message::text("user", "look")];
        attach(&mut msgs, &[r("blk_media_aaaaaaaaaaaa")]);
        let msgs_before = msgs.clone();
        let parts = msgs[1].content.as_array().unwrap();
        assert_eq!(parts[0], json!({"type": "text", "text": "look"}));
        assert!(parts[1]["text"].as_str().unwrap().contains("blk_media_aaaaaaaaaaaa"));
        let mut q = req(msgs);
        assert_eq!(placeholders(&q), vec!["blk_media_aaaaaaaaaaaa"]);
        let urls = HashMap::from([("blk_media_aaaaaaaaaaaa".to_owned(), data_url("image/png", b"\x89PNG"))]);
        resolve(&mut q, &urls);
        assert_eq!(
            q.messages[1].content[2],
            json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}})
        );
        assert!(placeholders(&q).is_empty());
        // Nothing but the image's url changed: putting the placeholder back gives the
        // request as the turn's core composed it.
        let mut back = q.clone();
        for m in &mut back.messages {
            for p in m.content.as_array_mut().into_iter().flatten() {
                if let Some(url) = p.pointer_mut("/image_url/url") {
                    let id = urls
                        .iter()
                        .find(|(_, u)| **u == *url)
                        .map(|(id, _)| id.clone())
                        .unwrap();
                    *url = json!(format!("{URL_PREFIX}{id}"));
                }
            }
        }
        assert_eq!(back, req(msgs_before), "resolve changed more than the image's url");
    }

    #[test]
    fn an_interrupt_gets_its_images_in_a_user_message_of_their_own() {
        let mut msgs = vec![Message::text("system", "[Interrupt] look")];
        attach(&mut msgs, &[r("blk_media_bbbbbbbbbbbb")]);
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[1].role, "user");
        assert_eq!(msgs[1].content.as_array().unwrap().len(), 2);
    }

    #[test]
    fn a_deleted_block_leaves_the_request_and_text_only_requests_are_untouched() {
        let mut msgs = vec![Message::text("user", "x")];
        attach(&mut msgs, &[r("blk_media_cccccccccccc")]);
        let mut q = req(msgs);
        resolve(&mut q, &HashMap::new());
        assert!(
            q.messages[0]
                .content
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p["type"] == "text")
        );
        let mut plain = req(vec![Message::text("user", "hi")]);
        let before = plain.clone();
        resolve(&mut plain, &HashMap::new());
        add_recalled(&mut plain, &[], usize::MAX);
        assert_eq!(plain, before);
    }

    #[test]
    fn recalled_images_join_while_they_fit_the_reserve() {
        let meta = |id: &str, w: u32, h: u32| MediaMeta {
            id: id.into(),
            mime: "image/png".into(),
            width: w,
            height: h,
            size: 100,
            source: "webui".into(),
            created_ms: 0,
            seen_ms: 0,
            seen_count: 1,
            fingerprint: None,
            links: Vec::new(),
        };
        // An 8k window keeps 1,024 tokens: two small images, not a 12-MP photo.
        assert_eq!(recall_reserve(2, 8192), 1024);
        assert_eq!(recall_reserve(2, 200_000), 2 * IMAGE_TOKENS_MAX);
        assert_eq!(recall_reserve(0, 200_000), 0);
        let recalled = [
            meta("blk_media_aaaaaaaaaaaa", 4000, 3000),
            meta("blk_media_bbbbbbbbbbbb", 200, 200),
            meta("blk_media_cccccccccccc", 300, 300),
        ];
        let mut r = req(vec![Message::text("user", "the photo of my bike")]);
        add_recalled(&mut r, &recalled, recall_reserve(2, 8192));
        let ids = placeholders(&r);
        assert_eq!(ids, ["blk_media_bbbbbbbbbbbb", "blk_media_cccccccccccc"], "{ids:?}");
        let mut r = req(vec![Message::text("user", "the photo of my bike")]);
        add_recalled(&mut r, &recalled, 0);
        assert!(placeholders(&r).is_empty());
    }
}
