//! `kernel/memory/embedder`: owns the active embedder on its own thread (ONNX inference
//! blocks), answers query embeddings for the agent and the API, and keeps every
//! document embedded in the active space — recomputing in the background, with
//! progress, when the space changes (another model, another dimension). Context events
//! and passages (archived events) are embedded too, in the same batched steps: they
//! are the dense side of per-turn recall (`memory::recall`). A turn never waits for
//! them; an event archived with its vector hands it to its passage.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use parking_lot::RwLock;
use serde::Serialize;

use super::backend::{Embedder, resolve};
use super::remote::RemoteEmbedder;
use super::{EmbedConfig, EmbedError, EmbedderKind, Space};
use crate::host::{Handles, Host, HostContext, KernelActor};
use crate::memory::store::{MemoryStore, QueryVector, VectorRef};

/// Rows embedded per step while nobody is talking; between steps other messages (query
/// embeddings) are served, so a query waits for at most the step under way.
const STEP: usize = 32;
/// Rows per step while a conversation is going on (a query came within
/// [`ACTIVE_FOR`]): ONNX batches are cheaper per row, but a turn's query would wait
/// behind a whole 32-row batch (measured: +20 ms a turn); at 4 rows it waits for a few
/// milliseconds, and the backlog still drains between turns.
const ACTIVE_STEP: usize = 4;
/// How long after a query the embedder keeps its steps small.
const ACTIVE_FOR: Duration = Duration::from_secs(30);
/// How often the store is checked for rows without a vector.
const POLL: Duration = Duration::from_secs(2);
/// Pause after a failed step before trying again.
const RETRY: Duration = Duration::from_secs(30);

/// What the status API shows about embeddings.
#[derive(Debug, Clone, Serialize)]
pub struct EmbedStatus {
    /// `core.memory.embedder` as configured.
    pub configured: EmbedderKind,
    /// `onnx`, `remote` or `tfidf` (no dense vectors).
    pub active: &'static str,
    /// The active space, when there is one.
    pub space: Option<Space>,
    /// Why the configured embedder is not active (missing model, empty URL...).
    pub fallback: Option<String>,
    /// Documents, and how many have a vector of the active space.
    pub rows: usize,
    pub embedded: usize,
    /// A background (re)computation in progress.
    pub recompute: Option<Progress>,
    /// The last failure of a background step, if the last step failed.
    pub last_error: Option<String>,
    /// Whether the model is in memory. ONNX (~180 MB resident) is loaded when the first
    /// document needs a vector, not at start: a daemon without documents stays small.
    pub loaded: bool,
    /// What embedding a turn's query costs (the dense side of recall), over the recent
    /// queries: `homed bench turn` reports it beside the kernel overhead.
    pub query: QueryTimes,
}

/// Durations of the recent query embeddings (a bounded window, so the figures follow
/// the current load and model).
#[derive(Debug, Clone, Default, Serialize)]
pub struct QueryTimes {
    /// Queries embedded since this embedder was configured.
    pub count: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    #[serde(skip)]
    recent_us: std::collections::VecDeque<u32>,
}

impl QueryTimes {
    const WINDOW: usize = 256;

    /// Records one query embedding and refreshes the percentiles.
    pub fn record(&mut self, took: Duration) {
        self.count += 1;
        if self.recent_us.len() == Self::WINDOW {
            self.recent_us.pop_front();
        }
        self.recent_us
            .push_back(u32::try_from(took.as_micros()).unwrap_or(u32::MAX));
        let mut v: Vec<u32> = self.recent_us.iter().copied().collect();
        v.sort_unstable();
        let at = |p: f64| f64::from(v[((v.len() - 1) as f64 * p).round() as usize]) / 1000.0;
        self.p50_ms = at(0.5);
        self.p95_ms = at(0.95);
    }
}

/// Progress of a background computation.
#[derive(Debug, Clone, Serialize)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
    pub started_ms: i64,
}

