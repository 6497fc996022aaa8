//! `kernel/memory/media`: the media blocks of `memory.db` and their multimodal space.
//!
//! It stores checked images (content ids, duplicates merged), hands out their bytes
//! one block at a time, deletes blocks with their bytes, links blocks to what the
//! model committed them to, and keeps every block embedded in the active multimodal
//! space: blocks whose vector is missing or of another space are re-embedded in the
//! background, in small steps, with progress in [`MediaStatus`] and the log. A text
//! query is ranked against the in-memory index of the active space's vectors (ids and
//! vectors only — the bytes are never loaded to rank).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use parking_lot::RwLock;
use serde::Serialize;

use super::check::{Image, Limits};
use super::space::{Item, RemoteSpace, SpaceError};
use super::store::{MediaMeta, MediaStore, Put};
use crate::config::MediaConfig;
use crate::host::{Handles, Host, HostContext, KernelActor};
use crate::memory::store::MemoryError;

/// Blocks embedded per background step (between steps other messages are served).
const STEP: usize = 4;
/// How often the store is checked for blocks without a vector of the active space.
const POLL: Duration = Duration::from_secs(2);
/// Pause after a failed step before trying again.
const RETRY: Duration = Duration::from_secs(30);

/// A background step's result: the space as it learned its dimension, and the vectors.
type StepResult = (RemoteSpace, Result<Vec<(String, Vec<f32>)>, SpaceError>);

/// What `GET /api/v1/memory/media` shows about the media tier.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MediaStatus {
    /// `none` or `remote` (`core.memory.multimodal_space.provider`).
    pub provider: String,
    /// The active space's fingerprint, once its dimension is known.
    pub space: Option<String>,
    pub blocks: usize,
    /// Blocks with a vector of the active space.
    pub embedded: usize,
    /// A background (re-)embedding in progress: blocks done of total.
    pub reembed: Option<(usize, usize)>,
    pub last_error: Option<String>,
}

/// The media tier as its users hold it: the address, the status and the settings
/// (read without a message: the HTTP edge checks attachments against them).
#[derive(Clone)]
pub struct MediaHandle {
    pub addr: crate::addr::TAddr<MediaActor>,
    pub status: Arc<RwLock<MediaStatus>>,
    pub config: Arc<RwLock<MediaConfig>>,
}

impl MediaHandle {
    /// The input limits of the current settings.
    pub fn limits(&self) -> Limits {
        let c = self.config.read();
        Limits {
            max_bytes: c.max_bytes,
            max_count: c.max_count,
        }
    }

    /// Whether a text query could meet an image: a space is active, some block has a
    /// vector in it, and recall is on. Otherwise a turn asks nothing (no cost).
    pub fn can_recall(&self) -> bool {
        let s = self.status.read();
        s.space.is_some() && s.embedded > 0 && self.config.read().recall_k > 0
    }
}

pub struct MediaActor {
    store: MediaStore,
    cfg: MediaConfig,
    space: Option<RemoteSpace>,
    status: Arc<RwLock<MediaStatus>>,
    config: Arc<RwLock<MediaConfig>>,
    /// The active space's vectors (id, unit vector), loaded on first use, kept in step
    /// with every vector written and block deleted.
    index: Option<Vec<(String, Vec<f32>)>>,
    filling: bool,
    quiet_until: Option<Instant>,
    bus: Option<crate::bus::EventBus>,
    settings: Option<crate::addr::TAddr<crate::config::ConfigActor>>,
    /// Settings changed on the bus, waiting for the next tick.
    pending: Arc<parking_lot::Mutex<Option<MediaConfig>>>,
}

/// The space `cfg` asks for (`None` for `none` or without a URL, logged).
fn space_of(cfg: &MediaConfig) -> Option<RemoteSpace> {
    match cfg.provider.trim() {
        "remote" if !cfg.base_url.trim().is_empty() => Some(RemoteSpace::new(
            cfg.base_url.trim(),
            cfg.model.trim(),
            cfg.api_key.expose().trim(),
        )),
        "remote" => {
            tracing::warn!(
                "core.memory.multimodal_space.provider = remote but base_url is empty: media blocks get no vectors"
            );
            None
        }
        _ => None,
    }
}

