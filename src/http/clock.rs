//! The kernel's clock over HTTP: `GET /api/v1/clock` tells the time the kernel lives at;
//! `POST /api/v1/clock/advance` moves a virtual clock (`homed --virtual-clock`) forward,
//! running every heartbeat round that falls due on the way, in order, and telling the
//! subprocess plugins that follow the clock its time (their reminders due on the way
//! fire at their moments), before it answers.
//! On the wall clock the advance is refused (409): time there is the machine's.

use actix_web::{HttpResponse, web};
use homeagent_actors::clock;
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::error::{ApiError, ErrorBody};

#[utoipa::path(get, path = "/api/v1/clock", tag = "daemon",
    responses((status = 200, description = "`{now_ms, virtual, heartbeats: [name…]}`: the kernel's time, whether it is virtual, what an advance drives in its order at a moment (`plugins`, the subprocess plugins that follow the clock, then the heartbeats)")))]
pub async fn get_clock(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(json!({
        "now_ms": clock::now_ms(),
        "virtual": clock::is_virtual(),
        "heartbeats": state.beats.names(),
    }))
}

/// Body of `POST /api/v1/clock/advance`: exactly one of the two.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Advance {
    /// How far: a duration such as `90m`, `3d`, `2w` (days and weeks are 24 h and 7 d).
    pub by: Option<String>,
    /// Or where to: Unix milliseconds, not before now.
    pub to_ms: Option<i64>,
}

#[utoipa::path(post, path = "/api/v1/clock/advance", tag = "daemon",
    request_body = Advance,
    responses((status = 200, description = "`{now_ms, rounds: {heartbeat: n}, failed}`: the clock after the advance and the heartbeat rounds that ran on the way (`plugins`: the moments some plugin had something due, its reminders injected before this answer; `failed` counts a plugin that did not answer too)"),
        (status = 400, body = ErrorBody), (status = 409, description = "The daemon runs on the wall clock", body = ErrorBody)))]
pub async fn advance(state: web::Data<AppState>, body: web::Json<Advance>) -> Result<HttpResponse, ApiError> {
    if !clock::is_virtual() {
        return Err(ApiError::conflict(clock::ClockError::NotVirtual.to_string()));
    }
    let to_ms = match body.into_inner() {
        Advance {
            by: Some(by),
            to_ms: None,
        } => {
            let d = homeagent_actors::config::parse_duration(&by)
                .map_err(|e| ApiError::bad_request(format!("`by`: {e}")))?;
            clock::now_ms().saturating_add(d.as_millis() as i64)
        }
        Advance {
            by: None,
            to_ms: Some(t),
        } => t,
        _ => {
            return Err(ApiError::bad_request(
                "give exactly one of `by` (a duration such as \"3d\") and `to_ms` (Unix milliseconds)",
            ));
        }
    };
    let from = clock::now_ms();
    let mut last_log = std::time::Instant::now();
    let advanced = state
        .beats
        .advance(to_ms, |now| {
            // Long advances show progress in the log.
            if last_log.elapsed() >= std::time::Duration::from_secs(5) {
                last_log = std::time::Instant::now();
                let done = (now - from) as f64 / (to_ms - from).max(1) as f64;
                tracing::info!(now_ms = now, "virtual clock advancing: {:.0}% of the way", done * 100.0);
            }
        })
        .await
        .map_err(|e| match e {
            clock::ClockError::NotVirtual => ApiError::conflict(e.to_string()),
            clock::ClockError::Backwards { .. } => ApiError::bad_request(e.to_string()),
        })?;
    tracing::info!(from_ms = from, now_ms = advanced.now_ms, rounds = ?advanced.rounds, failed = advanced.failed, "virtual clock advanced");
    Ok(HttpResponse::Ok().json(advanced))
}