/// The embedder as its users hold it: the address, and the status (read without a
/// message, e.g. to skip embedding a query when no document has a vector).
#[derive(Clone)]
pub struct EmbedderHandle {
    pub addr: crate::addr::TAddr<EmbedderActor>,
    pub status: StatusHandle,
}

impl EmbedderHandle {
    /// Whether rows get vectors at all (a dense embedder is active, loading, or found
    /// and waiting for its first document): without one, poking the embedder after a
    /// commit would wake its thread for nothing.
    pub fn embeds_rows(&self) -> bool {
        self.status.read().active != "tfidf"
    }

    /// Whether some document has a vector of the active space (else a query vector
    /// would have nothing to meet).
    pub fn has_dense_documents(&self) -> bool {
        let s = self.status.read();
        s.space.is_some() && s.embedded > 0
    }
}

/// Asks `embedder` for the embedding of `text`, waiting at most `wait` (a turn never
/// waits long for its dense side: BM25 alone is the fallback). Nothing is asked when
/// no document has a vector: a turn pays for ONNX inference only when it can help.
pub async fn embed_query(embedder: Option<&EmbedderHandle>, text: &str, wait: Duration) -> Option<QueryVector> {
    match query_vector_soon(embedder, text, wait) {
        Some(pending) => pending.await,
        None => None,
    }
}

/// A query's vector on its way: the embedder is already working on it when this is
/// made, and any number of tiers may wait for it (each gets a copy). Per-turn recall
/// hands it to the tiers with the query, so they rank BM25 while the embedder runs.
pub type PendingVector = futures_util::future::Shared<futures_util::future::BoxFuture<'static, Option<QueryVector>>>;

/// [`embed_query`] without the wait: `None` when nothing is asked (no embedder, an empty
/// query, no document with a vector), else the pending answer (`None` in it: the
/// embedder failed or took longer than `wait`). What is embedded is the query without
/// the names it mentions ([`crate::memory::recall::meaning_query`]: BM25 matches those).
pub fn query_vector_soon(embedder: Option<&EmbedderHandle>, text: &str, wait: Duration) -> Option<PendingVector> {
    use futures_util::FutureExt as _;
    let e = embedder?;
    if text.trim().is_empty() || !e.has_dense_documents() {
        return None;
    }
    let asked = e.addr.request(EmbedQuery(crate::memory::recall::meaning_query(text)));
    let answer = async move {
        // The deadline starts when the first tier waits, on that tier's runtime.
        match tokio::time::timeout(wait, asked).await {
            Ok(Ok(v)) => v,
            Ok(Err(_)) => None,
            Err(_) => {
                tracing::debug!("query embedding skipped: the embedder did not answer within {wait:?}");
                None
            }
        }
    };
    Some(answer.boxed().shared())
}

/// Shared, lock-protected status (the API reads it without a message round trip).
pub type StatusHandle = Arc<RwLock<EmbedStatus>>;

pub struct EmbedderActor {
    cfg: EmbedConfig,
    data_dir: PathBuf,
    /// Its own connection to `memory.db` (WAL: readers and the context actor's writer
    /// do not block each other).
    store: MemoryStore,
    embedder: Option<Embedder>,
    status: StatusHandle,
    /// A step is running or scheduled.
    filling: bool,
    /// Do not start steps before this (after a failure).
    quiet_until: Option<Instant>,
    /// Last progress log, to log every 10 %.
    logged_pct: usize,
    /// ONNX was chosen but not loaded yet (no document needs a vector so far).
    deferred: bool,
    started: Option<Instant>,
    /// When the last query embedding was asked (steps stay small for a while after).
    last_query: Option<Instant>,
}

fn initial_status(cfg: &EmbedConfig) -> EmbedStatus {
    EmbedStatus {
        configured: cfg.kind,
        active: "tfidf",
        space: None,
        fallback: None,
        rows: 0,
        embedded: 0,
        recompute: None,
        last_error: None,
        loaded: false,
        query: QueryTimes::default(),
    }
}

