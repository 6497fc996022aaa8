//! `kernel/llm`: the actor that talks to LLM vendors.
//!
//! It owns one adapter and one HTTP client per configured source, and each source's
//! health. A request tries the sources in order (see [`health::order`]): two attempts
//! per source 2 s apart, then the source pauses (30 s doubling up to 30 min) and the
//! next one is tried; a 401/403 disables a source until its key changes; a
//! cancellation stops everything at once. Changing a source's settings resets its
//! health ([`health::carry_over`]).
//!
//! Vendor calls go through reqwest (hyper), not awc: awc does not read close-delimited
//! bodies (actix/actix-web#2287), which small servers and proxies send (see
//! docs/DECISIONS.md). An attempt fails, and the fallback moves on, when the source's
//! `connect_timeout`, `first_byte_timeout` or `idle_timeout` passes, and when a stream
//! ends without its end marker: a cut-off answer is never returned as a complete one.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actix::prelude::*;
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

/// A call may run long (a stream that keeps sending), but not forever.
const MAX_CALL: Duration = Duration::from_secs(30 * 60);
/// Largest response body accepted.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// A configured source with its loaded adapter.
pub struct Source {
    pub config: SourceConfig,
    pub adapter: Adapter,
    /// This source's own client: it carries the source's connect timeout, and its
    /// connection pool starts empty whenever the source's settings change.
    client: reqwest::Client,
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
    /// The owner's daily token budget refused the call before any vendor saw it (the
    /// text names the limit, the setting and when it resets).
    #[error("{0}")]
    Budget(String),
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
    /// Anything else: retry, then move on.
    Failed(AttemptError),
}

impl From<AttemptError> for CallError {
    fn from(e: AttemptError) -> Self {
        CallError::Failed(e)
    }
}

/// Why one attempt on one source failed, in words that name the cause. It becomes the
/// source's `last_error` (GET /api/v1/llm/sources) and part of [`LlmError::AllFailed`].
#[derive(Debug, thiserror::Error)]
pub enum AttemptError {
    #[error("connect to {url} timed out after {after}; check that the vendor is up, or raise `{key}`", after = human(*after), key = setting(source_name, "connect_timeout"))]
    ConnectTimeout {
        url: String,
        after: Duration,
        source_name: String,
    },
    #[error("cannot reach {url}: {detail}; check the source's base_url and that the vendor is up")]
    Unreachable { url: String, detail: String },
    #[error("no first byte within {after} from {url}: the vendor took the request but did not answer; raise `{key}` for a slow model", after = human(*after), key = setting(source_name, "first_byte_timeout"))]
    NoFirstByte {
        url: String,
        after: Duration,
        source_name: String,
    },
    #[error("the vendor went silent for {after} after {bytes} bytes; raise `{key}` for a model that pauses longer", after = human(*after), key = setting(source_name, "idle_timeout"))]
    Idle {
        after: Duration,
        bytes: usize,
        source_name: String,
    },
    /// Bytes kept coming, but no progress: less than `PROGRESS_BYTES` and no complete
    /// stream line in `after` (a vendor dripping a byte a second holds nobody).
    #[error("the vendor sent only a trickle ({recent} bytes in {after}, {bytes} in all) and no complete answer line: treated as down; raise `{key}` if this model streams that slowly", after = human(*after), key = setting(source_name, "idle_timeout"))]
    Slow {
        after: Duration,
        recent: usize,
        bytes: usize,
        source_name: String,
    },
    #[error("the call ran longer than {} and was abandoned after {bytes} bytes", human(MAX_CALL))]
    TooLong { bytes: usize },
    #[error("closed after {bytes} bytes without {marker}: the answer was cut off")]
    Truncated { bytes: usize, marker: String },
    #[error("the connection broke after {bytes} bytes: {detail}")]
    Broken { bytes: usize, detail: String },
    #[error("the response is larger than {} MiB", MAX_BODY / (1024 * 1024))]
    TooLarge,
    /// An HTTP error status, in the adapter's words, with the vendor's `Retry-After`.
    #[error("{message}")]
    Status {
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("the adapter produced an invalid HTTP header `{name}`; fix its `headers` or `build_headers`")]
    InvalidHeader { name: String },
    /// The adapter could not build the request or read the response.
    #[error(transparent)]
    Adapter(#[from] super::adapter::AdapterError),
    #[error("{message} ({bytes} bytes; the response began: {start})")]
    BadResponse {
        message: String,
        bytes: usize,
        start: String,
    },
    /// The stream carried a vendor error (first chunk: an unknown finish reason; later:
    /// `finish_reason: "error"`, the adapters' mark for a mid-stream vendor error).
    #[error("the stream reported an error ({reason}) after {bytes} bytes; the adapter logged the vendor's message")]
    StreamError { reason: String, bytes: usize },
}

impl AttemptError {
    /// One of the source's timeouts (or the overall call limit) ran out.
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            AttemptError::ConnectTimeout { .. }
                | AttemptError::NoFirstByte { .. }
                | AttemptError::Idle { .. }
                | AttemptError::Slow { .. }
                | AttemptError::TooLong { .. }
        )
    }

    /// How long the vendor asked us to wait (`Retry-After` on a 429 or 503).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            AttemptError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The wait a `Retry-After` header asks for: delay-seconds or an HTTP date (RFC 9110
/// §10.2.3); capped at a day, so a hostile header cannot park a source for good.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    let wait = match v.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => httpdate::parse_http_date(v)
            .ok()?
            .duration_since(now)
            .unwrap_or(Duration::ZERO),
    };
    Some(wait.min(Duration::from_secs(24 * 3600)))
}

