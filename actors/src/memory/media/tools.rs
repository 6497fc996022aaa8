//! `media_digests` on the memory tools that commit (`memory_commit`, `doc_commit`,
//! `knowledge_create`): the model names the blocks, the kernel builds the reference.
//!
//! The seed's reason: requiring the caller to write a reference format means a single
//! typo silently breaks the binding. So the model passes only digests (a block id or
//! its 12 hex digits, as shown beside the image); every digest is resolved *before*
//! the tool runs — one unknown digest refuses the call, naming it, with nothing
//! written — and after the tool succeeded the kernel links each block to what was
//! committed (`media_links`: the sentence, the document, the knowledge entry). The
//! wrapped tools themselves are unchanged. Triples with media but no sentence get one
//! (`subject relation object`): media hang off a sentence.

use std::sync::Arc;

use futures_util::FutureExt as _;
use serde_json::{Value, json};

use super::actor::{LinkDigests, MediaHandle};
use crate::i18n::Msg;
use crate::stages::{ToolFailure, ToolHandler, ToolSpec};

/// The tools that take `media_digests`, and the link kind of each.
const TOOLS: [(&str, &str); 3] = [
    ("memory_commit", "sentence"),
    ("doc_commit", "document"),
    ("knowledge_create", "knowledge"),
];

fn digests_schema() -> Value {
    json!({"type": "array", "items": {"type": "string"},
        "description": "ids of images to keep with this (blk_media_… as shown beside each image)"})
}

fn strings(v: Option<Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a.into_iter().filter_map(|x| x.as_str().map(str::to_owned)).collect(),
        Some(Value::String(s)) if !s.trim().is_empty() => vec![s],
        _ => Vec::new(),
    }
}

fn text_of(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").trim().to_owned()
}

/// Takes `media_digests` out of `args` (per triple for `memory_commit`, top level for
/// the others); returns the digests and the targets they link to.
pub fn split(tool: &str, args: &mut Value) -> (Vec<String>, Vec<String>) {
    let mut digests = Vec::new();
    let mut targets = Vec::new();
    if tool == "memory_commit" {
        // Top-level digests hang off every triple's sentence.
        let shared = strings(args.as_object_mut().and_then(|o| o.remove("media_digests")));
        digests.extend(shared.iter().cloned());
        if let Some(triples) = args.get_mut("triples").and_then(Value::as_array_mut) {
            for t in triples {
                let own = strings(t.as_object_mut().and_then(|o| o.remove("media_digests")));
                if own.is_empty() && shared.is_empty() {
                    continue;
                }
                let mut sentence = text_of(t, "sentence_text");
                if sentence.is_empty() {
                    sentence = format!(
                        "{} {} {}",
                        text_of(t, "subject"),
                        text_of(t, "relation"),
                        text_of(t, "object")
                    )
                    .trim()
                    .to_owned();
                    if let Some(o) = t.as_object_mut() {
                        o.insert("sentence_text".into(), json!(sentence));
                    }
                }
                targets.push(sentence);
                digests.extend(own);
            }
        }
    } else {
        digests = strings(args.as_object_mut().and_then(|o| o.remove("media_digests")));
        if !digests.is_empty() {
            let target = if tool == "knowledge_create" {
                text_of(args, "name")
            } else {
                crate::memory::truncate_chars(&text_of(args, "content"), 100, "…")
            };
            targets.push(target);
        }
    }
    targets.retain(|t| !t.is_empty());
    (digests, targets)
}

/// Adds `media_digests` to the committing tools among `tools` (schema and handler).
pub fn with_media_digests(tools: &mut [(ToolSpec, Arc<dyn ToolHandler>)], media: &MediaHandle) {
    for (spec, handler) in tools.iter_mut() {
        let Some(&(name, kind)) = TOOLS.iter().find(|(n, _)| *n == spec.name) else {
            continue;
        };
        let props = if name == "memory_commit" {
            spec.parameters.pointer_mut("/properties/triples/items/properties")
        } else {
            spec.parameters.pointer_mut("/properties")
        };
        if let Some(p) = props.and_then(Value::as_object_mut) {
            p.insert("media_digests".into(), digests_schema());
        }
        let inner = handler.clone();
        let media = media.clone();
        let wrapped = move |mut args: Value| {
            let (digests, targets) = split(name, &mut args);
            let (inner, media) = (inner.clone(), media.clone());
            async move {
                if digests.is_empty() {
                    return inner.call(args).await;
                }
                // Resolved first: an unknown digest writes nothing.
                let check = LinkDigests {
                    digests: digests.clone(),
                    kind,
                    targets: Vec::new(),
                };
                media
                    .addr
                    .send(check)
                    .await
                    .map_err(ToolFailure::kernel)?
                    .map_err(ToolFailure::kernel)?;
                let reply = inner.call(args).await?;
                let ids = media
                    .addr
                    .send(LinkDigests { digests, kind, targets })
                    .await
                    .map_err(ToolFailure::kernel)?
                    .map_err(ToolFailure::kernel)?;
                tracing::info!(tool = name, blocks = ?ids, "media linked to the commit");
                Ok(format!("{reply}{}", Msg::MediaLinked { count: ids.len() }.text()))
            }
            .boxed()
        };
        *handler = Arc::new(wrapped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_leave_the_arguments_and_triples_get_a_sentence() {
        let mut a = json!({"triples": [
            {"subject": "Ann", "relation": "owns", "object": "a red bike", "media_digests": ["blk_media_aaaaaaaaaaaa"]},
            {"subject": "Ann", "relation": "lives in", "object": "Oslo"}
        ]});
        let (d, t) = split("memory_commit", &mut a);
        assert_eq!(d, vec!["blk_media_aaaaaaaaaaaa"]);
        assert_eq!(t, vec!["Ann owns a red bike"]);
        assert_eq!(a["triples"][0]["sentence_text"], "Ann owns a red bike");
        assert!(a["triples"][0].get("media_digests").is_none());
        assert!(
            a["triples"][1].get("sentence_text").is_none(),
            "untouched without media"
        );

        let mut k = json!({"name": "bike", "content": "my bike", "media_digests": "blk_media_bbbbbbbbbbbb"});
        let (d, t) = split("knowledge_create", &mut k);
        assert_eq!((d.len(), t), (1, vec!["bike".to_owned()]));
        assert!(k.get("media_digests").is_none());
        let mut plain = json!({"content": "x"});
        assert_eq!(split("doc_commit", &mut plain), (vec![], vec![]));
    }
}