impl EmbedderActor {
    pub fn new(cfg: EmbedConfig, data_dir: PathBuf, store: MemoryStore, status: StatusHandle) -> Self {
        let a = Self {
            cfg,
            data_dir,
            store,
            embedder: None,
            status,
            filling: false,
            quiet_until: None,
            logged_pct: 0,
            deferred: false,
            started: None,
            last_query: None,
        };
        a.status.write().active = "loading";
        a
    }

    /// A status handle for a new actor.
    pub fn status_handle(cfg: &EmbedConfig) -> StatusHandle {
        Arc::new(RwLock::new(initial_status(cfg)))
    }

    fn apply_config(&mut self) {
        use super::EmbedderKind;
        let wants_onnx = matches!(self.cfg.kind, EmbedderKind::Onnx | EmbedderKind::Auto);
        let no_documents = self.store.vector_counts("", true).is_ok_and(|(rows, _)| rows == 0);
        if wants_onnx && no_documents && self.cfg.onnx_files(&self.data_dir).is_ok() {
            // Found, but nothing to embed yet: load on first need (see `loaded`).
            self.embedder = None;
            self.deferred = true;
            let mut st = initial_status(&self.cfg);
            st.active = "onnx";
            *self.status.write() = st;
            tracing::info!("ONNX embedder found; it loads when the first document needs a vector");
            return;
        }
        self.deferred = false;
        let r = resolve(&self.cfg, &self.data_dir);
        let mut st = initial_status(&self.cfg);
        match &r.embedder {
            Some(e) => {
                st.active = match e {
                    Embedder::Onnx(_) => "onnx",
                    Embedder::Remote(_) => "remote",
                };
                st.space = Some(e.space().clone());
                tracing::info!(embedder = st.active, space = %e.space().fingerprint(), "embedder active");
            }
            None => match &r.fallback {
                Some(why) => tracing::warn!("embeddings fall back to TF-IDF/BM25: {why}"),
                None => tracing::info!("embeddings off (core.memory.embedder = tfidf): TF-IDF/BM25 only"),
            },
        }
        st.fallback = r.fallback;
        st.loaded = r.embedder.is_some();
        self.embedder = r.embedder;
        *self.status.write() = st;
        self.quiet_until = None;
        self.logged_pct = 0;
        self.refresh_counts();
    }

    fn fingerprint(&self) -> Option<String> {
        self.embedder.as_ref().map(|e| e.space().fingerprint())
    }

    fn refresh_counts(&self) {
        let Some(fp) = self.fingerprint() else { return };
        if let Ok((rows, embedded)) = self.store.vector_counts(&fp, true) {
            let mut st = self.status.write();
            st.rows = rows;
            st.embedded = embedded;
            if let Some(e) = &self.embedder {
                st.space = Some(e.space().clone());
            }
        }
    }