impl MediaActor {
    pub fn new(store: MediaStore, cfg: MediaConfig) -> Self {
        Self {
            space: space_of(&cfg),
            status: Arc::new(RwLock::new(MediaStatus {
                provider: cfg.provider.clone(),
                ..Default::default()
            })),
            config: Arc::new(RwLock::new(cfg.clone())),
            cfg,
            store,
            index: None,
            filling: false,
            quiet_until: None,
            bus: None,
            settings: None,
            pending: Arc::default(),
        }
    }

    /// Writes its status and settings into cells a handle already holds (a restarted
    /// instance keeps the handle valid).
    pub fn with_cells(mut self, status: Arc<RwLock<MediaStatus>>, config: Arc<RwLock<MediaConfig>>) -> Self {
        *status.write() = self.status.read().clone();
        *config.write() = self.cfg.clone();
        self.status = status;
        self.config = config;
        self
    }

    /// Follow `core.memory.multimodal_space.*` / `core.input_processing.image.*` /
    /// `core.memory.media.*` changes published on `bus`, re-reading them from `config`.
    pub fn follow_settings(
        mut self,
        bus: crate::bus::EventBus,
        config: crate::addr::TAddr<crate::config::ConfigActor>,
    ) -> Self {
        self.bus = Some(bus);
        self.settings = Some(config);
        self
    }

    pub fn status(&self) -> Arc<RwLock<MediaStatus>> {
        self.status.clone()
    }

    pub fn config(&self) -> Arc<RwLock<MediaConfig>> {
        self.config.clone()
    }

    fn fingerprint(&self) -> Option<String> {
        self.space.as_ref().and_then(RemoteSpace::fingerprint)
    }

    fn refresh_counts(&self) {
        let blocks = self.store.count().unwrap_or(0);
        let fp = self.fingerprint();
        let embedded = fp.as_deref().map_or(0, |f| self.store.embedded(f).unwrap_or(0));
        let mut s = self.status.write();
        s.blocks = blocks;
        s.embedded = embedded;
        s.space = fp;
        s.provider = self.cfg.provider.clone();
    }

    fn index(&mut self) -> &[(String, Vec<f32>)] {
        if self.index.is_none() {
            let fp = self.fingerprint().unwrap_or_default();
            self.index = Some(self.store.vectors(&fp).unwrap_or_else(|e| {
                tracing::warn!("media vectors could not be read: {e}");
                Vec::new()
            }));
        }
        self.index.as_deref().unwrap_or_default()
    }

    /// The `k` blocks nearest to `query` (a unit vector of the active space) with a
    /// cosine of at least `min_score`, best first.
    pub fn rank(&mut self, query: &[f32], k: usize, min_score: f32) -> Vec<(String, f32)> {
        rank(self.index(), query, k, min_score)
    }

    /// Stores checked images (each committed when this returns).
    pub fn store_images(&mut self, images: &[Image], source: &str) -> Result<Vec<(MediaMeta, Put)>, MediaTierError> {
        let now = crate::clock::now_ms();
        let mut out = Vec::with_capacity(images.len());
        for img in images {
            let (id, put) = self.store.put(img, source, now)?;
            tracing::info!(block = %id, mime = img.mime, width = img.width, height = img.height, bytes = img.data.len(), ?put, "media block stored");
            let meta = self
                .store
                .meta(&id)?
                .ok_or_else(|| MediaTierError::Vanished(id.clone()))?;
            out.push((meta, put));
        }
        self.refresh_counts();
        Ok(out)
    }