/// Received bytes that count as progress of a body whose lines do not complete (a
/// large JSON answer arriving in pieces): see [`AttemptError::Slow`].
const PROGRESS_BYTES: usize = 256;

/// A duration as the settings page writes it (`3s`, `2m`).
fn human(d: Duration) -> String {
    crate::config::format_duration(d)
}

fn setting(source: &str, field: &str) -> String {
    format!("{}{source}.{field}", super::source::SOURCES_PREFIX)
}

/// An error with its causes (reqwest's own text is terse: "error sending request").
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cur = c.source();
    }
    out
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
    /// The daily token budget: its limits, and today's spending and reservations.
    pub budget: BudgetStatus,
}

/// The budget as `GET /api/v1/llm/sources` shows it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BudgetStatus {
    /// `core.llm.budget.daily_tokens` (0 = none).
    pub daily_tokens: u64,
    /// `core.llm.budget.monthly_tokens` (0 = none).
    pub monthly_tokens: u64,
    /// `core.llm.budget.background_daily_tokens` (0 = none).
    pub background_daily_tokens: u64,
    /// `core.llm.budget.guest_daily_tokens` (0 = none).
    pub guest_daily_tokens: u64,
    /// Tokens the answered calls used today (UTC, the kernel's clock).
    pub spent_today: u64,
    /// Tokens the answered calls used this UTC month.
    pub spent_month: u64,
    /// `core.llm.budget.daily_usd` and `.monthly_usd` (0 = none).
    pub daily_usd: f64,
    pub monthly_usd: f64,
    /// Dollars the priced calls cost today and this month.
    pub spent_usd_today: f64,
    pub spent_usd_month: f64,
    /// Tokens held by calls in flight.
    pub held: u64,
    /// Every limit that is set (the whole matrix: every call, background, each guest,
    /// each source × day, month × tokens, dollars) with its period's spending.
    pub limits: Vec<crate::usage::budget::LimitRow>,
}

#[derive(Default)]
struct Pool {
    sources: Vec<Rc<Source>>,
    skipped: Vec<Skipped>,
    health: HashMap<String, SourceHealth>,
    default: String,
    /// `core.input_processing.image.fallback_provider` (see `llm::vision`).
    describe_with: String,
    /// The owner's price table (`core.llm.prices`).
    prices: crate::usage::Prices,
    /// Where every answered call is recorded (`None`: actor tests, no ledger).
    usage: Option<crate::addr::TAddr<crate::usage::UsageActor>>,
    /// The owner's daily token limits and today's spending (`core.llm.budget.*`).
    budgets: crate::usage::budget::Budgets,
    /// `core.llm.background_source`: the one source background work uses (empty: the
    /// usual order).
    background_source: String,
    /// Where the owner hears of a limit reached (`None`: actor tests).
    bus: Option<crate::bus::EventBus>,
    /// The tool schemas' count for the shared list counted last (see
    /// [`Pool::prompt_tokens`]). Holding the list keeps its address from being reused.
    tools_tokens: Option<(super::types::ToolList, u64)>,
}

impl Pool {
    /// Tells the owner of `e` on the bus, the first time in its period only.
    fn notice(&mut self, e: &crate::usage::budget::Exhausted) {
        if self.budgets.first_notice(e)
            && let Some(bus) = &self.bus
        {
            bus.publish(crate::bus::Event::BudgetReached {
                setting: e.setting(),
                message: e.to_string(),
            });
        }
    }
}

/// An attempt's hold on the per-source and money limits, given back unless settled
/// (every way out of an attempt — a failure, a cancel, a full context — releases it).
struct AttemptHold {
    pool: Rc<RefCell<Pool>>,
    reservation: Option<crate::usage::budget::AttemptReservation>,
}

impl AttemptHold {
    fn settle(mut self, tokens: u64, micros: u64) {
        if let Some(r) = self.reservation.take() {
            self.pool
                .borrow_mut()
                .budgets
                .settle_attempt(r, tokens, micros, crate::clock::now_ms());
        }
    }
}

impl Drop for AttemptHold {
    fn drop(&mut self) {
        if let Some(r) = self.reservation.take()
            && let Ok(mut p) = self.pool.try_borrow_mut()
        {
            p.budgets.release_attempt(r);
        }
    }
}