    /// Starts a step if there is work and none is running.
    fn maybe_fill(&mut self, ctx: &mut HostContext<Self>) {
        if self.deferred && self.store.vector_counts("", true).is_ok_and(|(rows, _)| rows > 0) {
            tracing::info!("the first document needs a vector: loading the ONNX embedder");
            self.deferred = false;
            self.apply_config();
        }
        if self.filling || self.embedder.is_none() || self.quiet_until.is_some_and(|t| Instant::now() < t) {
            return;
        }
        let fp = self.fingerprint().unwrap_or_default();
        let step = if self.last_query.is_some_and(|t| t.elapsed() < ACTIVE_FOR) {
            ACTIVE_STEP
        } else {
            STEP
        };
        let batch = match self.store.missing_vectors(&fp, step, true) {
            Ok(b) => b,
            Err(e) => {
                self.fail(format!("reading rows to embed: {e}"));
                return;
            }
        };
        if batch.is_empty() {
            // Idle poll: keep the counts the status shows current.
            self.finish();
            return;
        }
        if self.status.read().recompute.is_none() {
            let (rows, embedded) = self.store.vector_counts(&fp, true).unwrap_or((batch.len(), 0));
            let total = rows.saturating_sub(embedded).max(batch.len());
            tracing::info!(rows = total, space = %fp, "embedding rows in the background");
            self.status.write().recompute = Some(Progress {
                done: 0,
                total,
                started_ms: crate::clock::now_ms(),
            });
            self.started = Some(Instant::now());
            self.logged_pct = 0;
        }
        self.filling = true;
        let texts: Vec<String> = batch.iter().map(|(_, t)| t.clone()).collect();
        let refs: Vec<VectorRef> = batch.into_iter().map(|(r, _)| r).collect();
        match self.embedder.as_mut() {
            Some(Embedder::Onnx(e)) => {
                let res = e.embed(&texts.iter().map(String::as_str).collect::<Vec<_>>());
                self.after_step(refs, res);
                ctx.run_later(Duration::ZERO, |host, ctx| host.notify(ctx, Fill));
            }
            Some(Embedder::Remote(e)) => {
                let mut e = e.clone();
                let fut = async move {
                    let res = e.embed(&texts.iter().map(String::as_str).collect::<Vec<_>>()).await;
                    (e, res)
                };
                ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(fut).map(
                    move |(e, res), host: &mut Host<Self>, ctx: &mut HostContext<Self>| {
                        let me = host.inner();
                        if let Some(Embedder::Remote(cur)) = me.embedder.as_mut() {
                            // Keep the dimension it learned (same URL and model).
                            if cur.space().model == e.space().model {
                                *cur = e;
                            }
                        }
                        me.after_step(refs, res);
                        host.notify(ctx, Fill);
                    },
                ));
            }
            None => self.filling = false,
        }
    }

    fn after_step(&mut self, refs: Vec<VectorRef>, res: Result<Vec<Vec<f32>>, EmbedError>) {
        self.filling = false;
        let Some(fp) = self.fingerprint() else { return };
        let vectors = match res {
            Ok(v) => v,
            Err(e) => return self.fail(e.to_string()),
        };
        let items: Vec<(VectorRef, Vec<f32>)> = refs.into_iter().zip(vectors).collect();
        if let Err(e) = self.store.put_vectors(&fp, &items) {
            return self.fail(format!("storing vectors: {e}"));
        }
        let mut st = self.status.write();
        st.last_error = None;
        if let Some(p) = st.recompute.as_mut() {
            p.done += items.len();
            p.total = p.total.max(p.done);
            let pct = p.done * 100 / p.total.max(1);
            if pct >= self.logged_pct + 10 {
                self.logged_pct = pct - pct % 10;
                tracing::info!(done = p.done, total = p.total, "embedding progress {pct}%");
            }
        }
    }

    fn finish(&mut self) {
        let done = self.status.write().recompute.take();
        if let Some(p) = done {
            let secs = self.started.map_or(0.0, |t| t.elapsed().as_secs_f64());
            tracing::info!(vectors = p.done, seconds = format!("{secs:.1}"), "embedding finished");
        }
        self.refresh_counts();
    }

    fn fail(&mut self, why: String) {
        self.filling = false;
        tracing::warn!("embedding step failed, retrying in {}s: {why}", RETRY.as_secs());
        self.status.write().last_error = Some(why);
        self.quiet_until = Some(Instant::now() + RETRY);
    }
}

impl KernelActor for EmbedderActor {
    const KIND: &'static str = "embedder";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        // Loading a model takes a while: do it here, on this actor's own thread, not
        // in the constructor the boot waits for.
        self.apply_config();
        ctx.run_interval(POLL, |host, ctx| host.notify(ctx, Fill));
        ctx.run_later(Duration::ZERO, |host, ctx| host.notify(ctx, Fill));
    }
}

/// Look for rows to embed (timer; also sent after each step).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Fill;

impl Handles<Fill> for EmbedderActor {
    type Reply = ();
    fn handle(&mut self, _: Fill, ctx: &mut HostContext<Self>) {
        self.maybe_fill(ctx);
    }
}

/// The embedding of a query in the active space (`None` without an embedder or on
/// failure; the caller then ranks by BM25 alone).
#[derive(Message)]
#[rtype(result = "Option<QueryVector>")]
pub struct EmbedQuery(pub String);

