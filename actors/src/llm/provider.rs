//! `kernel/llm`: the actor that talks to LLM vendors.
//!
//! It owns the HTTP client (awc, whose futures are bound to this actor's thread), one
//! adapter per configured source, and each source's health. A request tries the
//! sources in order (see [`health::order`]): two attempts per source 2 s apart, then
//! the source pauses (30 s doubling up to 30 min) and the next one is tried; a 401/403
//! disables a source until its key changes; a cancellation stops everything at once.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actix::prelude::*;
use futures_util::StreamExt;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::adapter::{Adapter, HeaderMeta, SourceName, StreamFormat};
use super::bundled;
use super::health::{self, Candidate, SourceHealth, key_fingerprint};
use super::source::{Skipped, SourceConfig, no_source_message, sources_from_settings};
use super::stream::{Accumulator, Delta};
use super::types::{CompletionRequest, CompletionResponse, StreamChunk};
use crate::host::{Handles, HostContext, KernelActor};

/// Timeout of a non-streaming call.
const CALL_TIMEOUT: Duration = Duration::from_secs(180);
/// A stream may run long, but not forever.
const STREAM_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Largest response body accepted.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// A configured source with its loaded adapter.
pub struct Source {
    pub config: SourceConfig,
    pub adapter: Adapter,
}

/// A successful completion and who produced it.
#[derive(Debug, Clone)]
pub struct Completion {
    pub response: CompletionResponse,
    pub source: String,
    pub model: String,
}

/// Why no completion came back.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum LlmError {
    #[error("{0}")]
    NoSource(String),
    #[error("the LLM call was cancelled")]
    Cancelled,
    #[error("every LLM source is paused after recent failures; the next is available in {wait_s} s ({detail})")]
    AllPaused { wait_s: u64, detail: String },
    #[error("all LLM sources failed: {0}; check GET /api/v1/llm/sources and the vendors' status")]
    AllFailed(String),
    /// The vendor said the prompt does not fit its context window. Not the source's
    /// fault: it is neither retried nor paused; the task prunes and tries again.
    #[error("the prompt is larger than the model's context window ({0}); lower core.agent.max_context_size")]
    ContextFull(String),
}