impl Pool {
    /// Records an answered call in the usage ledger: the vendor's token counts, or the
    /// daemon's own count of the request and answer when the vendor sent none.
    fn record(&mut self, purpose: &crate::usage::Purpose, c: &Completion, request: &CompletionRequest) -> Option<i64> {
        let Some(usage) = self.usage.clone() else {
            let u = &c.response.usage;
            return self
                .prices
                .cost_micros(&c.model, u.prompt_tokens, u.cached_tokens, u.completion_tokens);
        };
        let u = &c.response.usage;
        let estimated = u.prompt_tokens == 0 && u.completion_tokens == 0;
        let (input, output) = if estimated {
            (
                self.prompt_tokens(request),
                crate::llm::tokens::count(&c.response.content) as u64,
            )
        } else {
            (u.prompt_tokens, u.completion_tokens)
        };
        let cached = u.cached_tokens.min(input);
        let call = crate::usage::Call {
            ts_ms: crate::clock::now_ms(),
            source: c.source.clone(),
            model: c.model.clone(),
            kind: purpose.kind,
            principal: purpose.principal.clone(),
            input,
            output,
            cached,
            estimated,
            cost_micros: self.prices.cost_micros(&c.model, input, cached, output),
        };
        let cost = call.cost_micros;
        if let Err(e) = usage.do_send(crate::usage::RecordCall(call)) {
            tracing::warn!("a model call was not recorded in the usage ledger: {e}");
        }
        cost
    }
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

/// How many sources the LLM actor has configured, readable from any thread. Why: the
/// HTTP API refuses a message at once when no source is configured, and asking the
/// actor on its own thread for that on every request cost two thread wake-ups a turn.
#[derive(Debug, Clone, Default)]
pub struct SourceGauge(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl SourceGauge {
    /// Sources configured at the last [`LlmActor::configure`] (0 before the first one).
    pub fn configured(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }

    fn set(&self, n: usize) {
        self.0.store(n, std::sync::atomic::Ordering::Release);
    }
}

/// The LLM actor.
pub struct LlmActor {
    data_dir: PathBuf,
    pool: Rc<RefCell<Pool>>,
    gauge: SourceGauge,
}

impl LlmActor {
    /// Records every answered call in `usage` from now on.
    pub fn with_usage(self, usage: crate::addr::TAddr<crate::usage::UsageActor>) -> Self {
        self.pool.borrow_mut().usage = Some(usage);
        self
    }

    /// Publishes the first refusal of each limit in its period ([`crate::bus::Event::
    /// BudgetReached`]).
    pub fn with_bus(self, bus: crate::bus::EventBus) -> Self {
        self.pool.borrow_mut().bus = Some(bus);
        self
    }

    /// An actor with no sources yet (send [`Configure`]). Must be built on the thread
    /// it runs on (`SupervisorRef::worker_on` does that).
    pub fn new(data_dir: PathBuf) -> Self {
        Self::with_gauge(data_dir, SourceGauge::default())
    }

    /// [`Self::new`], keeping `gauge` current with the number of configured sources (a
    /// restarted actor is given the same gauge).
    pub fn with_gauge(data_dir: PathBuf, gauge: SourceGauge) -> Self {
        // rustls needs one process-wide crypto provider; we ship ring. Installing twice
        // (a restarted actor) is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            data_dir,
            pool: Rc::default(),
            gauge,
        }
    }

    /// The HTTP client of one source. Only the connect timeout lives here; the first
    /// byte and idle timeouts are applied per attempt (see `call_source`).
    fn client_for(cfg: &SourceConfig) -> Result<reqwest::Client, String> {
        reqwest::Client::builder()
            .connect_timeout(cfg.connect_timeout)
            .build()
            .map_err(|e| format!("cannot build an HTTP client: {}", chain(&e)))
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

    /// Rebuilds the sources from the settings. A source keeps its health only when its
    /// settings are unchanged ([`health::carry_over`]).
    pub fn configure(&mut self, settings: &BTreeMap<String, Value>) {
        use crate::config::keys;
        let fallback_key = settings
            .get(keys::LLM_API_KEY.name())
            .and_then(Value::as_str)
            .unwrap_or("");
        let (configs, mut skipped) = sources_from_settings(settings, fallback_key);
        let mut sources = Vec::new();
        for cfg in configs {
            match self
                .load_adapter(&cfg)
                .and_then(|adapter| Ok((adapter, Self::client_for(&cfg)?)))
            {
                Ok((adapter, client)) => sources.push(Rc::new(Source {
                    config: cfg,
                    adapter,
                    client,
                })),
                Err(reason) => skipped.push(Skipped {
                    name: cfg.name.clone(),
                    reason,
                }),
            }
        }
        let default = settings
            .get(keys::LLM_PROVIDER.name())
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let mut pool = self.pool.borrow_mut();
        let health = std::mem::take(&mut pool.health);
        let old: Vec<&SourceConfig> = pool.sources.iter().map(|s| &s.config).collect();
        let new: Vec<&SourceConfig> = sources.iter().map(|s| &s.config).collect();
        let kept = health::carry_over(health, &old, &new);
        pool.health = kept;
        for s in &skipped {
            tracing::warn!(source = %s.name, "LLM source skipped: {}", s.reason);
        }
        tracing::info!(
            sources = ?sources.iter().map(|s| s.config.name.as_str()).collect::<Vec<_>>(),
            "LLM sources configured"
        );
        pool.sources = sources;
        self.gauge.set(pool.sources.len());
        pool.skipped = skipped;
        pool.default = default;
        pool.describe_with = settings
            .get(keys::IMAGE_FALLBACK_PROVIDER.name())
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        pool.background_source = settings
            .get(keys::LLM_BACKGROUND_SOURCE.name())
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_owned();
        let tokens = |k: &str| settings.get(k).and_then(Value::as_u64).unwrap_or(0);
        let micros = |usd: f64| (usd * 1e6).round().max(0.0) as u64;
        let dollars = |k: &str| micros(settings.get(k).and_then(Value::as_f64).unwrap_or(0.0));
        use crate::usage::budget::Caps;
        let caps = |daily_tokens: &str, monthly_tokens: &str, daily_usd: &str, monthly_usd: &str| Caps {
            daily_tokens: tokens(daily_tokens),
            monthly_tokens: tokens(monthly_tokens),
            daily_micros: dollars(daily_usd),
            monthly_micros: dollars(monthly_usd),
        };
        pool.budgets.limits = crate::usage::budget::Limits {
            all: caps(
                keys::LLM_BUDGET_DAILY_TOKENS.name(),
                keys::LLM_BUDGET_MONTHLY_TOKENS.name(),
                keys::LLM_BUDGET_DAILY_USD.name(),
                keys::LLM_BUDGET_MONTHLY_USD.name(),
            ),
            background: caps(
                keys::LLM_BUDGET_BACKGROUND_DAILY_TOKENS.name(),
                keys::LLM_BUDGET_BACKGROUND_MONTHLY_TOKENS.name(),
                keys::LLM_BUDGET_BACKGROUND_DAILY_USD.name(),
                keys::LLM_BUDGET_BACKGROUND_MONTHLY_USD.name(),
            ),
            guest: caps(
                keys::LLM_BUDGET_GUEST_DAILY_TOKENS.name(),
                keys::LLM_BUDGET_GUEST_MONTHLY_TOKENS.name(),
                keys::LLM_BUDGET_GUEST_DAILY_USD.name(),
                keys::LLM_BUDGET_GUEST_MONTHLY_USD.name(),
            ),
            sources: pool
                .sources
                .iter()
                .map(|s| {
                    let c = &s.config;
                    let own = Caps {
                        daily_tokens: c.daily_tokens,
                        monthly_tokens: c.monthly_tokens,
                        daily_micros: micros(c.daily_usd),
                        monthly_micros: micros(c.monthly_usd),
                    };
                    (c.name.clone(), own)
                })
                .filter(|(_, own)| !own.is_empty())
                .collect(),
        };
        pool.prices = match crate::usage::Prices::parse(settings.get(keys::LLM_PRICES.name()).unwrap_or(&Value::Null)) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("{e}; costs are not computed until it is fixed");
                crate::usage::Prices::default()
            }
        };
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
        let now_ms = crate::clock::now_ms();
        let b = &pool.budgets;
        let (spent_today, held) = b.today(now_ms);
        let (micros_today, micros_month) = b.money(now_ms);
        let all = b.limits.all;
        LlmStatus {
            sources,
            skipped: pool.skipped.clone(),
            current,
            budget: BudgetStatus {
                daily_tokens: all.daily_tokens,
                monthly_tokens: all.monthly_tokens,
                background_daily_tokens: b.limits.background.daily_tokens,
                guest_daily_tokens: b.limits.guest.daily_tokens,
                spent_today,
                spent_month: b.this_month(now_ms),
                daily_usd: all.daily_micros as f64 / 1e6,
                monthly_usd: all.monthly_micros as f64 / 1e6,
                spent_usd_today: micros_today as f64 / 1e6,
                spent_usd_month: micros_month as f64 / 1e6,
                held,
                limits: b.rows(now_ms),
            },
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
    /// What the call is for, and for whom (the usage ledger's kind and principal).
    pub purpose: crate::usage::Purpose,
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

/// One call to one source alone — no fallback to another source, and the live health
/// untouched — for the self-check (`selftest`): a broken source must show as broken
/// even when another one would have answered in its place.
#[derive(Message)]
#[rtype(result = "Result<Completion, LlmError>")]
pub struct ProbeSource {
    pub name: String,
    pub request: CompletionRequest,
}

impl Handles<ProbeSource> for LlmActor {
    type Reply = ResponseFuture<Result<Completion, LlmError>>;
    fn handle(&mut self, msg: ProbeSource, _: &mut HostContext<Self>) -> Self::Reply {
        let one: Vec<Rc<Source>> = self
            .pool
            .borrow()
            .sources
            .iter()
            .filter(|s| s.config.name == msg.name)
            .cloned()
            .collect();
        let (prices, usage) = {
            let p = self.pool.borrow();
            (p.prices.clone(), p.usage.clone())
        };
        let pool = Rc::new(RefCell::new(Pool {
            sources: one,
            prices,
            usage,
            ..Pool::default()
        }));
        Box::pin(complete(
            pool,
            Complete {
                request: msg.request,
                purpose: crate::usage::Purpose::of(crate::usage::Kind::Selftest),
                stream: false,
                deltas: None,
                cancel: CancellationToken::new(),
            },
        ))
    }
}

impl Handles<Complete> for LlmActor {
    type Reply = ResponseFuture<Result<Completion, LlmError>>;

    fn handle(&mut self, msg: Complete, _: &mut HostContext<Self>) -> Self::Reply {
        let pool = self.pool.clone();
        Box::pin(complete(pool, msg))
    }
}

impl Pool {
    /// The daemon's own count (o200k) of what a request sends: its messages (with the
    /// per-message framing) and its tool schemas. For a vendor that reports no usage, and
    /// for a budget's reservation.
    ///
    /// Encoding the whole request on every call took about half of a turn's kernel time
    /// (`homed bench turn`, a vendor that reports no usage: 2.4 ms p50), yet most of it
    /// is the same call after call: the system prompt, the source context, a turn's
    /// earlier steps, the recalled memory but for a few lines, and the tool schemas
    /// (~16 KB of JSON). So each message's text is counted line by line through the
    /// token memo (`tokens::count_memo_lines`), and the schemas' count is kept for the
    /// shared list seen last (the same `Arc` until a plugin changes the registry: no
    /// serialising, no hashing); another list (a turn's subset) is serialised and
    /// memoised. The counts are the same as encoding everything anew.
    fn prompt_tokens(&mut self, request: &CompletionRequest) -> u64 {
        let text = |v: &Value| match v {
            Value::String(s) => crate::llm::tokens::count_memo_lines(s),
            Value::Null => 0,
            other => crate::llm::tokens::count_memo(&other.to_string()),
        };
        let prompt: usize = request.messages.iter().map(|m| text(&m.content) + 4).sum();
        let tools = match &self.tools_tokens {
            Some((list, n)) if std::sync::Arc::ptr_eq(list, &request.tools) => *n,
            _ => {
                let json = serde_json::to_string(&request.tools).unwrap_or_default();
                let n = crate::llm::tokens::count_memo(&json) as u64;
                self.tools_tokens = Some((request.tools.clone(), n));
                n
            }
        };
        prompt as u64 + tools
    }

    /// What a request may spend at most: its prompt (counted) and its answer's cap.
    fn reserve_estimate(&mut self, request: &CompletionRequest) -> u64 {
        self.prompt_tokens(request) + u64::from(request.max_tokens)
    }
}

/// One completion under the budget: a reservation before any vendor is asked, settled
/// to what the answer used (the vendor's count, else the estimate) or released when no
/// source answered.
async fn complete(pool: Rc<RefCell<Pool>>, msg: Complete) -> Result<Completion, LlmError> {
    // Counting a prompt is not free (a whole prompt encoded anew took `homed bench
    // turn` from 0.8 to 3.4 ms; remembered, each call still encodes its new lines):
    // only a limit that applies needs it.
    let limited = pool
        .borrow()
        .budgets
        .limits
        .apply_to(msg.purpose.kind, &msg.purpose.principal);
    let estimate = if limited {
        pool.borrow_mut().reserve_estimate(&msg.request)
    } else {
        0
    };
    let reservation = {
        let mut p = pool.borrow_mut();
        match p.budgets.reserve(
            msg.purpose.kind,
            &msg.purpose.principal,
            estimate,
            crate::clock::now_ms(),
        ) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(
                    kind = msg.purpose.kind.as_str(),
                    "model call refused by the budget: {e}"
                );
                p.notice(&e);
                return Err(LlmError::Budget(e.to_string()));
            }
        }
    };
    let result = complete_unbudgeted(pool.clone(), msg).await;
    let mut p = pool.borrow_mut();
    match &result {
        Ok(c) => {
            let u = &c.response.usage;
            let used = u.prompt_tokens + u.completion_tokens;
            p.budgets.settle(
                reservation,
                if used > 0 { used } else { estimate },
                crate::clock::now_ms(),
            );
        }
        Err(_) => p.budgets.release(reservation),
    }
    result
}

/// Budget updates from outside the actor: today's spending read from the ledger at
/// start (so a restart does not reset the day).
#[derive(Message)]
#[rtype(result = "()")]
pub struct SeedBudget(pub crate::usage::budget::Spent);

impl Handles<SeedBudget> for LlmActor {
    type Reply = ();
    fn handle(&mut self, SeedBudget(spent): SeedBudget, _: &mut HostContext<Self>) {
        self.pool.borrow_mut().budgets.seed(crate::clock::now_ms(), spent);
    }
}

/// The model a request runs on at `src`: the one it names, or the source's own for
/// an empty or `AUTO` model (what the call is priced and recorded at).
fn model_for<'a>(src: &'a Source, request: &'a CompletionRequest) -> &'a str {
    if request.model.is_empty() || request.model == "AUTO" {
        &src.config.model
    } else {
        &request.model
    }
}

async fn complete_unbudgeted(pool: Rc<RefCell<Pool>>, msg: Complete) -> Result<Completion, LlmError> {
    let Complete {
        request,
        purpose,
        stream,
        deltas,
        cancel,
    } = msg;
    let (order, soonest) = {
        let p = pool.borrow();
        if p.sources.is_empty() {
            return Err(LlmError::NoSource(no_source_message(&p.skipped)));
        }
        let (mut order, soonest) = p.ordered(&request.model, Instant::now());
        // Background work pinned to its own (cheap or local) source uses it alone: a
        // heartbeat's task never falls back to the owner's expensive source.
        if purpose.kind.is_background() && !p.background_source.is_empty() {
            let pin = &p.background_source;
            if !p.sources.iter().any(|s| &s.config.name == pin) {
                return Err(LlmError::NoSource(format!(
                    "core.llm.background_source is `{pin}`, which is not a configured LLM source; name one of GET /api/v1/llm/sources, or empty it to use the usual order"
                )));
            }
            order.retain(|s| &s.config.name == pin);
        }
        (order, soonest)
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
    // Sources the per-source or money limits skipped, with the limit: all of them and
    // the call fails naming each one's.
    let mut refused: Vec<String> = Vec::new();
    // The request's worst case (prompt, answer cap), counted once if a limit needs it.
    let mut worst: Option<(u64, u64)> = None;
    // Descriptions of this request's images, made at most once (see `llm::vision`).
    let mut described: Option<CompletionRequest> = None;
    for src in order {
        let name = src.config.name.clone();
        // The source's own day and the money limits, priced at this source's model: a
        // source whose worst case no longer fits is skipped, and the next (cheaper or
        // local) one in the order answers.
        let hold = {
            let mut p = pool.borrow_mut();
            if p.budgets.attempt_limited(purpose.kind, &purpose.principal, &name) {
                let (prompt, answer) = match worst {
                    Some(w) => w,
                    None => {
                        let w = (p.prompt_tokens(&request), u64::from(request.max_tokens));
                        worst = Some(w);
                        w
                    }
                };
                let model = model_for(&src, &request);
                let micros = p.prices.cost_micros(model, prompt, 0, answer).map(|m| m.max(0) as u64);
                match p.budgets.reserve_attempt(
                    purpose.kind,
                    &purpose.principal,
                    &name,
                    prompt + answer,
                    micros,
                    crate::clock::now_ms(),
                ) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        tracing::warn!(source = %name, "source skipped by the budget: {e}");
                        p.notice(&e);
                        refused.push(format!("{name}: {e}"));
                        continue;
                    }
                }
            } else {
                None
            }
        };
        let hold = AttemptHold {
            pool: pool.clone(),
            reservation: hold,
        };
        let request = if !src.config.vision && super::vision::has_images(&request) {
            if described.is_none() {
                described = Some(describe_images(&pool, &request, &cancel).await?);
            }
            tracing::info!(source = %name, "source without vision: images go as text (described or noted)");
            std::borrow::Cow::Borrowed(described.as_ref().unwrap_or(&request))
        } else {
            std::borrow::Cow::Borrowed(&request)
        };
        let request: &CompletionRequest = &request;
        let mut last = String::new();
        let mut auth = false;
        // The vendor's `Retry-After`, when it sent one: the source pauses at least that
        // long, and is not asked again sooner.
        let mut asked_wait = None;
        for attempt in 0..health::ATTEMPTS {
            if attempt > 0 {
                tokio::select! {
                    _ = tokio::time::sleep(health::RETRY_DELAY) => {}
                    _ = cancel.cancelled() => return Err(LlmError::Cancelled),
                }
            }
            match call_source(&src, request, stream, deltas.as_ref(), &cancel).await {
                Ok(response) => {
                    pool.borrow_mut()
                        .health
                        .entry(name.clone())
                        .or_default()
                        .record_success();
                    let model = model_for(&src, request).to_owned();
                    let mut done = Completion {
                        response,
                        source: name,
                        model,
                    };
                    let cost = pool.borrow_mut().record(&purpose, &done, request);
                    done.response.usage.cost_micros = cost.unwrap_or(0).max(0) as u64;
                    let u = &done.response.usage;
                    let used = u.prompt_tokens + u.completion_tokens;
                    let used = if used > 0 {
                        used
                    } else {
                        worst.map_or(0, |(p, a)| p + a)
                    };
                    hold.settle(used, done.response.usage.cost_micros);
                    return Ok(done);
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
                Err(CallError::Failed(e)) if is_context_full(&e.to_string()) => {
                    tracing::warn!(source = %name, "the prompt does not fit the model's context window: {e}");
                    return Err(LlmError::ContextFull(e.to_string()));
                }
                Err(CallError::Failed(e)) if e.is_timeout() => {
                    // No second attempt: the retry is for errors that fail fast (a 500, a
                    // reset); a timeout already waited as long as the operator allows, and
                    // waiting twice would hold the agent twice as long (docs/DECISIONS.md).
                    tracing::warn!(source = %name, attempt = attempt + 1, "LLM call timed out: {e}; moving on");
                    last = e.to_string();
                    break;
                }
                Err(CallError::Failed(e)) => {
                    tracing::warn!(source = %name, attempt = attempt + 1, "LLM call failed: {e}");
                    last = e.to_string();
                    asked_wait = e.retry_after();
                    if asked_wait.is_some_and(|w| w > health::RETRY_DELAY) {
                        break;
                    }
                }
            }
        }
        if !auth {
            let pause = pool
                .borrow_mut()
                .health
                .entry(name.clone())
                .or_default()
                .record_failure_at_least(Instant::now(), last.clone(), asked_wait);
            tracing::warn!(source = %name, ?pause, "LLM source paused; trying the next one");
        }
        errors.push(format!("{name}: {last}"));
    }
    if errors.is_empty() && !refused.is_empty() {
        return Err(LlmError::Budget(refused.join("; ")));
    }
    errors.extend(refused);
    Err(LlmError::AllFailed(errors.join("; ")))
}

/// `request` with its images as text for a source without vision: each described by
/// the describing source when there is one (one non-streamed call per image), else
/// the catalog's note. A failed description falls back to the note (logged).
async fn describe_images(
    pool: &Rc<RefCell<Pool>>,
    request: &CompletionRequest,
    cancel: &CancellationToken,
) -> Result<CompletionRequest, LlmError> {
    use super::vision;
    let describer = {
        let p = pool.borrow();
        let (order, _) = p.ordered("", Instant::now());
        let name = vision::describer(
            &p.describe_with,
            order.iter().map(|s| (s.config.name.as_str(), s.config.vision)),
        )
        .map(str::to_owned);
        name.and_then(|n| order.into_iter().find(|s| s.config.name == n))
    };
    let mut descriptions = HashMap::new();
    if let Some(src) = describer {
        for url in vision::image_urls(request) {
            let ask = vision::describe_request(&url, request.max_tokens);
            let answer = call_source(&src, &ask, false, None, cancel).await;
            if let Ok(r) = &answer {
                let done = Completion {
                    response: r.clone(),
                    source: src.config.name.clone(),
                    model: src.config.model.clone(),
                };
                pool.borrow_mut()
                    .record(&crate::usage::Purpose::of(crate::usage::Kind::Vision), &done, &ask);
            }
            match answer {
                Ok(r) if !r.content.trim().is_empty() => {
                    tracing::info!(describer = %src.config.name, chars = r.content.len(), "image described for a source without vision");
                    descriptions.insert(url, r.content);
                }
                Ok(_) => {
                    tracing::warn!(describer = %src.config.name, "the image description came back empty; the model gets the note")
                }
                Err(CallError::Cancelled) => return Err(LlmError::Cancelled),
                Err(e) => {
                    tracing::warn!(describer = %src.config.name, "describing an image failed ({}); the model gets the note", match e {
                        CallError::Auth(m) => m,
                        CallError::Failed(a) => a.to_string(),
                        CallError::Cancelled => String::new(),
                    })
                }
            }
        }
    } else {
        tracing::info!("no vision-capable source to describe images: the model is told it cannot see them");
    }
    Ok(vision::without_images(request, &descriptions))
}

fn one_line(body: &str, max: usize) -> String {
    let flat: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    flat.chars().take(max).collect()
}

async fn call_source(
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
    let body = src
        .adapter
        .transform_request_cached(&mut req)
        .await
        .map_err(AttemptError::from)?;
    let url = src
        .adapter
        .url(&cfg.base_url, &req.model, stream)
        .map_err(AttemptError::from)?;
    let timestamp = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let meta = HeaderMeta {
        url: &url,
        method: "POST",
        body: &body,
        api_key: &cfg.api_key,
        timestamp,
        source: SourceName { name: &cfg.name },
    };
    let headers = header_map(&src.adapter.headers(&meta).map_err(AttemptError::from)?)?;
    let started = Instant::now();
    // The first-byte clock includes connecting (bounded on its own by the client's
    // connect timeout): reqwest does not report when a connection is up, and the
    // operator's question is "how long until the vendor answers".
    let send = src.client.post(&url).headers(headers).body(body).send();
    let mut resp = tokio::select! {
        r = tokio::time::timeout(cfg.first_byte_timeout, send) => match r {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => return Err(send_error(&url, cfg, &e).into()),
            Err(_) => {
                return Err(AttemptError::NoFirstByte {
                    url,
                    after: cfg.first_byte_timeout,
                    source_name: cfg.name.clone(),
                }
                .into());
            }
        },
        _ = cancel.cancelled() => return Err(CallError::Cancelled),
    };
    let mut body = BodyReader {
        cfg,
        deadline: started + MAX_CALL,
        bytes: 0,
        progress_at: Instant::now(),
        since_progress: 0,
    };
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, SystemTime::now()));
    if status != 200 {
        // The error body helps the message; a broken or silent one is not worth waiting for.
        let mut text = Vec::new();
        while let Ok(Some(piece)) = body.next(&mut resp, cancel).await {
            text.extend_from_slice(piece.as_ref());
            if text.len() > MAX_BODY {
                break;
            }
        }
        if cancel.is_cancelled() {
            return Err(CallError::Cancelled);
        }
        let text = String::from_utf8_lossy(&text);
        let msg = src
            .adapter
            .transform_error(status, &text)
            .unwrap_or_else(|| format!("api error {status}: {}", one_line(&text, 300)));
        return Err(if status == 401 || status == 403 {
            CallError::Auth(msg)
        } else {
            AttemptError::Status {
                message: msg,
                retry_after,
            }
            .into()
        });
    }
    if !stream {
        let mut bytes = Vec::new();
        while let Some(piece) = body.next(&mut resp, cancel).await? {
            bytes.extend_from_slice(piece.as_ref());
            if bytes.len() > MAX_BODY {
                return Err(AttemptError::TooLarge.into());
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        return src.adapter.transform_response(&text).map_err(|e| {
            AttemptError::BadResponse {
                message: e.to_string(),
                bytes: bytes.len(),
                start: one_line(&text, 200),
            }
            .into()
        });
    }
    let mut acc = Accumulator::new(req.max_tokens);
    let mut lines = LineState {
        buf: Vec::new(),
        first: true,
        done: false,
    };
    while let Some(piece) = body.next(&mut resp, cancel).await? {
        lines.buf.extend_from_slice(piece.as_ref());
        while let Some(pos) = lines.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = lines.buf.drain(..=pos).collect();
            lines.line(src, &line, &mut acc, deltas, body.bytes)?;
            body.progressed();
        }
        if lines.buf.len() > MAX_BODY {
            return Err(AttemptError::TooLarge.into());
        }
    }
    // A last line without its newline (the connection closed right after it).
    let rest = std::mem::take(&mut lines.buf);
    lines.line(src, &rest, &mut acc, deltas, body.bytes)?;
    if !lines.done {
        return Err(AttemptError::Truncated {
            bytes: body.bytes,
            marker: src.adapter.end_marker.clone(),
        }
        .into());
    }
    Ok(acc.finish())
}

