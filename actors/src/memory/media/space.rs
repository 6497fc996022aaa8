//! The multimodal embedding space: text and images as vectors of one space, so a text
//! query finds an image by the image's own vector (seed 003), never by a description.
//!
//! No package registry reachable here ships CLIP-family weights inside a package (see
//! docs/DECISIONS.md, "Media vectors"), so the space is a **remote** embedder: a server
//! speaking the Jina-style `POST /v1/embeddings` with typed inputs —
//! `{"model", "input": [{"text": "..."}, {"image": "<base64>"}]}` → `{"data": [{"index",
//! "embedding"}]}` (jina-clip-v1/v2 and compatible self-hosted servers). The space's
//! fingerprint is `mm-remote:<endpoint>#<model>/<dim>`; a vector is compared only with
//! vectors of the same fingerprint, and a modality the space does not have is
//! [`SpaceError::Unsupported`], never a vector of another model.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::memory::embed::{Space, remote};

/// What a vector can be made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Modality {
    Text,
    Image,
    Audio,
}

impl std::fmt::Display for Modality {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Text => "text",
            Self::Image => "image",
            Self::Audio => "audio",
        })
    }
}

/// One thing to embed.
#[derive(Debug, Clone, Copy)]
pub enum Item<'a> {
    Text(&'a str),
    Image { mime: &'a str, data: &'a [u8] },
    Audio(&'a [u8]),
}

impl Item<'_> {
    pub fn modality(&self) -> Modality {
        match self {
            Self::Text(_) => Modality::Text,
            Self::Image { .. } => Modality::Image,
            Self::Audio(_) => Modality::Audio,
        }
    }
}

/// Why no vector came back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpaceError {
    #[error(
        "no multimodal space configured: set core.memory.multimodal_space.provider = remote and its base_url (a Jina-style /v1/embeddings server that takes images)"
    )]
    NotConfigured,
    /// The space has no such modality (seed: `ErrModalityUnsupported`).
    #[error(
        "the multimodal space {space} does not embed {modality}; nothing is stored for it (no other model's vector is used)"
    )]
    Unsupported { space: String, modality: Modality },
    #[error("multimodal embedder {url}: {reason}")]
    Remote { url: String, reason: String },
}

/// A slow server must not hold up a turn's recall (the caller waits less) or the
/// background job for long.
const TIMEOUT: Duration = Duration::from_secs(60);
/// Items per request (images are large: a batch stays a few MB).
pub const BATCH: usize = 8;

/// The remote multimodal space; `dim` is learned from the first answer.
#[derive(Debug, Clone)]
pub struct RemoteSpace {
    url: String,
    model: String,
    key: String,
    space: Space,
}

impl RemoteSpace {
    pub fn new(base: &str, model: &str, key: &str) -> Self {
        let url = remote::endpoint(base);
        Self {
            space: Space {
                model: format!("mm-remote:{url}#{model}"),
                dim: 0,
            },
            url,
            model: model.to_owned(),
            key: key.to_owned(),
        }
    }

    /// The modalities this space embeds.
    pub fn modalities(&self) -> &'static [Modality] {
        &[Modality::Text, Modality::Image]
    }

    /// The fingerprint stored beside each vector; `None` until the dimension is known.
    pub fn fingerprint(&self) -> Option<String> {
        (self.space.dim > 0).then(|| self.space.fingerprint())
    }

    pub fn space(&self) -> &Space {
        &self.space
    }

    fn err(&self, reason: impl Into<String>) -> SpaceError {
        SpaceError::Remote {
            url: self.url.clone(),
            reason: reason.into(),
        }
    }

    /// The request body of `items` (pure; the wire format in one place).
    pub fn body(&self, items: &[Item<'_>]) -> Result<Value, SpaceError> {
        let input: Vec<Value> = items
            .iter()
            .map(|i| match i {
                Item::Text(t) => Ok(json!({ "text": t })),
                Item::Image { data, .. } => {
                    Ok(json!({ "image": base64::engine::general_purpose::STANDARD.encode(data) }))
                }
                Item::Audio(_) => Err(SpaceError::Unsupported {
                    space: self.space.model.clone(),
                    modality: Modality::Audio,
                }),
            })
            .collect::<Result<_, _>>()?;
        let mut body = json!({ "input": input });
        if !self.model.is_empty() {
            body["model"] = json!(self.model);
        }
        Ok(body)
    }

    /// Unit-length vectors of `items`, in order. Must run on an actix arbiter (awc).
    /// A change of dimension between answers is an error, never mixed vectors.
    pub async fn embed(&mut self, items: &[Item<'_>]) -> Result<Vec<Vec<f32>>, SpaceError> {
        if let Some(i) = items.iter().find(|i| !self.modalities().contains(&i.modality())) {
            return Err(SpaceError::Unsupported {
                space: self.space.model.clone(),
                modality: i.modality(),
            });
        }
        let mut out = Vec::with_capacity(items.len());
        for chunk in items.chunks(BATCH) {
            out.extend(self.embed_batch(chunk).await?);
        }
        Ok(out)
    }

    async fn embed_batch(&mut self, items: &[Item<'_>]) -> Result<Vec<Vec<f32>>, SpaceError> {
        let body = self.body(items)?;
        remote::post_embeddings(
            &self.url,
            &self.key,
            &body,
            items.len(),
            &mut self.space.dim,
            "change core.memory.multimodal_space.model to re-embed in the new space",
            TIMEOUT,
        )
        .await
        .map_err(|reason| self.err(reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_inputs_in_the_jina_format() {
        let s = RemoteSpace::new("http://127.0.0.1:9/v1", "jina-clip-v2", "");
        let b = s
            .body(&[
                Item::Text("my bike"),
                Item::Image {
                    mime: "image/png",
                    data: b"\x89PNG",
                },
            ])
            .unwrap();
        assert_eq!(
            b,
            json!({"model": "jina-clip-v2", "input": [{"text": "my bike"}, {"image": "iVBORw=="}]})
        );
        assert_eq!(s.fingerprint(), None, "unknown until the first answer");
    }

    #[actix_rt::test]
    async fn a_modality_outside_the_space_is_unsupported_not_another_vector() {
        let mut s = RemoteSpace::new("http://127.0.0.1:9", "m", "");
        let e = s.embed(&[Item::Audio(b"RIFF")]).await.unwrap_err();
        assert!(
            matches!(
                e,
                SpaceError::Unsupported {
                    modality: Modality::Audio,
                    ..
                }
            ),
            "{e}"
        );
    }
}
