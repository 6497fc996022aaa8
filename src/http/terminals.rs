//! The WebUI's terminal panel: the owner watches the terminal plugin's sessions and
//! types into them. Live output arrives on the event stream (`plugin_event`, topic
//! `terminal.output`); these routes list the sessions, fetch the scrollback a panel
//! starts from, and carry what the owner types.
//!
//! They call the plugin's own tools (`terminal_list`, `terminal_read` with an
//! `offset`, which never moves the model's read position, and `terminal_send`) rather
//! than a second way into the plugin, so the deny list, the caps and the errors are
//! the tools' own. The routes are owner-authenticated like all of `/api/v1`, so the
//! caller is the owner: the tool policy (`core.security.tool_deny`) still applies —
//! a terminal the owner denied to the model is closed to the panel too — and so does
//! the tool timeout (`core.agent.tool_timeout`), so a stuck plugin answers 504 instead
//! of holding the request.
//!
//! Why not through the tool runner: the panel is not a model call. The runner's other
//! steps are for the model's calls — the stage plugins see each call (they would see
//! the owner's keystrokes), results are masked and reviewed (this is the owner's own
//! screen), and approval asks the owner (who is the one typing).

use actix_web::{HttpResponse, web};
use homeagent_actors::stages::GetTools;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::error::{ApiError, ErrorBody};

/// Calls the terminal plugin's `tool` with `args`; its error text is the answer's.
async fn call(state: &AppState, tool: &str, args: Value) -> Result<String, ApiError> {
    state
        .agent
        .deps
        .firewall
        .check_tool(tool)
        .map_err(|refused| ApiError::new(actix_web::http::StatusCode::FORBIDDEN, refused.reason))?;
    let registry = state.agent.deps.stages.send(GetTools).await?;
    let handler = registry.get(tool).map(|t| t.handler.clone()).ok_or_else(|| {
        ApiError::unavailable(format!(
            "the terminal plugin is not running (no `{tool}` tool); enable or restart it on the plugins page"
        ))
    })?;
    tracing::debug!(%tool, "terminal panel call");
    let timeout = state.agent.deps.settings.read().tool_timeout;
    match tokio::time::timeout(timeout, handler.call(args)).await {
        Ok(answer) => answer.map_err(|e| ApiError::bad_request(e.to_string())),
        Err(_) => Err(ApiError::new(
            actix_web::http::StatusCode::GATEWAY_TIMEOUT,
            format!(
                "the terminal plugin did not answer `{tool}` within {} (core.agent.tool_timeout); try again, or restart it on the plugins page",
                homeagent_actors::config::format_duration(timeout)
            ),
        )),
    }
}

fn json_answer(text: &str) -> Result<HttpResponse, ApiError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| ApiError::unavailable(format!("the terminal plugin answered no JSON ({e}); update it")))?;
    Ok(HttpResponse::Ok().json(v))
}

#[utoipa::path(get, path = "/api/v1/terminals", tag = "terminals",
    responses(
        (status = 200, description = "`{\"sessions\": [{id, pid, command, cwd, rows, cols, started_ms, status, running, bytes, unread}]}`"),
        (status = 503, description = "The terminal plugin is not running", body = ErrorBody),
    ))]
pub async fn list(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    json_answer(&call(&state, "terminal_list", json!({})).await?)
}

/// Query of `GET /api/v1/terminals/{id}/output`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OutputQuery {
    /// Byte offset to read from (default 0: the oldest kept byte).
    pub offset: Option<u64>,
    /// At most this many bytes (default 65536, the tool's largest read).
    pub max_bytes: Option<u64>,
}

#[utoipa::path(get, path = "/api/v1/terminals/{id}/output", tag = "terminals",
    params(("id" = u32, Path, description = "Session number"), OutputQuery),
    responses(
        (status = 200, description = "`{session, status, offset, next, dropped, more, data}`: raw output (escape sequences kept) from `offset`; read again from `next` while `more` > 0. The model's read position does not move"),
        (status = 400, description = "No such session", body = ErrorBody),
    ))]
pub async fn output(
    state: web::Data<AppState>,
    id: web::Path<u32>,
    q: web::Query<OutputQuery>,
) -> Result<HttpResponse, ApiError> {
    let args = json!({
        "session": *id, "offset": q.offset.unwrap_or(0), "max_bytes": q.max_bytes.unwrap_or(64 * 1024),
        "format": "json", "ansi": true, "timeout_ms": 1,
    });
    json_answer(&call(&state, "terminal_read", args).await?)
}

/// Body of `POST /api/v1/terminals/{id}/input`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct Input {
    /// Bytes typed, as is (what xterm.js hands over: `\r` for Enter, escapes for keys).
    #[serde(default)]
    pub text: String,
    /// Named keys sent after `text` (`Enter`, `C-c`, ...).
    #[serde(default)]
    pub keys: Vec<String>,
}

#[utoipa::path(post, path = "/api/v1/terminals/{id}/input", tag = "terminals",
    params(("id" = u32, Path, description = "Session number")),
    request_body = Input,
    responses(
        (status = 200, description = "`{\"sent\": text}`: the plugin's answer"),
        (status = 400, description = "No such session, it ended, or the text is refused (the deny list)", body = ErrorBody),
        (status = 403, description = "The owner's tool policy denies terminal_send", body = ErrorBody),
    ))]
pub async fn input(
    state: web::Data<AppState>,
    id: web::Path<u32>,
    body: web::Json<Input>,
) -> Result<HttpResponse, ApiError> {
    let args = json!({"session": *id, "text": body.text, "keys": body.keys});
    let sent = call(&state, "terminal_send", args).await?;
    Ok(HttpResponse::Ok().json(json!({ "sent": sent })))
}