impl Handles<EmbedQuery> for EmbedderActor {
    type Reply = ResponseActFuture<Host<Self>, Option<QueryVector>>;
    fn handle(&mut self, EmbedQuery(text): EmbedQuery, _: &mut HostContext<Self>) -> Self::Reply {
        let (started, status) = (Instant::now(), self.status.clone());
        self.last_query = Some(started);
        Box::pin(self.embed_texts(vec![text]).map(move |out, _, _| {
            if out.is_some() {
                status.write().query.record(started.elapsed());
            }
            out.and_then(|(space, mut v)| v.pop().map(|vec| QueryVector { space, vec }))
        }))
    }
}

impl EmbedderActor {
    /// Embeds `texts` with the active embedder: at once for ONNX (this actor's own
    /// thread), as a future for the remote one. `None` without an embedder or on
    /// failure (logged).
    fn embed_texts(&mut self, texts: Vec<String>) -> ResponseActFuture<Host<Self>, Option<Embedded>> {
        let log = |e: EmbedError| {
            tracing::warn!("embedding failed: {e}");
            None
        };
        match self.embedder.as_mut() {
            Some(Embedder::Onnx(e)) => {
                let fp = e.space().fingerprint();
                let out = e
                    .embed(&texts.iter().map(String::as_str).collect::<Vec<_>>())
                    .map_or_else(log, |v| Some((fp, v)));
                Box::pin(actix::fut::ready(out))
            }
            Some(Embedder::Remote(e)) => {
                let mut e: RemoteEmbedder = e.clone();
                Box::pin(actix::fut::wrap_future::<_, Host<Self>>(async move {
                    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                    match e.embed(&refs).await {
                        Ok(v) => Some((e.space().fingerprint(), v)),
                        Err(err) => log(err),
                    }
                }))
            }
            None => Box::pin(actix::fut::ready(None)),
        }
    }
}

/// Embeddings of several texts in the active space: `(fingerprint, vectors)`, or
/// `None` without an embedder or on failure.
#[derive(Message)]
#[rtype(result = "Option<Embedded>")]
pub struct EmbedTexts(pub Vec<String>);

/// Vectors and the fingerprint of the space they are in.
pub type Embedded = (String, Vec<Vec<f32>>);

impl Handles<EmbedTexts> for EmbedderActor {
    type Reply = ResponseActFuture<Host<Self>, Option<Embedded>>;
    fn handle(&mut self, EmbedTexts(texts): EmbedTexts, _: &mut HostContext<Self>) -> Self::Reply {
        self.embed_texts(texts)
    }
}

/// Has the embedder look again with the settings in force now: what a change of its
/// settings does, and what a finished set-up of the local model needs (the files it
/// looks for are there now). Logs instead of failing: the caller has nobody to tell.
pub async fn reload_from_settings(
    config: &crate::addr::TAddr<crate::config::ConfigActor>,
    embedder: &crate::addr::TAddr<EmbedderActor>,
) {
    match config.send(crate::config::ReadSettings).await {
        Ok(Ok(all)) => {
            let cfg = super::embed_config(&crate::config::MemoryConfig::read(&all));
            let _ = embedder.send(Reconfigure(cfg)).await;
        }
        Ok(Err(e)) => tracing::error!("cannot read settings to reconfigure the embedder: {e}"),
        Err(e) => tracing::error!("cannot reach the settings actor to reconfigure the embedder: {e}"),
    }
}

/// New settings: rebuild the embedder; a new space starts a background recompute.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Reconfigure(pub EmbedConfig);

impl Handles<Reconfigure> for EmbedderActor {
    type Reply = ();
    fn handle(&mut self, Reconfigure(cfg): Reconfigure, ctx: &mut HostContext<Self>) {
        let before = self.fingerprint();
        self.cfg = cfg;
        self.apply_config();
        if self.fingerprint() != before {
            tracing::info!(from = ?before, to = ?self.fingerprint(), "embedding space changed");
        }
        self.maybe_fill(ctx);
    }
}
