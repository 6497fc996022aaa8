//! The inbox's dead-letter list: acknowledged inputs whose turn failed for good (an
//! LLM outage longer than `core.agent.outage_wait`, an error), kept with why until the
//! owner retries or discards them. `GET /api/v1/inbox/dead` lists them,
//! `POST /api/v1/inbox/dead/{id}/retry` runs one again (stored anew first),
//! `DELETE /api/v1/inbox/dead/{id}` drops one for good.

use actix_web::{HttpResponse, web};
use homeagent_actors::agent::inbox::InboxId;
use homeagent_actors::agent::intake::{ListDeadInputs, SettleDead};
use serde_json::json;

use super::AppState;
use super::error::{ApiError, ErrorBody};

/// Query of `GET /api/v1/inbox/dead`.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeadQuery {
    /// How many of the newest (default 100, at most 1,000).
    pub limit: Option<usize>,
}

#[utoipa::path(get, path = "/api/v1/inbox/dead", tag = "agent", params(DeadQuery),
    responses((status = 200, description = "`{dead: [{id, request_id, source, text, accepted_at_ms, starts, dead_at_ms, error}]}`, newest first: acknowledged inputs that failed for good, each with why"),
        (status = 503, body = ErrorBody)))]
pub async fn list(state: web::Data<AppState>, q: web::Query<DeadQuery>) -> Result<HttpResponse, ApiError> {
    let n = q.limit.unwrap_or(100).min(1_000);
    let dead = state
        .agent
        .event_loop
        .send(ListDeadInputs(n))
        .await?
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    Ok(HttpResponse::Ok().json(json!({ "dead": dead })))
}

async fn settle(state: &AppState, id: i64, retry: bool) -> Result<HttpResponse, ApiError> {
    let done = state
        .agent
        .event_loop
        .send(SettleDead { id: InboxId(id), retry })
        .await?
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    match done {
        None => Err(ApiError::not_found(format!(
            "no dead input {id}: it was retried or discarded already; GET /api/v1/inbox/dead lists them"
        ))),
        Some(a) if retry => Ok(HttpResponse::Accepted()
            .json(json!({ "id": id, "retried": true, "task_id": a.task_id, "input_id": a.input_id }))),
        Some(_) => Ok(HttpResponse::Ok().json(json!({ "id": id, "discarded": true }))),
    }
}

#[utoipa::path(post, path = "/api/v1/inbox/dead/{id}/retry", tag = "agent",
    params(("id" = i64, Path, description = "a dead input's id")),
    responses((status = 202, description = "`{id, retried, task_id, input_id}`: stored again as a new input (`input_id`) and queued"),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn retry(state: web::Data<AppState>, id: web::Path<i64>) -> Result<HttpResponse, ApiError> {
    settle(&state, id.into_inner(), true).await
}

#[utoipa::path(delete, path = "/api/v1/inbox/dead/{id}", tag = "agent",
    params(("id" = i64, Path, description = "a dead input's id")),
    responses((status = 200, description = "`{id, discarded}`"), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn discard(state: web::Data<AppState>, id: web::Path<i64>) -> Result<HttpResponse, ApiError> {
    settle(&state, id.into_inner(), false).await
}
