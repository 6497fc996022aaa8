//! The owner's answers to risky calls (`firewall::approval`): `GET /api/v1/approvals`
//! lists the calls waiting for a yes, `POST /api/v1/approvals/{id}` answers one
//! (`{"allow": true|false}`). The WebUI's chat shows the same questions with buttons.

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::error::{ApiError, ErrorBody};

#[utoipa::path(get, path = "/api/v1/approvals", tag = "agent",
    responses((status = 200, description = "`{approvals: [{id, task_id, tool, summary, why, at_ms}]}`: the calls waiting for the owner, oldest first")))]
pub async fn list(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(json!({ "approvals": state.agent.deps.firewall.approvals.list() }))
}

/// Query of `GET /api/v1/approvals/audit`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// How many of the newest records (default 100, at most 1,000).
    pub limit: Option<usize>,
}

#[utoipa::path(get, path = "/api/v1/approvals/audit", tag = "agent", params(AuditQuery),
    responses((status = 200, description = "`{records: [{at_ms, id?, task_id, tool, summary, why, outcome}]}`, oldest first: every question, its answer (`allowed`, `denied`, `timed_out`) and every call a `never` rule refused (`refused_by_rule`), kept in DATA/audit/approvals.jsonl")))]
pub async fn audit(state: web::Data<AppState>, q: web::Query<AuditQuery>) -> HttpResponse {
    let n = q.limit.unwrap_or(100).min(1_000);
    HttpResponse::Ok().json(json!({ "records": state.agent.deps.firewall.audit.tail(n) }))
}

/// Body of `POST /api/v1/approvals/{id}`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// `true` runs the call, `false` refuses it.
    pub allow: bool,
}

#[utoipa::path(post, path = "/api/v1/approvals/{id}", tag = "agent",
    request_body = Answer,
    params(("id" = u64, Path, description = "the question's id")),
    responses((status = 200, description = "`{id, tool, allowed}`"),
        (status = 404, description = "No open question with that id (answered, timed out)", body = ErrorBody)))]
pub async fn answer(
    state: web::Data<AppState>,
    id: web::Path<u64>,
    body: web::Json<Answer>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let q = state
        .agent
        .deps
        .firewall
        .approvals
        .answer(id, body.allow)
        .map_err(|e| ApiError::not_found(e.to_string()))?;
    tracing::info!(id, tool = %q.tool, allowed = body.allow, "the owner answered an approval");
    Ok(HttpResponse::Ok().json(json!({ "id": id, "tool": q.tool, "allowed": body.allow })))
}
