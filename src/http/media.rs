//! Images over HTTP: attachments of `POST /api/v1/messages` (JSON base64 or the
//! WebUI's multipart form), and the media blocks of the memory browser.
//!
//! Every attachment is checked whole (`memory::media::check`: magic bytes, header
//! dimensions, the size cap of `core.input_processing.image.max_bytes`) before anything
//! is stored; a refusal is a 400 naming the limit, with no event and no block left.
//! Stored images become media blocks (content ids: the same image twice is one block)
//! and the input carries their ids, not their bytes.

use actix_web::{HttpRequest, HttpResponse, web};
use homeagent_actors::memory::media::actor::{DeleteMedia, GetMedia, ListMedia, StoreImages};
use homeagent_actors::memory::media::check::{self, Attachment, Image, Limits, MediaError};
use homeagent_actors::memory::media::parts::MediaRef;
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::error::{ApiError, ErrorBody};

/// A refused image as the API answers it (400, naming the image and the limit).
pub(super) fn refused(e: MediaError) -> ApiError {
    ApiError::bad_request(e.to_string())
}

/// The limits of the settings as committed now: read from the settings actor, so a
/// `PUT /api/v1/settings` that answered applies to the very next message.
pub(super) async fn limits(state: &AppState) -> Result<Limits, ApiError> {
    let settings = state
        .config
        .send(homeagent_actors::config::ReadSettings)
        .await?
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    let c = homeagent_actors::config::MediaConfig::read(&settings);
    Ok(Limits {
        max_bytes: c.max_bytes,
        max_count: c.max_count,
    })
}

/// Checks a JSON message's attachments against the current limits (nothing stored).
pub(super) async fn check_attachments(state: &AppState, attachments: &[Attachment]) -> Result<Vec<Image>, ApiError> {
    if attachments.is_empty() {
        return Ok(Vec::new());
    }
    let limits = limits(state).await?;
    check::check_all(attachments, &limits).map_err(refused)
}

/// Stores checked images as media blocks; answers the references the input carries.
pub(super) async fn store(state: &AppState, source: &str, images: Vec<Image>) -> Result<Vec<MediaRef>, ApiError> {
    if images.is_empty() {
        return Ok(Vec::new());
    }
    let media = &state.media;
    let stored = media
        .addr
        .send(StoreImages {
            images,
            source: source.to_owned(),
        })
        .await?
        .map_err(|e| ApiError::unavailable(format!("the image could not be stored ({e}); nothing was sent, retry")))?;
    Ok(stored.iter().map(|(m, _)| MediaRef::from(m)).collect())
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// At most this many blocks (default 50, at most 500).
    pub limit: Option<usize>,
    /// Only blocks created before this time (Unix ms): the next page.
    pub before: Option<i64>,
}

#[utoipa::path(get, path = "/api/v1/memory/media", tag = "memory", params(ListQuery),
    responses((status = 200, description = "`{\"blocks\": [...], \"status\": {...}}`: the newest media blocks (no bytes) and the media tier (space, embedded count, re-embedding progress)"),
        (status = 503, body = ErrorBody)))]
pub async fn list(state: web::Data<AppState>, q: web::Query<ListQuery>) -> Result<HttpResponse, ApiError> {
    let media = &state.media;
    let (blocks, status) = media
        .addr
        .send(ListMedia {
            limit: q.limit.unwrap_or(50).clamp(1, 500),
            before_ms: q.before,
        })
        .await??;
    Ok(HttpResponse::Ok().json(json!({"blocks": blocks, "status": status})))
}

#[utoipa::path(get, path = "/api/v1/memory/media/{id}", tag = "memory",
    params(("id" = String, Path, description = "The block id, `blk_media_` and 12 hex digits")),
    responses((status = 200, description = "The block's metadata and links (no bytes)"), (status = 404, body = ErrorBody)))]
pub async fn get(state: web::Data<AppState>, id: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let (meta, _) = fetch(&state, &id, false).await?;
    Ok(HttpResponse::Ok().json(meta))
}

async fn fetch(
    state: &AppState,
    id: &str,
    data: bool,
) -> Result<(homeagent_actors::memory::media::store::MediaMeta, Option<Vec<u8>>), ApiError> {
    state
        .media
        .addr
        .send(GetMedia {
            id: id.to_owned(),
            data,
        })
        .await??
        .ok_or_else(|| ApiError::not_found(format!("no media block `{id}`; GET /api/v1/memory/media lists them")))
}

#[utoipa::path(get, path = "/api/v1/memory/media/{id}/data", tag = "memory",
    params(("id" = String, Path, description = "The block id")),
    responses((status = 200, description = "The image's bytes, with its sniffed type"), (status = 404, body = ErrorBody)))]
pub async fn data(state: web::Data<AppState>, id: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let (meta, bytes) = fetch(&state, &id, true).await?;
    let bytes = bytes.ok_or_else(|| ApiError::not_found(format!("media block `{id}` has no bytes")))?;
    // The type is the sniffed one (only PNG/JPEG/GIF/WebP are ever stored); the page
    // must not guess another, and nothing here is a document to run.
    Ok(HttpResponse::Ok()
        .content_type(meta.mime)
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .insert_header(("Content-Security-Policy", "default-src 'none'; sandbox"))
        .insert_header(("Cache-Control", "private, max-age=3600, immutable"))
        .body(bytes))
}

#[utoipa::path(delete, path = "/api/v1/memory/media/{id}", tag = "memory",
    params(("id" = String, Path, description = "The block id")),
    responses((status = 200, description = "`{\"deleted\": id}`: the block, its bytes, vector and links are gone"), (status = 404, body = ErrorBody)))]
pub async fn delete(
    state: web::Data<AppState>,
    id: web::Path<String>,
    _req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let gone = state.media.addr.send(DeleteMedia(id.to_string())).await??;
    if !gone {
        return Err(ApiError::not_found(format!("no media block `{id}`")));
    }
    Ok(HttpResponse::Ok().json(json!({"deleted": id.as_str()})))
}