/// Whether a vendor's error message says the prompt is too long for the model (the
/// phrasings of OpenAI, Anthropic, Gemini, Ollama and compatible servers).
pub fn is_context_full(msg: &str) -> bool {
    let m = msg.to_lowercase();
    [
        "context_length_exceeded",
        "maximum context length",
        "context length",
        "context window",
        "prompt is too long",
        "too many tokens",
        "input is too long",
        "exceeds the context",
        "request too large",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// One attempt's failure.
#[derive(Debug)]
enum CallError {
    Cancelled,
    /// 401/403: the key is wrong; do not retry.
    Auth(String),
    /// Anything else (network, 5xx, 429, garbage): retry, then move on.
    Other(String),
}

/// Availability and config of one source, for the status API.
#[derive(Debug, Clone, Serialize)]
pub struct SourceStatus {
    #[serde(flatten)]
    pub config: SourceConfig,
    pub available: bool,
    pub failures: u32,
    pub disabled_until_key_changes: bool,
    pub paused_for_s: u64,
    pub last_error: Option<String>,
}

/// Everything `kernel/llm` reports.
#[derive(Debug, Clone, Serialize)]
pub struct LlmStatus {
    pub sources: Vec<SourceStatus>,
    pub skipped: Vec<Skipped>,
    /// The source a request without a model asks first: the first available one by
    /// priority (then the default source, then name); `None` when none is available.
    pub current: Option<String>,
}

#[derive(Default)]
struct Pool {
    sources: Vec<Rc<Source>>,
    skipped: Vec<Skipped>,
    health: HashMap<String, SourceHealth>,
    default: String,
}

impl Pool {
    fn ordered(&self, model: &str, now: Instant) -> (Vec<Rc<Source>>, Option<Duration>) {
        let cands: Vec<Candidate> = self
            .sources
            .iter()
            .map(|s| Candidate {
                name: &s.config.name,
                model: &s.config.model,
                priority: s.config.priority,
            })
            .collect();
        let order = health::order(&cands, Some(model), &self.default);
        let mut soonest: Option<Duration> = None;
        let mut out = Vec::new();
        for name in order {
            let Some(src) = self.sources.iter().find(|s| s.config.name == name) else {
                continue;
            };
            let h = self.health.get(name).cloned().unwrap_or_default();
            if h.available(now, key_fingerprint(&src.config.api_key)) {
                out.push(src.clone());
            } else if let Some(t) = h.paused_until {
                let wait = t.saturating_duration_since(now);
                soonest = Some(soonest.map_or(wait, |s| s.min(wait)));
            }
        }
        (out, soonest)
    }
}

/// The LLM actor.
pub struct LlmActor {
    data_dir: PathBuf,
    pool: Rc<RefCell<Pool>>,
    client: awc::Client,
}

impl LlmActor {
    /// An actor with no sources yet (send [`Configure`]). Must be built on the thread
    /// it runs on (`SupervisorRef::worker_on` does that).
    pub fn new(data_dir: PathBuf) -> Self {
        // rustls needs one process-wide crypto provider; we ship ring. Installing twice
        // (a restarted actor) is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = awc::Client::builder().timeout(CALL_TIMEOUT).finish();
        Self {
            data_dir,
            pool: Rc::default(),
            client,
        }
    }

    fn load_adapter(&self, cfg: &SourceConfig) -> Result<Adapter, String> {
        if !cfg.adapter_path.is_empty() {
            let path = self.data_dir.join(&cfg.adapter_path);
            if path.is_file() {
                let src = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                return Adapter::load(&cfg.adapter, &src).map_err(|e| e.to_string());
            }
        }
        let src = bundled::bundled(&cfg.adapter).ok_or_else(|| {
            format!(
                "unknown adapter `{}`; bundled adapters: {}",
                cfg.adapter,
                bundled::names().collect::<Vec<_>>().join(", ")
            )
        })?;
        Adapter::load(&cfg.adapter, src).map_err(|e| e.to_string())
    }

    /// Rebuilds the sources from the settings (keeps the health of unchanged sources).
    pub fn configure(&mut self, settings: &BTreeMap<String, Value>) {
        let fallback_key = settings.get("core.llm.api_key").and_then(Value::as_str).unwrap_or("");
        let (configs, mut skipped) = sources_from_settings(settings, fallback_key);
        let mut sources = Vec::new();
        for cfg in configs {
            match self.load_adapter(&cfg) {
                Ok(adapter) => sources.push(Rc::new(Source { config: cfg, adapter })),
                Err(reason) => skipped.push(Skipped {
                    name: cfg.name.clone(),
                    reason,
                }),
            }
        }
        let default = settings
            .get("core.llm.provider")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let mut pool = self.pool.borrow_mut();
        let health = std::mem::take(&mut pool.health);
        pool.health = health
            .into_iter()
            .filter(|(n, _)| sources.iter().any(|s| &s.config.name == n))
            .collect();
        for s in &skipped {
            tracing::warn!(source = %s.name, "LLM source skipped: {}", s.reason);
        }
        tracing::info!(
            sources = ?sources.iter().map(|s| s.config.name.as_str()).collect::<Vec<_>>(),
            "LLM sources configured"
        );
        pool.sources = sources;
        pool.skipped = skipped;
        pool.default = default;
    }

    /// Source list and health.
    pub fn status(&self) -> LlmStatus {
        let pool = self.pool.borrow();
        let now = Instant::now();
        let sources = pool
            .sources
            .iter()
            .map(|s| {
                let h = pool.health.get(&s.config.name).cloned().unwrap_or_default();
                let fp = key_fingerprint(&s.config.api_key);
                SourceStatus {
                    config: s.config.clone(),
                    available: h.available(now, fp),
                    failures: h.failures,
                    disabled_until_key_changes: h.rejected_key == Some(fp),
                    paused_for_s: h.paused_until.map_or(0, |t| t.saturating_duration_since(now).as_secs()),
                    last_error: h.last_error.clone(),
                }
            })
            .collect();
        let current = pool.ordered("", now).0.first().map(|s| s.config.name.clone());
        LlmStatus {
            sources,
            skipped: pool.skipped.clone(),
            current,
        }
    }
}

impl KernelActor for LlmActor {
    const KIND: &'static str = "llm";
}

/// Replaces the configuration with the given settings (all keys; `core.llm.*` is read).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Configure(pub BTreeMap<String, Value>);

/// Runs one completion with fallback across sources.
#[derive(Message)]
#[rtype(result = "Result<Completion, LlmError>")]
pub struct Complete {
    pub request: CompletionRequest,
    pub stream: bool,
    /// Receives text as it streams (content and reasoning deltas).
    pub deltas: Option<UnboundedSender<Delta>>,
    /// Cancels the call (preemption or stop); the partial output is discarded.
    pub cancel: CancellationToken,
}

/// Reports sources and their health.
#[derive(Message)]
#[rtype(result = "LlmStatus")]
pub struct GetLlmStatus;

impl Handles<Configure> for LlmActor {
    type Reply = ();
    fn handle(&mut self, Configure(settings): Configure, _: &mut HostContext<Self>) {
        self.configure(&settings);
    }
}

impl Handles<GetLlmStatus> for LlmActor {
    type Reply = actix::MessageResult<crate::host::Envelope<GetLlmStatus>>;
    fn handle(&mut self, _: GetLlmStatus, _: &mut HostContext<Self>) -> Self::Reply {
        actix::MessageResult(self.status())
    }
}

impl Handles<Complete> for LlmActor {
    type Reply = ResponseFuture<Result<Completion, LlmError>>;

    fn handle(&mut self, msg: Complete, _: &mut HostContext<Self>) -> Self::Reply {
        let pool = self.pool.clone();
        let client = self.client.clone();
        Box::pin(complete(pool, client, msg))
    }
}

async fn complete(pool: Rc<RefCell<Pool>>, client: awc::Client, msg: Complete) -> Result<Completion, LlmError> {
    let Complete {
        request,
        stream,
        deltas,
        cancel,
    } = msg;
    let (order, soonest) = {
        let p = pool.borrow();
        if p.sources.is_empty() {
            return Err(LlmError::NoSource(no_source_message(&p.skipped)));
        }
        p.ordered(&request.model, Instant::now())
    };
    if order.is_empty() {
        let detail = pool
            .borrow()
            .health
            .iter()
            .filter_map(|(n, h)| h.last_error.as_ref().map(|e| format!("{n}: {e}")))
            .collect::<Vec<_>>()
            .join("; ");
        return Err(LlmError::AllPaused {
            wait_s: soonest.map_or(0, |d| d.as_secs()),
            detail,
        });
    }
    let mut errors = Vec::new();
    for src in order {
        let name = src.config.name.clone();
        let mut last = String::new();
        let mut auth = false;
        for attempt in 0..health::ATTEMPTS {
            if attempt > 0 {
                tokio::select! {
                    _ = tokio::time::sleep(health::RETRY_DELAY) => {}
                    _ = cancel.cancelled() => return Err(LlmError::Cancelled),
                }
            }
            match call_source(&client, &src, &request, stream, deltas.as_ref(), &cancel).await {
                Ok(response) => {
                    pool.borrow_mut()
                        .health
                        .entry(name.clone())
                        .or_default()
                        .record_success();
                    let model = if request.model.is_empty() || request.model == "AUTO" {
                        src.config.model.clone()
                    } else {
                        request.model.clone()
                    };
                    return Ok(Completion {
                        response,
                        source: name,
                        model,
                    });
                }
                Err(CallError::Cancelled) => return Err(LlmError::Cancelled),
                Err(CallError::Auth(e)) => {
                    tracing::error!(source = %name, "LLM source rejected the API key: {e}; disabled until its key changes");
                    pool.borrow_mut()
                        .health
                        .entry(name.clone())
                        .or_default()
                        .record_auth_failure(key_fingerprint(&src.config.api_key), e.clone());
                    last = e;
                    auth = true;
                    break;
                }
                Err(CallError::Other(e)) if is_context_full(&e) => {
                    tracing::warn!(source = %name, "the prompt does not fit the model's context window: {e}");
                    return Err(LlmError::ContextFull(e));
                }
                Err(CallError::Other(e)) => {
                    tracing::warn!(source = %name, attempt = attempt + 1, "LLM call failed: {e}");
                    last = e;
                }
            }
        }
        if !auth {
            let pause = pool
                .borrow_mut()
                .health
                .entry(name.clone())
                .or_default()
                .record_failure(Instant::now(), last.clone());
            tracing::warn!(source = %name, ?pause, "LLM source paused; trying the next one");
        }
        errors.push(format!("{name}: {last}"));
    }
    Err(LlmError::AllFailed(errors.join("; ")))
}

fn one_line(body: &str, max: usize) -> String {
    let flat: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    flat.chars().take(max).collect()
}

async fn call_source(
    client: &awc::Client,
    src: &Source,
    request: &CompletionRequest,
    stream: bool,
    deltas: Option<&UnboundedSender<Delta>>,
    cancel: &CancellationToken,
) -> Result<CompletionResponse, CallError> {
    let cfg = &src.config;
    let mut req = request.clone();
    if req.model.is_empty() || req.model == "AUTO" {
        req.model = cfg.model.clone();
    }
    req.stream = stream;
    req.disable_thinking = !cfg.thinking_enabled;
    let adapter_err = |e: super::adapter::AdapterError| CallError::Other(e.to_string());
    let body = src
        .adapter
        .transform_request_cached(&mut req)
        .await
        .map_err(adapter_err)?;
    let url = src
        .adapter
        .url(&cfg.base_url, &req.model, stream)
        .map_err(adapter_err)?;
    let timestamp = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let meta = HeaderMeta {
        url: &url,
        method: "POST",
        body: &body,
        api_key: &cfg.api_key,
        timestamp,
        source: SourceName { name: &cfg.name },
    };
    let headers = src.adapter.headers(&meta).map_err(adapter_err)?;
    let mut http = client
        .post(&url)
        .timeout(if stream { STREAM_TIMEOUT } else { CALL_TIMEOUT })
        .insert_header(("Content-Type", "application/json"));
    for (k, v) in &headers {
        http = http.insert_header((k.as_str(), v.as_str()));
    }
    let sent = tokio::select! {
        r = http.send_body(body) => r,
        _ = cancel.cancelled() => return Err(CallError::Cancelled),
    };
    let mut resp = sent.map_err(|e| CallError::Other(format!("cannot reach {url}: {e}")))?;
    let status = resp.status().as_u16();
    if status != 200 {
        let body = tokio::select! {
            b = resp.body().limit(MAX_BODY) => b.map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default(),
            _ = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        let msg = src
            .adapter
            .transform_error(status, &body)
            .unwrap_or_else(|| format!("api error {status}: {}", one_line(&body, 300)));
        return Err(if status == 401 || status == 403 {
            CallError::Auth(msg)
        } else {
            CallError::Other(msg)
        });
    }
    if !stream {
        let bytes = tokio::select! {
            b = resp.body().limit(MAX_BODY) => b.map_err(|e| CallError::Other(format!("reading the response failed: {e}")))?,
            _ = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        let text = String::from_utf8_lossy(&bytes);
        return src
            .adapter
            .transform_response(&text)
            .map_err(|e| CallError::Other(format!("{e} (response began: {})", one_line(&text, 200))));
    }
    let mut acc = Accumulator::new(req.max_tokens);
    let mut buf: Vec<u8> = Vec::new();
    let mut first = true;
    let mut done = false;
    loop {
        let next = tokio::select! {
            n = resp.next() => n,
            _ = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        let Some(piece) = next else { break };
        let piece = match piece {
            Ok(p) => p,
            Err(e) if acc.has_output() => {
                tracing::warn!(source = %cfg.name, "stream broke after output: {e}; keeping the partial answer");
                break;
            }
            Err(e) => return Err(CallError::Other(format!("stream failed: {e}"))),
        };
        buf.extend_from_slice(&piece);
        while let Some(pos) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim();
            let payload = match src.adapter.stream_format {
                StreamFormat::Sse => match line.strip_prefix("data:") {
                    Some(p) => p.trim(),
                    None => continue,
                },
                StreamFormat::Ndjson => line,
            };
            if payload.is_empty() {
                continue;
            }
            if payload == "[DONE]" {
                done = true;
                continue;
            }
            let chunk = match src.adapter.transform_stream_chunk(payload) {
                Ok(Some(c)) => c,
                Ok(None) => continue,
                Err(e) => return Err(CallError::Other(e.to_string())),
            };
            if first {
                first = false;
                if is_error_only(&chunk) {
                    return Err(CallError::Other(format!(
                        "the stream opened with an error: {}",
                        chunk.finish_reason
                    )));
                }
            }
            let delta = acc.push(&chunk);
            if let Some(tx) = deltas
                && (!delta.content.is_empty() || !delta.reasoning.is_empty())
            {
                let _ = tx.send(delta);
            }
            done |= chunk.done;
        }
    }
    if !done && !acc.has_output() {
        return Err(CallError::Other("the stream ended before any output".into()));
    }
    Ok(acc.finish())
}

/// A first chunk that only reports an unknown finish reason is a vendor error in
/// disguise: fail the attempt so the next source is tried.
fn is_error_only(c: &StreamChunk) -> bool {
    c.done
        && !matches!(
            c.finish_reason.as_str(),
            "" | "stop" | "length" | "tool_calls" | "function_call" | "content_filter"
        )
        && c.content.is_empty()
        && c.tool_calls.is_empty()
}
