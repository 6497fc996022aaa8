//! Handlers of `/healthz` and `/api/v1/*` (except the SSE stream, in `sse`).

use std::collections::BTreeMap;

use actix_web::{HttpResponse, web};
use homeagent_actors::ActorSnapshot;
use homeagent_actors::config::{GetSettings, UpdateSettings};
use homeagent_actors::supervisor::{RestartError, restart_actor};
use serde::Serialize;
use serde_json::Value;

use super::AppState;
use super::error::{ApiError, ErrorBody, config_error};

/// Body of `GET /healthz`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Health {
    /// `ok`: the process is up and serving. The kernel may still be booting behind it
    /// (`GET /readyz` tells); other routes wait for the boot.
    pub status: &'static str,
}

#[utoipa::path(get, path = "/healthz", tag = "daemon", responses((status = 200, body = Health)))]
pub async fn healthz() -> web::Json<Health> {
    // Answered from the HTTP worker alone, before and during the boot (`http::ready`).
    web::Json(Health { status: "ok" })
}

/// Body of `GET /api/v1/actors`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ActorsResponse {
    /// The whole supervision tree, parents before children, siblings in start order.
    pub actors: Vec<ActorSnapshot>,
}

#[utoipa::path(get, path = "/api/v1/actors", tag = "actors", responses((status = 200, body = ActorsResponse)))]
pub async fn actors(state: web::Data<AppState>) -> web::Json<ActorsResponse> {
    web::Json(ActorsResponse {
        actors: state.registry.snapshot(),
    })
}

/// Body of a successful restart.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Restarted {
    pub id: String,
    /// The actor's restart count including this restart.
    pub restarts: u64,
}

#[utoipa::path(
    post, path = "/api/v1/actors/{id}/restart", tag = "actors",
    params(("id" = String, Path, description = "Actor id, a path in the tree such as `kernel/config` (slashes not encoded)")),
    responses(
        (status = 200, body = Restarted),
        (status = 404, description = "No such actor", body = ErrorBody),
        (status = 409, description = "The actor cannot be restarted (the root) or a restart is in progress", body = ErrorBody),
        (status = 503, description = "Its supervisor is not running", body = ErrorBody),
    )
)]
pub async fn restart(state: web::Data<AppState>, id: web::Path<String>) -> Result<web::Json<Restarted>, ApiError> {
    let id = id.into_inner();
    match restart_actor(&state.registry, &id).await {
        Ok(restarts) => Ok(web::Json(Restarted { id, restarts })),
        Err(e @ RestartError::Unknown(_)) => Err(ApiError::not_found(e.to_string())),
        Err(e @ (RestartError::NotRestartable(_) | RestartError::Refused { .. })) => {
            Err(ApiError::conflict(e.to_string()))
        }
        Err(e @ RestartError::SupervisorDown { .. }) => Err(ApiError::unavailable(e.to_string())),
    }
}

/// Body of `GET /api/v1/settings` and `PUT /api/v1/settings`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Settings {
    /// Every setting, `core.*`, `webui.*` and `plugin.<name>.*`; secrets are masked.
    #[schema(value_type = Object)]
    pub settings: BTreeMap<String, Value>,
}

#[utoipa::path(get, path = "/api/v1/settings", tag = "settings", responses((status = 200, body = Settings), (status = 503, body = ErrorBody)))]
pub async fn get_settings(state: web::Data<AppState>) -> Result<web::Json<Settings>, ApiError> {
    let settings = state
        .config
        .send(GetSettings)
        .await?
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    Ok(web::Json(Settings { settings }))
}

/// Body of a successful `PUT /api/v1/settings`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Updated {
    /// The keys whose value changed (a value equal to the current one is not a change).
    pub changed: Vec<String>,
    /// The settings after the update (secrets masked).
    #[schema(value_type = Object)]
    pub settings: BTreeMap<String, Value>,
}

#[utoipa::path(
    put, path = "/api/v1/settings", tag = "settings",
    request_body(content = Object, description = "`{\"key\": value, ...}`; `null` deletes a value (a key with a default goes back to it). A secret sent as `********` (the mask it is listed with) stays unchanged. All or nothing."),
    responses(
        (status = 200, body = Updated),
        (status = 400, description = "Unknown key, wrong type or malformed JSON; nothing was written", body = ErrorBody),
        (status = 413, description = "Body over 64 KiB", body = ErrorBody),
        (status = 500, description = "The settings store failed (damaged or unwritable file); nothing was written", body = ErrorBody),
        (status = 507, description = "The disk is full; nothing was written: free space and send it again", body = ErrorBody),
    )
)]
pub async fn put_settings(
    state: web::Data<AppState>,
    body: web::Json<serde_json::Map<String, Value>>,
) -> Result<web::Json<Updated>, ApiError> {
    let updates: BTreeMap<String, Value> = body.into_inner().into_iter().collect();
    if updates.is_empty() {
        return Err(ApiError::bad_request(
            "empty update: send an object such as {\"core.daemon.log_level\": \"debug\"}",
        ));
    }
    // The page only has `********` for a secret: sent back, it means "unchanged".
    let updates = super::settings::unmask_update(&state, updates).await?;
    let changes = state
        .config
        .send(UpdateSettings(updates, homeagent_actors::config::Author::Owner))
        .await?
        .map_err(config_error)?;
    let settings = state
        .config
        .send(GetSettings)
        .await?
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    Ok(web::Json(Updated {
        changed: changes.into_iter().map(|c| c.key).collect(),
        settings,
    }))
}

/// JSON 404 for unknown API paths (the dashboard handles everything else).
pub async fn not_found(req: actix_web::HttpRequest) -> HttpResponse {
    HttpResponse::NotFound().json(ErrorBody {
        error: format!("no route {} {}; see GET /api/v1/openapi.json", req.method(), req.path()),
    })
}

/// A settings error as the HTTP edge answers it: 400 for the request's fault, 507 for
/// a full disk, 500 for any other failure of the store (issue 30: a full disk was a
/// 400, which tells a client to change a request that was fine).
#[utoipa::path(post, path = "/api/v1/daemon/restart", tag = "daemon",
    responses((status = 202, description = "`{restarting: true, service_manager: bool, message}`: the daemon stops gracefully and exits with 75; under its service unit (`homed service install`) it is started again, otherwise it stays stopped and the message says so")))]
pub async fn restart_daemon() -> HttpResponse {
    let managed = crate::service::restart_soon();
    let message = if managed {
        "homed stops gracefully and its service manager starts it again in a few seconds"
    } else {
        "homed stops gracefully; no service manager started it, so start it again yourself (or install it as a service: homed service install)"
    };
    HttpResponse::Accepted()
        .json(serde_json::json!({"restarting": true, "service_manager": managed, "message": message}))
}

/// `GET /metrics`: Prometheus / OpenMetrics text (see `crate::metrics`), behind the
/// owner's token like every route but the health checks.
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    let kernel = crate::metrics::Kernel {
        registry: &state.registry,
        agent: &state.agent,
        llm: &state.llm,
        usage: &state.usage,
    };
    let body = crate::metrics::render(kernel, &state.metrics).await;
    HttpResponse::Ok()
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .body(body)
}