/// Reads a response body piece by piece under the source's idle timeout and the
/// overall call limit, counting bytes for the error messages. The idle clock runs
/// from the last *progress* — a complete stream line, or [`PROGRESS_BYTES`] of body —
/// not from the last byte, so a vendor that drips bytes is as down as a silent one.
struct BodyReader<'a> {
    cfg: &'a SourceConfig,
    deadline: Instant,
    bytes: usize,
    progress_at: Instant,
    since_progress: usize,
}

impl BodyReader<'_> {
    /// A complete unit (a stream line) arrived.
    fn progressed(&mut self) {
        self.progress_at = Instant::now();
        self.since_progress = 0;
    }

    /// The next piece; `None` at the body's end (for a close-delimited body: the close).
    async fn next(
        &mut self,
        resp: &mut reqwest::Response,
        cancel: &CancellationToken,
    ) -> Result<Option<impl AsRef<[u8]> + use<>>, CallError> {
        let now = Instant::now();
        let left = self.deadline.saturating_duration_since(now);
        let idle_left = self
            .cfg
            .idle_timeout
            .saturating_sub(now.saturating_duration_since(self.progress_at));
        let wait = idle_left.min(left);
        let piece = tokio::select! {
            r = tokio::time::timeout(wait, resp.chunk()) => r,
            _ = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        match piece {
            Ok(Ok(Some(p))) => {
                self.bytes += p.len();
                self.since_progress += p.len();
                if self.since_progress >= PROGRESS_BYTES {
                    self.progressed();
                }
                Ok(Some(p))
            }
            Ok(Ok(None)) => Ok(None),
            Ok(Err(e)) => Err(AttemptError::Broken {
                bytes: self.bytes,
                detail: chain(&e),
            }
            .into()),
            Err(_) if left < idle_left => Err(AttemptError::TooLong { bytes: self.bytes }.into()),
            Err(_) if self.since_progress > 0 => Err(AttemptError::Slow {
                after: self.cfg.idle_timeout,
                recent: self.since_progress,
                bytes: self.bytes,
                source_name: self.cfg.name.clone(),
            }
            .into()),
            Err(_) => Err(AttemptError::Idle {
                after: self.cfg.idle_timeout,
                bytes: self.bytes,
                source_name: self.cfg.name.clone(),
            }
            .into()),
        }
    }
}

