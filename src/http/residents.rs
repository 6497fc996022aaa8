//! The residents' routes: `GET /api/v1/residents` (each with its queues),
//! `POST /api/v1/residents/{id}/restart` and `DELETE /api/v1/residents/{id}`.
//! The same control plane as the `resident_agents` tool (`agent::residents`).

use actix_web::web;
use homeagent_actors::agent::residents::Residual;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::AppState;
use super::error::{ApiError, ErrorBody};

/// Body of `GET /api/v1/residents`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ResidentsResponse {
    /// Every resident: id, actor subtree, owner, state, task, rounds, its scheduler's
    /// queues (`tasks`, as `GET /api/v1/tasks` shows the main agent's) and directory.
    #[schema(value_type = Vec<Object>)]
    pub residents: Vec<Value>,
    /// The `spawn_child` helpers still known: `{id, state (running|done|failed),
    /// delivered, task}` (a result is kept until 20 newer helpers ended).
    #[schema(value_type = Vec<Object>)]
    pub helpers: Vec<homeagent_actors::agent::children::core::ChildView>,
}

#[utoipa::path(get, path = "/api/v1/residents", tag = "agent", responses((status = 200, body = ResidentsResponse)))]
pub async fn list(state: web::Data<AppState>) -> web::Json<ResidentsResponse> {
    web::Json(ResidentsResponse {
        residents: state.agent.residents.list().await,
        helpers: state.agent.children.view(),
    })
}

fn known(state: &AppState, id: &str) -> Result<(), ApiError> {
    if state.agent.residents.is_live(id) {
        Ok(())
    } else {
        Err(ApiError::not_found(format!(
            "no resident `{id}`; GET /api/v1/residents lists them"
        )))
    }
}

/// Body of a successful restart.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Restarted {
    pub id: String,
    /// The subtree's restart count including this restart.
    pub restarts: u64,
}

#[utoipa::path(
    post, path = "/api/v1/residents/{id}/restart", tag = "agent",
    params(("id" = String, Path, description = "The resident's id")),
    responses((status = 200, body = Restarted), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody))
)]
pub async fn restart(state: web::Data<AppState>, id: web::Path<String>) -> Result<web::Json<Restarted>, ApiError> {
    let id = id.into_inner();
    known(&state, &id)?;
    let restarts = state
        .agent
        .residents
        .restart(&id)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    Ok(web::Json(Restarted { id, restarts }))
}

/// Query of `DELETE /api/v1/residents/{id}`.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DestroyQuery {
    /// `keep` (default): its waiting work goes back to the main agent's queue;
    /// `drop`: discarded, each item logged, waiting callers answered.
    pub residual: Option<String>,
}

/// Body of a successful destroy.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Destroyed {
    pub id: String,
    /// What happened, residual work included.
    pub message: String,
}

#[utoipa::path(
    delete, path = "/api/v1/residents/{id}", tag = "agent",
    params(("id" = String, Path, description = "The resident's id"), DestroyQuery),
    responses((status = 200, body = Destroyed), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody))
)]
pub async fn destroy(
    state: web::Data<AppState>,
    id: web::Path<String>,
    q: web::Query<DestroyQuery>,
) -> Result<web::Json<Destroyed>, ApiError> {
    let id = id.into_inner();
    known(&state, &id)?;
    let residual = Residual::parse(q.residual.as_deref());
    let message = state
        .agent
        .residents
        .destroy(&id, residual, false)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    Ok(web::Json(Destroyed { id, message }))
}
