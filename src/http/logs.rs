//! `GET /api/v1/logs`: the daemon's recent log lines (see [`crate::logring`]), filtered
//! by level and text, for the WebUI's live log view (it polls with `after`).
//!
//! Every line leaves through the firewall's secret mask, so a value that slipped into a
//! log message (a key in an error text, say) shows as its `@{alias}`, as in tool results.

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::error::ApiError;
use crate::logring::{DEFAULT_LIMIT, LogQuery};

/// Query of `GET /api/v1/logs`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LogsQuery {
    /// Minimum level: `error`, `warn`, `info`, `debug` or `trace` (default: all kept).
    pub level: Option<String>,
    /// Only lines whose module or text contains this (case-insensitive).
    pub q: Option<String>,
    /// Only lines after this `seq` (the `last_seq` of the previous answer).
    pub after: Option<u64>,
    /// At most this many lines, the newest (default and maximum 500).
    pub limit: Option<usize>,
}

#[utoipa::path(get, path = "/api/v1/logs", tag = "logs", params(LogsQuery),
    responses(
        (status = 200, description = "`{lines: [{seq, ts_ms, level, target, message}], last_seq}`, oldest first, secrets masked"),
        (status = 400, description = "unknown level or limit out of range", body = super::error::ErrorBody),
        (status = 503, description = "this process keeps no log ring", body = super::error::ErrorBody),
    ))]
pub async fn logs(state: web::Data<AppState>, q: web::Query<LogsQuery>) -> Result<HttpResponse, ApiError> {
    let q = q.into_inner();
    let level = match q.level.as_deref().map(str::trim).filter(|l| !l.is_empty()) {
        None => None,
        Some(l) => Some(l.parse::<tracing::Level>().map_err(|_| {
            ApiError::bad_request(format!(
                "unknown level `{l}`: use error, warn, info, debug or trace (or omit it for every line)"
            ))
        })?),
    };
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > DEFAULT_LIMIT {
        return Err(ApiError::bad_request(format!(
            "limit must be between 1 and {DEFAULT_LIMIT} (got {limit}); omit it for {DEFAULT_LIMIT}"
        )));
    }
    let Some(ring) = &state.logs else {
        return Err(ApiError::unavailable(
            "this daemon keeps no log in memory (logging was set up outside homed); read its stderr",
        ));
    };
    let (mut lines, last_seq) = ring.query(&LogQuery {
        after: q.after,
        level,
        q: q.q,
        limit,
    });
    let firewall = &state.agent.deps.firewall;
    for l in &mut lines {
        if let std::borrow::Cow::Owned(m) = firewall.mask(&l.message) {
            l.message = m;
        }
    }
    Ok(HttpResponse::Ok().json(json!({ "lines": lines, "last_seq": last_seq })))
}