/// Where a stream's line parsing stands.
struct LineState {
    buf: Vec<u8>,
    first: bool,
    /// The end marker (`[DONE]` or a `done` chunk) arrived.
    done: bool,
}

impl LineState {
    /// Handles one line of an SSE or NDJSON stream.
    fn line(
        &mut self,
        src: &Source,
        line: &[u8],
        acc: &mut Accumulator,
        deltas: Option<&UnboundedSender<Delta>>,
        bytes: usize,
    ) -> Result<(), CallError> {
        let line = String::from_utf8_lossy(line);
        let line = line.trim();
        let payload = match src.adapter.stream_format {
            StreamFormat::Sse => match line.strip_prefix("data:") {
                Some(p) => p.trim(),
                None => return Ok(()),
            },
            StreamFormat::Ndjson => line,
        };
        if payload.is_empty() {
            return Ok(());
        }
        if payload == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk = match src.adapter.transform_stream_chunk(payload) {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(()),
            Err(e) => return Err(AttemptError::from(e).into()),
        };
        let first = std::mem::take(&mut self.first);
        if (first && is_error_only(&chunk)) || (chunk.done && chunk.finish_reason == "error") {
            return Err(AttemptError::StreamError {
                reason: chunk.finish_reason,
                bytes,
            }
            .into());
        }
        let delta = acc.push(&chunk);
        if let Some(tx) = deltas
            && (!delta.content.is_empty() || !delta.reasoning.is_empty())
        {
            let _ = tx.send(delta);
        }
        self.done |= chunk.done;
        Ok(())
    }
}