    fn apply(&mut self, cfg: MediaConfig) {
        let space_changed = (
            cfg.provider.as_str(),
            cfg.base_url.as_str(),
            cfg.model.as_str(),
            cfg.api_key.expose(),
        ) != (
            self.cfg.provider.as_str(),
            self.cfg.base_url.as_str(),
            self.cfg.model.as_str(),
            self.cfg.api_key.expose(),
        );
        *self.config.write() = cfg.clone();
        self.cfg = cfg;
        if space_changed {
            tracing::info!(provider = %self.cfg.provider, "multimodal space changed: media blocks are re-embedded in the background");
            self.space = space_of(&self.cfg);
            self.index = None;
            self.quiet_until = None;
            self.status.write().last_error = None;
        }
        self.refresh_counts();
    }

    /// One background step: learn the space's dimension, then embed up to [`STEP`]
    /// blocks whose vector is missing or of another space.
    fn maybe_fill(&mut self, ctx: &mut HostContext<Self>) {
        if self.filling || self.quiet_until.is_some_and(|t| Instant::now() < t) {
            return;
        }
        let Some(space) = self.space.clone() else { return };
        let fp = space.fingerprint().unwrap_or_default();
        let ids = match self.store.stale(&fp, STEP) {
            Ok(ids) => ids,
            Err(e) => return self.fail(format!("reading media blocks to embed: {e}")),
        };
        if ids.is_empty() && space.fingerprint().is_some() {
            if self.status.write().reembed.take().is_some() {
                tracing::info!("media blocks embedded");
            }
            self.refresh_counts();
            return;
        }
        let mut blobs = Vec::new();
        for id in &ids {
            match self.store.data(id) {
                Ok(Some((mime, data))) => blobs.push((id.clone(), mime, data)),
                Ok(None) => {}
                Err(e) => return self.fail(format!("reading media block {id}: {e}")),
            }
        }
        if !ids.is_empty() && self.status.read().reembed.is_none() {
            let total = self
                .store
                .count()
                .unwrap_or(0)
                .saturating_sub(self.store.embedded(&fp).unwrap_or(0));
            tracing::info!(blocks = total, space = %space.space().model, "embedding media blocks in the background");
            self.status.write().reembed = Some((0, total.max(ids.len())));
        }
        self.filling = true;
        let mut space = space;
        let fut = async move {
            // Nothing stale but the dimension unknown: a probe text learns it.
            let res = if blobs.is_empty() {
                space.embed(&[Item::Text("probe")]).await.map(|_| Vec::new())
            } else {
                let items: Vec<Item<'_>> = blobs.iter().map(|(_, mime, data)| Item::Image { mime, data }).collect();
                space
                    .embed(&items)
                    .await
                    .map(|vs| blobs.iter().map(|(id, _, _)| id.clone()).zip(vs).collect::<Vec<_>>())
            };
            (space, res)
        };
        ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(fut).map(
            |(space, res): StepResult, host: &mut Host<Self>, ctx: &mut HostContext<Self>| {
                let me = host.inner();
                me.filling = false;
                me.after_step(space, res);
                host.notify(ctx, Fill);
            },
        ));
    }

    fn after_step(&mut self, learned: RemoteSpace, res: Result<Vec<(String, Vec<f32>)>, SpaceError>) {
        // A reconfiguration while the step ran: its result belongs to the old space.
        let same = self
            .space
            .as_ref()
            .is_some_and(|s| s.space().model == learned.space().model);
        if !same {
            return;
        }
        let vectors = match res {
            Ok(v) => v,
            Err(e) => return self.fail(e.to_string()),
        };
        self.space = Some(learned);
        let Some(fp) = self.fingerprint() else { return };
        for (id, v) in &vectors {
            if let Err(e) = self.store.put_vector(id, &fp, v) {
                return self.fail(format!("storing a media vector: {e}"));
            }
        }
        if let Some(index) = self.index.as_mut() {
            index.retain(|(id, _)| !vectors.iter().any(|(v, _)| v == id));
            index.extend(vectors.iter().cloned());
        }
        let mut s = self.status.write();
        s.last_error = None;
        if let Some((done, total)) = s.reembed.as_mut() {
            *done += vectors.len();
            *total = (*total).max(*done);
            tracing::info!(done = *done, total = *total, "media embedding progress");
        }
        drop(s);
        self.refresh_counts();
    }

    fn fail(&mut self, why: String) {
        self.filling = false;
        tracing::warn!("media embedding step failed, retrying in {}s: {why}", RETRY.as_secs());
        self.status.write().last_error = Some(why);
        self.quiet_until = Some(Instant::now() + RETRY);
    }
}

