//! The firewall's state, as the security page shows it.

use actix_web::{HttpResponse, web};

use super::AppState;
use super::error::ApiError;

#[utoipa::path(get, path = "/api/v1/security", tag = "agent",
    responses((status = 200, description = "The firewall: tool allow/deny lists, sandbox roots, network switch, the names of the stored secrets (never their values), content review, and the most recent decisions (refusals, masked results, review findings by kind)")))]
pub async fn get_security(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(state.agent.deps.firewall.status()))
}