/// The adapter's headers as a header map (inserted, so an adapter's `Content-Type`
/// replaces the default instead of doubling it).
fn header_map(headers: &[(String, String)]) -> Result<reqwest::header::HeaderMap, AttemptError> {
    use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
    let mut map = HeaderMap::new();
    map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes());
        let value = HeaderValue::from_str(v);
        match (name, value) {
            (Ok(n), Ok(v)) => {
                map.insert(n, v);
            }
            _ => {
                return Err(AttemptError::InvalidHeader { name: k.clone() });
            }
        }
    }
    Ok(map)
}

/// Names the cause of a failed send: connect timeout, unreachable, or other.
fn send_error(url: &str, cfg: &SourceConfig, e: &reqwest::Error) -> AttemptError {
    if e.is_connect() && e.is_timeout() {
        AttemptError::ConnectTimeout {
            url: url.to_owned(),
            after: cfg.connect_timeout,
            source_name: cfg.name.clone(),
        }
    } else {
        AttemptError::Unreachable {
            url: url.to_owned(),
            detail: chain(e),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates_and_is_capped() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after(" 120 ", now), Some(Duration::from_secs(120)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(90));
        assert_eq!(parse_retry_after(&later, now), Some(Duration::from_secs(90)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(90));
        assert_eq!(parse_retry_after(&past, now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("999999999", now),
            Some(Duration::from_secs(24 * 3600))
        );
        assert_eq!(parse_retry_after("soon", now), None);
        let e = AttemptError::Status {
            message: "429".into(),
            retry_after: Some(Duration::from_secs(120)),
        };
        assert_eq!(e.retry_after(), Some(Duration::from_secs(120)));
        assert!(!e.is_timeout());
    }

    #[test]
    fn the_remembered_prompt_count_is_the_count_anew() {
        use super::super::types::{Message, ToolDef, ToolFunction, ToolList};
        use crate::llm::tokens::count;
        let tool = |name: &str| ToolDef {
            kind: "function".into(),
            function: ToolFunction {
                name: name.into(),
                description: format!("{name}: reads a page.\nSays what it found."),
                parameters: Value::Null,
            },
        };
        let mut request = crate::agent::selftest::probe_request();
        request.tools = ToolList::new(vec![tool("web_fetch"), tool("cmd_run")]);
        let anew = |r: &CompletionRequest| {
            let text: usize = r
                .messages
                .iter()
                .map(|m| count(m.content.as_str().unwrap_or("")) + 4)
                .sum();
            (text + count(&serde_json::to_string(&r.tools).unwrap())) as u64
        };
        let mut pool = Pool::default();
        for turn in 0..3 {
            request.messages = vec![
                Message::text("system", "You are HomeAgent.\n\nBe brief."),
                Message::text(
                    "system",
                    format!("## Timeline\n- [12:0{turn}] owner: turn {turn}\n/cmd\n  indented\n"),
                ),
                Message::text("user", format!("turn {turn}")),
            ];
            assert_eq!(pool.prompt_tokens(&request), anew(&request), "turn {turn}");
            // The same list again, then another list: the other's schemas count.
            assert_eq!(pool.prompt_tokens(&request), anew(&request));
            request.tools = ToolList::new(vec![tool(&format!("tool_{turn}"))]);
            assert_eq!(pool.prompt_tokens(&request), anew(&request));
        }
    }
}
