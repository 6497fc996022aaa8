//! `GET/PUT /api/v1/persona`: the owner reads and writes `DATA/personal/personal.md`
//! from the WebUI (the model's way is `persona_set`, which the owner confirms).

use actix_web::{HttpResponse, web};
use homeagent_actors::agent::persona::{Draft, PersonaError, PersonaFile};
use serde_json::json;

use super::{ApiError, AppState, ErrorBody};

fn file(state: &AppState) -> Result<std::sync::Arc<PersonaFile>, ApiError> {
    state
        .agent
        .deps
        .persona
        .clone()
        .ok_or_else(|| ApiError::unavailable("this daemon keeps no persona (no data directory)"))
}

fn persona_error(e: PersonaError) -> ApiError {
    match e {
        PersonaError::Write(_) => ApiError::new(actix_web::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        _ => ApiError::bad_request(e.to_string()),
    }
}

#[utoipa::path(get, path = "/api/v1/persona", tag = "agent",
    responses((status = 200, description = "`{text, set}`: the persona as the prompt carries it (`text` null and `set` false before the first run's persona is written)"),
        (status = 503, body = ErrorBody)))]
pub async fn get(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let f = file(&state)?;
    let text = web::block(move || f.text())
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    Ok(HttpResponse::Ok().json(json!({ "set": text.is_some(), "text": text.as_deref() })))
}

#[utoipa::path(put, path = "/api/v1/persona", tag = "agent",
    request_body(content = Object, description = "Either `{text}` (the whole persona as written) or any of `{name, address, tone}` with an optional `text` (rendered one line each)"),
    responses((status = 200, description = "`{text, set: true}`: written; the next turn's prompt carries it (the previous one is kept in `personal/history/`)"),
        (status = 400, description = "Empty, over 4,000 characters, or unknown fields", body = ErrorBody)))]
pub async fn put(state: web::Data<AppState>, body: web::Json<serde_json::Value>) -> Result<HttpResponse, ApiError> {
    let f = file(&state)?;
    // Only `text` renders as the owner's own words, as written.
    let text = Draft::from_args(&body)
        .and_then(|d| d.render())
        .map_err(persona_error)?;
    // The answer is what was written, as the prompt will carry it (trimmed); the file
    // is not read back on this thread.
    let shown = text.trim().to_owned();
    web::block(move || f.set(&text))
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?
        .map_err(persona_error)?;
    Ok(HttpResponse::Ok().json(json!({ "set": true, "text": shown })))
}