/// The `k` entries of `index` nearest to the unit vector `query` (dot product of unit
/// vectors = cosine), at least `min_score`, best first (ties by id).
pub fn rank(index: &[(String, Vec<f32>)], query: &[f32], k: usize, min_score: f32) -> Vec<(String, f32)> {
    let mut hits: Vec<(&str, f32)> = index
        .iter()
        .map(|(id, v)| (id.as_str(), crate::memory::embed::dot(query, v)))
        .filter(|(_, s)| *s >= min_score)
        .collect();
    // Only the best k need ordering.
    if hits.len() > k {
        hits.select_nth_unstable_by(k, |a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        hits.truncate(k);
    }
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    hits.into_iter().map(|(id, s)| (id.to_owned(), s)).collect()
}

impl KernelActor for MediaActor {
    const KIND: &'static str = "media";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        self.refresh_counts();
        ctx.run_interval(POLL, |host, ctx| host.notify(ctx, Fill));
        ctx.run_later(Duration::ZERO, |host, ctx| host.notify(ctx, Fill));
        if let (Some(bus), Some(config)) = (self.bus.clone(), self.settings.clone()) {
            // Changed settings are parked here and applied by the next tick (≤ 2 s).
            let pending = self.pending.clone();
            let mut rx = bus.subscribe_settings();
            ctx.spawn(actix::fut::wrap_future(async move {
                loop {
                    match rx.recv().await {
                        Ok(ev) => {
                            if ev.changed_setting().is_some_and(|(k, _)| MediaConfig::concerns(k))
                                && let Ok(Ok(s)) = config.send(crate::config::ReadSettings).await
                            {
                                *pending.lock() = Some(MediaConfig::read(&s));
                            }
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(_) => break,
                    }
                }
            }));
        }
    }
}

/// Look for blocks to embed (timer; also sent after each step).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Fill;

impl Handles<Fill> for MediaActor {
    type Reply = ();
    fn handle(&mut self, _: Fill, ctx: &mut HostContext<Self>) {
        let changed = self.pending.lock().take();
        if let Some(cfg) = changed {
            self.apply(cfg);
        }
        self.maybe_fill(ctx);
    }
}

/// Why the media tier could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum MediaTierError {
    /// The blocks' database failed.
    #[error(transparent)]
    Store(#[from] MemoryError),
    /// A block written a moment ago could not be read back.
    #[error("media block {0} vanished after its write")]
    Vanished(String),
    /// A digest the model wrote names no block (the catalog's text, naming it).
    #[error("{0}")]
    UnknownDigest(String),
}

/// Stores checked images as blocks; answers their metadata and whether each was new.
#[derive(Message)]
#[rtype(result = "Result<Vec<(MediaMeta, Put)>, MediaTierError>")]
pub struct StoreImages {
    pub images: Vec<Image>,
    pub source: String,
}

impl Handles<StoreImages> for MediaActor {
    type Reply = Result<Vec<(MediaMeta, Put)>, MediaTierError>;
    fn handle(&mut self, m: StoreImages, ctx: &mut HostContext<Self>) -> Self::Reply {
        let out = self.store_images(&m.images, &m.source);
        if out.is_ok() {
            ctx.run_later(Duration::ZERO, |host, ctx| host.notify(ctx, Fill));
        }
        out
    }
}

/// The bytes of some blocks (`mime`, data) by id; unknown ids are left out.
#[derive(Message)]
#[rtype(result = "HashMap<String, (String, Vec<u8>)>")]
pub struct LoadMedia(pub Vec<String>);

impl Handles<LoadMedia> for MediaActor {
    type Reply = actix::MessageResult<crate::host::Envelope<LoadMedia>>;
    fn handle(&mut self, LoadMedia(ids): LoadMedia, _: &mut HostContext<Self>) -> Self::Reply {
        let mut out = HashMap::new();
        for id in ids {
            match self.store.data(&id) {
                Ok(Some(d)) => {
                    out.insert(id, d);
                }
                Ok(None) => tracing::warn!(block = %id, "media block not found (deleted?): left out of the prompt"),
                Err(e) => tracing::warn!(block = %id, "media block could not be read: {e}"),
            }
        }
        actix::MessageResult(out)
    }
}

/// The newest blocks (no bytes) and the tier's status.
#[derive(Message)]
#[rtype(result = "Result<(Vec<MediaMeta>, MediaStatus), MediaTierError>")]
pub struct ListMedia {
    pub limit: usize,
    pub before_ms: Option<i64>,
}

impl Handles<ListMedia> for MediaActor {
    type Reply = Result<(Vec<MediaMeta>, MediaStatus), MediaTierError>;
    fn handle(&mut self, m: ListMedia, _: &mut HostContext<Self>) -> Self::Reply {
        self.refresh_counts();
        let list = self.store.list(m.limit, m.before_ms)?;
        Ok((list, self.status.read().clone()))
    }
}

/// One block's metadata, with its bytes when `data` (the one selected block).
#[derive(Message)]
#[rtype(result = "Result<Option<(MediaMeta, Option<Vec<u8>>)>, MediaTierError>")]
pub struct GetMedia {
    pub id: String,
    pub data: bool,
}

impl Handles<GetMedia> for MediaActor {
    type Reply = Result<Option<(MediaMeta, Option<Vec<u8>>)>, MediaTierError>;
    fn handle(&mut self, m: GetMedia, _: &mut HostContext<Self>) -> Self::Reply {
        let Some(meta) = self.store.meta(&m.id)? else {
            return Ok(None);
        };
        let data = if m.data {
            self.store.data(&m.id)?.map(|(_, d)| d)
        } else {
            None
        };
        Ok(Some((meta, data)))
    }
}

/// Deletes a block and its bytes; `false` when there was none.
#[derive(Message)]
#[rtype(result = "Result<bool, MediaTierError>")]
pub struct DeleteMedia(pub String);

impl Handles<DeleteMedia> for MediaActor {
    type Reply = Result<bool, MediaTierError>;
    fn handle(&mut self, DeleteMedia(id): DeleteMedia, _: &mut HostContext<Self>) -> Self::Reply {
        let gone = self.store.delete(&id)?;
        if gone {
            tracing::info!(block = %id, "media block deleted with its bytes");
            if let Some(index) = self.index.as_mut() {
                index.retain(|(i, _)| *i != id);
            }
            self.refresh_counts();
        }
        Ok(gone)
    }
}

/// Resolves the digests a model wrote (block ids or their 12 hex digits) and links
/// each block to `kind:target`. Any unknown digest refuses the whole call (nothing
/// linked), naming it.
#[derive(Message)]
#[rtype(result = "Result<Vec<String>, MediaTierError>")]
pub struct LinkDigests {
    pub digests: Vec<String>,
    pub kind: &'static str,
    pub targets: Vec<String>,
}

impl Handles<LinkDigests> for MediaActor {
    type Reply = Result<Vec<String>, MediaTierError>;
    fn handle(&mut self, m: LinkDigests, _: &mut HostContext<Self>) -> Self::Reply {
        let ids = self.resolve(&m.digests)?;
        let now = crate::clock::now_ms();
        for id in &ids {
            for t in &m.targets {
                self.store.link(id, m.kind, t, now)?;
            }
        }
        Ok(ids)
    }
}

impl MediaActor {
    /// Full ids of `digests`, or the i18n refusal naming the first unknown one.
    pub fn resolve(&self, digests: &[String]) -> Result<Vec<String>, MediaTierError> {
        let mut ids = Vec::new();
        for d in digests {
            match self.store.resolve(d)? {
                Some(id) if !ids.contains(&id) => ids.push(id),
                Some(_) => {}
                None => {
                    return Err(MediaTierError::UnknownDigest(
                        crate::i18n::Msg::MediaUnknownDigest {
                            digest: &d.chars().take(40).collect::<String>(),
                        }
                        .text(),
                    ));
                }
            }
        }
        Ok(ids)
    }
}

/// The blocks a text recalls: ranked in the active space, best first, with metadata.
#[derive(Message)]
#[rtype(result = "Vec<(MediaMeta, f32)>")]
pub struct RecallMedia {
    pub query: String,
    pub k: usize,
    pub min_score: f32,
}

impl Handles<RecallMedia> for MediaActor {
    type Reply = ResponseActFuture<Host<Self>, Vec<(MediaMeta, f32)>>;
    fn handle(&mut self, m: RecallMedia, _: &mut HostContext<Self>) -> Self::Reply {
        let Some(mut space) = self.space.clone().filter(|s| s.fingerprint().is_some()) else {
            return Box::pin(actix::fut::ready(Vec::new()));
        };
        let query = m.query.clone();
        let fut = async move { space.embed(&[Item::Text(&query)]).await };
        Box::pin(
            actix::fut::wrap_future::<_, Host<Self>>(fut).map(move |res, host: &mut Host<Self>, _| {
                let me = host.inner();
                let q = match res {
                    Ok(mut v) => v.pop().unwrap_or_default(),
                    Err(e) => {
                        tracing::warn!("media recall skipped: {e}");
                        return Vec::new();
                    }
                };
                if me
                    .fingerprint()
                    .is_some_and(|fp| !fp.ends_with(&format!("/{}", q.len())))
                {
                    tracing::warn!("media recall skipped: the query vector is not of the active space");
                    return Vec::new();
                }
                me.rank(&q, m.k, m.min_score)
                    .into_iter()
                    .filter_map(|(id, s)| me.store.meta(&id).ok().flatten().map(|meta| (meta, s)))
                    .collect()
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::check::{Limits, check, tests::png_2x3};
    use super::*;

    #[test]
    fn ranking_uses_the_active_space_vectors_only_and_respects_the_floor() {
        let mut a = MediaActor::new(MediaStore::open_in_memory().unwrap(), MediaConfig::defaults());
        let l = Limits {
            max_bytes: 1 << 20,
            max_count: 4,
        };
        let img = check(0, None, png_2x3(), &l).unwrap();
        let stored = a.store_images(&[img], "http").unwrap();
        let id = stored[0].0.id.clone();
        // No space: nothing is ranked.
        assert!(a.rank(&[1.0, 0.0], 2, 0.0).is_empty());
        a.store.put_vector(&id, "", &[1.0, 0.0]).unwrap();
        a.index = None;
        assert_eq!(a.rank(&[1.0, 0.0], 2, 0.5), vec![(id.clone(), 1.0)]);
        assert!(a.rank(&[0.0, 1.0], 2, 0.5).is_empty(), "below the floor");
    }

    #[test]
    fn unknown_digests_refuse_the_link() {
        let mut a = MediaActor::new(MediaStore::open_in_memory().unwrap(), MediaConfig::defaults());
        let l = Limits {
            max_bytes: 1 << 20,
            max_count: 4,
        };
        let id = a
            .store_images(&[check(0, None, png_2x3(), &l).unwrap()], "http")
            .unwrap()[0]
            .0
            .id
            .clone();
        assert_eq!(a.resolve(std::slice::from_ref(&id)).unwrap(), vec![id.clone()]);
        let e = a.resolve(&[id, "blk_media_ffffffffffff".into()]).unwrap_err();
        assert!(e.to_string().contains("blk_media_ffffffffffff"), "{e}");
    }
}
