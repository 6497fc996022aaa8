//! Which embedder runs: the configured backend built ([`resolve`]), or none and why.
//! Apart from the shared vocabulary in the module face, so the backends (`onnx`,
//! `remote`) import that vocabulary without importing the choice that builds them.

use std::path::Path;

use super::onnx::OnnxEmbedder;
use super::remote::RemoteEmbedder;
use super::{EmbedConfig, EmbedderKind, Space};

/// A working embedder.
pub enum Embedder {
    Onnx(Box<OnnxEmbedder>),
    Remote(RemoteEmbedder),
}

impl Embedder {
    pub fn space(&self) -> &Space {
        match self {
            Self::Onnx(e) => e.space(),
            Self::Remote(e) => e.space(),
        }
    }
}

/// What [`resolve`] decided: an embedder (or none) and, when the configured one could
/// not be had, why (shown in the status API and logged at `warn`).
pub struct Resolved {
    pub embedder: Option<Embedder>,
    pub fallback: Option<String>,
}

/// Builds the configured embedder. Never fails: a missing runtime or model becomes a
/// TF-IDF fallback with its reason. The remote embedder's space (its dimension) is
/// probed on first use, so it is built here without a request.
pub fn resolve(cfg: &EmbedConfig, data_dir: &Path) -> Resolved {
    let onnx = || match cfg.onnx_files(data_dir) {
        Ok(files) => match OnnxEmbedder::load(&files, cfg.onnx_threads) {
            Ok(e) => Resolved {
                embedder: Some(Embedder::Onnx(Box::new(e))),
                fallback: None,
            },
            Err(e) => Resolved {
                embedder: None,
                fallback: Some(e.to_string()),
            },
        },
        Err(why) => Resolved {
            embedder: None,
            fallback: Some(why.to_string()),
        },
    };
    match cfg.kind {
        EmbedderKind::Tfidf => Resolved {
            embedder: None,
            fallback: None,
        },
        // Auto without the files is the normal state of a fresh install: the reason is
        // still reported (status API, one `warn` line), never hidden.
        EmbedderKind::Onnx | EmbedderKind::Auto => onnx(),
        EmbedderKind::Remote => {
            if cfg.remote_url.trim().is_empty() {
                Resolved {
                    embedder: None,
                    fallback: Some(format!(
                        "{} is \"remote\" but {} is empty; set it to the server's base URL (e.g. http://127.0.0.1:8089)",
                        crate::config::keys::MEMORY_EMBEDDER.name(),
                        crate::config::keys::MEMORY_EMBED_URL.name()
                    )),
                }
            } else {
                Resolved {
                    embedder: Some(Embedder::Remote(RemoteEmbedder::new(
                        &cfg.remote_url,
                        &cfg.remote_model,
                        &cfg.remote_key,
                    ))),
                    fallback: None,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_files_are_an_explicit_fallback_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = EmbedConfig {
            kind: EmbedderKind::Onnx,
            onnx_dir: Some(dir.path().to_path_buf()),
            ..Default::default()
        };
        let r = resolve(&cfg, dir.path());
        assert!(r.embedder.is_none());
        let why = r.fallback.unwrap();
        assert!(why.contains("runtime, model, tokenizer not found"), "{why}");
        assert!(why.contains("install-embedder.sh"), "{why}");
        let tfidf = resolve(
            &EmbedConfig {
                kind: EmbedderKind::Tfidf,
                ..Default::default()
            },
            dir.path(),
        );
        assert!(tfidf.embedder.is_none() && tfidf.fallback.is_none());
    }
}
